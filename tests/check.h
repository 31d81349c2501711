/* check: the test helper. Each test program counts its checks and ends with
 * `return check_summary();`, which prints "N passed, N failed" (the runner reads that
 * line) and returns nonzero when anything failed.
 *
 *   CHECK(cond, fmt, ...)           one check; prints file:line and the message on failure
 *   CHECK_NEAR(a, b, atol, rtol)    |a - b| <= atol + rtol * |b|
 *   CHECK_HAS(text, part, fmt, ...) text (may be NULL) contains part; the message says
 *                                   both, after fmt (the case being checked)
 *   check_shared(rel)               path of a file under ../shared (or $BG_SHARED), or NULL
 *                                   after printing a visible SKIP line; under CI=true a
 *                                   missing file is a failure, not a skip.
 *   check_read_file(path, &len)     a whole file in a malloc'd buffer (free it), or NULL
 */
#ifndef BG_TEST_CHECK_H
#define BG_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int check_n_pass, check_n_fail, check_n_skip;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (cond) {                                                                        \
			check_n_pass++;                                                            \
		} else {                                                                           \
			check_n_fail++;                                                            \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)

#define CHECK_NEAR(a, b, atol, rtol)                                                               \
	do {                                                                                       \
		double check_a_ = (a), check_b_ = (b);                                             \
		CHECK(fabs(check_a_ - check_b_) <= (atol) + (rtol)*fabs(check_b_),                 \
		      "%s = %.9g, %s = %.9g", #a, check_a_, #b, check_b_);                         \
	} while (0)

#define CHECK_HAS(text, part, ...)                                                                 \
	do {                                                                                       \
		const char *check_t_ = (text), *check_p_ = (part);                                 \
		char check_what_[512];                                                             \
		snprintf(check_what_, sizeof check_what_, __VA_ARGS__);                            \
		CHECK(check_t_ && strstr(check_t_, check_p_), "%s: '%s' lacks '%s'", check_what_, \
		      check_t_ ? check_t_ : "(null)", check_p_);                                   \
	} while (0)

static inline const char *check_shared(const char *rel)
{
	static char path[4096];
	const char *root = getenv("BG_SHARED");
	snprintf(path, sizeof path, "%s/%s", root ? root : "../shared", rel);
	if (access(path, R_OK) == 0)
		return path;
	const char *ci = getenv("CI");
	if (ci && strcmp(ci, "true") == 0) {
		check_n_fail++;
		fprintf(stderr, "FAIL: %s is missing (required in CI)\n", path);
	} else {
		check_n_skip++;
		fprintf(stderr, "SKIP: %s not found; tests that need it are skipped\n", path);
	}
	return NULL;
}

/* Reads the whole file at path into a malloc'd buffer of *len bytes plus a terminating
 * NUL (so text can be used as a string; binary callers ignore it). Returns NULL, with
 * *len = 0, when the file cannot be opened, sized or read in full. */
static inline void *check_read_file(const char *path, size_t *len)
{
	*len = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	long n = -1;
	if (fseek(f, 0, SEEK_END) == 0)
		n = ftell(f);
	char *buf = NULL;
	if (n >= 0 && fseek(f, 0, SEEK_SET) == 0)
		buf = (char *)malloc((size_t)n +
				     1); /* a cast: gpu_test_kernels.cu includes this as C++ */
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = '\0';
		*len = (size_t)n;
	}
	return buf;
}

static inline int check_summary(void)
{
	if (check_n_skip)
		printf("%d passed, %d failed, %d skipped\n", check_n_pass, check_n_fail,
		       check_n_skip);
	else
		printf("%d passed, %d failed\n", check_n_pass, check_n_fail);
	return check_n_fail ? 1 : 0;
}

#endif
