/*
 * program_while.c — em_while: a loop whose condition and body are programs.
 *
 * The loop is one lazy node. Its inputs are the two programs (as holder
 * arrays, see tape.h: they are refcounted, cloned and captured like any
 * input, so a loop inside a traced function replays like any other op) and
 * the initial state. When evaluated, it replays and evaluates the
 * condition, then the body, until the condition is false, and packs the
 * final state into its own buffer (each part 16-byte aligned). One view
 * node per state array ("while_part") shares that buffer at the part's
 * offset: a node has one buffer, the loop has n results.
 *
 * The loop runs on the thread that evaluates it, with nested evaluations
 * (em__eval_arrays) of each replay. On a GPU the state stays there: each
 * test copies the one condition byte back, and the final state is packed
 * by the device's copy kernel. The program holders stay on the host
 * (host_only).
 *
 * The loop drops its reference to the state as soon as the body's replay
 * holds it, so that an op updating a state array (a KV cache's put_slice)
 * may take over its buffer instead of copying it (donation needs the only
 * reference).
 *
 * A tapped loop's body has extra outputs after the next state, the taps:
 * evaluated with the state, then handed to the tap callback each
 * iteration.
 */
#include "ops/copy.h"
#include "tape.h"

#include <stdlib.h>

typedef struct while_params {
    size_t nstate;
    size_t ntaps; /* body outputs after the next state */
    em_while_tap_fn tap;
    uint64_t site;
    size_t ncond_captures, nbody_captures; /* inputs after the state */
    size_t byte_offset[]; /* of each part in the packed buffer */
} while_params;

#define PART_ALIGN 16

/* Whether the scalar condition holds (nonzero; NaN counts as true). */
static em_status test_cond(em_program *cond, em_array *const *args,
                           size_t nargs, bool *holds) {
    em_array *c = NULL, *p = NULL;
    em_status st = em_program_run(cond, args, nargs, &c);
    if (st == EM_OK)
        st = em_as_type(c, EM_PRED, &p);
    if (st == EM_OK)
        st = em__eval_arrays(&p, 1);
    uint8_t value = 0;
    if (st == EM_OK && p->device != EM_DEVICE_CPU)
        st = em__read_device(p, &value, 1);
    else if (st == EM_OK)
        value = *(const uint8_t *)em__data(p);
    *holds = value != 0;
    em_array_release(c);
    em_array_release(p);
    return st;
}

static void release_all(em_array **a, size_t n) {
    for (size_t i = 0; i < n; i++) {
        em_array_release(a[i]);
        a[i] = NULL;
    }
}

static em_status while_eval(em_array *node) {
    const while_params *wp = node->params;
    size_t n = wp->nstate, nt = wp->ntaps;
    size_t nc = wp->ncond_captures, nb = wp->nbody_captures;
    em_program *cond = em__program_from_holder(node->inputs[0]);
    em_program *body = em__program_from_holder(node->inputs[1]);
    em_array *const *captures = node->inputs + 2 + n;
    /* Each run's arguments: the state, then that program's captures. */
    em_array **cargs = calloc(n + nc, sizeof *cargs);
    em_array **bargs = calloc(n + nb, sizeof *bargs);
    /* state and next swap each iteration: both have room for the taps. */
    em_array **state = calloc(n + nt, sizeof *state);
    em_array **next = calloc(n + nt, sizeof *next);
    em_status st = EM_OK;
    if (!cargs || !bargs || !state || !next) {
        st = em__fail(EM_ERR_OOM, "while: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        state[i] = node->inputs[2 + i];
        em_array_retain(state[i]);
    }
    memcpy(cargs + n, captures, nc * sizeof *cargs);
    memcpy(bargs + n, captures + nc, nb * sizeof *bargs);
    for (;;) {
        bool holds = false;
        memcpy(cargs, state, n * sizeof *cargs);
        st = test_cond(cond, cargs, n + nc, &holds);
        if (st != EM_OK || !holds)
            break;
        memcpy(bargs, state, n * sizeof *bargs);
        st = em_program_run(body, bargs, n + nb, next);
        /* The replay holds what it needs of the old state: let it go
         * before evaluating, so that its buffers may be donated. */
        release_all(state, n);
        if (st == EM_OK)
            st = em__eval_arrays(next, n + nt);
        if (st == EM_OK && nt)
            wp->tap(wp->site, next + n, nt);
        release_all(next + n, nt);
        em_array **swap = state;
        state = next;
        next = swap;
        if (st != EM_OK)
            break;
    }
    if (st == EM_OK)
        st = em__alloc_output(node, NULL, 0);
    for (size_t i = 0; st == EM_OK && i < n; i++) {
        char *part = (char *)node->buffer->data + wp->byte_offset[i];
        if (state[i]->size == 0)
            continue;
        if (node->device == EM_DEVICE_CPU)
            em__copy_array(part, state[i]);
        else
            st = em__gpu_copy_strided(state[i]->device, part, NULL,
                                      em__data(state[i]), state[i]->strides,
                                      state[i]->shape, state[i]->ndim,
                                      em_dtype_size(state[i]->dtype));
    }
done:
    if (state)
        release_all(state, n);
    if (next)
        release_all(next, n);
    free(state);
    free(next);
    free(cargs);
    free(bargs);
    return st;
}

static const em_prim while_prim = {"while", while_eval, NULL, while_eval};

static em_status part_eval(em_array *node) {
    em__share_buffer(node, node->inputs[0]);
    return EM_OK;
}

static const em_prim part_prim = {"while_part", part_eval, NULL, part_eval};

static bool same_signature(const em_array *a, em_dtype dtype,
                           const int64_t *shape, int ndim) {
    if (a->dtype != dtype || a->ndim != ndim)
        return false;
    for (int i = 0; i < ndim; i++)
        if (a->shape[i] != shape[i])
            return false;
    return true;
}

static em_status check_programs(em_program *cond, em_program *body,
                                em_array *const *initial, size_t n,
                                size_t ntaps) {
    if (!cond || !body || (n && !initial))
        return em__fail(EM_ERR_ARGUMENT, "while: NULL argument");
    if (n == 0)
        return em__fail(EM_ERR_ARGUMENT, "while: the state is empty");
    size_t cin = em_program_num_inputs(cond) - em_program_num_captures(cond);
    size_t bin = em_program_num_inputs(body) - em_program_num_captures(body);
    if (cin != n || em_program_num_outputs(cond) != 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "while: the condition takes %zu inputs and gives %zu "
                        "outputs, expected %zu inputs and 1 output",
                        cin, em_program_num_outputs(cond), n);
    if (bin != n || em_program_num_outputs(body) != n + ntaps)
        return em__fail(EM_ERR_ARGUMENT,
                        "while: the body takes %zu inputs and gives %zu "
                        "outputs, expected %zu inputs (the state) and %zu "
                        "outputs (the state and %zu taps)",
                        bin, em_program_num_outputs(body), n, n + ntaps,
                        ntaps);
    em_dtype dt;
    const int64_t *shape;
    int ndim;
    em_program_output_info(cond, 0, &dt, &shape, &ndim);
    int64_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= shape[i];
    if (count != 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "while: the condition must give one element, got "
                        "%lld",
                        (long long)count);
    for (size_t i = 0; i < n; i++) {
        em_desc d, w;
        if (!initial[i])
            return em__fail(EM_ERR_ARGUMENT, "while: state %zu is NULL", i);
        const char *which[3] = {"condition input", "body input", "body output"};
        for (int k = 0; k < 3; k++) {
            if (k == 0)
                em_program_input_info(cond, i, &dt, &shape, &ndim);
            else if (k == 1)
                em_program_input_info(body, i, &dt, &shape, &ndim);
            else
                em_program_output_info(body, i, &dt, &shape, &ndim);
            if (k < 2 && em_program_input_device(k ? body : cond, i) !=
                             initial[i]->device) {
                char dp[16], ds[16];
                em_device want = em_program_input_device(k ? body : cond, i);
                return em__fail(
                    EM_ERR_ARGUMENT,
                    "while: state %zu is on %s but %s %zu was "
                    "traced on %s",
                    i, em_device_name(initial[i]->device, ds, sizeof ds),
                    which[k], i, em_device_name(want, dp, sizeof dp));
            }
            if (!same_signature(initial[i], dt, shape, ndim)) {
                return em__fail(EM_ERR_ARGUMENT,
                                "while: state %zu is %s but %s %zu is %s%s", i,
                                em__describe(initial[i], &d), which[k], i,
                                em_dtype_name(dt),
                                em__describe_shape(shape, ndim, &w));
            }
        }
    }
    return EM_OK;
}

em_status em_while(em_program *cond, em_program *body, em_array *const *initial,
                   size_t n, em_array **outputs) {
    return em_while_tapped(cond, body, initial, n, 0, NULL, 0, outputs);
}

em_status em_while_tapped(em_program *cond, em_program *body,
                          em_array *const *initial, size_t n, size_t ntaps,
                          em_while_tap_fn tap, uint64_t site,
                          em_array **outputs) {
    if (ntaps && !tap)
        return em__fail(EM_ERR_ARGUMENT, "while: %zu taps but no callback",
                        ntaps);
    em_status st = check_programs(cond, body, initial, n, ntaps);
    if (st != EM_OK)
        return st;
    size_t nc = em_program_num_captures(cond);
    size_t nb = em_program_num_captures(body);
    size_t ninputs = 2 + n + nc + nb;
    size_t psize = sizeof(while_params) + n * sizeof(size_t);
    while_params *wp = malloc(psize);
    em_array **inputs = calloc(ninputs, sizeof *inputs);
    em_array *loop = NULL;
    size_t made = 0;
    if (!wp || !inputs) {
        st = em__fail(EM_ERR_OOM, "while: out of memory");
        goto done;
    }
    wp->nstate = n;
    wp->ntaps = ntaps;
    wp->tap = tap;
    wp->site = site;
    wp->ncond_captures = nc;
    wp->nbody_captures = nb;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        wp->byte_offset[i] = total;
        size_t bytes = em_array_nbytes(initial[i]);
        total += (bytes + PART_ALIGN - 1) / PART_ALIGN * PART_ALIGN;
    }
    st = em__program_holder(cond, &inputs[0]);
    if (st == EM_OK)
        st = em__program_holder(body, &inputs[1]);
    if (st != EM_OK)
        goto done;
    for (size_t i = 0; i < n; i++)
        inputs[2 + i] = initial[i];
    for (size_t i = 0; i < nc; i++)
        inputs[2 + n + i] = em_program_capture(cond, i);
    for (size_t i = 0; i < nb; i++)
        inputs[2 + n + nc + i] = em_program_capture(body, i);
    int64_t packed = (int64_t)(total ? total : PART_ALIGN);
    st = em__node_new_params(&while_prim, EM_U8, &packed, 1, inputs,
                             (int)ninputs, wp, psize, &loop);
    for (; st == EM_OK && made < n; made++) {
        const em_array *s = initial[made];
        st = em__node_new(&part_prim, s->dtype, s->shape, s->ndim, &loop, 1,
                          &outputs[made]);
        if (st == EM_OK)
            outputs[made]->offset =
                (int64_t)(wp->byte_offset[made] / em_dtype_size(s->dtype));
    }
    if (st != EM_OK)
        for (size_t i = 0; i < made; i++) {
            em_array_release(outputs[i]);
            outputs[i] = NULL;
        }
done:
    if (inputs) {
        em_array_release(inputs[0]);
        em_array_release(inputs[1]);
    }
    em_array_release(loop);
    free(inputs);
    free(wp);
    return st;
}
