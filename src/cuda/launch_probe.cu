// launch_probe.cu — where the host time of one eager launch goes: the
// plugin's device lookup, cudaGetLastError, and an empty kernel queued
// three ways (triple chevron, cudaLaunchKernel with the function known,
// the driver's cuLaunchKernel with the CUfunction known). Each part is
// timed over batches of launches with a synchronisation between batches,
// outside the clock, so the launch queue never fills and the figure is the
// host's cost, not the GPU's; one more run without pauses shows what a
// full queue adds. cuda_bench --eager prints the parts.
#include "common.cuh"

#include <cuda.h>

#include <chrono>

namespace emc {

__global__ void probe_empty_kernel(int) {}

namespace {

using Clock = std::chrono::steady_clock;
constexpr int BATCH = 128;

// Microseconds per call of f over iters calls, in batches of BATCH with a
// stream sync between batches (pause) or none; the first error stops it.
template <class F>
int time_calls(Device *d, int iters, bool pause, double *us, F &&f) {
    double total = 0;
    for (int done = 0; done < iters;) {
        const int n = pause && iters - done > BATCH ? BATCH : iters - done;
        const auto t0 = Clock::now();
        for (int i = 0; i < n; i++)
            if (int rc = f())
                return rc;
        total += std::chrono::duration<double, std::micro>(Clock::now() - t0)
                     .count();
        done += n;
        if (pause)
            EMC_TRY(cudaStreamSynchronize(d->stream));
    }
    EMC_TRY(cudaStreamSynchronize(d->stream));
    *us = total / iters;
    return 0;
}

} // namespace

int launch_probe(int dev, int iters, em_cuda_launch_probe *out) {
    memset(out, 0, sizeof *out);
    out->batch = BATCH;
    Device *d = device(dev);
    if (!d)
        return EM_ERR_RUNTIME;
    if (iters < 1)
        return fail(EM_ERR_ARGUMENT, "launch_probe: %d iterations", iters);
    cudaFunction_t fn = nullptr;
    EMC_TRY(cudaGetFuncBySymbol(&fn, (const void *)probe_empty_kernel));
    void *entry = nullptr;
    cudaDriverEntryPointQueryResult found;
    EMC_TRY(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &entry, 12000,
                                             cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !entry)
        return fail(EM_ERR_RUNTIME, "launch_probe: no cuLaunchKernel");
    auto cu_launch = (decltype(&cuLaunchKernel))entry;
    int arg = 0;
    void *args[1] = {&arg};
    const void *kernel = (const void *)probe_empty_kernel;
    auto chevron = [&] {
        probe_empty_kernel<<<1, 32, 0, d->stream>>>(arg);
        return 0;
    };
    auto checked = [&] {
        probe_empty_kernel<<<1, 32, 0, d->stream>>>(arg);
        EMC_LAUNCHED("probe kernel");
        return 0;
    };
    auto runtime = [&] {
        EMC_TRY(cudaLaunchKernel(kernel, dim3(1), dim3(32), args, 0,
                                 d->stream));
        return 0;
    };
    auto driver = [&] {
        CUresult r = cu_launch((CUfunction)fn, 1, 1, 1, 32, 1, 1, 0,
                               (CUstream)d->stream, args, nullptr);
        return r == CUDA_SUCCESS
                   ? 0
                   : fail(EM_ERR_RUNTIME, "cuLaunchKernel: error %d", (int)r);
    };
    auto lookup = [&] { return device(dev) ? 0 : (int)EM_ERR_RUNTIME; };
    auto last_error = [&] {
        cudaError_t e = cudaGetLastError();
        return e == cudaSuccess ? 0 : cuda_fail(e, "cudaGetLastError");
    };
    int rc = 0;
    // Warm-up: module loading and the first launch's setup stay out.
    (void)((rc = time_calls(d, 1000, true, &out->chevron_us, chevron)) ||
           (rc = time_calls(d, 100, true, &out->driver_launch_us, driver)) ||
           (rc = time_calls(d, iters, true, &out->device_lookup_us, lookup)) ||
           (rc = time_calls(d, iters, true, &out->get_last_error_us,
                            last_error)) ||
           (rc = time_calls(d, iters, true, &out->chevron_us, chevron)) ||
           (rc = time_calls(d, iters, true, &out->chevron_checked_us,
                            checked)) ||
           (rc = time_calls(d, iters, true, &out->launch_kernel_us, runtime)) ||
           (rc = time_calls(d, iters, true, &out->driver_launch_us, driver)) ||
           (rc = time_calls(d, iters, false, &out->full_queue_us, chevron)));
    return rc;
}

} // namespace emc
