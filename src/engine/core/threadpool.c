/*
 * threadpool.c — a fork-join pool for splitting one kernel across cores.
 *
 * One parallel region runs at a time; a second caller (another stream's
 * worker) that finds the pool busy runs its range inline instead of
 * queueing behind it. Workers are started on first use and live for the
 * process. EMILY_NUM_THREADS overrides the core count.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 64

static struct {
    pthread_once_t once;
    pthread_mutex_t region; /* held by the caller of a parallel region */
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    int nthreads; /* including the caller */
    uint64_t generation;
    int busy_workers;
    em_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_llong next;
} pool = {
    .once = PTHREAD_ONCE_INIT,
    .region = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .nthreads = 1,
};

static void run_chunks(void) {
    for (;;) {
        int64_t begin = atomic_fetch_add(&pool.next, pool.chunk);
        if (begin >= pool.n)
            return;
        int64_t end = begin + pool.chunk < pool.n ? begin + pool.chunk : pool.n;
        pool.fn(pool.ctx, begin, end);
    }
}

static void *pool_worker(void *arg) {
    (void)arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.generation == seen)
            pthread_cond_wait(&pool.wake, &pool.lock);
        seen = pool.generation;
        pthread_mutex_unlock(&pool.lock);
        run_chunks();
        pthread_mutex_lock(&pool.lock);
        if (--pool.busy_workers == 0)
            pthread_cond_signal(&pool.done);
    }
    return NULL;
}

static void pool_start(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *env = getenv("EMILY_NUM_THREADS");
    if (env && atoi(env) > 0)
        cores = atoi(env);
    if (cores < 1)
        cores = 1;
    if (cores > MAX_THREADS)
        cores = MAX_THREADS;
    int started = 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (long i = 1; i < cores; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, pool_worker, NULL) != 0)
            break; /* fewer threads is still correct */
        started++;
    }
    pthread_attr_destroy(&attr);
    pool.nthreads = started;
}

int em__num_threads(void) {
    pthread_once(&pool.once, pool_start);
    return pool.nthreads;
}

void em__parallel_for(int64_t n, int64_t grain, em_range_fn fn, void *ctx) {
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    int threads = n >= 2 * grain ? em__num_threads() : 1;
    if (threads <= 1 || pthread_mutex_trylock(&pool.region) != 0) {
        fn(ctx, 0, n);
        return;
    }
    /* A few chunks per thread balance a noisy machine without making the
     * chunks so small that streaming loops lose their prefetch. */
    int64_t chunk = (n + threads * 4 - 1) / (threads * 4);
    if (chunk < grain / 2)
        chunk = grain / 2;
    /* Cache-line multiples for element ranges; a few heavy items (rows,
     * GEMM panels) are left unrounded so they still spread over threads. */
    if (chunk >= 1024)
        chunk = (chunk + 63) & ~(int64_t)63;
    if (chunk < 1)
        chunk = 1;

    pthread_mutex_lock(&pool.lock);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.chunk = chunk;
    atomic_store(&pool.next, 0);
    pool.busy_workers = threads - 1;
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);

    run_chunks();

    pthread_mutex_lock(&pool.lock);
    while (pool.busy_workers > 0)
        pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.region);
}

void em__parallel_units(int64_t nunits, int64_t work, em_range_fn fn,
                        void *ctx) {
    int64_t grain = work < 1 ? EM_PARALLEL_GRAIN : EM_PARALLEL_GRAIN / work;
    em__parallel_for(nunits, grain < 1 ? 1 : grain, fn, ctx);
}
