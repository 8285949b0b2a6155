/*
 * affine.c — MLX-style affine quantization (include/emily_quant.h): the
 * builders, their validation and the CPU kernels.
 *
 * em_quantize makes three nodes of one primitive, told apart by `part`
 * (codes, scales, biases): each recomputes the group statistics, a min/max
 * pass that costs little next to a one-off quantization, and it keeps every
 * node single-output.
 *
 * The quantized matmul never dequantizes the whole matrix:
 *   - M (rows of x) <= MATVEC_MAX_M: the packed words are streamed once.
 *     A row is cut into "units" — one word for 2/4/8 bits (32/bits codes at
 *     fixed shifts), `bits` words for 3/5/6 bits (32 codes) — and code j of
 *     every unit sits at the same bit offset. x is permuted once per call
 *     into xp[j][u] = x[u * codes_per_unit + j], so the inner loop runs over
 *     consecutive units with one shift, mask, convert and FMA per code:
 *     vector code that GCC/clang produce from plain C (EM_CLONES picks the
 *     AVX-512 / AVX2 / baseline clone at load time). Per group,
 *     sum_j x_j (q_j s + b) = s * sum_j x_j q_j + b * sum_j x_j, so the
 *     bias costs one FMA per group with the group sums of x precomputed.
 *     transpose=true splits output rows over the thread pool; transpose=
 *     false accumulates the rows of w into permuted column accumulators,
 *     split over column groups.
 *   - larger M: tiles of w are dequantized to f32 (on the thread pool) and
 *     multiplied by OpenBLAS sgemm.
 * x is f32 in the kernels (f16/bf16 widened once); accumulation is f32.
 */
#include "internal.h"
#include "ops/dot_cpu.h"

#include "quant/affine.h"

#include "emily_quant.h"

#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Validation                                                                */
/* ------------------------------------------------------------------------ */

static bool float_dtype(em_dtype d) {
    return d == EM_F32 || d == EM_F16 || d == EM_BF16;
}

static em_status check_format(const char *op, int group_size, int bits) {
    if (group_size != 32 && group_size != 64 && group_size != 128)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: group_size must be 32, 64 or 128, got %d", op,
                        group_size);
    if (bits < 2 || bits > 8 || bits == 7)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: bits must be 2, 3, 4, 5, 6 or 8, got %d", op,
                        bits);
    return EM_OK;
}

/* wq (..., R, W) u32 with scales and biases (..., R, G) of one float dtype,
 * G * group_size == W * 32 / bits. *len: the unpacked row length. */
static em_status check_packed(const char *op, const em_array *wq,
                              const em_array *scales, const em_array *biases,
                              int group_size, int bits, int64_t *len) {
    em_desc dw, ds, db;
    em_status st = check_format(op, group_size, bits);
    if (st != EM_OK)
        return st;
    if (wq->dtype != EM_U32 || wq->ndim < 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: packed weights %s must be u32 of rank >= 1", op,
                        em__describe(wq, &dw));
    if (!float_dtype(scales->dtype) || scales->dtype != biases->dtype)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: scales %s and biases %s must share one dtype, "
                        "f32, f16 or bf16",
                        op, em__describe(scales, &ds),
                        em__describe(biases, &db));
    bool same = scales->ndim == wq->ndim && biases->ndim == wq->ndim;
    for (int i = 0; same && i < wq->ndim; i++) {
        same = scales->shape[i] == biases->shape[i];
        if (i < wq->ndim - 1)
            same = same && scales->shape[i] == wq->shape[i];
    }
    const int64_t words = wq->shape[wq->ndim - 1];
    if (same && (words * 32 % bits != 0 ||
                 scales->shape[wq->ndim - 1] * group_size != words * 32 / bits))
        same = false;
    if (!same)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: scales %s and biases %s do not match packed "
                        "weights %s with group_size %d and bits %d (expected "
                        "the leading axes of the weights and a last axis of "
                        "words * 32 / bits / group_size)",
                        op, em__describe(scales, &ds),
                        em__describe(biases, &db), em__describe(wq, &dw),
                        group_size, bits);
    *len = words * 32 / bits;
    return EM_OK;
}

/* a itself (a new reference) when row-contiguous, else a contiguous copy:
 * the kernels read rows in place. */
static em_status row_major(em_array *a, em_array **out) {
    if (a->row_contiguous) {
        em_array_retain(a);
        *out = a;
        return EM_OK;
    }
    return em_contiguous(a, out);
}

/* ------------------------------------------------------------------------ */
/* Rows in f32, codes in and out of the bit stream                           */
/* ------------------------------------------------------------------------ */

/* Dequantization rounds q * s before adding b (MLX's arithmetic, and the
 * GPU's): no FMA contraction there. GCC contracts across statements under
 * its default -ffp-contract=fast; clang only within an expression. */
#if defined(__clang__) || !defined(__GNUC__)
#define EM_NO_CONTRACT
#else
#define EM_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#endif

/* f32 <-> storage rows of the three float dtypes, one definition. */
#define DEFINE_ROW_IO(E, sfx, S, C, LOAD, STORE)                               \
    static void load_row_##sfx(const void *src, float *dst, int64_t n) {       \
        const S *s = src;                                                      \
        for (int64_t i = 0; i < n; i++)                                        \
            dst[i] = (float)LOAD(s[i]);                                        \
    }                                                                          \
    static void store_row_##sfx(const float *src, void *dst, int64_t n) {      \
        S *d = dst;                                                            \
        for (int64_t i = 0; i < n; i++)                                        \
            d[i] = STORE((C)src[i]);                                           \
    }                                                                          \
    /* q * s rounded to the dtype, plus b, rounded again (MLX's arithmetic    \
     * in the dtype; exact in f32 for these formats, see the header). */      \
    static EM_NO_CONTRACT void dequant_row_##sfx(const uint8_t *q, const float *s,            \
                                  const float *b, int gs, void *dst,           \
                                  int64_t n) {                                 \
        S *d = dst;                                                            \
        for (int64_t i = 0; i < n; i++) {                                      \
            float t = (float)LOAD(STORE((C)((float)q[i] * s[i / gs])));        \
            d[i] = STORE((C)(t + b[i / gs]));                                  \
        }                                                                      \
    }
/* The dtypes quantization takes (EM_DTYPES_REALFLOAT without f64). */
#define QUANT_DTYPES(X)                                                        \
    X(EM_F16, f16, em_f16_t, float, em_f16_to_f32, em_f32_to_f16)              \
    X(EM_BF16, bf16, em_bf16_t, float, em_bf16_to_f32, em_f32_to_bf16)         \
    X(EM_F32, f32, float, float, EM_LOAD_ID, EM_STORE_ID)
QUANT_DTYPES(DEFINE_ROW_IO)

typedef struct row_io {
    void (*load)(const void *, float *, int64_t);
    void (*store)(const float *, void *, int64_t);
    void (*dequant)(const uint8_t *, const float *, const float *, int, void *,
                    int64_t);
} row_io;

static row_io io_of(em_dtype d) {
    switch (d) {
    case EM_F16:
        return (row_io){load_row_f16, store_row_f16, dequant_row_f16};
    case EM_BF16:
        return (row_io){load_row_bf16, store_row_bf16, dequant_row_bf16};
    default:
        return (row_io){load_row_f32, store_row_f32, dequant_row_f32};
    }
}

/* Codes of a row of n values (n * bits a multiple of 32). */
static void unpack_codes(const uint32_t *w, int bits, int64_t n, uint8_t *q) {
    const uint32_t mask = (1u << bits) - 1;
    for (int64_t i = 0; i < n; i++) {
        const int64_t bit = i * bits;
        const int64_t wi = bit >> 5;
        const int s = (int)(bit & 31);
        uint32_t v = w[wi] >> s;
        if (s + bits > 32)
            v |= w[wi + 1] << (32 - s);
        q[i] = (uint8_t)(v & mask);
    }
}

static void pack_codes(const uint8_t *q, int bits, int64_t n, uint32_t *w) {
    memset(w, 0, (size_t)(n * bits / 32) * sizeof *w);
    for (int64_t i = 0; i < n; i++) {
        const int64_t bit = i * bits;
        const int64_t wi = bit >> 5;
        const int s = (int)(bit & 31);
        w[wi] |= (uint32_t)q[i] << s;
        if (s + bits > 32)
            w[wi + 1] |= (uint32_t)q[i] >> (32 - s);
    }
}

/* One group's scale, bias and codes, by MLX's definition (see the header;
 * the f32 operations are the same in the same order, so the results are
 * the same bits). */
static void quantize_group(const float *v, int gs, int bits, float *scale,
                           float *bias, uint8_t *q) {
    float lo = v[0], hi = v[0];
    for (int i = 1; i < gs; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    const float n_bins = (float)((1 << bits) - 1);
    float s = (hi - lo) / n_bins;
    s = s > 1e-7f ? s : 1e-7f;
    const bool low_edge = fabsf(lo) > fabsf(hi);
    if (!low_edge)
        s = -s;
    const float edge = low_edge ? lo : hi;
    const float q0 = rintf(edge / s);
    float b = 0.0f;
    if (q0 != 0.0f) {
        s = edge / q0;
        b = edge;
    }
    for (int i = 0; i < gs; i++) {
        float c = rintf((v[i] - b) / s);
        c = c < 0.0f ? 0.0f : (c > n_bins ? n_bins : c);
        q[i] = (uint8_t)c;
    }
    *scale = s;
    *bias = b;
}

/* ------------------------------------------------------------------------ */
/* quantize                                                                  */
/* ------------------------------------------------------------------------ */

enum { PART_CODES = 0, PART_SCALES = 1, PART_BIASES = 2 };

typedef struct quantize_job {
    const em_array *w;
    em_array *node;
    const em_quant_params *p;
    int64_t K;
} quantize_job;

static void quantize_rows(void *ctx, int64_t r0, int64_t r1) {
    const quantize_job *jb = ctx;
    const em_quant_params *p = jb->p;
    const int64_t K = jb->K, G = K / p->group_size;
    const size_t es = em_dtype_size(jb->w->dtype);
    const row_io io = io_of(jb->w->dtype);
    float *v = malloc((size_t)K * sizeof *v + 2 * (size_t)G * sizeof(float));
    uint8_t *q = malloc((size_t)K);
    if (!v || !q) { /* the caller checked a probe allocation; see eval */
        free(v);
        free(q);
        return;
    }
    float *s = v + K, *b = s + G;
    const char *src = em__data(jb->w);
    char *dst = em__data(jb->node);
    for (int64_t r = r0; r < r1; r++) {
        io.load(src + (size_t)(r * K) * es, v, K);
        for (int64_t g = 0; g < G; g++)
            quantize_group(v + g * p->group_size, p->group_size, p->bits,
                           &s[g], &b[g], q + g * p->group_size);
        if (p->part == PART_CODES)
            pack_codes(q, p->bits, K,
                       (uint32_t *)dst + r * (K * p->bits / 32));
        else
            io.store(p->part == PART_SCALES ? s : b, dst + (size_t)(r * G) * es,
                     G);
    }
    free(v);
    free(q);
}

static em_status quantize_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_array *w = node->inputs[0];
    const int64_t K = w->shape[w->ndim - 1];
    /* The workers cannot fail: check that their buffers can be had. */
    void *probe = malloc((size_t)K * 13);
    if (!probe)
        return em__fail(EM_ERR_OOM, "quantize: out of memory for a row of %lld",
                        (long long)K);
    free(probe);
    quantize_job jb = {w, node, node->params, K};
    em__parallel_units(w->size / K, K * 4, quantize_rows, &jb);
    return EM_OK;
}

static const em_prim quantize_prim = {"quantize", quantize_eval, NULL,
                                      em__gpu_quantize_eval};

em_status em_quantize(em_array *w, int group_size, int bits, em_array **wq,
                      em_array **scales, em_array **biases) {
    em_array **outs[3] = {wq, scales, biases};
    for (int i = 0; i < 3; i++)
        if (outs[i])
            *outs[i] = NULL;
    if (!w || !wq || !scales || !biases)
        return em__fail(EM_ERR_ARGUMENT, "quantize: NULL argument");
    em_status st = check_format("quantize", group_size, bits);
    if (st != EM_OK)
        return st;
    em_desc dw;
    if (!float_dtype(w->dtype) || w->ndim < 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "quantize: w %s must be f32, f16 or bf16 of rank >= 1",
                        em__describe(w, &dw));
    const int64_t K = w->shape[w->ndim - 1];
    if (K == 0 || K % group_size != 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "quantize: the last axis of w %s must be a positive "
                        "multiple of group_size %d",
                        em__describe(w, &dw), group_size);
    em_array *src;
    if ((st = row_major(w, &src)) != EM_OK)
        return st;
    int64_t shape[EM_MAX_NDIM];
    memcpy(shape, w->shape, sizeof(int64_t) * (size_t)w->ndim);
    for (int part = 0; part < 3 && st == EM_OK; part++) {
        em_quant_params p = {group_size, bits, 0, part};
        shape[w->ndim - 1] =
            part == PART_CODES ? K * bits / 32 : K / group_size;
        st = em__node_new_params(&quantize_prim,
                                 part == PART_CODES ? EM_U32 : w->dtype, shape,
                                 w->ndim, &src, 1, &p, sizeof p, outs[part]);
    }
    em_array_release(src);
    if (st != EM_OK)
        for (int i = 0; i < 3; i++) {
            em_array_release(*outs[i]);
            *outs[i] = NULL;
        }
    return st;
}

/* ------------------------------------------------------------------------ */
/* dequantize                                                                */
/* ------------------------------------------------------------------------ */

typedef struct dequant_job {
    const em_array *wq, *scales, *biases;
    em_array *node;
    const em_quant_params *p;
    int64_t K;
} dequant_job;

static void dequant_rows(void *ctx, int64_t r0, int64_t r1) {
    const dequant_job *jb = ctx;
    const int gs = jb->p->group_size, bits = jb->p->bits;
    const int64_t K = jb->K, G = K / gs, W = K * bits / 32;
    const row_io in = io_of(jb->scales->dtype), out = io_of(jb->node->dtype);
    const size_t ses = em_dtype_size(jb->scales->dtype);
    const size_t oes = em_dtype_size(jb->node->dtype);
    float *s = malloc(2 * (size_t)G * sizeof *s);
    uint8_t *q = malloc((size_t)K);
    if (!s || !q) {
        free(s);
        free(q);
        return;
    }
    float *b = s + G;
    const uint32_t *wq = em__data(jb->wq);
    const char *sp = em__data(jb->scales), *bp = em__data(jb->biases);
    char *dst = em__data(jb->node);
    for (int64_t r = r0; r < r1; r++) {
        in.load(sp + (size_t)(r * G) * ses, s, G);
        in.load(bp + (size_t)(r * G) * ses, b, G);
        unpack_codes(wq + r * W, bits, K, q);
        out.dequant(q, s, b, gs, dst + (size_t)(r * K) * oes, K);
    }
    free(s);
    free(q);
}

static em_status dequantize_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const int64_t K = node->shape[node->ndim - 1];
    void *probe = malloc((size_t)K * 2);
    if (!probe)
        return em__fail(EM_ERR_OOM,
                        "dequantize: out of memory for a row of %lld",
                        (long long)K);
    free(probe);
    dequant_job jb = {node->inputs[0], node->inputs[1], node->inputs[2],
                      node,            node->params,    K};
    em__parallel_units(node->size / K, K * 2, dequant_rows, &jb);
    return EM_OK;
}

static const em_prim dequantize_prim = {"dequantize", dequantize_eval, NULL,
                                        em__gpu_dequantize_eval};

/* Contiguous copies of the three packed inputs (new references). */
static em_status packed_inputs(em_array *wq, em_array *scales,
                               em_array *biases, em_array *ins[3]) {
    em_array *src[3] = {wq, scales, biases};
    em_status st = EM_OK;
    for (int i = 0; i < 3; i++) {
        ins[i] = NULL;
        if (st == EM_OK)
            st = row_major(src[i], &ins[i]);
    }
    if (st != EM_OK)
        for (int i = 0; i < 3; i++) {
            em_array_release(ins[i]);
            ins[i] = NULL;
        }
    return st;
}

em_status em_dequantize(em_array *wq, em_array *scales, em_array *biases,
                        int group_size, int bits, em_dtype dtype,
                        em_array **out) {
    if (out)
        *out = NULL;
    if (!wq || !scales || !biases || !out)
        return em__fail(EM_ERR_ARGUMENT, "dequantize: NULL argument");
    int64_t K;
    em_status st =
        check_packed("dequantize", wq, scales, biases, group_size, bits, &K);
    if (st != EM_OK)
        return st;
    if (!float_dtype(dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "dequantize: the output dtype must be f32, f16 or "
                        "bf16, got %s",
                        em_dtype_name(dtype) ? em_dtype_name(dtype) : "?");
    int64_t shape[EM_MAX_NDIM];
    memcpy(shape, wq->shape, sizeof(int64_t) * (size_t)wq->ndim);
    shape[wq->ndim - 1] = K;
    if ((st = em__check_shape("dequantize", shape, wq->ndim, dtype, NULL)) !=
        EM_OK)
        return st;
    em_array *ins[3];
    if ((st = packed_inputs(wq, scales, biases, ins)) != EM_OK)
        return st;
    em_quant_params p = {group_size, bits, 0, 0};
    st = em__node_new_params(&dequantize_prim, dtype, shape, wq->ndim, ins, 3,
                             &p, sizeof p, out);
    for (int i = 0; i < 3; i++)
        em_array_release(ins[i]);
    return st;
}

/* ------------------------------------------------------------------------ */
/* quantized matmul: the matrix-vector kernels                               */
/* ------------------------------------------------------------------------ */

/* Units (see the file comment): codes per unit and words per unit. */
static int codes_per_unit(int bits) { return 32 % bits == 0 ? 32 / bits : 32; }
static int words_per_unit(int bits) { return 32 % bits == 0 ? 1 : bits; }

/* t[u] = sum_j code(u, j) * xp[j * xstride + u] for nu consecutive units
 * from `words`, with BITS known at compile time (so the shifts and masks
 * are constants when the loop over j unrolls). */
#define UNIT_LANES 16 /* units summed together in registers */
#define DEFINE_UNIT_DOTS(BITS)                                                 \
    static inline float unit_code_##BITS(const uint32_t *w, int j) {           \
        const int bit = j * BITS, wo = bit >> 5, s = bit & 31;                 \
        uint32_t v = w[wo] >> s;                                               \
        if (s + BITS > 32)                                                     \
            v |= w[wo + 1] << (32 - s);                                        \
        return (float)(int32_t)(v & ((1u << BITS) - 1));                       \
    }                                                                          \
    static EM_CLONES void unit_dots_##BITS(                                    \
        const uint32_t *restrict words, const float *restrict xp,              \
        int64_t xstride, int64_t nu, float *restrict t) {                      \
        enum {                                                                 \
            CPU_ = 32 % BITS == 0 ? 32 / BITS : 32,                            \
            WPU_ = 32 % BITS == 0 ? 1 : BITS                                   \
        };                                                                     \
        int64_t u0 = 0;                                                        \
        /* UNIT_LANES units at a time: the sums stay in vector registers      \
         * across the codes of a unit (j, unrolled: constant shifts). */       \
        for (; u0 + UNIT_LANES <= nu; u0 += UNIT_LANES) {                      \
            float acc[UNIT_LANES] = {0};                                       \
            for (int j = 0; j < CPU_; j++) {                                   \
                const float *restrict xj = xp + j * xstride + u0;              \
                for (int l = 0; l < UNIT_LANES; l++)                           \
                    acc[l] += unit_code_##BITS(words + (u0 + l) * WPU_, j) *   \
                              xj[l];                                           \
            }                                                                  \
            for (int l = 0; l < UNIT_LANES; l++)                               \
                t[u0 + l] = acc[l];                                            \
        }                                                                      \
        for (; u0 < nu; u0++) {                                                \
            float acc = 0.0f;                                                  \
            for (int j = 0; j < CPU_; j++)                                     \
                acc += unit_code_##BITS(words + u0 * WPU_, j) *                \
                       xp[j * xstride + u0];                                   \
            t[u0] = acc;                                                       \
        }                                                                      \
    }                                                                          \
    /* acc[j * astride + u] += code(u, j) * xs[u] for nu units: a row of a    \
     * (K, N) weight into permuted column accumulators. */                    \
    static EM_CLONES void unit_axpy_##BITS(                                    \
        const uint32_t *restrict words, const float *restrict xs, int64_t nu,  \
        float *restrict acc, int64_t astride) {                                \
        enum {                                                                 \
            CPU_ = 32 % BITS == 0 ? 32 / BITS : 32,                            \
            WPU_ = 32 % BITS == 0 ? 1 : BITS                                   \
        };                                                                     \
        const uint32_t mask = (1u << BITS) - 1;                                \
        for (int j = 0; j < CPU_; j++) {                                       \
            const int bit = j * BITS, wo = bit >> 5, s = bit & 31;             \
            float *restrict aj = acc + j * astride;                            \
            const uint32_t *restrict wj = words + wo;                          \
            if (s + BITS > 32) {                                               \
                for (int64_t u = 0; u < nu; u++) {                             \
                    uint32_t v = (wj[u * WPU_] >> s) |                         \
                                 (wj[u * WPU_ + 1] << (32 - s));               \
                    aj[u] += (float)(int32_t)(v & mask) * xs[u];               \
                }                                                              \
            } else {                                                           \
                for (int64_t u = 0; u < nu; u++)                               \
                    aj[u] += (float)(int32_t)((wj[u * WPU_] >> s) & mask) *    \
                             xs[u];                                            \
            }                                                                  \
        }                                                                      \
    }
DEFINE_UNIT_DOTS(2)
DEFINE_UNIT_DOTS(3)
DEFINE_UNIT_DOTS(4)
DEFINE_UNIT_DOTS(5)
DEFINE_UNIT_DOTS(6)
DEFINE_UNIT_DOTS(8)

typedef void (*unit_dots_fn)(const uint32_t *, const float *, int64_t, int64_t,
                             float *);
typedef void (*unit_axpy_fn)(const uint32_t *, const float *, int64_t, float *,
                             int64_t);
static const unit_dots_fn unit_dots[9] = {
    [2] = unit_dots_2, [3] = unit_dots_3, [4] = unit_dots_4,
    [5] = unit_dots_5, [6] = unit_dots_6, [8] = unit_dots_8};
static const unit_axpy_fn unit_axpy[9] = {
    [2] = unit_axpy_2, [3] = unit_axpy_3, [4] = unit_axpy_4,
    [5] = unit_axpy_5, [6] = unit_axpy_6, [8] = unit_axpy_8};

/* Rows of x at most this many take the matrix-vector kernels. */
#define MATVEC_MAX_M 8
/* Units per chunk of the transpose=true kernel (a multiple of the units
 * of any group: group_size / codes_per_unit <= 32). */
#define UNIT_CHUNK 64

typedef struct qmm_job {
    const float *x; /* (M, K) f32 */
    const uint32_t *wq;
    const void *scales, *biases; /* (rows of w, groups), x's dtype */
    row_io io;                   /* x's dtype <-> f32 */
    size_t es;                   /* bytes of x's dtype */
    float *out;                  /* (M, N) f32 */
    const float *xp;             /* (M, codes per unit, units) permuted x */
    const float *xsum;           /* (M, groups of K) group sums of x */
    float *acc, *bacc;           /* transpose=false accumulators */
    int64_t M, N, K;
    int gs, bits;
} qmm_job;

/* Scales and biases of weight row r as f32 (G of each): in place for
 * f32, else widened into buf (2 * G floats). */
static void load_sb(const qmm_job *jb, int64_t r, int64_t G, float *buf,
                    const float **s, const float **b) {
    const char *sp = (const char *)jb->scales + (size_t)(r * G) * jb->es;
    const char *bp = (const char *)jb->biases + (size_t)(r * G) * jb->es;
    if (jb->es == 4) {
        *s = (const float *)(const void *)sp;
        *b = (const float *)(const void *)bp;
        return;
    }
    jb->io.load(sp, buf, G);
    jb->io.load(bp, buf + G, G);
    *s = buf;
    *b = buf + G;
}

/* Room for one row's scales and biases in f32: on the stack when small. */
#define SB_STACK 1024

/* transpose=true, output rows [n0, n1): w (N, K). */
static void matvec_rows(void *ctx, int64_t n0, int64_t n1) {
    const qmm_job *jb = ctx;
    const int cpu = codes_per_unit(jb->bits), wpu = words_per_unit(jb->bits);
    const int64_t K = jb->K, U = K / cpu, G = K / jb->gs, W = K * jb->bits / 32;
    const int64_t upg = jb->gs / cpu;
    const unit_dots_fn dots = unit_dots[jb->bits];
    float t[UNIT_CHUNK], sb_stack[2 * SB_STACK];
    float *sb = G <= SB_STACK ? sb_stack : malloc(2 * (size_t)G * sizeof *sb);
    if (!sb)
        return; /* qmm_eval checked that this much can be had */
    for (int64_t n = n0; n < n1; n++) {
        const uint32_t *row = jb->wq + n * W;
        const float *s, *b;
        load_sb(jb, n, G, sb, &s, &b);
        float acc[MATVEC_MAX_M] = {0};
        for (int64_t u0 = 0; u0 < U; u0 += UNIT_CHUNK) {
            const int64_t nu = U - u0 < UNIT_CHUNK ? U - u0 : UNIT_CHUNK;
            for (int64_t m = 0; m < jb->M; m++) {
                dots(row + u0 * wpu, jb->xp + m * K + u0, U, nu, t);
                const float *xs = jb->xsum + m * G;
                for (int64_t g = u0 / upg; g < (u0 + nu) / upg; g++) {
                    float d = 0.0f;
                    for (int64_t u = g * upg - u0; u < (g + 1) * upg - u0; u++)
                        d += t[u];
                    acc[m] += s[g] * d + b[g] * xs[g];
                }
            }
        }
        for (int64_t m = 0; m < jb->M; m++)
            jb->out[m * jb->N + n] = acc[m];
    }
    if (sb != sb_stack)
        free(sb);
}

/* transpose=false, column groups [g0, g1): w (K, N) quantized along N.
 * acc (M, codes per unit, units of N) is permuted; bacc (M, groups of N). */
static void matvec_cols(void *ctx, int64_t g0, int64_t g1) {
    const qmm_job *jb = ctx;
    const int cpu = codes_per_unit(jb->bits), wpu = words_per_unit(jb->bits);
    const int64_t N = jb->N, U = N / cpu, G = N / jb->gs, W = N * jb->bits / 32;
    const int64_t upg = jb->gs / cpu, u0 = g0 * upg, nu = (g1 - g0) * upg;
    const unit_axpy_fn axpy = unit_axpy[jb->bits];
    float xs[UNIT_CHUNK], sb_stack[2 * SB_STACK];
    float *sb = G <= SB_STACK ? sb_stack : malloc(2 * (size_t)G * sizeof *sb);
    if (!sb)
        return;
    for (int64_t k = 0; k < jb->K; k++) {
        const uint32_t *row = jb->wq + k * W;
        const float *s, *b;
        load_sb(jb, k, G, sb, &s, &b);
        for (int64_t m = 0; m < jb->M; m++) {
            const float xv = jb->x[m * jb->K + k];
            for (int64_t g = g0; g < g1; g++)
                jb->bacc[m * G + g] += xv * b[g];
            for (int64_t c0 = 0; c0 < nu; c0 += UNIT_CHUNK) {
                const int64_t nc = nu - c0 < UNIT_CHUNK ? nu - c0 : UNIT_CHUNK;
                for (int64_t u = 0; u < nc; u++)
                    xs[u] = xv * s[(u0 + c0 + u) / upg];
                axpy(row + (u0 + c0) * wpu, xs, nc, jb->acc + m * N + u0 + c0,
                     U);
            }
        }
    }
    for (int64_t m = 0; m < jb->M; m++)
        for (int64_t u = u0; u < u0 + nu; u++)
            for (int j = 0; j < cpu; j++)
                jb->out[m * N + u * cpu + j] =
                    jb->acc[m * N + j * U + u] + jb->bacc[m * G + u / upg];
    if (sb != sb_stack)
        free(sb);
}

/* ------------------------------------------------------------------------ */
/* quantized matmul: the tiled path                                          */
/* ------------------------------------------------------------------------ */

typedef struct tile_job {
    const qmm_job *q;
    float *tile;
    int64_t r0, len; /* first weight row, unpacked row length */
} tile_job;

/* Rows [r0 + a, r0 + b) of w dequantized to f32 (q * s + b, unrounded). */
static void dequant_tile(void *ctx, int64_t a, int64_t b) {
    const tile_job *jb = ctx;
    const qmm_job *q = jb->q;
    const int64_t L = jb->len, G = L / q->gs, W = L * q->bits / 32;
    uint8_t *codes = malloc((size_t)L + 2 * (size_t)G * sizeof(float));
    if (!codes)
        return; /* qmm_eval checked that this much can be had */
    float *sb = (float *)(void *)(codes + ((size_t)L + 3) / 4 * 4);
    for (int64_t r = a; r < b; r++) {
        const int64_t row = jb->r0 + r;
        float *dst = jb->tile + r * L;
        const float *sc, *bi;
        load_sb(q, row, G, sb, &sc, &bi);
        unpack_codes(q->wq + row * W, q->bits, L, codes);
        for (int64_t c = 0; c < L; c++)
            dst[c] = (float)codes[c] * sc[c / q->gs] + bi[c / q->gs];
    }
    free(codes);
}

/* f32 elements of a dequantized tile. */
#define TILE_ELEMS ((int64_t)1 << 20)

static void tiled(const qmm_job *jb, bool transpose, float *tile) {
    const int64_t M = jb->M, N = jb->N, K = jb->K;
    /* transpose: tiles of rows of w (N, K); else of rows of w (K, N). */
    const int64_t rows = transpose ? N : K, len = transpose ? K : N;
    int64_t rt = TILE_ELEMS / len;
    rt = rt < 1 ? 1 : (rt > rows ? rows : rt);
    for (int64_t r0 = 0; r0 < rows; r0 += rt) {
        const int64_t nr = rows - r0 < rt ? rows - r0 : rt;
        tile_job tj = {jb, tile, r0, len};
        em__parallel_units(nr, len, dequant_tile, &tj);
        if (transpose)
            em__gemm_one(em__gemm_f32, sizeof(float), false, true, M, nr, K,
                         jb->x, K, tile, K, false, jb->out + r0, N);
        else
            em__gemm_one(em__gemm_f32, sizeof(float), false, false, M, N, nr,
                         jb->x + r0, K, tile, N, r0 != 0, jb->out, N);
    }
}

/* ------------------------------------------------------------------------ */
/* quantized matmul: eval and builder                                        */
/* ------------------------------------------------------------------------ */

static em_status qmm_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_quant_params *p = node->params;
    const em_array *x = node->inputs[0], *wq = node->inputs[1];
    const em_array *sc = node->inputs[2], *bi = node->inputs[3];
    const bool transpose = p->transpose != 0;
    const int64_t K = x->shape[x->ndim - 1], M = x->size / K;
    const int64_t N = node->shape[node->ndim - 1];
    const int cpu = codes_per_unit(p->bits);
    const row_io io = io_of(x->dtype);
    const bool small = M <= MATVEC_MAX_M, is_f32 = x->dtype == EM_F32;

    /* One allocation for the f32 temporaries (x, out unless f32, and the
     * path's own); the weights' scales are read in place, row by row. */
    const int64_t n_x = is_f32 ? 0 : M * K, n_out = is_f32 ? 0 : M * N;
    int64_t n_extra;
    if (small && transpose)
        n_extra = M * K + M * (K / p->group_size); /* xp, xsum */
    else if (small)
        n_extra = M * N + M * (N / p->group_size); /* acc, bacc */
    else
        n_extra = TILE_ELEMS > (transpose ? K : N) ? TILE_ELEMS
                                                   : (transpose ? K : N);
    float *mem = malloc((size_t)(n_x + n_out + n_extra) * sizeof *mem);
    /* and what a worker allocates (a row's scales, codes): fail here */
    void *probe = malloc((size_t)(K + N) * 12);
    const bool have = mem && probe;
    free(probe);
    if (!have) {
        free(mem);
        return em__fail(EM_ERR_OOM,
                        "quantized_matmul: out of memory for the f32 "
                        "temporaries of x (%lld x %lld)",
                        (long long)M, (long long)K);
    }
    float *extra = mem + n_x + n_out;
    const float *xf = is_f32 ? em__data(x) : mem;
    float *out = is_f32 ? em__data(node) : mem + n_x;
    if (!is_f32)
        io.load(em__data(x), mem, n_x);

    qmm_job jb = {xf,
                  em__data(wq),
                  em__data(sc),
                  em__data(bi),
                  io,
                  em_dtype_size(x->dtype),
                  out,
                  NULL,
                  NULL,
                  NULL,
                  NULL,
                  M,
                  N,
                  K,
                  p->group_size,
                  p->bits};
    if (small && transpose) {
        float *xp = extra, *xsum = extra + M * K;
        const int64_t U = K / cpu, GK = K / p->group_size;
        for (int64_t m = 0; m < M; m++) {
            for (int64_t u = 0; u < U; u++)
                for (int j = 0; j < cpu; j++)
                    xp[m * K + j * U + u] = xf[m * K + u * cpu + j];
            for (int64_t g = 0; g < GK; g++) {
                float t = 0.0f;
                for (int i = 0; i < p->group_size; i++)
                    t += xf[m * K + g * p->group_size + i];
                xsum[m * GK + g] = t;
            }
        }
        jb.xp = xp;
        jb.xsum = xsum;
        em__parallel_units(N, K * M, matvec_rows, &jb);
    } else if (small) {
        memset(extra, 0, (size_t)(M * N + M * (N / p->group_size)) * 4);
        jb.acc = extra;
        jb.bacc = extra + M * N;
        em__parallel_units(N / p->group_size, K * M * p->group_size,
                           matvec_cols, &jb);
    } else {
        tiled(&jb, transpose, extra);
    }
    if (!is_f32)
        io.store(out, em__data(node), M * N);
    free(mem);
    return EM_OK;
}

static const em_prim qmm_prim = {"quantized_matmul", qmm_eval,
                                 em__vjp_quantized_matmul,
                                 em__gpu_quantized_matmul_eval};

em_status em_quantized_matmul(em_array *x, em_array *wq, em_array *scales,
                              em_array *biases, bool transpose,
                              int group_size, int bits, em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !wq || !scales || !biases || !out)
        return em__fail(EM_ERR_ARGUMENT, "quantized_matmul: NULL argument");
    int64_t len;
    em_status st = check_packed("quantized_matmul", wq, scales, biases,
                                group_size, bits, &len);
    if (st != EM_OK)
        return st;
    em_desc dx, dw, ds;
    if (wq->ndim != 2)
        return em__fail(EM_ERR_ARGUMENT,
                        "quantized_matmul: packed weights %s must be 2-D "
                        "(batched weights are not supported)",
                        em__describe(wq, &dw));
    if (x->ndim < 1 || x->dtype != scales->dtype)
        return em__fail(EM_ERR_ARGUMENT,
                        "quantized_matmul: x %s must have rank >= 1 and the "
                        "dtype of the scales %s",
                        em__describe(x, &dx), em__describe(scales, &ds));
    /* transpose: w (N, K) with K = the unpacked length; else w (K, N). */
    const int64_t K = transpose ? len : wq->shape[0];
    const int64_t N = transpose ? wq->shape[0] : len;
    if (x->shape[x->ndim - 1] != K || K == 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "quantized_matmul: the last axis of x %s must be %lld, "
                        "the input size of the weights %s (bits %d, "
                        "transpose %s)",
                        em__describe(x, &dx), (long long)K,
                        em__describe(wq, &dw), bits,
                        transpose ? "true" : "false");
    int64_t shape[EM_MAX_NDIM];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 1] = N;
    if ((st = em__check_shape("quantized_matmul", shape, x->ndim, x->dtype,
                              NULL)) != EM_OK)
        return st;
    em_array *ins[4];
    if ((st = packed_inputs(wq, scales, biases, ins + 1)) != EM_OK)
        return st;
    if ((st = row_major(x, &ins[0])) != EM_OK) {
        for (int i = 1; i < 4; i++)
            em_array_release(ins[i]);
        return st;
    }
    em_quant_params p = {group_size, bits, transpose ? 1 : 0, 0};
    st = em__node_new_params(&qmm_prim, x->dtype, shape, x->ndim, ins, 4, &p,
                             sizeof p, out);
    for (int i = 0; i < 4; i++)
        em_array_release(ins[i]);
    return st;
}
