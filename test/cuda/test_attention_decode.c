/*
 * test_attention_decode.c — em_sdpa's decode path on the GPU (Lq <= 16:
 * attention_decode.cu's grouped-head flash-decoding kernel) against the CPU
 * kernel on the same random inputs: grouped-query ratios 1, 2 and 8, odd
 * cache lengths (short ones: one chunk; long ones: split and combined),
 * Lq from 1 to 16 with the causal limit, both mask kinds broadcast from
 * smaller shapes, sinks, a fully masked row (0 on both), head dimensions
 * 64, 128 and 256, batches, K and V read through a slice of a longer cache
 * (aligned rows: the decode kernel), and a layout it declines (rows of 130
 * elements cut to 128: not 16-byte aligned, the general kernel), in f32,
 * f16 and bf16. The split schedule's classes (comments give the chunk
 * count on a 132-SM GPU; the code picks it from the SM count): one chunk,
 * chunks combined in-launch by a cluster (up to 8, the last one shorter),
 * more chunks merged by the combine kernel (over 32: lanes loop over
 * them), and a boolean window mask that masks whole chunks. Within a few ulp of the output's scale (the two sum in
 * other orders; halves compute in f32 on both and round once).
 */
#include "cuda_test.h"
#include "emily_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct decode_case {
    const char *name;
    int64_t B, H, Hkv, Lq, Lk, D;
    bool causal;
    /* 0 none, 1 additive (1, H, Lq, Lk), 2 boolean (Lq, Lk), 3 boolean
     * (Lq, Lk) that masks keys [Lk / 4, 3 Lk / 4): whole chunks */
    int mask;
    bool sinks;
    int64_t cap;   /* > Lk: k and v are the first Lk positions of a cache */
    int64_t width; /* > D: k and v are the first D features of wider rows */
    bool dead_row; /* boolean mask: row 0 fully masked */
} decode_case;

static const decode_case cases[] = {
    {"mha_short", 1, 4, 4, 1, 37, 64, false, 0, false, 0, 0, false},
    {"gqa2_odd", 1, 16, 8, 1, 1023, 128, false, 0, false, 0, 0, false},
    {"gqa2_long_batch", 3, 16, 8, 1, 4099, 128, false, 0, false, 0, 0, false},
    {"gqa8_odd", 2, 16, 2, 1, 777, 128, false, 0, false, 0, 0, false},
    {"gqa8_sinks", 1, 8, 1, 1, 2000, 64, false, 0, true, 0, 0, false},
    {"spec_lq5_causal", 1, 16, 8, 5, 1531, 128, true, 0, false, 0, 0, false},
    {"spec_lq16_causal_mask", 2, 8, 2, 16, 300, 128, true, 1, false, 0, 0,
     false},
    {"lq3_bool_dead", 1, 4, 2, 3, 2501, 64, false, 2, true, 0, 0, true},
    {"d256", 1, 4, 1, 2, 999, 256, false, 0, false, 0, 0, false},
    {"cache_slice", 2, 16, 8, 1, 1500, 128, false, 0, false, 2048, 0, false},
    {"short_cache_one_key", 1, 16, 8, 1, 1, 128, false, 0, false, 0, 0, false},
    {"unaligned_rows_general", 1, 16, 8, 1, 700, 128, false, 0, false, 0, 130,
     false},
    /* 8 chunks of 64 in one cluster (the Qwen3 layer's shape) */
    {"cluster_l512", 1, 16, 8, 1, 512, 128, false, 0, false, 0, 0, false},
    /* 8 chunks of 65, the last 60 */
    {"cluster_l515", 1, 16, 8, 1, 515, 128, false, 0, false, 0, 0, false},
    /* B 4: 8 chunks of 76, the last 69 */
    {"cluster_b4_l601", 4, 16, 8, 1, 601, 128, false, 0, false, 0, 0, false},
    /* B 16: 2 chunks of 256 */
    {"cluster_b16_l512", 16, 16, 8, 1, 512, 128, false, 0, false, 0, 0, false},
    /* 264 chunks of 76 over one KV head: the combine kernel, > 32 chunks */
    {"combine_many_d64", 1, 4, 1, 1, 20000, 64, false, 0, false, 0, 0, false},
    /* 79 chunks, head dimension 256 in the combine kernel */
    {"combine_d256", 1, 8, 2, 1, 5000, 256, false, 0, true, 0, 0, false},
    /* B 2: 16 chunks of 512, the last 511 */
    {"combine_b2", 2, 16, 8, 1, 8191, 128, false, 0, false, 0, 0, false},
    /* chunks 2-5 of 8 fully masked, with sinks */
    {"cluster_masked_chunks", 1, 16, 8, 1, 512, 128, false, 3, true, 0, 0,
     false},
    /* 94 chunks, half of them fully masked, 2 query positions, causal */
    {"combine_masked_chunks", 1, 4, 1, 2, 6000, 128, true, 3, false, 0, 0,
     false},
};

/* Keep keys outside [lk / 4, 3 lk / 4) for every query position. */
static em_array *window_keep_mask(int64_t lq, int64_t lk) {
    const int64_t shape[2] = {lq, lk}, n = lq * lk;
    uint8_t *keep = malloc((size_t)(n ? n : 1));
    if (!keep)
        die_on(EM_ERR_OOM, "mask");
    for (int64_t i = 0; i < n; i++)
        keep[i] = i % lk < lk / 4 || i % lk >= 3 * lk / 4;
    em_array *mask = NULL;
    die_on(em_from_data(keep, (size_t)n, shape, 2, EM_PRED, &mask), "mask");
    free(keep);
    return mask;
}

static void run_case(const decode_case *c, em_dtype dt) {
    const int64_t cap = c->cap > c->Lk ? c->cap : c->Lk;
    const int64_t width = c->width > c->D ? c->width : c->D;
    const int64_t qs[4] = {c->B, c->H, c->Lq, c->D},
                  ks[4] = {c->B, c->Hkv, cap, width};
    em_array *cpu_in[5] = {NULL}, *gpu_in[5] = {NULL};
    cpu_in[0] = random_array(dt, qs, 4, false, 0);
    cpu_in[1] = random_array(dt, ks, 4, false, 0);
    cpu_in[2] = random_array(dt, ks, 4, false, 0);
    sdpa_random_extras(dt, c->mask == 3 ? 0 : c->mask, c->dead_row, c->sinks,
                       c->H, c->Lq, c->Lk, cpu_in);
    if (c->mask == 3)
        cpu_in[3] = window_keep_mask(c->Lq, c->Lk);
    copy_to_gpu(cpu_in, gpu_in, 0, 5);
    /* the decode kernel reads K / V through views of a longer, wider cache */
    if (cap > c->Lk || width > c->D)
        sdpa_cache_views(cpu_in, gpu_in, c->Lk, c->D, c->D);
    em_array *out[2] = {NULL, NULL};
    em_array *const *ins[2] = {cpu_in, gpu_in};
    for (int s = 0; s < 2; s++) {
        em_sdpa_options o = {0, c->causal, ins[s][3], ins[s][4]};
        die_on(em_sdpa(ins[s][0], ins[s][1], ins[s][2], &o, &out[s]), c->name);
    }
    char what[96];
    snprintf(what, sizeof what, "sdpa decode %s %s", c->name,
             em_dtype_name(dt));
    if (out[0] && out[1]) {
        /* relative to |out| + 1: outputs are averages of values in [-3, 3] */
        double worst = compare_floor(out[0], out[1], what, 4, 1.0);
        record("attention_decode", what, worst <= 1, worst);
        if (c->dead_row) { /* row 0 of head 0 attends to nothing: 0 */
            double row[256];
            int64_t start[4] = {0}, stop[4] = {1, 1, 1, c->D},
                    step[4] = {1, 1, 1, 1};
            em_array *r = NULL, *f64 = NULL;
            die_on(em_slice(out[1], start, stop, step, &r), "slice");
            die_on(em_as_type(r, EM_F64, &f64), "as_type");
            bool zero = f64 && em_read(f64, row,
                                       sizeof(double) * (size_t)c->D) == EM_OK;
            for (int64_t e = 0; zero && e < c->D; e++)
                zero = row[e] == 0;
            record("attention_decode", "decode: fully masked row is 0", zero,
                   zero ? 0 : INFINITY);
            em_array_release(r);
            em_array_release(f64);
        }
    } else {
        record("attention_decode", what, false, INFINITY);
    }
    for (int s = 0; s < 2; s++)
        em_array_release(out[s]);
    for (int i = 0; i < 5; i++) {
        em_array_release(cpu_in[i]);
        em_array_release(gpu_in[i]);
    }
}

void test_attention_decode(void) {
    const em_dtype dts[] = {EM_F32, EM_F16, EM_BF16};
    for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
        if (skip_dtype(dts[t]))
            continue;
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            run_case(&cases[i], dts[t]);
    }
}
