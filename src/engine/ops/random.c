/*
 * random.c — Threefry-2x32 random bits and Nx.Random's erf_inv.
 *
 * See include/emily_random.h for the counter layout. Every output element
 * depends only on the key and its own counter pair, so the hashing is split
 * into independent ranges of pairs on the thread pool.
 */
#include "internal.h"

#include "emily_random.h"
#include "erfinv.h"
#include "threefry.h"

#include <stdio.h>

/* ------------------------------------------------------------------------ */
/* The hash                                                                  */
/* ------------------------------------------------------------------------ */

/* The hash itself is in threefry.h, shared with the CUDA backend. */
#define threefry2x32 em_tf_hash2x32

/* The two key words of an evaluated u32[2] array (any strides). */
static void read_key(const em_array *key, uint32_t *k0, uint32_t *k1) {
    const uint32_t *k = em__data(key);
    *k0 = k[0];
    *k1 = k[key->strides[0]];
}

static em_status check_key(const char *op, const em_array *key) {
    em_desc d;
    if (!key)
        return em__fail(EM_ERR_ARGUMENT, "%s: key is NULL", op);
    if (key->dtype != EM_U32 || key->ndim != 1 || key->shape[0] != 2)
        return em__fail(EM_ERR_ARGUMENT, "%s: key is %s; expected u32[2]", op,
                        em__describe(key, &d));
    return EM_OK;
}

/* ------------------------------------------------------------------------ */
/* em_random_bits                                                            */
/* ------------------------------------------------------------------------ */

typedef struct bits_job {
    uint32_t k0, k1;
    void *out;
    int64_t m;    /* counters hashed */
    int64_t half; /* pairs: ceil(m / 2) */
    em_dtype dtype;
} bits_job;

/* Pairs [begin, end): pair i hashes (i, i + half), or (i, 0) for the
 * padding pair of an odd count; its x0 result is stream word i and its x1
 * result stream word half + i. */
static void bits_task(void *ctx, int64_t begin, int64_t end) {
    const bits_job *j = ctx;
    for (int64_t i = begin; i < end; i++) {
        uint32_t x0 = (uint32_t)i;
        uint32_t x1 = i + j->half < j->m ? (uint32_t)(i + j->half) : 0u;
        threefry2x32(j->k0, j->k1, &x0, &x1);
        bool second = j->half + i < j->m;
        switch (j->dtype) {
        case EM_U64: /* m = 2n, half = n: word i high, word n + i low */
            ((uint64_t *)j->out)[i] = ((uint64_t)x0 << 32) | x1;
            break;
        case EM_U32:
            ((uint32_t *)j->out)[i] = x0;
            if (second)
                ((uint32_t *)j->out)[j->half + i] = x1;
            break;
        case EM_U16:
            ((uint16_t *)j->out)[i] = (uint16_t)x0;
            if (second)
                ((uint16_t *)j->out)[j->half + i] = (uint16_t)x1;
            break;
        default: /* EM_U8 */
            ((uint8_t *)j->out)[i] = (uint8_t)x0;
            if (second)
                ((uint8_t *)j->out)[j->half + i] = (uint8_t)x1;
            break;
        }
    }
}

/* Pairs per task: a hash is ~100 simple instructions. */
#define RANDOM_GRAIN 8192

static em_status bits_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK)
        return st;
    if (node->size == 0)
        return EM_OK;
    bits_job j;
    read_key(node->inputs[0], &j.k0, &j.k1);
    j.out = em__data(node);
    j.dtype = node->dtype;
    j.m = node->dtype == EM_U64 ? 2 * node->size : node->size;
    j.half = (j.m + 1) / 2;
    em__parallel_for(node->dtype == EM_U64 ? node->size : j.half, RANDOM_GRAIN,
                     bits_task, &j);
    return EM_OK;
}

static const em_prim bits_prim = {"random_bits", bits_eval, NULL,
                                  em__gpu_random_bits_eval};

em_status em_random_bits(em_array *key, const int64_t *shape, int ndim,
                         em_dtype dtype, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "random_bits: out is NULL");
    *out = NULL;
    em_status st = check_key("random_bits", key);
    if (st != EM_OK)
        return st;
    if (dtype != EM_U8 && dtype != EM_U16 && dtype != EM_U32 && dtype != EM_U64)
        return em__fail(EM_ERR_ARGUMENT,
                        "random_bits: dtype %s; expected u8, u16, u32 or u64",
                        em_dtype_is_valid((int)dtype) ? em_dtype_name(dtype)
                                                      : "(invalid)");
    if (ndim < 0 || ndim > EM_MAX_NDIM || (ndim > 0 && !shape))
        return em__fail(EM_ERR_ARGUMENT, "random_bits: bad rank %d", ndim);
    int64_t size;
    st = em__check_shape("random_bits", shape, ndim, dtype, &size);
    if (st != EM_OK)
        return st;
    /* Counters are u32: 2^32 of them at most (2^31 u64 draws). */
    if ((dtype == EM_U64 ? size > ((int64_t)1 << 31)
                         : size > ((int64_t)1 << 32))) {
        em_desc d;
        return em__fail(EM_ERR_ARGUMENT,
                        "random_bits: shape %s of %s is too large for 32-bit "
                        "counters",
                        em__describe_shape(shape, ndim, &d),
                        em_dtype_name(dtype));
    }
    return em__node_new(&bits_prim, dtype, shape, ndim, &key, 1, out);
}

/* ------------------------------------------------------------------------ */
/* em_threefry2x32                                                           */
/* ------------------------------------------------------------------------ */

typedef struct pairs_job {
    uint32_t k0, k1;
    const uint32_t *in;
    uint32_t *out;
} pairs_job;

static void pairs_task(void *ctx, int64_t begin, int64_t end) {
    const pairs_job *j = ctx;
    for (int64_t i = begin; i < end; i++) {
        uint32_t x0 = j->in[2 * i], x1 = j->in[2 * i + 1];
        threefry2x32(j->k0, j->k1, &x0, &x1);
        j->out[2 * i] = x0;
        j->out[2 * i + 1] = x1;
    }
}

static em_status pairs_eval(em_array *node) {
    /* inputs: key, contiguous counters */
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK)
        return st;
    if (node->size == 0)
        return EM_OK;
    pairs_job j;
    read_key(node->inputs[0], &j.k0, &j.k1);
    j.in = em__data(node->inputs[1]);
    j.out = em__data(node);
    em__parallel_for(node->size / 2, RANDOM_GRAIN, pairs_task, &j);
    return EM_OK;
}

static const em_prim pairs_prim = {"threefry2x32", pairs_eval, NULL,
                                   em__gpu_threefry_eval};

em_status em_threefry2x32(em_array *key, em_array *counters, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "threefry2x32: out is NULL");
    *out = NULL;
    em_status st = check_key("threefry2x32", key);
    if (st != EM_OK)
        return st;
    em_desc d;
    if (!counters)
        return em__fail(EM_ERR_ARGUMENT, "threefry2x32: counters is NULL");
    if (counters->dtype != EM_U32 || counters->ndim < 1 ||
        counters->shape[counters->ndim - 1] != 2)
        return em__fail(EM_ERR_ARGUMENT,
                        "threefry2x32: counters are %s; expected u32 with a "
                        "last axis of size 2",
                        em__describe(counters, &d));
    em_array *c = NULL;
    st = em_contiguous(counters, &c);
    if (st != EM_OK)
        return st;
    em_array *inputs[2] = {key, c};
    st = em__node_new(&pairs_prim, EM_U32, counters->shape, counters->ndim,
                      inputs, 2, out);
    em_array_release(c);
    return st;
}

/* ------------------------------------------------------------------------ */
/* em_random_erf_inv                                                         */
/* ------------------------------------------------------------------------ */

/* The formula is em_giles_erfinv (erfinv.h, shared with the GPU). */
typedef void (*erfinv_fn)(const void *in, void *out, int64_t begin,
                          int64_t end);

#define DEFINE_ERFINV(E, sfx, S, C, LOAD, STORE)                               \
    static void erfinv_##sfx(const void *inp, void *outp, int64_t begin,       \
                             int64_t end) {                                    \
        const S *in = inp;                                                     \
        S *out = outp;                                                         \
        for (int64_t i = begin; i < end; i++)                                  \
            out[i] = STORE((C)em_giles_erfinv((double)LOAD(in[i])));           \
    }
EM_DTYPES_REALFLOAT(DEFINE_ERFINV)

#define REG_ERFINV(E, sfx, ...) [E] = erfinv_##sfx,
static const erfinv_fn erfinv_fns[EM_DTYPE_COUNT] = {
    EM_DTYPES_REALFLOAT(REG_ERFINV)};

typedef struct erfinv_job {
    erfinv_fn fn;
    const void *in;
    void *out;
} erfinv_job;

static void erfinv_task(void *ctx, int64_t begin, int64_t end) {
    const erfinv_job *j = ctx;
    j->fn(j->in, j->out, begin, end);
}

static em_status erfinv_eval(em_array *node) {
    em_array *in = node->inputs[0];
    em_status st = em__alloc_output(node, &in, 1);
    if (st != EM_OK)
        return st;
    erfinv_job j = {erfinv_fns[node->dtype], em__data(in), em__data(node)};
    em__parallel_for(node->size, RANDOM_GRAIN, erfinv_task, &j);
    return EM_OK;
}

static const em_prim erfinv_prim = {"random_erf_inv", erfinv_eval, NULL,
                                    em__gpu_erf_inv_eval};

em_status em_random_erf_inv(em_array *a, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "random_erf_inv: out is NULL");
    *out = NULL;
    if (!a)
        return em__fail(EM_ERR_ARGUMENT, "random_erf_inv: input is NULL");
    em_desc d;
    if (!em_dtype_is_float(a->dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "random_erf_inv: %s; expected a real float dtype "
                        "(f16, bf16, f32, f64)",
                        em__describe(a, &d));
    em_array *c = NULL;
    em_status st = em_contiguous(a, &c);
    if (st != EM_OK)
        return st;
    st = em__node_new(&erfinv_prim, a->dtype, a->shape, a->ndim, &c, 1, out);
    em_array_release(c);
    return st;
}
