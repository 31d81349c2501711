/* lse_bench: the time of sampler_log_sum_exp_level at each instruction set level.
 *
 *   lse_bench [-n LOGITS] [-c CALLS] [-r ROUNDS]     defaults 32000, 500, 9
 *
 * A row of n logits like a model's (spread over ~30 nats, pseudo-random, fixed seed) stays
 * in cache; each round times CALLS calls at level 0 (generic), 1 (AVX2) and 2 (AVX-512)
 * in turn, so the levels share the machine's state. Prints per level the median, least
 * and largest us per call over the rounds, and the result's bits (the same at every level:
 * sampler.h). A level the processor lacks runs the next lower one (sampler.h).
 * bench/results/m12-2026-11-30.md has its first use.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample/sampler.h"

#define LSE_BENCH_MAX_ROUNDS 101

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int32_t n = 32000;
	int calls = 500, rounds = 9;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-n"))
			n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-c"))
			calls = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-r"))
			rounds = atoi(argv[i + 1]);
		else
			break;
	}
	if (argc % 2 == 0 || n < 1 || calls < 1 || rounds < 1 || rounds > LSE_BENCH_MAX_ROUNDS) {
		fprintf(stderr, "usage: lse_bench [-n LOGITS] [-c CALLS] [-r ROUNDS (<= %d)]\n",
			LSE_BENCH_MAX_ROUNDS);
		return 2;
	}
	float *l = malloc((size_t)n * sizeof *l);
	if (!l)
		return 1;
	uint64_t st = 1;
	for (int32_t i = 0; i < n; i++) {
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		l[i] = -20.0f + 30.0f * (float)(st >> 40) * (1.0f / 16777216.0f);
	}
	static double us[3][LSE_BENCH_MAX_ROUNDS];
	double res[3] = {0, 0, 0};
	volatile double sink = 0;
	for (int r = 0; r < rounds; r++) {
		for (int lvl = 0; lvl <= 2; lvl++) {
			double t0 = now_s();
			for (int c = 0; c < calls; c++)
				sink += res[lvl] = sampler_log_sum_exp_level(l, n, lvl);
			us[lvl][r] = (now_s() - t0) / calls * 1e6;
		}
	}
	static const char *name[3] = {"generic", "avx2", "avx512"};
	for (int lvl = 0; lvl <= 2; lvl++) {
		qsort(us[lvl], (size_t)rounds, sizeof us[lvl][0], cmp_double);
		uint64_t bits;
		memcpy(&bits, &res[lvl], sizeof bits);
		printf("level %d %-7s n %d: median %.1f us (min %.1f, max %.1f, %d rounds of %d) "
		       "lse %.17g bits %016llx\n",
		       lvl, name[lvl], n, us[lvl][rounds / 2], us[lvl][0], us[lvl][rounds - 1],
		       rounds, calls, res[lvl], (unsigned long long)bits);
	}
	free(l);
	return 0;
}
