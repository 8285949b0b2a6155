/*
 * alloc.c — the caching allocator behind every buffer.
 *
 * Blocks are 64-byte aligned and rounded up to a size class: four classes
 * per power of two (waste under 25%). A freed block goes to its class's free
 * list instead of back to the system, because a tensor program allocates the
 * same sizes step after step; em_memory_clear_cache() returns them. Counters
 * follow MLX's: active (live buffers), peak (highest active), cache (free
 * lists). With a limit set, an allocation that would pass it first drops the
 * cache, then fails with EM_ERR_OOM rather than touching the system.
 *
 * Each device has its own heap with the same classes and counters: the host
 * (index 0) takes blocks from aligned_alloc, a GPU from the CUDA backend's
 * cudaMalloc (never managed memory). A GPU block cannot hold the free-list
 * link, so GPU free lists are chains of small host nodes. A failed cudaMalloc
 * drops that GPU's cache and tries once more, then returns EM_ERR_OOM.
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

#define ALIGNMENT 64
#define NUM_CLASSES (64 * 4)
/* Cached bytes above this are returned to the system at once. */
#define DEFAULT_CACHE_CAP ((size_t)2 << 30)

typedef struct free_block {
    struct free_block *next;
    void *data;   /* GPU heaps: the device block this node stands for */
    void *stream; /* GPU heaps: the CUDA stream of the block's last use */
} free_block;

typedef struct heap_t {
    pthread_mutex_t lock;
    free_block *free_lists[NUM_CLASSES];
    size_t active, peak, cache, limit, cache_cap;
    const em_cuda_api *api; /* GPU heaps: the backend; NULL for the host */
    int ordinal;
} heap_t;

#define HEAP_INIT                                                              \
    { .lock = PTHREAD_MUTEX_INITIALIZER, .cache_cap = DEFAULT_CACHE_CAP }
static heap_t heaps[1 + EM_DEVICE_MAX_GPUS] = {HEAP_INIT, HEAP_INIT, HEAP_INIT,
                                               HEAP_INIT, HEAP_INIT, HEAP_INIT,
                                               HEAP_INIT, HEAP_INIT, HEAP_INIT};
#define heap (heaps[0])

/* Size class index and its rounded capacity for a request of n bytes. */
static int size_class(size_t n, size_t *capacity) {
    if (n <= ALIGNMENT) {
        *capacity = ALIGNMENT;
        return 0;
    }
    int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^k < n */
    size_t quarter = ((size_t)1 << k) / 4;
    size_t j = (n - ((size_t)1 << k) + quarter - 1) / quarter; /* 1..4 */
    size_t cap = ((size_t)1 << k) + j * quarter;
    cap = (cap + ALIGNMENT - 1) & ~(size_t)(ALIGNMENT - 1);
    *capacity = cap;
    return k * 4 + (int)j - 1;
}

static void drop_heap_cache_locked(heap_t *h) {
    for (int c = 0; c < NUM_CLASSES; c++) {
        free_block *b = h->free_lists[c];
        while (b) {
            free_block *next = b->next;
            if (h->api)
                h->api->free(h->ordinal, b->data);
            free(b);
            b = next;
        }
        h->free_lists[c] = NULL;
    }
    h->cache = 0;
}
static void drop_cache_locked(void) { drop_heap_cache_locked(&heap); }

static em_status block_alloc(size_t n, void **data, size_t *capacity) {
    size_t cap;
    if (n > ((size_t)1 << 62))
        return em__fail(EM_ERR_OOM, "allocation of %zu bytes is too large", n);
    size_class(n, &cap);
    /* Classes are keyed by capacity so a freed block is found again by any
     * request that rounds to the same capacity. */
    int cls = size_class(cap, &cap);
    pthread_mutex_lock(&heap.lock);
    free_block *b = heap.free_lists[cls];
    if (b) {
        heap.free_lists[cls] = b->next;
        heap.cache -= cap;
    } else {
        if (heap.limit && heap.active + heap.cache + cap > heap.limit)
            drop_cache_locked();
        if (heap.limit && heap.active + cap > heap.limit) {
            size_t active = heap.active, limit = heap.limit;
            pthread_mutex_unlock(&heap.lock);
            return em__fail(EM_ERR_OOM,
                            "allocating %zu bytes would pass the memory limit "
                            "(%zu active, limit %zu)",
                            cap, active, limit);
        }
        pthread_mutex_unlock(&heap.lock);
        b = aligned_alloc(ALIGNMENT, cap);
        if (!b) {
            pthread_mutex_lock(&heap.lock);
            drop_cache_locked();
            pthread_mutex_unlock(&heap.lock);
            b = aligned_alloc(ALIGNMENT, cap);
            if (!b)
                return em__fail(EM_ERR_OOM,
                                "out of memory allocating %zu bytes", cap);
        }
        pthread_mutex_lock(&heap.lock);
    }
    heap.active += cap;
    if (heap.active > heap.peak)
        heap.peak = heap.active;
    pthread_mutex_unlock(&heap.lock);
    *data = b;
    *capacity = cap;
    return EM_OK;
}

static void block_free(void *data, size_t capacity) {
    size_t cap;
    int cls = size_class(capacity, &cap);
    pthread_mutex_lock(&heap.lock);
    heap.active -= capacity;
    if (heap.cache + capacity <= heap.cache_cap &&
        (!heap.limit || heap.active + heap.cache + capacity <= heap.limit)) {
        free_block *b = data;
        b->next = heap.free_lists[cls];
        heap.free_lists[cls] = b;
        heap.cache += capacity;
        data = NULL;
    }
    pthread_mutex_unlock(&heap.lock);
    free(data);
}

void em_memory_get_stats(em_memory_stats *out) {
    pthread_mutex_lock(&heap.lock);
    out->active = heap.active;
    out->peak = heap.peak;
    out->cache = heap.cache;
    out->limit = heap.limit;
    pthread_mutex_unlock(&heap.lock);
}

void em_memory_reset_peak(void) {
    pthread_mutex_lock(&heap.lock);
    heap.peak = heap.active;
    pthread_mutex_unlock(&heap.lock);
}

void em_memory_clear_cache(void) {
    pthread_mutex_lock(&heap.lock);
    drop_cache_locked();
    pthread_mutex_unlock(&heap.lock);
}

void em_memory_set_limit(size_t bytes) {
    pthread_mutex_lock(&heap.lock);
    heap.limit = bytes;
    if (heap.limit && heap.active + heap.cache > heap.limit)
        drop_cache_locked();
    pthread_mutex_unlock(&heap.lock);
}

/* ---- GPU heaps ---------------------------------------------------------- */

static void gpu_block_free(em_device device, void *data, size_t capacity,
                           void *stream);

/* Filling fresh GPU blocks with 0xff (NaN for floats) makes a kernel that
 * leaves an output element unwritten visible to the tests. */
static bool gpu_poison(void) {
    static int cached = -1;
    if (cached < 0) {
        const char *v = getenv("EMILY_CUDA_POISON");
        cached = v && *v && *v != '0';
    }
    return cached;
}

/* ---- pools of captured CUDA graphs (program_graph.c) --------------------
 *
 * A captured graph keeps the device addresses its kernels were recorded
 * with, so every block it uses must stay its own while it lives. While a
 * pool is bound to the capturing thread, that thread's GPU allocations on
 * the pool's device are recorded in it, and the blocks it frees go back to
 * the pool (reused by the same capture, in stream order), never to the
 * heap. The heap counts them as active until em__gpu_pool_free. */
typedef struct pool_block {
    void *data;
    size_t capacity;
    bool in_use;
} pool_block;

struct em__gpu_pool {
    em_device device;
    pool_block *blocks;
    size_t len, cap;
    size_t bytes;
};

static _Thread_local em__gpu_pool *bound_pool;

em_status em__gpu_pool_new(em_device device, em__gpu_pool **out) {
    *out = calloc(1, sizeof **out);
    if (!*out)
        return em__fail(EM_ERR_OOM, "cuda graph: out of memory");
    (*out)->device = device;
    return EM_OK;
}

void em__gpu_pool_bind(em__gpu_pool *pool) { bound_pool = pool; }

size_t em__gpu_pool_bytes(const em__gpu_pool *pool) {
    return pool ? pool->bytes : 0;
}

/* A free block of the pool with this capacity, marked in use, or NULL. */
static void *pool_take(em__gpu_pool *pool, size_t capacity) {
    for (size_t i = 0; i < pool->len; i++)
        if (!pool->blocks[i].in_use && pool->blocks[i].capacity == capacity) {
            pool->blocks[i].in_use = true;
            return pool->blocks[i].data;
        }
    return NULL;
}

static bool pool_record(em__gpu_pool *pool, void *data, size_t capacity) {
    if (pool->len == pool->cap) {
        size_t ncap = pool->cap * 2 + 16;
        pool_block *grown = realloc(pool->blocks, ncap * sizeof *grown);
        if (!grown)
            return false;
        pool->blocks = grown;
        pool->cap = ncap;
    }
    pool->blocks[pool->len++] = (pool_block){data, capacity, true};
    pool->bytes += capacity;
    return true;
}

/* Whether data is one of the bound pool's blocks (then freed into it). */
static bool pool_give_back(em_device device, void *data) {
    em__gpu_pool *pool = bound_pool;
    if (!pool || pool->device != device)
        return false;
    for (size_t i = 0; i < pool->len; i++)
        if (pool->blocks[i].data == data) {
            pool->blocks[i].in_use = false;
            return true;
        }
    return false;
}

/* How far down a free list a GPU allocation looks for a block last used
 * on its own stream (reusable at once) before taking the head. */
#define SAME_STREAM_SCAN 8

/* A block last used on another CUDA stream may still be read there: the
 * allocating stream waits for that stream (an event) before it is handed
 * out. Blocks of the allocating stream are preferred: stream order alone
 * protects them. */
static em_status gpu_block_alloc(em_device device, size_t n, void **data,
                                 size_t *capacity, void **stream) {
    const em_cuda_api *api;
    int ordinal;
    em_status st = em__gpu_backend(device, &api, &ordinal);
    if (st != EM_OK)
        return st;
    void *cur = api->current_stream(ordinal);
    if (!cur)
        return em__gpu_fail(api, EM_ERR_RUNTIME, "allocating GPU memory");
    heap_t *h = &heaps[device];
    size_t cap;
    if (n > ((size_t)1 << 62))
        return em__fail(EM_ERR_OOM, "allocation of %zu bytes is too large", n);
    size_class(n, &cap);
    int cls = size_class(cap, &cap);
    em__gpu_pool *pool =
        bound_pool && bound_pool->device == device ? bound_pool : NULL;
    if (pool) {
        void *reused = pool_take(pool, cap);
        if (reused) {
            *data = reused;
            *capacity = cap;
            *stream = cur;
            return EM_OK;
        }
    }
    pthread_mutex_lock(&h->lock);
    h->api = api;
    h->ordinal = ordinal;
    free_block **link = &h->free_lists[cls];
    for (int i = 0; *link && i < SAME_STREAM_SCAN; i++) {
        if ((*link)->stream == cur)
            break;
        link = &(*link)->next;
    }
    /* A capture cannot wait for another stream's event: a pool takes a
     * cached block of its own stream or a fresh one. */
    if (!*link && !pool)
        link = &h->free_lists[cls];
    free_block *b = *link;
    void *p = NULL, *last = NULL;
    if (b) {
        *link = b->next;
        h->cache -= cap;
        p = b->data;
        last = b->stream;
        free(b);
    } else {
        if (h->limit && h->active + h->cache + cap > h->limit)
            drop_heap_cache_locked(h);
        if (h->limit && h->active + cap > h->limit) {
            size_t active = h->active, limit = h->limit;
            pthread_mutex_unlock(&h->lock);
            return em__fail(EM_ERR_OOM,
                            "allocating %zu bytes on the GPU would pass the "
                            "memory limit (%zu active, limit %zu)",
                            cap, active, limit);
        }
        pthread_mutex_unlock(&h->lock);
        int rc = api->malloc(ordinal, cap, &p);
        if (rc != 0) {
            pthread_mutex_lock(&h->lock);
            drop_heap_cache_locked(h);
            pthread_mutex_unlock(&h->lock);
            rc = api->malloc(ordinal, cap, &p);
            if (rc != 0)
                return em__fail(EM_ERR_OOM,
                                "out of GPU memory allocating %zu bytes: %s",
                                cap, api->last_error());
        }
        pthread_mutex_lock(&h->lock);
    }
    h->active += cap;
    if (h->active > h->peak)
        h->peak = h->active;
    pthread_mutex_unlock(&h->lock);
    if (pool && !pool_record(pool, p, cap)) {
        gpu_block_free(device, p, cap, last ? last : cur);
        return em__fail(EM_ERR_OOM, "cuda graph: out of memory");
    }
    int rc = last && last != cur ? api->stream_wait(ordinal, last) : 0;
    if (rc == 0 && gpu_poison())
        rc = api->memset(ordinal, p, 0xff, cap);
    if (rc != 0) {
        em_status failed = em__gpu_fail(api, rc, "allocating GPU memory");
        if (!pool_give_back(device, p))
            gpu_block_free(device, p, cap, last ? last : cur);
        return failed;
    }
    *data = p;
    *capacity = cap;
    *stream = cur;
    return EM_OK;
}

static void gpu_block_free(em_device device, void *data, size_t capacity,
                           void *stream) {
    heap_t *h = &heaps[device];
    size_t cap;
    int cls = size_class(capacity, &cap);
    free_block *node = malloc(sizeof *node);
    pthread_mutex_lock(&h->lock);
    h->active -= capacity;
    if (node && h->cache + capacity <= h->cache_cap &&
        (!h->limit || h->active + h->cache + capacity <= h->limit)) {
        node->data = data;
        node->stream = stream;
        node->next = h->free_lists[cls];
        h->free_lists[cls] = node;
        h->cache += capacity;
        node = NULL;
        data = NULL;
    }
    const em_cuda_api *api = h->api;
    int ordinal = h->ordinal;
    pthread_mutex_unlock(&h->lock);
    free(node);
    if (data && api)
        api->free(ordinal, data);
}

em_status em_memory_get_device_stats(em_device device, em_memory_stats *out) {
    if (device != EM_DEVICE_CPU && !em_device_is_gpu(device)) {
        memset(out, 0, sizeof *out);
        return em__fail(EM_ERR_ARGUMENT, "memory stats: unknown device %d",
                        device);
    }
    heap_t *h = &heaps[device];
    pthread_mutex_lock(&h->lock);
    out->active = h->active;
    out->peak = h->peak;
    out->cache = h->cache;
    out->limit = h->limit;
    pthread_mutex_unlock(&h->lock);
    return EM_OK;
}

void em_memory_clear_device_cache(em_device device) {
    if (device != EM_DEVICE_CPU && !em_device_is_gpu(device))
        return;
    heap_t *h = &heaps[device];
    pthread_mutex_lock(&h->lock);
    drop_heap_cache_locked(h);
    pthread_mutex_unlock(&h->lock);
}

/* ---- buffers ------------------------------------------------------------ */

em_status em__buffer_new(size_t nbytes, em_buffer **out) {
    return em__buffer_new_on(EM_DEVICE_CPU, nbytes, out);
}

em_status em__buffer_new_on(em_device device, size_t nbytes, em_buffer **out) {
    *out = NULL;
    em_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return em__fail(EM_ERR_OOM, "out of memory allocating a buffer header");
    b->device = device;
    void *stream = NULL;
    em_status st =
        device == EM_DEVICE_CPU
            ? block_alloc(nbytes ? nbytes : 1, &b->data, &b->capacity)
            : gpu_block_alloc(device, nbytes ? nbytes : 1, &b->data,
                              &b->capacity, &stream);
    if (st != EM_OK) {
        free(b);
        return st;
    }
    atomic_init(&b->refcount, 1);
    atomic_init(&b->pinned, false);
    atomic_init(&b->stream, stream);
    b->nbytes = nbytes;
    *out = b;
    return EM_OK;
}

em_status em__buffer_external(const void *data, size_t nbytes,
                              void (*release)(void *), void *ctx,
                              em_buffer **out) {
    *out = NULL;
    em_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return em__fail(EM_ERR_OOM, "out of memory allocating a buffer header");
    atomic_init(&b->refcount, 1);
    atomic_init(&b->pinned, true); /* caller memory: never written */
    b->data = (void *)data;
    b->nbytes = nbytes;
    b->release = release;
    b->release_ctx = ctx;
    *out = b;
    return EM_OK;
}

void em__buffer_retain(em_buffer *b) {
    atomic_fetch_add_explicit(&b->refcount, 1, memory_order_relaxed);
}

void em__buffer_release(em_buffer *b) {
    if (!b ||
        atomic_fetch_sub_explicit(&b->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (b->capacity && b->device != EM_DEVICE_CPU) {
        if (!pool_give_back(b->device, b->data))
            gpu_block_free(
                b->device, b->data, b->capacity,
                atomic_load_explicit(&b->stream, memory_order_acquire));
    }
    else if (b->capacity)
        block_free(b->data, b->capacity);
    else if (b->release)
        b->release(b->release_ctx);
    free(b);
}

em_status em__gpu_pool_adopt(em__gpu_pool *pool, void *data, size_t nbytes,
                             void *stream, em_buffer **out) {
    *out = NULL;
    size_t i = 0;
    while (i < pool->len && pool->blocks[i].data != data)
        i++;
    if (i == pool->len || pool->blocks[i].capacity < nbytes)
        return em__fail(EM_ERR_ARGUMENT, "cuda graph: a state block is not "
                                         "the graph's");
    em_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return em__fail(EM_ERR_OOM, "out of memory allocating a buffer header");
    b->data = data;
    b->nbytes = nbytes;
    b->capacity = pool->blocks[i].capacity;
    b->device = pool->device;
    atomic_init(&b->refcount, 1);
    atomic_init(&b->pinned, false);
    atomic_init(&b->stream, stream);
    pool->bytes -= b->capacity;
    pool->blocks[i] = pool->blocks[--pool->len];
    *out = b;
    return EM_OK;
}

void em__gpu_pool_free(em__gpu_pool *pool, void *stream) {
    if (!pool)
        return;
    if (bound_pool == pool)
        bound_pool = NULL;
    /* Blocks still "in use" belong to nobody but the graph now. */
    for (size_t i = 0; i < pool->len; i++)
        gpu_block_free(pool->device, pool->blocks[i].data,
                       pool->blocks[i].capacity, stream);
    free(pool->blocks);
    free(pool);
}
