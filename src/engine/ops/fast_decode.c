/*
 * fast_decode.c — the decode path's fused primitives (include/emily_fast.h):
 * em_fast_linear, one primitive "fast_linear" computing
 *
 *   out = [silu(xn @ gate^T) *] (xn @ w^T) [+ residual],
 *   xn  = x, or x * rsqrt(mean(x^2) + eps) [* norm_weight] (RMS prologue)
 *
 * over row-contiguous inputs. The CPU kernel is the reference of the GPU
 * one (gpu/gpu_decode.c, src/cuda/decode.cu): x's rows are first turned
 * into xn in the compute type (f32, f64 for f64; never rounded to x's
 * dtype), then each output n is a dot product of xn's rows with weight row
 * n, in LANES independent accumulators (vectorised without -ffast-math),
 * the epilogue applied in the compute type and the result rounded once.
 * Outputs are split over the thread pool. No vjp: an inference kernel
 * (grad through it fails naming the primitive).
 */
#include "copy.h"
#include "emily_fast.h"
#include "fast_decode_params.h"

#include <stdlib.h>

#define LANES 8

typedef struct linear_job {
    const void *x, *nw, *w, *gate, *res;
    void *xn; /* M x K of the compute type */
    void *y;
    int64_t M, N, K;
    bool norm;
    double eps;
} linear_job;

#define LIN_EXP(x) _Generic((x), float : expf, default : exp)(x)
#define LIN_SQRT(x) _Generic((x), float : sqrtf, default : sqrt)(x)

/* sum over k of a[k] * LOAD(w[k]), LANES accumulators. */
#define LIN_DOT(C, LOAD, a, w, K, out)                                         \
    do {                                                                       \
        C lane_[LANES] = {0};                                                  \
        int64_t k_ = 0;                                                        \
        for (; k_ + LANES <= (K); k_ += LANES)                                 \
            for (int l_ = 0; l_ < LANES; l_++)                                 \
                lane_[l_] += (a)[k_ + l_] * (C)LOAD((w)[k_ + l_]);             \
        C tail_ = 0;                                                           \
        for (; k_ < (K); k_++)                                                 \
            tail_ += (a)[k_] * (C)LOAD((w)[k_]);                               \
        for (int h_ = LANES / 2; h_ > 0; h_ /= 2)                              \
            for (int l_ = 0; l_ < h_; l_++)                                    \
                lane_[l_] += lane_[l_ + h_];                                   \
        (out) = lane_[0] + tail_;                                              \
    } while (0)

#define DEFINE_LINEAR(E, sfx, S, C, LOAD, STORE)                               \
    /* xn's rows [m0, m1) */                                                   \
    static void linear_prologue_##sfx(void *ctx, int64_t m0, int64_t m1) {     \
        const linear_job *j = ctx;                                             \
        const S *x = j->x, *nw = j->nw;                                        \
        C *xn = j->xn;                                                         \
        for (int64_t m = m0; m < m1; m++) {                                    \
            const S *xr = x + m * j->K;                                        \
            C *o = xn + m * j->K;                                              \
            C r = 1;                                                           \
            if (j->norm) {                                                     \
                C ss = 0;                                                      \
                for (int64_t k = 0; k < j->K; k++)                             \
                    ss += (C)LOAD(xr[k]) * (C)LOAD(xr[k]);                     \
                r = (C)1 / LIN_SQRT(ss / (C)j->K + (C)j->eps);                 \
            }                                                                  \
            for (int64_t k = 0; k < j->K; k++)                                 \
                o[k] = (C)LOAD(xr[k]) * r * (nw ? (C)LOAD(nw[k]) : (C)1);      \
        }                                                                      \
    }                                                                          \
    /* outputs [n0, n1) of every row */                                        \
    EM_CLONES static void linear_range_##sfx(void *ctx, int64_t n0,            \
                                             int64_t n1) {                     \
        const linear_job *j = ctx;                                             \
        const S *w = j->w, *g = j->gate, *res = j->res;                        \
        const C *xn = j->xn;                                                   \
        S *y = j->y;                                                           \
        for (int64_t n = n0; n < n1; n++)                                      \
            for (int64_t m = 0; m < j->M; m++) {                               \
                C h, gv = 0;                                                   \
                LIN_DOT(C, LOAD, xn + m * j->K, w + n * j->K, j->K, h);        \
                if (g) {                                                       \
                    LIN_DOT(C, LOAD, xn + m * j->K, g + n * j->K, j->K, gv);   \
                    h *= gv / ((C)1 + LIN_EXP(-gv));                           \
                }                                                              \
                if (res)                                                       \
                    h += (C)LOAD(res[m * j->N + n]);                           \
                y[m * j->N + n] = STORE(h);                                    \
            }                                                                  \
    }
EM_DTYPES_REALFLOAT(DEFINE_LINEAR)

typedef struct linear_fns {
    em_range_fn prologue, range;
    size_t compute_size;
} linear_fns;

#define REG_LINEAR(E, sfx, S, C, ...)                                          \
    [E] = {linear_prologue_##sfx, linear_range_##sfx, sizeof(C)},
static const linear_fns linear_table[EM_DTYPE_COUNT] = {
    EM_DTYPES_REALFLOAT(REG_LINEAR)};

static em_status linear_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const linear_params *p = node->params;
    const em_array *x = node->inputs[0], *w = node->inputs[1];
    linear_job j;
    memset(&j, 0, sizeof j);
    int k = 2;
    j.x = em__data(x);
    j.w = em__data(w);
    j.nw = p->has_norm_weight ? em__data(node->inputs[k++]) : NULL;
    j.gate = p->has_gate ? em__data(node->inputs[k++]) : NULL;
    j.res = p->has_residual ? em__data(node->inputs[k++]) : NULL;
    j.y = em__data(node);
    j.K = x->shape[x->ndim - 1];
    j.N = w->shape[0];
    j.M = node->size / j.N; /* x's leading rows (node->size > 0 here) */
    j.norm = p->norm;
    j.eps = p->eps;
    const linear_fns *f = &linear_table[node->dtype];
    j.xn = malloc((size_t)(j.M * j.K) * f->compute_size + 1);
    if (!j.xn)
        return em__fail(EM_ERR_OOM, "fast_linear: no memory for %lld x %lld "
                                    "normed rows",
                        (long long)j.M, (long long)j.K);
    em__parallel_units(j.M, j.K, f->prologue, &j);
    em__parallel_units(j.N, j.M * j.K * (p->has_gate ? 2 : 1), f->range, &j);
    free(j.xn);
    return EM_OK;
}

static const em_prim linear_prim = {"fast_linear", linear_eval, NULL,
                                    em__gpu_fast_linear_eval};

/* ------------------------------------------------------------------------ */
/* Building                                                                  */
/* ------------------------------------------------------------------------ */

static em_status linear_check(em_array *x, em_array *w,
                              const em_fast_linear_options *o) {
    em_desc dx, dw, dv;
    if (!em_dtype_is_float(x->dtype) || x->ndim < 1 || w->ndim != 2 ||
        w->dtype != x->dtype || w->shape[1] != x->shape[x->ndim - 1])
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_linear: x %s (..., K) and w %s (N, K) must "
                        "share one real float dtype and K",
                        em__describe(x, &dx), em__describe(w, &dw));
    const int64_t K = w->shape[1];
    if (o->norm_weight &&
        (o->norm_weight->ndim != 1 || o->norm_weight->shape[0] != K ||
         o->norm_weight->dtype != x->dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_linear: norm_weight %s must have shape [%lld] "
                        "and the dtype of x %s",
                        em__describe(o->norm_weight, &dv), (long long)K,
                        em__describe(x, &dx));
    if (o->norm_weight && !o->norm)
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_linear: norm_weight given without norm");
    if (o->norm && (!(o->eps >= 0) || isinf(o->eps)))
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_linear: eps must be finite and >= 0, got %g",
                        o->eps);
    if (o->gate && (o->gate->ndim != 2 || o->gate->shape[0] != w->shape[0] ||
                    o->gate->shape[1] != K || o->gate->dtype != w->dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_linear: gate %s must have the shape and dtype "
                        "of w %s",
                        em__describe(o->gate, &dv), em__describe(w, &dw));
    if (o->residual) {
        const em_array *r = o->residual;
        bool ok = r->ndim == x->ndim && r->dtype == x->dtype &&
                  r->shape[r->ndim - 1] == w->shape[0];
        for (int i = 0; ok && i < x->ndim - 1; i++)
            ok = r->shape[i] == x->shape[i];
        if (!ok)
            return em__fail(EM_ERR_ARGUMENT,
                            "fast_linear: residual %s must have x's leading "
                            "axes %s, N = %lld and x's dtype",
                            em__describe(r, &dv), em__describe(x, &dx),
                            (long long)w->shape[0]);
    }
    return EM_OK;
}

em_status em_fast_linear(em_array *x, em_array *w,
                         const em_fast_linear_options *opts, em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !w || !out)
        return em__fail(EM_ERR_ARGUMENT, "fast_linear: NULL argument");
    em_fast_linear_options o;
    memset(&o, 0, sizeof o);
    if (opts)
        o = *opts;
    em_status st = linear_check(x, w, &o);
    if (st != EM_OK)
        return st;
    linear_params p;
    memset(&p, 0, sizeof p); /* padding too: CSE compares the bytes */
    p.norm = o.norm;
    p.has_norm_weight = o.norm_weight != NULL;
    p.has_gate = o.gate != NULL;
    p.has_residual = o.residual != NULL;
    p.eps = o.norm ? o.eps : 0;
    em_array *src[5] = {x, w, o.norm_weight, o.gate, o.residual};
    em_array *in[5] = {NULL};
    int n = 0;
    for (int i = 0; i < 5 && st == EM_OK; i++)
        if (src[i])
            st = em_contiguous(src[i], &in[n++]);
    int64_t shape[EM_MAX_NDIM];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 1] = w->shape[0];
    if (st == EM_OK)
        st = em__node_new_params(&linear_prim, x->dtype, shape, x->ndim, in,
                                 n, &p, sizeof p, out);
    for (int i = 0; i < n; i++)
        em_array_release(in[i]);
    return st;
}

/* ------------------------------------------------------------------------ */
/* fast_heads: head split, per-head RMS norm and RoPE                        */
/* ------------------------------------------------------------------------ */

/* The CPU kernel: a unit is one computed row (b, h, s) of head_dim
 * features; the row is normed into a compute-type buffer, then rotated pair
 * by pair with cos / sin of the angle computed in double and rounded to
 * the compute type (as em_rope), and stored once, at row start + s of the
 * L rows of (b, h) in y: the heads themselves (L = S, start = 0) or the
 * new rows of a cache. */
typedef struct heads_job {
    const void *x, *nw;
    void *y;
    const double *inv; /* dims/2 inverse frequencies */
    int64_t B, S, N, D, first, count, half;
    int64_t L, start; /* y's rows per head, the first one written */
    int64_t offset;
    double eps, scale;
    bool norm, rope, traditional;
} heads_job;

#define DEFINE_HEADS(E, sfx, S_, C, LOAD, STORE)                               \
    static void heads_rows_##sfx(void *ctx, int64_t u0, int64_t u1) {          \
        const heads_job *j = ctx;                                              \
        const S_ *nw = j->nw;                                                  \
        C buf[EM_FAST_HEADS_MAX_DIM];                                          \
        for (int64_t u = u0; u < u1; u++) {                                    \
            /* u = ((b * count) + h) * S + s: the heads' row order */          \
            const int64_t s = u % j->S, h = (u / j->S) % j->count,             \
                          b = u / (j->S * j->count);                           \
            const S_ *xr = (const S_ *)j->x + (b * j->S + s) * j->N +          \
                           (j->first + h) * j->D;                              \
            S_ *yr = (S_ *)j->y + ((u / j->S) * j->L + j->start + s) * j->D;   \
            C r = 1;                                                           \
            if (j->norm) {                                                     \
                C ss = 0;                                                      \
                for (int64_t e = 0; e < j->D; e++)                             \
                    ss += (C)LOAD(xr[e]) * (C)LOAD(xr[e]);                     \
                r = (C)1 / LIN_SQRT(ss / (C)j->D + (C)j->eps);                 \
            }                                                                  \
            for (int64_t e = 0; e < j->D; e++)                                 \
                buf[e] = (C)LOAD(xr[e]) * r * (nw ? (C)LOAD(nw[e]) : (C)1);    \
            int64_t done = 0;                                                  \
            if (j->rope) {                                                     \
                const double pos = j->scale * (double)(j->offset + s);         \
                for (int64_t i = 0; i < j->half; i++) {                        \
                    const double th = pos * j->inv[i];                         \
                    const C c = (C)cos(th), sn = (C)sin(th);                   \
                    const int64_t ia = j->traditional ? 2 * i : i,             \
                                  ib = j->traditional ? 2 * i + 1              \
                                                      : i + j->half;           \
                    const C a = buf[ia], bb = buf[ib];                         \
                    yr[ia] = STORE(a * c - bb * sn);                           \
                    yr[ib] = STORE(a * sn + bb * c);                           \
                }                                                              \
                done = 2 * j->half;                                            \
            }                                                                  \
            for (int64_t e = done; e < j->D; e++)                              \
                yr[e] = STORE(buf[e]);                                         \
        }                                                                      \
    }
EM_DTYPES_REALFLOAT(DEFINE_HEADS)

#define REG_HEADS(E, sfx, ...) [E] = heads_rows_##sfx,
static const em_range_fn heads_fns[EM_DTYPE_COUNT] = {
    EM_DTYPES_REALFLOAT(REG_HEADS)};

/* The value of an evaluated 0-d s32 / s64 array (offset, cache_offset). */
static int64_t heads_index(const em_array *a) {
    return a->dtype == EM_S32 ? *(const int32_t *)em__data(a)
                              : *(const int64_t *)em__data(a);
}

/* The output's buffer. With a cache (the next-to-last input): the cache's
 * own when nothing else holds it, so that only the new rows are written
 * (no copy of the cache per token); else a fresh one holding a copy of the
 * cache, as em_dynamic_put_slice. */
static em_status heads_alloc(em_array *node, const heads_params *p) {
    if (!p->cache)
        return em__alloc_output(node, NULL, 0);
    em_array *cache = node->inputs[node->ninputs - 2];
    em_buffer *cache_buffer = cache->buffer;
    em_status st = em__alloc_output(node, &cache, 1);
    if (st == EM_OK && node->buffer != cache_buffer && node->size > 0)
        em__copy_array(em__data(node), cache);
    return st;
}

/* em_dynamic_put_slice's clamp of a start: the S rows fit in [0, L). */
static int64_t heads_cache_start(int64_t v, int64_t L, int64_t S) {
    return v < 0 ? 0 : v > L - S ? L - S : v;
}

static em_status heads_eval(em_array *node) {
    const heads_params *p = node->params;
    em_status st = heads_alloc(node, p);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_array *x = node->inputs[0];
    int k = 1;
    heads_job j;
    memset(&j, 0, sizeof j);
    j.x = em__data(x);
    j.nw = p->has_norm_weight ? em__data(node->inputs[k++]) : NULL;
    j.y = em__data(node);
    j.B = x->shape[0];
    j.S = x->shape[1];
    j.N = x->shape[2];
    j.D = p->head_dim;
    j.first = p->first;
    j.count = p->count;
    j.half = p->dims / 2;
    j.eps = p->eps;
    j.scale = p->scale;
    j.norm = p->norm;
    j.rope = p->rope;
    j.traditional = p->traditional;
    j.L = node->shape[2]; /* S without a cache */
    if (p->cache)
        j.start = heads_cache_start(
            heads_index(node->inputs[node->ninputs - 1]), j.L, j.S);
    double *inv = NULL;
    if (p->rope) {
        j.offset = heads_index(node->inputs[k++]);
        inv = malloc(sizeof *inv * (size_t)(j.half ? j.half : 1));
        if (!inv)
            return em__fail(EM_ERR_OOM, "fast_heads: out of memory");
        for (int64_t i = 0; i < j.half; i++)
            inv[i] = fast_decode_inv_freq(p->base, p->dims, i);
        j.inv = inv;
    }
    em__parallel_units(j.B * j.count * j.S, j.D * (p->rope ? 4 : 1),
                       heads_fns[node->dtype], &j);
    free(inv);
    return EM_OK;
}

static const em_prim heads_prim = {"fast_heads", heads_eval, NULL,
                                   em__gpu_fast_heads_eval};

/* offset / cache_offset: NULL or a 0-d s32 / s64. */
static em_status heads_check_index(const char *what, const em_array *a) {
    em_desc da;
    if (a && (a->ndim != 0 || (a->dtype != EM_S32 && a->dtype != EM_S64)))
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_heads: %s %s must be a 0-d s32 or s64", what,
                        em__describe(a, &da));
    return EM_OK;
}

/* The cache is (B, count, L, head_dim) of x's dtype with L >= S, and comes
 * with its cache_offset (the device is em__node_new's check). */
static em_status heads_check_cache(const em_array *x,
                                   const em_fast_heads_options *o) {
    em_desc dx, dc;
    if (!o->cache != !o->cache_offset)
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_heads: cache and cache_offset go together (got "
                        "%s without %s)",
                        o->cache ? "cache" : "cache_offset",
                        o->cache ? "cache_offset" : "cache");
    const em_array *c = o->cache;
    if (!c)
        return EM_OK;
    if (c->ndim != 4 || c->dtype != x->dtype || c->shape[0] != x->shape[0] ||
        c->shape[1] != o->count || c->shape[2] < x->shape[1] ||
        c->shape[3] != o->head_dim)
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_heads: cache %s must be (B, count, L, head_dim) "
                        "= (%lld, %lld, L >= %lld, %lld) of the dtype of x %s",
                        em__describe(c, &dc), (long long)x->shape[0],
                        (long long)o->count, (long long)x->shape[1],
                        (long long)o->head_dim, em__describe(x, &dx));
    return heads_check_index("cache_offset", o->cache_offset);
}

static em_status heads_check(const em_array *x,
                             const em_fast_heads_options *o) {
    em_desc dx, dv;
    if (!em_dtype_is_float(x->dtype) || x->ndim != 3)
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_heads: x %s must be (B, S, N) of a real float "
                        "dtype",
                        em__describe(x, &dx));
    const int64_t D = o->head_dim;
    if (D < 1 || D > EM_FAST_HEADS_MAX_DIM || o->first < 0 || o->count < 1 ||
        (o->first + o->count) * D > x->shape[2])
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_heads: heads [%lld, %lld) of %lld features "
                        "(head_dim at most %d) do not fit x %s",
                        (long long)o->first, (long long)(o->first + o->count),
                        (long long)D, EM_FAST_HEADS_MAX_DIM,
                        em__describe(x, &dx));
    if (o->norm_weight &&
        (!o->norm || o->norm_weight->ndim != 1 ||
         o->norm_weight->shape[0] != D || o->norm_weight->dtype != x->dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_heads: norm_weight %s needs norm, shape [%lld] "
                        "and the dtype of x %s",
                        em__describe(o->norm_weight, &dv), (long long)D,
                        em__describe(x, &dx));
    if (o->norm && (!(o->eps >= 0) || isinf(o->eps)))
        return em__fail(EM_ERR_ARGUMENT,
                        "fast_heads: eps must be finite and >= 0, got %g",
                        o->eps);
    em_status st = heads_check_index("offset", o->offset);
    if (st != EM_OK)
        return st;
    if (o->offset) {
        if (o->rope.dims < 2 || o->rope.dims % 2 || o->rope.dims > D ||
            o->rope.freqs)
            return em__fail(EM_ERR_ARGUMENT,
                            "fast_heads: rope dims %lld must be even, >= 2 "
                            "and at most head_dim %lld (freqs unsupported)",
                            (long long)o->rope.dims, (long long)D);
    }
    return heads_check_cache(x, o);
}

em_status em_fast_heads(em_array *x, const em_fast_heads_options *o,
                        em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !o || !out)
        return em__fail(EM_ERR_ARGUMENT, "fast_heads: NULL argument");
    em_status st = heads_check(x, o);
    if (st != EM_OK)
        return st;
    const int64_t D = o->head_dim;
    heads_params p;
    memset(&p, 0, sizeof p); /* padding too: CSE compares the bytes */
    p.head_dim = D;
    p.first = o->first;
    p.count = o->count;
    p.norm = o->norm;
    p.has_norm_weight = o->norm_weight != NULL;
    p.eps = o->norm ? o->eps : 0;
    p.rope = o->offset != NULL;
    if (p.rope) {
        p.dims = o->rope.dims;
        p.traditional = o->rope.traditional;
        p.base = o->rope.base != 0 ? o->rope.base : 10000;
        p.scale = o->rope.scale != 0 ? o->rope.scale : 1;
    }
    p.cache = o->cache != NULL;
    /* The cache (src[3]) goes in as it is: the eval takes its buffer when
     * it can, else copies it from any layout. The others row-contiguous. */
    em_array *src[5] = {x, o->norm_weight, o->offset, o->cache,
                        o->cache_offset},
             *in[5] = {NULL};
    int n = 0;
    for (int i = 0; i < 5 && st == EM_OK; i++) {
        if (i == 3 && src[i]) {
            em_array_retain(src[i]);
            in[n++] = src[i];
        } else if (src[i]) {
            st = em_contiguous(src[i], &in[n++]);
        }
    }
    const int64_t shape[4] = {x->shape[0], o->count,
                              o->cache ? o->cache->shape[2] : x->shape[1], D};
    if (st == EM_OK)
        st = em__node_new_params(&heads_prim, x->dtype, shape, 4, in, n, &p,
                                 sizeof p, out);
    for (int i = 0; i < n; i++)
        em_array_release(in[i]);
    return st;
}
