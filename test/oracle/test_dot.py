"""Oracle tests for em_dot and em_matmul against numpy (float64 / wrapping
integer arithmetic)."""
import ctypes as C

import numpy as np

from emily_ctypes import DTYPES, MAX_NDIM, EmilyError, call, lib, to_bf16_bits
from emily_ctypes import array as _array

P = C.c_void_p
I64P = C.POINTER(C.c_int64)
MAXD = MAX_NDIM


class DotOpts(C.Structure):
    _fields_ = [("ncontract", C.c_int), ("contract_a", C.c_int * MAXD),
                ("contract_b", C.c_int * MAXD), ("nbatch", C.c_int),
                ("batch_a", C.c_int * MAXD), ("batch_b", C.c_int * MAXD)]


lib.em_dot.argtypes = [P, P, C.POINTER(DotOpts), C.POINTER(P)]
lib.em_matmul.argtypes = [P, P, C.POINTER(P)]
lib.em_transpose.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.POINTER(P)]
lib.em_slice.argtypes = [P, I64P, I64P, I64P, C.POINTER(P)]
lib.em_reshape.argtypes = [P, I64P, C.c_int, C.POINTER(P)]

INTS = ["pred", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"]
NPDT = {"pred": np.bool_, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
        "u64": np.uint64, "s8": np.int8, "s16": np.int16, "s32": np.int32,
        "s64": np.int64, "f16": np.float16, "f32": np.float32,
        "f64": np.float64, "c64": np.complex64, "c128": np.complex128}
EPS = {"f16": 2e-3, "bf16": 1e-2, "f32": 2e-6, "f64": 1e-14, "c64": 2e-6,
       "c128": 1e-14}


def array(x, dtype):
    e = _array(np.atleast_1d(x), dtype)
    if np.ndim(x) == 0:
        e = call("em_reshape", e, (C.c_int64 * 1)(), 0)
    return e


def read(e):
    if e.dtype == "bf16" and len(e.shape) == 0:
        return call("em_reshape", e, (C.c_int64 * 1)(1), 1).numpy().reshape(())
    return e.numpy()


def values(rng, shape, dt):
    return np.asarray(_values(rng, shape, dt))


def _values(rng, shape, dt):
    if dt == "pred":
        return rng.random(shape) < 0.5
    if dt in INTS:
        info = np.iinfo(NPDT[dt])
        if dt == "u64":
            return rng.integers(0, 2**64 - 1, size=shape, dtype=np.uint64,
                                endpoint=True)
        return rng.integers(int(info.min), int(info.max), size=shape,
                            endpoint=True).astype(NPDT[dt])
    x = rng.standard_normal(shape)
    if dt in ("c64", "c128"):
        return (x + 1j * rng.standard_normal(shape)).astype(NPDT[dt])
    if dt == "bf16":
        bits = to_bf16_bits(np.atleast_1d(x)).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(np.shape(x))
    return x.astype(NPDT[dt])


def int_contract(a, b, ca, cb, ba, bb, dt):
    """Exact integer contraction with wrapping: Python ints via object
    arrays, then reduced modulo 2^bits."""
    ao = a.astype(object) if dt != "pred" else a.astype(np.int64).astype(object)
    bo = b.astype(object) if dt != "pred" else b.astype(np.int64).astype(object)
    r = contract_np(ao, bo, ca, cb, ba, bb)
    if dt == "pred":
        return np.asarray(r != 0, dtype=bool)
    bits = np.dtype(NPDT[dt]).itemsize * 8
    mod = 1 << bits
    signed = np.issubdtype(NPDT[dt], np.signedinteger)
    f = np.vectorize(lambda v: ((int(v) % mod) - mod
                                if signed and int(v) % mod >= mod // 2
                                else int(v) % mod), otypes=[object])
    return np.asarray(f(r) if r.size else r, dtype=object).astype(NPDT[dt])


def contract_np(a, b, ca, cb, ba, bb):
    """Nx.dot/6 with numpy: batch axes, then a's free, then b's free."""
    fa = [i for i in range(a.ndim) if i not in ca and i not in ba]
    fb = [i for i in range(b.ndim) if i not in cb and i not in bb]
    at = np.transpose(a, list(ba) + fa + list(ca))
    bt = np.transpose(b, list(bb) + list(cb) + fb)
    nb = len(ba)
    bshape = at.shape[:nb]
    ash, bsh = at.shape[nb:nb + len(fa)], bt.shape[nb + len(cb):]
    K = int(np.prod(at.shape[nb + len(fa):], dtype=np.int64))
    M = int(np.prod(ash, dtype=np.int64))
    N = int(np.prod(bsh, dtype=np.int64))
    B = int(np.prod(bshape, dtype=np.int64))
    am = at.reshape(B, M, K)
    bm = bt.reshape(B, K, N)
    out = np.empty((B, M, N), dtype=np.result_type(a, b) if a.dtype != object
                   else object)
    for i in range(B):
        if K == 0:
            out[i] = 0
        else:
            out[i] = am[i].dot(bm[i])
    return out.reshape(tuple(bshape) + tuple(ash) + tuple(bsh))


def opts(ca, cb, ba, bb):
    o = DotOpts()
    o.ncontract = len(ca)
    o.nbatch = len(ba)
    for i, (x, y) in enumerate(zip(ca, cb)):
        o.contract_a[i], o.contract_b[i] = x, y
    for i, (x, y) in enumerate(zip(ba, bb)):
        o.batch_a[i], o.batch_b[i] = x, y
    return o


def transpose(e, perm):
    return call("em_transpose", e, (C.c_int * len(perm))(*perm), len(perm))


def check(got, want, dt, k, ctx):
    assert got.shape == want.shape, (ctx, got.shape, want.shape)
    if dt in INTS:
        assert np.array_equal(got, want), (ctx, got, want)
        return
    scale = np.sqrt(max(k, 1)) * 4
    err = np.abs(got.astype(np.complex128) - want)
    assert (err <= EPS[dt] * scale * (1 + np.abs(want))).all(), \
        (ctx, float(np.max(err)))


def random_dot_case(rng, dt):
    nb = int(rng.integers(0, 2))
    nc = int(rng.integers(0, 3))
    fa_n = int(rng.integers(0, 3))
    fb_n = int(rng.integers(0, 3))
    bsz = [int(s) for s in rng.integers(1, 4, size=nb)]
    csz = [int(s) for s in rng.integers(0 if rng.random() < 0.1 else 1, 6,
                                        size=nc)]
    fa = [int(s) for s in rng.integers(1, 6, size=fa_n)]
    fb = [int(s) for s in rng.integers(1, 6, size=fb_n)]
    # Random placement of the axes in each operand.
    na, nbd = nb + nc + fa_n, nb + nc + fb_n
    pa, pb = rng.permutation(na), rng.permutation(nbd)
    sa, sb = [0] * na, [0] * nbd
    ba, bb = [int(p) for p in pa[:nb]], [int(p) for p in pb[:nb]]
    ca, cb = [int(p) for p in pa[nb:nb + nc]], [int(p) for p in pb[nb:nb + nc]]
    for i in range(nb):
        sa[ba[i]] = sb[bb[i]] = bsz[i]
    for i in range(nc):
        sa[ca[i]] = sb[cb[i]] = csz[i]
    for i, p in enumerate(pa[nb + nc:]):
        sa[p] = fa[i]
    for i, p in enumerate(pb[nb + nc:]):
        sb[p] = fb[i]
    return sa, sb, ca, cb, ba, bb


def test_dot_random_all_dtypes():
    rng = np.random.default_rng(2024)
    for dt in DTYPES:
        for trial in range(25):
            sa, sb, ca, cb, ba, bb = random_dot_case(rng, dt)
            a, b = values(rng, sa, dt), values(rng, sb, dt)
            ea, eb = array(a, dt), array(b, dt)
            if len(sa) >= 2 and trial % 3 == 1:  # strided (transposed) a
                perm = list(rng.permutation(len(sa)))
                inv = list(np.argsort(perm))
                ea = transpose(array(np.transpose(a, perm), dt), inv)
            if len(sb) >= 2 and trial % 3 == 2:
                perm = list(rng.permutation(len(sb)))
                inv = list(np.argsort(perm))
                eb = transpose(array(np.transpose(b, perm), dt), inv)
            o = opts(ca, cb, ba, bb)
            got = read(call("em_dot", ea, eb, C.byref(o)))
            if dt in INTS:
                want = int_contract(a, b, ca, cb, ba, bb, dt)
            else:
                w = np.complex128 if dt in ("c64", "c128") else np.float64
                want = contract_np(a.astype(w), b.astype(w), ca, cb, ba, bb)
            k = int(np.prod([sa[i] for i in ca])) if ca else 1
            check(got, want, dt, k, (dt, trial, sa, sb, ca, cb, ba, bb))


def test_dot_blas_layouts():
    """f32/f64/c64/c128 with row- and column-major operands (BLAS transpose
    flags), sliced operands (leading dimension) and broadcast-like cases."""
    rng = np.random.default_rng(3)
    for dt in ("f32", "f64", "c64", "c128", "bf16", "f16"):
        w = np.complex128 if dt[0] == "c" else np.float64
        for ta in (False, True):
            for tb in (False, True):
                m, k, n = 37, 53, 29
                a = values(rng, (k, m) if ta else (m, k), dt)
                b = values(rng, (n, k) if tb else (k, n), dt)
                ea, eb = array(a, dt), array(b, dt)
                if ta:
                    ea, a = transpose(ea, [1, 0]), a.T
                if tb:
                    eb, b = transpose(eb, [1, 0]), b.T
                got = read(call("em_matmul", ea, eb))
                want = a.astype(w) @ b.astype(w)
                check(got, want, dt, k, (dt, ta, tb))
        # Column slice: rows keep their stride (lda > k).
        big = values(rng, (20, 40), dt)
        e = call("em_slice", array(big, dt), (C.c_int64 * 2)(0, 5),
                 (C.c_int64 * 2)(20, 30), (C.c_int64 * 2)(1, 1))
        bm = values(rng, (25, 7), dt)
        got = read(call("em_matmul", e, array(bm, dt)))
        want = big[:, 5:30].astype(w) @ bm.astype(w)
        check(got, want, dt, 25, (dt, "slice"))
        # Strided slice along the contracted axis: must be packed.
        e = call("em_slice", array(big, dt), (C.c_int64 * 2)(0, 0),
                 (C.c_int64 * 2)(20, 40), (C.c_int64 * 2)(1, 2))
        bm = values(rng, (20, 3), dt)
        got = read(call("em_matmul", e, array(bm, dt)))
        want = big[:, ::2].astype(w) @ bm.astype(w)
        check(got, want, dt, 20, (dt, "step"))


def test_matmul_broadcast_and_vectors():
    rng = np.random.default_rng(11)
    cases = [((2, 3, 4, 5), (5, 6)), ((1, 4, 5), (3, 5, 2)),
             ((3, 1, 4, 5), (2, 5, 2)), ((5,), (5,)), ((5,), (2, 5, 3)),
             ((2, 3, 5), (5,)), ((4, 0), (0, 3)), ((0, 4), (4, 3)),
             ((2, 1, 6), (1, 6, 3))]
    for dt in ("f32", "f64", "s32", "u8", "bf16", "c64"):
        for sa, sb in cases:
            a, b = values(rng, sa, dt), values(rng, sb, dt)
            got = read(call("em_matmul", array(a, dt), array(b, dt)))
            if dt in INTS:
                want = np.matmul(a.astype(object), b.astype(object)) \
                    if a.size and b.size else np.matmul(a, b)
                bits = np.dtype(NPDT[dt]).itemsize * 8
                want = np.vectorize(lambda v: int(v) % (1 << bits),
                                    otypes=[object])(want) \
                    if np.size(want) else np.asarray(want)
                want = np.asarray(want, dtype=object).astype(np.uint64) \
                    .astype(NPDT[dt]) if np.size(want) else \
                    np.zeros(np.shape(want), NPDT[dt])
                assert got.shape == want.shape and \
                    np.array_equal(got, want), (dt, sa, sb, got, want)
            else:
                w = np.complex128 if dt[0] == "c" else np.float64
                want = np.matmul(a.astype(w), b.astype(w))
                check(np.asarray(got), np.asarray(want), dt, sa[-1],
                      (dt, sa, sb))


def test_dot_large_integer_and_f16():
    rng = np.random.default_rng(8)
    a = rng.integers(-100, 100, size=(130, 700)).astype(np.int32)
    b = rng.integers(-100, 100, size=(700, 90)).astype(np.int32)
    got = call("em_matmul", array(a, "s32"), array(b, "s32")).numpy()
    assert np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    h = rng.standard_normal((64, 300)).astype(np.float16)
    g = rng.standard_normal((300, 40)).astype(np.float16)
    got = call("em_matmul", array(h, "f16"), array(g, "f16")).numpy()
    want = h.astype(np.float64) @ g.astype(np.float64)
    assert np.allclose(got, want, rtol=2e-3, atol=2e-2)


def test_dot_errors():
    a = array(np.zeros((2, 3)), "f32")
    b = array(np.zeros((4, 5)), "f32")
    c = array(np.zeros((3, 5)), "f64")
    for args, needle in (((a, b, opts([1], [0], [], [])), "contract axis"),
                         ((a, c, opts([1], [0], [], [])), "dtype"),
                         ((a, b, opts([2], [0], [], [])), "out of range"),
                         ((a, a, opts([1], [1], [1], [1])), "twice"),
                         ((a, b, opts([], [], [0], [0])), "batch axis")):
        try:
            call("em_dot", *args)
            raise AssertionError(f"accepted: {needle}")
        except EmilyError as err:
            assert needle in err.message and "f32[2,3]" in err.message, \
                err.message
    for x, y in ((a, b), (array(np.zeros((2, 2, 3)), "f32"),
                          array(np.zeros((3, 3, 4)), "f32"))):
        try:
            call("em_matmul", x, y)
            raise AssertionError("matmul accepted")
        except EmilyError as err:
            assert "matmul" in err.message
