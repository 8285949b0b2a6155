/* Tests of the fusion pass (src/engine/compile/fusion.c) and the fused primitive:
 * every graph is built twice from the same evaluated leaves; one copy is
 * evaluated as is (the oracle), the other is put on a tape, fused, and its
 * rewritten graph evaluated. Elementwise groups must match bit for bit;
 * groups with reductions within the bound stated in each test. */
#include "test.h"

#include "compile/fusion.h"
#include "compile/tape.h"

#include <float.h>
#include <stdlib.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_OUT 4

static const em_dtype FLOATS[] = {EM_F16, EM_BF16, EM_F32, EM_F64};
static const em_dtype INTS[] = {EM_U8, EM_S16, EM_S32, EM_U32, EM_S64};

/* A graph under test: builds outputs from leaves (new nodes each call). */
typedef int (*graph_fn)(em_array *const *in, em_array **out, int param);

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* xorshift, [0, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* An evaluated leaf of `dtype` with values in [lo, hi) (rounded for ints);
 * `specials` sprinkles NaN, +-Inf and -0 in. */
static em_array *leaf(const int64_t *shape, int nd, em_dtype dtype, double lo,
                      double hi, bool specials) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        v[i] = lo + (hi - lo) * urand();
        if (!em_dtype_is_float(dtype))
            v[i] = floor(v[i]);
        if (specials && i % 7 == 3) {
            const double sp[] = {NAN, INFINITY, -INFINITY, -0.0};
            v[i] = sp[(i / 7) % 4];
        }
    }
    em_array *a = t_from_f64(v, shape, nd, dtype);
    free(v);
    if (a)
        CHECK_OK(em_eval(&a, 1));
    return a;
}

static em_array *un(em_unary_op op, em_array *a) {
    em_array *o = NULL;
    CHECK_OK(em_unary(op, a, &o));
    return o;
}
static em_array *bin(em_binary_op op, em_array *a, em_array *b) {
    em_array *o = NULL;
    CHECK_OK(em_binary(op, a, b, &o));
    return o;
}
/* Consume (release) the operands: graphs read like expressions. */
static em_array *un_(em_unary_op op, em_array *a) {
    em_array *o = un(op, a);
    em_array_release(a);
    return o;
}
static em_array *bin_(em_binary_op op, em_array *a, em_array *b) {
    em_array *o = bin(op, a, b);
    em_array_release(a);
    em_array_release(b);
    return o;
}
static em_array *ref(em_array *a) {
    em_array_retain(a);
    return a;
}
static em_array *reduce_last(em_reduce_op op, em_array *a, bool keep) {
    int axis = -1;
    em_array *o = NULL;
    CHECK_OK(em_reduce(op, a, &axis, 1, keep, &o));
    em_array_release(a);
    return o;
}
static em_array *scalar(double v, em_dtype dtype) {
    em_array *o = NULL;
    CHECK_OK(em_scalar_f64(v, dtype, &o));
    return o;
}

/* Bytes of an evaluated array (caller frees). */
static void *bytes_of(em_array *a, size_t *n) {
    *n = em_array_nbytes(a);
    void *p = malloc(*n ? *n : 1);
    CHECK_OK(em_read(a, p, *n));
    return p;
}

typedef struct fuse_result {
    int fused;
    size_t len_before, len_after;
} fuse_result;

/*
 * Build `g` twice; evaluate one unfused and one fused, compare. tol < 0:
 * bytes must be identical; otherwise |fused - unfused| <= tol * (1 + |unfused|)
 * elementwise (NaN matches NaN). Also evaluates a clone of every fused node
 * made from its prim, params bytes and inputs, as the compiler will.
 */
static fuse_result check_fused(int line, graph_fn g, em_array *const *in,
                               int param, double tol) {
    fuse_result res = {0, 0, 0};
    em_array *want[MAX_OUT] = {0}, *got[MAX_OUT] = {0};
    int nw = g(in, want, param), ng = g(in, got, param);
    CHECK_OK(em_eval(want, (size_t)nw));

    em__tape tape;
    memset(&tape, 0, sizeof tape);
    CHECK_OK(em__topo_order(got, (size_t)ng, &tape.nodes, &tape.len));
    tape.outputs = got;
    tape.noutputs = (size_t)ng;
    res.len_before = tape.len;
    CHECK_OK(em__fuse_tape(&tape, &res.fused));
    res.len_after = tape.len;

    /* Clones of the fused nodes evaluate to the same values. */
    for (size_t i = 0; i < tape.len; i++) {
        em_array *t = tape.nodes[i];
        if (t->prim != &em__fused_prim)
            continue;
        em_array *clone = NULL;
        CHECK_OK(em__node_new_params(t->prim, t->dtype, t->shape, t->ndim,
                                     t->inputs, t->ninputs, t->params,
                                     t->params_size, &clone));
        CHECK_OK(em_eval(&tape.nodes[i], 1));
        CHECK_OK(em_eval(&clone, 1));
        size_t n1, n2;
        void *b1 = bytes_of(t, &n1), *b2 = bytes_of(clone, &n2);
        if (n1 != n2 || memcmp(b1, b2, n1) != 0)
            em_test_fail(__FILE__, line, "clone of fused node %zu differs", i);
        free(b1);
        free(b2);
        em_array_release(clone);
    }

    CHECK_OK(em_eval(got, (size_t)ng));
    for (int o = 0; o < ng; o++) {
        if (got[o]->dtype != want[o]->dtype || got[o]->size != want[o]->size) {
            em_test_fail(__FILE__, line, "output %d: dtype/size differ", o);
            continue;
        }
        size_t n1, n2;
        unsigned char *bw = bytes_of(want[o], &n1), *bg = bytes_of(got[o], &n2);
        if (tol < 0) {
            if (memcmp(bw, bg, n1) != 0) {
                size_t es = em_dtype_size(got[o]->dtype), k = 0;
                while (memcmp(bw + k * es, bg + k * es, es) == 0)
                    k++;
                em_test_fail(__FILE__, line,
                             "output %d (%s) not bit-identical at element %zu",
                             o, em_dtype_name(got[o]->dtype), k);
            }
        } else {
            int64_t n = got[o]->size;
            double *dw = malloc(sizeof(double) * (size_t)(n ? n : 1));
            double *dg = malloc(sizeof(double) * (size_t)(n ? n : 1));
            t_read_f64(want[o], dw, (size_t)n);
            t_read_f64(got[o], dg, (size_t)n);
            int bad = 0;
            for (int64_t k = 0; k < n && bad < 3; k++)
                if (!(fabs(dw[k] - dg[k]) <= tol * (1 + fabs(dw[k])) ||
                      (isnan(dw[k]) && isnan(dg[k])) || dw[k] == dg[k])) {
                    em_test_fail(__FILE__, line,
                                 "output %d element %lld: %.17g vs %.17g", o,
                                 (long long)k, dg[k], dw[k]);
                    bad++;
                }
            free(dw);
            free(dg);
        }
        free(bw);
        free(bg);
    }
    for (size_t i = 0; i < tape.len; i++)
        em_array_release(tape.nodes[i]);
    free(tape.nodes);
    for (int o = 0; o < MAX_OUT; o++) {
        em_array_release(want[o]);
        em_array_release(got[o]);
    }
    return res;
}

/* ---- elementwise chains ------------------------------------------------ */

/* A chain of `len` ops over x (in[0]), a row vector a (in[1], broadcast)
 * and a scalar b (in[2]); float ops. */
static int float_chain(em_array *const *in, em_array **out, int len) {
    em_array *x = in[0], *a = in[1], *b = in[2];
    em_array *t = bin(EM_BINARY_multiply, x, a);
    for (int k = 1; k < len; k++) {
        switch (k) {
        case 1:
            t = bin_(EM_BINARY_add, t, ref(b));
            break;
        case 2:
            t = un_(EM_UNARY_tanh, t);
            break;
        case 3:
            t = bin_(EM_BINARY_subtract, t, ref(x));
            break;
        case 4:
            t = un_(EM_UNARY_exp, t);
            break;
        case 5:
            t = bin_(EM_BINARY_maximum, t, ref(a));
            break;
        case 6:
            t = un_(EM_UNARY_sqrt, t);
            break;
        default:
            t = bin_(EM_BINARY_divide, t, ref(x));
            break;
        }
    }
    out[0] = t;
    return 1;
}

static int int_chain(em_array *const *in, em_array **out, int len) {
    em_array *x = in[0], *a = in[1], *b = in[2];
    em_array *t = bin(EM_BINARY_add, x, a);
    for (int k = 1; k < len; k++) {
        switch (k) {
        case 1:
            t = bin_(EM_BINARY_multiply, t, ref(b));
            break;
        case 2:
            t = bin_(EM_BINARY_bitwise_xor, t, ref(x));
            break;
        case 3:
            t = un_(EM_UNARY_abs, t);
            break;
        case 4:
            t = bin_(EM_BINARY_maximum, t, ref(a));
            break;
        case 5:
            t = bin_(EM_BINARY_quotient, t, ref(b));
            break;
        case 6:
            t = bin_(EM_BINARY_subtract, t, ref(x));
            break;
        default: {
            em_array *p = bin(EM_BINARY_greater, t, x), *s = NULL;
            CHECK_OK(em_select(p, t, x, &s));
            em_array_release(p);
            em_array_release(t);
            t = s;
        }
        }
    }
    out[0] = t;
    return 1;
}

static void run_chains(em_dtype dt, graph_fn g, double lo, double hi,
                       bool specials) {
    int64_t sx[2] = {37, 129}, sa[2] = {1, 129};
    em_array *in[3] = {leaf(sx, 2, dt, lo, hi, specials),
                       leaf(sa, 2, dt, lo, hi, false),
                       leaf(NULL, 0, dt, 2, 3, false)};
    for (int len = 2; len <= 8; len++) {
        fuse_result r = check_fused(__LINE__, g, in, len, -1);
        CHECK(r.fused == 1);
        CHECK(r.len_after == 1);
    }
    for (int i = 0; i < 3; i++)
        em_array_release(in[i]);
}

EM_TEST(fusion_float_chains_bit_identical) {
    for (size_t d = 0; d < N_OF(FLOATS); d++) {
        run_chains(FLOATS[d], float_chain, -3, 3, false);
        run_chains(FLOATS[d], float_chain, -3, 3, true); /* NaN, Inf, -0 */
    }
}

EM_TEST(fusion_int_chains_bit_identical) {
    for (size_t d = 0; d < N_OF(INTS); d++)
        run_chains(INTS[d], int_chain, 0, 100, false);
}

/* Large enough to take several tiles and threads, odd sizes. */
EM_TEST(fusion_large_chain_spans_tiles_and_threads) {
    int64_t sx[2] = {301, 1031}, sa[2] = {1, 1031};
    em_array *in[3] = {leaf(sx, 2, EM_F32, -2, 2, true),
                       leaf(sa, 2, EM_F32, -2, 2, false),
                       leaf(NULL, 0, EM_F32, 2, 3, false)};
    fuse_result r = check_fused(__LINE__, float_chain, in, 8, -1);
    CHECK(r.fused == 1);
    for (int i = 0; i < 3; i++)
        em_array_release(in[i]);
}

/* x is a transposed (strided) view, a a column broadcast, b a scalar. */
EM_TEST(fusion_strided_and_broadcast_inputs) {
    int64_t st[2] = {129, 37}, sa[2] = {37, 1};
    for (size_t d = 0; d < N_OF(FLOATS); d++) {
        em_array *base = leaf(st, 2, FLOATS[d], -2, 2, false), *x = NULL;
        int perm[2] = {1, 0};
        CHECK_OK(em_transpose(base, perm, 2, &x));
        CHECK_OK(em_eval(&x, 1));
        em_array *in[3] = {x, leaf(sa, 2, FLOATS[d], -2, 2, false),
                           leaf(NULL, 0, FLOATS[d], 1, 2, false)};
        fuse_result r = check_fused(__LINE__, float_chain, in, 8, -1);
        CHECK(r.fused == 1);
        for (int i = 0; i < 3; i++)
            em_array_release(in[i]);
        em_array_release(base);
    }
}

/* The view itself pending: it stays outside the group, read with strides. */
static int view_chain(em_array *const *in, em_array **out, int unused) {
    int perm[2] = {1, 0};
    em_array *xt = NULL;
    CHECK_OK(em_transpose(in[0], perm, 2, &xt));
    em_array *t = bin(EM_BINARY_multiply, xt, xt);
    t = un_(EM_UNARY_exp, t);
    out[0] = bin_(EM_BINARY_add, t, xt);
    return 1;
}

EM_TEST(fusion_pending_view_input) {
    int64_t s[2] = {65, 33};
    em_array *in[1] = {leaf(s, 2, EM_F32, -1, 1, false)};
    fuse_result r = check_fused(__LINE__, view_chain, in, 0, -1);
    CHECK(r.fused == 1);
    CHECK(r.len_after == 2); /* the view and the fused node */
    em_array_release(in[0]);
}

/* Shared intermediates and outputs that are intermediates. */
static int shared_graph(em_array *const *in, em_array **out, int variant) {
    em_array *x = in[0], *a = in[1];
    em_array *t = bin(EM_BINARY_multiply, x, a);       /* read 3 times */
    em_array *u = un(EM_UNARY_exp, t);                 /* read twice */
    em_array *v = bin(EM_BINARY_add, u, t);            /* v = e^t + t */
    em_array *w = bin(EM_BINARY_multiply, u, t);       /* w = t e^t */
    em_array *y = bin_(EM_BINARY_subtract, ref(v), w); /* y = v - w */
    y = un_(EM_UNARY_tanh, y);
    out[0] = y;
    int n = 1;
    if (variant >= 1)
        out[n++] = ref(u); /* an intermediate is an output */
    if (variant >= 2)
        out[n++] = ref(v);
    em_array_release(t);
    em_array_release(u);
    em_array_release(v);
    return n;
}

EM_TEST(fusion_shared_intermediates_and_outputs) {
    int64_t sx[2] = {17, 300}, sa[1] = {300};
    em_array *in[2] = {leaf(sx, 2, EM_F32, -1, 1, false),
                       leaf(sa, 1, EM_F32, -1, 1, false)};
    /* One group: t and u have all their readers inside it. */
    fuse_result r = check_fused(__LINE__, shared_graph, in, 0, -1);
    CHECK(r.fused == 1 && r.len_after == 1);
    /* u is an output, so it is materialised, and so is t (read by u and by
     * the group {y, y0, v, w}): t, u and one fused node remain. */
    r = check_fused(__LINE__, shared_graph, in, 1, -1);
    CHECK(r.fused == 1 && r.len_after == 3);
    /* u and v outputs: {y, y0, w} fuses, v, u and t stay. */
    r = check_fused(__LINE__, shared_graph, in, 2, -1);
    CHECK(r.fused == 1 && r.len_after == 4);
    for (int i = 0; i < 2; i++)
        em_array_release(in[i]);
}

static int mixed_dtype_graph(em_array *const *in, em_array **out, int unused) {
    /* f32 -> f64 math -> compare -> select -> clip -> f16 */
    em_array *x64 = NULL, *s = NULL, *c = NULL, *h = NULL;
    CHECK_OK(em_as_type(in[0], EM_F64, &x64));
    em_array *y = bin(EM_BINARY_multiply, x64, x64);
    em_array *p = bin(EM_BINARY_less, y, x64);
    CHECK_OK(em_select(p, y, x64, &s));
    em_array *lo = scalar(-0.5, EM_F64), *hi = scalar(0.75, EM_F64);
    CHECK_OK(em_clip(s, lo, hi, &c));
    CHECK_OK(em_as_type(c, EM_F16, &h));
    em_array *arr[] = {x64, y, p, s, lo, hi, c};
    for (size_t i = 0; i < N_OF(arr); i++)
        em_array_release(arr[i]);
    out[0] = h;
    return 1;
}

EM_TEST(fusion_select_clip_convert) {
    int64_t s[1] = {5000};
    em_array *in[1] = {leaf(s, 1, EM_F32, -2, 2, true)};
    fuse_result r = check_fused(__LINE__, mixed_dtype_graph, in, 0, -1);
    CHECK(r.fused == 1);
    em_array_release(in[0]);
}

EM_TEST(fusion_empty_and_scalar_tensors) {
    int64_t se[2] = {0, 129}, sa[2] = {1, 129};
    em_array *in[3] = {leaf(se, 2, EM_F32, -1, 1, false),
                       leaf(sa, 2, EM_F32, -1, 1, false),
                       leaf(NULL, 0, EM_F32, 1, 2, false)};
    check_fused(__LINE__, float_chain, in, 8, -1);
    em_array *sc[3] = {leaf(NULL, 0, EM_F32, -1, 1, false),
                       leaf(NULL, 0, EM_F32, -1, 1, false),
                       leaf(NULL, 0, EM_F32, 1, 2, false)};
    fuse_result r = check_fused(__LINE__, float_chain, sc, 8, -1);
    CHECK(r.fused == 1);
    for (int i = 0; i < 3; i++) {
        em_array_release(in[i]);
        em_array_release(sc[i]);
    }
}

/* A single op is never fused; non-elementwise nodes stay as they are. */
static int single_op(em_array *const *in, em_array **out, int unused) {
    out[0] = un(EM_UNARY_exp, in[0]);
    return 1;
}

EM_TEST(fusion_leaves_single_ops_alone) {
    int64_t s[1] = {100};
    em_array *in[1] = {leaf(s, 1, EM_F32, -1, 1, false)};
    fuse_result r = check_fused(__LINE__, single_op, in, 0, -1);
    CHECK(r.fused == 0 && r.len_after == 1);
    em_array_release(in[0]);
    CHECK_ERR(em__fuse_tape(NULL, NULL), EM_ERR_ARGUMENT, "tape is NULL");
}

/* ---- reductions and normalisations --------------------------------------- */

/* A fused row folds exactly as the unfused per-output reduction (same
 * leaves, same pairwise halves), so results are equal unless the unfused
 * reduction split a row across threads (few long rows). The elementwise
 * tests allow 2 eps for that; fusion_long_row_sum_bound tests the general
 * bound |fused - exact| <= n eps sum|x| on rows that do split. */
static double eps_of(em_dtype dt) {
    return dt == EM_F64   ? DBL_EPSILON
           : dt == EM_F32 ? FLT_EPSILON
           : dt == EM_F16 ? 9.77e-4
                          : 7.82e-3;
}
static double sum_tol(em_dtype dt, int64_t n) {
    (void)n;
    return 2 * eps_of(dt);
}

static int softmax_graph(em_array *const *in, em_array **out, int unused) {
    em_array *x = in[0];
    em_array *m = reduce_last(EM_REDUCE_max, ref(x), true);
    em_array *e = un_(EM_UNARY_exp, bin_(EM_BINARY_subtract, ref(x), m));
    em_array *s = reduce_last(EM_REDUCE_sum, ref(e), true);
    out[0] = bin_(EM_BINARY_divide, e, s);
    return 1;
}

static int layer_norm_graph(em_array *const *in, em_array **out, int unused) {
    em_array *x = in[0], *g = in[1], *b = in[2];
    em_dtype dt = x->dtype;
    double n = (double)x->shape[x->ndim - 1];
    em_array *mu =
        bin_(EM_BINARY_divide, reduce_last(EM_REDUCE_sum, ref(x), true),
             scalar(n, dt));
    em_array *xc = bin_(EM_BINARY_subtract, ref(x), mu);
    em_array *var =
        bin_(EM_BINARY_divide,
             reduce_last(EM_REDUCE_sum, bin(EM_BINARY_multiply, xc, xc), true),
             scalar(n, dt));
    em_array *inv =
        un_(EM_UNARY_rsqrt, bin_(EM_BINARY_add, var, scalar(1e-5, dt)));
    em_array *y = bin_(EM_BINARY_multiply, xc, inv);
    y = bin_(EM_BINARY_multiply, y, ref(g));
    out[0] = bin_(EM_BINARY_add, y, ref(b));
    return 1;
}

static int rms_norm_graph(em_array *const *in, em_array **out, int unused) {
    em_array *x = in[0], *g = in[1];
    em_dtype dt = x->dtype;
    double n = (double)x->shape[x->ndim - 1];
    em_array *ms =
        bin_(EM_BINARY_divide,
             reduce_last(EM_REDUCE_sum, bin(EM_BINARY_multiply, x, x), true),
             scalar(n, dt));
    em_array *inv =
        un_(EM_UNARY_rsqrt, bin_(EM_BINARY_add, ms, scalar(1e-6, dt)));
    em_array *y = bin_(EM_BINARY_multiply, ref(x), inv);
    out[0] = bin_(EM_BINARY_multiply, y, ref(g));
    return 1;
}

/* Mean and variance as outputs (the mean is materialised: it is an output). */
static int mean_var_graph(em_array *const *in, em_array **out, int keep) {
    em_array *x = in[0];
    em_dtype dt = x->dtype;
    double n = (double)x->shape[x->ndim - 1];
    em_array *mu =
        bin_(EM_BINARY_divide, reduce_last(EM_REDUCE_sum, ref(x), true),
             scalar(n, dt));
    em_array *d = bin(EM_BINARY_subtract, x, mu);
    em_array *var = bin_(
        EM_BINARY_divide,
        reduce_last(EM_REDUCE_sum, bin_(EM_BINARY_multiply, ref(d), d), true),
        scalar(n, dt));
    out[0] = mu;
    out[1] = var;
    (void)keep;
    return 2;
}

/* sum(exp(x) * x) over the last axis, dropping it (a trailing reduction). */
static int trailing_sum_graph(em_array *const *in, em_array **out, int op) {
    em_array *e = un(EM_UNARY_exp, in[0]);
    out[0] = reduce_last((em_reduce_op)op,
                         bin_(EM_BINARY_multiply, e, ref(in[0])), false);
    return 1;
}

EM_TEST(fusion_softmax_one_kernel) {
    int64_t shapes[][2] = {{64, 1000}, {3, 4096}, {1, 32}, {0, 64}};
    for (size_t d = 0; d < N_OF(FLOATS); d++)
        for (size_t s = 0; s < N_OF(shapes); s++) {
            em_array *in[1] = {leaf(shapes[s], 2, FLOATS[d], -5, 5, false)};
            fuse_result r = check_fused(__LINE__, softmax_graph, in, 0,
                                        sum_tol(FLOATS[d], shapes[s][1]));
            CHECK(r.fused == 1 && r.len_after == 1);
            em_array_release(in[0]);
        }
}

EM_TEST(fusion_softmax_nan_inf_rows) {
    int64_t s[2] = {20, 77};
    em_array *in[1] = {leaf(s, 2, EM_F32, -5, 5, true)};
    fuse_result r =
        check_fused(__LINE__, softmax_graph, in, 0, sum_tol(EM_F32, 77));
    CHECK(r.fused == 1);
    em_array_release(in[0]);
}

EM_TEST(fusion_layer_norm_rms_norm) {
    int64_t sx[3] = {2, 33, 768}, sg[1] = {768};
    for (size_t d = 0; d < N_OF(FLOATS); d++) {
        em_dtype dt = FLOATS[d];
        em_array *in[3] = {leaf(sx, 3, dt, -2, 3, false),
                           leaf(sg, 1, dt, 0.5, 1.5, false),
                           leaf(sg, 1, dt, -1, 1, false)};
        double tol = sum_tol(dt, 768);
        fuse_result r = check_fused(__LINE__, layer_norm_graph, in, 0, tol);
        CHECK(r.fused == 1 && r.len_after == 1);
        r = check_fused(__LINE__, rms_norm_graph, in, 0, tol);
        CHECK(r.fused == 1 && r.len_after == 1);
        r = check_fused(__LINE__, mean_var_graph, in, 0, tol);
        CHECK(r.fused == 2);
        for (int i = 0; i < 3; i++)
            em_array_release(in[i]);
    }
}

EM_TEST(fusion_trailing_reductions) {
    const em_reduce_op ops[] = {EM_REDUCE_sum, EM_REDUCE_max, EM_REDUCE_min,
                                EM_REDUCE_product};
    int64_t s2[2] = {50, 200}, s1[1] = {5000};
    for (size_t o = 0; o < N_OF(ops); o++) {
        double lo = ops[o] == EM_REDUCE_product ? -0.05 : -3;
        double hi = ops[o] == EM_REDUCE_product ? 0.05 : 3;
        em_array *in2[1] = {leaf(s2, 2, EM_F32, lo, hi, false)};
        fuse_result r = check_fused(__LINE__, trailing_sum_graph, in2,
                                    (int)ops[o], sum_tol(EM_F32, 200));
        CHECK(r.fused == 1 && r.len_after == 1);
        em_array *in1[1] = {leaf(s1, 1, EM_F64, lo, hi, false)};
        r = check_fused(__LINE__, trailing_sum_graph, in1, (int)ops[o],
                        sum_tol(EM_F64, 5000));
        CHECK(r.fused == 1);
        em_array_release(in2[0]);
        em_array_release(in1[0]);
    }
}

/* Rows too long to keep in registers: the reductions stay unfused, the
 * elementwise parts still fuse. */
EM_TEST(fusion_long_rows_fall_back) {
    int64_t s[2] = {2, FZ_MAX_ROW + 5};
    em_array *in[1] = {leaf(s, 2, EM_F32, -5, 5, false)};
    fuse_result r =
        check_fused(__LINE__, softmax_graph, in, 0, sum_tol(EM_F32, s[1]));
    CHECK(r.len_after >= 3);
    em_array_release(in[0]);
}

/* Two long rows: the unfused sum splits each across threads; the fused one
 * folds each row on one thread. Both are within n eps sum|x| (all terms
 * positive, so sum|x| = |sum|). */
EM_TEST(fusion_long_row_sum_bound) {
    int64_t s[2] = {2, 16000};
    em_array *in[1] = {leaf(s, 2, EM_F32, 0, 1, false)};
    fuse_result r = check_fused(__LINE__, trailing_sum_graph, in,
                                (int)EM_REDUCE_sum, 16000 * FLT_EPSILON);
    CHECK(r.fused == 1);
    em_array_release(in[0]);
}

/* Short rows: a tile holds several rows (and 3-D inputs). */
EM_TEST(fusion_softmax_short_rows) {
    int64_t shapes[][3] = {{1000, 7, 0}, {33, 2, 0}, {5, 3, 17}, {70, 3000, 0}};
    int nds[] = {2, 2, 3, 2};
    for (size_t d = 0; d < N_OF(FLOATS); d++)
        for (size_t s = 0; s < N_OF(shapes); s++) {
            em_array *in[1] = {
                leaf(shapes[s], nds[s], FLOATS[d], -5, 5, false)};
            fuse_result r = check_fused(__LINE__, softmax_graph, in, 0,
                                        sum_tol(FLOATS[d], 0));
            CHECK(r.fused == 1 && r.len_after == 1);
            em_array_release(in[0]);
        }
}

/* A per-row value computed inside the group without any reduction:
 * exp(x) * (p + q) with p, q of shape [R, 1]; and one per-row root. */
static int row_broadcast_graph(em_array *const *in, em_array **out, int root) {
    em_array *pq = bin(EM_BINARY_add, in[1], in[2]);
    if (root) { /* (p + q) * p, all per-row, fed by a row max */
        em_array *m = reduce_last(EM_REDUCE_max, un(EM_UNARY_exp, in[0]), true);
        out[0] =
            bin_(EM_BINARY_multiply, bin_(EM_BINARY_add, pq, m), ref(in[1]));
        return 1;
    }
    out[0] = bin_(EM_BINARY_multiply, un(EM_UNARY_exp, in[0]), pq);
    return 1;
}

EM_TEST(fusion_row_broadcast_members) {
    int64_t sx[2] = {300, 50}, sp[2] = {300, 1};
    for (size_t d = 0; d < N_OF(FLOATS); d++) {
        em_array *in[3] = {leaf(sx, 2, FLOATS[d], -2, 2, false),
                           leaf(sp, 2, FLOATS[d], -2, 2, false),
                           leaf(sp, 2, FLOATS[d], -2, 2, false)};
        fuse_result r = check_fused(__LINE__, row_broadcast_graph, in, 0, -1);
        CHECK(r.fused == 1 && r.len_after == 1);
        r = check_fused(__LINE__, row_broadcast_graph, in, 1, -1);
        CHECK(r.fused == 1 && r.len_after == 1);
        for (int i = 0; i < 3; i++)
            em_array_release(in[i]);
    }
}

/* Complex values, and abs of a complex giving its real dtype. */
static int complex_graph(em_array *const *in, em_array **out, int unused) {
    em_array *t = bin(EM_BINARY_multiply, in[0], in[1]);
    t = un_(EM_UNARY_exp, bin_(EM_BINARY_add, t, ref(in[0])));
    t = un_(EM_UNARY_conjugate, t);
    out[0] = un_(EM_UNARY_abs, t);
    return 1;
}

EM_TEST(fusion_complex_chain) {
    int64_t s[1] = {3000};
    const em_dtype cdt[] = {EM_C64, EM_C128};
    for (size_t d = 0; d < N_OF(cdt); d++) {
        em_array *re = leaf(s, 1, EM_F64, -1, 1, false),
                 *im = leaf(s, 1, EM_F64, -1, 1, false), *z = NULL, *w = NULL;
        em_array *i1 = NULL;
        CHECK_OK(em_as_type(im, cdt[d], &i1));
        em_array *iu = NULL, *unit = NULL;
        double j[2] = {0, 1};
        CHECK_OK(em_scalar(j, EM_C128, &iu));
        CHECK_OK(em_as_type(iu, cdt[d], &unit));
        CHECK_OK(em_as_type(re, cdt[d], &z));
        em_array *zi = bin(EM_BINARY_multiply, i1, unit);
        CHECK_OK(em_binary(EM_BINARY_add, z, zi, &w));
        CHECK_OK(em_eval(&w, 1));
        em_array *in[2] = {w, unit};
        CHECK_OK(em_eval(&unit, 1));
        fuse_result r = check_fused(__LINE__, complex_graph, in, 0, -1);
        CHECK(r.fused == 1 && r.len_after == 1);
        em_array *all[] = {re, im, z, w, i1, iu, unit, zi};
        for (size_t k = 0; k < N_OF(all); k++)
            em_array_release(all[k]);
    }
}

/* A fused node whose params are not a program fails with ArgumentError's
 * status instead of reading out of bounds. */
EM_TEST(fusion_malformed_program_is_an_error) {
    int64_t s[1] = {4};
    em_array *x = leaf(s, 1, EM_F32, 0, 1, false), *bad = NULL;
    int junk[3] = {1000, 0, 0};
    CHECK_OK(em__node_new_params(&em__fused_prim, EM_F32, s, 1, &x, 1, junk,
                                 sizeof junk, &bad));
    CHECK_ERR(em_eval(&bad, 1), EM_ERR_ARGUMENT, "fused: malformed program");
    em_array_release(bad);

    /* A real program with one field corrupted at a time. */
    em_array *y = un_(EM_UNARY_exp, un(EM_UNARY_negate, x));
    em__tape tape;
    memset(&tape, 0, sizeof tape);
    CHECK_OK(em__topo_order(&y, 1, &tape.nodes, &tape.len));
    tape.outputs = &y;
    tape.noutputs = 1;
    int nf = 0;
    CHECK_OK(em__fuse_tape(&tape, &nf));
    CHECK(nf == 1 && y->prim == &em__fused_prim);
    for (int field = 0; field < 4 && nf == 1; field++) {
        fz_program *p = malloc(y->params_size);
        memcpy(p, y->params, y->params_size);
        switch (field) {
        case 0:
            p->instr[0].op = 5;
            break; /* load of input 5 */
        case 1:
            p->instr[1].dst = FZ_MAX_REGS;
            break; /* register range */
        case 2:
            p->ninstr = FZ_MAX_INSTR + 1;
            break;
        default:
            p->instr[2].kind = 9;
            break; /* unknown kind */
        }
        CHECK_OK(em__node_new_params(&em__fused_prim, EM_F32, s, 1, y->inputs,
                                     y->ninputs, p, y->params_size, &bad));
        CHECK_ERR(em_eval(&bad, 1), EM_ERR_ARGUMENT,
                  "fused: malformed program");
        em_array_release(bad);
        free(p);
    }
    CHECK_OK(em_eval(&y, 1));
    for (size_t i = 0; i < tape.len; i++)
        em_array_release(tape.nodes[i]);
    free(tape.nodes);
    em_array_release(y);
    em_array_release(x);
}

/* Reductions over several trailing axes (or all of them). */
static int trailing_axes_graph(em_array *const *in, em_array **out, int v) {
    em_array *x = in[0];
    int axes_all[3] = {0, 1, 2}, axes2[2] = {1, 2};
    const int *axes = v == 2 ? axes_all : axes2;
    int naxes = v == 2 ? 3 : 2;
    em_array *sq = bin(EM_BINARY_multiply, x, x), *s = NULL;
    CHECK_OK(em_reduce(EM_REDUCE_sum, sq, axes, naxes, v != 1, &s));
    em_array_release(sq);
    if (v == 1) { /* dropped axes: the reduction is the root */
        out[0] = s;
        return 1;
    }
    /* x / sqrt(sum x^2): a per-group normalisation (group or full norm). */
    out[0] = bin_(EM_BINARY_divide, ref(x), un_(EM_UNARY_sqrt, s));
    return 1;
}

EM_TEST(fusion_trailing_axes_reductions) {
    int64_t s[3] = {6, 30, 40};
    for (size_t d = 0; d < N_OF(FLOATS); d++)
        for (int v = 0; v < 3; v++) {
            em_array *in[1] = {leaf(s, 3, FLOATS[d], -2, 2, false)};
            fuse_result r = check_fused(__LINE__, trailing_axes_graph, in, v,
                                        sum_tol(FLOATS[d], 0));
            CHECK(r.fused == 1 && r.len_after == 1);
            em_array_release(in[0]);
        }
}

/* Reductions over rows too long for registers fold by chunks: max/min are
 * exact, sums within n eps sum|x| (terms positive here: sum|x| = |sum|). */
static int chunked_graph(em_array *const *in, em_array **out, int op) {
    em_array *x = in[0];
    int axes[3] = {0, 1, 2};
    int nd = x->ndim, naxes = nd == 3 ? 2 : 1;
    em_array *e = bin_(EM_BINARY_multiply, un(EM_UNARY_exp, x), ref(x)), *s;
    CHECK_OK(em_reduce((em_reduce_op)op, e, axes + (nd - naxes), naxes, nd == 2,
                       &s));
    em_array_release(e);
    out[0] = s;
    return 1;
}

EM_TEST(fusion_chunked_reductions) {
    int64_t s2[2] = {3, 100003}, s1[1] = {300001}, s3[3] = {2, 200, 500};
    const int64_t *shapes[] = {s2, s1, s3};
    const int nds[] = {2, 1, 3};
    const em_reduce_op ops[] = {EM_REDUCE_sum, EM_REDUCE_max, EM_REDUCE_min};
    for (size_t k = 0; k < N_OF(shapes); k++)
        for (size_t o = 0; o < N_OF(ops); o++) {
            em_dtype dt = k == 1 ? EM_F64 : EM_F32;
            em_array *in[1] = {leaf(shapes[k], nds[k], dt, 0, 1, false)};
            int64_t n = shapes[k][nds[k] - 1] * (k == 2 ? 200 : 1);
            double tol = ops[o] == EM_REDUCE_sum ? (double)n * eps_of(dt) : -1;
            fuse_result r =
                check_fused(__LINE__, chunked_graph, in, (int)ops[o], tol);
            CHECK(r.fused == 1 && r.len_after == 1);
            em_array_release(in[0]);
        }
}

/* Independent oracle: fused f32 softmax and layer norm against the same
 * formulas in double. The worst-case bound is n eps (the row sums); the
 * 16-lane pairwise folds stay far below it, so the test asks for 16 eps
 * (relative; absolute + relative for layer norm, whose outputs cross 0). */
EM_TEST(fusion_softmax_layer_norm_vs_double) {
    int64_t shape[2] = {16, 500}, gshape[1] = {500};
    const int64_t R = 16, N = 500;
    em_array *in[3] = {leaf(shape, 2, EM_F32, -4, 4, false),
                       leaf(gshape, 1, EM_F32, 0.5, 1.5, false),
                       leaf(gshape, 1, EM_F32, -1, 1, false)};
    double *x = malloc(sizeof(double) * (size_t)(R * N));
    double g[500], b[500];
    t_read_f64(in[0], x, (size_t)(R * N));
    t_read_f64(in[1], g, 500);
    t_read_f64(in[2], b, 500);
    for (int which = 0; which < 2; which++) {
        em_array *out[MAX_OUT] = {0};
        graph_fn fn = which == 0 ? softmax_graph : layer_norm_graph;
        fn(in, out, 0);
        em__tape tape;
        memset(&tape, 0, sizeof tape);
        CHECK_OK(em__topo_order(out, 1, &tape.nodes, &tape.len));
        tape.outputs = out;
        tape.noutputs = 1;
        int nf = 0;
        CHECK_OK(em__fuse_tape(&tape, &nf));
        CHECK(nf == 1 && tape.len == 1);
        double *y = malloc(sizeof(double) * (size_t)(R * N));
        t_read_f64(out[0], y, (size_t)(R * N));
        double tol = 16 * FLT_EPSILON;
        int bad = 0;
        for (int64_t r = 0; r < R; r++) {
            const double *xr = x + r * N;
            double m = -INFINITY, s = 0, mu = 0, var = 0;
            for (int64_t j = 0; j < N; j++)
                m = xr[j] > m ? xr[j] : m;
            for (int64_t j = 0; j < N; j++) {
                s += exp(xr[j] - m);
                mu += xr[j];
            }
            mu /= (double)N;
            for (int64_t j = 0; j < N; j++)
                var += (xr[j] - mu) * (xr[j] - mu);
            var /= (double)N;
            for (int64_t j = 0; j < N && bad < 3; j++) {
                double want =
                    which == 0 ? exp(xr[j] - m) / s
                               : (xr[j] - mu) / sqrt(var + 1e-5) * g[j] + b[j];
                double got = y[r * N + j];
                if (!(fabs(got - want) <=
                      tol * (fabs(want) + (which ? 1 : 0)))) {
                    em_test_fail(__FILE__, __LINE__,
                                 "%s row %lld col %lld: %.9g, wanted %.9g",
                                 which ? "layer norm" : "softmax", (long long)r,
                                 (long long)j, got, want);
                    bad++;
                }
            }
        }
        free(y);
        for (size_t i = 0; i < tape.len; i++)
            em_array_release(tape.nodes[i]);
        free(tape.nodes);
        em_array_release(out[0]);
    }
    free(x);
    for (int i = 0; i < 3; i++)
        em_array_release(in[i]);
}
