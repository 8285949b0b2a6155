/*
 * nif_io.c — NIFs for weight files (include/emily_io.h).
 *
 *   safetensors_open(path)                 a file resource
 *   safetensors_info(file)                 {[{name, dtype_name, type | nil,
 *                                            shape}], [{key, value}]}
 *   safetensors_get(file, name)            an array aliasing the mapping
 *   safetensors_get_bytes(file, name)      its bytes as a u8 array (any dtype)
 *   safetensors_save(path, [{name, array}], [{key, value}])  :ok
 *   safetensors_index(path)                [{tensor, file}] of a sharded
 *                                          checkpoint's index
 *   gguf_open(path)                        a file resource
 *   gguf_info(file)                        %{version, alignment, data_offset,
 *                                            metadata: [{key, value}],
 *                                            tensors: [{name, shape, type,
 *                                            type_name, offset, nbytes}]}
 *   gguf_get(file, name)                   {array, ggml type number}
 *
 * Opening, saving and listing touch the disk or walk whole headers (a
 * tokenizer's vocabulary is tens of thousands of strings): they run on a
 * dirty I/O scheduler. get only slices the mapping and stays inline.
 *
 * A file resource's destructor closes the handle; arrays taken from it
 * keep the mapping alive on their own.
 */
#include "emily_io.h"
#include "nif.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct nif_st_file {
    em_safetensors *file; /* owned */
} nif_st_file;

typedef struct nif_gguf_file {
    em_gguf *file; /* owned */
} nif_gguf_file;

static ErlNifResourceType *nif_st_type;
static ErlNifResourceType *nif_gguf_type;

static void st_dtor(ErlNifEnv *env, void *obj) {
    nif_st_file *res = obj;
    em_safetensors_close(res->file);
    res->file = NULL;
}

static void gguf_dtor(ErlNifEnv *env, void *obj) {
    nif_gguf_file *res = obj;
    em_gguf_close(res->file);
    res->file = NULL;
}

int nif_io_open_resources(ErlNifEnv *env) {
    ErlNifResourceFlags flags = ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER;
    nif_st_type = enif_open_resource_type(env, NULL, "emily_safetensors",
                                          st_dtor, flags, NULL);
    nif_gguf_type = enif_open_resource_type(env, NULL, "emily_gguf",
                                            gguf_dtor, flags, NULL);
    return nif_st_type && nif_gguf_type ? 0 : -1;
}

/* ---- helpers ------------------------------------------------------------ */

/* A binary (or list) term as a NUL-terminated heap string (enif_free).
 * Refuses embedded NULs: C paths and names end at the first. */
static char *get_cstring(nif_call *c, ERL_NIF_TERM term, const char *arg) {
    ErlNifBinary bin;
    if (!enif_inspect_iolist_as_binary(c->env, term, &bin) ||
        memchr(bin.data, 0, bin.size)) {
        nif_raise_bad_arg(c, arg, "a string without NUL bytes", term);
        return NULL;
    }
    char *s = enif_alloc(bin.size + 1);
    if (!s) {
        nif_raise_runtime(c, "out of memory");
        return NULL;
    }
    memcpy(s, bin.data, bin.size);
    s[bin.size] = '\0';
    return s;
}

static ERL_NIF_TERM make_bytes(ErlNifEnv *env, const void *data, size_t n) {
    ERL_NIF_TERM term;
    unsigned char *p = enif_make_new_binary(env, n, &term);
    if (p && n)
        memcpy(p, data, n);
    return term;
}

static ERL_NIF_TERM make_cstring(ErlNifEnv *env, const char *s) {
    return make_bytes(env, s, strlen(s));
}

static ERL_NIF_TERM make_shape(ErlNifEnv *env, const int64_t *shape,
                               int ndim) {
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (int d = ndim - 1; d >= 0; d--)
        list = enif_make_list_cell(env, enif_make_int64(env, shape[d]), list);
    return list;
}

/* Run `body` on a dirty I/O scheduler: the NIF reschedules itself. */
#define NIF_IO_DIRTY(name, arity)                                              \
    static ERL_NIF_TERM name##_body(ErlNifEnv *env,                            \
                                    const ERL_NIF_TERM argv[]);                \
    static ERL_NIF_TERM name##_dirty(ErlNifEnv *env, int argc,                 \
                                     const ERL_NIF_TERM argv[]) {              \
        nif_enter();                                                           \
        ERL_NIF_TERM result = name##_body(env, argv);                          \
        nif_leave();                                                           \
        return result;                                                         \
    }                                                                          \
    NIF_DECL(name) {                                                           \
        return enif_schedule_nif(env, #name, ERL_NIF_DIRTY_JOB_IO_BOUND,       \
                                 name##_dirty, arity, argv);                   \
    }                                                                          \
    static ERL_NIF_TERM name##_body(ErlNifEnv *env, const ERL_NIF_TERM argv[])

/* ---- safetensors -------------------------------------------------------- */

static bool get_st(nif_call *c, ERL_NIF_TERM term, em_safetensors **out) {
    nif_st_file *res;
    if (!enif_get_resource(c->env, term, nif_st_type, (void **)&res) ||
        !res->file) {
        nif_raise_bad_arg(c, "file", "a safetensors file handle", term);
        return false;
    }
    *out = res->file;
    return true;
}

NIF_IO_DIRTY(safetensors_open, 1) {
    nif_call c = NIF_CALL(env, "safetensors_open");
    char *path = get_cstring(&c, argv[0], "path");
    if (!path)
        return c.raised;
    em_safetensors *f;
    em_status st = em_safetensors_open(path, &f);
    enif_free(path);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    nif_st_file *res = enif_alloc_resource(nif_st_type, sizeof *res);
    if (!res) {
        em_safetensors_close(f);
        return nif_raise_runtime(&c, "out of memory allocating a resource");
    }
    res->file = f;
    ERL_NIF_TERM term = enif_make_resource(env, res);
    enif_release_resource(res);
    return term;
}

NIF_IO_DIRTY(safetensors_info, 1) {
    nif_call c = NIF_CALL(env, "safetensors_info");
    em_safetensors *f;
    if (!get_st(&c, argv[0], &f))
        return c.raised;
    ERL_NIF_TERM tensors = enif_make_list(env, 0);
    for (int64_t i = em_safetensors_count(f) - 1; i >= 0; i--) {
        em_safetensors_tensor t;
        if (em_safetensors_tensor_at(f, i, &t) != EM_OK)
            return nif_raise_status(&c, EM_ERR_RUNTIME);
        ERL_NIF_TERM type =
            t.dtype >= 0 ? nif_make_dtype(env, (em_dtype)t.dtype) : atoms.nil;
        ERL_NIF_TERM entry = enif_make_tuple4(
            env, make_cstring(env, t.name), make_cstring(env, t.dtype_name),
            type, make_shape(env, t.shape, t.ndim));
        tensors = enif_make_list_cell(env, entry, tensors);
    }
    ERL_NIF_TERM meta = enif_make_list(env, 0);
    for (int64_t i = em_safetensors_metadata_count(f) - 1; i >= 0; i--) {
        const char *k, *v;
        if (em_safetensors_metadata_at(f, i, &k, &v) != EM_OK)
            return nif_raise_status(&c, EM_ERR_RUNTIME);
        meta = enif_make_list_cell(
            env,
            enif_make_tuple2(env, make_cstring(env, k), make_cstring(env, v)),
            meta);
    }
    return enif_make_tuple2(env, tensors, meta);
}

NIF_DECL(safetensors_get) {
    nif_call c = NIF_CALL(env, "safetensors_get");
    em_safetensors *f;
    if (!get_st(&c, argv[0], &f))
        return c.raised;
    char *name = get_cstring(&c, argv[1], "name");
    if (!name)
        return c.raised;
    em_array *out;
    em_status st = em_safetensors_get(f, name, &out);
    enif_free(name);
    return nif_result(&c, st, &out);
}

NIF_DECL(safetensors_get_bytes) {
    nif_call c = NIF_CALL(env, "safetensors_get_bytes");
    em_safetensors *f;
    if (!get_st(&c, argv[0], &f))
        return c.raised;
    char *name = get_cstring(&c, argv[1], "name");
    if (!name)
        return c.raised;
    em_array *out;
    em_status st = em_safetensors_get_bytes(f, name, &out);
    enif_free(name);
    return nif_result(&c, st, &out);
}

/* A list of {binary, binary} pairs as two arrays of C strings. */
static bool get_string_pairs(nif_call *c, ERL_NIF_TERM list, const char *arg,
                             char ***keys, char ***values, unsigned *n) {
    *keys = *values = NULL;
    if (!enif_get_list_length(c->env, list, n)) {
        nif_raise_bad_arg(c, arg, "a list of {string, string}", list);
        return false;
    }
    *keys = enif_alloc((*n ? *n : 1) * sizeof(char *));
    *values = enif_alloc((*n ? *n : 1) * sizeof(char *));
    if (!*keys || !*values) {
        nif_raise_runtime(c, "out of memory");
        return false;
    }
    memset(*keys, 0, (*n ? *n : 1) * sizeof(char *));
    memset(*values, 0, (*n ? *n : 1) * sizeof(char *));
    ERL_NIF_TERM head;
    for (unsigned i = 0; enif_get_list_cell(c->env, list, &head, &list); i++) {
        const ERL_NIF_TERM *pair;
        int arity;
        if (!enif_get_tuple(c->env, head, &arity, &pair) || arity != 2) {
            nif_raise_bad_arg(c, arg, "a list of {string, string}", head);
            return false;
        }
        if (!((*keys)[i] = get_cstring(c, pair[0], arg)))
            return false;
        if (!((*values)[i] = get_cstring(c, pair[1], arg)))
            return false;
    }
    return true;
}

static void free_string_pairs(char **keys, char **values, unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        if (keys)
            enif_free(keys[i]);
        if (values)
            enif_free(values[i]);
    }
    enif_free(keys);
    enif_free(values);
}

NIF_IO_DIRTY(safetensors_save, 3) {
    nif_call c = NIF_CALL(env, "safetensors_save");
    char *path = get_cstring(&c, argv[0], "path");
    if (!path)
        return c.raised;
    unsigned n = 0, nmeta = 0;
    char **names = NULL, **mkeys = NULL, **mvalues = NULL;
    em_array **arrays = NULL;
    ERL_NIF_TERM result = atoms.ok;
    if (!enif_get_list_length(env, argv[1], &n)) {
        result = nif_raise_bad_arg(&c, "tensors", "a list of {name, tensor}",
                                   argv[1]);
        goto done;
    }
    names = enif_alloc((n ? n : 1) * sizeof(char *));
    arrays = enif_alloc((n ? n : 1) * sizeof(em_array *));
    if (!names || !arrays) {
        result = nif_raise_runtime(&c, "out of memory");
        goto done;
    }
    memset(names, 0, (n ? n : 1) * sizeof(char *));
    ERL_NIF_TERM list = argv[1], head;
    for (unsigned i = 0; enif_get_list_cell(env, list, &head, &list); i++) {
        const ERL_NIF_TERM *pair;
        int arity;
        if (!enif_get_tuple(env, head, &arity, &pair) || arity != 2) {
            result = nif_raise_bad_arg(&c, "tensors",
                                       "a list of {name, tensor}", head);
            goto done;
        }
        if (!(names[i] = get_cstring(&c, pair[0], "tensor name")) ||
            !nif_get_array(&c, pair[1], "tensor", &arrays[i])) {
            result = c.raised;
            goto done;
        }
    }
    if (!get_string_pairs(&c, argv[2], "metadata", &mkeys, &mvalues, &nmeta)) {
        result = c.raised;
        goto done;
    }
    em_status st = em_safetensors_save(
        path, (const char *const *)names, arrays, n,
        (const char *const *)mkeys, (const char *const *)mvalues, nmeta);
    if (st != EM_OK)
        result = nif_raise_status(&c, st);
done:
    if (names)
        for (unsigned i = 0; i < n; i++)
            enif_free(names[i]);
    enif_free(names);
    enif_free(arrays);
    free_string_pairs(mkeys, mvalues, nmeta);
    enif_free(path);
    return result;
}

NIF_IO_DIRTY(safetensors_index, 1) {
    nif_call c = NIF_CALL(env, "safetensors_index");
    char *path = get_cstring(&c, argv[0], "path");
    if (!path)
        return c.raised;
    em_safetensors_index *ix;
    em_status st = em_safetensors_index_open(path, &ix);
    enif_free(path);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (int64_t i = em_safetensors_index_count(ix) - 1; i >= 0; i--) {
        const char *tensor, *file;
        em_safetensors_index_at(ix, i, &tensor, &file);
        list = enif_make_list_cell(
            env,
            enif_make_tuple2(env, make_cstring(env, tensor),
                             make_cstring(env, file)),
            list);
    }
    em_safetensors_index_close(ix);
    return list;
}

/* ---- GGUF --------------------------------------------------------------- */

static bool get_gguf(nif_call *c, ERL_NIF_TERM term, em_gguf **out) {
    nif_gguf_file *res;
    if (!enif_get_resource(c->env, term, nif_gguf_type, (void **)&res) ||
        !res->file) {
        nif_raise_bad_arg(c, "file", "a GGUF file handle", term);
        return false;
    }
    *out = res->file;
    return true;
}

NIF_IO_DIRTY(gguf_open, 1) {
    nif_call c = NIF_CALL(env, "gguf_open");
    char *path = get_cstring(&c, argv[0], "path");
    if (!path)
        return c.raised;
    em_gguf *f;
    em_status st = em_gguf_open(path, &f);
    enif_free(path);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    nif_gguf_file *res = enif_alloc_resource(nif_gguf_type, sizeof *res);
    if (!res) {
        em_gguf_close(f);
        return nif_raise_runtime(&c, "out of memory allocating a resource");
    }
    res->file = f;
    ERL_NIF_TERM term = enif_make_resource(env, res);
    enif_release_resource(res);
    return term;
}

/* A float as Nx spells the non-finite ones. */
static ERL_NIF_TERM make_float(ErlNifEnv *env, double x) {
    if (isnan(x))
        return enif_make_atom(env, "nan");
    if (isinf(x))
        return enif_make_atom(env, x > 0 ? "infinity" : "neg_infinity");
    return enif_make_double(env, x);
}

/* A metadata value as an Elixir term: integers, floats, booleans, binaries,
 * lists for arrays (nested ones too). The file was validated on open, so
 * every accessor succeeds here. */
static ERL_NIF_TERM make_value(ErlNifEnv *env, const em_gguf_value *v) {
    switch (v->type) {
    case EM_GGUF_BOOL: {
        int64_t i = 0;
        em_gguf_value_i64(v, &i);
        return i ? atoms.yes : atoms.no;
    }
    case EM_GGUF_F32:
    case EM_GGUF_F64: {
        double x = 0;
        em_gguf_value_f64(v, &x);
        return make_float(env, x);
    }
    case EM_GGUF_U64: {
        uint64_t u = 0;
        em_gguf_value_u64(v, &u);
        return enif_make_uint64(env, u);
    }
    case EM_GGUF_STRING: {
        const char *s = "";
        size_t n = 0;
        em_gguf_value_string(v, &s, &n);
        return make_bytes(env, s, n);
    }
    case EM_GGUF_ARRAY: {
        ERL_NIF_TERM list = enif_make_list(env, 0);
        for (uint64_t i = v->len; i-- > 0;) {
            em_gguf_value e;
            if (em_gguf_value_element(v, i, &e) != EM_OK)
                break;
            list = enif_make_list_cell(env, make_value(env, &e), list);
        }
        return list;
    }
    default: {
        int64_t i = 0;
        em_gguf_value_i64(v, &i);
        return enif_make_int64(env, i);
    }
    }
}

NIF_IO_DIRTY(gguf_info, 1) {
    nif_call c = NIF_CALL(env, "gguf_info");
    em_gguf *f;
    if (!get_gguf(&c, argv[0], &f))
        return c.raised;
    ERL_NIF_TERM meta = enif_make_list(env, 0);
    for (int64_t i = em_gguf_kv_count(f) - 1; i >= 0; i--) {
        const char *key;
        size_t key_len;
        em_gguf_value v;
        if (em_gguf_kv_at(f, i, &key, &key_len, &v) != EM_OK)
            return nif_raise_status(&c, EM_ERR_RUNTIME);
        meta = enif_make_list_cell(
            env,
            enif_make_tuple2(env, make_bytes(env, key, key_len),
                             make_value(env, &v)),
            meta);
    }
    ERL_NIF_TERM tensors = enif_make_list(env, 0);
    for (int64_t i = em_gguf_tensor_count(f) - 1; i >= 0; i--) {
        em_gguf_tensor t;
        if (em_gguf_tensor_at(f, i, &t) != EM_OK)
            return nif_raise_status(&c, EM_ERR_RUNTIME);
        ERL_NIF_TERM fields[6] = {
            make_bytes(env, t.name, t.name_len),
            make_shape(env, t.shape, t.n_dims),
            enif_make_int(env, t.ggml_type),
            make_cstring(env, t.type_name),
            enif_make_uint64(env, t.offset),
            enif_make_uint64(env, t.nbytes),
        };
        tensors = enif_make_list_cell(
            env, enif_make_tuple_from_array(env, fields, 6), tensors);
    }
    ERL_NIF_TERM keys[5] = {
        enif_make_atom(env, "version"), enif_make_atom(env, "alignment"),
        enif_make_atom(env, "data_offset"), enif_make_atom(env, "metadata"),
        enif_make_atom(env, "tensors")};
    ERL_NIF_TERM values[5] = {
        enif_make_uint(env, em_gguf_version(f)),
        enif_make_uint64(env, em_gguf_alignment(f)),
        enif_make_uint64(env, em_gguf_data_offset(f)), meta, tensors};
    ERL_NIF_TERM map;
    if (!enif_make_map_from_arrays(env, keys, values, 5, &map))
        return nif_raise_runtime(&c, "could not build the info map");
    return map;
}

NIF_DECL(gguf_get) {
    nif_call c = NIF_CALL(env, "gguf_get");
    em_gguf *f;
    if (!get_gguf(&c, argv[0], &f))
        return c.raised;
    char *name = get_cstring(&c, argv[1], "name");
    if (!name)
        return c.raised;
    em_array *out;
    int type = -1;
    em_status st = em_gguf_get(f, name, &out, &type);
    enif_free(name);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    ERL_NIF_TERM array = nif_make_array(&c, out);
    if (c.raised)
        return c.raised;
    return enif_make_tuple2(env, array, enif_make_int(env, type));
}
