/*
 * fast_norm.c — em_rms_norm, em_layer_norm and em_softmax: one primitive,
 * "fast_rows", whose kernel normalises each row (the last axis) of a
 * row-contiguous input.
 *
 * Each row is read from memory once: the statistics pass streams it, and
 * the passes after it (layer norm's variance, the write) find it in cache
 * (a row of 4096 f32 is 16 KiB). Float reductions run in LANES independent
 * accumulators so that GCC vectorises them without reassociating (no
 * -ffast-math); the lanes are summed at the end of the row.
 *
 * Softmax keeps a running max m and a running sum s of exp(x - m) (online
 * softmax): per chunk of CHUNK elements (2 KiB of f32, in L1 for the second look), the chunk's max first; when it
 * exceeds m, s is rescaled by exp(m - new max). The write pass is then
 * exp(x - m) / s (see SAFE_MAX for -Inf). exp of a non-positive float is fast_expf_nonpos below, a
 * branch-free polynomial that vectorises; f64 uses libm's exp.
 *
 * One kernel definition per row kind, instantiated for f16, bf16, f32 and
 * f64 from EM_DTYPES_REALFLOAT: f16/bf16/f32 compute in float, f64 in
 * double.
 */
#include "emily_fast.h"
#include "fast_params.h"

#include <stdlib.h>

#define LANES 16
#define CHUNK 512 /* softmax: elements per max update (a multiple of LANES) */

/*
 * exp(x) for x <= 0, NaN or -Inf, vectorisable: exp(x) = 2^n * exp(r),
 * n = round(x / ln2), |r| <= ln2/2, exp(r) by a degree-7 Taylor polynomial
 * (relative error about 1e-8 before rounding). Below -87 (where 2^n leaves
 * the normal range) the result is 0: softmax outputs below 1.6e-38 are
 * flushed. The fix-ups are integer masks, not float selects, so that the
 * loop stays if-converted and vectorised. NaN propagates.
 */
static inline __attribute__((always_inline)) float fast_expf_nonpos(float x) {
    const float round_magic = 12582912.0f; /* 1.5 * 2^23 */
    float z = x * 1.44269504088896341f + round_magic;
    float n = z - round_magic;
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t zbits, magic_bits;
    memcpy(&zbits, &z, 4);
    memcpy(&magic_bits, &round_magic, 4);
    int32_t ni = (int32_t)(zbits - magic_bits);
    ni = ni < -126 ? -126 : ni;
    ni = ni > 0 ? 0 : ni;
    uint32_t sbits = (uint32_t)(ni + 127) << 23;
    float scale;
    memcpy(&scale, &sbits, 4);
    float res = p * scale;
    uint32_t bits, under = 0u - (uint32_t)(x < -87.0f);
    memcpy(&bits, &res, 4);
    bits &= ~under;
    memcpy(&res, &bits, 4);
    return res;
}

#define FAST_EXP(x) _Generic((x), float : fast_expf_nonpos, default : exp)(x)
#define FAST_SQRT(x) _Generic((x), float : sqrtf, default : sqrt)(x)

/* The max that exp(x - max) is taken against: -Inf (only -Inf seen so
 * far) becomes 0, so that -Inf elements count 0 instead of exp(NaN). A row
 * of -Inf only then sums to 0 and gives 0 * Inf = NaN, as the composed
 * formula; NaN elements still make the sum NaN. */
#define SAFE_MAX(m) ((m) == -(__typeof__(m))INFINITY ? (__typeof__(m))0 : (m))

typedef struct row_job {
    const void *x, *w, *b;
    void *y;
    int64_t D;
    double eps;
} row_job;

/* Sum over the lanes of a row: acc[l] += TERM(v) for v = LOAD(x[i]). */
#define ROW_SUM(C, LOAD, x, D, TERM, out)                                      \
    do {                                                                       \
        C lane_[LANES];                                                        \
        for (int l_ = 0; l_ < LANES; l_++)                                     \
            lane_[l_] = 0;                                                     \
        int64_t i_ = 0;                                                        \
        for (; i_ + LANES <= (D); i_ += LANES)                                 \
            for (int l_ = 0; l_ < LANES; l_++) {                               \
                C v = (C)LOAD((x)[i_ + l_]);                                   \
                lane_[l_] += (TERM);                                           \
            }                                                                  \
        C tail_ = 0;                                                           \
        for (; i_ < (D); i_++) {                                               \
            C v = (C)LOAD((x)[i_]);                                            \
            tail_ += (TERM);                                                   \
        }                                                                      \
        for (int w_ = LANES / 2; w_ > 0; w_ /= 2)                              \
            for (int l_ = 0; l_ < w_; l_++)                                    \
                lane_[l_] += lane_[l_ + w_];                                   \
        (out) = lane_[0] + tail_;                                              \
    } while (0)

#define DEFINE_ROW_KERNELS(E, sfx, S, C, LOAD, STORE)                          \
    EM_CLONES static void rms_row_##sfx(const S *restrict x,                   \
                                        const S *restrict w, S *restrict y,    \
                                        int64_t D, C eps) {                    \
        C ss;                                                                  \
        ROW_SUM(C, LOAD, x, D, v * v, ss);                                     \
        const C r = (C)1 / FAST_SQRT(ss / (C)D + eps);                         \
        if (w)                                                                 \
            for (int64_t i = 0; i < D; i++)                                    \
                y[i] = STORE((C)LOAD(x[i]) * r * (C)LOAD(w[i]));               \
        else                                                                   \
            for (int64_t i = 0; i < D; i++)                                    \
                y[i] = STORE((C)LOAD(x[i]) * r);                               \
    }                                                                          \
    EM_CLONES static void layer_row_##sfx(                                     \
        const S *restrict x, const S *restrict w, const S *restrict b,         \
        S *restrict y, int64_t D, C eps) {                                     \
        C sum, sq;                                                             \
        ROW_SUM(C, LOAD, x, D, v, sum);                                        \
        const C mean = sum / (C)D;                                             \
        ROW_SUM(C, LOAD, x, D, (v - mean) * (v - mean), sq);                   \
        const C r = (C)1 / FAST_SQRT(sq / (C)D + eps);                         \
        /* one loop per case: a test inside would stop vectorisation */     \
        if (w && b)                                                            \
            for (int64_t i = 0; i < D; i++)                                    \
                y[i] = STORE(((C)LOAD(x[i]) - mean) * r * (C)LOAD(w[i]) +      \
                             (C)LOAD(b[i]));                                   \
        else if (w)                                                            \
            for (int64_t i = 0; i < D; i++)                                    \
                y[i] = STORE(((C)LOAD(x[i]) - mean) * r * (C)LOAD(w[i]));      \
        else if (b)                                                            \
            for (int64_t i = 0; i < D; i++)                                    \
                y[i] = STORE(((C)LOAD(x[i]) - mean) * r + (C)LOAD(b[i]));      \
        else                                                                   \
            for (int64_t i = 0; i < D; i++)                                    \
                y[i] = STORE(((C)LOAD(x[i]) - mean) * r);                      \
    }                                                                          \
    EM_CLONES static void softmax_row_##sfx(const S *restrict x,               \
                                            S *restrict y, int64_t D) {        \
        C m = -(C)INFINITY, s = 0;                                             \
        C buf[CHUNK]; /* the chunk converted to the compute type */           \
        for (int64_t i0 = 0; i0 < D; i0 += CHUNK) {                            \
            const int64_t n = D - i0 < CHUNK ? D - i0 : CHUNK;                 \
            const C *p = (const C *)(const void *)(x + i0);                    \
            if (sizeof(S) != sizeof(C)) { /* f16, bf16: convert once */        \
                for (int64_t i = 0; i < n; i++)                                \
                    buf[i] = (C)LOAD(x[i0 + i]);                               \
                p = buf;                                                       \
            }                                                                  \
            C lane[LANES];                                                     \
            for (int l = 0; l < LANES; l++)                                    \
                lane[l] = -(C)INFINITY;                                        \
            int64_t i = 0;                                                     \
            for (; i + LANES <= n; i += LANES)                                 \
                for (int l = 0; l < LANES; l++) {                              \
                    C v = p[i + l];                                            \
                    lane[l] = v > lane[l] ? v : lane[l];                       \
                }                                                              \
            C cm = -(C)INFINITY;                                               \
            for (int l = 0; l < LANES; l++)                                    \
                cm = lane[l] > cm ? lane[l] : cm;                              \
            for (; i < n; i++) {                                               \
                C v = p[i];                                                    \
                cm = v > cm ? v : cm;                                          \
            }                                                                  \
            if (cm > m) {                                                      \
                s = s * FAST_EXP(m - cm);                                      \
                m = cm;                                                        \
            }                                                                  \
            C cs;                                                              \
            const C mm = SAFE_MAX(m);                                          \
            ROW_SUM(C, EM_LOAD_ID, p, n, FAST_EXP(v - mm), cs);                \
            s += cs;                                                           \
        }                                                                      \
        const C inv = (C)1 / s, mm = SAFE_MAX(m);                              \
                for (int64_t i = 0; i < D; i++)                                        \
            y[i] = STORE(FAST_EXP((C)LOAD(x[i]) - mm) * inv);                  \
    }                                                                          \
    static void rms_rows_##sfx(void *ctx, int64_t r0, int64_t r1) {            \
        const row_job *j = ctx;                                                \
        for (int64_t r = r0; r < r1; r++)                                      \
            rms_row_##sfx((const S *)j->x + r * j->D, j->w,                    \
                          (S *)j->y + r * j->D, j->D, (C)j->eps);              \
    }                                                                          \
    static void layer_rows_##sfx(void *ctx, int64_t r0, int64_t r1) {          \
        const row_job *j = ctx;                                                \
        for (int64_t r = r0; r < r1; r++)                                      \
            layer_row_##sfx((const S *)j->x + r * j->D, j->w, j->b,            \
                            (S *)j->y + r * j->D, j->D, (C)j->eps);            \
    }                                                                          \
    static void softmax_rows_##sfx(void *ctx, int64_t r0, int64_t r1) {        \
        const row_job *j = ctx;                                                \
        for (int64_t r = r0; r < r1; r++)                                      \
            softmax_row_##sfx((const S *)j->x + r * j->D,                      \
                              (S *)j->y + r * j->D, j->D);                     \
    }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wfloat-equal"
EM_DTYPES_REALFLOAT(DEFINE_ROW_KERNELS)
#pragma GCC diagnostic pop

#define REG_ROWS(E, sfx, ...)                                                  \
    [E] = {rms_rows_##sfx, layer_rows_##sfx, softmax_rows_##sfx},
static const em_range_fn row_fns[EM_DTYPE_COUNT][3] = {
    EM_DTYPES_REALFLOAT(REG_ROWS)};

static em_status rows_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const fast_row_params *p = node->params;
    int k = 1;
    row_job j;
    j.x = em__data(node->inputs[0]);
    j.w = p->has_weight ? em__data(node->inputs[k++]) : NULL;
    j.b = p->has_bias ? em__data(node->inputs[k++]) : NULL;
    j.y = em__data(node);
    j.D = node->shape[node->ndim - 1];
    j.eps = p->eps;
    em__parallel_units(node->size / j.D, j.D, row_fns[node->dtype][p->kind],
                       &j);
    return EM_OK;
}

static const em_prim rows_prim = {"fast_rows", rows_eval, em__vjp_fast_rows,
                                  em__gpu_fast_rows_eval};

/* ------------------------------------------------------------------------ */
/* Building                                                                  */
/* ------------------------------------------------------------------------ */

static em_status check_float(const char *op, const char *what,
                             const em_array *a) {
    em_desc d;
    if (!em_dtype_is_float(a->dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: %s %s must have a real float dtype (f16, bf16, "
                        "f32 or f64)",
                        op, what, em__describe(a, &d));
    return EM_OK;
}

/* weight or bias: shape (D) with x's dtype. */
static em_status check_vector(const char *op, const char *what,
                              const em_array *v, const em_array *x) {
    em_desc dv, dx;
    const int64_t D = x->shape[x->ndim - 1];
    if (v->ndim != 1 || v->shape[0] != D || v->dtype != x->dtype)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: %s %s must have shape [%lld] and the dtype of "
                        "x %s",
                        op, what, em__describe(v, &dv), (long long)D,
                        em__describe(x, &dx));
    return EM_OK;
}

/* The node over row-contiguous copies of x, weight and bias. */
static em_status build_rows(const char *op, em_array *x, em_array *weight,
                            em_array *bias, const fast_row_params *p,
                            em_array **out) {
    em_array *in[3] = {NULL, NULL, NULL};
    em_array *src[3] = {x, weight, bias};
    int n = 0;
    em_status st = EM_OK;
    for (int i = 0; i < 3 && st == EM_OK; i++)
        if (src[i])
            st = em_contiguous(src[i], &in[n++]);
    if (st == EM_OK)
        st = em__node_new_params(&rows_prim, x->dtype, x->shape, x->ndim, in,
                                 n, p, sizeof *p, out);
    for (int i = 0; i < 3; i++)
        em_array_release(in[i]);
    (void)op;
    return st;
}

static em_status check_norm(const char *op, em_array *x, double eps) {
    em_desc d;
    em_status st = check_float(op, "x", x);
    if (st != EM_OK)
        return st;
    if (x->ndim < 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: x %s must have rank >= 1 (normalised over its "
                        "last axis)",
                        op, em__describe(x, &d));
    if (!(eps >= 0) || isinf(eps))
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: eps must be finite and >= 0, got %g", op, eps);
    return EM_OK;
}

em_status em_rms_norm(em_array *x, em_array *weight, double eps,
                      em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !out)
        return em__fail(EM_ERR_ARGUMENT, "rms_norm: NULL argument");
    em_status st = check_norm("rms_norm", x, eps);
    if (st == EM_OK && weight)
        st = check_vector("rms_norm", "weight", weight, x);
    if (st != EM_OK)
        return st;
    fast_row_params p;
    memset(&p, 0, sizeof p); /* padding too: CSE compares the bytes */
    p.kind = FAST_RMS_NORM;
    p.has_weight = weight != NULL;
    p.eps = eps;
    return build_rows("rms_norm", x, weight, NULL, &p, out);
}

em_status em_layer_norm(em_array *x, em_array *weight, em_array *bias,
                        double eps, em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !out)
        return em__fail(EM_ERR_ARGUMENT, "layer_norm: NULL argument");
    em_status st = check_norm("layer_norm", x, eps);
    if (st == EM_OK && weight)
        st = check_vector("layer_norm", "weight", weight, x);
    if (st == EM_OK && bias)
        st = check_vector("layer_norm", "bias", bias, x);
    if (st != EM_OK)
        return st;
    fast_row_params p;
    memset(&p, 0, sizeof p);
    p.kind = FAST_LAYER_NORM;
    p.has_weight = weight != NULL;
    p.has_bias = bias != NULL;
    p.eps = eps;
    return build_rows("layer_norm", x, weight, bias, &p, out);
}

em_status em_softmax(em_array *x, int axis, em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !out)
        return em__fail(EM_ERR_ARGUMENT, "softmax: NULL argument");
    em_status st = check_float("softmax", "x", x);
    if (st != EM_OK)
        return st;
    em_desc d;
    if (x->ndim < 1)
        return em__fail(EM_ERR_ARGUMENT, "softmax: x %s must have rank >= 1",
                        em__describe(x, &d));
    int ax;
    st = em__check_axis("softmax", axis, x->ndim, &ax);
    if (st != EM_OK)
        return st;
    fast_row_params p;
    memset(&p, 0, sizeof p);
    p.kind = FAST_SOFTMAX;
    const int last = x->ndim - 1;
    if (ax == last)
        return build_rows("softmax", x, NULL, NULL, &p, out);
    /* Another axis: swap it with the last, softmax the rows of that copy,
     * swap back (a view). */
    int perm[EM_MAX_NDIM];
    for (int i = 0; i < x->ndim; i++)
        perm[i] = i;
    perm[ax] = last;
    perm[last] = ax;
    em_array *xt = NULL, *yt = NULL;
    st = em_transpose(x, perm, x->ndim, &xt);
    if (st == EM_OK)
        st = build_rows("softmax", xt, NULL, NULL, &p, &yt);
    if (st == EM_OK)
        st = em_transpose(yt, perm, x->ndim, out);
    em_array_release(xt);
    em_array_release(yt);
    return st;
}
