// unary.cu — the one-input elementwise ops of emily_ops.h on the GPU, with
// the CPU's semantics (src/engine/ops/unary.c): one rule per op and dtype
// class below; the dispatch over (op, dtype) is generated from the
// registry, instantiating only the pairs the op accepts.
#include "ewlaunch.cuh"
#include "unary_ops.cuh"

namespace emc {

int launch_unary(Device *d, const em_cuda_ew *job) {
    int op = job->op;
    return with_dtype(job->dtype_in, [&]<int D>() -> int {
        switch (op) {
#define EMC_UN_CASE(name, acc)                                                 \
    case EM_UNARY_##name:                                                      \
        if constexpr (accepts_##acc(D))                                        \
            return launch_ew(d, job, UnaryOp<EM_UNARY_##name, D>{});           \
        else                                                                   \
            break;
            EM_UNARY_OPS(EMC_UN_CASE)
#undef EMC_UN_CASE
        default:
            break;
        }
        return fail(EM_ERR_ARGUMENT, "unary op %d has no GPU kernel for dtype %d",
                    op, D);
    });
}

} // namespace emc
