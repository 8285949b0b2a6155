// binary.cu — the two-input elementwise ops of emily_ops.h on the GPU, with
// the CPU's semantics (src/engine/ops/binary.c): integer arithmetic wraps,
// division and remainder by zero give 0, out-of-range shifts give 0 (or -1),
// float max/min propagate NaN. Broadcast inputs arrive with stride 0.
#include "binary_ops.cuh"
#include "ewlaunch.cuh"

namespace emc {

int launch_binary(Device *d, const em_cuda_ew *job) {
    int op = job->op;
    return with_dtype(job->dtype_in, [&]<int D>() -> int {
        switch (op) {
#define EMC_BIN_CASE(name, acc)                                                \
    case EM_BINARY_##name:                                                     \
        if constexpr (accepts_##acc(D))                                        \
            return launch_ew(d, job, BinaryOp<EM_BINARY_##name, D>{});         \
        else                                                                   \
            break;
            EM_BINARY_OPS(EMC_BIN_CASE)
#undef EMC_BIN_CASE
        default:
            break;
        }
        return fail(EM_ERR_ARGUMENT,
                    "binary op %d has no GPU kernel for dtype %d", op, D);
    });
}

} // namespace emc
