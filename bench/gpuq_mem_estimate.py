#!/usr/bin/env python3
"""gpuq_mem_estimate.py: the CUDA backend's device weight bytes and the bytes a batch-1
decode step reads, before (every matrix BF16) and after the resident path (Q8_0, Q4_K and
Q6_K matrices kept as blocks, gpu/backend_cuda.cu's mat_resident), for Llama-3 8B and 70B
as llama.cpp's Q4_K_M and Q8_0 presets type their tensors. An ESTIMATE from shapes and
tensor types: nothing is allocated or timed.

    python3 bench/gpuq_mem_estimate.py

Q4_K_M's types (llama.cpp's llama_tensor_get_type, as documented there): token_embd and
most matrices Q4_K; output Q6_K; attn_v and ffn_down Q6_K on the "more bits" layers
(i < n/8, i >= 7n/8, and every third between: (i - n/8) % 3 == 2), else Q4_K; on a 70B
model an attn_v that would be Q4_K becomes Q5_K. A fused matrix (Q|K|V, gate|up) is resident
when one of its parts is of a resident type; a part of another type (the Q5_K V) is then
stored as BF16 rows beside the others' blocks (gpu_qmat's type 30). Column "BF16 parts":
the layers with one. Norms (fp32) are left out (< 1 MiB a layer)."""

BLOCK = {"Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210), "Q8_0": (32, 34)}
RESIDENT = {"Q8_0", "Q4_K", "Q6_K"}
SHAPES = {  # layers, embd, q width, kv width, ffn, vocab
    "Llama-3-8B": (32, 4096, 4096, 1024, 14336, 128256),
    "Llama-3-70B": (80, 8192, 8192, 1024, 28672, 128256),
}


def more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensors(name, preset):
    """(kind, part types, rows, cols) of each matrix: kind embd, out, qkv, o, gu, down"""
    L, E, Q, KV, F, V = SHAPES[name]
    big = name.endswith("70B")

    def t(default, bump=False, i=0):
        if preset == "Q8_0":
            return "Q8_0"
        if bump and more_bits(i, L):
            return "Q6_K"
        return default

    out = [("embd", [t("Q4_K")], V, E), ("out", ["Q8_0" if preset == "Q8_0" else "Q6_K"], V, E)]
    for i in range(L):
        tv = t("Q4_K", True, i)
        if preset != "Q8_0" and big and tv == "Q4_K":
            tv = "Q5_K"
        out.append(("qkv", [t("Q4_K"), t("Q4_K"), tv], Q + 2 * KV, E))
        out.append(("o", [t("Q4_K")], E, Q))
        out.append(("gu", [t("Q4_K"), t("Q4_K")], 2 * F, E))
        out.append(("down", [t("Q4_K", True, i)], E, F))
    return out


def qbytes(types, rows, cols):
    """bytes of the parts: blocks, or BF16 rows for a type the GEMV does not read"""
    return sum(rows_i * cols // BLOCK[ty][0] * BLOCK[ty][1] if ty in RESIDENT else rows_i * cols * 2
               for ty, rows_i in types)


def estimate(name, preset):
    L, E, Q, KV, F, V = SHAPES[name]
    before = after = read_before = read_after = 0
    bf16_qkv = 0
    scratch = 0
    for kind, types, rows, cols in tensors(name, preset):
        if kind == "qkv":
            parts = list(zip(types, [Q, KV, KV]))
        elif kind == "gu":
            parts = list(zip(types, [F, F]))
        else:
            parts = [(types[0], rows)]
        dense = rows * cols * 2
        res = any(ty in RESIDENT for ty in types)
        b = qbytes(parts, rows, cols) if res else dense
        if not all(ty in RESIDENT for ty in types):
            bf16_qkv += 1
        if res:
            scratch = max(scratch, min(dense, 256 << 20))
        before += dense
        after += b
        if kind != "embd":  # a step reads one embedding row
            read_before += dense
            read_after += b
    return before, after, read_before, read_after, bf16_qkv, scratch


def main():
    gib = float(1 << 30)
    print("| model | preset | device weights BF16 | resident | + scratch | decode step reads BF16 | resident | BF16 parts |")
    print("|---|---|---|---|---|---|---|---|")
    for name in SHAPES:
        for preset in ("Q4_K_M", "Q8_0"):
            b, a, rb, ra, nq, sc = estimate(name, preset)
            print(f"| {name} | {preset} | {b / gib:.1f} GiB | {a / gib:.1f} GiB | "
                  f"{sc / gib * 1024:.0f} MiB | {rb / gib:.2f} GiB | {ra / gib:.2f} GiB | "
                  f"{nq} of {SHAPES[name][0]} layers |")



# ---- mixture-of-experts models (moeq: the experts stay blocks too) ----
#
# Per layer: attention (Q|K|V, O), the router (fp32 on the device), the experts' gate, up
# and down arrays, and where the model has them a shared expert and leading dense layers.
# Types as llama.cpp's Q4_K_M preset picks them for these shapes (checked on a tiny
# qwen3moe file with ../shared/tools/llama_quantize.c: ffn_gate_exps / ffn_up_exps Q4_K,
# ffn_down_exps Q6_K on the more-bits layers else Q4_K, as the dense ffn_down): a row
# whose length is not a multiple of 256 falls back (Q4_K -> Q5_0, Q6_K -> Q8_0), as
# GLM-4.5-Air's 1408-wide down_exps and gpt-oss's 2880-wide rows do. gpt-oss-20b as
# released: MXFP4 experts, the other matrices assumed Q8_0 (or BF16: second row).
# "before": every expert BF16 (main today), the dense matrices resident as gpu_qres_policy
# makes them when the model does not fit (so "before" is the best main can do);
# "after": the experts' arrays blocks where gpu/moe.cu reads their type (Q8_0, Q4_K, Q6_K,
# Q5_0, MXFP4), BF16 rows otherwise. Decode reads: a batch of one token reads its K
# experts' rows (and every dense matrix, the router, the LM head).
EXPERT_BLOCKS = RESIDENT | {"MXFP4", "Q5_0"}
BLOCK["MXFP4"] = (32, 17)
BLOCK["Q5_0"] = (32, 22)
BLOCK["BF16"] = (1, 2)
MOE = {  # layers, dense lead layers, embd, q width, kv width, experts, used, expert ffn,
    # shared experts, dense ffn, vocab
    "Qwen3-30B-A3B": (48, 0, 2048, 4096, 512, 128, 8, 768, 0, 0, 151936),
    "gpt-oss-20b": (24, 0, 2880, 4096, 512, 32, 4, 2880, 0, 0, 201088),
    "GLM-4.5-Air": (46, 1, 4096, 12288, 1024, 128, 8, 1408, 1, 10944, 151552),
    "Mixtral-8x7B": (32, 0, 4096, 4096, 1024, 8, 2, 14336, 0, 0, 32000),
}


def kq(ty, cols):
    """llama.cpp's fallback for K-quant rows not a multiple of 256"""
    if ty in ("Q4_K", "Q6_K") and cols % 256:
        return "Q5_0" if ty == "Q4_K" else "Q8_0"
    return ty


def moe_estimate(name, preset):
    L, lead, E, Q, KV, NX, K, FX, SH, F, V = MOE[name]
    rest = "BF16" if preset.endswith("BF16") else "Q8_0" if preset != "Q4_K_M" else None

    def t(default, cols, bump=False, i=0):
        if rest:
            return rest
        return kq("Q6_K" if bump and more_bits(i, L) else default, cols)

    def nbytes(ty, rows, cols):
        return rows * cols // BLOCK[ty][0] * BLOCK[ty][1]

    def res_bytes(ty, rows, cols):  # a dense matrix on the resident path
        return nbytes(ty, rows, cols) if ty in RESIDENT else rows * cols * 2

    dense = [(t("Q4_K", E), V, E), (t("Q6_K", E), V, E)]  # embd, output
    before = after = read_b = read_a = 0
    for kind, (ty, rows, cols) in zip(("embd", "out"), dense):
        b = res_bytes(ty, rows, cols)
        before += b
        after += b
        read_b += b if kind == "out" else 0
        read_a += b if kind == "out" else 0
    counts = {}
    for i in range(L):
        mats = [(t("Q4_K", E), Q, E), (t("Q4_K", E), KV, E), (t("Q4_K", E, True, i), KV, E),
                (t("Q4_K", Q), E, Q)]
        if i < lead:
            mats += [(t("Q4_K", E), F, E), (t("Q4_K", E), F, E), (t("Q4_K", F, True, i), E, F)]
        elif SH:
            FS = FX * SH
            mats += [(t("Q4_K", E), FS, E), (t("Q4_K", E), FS, E), (t("Q4_K", FS, True, i), E, FS)]
        for ty, rows, cols in mats:
            b = res_bytes(ty, rows, cols)
            before += b
            after += b
            read_b += b
            read_a += b
        if i < lead:
            continue
        router = NX * E * 4
        before += router
        after += router
        read_b += router
        read_a += router
        ex = [(("MXFP4" if name.startswith("gpt-oss") and preset != "Q4_K_M" else t("Q4_K", E)), FX, E),
              (("MXFP4" if name.startswith("gpt-oss") and preset != "Q4_K_M" else t("Q4_K", E)), FX, E),
              (("MXFP4" if name.startswith("gpt-oss") and preset != "Q4_K_M" else t("Q4_K", FX, True, i)), E, FX)]
        for ty, rows, cols in ex:
            counts[ty] = counts.get(ty, 0) + 1
            bf = NX * rows * cols * 2
            a = NX * nbytes(ty, rows, cols) if ty in EXPERT_BLOCKS else bf
            before += bf
            after += a
            # a decode step of one token reads its K experts' rows
            read_b += K * rows * cols * 2
            read_a += K * (nbytes(ty, rows, cols) if ty in EXPERT_BLOCKS else rows * cols * 2)
    return before, after, read_b, read_a, counts


def moe_main():
    gib = float(1 << 30)
    print()
    print("| model | preset | device weights, experts BF16 (before) | experts blocks (after) | "
          "batch-1 decode step reads, before | after | expert arrays by type |")
    print("|---|---|---|---|---|---|---|")
    for name, presets in (("Qwen3-30B-A3B", ("Q4_K_M", "Q8_0")),
                          ("gpt-oss-20b", ("MXFP4 experts, rest Q8_0", "MXFP4 experts, rest BF16")),
                          ("GLM-4.5-Air", ("Q4_K_M",)), ("Mixtral-8x7B", ("Q4_K_M",))):
        for preset in presets:
            b, a, rb, ra, counts = moe_estimate(name, preset)
            c = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            print(f"| {name} | {preset} | {b / gib:.1f} GiB | {a / gib:.1f} GiB | "
                  f"{rb / gib:.2f} GiB | {ra / gib:.2f} GiB | {c} |")


if __name__ == "__main__":
    main()
    moe_main()
