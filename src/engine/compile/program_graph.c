/*
 * program_graph.c — a program replayed on a GPU as one CUDA graph.
 *
 * em_program_run on a program built with cuda_graph (and capturable, see
 * graph_check) builds one "cuda_graph" node over [holder, inputs...] whose
 * buffer packs the outputs (each part 16-byte aligned), and one view per
 * output into it, as the while loop does. The node's evaluation:
 *
 *   PENDING   runs the program the ordinary way (nested evaluation) and
 *             packs its outputs: the warm-up. Then captures: the program
 *             is replayed once more on input arrays made for it, between
 *             graph_begin and graph_end, with a pool bound to the thread
 *             (alloc.c) so that every block the recorded kernels touch
 *             (the inputs' among them) stays the graph's. The outputs'
 *             addresses and layouts are kept. Any failure -> FALLBACK with
 *             the reason.
 *   CAPTURED  copies the arguments into the inputs' blocks (but see below),
 *             launches the graph, copies the outputs into the node's
 *             fresh buffer.
 *   FALLBACK  em_program_run never builds the node again; a node built
 *             before the fallback runs the ordinary way.
 *
 * State kept on the GPU. The graph holds no reference to its input arrays
 * during the capture, so an input consumed by an in-place op (a KV cache
 * given to dynamic_put_slice) donates its block as usual, and an output
 * can be recorded in an input's block. Such an output "aliases" that
 * input: its block leaves the pool for an ordinary buffer (the state
 * buffer) that the graph holds. Once the caller feeds such an output back
 * as the input (a decode loop), runs hand the state buffer out as that
 * output, uncopied, and the next run given it back, held by nothing else,
 * neither copies it in nor out: the graph updates it in place (a decode
 * step's caches: no copy per token). A state buffer still held elsewhere
 * (an old cache kept by the caller) must not be overwritten: that run
 * takes the ordinary way, into fresh buffers, and the graph copies its
 * state out from then on. Results are the same on every path.
 *
 * Arguments read in place. An argument the caller keeps (it holds a
 * reference besides the run's: parameters, a loop's captures) is bound at
 * the capture: the recorded kernels read its buffer, nothing is copied.
 * A later run given another array there takes the ordinary way and
 * captures again without binding that input (at most MAX_CAPTURES times;
 * binding stops after that).
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
    /* Per input, one of: bound[j], the caller's array the recorded
     * kernels read in place (held); state_buf[j], the state buffer over
     * the block of an input some output aliases (nstate of them); else
     * in_addr[j], the graph's block the argument is copied into. */
    em_array **bound;
    em_buffer **state_buf;
    void **in_addr;
    size_t nstate;
    /* Inputs given another array than the bound one: copied from then on
     * (the graph is recaptured once without binding them). */
    bool *no_bind;
    /* Inputs no node reads (a loop condition takes the whole state and
     * reads a counter): neither bound nor copied. */
    bool *unused;
    int captures;
    /* Whether runs hand state buffers out as outputs: once an aliased
     * input is given an output of a graph run (state fed back, as a decode
     * loop does), until a run finds a state buffer still held elsewhere
     * (refused for good: state is copied out from then on). */
    bool hand_out, hand_out_refused;
    /* Per output: the input it aliases, or -1; and the packed layout of a
     * run that hands the state out (aliased outputs take no room). */
    int64_t *alias_of;
    size_t *apart_offset;
    size_t apacked_bytes;
    /* Per tape node: the upload of a CPU constant (a number that followed
     * its GPU operands), made once before the capture; else NULL. */
    em_array **uploads;
    size_t ntape;
    graph_output *outs; /* nout */
    em__gpu_pool *pool; /* every block the recorded work uses */
    void *exec;         /* the instantiated graph */
    int64_t nodes, replays, in_place;
};

/* How often a graph is captured (the first time, then after arguments
 * changed under bound inputs) before binding is given up. */
#define MAX_CAPTURES 4

/* The parameters of a run node: per output, its part's byte offset in the
 * node's packed buffer, or (own) a buffer of its own, set by the
 * evaluation and taken over by the part when evaluated (what no part took
 * is released with the node). The layout is the graph's when the run was
 * built: a recapture may change the graph's. */
typedef struct run_part {
    size_t offset;
    bool own;
    em_buffer *buf;
} run_part;

typedef struct run_params {
    size_t nout;
    run_part parts[];
} run_params;

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
            set_reason(g, "a node (%s) runs on another device", n->prim->name);
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

/* unused[j]: no tape node reads input j (outputs that are inputs make the
 * program not capturable, see graph_check). */
static void mark_unused(const em__tape *t, bool *unused) {
    for (size_t j = 0; j < t->ninputs; j++)
        unused[j] = true;
    for (size_t i = 0; i < t->len; i++)
        for (int k = 0; k < t->nodes[i]->ninputs; k++)
            for (size_t j = 0; j < t->ninputs; j++)
                if (t->nodes[i]->inputs[k] == t->inputs[j])
                    unused[j] = false;
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
    size_t nin = g->nin ? g->nin : 1, nout = g->nout ? g->nout : 1;
    g->part_offset = calloc(nout, sizeof *g->part_offset);
    g->apart_offset = calloc(nout, sizeof *g->apart_offset);
    g->alias_of = calloc(nout, sizeof *g->alias_of);
    g->outs = calloc(nout, sizeof *g->outs);
    g->bound = calloc(nin, sizeof *g->bound);
    g->state_buf = calloc(nin, sizeof *g->state_buf);
    g->in_addr = calloc(nin, sizeof *g->in_addr);
    g->no_bind = calloc(nin, sizeof *g->no_bind);
    g->unused = calloc(nin, sizeof *g->unused);
    g->ntape = t->len;
    g->uploads = calloc(t->len ? t->len : 1, sizeof *g->uploads);
    if (!g->part_offset || !g->apart_offset || !g->alias_of || !g->outs ||
        !g->bound || !g->state_buf || !g->in_addr || !g->no_bind ||
        !g->unused || !g->uploads) {
        em__program_graph_free(g);
        return em__fail(EM_ERR_OOM, "cuda graph: out of memory");
    }
    for (size_t i = 0; i < g->nout; i++) {
        g->part_offset[i] = g->packed_bytes;
        size_t bytes = em_array_nbytes(t->outputs[i]);
        g->packed_bytes += (bytes + PART_ALIGN - 1) / PART_ALIGN * PART_ALIGN;
        g->alias_of[i] = -1;
    }
    mark_unused(t, g->unused);
    g->stream_id =
        ((uint64_t)1 << 62) + atomic_fetch_add(&last_graph_stream, 1);
    atomic_init(&g->state, graph_check(p, g) ? EM_CUDA_GRAPH_PENDING
                                             : EM_CUDA_GRAPH_FALLBACK);
    *out = g;
    return EM_OK;
}

/* Drop the captured graph and what it owns (the state is left alone). A
 * state buffer still held by an output outlives the graph: it is an
 * ordinary buffer. */
static void graph_drop(em__program_graph *g) {
    const em_cuda_api *api = NULL;
    int ord = 0;
    /* Only a captured graph (hence a GPU device with its backend loaded)
     * asks for the backend here: a program on the CPU never loads it. */
    if (g->exec && em__gpu_backend(g->device, &api, &ord) == EM_OK)
        api->graph_destroy(ord, g->exec, g->stream);
    g->exec = NULL;
    g->nodes = 0;
    /* After the launches: blocks handed out again wait for g->stream. */
    em__gpu_pool_free(g->pool, g->stream);
    g->pool = NULL;
    for (size_t i = 0; i < g->nin; i++) {
        em_array_release(g->bound[i]);
        em__buffer_release(g->state_buf[i]);
        g->bound[i] = NULL;
        g->state_buf[i] = NULL;
        g->in_addr[i] = NULL;
    }
    g->nstate = 0;
    for (size_t i = 0; i < g->nout; i++)
        g->alias_of[i] = -1;
    g->apacked_bytes = 0;
    for (size_t i = 0; g->uploads && i < g->ntape; i++) {
        em_array_release(g->uploads[i]);
        g->uploads[i] = NULL;
    }
}

void em__program_graph_free(em__program_graph *g) {
    if (!g)
        return;
    if (g->bound && g->state_buf && g->in_addr && g->alias_of && g->uploads)
        graph_drop(g);
    if (g->stream)
        em__gpu_stream_retire(g->stream_id);
    pthread_mutex_destroy(&g->lock);
    free(g->part_offset);
    free(g->apart_offset);
    free(g->alias_of);
    free(g->bound);
    free(g->state_buf);
    free(g->in_addr);
    free(g->no_bind);
    free(g->unused);
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
    out->cuda_graph_bound_inputs = 0;
    for (size_t i = 0; i < g->nin; i++) {
        if (g->state_buf[i])
            out->cuda_graph_bytes += g->state_buf[i]->capacity;
        out->cuda_graph_bound_inputs += g->bound[i] != NULL;
    }
    out->cuda_graph_state_inputs = g->nstate;
    out->cuda_graph_in_place = g->in_place;
    out->cuda_graph_captures = g->captures;
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

/* Copy row-major bytes of `elem_size`-byte elements laid out as
 * (shape, strides) at src to dst, on this stream. */
static em_status copy_to(em_device device, void *dst, const void *src,
                         const int64_t *shape, const int64_t *strides, int ndim,
                         size_t elem_size, int64_t size) {
    if (size == 0)
        return EM_OK;
    return em__gpu_copy_strided(device, dst, NULL, src, strides, shape, ndim,
                                elem_size);
}

/* Copy array a (any layout) to row-major bytes at dst, on this stream. */
static em_status copy_out(em_device device, void *dst, const em_array *a) {
    return copy_to(device, dst, em__data(a), a->shape, a->strides, a->ndim,
                   em_dtype_size(a->dtype), a->size);
}

/* Where output i of run node `node` goes: its place in the packed buffer,
 * or a fresh buffer of its own (nbytes) when the run hands outputs out
 * and the graph cannot (no state buffer for it now). */
static em_status part_target(const em__program_graph *g, em_array *node,
                             size_t i, size_t nbytes, char **dst) {
    run_part *part = &((run_params *)node->params)->parts[i];
    *dst = NULL;
    if (!part->own) {
        *dst = (char *)node->buffer->data + part->offset;
        return EM_OK;
    }
    em_status st = em__buffer_new_on(g->device, nbytes, &part->buf);
    if (st == EM_OK)
        *dst = part->buf->data;
    return st;
}

/* The ordinary replay on args, evaluated, into node's parts. */
static em_status run_plain_into(em_program *p, em__program_graph *g,
                                em_array *node, em_array *const *args) {
    em_array **outs = calloc(g->nout, sizeof *outs);
    if (!outs)
        return em__fail(EM_ERR_OOM, "cuda_graph: out of memory");
    em_status st = em__program_run_plain(p, args, g->nin, NULL, outs);
    if (st == EM_OK)
        st = em__eval_arrays(outs, g->nout);
    for (size_t i = 0; st == EM_OK && i < g->nout; i++) {
        char *dst;
        st = part_target(g, node, i, em_array_nbytes(outs[i]), &dst);
        if (st == EM_OK)
            st = copy_out(g->device, dst, outs[i]);
    }
    for (size_t i = 0; i < g->nout; i++)
        em_array_release(outs[i]);
    free(outs);
    return st;
}

/* A capture input: a fresh row-major GPU buffer (from the bound pool). */
static em_status input_eval(em_array *node) {
    return em__alloc_output(node, NULL, 0);
}

static const em_prim input_prim = {"cuda_graph_input", input_eval, NULL,
                                   input_eval};

/* Whether argument a can be read in place by the recorded kernels: an
 * evaluated row-major array on the graph's device that somebody besides
 * this run holds (the caller keeps it: parameters, a loop's captures; an
 * argument given up is a candidate for an in-place update instead). */
static bool bindable(const em__program_graph *g, size_t j, const em_array *a) {
    return !g->no_bind[j] && g->captures < MAX_CAPTURES && a->buffer &&
           a->device == g->device && a->row_contiguous && a->size > 0 &&
           atomic_load(&((em_array *)a)->refcount) > 1;
}

/* Whether a (evaluated) is the same bytes as the bound array b. */
static bool same_binding(const em_array *b, const em_array *a) {
    return a == b || (a->buffer == b->buffer && a->offset == b->offset &&
                      a->row_contiguous);
}

/* The capture's inputs: bound arguments, or fresh blocks (kept in
 * g->in_addr). */
static em_status make_inputs(em_program *p, em__program_graph *g,
                             em_array *const *args, em_array **inputs) {
    const em__tape *t = em__program_tape(p);
    em_status st = EM_OK;
    for (size_t i = 0; i < g->nin && st == EM_OK; i++) {
        if (g->unused[i]) { /* stands in for the placeholder, never read */
            em_array_retain(args[i]);
            inputs[i] = args[i];
            continue;
        }
        if (bindable(g, i, args[i])) {
            g->bound[i] = args[i];
            em_array_retain(args[i]);
            em_array_retain(args[i]);
            inputs[i] = args[i];
            continue;
        }
        const em_array *in = t->inputs[i];
        st = em__node_new_on(&input_prim, g->device, in->dtype, in->shape,
                             in->ndim, NULL, 0, &inputs[i]);
        if (st == EM_OK)
            st = em__eval_arrays(&inputs[i], 1);
        if (st == EM_OK)
            g->in_addr[i] = inputs[i]->buffer->data;
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

/* Buffers the recorded kernels read: order this stream after their last
 * use now (a capture cannot wait for another stream) and make it their
 * last stream. */
static em_status adopt_buffer(const em__program_graph *g,
                              const em_cuda_api *api, int ord, em_buffer *b) {
    if (!b || b->device != g->device || b->capacity == 0)
        return EM_OK;
    em_status st = em__gpu_wait_buffer(api, ord, b);
    if (st == EM_OK)
        atomic_store_explicit(&b->stream, g->stream, memory_order_release);
    return st;
}

static em_status adopt_inputs(em_program *p, em__program_graph *g,
                              const em_cuda_api *api, int ord) {
    em_status st = EM_OK;
    size_t n = em__program_num_constants(p);
    for (size_t i = 0; i < n && st == EM_OK; i++)
        st = adopt_buffer(g, api, ord, em__program_constant(p, i)->buffer);
    for (size_t i = 0; i < g->nin && st == EM_OK; i++)
        if (g->bound[i])
            st = adopt_buffer(g, api, ord, g->bound[i]->buffer);
    return st;
}

/* Keep where output i was recorded; it aliases input j when it fills the
 * block j was copied into (a row-major output of the same byte size at
 * its start), unless another output took that block first. */
static void record_output(em__program_graph *g, const em__tape *t, size_t i,
                          const em_array *o) {
    graph_output *d = &g->outs[i];
    d->data = em__data(o);
    d->ndim = o->ndim;
    memcpy(d->shape, o->shape, sizeof(int64_t) * (size_t)o->ndim);
    memcpy(d->strides, o->strides, sizeof(int64_t) * (size_t)o->ndim);
    d->elem_size = em_dtype_size(o->dtype);
    d->size = o->size;
    if (!o->row_contiguous || o->size == 0)
        return;
    for (size_t j = 0; j < g->nin; j++)
        if (g->in_addr[j] == d->data &&
            em_array_nbytes(t->inputs[j]) == em_array_nbytes(o)) {
            for (size_t k = 0; k < i; k++)
                if (g->alias_of[k] == (int64_t)j)
                    return;
            g->alias_of[i] = (int64_t)j;
            return;
        }
}

/* After a capture: the blocks of aliased inputs become state buffers, and
 * the other outputs get their packed layout. */
static em_status adopt_state(em__program_graph *g, const em__tape *t) {
    for (size_t i = 0; i < g->nout; i++) {
        int64_t j = g->alias_of[i];
        if (j < 0) {
            g->apart_offset[i] = g->apacked_bytes;
            size_t bytes = em_array_nbytes(t->outputs[i]);
            g->apacked_bytes +=
                (bytes + PART_ALIGN - 1) / PART_ALIGN * PART_ALIGN;
            continue;
        }
        em_status st = em__gpu_pool_adopt(g->pool, g->in_addr[j],
                                          em_array_nbytes(t->inputs[j]),
                                          g->stream, &g->state_buf[j]);
        if (st != EM_OK)
            return st;
        g->nstate++;
    }
    return EM_OK;
}

/* Record the program into a graph on args (after a successful warm-up on
 * them, on the graph's stream). Never fails the run: a failure is the
 * fallback. */
static void capture(em_program *p, em__program_graph *g,
                    em_array *const *args) {
    const em__tape *t = em__program_tape(p);
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(g->device, &api, &ord);
    char why[160] = "";
    em_array **inputs = calloc(g->nin ? g->nin : 1, sizeof *inputs);
    em_array **outs = calloc(g->nout, sizeof *outs);
    g->captures++;
    if (st == EM_OK && (!inputs || !outs))
        st = em__fail(EM_ERR_OOM, "cuda_graph: out of memory");
    if (st == EM_OK)
        st = upload_constants(p, g);
    if (st == EM_OK)
        st = em__gpu_pool_new(g->device, &g->pool);
    if (st == EM_OK) {
        em__gpu_pool_bind(g->pool);
        st = make_inputs(p, g, args, inputs);
    }
    if (st == EM_OK)
        st = adopt_inputs(p, g, api, ord);
    if (st != EM_OK) {
        snprintf(why, sizeof why, "preparing the capture: %s", em_last_error());
        goto failed;
    }
    int rc = api->graph_begin(ord);
    if (rc) {
        snprintf(why, sizeof why, "%s", api->last_error());
        goto failed;
    }
    st = em__program_run_plain(p, inputs, g->nin, g->uploads, outs);
    /* From here the replay's nodes alone hold the fresh inputs: one
     * consumed by an in-place op gives it its block (a donation), as in a
     * plain run. */
    for (size_t i = 0; i < g->nin; i++) {
        em_array_release(inputs[i]);
        inputs[i] = NULL;
    }
    if (st == EM_OK)
        st = em__eval_arrays(outs, g->nout);
    if (st != EM_OK)
        snprintf(why, sizeof why, "during the capture: %s", em_last_error());
    for (size_t i = 0; st == EM_OK && i < g->nout; i++)
        record_output(g, t, i, outs[i]);
    /* Released while the pool is bound: their blocks stay the graph's. */
    for (size_t i = 0; i < g->nout; i++) {
        em_array_release(outs[i]);
        outs[i] = NULL;
    }
    rc = api->graph_end(ord, st == EM_OK, &g->exec, &g->nodes);
    if (rc && st == EM_OK) {
        snprintf(why, sizeof why, "%s", api->last_error());
        st = EM_ERR_RUNTIME;
    }
    if (st == EM_OK && (st = adopt_state(g, t)) != EM_OK)
        snprintf(why, sizeof why, "%s", em_last_error());
    if (st == EM_OK) {
        em__gpu_pool_bind(NULL);
        free(inputs);
        free(outs);
        g->hand_out = false;
        atomic_store_explicit(&g->state, EM_CUDA_GRAPH_CAPTURED,
                              memory_order_release);
        return;
    }
failed:
    for (size_t i = 0; inputs && i < g->nin; i++)
        em_array_release(inputs[i]);
    free(inputs);
    free(outs);
    em__gpu_pool_bind(NULL);
    graph_drop(g);
    set_reason(g, "capture failed: %s", why);
    atomic_store(&g->state, EM_CUDA_GRAPH_FALLBACK);
}

/* Whether input j's state buffer may be written by a launch now, and
 * whether args[j] is that buffer itself, held by this run alone (then it
 * is updated in place, not copied in). A state buffer held anywhere else
 * holds a value somebody may still read. */
static bool state_free(const em_buffer *s, const em_array *arg,
                       bool *in_place) {
    const int holders = atomic_load(&((em_buffer *)s)->refcount);
    if (atomic_load(&((em_buffer *)s)->pinned))
        return false;
    *in_place = arg->buffer == s && arg->offset == 0 && arg->row_contiguous &&
                atomic_load(&((em_array *)arg)->refcount) == 1 && holders == 2;
    return *in_place || holders == 1;
}

/* Why a launch cannot run the captured graph on these arguments. */
enum launch_outcome { LAUNCHED, STATE_HELD, REBIND };

/* Everything a launch needs that it may refuse: bound inputs given the
 * same arrays, state buffers free. Counts in-place updates in *in_place. */
static enum launch_outcome
launch_check(em__program_graph *g, em_array *const *args, bool *in_place_any) {
    enum launch_outcome why = LAUNCHED;
    *in_place_any = false;
    for (size_t j = 0; j < g->nin; j++) {
        bool in_place = false;
        if (g->bound[j] && !same_binding(g->bound[j], args[j])) {
            g->no_bind[j] = true;
            why = REBIND;
        } else if (g->state_buf[j] &&
                   !state_free(g->state_buf[j], args[j], &in_place)) {
            if (why == LAUNCHED)
                why = STATE_HELD;
        }
        *in_place_any |= in_place;
    }
    return why;
}

static const em_prim part_prim;

/* Whether an aliased input is given an output of a graph run (its state
 * fed back): then handing the state out saves copies. */
static bool state_fed_back(const em__program_graph *g, em_array *const *args) {
    for (size_t j = 0; j < g->nin; j++)
        if (g->state_buf[j] &&
            (args[j]->prim == &part_prim || args[j]->buffer == g->state_buf[j]))
            return true;
    return false;
}

/* One replay of the captured graph into node's parts. */
static em_status launch(em__program_graph *g, em_array *node,
                        em_array *const *args) {
    run_params *rp = node->params;
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(g->device, &api, &ord);
    for (size_t j = 0; j < g->nin && st == EM_OK; j++) {
        em_buffer *s = g->state_buf[j];
        /* Reads of the state on another stream come first. */
        if (s && atomic_load(&s->stream) != g->stream)
            st = em__gpu_wait_buffer(api, ord, s);
        if (st == EM_OK && !g->bound[j] && !g->unused[j] &&
            args[j]->buffer != s)
            st = copy_out(g->device, s ? s->data : g->in_addr[j], args[j]);
    }
    if (st != EM_OK)
        return st;
    int rc = api->graph_launch(ord, g->exec);
    if (rc)
        return em__gpu_fail(api, rc, "cuda_graph");
    for (size_t i = 0; i < g->nout; i++) {
        const graph_output *d = &g->outs[i];
        run_part *part = &rp->parts[i];
        if (part->own && g->hand_out && g->alias_of[i] >= 0) {
            part->buf = g->state_buf[g->alias_of[i]];
            em__buffer_retain(part->buf);
            atomic_store(&part->buf->stream, g->stream);
            continue;
        }
        char *dst;
        st = part_target(g, node, i, (size_t)d->size * d->elem_size, &dst);
        if (st == EM_OK)
            st = copy_to(g->device, dst, d->data, d->shape, d->strides, d->ndim,
                         d->elem_size, d->size);
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
    enum launch_outcome how = STATE_HELD;
    bool in_place = false;
    if (st == EM_OK && state == EM_CUDA_GRAPH_CAPTURED) {
        how = launch_check(g, args, &in_place);
        if (how == STATE_HELD) {
            /* Somebody still reads a handed-out state: copy state out
             * from now on, so that later runs can launch. */
            g->hand_out = false;
            g->hand_out_refused = true;
        } else if (!g->hand_out_refused && state_fed_back(g, args))
            g->hand_out = true;
        if (how == LAUNCHED) {
            st = launch(g, node, args);
            g->in_place += st == EM_OK && in_place;
        } else if (how == REBIND) {
            graph_drop(g);
            state = EM_CUDA_GRAPH_PENDING;
        }
    }
    if (st == EM_OK && how != LAUNCHED) {
        st = run_plain_into(p, g, node, args);
        if (st == EM_OK && state == EM_CUDA_GRAPH_PENDING)
            capture(p, g, args);
    }
    /* Back on the caller's stream, after everything queued above. */
    em_status back = switch_stream(g->device, caller);
    pthread_mutex_unlock(&g->lock);
    return st != EM_OK ? st : back;
}

/* A run node freed: the buffers its parts did not take over. */
static void graph_release_params(em_array *node) {
    run_params *rp = node->params;
    for (size_t i = 0; i < rp->nout; i++)
        em__buffer_release(rp->parts[i].buf);
}

static const em_prim graph_prim = {"cuda_graph", graph_eval, NULL, graph_eval,
                                   graph_release_params};

/* Part i of a run: a view into its packed buffer, or the buffer the run
 * set for it (the reference taken over). */
static em_status part_eval(em_array *node) {
    em_array *run = node->inputs[0];
    run_part *part =
        &((run_params *)run->params)->parts[*(const size_t *)node->params];
    if (part->own) {
        node->buffer = part->buf;
        part->buf = NULL;
    } else
        em__share_buffer(node, run);
    return EM_OK;
}

static const em_prim part_prim = {"cuda_graph_output", part_eval, NULL,
                                  part_eval};

/* The parameters of a run built now: the graph's layout (read under its
 * lock: a recapture may change it), no buffer set yet; *packed, the bytes
 * of the run's packed buffer. */
static run_params *new_run_params(em__program_graph *g, size_t *bytes,
                                  int64_t *packed) {
    *bytes = sizeof(run_params) + g->nout * sizeof(run_part);
    run_params *rp = calloc(1, *bytes);
    if (!rp)
        return NULL;
    rp->nout = g->nout;
    pthread_mutex_lock(&g->lock);
    const bool hand_out =
        atomic_load(&g->state) == EM_CUDA_GRAPH_CAPTURED && g->hand_out;
    for (size_t i = 0; i < g->nout; i++) {
        rp->parts[i].own = hand_out && g->alias_of[i] >= 0;
        rp->parts[i].offset = hand_out ? g->apart_offset[i] : g->part_offset[i];
    }
    size_t total = hand_out ? g->apacked_bytes : g->packed_bytes;
    pthread_mutex_unlock(&g->lock);
    *packed = (int64_t)(total ? total : PART_ALIGN);
    return rp;
}

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
    size_t rp_bytes = 0;
    int64_t packed = 0;
    run_params *rp = st == EM_OK ? new_run_params(g, &rp_bytes, &packed) : NULL;
    if (st == EM_OK && !rp)
        st = em__fail(EM_ERR_OOM, "program_run: out of memory");
    if (st == EM_OK)
        st = em__node_new_on(&graph_prim, g->device, EM_U8, &packed, 1, node_in,
                             (int)(n_in + 1), &run);
    if (st == EM_OK)
        st = em__node_set_params(run, rp, rp_bytes);
    size_t made = 0;
    while (st == EM_OK && made < g->nout) {
        const em_array *o = t->outputs[made];
        em_array *part = NULL;
        st = em__node_new_on(&part_prim, g->device, o->dtype, o->shape, o->ndim,
                             &run, 1, &part);
        if (st == EM_OK)
            st = em__node_set_params(part, &made, sizeof made);
        if (st != EM_OK) {
            em_array_release(part);
            break;
        }
        if (!rp->parts[made].own)
            part->offset =
                (int64_t)(rp->parts[made].offset / em_dtype_size(o->dtype));
        outputs_out[made++] = part;
    }
    if (st != EM_OK)
        for (size_t i = 0; i < made; i++) {
            em_array_release(outputs_out[i]);
            outputs_out[i] = NULL;
        }
    em_array_release(run);
    em_array_release(node_in[0]);
    free(node_in);
    free(rp);
    return st;
}
