"""Oracle tests for em_sort and em_argsort against numpy.

Values are compared with np.sort (NaN last, as Nx); indices with numpy's
stable argsort (kind="stable") ascending, and with a stable argsort of
negated ranks descending, on data without NaN (where the permutation is
unique). Inputs come in every real dtype, contiguous, transposed and
sliced, with rows short (insertion sort) and long (radix sort), many ties.
"""
import ctypes as C

import numpy as np

from emily_ctypes import DTYPES, EmilyError, call, lib, to_bf16_bits
from emily_ctypes import array

P = C.c_void_p
I64P = C.POINTER(C.c_int64)
lib.em_sort.argtypes = [P, C.c_int, C.c_bool, C.POINTER(P)]
lib.em_argsort.argtypes = [P, C.c_int, C.c_bool, C.c_int, C.POINTER(P)]
lib.em_transpose.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.POINTER(P)]
lib.em_slice.argtypes = [P, I64P, I64P, I64P, C.POINTER(P)]

REAL = ["pred", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
        "f16", "bf16", "f32", "f64"]
FLOATS = ["f16", "bf16", "f32", "f64"]
NPDT = {"pred": np.bool_, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
        "u64": np.uint64, "s8": np.int8, "s16": np.int16, "s32": np.int32,
        "s64": np.int64, "f16": np.float16, "f32": np.float32,
        "f64": np.float64}


def values(rng, shape, dt, nan):
    """Random values as the dtype holds them (bf16 as rounded float32).
    Few distinct values (many ties) half of the time."""
    ties = rng.random() < 0.5
    if dt == "pred":
        return rng.random(shape) < 0.5
    if dt in FLOATS:
        x = rng.standard_normal(shape) * 100
        if ties:
            x = np.round(x / 50)
        if nan:
            r = rng.random(shape)
            x = np.where(r < 0.05, np.nan, x)
            x = np.where((r >= 0.05) & (r < 0.08), np.inf, x)
            x = np.where((r >= 0.08) & (r < 0.11), -np.inf, x)
            x = np.where((r >= 0.11) & (r < 0.14), -0.0, x)
        if dt == "bf16":
            bits = to_bf16_bits(np.atleast_1d(x)).astype(np.uint32) << 16
            return bits.view(np.float32).reshape(np.shape(x))
        return x.astype(NPDT[dt])
    info = np.iinfo(NPDT[dt])
    if ties:
        lo, hi = max(int(info.min), -3), min(int(info.max), 3)
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(NPDT[dt])
    if dt == "u64":
        return rng.integers(0, 2**64 - 1, size=shape, dtype=np.uint64,
                            endpoint=True)
    return rng.integers(int(info.min), int(info.max), size=shape,
                        endpoint=True, dtype=np.int64).astype(NPDT[dt])


def transpose(e, perm):
    arr = (C.c_int * len(perm))(*perm)
    return call("em_transpose", e, arr, len(perm))


def slice_(e, start, stop, step):
    n = len(start)
    mk = lambda v: (C.c_int64 * max(1, n))(*v)
    return call("em_slice", e, mk(start), mk(stop), mk(step))


def random_case(rng, dt, nan, long_rows):
    nd = int(rng.integers(1, 4))
    if long_rows:
        shape = [int(rng.integers(1, 5)) for _ in range(nd)]
        shape[int(rng.integers(0, nd))] = int(rng.integers(49, 3000))
    else:
        shape = [int(rng.integers(0 if rng.random() < 0.1 else 1, 9))
                 for _ in range(nd)]
    shape = tuple(shape)
    x = values(rng, shape, dt, nan)
    e = array(x, dt)
    layout = rng.integers(0, 3) if nd >= 2 else rng.integers(0, 2) * 2
    if layout == 1:
        perm = [int(p) for p in rng.permutation(nd)]
        e = transpose(e, perm)
        x = np.transpose(x, perm)
    elif layout == 2:
        start = [int(rng.integers(0, 2)) if s > 1 else 0 for s in shape]
        step = [int(rng.integers(1, 3)) for _ in shape]
        e = slice_(e, start, list(shape), step)
        x = x[tuple(slice(a, None, b) for a, b in zip(start, step))]
    axis = int(rng.integers(0, nd))
    if rng.random() < 0.3:
        axis -= nd
    return e, np.ascontiguousarray(x), axis


def read(e):
    return e.numpy()


def same_values(got, want):
    if want.dtype.kind == "f":
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        return bool((((g == w) | (np.isnan(g) & np.isnan(w)))).all())
    return np.array_equal(got.astype(want.dtype), want)


def desc_stable_argsort(x, axis):
    """Stable descending argsort (x without NaN): ties keep index order."""
    _, inv = np.unique(x.ravel(), return_inverse=True)
    ranks = inv.reshape(x.shape).astype(np.int64)
    return np.argsort(-ranks, axis=axis, kind="stable")


def test_sort_random_every_dtype():
    rng = np.random.default_rng(2024)
    for dt in REAL:
        for trial in range(60):
            nan = dt in FLOATS and trial % 2 == 0
            e, x, axis = random_case(rng, dt, nan, long_rows=trial % 4 == 3)
            ctx = (dt, trial, x.shape, axis)
            asc = np.sort(x, axis=axis)  # NaN last, as Nx
            got = read(call("em_sort", e, axis, False))
            assert got.shape == x.shape, ctx
            assert same_values(got, asc), ctx
            # Descending: NaN first, then the values from the largest.
            got = read(call("em_sort", e, axis, True))
            # (np.sort puts NaN last, so its reverse puts NaN first.)
            desc = np.flip(np.sort(x, axis=axis), axis=axis)
            assert same_values(got, desc), ctx
            if x.dtype.kind == "f" and np.isnan(x).any():
                continue
            want = np.argsort(x, axis=axis, kind="stable")
            gi = read(call("em_argsort", e, axis, False, DTYPES.index("s64")))
            assert gi.dtype == np.int64 and np.array_equal(gi, want), ctx
            want = desc_stable_argsort(x, axis) if x.size else want
            gi = read(call("em_argsort", e, axis, True, DTYPES.index("s32")))
            assert gi.dtype == np.int32 and np.array_equal(gi, want), ctx


def test_argsort_nan_order():
    rng = np.random.default_rng(7)
    for dt in FLOATS:
        x = values(rng, (5, 200), dt, nan=True)
        e = array(x, dt)
        gi = read(call("em_argsort", e, 1, False, DTYPES.index("s64")))
        # numpy's stable argsort also puts NaN last, in index order.
        want = np.argsort(x.astype(np.float64), axis=1, kind="stable")
        # -0.0 and 0.0 tie in both; numpy's stable order agrees.
        assert np.array_equal(gi, want), dt
        gd = read(call("em_argsort", e, 1, True, DTYPES.index("s64")))
        for r in range(5):
            row = x[r].astype(np.float64)
            nan_idx = np.flatnonzero(np.isnan(row))
            assert np.array_equal(gd[r, :len(nan_idx)], nan_idx), dt
            rest = row[gd[r, len(nan_idx):]]
            assert (rest[:-1] >= rest[1:]).all(), dt


def test_sort_many_rows_threaded():
    rng = np.random.default_rng(99)
    for dt in ["s16", "f32", "u64", "f64"]:
        x = values(rng, (300, 700), dt, nan=False)
        e = array(x, dt)
        for axis in (0, 1):
            got = read(call("em_sort", e, axis, False))
            assert same_values(got, np.sort(x, axis=axis)), (dt, axis)
            gi = read(call("em_argsort", e, axis, False, DTYPES.index("s64")))
            assert np.array_equal(gi, np.argsort(x, axis=axis, kind="stable"))


def test_sort_rejects():
    x = array(np.zeros((2, 3)), "c64")
    for fn, args in (("em_sort", (0, False)),
                     ("em_argsort", (0, False, DTYPES.index("s64")))):
        try:
            call(fn, x, *args)
            raise AssertionError(fn + " accepted complex")
        except EmilyError as err:
            assert err.status == 1 and "complex" in err.message
    y = array(np.zeros((2, 3)), "f32")
    try:
        call("em_sort", y, 2, False)
        raise AssertionError("axis 2 accepted")
    except EmilyError as err:
        assert "out of range" in err.message
