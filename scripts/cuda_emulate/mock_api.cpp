// A host-memory stand-in for libemily_cuda.so (scripts/cuda_emulate.sh):
// enough of the API for the conv / window / erf_inv tests (copies, same-dtype
// strided casts, strided copies, a naive GEMM with the same accumulators as
// gemm.cu, one stream, no cuDNN) plus those families' kernels, emulated on
// the host.
#include "common.cuh"
#include <cstdlib>

namespace emc {
static thread_local char error_text[512];
int fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_text, sizeof error_text, fmt, ap);
    va_end(ap);
    return status;
}
static Device dev0 = {0, 4};
static const char *last_error() { return error_text; }
static int device_count() { return 1; }
static int dmalloc(int, size_t n, void **out) {
    *out = aligned_alloc(256, (n + 255) / 256 * 256 + 256);
    return *out ? 0 : EM_ERR_OOM;
}
static void dfree(int, void *p) { free(p); }
static int dmemset(int, void *p, int v, size_t n) {
    memset(p, v, n);
    return 0;
}
static int cpy(int, void *d, const void *s, size_t n) {
    memcpy(d, s, n);
    return 0;
}
static int sync_(int) { return 0; }
static int elementwise(int, const em_cuda_ew *j) {
    if (j->family != EM_CUDA_CAST || j->dtype_in != j->dtype_out)
        return fail(EM_ERR_UNSUPPORTED, "mock: elementwise family %d", j->family);
    size_t es = dtype_bytes(j->dtype_in);
    for (int64_t o = 0; o < j->n; o++) {
        int64_t rem = o, off = 0;
        for (int d = j->ndim - 1; d >= 0; d--) {
            off += rem % j->shape[d] * j->strides[0][d];
            rem /= j->shape[d];
        }
        memcpy((char *)j->out + o * es, (const char *)j->in[0] + off * es, es);
    }
    return 0;
}
static int copy(int, const em_cuda_copy *c) {
    if (c->starts)
        return fail(EM_ERR_UNSUPPORTED, "mock: copy with starts");
    for (int64_t o = 0; o < c->n; o++) {
        int64_t rem = o, so = 0, dof = 0;
        for (int d = c->ndim - 1; d >= 0; d--) {
            int64_t x = rem % c->shape[d];
            rem /= c->shape[d];
            so += x * c->src_stride[d];
            dof += x * c->dst_stride[d];
        }
        memcpy((char *)c->dst + dof * c->elem_size,
               (const char *)c->src + so * c->elem_size, c->elem_size);
    }
    return 0;
}
template <int D> static int gemm_t(const em_cuda_gemm *g) {
    using S = typename DT<D>::S;
    using C = typename DT<D>::C;
    using A = typename decltype([] {
        if constexpr (klass_of(D) == K_INT)
            return std::type_identity<wide_u<S>>{};
        else
            return std::type_identity<C>{};
    }())::type;
    const S *a = (const S *)g->a, *b = (const S *)g->b;
    S *c = (S *)g->c;
    for (int64_t bi = 0; bi < g->batch; bi++)
        for (int64_t i = 0; i < g->m; i++)
            for (int64_t j = 0; j < g->n; j++) {
                A acc = A(0);
                for (int64_t k = 0; k < g->k; k++) {
                    S x = g->trans_a ? a[bi * g->stride_a + k * g->lda + i]
                                     : a[bi * g->stride_a + i * g->lda + k];
                    S y = g->trans_b ? b[bi * g->stride_b + j * g->ldb + k]
                                     : b[bi * g->stride_b + k * g->ldb + j];
                    acc += (A)DT<D>::load(x) * (A)DT<D>::load(y);
                }
                c[bi * g->m * g->n + i * g->n + j] = DT<D>::store((C)acc);
            }
    return 0;
}
static int gemm(int, const em_cuda_gemm *g) {
    return with_dtype(g->dtype, [&]<int D>() -> int { return gemm_t<D>(g); });
}
static int unsupported_iota(int, int, void *, int64_t, int64_t, int64_t) {
    return fail(EM_ERR_UNSUPPORTED, "mock: iota");
}
static int unsupported_reduce(int, const em_cuda_reduce *) {
    return fail(EM_ERR_UNSUPPORTED, "mock: reduce");
}
static int erf_inv(int, int dt, const void *in, void *out, int64_t n) {
    return launch_erf_inv(&dev0, dt, in, out, n);
}
static int window_reduce(int, const em_cuda_window *j) { return launch_window(&dev0, j); }
static int window_scatter(int, const em_cuda_window_scatter *j) {
    return launch_window_scatter(&dev0, j);
}
static int im2col(int, const em_cuda_im2col *j) { return launch_im2col(&dev0, j); }
static int depthwise_conv(int, const em_cuda_depthwise *j) {
    return launch_depthwise(&dev0, j);
}
// One stream, nothing to order; no cuDNN (convolutions take the other paths).
static void *current_stream(int) { return &dev0; }
static int stream_wait(int, void *) { return 0; }
static int cudnn_info(char *msg, size_t len) {
    snprintf(msg, len, "emulated: no cuDNN");
    return 0;
}
static int cudnn_conv_plan(int, const em_cuda_cudnn_conv *, int *supported,
                           size_t *workspace_bytes) {
    *supported = 0;
    *workspace_bytes = 0;
    return 0;
}
static em_cuda_api api;
} // namespace emc

extern "C" const em_cuda_api *emily_cuda_get_api(void) {
    using namespace emc;
    api.version = EM_CUDA_API_VERSION;
    api.last_error = last_error;
    api.device_count = device_count;
    api.malloc = dmalloc;
    api.free = dfree;
    api.memset = dmemset;
    api.copy_to_device = cpy;
    api.copy_to_host = cpy;
    api.synchronize = sync_;
    api.elementwise = elementwise;
    api.iota = unsupported_iota;
    api.reduce = unsupported_reduce;
    api.gemm = gemm;
    api.copy = copy;
    api.erf_inv = erf_inv;
    api.window_reduce = window_reduce;
    api.window_scatter = window_scatter;
    api.im2col = im2col;
    api.depthwise_conv = depthwise_conv;
    api.current_stream = current_stream;
    api.stream_wait = stream_wait;
    api.cudnn_info = cudnn_info;
    api.cudnn_conv_plan = cudnn_conv_plan;
    return &api;
}
