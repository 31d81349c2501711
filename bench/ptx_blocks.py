#!/usr/bin/python3
"""ptx_blocks.py: the instructions of each basic block of one kernel in a PTX file.

Usage: ptx_blocks.py FILE.ptx NAME_PART
  FILE.ptx   from `nvcc -std=c++17 -O3 -arch=sm_90 -Icore -I. -Ibuild/gpu -ptx gpu/X.cu`
  NAME_PART  a substring of exactly one entry's mangled name (e.g. I13__nv_bfloat16Li4ELi1E
             picks attn_decode_gqa_kernel<__nv_bfloat16, 4, 1> in gpu/attention.cu)
Prints one line per block: its label, its instruction count and the count of each opcode.
Moves (mov, and predicated mov) are left out: in SASS they fold into operands (constants,
bit casts) or vanish in register allocation; inline-asm instructions are counted. This is
how bench/perf_model.py's per-tile counts were taken: multiply each block by how often it
runs (the block structure is the loop structure; read the PTX beside it).
"""
import re
import sys


def blocks(ptx, part):
    """[(label, n, {opcode: count})] of the one entry whose name contains part."""
    starts = [m for m in re.finditer(r"\.visible \.entry (\S+)\(", ptx) if part in m.group(1)]
    if len(starts) != 1:
        sys.exit(f"{len(starts)} entries match {part!r}: "
                 + " ".join(m.group(1) for m in starts[:5]))
    body = ptx[starts[0].start():]
    body = body[:body.index("\n}\n")]
    out, label, n, ops = [], "entry", 0, {}
    for line in body.split("\n"):
        t = line.strip()
        if re.match(r"^\$?[\w$]+:$", t):
            out.append((label, n, ops))
            label, n, ops = t[:-1], 0, {}
            continue
        t = t.lstrip("{").rstrip("}").strip()  # inline asm: { cvt.f32.bf16 %f1, %rs1;}
        if not t.endswith(";") or t.startswith((".", "//")):
            continue
        words = t.split()
        op = words[1] if words[0].startswith("@") else words[0]
        if op.startswith("mov"):
            continue
        n += 1
        k = op.split(".")[0].rstrip(";")
        ops[k] = ops.get(k, 0) + 1
    out.append((label, n, ops))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        ptx = f.read()
    total = 0
    for label, n, ops in blocks(ptx, sys.argv[2]):
        total += n
        desc = " ".join(f"{k}:{v}" for k, v in sorted(ops.items(), key=lambda x: -x[1]))
        print(f"{label} {n} {desc}")
    print(f"total {total} (static)")


if __name__ == "__main__":
    main()
