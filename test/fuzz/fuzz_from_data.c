/*
 * fuzz_from_data.c — libFuzzer target for decoding raw bytes into arrays,
 * what Emily.from_binary/3 does: em_from_data, em_from_external and
 * em_scalar with a header taken from the input (dtype, possibly invalid;
 * ndim, possibly past EM_MAX_NDIM; dimensions, possibly negative, zero or
 * huge; a claimed byte count that may disagree with the data).
 *
 * Whatever is accepted must read back byte for byte (directly, through a
 * reversed or transposed view made contiguous again, and after a bitcast
 * to a same-size dtype), and whatever is refused must be refused with a
 * status and a message.
 *
 * Run: make -C test/fuzz run-from-data SECONDS=60
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emily.h"

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

static int64_t dim(reader *r) {
    static const int64_t odd[] = {INT64_MAX, INT64_MIN, -1, -2,
                                  (int64_t)1 << 32, (int64_t)1 << 61,
                                  (int64_t)1 << 62, ((int64_t)1 << 31) + 1};
    uint8_t b = u8(r);
    return b < 224 ? b % 7 : odd[b % 8];
}

static void check(bool ok) {
    if (!ok)
        __builtin_trap();
}

/* A failure must leave *out NULL and say why. */
static void check_failure(em_status st, em_array *out) {
    check(st != EM_OK);
    check(out == NULL);
    check(em_last_error()[0] != '\0');
}

static bool is_pred_clean(const uint8_t *data, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (data[i] > 1)
            return false;
    return true;
}

static void read_back(em_array *a, const uint8_t *expect, size_t nbytes) {
    check(em_array_nbytes(a) == nbytes);
    uint8_t *buf = malloc(nbytes ? nbytes : 1);
    if (!buf)
        return;
    check(em_read(a, buf, nbytes) == EM_OK);
    check(memcmp(buf, expect, nbytes) == 0);
    /* A wrong byte count is refused, never overrun. */
    if (nbytes)
        check(em_read(a, buf, nbytes - 1) != EM_OK);
    free(buf);
}

/* Reverse every axis twice, or transpose twice: the same bytes again. */
static void views(em_array *a, const uint8_t *expect, size_t nbytes) {
    int nd = em_array_ndim(a);
    int axes[EM_MAX_NDIM], perm[EM_MAX_NDIM];
    for (int i = 0; i < nd; i++) {
        axes[i] = i;
        perm[i] = nd - 1 - i;
    }
    em_array *r1 = NULL, *r2 = NULL, *t1 = NULL, *t2 = NULL;
    if (em_reverse(a, axes, nd, &r1) == EM_OK &&
        em_reverse(r1, axes, nd, &r2) == EM_OK)
        read_back(r2, expect, nbytes);
    if (em_transpose(a, perm, nd, &t1) == EM_OK &&
        em_transpose(t1, perm, nd, &t2) == EM_OK)
        read_back(t2, expect, nbytes);
    em_array_release(r1);
    em_array_release(r2);
    em_array_release(t1);
    em_array_release(t2);
}

static void release_noop(void *ctx) { (*(int *)ctx)++; }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    em_memory_set_limit((size_t)256 << 20);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    uint8_t mode = u8(&r);
    int dt = (int)u8(&r) % (EM_DTYPE_COUNT + 3) - 1; /* -1 and past the end */
    int nd = (int)(u8(&r) % (EM_MAX_NDIM + 3)) - 1; /* -1 .. 9 */
    int64_t shape[EM_MAX_NDIM + 2];
    for (int i = 0; i < EM_MAX_NDIM + 2; i++)
        shape[i] = dim(&r);
    /* The claimed size: the rest of the input, or off by a little. */
    size_t nbytes = r.n;
    uint8_t skew = u8(&r);
    if (skew & 1)
        nbytes = skew & 2 ? nbytes + (skew >> 2) : (nbytes > (size_t)(skew >> 2) ? nbytes - (skew >> 2) : 0);
    const uint8_t *payload = r.p;
    size_t avail = r.n;

    /* The payload copied to memory of exactly `nbytes` (the engine may read
     * all of it) and aligned for any dtype. */
    uint8_t *buf = aligned_alloc(64, nbytes + 64);
    if (!buf)
        return 0;
    memset(buf, 0, nbytes + 64);
    memcpy(buf, payload, avail < nbytes ? avail : nbytes);
    if (dt == EM_PRED)
        for (size_t i = 0; i < nbytes; i++)
            buf[i] &= 1;

    bool valid_dtype = em_dtype_is_valid(dt);
    bool expect_ok = valid_dtype && nd >= 0 && nd <= EM_MAX_NDIM;
    uint64_t count = 1;
    bool empty = false;
    for (int i = 0; expect_ok && i < nd; i++) {
        if (shape[i] < 0)
            expect_ok = false;
        else if (shape[i] == 0)
            empty = true;
    }
    for (int i = 0; expect_ok && !empty && i < nd; i++) {
        if ((uint64_t)shape[i] > UINT64_MAX / count)
            expect_ok = false;
        else
            count *= (uint64_t)shape[i];
    }
    if (empty)
        count = 0;
    if (expect_ok) {
        size_t elem = em_dtype_size((em_dtype)dt);
        expect_ok = count <= SIZE_MAX / elem && count * elem == nbytes;
    }

    em_array *a = NULL;
    em_status st;
    int released = 0;
    switch (mode % 3) {
    case 0:
        st = em_from_data(buf, nbytes, shape, nd, (em_dtype)dt, &a);
        break;
    case 1:
        st = em_from_external(buf, nbytes, shape, nd, (em_dtype)dt, release_noop,
                              &released, &a);
        break;
    default:
        st = em_scalar(buf, (em_dtype)dt, &a);
        expect_ok = valid_dtype;
        nbytes = valid_dtype ? em_dtype_size((em_dtype)dt) : 0;
        break;
    }
    if (st != EM_OK) {
        check_failure(st, a);
        /* Refused only for a reason: the header was inconsistent. */
        check(!expect_ok || st == EM_ERR_OOM);
        if (mode % 3 == 1)
            check(released == 0);
        free(buf);
        return 0;
    }
    check(expect_ok);
    check(a != NULL);
    read_back(a, buf, nbytes);
    views(a, buf, nbytes);

    /* A bitcast to another dtype of the same size keeps the bytes (pred
     * only from clean 0/1 bytes). */
    for (int other = 0; other < EM_DTYPE_COUNT; other++) {
        if (other == dt || em_dtype_size((em_dtype)other) != em_dtype_size((em_dtype)dt))
            continue;
        if (other == EM_PRED && !is_pred_clean(buf, nbytes))
            continue;
        em_array *b = NULL;
        if (em_bitcast(a, (em_dtype)other, &b) == EM_OK)
            read_back(b, buf, nbytes);
        em_array_release(b);
    }
    em_array_release(a);
    if (mode % 3 == 1)
        check(released == 1); /* the external memory was given back once */
    free(buf);
    return 0;
}
