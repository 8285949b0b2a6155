#!/usr/bin/env python3
"""Regenerate test/oracle/golden/ggml_blocks.npz: random blocks of every
ggml block format the engine reads and their dequantized values, computed
by the `gguf` package's numpy dequantizers (written by ggml's authors).

CI reads the committed file and needs no gguf package; run this only to
regenerate it:

    python3 -m venv --system-site-packages /tmp/gguf && /tmp/gguf/bin/pip install --no-deps gguf
    /tmp/gguf/bin/python scripts/ggml_golden.py

Arrays: <type>_raw (ROWS, K / block_elems * block_bytes) u8 and
<type>_deq (ROWS, K) f32, for type in q4_0 ... q6_k. Every byte is random
except the half-precision scales (d, m, dmin), which are drawn finite
(normal values of both signs, some subnormal, some zero) so that the
dequantized values are finite.
"""
import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

ROWS, K = 8, 512

# name: (type, block elems, block bytes, byte offsets of the half scales)
TYPES = {
    "q4_0": (T.Q4_0, 32, 18, [0]),
    "q4_1": (T.Q4_1, 32, 20, [0, 2]),
    "q5_0": (T.Q5_0, 32, 22, [0]),
    "q5_1": (T.Q5_1, 32, 24, [0, 2]),
    "q8_0": (T.Q8_0, 32, 34, [0]),
    "q4_k": (T.Q4_K, 256, 144, [0, 2]),
    "q5_k": (T.Q5_K, 256, 176, [0, 2]),
    "q6_k": (T.Q6_K, 256, 210, [208]),
}


def random_halves(rng, n):
    h = (rng.standard_normal(n) * 0.05).astype(np.float16)
    kind = rng.integers(0, 16, n)
    h[kind == 0] = np.float16(0.0)
    sub = kind == 1  # subnormal halves
    h[sub] = (rng.integers(1, 1024, sub.sum()).astype(np.uint16)).view(np.float16)
    return h


def main():
    rng = np.random.default_rng(20261202)
    out = {}
    for name, (qtype, be, bb, half_offsets) in TYPES.items():
        nblocks = ROWS * K // be
        blocks = rng.integers(0, 256, (nblocks, bb), dtype=np.uint8)
        for off in half_offsets:
            blocks[:, off : off + 2] = random_halves(rng, nblocks).view(np.uint8).reshape(nblocks, 2)
        raw = blocks.reshape(ROWS, K // be * bb)
        deq = quants.dequantize(raw, qtype).astype(np.float32)
        assert deq.shape == (ROWS, K) and np.isfinite(deq).all()
        out[name + "_raw"] = raw
        out[name + "_deq"] = deq
    path = os.path.join(os.path.dirname(__file__), "..", "test", "oracle", "golden", "ggml_blocks.npz")
    np.savez_compressed(path, **out)
    print("wrote", os.path.normpath(path), os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
