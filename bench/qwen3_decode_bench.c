/*
 * qwen3_decode_bench.c — one decode step of a Qwen3-0.6B-shaped decoder
 * with a KV cache, written from primitives and replayed as one engine
 * program (issue 16, item 2's benchmark):
 *
 *   28 pre-norm layers, hidden 1024, 16 query / 8 KV heads of 128, q and k
 *   RMS norms over the head dimension, RoPE (theta 1e6, half rotation) at
 *   position pos, the new k / v written into a static cache of L tokens
 *   (em_dynamic_put_slice at pos), attention of the B new tokens over the
 *   cache, SiLU(gate) * up MLP of 3072, final norm and the 151,936-word LM
 *   head; bf16 weights, random.
 *
 * The program's inputs are the hidden state x (B, 1, 1024), pos (0-d s32,
 * RoPE's offset), the put_slice starts (s32 {0, 0, pos, 0}) and the 56
 * caches (B, 8, L, 128); its outputs the logits (B, 1, 151936) and the 56
 * updated caches, which the next step takes as its caches (the functional
 * form of a static cache, as Bumblebee writes it); the bench releases the
 * old caches once the step is built, so that the plain replay may update
 * them in place (buffer donation). pos = L - 1: the step
 * attends over all L positions (no mask), the cost of the last step of an
 * L-token window.
 *
 * Modes (per batch B in 1, 4, 16 and cache L in 128, 512, 2048, 8192):
 *   fuse         the step from primitives (em_rms_norm, em_matmul with
 *                (K, N) weights, elementwise SiLU and adds, em_rope, em_sdpa),
 *                fuse = true, the ordinary replay (one launch per node)
 *   fuse+graph   the same, cuda_graph = true (one cudaGraphLaunch)
 *   fast         the fused decode path, the plain replay (the caches are
 *                donated to their fast_heads: updated in place, no copy)
 *   fast+graph   the fused decode path (decoder_fast: em_fast_linear with
 *                norm prologues, SiLU-gate and residual epilogues, weights
 *                a row per output; em_fast_heads for the q/k norms and
 *                RoPE), fuse and cuda_graph
 *
 *   make -j2 cuda build/qwen3_decode_bench && build/qwen3_decode_bench
 *   python3 bench/qwen3_decode_torch.py build/qwen3_decode_bench
 *
 * Host wall clock per step (run + eval + device synchronize), median of
 * STEPS after STEP_WARMUP steps. Prints, per (mode, B, L),
 *   RESULT decode_<mode>_b<B>_l<L> <ms/step> <tokens/s> tok/s
 * and the program's graph state. Arguments: optional B and L lists, e.g.
 * `build/qwen3_decode_bench 1 512` runs B = 1, L = 512 only; a third
 * argument, a comma-separated list of modes, runs only those (e.g.
 * `build/qwen3_decode_bench 1 512 fast,fast+graph`).
 */
#include "cuda_bench_common.h"
#include "emily_attention.h"
#include "emily_compile.h"
#include "emily_fast.h"
#include "emily_pad.h"

#include <string.h>
#include <time.h>

enum {
    LAYERS = 28,
    D = 1024,
    H = 16,
    HKV = 8,
    HD = 128,
    F = 3072,
    VOCAB = 151936,
    STEPS = 20,
    STEP_WARMUP = 4,
    N_IN = 3 + 2 * LAYERS,  /* x, pos, starts, caches */
    N_OUT = 1 + 2 * LAYERS, /* logits, caches */
};

typedef struct layer_weights {
    em_array *norm1, *wq, *wk, *wv, *q_norm, *k_norm, *wo, *norm2, *w1, *w3,
        *w2;
    /* the fused path's, a row per output (N, K): q, k and v stacked
     * (4096, 1024), o (1024, 2048), gate and up (3072, 1024), down (1024,
     * 3072) */
    em_array *t_qkv, *t_o, *t_gate, *t_up, *t_down;
} layer_weights;

static layer_weights layers[LAYERS];
static em_array *final_norm, *lm_head, *t_lm_head;

static em_array *weight(int64_t rows, int64_t cols) {
    int64_t shape[2] = {rows, cols};
    return random_gpu(shape, cols ? 2 : 1, EM_BF16);
}

/* Every intermediate the step builds, released once the outputs hold what
 * they need. */
typedef struct pool {
    em_array *a[80 * LAYERS];
    int n;
} pool;

static em_array *keep(pool *p, em_array *a) {
    p->a[p->n++] = a;
    return a;
}

/* (B, 1, heads * HD) -> (B, heads, 1, HD), the head's RMS norm applied
 * and rotated at pos. */
static em_array *heads_of(pool *pl, em_array *flat, int64_t B, int64_t heads,
                          em_array *norm, em_array *pos) {
    int64_t split[4] = {B, 1, heads, HD};
    int perm[4] = {0, 2, 1, 3};
    em_array *r, *t, *n, *ro;
    check(em_reshape(flat, split, 4, &r), "reshape");
    if (norm) {
        check(em_rms_norm(keep(pl, r), norm, 1e-6, &n), "rms_norm");
        r = n;
    }
    check(em_transpose(keep(pl, r), perm, 4, &t), "transpose");
    if (!pos)
        return keep(pl, t);
    em_rope_options ro_opts = {.dims = HD, .traditional = false, .base = 1e6};
    check(em_rope(keep(pl, t), pos, &ro_opts, &ro), "rope");
    return keep(pl, ro);
}

/* The step on placeholders in[N_IN]: out[0] the logits, out[1 + 2l] and
 * out[2 + 2l] layer l's updated k and v caches (new references). */
static void decoder(em_array *const *in, int64_t B, em_array **out) {
    pool *pl = calloc(1, sizeof *pl);
    if (!pl) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    int64_t joined[3] = {B, 1, H * HD};
    int perm[4] = {0, 2, 1, 3};
    em_array *h = in[0], *pos = in[1], *starts = in[2];
    for (int l = 0; l < LAYERS; l++) {
        layer_weights *w = &layers[l];
        em_array *t, *mq, *mk, *mv, *kc, *vc, *a, *back, *flat, *o, *res, *t2,
            *g, *u, *sg, *act, *gu, *down, *res2;
        check(em_rms_norm(h, w->norm1, 1e-6, &t), "rms_norm");
        keep(pl, t);
        check(em_matmul(t, w->wq, &mq), "matmul");
        check(em_matmul(t, w->wk, &mk), "matmul");
        check(em_matmul(t, w->wv, &mv), "matmul");
        em_array *q = heads_of(pl, keep(pl, mq), B, H, w->q_norm, pos);
        em_array *k = heads_of(pl, keep(pl, mk), B, HKV, w->k_norm, pos);
        em_array *v = heads_of(pl, keep(pl, mv), B, HKV, NULL, NULL);
        check(em_dynamic_put_slice(in[3 + 2 * l], starts, k, &kc), "put");
        check(em_dynamic_put_slice(in[4 + 2 * l], starts, v, &vc), "put");
        out[1 + 2 * l] = kc;
        out[2 + 2 * l] = vc;
        check(em_sdpa(q, kc, vc, NULL, &a), "sdpa");
        check(em_transpose(keep(pl, a), perm, 4, &back), "transpose");
        check(em_reshape(keep(pl, back), joined, 3, &flat), "reshape");
        check(em_matmul(keep(pl, flat), w->wo, &o), "matmul");
        check(em_binary(EM_BINARY_add, h, keep(pl, o), &res), "add");
        keep(pl, res);
        check(em_rms_norm(res, w->norm2, 1e-6, &t2), "rms_norm");
        keep(pl, t2);
        check(em_matmul(t2, w->w1, &g), "matmul");
        check(em_matmul(t2, w->w3, &u), "matmul");
        keep(pl, g);
        keep(pl, u);
        check(em_unary(EM_UNARY_sigmoid, g, &sg), "sigmoid");
        check(em_binary(EM_BINARY_multiply, g, keep(pl, sg), &act),
              "multiply");
        check(em_binary(EM_BINARY_multiply, keep(pl, act), u, &gu),
              "multiply");
        check(em_matmul(keep(pl, gu), w->w2, &down), "matmul");
        check(em_binary(EM_BINARY_add, res, keep(pl, down), &res2), "add");
        h = keep(pl, res2);
    }
    em_array *hn;
    check(em_rms_norm(h, final_norm, 1e-6, &hn), "rms_norm");
    check(em_matmul(keep(pl, hn), lm_head, &out[0]), "matmul");
    for (int i = 0; i < pl->n; i++)
        em_array_release(pl->a[i]);
    free(pl);
}

/* The same step on the fused decode path: em_fast_linear with the RMS
 * norm folded in as a prologue (q/k/v in one product, gate and up in one
 * with the SiLU epilogue, the LM head), the residual adds as epilogues;
 * em_fast_heads splits q / k / v into heads with the q/k norms and RoPE,
 * and writes k and v straight into their caches at pos (its cache form:
 * out[1 + 2l] / out[2 + 2l] are its results, updated in place when the
 * caches are donated; no put_slice, no (B, HKV, 1, HD) temporaries);
 * attention through em_sdpa (the grouped-head decode kernel). The starts
 * input is unused here (the fuse modes' put_slice reads it). */
static void decoder_fast(em_array *const *in, int64_t B, em_array **out) {
    pool *pl = calloc(1, sizeof *pl);
    if (!pl) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    int64_t joined[3] = {B, 1, H * HD};
    int perm[4] = {0, 2, 1, 3};
    em_array *h = in[0], *pos = in[1];
    for (int l = 0; l < LAYERS; l++) {
        layer_weights *w = &layers[l];
        em_array *qkv, *a, *back, *flat, *res, *gu, *res2;
        em_fast_linear_options pre = {
            .norm = true, .norm_weight = w->norm1, .eps = 1e-6};
        check(em_fast_linear(h, w->t_qkv, &pre, &qkv), "fast_linear");
        keep(pl, qkv);
        /* q (normed, rotated) in the attention layout, k (normed,
         * rotated) and v written into their caches at pos, straight from
         * the stacked product: one kernel each */
        em_array *q, *kc, *vc;
        em_rope_options rope = {.dims = HD, .base = 1e6};
        em_fast_heads_options hq = {.head_dim = HD, .first = 0, .count = H,
                                    .norm = true, .norm_weight = w->q_norm,
                                    .eps = 1e-6, .offset = pos, .rope = rope};
        em_fast_heads_options hk = hq, hv = {.head_dim = HD,
                                             .first = H + HKV,
                                             .count = HKV,
                                             .cache = in[4 + 2 * l],
                                             .cache_offset = pos};
        hk.first = H;
        hk.count = HKV;
        hk.norm_weight = w->k_norm;
        hk.cache = in[3 + 2 * l];
        hk.cache_offset = pos;
        check(em_fast_heads(qkv, &hq, &q), "fast_heads");
        check(em_fast_heads(qkv, &hk, &kc), "fast_heads");
        check(em_fast_heads(qkv, &hv, &vc), "fast_heads");
        keep(pl, q);
        out[1 + 2 * l] = kc;
        out[2 + 2 * l] = vc;
        check(em_sdpa(q, kc, vc, NULL, &a), "sdpa");
        check(em_transpose(keep(pl, a), perm, 4, &back), "transpose");
        check(em_reshape(keep(pl, back), joined, 3, &flat), "reshape");
        em_fast_linear_options add_h = {.residual = h};
        check(em_fast_linear(keep(pl, flat), w->t_o, &add_h, &res),
              "fast_linear");
        keep(pl, res);
        em_fast_linear_options mlp = {.norm = true,
                                      .norm_weight = w->norm2,
                                      .eps = 1e-6,
                                      .gate = w->t_gate};
        check(em_fast_linear(res, w->t_up, &mlp, &gu), "fast_linear");
        em_fast_linear_options add_res = {.residual = res};
        check(em_fast_linear(keep(pl, gu), w->t_down, &add_res, &res2),
              "fast_linear");
        h = keep(pl, res2);
    }
    em_fast_linear_options head = {
        .norm = true, .norm_weight = final_norm, .eps = 1e-6};
    check(em_fast_linear(h, t_lm_head, &head, &out[0]), "fast_linear");
    for (int i = 0; i < pl->n; i++)
        em_array_release(pl->a[i]);
    free(pl);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* A (B, HKV, L, HD) bf16 cache on the GPU, filled with a constant (the
 * values do not change the timing; host-side random data for 56 caches of
 * up to 268 MB would take minutes). */
static em_array *cache(int64_t B, int64_t L, double value) {
    int64_t shape[4] = {B, HKV, L, HD};
    em_device old = em_set_default_device(GPU);
    em_array *v, *c;
    check(em_scalar_f64(value, EM_BF16, &v), "scalar");
    check(em_full(v, shape, 4, EM_BF16, &c), "full");
    em_set_default_device(old);
    check(em_eval(&c, 1), "eval");
    em_array_release(v);
    return c;
}

/* A 1-D s32 array of n values on the GPU, or a 0-d one (n = 0: values[0]). */
static em_array *s32_array(const int32_t *values, int n) {
    int64_t shape[1] = {n};
    em_array *host, *gpu;
    check(em_from_data(values, sizeof(int32_t) * (size_t)(n ? n : 1), shape,
                       n ? 1 : 0, EM_S32, &host),
          "from_data");
    check(em_to_device(host, GPU, &gpu), "to_device");
    check(em_eval(&gpu, 1), "eval");
    em_array_release(host);
    return gpu;
}

static void run_mode(const char *name, bool fast, bool graph, int64_t B,
                     int64_t L) {
    const int64_t xs[3] = {B, 1, D}, cs[4] = {B, HKV, L, HD}, ss[1] = {4};
    em_array *ph[N_IN], *outs[N_OUT];
    em_device old = em_set_default_device(GPU);
    check(em_placeholder(EM_BF16, xs, 3, &ph[0]), "placeholder");
    check(em_placeholder(EM_S32, NULL, 0, &ph[1]), "placeholder");
    check(em_placeholder(EM_S32, ss, 1, &ph[2]), "placeholder");
    for (int i = 3; i < N_IN; i++)
        check(em_placeholder(EM_BF16, cs, 4, &ph[i]), "placeholder");
    if (fast)
        decoder_fast(ph, B, outs);
    else
        decoder(ph, B, outs);
    em_set_default_device(old);
    em_program_options o = {.fuse = true, .cuda_graph = graph};
    em_program *p;
    check(em_program_new(ph, N_IN, outs, N_OUT, &o, &p), "program_new");
    for (int i = 0; i < N_OUT; i++)
        em_array_release(outs[i]);
    for (int i = 0; i < N_IN; i++)
        em_array_release(ph[i]);

    const int32_t pos = (int32_t)(L - 1), starts[4] = {0, 0, pos, 0};
    em_array *args[N_IN];
    args[0] = random_gpu(xs, 3, EM_BF16);
    args[1] = s32_array(&pos, 0);
    args[2] = s32_array(starts, 4);
    for (int i = 3; i < N_IN; i++)
        args[i] = cache(B, L, 0.01 * (i % 7));
    double times[STEPS];
    for (int s = -STEP_WARMUP; s < STEPS; s++) {
        double t0 = now_ms();
        em_array *y[N_OUT];
        check(em_program_run(p, args, N_IN, y), "program_run");
        /* Give the old caches up before evaluating: the replayed graph
         * holds them, and an input held by nothing but its put_slice is
         * donated to it (the cache updated in place instead of copied;
         * the CUDA graph copies its inputs in any case). */
        for (int i = 3; i < N_IN; i++) {
            em_array_release(args[i]);
            args[i] = NULL;
        }
        check(em_eval(y, N_OUT), "eval");
        check(em_device_synchronize(GPU), "synchronize");
        double t = now_ms() - t0;
        if (s >= 0)
            times[s] = t;
        em_array_release(y[0]);
        for (int i = 1; i < N_OUT; i++) /* the next step's caches */
            args[2 + i] = y[i];
    }
    qsort(times, STEPS, sizeof times[0], cmp_double);
    const double ms = times[STEPS / 2];
    printf("RESULT decode_%s_b%lld_l%lld %.4f %.1f tok/s\n", name,
           (long long)B, (long long)L, ms, (double)B * 1e3 / ms);
    em_program_stats st;
    em_program_get_stats(p, &st);
    printf("  %s B=%lld L=%lld: %zu nodes, %d fused kernels, cuda graph "
           "state %d (%lld graph nodes, %lld replays)%s%s\n",
           name, (long long)B, (long long)L, st.nodes_after, st.fused_kernels,
           st.cuda_graph, (long long)st.cuda_graph_nodes,
           (long long)st.cuda_graph_replays, st.cuda_graph_reason[0] ? ": " : "",
           st.cuda_graph_reason);
    fflush(stdout);
    for (int i = 0; i < N_IN; i++)
        em_array_release(args[i]);
    em_program_release(p);
    em_memory_clear_device_cache(GPU);
}

/* "1,4,16" -> values (at most max); the default when s is NULL. */
static int parse_list(const char *s, const int64_t *dflt, int ndflt,
                      int64_t *v, int max) {
    if (!s) {
        memcpy(v, dflt, sizeof *v * (size_t)ndflt);
        return ndflt;
    }
    int n = 0;
    while (*s && n < max) {
        char *end;
        long long x = strtoll(s, &end, 10);
        if (end == s || x <= 0) {
            fprintf(stderr, "bad list element in %s\n", s);
            exit(2);
        }
        v[n++] = x;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* Whether mode is an element of the comma-separated list (every mode when
 * the list is NULL). */
static bool mode_listed(const char *list, const char *mode) {
    if (!list)
        return true;
    const size_t n = strlen(mode);
    for (const char *s = list; *s;) {
        const char *end = strchr(s, ',');
        const size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == n && strncmp(s, mode, n) == 0)
            return true;
        s += len + (end ? 1 : 0);
    }
    return false;
}

int main(int argc, char **argv) {
    const char *reason = NULL;
    if (!em_device_available(GPU, &reason)) {
        printf("skipped: %s\n", reason ? reason : "no GPU");
        return 0;
    }
    const int64_t dB[3] = {1, 4, 16}, dL[4] = {128, 512, 2048, 8192};
    int64_t Bs[8], Ls[8];
    const int nB = parse_list(argc > 1 ? argv[1] : NULL, dB, 3, Bs, 8);
    const int nL = parse_list(argc > 2 ? argv[2] : NULL, dL, 4, Ls, 8);
    for (int l = 0; l < LAYERS; l++) {
        layer_weights *w = &layers[l];
        w->norm1 = weight(D, 0);
        w->norm2 = weight(D, 0);
        w->q_norm = weight(HD, 0);
        w->k_norm = weight(HD, 0);
        w->wq = weight(D, H * HD);
        w->wk = weight(D, HKV * HD);
        w->wv = weight(D, HKV * HD);
        w->wo = weight(H * HD, D);
        w->w1 = weight(D, F);
        w->w3 = weight(D, F);
        w->w2 = weight(F, D);
        w->t_qkv = weight((H + 2 * HKV) * HD, D);
        w->t_o = weight(D, H * HD);
        w->t_gate = weight(F, D);
        w->t_up = weight(F, D);
        w->t_down = weight(D, F);
    }
    final_norm = weight(D, 0);
    lm_head = weight(D, VOCAB);
    t_lm_head = weight(VOCAB, D);
    static const struct {
        const char *name;
        bool fast, graph;
    } modes[] = {{"fuse", false, false},
                 {"fuse+graph", false, true},
                 {"fast", true, false},
                 {"fast+graph", true, true}};
    const char *only = argc > 3 ? argv[3] : NULL;
    for (int b = 0; b < nB; b++)
        for (int l = 0; l < nL; l++)
            for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
                if (mode_listed(only, modes[m].name))
                    run_mode(modes[m].name, modes[m].fast, modes[m].graph,
                             Bs[b], Ls[l]);
    return 0;
}
