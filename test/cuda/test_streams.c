/*
 * test_streams.c — engine streams on the GPU: each evaluates on its own
 * CUDA stream, so arrays handed from one stream to another, buffers freed
 * on one and reused by another, and reads on a third thread must all be
 * ordered by events (src/engine/gpu/gpu_stream.h). Fresh GPU memory is
 * poisoned (EMILY_CUDA_POISON=1, set by main), so a kernel that runs
 * before the one it depends on, or a block handed out while another
 * stream still reads it, shows up as wrong values.
 *
 * The long GPU job is a cumulative sum over one 1-D lane: the scan kernel
 * walks a lane with one thread, so millions of elements take tens of
 * milliseconds or more, far longer than queueing the work.
 */
#include "cuda_test.h"
#include "emily_scan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Test hook (gpu_stream.c): is the work on the last stream of a's buffer
 * still running? */
em_status em__gpu_array_pending(const em_array *a, bool *pending);

static const char *FAM = "streams";

/* ---- small builders (GPU is the default device while these tests run) -- */

/* A u32 scalar on the GPU, uploaded now (on this thread's stream), so the
 * streams' graphs below queue kernels only. */
static em_array *gpu_scalar(uint32_t v) {
    em_array *c = NULL, *g = NULL;
    die_on(em_scalar_s64(v, EM_U32, &c), "scalar");
    die_on(em_to_device(c, GPU, &g), "to_device");
    die_on(em_eval(&g, 1), "upload");
    em_array_release(c);
    return g;
}

static em_array *affine(em_array *x, uint32_t mul, uint32_t add) {
    em_array *m = gpu_scalar(mul), *a = gpu_scalar(add);
    em_array *t = NULL, *out = NULL;
    die_on(em_binary(EM_BINARY_multiply, x, m, &t), "multiply");
    die_on(em_binary(EM_BINARY_add, t, a, &out), "add");
    em_array_release(m);
    em_array_release(a);
    em_array_release(t);
    return out;
}

static em_array *iota_u32(int64_t n) {
    em_array *x = NULL;
    die_on(em_iota(&n, 1, 0, EM_U32, &x), "iota");
    return x;
}

static em_array *cumsum(em_array *x) {
    em_array *c = NULL;
    die_on(em_scan(EM_SCAN_SUM, x, 0, false, &c), "cumsum");
    return c;
}

static em_array *add(em_array *a, em_array *b) {
    em_array *c = NULL;
    die_on(em_binary(EM_BINARY_add, a, b, &c), "add");
    return c;
}

/* ---- host references (u32 arithmetic wraps as the engine's) ----------- */

/* cumsum(i * mul + add) for i < n. */
static uint32_t *ref_cumsum_affine(int64_t n, uint32_t mul, uint32_t add) {
    uint32_t *r = malloc(sizeof *r * (size_t)n);
    uint32_t acc = 0;
    for (int64_t i = 0; i < n; i++) {
        acc += (uint32_t)i * mul + add;
        r[i] = acc;
    }
    return r;
}

/* Reads a (any thread's stream) and compares with want: the number of
 * mismatches, the first one printed. */
static int64_t mismatches(em_array *a, const uint32_t *want, int64_t n,
                          const char *what) {
    uint32_t *got = malloc(sizeof *got * (size_t)n);
    int64_t bad = 0;
    em_status st = em_read(a, got, sizeof *got * (size_t)n);
    if (st != EM_OK) {
        printf("FAIL %s: read: %s\n", what, em_last_error());
        free(got);
        return n;
    }
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            if (!bad)
                printf("  %s: element %lld is %u, want %u\n", what,
                       (long long)i, got[i], want[i]);
            bad++;
        }
    free(got);
    return bad;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ---- cases -------------------------------------------------------------- */

/* A -> B -> A: each stage evaluated on its own stream right after the
 * previous one was queued (not finished), the result read on this thread. */
static void handoff(em_stream *sa, em_stream *sb) {
    const int64_t n = (int64_t)1 << 22;
    em_array *x = iota_u32(n);
    em_array *t = affine(x, 3, 1);
    em_array *c = cumsum(t);                 /* long, on A */
    em_array *c5 = affine(c, 5, 0);
    em_array *d = add(c5, x);                /* d = 5 * c + x, on A */
    die_on(em_stream_eval(sa, &d, 1, NULL, NULL), "eval on A");
    die_on(em_stream_synchronize(sa), "queue A");
    em_array *e = affine(d, 7, 11);          /* on B, reads A's d */
    die_on(em_stream_eval(sb, &e, 1, NULL, NULL), "eval on B");
    die_on(em_stream_synchronize(sb), "queue B");
    em_array *f = add(e, d);                 /* back on A, reads B's e */
    die_on(em_stream_eval(sa, &f, 1, NULL, NULL), "eval on A");
    die_on(em_stream_synchronize(sa), "queue A");

    uint32_t *want_e = ref_cumsum_affine(n, 3, 1);
    uint32_t *want_f = malloc(sizeof *want_f * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        uint32_t dv = want_e[i] * 5u + (uint32_t)i;
        want_e[i] = dv * 7u + 11u;
        want_f[i] = want_e[i] + dv;
    }
    int64_t bad_f = mismatches(f, want_f, n, "A->B->A result");
    int64_t bad_e = mismatches(e, want_e, n, "B's result");
    record(FAM, "A -> B -> A hand-off, read on a third thread",
           bad_f == 0 && bad_e == 0, bad_f + bad_e ? INFINITY : 0);
    free(want_e);
    free(want_f);
    em_array *all[] = {x, t, c, c5, d, e, f};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        em_array_release(all[i]);
}

/* async_eval returns once the work is queued: right after it, the GPU is
 * still running the job; the read then waits for it. */
static void async_returns_early(em_stream *sa) {
    const int64_t n = (int64_t)1 << 24;
    em_array *x = iota_u32(n);
    em_array *t = affine(x, 1, 1);
    em_array *c = cumsum(t);
    double t0 = now_ms();
    die_on(em_stream_eval(sa, &c, 1, NULL, NULL), "async eval");
    double t1 = now_ms();
    die_on(em_stream_synchronize(sa), "queue A");
    double t2 = now_ms();
    bool pending = false;
    die_on(em__gpu_array_pending(c, &pending), "pending");
    uint32_t *want = ref_cumsum_affine(n, 1, 1);
    int64_t bad = mismatches(c, want, n, "async cumsum");
    double t3 = now_ms();
    bool after = true;
    die_on(em__gpu_array_pending(c, &after), "pending");
    printf("  async_eval returned in %.3f ms, queued by %.3f ms; the read "
           "finished at %.1f ms\n",
           t1 - t0, t2 - t0, t3 - t0);
    record(FAM, "async_eval returns while the GPU job is still pending",
           pending, pending ? 0 : INFINITY);
    record(FAM, "the read after async_eval waits for the job", bad == 0 && !after,
           bad || after ? INFINITY : 0);
    free(want);
    em_array_release(x);
    em_array_release(t);
    em_array_release(c);
}

/* Blocks freed on A while A's long scan still reads them are the first
 * candidates for B's next allocation of the same size (poisoned, then
 * written): B must wait for A before it touches them. */
static void churn(em_stream *sa, em_stream *sb) {
    enum { ROUNDS = 24 };
    const int64_t sizes[2] = {(int64_t)1 << 16, (int64_t)3 << 17};
    em_array *cs[ROUNDS], *us[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        int64_t n = sizes[k % 2];
        em_array *x = iota_u32(n);
        em_array *t = affine(x, (uint32_t)k + 3, (uint32_t)k);
        cs[k] = cumsum(t); /* t is freed on A once the scan is queued */
        em_array_release(x);
        em_array_release(t);
        die_on(em_stream_eval(sa, &cs[k], 1, NULL, NULL), "eval on A");
        if (k % 3 != 2) /* mostly: A has freed t before B allocates */
            die_on(em_stream_synchronize(sa), "queue A");
        em_array *y = iota_u32(n);
        us[k] = affine(y, 7, (uint32_t)k);
        em_array_release(y);
        die_on(em_stream_eval(sb, &us[k], 1, NULL, NULL), "eval on B");
    }
    die_on(em_stream_synchronize(sa), "sync A");
    die_on(em_stream_synchronize(sb), "sync B");
    int64_t bad = 0;
    for (int k = 0; k < ROUNDS; k++) {
        int64_t n = sizes[k % 2];
        uint32_t *want = ref_cumsum_affine(n, (uint32_t)k + 3, (uint32_t)k);
        bad += mismatches(cs[k], want, n, "A's scan");
        for (int64_t i = 0; i < n; i++)
            want[i] = (uint32_t)i * 7u + (uint32_t)k;
        bad += mismatches(us[k], want, n, "B's values");
        free(want);
        em_array_release(cs[k]);
        em_array_release(us[k]);
    }
    record(FAM, "allocate/free churn on two streams (poisoned reuse)",
           bad == 0, bad ? INFINITY : 0);
}

/* Many small evaluations on two streams at once, each reading the other's
 * latest result: the buffers' last-use chain crosses streams every step. */
static void ping_pong(em_stream *sa, em_stream *sb) {
    const int64_t n = 4096;
    enum { STEPS = 200 };
    em_array *v = iota_u32(n);
    uint32_t *want = malloc(sizeof *want * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        want[i] = (uint32_t)i;
    for (int s = 0; s < STEPS; s++) {
        em_array *next = affine(v, 3, (uint32_t)s);
        em_array_release(v);
        v = next;
        for (int64_t i = 0; i < n; i++)
            want[i] = want[i] * 3u + (uint32_t)s;
        die_on(em_stream_eval(s % 2 ? sb : sa, &v, 1, NULL, NULL), "eval");
        if (s % 7 == 0)
            die_on(em_stream_synchronize(s % 2 ? sb : sa), "queue");
    }
    die_on(em_stream_synchronize(sa), "sync A");
    die_on(em_stream_synchronize(sb), "sync B");
    int64_t bad = mismatches(v, want, n, "ping-pong");
    record(FAM, "200 steps alternating between two streams", bad == 0,
           bad ? INFINITY : 0);
    free(want);
    em_array_release(v);
}

void test_streams(void) {
    em_device old = em_set_default_device(GPU);
    em_stream *sa = NULL, *sb = NULL;
    die_on(em_stream_new(NULL, &sa), "stream A");
    die_on(em_stream_new(NULL, &sb), "stream B");
    if (sa && sb) {
        handoff(sa, sb);
        async_returns_early(sa);
        churn(sa, sb);
        ping_pong(sa, sb);
    }
    for (int i = 0; i < 2; i++) {
        em_stream *s = i ? sb : sa;
        if (s) {
            em_stream_close(s);
            em_stream_release(s);
        }
    }
    em_set_default_device(old);
}
