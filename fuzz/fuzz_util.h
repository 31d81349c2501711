/* fuzz_util: what the libFuzzer harnesses in fuzz/ share (fuzz/README.md).
 *
 * Each harness is one file fuzz/fuzz_NAME.c defining LLVMFuzzerTestOneInput (and, where it
 * loads vocabularies or models once, LLVMFuzzerInitialize). `make fuzz` builds them with
 * clang, -fsanitize=fuzzer,address,undefined, into build-fuzz/. A harness states its
 * oracles with FUZZ_CHECK: a violated oracle prints the reason and aborts, which libFuzzer
 * records as a crash with the reproducing input, like a sanitizer report.
 *
 * Oracles for defects fixed on another branch were first off behind a compile-time flag;
 * both fixes have landed (ids must be valid UTF-8; a NUL refuses the line), so both are
 * on by default (FUZZ_DEFS=-DFLAG=0 turns one off):
 *   FUZZ_EXACT_IDS  (issue 16 defect 1, issue 19's branch): the id read back from a
 *                   written result equals the request's id for every id, also one that
 *                   is not valid UTF-8. Off: checked for valid UTF-8 ids only.
 *   FUZZ_NUL_TEXT   (issue 16 defect 2): a prompt or stop string with \u0000 is kept
 *                   whole or refused, never cut at the NUL. Off: texts without NUL only.
 */
#ifndef BG_FUZZ_UTIL_H
#define BG_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FUZZ_EXACT_IDS
#define FUZZ_EXACT_IDS 1
#endif
#ifndef FUZZ_NUL_TEXT
#define FUZZ_NUL_TEXT 1
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond, ...)                                                                      \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FUZZ ORACLE FAILED %s:%d: %s: ", __FILE__, __LINE__,      \
				#cond);                                                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* Path of a file under ../shared (or $BG_SHARED), or NULL when it is not there. */
static inline const char *fuzz_shared(const char *rel, char *buf, size_t cap)
{
	const char *root = getenv("BG_SHARED");
	snprintf(buf, cap, "%s/%s", root ? root : "../shared", rel);
	return access(buf, R_OK) == 0 ? buf : NULL;
}

/* True when s[0, n) is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
static inline bool fuzz_utf8_valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;
	while (i < n) {
		unsigned c = u[i];
		size_t k;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			k = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i <= k) /* the sequence runs past the end */
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((u[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (u[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

/* A cursor over the fuzzer's bytes: small choices from the front, the rest as payload. */
struct fuzz_in {
	const uint8_t *p;
	size_t n;
};

static inline uint8_t fuzz_byte(struct fuzz_in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

/* The next piece of at most max bytes, up to a 0xff separator (consumed) or the end. */
static inline size_t fuzz_piece(struct fuzz_in *in, const char **s, size_t max)
{
	const uint8_t *e = memchr(in->p, 0xff, in->n < max ? in->n : max);
	size_t l = e ? (size_t)(e - in->p) : (in->n < max ? in->n : max);
	*s = (const char *)in->p;
	in->p += l + (e ? 1 : 0);
	in->n -= l + (e ? 1 : 0);
	return l;
}

#endif
