// common.cuh — what the CUDA backend's files share: per-device state (the
// calling thread's stream, see runtime.cu), error reporting, launch sizes, and the dtype
// traits that let each kernel be written once for every dtype.
//
// Dtypes mirror the engine's tables (src/engine/internal.h): a storage type
// S and a compute type C with load/store between them. f16/bf16 compute in
// float; pred computes in uint8_t and stores 0/1; complex numbers are
// cuda::std::complex, laid out as the engine's (real, imaginary).
#pragma once

#include "emily.h"
#include "emily_device.h"
#include "emily_cuda.h"

#include <cuda/std/complex>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace emc {

// ---- errors --------------------------------------------------------------

// Record a message for this thread; returns the em_status number.
int fail(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// A CUDA error as an em_status (out of memory -> EM_ERR_OOM).
int cuda_fail(cudaError_t e, const char *what);

#define EMC_TRY(call)                                                          \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess)                                                 \
            return ::emc::cuda_fail(e_, #call);                                \
    } while (0)

// After a launch: a bad configuration shows up here, not at run time.
#define EMC_LAUNCHED(what)                                                     \
    do {                                                                       \
        cudaError_t e_ = cudaGetLastError();                                   \
        if (e_ != cudaSuccess)                                                 \
            return ::emc::cuda_fail(e_, what);                                 \
    } while (0)

// ---- devices ---------------------------------------------------------------

struct Device {
    cudaStream_t stream;
    int sms;
};
// Select `dev` on this thread and return its state (created on first use),
// or NULL after recording an error. `stream` is this thread's current CUDA
// stream for dev: the one of the engine stream it serves (set_stream).
Device *device(int dev);

// Blocks for a grid-stride loop over `work` items of 256 threads.
inline unsigned grid_for(const Device *d, int64_t work, int threads = 256) {
    int64_t blocks = (work + threads - 1) / threads;
    int64_t cap = (int64_t)d->sms * 16;
    if (blocks > cap)
        blocks = cap;
    return (unsigned)(blocks < 1 ? 1 : blocks);
}

// ---- dtypes -------------------------------------------------------------

using c64 = cuda::std::complex<float>;
using c128 = cuda::std::complex<double>;

enum Klass { K_INT, K_FLT, K_CPX };

constexpr Klass klass_of(int d) {
    return d <= EM_S64 ? K_INT : d <= EM_F64 ? K_FLT : K_CPX;
}

template <int D> struct DT;
#define EMC_PLAIN_DT(E, T)                                                     \
    template <> struct DT<E> {                                                 \
        using S = T;                                                           \
        using C = T;                                                           \
        static __device__ __forceinline__ C load(S v) { return v; }            \
        static __device__ __forceinline__ S store(C v) { return v; }           \
    };
EMC_PLAIN_DT(EM_U8, uint8_t)
EMC_PLAIN_DT(EM_U16, uint16_t)
EMC_PLAIN_DT(EM_U32, uint32_t)
EMC_PLAIN_DT(EM_U64, uint64_t)
EMC_PLAIN_DT(EM_S8, int8_t)
EMC_PLAIN_DT(EM_S16, int16_t)
EMC_PLAIN_DT(EM_S32, int32_t)
EMC_PLAIN_DT(EM_S64, int64_t)
EMC_PLAIN_DT(EM_F32, float)
EMC_PLAIN_DT(EM_F64, double)
EMC_PLAIN_DT(EM_C64, c64)
EMC_PLAIN_DT(EM_C128, c128)
#undef EMC_PLAIN_DT

template <> struct DT<EM_PRED> {
    using S = uint8_t;
    using C = uint8_t;
    static __device__ __forceinline__ C load(S v) { return v; }
    static __device__ __forceinline__ S store(C v) { return v != 0; }
};
template <> struct DT<EM_F16> {
    using S = uint16_t;
    using C = float;
    static __device__ __forceinline__ C load(S v) {
        return __half2float(__ushort_as_half(v));
    }
    static __device__ __forceinline__ S store(C v) {
        return __half_as_ushort(__float2half_rn(v));
    }
};
template <> struct DT<EM_BF16> {
    using S = uint16_t;
    using C = float;
    static __device__ __forceinline__ C load(S v) {
        return __bfloat162float(__ushort_as_bfloat16(v));
    }
    static __device__ __forceinline__ S store(C v) {
        return __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
};

// Calls f.template operator()<S>() with S the element size in bytes (1, 2,
// 4, 8 or 16): kernels that only move elements are instantiated per size,
// not per dtype. Other sizes fail naming `op`.
template <class F> static int with_elem_size(size_t size, const char *op, F &&f) {
    switch (size) {
    case 1:
        return f.template operator()<1>();
    case 2:
        return f.template operator()<2>();
    case 4:
        return f.template operator()<4>();
    case 8:
        return f.template operator()<8>();
    case 16:
        return f.template operator()<16>();
    default:
        return fail(EM_ERR_ARGUMENT, "%s: no GPU kernel for %zu-byte elements", op,
                    size);
    }
}

// Bytes per element. The plugin links nothing of libemily (the engine may
// be linked statically into a program that exports none of its symbols).
constexpr size_t dtype_bytes(int d) {
    return d <= EM_U8 || d == EM_S8   ? 1
           : d == EM_U16 || d == EM_S16 || d == EM_F16 || d == EM_BF16 ? 2
           : d == EM_U32 || d == EM_S32 || d == EM_F32 ? 4
           : d == EM_C128                               ? 16
                                                        : 8;
}

// The real dtype of a complex one (others unchanged).
constexpr int real_dtype(int d) {
    return d == EM_C64 ? EM_F32 : d == EM_C128 ? EM_F64 : d;
}

// Unsigned type integer arithmetic wraps in: at least unsigned int, so that
// u8/u16 products never overflow a promoted int.
template <class T>
using wide_u = decltype(std::make_unsigned_t<T>(0) + 0u);

template <class T> __device__ __forceinline__ bool is_neg(T x) {
    if constexpr (std::is_signed_v<T>)
        return x < 0;
    else
        return false;
}

// Call f.template operator()<D>() with the dtype as a compile-time constant.
template <class F> inline int with_dtype(int d, F &&f) {
    switch (d) {
#define EMC_CASE(E)                                                            \
    case E:                                                                    \
        return f.template operator()<E>();
        EMC_CASE(EM_PRED)
        EMC_CASE(EM_U8)
        EMC_CASE(EM_U16)
        EMC_CASE(EM_U32)
        EMC_CASE(EM_U64)
        EMC_CASE(EM_S8)
        EMC_CASE(EM_S16)
        EMC_CASE(EM_S32)
        EMC_CASE(EM_S64)
        EMC_CASE(EM_F16)
        EMC_CASE(EM_BF16)
        EMC_CASE(EM_F32)
        EMC_CASE(EM_F64)
        EMC_CASE(EM_C64)
        EMC_CASE(EM_C128)
#undef EMC_CASE
    default:
        return fail(EM_ERR_ARGUMENT, "unknown dtype %d", d);
    }
}

// The `accepts` column of emily_ops.h as a compile-time predicate.
constexpr bool accepts_NUMERIC(int d) { return d != EM_PRED; }
constexpr bool accepts_REAL(int d) { return klass_of(d) != K_CPX; }
constexpr bool accepts_FLOATING(int d) { return klass_of(d) != K_INT; }
constexpr bool accepts_REALFLOAT(int d) { return klass_of(d) == K_FLT; }
constexpr bool accepts_INTEGER(int d) { return klass_of(d) == K_INT; }
constexpr bool accepts_ANY(int) { return true; }

// Float max/min as the CPU: NaN wins, -0 orders below +0.
template <class C> __device__ __forceinline__ C flt_max(C a, C b) {
    return a != a ? a : b != b ? b : (a > b || (a == b && !signbit(a))) ? a : b;
}
template <class C> __device__ __forceinline__ C flt_min(C a, C b) {
    return a != a ? a : b != b ? b : (a < b || (a == b && signbit(a))) ? a : b;
}

// ---- elementwise launch ------------------------------------------------

// Launch an elementwise functor over the job's layout (ewlaunch.cuh).
int launch_unary(Device *d, const em_cuda_ew *job);
int launch_binary(Device *d, const em_cuda_ew *job);
int launch_misc(Device *d, const em_cuda_ew *job); // select, clip, cast
int launch_iota(Device *d, int dtype, void *out, int64_t n, int64_t dim,
                int64_t inner);
int launch_reduce(Device *d, const em_cuda_reduce *job);
int launch_gemm(int dev, Device *d, const em_cuda_gemm *job);
int launch_gather(Device *d, const em_cuda_gather *g);
int launch_scan(Device *d, const em_cuda_scan *s);
int launch_copy(Device *d, const em_cuda_copy *c);
int launch_scatter(Device *d, const em_cuda_scatter *s);
int launch_sort(Device *d, const em_cuda_sort *s);
int launch_fft(int dev, Device *d, const em_cuda_fft *job);
int launch_linalg(int dev, Device *d, em_cuda_linalg *job);
int launch_random_bits(Device *d, const uint32_t *key, int64_t key_stride,
                       void *out, int dtype, int64_t m, int64_t half,
                       int64_t count);
int launch_threefry_pairs(Device *d, const uint32_t *key, int64_t key_stride,
                          const uint32_t *in, uint32_t *out, int64_t npairs);
// conv / window family (window.cu, erfinv.cu, conv.cu)
int launch_window(Device *d, const em_cuda_window *w);
int launch_window_scatter(Device *d, const em_cuda_window_scatter *s);
int launch_erf_inv(Device *d, int dtype, const void *in, void *out, int64_t n);
int launch_im2col(Device *d, const em_cuda_im2col *j);

} // namespace emc
