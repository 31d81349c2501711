"""transform.py SRC DST: rewrites CUDA source so that g++ can compile gpu/*.cu against
gpu/emu/inc/emu.h:
 - launches `kernel<<<grid, block[, smem[, stream]]>>>(args)` become emu_launch calls
   (arguments evaluated at launch, as CUDA does) naming the kernel (emu_key: its address,
   for its attributes and shared memory limits);
 - each `extern __shared__ T name[];` (dynamic shared memory) becomes `T *name =
   (T *)emu_dyn_shared();`, the launch's buffer (emu.h);
 - each `__shared__ T name[...];` declaration is followed by emu_shared_init(name, size),
   which fills it with 0xff bytes at the start of every block (emu.h says why);
 - each kernel's body starts with emu_probe_bounds(its __launch_bounds__ arguments) and,
   after its last __shared__ declaration, returns when the emulator probes it: what
   cudaOccupancyMaxActiveBlocksPerMultiprocessor needs to know (emu.h)."""
import sys, re, os

SHARED = re.compile(r'^(\s*)__shared__\s+([^;]*);', re.M)

def declarators(decl):
    """names declared by `T a[N], b[M][K]` (the type is the first word or words)"""
    parts, d, cur = [], 0, ''
    for ch in decl:
        if ch in '([{<': d += 1
        if ch in ')]}>': d -= 1
        if ch == ',' and d == 0: parts.append(cur); cur = ''
        else: cur += ch
    parts.append(cur)
    names = []
    for i, p in enumerate(parts):
        p = p.split('=')[0]
        p = re.sub(r'\[.*', '', p.strip())
        names.append(re.findall(r'[A-Za-z_]\w*', p)[-1])
    return names

EXTERN = re.compile(r'^(\s*)extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?'
                    r'([A-Za-z_][\w:<>, ]*?)\s+([A-Za-z_]\w*)\s*\[\s*\]\s*;', re.M)

def dynamic_shared(s):
    """`extern __shared__ T name[];` (dynamic shared memory) becomes a pointer to the
    launch's buffer (emu_dyn_shared: 16-byte aligned, 0xff-filled at each block start)"""
    return EXTERN.sub(lambda m: '%s%s *%s = (%s *)emu_dyn_shared();' % (m.group(1), m.group(2), m.group(3), m.group(2)), s)

def poison_shared(s):
    def rep(m):
        assert 'extern' not in m.group(2), 'an extern __shared__ declaration the transform cannot read: ' + m.group(0)
        calls = ' '.join('emu_shared_init(&%s, sizeof %s);' % (n, n) for n in declarators(m.group(2)))
        return m.group(0) + ' ' + calls
    return SHARED.sub(rep, s)

def skip_comment(s, i):
    """the index after the comment starting at s[i], or i if none starts there"""
    if s.startswith('//', i):
        return s.index('\n', i)
    if s.startswith('/*', i):
        return s.index('*/', i) + 2
    return i

def matching(s, i):
    """the index of the bracket closing the one at s[i], comments skipped"""
    opening = s[i]
    close = {'(': ')', '{': '}'}[opening]
    depth = 0
    while True:
        j = skip_comment(s, i)
        if j != i:
            i = j
            continue
        if s[i] == opening:
            depth += 1
        elif s[i] == close:
            depth -= 1
            if depth == 0:
                return i
        i += 1

KERNEL = re.compile(r'^__global__\s+void\s+(__launch_bounds__\s*\()?', re.M)
INIT = re.compile(r'(?:\s*emu_shared_init\(&\w+, sizeof \w+\);)+')

def probe_kernels(s):
    """Each kernel's body gets emu_probe_bounds(launch bounds) first and a probing return
    after its last __shared__ declaration (with the emu_shared_init calls poison_shared
    added), which must be at the body's top level (else the probe would miss it)."""
    out, i = [], 0
    for m in KERNEL.finditer(s):
        if m.start() < i:
            continue
        bounds = ''
        p = m.end()
        if m.group(1):
            e = matching(s, p - 1)
            bounds = s[p:e]
            p = e + 1
        p = s.index('(', p)            # the parameter list
        b = matching(s, p) + 1
        while s[b] in ' \t\n':
            b += 1
        if s[b] != '{':
            continue                    # a declaration
        end = matching(s, b)
        body = s[b + 1:end]
        last = b + 1
        depth, k = 0, 0
        while k < len(body):
            j = skip_comment(body, k)
            if j != k:
                k = j
                continue
            c = body[k]
            if c == '{': depth += 1
            elif c == '}': depth -= 1
            elif body.startswith('__shared__', k):
                assert depth == 0, 'a __shared__ declaration below the top level of a kernel'
                semi = body.index(';', k) + 1
                mi = INIT.match(body, semi)
                last = b + 1 + (mi.end() if mi else semi)
            k += 1
        out.append(s[i:b + 1])
        out.append(' emu_probe_bounds(%s);' % bounds)
        out.append(s[b + 1:last])
        out.append(' if (emu_probing()) return;')
        i = last
    out.append(s[i:])
    return ''.join(out)

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
        smem = parts[2] if len(parts) > 2 else '0'
        stream = parts[3] if len(parts) > 3 else '0'
        out.append('[&]() { auto emu_args = std::make_tuple(%s); emu_launch(emu_key(%s), dim3(%s), dim3(%s), %s, %s, [=]() { std::apply(%s, emu_args); }); }()' % (args, name, parts[0], parts[1], smem, stream, name))
        i = q + 1
    return ''.join(out)
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(os.path.dirname(dst), exist_ok=True)
open(dst, 'w').write(transform(probe_kernels(poison_shared(dynamic_shared(open(src).read())))))
