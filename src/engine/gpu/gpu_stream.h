/*
 * gpu_stream.h — ordering GPU work across engine streams.
 *
 * Each engine stream (stream.c) evaluates on its own CUDA stream; a thread
 * that is not a stream worker (em_eval called directly) uses id 0, the
 * device's shared CUDA stream. Every GPU buffer remembers the CUDA stream
 * of its last use (em_buffer.stream). The rule that keeps this correct:
 *
 *   every use of a buffer on a stream T other than its last stream S first
 *   makes T wait for the work queued so far on S, then makes T the last
 *   stream.
 *
 * So all uses of a buffer form one chain ordered by events, and the last
 * stream covers them all: a read waits for it, and the allocator hands a
 * freed block to another stream only after making that stream wait for
 * the block's last stream (docs/CUDA.md, "Streams").
 */
#ifndef EMILY_GPU_STREAM_H
#define EMILY_GPU_STREAM_H

#include "internal.h"

/* The engine stream id of the calling thread (0: none, the shared CUDA
 * stream); stream workers set theirs before running any job. */
void em__set_thread_stream(uint64_t id);
uint64_t em__thread_stream(void); /* the id set last on this thread */
/* A retired engine stream: its CUDA streams go back to the plugin's pool
 * (nothing happens when the backend was never loaded). */
void em__gpu_stream_retire(uint64_t id);

/* Before a GPU node's kernels are queued: the current stream waits for the
 * last stream of every GPU input buffer. */
em_status em__gpu_order_inputs(em_array *node);
/* After they are queued: the current stream becomes the last stream of
 * the inputs' and the output's buffers. */
em_status em__gpu_mark_used(em_array *node);
/* Make the current stream wait for buffer b's last stream (before a read
 * or a copy of b on this thread). */
em_status em__gpu_wait_buffer(const struct em_cuda_api *api, int ordinal,
                              em_buffer *b);

/* Test hook: whether work queued on the last stream of a's buffer (a GPU
 * array that has been evaluated) is still running on the GPU. */
em_status em__gpu_array_pending(const em_array *a, bool *pending);

#endif
