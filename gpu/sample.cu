/* sample: core/sample/sampler.c's definition of sampling, on the device: one launch for all
 * rows, one block per row, so that only the sampler_result structs cross to the host.
 *
 * The CPU sorts candidates by (value desc, id asc) and walks them. Here the same total
 * order is a 64-bit key per token: (order-preserving bits of the value) << 32 | ~id, so
 * "the first r candidates" is always a set {key >= K}, and every step is a threshold on
 * the key found by radix select, 8 bits a pass from the top (8 passes, no sorting):
 *   top-k   the k-th largest key, on counts;
 *   top-p   the largest K whose prefix mass {key >= K} reaches top_p * W, on masses;
 *   min-p   one max-reduction: the best key after the top whose e < min_p;
 *   draw    the largest kept K whose prefix mass exceeds u * total, on masses.
 * Probabilities and masses use core/sample/sampler_math.h's arithmetic (sampler_expf,
 * integer weights summed exactly in uint64, the same double comparisons), so the sampled
 * token is the CPU sampler's for the same logits and u, bit for bit, whatever the order of
 * the sums. About 20 passes over the row (28 with top-k) where the binary searches on the
 * key took ~130. Greedy is one argmax pass. The log-probs' double log-sum-exp is summed in
 * a tree order: the same value as the CPU's up to its last bits.
 *
 * No local memory: helpers are inlined, the per-row state is registers and __shared__; the
 * launch bounds ask for 2 blocks an SM (64 registers): with the block size alone, ptxas for
 * sm_90 aims at 4 (32 registers) and spills.
 */
#include "gpu/gpu_ops.cuh"

#define SAMPLER_MATH_DEVICE
#include "sample/sampler_math.h"

#define SAMPLE_THREADS 512
#define SAMPLE_WARPS   (SAMPLE_THREADS / 32)

__device__ __forceinline__ uint64_t tok_key(float v, int i)
{
	/* -0 and +0 compare equal on the CPU: give them one key so ties go to the lower id */
	uint32_t u = v == 0.0f ? 0u : __float_as_uint(v);
	uint32_t f = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
	return ((uint64_t)f << 32) | (uint32_t) ~(uint32_t)i;
}

__device__ __forceinline__ int key_id(uint64_t k)
{
	return (int)~(uint32_t)k;
}

/* Block-wide reductions; every thread gets the result. sh is reused, so each ends with
 * a barrier. */
__device__ __forceinline__ double block_sum_d(double v, double *sh)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	v = warp_sum_d(v);
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	if (warp == 0) {
		double w = lane < SAMPLE_WARPS ? sh[lane] : 0.0;
		w = warp_sum_d(w);
		if (lane == 0)
			sh[SAMPLE_WARPS] = w;
	}
	__syncthreads();
	double r = sh[SAMPLE_WARPS];
	__syncthreads();
	return r;
}

__device__ __forceinline__ uint64_t block_max_u64(uint64_t v, uint64_t *sh)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	for (int o = 16; o > 0; o >>= 1) {
		uint64_t w = __shfl_xor_sync(0xffffffffu, v, o);
		v = w > v ? w : v;
	}
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	if (warp == 0) {
		uint64_t w = lane < SAMPLE_WARPS ? sh[lane] : 0;
		for (int o = 16; o > 0; o >>= 1) {
			uint64_t x = __shfl_xor_sync(0xffffffffu, w, o);
			w = x > w ? x : w;
		}
		if (lane == 0)
			sh[SAMPLE_WARPS] = w;
	}
	__syncthreads();
	uint64_t r = sh[SAMPLE_WARPS];
	__syncthreads();
	return r;
}

__device__ __forceinline__ float block_max_f(float v, float *sh)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	v = warp_max(v);
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	if (warp == 0) {
		float w = lane < SAMPLE_WARPS ? sh[lane] : -INFINITY;
		w = warp_max(w);
		if (lane == 0)
			sh[SAMPLE_WARPS] = w;
	}
	__syncthreads();
	float r = sh[SAMPLE_WARPS];
	__syncthreads();
	return r;
}

/* The k-th largest key of v[0, n) (1 <= k <= n), 8 bits at a time from the top. */
__device__ __forceinline__ uint64_t kth_largest_key(const float *v, int n, int k, int *hist, uint64_t *sh)
{
	uint64_t prefix = 0, mask = 0;
	int remaining = k;
	for (int shift = 56; shift >= 0; shift -= 8) {
		for (int b = threadIdx.x; b < 256; b += blockDim.x)
			hist[b] = 0;
		__syncthreads();
		for (int i = threadIdx.x; i < n; i += blockDim.x) {
			uint64_t key = tok_key(v[i], i);
			if ((key & mask) == prefix)
				atomicAdd(&hist[(key >> shift) & 255], 1);
		}
		__syncthreads();
		if (threadIdx.x == 0) {
			int cum = 0, d = 255;
			for (; d > 0; d--) {
				if (cum + hist[d] >= remaining)
					break;
				cum += hist[d];
			}
			sh[0] = prefix | ((uint64_t)d << shift);
			sh[1] = (uint64_t)(remaining - cum);
		}
		__syncthreads();
		prefix = sh[0];
		remaining = (int)sh[1];
		mask |= (uint64_t)255 << shift;
		__syncthreads();
	}
	return prefix;
}

__device__ __forceinline__ uint64_t block_sum_u64(uint64_t v, uint64_t *sh)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	if (warp == 0) {
		uint64_t w = lane < SAMPLE_WARPS ? sh[lane] : 0;
		for (int o = 16; o > 0; o >>= 1)
			w += __shfl_xor_sync(0xffffffffu, w, o);
		if (lane == 0)
			sh[SAMPLE_WARPS] = w;
	}
	__syncthreads();
	uint64_t r = sh[SAMPLE_WARPS];
	__syncthreads();
	return r;
}

/* Radix select on mass: among the tokens with key >= lo, walking keys in descending order
 * with cum = the mass of the keys >= the current one, the first key with
 * (double)cum >= thr (strict == false) or (double)cum > thr (strict == true). Returns 0
 * when no key qualifies (every real key is > 0: its low half is ~id >= 2^31). Per pass,
 * a histogram of counts and masses by the next 8 bits; thread 0 walks it. e holds
 * e_i; a token's mass is sampler_weight(e_i). */
__device__ __forceinline__ uint64_t mass_select(const float *v, const float *e, int n, uint64_t lo,
						double thr, bool strict, int *hcnt,
						unsigned long long *hmass, uint64_t *sh)
{
	uint64_t prefix = 0, mask = 0, above = 0; /* above: mass of the keys over the bucket */
	for (int shift = 56; shift >= 0; shift -= 8) {
		for (int b = threadIdx.x; b < 256; b += blockDim.x) {
			hcnt[b] = 0;
			hmass[b] = 0;
		}
		__syncthreads();
		for (int i = threadIdx.x; i < n; i += blockDim.x) {
			uint64_t key = tok_key(v[i], i);
			if (key >= lo && (key & mask) == prefix) {
				int d = (int)(key >> shift) & 255;
				atomicAdd(&hcnt[d], 1);
				uint64_t w = sampler_weight(e[i]);
				if (w)
					atomicAdd(&hmass[d], (unsigned long long)w);
			}
		}
		__syncthreads();
		if (threadIdx.x == 0) {
			int d = 255, found = 0;
			for (; d >= 0; d--) {
				if (hcnt[d] == 0)
					continue;
				double c = (double)(above + hmass[d]);
				if (strict ? c > thr : c >= thr) {
					found = 1;
					break;
				}
				above += hmass[d];
			}
			sh[0] = prefix | ((uint64_t)(found ? d : 0) << shift);
			sh[1] = above;
			sh[2] = (uint64_t)found;
		}
		__syncthreads();
		prefix = sh[0];
		above = sh[1];
		bool found = sh[2] != 0;
		__syncthreads();
		if (!found)
			return 0; /* only at the top byte: below it the chosen bucket qualifies */
		mask |= (uint64_t)255 << shift;
	}
	return prefix;
}

__global__ void __launch_bounds__(SAMPLE_THREADS, 2)
    sample_kernel(const float *logits, int n_vocab, const struct gpu_sample_row *rows,
		  const struct gpu_hist_entry *hist, float *work, struct sampler_result *out)
{
	__shared__ double shd[SAMPLE_WARPS + 1];
	__shared__ uint64_t shk[SAMPLE_WARPS + 1];
	__shared__ float shf[SAMPLE_WARPS + 1];
	__shared__ int shist[256];
	__shared__ unsigned long long shm[256];
	const struct gpu_sample_row R = rows[blockIdx.x];
	const float *lg = logits + (int64_t)R.logits_row * n_vocab;
	float *v = work + (int64_t)blockIdx.x * 2 * n_vocab; /* [n_vocab] penalized / T */
	float *pr = v + n_vocab;			     /* [n_vocab] probabilities */
	struct sampler_result *o = out + blockIdx.x;
	const int n = n_vocab;

	/* 1. log-sum-exp of the raw logits, in double like the CPU */
	float mx = -INFINITY;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		mx = fmaxf(mx, lg[i]);
	mx = block_max_f(mx, shf);
	double s = 0.0;
	if (mx != -INFINITY)
		for (int i = threadIdx.x; i < n; i += blockDim.x)
			s += exp((double)lg[i] - (double)mx);
	s = block_sum_d(s, shd);
	const double lse = mx == -INFINITY ? -INFINITY : (double)mx + log(s);

	/* 2. top-n alternatives: n rounds of "best key below the previous one" */
	int n_top = min(min(R.n_top, SAMPLER_MAX_TOP), n);
	if (n_top < 0)
		n_top = 0;
	uint64_t prev = ~(uint64_t)0;
	for (int j = 0; j < n_top; j++) {
		uint64_t best = 0;
		for (int i = threadIdx.x; i < n; i += blockDim.x) {
			uint64_t key = tok_key(lg[i], i);
			if (key < prev && key > best)
				best = key;
		}
		best = block_max_u64(best, shk);
		if (threadIdx.x == 0) {
			int id = key_id(best);
			o->top_ids[j] = id;
			o->top_logprobs[j] = (float)((double)lg[id] - lse);
		}
		prev = best;
	}

	/* 3. the token */
	int token;
	if (R.forced >= 0) {
		token = R.forced;
	} else {
		for (int i = threadIdx.x; i < n; i += blockDim.x)
			v[i] = lg[i];
		__syncthreads();
		/* penalties, in the CPU's order; history ids are distinct, so no two threads
		 * touch the same element */
		for (int e = threadIdx.x; e < R.hist_n; e += blockDim.x) {
			struct gpu_hist_entry h = hist[R.hist_off + e];
			if (h.id < 0 || h.id >= n || h.cnt == 0)
				continue;
			int n_out = h.cnt >> 1;
			float x = v[h.id];
			/* __fmul_rn: nvcc would contract x * rep - pres and x - n_out * freq
			 * into FMAs (one rounding less than the CPU's separate operations) */
			if (R.rep != 1.0f && R.rep > 0.0f)
				x = x > 0.0f ? x / R.rep : __fmul_rn(x, R.rep);
			if (n_out > 0) {
				if (R.pres != 0.0f)
					x -= R.pres;
				if (R.freq != 0.0f)
					x -= __fmul_rn((float)n_out, R.freq);
			}
			v[h.id] = x;
		}
		__syncthreads();
		if (!(R.temperature > 0.0f)) {
			uint64_t best = 0;
			for (int i = threadIdx.x; i < n; i += blockDim.x) {
				uint64_t key = tok_key(v[i], i);
				best = key > best ? key : best;
			}
			token = key_id(block_max_u64(best, shk));
		} else {
			for (int i = threadIdx.x; i < n; i += blockDim.x)
				v[i] /= R.temperature;
			__syncthreads();
			/* top-k: keys >= lo stay */
			int k = (R.top_k > 0 && R.top_k < n) ? R.top_k : n;
			uint64_t lo = k < n ? kth_largest_key(v, n, k, shist, shk) : 0;
			uint64_t top = 0;
			for (int i = threadIdx.x; i < n; i += blockDim.x) {
				uint64_t key = tok_key(v[i], i);
				top = key > top ? key : top;
			}
			top = block_max_u64(top, shk);
			const float vmax = v[key_id(top)];
			/* e and the kept mass W (the dropped weigh 0) */
			uint64_t W = 0;
			for (int i = threadIdx.x; i < n; i += blockDim.x) {
				float ei = tok_key(v[i], i) >= lo ? sampler_expf(v[i] - vmax) : 0.0f;
				pr[i] = ei;
				W += sampler_weight(ei);
			}
			W = block_sum_u64(W, shk); /* its barriers also publish pr[] */
			/* top-p: the smallest prefix whose mass reaches top_p * W */
			if (R.top_p < 1.0f) {
				uint64_t K = mass_select(v, pr, n, lo, (double)R.top_p * (double)W,
							 false, shist, shm, shk);
				if (K)
					lo = K;
			}
			/* min-p: drop from the first candidate after the best whose e < min_p */
			if (R.min_p > 0.0f) {
				uint64_t first = 0;
				for (int i = threadIdx.x; i < n; i += blockDim.x) {
					uint64_t key = tok_key(v[i], i);
					if (key >= lo && key != top && pr[i] < R.min_p && key > first)
						first = key;
				}
				first = block_max_u64(first, shk);
				if (first)
					lo = first + 1;
			}
			/* the draw: the first kept key whose prefix mass exceeds u * total */
			uint64_t total = 0;
			for (int i = threadIdx.x; i < n; i += blockDim.x)
				if (tok_key(v[i], i) >= lo)
					total += sampler_weight(pr[i]);
			total = block_sum_u64(total, shk);
			uint64_t K = 0;
			if (total > 0)
				K = mass_select(v, pr, n, lo, (double)R.u * (double)total, true, shist,
						shm, shk);
			/* total == 0 (NaN or infinite logits): the best candidate, as the CPU */
			token = K ? key_id(K) : key_id(top);
			if (token < 0 || token >= n)
				token = 0;
		}
	}
	if (threadIdx.x == 0) {
		o->token = token;
		o->logprob =
		    (token >= 0 && token < n) ? (float)((double)lg[token] - lse) : -INFINITY;
		o->n_top = n_top;
	}
}

size_t gpu_sample_work_floats(int n_rows, int n_vocab)
{
	return (size_t)n_rows * 2 * (size_t)n_vocab;
}

cudaError_t gpu_sample(const float *logits, int n_vocab, const struct gpu_sample_row *rows,
		       int n_rows, const struct gpu_hist_entry *hist, float *work,
		       struct sampler_result *out, cudaStream_t stream)
{
	if (n_rows <= 0)
		return cudaSuccess;
	sample_kernel<<<n_rows, SAMPLE_THREADS, 0, stream>>>(logits, n_vocab, rows, hist, work,
							     out);
	return cudaGetLastError();
}
