/*
 * array.c — array nodes: creation, reference counting, metadata, shape
 * validation, reading back, and the output-buffer helpers primitives use.
 */
#include "internal.h"

#include <stdlib.h>

/* ---- shapes ------------------------------------------------------------- */

int64_t em__row_strides(const int64_t *shape, int ndim, int64_t *strides) {
    /* An empty array reads nothing, and its other dimensions may be as
     * large as int64 allows (em__check_shape accepts [0, 2^62, 2^62]): the
     * row-major products would overflow. Its strides are all 0, so no
     * offset computed from them can overflow either. */
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) {
            for (int j = 0; j < ndim; j++)
                strides[j] = 0;
            return 0;
        }
    int64_t n = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = n;
        n *= shape[i];
    }
    return n;
}

bool em__is_row_contiguous(const int64_t *shape, const int64_t *strides,
                           int ndim) {
    int64_t expect = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] == 0)
            return true; /* empty: any layout reads nothing */
        if (shape[i] != 1 && strides[i] != expect)
            return false;
        expect *= shape[i];
    }
    return true;
}

em_status em__check_shape(const char *op, const int64_t *shape, int ndim,
                          em_dtype dtype, int64_t *size_out) {
    em_desc d;
    if (ndim < 0 || ndim > EM_MAX_NDIM)
        return em__fail(EM_ERR_ARGUMENT, "%s: rank %d is out of range (0..%d)",
                        op, ndim, EM_MAX_NDIM);
    if (ndim > 0 && !shape)
        return em__fail(EM_ERR_ARGUMENT, "%s: missing shape", op);
    if (!em_dtype_is_valid((int)dtype))
        return em__fail(EM_ERR_ARGUMENT, "%s: unknown dtype %d", op,
                        (int)dtype);
    int64_t n = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return em__fail(EM_ERR_ARGUMENT,
                            "%s: dimension %d of shape %s is negative", op, i,
                            em__describe_shape(shape, ndim, &d));
        if (shape[i] != 0 && n > INT64_MAX / shape[i])
            overflow = true;
        else
            n *= shape[i];
    }
    /* A zero dimension anywhere makes the count 0, even after an overflow
     * in the partial product. */
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) {
            overflow = false;
            n = 0;
        }
    if (overflow ||
        (uint64_t)n > (uint64_t)(INT64_MAX / 16) / em_dtype_size(dtype))
        return em__fail(
            EM_ERR_ARGUMENT, "%s: shape %s of %s has too many elements", op,
            em__describe_shape(shape, ndim, &d), em_dtype_name(dtype));
    if (size_out)
        *size_out = n;
    return EM_OK;
}

em_status em__check_axis(const char *op, int axis, int ndim, int *out) {
    int a = axis < 0 ? axis + ndim : axis;
    if (a < 0 || a >= ndim)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: axis %d is out of range for rank %d", op, axis,
                        ndim);
    *out = a;
    return EM_OK;
}

em_status em__check_axes(const char *op, const int *axes, int naxes, int ndim,
                         unsigned *mask_out) {
    unsigned mask = 0;
    if (naxes < 0 || naxes > ndim)
        return em__fail(EM_ERR_ARGUMENT, "%s: %d axes given for rank %d", op,
                        naxes, ndim);
    for (int i = 0; i < naxes; i++) {
        int a;
        em_status st = em__check_axis(op, axes[i], ndim, &a);
        if (st != EM_OK)
            return st;
        if (mask & (1u << a))
            return em__fail(EM_ERR_ARGUMENT, "%s: axis %d is repeated", op,
                            axes[i]);
        mask |= 1u << a;
    }
    *mask_out = mask;
    return EM_OK;
}

em_status em__broadcast_shapes(const char *op, const int64_t *sa, int na,
                               const int64_t *sb, int nb, int64_t *out,
                               int *nout) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t da = ia >= 0 ? sa[ia] : 1, db = ib >= 0 ? sb[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            em_desc x, y;
            return em__fail(EM_ERR_ARGUMENT,
                            "%s: cannot broadcast shapes %s and %s (axis %d: "
                            "%lld vs %lld)",
                            op, em__describe_shape(sa, na, &x),
                            em__describe_shape(sb, nb, &y), i, (long long)da,
                            (long long)db);
        }
        out[i] = da == 1 ? db : da;
    }
    *nout = n;
    return EM_OK;
}

/* ---- nodes -------------------------------------------------------------- */

static em_array *node_alloc(em_dtype dtype, const int64_t *shape, int ndim) {
    em_array *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    atomic_init(&a->refcount, 1);
    atomic_init(&a->state, EM_NODE_PENDING);
    a->dtype = dtype;
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        a->shape[i] = shape[i];
    a->size = em__row_strides(a->shape, ndim, a->strides);
    a->row_contiguous = true;
    a->seq = em__next_seq();
    return a;
}

static atomic_uint_fast64_t node_counter;

uint64_t em__next_seq(void) {
    return atomic_fetch_add_explicit(&node_counter, 1, memory_order_relaxed) +
           1;
}

/* A rank-0 CPU array beside inputs on another device: the numbers of
 * Elixir code (`x * 2.0`) arrive as such scalars. As PyTorch does with CPU
 * scalar tensors, they follow the other inputs to their device; any other
 * mix of devices is an error (moving data is the caller's em_to_device).
 * A node of CPU scalars only (a number broadcast to a shape) goes to the
 * thread's default device, as a node without inputs does. */
static bool follows_device(const em_array *a) {
    return a->ndim == 0 && a->device == EM_DEVICE_CPU && !a->host_only;
}

/* The device of a node built from `inputs`, or an error naming the op and
 * the first two inputs on different devices. */
static em_status device_of_inputs(const em_prim *prim, em_array *const *inputs,
                                  int ninputs, em_device *device) {
    int lead = -1;
    for (int i = 0; i < ninputs && lead < 0; i++)
        if (!follows_device(inputs[i]) && !inputs[i]->host_only)
            lead = i;
    if (lead < 0) { /* only CPU scalars, or no inputs */
        *device = em_default_device();
        return EM_OK;
    }
    *device = inputs[lead]->device;
    for (int i = 0; i < ninputs; i++)
        if (inputs[i]->device != *device && !follows_device(inputs[i]) &&
            !inputs[i]->host_only) {
            char d0[16], d1[16];
            em_desc x, y;
            return em__fail(EM_ERR_ARGUMENT,
                            "%s: inputs are on different devices (%s on %s, "
                            "%s on %s); move one with to_device first",
                            prim->name, em__describe(inputs[lead], &x),
                            em_device_name(*device, d0, sizeof d0),
                            em__describe(inputs[i], &y),
                            em_device_name(inputs[i]->device, d1, sizeof d1));
        }
    return EM_OK;
}

em_status em__node_new(const em_prim *prim, em_dtype dtype,
                       const int64_t *shape, int ndim, em_array *const *inputs,
                       int ninputs, em_array **out) {
    *out = NULL;
    em_device device;
    em_status st = device_of_inputs(prim, inputs, ninputs, &device);
    if (st != EM_OK)
        return st;
    bool moves = false;
    for (int i = 0; i < ninputs; i++)
        moves |= inputs[i]->device != device && follows_device(inputs[i]);
    if (!moves)
        return em__node_new_on(prim, device, dtype, shape, ndim, inputs,
                               ninputs, out);
    /* CPU scalars follow: their transfers are built first, so that every
     * input is older than the node (program tapes rely on that order). */
    em_array **moved = calloc((size_t)ninputs, sizeof *moved);
    if (!moved)
        return em__fail(EM_ERR_OOM, "%s: out of memory building the node",
                        prim->name);
    for (int i = 0; st == EM_OK && i < ninputs; i++) {
        if (inputs[i]->device != device && follows_device(inputs[i])) {
            st = em_to_device(inputs[i], device, &moved[i]);
        } else {
            em_array_retain(inputs[i]);
            moved[i] = inputs[i];
        }
    }
    if (st == EM_OK)
        st = em__node_new_on(prim, device, dtype, shape, ndim, moved, ninputs,
                             out);
    for (int i = 0; i < ninputs; i++)
        em_array_release(moved[i]);
    free(moved);
    return st;
}

em_status em__node_new_on(const em_prim *prim, em_device device, em_dtype dtype,
                          const int64_t *shape, int ndim,
                          em_array *const *inputs, int ninputs,
                          em_array **out) {
    *out = NULL;
    /* Every op's output shape is checked here once: an op may derive one
     * whose element count overflows from inputs that are fine (reducing
     * the empty axis of [2^62, 4, 0] leaves [2^62, 4]). */
    em_status st = em__check_shape(prim->name, shape, ndim, dtype, NULL);
    if (st != EM_OK)
        return st;
    if (device != EM_DEVICE_CPU) {
        if (!prim->gpu_eval) {
            char d0[16];
            return em__fail(EM_ERR_UNSUPPORTED,
                            "%s: not implemented on the GPU yet (input on %s); "
                            "move the input to the CPU with to_device",
                            prim->name, em_device_name(device, d0, sizeof d0));
        }
        st = em__gpu_backend(device, NULL, NULL);
        if (st != EM_OK)
            return st;
    }
    em_array **held = NULL;
    if (ninputs > 0) {
        held = malloc(sizeof(em_array *) * (size_t)ninputs);
        if (!held)
            return em__fail(EM_ERR_OOM, "%s: out of memory building the node",
                            prim->name);
        for (int i = 0; i < ninputs; i++) {
            em_array_retain(inputs[i]);
            held[i] = inputs[i];
        }
    }
    em_array *a = node_alloc(dtype, shape, ndim);
    if (!a) {
        for (int i = 0; i < ninputs; i++)
            em_array_release(held[i]);
        free(held);
        return em__fail(EM_ERR_OOM, "%s: out of memory building the node",
                        prim->name);
    }
    a->prim = prim;
    a->device = device;
    a->inputs = held;
    a->ninputs = ninputs;
    *out = a;
    return EM_OK;
}

em_status em__node_set_params(em_array *node, const void *params, size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p)
        return em__fail(EM_ERR_OOM, "%s: out of memory for parameters",
                        node->prim ? node->prim->name : "node");
    memcpy(p, params, size);
    free(node->params);
    node->params = p;
    node->params_size = size;
    return EM_OK;
}

em_status em__node_new_params(const em_prim *prim, em_dtype dtype,
                              const int64_t *shape, int ndim,
                              em_array *const *inputs, int ninputs,
                              const void *params, size_t size, em_array **out) {
    em_array *node;
    em_status st =
        em__node_new(prim, dtype, shape, ndim, inputs, ninputs, &node);
    if (st == EM_OK)
        st = em__node_set_params(node, params, size);
    if (st != EM_OK) {
        em_array_release(node);
        *out = NULL;
        return st;
    }
    *out = node;
    return EM_OK;
}

void em_array_retain(em_array *a) {
    if (a)
        atomic_fetch_add_explicit(&a->refcount, 1, memory_order_relaxed);
}

/* Releasing the last reference of a long lazy chain would recurse once per
 * node; a worklist keeps the C stack flat whatever the graph's depth. */
void em_array_release(em_array *a) {
    if (!a ||
        atomic_fetch_sub_explicit(&a->refcount, 1, memory_order_acq_rel) != 1)
        return;
    em_array *stack_small[64];
    em_array **stack = stack_small;
    size_t cap = 64, top = 0;
    stack[top++] = a;
    while (top) {
        em_array *n = stack[--top];
        for (int i = 0; i < n->ninputs; i++) {
            em_array *in = n->inputs[i];
            if (atomic_fetch_sub_explicit(&in->refcount, 1,
                                          memory_order_acq_rel) != 1)
                continue;
            if (top == cap) {
                size_t ncap = cap * 2;
                em_array **grown = malloc(ncap * sizeof *grown);
                if (!grown) { /* cannot grow: leak this subgraph, never crash */
                    continue;
                }
                memcpy(grown, stack, top * sizeof *grown);
                if (stack != stack_small)
                    free(stack);
                stack = grown;
                cap = ncap;
            }
            stack[top++] = in;
        }
        free(n->inputs);
        if (n->prim && n->prim->release_params && n->params)
            n->prim->release_params(n);
        free(n->params);
        free(n->error_message);
        em__buffer_release(n->buffer);
        free(n);
    }
    if (stack != stack_small)
        free(stack);
}

em_dtype em_array_dtype(const em_array *a) { return a->dtype; }
int em_array_ndim(const em_array *a) { return a->ndim; }
const int64_t *em_array_shape(const em_array *a) { return a->shape; }
int64_t em_array_size(const em_array *a) { return a->size; }
size_t em_array_nbytes(const em_array *a) {
    return (size_t)a->size * em_dtype_size(a->dtype);
}
bool em_array_is_evaluated(const em_array *a) {
    return atomic_load(&((em_array *)a)->state) == EM_NODE_DONE;
}

/* ---- arrays with data --------------------------------------------------- */

static em_status leaf_new(const char *op, size_t nbytes, const int64_t *shape,
                          int ndim, em_dtype dtype, em_array **out) {
    int64_t size;
    em_status st = em__check_shape(op, shape, ndim, dtype, &size);
    if (st != EM_OK)
        return st;
    size_t want = (size_t)size * em_dtype_size(dtype);
    if (nbytes != want) {
        em_desc d;
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: got %zu bytes for %s%s, expected %zu", op, nbytes,
                        em_dtype_name(dtype),
                        em__describe_shape(shape, ndim, &d), want);
    }
    em_array *a = node_alloc(dtype, shape, ndim);
    if (!a)
        return em__fail(EM_ERR_OOM, "%s: out of memory", op);
    atomic_store(&a->state, EM_NODE_DONE);
    *out = a;
    return EM_OK;
}

em_status em_from_data(const void *data, size_t nbytes, const int64_t *shape,
                       int ndim, em_dtype dtype, em_array **out) {
    *out = NULL;
    em_array *a;
    em_status st = leaf_new("from_data", nbytes, shape, ndim, dtype, &a);
    if (st != EM_OK)
        return st;
    st = em__buffer_new(nbytes, &a->buffer);
    if (st != EM_OK) {
        em_array_release(a);
        return st;
    }
    if (nbytes)
        memcpy(a->buffer->data, data, nbytes);
    *out = a;
    return EM_OK;
}

em_status em_from_external(const void *data, size_t nbytes,
                           const int64_t *shape, int ndim, em_dtype dtype,
                           void (*release)(void *ctx), void *ctx,
                           em_array **out) {
    *out = NULL;
    em_array *a;
    em_status st = leaf_new("from_external", nbytes, shape, ndim, dtype, &a);
    if (st == EM_OK && ((uintptr_t)data % em_dtype_size(dtype)) != 0) {
        em_array_release(a);
        st = em__fail(EM_ERR_ARGUMENT,
                      "from_external: data is not aligned to %zu bytes",
                      em_dtype_size(dtype));
    }
    if (st != EM_OK)
        return st;
    st = em__buffer_external(data, nbytes, release, ctx, &a->buffer);
    if (st != EM_OK) {
        em_array_release(a);
        return st;
    }
    *out = a;
    return EM_OK;
}

em_status em_scalar(const void *value, em_dtype dtype, em_array **out) {
    if (!em_dtype_is_valid((int)dtype)) {
        *out = NULL;
        return em__fail(EM_ERR_ARGUMENT, "scalar: unknown dtype %d",
                        (int)dtype);
    }
    return em_from_data(value, em_dtype_size(dtype), NULL, 0, dtype, out);
}

/* ---- reading ------------------------------------------------------------ */

static em_status node_failure(em_array *a, const char *op) {
    if (atomic_load(&a->state) == EM_NODE_DONE)
        return EM_OK;
    return em__fail(EM_ERR_ARGUMENT, "%s: array is not evaluated", op);
}

em_status em_array_data(em_array *a, const void **data, size_t *nbytes) {
    em_status st = node_failure(a, "array_data");
    if (st != EM_OK)
        return st;
    if (!a->row_contiguous) {
        em_desc d;
        return em__fail(EM_ERR_ARGUMENT,
                        "array_data: %s is not row-contiguous (call contiguous "
                        "first)",
                        em__describe(a, &d));
    }
    if (a->device != EM_DEVICE_CPU) {
        em_desc d;
        char dev[16];
        return em__fail(EM_ERR_ARGUMENT,
                        "array_data: %s lives on %s; read it with em_read or "
                        "move it with to_device first",
                        em__describe(a, &d),
                        em_device_name(a->device, dev, sizeof dev));
    }
    atomic_store(&a->buffer->pinned, true);
    *data = em__data(a);
    *nbytes = em_array_nbytes(a);
    return EM_OK;
}

em_status em_read(em_array *a, void *dst, size_t nbytes) {
    if (nbytes != em_array_nbytes(a)) {
        em_desc d;
        return em__fail(EM_ERR_ARGUMENT, "read: %s needs %zu bytes, got %zu",
                        em__describe(a, &d), em_array_nbytes(a), nbytes);
    }
    em_array *c;
    em_status st = em_contiguous(a, &c);
    if (st != EM_OK)
        return st;
    st = em_eval(&c, 1);
    /* A GPU array: only the viewed bytes travel (c is row-contiguous). */
    if (st == EM_OK && nbytes && c->device != EM_DEVICE_CPU)
        st = em__read_device(c, dst, nbytes);
    else if (st == EM_OK && nbytes)
        memcpy(dst, em__data(c), nbytes);
    em_array_release(c);
    return st;
}

/* ---- output buffers ----------------------------------------------------- */

static bool can_donate(const em_array *node, const em_array *in) {
    const em_buffer *b = in->buffer;
    return b && b->device == node->device && atomic_load(&in->refcount) == 1 &&
           atomic_load(&((em_buffer *)b)->refcount) == 1 &&
           !atomic_load(&((em_buffer *)b)->pinned) && b->capacity != 0 &&
           in->row_contiguous && in->offset == 0 && in->size == node->size &&
           em_dtype_size(in->dtype) == em_dtype_size(node->dtype) &&
           b->nbytes == em_array_nbytes(node);
}

em_status em__alloc_output(em_array *node, em_array *const *donors,
                           int ndonors) {
    for (int i = 0; i < ndonors; i++) {
        if (donors[i] && can_donate(node, donors[i])) {
            em__buffer_retain(donors[i]->buffer);
            node->buffer = donors[i]->buffer;
            return EM_OK;
        }
    }
    return em__buffer_new_on(node->device, em_array_nbytes(node),
                             &node->buffer);
}

void em__share_buffer(em_array *node, const em_array *src) {
    em__buffer_retain(src->buffer);
    node->buffer = src->buffer;
}
