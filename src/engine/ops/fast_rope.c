/*
 * fast_rope.c — em_rope, rotary position embeddings over x (..., L, D).
 *
 * The angles depend only on the sequence index and the pair, not on the
 * batch or head: the eval first builds a table of cos and sin for every
 * (l, i), l < L and i < dims/2 (angles in double, rounded to the compute
 * type once; the inverse frequencies once per eval), then rotates every
 * row (a (matrix, l) pair) from it, l-major so that the rows sharing a
 * table row run back to back. The table is L * dims/2 pairs, shared by all
 * batch * heads rows; a decode step (L = 1) builds dims/2 of them.
 *
 * The offset is read from its (evaluated) 0-d input at eval time: a
 * compiled program replays with a new offset without being rebuilt.
 */
#include "emily_fast.h"
#include "fast_params.h"

#include <stdlib.h>

typedef struct rope_job {
    const void *x;
    void *y;
    const void *table; /* cos, sin interleaved: [(l*half + i)*2 + {0,1}] */
    int64_t L, D, half;
    bool traditional;
    int64_t nmat; /* matrices of L rows */
    /* table building */
    const double *inv; /* the half inverse frequencies */
    double scale;
    int64_t offset;
} rope_job;

#define DEFINE_ROPE(E, sfx, S, C, LOAD, STORE)                                 \
    static void rope_table_##sfx(void *ctx, int64_t l0, int64_t l1) {          \
        const rope_job *j = ctx;                                               \
        C *tab = (C *)j->table;                                                \
        for (int64_t l = l0; l < l1; l++) {                                    \
            const double pos = j->scale * (double)(j->offset + l);             \
            for (int64_t i = 0; i < j->half; i++) {                            \
                double theta = pos * j->inv[i];                                \
                tab[(l * j->half + i) * 2] = (C)cos(theta);                    \
                tab[(l * j->half + i) * 2 + 1] = (C)sin(theta);                \
            }                                                                  \
        }                                                                      \
    }                                                                          \
    EM_CLONES static void rope_row_##sfx(const S *restrict x, S *restrict y,   \
                                         const C *restrict cs, int64_t half,   \
                                         int64_t D, bool traditional) {        \
        /* pair i is (a, b) at (2i, 2i+1) or (i, i + half); one loop each,  \
         * with constant strides, so that both vectorise */                   \
        if (traditional)                                                       \
            for (int64_t i = 0; i < half; i++) {                               \
                const C c = cs[2 * i], s = cs[2 * i + 1];                      \
                const C a = (C)LOAD(x[2 * i]), b = (C)LOAD(x[2 * i + 1]);      \
                y[2 * i] = STORE(a * c - b * s);                               \
                y[2 * i + 1] = STORE(a * s + b * c);                           \
            }                                                                  \
        else                                                                   \
            for (int64_t i = 0; i < half; i++) {                               \
                const C c = cs[2 * i], s = cs[2 * i + 1];                      \
                const C a = (C)LOAD(x[i]), b = (C)LOAD(x[i + half]);           \
                y[i] = STORE(a * c - b * s);                                   \
                y[i + half] = STORE(a * s + b * c);                            \
            }                                                                  \
        for (int64_t i = 2 * half; i < D; i++)                                 \
            y[i] = x[i];                                                       \
    }                                                                          \
    /* Units are (l, matrix) pairs, l-major: consecutive rows share their  \
     * table row, which stays in L1. */                                       \
    static void rope_rows_##sfx(void *ctx, int64_t u0, int64_t u1) {           \
        const rope_job *j = ctx;                                               \
        for (int64_t u = u0; u < u1; u++) {                                    \
            const int64_t l = u / j->nmat, r = (u % j->nmat) * j->L + l;       \
            rope_row_##sfx((const S *)j->x + r * j->D, (S *)j->y + r * j->D,   \
                           (const C *)j->table + l * j->half * 2, j->half,     \
                           j->D, j->traditional);                              \
        }                                                                      \
    }

EM_DTYPES_REALFLOAT(DEFINE_ROPE)

#define REG_ROPE(E, sfx, S, C, ...)                                            \
    [E] = {rope_table_##sfx, rope_rows_##sfx, sizeof(C)},
static const struct {
    em_range_fn table, rows;
    size_t compute_size;
} rope_fns[EM_DTYPE_COUNT] = {EM_DTYPES_REALFLOAT(REG_ROPE)};

/* The 0-d s32/s64 offset's value. */
static int64_t read_offset(const em_array *offset) {
    if (offset->dtype == EM_S32)
        return *(const int32_t *)em__data(offset);
    return *(const int64_t *)em__data(offset);
}

static em_status rope_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const fast_rope_params *p = node->params;
    const em_array *x = node->inputs[0];
    rope_job j;
    j.x = em__data(x);
    j.y = em__data(node);
    j.L = x->shape[x->ndim - 2];
    j.D = x->shape[x->ndim - 1];
    j.half = p->dims / 2;
    j.traditional = p->traditional;
    j.nmat = node->size / (j.L * j.D);
    j.scale = p->scale;
    j.offset = read_offset(node->inputs[1]);
    const float *freqs = p->has_freqs ? em__data(node->inputs[2]) : NULL;
    const size_t tab_bytes =
        (size_t)j.L * (size_t)j.half * 2 * rope_fns[node->dtype].compute_size;
    void *table = malloc(tab_bytes);
    double *inv = malloc((size_t)j.half * sizeof *inv);
    if (!table || !inv) {
        free(table);
        free(inv);
        return em__fail(EM_ERR_OOM,
                        "rope: out of memory for the %zu-byte angle table",
                        tab_bytes);
    }
    for (int64_t i = 0; i < j.half; i++)
        inv[i] = freqs ? 1.0 / (double)freqs[i]
                       : fast_rope_inv_freq(p->base, p->dims, i);
    j.inv = inv;
    j.table = table;
    /* sin and cos in double cost about as much as rotating 32 elements */
    em__parallel_units(j.L, j.half * 32, rope_fns[node->dtype].table, &j);
    em__parallel_units(node->size / j.D, j.D, rope_fns[node->dtype].rows, &j);
    free(table);
    free(inv);
    return EM_OK;
}

static const em_prim rope_prim = {"rope", rope_eval, em__vjp_fast_rope,
                                  em__gpu_fast_rope_eval};

em_status em_rope(em_array *x, em_array *offset, const em_rope_options *opts,
                  em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !offset || !opts || !out)
        return em__fail(EM_ERR_ARGUMENT, "rope: NULL argument");
    em_desc dx, dd;
    if (!em_dtype_is_float(x->dtype) || x->ndim < 2)
        return em__fail(EM_ERR_ARGUMENT,
                        "rope: x %s must have a real float dtype (f16, bf16, "
                        "f32 or f64) and rank >= 2 (..., seq, features)",
                        em__describe(x, &dx));
    const int64_t D = x->shape[x->ndim - 1];
    if (opts->dims < 2 || opts->dims % 2 != 0 || opts->dims > D)
        return em__fail(EM_ERR_ARGUMENT,
                        "rope: dims %lld must be even, >= 2 and at most the "
                        "last dimension of x %s",
                        (long long)opts->dims, em__describe(x, &dx));
    if (offset->ndim != 0 ||
        (offset->dtype != EM_S32 && offset->dtype != EM_S64))
        return em__fail(EM_ERR_ARGUMENT,
                        "rope: offset %s must be a 0-d s32 or s64 tensor",
                        em__describe(offset, &dd));
    const double base = fpclassify(opts->base) == FP_ZERO ? 10000.0 : opts->base;
    const double scale = fpclassify(opts->scale) == FP_ZERO ? 1.0 : opts->scale;
    if (!isfinite(base) || !(base > 0) || !isfinite(scale))
        return em__fail(EM_ERR_ARGUMENT,
                        "rope: base %g must be finite and > 0 and scale %g "
                        "finite",
                        base, scale);
    if (opts->freqs &&
        (opts->freqs->ndim != 1 || opts->freqs->dtype != EM_F32 ||
         opts->freqs->shape[0] != opts->dims / 2))
        return em__fail(EM_ERR_ARGUMENT,
                        "rope: freqs %s must be a 1-D f32 tensor of dims/2 = "
                        "%lld elements",
                        em__describe(opts->freqs, &dd),
                        (long long)(opts->dims / 2));
    fast_rope_params p;
    memset(&p, 0, sizeof p); /* padding too: CSE compares the bytes */
    p.dims = opts->dims;
    p.traditional = opts->traditional;
    p.has_freqs = opts->freqs != NULL;
    p.base = base;
    p.scale = scale;
    em_array *in[3] = {NULL, offset, NULL};
    int n = opts->freqs ? 3 : 2;
    em_status st = em_contiguous(x, &in[0]);
    if (st == EM_OK && opts->freqs)
        st = em_contiguous(opts->freqs, &in[2]);
    if (st == EM_OK)
        st = em__node_new_params(&rope_prim, x->dtype, x->shape, x->ndim, in,
                                 n, &p, sizeof p, out);
    em_array_release(in[0]);
    em_array_release(in[2]);
    return st;
}
