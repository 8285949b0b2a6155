/*
 * test_conv.c — conv, the window ops, random_erf_inv and top_k's
 * composition on the GPU against the CPU backend.
 *
 * Same random inputs on both sides, contiguous, step-2 sliced and
 * transposed (all axes reversed) layouts, every dtype each CPU op accepts.
 * conv: ||gpu - cpu|| / ||cpu|| for floats (cuBLAS and OpenBLAS sum in
 * other orders), integers exactly (both wrap). Window reductions fold in
 * the CPU's order: integers, max and min exactly, float sums/products
 * within a few ulp. Window scatters add in the CPU's order: exactly for
 * every dtype. erf_inv: a few ulp (the same double formula, CUDA's and
 * libm's log/sqrt differ in the last bits).
 */
#include "cuda_test.h"
#include "emily_conv.h"
#include "emily_random.h"
#include "emily_sort.h"
#include "emily_window.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every family runs the first ND_LAYOUTS layouts; conv also runs
 * channels-last: (N, C, d...) as a view of an (N, d..., C) array. */
enum nd_layout {
    ND_CONTIGUOUS,
    ND_SLICED,
    ND_REVERSED,
    ND_LAYOUTS,
    ND_CHANNELS_LAST = ND_LAYOUTS,
    ND_CONV_LAYOUTS
};
static const char *nd_names[ND_CONV_LAYOUTS] = {"contiguous", "sliced",
                                                "transposed", "channels-last"};

/* Views of layout l over `base` (a base_of array) on the CPU (*cpu) and
 * on the GPU (*gpu, base copied there first). */
static void views_of(em_array *base, int ndim, enum nd_layout l, em_array **cpu,
                     em_array **gpu) {
    const int64_t *bshape = em_array_shape(base);
    int perm[EM_MAX_NDIM];
    for (int i = 0; i < ndim; i++)
        perm[i] = l == ND_REVERSED ? ndim - 1 - i
                  : i < 2          ? i * (ndim - 1)
                                   : i - 1;
    em_array *moved = NULL;
    die_on(em_to_device(base, GPU, &moved), "to_device");
    em_array *sides[2] = {base, moved}, **outs[2] = {cpu, gpu};
    for (int s = 0; s < 2; s++) {
        *outs[s] = NULL;
        if (!sides[s])
            continue;
        if (l == ND_SLICED && ndim > 0) {
            int64_t start[EM_MAX_NDIM] = {0}, step[EM_MAX_NDIM];
            for (int i = 0; i < ndim; i++)
                step[i] = i == ndim - 1 ? 2 : 1;
            die_on(em_slice(sides[s], start, bshape, step, outs[s]), "slice");
        } else if (l == ND_REVERSED || (l == ND_CHANNELS_LAST && ndim > 2)) {
            die_on(em_transpose(sides[s], perm, ndim, outs[s]), "transpose");
        } else {
            em_array_retain(sides[s]);
            *outs[s] = sides[s];
        }
    }
    em_array_release(moved);
}

/* The base array views_of cuts a `shape` view of layout l from: sliced
 * takes every other element of the last axis of a base twice as long;
 * transposed reverses the axes of a base of reversed shape; channels-last
 * moves axis 1 of a base (shape[0], shape[2..], shape[1]) into place. */
static em_array *base_of(em_dtype d, const int64_t *shape, int ndim,
                         enum nd_layout l, bool edges, int small) {
    int64_t bshape[EM_MAX_NDIM];
    for (int i = 0; i < ndim; i++)
        bshape[i] = l == ND_REVERSED ? shape[ndim - 1 - i] : shape[i];
    if (l == ND_CHANNELS_LAST && ndim > 2)
        for (int i = 1; i < ndim; i++)
            bshape[i] = shape[i == ndim - 1 ? 1 : i + 1];
    if (l == ND_SLICED && ndim > 0)
        bshape[ndim - 1] = 2 * shape[ndim - 1];
    return random_array(d, bshape, ndim, edges, small);
}

/* The same random array of `shape` in layout l on the CPU and the GPU. */
static void make_pair(em_dtype d, const int64_t *shape, int ndim,
                      enum nd_layout l, bool edges, int small, em_array **cpu,
                      em_array **gpu) {
    em_array *base = base_of(d, shape, ndim, l, edges, small);
    views_of(base, ndim, l, cpu, gpu);
    em_array_release(base);
}

static void release_all(em_array **arr, int n) {
    for (int i = 0; i < n; i++)
        em_array_release(arr[i]);
}

/* ---- random_erf_inv --------------------------------------------------- */

void test_erf_inv(void) {
    const em_dtype ds[4] = {EM_F16, EM_BF16, EM_F32, EM_F64};
    for (int di = 0; di < 4; di++)
        for (int l = 0; l < ND_LAYOUTS; l++)
            for (int scaled = 0; scaled < 2; scaled++) {
                em_dtype d = ds[di];
                if (skip_dtype(d))
                    continue;
                /* [-3, 3] with edge values (mostly NaN outside [-1, 1]),
                 * and the same divided by 3 (inside), plus +-1 exactly. */
                int64_t shape[2] = {37, 129};
                em_array *base =
                             base_of(d, shape, 2, (enum nd_layout)l, true, 0),
                         *three = NULL, *scaled_base = NULL, *xc = NULL,
                         *xg = NULL, *rc = NULL, *rg = NULL;
                die_on(em_scalar_f64(scaled ? 3.0 : 1.0, d, &three), "scalar");
                die_on(em_binary(EM_BINARY_divide, base, three, &scaled_base),
                       "divide");
                die_on(em_eval(&scaled_base, 1), "eval");
                views_of(scaled_base, 2, (enum nd_layout)l, &xc, &xg);
                char what[96];
                snprintf(what, sizeof what, "erf_inv %s %s%s", em_dtype_name(d),
                         nd_names[l], scaled ? " /3" : "");
                die_on(em_random_erf_inv(xc, &rc), what);
                em_status st = em_random_erf_inv(xg, &rg);
                if (st != EM_OK)
                    printf("  %s: %s\n", what, em_last_error());
                double w = rc && rg ? compare(rc, rg, what, 1) : INFINITY;
                record("erf_inv", what, w <= 1, w);
                em_array *arr[] = {base, three, scaled_base, xc, xg, rc, rg};
                release_all(arr, 7);
            }
    /* The poles and the branch switch exactly. */
    double edge[8] = {1, -1, 0, -0.0, 0.99, -0.9999, 0.5, 2};
    int64_t n8[1] = {8};
    em_array *c = NULL, *g = NULL, *rc = NULL, *rg = NULL;
    die_on(em_from_data(edge, sizeof edge, n8, 1, EM_F64, &c), "from_data");
    die_on(em_to_device(c, GPU, &g), "to_device");
    die_on(em_random_erf_inv(c, &rc), "erf_inv");
    die_on(em_random_erf_inv(g, &rg), "erf_inv");
    double w = rc && rg ? compare(rc, rg, "erf_inv f64 edges", 1) : INFINITY;
    record("erf_inv", "erf_inv f64 +-1, 0, -0, 2", w <= 1, w);
    em_array *arr[] = {c, g, rc, rg};
    release_all(arr, 4);
}

/* ---- window reduce and scatter ------------------------------------------ */

typedef struct win_case {
    int ndim;
    int64_t shape[3], window[3], strides[3], low[3], high[3], dil[3];
} win_case;

static const win_case win_cases[] = {
    /* 1-d: overlapping windows, padding on both sides */
    {1, {50}, {4}, {3}, {2}, {1}, {1}},
    /* 2-d: stride > window (gaps), negative padding, dilation */
    {2, {13, 17}, {3, 2}, {2, 3}, {1, -1}, {-2, 2}, {2, 1}},
    /* 3-d: windows over padding only at the corners */
    {3, {5, 6, 7}, {2, 3, 2}, {1, 2, 2}, {1, 0, 2}, {2, 1, 0}, {1, 1, 1}},
    /* rank 0 */
    {0, {0}, {0}, {0}, {0}, {0}, {0}},
};
#define NWIN_CASES ((int)(sizeof win_cases / sizeof win_cases[0]))

static em_window_options win_opts(const win_case *c, bool dilate) {
    em_window_options o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < c->ndim; i++) {
        o.window[i] = c->window[i];
        o.strides[i] = c->strides[i];
        o.pad_low[i] = c->low[i];
        o.pad_high[i] = c->high[i];
        o.dilations[i] = dilate ? c->dil[i] : 1;
    }
    return o;
}

static void window_reduce_cases(void) {
    const char *ops[4] = {"sum", "product", "max", "min"};
    for (int ci = 0; ci < NWIN_CASES; ci++)
        for (int op = 0; op < 4; op++)
            for (int di = 0; di < NDTYPES; di++)
                for (int l = 0; l < ND_LAYOUTS; l++) {
                    const win_case *c = &win_cases[ci];
                    em_dtype d = all_dtypes[di];
                    if (skip_dtype(d) || (c->ndim == 0 && l != 0))
                        continue;
                    bool order = op >= 2;
                    if (order && em_dtype_is_complex(d))
                        continue;
                    /* Products of floats: a narrower range keeps most
                     * windows finite; integers wrap over their range. */
                    em_array *ac = NULL, *ag = NULL, *rc = NULL, *rg = NULL;
                    make_pair(d, c->shape, c->ndim, (enum nd_layout)l, true, 0,
                              &ac, &ag);
                    em_window_options o = win_opts(c, true);
                    char what[96];
                    snprintf(what, sizeof what, "window_%s %dd %s %s", ops[op],
                             c->ndim, em_dtype_name(d), nd_names[l]);
                    die_on(em_window_reduce((em_window_op)op, ac, &o, &rc),
                           what);
                    em_status st =
                        em_window_reduce((em_window_op)op, ag, &o, &rg);
                    if (st != EM_OK)
                        printf("  %s: %s\n", what, em_last_error());
                    /* Same order of operations as the CPU: max/min exact,
                     * sums and products within a few ulp (complex products
                     * are formed differently by libcu++ and C). */
                    double w = rc && rg ? compare(rc, rg, what, order ? 0 : 1)
                                        : INFINITY;
                    record("window", what, w <= 1, w);
                    em_array *arr[] = {ac, ag, rc, rg};
                    release_all(arr, 4);
                }
}

static void window_scatter_cases(void) {
    for (int ci = 0; ci < NWIN_CASES; ci++)
        for (int mx = 0; mx < 2; mx++)
            for (int di = 0; di < NDTYPES; di++)
                for (int l = 0; l < ND_LAYOUTS; l++) {
                    const win_case *c = &win_cases[ci];
                    em_dtype d = all_dtypes[di];
                    if (skip_dtype(d) || (c->ndim == 0 && l != 0))
                        continue;
                    /* complex operands are refused: a complex source over
                     * an f32 operand instead */
                    em_dtype ad = em_dtype_is_complex(d) ? EM_F32 : d;
                    em_window_options o = win_opts(c, false);
                    int64_t wshape[3];
                    for (int i = 0; i < c->ndim; i++) {
                        int64_t padded = c->shape[i] + c->low[i] + c->high[i];
                        wshape[i] =
                            padded >= c->window[i]
                                ? (padded - c->window[i]) / c->strides[i] + 1
                                : 0;
                    }
                    /* Few distinct operand values: many ties. */
                    em_array *ac = NULL, *ag = NULL, *sc = NULL, *sg = NULL,
                             *ic = NULL, *ig = NULL, *rc = NULL, *rg = NULL;
                    make_pair(ad, c->shape, c->ndim, (enum nd_layout)l,
                              em_dtype_is_float(ad), 3, &ac, &ag);
                    make_pair(d, wshape, c->ndim,
                              (enum nd_layout)(l == ND_SLICED ? ND_SLICED
                                                              : ND_CONTIGUOUS),
                              false, 0, &sc, &sg);
                    make_pair(d, c->shape, 0, ND_CONTIGUOUS, false, 0, &ic,
                              &ig);
                    char what[96];
                    snprintf(what, sizeof what, "window_scatter_%s %dd %s %s",
                             mx ? "max" : "min", c->ndim, em_dtype_name(d),
                             nd_names[l]);
                    die_on(em_window_scatter(mx, ac, sc, ic, &o, &rc), what);
                    em_status st = em_window_scatter(mx, ag, sg, ig, &o, &rg);
                    if (st != EM_OK)
                        printf("  %s: %s\n", what, em_last_error());
                    /* The CPU's additions in the CPU's order: exact. */
                    double w = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
                    record("window", what, w <= 1, w);
                    em_array *arr[] = {ac, ag, sc, sg, ic, ig, rc, rg};
                    release_all(arr, 8);
                }
}

void test_window(void) {
    window_reduce_cases();
    window_scatter_cases();
}

/* ---- conv --------------------------------------------------------------- */

/* The path a case must take by default (em_gpu_conv_stats), when it is
 * one that needs no cuDNN. */
enum conv_expect { ANY_PATH, GEMM_1X1, DEPTHWISE };

typedef struct conv_case {
    const char *name;
    int ndim; /* of input and kernel */
    int64_t in[5], ker[5];
    int64_t strides[3], low[3], high[3], idil[3], kdil[3];
    int64_t fgroups, bgroups;
    enum conv_expect expect;
} conv_case;

/* A table: one case per line or two. */
/* clang-format off */
static const conv_case conv_cases[] = {
    {"1d stride 2 pad", 3, {3, 4, 20}, {5, 4, 3}, {2}, {1}, {2}, {1}, {1}, 1,
     1, ANY_PATH},
    {"2d groups dil negpad", 4, {2, 6, 9, 11}, {4, 3, 3, 2}, {2, 1}, {1, -1},
     {0, 2}, {1, 2}, {2, 1}, 2, 1, ANY_PATH},
    {"2d depthwise", 4, {2, 4, 7, 7}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1},
     {1, 1}, {1, 1}, 4, 1, DEPTHWISE},
    {"2d batch groups", 4, {4, 3, 8, 8}, {6, 3, 3, 3}, {1, 2}, {0, 1}, {1, 0},
     {1, 1}, {1, 2}, 1, 2, ANY_PATH},
    {"3d", 5, {2, 2, 5, 6, 4}, {3, 2, 2, 3, 2}, {1, 2, 1}, {1, 0, 1},
     {0, 1, 1}, {2, 1, 1}, {1, 1, 2}, 1, 1, ANY_PATH},
    {"0d spatial", 2, {3, 4}, {5, 4}, {0}, {0}, {0}, {0}, {0}, 1, 1, GEMM_1X1},
    /* Cases cuDNN takes (symmetric padding, no input dilation, no batch
     * groups); the ones above mostly fall back to im2col. */
    {"2d 3x3 pad 1", 4, {2, 8, 12, 10}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1},
     {1, 1}, {1, 1}, 1, 1, ANY_PATH},
    {"2d stride 2 dil 2 groups", 4, {3, 6, 13, 11}, {9, 2, 3, 3}, {2, 2},
     {2, 2}, {2, 2}, {1, 1}, {2, 2}, 3, 1, ANY_PATH},
    {"2d stride 2 high drops a window", 4, {2, 5, 10, 12}, {4, 5, 3, 3},
     {2, 2}, {1, 1}, {0, 1}, {1, 1}, {1, 1}, 1, 1, ANY_PATH},
    {"1d stride 3 dil 2", 3, {2, 5, 33}, {7, 5, 4}, {3}, {2}, {2}, {1}, {2}, 1,
     1, ANY_PATH},
    {"3d", 5, {2, 3, 6, 7, 5}, {4, 3, 3, 3, 2}, {1, 2, 1}, {1, 1, 0},
     {1, 1, 0}, {1, 1, 1}, {1, 1, 2}, 1, 1, ANY_PATH},
    {"2d depthwise 5x5", 4, {2, 12, 16, 16}, {12, 1, 5, 5}, {1, 1}, {2, 2},
     {2, 2}, {1, 1}, {1, 1}, 12, 1, DEPTHWISE},
    /* Padding cuDNN cannot express, applied by gpu_conv.c first: 'same'
     * padding of a stride-2 conv (0 low, 1 high), and crops. */
    {"2d stride 2 same padding", 4, {2, 4, 8, 8}, {6, 4, 3, 3}, {2, 2}, {0, 0},
     {1, 1}, {1, 1}, {1, 1}, 1, 1, ANY_PATH},
    {"2d crop and pad", 4, {2, 3, 9, 8}, {4, 3, 3, 2}, {2, 1}, {-1, 2},
     {1, -1}, {1, 1}, {1, 2}, 1, 1, ANY_PATH},
    /* 1x1: one GEMM over x in place (contiguous: as stored; channels-last:
     * transposed) or gathered first (sliced, transposed); one position
     * (L = 1), one channel, kernel dilation (no effect on a 1x1 kernel). */
    {"2d 1x1", 4, {3, 16, 7, 9}, {24, 16, 1, 1}, {1, 1}, {0, 0}, {0, 0},
     {1, 1}, {1, 1}, 1, 1, GEMM_1X1},
    {"1d 1x1 one channel", 3, {5, 1, 13}, {4, 1, 1}, {1}, {0}, {0}, {1}, {1},
     1, 1, GEMM_1X1},
    {"3d 1x1 one position", 5, {4, 6, 1, 1, 1}, {5, 6, 1, 1, 1}, {1, 1, 1},
     {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, 1, 1, GEMM_1X1},
    {"2d 1x1 batch 1 kernel dilation", 4, {1, 33, 5, 6}, {7, 33, 1, 1}, {1, 1},
     {0, 0}, {0, 0}, {1, 1}, {2, 3}, 1, 1, GEMM_1X1},
    /* Depthwise (the direct kernel): multipliers 1 and 2, strides,
     * padding incl. crops, dilation, windows wholly in the padding, 1-3
     * spatial axes (3: the kernel's any-rank instance). */
    {"2d depthwise x2 stride 2 dil 2", 4, {2, 3, 11, 10}, {6, 1, 3, 3}, {2, 2},
     {2, 1}, {1, 2}, {1, 1}, {2, 2}, 3, 1, DEPTHWISE},
    {"1d depthwise stride 2 pad", 3, {3, 5, 17}, {5, 1, 4}, {2}, {2}, {1}, {1},
     {1}, 5, 1, DEPTHWISE},
    {"2d depthwise crop", 4, {2, 4, 9, 8}, {4, 1, 3, 2}, {1, 2}, {-1, 1},
     {0, -1}, {1, 1}, {1, 1}, 4, 1, DEPTHWISE},
    {"2d depthwise windows in padding", 4, {1, 2, 3, 3}, {4, 1, 2, 2}, {1, 1},
     {3, 0}, {2, 3}, {1, 1}, {1, 1}, 2, 1, DEPTHWISE},
    {"3d depthwise x2", 5, {2, 2, 5, 6, 4}, {4, 1, 2, 3, 2}, {1, 2, 1},
     {1, 0, 1}, {0, 1, 1}, {1, 1, 1}, {1, 1, 2}, 2, 1, DEPTHWISE},
};
/* clang-format on */
#define NCONV_CASES ((int)(sizeof conv_cases / sizeof conv_cases[0]))

static double conv_tol(em_dtype d) {
    return d == EM_F16                     ? 2e-3
           : d == EM_BF16                  ? 1e-2
           : (d == EM_F32 || d == EM_C64)  ? 1e-5
           : (d == EM_F64 || d == EM_C128) ? 1e-12
                                           : 0;
}

static em_conv_options conv_options_of(const conv_case *c) {
    em_conv_options o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < c->ndim - 2; i++) {
        o.strides[i] = c->strides[i];
        o.pad_low[i] = c->low[i];
        o.pad_high[i] = c->high[i];
        o.input_dilation[i] = c->idil[i];
        o.kernel_dilation[i] = c->kdil[i];
    }
    o.feature_groups = c->fgroups;
    o.batch_groups = c->bgroups;
    return o;
}

/* The runs of the path `e` in s. */
static int64_t runs_of(const em_gpu_conv_stats *s, enum conv_expect e) {
    return e == GEMM_1X1 ? s->gemm_1x1_runs : s->depthwise_runs;
}

/* Every case on one GPU path (em_gpu_conv_set_path), against the CPU; by
 * default, the cases that expect a path must take it. */
static void conv_cases_on(em_gpu_conv_path path) {
    static const char *suffix[3] = {"", " im2col", " cudnn"};
    for (int ci = 0; ci < NCONV_CASES; ci++)
        for (int di = 0; di < NDTYPES; di++)
            for (int l = 0; l < ND_CONV_LAYOUTS; l++) {
                const conv_case *c = &conv_cases[ci];
                em_dtype d = all_dtypes[di];
                if (skip_dtype(d) || d == EM_PRED)
                    continue;
                em_conv_options o = conv_options_of(c);
                /* Finite inputs (a norm has no room for NaN); the layout
                 * applies to input and kernel (the kernel then packed). */
                em_array *ic = NULL, *ig = NULL, *kc = NULL, *kg = NULL,
                         *rc = NULL, *rg = NULL;
                make_pair(d, c->in, c->ndim, (enum nd_layout)l, false, 0, &ic,
                          &ig);
                make_pair(d, c->ker, c->ndim, (enum nd_layout)l, false, 0, &kc,
                          &kg);
                char what[128];
                snprintf(what, sizeof what, "conv %s %s %s%s", c->name,
                         em_dtype_name(d), nd_names[l], suffix[path]);
                die_on(em_conv(ic, kc, &o, &rc), what);
                em_gpu_conv_stats s0, s1;
                die_on(em_gpu_conv_stats_get(&s0), "conv stats");
                em_status st = em_conv(ig, kg, &o, &rg);
                if (st != EM_OK)
                    printf("  %s: %s\n", what, em_last_error());
                else
                    die_on(em_eval(&rg, 1), what);
                die_on(em_gpu_conv_stats_get(&s1), "conv stats");
                double tol = conv_tol(d);
                double w = !rc || !rg ? INFINITY
                           : tol > 0  ? compare_norm(rc, rg, tol)
                                      : compare(rc, rg, what, 0);
                record("conv", what, w <= 1, w);
                if (path == EM_GPU_CONV_AUTO && c->expect != ANY_PATH) {
                    char took[160];
                    snprintf(took, sizeof took, "%s: the %s path ran", what,
                             c->expect == GEMM_1X1 ? "1x1 GEMM" : "depthwise");
                    record("conv", took,
                           runs_of(&s1, c->expect) - runs_of(&s0, c->expect) ==
                               1,
                           0);
                }
                em_array *arr[] = {ic, ig, kc, kg, rc, rg};
                release_all(arr, 6);
            }
}

/* Runs of every path between two stats. */
static int64_t all_runs(const em_gpu_conv_stats *a,
                        const em_gpu_conv_stats *b) {
    return (b->cudnn_runs - a->cudnn_runs) + (b->im2col_runs - a->im2col_runs) +
           (b->gemm_1x1_runs - a->gemm_1x1_runs) +
           (b->depthwise_runs - a->depthwise_runs);
}

void test_conv(void) {
    /* The default order (1x1 GEMM, depthwise, cuDNN when it loads,
     * im2col), then im2col forced for every case, then cuDNN forced where
     * it applies (when it loads); the counters say which path ran. */
    em_gpu_conv_stats s0, s1, s2, s3;
    die_on(em_gpu_conv_stats_get(&s0), "conv stats");
    printf("  conv: %s\n", s0.cudnn_status);
    conv_cases_on(EM_GPU_CONV_AUTO);
    die_on(em_gpu_conv_stats_get(&s1), "conv stats");
    die_on(em_gpu_conv_set_path(EM_GPU_CONV_IM2COL), "conv path");
    conv_cases_on(EM_GPU_CONV_IM2COL);
    die_on(em_gpu_conv_stats_get(&s2), "conv stats");
    if (s0.cudnn_available) {
        die_on(em_gpu_conv_set_path(EM_GPU_CONV_CUDNN), "conv path");
        conv_cases_on(EM_GPU_CONV_CUDNN);
    }
    die_on(em_gpu_conv_set_path(EM_GPU_CONV_AUTO), "conv path");
    die_on(em_gpu_conv_stats_get(&s3), "conv stats");
    printf("  conv paths (auto): %lld 1x1 GEMM, %lld depthwise, %lld cuDNN, "
           "%lld im2col; forced im2col: %lld im2col of %lld; forced cuDNN: "
           "%lld cuDNN, %lld im2col\n",
           (long long)(s1.gemm_1x1_runs - s0.gemm_1x1_runs),
           (long long)(s1.depthwise_runs - s0.depthwise_runs),
           (long long)(s1.cudnn_runs - s0.cudnn_runs),
           (long long)(s1.im2col_runs - s0.im2col_runs),
           (long long)(s2.im2col_runs - s1.im2col_runs),
           (long long)all_runs(&s1, &s2),
           (long long)(s3.cudnn_runs - s2.cudnn_runs),
           (long long)(s3.im2col_runs - s2.im2col_runs));
    if (s0.cudnn_available) {
        record("conv", "conv cuDNN path ran (auto) and fallbacks too",
               s1.cudnn_runs > s0.cudnn_runs && s1.im2col_runs > s0.im2col_runs,
               0);
        record("conv", "conv forced cuDNN: cuDNN and im2col only",
               s3.cudnn_runs > s2.cudnn_runs &&
                   s3.gemm_1x1_runs == s2.gemm_1x1_runs &&
                   s3.depthwise_runs == s2.depthwise_runs,
               0);
    } else {
        printf("  conv cuDNN path skipped: %s\n", s0.cudnn_status);
    }
    record("conv", "conv forced im2col: im2col only",
           s2.im2col_runs > s1.im2col_runs &&
               s2.im2col_runs - s1.im2col_runs == all_runs(&s1, &s2),
           0);
    /* A batch bigger than one scratch chunk is covered by the bench sizes;
     * an empty kernel window (zero kernel channels) gives zeros. */
    int64_t is[4] = {2, 0, 5, 5}, ks[4] = {3, 0, 2, 2};
    em_array *ic = NULL, *ig = NULL, *kc = NULL, *kg = NULL, *rc = NULL,
             *rg = NULL;
    make_pair(EM_F32, is, 4, ND_CONTIGUOUS, false, 0, &ic, &ig);
    make_pair(EM_F32, ks, 4, ND_CONTIGUOUS, false, 0, &kc, &kg);
    em_conv_options o;
    memset(&o, 0, sizeof o);
    die_on(em_conv(ic, kc, &o, &rc), "conv empty");
    die_on(em_conv(ig, kg, &o, &rg), "conv empty");
    double w = rc && rg ? compare(rc, rg, "conv no channels", 0) : INFINITY;
    record("conv", "conv f32 zero channels", w <= 1, w);
    em_array *arr[] = {ic, ig, kc, kg, rc, rg};
    release_all(arr, 6);
}

/* ---- top_k: argsort + slice + take_along_axis ----------------------------- */

void test_top_k(void) {
    for (int di = 0; di < NDTYPES; di++)
        for (int l = 0; l < ND_LAYOUTS; l++) {
            em_dtype d = all_dtypes[di];
            if (skip_dtype(d) || em_dtype_is_complex(d))
                continue;
            int64_t shape[2] = {37, 129}, k = 5;
            em_array *ac = NULL, *ag = NULL;
            make_pair(d, shape, 2, (enum nd_layout)l, true,
                      d == EM_PRED ? 2 : 0, &ac, &ag);
            em_array *a[2] = {ac, ag}, *idx[2] = {NULL, NULL},
                     *top[2] = {NULL, NULL}, *vals[2] = {NULL, NULL};
            char what[96];
            snprintf(what, sizeof what, "top_k %s %s", em_dtype_name(d),
                     nd_names[l]);
            for (int s = 0; s < 2; s++) {
                int64_t start[2] = {0, 0}, stop[2] = {37, k}, step[2] = {1, 1};
                die_on(em_argsort(a[s], 1, true, EM_S64, &idx[s]), what);
                if (idx[s])
                    die_on(em_slice(idx[s], start, stop, step, &top[s]), what);
                if (top[s])
                    die_on(em_take_along_axis(a[s], top[s], 1, &vals[s]), what);
            }
            double w = vals[0] && vals[1]
                           ? fmax(compare(vals[0], vals[1], what, 0),
                                  compare(top[0], top[1], what, 0))
                           : INFINITY;
            record("top_k", what, w <= 1, w);
            em_array *arr[] = {ac,     ag,     idx[0],  idx[1],
                               top[0], top[1], vals[0], vals[1]};
            release_all(arr, 8);
        }
}
