/*
 * nif_fft.c — the NIF for include/emily_fft.h (Emily.Native's "fft ops"
 * section): fft(tensor, axis, length, mode, eps) with mode one of :forward,
 * :inverse, :rfft, :irfft and eps a float >= 0. Graph building only.
 */
#include "emily_fft.h"
#include "nif.h"

NIF_DECL(fft) {
    nif_call c = NIF_CALL(env, "fft");
    em_array *a, *out;
    int axis;
    int64_t n;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_int(&c, argv[1], "axis", &axis) ||
        !nif_get_i64(&c, argv[2], "length", &n))
        return c.raised;
    static const char *const modes[] = {"forward", "inverse", "rfft", "irfft"};
    int mode = -1;
    for (int i = 0; i < 4; i++)
        if (enif_is_identical(argv[3], enif_make_atom(env, modes[i])))
            mode = i;
    double eps;
    if (!enif_get_double(env, argv[4], &eps) || eps < 0)
        return nif_raise_argument(&c, "eps must be a float >= 0");
    if (mode < 0)
        return nif_raise_argument(
            &c, "mode must be :forward, :inverse, :rfft or :irfft");
    return nif_result(&c, em_fft(a, axis, n, (em_fft_mode)mode, eps, &out),
                      &out);
}
