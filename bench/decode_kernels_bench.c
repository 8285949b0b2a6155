/*
 * decode_kernels_bench.c — the decode path's kernels alone, timed from C
 * with CUDA events after warm-up (cuda_bench_common.h's time_op):
 *
 *   linear_<N>x<K>[_gate]_b<B>   em_fast_linear, bf16, weights (N, K) a row
 *                                per output (the gated one reads two), B
 *                                rows of x; figure: weight GB/s. Also
 *                                timed queued (_q): see time_queued
 *   sdpa_decode_b<B>_kv<L>       em_sdpa, bf16, 16 query / 8 KV heads of
 *                                128, one query per sequence over L keys;
 *                                figure: K/V GB/s
 *
 *   make -j2 cuda build/decode_kernels_bench
 *   python3 bench/decode_kernels_torch.py build/decode_kernels_bench
 *
 * Prints "RESULT <name> <median ms> <GB/s> GB/s" lines; the Python script
 * times the same cases in PyTorch (x @ w.t(), F.scaled_dot_product_attention
 * with enable_gqa) and prints both with ratios.
 */
#include "cuda_bench_common.h"
#include "emily_attention.h"
#include "emily_fast.h"

#include <stdio.h>
#include <string.h>

static em_array *gate_arg;

static em_status op_linear(em_array *const *in, em_array **out) {
    em_fast_linear_options o = {.gate = gate_arg};
    return em_fast_linear(in[0], in[1], &o, out);
}

static em_status op_sdpa(em_array *const *in, em_array **out) {
    return em_sdpa(in[0], in[1], in[2], NULL, out);
}

/* A bf16 array of 256 MB on the GPU whose negation (~150 us) keeps the GPU
 * busy while the host builds and launches the case: the events then time
 * the kernel alone, not the host's build + launch (a few us, as long as a
 * decode-sized product), and the negation evicts the weights from L2 (50
 * MB), so they come from HBM as in a decode step. */
static em_array *filler;

static void result(const char *name, double ms, double bytes) {
    printf("RESULT %s %.4f %.1f GB/s\n", name, ms, bytes / (ms * 1e-3) / 1e9);
    fflush(stdout);
}

int main(void) {
    const char *reason = NULL;
    if (!em_device_available(GPU, &reason)) {
        printf("skipped: %s\n", reason ? reason : "no GPU");
        return 0;
    }
    const int64_t fs[1] = {(int64_t)1 << 27};
    filler = random_gpu(fs, 1, EM_BF16);
    /* (N, K, gated): q/k/v stacked, o, gate+up, down, the LM head */
    const int64_t shapes[][3] = {{4096, 1024, 0}, {1024, 2048, 0},
                                 {3072, 1024, 1}, {1024, 3072, 0},
                                 {151936, 1024, 0}};
    const int64_t batches[] = {1, 4, 16};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t N = shapes[s][0], K = shapes[s][1];
        const int64_t ws[2] = {N, K};
        em_array *w = random_gpu(ws, 2, EM_BF16);
        gate_arg = shapes[s][2] ? random_gpu(ws, 2, EM_BF16) : NULL;
        for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
            const int64_t xs[2] = {batches[b], K};
            em_array *in[2] = {random_gpu(xs, 2, EM_BF16), w};
            const double bytes = (gate_arg ? 2.0 : 1.0) * (double)(N * K) * 2;
            char name[96];
            snprintf(name, sizeof name, "linear_%lldx%lld%s_b%lld",
                     (long long)N, (long long)K, gate_arg ? "_gate" : "",
                     (long long)batches[b]);
            result(name, time_op(op_linear, in), bytes);
            strcat(name, "_q");
            result(name, time_op_behind(op_linear, in, filler), bytes);
            em_array_release(in[0]);
        }
        em_array_release(w);
        em_array_release(gate_arg);
        gate_arg = NULL;
    }
    em_array_release(filler);
    const int64_t lens[] = {512, 4096, 32768};
    for (size_t b = 0; b < sizeof batches / sizeof *batches; b++)
        for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
            const int64_t B = batches[b], L = lens[l];
            if (B * L > 16 * 4096)
                continue; /* keep the K/V under 2 GB */
            const int64_t qs[4] = {B, 16, 1, 128}, ks[4] = {B, 8, L, 128};
            em_array *in[3] = {random_gpu(qs, 4, EM_BF16),
                               random_gpu(ks, 4, EM_BF16),
                               random_gpu(ks, 4, EM_BF16)};
            const double t = time_op(op_sdpa, in);
            char name[96];
            snprintf(name, sizeof name, "sdpa_decode_b%lld_kv%lld",
                     (long long)B, (long long)L);
            result(name, t, 2.0 * (double)(B * 8 * L * 128) * 2);
            for (int i = 0; i < 3; i++)
                em_array_release(in[i]);
        }
    return 0;
}
