#!/usr/bin/env python3
"""The transformer kernels on the GPU: Emily against PyTorch, in one run.

    python3 bench/cuda_transformer_torch.py [path/to/cuda_transformer_bench]

Runs the C benchmark (RESULT lines, CUDA events, 3 warm-ups, median of 10)
and the same cases in PyTorch timed the same way, then prints one table.
"ratio" is Emily's figure over PyTorch's (above 1: Emily faster). Rows
without a PyTorch kernel (quantized weights) compare with the copy rate
of the GPU's memory measured here (a device-to-device clone of 1 GiB).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_torch import median_ms, run_emily  # noqa: E402

DT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def rand(*shape, dtype=torch.float32):
    return (torch.rand(*shape, device="cuda") * 2 - 1).to(dtype)


def gbs(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9


PREFILL_SHAPES = (
    ("sdpa_prefill_bf16_4096", "bf16", 1, 16, 8, 4096, 128, True),
    ("sdpa_prefill_f16_2048", "f16", 1, 16, 8, 2048, 128, True),
    ("sdpa_prefill_bf16_d64_b4_1024", "bf16", 4, 16, 16, 1024, 64, False),
    ("sdpa_prefill_bf16_minilm_32x128", "bf16", 32, 12, 12, 128, 32, False),
)


def torch_cases():
    for name in ("f32", "bf16", "f16"):
        dt = DT[name]
        es = torch.finfo(dt).bits // 8
        x, w, b = rand(4096, 4096, dtype=dt), rand(4096, dtype=dt), rand(4096, dtype=dt)
        t = median_ms(lambda: F.rms_norm(x, (4096,), w, 1e-6))
        yield f"rms_norm_{name}_4096x4096", (t, gbs(2 * 4096 * 4096 * es, t), "GB/s")
        t = median_ms(lambda: F.layer_norm(x, (4096,), w, b, 1e-5))
        yield f"layer_norm_{name}_4096x4096", (t, gbs(2 * 4096 * 4096 * es, t), "GB/s")
        del x
        for rows, cols in ((4096, 32768), (32768, 1024), (256, 131072)):
            s = rand(rows, cols, dtype=dt)
            t = median_ms(lambda: torch.softmax(s, dim=-1))
            yield f"softmax_{name}_{rows}x{cols}", (t, gbs(2 * rows * cols * es, t), "GB/s")
            del s
    for name, lq, lk, causal in (("bf16", 1, 4096, False), ("f32", 1, 4096, False),
                                 ("bf16", 1, 32768, False), ("bf16", 512, 512, True),
                                 ("bf16", 2048, 2048, True)):
        dt = DT[name]
        es = torch.finfo(dt).bits // 8
        q = rand(1, 16, lq, 128, dtype=dt)
        k, v = rand(1, 8, lk, 128, dtype=dt), rand(1, 8, lk, 128, dtype=dt)
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        t = median_ms(fn)
        if lq == 1:
            yield f"sdpa_decode_{name}_kv{lk}", (t, gbs((2 * 8 * lk * 128 + 2 * 16 * 128) * es, t), "GB/s")
        else:
            flops = 4.0 * 16 * lq * lk * 128 * (0.5 if causal else 1.0)
            yield f"sdpa_prefill_{name}_{lq}", (t, flops / (t * 1e-3) / 1e12, "TFLOP/s")
    # other prefill shapes (cuda_transformer_bench.c's attention_shape rows)
    for row, name, b, h, hkv, l, d, causal in PREFILL_SHAPES:
        dt = DT[name]
        q = rand(b, h, l, d, dtype=dt)
        k, v = rand(b, hkv, l, d, dtype=dt), rand(b, hkv, l, d, dtype=dt)
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        t = median_ms(fn)
        flops = 4.0 * b * h * l * l * d * (0.5 if causal else 1.0)
        yield row, (t, flops / (t * 1e-3) / 1e12, "TFLOP/s")
    for n, k in ((4096, 4096), (151936, 1024)):
        x, w = rand(1, k, dtype=torch.bfloat16), rand(n, k, dtype=torch.bfloat16)
        t = median_ms(lambda: x @ w.t())
        yield f"matvec_bf16_{n}x{k}", (t, gbs(n * k * 2, t), "GB/s")
    big = rand(1 << 28)
    t = median_ms(lambda: big.clone())
    yield "copy_1GiB", (t, gbs(2 * 4 * (1 << 28), t), "GB/s")


def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "cuda_transformer_bench")
    emily = run_emily([exe])
    print(f"\nGPU: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    print(f"{'case':30} {'emily ms':>10} {'torch ms':>10} {'emily':>10} {'torch':>10} {'unit':>8} {'ratio':>7}")
    copy = None
    for name, (tms, tfig, unit) in torch_cases():
        if name == "copy_1GiB":
            copy = tfig
            continue
        if name in emily:
            ems, efig, _ = emily[name]
            print(f"{name:30} {ems:10.3f} {tms:10.3f} {efig:10.1f} {tfig:10.1f} {unit:>8} {efig / tfig:7.2f}")
    print(f"\nGPU memory copy (torch clone of 1 GiB): {copy:.0f} GB/s")
    for name, (ems, efig, unit) in emily.items():
        if name.startswith(("qmatvec", "ggml")):
            print(f"{name:30} {ems:10.3f} {'':>10} {efig:10.1f} {'':>10} {unit:>8} {efig / copy:7.2f} of copy")


if __name__ == "__main__":
    main()
