/*
 * nif_conv.c — the NIF for include/emily_conv.h (Emily.Native's "conv ops"
 * section). Graph building only.
 *
 *   conv(input, kernel, strides, pad_low, pad_high, input_dilation,
 *        kernel_dilation, feature_groups, batch_groups)
 *   with one list entry per spatial axis.
 */
#include "emily_conv.h"
#include "nif.h"

#include <string.h>

NIF_DECL(conv) {
    nif_call c = NIF_CALL(env, "conv");
    em_array *input, *kernel, *out;
    em_conv_options o;
    memset(&o, 0, sizeof o);
    if (!nif_get_array(&c, argv[0], "input", &input) ||
        !nif_get_array(&c, argv[1], "kernel", &kernel) ||
        !nif_get_i64(&c, argv[7], "feature_groups", &o.feature_groups) ||
        !nif_get_i64(&c, argv[8], "batch_groups", &o.batch_groups))
        return c.raised;
    static const char *names[] = {"strides", "pad_low", "pad_high",
                                  "input_dilation", "kernel_dilation"};
    int64_t *dst[] = {o.strides, o.pad_low, o.pad_high, o.input_dilation,
                      o.kernel_dilation};
    int ns = em_array_ndim(input) - 2;
    for (int i = 0; i < 5; i++) {
        int n;
        if (!nif_get_i64_list(&c, argv[2 + i], names[i], dst[i], &n))
            return c.raised;
        if (n != (ns > 0 ? ns : 0))
            return nif_raise_argument(&c,
                                      "%s needs one entry per spatial axis "
                                      "(%d), got %d",
                                      names[i], ns > 0 ? ns : 0, n);
    }
    return nif_result(&c, em_conv(input, kernel, &o, &out), &out);
}
