/*
 * emily_device.h — where arrays live: the CPU (the default) or a GPU.
 *
 * Every array has a device. An op's output lives on its inputs' device;
 * inputs on different devices are an error (EM_ERR_ARGUMENT naming the op
 * and both devices): nothing is ever copied silently. em_to_device() is the
 * one way to move data. Arrays made without inputs (from data, iota, ...)
 * are built on the CPU, or on the calling thread's default device when one
 * is set (em_set_default_device).
 *
 * The GPU backend is the shared library libemily_cuda.so, loaded with
 * dlopen on first GPU use (from $EMILY_CUDA_LIB, else next to the library
 * or program that holds libemily), so a CPU-only build never links CUDA.
 * When it cannot load (no library, no driver, no device), every GPU request
 * fails with EM_ERR_UNSUPPORTED and a message that starts "CUDA backend not
 * available: " and gives the reason.
 */
#ifndef EMILY_DEVICE_H
#define EMILY_DEVICE_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A device: 0 is the CPU; EM_DEVICE_GPU(i) is CUDA device i. */
typedef int em_device;
#define EM_DEVICE_CPU 0
#define EM_DEVICE_GPU(i) (1 + (i))
#define EM_DEVICE_MAX_GPUS 8

/* True for a GPU device number in range (whether or not it exists). */
static inline bool em_device_is_gpu(em_device d) {
    return d >= 1 && d <= EM_DEVICE_MAX_GPUS;
}

/* "cpu", "gpu:0", ... into buf (always terminated); returns buf. */
const char *em_device_name(em_device device, char *buf, size_t len);

/* Whether `device` can run work now. The CPU always can. For a GPU this
 * loads the backend on first call; when it returns false, *reason (if not
 * NULL) points to a static message ("CUDA backend not available: ..."). */
bool em_device_available(em_device device, const char **reason);

/* The device an array lives on. */
em_device em_array_device(const em_array *a);

/* The array on `device`: a lazy transfer node (a new reference to `a`
 * itself when it is already there). Only the viewed elements travel: a
 * strided view is made contiguous on its own device first. */
em_status em_to_device(em_array *a, em_device device, em_array **out);

/* The calling thread's device for arrays built without inputs (iota, eye,
 * ...); returns the previous one. EM_DEVICE_CPU unless set. */
em_device em_set_default_device(em_device device);
em_device em_default_device(void);

/* Wait until every GPU operation queued so far on `device` has finished. */
em_status em_device_synchronize(em_device device);

/* Memory counters and cache of one device (EM_DEVICE_CPU gives the same as
 * em_memory_get_stats). A device whose backend is not loaded reads zeros. */
em_status em_memory_get_device_stats(em_device device, em_memory_stats *out);
void em_memory_clear_device_cache(em_device device);

/* Timing markers on a GPU's work queue (CUDA events), for benchmarks:
 * record two, then em_device_event_elapsed waits for the later one and gives
 * the GPU time between them in milliseconds. */
typedef struct em_device_event em_device_event;
em_status em_device_event_record(em_device device, em_device_event **out);
em_status em_device_event_elapsed(em_device_event *start, em_device_event *end,
                                  double *ms);
void em_device_event_release(em_device_event *e); /* NULL is allowed */

#ifdef __cplusplus
}
#endif

#endif
