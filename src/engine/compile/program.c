/*
 * program.c — placeholders, and programs: a traced graph recorded as a tape,
 * simplified, and replayed on new inputs.
 *
 * Building (em_program_new) copies the traced pending nodes into private
 * template nodes (the traced graph itself may be shared with user code and
 * evaluated at any time; the copies are never seen by anyone else, so the
 * passes may rewire them), runs the passes of program_opt.c (and fusion
 * when asked for), then numbers every value the replay needs:
 *
 *   slot 0 .. nin-1            the run's inputs
 *   slot nin .. nin+nconst-1   captured constants (arrays with data)
 *   slot nin+nconst+i          the clone of tape node i
 *
 * Replay (em_program_run) clones each template node in order, with its
 * inputs looked up by slot. A clone is the node eager code would have built
 * (same primitive, dtype, shape, strides, offset, parameter bytes), and is
 * evaluated by the ordinary evaluator, hence bit-identical results.
 */
#include "emily_compile.h"
#include "ops/copy.h"
#include "program_graph.h"
#include "tape.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- placeholders ------------------------------------------------------- */

static em_status placeholder_eval(em_array *node) {
    em_desc d;
    return em__fail(EM_ERR_ARGUMENT,
                    "placeholder: a traced input has no value; %s is a "
                    "placeholder of a program being traced and cannot be "
                    "evaluated or read",
                    em__describe(node, &d));
}

/* On a GPU too: a placeholder takes the thread's default device (the
 * device of the values the program will be run with). */
static const em_prim placeholder_prim = {"placeholder", placeholder_eval, NULL,
                                         placeholder_eval};

em_status em_placeholder(em_dtype dtype, const int64_t *shape, int ndim,
                         em_array **out) {
    *out = NULL;
    em_status st = em__check_shape("placeholder", shape, ndim, dtype, NULL);
    if (st != EM_OK)
        return st;
    return em__node_new(&placeholder_prim, dtype, shape, ndim, NULL, 0, out);
}

bool em_is_placeholder(const em_array *a) {
    return a && a->prim == &placeholder_prim;
}

/* ---- the program -------------------------------------------------------- */

struct em_program {
    atomic_int refcount;
    /* Points at the program itself: the bytes of the array that keeps a
     * program alive as an input of a while node (see program_while.c). */
    em_program *self;
    em__tape tape;
    size_t nplaceholders; /* tape.inputs[nplaceholders..] are captures */
    em_array **constants; /* retained */
    size_t nconst;
    size_t *input_slot_start; /* node i's input slots: slots[start[i]..] */
    size_t *slots;
    size_t *output_slots;
    em_program_stats stats;
    em__program_graph *graph; /* cuda_graph asked for; program_graph.c */
};

static size_t slot_count(const em_program *p) {
    return p->tape.ninputs + p->nconst + p->tape.len;
}

static void tape_free(em__tape *t) {
    for (size_t i = 0; i < t->len; i++)
        em_array_release(t->nodes[i]);
    for (size_t i = 0; i < t->ninputs; i++)
        em_array_release(t->inputs[i]);
    for (size_t i = 0; i < t->noutputs; i++)
        em_array_release(t->outputs[i]);
    free(t->nodes);
    free(t->inputs);
    free(t->outputs);
}

static void program_free(em_program *p) {
    em__program_graph_free(p->graph);
    tape_free(&p->tape);
    for (size_t i = 0; i < p->nconst; i++)
        em_array_release(p->constants[i]);
    free(p->constants);
    free(p->input_slot_start);
    free(p->slots);
    free(p->output_slots);
    free(p);
}

void em_program_retain(em_program *p) {
    if (p)
        atomic_fetch_add_explicit(&p->refcount, 1, memory_order_relaxed);
}

void em_program_release(em_program *p) {
    if (p &&
        atomic_fetch_sub_explicit(&p->refcount, 1, memory_order_acq_rel) == 1)
        program_free(p);
}

size_t em_program_num_inputs(const em_program *p) { return p->tape.ninputs; }
size_t em_program_num_captures(const em_program *p) {
    return p->tape.ninputs - p->nplaceholders;
}
em_array *em_program_capture(const em_program *p, size_t i) {
    return p->tape.inputs[p->nplaceholders + i];
}
size_t em_program_num_outputs(const em_program *p) { return p->tape.noutputs; }

void em_program_input_info(const em_program *p, size_t i, em_dtype *dtype,
                           const int64_t **shape, int *ndim) {
    const em_array *a = p->tape.inputs[i];
    *dtype = a->dtype;
    *shape = a->shape;
    *ndim = a->ndim;
}

em_device em_program_input_device(const em_program *p, size_t i) {
    return p->tape.inputs[i]->device;
}

void em_program_output_info(const em_program *p, size_t i, em_dtype *dtype,
                            const int64_t **shape, int *ndim) {
    const em_array *a = p->tape.outputs[i];
    *dtype = a->dtype;
    *shape = a->shape;
    *ndim = a->ndim;
}

void em_program_get_stats(const em_program *p, em_program_stats *out) {
    *out = p->stats;
    em__program_graph_stats(p->graph, out);
}

/* ---- what program_graph.c reads -------------------------------------- */

const em__tape *em__program_tape(const em_program *p) { return &p->tape; }

size_t em__program_num_constants(const em_program *p) { return p->nconst; }

em_array *em__program_constant(const em_program *p, size_t i) {
    return p->constants[i];
}

em__program_graph *em__program_graph_of(const em_program *p) {
    return p->graph;
}

size_t em__program_output_slot(const em_program *p, size_t i) {
    return p->output_slots[i];
}

/* ---- programs as values ------------------------------------------------ */

static void holder_release(void *ctx) { em_program_release(ctx); }

em_status em__program_holder(em_program *p, em_array **out) {
    em_program_retain(p);
    em_status st = em_from_external(&p->self, sizeof p->self, NULL, 0, EM_U64,
                                    holder_release, p, out);
    if (st != EM_OK)
        em_program_release(p);
    else
        (*out)->host_only = true; /* the loop reads it on the host */
    return st;
}

em_program *em__program_from_holder(const em_array *holder) {
    em_program *p;
    memcpy(&p, em__data(holder), sizeof p);
    return p;
}

/* ---- building ----------------------------------------------------------- */

/* A new pending node like `tmpl` (primitive, dtype, shape, layout,
 * parameter bytes) on `inputs`. Parameters are plain bytes (no op keeps a
 * pointer in them), so a copy is a clone. */
static em_status clone_node(const em_array *tmpl, em_array *const *inputs,
                            int ninputs, em_array **out) {
    em_array *n;
    /* On the template's device, which is not always its inputs' (a
     * transfer; a node without inputs made on another thread's default). */
    em_status st =
        em__node_new_on(tmpl->prim, tmpl->device, tmpl->dtype, tmpl->shape,
                        tmpl->ndim, inputs, ninputs, &n);
    if (st != EM_OK)
        return st;
    memcpy(n->strides, tmpl->strides, sizeof(int64_t) * (size_t)tmpl->ndim);
    n->offset = tmpl->offset;
    n->row_contiguous = tmpl->row_contiguous;
    if (tmpl->params) {
        st = em__node_set_params(n, tmpl->params, tmpl->params_size);
        if (st != EM_OK) {
            em_array_release(n);
            return st;
        }
    }
    *out = n;
    return EM_OK;
}

/* Building state: the tape being recorded, the private copies of traced
 * nodes, and the capture bound (0: no captures). */
typedef struct recorder {
    em__tape *t;
    size_t cap_inputs;
    em__ptr_map inputs; /* placeholders and captures -> input index */
    em__ptr_map copies; /* traced node -> index in t->nodes */
    uint64_t capture_before;
} recorder;

static bool is_capture(const recorder *r, const em_array *a) {
    size_t k;
    return r->capture_before && a->seq < r->capture_before &&
           !em__tape_is_constant(a) && !em__ptr_map_get(&r->inputs, a, &k);
}

/* What a traced array becomes in the tape: its private copy (a pending
 * node), or itself (a placeholder, a capture, an array with data). A
 * capture met for the first time is appended to the inputs. */
static em_status tape_ref(recorder *r, em_array *a, em_array **out) {
    size_t k;
    if (em__ptr_map_get(&r->copies, a, &k)) {
        *out = r->t->nodes[k];
        return EM_OK;
    }
    *out = a;
    if (!is_capture(r, a))
        return EM_OK;
    em__tape *t = r->t;
    if (t->ninputs == r->cap_inputs) {
        size_t ncap = r->cap_inputs * 2 + 4;
        em_array **grown = realloc(t->inputs, ncap * sizeof *grown);
        if (!grown)
            return em__fail(EM_ERR_OOM, "program: out of memory");
        t->inputs = grown;
        r->cap_inputs = ncap;
    }
    if (!em__ptr_map_put(&r->inputs, a, t->ninputs))
        return em__fail(EM_ERR_OOM, "program: out of memory");
    em_array_retain(a);
    t->inputs[t->ninputs++] = a;
    return EM_OK;
}

/* Copy the pending graph between placeholders and outputs into t. */
static em_status record_tape(em_array *const *placeholders, size_t n_in,
                             em_array *const *outputs, size_t n_out,
                             bool capture_outer, em__tape *t) {
    em_array **order = NULL;
    size_t len = 0;
    recorder r = {.t = t};
    em_status st = em__topo_order(outputs, n_out, &order, &len);
    if (st != EM_OK)
        return st;
    r.cap_inputs = n_in ? n_in : 1;
    t->nodes = malloc((len ? len : 1) * sizeof *t->nodes);
    t->inputs = malloc(r.cap_inputs * sizeof *t->inputs);
    t->outputs = malloc((n_out ? n_out : 1) * sizeof *t->outputs);
    if (!t->nodes || !t->inputs || !t->outputs) {
        st = em__fail(EM_ERR_OOM, "program: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_in; i++) {
        em_array_retain(placeholders[i]);
        t->inputs[t->ninputs++] = placeholders[i];
        if (!em__ptr_map_put(&r.inputs, placeholders[i], i)) {
            st = em__fail(EM_ERR_OOM, "program: out of memory");
            goto done;
        }
        /* Nodes older than every placeholder come from outside. */
        if (capture_outer &&
            (!r.capture_before || placeholders[i]->seq < r.capture_before))
            r.capture_before = placeholders[i]->seq;
    }
    for (size_t i = 0; i < len; i++) {
        em_array *a = order[i];
        size_t k;
        /* Evaluated since the walk (by another thread): a constant now. */
        if (em__tape_is_constant(a) || is_capture(&r, a))
            continue;
        if (em_is_placeholder(a)) {
            if (!em__ptr_map_get(&r.inputs, a, &k)) {
                em_desc d;
                st = em__fail(EM_ERR_ARGUMENT,
                              "program: an output depends on placeholder %s, "
                              "which is not one of the program's %zu inputs",
                              em__describe(a, &d), n_in);
                goto done;
            }
            continue;
        }
        /* The traced graph may be shared and evaluated concurrently: read
         * its inputs under the evaluator's lock. Evaluated meanwhile: it is
         * a constant now. */
        em_array **traced_in;
        int nin;
        st = em__node_inputs(a, &traced_in, &nin);
        if (st != EM_OK)
            goto done;
        if (nin < 0)
            continue;
        em_array **in = malloc(sizeof *in * (size_t)(nin ? nin : 1));
        if (!in)
            st = em__fail(EM_ERR_OOM, "program: out of memory");
        for (int j = 0; j < nin && st == EM_OK; j++)
            st = tape_ref(&r, traced_in[j], &in[j]);
        em_array *copy = NULL;
        if (st == EM_OK)
            st = clone_node(a, in, nin, &copy);
        for (int j = 0; j < nin; j++)
            em_array_release(traced_in[j]);
        free(traced_in);
        free(in);
        if (st != EM_OK)
            goto done;
        if (!em__ptr_map_put(&r.copies, a, t->len)) {
            em_array_release(copy);
            st = em__fail(EM_ERR_OOM, "program: out of memory");
            goto done;
        }
        t->nodes[t->len++] = copy;
    }
    for (size_t i = 0; i < n_out; i++) {
        em_array *o;
        st = tape_ref(&r, outputs[i], &o);
        if (st != EM_OK)
            goto done;
        em_array_retain(o);
        t->outputs[t->noutputs++] = o;
    }
done:
    for (size_t i = 0; i < len; i++)
        em_array_release(order[i]);
    free(order);
    em__ptr_map_free(&r.inputs);
    em__ptr_map_free(&r.copies);
    return st;
}

/* Number the values (see the top of the file) and list each node's input
 * slots, the constants and the output slots. */
static em_status assign_slots(em_program *p) {
    em__tape *t = &p->tape;
    em__ptr_map slot = {0};
    size_t nrefs = t->noutputs;
    for (size_t i = 0; i < t->len; i++)
        nrefs += (size_t)t->nodes[i]->ninputs;
    p->constants = malloc((nrefs ? nrefs : 1) * sizeof *p->constants);
    p->slots = malloc((nrefs ? nrefs : 1) * sizeof *p->slots);
    p->input_slot_start = malloc((t->len ? t->len : 1) * sizeof(size_t));
    p->output_slots = malloc((t->noutputs ? t->noutputs : 1) * sizeof(size_t));
    if (!p->constants || !p->slots || !p->input_slot_start || !p->output_slots)
        goto oom;
    for (size_t i = 0; i < t->ninputs; i++)
        if (!em__ptr_map_put(&slot, t->inputs[i], i))
            goto oom;
    /* Constants first, so that node slots can follow them. */
    for (size_t i = 0; i <= t->len; i++) {
        em_array **refs = i < t->len ? t->nodes[i]->inputs : t->outputs;
        size_t n = i < t->len ? (size_t)t->nodes[i]->ninputs : t->noutputs;
        for (size_t j = 0; j < n; j++) {
            em_array *c = refs[j];
            size_t k;
            if (!em__tape_is_constant(c) || em__ptr_map_get(&slot, c, &k))
                continue;
            if (!em__ptr_map_put(&slot, c, t->ninputs + p->nconst))
                goto oom;
            em_array_retain(c);
            p->constants[p->nconst++] = c;
        }
    }
    size_t base = t->ninputs + p->nconst;
    for (size_t i = 0; i < t->len; i++)
        if (!em__ptr_map_put(&slot, t->nodes[i], base + i))
            goto oom;
    size_t w = 0;
    for (size_t i = 0; i < t->len; i++) {
        em_array *n = t->nodes[i];
        p->input_slot_start[i] = w;
        for (int j = 0; j < n->ninputs; j++) {
            size_t k = 0;
            /* Every input is an input, a constant or an earlier node. */
            if (!em__ptr_map_get(&slot, n->inputs[j], &k) || k >= base + i) {
                em__ptr_map_free(&slot);
                return em__fail(EM_ERR_RUNTIME,
                                "program: the tape is not in topological "
                                "order (node %zu, %s)",
                                i, n->prim ? n->prim->name : "?");
            }
            p->slots[w++] = k;
        }
    }
    for (size_t i = 0; i < t->noutputs; i++) {
        size_t k = 0;
        em__ptr_map_get(&slot, t->outputs[i], &k);
        p->output_slots[i] = k;
    }
    em__ptr_map_free(&slot);
    return EM_OK;
oom:
    em__ptr_map_free(&slot);
    return em__fail(EM_ERR_OOM, "program: out of memory");
}

static em_status check_new_args(em_array *const *placeholders, size_t n_in,
                                em_array *const *outputs, size_t n_out) {
    if ((n_in && !placeholders) || (n_out && !outputs))
        return em__fail(EM_ERR_ARGUMENT, "program: NULL argument");
    for (size_t i = 0; i < n_in; i++) {
        if (!em_is_placeholder(placeholders[i])) {
            em_desc d;
            return em__fail(EM_ERR_ARGUMENT,
                            "program: input %zu (%s) is not a placeholder", i,
                            placeholders[i] ? em__describe(placeholders[i], &d)
                                            : "NULL");
        }
        for (size_t j = 0; j < i; j++)
            if (placeholders[j] == placeholders[i])
                return em__fail(EM_ERR_ARGUMENT,
                                "program: inputs %zu and %zu are the same "
                                "placeholder",
                                j, i);
    }
    for (size_t i = 0; i < n_out; i++)
        if (!outputs[i])
            return em__fail(EM_ERR_ARGUMENT, "program: output %zu is NULL", i);
    return EM_OK;
}

em_status em_program_new(em_array *const *placeholders, size_t n_in,
                         em_array *const *outputs, size_t n_out,
                         const em_program_options *opts, em_program **out) {
    *out = NULL;
    em_program_options defaults = {0};
    if (!opts)
        opts = &defaults;
    em_status st = check_new_args(placeholders, n_in, outputs, n_out);
    if (st != EM_OK)
        return st;
    em_program *p = calloc(1, sizeof *p);
    if (!p)
        return em__fail(EM_ERR_OOM, "program: out of memory");
    atomic_init(&p->refcount, 1);
    p->self = p;
    p->nplaceholders = n_in;
    st = record_tape(placeholders, n_in, outputs, n_out, opts->capture_outer,
                     &p->tape);
    p->stats.nodes_before = p->tape.len;
    /* Constants first: equal constants make equal expressions of them. */
    if (st == EM_OK && !opts->no_dedup)
        st = em__tape_dedup_constants(&p->tape, &p->stats.constants_merged);
    if (st == EM_OK && !opts->no_cse)
        st = em__tape_cse(&p->tape, &p->stats.cse_merged);
    if (st == EM_OK && opts->fuse)
        st = em__fuse_tape(&p->tape, &p->stats.fused_kernels);
    if (st == EM_OK)
        st = em__tape_dce(&p->tape);
    if (st == EM_OK)
        st = assign_slots(p);
    if (st != EM_OK) {
        program_free(p);
        return st;
    }
    p->stats.nodes_after = p->tape.len;
    p->stats.constants = p->nconst;
    if (opts->cuda_graph) {
        st = em__program_graph_new(p, &p->graph);
        if (st != EM_OK) {
            program_free(p);
            return st;
        }
    }
    *out = p;
    return EM_OK;
}

/* ---- replay ------------------------------------------------------------- */

/* The input copied to a fresh row-major buffer. */
static em_status relayout_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st == EM_OK && node->size > 0)
        em__copy_array(em__data(node), node->inputs[0]);
    return st;
}

/* On a GPU, the same-dtype cast kernel makes the row-major copy. */
static const em_prim relayout_prim = {"program_input", relayout_eval, NULL,
                                      em__gpu_cast_eval};

static bool same_shape(const em_array *a, const em_array *b) {
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

/* The value a run gives to input i. Views in the tape were built against
 * the placeholder's layout (row-major, offset 0), so any other layout is
 * first copied into it. */
em_status em__program_check_input(const em_program *p, size_t i,
                                  const em_array *given) {
    const em_array *want = p->tape.inputs[i];
    if (!given)
        return em__fail(EM_ERR_ARGUMENT, "program_run: input %zu is NULL", i);
    if (given->dtype != want->dtype || !same_shape(given, want)) {
        em_desc w, g;
        return em__fail(EM_ERR_ARGUMENT,
                        "program_run: input %zu: expected %s, got %s", i,
                        em__describe(want, &w), em__describe(given, &g));
    }
    if (given->device != want->device) {
        char dw[16], dg[16];
        return em__fail(EM_ERR_ARGUMENT,
                        "program_run: input %zu: the program was built for "
                        "%s, got an array on %s",
                        i, em_device_name(want->device, dw, sizeof dw),
                        em_device_name(given->device, dg, sizeof dg));
    }
    return EM_OK;
}

static em_status bind_input(const em_program *p, size_t i, em_array *given,
                            em_array **out) {
    const em_array *want = p->tape.inputs[i];
    em_status st = em__program_check_input(p, i, given);
    if (st != EM_OK)
        return st;
    if (i >= p->nplaceholders) {
        /* A capture: views may have been built on its own layout, which
         * replays reproduce. */
        if (given->offset != want->offset ||
            memcmp(given->strides, want->strides,
                   sizeof(int64_t) * (size_t)want->ndim) != 0)
            return em__fail(EM_ERR_ARGUMENT,
                            "program_run: captured input %zu has another "
                            "layout than when the program was built",
                            i);
        em_array_retain(given);
        *out = given;
        return EM_OK;
    }
    if (given->row_contiguous && given->offset == 0) {
        em_array_retain(given);
        *out = given;
        return EM_OK;
    }
    return em__node_new(&relayout_prim, given->dtype, given->shape, given->ndim,
                        &given, 1, out);
}

em_status em_program_run(em_program *p, em_array *const *inputs, size_t n_in,
                         em_array **outputs_out) {
    if (!p || (n_in && !inputs) || !outputs_out)
        return em__fail(EM_ERR_ARGUMENT, "program_run: NULL argument");
    if (em__program_graph_usable(p->graph))
        return em__program_graph_run(p, p->graph, inputs, n_in, outputs_out);
    return em__program_run_plain(p, inputs, n_in, NULL, outputs_out);
}

em_status em__program_run_plain(em_program *p, em_array *const *inputs,
                                size_t n_in, em_array *const *replace,
                                em_array **outputs_out) {
    const em__tape *t = &p->tape;
    if (n_in != t->ninputs)
        return em__fail(EM_ERR_ARGUMENT,
                        "program_run: expected %zu inputs, got %zu", t->ninputs,
                        n_in);
    size_t nslots = slot_count(p);
    em_array *small[64];
    em_array **values = small;
    if (nslots > 64) {
        values = malloc(nslots * sizeof *values);
        if (!values)
            return em__fail(EM_ERR_OOM, "program_run: out of memory");
    }
    size_t bound = 0; /* inputs bound so far */
    em_status st = EM_OK;
    for (; bound < n_in; bound++) {
        st = bind_input(p, bound, inputs[bound], &values[bound]);
        if (st != EM_OK)
            goto done;
    }
    for (size_t j = 0; j < p->nconst; j++)
        values[n_in + j] = p->constants[j]; /* borrowed */
    size_t base = n_in + p->nconst;
    size_t cloned = 0;
    em_array *args_small[64];
    for (; cloned < t->len; cloned++) {
        const em_array *tmpl = t->nodes[cloned];
        if (replace && replace[cloned]) {
            em_array_retain(replace[cloned]);
            values[base + cloned] = replace[cloned];
            continue;
        }
        em_array **args = args_small;
        if (tmpl->ninputs > 64) {
            args = malloc(sizeof *args * (size_t)tmpl->ninputs);
            if (!args) {
                st = em__fail(EM_ERR_OOM, "program_run: out of memory");
                break;
            }
        }
        const size_t *s = p->slots + p->input_slot_start[cloned];
        for (int j = 0; j < tmpl->ninputs; j++)
            args[j] = values[s[j]];
        st = clone_node(tmpl, args, tmpl->ninputs, &values[base + cloned]);
        if (args != args_small)
            free(args);
        if (st != EM_OK)
            break;
    }
    if (st == EM_OK)
        for (size_t i = 0; i < t->noutputs; i++) {
            size_t k = p->output_slots[i];
            /* An input given back is the caller's array, not its copy. */
            em_array *o = k < n_in ? inputs[k] : values[k];
            em_array_retain(o);
            outputs_out[i] = o;
        }
    for (size_t i = 0; i < cloned; i++)
        em_array_release(values[base + i]);
done:
    for (size_t i = 0; i < bound; i++)
        em_array_release(values[i]);
    if (values != small)
        free(values);
    return st;
}
