/*
 * nif_scan.c — the NIF for cumulative ops (include/emily_scan.h).
 *
 *   scan(tensor, op, axis, reverse)     op: :sum | :product | :max | :min
 *
 * It only builds a lazy node.
 */
#include "nif.h"

#include "emily_scan.h"

#include <string.h>

NIF_DECL(scan) {
    nif_call c = NIF_CALL(env, "scan");
    em_array *a, *out;
    int axis;
    bool reverse;
    char name[16];
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    em_scan_op op = EM_SCAN_COUNT;
    if (enif_get_atom(env, argv[1], name, sizeof name, ERL_NIF_LATIN1) > 0) {
        if (!strcmp(name, "sum"))
            op = EM_SCAN_SUM;
        else if (!strcmp(name, "product"))
            op = EM_SCAN_PRODUCT;
        else if (!strcmp(name, "max"))
            op = EM_SCAN_MAX;
        else if (!strcmp(name, "min"))
            op = EM_SCAN_MIN;
    }
    if (op == EM_SCAN_COUNT)
        return nif_raise_argument(&c, "argument op must be one of :sum, "
                                      ":product, :max, :min");
    if (!nif_get_int(&c, argv[2], "axis", &axis) ||
        !nif_get_bool(&c, argv[3], "reverse", &reverse))
        return c.raised;
    return nif_result(&c, em_scan(op, a, axis, reverse, &out), &out);
}
