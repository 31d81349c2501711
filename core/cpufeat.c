/* cpufeat: see cpufeat.h. */
#include "cpufeat.h"

#include <pthread.h>
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* Straight from CPUID, with XGETBV for the OS's side, rather than __builtin_cpu_supports:
 * clang 14 does not know its "f16c" feature, and the same code must build with gcc and
 * clang. */
static uint64_t cpufeat_xgetbv0(void)
{
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

static struct cpufeat cpufeat_probe(void)
{
	struct cpufeat f = {false, false, false, false, false};
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return f;
	bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
	     f16c = c & (1u << 29);
	if (!osxsave || !avx)
		return f;
	uint64_t xcr0 = cpufeat_xgetbv0();
	if ((xcr0 & 0x6) != 0x6) /* XMM and YMM state */
		return f;
	if (__get_cpuid_max(0, NULL) < 7)
		return f;
	__cpuid_count(7, 0, a, b, c, d);
	f.avx2_fma_f16c = (b & (1u << 5)) && fma && f16c;
	f.avx512f = (b & (1u << 16)) && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM state */
	/* leaf 7.0 EBX: DQ bit 17, BW bit 30, VL bit 31 */
	f.avx512_dq_bw_vl = f.avx512f && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31));
	/* AVX-512 VNNI (ECX bit 11) with VL: its 256-bit forms; and BW, whose byte and word
	 * forms reach all 32 registers (qdot's tiles) */
	f.avx512vnni_bw_vl = f.avx512f && f.avx2_fma_f16c && (c & (1u << 11)) && (b & (1u << 31)) &&
			     (b & (1u << 30));
	__cpuid_count(7, 1, a, b, c, d);
	f.avxvnni = f.avx2_fma_f16c && (a & (1u << 4)); /* leaf 7.1 EAX bit 4 */
	return f;
}
#else
static struct cpufeat cpufeat_probe(void)
{
	return (struct cpufeat){false, false, false, false, false};
}
#endif

/* Written once, under pthread_once, before any caller reads it: the one answer. */
static struct cpufeat cpufeat_found;
static pthread_once_t cpufeat_once = PTHREAD_ONCE_INIT;

static void cpufeat_init(void)
{
	cpufeat_found = cpufeat_probe();
}

struct cpufeat cpufeat_get(void)
{
	pthread_once(&cpufeat_once, cpufeat_init);
	return cpufeat_found;
}
