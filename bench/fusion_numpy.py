"""numpy side of bench/fusion_bench.sh: the same two cases as
bench/fusion_bench.c, timed the same way (median of BENCH_REPS runs).
Output lines: R <tab> case <tab> numpy <tab> median_s <tab> min_s <tab> reps
<tab> median CPU s."""
import os
import time

import numpy as np


def timed(fn, reps):
    fn()
    fn()
    ts, cs = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    ts.sort()
    cs.sort()
    return ts[len(ts) // 2], ts[0], cs[len(cs) // 2]


def main():
    reps = max(1, int(os.environ.get("BENCH_REPS", "7")))
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, 16 << 20).astype(np.float32)
    a, b, c = np.float32(0.7), np.float32(0.1), np.float32(1.3)

    def chain8():
        return np.tanh(np.exp(-((x * a + b) ** 2)) * c - x)

    med, mn, cpu = timed(chain8, reps)
    print(f"R\tchain8_16M_f32\tnumpy\t{med:.6f}\t{mn:.6f}\t{reps}\t{cpu:.6f}")

    def cheap8():
        return np.maximum(np.abs((x * a + b) ** 2 * c - x), x) / c

    med, mn, cpu = timed(cheap8, reps)
    print(f"R\tcheap8_16M_f32\tnumpy\t{med:.6f}\t{mn:.6f}\t{reps}\t{cpu:.6f}")

    def sumsq():
        return np.sum((x * a + b) ** 2)

    med, mn, cpu = timed(sumsq, reps)
    print(f"R\tsumsq_16M_f32\tnumpy\t{med:.6f}\t{mn:.6f}\t{reps}\t{cpu:.6f}")

    s = rng.uniform(-8, 8, (4096, 4096)).astype(np.float32)

    def softmax():
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    med, mn, cpu = timed(softmax, reps)
    print(f"R\tsoftmax_4096x4096_f32\tnumpy\t{med:.6f}\t{mn:.6f}\t{reps}\t{cpu:.6f}")

    def layer_norm():
        mu = s.mean(axis=-1, keepdims=True)
        xc = s - mu
        var = (xc * xc).mean(axis=-1, keepdims=True)
        return xc / np.sqrt(var + np.float32(1e-5)) * a + b

    med, mn, cpu = timed(layer_norm, reps)
    print(f"R\tlayernorm_4096x4096_f32\tnumpy\t{med:.6f}\t{mn:.6f}\t{reps}\t{cpu:.6f}")


if __name__ == "__main__":
    main()
