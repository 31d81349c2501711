/* backend_cpu: the reference backend on the host processor.
 *
 * Clear code, fp32 accumulation, F16/BF16/Q8_0 weights dequantized on the fly, K/V kept in
 * fp32. Every row is computed independently of the others, with the same order of
 * operations whatever the batch holds, so a request's logits are bitwise the same alone
 * or in any batch. Work is spread over n_threads threads; SIMD paths (AVX-512 / AVX2,
 * chosen at run time) keep the per-row summation order fixed.
 */
#ifndef BG_BACKEND_CPU_H
#define BG_BACKEND_CPU_H

#include "backend.h"

/* The model must outlive the backend. kv_tokens == 0 in cfg means a pool of
 * min(n_ctx_train, 4096) * 4 tokens. */
enum bg_status backend_cpu_create(const struct model *m, const struct backend_config *cfg,
				  struct backend **out, struct bg_err *err);

/* A step profile: wall time by kind of work, summed over the forwards and sample calls
 * made while it is attached (bench/cpu_decode -P). Each matmul dispatch (a tp_run) is
 * split at the moment its prologue's last piece (activation quantization, the FFN's gated
 * activation) is done: pre_s before it, mm_s after it, with the weight bytes it read.
 * Everything of a forward outside the dispatches and attention runs on the calling thread
 * alone ("serial"): norms_s (RMSNorms), rope_kv_s (RoPE, K/V writes, biases, Q/K norms),
 * resid_s (residual adds, post-norms), and the rest (embedding, row moves, soft-cap) is
 * forward_s minus all the others. */
enum backend_cpu_mm {
	BACKEND_CPU_MM_QKV,
	BACKEND_CPU_MM_WO,
	BACKEND_CPU_MM_GATE_UP,
	BACKEND_CPU_MM_DOWN,
	BACKEND_CPU_MM_LM_HEAD,
	BACKEND_CPU_MM_N
};

struct backend_cpu_profile {
	uint64_t forwards, samples;
	uint64_t mm_calls[BACKEND_CPU_MM_N];
	double mm_pre_s[BACKEND_CPU_MM_N]; /* dispatch start to its prologue's end */
	double mm_s[BACKEND_CPU_MM_N];	   /* prologue's end to the dispatch's return */
	double mm_bytes[BACKEND_CPU_MM_N]; /* weight bytes the dispatches read */
	double attn_s;			   /* attention dispatches */
	double norms_s, rope_kv_s, resid_s;
	double forward_s; /* whole forwards, all of the above included */
	double sample_s;  /* whole sample calls */
};

/* Attaches p (counters are added to, never reset; NULL detaches). Off (the default), the
 * backend reads no clock. b must be a CPU backend. */
void backend_cpu_profile(struct backend *b, struct backend_cpu_profile *p);

/* Bytes of a matmul's first weights prefetched while memory idles in decode forwards (the
 * prologue of its dispatch, attention before attn_output; backend_cpu.c); 0 turns it off.
 * Values are unchanged either way. For benchmarks; the default is 512 KiB. */
void backend_cpu_prefetch(struct backend *b, size_t bytes);

#endif
