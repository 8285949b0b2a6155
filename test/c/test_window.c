/* Window reductions and scatters (include/emily_window.h): hand-computed
 * values, padding identities, dtypes, strided inputs and errors. */
#include "emily_window.h"
#include "test.h"

static em_window_options opts1(int n, const int64_t *w, const int64_t *s,
                               const int64_t *lo, const int64_t *hi,
                               const int64_t *d) {
    em_window_options o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < n; i++) {
        o.window[i] = w[i];
        o.strides[i] = s ? s[i] : 1;
        o.pad_low[i] = lo ? lo[i] : 0;
        o.pad_high[i] = hi ? hi[i] : 0;
        o.dilations[i] = d ? d[i] : 1;
    }
    return o;
}

EM_TEST(window_sum_2d_padding_strides) {
    /* [[1 2 3 4] [4 5 6 7] [7 8 9 10] [11 12 13 14]], window {2,2},
     * strides {2,1}, padding on the last axis (1, 0). */
    double v[16] = {1, 2, 3, 4, 4, 5, 6, 7, 7, 8, 9, 10, 11, 12, 13, 14};
    int64_t shape[2] = {4, 4}, w[2] = {2, 2}, s[2] = {2, 1}, lo[2] = {0, 1},
            hi[2] = {0, 0};
    em_array *a = t_from_f64(v, shape, 2, EM_S32), *out = NULL;
    em_window_options o = opts1(2, w, s, lo, hi, NULL);
    CHECK_OK(em_window_reduce(EM_WINDOW_SUM, a, &o, &out));
    CHECK(em_array_dtype(out) == EM_S32);
    CHECK(em_array_shape(out)[0] == 2 && em_array_shape(out)[1] == 4);
    double got[8], want[8] = {5, 12, 16, 20, 18, 38, 42, 46};
    t_read_f64(out, got, 8);
    for (int i = 0; i < 8; i++)
        CHECK_NEAR(got[i], want[i], 0);
    em_array_release(out);
    em_array_release(a);
}

EM_TEST(window_max_min_padding_identity) {
    double v[3] = {1, 2, 4};
    int64_t shape[1] = {3}, w[1] = {1}, lo[1] = {1}, hi[1] = {1};
    em_window_options o = opts1(1, w, NULL, lo, hi, NULL);
    em_dtype dts[] = {EM_F32, EM_F16, EM_BF16, EM_F64};
    for (int t = 0; t < 4; t++) {
        em_array *a = t_from_f64(v, shape, 1, dts[t]), *mx = NULL, *mn = NULL;
        CHECK_OK(em_window_reduce(EM_WINDOW_MAX, a, &o, &mx));
        CHECK_OK(em_window_reduce(EM_WINDOW_MIN, a, &o, &mn));
        double gx[5], gn[5];
        t_read_f64(mx, gx, 5);
        t_read_f64(mn, gn, 5);
        CHECK(isinf(gx[0]) && gx[0] < 0 && isinf(gx[4]) && gx[2] == 2);
        CHECK(isinf(gn[0]) && gn[0] > 0 && gn[3] == 4);
        em_array_release(mx);
        em_array_release(mn);
        em_array_release(a);
    }
    /* integers: the type's limits */
    em_array *a = t_from_f64(v, shape, 1, EM_S8), *mx = NULL;
    CHECK_OK(em_window_reduce(EM_WINDOW_MAX, a, &o, &mx));
    double g[5];
    t_read_f64(mx, g, 5);
    CHECK_NEAR(g[0], -128, 0);
    CHECK_NEAR(g[3], 4, 0);
    em_array_release(mx);
    em_array_release(a);
}

EM_TEST(window_dilation_and_product) {
    /* [1..6], window 2 dilated by 2: pairs (1,3) (2,4) (3,5) (4,6) */
    double v[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[1] = {6}, w[1] = {2}, d[1] = {2};
    em_window_options o = opts1(1, w, NULL, NULL, NULL, d);
    em_array *a = t_from_f64(v, shape, 1, EM_U16), *out = NULL;
    CHECK_OK(em_window_reduce(EM_WINDOW_PRODUCT, a, &o, &out));
    double got[4];
    t_read_f64(out, got, 4);
    CHECK_NEAR(got[0], 3, 0);
    CHECK_NEAR(got[3], 24, 0);
    em_array_release(out);
    em_array_release(a);
}

EM_TEST(window_strided_view_input) {
    double v[6] = {1, 2, 3, 4, 5, 6}; /* [[1 2 3] [4 5 6]] transposed */
    int64_t shape[2] = {2, 3}, w[2] = {2, 2};
    int perm[2] = {1, 0};
    em_array *a = t_from_f64(v, shape, 2, EM_F64), *t = NULL, *out = NULL;
    CHECK_OK(em_transpose(a, perm, 2, &t));
    em_window_options o = opts1(2, w, NULL, NULL, NULL, NULL);
    CHECK_OK(em_window_reduce(EM_WINDOW_SUM, t, &o, &out));
    double got[2];
    t_read_f64(out, got, 2); /* [[1 4] [2 5] [3 6]] -> 12, 16 */
    CHECK_NEAR(got[0], 12, 0);
    CHECK_NEAR(got[1], 16, 0);
    em_array_release(out);
    em_array_release(t);
    em_array_release(a);
}

EM_TEST(window_scatter_max_ties_last) {
    /* windows of 2 over [1 3 3 0], stride 1: maxima at 1 (3), 2 (last 3), 2 */
    double v[4] = {1, 3, 3, 0}, s[3] = {10, 20, 30};
    int64_t shape[1] = {4}, sshape[1] = {3}, w[1] = {2};
    em_array *a = t_from_f64(v, shape, 1, EM_F32);
    em_array *src = t_from_f64(s, sshape, 1, EM_S32), *init = NULL, *out = NULL;
    CHECK_OK(em_scalar_s64(1, EM_S32, &init));
    em_window_options o = opts1(1, w, NULL, NULL, NULL, NULL);
    CHECK_OK(em_window_scatter(true, a, src, init, &o, &out));
    CHECK(em_array_dtype(out) == EM_S32);
    double got[4];
    t_read_f64(out, got, 4);
    CHECK_NEAR(got[0], 1, 0);
    CHECK_NEAR(got[1], 11, 0);
    CHECK_NEAR(got[2], 51, 0);
    CHECK_NEAR(got[3], 1, 0);
    em_array_release(out);
    CHECK_OK(em_window_scatter(false, a, src, init, &o, &out));
    t_read_f64(out, got, 4); /* minima: 0 (1), 2 (last 3), 3 (0) */
    CHECK_NEAR(got[0], 11, 0);
    CHECK_NEAR(got[2], 21, 0);
    CHECK_NEAR(got[3], 31, 0);
    em_array_release(out);
    em_array_release(init);
    em_array_release(src);
    em_array_release(a);
}

EM_TEST(window_errors) {
    double v[4] = {0};
    int64_t shape[2] = {2, 2}, w[2] = {3, 1}, w0[2] = {0, 1}, s1[1] = {1};
    em_array *a = t_from_f64(v, shape, 2, EM_C64), *out = NULL;
    em_window_options o = opts1(2, w0, NULL, NULL, NULL, NULL);
    CHECK_ERR(em_window_reduce(EM_WINDOW_MAX, a, &o, &out), EM_ERR_ARGUMENT,
              "window_max");
    CHECK_ERR(em_window_reduce(EM_WINDOW_SUM, a, &o, &out), EM_ERR_ARGUMENT,
              ">= 1");
    CHECK(out == NULL);
    /* a window larger than the axis gives an empty output, not an error */
    o = opts1(2, w, NULL, NULL, NULL, NULL);
    CHECK_OK(em_window_reduce(EM_WINDOW_SUM, a, &o, &out));
    CHECK(em_array_size(out) == 0);
    em_array_release(out);
    /* scatter: source of the wrong shape */
    em_array *r = t_from_f64(v, shape, 2, EM_F32), *src = NULL, *init = NULL;
    CHECK_OK(em_from_data(v, 8, s1, 1, EM_F64, &src));
    CHECK_OK(em_scalar_f64(0, EM_F64, &init));
    int64_t w1[2] = {1, 1};
    o = opts1(2, w1, NULL, NULL, NULL, NULL);
    CHECK_ERR(em_window_scatter(true, r, src, init, &o, &out), EM_ERR_ARGUMENT,
              "source");
    em_array_release(init);
    em_array_release(src);
    em_array_release(r);
    em_array_release(a);
}
