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
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

#define ALIGNMENT 64
#define NUM_CLASSES (64 * 4)
/* Cached bytes above this are returned to the system at once. */
#define DEFAULT_CACHE_CAP ((size_t)2 << 30)

typedef struct free_block {
    struct free_block *next;
} free_block;

static struct {
    pthread_mutex_t lock;
    free_block *free_lists[NUM_CLASSES];
    size_t active, peak, cache, limit, cache_cap;
} heap = {.lock = PTHREAD_MUTEX_INITIALIZER, .cache_cap = DEFAULT_CACHE_CAP};

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

static void drop_cache_locked(void) {
    for (int c = 0; c < NUM_CLASSES; c++) {
        free_block *b = heap.free_lists[c];
        while (b) {
            free_block *next = b->next;
            free(b);
            b = next;
        }
        heap.free_lists[c] = NULL;
    }
    heap.cache = 0;
}

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

/* ---- buffers ------------------------------------------------------------ */

em_status em__buffer_new(size_t nbytes, em_buffer **out) {
    *out = NULL;
    em_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return em__fail(EM_ERR_OOM, "out of memory allocating a buffer header");
    em_status st = block_alloc(nbytes ? nbytes : 1, &b->data, &b->capacity);
    if (st != EM_OK) {
        free(b);
        return st;
    }
    atomic_init(&b->refcount, 1);
    atomic_init(&b->pinned, false);
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
    if (b->capacity)
        block_free(b->data, b->capacity);
    else if (b->release)
        b->release(b->release_ctx);
    free(b);
}
