/* gemv: the projections of a decode pass (<= GPU_GEMV_MAX_TOK tokens) without cuBLAS, with
 * what surrounds them fused in: the residual add and RMS norm before the QKV and gate|up
 * projections and the LM head (the prologue), the gated activation after gate|up (the
 * epilogue). Issue 17: at batch 1 a decode step's time beyond the weight bytes is paid
 * per graph node (~6 us a node on the H200, ESTIMATE: bench/perf_model.py's NODE_US), and a
 * cuBLAS call at 1-8 columns is a GEMV whose fixed cost and bandwidth we cannot shape.
 *
 * Layout of the work: a warp owns two weight rows at a time (rows 2i and 2i+1, or gate row
 * j and up row j with glu) and walks them in 16-byte chunks, GV_UNROLL chunks of each row
 * loaded before any is used (8 loads of 16 bytes in flight a thread), every chunk of W
 * multiplied with all tokens' inputs (W read once for all tokens), fp32 accumulators per
 * (row, token), reduced across the warp at the end by a transposed reduction (gv_reduce),
 * which leaves each (row, token)'s sum in its own lanes. Warps walk the rows grid-stride.
 *
 * The prologue: every block first computes its tokens' normalized inputs into dynamic
 * shared memory, n_tok * n_in * sizeof(T) bytes, up to what gpu_gemv_init opted in to
 * (200 KiB on an H100, past the 48 KiB a block gets without opting in; Llama-3-8B's bucket
 * 8 needs 64 KiB), as gpu_add_rmsnorm computes and rounds them (the sum of squares in double, the
 * scale in fp32, (s * scale) * w rounded to the storage type), so the projection sees the
 * inputs the unfused path's GEMM saw. Block 0 also writes the summed residual, into
 * another buffer than the one it read (the caller ping-pongs two): the other blocks are
 * still reading the old one.
 *
 * The QKV epilogue (issue 17: one node less a layer): qkv_post.cu's work on the warp's two
 * rows, which are then a RoPE pair of one head (or two dimensions past rope_dim, or of a
 * value head): the two lanes that hold token t's two sums (gv_lane_token) exchange them,
 * both add the bias and rotate the pair at pos[t] with rope.cuh's arithmetic, and each
 * stores its own row to y and, for key and value heads, to the KV slot, as
 * qkv_post_kernel rounds them.
 *
 * Launched with a.pdl (a programmatic dependent launch, gpu/pdl.cuh), the kernel may start
 * while the one before it runs its last wave: it triggers its own successor at once, pulls
 * into L2 the weight bytes of its warps' first round of loads (each warp's first task:
 * GV_UNROLL chunks of each of its two rows, 2 x 2 KiB, a 128-byte line a lane), which
 * nothing before it writes, then waits before it reads anything else (its inputs, the
 * residual, rows, the KV slots it writes). The prefetch changes no value.
 *
 * Block-quantized weights (a.q.n_part > 0, the resident path: Q8_0, Q4_K, Q6_K, bf16
 * inputs): the same tasks, prologue, reduction and epilogues; a lane walks its rows' groups
 * of 32 elements (g = lane, lane + 32, ...), each decoded 8 at a time in fp32
 * (gpu/qblock.cuh, bitwise quant_dequant's values) and multiplied with the tokens' 8
 * inputs (one 16-byte load of bf16). A decode step reads the blocks' bytes (Q4_K 0.5625
 * bytes a weight, Q6_K 0.82, Q8_0 1.06) instead of 2 a weight (ESTIMATE of the traffic;
 * bench/results/gpuq-2026-12-01.md); no L2 prefetch on this path yet.
 *
 * gpu_gemv_chain (issue 17): the GEMVs of a decode pass between two other kernels, and a
 * layer's decode attention among them, as one cooperative kernel: gv_body for each GEMV
 * step, attn_decode_gqa_body (gpu/attn_decode.cuh) on parts of 128 threads for the
 * attention, the blocks at a grid barrier between two steps (gpu/grid_sync.cuh): one
 * graph node where there were up to GPU_GEMV_CHAIN_MAX + GPU_CHAIN_ATTN_MAX. */
#include <type_traits>

#include "gpu/attn_decode.cuh"
#include "gpu/glu.cuh"
#include "gpu/grid_sync.cuh"
#include "gpu/pdl.cuh"
#include "gpu/qblock.cuh"
#include "gpu/rope.cuh"

#define GV_THREADS 512 /* 16 warps */
#define GV_WARPS   (GV_THREADS / 32)
#define GV_UNROLL  4 /* 16-byte chunks of each of a warp's two rows in flight a lane */

/* f[0 .. 16 / sizeof(T)) rounded to T, packed into a 16-byte vector */
template <typename T> __device__ __forceinline__ uint4 gv_pack(const float *f)
{
	constexpr int V = 16 / (int)sizeof(T);
	T e[V];
#pragma unroll
	for (int i = 0; i < V; i++)
		e[i] = st_t<T>(f[i]);
	uint4 v;
	memcpy(&v, e, sizeof v);
	return v;
}

/* Rows of task (a warp's pair) with the QKV epilogue: within head h = task / (hd / 2),
 * k = task % (hd / 2): (k, k + half) for NeoX query and key heads when k < half = rope_dim /
 * 2, else (2k, 2k + 1); *rot: the pair rotates (query and key heads, k < half). */
__device__ __forceinline__ void gv_qkv_rows(const struct gpu_qkv_post_args &p, int task, int *r0,
					    int *r1, int *head, int *k, bool *rot)
{
	const int hp = p.head_dim / 2, half = p.rope_dim >= 2 ? p.rope_dim / 2 : 0;
	*head = task / hp;
	*k = task - *head * hp;
	*rot = *k < half && *head < p.n_head + p.n_head_kv;
	const int base = *head * p.head_dim;
	*r0 = base + (*rot && p.neox ? *k : 2 * *k);
	*r1 = base + (*rot && p.neox ? *k + half : 2 * *k + 1);
}

/* The warp's 2 x NT sums, reduced over its 32 lanes with 2 NT - 1 + (5 - log2(2 NT))
 * shuffles instead of 2 NT x 5 (issue 17: 16 instead of 80 at NT = 8; each shuffle is an
 * issue slot on the GPU and a switch of all fibers in gpu/emu). The steps go over the lane
 * bits 1, 2, 4, 8, 16 in that order. While a lane holds m > 1 values (the first log2(2 NT)
 * steps), a step is transposed: the lane keeps the half of its m values that its lane bit
 * selects (the upper half when set), sends the other half to its partner (lane ^ bit) and
 * adds the partner's copy of the half it kept: m / 2 shuffles. Once one value is left, the
 * steps are the usual butterfly. Value v = rr * NT + t (v[t] = acc0[t], v[NT + t] =
 * acc1[t]) ends in the lanes l with (l & 1) = rr and bits 1 .. log2(NT) of l reversed = t
 * (gv_lane_token), every lane with the full sum of its value. Every value is summed in the
 * same tree (pairs of lanes by bit 1, then 2, ...; a + b = b + a in fp32), whatever its
 * slot or NT: a (row, token)'s sum does not depend on the row pairing or the batch bucket
 * (the QKV epilogue stays bitwise gemv + qkv_post). */
template <int NT>
__device__ __forceinline__ float gv_reduce(const float *acc0, const float *acc1, int lane)
{
	float v[2 * NT];
#pragma unroll
	for (int t = 0; t < NT; t++) {
		v[t] = acc0[t];
		v[NT + t] = acc1[t];
	}
	constexpr int STEPS = NT == 1 ? 1 : NT == 2 ? 2 : NT == 4 ? 3 : 4; /* log2(2 NT) */
	static_assert(NT == 1 || NT == 2 || NT == 4 || NT == 8, "NT: 1, 2, 4 or 8");
	/* constant trip counts, so that both loops unroll and v stays in registers */
#pragma unroll
	for (int st = 0; st < STEPS; st++) { /* transposed steps: m values, bit o */
		const int m = (2 * NT) >> st, o = 1 << st;
		const bool up = (lane & o) != 0;
#pragma unroll
		for (int j = 0; j < NT; j++)
			if (j < m / 2) {
				const float keep = up ? v[j + m / 2] : v[j];
				const float send = up ? v[j] : v[j + m / 2];
				v[j] = keep + __shfl_xor_sync(0xffffffffu, send, o);
			}
	}
#pragma unroll
	for (int o = 2 * NT; o < 32; o <<= 1) /* butterfly steps */
		v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
	return v[0];
}
/* The token whose sum gv_reduce leaves in lane l: bits 1 .. log2(NT) of l, reversed. */
template <int NT> __device__ __forceinline__ int gv_lane_token(int lane)
{
	int t = 0;
#pragma unroll
	for (int b = 1; b < NT; b <<= 1) {
		t <<= 1;
		t |= (lane & (2 * b)) != 0 ? 1 : 0;
	}
	return t;
}

/* The rows of a warp's task: (2 task, 2 task + 1), gate row task and up row task with glu,
 * the RoPE pair gv_qkv_rows says with the QKV epilogue (head, k, rot: its answers). */
template <bool QKV>
__device__ __forceinline__ void gv_task_rows(const struct gpu_gemv_args &a, int task, int *r0,
					     int *r1, int *head, int *k, bool *rot)
{
	*r0 = a.glu ? task : 2 * task;
	*r1 = a.glu ? task + a.n_out / 2 : min(*r0 + 1, a.n_out - 1);
	*head = *k = 0;
	*rot = false;
	if (QKV)
		gv_qkv_rows(a.post, task, r0, r1, head, k, rot);
}

/* Row r of the resident matrix q (rows of n_in elements): its blocks and *type. */
__device__ __forceinline__ const uint8_t *gv_qrow(const struct gpu_qmat &q, int n_in, int r,
						  int *type)
{
	int i = 0;
	while (i + 1 < q.n_part && r >= q.rows[i]) {
		r -= q.rows[i];
		i++;
	}
	const int t = q.type[i];
	*type = t;
	const int64_t rb = t == 30  ? (int64_t)n_in * 2
			   : t == 8 ? (int64_t)n_in / 32 * 34
				    : (int64_t)n_in / 256 * (t == 12 ? 144 : 210);
	return (const uint8_t *)q.p[i] + (int64_t)r * rb;
}

/* Pulls into L2 the weight lines of the warp's first round of loads (its first task: GV_UNROLL
 * chunks of each of its two rows, a 128-byte line a lane); W is no kernel's output, so this
 * may run before the wait for the kernel (or chain step) before. Dense W only. */
template <typename T, bool QKV, bool Q>
__device__ __forceinline__ void gv_prefetch(const struct gpu_gemv_args &a)
{
	constexpr int V = 16 / (int)sizeof(T);
	const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
	const int nc = a.n_in / V, n_task = a.glu || QKV ? a.n_out / 2 : (a.n_out + 1) / 2;
	const int task = (int)blockIdx.x * GV_WARPS + warp, line = lane & 15;
	int r0, r1, head, k;
	bool rot;
	gv_task_rows<QKV>(a, task, &r0, &r1, &head, &k, &rot);
	if (!Q && task < n_task && line * 8 < min(nc, 32 * GV_UNROLL))
		gpu_prefetch_l2((const uint4 *)a.W + (int64_t)(lane < 16 ? r0 : r1) * nc + line * 8);
}
/* One GEMV (a, as gpu_gemv's contract) by this block: gemv_kernel's body, and each step
 * of gemv_chain_kernel's. xs: the prologue's inputs, [n_tok][n_in / V] (the launch's
 * dynamic shared memory, at least n_tok * n_in * sizeof(T) bytes; unused without the
 * prologue); sc: NT floats of shared memory. Reads xs and sc only after writing them
 * (with a __syncthreads between): a block may run it again on the same buffers once all
 * its threads returned and met at a __syncthreads. */
template <typename T, int NT, bool PRO, bool QKV, bool Q>
__device__ __forceinline__ void gv_body(const struct gpu_gemv_args &a, uint4 *xs, float *sc)
{
	static_assert(!Q || sizeof(T) == 2, "the resident path reads 8 inputs a 16-byte load");
	constexpr int V = 16 / (int)sizeof(T);
	const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
	const int n_tok = a.n_tok, nc = a.n_in / V; /* 16-byte chunks a row */
	const uint4 *W = (const uint4 *)a.W;
	const int half = a.n_out / 2;
	const int n_task = a.glu || QKV ? half : (a.n_out + 1) / 2;
	gpu_pdl_trigger();
	gv_prefetch<T, QKV, Q>(a); /* then the wait */
	gpu_pdl_wait();
	const uint4 *in;
	int64_t ldv; /* input row stride in chunks */
	if (PRO) {
		/* warp t: token t's sum of squares (double, as gpu_add_rmsnorm) */
		if (warp < n_tok) {
			const int64_t r = a.rows ? a.rows[warp] : warp;
			const float *xr = a.res + r * a.n_in;
			const float *dr = a.delta ? a.delta + r * a.n_in : nullptr;
			double ss = 0.0;
			for (int j = lane; j < a.n_in; j += 32) {
				float s = xr[j] + (dr ? dr[j] : 0.0f);
				ss += (double)s * s;
			}
			ss = warp_sum_d(ss);
			if (lane == 0)
				sc[warp] = (float)(1.0 / sqrt(ss / (double)a.n_in + (double)a.eps));
		}
		__syncthreads();
		float *ro = blockIdx.x == 0 ? a.res_out : nullptr;
		for (int t = 0; t < n_tok; t++) {
			const int64_t r = a.rows ? a.rows[t] : t;
			const float *xr = a.res + r * a.n_in;
			const float *dr = a.delta ? a.delta + r * a.n_in : nullptr;
			const float scale = sc[t];
			for (int c = (int)threadIdx.x; c < nc; c += GV_THREADS) {
				float f[V];
#pragma unroll
				for (int v = 0; v < V; v++) {
					const int j = c * V + v;
					const float s = xr[j] + (dr ? dr[j] : 0.0f);
					if (ro)
						ro[r * a.n_in + j] = s;
					f[v] = (s * scale) * a.norm[j];
				}
				xs[t * nc + c] = gv_pack<T>(f);
			}
		}
		__syncthreads();
		in = xs;
		ldv = nc;
	} else {
		in = (const uint4 *)a.x;
		ldv = a.ldx / V;
	}
	for (int task = (int)blockIdx.x * GV_WARPS + warp; task < n_task;
	     task += (int)gridDim.x * GV_WARPS) { /* warp-uniform */
		int r0, r1, head, k;
		bool rot;
		gv_task_rows<QKV>(a, task, &r0, &r1, &head, &k, &rot);
		const uint4 *w0 = W + (int64_t)r0 * nc, *w1 = W + (int64_t)r1 * nc;
		float acc0[NT], acc1[NT];
#pragma unroll
		for (int t = 0; t < NT; t++)
			acc0[t] = acc1[t] = 0.0f;
		if (Q) { /* groups of 32 elements, 8 at a time; V == 8 */
			int t0, t1;
			const uint8_t *q0 = gv_qrow(a.q, a.n_in, r0, &t0);
			const uint8_t *q1 = gv_qrow(a.q, a.n_in, r1, &t1);
			for (int g = lane; g < a.n_in / 32; g += 32) {
#pragma unroll
				for (int c = 0; c < 4; c++) {
					float f0[8], f1[8];
					qb_dec8(t0, q0, g, c, f0);
					qb_dec8(t1, q1, g, c, f1);
#pragma unroll
					for (int t = 0; t < NT; t++) {
						if (t >= n_tok)
							continue;
						float fx[V];
						vec_f32<T>(in[t * ldv + 4 * g + c], fx);
#pragma unroll
						for (int v = 0; v < V; v++) {
							acc0[t] = fmaf(f0[v], fx[v], acc0[t]);
							acc1[t] = fmaf(f1[v], fx[v], acc1[t]);
						}
					}
				}
			}
		}
		for (int c0 = Q ? nc : lane; c0 < nc; c0 += 32 * GV_UNROLL) {
			uint4 u0[GV_UNROLL], u1[GV_UNROLL];
#pragma unroll
			for (int u = 0; u < GV_UNROLL; u++) {
				const int c = c0 + 32 * u;
				u0[u] = c < nc ? w0[c] : make_uint4(0, 0, 0, 0);
				u1[u] = c < nc ? w1[c] : make_uint4(0, 0, 0, 0);
			}
#pragma unroll
			for (int u = 0; u < GV_UNROLL; u++) {
				const int c = c0 + 32 * u;
				if (c >= nc)
					continue;
				float f0[V], f1[V];
				vec_f32<T>(u0[u], f0);
				vec_f32<T>(u1[u], f1);
#pragma unroll
				for (int t = 0; t < NT; t++) {
					if (t >= n_tok)
						continue;
					float fx[V];
					vec_f32<T>(in[t * ldv + c], fx);
#pragma unroll
					for (int v = 0; v < V; v++) {
						acc0[t] = fmaf(f0[v], fx[v], acc0[t]);
						acc1[t] = fmaf(f1[v], fx[v], acc1[t]);
					}
				}
			}
		}
		/* lane l holds the sum of row rr = l & 1 (r0, r1) for token t = gv_lane_token(l) */
		const float sum = gv_reduce<NT>(acc0, acc1, lane);
		const int rr = lane & 1, t = gv_lane_token<NT>(lane);
		const bool mine = lane < 2 * NT && t < n_tok; /* one lane a (row, token) */
		if (QKV) { /* token t's pair in two lanes, as qkv_post_kernel computes it */
			const struct gpu_qkv_post_args &p = a.post;
			const float other = __shfl_xor_sync(0xffffffffu, sum, 1);
			float y0 = rr ? other : sum, y1 = rr ? sum : other;
			if (mine) {
				if (p.bias) {
					y0 += p.bias[r0];
					y1 += p.bias[r1];
				}
				if (rot) {
					float c, s;
					rope_cos_sin((const float2 *)p.table, p.pos[t],
						     p.rope_dim / 2, k, p.mscale, &c, &s);
					rope_apply(y0, y1, c, s, &y0, &y1);
				}
				if (p.temp_scale != 0.0f && head < p.n_head) { /* mistral3 */
					const float f = qp_attn_temp(p, p.pos[t]);
					y0 = __fmul_rn(y0, f);
					y1 = __fmul_rn(y1, f);
				}
				/* each lane of the pair stores its own row */
				const int r = rr ? r1 : r0;
				const float yr = rr ? y1 : y0;
				a.y[(int64_t)t * a.ldy + r] = yr;
				const int n_qk = p.n_head + p.n_head_kv;
				if (head >= p.n_head) { /* a key or value head: the token's slot */
					const int32_t slot = p.slots[t];
					const int64_t blk = slot / p.kv.block_size,
						      sl = slot % p.kv.block_size;
					T *row =
					    (T *)p.kv.base + blk * p.kv.block_stride +
					    sl * p.kv.kv_dim +
					    (head < n_qk ? (int64_t)(head - p.n_head) * p.head_dim
							 : p.kv.v_offset +
							       (int64_t)(head - n_qk) * p.head_dim);
					row[r - head * p.head_dim] = st_t<T>(yr);
				}
			}
		} else if (a.glu) { /* token t's gate (rr 0) and up (rr 1) sums in two lanes */
			const float other = __shfl_xor_sync(0xffffffffu, sum, 1);
			if (mine && rr == 0)
				((T *)a.act)[(int64_t)t * half + task] =
				    st_t<T>(gpu_glu(sum, other, a.gelu));
		} else if (mine && (rr == 0 || r1 != r0)) {
			a.y[(int64_t)t * a.ldy + (rr ? r1 : r0)] = sum;
		}
	}
}

/* NT: tokens the accumulators hold (a.n_tok <= NT); PRO: the prologue (a.norm != NULL);
 * QKV: the QKV epilogue (a.qkv_post); Q: W is block-quantized (a.q, T bf16). */
template <typename T, int NT, bool PRO, bool QKV, bool Q>
__global__ void __launch_bounds__(GV_THREADS, 1) gemv_kernel(struct gpu_gemv_args a)
{
	/* the prologue's inputs: the launch's n_tok * n_in * sizeof(T) bytes of dynamic shared
	 * memory (gv_launch; 0 without the prologue) */
	extern __shared__ uint4 xs[];
	__shared__ float sc[NT];
	gv_body<T, NT, PRO, QKV, Q>(a, xs, sc);
}

/* gpu_gemv_chain's attention step (its comment in gpu/gpu_ops.cuh): the (KV head, token,
 * split) items of the GQA decode kernel over the grid's parts of ATTN_WARPS warps, GVC_PARTS
 * a block, part p at named barrier 1 + p with its own attn_dec_smem in the dynamic shared
 * memory; item i = (kvh, li, sp) as kvh + n_head_kv (li + n_list sp). */
#define GVC_PARTS (GV_THREADS / (ATTN_WARPS * 32))
/* The chain's instances that have the attention step: 16-bit K/V, NT <= GPU_CHAIN_ATTN_TOK
 * (with it inlined, ptxas spills the other instances at the 128 registers of 512 threads) */
template <typename T, int NT> __host__ __device__ constexpr bool gvc_has_attn()
{
	return sizeof(T) == 2 && NT <= GPU_CHAIN_ATTN_TOK;
}
template <typename T, int NPL, int GPW>
__device__ __forceinline__ void gvc_attention(const struct gpu_chain_attn &c, uint4 *smem)
{
	const int p = (int)threadIdx.x / (ATTN_WARPS * 32);
	struct gpu_part pt;
	pt.tid = (int)threadIdx.x % (ATTN_WARPS * 32);
	pt.n = ATTN_WARPS * 32;
	pt.bar = 1 + p;
	struct attn_dec_smem<T, NPL> *sm = (struct attn_dec_smem<T, NPL> *)smem + p;
	const int nkv = c.a.n_head_kv, nl = c.a.n_list;
	const int64_t items = (int64_t)nkv * nl * c.n_split;
	for (int64_t i = (int64_t)blockIdx.x * GVC_PARTS + p; i < items;
	     i += (int64_t)gridDim.x * GVC_PARTS) {
		const int64_t r = i / nkv;
		attn_decode_gqa_body<T, NPL, GPW>(c.a, c.n_split, c.partial, (int)(i % nkv),
						  (int)(r % nl), (int)(r / nl), pt, sm);
		gpu_part_sync(pt); /* sm free for the part's next item */
	}
}

/* gvc_attention's instance for the attention's head size and group (as gpu_attention's
 * launch buckets them; gpu_chain_attn_bytes: the ones the chain takes) */
template <typename T>
__device__ __forceinline__ void gvc_attention_any(const struct gpu_chain_attn &c, uint4 *smem)
{
	const int npl = (c.a.head_dim + 31) / 32;
	if (npl <= 1)
		gvc_attention<T, 1, 1>(c, smem);
	else if (npl <= 2)
		gvc_attention<T, 2, 1>(c, smem);
	else if (c.a.n_head / c.a.n_head_kv <= ATTN_WARPS)
		gvc_attention<T, 4, 1>(c, smem);
	else
		gvc_attention<T, 4, 2>(c, smem);
}

/* gpu_gemv_chain's kernel: its steps one after another, each GEMV by gv_body's instance for
 * its prologue and QKV epilogue, each attention (before GEMV step c.attn[j].at) by
 * gvc_attention, all blocks at a grid barrier (gpu/grid_sync.cuh) between two steps.
 * Launched cooperatively (gpu_launch_coop), without PDL: a step's wait and trigger then
 * change nothing. Before a barrier each warp pulls into L2 the first weight lines of its
 * task in the next GEMV step (gv_prefetch), so that a step's DRAM ramp overlaps the wait
 * for the slowest block, as PDL's prefetch overlaps the launch of a kernel. */
template <typename T, int NT, bool Q>
__global__ void __launch_bounds__(GV_THREADS, 1) gemv_chain_kernel(struct gpu_gemv_chain_args c)
{
	/* the largest prologue of the steps, or the attention's tiles */
	extern __shared__ uint4 xs[];
	__shared__ float sc[NT];
	bool first = true;
	int j = 0; /* the next attention; at most one a step (with a loop over several,
		    * ptxas spilled in the attention's instances) */
	for (int i = 0; i <= c.n; i++) {
		if (j < c.n_attn && c.attn[j].at == i) {
			if (!first)
				gpu_grid_sync(c.bar);
			if constexpr (gvc_has_attn<T, NT>())
				gvc_attention_any<T>(c.attn[j], xs);
			j++;
			first = false;
		}
		if (i == c.n)
			break;
		const struct gpu_gemv_args &a = c.step[i];
		if (!first) { /* step i's first weight lines on their way while the blocks meet */
			if (a.qkv_post)
				gv_prefetch<T, true, Q>(a);
			else
				gv_prefetch<T, false, Q>(a);
			gpu_grid_sync(c.bar);
		}
		first = false;
		if (a.norm)
			if (a.qkv_post)
				gv_body<T, NT, true, true, Q>(a, xs, sc);
			else
				gv_body<T, NT, true, false, Q>(a, xs, sc);
		else if (a.qkv_post)
			gv_body<T, NT, false, true, Q>(a, xs, sc);
		else
			gv_body<T, NT, false, false, Q>(a, xs, sc);
	}
}
static_assert(sizeof(struct gpu_gemv_chain_args) <= 32764,
	      "a kernel's parameters: at most 32764 bytes (CUDA 12.1 and newer)");

bool gpu_gemv_fits(int n_tok, int n_in, bool prologue, enum gpu_dtype dt, size_t xs_bytes)
{
	const int64_t es = (int64_t)gpu_dtype_size(dt);
	return n_tok >= 1 && n_tok <= GPU_GEMV_MAX_TOK && n_in > 0 && n_in % (16 / es) == 0 &&
	       (!prologue ||
		(int64_t)n_tok * n_in * es <=
		    (int64_t)(xs_bytes < GPU_GEMV_XS_BYTES ? xs_bytes : GPU_GEMV_XS_BYTES));
}

template <typename T, int NT, bool Q>
static void gv_launch(const struct gpu_gemv_args *a, bool pro, unsigned blocks, cudaStream_t s)
{
	/* <= GPU_GEMV_XS_BYTES (gpu_gemv_fits); past what gpu_gemv_init opted in to, the
	 * launch fails (cudaErrorInvalidValue) */
	const size_t xs = pro ? (size_t)a->n_tok * (size_t)a->n_in * sizeof(T) : 0;
	void (*k)(struct gpu_gemv_args) = pro ? a->qkv_post ? gemv_kernel<T, NT, true, true, Q>
							    : gemv_kernel<T, NT, true, false, Q>
				      : a->qkv_post ? gemv_kernel<T, NT, false, true, Q>
						    : gemv_kernel<T, NT, false, false, Q>;
	gpu_launch(k, blocks, GV_THREADS, xs, s, a->pdl, *a);
}

int gpu_gemv_bucket(int n_tok)
{
	return n_tok <= 2 ? n_tok : n_tok <= 4 ? 4 : 8;
}

/* f(std::integral_constant<int, NT>()) for n_tok's NT bucket (gpu_gemv_bucket): the one
 * place a bucket becomes a kernel instance, for gv_launch and gvc_launch */
template <typename F> static auto gv_with_nt(int n_tok, F f)
{
	switch (gpu_gemv_bucket(n_tok)) {
	case 1: return f(std::integral_constant<int, 1>());
	case 2: return f(std::integral_constant<int, 2>());
	case 4: return f(std::integral_constant<int, 4>());
	default: return f(std::integral_constant<int, 8>());
	}
}

/* gv_launch's NT bucket for n_tok tokens */
template <typename T, bool Q>
static void gv_launch_nt(const struct gpu_gemv_args *a, bool pro, unsigned blocks, cudaStream_t s)
{
	gv_with_nt(a->n_tok, [&](auto nt) { gv_launch<T, decltype(nt)::value, Q>(a, pro, blocks, s); });
}

/* The opt-in of the prologue's instances (and the chain's) of one storage type to n bytes
 * of dynamic shared memory (past 48 KiB a launch fails without it: cudaErrorInvalidValue) */
template <typename T, bool Q> static cudaError_t gv_opt_in(int n)
{
	const enum cudaFuncAttribute at = cudaFuncAttributeMaxDynamicSharedMemorySize;
	cudaError_t e = cudaSuccess, e1;
#define GV_OPT_IN(NT)                                                                              \
	if ((e1 = cudaFuncSetAttribute(gemv_kernel<T, NT, true, false, Q>, at, n)) != cudaSuccess) \
		e = e1;                                                                            \
	if ((e1 = cudaFuncSetAttribute(gemv_kernel<T, NT, true, true, Q>, at, n)) != cudaSuccess)  \
		e = e1;                                                                            \
	if ((e1 = cudaFuncSetAttribute(gemv_chain_kernel<T, NT, Q>, at, n)) != cudaSuccess)        \
		e = e1;
	GV_OPT_IN(1)
	GV_OPT_IN(2)
	GV_OPT_IN(4)
	GV_OPT_IN(8)
#undef GV_OPT_IN
	return e;
}

cudaError_t gpu_gemv_init(size_t optin, size_t *xs_bytes)
{
	/* 1 KiB for the kernels' static shared memory (sc: 4 NT bytes) */
	size_t n = optin > 1024 ? (optin - 1024) / 16 * 16 : 0;
	if (n > GPU_GEMV_XS_BYTES)
		n = GPU_GEMV_XS_BYTES;
	*xs_bytes = GPU_GEMV_XS_DEFAULT;
	if (n <= GPU_GEMV_XS_DEFAULT)
		return cudaSuccess; /* what every launch gets without opting in */
	cudaError_t e = gv_opt_in<float, false>((int)n), e1;
	if ((e1 = gv_opt_in<__half, false>((int)n)) != cudaSuccess)
		e = e1;
	if ((e1 = gv_opt_in<__nv_bfloat16, false>((int)n)) != cudaSuccess)
		e = e1;
	if ((e1 = gv_opt_in<__nv_bfloat16, true>((int)n)) != cudaSuccess)
		e = e1;
	if (e == cudaSuccess)
		*xs_bytes = n;
	return e;
}

bool gpu_gemv_qkv_fits(const struct gpu_gemv_args *a)
{
	const struct gpu_qkv_post_args *p = &a->post;
	const int64_t hd = p->head_dim;
	return !a->glu && p->q_norm == NULL && p->k_norm == NULL && !p->v_norm &&
	       !p->norm_post_rope && hd > 0 && hd % 2 == 0 && p->n_head > 0 && p->n_head_kv > 0 &&
	       p->rope_dim <= hd &&
	       (p->rope_dim < 2 || (p->rope_dim % 2 == 0 && p->table != NULL)) &&
	       (int64_t)a->n_out == (p->n_head + 2 * (int64_t)p->n_head_kv) * hd &&
	       (int64_t)p->kv.kv_dim == p->n_head_kv * hd && p->kv.block_size > 0 &&
	       p->kv.base != NULL && p->pos != NULL && p->slots != NULL;
}

bool gpu_qtype_resident(int t, int64_t n_in)
{
	return n_in > 0 && ((t == 8 && n_in % 32 == 0) || ((t == 12 || t == 14) && n_in % 256 == 0));
}

size_t gpu_qtype_row_bytes(int t, int64_t n_in)
{
	if (t == 30 && n_in > 0 && n_in % 32 == 0)
		return (size_t)n_in * 2;
	if (!gpu_qtype_resident(t, n_in))
		return 0;
	return t == 8 ? (size_t)n_in / 32 * 34 : (size_t)n_in / 256 * (t == 12 ? 144 : 210);
}

/* a->q's contract: BF16 inputs, 1..GPU_QMAT_PARTS parts of resident types (or BF16, 16-byte
 * aligned, n_in a multiple of 32) whose rows add up
 * to n_out; without glu even part sizes (a warp's two rows in one part; a QKV epilogue's
 * RoPE pairs then lie in one head, so in one part) */
static bool gv_qmat_ok(const struct gpu_gemv_args *a, enum gpu_dtype dt)
{
	const struct gpu_qmat *q = &a->q;
	if (dt != GPU_BF16 || q->n_part > GPU_QMAT_PARTS)
		return false;
	int64_t rows = 0;
	for (int i = 0; i < q->n_part; i++) {
		if (gpu_qtype_row_bytes(q->type[i], a->n_in) == 0 || q->rows[i] <= 0 || !q->p[i] ||
		    (q->type[i] == 30 && ((uintptr_t)q->p[i] & 15) != 0) ||
		    (!a->glu && i + 1 < q->n_part && (q->rows[i] & 1)))
			return false;
		rows += q->rows[i];
	}
	return rows == a->n_out;
}

/* Whether gpu_gemv takes *a (its contract's checks) */
static bool gv_args_ok(const struct gpu_gemv_args *a, enum gpu_dtype dt)
{
	const bool pro = a->norm != NULL, q = a->q.n_part > 0;
	const int V = 16 / (int)gpu_dtype_size(dt);
	if (q && !gv_qmat_ok(a, dt))
		return false;
	return !(!gpu_gemv_fits(a->n_tok, a->n_in, pro, dt, GPU_GEMV_XS_BYTES) || a->n_out <= 0 ||
		 (!q && ((uintptr_t)a->W & 15) != 0) || (a->glu && (a->n_out & 1) != 0) ||
		 (a->glu ? a->act == NULL : a->y == NULL) ||
		 (a->qkv_post && !gpu_gemv_qkv_fits(a)) ||
		 (pro ? a->res == NULL ||
			    (a->res_out && (a->res_out == a->res || a->res_out == a->delta))
		      : a->x == NULL || ((uintptr_t)a->x & 15) != 0 || a->ldx % V != 0 ||
			    a->ldx < a->n_in));
}

/* The blocks *a's warps need: one a task (two rows) */
static unsigned gv_blocks(const struct gpu_gemv_args *a)
{
	const int n_task = a->glu || a->qkv_post ? a->n_out / 2 : (a->n_out + 1) / 2;
	return gpu_div_up((uint64_t)n_task, GV_WARPS);
}

size_t gpu_chain_attn_bytes(const struct gpu_attn_args *a, int n_split, const float *partial,
			    enum gpu_dtype dt)
{
	const size_t es = gpu_dtype_size(dt);
	const int npl = (a->head_dim + 31) / 32;
	if ((a->tiles && a->n_tiles > 0) || a->n_list < 1 || a->n_list > GPU_CHAIN_ATTN_TOK ||
	    es != 2 || npl > 4 ||
	    (npl <= 2 && a->n_head_kv > 0 && a->n_head / a->n_head_kv > ATTN_WARPS) ||
	    n_split < 1 || n_split > 65535 ||
	    !attn_decode_gqa_ok(a->n_head, a->n_head_kv, a->head_dim, a->kv.kv_dim, es) ||
	    (uintptr_t)a->kv.base % 16 != 0 ||
	    (n_split > 1 && (a->merge_counters == NULL || partial == NULL)))
		return 0;
	size_t b = 0;
	GPU_DISPATCH_DTYPE(dt, T,
			   b = npl <= 1	  ? sizeof(struct attn_dec_smem<T, 1>)
			       : npl <= 2 ? sizeof(struct attn_dec_smem<T, 2>)
					  : sizeof(struct attn_dec_smem<T, 4>));
	return GVC_PARTS * b;
}

/* gpu_gemv_chain's launch of the instance for T, NT, Q: the grid at most n_sm blocks and
 * what the occupancy allows resident at once (a cooperative launch's condition) */
template <typename T, int NT, bool Q>
static cudaError_t gvc_launch(const struct gpu_gemv_args *a, int n, const struct gpu_chain_attn *at,
			      int n_attn, enum gpu_dtype dt, int n_sm, unsigned *bar,
			      cudaStream_t s)
{
	struct gpu_gemv_chain_args c; /* (~24 KiB) */
	memset(&c, 0, sizeof c);
	unsigned blocks = 1;
	size_t xs = 0; /* the largest prologue's inputs, or the attention's tiles */
	for (int i = 0; i < n; i++) {
		c.step[i] = a[i];
		c.step[i].pdl = false;
		const unsigned b = gv_blocks(&a[i]);
		blocks = b > blocks ? b : blocks;
		const size_t x = a[i].norm ? (size_t)a[i].n_tok * (size_t)a[i].n_in * sizeof(T) : 0;
		xs = x > xs ? x : xs;
	}
	c.n = n;
	c.n_attn = n_attn;
	for (int j = 0; j < n_attn; j++) {
		c.attn[j] = at[j];
		c.attn[j].a.pdl = false;
		const size_t x = gpu_chain_attn_bytes(&at[j].a, at[j].n_split, at[j].partial, dt);
		xs = x > xs ? x : xs;
		const uint64_t items = (uint64_t)at[j].a.n_head_kv * at[j].a.n_list * at[j].n_split;
		const unsigned b = gpu_div_up(items, GVC_PARTS);
		blocks = b > blocks ? b : blocks;
	}
	c.bar = bar;
	void (*k)(struct gpu_gemv_chain_args) = gemv_chain_kernel<T, NT, Q>;
	int per_sm = 0;
	cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, GV_THREADS, xs);
	if (e != cudaSuccess)
		return e;
	if (per_sm < 1) /* (the dynamic shared memory past what the opt-in allows) */
		return cudaErrorCooperativeLaunchTooLarge;
	const uint64_t most = (uint64_t)per_sm * (uint64_t)n_sm;
	if (blocks > (unsigned)n_sm)
		blocks = (unsigned)n_sm; /* gpu_gemv's one block an SM */
	if (blocks > most)
		blocks = (unsigned)most;
	return gpu_launch_coop(k, blocks, GV_THREADS, xs, s, c);
}

cudaError_t gpu_gemv_chain(const struct gpu_gemv_args *a, int n, const struct gpu_chain_attn *attn,
			   int n_attn, enum gpu_dtype dt, int n_sm, unsigned *bar,
			   cudaStream_t stream)
{
	if (n == 1 && n_attn == 0)
		return gpu_gemv(a, dt, n_sm, stream);
	if (n == 0 && n_attn == 1)
		return gpu_attention(&attn->a, dt, attn->n_split, attn->partial, stream);
	if (n < 1 || n > GPU_GEMV_CHAIN_MAX || n_attn < 0 || n_attn > GPU_CHAIN_ATTN_MAX ||
	    (n_attn > 0 && attn == NULL) || n_sm < 1 || bar == NULL)
		return cudaErrorInvalidValue;
	for (int j = 0; j < n_attn; j++)
		if (attn[j].at < (j ? attn[j - 1].at + 1 : 0) || attn[j].at > n ||
		    gpu_chain_attn_bytes(&attn[j].a, attn[j].n_split, attn[j].partial, dt) == 0)
			return cudaErrorInvalidValue;
	const bool q = a[0].q.n_part > 0;
	for (int i = 0; i < n; i++)
		if (!gv_args_ok(&a[i], dt) || gpu_gemv_bucket(a[i].n_tok) != gpu_gemv_bucket(a[0].n_tok) ||
		    (a[i].q.n_part > 0) != q)
			return cudaErrorInvalidValue;
	if (n_attn > 0 && gpu_gemv_bucket(a[0].n_tok) > GPU_CHAIN_ATTN_TOK)
		return cudaErrorInvalidValue; /* an instance without the attention */
	/* the NT bucket: the GEMVs' (an attention alone took gpu_attention above) */
	const int nt = a[0].n_tok;
	cudaError_t e = cudaSuccess;
	if (q)
		e = gv_with_nt(nt, [&](auto b) {
			return gvc_launch<__nv_bfloat16, decltype(b)::value, true>(
			    a, n, attn, n_attn, dt, n_sm, bar, stream);
		});
	else
		GPU_DISPATCH_DTYPE(dt, T, e = gv_with_nt(nt, [&](auto b) {
						  return gvc_launch<T, decltype(b)::value, false>(
						      a, n, attn, n_attn, dt, n_sm, bar, stream);
					  }));
	return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t gpu_gemv(const struct gpu_gemv_args *a, enum gpu_dtype dt, int n_sm,
		     cudaStream_t stream)
{
	const bool pro = a->norm != NULL, q = a->q.n_part > 0;
	if (n_sm < 1 || !gv_args_ok(a, dt))
		return cudaErrorInvalidValue;
	unsigned blocks = gv_blocks(a);
	/* at most one block an SM: 16 warps of 8 loads of 16 bytes in flight a thread (64 KiB
	 * an SM: Little's law at ~700 ns asks ~26 KiB an SM of an H200), one wave (ptxas gives
	 * most instances > 64 registers: a second block would not be resident), and the
	 * prologue paid once an SM */
	if (blocks > (unsigned)n_sm)
		blocks = (unsigned)n_sm;
	if (q)
		gv_launch_nt<__nv_bfloat16, true>(a, pro, blocks, stream);
	else
		GPU_DISPATCH_DTYPE(dt, T, gv_launch_nt<T, false>(a, pro, blocks, stream));
	return cudaGetLastError();
}
