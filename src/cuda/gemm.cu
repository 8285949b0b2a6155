// gemm.cu — batched matrix products: cuBLAS for floating dtypes (f32 exact
// by default, TF32 only with EMILY_CUDA_TF32=1; f16/bf16 accumulate in f32;
// f64, c64, c128), a plain kernel for integers (wrapping, as the CPU).
//
// The engine's operands are row-major [rows, cols] (or their transposes);
// cuBLAS is column-major, so C = A B is computed as C^T = B^T A^T, which
// reads the same memory without any copy.
#include "common.cuh"

#include <cublas_v2.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace emc {

// One cuBLAS handle (and workspace) per CUDA stream: two streams' GEMMs
// sharing a workspace could overwrite each other's scratch. Streams are
// never destroyed (runtime.cu), so neither are their handles.
static std::unordered_map<cudaStream_t, cublasHandle_t>
    handles[EM_DEVICE_MAX_GPUS];
static std::mutex handle_lock[EM_DEVICE_MAX_GPUS];

static const char *cublas_name(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
        return "cuBLAS error";
    }
}

static constexpr size_t WORKSPACE = (size_t)32 << 20;

static bool tf32_enabled() {
    const char *v = getenv("EMILY_CUDA_TF32");
    return v && *v && *v != '0';
}

// Integer product, wrapping in the unsigned type.
template <class T>
__global__ void int_gemm(const T *a, const T *b, T *c, int64_t m, int64_t n,
                         int64_t k, int ta, int tb, int64_t lda, int64_t ldb,
                         int64_t sa, int64_t sb) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t i = (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
    int64_t bi = blockIdx.z;
    if (i >= m || j >= n)
        return;
    using W = wide_u<T>;
    const T *pa = a + bi * sa, *pb = b + bi * sb;
    W acc = 0;
    for (int64_t kk = 0; kk < k; kk++) {
        T x = ta ? pa[kk * lda + i] : pa[i * lda + kk];
        T y = tb ? pb[j * ldb + kk] : pb[kk * ldb + j];
        acc += (W)x * (W)y;
    }
    c[bi * m * n + i * n + j] = (T)acc;
}

int launch_gemm(int dev, Device *d, const em_cuda_gemm *job) {
    if (job->m > INT_MAX || job->n > INT_MAX || job->k > INT_MAX ||
        job->batch > INT_MAX || job->lda > INT_MAX || job->ldb > INT_MAX)
        return fail(EM_ERR_UNSUPPORTED,
                    "dot: sizes beyond 2^31 are not supported on the GPU");
    size_t esize = dtype_bytes(job->dtype);
    if (job->k == 0) {
        EMC_TRY(cudaMemsetAsync(job->c, 0,
                                esize * (size_t)(job->batch * job->m * job->n),
                                d->stream));
        return 0;
    }
    if (klass_of(job->dtype) == K_INT) {
        return with_dtype(job->dtype, [&]<int D>() -> int {
            if constexpr (D == EM_PRED || klass_of(D) != K_INT) {
                return fail(EM_ERR_UNSUPPORTED, "dot: pred on the GPU");
            } else {
                using T = typename DT<D>::S;
                dim3 block(16, 16);
                dim3 grid((unsigned)((job->n + 15) / 16),
                          (unsigned)((job->m + 15) / 16), (unsigned)job->batch);
                int_gemm<T><<<grid, block, 0, d->stream>>>(
                    (const T *)job->a, (const T *)job->b, (T *)job->c, job->m,
                    job->n, job->k, job->trans_a, job->trans_b, job->lda,
                    job->ldb, job->stride_a, job->stride_b);
                EMC_LAUNCHED("integer gemm kernel");
                return 0;
            }
        });
    }

    cudaDataType_t type;
    cublasComputeType_t compute;
    float alpha32[2] = {1, 0}, beta32[2] = {0, 0};
    double alpha64[2] = {1, 0}, beta64[2] = {0, 0};
    const void *alpha = alpha32, *beta = beta32;
    switch (job->dtype) {
    case EM_F16:
        type = CUDA_R_16F;
        compute = CUBLAS_COMPUTE_32F;
        break;
    case EM_BF16:
        type = CUDA_R_16BF;
        compute = CUBLAS_COMPUTE_32F;
        break;
    case EM_F32:
        type = CUDA_R_32F;
        compute = tf32_enabled() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                 : CUBLAS_COMPUTE_32F;
        break;
    case EM_F64:
        type = CUDA_R_64F;
        compute = CUBLAS_COMPUTE_64F;
        alpha = alpha64;
        beta = beta64;
        break;
    case EM_C64:
        type = CUDA_C_32F;
        compute = CUBLAS_COMPUTE_32F;
        break;
    case EM_C128:
        type = CUDA_C_64F;
        compute = CUBLAS_COMPUTE_64F;
        alpha = alpha64;
        beta = beta64;
        break;
    default:
        return fail(EM_ERR_UNSUPPORTED, "dot: dtype %d on the GPU",
                    job->dtype);
    }
    std::lock_guard<std::mutex> guard(handle_lock[dev]);
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    cublasHandle_t &h = handles[dev][d->stream];
    if (!h) {
        s = cublasCreate(&h);
        if (s != CUBLAS_STATUS_SUCCESS) {
            handles[dev].erase(d->stream);
            return fail(EM_ERR_RUNTIME, "cublasCreate: %s", cublas_name(s));
        }
        // The handle's one stream, set once: cublasSetStream would reset
        // the workspace below to cuBLAS's default pool.
        s = cublasSetStream(h, d->stream);
        if (s != CUBLAS_STATUS_SUCCESS) {
            cublasDestroy(h);
            handles[dev].erase(d->stream);
            return fail(EM_ERR_RUNTIME, "cublasSetStream: %s", cublas_name(s));
        }
        // A 32 MiB workspace, as PyTorch gives cuBLAS on Hopper: some of
        // the fastest kernels need one.
        void *ws = nullptr;
        if (cudaMalloc(&ws, WORKSPACE) == cudaSuccess)
            cublasSetWorkspace(h, ws, WORKSPACE);
        else
            cudaGetLastError();
    }
    s = cublasGemmStridedBatchedEx(
            h, job->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
            job->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)job->n, (int)job->m,
            (int)job->k, alpha, job->b, type, (int)job->ldb, job->stride_b,
            job->a, type, (int)job->lda, job->stride_a, beta, job->c, type,
            (int)job->n, job->m * job->n, (int)job->batch, compute,
            CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return fail(s == CUBLAS_STATUS_ALLOC_FAILED ? EM_ERR_OOM
                                                    : EM_ERR_RUNTIME,
                    "cublasGemmStridedBatchedEx: %s", cublas_name(s));
    return 0;
}

} // namespace emc
