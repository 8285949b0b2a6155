// graph.cu — CUDA graph capture for programs replayed on a GPU
// (src/engine/compile/program_graph.c): begin/end a capture of the calling
// thread's current stream, launch and destroy the instantiated graph.
//
// Capture uses cudaStreamCaptureModeThreadLocal: an unsafe call made by
// this thread while it captures (a synchronisation, a host read, cudaFree)
// invalidates the capture, and graph_end then reports why; the engine runs
// the program the ordinary way instead. Other threads are not affected.
#include "common.cuh"

namespace emc {

#define EMC_DEVICE_OR_FAIL(d, dev)                                             \
    Device *d = device(dev);                                                   \
    if (!d)                                                                    \
    return EM_ERR_RUNTIME

int graph_begin(int dev) {
    EMC_DEVICE_OR_FAIL(d, dev);
    EMC_TRY(cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeThreadLocal));
    return 0;
}

// End the capture begun on this thread's stream. keep == 0 (the engine saw
// a failure during the capture): discard what was recorded. Otherwise
// instantiate it: *exec and *nodes (the graph's node count) on success.
// Whatever happens, the stream is no longer capturing afterwards.
int graph_end(int dev, int keep, void **exec, int64_t *nodes) {
    *exec = nullptr;
    *nodes = 0;
    EMC_DEVICE_OR_FAIL(d, dev);
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(d->stream, &graph);
    // A launch rejected during the capture may have left a sticky error.
    cudaGetLastError();
    if (e != cudaSuccess) {
        if (graph)
            cudaGraphDestroy(graph);
        return cuda_fail(e, "cudaStreamEndCapture (an operation of the "
                            "program cannot be captured)");
    }
    if (!graph)
        return fail(EM_ERR_RUNTIME, "cudaStreamEndCapture gave no graph");
    if (!keep) {
        cudaGraphDestroy(graph);
        return 0;
    }
    size_t count = 0;
    e = cudaGraphGetNodes(graph, nullptr, &count);
    cudaGraphExec_t instance = nullptr;
    if (e == cudaSuccess)
        e = cudaGraphInstantiateWithFlags(&instance, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaGraphInstantiate");
    *exec = (void *)instance;
    *nodes = (int64_t)count;
    return 0;
}

int graph_launch(int dev, void *exec) {
    EMC_DEVICE_OR_FAIL(d, dev);
    EMC_TRY(cudaGraphLaunch((cudaGraphExec_t)exec, d->stream));
    return 0;
}

// After the launches queued on `stream` (the stream they were all queued
// on) have finished.
void graph_destroy(int dev, void *exec, void *stream) {
    if (!exec || !device(dev))
        return;
    if (stream)
        cudaStreamSynchronize((cudaStream_t)stream);
    cudaGraphExecDestroy((cudaGraphExec_t)exec);
    cudaGetLastError();
}

} // namespace emc
