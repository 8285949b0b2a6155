/*
 * test_ggml.c — the ggml block formats on the GPU against the CPU backend
 * (include/emily_ggml.h): the same random blocks (random bytes, with the
 * half-precision scales drawn finite) on both sides.
 *
 * Dequantization must agree bit for bit (both compute each weight with the
 * same f32 operations, unfused). Products: ||gpu - cpu|| / ||cpu|| within
 * a few f32 (f16, bf16) roundings, since the sums run in other orders; m =
 * 1..16 take the streaming matrix-vector kernels (ggml_matvec.cu; m = 1
 * and m > 1 are separate instantiations), m = 17 the decode + cuBLAS
 * path. Shapes: k = 576 (SmolLM2's hidden size: rows whose blocks start
 * on no 16-byte boundary; 32-weight formats only), k = 8192 with few rows
 * (several warps per row, reduced through shared memory), 1101 rows of
 * k = 1024 (several rows per CTA, the last CTA partly idle), and x at an
 * odd element offset (the kernels' unvectorized loads of x).
 */
#include "cuda_test.h"
#include "emily_ggml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int types[] = {EM_GGML_Q4_0, EM_GGML_Q4_1, EM_GGML_Q5_0,
                            EM_GGML_Q5_1, EM_GGML_Q8_0, EM_GGML_Q4_K,
                            EM_GGML_Q5_K, EM_GGML_Q6_K};

/* Random (n, k) blocks of `type` on the CPU. */
static em_array *random_blocks(int type, int64_t n, int64_t k) {
    int64_t be, bb;
    die_on(em_ggml_type_info(type, &be, &bb), "type_info");
    const int64_t row = k / be * bb, nbytes = n * row;
    uint8_t *raw = malloc((size_t)(nbytes > 0 ? nbytes : 1));
    for (int64_t i = 0; i < nbytes; i++)
        raw[i] = (uint8_t)next_u64();
    /* Halves with exponent bits 0b01000..0b01011 (2^-7 .. 2^-4), any sign
     * and mantissa; q6_k keeps d at its end, the others d (and m/dmin)
     * first. */
    const bool second = type == EM_GGML_Q4_1 || type == EM_GGML_Q5_1 ||
                        type == EM_GGML_Q4_K || type == EM_GGML_Q5_K;
    for (int64_t b = 0; b < nbytes / bb; b++) {
        uint8_t *blk = raw + b * bb;
        uint8_t *d = blk + (type == EM_GGML_Q6_K ? 208 : 0);
        d[1] = (uint8_t)((d[1] & 0x83) | 0x20);
        if (second)
            blk[3] = (uint8_t)((blk[3] & 0x83) | 0x20);
    }
    const int64_t shape[2] = {n, row};
    em_array *a = NULL;
    die_on(em_from_data(raw, (size_t)nbytes, shape, 2, EM_U8, &a), "from_data");
    free(raw);
    return a;
}

/* The bytes of an array (read back to the host); malloc'ed. */
static void *bytes_of(em_array *a, size_t *n) {
    *n = em_array_nbytes(a);
    void *p = malloc(*n ? *n : 1);
    die_on(em_read(a, p, *n), "read");
    return p;
}

static void check_dequantize(int type, em_array *raw, em_array *raw_gpu,
                             int64_t k) {
    static const em_dtype dts[] = {EM_F32, EM_F16, EM_BF16, EM_F64};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        em_array *cpu = NULL, *gpu = NULL;
        die_on(em_ggml_dequantize(raw, type, k, dts[t], &cpu), "dequantize");
        die_on(em_ggml_dequantize(raw_gpu, type, k, dts[t], &gpu),
               "dequantize gpu");
        char what[96];
        snprintf(what, sizeof what, "dequantize %s k=%lld to %s",
                 em_ggml_type_name(type), (long long)k, em_dtype_name(dts[t]));
        if (cpu && gpu) {
            size_t nc, ng;
            void *bc = bytes_of(cpu, &nc), *bg = bytes_of(gpu, &ng);
            bool same = nc == ng && memcmp(bc, bg, nc) == 0;
            record("ggml", what, same, same ? 0 : INFINITY);
            free(bc);
            free(bg);
        }
        em_array_release(cpu);
        em_array_release(gpu);
    }
}

/* x (m, k) of dtype dt on the GPU: a fresh array, or (offset) a view one
 * element into a longer one, so that its rows start on no 16-byte
 * boundary. *host: the same values on the CPU. */
static em_array *gpu_x(em_dtype dt, int64_t m, int64_t k, bool offset,
                       em_array **host) {
    const int64_t flat[1] = {m * k + 1}, xs[2] = {m, k};
    em_array *base = random_array(dt, offset ? flat : xs, offset ? 1 : 2, false, 0);
    em_array *bg = NULL, *xg = NULL, *sl = NULL, *sg = NULL;
    die_on(em_to_device(base, GPU, &bg), "to_device");
    if (!offset) {
        *host = base;
        return bg;
    }
    const int64_t start[1] = {1}, stop[1] = {m * k + 1}, step[1] = {1};
    die_on(em_slice(base, start, stop, step, &sl), "slice");
    die_on(em_reshape(sl, xs, 2, host), "reshape");
    die_on(em_slice(bg, start, stop, step, &sg), "slice gpu");
    die_on(em_reshape(sg, xs, 2, &xg), "reshape gpu");
    em_array_release(sl);
    em_array_release(sg);
    em_array_release(bg);
    em_array_release(base);
    return xg;
}

static void check_matmul_at(int type, em_array *raw, em_array *raw_gpu,
                            int64_t k, int64_t m, em_dtype dt, bool offset) {
    em_array *x = NULL, *xg = gpu_x(dt, m, k, offset, &x);
    em_array *cpu = NULL, *gpu = NULL;
    die_on(em_ggml_matmul(x, raw, type, k, &cpu), "matmul");
    die_on(em_ggml_matmul(xg, raw_gpu, type, k, &gpu), "matmul gpu");
    char what[96];
    snprintf(what, sizeof what, "matmul %s m=%lld k=%lld %s%s",
             em_ggml_type_name(type), (long long)m, (long long)k,
             em_dtype_name(dt), offset ? " x offset" : "");
    if (cpu && gpu) {
        /* f32: a few roundings of a K-term sum; halves: the output's. */
        double tol = dt == EM_F32 ? 1e-5 : dt == EM_F16 ? 2e-3 : 1.6e-2;
        double worst = compare_norm(cpu, gpu, tol);
        record("ggml", what, worst <= 1, worst);
    }
    em_array_release(cpu);
    em_array_release(gpu);
    em_array_release(xg);
    em_array_release(x);
}

static void check_matmul(int type, em_array *raw, em_array *raw_gpu,
                         int64_t k, int64_t m, em_dtype dt) {
    check_matmul_at(type, raw, raw_gpu, k, m, dt, false);
}

void test_ggml(void) {
    static const int64_t shapes[][2] = {{37, 512}, {5, 768}, {9, 576}, {3, 8192}, {1101, 1024}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int64_t n = shapes[s][0], k = shapes[s][1];
            int64_t be, bb;
            die_on(em_ggml_type_info(types[t], &be, &bb), "type_info");
            if (k % be != 0)
                continue;
            em_array *raw = random_blocks(types[t], n, k), *raw_gpu = NULL;
            die_on(em_to_device(raw, GPU, &raw_gpu), "to_device");
            check_dequantize(types[t], raw, raw_gpu, k);
            static const int64_t ms[] = {1, 3, 16, 17};
            for (size_t i = 0; i < 4; i++)
                check_matmul(types[t], raw, raw_gpu, k, ms[i], EM_F32);
            check_matmul(types[t], raw, raw_gpu, k, 1, EM_F16);
            check_matmul(types[t], raw, raw_gpu, k, 5, EM_F16);
            check_matmul(types[t], raw, raw_gpu, k, 1, EM_BF16);
            check_matmul(types[t], raw, raw_gpu, k, 8, EM_BF16);
            check_matmul(types[t], raw, raw_gpu, k, 17, EM_BF16);
            check_matmul_at(types[t], raw, raw_gpu, k, 1, EM_F32, true);
            check_matmul_at(types[t], raw, raw_gpu, k, 2, EM_BF16, true);
            em_array_release(raw_gpu);
            em_array_release(raw);
        }
    }
}
