/*
 * nif_ops.c — graph-building NIFs: one per engine entry point.
 *
 * These only build lazy nodes (microseconds), so they run inline on the
 * calling scheduler. They decode, call the engine and wrap the result; the
 * engine validates shapes, dtypes and axes and names them in its messages.
 *
 * The elementwise and reduce NIFs are generated from emily_ops.h, one per op
 * name, so the NIF table cannot drift from the engine's registry.
 */
#include "nif.h"

/* ---- generated from emily_ops.h ----------------------------------------- */

static ERL_NIF_TERM unary(ErlNifEnv *env, const ERL_NIF_TERM argv[],
                          em_unary_op op, const char *name) {
    nif_call c = NIF_CALL(env, name);
    em_array *a, *out;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return nif_result(&c, em_unary(op, a, &out), &out);
}

static ERL_NIF_TERM binary(ErlNifEnv *env, const ERL_NIF_TERM argv[],
                           em_binary_op op, const char *name) {
    nif_call c = NIF_CALL(env, name);
    em_array *a, *b, *out;
    if (!nif_get_array(&c, argv[0], "left", &a) ||
        !nif_get_array(&c, argv[1], "right", &b))
        return c.raised;
    return nif_result(&c, em_binary(op, a, b, &out), &out);
}

/* axes: nil reduces every axis (NULL, 0); a list names the axes. */
static ERL_NIF_TERM reduce(ErlNifEnv *env, const ERL_NIF_TERM argv[],
                           em_reduce_op op, const char *name) {
    nif_call c = NIF_CALL(env, name);
    em_array *a, *out;
    int axes[EM_MAX_NDIM];
    int naxes = 0;
    bool all = enif_is_identical(argv[1], atoms.nil);
    bool keep;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        (!all && !nif_get_int_list(&c, argv[1], "axes", axes, &naxes)) ||
        !nif_get_bool(&c, argv[2], "keep_axes", &keep))
        return c.raised;
    em_status st = em_reduce(op, a, all ? NULL : axes, naxes, keep, &out);
    return nif_result(&c, st, &out);
}

#define UNARY_NIF(name, accepts)                                               \
    NIF_DECL(unary_##name) { return unary(env, argv, EM_UNARY_##name, #name); }
#define BINARY_NIF(name, accepts)                                              \
    NIF_DECL(binary_##name) {                                                  \
        return binary(env, argv, EM_BINARY_##name, #name);                     \
    }
#define REDUCE_NIF(name, accepts)                                              \
    NIF_DECL(reduce_##name) {                                                  \
        return reduce(env, argv, EM_REDUCE_##name, #name);                     \
    }
EM_UNARY_OPS(UNARY_NIF)
EM_BINARY_OPS(BINARY_NIF)
EM_REDUCE_OPS(REDUCE_NIF)
#undef UNARY_NIF
#undef BINARY_NIF
#undef REDUCE_NIF

/* ---- scalars and conversions -------------------------------------------- */

/* scalar(bytes, dtype): one element from its native-endian bytes. */
NIF_DECL(scalar) {
    nif_call c = NIF_CALL(env, "scalar");
    ErlNifBinary bin;
    em_dtype dtype;
    em_array *out;
    if (!nif_get_dtype(&c, argv[1], "dtype", &dtype))
        return c.raised;
    if (!enif_inspect_binary(env, argv[0], &bin) ||
        bin.size != em_dtype_size(dtype))
        return nif_raise_argument(
            &c,
            "argument value must be a binary of %zu bytes "
            "(one %s element)",
            em_dtype_size(dtype), em_dtype_name(dtype));
    return nif_result(&c, em_scalar(bin.data, dtype, &out), &out);
}

/* scalar_f64(number, dtype): integers are accepted and converted. */
NIF_DECL(scalar_f64) {
    nif_call c = NIF_CALL(env, "scalar_f64");
    double value;
    ErlNifSInt64 i;
    em_dtype dtype;
    em_array *out;
    if (!enif_get_double(env, argv[0], &value)) {
        if (!enif_get_int64(env, argv[0], &i))
            return nif_raise_argument(&c, "argument value must be a number");
        value = (double)i;
    }
    if (!nif_get_dtype(&c, argv[1], "dtype", &dtype))
        return c.raised;
    return nif_result(&c, em_scalar_f64(value, dtype, &out), &out);
}

NIF_DECL(scalar_s64) {
    nif_call c = NIF_CALL(env, "scalar_s64");
    int64_t value;
    em_dtype dtype;
    em_array *out;
    if (!nif_get_i64(&c, argv[0], "value", &value) ||
        !nif_get_dtype(&c, argv[1], "dtype", &dtype))
        return c.raised;
    return nif_result(&c, em_scalar_s64(value, dtype, &out), &out);
}

NIF_DECL(select) {
    nif_call c = NIF_CALL(env, "select");
    em_array *pred, *on_true, *on_false, *out;
    if (!nif_get_array(&c, argv[0], "pred", &pred) ||
        !nif_get_array(&c, argv[1], "on_true", &on_true) ||
        !nif_get_array(&c, argv[2], "on_false", &on_false))
        return c.raised;
    return nif_result(&c, em_select(pred, on_true, on_false, &out), &out);
}

NIF_DECL(clip) {
    nif_call c = NIF_CALL(env, "clip");
    em_array *a, *lo, *hi, *out;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_array(&c, argv[1], "min", &lo) ||
        !nif_get_array(&c, argv[2], "max", &hi))
        return c.raised;
    return nif_result(&c, em_clip(a, lo, hi, &out), &out);
}

NIF_DECL(as_type) {
    nif_call c = NIF_CALL(env, "as_type");
    em_array *a, *out;
    em_dtype dtype;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_dtype(&c, argv[1], "dtype", &dtype))
        return c.raised;
    return nif_result(&c, em_as_type(a, dtype, &out), &out);
}

NIF_DECL(bitcast) {
    nif_call c = NIF_CALL(env, "bitcast");
    em_array *a, *out;
    em_dtype dtype;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_dtype(&c, argv[1], "dtype", &dtype))
        return c.raised;
    return nif_result(&c, em_bitcast(a, dtype, &out), &out);
}

/* ---- creation ----------------------------------------------------------- */

NIF_DECL(iota) {
    nif_call c = NIF_CALL(env, "iota");
    int64_t shape[EM_MAX_NDIM];
    int ndim, axis;
    em_dtype dtype;
    em_array *out;
    if (!nif_get_i64_list(&c, argv[0], "shape", shape, &ndim) ||
        !nif_get_int(&c, argv[1], "axis", &axis) ||
        !nif_get_dtype(&c, argv[2], "dtype", &dtype))
        return c.raised;
    return nif_result(&c, em_iota(shape, ndim, axis, dtype, &out), &out);
}

NIF_DECL(eye) {
    nif_call c = NIF_CALL(env, "eye");
    int64_t shape[EM_MAX_NDIM], k;
    int ndim;
    em_dtype dtype;
    em_array *out;
    if (!nif_get_i64_list(&c, argv[0], "shape", shape, &ndim) ||
        !nif_get_i64(&c, argv[1], "k", &k) ||
        !nif_get_dtype(&c, argv[2], "dtype", &dtype))
        return c.raised;
    return nif_result(&c, em_eye(shape, ndim, k, dtype, &out), &out);
}

NIF_DECL(full) {
    nif_call c = NIF_CALL(env, "full");
    em_array *value, *out;
    int64_t shape[EM_MAX_NDIM];
    int ndim;
    em_dtype dtype;
    if (!nif_get_array(&c, argv[0], "value", &value) ||
        !nif_get_i64_list(&c, argv[1], "shape", shape, &ndim) ||
        !nif_get_dtype(&c, argv[2], "dtype", &dtype))
        return c.raised;
    return nif_result(&c, em_full(value, shape, ndim, dtype, &out), &out);
}

/* ---- shape ops ---------------------------------------------------------- */

NIF_DECL(reshape) {
    nif_call c = NIF_CALL(env, "reshape");
    em_array *a, *out;
    int64_t shape[EM_MAX_NDIM];
    int ndim;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_i64_list(&c, argv[1], "shape", shape, &ndim))
        return c.raised;
    return nif_result(&c, em_reshape(a, shape, ndim, &out), &out);
}

NIF_DECL(transpose) {
    nif_call c = NIF_CALL(env, "transpose");
    em_array *a, *out;
    int perm[EM_MAX_NDIM];
    int n;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_int_list(&c, argv[1], "axes", perm, &n))
        return c.raised;
    return nif_result(&c, em_transpose(a, perm, n, &out), &out);
}

NIF_DECL(broadcast_to) {
    nif_call c = NIF_CALL(env, "broadcast_to");
    em_array *a, *out;
    int64_t shape[EM_MAX_NDIM];
    int ndim;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_i64_list(&c, argv[1], "shape", shape, &ndim))
        return c.raised;
    return nif_result(&c, em_broadcast_to(a, shape, ndim, &out), &out);
}

NIF_DECL(squeeze) {
    nif_call c = NIF_CALL(env, "squeeze");
    em_array *a, *out;
    int axes[EM_MAX_NDIM];
    int n;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_int_list(&c, argv[1], "axes", axes, &n))
        return c.raised;
    return nif_result(&c, em_squeeze(a, axes, n, &out), &out);
}

NIF_DECL(expand_dims) {
    nif_call c = NIF_CALL(env, "expand_dims");
    em_array *a, *out;
    int axis;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_int(&c, argv[1], "axis", &axis))
        return c.raised;
    return nif_result(&c, em_expand_dims(a, axis, &out), &out);
}

/* slice(tensor, start, stop, strides): one entry per axis of the tensor. */
NIF_DECL(slice) {
    nif_call c = NIF_CALL(env, "slice");
    em_array *a, *out;
    int64_t start[EM_MAX_NDIM], stop[EM_MAX_NDIM], strides[EM_MAX_NDIM];
    int n1, n2, n3;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_i64_list(&c, argv[1], "start", start, &n1) ||
        !nif_get_i64_list(&c, argv[2], "stop", stop, &n2) ||
        !nif_get_i64_list(&c, argv[3], "strides", strides, &n3))
        return c.raised;
    int ndim = em_array_ndim(a);
    if (n1 != ndim || n2 != ndim || n3 != ndim)
        return nif_raise_argument(
            &c,
            "start, stop and strides need one entry per axis "
            "of the %d-d tensor, got %d, %d and %d",
            ndim, n1, n2, n3);
    return nif_result(&c, em_slice(a, start, stop, strides, &out), &out);
}

NIF_DECL(put_slice) {
    nif_call c = NIF_CALL(env, "put_slice");
    em_array *a, *update, *out;
    int64_t start[EM_MAX_NDIM];
    int n;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_i64_list(&c, argv[1], "start", start, &n) ||
        !nif_get_array(&c, argv[2], "update", &update))
        return c.raised;
    if (n != em_array_ndim(a))
        return nif_raise_argument(&c,
                                  "start needs one entry per axis of the %d-d "
                                  "tensor, got %d",
                                  em_array_ndim(a), n);
    return nif_result(&c, em_put_slice(a, start, update, &out), &out);
}

NIF_DECL(concatenate) {
    nif_call c = NIF_CALL(env, "concatenate");
    em_array **arrays, *out;
    size_t n;
    int axis;
    if (!nif_get_int(&c, argv[1], "axis", &axis) ||
        !nif_get_array_list(&c, argv[0], "tensors", &arrays, &n))
        return c.raised;
    em_status st = em_concatenate(arrays, n, axis, &out);
    enif_free(arrays);
    return nif_result(&c, st, &out);
}

NIF_DECL(reverse) {
    nif_call c = NIF_CALL(env, "reverse");
    em_array *a, *out;
    int axes[EM_MAX_NDIM];
    int n;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_int_list(&c, argv[1], "axes", axes, &n))
        return c.raised;
    return nif_result(&c, em_reverse(a, axes, n, &out), &out);
}

NIF_DECL(contiguous) {
    nif_call c = NIF_CALL(env, "contiguous");
    em_array *a, *out;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return nif_result(&c, em_contiguous(a, &out), &out);
}

/* ---- argmax / argmin ---------------------------------------------------- */

/* (tensor, axis | nil, keep_axis, tie_high, dtype | nil): nil axis indexes
 * the flattened tensor; nil dtype means s64. */
static ERL_NIF_TERM argreduce(ErlNifEnv *env, const ERL_NIF_TERM argv[],
                              em_argreduce_op op, const char *name) {
    nif_call c = NIF_CALL(env, name);
    em_array *a, *out;
    em_argreduce_options opts = {0};
    opts.all_axes = enif_is_identical(argv[1], atoms.nil);
    opts.dtype = EM_S64;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        (!opts.all_axes && !nif_get_int(&c, argv[1], "axis", &opts.axis)) ||
        !nif_get_bool(&c, argv[2], "keep_axis", &opts.keep_axis) ||
        !nif_get_bool(&c, argv[3], "tie_high", &opts.tie_high) ||
        (!enif_is_identical(argv[4], atoms.nil) &&
         !nif_get_dtype(&c, argv[4], "dtype", &opts.dtype)))
        return c.raised;
    return nif_result(&c, em_argreduce(op, a, &opts, &out), &out);
}

NIF_DECL(argmax) { return argreduce(env, argv, EM_ARGMAX, "argmax"); }
NIF_DECL(argmin) { return argreduce(env, argv, EM_ARGMIN, "argmin"); }

/* ---- linear algebra ----------------------------------------------------- */

/* dot(a, b, contract_a, contract_b, batch_a, batch_b): the axis lists of
 * em_dot_options, paired by position. */
NIF_DECL(dot) {
    nif_call c = NIF_CALL(env, "dot");
    em_array *a, *b, *out;
    em_dot_options opts = {0};
    int ncb, nbb;
    if (!nif_get_array(&c, argv[0], "left", &a) ||
        !nif_get_array(&c, argv[1], "right", &b) ||
        !nif_get_int_list(&c, argv[2], "contract_left", opts.contract_a,
                          &opts.ncontract) ||
        !nif_get_int_list(&c, argv[3], "contract_right", opts.contract_b,
                          &ncb) ||
        !nif_get_int_list(&c, argv[4], "batch_left", opts.batch_a,
                          &opts.nbatch) ||
        !nif_get_int_list(&c, argv[5], "batch_right", opts.batch_b, &nbb))
        return c.raised;
    if (opts.ncontract != ncb)
        return nif_raise_argument(
            &c,
            "contract_left and contract_right must have the "
            "same length, got %d and %d",
            opts.ncontract, ncb);
    if (opts.nbatch != nbb)
        return nif_raise_argument(
            &c,
            "batch_left and batch_right must have the same "
            "length, got %d and %d",
            opts.nbatch, nbb);
    return nif_result(&c, em_dot(a, b, &opts, &out), &out);
}

NIF_DECL(matmul) {
    nif_call c = NIF_CALL(env, "matmul");
    em_array *a, *b, *out;
    if (!nif_get_array(&c, argv[0], "left", &a) ||
        !nif_get_array(&c, argv[1], "right", &b))
        return c.raised;
    return nif_result(&c, em_matmul(a, b, &out), &out);
}

/* ---- indexing ----------------------------------------------------------- */

NIF_DECL(gather) {
    nif_call c = NIF_CALL(env, "gather");
    em_array *a, *indices, *out;
    int axes[EM_MAX_NDIM];
    int n;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_array(&c, argv[1], "indices", &indices) ||
        !nif_get_int_list(&c, argv[2], "axes", axes, &n))
        return c.raised;
    return nif_result(&c, em_gather(a, indices, axes, n, &out), &out);
}

NIF_DECL(take) {
    nif_call c = NIF_CALL(env, "take");
    em_array *a, *indices, *out;
    int axis;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_array(&c, argv[1], "indices", &indices) ||
        !nif_get_int(&c, argv[2], "axis", &axis))
        return c.raised;
    return nif_result(&c, em_take(a, indices, axis, &out), &out);
}

NIF_DECL(take_along_axis) {
    nif_call c = NIF_CALL(env, "take_along_axis");
    em_array *a, *indices, *out;
    int axis;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_array(&c, argv[1], "indices", &indices) ||
        !nif_get_int(&c, argv[2], "axis", &axis))
        return c.raised;
    return nif_result(&c, em_take_along_axis(a, indices, axis, &out), &out);
}

typedef em_status (*indexed_fn)(em_array *, em_array *, em_array *, const int *,
                                int, em_array **);

static ERL_NIF_TERM indexed(ErlNifEnv *env, const ERL_NIF_TERM argv[],
                            indexed_fn fn, const char *name) {
    nif_call c = NIF_CALL(env, name);
    em_array *a, *indices, *updates, *out;
    int axes[EM_MAX_NDIM];
    int n;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_array(&c, argv[1], "indices", &indices) ||
        !nif_get_array(&c, argv[2], "updates", &updates) ||
        !nif_get_int_list(&c, argv[3], "axes", axes, &n))
        return c.raised;
    return nif_result(&c, fn(a, indices, updates, axes, n, &out), &out);
}

NIF_DECL(indexed_add) {
    return indexed(env, argv, em_indexed_add, "indexed_add");
}
NIF_DECL(indexed_put) {
    return indexed(env, argv, em_indexed_put, "indexed_put");
}

NIF_DECL(indices_in_range) {
    nif_call c = NIF_CALL(env, "indices_in_range");
    em_array *indices, *out;
    int64_t bound;
    if (!nif_get_array(&c, argv[0], "indices", &indices) ||
        !nif_get_i64(&c, argv[1], "bound", &bound))
        return c.raised;
    return nif_result(&c, em_indices_in_range(indices, bound, &out), &out);
}
