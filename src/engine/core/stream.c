/*
 * stream.c — streams: a worker thread with a bounded FIFO of jobs.
 *
 * The NIF never evaluates on a BEAM scheduler: eval, async_eval and reads
 * become jobs here, and the job's `done` callback answers the waiting
 * process. A failure of a job that nobody waits for (async_eval) is kept on
 * the stream and reported to the next job that has a `done` callback, so
 * an error is never silently lost.
 */
#include "gpu/gpu_stream.h"
#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define DEFAULT_QUEUE_LIMIT 8192

typedef struct job {
    struct job *next;
    em_job_fn fn; /* NULL for an eval job */
    em_done_fn done;
    void *ctx;
    em_array **arrays; /* eval jobs: owned references */
    size_t narrays;
} job;

struct em_stream {
    atomic_int refcount;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    job *head, *tail;
    int queued, limit;
    bool closed;
    /* Jobs ever enqueued, read without the lock by the spinning worker. */
    atomic_uint_fast64_t submitted;
    bool sleeping;            /* the worker waits on `wake` (under lock) */
    em_status pending_status; /* failure of an unobserved job */
    char pending_message[512];
    pthread_t thread;
    uint64_t id; /* engine stream id: names its CUDA streams (gpu_stream.h) */
};

/* Ids of engine streams; 0 is "no stream" (threads calling em_eval). */
static atomic_uint_fast64_t last_stream_id;

static void job_free(job *j) {
    for (size_t i = 0; i < j->narrays; i++)
        em_array_release(j->arrays[i]);
    free(j->arrays);
    free(j);
}

/* How long an idle worker polls for the next job before it sleeps. Waking a
 * sleeping thread costs 10-60 us on a virtual machine (measured here: a
 * 1-element eval round trip took 60 us with an idle worker and 15 us with a
 * busy one); a decode loop submits its next step well within this window. */
#define SPIN_NANOSECONDS 100000

static uint64_t monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Poll (without the lock) until a job arrives or the spin window ends. */
static void spin_for_work(em_stream *s, uint64_t seen) {
    uint64_t deadline = monotonic_ns() + SPIN_NANOSECONDS;
    for (int i = 0;; i++) {
        if (atomic_load_explicit(&s->submitted, memory_order_acquire) != seen)
            return;
        if ((i & 63) == 63) {
            if (monotonic_ns() > deadline)
                return;
            sched_yield(); /* let a runnable thread of this core go first */
        }
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
}

static void *worker_main(void *arg) {
    em_stream *s = arg;
    em__set_thread_stream(s->id);
    pthread_mutex_lock(&s->lock);
    for (;;) {
        if (!s->head && !s->closed) {
            uint64_t seen = atomic_load(&s->submitted);
            pthread_mutex_unlock(&s->lock);
            spin_for_work(s, seen);
            pthread_mutex_lock(&s->lock);
        }
        while (!s->head && !s->closed) {
            s->sleeping = true;
            pthread_cond_wait(&s->wake, &s->lock);
            s->sleeping = false;
        }
        job *j = s->head;
        if (!j)
            break; /* closed and drained */
        s->head = j->next;
        if (!s->head)
            s->tail = NULL;
        s->queued--;
        bool closed = s->closed;
        pthread_mutex_unlock(&s->lock);

        em_status st;
        if (closed)
            st = em__fail(
                EM_ERR_CLOSED,
                "stream: cancelled: the stream was closed before this job ran");
        else if (j->fn)
            st = j->fn(j->ctx);
        else
            st = em__eval_arrays(j->arrays, j->narrays);

        pthread_mutex_lock(&s->lock);
        if (j->done) {
            /* Report an earlier unobserved failure first. */
            if (st == EM_OK && s->pending_status != EM_OK) {
                st = em__fail(
                    s->pending_status,
                    "stream: an earlier asynchronous evaluation on this stream "
                    "failed: %s",
                    s->pending_message);
                s->pending_status = EM_OK;
            }
            pthread_mutex_unlock(&s->lock);
            j->done(st, st == EM_OK ? "" : em_last_error(), j->ctx);
            pthread_mutex_lock(&s->lock);
        } else if (st != EM_OK && s->pending_status == EM_OK) {
            s->pending_status = st;
            snprintf(s->pending_message, sizeof s->pending_message, "%s",
                     em_last_error());
        }
        pthread_mutex_unlock(&s->lock);
        job_free(j);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    em_stream_release(s); /* the worker's own reference */
    return NULL;
}

em_status em_stream_new(const em_stream_options *opts, em_stream **out) {
    *out = NULL;
    int limit =
        opts && opts->queue_limit > 0 ? opts->queue_limit : DEFAULT_QUEUE_LIMIT;
    em_stream *s = calloc(1, sizeof *s);
    if (!s)
        return em__fail(EM_ERR_OOM, "stream_new: out of memory");
    atomic_init(&s->refcount, 2); /* caller + worker */
    atomic_init(&s->submitted, 0);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->limit = limit;
    s->id = atomic_fetch_add(&last_stream_id, 1) + 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* Kernels and the graph walk use little stack, but be generous. */
    pthread_attr_setstacksize(&attr, (size_t)8 << 20);
    int rc = pthread_create(&s->thread, &attr, worker_main, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->wake);
        free(s);
        return em__fail(EM_ERR_RUNTIME,
                        "stream_new: cannot start a thread (%d)", rc);
    }
    *out = s;
    return EM_OK;
}

void em_stream_retain(em_stream *s) {
    if (s)
        atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}

void em_stream_release(em_stream *s) {
    if (!s ||
        atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
        return;
    em__gpu_stream_retire(s->id);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->wake);
    free(s);
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static em_stream *default_stream;

static void make_default(void) {
    if (em_stream_new(NULL, &default_stream) != EM_OK)
        default_stream = NULL;
}

em_status em_default_stream(em_stream **out) {
    pthread_once(&default_once, make_default);
    *out = default_stream;
    if (!default_stream)
        return em__fail(EM_ERR_RUNTIME, "default_stream: could not be created");
    return EM_OK;
}

void em_stream_close(em_stream *s) {
    pthread_mutex_lock(&s->lock);
    s->closed = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

static em_status enqueue(em_stream *s, job *j) {
    pthread_mutex_lock(&s->lock);
    em_status st = EM_OK;
    if (s->closed)
        st = em__fail(EM_ERR_CLOSED, "stream: the stream is closed");
    else if (s->queued >= s->limit)
        st = em__fail(EM_ERR_BUSY, "stream: the queue is full (limit %d)",
                      s->limit);
    if (st == EM_OK) {
        if (s->tail)
            s->tail->next = j;
        else
            s->head = j;
        s->tail = j;
        s->queued++;
        atomic_fetch_add_explicit(&s->submitted, 1, memory_order_release);
        if (s->sleeping) /* a spinning worker sees `submitted` by itself */
            pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    if (st != EM_OK)
        job_free(j);
    return st;
}

em_status em_stream_eval(em_stream *s, em_array *const *arrays, size_t n,
                         em_done_fn done, void *ctx) {
    job *j = calloc(1, sizeof *j);
    if (!j)
        return em__fail(EM_ERR_OOM, "stream_eval: out of memory");
    j->arrays = malloc(sizeof(em_array *) * (n ? n : 1));
    if (!j->arrays) {
        free(j);
        return em__fail(EM_ERR_OOM, "stream_eval: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if (!arrays[i]) {
            job_free(j);
            return em__fail(EM_ERR_ARGUMENT, "stream_eval: array %zu is NULL",
                            i);
        }
        em_array_retain(arrays[i]);
        j->arrays[j->narrays++] = arrays[i];
    }
    j->done = done;
    j->ctx = ctx;
    return enqueue(s, j);
}

em_status em_stream_submit(em_stream *s, em_job_fn fn, em_done_fn done,
                           void *ctx) {
    job *j = calloc(1, sizeof *j);
    if (!j)
        return em__fail(EM_ERR_OOM, "stream_submit: out of memory");
    j->fn = fn;
    j->done = done;
    j->ctx = ctx;
    return enqueue(s, j);
}

typedef struct barrier {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool finished;
    em_status status;
    char message[512];
} barrier;

static em_status barrier_job(void *ctx) {
    (void)ctx;
    return EM_OK;
}

static void barrier_done(em_status st, const char *message, void *ctx) {
    barrier *b = ctx;
    pthread_mutex_lock(&b->lock);
    b->status = st;
    snprintf(b->message, sizeof b->message, "%s", message);
    b->finished = true;
    pthread_cond_signal(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

em_status em_stream_synchronize(em_stream *s) {
    barrier b = {.lock = PTHREAD_MUTEX_INITIALIZER,
                 .cond = PTHREAD_COND_INITIALIZER};
    em_status st = em_stream_submit(s, barrier_job, barrier_done, &b);
    if (st != EM_OK)
        return st;
    pthread_mutex_lock(&b.lock);
    while (!b.finished)
        pthread_cond_wait(&b.cond, &b.lock);
    pthread_mutex_unlock(&b.lock);
    if (b.status != EM_OK)
        return em__fail(b.status, "%s", b.message);
    return EM_OK;
}
