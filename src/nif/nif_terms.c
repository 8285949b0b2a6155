/*
 * nif_terms.c — decoding and encoding terms, and raising Elixir exceptions.
 *
 * Helpers that decode an argument raise on failure (an ArgumentError that
 * names the op, the argument and the offending term) and return false; the
 * NIF then returns c->raised. Exceptions are Elixir exception structs built
 * as maps, so `rescue ArgumentError` and assert_raise work unchanged.
 */
#include "nif.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

nif_atoms atoms;
ErlNifResourceType *nif_array_type;
ErlNifResourceType *nif_stream_type;

/* Messages are capped: the engine's own are short, and a %T of a huge term
 * is truncated rather than allowed to grow without bound. */
#define MESSAGE_MAX 1024

/* ---- exceptions --------------------------------------------------------- */

static ERL_NIF_TERM make_exception(ErlNifEnv *env, ERL_NIF_TERM module,
                                   const char *message) {
    size_t len = strlen(message);
    ERL_NIF_TERM text;
    unsigned char *bytes = enif_make_new_binary(env, len, &text);
    if (bytes)
        memcpy(bytes, message, len);
    else
        text = enif_make_atom(env, "out_of_memory");
    ERL_NIF_TERM keys[3] = {atoms.struct_key, atoms.exception_key,
                            atoms.message};
    ERL_NIF_TERM values[3] = {module, atoms.yes, text};
    ERL_NIF_TERM map;
    if (!enif_make_map_from_arrays(env, keys, values, 3, &map))
        return text; /* cannot happen: the keys are distinct */
    return map;
}

ERL_NIF_TERM nif_exception(ErlNifEnv *env, em_status status,
                           const char *message) {
    ERL_NIF_TERM module =
        (status == EM_ERR_ARGUMENT || status == EM_ERR_UNSUPPORTED)
            ? atoms.argument_error
            : atoms.runtime_error;
    return make_exception(env, module, message);
}

static ERL_NIF_TERM raise_v(nif_call *c, ERL_NIF_TERM module, const char *fmt,
                            va_list ap) {
    char message[MESSAGE_MAX];
    int prefix = snprintf(message, sizeof message, "%s: ", c->op);
    if (prefix < 0 || (size_t)prefix >= sizeof message)
        prefix = 0;
    vsnprintf(message + prefix, sizeof message - (size_t)prefix, fmt, ap);
    c->raised =
        enif_raise_exception(c->env, make_exception(c->env, module, message));
    return c->raised;
}

ERL_NIF_TERM nif_raise_argument(nif_call *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ERL_NIF_TERM t = raise_v(c, atoms.argument_error, fmt, ap);
    va_end(ap);
    return t;
}

ERL_NIF_TERM nif_raise_runtime(nif_call *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ERL_NIF_TERM t = raise_v(c, atoms.runtime_error, fmt, ap);
    va_end(ap);
    return t;
}

ERL_NIF_TERM nif_raise_bad_arg(nif_call *c, const char *arg,
                               const char *expected, ERL_NIF_TERM got) {
    char text[MESSAGE_MAX];
    enif_snprintf(text, sizeof text, "%T", got);
    return nif_raise_argument(c, "argument %s must be %s, got: %s", arg,
                              expected, text);
}

static bool bad_arg(nif_call *c, const char *arg, const char *expected,
                    ERL_NIF_TERM got) {
    nif_raise_bad_arg(c, arg, expected, got);
    return false;
}

ERL_NIF_TERM nif_raise_status(nif_call *c, em_status status) {
    const char *message = em_last_error();
    char fallback[128];
    if (!message || !*message) {
        snprintf(fallback, sizeof fallback, "%s: failed (status %d)", c->op,
                 (int)status);
        message = fallback;
    }
    c->raised =
        enif_raise_exception(c->env, nif_exception(c->env, status, message));
    return c->raised;
}

ERL_NIF_TERM nif_status_atom(em_status status) {
    switch (status) {
    case EM_ERR_ARGUMENT:
    case EM_ERR_UNSUPPORTED: /* a GPU request this build/machine cannot serve */
        return atoms.argument;
    case EM_ERR_OOM:
        return atoms.oom;
    case EM_ERR_CLOSED:
        return atoms.closed;
    case EM_ERR_BUSY:
        return atoms.busy;
    default:
        return atoms.runtime;
    }
}

/* ---- decoding ----------------------------------------------------------- */

/* The array of a tensor term, or a raise that says why there is none: a
 * template tensor (the atom `template`: shape and type without data), a
 * tensor released early by backend_deallocate, or not a tensor at all.
 * The resource's pointer is read atomically: nif_deallocate may clear it
 * from another scheduler. */
static bool get_array(nif_call *c, ERL_NIF_TERM term, const char *arg,
                      const char *expected, em_array **out) {
    nif_array *res;
    if (enif_get_resource(c->env, term, nif_array_type, (void **)&res)) {
        em_array *a = __atomic_load_n(&res->array, __ATOMIC_ACQUIRE);
        if (a) {
            *out = a;
            return true;
        }
        nif_raise_argument(c,
                           "argument %s: the tensor was deallocated "
                           "(backend_deallocate/1); it can no longer be used",
                           arg);
        return false;
    }
    if (enif_is_identical(term, atoms.template_)) {
        nif_raise_argument(c,
                           "argument %s is a template tensor (a shape and a "
                           "type without data): a template cannot be computed "
                           "with or read",
                           arg);
        return false;
    }
    return bad_arg(c, arg, expected, term);
}

bool nif_get_array(nif_call *c, ERL_NIF_TERM term, const char *arg,
                   em_array **out) {
    return get_array(c, term, arg, "an Emily array reference", out);
}

bool nif_get_array_list(nif_call *c, ERL_NIF_TERM term, const char *arg,
                        em_array ***out, size_t *n) {
    unsigned len;
    if (!enif_get_list_length(c->env, term, &len))
        return bad_arg(c, arg, "a list of Emily array references", term);
    em_array **arrays = enif_alloc(sizeof(em_array *) * (len ? len : 1));
    if (!arrays) {
        nif_raise_runtime(c, "out of memory");
        return false;
    }
    ERL_NIF_TERM head, tail = term;
    for (unsigned i = 0; i < len; i++) {
        enif_get_list_cell(c->env, tail, &head, &tail);
        char what[64];
        snprintf(what, sizeof what, "%s (element %u)", arg, i);
        if (!get_array(c, head, what, "an Emily array reference", &arrays[i])) {
            enif_free(arrays);
            return false;
        }
    }
    *out = arrays;
    *n = len;
    return true;
}

bool nif_get_stream(nif_call *c, ERL_NIF_TERM term, const char *arg,
                    em_stream **out) {
    if (enif_is_identical(term, atoms.nil)) {
        em_status st = em_default_stream(out);
        if (st != EM_OK) {
            nif_raise_status(c, st);
            return false;
        }
        return true;
    }
    nif_stream *res;
    if (!enif_get_resource(c->env, term, nif_stream_type, (void **)&res) ||
        !res->stream)
        return bad_arg(c, arg, "an Emily stream reference or nil", term);
    *out = res->stream;
    return true;
}

bool nif_get_dtype(nif_call *c, ERL_NIF_TERM term, const char *arg,
                   em_dtype *out) {
    int arity;
    const ERL_NIF_TERM *t;
    int bits;
    if (enif_get_tuple(c->env, term, &arity, &t) && arity == 2 &&
        enif_get_int(c->env, t[1], &bits)) {
        ERL_NIF_TERM k = t[0];
        int d = -1;
        if (enif_is_identical(k, atoms.u))
            d = bits == 8    ? EM_U8
                : bits == 16 ? EM_U16
                : bits == 32 ? EM_U32
                : bits == 64 ? EM_U64
                             : -1;
        else if (enif_is_identical(k, atoms.s))
            d = bits == 8    ? EM_S8
                : bits == 16 ? EM_S16
                : bits == 32 ? EM_S32
                : bits == 64 ? EM_S64
                             : -1;
        else if (enif_is_identical(k, atoms.f))
            d = bits == 16   ? EM_F16
                : bits == 32 ? EM_F32
                : bits == 64 ? EM_F64
                             : -1;
        else if (enif_is_identical(k, atoms.bf))
            d = bits == 16 ? EM_BF16 : -1;
        else if (enif_is_identical(k, atoms.c))
            d = bits == 64 ? EM_C64 : bits == 128 ? EM_C128 : -1;
        else if (enif_is_identical(k, atoms.pred))
            d = bits == 8 ? EM_PRED : -1;
        if (d >= 0) {
            *out = (em_dtype)d;
            return true;
        }
    }
    return bad_arg(c, arg,
                   "a dtype: {:u | :s, 8 | 16 | 32 | 64}, {:f, 16 | 32 | 64}, "
                   "{:bf, 16}, {:c, 64 | 128} or {:pred, 8}",
                   term);
}

bool nif_get_int(nif_call *c, ERL_NIF_TERM term, const char *arg, int *out) {
    if (!enif_get_int(c->env, term, out))
        return bad_arg(c, arg, "an integer (32-bit)", term);
    return true;
}

bool nif_get_i64(nif_call *c, ERL_NIF_TERM term, const char *arg,
                 int64_t *out) {
    ErlNifSInt64 v;
    if (!enif_get_int64(c->env, term, &v))
        return bad_arg(c, arg, "an integer (64-bit)", term);
    *out = (int64_t)v;
    return true;
}

bool nif_get_bool(nif_call *c, ERL_NIF_TERM term, const char *arg, bool *out) {
    if (enif_is_identical(term, atoms.yes))
        *out = true;
    else if (enif_is_identical(term, atoms.no))
        *out = false;
    else
        return bad_arg(c, arg, "a boolean", term);
    return true;
}

/* Shared walk of a short integer list; `get` decodes one element. */
static bool get_list(nif_call *c, ERL_NIF_TERM term, const char *arg,
                     const char *expected, int *n,
                     bool (*get)(ErlNifEnv *, ERL_NIF_TERM, void *, int),
                     void *out) {
    unsigned len;
    if (!enif_get_list_length(c->env, term, &len))
        return bad_arg(c, arg, expected, term);
    if (len > EM_MAX_NDIM) {
        char text[MESSAGE_MAX];
        enif_snprintf(text, sizeof text, "%T", term);
        nif_raise_argument(
            c, "argument %s has %u entries, at most %d are allowed, got: %s",
            arg, len, EM_MAX_NDIM, text);
        return false;
    }
    ERL_NIF_TERM head, tail = term;
    for (unsigned i = 0; i < len; i++) {
        enif_get_list_cell(c->env, tail, &head, &tail);
        if (!get(c->env, head, out, (int)i))
            return bad_arg(c, arg, expected, term);
    }
    *n = (int)len;
    return true;
}

static bool get_i64_at(ErlNifEnv *env, ERL_NIF_TERM t, void *out, int i) {
    ErlNifSInt64 v;
    if (!enif_get_int64(env, t, &v))
        return false;
    ((int64_t *)out)[i] = (int64_t)v;
    return true;
}

static bool get_int_at(ErlNifEnv *env, ERL_NIF_TERM t, void *out, int i) {
    return enif_get_int(env, t, &((int *)out)[i]);
}

bool nif_get_i64_list(nif_call *c, ERL_NIF_TERM term, const char *arg,
                      int64_t out[EM_MAX_NDIM], int *n) {
    return get_list(c, term, arg, "a list of integers (64-bit)", n, get_i64_at,
                    out);
}

bool nif_get_int_list(nif_call *c, ERL_NIF_TERM term, const char *arg,
                      int out[EM_MAX_NDIM], int *n) {
    return get_list(c, term, arg, "a list of integers (32-bit)", n, get_int_at,
                    out);
}

/* ---- encoding ----------------------------------------------------------- */

ERL_NIF_TERM nif_make_array(nif_call *c, em_array *a) {
    nif_array *res = enif_alloc_resource(nif_array_type, sizeof *res);
    if (!res) {
        em_array_release(a);
        return nif_raise_runtime(c, "out of memory allocating a resource");
    }
    res->array = a;
    ERL_NIF_TERM term = enif_make_resource(c->env, res);
    enif_release_resource(res); /* the term now owns it */
    return term;
}

ERL_NIF_TERM nif_make_dtype(ErlNifEnv *env, em_dtype d) {
    ERL_NIF_TERM kind;
    switch (d) {
    case EM_PRED:
        kind = atoms.pred;
        break;
    case EM_U8:
    case EM_U16:
    case EM_U32:
    case EM_U64:
        kind = atoms.u;
        break;
    case EM_S8:
    case EM_S16:
    case EM_S32:
    case EM_S64:
        kind = atoms.s;
        break;
    case EM_BF16:
        kind = atoms.bf;
        break;
    case EM_C64:
    case EM_C128:
        kind = atoms.c;
        break;
    default:
        kind = atoms.f;
        break;
    }
    return enif_make_tuple2(env, kind,
                            enif_make_int(env, (int)em_dtype_size(d) * 8));
}

ERL_NIF_TERM nif_make_shape(ErlNifEnv *env, const em_array *a) {
    int ndim = em_array_ndim(a);
    const int64_t *shape = em_array_shape(a);
    ERL_NIF_TERM dims[EM_MAX_NDIM];
    for (int i = 0; i < ndim; i++)
        dims[i] = enif_make_int64(env, (ErlNifSInt64)shape[i]);
    return enif_make_list_from_array(env, dims, (unsigned)ndim);
}
