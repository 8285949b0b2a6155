// conv.cu — the patch matrix (im2col) of a convolution, conv.c's layout:
// col[b][t][c * kvol + k][x], the output positions x along threads so
// that writes are coalesced. Elements move by size, so every dtype shares
// one kernel per element size; holes
// (padding, input dilation) are written as zero bytes, which is 0 in every
// dtype. The engine then multiplies the kernel rows by it through the GEMM
// path (gemm.cu).
//
// Depthwise convolutions (one input channel per group) skip the patch
// matrix: a GEMM with K = kvol (9 for 3x3) is all memory traffic, so one
// thread per output element folds its window directly, reading the input
// in place (neighbouring threads read neighbouring inputs; the taps they
// share come from L1).
#include "common.cuh"

#include <climits>

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

// ---- depthwise convolution, direct ----------------------------------------

// The sum over the kernel taps k in the box [kmin, kmax) (per axis) of
// x[off(k)] * w[koff(k)], in row-major tap order (the last axis innermost,
// walked as an odometer over the others): the input steps by kdil * in_st
// per tap, the row-major kernel by kst.
template <int D, int MAXN>
__device__ __forceinline__ work_t<D>
box_dot(const typename DT<D>::S *x, const typename DT<D>::S *w, int ns,
        const em_cuda_depthwise &j, const int64_t *kmin, const int64_t *kmax,
        const int64_t *kst, int64_t off, int64_t koff) {
    using A = work_t<D>;
    int64_t k[MAXN];
    for (int a = 0; a < ns; a++)
        k[a] = kmin[a];
    const int last = ns - 1;
    const int64_t cnt = kmax[last] - kmin[last];
    const int64_t step = j.kdil[last] * j.in_st[last];
    A acc = A(0);
    for (;;) {
        for (int64_t t = 0; t < cnt; t++)
            acc +=
                (A)DT<D>::load(x[off + t * step]) * (A)DT<D>::load(w[koff + t]);
        int a = last - 1;
        for (; a >= 0; a--) {
            const int64_t in_step = j.kdil[a] * j.in_st[a];
            k[a]++;
            off += in_step;
            koff += kst[a];
            if (k[a] < kmax[a])
                break;
            const int64_t span = kmax[a] - kmin[a];
            off -= span * in_step;
            koff -= span * kst[a];
            k[a] = kmin[a];
        }
        if (a < 0)
            return acc;
    }
}

// threadIdx.y picks an output plane (batch b, output channel oc), the
// x threads walk its L positions p. Per axis only the taps that land
// inside the input are visited (window.cu's window_box with the kernel
// dilation as the step), so padding costs nothing. NS: the number of
// spatial axes when fixed at compile time (arrays in registers, loops
// unrolled), 0 for any.
template <int D, int NS> __global__ void depthwise_kernel(em_cuda_depthwise j) {
    using S = typename DT<D>::S;
    constexpr int MAXN = NS ? NS : EM_CUDA_MAX_NDIM;
    const int ns = NS ? NS : j.ns;
    const int64_t o = j.c * j.mult, planes = j.n * o;
    const int64_t L = j.L;
    int64_t kst[MAXN], kvol = 1;
    for (int a = ns - 1; a >= 0; a--) {
        kst[a] = kvol;
        kvol *= j.k_sp[a];
    }
    for (int64_t plane = (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
         plane < planes; plane += (int64_t)gridDim.y * blockDim.y) {
        const int64_t oc = plane % o;
        const S *x = (const S *)j.x + plane / o * j.x_batch_stride +
                     oc / j.mult * j.x_c_stride;
        const S *w = (const S *)j.w + oc * kvol;
        S *y = (S *)j.y + plane * j.L;
        for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < L;
             p += (int64_t)gridDim.x * blockDim.x) {
            int64_t kmin[MAXN], kmax[MAXN], off = 0, koff = 0;
            bool empty = false;
            int32_t rest = (int32_t)p; // L < 2^31: cheap divisions
            for (int a = ns - 1; a >= 0; a--) {
                const int32_t dim = (int32_t)j.out_sp[a];
                const int32_t xa = a == 0 ? rest : rest % dim;
                rest = a == 0 ? 0 : rest / dim;
                // Taps t with 0 <= base + t * d < in_sp, t < k_sp.
                const int64_t base = (int64_t)xa * j.strides[a] - j.low[a];
                const int64_t d = j.kdil[a], last = j.in_sp[a] - 1 - base;
                const int64_t lo = base >= 0 ? 0
                                   : d == 1  ? -base
                                             : (-base + d - 1) / d;
                int64_t hi = last < 0 ? 0 : d == 1 ? last + 1 : last / d + 1;
                hi = hi < j.k_sp[a] ? hi : j.k_sp[a];
                empty = empty || lo >= hi;
                kmin[a] = lo;
                kmax[a] = hi;
                off += (base + lo * d) * j.in_st[a];
                koff += lo * kst[a];
            }
            const work_t<D> acc =
                empty
                    ? work_t<D>(0)
                    : box_dot<D, MAXN>(x, w, ns, j, kmin, kmax, kst, off, koff);
            y[p] = DT<D>::store((typename DT<D>::C)acc);
        }
    }
}

int launch_depthwise(Device *d, const em_cuda_depthwise *j) {
    if (j->ns < 1 || j->ns > EM_CUDA_MAX_NDIM || j->mult < 1 || j->L < 0 ||
        j->L > INT32_MAX)
        return fail(EM_ERR_ARGUMENT,
                    "conv (depthwise): %d spatial axes, multiplier %lld, "
                    "%lld output positions",
                    j->ns, (long long)j->mult, (long long)j->L);
    const int64_t planes = j->n * j->c * j->mult;
    if (planes == 0 || j->L == 0)
        return 0;
    // 256 threads: x along a plane (a power of two >= L, from 32), y over
    // planes, so that small planes still fill the block.
    unsigned tx = 32;
    while (tx < 256 && tx < j->L)
        tx *= 2;
    const unsigned ty = 256 / tx;
    const int64_t bx = (j->L + tx - 1) / tx, by = (planes + ty - 1) / ty;
    const dim3 grid((unsigned)bx, (unsigned)(by < 65535 ? by : 65535));
    const dim3 block(tx, ty);
    return with_dtype(j->dtype, [&]<int D>() -> int {
        if constexpr (D == EM_PRED) {
            return fail(EM_ERR_ARGUMENT, "conv (depthwise): pred");
        } else {
            if (j->ns == 1)
                depthwise_kernel<D, 1><<<grid, block, 0, d->stream>>>(*j);
            else if (j->ns == 2)
                depthwise_kernel<D, 2><<<grid, block, 0, d->stream>>>(*j);
            else
                depthwise_kernel<D, 0><<<grid, block, 0, d->stream>>>(*j);
            EMC_LAUNCHED("depthwise conv kernel");
            return 0;
        }
    });
}

} // namespace emc
