/*
 * nif_sort.c — NIFs for the sort family (include/emily_sort.h).
 *
 *   sort(tensor, axis, descending)
 *   argsort(tensor, axis, descending, dtype | nil)   nil dtype means s64
 *
 * Like the other graph-building NIFs they only build a lazy node.
 */
#include "nif.h"

#include "emily_sort.h"

NIF_DECL(sort) {
    nif_call c = NIF_CALL(env, "sort");
    em_array *a, *out;
    int axis;
    bool descending;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_int(&c, argv[1], "axis", &axis) ||
        !nif_get_bool(&c, argv[2], "descending", &descending))
        return c.raised;
    return nif_result(&c, em_sort(a, axis, descending, &out), &out);
}

NIF_DECL(argsort) {
    nif_call c = NIF_CALL(env, "argsort");
    em_array *a, *out;
    int axis;
    bool descending;
    em_dtype dtype = EM_S64;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_int(&c, argv[1], "axis", &axis) ||
        !nif_get_bool(&c, argv[2], "descending", &descending) ||
        (!enif_is_identical(argv[3], atoms.nil) &&
         !nif_get_dtype(&c, argv[3], "dtype", &dtype)))
        return c.raised;
    if (dtype == EM_PRED)
        return nif_raise_argument(&c, "argument dtype must be an integer type "
                                      "other than pred");
    return nif_result(&c, em_argsort(a, axis, descending, dtype, &out), &out);
}
