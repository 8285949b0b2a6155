/*
 * nif_fast.c — NIFs for include/emily_fast.h (Emily.Native's "Emily.Fast"
 * section). Graph building only, so they run inline on the scheduler.
 *
 *   fast_rms_norm(x, weight | nil, eps)
 *   fast_layer_norm(x, weight | nil, bias | nil, eps)
 *   fast_softmax(x, axis)
 *   fast_rope(x, offset, freqs | nil, dims, traditional, base, scale)
 *       offset: a 0-d s32/s64 tensor; freqs: 1-D f32 periods (MLX's
 *       convention) or nil for base
 *   fast_linear(x, w, norm, norm_weight | nil, eps, gate | nil,
 *               residual | nil)
 *       the decode path's fused matrix-vector product (em_fast_linear):
 *       norm a boolean (the RMS prologue), w and gate {n, k}
 *   fast_heads(x, head_dim, first, count, norm, norm_weight | nil, eps,
 *              offset | nil, dims, traditional, base, scale,
 *              cache | nil, cache_offset | nil)
 *       em_fast_heads: heads [first, first + count) of x {b, s, n} as
 *       {b, count, s, head_dim}, normed and rotated (offset nil: no RoPE);
 *       with a cache {b, count, l, head_dim}, the cache with rows
 *       [cache_offset, + s) replaced by them (cache_offset 0-d s32/s64)
 */
#include "emily_fast.h"
#include "nif.h"

#include <string.h>

/* A float argument (an integer is taken too). */
static bool get_number(nif_call *c, ERL_NIF_TERM term, const char *arg,
                       double *out) {
    ErlNifSInt64 i;
    if (enif_get_double(c->env, term, out))
        return true;
    if (enif_get_int64(c->env, term, &i)) {
        *out = (double)i;
        return true;
    }
    nif_raise_bad_arg(c, arg, "a number", term);
    return false;
}

/* An array, or NULL for nil. */
static bool get_optional_array(nif_call *c, ERL_NIF_TERM term, const char *arg,
                               em_array **out) {
    if (enif_is_identical(term, atoms.nil)) {
        *out = NULL;
        return true;
    }
    return nif_get_array(c, term, arg, out);
}

NIF_DECL(fast_rms_norm) {
    nif_call c = NIF_CALL(env, "fast_rms_norm");
    em_array *x, *w, *out;
    double eps;
    if (!nif_get_array(&c, argv[0], "x", &x) ||
        !get_optional_array(&c, argv[1], "weight", &w) ||
        !get_number(&c, argv[2], "eps", &eps))
        return c.raised;
    return nif_result(&c, em_rms_norm(x, w, eps, &out), &out);
}

NIF_DECL(fast_layer_norm) {
    nif_call c = NIF_CALL(env, "fast_layer_norm");
    em_array *x, *w, *b, *out;
    double eps;
    if (!nif_get_array(&c, argv[0], "x", &x) ||
        !get_optional_array(&c, argv[1], "weight", &w) ||
        !get_optional_array(&c, argv[2], "bias", &b) ||
        !get_number(&c, argv[3], "eps", &eps))
        return c.raised;
    return nif_result(&c, em_layer_norm(x, w, b, eps, &out), &out);
}

NIF_DECL(fast_softmax) {
    nif_call c = NIF_CALL(env, "fast_softmax");
    em_array *x, *out;
    int axis;
    if (!nif_get_array(&c, argv[0], "x", &x) ||
        !nif_get_int(&c, argv[1], "axis", &axis))
        return c.raised;
    return nif_result(&c, em_softmax(x, axis, &out), &out);
}

NIF_DECL(fast_rope) {
    nif_call c = NIF_CALL(env, "fast_rope");
    em_array *x, *offset, *out;
    em_rope_options o;
    memset(&o, 0, sizeof o);
    if (!nif_get_array(&c, argv[0], "x", &x) ||
        !nif_get_array(&c, argv[1], "offset", &offset) ||
        !get_optional_array(&c, argv[2], "freqs", &o.freqs) ||
        !nif_get_i64(&c, argv[3], "dims", &o.dims) ||
        !nif_get_bool(&c, argv[4], "traditional", &o.traditional) ||
        !get_number(&c, argv[5], "base", &o.base) ||
        !get_number(&c, argv[6], "scale", &o.scale))
        return c.raised;
    return nif_result(&c, em_rope(x, offset, &o, &out), &out);
}

NIF_DECL(fast_linear) {
    nif_call c = NIF_CALL(env, "fast_linear");
    em_array *x, *w, *out;
    em_fast_linear_options o;
    memset(&o, 0, sizeof o);
    if (!nif_get_array(&c, argv[0], "x", &x) ||
        !nif_get_array(&c, argv[1], "w", &w) ||
        !nif_get_bool(&c, argv[2], "norm", &o.norm) ||
        !get_optional_array(&c, argv[3], "norm_weight", &o.norm_weight) ||
        !get_number(&c, argv[4], "eps", &o.eps) ||
        !get_optional_array(&c, argv[5], "gate", &o.gate) ||
        !get_optional_array(&c, argv[6], "residual", &o.residual))
        return c.raised;
    return nif_result(&c, em_fast_linear(x, w, &o, &out), &out);
}

NIF_DECL(fast_heads) {
    nif_call c = NIF_CALL(env, "fast_heads");
    em_array *x, *out;
    em_fast_heads_options o;
    memset(&o, 0, sizeof o);
    if (!nif_get_array(&c, argv[0], "x", &x) ||
        !nif_get_i64(&c, argv[1], "head_dim", &o.head_dim) ||
        !nif_get_i64(&c, argv[2], "first", &o.first) ||
        !nif_get_i64(&c, argv[3], "count", &o.count) ||
        !nif_get_bool(&c, argv[4], "norm", &o.norm) ||
        !get_optional_array(&c, argv[5], "norm_weight", &o.norm_weight) ||
        !get_number(&c, argv[6], "eps", &o.eps) ||
        !get_optional_array(&c, argv[7], "offset", &o.offset) ||
        !nif_get_i64(&c, argv[8], "dims", &o.rope.dims) ||
        !nif_get_bool(&c, argv[9], "traditional", &o.rope.traditional) ||
        !get_number(&c, argv[10], "base", &o.rope.base) ||
        !get_number(&c, argv[11], "scale", &o.rope.scale) ||
        !get_optional_array(&c, argv[12], "cache", &o.cache) ||
        !get_optional_array(&c, argv[13], "cache_offset", &o.cache_offset))
        return c.raised;
    return nif_result(&c, em_fast_heads(x, &o, &out), &out);
}
