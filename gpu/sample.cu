/* sample: core/sample/sampler.c's definition of sampling, on the device: one launch for all
 * rows, one block per row, so that only the sampler_result structs cross to the host.
 *
 * The CPU sorts candidates by (value desc, id asc) and walks them. Here the same total
 * order is a 64-bit key per token: (order-preserving bits of the value) << 32 | ~id, so
 * "the first r candidates" is always a set {key >= K}. Every decision (the top-k cut, the
 * top-p cut, the min-p cut, the draw) is "the first token in key order where a count or a
 * cumulative mass passes a threshold". Probabilities and masses use
 * core/sample/sampler_math.h's arithmetic (sampler_expf, integer weights summed exactly in
 * uint64, the same double comparisons), so the sampled token is the CPU sampler's for the
 * same logits and u, bit for bit, whatever the order of the sums.
 *
 * Passes over the row of logits (4 bytes a token each; v_i, the penalized logit over T, is
 * recomputed from the logit, with the penalized ids read from a bitmap and a sparse array):
 *   1. max of the logits (for the log-probs) and the best key (greedy's token, sampling's
 *      max);
 *   2. the log-sum-exp's double sum; when sampling, a histogram of the tokens by bucket
 *      (v's distance below the max in steps of 1/16) with counts, exact masses and
 *      whether the bucket holds a token below min_p;
 *   3. (sampling) compaction of the tokens of the few buckets where a decision can fall
 *      (found from the histogram, with bounds where one decision depends on another) into
 *      shared memory, where they are sorted and every decision is finished exactly.
 * When those buckets hold more than SAMPLE_CAP tokens (a flat row), or for NaN or
 * infinite values, the row takes the full-row path instead: radix select on the key, 8
 * bits a pass (~100 bytes a token read or written, ~130 with top-k, against 12.5 for the
 * three passes). Greedy reads the row twice.
 * The log-probs' log-sum-exp has the CPU's terms (sampler_expf, bitwise) summed in double
 * in a tree order: the same value as the CPU's up to the double's last bit.
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
#define SAMPLE_NB      512   /* buckets of pass 2 */
#define SAMPLE_BSCALE  16.0f /* buckets per unit of v: 512 / 16 = 32 > ln(2^32) = 22.2 */
#define SAMPLE_CAP     2048  /* the most candidates finished in shared memory */
#define SAMPLE_ITEMS   (SAMPLE_CAP / SAMPLE_THREADS)
#define SAMPLE_NONE    0x7fffffff

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

/* The value of a key (+0 for a key of -0: the same e) */
__device__ __forceinline__ float key_value(uint64_t k)
{
	uint32_t f = (uint32_t)(k >> 32);
	return __uint_as_float((f & 0x80000000u) ? (f & 0x7fffffffu) : ~f);
}

/* The bucket of pass 2: v's distance below vmax in steps of 1 / SAMPLE_BSCALE (exact: a
 * power of two), the last bucket for 32 or more below (weight 0: e < 2^-46), -inf and
 * NaN. Non-increasing in v, so each bucket is a run of the key order. */
__device__ __forceinline__ int v_bucket(float v, float vmax)
{
	float d = vmax - v;
	return d < SAMPLE_NB / SAMPLE_BSCALE ? (int)(d * SAMPLE_BSCALE) : SAMPLE_NB - 1;
}

/* The CPU's penalties on logit x of a token with history count cnt (sampler.c) */
__device__ __forceinline__ float penalize(float x, int cnt, const struct gpu_sample_row &R)
{
	int n_out = cnt >> 1;
	/* __fmul_rn: nvcc would contract x * rep - pres and x - n_out * freq into FMAs (one
	 * rounding less than the CPU's separate operations) */
	if (R.rep != 1.0f && R.rep > 0.0f)
		x = x > 0.0f ? x / R.rep : __fmul_rn(x, R.rep);
	if (n_out > 0) {
		if (R.pres != 0.0f)
			x -= R.pres;
		if (R.freq != 0.0f)
			x -= __fmul_rn((float)n_out, R.freq);
	}
	return x;
}

/* v_i: vpen[i] where bit i of pen is set (a penalized token), else the logit; over the
 * temperature when temp > 0 (sampling), as the CPU divides after the penalties. */
__device__ __forceinline__ float row_value(const float *lg, const float *vpen, const uint32_t *pen,
					   int i, float temp)
{
	if ((pen[i >> 5] >> (i & 31)) & 1u)
		return vpen[i];
	return temp > 0.0f ? lg[i] / temp : lg[i];
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

/* Exclusive prefix sum of the threads' t in thread order; sh holds SAMPLE_WARPS values. */
__device__ __forceinline__ uint64_t block_excl_scan_u64(uint64_t t, uint64_t *sh)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	uint64_t x = t;
	for (int o = 1; o < 32; o <<= 1) {
		uint64_t y = __shfl_sync(0xffffffffu, x, (lane - o) & 31);
		if (lane >= o)
			x += y;
	}
	if (lane == 31)
		sh[warp] = x;
	__syncthreads();
	if (warp == 0) {
		uint64_t y = lane < SAMPLE_WARPS ? sh[lane] : 0;
		for (int o = 1; o < 32; o <<= 1) {
			uint64_t z = __shfl_sync(0xffffffffu, y, (lane - o) & 31);
			if (lane >= o)
				y += z;
		}
		if (lane < SAMPLE_WARPS)
			sh[lane] = y;
	}
	__syncthreads();
	uint64_t r = (warp ? sh[warp - 1] : 0) + x - t;
	__syncthreads();
	return r;
}

/* The compacted path's scalars, from one thread to the block. */
struct sample_plan {
	unsigned long long W; /* the top-k-kept mass, when known from the histogram */
	int k;		      /* top-k's count (n without top-k) */
	int w_exact;	      /* W is the cumulative mass at rank k - 1, among the candidates */
	int nc;		      /* candidates */
	int fill;	      /* compaction cursor */
	unsigned long long c, w; /* cand_first's answer: cumulative mass, weight, id */
	int id;
};

/* The first bucket whose end's cumulative mass (in double) reaches thr (strict: exceeds). */
__device__ __forceinline__ int first_bucket(const unsigned long long *mass, double thr, bool strict)
{
	unsigned long long cum = 0;
	for (int b = 0; b < SAMPLE_NB; b++) {
		cum += mass[b];
		double c = (double)cum;
		if (strict ? c > thr : c >= thr)
			return b;
	}
	return SAMPLE_NB - 1;
}

__device__ __forceinline__ unsigned long long mass_before(const unsigned long long *mass, int b)
{
	unsigned long long m = 0;
	for (int j = 0; j < b; j++)
		m += mass[j];
	return m;
}

/* Thread 0, after pass 2 (cnt: the counts but the last bucket's, which is n minus the
 * rest; mass: the masses; flag bit 0: a token other than the best with e < min_p): marks
 * (bit 1 of flag) the buckets where a decision can fall, turns cnt / mass into each bucket's count / mass of the tokens above it in unmarked
 * buckets (rank = position among the candidates + cnt[b], cumulative mass = the
 * candidates' running sum + mass[b]) and fills pl. Each decision is the first token where
 * a count or a cumulative mass passes a threshold, so it falls in the first bucket whose
 * end passes it (the buckets before end below it); where a threshold depends on an earlier
 * decision (top-p on the top-k-kept mass W, the draw on the kept total), every bucket
 * between those of its lowest and highest value is marked. */
__device__ __forceinline__ void plan_buckets(const struct gpu_sample_row &R, int n, int *cnt,
					     unsigned long long *mass, unsigned char *flag,
					     struct sample_plan *pl)
{
	const int last = SAMPLE_NB - 1;
	cnt[last] = n;
	for (int b = 0; b < last; b++)
		cnt[last] -= cnt[b];
	unsigned long long Mtot = mass_before(mass, SAMPLE_NB);
	int k = (R.top_k > 0 && R.top_k < n) ? R.top_k : n;
	int bk = last;
	unsigned long long Wlo = Mtot, Whi = Mtot;
	if (k < n) {
		int c = 0;
		unsigned long long m = 0;
		for (bk = 0; bk < last && c + cnt[bk] < k; bk++) {
			c += cnt[bk];
			m += mass[bk];
		}
		Wlo = m;
		Whi = m + mass[bk];
		if (mass[bk])
			flag[bk] |= 2; /* W needs the top-k cut's exact place */
	}
	int be = bk; /* the kept set ends in a bucket <= be */
	unsigned long long Tlo = Wlo, Thi = Whi; /* bounds of the kept total */
	if (R.top_p < 1.0f) {
		int hi = min(first_bucket(mass, (double)R.top_p * (double)Whi, false), bk);
		int lo = min(first_bucket(mass, (double)R.top_p * (double)Wlo, false), hi);
		for (int b = lo; b <= hi; b++)
			flag[b] |= 2;
		be = hi;
		Tlo = mass_before(mass, lo);
		Thi = min(Whi, mass_before(mass, hi + 1));
	}
	if (R.min_p > 0.0f) {
		int bm = 0;
		while (bm < SAMPLE_NB && !(flag[bm] & 1))
			bm++;
		if (bm <= be) {
			flag[bm] |= 2;
			Tlo = min(Tlo, mass_before(mass, bm));
		}
	}
	if (Thi > 0) {
		int lo = first_bucket(mass, (double)R.u * (double)Tlo, true);
		int hi = first_bucket(mass, (double)R.u * (double)Thi, true);
		for (int b = lo; b <= hi; b++)
			flag[b] |= 2;
	}
	int c = 0, ic = 0;
	unsigned long long m = 0, im = 0;
	for (int b = 0; b < SAMPLE_NB; b++) {
		int cb = cnt[b];
		unsigned long long mb = mass[b];
		cnt[b] = c - ic;
		mass[b] = m - im;
		if (flag[b] & 2) {
			ic += cb;
			im += mb;
		}
		c += cb;
		m += mb;
	}
	pl->W = Wlo;
	pl->k = k;
	pl->w_exact = k < n && Wlo != Whi;
	pl->nc = ic;
	pl->fill = 0;
}

/* The least rank among the candidates (sorted, descending) that satisfies pred(rank,
 * cumulative mass, e), or -1; its cumulative mass, weight and id in pl->c, w, id. */
template <typename P>
__device__ __forceinline__ int cand_first(const unsigned long long *cand, const unsigned long long *ccum,
					  const int *gapc, int nc, float vmax, P pred,
					  struct sample_plan *pl, uint64_t *sh)
{
	int best = SAMPLE_NONE;
	unsigned long long bc = 0, bw = 0;
	int bid = 0;
	for (int q = 0; q < SAMPLE_ITEMS; q++) {
		int p = threadIdx.x * SAMPLE_ITEMS + q;
		if (p >= nc)
			break;
		float x = key_value(cand[p]);
		int rank = p + gapc[v_bucket(x, vmax)];
		float e = sampler_expf(x - vmax);
		if (pred(rank, ccum[p], e)) {
			best = rank; /* ranks grow with p: the first is the least */
			bc = ccum[p];
			bw = sampler_weight(e);
			bid = key_id(cand[p]);
			break;
		}
	}
	uint64_t m = block_max_u64((uint64_t)(SAMPLE_NONE - best), sh);
	int r = m ? SAMPLE_NONE - (int)m : -1;
	if (r >= 0 && best == r) {
		pl->c = bc;
		pl->w = bw;
		pl->id = bid;
	}
	__syncthreads();
	return r;
}

/* Pass 3 and the decisions on the candidates: the token, or -1 for the full-row path
 * (more than cap candidates). cnt, mass, flag: pass 2's histogram. */
__device__ __forceinline__ int sample_compact(const struct gpu_sample_row &R, const float *lg,
					      const float *vpen, const uint32_t *pen, int n,
					      float vmax, uint64_t top, int cap, int *cnt,
					      unsigned long long *mass, unsigned char *flag,
					      unsigned long long *cand, unsigned long long *ccum,
					      struct sample_plan *pl, uint64_t *sh)
{
	if (threadIdx.x == 0)
		plan_buckets(R, n, cnt, mass, flag, pl);
	__syncthreads();
	const int nc = pl->nc;
	if (nc > cap)
		return -1;
	const float temp = R.temperature;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float x = row_value(lg, vpen, pen, i, temp);
		if (flag[v_bucket(x, vmax)] & 2) {
			int p = atomicAdd(&pl->fill, 1);
			cand[p] = tok_key(x, i);
		}
	}
	int N = 1;
	while (N < nc)
		N <<= 1;
	__syncthreads();
	for (int p = nc + threadIdx.x; p < N; p += blockDim.x)
		cand[p] = 0; /* below every real key */
	__syncthreads();
	/* bitonic sort, descending */
	for (int kk = 2; kk <= N; kk <<= 1)
		for (int j = kk >> 1; j > 0; j >>= 1) {
			for (int i = threadIdx.x; i < N; i += blockDim.x) {
				int l = i ^ j;
				if (l > i) {
					unsigned long long a = cand[i], b = cand[l];
					if ((i & kk) == 0 ? a < b : a > b) {
						cand[i] = b;
						cand[l] = a;
					}
				}
			}
			__syncthreads();
		}
	/* cumulative masses: the running sum of the candidates' weights, plus the mass of
	 * the unmarked buckets above each one's */
	uint64_t t = 0;
	for (int q = 0; q < SAMPLE_ITEMS; q++) {
		int p = threadIdx.x * SAMPLE_ITEMS + q;
		if (p < nc)
			t += sampler_weight(sampler_expf(key_value(cand[p]) - vmax));
	}
	uint64_t run = block_excl_scan_u64(t, sh);
	for (int q = 0; q < SAMPLE_ITEMS; q++) {
		int p = threadIdx.x * SAMPLE_ITEMS + q;
		if (p < nc) {
			float x = key_value(cand[p]);
			run += sampler_weight(sampler_expf(x - vmax));
			ccum[p] = run + mass[v_bucket(x, vmax)];
		}
	}
	__syncthreads();
	/* the decisions, as sampler.c's sample_filtered makes them */
	const int k = pl->k;
	unsigned long long W = pl->W;
	if (pl->w_exact) {
		if (cand_first(cand, ccum, cnt, nc, vmax,
			       [&](int rank, unsigned long long, float) { return rank == k - 1; },
			       pl, sh) < 0)
			return -1;
		W = pl->c;
	}
	int keep = k;
	unsigned long long total = W;
	if (R.top_p < 1.0f) {
		const double thr = (double)R.top_p * (double)W;
		int r = cand_first(
		    cand, ccum, cnt, nc, vmax,
		    [&](int rank, unsigned long long c, float) { return rank < k && (double)c >= thr; },
		    pl, sh);
		if (r < 0)
			return -1;
		keep = r + 1;
		total = pl->c;
	}
	if (R.min_p > 0.0f) {
		const float min_p = R.min_p;
		int r = cand_first(
		    cand, ccum, cnt, nc, vmax,
		    [&](int rank, unsigned long long, float e) {
			    return rank >= 1 && rank < keep && e < min_p;
		    },
		    pl, sh);
		if (r >= 0) {
			keep = r;
			total = pl->c - pl->w;
		}
	}
	if (total == 0)
		return key_id(top); /* not reached: the best token weighs 2^32 */
	const double target = (double)R.u * (double)total;
	int r = cand_first(
	    cand, ccum, cnt, nc, vmax,
	    [&](int rank, unsigned long long c, float) { return rank < keep && (double)c > target; },
	    pl, sh);
	return r < 0 ? -1 : pl->id;
}

/* The full-row path (before issue 17's compaction, the only one): v and pr are the row's
 * [n_vocab] scratch. */
__device__ __forceinline__ int sample_full(const struct gpu_sample_row &R, const float *lg,
					   const struct gpu_hist_entry *hist, float *v, float *pr,
					   int n, int *shist, unsigned long long *shm, uint64_t *shk)
{
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		v[i] = lg[i];
	__syncthreads();
	/* penalties, in the CPU's order; history ids are distinct, so no two threads touch
	 * the same element */
	for (int e = threadIdx.x; e < R.hist_n; e += blockDim.x) {
		struct gpu_hist_entry h = hist[R.hist_off + e];
		if (h.id < 0 || h.id >= n || h.cnt == 0)
			continue;
		v[h.id] = penalize(v[h.id], h.cnt, R);
	}
	__syncthreads();
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
		uint64_t K = mass_select(v, pr, n, lo, (double)R.top_p * (double)W, false, shist,
					 shm, shk);
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
		K = mass_select(v, pr, n, lo, (double)R.u * (double)total, true, shist, shm, shk);
	/* total == 0 (NaN or infinite logits): the best candidate, as the CPU */
	int token = K ? key_id(K) : key_id(top);
	return token < 0 || token >= n ? 0 : token;
}

__global__ void __launch_bounds__(SAMPLE_THREADS, 2)
    sample_kernel(const float *logits, int n_vocab, const struct gpu_sample_row *rows,
		  const struct gpu_hist_entry *hist, float *work, struct sampler_result *out,
		  int cap, int *stats)
{
	__shared__ double shd[SAMPLE_WARPS + 1];
	__shared__ uint64_t shk[SAMPLE_WARPS + 1];
	__shared__ float shf[SAMPLE_WARPS + 1];
	__shared__ int shist[256];
	__shared__ unsigned long long shm[256];
	__shared__ int bcnt[SAMPLE_NB];
	__shared__ unsigned long long bmass[SAMPLE_NB];
	__shared__ unsigned char bflag[SAMPLE_NB]; /* bit 0: a token below min_p; bit 1: marked */
	__shared__ unsigned long long cand[SAMPLE_CAP];
	__shared__ unsigned long long ccum[SAMPLE_CAP];
	__shared__ struct sample_plan plan;
	__shared__ struct gpu_sample_row R; /* in shared memory, not 13 registers (sm_80 spilled) */
	if (threadIdx.x == 0)
		R = rows[blockIdx.x];
	__syncthreads();
	const float *lg = logits + (int64_t)R.logits_row * n_vocab;
	float *v = work + (int64_t)blockIdx.x * 2 * n_vocab; /* [n_vocab] penalized / T */
	float *pr = v + n_vocab;			     /* [n_vocab] probabilities */
	uint32_t *pen = (uint32_t *)pr; /* [n_vocab / 32] bitmap of the penalized ids */
	struct sampler_result *o = out + blockIdx.x;
	const int n = n_vocab;
	const bool choose = R.forced < 0;
	const bool sampled = choose && R.temperature > 0.0f;
	const float temp = sampled ? R.temperature : 0.0f;

	/* 0. the penalized tokens' values, sparse in v, marked in pen */
	if (choose) {
		for (int i = threadIdx.x; i < (n + 31) / 32; i += blockDim.x)
			pen[i] = 0;
		for (int b = threadIdx.x; b < SAMPLE_NB; b += blockDim.x) {
			bcnt[b] = 0;
			bmass[b] = 0;
			bflag[b] = 0;
		}
		__syncthreads();
		/* history ids are distinct, so no two threads touch the same element */
		for (int e = threadIdx.x; e < R.hist_n; e += blockDim.x) {
			struct gpu_hist_entry h = hist[R.hist_off + e];
			if (h.id < 0 || h.id >= n || h.cnt == 0)
				continue;
			float x = penalize(lg[h.id], h.cnt, R);
			v[h.id] = temp > 0.0f ? x / temp : x;
			atomicOr(&pen[h.id >> 5], 1u << (h.id & 31));
		}
		__syncthreads();
	}

	/* 1. the max of the logits; the best key of v; NaN in v */
	float mx = -INFINITY;
	uint64_t top = 0, nan = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		mx = fmaxf(mx, lg[i]);
		if (choose) {
			float x = row_value(lg, v, pen, i, temp);
			uint64_t key = tok_key(x, i);
			top = key > top ? key : top;
			nan |= x != x;
		}
	}
	mx = block_max_f(mx, shf);
	float vmax = 0.0f;
	if (choose) {
		top = block_max_u64(top, shk);
		nan = block_max_u64(nan, shk);
		vmax = row_value(lg, v, pen, key_id(top), temp);
	}
	const bool compact = sampled && cap > 0 && !nan && fabsf(vmax) < INFINITY;

	/* 2. the log-sum-exp of the raw logits as the CPU's sampler_log_sum_exp takes it: each
	 * term sampler_expf(l_i - max) (the subtraction in fp32), bitwise the CPU's, summed in
	 * double (in another order: the two may differ in the double's last bit); the
	 * histogram */
	double s = 0.0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		if (mx != -INFINITY)
			s += (double)sampler_expf(__fsub_rn(lg[i], mx));
		if (compact) {
			float x = row_value(lg, v, pen, i, temp);
			float e = sampler_expf(x - vmax);
			uint64_t w = sampler_weight(e);
			int b = v_bucket(x, vmax);
			/* the last bucket (most of a peaked row) is counted by difference, and
			 * its tokens weigh 0: no atomics for them */
			if (b < SAMPLE_NB - 1)
				atomicAdd(&bcnt[b], 1);
			if (w)
				atomicAdd(&bmass[b], (unsigned long long)w);
			if (e < R.min_p && tok_key(x, i) != top)
				bflag[b] = 1;
		}
	}
	s = block_sum_d(s, shd); /* its barriers also publish the histogram */
	const double lse = mx == -INFINITY ? -INFINITY : (double)mx + log(s);

	/* top-n alternatives: n rounds of "best key below the previous one" */
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
	int token = R.forced;
	if (choose && !sampled) {
		token = key_id(top);
	} else if (sampled) {
		token = compact ? sample_compact(R, lg, v, pen, n, vmax, top, cap, bcnt, bmass,
						 bflag, cand, ccum, &plan, shk)
				: -1;
		if (stats && threadIdx.x == 0)
			atomicAdd(&stats[token >= 0 ? 0 : 1], 1);
		if (token < 0)
			token = sample_full(R, lg, hist, v, pr, n, shist, shm, shk);
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

cudaError_t gpu_sample_cap(const float *logits, int n_vocab, const struct gpu_sample_row *rows,
			   int n_rows, const struct gpu_hist_entry *hist, float *work,
			   struct sampler_result *out, int cap, int *stats, cudaStream_t stream)
{
	if (n_rows <= 0)
		return cudaSuccess;
	sample_kernel<<<n_rows, SAMPLE_THREADS, 0, stream>>>(
	    logits, n_vocab, rows, hist, work, out, cap < 0 ? 0 : cap < SAMPLE_CAP ? cap : SAMPLE_CAP,
	    stats);
	return cudaGetLastError();
}

cudaError_t gpu_sample(const float *logits, int n_vocab, const struct gpu_sample_row *rows,
		       int n_rows, const struct gpu_hist_entry *hist, float *work,
		       struct sampler_result *out, cudaStream_t stream)
{
	return gpu_sample_cap(logits, n_vocab, rows, n_rows, hist, work, out, SAMPLE_CAP, NULL,
			      stream);
}
