/* half: IEEE fp16 and bfloat16 conversions, portable C (no F16C needed).
 * Rounding to the narrow types is round-to-nearest-even; NaN stays NaN. */
#ifndef BG_HALF_H
#define BG_HALF_H

#include <stdint.h>
#include <string.h>

static inline float half_bits_to_f32(uint32_t bits)
{
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

static inline uint32_t half_f32_to_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static inline float half_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;
	if (exp == 0x1f) /* inf / nan */
		return half_bits_to_f32(sign | 0x7f800000u | (man << 13));
	if (exp == 0) {
		if (man == 0)
			return half_bits_to_f32(sign);
		/* subnormal: value = man * 2^-24 */
		float v = (float)man * (1.0f / 16777216.0f);
		return sign ? -v : v;
	}
	return half_bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t half_f32_to_f16(float f)
{
	uint32_t x = half_f32_to_bits(f);
	uint32_t sign = (x >> 16) & 0x8000;
	uint32_t ax = x & 0x7fffffffu;
	if (ax >= 0x7f800000u) /* inf / nan */
		return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
	if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
		return (uint16_t)(sign | 0x7c00);
	if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
		/* add 0.5 (as a float) so the FPU rounds the mantissa to nearest even */
		float v = half_bits_to_f32(ax) + 0.5f;
		return (uint16_t)(sign | (half_f32_to_bits(v) - 0x3f000000u));
	}
	uint32_t mant_odd = (ax >> 13) & 1;
	ax += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round */
	return (uint16_t)(sign | (ax >> 13));
}

static inline float half_bf16_to_f32(uint16_t h)
{
	return half_bits_to_f32((uint32_t)h << 16);
}

static inline uint16_t half_f32_to_bf16(float f)
{
	uint32_t x = half_f32_to_bits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u) /* nan: keep it quiet */
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

#endif
