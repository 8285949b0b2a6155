// misc.cu — select, clip, dtype conversion (and plain copies) and iota on
// the GPU, with the CPU's semantics (select.c, convert.c, creation.c).
#include "ewlaunch.cuh"
#include "misc_ops.cuh"

namespace emc {

int launch_misc(Device *d, const em_cuda_ew *job) {
    switch (job->family) {
    case EM_CUDA_SELECT:
        return with_dtype(job->dtype_pred, [&]<int P>() -> int {
            return with_elem_size(dtype_bytes(job->dtype_in), "copy", [&]<int S>() -> int {
                return launch_ew(d, job, SelectOp<P, S>{});
            });
        });
    case EM_CUDA_CLIP:
        return with_dtype(job->dtype_in, [&]<int D>() -> int {
            if constexpr (klass_of(D) != K_CPX)
                return launch_ew(d, job, ClipOp<D>{});
            else
                return fail(EM_ERR_ARGUMENT, "clip: complex dtype");
        });
    case EM_CUDA_CAST:
        if (job->dtype_in == job->dtype_out)
            return with_elem_size(dtype_bytes(job->dtype_in), "copy", [&]<int S>() -> int {
                return launch_ew(d, job, CopyOp<S>{});
            });
        return with_dtype(job->dtype_in, [&]<int F>() -> int {
            return with_dtype(job->dtype_out, [&]<int T>() -> int {
                return launch_ew(d, job, CastOp<F, T>{});
            });
        });
    default:
        return fail(EM_ERR_ARGUMENT, "unknown elementwise family %d",
                    job->family);
    }
}

// ---- iota -------------------------------------------------------------------

template <int D>
__global__ void iota_kernel(typename DT<D>::S *out, int64_t n, int64_t dim,
                            int64_t inner) {
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += step) {
        int64_t c = (i / inner) % dim;
        out[i] = DT<D>::store(narrow<D>((wide_t<EM_S64>)c));
    }
}

int launch_iota(Device *d, int dtype, void *out, int64_t n, int64_t dim,
                int64_t inner) {
    return with_dtype(dtype, [&]<int D>() -> int {
        iota_kernel<D><<<grid_for(d, n), 256, 0, d->stream>>>(
            (typename DT<D>::S *)out, n, dim, inner);
        EMC_LAUNCHED("iota kernel");
        return 0;
    });
}

} // namespace emc
