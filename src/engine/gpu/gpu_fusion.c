/*
 * gpu_fusion.c — the fused primitive on the GPU: the node's fz_program
 * (fusion.h) becomes the CUDA C++ source of one kernel, which the plugin
 * compiles with NVRTC (once per source and device) and launches.
 *
 * The source depends on the program's structure only (instructions, ops,
 * dtypes, mode), never on shapes, strides or pointers: those are the
 * kernel's arguments (em_cuda_fused), so programs that differ only in
 * their shapes share one compiled kernel.
 *
 * Each elementwise instruction calls the functor its unfused GPU kernel
 * calls (UnaryOp, BinaryOp, ... in the src/cuda op headers) on values kept in
 * their storage dtype, so every intermediate is rounded as the unfused
 * node rounds it and results are bit-identical. Two kernel shapes:
 *   - flat (elementwise programs): a grid-stride loop over W, four
 *     elements per thread step (vector loads and stores when consecutive);
 *   - rows (a reduction or per-row values): one block per row. The program
 *     is cut into stages at its reductions; each stage walks the row,
 *     computing the elementwise values its reduction (or the output) needs
 *     and folding them with the reduction's own Fold, then combines the
 *     threads' accumulators; per-row values are computed between stages.
 *     When rows fit in shared memory, the first stage that reads a wide
 *     input keeps it there, so a softmax reads its input once and writes
 *     its output once; longer rows read the input again in each stage.
 * Reductions fold in another order than the unfused kernel: sums agree
 * within a float sum's rounding bound; max and min exactly.
 *
 * One program is not compiled: the composed softmax over the last axis,
 * exp(x - max(x)) / sum(exp(x - max(x))), of an f32 or f64 row-contiguous
 * input runs Emily.Fast's softmax kernel (src/cuda/fast.cu: a row read
 * once from registers, 16-byte loads), which computes the same max, the
 * same exp(x - max) and the same division; only the sum's order differs,
 * as in the fused kernel. f16/bf16 keep the fused kernel: the composed
 * form rounds exp(x - max) to the dtype before summing and dividing, the
 * fast kernel does not.
 */
#include "../cuda/emily_cuda.h"
#include "emily_compile.h"
#include "compile/fusion.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

_Static_assert(FZ_GPU_MAX_LOADS == EM_CUDA_FUSED_MAX_LOADS,
               "fusion.h and emily_cuda.h disagree on the loads per kernel");

/* A growing string; `failed` after an allocation failure. */
typedef struct fz_text {
    char *s;
    size_t len, cap;
    bool failed;
} fz_text;

static void put(fz_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(fz_text *t, const char *fmt, ...) {
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL,
                          t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 4096;
        while (cap <= t->len + (size_t)n)
            cap *= 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->failed = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

/* The generator's view of a program: each instruction's sources as
 * instruction indices (the program names registers), and each load's slot
 * among the kernel's loads. */
typedef struct fz_gen {
    const fz_program *p;
    int src[FZ_MAX_INSTR][FZ_MAX_SRC];
    int slot[FZ_MAX_INSTR];
    int nloads;
    bool rows;
    bool loaded[FZ_MAX_INSTR]; /* rows: a stage has read this wide load */
    bool cache_wanted;
} fz_gen;

static bool fz_gen_init(fz_gen *g, const fz_program *p) {
    memset(g, 0, sizeof *g);
    g->p = p;
    g->rows = p->mode != FZ_MODE_TILES;
    int writer[FZ_MAX_REGS];
    for (int r = 0; r < FZ_MAX_REGS; r++)
        writer[r] = -1;
    for (int k = 0; k < p->ninstr; k++) {
        const fz_instr *in = &p->instr[k];
        for (int j = 0; j < in->nsrc; j++) {
            g->src[k][j] = writer[in->src[j]];
            if (g->src[k][j] < 0)
                return false;
        }
        if (in->kind == FZ_LOAD) {
            if (g->nloads == FZ_GPU_MAX_LOADS)
                return false;
            g->slot[k] = g->nloads++;
        }
        if (in->dst >= 0)
            writer[in->dst] = k;
    }
    return true;
}

/* "DT<d>::S": the storage type of dtype d. */
static void put_type(fz_text *t, int dtype) { put(t, "DT<%d>::S", dtype); }

/* Instruction k's value as an expression of its sources' variables. */
static void put_expr(fz_text *t, const fz_gen *g, int k) {
    const fz_instr *in = &g->p->instr[k];
    const int *s = g->src[k];
    switch ((enum fz_family)in->family) {
    case FZ_UNARY:
        put(t, "UnaryOp<%d, %d>{}(x%d, 0, 0)", in->op, in->kdtype, s[0]);
        break;
    case FZ_BINARY:
        put(t, "BinaryOp<%d, %d>{}(x%d, x%d, 0)", in->op, in->kdtype, s[0],
            s[1]);
        break;
    case FZ_SELECT:
        put(t, "select_rule<%d>(x%d, x%d, x%d)", in->kdtype, s[0], s[1], s[2]);
        break;
    case FZ_CLIP:
        put(t, "ClipOp<%d>{}(x%d, x%d, x%d)", in->kdtype, s[0], s[1], s[2]);
        break;
    case FZ_AS_TYPE:
        if (in->kdtype == in->dtype)
            put(t, "x%d", s[0]);
        else
            put(t, "CastOp<%d, %d>{}(x%d, 0, 0)", in->kdtype, in->dtype, s[0]);
        break;
    }
}

/* Whether instruction k's result goes through fz_rounded (fusion_rt.cuh):
 * float and complex results of arithmetic ops that feed later instructions.
 * Ops that may return an input unchanged (sign flips, max/min, selections,
 * copies) never end with a multiply and must keep a NaN's payload. */
static bool fz_needs_rounding(const fz_gen *g, int k) {
    const fz_instr *in = &g->p->instr[k];
    em_dtype d = (em_dtype)in->dtype;
    if (k == g->p->ninstr - 1 || in->kind != FZ_EW ||
        !(d == EM_F32 || d == EM_F64 || d == EM_C64 || d == EM_C128))
        return false;
    if (in->family == FZ_BINARY)
        return in->op != EM_BINARY_maximum && in->op != EM_BINARY_minimum;
    if (in->family != FZ_UNARY)
        return false;
    switch ((em_unary_op)in->op) {
    case EM_UNARY_negate:
    case EM_UNARY_abs:
    case EM_UNARY_sign:
    case EM_UNARY_floor:
    case EM_UNARY_ceil:
    case EM_UNARY_round:
    case EM_UNARY_conjugate:
    case EM_UNARY_real:
    case EM_UNARY_imag:
        return false;
    default:
        return true;
    }
}

/* Instruction k's value: its expression, rounded when it must be. */
static void put_value(fz_text *t, const fz_gen *g, int k) {
    bool round = fz_needs_rounding(g, k);
    if (round)
        put(t, "fz_rounded(");
    put_expr(t, g, k);
    if (round)
        put(t, ", P)");
}

/* Mark the wide instructions the value of k needs (k included when wide). */
static void fz_need(const fz_gen *g, int k, bool *need) {
    const fz_instr *in = &g->p->instr[k];
    if (need[k] || (g->rows && in->narrow))
        return;
    need[k] = true;
    for (int j = 0; j < in->nsrc; j++)
        fz_need(g, g->src[k][j], need);
}

/* One walk over the elements (the whole space, or one row): fetch the
 * needed loads four elements at a time, compute the needed instructions
 * per element, then fold into `acc` (reduce >= 0: that reduction's source)
 * or store the output (reduce < 0). */
static void put_walk(fz_text *t, fz_gen *g, const bool *need, int reduce) {
    const fz_program *p = g->p;
    int last = p->ninstr - 1;
    /* Rows: unrolled, so that a thread has several steps' loads in
     * flight (a long row is walked by one block). */
    if (g->rows)
        put(t, "#pragma unroll 4\n"
               "for (int64_t c0 = (int64_t)threadIdx.x * FZ_STEP; c0 < lim; "
               "c0 += (int64_t)blockDim.x * FZ_STEP) {\n");
    else
        put(t, "for (int64_t c0 = ((int64_t)blockIdx.x * blockDim.x + "
               "threadIdx.x) * FZ_STEP; c0 < lim; c0 += (int64_t)gridDim.x * "
               "blockDim.x * FZ_STEP) {\n");
    for (int k = 0; k < p->ninstr; k++) {
        const fz_instr *in = &p->instr[k];
        if (!need[k] || in->kind != FZ_LOAD)
            continue;
        int j = g->slot[k];
        put_type(t, in->dtype);
        put(t, " l%d[FZ_STEP];\n", k);
        if (!g->rows) {
            put(t, "fz_fetch(l%d, (const ", k);
            put_type(t, in->dtype);
            put(t,
                " *)P.ld[%d].ptr, c0, lim, P.ld[%d].kind, P.vec, P, 0, "
                "P.nd, P.ld[%d].stride);\n",
                j, j, j);
        } else if (!g->loaded[k]) {
            put(t,
                "fz_fetch(l%d, b%d, c0, lim, P.ld[%d].kind, P.vec, P, "
                "P.nouter, P.nd - P.nouter, P.ld[%d].stride);\n"
                "if (P.cached) fz_cache_put(k%d, l%d, c0, lim);\n",
                k, k, j, j, k, k);
        } else {
            put(t,
                "if (P.cached) fz_cache_get(l%d, k%d, c0, lim); else "
                "fz_fetch(l%d, b%d, c0, lim, P.ld[%d].kind, P.vec, P, "
                "P.nouter, P.nd - P.nouter, P.ld[%d].stride);\n",
                k, k, k, k, j, j);
            g->cache_wanted = true;
        }
    }
    for (int k = 0; k < p->ninstr; k++)
        if (need[k] && p->instr[k].kind == FZ_LOAD)
            g->loaded[k] = true;
    if (reduce < 0) {
        put_type(t, p->instr[last].dtype);
        put(t, " o[FZ_STEP];\n");
    }
    put(t, "#pragma unroll\nfor (int v = 0; v < FZ_STEP; v++) {\n");
    for (int k = 0; k < p->ninstr; k++) {
        const fz_instr *in = &p->instr[k];
        if (!need[k])
            continue;
        if (in->kind == FZ_LOAD)
            put(t, "auto x%d = l%d[v];\n", k, k);
        else {
            put(t, "auto x%d = ", k);
            put_value(t, g, k);
            put(t, ";\n");
        }
    }
    if (reduce >= 0)
        put(t, "if (c0 + v < lim) acc = f.step(acc, x%d, 0);\n",
            g->src[reduce][0]);
    else
        put(t, "o[v] = x%d;\n", last);
    put(t, "}\n");
    if (reduce < 0)
        put(t, "fz_store(ob, o, c0, lim, P.vec);\n");
    put(t, "}\n");
}

/* The kernel's source for program p. */
static void put_source(fz_text *t, fz_gen *g) {
    const fz_program *p = g->p;
    int last = p->ninstr - 1;
    const fz_instr *out = &p->instr[last];
    bool need[FZ_MAX_INSTR];
    put(t, "#include \"fusion_rt.cuh\"\nusing namespace emc;\n"
           "extern \"C\" __global__ void __launch_bounds__(1024) "
           "emily_fused(const FzParams P) {\n");
    if (!g->rows) {
        put(t, "const int64_t lim = P.n;\n");
        put_type(t, out->dtype);
        put(t, " *ob = (");
        put_type(t, out->dtype);
        put(t, " *)P.out;\n");
        memset(need, 0, sizeof need);
        fz_need(g, last, need);
        put_walk(t, g, need, -1);
        put(t, "}\n");
        return;
    }
    put(t, "extern __shared__ __align__(64) unsigned char fz_smem[];\n"
           "__shared__ __align__(16) unsigned char fz_red[33 * 16];\n"
           "const int64_t lim = P.row_len;\n"
           "for (int64_t row = blockIdx.x; row < P.rows; row += gridDim.x) "
           "{\n");
    /* Each load's start for this row; wide loads also get their cache. */
    for (int k = 0; k < p->ninstr; k++) {
        const fz_instr *in = &p->instr[k];
        if (in->kind != FZ_LOAD)
            continue;
        int j = g->slot[k];
        put(t, "const ");
        put_type(t, in->dtype);
        put(t, " *b%d = (const ", k);
        put_type(t, in->dtype);
        put(t,
            " *)P.ld[%d].ptr + fz_offset(row, 0, P.nouter, P.shape, "
            "P.ld[%d].stride);\n",
            j, j);
        if (!in->narrow) {
            put_type(t, in->dtype);
            put(t, " *k%d = (", k);
            put_type(t, in->dtype);
            put(t, " *)(fz_smem + P.ld[%d].cache_off);\n", j);
        }
    }
    if (!out->narrow) {
        put_type(t, out->dtype);
        put(t, " *ob = (");
        put_type(t, out->dtype);
        put(t, " *)P.out + row * lim;\n");
    }
    /* Per-row values and reductions in program order; wide values are
     * computed inside the walks that need them. */
    for (int k = 0; k < p->ninstr; k++) {
        const fz_instr *in = &p->instr[k];
        if (in->kind == FZ_REDUCE) {
            put_type(t, in->dtype);
            put(t, " x%d;\n{\nFold<%d, %d> f;\nauto acc = f.identity();\n", k,
                in->kdtype, in->op);
            memset(need, 0, sizeof need);
            fz_need(g, g->src[k][0], need);
            put_walk(t, g, need, k);
            put(t, "x%d = f.final(fz_block_reduce(f, acc, fz_red));\n}\n", k);
        } else if (in->narrow) {
            put(t, "auto x%d = ", k);
            if (in->kind == FZ_LOAD)
                put(t, "b%d[0]", k);
            else
                put_value(t, g, k);
            put(t, ";\n");
        } else {
            continue;
        }
        if (k == last) { /* a per-row output */
            put(t, "if (threadIdx.x == 0) ((");
            put_type(t, out->dtype);
            put(t, " *)P.out)[row] = x%d;\n", k);
        }
    }
    if (!out->narrow) {
        memset(need, 0, sizeof need);
        fz_need(g, last, need);
        put_walk(t, g, need, -1);
    }
    /* The next row's walks reuse the cache and the reduction scratch. */
    put(t, "__syncthreads();\n}\n}\n");
}

/* Load k's element strides over W (right-aligned, 0 where broadcast). */
static void fz_load_strides(const em_array *in, const fz_program *p,
                            int64_t *out) {
    int lead = p->ndim - in->ndim;
    for (int d = 0; d < p->ndim; d++) {
        int j = d - lead;
        out[d] = (j < 0 || in->shape[j] == 1) ? 0 : in->strides[j];
    }
}

/* The instruction before `before` that last wrote register `reg`, or -1. */
static int fz_def(const fz_program *p, int before, int reg) {
    for (int k = before - 1; k >= 0; k--)
        if (p->instr[k].dst == reg)
            return k;
    return -1;
}

static bool fz_is(const fz_instr *in, int kind, int family, int op) {
    return in->kind == kind && (kind != FZ_EW || in->family == family) &&
           in->op == op;
}

/* Whether the program is exactly the composed softmax of one input over
 * its last axis (exp(x - max) / sum, six instructions, one dtype, f32 or
 * f64), x row-contiguous in the program's wide shape: then *input is x's
 * index in node->inputs. */
static bool fz_softmax_input(const em_array *node, int *input) {
    const fz_program *p = node->params;
    const em_dtype d = node->dtype;
    if (p->ninstr != 6 || p->nred != 1 || p->mode == FZ_MODE_TILES ||
        (d != EM_F32 && d != EM_F64) || node->ndim != p->ndim)
        return false;
    for (int k = 0; k < p->ninstr; k++)
        if (p->instr[k].dtype != d || p->instr[k].kdtype != d)
            return false;
    for (int i = 0; i < p->ndim; i++)
        if (node->shape[i] != p->shape[i])
            return false;
    const int fin = p->ninstr - 1;
    const fz_instr *div = &p->instr[fin];
    if (!fz_is(div, FZ_EW, FZ_BINARY, EM_BINARY_divide) || div->dst != -1 ||
        div->narrow || div->nsrc != 2 || div->src_narrow != 2)
        return false;
    const int e = fz_def(p, fin, div->src[0]), s = fz_def(p, fin, div->src[1]);
    if (e < 0 || s < 0 ||
        !fz_is(&p->instr[e], FZ_EW, FZ_UNARY, EM_UNARY_exp) ||
        p->instr[e].src_narrow ||
        !fz_is(&p->instr[s], FZ_REDUCE, 0, EM_REDUCE_sum) ||
        fz_def(p, s, p->instr[s].src[0]) != e)
        return false;
    const int sub = fz_def(p, e, p->instr[e].src[0]);
    if (sub < 0 || !fz_is(&p->instr[sub], FZ_EW, FZ_BINARY,
                          EM_BINARY_subtract) ||
        p->instr[sub].nsrc != 2 || p->instr[sub].src_narrow != 2)
        return false;
    const int x = fz_def(p, sub, p->instr[sub].src[0]);
    const int mx = fz_def(p, sub, p->instr[sub].src[1]);
    if (x < 0 || mx < 0 || p->instr[x].kind != FZ_LOAD || p->instr[x].narrow ||
        p->instr[x].invariant ||
        !fz_is(&p->instr[mx], FZ_REDUCE, 0, EM_REDUCE_max))
        return false;
    const int xm = fz_def(p, mx, p->instr[mx].src[0]);
    if (xm < 0 || p->instr[xm].kind != FZ_LOAD ||
        p->instr[xm].op != p->instr[x].op)
        return false;
    const em_array *in = node->inputs[p->instr[x].op];
    if (in->dtype != d || in->ndim != p->ndim ||
        !em__is_row_contiguous(in->shape, in->strides, in->ndim))
        return false;
    for (int i = 0; i < p->ndim; i++)
        if (in->shape[i] != p->shape[i])
            return false;
    *input = p->instr[x].op;
    return true;
}

/* The softmax program through the fast kernel (see the header). */
static em_status fz_softmax_eval(em_array *node, const struct em_cuda_api *api,
                                 int ord, int input) {
    em_cuda_fast_rows job;
    memset(&job, 0, sizeof job);
    job.kind = 2;
    job.dtype = node->dtype;
    job.D = node->shape[node->ndim - 1];
    job.rows = node->size / job.D;
    job.x = em__data(node->inputs[input]);
    job.out = em__data(node);
    int rc = api->fast_rows(ord, &job);
    return rc ? em__gpu_fail(api, rc, "fused softmax") : EM_OK;
}

em_status em__gpu_fused_eval(em_array *node) {
    const fz_program *p = node->params;
    if (!em__fz_valid(node))
        return em__fail(EM_ERR_ARGUMENT, "fused: malformed program");
    const struct em_cuda_api *api;
    int ord;
    /* No donated input: a row's output may be written while other threads
     * still read that row's per-row inputs. */
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    int softmax_input;
    if (fz_softmax_input(node, &softmax_input))
        return fz_softmax_eval(node, api, ord, softmax_input);
    fz_gen *g = malloc(sizeof *g);
    if (!g)
        return em__fail(EM_ERR_OOM, "fused: out of memory");
    if (!fz_gen_init(g, p)) {
        free(g);
        return em__fail(EM_ERR_UNSUPPORTED,
                        "fused: the program reads more than %d inputs, too "
                        "many for one GPU kernel",
                        FZ_GPU_MAX_LOADS);
    }
    fz_text src = {0};
    put_source(&src, g);
    if (src.failed) {
        free(src.s);
        free(g);
        return em__fail(EM_ERR_OOM, "fused: out of memory");
    }
    em_cuda_fused job;
    memset(&job, 0, sizeof job);
    job.source = src.s;
    job.rows_mode = g->rows;
    job.ndim = p->ndim;
    job.nred = g->rows ? p->nred : 0;
    job.nloads = g->nloads;
    job.cache_wanted = g->cache_wanted;
    memcpy(job.shape, p->shape, sizeof(int64_t) * (size_t)p->ndim);
    for (int k = 0; k < p->ninstr; k++) {
        const fz_instr *in = &p->instr[k];
        if (in->kind != FZ_LOAD)
            continue;
        const em_array *a = node->inputs[in->op];
        int j = g->slot[k];
        job.load[j] = em__data(a);
        job.load_esize[j] = (int)em_dtype_size(a->dtype);
        job.load_wide[j] = !in->narrow;
        fz_load_strides(a, p, job.strides[j]);
    }
    job.out = em__data(node);
    job.out_esize = (int)em_dtype_size(node->dtype);
    job.out_wide = !p->instr[p->ninstr - 1].narrow;
    int rc = api->fused(ord, &job);
    free(src.s);
    free(g);
    return rc ? em__gpu_fail(api, rc, "fused") : EM_OK;
}

int64_t em_fused_kernels_compiled(void) {
    const struct em_cuda_api *api;
    int ord;
    if (!em_device_available(EM_DEVICE_GPU(0), NULL) ||
        em__gpu_backend(EM_DEVICE_GPU(0), &api, &ord) != EM_OK)
        return 0;
    return api->fused_compiles();
}
