/*
 * nif_linalg.c — NIFs for include/emily_linalg.h (Emily.Native's "linalg
 * ops" section). Graph building only; multi-output ops return tuples.
 *
 *   cholesky(a)  invert(a)  determinant(a)
 *   qr(a, complete) -> {q, r}      lu(a) -> {p, l, u}
 *   eigh(a) -> {w, v}              svd(a, full) -> {u, s, vt}
 *   solve(a, b)
 *   triangular_solve(a, b, left_side, lower, transpose)
 */
#include "emily_linalg.h"
#include "nif.h"

/* A tuple of n new arrays (all released when one cannot be wrapped). */
static ERL_NIF_TERM tuple_of(nif_call *c, em_array **arrays, int n) {
    ERL_NIF_TERM terms[3];
    for (int i = 0; i < n; i++) {
        terms[i] = nif_make_array(c, arrays[i]);
        if (c->raised) {
            for (int j = i + 1; j < n; j++)
                em_array_release(arrays[j]);
            return c->raised;
        }
    }
    return enif_make_tuple_from_array(c->env, terms, (unsigned)n);
}

#define UNARY_NIF(name)                                                        \
    NIF_DECL(name) {                                                           \
        nif_call c = NIF_CALL(env, #name);                                     \
        em_array *a, *out;                                                     \
        if (!nif_get_array(&c, argv[0], "tensor", &a))                         \
            return c.raised;                                                   \
        return nif_result(&c, em_##name(a, &out), &out);                       \
    }
UNARY_NIF(cholesky)
UNARY_NIF(invert)
UNARY_NIF(determinant)

NIF_DECL(qr) {
    nif_call c = NIF_CALL(env, "qr");
    em_array *a, *outs[2];
    bool complete;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_bool(&c, argv[1], "complete", &complete))
        return c.raised;
    em_status st = em_qr(a, complete, &outs[0], &outs[1]);
    return st != EM_OK ? nif_raise_status(&c, st) : tuple_of(&c, outs, 2);
}

NIF_DECL(lu) {
    nif_call c = NIF_CALL(env, "lu");
    em_array *a, *outs[3];
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    em_status st = em_lu(a, &outs[0], &outs[1], &outs[2]);
    return st != EM_OK ? nif_raise_status(&c, st) : tuple_of(&c, outs, 3);
}

NIF_DECL(eigh) {
    nif_call c = NIF_CALL(env, "eigh");
    em_array *a, *outs[2];
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    em_status st = em_eigh(a, &outs[0], &outs[1]);
    return st != EM_OK ? nif_raise_status(&c, st) : tuple_of(&c, outs, 2);
}

NIF_DECL(svd) {
    nif_call c = NIF_CALL(env, "svd");
    em_array *a, *outs[3];
    bool full;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_bool(&c, argv[1], "full_matrices", &full))
        return c.raised;
    em_status st = em_svd(a, full, &outs[0], &outs[1], &outs[2]);
    return st != EM_OK ? nif_raise_status(&c, st) : tuple_of(&c, outs, 3);
}

NIF_DECL(solve) {
    nif_call c = NIF_CALL(env, "solve");
    em_array *a, *b, *out;
    if (!nif_get_array(&c, argv[0], "a", &a) ||
        !nif_get_array(&c, argv[1], "b", &b))
        return c.raised;
    return nif_result(&c, em_solve(a, b, &out), &out);
}

NIF_DECL(triangular_solve) {
    nif_call c = NIF_CALL(env, "triangular_solve");
    em_array *a, *b, *out;
    bool left, lower, transpose;
    if (!nif_get_array(&c, argv[0], "a", &a) ||
        !nif_get_array(&c, argv[1], "b", &b) ||
        !nif_get_bool(&c, argv[2], "left_side", &left) ||
        !nif_get_bool(&c, argv[3], "lower", &lower) ||
        !nif_get_bool(&c, argv[4], "transpose", &transpose))
        return c.raised;
    return nif_result(
        &c, em_triangular_solve(a, b, left, lower, transpose, &out), &out);
}
