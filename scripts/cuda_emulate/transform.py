#!/usr/bin/env python3
"""Rewrite a CUDA source of the plugin into host C++ for the emulator:
drop the libcu++ includes (the emulator's common.cuh maps cuda::std onto
std), and turn each launch `kernel<<<grid, block, smem, stream>>>(args);`
into `emu_launch(dim3(grid), dim3(block), [&] { kernel(args); });`, which
runs the kernel body for every (block, thread) in turn.

    transform.py src/cuda/window.cu build/emulate/window.cpp
"""
import re, sys
src, dst = sys.argv[1], sys.argv[2]
s = open(src).read()
s = re.sub(r'#include <cuda/std/[^>]*>\n', '', s)
s = s.replace('#include "../engine/ops/', '#include "ops/')  # found through -Isrc/engine
def split_top(cfg):
    parts, depth, cur = [], 0, ''
    for ch in cfg:
        if ch in '([': depth += 1
        if ch in ')]': depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur); cur = ''
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]
def rep(m):
    name, cfg, args = m.group(1), m.group(2), m.group(3)
    p = split_top(cfg)
    return f'emu_launch(dim3({p[0]}), dim3({p[1]}), [&] {{ {name}({args}); }});'
s, n = re.subn(r'([A-Za-z_][\w:]*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\((.*?)\);', rep, s, flags=re.S)
print(src, 'launches', n, file=sys.stderr)
open(dst, 'w').write(s)
