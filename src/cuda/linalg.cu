// linalg.cu — the linalg ops on the GPU: cuSOLVER's 64-bit dense API
// (cusolverDnX*: potrf, getrf/getrs, geqrf, syevd (Hermitian too), gesvd),
// the legacy orgqr/ungqr (no 64-bit version), cuBLAS trsm.
//
// cuSOLVER is column-major: each input matrix is gathered (any layout, one
// thread per element) into a column-major scratch batch, factorized there
// one matrix after another on the device's stream, and small kernels write
// the parts in the CPU's packing (linalg.c: [q | r], [p | l | u], [w | v],
// [u | s | vt] or the one result, row-major per matrix) with the CPU's
// conventions:
//   - LAPACKE checks its inputs for NaN and the CPU then fills the whole
//     result of that matrix with NaN (no error): a kernel flags matrices
//     with a NaN where LAPACKE looks (cholesky, eigh: the lower triangle;
//     triangular_solve: a's triangle and b; the others everything) and
//     the store kernels write NaN for them;
//   - invert of a singular matrix and an eigh/svd that does not converge
//     give NaN (from cuSOLVER's info, on the device: no synchronisation);
//   - cholesky (not positive definite), solve and triangular_solve
//     (singular: an exactly zero pivot / diagonal) are errors: those ops
//     synchronise and read the info back (`failed` in the job);
//   - qr scales row j of r and column j of q by the unit factor that
//     gives Nx's diagonal (linalg.c's qr_unit: from r_jj and tau_j);
//   - svd of a wide matrix (m < n) is the svd of its transpose with the
//     factors swapped (cuSOLVER's gesvd wants m >= n).
// Handles (cuSOLVER, cuBLAS) live per device, created on first use and
// bound to the device's stream on every call; workspaces come from
// cudaMallocAsync on the stream.
#include "common.cuh"

#include <cublas_v2.h>
#include <cusolverDn.h>

#include <cuda/std/limits>
#include <climits>
#include <mutex>
#include <vector>

namespace emc {

namespace {

// ---- handles -------------------------------------------------------------

struct Handles {
    cusolverDnHandle_t solver = nullptr;
    cusolverDnParams_t params = nullptr;
    cublasHandle_t blas = nullptr;
};
Handles handles[EM_DEVICE_MAX_GPUS];
std::mutex locks[EM_DEVICE_MAX_GPUS];

int solver_fail(cusolverStatus_t s, const char *what) {
    return fail(s == CUSOLVER_STATUS_ALLOC_FAILED ? EM_ERR_OOM : EM_ERR_RUNTIME,
                "%s failed (cuSOLVER status %d)", what, (int)s);
}
int blas_fail(cublasStatus_t s, const char *what) {
    return fail(s == CUBLAS_STATUS_ALLOC_FAILED ? EM_ERR_OOM : EM_ERR_RUNTIME,
                "%s failed (cuBLAS status %d)", what, (int)s);
}

#define EMC_SOLVER(call)                                                       \
    do {                                                                       \
        cusolverStatus_t s_ = (call);                                          \
        if (s_ != CUSOLVER_STATUS_SUCCESS)                                     \
            return solver_fail(s_, #call);                                     \
    } while (0)
#define EMC_BLAS(call)                                                         \
    do {                                                                       \
        cublasStatus_t s_ = (call);                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                       \
            return blas_fail(s_, #call);                                       \
    } while (0)

// The device's handles (created on first use), bound to its stream. Called
// with the device's lock held.
int get_handles(int dev, Device *d, Handles **out) {
    Handles &h = handles[dev];
    if (!h.solver)
        EMC_SOLVER(cusolverDnCreate(&h.solver));
    if (!h.params)
        EMC_SOLVER(cusolverDnCreateParams(&h.params));
    if (!h.blas)
        EMC_BLAS(cublasCreate(&h.blas));
    EMC_SOLVER(cusolverDnSetStream(h.solver, d->stream));
    EMC_BLAS(cublasSetStream(h.blas, d->stream));
    *out = &h;
    return 0;
}

// ---- element helpers ---------------------------------------------------------

template <class T> struct Tr {
    using R = T;
    static constexpr bool cpx = false;
};
template <class R_> struct Tr<cuda::std::complex<R_>> {
    using R = R_;
    static constexpr bool cpx = true;
};

template <class T> __device__ __forceinline__ T nan_v() {
    using R = typename Tr<T>::R;
    R q = cuda::std::numeric_limits<R>::quiet_NaN();
    if constexpr (Tr<T>::cpx)
        return T(q, q);
    else
        return q;
}
template <class T> __device__ __forceinline__ bool isnan_v(T v) {
    if constexpr (Tr<T>::cpx)
        return isnan(v.real()) || isnan(v.imag());
    else
        return isnan(v);
}

// Grid-stride loop over n items calling f(i).
template <class F> __global__ void each(int64_t n, F f) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        f(i);
}

template <class F> int launch_each(Device *d, int64_t n, F f) {
    if (n <= 0)
        return 0;
    each<<<grid_for(d, n), 256, 0, d->stream>>>(n, f);
    EMC_LAUNCHED("linalg kernel");
    return 0;
}

// An input matrix batch: matrix b at the batch offset, element (i, j) at
// i * rs + j * cs.
struct Mat {
    int nb;
    int64_t bshape[EM_CUDA_MAX_NDIM], bstride[EM_CUDA_MAX_NDIM];
    int64_t rs, cs;
};

__device__ __forceinline__ int64_t batch_offset(const Mat &m, int64_t b) {
    int64_t off = 0;
    for (int d = m.nb - 1; d >= 0; d--) {
        off += (b % m.bshape[d]) * m.bstride[d];
        b /= m.bshape[d];
    }
    return off;
}

// ---- kernels (functors for `each`) -------------------------------------

// dst: column-major R x C per matrix.
template <class T> struct Pack {
    Mat m;
    const T *src;
    T *dst;
    int64_t R, C;
    __device__ void operator()(int64_t e) const {
        int64_t per = R * C, b = e / per, t = e % per;
        int64_t i = t % R, j = t / R;
        dst[e] = src[batch_offset(m, b) + i * m.rs + j * m.cs];
    }
};

// flag[b] = 1 when the column-major R x C matrix b has a NaN in the region
// LAPACKE checks (tri 0: all; 1: lower, i >= j; 2: upper, i <= j).
template <class T> struct NanFlag {
    const T *w;
    int64_t R, C;
    int tri;
    int *flag;
    __device__ void operator()(int64_t e) const {
        int64_t per = R * C, b = e / per, t = e % per;
        int64_t i = t % R, j = t / R;
        bool in = tri == 0 || (tri == 1 ? i >= j : i <= j);
        if (in && isnan_v(w[e]))
            flag[b] = 1;
    }
};

// out[b * per + off + row-major (i, j) of R x C] = column-major src (i, j)
// (leading dimension ld, src_per elements per matrix), or NaN when the
// matrix is flagged or its info is not 0.
template <class T> struct ColToRow {
    const T *src;
    int64_t src_per, ld;
    T *out;
    int64_t per, off, R, C;
    const int *flag, *info;
    __device__ void operator()(int64_t e) const {
        int64_t rc = R * C, b = e / rc, t = e % rc, i = t / C, j = t % C;
        T v = src[b * src_per + i + j * ld];
        if (flag[b] || (info && info[b]))
            v = nan_v<T>();
        out[b * per + off + i * C + j] = v;
    }
};

// cholesky: the lower triangle, zeros above.
template <class T> struct CholStore {
    const T *w;
    T *out;
    int64_t n;
    const int *flag;
    __device__ void operator()(int64_t e) const {
        int64_t nn = n * n, b = e / nn, t = e % nn, i = t / n, j = t % n;
        T v = j <= i ? w[b * nn + i + j * n] : T(0);
        out[e] = flag[b] ? nan_v<T>() : v;
    }
};

// eigh: the eigenvalues as the dtype (imaginary part 0).
template <class T> struct EigValues {
    const typename Tr<T>::R *w;
    T *out;
    int64_t n, per;
    const int *flag, *info;
    __device__ void operator()(int64_t e) const {
        int64_t b = e / n, t = e % n;
        out[b * per + t] = flag[b] || info[b] ? nan_v<T>() : T(w[e]);
    }
};

// LAPACK's pivots (1-based row swaps) as the permutation linalg.c builds.
template <class P> struct Perm {
    const P *ipiv;
    int64_t *perm;
    int64_t n;
    __device__ void operator()(int64_t b) const {
        const P *ip = ipiv + b * n;
        int64_t *p = perm + b * n;
        for (int64_t i = 0; i < n; i++)
            p[i] = i;
        for (int64_t i = 0; i < n; i++) {
            int64_t t = p[i], s = ip[i] - 1;
            p[i] = p[s];
            p[s] = t;
        }
    }
};

// lu: [p | l | u], p(r, c) = 1 where perm[c] == r.
template <class T> struct LuStore {
    const T *w;
    const int64_t *perm;
    T *out;
    int64_t n;
    const int *flag;
    __device__ void operator()(int64_t e) const {
        int64_t nn = n * n, b = e / (3 * nn), t = e % (3 * nn);
        int64_t part = t / nn, s = t % nn, i = s / n, j = s % n;
        T v;
        if (part == 0)
            v = perm[b * n + j] == i ? T(1) : T(0);
        else if (part == 1)
            v = j < i ? w[b * nn + i + j * n] : i == j ? T(1) : T(0);
        else
            v = j >= i ? w[b * nn + i + j * n] : T(0);
        out[e] = flag[b] ? nan_v<T>() : v;
    }
};

// determinant: the product of u's diagonal, negated per row swap, in the
// CPU's order.
template <class T, class P> struct Det {
    const T *w;
    const P *ipiv;
    T *out;
    int64_t n;
    const int *flag;
    __device__ void operator()(int64_t b) const {
        T d = T(1);
        for (int64_t i = 0; i < n; i++) {
            d *= w[b * n * n + i + i * n];
            if (ipiv[b * n + i] != i + 1)
                d = -d;
        }
        out[b] = flag[b] ? nan_v<T>() : d;
    }
};

template <class T> struct Identity {
    T *dst;
    int64_t n;
    __device__ void operator()(int64_t e) const {
        int64_t t = e % (n * n);
        dst[e] = t % n == t / n ? T(1) : T(0);
    }
};

// info[b] = 1 when the triangular matrix b has an exactly zero diagonal
// entry (LAPACK trtrs's singularity test).
template <class T> struct ZeroDiag {
    const T *w;
    int64_t n;
    int *info;
    __device__ void operator()(int64_t e) const {
        int64_t b = e / n, i = e % n;
        if (w[b * n * n + i + i * n] == T(0))
            info[b] = 1;
    }
};

// The unit factor taking geqrf's r_jj = beta to Nx's r_jj: linalg.c's
// qr_unit (which says why), in the element type.
template <class T>
__device__ T qr_unit(T diag, T tau, bool processed) {
    if constexpr (!Tr<T>::cpx) {
        return tau != T(0) && diag < T(0) ? T(-1) : T(1);
    } else {
        using R = typename Tr<T>::R;
        R beta = diag.real();
        if (beta == R(0))
            return T(1);
        T alpha = beta * (T(1) - tau);
        if (!processed)
            return alpha / beta;
        R mag = cuda::std::abs(alpha);
        T unit = mag == R(0) ? T(1) : alpha / mag;
        return -unit * (cuda::std::fabs(beta) / beta);
    }
}

template <class T> __device__ __forceinline__ T conj_v(T v) {
    if constexpr (Tr<T>::cpx)
        return cuda::std::conj(v);
    else
        return v;
}

// qr: [q | r] from geqrf's w (m x n) and orgqr's q (m x qc), both
// column-major; column j of q times conj(d_j), row j of r times d_j, with
// d_j = qr_unit (Nx's convention, as the CPU).
template <class T> struct QrStore {
    const T *w, *q, *tau;
    T *out;
    int64_t m, n, k, qc, per;
    const int *flag;
    __device__ T unit(int64_t b, int64_t j) const {
        return qr_unit(w[b * m * n + j + j * m], tau[b * k + j], !(m == n && j == n - 1));
    }
    __device__ void operator()(int64_t e) const {
        int64_t b = e / per, t = e % per;
        T v;
        if (t < m * qc) {
            int64_t i = t / qc, j = t % qc;
            v = k == 0 ? (i == j ? T(1) : T(0)) : q[b * m * qc + i + j * m];
            if (j < k)
                v = v * conj_v(unit(b, j)) + T(0); // + 0: no -0.0
        } else {
            t -= m * qc;
            int64_t i = t / n, j = t % n;
            v = i < k && j >= i ? w[b * m * n + i + j * m] : T(0);
            if (i < k)
                v = v * unit(b, i) + T(0);
        }
        out[e] = flag[b] ? nan_v<T>() : v;
    }
};

// svd: [u | s | vt] from gesvd of c (M x N, M >= N = k): c = a (tall) or
// aᵀ (wide: a's u is c's vᵀ transposed and a's vt is c's u transposed).
// uc (M x ucc) and vtc (N x N) column-major.
template <class T> struct SvdStore {
    const T *uc, *vtc;
    const T *s;
    T *out;
    int64_t m, n, k, ucols, M, ucc, per;
    bool tall;
    const int *flag, *info;
    __device__ void operator()(int64_t e) const {
        int64_t b = e / per, t = e % per;
        const T *u = uc + b * M * ucc, *vt = vtc + b * k * k;
        T v;
        if (t < m * ucols) {
            int64_t i = t / ucols, j = t % ucols;
            v = k == 0 ? (i == j ? T(1) : T(0))
                : tall ? u[i + j * M]
                       : vt[j + i * k];
        } else if (t < m * ucols + k) {
            v = s[b * k + t - m * ucols];
        } else {
            t -= m * ucols + k;
            int64_t i = t / n, j = t % n;
            v = k == 0 ? (i == j ? T(1) : T(0))
                : tall ? vt[i + j * k]
                       : u[j + i * M];
        }
        out[e] = flag[b] || (k > 0 && info[b]) ? nan_v<T>() : v;
    }
};

// The pointer array of a batch (the batched cuBLAS / cuSOLVER calls).
template <class T> struct Ptrs {
    T *base;
    int64_t stride;
    T **out;
    __device__ void operator()(int64_t b) const { out[b] = base + b * stride; }
};

// ---- dtypes --------------------------------------------------------------

template <int D> struct LA;
template <> struct LA<EM_F32> {
    using T = float;
    static constexpr cudaDataType ty = CUDA_R_32F, rty = CUDA_R_32F;
};
template <> struct LA<EM_F64> {
    using T = double;
    static constexpr cudaDataType ty = CUDA_R_64F, rty = CUDA_R_64F;
};
template <> struct LA<EM_C64> {
    using T = c64;
    static constexpr cudaDataType ty = CUDA_C_32F, rty = CUDA_R_32F;
};
template <> struct LA<EM_C128> {
    using T = c128;
    static constexpr cudaDataType ty = CUDA_C_64F, rty = CUDA_R_64F;
};

// The typed legacy calls (orgqr/ungqr, trsm).
int orgqr_size(cusolverDnHandle_t h, int m, int n, int k, float *a, int lda,
               const float *tau, int *lw) {
    EMC_SOLVER(cusolverDnSorgqr_bufferSize(h, m, n, k, a, lda, tau, lw));
    return 0;
}
int orgqr_size(cusolverDnHandle_t h, int m, int n, int k, double *a, int lda,
               const double *tau, int *lw) {
    EMC_SOLVER(cusolverDnDorgqr_bufferSize(h, m, n, k, a, lda, tau, lw));
    return 0;
}
int orgqr_size(cusolverDnHandle_t h, int m, int n, int k, c64 *a, int lda,
               const c64 *tau, int *lw) {
    EMC_SOLVER(cusolverDnCungqr_bufferSize(h, m, n, k, (cuComplex *)a, lda,
                                           (const cuComplex *)tau, lw));
    return 0;
}
int orgqr_size(cusolverDnHandle_t h, int m, int n, int k, c128 *a, int lda,
               const c128 *tau, int *lw) {
    EMC_SOLVER(cusolverDnZungqr_bufferSize(h, m, n, k, (cuDoubleComplex *)a,
                                           lda, (const cuDoubleComplex *)tau,
                                           lw));
    return 0;
}
int orgqr(cusolverDnHandle_t h, int m, int n, int k, float *a, int lda,
          const float *tau, float *w, int lw, int *info) {
    EMC_SOLVER(cusolverDnSorgqr(h, m, n, k, a, lda, tau, w, lw, info));
    return 0;
}
int orgqr(cusolverDnHandle_t h, int m, int n, int k, double *a, int lda,
          const double *tau, double *w, int lw, int *info) {
    EMC_SOLVER(cusolverDnDorgqr(h, m, n, k, a, lda, tau, w, lw, info));
    return 0;
}
int orgqr(cusolverDnHandle_t h, int m, int n, int k, c64 *a, int lda,
          const c64 *tau, c64 *w, int lw, int *info) {
    EMC_SOLVER(cusolverDnCungqr(h, m, n, k, (cuComplex *)a, lda,
                                (const cuComplex *)tau, (cuComplex *)w, lw,
                                info));
    return 0;
}
int orgqr(cusolverDnHandle_t h, int m, int n, int k, c128 *a, int lda,
          const c128 *tau, c128 *w, int lw, int *info) {
    EMC_SOLVER(cusolverDnZungqr(h, m, n, k, (cuDoubleComplex *)a, lda,
                                (const cuDoubleComplex *)tau,
                                (cuDoubleComplex *)w, lw, info));
    return 0;
}

#define EMC_TRSM_ARGS                                                          \
    cublasHandle_t h, cublasSideMode_t side, cublasFillMode_t uplo,            \
        cublasOperation_t op, int m, int n
int trsm(EMC_TRSM_ARGS, const float *a, int lda, float *b, int ldb) {
    const float one = 1;
    EMC_BLAS(cublasStrsm(h, side, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n, &one,
                         a, lda, b, ldb));
    return 0;
}
int trsm(EMC_TRSM_ARGS, const double *a, int lda, double *b, int ldb) {
    const double one = 1;
    EMC_BLAS(cublasDtrsm(h, side, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n, &one,
                         a, lda, b, ldb));
    return 0;
}
int trsm(EMC_TRSM_ARGS, const c64 *a, int lda, c64 *b, int ldb) {
    const cuComplex one = {1, 0};
    EMC_BLAS(cublasCtrsm(h, side, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n, &one,
                         (const cuComplex *)a, lda, (cuComplex *)b, ldb));
    return 0;
}
int trsm(EMC_TRSM_ARGS, const c128 *a, int lda, c128 *b, int ldb) {
    const cuDoubleComplex one = {1, 0};
    EMC_BLAS(cublasZtrsm(h, side, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n, &one,
                         (const cuDoubleComplex *)a, lda, (cuDoubleComplex *)b,
                         ldb));
    return 0;
}

// Batched calls for many small matrices (one launch for the batch instead
// of one solver call per matrix): cuBLAS getrf/getrs/trsm, cuSOLVER potrf.
#define EMC_BATCHED(T, S, CT)                                                  \
    int getrf_batched(cublasHandle_t h, int n, T *const *a, int *piv,          \
                      int *info, int batch) {                                  \
        EMC_BLAS(cublas##S##getrfBatched(h, n, (CT *const *)a, n, piv, info,  \
                                         batch));                              \
        return 0;                                                              \
    }                                                                          \
    int getrs_batched(cublasHandle_t h, int n, int nrhs, T *const *a,          \
                      const int *piv, T *const *b, int batch) {                \
        int hinfo = 0;                                                         \
        EMC_BLAS(cublas##S##getrsBatched(h, CUBLAS_OP_N, n, nrhs,              \
                                         (const CT *const *)a, n, piv,         \
                                         (CT *const *)b, n, &hinfo, batch));   \
        return 0;                                                              \
    }                                                                          \
    int trsm_batched(EMC_TRSM_ARGS, T *const *a, int lda, T *const *b,         \
                     int ldb, int batch) {                                     \
        const CT one = one_of<CT>();                                           \
        EMC_BLAS(cublas##S##trsmBatched(h, side, uplo, op,                     \
                                        CUBLAS_DIAG_NON_UNIT, m, n, &one,      \
                                        (const CT *const *)a, lda,             \
                                        (CT *const *)b, ldb, batch));          \
        return 0;                                                              \
    }                                                                          \
    int potrf_batched(cusolverDnHandle_t h, int n, T *const *a, int *info,     \
                      int batch) {                                             \
        EMC_SOLVER(cusolverDn##S##potrfBatched(h, CUBLAS_FILL_MODE_LOWER, n,   \
                                               (CT **)a, n, info, batch));     \
        return 0;                                                              \
    }
template <class CT> CT one_of() {
    if constexpr (std::is_same_v<CT, cuComplex>)
        return make_cuComplex(1, 0);
    else if constexpr (std::is_same_v<CT, cuDoubleComplex>)
        return make_cuDoubleComplex(1, 0);
    else
        return CT(1);
}
EMC_BATCHED(float, S, float)
EMC_BATCHED(double, D, double)
EMC_BATCHED(c64, C, cuComplex)
EMC_BATCHED(c128, Z, cuDoubleComplex)
#undef EMC_BATCHED

// Batches of at least 2 matrices up to this order go through the batched
// calls; larger matrices are factorized one by one (the 64-bit API).
constexpr int64_t BATCHED_MAX_N = 256;

#define EMC_RC(call)                                                           \
    do {                                                                       \
        int rc_ = (call);                                                      \
        if (rc_)                                                               \
            return rc_;                                                        \
    } while (0)

// Workspaces of one cusolverDnX* call, reused across the batch.
struct Work {
    Scratch dev;
    std::vector<char> host;
    size_t dev_bytes = 0;
    explicit Work(cudaStream_t s) : dev(s) {}
    int alloc(size_t d, size_t h) {
        dev_bytes = d;
        EMC_TRY(dev.alloc(d));
        host.resize(h ? h : 1);
        return 0;
    }
};

// The first matrix whose info (not NaN-flagged) reports a value failure,
// or -1 (synchronises).
int first_failed(Device *d, const int *info, const int *flag, int64_t batch,
                 int64_t *failed) {
    std::vector<int> hi((size_t)batch), hf((size_t)batch);
    EMC_TRY(cudaMemcpyAsync(hi.data(), info, sizeof(int) * (size_t)batch,
                            cudaMemcpyDeviceToHost, d->stream));
    EMC_TRY(cudaMemcpyAsync(hf.data(), flag, sizeof(int) * (size_t)batch,
                            cudaMemcpyDeviceToHost, d->stream));
    EMC_TRY(cudaStreamSynchronize(d->stream));
    *failed = -1;
    for (int64_t b = 0; b < batch; b++)
        if (hi[(size_t)b] > 0 && !hf[(size_t)b]) {
            *failed = b;
            break;
        }
    return 0;
}

template <int D>
int run_linalg(Device *d, Handles *h, em_cuda_linalg *j) {
    using T = typename LA<D>::T;
    using R = typename Tr<T>::R;
    constexpr cudaDataType ty = LA<D>::ty;
    cudaStream_t st = d->stream;
    const int64_t B = j->batch, m = j->m, n = j->n, k = j->k;
    T *out = (T *)j->out;
    Mat A{}, Bm{};
    A.nb = Bm.nb = j->nbatch_dims;
    for (int i = 0; i < j->nbatch_dims; i++) {
        A.bshape[i] = Bm.bshape[i] = j->bshape[i];
        A.bstride[i] = j->a_bstride[i];
        Bm.bstride[i] = j->b_bstride[i];
    }
    A.rs = j->a_rs;
    A.cs = j->a_cs;
    Bm.rs = j->b_rs;
    Bm.cs = j->b_cs;

    Scratch flag_s(st), info_s(st);
    EMC_TRY(flag_s.alloc(sizeof(int) * (size_t)B));
    EMC_TRY(info_s.alloc(sizeof(int) * (size_t)B));
    int *flag = (int *)flag_s.p, *info = (int *)info_s.p;
    EMC_TRY(cudaMemsetAsync(flag, 0, sizeof(int) * (size_t)B, st));
    EMC_TRY(cudaMemsetAsync(info, 0, sizeof(int) * (size_t)B, st));

    // a gathered column-major: rows x cols per matrix (svd of a wide
    // matrix: its transpose).
    const bool wide = j->op == EM_CUDA_SVD && m < n;
    const int64_t rows = wide ? n : m, cols = wide ? m : n, per_a = rows * cols;
    Scratch wa(st);
    EMC_TRY(wa.alloc(sizeof(T) * (size_t)(B * per_a)));
    T *w = (T *)wa.p;
    Mat Aw = A;
    if (wide) {
        Aw.rs = A.cs;
        Aw.cs = A.rs;
    }
    EMC_RC(launch_each(d, B * per_a, Pack<T>{Aw, (const T *)j->a, w, rows, cols}));
    int tri = j->op == EM_CUDA_CHOLESKY || j->op == EM_CUDA_EIGH ? 1
              : j->op == EM_CUDA_TRSOLVE ? (j->lower ? 1 : 2)
                                         : 0;
    EMC_RC(launch_each(d, B * per_a, NanFlag<T>{w, rows, cols, tri, flag}));

    // the right-hand side, column-major: n x k (left) or k x n (right)
    Scratch wb(st);
    T *x = nullptr;
    const int64_t xr = j->left ? n : k, xc = j->left ? k : n;
    if (j->op == EM_CUDA_SOLVE || j->op == EM_CUDA_TRSOLVE) {
        EMC_TRY(wb.alloc(sizeof(T) * (size_t)(B * n * k)));
        x = (T *)wb.p;
        EMC_RC(launch_each(d, B * n * k, Pack<T>{Bm, (const T *)j->b, x, xr, xc}));
        EMC_RC(launch_each(d, B * n * k, NanFlag<T>{x, xr, xc, 0, flag}));
    }
    if (j->per == 0)
        return 0;

    Work work(st);
    switch (j->op) {
    case EM_CUDA_CHOLESKY: {
        if (n > 0 && B > 1 && n <= BATCHED_MAX_N) {
            Scratch aptr_s(st);
            EMC_TRY(aptr_s.alloc(sizeof(T *) * (size_t)B));
            EMC_RC(launch_each(d, B, Ptrs<T>{w, n * n, (T **)aptr_s.p}));
            EMC_RC(potrf_batched(h->solver, (int)n, (T *const *)aptr_s.p, info,
                                 (int)B));
        } else if (n > 0) {
            size_t db = 0, hb = 0;
            EMC_SOLVER(cusolverDnXpotrf_bufferSize(h->solver, h->params,
                                                   CUBLAS_FILL_MODE_LOWER, n, ty,
                                                   w, n, ty, &db, &hb));
            EMC_RC(work.alloc(db, hb));
            for (int64_t b = 0; b < B; b++)
                EMC_SOLVER(cusolverDnXpotrf(
                    h->solver, h->params, CUBLAS_FILL_MODE_LOWER, n, ty,
                    w + b * n * n, n, ty, work.dev.p, db, work.host.data(), hb,
                    info + b));
        }
        EMC_RC(launch_each(d, B * n * n, CholStore<T>{w, out, n, flag}));
        return first_failed(d, info, flag, B, &j->failed);
    }
    case EM_CUDA_LU:
    case EM_CUDA_DET:
    case EM_CUDA_INV:
    case EM_CUDA_SOLVE: {
        const bool batched = B > 1 && n <= BATCHED_MAX_N;
        Scratch ipiv_s(st), aptr_s(st), bptr_s(st), ident(st), info2_s(st);
        EMC_TRY(ipiv_s.alloc((batched ? sizeof(int) : sizeof(int64_t)) *
                             (size_t)(B * n)));
        EMC_TRY(info2_s.alloc(sizeof(int) * (size_t)B));
        int *info2 = (int *)info2_s.p;
        int64_t nrhs = k;
        if (j->op == EM_CUDA_INV) {
            EMC_TRY(ident.alloc(sizeof(T) * (size_t)(B * n * n)));
            x = (T *)ident.p;
            nrhs = n;
            EMC_RC(launch_each(d, B * n * n, Identity<T>{x, n}));
        }
        T **aptr = nullptr, **bptr = nullptr;
        if (batched) {
            EMC_TRY(aptr_s.alloc(sizeof(T *) * (size_t)B));
            EMC_TRY(bptr_s.alloc(sizeof(T *) * (size_t)B));
            aptr = (T **)aptr_s.p;
            bptr = (T **)bptr_s.p;
            EMC_RC(launch_each(d, B, Ptrs<T>{w, n * n, aptr}));
            if (x)
                EMC_RC(launch_each(d, B, Ptrs<T>{x, n * nrhs, bptr}));
            if (n > 0)
                EMC_RC(getrf_batched(h->blas, (int)n, aptr, (int *)ipiv_s.p, info,
                                     (int)B));
        } else if (n > 0) {
            size_t db = 0, hb = 0;
            EMC_SOLVER(cusolverDnXgetrf_bufferSize(h->solver, h->params, n, n,
                                                   ty, w, n, ty, &db, &hb));
            EMC_RC(work.alloc(db, hb));
            for (int64_t b = 0; b < B; b++)
                EMC_SOLVER(cusolverDnXgetrf(h->solver, h->params, n, n, ty,
                                            w + b * n * n, n,
                                            (int64_t *)ipiv_s.p + b * n, ty,
                                            work.dev.p, db, work.host.data(), hb,
                                            info + b));
        }
        // The rest for either pivot type (int: batched, int64_t: 64-bit API).
        auto finish = [&]<class P>(const P *ipiv) -> int {
            if (j->op == EM_CUDA_DET)
                return launch_each(d, B, Det<T, P>{w, ipiv, out, n, flag});
            if (j->op == EM_CUDA_LU) {
                Scratch perm_s(st);
                EMC_TRY(perm_s.alloc(sizeof(int64_t) * (size_t)(B * n)));
                int64_t *perm = (int64_t *)perm_s.p;
                EMC_RC(launch_each(d, B, Perm<P>{ipiv, perm, n}));
                return launch_each(d, B * 3 * n * n,
                                   LuStore<T>{w, perm, out, n, flag});
            }
            if (n > 0 && nrhs > 0) {
                if constexpr (std::is_same_v<P, int>) {
                    EMC_RC(getrs_batched(h->blas, (int)n, (int)nrhs, aptr, ipiv,
                                         bptr, (int)B));
                } else {
                    for (int64_t b = 0; b < B; b++)
                        EMC_SOLVER(cusolverDnXgetrs(
                            h->solver, h->params, CUBLAS_OP_N, n, nrhs, ty,
                            w + b * n * n, n, ipiv + b * n, ty, x + b * n * nrhs,
                            n, info2 + b));
                }
            }
            if (j->op == EM_CUDA_INV)
                return launch_each(d, B * n * n,
                                   ColToRow<T>{x, n * n, n, out, n * n, 0, n, n,
                                               flag, info});
            EMC_RC(launch_each(d, B * n * k,
                               ColToRow<T>{x, n * k, n, out, n * k, 0, n, k, flag,
                                           nullptr}));
            return first_failed(d, info, flag, B, &j->failed);
        };
        if (batched)
            return finish.template operator()<int>((const int *)ipiv_s.p);
        return finish.template operator()<int64_t>((const int64_t *)ipiv_s.p);
    }
    case EM_CUDA_TRSOLVE: {
        if (n > 0 && k > 0 && B > 1 && n <= BATCHED_MAX_N) {
            Scratch aptr_s(st), bptr_s(st);
            EMC_TRY(aptr_s.alloc(sizeof(T *) * (size_t)B));
            EMC_TRY(bptr_s.alloc(sizeof(T *) * (size_t)B));
            EMC_RC(launch_each(d, B, Ptrs<T>{w, n * n, (T **)aptr_s.p}));
            EMC_RC(launch_each(d, B, Ptrs<T>{x, n * k, (T **)bptr_s.p}));
            EMC_RC(trsm_batched(h->blas, j->left ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT,
                                j->lower ? CUBLAS_FILL_MODE_LOWER
                                         : CUBLAS_FILL_MODE_UPPER,
                                j->trans ? CUBLAS_OP_T : CUBLAS_OP_N, (int)xr,
                                (int)xc, (T *const *)aptr_s.p, (int)n,
                                (T *const *)bptr_s.p, (int)xr, (int)B));
        } else if (n > 0 && k > 0)
            for (int64_t b = 0; b < B; b++)
                EMC_RC(trsm(h->blas, j->left ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT,
                            j->lower ? CUBLAS_FILL_MODE_LOWER
                                     : CUBLAS_FILL_MODE_UPPER,
                            j->trans ? CUBLAS_OP_T : CUBLAS_OP_N, (int)xr,
                            (int)xc, w + b * n * n, (int)n, x + b * n * k,
                            (int)xr));
        EMC_RC(launch_each(d, B * n, ZeroDiag<T>{w, n, info}));
        EMC_RC(launch_each(d, B * n * k,
                           ColToRow<T>{x, n * k, xr, out, n * k, 0, xr, xc, flag,
                                       nullptr}));
        return first_failed(d, info, flag, B, &j->failed);
    }
    case EM_CUDA_QR: {
        const int64_t kk = m < n ? m : n, qc = j->flag ? m : kk;
        Scratch tau_s(st), q_s(st), info2_s(st);
        EMC_TRY(tau_s.alloc(sizeof(T) * (size_t)(B * kk)));
        EMC_TRY(q_s.alloc(sizeof(T) * (size_t)(B * m * qc)));
        EMC_TRY(info2_s.alloc(sizeof(int) * (size_t)B));
        T *tau = (T *)tau_s.p, *q = (T *)q_s.p;
        int *info2 = (int *)info2_s.p;
        if (kk > 0) {
            if (m > INT_MAX / 2 || qc > INT_MAX / 2)
                return fail(EM_ERR_UNSUPPORTED, "qr: matrices too large for orgqr");
            size_t db = 0, hb = 0;
            EMC_SOLVER(cusolverDnXgeqrf_bufferSize(h->solver, h->params, m, n,
                                                   ty, w, m, ty, tau, ty, &db,
                                                   &hb));
            EMC_RC(work.alloc(db, hb));
            for (int64_t b = 0; b < B; b++)
                EMC_SOLVER(cusolverDnXgeqrf(h->solver, h->params, m, n, ty,
                                            w + b * m * n, m, ty, tau + b * kk, ty,
                                            work.dev.p, db, work.host.data(), hb,
                                            info + b));
            // q starts as the reflectors (the first kk columns), zeros after
            EMC_TRY(cudaMemsetAsync(q, 0, sizeof(T) * (size_t)(B * m * qc), st));
            EMC_TRY(cudaMemcpy2DAsync(q, sizeof(T) * (size_t)(m * qc), w,
                                      sizeof(T) * (size_t)(m * n),
                                      sizeof(T) * (size_t)(m * kk), (size_t)B,
                                      cudaMemcpyDeviceToDevice, st));
            int lw = 0;
            EMC_RC(orgqr_size(h->solver, (int)m, (int)qc, (int)kk, q, (int)m, tau,
                              &lw));
            Scratch ow(st);
            EMC_TRY(ow.alloc(sizeof(T) * (size_t)lw));
            for (int64_t b = 0; b < B; b++)
                EMC_RC(orgqr(h->solver, (int)m, (int)qc, (int)kk, q + b * m * qc,
                             (int)m, tau + b * kk, (T *)ow.p, lw, info2 + b));
        }
        return launch_each(d, B * j->per,
                           QrStore<T>{w, q, tau, out, m, n, kk, qc, j->per, flag});
    }
    case EM_CUDA_EIGH: {
        Scratch ev(st);
        EMC_TRY(ev.alloc(sizeof(R) * (size_t)(B * n)));
        R *ew = (R *)ev.p;
        if (n > 0) {
            size_t db = 0, hb = 0;
            EMC_SOLVER(cusolverDnXsyevd_bufferSize(
                h->solver, h->params, CUSOLVER_EIG_MODE_VECTOR,
                CUBLAS_FILL_MODE_LOWER, n, ty, w, n, LA<D>::rty, ew, ty, &db, &hb));
            EMC_RC(work.alloc(db, hb));
            for (int64_t b = 0; b < B; b++)
                EMC_SOLVER(cusolverDnXsyevd(
                    h->solver, h->params, CUSOLVER_EIG_MODE_VECTOR,
                    CUBLAS_FILL_MODE_LOWER, n, ty, w + b * n * n, n, LA<D>::rty,
                    ew + b * n, ty, work.dev.p, db, work.host.data(), hb,
                    info + b));
        }
        EMC_RC(launch_each(d, B * n, EigValues<T>{ew, out, n, j->per, flag, info}));
        return launch_each(d, B * n * n,
                           ColToRow<T>{w, n * n, n, out, j->per, n, n, n, flag,
                                       info});
    }
    case EM_CUDA_SVD: {
        if constexpr (Tr<T>::cpx) {
            return fail(EM_ERR_ARGUMENT, "svd: complex dtypes are not supported");
        } else {
            const int64_t M = rows, N = cols, kk = N, ucc = j->flag ? M : N;
            const int64_t ucols = j->flag ? m : kk;
            Scratch u_s(st), vt_s(st), s_s(st);
            EMC_TRY(u_s.alloc(sizeof(T) * (size_t)(B * M * ucc)));
            EMC_TRY(vt_s.alloc(sizeof(T) * (size_t)(B * N * N)));
            EMC_TRY(s_s.alloc(sizeof(T) * (size_t)(B * N)));
            T *u = (T *)u_s.p, *vt = (T *)vt_s.p, *s = (T *)s_s.p;
            signed char jobu = j->flag ? 'A' : 'S';
            if (kk > 0) {
                size_t db = 0, hb = 0;
                EMC_SOLVER(cusolverDnXgesvd_bufferSize(
                    h->solver, h->params, jobu, 'S', M, N, ty, w, M, ty, s, ty, u,
                    M, ty, vt, N, ty, &db, &hb));
                EMC_RC(work.alloc(db, hb));
                for (int64_t b = 0; b < B; b++)
                    EMC_SOLVER(cusolverDnXgesvd(
                        h->solver, h->params, jobu, 'S', M, N, ty, w + b * M * N,
                        M, ty, s + b * N, ty, u + b * M * ucc, M, ty,
                        vt + b * N * N, N, ty, work.dev.p, db, work.host.data(),
                        hb, info + b));
            }
            return launch_each(d, B * j->per,
                               SvdStore<T>{u, vt, s, out, m, n, kk, ucols, M, ucc,
                                           j->per, !wide, flag, info});
        }
    }
    default:
        return fail(EM_ERR_ARGUMENT, "linalg: unknown op %d", j->op);
    }
}

} // namespace

int launch_linalg(int dev, Device *d, em_cuda_linalg *job) {
    std::lock_guard<std::mutex> g(locks[dev]);
    Handles *h = nullptr;
    EMC_RC(get_handles(dev, d, &h));
    switch (job->dtype) {
    case EM_F32:
        return run_linalg<EM_F32>(d, h, job);
    case EM_F64:
        return run_linalg<EM_F64>(d, h, job);
    case EM_C64:
        return run_linalg<EM_C64>(d, h, job);
    case EM_C128:
        return run_linalg<EM_C128>(d, h, job);
    default:
        return fail(EM_ERR_ARGUMENT,
                    "linalg: dtype %d is not f32, f64, c64 or c128", job->dtype);
    }
}

} // namespace emc
