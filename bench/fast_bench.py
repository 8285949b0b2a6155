"""numpy counterpart of bench/fast_bench.exs: rms_norm, layer_norm and
softmax over the same large rows (f32; numpy has no bf16), in GB/s of the
bytes each op must move (one read of x, one write of y), median of `reps`
calls, beside numpy's own copy rate (np.copyto) measured in the same run.

    /usr/bin/python3 bench/fast_bench.py [reps]
"""
import sys
import time

import numpy as np

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 9


def median_s(f):
    f()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


def rms_norm(x, w):
    return x * (1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)) * w


def layer_norm(x, w):
    xc = x - x.mean(axis=-1, keepdims=True)
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    return xc * (1 / np.sqrt(var + 1e-5)) * w + w


def softmax(x, _w):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


print(f"### numpy {np.__version__}, GB/s (read x + write y), median of {reps}\n")
print("| op | shape | type | numpy | % of copy |")
print("| --- | --- | --- | ---: | ---: |")
rng = np.random.default_rng(42)
for rows, cols in [(4096, 4096), (32768, 512)]:
    x = rng.uniform(-3, 3, (rows, cols)).astype(np.float32)
    w = np.ones(cols, dtype=np.float32)
    y = np.empty_like(x)
    nbytes = 2 * x.nbytes
    copy = nbytes / median_s(lambda: np.copyto(y, x)) / 1e9
    print(f"| copy (np.copyto) | {rows}x{cols} | f32 | {copy:.1f} | 100% |")
    for name, f in [("rms_norm", rms_norm), ("layer_norm", layer_norm), ("softmax", softmax)]:
        gbs = nbytes / median_s(lambda: f(x, w)) / 1e9
        print(f"| {name} | {rows}x{cols} | f32 | {gbs:.1f} | {100 * gbs / copy:.0f}% |")
