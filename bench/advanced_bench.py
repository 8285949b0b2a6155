"""Advanced ops: Emily's engine (through ctypes) against numpy, in the same
process, runs alternating between the two sides.

    EMILY_LIB=build/libemily.so /usr/bin/python3 bench/advanced_bench.py

Cases (f32 / c64): sort of 1M, cumulative_sum of 16M, fft of 1M complex,
cholesky of a 512x512 SPD matrix, svd (reduced) of a 512x512 matrix.
Emily's side builds the op and evaluates it (em_eval; the result is not
read back); numpy's side calls np.sort / np.cumsum / np.fft.fft /
np.linalg.cholesky / np.linalg.svd(full_matrices=False). One warm-up per
side, then REPS rounds of (emily, numpy); the medians are reported with
the ratio numpy/emily (> 1: Emily is faster). Results are checked.
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
PP = C.POINTER(P)
lib.em_eval.argtypes = [PP, C.c_size_t]
lib.em_sort.argtypes = [P, C.c_int, C.c_bool, PP]
lib.em_scan.argtypes = [C.c_int, P, C.c_int, C.c_bool, PP]
lib.em_fft.argtypes = [P, C.c_int, C.c_int64, C.c_int, C.c_double, PP]
lib.em_cholesky.argtypes = [P, PP]
lib.em_svd.argtypes = [P, C.c_bool, PP, PP, PP]

REPS = int(os.environ.get("REPS", "9"))


def evaluated(*ptrs):
    arr = (P * len(ptrs))(*ptrs)
    check(lib.em_eval(arr, len(ptrs)))
    return [E(p) for p in ptrs]


def em_sort(x):
    out = P()
    check(lib.em_sort(x.ptr, 0, False, C.byref(out)))
    return evaluated(out.value)[0]


def em_cumsum(x):
    out = P()
    check(lib.em_scan(0, x.ptr, 0, False, C.byref(out)))  # EM_SCAN_SUM
    return evaluated(out.value)[0]


def em_fft(x):
    out = P()
    check(lib.em_fft(x.ptr, -1, x.shape[-1], 0, 0.0, C.byref(out)))  # EM_FFT_FORWARD
    return evaluated(out.value)[0]


def em_cholesky(x):
    out = P()
    check(lib.em_cholesky(x.ptr, C.byref(out)))
    return evaluated(out.value)[0]


def em_svd(x):
    u, s, vt = P(), P(), P()
    check(lib.em_svd(x.ptr, False, C.byref(u), C.byref(s), C.byref(vt)))
    return evaluated(u.value, s.value, vt.value)


def bench(em_fn, np_fn):
    em_fn()
    np_fn()
    te, tn = [], []
    for _ in range(REPS):
        t0 = time.perf_counter()
        em_fn()
        te.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        np_fn()
        tn.append(time.perf_counter() - t0)
    return statistics.median(te), statistics.median(tn)


def main():
    rng = np.random.default_rng(0)
    cases = []

    x = rng.standard_normal(1 << 20, dtype=np.float32)
    ex = array(x, "f32")
    assert np.array_equal(em_sort(ex).numpy(), np.sort(x))
    cases.append(("sort 1M f32", lambda: em_sort(ex), lambda: np.sort(x)))

    y = rng.standard_normal(1 << 24, dtype=np.float32)
    ey = array(y, "f32")
    got = em_cumsum(ey).numpy()
    ref = np.cumsum(y.astype(np.float64))
    assert np.max(np.abs(got - ref)) / (1 + np.max(np.abs(ref))) < 1e-3
    cases.append(("cumulative_sum 16M f32", lambda: em_cumsum(ey), lambda: np.cumsum(y)))

    z = (rng.standard_normal(1 << 20) + 1j * rng.standard_normal(1 << 20)).astype(np.complex64)
    ez = array(z, "c64")
    got = em_fft(ez).numpy()
    ref = np.fft.fft(z.astype(np.complex128))
    assert np.max(np.abs(got - ref)) / np.max(np.abs(ref)) < 1e-4
    cases.append(("fft 1M c64", lambda: em_fft(ez), lambda: np.fft.fft(z)))

    m = rng.standard_normal((512, 512)).astype(np.float32)
    spd = (m @ m.T / 512 + np.eye(512, dtype=np.float32)).astype(np.float32)
    espd = array(spd, "f32")
    got = em_cholesky(espd).numpy()
    assert np.max(np.abs(got - np.linalg.cholesky(spd.astype(np.float64)))) < 1e-3
    cases.append(("cholesky 512x512 f32", lambda: em_cholesky(espd), lambda: np.linalg.cholesky(spd)))

    em = array(m, "f32")
    s = em_svd(em)[1].numpy()
    assert np.max(np.abs(s - np.linalg.svd(m.astype(np.float64), compute_uv=False))) < 1e-2
    cases.append(("svd 512x512 f32", lambda: em_svd(em),
                  lambda: np.linalg.svd(m, full_matrices=False)))

    print(f"advanced ops, {REPS} alternating runs after one warm-up, {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()}, numpy {np.__version__}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"  {'case':26s} {'Emily ms':>10s} {'numpy ms':>10s} {'numpy/Emily':>12s}")
    for name, fe, fn in cases:
        te, tn = bench(fe, fn)
        print(f"  {name:26s} {te * 1e3:10.2f} {tn * 1e3:10.2f} {tn / te:11.2f}x")


if __name__ == "__main__":
    main()
