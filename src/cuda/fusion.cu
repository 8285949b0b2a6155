// fusion.cu — fused kernels: compiled at run time with NVRTC from the
// source the engine generates (src/engine/gpu/gpu_fusion.c), cached per device
// by source text (the source depends on the program's structure only, so
// another shape reuses the kernel), then launched on the device's stream
// with the shapes, strides and pointers as arguments.
//
// The generated source includes fusion_rt.cuh, which includes the same op
// headers the unfused kernels are built from (unary_ops.cuh, ...): they are
// shipped inside the plugin as strings (fusion_headers.inc, made by the
// Makefile), so each op has one definition and fused results are those of
// the unfused kernels, bit for bit. NVRTC also needs the toolkit's own
// headers (cuda_fp16.h, libcu++): $EMILY_CUDA_INCLUDE, $CUDA_HOME/include,
// $CUDA_PATH/include or the toolkit the plugin was built with.
#include "common.cuh"
#include "fusion_rt.cuh"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

static_assert(FZ_NDIM == EM_CUDA_MAX_NDIM && FZ_LOADS == EM_CUDA_FUSED_MAX_LOADS,
              "fusion_rt.cuh and emily_cuda.h disagree");

namespace emc {

namespace {

struct Header {
    const char *name, *text;
};

// emily.h's C headers, for NVRTC (which has no C library).
const Header shims[] = {
    {"stdbool.h", ""},
    {"stddef.h", "#pragma once\n#include <cuda/std/cstddef>\n"},
    {"stdint.h", "#pragma once\n#include <cuda/std/cstdint>\n"
                 "using cuda::std::int8_t; using cuda::std::int16_t;\n"
                 "using cuda::std::int32_t; using cuda::std::int64_t;\n"
                 "using cuda::std::uint8_t; using cuda::std::uint16_t;\n"
                 "using cuda::std::uint32_t; using cuda::std::uint64_t;\n"
                 "using cuda::std::uintptr_t; using cuda::std::intptr_t;\n"},
};
const Header embedded[] = {
#include "fusion_headers.inc"
};

struct Compiled {
    cudaLibrary_t lib;
    cudaKernel_t kernel;
    int smem_set; // dynamic shared memory allowed so far
};

std::mutex cache_lock;
std::unordered_map<std::string, Compiled> cache[EM_DEVICE_MAX_GPUS];
std::atomic<int64_t> compiles{0};

// The first lines of an NVRTC log, for an error message.
std::string log_head(nvrtcProgram prog) {
    size_t n = 0;
    if (nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n == 0)
        return "(no log)";
    std::string log(n, '\0');
    nvrtcGetProgramLog(prog, log.data());
    size_t cut = 0;
    for (int lines = 0; lines < 6 && cut != std::string::npos; lines++)
        cut = log.find('\n', cut ? cut + 1 : 0);
    if (cut != std::string::npos)
        log.resize(cut);
    while (!log.empty() && (log.back() == '\n' || log.back() == '\0'))
        log.pop_back();
    return log;
}

void add_include(std::vector<std::string> &opts, const char *base) {
    if (!base || !*base)
        return;
    opts.push_back(std::string("--include-path=") + base);
    opts.push_back(std::string("--include-path=") + base + "/cccl");
}

int compile(int dev, const std::string &src, Compiled *out) {
    std::vector<const char *> names, texts;
    for (const Header &h : shims) {
        names.push_back(h.name);
        texts.push_back(h.text);
    }
    for (const Header &h : embedded) {
        names.push_back(h.name);
        texts.push_back(h.text);
    }
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, src.c_str(), "emily_fused.cu",
                                       (int)names.size(), texts.data(),
                                       names.data());
    if (r != NVRTC_SUCCESS)
        return fail(EM_ERR_RUNTIME, "fused kernel: NVRTC: %s",
                    nvrtcGetErrorString(r));
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    std::vector<std::string> opts = {
        "--gpu-architecture=sm_" + std::to_string(major * 10 + minor),
        "-std=c++20", "-default-device"};
    // Automatic precompiled headers (NVRTC 12.8+): the headers are the same
    // for every fused kernel, so the later compiles of a process skip
    // parsing them (about ten times faster).
    int nv_major = 0, nv_minor = 0;
    if (nvrtcVersion(&nv_major, &nv_minor) == NVRTC_SUCCESS &&
        (nv_major > 12 || (nv_major == 12 && nv_minor >= 8)))
        opts.push_back("-pch");
    add_include(opts, getenv("EMILY_CUDA_INCLUDE"));
    for (const char *env : {"CUDA_HOME", "CUDA_PATH"})
        if (const char *home = getenv(env))
            add_include(opts, (std::string(home) + "/include").c_str());
#ifdef EMC_TOOLKIT_INCLUDE
    add_include(opts, EMC_TOOLKIT_INCLUDE);
#endif
    add_include(opts, "/usr/local/cuda/include");
    std::vector<const char *> argv;
    for (const std::string &o : opts)
        argv.push_back(o.c_str());
    r = nvrtcCompileProgram(prog, (int)argv.size(), argv.data());
    if (r != NVRTC_SUCCESS) {
        std::string head = log_head(prog);
        nvrtcDestroyProgram(&prog);
        return fail(EM_ERR_RUNTIME, "fused kernel: NVRTC: %s: %s",
                    nvrtcGetErrorString(r), head.c_str());
    }
    size_t size = 0;
    nvrtcGetCUBINSize(prog, &size);
    std::string cubin(size, '\0');
    r = nvrtcGetCUBIN(prog, cubin.data());
    nvrtcDestroyProgram(&prog);
    if (r != NVRTC_SUCCESS)
        return fail(EM_ERR_RUNTIME, "fused kernel: NVRTC: %s",
                    nvrtcGetErrorString(r));
    compiles++;
    EMC_TRY(cudaLibraryLoadData(&out->lib, cubin.data(), nullptr, nullptr, 0,
                                nullptr, nullptr, 0));
    cudaError_t e = cudaLibraryGetKernel(&out->kernel, out->lib, "emily_fused");
    if (e != cudaSuccess) {
        cudaLibraryUnload(out->lib);
        return cuda_fail(e, "cudaLibraryGetKernel");
    }
    out->smem_set = 0;
    return 0;
}

// The kernel for `src` on `dev`, compiled on first use. The lock is held
// while compiling: two threads needing the same new kernel compile it once.
int kernel_for(int dev, const char *src, int smem, cudaKernel_t *out) {
    std::lock_guard<std::mutex> guard(cache_lock);
    auto &map = cache[dev];
    auto it = map.find(src);
    if (it == map.end()) {
        Compiled c;
        int rc = compile(dev, src, &c);
        if (rc)
            return rc;
        it = map.emplace(src, c).first;
    }
    if (smem > it->second.smem_set) {
        EMC_TRY(cudaFuncSetAttribute((const void *)it->second.kernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     smem));
        it->second.smem_set = smem;
    }
    *out = it->second.kernel;
    return 0;
}

// Whether strides (over axes [d0, d0 + nd) of shape) walk those axes in
// row-major order, one element apart; all zero (kind FZ_SAME); or neither.
int kind_of(const int64_t *shape, const int64_t *stride, int d0, int nd) {
    bool unit = true, same = true;
    int64_t expect = 1;
    for (int d = d0 + nd - 1; d >= d0; d--) {
        if (shape[d] == 1)
            continue;
        unit = unit && stride[d] == expect;
        same = same && stride[d] == 0;
        expect *= shape[d];
    }
    return same ? FZ_SAME : unit ? FZ_UNIT : FZ_GENERAL;
}

bool aligned(const void *p, int esize) {
    return (uintptr_t)p % (uintptr_t)(esize * FZ_STEP) == 0;
}

} // namespace

int64_t fused_compiles() { return compiles.load(); }

int launch_fused(int dev, Device *d, const em_cuda_fused *job) {
    if (job->nloads < 0 || job->nloads > FZ_LOADS || job->ndim < 0 ||
        job->ndim > FZ_NDIM || job->nred < 0 || job->nred > job->ndim)
        return fail(EM_ERR_ARGUMENT, "fused kernel: malformed job");
    FzParams P;
    memset(&P, 0, sizeof P);
    P.nd = job->ndim;
    P.nouter = job->rows_mode ? job->ndim - job->nred : job->ndim;
    P.n = 1;
    P.rows = 1;
    P.row_len = 1;
    for (int i = 0; i < job->ndim; i++) {
        P.shape[i] = job->shape[i];
        P.n *= job->shape[i];
        if (i < P.nouter)
            P.rows *= job->shape[i];
        else
            P.row_len *= job->shape[i];
    }
    if ((job->rows_mode ? P.rows : P.n) == 0)
        return 0;
    int d0 = job->rows_mode ? P.nouter : 0;
    int nwalk = job->rows_mode ? job->ndim - P.nouter : job->ndim;
    int64_t walk = job->rows_mode ? P.row_len : P.n;
    bool vec = aligned(job->out, job->out_esize) && job->out_esize <= 8 &&
               (!job->rows_mode || !job->out_wide || P.row_len % FZ_STEP == 0);
    int cache_bytes = 0;
    int64_t smem_max = 0;
    for (int j = 0; j < job->nloads; j++) {
        FzLoad &L = P.ld[j];
        L.ptr = job->load[j];
        for (int i = 0; i < job->ndim; i++)
            L.stride[i] = job->strides[j][i];
        bool wide = !job->rows_mode || job->load_wide[j];
        L.kind = wide ? kind_of(P.shape, L.stride, d0, nwalk) : FZ_SAME;
        if (!wide)
            continue;
        if (L.kind == FZ_UNIT) {
            vec = vec && job->load_esize[j] <= 8 &&
                  aligned(L.ptr, job->load_esize[j]);
            for (int i = 0; i < P.nouter && job->rows_mode; i++)
                vec = vec && (P.shape[i] == 1 || L.stride[i] % FZ_STEP == 0);
        }
        if (job->rows_mode) {
            // Each load's cache aligned for four-element vector accesses.
            L.cache_off = cache_bytes;
            int64_t bytes = (walk * job->load_esize[j] + 63) / 64 * 64;
            if (bytes > INT32_MAX / 2)
                bytes = INT32_MAX / 2;
            cache_bytes = (int)std::min<int64_t>(
                (int64_t)cache_bytes + bytes, INT32_MAX / 2);
        }
    }
    P.vec = vec;
    P.out = job->out;
    P.nzf = -0.0f;
    P.nzd = -0.0;
    int threads, smem = 0;
    unsigned blocks;
    if (job->rows_mode) {
        int optin = 0;
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                               dev);
        smem_max = optin - 1024; // the kernel's static reduction scratch
        P.cached = job->cache_wanted && cache_bytes > 0 &&
                   cache_bytes <= smem_max;
        smem = P.cached ? cache_bytes : 0;
        int64_t steps = (P.row_len + FZ_STEP - 1) / FZ_STEP;
        threads = 32;
        while (threads < 1024 && threads < steps)
            threads *= 2;
        int64_t cap = (int64_t)d->sms * 32;
        blocks = (unsigned)(P.rows < cap ? P.rows : cap);
    } else {
        threads = 256;
        blocks = grid_for(d, (P.n + FZ_STEP - 1) / FZ_STEP, threads);
    }
    cudaKernel_t k;
    int rc = kernel_for(dev, job->source, smem, &k);
    if (rc)
        return rc;
    void *args[] = {&P};
    EMC_TRY(cudaLaunchKernel((const void *)k, dim3(blocks), dim3(threads), args,
                             (size_t)smem, d->stream));
    return 0;
}

} // namespace emc
