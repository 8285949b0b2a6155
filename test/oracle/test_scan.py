"""Oracle tests for em_scan (cumulative sum/product/max/min) against numpy."""
import ctypes as C

import numpy as np

from emily_ctypes import DTYPES, EmilyError, array, call, lib

P = C.c_void_p
lib.em_scan.argtypes = [C.c_int, P, C.c_int, C.c_bool, C.POINTER(P)]
lib.em_transpose.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.POINTER(P)]

OPS = ["sum", "product", "max", "min"]
NPF = {"sum": np.cumsum, "product": np.cumprod,
       "max": np.fmax.accumulate, "min": np.fmin.accumulate}
INTS = ["u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"]
FLOATS = ["f16", "bf16", "f32", "f64"]
CPX = ["c64", "c128"]
TOL = {"f16": 2e-2, "bf16": 1e-1, "f32": 1e-5, "f64": 1e-12, "c64": 1e-5,
       "c128": 1e-12}


def reference(op, x, axis, reverse):
    if reverse:
        x = np.flip(x, axis)
    if op in ("max", "min"):
        f = np.maximum.accumulate if op == "max" else np.minimum.accumulate
        y = f(x, axis=axis)  # propagates NaN, as Nx
    else:
        y = NPF[op](x, axis=axis, dtype=x.dtype)
    return np.flip(y, axis) if reverse else y


def scan(op, e, axis, reverse):
    return call("em_scan", OPS.index(op), e, axis, reverse)


def test_integers_exact_with_wrapping():
    rng = np.random.default_rng(1)
    for dt in INTS:
        npdt = np.dtype(dt.replace("u", "uint").replace("s", "int"))
        x = rng.integers(0, 200, size=(3, 5, 7)).astype(npdt)
        if dt.startswith("s"):
            x = (x.astype(np.int64) - 100).astype(npdt)
        for op in OPS:
            for axis in (0, 1, 2, -1):
                for rev in (False, True):
                    got = scan(op, array(x, dt), axis, rev).numpy()
                    with np.errstate(over="ignore"):
                        want = reference(op, x, axis, rev)
                    assert got.dtype == x.dtype, (dt, op)
                    assert np.array_equal(got, want), (dt, op, axis, rev)


def test_floats_and_complex_against_float64():
    rng = np.random.default_rng(2)
    for dt in FLOATS + CPX:
        x = rng.uniform(0.5, 1.5, size=(4, 6, 5))
        if dt in CPX:
            x = x + 1j * rng.uniform(-0.3, 0.3, size=x.shape)
        e = array(x, dt)
        # the reference runs on the values the dtype actually holds
        held = call("em_as_type", e, DTYPES.index("c128" if dt in CPX else "f64")).numpy()
        for op in OPS:
            if dt in CPX and op in ("max", "min"):
                try:
                    scan(op, e, 0, False)
                    raise AssertionError("complex max accepted")
                except EmilyError as err:
                    assert "real dtype" in err.message
                continue
            for axis in (0, 1, 2):
                for rev in (False, True):
                    got = scan(op, e, axis, rev).numpy().astype(held.dtype)
                    want = reference(op, held, axis, rev)
                    err = np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))
                    assert err <= TOL[dt], (dt, op, axis, rev, err)


lib.em_as_type.argtypes = [P, C.c_int, C.POINTER(P)]


def test_nan_propagation_matches_numpy_accumulate():
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, np.nan], [5.0, 0.0, 1.0]])
    for op in ("max", "min"):
        for axis in (0, 1):
            for rev in (False, True):
                got = scan(op, array(x, "f32"), axis, rev).numpy()
                want = reference(op, x.astype(np.float32), axis, rev)
                assert np.array_equal(got, want, equal_nan=True), (op, axis, rev)


def test_strided_views():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 7, 8))
    for perm in ((2, 0, 1), (1, 2, 0), (2, 1, 0)):
        pa = (C.c_int * 3)(*perm)
        v = call("em_transpose", array(x, "f64"), pa, 3)
        xt = np.transpose(x, perm)
        for op in ("sum", "max"):
            for axis in range(3):
                for rev in (False, True):
                    got = scan(op, v, axis, rev).numpy()
                    want = reference(op, xt, axis, rev)
                    assert np.allclose(got, want, rtol=1e-12, atol=1e-12), (perm, op, axis, rev)


def test_long_lanes_and_wide_rows():
    rng = np.random.default_rng(4)
    # One long lane (blocked parallel path) and a few lanes with a wide
    # vector axis (chunked rows).
    x = rng.standard_normal(3_000_001)
    got = scan("sum", array(x, "f64"), 0, False).numpy()
    want = np.cumsum(x)
    assert np.max(np.abs(got - want)) < 1e-8
    got = scan("max", array(x, "f64"), 0, True).numpy()
    assert np.array_equal(got, reference("max", x, 0, True))
    y = rng.integers(-5, 5, size=(70_000, 3)).astype(np.int32)
    for axis in (0, 1):
        got = scan("sum", array(y, "s32"), axis, False).numpy()
        assert np.array_equal(got, np.cumsum(y, axis=axis, dtype=np.int32))
    z = rng.integers(-5, 5, size=(3, 5000)).astype(np.int64)
    got = scan("sum", array(z, "s64"), 0, True).numpy()
    assert np.array_equal(got, reference("sum", z, 0, True))
