/* Reductions and argmax/argmin: hand-computed values. */
#include "test.h"

#include <stdint.h>
#include <stdlib.h>

static const em_dtype all_dtypes[] = {
    EM_PRED, EM_U8,  EM_U16,  EM_U32, EM_U64, EM_S8,  EM_S16, EM_S32,
    EM_S64,  EM_F16, EM_BF16, EM_F32, EM_F64, EM_C64, EM_C128};
#define NDTYPES (sizeof all_dtypes / sizeof all_dtypes[0])

/* Reduce `in` and compare (as f64) with `want` of n elements. */
static void check_reduce(em_reduce_op op, em_array *in, const int *axes,
                         int naxes, bool keep, const double *want, size_t n,
                         const int64_t *want_shape, int want_ndim) {
    em_array *r = NULL;
    CHECK_OK(em_reduce(op, in, axes, naxes, keep, &r));
    if (!r)
        return;
    CHECK(em_array_ndim(r) == want_ndim);
    for (int i = 0; i < want_ndim && i < em_array_ndim(r); i++)
        CHECK(em_array_shape(r)[i] == want_shape[i]);
    double got[16];
    t_read_f64(r, got, n);
    for (size_t i = 0; i < n; i++)
        CHECK_NEAR(got[i], want[i], 1e-9 * (1 + fabs(want[i])));
    em_array_release(r);
}

EM_TEST(reduce_sum_axes_every_dtype) {
    /* [[1, 2, 3], [4, 5, 6]] */
    const double v[6] = {1, 2, 3, 4, 5, 6};
    const int64_t shape[2] = {2, 3};
    for (size_t d = 0; d < NDTYPES; d++) {
        em_dtype dt = all_dtypes[d];
        if (dt == EM_PRED)
            continue;
        em_array *a = t_from_f64(v, shape, 2, dt);
        CHECK(a != NULL);
        int ax0[1] = {0}, ax1[1] = {-1};
        const double cols[3] = {5, 7, 9}, rows[2] = {6, 15}, all[1] = {21};
        const int64_t s3[1] = {3}, s2[1] = {2}, k12[2] = {1, 3}, k11[2] = {1, 1};
        check_reduce(EM_REDUCE_sum, a, ax0, 1, false, cols, 3, s3, 1);
        check_reduce(EM_REDUCE_sum, a, ax1, 1, false, rows, 2, s2, 1);
        check_reduce(EM_REDUCE_sum, a, ax0, 1, true, cols, 3, k12, 2);
        check_reduce(EM_REDUCE_sum, a, NULL, 0, false, all, 1, NULL, 0);
        check_reduce(EM_REDUCE_sum, a, NULL, 0, true, all, 1, k11, 2);
        const double prod[2] = {6, 120}, mx[3] = {4, 5, 6}, mn[1] = {1};
        check_reduce(EM_REDUCE_product, a, ax1, 1, false, prod, 2, s2, 1);
        if (dt != EM_C64 && dt != EM_C128) {
            check_reduce(EM_REDUCE_max, a, ax0, 1, false, mx, 3, s3, 1);
            check_reduce(EM_REDUCE_min, a, NULL, 0, false, mn, 1, NULL, 0);
        }
        /* No axes given (non-NULL list of 0): a copy. */
        int none[1] = {0};
        check_reduce(EM_REDUCE_sum, a, none, 0, false, v, 6, shape, 2);
        em_array_release(a);
    }
}

EM_TEST(reduce_all_any_every_dtype) {
    const double v[6] = {1, 0, 3, 4, 5, 6};
    const int64_t shape[2] = {2, 3};
    for (size_t d = 0; d < NDTYPES; d++) {
        em_array *a = t_from_f64(v, shape, 2, all_dtypes[d]);
        em_array *r = NULL;
        int ax0[1] = {0};
        CHECK_OK(em_reduce(EM_REDUCE_all, a, ax0, 1, false, &r));
        CHECK(r && em_array_dtype(r) == EM_PRED);
        uint8_t got[3];
        CHECK_OK(em_read(r, got, 3));
        CHECK(got[0] == 1 && got[1] == 0 && got[2] == 1);
        em_array_release(r);
        CHECK_OK(em_reduce(EM_REDUCE_any, a, NULL, 0, false, &r));
        CHECK_OK(em_read(r, got, 1));
        CHECK(got[0] == 1);
        em_array_release(r);
        em_array_release(a);
    }
    /* NaN and -0.0: NaN is true, -0.0 false. */
    const double f[2] = {-0.0, NAN};
    const int64_t s2[1] = {2};
    em_array *a = t_from_f64(f, s2, 1, EM_F32), *r = NULL;
    int ax[1] = {0};
    uint8_t b[1];
    CHECK_OK(em_reduce(EM_REDUCE_all, a, ax, 1, false, &r));
    CHECK_OK(em_read(r, b, 1));
    CHECK(b[0] == 0);
    em_array_release(r);
    em_array_release(a);
}

EM_TEST(reduce_integer_sums_wrap) {
    const int8_t s8[3] = {127, 1, 1};
    const uint8_t u8[2] = {200, 100};
    const int64_t i64[2] = {INT64_MAX, 2};
    const uint16_t u16[2] = {65535, 65535}; /* product: int would overflow */
    int64_t n3[1] = {3}, n2[1] = {2};
    em_array *a = NULL, *r = NULL;
    CHECK_OK(em_from_data(s8, 3, n3, 1, EM_S8, &a));
    CHECK_OK(em_reduce(EM_REDUCE_sum, a, NULL, 0, false, &r));
    int8_t s8r;
    CHECK_OK(em_read(r, &s8r, 1));
    CHECK(s8r == -127);
    em_array_release(r);
    em_array_release(a);
    CHECK_OK(em_from_data(u8, 2, n2, 1, EM_U8, &a));
    CHECK_OK(em_reduce(EM_REDUCE_sum, a, NULL, 0, false, &r));
    uint8_t u8r;
    CHECK_OK(em_read(r, &u8r, 1));
    CHECK(u8r == 44);
    em_array_release(r);
    em_array_release(a);
    CHECK_OK(em_from_data(i64, 16, n2, 1, EM_S64, &a));
    CHECK_OK(em_reduce(EM_REDUCE_sum, a, NULL, 0, false, &r));
    int64_t i64r;
    CHECK_OK(em_read(r, &i64r, 8));
    CHECK(i64r == INT64_MIN + 1);
    em_array_release(r);
    em_array_release(a);
    CHECK_OK(em_from_data(u16, 4, n2, 1, EM_U16, &a));
    CHECK_OK(em_reduce(EM_REDUCE_product, a, NULL, 0, false, &r));
    uint16_t u16r;
    CHECK_OK(em_read(r, &u16r, 2));
    CHECK(u16r == 1); /* 65535^2 = 1 mod 2^16 */
    em_array_release(r);
    em_array_release(a);
}

EM_TEST(reduce_empty_identities) {
    const int64_t shape[2] = {3, 0};
    int ax1[1] = {1};
    struct {
        em_dtype dt;
        em_reduce_op op;
        double want;
    } cases[] = {
        {EM_F32, EM_REDUCE_max, -INFINITY}, {EM_F64, EM_REDUCE_min, INFINITY},
        {EM_BF16, EM_REDUCE_max, -INFINITY}, {EM_F16, EM_REDUCE_min, INFINITY},
        {EM_S8, EM_REDUCE_max, -128},       {EM_S32, EM_REDUCE_min, INT32_MAX},
        {EM_U16, EM_REDUCE_min, 65535},     {EM_U8, EM_REDUCE_max, 0},
        {EM_S16, EM_REDUCE_sum, 0},         {EM_C64, EM_REDUCE_product, 1},
        {EM_PRED, EM_REDUCE_all, 1},        {EM_F32, EM_REDUCE_any, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        em_array *a = NULL, *r = NULL;
        CHECK_OK(em_from_data(NULL, 0, shape, 2, cases[i].dt, &a));
        CHECK_OK(em_reduce(cases[i].op, a, ax1, 1, false, &r));
        double got[3];
        t_read_f64(r, got, 3);
        for (int j = 0; j < 3; j++)
            CHECK(got[j] == cases[i].want);
        em_array_release(r);
        em_array_release(a);
    }
    /* Reducing the non-empty axis gives an empty result. */
    em_array *a = NULL, *r = NULL;
    int ax0[1] = {0};
    CHECK_OK(em_from_data(NULL, 0, shape, 2, EM_F32, &a));
    CHECK_OK(em_reduce(EM_REDUCE_sum, a, ax0, 1, false, &r));
    CHECK(em_array_ndim(r) == 1 && em_array_shape(r)[0] == 0);
    CHECK_OK(em_eval(&r, 1));
    em_array_release(r);
    em_array_release(a);
}

EM_TEST(reduce_nan_propagates) {
    const double v[4] = {1, NAN, -INFINITY, 2};
    const int64_t s[1] = {4};
    em_dtype fl[4] = {EM_F16, EM_BF16, EM_F32, EM_F64};
    for (int i = 0; i < 4; i++) {
        em_array *a = t_from_f64(v, s, 1, fl[i]), *r = NULL;
        double got;
        CHECK_OK(em_reduce(EM_REDUCE_max, a, NULL, 0, false, &r));
        t_read_f64(r, &got, 1);
        CHECK(isnan(got));
        em_array_release(r);
        CHECK_OK(em_reduce(EM_REDUCE_min, a, NULL, 0, false, &r));
        t_read_f64(r, &got, 1);
        CHECK(isnan(got));
        em_array_release(r);
        CHECK_OK(em_reduce(EM_REDUCE_sum, a, NULL, 0, false, &r));
        t_read_f64(r, &got, 1);
        CHECK(isnan(got));
        em_array_release(r);
        em_array_release(a);
    }
}

EM_TEST(reduce_complex) {
    /* (1+2i) + (3-1i) = 4+1i; (1+2i)(3-1i) = 5+5i */
    const float c[4] = {1, 2, 3, -1};
    const int64_t s[1] = {2};
    em_array *a = NULL, *r = NULL;
    CHECK_OK(em_from_data(c, sizeof c, s, 1, EM_C64, &a));
    float out[2];
    CHECK_OK(em_reduce(EM_REDUCE_sum, a, NULL, 0, false, &r));
    CHECK_OK(em_read(r, out, 8));
    CHECK(out[0] == 4 && out[1] == 1);
    em_array_release(r);
    CHECK_OK(em_reduce(EM_REDUCE_product, a, NULL, 0, false, &r));
    CHECK_OK(em_read(r, out, 8));
    CHECK(out[0] == 5 && out[1] == 5);
    em_array_release(r);
    CHECK_ERR(em_reduce(EM_REDUCE_max, a, NULL, 0, false, &r), EM_ERR_ARGUMENT,
              "c64[2]");
    CHECK(r == NULL);
    em_array_release(a);
}

EM_TEST(reduce_strided_views) {
    /* a = [[0,1,2,3],[4,5,6,7],[8,9,10,11]]; transposed, reversed, sliced,
     * broadcast. */
    double v[12];
    for (int i = 0; i < 12; i++)
        v[i] = i;
    const int64_t shape[2] = {3, 4};
    em_array *a = t_from_f64(v, shape, 2, EM_F32);
    int perm[2] = {1, 0};
    em_array *t = NULL, *r = NULL;
    CHECK_OK(em_transpose(a, perm, 2, &t));
    int ax1[1] = {1}, ax0[1] = {0};
    const double tsum[4] = {12, 15, 18, 21};
    const int64_t s4[1] = {4}, s3[1] = {3};
    check_reduce(EM_REDUCE_sum, t, ax1, 1, false, tsum, 4, s4, 1);
    const double tmax[3] = {3, 7, 11};
    check_reduce(EM_REDUCE_max, t, ax0, 1, false, tmax, 3, s3, 1);
    em_array_release(t);

    int rev[1] = {1};
    CHECK_OK(em_reverse(a, rev, 1, &t));
    CHECK_OK(em_argreduce(EM_ARGMAX, t, &(em_argreduce_options){.axis = 1},
                          &r));
    int64_t idx[3];
    CHECK_OK(em_read(r, idx, sizeof idx));
    CHECK(idx[0] == 0 && idx[1] == 0 && idx[2] == 0);
    em_array_release(r);
    em_array_release(t);

    int64_t start[2] = {0, 1}, stop[2] = {3, 4}, step[2] = {2, 2};
    CHECK_OK(em_slice(a, start, stop, step, &t)); /* [[1,3],[9,11]] */
    const double ssum[1] = {24};
    check_reduce(EM_REDUCE_sum, t, NULL, 0, false, ssum, 1, NULL, 0);
    em_array_release(t);

    const int64_t bshape[3] = {5, 3, 4};
    CHECK_OK(em_broadcast_to(a, bshape, 3, &t));
    const double bsum[4] = {60, 75, 90, 105};
    int ax01[2] = {0, 1};
    check_reduce(EM_REDUCE_sum, t, ax01, 2, false, bsum, 4, s4, 1);
    em_array_release(t);
    em_array_release(a);
}

EM_TEST(reduce_scalar_input) {
    double v = 2.5;
    em_array *a = t_from_f64(&v, NULL, 0, EM_F64), *r = NULL;
    CHECK_OK(em_reduce(EM_REDUCE_sum, a, NULL, 0, true, &r));
    CHECK(em_array_ndim(r) == 0);
    double got;
    CHECK_OK(em_read(r, &got, 8));
    CHECK(got == 2.5);
    em_array_release(r);
    CHECK_OK(em_argreduce(EM_ARGMIN, a, &(em_argreduce_options){.all_axes = 1},
                          &r));
    int64_t i = -1;
    CHECK_OK(em_read(r, &i, 8));
    CHECK(i == 0);
    em_array_release(r);
    em_array_release(a);
}

EM_TEST(reduce_errors) {
    const double v[6] = {0};
    const int64_t shape[2] = {2, 3};
    em_array *a = t_from_f64(v, shape, 2, EM_F32), *r = NULL;
    em_array *p = t_from_f64(v, shape, 2, EM_PRED);
    int bad[1] = {2}, rep[2] = {1, -1};
    CHECK_ERR(em_reduce(EM_REDUCE_sum, a, bad, 1, false, &r), EM_ERR_ARGUMENT,
              "f32[2,3]");
    CHECK_ERR(em_reduce(EM_REDUCE_sum, a, rep, 2, false, &r), EM_ERR_ARGUMENT,
              "repeated");
    CHECK_ERR(em_reduce(EM_REDUCE_sum, p, NULL, 0, false, &r), EM_ERR_ARGUMENT,
              "pred[2,3]");
    CHECK_ERR(em_reduce((em_reduce_op)99, a, NULL, 0, false, &r),
              EM_ERR_ARGUMENT, "unknown");
    CHECK_ERR(em_reduce(EM_REDUCE_sum, NULL, NULL, 0, false, &r),
              EM_ERR_ARGUMENT, "NULL");
    CHECK(r == NULL);
    CHECK(strcmp(em_reduce_name(EM_REDUCE_product), "product") == 0);
    em_array_release(a);
    em_array_release(p);
}

EM_TEST(argreduce_ties_nan_and_dtypes) {
    /* [[1, 3, 3, 0], [NaN, 2, NaN, 9]] */
    const double v[8] = {1, 3, 3, 0, NAN, 2, NAN, 9};
    const int64_t shape[2] = {2, 4};
    em_dtype real[] = {EM_U8, EM_S16, EM_S64, EM_F16, EM_BF16, EM_F32, EM_F64};
    for (size_t d = 0; d < sizeof real / sizeof real[0]; d++) {
        em_dtype dt = real[d];
        bool fl = dt >= EM_F16;
        double vv[8];
        for (int i = 0; i < 8; i++)
            vv[i] = isnan(v[i]) ? (fl ? NAN : 5) : v[i];
        em_array *a = t_from_f64(vv, shape, 2, dt), *r = NULL;
        em_argreduce_options o = {.axis = -1};
        int64_t idx[2];
        CHECK_OK(em_argreduce(EM_ARGMAX, a, &o, &r));
        CHECK(em_array_dtype(r) == EM_S64);
        CHECK_OK(em_read(r, idx, sizeof idx));
        CHECK(idx[0] == 1 && idx[1] == (fl ? 0 : 3));
        em_array_release(r);
        o.tie_high = true;
        CHECK_OK(em_argreduce(EM_ARGMAX, a, &o, &r));
        CHECK_OK(em_read(r, idx, sizeof idx));
        CHECK(idx[0] == 2 && idx[1] == (fl ? 0 : 3));
        em_array_release(r);
        o.tie_high = false;
        CHECK_OK(em_argreduce(EM_ARGMIN, a, &o, &r));
        CHECK_OK(em_read(r, idx, sizeof idx));
        CHECK(idx[0] == 3 && idx[1] == (fl ? 0 : 1));
        em_array_release(r);
        /* Flattened, keep_axis, u8 indices. */
        em_argreduce_options all = {.all_axes = true, .keep_axis = true,
                                    .dtype = EM_U8};
        CHECK_OK(em_argreduce(EM_ARGMAX, a, &all, &r));
        CHECK(em_array_ndim(r) == 2 && em_array_shape(r)[0] == 1 &&
              em_array_shape(r)[1] == 1 && em_array_dtype(r) == EM_U8);
        uint8_t flat;
        CHECK_OK(em_read(r, &flat, 1));
        CHECK(flat == (fl ? 4 : 7));
        em_array_release(r);
        /* Axis 0 keeps the axis. */
        em_argreduce_options k0 = {.axis = 0, .keep_axis = true,
                                   .dtype = EM_S32};
        CHECK_OK(em_argreduce(EM_ARGMIN, a, &k0, &r));
        CHECK(em_array_ndim(r) == 2 && em_array_shape(r)[0] == 1);
        int32_t i32[4];
        CHECK_OK(em_read(r, i32, sizeof i32));
        CHECK(i32[0] == (fl ? 1 : 0) && i32[1] == 1 && i32[3] == 0);
        em_array_release(r);
        em_array_release(a);
    }
}

EM_TEST(argreduce_errors) {
    const int64_t shape[2] = {2, 0};
    em_array *e = NULL, *r = NULL;
    CHECK_OK(em_from_data(NULL, 0, shape, 2, EM_F32, &e));
    CHECK_ERR(em_argreduce(EM_ARGMAX, e, &(em_argreduce_options){.axis = 1},
                           &r),
              EM_ERR_ARGUMENT, "empty");
    CHECK_ERR(em_argreduce(EM_ARGMAX, e,
                           &(em_argreduce_options){.all_axes = true}, &r),
              EM_ERR_ARGUMENT, "empty");
    CHECK_ERR(em_argreduce(EM_ARGMAX, e, &(em_argreduce_options){.axis = 2},
                           &r),
              EM_ERR_ARGUMENT, "f32[2,0]");
    /* Reducing axis 0 of [2, 0] is fine: an empty result. */
    CHECK_OK(em_argreduce(EM_ARGMAX, e, &(em_argreduce_options){.axis = 0},
                          &r));
    CHECK_OK(em_eval(&r, 1));
    em_array_release(r);
    r = NULL;
    const double v[300] = {0};
    const int64_t n[1] = {300};
    em_array *a = t_from_f64(v, n, 1, EM_F32);
    CHECK_ERR(em_argreduce(EM_ARGMAX, a,
                           &(em_argreduce_options){.dtype = EM_F32}, &r),
              EM_ERR_ARGUMENT, "integer");
    CHECK_ERR(em_argreduce(EM_ARGMAX, a,
                           &(em_argreduce_options){.dtype = EM_S8}, &r),
              EM_ERR_ARGUMENT, "fit");
    em_array *c = t_from_f64(v, n, 1, EM_C64);
    CHECK_ERR(em_argreduce(EM_ARGMIN, c, NULL, &r), EM_ERR_ARGUMENT, "complex");
    CHECK(r == NULL);
    em_array_release(c);
    em_array_release(a);
    em_array_release(e);
}

EM_TEST(reduce_large_parallel_paths) {
    /* Sums of 1..n over long ranges: exact in f64 and s64. */
    const int64_t n = 1 << 20;
    double *v = malloc((size_t)n * sizeof(double));
    if (!v)
        return;
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)(i % 1000);
    const int64_t shape[2] = {4, n / 4};
    em_array *a = t_from_f64(v, shape, 2, EM_S64), *r = NULL;
    double want_all = 0, want_rows[4] = {0};
    for (int64_t i = 0; i < n; i++) {
        want_all += v[i];
        want_rows[i / (n / 4)] += v[i];
    }
    check_reduce(EM_REDUCE_sum, a, NULL, 0, false, &want_all, 1, NULL, 0);
    int ax1[1] = {1};
    const int64_t s4[1] = {4};
    check_reduce(EM_REDUCE_sum, a, ax1, 1, false, want_rows, 4, s4, 1);
    /* Column sums through a transposed view (row fold, split). */
    int perm[2] = {1, 0};
    em_array *t = NULL;
    CHECK_OK(em_transpose(a, perm, 2, &t));
    int ax0[1] = {0};
    check_reduce(EM_REDUCE_sum, t, ax0, 1, false, want_rows, 4, s4, 1);
    CHECK_OK(em_argreduce(EM_ARGMAX, t, &(em_argreduce_options){.axis = 0},
                          &r));
    int64_t idx[4];
    CHECK_OK(em_read(r, idx, sizeof idx));
    CHECK(idx[0] == 999 && idx[1] == 999 - (n / 4) % 1000);
    em_array_release(r);
    em_array_release(t);
    em_array_release(a);
    free(v);
}
