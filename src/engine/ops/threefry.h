/*
 * threefry.h — the Threefry-2x32 hash (20 rounds), shared by the CPU
 * (random.c) and the CUDA backend (src/cuda/random.cu) so that both draw
 * bit-identical random numbers from one definition. Plain C99 that nvcc
 * compiles for host and device.
 */
#ifndef EMILY_THREEFRY_H
#define EMILY_THREEFRY_H

#include <stdint.h>

#if defined(__CUDACC__)
#define EM_TF_FN static inline __host__ __device__
#else
#define EM_TF_FN static inline
#endif

EM_TF_FN uint32_t em_tf_rotl32(uint32_t x, int r) {
    return (x << r) | (x >> (32 - r));
}

/* Four rounds with rotations r0..r3. */
#define EM_TF_ROUNDS4(x0, x1, r0, r1, r2, r3)                                  \
    do {                                                                       \
        x0 += x1;                                                              \
        x1 = em_tf_rotl32(x1, r0) ^ x0;                                        \
        x0 += x1;                                                              \
        x1 = em_tf_rotl32(x1, r1) ^ x0;                                        \
        x0 += x1;                                                              \
        x1 = em_tf_rotl32(x1, r2) ^ x0;                                        \
        x0 += x1;                                                              \
        x1 = em_tf_rotl32(x1, r3) ^ x0;                                        \
    } while (0)

/* Threefry-2x32, 20 rounds: five groups of four rounds, the key injected
 * before the first group and after each group (injection i adds the
 * schedule words i and i+1 mod 3, plus i to the second word). */
EM_TF_FN void em_tf_hash2x32(uint32_t k0, uint32_t k1, uint32_t *x0p,
                             uint32_t *x1p) {
    uint32_t k2 = k0 ^ k1 ^ 0x1BD11BDAu;
    uint32_t x0 = *x0p + k0, x1 = *x1p + k1;
    EM_TF_ROUNDS4(x0, x1, 13, 15, 26, 6);
    x0 += k1;
    x1 += k2 + 1u;
    EM_TF_ROUNDS4(x0, x1, 17, 29, 16, 24);
    x0 += k2;
    x1 += k0 + 2u;
    EM_TF_ROUNDS4(x0, x1, 13, 15, 26, 6);
    x0 += k0;
    x1 += k1 + 3u;
    EM_TF_ROUNDS4(x0, x1, 17, 29, 16, 24);
    x0 += k1;
    x1 += k2 + 4u;
    EM_TF_ROUNDS4(x0, x1, 13, 15, 26, 6);
    x0 += k2;
    x1 += k0 + 5u;
    *x0p = x0;
    *x1p = x1;
}

#endif
