/* moe: routing, the grouped expert projections and the weighted sum (gpu/moe.cuh says
 * what each computes).
 *
 * gpu_moe_route is one block: a pass has at most a few thousand tokens, the routing of one
 * is a few hundred operations, and grouping needs every token's choice, which one block
 * sees after a barrier (one graph node instead of three). Each warp routes its tokens
 * (softmax over its row in shared memory, then k arg-max rounds, each a warp reduction
 * with ties to the lower index), then the pairs are counted per (warp chunk, expert) and
 * placed stably: chunk after chunk, so in pair order within an expert.
 *
 * The projections are GEMMs over tiles of <= GPU_MOE_TILE pairs of one expert (a block
 * row each): every weight element loaded is used for all pairs of the tile (an expert's
 * weights are read once per tile, not once per token: once per pass in decode, where an
 * expert rarely gets more than 16 tokens). Two kernels:
 *  - moe_tc_kernel (16-bit types, both widths multiples of 16): tensor cores (wmma
 *    16x16x16, fp32 accumulators). The tile's inputs are staged in shared memory chunk by
 *    chunk (rows past the tile's pairs zero); a warp owns 16 output columns (16 gate and
 *    the 16 matching up rows for gate|up, so the gated activation is its epilogue) and
 *    loads its weight fragments straight from global memory (a weight row is the
 *    column-major B operand);
 *  - moe_mm_kernel (f32, or other widths): CUDA cores. A warp owns two weight rows (gate
 *    row j and up row j, or rows 2i, 2i + 1 for down), a lane 8 consecutive inputs of each
 *    256-input chunk; the tile's inputs staged as fp32. Block-quantized experts
 *    (gpu_moe_gate_up_q, gpu_moe_down_q) take this kernel alone: a lane decodes its 8
 *    weights of each row once a chunk (gpu/qblock.cuh, a quarter of a 32-element group)
 *    and uses them for every pair of the tile, so an expert's blocks are read and decoded
 *    once a tile as the 16-bit weights are; the sums are the same, in the same order.
 * Either way an output element depends on its own pair's inputs only (a tensor core's
 * d[m][n] reads row m of A alone). gpu_moe_path says which a pass takes: the wmma kernel
 * when tiles are full enough (prefill), the CUDA-core one in decode, whose 16x more warps
 * a tile keep more weight loads in flight. ESTIMATE, not measured (no GPU in the session
 * that wrote it); neither kernel is tuned. */
#include <float.h>
#include <limits.h>
#include <mma.h>

#include "gpu/glu.cuh"
#include "gpu/gpu_ops.cuh" /* gpu_qtype_resident, gpu_qtype_row_bytes */
#include "gpu/moe.cuh"
#include "gpu/qblock.cuh"

#define MR_WARPS   8 /* gpu_moe_route's block */
#define MR_THREADS (MR_WARPS * 32)
#define MM_WARPS   8 /* the projections' blocks */
#define MM_THREADS (MM_WARPS * 32)
#define MM_CHUNK   256 /* inputs staged a step: 8 a lane */

/* The epilogues of both projection kernels for output column r of expert e, o: gpu_moe_oai
 * by value (zeros: none). GLU: act(g + b_gate, u + b_up); else y + b_down. */
__device__ __forceinline__ float moe_glu(float g, float u, int e, int n_out, int r, bool gelu,
					 const struct gpu_moe_oai &o)
{
	if (o.b_gate) {
		g += o.b_gate[(size_t)e * n_out + r];
		u += o.b_up[(size_t)e * n_out + r];
	}
	if (o.clamp > 0.0f) /* step35 */
		return gpu_glu_clamp(g, u, o.clamp);
	return o.alpha > 0.0f ? gpu_glu_oai(g, u, o.alpha, o.limit) : gpu_glu(g, u, gelu);
}

/* llama4 (gpu_moe_oai.w_in): the routing weight of the pair at sorted position s */
__device__ __forceinline__ float moe_w_in(const struct gpu_moe_plan &plan, int s)
{
	return plan.w[plan.sorted[s]];
}

__device__ __forceinline__ float moe_down_out(float y, int e, int n_out, int r,
					      const struct gpu_moe_oai &o)
{
	return o.b_down ? y + o.b_down[(size_t)e * n_out + r] : y;
}

int gpu_moe_max_tiles(int n_pairs, int n_expert)
{
	/* sum over experts of ceil(c_e / T) <= floor(sum c_e / T) + (experts with c_e > 0) */
	return n_pairs / GPU_MOE_TILE + (n_pairs < n_expert ? n_pairs : n_expert);
}

/* ---- routing ---- */

/* How a token's experts are chosen (moe.cuh): softmax (sigmoid false) or sigmoid gating,
 * the selection bias (NULL: none), the weights' scale, and deepseek2's grouping (grouped:
 * moe_route_grouped's semantics; n_group > 1: the groups limited to n_group_used) */
struct moe_route_opts {
	bool sigmoid, grouped;
	const float *sel_bias;
	float scale;
	int n_group, n_group_used;
	bool by_logit; /* llama4 (with sigmoid): the logits themselves select */
};

/* The warp's largest (v, i) of the lanes' pairs, ties to the lower i, in every lane */
__device__ __forceinline__ void warp_max_lo(float &v, int &i)
{
	for (int o = 16; o > 0; o >>= 1) {
		const float ov = __shfl_xor_sync(0xffffffffu, v, o);
		const int oi = __shfl_xor_sync(0xffffffffu, i, o);
		if (ov > v || (ov == v && oi < i)) {
			v = ov;
			i = oi;
		}
	}
}

/* Lane g < n_group of a warp: the sum of the two largest of group g's G selection values
 * v[g G ..] (moe_route_grouped's: the first largest by strict '>', then the first largest of
 * the others); the warp's n_group_used largest sums (ties: the lower group) kept as bits. */
__device__ unsigned moe_keep_groups(const float *v, int G, int n_group, int n_group_used, int lane)
{
	float score = -INFINITY;
	if (lane < n_group) {
		const float *g = v + (size_t)lane * G;
		int a = 0;
		for (int i = 1; i < G; i++)
			if (g[i] > g[a])
				a = i;
		int b = a == 0 ? 1 : 0;
		for (int i = 0; i < G; i++)
			if (i != a && g[i] > g[b])
				b = i;
		score = g[a] + g[b];
		if (score != score)
			score = -FLT_MAX; /* NaN: below every number */
	}
	unsigned keep = 0;
	for (int j = 0; j < n_group_used; j++) {
		const bool cand = lane < n_group && !((keep >> lane) & 1u);
		float bv = cand ? score : -INFINITY;
		int bi = cand ? lane : INT_MAX;
		warp_max_lo(bv, bi);
		keep |= 1u << bi;
	}
	return keep;
}

__global__ __launch_bounds__(MR_THREADS) void moe_route_kernel(const float *logits, int n_tok,
							       int n_expert, int k, bool norm,
							       struct gpu_moe_plan plan,
							       struct moe_route_opts ro)
{
	const bool sigmoid = ro.sigmoid;
	const float *sel_bias = ro.sel_bias;
	const float scale = ro.scale;
	/* selection keys of any value (biased, or groups masked to -inf) */
	const bool wide = sigmoid || sel_bias || ro.n_group > 1;
	/* each warp's token's probabilities; chosen ones become -2 (below a NaN's -1) */
	__shared__ float sp[MR_WARPS][GPU_MOE_MAX_EXPERT];
	/* pairs of warp chunk c routed to expert e, then the chunk's next position for e */
	__shared__ int32_t hist[MR_WARPS][GPU_MOE_MAX_EXPERT];
	__shared__ int32_t base[GPU_MOE_MAX_EXPERT]; /* offs[e] */
	__shared__ int32_t toff[GPU_MOE_MAX_EXPERT]; /* e's first tile */
	const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
	float *p = sp[warp];
	for (int t = warp; t < n_tok; t += MR_WARPS) {
		const float *l = logits + (size_t)t * n_expert;
		float m = -INFINITY, s = 0.0f; /* softmax: the max and the sum (every lane) */
		if (sigmoid) { /* glm4moe: p[e] holds the selection value p + sel_bias[e] */
			for (int e = lane; e < n_expert; e += 32) {
				float v = 1.0f / (1.0f + expf(-l[e]));
				p[e] = ro.by_logit ? l[e] : sel_bias ? v + sel_bias[e] : v;
			}
		} else {
			for (int e = lane; e < n_expert; e += 32)
				m = fmaxf(m, l[e]);
			m = warp_max(m);
			for (int e = lane; e < n_expert; e += 32) {
				float v = expf(l[e] - m);
				p[e] = v;
				s += v;
			}
			s = warp_sum(s);
			for (int e = lane; e < n_expert; e += 32)
				p[e] = sel_bias ? p[e] / s + sel_bias[e] : p[e] / s;
		}
		/* chosen entries become `taken`, below a NaN's key: softmax values are >= 0, so
		 * -2 / -1 there; a biased selection value may be any number, so -inf / -FLT_MAX */
		const float taken = wide ? -INFINITY : -2.0f;
		const float nan_key = wide ? -FLT_MAX : -1.0f;
		__syncwarp();	      /* the arg-max rounds read other lanes' entries */
		if (ro.n_group > 1) { /* deepseek2: the other groups' experts out of the choice */
			const int G = n_expert / ro.n_group;
			const unsigned keep =
			    moe_keep_groups(p, G, ro.n_group, ro.n_group_used, lane);
			for (int e = lane; e < n_expert; e += 32)
				if (!((keep >> (e / G)) & 1u))
					p[e] = -INFINITY;
			__syncwarp();
		}
		float wsum = 0.0f; /* the chosen p in slot order, the same in every lane */
		for (int j = 0; j < k; j++) {
			/* a lane's candidates in ascending index: '>' keeps the lower on a tie */
			float bv = wide ? -INFINITY : -3.0f;
			int bi = INT_MAX;
			for (int e = lane; e < n_expert; e += 32) {
				float v = p[e], key = v != v ? nan_key : v;
				if (key > bv) {
					bv = key;
					bi = e;
				}
			}
			warp_max_lo(bv, bi);
			/* every lane, before its owner marks it; glm4moe, deepseek2: the unbiased p
			 * (the softmax's expression again where p holds a biased value) */
			float pv = sigmoid    ? 1.0f / (1.0f + expf(-l[bi]))
				   : sel_bias ? expf(l[bi] - m) / s
					      : p[bi];
			__syncwarp();
			if ((bi & 31) == lane)
				p[bi] = taken;
			wsum += pv;
			if (lane == 0) {
				plan.ids[(size_t)t * k + j] = bi;
				plan.w[(size_t)t * k + j] = pv;
			}
		}
		/* llama.cpp's clamp of the norm's sum */
		if ((sigmoid || ro.grouped) && wsum < 6.103515625e-5f)
			wsum = 6.103515625e-5f;
		if (norm && lane == 0)
			for (int j = 0; j < k; j++)
				plan.w[(size_t)t * k + j] = plan.w[(size_t)t * k + j] / wsum;
		if (scale != 1.0f && lane == 0)
			for (int j = 0; j < k; j++)
				plan.w[(size_t)t * k + j] = plan.w[(size_t)t * k + j] * scale;
		__syncwarp(); /* the next token's writes of p come after this one's reads */
	}
	__syncthreads(); /* every id written (global memory, this block) */

	/* count: warp c takes pairs [c P / W, (c + 1) P / W) */
	const int64_t P = (int64_t)n_tok * k;
	const int64_t c0 = P * warp / MR_WARPS, c1 = P * (warp + 1) / MR_WARPS;
	for (int e = lane; e < n_expert; e += 32)
		hist[warp][e] = 0;
	__syncwarp();
	for (int64_t q = c0 + lane; q < c1; q += 32)
		atomicAdd(&hist[warp][plan.ids[q]], 1);
	__syncthreads();
	/* per expert: each chunk's first position among the expert's pairs */
	for (int e = (int)threadIdx.x; e < n_expert; e += MR_THREADS) {
		int32_t run = 0;
		for (int c = 0; c < MR_WARPS; c++) {
			int32_t n = hist[c][e];
			hist[c][e] = run;
			run += n;
		}
		toff[e] = run; /* the count, until the scan below */
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		int32_t o = 0, nt = 0;
		for (int e = 0; e < n_expert; e++) {
			int32_t n = toff[e];
			base[e] = o;
			plan.offs[e] = o;
			toff[e] = nt;
			o += n;
			nt += (n + GPU_MOE_TILE - 1) / GPU_MOE_TILE;
		}
		plan.offs[n_expert] = o;
		*plan.n_tiles = nt;
	}
	__syncthreads();
	/* place: a chunk's pairs in order (stable) */
	if (lane == 0)
		for (int64_t q = c0; q < c1; q++) {
			int e = plan.ids[q];
			plan.sorted[base[e] + hist[warp][e]++] = (int32_t)q;
		}
	for (int e = (int)threadIdx.x; e < n_expert; e += MR_THREADS) {
		int32_t n = (e + 1 < n_expert ? base[e + 1] : (int32_t)P) - base[e];
		for (int32_t i = 0; i * GPU_MOE_TILE < n; i++) {
			plan.tiles[2 * (toff[e] + i)] = e;
			plan.tiles[2 * (toff[e] + i) + 1] = base[e] + i * GPU_MOE_TILE;
		}
	}
}

static cudaError_t moe_route_launch(const float *logits, int n_tok, int n_expert, int k, bool norm,
				    const struct gpu_moe_plan *plan,
				    const struct moe_route_opts &ro, cudaStream_t stream)
{
	if (n_tok <= 0)
		return cudaSuccess;
	if (k < 1 || k > n_expert || n_expert > GPU_MOE_MAX_EXPERT)
		return cudaErrorInvalidValue;
	if (ro.n_group > 1 &&
	    (ro.n_group > GPU_MOE_MAX_GROUPS || n_expert % ro.n_group != 0 ||
	     n_expert / ro.n_group < 2 || ro.n_group_used < 1 || ro.n_group_used >= ro.n_group ||
	     k > ro.n_group_used * (n_expert / ro.n_group)))
		return cudaErrorInvalidValue;
	moe_route_kernel<<<1, MR_THREADS, 0, stream>>>(logits, n_tok, n_expert, k, norm, *plan, ro);
	return cudaGetLastError();
}

cudaError_t gpu_moe_route(const float *logits, int n_tok, int n_expert, int k, bool norm,
			  const struct gpu_moe_plan *plan, cudaStream_t stream)
{
	const struct moe_route_opts ro = {false, false, NULL, 1.0f, 1, 0, false};
	return moe_route_launch(logits, n_tok, n_expert, k, norm, plan, ro, stream);
}

cudaError_t gpu_moe_route_sigmoid(const float *logits, const float *sel_bias, int n_tok,
				  int n_expert, int k, bool norm, float scale,
				  const struct gpu_moe_plan *plan, cudaStream_t stream)
{
	const struct moe_route_opts ro = {true, false, sel_bias, scale, 1, 0, false};
	return moe_route_launch(logits, n_tok, n_expert, k, norm, plan, ro, stream);
}

cudaError_t gpu_moe_route_grouped(const float *logits, const float *sel_bias, int n_tok,
				  int n_expert, int k, bool sigmoid, int n_group, int n_group_used,
				  bool norm, float scale, const struct gpu_moe_plan *plan,
				  cudaStream_t stream)
{
	const struct moe_route_opts ro = {sigmoid, true,	 sel_bias, scale,
					  n_group, n_group_used, false};
	return moe_route_launch(logits, n_tok, n_expert, k, norm, plan, ro, stream);
}

cudaError_t gpu_moe_route_llama4(const float *logits, int n_tok, int n_expert, int k,
				 const struct gpu_moe_plan *plan, cudaStream_t stream)
{
	const struct moe_route_opts ro = {true, false, NULL, 1.0f, 1, 0, true};
	return moe_route_launch(logits, n_tok, n_expert, k, false, plan, ro, stream);
}

/* ---- the expert projections ---- */

/* What an expert kernel computes: the gated first projection (gate and up rows, the GLU
 * epilogue), the non-gated one (up rows alone, relu(u)^2: nemotron_h_moe), or down. The
 * first two read a pair's token row and write act at its sorted position; down reads act
 * and writes y at the pair id. */
enum moe_kind { MOE_GATE_UP, MOE_UP, MOE_DOWN };

/* Block-quantized experts as moe_mm_kernel reads them (gpu_moe_qw, with each array's row
 * bytes): rows p0 (gate, or down) and p1 (up), types t0, t1 (qb_dec8_x's). */
struct moe_qk {
	const uint8_t *p0, *p1;
	size_t rb0, rb1;
	int t0, t1;
};

/* MOE_GATE_UP: act[sorted position] = act(gate_e x) * (up_e x), x the pair's token row of
 * x; MOE_UP: act[sorted position] = relu(up_e x)^2; MOE_DOWN: y[pair id] = W_e act[sorted
 * position]. W_e is expert e's [rows, n_in] block (Q: its rows in qk's blocks instead, gate
 * and up rows in their own arrays). The
 * launch bounds' 1 block: without it ptxas aimed at 64 registers for sm_80 and spilled
 * (tests/gpu_gates.sh); 72-80 are used. */
/* The tile block y of an expert kernel serves: false (for the whole block) when the
 * routing made fewer tiles than the grid allows. Else its expert *e and pair count *nt
 * (<= GPU_MOE_TILE), and, written by the first GPU_MOE_TILE threads (the caller syncs before
 * reading them), each pair's input and output row: token and sorted position for the first
 * projection (FIRST: gate|up, or up), sorted position and pair id for down; rows past *nt
 * point at pair 0. */
template <bool FIRST>
__device__ __forceinline__ bool moe_tile(const struct gpu_moe_plan &plan, int k, int32_t *src,
					 int32_t *dst, int *e, int *nt)
{
	const int tile = (int)blockIdx.y;
	if (tile >= *plan.n_tiles)
		return false;
	const int s0 = plan.tiles[2 * tile + 1];
	*e = plan.tiles[2 * tile];
	*nt = min(GPU_MOE_TILE, plan.offs[*e + 1] - s0);
	if (threadIdx.x < GPU_MOE_TILE) {
		int s = s0 + (int)threadIdx.x;
		int pid = (int)threadIdx.x < *nt ? plan.sorted[s] : 0;
		src[threadIdx.x] = FIRST ? pid / k : s;
		dst[threadIdx.x] = FIRST ? s : pid;
	}
	return true;
}

template <typename T, int KIND, bool Q>
__global__ __launch_bounds__(MM_THREADS, 1) void moe_mm_kernel(const T *W, struct moe_qk qk,
							       int n_out, int n_in, const T *x,
							       int k, struct gpu_moe_plan plan,
							       T *act, float *y, bool gelu,
							       struct gpu_moe_oai oai)
{
	__shared__ __align__(16) float xs[GPU_MOE_TILE][MM_CHUNK];
	__shared__ int32_t src[GPU_MOE_TILE], dst[GPU_MOE_TILE]; /* input, output rows */
	constexpr bool GLU = KIND == MOE_GATE_UP, FIRST = KIND != MOE_DOWN;
	int e, nt;
	if (!moe_tile<FIRST>(plan, k, src, dst, &e, &nt))
		return; /* the whole block: fewer tiles than the grid allows */
	const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
	int r0, r1; /* gate row j and up row j, or rows 2i, 2i + 1 (MOE_UP, MOE_DOWN) */
	bool live;
	if (GLU) {
		int j = (int)blockIdx.x * MM_WARPS + warp;
		live = j < n_out;
		r0 = j;
		r1 = n_out + j;
	} else {
		r0 = ((int)blockIdx.x * MM_WARPS + warp) * 2;
		r1 = r0 + 1;
		live = r1 < n_out; /* n_out is even */
	}
	const size_t rows_e = GLU ? 2 * (size_t)n_out : (size_t)n_out;
	const T *w0p = Q ? NULL : W + ((size_t)e * rows_e + (size_t)(live ? r0 : 0)) * n_in;
	const T *w1p = Q ? NULL : W + ((size_t)e * rows_e + (size_t)(live ? r1 : 0)) * n_in;
	/* Q: expert e's rows r0 and r1 of down (or up), or its gate and up rows r0 */
	const size_t qr0 = (size_t)e * n_out + (size_t)(live ? r0 : 0);
	const uint8_t *q0 = Q ? qk.p0 + qr0 * qk.rb0 : NULL;
	const uint8_t *q1 = Q ? (GLU ? qk.p1 + qr0 * qk.rb1 : q0 + (live ? qk.rb0 : 0)) : NULL;
	constexpr int V = 16 / (int)sizeof(T); /* elements of a 16-byte load */
	float acc0[GPU_MOE_TILE], acc1[GPU_MOE_TILE];
#pragma unroll
	for (int t = 0; t < GPU_MOE_TILE; t++)
		acc0[t] = acc1[t] = 0.0f;
	__syncthreads(); /* src, dst */
	for (int k0 = 0; k0 < n_in; k0 += MM_CHUNK) {
		for (int v = (int)threadIdx.x; v < GPU_MOE_TILE * MM_CHUNK / V; v += MM_THREADS) {
			int t = v / (MM_CHUNK / V), c = v % (MM_CHUNK / V) * V;
			if (t < nt && k0 + c < n_in) {
				float f[V];
				vec_f32<T>(*(const uint4 *)(x + (size_t)src[t] * n_in + k0 + c), f);
#pragma unroll
				for (int i = 0; i < V; i++)
					xs[t][c + i] = f[i];
			}
		}
		__syncthreads();
		const int c = lane * 8;
		if (live && k0 + c < n_in) {
			float w0[8], w1[8];
			if (Q) { /* elements k0 + c ..: group (k0 + c) / 32, its quarter lane % 4 */
				qb_dec8_x(qk.t0, q0, (k0 + c) >> 5, lane & 3, w0);
				qb_dec8_x(qk.t1, q1, (k0 + c) >> 5, lane & 3, w1);
			} else {
#pragma unroll
				for (int h = 0; h < 8 / V; h++) {
					vec_f32<T>(*(const uint4 *)(w0p + k0 + c + h * V),
						   w0 + h * V);
					vec_f32<T>(*(const uint4 *)(w1p + k0 + c + h * V),
						   w1 + h * V);
				}
			}
#pragma unroll
			for (int t = 0; t < GPU_MOE_TILE; t++) {
				if (t >= nt)
					break;
				float a0 = acc0[t], a1 = acc1[t];
#pragma unroll
				for (int i = 0; i < 8; i++) {
					float xv = xs[t][c + i];
					a0 += w0[i] * xv;
					a1 += w1[i] * xv;
				}
				acc0[t] = a0;
				acc1[t] = a1;
			}
		}
		__syncthreads(); /* xs is refilled */
	}
	if (!live)
		return;
#pragma unroll
	for (int t = 0; t < GPU_MOE_TILE; t++) {
		if (t >= nt)
			break;
		float g = warp_sum(acc0[t]), u = warp_sum(acc1[t]);
		if (lane != 0)
			continue;
		if (GLU) {
			if (oai.w_in) { /* llama4 */
				const float w = moe_w_in(plan, dst[t]);
				g *= w;
				u *= w;
			}
			act[(size_t)dst[t] * n_out + r0] =
			    st_t<T>(moe_glu(g, u, e, n_out, r0, gelu, oai));
		} else if (FIRST) { /* nemotron_h_moe: rows r0, r1 of up */
			act[(size_t)dst[t] * n_out + r0] = st_t<T>(gpu_relu2f(g));
			act[(size_t)dst[t] * n_out + r1] = st_t<T>(gpu_relu2f(u));
		} else {
			y[(size_t)dst[t] * n_out + r0] = moe_down_out(g, e, n_out, r0, oai);
			y[(size_t)dst[t] * n_out + r1] = moe_down_out(u, e, n_out, r1, oai);
		}
	}
}

/* ---- the expert projections on tensor cores ---- */

#define TC_WARPS   4 /* 16 output columns a warp */
#define TC_THREADS (TC_WARPS * 32)
#define TC_CHUNK   256		   /* inputs staged a step */
#define TC_LD	   (TC_CHUNK + 16) /* staged row stride: 32-byte aligned rows, banks shifted */

/* moe_mm_kernel's contract on tensor cores: T 16-bit, n_in and n_out multiples of 16. */
template <typename T, int KIND>
__global__ __launch_bounds__(TC_THREADS) void moe_tc_kernel(const T *W, int n_out, int n_in,
							    const T *x, int k,
							    struct gpu_moe_plan plan, T *act,
							    float *y, bool gelu,
							    struct gpu_moe_oai oai)
{
	using namespace nvcuda;
	__shared__ __align__(32) T xs[GPU_MOE_TILE * TC_LD];
	/* each warp's accumulators for the epilogue: [2][16][16] fp32 (gate, up; or one) */
	__shared__ __align__(32) float acc_s[TC_WARPS][2][16 * 16];
	__shared__ int32_t src[GPU_MOE_TILE], dst[GPU_MOE_TILE];
	constexpr bool GLU = KIND == MOE_GATE_UP, FIRST = KIND != MOE_DOWN;
	int e, nt;
	if (!moe_tile<FIRST>(plan, k, src, dst, &e, &nt))
		return; /* the whole block: fewer tiles than the grid allows */
	const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
	const int c0 = ((int)blockIdx.x * TC_WARPS + warp) * 16; /* the warp's first column */
	const bool live = c0 < n_out;
	const size_t rows_e = GLU ? 2 * (size_t)n_out : (size_t)n_out;
	const T *wg = W + ((size_t)e * rows_e + (size_t)(live ? c0 : 0)) * n_in;
	const T *wu = GLU ? wg + (size_t)n_out * n_in : wg;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> ag, au;
	wmma::fill_fragment(ag, 0.0f);
	wmma::fill_fragment(au, 0.0f);
	constexpr int V = 8; /* elements of a 16-byte load */
	__syncthreads();     /* src, dst */
	for (int k0 = 0; k0 < n_in; k0 += TC_CHUNK) {
		const int kc = min(TC_CHUNK, n_in - k0);
		for (int v = (int)threadIdx.x; v < GPU_MOE_TILE * TC_CHUNK / V; v += TC_THREADS) {
			int t = v / (TC_CHUNK / V), c = v % (TC_CHUNK / V) * V;
			if (c >= kc)
				continue;
			uint4 q = make_uint4(0, 0, 0, 0); /* rows past the pairs: zero */
			if (t < nt)
				q = *(const uint4 *)(x + (size_t)src[t] * n_in + k0 + c);
			*(uint4 *)&xs[t * TC_LD + c] = q;
		}
		__syncthreads();
		if (live)
			for (int kk = 0; kk < kc; kk += 16) {
				wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
				wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
				wmma::load_matrix_sync(fa, &xs[kk], TC_LD);
				wmma::load_matrix_sync(fb, wg + k0 + kk, (unsigned)n_in);
				wmma::mma_sync(ag, fa, fb, ag);
				if (GLU) {
					wmma::load_matrix_sync(fb, wu + k0 + kk, (unsigned)n_in);
					wmma::mma_sync(au, fa, fb, au);
				}
			}
		__syncthreads(); /* xs is refilled */
	}
	if (!live)
		return;
	float *sg = acc_s[warp][0], *su = acc_s[warp][1];
	wmma::store_matrix_sync(sg, ag, 16, wmma::mem_row_major);
	if (GLU)
		wmma::store_matrix_sync(su, au, 16, wmma::mem_row_major);
	__syncwarp();
	for (int i = lane; i < nt * 16; i += 32) {
		int t = i / 16, c = i % 16;
		if (GLU) {
			const float w = oai.w_in ? moe_w_in(plan, dst[t]) : 1.0f; /* llama4 */
			act[(size_t)dst[t] * n_out + c0 + c] =
			    st_t<T>(moe_glu(sg[i] * w, su[i] * w, e, n_out, c0 + c, gelu, oai));
		} else if (FIRST) /* nemotron_h_moe */
			act[(size_t)dst[t] * n_out + c0 + c] = st_t<T>(gpu_relu2f(sg[i]));
		else
			y[(size_t)dst[t] * n_out + c0 + c] =
			    moe_down_out(sg[i], e, n_out, c0 + c, oai);
	}
}

bool gpu_moe_qtype_ok(int t, int64_t n_in)
{
	return gpu_qtype_resident(t, n_in) || ((t == 39 || t == 6) && n_in > 0 && n_in % 32 == 0);
}

size_t gpu_moe_qrow_bytes(int t, int64_t n_in)
{
	if ((t == 39 || t == 6) && gpu_moe_qtype_ok(t, n_in))
		return (size_t)n_in / 32 * (t == 39 ? 17 : 22);
	return gpu_qtype_row_bytes(t, n_in); /* the GEMV's types and BF16 rows (30) */
}

/* The launch of the projections (KIND: enum moe_kind): grid (column blocks,
 * gpu_moe_max_tiles), on the kernel path says (gpu_moe_path's rule for AUTO); qw:
 * block-quantized experts (CUDA cores, BF16 inputs), else W of dt. */
template <int KIND>
static cudaError_t moe_mm(const void *W, const struct gpu_moe_qw *qw, int n_out, int n_in,
			  int n_expert, const void *x, int n_tok, int k,
			  const struct gpu_moe_plan *plan, void *act, float *y, bool gelu,
			  const struct gpu_moe_oai *oai_p, enum gpu_dtype dt,
			  enum gpu_moe_path path, cudaStream_t stream)
{
	constexpr bool GLU = KIND == MOE_GATE_UP;
	if (n_tok <= 0)
		return cudaSuccess;
	struct gpu_moe_oai oai;
	memset(&oai, 0, sizeof oai);
	if (oai_p)
		oai = *oai_p;
	if ((GLU && (!oai.b_gate != !oai.b_up)) || (oai.alpha > 0.0f && gelu) ||
	    (oai.relu2 && (oai.b_gate || oai.alpha > 0.0f || gelu)) ||
	    (oai.clamp > 0.0f && (oai.b_gate || oai.alpha > 0.0f || gelu || oai.relu2)) ||
	    (oai.w_in && (oai.b_gate || oai.relu2)) ||
	    (KIND == MOE_UP && qw)) /* not built: nemotron_h_moe's experts are not resident */
		return cudaErrorInvalidValue;
	int max_tiles = gpu_moe_max_tiles(n_tok * k, n_expert);
	if (n_out % 8 || n_in % 8 || n_out <= 0 || n_in <= 0 || max_tiles > 65535 ||
	    (!qw && (uintptr_t)W % 16) || (uintptr_t)x % 16)
		return cudaErrorInvalidValue;
	struct moe_qk qk;
	memset(&qk, 0, sizeof qk);
	if (qw) { /* each array: a type the kernel decodes, 16-byte aligned (BF16 rows' loads,
		   * Q4_K's 8-byte ones, the fp16 scales) */
		for (int i = 0; i < (GLU ? 2 : 1); i++) {
			const size_t rb = gpu_moe_qrow_bytes(qw->type[i], n_in);
			if (rb == 0 || !qw->p[i] || (uintptr_t)qw->p[i] % 16)
				return cudaErrorInvalidValue;
			*(i ? &qk.rb1 : &qk.rb0) = rb;
		}
		qk.p0 = (const uint8_t *)qw->p[0];
		qk.p1 = GLU ? (const uint8_t *)qw->p[1] : qk.p0;
		qk.t0 = qw->type[0];
		qk.t1 = GLU ? qw->type[1] : qk.t0;
		qk.rb1 = GLU ? qk.rb1 : qk.rb0;
		if (dt != GPU_BF16 || path == GPU_MOE_TENSOR_CORES)
			return cudaErrorInvalidValue;
		dim3 grid(gpu_div_up((uint64_t)n_out, GLU ? MM_WARPS : 2 * MM_WARPS),
			  (unsigned)max_tiles);
		moe_mm_kernel<__nv_bfloat16, KIND, true><<<grid, MM_THREADS, 0, stream>>>(
		    (const __nv_bfloat16 *)NULL, qk, n_out, n_in, (const __nv_bfloat16 *)x, k,
		    *plan, (__nv_bfloat16 *)act, y, gelu, oai);
		return cudaGetLastError();
	}
	const bool tc_fits = dt != GPU_F32 && n_out % 16 == 0 && n_in % 16 == 0 &&
			     (uintptr_t)W % 32 == 0 && (uintptr_t)x % 32 == 0;
	if (path == GPU_MOE_TENSOR_CORES && !tc_fits)
		return cudaErrorInvalidValue;
	if (path == GPU_MOE_TENSOR_CORES ||
	    (path == GPU_MOE_AUTO && tc_fits &&
	     (int64_t)n_tok * k >= (int64_t)GPU_MOE_TC_MIN_PAIRS * n_expert)) {
		dim3 grid(gpu_div_up((uint64_t)n_out, 16 * TC_WARPS), (unsigned)max_tiles);
		if (dt == GPU_F16)
			moe_tc_kernel<__half, KIND><<<grid, TC_THREADS, 0, stream>>>(
			    (const __half *)W, n_out, n_in, (const __half *)x, k, *plan,
			    (__half *)act, y, gelu, oai);
		else
			moe_tc_kernel<__nv_bfloat16, KIND><<<grid, TC_THREADS, 0, stream>>>(
			    (const __nv_bfloat16 *)W, n_out, n_in, (const __nv_bfloat16 *)x, k,
			    *plan, (__nv_bfloat16 *)act, y, gelu, oai);
		return cudaGetLastError();
	}
	dim3 grid(gpu_div_up((uint64_t)n_out, GLU ? MM_WARPS : 2 * MM_WARPS), (unsigned)max_tiles);
	GPU_DISPATCH_DTYPE(
	    dt, T,
	    moe_mm_kernel<T, KIND, false><<<grid, MM_THREADS, 0, stream>>>(
		(const T *)W, qk, n_out, n_in, (const T *)x, k, *plan, (T *)act, y, gelu, oai));
	return cudaGetLastError();
}

cudaError_t gpu_moe_gate_up(const void *wgu, int n_ff, int n_embd, int n_expert, const void *xn,
			    int n_tok, int k, const struct gpu_moe_plan *plan, void *act, bool gelu,
			    const struct gpu_moe_oai *oai, enum gpu_dtype dt,
			    enum gpu_moe_path path, cudaStream_t stream)
{
	if (oai && oai->relu2) /* nemotron_h_moe: the up rows alone */
		return moe_mm<MOE_UP>(wgu, NULL, n_ff, n_embd, n_expert, xn, n_tok, k, plan, act,
				      NULL, gelu, oai, dt, path, stream);
	return moe_mm<MOE_GATE_UP>(wgu, NULL, n_ff, n_embd, n_expert, xn, n_tok, k, plan, act, NULL,
				   gelu, oai, dt, path, stream);
}

cudaError_t gpu_moe_down(const void *wdown, int n_embd, int n_ff, int n_expert, const void *act,
			 int n_tok, int k, const struct gpu_moe_plan *plan, float *y,
			 const struct gpu_moe_oai *oai, enum gpu_dtype dt, enum gpu_moe_path path,
			 cudaStream_t stream)
{
	return moe_mm<MOE_DOWN>(wdown, NULL, n_embd, n_ff, n_expert, act, n_tok, k, plan, NULL, y,
				false, oai, dt, path, stream);
}

cudaError_t gpu_moe_gate_up_q(const struct gpu_moe_qw *w, int n_ff, int n_embd, int n_expert,
			      const void *xn, int n_tok, int k, const struct gpu_moe_plan *plan,
			      void *act, bool gelu, const struct gpu_moe_oai *oai,
			      enum gpu_moe_path path, cudaStream_t stream)
{
	if (oai && oai->relu2) /* refused in moe_mm (not built) */
		return moe_mm<MOE_UP>(NULL, w, n_ff, n_embd, n_expert, xn, n_tok, k, plan, act,
				      NULL, gelu, oai, GPU_BF16, path, stream);
	return moe_mm<MOE_GATE_UP>(NULL, w, n_ff, n_embd, n_expert, xn, n_tok, k, plan, act, NULL,
				   gelu, oai, GPU_BF16, path, stream);
}

cudaError_t gpu_moe_down_q(const struct gpu_moe_qw *w, int n_embd, int n_ff, int n_expert,
			   const void *act, int n_tok, int k, const struct gpu_moe_plan *plan,
			   float *y, const struct gpu_moe_oai *oai, enum gpu_moe_path path,
			   cudaStream_t stream)
{
	return moe_mm<MOE_DOWN>(NULL, w, n_embd, n_ff, n_expert, act, n_tok, k, plan, NULL, y,
				false, oai, GPU_BF16, path, stream);
}

/* ---- the weighted sum ---- */

__global__ void moe_combine_kernel(const float *y, const float *w, int n_tok, int k, int n_embd,
				   float *out)
{
	int64_t n = (int64_t)n_tok * n_embd, stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		int64_t t = i / n_embd, o = i % n_embd;
		const float *yt = y + t * k * n_embd + o;
		float acc;
		if (!w) { /* llama4: weighted on the input */
			acc = yt[0];
			for (int j = 1; j < k; j++)
				acc += yt[(int64_t)j * n_embd];
		} else {
			const float *wt = w + t * k;
			acc = wt[0] * yt[0];
			for (int j = 1; j < k; j++)
				acc += wt[j] * yt[(int64_t)j * n_embd];
		}
		out[i] = acc;
	}
}

cudaError_t gpu_moe_combine(const float *y, const float *w, int n_tok, int k, int n_embd,
			    float *out, cudaStream_t stream)
{
	int64_t n = (int64_t)n_tok * n_embd;
	if (n <= 0 || k < 1)
		return cudaSuccess;
	unsigned blocks = gpu_grid_blocks((uint64_t)n);
	moe_combine_kernel<<<blocks, 256, 0, stream>>>(y, w, n_tok, k, n_embd, out);
	return cudaGetLastError();
}

/* ---- qwen35moe's and qwen2moe's gated shared expert ---- */

__global__ void moe_shexp_gate_kernel(float *y, const float *logit, int n_tok, int n_embd)
{
	int64_t n = (int64_t)n_tok * n_embd, stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] *= 1.0f / (1.0f + expf(-logit[i / n_embd]));
}

__global__ void moe_scale_w_kernel(float *w, const int32_t *ids, const float *scale, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		w[i] *= scale[ids[i]];
}

cudaError_t gpu_moe_scale_w(const struct gpu_moe_plan *plan, const float *scale, int n_tok,
			    int k, cudaStream_t stream)
{
	const int n = n_tok * k;
	if (n <= 0)
		return cudaSuccess;
	moe_scale_w_kernel<<<(n + 255) / 256, 256, 0, stream>>>(plan->w, plan->ids, scale, n);
	return cudaGetLastError();
}

cudaError_t gpu_moe_shexp_gate(float *y, const float *logit, int n_tok, int n_embd,
			       cudaStream_t stream)
{
	int64_t n = (int64_t)n_tok * n_embd;
	if (n <= 0)
		return cudaSuccess;
	moe_shexp_gate_kernel<<<gpu_grid_blocks((uint64_t)n), 256, 0, stream>>>(y, logit, n_tok,
										n_embd);
	return cudaGetLastError();
}
