/* attention: causal attention over the paged KV pool, in three kernels.
 *
 * Decode steps go to the GQA decode kernel (gpu/attn_decode.cuh; its launch below) where the shape
 * allows: one block per KV head sharing each staged K/V tile among its query heads. Split,
 * its blocks write partials like the per-query kernel's; given merge_counters, the last
 * block of each (token, KV head) merges them itself (decode_merge_last), else the merge
 * kernel does (one graph node more a layer: issue 17's fixed cost per node).
 *
 * Per-query (decode steps of other shapes), flash-decoding style: block (h, i, split) handles query
 * head h of token list[i] and one contiguous part of its context [0, pos]. Its 4 warps take keys
 * round-robin; for each key the warp computes the dot product (lane l holds dims l, l+32, ...) and
 * updates its online-softmax state (running max m, sum l, unnormalized output acc). The warps are
 * merged through shared memory; with one split the block writes the output row, otherwise it writes
 * (m, l, acc) to partial[] and a second kernel merges the splits, so that a decode step with a long
 * context uses many SMs instead of one per head.
 *
 * Tiled (context chunks), flash-attention style: block (h, tile) handles up to 16
 * consecutive query positions of one sequence. K/V tiles of 32 keys are loaded into
 * shared memory once for all of them; each warp owns 4 queries, lane j scores key j of
 * the tile, and the online softmax advances one tile at a time. Keys beyond a query's
 * position are masked (causal), and in a windowed layer (gemma) the keys at or before
 * position - window too, or (llama4's chunks) those before the position's chunk; gemma2's
 * score soft-cap applies after the scale. With 16-bit K/V and heads of 16..128 dimensions
 * (multiples of 16) the tiles go to the tensor-core kernel instead (attn_prefill_tc_kernel:
 * wmma, FlashAttention-2 style, GQA-grouped).
 *
 * deepseek2's latent rows (model.h's mla: heads of 576 over one K/V head, V = the K row,
 * kv.v_offset 0) go to the per-query kernel with 18 dimensions a lane and one split.
 *
 * In both, the head is the fastest grid index so that the query heads sharing one KV
 * head (GQA) run side by side and read that head's K/V from L2 instead of DRAM. Scores
 * and the softmax are fp32 whatever the storage type of K/V.
 */
#include <mma.h>

#include "gpu/attn_decode.cuh"
#include "gpu/pdl.cuh"

template <typename T, int NPL>
__global__ void __launch_bounds__(ATTN_WARPS * 32)
    attn_kernel(struct gpu_attn_args a, int n_split, float *partial)
{
	__shared__ float s_m[ATTN_WARPS], s_l[ATTN_WARPS];
	__shared__ float s_acc[ATTN_WARPS][NPL * 32];
	const int h = blockIdx.x, li = blockIdx.y, sp = blockIdx.z;
	const int t = a.list ? a.list[li] : li;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int hd = a.head_dim;
	const int kvh = h / (a.n_head / a.n_head_kv);
	const int ctx = a.tok_pos[t] + 1;
	/* a windowed layer: keys (pos - window, pos] only, or pos's chunk */
	const int lo = attn_key_lo(a, ctx - 1);
	/* >= GPU_ATTN_SPLIT_MIN_KEYS keys a split: a short context fills the first splits
	 * only, the others are empty (m = -inf: the merge weighs them 0) */
	const int len = max((ctx - lo + n_split - 1) / n_split, GPU_ATTN_SPLIT_MIN_KEYS);
	const int j0 = lo + sp * len;
	const int j1 = min(ctx, j0 + len);
	const int32_t *bt = a.bt + a.tok_bt[t];

	float q[NPL], acc[NPL];
	const float *qrow = a.q + (int64_t)t * a.ldq + (int64_t)h * hd;
#pragma unroll
	for (int i = 0; i < NPL; i++) {
		int d = lane + 32 * i;
		q[i] = d < hd ? qrow[d] : 0.0f;
		acc[i] = 0.0f;
	}
	float m = -INFINITY, l = 0.0f;
	const T *base = (const T *)a.kv.base + (int64_t)kvh * hd;
	for (int j = j0 + warp; j < j1; j += ATTN_WARPS) {
		int64_t blk = bt[j / a.kv.block_size];
		const T *k =
		    base + blk * a.kv.block_stride + (int64_t)(j % a.kv.block_size) * a.kv.kv_dim;
		const T *v = k + a.kv.v_offset;
		float dot = 0.0f;
#pragma unroll
		for (int i = 0; i < NPL; i++) {
			int d = lane + 32 * i;
			if (d < hd)
				dot += q[i] * ld_f32(k[d]);
		}
		float s = warp_sum(dot) * a.scale;
		if (a.softcap > 0.0f)
			s = __fmul_rn(a.softcap, tanhf((s / a.softcap)));
		float m_new = fmaxf(m, s);
		float corr = expf(m - m_new); /* 0 on the first key (m = -inf) */
		float p = expf(s - m_new);
		l = l * corr + p;
#pragma unroll
		for (int i = 0; i < NPL; i++) {
			int d = lane + 32 * i;
			acc[i] = acc[i] * corr + (d < hd ? p * ld_f32(v[d]) : 0.0f);
		}
		m = m_new;
	}
	if (lane == 0) {
		s_m[warp] = m;
		s_l[warp] = l;
	}
#pragma unroll
	for (int i = 0; i < NPL; i++)
		s_acc[warp][lane + 32 * i] = acc[i];
	__syncthreads();

	float M = s_m[0];
	for (int w = 1; w < ATTN_WARPS; w++)
		M = fmaxf(M, s_m[w]);
	float L = 0.0f, f[ATTN_WARPS];
	for (int w = 0; w < ATTN_WARPS; w++) {
		f[w] = M == -INFINITY ? 0.0f : expf(s_m[w] - M);
		L += s_l[w] * f[w];
	}
	if (n_split == 1) {
		T *o = (T *)a.out + (int64_t)t * a.n_head * hd + (int64_t)h * hd;
		const float c = attn_sink_fold(attn_sink(a.sinks, h), M, &L);
		for (int d = threadIdx.x; d < hd; d += blockDim.x) {
			float sum = 0.0f;
			for (int w = 0; w < ATTN_WARPS; w++)
				sum += s_acc[w][d] * f[w];
			o[d] = st_t<T>(sum * c / L);
		}
	} else {
		/* partial[(li * n_head + h) * n_split + sp] = {M, L, acc[hd]} */
		float *pp = partial + (((int64_t)li * a.n_head + h) * n_split + sp) * (hd + 2);
		if (threadIdx.x == 0) {
			pp[0] = M;
			pp[1] = L;
		}
		for (int d = threadIdx.x; d < hd; d += blockDim.x) {
			float sum = 0.0f;
			for (int w = 0; w < ATTN_WARPS; w++)
				sum += s_acc[w][d] * f[w];
			pp[2 + d] = sum;
		}
	}
}

/* Merges the splits of (token list[li], head h) (blockIdx.x, blockIdx.y), with
 * attn_merge_threads(hd) <= NT threads (NT: RED_THREADS, or RED_THREADS_WIDE for heads of
 * more than 256). */
template <typename T, int NT>
__global__ void __launch_bounds__(NT)
    attn_reduce_kernel(const float *partial, const int32_t *list, const float *sinks, int n_head,
		       int hd, int n_split, T *out)
{
	__shared__ float w_s[NT];
	__shared__ float r_s[NT / 32];
	const int li = blockIdx.x, h = blockIdx.y;
	const int t = list ? list[li] : li;
	const float *pp = partial + ((int64_t)li * n_head + h) * n_split * (hd + 2);
	attn_merge<T, 8, const float>(pp, hd, n_split, (int)blockDim.x, attn_sink(sinks, h), w_s,
				      r_s, out + (int64_t)t * n_head * hd + (int64_t)h * hd,
				      gpu_part_block());
}

/* The GQA decode kernel (gpu/attn_decode.cuh: attn_decode_gqa_body), one block per (KV
 * head, token, split). */
/* Blocks of attn_decode_gqa_kernel an SM should hold: 8 (64 registers a thread) for
 * 16-bit K/V, heads of <= 128 dims and one head a warp (Llama-3-8B and the like: ptxas
 * keeps these in 56..64 registers without spilling on sm_80..sm_90), else 4 (128, the
 * gates' budget): with no bound ptxas takes up to 142 registers on sm_86/sm_89, and it
 * spills some of the others at 64. */
template <typename T, int NPL, int GPW> constexpr int dec_min_blocks()
{
	return sizeof(T) == 2 && NPL <= 4 && GPW == 1 ? 8 : 4;
}

template <typename T, int NPL, int GPW>
__global__ void __launch_bounds__(ATTN_WARPS * 32, (dec_min_blocks<T, NPL, GPW>()))
    attn_decode_gqa_kernel(struct gpu_attn_args a, int n_split, float *partial)
{
	__shared__ struct attn_dec_smem<T, NPL> sm;
	/* launched with a.pdl (gpu/pdl.cuh): the next kernel may be scheduled now; every
	 * address this kernel reads depends on its inputs (list, positions, block tables),
	 * so there is nothing to prefetch before the wait */
	gpu_pdl_trigger();
	gpu_pdl_wait();
	attn_decode_gqa_body<T, NPL, GPW>(a, n_split, partial, (int)blockIdx.x, (int)blockIdx.y,
					  (int)blockIdx.z, gpu_part_block(), &sm);
}

template <typename T, int NPL>
static void launch_decode_gqa(dim3 grid, const struct gpu_attn_args &q, int n_split,
			      float *partial, cudaStream_t stream)
{
	if constexpr (sizeof(T) == 4 && NPL > 4)
		return; /* decode_gqa_ok refuses it: its tiles would not fit in 48 KiB */
	else if (q.n_head / q.n_head_kv <= ATTN_WARPS)
		gpu_launch(attn_decode_gqa_kernel<T, NPL, 1>, grid, ATTN_WARPS * 32, 0, stream, q.pdl,
			   q, n_split, partial);
	else
		gpu_launch(attn_decode_gqa_kernel<T, NPL, 2>, grid, ATTN_WARPS * 32, 0, stream, q.pdl,
			   q, n_split, partial);
}

#define TILE_KEYS 32

template <typename T, int NPL>
__global__ void __launch_bounds__(ATTN_WARPS * 32) attn_tiled_kernel(struct gpu_attn_args a)
{
	constexpr int HD = NPL * 32;
	constexpr int QPW = GPU_ATTN_TILE / ATTN_WARPS; /* queries per warp */
	__shared__ float q_s[GPU_ATTN_TILE][HD];
	__shared__ float k_s[TILE_KEYS][HD + 1]; /* +1: lane j reads row j, conflict-free */
	__shared__ float v_s[TILE_KEYS][HD];
	const int h = blockIdx.x;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int hd = a.head_dim;
	const int kvh = h / (a.n_head / a.n_head_kv);
	const int t0 = a.tiles[2 * blockIdx.y], nq = a.tiles[2 * blockIdx.y + 1];
	const int p0 = a.tok_pos[t0];
	const int n_keys = p0 + nq; /* the last query sees [0, p0 + nq - 1] */
	/* windowed: the first query's lowest key is the run's */
	const int k_lo = attn_key_lo(a, p0);
	const int32_t *bt = a.bt + a.tok_bt[t0];
	const T *base = (const T *)a.kv.base + (int64_t)kvh * hd;

	for (int e = threadIdx.x; e < GPU_ATTN_TILE * HD; e += blockDim.x) {
		int i = e / HD, d = e % HD;
		q_s[i][d] = (i < nq && d < hd)
				? a.q[(int64_t)(t0 + i) * a.ldq + (int64_t)h * hd + d]
				: 0.0f;
	}
	float m[QPW], l[QPW], acc[QPW][NPL];
#pragma unroll
	for (int qi = 0; qi < QPW; qi++) {
		m[qi] = -INFINITY;
		l[qi] = 0.0f;
#pragma unroll
		for (int e = 0; e < NPL; e++)
			acc[qi][e] = 0.0f;
	}
	for (int kb = k_lo; kb < n_keys; kb += TILE_KEYS) {
		__syncthreads(); /* the previous tile (and q_s, the first time) is ready/consumed */
		for (int e = threadIdx.x; e < TILE_KEYS * hd; e += blockDim.x) {
			int j = e / hd, d = e % hd, key = kb + j;
			float kv = 0.0f, vv = 0.0f;
			if (key < n_keys) {
				int64_t blk = bt[key / a.kv.block_size];
				const T *k = base + blk * a.kv.block_stride +
					     (int64_t)(key % a.kv.block_size) * a.kv.kv_dim;
				kv = ld_f32(k[d]);
				vv = ld_f32(k[a.kv.v_offset + d]);
			}
			k_s[j][d] = kv;
			v_s[j][d] = vv;
		}
		__syncthreads();
#pragma unroll
		for (int qi = 0; qi < QPW; qi++) {
			const int i = warp + ATTN_WARPS * qi;
			if (i >= nq)
				continue; /* warp-uniform */
			const int p = p0 + i;
			if (kb > p)
				continue; /* the whole tile is in this query's future */
			const int lo = attn_key_lo(a, p);
			if (kb + TILE_KEYS - 1 < lo)
				continue; /* ... or wholly before its window (warp-uniform) */
			float s = -INFINITY;
			if (kb + lane <= p && kb + lane >= lo) {
				float dot = 0.0f;
				for (int d = 0; d < hd; d++)
					dot += q_s[i][d] * k_s[lane][d];
				s = dot * a.scale;
				if (a.softcap > 0.0f)
					s = __fmul_rn(a.softcap, tanhf((s / a.softcap)));
			}
			float mt = warp_max(s);
			float m_new = fmaxf(m[qi], mt);
			float corr = expf(m[qi] - m_new); /* 0 on the first tile */
			float pr = s == -INFINITY ? 0.0f : expf(s - m_new);
			l[qi] = l[qi] * corr + warp_sum(pr);
#pragma unroll
			for (int e = 0; e < NPL; e++)
				acc[qi][e] *= corr;
			const int n_j = min(TILE_KEYS, p - kb + 1);
			for (int j = 0; j < n_j; j++) {
				float pj = __shfl_sync(0xffffffffu, pr, j);
#pragma unroll
				for (int e = 0; e < NPL; e++)
					acc[qi][e] += pj * v_s[j][lane + 32 * e];
			}
			m[qi] = m_new;
		}
	}
#pragma unroll
	for (int qi = 0; qi < QPW; qi++) {
		const int i = warp + ATTN_WARPS * qi;
		if (i >= nq)
			continue;
		T *o = (T *)a.out + (int64_t)(t0 + i) * a.n_head * hd + (int64_t)h * hd;
		const float c = attn_sink_fold(attn_sink(a.sinks, h), m[qi], &l[qi]);
#pragma unroll
		for (int e = 0; e < NPL; e++) {
			int d = lane + 32 * e;
			if (d < hd)
				o[d] = st_t<T>(acc[qi][e] * c / l[qi]);
		}
	}
}

/* ---- prefill on tensor cores: FlashAttention-2 style, GQA-grouped ----
 *
 * Block (kv head, tile): the NW warps (NW divides G = n_head / n_head_kv, at most 4) take
 * NW query heads of one GQA group, each the up to 16 queries of the tile, so every K/V
 * tile staged in shared memory serves NW * 16 query rows (64 for llama-3's G = 4); the
 * grid's x runs over the G / NW head groups of each KV head, fastest, so that blocks
 * sharing K/V run side by side. Per K/V tile of TC_KEYS keys, each warp:
 *   S = Q K^T   (16 x TC_KEYS, fp32) with wmma m16n16k16 on T = f16 / bf16 inputs: Q is
 *               rounded to T once, when staged; K as stored;
 *   softmax     online, fp32, from S stored to shared memory: lanes 2r and 2r+1 own query
 *               row r (16 keys each), its running max m and sum l; masks (causal, window)
 *               and the soft-cap apply here, as in attn_tiled_kernel;
 *   O += P V    P = exp(S - m) rounded to T (FlashAttention's choice), 16 columns of the
 *               head at a time through an fp32 fragment stored to shared memory, added to
 *               O, which each lane keeps in registers for its row (8 columns per 16).
 * WMMA fragments are opaque (their lane mapping is the architecture's), so the per-row
 * rescaling of O by exp(m_old - m_new) cannot be done on an accumulator fragment: O lives
 * in registers in a layout of our own, and the fragments only pass through shared memory
 * (load/store_matrix_sync). The kernel uses nothing else of a fragment.
 * Heads of hd <= HD (hd % 16 == 0) are padded with zeros to HD = 64 or 128. Shared memory
 * rows are padded by 8 elements (16 bytes) against bank conflicts of the fragment loads;
 * 47 KiB in all for HD = 128. */
#define TC_KEYS	 32
#define TC_WARPS 4
#define LOG2E	 1.4426950408889634f

template <typename T> __device__ __forceinline__ uint32_t t_bits(T v)
{
	uint16_t u;
	memcpy(&u, &v, 2);
	return u;
}

/* 4 blocks an SM: at most 128 registers a thread, which ptxas keeps without spilling;
 * unbounded it takes 166-208 on sm_80-89 (126 on sm_90) */
template <typename T, int HD>
__global__ void __launch_bounds__(TC_WARPS * 32, 4) attn_prefill_tc_kernel(struct gpu_attn_args a)
{
	using namespace nvcuda;
	constexpr int LD = HD + 8;	 /* row stride of q_s, k_s, v_s (elements) */
	constexpr int LDP = TC_KEYS + 8; /* row stride of p_s */
	constexpr int CH = HD / 16;	 /* 16-column chunks of a head */
	constexpr int EPV = 16 / (int)sizeof(T);
	__shared__ __align__(32) T q_s[TC_WARPS][16 * LD];
	__shared__ __align__(32) T k_s[TC_KEYS * LD];
	__shared__ __align__(32) T v_s[TC_KEYS * LD];
	__shared__ __align__(32) float s_s[TC_WARPS][16 * TC_KEYS];
	__shared__ __align__(32) T p_s[TC_WARPS][16 * LDP];
	const int nw = (int)(blockDim.x >> 5);
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int hd = a.head_dim, G = a.n_head / a.n_head_kv, groups = G / nw;
	const int kvh = blockIdx.x / groups;
	const int h = kvh * G + (blockIdx.x % groups) * nw + warp;
	const int t0 = a.tiles[2 * blockIdx.y], nq = a.tiles[2 * blockIdx.y + 1];
	const int p0 = a.tok_pos[t0];
	const int n_keys = p0 + nq; /* the last query sees [0, p0 + nq - 1] */
	const int k_lo = attn_key_lo(a, p0);
	const int32_t *bt = a.bt + a.tok_bt[t0];
	const T *base = (const T *)a.kv.base + (int64_t)kvh * hd;
	const int vpr = hd / EPV; /* 16-byte vectors per stored K/V row */
	/* this lane's softmax row, its half of the columns, and the keys [key_lo, key_hi]
	 * its query sees (none for a row past nq) */
	const int r = lane >> 1, half = lane & 1;
	const int key_hi = r < nq ? p0 + r : -1;
	const int key_lo = attn_key_lo(a, p0 + r);

	for (int e = threadIdx.x; e < nw * 16 * HD; e += blockDim.x) {
		int w = e / (16 * HD), i = (e / HD) % 16, d = e % HD;
		int hw = h - warp + w;
		q_s[w][i * LD + d] = st_t<T>(
		    (i < nq && d < hd) ? a.q[(int64_t)(t0 + i) * a.ldq + (int64_t)hw * hd + d]
				       : 0.0f);
	}
	float o[CH][8];
#pragma unroll
	for (int c = 0; c < CH; c++)
#pragma unroll
		for (int e = 0; e < 8; e++)
			o[c][e] = 0.0f;
	float m = -INFINITY, l = 0.0f;
	for (int kb = k_lo; kb < n_keys; kb += TC_KEYS) {
		__syncthreads(); /* the previous tile (and q_s, the first time) is ready/consumed */
		for (int e = threadIdx.x; e < TC_KEYS * (HD / EPV); e += blockDim.x) {
			int j = e / (HD / EPV), c = e % (HD / EPV), key = kb + j;
			uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
			if (key < n_keys && c < vpr) {
				int64_t blk = bt[key / a.kv.block_size];
				const T *k = base + blk * a.kv.block_stride +
					     (int64_t)(key % a.kv.block_size) * a.kv.kv_dim;
				kv = ((const uint4 *)k)[c];
				vv = ((const uint4 *)(k + a.kv.v_offset))[c];
			}
			*(uint4 *)&k_s[j * LD + c * EPV] = kv;
			*(uint4 *)&v_s[j * LD + c * EPV] = vv;
		}
		__syncthreads();

		/* S = Q K^T: K as stored, [key][dim], is K^T in column-major order */
		wmma::fragment<wmma::accumulator, 16, 16, 16, float> s0, s1;
		wmma::fill_fragment(s0, 0.0f);
		wmma::fill_fragment(s1, 0.0f);
#pragma unroll
		for (int kk = 0; kk < CH; kk++) {
			wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> qa;
			wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kb0, kb1;
			wmma::load_matrix_sync(qa, &q_s[warp][kk * 16], LD);
			wmma::load_matrix_sync(kb0, &k_s[kk * 16], LD);
			wmma::load_matrix_sync(kb1, &k_s[16 * LD + kk * 16], LD);
			wmma::mma_sync(s0, qa, kb0, s0);
			wmma::mma_sync(s1, qa, kb1, s1);
		}
		float *sw = s_s[warp];
		wmma::store_matrix_sync(sw, s0, TC_KEYS, wmma::mem_row_major);
		wmma::store_matrix_sync(sw + 16, s1, TC_KEYS, wmma::mem_row_major);
		__syncwarp();

		/* online softmax of row r, keys kb + half * 16 ... + 16, in log2 units (scores
		 * times log2(e), so that each exponential is one exp2f) */
		float s[16], mt = -INFINITY;
		const int key0 = kb + half * 16;
#pragma unroll
		for (int j = 0; j < 16; j++)
			s[j] = sw[r * TC_KEYS + half * 16 + j] * a.scale;
		if (a.softcap > 0.0f) /* uniform */
#pragma unroll
			for (int j = 0; j < 16; j++)
				s[j] = __fmul_rn(a.softcap, tanhf((s[j] / a.softcap)));
#pragma unroll
		for (int j = 0; j < 16; j++) {
			s[j] = key0 + j >= key_lo && key0 + j <= key_hi ? s[j] * LOG2E : -INFINITY;
			mt = fmaxf(mt, s[j]);
		}
		mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
		const float m_new = fmaxf(m, mt);
		/* a row with no key yet (past nq, or before its window) keeps m = -inf, l = 0 */
		const float corr = m_new == -INFINITY ? 1.0f : exp2f(m - m_new);
		float sum = 0.0f;
		uint32_t pk[8];
#pragma unroll
		for (int j = 0; j < 16; j += 2) {
			float e0 = s[j] == -INFINITY ? 0.0f : exp2f(s[j] - m_new);
			float e1 = s[j + 1] == -INFINITY ? 0.0f : exp2f(s[j + 1] - m_new);
			sum += e0 + e1;
			pk[j / 2] = (uint32_t)t_bits(st_t<T>(e0)) | (uint32_t)t_bits(st_t<T>(e1))
									<< 16;
		}
		T *pw = p_s[warp];
		*(uint4 *)&pw[r * LDP + half * 16] = make_uint4(pk[0], pk[1], pk[2], pk[3]);
		*(uint4 *)&pw[r * LDP + half * 16 + 8] = make_uint4(pk[4], pk[5], pk[6], pk[7]);
		sum += __shfl_xor_sync(0xffffffffu, sum, 1);
		l = l * corr + sum;
		m = m_new;
#pragma unroll
		for (int c = 0; c < CH; c++)
#pragma unroll
			for (int e = 0; e < 8; e++)
				o[c][e] *= corr;
		__syncwarp();

		/* O += P V, 16 columns at a time: V as stored, [key][dim], is row-major */
		wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pa0, pa1;
		wmma::load_matrix_sync(pa0, pw, LDP);
		wmma::load_matrix_sync(pa1, pw + 16, LDP);
#pragma unroll
		for (int c = 0; c < CH; c++) {
			if (c * 16 >= hd)
				break; /* padding (uniform) */
			wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vb;
			wmma::fragment<wmma::accumulator, 16, 16, 16, float> pv;
			wmma::fill_fragment(pv, 0.0f);
			wmma::load_matrix_sync(vb, &v_s[c * 16], LD);
			wmma::mma_sync(pv, pa0, vb, pv);
			wmma::load_matrix_sync(vb, &v_s[16 * LD + c * 16], LD);
			wmma::mma_sync(pv, pa1, vb, pv);
			wmma::store_matrix_sync(sw, pv, 16, wmma::mem_row_major);
			__syncwarp();
#pragma unroll
			for (int e = 0; e < 8; e++)
				o[c][e] += sw[r * 16 + half * 8 + e];
			__syncwarp(); /* read before the next chunk's store */
		}
	}
	if (r >= nq)
		return;
	T *out = (T *)a.out + (int64_t)(t0 + r) * a.n_head * hd + (int64_t)h * hd;
	/* the sink, in the log2 units of m (attn_sink_fold's arithmetic with exp2f) */
	const float sink = a.sinks ? a.sinks[h] * LOG2E : -INFINITY;
	const float m_s = fmaxf(m, sink);
	const float cf = exp2f(m - m_s);
	l = l * cf + (sink == -INFINITY ? 0.0f : exp2f(sink - m_s));
#pragma unroll
	for (int c = 0; c < CH; c++)
#pragma unroll
		for (int e = 0; e < 8; e++) {
			int d = c * 16 + half * 8 + e;
			if (d < hd) /* l >= 1 (the query's own key); a NaN must reach the sampler */
				out[d] = st_t<T>(o[c][e] * cf / l);
		}
}

/* Whether attn_prefill_tc_kernel takes the tiles of this shape: 16-bit K/V (tensor cores
 * take no fp32 inputs but TF32, and an f32 model runs in f32 to match the CPU exactly),
 * heads of 16 to 128 dimensions in steps of 16 (whole fragments; 16-byte K/V loads). */
static bool prefill_tc_ok(const struct gpu_attn_args *a, size_t es)
{
	return es == 2 && a->prefill != GPU_ATTN_PREFILL_CUDA_CORES && a->head_dim % 16 == 0 &&
	       a->head_dim <= 128 && a->n_head % a->n_head_kv == 0 && a->kv.kv_dim % 8 == 0 &&
	       a->kv.block_stride % 8 == 0 && a->kv.v_offset % 8 == 0 &&
	       (uintptr_t)a->kv.base % 16 == 0;
}

template <typename T>
static void launch_prefill_tc(const struct gpu_attn_args *a, cudaStream_t stream)
{
	if constexpr (sizeof(T) != 2)
		return; /* prefill_tc_ok refuses it */
	else {
		const int G = a->n_head / a->n_head_kv;
		const int nw = G % 4 == 0 ? 4 : G % 3 == 0 ? 3 : G % 2 == 0 ? 2 : 1;
		dim3 grid(a->n_head_kv * (G / nw), a->n_tiles);
		if (a->head_dim <= 64)
			attn_prefill_tc_kernel<T, 64><<<grid, nw * 32, 0, stream>>>(*a);
		else
			attn_prefill_tc_kernel<T, 128><<<grid, nw * 32, 0, stream>>>(*a);
	}
}

size_t gpu_attention_partial_floats(int n_tok, int n_head, int head_dim, int n_split)
{
	return n_split <= 1 ? 0 : (size_t)n_tok * n_head * n_split * (head_dim + 2);
}

int gpu_attention_splits(int n_tok, int n_head, int n_head_kv, int head_dim, enum gpu_dtype dt,
			 int max_ctx, int n_sm, int per_sm, size_t max_partial_floats)
{
	if (n_tok <= 0 || n_head <= 0 || head_dim > GPU_ATTN_SPLIT_HEAD)
		return 1; /* nothing for the per-query kernel (all tokens are in tiles), or
			   * a head whose splits the merge cannot take */
	/* The GQA decode kernel runs one block per KV head, the per-query one per query head. */
	bool gqa = attn_decode_gqa_ok(n_head, n_head_kv, head_dim, n_head_kv * head_dim,
				      gpu_dtype_size(dt));
	int64_t base = (int64_t)n_tok * (gqa ? n_head_kv : n_head); /* blocks a split */
	int64_t wave = (int64_t)n_sm * (per_sm > 0 ? per_sm : 1);  /* blocks held at once */
	/* One whole wave: the most splits whose blocks the SMs hold at once, so that every
	 * block slot works on 1/s of each context. One split more would start a second wave
	 * of a few blocks that takes as long as the first. A grid of a wave or more keeps
	 * every slot busy but in its last wave: 1 split (splitting to fill that wave would
	 * cost every token the merge pass for at most 1 / waves of the time). */
	int64_t s = base >= wave ? 1 : wave / base;
	/* At least GPU_ATTN_SPLIT_MIN_KEYS keys a split: a split's fixed costs (its block's
	 * start, q, the first tile's load latency, G x (head_dim + 2) floats written to
	 * partial[] and read back by the merge) stay small against its K/V (bf16, 128 dims:
	 * 2 x 2 KiB of partials against 64 KiB of K/V, ~6 %). */
	if (s > max_ctx / GPU_ATTN_SPLIT_MIN_KEYS)
		s = max_ctx / GPU_ATTN_SPLIT_MIN_KEYS;
	/* At most GPU_ATTN_SPLIT_MAX: each thread of attn_reduce_kernel sums its dimension
	 * over the splits serially (8 loads in flight), so its time grows with the count:
	 * 128 are ~16 L2 round trips. More would buy little: one token of Llama-3-8B's
	 * shape on an H100 fills its wave at 132 x 8 / 8 = 132. */
	if (s > GPU_ATTN_SPLIT_MAX)
		s = GPU_ATTN_SPLIT_MAX;
	/* within the scratch the caller has */
	while (s > 1 &&
	       gpu_attention_partial_floats(n_tok, n_head, head_dim, (int)s) > max_partial_floats)
		s--;
	return s < 1 ? 1 : (int)s;
}

/* cudaOccupancyMaxActiveBlocksPerMultiprocessor of the per-query kernel instance that
 * launch() below takes for these heads (NPL: head_dim in lanes, as launch() buckets it). */
template <typename T, int NPL>
static cudaError_t decode_occupancy(int n_head, int n_head_kv, int head_dim, int *per_sm)
{
	const int threads = ATTN_WARPS * 32;
	if (!attn_decode_gqa_ok(n_head, n_head_kv, head_dim, n_head_kv * head_dim, sizeof(T)))
		return cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, attn_kernel<T, NPL>,
								     threads, 0);
	if constexpr ((sizeof(T) == 4 && NPL > 4) || NPL > 8)
		return cudaErrorInvalidValue; /* decode_gqa_ok refuses it */
	else if (n_head / n_head_kv <= ATTN_WARPS)
		return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
		    per_sm, attn_decode_gqa_kernel<T, NPL, 1>, threads, 0);
	else
		return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
		    per_sm, attn_decode_gqa_kernel<T, NPL, 2>, threads, 0);
}

template <typename T>
static cudaError_t occupancy(int n_head, int n_head_kv, int head_dim, int *per_sm)
{
	int npl = (head_dim + 31) / 32;
	if (npl <= 1)
		return decode_occupancy<T, 1>(n_head, n_head_kv, head_dim, per_sm);
	if (npl <= 2)
		return decode_occupancy<T, 2>(n_head, n_head_kv, head_dim, per_sm);
	if (npl <= 4)
		return decode_occupancy<T, 4>(n_head, n_head_kv, head_dim, per_sm);
	if (npl <= 8)
		return decode_occupancy<T, 8>(n_head, n_head_kv, head_dim, per_sm);
	if (npl <= 16)
		return decode_occupancy<T, 16>(n_head, n_head_kv, head_dim, per_sm);
	return decode_occupancy<T, 18>(n_head, n_head_kv, head_dim, per_sm);
}

cudaError_t gpu_attention_occupancy(enum gpu_dtype dt, int n_head, int n_head_kv, int head_dim,
				    int *per_sm)
{
	*per_sm = 0;
	if (head_dim < 1 || head_dim > GPU_ATTN_MAX_HEAD || n_head_kv < 1 || n_head % n_head_kv != 0)
		return cudaErrorInvalidValue;
	GPU_DISPATCH_DTYPE(dt, T, return occupancy<T>(n_head, n_head_kv, head_dim, per_sm));
	return cudaErrorInvalidValue;
}

template <typename T>
static cudaError_t launch(const struct gpu_attn_args *a, int n_split, float *partial,
			  cudaStream_t stream)
{
	int npl = (a->head_dim + 31) / 32;
	bool tiled = a->tiles && a->n_tiles > 0 && npl <= 4;
	struct gpu_attn_args q = *a;
	if (a->head_dim > GPU_ATTN_SPLIT_HEAD)
		n_split = 1; /* attn_merge takes up to 2 x 256 dimensions (deepseek2's 576: one) */
	if (!tiled) {	     /* every token through the per-query kernel */
		/* The caller sized partial[] (and chose n_split) for the n_list listed tokens;
		 * when tiles were given but the head is too large for the tiled kernel, all
		 * n_tok tokens come here and n_split * n_tok partial rows would overrun that
		 * scratch. One split needs no scratch, and such a pass has enough blocks. */
		if (a->tiles && a->n_tiles > 0)
			n_split = 1;
		q.list = NULL;
		q.n_list = a->n_tok;
	}
	if (tiled && prefill_tc_ok(a, sizeof(T))) {
		launch_prefill_tc<T>(a, stream);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess)
			return e;
	} else if (tiled) {
		dim3 grid(a->n_head, a->n_tiles);
		if (npl <= 1)
			attn_tiled_kernel<T, 1><<<grid, ATTN_WARPS * 32, 0, stream>>>(*a);
		else if (npl <= 2)
			attn_tiled_kernel<T, 2><<<grid, ATTN_WARPS * 32, 0, stream>>>(*a);
		else
			attn_tiled_kernel<T, 4><<<grid, ATTN_WARPS * 32, 0, stream>>>(*a);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess)
			return e;
	}
	if (q.n_list <= 0)
		return cudaSuccess;
	bool merged = false; /* the splits merged by the decode kernel's last blocks */
	if (attn_decode_gqa_ok(a->n_head, a->n_head_kv, a->head_dim, a->kv.kv_dim, sizeof(T)) &&
	    (uintptr_t)a->kv.base % 16 == 0) {
		dim3 grid(a->n_head_kv, q.n_list, n_split);
		merged = a->merge_counters != NULL;
		if (npl <= 1)
			launch_decode_gqa<T, 1>(grid, q, n_split, partial, stream);
		else if (npl <= 2)
			launch_decode_gqa<T, 2>(grid, q, n_split, partial, stream);
		else if (npl <= 4)
			launch_decode_gqa<T, 4>(grid, q, n_split, partial, stream);
		else
			launch_decode_gqa<T, 8>(grid, q, n_split, partial, stream);
	} else {
		dim3 grid(a->n_head, q.n_list, n_split);
		if (npl <= 1)
			attn_kernel<T, 1>
			    <<<grid, ATTN_WARPS * 32, 0, stream>>>(q, n_split, partial);
		else if (npl <= 2)
			attn_kernel<T, 2>
			    <<<grid, ATTN_WARPS * 32, 0, stream>>>(q, n_split, partial);
		else if (npl <= 4)
			attn_kernel<T, 4>
			    <<<grid, ATTN_WARPS * 32, 0, stream>>>(q, n_split, partial);
		else if (npl <= 8)
			attn_kernel<T, 8>
			    <<<grid, ATTN_WARPS * 32, 0, stream>>>(q, n_split, partial);
		else if (npl <= 16) /* gemma4's global heads of 512 (and any head of 257..512) */
			attn_kernel<T, 16>
			    <<<grid, ATTN_WARPS * 32, 0, stream>>>(q, n_split, partial);
		else /* deepseek2's latent rows of 576 (one split) */
			attn_kernel<T, 18>
			    <<<grid, ATTN_WARPS * 32, 0, stream>>>(q, n_split, partial);
	}
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess || n_split == 1 || merged)
		return e;
	dim3 g2(q.n_list, a->n_head);
	int threads = attn_merge_threads(a->head_dim);
	if (threads <= RED_THREADS)
		attn_reduce_kernel<T, RED_THREADS><<<g2, threads, 0, stream>>>(
		    partial, q.list, a->sinks, a->n_head, a->head_dim, n_split, (T *)a->out);
	else
		attn_reduce_kernel<T, RED_THREADS_WIDE><<<g2, threads, 0, stream>>>(
		    partial, q.list, a->sinks, a->n_head, a->head_dim, n_split, (T *)a->out);
	return cudaGetLastError();
}

cudaError_t gpu_attention(const struct gpu_attn_args *a, enum gpu_dtype dt, int n_split,
			  float *partial, cudaStream_t stream)
{
	if (a->n_tok <= 0)
		return cudaSuccess;
	if (a->head_dim > GPU_ATTN_MAX_HEAD || a->head_dim < 1 || a->n_head % a->n_head_kv != 0 ||
	    a->n_tok > 65535 || a->n_tiles > 65535 || n_split > 65535)
		return cudaErrorInvalidValue;
	if (n_split < 1)
		n_split = 1;
	GPU_DISPATCH_DTYPE(dt, T, return launch<T>(a, n_split, partial, stream));
	return cudaErrorInvalidValue;
}
