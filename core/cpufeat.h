/* cpufeat: what the processor offers, with the OS's register state, for the run-time
 * choice of instruction set (the CPU backend's kernels, cpu/cpu_kernels.h and cpu/qdot.h;
 * the sampler's log-sum-exp, sample/sampler.h).
 *
 * Probed once a process, from CPUID and XGETBV (cpufeat.c says why not
 * __builtin_cpu_supports), on the first call from any thread; later calls return the same
 * answer. Every field is false on a processor other than x86 and where the OS does not save
 * the registers the extension needs (YMM for AVX2; opmask and ZMM for AVX-512).
 */
#ifndef BG_CPUFEAT_H
#define BG_CPUFEAT_H

#include <stdbool.h>

struct cpufeat {
	bool avx2_fma_f16c;    /* AVX2, FMA and F16C */
	bool avx512f;	       /* AVX-512F */
	bool avx512_dq_bw_vl;  /* AVX-512F with DQ, BW and VL */
	bool avx512vnni_bw_vl; /* AVX-512 VNNI with BW and VL (and AVX2, FMA, F16C) */
	bool avxvnni;	       /* AVX-VNNI (VEX-encoded), with AVX2, FMA, F16C */
};

/* This processor's features (thread-safe; never fails). */
struct cpufeat cpufeat_get(void);

#endif
