/*
 * test_cuda_graph.c — programs replayed as CUDA graphs (cuda_graph option)
 * against the same programs replayed the ordinary way on the GPU (the bytes
 * must be identical: same kernels, same order) and on the CPU (within the
 * usual GPU-vs-CPU tolerance). Each case runs several times on fresh random
 * inputs (new addresses every run: the second run recaptures without
 * binding them), keeps the outputs of each run while the next one runs,
 * and checks the program's graph state and replay count. A program with a while loop must fall back; 100 replays must not
 * grow the device memory.
 */
#include "cuda_test.h"
#include "emily_attention.h"
#include "emily_compile.h"
#include "emily_fast.h"
#include "emily_linalg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IN 3
#define MAX_OUT 3
#define MAX_W 8
#define RUNS 4

/* Intermediate arrays of a builder, released at the end. */
typedef struct scratch {
    em_array *a[64];
    int n;
} scratch;

static em_array *keep(scratch *s, em_array *a) {
    if (s->n < 64)
        s->a[s->n++] = a;
    return a;
}

static void scratch_free(scratch *s) {
    for (int i = 0; i < s->n; i++)
        em_array_release(s->a[i]);
    s->n = 0;
}

static em_array *binary(scratch *s, em_binary_op op, em_array *a,
                        em_array *b) {
    em_array *o = NULL;
    die_on(em_binary(op, a, b, &o), "cuda_graph: binary");
    return keep(s, o);
}

static em_array *unary(scratch *s, em_unary_op op, em_array *a) {
    em_array *o = NULL;
    die_on(em_unary(op, a, &o), "cuda_graph: unary");
    return keep(s, o);
}

static em_array *matmul(scratch *s, em_array *a, em_array *b) {
    em_array *o = NULL;
    die_on(em_matmul(a, b, &o), "cuda_graph: matmul");
    return keep(s, o);
}

static em_array *number(scratch *s, double v) {
    em_array *o = NULL;
    die_on(em_scalar_f64(v, EM_F32, &o), "cuda_graph: scalar");
    return keep(s, o);
}

typedef struct graph_case {
    const char *name;
    int nin;
    int ndim[MAX_IN];
    int64_t shape[MAX_IN][4];
    int nout;
    int nw;
    int wndim[MAX_W];
    int64_t wshape[MAX_W][2];
    /* out[i]: new references; w: the weights on the program's device. */
    void (*build)(scratch *s, em_array **in, em_array **w, em_array **out);
    bool fuse;
    /* GPU vs CPU: >= 1, compare()'s tolerance scale (elementwise);
     * below 1, compare_norm()'s relative tolerance (matrix products). */
    double tol;
} graph_case;

/* Two outputs: a chain with numbers (uploaded once before the capture)
 * and a transposed view of an intermediate (copied out strided). */
static void build_chain(scratch *s, em_array **in, em_array **w,
                        em_array **out) {
    (void)w;
    em_array *a = binary(s, EM_BINARY_multiply, in[0], number(s, 1.5));
    em_array *b = binary(s, EM_BINARY_add, a, in[1]);
    em_array *c = unary(s, EM_UNARY_tanh, b);
    em_array *d = unary(s, EM_UNARY_exp, binary(s, EM_BINARY_multiply, c, in[1]));
    int perm[2] = {1, 0};
    em_array_retain(d);
    out[0] = d;
    die_on(em_transpose(c, perm, 2, &out[1]), "cuda_graph: transpose");
}

static void build_softmax(scratch *s, em_array **in, em_array **w,
                          em_array **out) {
    em_array *logits = matmul(s, in[0], w[0]);
    die_on(em_softmax(logits, -1, &out[0]), "cuda_graph: softmax");
    int axis = 1;
    die_on(em_reduce(EM_REDUCE_max, logits, &axis, 1, false, &out[1]),
           "cuda_graph: reduce");
}

/* A pre-norm decoder layer: RMS norm, causal attention over 4 heads, output
 * projection, residual, RMS norm, SiLU MLP, residual. */
enum { B = 1, L = 8, D = 64, H = 4, HD = 16, F = 128 };

static em_array *heads(scratch *s, em_array *x) {
    int64_t split[4] = {B, L, H, HD};
    int perm[4] = {0, 2, 1, 3};
    em_array *r = NULL, *t = NULL;
    die_on(em_reshape(x, split, 4, &r), "cuda_graph: reshape");
    keep(s, r);
    die_on(em_transpose(r, perm, 4, &t), "cuda_graph: transpose");
    return keep(s, t);
}

static void build_layer(scratch *s, em_array **in, em_array **w,
                        em_array **out) {
    em_array *x = in[0], *h = NULL, *att = NULL, *h2 = NULL, *merged = NULL,
             *flat = NULL;
    die_on(em_rms_norm(x, w[0], 1e-6, &h), "cuda_graph: rms_norm");
    keep(s, h);
    em_array *q = heads(s, matmul(s, h, w[1]));
    em_array *k = heads(s, matmul(s, h, w[2]));
    em_array *v = heads(s, matmul(s, h, w[3]));
    em_sdpa_options so = {.causal = true};
    die_on(em_sdpa(q, k, v, &so, &att), "cuda_graph: sdpa");
    keep(s, att);
    int perm[4] = {0, 2, 1, 3};
    int64_t joined[3] = {B, L, D};
    die_on(em_transpose(att, perm, 4, &merged), "cuda_graph: transpose");
    keep(s, merged);
    die_on(em_reshape(merged, joined, 3, &flat), "cuda_graph: reshape");
    keep(s, flat);
    em_array *x2 = binary(s, EM_BINARY_add, x, matmul(s, flat, w[4]));
    die_on(em_rms_norm(x2, w[5], 1e-6, &h2), "cuda_graph: rms_norm");
    keep(s, h2);
    em_array *m = matmul(s, h2, w[6]);
    em_array *silu =
        binary(s, EM_BINARY_multiply, m, unary(s, EM_UNARY_sigmoid, m));
    em_array *y = binary(s, EM_BINARY_add, x2, matmul(s, silu, w[7]));
    em_array_retain(y);
    out[0] = y;
}

static const graph_case cases[] = {
    {"elementwise chain", 2, {2, 2}, {{64, 33}, {64, 33}}, 2, 0, {0}, {{0}},
     build_chain, false, 4},
    {"elementwise chain fused", 2, {2, 2}, {{64, 33}, {64, 33}}, 2, 0, {0},
     {{0}}, build_chain, true, 4},
    {"matmul + softmax", 1, {2}, {{32, 48}}, 2, 1, {2}, {{48, 40}},
     build_softmax, false, 1e-5},
    {"decoder layer", 1, {3}, {{B, L, D}}, 1, 8, {1, 2, 2, 2, 2, 1, 2, 2},
     {{D}, {D, D}, {D, D}, {D, D}, {D, D}, {D}, {D, F}, {F, D}}, build_layer,
     false, 1e-4},
    {"decoder layer fused", 1, {3}, {{B, L, D}}, 1, 8,
     {1, 2, 2, 2, 2, 1, 2, 2},
     {{D}, {D, D}, {D, D}, {D, D}, {D, D}, {D}, {D, F}, {F, D}}, build_layer,
     true, 1e-4},
};

static em_program *make_program(const graph_case *c, em_device dev,
                                em_array **w, bool graph) {
    em_device old = em_set_default_device(dev);
    em_array *ph[MAX_IN] = {0}, *out[MAX_OUT] = {0};
    for (int i = 0; i < c->nin; i++)
        die_on(em_placeholder(EM_F32, c->shape[i], c->ndim[i], &ph[i]),
               "cuda_graph: placeholder");
    scratch s = {.n = 0};
    c->build(&s, ph, w, out);
    em_set_default_device(old);
    em_program_options o = {.fuse = c->fuse, .cuda_graph = graph};
    em_program *p = NULL;
    bool built = true;
    for (int i = 0; i < c->nout; i++)
        built = built && out[i];
    if (built)
        die_on(em_program_new(ph, (size_t)c->nin, out, (size_t)c->nout, &o,
                              &p),
               c->name);
    scratch_free(&s);
    for (int i = 0; i < c->nin; i++)
        em_array_release(ph[i]);
    for (int i = 0; i < c->nout; i++)
        em_array_release(out[i]);
    return p;
}

/* The bytes of an array (read back; malloc'ed). */
static void *bytes_of(em_array *a, size_t *n) {
    *n = em_array_nbytes(a);
    void *buf = malloc(*n ? *n : 1);
    if (buf)
        die_on(em_read(a, buf, *n), "cuda_graph: read");
    return buf;
}

static bool same_bytes(em_array *a, em_array *b) {
    size_t na, nb;
    void *x = bytes_of(a, &na), *y = bytes_of(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static em_array **run(em_program *p, em_array **inputs, int nin, int nout) {
    em_array **out = calloc((size_t)nout, sizeof *out);
    if (!out)
        return NULL;
    em_status st = em_program_run(p, inputs, (size_t)nin, out);
    die_on(st, "cuda_graph: program_run");
    if (st == EM_OK)
        die_on(em_eval(out, (size_t)nout), "cuda_graph: eval");
    return st == EM_OK ? out : (free(out), NULL);
}

static void release_outputs(em_array **out, int n) {
    for (int i = 0; out && i < n; i++)
        em_array_release(out[i]);
    free(out);
}

static void run_case(const graph_case *c) {
    char what[160];
    em_array *wcpu[MAX_W] = {0}, *wgpu[MAX_W] = {0};
    for (int i = 0; i < c->nw; i++) {
        wcpu[i] = random_array(EM_F32, c->wshape[i], c->wndim[i], false, 0);
        die_on(em_to_device(wcpu[i], GPU, &wgpu[i]), "cuda_graph: weights");
        die_on(em_eval(&wgpu[i], 1), "cuda_graph: weights");
    }
    em_program *cpu = make_program(c, EM_DEVICE_CPU, wcpu, false);
    em_program *plain = make_program(c, GPU, wgpu, false);
    em_program *graph = make_program(c, GPU, wgpu, true);
    em_array **held = NULL; /* the graph's outputs of the previous run */
    void *held_bytes[MAX_OUT] = {0};
    size_t held_n[MAX_OUT] = {0};
    for (int r = 0; cpu && plain && graph && r < RUNS; r++) {
        em_array *in_cpu[MAX_IN] = {0}, *in_gpu[MAX_IN] = {0};
        for (int i = 0; i < c->nin; i++) {
            in_cpu[i] = random_array(EM_F32, c->shape[i], c->ndim[i], false, 0);
            die_on(em_to_device(in_cpu[i], GPU, &in_gpu[i]), "to_device");
        }
        em_array **oc = run(cpu, in_cpu, c->nin, c->nout);
        em_array **op = run(plain, in_gpu, c->nin, c->nout);
        em_array **og = run(graph, in_gpu, c->nin, c->nout);
        for (int k = 0; oc && op && og && k < c->nout; k++) {
            snprintf(what, sizeof what, "%s: run %d output %d same bytes as "
                     "the ordinary GPU replay", c->name, r, k);
            record("cuda_graph", what, same_bytes(op[k], og[k]), 0);
            snprintf(what, sizeof what, "%s: run %d output %d vs CPU",
                     c->name, r, k);
            double e = c->tol >= 1 ? compare(oc[k], og[k], what, c->tol)
                                   : compare_norm(oc[k], og[k], c->tol);
            record("cuda_graph", what, e <= 1, e);
            record("cuda_graph", "outputs on the GPU",
                   em_array_device(og[k]) == GPU, 0);
        }
        /* Run r-1's outputs are unchanged by run r. */
        for (int k = 0; held && k < c->nout; k++) {
            size_t n;
            void *now = bytes_of(held[k], &n);
            snprintf(what, sizeof what, "%s: output %d of run %d kept while "
                     "run %d ran", c->name, k, r - 1, r);
            record("cuda_graph", what,
                   now && held_bytes[k] && n == held_n[k] &&
                       memcmp(now, held_bytes[k], n) == 0,
                   0);
            free(now);
        }
        release_outputs(held, c->nout);
        for (int k = 0; k < c->nout; k++) {
            free(held_bytes[k]);
            held_bytes[k] = og ? bytes_of(og[k], &held_n[k]) : NULL;
        }
        held = og;
        release_outputs(oc, c->nout);
        release_outputs(op, c->nout);
        for (int i = 0; i < c->nin; i++) {
            em_array_release(in_cpu[i]);
            em_array_release(in_gpu[i]);
        }
    }
    release_outputs(held, c->nout);
    for (int k = 0; k < MAX_OUT; k++)
        free(held_bytes[k]);
    if (graph) {
        em_program_stats st;
        em_program_get_stats(graph, &st);
        if (st.cuda_graph != EM_CUDA_GRAPH_CAPTURED)
            printf("  %s: not captured: %s\n", c->name, st.cuda_graph_reason);
        snprintf(what, sizeof what, "%s: captured", c->name);
        record("cuda_graph", what, st.cuda_graph == EM_CUDA_GRAPH_CAPTURED, 0);
        /* Run 0 binds its inputs (read in place); run 1 gives new ones:
         * an ordinary replay and a recapture that copies them in. */
        snprintf(what, sizeof what, "%s: %d replays through the graph, "
                 "2 captures", c->name, RUNS - 2);
        record("cuda_graph", what,
               st.cuda_graph_replays == RUNS - 2 &&
                   st.cuda_graph_captures == 2 &&
                   st.cuda_graph_bound_inputs == 0,
               0);
        record("cuda_graph", "the graph owns device memory",
               st.cuda_graph_bytes > 0 && st.cuda_graph_nodes > 0, 0);
        printf("  %s: %lld graph nodes, %zu bytes\n", c->name,
               (long long)st.cuda_graph_nodes, st.cuda_graph_bytes);
    }
    em_program_release(cpu);
    em_program_release(plain);
    em_program_release(graph);
    for (int i = 0; i < c->nw; i++) {
        em_array_release(wcpu[i]);
        em_array_release(wgpu[i]);
    }
}

/* A program holding a while loop cannot be captured (the condition is
 * read on the host each iteration): it runs the ordinary way, correctly. */
static void while_falls_back(void) {
    int64_t vshape[1] = {17};
    em_device old = em_set_default_device(GPU);
    em_array *i = NULL, *x = NULL, *ci = NULL, *cx = NULL;
    die_on(em_placeholder(EM_F32, NULL, 0, &i), "placeholder");
    die_on(em_placeholder(EM_F32, vshape, 1, &x), "placeholder");
    scratch s = {.n = 0};
    em_array *lt = binary(&s, EM_BINARY_less, i, number(&s, 5));
    em_array *next[2] = {binary(&s, EM_BINARY_add, i, number(&s, 1)),
                         binary(&s, EM_BINARY_multiply, x, number(&s, 1.25))};
    em_array *state[2] = {i, x};
    em_program *cond = NULL, *body = NULL, *outer = NULL;
    die_on(em_program_new(state, 2, &lt, 1, NULL, &cond), "cond");
    die_on(em_program_new(state, 2, next, 2, NULL, &body), "body");
    /* The outer program: the loop over its own placeholders. */
    die_on(em_placeholder(EM_F32, NULL, 0, &ci), "placeholder");
    die_on(em_placeholder(EM_F32, vshape, 1, &cx), "placeholder");
    em_set_default_device(old);
    em_array *init[2] = {ci, cx}, *final[2] = {0};
    if (cond && body)
        die_on(em_while(cond, body, init, 2, final), "while");
    em_program_options o = {.cuda_graph = true};
    if (final[0] && final[1])
        die_on(em_program_new(init, 2, final, 2, &o, &outer), "outer");
    em_program_stats st = {0};
    if (outer)
        em_program_get_stats(outer, &st);
    record("cuda_graph", "while: not capturable, with a reason",
           st.cuda_graph == EM_CUDA_GRAPH_FALLBACK &&
               st.cuda_graph_reason[0] != 0,
           0);
    for (int r = 0; outer && r < 3; r++) {
        em_array *x0 = random_array(EM_F32, vshape, 1, false, 0);
        em_array *i0 = NULL, *gx = NULL, *gi = NULL, *want = NULL,
                 *factor = NULL;
        die_on(em_scalar_f64(0, EM_F32, &i0), "scalar");
        die_on(em_to_device(x0, GPU, &gx), "to_device");
        die_on(em_to_device(i0, GPU, &gi), "to_device");
        em_array *args[2] = {gi, gx};
        em_array **out = run(outer, args, 2, 2);
        /* Five iterations: x * 1.25^5 on the CPU. */
        die_on(em_scalar_f64(pow(1.25, 5), EM_F32, &factor), "scalar");
        die_on(em_binary(EM_BINARY_multiply, x0, factor, &want), "multiply");
        double e = out ? compare(want, out[1], "while state", 4) : INFINITY;
        record("cuda_graph", "while: fallback results", e <= 1, e);
        release_outputs(out, 2);
        em_array *all[6] = {x0, i0, gx, gi, want, factor};
        for (int k = 0; k < 6; k++)
            em_array_release(all[k]);
    }
    em_program_get_stats(outer ? outer : cond, &st);
    record("cuda_graph", "while: no replay went through a graph",
           st.cuda_graph_replays == 0, 0);
    scratch_free(&s);
    em_array *all[8] = {i, x, ci, cx, final[0], final[1], NULL, NULL};
    for (int k = 0; k < 6; k++)
        em_array_release(all[k]);
    em_program_release(cond);
    em_program_release(body);
    em_program_release(outer);
}

/* A capture that fails midway (cholesky reads its info on the host, a
 * synchronisation the capture cannot record): the run that tried still
 * gives the ordinary results, the program is marked FALLBACK with the
 * reason, and later runs are ordinary replays. */
static void capture_failure_falls_back(void) {
    enum { N = 8 };
    int64_t shape[2] = {N, N};
    em_program *prog[2] = {NULL, NULL}; /* plain, cuda_graph */
    for (int k = 0; k < 2; k++) {
        em_device old = em_set_default_device(GPU);
        em_array *a = NULL, *l = NULL, *y = NULL;
        die_on(em_placeholder(EM_F32, shape, 2, &a), "placeholder");
        scratch s = {.n = 0};
        die_on(em_cholesky(a, &l), "cholesky");
        if (l)
            y = binary(&s, EM_BINARY_multiply, keep(&s, l), number(&s, 2));
        em_set_default_device(old);
        em_program_options o = {.cuda_graph = k == 1};
        if (y)
            die_on(em_program_new(&a, 1, &y, 1, &o, &prog[k]), "program");
        scratch_free(&s);
        em_array_release(a);
    }
    for (int r = 0; prog[0] && prog[1] && r < 3; r++) {
        /* x x^T + N I: symmetric positive definite. */
        em_array *x = random_array(EM_F32, shape, 2, false, 0), *xt = NULL,
                 *xxt = NULL, *eye = NULL, *n = NULL, *ni = NULL, *spd = NULL,
                 *g = NULL;
        int perm[2] = {1, 0};
        die_on(em_transpose(x, perm, 2, &xt), "transpose");
        die_on(em_matmul(x, xt, &xxt), "matmul");
        die_on(em_eye(shape, 2, 0, EM_F32, &eye), "eye");
        die_on(em_scalar_f64(N, EM_F32, &n), "scalar");
        die_on(em_binary(EM_BINARY_multiply, eye, n, &ni), "multiply");
        die_on(em_binary(EM_BINARY_add, xxt, ni, &spd), "add");
        die_on(em_to_device(spd, GPU, &g), "to_device");
        em_array **plain = run(prog[0], &g, 1, 1);
        em_array **graph = run(prog[1], &g, 1, 1);
        record("cuda_graph", "capture failure: same bytes as the ordinary "
               "replay", plain && graph && same_bytes(plain[0], graph[0]), 0);
        release_outputs(plain, 1);
        release_outputs(graph, 1);
        em_array *all[8] = {x, xt, xxt, eye, n, ni, spd, g};
        for (int k = 0; k < 8; k++)
            em_array_release(all[k]);
    }
    em_program_stats st = {0};
    if (prog[1])
        em_program_get_stats(prog[1], &st);
    printf("  cholesky: %s\n", st.cuda_graph_reason);
    record("cuda_graph", "capture failure: FALLBACK with the reason",
           st.cuda_graph == EM_CUDA_GRAPH_FALLBACK &&
               strstr(st.cuda_graph_reason, "capture failed") != NULL &&
               st.cuda_graph_replays == 0 && st.cuda_graph_bytes == 0,
           0);
    em_program_release(prog[0]);
    em_program_release(prog[1]);
}

/* 100 replays: the device memory in use does not grow. */
static void replays_do_not_grow(void) {
    const graph_case *c = &cases[0];
    em_program *p = make_program(c, GPU, NULL, true);
    em_array *in[2] = {0};
    for (int i = 0; i < 2; i++) {
        em_array *h = random_array(EM_F32, c->shape[i], c->ndim[i], false, 0);
        die_on(em_to_device(h, GPU, &in[i]), "to_device");
        die_on(em_eval(&in[i], 1), "eval");
        em_array_release(h);
    }
    em_memory_stats before = {0}, after = {0};
    for (int r = 0; p && r < 103; r++) {
        release_outputs(run(p, in, 2, 2), 2);
        if (r == 2)
            em_memory_get_device_stats(GPU, &before);
    }
    em_memory_get_device_stats(GPU, &after);
    em_program_stats st = {0};
    if (p)
        em_program_get_stats(p, &st);
    printf("  100 replays: %zu bytes active before, %zu after\n",
           before.active, after.active);
    record("cuda_graph", "100 replays: no memory growth",
           p && after.active <= before.active, 0);
    record("cuda_graph", "100 replays: all through the graph",
           st.cuda_graph_replays == 102, 0);
    em_program_release(p);
    for (int i = 0; i < 2; i++)
        em_array_release(in[i]);
}

void test_cuda_graph(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    while_falls_back();
    capture_failure_falls_back();
    replays_do_not_grow();
    test_cuda_graph_state();
}
