#!/usr/bin/env python3
"""Lane-level check of src/cuda/attention_prefill.cu's fragment indexing
without a GPU: the kernel's loops rewritten per lane in float64 (no
rounding), with mma.sync m16n8k16 and ldmatrix .x4 / .x4.trans emulated
from the PTX ISA's fragment layouts, against a plain softmax attention:
causal with offset, Lq > Lk, additive masks with a fully masked row, sinks,
head dims 32, 64, 96, 128. It checks the index arithmetic (fragments, the
P -> A reuse of the S accumulators, the quad reductions, the causal and
padding limits), not timing, races or the hardware. Keep it in step with
the kernel when either changes.

    /usr/bin/python3 scripts/attention_prefill_layout_check.py
"""
import math
import sys

import numpy as np
BM, BN, PAD = 64, 64, 8
LOG2E = 1.4426950408889634

def mma(c, a, b0, b1):
    # c: [32][4], a: [32][4][2], b0/b1: [32][2]
    A = np.zeros((16, 16)); B = np.zeros((16, 8)); C = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(2):
            A[g][2*t+i] = a[lane][0][i]; A[g+8][2*t+i] = a[lane][1][i]
            A[g][2*t+8+i] = a[lane][2][i]; A[g+8][2*t+8+i] = a[lane][3][i]
            B[2*t+i][g] = b0[lane][i]; B[2*t+8+i][g] = b1[lane][i]
            C[g][2*t+i] = c[lane][i]; C[g+8][2*t+i] = c[lane][2+i]
    D = C + A @ B
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(2):
            c[lane][i] = D[g][2*t+i]; c[lane][2+i] = D[g+8][2*t+i]

def ldmatrix_x4_trans(sm, addr):
    # addr[lane] = (row, col) into sm; returns r[lane][m] = (lo, hi)
    r = [[None]*4 for _ in range(32)]
    for m in range(4):
        M = np.array([sm[addr[8*m+row][0], addr[8*m+row][1]:addr[8*m+row][1]+8] for row in range(8)])
        for lane in range(32):
            r[lane][m] = (M[2*(lane%4)][lane//4], M[2*(lane%4)+1][lane//4])
    return r

def ldmatrix_x4(sm, addr):
    r = [[None]*4 for _ in range(32)]
    for m in range(4):
        M = np.array([sm[addr[8*m+row][0], addr[8*m+row][1]:addr[8*m+row][1]+8] for row in range(8)])
        for lane in range(32):
            r[lane][m] = (M[lane//4][2*(lane%4)], M[lane//4][2*(lane%4)+1])
    return r

def kernel_block(q, k, v, i0, Lq, Lk, HD, scale, causal, mask, sink):
    LD = HD + PAD
    Qs = np.zeros((BM, LD)); Ks = np.zeros((2, BN, LD)); Vs = np.zeros((2, BN, LD))
    for r in range(BM):
        if i0 + r < Lq: Qs[r, :HD] = q[i0 + r]
    shift = Lk - Lq
    kend = Lk
    if causal: kend = max(0, min(kend, i0 + BM + shift))
    ntiles = (kend + BN - 1) // BN
    def load(tile, st):
        Ks[st] = 0; Vs[st] = 0
        for r in range(BN):
            key = tile * BN + r
            if key < Lk: Ks[st, r, :HD] = k[key]; Vs[st, r, :HD] = v[key]
    if ntiles > 0: load(0, 0)
    out = np.zeros((BM, HD))
    OT, NT, KS = HD // 8, BN // 8, HD // 16
    for warp in range(4):
        rw = warp * 16
        o = [[[0.0]*4 for _ in range(32)] for _ in range(OT)]
        m = [[-math.inf]*2 for _ in range(32)]; l = [[0.0]*2 for _ in range(32)]
        qf = [[[None]*4 for _ in range(32)] for _ in range(KS)]
        for ks in range(KS):
            for lane in range(32):
                g, t4 = lane >> 2, lane & 3
                base = (rw + g, ks*16 + 2*t4)
                f = lambda r, c: (Qs[r, c], Qs[r, c+1])
                qf[ks][lane] = [f(base[0], base[1]), f(base[0]+8, base[1]), f(base[0], base[1]+8), f(base[0]+8, base[1]+8)]
        for tile in range(ntiles):
            st = tile & 1
            load(tile, st)  # (the double buffering is timing, not indexing)
            k0 = tile * BN
            s = [[[0.0]*4 for _ in range(32)] for _ in range(NT)]
            for ks in range(KS):
                for nt in range(0, NT, 2):
                    addr = [(nt*8 + (lane & 7) + ((lane >> 4) << 3), ks*16 + ((lane >> 3) & 1)*8) for lane in range(32)]
                    bk = ldmatrix_x4(Ks[st], addr)
                    mma(s[nt], qf[ks], [bk[x][0] for x in range(32)], [bk[x][1] for x in range(32)])
                    mma(s[nt+1], qf[ks], [bk[x][2] for x in range(32)], [bk[x][3] for x in range(32)])
            edge = k0 + BN > Lk or mask is not None or (causal and k0 + BN - 1 > i0 + rw + shift)
            for lane in range(32):
                g, t4 = lane >> 2, lane & 3
                row_i = [i0 + rw + g, i0 + rw + g + 8]
                for nt in range(NT):
                    for e in range(4):
                        x = s[nt][lane][e] * scale * LOG2E
                        if edge:
                            i = row_i[e >> 1]; key = k0 + nt*8 + 2*t4 + (e & 1)
                            if key >= Lk or (causal and key > i + shift): x = -math.inf
                            elif mask is not None and i < Lq: x += mask[i, key] * LOG2E
                        s[nt][lane][e] = x
            for r in range(2):
                mxs = []
                for lane in range(32):
                    mxs.append(max(max(s[nt][lane][2*r], s[nt][lane][2*r+1]) for nt in range(NT)))
                for lane in range(32):
                    quad = [mxs[(lane & ~3) | x] for x in range(4)]
                    mx = max(quad)
                    mnew = max(m[lane][r], mx)
                    base = 0.0 if mnew == -math.inf else mnew
                    corr = 2.0 ** (m[lane][r] - base)
                    sm_ = 0.0
                    for nt in range(NT):
                        for x in (2*r, 2*r+1):
                            s[nt][lane][x] = 2.0 ** (s[nt][lane][x] - base); sm_ += s[nt][lane][x]
                    l[lane][r] = l[lane][r] * corr + sm_
                    m[lane][r] = mnew
                    for t in range(OT):
                        o[t][lane][2*r] *= corr; o[t][lane][2*r+1] *= corr
            for kk in range(BN // 16):
                a = [[(s[2*kk][lane][0], s[2*kk][lane][1]), (s[2*kk][lane][2], s[2*kk][lane][3]),
                      (s[2*kk+1][lane][0], s[2*kk+1][lane][1]), (s[2*kk+1][lane][2], s[2*kk+1][lane][3])] for lane in range(32)]
                for dn in range(HD // 16):
                    addr = [(kk*16 + (lane & 15), (lane >> 4)*8 + dn*16) for lane in range(32)]
                    bv = ldmatrix_x4_trans(Vs[st], addr)
                    mma(o[2*dn], a, [bv[x][0] for x in range(32)], [bv[x][1] for x in range(32)])
                    mma(o[2*dn+1], a, [bv[x][2] for x in range(32)], [bv[x][3] for x in range(32)])
        sinkl = sink * LOG2E if sink is not None else 0.0
        for lane in range(32):
            g, t4 = lane >> 2, lane & 3
            for r in range(2):
                lr = sum(l[(lane & ~3) | x][r] for x in range(4))
                if m[lane][r] == -math.inf: f = 0.0
                elif sink is None: f = 1.0 / lr
                else:
                    M = max(m[lane][r], sinkl); aa = 2.0 ** (m[lane][r] - M); f = aa / (lr * aa + 2.0 ** (sinkl - M))
                i = rw + g + 8*r
                for t in range(OT):
                    out[i, t*8 + 2*t4] = o[t][lane][2*r] * f; out[i, t*8 + 2*t4 + 1] = o[t][lane][2*r+1] * f
    return out

def reference(q, k, v, Lq, Lk, scale, causal, mask, sink):
    s = scale * q @ k.T
    if mask is not None: s = s + mask
    if causal:
        for i in range(Lq):
            s[i, np.arange(Lk) > i + Lk - Lq] = -np.inf
    out = np.zeros((Lq, v.shape[1]))
    for i in range(Lq):
        mx = s[i].max()
        if sink is not None: mx = max(mx, sink)
        if mx == -np.inf or np.all(s[i] == -np.inf): continue
        p = np.exp(s[i] - mx); den = p.sum() + (np.exp(sink - mx) if sink is not None else 0)
        out[i] = p @ v / den
    return out

rng = np.random.default_rng(1)
failed = False
for (Lq, Lk, HD, causal, use_mask, use_sink) in [(70, 70, 32, True, False, False), (100, 131, 64, True, True, True),
                                                 (80, 33, 32, True, False, False), (17, 150, 32, False, True, False), (40, 100, 96, True, False, True), (65, 70, 128, False, False, False)]:
    q = rng.uniform(-3, 3, (Lq, HD)); k = rng.uniform(-3, 3, (Lk, HD)); v = rng.uniform(-3, 3, (Lk, HD))
    mask = rng.uniform(-3, 3, (Lq, Lk)) if use_mask else None
    if use_mask: mask[0, :] = -np.inf
    sink = 0.7 if use_sink else None
    scale = 1 / math.sqrt(HD)
    got = np.zeros((Lq, HD))
    for i0 in range(0, Lq, BM):
        blk = kernel_block(q, k, v, i0, Lq, Lk, HD, scale, causal, mask, sink)
        n = min(BM, Lq - i0); got[i0:i0+n] = blk[:n]
    ref = reference(q, k, v, Lq, Lk, scale, causal, mask, sink)
    err = np.abs(got - ref).max()
    print(f"Lq {Lq} Lk {Lk} D {HD} causal {causal} mask {use_mask} sink {use_sink}: max error {err:.3g}")
    failed |= not err < 1e-9
sys.exit(1 if failed else 0)
