/*
 * test_attention_prefill.c — em_sdpa prefill (more than 16 queries) on the
 * GPU against the CPU kernel on the same random inputs, aimed at the
 * tensor-core kernel (src/cuda/attention_prefill.cu: f16/bf16, head dims 32,
 * 64, 96 and 128, dense aligned rows) and at the jobs that must stay with the old
 * tiled kernel (other head dims, D != Dv, rows with an odd stride, f32).
 * Query counts 17, 100, 513 and key counts that are no multiple of the
 * 64-key tile; causal with Lq < Lk (offset) and Lq > Lk (leading rows 0);
 * additive masks per head, boolean masks broadcast from (Lq, Lk) with a
 * fully masked row (0 on both), key padding masks (B, 1, 1, Lk), sinks, grouped heads, K/V as a slice of a
 * longer cache, Q as a transposed (B, L, H, D) view.
 *
 * Tolerance: the tensor-core kernel rounds the softmax weights to the input
 * type before P V (as flash attention does), the CPU keeps them in f32; the
 * rounding is a relative 2^-9 (bf16) / 2^-12 (f16) per weight, well within
 * 4 ulp of the output against |out| + 1 (outputs are averages of values in
 * [-3, 3]).
 */
#include "cuda_test.h"
#include "emily_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { Q_PLAIN, Q_TRANSPOSED, Q_ODD_STRIDE };

typedef struct prefill_case {
    const char *name;
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    bool causal;
    int mask; /* 0 none, 1 additive (1, H, Lq, Lk), 2 boolean (Lq, Lk),
                 3 boolean key padding (B, 1, 1, Lk) */
    bool sinks;
    int64_t cap;   /* > Lk: k and v are the first Lk positions of a cache */
    bool dead_row; /* boolean mask: row 0 fully masked */
    int qlayout;
} prefill_case;

static const prefill_case cases[] = {
    /* tensor-core kernel */
    {"d64_513_causal", 1, 4, 4, 513, 513, 64, 64, true, 0, false, 0, false,
     Q_PLAIN},
    {"d128_gqa_100x227_causal", 2, 8, 2, 100, 227, 128, 128, true, 0, false, 0,
     false, Q_PLAIN},
    {"d64_17x70_additive_sinks", 1, 4, 1, 17, 70, 64, 64, false, 1, true, 0,
     false, Q_PLAIN},
    {"d128_100x131_bool_causal", 1, 2, 2, 100, 131, 128, 128, true, 2, false, 0,
     true, Q_PLAIN},
    {"d64_80x33_causal_lq_gt_lk", 1, 2, 1, 80, 33, 64, 64, true, 0, false, 0,
     false, Q_PLAIN},
    {"d128_40x300_cache_causal", 1, 4, 2, 40, 300, 128, 128, true, 1, true, 512,
     false, Q_PLAIN},
    {"d128_1000_causal", 1, 2, 1, 1000, 1000, 128, 128, true, 0, false, 0,
     false, Q_PLAIN},
    {"d64_130_q_transposed", 2, 4, 2, 130, 130, 64, 64, false, 0, false, 0,
     false, Q_TRANSPOSED},
    {"d32_minilm_key_padding", 4, 12, 12, 128, 128, 32, 32, false, 3, false, 0,
     false, Q_PLAIN},
    {"d96_33x77_causal", 1, 2, 1, 33, 77, 96, 96, true, 0, false, 0, false,
     Q_PLAIN},
    /* the old tiled kernel */
    {"fallback_d80", 1, 2, 1, 33, 77, 80, 80, true, 0, false, 0, false,
     Q_PLAIN},
    {"fallback_dv32", 1, 2, 2, 20, 50, 64, 32, false, 2, false, 0, false,
     Q_PLAIN},
    {"fallback_q_odd_stride", 1, 2, 1, 65, 65, 64, 64, true, 0, false, 0, false,
     Q_ODD_STRIDE},
};

static void replace(em_array **a, em_array *b) {
    em_array_release(*a);
    *a = b;
}

/* q as a view: transposed from (B, Lq, H, D), or the first D of D + 1. */
static void make_q(const prefill_case *c, em_dtype dt, em_array **cpu,
                   em_array **gpu) {
    if (c->qlayout == Q_TRANSPOSED) {
        const int64_t s[4] = {c->B, c->Lq, c->H, c->D};
        const int perm[4] = {0, 2, 1, 3};
        *cpu = random_array(dt, s, 4, false, 0);
        die_on(em_to_device(*cpu, GPU, gpu), "to_device");
        em_array *a = NULL, *b = NULL;
        die_on(em_transpose(*cpu, perm, 4, &a), "transpose");
        die_on(em_transpose(*gpu, perm, 4, &b), "transpose");
        replace(cpu, a);
        replace(gpu, b);
    } else if (c->qlayout == Q_ODD_STRIDE) {
        const int64_t s[4] = {c->B, c->H, c->Lq, c->D + 1};
        *cpu = random_array(dt, s, 4, false, 0);
        die_on(em_to_device(*cpu, GPU, gpu), "to_device");
        int64_t start[4] = {0}, stop[4] = {c->B, c->H, c->Lq, c->D},
                step[4] = {1, 1, 1, 1};
        em_array *a = NULL, *b = NULL;
        die_on(em_slice(*cpu, start, stop, step, &a), "slice");
        die_on(em_slice(*gpu, start, stop, step, &b), "slice");
        replace(cpu, a);
        replace(gpu, b);
    } else {
        const int64_t s[4] = {c->B, c->H, c->Lq, c->D};
        *cpu = random_array(dt, s, 4, false, 0);
        die_on(em_to_device(*cpu, GPU, gpu), "to_device");
    }
}

/* Row 0 of head 0 of the GPU result (a fully masked row) is all zeros. */
static void check_dead_row(em_array *gpu, int64_t Dv) {
    double row[256];
    em_array *r = NULL, *f64 = NULL;
    int64_t start[4] = {0}, stop[4] = {1, 1, 1, Dv}, step[4] = {1, 1, 1, 1};
    die_on(em_slice(gpu, start, stop, step, &r), "slice");
    die_on(em_as_type(r, EM_F64, &f64), "as_type");
    bool zero = f64 && em_read(f64, row, sizeof(double) * (size_t)Dv) == EM_OK;
    for (int64_t e = 0; zero && e < Dv; e++)
        zero = row[e] == 0;
    record("attn_prefill", "fully masked row is 0 on the GPU", zero,
           zero ? 0 : INFINITY);
    em_array_release(r);
    em_array_release(f64);
}

/* Causal with Lq > Lk: the first Lq - Lk rows attend to nothing. */
static void check_leading_rows(em_array *gpu, const prefill_case *c) {
    const int64_t n = c->Lq - c->Lk;
    em_array *r = NULL, *f64 = NULL;
    int64_t start[4] = {0}, stop[4] = {c->B, c->H, n, c->Dv},
            step[4] = {1, 1, 1, 1};
    const size_t count = (size_t)(c->B * c->H * n * c->Dv);
    double *vals = malloc(count * sizeof(double));
    die_on(em_slice(gpu, start, stop, step, &r), "slice");
    die_on(em_as_type(r, EM_F64, &f64), "as_type");
    bool zero =
        vals && f64 && em_read(f64, vals, count * sizeof(double)) == EM_OK;
    for (size_t e = 0; zero && e < count; e++)
        zero = vals[e] == 0;
    record("attn_prefill", "causal rows before the first key are 0", zero,
           zero ? 0 : INFINITY);
    free(vals);
    em_array_release(r);
    em_array_release(f64);
}

static void run_case(const prefill_case *c, em_dtype dt) {
    const int64_t cap = c->cap > c->Lk ? c->cap : c->Lk;
    const int64_t ks[4] = {c->B, c->Hkv, cap, c->D},
                  vs[4] = {c->B, c->Hkv, cap, c->Dv};
    em_array *cpu_in[5] = {NULL}, *gpu_in[5] = {NULL};
    make_q(c, dt, &cpu_in[0], &gpu_in[0]);
    cpu_in[1] = random_array(dt, ks, 4, false, 0);
    cpu_in[2] = random_array(dt, vs, 4, false, 0);
    sdpa_random_extras(dt, c->mask, c->dead_row, c->sinks, c->H, c->Lq, c->Lk,
                       cpu_in);
    if (c->mask == 3) { /* batch row b keeps its first Lk - 9b keys */
        const int64_t ms[4] = {c->B, 1, 1, c->Lk};
        const int64_t n = c->B * c->Lk;
        uint8_t *keep = malloc((size_t)n);
        if (!keep)
            die_on(EM_ERR_OOM, "mask");
        for (int64_t i = 0; i < n; i++)
            keep[i] = i % c->Lk < c->Lk - 9 * (i / c->Lk);
        die_on(em_from_data(keep, (size_t)n, ms, 4, EM_PRED, &cpu_in[3]),
               "mask");
        free(keep);
    }
    copy_to_gpu(cpu_in, gpu_in, 1, 5); /* q: make_q */
    if (cap > c->Lk) /* the first Lk positions of the cache, both sides */
        sdpa_cache_views(cpu_in, gpu_in, c->Lk, c->D, c->Dv);
    em_array *cpu = NULL, *gpu = NULL;
    em_array *const *ins[2] = {cpu_in, gpu_in};
    em_array **outs[2] = {&cpu, &gpu};
    for (int s = 0; s < 2; s++) {
        em_sdpa_options o = {0, c->causal, ins[s][3], ins[s][4]};
        die_on(em_sdpa(ins[s][0], ins[s][1], ins[s][2], &o, outs[s]), c->name);
    }
    char what[96];
    snprintf(what, sizeof what, "sdpa prefill %s %s", c->name,
             em_dtype_name(dt));
    double worst = compare_floor(cpu, gpu, what, 4, 1.0);
    record("attn_prefill", what, worst <= 1, worst);
    if (c->dead_row)
        check_dead_row(gpu, c->Dv);
    if (c->causal && c->Lq > c->Lk)
        check_leading_rows(gpu, c);
    em_array_release(cpu);
    em_array_release(gpu);
    for (int i = 0; i < 5; i++) {
        em_array_release(cpu_in[i]);
        em_array_release(gpu_in[i]);
    }
}

void test_attention_prefill(void) {
    const em_dtype dts[] = {EM_BF16, EM_F16, EM_F32};
    for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
        if (skip_dtype(dts[t]))
            continue;
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            run_case(&cases[i], dts[t]);
    }
}
