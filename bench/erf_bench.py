"""Unary transcendental kernels on the CPU: Emily's exp, erf, erfc, erf_inv
and tanh on one 2048x1536 f32 array, against numpy's exp (and scipy.special's
erf / erfc / erfinv when scipy is installed) on the same data, in the same
process.

    EMILY_LIB=build/libemily.so /usr/bin/python3 bench/erf_bench.py

Inputs: uniform in [-5, 5) (erf_inv: in (-1, 1)), seed 0. An Emily run
builds the op (em_unary), evaluates it (em_eval, engine threads as default)
and releases the result; numpy/scipy allocate their result. After one
checked run and one warm-up each, REPS rounds run every case once, in a
rotating order, so noise falls on all of them; a case's figure is the
median of its REPS times. The ratio column is the case's median over
Emily's exp median (the issue's target: erf <= 1.5x exp).
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
lib.em_eval.argtypes = [C.POINTER(P), C.c_size_t]
lib.em_unary.argtypes = [C.c_int, P, C.POINTER(P)]
lib.em_unary_name.restype = C.c_char_p
lib.em_unary_name.argtypes = [C.c_int]

REPS = int(os.environ.get("REPS", "21"))
SHAPE = (2048, 1536)


def op_code(name):
    for code in range(256):
        got = lib.em_unary_name(code)
        if got is not None and got.decode() == name:
            return code
    raise RuntimeError(f"libemily has no unary op {name!r}")


def emily_runner(name, x):
    """A timed run of em_unary(name) on x, and a function giving its result."""
    op, out, one = op_code(name), P(), (P * 1)()

    def run():
        check(lib.em_unary(op, x.ptr, C.byref(out)))
        one[0] = out.value
        check(lib.em_eval(one, 1))
        lib.em_array_release(out)

    def result():
        r = P()
        check(lib.em_unary(op, x.ptr, C.byref(r)))
        return E(r.value).numpy()
    return run, result


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    rng = np.random.default_rng(0)
    x = rng.uniform(-5, 5, SHAPE).astype(np.float32)
    y = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    ex, ey = array(x, "f32"), array(y, "f32")
    xd, yd = x.astype(np.float64), y.astype(np.float64)

    try:
        import scipy.special as sp
    except ImportError:
        sp = None

    # (name, Emily op, input, float64 reference for the check)
    import math
    ref_erf = np.vectorize(math.erf)
    ref_erfc = np.vectorize(math.erfc)
    emily = [("exp", ex, lambda: np.exp(xd)),
             ("erf", ex, lambda: ref_erf(xd)),
             ("erfc", ex, lambda: ref_erfc(xd)),
             ("erf_inv", ey, None),
             ("tanh", ex, lambda: np.tanh(xd))]
    cases = []
    for name, arg, ref in emily:
        run, result = emily_runner(name, arg)
        got = result().astype(np.float64)
        if ref is not None:  # a loose sanity check; the C test bounds ulps
            want = ref()
            assert np.all(np.abs(got - want) <= 1e-6 * np.abs(want) + 1e-30), name
        else:
            assert np.all(np.abs(ref_erf(got) - yd) <= 1e-6), name
        cases.append((f"Emily {name}", run))
    cases.append(("numpy exp", lambda: np.exp(x)))
    cases.append(("numpy tanh", lambda: np.tanh(x)))
    if sp is not None:
        cases.append(("scipy erf", lambda: sp.erf(x)))
        cases.append(("scipy erfc", lambda: sp.erfc(x)))
        cases.append(("scipy erfinv", lambda: sp.erfinv(y)))

    for _, fn in cases:
        fn()
    times = [[] for _ in cases]
    for r in range(REPS):
        for k in range(len(cases)):
            c = (r + k) % len(cases)
            t0 = time.perf_counter()
            cases[c][1]()
            times[c].append(time.perf_counter() - t0)
    med = [statistics.median(t) for t in times]
    exp_ms = med[0] * 1e3

    print(f"# unary f32 {SHAPE[0]}x{SHAPE[1]}: {cpu_name()}, {os.cpu_count()} CPUs, "
          f"numpy {np.__version__}"
          + (f", scipy {sp.__version__ if hasattr(sp, '__version__') else __import__('scipy').__version__}"
             if sp is not None else ", no scipy")
          + f"; median of {REPS} rotating rounds")
    print(f"  {'case':14s} {'median ms':>10s} {'min ms':>8s} {'/ Emily exp':>12s}")
    for (name, _), m, t in zip(cases, med, times):
        print(f"  {name:14s} {m * 1e3:10.3f} {min(t) * 1e3:8.3f} {m * 1e3 / exp_ms:11.2f}x")


if __name__ == "__main__":
    main()
