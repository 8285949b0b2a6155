/*
 * elementwise.h — what the elementwise op family (unary.c, binary.c,
 * select.c, convert.c) shares: the strided N-operand iteration helper, the
 * per-dtype load/store dispatch, the dtype-class filters that decide which
 * (op, dtype) kernels are instantiated, and the scalar rules that several
 * files need (NaN-propagating max/min, integer sign tests).
 *
 * Kernels are written once per dtype CLASS as expression macros over the
 * compute value (INT: pred and u/s ints; FLT: real floats, which f16/bf16
 * compute as float; CPX: complex) and instantiated for every dtype of the
 * class from internal.h's tables. A kernel only ever sees contiguous
 * operands: em_ew_eval() feeds it contiguous runs straight from memory and
 * gathers strided or broadcast operands into small blocks first, so each
 * kernel is one simple loop the compiler can vectorise.
 */
#ifndef EMILY_OPS_ELEMENTWISE_H
#define EMILY_OPS_ELEMENTWISE_H

#include "internal.h"

/* ------------------------------------------------------------------------ */
/* Dtype-class filters                                                       */
/* ------------------------------------------------------------------------ */

/* EM_EW_<class>_<accepts>(code) keeps `code` when dtypes of <class> are in
 * the op's `accepts` set (emily_ops.h), so a kernel is only instantiated for
 * the dtypes its op accepts. NUMERIC keeps pred's INT instantiation: pred
 * shares u8's compute type, the op is rejected for pred at build time. */
#define EM_EW_INT_NUMERIC(...) __VA_ARGS__
#define EM_EW_INT_REAL(...) __VA_ARGS__
#define EM_EW_INT_FLOATING(...)
#define EM_EW_INT_REALFLOAT(...)
#define EM_EW_INT_INTEGER(...) __VA_ARGS__
#define EM_EW_INT_ANY(...) __VA_ARGS__
#define EM_EW_FLT_NUMERIC(...) __VA_ARGS__
#define EM_EW_FLT_REAL(...) __VA_ARGS__
#define EM_EW_FLT_FLOATING(...) __VA_ARGS__
#define EM_EW_FLT_REALFLOAT(...) __VA_ARGS__
#define EM_EW_FLT_INTEGER(...)
#define EM_EW_FLT_ANY(...) __VA_ARGS__
#define EM_EW_CPX_NUMERIC(...) __VA_ARGS__
#define EM_EW_CPX_REAL(...)
#define EM_EW_CPX_FLOATING(...) __VA_ARGS__
#define EM_EW_CPX_REALFLOAT(...)
#define EM_EW_CPX_INTEGER(...)
#define EM_EW_CPX_ANY(...) __VA_ARGS__

/* Run-time counterpart for validation messages. */
static inline const char *em_ew_accepts_text(const char *accepts) {
    if (!strcmp(accepts, "NUMERIC"))
        return "any dtype but pred";
    if (!strcmp(accepts, "REAL"))
        return "a non-complex dtype";
    if (!strcmp(accepts, "FLOATING"))
        return "a float or complex dtype";
    if (!strcmp(accepts, "REALFLOAT"))
        return "a real float dtype (f16, bf16, f32, f64)";
    if (!strcmp(accepts, "INTEGER"))
        return "an integer dtype (pred, u8..u64, s8..s64)";
    return "any dtype";
}

/* ------------------------------------------------------------------------ */
/* Per-dtype load/store, selected by a tag type                              */
/* ------------------------------------------------------------------------ */

/* em_ew_load_<sfx> / em_ew_store_<sfx>: a dtype's conversion between its
 * storage and compute types as functions, so that a kernel generated from a
 * dtype table can hand them to code expanded from the op lists (which cannot
 * see the table's columns, and cannot expand the table again). */
#define EM_EW_DEFINE_LOAD_STORE(E, sfx, S, C, L, ST)                           \
    static inline C em_ew_load_##sfx(S v) { return L(v); }                     \
    static inline S em_ew_store_##sfx(C v) { return ST(v); }
EM_DTYPES_ALL(EM_EW_DEFINE_LOAD_STORE)

/* Declares, inside a kernel for dtype `sfx`, the names the op rules use:
 * ew_stor, ew_comp, ew_dtype, ew_load(), ew_store(). The constant function
 * pointers are resolved and inlined at compile time. */
#define EM_EW_DTYPE_SCOPE(E, sfx, S, C)                                        \
    typedef S ew_stor;                                                         \
    typedef C ew_comp;                                                         \
    const em_dtype ew_dtype = E;                                               \
    ew_comp (*const ew_load)(ew_stor) = em_ew_load_##sfx;                      \
    ew_stor (*const ew_store)(ew_comp) = em_ew_store_##sfx;                    \
    (void)ew_dtype;                                                            \
    (void)ew_load;                                                             \
    (void)ew_store

/* ------------------------------------------------------------------------ */
/* Scalar rules shared by several files                                      */
/* ------------------------------------------------------------------------ */

/* Integer helpers written without comparisons against 0 (they would warn
 * "always false" for unsigned types under -Wextra). */
#define EM_EW_IS_SIGNED(T) (!__builtin_types_compatible_p(T, EM_UNSIGNED_OF(T)))
#define EM_EW_BITS(x) ((int)sizeof(x) * 8)
#define EM_EW_IS_NEG(x)                                                        \
    (EM_EW_IS_SIGNED(__typeof__(x)) &&                                         \
     ((EM_UNSIGNED_OF(__typeof__(x)))(x) >> (EM_EW_BITS(x) - 1)) != 0)
/* The unsigned type that arithmetic on T happens in: at least `unsigned
 * int`, so that u8/u16 products cannot overflow a promoted `int`. */
#define EM_EW_WIDE_U(T) __typeof__((EM_UNSIGNED_OF(T))0 + 0u)

/* Max/min: floats propagate NaN (either NaN operand gives NaN) and order
 * -0 below +0 (IEEE 754-2019 maximum/minimum), whatever the operand order. */
#define EM_EW_INT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define EM_EW_INT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define EM_EW_FLT_MAX(a, b)                                                    \
    ((a) != (a)                                 ? (a)                          \
     : (b) != (b)                               ? (b)                          \
     : (a) > (b) || ((a) == (b) && !signbit(a)) ? (a)                          \
                                                : (b))
#define EM_EW_FLT_MIN(a, b)                                                    \
    ((a) != (a)                                ? (a)                           \
     : (b) != (b)                              ? (b)                           \
     : (a) < (b) || ((a) == (b) && signbit(a)) ? (a)                           \
                                               : (b))

/* ------------------------------------------------------------------------ */
/* Strided N-operand iteration                                               */
/* ------------------------------------------------------------------------ */

/* A kernel computes out[i] = f(in[0][i], in[1][i], ...) for i < n, every
 * operand contiguous. `op` selects the operation (an op enum, or the other
 * dtype for conversions). */
typedef void (*em_ew_kernel)(int op, void *out, const void *const *in,
                             int64_t n);

#define EM_EW_MAX_IN 3
/* Elements per gathered block: 16-byte elements x 3 inputs = 12 KiB of
 * stack, comfortably inside L1 with the output block. */
#define EM_EW_BLOCK 256

typedef struct em_ew_job {
    em_ew_kernel kernel;
    int op;
    int nin;
    int ndim; /* >= 1 after collapsing */
    int64_t shape[EM_MAX_NDIM];
    /* Byte steps per operand and axis; operand 0 is the row-major output,
     * whose innermost step is always its element size. */
    int64_t step[EM_EW_MAX_IN + 1][EM_MAX_NDIM];
    char *base[EM_EW_MAX_IN + 1];
    int64_t esize[EM_EW_MAX_IN + 1];
} em_ew_job;

/* Copy `n` elements of `esize` bytes from a strided source into `dst`
 * (step 0 replicates one element: a broadcast operand). */
static inline void em_ew_gather(void *dst, const char *src, int64_t step,
                                int64_t esize, int64_t n) {
#define EM_EW_GATHER_CASE(bytes, T)                                            \
    case bytes: {                                                              \
        T *d = dst;                                                            \
        if (step == 0) {                                                       \
            T v;                                                               \
            memcpy(&v, src, sizeof v);                                         \
            for (int64_t i = 0; i < n; i++)                                    \
                d[i] = v;                                                      \
        } else {                                                               \
            for (int64_t i = 0; i < n; i++)                                    \
                memcpy(&d[i], src + i * step, sizeof(T));                      \
        }                                                                      \
        return;                                                                \
    }
    typedef struct {
        uint64_t lo, hi;
    } em_ew_16b;
    switch (esize) {
        EM_EW_GATHER_CASE(1, uint8_t)
        EM_EW_GATHER_CASE(2, uint16_t)
        EM_EW_GATHER_CASE(4, uint32_t)
        EM_EW_GATHER_CASE(8, uint64_t)
        EM_EW_GATHER_CASE(16, em_ew_16b)
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy((char *)dst + i * esize, src + i * step, (size_t)esize);
    }
#undef EM_EW_GATHER_CASE
}

/* One run of `n` elements along the innermost axis starting at p[]. */
static inline void em_ew_run_row(const em_ew_job *job, char *const *p,
                                 int64_t n) {
    int last = job->ndim - 1;
    bool direct = true;
    for (int k = 1; k <= job->nin; k++)
        direct = direct && job->step[k][last] == job->esize[k];
    if (direct) {
        job->kernel(job->op, p[0], (const void *const *)(p + 1), n);
        return;
    }
    _Alignas(64) unsigned char blocks[EM_EW_MAX_IN][EM_EW_BLOCK * 16];
    const void *in[EM_EW_MAX_IN];
    for (int64_t i = 0; i < n; i += EM_EW_BLOCK) {
        int64_t m = n - i < EM_EW_BLOCK ? n - i : EM_EW_BLOCK;
        for (int k = 1; k <= job->nin; k++) {
            int64_t step = job->step[k][last];
            if (step == job->esize[k]) {
                in[k - 1] = p[k] + i * step;
            } else {
                /* A broadcast operand is filled once per run. */
                if (step != 0 || i == 0)
                    em_ew_gather(blocks[k - 1], p[k] + i * step, step,
                                 job->esize[k], m);
                in[k - 1] = blocks[k - 1];
            }
        }
        job->kernel(job->op, p[0] + i * job->esize[0], in, m);
    }
}

/* em__parallel_for body: elements [begin, end) in row-major order. */
static inline void em_ew_range(void *ctx, int64_t begin, int64_t end) {
    const em_ew_job *job = ctx;
    int nd = job->ndim, nops = job->nin + 1;
    int64_t idx[EM_MAX_NDIM];
    int64_t rem = begin;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % job->shape[d];
        rem /= job->shape[d];
    }
    int64_t pos = begin;
    while (pos < end) {
        char *p[EM_EW_MAX_IN + 1];
        for (int k = 0; k < nops; k++) {
            int64_t off = 0;
            for (int d = 0; d < nd; d++)
                off += idx[d] * job->step[k][d];
            p[k] = job->base[k] + off;
        }
        int64_t n = job->shape[nd - 1] - idx[nd - 1];
        if (n > end - pos)
            n = end - pos;
        em_ew_run_row(job, p, n);
        pos += n;
        idx[nd - 1] += n;
        for (int d = nd - 1; d > 0 && idx[d] == job->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

/* Evaluate an elementwise node: give it a row-major buffer (donated by a
 * same-size input when possible) and run `kernel` over every element, its
 * inputs read through their strides and broadcast (right-aligned) to the
 * node's shape. `grain` is the parallel grain in elements. */
static inline em_status em_ew_eval(em_array *node, em_ew_kernel kernel, int op,
                                   int64_t grain) {
    int nin = node->ninputs;
    em_status st = em__alloc_output(node, node->inputs, nin);
    if (st != EM_OK)
        return st;
    if (node->size == 0)
        return EM_OK;

    int nd = node->ndim;
    int64_t bstrides[EM_EW_MAX_IN + 1][EM_MAX_NDIM];
    const int64_t *sin[EM_EW_MAX_IN + 1];
    for (int d = 0; d < nd; d++)
        bstrides[0][d] = node->strides[d];
    sin[0] = bstrides[0];
    for (int k = 0; k < nin; k++) {
        const em_array *in = node->inputs[k];
        int lead = nd - in->ndim;
        for (int d = 0; d < nd; d++) {
            int j = d - lead;
            bstrides[k + 1][d] =
                (j < 0 || in->shape[j] == 1) ? 0 : in->strides[j];
        }
        sin[k + 1] = bstrides[k + 1];
    }

    em_ew_job job;
    job.kernel = kernel;
    job.op = op;
    job.nin = nin;
    int64_t cstrides[EM_EW_MAX_IN + 1][EM_MAX_NDIM];
    job.ndim = em__collapse(nd, node->shape, nin + 1, sin, job.shape, cstrides);
    if (job.ndim == 0) { /* one element */
        job.ndim = 1;
        job.shape[0] = 1;
        for (int k = 0; k <= nin; k++)
            cstrides[k][0] = 1;
    }
    job.base[0] = em__data(node);
    job.esize[0] = (int64_t)em_dtype_size(node->dtype);
    for (int k = 0; k < nin; k++) {
        job.base[k + 1] = em__data(node->inputs[k]);
        job.esize[k + 1] = (int64_t)em_dtype_size(node->inputs[k]->dtype);
    }
    for (int k = 0; k <= nin; k++)
        for (int d = 0; d < job.ndim; d++)
            job.step[k][d] = cstrides[k][d] * job.esize[k];
    em__parallel_for(node->size, grain, em_ew_range, &job);
    return EM_OK;
}

/* Broadcast the shapes of `n` arrays (right-aligned) into out/nout. */
static inline em_status em_ew_broadcast(const char *op, em_array *const *arrays,
                                        int n, int64_t *out, int *nout) {
    *nout = arrays[0]->ndim;
    memcpy(out, arrays[0]->shape, sizeof(int64_t) * (size_t)*nout);
    for (int i = 1; i < n; i++) {
        int64_t tmp[EM_MAX_NDIM];
        int ntmp;
        em_status st = em__broadcast_shapes(op, out, *nout, arrays[i]->shape,
                                            arrays[i]->ndim, tmp, &ntmp);
        if (st != EM_OK)
            return st;
        memcpy(out, tmp, sizeof(int64_t) * (size_t)ntmp);
        *nout = ntmp;
    }
    return EM_OK;
}

#endif
