// fusion_rt.cuh — what every fused kernel includes: the op rules (the same
// headers the unfused kernels are built from, so each element is computed
// by the one definition of its op) and the helpers the generated code calls
// (loads through strides, four elements per thread step, a row cache in
// shared memory, block reductions). Compiled by NVRTC at run time
// (fusion.cu ships it as a string); fusion.cu includes it too, for the
// parameter block's layout.
#pragma once

#include "binary_ops.cuh"
#include "misc_ops.cuh"
#include "reduce_ops.cuh"
#include "unary_ops.cuh"

#define FZ_NDIM 16
#define FZ_LOADS 16
#define FZ_STEP 4 /* elements per thread step */

namespace emc {

// How a load's elements lie along its walk (the whole space in flat mode,
// one row in row mode): consecutive (element i at i), one value repeated,
// or anything else (index unravelled over the axes).
enum FzKind { FZ_UNIT = 0, FZ_SAME = 1, FZ_GENERAL = 2 };

struct FzLoad {
    const void *ptr;                // at the input's offset
    int64_t stride[FZ_NDIM];        // element strides over W (0: broadcast)
    int kind;                       // FzKind along the walk
    int cache_off;                  // row mode: byte offset of its row cache
};

// The kernel's one argument. Flat mode: n elements of W (all nd axes) per
// launch; row mode: `rows` rows (the first nouter axes) of `row_len`
// elements (the others).
struct FzParams {
    int64_t n, rows, row_len;
    int nd, nouter;
    int vec;    // every consecutive load and the output 4-element aligned
    int cached; // row mode: wide loads kept in shared memory
    int64_t shape[FZ_NDIM];
    FzLoad ld[FZ_LOADS];
    void *out;
    float nzf;  // -0.0f (fz_rounded)
    double nzd; // -0.0
};

#ifdef __CUDACC__
template <class T, int N> struct alignas(sizeof(T) * N) FzVec {
    T v[N];
};

// An instruction's float result, rounded where the next instruction can
// see it: the unfused kernels store every op's result, so a multiply ending
// one instruction must not be contracted with an add starting the next into
// one fma (nvcc and ptxas contract by default; the fused kernel keeps that
// default so that each op's own arithmetic compiles as in its unfused
// kernel). Adding -0 with an explicit rounding mode (never contracted) read
// from the parameters (never folded) is exact: x + -0 = x for every x, -0
// included. Only for results of arithmetic ops (whose NaNs are canonical
// already); f16/bf16 results are rounded by their store.
template <class T>
__device__ __forceinline__ T fz_rounded(T v, const FzParams &P) {
    if constexpr (std::is_same_v<T, float>) {
        asm("add.rn.f32 %0, %0, %1;" : "+f"(v) : "f"(P.nzf));
    } else if constexpr (std::is_same_v<T, double>) {
        asm("add.rn.f64 %0, %0, %1;" : "+d"(v) : "d"(P.nzd));
    } else if constexpr (std::is_same_v<T, c64> || std::is_same_v<T, c128>) {
        return T(fz_rounded(v.real(), P), fz_rounded(v.imag(), P));
    }
    return v;
}

// Offset of flat index i over axes [d0, d0 + nd) of shape, with strides.
__device__ __forceinline__ int64_t fz_offset(int64_t i, int d0, int nd,
                                             const int64_t *shape,
                                             const int64_t *stride) {
    int64_t off = 0;
    for (int d = d0 + nd - 1; d >= d0; d--) {
        int64_t s = shape[d];
        off += (i % s) * stride[d];
        i /= s;
    }
    return off;
}

// Four consecutive elements from global memory through the read-only path
// (ld.global.nc): fused kernels never write their inputs, and a load the
// compiler knows is global may be issued ahead of the previous step's
// shared-memory cache stores, so several loads per thread are in flight.
template <class T>
__device__ __forceinline__ FzVec<T, FZ_STEP> fz_ldg4(const T *p) {
    using V = FzVec<T, FZ_STEP>;
    constexpr size_t B = sizeof(V);
    if constexpr (B == 16) {
        int4 w = __ldg(reinterpret_cast<const int4 *>(p));
        return *reinterpret_cast<const V *>(&w);
    } else if constexpr (B == 8) {
        int2 w = __ldg(reinterpret_cast<const int2 *>(p));
        return *reinterpret_cast<const V *>(&w);
    } else if constexpr (B == 4) {
        int w = __ldg(reinterpret_cast<const int *>(p));
        return *reinterpret_cast<const V *>(&w);
    } else if constexpr (B == 32) {
        struct alignas(32) W2 {
            int4 a, b;
        } w;
        w.a = __ldg(reinterpret_cast<const int4 *>(p));
        w.b = __ldg(reinterpret_cast<const int4 *>(p) + 1);
        return *reinterpret_cast<const V *>(&w);
    } else {
        return *reinterpret_cast<const V *>(p);
    }
}

// Elements c0 .. c0 + 3 (those below lim) of a load whose walk starts at
// base: four at once when vec (consecutive and aligned), else one by one.
// Positions past lim get a zero value (never used).
template <class T>
__device__ __forceinline__ void fz_fetch(T (&x)[FZ_STEP], const T *base,
                                         int64_t c0, int64_t lim, int kind,
                                         bool vec, const FzParams &P, int d0,
                                         int nd, const int64_t *stride) {
    if (kind == FZ_SAME) {
        T s = base[0];
#pragma unroll
        for (int v = 0; v < FZ_STEP; v++)
            x[v] = s;
    } else if (kind == FZ_UNIT && vec && c0 + FZ_STEP <= lim) {
        FzVec<T, FZ_STEP> t = fz_ldg4(base + c0);
#pragma unroll
        for (int v = 0; v < FZ_STEP; v++)
            x[v] = t.v[v];
    } else {
#pragma unroll
        for (int v = 0; v < FZ_STEP; v++) {
            int64_t c = c0 + v;
            x[v] = c < lim ? base[kind == FZ_UNIT
                                      ? c
                                      : fz_offset(c, d0, nd, P.shape, stride)]
                           : T{};
        }
    }
}

// The row cache: elements c0 .. c0 + 3 of a row kept in shared memory. A
// thread reads back only the positions it wrote itself, so no barrier is
// needed between the writes and the reads.
template <class T>
__device__ __forceinline__ void fz_cache_put(T *cache, const T (&x)[FZ_STEP],
                                             int64_t c0, int64_t lim) {
    if (c0 + FZ_STEP <= lim) {
        FzVec<T, FZ_STEP> t;
#pragma unroll
        for (int v = 0; v < FZ_STEP; v++)
            t.v[v] = x[v];
        *(FzVec<T, FZ_STEP> *)(cache + c0) = t;
    } else {
        for (int v = 0; v < FZ_STEP && c0 + v < lim; v++)
            cache[c0 + v] = x[v];
    }
}

template <class T>
__device__ __forceinline__ void fz_cache_get(T (&x)[FZ_STEP], const T *cache,
                                             int64_t c0, int64_t lim) {
    if (c0 + FZ_STEP <= lim) {
        FzVec<T, FZ_STEP> t = *(const FzVec<T, FZ_STEP> *)(cache + c0);
#pragma unroll
        for (int v = 0; v < FZ_STEP; v++)
            x[v] = t.v[v];
    } else {
#pragma unroll
        for (int v = 0; v < FZ_STEP; v++)
            x[v] = c0 + v < lim ? cache[c0 + v] : T{};
    }
}

// Stores four results (those below lim) at out + c0.
template <class T>
__device__ __forceinline__ void fz_store(T *out, const T (&x)[FZ_STEP],
                                         int64_t c0, int64_t lim, bool vec) {
    if (vec && c0 + FZ_STEP <= lim) {
        FzVec<T, FZ_STEP> t;
#pragma unroll
        for (int v = 0; v < FZ_STEP; v++)
            t.v[v] = x[v];
        *(FzVec<T, FZ_STEP> *)(out + c0) = t;
    } else {
        for (int v = 0; v < FZ_STEP && c0 + v < lim; v++)
            out[c0 + v] = x[v];
    }
}

// Warp shuffle of any trivially copyable value, word by word.
template <class A> __device__ __forceinline__ A fz_shfl_down(A a, int o) {
    constexpr int W = (int)((sizeof(A) + 3) / 4);
    alignas(alignof(A) > 4 ? alignof(A) : 4) unsigned w[W] = {};
    *reinterpret_cast<A *>(w) = a;
#pragma unroll
    for (int k = 0; k < W; k++)
        w[k] = __shfl_down_sync(0xffffffffu, w[k], o);
    return *reinterpret_cast<A *>(w);
}

// The block's accumulators combined (blockDim.x a multiple of 32); every
// thread gets the result. scratch: 32 accumulators' worth of shared bytes.
template <class F, class A>
__device__ __forceinline__ A fz_block_reduce(const F &f, A acc,
                                             unsigned char *scratch) {
    A *s = reinterpret_cast<A *>(scratch);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int nw = (int)(blockDim.x >> 5);
    for (int o = 16; o > 0; o /= 2)
        acc = f.combine(acc, fz_shfl_down(acc, o));
    __syncthreads(); // the previous reduction has read scratch
    if (lane == 0)
        s[w] = acc;
    __syncthreads();
    if (w == 0) {
        acc = lane < nw ? s[lane] : f.identity();
        for (int o = 16; o > 0; o /= 2)
            acc = f.combine(acc, fz_shfl_down(acc, o));
        if (lane == 0)
            s[32] = acc;
    }
    __syncthreads();
    return s[32];
}
#endif

} // namespace emc
