/*
 * test_autodiff.c — every vjp rule against central finite differences in
 * f64 on random inputs: the cotangent is a random array W, so em_vjp gives
 * the gradient of L = sum(f(x) * W), compared elementwise with
 * (L(x + h e_j) - L(x - h e_j)) / 2h. Plus hand-derived values and the
 * error paths.
 */
#include "emily_autodiff.h"
#include "emily_conv.h"
#include "emily_linalg.h"
#include "emily_pad.h"
#include "emily_scan.h"
#include "emily_window.h"
#include "emily_sort.h"
#include "test.h"

#include <stdlib.h>

#define MAX_IN 3

typedef em_status (*fn_t)(em_array *const *x, em_array **out);

typedef struct grad_case {
    const char *name;
    fn_t f;
    int nin;
    int ndim[MAX_IN];
    int64_t shape[MAX_IN][4];
    double lo, hi; /* input range */
} grad_case;

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double rnd(double lo, double hi) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}

static int64_t count(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* L = sum(f(x) * w) evaluated at the given input values. */
static double loss(const grad_case *gc, double *const *vals, const double *w,
                   int64_t nout) {
    em_array *x[MAX_IN] = {NULL};
    for (int i = 0; i < gc->nin; i++)
        x[i] = t_from_f64(vals[i], gc->shape[i], gc->ndim[i], EM_F64);
    em_array *y = NULL;
    double total = NAN;
    if (gc->f(x, &y) == EM_OK) {
        double *yv = malloc(sizeof(double) * (size_t)(nout ? nout : 1));
        t_read_f64(y, yv, (size_t)nout);
        total = 0;
        for (int64_t j = 0; j < nout; j++)
            total += yv[j] * w[j];
        free(yv);
    }
    em_array_release(y);
    for (int i = 0; i < gc->nin; i++)
        em_array_release(x[i]);
    return total;
}

static void check_case(const grad_case *gc) {
    double *vals[MAX_IN];
    em_array *x[MAX_IN] = {NULL}, *wrap[MAX_IN] = {NULL};
    for (int i = 0; i < gc->nin; i++) {
        int64_t n = count(gc->shape[i], gc->ndim[i]);
        vals[i] = malloc(sizeof(double) * (size_t)(n ? n : 1));
        for (int64_t j = 0; j < n; j++)
            vals[i][j] = rnd(gc->lo, gc->hi);
        x[i] = t_from_f64(vals[i], gc->shape[i], gc->ndim[i], EM_F64);
        CHECK_OK(em_identity(x[i], &wrap[i]));
    }
    em_array *y = NULL, *w = NULL, *grads[MAX_IN] = {NULL};
    CHECK_OK(gc->f(wrap, &y));
    if (!y) {
        fprintf(stderr, "  case %s: build failed\n", gc->name);
        goto done;
    }
    int64_t nout = em_array_size(y);
    double *wv = malloc(sizeof(double) * (size_t)(nout ? nout : 1));
    for (int64_t j = 0; j < nout; j++)
        wv[j] = rnd(-1, 1);
    w = t_from_f64(wv, em_array_shape(y), em_array_ndim(y), EM_F64);
    em_status st = em_vjp(&y, &w, 1, wrap, (size_t)gc->nin, grads);
    CHECK_OK(st);
    for (int i = 0; st == EM_OK && i < gc->nin; i++) {
        int64_t n = count(gc->shape[i], gc->ndim[i]);
        double *g = malloc(sizeof(double) * (size_t)(n ? n : 1));
        t_read_f64(grads[i], g, (size_t)n);
        for (int64_t j = 0; j < n; j++) {
            const double h = 1e-6, keep = vals[i][j];
            vals[i][j] = keep + h;
            double up = loss(gc, vals, wv, nout);
            vals[i][j] = keep - h;
            double down = loss(gc, vals, wv, nout);
            vals[i][j] = keep;
            double fd = (up - down) / (2 * h);
            if (!(fabs(fd - g[j]) <= 1e-5 * (1 + fabs(fd))))
                em_test_fail(__FILE__, __LINE__,
                             "%s: d/dx%d[%lld] = %.10g, finite difference "
                             "%.10g",
                             gc->name, i, (long long)j, g[j], fd);
        }
        free(g);
    }
    free(wv);
done:
    em_array_release(y);
    em_array_release(w);
    for (int i = 0; i < gc->nin; i++) {
        em_array_release(grads[i]);
        em_array_release(wrap[i]);
        em_array_release(x[i]);
        free(vals[i]);
    }
}

/* ---- the functions ------------------------------------------------------ */

#define UNARY_FN(op)                                                           \
    static em_status f_##op(em_array *const *x, em_array **out) {              \
        return em_unary(EM_UNARY_##op, x[0], out);                             \
    }
#define BINARY_FN(op)                                                          \
    static em_status f_##op(em_array *const *x, em_array **out) {              \
        return em_binary(EM_BINARY_##op, x[0], x[1], out);                     \
    }
UNARY_FN(negate)
UNARY_FN(abs)
UNARY_FN(sqrt)
UNARY_FN(rsqrt)
UNARY_FN(exp)
UNARY_FN(expm1)
UNARY_FN(log)
UNARY_FN(log1p)
UNARY_FN(sin)
UNARY_FN(cos)
UNARY_FN(tan)
UNARY_FN(tanh)
UNARY_FN(sigmoid)
UNARY_FN(erf)
UNARY_FN(erfc)
UNARY_FN(erf_inv)
UNARY_FN(asin)
UNARY_FN(acos)
UNARY_FN(atan)
UNARY_FN(sinh)
UNARY_FN(cosh)
UNARY_FN(asinh)
UNARY_FN(acosh)
UNARY_FN(atanh)
UNARY_FN(cbrt)
UNARY_FN(real)
UNARY_FN(floor)
BINARY_FN(add)
BINARY_FN(subtract)
BINARY_FN(multiply)
BINARY_FN(divide)
BINARY_FN(pow)
BINARY_FN(maximum)
BINARY_FN(minimum)
BINARY_FN(remainder)
BINARY_FN(atan2)

static em_status f_select(em_array *const *x, em_array **out) {
    em_array *half = NULL, *pred = NULL;
    em_status st = em_scalar_f64(0.5, EM_F64, &half);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_greater, x[0], half, &pred);
    if (st == EM_OK)
        st = em_select(pred, x[1], x[2], out);
    em_array_release(half);
    em_array_release(pred);
    return st;
}
static em_status f_clip(em_array *const *x, em_array **out) {
    return em_clip(x[0], x[1], x[2], out);
}

#define REDUCE_FN(name, op, ...)                                               \
    static em_status f_##name(em_array *const *x, em_array **out) {            \
        const int axes[] = {__VA_ARGS__};                                      \
        return em_reduce(EM_REDUCE_##op, x[0], axes,                           \
                         (int)(sizeof axes / sizeof axes[0]), false, out);     \
    }
REDUCE_FN(sum_1, sum, 1)
REDUCE_FN(sum_02, sum, 0, 2)
REDUCE_FN(max_1, max, 1)
REDUCE_FN(min_0, min, 0)
REDUCE_FN(product_2, product, 2)
static em_status f_sum_all_keep(em_array *const *x, em_array **out) {
    return em_reduce(EM_REDUCE_sum, x[0], NULL, 0, true, out);
}

/* Shape ops compose a transposed (strided) input with each op, so rules
 * see views of views. */
static em_status f_transpose(em_array *const *x, em_array **out) {
    const int perm[] = {2, 0, 1};
    return em_transpose(x[0], perm, 3, out);
}
static em_status f_reshape_of_transpose(em_array *const *x, em_array **out) {
    const int perm[] = {1, 0, 2};
    em_array *t = NULL;
    em_status st = em_transpose(x[0], perm, 3, &t);
    const int64_t shape[] = {4, 6};
    if (st == EM_OK)
        st = em_reshape(t, shape, 2, out);
    em_array_release(t);
    return st;
}
static em_status f_broadcast(em_array *const *x, em_array **out) {
    const int64_t shape[] = {2, 3, 4};
    return em_broadcast_to(x[0], shape, 3, out);
}
static em_status f_squeeze_expand(em_array *const *x, em_array **out) {
    em_array *s = NULL;
    const int axes[] = {1};
    em_status st = em_squeeze(x[0], axes, 1, &s);
    if (st == EM_OK)
        st = em_expand_dims(s, 0, out);
    em_array_release(s);
    return st;
}
static em_status f_slice(em_array *const *x, em_array **out) {
    const int64_t start[] = {1, 0, 1}, stop[] = {3, 4, 4}, step[] = {1, 2, 2};
    return em_slice(x[0], start, stop, step, out);
}
static em_status f_reverse(em_array *const *x, em_array **out) {
    const int axes[] = {0, 2};
    return em_reverse(x[0], axes, 2, out);
}
static em_status f_contiguous(em_array *const *x, em_array **out) {
    const int perm[] = {1, 0, 2};
    em_array *t = NULL;
    em_status st = em_transpose(x[0], perm, 3, &t);
    if (st == EM_OK)
        st = em_contiguous(t, out);
    em_array_release(t);
    return st;
}
static em_status f_as_type(em_array *const *x, em_array **out) {
    em_array *f = NULL;
    em_status st = em_as_type(x[0], EM_F32, &f);
    if (st == EM_OK)
        st = em_as_type(f, EM_F64, out);
    em_array_release(f);
    return st;
}
static em_status f_dot(em_array *const *x, em_array **out) {
    /* a [2,3,4] . b [4,2,5]: batch a0-b1, contract a2-b0 -> [2,3,5] */
    em_dot_options o;
    memset(&o, 0, sizeof o);
    o.nbatch = 1;
    o.batch_a[0] = 0;
    o.batch_b[0] = 1;
    o.ncontract = 1;
    o.contract_a[0] = 2;
    o.contract_b[0] = 0;
    return em_dot(x[0], x[1], &o, out);
}
static em_status f_matmul(em_array *const *x, em_array **out) {
    return em_matmul(x[0], x[1], out);
}
static em_status f_gather(em_array *const *x, em_array **out) {
    const double idx[] = {0, 2, 1, 1, 0, 2, 0, 2}; /* rows of (a0, a2) */
    const int64_t shape[] = {4, 2};
    em_array *i = t_from_f64(idx, shape, 2, EM_S32);
    const int axes[] = {0, 2};
    em_status st = em_gather(x[0], i, axes, 2, out);
    em_array_release(i);
    return st;
}
static em_status f_take(em_array *const *x, em_array **out) {
    const double idx[] = {3, 0, 3, 1, 2, 3};
    const int64_t shape[] = {2, 3};
    em_array *i = t_from_f64(idx, shape, 2, EM_S64);
    em_status st = em_take(x[0], i, 1, out);
    em_array_release(i);
    return st;
}
static em_status f_take_along(em_array *const *x, em_array **out) {
    const double idx[] = {0, 3, 3, 1, 2, 0, 1, 1, 3, 0, 2, 2};
    const int64_t shape[] = {3, 4};
    em_array *i = t_from_f64(idx, shape, 2, EM_S32);
    em_status st = em_take_along_axis(x[0], i, 1, out);
    em_array_release(i);
    return st;
}
static em_status indexed(em_array *const *x, bool add, em_array **out) {
    const double idx[] = {1, 0, 1, 2};
    const int64_t shape[] = {4, 1};
    em_array *i = t_from_f64(idx, shape, 2, EM_S64);
    em_status st = add ? em_indexed_add(x[0], i, x[1], NULL, 0, out)
                       : em_indexed_put(x[0], i, x[1], NULL, 0, out);
    em_array_release(i);
    return st;
}
static em_status f_indexed_add(em_array *const *x, em_array **out) {
    return indexed(x, true, out);
}
static em_status f_indexed_put(em_array *const *x, em_array **out) {
    /* distinct rows (duplicates make put's result order-dependent) */
    const double idx[] = {2, 0};
    const int64_t shape[] = {2, 1};
    em_array *i = t_from_f64(idx, shape, 2, EM_S64);
    em_status st = em_indexed_put(x[0], i, x[1], NULL, 0, out);
    em_array_release(i);
    return st;
}
static em_status f_put_slice(em_array *const *x, em_array **out) {
    const int64_t start[] = {1, 1};
    return em_put_slice(x[0], start, x[1], out);
}
static em_status f_concatenate(em_array *const *x, em_array **out) {
    return em_concatenate(x, 3, 1, out);
}
static em_status f_pad(em_array *const *x, em_array **out) {
    const int64_t low[] = {-1, 2}, high[] = {1, -2}, interior[] = {1, 2};
    return em_pad(x[0], x[1], low, high, interior, out);
}
static em_status starts_of(const double *v, int n, em_array **out) {
    const int64_t shape[] = {n};
    *out = t_from_f64(v, shape, 1, EM_S32);
    return *out ? EM_OK : EM_ERR_RUNTIME;
}
static em_status f_dynamic_slice(em_array *const *x, em_array **out) {
    const double s[] = {1, 2};
    const int64_t sizes[] = {2, 2};
    em_array *starts = NULL;
    em_status st = starts_of(s, 2, &starts);
    if (st == EM_OK)
        st = em_dynamic_slice(x[0], starts, sizes, NULL, out);
    em_array_release(starts);
    return st;
}
static em_status f_dynamic_put_slice(em_array *const *x, em_array **out) {
    const double s[] = {0, 5}; /* clamped to 2 */
    em_array *starts = NULL;
    em_status st = starts_of(s, 2, &starts);
    if (st == EM_OK)
        st = em_dynamic_put_slice(x[0], starts, x[1], out);
    em_array_release(starts);
    return st;
}
/* x used twice, and a stop_gradient branch: d/dx (x*x + sg(x)) = 2x. */
static em_status f_reuse(em_array *const *x, em_array **out) {
    em_array *sq = NULL, *sg = NULL;
    em_status st = em_binary(EM_BINARY_multiply, x[0], x[0], &sq);
    if (st == EM_OK)
        st = em_stop_gradient(x[0], &sg);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_add, sq, sg, out);
    em_array_release(sq);
    em_array_release(sg);
    return st;
}

static em_status f_sort_desc(em_array *const *x, em_array **out) {
    return em_sort(x[0], 1, true, out);
}
#define SCAN_FN(name, op, axis, rev)                                           \
    static em_status f_##name(em_array *const *x, em_array **out) {            \
        return em_scan(op, x[0], axis, rev, out);                              \
    }
SCAN_FN(cumsum, EM_SCAN_SUM, 1, false)
SCAN_FN(cumsum_rev, EM_SCAN_SUM, 0, true)
SCAN_FN(cumprod, EM_SCAN_PRODUCT, 1, false)
SCAN_FN(cummax, EM_SCAN_MAX, 1, false)
SCAN_FN(cummin_rev, EM_SCAN_MIN, 1, true)

/* window 2x3, strides 2x1, padding (1,0)x(2,1), dilation 1x2 */
static em_status window(em_window_op op, bool dilate, em_array *const *x,
                        em_array **out) {
    em_window_options o;
    memset(&o, 0, sizeof o);
    o.window[0] = 2, o.window[1] = 3;
    o.strides[0] = 2, o.strides[1] = 1;
    o.pad_low[0] = 1, o.pad_high[0] = 0;
    o.pad_low[1] = 2, o.pad_high[1] = 1;
    o.dilations[0] = 1, o.dilations[1] = dilate ? 2 : 1;
    return em_window_reduce(op, x[0], &o, out);
}
static em_status f_window_sum(em_array *const *x, em_array **out) {
    return window(EM_WINDOW_SUM, true, x, out);
}
static em_status f_window_product(em_array *const *x, em_array **out) {
    return window(EM_WINDOW_PRODUCT, true, x, out);
}
static em_status f_window_max(em_array *const *x, em_array **out) {
    return window(EM_WINDOW_MAX, false, x, out);
}
static em_status f_window_min(em_array *const *x, em_array **out) {
    return window(EM_WINDOW_MIN, false, x, out);
}
/* Windows that crop: negative low padding, stride 3. */
static em_status f_window_sum_crop(em_array *const *x, em_array **out) {
    em_window_options o;
    memset(&o, 0, sizeof o);
    o.window[0] = 2, o.strides[0] = 3, o.pad_low[0] = -1, o.pad_high[0] = 2;
    o.window[1] = 1, o.strides[1] = 1;
    return em_window_reduce(EM_WINDOW_SUM, x[0], &o, out);
}

static em_status f_conv_plain(em_array *const *x, em_array **out) {
    em_conv_options o;
    memset(&o, 0, sizeof o);
    return em_conv(x[0], x[1], &o, out);
}
static em_status f_conv_strided(em_array *const *x, em_array **out) {
    em_conv_options o;
    memset(&o, 0, sizeof o);
    o.strides[0] = 2, o.pad_low[0] = 1, o.pad_high[0] = 2;
    o.kernel_dilation[0] = 2;
    return em_conv(x[0], x[1], &o, out);
}
static em_status f_conv_grouped_2d(em_array *const *x, em_array **out) {
    em_conv_options o;
    memset(&o, 0, sizeof o);
    o.strides[0] = 1, o.strides[1] = 2;
    o.pad_low[0] = 1, o.pad_high[1] = 1;
    o.feature_groups = 2;
    return em_conv(x[0], x[1], &o, out);
}
static em_status f_conv_input_dilated(em_array *const *x, em_array **out) {
    em_conv_options o;
    memset(&o, 0, sizeof o);
    o.input_dilation[0] = 2, o.pad_low[0] = -1, o.pad_high[0] = 1;
    return em_conv(x[0], x[1], &o, out);
}

#define S1(a) {1}, {{a}}
#define S2(a, b) {2}, {{a, b}}
#define S3(a, b, c) {3}, {{a, b, c}}

static const grad_case unary_cases[] = {
    {"negate", f_negate, 1, S2(2, 3), -2, 2},
    {"abs", f_abs, 1, S2(2, 3), 0.1, 2},
    {"sqrt", f_sqrt, 1, S2(2, 3), 0.5, 3},
    {"rsqrt", f_rsqrt, 1, S2(2, 3), 0.5, 3},
    {"exp", f_exp, 1, S2(2, 3), -2, 2},
    {"expm1", f_expm1, 1, S2(2, 3), -2, 2},
    {"log", f_log, 1, S2(2, 3), 0.5, 3},
    {"log1p", f_log1p, 1, S2(2, 3), -0.5, 3},
    {"sin", f_sin, 1, S2(2, 3), -3, 3},
    {"cos", f_cos, 1, S2(2, 3), -3, 3},
    {"tan", f_tan, 1, S2(2, 3), -1, 1},
    {"tanh", f_tanh, 1, S2(2, 3), -2, 2},
    {"sigmoid", f_sigmoid, 1, S2(2, 3), -3, 3},
    {"erf", f_erf, 1, S2(2, 3), -2, 2},
    {"erfc", f_erfc, 1, S2(2, 3), -2, 2},
    {"erf_inv", f_erf_inv, 1, S2(2, 3), -0.9, 0.9},
    {"asin", f_asin, 1, S2(2, 3), -0.9, 0.9},
    {"acos", f_acos, 1, S2(2, 3), -0.9, 0.9},
    {"atan", f_atan, 1, S2(2, 3), -3, 3},
    {"sinh", f_sinh, 1, S2(2, 3), -2, 2},
    {"cosh", f_cosh, 1, S2(2, 3), -2, 2},
    {"asinh", f_asinh, 1, S2(2, 3), -3, 3},
    {"acosh", f_acosh, 1, S2(2, 3), 1.2, 3},
    {"atanh", f_atanh, 1, S2(2, 3), -0.9, 0.9},
    {"cbrt", f_cbrt, 1, S2(2, 3), 0.3, 3},
    {"real", f_real, 1, S2(2, 3), -2, 2},
    {"floor", f_floor, 1, S2(2, 3), 0.1, 0.9},
};

static const grad_case binary_cases[] = {
    {"add", f_add, 2, {2, 1}, {{2, 3}, {3}}, -2, 2},
    {"subtract", f_subtract, 2, {2, 2}, {{2, 3}, {2, 1}}, -2, 2},
    {"multiply", f_multiply, 2, {2, 0}, {{2, 3}, {0}}, -2, 2},
    {"divide", f_divide, 2, {2, 2}, {{2, 3}, {1, 3}}, 0.5, 2},
    {"pow", f_pow, 2, {2, 1}, {{2, 3}, {3}}, 0.5, 2},
    {"maximum", f_maximum, 2, {2, 2}, {{2, 3}, {2, 3}}, -2, 2},
    {"minimum", f_minimum, 2, {2, 1}, {{2, 3}, {3}}, -2, 2},
    {"remainder", f_remainder, 2, {2, 2}, {{2, 3}, {2, 3}}, 0.3, 2},
    {"atan2", f_atan2, 2, {2, 2}, {{2, 3}, {2, 3}}, -2, 2},
    {"select", f_select, 3, {2, 2, 1}, {{2, 3}, {2, 3}, {3}}, 0, 1},
    {"clip", f_clip, 3, {2, 0, 1}, {{2, 3}, {0}, {3}}, 0, 1},
};

static const grad_case conv_cases[] = {
    {"conv", f_conv_plain, 2, {3, 3}, {{2, 3, 5}, {4, 3, 2}}, -1, 1},
    {"conv strided, padded, kernel dilation", f_conv_strided, 2, {3, 3},
     {{1, 2, 7}, {3, 2, 2}}, -1, 1},
    {"conv 2-d, feature groups", f_conv_grouped_2d, 2, {4, 4},
     {{1, 4, 4, 5}, {6, 2, 2, 3}}, -1, 1},
    {"conv input dilation, cropping", f_conv_input_dilated, 2, {3, 3},
     {{1, 1, 4}, {2, 1, 3}}, -1, 1},
};

static const grad_case ordering_cases[] = {
    {"sort descending", f_sort_desc, 1, S2(3, 5), -2, 2},
    {"cumulative sum", f_cumsum, 1, S2(3, 5), -2, 2},
    {"cumulative sum reverse", f_cumsum_rev, 1, S2(3, 5), -2, 2},
    {"cumulative product", f_cumprod, 1, S2(3, 5), 0.5, 1.5},
    {"cumulative max", f_cummax, 1, S2(3, 6), -2, 2},
    {"cumulative min reverse", f_cummin_rev, 1, S2(3, 6), -2, 2},
    {"window sum", f_window_sum, 1, S2(5, 6), -2, 2},
    {"window product", f_window_product, 1, S2(5, 6), 0.5, 1.5},
    {"window max", f_window_max, 1, S2(5, 6), -2, 2},
    {"window min", f_window_min, 1, S2(5, 6), -2, 2},
    {"window sum cropped", f_window_sum_crop, 1, S2(8, 2), -2, 2},
};

static const grad_case reduce_cases[] = {
    {"sum axis 1", f_sum_1, 1, S3(2, 3, 4), -2, 2},
    {"sum axes 0,2", f_sum_02, 1, S3(2, 3, 4), -2, 2},
    {"sum all keep", f_sum_all_keep, 1, S2(3, 4), -2, 2},
    {"max axis 1", f_max_1, 1, S3(2, 3, 4), -2, 2},
    {"min axis 0", f_min_0, 1, S2(3, 4), -2, 2},
    {"product axis 2", f_product_2, 1, S3(2, 3, 4), 0.5, 1.5},
};

static const grad_case shape_cases[] = {
    {"transpose", f_transpose, 1, S3(2, 3, 4), -2, 2},
    {"reshape of transpose", f_reshape_of_transpose, 1, S3(2, 3, 4), -2, 2},
    {"broadcast", f_broadcast, 1, S2(3, 1), -2, 2},
    {"squeeze+expand", f_squeeze_expand, 1, S3(2, 1, 4), -2, 2},
    {"slice strided", f_slice, 1, S3(3, 4, 5), -2, 2},
    {"reverse", f_reverse, 1, S3(2, 3, 4), -2, 2},
    {"contiguous", f_contiguous, 1, S3(2, 3, 4), -2, 2},
    {"dot batch", f_dot, 2, {3, 3}, {{2, 3, 4}, {4, 2, 5}}, -1, 1},
    {"matmul broadcast batch", f_matmul, 2, {2, 3}, {{3, 4}, {2, 4, 5}}, -1,
     1},
    {"matmul size-1 batch", f_matmul, 2, {3, 3}, {{1, 3, 4}, {2, 4, 2}}, -1,
     1},
    {"matvec", f_matmul, 2, {2, 1}, {{3, 4}, {4}}, -1, 1},
    {"gather", f_gather, 1, S3(3, 2, 3), -2, 2},
    {"take", f_take, 1, S3(2, 4, 3), -2, 2},
    {"take_along_axis", f_take_along, 1, S2(3, 4), -2, 2},
    {"indexed_add", f_indexed_add, 2, {2, 2}, {{3, 2}, {4, 2}}, -2, 2},
    {"indexed_put", f_indexed_put, 2, {2, 2}, {{3, 2}, {2, 2}}, -2, 2},
    {"put_slice", f_put_slice, 2, {2, 2}, {{3, 4}, {2, 2}}, -2, 2},
    {"concatenate", f_concatenate, 3, {2, 2, 2}, {{2, 1}, {2, 3}, {2, 2}}, -2,
     2},
    {"pad", f_pad, 2, {2, 0}, {{3, 4}, {0}}, -2, 2},
    {"dynamic_slice", f_dynamic_slice, 1, S2(3, 4), -2, 2},
    {"dynamic_put_slice", f_dynamic_put_slice, 2, {2, 2}, {{3, 4}, {2, 2}}, -2,
     2},
};

#define RUN_CASES(list)                                                        \
    for (size_t k = 0; k < sizeof list / sizeof list[0]; k++)                  \
    check_case(&list[k])

EM_TEST(autodiff_unary_vs_finite_differences) { RUN_CASES(unary_cases); }
EM_TEST(autodiff_binary_vs_finite_differences) { RUN_CASES(binary_cases); }
EM_TEST(autodiff_reduce_vs_finite_differences) { RUN_CASES(reduce_cases); }
EM_TEST(autodiff_ordering_vs_finite_differences) { RUN_CASES(ordering_cases); }
EM_TEST(autodiff_conv_vs_finite_differences) { RUN_CASES(conv_cases); }
EM_TEST(autodiff_shape_index_vs_finite_differences) {
    RUN_CASES(shape_cases);
}

/* ---- hand-derived values and error paths -------------------------------- */

/* grads of f at x (one f64 input of n elements) with cotangent w. */
static em_status grad_of(fn_t f, const double *xv, const double *wv,
                         int64_t n, double *g) {
    const int64_t shape[] = {n};
    em_array *x = t_from_f64(xv, shape, 1, EM_F64), *wrap = NULL, *y = NULL;
    em_array *w = NULL, *grad = NULL;
    em_status st = em_identity(x, &wrap);
    if (st == EM_OK)
        st = f(&wrap, &y);
    if (st == EM_OK) {
        w = t_from_f64(wv, em_array_shape(y), em_array_ndim(y), EM_F64);
        st = em_vjp(&y, &w, 1, &wrap, 1, &grad);
    }
    if (st == EM_OK)
        t_read_f64(grad, g, (size_t)n);
    em_array_release(grad);
    em_array_release(w);
    em_array_release(y);
    em_array_release(wrap);
    em_array_release(x);
    return st;
}

EM_TEST(autodiff_reuse_and_stop_gradient) {
    const double x[] = {3, -1.5}, w[] = {1, 2};
    double g[2];
    CHECK_OK(grad_of(f_reuse, x, w, 2, g)); /* d(x*x + sg(x)) = 2x */
    CHECK_NEAR(g[0], 6.0, 0);
    CHECK_NEAR(g[1], -6.0, 0);
}

EM_TEST(autodiff_as_type_passes_cotangent_back) {
    const double x[] = {0.1, 2.5}, w[] = {0.25, -3};
    double g[2];
    CHECK_OK(grad_of(f_as_type, x, w, 2, g));
    CHECK_NEAR(g[0], 0.25, 0);
    CHECK_NEAR(g[1], -3.0, 0);
}

/* cholesky of the 1x1 matrix [x]: no rule yet */
static em_status f_cholesky(em_array *const *x, em_array **out) {
    const int64_t square[] = {1, 1}, flat[] = {1};
    em_array *m = NULL, *l = NULL;
    em_status st = em_reshape(x[0], square, 2, &m);
    if (st == EM_OK)
        st = em_cholesky(m, &l);
    if (st == EM_OK)
        st = em_reshape(l, flat, 1, out);
    em_array_release(m);
    em_array_release(l);
    return st;
}
EM_TEST(autodiff_missing_rule_is_an_error) {
    const double x[] = {4}, w[] = {1};
    double g[1];
    CHECK_ERR(grad_of(f_cholesky, x, w, 1, g), EM_ERR_ARGUMENT,
              "grad: no gradient rule for linalg");
}

/* Through integers (argmax-like paths, comparisons) gradients are zero. */
static em_status f_through_int(em_array *const *x, em_array **out) {
    em_array *i = NULL;
    em_status st = em_as_type(x[0], EM_S32, &i);
    if (st == EM_OK)
        st = em_as_type(i, EM_F64, out);
    em_array_release(i);
    return st;
}
EM_TEST(autodiff_integer_path_gives_zero) {
    const double x[] = {2.5, 1}, w[] = {1, 1};
    double g[2] = {7, 7};
    CHECK_OK(grad_of(f_through_int, x, w, 2, g));
    CHECK_NEAR(g[0], 0.0, 0);
    CHECK_NEAR(g[1], 0.0, 0);
}

/* A node built inside the function and evaluated there cuts the graph. */
static em_status f_eval_inside(em_array *const *x, em_array **out) {
    em_array *e = NULL;
    em_status st = em_unary(EM_UNARY_exp, x[0], &e);
    if (st == EM_OK)
        st = em_eval(&e, 1);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_multiply, e, x[0], out);
    em_array_release(e);
    return st;
}
EM_TEST(autodiff_evaluated_inside_is_an_error) {
    const double x[] = {2, 1}, w[] = {1, 1};
    double g[2];
    CHECK_ERR(grad_of(f_eval_inside, x, w, 2, g), EM_ERR_ARGUMENT,
              "was evaluated inside the differentiated function");
}

/* Reading the variable itself inside the function evaluates the wrapper;
 * it stays the variable: d/dx (x * x) = 2x, and d/dx x = 1. */
static em_status f_square_after_eval(em_array *const *x, em_array **out) {
    em_status st = em_eval(x, 1);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_multiply, x[0], x[0], out);
    return st;
}
static em_status f_itself_after_eval(em_array *const *x, em_array **out) {
    em_status st = em_eval(x, 1);
    if (st == EM_OK) {
        em_array_retain(x[0]);
        *out = x[0];
    }
    return st;
}
EM_TEST(autodiff_evaluated_wrapper_is_still_the_variable) {
    const double x[] = {1.5, -2}, w[] = {1, 3};
    double g[2];
    CHECK_OK(grad_of(f_square_after_eval, x, w, 2, g));
    CHECK_NEAR(g[0], 3.0, 0);
    CHECK_NEAR(g[1], -12.0, 0);
    CHECK_OK(grad_of(f_itself_after_eval, x, w, 2, g));
    CHECK_NEAR(g[0], 1.0, 0);
    CHECK_NEAR(g[1], 3.0, 0);
}

/* An unused input gets zeros; a constant built before the wrapper is fine
 * even when evaluated. */
EM_TEST(autodiff_unused_input_and_constants) {
    const int64_t shape[] = {2};
    const double xv[] = {1, 2}, cv[] = {3, 4}, wv[] = {1, 1};
    em_array *c = t_from_f64(cv, shape, 1, EM_F64), *c2 = NULL;
    CHECK_OK(em_unary(EM_UNARY_exp, c, &c2));
    CHECK_OK(em_eval(&c2, 1));
    em_array *x = t_from_f64(xv, shape, 1, EM_F64);
    em_array *wraps[2] = {NULL, NULL}, *y = NULL, *grads[2] = {NULL, NULL};
    CHECK_OK(em_identity(x, &wraps[0]));
    CHECK_OK(em_identity(x, &wraps[1]));
    CHECK_OK(em_binary(EM_BINARY_multiply, wraps[0], c2, &y));
    em_array *w = t_from_f64(wv, shape, 1, EM_F64);
    CHECK_OK(em_vjp(&y, &w, 1, wraps, 2, grads));
    double g0[2], g1[2];
    t_read_f64(grads[0], g0, 2);
    t_read_f64(grads[1], g1, 2);
    CHECK_NEAR(g0[0], exp(3.0), 1e-12);
    CHECK_NEAR(g0[1], exp(4.0), 1e-12);
    CHECK_NEAR(g1[0], 0.0, 0);
    CHECK_NEAR(g1[1], 0.0, 0);
    /* a cotangent of the wrong shape */
    em_array *bad = NULL;
    em_array *scalar = NULL;
    CHECK_OK(em_scalar_f64(1.0, EM_F64, &scalar));
    CHECK_ERR(em_vjp(&y, &scalar, 1, wraps, 1, &bad), EM_ERR_ARGUMENT,
              "must have the output's type");
    CHECK(bad == NULL);
    em_array_release(scalar);
    for (int i = 0; i < 2; i++) {
        em_array_release(grads[i]);
        em_array_release(wraps[i]);
    }
    em_array_release(w);
    em_array_release(y);
    em_array_release(x);
    em_array_release(c);
    em_array_release(c2);
}
