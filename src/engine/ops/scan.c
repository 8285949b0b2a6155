/*
 * scan.c — em_scan: cumulative sum, product, max and min along one axis.
 *
 * Layout. The scanned axis has length n. When it is not the last axis, the
 * last axis (length m) is the "vector" axis: a whole row of m neighbouring
 * lanes is advanced one step at a time (out[t][j] = op(out[t-1][j],
 * in[t][j])), which vectorises because the output is row-major. When the
 * scanned axis is the last one, each lane is a serial loop with the
 * accumulator in a register. Every remaining axis is an "outer" axis; a
 * unit of work is one outer position and one chunk of the vector axis.
 * `reverse` walks the axis from the end by starting at n-1 with negated
 * strides.
 *
 * Few, long lanes (a 1-D cumulative sum of millions of elements) are cut
 * into blocks: each block is scanned on its own in parallel, then each
 * block's carry (the combined totals of the blocks before it) is applied to
 * it in parallel.
 *
 * Kernels are written once (DEFINE_SCAN) and instantiated for every op and
 * dtype from the dtype tables.
 */
#include "internal.h"
#include "params.h"

#include "emily_scan.h"

#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

/* The combining step on compute values. Integers wrap through uint64_t
 * (signed overflow is undefined in C); max/min keep a NaN in `a` (the
 * accumulator) and take one from `b`. */
#define OP_ISUM(C, a, b) ((C)((uint64_t)(a) + (uint64_t)(b)))
#define OP_IPRODUCT(C, a, b) ((C)((uint64_t)(a) * (uint64_t)(b)))
#define OP_FSUM(C, a, b) ((a) + (b))
#define OP_FPRODUCT(C, a, b) ((a) * (b))
#define OP_MAX(C, a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))
#define OP_MIN(C, a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))

typedef struct scan_kernel {
    size_t csize; /* bytes of one compute value (carries) */
    /* Scan nt steps of m lanes: out[t*oa + j] for t < nt, j < m, from
     * in[t*sa + j*sv]. carry (m compute values) or NULL: the value before
     * step 0. Strides in elements, possibly negative. */
    void (*block)(const void *in, int64_t sa, int64_t sv, void *out, int64_t oa,
                  int64_t nt, int64_t m, const void *carry);
    /* out[t*oa + j] = op(carry[j], out[t*oa + j]) */
    void (*fix)(void *out, int64_t oa, int64_t nt, int64_t m,
                const void *carry);
    /* dst[j] = op(prev[j], row[j]) (prev NULL: row[j]) as compute values */
    void (*total)(void *dst, const void *prev, const void *row, int64_t m);
} scan_kernel;

#define DEFINE_SCAN(NAME, OP, E, sfx, S, C, LOAD, STORE)                       \
    static void scan_block_##NAME##_##sfx(                                     \
        const void *inp, int64_t sa, int64_t sv, void *outp, int64_t oa,       \
        int64_t nt, int64_t m, const void *carryp) {                           \
        const S *in = inp;                                                     \
        S *out = outp;                                                         \
        const C *carry = carryp;                                               \
        if (nt <= 0)                                                           \
            return;                                                            \
        if (m == 1) {                                                          \
            C acc = LOAD(in[0]);                                               \
            if (carry)                                                         \
                acc = OP(C, carry[0], acc);                                    \
            S s = STORE(acc);                                                  \
            out[0] = s;                                                        \
            acc = LOAD(s);                                                     \
            for (int64_t t = 1; t < nt; t++) {                                 \
                s = STORE(OP(C, acc, LOAD(in[t * sa])));                       \
                out[t * oa] = s;                                               \
                acc = LOAD(s);                                                 \
            }                                                                  \
            return;                                                            \
        }                                                                      \
        for (int64_t j = 0; j < m; j++) {                                      \
            C x = LOAD(in[j * sv]);                                            \
            out[j] = STORE(carry ? OP(C, carry[j], x) : x);                    \
        }                                                                      \
        for (int64_t t = 1; t < nt; t++) {                                     \
            const S *src = in + t * sa;                                        \
            const S *prev = out + (t - 1) * oa;                                \
            S *dst = out + t * oa;                                             \
            if (sv == 1) {                                                     \
                for (int64_t j = 0; j < m; j++)                                \
                    dst[j] = STORE(OP(C, LOAD(prev[j]), LOAD(src[j])));        \
            } else {                                                           \
                for (int64_t j = 0; j < m; j++)                                \
                    dst[j] = STORE(OP(C, LOAD(prev[j]), LOAD(src[j * sv])));   \
            }                                                                  \
        }                                                                      \
    }                                                                          \
    static void scan_fix_##NAME##_##sfx(void *outp, int64_t oa, int64_t nt,    \
                                        int64_t m, const void *carryp) {       \
        S *out = outp;                                                         \
        const C *carry = carryp;                                               \
        for (int64_t t = 0; t < nt; t++)                                       \
            for (int64_t j = 0; j < m; j++)                                    \
                out[t * oa + j] =                                              \
                    STORE(OP(C, carry[j], LOAD(out[t * oa + j])));             \
    }                                                                          \
    static void scan_total_##NAME##_##sfx(void *dstp, const void *prevp,       \
                                          const void *rowp, int64_t m) {       \
        C *dst = dstp;                                                         \
        const C *prev = prevp;                                                 \
        const S *row = rowp;                                                   \
        for (int64_t j = 0; j < m; j++)                                        \
            dst[j] = prev ? OP(C, prev[j], LOAD(row[j])) : LOAD(row[j]);       \
    }

#define SCAN_ISUM(E, sfx, S, C, L, ST)                                         \
    DEFINE_SCAN(sum, OP_ISUM, E, sfx, S, C, L, ST)
#define SCAN_IPROD(E, sfx, S, C, L, ST)                                        \
    DEFINE_SCAN(product, OP_IPRODUCT, E, sfx, S, C, L, ST)
#define SCAN_FSUM(E, sfx, S, C, L, ST)                                         \
    DEFINE_SCAN(sum, OP_FSUM, E, sfx, S, C, L, ST)
#define SCAN_FPROD(E, sfx, S, C, L, ST)                                        \
    DEFINE_SCAN(product, OP_FPRODUCT, E, sfx, S, C, L, ST)
#define SCAN_MAX(E, sfx, S, C, L, ST)                                          \
    DEFINE_SCAN(max, OP_MAX, E, sfx, S, C, L, ST)
#define SCAN_MIN(E, sfx, S, C, L, ST)                                          \
    DEFINE_SCAN(min, OP_MIN, E, sfx, S, C, L, ST)

EM_DTYPES_INT(SCAN_ISUM)
EM_DTYPES_INT(SCAN_IPROD)
EM_DTYPES_FLOATING(SCAN_FSUM)
EM_DTYPES_FLOATING(SCAN_FPROD)
EM_DTYPES_REAL(SCAN_MAX)
EM_DTYPES_REAL(SCAN_MIN)

#define REG(NAME, E, sfx, S, C)                                                \
    [E] = {sizeof(C), scan_block_##NAME##_##sfx, scan_fix_##NAME##_##sfx,      \
           scan_total_##NAME##_##sfx},
#define REG_SUM(E, sfx, S, C, ...) REG(sum, E, sfx, S, C)
#define REG_PROD(E, sfx, S, C, ...) REG(product, E, sfx, S, C)
#define REG_MAX(E, sfx, S, C, ...) REG(max, E, sfx, S, C)
#define REG_MIN(E, sfx, S, C, ...) REG(min, E, sfx, S, C)

/* pred is excluded from sum and product (as in em_reduce); max/min of pred
 * are a running "or" / "and". */
static const scan_kernel kernels[EM_SCAN_COUNT][EM_DTYPE_COUNT] = {
    [EM_SCAN_SUM] = {EM_DTYPES_INT(REG_SUM) EM_DTYPES_FLOATING(REG_SUM)},
    [EM_SCAN_PRODUCT] = {EM_DTYPES_INT(REG_PROD) EM_DTYPES_FLOATING(REG_PROD)},
    [EM_SCAN_MAX] = {EM_DTYPES_REAL(REG_MAX)},
    [EM_SCAN_MIN] = {EM_DTYPES_REAL(REG_MIN)},
};

static const char *const scan_names[EM_SCAN_COUNT] = {
    "cumulative_sum", "cumulative_product", "cumulative_max", "cumulative_min"};

/* ------------------------------------------------------------------------ */
/* Driver                                                                    */
/* ------------------------------------------------------------------------ */

/* Lanes of the vector axis handled by one unit. */
#define SCAN_CHUNK 2048
/* Lanes at least this long may be cut into blocks when there are few. */
#define SCAN_LONG 65536
/* Steps per block at least. */
#define SCAN_BLOCK_MIN 16384

typedef struct scan_job {
    const scan_kernel *k;
    const char *in;
    char *out;
    size_t isz; /* element size (input and output share the dtype) */
    int nouter;
    int64_t oshape[EM_MAX_NDIM], istride[EM_MAX_NDIM], ostride[EM_MAX_NDIM];
    int64_t n, m, nchunk;
    int64_t sa, oa, sv; /* axis strides (already negated for reverse) */
    int64_t in_start, out_start; /* element offsets of step 0 */
    /* blocked mode */
    int64_t nblocks, block_len;
    char *carries; /* [unit][block][SCAN_CHUNK] compute values */
} scan_job;

/* Element offsets of unit u's step 0 (input, output) and its lane range. */
static void unit_origin(const scan_job *j, int64_t u, int64_t *ioff,
                        int64_t *ooff, int64_t *j0, int64_t *mlen) {
    int64_t c = u % j->nchunk, rem = u / j->nchunk;
    int64_t io = j->in_start, oo = j->out_start;
    for (int d = j->nouter - 1; d >= 0; d--) {
        int64_t i = rem % j->oshape[d];
        rem /= j->oshape[d];
        io += i * j->istride[d];
        oo += i * j->ostride[d];
    }
    *j0 = c * SCAN_CHUNK;
    *mlen = j->m - *j0 < SCAN_CHUNK ? j->m - *j0 : SCAN_CHUNK;
    *ioff = io + *j0 * j->sv;
    *ooff = oo + *j0;
}

static void units_task(void *ctx, int64_t begin, int64_t end) {
    const scan_job *j = ctx;
    for (int64_t u = begin; u < end; u++) {
        int64_t io, oo, j0, ml;
        unit_origin(j, u, &io, &oo, &j0, &ml);
        j->k->block(j->in + io * (int64_t)j->isz, j->sa, j->sv,
                    j->out + oo * (int64_t)j->isz, j->oa, j->n, ml, NULL);
    }
}

/* Blocked mode, phase 1: scan each (unit, block) on its own. */
static void blocks_task(void *ctx, int64_t begin, int64_t end) {
    const scan_job *j = ctx;
    for (int64_t w = begin; w < end; w++) {
        int64_t u = w / j->nblocks, b = w % j->nblocks;
        int64_t io, oo, j0, ml;
        unit_origin(j, u, &io, &oo, &j0, &ml);
        int64_t t0 = b * j->block_len;
        int64_t nt = j->n - t0 < j->block_len ? j->n - t0 : j->block_len;
        j->k->block(j->in + (io + t0 * j->sa) * (int64_t)j->isz, j->sa, j->sv,
                    j->out + (oo + t0 * j->oa) * (int64_t)j->isz, j->oa, nt, ml,
                    NULL);
    }
}

static char *carry_at(const scan_job *j, int64_t u, int64_t b) {
    return j->carries +
           ((u * j->nblocks + b) * SCAN_CHUNK) * (int64_t)j->k->csize;
}

/* Phase 3: blocks b >= 1 get the combined totals of the blocks before. */
static void fix_task(void *ctx, int64_t begin, int64_t end) {
    const scan_job *j = ctx;
    int64_t per = j->nblocks - 1;
    for (int64_t w = begin; w < end; w++) {
        int64_t u = w / per, b = w % per + 1;
        int64_t io, oo, j0, ml;
        unit_origin(j, u, &io, &oo, &j0, &ml);
        int64_t t0 = b * j->block_len;
        int64_t nt = j->n - t0 < j->block_len ? j->n - t0 : j->block_len;
        j->k->fix(j->out + (oo + t0 * j->oa) * (int64_t)j->isz, j->oa, nt, ml,
                  carry_at(j, u, b));
    }
}

static em_status scan_eval(em_array *node) {
    const scan_params *p = node->params;
    const em_array *in = node->inputs[0];
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK)
        return st;
    if (node->size == 0)
        return EM_OK;

    scan_job j;
    memset(&j, 0, sizeof j);
    j.k = &kernels[p->op][in->dtype];
    j.in = em__data(in);
    j.out = em__data(node);
    j.isz = em_dtype_size(in->dtype);
    int64_t ostrides[EM_MAX_NDIM];
    em__row_strides(node->shape, node->ndim, ostrides);
    int ax = p->axis, v = ax == in->ndim - 1 ? -1 : in->ndim - 1;
    int64_t outer = 1;
    for (int d = 0; d < in->ndim; d++) {
        if (d == ax || d == v)
            continue;
        j.oshape[j.nouter] = in->shape[d];
        j.istride[j.nouter] = in->strides[d];
        j.ostride[j.nouter] = ostrides[d];
        j.nouter++;
        outer *= in->shape[d];
    }
    j.n = in->shape[ax];
    j.m = v < 0 ? 1 : in->shape[v];
    j.sv = v < 0 ? 0 : in->strides[v];
    j.nchunk = (j.m + SCAN_CHUNK - 1) / SCAN_CHUNK;
    j.sa = in->strides[ax];
    j.oa = ostrides[ax];
    if (p->reverse) {
        j.in_start = (j.n - 1) * j.sa;
        j.out_start = (j.n - 1) * j.oa;
        j.sa = -j.sa;
        j.oa = -j.oa;
    }
    int64_t units = outer * j.nchunk;
    int64_t per_unit = j.n * (j.m < SCAN_CHUNK ? j.m : SCAN_CHUNK);
    int threads = em__num_threads();

    if (units < threads && j.n >= SCAN_LONG && threads > 1) {
        int64_t nb = j.n / SCAN_BLOCK_MIN;
        int64_t want = 4 * (int64_t)threads / units + 1;
        if (nb > want)
            nb = want;
        j.nblocks = nb;
        j.block_len = (j.n + nb - 1) / nb;
        j.nblocks = (j.n + j.block_len - 1) / j.block_len;
    }
    if (j.nblocks < 2) {
        int64_t grain = 32768 / (per_unit > 0 ? per_unit : 1);
        em__parallel_for(units, grain < 1 ? 1 : grain, units_task, &j);
        return EM_OK;
    }

    j.carries = malloc((size_t)(units * j.nblocks * SCAN_CHUNK) * j.k->csize);
    if (!j.carries)
        return em__fail(EM_ERR_OOM, "%s: out of memory for block carries",
                        scan_names[p->op]);
    em__parallel_for(units * j.nblocks, 1, blocks_task, &j);
    /* Phase 2 (serial, one row per block): carry[b] = carry[b-1] op the
     * last row of block b-1 (already scanned locally). */
    for (int64_t u = 0; u < units; u++) {
        int64_t io, oo, j0, ml;
        unit_origin(&j, u, &io, &oo, &j0, &ml);
        for (int64_t b = 1; b < j.nblocks; b++) {
            int64_t last = b * j.block_len - 1;
            j.k->total(carry_at(&j, u, b),
                       b > 1 ? carry_at(&j, u, b - 1) : NULL,
                       j.out + (oo + last * j.oa) * (int64_t)j.isz, ml);
        }
    }
    em__parallel_for(units * (j.nblocks - 1), 1, fix_task, &j);
    free(j.carries);
    return EM_OK;
}

static const em_prim scan_prim = {"scan", scan_eval, em__vjp_scan,
                                  em__gpu_scan_eval};

em_status em_scan(em_scan_op op, em_array *a, int axis, bool reverse,
                  em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "scan: out is NULL");
    *out = NULL;
    if ((int)op < 0 || op >= EM_SCAN_COUNT)
        return em__fail(EM_ERR_ARGUMENT, "scan: unknown op %d", (int)op);
    const char *name = scan_names[op];
    if (!a)
        return em__fail(EM_ERR_ARGUMENT, "%s: input is NULL", name);
    em_desc d;
    bool numeric_op = op == EM_SCAN_SUM || op == EM_SCAN_PRODUCT;
    if (!kernels[op][a->dtype].block || (numeric_op && a->dtype == EM_PRED))
        return em__fail(EM_ERR_ARGUMENT, "%s: %s has dtype %s; expected %s",
                        name, em__describe(a, &d), em_dtype_name(a->dtype),
                        numeric_op ? "a numeric dtype (not pred)"
                                   : "a real dtype (not complex)");
    if (a->ndim == 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: %s is a scalar; expected rank >= 1", name,
                        em__describe(a, &d));
    char op_desc[96];
    snprintf(op_desc, sizeof op_desc, "%s of %s", name, em__describe(a, &d));
    int ax;
    em_status st = em__check_axis(op_desc, axis, a->ndim, &ax);
    if (st != EM_OK)
        return st;
    scan_params p = {(int)op, ax, reverse};
    return em__node_new_params(&scan_prim, a->dtype, a->shape, a->ndim, &a, 1,
                               &p, sizeof p, out);
}
