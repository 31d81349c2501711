#!/usr/bin/python3
"""perf_model.py: a roofline model of the CUDA backend's decode step and prefill (issue 17).

For a model shape and batch it counts, kernel by kernel, the bytes each kernel must move
through DRAM and the floating-point operations it must do, and bounds its time by an
H100 SXM's peaks: time = max(bytes / 3.35 TB/s, flops / 989 TFLOPS bf16 dense). The step
time is the sum over kernels (they run one after another in the decode graph). These are
ESTIMATES from counting, not measurements; where a GPU has run bench/gpu_session.sh, pass
its `batchgen bench` report with --measured to print the measured step time beside them.

"before" and "after" differ in the kernels issue 17 replaced:
  attention  before: one block per query head, so each K/V byte is read G = n_head /
             n_head_kv times (through L2 at best: counted here as L2 traffic at
             ~10 TB/s, H100's L2 read bandwidth, an optimistic bound);
             after: gpu/attention.cu's GQA decode kernel, each K/V byte read once,
             bounded by the largest of its DRAM bytes, its instruction issue, its
             shared-memory wavefronts (DEC_* below, counted from its PTX) and the latency
             of its tile loop (DRAM_LAT, for the blocks resident at once), its splits
             chosen by gpu_attention_splits (attn_splits; --split-rule 2/SM: the rule
             before e17o); the decode attention table prints it beside the GQA kernel as
             main had it at 3b78123 and beside the rule before.
  sampling   before: ~130 passes over a row of logits (binary searches on a 64-bit key);
             after: gpu/sample.cu as it reads today (SAMPLE_* below, counted from its
             code): greedy 2 passes over the logits, sampling 3 (the third compacts the
             few buckets where the decisions fall); a row whose buckets hold more than
             2048 tokens (a flat row) takes the full-row radix path (--sample-fallback:
             the fraction of sampled rows that do; the report prints the worst case).
  rope       before: double-precision sincos per pair (~100 fp64 instructions: at 67
             TFLOPS fp64 the 2 x pairs x tokens x layers sincos are not free at batch 256);
             after: table lookups, bandwidth only.
  prefill attention  before: gpu/attention.cu's tiled kernel on CUDA cores (fp32 FMA);
             after: attn_prefill_tc_kernel (wmma on bf16, FlashAttention-2 style), bounded
             by its instruction issue, its tensor-core time and its L2 traffic, from counts
             of its PTX (TC_* below; bench/results/gpu-perf-model-2026-11-29.md says how).
overlap    the host's part of a step (engine.c, "Overlap"), ESTIMATED from bench/host_step's
             times on this project's CPU (not an H100 host's): A = applying the step
             before and building the sample rows (grammar masks included), B = planning
             and building the next step. Serial: device + A + B. Engine half only (the
             CUDA sample() returning with its tokens on the host): the forward pass hides
             A, max(forward, A) + sampling + B. With the device half (sample() returns
             before its tokens reach the host, they are fed on the device, read back
             behind an event the host waits for when it applies them): B runs while the
             device samples step n + 1 (and finishes its forward), so a step takes
             max(max(forward, A) + sampling, A + B): the host's whole part is hidden
             until it is longer than the device's. --host-us A:B per row, --mask-ms per
             constrained row's grammar mask.
fixed cost per node: a decode step is a CUDA graph of ~355 nodes (Llama-3-8B at batch
             1); each pays a cost its bytes do not show. NODE_US, CALIBRATED on one
             measured point (the H200's batch 1 x 512 step, bench/results/
             gpu-h200-2026-11-29.md), prices it; the last table prints the step with and
             without it, the nodes before and after e17f's fusion (decode_nodes, the count
             tests/gpu_test_model.c checks against the backend's census), and how few
             nodes batch 1 would need for 85 % of its roofline. The other tables leave it
             out: they are bounds from bytes, flops and issue, and without the node term
             batch-1 decode sits at ~100 % of its roofline, which the GPU did not show (61 %).
programmatic dependent launch (p17): the batch-1 and batch-8 steps again with each
             PDL-launched node's NODE_US less PDL_SAVE_US, a saving ASSUMED from llama.cpp's
             published PDL gain (not measured here, not fitted), and the saving a node would
             need for 85 % of the roofline.
What it cannot show: instruction-issue limits inside the kernels it does not count
(only decode attention and prefill attention are counted), latency that too few warps
fail to hide, and (beyond one lumped NODE_US) launch gaps. Without the node term it
bounds from below.
Usage: perf_model.py [--shape llama3-8b] [--scenarios 1x512,1x32768,256x512,64x4096]
                     [--prefill 32768] [--measured REPORT.json] [--detail]
                     [--host-us A:B] [--mask-ms MS] [--hbm TB/s] [--split-rule RULE]
"""
import argparse
import json
import sys

BW = 3.35e12      # H100 SXM HBM3, bytes/s
L2_BW = 10e12     # H100 L2 read bandwidth (approximate), bytes/s
BF16 = 989e12     # dense bf16 tensor-core peak, flop/s
FP32 = 67e12      # CUDA-core fp32 (non-tensor), flop/s
FP64 = 67e12      # fp64 (tensor-core figure; CUDA-core fp64 is 34 TFLOPS)

# The tensor-core prefill kernel (gpu/attention.cu, attn_prefill_tc_kernel<bf16, 128>): one
# trip of its K/V tile loop is one warp doing 16 queries x 32 keys of one head: 2 x 2 x 16 x
# 32 x 128 flops. Counted in its PTX (nvcc -O3 -ptx, sm_90): 810 instructions a trip without
# the soft-cap branch, with the K/V staging loop's 4 iterations; each wmma.mma m16n16k16
# becomes 2 HMMA.16816 and each fp32 fragment store several STS in SASS: ~870 issue slots,
# 64 HMMA.16816. A block is 4 warps (4 query heads of a GQA group) sharing one staged K/V tile.
CLOCK = 1.83e9      # H100 SXM clock of the 989 TFLOPS figure (132 SMs x 4 SMSPs x 1024 flop/clk)
SMSPS = 132 * 4     # warp schedulers, one instruction a clock each
MMA_SYNC_FRAC = 2 / 3  # ASSUMED: mma.sync (all WMMA can emit) reaches ~2/3 of wgmma's dense
                       # peak on Hopper (FlashAttention-2, mma.sync only, measures ~350-400
                       # TFLOPS there, bounded by more than its MMAs)
TC_ISSUE, TC_HMMA, TC_Q, TC_KEYS, TC_WARPS = 870, 64, 16, 32, 4

# The GQA decode kernel (gpu/attention.cu, attn_decode_gqa_kernel<__nv_bfloat16, 4, 1>:
# head_dim 128, a GQA group of 4, one warp a query head, 4 warps sharing each staged tile of
# 32 keys), per query head and tile, i.e. per warp and tile, with a full tile and the
# soft-cap branch not taken. Counted in its PTX (`nvcc -std=c++17 -O3 -arch=sm_90 -Icore
# -I. -Ibuild/gpu -ptx gpu/attention.cu`; `bench/ptx_blocks.py FILE.ptx
# I13__nv_bfloat16Li4ELi1E` prints each basic block's instructions, moves left out: SASS
# folds them into operands), times how often each block runs a tile
# (bench/results/e17a-2026-11-30.md has the table). Integer div.s32/rem.s32 count ~20
# issue slots each (ASSUMED: the SASS sequence for a 32-bit division by a variable).
#   old (main at 3b78123): staging 4 x 35 (2 divisions each), QK 32 x 53 (4 dims a trip:
#     an f32 LDS of q, a 2-byte LDS of k, cvt, FMA and the wrap-around index each),
#     softmax 66, P V 8 x 95 (4 keys a trip: a shuffle, 4 x (2-byte LDS, cvt, FMA)), loop,
#     barriers and remainder checks 29: 2,691 instructions and 9 divisions: ~2,860 issue
#     slots. Shared memory: QK 128 x (2 wavefronts for q (a 2-way bank conflict) + 1 for
#     k), P V 32 x 4, staging 8 x 4: 544 wavefronts.
#   new (e17a): staging 4 x ~20 + 8 (warp 0's row offsets: 1 division a tile, amortised
#     over the 4 warps), QK 356 (16 x (LDS.128, 8 shift/mask, 8 FMA) and the transposed
#     butterfly: 15 shuffles, 15 adds, 30 selects), softmax 24, P V 327 (16 x (shuffle,
#     LDS.128, 8 shift/mask, 8 FMA)), loop 3: ~800 instructions: ~805 issue slots.
#     Shared memory: 16 + 16 LDS.128 of 512 bytes (4 wavefronts each), staging 8 x 4,
#     row offsets 4: 164 wavefronts.
# Other head sizes and group sizes are scaled by (head_dim / 128) and by G query heads a
# block: an approximation (only the <bf16, 4, 1> instance was counted).
DEC_ISSUE = {"old": 2860, "new": 805}
DEC_WAVES = {"old": 544, "new": 164}
DEC_KEYS, DEC_SMS = 32, 132
# Blocks of <bf16, 4, 1> an SM holds (cudaOccupancyMaxActiveBlocksPerMultiprocessor, as
# gpu/backend_cuda.cu asks at init): ptxas gives it 64 registers and 16,640 bytes of shared
# memory on sm_90 (__launch_bounds__(128, 8)): registers allow 8, shared memory 13, threads
# 16: 8. Split rule constants: gpu/gpu_ops.cuh; scratch: CUDA_PARTIAL_FLOATS.
DEC_PER_SM = 8
SPLIT_MIN_KEYS, SPLIT_MAX, PARTIAL_FLOATS = 128, 128, 4 << 20
# The kernel stages a tile, waits for it, then computes it: no load of the next tile is in
# flight meanwhile, so a block moves one tile per DRAM round trip plus one warp's issue of
# the tile. DRAM_LAT: ASSUMED ~700 ns for a loaded H100's HBM round trip (not measured
# here); the bound it gives is Little's law for the blocks resident at once.
DRAM_LAT = 700e-9
SPLIT_RULE = "occupancy"  # --split-rule

# gpu/sample.cu's DRAM bytes a token of a row (n_top = 0; the history is sparse), counted
# from the code. The bitmap of penalized ids costs 1/8 byte a token to clear and to read.
#   greedy:  clear + pass 1 (logits + bitmap: max, best key) + pass 2 (logits: the
#            log-sum-exp)
#   sampled, compacted: clear + pass 1 + pass 2 (logits + bitmap: the log-sum-exp and the
#            histogram) + pass 3 (logits + bitmap: compaction); the rest is shared memory
#   sampled, full row (fallback): clear + passes 1 and 2, then sample_full with top-p: copy
#            (8), / T (8), best key (4), e and W (8), top-p radix select (8 passes of 4,
#            the first also reading e: 36), kept total (4), the draw's select (32)
#            = 100; top-k adds 8 passes of 4
SAMPLE_GREEDY_B = 0.125 + 4.125 + 4
SAMPLE_COMPACT_B = 0.125 + 4.125 + 4.125 + 4.125
SAMPLE_FULL_B = 0.125 + 4.125 + 4.125 + 100

SHAPES = {
    # n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab
    "llama3-8b": (32, 4096, 14336, 32, 8, 128, 128256),
    "llama3-70b": (80, 8192, 28672, 64, 8, 128, 128256),
    "qwen3-8b": (36, 4096, 12288, 32, 8, 128, 151936),
    "gemma2-9b": (42, 3584, 14336, 16, 8, 256, 256000),
}


def cdiv(a, b):
    return -(-a // b)


def attn_splits(n_tok, n_head, n_head_kv, head_dim, max_ctx, n_sm=DEC_SMS, per_sm=DEC_PER_SM,
                cap=PARTIAL_FLOATS):
    """gpu_attention_splits (gpu/attention.cu) for bf16 K/V, the same inputs and answer:
    the most splits whose blocks fit in one wave of n_sm x per_sm (1 if the unsplit grid
    fills it), >= SPLIT_MIN_KEYS keys of max_ctx a split, <= SPLIT_MAX, partials <= cap."""
    if n_tok <= 0:
        return 1
    gqa = n_head % n_head_kv == 0 and n_head // n_head_kv <= 8 and head_dim * 2 % 16 == 0 \
        and head_dim <= 256
    base = n_tok * (n_head_kv if gqa else n_head)
    wave = n_sm * max(per_sm, 1)
    s = min(1 if base >= wave else wave // base, max_ctx // SPLIT_MIN_KEYS, SPLIT_MAX)
    while s > 1 and n_tok * n_head * s * (head_dim + 2) > cap:
        s -= 1
    return max(s, 1)


def attn_splits_2sm(B, HKV, ctx):
    """The rule before (main at a23609b): 2 blocks per SM, >= 128 keys a split, <= 32."""
    return max(1, min(cdiv(2 * DEC_SMS, B * HKV), ctx // 128, 32))


def decode_attention(shape, B, ctx, kernel, rule="occupancy"):
    """(seconds, dram, issue, smem, latency, splits) of decode attention over all layers
    with the GQA kernel `kernel` ("old" or "new") and split rule `rule` ("occupancy" or
    "2/SM"), the context as max_ctx (a decode graph sizes its splits for the model's
    longest context instead; its splits keep >= 128 keys, so a shorter context fills the
    first few): the largest of reading the KV cache once, the instruction issue and the
    shared-memory wavefronts of its blocks, an SM running ceil(blocks / 132) of them (4
    schedulers issuing one instruction a clock each, one shared-memory wavefront a clock),
    and the latency bound: the n_sm x DEC_PER_SM blocks resident at once each moving one
    tile per DRAM_LAT plus one warp's issue of the tile."""
    L, E, F, H, HKV, HD, V = shape
    G = H // HKV
    dram = B * ctx * L * 2 * HKV * HD * 2 / BW
    if rule == "occupancy":
        ns = attn_splits(B, H, HKV, HD, ctx)
    else:
        ns = attn_splits_2sm(B, HKV, ctx)
    tiles = cdiv(cdiv(ctx, ns), DEC_KEYS)   # tiles a block walks
    blocks = B * HKV * ns
    per_sm = cdiv(blocks, DEC_SMS)          # blocks an SM runs
    heads = per_sm * tiles * G * HD / 128   # (head, tile) pairs an SM computes
    warp = tiles * cdiv(G, 4) * HD / 128    # ... and its busiest warp
    issue = L * max(heads * DEC_ISSUE[kernel] / 4, warp * DEC_ISSUE[kernel]) / CLOCK
    smem = L * heads * DEC_WAVES[kernel] / CLOCK
    resident = min(blocks, DEC_SMS * DEC_PER_SM)
    per_tile = DRAM_LAT + cdiv(G, 4) * HD / 128 * DEC_ISSUE[kernel] / CLOCK
    lat = L * blocks * tiles / resident * per_tile
    return max(dram, issue, smem, lat), dram, issue, smem, lat, ns


def kernels(shape, B, ctx, after, fallback=0.0, dec_kernel="new", rule=None):
    """[(name, bytes, flops, flops_peak, t_min)] of one decode step: B sequences, each
    with ctx tokens of context (its new token included), bf16 weights and KV; fallback:
    the fraction of sampled rows on gpu/sample.cu's full-row path; t_min: a bound in seconds
    other than bytes and flops (L2 traffic, instruction issue), 0 if none. dec_kernel and
    rule: the decode attention of "after" (default: today's kernel and SPLIT_RULE)."""
    L, E, F, H, HKV, HD, V = shape
    G = H // HKV
    qd, kvd = H * HD, HKV * HD
    w_layer = E * (qd + 2 * kvd) + qd * E + 3 * E * F
    ks = []
    ks.append(("GEMMs (weights)", 2 * w_layer * L, 2 * B * w_layer * L, BF16, 0))
    ks.append(("LM head", 2 * E * V, 2 * B * E * V, BF16, 0))
    # activations: fp32 residual, bf16 GEMM inputs, fp32 GEMM outputs (qkv, gate|up, ...)
    act = B * L * (4 * E * 4 + 2 * E * 2 + 4 * (qd + 2 * kvd) * 3 + 2 * qd * 2
                   + 4 * 2 * F * 2 + 2 * F * 2)
    ks.append(("activations (norm, bias, swiglu, ...)", act, 0, FP32, 0))
    kv = B * ctx * L * 2 * kvd * 2
    att_fl = 4 * B * ctx * H * HD * L
    if after:
        ks.append(("decode attention (GQA kernel)", kv, att_fl, FP32,
                   decode_attention(shape, B, ctx, dec_kernel, rule or SPLIT_RULE)[0]))
    else:
        ks.append(("decode attention (per query head)", kv, att_fl, FP32,
                   kv * (G - 1) / L2_BW))
    ks.append(("KV write", B * L * 2 * kvd * 2, 0, FP32, 0))
    pairs = B * L * (H + HKV) * (HD // 2)
    if after:
        ks.append(("rope (tables)", B * L * (qd + kvd) * 4 * 2, 6 * pairs, FP32, 0))
    else:
        ks.append(("rope (double sincos)", B * L * (qd + kvd) * 4 * 2, 100 * pairs, FP64, 0))
    ks.append(("logits write", B * V * 4, 0, FP32, 0))
    if after:
        sampled = (1 - fallback) * SAMPLE_COMPACT_B + fallback * SAMPLE_FULL_B
        ks.append(("sampling, greedy", B * V * SAMPLE_GREEDY_B, 0, FP32, 0))
        ks.append(("sampling, top-p", B * V * sampled, 0, FP32, 0))
    else:
        ks.append(("sampling, greedy", B * V * 4, 0, FP32, 0))
        ks.append(("sampling, top-p", B * V * 8 * 130, 0, FP32, 0))
    return ks


def step_time(ks, sampled):
    t = 0.0
    rows = []
    for name, by, fl, peak, t_min in ks:
        if name.startswith("sampling") and name != ("sampling, top-p" if sampled else "sampling, greedy"):
            continue
        tk = max(by / BW, fl / peak if peak else 0, t_min)
        rows.append((name, by, fl, tk))
        t += tk
    return t, rows


def prefill(shape, n):
    """FLOPs of a prefill of n tokens (causal attention: half of the n^2 scores)."""
    L, E, F, H, HKV, HD, V = shape
    qd, kvd = H * HD, HKV * HD
    w_layer = E * (qd + 2 * kvd) + qd * E + 3 * E * F
    gemm = 2 * n * w_layer * L + 2 * E * V  # the LM head for the last token only
    attn = 2 * 2 * n * n / 2 * H * HD * L
    return gemm, attn


def prefill_attention_tc(shape, n):
    """Estimated seconds of causal attention over a prefill of n tokens on the tensor-core
    kernel: the largest of its issue time, its tensor-core time, its L2 traffic (each block
    re-reads the K/V of its keys) and reading K/V once from DRAM; with the bounds, for the
    record. None when the kernel does not take the shape (head_dim > 128)."""
    L, E, F, H, HKV, HD, V = shape
    if HD > 128 or HD % 16:
        return None
    # trips of one head in one layer: query tile i sees keys [0, 16 (i + 1))
    trips = sum((min(n, TC_Q * (i + 1)) + TC_KEYS - 1) // TC_KEYS
                for i in range((n + TC_Q - 1) // TC_Q))
    warp_trips = trips * H * L
    t_issue = warp_trips * TC_ISSUE / (SMSPS * CLOCK)
    # an HMMA.16816 is 2048 MACs: 4 clocks of one SMSP at the dense peak
    t_mma = warp_trips * TC_HMMA * 4 / MMA_SYNC_FRAC / (SMSPS * CLOCK)
    G = H // HKV
    nw = 4 if G % 4 == 0 else 3 if G % 3 == 0 else 2 if G % 2 == 0 else 1
    l2 = warp_trips / nw * TC_KEYS * HD * 2 * 2
    t_l2 = l2 / L2_BW
    t_dram = n * HKV * HD * 2 * 2 * L / BW
    return max(t_issue, t_mma, t_l2, t_dram), t_issue, t_mma, t_l2


# ---- fixed cost per node ----------------------------------------------------------------
# A decode step replays one CUDA graph of run_pass's kernels (gpu/backend_cuda.cu), then
# samples: each node pays a cost the bytes above do not show (the gap between graph nodes,
# a kernel's ramp-up and tail, latency a small or single-block kernel cannot hide, a
# GEMM's shortfall from the bandwidth at a few columns). NODE_US lumps all of it into one
# number per node, CALIBRATED from ONE measured point: the H200 run
# (bench/results/gpu-h200-2026-11-29.md; binaries of main 092388f, whose run_pass is
# today's before e17f's fusion) at batch 1, context 512: 5.473 ms a step, against this
# model's step at 4.814 TB/s with that build's decode attention (kernel "old", rule
# "2/SM"). It is an ESTIMATE from one run, not a measured per-node time: nsys/ncu on a GPU
# would split it (bench/results/e17f-2026-11-30.md says how).
H200_BW = 4.814e12        # what bench/gpu_decode took as the H200's peak
H200_STEP = {(1, 512): 5.473e-3, (8, 512): 6.216e-3, (64, 512): 10.382e-3,
             (256, 512): 23.740e-3}  # measured ms a step (gpu_decode, greedy), 092388f
# What a step puts on the stream beside the graph (gpu_decode: forward + greedy sampling):
# the graph's metadata upload, the sampling rows' upload, the sample kernel, the results'
# download: counted as nodes too (ASSUMED: the same fixed cost each).
STREAM_OPS = 4
# Per-architecture graph features (core/model/arch.h) and the context the decode graphs
# size their attention splits for (min(n_ctx_train, 32768); the synthetic llama-3-8b
# declares 8192).
FEATURES = {
    "llama3-8b": (set(), 8192),
    "llama3-70b": (set(), 8192),
    "qwen3-8b": ({"qk_norm"}, 32768),
    "gemma2-9b": ({"post_norms", "embd_scale", "final_softcap"}, 8192),
}


# g17v's fused decode path (gpu/gemv.cu; run_pass's pass_fused): every projection of a pass of
# <= GEMV_MAX_TOK tokens a GEMV of its own, the RMS norms before QKV, gate|up and the LM head
# in their prologues, SwiGLU in gate|up's epilogue: 6 nodes a pre-norm layer (QKV, qkv_post,
# attention, O, gate|up, down), the final norm and LM head one. The prologue keeps the
# normalized inputs (bf16) in shared memory: B x n_embd x 2 <= GEMV_XS. g17d: in dynamic
# shared memory, opted in to 200 KiB (GPU_GEMV_XS_BYTES; an H100 allows 227 KiB a block),
# up from 48 KiB - 64 of static: batch bucket 8 fused for n_embd <= 12800 (llama3-8b, 70b).
# g17r: for layers without Q/K head norms the QKV GEMV's epilogue does qkv_post's work (bias,
# RoPE, K/V write): 5 nodes such a layer (decode_nodes(..., gemv="qkv")). Its cost beyond
# the node (a table lookup and a few stores a pair and token) is not modelled.
GEMV_MAX_TOK, GEMV_XS = 8, 200 * 1024
# How the GEMV streams W (gpu/gemv.cu): blocks of 512 threads, each thread 8 loads of 16
# bytes in flight (two rows x GV_UNROLL 4 chunks): 64 KiB a block, at most one block an SM
# (ptxas: 54-128 registers a thread, no spill). Little's law at DRAM_LAT needs
# BW x DRAM_LAT / 132 SMs in flight an SM (3.35 TB/s: 18 KiB; 4.8 TB/s: 26 KiB): so the
# model ASSUMES the GEMV streams W at BW, as it assumed of cuBLAS. Its cost beyond: each
# block's prologue reads its tokens' residual and branch output twice (sum of squares, then
# the normalized values) and the norm weight once, 20 bytes an element through L2, before
# its loads of W start (gemv_prologue_s).
GEMV_SMS, GEMV_THREADS, GEMV_INFLIGHT = 132, 512, 8 * 16
# c17: the GEMVs between two attentions (a layer's O, gate|up, down and the next layer's
# QKV, or after the last layer the LM head) run as ONE cooperative kernel (gpu_gemv_chain),
# its blocks meeting at a grid barrier (gpu/grid_sync.cuh) between the projections: 2
# nodes a llama layer (attention, chain), the first layer's QKV one. Each barrier costs GRID_SYNC_US instead
# of a node's NODE_US: ASSUMED, not measured (no GPU): one atomic a block at L2 and a poll
# of the generation word until the last block's increment lands (two L2 round trips under
# 132 blocks' contention, ~1 us), plus the next projection's DRAM ramp (~1 us: its first
# loads start after the barrier; a node's ramp is part of NODE_US too). Two public points,
# not ours: Hazy Research's Llama-1B megakernel post (2025-05-27) measured ~1.3 us of
# launch cost a kernel in a CUDA graph on an H100, the rest of a node being the ramp and
# the tail; a persistent Qwen3-0.6B decode kernel on an RTX 5090 (128 blocks of 512, four
# atomic grid barriers a layer, 28 layers; the "1,000 tokens/s megakernel" write-up) spent
# 288 us of a 1,000 us step beyond its weight reads, on its barriers and everything else:
# <= ~2.6 us a barrier. The node table prints the barrier cost at which batch 1 x 512
# would fall below 85 % of its roofline.
GRID_SYNC_US = 2.0
# a17: passes of <= CHAIN_ATTN_TOK tokens (16-bit K/V, the GQA decode kernel's shape, heads of
# <= 128) run the layer's decode attention inside the chain too (gpu_gemv_chain's attention
# step: attn_decode_gqa_body on parts of 128 threads, the same splits and arithmetic as the
# kernel), and a chain spans layers: up to CHAIN_GEMV_MAX GEMVs (16 llama layers' QKV,
# attention, O, gate|up, down; a kernel parameter of ~24 KiB) one node, a barrier between
# any two steps. Llama-3-8B at batch 1: two chains of 16 layers and the LM head (the 129th
# GEMV) alone. With Q/K head norms qkv_post stays a node a layer and each chain runs from
# an attention to the next layer's QKV. The attention's own time is ASSUMED unchanged (the
# same items, 4 parts a block of the chain's 132 against the kernel's blocks).
CHAIN_ATTN_TOK, CHAIN_GEMV_MAX = 2, 64


def gemv_fused(shape_name, B):
    """Whether run_pass takes g17v's fused path for a pass of B tokens (bf16)."""
    L, E, F, H, HKV, HD, V = SHAPES[shape_name]
    feats, _ = FEATURES[shape_name]
    return ("post_norms" not in feats and 1 <= B <= GEMV_MAX_TOK and B * E * 2 <= GEMV_XS
            and E % 8 == 0 and F % 8 == 0 and H * HD % 8 == 0)


def gemv_prologue_s(shape_name, B):
    """Seconds a step's GEMV prologues add (ESTIMATE): per prologue GEMV (QKV and gate|up of
    each layer, the LM head) every one of its GEMV_SMS blocks reads B x n_embd x 20 bytes
    through L2 at its share of L2_BW, while its W loads wait."""
    L, E, F, H, HKV, HD, V = SHAPES[shape_name]
    return (2 * L + 1) * B * E * 20 / (L2_BW / GEMV_SMS)


def decode_nodes(shape_name, B, fused, rule="occupancy", gemv=False):
    """Nodes of the decode graph of batch bucket B (a power of two) as run_pass enqueues
    them: the embedding (+ gemma's scale), per layer attention norm, QKV GEMM, [bias],
    [Q/K head norm], RoPE, K/V write, attention, [its merge when split], O GEMM,
    [post-norm], FFN norm, gate|up GEMM, SwiGLU, down GEMM, [post-norm]; then the final
    norm, the LM head (+ gemma2's soft-cap). gemv="qkv": g17r's path, g17v's with qkv_post
    done by the QKV GEMV's epilogue for layers without Q/K head norms. fused: e17f's qkv_post (bias, head norm,
    RoPE and K/V write in one kernel) and the split decode attention merged by its own
    last blocks (no merge node; every shape here takes the GQA decode kernel). The count
    tests/gpu_test_model.c checks against the backend's own census (BG_CUDA_GRAPH_LOG)
    for each architecture."""
    L, E, F, H, HKV, HD, V = SHAPES[shape_name]
    feats, gctx = FEATURES[shape_name]
    if rule == "occupancy":
        ns = attn_splits(B, H, HKV, HD, gctx)
    else:
        ns = attn_splits_2sm(B, HKV, gctx)
    qkv_post = 1 if fused else 2 + ("qk_norm" in feats) + ("bias" in feats)
    merge = ns > 1 and not fused
    if gemv and fused and gemv_fused(shape_name, B):  # g17v: gemv=True counts its path
        if gemv in ("qkv", "chain", "attn"):  # g17r: qkv_post in the QKV GEMV's epilogue unless head norms
            qkv_post = 1 if "qk_norm" in feats else 0
        if gemv == "attn" and B <= CHAIN_ATTN_TOK:  # a17
            if qkv_post:  # one chain a layer and qkv_post; the first QKV alone, the LM head
                # in the last chain
                return 1 + ("embd_scale" in feats) + L * 2 + 1 + ("final_softcap" in feats)
            chains = -(-(4 * L + 1) // CHAIN_GEMV_MAX)  # the LM head the last GEMV
            return 1 + ("embd_scale" in feats) + chains + ("final_softcap" in feats)
        if gemv in ("chain", "attn"):  # c17: attention and one chain a layer, the LM head in the last
            return 1 + ("embd_scale" in feats) + 1 + L * (2 + qkv_post) + ("final_softcap" in feats)
        return 1 + ("embd_scale" in feats) + L * (5 + qkv_post) + 1 + ("final_softcap" in feats)
    layer = 2 + 4 + 1 + 1 + qkv_post + merge + 2 * ("post_norms" in feats)
    return 1 + ("embd_scale" in feats) + L * layer + 2 + ("final_softcap" in feats)


def chain_barriers(shape_name, B, gemv):
    """Grid barriers of c17's decode step (gemv == "chain" on the fused path): between the
    steps of each layer's chain, O -> gate|up -> down -> the next layer's QKV (the last
    layer's: the LM head): 3 a layer; a17's (gemv == "attn", B <= CHAIN_ATTN_TOK) between any
    two steps of its chains (5 a layer but one a chain; 4 a layer with head norms); 0 for
    any other graph."""
    L = SHAPES[shape_name][0]
    if gemv not in ("chain", "attn") or not gemv_fused(shape_name, B):
        return 0
    if gemv == "attn" and B <= CHAIN_ATTN_TOK:  # a17: QKV -> attention -> O -> gate|up -> down
        if "qk_norm" in FEATURES[shape_name][0]:
            return 4 * L
        chains = -(-(4 * L + 1) // CHAIN_GEMV_MAX)
        return 5 * L + 1 - chains  # every step but each chain's first
    return 3 * L


def at_bw(bw, f, *args):
    """f(*args) with the model's HBM bandwidth BW set to bw."""
    global BW
    saved, BW = BW, bw
    try:
        return f(*args)
    finally:
        BW = saved


def h200_model_step(B, ctx):
    """This model's step (no node term) for the build the H200 ran: 092388f's decode
    attention (kernel "old", rule "2/SM"), greedy."""
    return step_time(kernels(SHAPES["llama3-8b"], B, ctx, True, 0.0, "old", "2/SM"), False)[0]


def h200_nodes(B):
    """Nodes of 092388f's batch-B step: its unfused graph and the stream operations."""
    return decode_nodes("llama3-8b", B, False, "2/SM") + STREAM_OPS


def roofline(rows):
    """Seconds of a step's roofline: its weight GEMMs' rows and its KV bytes once at BW."""
    t = sum(r[3] for r in rows if r[0] in ("GEMMs (weights)", "LM head"))
    return t + sum(r[1] / BW for r in rows if r[0].startswith("decode attention"))


def node_us():
    """(NODE_US, the model's calibration step, its nodes): the H200's measured batch-1 step
    less this model's, over the nodes of that step (092388f: unfused, 2/SM splits)."""
    t = at_bw(H200_BW, h200_model_step, 1, 512)
    n = h200_nodes(1)
    return (H200_STEP[(1, 512)] - t) / n, t, n


def node_table(a, shape_name):
    """The fixed-cost term: its calibration, the H200's other points against it, and
    the step estimates of each decode graph so far with it."""
    shape = SHAPES[shape_name]
    nu, t_cal, n_cal = node_us()
    print(f"\nfixed cost per node (ESTIMATE, calibrated on ONE measured point): NODE_US = "
          f"{nu*1e6:.2f} us = (5.473 ms measured on the H200 at batch 1 x 512 - "
          f"{t_cal*1e3:.3f} ms modelled at {H200_BW/1e12:.3f} TB/s) / {n_cal} nodes "
          f"({n_cal - STREAM_OPS} in the 092388f decode graph + {STREAM_OPS} stream ops). "
          f"The other measured points, unfitted (llama3-8b, 092388f's attention):")
    print("| batch | context | measured ms | model ms | nodes | model + nodes ms | measured / (model + nodes) |")
    print("|---|---|---|---|---|---|---|")
    for (B, ctx), ms in sorted(H200_STEP.items()):
        t = at_bw(H200_BW, h200_model_step, B, ctx)
        n = h200_nodes(B)
        print(f"| {B} | {ctx} | {ms*1e3:.3f} | {t*1e3:.3f} | {n} | {(t + n*nu)*1e3:.3f} "
              f"| {ms / (t + n*nu):.2f} |")
    # the decode graphs so far, oldest first: (label, decode_nodes' arguments)
    graphs = [("092388f", (False, "occupancy", False)), ("e17f", (True, "occupancy", False)),
              ("g17v", (True, "occupancy", True)), ("g17r", (True, "occupancy", "qkv")),
              ("c17", (True, "occupancy", "chain")), ("a17", (True, "occupancy", "attn"))]

    def with_nodes(B, ctx, args, sync_us=GRID_SYNC_US):
        """(step seconds with the node term, the grid barriers and the GEMV prologues,
        nodes) for graph args."""
        Bp = 1 << (B - 1).bit_length()
        t, _ = step_time(kernels(shape, B, ctx, True, a.sample_fallback), False)
        n = decode_nodes(shape_name, Bp, *args) + STREAM_OPS
        pro = gemv_prologue_s(shape_name, Bp) if args[2] and gemv_fused(shape_name, Bp) else 0.0
        bars = chain_barriers(shape_name, Bp, args[2]) * sync_us * 1e-6
        return t + n * nu + pro + bars, n

    print(f"\n{shape_name} decode steps with the node term (ESTIMATES; HBM {BW/1e12:.2f} TB/s; "
          f"NODE_US {nu*1e6:.2f} us, ASSUMED the same on an H100 and for a GEMV node as for the "
          f"cuBLAS node it replaces). Graphs: 092388f (rope, K/V write"
          f"{', head norm' if 'qk_norm' in FEATURES[shape_name][0] else ''} separate, attention "
          f"merge a node when split); e17f (qkv_post, the merge in the decode kernel); g17v "
          f"(decode passes project with gpu/gemv.cu, norms in its prologue, SwiGLU in its "
          f"epilogue, where it applies: bf16 inputs of B x n_embd x 2 <= {GEMV_XS} bytes of "
          f"shared memory, B <= {min(GEMV_MAX_TOK, GEMV_XS // (2 * shape[1]))} here; W ASSUMED streamed at BW from "
          f"{GEMV_THREADS} threads x {GEMV_INFLIGHT} bytes in flight a block; the prologues' L2 "
          f"reads added, L2 {L2_BW/1e12:.0f} TB/s); g17r (qkv_post in the QKV GEMV's "
          f"epilogue unless head norms); c17 (the GEMVs between two attentions one "
          f"cooperative kernel, gpu_gemv_chain; {chain_barriers(shape_name, 1, 'chain')} grid "
          f"barriers a step at GRID_SYNC_US {GRID_SYNC_US:.1f} us, ASSUMED); a17 (main: at "
          f"batch <= {CHAIN_ATTN_TOK} the attention in the chain too, chains of up to "
          f"{CHAIN_GEMV_MAX} GEMVs spanning layers, {chain_barriers(shape_name, 1, 'attn')} "
          f"barriers a step). roofline = "
          f"weights + KV bytes once.")
    labels = " / ".join(g[0] for g in graphs)
    print(f"| batch | context | model ms | roofline ms | nodes {labels} | ms {labels} "
          f"| fraction of roofline {labels} |")
    print("|---|---|---|---|---|---|---|")
    for B, ctx in a.scenarios:
        t, rows = step_time(kernels(shape, B, ctx, True, a.sample_fallback), False)
        floor = roofline(rows)
        steps = [with_nodes(B, ctx, g[1]) for g in graphs]
        print(f"| {B} | {ctx} | {t*1e3:.3f} | {floor*1e3:.3f} "
              f"| {' / '.join(str(n) for _, n in steps)} "
              f"| {' / '.join(f'{ts*1e3:.3f}' for ts, _ in steps)} "
              f"| {' / '.join(f'{floor/ts:.1%}' for ts, _ in steps)} |")
    t1, rows1 = step_time(kernels(shape, 1, 512, True), False)
    ts1, n1 = with_nodes(1, 512, graphs[-1][1])
    # node seconds batch 1 x 512 can afford (ts1 holds the barriers already)
    spare = roofline(rows1) / 0.85 - (ts1 - n1 * nu)
    nb1 = chain_barriers(shape_name, 1, graphs[-1][1][2])
    print(f"batch 1 x 512 reaches 85 % of its roofline, by this model, at <= {spare / nu:.0f} nodes "
          f"of {nu*1e6:.2f} us (or main's {n1} nodes of <= {spare / n1 * 1e6:.2f} us), with "
          f"{nb1} grid barriers of {GRID_SYNC_US:.1f} us.")
    if nb1:
        print(f"{graphs[-1][0]}'s batch 1 x 512 step against the grid barrier's cost (GRID_SYNC_US, ASSUMED):")
        print("| barrier us | ms | fraction of roofline |")
        print("|---|---|---|")
        floor1 = roofline(rows1)
        for us in (0.5, 1.0, 2.0, 3.0, 4.0, 5.74):
            ts, _ = with_nodes(1, 512, graphs[-1][1], us)
            print(f"| {us:.2f} | {ts*1e3:.3f} | {floor1/ts:.1%} |")
        even = (floor1 / 0.85 - (ts1 - nb1 * GRID_SYNC_US * 1e-6)) / nb1 * 1e6
        print(f"85 % holds while a barrier costs <= {even:.2f} us ({even / (nu*1e6):.0%} of NODE_US).")
    pdl_table(a, shape_name, graphs[-1][1], with_nodes, nu)


# ---- programmatic dependent launch (p17) -------------------------------------------------
# On the fused path (batch <= 8) every GEMV and the GQA decode attention is launched with
# cudaLaunchAttributeProgrammaticStreamSerialization (gpu/pdl.cuh): the next kernel is
# scheduled while this one's last wave runs, pulls its first weight lines into L2 and waits.
# It can hide the launch gap and the next kernel's DRAM ramp, not the wait's release, so it
# takes a part of NODE_US off each such node, never all of it. How much is NOT known here
# (no GPU): PDL_SAVE_US is ASSUMED from ONE published measurement, llama.cpp PR #22522
# (github.com/ggml-org/llama.cpp/pull/22522): gpt-oss 20B MXFP4, tg128, 332.05 -> 376.31
# tokens/s (x1.13) = 0.354 ms a token saved; over its kernels a token, ASSUMED ~550
# (24 layers x ~23: norms, Q8_1 quantizations, GEMVs, RoPE, set-rows, attention and its
# combine, router, top-k, expert GEMVs, adds; not counted from a trace): 0.64 us a kernel.
# Not fitted to our own NODE_US: the table prints what a node would need to save for 85 %.
PDL_TG_MS = (1 / 332.05 - 1 / 376.31) * 1e3  # ms a token, llama.cpp PR #22522, gpt-oss 20B
PDL_KERNELS = 550                            # ASSUMED kernels a token of that run
PDL_SAVE_US = PDL_TG_MS * 1e3 / PDL_KERNELS   # ASSUMED saving a PDL-launched node


def pdl_nodes(shape_name, B, gemv="qkv"):
    """Nodes of the fused batch-B graph launched with PDL: every layer's GEMVs and GQA
    decode attention (qkv_post, where it stays a kernel, and the embedding stay plain), and
    the LM head; with c17's chains (cooperative launches, not PDL) the attentions, the
    first QKV; with a17's (B <= CHAIN_ATTN_TOK) the LM head alone (and the first QKV with
    head norms); 0 off the fused path."""
    L = SHAPES[shape_name][0]
    if not gemv_fused(shape_name, B):
        return 0
    if gemv == "attn" and B <= CHAIN_ATTN_TOK:
        return 1 + ("qk_norm" in FEATURES[shape_name][0])
    if gemv in ("chain", "attn"):
        return L + 1
    return L * 5 + 1  # QKV, attention, O, gate|up, down; LM head


def pdl_table(a, shape_name, args, with_nodes, nu):
    """The batch-1 and batch-8 steps of main's graph (c17) with the PDL nodes' NODE_US
    reduced by PDL_SAVE_US (ASSUMED), and the saving a PDL node would need for 85 %."""
    shape = SHAPES[shape_name]
    print(f"\n{shape_name} with programmatic dependent launch (p17; ESTIMATES): each PDL node's "
          f"NODE_US {nu*1e6:.2f} us less PDL_SAVE_US {PDL_SAVE_US:.2f} us, ASSUMED from llama.cpp "
          f"PR #22522 (gpt-oss 20B tg128 x1.13 = {PDL_TG_MS:.3f} ms a token over ~{PDL_KERNELS} "
          f"kernels, ASSUMED); 'needs' = the saving a PDL node would need for 85 % of the roofline.")
    print("| batch | context | nodes | PDL nodes | ms | ms with PDL | fraction of roofline | with PDL "
          "| saving a PDL node needs for 85 % |")
    print("|---|---|---|---|---|---|---|---|---|")
    ctxs = sorted({c for _, c in a.scenarios})
    for B, ctx in [(B, c) for B in (1, 8) for c in ctxs]:
        Bp = 1 << (B - 1).bit_length()
        ts, n = with_nodes(B, ctx, args)
        floor = roofline(step_time(kernels(shape, B, ctx, True, a.sample_fallback), False)[1])
        npdl = pdl_nodes(shape_name, Bp, args[2])
        tp = ts - npdl * PDL_SAVE_US * 1e-6
        need = (ts - floor / 0.85) / npdl * 1e6 if npdl else float("nan")
        needs = (f"{need:.2f} us ({need / (nu*1e6):.0%} of NODE_US)" if need > 0
                 else "none (85 % without PDL)")
        print(f"| {B} | {ctx} | {n} | {npdl} | {ts*1e3:.3f} | {tp*1e3:.3f} | {floor/ts:.1%} "
              f"| {floor/tp:.1%} | {needs} |")


# bench/host_step at B=256 (us per row): A (forward -> sample) and B (sample -> next
# forward) with overlap on; bench/results/overlap17-2026-11-29.md.
HOST_US = "0.19:0.49"


def overlap_table(a, shape):
    """The host time overlap hides, per decode scenario (greedy; ESTIMATES)."""
    ua, ub = (float(x) * 1e-6 for x in a.host_us.split(":"))
    print(f"\noverlap (ESTIMATE; host {a.host_us} us per row, grammar masks "
          f"{a.mask_ms} ms per row):")
    print("| batch | context | forward ms | sampling ms | host A ms | host B ms | serial ms "
          "| engine half ms | with device half ms | hidden |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for B, ctx in a.scenarios:
        _, rows = step_time(kernels(shape, B, ctx, True, a.sample_fallback), False)
        t_s = sum(r[3] for r in rows if r[0].startswith("sampling"))
        t_f = sum(r[3] for r in rows) - t_s
        ha, hb = B * (ua + a.mask_ms * 1e-3), B * ub
        serial = t_f + t_s + ha + hb
        engine_half = max(t_f, ha) + t_s + hb
        both = max(max(t_f, ha) + t_s, ha + hb)
        print(f"| {B} | {ctx} | {t_f*1e3:.3f} | {t_s*1e3:.3f} | {ha*1e3:.3f} | {hb*1e3:.3f} "
              f"| {serial*1e3:.3f} | {engine_half*1e3:.3f} | {both*1e3:.3f} "
              f"| {(serial - both) / serial:.1%} |")


def main():
    global BW, SPLIT_RULE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="llama3-8b", choices=sorted(SHAPES))
    ap.add_argument("--scenarios", default="1x512,1x32768,256x512,64x4096",
                    type=lambda v: [tuple(int(x) for x in sc.split("x")) for sc in v.split(",")],
                    help="BATCHxCONTEXT,...")
    ap.add_argument("--prefill", type=int, default=32768)
    ap.add_argument("--measured", help="a `batchgen bench` JSON report from a GPU run")
    ap.add_argument("--detail", action="store_true", help="per-kernel rows")
    ap.add_argument("--sample-fallback", type=float, default=0.0,
                    help="fraction of sampled rows on gpu/sample.cu's full-row path")
    ap.add_argument("--host-us", default=HOST_US,
                    help="A:B, host microseconds per row of a step (bench/host_step)")
    ap.add_argument("--mask-ms", type=float, default=0.0,
                    help="grammar-mask milliseconds per constrained row, added to A "
                         "(spread over the mask threads: pass ms / threads)")
    ap.add_argument("--hbm", type=float, default=BW / 1e12,
                    help="DRAM bandwidth in TB/s (H100 SXM 3.35; H200 4.8); the rest of "
                         "the machine stays an H100 (same SMs and clock)")
    ap.add_argument("--split-rule", default=SPLIT_RULE, choices=("occupancy", "2/SM"),
                    help="the decode attention split rule of the step times: this one "
                         "(one wave of blocks at the kernel's occupancy) or the one before")
    a = ap.parse_args()
    BW = a.hbm * 1e12
    SPLIT_RULE = a.split_rule
    shape = SHAPES[a.shape]
    print(f"# perf_model: {a.shape} bf16 on an H100 SXM's SMs (HBM {BW/1e12:.2f} TB/s, "
          f"bf16 {BF16/1e12:.0f} TFLOPS) -- roofline ESTIMATES, not measurements")
    print("| batch | context | sampling | before ms | after ms | after tok/s | roofline ms |")
    print("|---|---|---|---|---|---|---|")
    for B, ctx in a.scenarios:
        for sampled in (False, True):
            tb, _ = step_time(kernels(shape, B, ctx, False), sampled)
            ta, rows = step_time(kernels(shape, B, ctx, True, a.sample_fallback), sampled)
            # the floor: weights + KV + logits once, or the GEMM flops
            floor = sum(r[3] for r in rows if r[0] in ("GEMMs (weights)", "LM head"))
            floor += sum(r[1] / BW for r in rows if r[0].startswith("decode attention"))
            print(f"| {B} | {ctx} | {'top-p' if sampled else 'greedy'} | {tb*1e3:.2f} | "
                  f"{ta*1e3:.2f} | {B/ta:.0f} | {floor*1e3:.2f} |")
            if a.detail:
                for name, by, fl, tk in rows:
                    print(f"|   | | {name} | | {tk*1e3:.3f} | {by/1e9:.2f} GB | "
                          f"{fl/1e12:.2f} TFLOP |")
    print(f"\ndecode attention, all layers (ESTIMATES; GQA kernel, bounds from its PTX "
          f"counts: DEC_ISSUE {DEC_ISSUE}, DEC_WAVES {DEC_WAVES}; latency: "
          f"{DEC_SMS} x {DEC_PER_SM} blocks resident, {DRAM_LAT*1e9:.0f} ns a tile, ASSUMED). "
          f"kernel old: main at 3b78123; new: e17a's vectors. rule 2/SM: splits for 2 blocks "
          f"an SM (<= 32); occupancy: one wave of {DEC_SMS} x {DEC_PER_SM} (<= {SPLIT_MAX}):")
    print("| batch | context | kernel | rule | splits | DRAM ms | issue ms | shared ms "
          "| latency ms | bound ms | / DRAM |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for B, ctx in a.scenarios:
        for kern, rule in (("old", "2/SM"), ("new", "2/SM"), ("new", "occupancy")):
            t, dram, issue, smem, lat, ns = decode_attention(shape, B, ctx, kern, rule)
            print(f"| {B} | {ctx} | {kern} | {rule} | {ns} | "
                  f"{dram*1e3:.3f} | {issue*1e3:.3f} | {smem*1e3:.3f} | {lat*1e3:.3f} | "
                  f"{t*1e3:.3f} | {t/dram:.2f}x |")

    def ratio(fallback):  # the largest sampled / greedy step time over the scenarios
        r = 0
        for B, ctx in a.scenarios:
            ks = kernels(shape, B, ctx, True, fallback)
            r = max(r, step_time(ks, True)[0] / step_time(ks, False)[0])
        return r
    print(f"\nsampled / greedy step (after): {ratio(a.sample_fallback):.3f}x at most over "
          f"these scenarios with {a.sample_fallback:.0%} of sampled rows on the full-row "
          f"path; {ratio(1.0):.3f}x if every row fell back (issue 17: <= 1.1x)")
    g, at = prefill(shape, a.prefill)
    t_gemm, t_att = g / BF16, at / BF16
    print(f"\nprefill of {a.prefill} tokens: {g/1e12:.0f} TFLOP of GEMMs + {at/1e12:.0f} TFLOP "
          f"of causal attention: {1e3*(t_gemm + t_att):.0f} ms at the bf16 peak; at "
          f"FlashAttention-3's ~600 TFLOPS for attention and cuBLAS's ~700 for GEMMs: "
          f"{1e3*(g/700e12 + at/600e12):.0f} ms. Attention on CUDA cores (fp32 FMA, "
          f"{FP32/1e12:.0f} TFLOPS peak): >= {1e3*at/FP32:.0f} ms for attention alone.")
    tc = prefill_attention_tc(shape, a.prefill)
    fa3 = g / 700e12 + at / 600e12
    if tc is None:
        print("tensor-core prefill attention: not for this shape (head_dim > 128): CUDA cores.")
    else:
        t, t_issue, t_mma, t_l2 = tc
        total = g / 700e12 + t
        print(f"tensor-core prefill attention (attn_prefill_tc_kernel, ESTIMATE): issue "
              f"{1e3*t_issue:.0f} ms, tensor cores {1e3*t_mma:.0f} ms (mma.sync at "
              f"{MMA_SYNC_FRAC:.2f} of peak), L2 {1e3*t_l2:.0f} ms: {1e3*t:.0f} ms "
              f"({at/t/1e12:.0f} TFLOPS); with cuBLAS's GEMMs the prefill takes "
              f"{1e3*total:.0f} ms = {total/fa3:.2f}x FlashAttention-3's figure (issue 17: "
              f"<= 2x). A lower bound: it assumes the 4 warps a scheduler holds hide every "
              f"latency (barriers, shared-memory round trips).")
    overlap_table(a, shape)
    node_table(a, a.shape)
    if a.measured:
        with open(a.measured) as f:
            rep = json.load(f)
        print("\nmeasured:", json.dumps(rep.get("results", rep))[:2000])
    else:
        print("\nmeasured: none given (--measured REPORT.json: what bench/gpu_session.sh bench "
              "writes). The one GPU run so far (H200, before the vectorised decode attention): "
              "bench/results/gpu-h200-2026-11-29.md, batch 256 x 512 at 23.74 ms a step.")


if __name__ == "__main__":
    sys.exit(main())
