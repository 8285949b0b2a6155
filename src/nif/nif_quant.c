/*
 * nif_quant.c — the NIFs for include/emily_quant.h (Emily.Native's
 * "affine quantization" section). Graph building only.
 *
 *   quantize(w, group_size, bits) -> {wq, scales, biases}
 *   dequantize(wq, scales, biases, group_size, bits, dtype)
 *   quantized_matmul(x, wq, scales, biases, transpose, group_size, bits)
 */
#include "emily_quant.h"
#include "nif.h"

NIF_DECL(quantize) {
    nif_call c = NIF_CALL(env, "quantize");
    em_array *w, *outs[3];
    int gs, bits;
    if (!nif_get_array(&c, argv[0], "w", &w) ||
        !nif_get_int(&c, argv[1], "group_size", &gs) ||
        !nif_get_int(&c, argv[2], "bits", &bits))
        return c.raised;
    em_status st = em_quantize(w, gs, bits, &outs[0], &outs[1], &outs[2]);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    ERL_NIF_TERM terms[3];
    for (int i = 0; i < 3; i++) {
        terms[i] = nif_make_array(&c, outs[i]);
        if (c.raised) {
            for (int j = i + 1; j < 3; j++)
                em_array_release(outs[j]);
            return c.raised;
        }
    }
    return enif_make_tuple_from_array(env, terms, 3);
}

NIF_DECL(dequantize) {
    nif_call c = NIF_CALL(env, "dequantize");
    em_array *wq, *scales, *biases, *out;
    int gs, bits;
    em_dtype dtype;
    if (!nif_get_array(&c, argv[0], "wq", &wq) ||
        !nif_get_array(&c, argv[1], "scales", &scales) ||
        !nif_get_array(&c, argv[2], "biases", &biases) ||
        !nif_get_int(&c, argv[3], "group_size", &gs) ||
        !nif_get_int(&c, argv[4], "bits", &bits) ||
        !nif_get_dtype(&c, argv[5], "dtype", &dtype))
        return c.raised;
    return nif_result(
        &c, em_dequantize(wq, scales, biases, gs, bits, dtype, &out), &out);
}

NIF_DECL(quantized_matmul) {
    nif_call c = NIF_CALL(env, "quantized_matmul");
    em_array *x, *wq, *scales, *biases, *out;
    bool transpose;
    int gs, bits;
    if (!nif_get_array(&c, argv[0], "x", &x) ||
        !nif_get_array(&c, argv[1], "wq", &wq) ||
        !nif_get_array(&c, argv[2], "scales", &scales) ||
        !nif_get_array(&c, argv[3], "biases", &biases) ||
        !nif_get_bool(&c, argv[4], "transpose", &transpose) ||
        !nif_get_int(&c, argv[5], "group_size", &gs) ||
        !nif_get_int(&c, argv[6], "bits", &bits))
        return c.raised;
    return nif_result(&c,
                      em_quantized_matmul(x, wq, scales, biases, transpose, gs,
                                          bits, &out),
                      &out);
}
