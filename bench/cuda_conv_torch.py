#!/usr/bin/env python3
"""Emily's GPU conv against torch.nn.functional.conv2d, in one run.

    python3 bench/cuda_conv_torch.py [path/to/cuda_conv_bench]

Runs the C benchmark (build/cuda_conv_bench by default: CUDA events, 3
warm-ups, median of 10), then the same shapes in PyTorch timed the same way,
twice for f32: exact (cuDNN's TF32 off, as Emily's default GEMM) and with
PyTorch's default (TF32 allowed for convolutions). "ratio" is Emily's
TFLOP/s over PyTorch's (above 1: Emily faster): "emily ms" is the default
path ("path" says which ran: gemm_1x1, depthwise, cudnn or im2col),
"cudnn ms" cuDNN forced where it applies (the order before the 1x1 and
depthwise paths), "im2col ms" the im2col + GEMM path forced, "r im2col"
its ratio.

Floors for the first case (8 x 64 -> 64, 56 x 56, 3 x 3, pad 1), before any
measurement: 2 * 8 * 64 * 576 * 3136 = 1.85 GFLOP; input and output 6.4 MB
each in f32. At the exact-f32 GEMM rate measured on the H200 (51 TFLOP/s,
docs/CUDA.md) the arithmetic takes 36 us; Emily's im2col adds a 58 MB
patch matrix written once and read once by the GEMM (116 MB, ~28 us at
4.2 TB/s), so f32 should land near 65-80 us against cuDNN's implicit GEMM
(no patch matrix). bf16: 2.4 us of arithmetic at 760 TFLOP/s but 58 MB of
patch traffic (~14 us): bound by the im2col bytes, so expect a larger gap
to cuDNN there (an implicit-GEMM kernel is the fix).

The default path for 3x3 convolutions is cuDNN (src/cuda/cudnn_conv.cu: the
legacy API, the fastest of the heuristic's first candidates timed once per
shape, as PyTorch with cudnn.benchmark); 1x1 convolutions run as one
batched GEMM over the input in place, depthwise ones through a direct
kernel (src/cuda/conv.cu). Expect ratio ~1 against "exact" (both FMA f32,
or bf16 tensor cores); the "tf32" row is PyTorch's default, which Emily
matches only with EMILY_CUDA_TF32=1.
"""
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

# The same CUDA-event timing as the other GPU benchmark (3 warm-ups,
# median of 10).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_torch import median_ms  # noqa: E402

CASES = {  # name: (N, C, O, H, k, pad, groups), as cuda_conv_bench.c
    "conv2d_8x64x56x56_k3": (8, 64, 64, 56, 3, 1, 1),
    "conv2d_32x128x28x28_k3": (32, 128, 128, 28, 3, 1, 1),
    "conv2d_8x64x56x56_k3_dw": (8, 64, 64, 56, 3, 1, 64),
    "conv2d_32x256x14x14_k1": (32, 256, 256, 14, 1, 0, 1),
}


def torch_case(shape, dtype, tf32):
    n, c, o, h, k, pad, groups = shape
    torch.backends.cudnn.allow_tf32 = tf32
    x = (torch.rand(n, c, h, h, device="cuda") * 2 - 1).to(dtype)
    w = (torch.rand(o, c // groups, k, k, device="cuda") * 2 - 1).to(dtype)
    t = median_ms(lambda: F.conv2d(x, w, padding=pad, groups=groups))
    hout = h + 2 * pad - k + 1
    flops = 2.0 * n * o * (c // groups) * k * k * hout * hout
    return t, flops / (t * 1e-3) / 1e12


def torch_parts(shape, dtype):
    """The two halves of Emily's method, done by PyTorch: unfold (im2col)
    and the batched matmul, timed apart (groups == 1 only)."""
    n, c, o, h, k, pad, groups = shape
    torch.backends.cuda.matmul.allow_tf32 = False
    x = (torch.rand(n, c, h, h, device="cuda") * 2 - 1).to(dtype)
    w = (torch.rand(o, c * k * k, device="cuda") * 2 - 1).to(dtype)
    cols = F.unfold(x, k, padding=pad)
    t_unfold = median_ms(lambda: F.unfold(x, k, padding=pad))
    t_mm = median_ms(lambda: torch.matmul(w, cols))
    return t_unfold, t_mm


def run_bench(exe):
    """Runs the C benchmark (echoing its output but the RESULT/PATH lines)
    and returns ({name: (ms, TFLOP/s)}, {name: path of the default})."""
    proc = subprocess.run([exe], capture_output=True, text=True)
    results, paths = {}, {}
    for line in proc.stdout.splitlines():
        f = line.split()
        if f and f[0] == "RESULT":
            results[f[1]] = (float(f[2]), float(f[3]))
        elif f and f[0] == "PATH":
            paths[f[1]] = f[2]
        else:
            print(line)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        sys.exit(proc.returncode)
    return results, paths


def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "cuda_conv_bench")
    emily, paths = run_bench(exe)
    print(f"\nGPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  cuDNN {torch.backends.cudnn.version()}")
    print(f"{'case':30} {'torch mode':>10} {'path':>9} {'emily ms':>9} {'cudnn ms':>9} {'im2col ms':>9}"
          f" {'torch ms':>9} {'emily TF':>9} {'torch TF':>9} {'ratio':>6} {'r im2col':>8}")
    for name, shape in CASES.items():
        for dname, dtype, modes in (("f32", torch.float32, (False, True)), ("bf16", torch.bfloat16, (False,))):
            key = f"{name}_{dname}"
            if key not in emily:
                continue
            ems, efig = emily[key]
            ims, ifig = emily.get(key + "_im2col", (float("nan"), float("nan")))
            cms = emily.get(key + "_cudnn", (float("nan"),))[0]
            for tf32 in modes:
                tms, tfig = torch_case(shape, dtype, tf32)
                mode = "tf32" if tf32 else "exact"
                print(f"{key:30} {mode:>10} {paths.get(key, '?'):>9} {ems:9.3f} {cms:9.3f} {ims:9.3f} {tms:9.3f}"
                      f" {efig:9.2f} {tfig:9.2f} {efig / tfig:6.2f} {ifig / tfig:8.2f}")
            if shape[6] == 1:
                tu, tm = torch_parts(shape, dtype)
                print(f"{'':30} {'unfold+mm':>10} {'':9} {'':9} {'':9} {'':9} {tu + tm:9.3f}   (torch unfold {tu:.3f} + matmul {tm:.3f} ms)")


if __name__ == "__main__":
    main()
