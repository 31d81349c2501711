/* quant_util: what the tests of quantized blocks share (test_quant, test_cpu_kernels).
 * Header-only, static functions: each test program is one translation unit.
 *
 *   quant_util_half_fields(type)   byte offsets of a block's fp16 scale fields (d, and
 *                                  dmin / m where the type has them), -1 terminated,
 *                                  written from quant.h's layouts (not read from core/),
 *                                  so that random blocks can be given finite scales
 *   quant_util_put_iq1m_scale(blk, h)  IQ1_M's fp16 scale h, whose nibbles are the top
 *                                  nibbles of its 4 u16 scales (bytes 48..55)
 */
#ifndef BG_TEST_QUANT_UTIL_H
#define BG_TEST_QUANT_UTIL_H

#include "model/gguf.h"

static inline const int *quant_util_half_fields(enum gguf_dtype t)
{
	static const int d0[] = {0, -1}, dm[] = {0, 2, -1}, q2k[] = {80, 82, -1},
			 q3k[] = {108, -1}, q6k[] = {208, -1}, none[] = {-1};
	switch (t) {
	case GGUF_DTYPE_Q4_1:
	case GGUF_DTYPE_Q5_1:
	case GGUF_DTYPE_Q4_K:
	case GGUF_DTYPE_Q5_K: return dm;
	case GGUF_DTYPE_Q2_K: return q2k;
	case GGUF_DTYPE_Q3_K: return q3k;
	case GGUF_DTYPE_Q6_K: return q6k;
	case GGUF_DTYPE_MXFP4: return none; /* an e8m0 byte: any value is a scale */
	case GGUF_DTYPE_IQ1_M: return none; /* quant_util_put_iq1m_scale */
	default: return d0;
	}
}

static inline void quant_util_put_iq1m_scale(uint8_t *blk, uint16_t h)
{
	for (int k = 0; k < 4; k++)
		blk[48 + 2 * k + 1] =
		    (uint8_t)((blk[48 + 2 * k + 1] & 0x0f) | ((h >> (4 * k)) & 0xf) << 4);
}

#endif
