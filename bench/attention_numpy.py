"""numpy side of bench/attention_bench.exs: the same attention cases (see
there), as a numpy user writes them (matmul, max-subtracted softmax, GQA by
repeating the KV heads), in float32 (numpy has no bf16: the bf16 rows are
timed in float32 too). Output lines:
R <tab> case <tab> numpy <tab> median_s <tab> min_s <tab> reps."""
import os
import sys
import time

import numpy as np


def timed(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2], ts[0]


def attention(q, k, v, causal):
    B, H, Lq, D = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    g = H // Hkv
    k = np.repeat(k, g, axis=1)
    v = np.repeat(v, g, axis=1)
    s = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1 / np.sqrt(D))
    if causal:
        i = np.arange(Lq)[:, None]
        j = np.arange(Lk)[None, :]
        s = np.where(j <= i + Lk - Lq, s, np.float32(-np.inf))
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    return s @ v


def main():
    reps = max(1, int(os.environ.get("BENCH_REPS", "7")))
    rng = np.random.default_rng(1)
    # name B H Hkv Lq Lk D causal (the names bench/attention_bench.exs uses)
    for line in sys.argv[1:]:
        name, B, H, Hkv, Lq, Lk, D, causal = line.split(":")
        B, H, Hkv, Lq, Lk, D = map(int, (B, H, Hkv, Lq, Lk, D))
        q = rng.standard_normal((B, H, Lq, D), dtype=np.float32)
        k = rng.standard_normal((B, Hkv, Lk, D), dtype=np.float32)
        v = rng.standard_normal((B, Hkv, Lk, D), dtype=np.float32)
        med, mn = timed(lambda: attention(q, k, v, causal == "1"), reps)
        print(f"R\t{name}\tnumpy\t{med:.6f}\t{mn:.6f}\t{reps}", flush=True)


if __name__ == "__main__":
    main()
