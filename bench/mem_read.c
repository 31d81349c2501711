/* mem_read: the machine's memory read bandwidth, STREAM-like, to judge how close B=1 decode
 * comes to streaming the weights at memory speed (issue 12).
 *
 *   mem_read [-t THREADS] [-m MIB] [-r REPS] [-H]
 *
 * One buffer of -m MiB (default 1024: far beyond any last-level cache), written once (so
 * that its pages exist), then -r passes (default 10) in which THREADS threads (default 2)
 * each read their contiguous slice with 512-bit (AVX-512) or 256-bit (AVX2) loads into
 * four independent accumulators, the way a matmul streams a weight matrix. Threads start
 * each pass together at a barrier and meet at another when done: a pass's time is the
 * slowest thread's (plus the barriers' microseconds). Prints the best
 * and the median pass in GB/s (10^9 bytes per second; STREAM reports the best). Read only:
 * no write traffic is counted or made during the passes. -H puts the buffer in memory advised
 * for transparent huge pages (2 MiB; madvise MADV_HUGEPAGE), as the CPU backend's copy of
 * the weights is (core/cpu/cpu_weights.h): the denominator for decode from that copy.
 *
 * Build: make build/bench/mem_read (or cc -O2 -pthread bench/mem_read.c -o mem_read) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

__attribute__((target("avx512f"))) static uint64_t read512(const unsigned char *p, size_t n)
{
	__m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
	for (size_t i = 0; i + 256 <= n; i += 256) {
		a0 = _mm512_xor_si512(a0, _mm512_load_si512((const void *)(p + i)));
		a1 = _mm512_xor_si512(a1, _mm512_load_si512((const void *)(p + i + 64)));
		a2 = _mm512_xor_si512(a2, _mm512_load_si512((const void *)(p + i + 128)));
		a3 = _mm512_xor_si512(a3, _mm512_load_si512((const void *)(p + i + 192)));
	}
	__m512i a = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
	return (uint64_t)_mm512_reduce_add_epi64(a);
}

__attribute__((target("avx2"))) static uint64_t read256(const unsigned char *p, size_t n)
{
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
	for (size_t i = 0; i + 128 <= n; i += 128) {
		a0 = _mm256_xor_si256(a0, _mm256_load_si256((const void *)(p + i)));
		a1 = _mm256_xor_si256(a1, _mm256_load_si256((const void *)(p + i + 32)));
		a2 = _mm256_xor_si256(a2, _mm256_load_si256((const void *)(p + i + 64)));
		a3 = _mm256_xor_si256(a3, _mm256_load_si256((const void *)(p + i + 96)));
	}
	__m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
	uint64_t r[4];
	_mm256_storeu_si256((__m256i *)r, a);
	return r[0] ^ r[1] ^ r[2] ^ r[3];
}

struct worker {
	const unsigned char *p; /* [n] this thread's slice */
	size_t n;
	int reps, wide;
	pthread_barrier_t *bar; /* every thread and main: one wait before a pass, one after */
	uint64_t sink;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	for (int r = 0; r < w->reps; r++) {
		pthread_barrier_wait(w->bar);
		w->sink += w->wide ? read512(w->p, w->n) : read256(w->p, w->n);
		pthread_barrier_wait(w->bar);
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int threads = 2, reps = 10, huge = 0;
	size_t mib = 1024;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-H")) {
			huge = 1;
			continue;
		}
		const char *v = i + 1 < argc ? argv[++i] : NULL; /* the option's value */
		if (v && !strcmp(a, "-t"))
			threads = atoi(v);
		else if (v && !strcmp(a, "-m"))
			mib = (size_t)atol(v);
		else if (v && !strcmp(a, "-r"))
			reps = atoi(v);
		else {
			fprintf(stderr, "usage: mem_read [-t THREADS] [-m MIB] [-r REPS] [-H]\n");
			return 2;
		}
	}
	if (threads < 1 || threads > 256 || reps < 1 || mib < 1) {
		fprintf(stderr, "mem_read: bad sizes\n");
		return 2;
	}
	__builtin_cpu_init();
	int wide = __builtin_cpu_supports("avx512f");
	if (!wide && !__builtin_cpu_supports("avx2")) {
		fprintf(stderr, "mem_read: needs AVX2\n");
		return 1;
	}
	size_t n = mib << 20, slice = n / (size_t)threads / 256 * 256;
	const size_t huge_page = (size_t)2 << 20;
	unsigned char *map = NULL, *buf;
	if (huge) {
		map = mmap(NULL, n + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		buf = map == MAP_FAILED ? NULL
					: (unsigned char *)(((uintptr_t)map + huge_page - 1) & ~(uintptr_t)(huge_page - 1));
		if (buf)
			(void)madvise(buf, n, MADV_HUGEPAGE);
	} else {
		buf = aligned_alloc(64, n);
	}
	if (!buf) {
		fprintf(stderr, "mem_read: out of memory\n");
		return 1;
	}
	memset(buf, 1, n);
	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, (unsigned)threads + 1);
	struct worker *ws = calloc((size_t)threads, sizeof *ws);
	pthread_t *tids = calloc((size_t)threads, sizeof *tids);
	double *gbs = calloc((size_t)reps, sizeof(double)); /* [reps] */
	for (int t = 0; t < threads; t++) {
		ws[t] = (struct worker){buf + (size_t)t * slice, slice, reps, wide, &bar, 0};
		pthread_create(&tids[t], NULL, work, &ws[t]);
	}
	for (int r = 0; r < reps; r++) {
		double t0 = now();
		pthread_barrier_wait(&bar);
		pthread_barrier_wait(&bar); /* the slowest thread has finished the pass */
		gbs[r] = (double)slice * threads / (now() - t0) * 1e-9;
	}
	uint64_t sink = 0;
	for (int t = 0; t < threads; t++) {
		pthread_join(tids[t], NULL);
		sink ^= ws[t].sink;
	}
	qsort(gbs, (size_t)reps, sizeof(double), cmp_double);
	printf("mem_read: %d threads, %zu MiB%s, %d passes, %s loads: best %.1f GB/s, median %.1f "
	       "GB/s (checksum %llx)\n",
	       threads, mib, huge ? " (huge pages advised)" : "", reps, wide ? "512-bit" : "256-bit",
	       gbs[reps - 1], gbs[reps / 2], (unsigned long long)sink);
	pthread_barrier_destroy(&bar);
	free(gbs);
	free(tids);
	free(ws);
	if (huge)
		munmap(map, n + huge_page);
	else
		free(buf);
	return 0;
}
