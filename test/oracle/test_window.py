"""Oracle tests for include/emily_window.h: window reductions and scatters
against float64 numpy (explicit padding + sliding windows / manual loops)."""
import ctypes as C

import numpy as np

from emily_ctypes import MAX_NDIM, E, array, check, lib

P = C.c_void_p
I64xN = C.c_int64 * MAX_NDIM


class Opts(C.Structure):
    _fields_ = [("window", I64xN), ("strides", I64xN), ("pad_low", I64xN),
                ("pad_high", I64xN), ("dilations", I64xN)]


def opts(window, strides=None, pad=None, dil=None):
    n = len(window)
    o = Opts()
    for i in range(n):
        o.window[i] = window[i]
        o.strides[i] = strides[i] if strides else 1
        o.pad_low[i] = pad[i][0] if pad else 0
        o.pad_high[i] = pad[i][1] if pad else 0
        o.dilations[i] = dil[i] if dil else 1
    return o


OPS = {"sum": 0, "product": 1, "max": 2, "min": 3}
lib.em_transpose.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.POINTER(P)]
lib.em_window_reduce.argtypes = [C.c_int, P, C.POINTER(Opts), C.POINTER(P)]
lib.em_window_scatter.argtypes = [C.c_bool, P, P, P, C.POINTER(Opts), C.POINTER(P)]


def window_reduce(op, a, o):
    out = P()
    check(lib.em_window_reduce(OPS[op], a.ptr, C.byref(o), C.byref(out)))
    return E(out.value)


def window_scatter(is_max, a, src, init, o):
    out = P()
    check(lib.em_window_scatter(is_max, a.ptr, src.ptr, init.ptr, C.byref(o), C.byref(out)))
    return E(out.value)


def ref_windows(x, window, strides, pad, dil, fill):
    """Windows of the padded x as an array [out..., window...] (float64)."""
    pads = [(max(lo, 0), max(hi, 0)) for lo, hi in pad]
    xp = np.pad(x, pads, constant_values=fill)
    crop = tuple(slice(max(-lo, 0), xp.shape[i] - max(-hi, 0)) for i, (lo, hi) in enumerate(pad))
    xp = xp[crop]
    n = x.ndim
    outs = []
    for i in range(n):
        W = (window[i] - 1) * dil[i] + 1
        outs.append(max((xp.shape[i] - W) // strides[i] + 1, 0) if xp.shape[i] >= W else 0)
    res = np.empty(tuple(outs) + tuple(window), dtype=x.dtype)
    for o in np.ndindex(*outs):
        sl = tuple(slice(o[i] * strides[i], o[i] * strides[i] + (window[i] - 1) * dil[i] + 1, dil[i]) for i in range(n))
        res[o] = xp[sl]
    return res


FILL = {"sum": 0.0, "product": 1.0, "max": -np.inf, "min": np.inf}
RED = {"sum": np.sum, "product": np.prod, "max": np.max, "min": np.min}


def ref_reduce(op, x, window, strides, pad, dil):
    w = ref_windows(x, window, strides, pad, dil, FILL[op])
    axes = tuple(range(x.ndim, 2 * x.ndim))
    return RED[op](w, axis=axes)


def test_window_reduce_random_f64_f32():
    rng = np.random.default_rng(1)
    for case in range(60):
        n = rng.integers(1, 4)
        shape = tuple(int(v) for v in rng.integers(1, 7, n))
        window = [int(rng.integers(1, 4)) for _ in range(n)]
        strides = [int(rng.integers(1, 3)) for _ in range(n)]
        dil = [int(rng.integers(1, 3)) for _ in range(n)]
        pad = [(int(rng.integers(-1, 3)), int(rng.integers(-1, 3))) for _ in range(n)]
        # keep padded sizes non-negative
        pad = [(lo, hi) if shape[i] + lo + hi >= 0 else (0, 0) for i, (lo, hi) in enumerate(pad)]
        x = rng.uniform(0.5, 1.5, shape)
        for op in OPS:
            want = ref_reduce(op, x, window, strides, pad, dil)
            for dt, tol in (("f64", 1e-12), ("f32", 1e-5)):
                got = window_reduce(op, array(x, dt), opts(window, strides, pad, dil)).numpy()
                assert got.shape == want.shape, (op, shape, window, got.shape, want.shape)
                assert np.allclose(got.astype(np.float64), want, rtol=tol, atol=tol), (op, dt, shape, window, strides, pad, dil)


NPU = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}


def test_window_reduce_dtypes():
    rng = np.random.default_rng(2)
    x = rng.integers(-5, 6, (4, 5)).astype(np.float64)
    o = opts([2, 3], [1, 2], [(1, 0), (0, 1)], [1, 1])
    for dt in ["s8", "s16", "s32", "s64", "f16", "bf16", "f32", "f64"]:
        for op in OPS:
            want = ref_reduce(op, x, [2, 3], [1, 2], [(1, 0), (0, 1)], [1, 1])
            got = window_reduce(op, array(x, dt), o).numpy().astype(np.float64)
            if op in ("max", "min") and dt not in ("f16", "bf16", "f32", "f64"):
                info = np.iinfo({"s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64}[dt])
                want = np.where(np.isinf(want), info.min if op == "max" else info.max, want)
            if dt[0] == "s":
                npdt = {"s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64}[dt]
                want = want.astype(np.int64).astype(npdt).astype(np.float64)  # wraps
            if op == "product" and dt == "bf16":
                assert np.allclose(got, want, rtol=2e-2), (dt, op)
            else:
                assert np.allclose(got, want), (dt, op, got, want)
    xu = rng.integers(0, 6, (4, 5)).astype(np.float64)
    for dt in ["u8", "u16", "u32", "u64"]:
        for op in OPS:
            want = ref_reduce(op, xu, [2, 2], [1, 1], [(0, 0), (0, 0)], [1, 1])
            got = window_reduce(op, array(xu, dt), opts([2, 2])).numpy().astype(np.float64)
            want = want.astype(np.uint64).astype(NPU[dt]).astype(np.float64)  # wraps
            assert np.allclose(got, want), (dt, op)
    # complex sum and product
    z = rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))
    for dt in ["c64", "c128"]:
        for op in ("sum", "product"):
            w = ref_windows(z, [2, 2], [1, 1], [(0, 0), (0, 0)], [1, 1], 0 if op == "sum" else 1)
            want = RED[op](w, axis=(2, 3))
            got = window_reduce(op, array(z, dt), opts([2, 2])).numpy()
            assert np.allclose(got, want, rtol=1e-5), (dt, op)


def test_window_integer_wraps_and_nan():
    x = np.array([100, 100, 100], dtype=np.float64)
    got = window_reduce("sum", array(x, "s8"), opts([3])).numpy()
    assert got.tolist() == [44]  # 300 mod 256
    x = np.array([1.0, np.nan, 3.0, 4.0])
    got = window_reduce("max", array(x, "f32"), opts([2])).numpy()
    assert np.isnan(got[0]) and np.isnan(got[1]) and got[2] == 4.0
    got = window_reduce("min", array(x, "f32"), opts([2])).numpy()
    assert np.isnan(got[0]) and np.isnan(got[1]) and got[2] == 3.0


def test_window_reduce_strided_input():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(5, 6))
    a = array(x, "f64")
    perm = (C.c_int * 2)(1, 0)
    t = P()
    check(lib.em_transpose(a.ptr, perm, 2, C.byref(t)))
    t = E(t.value)
    got = window_reduce("sum", t, opts([2, 3], [2, 1], [(1, 1), (0, 2)])).numpy()
    want = ref_reduce("sum", x.T, [2, 3], [2, 1], [(1, 1), (0, 2)], [1, 1])
    assert np.allclose(got, want)


def test_window_reduce_errors():
    a = array(np.zeros((2, 3)), "c64")
    out = P()
    o = opts([1, 1])
    assert lib.em_window_reduce(2, a.ptr, C.byref(o), C.byref(out)) == 1
    assert b"window_max" in lib.em_last_error()
    a = array(np.zeros((2, 3)), "f32")
    o = opts([0, 1])
    assert lib.em_window_reduce(0, a.ptr, C.byref(o), C.byref(out)) == 1


def ref_scatter(is_max, x, src, init, window, strides, pad):
    n = x.ndim
    out = np.full(x.shape, init, dtype=np.float64)
    outs = src.shape
    for o in np.ndindex(*outs):
        best = None
        best_pos = None
        for k in np.ndindex(*window):
            pos = tuple(o[i] * strides[i] + k[i] - pad[i][0] for i in range(n))
            if any(p < 0 or p >= x.shape[i] for i, p in enumerate(pos)):
                continue
            v = x[pos]
            if best is None or (v >= best if is_max else v <= best):
                best, best_pos = v, pos
        if best_pos is not None:
            out[best_pos] += src[o]
    return out


def test_window_scatter_doc_example():
    t = np.array([[7, 2, 5, 3, 10, 2], [3, 8, 9, 3, 4, 2], [1, 5, 7, 5, 6, 1], [0, 6, 2, 7, 2, 8]], dtype=np.float64)
    src = np.array([[2, 6], [3, 1]], dtype=np.float64)
    o = opts([2, 3], [2, 3])
    got = window_scatter(True, array(t, "s32"), array(src, "s32"), array(np.array(0), "s32"), o).numpy()
    assert got.tolist() == [[0, 0, 0, 0, 6, 0], [0, 0, 2, 0, 0, 0], [0, 0, 3, 0, 0, 0], [0, 0, 0, 0, 0, 1]]
    got = window_scatter(False, array(t, "s32"), array(src, "s32"), array(np.array(0), "s32"), o).numpy()
    # ties (the two 2s of the second window, the first) pick the last
    assert got.tolist() == [[0, 2, 0, 0, 0, 0], [0, 0, 0, 0, 0, 6], [0, 0, 0, 0, 0, 1], [3, 0, 0, 0, 0, 0]]


def test_window_scatter_random():
    rng = np.random.default_rng(4)
    for case in range(40):
        n = rng.integers(1, 4)
        shape = tuple(int(v) for v in rng.integers(1, 6, n))
        window = [int(rng.integers(1, 4)) for _ in range(n)]
        strides = [int(rng.integers(1, 3)) for _ in range(n)]
        pad = [(int(rng.integers(0, 2)), int(rng.integers(0, 2))) for _ in range(n)]
        x = rng.integers(-3, 4, shape).astype(np.float64)  # many ties
        outs = tuple(max((shape[i] + pad[i][0] + pad[i][1] - window[i]) // strides[i] + 1, 0) for i in range(n))
        src = rng.normal(size=outs)
        for is_max in (True, False):
            want = ref_scatter(is_max, x, src, 0.5, window, strides, pad)
            for xdt in ("f32", "s16"):
                got = window_scatter(is_max, array(x, xdt), array(src, "f64"), array(np.array(0.5), "f64"),
                                     opts(window, strides, pad)).numpy()
                assert np.allclose(got, want), (is_max, shape, window, strides, pad)
