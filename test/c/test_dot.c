/* em_dot and em_matmul: hand-computed values. */
#include "test.h"

#include <stdint.h>

static const em_dtype dot_dtypes[] = {
    EM_PRED, EM_U8,  EM_U16,  EM_U32, EM_U64, EM_S8,  EM_S16, EM_S32,
    EM_S64,  EM_F16, EM_BF16, EM_F32, EM_F64, EM_C64, EM_C128};

static void check_values(em_array *r, const double *want, size_t n,
                         const int64_t *shape, int ndim) {
    CHECK(r != NULL);
    if (!r)
        return;
    CHECK(em_array_ndim(r) == ndim);
    for (int i = 0; i < ndim && i < em_array_ndim(r); i++)
        CHECK(em_array_shape(r)[i] == shape[i]);
    double got[64];
    t_read_f64(r, got, n);
    for (size_t i = 0; i < n; i++)
        CHECK_NEAR(got[i], want[i], 1e-9 * (1 + fabs(want[i])));
}

EM_TEST(dot_matmul_every_dtype) {
    /* [[1,2,3],[4,5,6]] · [[1,0],[0,1],[1,1]] = [[4,5],[10,11]] */
    const double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1};
    const int64_t sa[2] = {2, 3}, sb[2] = {3, 2}, so[2] = {2, 2};
    for (size_t d = 0; d < sizeof dot_dtypes / sizeof dot_dtypes[0]; d++) {
        em_dtype dt = dot_dtypes[d];
        em_array *x = t_from_f64(a, sa, 2, dt), *y = t_from_f64(b, sb, 2, dt);
        em_array *r = NULL;
        CHECK_OK(em_matmul(x, y, &r));
        CHECK(r && em_array_dtype(r) == dt);
        const double want[4] = {4, 5, 10, 11}, wpred[4] = {1, 1, 1, 1};
        check_values(r, dt == EM_PRED ? wpred : want, 4, so, 2);
        em_array_release(r);
        /* The same through em_dot, contracting a's axis 1 with b's axis 0. */
        em_dot_options o = {.ncontract = 1, .contract_a = {1},
                            .contract_b = {0}};
        CHECK_OK(em_dot(x, y, &o, &r));
        check_values(r, dt == EM_PRED ? wpred : want, 4, so, 2);
        em_array_release(r);
        em_array_release(x);
        em_array_release(y);
    }
}

EM_TEST(dot_outer_batch_and_free_axis_order) {
    /* Outer product: zero options. */
    const double u[2] = {1, 2}, v[3] = {3, 4, 5};
    const int64_t s2[1] = {2}, s3[1] = {3};
    em_array *x = t_from_f64(u, s2, 1, EM_F32), *y = t_from_f64(v, s3, 1, EM_F32);
    em_array *r = NULL;
    em_dot_options zero = {0};
    CHECK_OK(em_dot(x, y, &zero, &r));
    const double outer[6] = {3, 4, 5, 6, 8, 10};
    const int64_t s23[2] = {2, 3};
    check_values(r, outer, 6, s23, 2);
    em_array_release(r);
    CHECK_OK(em_dot(x, y, NULL, &r));
    check_values(r, outer, 6, s23, 2);
    em_array_release(r);
    em_array_release(x);
    em_array_release(y);

    /* Batch axis last in a, first in b: a[k, i, batch] (2x1x2),
     * b[batch, k] (2x2). out[batch, i] = sum_k a[k,i,batch] b[batch,k]. */
    const double av[4] = {1, 2, 3, 4}; /* a[0,0,:]=[1,2], a[1,0,:]=[3,4] */
    const double bv[4] = {10, 20, 30, 40};
    const int64_t sa[3] = {2, 1, 2}, sb[2] = {2, 2};
    for (int t = 0; t < 3; t++) {
        em_dtype dt = t == 0 ? EM_F64 : t == 1 ? EM_S32 : EM_BF16;
        x = t_from_f64(av, sa, 3, dt);
        y = t_from_f64(bv, sb, 2, dt);
        em_dot_options o = {.ncontract = 1, .contract_a = {0},
                            .contract_b = {1}, .nbatch = 1, .batch_a = {-1},
                            .batch_b = {0}};
        CHECK_OK(em_dot(x, y, &o, &r));
        /* batch 0: 1*10 + 3*20 = 70; batch 1: 2*30 + 4*40 = 220 */
        const double want[2] = {70, 220};
        const int64_t so[2] = {2, 1};
        check_values(r, want, 2, so, 2);
        em_array_release(r);
        em_array_release(x);
        em_array_release(y);
    }
}

EM_TEST(dot_integer_wraps_and_pred) {
    const int8_t a[2] = {127, 1}, b[2] = {2, 1};
    int64_t s12[2] = {1, 2}, s21[2] = {2, 1};
    em_array *x = NULL, *y = NULL, *r = NULL;
    CHECK_OK(em_from_data(a, 2, s12, 2, EM_S8, &x));
    CHECK_OK(em_from_data(b, 2, s21, 2, EM_S8, &y));
    CHECK_OK(em_matmul(x, y, &r));
    int8_t out;
    CHECK_OK(em_read(r, &out, 1));
    CHECK(out == -1); /* 255 wraps */
    em_array_release(r);
    em_array_release(x);
    em_array_release(y);

    const uint64_t ua[2] = {UINT64_MAX, 3}, ub[2] = {2, 5};
    CHECK_OK(em_from_data(ua, 16, s12, 2, EM_U64, &x));
    CHECK_OK(em_from_data(ub, 16, s21, 2, EM_U64, &y));
    CHECK_OK(em_matmul(x, y, &r));
    uint64_t u64;
    CHECK_OK(em_read(r, &u64, 8));
    CHECK(u64 == 13); /* -2 + 15 mod 2^64 */
    em_array_release(r);
    em_array_release(x);
    em_array_release(y);

    /* pred: 256 true pairs must stay true (no 8-bit wrap to 0). */
    uint8_t ones[256];
    memset(ones, 1, sizeof ones);
    int64_t r256[2] = {1, 256}, c256[2] = {256, 1};
    CHECK_OK(em_from_data(ones, 256, r256, 2, EM_PRED, &x));
    CHECK_OK(em_from_data(ones, 256, c256, 2, EM_PRED, &y));
    CHECK_OK(em_matmul(x, y, &r));
    uint8_t p;
    CHECK_OK(em_read(r, &p, 1));
    CHECK(p == 1);
    em_array_release(r);
    em_array_release(x);
    em_array_release(y);
}

EM_TEST(dot_empty_and_special_values) {
    /* K == 0 gives zeros; M == 0 gives an empty result. */
    int64_t s30[2] = {3, 0}, s02[2] = {0, 2}, s32[2] = {3, 2};
    const em_dtype dts[4] = {EM_F32, EM_C128, EM_S16, EM_F16};
    for (int i = 0; i < 4; i++) {
        em_array *x = NULL, *y = NULL, *r = NULL;
        CHECK_OK(em_from_data(NULL, 0, s30, 2, dts[i], &x));
        CHECK_OK(em_from_data(NULL, 0, s02, 2, dts[i], &y));
        CHECK_OK(em_matmul(x, y, &r));
        const double zeros[6] = {0};
        check_values(r, zeros, 6, s32, 2);
        em_array_release(r);
        /* [0,3] x [3,0] = [0,0] */
        em_array *e03 = NULL;
        int64_t s03[2] = {0, 3};
        CHECK_OK(em_from_data(NULL, 0, s03, 2, dts[i], &e03));
        CHECK_OK(em_matmul(e03, x, &r));
        CHECK(r && em_array_size(r) == 0);
        CHECK_OK(em_eval(&r, 1));
        em_array_release(r);
        em_array_release(e03);
        em_array_release(x);
        em_array_release(y);
    }
    /* NaN and Inf propagate through BLAS. */
    const double a[2] = {NAN, 1}, b[2] = {1, INFINITY};
    const int64_t s12[2] = {1, 2}, s21[2] = {2, 1};
    em_array *x = t_from_f64(a, s12, 2, EM_F32), *y = t_from_f64(b, s21, 2, EM_F32);
    em_array *r = NULL;
    CHECK_OK(em_matmul(x, y, &r));
    double got;
    t_read_f64(r, &got, 1);
    CHECK(isnan(got));
    em_array_release(r);
    em_array_release(x);
    em_array_release(y);
}

EM_TEST(dot_strided_operands) {
    /* m = [[0,1,2],[3,4,5],[6,7,8]] */
    double mv[9];
    for (int i = 0; i < 9; i++)
        mv[i] = i;
    const int64_t s33[2] = {3, 3};
    const em_dtype dts[4] = {EM_F32, EM_F64, EM_S32, EM_BF16};
    for (int d = 0; d < 4; d++) {
        em_array *m = t_from_f64(mv, s33, 2, dts[d]), *t = NULL, *r = NULL;
        int perm[2] = {1, 0};
        CHECK_OK(em_transpose(m, perm, 2, &t));
        /* m^T · m */
        CHECK_OK(em_matmul(t, m, &r));
        const double mtm[9] = {45, 54, 63, 54, 66, 78, 63, 78, 93};
        check_values(r, mtm, 9, s33, 2);
        em_array_release(r);
        /* m · m^T */
        CHECK_OK(em_matmul(m, t, &r));
        const double mmt[9] = {5, 14, 23, 14, 50, 86, 23, 86, 149};
        check_values(r, mmt, 9, s33, 2);
        em_array_release(r);
        /* Column slice [:, 1:3] (lda 3 > k 2) times a reversed 2x3 slice. */
        em_array *sl = NULL, *rv = NULL;
        int64_t st[2] = {0, 1}, sp[2] = {3, 3}, one[2] = {1, 1};
        CHECK_OK(em_slice(m, st, sp, one, &sl)); /* [[1,2],[4,5],[7,8]] */
        int64_t st2[2] = {0, 0}, sp2[2] = {2, 3};
        em_array *top = NULL;
        CHECK_OK(em_slice(m, st2, sp2, one, &top)); /* [[0,1,2],[3,4,5]] */
        int ax[1] = {0};
        CHECK_OK(em_reverse(top, ax, 1, &rv)); /* [[3,4,5],[0,1,2]] */
        CHECK_OK(em_matmul(sl, rv, &r));
        const double want[9] = {3, 6, 9, 12, 21, 30, 21, 36, 51};
        check_values(r, want, 9, s33, 2);
        em_array_release(r);
        em_array_release(rv);
        em_array_release(top);
        em_array_release(sl);
        em_array_release(t);
        em_array_release(m);
    }
}

EM_TEST(matmul_broadcast_batch) {
    /* a: [2,1,2,2] batches of I and 2I; b: [3,2,2] → out [2,3,2,2]. */
    const double av[8] = {1, 0, 0, 1, 2, 0, 0, 2};
    double bv[12];
    for (int i = 0; i < 12; i++)
        bv[i] = i;
    const int64_t sa[4] = {2, 1, 2, 2}, sb[3] = {3, 2, 2};
    em_array *x = t_from_f64(av, sa, 4, EM_F32), *y = t_from_f64(bv, sb, 3, EM_F32);
    em_array *r = NULL;
    CHECK_OK(em_matmul(x, y, &r));
    const int64_t so[4] = {2, 3, 2, 2};
    double want[24];
    for (int i = 0; i < 24; i++)
        want[i] = (i < 12 ? 1 : 2) * bv[i % 12];
    check_values(r, want, 24, so, 4);
    em_array_release(r);
    em_array_release(x);
    em_array_release(y);
    /* Vectors: [3]·[3] is a scalar, [3]·[3,2] is [2]. */
    const double v[3] = {1, 2, 3}, w[6] = {1, 0, 0, 1, 1, 1};
    const int64_t s3[1] = {3}, s32[2] = {3, 2};
    x = t_from_f64(v, s3, 1, EM_S64);
    y = t_from_f64(w, s32, 2, EM_S64);
    CHECK_OK(em_matmul(x, x, &r));
    const double dotv = 14;
    check_values(r, &dotv, 1, NULL, 0);
    em_array_release(r);
    CHECK_OK(em_matmul(x, y, &r));
    const double vw[2] = {4, 5};
    const int64_t s2[1] = {2};
    check_values(r, vw, 2, s2, 1);
    em_array_release(r);
    em_array_release(x);
    em_array_release(y);
}

EM_TEST(dot_errors) {
    const double z[24] = {0};
    const int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, s234[3] = {2, 3, 4};
    em_array *a = t_from_f64(z, s23, 2, EM_F32), *b = t_from_f64(z, s45, 2, EM_F32);
    em_array *c = t_from_f64(z, s23, 2, EM_F64), *d = t_from_f64(z, s234, 3, EM_F32);
    em_array *r = NULL;
    em_dot_options o = {.ncontract = 1, .contract_a = {1}, .contract_b = {0}};
    CHECK_ERR(em_dot(a, b, &o, &r), EM_ERR_ARGUMENT, "f32[4,5]");
    CHECK_ERR(em_dot(a, c, &o, &r), EM_ERR_ARGUMENT, "dtypes");
    o.contract_a[0] = 5;
    CHECK_ERR(em_dot(a, b, &o, &r), EM_ERR_ARGUMENT, "out of range");
    em_dot_options twice = {.ncontract = 1, .contract_a = {0},
                            .contract_b = {0}, .nbatch = 1, .batch_a = {0},
                            .batch_b = {1}};
    CHECK_ERR(em_dot(a, a, &twice, &r), EM_ERR_ARGUMENT, "twice");
    em_dot_options toomany = {.ncontract = 3};
    CHECK_ERR(em_dot(a, a, &toomany, &r), EM_ERR_ARGUMENT, "axes");
    /* The result rank (14 + 3 free axes) exceeds EM_MAX_NDIM (16). */
    const int64_t s8[14] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2};
    em_array *e8 = t_from_f64(z, s8, 14, EM_F32);
    CHECK_ERR(em_dot(e8, d, NULL, &r), EM_ERR_ARGUMENT, "rank");
    CHECK_ERR(em_matmul(a, a, &r), EM_ERR_ARGUMENT, "matmul");
    CHECK_ERR(em_matmul(d, a, &r), EM_ERR_ARGUMENT, "f32[2,3,4]");
    double s = 1;
    em_array *sc = t_from_f64(&s, NULL, 0, EM_F32);
    CHECK_ERR(em_matmul(sc, a, &r), EM_ERR_ARGUMENT, "rank");
    CHECK(r == NULL);
    em_array_release(sc);
    em_array_release(e8);
    em_array_release(a);
    em_array_release(b);
    em_array_release(c);
    em_array_release(d);
}
