"""Oracle tests for include/emily_fast.h: rms_norm, layer_norm, softmax and
rope against numpy in float64 on random shapes, every float dtype, both
rope pairings, base/scale and MLX-style freqs (periods: angle = scale * pos
/ freqs[i])."""
import ctypes as C

import numpy as np

from emily_ctypes import E, array, check, lib

P = C.c_void_p


class RopeOpts(C.Structure):
    _fields_ = [("dims", C.c_int64), ("traditional", C.c_bool),
                ("base", C.c_double), ("scale", C.c_double), ("freqs", P)]


lib.em_rms_norm.argtypes = [P, P, C.c_double, C.POINTER(P)]
lib.em_layer_norm.argtypes = [P, P, P, C.c_double, C.POINTER(P)]
lib.em_softmax.argtypes = [P, C.c_int, C.POINTER(P)]
lib.em_rope.argtypes = [P, P, C.POINTER(RopeOpts), C.POINTER(P)]
lib.em_transpose.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.POINTER(P)]

DTYPES = ["f64", "f32", "bf16", "f16"]
# output rounding of each dtype (relative to the row's scale) plus slack
TOL = {"f64": 1e-12, "f32": 2e-6, "bf16": 1.6e-2, "f16": 2e-3}


def run(fn, *args):
    out = P()
    check(fn(*args, C.byref(out)))
    return E(out.value)


def rounded(x, dtype):
    """The em_array of x in dtype and the float64 values it holds."""
    a = array(x, dtype)
    return a, a.numpy().astype(np.float64)


def close(got, want, tol, what):
    got = got.astype(np.float64)
    scale = np.maximum(1.0, np.abs(want))
    bad = ~(np.abs(got - want) <= tol * scale)
    assert not bad.any(), (what, got[bad][:5], want[bad][:5])


def ref_rms(x, w, eps):
    r = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * r * (1 if w is None else w)


def ref_layer(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def ref_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def ref_rope(x, offset, dims, traditional, base, scale, freqs):
    L = x.shape[-2]
    half = dims // 2
    inv = (1 / freqs.astype(np.float64) if freqs is not None
           else base ** (-2.0 * np.arange(half) / dims))
    theta = scale * (offset + np.arange(L))[:, None] * inv[None, :]
    c, s = np.cos(theta), np.sin(theta)
    y = x.copy()
    if traditional:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        y[..., 0:dims:2] = a * c - b * s
        y[..., 1:dims:2] = a * s + b * c
    else:
        a, b = x[..., :half], x[..., half:dims]
        y[..., :half] = a * c - b * s
        y[..., half:dims] = a * s + b * c
    return y


def random_shape(rng, min_rank=1):
    n = int(rng.integers(min_rank, 4))
    shape = [int(v) for v in rng.integers(1, 6, n)]
    shape[-1] = int(rng.choice([1, 3, 16, 33, 100, 257]))
    return tuple(shape)


def test_rms_norm_random():
    rng = np.random.default_rng(11)
    for case in range(40):
        dt = DTYPES[case % 4]
        shape = random_shape(rng)
        x, xv = rounded(rng.normal(0, 2, shape), dt)
        eps = float(rng.choice([0.0, 1e-6, 1e-2]))
        use_w = case % 3 != 0
        w, wv = rounded(rng.normal(1, 0.5, shape[-1]), dt) if use_w else (None, None)
        y = run(lib.em_rms_norm, x.ptr, w.ptr if w else None, eps)
        assert y.dtype == dt
        close(y.numpy(), ref_rms(xv, wv, eps), TOL[dt], ("rms_norm", dt, shape))


def test_layer_norm_random():
    rng = np.random.default_rng(12)
    for case in range(40):
        dt = DTYPES[case % 4]
        shape = random_shape(rng)
        x, xv = rounded(rng.normal(0.5, 2, shape), dt)
        eps = float(rng.choice([1e-5, 1e-2]))
        w, wv = rounded(rng.normal(1, 0.5, shape[-1]), dt) if case % 2 else (None, None)
        b, bv = rounded(rng.normal(0, 0.5, shape[-1]), dt) if case % 3 else (None, None)
        y = run(lib.em_layer_norm, x.ptr, w.ptr if w else None,
                b.ptr if b else None, eps)
        close(y.numpy(), ref_layer(xv, wv, bv, eps), TOL[dt], ("layer_norm", dt, shape))


def test_softmax_random():
    rng = np.random.default_rng(13)
    for case in range(48):
        dt = DTYPES[case % 4]
        shape = random_shape(rng)
        raw = rng.normal(0, 4, shape)
        if case % 5 == 0:  # a masked (-inf) stretch, never a whole row
            raw[..., : shape[-1] // 2] = -np.inf
        x, xv = rounded(raw, dt)
        axis = int(rng.integers(-len(shape), len(shape))) if case % 4 == 1 else -1
        if case % 5 == 0:
            axis = -1
        y = run(lib.em_softmax, x.ptr, axis)
        close(y.numpy(), ref_softmax(xv, axis), TOL[dt], ("softmax", dt, shape, axis))


def test_softmax_long_rows_and_large_values():
    rng = np.random.default_rng(14)
    for dt in ["f32", "f64"]:
        x, xv = rounded(rng.normal(0, 1, (3, 4099)) * 30 + 500, dt)
        y = run(lib.em_softmax, x.ptr, -1)
        close(y.numpy(), ref_softmax(xv, -1), TOL[dt], ("softmax long", dt))


def test_rope_random():
    rng = np.random.default_rng(15)
    for case in range(48):
        dt = DTYPES[case % 4]
        shape = tuple(int(v) for v in rng.integers(1, 4, 2)) + (
            int(rng.integers(1, 9)), int(rng.choice([4, 8, 12, 64])))
        D = shape[-1]
        dims = int(rng.choice([d for d in (2, 4, 8, D) if d <= D]))
        traditional = bool(case % 2)
        base = float(rng.choice([10000.0, 500000.0, 10.0]))
        scale = float(rng.choice([1.0, 0.25, 2.0]))
        offset = int(rng.integers(0, 5000))
        x, xv = rounded(rng.normal(0, 1, shape), dt)
        freqs = None
        if case % 3 == 0:
            fv = (base ** (2.0 * np.arange(dims // 2) / dims)
                  * rng.uniform(1, 8, dims // 2)).astype(np.float32)
            freqs = array(fv, "f32")
        off = array(np.array(offset), "s64" if case % 4 < 2 else "s32")
        o = RopeOpts(dims, traditional, base, scale, freqs.ptr if freqs else None)
        y = run(lib.em_rope, x.ptr, off.ptr, C.byref(o))
        want = ref_rope(xv, offset, dims, traditional, base, scale,
                        fv if freqs else None)
        # angles are exact in double; f32 carries their cos/sin rounding
        tol = max(TOL[dt], 1e-6)
        close(y.numpy(), want, tol, ("rope", dt, shape, dims, traditional))


def test_rope_transposed_input():
    rng = np.random.default_rng(16)
    xv = rng.normal(0, 1, (5, 2, 3, 8))  # (seq, batch, heads, D)
    x = array(xv, "f64")
    perm = (C.c_int * 4)(1, 2, 0, 3)  # -> (batch, heads, seq, D), strided
    xt = run(lib.em_transpose, x.ptr, perm, 4)
    off = array(np.array(7), "s32")
    o = RopeOpts(8, False, 10000.0, 1.0, None)
    y = run(lib.em_rope, xt.ptr, off.ptr, C.byref(o))
    want = ref_rope(np.transpose(xv, (1, 2, 0, 3)), 7, 8, False, 10000.0, 1.0, None)
    close(y.numpy(), want, 1e-12, "rope transposed")
