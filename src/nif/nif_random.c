/*
 * nif_random.c — NIFs for the random-number primitives
 * (include/emily_random.h).
 *
 *   random_bits(key, shape, dtype)      dtype u8, u16, u32 or u64
 *   threefry2x32(key, counters)         counters u32[..., 2]
 *   random_erf_inv(tensor)              Nx.Random's erf_inv
 *
 * Like the other graph-building NIFs they only build a lazy node.
 */
#include "nif.h"

#include "emily_random.h"

NIF_DECL(random_bits) {
    nif_call c = NIF_CALL(env, "random_bits");
    em_array *key, *out;
    int64_t shape[EM_MAX_NDIM];
    int ndim;
    em_dtype dtype;
    if (!nif_get_array(&c, argv[0], "key", &key) ||
        !nif_get_i64_list(&c, argv[1], "shape", shape, &ndim) ||
        !nif_get_dtype(&c, argv[2], "dtype", &dtype))
        return c.raised;
    return nif_result(&c, em_random_bits(key, shape, ndim, dtype, &out), &out);
}

NIF_DECL(threefry2x32) {
    nif_call c = NIF_CALL(env, "threefry2x32");
    em_array *key, *counters, *out;
    if (!nif_get_array(&c, argv[0], "key", &key) ||
        !nif_get_array(&c, argv[1], "counters", &counters))
        return c.raised;
    return nif_result(&c, em_threefry2x32(key, counters, &out), &out);
}

NIF_DECL(random_erf_inv) {
    nif_call c = NIF_CALL(env, "random_erf_inv");
    em_array *a, *out;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return nif_result(&c, em_random_erf_inv(a, &out), &out);
}
