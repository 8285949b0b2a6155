/*
 * nif_autodiff.c — NIFs for reverse-mode autodiff (include/emily_autodiff.h).
 *
 *   identity(tensor)                      a fresh node: a differentiated input
 *   stop_gradient(tensor)                 no gradient flows through it
 *   vjp(outputs, cotangents, wrt)         list of gradients, one per wrt
 *
 * They only build lazy nodes.
 */
#include "nif.h"

#include "emily_autodiff.h"

NIF_DECL(identity) {
    nif_call c = NIF_CALL(env, "identity");
    em_array *a, *out;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return nif_result(&c, em_identity(a, &out), &out);
}

NIF_DECL(stop_gradient) {
    nif_call c = NIF_CALL(env, "stop_gradient");
    em_array *a, *out;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return nif_result(&c, em_stop_gradient(a, &out), &out);
}

NIF_DECL(vjp) {
    nif_call c = NIF_CALL(env, "vjp");
    em_array **outputs = NULL, **cotangents = NULL, **wrt = NULL,
             **grads = NULL;
    size_t nout = 0, nct = 0, nwrt = 0;
    ERL_NIF_TERM result = 0;
    if (!nif_get_array_list(&c, argv[0], "outputs", &outputs, &nout) ||
        !nif_get_array_list(&c, argv[1], "cotangents", &cotangents, &nct) ||
        !nif_get_array_list(&c, argv[2], "wrt", &wrt, &nwrt)) {
        result = c.raised;
        goto done;
    }
    if (nct != nout) {
        result = nif_raise_argument(&c, "%zu cotangents given for %zu outputs",
                                    nct, nout);
        goto done;
    }
    grads = enif_alloc(sizeof *grads * (nwrt ? nwrt : 1));
    if (!grads) {
        result = nif_raise_runtime(&c, "out of memory");
        goto done;
    }
    em_status st = em_vjp(outputs, cotangents, nout, wrt, nwrt, grads);
    if (st != EM_OK) {
        result = nif_raise_status(&c, st);
        goto done;
    }
    ERL_NIF_TERM *terms = enif_alloc(sizeof *terms * (nwrt ? nwrt : 1));
    if (!terms) {
        for (size_t i = 0; i < nwrt; i++)
            em_array_release(grads[i]);
        result = nif_raise_runtime(&c, "out of memory");
        goto done;
    }
    size_t made = 0;
    for (; made < nwrt; made++) {
        terms[made] = nif_make_array(&c, grads[made]); /* takes the ref */
        if (c.raised)
            break;
    }
    for (size_t i = made + 1; i < nwrt; i++)
        em_array_release(grads[i]);
    result = c.raised ? c.raised
                      : enif_make_list_from_array(env, terms, (unsigned)nwrt);
    enif_free(terms);
done:
    enif_free(outputs);
    enif_free(cotangents);
    enif_free(wrt);
    enif_free(grads);
    return result;
}
