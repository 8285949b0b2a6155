"""Fits the polynomial coefficients of the f32 erf / erfc / erf_inv kernels in
src/engine/ops/unary.c, and prints them as C float literals.

    /usr/bin/python3 scripts/fit_erf.py

Each fit minimises the maximum RELATIVE error of a polynomial over its range
(Lawson's iteratively reweighted least squares on a dense Chebyshev-spaced
grid, which converges to the minimax polynomial), against mpmath references
at 50 digits. Coefficients are then rounded to float one at a time, lowest
degree first, refitting the remaining higher ones after each rounding, so the
rounding error of a coefficient is absorbed by the ones after it. The printed
"max rel err" is that of the float coefficients evaluated in double; the
kernels' ulp errors (float arithmetic included) are measured by the C test
elementwise_erf_ulp.

Functions fitted (x >= 0, y in [0, 1)):
  erf_small   erf(x) = x + x * Pm(x^2)                  x in [0, 0.875]
  erfc_tail   erfc(x) = exp(-x^2) * Q(t), t = 1/(1 + x/2), x in [0.5, 10.1]
              (erf's tail, where only an absolute error counts)
  erfc_mid    erfc(x) = exp(-x^2) * C(x - 1.25),             x in [0.5, 2]
  erfc_far    erfc(x) = exp(-x^2) * u G(u^2), u = 1/x,        x in [2, 10.1]
  log1p       log1p(f) = f + f^2 R(f)        f in [sqrt(1/2) - 1, sqrt(2) - 1]
  erfinv_mid  erfinv(y) = y + y * M(w), w = -log((1-y)(1+y)) in [0, 5]
  erfinv_tail erfinv(y) = y * B(sqrt(w) - 3.25),            w in [5, 16.7]
(16.7 > 24 ln 2: the largest w of a float y below 1.)
"""
import numpy as np
from mpmath import mp, mpf

mp.dps = 50


def lawson(u, target, weight, degree, fixed=()):
    """Coefficients c (lowest first) of sum c_k u^k ~ target, minimising the
    max of |weight * (poly - target)|; the first len(fixed) coefficients are
    given."""
    nf = len(fixed)
    rhs = target - sum(c * u ** k for k, c in enumerate(fixed))
    V = np.stack([u ** k for k in range(nf, degree + 1)], axis=1) * weight[:, None]
    b = rhs * weight
    lw = np.ones_like(u) / len(u)
    for _ in range(400):
        sw = np.sqrt(lw)
        c, *_ = np.linalg.lstsq(V * sw[:, None], b * sw, rcond=None)
        err = np.abs(V @ c - b)
        lw = lw * err
        lw /= lw.sum()
    return list(fixed) + list(c)


def fit(name, u, target, weight, degree):
    """Fit, round to float lowest first, report the error."""
    coeffs = []
    for k in range(degree + 1):
        c = lawson(u, target, weight, degree, coeffs)
        coeffs.append(float(np.float32(c[k])))
    poly = sum(c * u ** k for k, c in enumerate(coeffs))
    err = np.max(np.abs((poly - target) * weight))
    print(f"/* {name}: degree {degree}, max rel err {err:.3g} */")
    print(",\n".join("%.9ef" % c for c in coeffs))
    print()
    return coeffs


def grid(a, b, n=4000):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / n)


def vec(f, xs):
    return np.array([float(f(mpf(float(x)))) for x in xs])


def erfinv_over_y(w):
    """erfinv(y) / y at the y where w = -log(1 - y^2)."""
    y = mp.sqrt(-mp.expm1(-w))
    return mp.erfinv(y) / y


def main():
    # erf(x) = x + x * Pm(x^2): Pm(s) = erf(sqrt(s)) / sqrt(s) - 1, so that
    # 2/sqrt(pi)'s rounding to float costs nothing near 0.
    s = grid(0.0, 0.875 ** 2)
    s[s == 0] = 1e-30
    p = vec(lambda s: mp.erf(mp.sqrt(s)) / mp.sqrt(s), s)
    fit("erf_small Pm(s)", s, p - 1, 1 / p, 6)

    # erfc(x) exp(x^2) as a polynomial in t = 1 / (1 + x/2).
    x = grid(0.5, 10.1)
    t = 1 / (1 + x / 2)
    q = vec(lambda x: mp.erfc(x) * mp.exp(x * x), x)
    fit("erfc_tail Q(t)", t, q, 1 / q, 9)

    # erfc alone, where a relative error is what counts: erfcx(x) =
    # erfc(x) exp(x^2) by a polynomial in the exact x - 1.25 on [0.5, 2],
    # and as u G(u^2), u = 1/x, on [2, 10.1] (t above is rounded, and Q is
    # twice as sensitive to t's rounding as to x's).
    x = grid(0.5, 2.0)
    q = vec(lambda x: mp.erfc(x) * mp.exp(x * x), x)
    fit("erfc_mid C(x - 1.25)", x - 1.25, q, 1 / q, 9)
    x = grid(2.0, 10.1)
    g = vec(lambda x: mp.erfc(x) * mp.exp(x * x) * x, x)
    fit("erfc_far G(1/x^2)", 1 / x ** 2, g, 1 / g, 7)

    # log1p(f) = f + f^2 R(f), f in [sqrt(1/2) - 1, sqrt(2) - 1].
    f = grid(np.sqrt(0.5) - 1, np.sqrt(2) - 1)
    f[np.abs(f) < 1e-12] = 1e-12
    lf = vec(mp.log1p, f)
    r = vec(lambda f: (mp.log1p(f) - f) / f ** 2, f)
    fit("log1p R(f)", f, r, f * f / np.abs(lf), 8)

    # erfinv(y) = y + y * M(w), w = -log(1 - y^2) in [0, 5].
    w = grid(0.0, 5.0)
    w[w == 0] = 1e-30
    a = vec(erfinv_over_y, w)
    fit("erfinv_mid M(w)", w, a - 1, 1 / a, 9)

    # erfinv(y) = y * B(sqrt(w) - 3.25), w in [5, 16.7].
    r = grid(np.sqrt(5.0), np.sqrt(16.7))
    b = vec(lambda r: erfinv_over_y(r * r), r)
    fit("erfinv_tail B(sqrt(w) - 3.25)", r - 3.25, b, 1 / b, 9)


if __name__ == "__main__":
    main()
