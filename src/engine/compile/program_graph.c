/*
 * program_graph.c — a program replayed on a GPU as one CUDA graph.
 *
 * em_program_run on a program built with cuda_graph (and capturable, see
 * graph_check) builds one "cuda_graph" node over [holder, inputs...] whose
 * buffer packs every output (each part 16-byte aligned), and one view per
 * output into it, as the while loop does. The node's evaluation:
 *
 *   PENDING   runs the program the ordinary way (nested evaluation) and
 *             packs its outputs: the warm-up. Then captures: the program
 *             is replayed once more on stable input arrays the graph owns,
 *             between graph_begin and graph_end, with a pool bound to the
 *             thread (alloc.c) so that every block the recorded kernels
 *             touch stays the graph's. The outputs' addresses and layouts
 *             are kept. Any failure -> FALLBACK with the reason.
 *   CAPTURED  copies the arguments into the stable inputs, launches the
 *             graph, copies the outputs into the node's fresh buffer.
 *   FALLBACK  em_program_run never builds the node again; a node built
 *             before the fallback runs the ordinary way.
 *
 * All of a graph's GPU work (warm-up, capture, launches, copies) goes to a
 * CUDA stream of its own (a private engine stream id), under the graph's
 * lock: nobody else can queue work into the capture, launches are in
 * order, and the stream of the evaluating thread and the graph's stream
 * wait for each other around it (gpu_stream.h's rule). Warm-up and capture
 * run on the same stream, so the cuBLAS handle (one per CUDA stream) and
 * its workspace exist before the capture starts.
 */
#include "program_graph.h"
#include "../cuda/emily_cuda.h"
#include "gpu/gpu_stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define PART_ALIGN 16

/* Where an output of the captured graph is and how to copy it out. */
typedef struct graph_output {
    const void *data; /* at the output's offset */
    int ndim;
    int64_t shape[EM_MAX_NDIM];
    int64_t strides[EM_MAX_NDIM];
    size_t elem_size;
    int64_t size;
} graph_output;

struct em__program_graph {
    pthread_mutex_t lock;
    atomic_int state; /* enum em_cuda_graph_state */
    char reason[192];
    em_device device;
    uint64_t stream_id; /* the graph's own engine stream id */
    void *stream;       /* its CUDA stream, once used */
    size_t nin, nout;
    size_t *part_offset; /* byte offset of each output in the packed buffer */
    size_t packed_bytes;
    em_array **stable;   /* nin evaluated, row-major arrays the graph reads */
    /* Per tape node: the upload of a CPU constant (a number that followed
     * its GPU operands), made once before the capture; else NULL. */
    em_array **uploads;
    size_t ntape;
    graph_output *outs;  /* nout */
    em__gpu_pool *pool;  /* every block the recorded work uses */
    void *exec;          /* the instantiated graph */
    int64_t nodes, replays;
};

static void set_reason(em__program_graph *g, const char *fmt, const char *a) {
    snprintf(g->reason, sizeof g->reason, fmt, a);
}

/* Private engine stream ids: far above the ids stream.c hands out. */
static atomic_uint_fast64_t last_graph_stream;

/* ---- building ----------------------------------------------------------- */

static const em_prim graph_prim;

/* A to_device of a CPU constant onto the graph's GPU: uploaded once before
 * the capture (a transfer cannot be captured: it waits for the host). */
static bool is_constant_upload(const em_array *n, em_device device) {
    return strcmp(n->prim->name, "to_device") == 0 && n->device == device &&
           n->ninputs == 1 && em__tape_is_constant(n->inputs[0]) &&
           n->inputs[0]->device == EM_DEVICE_CPU;
}

/* Whether the program can be captured; the reason in g->reason if not. */
static bool graph_check(em_program *p, em__program_graph *g) {
    const em__tape *t = em__program_tape(p);
    size_t nconst = em__program_num_constants(p);
    if (em_program_num_captures(p) > 0) {
        set_reason(g, "%s", "the program takes outer captures");
        return false;
    }
    if (t->noutputs == 0 || t->len == 0) {
        set_reason(g, "%s", "the program computes nothing");
        return false;
    }
    g->device = t->ninputs ? t->inputs[0]->device : t->nodes[0]->device;
    if (!em_device_is_gpu(g->device)) {
        set_reason(g, "%s", "the program is not on a GPU");
        return false;
    }
    for (size_t i = 0; i < t->noutputs; i++)
        if (em__program_output_slot(p, i) < t->ninputs + nconst) {
            set_reason(g, "%s", "an output is an input or a constant");
            return false;
        }
    for (size_t i = 0; i < t->ninputs; i++)
        if (t->inputs[i]->device != g->device) {
            set_reason(g, "%s", "inputs on more than one device");
            return false;
        }
    for (size_t i = 0; i < t->len; i++) {
        const em_array *n = t->nodes[i];
        if (n->prim == &graph_prim) {
            set_reason(g, "%s", "it runs another CUDA graph program");
            return false;
        }
        if (n->device != g->device) {
            set_reason(g, "a node (%s) runs on another device",
                       n->prim->name);
            return false;
        }
        for (int j = 0; j < n->ninputs; j++) {
            const em_array *in = n->inputs[j];
            if (in->host_only) {
                /* A program held by the node: a while loop. */
                set_reason(g, "%s reads a value on the host", n->prim->name);
                return false;
            }
            if (em__tape_is_constant(in) && in->device != g->device &&
                !is_constant_upload(n, g->device)) {
                set_reason(g, "a constant of %s is on another device",
                           n->prim->name);
                return false;
            }
        }
    }
    return true;
}

em_status em__program_graph_new(em_program *p, em__program_graph **out) {
    *out = NULL;
    em__program_graph *g = calloc(1, sizeof *g);
    if (!g)
        return em__fail(EM_ERR_OOM, "cuda graph: out of memory");
    pthread_mutex_init(&g->lock, NULL);
    const em__tape *t = em__program_tape(p);
    g->nin = t->ninputs;
    g->nout = t->noutputs;
    g->part_offset = calloc(g->nout ? g->nout : 1, sizeof *g->part_offset);
    g->stable = calloc(g->nin ? g->nin : 1, sizeof *g->stable);
    g->outs = calloc(g->nout ? g->nout : 1, sizeof *g->outs);
    g->ntape = t->len;
    g->uploads = calloc(t->len ? t->len : 1, sizeof *g->uploads);
    if (!g->part_offset || !g->stable || !g->outs || !g->uploads) {
        em__program_graph_free(g);
        return em__fail(EM_ERR_OOM, "cuda graph: out of memory");
    }
    for (size_t i = 0; i < g->nout; i++) {
        g->part_offset[i] = g->packed_bytes;
        size_t bytes = em_array_nbytes(t->outputs[i]);
        g->packed_bytes += (bytes + PART_ALIGN - 1) / PART_ALIGN * PART_ALIGN;
    }
    g->stream_id = ((uint64_t)1 << 62) + atomic_fetch_add(&last_graph_stream, 1);
    atomic_init(&g->state, graph_check(p, g) ? EM_CUDA_GRAPH_PENDING
                                             : EM_CUDA_GRAPH_FALLBACK);
    *out = g;
    return EM_OK;
}

/* Drop the captured graph and what it owns (the state is left alone). */
static void graph_drop(em__program_graph *g) {
    const em_cuda_api *api = NULL;
    int ord = 0;
    /* Only a captured graph (hence a GPU device with its backend loaded)
     * asks for the backend here: a program on the CPU never loads it. */
    if (g->exec && em__gpu_backend(g->device, &api, &ord) == EM_OK)
        api->graph_destroy(ord, g->exec, g->stream);
    g->exec = NULL;
    /* After the launches: blocks handed out again wait for g->stream. */
    em__gpu_pool_free(g->pool, g->stream);
    g->pool = NULL;
    for (size_t i = 0; i < g->nin; i++) {
        em_array_release(g->stable[i]);
        g->stable[i] = NULL;
    }
    for (size_t i = 0; g->uploads && i < g->ntape; i++) {
        em_array_release(g->uploads[i]);
        g->uploads[i] = NULL;
    }
}

void em__program_graph_free(em__program_graph *g) {
    if (!g)
        return;
    if (g->stable && g->uploads)
        graph_drop(g);
    if (g->stream)
        em__gpu_stream_retire(g->stream_id);
    pthread_mutex_destroy(&g->lock);
    free(g->part_offset);
    free(g->stable);
    free(g->outs);
    free(g->uploads);
    free(g);
}

bool em__program_graph_usable(em__program_graph *g) {
    if (!g)
        return false;
    int s = atomic_load_explicit(&g->state, memory_order_acquire);
    return s == EM_CUDA_GRAPH_PENDING || s == EM_CUDA_GRAPH_CAPTURED;
}

void em__program_graph_stats(em__program_graph *g, em_program_stats *out) {
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    out->cuda_graph = atomic_load(&g->state);
    out->cuda_graph_nodes = g->nodes;
    out->cuda_graph_replays = g->replays;
    out->cuda_graph_bytes = em__gpu_pool_bytes(g->pool);
    snprintf(out->cuda_graph_reason, sizeof out->cuda_graph_reason, "%s",
             g->reason);
    pthread_mutex_unlock(&g->lock);
}

/* ---- evaluation ---------------------------------------------------------- */

/* Switch this thread's GPU work to stream id `to`, ordered after the work
 * queued so far on the stream it leaves. */
static em_status switch_stream(em_device device, uint64_t to) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(device, &api, &ord);
    if (st != EM_OK)
        return st;
    void *from = api->current_stream(ord);
    em__set_thread_stream(to);
    st = em__gpu_backend(device, &api, &ord);
    if (st != EM_OK)
        return st;
    int rc = from ? api->stream_wait(ord, from) : 0;
    return rc ? em__gpu_fail(api, rc, "cuda_graph") : EM_OK;
}

/* Copy array a (any layout) to row-major bytes at dst, on this stream. */
static em_status copy_out(em_device device, void *dst, const em_array *a) {
    if (a->size == 0)
        return EM_OK;
    return em__gpu_copy_strided(device, dst, NULL, em__data(a), a->strides,
                                a->shape, a->ndim, em_dtype_size(a->dtype));
}

/* The ordinary replay on args, evaluated, packed into node's buffer. */
static em_status run_plain_into(em_program *p, em__program_graph *g,
                                em_array *node, em_array *const *args) {
    em_array **outs = calloc(g->nout, sizeof *outs);
    if (!outs)
        return em__fail(EM_ERR_OOM, "cuda_graph: out of memory");
    em_status st = em__program_run_plain(p, args, g->nin, NULL, outs);
    if (st == EM_OK)
        st = em__eval_arrays(outs, g->nout);
    for (size_t i = 0; st == EM_OK && i < g->nout; i++)
        st = copy_out(g->device,
                      (char *)node->buffer->data + g->part_offset[i], outs[i]);
    for (size_t i = 0; i < g->nout; i++)
        em_array_release(outs[i]);
    free(outs);
    return st;
}

/* A stable input: a fresh row-major GPU buffer, never donated. */
static em_status stable_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st == EM_OK)
        atomic_store(&node->buffer->pinned, true);
    return st;
}

static const em_prim stable_prim = {"cuda_graph_input", stable_eval, NULL,
                                    stable_eval};

static em_status make_stable_inputs(em_program *p, em__program_graph *g) {
    const em__tape *t = em__program_tape(p);
    em_status st = EM_OK;
    for (size_t i = 0; i < g->nin && st == EM_OK; i++) {
        const em_array *in = t->inputs[i];
        st = em__node_new_on(&stable_prim, g->device, in->dtype, in->shape,
                             in->ndim, NULL, 0, &g->stable[i]);
        if (st == EM_OK)
            st = em__eval_arrays(&g->stable[i], 1);
    }
    return st;
}

static em_status upload_constants(em_program *p, em__program_graph *g) {
    const em__tape *t = em__program_tape(p);
    em_status st = EM_OK;
    for (size_t i = 0; i < t->len && st == EM_OK; i++) {
        if (!is_constant_upload(t->nodes[i], g->device))
            continue;
        st = em_to_device(t->nodes[i]->inputs[0], g->device, &g->uploads[i]);
        if (st == EM_OK)
            st = em__eval_arrays(&g->uploads[i], 1);
    }
    return st;
}

/* Constants are read by the recorded kernels: order this stream after
 * their last use now (a capture cannot wait for another stream) and make
 * it their last stream. */
static em_status adopt_constants(em_program *p, em__program_graph *g,
                                 const em_cuda_api *api, int ord, void *cur) {
    size_t n = em__program_num_constants(p);
    for (size_t i = 0; i < n; i++) {
        em_buffer *b = em__program_constant(p, i)->buffer;
        if (!b || b->device != g->device || b->capacity == 0)
            continue;
        em_status st = em__gpu_wait_buffer(api, ord, b);
        if (st != EM_OK)
            return st;
        atomic_store_explicit(&b->stream, cur, memory_order_release);
    }
    return EM_OK;
}

/* Record the program into a graph (after a successful warm-up, on the
 * graph's stream). Never fails the run: a failure is the fallback. */
static void capture(em_program *p, em__program_graph *g) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(g->device, &api, &ord);
    char why[160] = "";
    if (st == EM_OK)
        st = make_stable_inputs(p, g);
    if (st == EM_OK)
        st = upload_constants(p, g);
    if (st == EM_OK)
        st = adopt_constants(p, g, api, ord, g->stream);
    if (st == EM_OK)
        st = em__gpu_pool_new(g->device, &g->pool);
    if (st != EM_OK) {
        snprintf(why, sizeof why, "preparing the capture: %s",
                 em_last_error());
        goto failed;
    }
    em__gpu_pool_bind(g->pool);
    int rc = api->graph_begin(ord);
    if (rc) {
        em__gpu_pool_bind(NULL);
        snprintf(why, sizeof why, "%s", api->last_error());
        goto failed;
    }
    em_array **outs = calloc(g->nout, sizeof *outs);
    st = outs ? em__program_run_plain(p, g->stable, g->nin, g->uploads, outs)
              : em__fail(EM_ERR_OOM, "cuda_graph: out of memory");
    if (st == EM_OK)
        st = em__eval_arrays(outs, g->nout);
    if (st != EM_OK)
        snprintf(why, sizeof why, "during the capture: %s", em_last_error());
    for (size_t i = 0; st == EM_OK && i < g->nout; i++) {
        const em_array *o = outs[i];
        graph_output *d = &g->outs[i];
        d->data = em__data(o);
        d->ndim = o->ndim;
        memcpy(d->shape, o->shape, sizeof(int64_t) * (size_t)o->ndim);
        memcpy(d->strides, o->strides, sizeof(int64_t) * (size_t)o->ndim);
        d->elem_size = em_dtype_size(o->dtype);
        d->size = o->size;
    }
    /* Released while the pool is bound: their blocks stay the graph's. */
    for (size_t i = 0; outs && i < g->nout; i++)
        em_array_release(outs[i]);
    free(outs);
    rc = api->graph_end(ord, st == EM_OK, &g->exec, &g->nodes);
    em__gpu_pool_bind(NULL);
    if (rc && st == EM_OK) {
        snprintf(why, sizeof why, "%s", api->last_error());
        st = EM_ERR_RUNTIME;
    }
    if (st == EM_OK) {
        atomic_store(&g->state, EM_CUDA_GRAPH_CAPTURED);
        return;
    }
failed:
    graph_drop(g);
    g->nodes = 0;
    set_reason(g, "capture failed: %s", why);
    atomic_store(&g->state, EM_CUDA_GRAPH_FALLBACK);
}

/* One replay of the captured graph into node's buffer. */
static em_status launch(em__program_graph *g, em_array *node,
                        em_array *const *args) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(g->device, &api, &ord);
    for (size_t i = 0; i < g->nin && st == EM_OK; i++)
        st = copy_out(g->device, em__data(g->stable[i]), args[i]);
    if (st != EM_OK)
        return st;
    int rc = api->graph_launch(ord, g->exec);
    if (rc)
        return em__gpu_fail(api, rc, "cuda_graph");
    for (size_t i = 0; i < g->nout; i++) {
        const graph_output *d = &g->outs[i];
        if (d->size == 0)
            continue;
        st = em__gpu_copy_strided(
            g->device, (char *)node->buffer->data + g->part_offset[i], NULL,
            d->data, d->strides, d->shape, d->ndim, d->elem_size);
        if (st != EM_OK)
            return st;
    }
    g->replays++;
    return EM_OK;
}

static em_status graph_eval(em_array *node) {
    em_program *p = em__program_from_holder(node->inputs[0]);
    em__program_graph *g = em__program_graph_of(p);
    em_array *const *args = node->inputs + 1;
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK)
        return st;
    pthread_mutex_lock(&g->lock);
    uint64_t caller = em__thread_stream();
    st = switch_stream(g->device, g->stream_id);
    if (st == EM_OK && !g->stream) {
        const em_cuda_api *api;
        int ord;
        st = em__gpu_backend(g->device, &api, &ord);
        if (st == EM_OK)
            g->stream = api->current_stream(ord);
    }
    int state = atomic_load(&g->state);
    if (st == EM_OK && state == EM_CUDA_GRAPH_CAPTURED) {
        st = launch(g, node, args);
    } else if (st == EM_OK) {
        st = run_plain_into(p, g, node, args);
        if (st == EM_OK && state == EM_CUDA_GRAPH_PENDING)
            capture(p, g);
    }
    /* Back on the caller's stream, after everything queued above. */
    em_status back = switch_stream(g->device, caller);
    pthread_mutex_unlock(&g->lock);
    return st != EM_OK ? st : back;
}

static const em_prim graph_prim = {"cuda_graph", graph_eval, NULL, graph_eval};

static em_status part_eval(em_array *node) {
    em__share_buffer(node, node->inputs[0]);
    return EM_OK;
}

static const em_prim part_prim = {"cuda_graph_output", part_eval, NULL,
                                  part_eval};

em_status em__program_graph_run(em_program *p, em__program_graph *g,
                                em_array *const *inputs, size_t n_in,
                                em_array **outputs_out) {
    const em__tape *t = em__program_tape(p);
    if (n_in != g->nin)
        return em__fail(EM_ERR_ARGUMENT,
                        "program_run: expected %zu inputs, got %zu", g->nin,
                        n_in);
    for (size_t i = 0; i < n_in; i++) {
        em_status st = em__program_check_input(p, i, inputs[i]);
        if (st != EM_OK)
            return st;
    }
    em_array **node_in = calloc(n_in + 1, sizeof *node_in);
    if (!node_in)
        return em__fail(EM_ERR_OOM, "program_run: out of memory");
    em_status st = em__program_holder(p, &node_in[0]);
    for (size_t i = 0; i < n_in; i++)
        node_in[1 + i] = inputs[i];
    em_array *run = NULL;
    int64_t packed = (int64_t)(g->packed_bytes ? g->packed_bytes : PART_ALIGN);
    if (st == EM_OK)
        st = em__node_new_on(&graph_prim, g->device, EM_U8, &packed, 1,
                             node_in, (int)(n_in + 1), &run);
    size_t made = 0;
    for (; st == EM_OK && made < g->nout; made++) {
        const em_array *o = t->outputs[made];
        st = em__node_new_on(&part_prim, g->device, o->dtype, o->shape,
                             o->ndim, &run, 1, &outputs_out[made]);
        if (st == EM_OK)
            outputs_out[made]->offset =
                (int64_t)(g->part_offset[made] / em_dtype_size(o->dtype));
    }
    if (st != EM_OK)
        for (size_t i = 0; i < made; i++) {
            em_array_release(outputs_out[i]);
            outputs_out[i] = NULL;
        }
    em_array_release(run);
    em_array_release(node_in[0]);
    free(node_in);
    return st;
}
