// nccl.cu — collectives through NCCL for Emily.Distributed's GPU
// communicators (src/engine/distributed/nccl.c is the engine side).
//
// NCCL is not linked: libnccl.so.2 is opened with dlopen on first use, so
// the plugin loads (and every other GPU op works) on machines without it.
// Where it is looked for, in order: $EMILY_NCCL_LIB; the loader's search
// path ("libnccl.so.2"); the lib dir of the nvidia-nccl-cu* pip package
// (nvidia/nccl/lib under a site-packages or dist-packages dir of
// $VIRTUAL_ENV, ~/.local, /usr/local or /usr). Only nccl.h's types are
// used at compile time.
//
// Operations are queued on the calling thread's current stream of the
// device (Device::stream), like every kernel of the plugin, so the engine
// orders them with the rest of the graph as usual.
#include "common.cuh"

#include <nccl.h>

#include <dlfcn.h>
#include <glob.h>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>

namespace emc {

namespace {

struct NcclLib {
    bool tried = false;
    void *handle = nullptr;
    std::string tried_paths;
    decltype(&ncclGetUniqueId) get_unique_id = nullptr;
    decltype(&ncclCommInitRank) comm_init_rank = nullptr;
    decltype(&ncclCommDestroy) comm_destroy = nullptr;
    decltype(&ncclGetErrorString) error_string = nullptr;
    decltype(&ncclAllReduce) all_reduce = nullptr;
    decltype(&ncclAllGather) all_gather = nullptr;
    decltype(&ncclReduceScatter) reduce_scatter = nullptr;
    decltype(&ncclSend) send = nullptr;
    decltype(&ncclRecv) recv = nullptr;
};

NcclLib lib;
std::mutex lib_lock;

void *try_open(const char *path) {
    if (!lib.tried_paths.empty())
        lib.tried_paths += ", ";
    lib.tried_paths += path;
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

// The first match of a glob pattern that opens.
void *try_glob(const std::string &pattern) {
    glob_t g;
    void *h = nullptr;
    if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && !h; i++)
            h = try_open(g.gl_pathv[i]);
        globfree(&g);
    } else {
        if (!lib.tried_paths.empty())
            lib.tried_paths += ", ";
        lib.tried_paths += pattern;
    }
    return h;
}

void *open_nccl() {
    if (const char *env = getenv("EMILY_NCCL_LIB"))
        return try_open(env);
    if (void *h = try_open("libnccl.so.2"))
        return h;
    const char *rel = "/lib/python3*/*-packages/nvidia/nccl/lib/libnccl.so.2";
    const char *venv = getenv("VIRTUAL_ENV");
    const char *home = getenv("HOME");
    std::string prefixes[] = {venv ? venv : "", home ? std::string(home) + "/.local" : "",
                              "/usr/local", "/usr"};
    for (const std::string &prefix : prefixes)
        if (!prefix.empty())
            if (void *h = try_glob(prefix + rel))
                return h;
    return nullptr;
}

template <typename F> bool resolve(F &fn, const char *name) {
    fn = reinterpret_cast<F>(dlsym(lib.handle, name));
    return fn != nullptr;
}

// Opens NCCL once; 0 or an error naming what was tried.
int load() {
    std::lock_guard<std::mutex> guard(lib_lock);
    if (!lib.tried) {
        lib.tried = true;
        lib.handle = open_nccl();
        if (lib.handle &&
            !(resolve(lib.get_unique_id, "ncclGetUniqueId") &&
              resolve(lib.comm_init_rank, "ncclCommInitRank") &&
              resolve(lib.comm_destroy, "ncclCommDestroy") &&
              resolve(lib.error_string, "ncclGetErrorString") &&
              resolve(lib.all_reduce, "ncclAllReduce") &&
              resolve(lib.all_gather, "ncclAllGather") &&
              resolve(lib.reduce_scatter, "ncclReduceScatter") &&
              resolve(lib.send, "ncclSend") && resolve(lib.recv, "ncclRecv"))) {
            dlclose(lib.handle);
            lib.handle = nullptr;
            lib.tried_paths += " (found, but without the NCCL 2 symbols)";
        }
    }
    if (!lib.handle)
        return fail(EM_ERR_RUNTIME,
                    "NCCL is not available: libnccl.so.2 not found (tried %s); "
                    "install it (pip install nvidia-nccl-cu13) or set "
                    "EMILY_NCCL_LIB to its path",
                    lib.tried_paths.c_str());
    return 0;
}

int nccl_fail(ncclResult_t r, const char *what) {
    return fail(EM_ERR_RUNTIME, "%s: %s", what, lib.error_string(r));
}

#define EMC_NCCL(call, what)                                                   \
    do {                                                                       \
        ncclResult_t r_ = (call);                                              \
        if (r_ != ncclSuccess)                                                 \
            return nccl_fail(r_, what);                                        \
    } while (0)

// The NCCL type for moving (or summing) elements of an em_dtype, and how
// many NCCL elements one engine element is. Complex numbers are pairs of
// reals (a sum is a sum of parts); pred sums as a max over bytes (a
// logical or); 16-bit integers have no NCCL type, so they are moved as
// bytes and cannot be summed.
bool nccl_type(int dtype, bool sum, ncclDataType_t *t, int64_t *per) {
    *per = 1;
    switch (dtype) {
    case EM_PRED: *t = ncclUint8; return true;
    case EM_U8: *t = ncclUint8; return true;
    case EM_S8: *t = ncclInt8; return true;
    case EM_U32: *t = ncclUint32; return true;
    case EM_S32: *t = ncclInt32; return true;
    case EM_U64: *t = ncclUint64; return true;
    case EM_S64: *t = ncclInt64; return true;
    case EM_F16: *t = ncclFloat16; return true;
    case EM_BF16: *t = ncclBfloat16; return true;
    case EM_F32: *t = ncclFloat32; return true;
    case EM_F64: *t = ncclFloat64; return true;
    case EM_C64: *t = ncclFloat32; *per = 2; return true;
    case EM_C128: *t = ncclFloat64; *per = 2; return true;
    case EM_U16:
    case EM_S16:
        *t = ncclUint8;
        *per = 2;
        return !sum;
    default: return false;
    }
}

} // namespace

int nccl_unique_id(unsigned char id[128]) {
    if (int rc = load())
        return rc;
    static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes");
    ncclUniqueId uid;
    EMC_NCCL(lib.get_unique_id(&uid), "ncclGetUniqueId");
    memcpy(id, uid.internal, sizeof uid.internal);
    return 0;
}

int nccl_comm_init(int dev, int size, int rank, const unsigned char id[128],
                   void **comm) {
    *comm = nullptr;
    if (int rc = load())
        return rc;
    if (!device(dev)) // selects dev on this thread
        return EM_ERR_RUNTIME;
    ncclUniqueId uid;
    memcpy(uid.internal, id, sizeof uid.internal);
    ncclComm_t c = nullptr;
    EMC_NCCL(lib.comm_init_rank(&c, size, uid, rank), "ncclCommInitRank");
    *comm = (void *)c;
    return 0;
}

void nccl_comm_destroy(void *comm) {
    if (comm && lib.comm_destroy)
        lib.comm_destroy((ncclComm_t)comm);
}

int nccl_collective(int dev, const em_cuda_nccl *job) {
    if (int rc = load())
        return rc;
    Device *d = device(dev);
    if (!d)
        return EM_ERR_RUNTIME;
    const bool sum = job->op == EM_CUDA_NCCL_ALL_SUM ||
                     job->op == EM_CUDA_NCCL_REDUCE_SCATTER;
    ncclDataType_t type;
    int64_t per;
    if (!nccl_type(job->dtype, sum, &type, &per))
        // (the plugin links nothing of the engine: no em_dtype_name here)
        return fail(EM_ERR_ARGUMENT,
                    "NCCL cannot %s elements of this dtype (engine dtype %d)%s",
                    sum ? "sum" : "move", job->dtype,
                    job->dtype == EM_U16 || job->dtype == EM_S16
                        ? ": NCCL has no 16-bit integer type to sum"
                        : "");
    const ncclRedOp_t red = job->dtype == EM_PRED ? ncclMax : ncclSum;
    const size_t count = (size_t)(job->count * per);
    ncclComm_t comm = (ncclComm_t)job->comm;
    switch (job->op) {
    case EM_CUDA_NCCL_ALL_SUM:
        EMC_NCCL(lib.all_reduce(job->send, job->recv, count, type, red, comm,
                                d->stream),
                 "ncclAllReduce");
        return 0;
    case EM_CUDA_NCCL_ALL_GATHER:
        EMC_NCCL(lib.all_gather(job->send, job->recv, count, type, comm,
                                d->stream),
                 "ncclAllGather");
        return 0;
    case EM_CUDA_NCCL_REDUCE_SCATTER:
        EMC_NCCL(lib.reduce_scatter(job->send, job->recv, count, type, red,
                                    comm, d->stream),
                 "ncclReduceScatter");
        return 0;
    case EM_CUDA_NCCL_SEND:
        EMC_NCCL(lib.send(job->send, count, type, job->peer, comm, d->stream),
                 "ncclSend");
        return 0;
    case EM_CUDA_NCCL_RECV:
        EMC_NCCL(lib.recv(job->recv, count, type, job->peer, comm, d->stream),
                 "ncclRecv");
        return 0;
    default:
        return fail(EM_ERR_ARGUMENT, "unknown NCCL operation %d", job->op);
    }
}

} // namespace emc
