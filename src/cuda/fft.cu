// fft.cu — em_fft on the GPU through cuFFT.
//
// Every row along the transformed axis is gathered (cut or zero padded to
// the length the mode reads) into a contiguous scratch batch by one kernel,
// cuFFT transforms the whole batch with one plan (basic contiguous layout:
// the gather already pays for any stride, and it is needed anyway for the
// pad/crop and the real-to-complex widening), and a second kernel scales
// (1/n for the inverses), applies the CPU's clean-up (eps, -0.0 -> +0.0)
// and writes the rows into the output's layout.
//
//   forward / inverse:   C2C (Z2Z) of length n, in place
//   rfft of a real row:  R2C; of a complex row: C2C, the first n/2 + 1 kept
//   irfft:               C2R of the n/2 + 1 entries. The CPU extends them
//                        by X[n-k] = conj(X[k]) and keeps the real part,
//                        which ignores the imaginary parts of X[0] and (n
//                        even) X[n/2]; they are zeroed in the gather so
//                        cuFFT sees an exactly Hermitian spectrum. (C2R
//                        overwrites its input: it is our scratch.)
//
// Arithmetic is in the input's precision (the CPU's is double throughout),
// so f32/c64 results differ from the CPU's by about log2(n) float ulp of
// the row's norm. Plans are cached per (device, type, n, rows) without
// their own work area: each run takes one from cudaMallocAsync on the
// stream, so cached plans hold no GPU memory.
#include "common.cuh"
#include "emily_fft.h"

#include <cufft.h>

#include <mutex>

namespace emc {

namespace {

const char *cufft_name(cufftResult r) {
    switch (r) {
    case CUFFT_INVALID_PLAN:
        return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED:
        return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_VALUE:
        return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR:
        return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED:
        return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED:
        return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE:
        return "CUFFT_INVALID_SIZE";
    default:
        return "cuFFT error";
    }
}

int cufft_fail(cufftResult r, const char *what) {
    return fail(r == CUFFT_ALLOC_FAILED ? EM_ERR_OOM : EM_ERR_RUNTIME,
                "fft: %s failed: %s", what, cufft_name(r));
}

#define EMC_CUFFT(call)                                                        \
    do {                                                                       \
        cufftResult r_ = (call);                                               \
        if (r_ != CUFFT_SUCCESS)                                               \
            return cufft_fail(r_, #call);                                      \
    } while (0)

// ---- plan cache ----------------------------------------------------------

struct Plan {
    int dev = -1;
    cufftType type{};
    long long n = 0, rows = 0;
    cufftHandle handle = 0;
    size_t work = 0;
    unsigned long long used = 0; // for least-recently-used eviction
};

constexpr int PLAN_CACHE = 16;
Plan plans[PLAN_CACHE];
unsigned long long plan_clock;
// Guards the cache and every use of a cached plan (its stream and work
// area are set just before its exec).
std::mutex plan_lock;

// The cached plan for (dev, type, n, rows), made on a miss (evicting the
// least recently used). Called with plan_lock held.
int get_plan(int dev, cufftType type, long long n, long long rows, Plan **out) {
    Plan *victim = &plans[0];
    for (Plan &p : plans) {
        if (p.handle && p.dev == dev && p.type == type && p.n == n &&
            p.rows == rows) {
            p.used = ++plan_clock;
            *out = &p;
            return 0;
        }
        if (!p.handle || (victim->handle && p.used < victim->used))
            victim = &p;
    }
    if (victim->handle) {
        cufftDestroy(victim->handle);
        victim->handle = 0;
    }
    cufftHandle h;
    EMC_CUFFT(cufftCreate(&h));
    size_t work = 0;
    cufftResult r = cufftSetAutoAllocation(h, 0);
    if (r == CUFFT_SUCCESS)
        r = cufftMakePlanMany64(h, 1, &n, nullptr, 1, 0, nullptr, 1, 0, type,
                                rows, &work);
    if (r != CUFFT_SUCCESS) {
        cufftDestroy(h);
        return cufft_fail(r, "cufftMakePlanMany64");
    }
    victim->dev = dev;
    victim->type = type;
    victim->n = n;
    victim->rows = rows;
    victim->handle = h;
    victim->work = work;
    victim->used = ++plan_clock;
    *out = victim;
    return 0;
}

// ---- gather and store kernels --------------------------------------------

// Offset of row r's first element (row r unravelled over oshape).
__device__ __forceinline__ int64_t row_offset(const em_cuda_fft &j, int64_t r,
                                              const int64_t *strides) {
    int64_t off = 0;
    for (int d = j.nouter - 1; d >= 0; d--) {
        int64_t i = r % j.oshape[d];
        r /= j.oshape[d];
        off += i * strides[d];
    }
    return off;
}

template <class T> struct Real {
    using type = T;
};
template <class T> struct Real<cuda::std::complex<T>> {
    using type = T;
};

template <class T> __device__ __forceinline__ void split(T v, double &re, double &im) {
    if constexpr (std::is_floating_point_v<T>) {
        re = v;
        im = 0;
    } else {
        re = v.real();
        im = v.imag();
    }
}

// Scratch row element t of row r (rows of len entries): the input row cut
// or zero padded, as buffer type B (real for R2C, else complex).
template <class In, class B>
__global__ void fft_gather(em_cuda_fft j, const In *in, B *buf, int64_t len,
                           int hermitian) {
    int64_t total = j.rows * len;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e / len, t = e % len;
        double re = 0, im = 0;
        if (t < j.in_len)
            split(in[row_offset(j, r, j.istride) + t * j.in_stride], re, im);
        if (hermitian && (t == 0 || 2 * t == j.n))
            im = 0;
        using R = typename Real<B>::type;
        if constexpr (std::is_floating_point_v<B>)
            buf[e] = (R)re;
        else
            buf[e] = B((R)re, (R)im);
    }
}

template <class R> __device__ __forceinline__ R clean(R x, R eps) {
    return fabs(x) < eps ? R(0) : x + R(0);
}

// Output element t of row r from the transformed batch (rows of len
// entries), scaled and cleaned.
template <class B, class Out>
__global__ void fft_store(em_cuda_fft j, const B *buf, Out *out, int64_t len,
                          double scale) {
    using R = typename Real<B>::type;
    R s = (R)scale, eps = (R)j.eps;
    int64_t total = j.rows * j.out_len;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e / j.out_len, t = e % j.out_len;
        B v = buf[r * len + t];
        Out *dst = out + row_offset(j, r, j.ostride) + t * j.out_stride;
        if constexpr (std::is_floating_point_v<B>) {
            *dst = clean(v * s, eps);
        } else if constexpr (std::is_floating_point_v<Out>) {
            *dst = clean(v.real() * s, eps);
        } else {
            *dst = Out(clean(v.real() * s, eps), clean(v.imag() * s, eps));
        }
    }
}

// The run for input storage type In and real precision R.
template <class In, class R>
int run_fft(int dev, Device *d, const em_cuda_fft *job) {
    using Cx = cuda::std::complex<R>;
    constexpr bool dbl = std::is_same_v<R, double>;
    constexpr bool real_in = std::is_floating_point_v<In>;
    const int64_t n = job->n, half = n / 2 + 1;
    const In *in = (const In *)job->in;
    cufftType type;
    int64_t in_len, out_len; // scratch row lengths before / after
    switch (job->mode) {
    case EM_FFT_RFFT:
        if (real_in) {
            type = dbl ? CUFFT_D2Z : CUFFT_R2C;
            in_len = n;
            out_len = half;
            break;
        }
        [[fallthrough]];
    case EM_FFT_FORWARD:
    case EM_FFT_INVERSE:
        type = dbl ? CUFFT_Z2Z : CUFFT_C2C;
        in_len = out_len = n;
        break;
    case EM_FFT_IRFFT:
        type = dbl ? CUFFT_Z2D : CUFFT_C2R;
        in_len = half;
        out_len = n;
        break;
    default:
        return fail(EM_ERR_ARGUMENT, "fft: invalid mode %d", job->mode);
    }
    // A transform of length 1 is the identity: no plan (irfft then keeps
    // the real part, which the store does for a real output).
    const bool identity = n == 1;
    const bool r2c = !identity && (type == CUFFT_R2C || type == CUFFT_D2Z);
    const bool c2r = !identity && (type == CUFFT_C2R || type == CUFFT_Z2D);
    if (identity)
        in_len = out_len = 1;
    const size_t in_bytes = (size_t)(job->rows * in_len) * (r2c ? sizeof(R) : sizeof(Cx));
    const size_t out_bytes = (size_t)(job->rows * out_len) * (c2r ? sizeof(R) : sizeof(Cx));
    Scratch a(d->stream), b(d->stream), work(d->stream);
    EMC_TRY(a.alloc(in_bytes));
    void *result = a.p; // C2C runs in place
    if (r2c || c2r) {
        EMC_TRY(b.alloc(out_bytes));
        result = b.p;
    }
    unsigned grid = grid_for(d, job->rows * in_len);
    if (r2c)
        fft_gather<In, R><<<grid, 256, 0, d->stream>>>(*job, in, (R *)a.p, in_len, 0);
    else
        fft_gather<In, Cx><<<grid, 256, 0, d->stream>>>(*job, in, (Cx *)a.p, in_len,
                                                        c2r);
    EMC_LAUNCHED("fft gather kernel");
    if (!identity) {
        std::lock_guard<std::mutex> g(plan_lock);
        Plan *p;
        int rc = get_plan(dev, type, n, job->rows, &p);
        if (rc)
            return rc;
        EMC_TRY(work.alloc(p->work));
        EMC_CUFFT(cufftSetWorkArea(p->handle, work.p));
        EMC_CUFFT(cufftSetStream(p->handle, d->stream));
        int dir = job->mode == EM_FFT_INVERSE ? CUFFT_INVERSE : CUFFT_FORWARD;
        if constexpr (dbl) {
            if (r2c)
                EMC_CUFFT(cufftExecD2Z(p->handle, (cufftDoubleReal *)a.p,
                                       (cufftDoubleComplex *)result));
            else if (c2r)
                EMC_CUFFT(cufftExecZ2D(p->handle, (cufftDoubleComplex *)a.p,
                                       (cufftDoubleReal *)result));
            else
                EMC_CUFFT(cufftExecZ2Z(p->handle, (cufftDoubleComplex *)a.p,
                                       (cufftDoubleComplex *)result, dir));
        } else {
            if (r2c)
                EMC_CUFFT(cufftExecR2C(p->handle, (cufftReal *)a.p,
                                       (cufftComplex *)result));
            else if (c2r)
                EMC_CUFFT(cufftExecC2R(p->handle, (cufftComplex *)a.p,
                                       (cufftReal *)result));
            else
                EMC_CUFFT(cufftExecC2C(p->handle, (cufftComplex *)a.p,
                                       (cufftComplex *)result, dir));
        }
    }
    double scale = job->mode == EM_FFT_INVERSE || job->mode == EM_FFT_IRFFT ? 1.0 / (double)n : 1.0;
    grid = grid_for(d, job->rows * job->out_len);
    if (c2r)
        fft_store<R, R><<<grid, 256, 0, d->stream>>>(*job, (const R *)result,
                                                     (R *)job->out, out_len, scale);
    else if (job->mode == EM_FFT_IRFFT) // length 1: the real part
        fft_store<Cx, R><<<grid, 256, 0, d->stream>>>(
            *job, (const Cx *)result, (R *)job->out, out_len, scale);
    else
        fft_store<Cx, Cx><<<grid, 256, 0, d->stream>>>(
            *job, (const Cx *)result, (Cx *)job->out, out_len, scale);
    EMC_LAUNCHED("fft store kernel");
    return 0;
}

} // namespace

int launch_fft(int dev, Device *d, const em_cuda_fft *job) {
    switch (job->dtype_in) {
    case EM_F32:
        return run_fft<float, float>(dev, d, job);
    case EM_F64:
        return run_fft<double, double>(dev, d, job);
    case EM_C64:
        return run_fft<c64, float>(dev, d, job);
    case EM_C128:
        return run_fft<c128, double>(dev, d, job);
    default:
        return fail(EM_ERR_ARGUMENT, "fft: dtype %d is not f32, f64, c64 or c128",
                    job->dtype_in);
    }
}

} // namespace emc
