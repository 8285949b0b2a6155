// random.cu — Threefry-2x32 random bits on the GPU, bit-identical to the
// CPU: the hash is the engine's own definition (threefry.h) and the
// counter layout is random.c's, one thread per counter pair.
#include "common.cuh"

#include "../engine/ops/threefry.h"

namespace emc {

template <class T>
__global__ void bits_kernel(const uint32_t *key, int64_t key_stride, T *out,
                            int64_t m, int64_t half, int64_t count) {
    uint32_t k0 = key[0], k1 = key[key_stride];
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
         i < count; i += step) {
        uint32_t x0 = (uint32_t)i;
        uint32_t x1 = i + half < m ? (uint32_t)(i + half) : 0u;
        em_tf_hash2x32(k0, k1, &x0, &x1);
        if constexpr (sizeof(T) == 8) {
            out[i] = ((uint64_t)x0 << 32) | x1;
        } else {
            out[i] = (T)x0;
            if (half + i < m)
                out[half + i] = (T)x1;
        }
    }
}

__global__ void pairs_kernel(const uint32_t *key, int64_t key_stride,
                             const uint32_t *in, uint32_t *out,
                             int64_t npairs) {
    uint32_t k0 = key[0], k1 = key[key_stride];
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
         i < npairs; i += step) {
        uint32_t x0 = in[2 * i], x1 = in[2 * i + 1];
        em_tf_hash2x32(k0, k1, &x0, &x1);
        out[2 * i] = x0;
        out[2 * i + 1] = x1;
    }
}

int launch_random_bits(Device *d, const uint32_t *key, int64_t key_stride,
                       void *out, int dtype, int64_t m, int64_t half,
                       int64_t count) {
    unsigned grid = grid_for(d, count);
    switch (dtype) {
    case EM_U8:
        bits_kernel<<<grid, 256, 0, d->stream>>>(key, key_stride,
                                                 (uint8_t *)out, m, half,
                                                 count);
        break;
    case EM_U16:
        bits_kernel<<<grid, 256, 0, d->stream>>>(key, key_stride,
                                                 (uint16_t *)out, m, half,
                                                 count);
        break;
    case EM_U32:
        bits_kernel<<<grid, 256, 0, d->stream>>>(key, key_stride,
                                                 (uint32_t *)out, m, half,
                                                 count);
        break;
    case EM_U64:
        bits_kernel<<<grid, 256, 0, d->stream>>>(key, key_stride,
                                                 (uint64_t *)out, m, half,
                                                 count);
        break;
    default:
        return fail(EM_ERR_ARGUMENT, "random_bits: dtype %d", dtype);
    }
    EMC_LAUNCHED("random bits kernel");
    return 0;
}

int launch_threefry_pairs(Device *d, const uint32_t *key, int64_t key_stride,
                          const uint32_t *in, uint32_t *out, int64_t npairs) {
    pairs_kernel<<<grid_for(d, npairs), 256, 0, d->stream>>>(key, key_stride,
                                                             in, out, npairs);
    EMC_LAUNCHED("threefry kernel");
    return 0;
}

} // namespace emc
