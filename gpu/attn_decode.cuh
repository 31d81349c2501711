/* attn_decode: the GQA decode attention's device code (gpu/attention.cu's
 * attn_decode_gqa_kernel) as a body that a block or a part of one runs (gpu_part), and
 * the split merge that it and attn_reduce_kernel share, so that gpu_gemv_chain
 * (gpu/gemv.cu) runs a layer's decode attention as one of its steps, bitwise what the
 * kernel computes (internal, C++ only). */
#ifndef BG_GPU_ATTN_DECODE_CUH
#define BG_GPU_ATTN_DECODE_CUH

#include "gpu/gpu_ops.cuh"

#define ATTN_WARPS 4

/* Head h's attention sink (gpu_attn_args.sinks), -inf where the model has none: every
 * use below is then exact arithmetic that leaves the result bitwise as without sinks. */
__device__ __forceinline__ float attn_sink(const float *sinks, int h)
{
	return sinks ? sinks[h] : -INFINITY;
}

/* Folds the logit sink (natural-log units; -inf: none) into a finished softmax state of
 * running max m and sum *l: *l becomes the sum with e^(sink - M) added, M = max(m, sink),
 * both rescaled to M; returns the factor c = e^(m - M) of the accumulator, so that the
 * output is acc * c / *l. With sink = -inf, c = 1 and *l unchanged. */
__device__ __forceinline__ float attn_sink_fold(float sink, float m, float *l)
{
	const float M = fmaxf(m, sink);
	const float c = m == -INFINITY ? 0.0f : expf(m - M);
	*l = *l * c + (sink == -INFINITY ? 0.0f : expf(sink - M));
	return c;
}

/* The lowest key a query at position p sees (gpu_attn_args.window, .chunked): 0, the
 * sliding window's p - window + 1, or the first of p's chunk; never decreasing in p, so a
 * run of queries starts at its first query's. */
__device__ __forceinline__ int attn_key_lo(const struct gpu_attn_args &a, int p)
{
	if (a.window <= 0)
		return 0;
	return a.chunked ? p / a.window * a.window : max(0, p + 1 - a.window);
}

#define RED_THREADS	 128 /* the threads attn_reduce_kernel runs with, at most, up to 256 dims */
#define RED_THREADS_WIDE 256 /* ... for heads of 257..512 (gemma4's global heads) */

/* Merges the splits of one (token, head), pp = its n_split partials ({m, l, acc[hd]} each),
 * into o[hd]: M = max m_s, L = sum l_s e^(m_s - M), out = sum acc_s e^(m_s - M) / L. The
 * first nt threads of the part pt (gpu_part: the block, or a part of it) work (nt: a multiple
 * of 32, >= hd or == pt.n); the others only pass the barriers, so that a part of any size
 * sums in the order of one of nt threads: attn_reduce_kernel's and the GQA decode kernel's merges
 * are bitwise alike. The threads read the splits' (m, l) together for M and L; the weights e^(m_s -
 * M) of nt splits at a time go to shared memory (w_s[nt]; r_s[pt.n / 32]), so that a thread's sum
 * over them is loads with no branch on loaded data between them, several in flight (the serial walk
 * it replaces waited for two round trips a split: m, then acc). A split without keys (m = -inf)
 * wrote l = 0 and acc = 0 (both kernels), so a weight of 0 for it adds nothing. Dimensions pt.tid
 * and pt.tid + nt (head_dim <= 2 nt: nt = 128 from head_dim 128 to 256, 256 above, up to 512). F:
 * const float, or const volatile float in the decode kernel, where other blocks wrote the partials
 * during this launch (CUDA's threadfence reduction reads them so). UNROLL: of the inner sum (8 in
 * the merge kernel; 1 in the decode kernel, whose registers are bounded): the same additions in the
 * same order either way. */
template <typename T, int UNROLL, typename F>
__device__ void attn_merge(F *pp, int hd, int n_split, int nt, float sink, float *w_s, float *r_s,
			   T *o, const struct gpu_part &pt)
{
	const int tid = pt.tid, lane = tid & 31, warp = tid >> 5;
	const int n_warps = nt / 32;
	const int64_t st = hd + 2; /* floats a split */
	float m = -INFINITY;
	for (int s = tid; s < n_split && tid < nt; s += nt)
		m = fmaxf(m, pp[s * st]);
	m = warp_max(m);
	if (lane == 0)
		r_s[warp] = m;
	gpu_part_sync(pt);
	float M = sink; /* the head's sink (-inf: none) enters the max and L once, here */
	for (int w = 0; w < n_warps; w++)
		M = fmaxf(M, r_s[w]);
	gpu_part_sync(pt); /* r_s read; reused for L */
	float l = 0.0f;
	for (int s = tid; s < n_split && tid < nt; s += nt) {
		float ms = pp[s * st];
		if (ms != -INFINITY)
			l += pp[s * st + 1] * expf(ms - M);
	}
	l = warp_sum(l);
	if (lane == 0)
		r_s[warp] = l;
	gpu_part_sync(pt);
	float L = 0.0f;
	for (int w = 0; w < n_warps; w++)
		L += r_s[w];
	if (sink != -INFINITY)
		L += expf(sink - M);
	float acc[2] = {0.0f, 0.0f};
	for (int c0 = 0; c0 < n_split; c0 += nt) {
		const int n = min(nt, n_split - c0);
		gpu_part_sync(pt); /* the previous chunk's weights are used */
		if (tid < n) {
			float ms = pp[(c0 + tid) * st];
			w_s[tid] = ms == -INFINITY ? 0.0f : expf(ms - M);
		}
		gpu_part_sync(pt);
		for (int i = 0; i < 2; i++) {
			const int d = tid + i * nt;
			if (d >= hd)
				break; /* threads past nt: tid >= nt >= hd, or nt == pt.n */
			F *v = pp + c0 * st + 2 + d;
			float sum = acc[i];
#pragma unroll UNROLL
			for (int j = 0; j < n; j++)
				sum += v[j * st] * w_s[j];
			acc[i] = sum;
		}
	}
	for (int i = 0; i < 2; i++) {
		const int d = tid + i * nt;
		if (d < hd)
			o[d] = st_t<T>(acc[i] / L);
	}
}

/* The threads attn_merge works with for heads of hd dimensions (hd > 256: the merge
 * kernel only; the GQA decode kernel, which merges in its own blocks, takes no such head). */
__host__ __device__ __forceinline__ int attn_merge_threads(int hd)
{
	return hd > 2 * RED_THREADS ? RED_THREADS_WIDE
	       : hd >= RED_THREADS  ? RED_THREADS
				    : ((hd + 31) / 32) * 32;
}

/* The end of a split block of the GQA decode kernel, its partials written: the last of the
 * n_split blocks of a (token, KV head) to get here merges their partials (part: the
 * token's, [n_head][n_split][hd + 2]) for query heads [h0, h0 + G) into out (the token's
 * row), as attn_reduce_kernel would: the threadfence reduction (each block's partials
 * made visible device-wide before it counts itself in *cnt; the count goes back to 0 for
 * the next launch, a graph replay included). Not inlined: the decode loop's registers
 * stay its own (inlined, ptxas spilled on sm_80 at its 64-register bound). */
template <typename T>
__device__ __noinline__ void decode_merge_last(int *cnt, const float *part, int n_split, int h0,
					       int G, int hd, const float *sinks, T *out,
					       float *w_s, float *r_s, int *last_s,
					       const struct gpu_part pt)
{
	__threadfence();
	gpu_part_sync(pt);
	if (pt.tid == 0) {
		*last_s = atomicAdd(cnt, 1) == n_split - 1;
		if (*last_s)
			*cnt = 0;
	}
	gpu_part_sync(pt);
	if (!*last_s)
		return; /* block-uniform */
	__threadfence();
	const int nt = attn_merge_threads(hd);
	for (int g = 0; g < G; g++) {
		const int h = h0 + g;
		attn_merge<T, 1, const volatile float>(part + (int64_t)h * n_split * (hd + 2), hd,
						       n_split, nt, attn_sink(sinks, h), w_s, r_s,
						       out + (int64_t)h * hd, pt);
		gpu_part_sync(pt); /* w_s and r_s reused by the next head */
	}
}

/* ---- decode, GQA-grouped: one block per (KV head, token, split) ----
 *
 * The G = n_head / n_head_kv query heads that share a KV head run in one block, so each
 * K/V tile is read from memory once for all of them (the per-query kernel reads it G
 * times). 4 warps; warp w owns query heads w, w + 4 (GPW of them, G <= 4 * GPW). Tiles of
 * DEC_KEYS keys are staged in shared memory with 16-byte loads, as stored (f32, f16 or
 * bf16), each row padded with zeros to HD = 32 * NPL dimensions (a power of two), and
 * the inner loops read them 16 bytes at a time. A row is VPR = HD / EPV vectors, so one
 * warp step covers KPS = 32 / VPR keys: lane (grp, c) = (lane / VPR, lane % VPR) holds
 * dims [c EPV, (c + 1) EPV) of q in registers, and for key grp of each of the tile's
 * STEPS = VPR steps adds EPV products to its part of the dot (one 16-byte load; bf16
 * converts with a shift or a mask). The group's VPR lanes then sum their STEPS partial
 * dots in one transposed butterfly (VPR - 1 shuffles instead of VPR log2 VPR), which
 * leaves each lane with one key's whole score, so the scale, soft-cap and exp run once
 * a key. After the tile max (one warp reduction), P V runs the same way: each lane adds
 * p (shuffled from the lane that scored the key) times its EPV dims of V of its group's
 * keys; acc is reduced across the groups once at the end, l (a key a lane) over the
 * warp. A warp step reads 512 consecutive bytes of the tile: no bank conflict. Keys past
 * the end of the tile are staged as zeros and masked, so the loops have no bounds.
 * Each head's state lives in one warp, so the block needs no merge: it writes the output
 * row, or (m, l, acc) to partial[] in attn_kernel's layout for attn_reduce_kernel.
 * Window and soft-cap as in attn_kernel. The block-table division runs once a key (warp
 * 0 computes the next tile's row offsets while it scores), not once a staged vector.
 * Used when K/V rows allow 16-byte loads, G <= 8, and the staged tile fits. */
#define DEC_KEYS 32

/* Whether the GQA decode kernel (attn_decode_gqa_body) takes the per-query tokens of this
 * shape (K/V of es bytes an element). */
static inline bool attn_decode_gqa_ok(int n_head, int n_head_kv, int hd, int kv_dim, size_t es)
{
	int npl = (hd + 31) / 32;
	/* hd <= 256: a key's 16-bit row of 512 dims would be 64 vectors, two warps' worth
	 * (VPR <= 32), and its K/V tiles 64 KiB (gemma4's global heads of 512 take the
	 * per-query kernel) */
	return n_head_kv > 0 && hd > 0 && n_head % n_head_kv == 0 &&
	       n_head / n_head_kv <= 2 * ATTN_WARPS && (hd * es) % 16 == 0 &&
	       (kv_dim * es) % 16 == 0 && hd <= 256 &&
	       !(es == 4 && npl > 4); /* f32 tiles of 256 dims would not fit in 48 KiB */
}

/* The shared memory of one (KV head, token, split) of attn_decode_gqa_body: its K/V tiles of
 * VPR 16-byte vectors a padded row (the comment above), and its merge's */
template <typename T, int NPL> __host__ __device__ constexpr int attn_dec_vpr()
{
	return NPL * 32 / (16 / (int)sizeof(T));
}
template <typename T, int NPL> struct attn_dec_smem {
	uint4 k_s[DEC_KEYS * attn_dec_vpr<T, NPL>()];
	uint4 v_s[DEC_KEYS * attn_dec_vpr<T, NPL>()];
	int64_t row_s[DEC_KEYS]; /* element offset of each key's K row; -1: none */
	float w_s[RED_THREADS];	 /* the merge of the last split block (attn_merge) */
	float r_s[ATTN_WARPS];
	int last_s;
};

/* (KV head kvh, token list[li], split sp) of the GQA decode kernel (the comment above) on
 * the ATTN_WARPS * 32 threads of pt, with the shared memory *sm: attn_decode_gqa_kernel's
 * block, or a part of a gpu_gemv_chain block. */
template <typename T, int NPL, int GPW>
__device__ __forceinline__ void
attn_decode_gqa_body(const struct gpu_attn_args &a, int n_split, float *partial, int kvh, int li,
		     int sp, const struct gpu_part &pt, struct attn_dec_smem<T, NPL> *sm)
{
	constexpr int HD = NPL * 32;
	constexpr int EPV = 16 / (int)sizeof(T); /* elements per 16-byte vector */
	constexpr int VPR = HD / EPV;		 /* vectors per (padded) K/V row, a power of two */
	static_assert(VPR <= 32 && 32 % VPR == 0, "a key's row is whole lanes of one warp");
	constexpr int KPS = 32 / VPR; /* keys per warp step */
	constexpr int STEPS = DEC_KEYS / KPS;
	static_assert(STEPS == VPR, "the transposed sum leaves one key a lane");
	static_assert(VPR == attn_dec_vpr<T, NPL>(), "attn_dec_smem's rows");
	uint4 *k_s = sm->k_s, *v_s = sm->v_s;
	int64_t *row_s = sm->row_s;
	const int t = a.list ? a.list[li] : li;
	const int tid = pt.tid, lane = tid & 31, warp = tid >> 5;
	const int grp = lane / VPR, c = lane % VPR; /* key of a step, vector of its row */
	const int hd = a.head_dim, G = a.n_head / a.n_head_kv;
	const int vpr = hd / EPV; /* vectors of a stored row; c >= vpr is padding */
	const int ctx = a.tok_pos[t] + 1;
	const int lo = attn_key_lo(a, ctx - 1);
	const int len = max((ctx - lo + n_split - 1) / n_split, GPU_ATTN_SPLIT_MIN_KEYS);
	const int j0 = lo + sp * len;
	const int j1 = min(ctx, j0 + len);
	const int32_t *bt = a.bt + a.tok_bt[t];
	const T *base = (const T *)a.kv.base + (int64_t)kvh * hd;
	auto row_of = [&](int key) -> int64_t {
		return key < j1 ? bt[key / a.kv.block_size] * a.kv.block_stride +
				      (int64_t)(key % a.kv.block_size) * a.kv.kv_dim
				: -1;
	};

	float q[GPW][EPV], m[GPW], l[GPW], acc[GPW][EPV];
#pragma unroll
	for (int gi = 0; gi < GPW; gi++) {
		const int g = min(warp + ATTN_WARPS * gi, G - 1);
		const float *qrow = a.q + (int64_t)t * a.ldq + (int64_t)(kvh * G + g) * hd;
		m[gi] = -INFINITY;
		l[gi] = 0.0f;
#pragma unroll
		for (int i = 0; i < EPV; i++) {
			q[gi][i] = c < vpr ? qrow[c * EPV + i] : 0.0f;
			acc[gi][i] = 0.0f;
		}
	}
	if (tid < DEC_KEYS)
		row_s[tid] = row_of(j0 + tid);
	for (int kb = j0; kb < j1; kb += DEC_KEYS) {
		gpu_part_sync(pt); /* row_s is ready, the previous tile consumed */
#pragma unroll
		for (int r = 0; r < DEC_KEYS * VPR / (ATTN_WARPS * 32); r++) {
			const int e = tid + r * ATTN_WARPS * 32;
			const int j = e / VPR, ce = e % VPR; /* powers of two: a shift and a mask */
			const int64_t row = row_s[j];
			uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
			if (row >= 0 && ce < vpr) {
				const T *k = base + row;
				kv = ((const uint4 *)k)[ce];
				vv = ((const uint4 *)(k + a.kv.v_offset))[ce];
			}
			k_s[e] = kv;
			v_s[e] = vv;
		}
		gpu_part_sync(pt);
		if (tid < DEC_KEYS) /* the next tile's rows: read after the next barrier */
			row_s[tid] = row_of(kb + DEC_KEYS + tid);
		const int n_j = min(DEC_KEYS, j1 - kb);
#pragma unroll
		for (int gi = 0; gi < GPW; gi++) {
			const int g = warp + ATTN_WARPS * gi;
			if (g >= G)
				break; /* warp-uniform */
			/* d[st]: this lane's part of the dot of key st * KPS + grp */
			float d[STEPS];
#pragma unroll
			for (int st = 0; st < STEPS;
			     st++) { /* keys past n_j: zeros, masked below */
				d[st] = 0.0f;
				float f[EPV];
				vec_f32<T>(k_s[st * 32 + lane], f);
#pragma unroll
				for (int i = 0; i < EPV; i++)
					d[st] += q[gi][i] * f[i];
			}
			/* Sum over the VPR lanes of the group, transposed: at each level a lane
			 * keeps half of its values and adds its partner's other half, so the
			 * STEPS = VPR sums take VPR - 1 shuffles, and lane c ends with the
			 * whole dot of step c: key c * KPS + grp (one key a lane). */
#pragma unroll
			for (int o = VPR / 2; o > 0; o >>= 1) {
				const bool up = lane & o;
#pragma unroll
				for (int i = 0; i < VPR / 2;
				     i++) { /* i < o: constant trip counts unroll */
					if (i >= o)
						break;
					const float send = up ? d[i] : d[i + o];
					const float keep = up ? d[i + o] : d[i];
					d[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
				}
			}
			float s = -INFINITY;
			if (c * KPS + grp < n_j) {
				s = d[0] * a.scale;
				if (a.softcap > 0.0f)
					s = __fmul_rn(a.softcap, tanhf((s / a.softcap)));
			}
			const float m_new = fmaxf(m[gi], warp_max(s));
			const float corr = expf(m[gi] - m_new); /* 0 on the first tile */
			const float pr = s == -INFINITY ? 0.0f : expf(s - m_new);
#pragma unroll
			for (int i = 0; i < EPV; i++)
				acc[gi][i] *= corr;
#pragma unroll
			for (int st = 0; st < STEPS; st++) { /* keys past n_j: p = 0, v = 0 */
				/* p of key st * KPS + grp, from the lane of the group that scored
				 * it */
				const float p =
				    __shfl_sync(0xffffffffu, pr, (lane & ~(VPR - 1)) + st);
				float f[EPV];
				vec_f32<T>(v_s[st * 32 + lane], f);
#pragma unroll
				for (int i = 0; i < EPV; i++)
					acc[gi][i] += p * f[i];
			}
			l[gi] = l[gi] * corr + pr;
			m[gi] = m_new;
		}
	}
#pragma unroll
	for (int gi = 0; gi < GPW; gi++) {
		const int g = warp + ATTN_WARPS * gi;
		if (g >= G)
			break;
		/* l: each lane's keys; acc: each group's keys (m is already warp-wide) */
		l[gi] = warp_sum(l[gi]);
#pragma unroll
		for (int o = VPR; o < 32; o <<= 1)
#pragma unroll
			for (int i = 0; i < EPV; i++)
				acc[gi][i] += __shfl_xor_sync(0xffffffffu, acc[gi][i], o);
		if (grp != 0 || c >= vpr)
			continue;
		const int h = kvh * G + g;
		if (n_split == 1) {
			T *o = (T *)a.out + (int64_t)t * a.n_head * hd + (int64_t)h * hd + c * EPV;
			const float cf = attn_sink_fold(attn_sink(a.sinks, h), m[gi], &l[gi]);
			/* l >= 1 (the query's own key); a NaN must reach the sampler */
#pragma unroll
			for (int i = 0; i < EPV; i++)
				o[i] = st_t<T>(acc[gi][i] * cf / l[gi]);
		} else {
			float *pp =
			    partial + (((int64_t)li * a.n_head + h) * n_split + sp) * (hd + 2);
			if (c == 0) {
				pp[0] = m[gi];
				pp[1] = l[gi];
			}
#pragma unroll
			for (int i = 0; i < EPV; i++)
				pp[2 + c * EPV + i] = acc[gi][i];
		}
	}
	if (n_split == 1 || !a.merge_counters)
		return;
	/* The last of the n_split blocks of (token, KV head) to finish merges their partials
	 * for its G query heads (decode_merge_last). */
	decode_merge_last<T>(a.merge_counters + (int64_t)li * a.n_head_kv + kvh,
			     partial + (int64_t)li * a.n_head * n_split * (hd + 2), n_split,
			     kvh * G, G, hd, a.sinks, (T *)a.out + (int64_t)t * a.n_head * hd,
			     sm->w_s, sm->r_s, &sm->last_s, pt);
}

#endif
