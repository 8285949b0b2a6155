"""conv2d benchmark: Emily's engine (em_conv through ctypes) against numpy
im2col + matmul, in the same process.

    make BUILD=build lib && EMILY_LIB=build/libemily.so python3 bench/conv_bench.py

Case: batch 8, 64 -> 64 channels, 56x56, 3x3 kernel, padding :same
(1 on each side), stride 1, f32. Prints the median of N runs per side, the
GFLOP/s and the ratio numpy / emily (> 1: Emily is faster). Both results
are checked against each other.
"""
import ctypes as C
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "oracle"))
from emily_ctypes import E, array, check, lib  # noqa: E402

P = C.c_void_p
I64x8 = C.c_int64 * 8


class Opts(C.Structure):
    _fields_ = [("strides", I64x8), ("pad_low", I64x8), ("pad_high", I64x8),
                ("input_dilation", I64x8), ("kernel_dilation", I64x8),
                ("feature_groups", C.c_int64), ("batch_groups", C.c_int64)]


lib.em_conv.argtypes = [P, P, C.POINTER(Opts), C.POINTER(P)]
lib.em_eval.argtypes = [C.POINTER(P), C.c_size_t]

N, CIN, COUT, H, W, K = 8, 64, 64, 56, 56, 3
REPS = int(os.environ.get("REPS", "15"))


def emily_conv(x, k):
    o = Opts()
    for i in range(2):
        o.strides[i] = o.input_dilation[i] = o.kernel_dilation[i] = 1
        o.pad_low[i] = o.pad_high[i] = 1
    o.feature_groups = o.batch_groups = 1
    out = P()
    check(lib.em_conv(x.ptr, k.ptr, C.byref(o), C.byref(out)))
    arr = (P * 1)(out.value)
    check(lib.em_eval(arr, 1))
    return E(out.value)


def numpy_conv(x, k):
    """im2col + one matmul per image (float32), the usual numpy way."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (K, K), axis=(2, 3))  # N,C,H,W,K,K
    cols = cols.transpose(0, 1, 4, 5, 2, 3).reshape(N, CIN * K * K, H * W)
    wm = k.reshape(COUT, CIN * K * K)
    return np.matmul(wm, cols).reshape(N, COUT, H, W)


def timeit(fn):
    fn()  # warm-up
    ts = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts)


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, CIN, H, W), dtype=np.float32)
    k = rng.standard_normal((COUT, CIN, K, K), dtype=np.float32)
    ex, ek = array(x, "f32"), array(k, "f32")
    got = emily_conv(ex, ek).numpy()
    want = numpy_conv(x, k)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    assert err < 1e-5, err
    t_em, t_em_min = timeit(lambda: emily_conv(ex, ek))
    t_np, t_np_min = timeit(lambda: numpy_conv(x, k))
    flop = 2.0 * N * COUT * H * W * CIN * K * K
    print(f"conv2d f32 N={N} C={CIN}->{COUT} {H}x{W} k={K}x{K} padding same, {REPS} runs, "
          f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, numpy {np.__version__}")
    print(f"  emily (em_conv, im2col+sgemm)   median {t_em * 1e3:8.2f} ms  min {t_em_min * 1e3:8.2f} ms"
          f"  {flop / t_em / 1e9:7.1f} GFLOP/s")
    print(f"  numpy (im2col + matmul)         median {t_np * 1e3:8.2f} ms  min {t_np_min * 1e3:8.2f} ms"
          f"  {flop / t_np / 1e9:7.1f} GFLOP/s")
    print(f"  ratio numpy/emily (median) {t_np / t_em:.2f}x   max rel. difference {err:.1e}")


if __name__ == "__main__":
    main()
