/* Tests of em_scan (include/emily_scan.h) with hand-computed values. */
#include "test.h"

#include "emily_scan.h"

#include <stdlib.h>

static void scan_f64(em_scan_op op, const double *x, const int64_t *shape,
                     int ndim, em_dtype dtype, int axis, bool reverse,
                     double *y, size_t n) {
    em_array *a = t_from_f64(x, shape, ndim, dtype), *out = NULL;
    CHECK_OK(em_scan(op, a, axis, reverse, &out));
    if (out) {
        CHECK(em_array_dtype(out) == dtype);
        t_read_f64(out, y, n);
    }
    em_array_release(out);
    em_array_release(a);
}

EM_TEST(scan_sum_product_1d) {
    double x[4] = {1, 2, 3, 4}, y[4];
    int64_t s[1] = {4};
    scan_f64(EM_SCAN_SUM, x, s, 1, EM_S32, 0, false, y, 4);
    CHECK(y[0] == 1 && y[1] == 3 && y[2] == 6 && y[3] == 10);
    scan_f64(EM_SCAN_SUM, x, s, 1, EM_F32, 0, true, y, 4);
    CHECK(y[0] == 10 && y[1] == 9 && y[2] == 7 && y[3] == 4);
    scan_f64(EM_SCAN_PRODUCT, x, s, 1, EM_U8, -1, false, y, 4);
    CHECK(y[0] == 1 && y[1] == 2 && y[2] == 6 && y[3] == 24);
    scan_f64(EM_SCAN_PRODUCT, x, s, 1, EM_F16, 0, true, y, 4);
    CHECK(y[0] == 24 && y[1] == 24 && y[2] == 12 && y[3] == 4);
}

EM_TEST(scan_axes_2d) {
    /* [[2, 5, 1], [4, 3, 6]] */
    double x[6] = {2, 5, 1, 4, 3, 6}, y[6];
    int64_t s[2] = {2, 3};
    scan_f64(EM_SCAN_SUM, x, s, 2, EM_S64, 0, false, y, 6);
    double e0[6] = {2, 5, 1, 6, 8, 7};
    for (int i = 0; i < 6; i++)
        CHECK(y[i] == e0[i]);
    scan_f64(EM_SCAN_MAX, x, s, 2, EM_F64, 1, false, y, 6);
    double e1[6] = {2, 5, 5, 4, 4, 6};
    for (int i = 0; i < 6; i++)
        CHECK(y[i] == e1[i]);
    scan_f64(EM_SCAN_MIN, x, s, 2, EM_BF16, 1, true, y, 6);
    double e2[6] = {1, 1, 1, 3, 3, 6};
    for (int i = 0; i < 6; i++)
        CHECK(y[i] == e2[i]);
    scan_f64(EM_SCAN_MIN, x, s, 2, EM_S8, 0, true, y, 6);
    double e3[6] = {2, 3, 1, 4, 3, 6};
    for (int i = 0; i < 6; i++)
        CHECK(y[i] == e3[i]);
}

EM_TEST(scan_integer_wraps) {
    double x[3] = {100, 100, 100}, y[3];
    int64_t s[1] = {3};
    scan_f64(EM_SCAN_SUM, x, s, 1, EM_S8, 0, false, y, 3);
    CHECK(y[0] == 100 && y[1] == -56 && y[2] == 44);
    double p[3] = {256, 256, 256};
    scan_f64(EM_SCAN_PRODUCT, p, s, 1, EM_U16, 0, false, y, 3);
    CHECK(y[0] == 256 && y[1] == 0 && y[2] == 0);
    double q[3] = {-3, 65536, 65536};
    scan_f64(EM_SCAN_PRODUCT, q, s, 1, EM_S64, 0, false, y, 3);
    CHECK(y[0] == -3 && y[1] == -196608.0 && y[2] == -12884901888.0);
}

EM_TEST(scan_nan_propagation) {
    double x[5] = {1, NAN, 5, -INFINITY, 2}, y[5];
    int64_t s[1] = {5};
    scan_f64(EM_SCAN_MAX, x, s, 1, EM_F32, 0, false, y, 5);
    CHECK(y[0] == 1 && isnan(y[1]) && isnan(y[2]) && isnan(y[3]) &&
          isnan(y[4]));
    scan_f64(EM_SCAN_MIN, x, s, 1, EM_F64, 0, true, y, 5);
    CHECK(isnan(y[0]) && isnan(y[1]) && y[2] == -INFINITY &&
          y[3] == -INFINITY && y[4] == 2);
}

EM_TEST(scan_complex) {
    /* (1+i), (2-i), (0+2i) as interleaved c128 */
    double z3[6] = {1, 1, 2, -1, 0, 2}, r[6];
    int64_t s[1] = {3};
    em_array *z = NULL, *out = NULL;
    CHECK_OK(em_from_data(z3, sizeof z3, s, 1, EM_C128, &z));
    CHECK_OK(em_scan(EM_SCAN_SUM, z, 0, false, &out));
    CHECK_OK(em_read(out, r, sizeof r));
    CHECK(r[0] == 1 && r[1] == 1 && r[2] == 3 && r[3] == 0 && r[4] == 3 &&
          r[5] == 2);
    em_array_release(out);
    CHECK_OK(em_scan(EM_SCAN_PRODUCT, z, 0, false, &out));
    CHECK_OK(em_read(out, r, sizeof r));
    /* (1+i)(2-i) = 3+i; (3+i)(2i) = -2+6i */
    CHECK(r[0] == 1 && r[1] == 1 && r[2] == 3 && r[3] == 1 && r[4] == -2 &&
          r[5] == 6);
    em_array_release(out);
    out = NULL;
    CHECK_ERR(em_scan(EM_SCAN_MAX, z, 0, false, &out), EM_ERR_ARGUMENT,
              "expected a real dtype");
    em_array_release(z);
}

EM_TEST(scan_strided_and_empty) {
    /* Transposed {3, 2} view of [[1, 2, 3], [4, 5, 6]]: scan along axis 0
     * of the view = along the rows of the original. */
    double x[6] = {1, 2, 3, 4, 5, 6}, y[6];
    int64_t s[2] = {2, 3};
    em_array *a = t_from_f64(x, s, 2, EM_S32), *t = NULL, *out = NULL;
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(a, perm, 2, &t));
    CHECK_OK(em_scan(EM_SCAN_SUM, t, 0, false, &out));
    t_read_f64(out, y, 6);
    double e[6] = {1, 4, 3, 9, 6, 15};
    for (int i = 0; i < 6; i++)
        CHECK(y[i] == e[i]);
    em_array_release(out);
    CHECK_OK(em_scan(EM_SCAN_SUM, t, 1, true, &out));
    t_read_f64(out, y, 6);
    double e2[6] = {5, 4, 7, 5, 9, 6};
    for (int i = 0; i < 6; i++)
        CHECK(y[i] == e2[i]);
    em_array_release(out);
    em_array_release(t);
    em_array_release(a);

    int64_t z[2] = {0, 3};
    em_array *e0 = t_from_f64(x, z, 2, EM_F32);
    CHECK_OK(em_scan(EM_SCAN_PRODUCT, e0, 0, false, &out));
    CHECK(em_array_size(out) == 0);
    CHECK_OK(em_eval(&out, 1));
    em_array_release(out);
    out = NULL;
    CHECK_ERR(em_scan(EM_SCAN_SUM, e0, 2, false, &out), EM_ERR_ARGUMENT,
              "axis");
    CHECK_ERR(em_scan((em_scan_op)9, e0, 0, false, &out), EM_ERR_ARGUMENT,
              "unknown op");
    em_array_release(e0);
    em_array *p = NULL;
    uint8_t one = 1;
    CHECK_OK(em_scalar(&one, EM_PRED, &p));
    CHECK_ERR(em_scan(EM_SCAN_SUM, p, 0, false, &out), EM_ERR_ARGUMENT,
              "not pred");
    CHECK(out == NULL);
    em_array_release(p);
}

EM_TEST(scan_long_lane_blocked) {
    /* 1-D lanes long enough for the blocked (parallel) path; integers give
     * exact answers whatever the split. */
    int64_t n = 1000003;
    int32_t *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        x[i] = (int32_t)(i % 7) - 3;
    int64_t s[1] = {n};
    em_array *a = NULL, *out = NULL;
    CHECK_OK(em_from_data(x, (size_t)n * 4, s, 1, EM_S32, &a));
    for (int rev = 0; rev < 2; rev++) {
        CHECK_OK(em_scan(EM_SCAN_SUM, a, 0, rev, &out));
        CHECK_OK(em_read(out, y, (size_t)n * 4));
        int32_t acc = 0;
        int bad = 0;
        for (int64_t k = 0; k < n; k++) {
            int64_t i = rev ? n - 1 - k : k;
            acc += x[i];
            bad += y[i] != acc;
        }
        CHECK(bad == 0);
        em_array_release(out);
        CHECK_OK(em_scan(EM_SCAN_MAX, a, 0, rev, &out));
        CHECK_OK(em_read(out, y, (size_t)n * 4));
        bad = 0;
        int32_t mx = INT32_MIN;
        for (int64_t k = 0; k < n; k++) {
            int64_t i = rev ? n - 1 - k : k;
            mx = x[i] > mx ? x[i] : mx;
            bad += y[i] != mx;
        }
        CHECK(bad == 0);
        em_array_release(out);
    }
    em_array_release(a);
    free(x);
    free(y);
}
