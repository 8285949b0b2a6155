// runtime.cu — the plugin's entry point (emily_cuda_get_api), per-device
// state, memory, copies through pinned staging buffers, synchronisation,
// events and error messages.
#include "common.cuh"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace emc {

static thread_local char error_text[512];

int fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_text, sizeof error_text, fmt, ap);
    va_end(ap);
    return status;
}

int cuda_fail(cudaError_t e, const char *what) {
    cudaGetLastError(); // clear a sticky launch error for the next call
    return fail(e == cudaErrorMemoryAllocation ? EM_ERR_OOM : EM_ERR_RUNTIME,
                "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

static const char *last_error() { return error_text; }

// ---- devices ------------------------------------------------------------

static Device devices[EM_DEVICE_MAX_GPUS];
static std::once_flag device_once[EM_DEVICE_MAX_GPUS];
static int device_status[EM_DEVICE_MAX_GPUS];
static char device_error[EM_DEVICE_MAX_GPUS][512];

// ---- streams ------------------------------------------------------------
//
// One CUDA stream per (device, engine stream): the engine binds its stream
// id to the thread (set_stream); id 0 uses the device's shared stream
// (Device.stream of `devices`). The others are made on first use and kept
// in `bound` under `streams_lock`; a retired engine stream's CUDA streams
// go to `spare` for the next one, never destroyed, so a handle the engine
// keeps on a buffer stays valid.

static std::mutex streams_lock;
static std::unordered_map<uint64_t, cudaStream_t> bound[EM_DEVICE_MAX_GPUS];
static std::vector<cudaStream_t> spare[EM_DEVICE_MAX_GPUS];
// Events for stream_wait, reused: an event may be recorded again as soon
// as cudaStreamWaitEvent has been queued on it.
static std::vector<cudaEvent_t> spare_events[EM_DEVICE_MAX_GPUS];

// What a thread remembers so that an ordinary launch costs no lock, no map
// lookup and no cudaSetDevice: its bound id, the device selected last, and
// per device the Device view (the bound stream) handed to the kernels.
struct ThreadState {
    uint64_t id = 0;
    int selected = -1;
    uint64_t view_id[EM_DEVICE_MAX_GPUS] = {};
    bool view_valid[EM_DEVICE_MAX_GPUS] = {};
    Device view[EM_DEVICE_MAX_GPUS] = {};
    cudaEvent_t event[EM_DEVICE_MAX_GPUS] = {};
    ~ThreadState() {
        std::lock_guard<std::mutex> guard(streams_lock);
        for (int i = 0; i < EM_DEVICE_MAX_GPUS; i++)
            if (event[i])
                spare_events[i].push_back(event[i]);
    }
};
static thread_local ThreadState self;

static int set_stream(uint64_t stream_id) {
    self.id = stream_id;
    return 0;
}

// The CUDA stream of (dev, id > 0), made on first use.
static cudaStream_t stream_for(int dev, uint64_t id) {
    std::lock_guard<std::mutex> guard(streams_lock);
    auto it = bound[dev].find(id);
    if (it != bound[dev].end())
        return it->second;
    cudaStream_t s = nullptr;
    if (!spare[dev].empty()) {
        s = spare[dev].back();
        spare[dev].pop_back();
    } else {
        cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            cuda_fail(e, "cudaStreamCreateWithFlags");
            return nullptr;
        }
    }
    bound[dev][id] = s;
    return s;
}

static void stream_retire(uint64_t stream_id) {
    if (stream_id == 0)
        return;
    std::lock_guard<std::mutex> guard(streams_lock);
    for (int dev = 0; dev < EM_DEVICE_MAX_GPUS; dev++) {
        auto it = bound[dev].find(stream_id);
        if (it != bound[dev].end()) {
            spare[dev].push_back(it->second);
            bound[dev].erase(it);
        }
    }
    // Views of other threads never name this id again: only the retired
    // engine stream's worker bound it.
}

static Device *device_init(int dev) {
    std::call_once(device_once[dev], [dev] {
        Device &d = devices[dev];
        cudaError_t err = cudaStreamCreateWithFlags(&d.stream,
                                                    cudaStreamNonBlocking);
        if (err == cudaSuccess)
            err = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount,
                                         dev);
        // Scratch from cudaMallocAsync (reduction partials) stays in the
        // pool across synchronisations instead of being unmapped and mapped
        // again on the next call.
        cudaMemPool_t pool;
        if (err == cudaSuccess &&
            cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess) {
            uint64_t keep = UINT64_MAX;
            cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
                                    &keep);
        }
        if (err != cudaSuccess) {
            device_status[dev] = 1;
            snprintf(device_error[dev], sizeof device_error[dev],
                     "starting GPU %d: %s", dev, cudaGetErrorString(err));
        }
    });
    if (device_status[dev]) {
        fail(EM_ERR_RUNTIME, "%s", device_error[dev]);
        return nullptr;
    }
    return &devices[dev];
}

Device *device(int dev) {
    if (dev < 0 || dev >= EM_DEVICE_MAX_GPUS) {
        fail(EM_ERR_ARGUMENT, "GPU %d is out of range", dev);
        return nullptr;
    }
    // The plugin is the only code that selects devices on the threads it
    // is called from, so the last selection is still current.
    if (self.selected != dev) {
        cudaError_t e = cudaSetDevice(dev);
        if (e != cudaSuccess) {
            cuda_fail(e, "cudaSetDevice");
            return nullptr;
        }
        self.selected = dev;
    }
    if (self.view_valid[dev] && self.view_id[dev] == self.id)
        return &self.view[dev];
    Device *shared = device_init(dev);
    if (!shared)
        return nullptr;
    Device v = *shared;
    if (self.id != 0) {
        v.stream = stream_for(dev, self.id);
        if (!v.stream)
            return nullptr;
    }
    self.view[dev] = v;
    self.view_id[dev] = self.id;
    self.view_valid[dev] = true;
    return &self.view[dev];
}

#define EMC_DEVICE(d, dev)                                                     \
    Device *d = device(dev);                                                   \
    if (!d)                                                                    \
        return EM_ERR_RUNTIME

static int device_count() {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        fail(EM_ERR_UNSUPPORTED,
             "no usable CUDA driver or device (cudaGetDeviceCount: %s, %s)",
             cudaGetErrorName(e), cudaGetErrorString(e));
        return 0;
    }
    if (n == 0)
        fail(EM_ERR_UNSUPPORTED, "no CUDA device found");
    return n > EM_DEVICE_MAX_GPUS ? EM_DEVICE_MAX_GPUS : n;
}

// ---- memory -----------------------------------------------------------------

static int dev_malloc(int dev, size_t nbytes, void **out) {
    *out = nullptr;
    EMC_DEVICE(d, dev);
    (void)d;
    // The allocation of a block for a captured CUDA graph happens while
    // this thread captures (program_graph.c): the block is owned by the
    // graph for its whole life, never freed or reallocated by a replay, so
    // the capture need not see it. Relaxed mode lets cudaMalloc run then.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = cudaMalloc(out, nbytes);
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess) {
        *out = nullptr;
        return cuda_fail(e, "cudaMalloc");
    }
    return 0;
}

// cudaFree waits for the device, so a block still read by queued kernels is
// never released early.
static void dev_free(int dev, void *p) {
    if (device(dev))
        cudaFree(p);
}

static int dev_memset(int dev, void *p, int value, size_t nbytes) {
    EMC_DEVICE(d, dev);
    EMC_TRY(cudaMemsetAsync(p, value, nbytes, d->stream));
    return 0;
}

// One pinned staging buffer per device, used by one copy at a time: copies
// of any size stream through it in chunks, so pageable caller memory never
// needs pinning and the bytes cross the bus at pinned speed.
static constexpr size_t STAGING = (size_t)32 << 20;
static void *staging[EM_DEVICE_MAX_GPUS];
static std::mutex staging_lock[EM_DEVICE_MAX_GPUS];

static int staging_for(int dev, void **out) {
    if (!staging[dev])
        EMC_TRY(cudaHostAlloc(&staging[dev], STAGING, cudaHostAllocDefault));
    *out = staging[dev];
    return 0;
}

static int copy_to_device(int dev, void *dst, const void *src, size_t n) {
    EMC_DEVICE(d, dev);
    std::lock_guard<std::mutex> guard(staging_lock[dev]);
    void *stage = nullptr;
    int rc = staging_for(dev, &stage);
    if (rc)
        return rc;
    for (size_t off = 0; off < n; off += STAGING) {
        size_t len = n - off < STAGING ? n - off : STAGING;
        // The previous chunk's copy must finish before the buffer is refilled.
        EMC_TRY(cudaStreamSynchronize(d->stream));
        memcpy(stage, (const char *)src + off, len);
        EMC_TRY(cudaMemcpyAsync((char *)dst + off, stage, len,
                                cudaMemcpyHostToDevice, d->stream));
    }
    EMC_TRY(cudaStreamSynchronize(d->stream));
    return 0;
}

static int copy_to_host(int dev, void *dst, const void *src, size_t n) {
    EMC_DEVICE(d, dev);
    std::lock_guard<std::mutex> guard(staging_lock[dev]);
    void *stage = nullptr;
    int rc = staging_for(dev, &stage);
    if (rc)
        return rc;
    for (size_t off = 0; off < n; off += STAGING) {
        size_t len = n - off < STAGING ? n - off : STAGING;
        EMC_TRY(cudaMemcpyAsync(stage, (const char *)src + off, len,
                                cudaMemcpyDeviceToHost, d->stream));
        // Also surfaces any error of the kernels that produced `src`.
        EMC_TRY(cudaStreamSynchronize(d->stream));
        memcpy((char *)dst + off, stage, len);
    }
    if (n == 0)
        EMC_TRY(cudaStreamSynchronize(d->stream));
    return 0;
}

// Every stream of the device (all engine streams' work), as its name says.
static int synchronize(int dev) {
    EMC_DEVICE(d, dev);
    (void)d;
    EMC_TRY(cudaDeviceSynchronize());
    return 0;
}

// ---- kernels ------------------------------------------------------------

static int elementwise(int dev, const em_cuda_ew *job) {
    EMC_DEVICE(d, dev);
    if (job->n == 0)
        return 0;
    switch (job->family) {
    case EM_CUDA_UNARY:
        return launch_unary(d, job);
    case EM_CUDA_BINARY:
        return launch_binary(d, job);
    default:
        return launch_misc(d, job);
    }
}

static int iota(int dev, int dtype, void *out, int64_t n, int64_t dim,
                int64_t inner) {
    EMC_DEVICE(d, dev);
    return n ? launch_iota(d, dtype, out, n, dim, inner) : 0;
}

static int reduce(int dev, const em_cuda_reduce *job) {
    EMC_DEVICE(d, dev);
    return job->nout ? launch_reduce(d, job) : 0;
}

static int gemm(int dev, const em_cuda_gemm *job) {
    EMC_DEVICE(d, dev);
    return launch_gemm(dev, d, job);
}

static int random_bits(int dev, const uint32_t *key, int64_t key_stride,
                       void *out, int dtype, int64_t m, int64_t half,
                       int64_t count) {
    EMC_DEVICE(d, dev);
    return count ? launch_random_bits(d, key, key_stride, out, dtype, m, half,
                                      count)
                 : 0;
}

static int threefry_pairs(int dev, const uint32_t *key, int64_t key_stride,
                          const uint32_t *in, uint32_t *out, int64_t npairs) {
    EMC_DEVICE(d, dev);
    return npairs ? launch_threefry_pairs(d, key, key_stride, in, out, npairs)
                  : 0;
}

static int gather(int dev, const em_cuda_gather *job) {
    EMC_DEVICE(d, dev);
    return launch_gather(d, job);
}

static int scan(int dev, const em_cuda_scan *job) {
    EMC_DEVICE(d, dev);
    return job->nlanes && job->n ? launch_scan(d, job) : 0;
}

static int copy(int dev, const em_cuda_copy *job) {
    EMC_DEVICE(d, dev);
    return job->n ? launch_copy(d, job) : 0;
}

static int scatter(int dev, const em_cuda_scatter *job) {
    EMC_DEVICE(d, dev);
    return job->n ? launch_scatter(d, job) : 0;
}

static int sort(int dev, const em_cuda_sort *job) {
    EMC_DEVICE(d, dev);
    return job->n && job->rows ? launch_sort(d, job) : 0;
}

static int fft(int dev, const em_cuda_fft *job) {
    EMC_DEVICE(d, dev);
    return job->rows && job->out_len ? launch_fft(dev, d, job) : 0;
}

static int linalg(int dev, em_cuda_linalg *job) {
    EMC_DEVICE(d, dev);
    job->failed = -1;
    return job->batch ? launch_linalg(dev, d, job) : 0;
}

// ---- conv / window family ------------------------------------------------

static int erf_inv(int dev, int dtype, const void *in, void *out, int64_t n) {
    EMC_DEVICE(d, dev);
    return launch_erf_inv(d, dtype, in, out, n);
}

static int window_reduce(int dev, const em_cuda_window *job) {
    EMC_DEVICE(d, dev);
    return launch_window(d, job);
}

static int window_scatter(int dev, const em_cuda_window_scatter *job) {
    EMC_DEVICE(d, dev);
    return launch_window_scatter(d, job);
}

static int im2col(int dev, const em_cuda_im2col *job) {
    EMC_DEVICE(d, dev);
    return launch_im2col(d, job);
}

static int depthwise_conv(int dev, const em_cuda_depthwise *job) {
    EMC_DEVICE(d, dev);
    return launch_depthwise(d, job);
}

static int affine(int dev, const em_cuda_affine *job) {
    EMC_DEVICE(d, dev);
    return launch_affine(d, job);
}

// ---- events -------------------------------------------------------------

static int event_record(int dev, void **out) {
    EMC_DEVICE(d, dev);
    cudaEvent_t e;
    EMC_TRY(cudaEventCreate(&e));
    cudaError_t err = cudaEventRecord(e, d->stream);
    if (err != cudaSuccess) {
        cudaEventDestroy(e);
        return cuda_fail(err, "cudaEventRecord");
    }
    *out = (void *)e;
    return 0;
}

static int event_elapsed(void *start, void *end, double *ms) {
    float t = 0;
    EMC_TRY(cudaEventSynchronize((cudaEvent_t)end));
    EMC_TRY(cudaEventElapsedTime(&t, (cudaEvent_t)start, (cudaEvent_t)end));
    *ms = t;
    return 0;
}

static void event_destroy(void *e) {
    if (e)
        cudaEventDestroy((cudaEvent_t)e);
}

// ---- cross-stream ordering ----------------------------------------------

static void *current_stream(int dev) {
    Device *d = device(dev);
    return d ? (void *)d->stream : nullptr;
}

static int stream_wait(int dev, void *producer) {
    EMC_DEVICE(d, dev);
    cudaStream_t p = (cudaStream_t)producer;
    if (!p || p == d->stream)
        return 0;
    cudaEvent_t &ev = self.event[dev];
    if (!ev) {
        std::lock_guard<std::mutex> guard(streams_lock);
        if (!spare_events[dev].empty()) {
            ev = spare_events[dev].back();
            spare_events[dev].pop_back();
        }
    }
    if (!ev)
        EMC_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    EMC_TRY(cudaEventRecord(ev, p));
    EMC_TRY(cudaStreamWaitEvent(d->stream, ev, 0));
    return 0;
}

static int stream_pending(int dev, void *stream, int *pending) {
    EMC_DEVICE(d, dev);
    cudaStream_t s = stream ? (cudaStream_t)stream : d->stream;
    cudaError_t e = cudaStreamQuery(s);
    *pending = e == cudaErrorNotReady;
    if (e == cudaErrorNotReady || e == cudaSuccess)
        return 0;
    return cuda_fail(e, "cudaStreamQuery");
}

// ---- scaled dot-product attention (attention.cu) --------------------------

int launch_sdpa(Device *d, const em_cuda_sdpa *job);

static int sdpa(int dev, const em_cuda_sdpa *job) {
    EMC_DEVICE(d, dev);
    return launch_sdpa(d, job);
}

int nccl_unique_id(unsigned char id[128]);
int nccl_comm_init(int dev, int size, int rank, const unsigned char id[128],
                   void **comm);
void nccl_comm_destroy(void *comm);
int nccl_collective(int dev, const em_cuda_nccl *job);

// ---- prefill attention on the tensor cores (attention_prefill.cu) --------

int launch_sdpa_prefill(Device *d, const em_cuda_sdpa *job);

static int sdpa_prefill(int dev, const em_cuda_sdpa *job) {
    EMC_DEVICE(d, dev);
    return launch_sdpa_prefill(d, job);
}

// ---- decode path (attention_decode.cu, decode.cu) --------------------------

int launch_sdpa_decode(Device *d, const em_cuda_sdpa *job);

static int sdpa_decode(int dev, const em_cuda_sdpa *job) {
    EMC_DEVICE(d, dev);
    return launch_sdpa_decode(d, job);
}

int launch_fast_linear(Device *d, const em_cuda_linear *job);

static int fast_linear(int dev, const em_cuda_linear *job) {
    EMC_DEVICE(d, dev);
    return launch_fast_linear(d, job);
}

int launch_fast_heads(Device *d, const em_cuda_heads *job);

static int fast_heads(int dev, const em_cuda_heads *job) {
    EMC_DEVICE(d, dev);
    return launch_fast_heads(d, job);
}

int graph_begin(int dev);
int graph_end(int dev, int keep, void **exec, int64_t *nodes);
int graph_launch(int dev, void *exec);
void graph_destroy(int dev, void *exec, void *stream);

// cudnn_conv.cu
int cudnn_conv_plan(int dev, const em_cuda_cudnn_conv *job, int *supported,
                    size_t *workspace_bytes);
int cudnn_conv_run(int dev, const em_cuda_cudnn_conv *job, int *declined);
int cudnn_info(char *msg, size_t len);
// launch_probe.cu
int launch_probe(int dev, int iters, em_cuda_launch_probe *out);

static int fused(int dev, const em_cuda_fused *job) {
    EMC_DEVICE(d, dev);
    return launch_fused(dev, d, job);
}

static const em_cuda_api api = {
    EM_CUDA_API_VERSION,
    last_error,
    device_count,
    dev_malloc,
    dev_free,
    dev_memset,
    copy_to_device,
    copy_to_host,
    synchronize,
    elementwise,
    iota,
    reduce,
    gemm,
    random_bits,
    threefry_pairs,
    gather,
    scan,
    copy,
    scatter,
    sort,
    event_record,
    event_elapsed,
    event_destroy,
    // streams (issue #6 round 3)
    set_stream,
    current_stream,
    stream_wait,
    stream_pending,
    stream_retire,
    // fft and linalg
    fft,
    linalg,
    // conv / window family
    erf_inv,
    window_reduce,
    window_scatter,
    im2col,
    // fusion
    fused,
    fused_compiles,
    // Emily.Fast norms, softmax and RoPE (fast.cu)
    fast_rows,
    fast_rope,
    // scaled dot-product attention (attention.cu)
    sdpa,
    // affine quantization (quant.cu)
    affine,
    // ggml block formats (ggml.cu)
    ggml_dequantize,
    ggml_matmul,
    // CUDA graphs of replayed programs (graph.cu)
    graph_begin,
    graph_end,
    graph_launch,
    graph_destroy,
    // distributed: NCCL (nccl.cu)
    nccl_unique_id,
    nccl_comm_init,
    nccl_comm_destroy,
    nccl_collective,
    // prefill attention on the tensor cores (attention_prefill.cu)
    sdpa_prefill,
    // decode path (attention_decode.cu, decode.cu)
    sdpa_decode,
    fast_linear,
    fast_heads,
    // gpukern (issue 16): convolution through cuDNN (cudnn_conv.cu)
    cudnn_conv_plan,
    cudnn_conv_run,
    cudnn_info,
    // gpukern (issue 16): host cost of a launch, in parts (launch_probe.cu)
    launch_probe,
    // gpukern (issue 16, version 10): depthwise convolution (conv.cu)
    depthwise_conv,
};

} // namespace emc

extern "C" __attribute__((visibility("default"))) const em_cuda_api *
emily_cuda_get_api(void) {
    return &emc::api;
}
