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


if __name__ == "__main__":
    main()
