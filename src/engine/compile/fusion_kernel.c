/*
 * fusion_kernel.c — the interpreter of fused programs (format in fusion.h).
 *
 * No code is generated at run time: each instruction calls the kernel its
 * unfused node would call (elementwise_internal.h), on a tile small enough
 * to stay in cache, so an elementwise group costs one pass over memory
 * instead of one per op, and its results are bit-identical to the unfused
 * ones (same kernel, same per-element arithmetic and rounding). Reductions
 * fold each contiguous row with the reduction's own kernels, in the order
 * the unfused reduction folds one output (em__reduce_contiguous); results
 * differ only where the unfused reduction splits a few long rows across
 * threads, or in chunks mode (rows over FZ_MAX_ROW, folded by tiles into
 * per-chunk accumulators), and stay within a float sum's bound
 * n * eps * sum|x|; max and min are exact whatever the order.
 *
 * Work is split into a few units per thread (ranges of elements, or of
 * rows, cut into tiles); each unit has its own preallocated register
 * scratch, so the parallel body cannot fail.
 */
#include "fusion.h"

#include "ops/elementwise_internal.h"

#include <stdlib.h>

/* Elements per tile in elementwise mode: the largest power of two at most
 * FZ_TILE_MAX whose registers fit in about FZ_TILE_BYTES. */
#define FZ_TILE_MAX 2048
#define FZ_TILE_MIN 256
#define FZ_TILE_BYTES (96 * 1024)
/* Extra registers for broadcasting narrow sources, one per source slot. */
#define FZ_BCAST_REGS FZ_MAX_SRC

/* How one load reads its input over a flat range of its space (W or W's
 * narrow shape): collapsed shape and byte steps. */
typedef struct fz_load_plan {
    int ndim;
    int64_t shape[EM_MAX_NDIM];
    int64_t step[EM_MAX_NDIM];
    int64_t esize;
    const char *base;
} fz_load_plan;

typedef struct fz_exec {
    const fz_program *prog;
    em_ew_kernel kernel[FZ_MAX_INSTR];
    fz_load_plan *plan; /* one per instruction (used by loads) */
    char *out;
    int64_t out_esize;
    bool out_narrow;
    int64_t total;   /* elements (elementwise mode) or rows (row mode) */
    int64_t tile;    /* elements per tile; rows per tile in row mode */
    int64_t row_len; /* row mode: elements per row (W's last nred axes) */
    int64_t units;   /* work units */
    int64_t nchunks; /* chunks mode: chunks per row */
    char *partials;  /* chunks mode: one accumulator per chunk */
    size_t acc_size;
    char *scratch;    /* units * unit_bytes */
    size_t reg_bytes; /* bytes per register */
    size_t unit_bytes;
} fz_exec;

static em_ew_kernel fz_kernel_of(const fz_instr *in) {
    em_dtype d = (em_dtype)in->kdtype;
    switch ((enum fz_family)in->family) {
    case FZ_UNARY:
        return em__unary_kernel(d);
    case FZ_BINARY:
        return em__binary_kernel(d);
    case FZ_SELECT:
        return em__select_kernel(d);
    case FZ_CLIP:
        return em__clip_kernel(d);
    case FZ_AS_TYPE:
        return em__as_type_kernel();
    }
    return NULL;
}

/* Plan reading `in`, broadcast (right-aligned) to `space`, in row-major
 * order of `space`. */
static void fz_plan_load(fz_load_plan *lp, const em_array *in,
                         const int64_t *space, int nd) {
    int64_t row[EM_MAX_NDIM], bcast[EM_MAX_NDIM];
    em__row_strides(space, nd, row);
    int lead = nd - in->ndim;
    for (int d = 0; d < nd; d++) {
        int j = d - lead;
        bcast[d] = (j < 0 || in->shape[j] == 1) ? 0 : in->strides[j];
    }
    const int64_t *sin[2] = {row, bcast};
    int64_t collapsed[2][EM_MAX_NDIM];
    lp->ndim = em__collapse(nd, space, 2, sin, lp->shape, collapsed);
    lp->esize = (int64_t)em_dtype_size(in->dtype);
    if (lp->ndim == 0) {
        lp->ndim = 1;
        lp->shape[0] = 1;
        collapsed[1][0] = 0;
    }
    for (int d = 0; d < lp->ndim; d++)
        lp->step[d] = collapsed[1][d] * lp->esize;
    lp->base = em__data(in);
}

/* dst[0..n) = n copies of the `esize`-byte value at src: a few elements
 * one by one, then doubling memcpys (a scalar fill loop would cost as much
 * as the op that reads it). */
static void fz_fill(char *dst, const void *src, int64_t esize, int64_t n) {
    int64_t have = n < 8 ? n : 8;
    em_ew_gather(dst, src, 0, esize, have);
    while (have < n) {
        int64_t m = have < n - have ? have : n - have;
        memcpy(dst + have * esize, dst, (size_t)(m * esize));
        have += m;
    }
}

/* Elements [start, start + count) of the load's space: a pointer straight
 * into the input when they are one contiguous run, else gathered into
 * `scratch`. */
static const void *fz_fetch(const fz_load_plan *lp, int64_t start,
                            int64_t count, char *scratch) {
    int nd = lp->ndim, last = nd - 1;
    int64_t idx[EM_MAX_NDIM], rem = start;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % lp->shape[d];
        rem /= lp->shape[d];
    }
    if (count <= lp->shape[last] - idx[last] && lp->step[last] == lp->esize) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++)
            off += idx[d] * lp->step[d];
        return lp->base + off;
    }
    int64_t pos = 0;
    while (pos < count) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++)
            off += idx[d] * lp->step[d];
        int64_t n = lp->shape[last] - idx[last];
        if (n > count - pos)
            n = count - pos;
        if (lp->step[last] == 0)
            fz_fill(scratch + pos * lp->esize, lp->base + off, lp->esize, n);
        else
            em_ew_gather(scratch + pos * lp->esize, lp->base + off,
                         lp->step[last], lp->esize, n);
        pos += n;
        idx[last] += n;
        for (int d = last; d > 0 && idx[d] == lp->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
    return scratch;
}

/* The dtype of an elementwise instruction's source j. */
static em_dtype fz_src_dtype(const fz_instr *in, int j) {
    return in->family == FZ_SELECT && j > 0 ? (em_dtype)in->dtype
                                            : (em_dtype)in->kdtype;
}

/* Run the program once over one tile. Wide registers cover `wide_count`
 * elements from flat position `wide_start` of W; narrow ones (row mode)
 * `rows` elements from row `row_start`, each row being `row_len` wide
 * elements. val[] holds each register's current data (kept across the
 * tiles of a unit for invariant loads); `first` marks the first (and
 * largest) tile of a unit or chunk. In chunks mode the final reduction
 * folds the tile into `acc` instead of writing out_tile. */
static void fz_run_tile(const fz_exec *ex, char *regs, const void **val,
                        bool first, int64_t wide_start, int64_t wide_count,
                        int64_t row_start, int64_t rows, char *out_tile,
                        void *acc) {
    const fz_program *p = ex->prog;
    int64_t row_len = ex->row_len;
    for (int k = 0; k < p->ninstr; k++) {
        const fz_instr *in = &p->instr[k];
        int64_t n = in->narrow ? rows : wide_count;
        char *dst =
            in->dst < 0 ? out_tile : regs + (size_t)in->dst * ex->reg_bytes;
        switch ((enum fz_kind)in->kind) {
        case FZ_LOAD:
            /* Filled on the first tile, which is the largest: it then
             * covers every later tile. */
            if (in->invariant && !first)
                continue;
            val[in->dst] = fz_fetch(
                &ex->plan[k], in->narrow ? row_start : wide_start, n, dst);
            continue;
        case FZ_EW: {
            const void *src[FZ_MAX_SRC];
            for (int j = 0; j < in->nsrc; j++) {
                src[j] = val[in->src[j]];
                if (((in->src_narrow >> j) & 1) && !in->narrow) {
                    /* Per-row values read by a wide op: repeat each one
                     * along its row. */
                    char *b = regs + (size_t)(p->nregs + j) * ex->reg_bytes;
                    int64_t es = (int64_t)em_dtype_size(fz_src_dtype(in, j));
                    for (int64_t r = 0; r < rows; r++)
                        fz_fill(b + r * row_len * es,
                                (const char *)src[j] + r * es, es, row_len);
                    src[j] = b;
                }
            }
            ex->kernel[k](in->op, dst, src, n);
            break;
        }
        case FZ_REDUCE: {
            if (acc) {
                em__reduce_acc_fold((em_reduce_op)in->op, (em_dtype)in->kdtype,
                                    acc, val[in->src[0]], wide_count);
                break;
            }
            int64_t ies = (int64_t)em_dtype_size((em_dtype)in->kdtype);
            int64_t oes = (int64_t)em_dtype_size((em_dtype)in->dtype);
            for (int64_t r = 0; r < rows; r++)
                em__reduce_contiguous(
                    (em_reduce_op)in->op, (em_dtype)in->kdtype,
                    (const char *)val[in->src[0]] + r * row_len * ies, row_len,
                    dst + r * oes);
            break;
        }
        }
        if (in->dst >= 0)
            val[in->dst] = dst;
    }
}

/* Chunks mode, item i: chunk i % nchunks of row i / nchunks, folded into
 * accumulator i. */
static void fz_run_chunk(const fz_exec *ex, char *regs, const void **val,
                         int64_t item) {
    int64_t r = item / ex->nchunks, c = item % ex->nchunks;
    int64_t start = r * ex->row_len + c * FZ_CHUNK;
    int64_t len = ex->row_len - c * FZ_CHUNK;
    if (len > FZ_CHUNK)
        len = FZ_CHUNK;
    const fz_instr *red = &ex->prog->instr[ex->prog->ninstr - 1];
    void *acc = ex->partials + item * ex->acc_size;
    em__reduce_acc_init((em_reduce_op)red->op, (em_dtype)red->kdtype, acc);
    for (int64_t s = start; s < start + len; s += ex->tile) {
        int64_t n = start + len - s < ex->tile ? start + len - s : ex->tile;
        fz_run_tile(ex, regs, val, s == start, s, n, 0, 0, NULL, acc);
    }
}

/* em__parallel_for body over work units; unit u owns scratch slot u. */
static void fz_units(void *ctx, int64_t begin, int64_t end) {
    const fz_exec *ex = ctx;
    char *regs = ex->scratch + (size_t)begin * ex->unit_bytes;
    const fz_program *p = ex->prog;
    const void *val[FZ_MAX_REGS];
    for (int64_t u = begin; u < end; u++) {
        /* Unit u's share of [0, total), without overflowing total * u. */
        int64_t q = ex->total / ex->units, rem = ex->total % ex->units;
        int64_t lo = u * q + (u < rem ? u : rem);
        int64_t hi = lo + q + (u < rem);
        if (p->mode == FZ_MODE_CHUNKS) {
            for (int64_t i = lo; i < hi; i++)
                fz_run_chunk(ex, regs, val, i);
            continue;
        }
        for (int64_t s = lo; s < hi; s += ex->tile) {
            int64_t n = hi - s < ex->tile ? hi - s : ex->tile;
            if (p->mode == FZ_MODE_ROWS) {
                int64_t out_pos = ex->out_narrow ? s : s * ex->row_len;
                fz_run_tile(ex, regs, val, s == lo, s * ex->row_len,
                            n * ex->row_len, s, n,
                            ex->out + out_pos * ex->out_esize, NULL);
            } else {
                fz_run_tile(ex, regs, val, s == lo, s, n, 0, 0,
                            ex->out + s * ex->out_esize, NULL);
            }
        }
    }
}

/* Whether node->params is a program this interpreter can run safely on
 * node->inputs (the pass only makes such programs; this guards copies). */
bool em__fz_valid(const em_array *node) {
    const fz_program *p = node->params;
    if (!p || node->params_size < sizeof *p || p->ninstr < 1 ||
        p->ninstr > FZ_MAX_INSTR ||
        node->params_size != fz_program_size(p->ninstr) || p->nregs < 0 ||
        p->nregs > FZ_MAX_REGS || p->ndim < 0 || p->ndim > EM_MAX_NDIM ||
        p->mode < FZ_MODE_TILES || p->mode > FZ_MODE_CHUNKS ||
        (p->mode != FZ_MODE_TILES && p->ndim < 1) || p->reg_esize < 1 ||
        p->reg_esize > 16)
        return false;
    bool rows = p->mode != FZ_MODE_TILES;
    if (rows && (p->nred < 1 || p->nred > p->ndim))
        return false;
    for (int d = 0; d < p->ndim; d++)
        if (p->shape[d] < 0 ||
            (rows && d >= p->ndim - p->nred && p->shape[d] < 1))
            return false;
    const fz_instr *tail = &p->instr[p->ninstr - 1];
    if (p->mode == FZ_MODE_CHUNKS &&
        (tail->kind != FZ_REDUCE || tail->op < 0 ||
         tail->op >= EM_REDUCE_COUNT || !em_dtype_is_valid(tail->kdtype) ||
         em__reduce_acc_size((em_reduce_op)tail->op, (em_dtype)tail->kdtype) ==
             0))
        return false;
    for (int k = 0; k < p->ninstr; k++) {
        const fz_instr *in = &p->instr[k];
        bool last = k == p->ninstr - 1;
        if (!em_dtype_is_valid(in->dtype) || !em_dtype_is_valid(in->kdtype) ||
            (last ? in->dst != -1 : in->dst < 0 || in->dst >= p->nregs) ||
            in->nsrc > FZ_MAX_SRC || (in->narrow && !rows) ||
            (in->narrow && p->mode == FZ_MODE_CHUNKS && !last))
            return false;
        for (int j = 0; j < in->nsrc; j++)
            if (in->src[j] < 0 || in->src[j] >= p->nregs)
                return false;
        switch (in->kind) {
        case FZ_LOAD:
            if (last || in->op < 0 || in->op >= node->ninputs ||
                node->inputs[in->op]->dtype != in->dtype)
                return false;
            break;
        case FZ_EW:
            if (in->family > FZ_AS_TYPE || !fz_kernel_of(in))
                return false;
            break;
        case FZ_REDUCE:
            if (in->nsrc != 1 || in->op < 0 || in->op >= EM_REDUCE_COUNT)
                return false;
            break;
        default:
            return false;
        }
    }
    return true;
}

static em_status fused_eval(em_array *node) {
    const fz_program *p = node->params;
    if (!em__fz_valid(node))
        return em__fail(EM_ERR_ARGUMENT, "fused: malformed program");
    em_status st = em__alloc_output(node, node->inputs, node->ninputs);
    if (st != EM_OK || node->size == 0)
        return st;

    fz_exec ex;
    memset(&ex, 0, sizeof ex);
    ex.prog = p;
    ex.out = em__data(node);
    ex.out_esize = (int64_t)em_dtype_size(node->dtype);

    /* The wide space W and its narrow counterpart (rows of 1). */
    int nd = p->ndim;
    int64_t narrow[EM_MAX_NDIM], row_len = 1;
    memcpy(narrow, p->shape, sizeof narrow);
    for (int d = nd - (p->mode != FZ_MODE_TILES ? p->nred : 0); d < nd; d++) {
        row_len *= p->shape[d];
        narrow[d] = 1;
    }
    int64_t wide_size = 1;
    for (int d = 0; d < nd; d++)
        wide_size *= p->shape[d];
    if (wide_size == 0)
        return EM_OK;

    ex.plan = malloc(sizeof *ex.plan * (size_t)p->ninstr);
    if (!ex.plan)
        return em__fail(EM_ERR_OOM, "fused: out of memory");
    for (int k = 0; k < p->ninstr; k++) {
        const fz_instr *in = &p->instr[k];
        if (in->kind == FZ_LOAD)
            fz_plan_load(&ex.plan[k], node->inputs[in->op],
                         in->narrow ? narrow : p->shape, nd);
        else if (in->kind == FZ_EW)
            ex.kernel[k] = fz_kernel_of(in);
    }

    int threads = em__num_threads();
    size_t nregs = (size_t)p->nregs + FZ_BCAST_REGS;
    if (p->mode == FZ_MODE_ROWS) {
        /* Tiles of whole rows: as many as fit FZ_TILE_MAX elements, at
         * least one. */
        ex.row_len = row_len;
        ex.total = wide_size / ex.row_len;
        ex.tile = ex.row_len >= FZ_TILE_MAX ? 1 : FZ_TILE_MAX / ex.row_len;
        ex.out_narrow = node->size == ex.total;
        ex.units = wide_size < EM_PARALLEL_GRAIN / 2 ? 1 : 4 * threads;
    } else {
        ex.tile = FZ_TILE_MAX;
        while (ex.tile > FZ_TILE_MIN &&
               nregs * (size_t)ex.tile * (size_t)p->reg_esize > FZ_TILE_BYTES)
            ex.tile /= 2;
        ex.total = wide_size;
        ex.units = wide_size < EM_PARALLEL_GRAIN / 2 ? 1 : 4 * threads;
        if (p->mode == FZ_MODE_CHUNKS) {
            /* Work items are fixed-length chunks of rows, so the order of
             * the fold does not depend on the thread count. */
            const fz_instr *red = &p->instr[p->ninstr - 1];
            ex.row_len = row_len;
            ex.nchunks = (row_len + FZ_CHUNK - 1) / FZ_CHUNK;
            ex.total = wide_size / row_len * ex.nchunks;
            ex.units = 4 * threads;
            ex.acc_size = em__reduce_acc_size((em_reduce_op)red->op,
                                              (em_dtype)red->kdtype);
            ex.partials = malloc(ex.acc_size * (size_t)ex.total);
            if (!ex.partials) {
                free(ex.plan);
                return em__fail(EM_ERR_OOM, "fused: out of memory");
            }
        }
    }
    if (ex.units > ex.total)
        ex.units = ex.total;
    int64_t tile_elems =
        p->mode == FZ_MODE_ROWS ? ex.tile * ex.row_len : ex.tile;
    ex.reg_bytes =
        ((size_t)tile_elems * (size_t)p->reg_esize + 63) & ~(size_t)63;
    ex.unit_bytes = nregs * ex.reg_bytes;
    ex.scratch = aligned_alloc(64, ex.unit_bytes * (size_t)ex.units);
    if (!ex.scratch) {
        free(ex.plan);
        free(ex.partials);
        return em__fail(EM_ERR_OOM,
                        "fused: out of memory for %lld x %zu "
                        "bytes of registers",
                        (long long)ex.units, ex.unit_bytes);
    }
    em__parallel_for(ex.units, 1, fz_units, &ex);
    if (p->mode == FZ_MODE_CHUNKS) { /* merge each row's chunks in order */
        const fz_instr *red = &p->instr[p->ninstr - 1];
        em_reduce_op op = (em_reduce_op)red->op;
        em_dtype dt = (em_dtype)red->kdtype;
        for (int64_t r = 0; r < ex.total / ex.nchunks; r++) {
            char *first = ex.partials + (size_t)(r * ex.nchunks) * ex.acc_size;
            for (int64_t c = 1; c < ex.nchunks; c++)
                em__reduce_acc_merge(op, dt, first,
                                     first + (size_t)c * ex.acc_size);
            em__reduce_acc_final(op, dt, first, ex.out + r * ex.out_esize);
        }
    }
    free(ex.partials);
    free(ex.scratch);
    free(ex.plan);
    return EM_OK;
}

const em_prim em__fused_prim = {"fused", fused_eval, NULL, em__gpu_fused_eval};
