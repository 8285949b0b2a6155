"""Oracle tests for include/emily_conv.h against a float64 numpy direct
convolution (a loop over kernel offsets, einsum over channels)."""
import ctypes as C

import numpy as np

from emily_ctypes import MAX_NDIM, E, array, check, lib

P = C.c_void_p
I64xN = C.c_int64 * MAX_NDIM


class Opts(C.Structure):
    _fields_ = [("strides", I64xN), ("pad_low", I64xN), ("pad_high", I64xN),
                ("input_dilation", I64xN), ("kernel_dilation", I64xN),
                ("feature_groups", C.c_int64), ("batch_groups", C.c_int64)]


lib.em_transpose.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.POINTER(P)]
lib.em_slice.argtypes = [P, C.POINTER(C.c_int64), C.POINTER(C.c_int64), C.POINTER(C.c_int64), C.POINTER(P)]
lib.em_conv.argtypes = [P, P, C.POINTER(Opts), C.POINTER(P)]


def conv(x, k, strides, pad, idil, kdil, fg=1, bg=1):
    o = Opts()
    for i in range(len(strides)):
        o.strides[i] = strides[i]
        o.pad_low[i], o.pad_high[i] = pad[i]
        o.input_dilation[i] = idil[i]
        o.kernel_dilation[i] = kdil[i]
    o.feature_groups = fg
    o.batch_groups = bg
    out = P()
    check(lib.em_conv(x.ptr, k.ptr, C.byref(o), C.byref(out)))
    return E(out.value)


def ref_conv(x, k, strides, pad, idil, kdil, fg=1, bg=1):
    """float64 direct convolution with Nx/XLA semantics."""
    N, Cin = x.shape[:2]
    O, Cg = k.shape[:2]
    ns = x.ndim - 2
    # dilate the input
    dshape = [N, Cin] + [(d - 1) * idil[i] + 1 if d > 0 else 0 for i, d in enumerate(x.shape[2:])]
    xd = np.zeros(dshape, dtype=x.dtype)
    xd[(slice(None), slice(None)) + tuple(slice(None, None, idil[i]) for i in range(ns))] = x
    # pad (negative crops)
    pads = [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in pad]
    xp = np.pad(xd, pads)
    crop = (slice(None), slice(None)) + tuple(
        slice(max(-lo, 0), xp.shape[2 + i] - max(-hi, 0)) for i, (lo, hi) in enumerate(pad))
    xp = xp[crop]
    ks = k.shape[2:]
    K = [(ks[i] - 1) * kdil[i] + 1 for i in range(ns)]
    outs = [max((xp.shape[2 + i] - K[i]) // strides[i] + 1, 0) if xp.shape[2 + i] >= K[i] else 0 for i in range(ns)]
    T = fg * bg
    Og = O // T
    out = np.zeros([N // bg, O] + outs, dtype=np.result_type(x, k))
    for t in range(T):
        ks_ = k[t * Og:(t + 1) * Og]
        for n in range(N // bg):
            nb = n + (t * (N // bg) if bg > 1 else 0)
            c0 = t * Cg if fg > 1 else 0
            xi = xp[nb, c0:c0 + Cg]
            acc = np.zeros([Og] + outs, dtype=out.dtype)
            for kk in np.ndindex(*ks):
                sl = tuple(slice(kk[i] * kdil[i], kk[i] * kdil[i] + (outs[i] - 1) * strides[i] + 1, strides[i])
                           for i in range(ns))
                patch = xi[(slice(None),) + sl]  # [Cg, outs...]
                acc += np.einsum("oc,c...->o...", ks_[(slice(None), slice(None)) + kk], patch)
            out[n, t * Og:(t + 1) * Og] = acc
    return out


def random_case(rng, ns):
    fg = bg = 1
    mode = rng.integers(0, 3)
    if mode == 1:
        fg = int(rng.integers(1, 4))
    elif mode == 2:
        bg = int(rng.integers(1, 4))
    N = int(rng.integers(1, 3)) * bg
    Cg = int(rng.integers(1, 4))
    Cin = Cg * fg
    O = int(rng.integers(1, 3)) * fg * bg
    sp = [int(rng.integers(1, 7)) for _ in range(ns)]
    ks = [int(rng.integers(1, 4)) for _ in range(ns)]
    strides = [int(rng.integers(1, 3)) for _ in range(ns)]
    idil = [int(rng.integers(1, 3)) for _ in range(ns)]
    kdil = [int(rng.integers(1, 3)) for _ in range(ns)]
    pad = [(int(rng.integers(-1, 3)), int(rng.integers(0, 3))) for _ in range(ns)]
    x = rng.normal(size=[N, Cin if bg == 1 else Cg] + sp)
    k = rng.normal(size=[O, Cg] + ks)
    if bg > 1:
        x = rng.normal(size=[N, Cg] + sp)
    return x, k, strides, pad, idil, kdil, fg, bg


def test_conv_random_f64_f32():
    rng = np.random.default_rng(7)
    done = 0
    while done < 60:
        ns = int(rng.integers(0, 4))
        x, k, strides, pad, idil, kdil, fg, bg = random_case(rng, ns)
        try:
            want = ref_conv(x, k, strides, pad, idil, kdil, fg, bg)
        except ValueError:
            continue
        for dt, tol in (("f64", 1e-10), ("f32", 1e-4)):
            got = conv(array(x, dt), array(k, dt), strides, pad, idil, kdil, fg, bg).numpy()
            assert got.shape == want.shape, (got.shape, want.shape, x.shape, k.shape, strides, pad, idil, kdil, fg, bg)
            assert np.allclose(got, want, rtol=tol, atol=tol), (dt, x.shape, k.shape, strides, pad, idil, kdil, fg, bg)
        done += 1


def test_conv_dtypes():
    rng = np.random.default_rng(8)
    x = rng.integers(-3, 4, (2, 4, 5, 6)).astype(np.float64)
    k = rng.integers(-3, 4, (6, 2, 3, 2)).astype(np.float64)
    args = ([2, 1], [(1, 1), (0, 1)], [1, 1], [1, 2], 2, 1)
    want = ref_conv(x, k, *args)
    for dt in ["f16", "bf16", "f32", "f64", "s8", "s16", "s32", "s64", "u8"]:
        xx, kk, w = (x, k, want) if dt != "u8" else (np.abs(x), np.abs(k), ref_conv(np.abs(x), np.abs(k), *args))
        got = conv(array(xx, dt), array(kk, dt), *args).numpy().astype(np.float64)
        if dt == "s8":
            w = w.astype(np.int64).astype(np.int8)
        if dt == "u8":
            w = w.astype(np.int64).astype(np.uint8)
        assert np.allclose(got, w, rtol=1e-2), dt
    z = rng.normal(size=(2, 4, 5)) + 1j * rng.normal(size=(2, 4, 5))
    kz = rng.normal(size=(3, 4, 2)) + 1j * rng.normal(size=(3, 4, 2))
    want = ref_conv(z, kz, [1], [(1, 0)], [1], [1])
    for dt, tol in (("c64", 1e-4), ("c128", 1e-10)):
        got = conv(array(z, dt), array(kz, dt), [1], [(1, 0)], [1], [1]).numpy()
        assert np.allclose(got, want, rtol=tol, atol=tol), dt


def test_conv_strided_inputs():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(6, 5, 3, 2))  # will be transposed to (2, 3, 5, 6)
    k = rng.normal(size=(3, 2, 4, 3))  # transposed to (4, 3, 2, 3)... use kernel (4, 3, 3, 2) below
    a = array(x, "f32")
    perm = (C.c_int * 4)(3, 2, 1, 0)
    t = P()
    check(lib.em_transpose(a.ptr, perm, 4, C.byref(t)))
    t = E(t.value)
    kk = rng.normal(size=(4, 3, 3, 2))
    kb = array(kk, "f32")
    sl = P()
    start = (C.c_int64 * 4)(0, 0, 0, 0)
    stop = (C.c_int64 * 4)(4, 3, 3, 2)
    st = (C.c_int64 * 4)(1, 1, 2, 1)
    check(lib.em_slice(kb.ptr, start, stop, st, C.byref(sl)))
    sl = E(sl.value)  # (4, 3, 2, 2)
    got = conv(t, sl, [1, 2], [(1, 1), (1, 0)], [1, 1], [1, 1]).numpy()
    want = ref_conv(x.transpose(3, 2, 1, 0), kk[:, :, ::2, :], [1, 2], [(1, 1), (1, 0)], [1, 1], [1, 1])
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4)


def test_conv_errors():
    x = array(np.zeros((1, 4, 5)), "f32")
    k = array(np.zeros((2, 3, 2)), "f32")
    o = Opts()
    out = P()
    assert lib.em_conv(x.ptr, k.ptr, C.byref(o), C.byref(out)) == 1
    assert b"conv" in lib.em_last_error()
    k2 = array(np.zeros((2, 4, 2)), "f64")
    assert lib.em_conv(x.ptr, k2.ptr, C.byref(o), C.byref(out)) == 1
