/*
 * dot.c — tensor contraction (Nx.dot/6) and numpy-style matmul.
 *
 * Both build one "dot" node whose parameters name, for each operand, which
 * axes are batch, free (M for a, N for b) and contracted (K) axes. At eval
 * the contraction is a batch of GEMMs C[M,N] = A[M,K] · B[K,N]:
 *   - f32/f64/c64/c128 call OpenBLAS directly on the operands when their
 *     strides fit a GEMM (row- or column-major with a leading dimension),
 *     otherwise on packed copies;
 *   - bf16 on CPUs with AVX512_BF16 runs the vdpbf16ps kernel of
 *     dot_bf16.c (float accumulation, rounded once; about 3x sgemm's rate
 *     on Zen 5);
 *   - other f16/bf16 operands are widened to float (vectorised and
 *     threaded, keeping a transposed operand's layout), multiplied by sgemm
 *     (float accumulation) and rounded back once;
 *   - float products with at most EM_MATVEC_MAX_M rows of a (a decode
 *     step) run the matrix-vector kernels of matvec.c instead, which read
 *     the weights once, in place, in either layout;
 *   - integers and pred are packed into a 32- or 64-bit unsigned work type
 *     (wrapping arithmetic) and multiplied by a cache-blocked loop.
 * A batch axis an operand lacks (matmul broadcasting) has stride 0; when
 * all of b's batch axes are broadcast, a's batch axes become more rows of
 * one GEMM (x[B, 1, K] @ W[K, N] reads W once).
 */
#include "dot_cpu.h"
#include "params.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* Hot contiguous loops: EM_CLONES (internal.h). */

/* ------------------------------------------------------------------------ */
/* Per-dtype pieces                                                          */
/* ------------------------------------------------------------------------ */

/* Work type of the GEMM: wrapping unsigned for integers (mod 2^n results
 * are the same whether computed in 32/64 bits and truncated, or in n bits;
 * pred counts true pairs, nonzero meaning true), float for halves, the
 * dtype itself for BLAS types. */
#define DOT_WORK(C)                                                            \
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

typedef void (*dot_loop_fn)(const void *a, const void *b, void *c, int64_t m,
                            int64_t n, int64_t k, int64_t row_begin,
                            int64_t row_end);

typedef struct dot_kernel {
    size_t wsize;  /* bytes of one work element */
    bool in_place; /* work type == dtype: use operands and output as is */
    /* dst[i] = (work) src[i * stride] for i < n */
    void (*pack)(void *dst, const void *src, int64_t n, int64_t stride);
    /* dst[i] = (dtype) src[i] for i < n */
    void (*unpack)(void *dst, const void *src, int64_t n);
    em_gemm_fn gemm;  /* BLAS on the work type, or NULL */
    dot_loop_fn loop; /* integer loop on the work type, or NULL */
} dot_kernel;

/* Rows [row_begin, row_end) of C[m,n] = A[m,k] · B[k,n], all row-major and
 * contiguous. Columns are blocked so a tile of C stays in L1 while B's rows
 * stream past. */
#define DOT_COL_BLOCK 512
#define DEFINE_DOT_LOOP(W)                                                     \
    EM_CLONES static void dot_loop_##W(                                        \
        const void *ap, const void *bp, void *cp, int64_t m, int64_t n,        \
        int64_t k, int64_t row_begin, int64_t row_end) {                       \
        const W *a = ap, *b = bp;                                              \
        W *c = cp;                                                             \
        (void)m;                                                               \
        for (int64_t i = row_begin; i < row_end; i++) {                        \
            W *restrict crow = c + i * n;                                      \
            const W *arow = a + i * k;                                         \
            for (int64_t j0 = 0; j0 < n; j0 += DOT_COL_BLOCK) {                \
                int64_t j1 = j0 + DOT_COL_BLOCK < n ? j0 + DOT_COL_BLOCK : n;  \
                for (int64_t j = j0; j < j1; j++)                              \
                    crow[j] = 0;                                               \
                for (int64_t p = 0; p < k; p++) {                              \
                    W av = arow[p];                                            \
                    const W *restrict brow = b + p * n;                        \
                    for (int64_t j = j0; j < j1; j++)                          \
                        crow[j] = (W)(crow[j] + av * brow[j]);                 \
                }                                                              \
            }                                                                  \
        }                                                                      \
    }
DEFINE_DOT_LOOP(uint32_t)
DEFINE_DOT_LOOP(uint64_t)

/* Which GEMM runs a work type. */
#define DOT_GEMM_OF(W)                                                         \
    _Generic((W)0, float                                                       \
             : em__gemm_f32, double                                            \
             : em__gemm_f64, em_c64_t                                          \
             : em__gemm_c64, em_c128_t                                         \
             : em__gemm_c128, default                                          \
             : (em_gemm_fn)NULL)
#define DOT_LOOP_OF(W)                                                         \
    _Generic((W)0, uint32_t                                                    \
             : dot_loop_uint32_t, uint64_t                                     \
             : dot_loop_uint64_t, default                                      \
             : (dot_loop_fn)NULL)

#define DEFINE_DOT_KERNEL(E, sfx, T, C, LOAD, STORE)                           \
    static void dot_pack_##sfx(void *dstp, const void *srcp, int64_t n,        \
                               int64_t s) {                                    \
        DOT_WORK(C) *dst = dstp;                                               \
        const T *src = srcp;                                                   \
        for (int64_t i = 0; i < n; i++)                                        \
            dst[i] = (DOT_WORK(C))LOAD(src[i * s]);                            \
    }                                                                          \
    static void dot_unpack_##sfx(void *dstp, const void *srcp, int64_t n) {    \
        T *dst = dstp;                                                         \
        const DOT_WORK(C) *src = srcp;                                         \
        for (int64_t i = 0; i < n; i++)                                        \
            dst[i] = E == EM_PRED ? (T)(src[i] != 0) : STORE((C)src[i]);       \
    }                                                                          \
    static const dot_kernel dot_##sfx = {                                      \
        sizeof(DOT_WORK(C)),                                                   \
        E == EM_F32 || E == EM_F64 || E == EM_C64 || E == EM_C128,             \
        dot_pack_##sfx,                                                        \
        dot_unpack_##sfx,                                                      \
        DOT_GEMM_OF(DOT_WORK(C)),                                              \
        DOT_LOOP_OF(DOT_WORK(C)),                                              \
    };
EM_DTYPES_ALL(DEFINE_DOT_KERNEL)

#define REG_DOT(E, sfx, ...) [E] = &dot_##sfx,
static const dot_kernel *const dot_kernels[EM_DTYPE_COUNT] = {
    EM_DTYPES_ALL(REG_DOT)};

/* ------------------------------------------------------------------------ */
/* Node parameters                                                           */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Eval                                                                      */
/* ------------------------------------------------------------------------ */

/* One operand seen as [batch..., rows..., cols...] with strides. */
typedef struct dot_operand {
    const char *data;
    int nb, nr, nc;
    int64_t shape[3 * EM_MAX_NDIM], stride[3 * EM_MAX_NDIM];
    int64_t rows, cols;
} dot_operand;

static void operand_view(dot_operand *v, const em_array *x, const int *batch,
                         const int64_t *batch_shape, int nb, const int *rows,
                         int nr, const int *cols, int nc) {
    v->data = em__data(x);
    v->nb = nb;
    v->nr = nr;
    v->nc = nc;
    int d = 0;
    for (int i = 0; i < nb; i++, d++) {
        v->shape[d] = batch_shape[i];
        v->stride[d] = batch[i] < 0 ? 0 : x->strides[batch[i]];
    }
    v->rows = v->cols = 1;
    for (int i = 0; i < nr; i++, d++) {
        v->shape[d] = x->shape[rows[i]];
        v->stride[d] = x->strides[rows[i]];
        v->rows *= v->shape[d];
    }
    for (int i = 0; i < nc; i++, d++) {
        v->shape[d] = x->shape[cols[i]];
        v->stride[d] = x->strides[cols[i]];
        v->cols *= v->shape[d];
    }
}

/* Can the [rows, cols] matrix of `v` (per batch) feed BLAS directly? Sets
 * the transpose flag and leading dimension. */
static bool blas_fits(const dot_operand *v, bool *trans, int64_t *ld) {
    int64_t sr, sc;
    if (!em__group_stride(v->shape + v->nb, v->stride + v->nb, v->nr, &sr) ||
        !em__group_stride(v->shape + v->nb + v->nr, v->stride + v->nb + v->nr,
                          v->nc, &sc))
        return false;
    int64_t r = v->rows, c = v->cols;
    if ((c == 1 || sc == 1) && (r == 1 || sr >= c)) {
        *trans = false;
        *ld = r == 1 ? c : sr;
        return *ld <= INT_MAX;
    }
    if ((r == 1 || sr == 1) && (c == 1 || sc >= r)) {
        *trans = true;
        *ld = c == 1 ? r : sc;
        return *ld <= INT_MAX;
    }
    return false;
}

/* Copy the whole operand, converted to the work type, as contiguous
 * [batch, rows, cols]. */
static void pack_operand(const dot_kernel *k, size_t isz, const dot_operand *v,
                         void *dst) {
    int nd = v->nb + v->nr + v->nc;
    int64_t total = 1;
    for (int i = 0; i < nd; i++)
        total *= v->shape[i];
    int64_t inner_n = nd ? v->shape[nd - 1] : 1;
    int64_t inner_s = nd ? v->stride[nd - 1] : 1;
    int64_t idx[3 * EM_MAX_NDIM] = {0};
    int64_t off = 0;
    char *out = dst;
    for (int64_t done = 0; done < total; done += inner_n) {
        k->pack(out, v->data + off * (int64_t)isz, inner_n, inner_s);
        out += inner_n * (int64_t)k->wsize;
        for (int d = nd - 2; d >= 0; d--) {
            off += v->stride[d];
            if (++idx[d] < v->shape[d])
                break;
            off -= idx[d] * v->stride[d];
            idx[d] = 0;
        }
    }
}

/* Element offset of batch `bi` (row-major over the batch axes). */
static int64_t batch_offset(const dot_operand *v, int64_t bi) {
    int64_t off = 0;
    for (int d = v->nb - 1; d >= 0; d--) {
        off += (bi % v->shape[d]) * v->stride[d];
        bi /= v->shape[d];
    }
    return off;
}

typedef struct dot_loop_job {
    const dot_kernel *k;
    const char *a, *b;
    char *c;
    int64_t m, n, kk;
} dot_loop_job;

/* Units are rows of all batches: unit u is row u % m of batch u / m. */
static void dot_loop_task(void *ctx, int64_t begin, int64_t end) {
    const dot_loop_job *j = ctx;
    size_t w = j->k->wsize;
    while (begin < end) {
        int64_t bi = begin / j->m, r0 = begin % j->m;
        int64_t r1 = j->m < r0 + (end - begin) ? j->m : r0 + (end - begin);
        j->k->loop(j->a + (size_t)(bi * j->m * j->kk) * w,
                   j->b + (size_t)(bi * j->kk * j->n) * w,
                   j->c + (size_t)(bi * j->m * j->n) * w, j->m, j->n, j->kk, r0,
                   r1);
        begin += r1 - r0;
    }
}

/* A scratch buffer of `bytes` from the buffer cache; *data its memory. */
static em_status scratch_new(size_t bytes, em_buffer **buf, void **data) {
    em_status st = em__buffer_new(bytes, buf);
    if (st != EM_OK)
        return em__fail(st,
                        "dot: out of memory for packed operands (%zu "
                        "bytes)",
                        bytes);
    *data = (*buf)->data;
    return EM_OK;
}

/* When every batch axis of b is broadcast (stride 0), the batches share
 * one weight matrix: fold a's batch axes into its rows, so that one GEMM
 * (or one pass of the matrix-vector kernel) reads b once. The output,
 * [batch..., m, n] row-major, is the same [batch * m, n] matrix. */
static void fold_broadcast_batch(dot_operand *va, dot_operand *vb,
                                 int64_t *nbatch) {
    if (va->nb == 0)
        return;
    for (int d = 0; d < vb->nb; d++)
        if (vb->stride[d] != 0 && vb->shape[d] != 1)
            return;
    va->nr += va->nb;
    va->nb = 0;
    va->rows = 1;
    for (int d = 0; d < va->nr; d++)
        va->rows *= va->shape[d];
    int rest = vb->nr + vb->nc;
    memmove(vb->shape, vb->shape + vb->nb, sizeof(int64_t) * (size_t)rest);
    memmove(vb->stride, vb->stride + vb->nb, sizeof(int64_t) * (size_t)rest);
    vb->nb = 0;
    *nbatch = 1;
}

/* Widening of a half-precision operand that fits BLAS in place: each of
 * its `lines` contiguous runs of `inner` elements (stride ld between runs)
 * becomes a dense line of floats, so sgemm reads the copy with the same
 * transpose flag and leading dimension `inner`. */
typedef struct widen_job {
    em_dtype dtype;
    const dot_operand *v;
    int64_t lines, inner, ld;
    float *dst;
} widen_job;

static void widen_task(void *ctx, int64_t begin, int64_t end) {
    const widen_job *j = ctx;
    size_t isz = em_dtype_size(j->dtype);
    for (int64_t u = begin; u < end; u++) {
        int64_t bi = u / j->lines, line = u % j->lines;
        int64_t off = batch_offset(j->v, bi) + line * j->ld;
        em__widen_half(j->dtype, j->v->data + off * (int64_t)isz,
                       j->dst + u * j->inner, j->inner);
    }
}

/* Convert a half operand to floats for sgemm: in its own layout when it
 * fits BLAS (vectorised, threaded), else through the generic packing.
 * Sets *trans and *ld for the copy. */
static void widen_operand(const dot_kernel *k, em_dtype dtype,
                          const dot_operand *v, int64_t nbatch, float *dst,
                          bool *trans, int64_t *ld) {
    int64_t native_ld;
    if (blas_fits(v, trans, &native_ld)) {
        int64_t lines = *trans ? v->cols : v->rows;
        int64_t inner = *trans ? v->rows : v->cols;
        widen_job j = {dtype, v, lines, inner, native_ld, dst};
        em__parallel_units(nbatch * lines, inner, widen_task, &j);
        *ld = inner;
        return;
    }
    pack_operand(k, em_dtype_size(dtype), v, dst);
    *trans = false;
    *ld = v->cols;
}

typedef struct unpack_job {
    const dot_kernel *k;
    size_t esize;
    char *out;
    const char *work;
} unpack_job;

static void unpack_task(void *ctx, int64_t begin, int64_t end) {
    const unpack_job *j = ctx;
    j->k->unpack(j->out + (size_t)begin * j->esize,
                 j->work + (size_t)begin * j->k->wsize, end - begin);
}

/* The matrix-vector kernels, when b can be read in place. */
static em_status dot_matvec(em_array *node, const dot_kernel *k,
                            const dot_operand *va, const dot_operand *vb,
                            int64_t nbatch, bool *done) {
    bool trans;
    int64_t ldb;
    *done = false;
    if (!blas_fits(vb, &trans, &ldb))
        return EM_OK;
    int64_t m = va->rows, kk = va->cols;
    void *x = malloc((size_t)(nbatch * m * kk) * k->wsize);
    int64_t *w_offset = malloc(sizeof(int64_t) * (size_t)nbatch);
    if (!x || !w_offset) {
        free(x);
        free(w_offset);
        return em__fail(EM_ERR_OOM, "dot: out of memory for packed operands");
    }
    pack_operand(k, em_dtype_size(node->dtype), va, x);
    for (int64_t bi = 0; bi < nbatch; bi++)
        w_offset[bi] = batch_offset(vb, bi);
    em_matvec_job job = {node->dtype, nbatch,   m,     kk,  vb->cols,      x,
                         vb->data,    w_offset, trans, ldb, em__data(node)};
    em__matvec(&job);
    free(x);
    free(w_offset);
    *done = true;
    return EM_OK;
}

/* bf16 products on CPUs with AVX512_BF16 (dot_bf16.c), when both operands
 * can be read with a leading dimension. */
static em_status dot_gemm_bf16(em_array *node, const dot_operand *va,
                               const dot_operand *vb, int64_t nbatch,
                               bool *done) {
    em_bf16_gemm g = {va->rows, vb->cols, va->cols, NULL, false,
                      0,        NULL,     false,    0,    NULL};
    *done = false;
    if (!blas_fits(va, &g.ta, &g.lda) || !blas_fits(vb, &g.tb, &g.ldb))
        return EM_OK;
    uint16_t *out = em__data(node);
    for (int64_t bi = 0; bi < nbatch; bi++) {
        g.a = (const uint16_t *)va->data + batch_offset(va, bi);
        g.b = (const uint16_t *)vb->data + batch_offset(vb, bi);
        g.c = out + bi * g.m * g.n;
        em_status st = em__gemm_bf16(&g);
        if (st != EM_OK)
            return st;
    }
    *done = true;
    return EM_OK;
}

/* The batch of BLAS products, each operand packed (contiguous per batch)
 * or read in place at its batch offsets, on the thread pool. */
static em_status gemm_batch(const dot_kernel *k, const dot_operand *va,
                            const dot_operand *vb, const void *packed_a,
                            const void *packed_b, char *c, bool ta, bool tb,
                            int64_t lda, int64_t ldb, int64_t m, int64_t n,
                            int64_t kk, int64_t nbatch) {
    size_t w = k->wsize;
    const char **ptrs = malloc((size_t)nbatch * 3 * sizeof *ptrs);
    if (!ptrs)
        return em__fail(EM_ERR_OOM, "dot: out of memory");
    const char **as = ptrs, **bs = ptrs + nbatch;
    char **cs = (char **)(ptrs + 2 * nbatch);
    for (int64_t bi = 0; bi < nbatch; bi++) {
        as[bi] = packed_a ? (const char *)packed_a + (size_t)(bi * m * kk) * w
                          : va->data + batch_offset(va, bi) * (int64_t)w;
        bs[bi] = packed_b ? (const char *)packed_b + (size_t)(bi * kk * n) * w
                          : vb->data + batch_offset(vb, bi) * (int64_t)w;
        cs[bi] = c + (size_t)(bi * m * n) * w;
    }
    em_gemm_problem p = {.gemm = k->gemm,
                         .esz = w,
                         .ta = ta,
                         .tb = tb,
                         .m = m,
                         .n = n,
                         .k = kk,
                         .lda = lda,
                         .ldb = ldb,
                         .ldc = n,
                         .nbatch = nbatch,
                         .a = as,
                         .b = bs,
                         .c = cs};
    em__gemm_parallel(&p);
    free(ptrs);
    return EM_OK;
}

static em_status dot_eval(em_array *node) {
    const dot_params *p = node->params;
    const em_array *a = node->inputs[0], *b = node->inputs[1];
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK)
        return st;
    if (node->size == 0)
        return EM_OK;

    dot_operand va, vb;
    operand_view(&va, a, p->batch_a, p->batch_shape, p->nbatch, p->m_axes,
                 p->nm, p->k_a, p->nk);
    operand_view(&vb, b, p->batch_b, p->batch_shape, p->nbatch, p->k_b, p->nk,
                 p->n_axes, p->nn);
    int64_t nbatch = 1;
    for (int i = 0; i < p->nbatch; i++)
        nbatch *= p->batch_shape[i];
    fold_broadcast_batch(&va, &vb, &nbatch);
    int64_t m = va.rows, kk = va.cols, n = vb.cols;
    size_t esz = em_dtype_size(node->dtype);
    char *out = em__data(node);
    if (kk == 0) { /* an empty sum: zeros (all-zero bytes in every dtype) */
        memset(out, 0, (size_t)node->size * esz);
        return EM_OK;
    }

    const dot_kernel *k = dot_kernels[node->dtype];
    if (em__matvec_dtype(node->dtype) && m <= EM_MATVEC_MAX_M) {
        bool done;
        st = dot_matvec(node, k, &va, &vb, nbatch, &done);
        if (st != EM_OK || done)
            return st;
    }
    if (node->dtype == EM_BF16 && em__gemm_bf16_available()) {
        bool done;
        st = dot_gemm_bf16(node, &va, &vb, nbatch, &done);
        if (st != EM_OK || done)
            return st;
    }
    if (k->gemm && (m > INT_MAX || n > INT_MAX || kk > INT_MAX))
        return em__fail(EM_ERR_RUNTIME,
                        "dot: matrix dimensions %lld x %lld x %lld exceed "
                        "the BLAS limit",
                        (long long)m, (long long)kk, (long long)n);

    bool half = node->dtype == EM_F16 || node->dtype == EM_BF16;
    bool ta = false, tb = false;
    int64_t lda = kk, ldb = n;
    bool direct_a = k->in_place && blas_fits(&va, &ta, &lda);
    bool direct_b = k->in_place && blas_fits(&vb, &tb, &ldb);
    /* Scratch comes from the engine's buffer cache: fresh pages from
     * malloc (mmap'ed at these sizes) would fault in on every call. */
    em_buffer *scratch[3] = {NULL, NULL, NULL};
    void *packed_a = NULL, *packed_b = NULL, *work_c = NULL;
    size_t w = k->wsize;
    st = EM_OK;
    if (!direct_a) {
        st = scratch_new((size_t)(nbatch * m * kk) * w, &scratch[0], &packed_a);
        ta = false;
        lda = kk;
    }
    if (!direct_b && st == EM_OK) {
        st = scratch_new((size_t)(nbatch * kk * n) * w, &scratch[1], &packed_b);
        tb = false;
        ldb = n;
    }
    if (!k->in_place && st == EM_OK)
        st = scratch_new((size_t)(nbatch * m * n) * w, &scratch[2], &work_c);
    if (st != EM_OK) {
        for (int i = 0; i < 3; i++)
            if (scratch[i])
                em__buffer_release(scratch[i]);
        return st;
    }
    size_t isz = em_dtype_size(a->dtype);
    if (half) {
        widen_operand(k, node->dtype, &va, nbatch, packed_a, &ta, &lda);
        widen_operand(k, node->dtype, &vb, nbatch, packed_b, &tb, &ldb);
    } else {
        if (packed_a)
            pack_operand(k, isz, &va, packed_a);
        if (packed_b)
            pack_operand(k, isz, &vb, packed_b);
    }
    char *c = k->in_place ? out : work_c;

    if (k->gemm) {
        st = gemm_batch(k, &va, &vb, packed_a, packed_b, c, ta, tb, lda, ldb,
                        m, n, kk, nbatch);
    } else {
        dot_loop_job job = {k, packed_a, packed_b, c, m, n, kk};
        em__parallel_units(nbatch * m, kk * n, dot_loop_task, &job);
    }
    if (!k->in_place && st == EM_OK) {
        unpack_job uj = {k, esz, out, work_c};
        em__parallel_for(node->size, EM_PARALLEL_GRAIN, unpack_task, &uj);
    }
    for (int i = 0; i < 3; i++)
        if (scratch[i])
            em__buffer_release(scratch[i]);
    return st;
}

static const em_prim dot_prim = {"dot", dot_eval, em__vjp_dot,
                                 em__gpu_dot_eval};

/* ------------------------------------------------------------------------ */
/* Builders                                                                  */
/* ------------------------------------------------------------------------ */

static em_status dot_build(const char *name, em_array *a, em_array *b,
                           const dot_params *p, em_array **out) {
    int64_t shape[EM_MAX_NDIM];
    int ndim = 0;
    if (p->nbatch + p->nm + p->nn > EM_MAX_NDIM) {
        em_desc da, db;
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: result of %s and %s would have rank %d (max %d)",
                        name, em__describe(a, &da), em__describe(b, &db),
                        p->nbatch + p->nm + p->nn, EM_MAX_NDIM);
    }
    for (int i = 0; i < p->nbatch; i++)
        shape[ndim++] = p->batch_shape[i];
    for (int i = 0; i < p->nm; i++)
        shape[ndim++] = a->shape[p->m_axes[i]];
    for (int i = 0; i < p->nn; i++)
        shape[ndim++] = b->shape[p->n_axes[i]];
    em_status st = em__check_shape(name, shape, ndim, a->dtype, NULL);
    if (st != EM_OK)
        return st;
    em_array *inputs[2] = {a, b};
    return em__node_new_params(&dot_prim, a->dtype, shape, ndim, inputs, 2, p,
                               sizeof *p, out);
}

static em_status check_pair(const char *name, em_array *a, em_array *b,
                            em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "%s: out is NULL", name);
    *out = NULL;
    if (!a || !b)
        return em__fail(EM_ERR_ARGUMENT, "%s: input is NULL", name);
    if (a->dtype != b->dtype) {
        em_desc da, db;
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: %s and %s have different dtypes; expected one",
                        name, em__describe(a, &da), em__describe(b, &db));
    }
    return EM_OK;
}

/* Normalise `n` axes of x into `out`, marking them in *used; fails on a bad
 * or repeated axis. `what` names the list for the message. */
static em_status take_axes(const char *what, const int *axes, int n,
                           const em_array *x, unsigned *used, int *out) {
    em_desc d;
    if (n < 0 || n > x->ndim)
        return em__fail(EM_ERR_ARGUMENT, "dot: %d %s axes given for %s", n,
                        what, em__describe(x, &d));
    for (int i = 0; i < n; i++) {
        int ax = axes[i];
        if (ax < 0)
            ax += x->ndim;
        if (ax < 0 || ax >= x->ndim)
            return em__fail(EM_ERR_ARGUMENT,
                            "dot: %s axis %d is out of range for %s", what,
                            axes[i], em__describe(x, &d));
        if (*used & (1u << ax))
            return em__fail(EM_ERR_ARGUMENT, "dot: axis %d of %s is used twice",
                            axes[i], em__describe(x, &d));
        *used |= 1u << ax;
        out[i] = ax;
    }
    return EM_OK;
}

em_status em_dot(em_array *a, em_array *b, const em_dot_options *opts,
                 em_array **out) {
    em_status st = check_pair("dot", a, b, out);
    if (st != EM_OK)
        return st;
    em_dot_options none;
    memset(&none, 0, sizeof none);
    if (!opts)
        opts = &none;
    dot_params p;
    memset(&p, 0, sizeof p);
    unsigned used_a = 0, used_b = 0;
    em_desc da, db;
    if ((st = take_axes("batch", opts->batch_a, opts->nbatch, a, &used_a,
                        p.batch_a)) != EM_OK ||
        (st = take_axes("batch", opts->batch_b, opts->nbatch, b, &used_b,
                        p.batch_b)) != EM_OK ||
        (st = take_axes("contract", opts->contract_a, opts->ncontract, a,
                        &used_a, p.k_a)) != EM_OK ||
        (st = take_axes("contract", opts->contract_b, opts->ncontract, b,
                        &used_b, p.k_b)) != EM_OK)
        return st;
    p.nbatch = opts->nbatch;
    p.nk = opts->ncontract;
    for (int i = 0; i < p.nbatch; i++) {
        int64_t sa = a->shape[p.batch_a[i]], sb = b->shape[p.batch_b[i]];
        if (sa != sb)
            return em__fail(EM_ERR_ARGUMENT,
                            "dot: batch axis %d of %s (size %lld) does not "
                            "match batch axis %d of %s (size %lld)",
                            opts->batch_a[i], em__describe(a, &da),
                            (long long)sa, opts->batch_b[i],
                            em__describe(b, &db), (long long)sb);
        p.batch_shape[i] = sa;
    }
    for (int i = 0; i < p.nk; i++) {
        int64_t sa = a->shape[p.k_a[i]], sb = b->shape[p.k_b[i]];
        if (sa != sb)
            return em__fail(EM_ERR_ARGUMENT,
                            "dot: contract axis %d of %s (size %lld) does "
                            "not match contract axis %d of %s (size %lld)",
                            opts->contract_a[i], em__describe(a, &da),
                            (long long)sa, opts->contract_b[i],
                            em__describe(b, &db), (long long)sb);
    }
    for (int i = 0; i < a->ndim; i++)
        if (!(used_a & (1u << i)))
            p.m_axes[p.nm++] = i;
    for (int i = 0; i < b->ndim; i++)
        if (!(used_b & (1u << i)))
            p.n_axes[p.nn++] = i;
    return dot_build("dot", a, b, &p, out);
}

em_status em_matmul(em_array *a, em_array *b, em_array **out) {
    em_status st = check_pair("matmul", a, b, out);
    if (st != EM_OK)
        return st;
    em_desc da, db;
    if (a->ndim < 1 || b->ndim < 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "matmul: %s and %s must have rank >= 1",
                        em__describe(a, &da), em__describe(b, &db));
    /* numpy: a 1-D a is a row vector and a 1-D b a column vector; their
     * axes are dropped from the result. */
    int ka = a->ndim - 1, kb = b->ndim >= 2 ? b->ndim - 2 : 0;
    if (a->shape[ka] != b->shape[kb])
        return em__fail(EM_ERR_ARGUMENT,
                        "matmul: %s and %s: last axis of a (size %lld) must "
                        "match %s axis of b (size %lld)",
                        em__describe(a, &da), em__describe(b, &db),
                        (long long)a->shape[ka],
                        b->ndim >= 2 ? "the second-to-last" : "the only",
                        (long long)b->shape[kb]);
    int nba = a->ndim >= 2 ? a->ndim - 2 : 0;
    int nbb = b->ndim >= 2 ? b->ndim - 2 : 0;
    dot_params p;
    memset(&p, 0, sizeof p);
    int nb;
    st = em__broadcast_shapes("matmul", a->shape, nba, b->shape, nbb,
                              p.batch_shape, &nb);
    if (st != EM_OK)
        return st;
    p.nbatch = nb;
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - nba), ib = i - (nb - nbb);
        /* A missing or size-1 axis is broadcast: stride 0. */
        p.batch_a[i] = ia >= 0 && a->shape[ia] != 1 ? ia : -1;
        p.batch_b[i] = ib >= 0 && b->shape[ib] != 1 ? ib : -1;
    }
    p.nk = 1;
    p.k_a[0] = ka;
    p.k_b[0] = kb;
    if (a->ndim >= 2)
        p.m_axes[p.nm++] = a->ndim - 2;
    if (b->ndim >= 2)
        p.n_axes[p.nn++] = b->ndim - 1;
    return dot_build("matmul", a, b, &p, out);
}
