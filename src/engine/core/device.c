/*
 * device.c — devices: loading the CUDA backend, transfers between host and
 * GPU memory, reading GPU arrays, the default device and GPU timing events.
 *
 * The backend is libemily_cuda.so, opened with dlopen on the first GPU
 * request so that a CPU-only machine never loads CUDA's libraries (about
 * half a second and 150 MB) and never fails for want of them. It is looked
 * for at $EMILY_CUDA_LIB, else next to the object that holds this code (the
 * NIF in priv/, libemily.so, or a program linked with libemily.a). When it
 * cannot be loaded the reason is kept and every GPU request fails with it.
 */
#define _GNU_SOURCE
#include "../cuda/emily_cuda.h"
#include "gpu/gpu_stream.h"
#include "internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- names and the default device -------------------------------------- */

const char *em_device_name(em_device device, char *buf, size_t len) {
    if (device == EM_DEVICE_CPU)
        snprintf(buf, len, "cpu");
    else if (em_device_is_gpu(device))
        snprintf(buf, len, "gpu:%d", device - 1);
    else
        snprintf(buf, len, "device %d", device);
    return buf;
}

em_device em_array_device(const em_array *a) { return a->device; }

static _Thread_local em_device default_device = EM_DEVICE_CPU;

em_device em_set_default_device(em_device device) {
    em_device old = default_device;
    default_device = device;
    return old;
}

em_device em_default_device(void) { return default_device; }

/* ---- loading the backend ----------------------------------------------- */

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const em_cuda_api *backend;
/* Set once the backend is usable: lets a stream's release tell the plugin
 * without loading it. */
static atomic_bool backend_ready;
static int backend_devices;
static char load_reason[1600];

#define NOT_AVAILABLE "CUDA backend not available: "

/* The plugin's path next to the object that holds libemily. */
static void default_plugin_path(char *out, size_t len) {
    Dl_info info;
    const char *dir_end = NULL;
    if (dladdr((void *)&em_device_available, &info) && info.dli_fname)
        dir_end = strrchr(info.dli_fname, '/');
    if (dir_end)
        snprintf(out, len, "%.*s/libemily_cuda.so",
                 (int)(dir_end - info.dli_fname), info.dli_fname);
    else
        snprintf(out, len, "libemily_cuda.so");
}

static void load_backend(void) {
    char path[1024];
    const char *env = getenv("EMILY_CUDA_LIB");
    if (env && *env)
        snprintf(path, sizeof path, "%s", env);
    else
        default_plugin_path(path, sizeof path);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(load_reason, sizeof load_reason, NOT_AVAILABLE "%s",
                 why ? why : path);
        return;
    }
    em_cuda_get_api_fn get =
        (em_cuda_get_api_fn)dlsym(lib, "emily_cuda_get_api");
    const em_cuda_api *api = get ? get() : NULL;
    if (!api || api->version != EM_CUDA_API_VERSION) {
        snprintf(load_reason, sizeof load_reason,
                 NOT_AVAILABLE "%s is not a matching Emily CUDA plugin "
                               "(expected API version %d)",
                 path, EM_CUDA_API_VERSION);
        dlclose(lib);
        return;
    }
    int n = api->device_count();
    if (n <= 0) {
        snprintf(load_reason, sizeof load_reason, NOT_AVAILABLE "%s",
                 api->last_error());
        /* The library stays loaded: CUDA's runtime does not support being
         * unloaded and loaded again in one process. */
        return;
    }
    backend_devices = n;
    backend = api;
    atomic_store(&backend_ready, true);
}

bool em_device_available(em_device device, const char **reason) {
    static char bad[64];
    if (device == EM_DEVICE_CPU)
        return true;
    if (!em_device_is_gpu(device)) {
        snprintf(bad, sizeof bad, "unknown device %d", device);
        if (reason)
            *reason = bad;
        return false;
    }
    pthread_once(&load_once, load_backend);
    if (!backend) {
        if (reason)
            *reason = load_reason;
        return false;
    }
    if (device - 1 >= backend_devices) {
        static char missing[128];
        snprintf(missing, sizeof missing,
                 NOT_AVAILABLE "gpu:%d requested, this machine has %d GPU(s)",
                 device - 1, backend_devices);
        if (reason)
            *reason = missing;
        return false;
    }
    return true;
}

/* ---- engine streams -> CUDA streams ------------------------------------ */

/* This thread's engine stream, and the id last given to the plugin's
 * set_stream (both 0 at first, as the plugin's). */
static _Thread_local uint64_t thread_stream, bound_stream;

void em__set_thread_stream(uint64_t id) { thread_stream = id; }
uint64_t em__thread_stream(void) { return thread_stream; }

void em__gpu_stream_retire(uint64_t id) {
    if (atomic_load(&backend_ready))
        backend->stream_retire(id);
}

em_status em__gpu_backend(em_device device, const em_cuda_api **api,
                          int *ordinal) {
    /* The fast path of every GPU launch: a loaded backend and a valid GPU. */
    if (em_device_is_gpu(device) &&
        atomic_load_explicit(&backend_ready, memory_order_acquire) &&
        device - 1 < backend_devices) {
        if (bound_stream != thread_stream) {
            backend->set_stream(thread_stream);
            bound_stream = thread_stream;
        }
        if (api)
            *api = backend;
        if (ordinal)
            *ordinal = device - 1;
        return EM_OK;
    }
    /* The CPU is available but has no GPU backend (event timing on it, say). */
    if (!em_device_is_gpu(device))
        return em__fail(EM_ERR_ARGUMENT, "device %d is not a GPU", (int)device);
    const char *reason;
    if (!em_device_available(device, &reason))
        return em__fail(em_device_is_gpu(device) ? EM_ERR_UNSUPPORTED
                                                 : EM_ERR_ARGUMENT,
                        "%s", reason);
    if (bound_stream != thread_stream) {
        backend->set_stream(thread_stream);
        bound_stream = thread_stream;
    }
    if (api)
        *api = backend;
    if (ordinal)
        *ordinal = device - 1;
    return EM_OK;
}

em_status em__gpu_fail(const em_cuda_api *api, int status, const char *op) {
    return em__fail(status ? (em_status)status : EM_ERR_RUNTIME,
                    "%s on the GPU: %s", op, api->last_error());
}

em_status em_device_synchronize(em_device device) {
    if (device == EM_DEVICE_CPU)
        return EM_OK;
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(device, &api, &ord);
    if (st != EM_OK)
        return st;
    int rc = api->synchronize(ord);
    return rc ? em__gpu_fail(api, rc, "synchronize") : EM_OK;
}

/* ---- reading and transfers --------------------------------------------- */

em_status em__read_device(const em_array *a, void *dst, size_t nbytes) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(a->device, &api, &ord);
    if (st == EM_OK)
        st = em__gpu_wait_buffer(api, ord, a->buffer);
    if (st != EM_OK)
        return st;
    int rc = api->copy_to_host(ord, dst, em__data(a), nbytes);
    return rc ? em__gpu_fail(api, rc, "read") : EM_OK;
}

/* The input is row-contiguous (em_to_device makes it so); the output is a
 * fresh row-major buffer on the target device. */
static em_status transfer_eval(em_array *node) {
    const em_array *in = node->inputs[0];
    size_t nbytes = em_array_nbytes(node);
    em_status st = em__buffer_new_on(node->device, nbytes, &node->buffer);
    if (st != EM_OK || nbytes == 0)
        return st;
    const em_cuda_api *api;
    int ord, rc;
    if (node->device == EM_DEVICE_CPU) { /* GPU -> host */
        st = em__gpu_backend(in->device, &api, &ord);
        if (st == EM_OK) /* the copy runs on this thread's stream */
            st = em__gpu_wait_buffer(api, ord, in->buffer);
        if (st != EM_OK)
            return st;
        rc = api->copy_to_host(ord, node->buffer->data, em__data(in), nbytes);
    } else if (in->device == EM_DEVICE_CPU) { /* host -> GPU */
        st = em__gpu_backend(node->device, &api, &ord);
        if (st != EM_OK)
            return st;
        rc = api->copy_to_device(ord, node->buffer->data, em__data(in), nbytes);
    } else {
        return em__fail(EM_ERR_UNSUPPORTED,
                        "to_device: GPU-to-GPU transfers are not implemented "
                        "yet (go through the CPU)");
    }
    return rc ? em__gpu_fail(api, rc, "to_device") : EM_OK;
}

/* The gradient goes back to where the input lives. */
static em_status transfer_vjp(em_array *node, em_array *ct, const bool *needs,
                              em_array **in_cts) {
    return needs[0] ? em_to_device(ct, node->inputs[0]->device, &in_cts[0])
                    : EM_OK;
}

static const em_prim transfer_prim = {"to_device", transfer_eval, transfer_vjp,
                                      transfer_eval};

em_status em_to_device(em_array *a, em_device device, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "to_device: out is NULL");
    *out = NULL;
    if (!a)
        return em__fail(EM_ERR_ARGUMENT, "to_device: input is NULL");
    if (device != EM_DEVICE_CPU && !em_device_is_gpu(device))
        return em__fail(EM_ERR_ARGUMENT, "to_device: unknown device %d",
                        device);
    if (device != EM_DEVICE_CPU) {
        em_status st = em__gpu_backend(device, NULL, NULL);
        if (st != EM_OK)
            return st;
    }
    if (a->device == device) {
        em_array_retain(a);
        *out = a;
        return EM_OK;
    }
    /* Only the viewed elements travel: a strided or broadcast view is made
     * contiguous where it lives. */
    em_array *src;
    em_status st = em_contiguous(a, &src);
    if (st != EM_OK)
        return st;
    em_array *node;
    st = em__node_new_on(&transfer_prim, device, a->dtype, a->shape, a->ndim,
                         &src, 1, &node);
    em_array_release(src);
    if (st != EM_OK)
        return st;
    *out = node;
    return EM_OK;
}

/* ---- timing events ----------------------------------------------------- */

struct em_device_event {
    const em_cuda_api *api;
    void *event;
};

em_status em_device_event_record(em_device device, em_device_event **out) {
    *out = NULL;
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(device, &api, &ord);
    if (st != EM_OK)
        return st;
    em_device_event *e = calloc(1, sizeof *e);
    if (!e)
        return em__fail(EM_ERR_OOM, "event: out of memory");
    e->api = api;
    int rc = api->event_record(ord, &e->event);
    if (rc) {
        free(e);
        return em__gpu_fail(api, rc, "event_record");
    }
    *out = e;
    return EM_OK;
}

em_status em_device_event_elapsed(em_device_event *start, em_device_event *end,
                                  double *ms) {
    if (!start || !end || !ms)
        return em__fail(EM_ERR_ARGUMENT, "event_elapsed: NULL argument");
    int rc = start->api->event_elapsed(start->event, end->event, ms);
    return rc ? em__gpu_fail(start->api, rc, "event_elapsed") : EM_OK;
}

void em_device_event_release(em_device_event *e) {
    if (!e)
        return;
    e->api->event_destroy(e->event);
    free(e);
}
