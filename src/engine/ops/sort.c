/*
 * sort.c — em_sort and em_argsort: stable sorts along one axis.
 *
 * Every row (the elements along `axis` at one position of the other axes)
 * is sorted on its own; rows are spread over the thread pool.
 *
 * Keys. Each element is mapped to an unsigned integer whose order is the
 * sort order (width = the dtype's width):
 *   unsigned ints   the value itself;
 *   signed ints     the value with its sign bit flipped;
 *   floats          positive: the bits with the sign bit set; negative: all
 *                   bits inverted; -0.0 becomes +0.0 and every NaN the
 *                   all-ones key, above +Inf (Nx: NaN is the largest value).
 * Descending order inverts every key, which keeps equal elements in their
 * original order (a stable descending sort) and puts NaN first.
 *
 * The kernel per dtype is only that key mapping (one definition, expanded
 * from the dtype tables); the sort itself is dtype-agnostic: an LSD radix
 * sort of (key, index) pairs, one byte per pass, with the histograms of all
 * passes counted in one read and passes whose byte is constant skipped;
 * insertion sort for short rows. em_sort then gathers the values by index
 * (copying element bytes, so NaN payloads and -0.0 are kept); em_argsort
 * writes the indices.
 */
#include "internal.h"
#include "params.h"

#include "emily_sort.h"

#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Keys                                                                      */
/* ------------------------------------------------------------------------ */

/* The unsigned integer type with the bits of storage type S. */
#define RAW_OF(S)                                                              \
    __typeof__(_Generic((S)0, float                                            \
                        : (uint32_t)0, double                                  \
                        : (uint64_t)0, default                                 \
                        : (EM_UNSIGNED_OF(S))0))

/* Bit pattern of +Inf for the float dtypes (0 for the others). */
static inline uint64_t inf_bits(em_dtype d) {
    switch (d) {
    case EM_F16:
        return 0x7c00u;
    case EM_BF16:
        return 0x7f80u;
    case EM_F32:
        return 0x7f800000u;
    case EM_F64:
        return 0x7ff0000000000000u;
    default:
        return 0;
    }
}

/* The ascending key of raw bits `raw` of a `bits`-wide element of dtype d.
 * Inlined into the per-dtype kernels, where d is a constant. */
static inline __attribute__((always_inline)) uint64_t
key_of(uint64_t raw, em_dtype d, int bits) {
    uint64_t sign = (uint64_t)1 << (bits - 1);
    uint64_t mask = sign | (sign - 1);
    if (d == EM_F16 || d == EM_BF16 || d == EM_F32 || d == EM_F64) {
        uint64_t mag = raw & (sign - 1);
        if (mag > inf_bits(d))
            return mask; /* NaN: above everything */
        if (mag == 0)
            return sign; /* -0.0 sorts as +0.0 */
        return (raw & sign) ? (~raw & mask) : (raw | sign);
    }
    if (d == EM_S8 || d == EM_S16 || d == EM_S32 || d == EM_S64)
        return raw ^ sign;
    return raw;
}

typedef void (*key_fn)(uint64_t *restrict keys, const void *src, int64_t n,
                       int64_t stride, uint64_t flip);

/* keys[i] = key of src[i * stride], xor `flip` (all ones of the key width
 * for descending order, else 0). */
#define DEFINE_KEYS(E, sfx, S, C, LOAD, STORE)                                 \
    static void keys_##sfx(uint64_t *restrict keys, const void *srcp,          \
                           int64_t n, int64_t stride, uint64_t flip) {         \
        const S *src = srcp;                                                   \
        for (int64_t i = 0; i < n; i++) {                                      \
            RAW_OF(S) u;                                                       \
            memcpy(&u, &src[i * stride], sizeof u);                            \
            keys[i] = key_of((uint64_t)u, E, (int)sizeof(S) * 8) ^ flip;       \
        }                                                                      \
    }
EM_DTYPES_REAL(DEFINE_KEYS)

#define REG_KEYS(E, sfx, ...) [E] = keys_##sfx,
static const key_fn key_fns[EM_DTYPE_COUNT] = {EM_DTYPES_REAL(REG_KEYS)};

/* ------------------------------------------------------------------------ */
/* Sorting (key, index) pairs                                                */
/* ------------------------------------------------------------------------ */

/* Rows up to this length use insertion sort. */
#define SHORT_ROW 48

/* Stable insertion sort of n (key, index) pairs. */
static void insertion_sort(uint64_t *key, int64_t *idx, int64_t n) {
    for (int64_t i = 1; i < n; i++) {
        uint64_t k = key[i];
        int64_t x = idx[i];
        int64_t j = i;
        for (; j > 0 && key[j - 1] > k; j--) {
            key[j] = key[j - 1];
            idx[j] = idx[j - 1];
        }
        key[j] = k;
        idx[j] = x;
    }
}

/* Stable LSD radix sort of n pairs over the low `nbytes` bytes of the keys.
 * key2/idx2 are scratch of n entries. Returns which buffers hold the result
 * (0: key/idx, 1: key2/idx2). */
static int radix_sort(uint64_t *key, int64_t *idx, uint64_t *key2,
                      int64_t *idx2, int64_t n, int nbytes,
                      int64_t (*hist)[256]) {
    memset(hist, 0, (size_t)nbytes * sizeof *hist);
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = key[i];
        for (int b = 0; b < nbytes; b++)
            hist[b][(k >> (8 * b)) & 0xff]++;
    }
    int which = 0;
    for (int b = 0; b < nbytes; b++) {
        int64_t *h = hist[b];
        /* Skip a byte shared by every key: the pass would not move anything. */
        if (h[(key[0] >> (8 * b)) & 0xff] == n)
            continue;
        int64_t pos = 0;
        for (int v = 0; v < 256; v++) {
            int64_t c = h[v];
            h[v] = pos;
            pos += c;
        }
        const uint64_t *ks = which ? key2 : key;
        const int64_t *is = which ? idx2 : idx;
        uint64_t *kd = which ? key : key2;
        int64_t *id = which ? idx : idx2;
        int shift = 8 * b;
        for (int64_t i = 0; i < n; i++) {
            uint64_t k = ks[i];
            int64_t p = h[(k >> shift) & 0xff]++;
            kd[p] = k;
            id[p] = is[i];
        }
        which ^= 1;
    }
    return which;
}

/* ------------------------------------------------------------------------ */
/* Writing results                                                           */
/* ------------------------------------------------------------------------ */

/* dst[k * dstride] = src[idx[k] * sstride] for k < n, elements of `esz`
 * bytes (the bytes are copied, whatever the dtype). */
static void gather_elems(void *dst, int64_t dstride, const void *src,
                         int64_t sstride, const int64_t *idx, int64_t n,
                         size_t esz) {
#define GATHER(T)                                                              \
    do {                                                                       \
        T *d = dst;                                                            \
        const T *s = src;                                                      \
        for (int64_t k = 0; k < n; k++)                                        \
            d[k * dstride] = s[idx[k] * sstride];                              \
    } while (0)
    switch (esz) {
    case 1:
        GATHER(uint8_t);
        break;
    case 2:
        GATHER(uint16_t);
        break;
    case 4:
        GATHER(uint32_t);
        break;
    default:
        GATHER(uint64_t);
        break;
    }
#undef GATHER
}

/* dst[k * dstride] = idx[k] as integer dtype d (it fits: checked at build). */
static void store_indices(void *dst, em_dtype d, int64_t dstride,
                          const int64_t *idx, int64_t n) {
    switch (d) {
#define STORE(E, sfx, T, ...)                                                  \
    case E: {                                                                  \
        T *o = dst;                                                            \
        for (int64_t k = 0; k < n; k++)                                        \
            o[k * dstride] = (T)idx[k];                                        \
        break;                                                                 \
    }
        EM_DTYPES_INT(STORE)
#undef STORE
    default:
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* The primitive                                                             */
/* ------------------------------------------------------------------------ */

typedef struct sort_job {
    const sort_params *p;
    key_fn keys;
    int key_bytes;
    uint64_t flip;
    const char *in;
    char *out;
    size_t isz, osz;
    em_dtype out_dtype;
    int nouter; /* the other axes */
    int64_t oshape[EM_MAX_NDIM], istride[EM_MAX_NDIM], ostride[EM_MAX_NDIM];
    int64_t n;              /* row length */
    int64_t in_axis_stride; /* elements */
    int64_t out_axis_stride;
    atomic_bool failed; /* scratch allocation failed */
} sort_job;

static void sort_rows_task(void *ctx, int64_t begin, int64_t end) {
    sort_job *j = ctx;
    int64_t n = j->n;
    /* Scratch for one row at a time: keys and indices, twice (radix). */
    size_t bytes = (size_t)n * 2 * (sizeof(uint64_t) + sizeof(int64_t)) +
                   8 * sizeof(int64_t[256]);
    char *mem = malloc(bytes);
    if (!mem) {
        atomic_store(&j->failed, true);
        return;
    }
    uint64_t *key = (uint64_t *)mem, *key2 = key + n;
    int64_t *idx = (int64_t *)(key2 + n), *idx2 = idx + n;
    int64_t(*hist)[256] = (int64_t(*)[256])(idx2 + n);

    for (int64_t r = begin; r < end; r++) {
        /* Locate row r: unravel it over the other axes. */
        int64_t ioff = 0, ooff = 0, rem = r;
        for (int d = j->nouter - 1; d >= 0; d--) {
            int64_t i = rem % j->oshape[d];
            rem /= j->oshape[d];
            ioff += i * j->istride[d];
            ooff += i * j->ostride[d];
        }
        const char *src = j->in + ioff * (int64_t)j->isz;
        j->keys(key, src, n, j->in_axis_stride, j->flip);
        for (int64_t i = 0; i < n; i++)
            idx[i] = i;
        const int64_t *perm = idx;
        if (n <= SHORT_ROW) {
            insertion_sort(key, idx, n);
        } else if (radix_sort(key, idx, key2, idx2, n, j->key_bytes, hist)) {
            perm = idx2;
        }
        char *dst = j->out + ooff * (int64_t)j->osz;
        if (j->p->indices)
            store_indices(dst, j->out_dtype, j->out_axis_stride, perm, n);
        else
            gather_elems(dst, j->out_axis_stride, src, j->in_axis_stride, perm,
                         n, j->isz);
    }
    free(mem);
}

static em_status sort_eval(em_array *node) {
    const sort_params *p = node->params;
    const em_array *in = node->inputs[0];
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK)
        return st;
    if (in->size == 0)
        return EM_OK;

    sort_job *j = calloc(1, sizeof *j);
    if (!j)
        return em__fail(EM_ERR_OOM, "%s: out of memory",
                        p->indices ? "argsort" : "sort");
    j->p = p;
    j->keys = key_fns[in->dtype];
    j->key_bytes = (int)em_dtype_size(in->dtype);
    j->flip = p->descending ? (j->key_bytes == 8
                                   ? UINT64_MAX
                                   : (((uint64_t)1 << (8 * j->key_bytes)) - 1))
                            : 0;
    j->in = em__data(in);
    j->out = em__data(node);
    j->isz = em_dtype_size(in->dtype);
    j->osz = em_dtype_size(node->dtype);
    j->out_dtype = node->dtype;
    atomic_init(&j->failed, false);
    int64_t ostrides[EM_MAX_NDIM];
    em__row_strides(node->shape, node->ndim, ostrides);
    int64_t rows = 1;
    for (int d = 0; d < in->ndim; d++) {
        if (d == p->axis)
            continue;
        j->oshape[j->nouter] = in->shape[d];
        j->istride[j->nouter] = in->strides[d];
        j->ostride[j->nouter] = ostrides[d];
        j->nouter++;
        rows *= in->shape[d];
    }
    j->n = in->shape[p->axis];
    j->in_axis_stride = in->strides[p->axis];
    j->out_axis_stride = ostrides[p->axis];

    /* A task of several short rows, or one long row, is worth a thread. */
    int64_t grain = EM_PARALLEL_GRAIN / 8 / (j->n > 0 ? j->n : 1);
    em__parallel_for(rows, grain < 1 ? 1 : grain, sort_rows_task, j);
    bool failed = atomic_load(&j->failed);
    free(j);
    if (failed)
        return em__fail(EM_ERR_OOM, "%s: out of memory for a row of %lld",
                        p->indices ? "argsort" : "sort",
                        (long long)in->shape[p->axis]);
    return EM_OK;
}

static const em_prim sort_prim = {"sort", sort_eval, em__vjp_sort,
                                  em__gpu_sort_eval};

/* Largest index an integer dtype holds. */
static uint64_t index_max(em_dtype d) {
    size_t bits = em_dtype_size(d) * 8;
    if (bits >= 64)
        return em_dtype_is_signed(d) ? (uint64_t)INT64_MAX : UINT64_MAX;
    return em_dtype_is_signed(d) ? ((uint64_t)1 << (bits - 1)) - 1
                                 : ((uint64_t)1 << bits) - 1;
}

static em_status sort_build(const char *name, em_array *a, int axis,
                            bool descending, bool indices, em_dtype index_dtype,
                            em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "%s: out is NULL", name);
    *out = NULL;
    if (!a)
        return em__fail(EM_ERR_ARGUMENT, "%s: input is NULL", name);
    em_desc d;
    if (!key_fns[a->dtype])
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: %s has a complex dtype; expected a real one", name,
                        em__describe(a, &d));
    if (a->ndim == 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: %s is a scalar; expected rank >= 1", name,
                        em__describe(a, &d));
    char op_desc[64];
    snprintf(op_desc, sizeof op_desc, "%s of %s", name, em__describe(a, &d));
    int ax;
    em_status st = em__check_axis(op_desc, axis, a->ndim, &ax);
    if (st != EM_OK)
        return st;
    em_dtype out_dtype = a->dtype;
    if (indices) {
        out_dtype = index_dtype == EM_PRED ? EM_S64 : index_dtype;
        if (!em_dtype_is_valid((int)out_dtype) ||
            !em_dtype_is_integer(out_dtype))
            return em__fail(EM_ERR_ARGUMENT,
                            "%s: index dtype %d is not an integer dtype "
                            "(input %s)",
                            name, (int)index_dtype, em__describe(a, &d));
        int64_t len = a->shape[ax];
        if (len > 0 && (uint64_t)(len - 1) > index_max(out_dtype))
            return em__fail(EM_ERR_ARGUMENT,
                            "%s: indices along axis %d of %s do not fit in %s",
                            name, ax, em__describe(a, &d),
                            em_dtype_name(out_dtype));
    }
    sort_params p = {ax, descending, indices};
    return em__node_new_params(&sort_prim, out_dtype, a->shape, a->ndim, &a, 1,
                               &p, sizeof p, out);
}

em_status em_sort(em_array *a, int axis, bool descending, em_array **out) {
    return sort_build("sort", a, axis, descending, false, EM_PRED, out);
}

em_status em_argsort(em_array *a, int axis, bool descending,
                     em_dtype index_dtype, em_array **out) {
    return sort_build("argsort", a, axis, descending, true, index_dtype, out);
}
