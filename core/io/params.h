/* params: the one table of request parameters.
 *
 * Every parameter a request line may set (max_tokens, temperature, stop, ...) is one row
 * of params_table (params.c): its native field name, its name in an OpenAI body, its JSON
 * type, where it lives in struct request, its default (and OpenAI's, where that API
 * defines another), its allowed range, the `batchgen run` flag that changes its default,
 * and one line of help. From this table
 *  - the JSONL reader (io/jsonl_read) reads and validates the fields of both forms,
 *  - the command line (cli/options) takes its flags, their defaults and their help,
 *  - jsonl_defaults_init fills the defaults of native and of OpenAI lines,
 *  - tests/test_params checks that every row is documented in man/batchgen.1 and that
 *    every flag is in `batchgen --help`.
 * Adding a parameter is adding a row (and its field in struct request).
 *
 * Invariants: a default parses (params_set_text) and lies in its row's range, except the
 * documented special values below; names are unique per form; every scalar field of a
 * request that the table names is written by params_defaults.
 */
#ifndef BG_IO_PARAMS_H
#define BG_IO_PARAMS_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/request.h"

enum param_type {
	PARAM_INT,	/* int32_t in [lo, hi] */
	PARAM_NUM,	/* float in [lo, hi], or (lo, hi] when lo_open */
	PARAM_BOOL,	/* bool; as a flag, takes no argument and sets true */
	PARAM_TRIBOOL,	/* int: -1 = not given (the vocabulary decides), 0/1 = false/true */
	PARAM_LOGPROBS, /* int32_t: an integer in [lo, hi], or true (0) / false (-1); -1 = none */
	PARAM_SEED,	/* uint64_t: any integer, a negative one taken modulo 2^64 */
	PARAM_STOP,	/* char ** [count]: a string or an array of strings */
	PARAM_IDS,	/* int32_t * [count]: an array of token ids >= 0 */
};

/* Row flags. */
#define PARAM_NEG_OFF 1u /* PARAM_INT: a negative value means "disabled", stored as 0 */

struct param_def {
	const char *name;   /* field of a native line; NULL: OpenAI only */
	const char *openai; /* field of an OpenAI body read through this row; NULL: none
			     * (the endpoint's own code may still read a field of that name) */
	enum param_type type;
	size_t off;		/* offsetof(struct request, ...) of the value (or the list) */
	size_t off_n;		/* PARAM_STOP, PARAM_IDS: offsetof of the int32_t count */
	const char *def;	/* native default, as a flag would write it; NULL: none/empty */
	const char *openai_def; /* an OpenAI line's default when that API defines another */
	double lo, hi;		/* range (PARAM_INT, PARAM_NUM, PARAM_LOGPROBS) */
	bool lo_open;		/* PARAM_NUM: lo itself is out of range */
	unsigned flags;		/* PARAM_NEG_OFF */
	const char *cli;	/* `batchgen run` flag (without "--") changing the default */
	const char *meta;	/* the flag's argument placeholder; NULL: a flag without one */
	const char *help;	/* one line */
};

extern const struct param_def params_table[];
extern const size_t params_count;
#define PARAMS_MAX 64 /* room for params_count (checked by test_params) */

/* The row of a native field (by_openai false) or of an OpenAI body field; NULL if none. */
const struct param_def *params_find(const char *name, bool by_openai);

/* Writes every scalar row's default (OpenAI's where it differs, when openai) into r. List
 * rows (stop, stop_token_ids) are left alone. */
void params_defaults(struct request *r, bool openai);

/* Copies the value of scalar row p from src to dst. */
void params_copy(struct request *dst, const struct request *src, const struct param_def *p);

/* Sets scalar row p of r from text as a command-line flag writes it ("16", "0.7", "-1";
 * NULL for a PARAM_BOOL flag: true). false with one sentence in msg when the text is not
 * of the row's type or out of its range; r is then unchanged. */
bool params_set_text(struct request *r, const struct param_def *p, const char *text, char *msg,
		     size_t cap);

/* The documented special values (not in the row's range but valid as a default): an
 * OpenAI line's max_tokens default is PARAMS_TO_END. */
#define PARAMS_TO_END 0 /* max_tokens: until end-of-generation or the end of the context */

#endif
