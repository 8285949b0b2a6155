"""Oracle tests for em_fft against numpy.fft (complex128 reference)."""
import ctypes as C

import numpy as np

from emily_ctypes import E, EmilyError, array, check, lib

P = C.c_void_p
lib.em_fft.argtypes = [P, C.c_int, C.c_int64, C.c_int, C.c_double, C.POINTER(P)]
lib.em_transpose.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.POINTER(P)]

FORWARD, INVERSE, RFFT, IRFFT = 0, 1, 2, 3
TOL = {"c64": 1e-5, "f32": 1e-5, "c128": 1e-12, "f64": 1e-12}


def fft(e, axis, n, mode):
    out = P()
    check(lib.em_fft(e.ptr, axis, n, mode, 0.0, C.byref(out)))
    return E(out.value)


def rand(rng, shape, dt):
    x = rng.standard_normal(shape)
    if dt.startswith("c"):
        x = x + 1j * rng.standard_normal(shape)
    return x


def close(got, want, tol, what):
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err <= tol * scale * 4, f"{what}: error {err} (scale {scale})"


def test_fft_every_length_1_to_64():
    rng = np.random.default_rng(1)
    for dt in ["c64", "c128", "f32", "f64"]:
        for n in range(1, 65):
            x = rand(rng, (3, n), dt)
            xe = array(x, dt)
            xq = xe.numpy().astype(np.complex128)
            close(fft(xe, -1, n, FORWARD).numpy(), np.fft.fft(xq), TOL[dt], f"fft {dt} {n}")
            close(fft(xe, 1, n, INVERSE).numpy(), np.fft.ifft(xq), TOL[dt], f"ifft {dt} {n}")


def test_fft_large_primes_and_powers_of_two():
    rng = np.random.default_rng(2)
    for n in [127, 257, 1009, 4093, 1024, 4096, 65536, 3 * 1024, 1000, 10007]:
        for dt in ["c64", "c128"]:
            x = rand(rng, (n,), dt)
            xe = array(x, dt)
            xq = xe.numpy().astype(np.complex128)
            got = fft(xe, 0, n, FORWARD).numpy()
            want = np.fft.fft(xq)
            rel = np.linalg.norm(got - want) / np.linalg.norm(want)
            assert rel < (3e-6 if dt == "c64" else 1e-13), (n, dt, rel)
            back = fft(array(got, dt), 0, n, INVERSE).numpy()
            assert np.linalg.norm(back - xq) / np.linalg.norm(xq) < (3e-6 if dt == "c64" else 1e-13)


def test_fft_length_pads_and_crops_and_axis():
    rng = np.random.default_rng(3)
    x = rand(rng, (4, 5, 6), "c128")
    xe = array(x, "c128")
    for axis in [0, 1, 2, -1]:
        for n in [1, 3, 6, 8, 11]:
            close(fft(xe, axis, n, FORWARD).numpy(), np.fft.fft(x, n=n, axis=axis), 1e-12, "fwd")
            close(fft(xe, axis, n, INVERSE).numpy(), np.fft.ifft(x, n=n, axis=axis), 1e-12, "inv")


def test_rfft_irfft():
    rng = np.random.default_rng(4)
    for dt, cdt in [("f32", "c64"), ("f64", "c128")]:
        for n in [1, 2, 5, 8, 9, 16, 31]:
            x = rand(rng, (2, 7), dt)
            xe = array(x, dt)
            xq = xe.numpy().astype(np.float64)
            r = fft(xe, -1, n, RFFT)
            assert r.dtype == cdt and r.shape == (2, n // 2 + 1)
            close(r.numpy(), np.fft.rfft(xq, n=n), TOL[dt], f"rfft {n}")
            spec = rand(rng, (2, 5), cdt)
            se = array(spec, cdt)
            got = fft(se, -1, n, IRFFT)
            assert got.dtype == dt and got.shape == (2, n)
            close(got.numpy(), np.fft.irfft(se.numpy().astype(np.complex128), n=n), TOL[dt], f"irfft {n}")


def test_fft_strided_input():
    rng = np.random.default_rng(5)
    x = rand(rng, (6, 10), "c64")
    xe = array(x, "c64")
    t = P()
    check(lib.em_transpose(xe.ptr, (C.c_int * 2)(1, 0), 2, C.byref(t)))
    te = E(t.value)
    close(fft(te, -1, 6, FORWARD).numpy(), np.fft.fft(xe.numpy().T.astype(np.complex128)), 1e-5, "strided")


def test_fft_errors():
    for args, msg in [((array(np.zeros(3), "s32"), 0, 3, 0), "expected an f32"),
                      ((array(np.zeros(3), "c64"), 0, 0, 0), "length must be positive"),
                      ((array(np.zeros(3), "c64"), 2, 3, 0), "axis")]:
        try:
            fft(*args)
            raise AssertionError("expected an error")
        except EmilyError as e:
            assert msg in e.message, e.message
