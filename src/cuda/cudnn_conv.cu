// cudnn_conv.cu — convolution through cuDNN's legacy convolution API, for
// the cases gpu_conv.c finds it can express (f32/f16/bf16, no input
// dilation, no batch groups, symmetric non-negative padding, up to three
// spatial axes); gpu_conv.c runs its im2col + GEMM path for the rest.
//
// cuDNN is not linked: libcudnn.so.9 is opened with dlopen on first use, so
// a machine without it (a CI runner, a minimal image) still loads the
// plugin and convolves through im2col. Where it is looked for: the file or
// directory EMILY_CUDNN_LIB names (only there when set), else the dynamic
// linker's search path, else beside the cuBLAS the plugin was linked to
// (the toolkit's lib directory) and in the pip layout next to it
// (nvidia/cublas/lib -> nvidia/cudnn/lib). EMILY_CUDNN=0 turns it off.
// cudnn.h is included for its types and enums only.
//
// Per shape a plan (descriptors and an algorithm) is built once and
// cached; the workspace it needs comes from the engine's allocator
// (gpu_conv.c), so the run allocates nothing. The algorithm: the
// heuristic's first that keeps the engine's precision and fits
// MAX_WORKSPACE. With EMILY_CUDNN_AUTOTUNE=1, the fastest of its first
// TIMED_CANDIDATES such, timed once when the plan is built on scratch
// tensors of the plan's shapes (as PyTorch's cudnn.benchmark), except for a
// plan built while the stream is captured into a CUDA graph or when the
// scratch does not fit; timed choices may differ between processes in the
// last bits (never within one: the plan is kept).
// Precision: f16/bf16 accumulate in f32 with tensor cores; f32 uses
// CUDNN_FMA_MATH (no TF32, like the GEMMs) unless EMILY_CUDA_TF32=1 asks
// for TF32 (CUDNN_DEFAULT_MATH).
#include "common.cuh"

#include <cublas_v2.h>
#include <cudnn.h>

#include <array>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace emc {

// ---- the library -----------------------------------------------------------

struct Cudnn {
    void *lib = nullptr;
    size_t version = 0;
    char why[512] = "";
#define EMC_CUDNN_FNS(X)                                                       \
    X(cudnnGetVersion)                                                         \
    X(cudnnGetErrorString)                                                     \
    X(cudnnCreate)                                                             \
    X(cudnnDestroy)                                                            \
    X(cudnnSetStream)                                                          \
    X(cudnnCreateTensorDescriptor)                                             \
    X(cudnnSetTensorNdDescriptor)                                              \
    X(cudnnCreateFilterDescriptor)                                             \
    X(cudnnSetFilterNdDescriptor)                                              \
    X(cudnnCreateConvolutionDescriptor)                                        \
    X(cudnnSetConvolutionNdDescriptor)                                         \
    X(cudnnSetConvolutionGroupCount)                                           \
    X(cudnnSetConvolutionMathType)                                             \
    X(cudnnGetConvolutionNdForwardOutputDim)                                   \
    X(cudnnGetConvolutionForwardAlgorithm_v7)                                  \
    X(cudnnGetConvolutionForwardWorkspaceSize)                                 \
    X(cudnnConvolutionForward)
#define EMC_CUDNN_FIELD(name) decltype(&::name) name = nullptr;
    EMC_CUDNN_FNS(EMC_CUDNN_FIELD)
#undef EMC_CUDNN_FIELD
};

static bool env_off(const char *name) {
    const char *v = getenv(name);
    return v && strcmp(v, "0") == 0;
}

static void *open_lib(const std::string &path, std::string &tried) {
    void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        tried += "; " + path + ": " + (e ? e : "not loadable");
    }
    return h;
}

// The directory of the shared object that defines `symbol`, with a slash.
static std::string dir_of(const void *symbol) {
    Dl_info info;
    if (!dladdr(symbol, &info) || !info.dli_fname)
        return "";
    std::string p = info.dli_fname;
    size_t slash = p.rfind('/');
    return slash == std::string::npos ? "" : p.substr(0, slash + 1);
}

static void load_cudnn(Cudnn *c) {
    if (env_off("EMILY_CUDNN")) {
        snprintf(c->why, sizeof c->why, "disabled by EMILY_CUDNN=0");
        return;
    }
    const char *name = "libcudnn.so.9";
    std::string tried;
    const char *env = getenv("EMILY_CUDNN_LIB");
    if (env && *env) {
        std::string p = env;
        if (p.back() == '/' || !strstr(p.c_str(), ".so")) { // a directory
            if (p.back() != '/')
                p.append("/");
            p.append(name);
        }
        c->lib = open_lib(p, tried);
    } else {
        c->lib = open_lib(name, tried);
        const std::string blas = dir_of((const void *)&cublasCreate_v2);
        std::string beside = blas, pip = blas;
        beside.append(name);
        pip.append("../../cudnn/lib/").append(name);
        if (!c->lib && !blas.empty())
            c->lib = open_lib(beside, tried);
        if (!c->lib && !blas.empty())
            c->lib = open_lib(pip, tried);
    }
    if (!c->lib) {
        snprintf(c->why, sizeof c->why, "cuDNN not found (tried%s)",
                 tried.empty() ? "" : tried.c_str() + 1);
        return;
    }
#define EMC_CUDNN_SYM(name)                                                    \
    c->name = (decltype(&::name))dlsym(c->lib, #name);                         \
    if (!c->name) {                                                            \
        snprintf(c->why, sizeof c->why, "cuDNN lacks %s", #name);              \
        dlclose(c->lib);                                                       \
        c->lib = nullptr;                                                      \
        return;                                                                \
    }
    EMC_CUDNN_FNS(EMC_CUDNN_SYM)
#undef EMC_CUDNN_SYM
    c->version = c->cudnnGetVersion();
    // The enums and legacy calls used here are cuDNN 9's.
    if (c->version / 10000 != CUDNN_MAJOR) {
        snprintf(c->why, sizeof c->why,
                 "cuDNN %zu found; version %d.x is needed", c->version,
                 CUDNN_MAJOR);
        dlclose(c->lib);
        c->lib = nullptr;
        return;
    }
    snprintf(c->why, sizeof c->why, "cuDNN %zu.%zu.%zu", c->version / 10000,
             c->version / 100 % 100, c->version % 100);
}

static Cudnn loaded;
static std::once_flag load_once;
// Set when a loaded cuDNN turns out unusable here (a sub-library that does
// not load, a driver or runtime it does not support): convolutions then
// take im2col, and cudnn_info reports why.
static std::atomic<bool> unusable{false};
static std::mutex unusable_lock;
static char unusable_why[1024];

// The usable library, or NULL.
static Cudnn *cudnn_lib() {
    std::call_once(load_once, load_cudnn, &loaded);
    return loaded.lib && !unusable.load() ? &loaded : nullptr;
}

int cudnn_info(char *msg, size_t len) {
    Cudnn *c = cudnn_lib();
    if (msg && len) {
        std::lock_guard<std::mutex> g(unusable_lock);
        snprintf(msg, len, "%s", unusable.load() ? unusable_why : loaded.why);
    }
    return c ? 1 : 0;
}

static void mark_unusable(Cudnn *c, cudnnStatus_t s, const char *what) {
    std::lock_guard<std::mutex> g(unusable_lock);
    snprintf(unusable_why, sizeof unusable_why, "%.400s unusable: %.200s: %.300s",
             c->why, what, c->cudnnGetErrorString(s));
    unusable.store(true);
}

// A cuDNN status: 0 on success. With `unsupported` (building a plan):
// statuses that mean "this case is not for cuDNN" (bad or unsupported
// parameters, 2xxx and 3xxx) set it; uncategorised ones (1xxx: a
// sub-library that does not load, version mismatches) also mark cuDNN
// unusable. Others are failures, recorded with the call's name.
static int check(Cudnn *c, cudnnStatus_t s, const char *what,
                 bool *unsupported) {
    if (s == CUDNN_STATUS_SUCCESS)
        return 0;
    if (unsupported && (s / 1000 == 1 || s / 1000 == 2 || s / 1000 == 3)) {
        if (s / 1000 == 1)
            mark_unusable(c, s, what);
        *unsupported = true;
        return 0;
    }
    const bool oom = s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                     s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
    return fail(oom ? EM_ERR_OOM : EM_ERR_RUNTIME, "conv: %s: %s", what,
                c->cudnnGetErrorString(s));
}

// ---- handles, one per CUDA stream (a handle's state is its stream's) ------

static std::unordered_map<cudaStream_t, cudnnHandle_t>
    handles[EM_DEVICE_MAX_GPUS];
static std::mutex handle_lock[EM_DEVICE_MAX_GPUS];

// *out = NULL (and 0) when no handle can be made here: cuDNN is then
// marked unusable (a machine whose driver or runtime it does not support).
static int handle_for(Cudnn *c, int dev, Device *d, cudnnHandle_t *out) {
    *out = nullptr;
    std::lock_guard<std::mutex> g(handle_lock[dev]);
    auto it = handles[dev].find(d->stream);
    if (it != handles[dev].end()) {
        *out = it->second;
        return 0;
    }
    cudnnHandle_t h = nullptr;
    bool unsup = false;
    if (int rc = check(c, c->cudnnCreate(&h), "cudnnCreate", &unsup))
        return rc;
    if (unsup) {
        if (!unusable.load())
            mark_unusable(c, CUDNN_STATUS_NOT_SUPPORTED, "cudnnCreate");
        return 0;
    }
    if (int rc = check(c, c->cudnnSetStream(h, d->stream), "cudnnSetStream",
                       nullptr)) {
        c->cudnnDestroy(h);
        return rc;
    }
    handles[dev][d->stream] = h;
    *out = h;
    return 0;
}

// ---- plans -------------------------------------------------------------------

struct Plan {
    bool supported = false;
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    size_t workspace = 0;
};

using PlanKey = std::array<int64_t, 7 + 3 * 6>;
// Plans live as long as the process (descriptors are small); a cache per
// device, shared by its streams (a plan is read-only once built).
static std::map<PlanKey, Plan> plans[EM_DEVICE_MAX_GPUS];
static std::mutex plan_lock[EM_DEVICE_MAX_GPUS];

static bool env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && *v != '0';
}

static bool tf32_enabled() { return env_on("EMILY_CUDA_TF32"); }

// Opt-in: on the H200 (cuDNN 9.19) the timed choice was slower than the
// heuristic's first on the bf16 3x3 cases (bench/RESULTS.md, issue 16).
static bool autotune_enabled() { return env_on("EMILY_CUDNN_AUTOTUNE"); }

static PlanKey key_of(const em_cuda_cudnn_conv *j, bool tf32) {
    PlanKey k{};
    int i = 0;
    k[i++] = j->dtype;
    k[i++] = j->ns;
    k[i++] = j->n;
    k[i++] = j->c;
    k[i++] = j->o;
    k[i++] = j->groups;
    k[i++] = tf32;
    for (int a = 0; a < 3; a++) {
        const bool on = a < j->ns;
        k[i++] = on ? j->in_sp[a] : 0;
        k[i++] = on ? j->k_sp[a] : 0;
        k[i++] = on ? j->out_sp[a] : 0;
        k[i++] = on ? j->pad[a] : 0;
        k[i++] = on ? j->strides[a] : 0;
        k[i++] = on ? j->dil[a] : 0;
    }
    return k;
}

// The job's tensors as cuDNN's 4-d (0..2 spatial axes; missing leading
// spatial axes of size 1) or 5-d shapes. False when a size exceeds int.
struct Dims {
    int nd;
    int x[5], w[5], y[5], xs[5], ys[5];
    int pad[3], stride[3], dil[3];
};

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

static bool dims_of(const em_cuda_cudnn_conv *j, Dims *d) {
    d->nd = j->ns <= 2 ? 4 : 5;
    const int nsp = d->nd - 2, lead = nsp - j->ns;
    int64_t x[5] = {j->n, j->c}, w[5] = {j->o, j->groups ? j->c / j->groups : 0},
            y[5] = {j->n, j->o};
    for (int a = 0; a < nsp; a++) {
        const int s = a - lead; // the job's axis, or < 0: a size-1 axis
        x[2 + a] = s < 0 ? 1 : j->in_sp[s];
        w[2 + a] = s < 0 ? 1 : j->k_sp[s];
        y[2 + a] = s < 0 ? 1 : j->out_sp[s];
        const int64_t pad = s < 0 ? 0 : j->pad[s];
        const int64_t st = s < 0 ? 1 : j->strides[s];
        const int64_t dl = s < 0 ? 1 : j->dil[s];
        if (!fits_int(pad) || !fits_int(st) || !fits_int(dl))
            return false;
        d->pad[a] = (int)pad;
        d->stride[a] = (int)st;
        d->dil[a] = (int)dl;
    }
    int64_t xn = 1, yn = 1, wn = 1;
    for (int i = d->nd - 1; i >= 0; i--) {
        if (!fits_int(x[i]) || !fits_int(y[i]) || !fits_int(w[i]) ||
            !fits_int(xn) || !fits_int(yn))
            return false;
        d->xs[i] = (int)xn;
        d->ys[i] = (int)yn;
        d->x[i] = (int)x[i];
        d->y[i] = (int)y[i];
        d->w[i] = (int)w[i];
        xn *= x[i];
        yn *= y[i];
        wn *= w[i];
    }
    // cuDNN's legacy API indexes with int.
    return fits_int(xn) && fits_int(yn) && fits_int(wn);
}

static cudnnDataType_t data_type(int dtype) {
    return dtype == EM_F16    ? CUDNN_DATA_HALF
           : dtype == EM_BF16 ? CUDNN_DATA_BFLOAT16
                              : CUDNN_DATA_FLOAT;
}

// The largest workspace a plan may ask for; algorithms wanting more are
// passed over for the next one.
static constexpr size_t MAX_WORKSPACE = (size_t)1 << 30;
// How many of the heuristic's usable algorithms are timed, and how many
// runs each (after one that loads its kernels).
static constexpr int TIMED_CANDIDATES = 6;
static constexpr int TIMED_RUNS = 3;

// An algorithm the plan may take: the math type it runs with and the
// workspace it needs.
struct Candidate {
    cudnnConvolutionFwdAlgo_t algo;
    cudnnMathType_t math;
    size_t workspace;
};

// Device scratch for timing, zeroed (no NaN patterns) and freed on the
// stream when it goes out of scope; false (the error cleared) when it
// does not fit.
static bool scratch(Scratch &s, size_t bytes, bool zero) {
    if (s.alloc(bytes) != cudaSuccess ||
        (zero && cudaMemsetAsync(s.p, 0, bytes, s.stream) != cudaSuccess)) {
        cudaGetLastError();
        return false;
    }
    return true;
}

// The index of the fastest of the n candidates, each run on scratch
// tensors of the plan's shapes: once to load its kernels, then
// TIMED_RUNS times between two events (this synchronises the stream,
// once per plan). 0, the heuristic's first, when timing cannot be done
// here: the stream is being captured into a CUDA graph, or the scratch
// does not fit.
static int fastest(Cudnn *c, cudnnHandle_t h, Device *d, const Dims &dm,
                   int dtype, const Plan *p, const Candidate *cand, int n) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(d->stream, &capturing) != cudaSuccess ||
        capturing != cudaStreamCaptureStatusNone) {
        cudaGetLastError();
        return 0;
    }
    size_t xn = 1, wn = 1, yn = 1, ws = 0;
    for (int i = 0; i < dm.nd; i++) {
        xn *= (size_t)dm.x[i];
        wn *= (size_t)dm.w[i];
        yn *= (size_t)dm.y[i];
    }
    for (int i = 0; i < n; i++)
        ws = cand[i].workspace > ws ? cand[i].workspace : ws;
    const size_t es = dtype_bytes(dtype);
    Scratch x(d->stream), w(d->stream), y(d->stream), work(d->stream);
    if (!scratch(x, xn * es, true) || !scratch(w, wn * es, true) ||
        !scratch(y, yn * es, false) || !scratch(work, ws, false))
        return 0;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    if (cudaEventCreate(&e0) != cudaSuccess ||
        cudaEventCreate(&e1) != cudaSuccess) {
        cudaGetLastError();
        if (e0)
            cudaEventDestroy(e0);
        return 0;
    }
    const float one = 1.0f, zero = 0.0f;
    int best = 0;
    float best_ms = INFINITY;
    for (int i = 0; i < n; i++) {
        auto run = [&] {
            return c->cudnnConvolutionForward(
                h, &one, p->x, x.p, p->w, w.p, p->conv, cand[i].algo, work.p,
                cand[i].workspace, &zero, p->y, y.p);
        };
        // A candidate cuDNN rejects here is passed over.
        if (c->cudnnSetConvolutionMathType(p->conv, cand[i].math) !=
                CUDNN_STATUS_SUCCESS ||
            run() != CUDNN_STATUS_SUCCESS)
            continue;
        bool ok = cudaEventRecord(e0, d->stream) == cudaSuccess;
        for (int r = 0; ok && r < TIMED_RUNS; r++)
            ok = run() == CUDNN_STATUS_SUCCESS;
        float ms = INFINITY;
        ok = ok && cudaEventRecord(e1, d->stream) == cudaSuccess &&
             cudaEventSynchronize(e1) == cudaSuccess &&
             cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess;
        if (ok && ms < best_ms) {
            best_ms = ms;
            best = i;
        }
    }
    cudaGetLastError();
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return best;
}

static int build_plan(Cudnn *c, cudnnHandle_t h, Device *dev,
                      const em_cuda_cudnn_conv *j, bool tf32, Plan *p) {
    Dims d;
    if (!dims_of(j, &d))
        return 0; // unsupported: sizes beyond int
    bool unsup = false;
    const cudnnDataType_t type = data_type(j->dtype);
#define EMC_STEP(call)                                                         \
    do {                                                                       \
        if (int rc_ = check(c, c->call, #call, &unsup))                        \
            return rc_;                                                        \
        if (unsup)                                                             \
            return 0;                                                          \
    } while (0)
    EMC_STEP(cudnnCreateTensorDescriptor(&p->x));
    EMC_STEP(cudnnCreateTensorDescriptor(&p->y));
    EMC_STEP(cudnnCreateFilterDescriptor(&p->w));
    EMC_STEP(cudnnCreateConvolutionDescriptor(&p->conv));
    EMC_STEP(cudnnSetTensorNdDescriptor(p->x, type, d.nd, d.x, d.xs));
    EMC_STEP(cudnnSetTensorNdDescriptor(p->y, type, d.nd, d.y, d.ys));
    EMC_STEP(cudnnSetFilterNdDescriptor(p->w, type, CUDNN_TENSOR_NCHW, d.nd,
                                        d.w));
    EMC_STEP(cudnnSetConvolutionNdDescriptor(p->conv, d.nd - 2, d.pad,
                                             d.stride, d.dil,
                                             CUDNN_CROSS_CORRELATION,
                                             CUDNN_DATA_FLOAT));
    EMC_STEP(cudnnSetConvolutionGroupCount(p->conv, (int)j->groups));
    const bool exact_f32 = j->dtype == EM_F32 && !tf32;
    const cudnnMathType_t math = exact_f32           ? CUDNN_FMA_MATH
                                 : j->dtype == EM_F32 ? CUDNN_DEFAULT_MATH
                                                      : CUDNN_TENSOR_OP_MATH;
    EMC_STEP(cudnnSetConvolutionMathType(p->conv, math));
    // cuDNN pads both sides by `pad`: its output must be the engine's (the
    // engine's high padding may be smaller by less than a stride).
    int out[5];
    EMC_STEP(cudnnGetConvolutionNdForwardOutputDim(p->conv, p->x, p->w, d.nd,
                                                   out));
    for (int i = 0; i < d.nd; i++)
        if (out[i] != d.y[i])
            return 0;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    EMC_STEP(cudnnGetConvolutionForwardAlgorithm_v7(
        h, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found,
        perf));
#undef EMC_STEP
    Candidate cand[TIMED_CANDIDATES];
    int n = 0;
    for (int i = 0; i < found && n < TIMED_CANDIDATES; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS)
            continue;
        // The descriptor runs with the math type the algorithm was rated
        // with (tensor-op variants of an algorithm are separate entries),
        // except f32 without TF32: FMA kernels only (CUDNN_DEFAULT_MATH
        // permits TF32 on Ampere and later), so tensor-op entries are
        // skipped and the others run under CUDNN_FMA_MATH.
        cudnnMathType_t run_math = perf[i].mathType;
        if (exact_f32) {
            if (run_math != CUDNN_FMA_MATH && run_math != CUDNN_DEFAULT_MATH)
                continue;
            run_math = CUDNN_FMA_MATH;
        }
        if (c->cudnnSetConvolutionMathType(p->conv, run_math) !=
            CUDNN_STATUS_SUCCESS)
            continue;
        size_t ws = 0;
        cudnnStatus_t s = c->cudnnGetConvolutionForwardWorkspaceSize(
            h, p->x, p->w, p->conv, p->y, perf[i].algo, &ws);
        if (s != CUDNN_STATUS_SUCCESS || ws > MAX_WORKSPACE)
            continue;
        cand[n++] = {perf[i].algo, run_math, ws};
    }
    if (n == 0)
        return 0; // no algorithm: im2col
    const int best = n > 1 && autotune_enabled()
                         ? fastest(c, h, dev, d, j->dtype, p, cand, n)
                         : 0;
    // The descriptor keeps the math type of the algorithm chosen.
    if (c->cudnnSetConvolutionMathType(p->conv, cand[best].math) !=
        CUDNN_STATUS_SUCCESS)
        return 0;
    p->algo = cand[best].algo;
    p->workspace = cand[best].workspace;
    p->supported = true;
    return 0;
}

// A copy of the plan for j on dev (built on first use) in *out; false
// with *rc = 0 when cuDNN is absent. Copies, read under the lock: a run
// may mark a plan unsupported while others read it.
static bool plan_for(int dev, Device *d, const em_cuda_cudnn_conv *j,
                     Plan *out, int *rc) {
    *rc = 0;
    Cudnn *c = cudnn_lib();
    if (!c)
        return false;
    if (j->dtype != EM_F32 && j->dtype != EM_F16 && j->dtype != EM_BF16) {
        *rc = fail(EM_ERR_ARGUMENT, "conv: cuDNN job of dtype %d", j->dtype);
        return false;
    }
    if (j->ns < 0 || j->ns > 3 || j->groups < 1 || j->c % j->groups ||
        j->o % j->groups) {
        *rc = fail(EM_ERR_ARGUMENT, "conv: cuDNN job with %d spatial axes, "
                   "%lld groups of %lld channels",
                   j->ns, (long long)j->groups, (long long)j->c);
        return false;
    }
    const bool tf32 = tf32_enabled();
    const PlanKey key = key_of(j, tf32);
    std::lock_guard<std::mutex> g(plan_lock[dev]);
    auto it = plans[dev].find(key);
    if (it != plans[dev].end()) {
        *out = it->second;
        return true;
    }
    cudnnHandle_t h;
    if ((*rc = handle_for(c, dev, d, &h)) || !h)
        return false;
    Plan p;
    if ((*rc = build_plan(c, h, d, j, tf32, &p)))
        return false; // not cached: a failure may be transient (memory)
    *out = plans[dev][key] = p;
    return true;
}

// Later plans of j's shape decline it.
static void decline(int dev, const em_cuda_cudnn_conv *j) {
    std::lock_guard<std::mutex> g(plan_lock[dev]);
    auto it = plans[dev].find(key_of(j, tf32_enabled()));
    if (it != plans[dev].end())
        it->second.supported = false;
}

int cudnn_conv_plan(int dev, const em_cuda_cudnn_conv *job, int *supported,
                    size_t *workspace_bytes) {
    *supported = 0;
    *workspace_bytes = 0;
    Device *d = device(dev);
    if (!d)
        return EM_ERR_RUNTIME;
    int rc;
    Plan p;
    if (plan_for(dev, d, job, &p, &rc) && p.supported) {
        *supported = 1;
        *workspace_bytes = p.workspace;
    }
    return rc;
}

int cudnn_conv_run(int dev, const em_cuda_cudnn_conv *job, int *declined) {
    *declined = 0;
    Device *d = device(dev);
    if (!d)
        return EM_ERR_RUNTIME;
    int rc;
    Plan p;
    const bool found = plan_for(dev, d, job, &p, &rc);
    if (rc)
        return rc;
    if (!found || !p.supported)
        return fail(EM_ERR_RUNTIME,
                    "conv: cuDNN run of a case cudnn_conv_plan declined");
    if (job->workspace_bytes < p.workspace)
        return fail(EM_ERR_ARGUMENT,
                    "conv: cuDNN workspace of %zu bytes, %zu needed",
                    job->workspace_bytes, p.workspace);
    Cudnn *c = &loaded; // plan_for found it usable
    cudnnHandle_t h;
    if ((rc = handle_for(c, dev, d, &h)))
        return rc;
    if (!h)
        return fail(EM_ERR_RUNTIME, "conv: no cuDNN handle");
    const float one = 1.0f, zero = 0.0f;
    bool unsup = false;
    rc = check(c,
               c->cudnnConvolutionForward(h, &one, p.x, job->x, p.w, job->w,
                                          p.conv, p.algo, job->workspace,
                                          p.workspace, &zero, p.y, job->y),
               "cudnnConvolutionForward", &unsup);
    if (!rc && unsup) {
        // Rejected before anything was queued (parameters the heuristic
        // let through): this shape takes im2col from now on.
        decline(dev, job);
        *declined = 1;
    }
    return rc;
}

} // namespace emc
