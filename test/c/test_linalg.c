/* test_linalg.c — the LAPACK ops on hand-computed matrices. */
#include "emily_linalg.h"
#include "test.h"

#include <complex.h>
#undef I /* a variable name below; complex literals use _Complex_I */

static em_array *f64m(const double *v, int64_t m, int64_t n) {
    int64_t shape[2] = {m, n};
    em_array *a = NULL;
    CHECK_OK(em_from_data(v, (size_t)(m * n) * sizeof(double), shape, 2, EM_F64, &a));
    return a;
}

EM_TEST(linalg_cholesky_det_invert_solve) {
    double a[4] = {4, 2, 2, 3};
    em_array *A = f64m(a, 2, 2), *L = NULL, *D = NULL, *I = NULL, *X = NULL;
    CHECK_OK(em_cholesky(A, &L));
    double l[4];
    CHECK_OK(em_read(L, l, sizeof l));
    CHECK_NEAR(l[0], 2, 1e-15);
    CHECK_NEAR(l[1], 0, 0);
    CHECK_NEAR(l[2], 1, 1e-15);
    CHECK_NEAR(l[3], sqrt(2), 1e-15);
    CHECK_OK(em_determinant(A, &D));
    double d;
    CHECK_OK(em_read(D, &d, sizeof d));
    CHECK_NEAR(d, 8, 1e-14);
    CHECK_OK(em_invert(A, &I));
    double inv[4];
    CHECK_OK(em_read(I, inv, sizeof inv));
    CHECK_NEAR(inv[0], 3.0 / 8, 1e-15);
    CHECK_NEAR(inv[1], -2.0 / 8, 1e-15);
    double b[2] = {6, 5};
    int64_t bs[1] = {2};
    em_array *B = NULL;
    CHECK_OK(em_from_data(b, sizeof b, bs, 1, EM_F64, &B));
    CHECK_OK(em_solve(A, B, &X));
    double x[2];
    CHECK_OK(em_read(X, x, sizeof x));
    CHECK_NEAR(x[0], 1, 1e-14);
    CHECK_NEAR(x[1], 1, 1e-14);
    em_array_release(A), em_array_release(L), em_array_release(D);
    em_array_release(I), em_array_release(X), em_array_release(B);
}

/* An exact inverse is exact on every CPU, zeros included: which zeros
 * LAPACK returns as -0.0 depends on the BLAS kernel set (OpenBLAS's SkylakeX
 * kernels gave a -0.0 here that Haswell's do not); the engine returns +0.0.
 * Compared bit for bit. */
EM_TEST(linalg_exact_inverse_has_no_negative_zero) {
    const double a[16] = {1, 2, 1, 1, 0, 1, 0, 1, 0, 0, 1, 1, 0, 0, 0, 1};
    const double want[16] = {1, -2, -1, 2, 0, 1, 0, -1, 0, 0, 1, -1, 0, 0, 0, 1};
    for (int dt = 0; dt < 2; dt++) {
        em_dtype dtype = dt ? EM_F32 : EM_F64;
        em_array *A = f64m(a, 4, 4), *Ac = NULL, *I = NULL, *Ic = NULL;
        CHECK_OK(em_as_type(A, dtype, &Ac));
        CHECK_OK(em_invert(Ac, &I));
        CHECK_OK(em_as_type(I, EM_F64, &Ic));
        double got[16];
        CHECK_OK(em_read(Ic, got, sizeof got));
        CHECK(memcmp(got, want, sizeof got) == 0);
        em_array_release(A), em_array_release(Ac);
        em_array_release(I), em_array_release(Ic);
    }
}

EM_TEST(linalg_value_failures_and_nan) {
    double s[4] = {1, 2, 2, 4}, np[4] = {1, 2, 2, 1};
    em_array *S = f64m(s, 2, 2), *N = f64m(np, 2, 2), *L = NULL, *I = NULL, *X = NULL;
    CHECK_OK(em_cholesky(N, &L));
    double out[4];
    CHECK_ERR(em_read(L, out, sizeof out), EM_ERR_ARGUMENT, "not positive definite");
    CHECK_OK(em_invert(S, &I));
    CHECK_OK(em_read(I, out, sizeof out));
    CHECK(isnan(out[0]) && isnan(out[3]));
    CHECK_OK(em_triangular_solve(N, S, true, false, false, &X)); /* upper [[1,2],[0,1]] fine */
    CHECK_OK(em_read(X, out, sizeof out));
    em_array_release(X);
    double z[4] = {0, 0, 1, 1};
    em_array *Z = f64m(z, 2, 2);
    CHECK_OK(em_triangular_solve(Z, S, true, true, false, &X));
    CHECK_ERR(em_read(X, out, sizeof out), EM_ERR_ARGUMENT, "singular");
    em_array_release(S), em_array_release(N), em_array_release(L);
    em_array_release(I), em_array_release(X), em_array_release(Z);
}

EM_TEST(linalg_qr_lu_views_share_one_factorization) {
    double a[6] = {3, 2, 0, 1, 0, 0}; /* 3x2 */
    em_array *A = f64m(a, 3, 2), *Q = NULL, *R = NULL, *P = NULL, *L = NULL, *U = NULL;
    CHECK_OK(em_qr(A, false, &Q, &R));
    CHECK(em_array_shape(Q)[0] == 3 && em_array_shape(Q)[1] == 2);
    CHECK(em_array_shape(R)[0] == 2 && em_array_shape(R)[1] == 2);
    double r[4];
    CHECK_OK(em_read(R, r, sizeof r));
    CHECK_NEAR(r[0], 3, 1e-15);
    CHECK_NEAR(r[1], 2, 1e-15);
    CHECK_NEAR(r[3], 1, 1e-15);
    double b[4] = {0, 1, 1, 1};
    em_array *B = f64m(b, 2, 2);
    CHECK_OK(em_lu(B, &P, &L, &U));
    double p[4], u[4];
    CHECK_OK(em_read(P, p, sizeof p));
    CHECK_OK(em_read(U, u, sizeof u));
    CHECK(p[0] == 0 && p[1] == 1 && p[2] == 1 && p[3] == 0);
    CHECK(u[0] == 1 && u[1] == 1 && u[2] == 0 && u[3] == 1);
    em_array *bad = NULL, *bad2 = NULL;
    CHECK_ERR(em_lu(A, &bad, &bad2, &bad2), EM_ERR_ARGUMENT, "square");
    CHECK(bad == NULL && bad2 == NULL);
    em_array *Us = NULL, *S = NULL, *Vt = NULL;
    double d[4] = {0, 2, 3, 0}; /* singular values 3, 2 */
    em_array *Dm = f64m(d, 2, 2);
    CHECK_OK(em_svd(Dm, true, &Us, &S, &Vt));
    double sv[2];
    CHECK_OK(em_read(S, sv, sizeof sv));
    CHECK_NEAR(sv[0], 3, 1e-15);
    CHECK_NEAR(sv[1], 2, 1e-15);
    em_array_release(Dm), em_array_release(Us), em_array_release(S), em_array_release(Vt);
    em_array_release(A), em_array_release(Q), em_array_release(R), em_array_release(B);
    em_array_release(P), em_array_release(L), em_array_release(U);
}

/* qr follows Nx's convention (Nx.LinAlg.QR; linalg.c's qr_unit): a real
 * reflection makes r_jj positive, a column with nothing below its pivot
 * keeps its sign; a complex reflection gives -e^(i·arg pivot)·|x|, and the
 * last column of a square matrix keeps its pivot. */
static void qr_c128(const double _Complex *a, int64_t m, int64_t n,
                    double _Complex *q, double _Complex *r) {
    int64_t shape[2] = {m, n};
    int64_t k = m < n ? m : n;
    em_array *A = NULL, *Q = NULL, *R = NULL;
    CHECK_OK(
        em_from_data(a, (size_t)(m * n) * sizeof *a, shape, 2, EM_C128, &A));
    CHECK_OK(em_qr(A, false, &Q, &R));
    CHECK_OK(em_read(Q, q, (size_t)(m * k) * sizeof *q));
    CHECK_OK(em_read(R, r, (size_t)(k * n) * sizeof *r));
    em_array_release(A), em_array_release(Q), em_array_release(R);
}

#define CHECK_CNEAR(got, want, tol)                                            \
    do {                                                                       \
        CHECK_NEAR(creal(got), creal(want), tol);                              \
        CHECK_NEAR(cimag(got), cimag(want), tol);                              \
    } while (0)

EM_TEST(linalg_qr_nx_convention) {
    struct {
        double a[2], r, q0;
    } real_cases[] = {
        {{1, 1},
         sqrt(2),
         1 / sqrt(2)}, /* pivot > 0: LAPACK's -√2 made positive */
        {{-1, 1}, sqrt(2), -1 / sqrt(2)}, /* pivot < 0: LAPACK's +√2 as it is */
        {{-1, 0}, -1, 1}, /* nothing to reflect: keeps its sign */
    };
    for (size_t c = 0; c < sizeof real_cases / sizeof *real_cases; c++) {
        em_array *A = f64m(real_cases[c].a, 2, 1), *Q = NULL, *R = NULL;
        CHECK_OK(em_qr(A, false, &Q, &R));
        double q[2], r;
        CHECK_OK(em_read(Q, q, sizeof q));
        CHECK_OK(em_read(R, &r, sizeof r));
        CHECK_NEAR(r, real_cases[c].r, 1e-15);
        CHECK_NEAR(q[0], real_cases[c].q0, 1e-15);
        em_array_release(A), em_array_release(Q), em_array_release(R);
    }

    double _Complex q[9], r[9];
    /* A complex pivot with nothing below (tall: Nx reflects it anyway). */
    qr_c128((double _Complex[]){_Complex_I, 0}, 2, 1, q, r);
    CHECK_CNEAR(r[0], -_Complex_I, 1e-15);
    CHECK_CNEAR(q[0], -1, 1e-15);
    /* The last column of a square matrix keeps its pivot. */
    qr_c128((double _Complex[]){_Complex_I}, 1, 1, q, r);
    CHECK_CNEAR(r[0], _Complex_I, 1e-15);
    CHECK_CNEAR(q[0], 1, 1e-15);
    /* -e^(iπ/4)·√3 */
    qr_c128((double _Complex[]){1 + _Complex_I, 1}, 2, 1, q, r);
    CHECK_CNEAR(r[0], -(1 + _Complex_I) / sqrt(2) * sqrt(3), 1e-14);
    CHECK_CNEAR(q[0] * r[0], 1 + _Complex_I, 1e-14);
    CHECK_CNEAR(q[1] * r[0], 1, 1e-14);
    /* Nx's lin_alg_test.exs "qr works with complex matrix". */
    qr_c128((double _Complex[]){1, 0, _Complex_I, 0, 2, -_Complex_I, 1, 1, 1},
            3, 3, q, r);
    const double _Complex want_r[9] = {
        -1.4142, -0.7071, -0.7071 - 0.7071 * _Complex_I,
        0,       -2.1213, -0.2357 + 1.1785 * _Complex_I,
        0,       0,       0.6666 - 0.3333 * _Complex_I};
    const double _Complex want_q[9] = {-0.7071, 0.2357,  -0.6666,
                                       0,       -0.9428, -0.3333,
                                       -0.7071, -0.2357, 0.6666};
    for (int i = 0; i < 9; i++) {
        CHECK_CNEAR(r[i], want_r[i], 1e-4);
        CHECK_CNEAR(q[i], want_q[i], 1e-4);
    }
}
