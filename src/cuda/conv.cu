// conv.cu — the patch matrix (im2col) of a convolution, conv.c's layout:
// col[b][t][c * kvol + k][x], the output positions x along threads so
// that writes are coalesced. Elements move by size, so every dtype shares
// one kernel per element size; holes
// (padding, input dilation) are written as zero bytes, which is 0 in every
// dtype. The engine then multiplies the kernel rows by it through the GEMM
// path (gemm.cu).
#include "common.cuh"

namespace emc {

struct alignas(16) ColElem16 {
    uint64_t lo, hi;
};
template <int SIZE>
using col_elem_t = std::conditional_t<
    SIZE == 1, uint8_t,
    std::conditional_t<
        SIZE == 2, uint16_t,
        std::conditional_t<SIZE == 4, uint32_t,
                           std::conditional_t<SIZE == 8, uint64_t, ColElem16>>>>;

// One block row per patch-matrix row (b, t, c * kvol + k): its channel
// offset and kernel offsets are worked out once; the block's threads then
// walk the output positions x (index type I: 32 bits when they fit, so the
// per-element unravelling is cheap).
template <int SIZE, class I> __global__ void im2col_kernel(em_cuda_im2col j) {
    using E = col_elem_t<SIZE>;
    const E *in = (const E *)j.in;
    E *col = (E *)j.col;
    const int64_t rows = j.cg * j.kvol;
    const int64_t nrows = j.nb * j.groups * rows;
    const int ns = j.ns;
    const I L = (I)j.L;
    for (int64_t row = blockIdx.y; row < nrows; row += gridDim.y) {
        const int64_t r = row % rows, bt = row / rows;
        const int64_t t = bt % j.groups, b = bt / j.groups;
        const int64_t c = r / j.kvol;
        int64_t k = r % j.kvol;
        // q = x_a * stride_a + q0_a along each axis
        int64_t q0[EM_CUDA_MAX_NDIM];
        for (int a = ns - 1; a >= 0; a--) {
            q0[a] = (k % j.k_sp[a]) * j.kdil[a] - j.low[a];
            k /= j.k_sp[a];
        }
        const E *src =
            in + b * j.batch_stride + t * j.group_stride + c * j.c_stride;
        E *dst = col + row * j.L;
        // Not unrolled: nvcc 13's -split-compile fails ("Failed to read
        // bitcode") on the unrolled 1-byte instance.
#pragma unroll 1
        for (I x = (I)(blockIdx.x * blockDim.x + threadIdx.x); x < L;
             x += (I)(gridDim.x * blockDim.x)) {
            I rest = x;
            int64_t off = 0;
            bool hit = true;
            for (int a = ns - 1; a >= 0; a--) {
                const I dim = (I)j.out_sp[a];
                const I xa = a == 0 ? rest : rest % dim;
                rest = a == 0 ? 0 : rest / dim;
                const int64_t q = (int64_t)xa * j.strides[a] + q0[a];
                const int64_t id = j.idil[a];
                if (id == 1) {
                    hit = hit && q >= 0 && q < j.in_sp[a];
                    off += q * j.in_st[a];
                } else {
                    hit = hit && q >= 0 && q % id == 0 && q / id < j.in_sp[a];
                    off += q / id * j.in_st[a];
                }
            }
            E v;
            if (hit)
                v = src[off];
            else
                memset(&v, 0, sizeof v);
            dst[x] = v;
        }
    }
}

int launch_im2col(Device *d, const em_cuda_im2col *j) {
    const int64_t nrows = j->nb * j->groups * j->cg * j->kvol;
    if (nrows == 0 || j->L == 0)
        return 0;
    int64_t bx = (j->L + 255) / 256;
    if (bx > 64)
        bx = 64;
    dim3 grid((unsigned)bx, (unsigned)(nrows < 65535 ? nrows : 65535));
    bool small = j->L <= INT32_MAX;
    return with_elem_size((size_t)j->elem_size, "conv", [&]<int SIZE>() -> int {
        if (small)
            im2col_kernel<SIZE, int32_t><<<grid, 256, 0, d->stream>>>(*j);
        else
            im2col_kernel<SIZE, int64_t><<<grid, 256, 0, d->stream>>>(*j);
        EMC_LAUNCHED("im2col kernel");
        return 0;
    });
}

} // namespace emc
