"""transform.py SRC DST: rewrites CUDA launches `kernel<<<grid, block, ...>>>(args)` into
emu_launch calls (arguments evaluated at launch, as CUDA does) so that g++ can compile
gpu/*.cu against gpu/emu/inc/emu.h."""
import sys, re, os
def transform(s):
    out = []
    i = 0
    while True:
        j = s.find('<<<', i)
        if j < 0:
            out.append(s[i:]); break
        # kernel name backwards (with optional template args)
        k = j
        while s[k-1] in ' \t\n':
            k -= 1
        if s[k-1] == '>':
            depth = 0
            while True:
                k -= 1
                if s[k] == '>': depth += 1
                elif s[k] == '<':
                    depth -= 1
                    if depth == 0: break
        while k > 0 and (s[k-1].isalnum() or s[k-1] in '_:'):
            k -= 1
        name = s[k:j]
        e = s.find('>>>', j)
        cfg = s[j+3:e]
        # balanced args
        p = e + 3
        assert s[p] == '(', s[p:p+20]
        depth = 0; q = p
        while True:
            if s[q] == '(': depth += 1
            elif s[q] == ')':
                depth -= 1
                if depth == 0: break
            q += 1
        args = s[p+1:q]
        # top-level split of cfg
        parts = []; d = 0; cur = ''
        for ch in cfg:
            if ch in '(<': d += 1
            if ch in ')>': d -= 1
            if ch == ',' and d == 0: parts.append(cur); cur = ''
            else: cur += ch
        parts.append(cur)
        out.append(s[i:k])
        out.append('[&]() { auto emu_args = std::make_tuple(%s); emu_launch(dim3(%s), dim3(%s), [=]() { std::apply(%s, emu_args); }); }()' % (args, parts[0], parts[1], name))
        i = q + 1
    return ''.join(out)
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(os.path.dirname(dst), exist_ok=True)
open(dst, 'w').write(transform(open(src).read()))
