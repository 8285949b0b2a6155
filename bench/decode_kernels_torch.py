#!/usr/bin/env python3
"""The decode path's kernels: Emily (bench/decode_kernels_bench.c) against
PyTorch, in one run.

    python3 bench/decode_kernels_torch.py [path/to/decode_kernels_bench]

The same cases in PyTorch, timed the same way (CUDA events, 3 warm-ups,
median of 10): bf16 x @ w.t() for the matrix-vector products (the gated
rows as silu(x @ g.t()) * (x @ w.t())), F.scaled_dot_product_attention
with enable_gqa for decode attention. "ratio" is Emily's GB/s over
PyTorch's (above 1: Emily faster); "of copy" Emily's over the GPU's
device-to-device copy rate measured here (the bandwidth goal is 0.85).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_torch import median_ms, run_emily  # noqa: E402

BF16 = torch.bfloat16


def rand(*shape):
    return (torch.rand(*shape, device="cuda") * 2 - 1).to(BF16)


def gbs(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9


def torch_cases():
    for n, k, gated in ((4096, 1024, 0), (1024, 2048, 0), (3072, 1024, 1),
                        (1024, 3072, 0), (151936, 1024, 0)):
        w = rand(n, k)
        g = rand(n, k) if gated else None
        for b in (1, 4, 16):
            x = rand(b, k)
            if gated:
                fn = lambda: F.silu(x @ g.t()) * (x @ w.t())  # noqa: E731
            else:
                fn = lambda: x @ w.t()  # noqa: E731
            t = median_ms(fn)
            name = f"linear_{n}x{k}{'_gate' if gated else ''}_b{b}"
            yield name, (t, gbs((2 if gated else 1) * n * k * 2, t))
        del w, g
    for b in (1, 4, 16):
        for L in (512, 4096, 32768):
            if b * L > 16 * 4096:
                continue
            q, k, v = rand(b, 16, 1, 128), rand(b, 8, L, 128), rand(b, 8, L, 128)
            t = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
            yield f"sdpa_decode_b{b}_kv{L}", (t, gbs(2 * b * 8 * L * 128 * 2, t))
    big = torch.rand(1 << 28, device="cuda")
    t = median_ms(lambda: big.clone())
    yield "copy_1GiB", (t, gbs(2 * 4 * (1 << 28), t))


def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "decode_kernels_bench")
    emily = run_emily([exe])
    rows = dict(torch_cases())
    copy = rows.pop("copy_1GiB")[1]
    print(f"\nGPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  copy {copy:.0f} GB/s")
    print(f"{'case':32} {'emily ms':>9} {'torch ms':>9} {'emily GB/s':>11} {'torch GB/s':>11} {'ratio':>6} {'of copy':>8}")
    for name, (tms, tfig) in rows.items():
        if name in emily:
            ems, efig, _ = emily[name]
            print(f"{name:32} {ems:9.4f} {tms:9.4f} {efig:11.0f} {tfig:11.0f} {efig / tfig:6.2f} {efig / copy:8.2f}")


if __name__ == "__main__":
    main()
