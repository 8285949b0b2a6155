/*
 * ggml_ops.c — em_ggml_dequantize and em_ggml_matmul's builders
 * (include/emily_ggml.h), and the CPU dequantization kernel.
 *
 * Dequantization must match ggml's reference bit for bit, and ggml
 * computes `d * q + m` with two roundings: FMA contraction (GCC contracts
 * across statements by default in GNU C; clang within an expression) is
 * turned off for this file, so every SIMD clone rounds the same way.
 */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include "ggml_blocks.h"

/* Check a ggml matrix: type, K, raw's dtype and shape. Fills p and *rows. */
static em_status ggml_check(const char *op, em_array *raw, int type,
                            int64_t k, ggml_params *p, int64_t *rows) {
    em_desc dr;
    const char *name = em_ggml_type_name(type);
    int64_t be, bb;
    if (!name || type == EM_GGML_F32 || type == EM_GGML_F16 ||
        type == EM_GGML_BF16 || em_ggml_type_info(type, &be, &bb) != EM_OK)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: ggml type %d (%s) is not a block format the "
                        "engine multiplies (q4_0, q4_1, q5_0, q5_1, q8_0, "
                        "q4_k, q5_k, q6_k)",
                        op, type, name ? name : "unknown");
    if (raw->dtype != EM_U8 || raw->ndim != 2)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: the raw %s blocks must be a u8 matrix (rows, "
                        "bytes per row), got %s",
                        op, name, em__describe(raw, &dr));
    if (k < 0 || k % be != 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: K = %lld must be a non-negative multiple of %s's "
                        "block of %lld weights",
                        op, (long long)k, name, (long long)be);
    if (raw->shape[1] != k / be * bb)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: %s with K = %lld needs raw blocks of shape "
                        "(N, %lld) (%lld blocks of %lld bytes per row), got %s",
                        op, name, (long long)k, (long long)(k / be * bb),
                        (long long)(k / be), (long long)bb,
                        em__describe(raw, &dr));
    memset(p, 0, sizeof *p);
    p->type = type;
    p->k = k;
    p->block_elems = be;
    p->block_bytes = bb;
    *rows = raw->shape[0];
    return EM_OK;
}

/* ---- dequantization ------------------------------------------------------ */

typedef struct dequant_job {
    const uint8_t *raw;
    void *out;
    const ggml_params *p;
    em_dtype dtype;
} dequant_job;

/* Decode block `b` of the job's type into y. */
static void decode_block(int type, const uint8_t *b, float *y) {
    switch (type) {
#define DECODE_CASE(T, name, BE, BB)                                           \
    case T:                                                                    \
        ggml_decode_##name(b, y);                                              \
        break;
        EM_GGML_BLOCK_TYPES(DECODE_CASE)
#undef DECODE_CASE
    default:
        break;
    }
}

static void dequant_rows(void *ctx, int64_t r0, int64_t r1) {
    const dequant_job *jb = ctx;
    const ggml_params *p = jb->p;
    const int64_t nblocks = p->k / p->block_elems, be = p->block_elems;
    const int64_t row_bytes = nblocks * p->block_bytes;
    float y[GGML_MAX_BLOCK_ELEMS];
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t b = 0; b < nblocks; b++) {
            decode_block(p->type, jb->raw + r * row_bytes + b * p->block_bytes,
                         y);
            const int64_t at = r * p->k + b * be;
            switch (jb->dtype) {
            case EM_F32:
                memcpy((float *)jb->out + at, y, (size_t)be * sizeof(float));
                break;
            case EM_F64:
                for (int64_t j = 0; j < be; j++)
                    ((double *)jb->out)[at + j] = (double)y[j];
                break;
            case EM_F16:
                for (int64_t j = 0; j < be; j++)
                    ((uint16_t *)jb->out)[at + j] = em_f32_to_f16(y[j]);
                break;
            default: /* EM_BF16, checked when built */
                for (int64_t j = 0; j < be; j++)
                    ((uint16_t *)jb->out)[at + j] = em_f32_to_bf16(y[j]);
                break;
            }
        }
    }
}

static em_status dequantize_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    dequant_job jb = {em__data(node->inputs[0]), em__data(node), node->params,
                      node->dtype};
    const int64_t k = jb.p->k;
    int64_t grain = EM_PARALLEL_GRAIN / 4 / (k > 0 ? k : 1);
    em__parallel_for(node->shape[0], grain < 1 ? 1 : grain, dequant_rows, &jb);
    return EM_OK;
}

static const em_prim dequantize_prim = {"ggml_dequantize", dequantize_eval,
                                        NULL, em__gpu_ggml_dequantize_eval};

em_status em_ggml_dequantize(em_array *raw, int type, int64_t k,
                             em_dtype dtype, em_array **out) {
    if (out)
        *out = NULL;
    if (!raw || !out)
        return em__fail(EM_ERR_ARGUMENT, "ggml_dequantize: NULL argument");
    ggml_params p;
    int64_t rows;
    em_status st = ggml_check("ggml_dequantize", raw, type, k, &p, &rows);
    if (st != EM_OK)
        return st;
    if (dtype != EM_F32 && dtype != EM_F16 && dtype != EM_BF16 &&
        dtype != EM_F64)
        return em__fail(EM_ERR_ARGUMENT,
                        "ggml_dequantize: output dtype %s is not one of f32, "
                        "f16, bf16, f64",
                        em_dtype_name(dtype));
    const int64_t shape[2] = {rows, k};
    st = em__check_shape("ggml_dequantize", shape, 2, dtype, NULL);
    if (st != EM_OK)
        return st;
    em_array *contig;
    st = em_contiguous(raw, &contig);
    if (st != EM_OK)
        return st;
    st = em__node_new_params(&dequantize_prim, dtype, shape, 2, &contig, 1, &p,
                             sizeof p, out);
    em_array_release(contig);
    return st;
}

/* ---- matrix product builder (kernels in ggml_matmul.c) ------------------- */

static const em_prim matmul_prim = {"ggml_matmul", em__ggml_matmul_eval, NULL,
                                    em__gpu_ggml_matmul_eval};

em_status em_ggml_matmul(em_array *x, em_array *raw, int type, int64_t k,
                         em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !raw || !out)
        return em__fail(EM_ERR_ARGUMENT, "ggml_matmul: NULL argument");
    ggml_params p;
    int64_t rows;
    em_status st = ggml_check("ggml_matmul", raw, type, k, &p, &rows);
    if (st != EM_OK)
        return st;
    em_desc dx, dr;
    if (x->dtype != EM_F32 && x->dtype != EM_F16 && x->dtype != EM_BF16)
        return em__fail(EM_ERR_ARGUMENT,
                        "ggml_matmul: x %s must be f32, f16 or bf16 (weights "
                        "%s %s)",
                        em__describe(x, &dx), em_ggml_type_name(type),
                        em__describe(raw, &dr));
    if (x->ndim < 1 || x->shape[x->ndim - 1] != k)
        return em__fail(EM_ERR_ARGUMENT,
                        "ggml_matmul: x %s must end in K = %lld, the columns "
                        "of the %s weights %s",
                        em__describe(x, &dx), (long long)k,
                        em_ggml_type_name(type), em__describe(raw, &dr));
    int64_t shape[EM_MAX_NDIM];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 1] = rows;
    st = em__check_shape("ggml_matmul", shape, x->ndim, x->dtype, NULL);
    if (st != EM_OK)
        return st;
    em_array *cx = NULL, *craw = NULL;
    st = em_contiguous(x, &cx);
    if (st == EM_OK)
        st = em_contiguous(raw, &craw);
    if (st == EM_OK) {
        em_array *inputs[2] = {cx, craw};
        st = em__node_new_params(&matmul_prim, x->dtype, shape, x->ndim,
                                 inputs, 2, &p, sizeof p, out);
    }
    if (cx)
        em_array_release(cx);
    if (craw)
        em_array_release(craw);
    return st;
}
