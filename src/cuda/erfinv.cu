// erfinv.cu — random_erf_inv: one thread per element, the CPU's formula
// (src/engine/ops/erfinv.h, evaluated in double) rounded to the dtype.
#include "common.cuh"

#include "../engine/ops/erfinv.h"

namespace emc {

template <int D>
__global__ void erf_inv_kernel(const typename DT<D>::S *in,
                               typename DT<D>::S *out, int64_t n) {
    using C = typename DT<D>::C;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += step)
        out[i] = DT<D>::store((C)em_giles_erfinv((double)DT<D>::load(in[i])));
}

int launch_erf_inv(Device *d, int dtype, const void *in, void *out,
                   int64_t n) {
    if (n == 0)
        return 0;
    return with_dtype(dtype, [&]<int D>() -> int {
        if constexpr (klass_of(D) != K_FLT) {
            return fail(EM_ERR_ARGUMENT, "random_erf_inv: dtype %d", D);
        } else {
            using S = typename DT<D>::S;
            erf_inv_kernel<D><<<grid_for(d, n), 256, 0, d->stream>>>(
                (const S *)in, (S *)out, n);
            EMC_LAUNCHED("erf_inv kernel");
            return 0;
        }
    });
}

} // namespace emc
