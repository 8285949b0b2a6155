/*
 * test_fast_decode.c — em_fast_linear's CPU kernel (the reference of the
 * GPU one): hand-computed values for the plain product, the RMS prologue
 * with and without weight, the SiLU gate and the residual; agreement with
 * the composed ops on random f32 inputs over odd sizes and leading axes;
 * the halves rounding once; validation messages; and grad through it
 * failing with a clear message (inference only). em_fast_heads against
 * the composed ops, and its cache form against em_fast_heads followed by
 * em_dynamic_put_slice, in place (donated cache) and copied.
 */
#include "emily_autodiff.h"
#include "emily_fast.h"
#include "emily_pad.h"
#include "test.h"

#include "internal.h" /* only for the cache donation (buffer identity) */

#include <stdlib.h>

static em_array *f64_array(const double *v, const int64_t *shape, int ndim) {
    return t_from_f64(v, shape, ndim, EM_F64);
}

static double silu(double g) { return g / (1 + exp(-g)); }

EM_TEST(fast_linear_values) {
    const double xv[] = {1, 2, -1, 0.5};      /* (2, 2) */
    const double wv[] = {1, 0, 0, 1, 1, 1};   /* (3, 2) */
    const double gv[] = {2, 0, 0, -1, 1, -1}; /* (3, 2) */
    const double nv[] = {2, 0.5};
    const double rv[] = {10, 20, 30, -1, -2, -3};
    int64_t xs[] = {2, 2}, ws[] = {3, 2}, ns[] = {2}, rs[] = {2, 3};
    em_array *x = f64_array(xv, xs, 2), *w = f64_array(wv, ws, 2),
             *g = f64_array(gv, ws, 2), *nw = f64_array(nv, ns, 1),
             *r = f64_array(rv, rs, 2);
    double out[6];
    em_array *y = NULL;
    /* plain: x @ w^T */
    CHECK_OK(em_fast_linear(x, w, NULL, &y));
    t_read_f64(y, out, 6);
    const double plain[] = {1, 2, 3, -1, 0.5, -0.5};
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(out[i], plain[i], 1e-15);
    em_array_release(y);
    /* RMS prologue with weight, gate and residual */
    em_fast_linear_options o = {.norm = true, .norm_weight = nw, .eps = 0.25,
                                .gate = g, .residual = r};
    CHECK_OK(em_fast_linear(x, w, &o, &y));
    t_read_f64(y, out, 6);
    for (int m = 0; m < 2; m++) {
        const double a = xv[2 * m], b = xv[2 * m + 1];
        const double inv = 1 / sqrt((a * a + b * b) / 2 + 0.25);
        const double xa = a * inv * 2, xb = b * inv * 0.5;
        for (int n = 0; n < 3; n++) {
            const double h = xa * wv[2 * n] + xb * wv[2 * n + 1];
            const double gg = xa * gv[2 * n] + xb * gv[2 * n + 1];
            CHECK_NEAR(out[3 * m + n], silu(gg) * h + rv[3 * m + n], 1e-13);
        }
    }
    em_array_release(y);
    /* RMS prologue without weight */
    em_fast_linear_options o2 = {.norm = true, .eps = 0};
    CHECK_OK(em_fast_linear(x, w, &o2, &y));
    t_read_f64(y, out, 6);
    const double inv0 = 1 / sqrt(2.5);
    CHECK_NEAR(out[0], 1 * inv0, 1e-15);
    CHECK_NEAR(out[1], 2 * inv0, 1e-15);
    CHECK_NEAR(out[2], 3 * inv0, 1e-15);
    em_array_release(y);
    em_array_release(x), em_array_release(w), em_array_release(g),
        em_array_release(nw), em_array_release(r);
}

static em_array *rand_of(em_dtype dt, const int64_t *shape, int ndim,
                         uint64_t *s) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (double)(*s >> 11) / 9007199254740992.0 * 2 - 1;
    }
    em_array *a = t_from_f64(v, shape, ndim, dt);
    free(v);
    return a;
}

static em_array *rand_f32(const int64_t *shape, int ndim, uint64_t *s) {
    return rand_of(EM_F32, shape, ndim, s);
}

/* The composed reference: rms_norm in f32 (rounded to f32, as the fused
 * kernel keeps it), matmul with w^T, sigmoid gate, residual. */
static em_array *composed(em_array *x, em_array *w,
                          const em_fast_linear_options *o) {
    em_array *xn = NULL, *wt = NULL, *h = NULL, *gt = NULL, *gg = NULL,
             *sg = NULL, *act = NULL, *hg = NULL, *out = NULL;
    int perm[2] = {1, 0};
    if (o->norm)
        CHECK_OK(em_rms_norm(x, o->norm_weight, o->eps, &xn));
    else {
        em_array_retain(x);
        xn = x;
    }
    CHECK_OK(em_transpose(w, perm, 2, &wt));
    CHECK_OK(em_matmul(xn, wt, &h));
    if (o->gate) {
        CHECK_OK(em_transpose(o->gate, perm, 2, &gt));
        CHECK_OK(em_matmul(xn, gt, &gg));
        CHECK_OK(em_unary(EM_UNARY_sigmoid, gg, &sg));
        CHECK_OK(em_binary(EM_BINARY_multiply, gg, sg, &act));
        CHECK_OK(em_binary(EM_BINARY_multiply, act, h, &hg));
    } else {
        em_array_retain(h);
        hg = h;
    }
    if (o->residual)
        CHECK_OK(em_binary(EM_BINARY_add, hg, o->residual, &out));
    else {
        em_array_retain(hg);
        out = hg;
    }
    em_array *all[] = {xn, wt, h, gt, gg, sg, act, hg};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        em_array_release(all[i]);
    return out;
}

EM_TEST(fast_linear_matches_composed) {
    uint64_t s = 42;
    const int64_t sizes[][3] = {{1, 17, 33}, {3, 64, 100}, {5, 9, 1}};
    for (int c = 0; c < 3; c++) {
        const int64_t M = sizes[c][0], N = sizes[c][1], K = sizes[c][2];
        int64_t xs[3] = {M, 1, K}, ws[2] = {N, K}, ns[1] = {K},
                rs[3] = {M, 1, N};
        em_array *x = rand_f32(xs, 3, &s), *w = rand_f32(ws, 2, &s),
                 *g = rand_f32(ws, 2, &s), *nw = rand_f32(ns, 1, &s),
                 *r = rand_f32(rs, 3, &s);
        for (int variant = 0; variant < 4; variant++) {
            em_fast_linear_options o = {0};
            if (variant & 1) {
                o.norm = true;
                o.norm_weight = nw;
                o.eps = 1e-6;
            }
            if (variant & 2) {
                o.gate = g;
                o.residual = r;
            }
            em_array *y = NULL, *ref = composed(x, w, &o);
            CHECK_OK(em_fast_linear(x, w, &o, &y));
            const int64_t n = M * N;
            double *a = malloc(sizeof(double) * (size_t)n),
                   *b = malloc(sizeof(double) * (size_t)n);
            t_read_f64(y, a, (size_t)n);
            t_read_f64(ref, b, (size_t)n);
            for (int64_t i = 0; i < n; i++)
                CHECK_NEAR(a[i], b[i], 2e-5 * (fabs(b[i]) + (double)K));
            free(a);
            free(b);
            em_array_release(y);
            em_array_release(ref);
        }
        em_array_release(x), em_array_release(w), em_array_release(g),
            em_array_release(nw), em_array_release(r);
    }
}

EM_TEST(fast_linear_empty_rows) {
    /* K = 0: every product is 0, the residual passes through */
    int64_t xs[2] = {2, 0}, ws[2] = {3, 0}, rs[2] = {2, 3};
    const double rv[] = {1, 2, 3, 4, 5, 6};
    em_array *x = t_from_f64(NULL, xs, 2, EM_F32),
             *w = t_from_f64(NULL, ws, 2, EM_F32),
             *r = t_from_f64(rv, rs, 2, EM_F32), *y = NULL;
    em_fast_linear_options o = {.gate = w, .residual = r};
    CHECK_OK(em_fast_linear(x, w, &o, &y));
    double out[6];
    t_read_f64(y, out, 6);
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(out[i], rv[i], 0);
    em_array_release(x), em_array_release(w), em_array_release(r),
        em_array_release(y);
}

EM_TEST(fast_linear_halves_round_once) {
    /* bf16: 1 + 1/256 + 1/256 is exact in f32 and rounds once to 1 + 1/128
     * in bf16; products in f32, one rounding at the end. */
    const double xv[] = {1, 1, 1};
    const double wv[] = {1, 1.0 / 256, 1.0 / 256};
    int64_t xs[] = {1, 3}, ws[] = {1, 3};
    em_array *x = t_from_f64(xv, xs, 2, EM_BF16),
             *w = t_from_f64(wv, ws, 2, EM_BF16), *y = NULL;
    CHECK_OK(em_fast_linear(x, w, NULL, &y));
    CHECK(em_array_dtype(y) == EM_BF16);
    double out[1];
    t_read_f64(y, out, 1);
    CHECK_NEAR(out[0], 1 + 1.0 / 128, 0);
    em_array_release(x), em_array_release(w), em_array_release(y);
}

EM_TEST(fast_linear_validation) {
    const double v[] = {1, 2, 3, 4, 5, 6};
    int64_t s23[] = {2, 3}, s32[] = {3, 2}, s2[] = {2};
    em_array *x = f64_array(v, s23, 2), *wbad = f64_array(v, s32, 2),
             *w = f64_array(v, s23, 2), *n2 = f64_array(v, s2, 1),
             *xf = t_from_f64(v, s23, 2, EM_F32), *y = NULL;
    CHECK_ERR(em_fast_linear(x, wbad, NULL, &y), EM_ERR_ARGUMENT,
              "fast_linear: x");
    CHECK(y == NULL);
    CHECK_ERR(em_fast_linear(xf, w, NULL, &y), EM_ERR_ARGUMENT,
              "share one real float dtype");
    em_fast_linear_options o = {.norm = true, .norm_weight = n2};
    CHECK_ERR(em_fast_linear(x, w, &o, &y), EM_ERR_ARGUMENT, "norm_weight");
    em_fast_linear_options o2 = {.norm_weight = NULL, .norm = true,
                                 .eps = -1};
    CHECK_ERR(em_fast_linear(x, w, &o2, &y), EM_ERR_ARGUMENT, "eps");
    em_fast_linear_options o3 = {.gate = wbad};
    CHECK_ERR(em_fast_linear(x, w, &o3, &y), EM_ERR_ARGUMENT, "gate");
    em_fast_linear_options o4 = {.residual = n2};
    CHECK_ERR(em_fast_linear(x, w, &o4, &y), EM_ERR_ARGUMENT, "residual");
    CHECK_ERR(em_fast_linear(NULL, w, NULL, &y), EM_ERR_ARGUMENT, "NULL");
    em_array_release(x), em_array_release(wbad), em_array_release(w),
        em_array_release(n2), em_array_release(xf);
}

EM_TEST(fast_linear_has_no_gradient) {
    const double v[] = {1, 2, 3, 4};
    int64_t s[] = {2, 2};
    em_array *x = f64_array(v, s, 2), *w = f64_array(v, s, 2), *xi = NULL,
             *y = NULL, *grad = NULL;
    CHECK_OK(em_identity(x, &xi));
    CHECK_OK(em_fast_linear(xi, w, NULL, &y));
    em_array *ct = f64_array(v, s, 2);
    CHECK_ERR(em_vjp(&y, &ct, 1, &xi, 1, &grad), EM_ERR_ARGUMENT,
              "fast_linear");
    CHECK(grad == NULL);
    em_array_release(x), em_array_release(w), em_array_release(xi),
        em_array_release(y), em_array_release(ct);
}

/* em_fast_heads against slice -> reshape -> rms_norm -> transpose -> rope
 * in f64 (the composed ops round nothing in f64, so the two agree to a
 * few ulp). */
static em_array *heads_composed(em_array *x, const em_fast_heads_options *o) {
    const int64_t *xs = em_array_shape(x);
    int64_t start[3] = {0, 0, o->first * o->head_dim},
            stop[3] = {xs[0], xs[1], (o->first + o->count) * o->head_dim},
            step[3] = {1, 1, 1};
    int64_t split[4] = {xs[0], xs[1], o->count, o->head_dim};
    int perm[4] = {0, 2, 1, 3};
    em_array *sl = NULL, *r = NULL, *n = NULL, *t = NULL, *out = NULL;
    CHECK_OK(em_slice(x, start, stop, step, &sl));
    CHECK_OK(em_reshape(sl, split, 4, &r));
    if (o->norm)
        CHECK_OK(em_rms_norm(r, o->norm_weight, o->eps, &n));
    else {
        em_array_retain(r);
        n = r;
    }
    CHECK_OK(em_transpose(n, perm, 4, &t));
    if (o->offset)
        CHECK_OK(em_rope(t, o->offset, &o->rope, &out));
    else
        CHECK_OK(em_contiguous(t, &out));
    em_array_release(sl), em_array_release(r), em_array_release(n),
        em_array_release(t);
    return out;
}

EM_TEST(fast_heads_matches_composed) {
    uint64_t s = 7;
    for (int variant = 0; variant < 4; variant++) {
        const int64_t B = 2, S = 3, D = 8, first = 1, count = 2;
        const int64_t N = (first + count + 1) * D;
        int64_t xs[3] = {B, S, N}, ns[1] = {D};
        em_array *x = rand_f32(xs, 3, &s), *nw = rand_f32(ns, 1, &s);
        em_array *x64 = NULL, *nw64 = NULL, *off = NULL;
        CHECK_OK(em_as_type(x, EM_F64, &x64));
        CHECK_OK(em_as_type(nw, EM_F64, &nw64));
        CHECK_OK(em_scalar_s64(5, EM_S64, &off));
        em_fast_heads_options o = {.head_dim = D,
                                   .first = first,
                                   .count = count,
                                   .norm = variant != 0,
                                   .norm_weight = variant >= 2 ? nw64 : NULL,
                                   .eps = 1e-6,
                                   .offset = variant != 1 ? off : NULL,
                                   .rope = {.dims = variant == 3 ? 4 : 8,
                                            .traditional = variant == 3,
                                            .base = 1e6}};
        em_array *y = NULL, *ref = heads_composed(x64, &o);
        CHECK_OK(em_fast_heads(x64, &o, &y));
        const int64_t *ys = em_array_shape(y);
        CHECK(ys[0] == B && ys[1] == count && ys[2] == S && ys[3] == D);
        const int64_t n = B * count * S * D;
        double a[2 * 2 * 3 * 8], b[2 * 2 * 3 * 8];
        t_read_f64(y, a, (size_t)n);
        t_read_f64(ref, b, (size_t)n);
        for (int64_t i = 0; i < n; i++)
            CHECK_NEAR(a[i], b[i], 1e-12 * (fabs(b[i]) + 1));
        em_array_release(y), em_array_release(ref), em_array_release(x),
            em_array_release(nw), em_array_release(x64),
            em_array_release(nw64), em_array_release(off);
    }
}

EM_TEST(fast_heads_validation) {
    const double v[24] = {0};
    int64_t xs[3] = {1, 1, 24}, s2[2] = {1, 24};
    em_array *x = t_from_f64(v, xs, 3, EM_F32),
             *x2 = t_from_f64(v, s2, 2, EM_F32), *y = NULL, *off = NULL;
    CHECK_OK(em_scalar_s64(0, EM_F32, &off));
    em_fast_heads_options o = {.head_dim = 8, .first = 2, .count = 2};
    CHECK_ERR(em_fast_heads(x, &o, &y), EM_ERR_ARGUMENT, "do not fit");
    CHECK(y == NULL);
    o.first = 0;
    CHECK_ERR(em_fast_heads(x2, &o, &y), EM_ERR_ARGUMENT, "(B, S, N)");
    o.offset = off;
    o.rope.dims = 8;
    CHECK_ERR(em_fast_heads(x, &o, &y), EM_ERR_ARGUMENT, "0-d s32 or s64");
    em_array_release(off);
    CHECK_OK(em_scalar_s64(0, EM_S32, &off));
    o.offset = off;
    o.rope.dims = 9;
    CHECK_ERR(em_fast_heads(x, &o, &y), EM_ERR_ARGUMENT, "rope dims");
    o.rope.dims = 8;
    CHECK_OK(em_fast_heads(x, &o, &y));
    em_array_release(x), em_array_release(x2), em_array_release(y),
        em_array_release(off);
}

/* ---- em_fast_heads writing into a KV cache ------------------------------ */

enum { HC_B = 2, HC_COUNT = 2, HC_D = 8, HC_FIRST = 1, HC_L = 6 };
#define HC_MAX (HC_B * HC_COUNT * HC_L * HC_D)

typedef struct heads_cache_case {
    em_dtype dt;
    int64_t S;
    bool norm_rope;  /* q/k style (norm with weight, RoPE) or v style */
    int64_t start;   /* cache_offset's value, clamped into [0, L - S] */
    bool donate;     /* release the cache before evaluating */
    bool transposed; /* the cache a non-contiguous view (never donated) */
} heads_cache_case;

/* A (B, count, L, D) cache of dt: contiguous, or the transpose of a (B,
 * count, D, L) array (a strided view the eval must copy). */
static em_array *heads_cache_of(const heads_cache_case *c, uint64_t *seed) {
    if (!c->transposed) {
        const int64_t cs[4] = {HC_B, HC_COUNT, HC_L, HC_D};
        return rand_of(c->dt, cs, 4, seed);
    }
    const int64_t ts[4] = {HC_B, HC_COUNT, HC_D, HC_L};
    const int perm[4] = {0, 1, 3, 2};
    em_array *base = rand_of(c->dt, ts, 4, seed), *view = NULL;
    CHECK_OK(em_transpose(base, perm, 4, &view));
    em_array_release(base);
    return view;
}

/* The cache form equals em_fast_heads then em_dynamic_put_slice at {0, 0,
 * start, 0} bit for bit (the same row arithmetic, then the same bits
 * moved); the caller's cache keeps its values when it is not donated, and
 * gives its buffer to the result when it is. */
static void heads_cache_check(const heads_cache_case *c, uint64_t *seed) {
    const int64_t N = (HC_FIRST + HC_COUNT + 1) * HC_D;
    const int64_t xs[3] = {HC_B, c->S, N}, ns[1] = {HC_D};
    em_array *x = rand_of(c->dt, xs, 3, seed),
             *nw = rand_of(c->dt, ns, 1, seed);
    em_array *cache = heads_cache_of(c, seed), *off = NULL, *coff = NULL,
             *starts = NULL;
    CHECK_OK(em_scalar_s64(5, EM_S32, &off));
    /* both index dtypes, by the sign of the start */
    CHECK_OK(em_scalar_s64(c->start, c->start < 0 ? EM_S32 : EM_S64, &coff));
    const double sv[4] = {0, 0, (double)c->start, 0};
    const int64_t ss[1] = {4};
    starts = t_from_f64(sv, ss, 1, EM_S64);
    CHECK_OK(em_eval(&cache, 1));
    double before[HC_MAX], want[HC_MAX], got[HC_MAX];
    t_read_f64(cache, before, HC_MAX);
    const void *cache_data = cache->buffer->data;

    em_fast_heads_options o = {.head_dim = HC_D,
                               .first = HC_FIRST,
                               .count = HC_COUNT,
                               .norm = c->norm_rope,
                               .norm_weight = c->norm_rope ? nw : NULL,
                               .eps = 1e-6,
                               .offset = c->norm_rope ? off : NULL,
                               .rope = {.dims = HC_D, .base = 1e6}};
    em_array *heads = NULL, *ref = NULL, *y = NULL;
    CHECK_OK(em_fast_heads(x, &o, &heads));
    CHECK_OK(em_dynamic_put_slice(cache, starts, heads, &ref));
    t_read_f64(ref, want, HC_MAX);
    em_array_release(ref);
    o.cache = cache;
    o.cache_offset = coff;
    CHECK_OK(em_fast_heads(x, &o, &y));
    const int64_t *ys = em_array_shape(y);
    CHECK(ys[0] == HC_B && ys[1] == HC_COUNT && ys[2] == HC_L && ys[3] == HC_D);
    if (c->donate) {
        em_array_release(cache); /* y's node is now its only holder */
        cache = NULL;
    }
    CHECK_OK(em_eval(&y, 1));
    t_read_f64(y, got, HC_MAX);
    for (int i = 0; i < HC_MAX; i++)
        CHECK_NEAR(got[i], want[i], 0);
    /* in place exactly when donated (a strided view never is) */
    CHECK((y->buffer->data == cache_data) == (c->donate && !c->transposed));
    if (cache) {
        double after[HC_MAX];
        t_read_f64(cache, after, HC_MAX);
        for (int i = 0; i < HC_MAX; i++)
            CHECK_NEAR(after[i], before[i], 0);
    }
    em_array *all[] = {x, nw, cache, off, coff, starts, heads, y};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        em_array_release(all[i]);
}

EM_TEST(fast_heads_cache_matches_put_slice) {
    uint64_t seed = 11;
    const em_dtype dts[2] = {EM_F32, EM_BF16};
    const int64_t Ss[2] = {1, 3}, starts[3] = {2, 100, -4};
    for (int d = 0; d < 2; d++)
        for (int si = 0; si < 2; si++)
            for (int v = 0; v < 2; v++)
                for (int st = 0; st < 3; st++)
                    for (int don = 0; don < 2; don++) {
                        heads_cache_case c = {dts[d],     Ss[si],   v == 1,
                                              starts[st], don == 1, false};
                        heads_cache_check(&c, &seed);
                    }
    /* a strided cache, kept and given up */
    for (int don = 0; don < 2; don++) {
        heads_cache_case c = {EM_F32, 3, true, 1, don == 1, true};
        heads_cache_check(&c, &seed);
    }
}

EM_TEST(fast_heads_cache_validation) {
    static const double v[96] = {0}; /* the largest array's zeros */
    int64_t xs[3] = {1, 2, 24}, cs[4] = {1, 2, 4, 8},
            bad_count[4] = {1, 3, 4, 8}, short_l[4] = {1, 2, 1, 8}, s1[1] = {1};
    em_array *x = t_from_f64(v, xs, 3, EM_F32),
             *cache = t_from_f64(v, cs, 4, EM_F32),
             *c_count = t_from_f64(v, bad_count, 4, EM_F32),
             *c_short = t_from_f64(v, short_l, 4, EM_F32),
             *c_bf16 = t_from_f64(v, cs, 4, EM_BF16),
             *i_1d = t_from_f64(v, s1, 1, EM_S32), *coff = NULL, *f_off = NULL,
             *y = NULL;
    CHECK_OK(em_scalar_s64(1, EM_S32, &coff));
    CHECK_OK(em_scalar_s64(1, EM_F32, &f_off));
    em_fast_heads_options o = {
        .head_dim = 8, .first = 0, .count = 2, .cache = cache};
    CHECK_ERR(em_fast_heads(x, &o, &y), EM_ERR_ARGUMENT,
              "fast_heads: cache and cache_offset go together (got cache "
              "without cache_offset)");
    CHECK(y == NULL);
    o.cache = NULL;
    o.cache_offset = coff;
    CHECK_ERR(em_fast_heads(x, &o, &y), EM_ERR_ARGUMENT,
              "got cache_offset without cache");
    o.cache = c_count;
    CHECK_ERR(em_fast_heads(x, &o, &y), EM_ERR_ARGUMENT,
              "fast_heads: cache f32[1,3,4,8] must be (B, count, L, "
              "head_dim) = (1, 2, L >= 2, 8) of the dtype of x f32[1,2,24]");
    o.cache = c_short;
    CHECK_ERR(em_fast_heads(x, &o, &y), EM_ERR_ARGUMENT, "L >= 2");
    o.cache = c_bf16;
    CHECK_ERR(em_fast_heads(x, &o, &y), EM_ERR_ARGUMENT, "bf16[1,2,4,8]");
    o.cache = cache;
    o.cache_offset = f_off;
    CHECK_ERR(em_fast_heads(x, &o, &y), EM_ERR_ARGUMENT,
              "fast_heads: cache_offset f32[] must be a 0-d s32 or s64");
    o.cache_offset = i_1d;
    CHECK_ERR(em_fast_heads(x, &o, &y), EM_ERR_ARGUMENT, "cache_offset s32[1]");
    o.cache_offset = coff;
    CHECK_OK(em_fast_heads(x, &o, &y));
    em_array *all[] = {x,    cache, c_count, c_short, c_bf16,
                       i_1d, coff,  f_off,   y};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        em_array_release(all[i]);
}
