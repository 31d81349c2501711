/* sample: core/sample/sampler.c's definition of sampling, on the device, one block per row, so
 * that only the sampler_result structs cross to the host.
 *
 * The CPU sorts candidates by (value desc, id asc) and walks them. Here the same total
 * order is a 64-bit key per token: (order-preserving bits of the value) << 32 | ~id, so
 * "the first r candidates" is always a set {key >= K}. Every step becomes a threshold
 * on the key, found without sorting:
 *   top-k   radix select of the k-th largest key (exact: integer histograms);
 *   top-p   binary search for the largest K whose prefix mass {key >= K} is >= top_p;
 *   draw    binary search for the largest kept K whose prefix mass is > u * total.
 * Probabilities are computed as the CPU does (float expf(v - max), divided by a double
 * sum); sums are double, taken in a fixed tree order, so results are deterministic. They
 * differ from the CPU's sequential double sums by ~1e-16 relative, and CUDA's expf from
 * glibc's by <= 2 ulp: the sampled token can differ from the CPU's only when u * total
 * falls within that distance of a cumulative boundary. Greedy, top-n and log-probs
 * involve no such sum in a decision and match the CPU exactly (up to the last bit of
 * the log-prob, whose double log-sum-exp is summed in a different order).
 */
#include "gpu/gpu_ops.cuh"

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
__device__ double block_sum_d(double v, double *sh)
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

__device__ uint64_t block_max_u64(uint64_t v, uint64_t *sh)
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

__device__ float block_max_f(float v, float *sh)
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
__device__ uint64_t kth_largest_key(const float *v, int n, int k, int *hist, uint64_t *sh)
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

/* Mass of the tokens with key >= T among those with key >= cut (and, with min_p, prob
 * >= thr_p or the top token). */
__device__ double prefix_mass(const float *v, const float *pr, int n, uint64_t T, uint64_t top,
			      float thr_p, bool use_minp, double *shd)
{
	double s = 0.0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		uint64_t key = tok_key(v[i], i);
		if (key >= T && (!use_minp || key == top || !(pr[i] < thr_p)))
			s += (double)pr[i];
	}
	return block_sum_d(s, shd);
}

__global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_kernel(const float *logits, int n_vocab, const struct gpu_sample_row *rows,
		  const struct gpu_hist_entry *hist, float *work, struct sampler_result *out)
{
	__shared__ double shd[SAMPLE_WARPS + 1];
	__shared__ uint64_t shk[SAMPLE_WARPS + 1];
	__shared__ float shf[SAMPLE_WARPS + 1];
	__shared__ int shist[256];
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
			int k = (R.top_k > 0 && R.top_k < n) ? R.top_k : n;
			uint64_t cut = k < n ? kth_largest_key(v, n, k, shist, shk) : 0;
			uint64_t top = 0;
			for (int i = threadIdx.x; i < n; i += blockDim.x) {
				uint64_t key = tok_key(v[i], i);
				top = key > top ? key : top;
			}
			top = block_max_u64(top, shk);
			float vmax = v[key_id(top)];
			/* softmax over the kept candidates */
			double sum = 0.0;
			for (int i = threadIdx.x; i < n; i += blockDim.x) {
				float e = tok_key(v[i], i) >= cut ? expf(v[i] - vmax) : 0.0f;
				pr[i] = e;
				sum += e;
			}
			sum = block_sum_d(sum, shd);
			for (int i = threadIdx.x; i < n; i += blockDim.x)
				pr[i] = (float)(pr[i] / sum);
			__syncthreads();
			/* top-p: the smallest prefix with mass >= top_p */
			if (R.top_p < 1.0f) {
				uint64_t lo = cut, hi = top;
				if (prefix_mass(v, pr, n, lo, top, 0.0f, false, shd) >=
				    (double)R.top_p) {
					while (lo < hi) {
						uint64_t mid = lo + (hi - lo) / 2 + 1;
						if (prefix_mass(v, pr, n, mid, top, 0.0f, false,
								shd) >= (double)R.top_p)
							lo = mid;
						else
							hi = mid - 1;
					}
					cut = lo;
				}
			}
			bool use_minp = R.min_p > 0.0f;
			float thr_p = R.min_p * pr[key_id(top)];
			/* the draw: the first kept token whose cumulative mass exceeds u * total */
			double total = prefix_mass(v, pr, n, cut, top, thr_p, use_minp, shd);
			double target = (double)R.u * total;
			uint64_t lo = cut, hi = top;
			while (lo < hi) {
				uint64_t mid = lo + (hi - lo) / 2 + 1;
				if (prefix_mass(v, pr, n, mid, top, thr_p, use_minp, shd) > target)
					lo = mid;
				else
					hi = mid - 1;
			}
			token = key_id(lo);
			/* NaN or infinite logits make the masses NaN and the search end on key
			 * `cut` (0 without top-k: id -1); never hand back an id outside the
			 * vocabulary */
			if (token < 0 || token >= n)
				token = key_id(top);
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
