#!/usr/bin/env python3
"""Emily's GPU backend against PyTorch, in one run.

    python3 bench/cuda_torch.py [path/to/cuda_bench] [--quick]

Runs the C benchmark (build/cuda_bench by default; it times each case with
CUDA events after warm-up and prints RESULT lines), then the same cases in
PyTorch on the same GPU, timed the same way (events, 3 warm-ups, median of
10, random data), and prints one table with both and their ratio. Figures
are bandwidth (bytes each input read once and each output written once) or
TFLOP/s; "ratio" is Emily's figure over PyTorch's (above 1: Emily faster),
except for the per-op launch cost, where it is PyTorch's time over Emily's.
"""
import os
import subprocess
import sys

import torch

GIB = 1 << 30
WARMUP, REPEAT = 3, 10


def median_ms(fn):
    times = []
    for it in range(WARMUP + REPEAT):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        if it >= WARMUP:
            times.append(e0.elapsed_time(e1))
    times.sort()
    return times[REPEAT // 2]


def run_emily(cmd):
    """Runs a C benchmark, echoes its output (exits with its status on
    failure) and returns its RESULT lines: {name: (ms, figure, unit)}."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        sys.exit(proc.returncode)
    emily = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            _, name, ms, fig, unit = line.split()
            emily[name] = (float(ms), float(fig), unit)
    return emily


def chain8(x):
    """The 8-op chain of cuda_bench.c: -exp(abs(tanh(x * x + x) * x) - x)."""
    y = x * x
    y = y + x
    y = torch.tanh(y)
    y = y * x
    y = y.abs()
    y = y - x
    y = y.exp()
    return -y


def fusion_cases(dev):
    """Softmax (PyTorch's own kernel, for the fused row) and the chain:
    eager (8 kernels) for the unfused row, torch.compile (one Triton kernel)
    for the fused row when it works offline here, else eager again."""
    s = torch.rand(4096, 32768, device=dev) * 2 - 1
    t = median_ms(lambda: torch.softmax(s, dim=-1))
    yield "softmax_fused_4096x32768", (t, 2.0 * 4096 * 32768 * 4 / (t * 1e-3) / 1e9, "GB/s")
    del s
    x = torch.rand(1 << 28, device=dev) * 2 - 1
    t = median_ms(lambda: chain8(x))
    yield "chain8_1GiB_unfused", (t, 2 * GIB / (t * 1e-3) / 1e9, "GB/s")
    try:
        compiled = torch.compile(chain8)
        compiled(x)
        torch.cuda.synchronize()
        t = median_ms(lambda: compiled(x))
        print("chain8_1GiB_fused: torch side is torch.compile")
    except Exception as e:  # no Triton / compiler offline: eager
        print(f"chain8_1GiB_fused: torch.compile failed ({type(e).__name__}), torch side is eager")
        t = median_ms(lambda: chain8(x))
    yield "chain8_1GiB_fused", (t, 2 * GIB / (t * 1e-3) / 1e9, "GB/s")


def torch_cases(quick, fusion_only=False):
    dev = "cuda"
    out = {}
    if fusion_only:
        yield from fusion_cases(dev)
        return
    n = 1 << 28
    x = torch.rand(n, device=dev) * 2 - 1
    y = torch.rand(n, device=dev) * 2 - 1
    t = median_ms(lambda: x.clone())
    out["copy_like_negate_1GiB"] = (t, 2 * GIB / (t * 1e-3) / 1e9, "GB/s")
    t = median_ms(lambda: x + y)
    out["add_1GiB"] = (t, 3 * GIB / (t * 1e-3) / 1e9, "GB/s")
    t = median_ms(lambda: torch.exp(x))
    out["exp_1GiB"] = (t, 2 * GIB / (t * 1e-3) / 1e9, "GB/s")
    t = median_ms(lambda: x.sum())
    out["sum_1GiB"] = (t, GIB / (t * 1e-3) / 1e9, "GB/s")
    del x, y
    s = torch.rand(4096, 32768, device=dev) * 2 - 1
    t = median_ms(lambda: torch.softmax(s, dim=-1))
    out["softmax_4096x32768"] = (t, 2.0 * 4096 * 32768 * 4 / (t * 1e-3) / 1e9, "GB/s")
    del s
    torch.backends.cuda.matmul.allow_tf32 = False  # f32 exact, as Emily's default
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        for size in (4096,) if quick else (4096, 8192):
            a = (torch.rand(size, size, device=dev) * 2 - 1).to(dtype)
            b = (torch.rand(size, size, device=dev) * 2 - 1).to(dtype)
            t = median_ms(lambda: a @ b)
            out[f"gemm_{name}_{size}"] = (t, 2.0 * size**3 / (t * 1e-3) / 1e12, "TFLOP/s")
            del a, b
    a = torch.rand(1024, device=dev)
    b = torch.rand(1024, device=dev)
    import time

    for _ in range(1000):
        a + b
    torch.cuda.synchronize()
    iters = 20000
    t0 = time.perf_counter()
    for _ in range(iters):
        a + b
    torch.cuda.synchronize()
    us = (time.perf_counter() - t0) / iters * 1e6
    out["eager_add_1024_per_op"] = (us / 1e3, us, "us")
    yield from out.items()
    yield from fusion_cases(dev)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    quick = "--quick" in sys.argv
    fusion_only = "--fusion" in sys.argv
    exe = args[0] if args else os.path.join("build", "cuda_bench")
    cmd = [exe] + (["--quick"] if quick else []) + (["--fusion"] if fusion_only else [])
    emily = run_emily(cmd)
    print(f"\nGPU: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    print(f"{'case':26} {'emily ms':>10} {'torch ms':>10} {'emily':>10} {'torch':>10} {'unit':>8} {'ratio':>7}")
    # Rows print as PyTorch finishes each case (a slow compile cut short by
    # a timeout keeps the rows before it).
    for name, (tms, tfig, unit) in torch_cases(quick, fusion_only):
        if name not in emily:
            continue
        ems, efig, _ = emily[name]
        ratio = (tfig / efig) if unit == "us" else (efig / tfig)
        print(f"{name:26} {ems:10.3f} {tms:10.3f} {efig:10.1f} {tfig:10.1f} {unit:>8} {ratio:7.2f}")


if __name__ == "__main__":
    main()
