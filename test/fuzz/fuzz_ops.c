/*
 * fuzz_ops.c — libFuzzer target for the op constructors of the C API.
 *
 * The input is read as a little program: a few arrays of random dtypes
 * (valid or not) and small shapes filled with the input's bytes, then a
 * sequence of ops with random operands and parameters (axes, permutations,
 * shapes with negative, zero and huge dimensions, counts past
 * EM_MAX_NDIM, op codes past the end of their enums). Every call must
 * either succeed or fail with a status and a message; results small enough
 * are evaluated and read back. Outputs of more than MAX_KEEP elements are
 * built (their validation is what is being tested) but never used as
 * inputs, so no evaluation runs for long or allocates much.
 *
 * Run: make -C test/fuzz run-ops SECONDS=60
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emily.h"
#include "emily_autodiff.h"
#include "emily_pad.h"
#include "emily_sort.h"

#define POOL 8
#define MAX_KEEP ((int64_t)1 << 12) /* elements */
#define MAX_OPS 32

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t u8(reader *r) {
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

static bool flag(reader *r) { return u8(r) & 1; }

/* Mostly small dimensions, sometimes negative or huge ones. */
static int64_t dim(reader *r) {
    static const int64_t huge[] = {INT64_MAX, INT64_MIN, (int64_t)1 << 62,
                                   (int64_t)1 << 32, (int64_t)1 << 31,
                                   ((int64_t)1 << 31) - 1, 1 << 20, -1};
    uint8_t b = u8(r);
    if (b < 200)
        return b % 5;
    if (b < 230)
        return -(int64_t)(b % 4) - 1;
    return huge[b % 8];
}

/* Axes in [-10, 10], sometimes far out. */
static int axis(reader *r) {
    uint8_t b = u8(r);
    if (b >= 250)
        return b == 255 ? INT32_MIN : INT32_MAX;
    return (int)(b % 21) - 10;
}

/* A count of entries, sometimes past EM_MAX_NDIM. */
static int count(reader *r, int typical) {
    uint8_t b = u8(r);
    if (b >= 250)
        return EM_MAX_NDIM + 1 + (b & 1);
    return b % (typical + 1);
}

static em_dtype dtype(reader *r) {
    uint8_t b = u8(r);
    if (b >= 250)
        return (em_dtype)(EM_DTYPE_COUNT + (b & 3)); /* invalid */
    return (em_dtype)(b % EM_DTYPE_COUNT);
}

typedef struct pool {
    em_array *a[POOL];
    int next;
} pool;

static em_array *pick(pool *p, reader *r) {
    em_array *a = p->a[u8(r) % POOL];
    if (!a) /* any live array, or NULL (which the caller must not pass) */
        for (int i = 0; i < POOL && !a; i++)
            a = p->a[i];
    return a;
}

static void keep(pool *p, em_status st, em_array *out) {
    if (st != EM_OK || !out) {
        /* A failed call leaves *out NULL and sets a message. */
        if (st != EM_OK && (out || !em_last_error()[0]))
            __builtin_trap();
        return;
    }
    if (em_array_size(out) > MAX_KEEP || em_array_size(out) < 0) {
        em_array_release(out);
        return;
    }
    int slot = p->next++ % POOL;
    em_array_release(p->a[slot]);
    p->a[slot] = out;
}

static em_status make_array(reader *r, em_array **out) {
    em_dtype dt = dtype(r);
    int nd = u8(r) % 4;
    int64_t shape[EM_MAX_NDIM];
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        shape[i] = u8(r) % 5;
        n *= shape[i];
    }
    size_t elem = em_dtype_size(dt);
    size_t nbytes = (size_t)n * (elem ? elem : 1);
    uint8_t *data = calloc(1, nbytes ? nbytes : 1);
    if (!data)
        return EM_ERR_OOM;
    size_t take = nbytes < r->n ? nbytes : r->n;
    memcpy(data, r->p, take);
    r->p += take;
    r->n -= take;
    if (dt == EM_PRED)
        for (size_t i = 0; i < nbytes; i++)
            data[i] &= 1;
    em_status st = em_from_data(data, nbytes, shape, nd, dt, out);
    free(data);
    return st;
}

static void run_op(pool *p, reader *r) {
    em_array *a = pick(p, r), *b = pick(p, r), *c = pick(p, r);
    if (!a || !b || !c)
        return;
    em_array *out = NULL;
    em_status st = EM_OK;
    int64_t s1[EM_MAX_NDIM + 2], s2[EM_MAX_NDIM + 2], s3[EM_MAX_NDIM + 2];
    int ax[EM_MAX_NDIM + 2];
    int nd = em_array_ndim(a);
    for (int i = 0; i < EM_MAX_NDIM + 2; i++) {
        s1[i] = dim(r);
        s2[i] = dim(r);
        s3[i] = dim(r);
        ax[i] = axis(r);
    }
    switch (u8(r) % 37) {
    case 0:
        st = em_unary((em_unary_op)(u8(r) % (EM_UNARY_COUNT + 1)), a, &out);
        break;
    case 1:
        st = em_binary((em_binary_op)(u8(r) % (EM_BINARY_COUNT + 1)), a, b, &out);
        break;
    case 2:
        st = em_select(a, b, c, &out);
        break;
    case 3:
        st = em_clip(a, b, c, &out);
        break;
    case 4:
        st = em_as_type(a, dtype(r), &out);
        break;
    case 5:
        st = em_bitcast(a, dtype(r), &out);
        break;
    case 6:
        st = em_iota(s1, count(r, 3), axis(r), dtype(r), &out);
        break;
    case 7:
        st = em_eye(s1, count(r, 3), dim(r), dtype(r), &out);
        break;
    case 8:
        st = em_full(a, s1, count(r, 3), dtype(r), &out);
        break;
    case 9:
        st = em_reshape(a, s1, count(r, 3), &out);
        break;
    case 10: {
        /* Usually a real permutation of a's axes. */
        int n = flag(r) ? nd : count(r, 4);
        for (int i = 0; i < nd && flag(r); i++) {
            int j = u8(r) % (nd ? nd : 1);
            int t = ax[i];
            ax[i] = ax[j];
            ax[j] = t;
        }
        if (flag(r))
            for (int i = 0; i < nd; i++)
                ax[i] = (i + 1) % nd;
        st = em_transpose(a, ax, n, &out);
        break;
    }
    case 11:
        st = em_broadcast_to(a, s1, count(r, 4), &out);
        break;
    case 12:
        st = em_squeeze(a, ax, count(r, 2), &out);
        break;
    case 13:
        st = em_expand_dims(a, axis(r), &out);
        break;
    case 14: {
        /* Valid ranges most of the time, junk otherwise. */
        const int64_t *shape = em_array_shape(a);
        if (flag(r))
            for (int i = 0; i < nd; i++) {
                /* Empty arrays in the pool may have huge other dims. */
                int64_t d = shape[i] > 64 ? 64 : shape[i];
                s1[i] = d ? u8(r) % (d + 1) : 0;
                s2[i] = s1[i] + (d - s1[i] ? u8(r) % (d - s1[i] + 1) : 0);
                s3[i] = 1 + u8(r) % 3;
            }
        st = em_slice(a, s1, s2, s3, &out);
        break;
    }
    case 15:
        st = em_put_slice(a, s1, b, &out);
        break;
    case 16: {
        em_array *list[4] = {a, b, c, a};
        st = em_concatenate(list, (size_t)(u8(r) % 5), axis(r), &out);
        break;
    }
    case 17:
        st = em_reverse(a, ax, count(r, 3), &out);
        break;
    case 18:
        st = em_contiguous(a, &out);
        break;
    case 19:
        st = em_reduce((em_reduce_op)(u8(r) % (EM_REDUCE_COUNT + 1)), a,
                       flag(r) ? NULL : ax, count(r, 3), flag(r), &out);
        break;
    case 20: {
        em_argreduce_options o = {.axis = axis(r), .all_axes = flag(r),
                                  .keep_axis = flag(r), .tie_high = flag(r),
                                  .dtype = dtype(r)};
        st = em_argreduce((em_argreduce_op)(u8(r) % 3), a, &o, &out);
        break;
    }
    case 21: {
        em_dot_options o;
        memset(&o, 0, sizeof o);
        o.ncontract = count(r, 2);
        o.nbatch = count(r, 1);
        for (int i = 0; i < EM_MAX_NDIM; i++) {
            o.contract_a[i] = axis(r) % 4;
            o.contract_b[i] = axis(r) % 4;
            o.batch_a[i] = axis(r) % 4;
            o.batch_b[i] = axis(r) % 4;
        }
        st = em_dot(a, b, &o, &out);
        break;
    }
    case 22:
        st = em_matmul(a, b, &out);
        break;
    case 23:
        st = em_gather(a, b, ax, count(r, 2), &out);
        break;
    case 24:
        st = em_take(a, b, axis(r), &out);
        break;
    case 25:
        st = em_take_along_axis(a, b, axis(r), &out);
        break;
    case 26:
        st = em_indexed_add(a, b, c, ax, count(r, 2), &out);
        break;
    case 27:
        st = em_indexed_put(a, b, c, ax, count(r, 2), &out);
        break;
    case 28:
        st = em_indices_in_range(a, dim(r), &out);
        break;
    case 29:
        for (int i = 0; i < EM_MAX_NDIM; i++)
            s3[i] = u8(r) % 3; /* interior padding >= 0 mostly */
        st = em_pad(a, b, s1, s2, s3, &out);
        break;
    case 30:
        st = em_sort(a, axis(r), flag(r), &out);
        break;
    case 31:
        st = em_argsort(a, axis(r), flag(r), dtype(r), &out);
        break;
    case 32:
        st = em_dynamic_slice(a, b, s1, flag(r) ? NULL : s3, &out);
        break;
    case 33:
        st = em_dynamic_put_slice(a, b, c, &out);
        break;
    case 34:
        st = em_identity(a, &out);
        break;
    case 35:
        st = em_stop_gradient(a, &out);
        break;
    case 36: /* gradient of a random graph with respect to any node */
        st = em_vjp(&a, &b, 1, &c, 1, &out);
        break;
    }
    keep(p, st, out);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    /* Anything that slips past validation fails instead of exhausting the
     * machine. */
    em_memory_set_limit((size_t)256 << 20);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    pool p = {{0}, 0};
    int narrays = 1 + u8(&r) % 3;
    for (int i = 0; i < narrays; i++) {
        em_array *a = NULL;
        em_status st = make_array(&r, &a);
        keep(&p, st, a);
    }
    int nops = u8(&r) % MAX_OPS;
    for (int i = 0; i < nops && r.n; i++)
        run_op(&p, &r);

    /* Evaluate and read back what is left, together or one by one. */
    em_array *live[POOL];
    size_t nlive = 0;
    for (int i = 0; i < POOL; i++)
        if (p.a[i])
            live[nlive++] = p.a[i];
    if (nlive && flag(&r))
        (void)em_eval(live, nlive);
    for (size_t i = 0; i < nlive; i++) {
        size_t nbytes = em_array_nbytes(live[i]);
        void *buf = malloc(nbytes ? nbytes : 1);
        if (buf) {
            em_status st = em_read(live[i], buf, nbytes);
            if (st != EM_OK && !em_last_error()[0])
                __builtin_trap();
            free(buf);
        }
    }
    for (int i = 0; i < POOL; i++)
        em_array_release(p.a[i]);
    return 0;
}
