/*
 * nif_ggml.c — the NIFs for include/emily_ggml.h (Emily.Native's "ggml
 * block formats" section). Graph building only; the engine validates.
 *
 *   ggml_dequantize(raw, type, k, dtype)   type: ggml's type number
 *   ggml_matmul(x, raw, type, k)
 */
#include "emily_ggml.h"
#include "nif.h"

NIF_DECL(ggml_dequantize) {
    nif_call c = NIF_CALL(env, "ggml_dequantize");
    em_array *raw, *out;
    int type;
    int64_t k;
    em_dtype dtype;
    if (!nif_get_array(&c, argv[0], "raw", &raw) ||
        !nif_get_int(&c, argv[1], "type", &type) ||
        !nif_get_i64(&c, argv[2], "k", &k) ||
        !nif_get_dtype(&c, argv[3], "dtype", &dtype))
        return c.raised;
    return nif_result(&c, em_ggml_dequantize(raw, type, k, dtype, &out), &out);
}

NIF_DECL(ggml_matmul) {
    nif_call c = NIF_CALL(env, "ggml_matmul");
    em_array *x, *raw, *out;
    int type;
    int64_t k;
    if (!nif_get_array(&c, argv[0], "x", &x) ||
        !nif_get_array(&c, argv[1], "raw", &raw) ||
        !nif_get_int(&c, argv[2], "type", &type) ||
        !nif_get_i64(&c, argv[3], "k", &k))
        return c.raised;
    return nif_result(&c, em_ggml_matmul(x, raw, type, k, &out), &out);
}
