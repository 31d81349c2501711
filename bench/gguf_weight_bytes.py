#!/usr/bin/env python3
"""gguf_weight_bytes.py: the bytes of weights one decode step reads from a GGUF model.

    python3 bench/gguf_weight_bytes.py MODEL.gguf [MODEL.gguf ...]

Per file: bytes by tensor type, the total, and the bytes read per token at batch 1 = every
tensor except token_embd (a step reads one row of the embedding; with tied embeddings the
LM head reads all of it, and it is counted). The KV cache is not included. Reads only the
header (standard library only)."""
import struct
import sys

# ggml type id: (name, block elements, block bytes)
TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    20: ("IQ4_NL", 32, 18), 23: ("IQ4_XS", 256, 136), 30: ("BF16", 1, 2),
}
# GGUF metadata value types: fixed sizes; 8 = string, 9 = array
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def read_header(path):
    with open(path, "rb") as f:
        buf = f.read(64 << 20)  # the header of any model here fits in 64 MiB
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = buf[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    def skip_value(t):
        nonlocal pos
        if t in SCALAR:
            pos += SCALAR[t]
        elif t == 8:
            string()
        elif t == 9:
            et, n = take("I"), take("Q")
            if et in SCALAR:
                pos += SCALAR[et] * n
            else:
                for _ in range(n):
                    skip_value(et)
        else:
            raise ValueError("unknown GGUF value type %d" % t)

    if buf[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    pos = 4
    take("I")  # version
    n_tensors, n_kv = take("Q"), take("Q")
    for _ in range(n_kv):
        string()
        skip_value(take("I"))
    tensors = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        t = take("I")
        take("Q")  # offset
        tensors.append((name, dims, t))
    return tensors


def main():
    for path in sys.argv[1:]:
        by_type, total, per_token = {}, 0, 0
        tensors = read_header(path)
        tied = not any(name == "output.weight" for name, _, _ in tensors)
        for name, dims, t in tensors:
            tname, be, bb = TYPES[t]
            n = 1
            for d in dims:
                n *= d
            nbytes = n // be * bb
            by_type[tname] = by_type.get(tname, 0) + nbytes
            total += nbytes
            if name != "token_embd.weight" or tied:
                per_token += nbytes
        kinds = ", ".join("%s %.1f MB" % (k, v / 1e6) for k, v in sorted(by_type.items()))
        print("%s: total %.1f MB (%s); read per token at batch 1: %.1f MB%s"
              % (path, total / 1e6, kinds, per_token / 1e6,
                 " (tied embeddings: the LM head reads token_embd)" if tied else ""))


if __name__ == "__main__":
    main()
