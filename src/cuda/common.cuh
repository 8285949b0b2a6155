// common.cuh — what the CUDA backend's files share: per-device state (the
// calling thread's stream, see runtime.cu), error reporting, launch sizes, and the
// dispatch over dtypes (the dtype traits are in dtype.cuh).
#pragma once

#include "emily.h"
#include "emily_device.h"
#include "emily_cuda.h"

#include "dtype.cuh"

#include <cuda_runtime.h>

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
// Fusion (fusion.cu).
int launch_fused(int dev, Device *d, const em_cuda_fused *job);
int64_t fused_compiles();
int launch_threefry_pairs(Device *d, const uint32_t *key, int64_t key_stride,
                          const uint32_t *in, uint32_t *out, int64_t npairs);
// conv / window family (window.cu, erfinv.cu, conv.cu)
int launch_window(Device *d, const em_cuda_window *w);
int launch_window_scatter(Device *d, const em_cuda_window_scatter *s);
int launch_erf_inv(Device *d, int dtype, const void *in, void *out, int64_t n);
int launch_im2col(Device *d, const em_cuda_im2col *j);
int launch_depthwise(Device *d, const em_cuda_depthwise *j);
// Emily.Fast (fast.cu): the API entries themselves.
int fast_rows(int dev, const em_cuda_fast_rows *job);
int fast_rope(int dev, const em_cuda_fast_rope *job);
int launch_affine(Device *d, const em_cuda_affine *j); // quant.cu
// ggml block formats (ggml.cu): the API entry points themselves.
int ggml_dequantize(int dev, const em_cuda_ggml *job);
int ggml_matmul(int dev, const em_cuda_ggml *job);

// Stream-ordered scratch (cudaMallocAsync), freed on its stream when it
// goes out of scope: work areas of CUB, cuFFT and cuSOLVER, outside the
// engine's allocator and counters.
struct Scratch {
    cudaStream_t stream;
    void *p = nullptr;
    explicit Scratch(cudaStream_t s) : stream(s) {}
    ~Scratch() {
        if (p)
            cudaFreeAsync(p, stream);
    }
    Scratch(const Scratch &) = delete;
    Scratch &operator=(const Scratch &) = delete;
    cudaError_t alloc(size_t bytes) {
        return cudaMallocAsync(&p, bytes ? bytes : 1, stream);
    }
};

} // namespace emc
