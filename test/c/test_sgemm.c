/* The f32 GEMM (em__gemm_f32 and the AVX-512 kernel it picks where the CPU
 * has AVX-512F) against a float64 reference and against OpenBLAS: the four
 * ta/tb layouts, sizes off the kernel's tile (14 x 32) and blocks (k 192,
 * m 168), accumulation, leading dimensions wider than the matrices. */
#include "test.h"

#include "ops/dot_cpu.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

static uint64_t sgemm_rng = 0x243F6A8885A308D3ull;

static float next_uniform(void) {
    sgemm_rng ^= sgemm_rng << 13;
    sgemm_rng ^= sgemm_rng >> 7;
    sgemm_rng ^= sgemm_rng << 17;
    return (float)(sgemm_rng >> 40) / (float)(1 << 23) - 1.0f;
}

static float *random_floats(size_t n) {
    float *v = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; v && i < n; i++)
        v[i] = next_uniform();
    return v;
}

typedef bool (*sgemm_under_test)(bool ta, bool tb, int m, int n, int k,
                                 const float *a, int lda, const float *b,
                                 int ldb, bool accumulate, float *c, int ldc);

static bool dispatched_gemm(bool ta, bool tb, int m, int n, int k,
                            const float *a, int lda, const float *b, int ldb,
                            bool accumulate, float *c, int ldc) {
    em__gemm_f32(ta, tb, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
    return true;
}

/* One product through `gemm`, OpenBLAS and float64; returns the number of
 * elements out of tolerance (and fails the test on the first few). The
 * padding columns of C past n must be left untouched. */
static int check_product(sgemm_under_test gemm, bool ta, bool tb, int m, int n,
                         int k, bool accumulate, int pad) {
    int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    size_t asz = (size_t)(ta ? k : m) * lda, bsz = (size_t)(tb ? n : k) * ldb;
    size_t csz = (size_t)m * ldc;
    float *a = random_floats(asz), *b = random_floats(bsz);
    float *c0 = random_floats(csz), *c = malloc(csz * sizeof(float));
    float *cb = malloc(csz * sizeof(float));
    int bad = 0;
    CHECK(a && b && c0 && c && cb);
    if (!a || !b || !c0 || !c || !cb)
        goto done;
    memcpy(c, c0, csz * sizeof(float));
    memcpy(cb, c0, csz * sizeof(float));
    CHECK(gemm(ta, tb, m, n, k, a, lda, b, ldb, accumulate, c, ldc));
    em__gemm_f32_blas(ta, tb, m, n, k, a, lda, b, ldb, accumulate, cb, ldc);
    double rel = 1e-5 * sqrt((double)k);
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < ldc; j++) {
            size_t at = (size_t)i * ldc + j;
            if (j >= n) {
                if (c[at] != c0[at] && bad++ < 3)
                    em_test_fail(__FILE__, __LINE__,
                                 "padding C[%d][%d] written", i, j);
                continue;
            }
            double want = accumulate ? c0[at] : 0, scale = 0;
            for (int p = 0; p < k; p++) {
                double x = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double y = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                want += x * y;
                scale += fabs(x * y);
            }
            if (accumulate)
                scale += fabs(c0[at]);
            double tol = rel * scale + 1e-30;
            if ((fabs(c[at] - want) > tol || fabs(c[at] - cb[at]) > 2 * tol) &&
                bad++ < 3)
                em_test_fail(__FILE__, __LINE__,
                             "ta=%d tb=%d m=%d n=%d k=%d acc=%d pad=%d: "
                             "C[%d][%d] = %.9g, float64 %.9g, OpenBLAS %.9g",
                             ta, tb, m, n, k, accumulate, pad, i, j, c[at],
                             want, cb[at]);
        }
    }
done:
    free(a);
    free(b);
    free(c0);
    free(c);
    free(cb);
    return bad;
}

static void check_all_layouts(sgemm_under_test gemm) {
    /* Edges of the 14 x 32 tile and of the 16-lane masks. */
    static const int sizes[] = {1,  2,  3,  5,  7,  13, 14, 15, 16,
                                17, 28, 31, 32, 33, 47, 48, 63, 70};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    int case_no = 0;
    for (int l = 0; l < 4; l++) {
        bool ta = l & 1, tb = l & 2;
        for (int im = 0; im < nsizes; im++)
            for (int in = 0; in < nsizes; in++) {
                /* k cycles through the sizes so every (m, n) pair meets
                 * several; accumulate and padding alternate. */
                int k = sizes[(im * 7 + in * 3 + l) % nsizes];
                bool acc = case_no % 3 == 1;
                int pad = case_no % 2 ? 5 : 0;
                case_no++;
                check_product(gemm, ta, tb, sizes[im], sizes[in], k, acc, pad);
            }
        /* Several k, m and n blocks (192, 168, 4096) and their ragged ends. */
        check_product(gemm, ta, tb, 200, 70, 600, false, 3);
        check_product(gemm, ta, tb, 171, 45, 257, true, 0);
        check_product(gemm, ta, tb, 3, 4100, 9, l % 2, 1);
        /* Packed B capped at 2^20 floats: 2 column blocks of 4 KC blocks. */
        check_product(gemm, ta, tb, 20, 2100, 700, l % 2, 0);
        check_product(gemm, ta, tb, 1, 1, 1, true, 0);
    }
}

EM_TEST(sgemm_dispatched_matches_float64_and_openblas) {
    check_all_layouts(dispatched_gemm);
}

EM_TEST(sgemm_avx512_kernel_matches_float64_and_openblas) {
    /* Without AVX-512 (another CPU, a baseline build, valgrind) the kernel
     * must not even be entered: its code is AVX-512 from the first
     * instruction. em__gemm_f32 asks em__sgemm_avx512_available first. */
    if (!em__sgemm_avx512_available())
        return;
    check_all_layouts(em__sgemm_avx512);
    /* Empty products decline (em__gemm_f32 then leaves them to BLAS). */
    float x = 1, y = 2, z = 3;
    CHECK(!em__sgemm_avx512(false, false, 1, 1, 0, &x, 1, &y, 1, false, &z, 1));
    CHECK(z == 3);
}

static void *product_on_thread(void *arg) {
    *(int *)arg =
        check_product(em__sgemm_avx512, false, true, 40, 70, 300, false, 2);
    return NULL;
}

/* A thread that ran the kernel and exits frees its packing buffers (the
 * ASan build's leak check sees them otherwise). */
EM_TEST(sgemm_avx512_on_a_thread_that_exits) {
    if (!em__sgemm_avx512_available())
        return;
    int bad = -1;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, product_on_thread, &bad) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(bad == 0);
}
