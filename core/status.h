/* status: the error values every module returns.
 *
 * A function that can fail returns an enum bg_status and, when it fails, writes one
 * sentence into a caller-owned struct bg_err (which may be NULL). core/ never exits;
 * cli/ turns a status into a message and an exit code. A broken invariant (programmer
 * error) is not a status: BG_ASSERT aborts with file and line.
 */
#ifndef BG_STATUS_H
#define BG_STATUS_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

enum bg_status {
	BG_OK = 0,
	BG_ERR_IO,	    /* a file could not be opened, read, mapped or written */
	BG_ERR_FORMAT,	    /* malformed input: a GGUF file, a JSON line, ... */
	BG_ERR_UNSUPPORTED, /* well-formed but not supported (GGUF v1, unknown tensor type) */
	BG_ERR_INVALID,	    /* an argument or request that is impossible */
	BG_ERR_NOMEM,	    /* an allocation failed */
	BG_ERR_DEVICE,	    /* the compute device failed or is absent */
	BG_ERR_CAPACITY,    /* does not fit (KV pool, sequence length) */
};

#define BG_ERR_MSG 512

struct bg_err {
	enum bg_status status;
	char msg[BG_ERR_MSG];
};

/* Records status and a printf-style sentence in err (NULL-safe); returns status so that
 * callers can write `return bg_fail(err, BG_ERR_FORMAT, "...", ...)`. */
enum bg_status bg_fail(struct bg_err *err, enum bg_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* bg_fail for a module's own error helper: the sentence is prefix (NULL: none; a
 * location such as "grammar: line 3, column 7: ") followed by fmt formatted with ap. */
enum bg_status bg_failv(struct bg_err *err, enum bg_status status, const char *prefix,
			const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

/* A short fixed name for a status ("format error", ...). */
const char *bg_status_name(enum bg_status s);

#define BG_ASSERT(cond)                                                                            \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__,       \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#endif
