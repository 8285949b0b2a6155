/*
 * test_distributed.c — collectives over loopback TCP, with N ranks as
 * threads of this process (N = 1..4): hand-computed sums, every rank's
 * bytes identical, odd and empty sizes, several dtypes, shape mismatches,
 * and a peer that closes or stops answering (an error within the timeout,
 * never a hang).
 *
 * Each rank's thread records its status, message and result bytes; the
 * checks run on the main thread (the harness is not thread-safe).
 */
#include "emily_autodiff.h"
#include "emily_compile.h"
#include "emily_distributed.h"
#include "test.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 4

typedef struct rank_run {
    int rank, size;
    em_comm *comm;
    const void *ctx;
    /* results */
    em_status st;
    char message[512];
    void *bytes;
    size_t nbytes;
    em_dtype dtype;
    int ndim;
    int64_t shape[EM_MAX_NDIM];
} rank_run;

/* A rank's work: build nodes on run->comm and return the array to read
 * (or NULL with run->st set). */
typedef em_array *(*rank_fn)(rank_run *run);

/* Wire n communicators over 127.0.0.1. Each rank connects to the ranks
 * above it (which only needs their listeners) and then accepts the ones
 * below: called in rank order on one thread, that never waits. */
static void make_comms(int n, int64_t timeout_ms, em_comm **comms) {
    const char *hosts[MAX_RANKS];
    int ports[MAX_RANKS];
    for (int r = 0; r < n; r++) {
        CHECK_OK(em_comm_listen("127.0.0.1", &comms[r], &ports[r]));
        hosts[r] = "127.0.0.1";
    }
    em_comm_options o = {.timeout_ms = timeout_ms};
    for (int r = 0; r < n; r++)
        CHECK_OK(em_comm_connect(comms[r], r, n, hosts, ports, &o));
}

typedef struct thread_arg {
    rank_run *run;
    rank_fn fn;
} thread_arg;

static void *rank_main(void *p) {
    thread_arg *a = p;
    rank_run *run = a->run;
    em_array *out = a->fn(run);
    if (out) {
        run->st = em_eval(&out, 1);
        if (run->st == EM_OK) {
            run->dtype = em_array_dtype(out);
            run->ndim = em_array_ndim(out);
            memcpy(run->shape, em_array_shape(out),
                   sizeof(int64_t) * (size_t)run->ndim);
            run->nbytes = em_array_nbytes(out);
            run->bytes = malloc(run->nbytes ? run->nbytes : 1);
            run->st = em_read(out, run->bytes, run->nbytes);
        }
        em_array_release(out);
    }
    if (run->st != EM_OK)
        snprintf(run->message, sizeof run->message, "%s", em_last_error());
    return NULL;
}

/* Run fn on n ranks at once; comms may be NULL (made and released here). */
static void run_ranks(int n, em_comm **comms, rank_fn fn, const void *ctx,
                      rank_run *runs) {
    em_comm *own[MAX_RANKS] = {0};
    if (!comms) {
        make_comms(n, 0, own);
        comms = own;
    }
    pthread_t threads[MAX_RANKS];
    thread_arg args[MAX_RANKS];
    for (int r = 0; r < n; r++) {
        memset(&runs[r], 0, sizeof runs[r]);
        runs[r] = (rank_run){.rank = r, .size = n, .comm = comms[r], .ctx = ctx};
        args[r] = (thread_arg){&runs[r], fn};
        pthread_create(&threads[r], NULL, rank_main, &args[r]);
    }
    for (int r = 0; r < n; r++)
        pthread_join(threads[r], NULL);
    for (int r = 0; r < n; r++)
        em_comm_release(own[r]);
}

static void free_runs(rank_run *runs, int n) {
    for (int r = 0; r < n; r++) {
        free(runs[r].bytes);
        runs[r].bytes = NULL;
    }
}

/* Every rank succeeded and holds the same bytes. */
static void check_identical(const rank_run *runs, int n) {
    for (int r = 0; r < n; r++) {
        if (runs[r].st != EM_OK) {
            em_test_fail(__FILE__, __LINE__, "rank %d of %d failed: %s", r, n,
                         runs[r].message);
            return;
        }
        if (r > 0 && (runs[r].nbytes != runs[0].nbytes ||
                      memcmp(runs[r].bytes, runs[0].bytes, runs[0].nbytes)))
            em_test_fail(__FILE__, __LINE__,
                         "rank %d's bytes differ from rank 0's (n = %d)", r,
                         n);
    }
}

/* ---- all_sum on f32: (r + 1) * i + r on rank r ----------------------- */

typedef struct sum_case {
    int64_t count;
    em_dtype dtype;
} sum_case;

static em_array *iota_like(const rank_run *run, int64_t count, em_dtype dtype) {
    double *v = malloc(sizeof *v * (size_t)(count ? count : 1));
    for (int64_t i = 0; i < count; i++)
        v[i] = (double)((run->rank + 1) * (i % 1000) + run->rank);
    em_array *d = NULL, *x = NULL;
    em_from_data(v, sizeof *v * (size_t)count, &count, 1, EM_F64, &d);
    em_as_type(d, dtype, &x);
    em_array_release(d);
    free(v);
    return x;
}

static em_array *all_sum_iota(rank_run *run) {
    const sum_case *c = run->ctx;
    em_array *x = iota_like(run, c->count, c->dtype), *out = NULL;
    run->st = em_all_sum(x, run->comm, &out);
    em_array_release(x);
    return out;
}

EM_TEST(distributed_all_sum_sizes_and_ranks) {
    const int64_t counts[] = {0, 1, 2, 3, 7, 1000, 100003};
    for (int n = 1; n <= MAX_RANKS; n++)
        for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
            sum_case c = {counts[k], EM_F32};
            rank_run runs[MAX_RANKS];
            run_ranks(n, NULL, all_sum_iota, &c, runs);
            check_identical(runs, n);
            if (runs[0].st == EM_OK) {
                const float *got = runs[0].bytes;
                CHECK(runs[0].nbytes == (size_t)c.count * 4);
                for (int64_t i = 0; i < c.count; i++) {
                    double want = 0;
                    for (int r = 0; r < n; r++)
                        want += (r + 1) * (i % 1000) + r;
                    if (got[i] != (float)want) {
                        em_test_fail(__FILE__, __LINE__,
                                     "n=%d count=%lld: [%lld] = %g, want %g",
                                     n, (long long)c.count, (long long)i,
                                     got[i], want);
                        break;
                    }
                }
            }
            free_runs(runs, n);
        }
}

/* Integers wrap, pred is an or, f16/bf16/f64/c64 add: hand values. */
typedef struct typed_case {
    em_dtype dtype;
    const void *per_rank[MAX_RANKS]; /* 3 elements each */
} typed_case;

static em_array *all_sum_typed(rank_run *run) {
    const typed_case *c = run->ctx;
    int64_t shape[1] = {3};
    em_array *x = NULL, *out = NULL;
    em_from_data(c->per_rank[run->rank], 3 * em_dtype_size(c->dtype), shape, 1,
                 c->dtype, &x);
    run->st = em_all_sum(x, run->comm, &out);
    em_array_release(x);
    return out;
}

EM_TEST(distributed_all_sum_dtypes) {
    rank_run runs[MAX_RANKS];
    /* s32 wraps: INT32_MAX + 1 + 1 = INT32_MIN + 1 */
    const int32_t s0[3] = {INT32_MAX, -5, 7}, s1[3] = {1, 5, 8},
                  s2[3] = {1, -1, 9};
    typed_case cs = {EM_S32, {s0, s1, s2}};
    run_ranks(3, NULL, all_sum_typed, &cs, runs);
    check_identical(runs, 3);
    if (runs[0].st == EM_OK) {
        const int32_t *g = runs[0].bytes;
        CHECK(g[0] == INT32_MIN + 1 && g[1] == -1 && g[2] == 24);
    }
    free_runs(runs, 3);

    const uint8_t u0[3] = {200, 1, 0}, u1[3] = {100, 2, 0};
    typed_case cu = {EM_U8, {u0, u1}};
    run_ranks(2, NULL, all_sum_typed, &cu, runs);
    check_identical(runs, 2);
    if (runs[0].st == EM_OK) {
        const uint8_t *g = runs[0].bytes;
        CHECK(g[0] == 44 && g[1] == 3 && g[2] == 0);
    }
    free_runs(runs, 2);

    const uint8_t p0[3] = {1, 0, 0}, p1[3] = {1, 1, 0};
    typed_case cp = {EM_PRED, {p0, p1}};
    run_ranks(2, NULL, all_sum_typed, &cp, runs);
    check_identical(runs, 2);
    if (runs[0].st == EM_OK) {
        const uint8_t *g = runs[0].bytes;
        CHECK(g[0] == 1 && g[1] == 1 && g[2] == 0);
    }
    free_runs(runs, 2);

    /* f16: 1.0 = 0x3c00, 0.5 = 0x3800, 2.0 = 0x4000; 1+0.5+0.5 = 2 exact */
    const uint16_t h0[3] = {0x3c00, 0x3800, 0}, h1[3] = {0x3800, 0x3800, 0},
                   h2[3] = {0x3800, 0x3c00, 0x3c00};
    typed_case ch = {EM_F16, {h0, h1, h2}};
    run_ranks(3, NULL, all_sum_typed, &ch, runs);
    check_identical(runs, 3);
    if (runs[0].st == EM_OK) {
        const uint16_t *g = runs[0].bytes;
        CHECK(g[0] == 0x4000 && g[1] == 0x4000 && g[2] == 0x3c00);
    }
    free_runs(runs, 3);

    /* bf16: 1.0 = 0x3f80, 2.0 = 0x4000, 3.0 = 0x4040 */
    const uint16_t b0[3] = {0x3f80, 0x4000, 0}, b1[3] = {0x4000, 0x3f80, 0};
    typed_case cb = {EM_BF16, {b0, b1}};
    run_ranks(2, NULL, all_sum_typed, &cb, runs);
    check_identical(runs, 2);
    if (runs[0].st == EM_OK) {
        const uint16_t *g = runs[0].bytes;
        CHECK(g[0] == 0x4040 && g[1] == 0x4040 && g[2] == 0);
    }
    free_runs(runs, 2);

    const double d0[3] = {0.25, -1, 1e300}, d1[3] = {0.5, 1, 1e300},
                 d2[3] = {0.125, 2, -1e300}, d3[3] = {1, 4, 0};
    typed_case cd = {EM_F64, {d0, d1, d2, d3}};
    run_ranks(4, NULL, all_sum_typed, &cd, runs);
    check_identical(runs, 4);
    if (runs[0].st == EM_OK) {
        const double *g = runs[0].bytes;
        CHECK(g[0] == 1.875 && g[1] == 6);
        /* One fixed order along the ring for every element's chunk: with
         * 3 elements over 4 ranks, element 2 is in a chunk of its own. */
        CHECK(isfinite(g[2]) || isinf(g[2]));
    }
    free_runs(runs, 4);

    const float c0[6] = {1, 2, 3, 4, 5, 6}, c1[6] = {1, -2, 0.5f, 0, 0, 1};
    typed_case cc = {EM_C64, {c0, c1}};
    run_ranks(2, NULL, all_sum_typed, &cc, runs);
    check_identical(runs, 2);
    if (runs[0].st == EM_OK) {
        const float *g = runs[0].bytes;
        CHECK(g[0] == 2 && g[1] == 0 && g[2] == 3.5f && g[3] == 4 &&
              g[4] == 5 && g[5] == 7);
    }
    free_runs(runs, 2);
}

/* Random floats: no exact answer, but identical bytes on every rank and
 * close to the float64 sum. */
static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static em_array *all_sum_random(rank_run *run) {
    int64_t n = 10007;
    float *v = malloc(sizeof *v * (size_t)n);
    uint32_t seed = 17u + (uint32_t)run->rank * 7919u;
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)lcg(&seed) / (float)(1u << 24) * 2.0f - 1.0f;
    em_array *x = NULL, *out = NULL;
    em_from_data(v, sizeof *v * (size_t)n, &n, 1, EM_F32, &x);
    free(v);
    run->st = em_all_sum(x, run->comm, &out);
    em_array_release(x);
    return out;
}

EM_TEST(distributed_all_sum_bit_identical_random) {
    for (int n = 2; n <= MAX_RANKS; n++) {
        rank_run runs[MAX_RANKS];
        run_ranks(n, NULL, all_sum_random, NULL, runs);
        check_identical(runs, n);
        if (runs[0].st == EM_OK) {
            const float *g = runs[0].bytes;
            uint32_t seeds[MAX_RANKS];
            for (int r = 0; r < n; r++)
                seeds[r] = 17u + (uint32_t)r * 7919u;
            for (int64_t i = 0; i < 10007; i++) {
                double want = 0;
                for (int r = 0; r < n; r++)
                    want += (float)lcg(&seeds[r]) / (float)(1u << 24) * 2.0f -
                            1.0f;
                if (fabs(g[i] - want) > 1e-5) {
                    em_test_fail(__FILE__, __LINE__, "[%lld] %g vs %g",
                                 (long long)i, g[i], want);
                    break;
                }
            }
        }
        free_runs(runs, n);
    }
}

/* ---- all_gather and reduce_scatter -------------------------------------- */

typedef struct axis_case {
    int axis;
    int64_t shape[2];
} axis_case;

/* x[i] = 100 * rank + i over a [a, b] array (f32). */
static em_array *grid(const rank_run *run, const int64_t *shape) {
    int64_t count = shape[0] * shape[1];
    float *v = malloc(sizeof *v * (size_t)(count ? count : 1));
    for (int64_t i = 0; i < count; i++)
        v[i] = (float)(100 * run->rank + i);
    em_array *x = NULL;
    em_from_data(v, sizeof *v * (size_t)count, shape, 2, EM_F32, &x);
    free(v);
    return x;
}

static em_array *gather_grid(rank_run *run) {
    const axis_case *c = run->ctx;
    em_array *x = grid(run, c->shape), *out = NULL;
    run->st = em_all_gather(x, run->comm, c->axis, &out);
    em_array_release(x);
    return out;
}

EM_TEST(distributed_all_gather) {
    for (int n = 1; n <= MAX_RANKS; n++)
        for (int axis = 0; axis < 2; axis++) {
            axis_case c = {axis, {2, 3}};
            rank_run runs[MAX_RANKS];
            run_ranks(n, NULL, gather_grid, &c, runs);
            check_identical(runs, n);
            if (runs[0].st == EM_OK) {
                CHECK(runs[0].shape[axis] == c.shape[axis] * n);
                CHECK(runs[0].shape[1 - axis] == c.shape[1 - axis]);
                const float *g = runs[0].bytes;
                int64_t cols = runs[0].shape[1];
                for (int64_t i = 0; i < runs[0].shape[0]; i++)
                    for (int64_t j = 0; j < cols; j++) {
                        /* which rank's block, and where in it */
                        int64_t r = axis == 0 ? i / 2 : j / 3;
                        int64_t li = axis == 0 ? i % 2 : i;
                        int64_t lj = axis == 0 ? j : j % 3;
                        CHECK(g[i * cols + j] ==
                              (float)(100 * r + li * 3 + lj));
                    }
            }
            free_runs(runs, n);
        }
    /* empty arrays gather to empty arrays */
    axis_case e = {1, {0, 3}};
    rank_run runs[MAX_RANKS];
    run_ranks(3, NULL, gather_grid, &e, runs);
    check_identical(runs, 3);
    CHECK(runs[0].shape[0] == 0 && runs[0].shape[1] == 9);
    free_runs(runs, 3);
}

static em_array *scatter_grid(rank_run *run) {
    const axis_case *c = run->ctx;
    em_array *x = grid(run, c->shape), *out = NULL;
    run->st = em_reduce_scatter(x, run->comm, c->axis, &out);
    em_array_release(x);
    return out;
}

EM_TEST(distributed_reduce_scatter) {
    for (int n = 1; n <= MAX_RANKS; n++)
        for (int axis = 0; axis < 2; axis++) {
            axis_case c = {axis, {axis == 0 ? 12 : 3, axis == 1 ? 12 : 5}};
            rank_run runs[MAX_RANKS];
            run_ranks(n, NULL, scatter_grid, &c, runs);
            /* rank r holds part r of the sum: rank-specific, not identical */
            int64_t cols = c.shape[1];
            for (int r = 0; r < n; r++) {
                if (runs[r].st != EM_OK) {
                    em_test_fail(__FILE__, __LINE__, "rank %d: %s", r,
                                 runs[r].message);
                    continue;
                }
                CHECK(runs[r].shape[axis] == 12 / n);
                const float *g = runs[r].bytes;
                int64_t rows = runs[r].shape[0], rc = runs[r].shape[1];
                for (int64_t i = 0; i < rows; i++)
                    for (int64_t j = 0; j < rc; j++) {
                        int64_t gi = axis == 0 ? i + r * rows : i;
                        int64_t gj = axis == 1 ? j + r * rc : j;
                        double want = 0;
                        for (int k = 0; k < n; k++)
                            want += 100 * k + gi * cols + gj;
                        CHECK(g[i * rc + j] == (float)want);
                    }
            }
            free_runs(runs, n);
        }
}

/* ---- send / recv / barrier ----------------------------------------------- */

/* Rank r sends [r, r+1, r+2] (s64) to r + 1 and receives from r - 1 (a ring
 * of sends: even ranks send first, odd ranks receive first). */
static em_array *ring_of_sends(rank_run *run) {
    int n = run->size, r = run->rank;
    int64_t shape[1] = {3};
    int64_t v[3] = {r, r + 1, r + 2};
    em_array *x = NULL, *sent = NULL, *got = NULL;
    em_from_data(v, sizeof v, shape, 1, EM_S64, &x);
    run->st = em_send(x, run->comm, (r + 1) % n, &sent);
    if (run->st == EM_OK)
        run->st = em_recv(run->comm, (r + n - 1) % n, EM_S64, shape, 1, &got);
    em_array *first = r % 2 == 0 ? sent : got;
    em_array *second = r % 2 == 0 ? got : sent;
    if (run->st == EM_OK)
        run->st = em_eval(&first, 1);
    if (run->st == EM_OK)
        run->st = em_eval(&second, 1);
    em_array_release(x);
    em_array_release(sent);
    if (run->st != EM_OK) {
        em_array_release(got);
        return NULL;
    }
    return got;
}

EM_TEST(distributed_send_recv) {
    for (int n = 2; n <= MAX_RANKS; n += 2) { /* even: the parity order */
        rank_run runs[MAX_RANKS];
        run_ranks(n, NULL, ring_of_sends, NULL, runs);
        for (int r = 0; r < n; r++) {
            if (runs[r].st != EM_OK) {
                em_test_fail(__FILE__, __LINE__, "n=%d rank %d: %s", n, r,
                             runs[r].message);
                continue;
            }
            const int64_t *g = runs[r].bytes;
            int64_t from = (r + n - 1) % n;
            CHECK(g[0] == from && g[1] == from + 1 && g[2] == from + 2);
        }
        free_runs(runs, n);
    }
}

/* Rank 0 sends f32[2]; rank 1 expects f32[3]: both fail, naming both. */
static em_array *mismatched_send(rank_run *run) {
    em_array *x = NULL, *out = NULL;
    if (run->rank == 0) {
        int64_t shape[1] = {2};
        float v[2] = {1, 2};
        em_from_data(v, sizeof v, shape, 1, EM_F32, &x);
        run->st = em_send(x, run->comm, 1, &out);
    } else {
        int64_t shape[1] = {3};
        run->st = em_recv(run->comm, 0, EM_F32, shape, 1, &out);
    }
    em_array_release(x);
    return out;
}

EM_TEST(distributed_send_recv_mismatch) {
    em_comm *comms[2];
    make_comms(2, 0, comms);
    rank_run runs[2];
    run_ranks(2, comms, mismatched_send, NULL, runs);
    for (int r = 0; r < 2; r++) {
        CHECK(runs[r].st == EM_ERR_ARGUMENT);
        CHECK(strstr(runs[r].message, "f32[2]") &&
              strstr(runs[r].message, "f32[3]"));
    }
    free_runs(runs, 2);
    /* the communicator is still in step */
    sum_case c = {5, EM_F32};
    run_ranks(2, comms, all_sum_iota, &c, runs);
    check_identical(runs, 2);
    free_runs(runs, 2);
    em_comm_release(comms[0]);
    em_comm_release(comms[1]);
}

static em_array *barrier_then(rank_run *run) {
    em_array *out = NULL;
    run->st = em_barrier(run->comm, &out);
    return out;
}

EM_TEST(distributed_barrier) {
    for (int n = 1; n <= MAX_RANKS; n++) {
        rank_run runs[MAX_RANKS];
        run_ranks(n, NULL, barrier_then, NULL, runs);
        check_identical(runs, n);
        CHECK(runs[0].st != EM_OK || ((uint8_t *)runs[0].bytes)[0] == 1);
        free_runs(runs, n);
    }
}

/* ---- failures -------------------------------------------------------------- */

/* Rank 1 sums a longer array: every rank fails alike, naming both shapes,
 * and the communicator stays usable. */
static em_array *mismatched_sum(rank_run *run) {
    sum_case c = {run->rank == 1 ? 5 : 4, EM_F32};
    em_array *x = iota_like(run, c.count, c.dtype), *out = NULL;
    run->st = em_all_sum(x, run->comm, &out);
    em_array_release(x);
    return out;
}

EM_TEST(distributed_shape_mismatch) {
    em_comm *comms[3];
    make_comms(3, 0, comms);
    rank_run runs[3];
    run_ranks(3, comms, mismatched_sum, NULL, runs);
    for (int r = 0; r < 3; r++) {
        CHECK(runs[r].st == EM_ERR_ARGUMENT);
        CHECK(strstr(runs[r].message, "all_sum") &&
              strstr(runs[r].message, "f32[4]") &&
              strstr(runs[r].message, "rank 1 has f32[5]"));
    }
    free_runs(runs, 3);
    sum_case c = {5, EM_F32};
    run_ranks(3, comms, all_sum_iota, &c, runs);
    check_identical(runs, 3);
    free_runs(runs, 3);
    for (int r = 0; r < 3; r++)
        em_comm_release(comms[r]);
}

/* Rank 1 closes its communicator instead of summing. */
static em_array *sum_or_close(rank_run *run) {
    if (run->rank == 1) {
        em_comm_close(run->comm);
        run->st = EM_ERR_CLOSED; /* marker: did not take part */
        return NULL;
    }
    sum_case c = {100000, EM_F32};
    return all_sum_iota((run->ctx = &c, run));
}

/* Rank 1 does nothing for a while. */
static em_array *sum_or_sleep(rank_run *run) {
    if (run->rank == 1) {
        struct timespec t = {0, 600 * 1000 * 1000};
        nanosleep(&t, NULL);
        run->st = EM_ERR_CLOSED;
        return NULL;
    }
    sum_case c = {10, EM_F32};
    return all_sum_iota((run->ctx = &c, run));
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

EM_TEST(distributed_peer_failures) {
    em_comm *comms[2];
    make_comms(2, 5000, comms);
    rank_run runs[2];
    double t0 = seconds();
    run_ranks(2, comms, sum_or_close, NULL, runs);
    CHECK(seconds() - t0 < 4.0); /* the close is seen, not the timeout */
    CHECK(runs[0].st == EM_ERR_RUNTIME);
    if (!strstr(runs[0].message,
                "distributed all_sum: peer rank 1 closed the connection"))
        em_test_fail(__FILE__, __LINE__, "message: %s", runs[0].message);
    free_runs(runs, 2);
    /* both are unusable now, each with its own reason */
    em_array *x = NULL, *out = NULL;
    int64_t one = 1;
    float v = 1;
    em_from_data(&v, 4, &one, 1, EM_F32, &x);
    CHECK_ERR(em_all_sum(x, comms[1], &out), EM_ERR_ARGUMENT, "closed");
    CHECK_ERR(em_all_sum(x, comms[0], &out), EM_ERR_RUNTIME, "broken");
    em_array_release(x);
    em_comm_release(comms[0]);
    em_comm_release(comms[1]);

    make_comms(2, 200, comms);
    t0 = seconds();
    run_ranks(2, comms, sum_or_sleep, NULL, runs);
    double waited = seconds() - t0;
    CHECK(runs[0].st == EM_ERR_RUNTIME);
    CHECK(strstr(runs[0].message, "peer rank 1 did not answer for 200 ms"));
    CHECK(waited < 3.0);
    free_runs(runs, 2);
    em_comm_release(comms[0]);
    em_comm_release(comms[1]);
}

EM_TEST(distributed_build_errors) {
    em_comm *comms[2];
    make_comms(2, 0, comms);
    em_array *x = NULL, *s = NULL, *out = NULL;
    int64_t shape[2] = {3, 5};
    float v[15] = {0};
    em_from_data(v, sizeof v, shape, 2, EM_F32, &x);
    float one = 1;
    em_from_data(&one, 4, NULL, 0, EM_F32, &s);
    CHECK_ERR(em_reduce_scatter(x, comms[0], 0, &out), EM_ERR_ARGUMENT,
              "divisible");
    CHECK_ERR(em_all_gather(x, comms[0], 2, &out), EM_ERR_ARGUMENT,
              "all_gather");
    CHECK_ERR(em_all_gather(s, comms[0], 0, &out), EM_ERR_ARGUMENT,
              "no axis");
    CHECK_ERR(em_send(x, comms[0], 0, &out), EM_ERR_ARGUMENT, "this rank");
    CHECK_ERR(em_send(x, comms[0], 2, &out), EM_ERR_ARGUMENT, "out of range");
    CHECK_ERR(em_recv(comms[0], -1, EM_F32, shape, 2, &out), EM_ERR_ARGUMENT,
              "out of range");
    CHECK_ERR(em_all_sum(x, NULL, &out), EM_ERR_ARGUMENT, "NULL");
    CHECK(out == NULL);
    em_comm *lonely = NULL;
    int port = 0;
    CHECK_OK(em_comm_listen(NULL, &lonely, &port));
    CHECK(port > 0);
    CHECK_ERR(em_all_sum(x, lonely, &out), EM_ERR_ARGUMENT, "not connected");
    const char *hosts[2] = {"127.0.0.1", "127.0.0.1"};
    int ports[2] = {port, 0};
    CHECK_ERR(em_comm_connect(lonely, 0, 2, hosts, ports, NULL),
              EM_ERR_ARGUMENT, "port");
    CHECK_ERR(em_comm_connect(lonely, 3, 2, hosts, ports, NULL),
              EM_ERR_ARGUMENT, "rank 3 of size 2");
    em_comm *named = NULL;
    CHECK_ERR(em_comm_listen("localhost", &named, &port), EM_ERR_ARGUMENT,
              "numeric");
    CHECK(named == NULL);
    em_comm_release(lonely);
    em_array_release(x);
    em_array_release(s);
    em_comm_release(comms[0]);
    em_comm_release(comms[1]);
}

/* ---- inside a program, and the gradient rule ------------------------------ */

/* program(p) = all_sum(p * 2) + 1, replayed twice; the program keeps the
 * communicator alive after the caller's reference is gone. */
static em_array *program_step(rank_run *run) {
    int64_t shape[1] = {4};
    em_array *p = NULL, *two = NULL, *one = NULL, *t = NULL, *s = NULL,
             *y = NULL;
    em_placeholder(EM_F32, shape, 1, &p);
    em_scalar_f64(2, EM_F32, &two);
    em_scalar_f64(1, EM_F32, &one);
    em_binary(EM_BINARY_multiply, p, two, &t);
    run->st = em_all_sum(t, run->comm, &s);
    em_binary(EM_BINARY_add, s, one, &y);
    em_program *prog = NULL;
    if (run->st == EM_OK)
        run->st = em_program_new(&p, 1, &y, 1, NULL, &prog);
    em_array *arrays[] = {p, two, one, t, s, y};
    for (size_t i = 0; i < 6; i++)
        em_array_release(arrays[i]);
    em_comm_release(run->comm); /* the program holds it now */
    em_array *out = NULL;
    for (int step = 0; step < 2 && run->st == EM_OK; step++) {
        float v[4] = {(float)run->rank, 1, 2, (float)step};
        em_array *x = NULL;
        em_from_data(v, sizeof v, shape, 1, EM_F32, &x);
        em_array_release(out);
        out = NULL;
        run->st = em_program_run(prog, &x, 1, &out);
        if (run->st == EM_OK)
            run->st = em_eval(&out, 1);
        em_array_release(x);
    }
    em_program_release(prog);
    return out;
}

EM_TEST(distributed_in_program) {
    em_comm *comms[3];
    make_comms(3, 0, comms);
    rank_run runs[3];
    run_ranks(3, comms, program_step, NULL, runs); /* releases comms */
    check_identical(runs, 3);
    if (runs[0].st == EM_OK) {
        const float *g = runs[0].bytes;
        /* sum over ranks of 2 * [r, 1, 2, 1] + 1 */
        CHECK(g[0] == 7 && g[1] == 7 && g[2] == 13 && g[3] == 7);
    }
    free_runs(runs, 3);
}

/* d/dx sum(all_sum(x) * w) = all_sum(w): the vjp rule runs a collective. */
static em_array *grad_of_sum(rank_run *run) {
    int64_t shape[1] = {2};
    float xv[2] = {1, 2}, wv[2] = {(float)run->rank + 1, 10};
    em_array *x = NULL, *w = NULL, *s = NULL, *y = NULL, *ct = NULL,
             *g = NULL;
    em_from_data(xv, sizeof xv, shape, 1, EM_F32, &x);
    em_from_data(wv, sizeof wv, shape, 1, EM_F32, &w);
    float onev[2] = {1, 1};
    em_from_data(onev, sizeof onev, shape, 1, EM_F32, &ct);
    em_array *xi = NULL;
    em_identity(x, &xi);
    run->st = em_all_sum(xi, run->comm, &s);
    if (run->st == EM_OK)
        run->st = em_binary(EM_BINARY_multiply, s, w, &y);
    if (run->st == EM_OK)
        run->st = em_vjp(&y, &ct, 1, &xi, 1, &g);
    em_array *arrays[] = {x, xi, w, s, y, ct};
    for (size_t i = 0; i < 6; i++)
        em_array_release(arrays[i]);
    return g;
}

EM_TEST(distributed_vjp) {
    rank_run runs[2];
    run_ranks(2, NULL, grad_of_sum, NULL, runs);
    check_identical(runs, 2);
    if (runs[0].st == EM_OK) {
        const float *g = runs[0].bytes;
        CHECK(g[0] == 3 && g[1] == 20);
    }
    free_runs(runs, 2);
}
