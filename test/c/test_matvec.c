/* em_matmul in the float dtypes against float64 sums of the same stored
 * inputs: the matrix-vector kernels (M <= 4, both weight layouts), the
 * half-precision GEMM (M > 4) and the fallbacks for strided operands.
 * Tolerances cover the output's rounding and float accumulation in any
 * order, so they hold on every SIMD path (AVX-512, AVX2, baseline). */
#include "test.h"

#include <stdint.h>
#include <stdlib.h>

static const em_dtype mv_dtypes[4] = {EM_F32, EM_F64, EM_BF16, EM_F16};

/* Multiples of 1/64 in (-1, 1): exact in every float dtype. */
static void fill(double *v, int64_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (int64_t i = 0; i < n; i++) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        v[i] = (double)((int64_t)((s * 0x2545F4914F6CDD1Dull) >> 57) - 63) / 64;
    }
}

static em_array *filled(const int64_t *shape, int ndim, em_dtype dt,
                        uint64_t seed) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    fill(v, n, seed);
    em_array *a = t_from_f64(v, shape, ndim, dt);
    free(v);
    return a;
}

/* Relative rounding of one result in dt, and of the accumulation. */
static double out_eps(em_dtype dt) {
    return dt == EM_BF16  ? 0x1p-8
           : dt == EM_F16 ? 0x1p-11
           : dt == EM_F32 ? 0x1p-24
                          : 0x1p-53;
}
static double acc_eps(em_dtype dt) { return dt == EM_F64 ? 0x1p-53 : 0x1p-24; }

/* x [bx?, M, K] @ w [bw?, K, N] (rank 2 or 3 each, batch 1 or B) through
 * em_matmul, against float64 sums of the inputs as read back. */
static void check_matmul(em_array *x, em_array *w, const char *what) {
    em_array *r = NULL;
    em_status st = em_matmul(x, w, &r);
    if (st != EM_OK) {
        em_test_fail(__FILE__, __LINE__, "%s: %s", what, em_last_error());
        return;
    }
    int xr = em_array_ndim(x), wr = em_array_ndim(w);
    const int64_t *xs = em_array_shape(x), *ws = em_array_shape(w);
    int64_t bx = xr == 3 ? xs[0] : 1, bw = wr == 3 ? ws[0] : 1;
    int64_t m = xs[xr - 2], k = xs[xr - 1], n = ws[wr - 1];
    int64_t nb = bx > bw ? bx : bw;
    double *xv = malloc(sizeof(double) * (size_t)(bx * m * k + 1));
    double *wv = malloc(sizeof(double) * (size_t)(bw * k * n + 1));
    double *got = malloc(sizeof(double) * (size_t)(nb * m * n + 1));
    t_read_f64(x, xv, (size_t)(bx * m * k));
    t_read_f64(w, wv, (size_t)(bw * k * n));
    t_read_f64(r, got, (size_t)(nb * m * n));
    em_dtype dt = em_array_dtype(r);
    int failures = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                const double *xrow = xv + ((b % bx) * m + i) * k;
                const double *wcol = wv + (b % bw) * k * n + j;
                double ref = 0, mag = 0;
                for (int64_t p = 0; p < k; p++) {
                    ref += xrow[p] * wcol[p * n];
                    mag += fabs(xrow[p] * wcol[p * n]);
                }
                double tol = out_eps(dt) * fabs(ref) +
                             2.0 * (double)(k + 1) * acc_eps(dt) * mag;
                double g = got[(b * m + i) * n + j];
                bool ok = fabs(g - ref) <= tol || (isnan(g) && isnan(ref));
                if (!ok && failures++ < 3)
                    em_test_fail(__FILE__, __LINE__,
                                 "%s: dtype %d [%lld,%lld,%lld] = %.9g, "
                                 "wanted %.9g",
                                 what, (int)dt, (long long)b, (long long)i,
                                 (long long)j, g, ref);
            }
    free(xv);
    free(wv);
    free(got);
    em_array_release(r);
}

/* w as passed to matmul: (K, N) stored as is, or stored (N, K) and
 * transposed (the PyTorch layout: the kernels must read it in place). */
static em_array *weights(int64_t k, int64_t n, bool transposed, em_dtype dt,
                         uint64_t seed) {
    if (!transposed) {
        int64_t s[2] = {k, n};
        return filled(s, 2, dt, seed);
    }
    int64_t s[2] = {n, k};
    em_array *w = filled(s, 2, dt, seed), *t = NULL;
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(w, perm, 2, &t));
    em_array_release(w);
    return t;
}

EM_TEST(matvec_shapes_layouts_dtypes) {
    /* K and N off the vector widths; N large enough to split over threads
     * and, for bf16/f16, over several column blocks. */
    static const int64_t ks[5] = {1, 7, 33, 257, 1030};
    static const int64_t ns[4] = {1, 5, 70, 300};
    char what[96];
    for (int d = 0; d < 4; d++)
        for (int64_t m = 1; m <= 5; m++)
            for (int ki = 0; ki < 5; ki++)
                for (int ni = 0; ni < 4; ni++)
                    for (int t = 0; t < 2; t++) {
                        int64_t k = ks[ki], n = ns[ni];
                        if (m == 5 && k > 300)
                            continue; /* the GEMM path; covered enough */
                        int64_t xs[2] = {m, k};
                        em_array *x = filled(xs, 2, mv_dtypes[d], 11 + m);
                        em_array *w = weights(k, n, t, mv_dtypes[d], 3 + k);
                        snprintf(what, sizeof what, "m=%lld k=%lld n=%lld %s",
                                 (long long)m, (long long)k, (long long)n,
                                 t ? "x@W^T" : "x@W");
                        check_matmul(x, w, what);
                        em_array_release(x);
                        em_array_release(w);
                    }
}

EM_TEST(matvec_wide_columns) {
    /* bf16/f16 x@W: N wider than a column block (4096 bytes of a row) and
     * than the accumulator block for M = 4. */
    for (int d = 0; d < 4; d++)
        for (int64_t m = 1; m <= 4; m += 3) {
            int64_t xs[2] = {m, 19};
            em_array *x = filled(xs, 2, mv_dtypes[d], 5);
            em_array *w = weights(19, 4500, false, mv_dtypes[d], 6);
            check_matmul(x, w, "wide x@W");
            em_array_release(w);
            w = weights(19, 4500, true, mv_dtypes[d], 6);
            check_matmul(x, w, "wide x@W^T");
            em_array_release(w);
            em_array_release(x);
        }
}

EM_TEST(matvec_strided_operands) {
    for (int d = 0; d < 4; d++) {
        em_dtype dt = mv_dtypes[d];
        /* x: every other column of a (3, 2K) array. */
        int64_t big[2] = {3, 82}, st[2] = {0, 0}, sp[2] = {3, 82},
                step[2] = {1, 2};
        em_array *xb = filled(big, 2, dt, 1), *x = NULL;
        CHECK_OK(em_slice(xb, st, sp, step, &x)); /* (3, 41) */
        /* W (K, N) inside a wider array: row stride 37 > N = 30. */
        int64_t wbig[2] = {41, 37}, wst[2] = {0, 2}, wsp[2] = {41, 32},
                one[2] = {1, 1};
        em_array *wb = filled(wbig, 2, dt, 2), *w = NULL;
        CHECK_OK(em_slice(wb, wst, wsp, one, &w));
        check_matmul(x, w, "x@W, W rows strided");
        em_array_release(w);
        /* W^T from (N, K) rows inside a (30, 45) array. */
        int64_t tbig[2] = {30, 45}, tst[2] = {0, 3}, tsp[2] = {30, 44};
        em_array *tb = filled(tbig, 2, dt, 3), *wn = NULL, *wt = NULL;
        CHECK_OK(em_slice(tb, tst, tsp, one, &wn));
        int perm[2] = {1, 0};
        CHECK_OK(em_transpose(wn, perm, 2, &wt));
        check_matmul(x, wt, "x@W^T, W rows strided");
        em_array_release(wt);
        em_array_release(wn);
        em_array_release(tb);
        /* W strided on both axes: no in-place layout; the fallback. */
        int64_t s2[2] = {2, 2}, sstop[2] = {82, 60};
        em_array *w2b = NULL, *w2 = NULL;
        int64_t w2s[2] = {82, 60};
        w2b = filled(w2s, 2, dt, 4);
        CHECK_OK(em_slice(w2b, st, sstop, s2, &w2)); /* (41, 30) */
        check_matmul(x, w2, "x@W, W strided both ways");
        em_array_release(w2);
        em_array_release(w2b);
        em_array_release(wb);
        em_array_release(x);
        em_array_release(xb);
    }
}

EM_TEST(matvec_batches) {
    for (int d = 0; d < 4; d++) {
        em_dtype dt = mv_dtypes[d];
        for (int64_t m = 1; m <= 3; m++) {
            /* x [2, M, K] @ W [K, N]: W broadcast, the batches become rows
             * of one product (M * 2 <= 4 stays matrix-vector). */
            int64_t xs[3] = {2, m, 45};
            em_array *x = filled(xs, 3, dt, 21);
            em_array *w = weights(45, 70, m == 2, dt, 22);
            check_matmul(x, w, "x[2,M,K] @ W[K,N]");
            em_array_release(w);
            /* x [2, M, K] @ W [2, K, N]: one W per batch. */
            int64_t ws[3] = {2, 45, 70};
            w = filled(ws, 3, dt, 23);
            check_matmul(x, w, "x[2,M,K] @ W[2,K,N]");
            em_array_release(w);
            /* ... and each W stored (N, K), transposed per batch. */
            int64_t wn[3] = {2, 70, 45};
            em_array *wr = filled(wn, 3, dt, 24), *wt = NULL;
            int perm[3] = {0, 2, 1};
            CHECK_OK(em_transpose(wr, perm, 3, &wt));
            check_matmul(x, wt, "x[2,M,K] @ W^T[2,K,N]");
            em_array_release(wt);
            em_array_release(wr);
            em_array_release(x);
            /* x [M, K] @ W [3, K, N]: x broadcast over W's batches. */
            int64_t x2[2] = {m, 45}, w3[3] = {3, 45, 70};
            x = filled(x2, 2, dt, 25);
            w = filled(w3, 3, dt, 26);
            check_matmul(x, w, "x[M,K] @ W[3,K,N]");
            em_array_release(w);
            em_array_release(x);
        }
    }
}

EM_TEST(matvec_empty_and_nan) {
    for (int d = 0; d < 4; d++) {
        em_dtype dt = mv_dtypes[d];
        for (int t = 0; t < 2; t++) {
            /* K = 0: zeros. */
            int64_t xs[2] = {2, 0};
            em_array *x = NULL, *r = NULL;
            CHECK_OK(em_from_data(NULL, 0, xs, 2, dt, &x));
            em_array *w = weights(0, 9, t, dt, 1);
            CHECK_OK(em_matmul(x, w, &r));
            double got[18];
            for (int i = 0; i < 18; i++)
                got[i] = -1;
            t_read_f64(r, got, 18);
            for (int i = 0; i < 18; i++)
                CHECK(got[i] == 0);
            em_array_release(r);
            em_array_release(w);
            em_array_release(x);
            /* NaN in x row 1 poisons that row; NaN in W's column 2 (its
             * row 2 when stored (N, K)) poisons that column. */
            double xv[2 * 40], wv[40 * 20];
            fill(xv, 80, 1);
            fill(wv, 800, 2);
            xv[40 + 17] = NAN;
            if (t)
                wv[2 * 40 + 31] = NAN; /* (N=20, K=40): w[2][31] */
            else
                wv[31 * 20 + 2] = NAN; /* (K=40, N=20): w[31][2] */
            int64_t x2[2] = {2, 40}, wkn[2] = {40, 20}, wnk[2] = {20, 40};
            x = t_from_f64(xv, x2, 2, dt);
            w = t_from_f64(wv, t ? wnk : wkn, 2, dt);
            if (t) {
                em_array *wt = NULL;
                int perm[2] = {1, 0};
                CHECK_OK(em_transpose(w, perm, 2, &wt));
                em_array_release(w);
                w = wt;
            }
            check_matmul(x, w, "NaN propagation");
            CHECK_OK(em_matmul(x, w, &r));
            double out[40];
            t_read_f64(r, out, 40);
            for (int j = 0; j < 20; j++) {
                CHECK(isnan(out[20 + j]));
                CHECK(isnan(out[j]) == (j == 2));
            }
            em_array_release(r);
            em_array_release(w);
            em_array_release(x);
        }
    }
}

EM_TEST(gemm_float_dtypes_layouts) {
    /* M > EM_MATVEC_MAX_M: bf16 through the AVX512_BF16 kernel where the
     * CPU has it (rows past a 6-row block and a 48-row unit, columns past
     * a 32-column panel, odd K), else through float and sgemm; a and W
     * each as stored or transposed. */
    static const int64_t ms[3] = {5, 50, 97}, ks[3] = {1, 129, 300},
                         ns[3] = {3, 70, 33};
    char what[96];
    for (int d = 0; d < 4; d++)
        for (int c = 0; c < 3; c++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                    int64_t m = ms[c], k = ks[c], n = ns[c];
                    em_array *x = NULL;
                    if (ta) {
                        int64_t s[2] = {k, m};
                        em_array *xr = filled(s, 2, mv_dtypes[d], 31);
                        int perm[2] = {1, 0};
                        CHECK_OK(em_transpose(xr, perm, 2, &x));
                        em_array_release(xr);
                    } else {
                        int64_t s[2] = {m, k};
                        x = filled(s, 2, mv_dtypes[d], 31);
                    }
                    em_array *w = weights(k, n, tb, mv_dtypes[d], 32);
                    snprintf(what, sizeof what,
                             "gemm m=%lld k=%lld n=%lld %s%s", (long long)m,
                             (long long)k, (long long)n, ta ? "x^T" : "x",
                             tb ? "@W^T" : "@W");
                    check_matmul(x, w, what);
                    em_array_release(w);
                    em_array_release(x);
                }
    /* Batched, and NaN reaching only its row. */
    for (int d = 0; d < 4; d++) {
        int64_t xs[3] = {3, 13, 40}, ws[3] = {3, 40, 35};
        em_array *x = filled(xs, 3, mv_dtypes[d], 41);
        em_array *w = filled(ws, 3, mv_dtypes[d], 42);
        check_matmul(x, w, "batched gemm");
        em_array_release(w);
        em_array_release(x);
        double xv[13 * 40], wv[40 * 35];
        fill(xv, 13 * 40, 3);
        fill(wv, 40 * 35, 4);
        xv[7 * 40 + 39] = NAN;
        int64_t x2[2] = {13, 40}, w2[2] = {40, 35};
        x = t_from_f64(xv, x2, 2, mv_dtypes[d]);
        w = t_from_f64(wv, w2, 2, mv_dtypes[d]);
        check_matmul(x, w, "gemm NaN");
        em_array_release(w);
        em_array_release(x);
    }
}
