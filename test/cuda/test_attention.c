/*
 * test_attention.c — em_sdpa on the GPU against the CPU kernel on the same
 * random inputs: the tiled prefill kernel and the split-key decode kernel
 * (Lq = 1 and 4 over 4096 keys) plus its combine step, grouped-query heads,
 * causal limits with Lq != Lk, both mask kinds broadcast from smaller
 * shapes, sinks, fully masked rows (0 on both), and K/V read through a
 * slice of a longer cache. Floats within a few ulp of the output's scale
 * (the two sum the scores and weights in other orders; halves compute in
 * f32 on both and round once).
 */
#include "cuda_test.h"
#include "emily_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sdpa_case {
    const char *name;
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    bool causal;
    int mask; /* 0 none, 1 additive (1, H, Lq, Lk), 2 boolean (Lq, Lk) */
    bool sinks;
    int64_t cap;   /* > Lk: k and v are the first Lk positions of a cache */
    bool dead_row; /* boolean mask: row 0 fully masked */
} sdpa_case;

static const sdpa_case cases[] = {
    {"prefill", 2, 4, 2, 37, 37, 64, 64, true, 0, false, 0, false},
    {"prefill_lq_lt_lk", 1, 8, 2, 20, 100, 32, 48, true, 1, true, 0, false},
    {"prefill_lq_gt_lk", 1, 2, 1, 9, 5, 16, 16, true, 0, false, 0, false},
    {"prefill_bool_mask", 1, 4, 4, 17, 40, 128, 128, false, 2, false, 0, true},
    {"decode_4k", 1, 16, 8, 1, 4096, 128, 128, false, 0, false, 0, false},
    {"decode_4k_cache", 1, 16, 8, 1, 4000, 128, 128, false, 0, true, 4096,
     false},
    {"decode_lq4_causal", 2, 4, 1, 4, 4096, 64, 64, true, 1, false, 0, false},
    {"decode_bool_dead", 1, 2, 2, 1, 3000, 32, 32, false, 2, true, 0, true},
    {"head_dim_256", 1, 2, 1, 5, 50, 256, 256, false, 0, false, 0, false},
};

static void sdpa_pair(em_array *const *cpu_in, em_array *const *gpu_in,
                      const sdpa_case *c, em_array **cpu, em_array **gpu) {
    em_array *const *ins[2] = {cpu_in, gpu_in};
    em_array **outs[2] = {cpu, gpu};
    for (int s = 0; s < 2; s++) {
        em_sdpa_options o = {0, c->causal, NULL, NULL};
        o.mask = ins[s][3];
        o.sinks = ins[s][4];
        *outs[s] = NULL;
        die_on(em_sdpa(ins[s][0], ins[s][1], ins[s][2], &o, outs[s]), c->name);
    }
}

static void run_case(const sdpa_case *c, em_dtype dt) {
    const int64_t cap = c->cap > c->Lk ? c->cap : c->Lk;
    const int64_t qs[4] = {c->B, c->H, c->Lq, c->D},
                  ks[4] = {c->B, c->Hkv, cap, c->D},
                  vs[4] = {c->B, c->Hkv, cap, c->Dv};
    em_array *cpu_in[5] = {NULL}, *gpu_in[5] = {NULL};
    cpu_in[0] = random_array(dt, qs, 4, false, 0);
    cpu_in[1] = random_array(dt, ks, 4, false, 0);
    cpu_in[2] = random_array(dt, vs, 4, false, 0);
    sdpa_random_extras(dt, c->mask, c->dead_row, c->sinks, c->H, c->Lq, c->Lk,
                       cpu_in);
    copy_to_gpu(cpu_in, gpu_in, 0, 5);
    if (cap > c->Lk) /* the first Lk positions of the cache, both sides */
        sdpa_cache_views(cpu_in, gpu_in, c->Lk, c->D, c->Dv);
    em_array *cpu = NULL, *gpu = NULL;
    sdpa_pair(cpu_in, gpu_in, c, &cpu, &gpu);
    char what[96];
    snprintf(what, sizeof what, "sdpa %s %s", c->name, em_dtype_name(dt));
    if (cpu && gpu) {
        /* relative to |out| + 1: outputs are averages of values in [-3, 3] */
        double worst = compare_floor(cpu, gpu, what, 4, 1.0);
        record("attention", what, worst <= 1, worst);
        if (c->dead_row) { /* row 0 of head 0 attends to nothing: 0 */
            double row[256];
            em_array *r = NULL;
            int64_t start[4] = {0}, stop[4] = {1, 1, 1, c->Dv},
                    step[4] = {1, 1, 1, 1};
            em_array *f64 = NULL;
            die_on(em_slice(gpu, start, stop, step, &r), "slice");
            die_on(em_as_type(r, EM_F64, &f64), "as_type");
            bool zero = f64 && em_read(f64, row,
                                       sizeof(double) * (size_t)c->Dv) == EM_OK;
            for (int64_t e = 0; zero && e < c->Dv; e++)
                zero = row[e] == 0;
            record("attention", "fully masked row is 0 on the GPU", zero,
                   zero ? 0 : INFINITY);
            em_array_release(r);
            em_array_release(f64);
        }
    } else {
        record("attention", what, false, INFINITY);
    }
    em_array_release(cpu);
    em_array_release(gpu);
    for (int i = 0; i < 5; i++) {
        em_array_release(cpu_in[i]);
        em_array_release(gpu_in[i]);
    }
}

void test_attention(void) {
    const em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_BF16};
    for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
        if (skip_dtype(dts[t]))
            continue;
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            run_case(&cases[i], dts[t]);
    }
}
