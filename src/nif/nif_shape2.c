/*
 * nif_shape2.c — NIFs for include/emily_pad.h: pad, dynamic_slice and
 * dynamic_put_slice (Emily.Native's "shape ops 2" section). Graph building
 * only, so they run inline on the calling scheduler.
 */
#include "emily_pad.h"
#include "nif.h"

/* pad(tensor, value, low, high, interior): one entry per axis in each list. */
NIF_DECL(pad) {
    nif_call c = NIF_CALL(env, "pad");
    em_array *a, *value, *out;
    int64_t low[EM_MAX_NDIM], high[EM_MAX_NDIM], interior[EM_MAX_NDIM];
    int n1, n2, n3;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_array(&c, argv[1], "value", &value) ||
        !nif_get_i64_list(&c, argv[2], "low", low, &n1) ||
        !nif_get_i64_list(&c, argv[3], "high", high, &n2) ||
        !nif_get_i64_list(&c, argv[4], "interior", interior, &n3))
        return c.raised;
    int ndim = em_array_ndim(a);
    if (n1 != ndim || n2 != ndim || n3 != ndim)
        return nif_raise_argument(
            &c,
            "low, high and interior need one entry per axis "
            "of the %d-d tensor, got %d, %d and %d",
            ndim, n1, n2, n3);
    return nif_result(&c, em_pad(a, value, low, high, interior, &out), &out);
}

/* dynamic_slice(tensor, starts, sizes, strides). */
NIF_DECL(dynamic_slice) {
    nif_call c = NIF_CALL(env, "dynamic_slice");
    em_array *a, *starts, *out;
    int64_t sizes[EM_MAX_NDIM], strides[EM_MAX_NDIM];
    int n1, n2;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_array(&c, argv[1], "starts", &starts) ||
        !nif_get_i64_list(&c, argv[2], "sizes", sizes, &n1) ||
        !nif_get_i64_list(&c, argv[3], "strides", strides, &n2))
        return c.raised;
    int ndim = em_array_ndim(a);
    if (n1 != ndim || n2 != ndim)
        return nif_raise_argument(
            &c,
            "sizes and strides need one entry per axis of "
            "the %d-d tensor, got %d and %d",
            ndim, n1, n2);
    return nif_result(&c, em_dynamic_slice(a, starts, sizes, strides, &out),
                      &out);
}

/* dynamic_put_slice(tensor, starts, update). */
NIF_DECL(dynamic_put_slice) {
    nif_call c = NIF_CALL(env, "dynamic_put_slice");
    em_array *a, *starts, *update, *out;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_array(&c, argv[1], "starts", &starts) ||
        !nif_get_array(&c, argv[2], "update", &update))
        return c.raised;
    return nif_result(&c, em_dynamic_put_slice(a, starts, update, &out), &out);
}
