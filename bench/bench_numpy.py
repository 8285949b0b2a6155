"""bench_numpy.py — numpy on the cases of bench_engine.c, same method.

Cases: add and exp on 64 MiB f32 inputs (bytes read + written), sum over
64 MiB f32, f32 matmul at n = 512, 1024, 2048 (2 n^3 FLOPs). Each timing: one
warm-up set, then the median of N runs; the variants of one case run in
alternation (round-robin, rotating order) like the C program.

`np.add(a, b)` allocates its result each time, as Emily's op does (Emily
takes it from its buffer cache; numpy's 64 MiB result comes from mmap, so it
pays page faults each run). `np.add(a, b, out=c)` writes a reused buffer and
is reported as a second variant.

With --emily PATH (libemily.so), Emily runs each case too, through ctypes,
in alternation with numpy in this same process: the Emily/numpy ratio then
sees the same noise on both sides (this machine is shared), and both call the
same OpenBLAS for matmul. An Emily run builds the op, evaluates it (em_eval)
and releases the result; the ctypes calls cost a few microseconds, against
milliseconds per case. Its keys are "<case>/emily_in_<label>".

Output lines: R <tab> key <tab> work <tab> unit <tab> median_s <tab> min_s
<tab> reps, keys "<case>/<label>" (label "numpy" unless --label is given).
Environment: BENCH_REPS scales N (default 1.0).

Run with /usr/bin/python3 (Debian's numpy); bench/run.sh also runs it with the
`python3` first on PATH when that one has a numpy (a PyPI wheel), labelled.
"""

import ctypes
import os
import sys
import time

import numpy as np

MIB = 1 << 20
ELEMENTWISE_BYTES = 64 * MIB
WARMUP_RUNS = 3


def scaled_reps(base):
    scale = float(os.environ.get("BENCH_REPS", "1") or 1)
    return max(3, int(base * (scale if scale > 0 else 1) + 0.5))


def run_group(cases, reps):
    """cases: list of (key, work, unit, fn). Prints one R line per case."""
    for _, _, _, fn in cases:
        for _ in range(WARMUP_RUNS):
            fn()
    times = [[] for _ in cases]
    for r in range(reps):
        for k in range(len(cases)):
            c = (r + k) % len(cases)
            fn = cases[c][3]
            t0 = time.perf_counter()
            fn()
            times[c].append(time.perf_counter() - t0)
    for (key, work, unit, _), ts in zip(cases, times):
        ts.sort()
        n = len(ts)
        median = ts[n // 2] if n % 2 else 0.5 * (ts[n // 2 - 1] + ts[n // 2])
        print(f"R\t{key}\t{work:.0f}\t{unit}\t{median:.9f}\t{ts[0]:.9f}\t{n}",
              flush=True)


class Emily:
    """The few libemily calls the benchmark needs, through ctypes."""

    F32 = 11  # EM_F32 in emily.h

    def __init__(self, path):
        C = ctypes
        P = C.c_void_p
        lib = self.lib = C.CDLL(path)
        lib.em_last_error.restype = C.c_char_p
        lib.em_array_release.argtypes = [P]
        lib.em_from_data.argtypes = [P, C.c_size_t, C.POINTER(C.c_int64),
                                     C.c_int, C.c_int, C.POINTER(P)]
        lib.em_eval.argtypes = [C.POINTER(P), C.c_size_t]
        lib.em_binary.argtypes = [C.c_int, P, P, C.POINTER(P)]
        lib.em_unary.argtypes = [C.c_int, P, C.POINTER(P)]
        lib.em_reduce.argtypes = [C.c_int, P, C.POINTER(C.c_int), C.c_int,
                                  C.c_bool, C.POINTER(P)]
        lib.em_matmul.argtypes = [P, P, C.POINTER(P)]
        lib.em_read.argtypes = [P, P, C.c_size_t]
        for fn in ("em_unary_name", "em_binary_name", "em_reduce_name"):
            getattr(lib, fn).restype = C.c_char_p
            getattr(lib, fn).argtypes = [C.c_int]
        self.op_add = self._op_code("em_binary_name", "add")
        self.op_exp = self._op_code("em_unary_name", "exp")
        self.op_sum = self._op_code("em_reduce_name", "sum")
        self.out = P()
        self.out_ref = ctypes.byref(self.out)

    def _op_code(self, namer, name):
        for code in range(256):
            got = getattr(self.lib, namer)(code)
            if got is not None and got.decode() == name:
                return code
        raise RuntimeError(f"libemily has no op {name!r} ({namer})")

    def check(self, status):
        if status != 0:
            raise RuntimeError(f"libemily status {status}: "
                               f"{self.lib.em_last_error().decode()}")

    def array(self, x):
        """An evaluated f32 em_array holding a copy of x (released at exit)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        shape = (ctypes.c_int64 * x.ndim)(*x.shape)
        ptr = ctypes.c_void_p()
        self.check(self.lib.em_from_data(x.ctypes.data, x.nbytes, shape,
                                         x.ndim, self.F32, ctypes.byref(ptr)))
        return ptr

    def runner(self, build):
        """A timed run: build(out_ref) makes the op; eval it; release it."""
        lib, out, out_ref, check = self.lib, self.out, self.out_ref, self.check
        one = (ctypes.c_void_p * 1)()

        def run():
            check(build(out_ref))
            one[0] = out.value
            check(lib.em_eval(one, 1))
            lib.em_array_release(out)
        return run

    def result(self, build, nbytes):
        """One checked run's result as float32 (outside any timing)."""
        out = ctypes.c_void_p()
        self.check(build(ctypes.byref(out)))
        buf = np.empty(nbytes // 4, np.float32)
        self.check(self.lib.em_read(out, buf.ctypes.data, nbytes))
        self.lib.em_array_release(out)
        return buf


def blas_description():
    """The OpenBLAS numpy really calls (found in this process's maps)."""
    np.ones((64, 64), np.float32) @ np.ones((64, 64), np.float32)
    paths = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "blas" in os.path.basename(path):
                paths.add(path)
    # Debian's OpenBLAS exports openblas_*; the copy bundled in PyPI wheels
    # (scipy-openblas) prefixes and suffixes the names.
    for path in sorted(paths):
        for prefix, suffix in (("openblas_", ""), ("scipy_openblas_", "64_")):
            try:
                lib = ctypes.CDLL(path)
                config = getattr(lib, prefix + "get_config" + suffix)
                core = getattr(lib, prefix + "get_corename" + suffix)
                threads = getattr(lib, prefix + "get_num_threads" + suffix)
            except (OSError, AttributeError):
                continue
            config.restype = core.restype = ctypes.c_char_p
            return (f"{path}: {config().decode()}; core {core().decode()}; "
                    f"{threads()} threads")
    return "blas: " + (", ".join(sorted(paths)) or "not found")


def main():
    args = sys.argv[1:]
    label, emily_path = "numpy", None
    while args:
        if args[0] == "--label" and len(args) > 1:
            label, args = args[1], args[2:]
        elif args[0] == "--emily" and len(args) > 1:
            emily_path, args = args[1], args[2:]
        else:
            sys.exit(f"usage: {sys.argv[0]} [--label NAME] [--emily libemily.so]")
    print(f"# {label}: numpy {np.__version__} (python {sys.version.split()[0]}"
          f" at {sys.executable})")
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        print(f"# {label}: {var}={os.environ.get(var, '(unset)')}")
    print(f"# {label}: {blas_description()}", flush=True)
    em = Emily(emily_path) if emily_path else None
    if em:
        print(f"# {label}: Emily in the same process: {emily_path}", flush=True)
    em_key = "emily_in_" + label

    n = ELEMENTWISE_BYTES // 4
    rng = np.random.default_rng(1)
    x = rng.uniform(-10, 10, (4096, n // 4096)).astype(np.float32)
    y = rng.uniform(-10, 10, (4096, n // 4096)).astype(np.float32)
    dst = np.empty_like(x)
    reps = scaled_reps(21)
    nbytes = ELEMENTWISE_BYTES

    add = [(f"add/{label}", 3 * nbytes, "B", lambda: np.add(x, y)),
           (f"add/{label}_out", 3 * nbytes, "B", lambda: np.add(x, y, out=dst))]
    exp_ = [(f"exp/{label}", 2 * nbytes, "B", lambda: np.exp(x)),
            (f"exp/{label}_out", 2 * nbytes, "B", lambda: np.exp(x, out=dst))]
    sum_ = [(f"sum/{label}", nbytes + 4, "B", lambda: x.sum())]
    if em:
        ex, ey = em.array(x), em.array(y)
        lib = em.lib
        build_add = lambda out: lib.em_binary(em.op_add, ex, ey, out)
        build_exp = lambda out: lib.em_unary(em.op_exp, ex, out)
        build_sum = lambda out: lib.em_reduce(em.op_sum, ex, None, 0, False, out)
        # Checked once, outside the timings.
        if not np.array_equal(em.result(build_add, nbytes), (x + y).ravel()):
            sys.exit("bench_numpy: Emily's add disagrees with numpy")
        if not np.allclose(em.result(build_exp, nbytes), np.exp(x).ravel(),
                           rtol=1e-5, atol=0):
            sys.exit("bench_numpy: Emily's exp disagrees with numpy")
        got = em.result(build_sum, 4)[0]
        if abs(got - x.sum(dtype=np.float64)) > 1e-5 * np.abs(x).sum(dtype=np.float64):
            sys.exit("bench_numpy: Emily's sum disagrees with numpy")
        add.insert(0, (f"add/{em_key}", 3 * nbytes, "B", em.runner(build_add)))
        exp_.insert(0, (f"exp/{em_key}", 2 * nbytes, "B", em.runner(build_exp)))
        sum_.insert(0, (f"sum/{em_key}", nbytes + 4, "B", em.runner(build_sum)))
    run_group(add, reps)
    run_group(exp_, reps)
    run_group(sum_, reps)
    if em:
        for a in (ex, ey):
            em.lib.em_array_release(a)
    del x, y, dst

    for size, base in ((512, 31), (1024, 15), (2048, 9)):
        a = rng.uniform(-1, 1, (size, size)).astype(np.float32)
        b = rng.uniform(-1, 1, (size, size)).astype(np.float32)
        flops = 2.0 * size ** 3
        cases = [(f"matmul{size}/{label}", flops, "FLOP", lambda: a @ b)]
        if em:
            ea, eb = em.array(a), em.array(b)
            build = lambda out: em.lib.em_matmul(ea, eb, out)
            want = a @ b
            if not np.allclose(em.result(build, want.nbytes), want.ravel(),
                               rtol=0, atol=1e-5 * np.sqrt(size) * 4):
                sys.exit(f"bench_numpy: Emily's matmul {size} disagrees")
            cases.insert(0, (f"matmul{size}/{em_key}", flops, "FLOP",
                             em.runner(build)))
        run_group(cases, scaled_reps(base))
        if em:
            em.lib.em_array_release(ea)
            em.lib.em_array_release(eb)


if __name__ == "__main__":
    main()
