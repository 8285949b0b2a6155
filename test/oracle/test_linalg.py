"""Oracle tests for the LAPACK ops (include/emily_linalg.h) against
numpy.linalg, plus reconstruction checks (Q·R = A, L·Lᴴ = A, P·L·U = A,
U·S·Vt = A, V·diag(w)·Vᴴ = A)."""
import ctypes as C

import numpy as np

from emily_ctypes import E, EmilyError, array, check, lib

P = C.c_void_p
PP = C.POINTER(P)
for name, args in {
    "em_cholesky": [P, PP], "em_invert": [P, PP], "em_determinant": [P, PP],
    "em_qr": [P, C.c_bool, PP, PP], "em_lu": [P, PP, PP, PP],
    "em_eigh": [P, PP, PP], "em_svd": [P, C.c_bool, PP, PP, PP],
    "em_solve": [P, P, PP],
    "em_triangular_solve": [P, P, C.c_bool, C.c_bool, C.c_bool, PP],
    "em_transpose": [P, C.POINTER(C.c_int), C.c_int, PP],
}.items():
    getattr(lib, name).argtypes = args

DTYPES = ["f32", "f64", "c64", "c128"]
TOL = {"f32": 2e-4, "c64": 2e-4, "f64": 1e-10, "c128": 1e-10}


def op(name, *args, nout=1):
    outs = [P() for _ in range(nout)]
    conv = [a.ptr if isinstance(a, E) else a for a in args]
    check(getattr(lib, name)(*conv, *[C.byref(o) for o in outs]))
    res = [E(o.value).numpy() for o in outs]
    return res[0] if nout == 1 else res


def rand(rng, shape, dt):
    x = rng.standard_normal(shape)
    if dt.startswith("c"):
        x = x + 1j * rng.standard_normal(shape)
    return x


def close(got, want, dt, what):
    scale = max(1.0, float(np.max(np.abs(want))) if np.size(want) else 1.0)
    err = float(np.max(np.abs(got - want))) if np.size(want) else 0.0
    assert err <= TOL[dt] * scale, f"{what} {dt}: error {err}"


def H(x):
    return np.conj(np.swapaxes(x, -1, -2))


def test_cholesky_reconstructs_and_matches_numpy():
    rng = np.random.default_rng(1)
    for dt in DTYPES:
        for shape in [(1, 1), (4, 4), (2, 3, 5, 5)]:
            x = rand(rng, shape, dt)
            a = x @ H(x) + shape[-1] * np.eye(shape[-1])
            ae = array(a, dt)
            a64 = ae.numpy().astype(np.complex128)
            l = op("em_cholesky", ae)
            close(l, np.linalg.cholesky(a64), dt, "cholesky")
            close(l @ H(l), a64, dt, "L·Lᴴ")
    try:
        op("em_cholesky", array(np.array([[1.0, 2.0], [2.0, 1.0]]), "f32"))
        raise AssertionError("expected an error")
    except EmilyError as e:
        assert "not positive definite" in e.message


def test_qr_reduced_and_complete():
    rng = np.random.default_rng(2)
    for dt in DTYPES:
        for shape in [(4, 4), (5, 3), (3, 5), (2, 6, 4), (0, 3), (3, 0)]:
            a = rand(rng, shape, dt)
            ae = array(a, dt)
            a64 = ae.numpy().astype(np.complex128)
            for complete in [False, True]:
                q, r = op("em_qr", ae, complete, nout=2)
                m, n = shape[-2:]
                k = min(m, n)
                assert q.shape[-2:] == ((m, m) if complete else (m, k))
                assert r.shape[-2:] == ((m, n) if complete else (k, n))
                close(q @ r, a64, dt, "Q·R")
                close(H(q) @ q, np.eye(q.shape[-1]), dt, "QᴴQ")
                close(np.tril(r, -1), np.zeros(r.shape), dt, "R upper")
                if not dt.startswith("c") and k > 0:  # R's diagonal is numpy's up to sign
                    rw = np.linalg.qr(a64.real, mode="complete" if complete else "reduced")[1]
                    close(np.abs(r), np.abs(rw), dt, "|R|")


def test_lu_reconstructs():
    rng = np.random.default_rng(3)
    for dt in DTYPES:
        for shape in [(1, 1), (5, 5), (3, 4, 4)]:
            a = rand(rng, shape, dt)
            ae = array(a, dt)
            a64 = ae.numpy().astype(np.complex128)
            p, l, u = op("em_lu", ae, nout=3)
            close(p @ l @ u, a64, dt, "P·L·U")
            close(np.triu(l, 1), np.zeros(l.shape), dt, "L lower")
            close(np.tril(u, -1), np.zeros(u.shape), dt, "U upper")
            assert np.all(np.sum(p, axis=-1) == 1) and np.all(np.sum(p, axis=-2) == 1)


def test_determinant_invert_solve():
    rng = np.random.default_rng(4)
    for dt in DTYPES:
        for shape in [(1, 1), (3, 3), (2, 3, 6, 6)]:
            a = rand(rng, shape, dt) + 3 * np.eye(shape[-1])
            ae = array(a, dt)
            a64 = ae.numpy().astype(np.complex128)
            close(op("em_determinant", ae), np.linalg.det(a64), dt, "det")
            close(op("em_invert", ae), np.linalg.inv(a64), dt, "inv")
            b = rand(rng, shape[:-1] + (2,), dt)
            be = array(b, dt)
            close(op("em_solve", ae, be), np.linalg.solve(a64, be.numpy()), dt, "solve")
            bv = rand(rng, shape[:-1], dt)
            bve = array(bv, dt)
            close(op("em_solve", ae, bve), np.linalg.solve(a64, bve.numpy()[..., None])[..., 0], dt, "solve vec")
    sing = array(np.array([[1.0, 2.0], [2.0, 4.0]]), "f64")
    assert op("em_determinant", sing) == 0
    assert np.all(np.isnan(op("em_invert", sing)))
    try:
        op("em_solve", sing, array(np.ones(2), "f64"))
        raise AssertionError("expected an error")
    except EmilyError as e:
        assert "singular" in e.message


def test_triangular_solve_all_options():
    rng = np.random.default_rng(5)
    for dt in DTYPES:
        a = rand(rng, (2, 4, 4), dt) + 4 * np.eye(4)
        for lower in [True, False]:
            t = np.tril(a) if lower else np.triu(a)
            ae = array(a, dt)  # the other triangle must be ignored
            t64 = np.tril(ae.numpy()) if lower else np.triu(ae.numpy())
            t64 = t64.astype(np.complex128)
            for trans in [False, True]:
                opa = np.swapaxes(t64, -1, -2) if trans else t64
                for left in [True, False]:
                    b = rand(rng, (2, 4, 3) if left else (2, 3, 4), dt)
                    be = array(b, dt)
                    b64 = be.numpy()
                    got = op("em_triangular_solve", ae, be, left, lower, trans)
                    want = np.linalg.solve(opa, b64) if left else np.swapaxes(
                        np.linalg.solve(np.swapaxes(opa, -1, -2), np.swapaxes(b64, -1, -2)), -1, -2)
                    close(got, want, dt, f"trsolve left={left} lower={lower} trans={trans}")
                    bv = array(rand(rng, (2, 4), dt), dt)
                    got = op("em_triangular_solve", ae, bv, left, lower, trans)
                    m = opa if left else np.swapaxes(opa, -1, -2)
                    close(got, np.linalg.solve(m, bv.numpy()[..., None])[..., 0], dt, "trsolve vec")
            del t
    try:
        op("em_triangular_solve", array(np.zeros((2, 2)), "f32"), array(np.ones(2), "f32"), True, True, False)
        raise AssertionError("expected an error")
    except EmilyError as e:
        assert "singular" in e.message


def test_eigh_and_svd():
    rng = np.random.default_rng(6)
    for dt in DTYPES:
        x = rand(rng, (3, 5, 5), dt)
        a = x + H(x)
        ae = array(a, dt)
        a64 = ae.numpy().astype(np.complex128)
        w, v = op("em_eigh", ae, nout=2)
        close(w, np.linalg.eigvalsh(a64), dt, "eigenvalues")
        close(v @ (w[..., None] * H(v)), a64, dt, "V·diag(w)·Vᴴ")
    for dt in ["f32", "f64"]:
        for shape in [(4, 4), (5, 3), (3, 5), (2, 4, 6)]:
            a = rand(rng, shape, dt)
            ae = array(a, dt)
            a64 = ae.numpy().astype(np.float64)
            for full in [True, False]:
                u, s, vt = op("em_svd", ae, full, nout=3)
                close(s, np.linalg.svd(a64, compute_uv=False), dt, "singular values")
                k = min(shape[-2:])
                close((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], a64, dt, "U·S·Vt")
                close(u @ H(u), np.eye(u.shape[-2]) if full else u @ H(u), dt, "U orthogonal")
    try:
        op("em_svd", array(np.zeros((2, 2)), "c64"), True, nout=3)
        raise AssertionError("expected an error")
    except EmilyError as e:
        assert "f32 or f64" in e.message


def test_strided_input_and_errors():
    rng = np.random.default_rng(7)
    a = rand(rng, (4, 4), "f64") + 4 * np.eye(4)
    ae = array(a, "f64")
    t = P()
    check(lib.em_transpose(ae.ptr, (C.c_int * 2)(1, 0), 2, C.byref(t)))
    close(op("em_invert", E(t.value)), np.linalg.inv(a.T), "f64", "strided invert")
    for args, msg in [(("em_invert", array(np.zeros((2, 3)), "f32")), "square"),
                      (("em_invert", array(np.zeros(3), "f32")), "rank >= 2"),
                      (("em_invert", array(np.zeros((2, 2)), "s32")), "expected an f32"),
                      (("em_solve", array(np.zeros((2, 2)), "f32"), array(np.zeros(3), "f32")), "incompatible")]:
        try:
            op(*args)
            raise AssertionError("expected an error")
        except EmilyError as e:
            assert msg in e.message, e.message
