/*
 * nif_window.c — NIFs for include/emily_window.h (Emily.Native's "window
 * ops" section). Graph building only, so they run inline on the scheduler.
 *
 *   window_reduce(tensor, op, window, strides, pad_low, pad_high, dilations)
 *       op is :sum | :product | :max | :min; one entry per axis in each list
 *   window_scatter(tensor, source, init_value, select_max, window, strides,
 *                  pad_low, pad_high)
 */
#include "emily_window.h"
#include "nif.h"

#include <string.h>

/* Fill the options from five (or four, without dilations) per-axis lists. */
static bool get_window_opts(nif_call *c, const ERL_NIF_TERM *lists, int nlists,
                            int ndim, em_window_options *o) {
    static const char *names[] = {"window", "strides", "pad_low", "pad_high",
                                  "dilations"};
    int64_t *dst[] = {o->window, o->strides, o->pad_low, o->pad_high,
                      o->dilations};
    memset(o, 0, sizeof *o);
    for (int i = 0; i < nlists; i++) {
        int n;
        if (!nif_get_i64_list(c, lists[i], names[i], dst[i], &n))
            return false;
        if (n != ndim) {
            nif_raise_argument(c,
                               "%s needs one entry per axis of the %d-d "
                               "tensor, got %d",
                               names[i], ndim, n);
            return false;
        }
    }
    return true;
}

NIF_DECL(window_reduce) {
    nif_call c = NIF_CALL(env, "window_reduce");
    em_array *a, *out;
    char op[16];
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    em_window_op wop;
    if (!enif_get_atom(env, argv[1], op, sizeof op, ERL_NIF_LATIN1))
        return nif_raise_argument(&c,
                                  "op must be :sum, :product, :max or :min");
    if (!strcmp(op, "sum"))
        wop = EM_WINDOW_SUM;
    else if (!strcmp(op, "product"))
        wop = EM_WINDOW_PRODUCT;
    else if (!strcmp(op, "max"))
        wop = EM_WINDOW_MAX;
    else if (!strcmp(op, "min"))
        wop = EM_WINDOW_MIN;
    else
        return nif_raise_argument(&c,
                                  "op must be :sum, :product, :max or :min, "
                                  "got :%s",
                                  op);
    em_window_options o;
    if (!get_window_opts(&c, argv + 2, 5, em_array_ndim(a), &o))
        return c.raised;
    return nif_result(&c, em_window_reduce(wop, a, &o, &out), &out);
}

NIF_DECL(window_scatter) {
    nif_call c = NIF_CALL(env, "window_scatter");
    em_array *a, *source, *init, *out;
    bool select_max;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_array(&c, argv[1], "source", &source) ||
        !nif_get_array(&c, argv[2], "init_value", &init) ||
        !nif_get_bool(&c, argv[3], "select_max", &select_max))
        return c.raised;
    em_window_options o;
    if (!get_window_opts(&c, argv + 4, 4, em_array_ndim(a), &o))
        return c.raised;
    return nif_result(
        &c, em_window_scatter(select_max, a, source, init, &o, &out), &out);
}
