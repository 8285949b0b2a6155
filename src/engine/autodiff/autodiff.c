/*
 * autodiff.c — em_vjp: reverse-mode differentiation as a graph rewrite.
 *
 * The lazy graph is the trace. em_vjp lists the pending nodes reachable from
 * the outputs (em__topo_order: inputs before consumers), marks the ones on a
 * float path from a differentiated wrapper, then walks the list backwards:
 * each marked node with a cotangent asks its primitive's rule for its
 * inputs' cotangents, which are summed per input. Rules only build nodes;
 * nothing is evaluated here.
 */
#include "emily_autodiff.h"
#include "rules.h"

#include <stdint.h>
#include <stdlib.h>

/* ---- identity and stop_gradient ---------------------------------------- */

static em_status share_eval(em_array *node) {
    em__share_buffer(node, node->inputs[0]);
    return EM_OK;
}

/* Views of their input's buffer: the same eval serves every device. */
static const em_prim identity_prim = {"identity", share_eval, em__vjp_identity,
                                      share_eval};
static const em_prim stop_gradient_prim = {"stop_gradient", share_eval,
                                           em__vjp_zero, share_eval};

/* A view of `a` with a's exact layout. */
static em_status same_layout_view(const em_prim *prim, em_array *a,
                                  em_array **out) {
    if (out)
        *out = NULL;
    if (!a || !out)
        return em__fail(EM_ERR_ARGUMENT, "%s: NULL argument", prim->name);
    em_array *node;
    em_status st =
        em__node_new(prim, a->dtype, a->shape, a->ndim, &a, 1, &node);
    if (st != EM_OK)
        return st;
    node->offset = a->offset;
    memcpy(node->strides, a->strides, sizeof(int64_t) * (size_t)a->ndim);
    node->row_contiguous = a->row_contiguous;
    *out = node;
    return EM_OK;
}

em_status em_identity(em_array *a, em_array **out) {
    return same_layout_view(&identity_prim, a, out);
}

em_status em_stop_gradient(em_array *a, em_array **out) {
    return same_layout_view(&stop_gradient_prim, a, out);
}

/* ---- node -> position in the topological order ------------------------- */

/* Position of `a` in the order, or SIZE_MAX when it is not in it. */
static size_t map_find(const em__ptr_map *m, const em_array *a) {
    size_t pos;
    return em__ptr_map_get(m, a, &pos) ? pos : SIZE_MAX;
}

/* ---- em_vjp ------------------------------------------------------------- */

/* A float value built after the wrappers, yet already evaluated:
 * evaluation detached it from its inputs, so a gradient path to the
 * wrappers may be lost. (Integer values never carry a gradient: reading
 * indices inside the function is fine.) */
static bool evaluated_inside(const em_array *a, uint64_t first_seq) {
    return a->prim != NULL && a->seq >= first_seq &&
           em_dtype_is_float(a->dtype) &&
           atomic_load(&a->state) == EM_NODE_DONE;
}

static em_status evaluated_error(const em_array *a) {
    em_desc d;
    return em__fail(EM_ERR_ARGUMENT,
                    "grad: %s (a %s node) was evaluated inside the "
                    "differentiated function; evaluation cuts the graph, so "
                    "its gradient is unknown (evaluate after the gradient, "
                    "or wrap the value in stop_gradient to treat it as a "
                    "constant)",
                    em__describe(a, &d), a->prim->name);
}

/* acc += g (acc takes ownership of g). */
static em_status accumulate(em_array **acc, em_array *g) {
    if (!*acc) {
        *acc = g;
        return EM_OK;
    }
    em_array *sum = NULL;
    em_status st = em_binary(EM_BINARY_add, *acc, g, &sum);
    em_array_release(g);
    if (st != EM_OK)
        return st;
    em_array_release(*acc);
    *acc = sum;
    return EM_OK;
}

static bool same_type_shape(const em_array *a, const em_array *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

typedef struct vjp_state {
    em_array **order; /* pending nodes, inputs first (retained) */
    size_t len;
    em__ptr_map map;
    bool *relevant; /* float node on a path from a wrapper */
    bool *is_wrt;
    em_array **ct; /* cotangent per position (owned) */
} vjp_state;

static void vjp_state_free(vjp_state *s) {
    for (size_t i = 0; i < s->len; i++) {
        em_array_release(s->ct ? s->ct[i] : NULL);
        em_array_release(s->order[i]);
    }
    free(s->order);
    free(s->relevant);
    free(s->is_wrt);
    free(s->ct);
    em__ptr_map_free(&s->map);
}

static bool is_listed(const em_array *a, em_array *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (list[i] == a)
            return true;
    return false;
}

/* A wrapper evaluated inside the function (reading a value computed from
 * it evaluates it too) is no longer pending, so the topological order
 * skips it; it is still the variable. Put such wrappers first, as leaves. */
static em_status add_evaluated_wrt(vjp_state *s, em_array *const *wrt,
                                   size_t nwrt) {
    size_t extra = 0;
    for (size_t i = 0; i < nwrt; i++)
        extra += atomic_load(&wrt[i]->state) == EM_NODE_DONE;
    if (extra == 0)
        return EM_OK;
    em_array **order = malloc(sizeof *order * (s->len + extra));
    if (!order)
        return em__fail(EM_ERR_OOM, "grad: out of memory");
    size_t n = 0;
    for (size_t i = 0; i < nwrt; i++) {
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = order[k] == wrt[i];
        if (!seen && atomic_load(&wrt[i]->state) == EM_NODE_DONE) {
            em_array_retain(wrt[i]);
            order[n++] = wrt[i];
        }
    }
    if (s->len)
        memcpy(order + n, s->order, sizeof *order * s->len);
    free(s->order);
    s->order = order;
    s->len += n;
    return EM_OK;
}

/* Mark relevant nodes (forward) and catch values evaluated inside. */
static em_status mark_relevant(vjp_state *s, uint64_t first_seq) {
    for (size_t i = 0; i < s->len; i++) {
        em_array *node = s->order[i];
        bool rel = s->is_wrt[i];
        /* stop_gradient: its input is a constant, evaluated or not */
        bool cut = node->prim && node->prim->vjp == em__vjp_zero;
        for (int j = 0; j < node->ninputs && !s->is_wrt[i] && !cut; j++) {
            em_array *in = node->inputs[j];
            size_t k = map_find(&s->map, in);
            if (k != SIZE_MAX)
                rel = rel || s->relevant[k];
            else if (evaluated_inside(in, first_seq))
                return evaluated_error(in);
        }
        s->relevant[i] = rel && em_dtype_is_float(node->dtype);
        if (rel && em_dtype_is_complex(node->dtype)) {
            em_desc d;
            return em__fail(EM_ERR_ARGUMENT,
                            "grad: gradients through complex values are not "
                            "supported (%s, a %s node)",
                            em__describe(node, &d),
                            node->prim ? node->prim->name : "data");
        }
    }
    return EM_OK;
}

/* Ask node i's rule for its inputs' cotangents and add them up. */
static em_status pull_back(vjp_state *s, size_t i) {
    em_array *node = s->order[i];
    bool needs[64] = {false};
    em_array *in_cts[64] = {NULL};
    int n = node->ninputs;
    if (n > 64)
        return em__fail(EM_ERR_ARGUMENT,
                        "grad: %s node has %d inputs (at most 64 are "
                        "differentiated)",
                        node->prim->name, n);
    bool any = false;
    for (int j = 0; j < n; j++) {
        size_t k = map_find(&s->map, node->inputs[j]);
        needs[j] = k != SIZE_MAX && s->relevant[k];
        any = any || needs[j];
    }
    if (!any)
        return EM_OK;
    if (!node->prim->vjp)
        return em__fail(EM_ERR_ARGUMENT, "grad: no gradient rule for %s",
                        node->prim->name);
    /* Arrays a rule makes from nothing (zeros, iota, broadcast numbers)
     * belong on the node's device: the thread's default while it runs. */
    em_device old = em_set_default_device(node->device);
    em_status st = node->prim->vjp(node, s->ct[i], needs, in_cts);
    em_set_default_device(old);
    for (int j = 0; j < n; j++) {
        em_array *g = in_cts[j];
        in_cts[j] = NULL;
        if (!g)
            continue;
        em_array *in = node->inputs[j];
        if (st == EM_OK && !needs[j]) {
            em_array_release(g);
            continue;
        }
        if (st == EM_OK && !same_type_shape(g, in)) {
            em_desc dg, di;
            st = em__fail(EM_ERR_RUNTIME,
                          "grad: the %s rule gave %s for input %d of type %s",
                          node->prim->name, em__describe(g, &dg), j,
                          em__describe(in, &di));
        }
        if (st != EM_OK) {
            em_array_release(g);
            continue;
        }
        st = accumulate(&s->ct[map_find(&s->map, in)], g);
    }
    return st;
}

static em_status check_args(em_array *const *outputs,
                            em_array *const *cotangents, size_t noutputs,
                            em_array *const *wrt, size_t nwrt,
                            em_array **grads) {
    if (!grads || (nwrt > 0 && !wrt) || (noutputs > 0 && !outputs) ||
        (noutputs > 0 && !cotangents))
        return em__fail(EM_ERR_ARGUMENT, "grad: NULL argument");
    for (size_t i = 0; i < nwrt; i++)
        if (!wrt[i])
            return em__fail(EM_ERR_ARGUMENT, "grad: wrt[%zu] is NULL", i);
    for (size_t k = 0; k < noutputs; k++) {
        if (!outputs[k] || !cotangents[k])
            return em__fail(EM_ERR_ARGUMENT,
                            "grad: output or cotangent %zu is NULL", k);
        if (!same_type_shape(outputs[k], cotangents[k])) {
            em_desc dout, dct;
            return em__fail(EM_ERR_ARGUMENT,
                            "grad: cotangent %s of output %zu must have the "
                            "output's type %s",
                            em__describe(cotangents[k], &dct), k,
                            em__describe(outputs[k], &dout));
        }
    }
    return EM_OK;
}

em_status em_vjp(em_array *const *outputs, em_array *const *cotangents,
                 size_t noutputs, em_array *const *wrt, size_t nwrt,
                 em_array **grads) {
    em_status st = check_args(outputs, cotangents, noutputs, wrt, nwrt, grads);
    if (st != EM_OK)
        return st;
    for (size_t i = 0; i < nwrt; i++)
        grads[i] = NULL;
    uint64_t first_seq = UINT64_MAX;
    for (size_t i = 0; i < nwrt; i++)
        if (wrt[i]->seq < first_seq)
            first_seq = wrt[i]->seq;
    for (size_t k = 0; k < noutputs; k++)
        if (evaluated_inside(outputs[k], first_seq) &&
            !is_listed(outputs[k], wrt, nwrt))
            return evaluated_error(outputs[k]);

    vjp_state s;
    memset(&s, 0, sizeof s);
    st = em__topo_order(outputs, noutputs, &s.order, &s.len);
    if (st == EM_OK)
        st = add_evaluated_wrt(&s, wrt, nwrt);
    for (size_t i = 0; i < s.len && st == EM_OK; i++)
        if (!em__ptr_map_put(&s.map, s.order[i], i))
            st = em__fail(EM_ERR_OOM, "grad: out of memory for %zu nodes",
                          s.len);
    if (st == EM_OK) {
        size_t n = s.len ? s.len : 1;
        s.relevant = calloc(n, sizeof *s.relevant);
        s.is_wrt = calloc(n, sizeof *s.is_wrt);
        s.ct = calloc(n, sizeof *s.ct);
        if (!s.relevant || !s.is_wrt || !s.ct)
            st = em__fail(EM_ERR_OOM, "grad: out of memory");
    }
    for (size_t i = 0; st == EM_OK && i < nwrt; i++) {
        size_t k = map_find(&s.map, wrt[i]);
        if (k != SIZE_MAX)
            s.is_wrt[k] = true;
    }
    if (st == EM_OK)
        st = mark_relevant(&s, first_seq);
    for (size_t k = 0; st == EM_OK && k < noutputs; k++) {
        size_t pos = map_find(&s.map, outputs[k]);
        if (pos == SIZE_MAX || !s.relevant[pos])
            continue;
        em_array_retain(cotangents[k]);
        st = accumulate(&s.ct[pos], cotangents[k]);
    }
    for (size_t i = s.len; st == EM_OK && i-- > 0;) {
        if (!s.ct[i] || !s.relevant[i] || s.is_wrt[i])
            continue;
        st = pull_back(&s, i);
        /* Done with this cotangent: let it go before the earlier nodes. */
        em_array_release(s.ct[i]);
        s.ct[i] = NULL;
    }
    for (size_t i = 0; st == EM_OK && i < nwrt; i++) {
        size_t k = map_find(&s.map, wrt[i]);
        em_array *g = k != SIZE_MAX ? s.ct[k] : NULL;
        if (g) {
            em_array_retain(g);
            grads[i] = g;
            continue;
        }
        em_array *zero = NULL;
        em_device old = em_set_default_device(wrt[i]->device);
        st = em_scalar_f64(0.0, wrt[i]->dtype, &zero);
        if (st == EM_OK)
            st = em_full(zero, wrt[i]->shape, wrt[i]->ndim, wrt[i]->dtype,
                         &grads[i]);
        em_set_default_device(old);
        em_array_release(zero);
    }
    if (st != EM_OK)
        for (size_t i = 0; i < nwrt; i++) {
            em_array_release(grads[i]);
            grads[i] = NULL;
        }
    vjp_state_free(&s);
    return st;
}
