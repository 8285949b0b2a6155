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
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64

/* How long a worker looks for the next region, and the caller for the
 * workers' end, before sleeping on a condition variable. A transformer
 * decode step runs hundreds of short regions a few microseconds apart: a
 * futex sleep and wake-up per region cost about as much as the work. The
 * bound keeps an idle pool from taking a core from the VM for long. */
#define SPIN_NS 20000 /* 20 us */

static struct {
    pthread_once_t once;
    pthread_mutex_t region; /* held by the caller of a parallel region */
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    int nthreads; /* including the caller */
    int sleepers; /* workers waiting on `wake` (under lock) */
    atomic_uint_fast64_t generation;
    atomic_int busy_workers;
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

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Spins until done(ctx) or SPIN_NS have passed (a pause instruction costs
 * 10 to 150 cycles depending on the processor: time, not a count, bounds
 * the spin). */
static bool spin_until(bool (*done)(void *), void *ctx) {
    uint64_t deadline = 0;
    for (unsigned i = 0;; i++) {
        if (done(ctx))
            return true;
        if ((i & 63) == 0) {
            uint64_t t = now_ns();
            if (deadline == 0)
                deadline = t + SPIN_NS;
            else if (t >= deadline)
                return false;
        }
        cpu_relax();
    }
}


static void run_chunks(void) {
    for (;;) {
        int64_t begin = atomic_fetch_add(&pool.next, pool.chunk);
        if (begin >= pool.n)
            return;
        int64_t end = begin + pool.chunk < pool.n ? begin + pool.chunk : pool.n;
        pool.fn(pool.ctx, begin, end);
    }
}

/* The generation after `seen`: spin a while, then sleep until the caller
 * of the next region bumps it (it does so under the lock and wakes
 * sleepers, so the test-then-wait below cannot miss it). */
static bool generation_moved(void *seen) {
    return atomic_load_explicit(&pool.generation, memory_order_acquire) !=
           *(uint64_t *)seen;
}

static bool workers_done(void *unused) {
    (void)unused;
    return atomic_load_explicit(&pool.busy_workers, memory_order_acquire) ==
           0;
}

static uint64_t next_generation(uint64_t seen) {
    if (spin_until(generation_moved, &seen))
        return atomic_load_explicit(&pool.generation, memory_order_acquire);
    pthread_mutex_lock(&pool.lock);
    while (atomic_load(&pool.generation) == seen) {
        pool.sleepers++;
        pthread_cond_wait(&pool.wake, &pool.lock);
        pool.sleepers--;
    }
    uint64_t g = atomic_load(&pool.generation);
    pthread_mutex_unlock(&pool.lock);
    return g;
}

static void *pool_worker(void *arg) {
    (void)arg;
    uint64_t seen = 0;
    for (;;) {
        seen = next_generation(seen);
        run_chunks();
        if (atomic_fetch_sub(&pool.busy_workers, 1) == 1) {
            /* The last one out: the caller may be asleep on `done`. */
            pthread_mutex_lock(&pool.lock);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.lock);
        }
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
    em__blas_single_threaded();
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

    /* Every worker takes part in every region (busy_workers counts them
     * all): a worker that finished the previous one is either spinning
     * or asleep, never still inside it, because the caller waited. */
    pthread_mutex_lock(&pool.lock);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.chunk = chunk;
    atomic_store(&pool.next, 0);
    atomic_store(&pool.busy_workers, pool.nthreads - 1);
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_release);
    if (pool.sleepers > 0)
        pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);

    run_chunks();

    if (!spin_until(workers_done, NULL)) {
        pthread_mutex_lock(&pool.lock);
        while (atomic_load(&pool.busy_workers) > 0)
            pthread_cond_wait(&pool.done, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
    }
    pthread_mutex_unlock(&pool.region);
}

void em__parallel_units(int64_t nunits, int64_t work, em_range_fn fn,
                        void *ctx) {
    int64_t grain = work < 1 ? EM_PARALLEL_GRAIN : EM_PARALLEL_GRAIN / work;
    em__parallel_for(nunits, grain < 1 ? 1 : grain, fn, ctx);
}
