/*
 * conv.c — em_conv (Nx.conv): N-d convolution as im2col + GEMM.
 *
 * For every (output batch, group) pair the input patch matrix
 *   col[c * Kvol + k][x] = in'[batch, c0 + c, x*stride + k*kdil]
 * (Kvol = kernel volume, x over output positions; in' the dilated and
 * padded input, read in place through the input's strides, padding and
 * dilation holes giving zeros) is built on the thread pool, one row per
 * task, and multiplied by the group's kernel rows, packed once as
 * W[o][c * Kvol + k]: out[o][x] = W · col. The output rows of one batch
 * and group are contiguous, so the GEMM writes the result in place (the
 * column range is blocked so `col` stays within COL_BYTES).
 *
 * Work types (the dot.c scheme): f32/f64/c64/c128 are their own and run
 * through OpenBLAS (which threads the GEMM); f16/bf16 are widened to float
 * for sgemm and rounded once; integers run in a wrapping 32/64-bit
 * unsigned type through a cache-blocked loop split over columns.
 */
#include "dot_cpu.h"
#include "params.h"

#include "emily_conv.h"

#include <stdlib.h>

#define COL_BYTES ((int64_t)64 << 20)

#define CONV_WORK(C)                                                           \
    __typeof__(_Generic((C)0, uint8_t                                          \
                        : (uint32_t)0, uint16_t                                \
                        : (uint32_t)0, uint32_t                                \
                        : (uint32_t)0, int8_t                                  \
                        : (uint32_t)0, int16_t                                 \
                        : (uint32_t)0, int32_t                                 \
                        : (uint32_t)0, uint64_t                                \
                        : (uint64_t)0, int64_t                                 \
                        : (uint64_t)0, default                                 \
                        : (C)0))

/* Geometry of one evaluation, with at least one spatial axis (a 0-d
 * spatial problem becomes one axis of size 1). */
typedef struct conv_geom {
    int ns;
    int64_t in_sp[EM_MAX_NDIM];  /* input spatial dims */
    int64_t in_st[EM_MAX_NDIM];  /* input spatial strides (elements) */
    int64_t k_sp[EM_MAX_NDIM];   /* kernel spatial dims */
    int64_t out_sp[EM_MAX_NDIM]; /* output spatial dims */
    int64_t strides[EM_MAX_NDIM], low[EM_MAX_NDIM], idil[EM_MAX_NDIM],
        kdil[EM_MAX_NDIM];
    int64_t in_c_stride; /* input channel stride */
    int64_t kvol, L;
} conv_geom;

/* One im2col task set: rows of `col` for columns [l0, l1). */
typedef struct im2col_job {
    const conv_geom *g;
    const void *src; /* input at (batch, first channel of the group) */
    void *col;       /* [rows][l1 - l0] work elements */
    int64_t l0, l1;
} im2col_job;

/* Fill row r (channel c = r / kvol, kernel offset k = r % kvol) of col.
 * Written once over (load, store work type) via the dtype tables. */
#define DEFINE_IM2COL(E, sfx, S, C, LOAD, STORE)                               \
    static void im2col_##sfx(void *ctx, int64_t rbegin, int64_t rend) {        \
        const im2col_job *jb = ctx;                                            \
        const conv_geom *g = jb->g;                                            \
        typedef CONV_WORK(C) W;                                                \
        const int ns = g->ns, last = ns - 1;                                   \
        const int64_t width = jb->l1 - jb->l0;                                 \
        for (int64_t r = rbegin; r < rend; r++) {                              \
            const int64_t c = r / g->kvol;                                     \
            int64_t kk[EM_MAX_NDIM], rem = r % g->kvol;                        \
            for (int i = last; i >= 0; i--) {                                  \
                kk[i] = rem % g->k_sp[i];                                      \
                rem /= g->k_sp[i];                                             \
            }                                                                  \
            const S *base = (const S *)jb->src + c * g->in_c_stride;           \
            W *dst = (W *)jb->col + r * width;                                 \
            int64_t idx[EM_MAX_NDIM], l = jb->l0, rest = jb->l0;               \
            for (int i = last; i >= 0; i--) {                                  \
                idx[i] = rest % g->out_sp[i];                                  \
                rest /= g->out_sp[i];                                          \
            }                                                                  \
            while (l < jb->l1) {                                               \
                int64_t xa = idx[last];                                        \
                int64_t seg = g->out_sp[last] - xa;                            \
                if (seg > jb->l1 - l)                                          \
                    seg = jb->l1 - l;                                          \
                W *d = dst + (l - jb->l0);                                     \
                /* outer axes: one input position or a hole */                 \
                bool ok = true;                                                \
                int64_t off = 0;                                               \
                for (int i = 0; i < last && ok; i++) {                         \
                    int64_t q = idx[i] * g->strides[i] + kk[i] * g->kdil[i] -  \
                                g->low[i];                                     \
                    if (q < 0 || q % g->idil[i] != 0 ||                        \
                        q / g->idil[i] >= g->in_sp[i])                         \
                        ok = false;                                            \
                    else                                                       \
                        off += q / g->idil[i] * g->in_st[i];                   \
                }                                                              \
                const int64_t s = g->strides[last], id = g->idil[last];        \
                const int64_t dim = g->in_sp[last], st = g->in_st[last];       \
                const int64_t q0 = kk[last] * g->kdil[last] - g->low[last];    \
                if (!ok) {                                                     \
                    for (int64_t t = 0; t < seg; t++)                          \
                        d[t] = 0;                                              \
                } else if (id == 1) {                                          \
                    /* valid x: 0 <= x*s + q0 <= dim - 1 */                    \
                    int64_t xs = q0 >= 0 ? 0 : (-q0 + s - 1) / s;              \
                    int64_t xe =                                               \
                        dim - 1 - q0 < 0 ? 0 : (dim - 1 - q0) / s + 1;         \
                    xs = xs < xa ? 0 : xs - xa;                                \
                    xe = xe < xa ? 0 : xe - xa;                                \
                    if (xe > seg)                                              \
                        xe = seg;                                              \
                    if (xs > xe)                                               \
                        xs = xe;                                               \
                    const S *p = base + off + (xa * s + q0) * st;              \
                    for (int64_t t = 0; t < xs; t++)                           \
                        d[t] = 0;                                              \
                    for (int64_t t = xs; t < xe; t++)                          \
                        d[t] = (W)LOAD(p[t * s * st]);                         \
                    for (int64_t t = xe; t < seg; t++)                         \
                        d[t] = 0;                                              \
                } else {                                                       \
                    for (int64_t t = 0; t < seg; t++) {                        \
                        int64_t q = (xa + t) * s + q0;                         \
                        d[t] = (q >= 0 && q % id == 0 && q / id < dim)         \
                                   ? (W)LOAD(base[off + q / id * st])          \
                                   : (W)0;                                     \
                    }                                                          \
                }                                                              \
                l += seg;                                                      \
                idx[last] = 0;                                                 \
                for (int i = last - 1; i >= 0; i--) {                          \
                    if (++idx[i] < g->out_sp[i])                               \
                        break;                                                 \
                    idx[i] = 0;                                                \
                }                                                              \
            }                                                                  \
        }                                                                      \
    }

/* Pack the kernel into W[o][c * kvol + k] (work type), any layout. */
#define DEFINE_PACK(E, sfx, S, C, LOAD, STORE)                                 \
    static void pack_##sfx(void *dstp, const em_array *k) {                    \
        typedef CONV_WORK(C) W;                                                \
        W *dst = dstp;                                                         \
        const S *src = em__data(k);                                            \
        int64_t idx[EM_MAX_NDIM] = {0};                                        \
        for (int64_t i = 0; i < k->size; i++) {                                \
            int64_t off = 0;                                                   \
            for (int a = 0; a < k->ndim; a++)                                  \
                off += idx[a] * k->strides[a];                                 \
            dst[i] = (W)LOAD(src[off]);                                        \
            for (int a = k->ndim - 1; a >= 0; a--) {                           \
                if (++idx[a] < k->shape[a])                                    \
                    break;                                                     \
                idx[a] = 0;                                                    \
            }                                                                  \
        }                                                                      \
    }

/* dst[i] = (dtype) src[i] (work -> storage). */
#define DEFINE_UNPACK(E, sfx, S, C, LOAD, STORE)                               \
    static void unpack_##sfx(void *dstp, int64_t ldd, const void *srcp,        \
                             int64_t rows, int64_t cols) {                     \
        typedef CONV_WORK(C) W;                                                \
        const W *src = srcp;                                                   \
        for (int64_t r = 0; r < rows; r++) {                                   \
            S *d = (S *)dstp + r * ldd;                                        \
            for (int64_t c = 0; c < cols; c++)                                 \
                d[c] = STORE((C)src[r * cols + c]);                            \
        }                                                                      \
    }

#define CONV_DTYPES(X) EM_DTYPES_ALL(X)
CONV_DTYPES(DEFINE_IM2COL)
CONV_DTYPES(DEFINE_PACK)
CONV_DTYPES(DEFINE_UNPACK)

/* Integer GEMM on the work type, columns [j0, j1) of C[m, n] = A[m, k] ·
 * B[k, n] (B and C with row length n, the column block's width). */
typedef struct igemm_job {
    const void *a, *b;
    void *c;
    int64_t m, n, k;
} igemm_job;

#define IG_BLOCK 256
#define DEFINE_IGEMM(W)                                                        \
    static void igemm_##W(void *ctx, int64_t j0, int64_t j1) {                 \
        const igemm_job *jb = ctx;                                             \
        const W *a = jb->a, *b = jb->b;                                        \
        W *c = jb->c;                                                          \
        for (int64_t jb0 = j0; jb0 < j1; jb0 += IG_BLOCK) {                    \
            int64_t jb1 = jb0 + IG_BLOCK < j1 ? jb0 + IG_BLOCK : j1;           \
            for (int64_t i = 0; i < jb->m; i++) {                              \
                W *restrict crow = c + i * jb->n;                              \
                for (int64_t j = jb0; j < jb1; j++)                            \
                    crow[j] = 0;                                               \
                for (int64_t p = 0; p < jb->k; p++) {                          \
                    W av = a[i * jb->k + p];                                   \
                    const W *restrict brow = b + p * jb->n;                    \
                    for (int64_t j = jb0; j < jb1; j++)                        \
                        crow[j] = (W)(crow[j] + av * brow[j]);                 \
                }                                                              \
            }                                                                  \
        }                                                                      \
    }
DEFINE_IGEMM(uint32_t)
DEFINE_IGEMM(uint64_t)

typedef enum { G_S, G_D, G_C, G_Z, G_U32, G_U64 } gemm_kind;

typedef struct conv_kernel {
    em_range_fn im2col;
    void (*pack)(void *dst, const em_array *k);
    void (*unpack)(void *dst, int64_t ldd, const void *src, int64_t rows,
                   int64_t cols);
    size_t wsize;
    gemm_kind kind;
    bool in_place; /* work type == dtype */
} conv_kernel;

#define GEMM_KIND_OF(W)                                                        \
    _Generic((W)0, float                                                       \
             : G_S, double                                                     \
             : G_D, em_c64_t                                                   \
             : G_C, em_c128_t                                                  \
             : G_Z, uint32_t                                                   \
             : G_U32, uint64_t                                                 \
             : G_U64)
#define REG_KERNEL(E, sfx, S, C, LOAD, STORE)                                  \
    [E] = {im2col_##sfx,                                                       \
           pack_##sfx,                                                         \
           unpack_##sfx,                                                       \
           sizeof(CONV_WORK(C)),                                               \
           GEMM_KIND_OF(CONV_WORK(C)),                                         \
           sizeof(CONV_WORK(C)) == sizeof(S) && E != EM_PRED &&                \
               !(E >= EM_U8 && E <= EM_S64)},
static const conv_kernel kernels[EM_DTYPE_COUNT] = {CONV_DTYPES(REG_KERNEL)};

/* C[m, n] (ldc) = A[m, k] · B[k, n]: all row-major, A and B packed. */
static void gemm(const conv_kernel *kn, int64_t m, int64_t n, int64_t k,
                 const void *a, const void *b, void *c, int64_t ldc) {
    switch (kn->kind) {
    case G_S:
        em__gemm_one(em__gemm_f32, sizeof(float), false, false, m, n, k, a, k,
                     b, n, false, c, ldc);
        break;
    case G_D:
        em__gemm_one(em__gemm_f64, sizeof(double), false, false, m, n, k, a,
                     k, b, n, false, c, ldc);
        break;
    case G_C:
        em__gemm_one(em__gemm_c64, sizeof(em_c64_t), false, false, m, n, k, a,
                     k, b, n, false, c, ldc);
        break;
    case G_Z:
        em__gemm_one(em__gemm_c128, sizeof(em_c128_t), false, false, m, n, k,
                     a, k, b, n, false, c, ldc);
        break;
    case G_U32:
    case G_U64: {
        /* ldc == n here (the caller passes a packed temporary). */
        igemm_job jb = {a, b, c, m, n, k};
        int64_t grain = EM_PARALLEL_GRAIN / (m * k > 0 ? m * k : 1);
        em__parallel_for(n, grain < IG_BLOCK ? IG_BLOCK : grain,
                         kn->kind == G_U32 ? igemm_uint32_t : igemm_uint64_t,
                         &jb);
        break;
    }
    }
}

static em_status conv_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const conv_params *p = node->params;
    const em_array *in = node->inputs[0], *ker = node->inputs[1];
    const conv_kernel *kn = &kernels[node->dtype];
    const size_t es = em_dtype_size(node->dtype), ws = kn->wsize;

    conv_geom g;
    memset(&g, 0, sizeof g);
    g.ns = in->ndim - 2;
    if (g.ns == 0) {
        g.ns = 1;
        g.in_sp[0] = g.k_sp[0] = g.out_sp[0] = 1;
        g.strides[0] = g.idil[0] = g.kdil[0] = 1;
    } else {
        for (int i = 0; i < g.ns; i++) {
            g.in_sp[i] = in->shape[2 + i];
            g.in_st[i] = in->strides[2 + i];
            g.k_sp[i] = ker->shape[2 + i];
            g.out_sp[i] = node->shape[2 + i];
            g.strides[i] = p->strides[i];
            g.low[i] = p->low[i];
            g.idil[i] = p->idil[i];
            g.kdil[i] = p->kdil[i];
        }
    }
    g.in_c_stride = in->strides[1];
    g.kvol = 1;
    g.L = 1;
    for (int i = 0; i < g.ns; i++) {
        g.kvol *= g.k_sp[i];
        g.L *= g.out_sp[i];
    }
    const int64_t N = in->shape[0], O = ker->shape[0], Cg = ker->shape[1];
    const int64_t F = p->fgroups, B = p->bgroups, T = F * B;
    const int64_t Og = O / T, Nout = node->shape[0], Kdim = Cg * g.kvol;
    char *out = em__data(node);
    if (Kdim == 0) {
        memset(out, 0, (size_t)node->size * es);
        return EM_OK;
    }

    /* Column block: col (Kdim x Lb) stays under COL_BYTES. */
    int64_t Lb = COL_BYTES / (Kdim * (int64_t)ws);
    if (Lb < 1)
        Lb = 1;
    if (Lb > g.L)
        Lb = g.L;
    void *w = malloc((size_t)(O * Kdim) * ws);
    void *col = malloc((size_t)(Kdim * Lb) * ws);
    void *tmp = kn->in_place ? NULL : malloc((size_t)(Og * Lb) * ws);
    if (!w || !col || (!kn->in_place && !tmp)) {
        free(w);
        free(col);
        free(tmp);
        return em__fail(EM_ERR_OOM,
                        "conv: out of memory for the patch matrix "
                        "(%lld x %lld)",
                        (long long)Kdim, (long long)Lb);
    }
    kn->pack(w, ker);

    const char *in_data = em__data(in);
    for (int64_t n = 0; n < Nout; n++) {
        for (int64_t t = 0; t < T; t++) {
            const int64_t nb = n + (B > 1 ? t * (N / B) : 0);
            const int64_t c0 = F > 1 ? t * Cg : 0;
            const char *src =
                in_data +
                (nb * in->strides[0] + c0 * in->strides[1]) * (int64_t)es;
            const char *wt = (const char *)w + (size_t)(t * Og * Kdim) * ws;
            char *dst = out + (size_t)((n * O + t * Og) * g.L) * es;
            for (int64_t l0 = 0; l0 < g.L; l0 += Lb) {
                int64_t l1 = l0 + Lb < g.L ? l0 + Lb : g.L;
                im2col_job jb = {&g, src, col, l0, l1};
                int64_t grain = EM_PARALLEL_GRAIN / (l1 - l0);
                em__parallel_for(Kdim, grain < 1 ? 1 : grain, kn->im2col, &jb);
                if (kn->in_place) {
                    gemm(kn, Og, l1 - l0, Kdim, wt, col, dst + (size_t)l0 * es,
                         g.L);
                } else {
                    gemm(kn, Og, l1 - l0, Kdim, wt, col, tmp, l1 - l0);
                    kn->unpack(dst + (size_t)l0 * es, g.L, tmp, Og, l1 - l0);
                }
            }
        }
    }
    free(w);
    free(col);
    free(tmp);
    return EM_OK;
}

static const em_prim conv_prim = {"conv", conv_eval, em__vjp_conv,
                                  em__gpu_conv_eval};

em_status em_conv(em_array *input, em_array *kernel,
                  const em_conv_options *opts, em_array **out) {
    if (out)
        *out = NULL;
    if (!input || !kernel || !opts || !out)
        return em__fail(EM_ERR_ARGUMENT, "conv: NULL argument");
    em_desc di, dk;
    if (input->dtype != kernel->dtype || input->dtype == EM_PRED)
        return em__fail(EM_ERR_ARGUMENT,
                        "conv: input %s and kernel %s must share one dtype "
                        "other than pred",
                        em__describe(input, &di), em__describe(kernel, &dk));
    if (input->ndim < 2 || input->ndim != kernel->ndim)
        return em__fail(EM_ERR_ARGUMENT,
                        "conv: input %s and kernel %s must have the same rank "
                        ">= 2 (batch, channels, spatial...)",
                        em__describe(input, &di), em__describe(kernel, &dk));
    conv_params p;
    memset(&p, 0, sizeof p);
    p.fgroups = opts->feature_groups ? opts->feature_groups : 1;
    p.bgroups = opts->batch_groups ? opts->batch_groups : 1;
    const int64_t N = input->shape[0], C = input->shape[1];
    const int64_t O = kernel->shape[0], KC = kernel->shape[1];
    const int64_t F = p.fgroups, B = p.bgroups;
    if (F < 1 || B < 1 || (F > 1 && B > 1))
        return em__fail(EM_ERR_ARGUMENT,
                        "conv: feature_groups %lld and batch_groups %lld must "
                        "be >= 1 and at most one of them > 1",
                        (long long)F, (long long)B);
    if (C % F != 0 || KC * F != C || O % F != 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "conv: with %lld feature groups the input channels of "
                        "%s must be kernel channels x groups and the kernel "
                        "%s output channels divisible by the groups",
                        (long long)F, em__describe(input, &di),
                        em__describe(kernel, &dk));
    if (N % B != 0 || O % B != 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "conv: %lld batch groups must divide the batch of %s "
                        "and the output channels of %s",
                        (long long)B, em__describe(input, &di),
                        em__describe(kernel, &dk));
    int64_t shape[EM_MAX_NDIM];
    shape[0] = N / B;
    shape[1] = O;
    const int ns = input->ndim - 2;
    for (int i = 0; i < ns; i++) {
        int64_t s = opts->strides[i] ? opts->strides[i] : 1;
        int64_t id = opts->input_dilation[i] ? opts->input_dilation[i] : 1;
        int64_t kd = opts->kernel_dilation[i] ? opts->kernel_dilation[i] : 1;
        if (s < 1 || id < 1 || kd < 1)
            return em__fail(EM_ERR_ARGUMENT,
                            "conv: stride %lld, input dilation %lld and kernel "
                            "dilation %lld of spatial axis %d must be >= 1",
                            (long long)s, (long long)id, (long long)kd, i);
        const int64_t d = input->shape[2 + i], k = kernel->shape[2 + i];
        int64_t P, K;
        bool ovf = __builtin_mul_overflow(d > 0 ? d - 1 : 0, id, &P) ||
                   __builtin_add_overflow(P, d > 0 ? 1 : 0, &P) ||
                   __builtin_add_overflow(P, opts->pad_low[i], &P) ||
                   __builtin_add_overflow(P, opts->pad_high[i], &P) ||
                   __builtin_mul_overflow(k > 0 ? k - 1 : 0, kd, &K);
        if (ovf || P < 0)
            return em__fail(EM_ERR_ARGUMENT,
                            "conv: padding (%lld, %lld) of spatial axis %d of "
                            "%s gives a negative or too large size",
                            (long long)opts->pad_low[i],
                            (long long)opts->pad_high[i], i,
                            em__describe(input, &di));
        K += k > 0 ? 1 : 0;
        shape[2 + i] = (k > 0 && P >= K) ? (P - K) / s + 1 : 0;
        p.strides[i] = s;
        p.low[i] = opts->pad_low[i];
        p.idil[i] = id;
        p.kdil[i] = kd;
    }
    em_status st =
        em__check_shape("conv", shape, input->ndim, input->dtype, NULL);
    if (st != EM_OK)
        return st;
    em_array *inputs[2] = {input, kernel};
    return em__node_new_params(&conv_prim, input->dtype, shape, input->ndim,
                               inputs, 2, &p, sizeof p, out);
}
