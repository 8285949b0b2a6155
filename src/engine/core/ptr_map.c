/*
 * ptr_map.c — a pointer -> index map (open addressing, linear probing), for
 * the graph passes: the compiler's tape passes and autodiff's walk.
 */
#include "internal.h"

#include <stdlib.h>

static bool ptr_map_grow(em__ptr_map *m) {
    size_t ncap = m->cap ? m->cap * 2 : 64;
    const void **keys = calloc(ncap, sizeof *keys);
    size_t *values = malloc(ncap * sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) {
            size_t j = em__hash_ptr(m->keys[i]) & (ncap - 1);
            while (keys[j])
                j = (j + 1) & (ncap - 1);
            keys[j] = m->keys[i];
            values[j] = m->values[i];
        }
    free(m->keys);
    free(m->values);
    m->keys = keys;
    m->values = values;
    m->cap = ncap;
    return true;
}

bool em__ptr_map_put(em__ptr_map *m, const void *key, size_t value) {
    if ((m->len + 1) * 2 > m->cap && !ptr_map_grow(m))
        return false;
    size_t j = em__hash_ptr(key) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != key)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) {
        m->keys[j] = key;
        m->len++;
    }
    m->values[j] = value;
    return true;
}

bool em__ptr_map_get(const em__ptr_map *m, const void *key, size_t *value) {
    if (!m->cap)
        return false;
    size_t j = em__hash_ptr(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (m->keys[j] == key) {
            *value = m->values[j];
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return false;
}

void em__ptr_map_free(em__ptr_map *m) {
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof *m);
}
