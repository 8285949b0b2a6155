"""Oracle tests for em_reduce and em_argreduce against numpy (float64)."""
import ctypes as C

import numpy as np

from emily_ctypes import DTYPES, EmilyError, call, lib, to_bf16_bits
from emily_ctypes import array as _array

P = C.c_void_p
I64P = C.POINTER(C.c_int64)
lib.em_reduce.argtypes = [C.c_int, P, C.POINTER(C.c_int), C.c_int, C.c_bool,
                          C.POINTER(P)]
lib.em_transpose.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.POINTER(P)]
lib.em_slice.argtypes = [P, I64P, I64P, I64P, C.POINTER(P)]
lib.em_reshape.argtypes = [P, I64P, C.c_int, C.POINTER(P)]


def array(x, dtype):
    """emily_ctypes.array, keeping 0-d inputs 0-d (np.ascontiguousarray
    turns them into shape (1,), and to_bf16_bits fails on 0-d)."""
    e = _array(np.atleast_1d(x), dtype)
    if np.ndim(x) == 0:
        e = call("em_reshape", e, (C.c_int64 * 1)(), 0)
    return e


def read(e):
    """E.numpy, also for 0-d bf16 (whose widening view fails on 0-d)."""
    if e.dtype == "bf16" and len(e.shape) == 0:
        one = call("em_reshape", e, (C.c_int64 * 1)(1), 1)
        return one.numpy().reshape(())
    return e.numpy()


class ArgOpts(C.Structure):
    _fields_ = [("axis", C.c_int), ("all_axes", C.c_bool),
                ("keep_axis", C.c_bool), ("tie_high", C.c_bool),
                ("dtype", C.c_int)]


lib.em_argreduce.argtypes = [C.c_int, P, C.POINTER(ArgOpts), C.POINTER(P)]

OPS = ["sum", "product", "max", "min", "all", "any"]
ACCEPTS = {
    "sum": [d for d in DTYPES if d != "pred"],
    "product": [d for d in DTYPES if d != "pred"],
    "max": [d for d in DTYPES if d not in ("c64", "c128")],
    "min": [d for d in DTYPES if d not in ("c64", "c128")],
    "all": DTYPES,
    "any": DTYPES,
}
INTS = ["pred", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"]
EPS = {"f16": 1e-3, "bf16": 8e-3, "f32": 1e-6, "f64": 1e-14, "c64": 1e-6,
       "c128": 1e-14}
NPDT = {"pred": np.bool_, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
        "u64": np.uint64, "s8": np.int8, "s16": np.int16, "s32": np.int32,
        "s64": np.int64, "f16": np.float16, "f32": np.float32,
        "f64": np.float64, "c64": np.complex64, "c128": np.complex128}


def values(rng, shape, dt, op):
    """Random values suited to (op, dtype), as the dtype holds them."""
    if dt == "pred":
        return rng.random(shape) < (0.9 if op == "all" else 0.2)
    if dt in INTS:
        info = np.iinfo(NPDT[dt])
        if op == "product":
            lo, hi = (-3, 4) if info.min < 0 else (0, 4)
        else:
            lo, hi = int(info.min), int(info.max)
        x = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64
                         if info.min < 0 or dt != "u64" else np.uint64)
        if op in ("all", "any"):
            x = x * (rng.random(shape) < 0.7)
        return x.astype(NPDT[dt])
    if op == "product":
        x = rng.uniform(0.9, 1.1, size=shape)
    else:
        x = rng.standard_normal(shape)
    if op in ("all", "any"):
        x = x * (rng.random(shape) < 0.8)
    if dt in ("c64", "c128"):
        y = rng.uniform(-0.1, 0.1, size=shape) if op == "product" else \
            rng.standard_normal(shape)
        return (x + 1j * y).astype(NPDT[dt])
    if dt == "bf16":
        bits = to_bf16_bits(np.atleast_1d(x)).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(np.shape(x))
    return x.astype(NPDT[dt])


def reference(op, x, axes, keep, dt):
    ax = tuple(axes)
    if op in ("all", "any"):
        f = np.all if op == "all" else np.any
        return f(x != 0, axis=ax, keepdims=keep)
    if dt in INTS:
        nd = NPDT[dt]
        f = np.sum if op == "sum" else np.prod if op == "product" else \
            np.max if op == "max" else np.min
        if f in (np.max, np.min) and any(x.shape[a] == 0 for a in ax):
            lo, hi = (0, 1) if dt == "pred" else \
                (np.iinfo(nd).min, np.iinfo(nd).max)
            shp = [1 if i in ax else s for i, s in enumerate(x.shape)]
            if not keep:
                shp = [s for i, s in enumerate(x.shape) if i not in ax]
            return np.full(shp, lo if op == "max" else hi, nd)
        if f in (np.max, np.min):
            return f(x, axis=ax, keepdims=keep)
        with np.errstate(over="ignore"):
            return f(x, axis=ax, keepdims=keep, dtype=nd)
    wide = x.astype(np.complex128 if dt in ("c64", "c128") else np.float64)
    if op == "sum":
        return np.sum(wide, axis=ax, keepdims=keep)
    if op == "product":
        return np.prod(wide, axis=ax, keepdims=keep)
    init = -np.inf if op == "max" else np.inf
    f = np.max if op == "max" else np.min
    return f(wide, axis=ax, keepdims=keep, initial=init)


def reduce(op, e, axes, keep):
    if axes is None:
        return call("em_reduce", OPS.index(op), e, None, 0, keep)
    arr = (C.c_int * max(1, len(axes)))(*axes)
    return call("em_reduce", OPS.index(op), e, arr, len(axes), keep)


def compare(got, want, dt, op, n, ctx):
    assert got.shape == np.shape(want), (ctx, got.shape, np.shape(want))
    if dt in INTS or op in ("all", "any") or op in ("max", "min"):
        if dt in ("f16", "bf16", "f32", "f64"):
            g = got.astype(np.float64)
            ok = (g == want) | (np.isnan(g) & np.isnan(want))
            assert ok.all(), (ctx, got, want)
        else:
            assert np.array_equal(got.astype(np.asarray(want).dtype), want), \
                (ctx, got, want)
        return
    tol = EPS[dt] * (4 + np.log2(max(n, 2)))
    scale = np.abs(want) + (np.sqrt(max(n, 1)) if op == "sum" else 0)
    err = np.abs(got.astype(np.asarray(want).dtype) - want)
    assert (err <= tol * scale + 1e-30).all(), (ctx, np.max(err / scale))


def transpose(e, perm):
    arr = (C.c_int * len(perm))(*perm)
    return call("em_transpose", e, arr, len(perm))


def slice_(e, start, stop, step):
    n = len(start)
    mk = lambda v: (C.c_int64 * max(1, n))(*v)
    return call("em_slice", e, mk(start), mk(stop), mk(step))


def random_case(rng, op, dt):
    nd = int(rng.integers(0, 5))
    shape = tuple(int(s) for s in rng.integers(0 if rng.random() < 0.1 else 1,
                                               7, size=nd))
    x = values(rng, shape, dt, op)
    e = array(x, dt)
    layout = rng.integers(0, 3) if nd >= 2 else 0
    if layout == 1:  # transposed view
        perm = list(rng.permutation(nd))
        e = transpose(e, perm)
        x = np.transpose(x, perm)
    elif layout == 2:  # strided slice
        start = [int(rng.integers(0, 2)) if s > 1 else 0 for s in shape]
        step = [int(rng.integers(1, 3)) for _ in shape]
        e = slice_(e, start, list(shape), step)
        x = x[tuple(slice(a, None, b) for a, b in zip(start, step))]
    mode = rng.integers(0, 3)
    if mode == 0:
        axes = None
    else:
        k = int(rng.integers(0, nd + 1))
        axes = [int(a) for a in rng.permutation(nd)[:k]]
        axes = [a - nd if rng.random() < 0.3 else a for a in axes]
    keep = bool(rng.integers(0, 2))
    return e, x, axes, keep


def test_reduce_random_all_ops_dtypes():
    rng = np.random.default_rng(1234)
    for op in OPS:
        for dt in ACCEPTS[op]:
            for trial in range(40):
                e, x, axes, keep = random_case(rng, op, dt)
                ax = list(range(x.ndim)) if axes is None else \
                    [a % x.ndim for a in axes]
                want = reference(op, x, ax, keep, dt)
                got = read(reduce(op, e, axes, keep))
                n = int(np.prod([x.shape[a] for a in ax])) if ax else 1
                compare(got, want, dt, op, n,
                        (op, dt, trial, x.shape, axes, keep))


def test_reduce_rejects():
    x = array(np.zeros((2, 3)), "c64")
    for op in ("max", "min"):
        try:
            reduce(op, x, None, False)
            raise AssertionError("complex max accepted")
        except EmilyError as err:
            assert "c64[2,3]" in err.message
    p = array(np.zeros(3, bool), "pred")
    for op in ("sum", "product"):
        try:
            reduce(op, p, None, False)
            raise AssertionError("pred sum accepted")
        except EmilyError:
            pass
    f = array(np.zeros((2, 3)), "f32")
    for axes in ([2], [0, 0], [-3]):
        try:
            reduce("sum", f, axes, False)
            raise AssertionError(f"bad axes {axes} accepted")
        except EmilyError as err:
            assert "sum" in err.message


def test_reduce_large_sum_accuracy_and_layouts():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1 << 20,)).astype(np.float32) + 1.0
    want = np.sum(x.astype(np.float64))
    got = read(reduce("sum", array(x, "f32"), None, False))
    assert abs(float(got) - want) <= 1e-6 * abs(want), (got, want)
    # Column sums (row fold), row sums, and a middle axis.
    m = rng.standard_normal((513, 300, 7)).astype(np.float32)
    e = array(m, "f32")
    for axes in ([0], [2], [1], [0, 2], [0, 1]):
        got = read(reduce("sum", e, axes, False))
        want = np.sum(m.astype(np.float64), axis=tuple(axes))
        assert np.allclose(got, want, rtol=1e-5, atol=1e-3), axes
    # Few outputs with a long reduced range (split across threads).
    t = rng.standard_normal((3, 400000)).astype(np.float32)
    for axes, src in (([1], t), ([0], t.T.copy())):
        got = read(reduce("sum", array(src, "f32"), axes, False))
        want = np.sum(src.astype(np.float64), axis=axes[0])
        assert np.allclose(got, want, rtol=1e-5, atol=1e-2), axes
    # Narrow column sums with many rows (row fold split into many chunks).
    for shape, dt in (((200000, 8), "f32"), ((70000, 5), "f64"),
                      ((100000, 6), "bf16")):
        c = values(rng, shape, dt, "sum")
        got = read(reduce("sum", array(c, dt), [0], False))
        want = np.sum(c.astype(np.float64), axis=0)
        tol = 1e-5 if dt != "bf16" else 1e-2
        assert np.allclose(got, want, rtol=tol, atol=tol * 50), (shape, dt)
    mx = read(reduce("max", array(t, "f32"), [1], False))
    assert np.array_equal(mx, t.max(axis=1))
    s = rng.integers(-1000, 1000, size=(3, 400000)).astype(np.int32)
    got = read(reduce("sum", array(s, "s32"), [1], False))
    assert np.array_equal(got, s.sum(axis=1, dtype=np.int32))


def test_reduce_nan_and_identities():
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -np.inf]])
    for dt in ("f16", "bf16", "f32", "f64"):
        e = array(x, dt)
        mx = read(reduce("max", e, [1], False))
        mn = read(reduce("min", e, [1], False))
        assert np.isnan(mx[0]) and mx[1] == 5.0, (dt, mx)
        assert np.isnan(mn[0]) and mn[1] == -np.inf, (dt, mn)
        empty = array(np.zeros((2, 0)), dt)
        assert (read(reduce("max", empty, [1], False)) == -np.inf).all()
        assert (read(reduce("min", empty, [1], False)) == np.inf).all()
        assert (read(reduce("sum", empty, [1], False)) == 0).all()
        assert (read(reduce("product", empty, [1], False)) == 1).all()
        assert read(reduce("any", e, None, False)) == True  # noqa: E712


def argref(x, axis, op, tie_high, keep):
    """Nx semantics: first NaN wins; ties by tie_high."""
    if axis is None:
        flat = x.reshape(-1)
        r = argref(flat, 0, op, tie_high, False)
        return r.reshape((1,) * x.ndim) if keep else r
    xm = np.moveaxis(x, axis, -1)
    out = np.empty(xm.shape[:-1], np.int64)
    for idx in np.ndindex(*xm.shape[:-1]):
        row = xm[idx].astype(np.float64)
        nans = np.flatnonzero(np.isnan(row))
        if nans.size:
            out[idx] = nans[0]
            continue
        best = row.max() if op == 0 else row.min()
        hits = np.flatnonzero(row == best)
        out[idx] = hits[-1] if tie_high else hits[0]
    return np.expand_dims(out, axis) if keep else out


def test_argreduce_random():
    rng = np.random.default_rng(99)
    reals = [d for d in DTYPES if d not in ("c64", "c128")]
    for dt in reals:
        for trial in range(10):
            nd = int(rng.integers(1, 4))
            shape = tuple(int(s) for s in rng.integers(1, 6, size=nd))
            if dt == "pred":
                x = rng.random(shape) < 0.5
            elif dt in INTS:
                x = rng.integers(0, 4, size=shape).astype(NPDT[dt])
            else:
                x = rng.integers(-3, 3, size=shape).astype(np.float64)
                x[rng.random(shape) < 0.1] = np.nan
                x = x.astype(np.float32)
            e = array(x, dt)
            if nd >= 2 and trial % 2:
                perm = list(rng.permutation(nd))
                e = transpose(e, perm)
                x = np.transpose(x, perm)
            for op in (0, 1):
                for tie_high in (False, True):
                    keep = bool(rng.integers(0, 2))
                    all_axes = trial % 3 == 0
                    axis = int(rng.integers(-nd, nd))
                    o = ArgOpts(axis, all_axes, keep, tie_high,
                                DTYPES.index("s32") if trial % 2 else 0)
                    got = read(call("em_argreduce", op, e, C.byref(o)))
                    want = argref(x, None if all_axes else axis % nd, op,
                                  tie_high, keep)
                    assert got.shape == want.shape, (dt, shape, got.shape)
                    assert np.array_equal(got, want), \
                        (dt, trial, op, tie_high, all_axes, axis, x, got, want)


def test_argreduce_large_and_errors():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(1_000_003).astype(np.float32)
    x[777_777] = 50.0
    x[999_999] = 50.0
    o = ArgOpts(0, True, False, False, 0)
    assert call("em_argreduce", 0, array(x, "f32"), C.byref(o)).numpy() == 777_777
    o.tie_high = True
    assert call("em_argreduce", 0, array(x, "f32"), C.byref(o)).numpy() == 999_999
    x[500_000] = np.nan
    x[900_000] = np.nan
    assert call("em_argreduce", 1, array(x, "f32"), C.byref(o)).numpy() == 500_000
    for bad in (ArgOpts(0, False, False, False, DTYPES.index("f32")),
                ArgOpts(3, False, False, False, 0)):
        try:
            call("em_argreduce", 0, array(np.zeros((2, 3)), "f32"),
                 C.byref(bad))
            raise AssertionError("accepted")
        except EmilyError as err:
            assert "argmax" in err.message
    try:
        call("em_argreduce", 0, array(np.zeros((2, 0)), "f32"),
             C.byref(ArgOpts(1, False, False, False, 0)))
        raise AssertionError("empty axis accepted")
    except EmilyError as err:
        assert "empty" in err.message
