/*
 * fuzz_safetensors.c — libFuzzer target for the safetensors reader: parse
 * the input as a whole file (em_safetensors_open_memory), walk every
 * accessor, get every tensor and read all of its bytes, closing the handle
 * before the arrays so that they must keep the mapping alive on their own.
 * The same bytes minus the 8-byte length also go to the JSON parser as a
 * sharded index.
 *
 * Anything refused must be refused with a status, a message and no handle.
 *
 * Run: make -C test/fuzz run-safetensors SECONDS=60
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emily_io.h"

static void check(bool ok) {
    if (!ok)
        __builtin_trap();
}

static void read_all(em_array *a) {
    size_t n = em_array_nbytes(a);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return;
    check(em_read(a, buf, n) == EM_OK);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < n; i++)
        sink ^= buf[i];
    (void)sink;
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    em_safetensors_index *ix = NULL;
    if (em_safetensors_index_parse(data, size, &ix) == EM_OK) {
        for (int64_t i = 0; i < em_safetensors_index_count(ix); i++) {
            const char *t, *f;
            check(em_safetensors_index_at(ix, i, &t, &f) == EM_OK);
            check(strlen(t) + strlen(f) < size + 2);
        }
        em_safetensors_index_close(ix);
    } else {
        check(ix == NULL && em_last_error()[0] != '\0');
    }

    em_safetensors *f = NULL;
    em_status st = em_safetensors_open_memory(data, size, &f);
    if (st != EM_OK) {
        check(f == NULL && em_last_error()[0] != '\0');
        return 0;
    }
    int64_t n = em_safetensors_count(f);
    em_array **arrays = calloc(n ? (size_t)n : 1, sizeof *arrays);
    for (int64_t i = 0; i < n; i++) {
        em_safetensors_tensor t;
        check(em_safetensors_tensor_at(f, i, &t) == EM_OK);
        check(em_safetensors_find(f, t.name) == i);
        check(0 <= t.begin && t.begin <= t.end && (uint64_t)t.end <= size);
        em_array *a = NULL;
        check(em_safetensors_get_bytes(f, t.name, &a) == EM_OK);
        check(em_array_nbytes(a) == (size_t)(t.end - t.begin));
        em_array_release(a);
        a = NULL;
        st = em_safetensors_get(f, t.name, &a);
        if (st != EM_OK) {
            check(a == NULL && (t.dtype < 0 || t.ndim > EM_MAX_NDIM));
            continue;
        }
        check(em_array_nbytes(a) == (size_t)(t.end - t.begin));
        if (arrays)
            arrays[i] = a;
        else
            em_array_release(a);
    }
    for (int64_t i = 0; i < em_safetensors_metadata_count(f); i++) {
        const char *k, *v;
        check(em_safetensors_metadata_at(f, i, &k, &v) == EM_OK);
        check(strlen(k) < size && strlen(v) < size);
    }
    check(em_safetensors_tensor_at(f, n, &(em_safetensors_tensor){0}) != EM_OK);
    em_safetensors_close(f);
    for (int64_t i = 0; arrays && i < n; i++)
        if (arrays[i]) {
            read_all(arrays[i]);
            em_array_release(arrays[i]);
        }
    free(arrays);
    return 0;
}
