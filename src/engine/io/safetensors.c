/*
 * safetensors.c — the safetensors format (include/emily_io.h): reader over
 * a mapping, writer, and the sharded index.
 *
 * Everything in the header is checked before the handle is returned, so
 * em_safetensors_get only slices bytes known to lie inside the data area.
 */
#include "io_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The reference implementation's bound on the header. */
#define ST_MAX_HEADER ((uint64_t)100000000)
/* More dims than any real tensor has; bounds the work on a hostile shape. */
#define ST_MAX_DIMS 64

/* The dtypes safetensors names, their width in bits, and the engine dtype
 * (-1: one the engine lacks; listed, but get refuses it). */
typedef struct st_dtype_row {
    const char *name;
    int bits;
    int dtype;
} st_dtype_row;

static const st_dtype_row st_dtypes[] = {
    {"BOOL", 8, EM_PRED},     {"U8", 8, EM_U8},        {"I8", 8, EM_S8},
    {"U16", 16, EM_U16},      {"I16", 16, EM_S16},     {"U32", 32, EM_U32},
    {"I32", 32, EM_S32},      {"U64", 64, EM_U64},     {"I64", 64, EM_S64},
    {"F16", 16, EM_F16},      {"BF16", 16, EM_BF16},   {"F32", 32, EM_F32},
    {"F64", 64, EM_F64},      {"C64", 64, EM_C64},     {"F8_E4M3", 8, -1},
    {"F8_E5M2", 8, -1},       {"F8_E8M0", 8, -1},      {"F6_E2M3", 6, -1},
    {"F6_E3M2", 6, -1},       {"F4", 4, -1},
};
#define ST_NDTYPES (sizeof st_dtypes / sizeof st_dtypes[0])

static const st_dtype_row *st_dtype_by_name(const char *name) {
    for (size_t i = 0; i < ST_NDTYPES; i++)
        if (strcmp(st_dtypes[i].name, name) == 0)
            return &st_dtypes[i];
    return NULL;
}

static const char *st_name_of_dtype(em_dtype dtype) {
    for (size_t i = 0; i < ST_NDTYPES; i++)
        if (st_dtypes[i].dtype == (int)dtype)
            return st_dtypes[i].name;
    return NULL;
}

typedef struct st_tensor {
    char *name;
    char *dtype_name;
    int dtype;
    int ndim;
    int64_t *shape;
    int64_t begin, end;
} st_tensor;

struct em_safetensors {
    em_io_mapping *map;
    char *path;
    const uint8_t *data_area;
    uint64_t data_size;
    uint64_t header_end; /* 8 + header length: file offset of the data */
    int64_t ntensors;
    st_tensor *tensors;
    int64_t *by_name; /* tensor indices sorted by name */
    int64_t nmeta;
    char **meta_keys, **meta_values;
};

void em_safetensors_close(em_safetensors *f) {
    if (!f)
        return;
    for (int64_t i = 0; i < f->ntensors; i++) {
        free(f->tensors[i].name);
        free(f->tensors[i].dtype_name);
        free(f->tensors[i].shape);
    }
    for (int64_t i = 0; i < f->nmeta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->tensors);
    free(f->by_name);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->path);
    em__io_mapping_release(f->map);
    free(f);
}

/* "safetensors: <file>: <message> (<field> at byte <offset>)". */
#define ST_FAIL(f, field, json_offset, fmt, ...)                               \
    em__fail(EM_ERR_ARGUMENT, "safetensors: %s: " fmt " (%s at byte %llu)",   \
             (f)->path, __VA_ARGS__, (field),                                  \
             (unsigned long long)(8 + (json_offset)))

static char *steal_string(em_json *v) {
    char *s = v->string;
    v->string = NULL;
    return s;
}

static em_status parse_metadata(em_safetensors *f, em_json *meta) {
    if (meta->kind != EM_JSON_OBJECT)
        return ST_FAIL(f, "__metadata__", meta->offset, "%s",
                       "__metadata__ must be an object of strings");
    f->meta_keys = calloc(meta->len ? meta->len : 1, sizeof(char *));
    f->meta_values = calloc(meta->len ? meta->len : 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_values)
        return em__fail(EM_ERR_OOM, "safetensors: out of memory");
    for (size_t i = 0; i < meta->len; i++) {
        em_json *value = &meta->items[i];
        if (value->kind != EM_JSON_STRING)
            return ST_FAIL(f, "__metadata__", value->offset,
                           "metadata value of \"%s\" is not a string",
                           meta->keys[i]);
        f->meta_keys[f->nmeta] = meta->keys[i];
        meta->keys[i] = NULL;
        f->meta_values[f->nmeta++] = steal_string(value);
    }
    return EM_OK;
}

static bool is_index(const em_json *v) {
    return v->kind == EM_JSON_INT && v->integer >= 0;
}

static em_status parse_tensor(em_safetensors *f, const char *name,
                              em_json *entry, st_tensor *t) {
    if (entry->kind != EM_JSON_OBJECT)
        return ST_FAIL(f, "tensor", entry->offset,
                       "the entry of tensor \"%s\" is not an object", name);
    em_json *dtype = (em_json *)em__json_get(entry, "dtype");
    const em_json *shape = em__json_get(entry, "shape");
    const em_json *offsets = em__json_get(entry, "data_offsets");
    if (!dtype || dtype->kind != EM_JSON_STRING)
        return ST_FAIL(f, "dtype", entry->offset,
                       "tensor \"%s\" has no dtype string", name);
    if (!shape || shape->kind != EM_JSON_ARRAY)
        return ST_FAIL(f, "shape", entry->offset,
                       "tensor \"%s\" has no shape list", name);
    if (!offsets || offsets->kind != EM_JSON_ARRAY || offsets->len != 2 ||
        !is_index(&offsets->items[0]) || !is_index(&offsets->items[1]))
        return ST_FAIL(f, "data_offsets", offsets ? offsets->offset : entry->offset,
                       "tensor \"%s\" needs data_offsets [begin, end] of "
                       "non-negative integers",
                       name);
    if (shape->len > ST_MAX_DIMS)
        return ST_FAIL(f, "shape", shape->offset,
                       "tensor \"%s\" has %zu dims (at most %d)", name,
                       shape->len, ST_MAX_DIMS);
    const st_dtype_row *row = st_dtype_by_name(dtype->string);
    t->dtype = row ? row->dtype : -1;
    t->dtype_name = steal_string(dtype);
    t->ndim = (int)shape->len;
    t->shape = malloc((shape->len ? shape->len : 1) * sizeof(int64_t));
    if (!t->shape)
        return em__fail(EM_ERR_OOM, "safetensors: out of memory");
    /* Element count, exact or "overflowed" (only matters when no dim is 0). */
    uint64_t count = 1;
    bool overflow = false, empty = false;
    for (size_t d = 0; d < shape->len; d++) {
        if (!is_index(&shape->items[d]))
            return ST_FAIL(f, "shape", shape->items[d].offset,
                           "tensor \"%s\": dim %zu is not a non-negative "
                           "integer",
                           name, d);
        uint64_t dim = (uint64_t)shape->items[d].integer;
        t->shape[d] = (int64_t)dim;
        if (dim == 0)
            empty = true;
        else if (count > UINT64_MAX / 8 / dim)
            overflow = true;
        else
            count *= dim;
    }
    if (empty)
        count = 0;
    else if (overflow)
        return ST_FAIL(f, "shape", shape->offset,
                       "tensor \"%s\": the element count overflows", name);
    t->begin = offsets->items[0].integer;
    t->end = offsets->items[1].integer;
    if (t->end < t->begin || (uint64_t)t->end > f->data_size)
        return ST_FAIL(f, "data_offsets", offsets->offset,
                       "tensor \"%s\": data_offsets [%lld, %lld] outside the "
                       "%llu-byte data area",
                       name, (long long)t->begin, (long long)t->end,
                       (unsigned long long)f->data_size);
    if (row) {
        uint64_t bits = count * (uint64_t)row->bits;
        uint64_t want = bits / 8;
        if (bits % 8 != 0 || (uint64_t)(t->end - t->begin) != want)
            return ST_FAIL(f, "data_offsets", offsets->offset,
                           "tensor \"%s\": %lld bytes for %s of %llu "
                           "elements, expected %llu",
                           name, (long long)(t->end - t->begin),
                           t->dtype_name, (unsigned long long)count,
                           (unsigned long long)want);
    }
    return EM_OK;
}

static const em_safetensors *sort_file; /* qsort has no context argument */

static int by_name_cmp(const void *a, const void *b) {
    return strcmp(sort_file->tensors[*(const int64_t *)a].name,
                  sort_file->tensors[*(const int64_t *)b].name);
}

static int by_offset_cmp(const void *a, const void *b) {
    const st_tensor *x = &sort_file->tensors[*(const int64_t *)a];
    const st_tensor *y = &sort_file->tensors[*(const int64_t *)b];
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* A lock, as sort_file is shared: opens are rare, sorting is quick. */
static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;

/* Names unique (sorted index for lookups) and no two non-empty tensors
 * sharing bytes. */
static em_status check_layout(em_safetensors *f) {
    int64_t n = f->ntensors;
    f->by_name = malloc((n ? n : 1) * sizeof(int64_t));
    int64_t *by_offset = malloc((n ? n : 1) * sizeof(int64_t));
    if (!f->by_name || !by_offset) {
        free(by_offset);
        return em__fail(EM_ERR_OOM, "safetensors: out of memory");
    }
    for (int64_t i = 0; i < n; i++)
        f->by_name[i] = by_offset[i] = i;
    pthread_mutex_lock(&sort_lock);
    sort_file = f;
    qsort(f->by_name, (size_t)n, sizeof(int64_t), by_name_cmp);
    qsort(by_offset, (size_t)n, sizeof(int64_t), by_offset_cmp);
    sort_file = NULL;
    pthread_mutex_unlock(&sort_lock);
    em_status st = EM_OK;
    for (int64_t i = 1; i < n && st == EM_OK; i++)
        if (strcmp(f->tensors[f->by_name[i]].name,
                   f->tensors[f->by_name[i - 1]].name) == 0)
            st = em__fail(EM_ERR_ARGUMENT,
                          "safetensors: %s: tensor \"%s\" appears twice in "
                          "the header",
                          f->path, f->tensors[f->by_name[i]].name);
    int64_t prev_end = 0;
    const char *prev_name = NULL;
    for (int64_t i = 0; i < n && st == EM_OK; i++) {
        const st_tensor *t = &f->tensors[by_offset[i]];
        if (t->begin == t->end)
            continue;
        if (prev_name && t->begin < prev_end)
            st = em__fail(EM_ERR_ARGUMENT,
                          "safetensors: %s: tensors \"%s\" and \"%s\" overlap "
                          "(data_offsets %lld < %lld, at byte %llu)",
                          f->path, prev_name, t->name, (long long)t->begin,
                          (long long)prev_end,
                          (unsigned long long)(f->header_end + t->begin));
        prev_end = t->end;
        prev_name = t->name;
    }
    free(by_offset);
    return st;
}

static em_status parse_header(em_safetensors *f) {
    const em_io_mapping *m = f->map;
    if (m->size < 8)
        return em__fail(EM_ERR_ARGUMENT,
                        "safetensors: %s: the file is %zu bytes, too short "
                        "for the 8-byte header length (at byte 0)",
                        f->path, m->size);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | m->data[i];
    if (header_len > ST_MAX_HEADER || header_len > m->size - 8)
        return em__fail(EM_ERR_ARGUMENT,
                        "safetensors: %s: header length %llu exceeds the "
                        "file's %zu bytes after the length (or 100 MB) (at "
                        "byte 0)",
                        f->path, (unsigned long long)header_len, m->size - 8);
    f->header_end = 8 + header_len;
    f->data_area = m->data + f->header_end;
    f->data_size = m->size - f->header_end;
    char what[64 + 256];
    snprintf(what, sizeof what, "safetensors: %.255s: header", f->path);
    em_json root;
    em_status st =
        em__json_parse(what, (const char *)m->data + 8, header_len, 8, &root);
    if (st != EM_OK)
        return st;
    if (root.kind != EM_JSON_OBJECT) {
        em__json_free(&root);
        return ST_FAIL(f, "header", (size_t)0, "%s",
                       "the header is not a JSON object");
    }
    f->tensors = calloc(root.len ? root.len : 1, sizeof *f->tensors);
    if (!f->tensors) {
        em__json_free(&root);
        return em__fail(EM_ERR_OOM, "safetensors: out of memory");
    }
    bool seen_meta = false;
    for (size_t i = 0; i < root.len && st == EM_OK; i++) {
        if (strcmp(root.keys[i], "__metadata__") == 0) {
            if (seen_meta)
                st = ST_FAIL(f, "__metadata__", root.items[i].offset, "%s",
                             "__metadata__ appears twice");
            else
                st = parse_metadata(f, &root.items[i]);
            seen_meta = true;
            continue;
        }
        if (root.key_lens[i] != strlen(root.keys[i])) {
            st = ST_FAIL(f, "tensor name", root.items[i].offset, "%s",
                         "a tensor name contains NUL");
            break;
        }
        st_tensor *t = &f->tensors[f->ntensors++];
        t->name = root.keys[i];
        root.keys[i] = NULL;
        st = parse_tensor(f, t->name, &root.items[i], t);
    }
    em__json_free(&root);
    return st == EM_OK ? check_layout(f) : st;
}

static em_status st_open(em_io_mapping *m, const char *path,
                         em_safetensors **out) {
    em_safetensors *f = calloc(1, sizeof *f);
    char *name = em__io_strdup(path);
    if (!f || !name) {
        free(f);
        free(name);
        em__io_mapping_release(m);
        return em__fail(EM_ERR_OOM, "safetensors: out of memory");
    }
    f->map = m;
    f->path = name;
    em_status st = parse_header(f);
    if (st != EM_OK) {
        em_safetensors_close(f);
        return st;
    }
    *out = f;
    return EM_OK;
}

em_status em_safetensors_open(const char *path, em_safetensors **out) {
    *out = NULL;
    em_io_mapping *m;
    em_status st = em__io_map_file("safetensors", path, &m);
    return st == EM_OK ? st_open(m, path, out) : st;
}

em_status em_safetensors_open_memory(const void *bytes, size_t n,
                                     em_safetensors **out) {
    *out = NULL;
    em_io_mapping *m;
    em_status st = em__io_map_memory("safetensors", bytes, n, &m);
    return st == EM_OK ? st_open(m, NULL, out) : st;
}

int64_t em_safetensors_count(const em_safetensors *f) { return f->ntensors; }

em_status em_safetensors_tensor_at(const em_safetensors *f, int64_t index,
                                   em_safetensors_tensor *out) {
    if (index < 0 || index >= f->ntensors)
        return em__fail(EM_ERR_ARGUMENT,
                        "safetensors: tensor index %lld out of range [0, %lld)",
                        (long long)index, (long long)f->ntensors);
    const st_tensor *t = &f->tensors[index];
    *out = (em_safetensors_tensor){
        .name = t->name,
        .dtype_name = t->dtype_name,
        .dtype = t->dtype,
        .ndim = t->ndim,
        .shape = t->shape,
        .begin = t->begin,
        .end = t->end,
    };
    return EM_OK;
}

int64_t em_safetensors_find(const em_safetensors *f, const char *name) {
    int64_t lo = 0, hi = f->ntensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[f->by_name[mid]].name, name);
        if (c == 0)
            return f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

int64_t em_safetensors_metadata_count(const em_safetensors *f) {
    return f->nmeta;
}

em_status em_safetensors_metadata_at(const em_safetensors *f, int64_t index,
                                     const char **key, const char **value) {
    if (index < 0 || index >= f->nmeta)
        return em__fail(EM_ERR_ARGUMENT,
                        "safetensors: metadata index %lld out of range [0, "
                        "%lld)",
                        (long long)index, (long long)f->nmeta);
    *key = f->meta_keys[index];
    *value = f->meta_values[index];
    return EM_OK;
}

em_status em_safetensors_get(em_safetensors *f, const char *name,
                             em_array **out) {
    *out = NULL;
    int64_t i = em_safetensors_find(f, name);
    if (i < 0)
        return em__fail(EM_ERR_ARGUMENT, "safetensors: %s: no tensor \"%s\"",
                        f->path, name);
    const st_tensor *t = &f->tensors[i];
    if (t->dtype < 0)
        return em__fail(EM_ERR_UNSUPPORTED,
                        "safetensors: %s: tensor \"%s\" has dtype %s, which "
                        "the engine does not have",
                        f->path, name, t->dtype_name);
    if (t->ndim > EM_MAX_NDIM)
        return em__fail(EM_ERR_UNSUPPORTED,
                        "safetensors: %s: tensor \"%s\" has %d dims, the "
                        "engine at most %d",
                        f->path, name, t->ndim, EM_MAX_NDIM);
    return em__io_array(f->map, f->data_area + t->begin,
                        (size_t)(t->end - t->begin), t->shape, t->ndim,
                        (em_dtype)t->dtype, out);
}

em_status em_safetensors_get_bytes(em_safetensors *f, const char *name,
                                   em_array **out) {
    *out = NULL;
    int64_t i = em_safetensors_find(f, name);
    if (i < 0)
        return em__fail(EM_ERR_ARGUMENT, "safetensors: %s: no tensor \"%s\"",
                        f->path, name);
    const st_tensor *t = &f->tensors[i];
    int64_t nbytes = t->end - t->begin;
    return em__io_array(f->map, f->data_area + t->begin, (size_t)nbytes,
                        &nbytes, 1, EM_U8, out);
}

/* ---- writer ------------------------------------------------------------- */

typedef struct strbuf {
    char *data;
    size_t len, cap;
    bool oom;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *data = realloc(b->data, cap);
        if (!data) {
            b->oom = true;
            return;
        }
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void sb_puts(strbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(strbuf *b, const char *fmt, long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, fmt, v);
    sb_put(b, tmp, (size_t)n);
}

/* A JSON string: quotes, backslashes and control characters escaped, other
 * bytes (UTF-8) as they are. */
static void sb_json_string(strbuf *b, const char *s) {
    sb_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"')
            sb_puts(b, "\\\"");
        else if (*p == '\\')
            sb_puts(b, "\\\\");
        else if (*p < 0x20)
            sb_printf(b, "\\u%04llx", *p);
        else
            sb_put(b, (const char *)p, 1);
    }
    sb_puts(b, "\"");
}

typedef struct save_order {
    const char *name;
    size_t esize;
    size_t index;
} save_order;

static int save_order_cmp(const void *a, const void *b) {
    const save_order *x = a, *y = b;
    if (x->esize != y->esize)
        return x->esize > y->esize ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int name_ptr_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static em_status check_unique_names(const char *const *names, size_t n) {
    const char **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return em__fail(EM_ERR_OOM, "safetensors: out of memory");
    memcpy(sorted, names, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, name_ptr_cmp);
    em_status st = EM_OK;
    for (size_t i = 1; i < n && st == EM_OK; i++)
        if (strcmp(sorted[i], sorted[i - 1]) == 0)
            st = em__fail(EM_ERR_ARGUMENT,
                          "safetensors: save: tensor name \"%s\" given twice",
                          sorted[i]);
    free(sorted);
    return st;
}

static em_status write_all(FILE *fp, const void *data, size_t n,
                           const char *path) {
    if (n && fwrite(data, 1, n, fp) != n)
        return em__fail(EM_ERR_RUNTIME, "safetensors: writing %s failed",
                        path);
    return EM_OK;
}

static em_status write_file(FILE *fp, const char *path, const strbuf *header,
                            em_array *const *arrays, const save_order *order,
                            size_t n) {
    uint8_t len_bytes[8];
    for (int i = 0; i < 8; i++)
        len_bytes[i] = (uint8_t)((uint64_t)header->len >> (8 * i));
    em_status st = write_all(fp, len_bytes, 8, path);
    if (st == EM_OK)
        st = write_all(fp, header->data, header->len, path);
    for (size_t k = 0; k < n && st == EM_OK; k++) {
        em_array *a = arrays[order[k].index];
        size_t nbytes = em_array_nbytes(a);
        void *tmp = malloc(nbytes ? nbytes : 1);
        if (!tmp)
            return em__fail(EM_ERR_OOM,
                            "safetensors: out of memory writing \"%s\"",
                            order[k].name);
        st = em_read(a, tmp, nbytes);
        if (st == EM_OK)
            st = write_all(fp, tmp, nbytes, path);
        free(tmp);
    }
    return st;
}

em_status em_safetensors_save(const char *path, const char *const *names,
                              em_array *const *arrays, size_t n,
                              const char *const *metadata_keys,
                              const char *const *metadata_values,
                              size_t nmeta) {
    save_order *order = calloc(n ? n : 1, sizeof *order);
    if (!order)
        return em__fail(EM_ERR_OOM, "safetensors: out of memory");
    em_status st = EM_OK;
    for (size_t i = 0; i < n && st == EM_OK; i++) {
        if (!names[i] || !arrays[i] || strcmp(names[i], "__metadata__") == 0)
            st = em__fail(EM_ERR_ARGUMENT,
                          "safetensors: save: tensor %zu has no usable name "
                          "or array",
                          i);
        else if (!st_name_of_dtype(em_array_dtype(arrays[i])))
            st = em__fail(EM_ERR_UNSUPPORTED,
                          "safetensors: save: tensor \"%s\" has dtype %s, "
                          "which safetensors cannot store",
                          names[i], em_dtype_name(em_array_dtype(arrays[i])));
        order[i] = (save_order){
            names[i],
            arrays[i] ? em_dtype_size(em_array_dtype(arrays[i])) : 0, i};
    }
    if (st == EM_OK)
        st = check_unique_names(names, n);
    if (st == EM_OK)
        qsort(order, n, sizeof *order, save_order_cmp);
    if (st == EM_OK)
        st = em_eval(arrays, n);
    strbuf h = {0};
    if (st == EM_OK) {
        sb_puts(&h, "{");
        bool first = true;
        if (nmeta) {
            sb_puts(&h, "\"__metadata__\":{");
            for (size_t i = 0; i < nmeta; i++) {
                if (i)
                    sb_puts(&h, ",");
                sb_json_string(&h, metadata_keys[i]);
                sb_puts(&h, ":");
                sb_json_string(&h, metadata_values[i]);
            }
            sb_puts(&h, "}");
            first = false;
        }
        long long offset = 0;
        for (size_t k = 0; k < n; k++) {
            em_array *a = arrays[order[k].index];
            if (!first)
                sb_puts(&h, ",");
            first = false;
            sb_json_string(&h, order[k].name);
            sb_puts(&h, ":{\"dtype\":\"");
            sb_puts(&h, st_name_of_dtype(em_array_dtype(a)));
            sb_puts(&h, "\",\"shape\":[");
            for (int d = 0; d < em_array_ndim(a); d++)
                sb_printf(&h, d ? ",%lld" : "%lld",
                          (long long)em_array_shape(a)[d]);
            sb_puts(&h, "],\"data_offsets\":[");
            sb_printf(&h, "%lld,", offset);
            offset += (long long)em_array_nbytes(a);
            sb_printf(&h, "%lld]}", offset);
        }
        sb_puts(&h, "}");
        while (!h.oom && h.len % 8 != 0)
            sb_puts(&h, " ");
        if (h.oom)
            st = em__fail(EM_ERR_OOM, "safetensors: out of memory");
    }
    char *tmp_path = NULL;
    if (st == EM_OK) {
        size_t plen = strlen(path) + 16;
        tmp_path = malloc(plen);
        if (!tmp_path)
            st = em__fail(EM_ERR_OOM, "safetensors: out of memory");
        else
            snprintf(tmp_path, plen, "%s.tmp-XXXXXX", path);
    }
    int fd = -1;
    if (st == EM_OK && (fd = mkstemp(tmp_path)) < 0)
        st = em__fail(EM_ERR_RUNTIME, "safetensors: cannot create %s: %s",
                      tmp_path, strerror(errno));
    if (st == EM_OK) {
        FILE *fp = fdopen(fd, "wb");
        if (!fp) {
            close(fd);
            st = em__fail(EM_ERR_RUNTIME, "safetensors: cannot write %s",
                          tmp_path);
        } else {
            st = write_file(fp, path, &h, arrays, order, n);
            if (fclose(fp) != 0 && st == EM_OK)
                st = em__fail(EM_ERR_RUNTIME, "safetensors: writing %s failed",
                              path);
        }
        if (st == EM_OK && rename(tmp_path, path) != 0)
            st = em__fail(EM_ERR_RUNTIME, "safetensors: cannot rename to %s: %s",
                          path, strerror(errno));
        if (st != EM_OK)
            unlink(tmp_path);
    }
    free(tmp_path);
    free(h.data);
    free(order);
    return st;
}

/* ---- sharded index ------------------------------------------------------ */

struct em_safetensors_index {
    int64_t n;
    char **tensors, **files;
};

void em_safetensors_index_close(em_safetensors_index *index) {
    if (!index)
        return;
    for (int64_t i = 0; i < index->n; i++) {
        free(index->tensors[i]);
        free(index->files[i]);
    }
    free(index->tensors);
    free(index->files);
    free(index);
}

em_status em_safetensors_index_parse(const void *json, size_t n,
                                     em_safetensors_index **out) {
    *out = NULL;
    em_json root;
    em_status st = em__json_parse("safetensors index", json, n, 0, &root);
    if (st != EM_OK)
        return st;
    em_json *map = (em_json *)em__json_get(&root, "weight_map");
    if (!map || map->kind != EM_JSON_OBJECT) {
        em__json_free(&root);
        return em__fail(EM_ERR_ARGUMENT,
                        "safetensors index: no \"weight_map\" object");
    }
    em_safetensors_index *index = calloc(1, sizeof *index);
    if (index) {
        index->tensors = calloc(map->len ? map->len : 1, sizeof(char *));
        index->files = calloc(map->len ? map->len : 1, sizeof(char *));
    }
    if (!index || !index->tensors || !index->files) {
        em__json_free(&root);
        em_safetensors_index_close(index);
        return em__fail(EM_ERR_OOM, "safetensors index: out of memory");
    }
    for (size_t i = 0; i < map->len && st == EM_OK; i++) {
        em_json *file = &map->items[i];
        if (file->kind != EM_JSON_STRING || file->len != strlen(file->string)) {
            st = em__fail(EM_ERR_ARGUMENT,
                          "safetensors index: weight_map[\"%s\"] is not a file "
                          "name (at byte %zu)",
                          map->keys[i], file->offset);
            break;
        }
        index->tensors[index->n] = map->keys[i];
        map->keys[i] = NULL;
        index->files[index->n++] = steal_string(file);
    }
    em__json_free(&root);
    if (st != EM_OK) {
        em_safetensors_index_close(index);
        return st;
    }
    *out = index;
    return EM_OK;
}

em_status em_safetensors_index_open(const char *path,
                                    em_safetensors_index **out) {
    *out = NULL;
    em_io_mapping *m;
    em_status st = em__io_map_file("safetensors index", path, &m);
    if (st != EM_OK)
        return st;
    st = em_safetensors_index_parse(m->data, m->size, out);
    em__io_mapping_release(m);
    return st;
}

int64_t em_safetensors_index_count(const em_safetensors_index *index) {
    return index->n;
}

em_status em_safetensors_index_at(const em_safetensors_index *index,
                                  int64_t i, const char **tensor,
                                  const char **file) {
    if (i < 0 || i >= index->n)
        return em__fail(EM_ERR_ARGUMENT,
                        "safetensors index: entry %lld out of range [0, %lld)",
                        (long long)i, (long long)index->n);
    *tensor = index->tensors[i];
    *file = index->files[i];
    return EM_OK;
}
