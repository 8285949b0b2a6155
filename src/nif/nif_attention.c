/*
 * nif_attention.c — the NIF for include/emily_attention.h (Emily.Native's
 * "scaled dot-product attention" section). Graph building only.
 *
 *   sdpa(q, k, v, scale, causal, mask, sinks)
 *   scale a float (0.0: 1/sqrt(head_dim)), causal a boolean, mask and sinks
 *   a tensor or nil.
 */
#include "emily_attention.h"
#include "nif.h"

#include <string.h>

/* A tensor argument that may be nil (*out NULL then). */
static bool get_optional_array(nif_call *c, ERL_NIF_TERM term, const char *arg,
                               em_array **out) {
    *out = NULL;
    if (enif_is_identical(term, atoms.nil))
        return true;
    return nif_get_array(c, term, arg, out);
}

NIF_DECL(sdpa) {
    nif_call c = NIF_CALL(env, "sdpa");
    em_array *q, *k, *v, *out;
    em_sdpa_options o;
    memset(&o, 0, sizeof o);
    if (!nif_get_array(&c, argv[0], "q", &q) ||
        !nif_get_array(&c, argv[1], "k", &k) ||
        !nif_get_array(&c, argv[2], "v", &v) ||
        !nif_get_bool(&c, argv[4], "causal", &o.causal) ||
        !get_optional_array(&c, argv[5], "mask", &o.mask) ||
        !get_optional_array(&c, argv[6], "sinks", &o.sinks))
        return c.raised;
    if (!enif_get_double(env, argv[3], &o.scale))
        return nif_raise_bad_arg(&c, "scale", "a float", argv[3]);
    return nif_result(&c, em_sdpa(q, k, v, &o, &out), &out);
}
