/* test_linalg.c — the LAPACK ops on hand-computed matrices. */
#include "emily_linalg.h"
#include "test.h"

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
