/*
 * gguf.c — GGUF files, versions 2 and 3 (include/emily_io.h).
 *
 * The whole header (metadata and tensor infos) is walked once on open with
 * a cursor that checks every read against the end of the file; counts are
 * checked against the bytes left before anything is allocated for them, so
 * allocations stay proportional to the file's size. Values are not copied:
 * the index records where each lies in the mapping. Arrays whose elements
 * have variable sizes (strings, nested arrays) get a per-element table so
 * that element access is O(1).
 */
#include "emily_ggml.h"
#include "io_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* Deepest nesting of arrays accepted in a metadata value. */
#define GGUF_MAX_ARRAY_DEPTH 16
/* The largest general.alignment accepted (ggml's are 32 or so). */
#define GGUF_MAX_ALIGNMENT ((uint64_t)1 << 30)

typedef struct gguf_node {
    uint32_t type;
    uint32_t elem_type;       /* arrays */
    uint64_t pos;             /* scalar or string bytes; first element */
    uint64_t len;             /* string bytes; array elements */
    struct gguf_node *items;  /* arrays of strings or arrays: each element */
} gguf_node;

typedef struct gguf_kv {
    uint64_t key_pos, key_len;
    gguf_node value;
} gguf_kv;

/* ggml tensors have at most 4 dimensions (GGML_MAX_DIMS). */
#define GGUF_MAX_DIMS 4

typedef struct gguf_tinfo {
    uint64_t name_pos, name_len;
    uint64_t info_pos; /* where the info starts, for messages */
    int n_dims;
    uint64_t dims[GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t offset, nbytes;
} gguf_tinfo;

struct em_gguf {
    em_io_mapping *map;
    char *path;
    uint32_t version;
    uint64_t alignment, data_offset;
    int64_t nkv, ntensors;
    gguf_kv *kvs;
    gguf_tinfo *tensors;
    int64_t *tensors_by_name;
};

/* ---- types -------------------------------------------------------------- */

static const char *const value_type_names[] = {
    "u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
    "bool", "string", "array", "u64", "i64", "f64",
};

const char *em_gguf_type_name(int type) {
    if (type < 0 || type > EM_GGUF_F64)
        return NULL;
    return value_type_names[type];
}

/* Bytes of a fixed-size value type; 0 for string, array and unknown. */
static uint64_t fixed_size(uint32_t type) {
    switch (type) {
    case EM_GGUF_U8: case EM_GGUF_I8: case EM_GGUF_BOOL: return 1;
    case EM_GGUF_U16: case EM_GGUF_I16: return 2;
    case EM_GGUF_U32: case EM_GGUF_I32: case EM_GGUF_F32: return 4;
    case EM_GGUF_U64: case EM_GGUF_I64: case EM_GGUF_F64: return 8;
    default: return 0;
    }
}

/* ggml's type names, for listings and messages about types the engine
 * does not read (ggml numbers them; gaps are retired types). */
static const char *ggml_name(uint32_t type) {
    static const char *const names[] = {
        "f32",    "f16",     "q4_0",    "q4_1",   NULL,     NULL,
        "q5_0",   "q5_1",    "q8_0",    "q8_1",   "q2_k",   "q3_k",
        "q4_k",   "q5_k",    "q6_k",    "q8_k",   "iq2_xxs", "iq2_xs",
        "iq3_xxs", "iq1_s",  "iq4_nl",  "iq3_s",  "iq2_s",  "iq4_xs",
        "i8",     "i16",     "i32",     "i64",    "f64",    "iq1_m",
        "bf16",   NULL,      NULL,      NULL,     "tq1_0",  "tq2_0",
        NULL,     NULL,      NULL,      "mxfp4",
    };
    if (type < sizeof names / sizeof names[0] && names[type])
        return names[type];
    return "unknown";
}

/* Plain element types: ggml type -> engine dtype (or -1). */
static int plain_dtype(uint32_t type) {
    switch (type) {
    case EM_GGML_F32: return EM_F32;
    case EM_GGML_F16: return EM_F16;
    case EM_GGML_BF16: return EM_BF16;
    case 24: return EM_S8;
    case 25: return EM_S16;
    case 26: return EM_S32;
    case 27: return EM_S64;
    case 28: return EM_F64;
    default: return -1;
    }
}

/* Block layout of a type whose size is known; false otherwise. */
static bool block_layout(uint32_t type, uint64_t *elems, uint64_t *bytes) {
    int dtype = plain_dtype(type);
    if (dtype >= 0) {
        *elems = 1;
        *bytes = em_dtype_size((em_dtype)dtype);
        return true;
    }
    if (em_ggml_type_name((int)type) == NULL) {
        /* Types the engine does not read still have a known size, which
         * bounds-checks them like the others (ggml's block structs). */
        static const struct {
            uint32_t type, elems, bytes;
        } other[] = {
            {9, 32, 36},    /* q8_1 */    {10, 256, 84},  /* q2_k */
            {11, 256, 110}, /* q3_k */    {15, 256, 292}, /* q8_k */
            {16, 256, 66},  /* iq2_xxs */ {17, 256, 74},  /* iq2_xs */
            {18, 256, 98},  /* iq3_xxs */ {19, 256, 50},  /* iq1_s */
            {20, 32, 18},   /* iq4_nl */  {21, 256, 110}, /* iq3_s */
            {22, 256, 82},  /* iq2_s */   {23, 256, 136}, /* iq4_xs */
            {29, 256, 56},  /* iq1_m */   {34, 256, 54},  /* tq1_0 */
            {35, 256, 66},  /* tq2_0 */   {39, 32, 17},   /* mxfp4 */
        };
        for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
            if (other[i].type == type) {
                *elems = other[i].elems;
                *bytes = other[i].bytes;
                return true;
            }
        return false;
    }
    int64_t be, bb;
    if (em_ggml_type_info((int)type, &be, &bb) != EM_OK)
        return false;
    *elems = (uint64_t)be;
    *bytes = (uint64_t)bb;
    return true;
}

/* ---- the cursor --------------------------------------------------------- */

typedef struct cursor {
    em_gguf *f;
    const uint8_t *data;
    uint64_t size, pos;
} cursor;

#define GGUF_FAIL(cur, field, at, fmt, ...)                                    \
    em__fail(EM_ERR_ARGUMENT, "gguf: %s: %s at offset %llu: " fmt,            \
             (cur)->f->path, (field), (unsigned long long)(at), __VA_ARGS__)

static uint64_t left(const cursor *c) { return c->size - c->pos; }

static em_status need(cursor *c, const char *field, uint64_t n) {
    if (left(c) < n)
        return GGUF_FAIL(c, field, c->pos,
                         "needs %llu bytes, the file has %llu left",
                         (unsigned long long)n, (unsigned long long)left(c));
    return EM_OK;
}

static uint64_t load_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static em_status read_u32(cursor *c, const char *field, uint32_t *out) {
    em_status st = need(c, field, 4);
    if (st != EM_OK)
        return st;
    *out = (uint32_t)load_le(c->data + c->pos, 4);
    c->pos += 4;
    return EM_OK;
}

static em_status read_u64(cursor *c, const char *field, uint64_t *out) {
    em_status st = need(c, field, 8);
    if (st != EM_OK)
        return st;
    *out = load_le(c->data + c->pos, 8);
    c->pos += 8;
    return EM_OK;
}

static em_status read_string(cursor *c, const char *field, uint64_t *pos,
                             uint64_t *len) {
    uint64_t at = c->pos;
    em_status st = read_u64(c, field, len);
    if (st != EM_OK)
        return st;
    if (*len > left(c))
        return GGUF_FAIL(c, field, at,
                         "string of %llu bytes, the file has %llu left",
                         (unsigned long long)*len, (unsigned long long)left(c));
    *pos = c->pos;
    c->pos += *len;
    return EM_OK;
}

static void free_node(gguf_node *v) {
    if (v->items) {
        for (uint64_t i = 0; i < v->len; i++)
            free_node(&v->items[i]);
        free(v->items);
        v->items = NULL;
    }
}

static em_status read_value(cursor *c, const char *field, uint32_t type,
                            gguf_node *v, int depth) {
    uint64_t at = c->pos;
    v->type = type;
    uint64_t size = fixed_size(type);
    if (size) {
        em_status st = need(c, field, size);
        if (st != EM_OK)
            return st;
        if (type == EM_GGUF_BOOL && c->data[c->pos] > 1)
            return GGUF_FAIL(c, field, at, "bool of value %u",
                             (unsigned)c->data[c->pos]);
        v->pos = c->pos;
        c->pos += size;
        return EM_OK;
    }
    if (type == EM_GGUF_STRING)
        return read_string(c, field, &v->pos, &v->len);
    if (type != EM_GGUF_ARRAY)
        return GGUF_FAIL(c, field, at - 4, "unknown value type %u", type);
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return GGUF_FAIL(c, field, at, "arrays nested deeper than %d",
                         GGUF_MAX_ARRAY_DEPTH);
    uint64_t count;
    em_status st = read_u32(c, field, &v->elem_type);
    if (st == EM_OK)
        st = read_u64(c, field, &count);
    if (st != EM_OK)
        return st;
    v->pos = c->pos;
    uint64_t elem = fixed_size(v->elem_type);
    /* The smallest encoding of one element bounds the count. */
    uint64_t min_elem = elem ? elem
                        : v->elem_type == EM_GGUF_STRING ? 8
                        : v->elem_type == EM_GGUF_ARRAY  ? 12
                                                         : 0;
    if (!min_elem)
        return GGUF_FAIL(c, field, at, "array of unknown value type %u",
                         v->elem_type);
    if (count > left(c) / min_elem)
        return GGUF_FAIL(c, field, at,
                         "array of %llu %s elements, the file has %llu bytes "
                         "left",
                         (unsigned long long)count,
                         value_type_names[v->elem_type],
                         (unsigned long long)left(c));
    if (elem) {
        if (v->elem_type == EM_GGUF_BOOL)
            for (uint64_t i = 0; i < count; i++)
                if (c->data[c->pos + i] > 1)
                    return GGUF_FAIL(c, field, c->pos + i, "bool of value %u",
                                     (unsigned)c->data[c->pos + i]);
        v->len = count;
        c->pos += count * elem;
        return EM_OK;
    }
    v->items = calloc(count ? count : 1, sizeof *v->items);
    if (!v->items)
        return em__fail(EM_ERR_OOM, "gguf: %s: out of memory reading %s",
                        c->f->path, field);
    for (uint64_t i = 0; i < count; i++) {
        v->len = i + 1; /* items so far: what free_node releases */
        uint32_t sub = v->elem_type;
        if (sub == EM_GGUF_ARRAY)
            st = read_value(c, field, sub, &v->items[i], depth + 1);
        else
            st = read_string(c, field, &v->items[i].pos, &v->items[i].len);
        v->items[i].type = sub;
        if (st != EM_OK)
            return st;
    }
    v->len = count;
    return EM_OK;
}

/* ---- open --------------------------------------------------------------- */

void em_gguf_close(em_gguf *f) {
    if (!f)
        return;
    for (int64_t i = 0; i < f->nkv; i++)
        free_node(&f->kvs[i].value);
    free(f->kvs);
    free(f->tensors);
    free(f->tensors_by_name);
    free(f->path);
    em__io_mapping_release(f->map);
    free(f);
}

static bool key_is(const em_gguf *f, const gguf_kv *kv, const char *key) {
    size_t len = strlen(key);
    return kv->key_len == len &&
           memcmp(f->map->data + kv->key_pos, key, len) == 0;
}

static em_status read_alignment(cursor *c) {
    em_gguf *f = c->f;
    f->alignment = 32;
    for (int64_t i = 0; i < f->nkv; i++) {
        const gguf_kv *kv = &f->kvs[i];
        if (!key_is(f, kv, "general.alignment"))
            continue;
        em_gguf_value v = {.type = (int)kv->value.type,
                           .data = f->map->data + kv->value.pos};
        uint64_t a;
        if (kv->value.type == EM_GGUF_BOOL ||
            em_gguf_value_u64(&v, &a) != EM_OK || a == 0 ||
            (a & (a - 1)) != 0 || a > GGUF_MAX_ALIGNMENT)
            return GGUF_FAIL(c, "general.alignment", kv->value.pos, "%s",
                             "not a power of two integer up to 2^30");
        f->alignment = a;
    }
    return EM_OK;
}

static em_status read_tensor_info(cursor *c, gguf_tinfo *t) {
    t->info_pos = c->pos;
    em_status st = read_string(c, "tensor name", &t->name_pos, &t->name_len);
    uint32_t n_dims = 0;
    if (st == EM_OK)
        st = read_u32(c, "tensor n_dims", &n_dims);
    if (st != EM_OK)
        return st;
    if (n_dims > GGUF_MAX_DIMS)
        return GGUF_FAIL(c, "tensor n_dims", c->pos - 4,
                         "%u dims (at most %d)", n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t count = 1;
    bool empty = false;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t at = c->pos;
        if ((st = read_u64(c, "tensor dims", &t->dims[d])) != EM_OK)
            return st;
        if (t->dims[d] > (uint64_t)INT64_MAX)
            return GGUF_FAIL(c, "tensor dims", at, "dim %llu is negative",
                             (unsigned long long)t->dims[d]);
        if (t->dims[d] == 0)
            empty = true;
        else if (!empty && count > (uint64_t)INT64_MAX / t->dims[d])
            return GGUF_FAIL(c, "tensor dims", at, "%s",
                             "the element count overflows");
        else
            count *= t->dims[d];
    }
    if (empty)
        count = 0;
    if ((st = read_u32(c, "tensor type", &t->type)) != EM_OK)
        return st;
    if ((st = read_u64(c, "tensor offset", &t->offset)) != EM_OK)
        return st;
    uint64_t be, bb;
    t->nbytes = 0;
    if (block_layout(t->type, &be, &bb)) {
        uint64_t inner = n_dims ? t->dims[0] : 1;
        if (inner % be != 0)
            return GGUF_FAIL(c, "tensor dims", t->info_pos,
                             "innermost dim %llu of a %s tensor is not a "
                             "multiple of its %llu-element blocks",
                             (unsigned long long)inner, ggml_name(t->type),
                             (unsigned long long)be);
        uint64_t blocks = count / be;
        if (blocks && bb > UINT64_MAX / blocks)
            return GGUF_FAIL(c, "tensor dims", t->info_pos, "%s",
                             "the byte size overflows");
        t->nbytes = blocks * bb;
    }
    return EM_OK;
}

static const em_gguf *sort_gguf; /* qsort has no context argument */
static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;

static int compare_names(uint64_t ap, uint64_t al, uint64_t bp, uint64_t bl) {
    const uint8_t *d = sort_gguf->map->data;
    int c = memcmp(d + ap, d + bp, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int tensor_name_cmp(const void *a, const void *b) {
    const gguf_tinfo *x = &sort_gguf->tensors[*(const int64_t *)a];
    const gguf_tinfo *y = &sort_gguf->tensors[*(const int64_t *)b];
    return compare_names(x->name_pos, x->name_len, y->name_pos, y->name_len);
}

static int tensor_offset_cmp(const void *a, const void *b) {
    const gguf_tinfo *x = &sort_gguf->tensors[*(const int64_t *)a];
    const gguf_tinfo *y = &sort_gguf->tensors[*(const int64_t *)b];
    return (x->offset > y->offset) - (x->offset < y->offset);
}

static int kv_key_cmp(const void *a, const void *b) {
    const gguf_kv *x = &sort_gguf->kvs[*(const int64_t *)a];
    const gguf_kv *y = &sort_gguf->kvs[*(const int64_t *)b];
    return compare_names(x->key_pos, x->key_len, y->key_pos, y->key_len);
}

/* Unique keys and tensor names; tensors aligned, inside the file and not
 * overlapping. */
static em_status check_layout(cursor *c) {
    em_gguf *f = c->f;
    int64_t nt = f->ntensors, nk = f->nkv;
    int64_t *keys = malloc((nk ? nk : 1) * sizeof(int64_t));
    int64_t *by_offset = malloc((nt ? nt : 1) * sizeof(int64_t));
    f->tensors_by_name = malloc((nt ? nt : 1) * sizeof(int64_t));
    if (!keys || !by_offset || !f->tensors_by_name) {
        free(keys);
        free(by_offset);
        return em__fail(EM_ERR_OOM, "gguf: %s: out of memory", f->path);
    }
    for (int64_t i = 0; i < nk; i++)
        keys[i] = i;
    for (int64_t i = 0; i < nt; i++)
        f->tensors_by_name[i] = by_offset[i] = i;
    pthread_mutex_lock(&sort_lock);
    sort_gguf = f;
    qsort(keys, (size_t)nk, sizeof(int64_t), kv_key_cmp);
    qsort(f->tensors_by_name, (size_t)nt, sizeof(int64_t), tensor_name_cmp);
    qsort(by_offset, (size_t)nt, sizeof(int64_t), tensor_offset_cmp);
    em_status st = EM_OK;
    for (int64_t i = 1; i < nk && st == EM_OK; i++)
        if (kv_key_cmp(&keys[i], &keys[i - 1]) == 0)
            st = GGUF_FAIL(c, "metadata key", f->kvs[keys[i]].key_pos,
                           "key \"%.*s\" appears twice",
                           (int)(f->kvs[keys[i]].key_len > 200
                                     ? 200
                                     : f->kvs[keys[i]].key_len),
                           (const char *)f->map->data +
                               f->kvs[keys[i]].key_pos);
    for (int64_t i = 1; i < nt && st == EM_OK; i++)
        if (tensor_name_cmp(&f->tensors_by_name[i],
                            &f->tensors_by_name[i - 1]) == 0) {
            const gguf_tinfo *t = &f->tensors[f->tensors_by_name[i]];
            st = GGUF_FAIL(c, "tensor name", t->info_pos,
                           "tensor \"%.*s\" appears twice",
                           (int)(t->name_len > 200 ? 200 : t->name_len),
                           (const char *)f->map->data + t->name_pos);
        }
    sort_gguf = NULL;
    pthread_mutex_unlock(&sort_lock);
    uint64_t data_size = c->size - f->data_offset;
    uint64_t prev_end = 0;
    for (int64_t i = 0; i < nt && st == EM_OK; i++) {
        const gguf_tinfo *t = &f->tensors[by_offset[i]];
        int name_len = (int)(t->name_len > 200 ? 200 : t->name_len);
        const char *name = (const char *)f->map->data + t->name_pos;
        if (t->offset % f->alignment != 0)
            st = GGUF_FAIL(c, "tensor offset", t->info_pos,
                           "tensor \"%.*s\": offset %llu is not a multiple of "
                           "the alignment %llu",
                           name_len, name, (unsigned long long)t->offset,
                           (unsigned long long)f->alignment);
        else if (t->offset > data_size || t->nbytes > data_size - t->offset)
            st = GGUF_FAIL(c, "tensor offset", t->info_pos,
                           "tensor \"%.*s\": %llu bytes at offset %llu past "
                           "the %llu-byte data section",
                           name_len, name, (unsigned long long)t->nbytes,
                           (unsigned long long)t->offset,
                           (unsigned long long)data_size);
        else if (t->nbytes && t->offset < prev_end)
            st = GGUF_FAIL(c, "tensor offset", t->info_pos,
                           "tensor \"%.*s\" at offset %llu overlaps the "
                           "previous tensor, which ends at %llu",
                           name_len, name, (unsigned long long)t->offset,
                           (unsigned long long)prev_end);
        if (t->nbytes)
            prev_end = t->offset + t->nbytes;
    }
    free(keys);
    free(by_offset);
    return st;
}

static em_status parse(em_gguf *f) {
    cursor c = {.f = f, .data = f->map->data, .size = f->map->size, .pos = 0};
    em_status st = need(&c, "magic", 4);
    if (st != EM_OK)
        return st;
    if (memcmp(c.data, "GGUF", 4) != 0)
        return GGUF_FAIL(&c, "magic", (uint64_t)0, "%s",
                         "the file does not start with \"GGUF\"");
    c.pos = 4;
    if ((st = read_u32(&c, "version", &f->version)) != EM_OK)
        return st;
    if (f->version != 2 && f->version != 3)
        return em__fail(EM_ERR_UNSUPPORTED,
                        "gguf: %s: version at offset 4: version %u is not "
                        "supported (2 and 3 are%s)",
                        f->path, f->version,
                        f->version > 0xFFFF ? "; a big-endian file?" : "");
    uint64_t nt, nk;
    if ((st = read_u64(&c, "tensor count", &nt)) != EM_OK ||
        (st = read_u64(&c, "metadata count", &nk)) != EM_OK)
        return st;
    /* Smallest encodings: a kv is a key length, a type and one byte; a
     * tensor info a name length, n_dims, type and offset. */
    if (nk > left(&c) / 13)
        return GGUF_FAIL(&c, "metadata count", (uint64_t)16,
                         "%llu entries cannot fit in %llu bytes",
                         (unsigned long long)nk, (unsigned long long)left(&c));
    if (nt > left(&c) / 24)
        return GGUF_FAIL(&c, "tensor count", (uint64_t)8,
                         "%llu tensors cannot fit in %llu bytes",
                         (unsigned long long)nt, (unsigned long long)left(&c));
    f->kvs = calloc(nk ? nk : 1, sizeof *f->kvs);
    f->tensors = calloc(nt ? nt : 1, sizeof *f->tensors);
    if (!f->kvs || !f->tensors)
        return em__fail(EM_ERR_OOM, "gguf: %s: out of memory", f->path);
    for (uint64_t i = 0; i < nk; i++) {
        gguf_kv *kv = &f->kvs[i];
        f->nkv = (int64_t)i + 1;
        uint32_t type;
        if ((st = read_string(&c, "metadata key", &kv->key_pos,
                              &kv->key_len)) != EM_OK ||
            (st = read_u32(&c, "metadata value type", &type)) != EM_OK)
            return st;
        char field[96];
        snprintf(field, sizeof field, "metadata \"%.*s\"",
                 (int)(kv->key_len > 64 ? 64 : kv->key_len),
                 (const char *)c.data + kv->key_pos);
        if ((st = read_value(&c, field, type, &kv->value, 0)) != EM_OK)
            return st;
    }
    if ((st = read_alignment(&c)) != EM_OK)
        return st;
    for (uint64_t i = 0; i < nt; i++) {
        f->ntensors = (int64_t)i + 1;
        if ((st = read_tensor_info(&c, &f->tensors[i])) != EM_OK)
            return st;
    }
    uint64_t pad = (f->alignment - c.pos % f->alignment) % f->alignment;
    if (nt > 0 && pad > left(&c))
        return GGUF_FAIL(&c, "data section", c.pos,
                         "the file ends before the data section (%llu bytes "
                         "of padding)",
                         (unsigned long long)pad);
    f->data_offset = pad > left(&c) ? c.size : c.pos + pad;
    return check_layout(&c);
}

static em_status gguf_open(em_io_mapping *m, const char *path, em_gguf **out) {
    em_gguf *f = calloc(1, sizeof *f);
    char *name = em__io_strdup(path);
    if (!f || !name) {
        free(f);
        free(name);
        em__io_mapping_release(m);
        return em__fail(EM_ERR_OOM, "gguf: out of memory");
    }
    f->map = m;
    f->path = name;
    em_status st = parse(f);
    if (st != EM_OK) {
        em_gguf_close(f);
        return st;
    }
    *out = f;
    return EM_OK;
}

em_status em_gguf_open(const char *path, em_gguf **out) {
    *out = NULL;
    em_io_mapping *m;
    em_status st = em__io_map_file("gguf", path, &m);
    return st == EM_OK ? gguf_open(m, path, out) : st;
}

em_status em_gguf_open_memory(const void *bytes, size_t n, em_gguf **out) {
    *out = NULL;
    em_io_mapping *m;
    em_status st = em__io_map_memory("gguf", bytes, n, &m);
    return st == EM_OK ? gguf_open(m, NULL, out) : st;
}

uint32_t em_gguf_version(const em_gguf *f) { return f->version; }
uint64_t em_gguf_alignment(const em_gguf *f) { return f->alignment; }
uint64_t em_gguf_data_offset(const em_gguf *f) { return f->data_offset; }

/* ---- metadata ----------------------------------------------------------- */

static em_gguf_value make_value(const em_gguf *f, const gguf_node *v) {
    return (em_gguf_value){
        .type = (int)v->type,
        .data = f->map->data + v->pos,
        .len = v->type == EM_GGUF_STRING || v->type == EM_GGUF_ARRAY ? v->len
                                                                     : 0,
        .elem_type = v->type == EM_GGUF_ARRAY ? (int)v->elem_type : -1,
        .internal_ = v,
    };
}

int64_t em_gguf_kv_count(const em_gguf *f) { return f->nkv; }

em_status em_gguf_kv_at(const em_gguf *f, int64_t index, const char **key,
                        size_t *key_len, em_gguf_value *value) {
    if (index < 0 || index >= f->nkv)
        return em__fail(EM_ERR_ARGUMENT,
                        "gguf: metadata index %lld out of range [0, %lld)",
                        (long long)index, (long long)f->nkv);
    const gguf_kv *kv = &f->kvs[index];
    *key = (const char *)f->map->data + kv->key_pos;
    *key_len = (size_t)kv->key_len;
    *value = make_value(f, &kv->value);
    return EM_OK;
}

em_status em_gguf_find_kv(const em_gguf *f, const char *key,
                          em_gguf_value *value) {
    for (int64_t i = 0; i < f->nkv; i++)
        if (key_is(f, &f->kvs[i], key)) {
            *value = make_value(f, &f->kvs[i].value);
            return EM_OK;
        }
    return em__fail(EM_ERR_ARGUMENT, "gguf: %s: no metadata key \"%s\"",
                    f->path, key);
}

static em_status not_a(const em_gguf_value *v, const char *wanted) {
    const char *name = em_gguf_type_name(v->type);
    return em__fail(EM_ERR_ARGUMENT, "gguf: a %s value is not %s",
                    name ? name : "unknown", wanted);
}

/* The integer value of an integer or bool scalar: as unsigned (neg=false)
 * or negative (neg=true, value holds the two's complement). */
static bool integer_of(const em_gguf_value *v, uint64_t *bits, bool *neg) {
    const uint8_t *p = v->data;
    uint64_t size = fixed_size((uint32_t)v->type);
    bool is_signed = v->type == EM_GGUF_I8 || v->type == EM_GGUF_I16 ||
                     v->type == EM_GGUF_I32 || v->type == EM_GGUF_I64;
    bool is_unsigned = v->type == EM_GGUF_U8 || v->type == EM_GGUF_U16 ||
                       v->type == EM_GGUF_U32 || v->type == EM_GGUF_U64 ||
                       v->type == EM_GGUF_BOOL;
    if (!is_signed && !is_unsigned)
        return false;
    uint64_t raw = load_le(p, (int)size);
    *neg = false;
    if (is_signed && size < 8 && (raw >> (8 * size - 1)) & 1) {
        raw |= ~(uint64_t)0 << (8 * size); /* sign-extend */
        *neg = true;
    } else if (is_signed && size == 8 && (raw >> 63)) {
        *neg = true;
    }
    *bits = raw;
    return true;
}

em_status em_gguf_value_i64(const em_gguf_value *v, int64_t *out) {
    uint64_t bits;
    bool neg;
    if (!integer_of(v, &bits, &neg))
        return not_a(v, "an integer");
    if (!neg && bits > (uint64_t)INT64_MAX)
        return em__fail(EM_ERR_ARGUMENT, "gguf: %llu does not fit in i64",
                        (unsigned long long)bits);
    *out = (int64_t)bits;
    return EM_OK;
}

em_status em_gguf_value_u64(const em_gguf_value *v, uint64_t *out) {
    uint64_t bits;
    bool neg;
    if (!integer_of(v, &bits, &neg))
        return not_a(v, "an integer");
    if (neg)
        return em__fail(EM_ERR_ARGUMENT, "gguf: %lld does not fit in u64",
                        (long long)bits);
    *out = bits;
    return EM_OK;
}

em_status em_gguf_value_f64(const em_gguf_value *v, double *out) {
    if (v->type == EM_GGUF_F32) {
        float x;
        memcpy(&x, v->data, 4);
        *out = x;
        return EM_OK;
    }
    if (v->type == EM_GGUF_F64) {
        memcpy(out, v->data, 8);
        return EM_OK;
    }
    uint64_t bits;
    bool neg;
    if (!integer_of(v, &bits, &neg))
        return not_a(v, "a number");
    *out = neg ? (double)(int64_t)bits : (double)bits;
    return EM_OK;
}

em_status em_gguf_value_string(const em_gguf_value *v, const char **data,
                               size_t *len) {
    if (v->type != EM_GGUF_STRING)
        return not_a(v, "a string");
    *data = v->data;
    *len = (size_t)v->len;
    return EM_OK;
}

em_status em_gguf_value_element(const em_gguf_value *v, uint64_t i,
                                em_gguf_value *out) {
    if (v->type != EM_GGUF_ARRAY)
        return not_a(v, "an array");
    if (i >= v->len)
        return em__fail(EM_ERR_ARGUMENT,
                        "gguf: element %llu of an array of %llu",
                        (unsigned long long)i, (unsigned long long)v->len);
    const gguf_node *node = v->internal_;
    if (node->items) {
        const gguf_node *item = &node->items[i];
        *out = (em_gguf_value){
            .type = (int)item->type,
            .data = (const uint8_t *)v->data + (item->pos - node->pos),
            .len = item->len,
            .elem_type = item->type == EM_GGUF_ARRAY ? (int)item->elem_type
                                                     : -1,
            .internal_ = item,
        };
        return EM_OK;
    }
    uint64_t size = fixed_size(node->elem_type);
    *out = (em_gguf_value){
        .type = (int)node->elem_type,
        .data = (const uint8_t *)v->data + i * size,
        .len = 0,
        .elem_type = -1,
        .internal_ = NULL,
    };
    return EM_OK;
}

/* ---- tensors ------------------------------------------------------------ */

int64_t em_gguf_tensor_count(const em_gguf *f) { return f->ntensors; }

em_status em_gguf_tensor_at(const em_gguf *f, int64_t index,
                            em_gguf_tensor *out) {
    if (index < 0 || index >= f->ntensors)
        return em__fail(EM_ERR_ARGUMENT,
                        "gguf: tensor index %lld out of range [0, %lld)",
                        (long long)index, (long long)f->ntensors);
    const gguf_tinfo *t = &f->tensors[index];
    memset(out, 0, sizeof *out);
    out->name = (const char *)f->map->data + t->name_pos;
    out->name_len = (size_t)t->name_len;
    out->n_dims = t->n_dims;
    for (int d = 0; d < t->n_dims; d++) {
        out->dims[d] = t->dims[d];
        out->shape[t->n_dims - 1 - d] = (int64_t)t->dims[d];
    }
    out->ggml_type = (int)t->type;
    out->type_name = ggml_name(t->type);
    out->offset = t->offset;
    out->nbytes = t->nbytes;
    return EM_OK;
}

int64_t em_gguf_find_tensor(const em_gguf *f, const char *name) {
    size_t len = strlen(name);
    int64_t lo = 0, hi = f->ntensors;
    const uint8_t *d = f->map->data;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const gguf_tinfo *t = &f->tensors[f->tensors_by_name[mid]];
        int c = memcmp(d + t->name_pos, name,
                       t->name_len < len ? t->name_len : len);
        if (c == 0)
            c = (t->name_len > len) - (t->name_len < len);
        if (c == 0)
            return f->tensors_by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

em_status em_gguf_get(em_gguf *f, const char *name, em_array **out,
                      int *ggml_type) {
    *out = NULL;
    int64_t i = em_gguf_find_tensor(f, name);
    if (i < 0)
        return em__fail(EM_ERR_ARGUMENT, "gguf: %s: no tensor \"%s\"", f->path,
                        name);
    em_gguf_tensor t;
    em_gguf_tensor_at(f, i, &t);
    if (ggml_type)
        *ggml_type = t.ggml_type;
    const uint8_t *data = f->map->data + f->data_offset + t.offset;
    int dtype = plain_dtype((uint32_t)t.ggml_type);
    if (dtype >= 0)
        return em__io_array(f->map, data, (size_t)t.nbytes, t.shape, t.n_dims,
                            (em_dtype)dtype, out);
    int64_t block_elems, block_bytes;
    if (em_ggml_type_name(t.ggml_type) == NULL ||
        em_ggml_type_info(t.ggml_type, &block_elems, &block_bytes) != EM_OK)
        return em__fail(EM_ERR_UNSUPPORTED,
                        "gguf: %s: tensor \"%s\" has ggml type %s (%d), which "
                        "the engine does not read",
                        f->path, name, t.type_name, t.ggml_type);
    uint64_t inner = t.n_dims ? t.dims[0] : 1;
    /* rows: the product of the outer dims (checked: with a zero inner dim
     * the element count did not bound it). */
    int64_t shape[2] = {
        1, (int64_t)(inner / (uint64_t)block_elems * (uint64_t)block_bytes)};
    for (int d = 1; d < t.n_dims; d++) {
        if (t.dims[d] && (uint64_t)shape[0] > (uint64_t)INT64_MAX / t.dims[d])
            return em__fail(EM_ERR_ARGUMENT,
                            "gguf: %s: tensor \"%s\": too many rows", f->path,
                            name);
        shape[0] *= (int64_t)t.dims[d];
    }
    return em__io_array(f->map, data, (size_t)t.nbytes, shape, 2, EM_U8, out);
}
