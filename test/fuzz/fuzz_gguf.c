/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader: parse the input as a
 * whole file (em_gguf_open_memory), walk every metadata value through
 * every accessor (nested arrays included), every tensor info, get every
 * tensor and read all of its bytes after the handle is closed.
 *
 * Run: make -C test/fuzz run-gguf SECONDS=60
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emily_ggml.h"
#include "emily_io.h"

static void check(bool ok) {
    if (!ok)
        __builtin_trap();
}

static const uint8_t *fuzz_base;
static size_t fuzz_size;

/* Values point into the handle's own copy of the input, so only their
 * lengths can be checked against the input's size. */
static void walk(const em_gguf_value *v, int depth) {
    check(depth <= 32);
    int64_t i;
    uint64_t u;
    double x;
    const char *s;
    size_t n;
    (void)em_gguf_value_i64(v, &i);
    (void)em_gguf_value_u64(v, &u);
    (void)em_gguf_value_f64(v, &x);
    if (em_gguf_value_string(v, &s, &n) == EM_OK) {
        check(n <= fuzz_size);
        volatile char sink = 0;
        for (size_t k = 0; k < n; k++)
            sink ^= s[k];
        (void)sink;
    }
    if (v->type == EM_GGUF_ARRAY) {
        check(v->len <= fuzz_size);
        for (uint64_t k = 0; k < v->len; k++) {
            em_gguf_value e;
            check(em_gguf_value_element(v, k, &e) == EM_OK);
            walk(&e, depth + 1);
        }
        em_gguf_value e;
        check(em_gguf_value_element(v, v->len, &e) != EM_OK);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_base = data;
    fuzz_size = size;
    em_gguf *f = NULL;
    em_status st = em_gguf_open_memory(data, size, &f);
    if (st != EM_OK) {
        check(f == NULL && em_last_error()[0] != '\0');
        return 0;
    }
    check(em_gguf_data_offset(f) <= size);
    for (int64_t i = 0; i < em_gguf_kv_count(f); i++) {
        const char *key;
        size_t key_len;
        em_gguf_value v;
        check(em_gguf_kv_at(f, i, &key, &key_len, &v) == EM_OK);
        check(key_len <= size);
        walk(&v, 0);
    }
    int64_t n = em_gguf_tensor_count(f);
    em_array **arrays = calloc(n ? (size_t)n : 1, sizeof *arrays);
    for (int64_t i = 0; i < n; i++) {
        em_gguf_tensor t;
        check(em_gguf_tensor_at(f, i, &t) == EM_OK);
        check(em_gguf_data_offset(f) + t.offset + t.nbytes <= size);
        /* Names with a NUL inside cannot be asked for by C string. */
        if (memchr(t.name, 0, t.name_len))
            continue;
        char *name = malloc(t.name_len + 1);
        if (!name)
            continue;
        memcpy(name, t.name, t.name_len);
        name[t.name_len] = '\0';
        check(em_gguf_find_tensor(f, name) == i);
        em_array *a = NULL;
        int type = -1;
        st = em_gguf_get(f, name, &a, &type);
        free(name);
        if (st != EM_OK) {
            check(a == NULL);
            continue;
        }
        check(type == t.ggml_type);
        check(em_array_nbytes(a) == t.nbytes);
        if (arrays)
            arrays[i] = a;
        else
            em_array_release(a);
    }
    em_gguf_close(f);
    for (int64_t i = 0; arrays && i < n; i++)
        if (arrays[i]) {
            size_t nb = em_array_nbytes(arrays[i]);
            uint8_t *buf = malloc(nb ? nb : 1);
            if (buf) {
                check(em_read(arrays[i], buf, nb) == EM_OK);
                free(buf);
            }
            em_array_release(arrays[i]);
        }
    free(arrays);
    return 0;
}
