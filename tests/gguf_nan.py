#!/usr/bin/python3
"""gguf_nan.py IN OUT TENSOR ROW: copies the GGUF file IN to OUT with row ROW of the f32
tensor TENSOR (first dimension = the row length) set to NaN. For tests that need a model
whose logits turn NaN for one token only (its embedding row)."""
import struct, sys

src, dst, name, row = sys.argv[1], sys.argv[2], sys.argv[3].encode(), int(sys.argv[4])
data = bytearray(open(src, "rb").read())
pos = 0

def take(fmt):
    global pos
    v = struct.unpack_from("<" + fmt, data, pos)
    pos += struct.calcsize("<" + fmt)
    return v[0] if len(v) == 1 else v

def string():
    global pos
    n = take("Q")
    s = bytes(data[pos:pos + n])
    pos += n
    return s

SIZES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q", 12: "d"}

def value(t):
    if t == 8:
        return string()
    if t == 9:
        et, n = take("I"), take("Q")
        return [value(et) for _ in range(n)]
    return take(SIZES[t])

assert data[:4] == b"GGUF"
pos = 4
version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
align = 32
for _ in range(n_kv):
    key, t = string(), take("I")
    v = value(t)
    if key == b"general.alignment":
        align = v
infos = []
for _ in range(n_tensors):
    tname, nd = string(), take("I")
    dims = [take("Q") for _ in range(nd)]
    ttype, off = take("I"), take("Q")
    infos.append((tname, dims, ttype, off))
base = (pos + align - 1) // align * align
for tname, dims, ttype, off in infos:
    if tname == name:
        assert ttype == 0, "the tensor must be f32"
        n = dims[0]
        start = base + off + row * n * 4
        data[start:start + n * 4] = struct.pack("<f", float("nan")) * n
        open(dst, "wb").write(data)
        sys.exit(0)
sys.exit("no tensor %s" % name.decode())
