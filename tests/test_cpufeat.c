/* test_cpufeat: the CPUID + XGETBV probe against the compiler's own (libgcc's or
 * compiler-rt's __builtin_cpu_supports, which reads CPUID and XGETBV by its own code), and
 * the one answer seen from several threads. Features clang 14's builtin does not know
 * (F16C, the VNNI forms) are checked only for what implies them. */
#include <pthread.h>

#include "cpufeat.h"
#include "check.h"

#define N_THREADS 4

static void *probe_thread(void *out)
{
	*(struct cpufeat *)out = cpufeat_get();
	return NULL;
}

int main(void)
{
	struct cpufeat f = cpufeat_get();
#if defined(__x86_64__) || defined(__i386__)
	__builtin_cpu_init();
	bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	bool f512 = __builtin_cpu_supports("avx512f");
	bool dbv = f512 && __builtin_cpu_supports("avx512dq") &&
		   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
	printf("cpufeat: avx2_fma_f16c %d avx512f %d avx512_dq_bw_vl %d avx512vnni_bw_vl %d "
	       "avxvnni %d\n",
	       f.avx2_fma_f16c, f.avx512f, f.avx512_dq_bw_vl, f.avx512vnni_bw_vl, f.avxvnni);
	/* every AVX2 processor has F16C; the builtin's "f16c" is unknown to clang 14 */
	CHECK(f.avx2_fma_f16c == avx2, "AVX2 + FMA: probe %d, builtin %d", f.avx2_fma_f16c, avx2);
	CHECK(f.avx512f == f512, "AVX-512F: probe %d, builtin %d", f.avx512f, f512);
	CHECK(f.avx512_dq_bw_vl == dbv, "AVX-512 F/DQ/BW/VL: probe %d, builtin %d",
	      f.avx512_dq_bw_vl, dbv);
	CHECK(!f.avx512vnni_bw_vl || (dbv && f.avx2_fma_f16c), "AVX-512 VNNI implies BW, VL, AVX2");
	CHECK(!f.avxvnni || f.avx2_fma_f16c, "AVX-VNNI implies AVX2");
#else
	CHECK(!f.avx2_fma_f16c && !f.avx512f && !f.avx512_dq_bw_vl && !f.avx512vnni_bw_vl &&
		  !f.avxvnni,
	      "no x86 feature off x86");
#endif
	/* the first call from each of several threads at once: the same answer */
	pthread_t th[N_THREADS];
	struct cpufeat got[N_THREADS];
	for (int i = 0; i < N_THREADS; i++)
		CHECK(pthread_create(&th[i], NULL, probe_thread, &got[i]) == 0, "thread %d", i);
	for (int i = 0; i < N_THREADS; i++) {
		pthread_join(th[i], NULL);
		CHECK(memcmp(&got[i], &f, sizeof f) == 0, "thread %d's answer differs", i);
	}
	return check_summary();
}
