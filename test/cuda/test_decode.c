/*
 * test_decode.c — em_fast_linear on the GPU (decode.cu) against the CPU
 * kernel on the same random inputs: the decode shapes (1024 x 2048 and
 * friends) at batch 1, 4 and 16, odd sizes, more rows than one tile (20),
 * K not a multiple of the 16-byte vector (element loads), 3-D x, more row
 * groups than a wave (grid-stride, one warp or a team of warps per row),
 * teams of 6 warps, rows read in several rounds, and each epilogue: RMS
 * prologue with and without weight, SiLU gate, residual; in
 * f32, f64, f16 and bf16. Both sides accumulate in f32 (f64) in other
 * orders and round once: within a few ulp of the result's scale (the
 * floor: the size of a sum of K products of values in [-3, 3]).
 * em_fast_heads likewise: q / k / v of a fused product's output at batch 1,
 * 4 and 16, several positions (speculative), partial and traditional
 * rotation, no norm weight, head_dim 256, large offsets; and its cache
 * form (k and v written into a (B, count, L, head_dim) cache at a start
 * in the middle, at the end, and clamped from above and below), with the
 * cache kept by the caller (copied; the caller's GPU cache must keep its
 * values) and given up before the evaluation (updated in place).
 */
#include "cuda_test.h"
#include "emily_fast.h"

#include <math.h>
#include <stdio.h>

typedef struct linear_case {
    const char *name;
    int64_t M, N, K;
    bool norm, norm_weight, gate, residual, three_d;
} linear_case;

static const linear_case cases[] = {
    {"qkv_b1_norm", 1, 2048, 1024, true, true, false, false, true},
    {"o_b4_residual", 4, 1024, 2048, false, false, false, true, true},
    {"gate_up_b16_norm", 16, 3072, 1024, true, true, true, false, true},
    {"down_b1_residual", 1, 1024, 3072, false, false, false, true, false},
    {"plain_b16", 16, 1024, 1024, false, false, false, false, false},
    {"odd_rows_norm_no_weight", 5, 37, 136, true, false, false, true, false},
    {"tiles_20_gate", 20, 64, 256, false, false, true, true, false},
    {"k_unaligned", 3, 33, 1001, true, true, true, true, false},
    /* more row groups than one wave of blocks: the grid-stride loop, with
     * one warp per row (K 256) and a team of warps per row (K 1024 at 8
     * rows of x: their sums meet in double-buffered shared memory) */
    {"grid_stride_b1", 1, 20001, 256, true, false, false, false, false},
    {"grid_stride_split_b8", 8, 8001, 1024, true, true, false, true, false},
    /* teams that do not divide the block's 8 warps (bf16: 375 pieces of 16
     * bytes per row, 3 warps widened to 6), gated */
    {"gate_split6_b2", 2, 300, 3000, true, true, true, true, false},
    /* K longer than a full team's round: rows read in several rounds */
    {"long_k_rounds", 1, 40, 9000, true, true, true, true, false},
};

static void run_case(const linear_case *c, em_dtype dt) {
    const int64_t xs3[3] = {c->M, 1, c->K}, xs2[2] = {c->M, c->K};
    const int64_t rs3[3] = {c->M, 1, c->N}, rs2[2] = {c->M, c->N};
    const int64_t ws[2] = {c->N, c->K}, ns[1] = {c->K};
    const int nd = c->three_d ? 3 : 2;
    em_array *cpu[5] = {NULL}, *gpu[5] = {NULL};
    cpu[0] = random_array(dt, c->three_d ? xs3 : xs2, nd, false, 0);
    cpu[1] = random_array(dt, ws, 2, false, 0);
    if (c->norm_weight)
        cpu[2] = random_array(dt, ns, 1, false, 0);
    if (c->gate)
        cpu[3] = random_array(dt, ws, 2, false, 0);
    if (c->residual)
        cpu[4] = random_array(dt, c->three_d ? rs3 : rs2, nd, false, 0);
    for (int i = 0; i < 5; i++)
        if (cpu[i])
            die_on(em_to_device(cpu[i], GPU, &gpu[i]), "to_device");
    em_array *out[2] = {NULL, NULL};
    em_array **ins[2] = {cpu, gpu};
    for (int s = 0; s < 2; s++) {
        em_fast_linear_options o = {.norm = c->norm,
                                    .norm_weight = ins[s][2],
                                    .eps = 1e-6,
                                    .gate = ins[s][3],
                                    .residual = ins[s][4]};
        die_on(em_fast_linear(ins[s][0], ins[s][1], &o, &out[s]), c->name);
    }
    char what[96];
    snprintf(what, sizeof what, "fast_linear %s %s", c->name,
             em_dtype_name(dt));
    if (out[0] && out[1]) {
        double worst =
            compare_floor(out[0], out[1], what, 8, 9.0 * sqrt((double)c->K));
        record("decode", what, worst <= 1, worst);
    } else {
        record("decode", what, false, INFINITY);
    }
    for (int s = 0; s < 2; s++)
        em_array_release(out[s]);
    for (int i = 0; i < 5; i++) {
        em_array_release(cpu[i]);
        em_array_release(gpu[i]);
    }
}

typedef struct heads_case {
    const char *name;
    int64_t B, S, N, D, first, count;
    bool norm, weight;
    int64_t dims; /* 0: no rotation */
    bool traditional;
    int64_t offset;
    int64_t L, start; /* L > 0: written into a cache of L rows at start */
} heads_case;

static const heads_case heads_cases[] = {
    {"q_qwen3", 1, 1, 4096, 128, 0, 16, true, true, 128, false, 511, 0, 0},
    {"k_qwen3_b4", 4, 1, 4096, 128, 16, 8, true, true, 128, false, 8191, 0, 0},
    {"v_plain", 16, 1, 4096, 128, 24, 8, false, false, 0, false, 0, 0, 0},
    {"spec_s5_partial_traditional", 2, 5, 200, 40, 1, 3, true, false, 24, true,
     7, 0, 0},
    {"d256", 1, 3, 512, 256, 1, 1, true, true, 256, false, 100000, 0, 0},
    /* the cache form: the decode step's k and v at pos, the last row, a
     * speculative step clamped from above (start 14 -> 11 of L = 16) and
     * from below */
    {"k_cache_b4_mid", 4, 1, 4096, 128, 16, 8, true, true, 128, false, 40, 64,
     40},
    {"v_cache_b16_last", 16, 1, 4096, 128, 24, 8, false, false, 0, false, 0, 64,
     63},
    {"spec_s5_cache_clamped_high", 2, 5, 200, 40, 1, 3, true, false, 24, true,
     14, 16, 14},
    {"cache_clamped_low_d256", 1, 3, 512, 256, 1, 1, true, true, 256, false, 3,
     8, -5},
};

/* The CPU and GPU caches of a cache case (random, the same values) and
 * their cache_offset, evaluated: then only the caller holds them. */
static void heads_caches(const heads_case *c, em_dtype dt, em_array **cache,
                         em_array **coff) {
    const int64_t cs[4] = {c->B, c->count, c->L, c->D};
    cache[0] = random_array(dt, cs, 4, false, 0);
    die_on(em_scalar_s64(c->start, EM_S64, &coff[0]), "cache_offset");
    die_on(em_to_device(cache[0], GPU, &cache[1]), "to_device");
    die_on(em_to_device(coff[0], GPU, &coff[1]), "to_device");
    die_on(em_eval(&cache[1], 1), "eval");
}

/* One case on both sides; with a cache (c->L > 0) donated or kept. */
static void run_heads(const heads_case *c, em_dtype dt, bool donate) {
    const int64_t xs[3] = {c->B, c->S, c->N}, ns[1] = {c->D};
    em_array *x = random_array(dt, xs, 3, false, 0), *nw = NULL, *off = NULL;
    if (c->weight)
        nw = random_array(dt, ns, 1, false, 0);
    die_on(em_scalar_s64(c->offset, EM_S32, &off), "offset");
    em_array *gx = NULL, *gnw = NULL, *goff = NULL;
    die_on(em_to_device(x, GPU, &gx), "to_device");
    if (nw)
        die_on(em_to_device(nw, GPU, &gnw), "to_device");
    die_on(em_to_device(off, GPU, &goff), "to_device");
    em_array *cache[2] = {NULL, NULL}, *coff[2] = {NULL, NULL};
    if (c->L)
        heads_caches(c, dt, cache, coff);
    em_array *out[2] = {NULL, NULL};
    em_array *xin[2] = {x, gx}, *nin[2] = {nw, gnw}, *oin[2] = {off, goff};
    for (int s = 0; s < 2; s++) {
        em_fast_heads_options o = {.head_dim = c->D,
                                   .first = c->first,
                                   .count = c->count,
                                   .norm = c->norm,
                                   .norm_weight = nin[s],
                                   .eps = 1e-6,
                                   .offset = c->dims ? oin[s] : NULL,
                                   .rope = {.dims = c->dims,
                                            .traditional = c->traditional,
                                            .base = 1e6},
                                   .cache = cache[s],
                                   .cache_offset = coff[s]};
        die_on(em_fast_heads(xin[s], &o, &out[s]), c->name);
    }
    if (donate) { /* the nodes are now the caches' only holders */
        for (int s = 0; s < 2; s++) {
            em_array_release(cache[s]);
            cache[s] = NULL;
        }
    }
    char what[96];
    snprintf(what, sizeof what, "fast_heads %s%s %s", c->name,
             !c->L    ? ""
             : donate ? " donated"
                      : " kept",
             em_dtype_name(dt));
    if (out[0] && out[1]) {
        /* values up to ~3 * 3 (normed rows times weights): floor 1; a
         * rotation angle of position p is known to an ulp of p, which
         * moves the rotated value by as much (glibc's and CUDA's sin / cos
         * differ there at large offsets): floor p then. */
        double floor = c->dims && c->offset > 1 ? (double)c->offset : 1.0;
        double worst = compare_floor(out[0], out[1], what, 4, floor);
        record("decode", what, worst <= 1, worst);
    } else {
        record("decode", what, false, INFINITY);
    }
    if (cache[1]) { /* kept (out was read): copied, not written */
        char kept[128];
        snprintf(kept, sizeof kept, "%s: the caller's cache", what);
        double worst = compare(cache[0], cache[1], kept, 1);
        record("decode", kept, worst <= 1, worst);
    }
    em_array *all[] = {x,        nw,       off,     gx,      gnw,    goff,
                       cache[0], cache[1], coff[0], coff[1], out[0], out[1]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        em_array_release(all[i]);
}

void test_decode(void) {
    const em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_BF16};
    for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
        if (skip_dtype(dts[t]))
            continue;
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            /* f16: a gated product over long rows of values in [-3, 3]
             * reaches f16's overflow (~1e4 x 1e1), where an Inf on one side
             * and 65504 on the other would be a rounding accident */
            if (dts[t] == EM_F16 && cases[i].gate && cases[i].K > 256)
                continue;
            run_case(&cases[i], dts[t]);
        }
        for (size_t i = 0; i < sizeof heads_cases / sizeof *heads_cases; i++) {
            run_heads(&heads_cases[i], dts[t], false);
            if (heads_cases[i].L)
                run_heads(&heads_cases[i], dts[t], true);
        }
    }
}
