/* Core runtime: leaf arrays, validation, allocator, streams, thread pool. */
#include "emily_device.h"
#include "test.h"
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>

EM_TEST(core_from_data_roundtrip) {
    const float values[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    em_array *a = NULL;
    CHECK_OK(em_from_data(values, sizeof values, shape, 2, EM_F32, &a));
    CHECK(em_array_ndim(a) == 2);
    CHECK(em_array_shape(a)[1] == 3);
    CHECK(em_array_size(a) == 6);
    CHECK(em_array_nbytes(a) == 24);
    CHECK(em_array_dtype(a) == EM_F32);
    CHECK(em_array_is_evaluated(a));
    const void *data;
    size_t nbytes;
    CHECK_OK(em_array_data(a, &data, &nbytes));
    CHECK(nbytes == 24 && memcmp(data, values, 24) == 0);
    CHECK(((uintptr_t)data % 64) == 0);
    em_array_release(a);
}

EM_TEST(core_scalar_and_empty) {
    em_array *s = NULL, *e = NULL;
    int32_t v = -7;
    CHECK_OK(em_scalar(&v, EM_S32, &s));
    CHECK(em_array_ndim(s) == 0 && em_array_size(s) == 1);
    int32_t back = 0;
    CHECK_OK(em_read(s, &back, 4));
    CHECK(back == -7);
    int64_t shape[3] = {2, 0, 5};
    CHECK_OK(em_from_data(NULL, 0, shape, 3, EM_F64, &e));
    CHECK(em_array_size(e) == 0 && em_array_nbytes(e) == 0);
    em_array_release(s);
    em_array_release(e);
}

EM_TEST(core_from_data_rejects_bad_input) {
    em_array *a = (em_array *)1;
    float v[4] = {0};
    int64_t shape[2] = {2, 2};
    CHECK_ERR(em_from_data(v, 12, shape, 2, EM_F32, &a), EM_ERR_ARGUMENT,
              "got 12 bytes for f32[2,2], expected 16");
    CHECK(a == NULL);
    int64_t neg[1] = {-1};
    CHECK_ERR(em_from_data(v, 0, neg, 1, EM_F32, &a), EM_ERR_ARGUMENT,
              "negative");
    int64_t huge[3] = {INT64_MAX / 2, 4, 4};
    CHECK_ERR(em_from_data(v, 0, huge, 3, EM_F32, &a), EM_ERR_ARGUMENT,
              "too many elements");
    int64_t ones[EM_MAX_NDIM + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1,
                                     1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_ERR(em_from_data(v, 4, ones, EM_MAX_NDIM + 1, EM_F32, &a),
              EM_ERR_ARGUMENT, "rank 17 is out of range");
    CHECK_ERR(em_from_data(v, 4, shape, 1, (em_dtype)99, &a), EM_ERR_ARGUMENT,
              "unknown dtype");
    /* A zero dimension makes a huge product empty, not an overflow. */
    int64_t zero_huge[3] = {INT64_MAX, 0, INT64_MAX};
    CHECK_OK(em_from_data(NULL, 0, zero_huge, 3, EM_U8, &a));
    /* ...but an op may drop that zero: reducing it leaves [INT64_MAX, ...]
     * (found by the fuzzer). Every node's shape is checked when built. */
    em_array *r = NULL;
    int axis = 1;
    CHECK_ERR(em_reduce(EM_REDUCE_sum, a, &axis, 1, false, &r),
              EM_ERR_ARGUMENT, "has too many elements");
    CHECK(r == NULL);
    em_array_release(a);
}

EM_TEST(core_dtype_table) {
    CHECK(em_dtype_size(EM_PRED) == 1 && em_dtype_size(EM_BF16) == 2);
    CHECK(em_dtype_size(EM_C128) == 16 && em_dtype_size((em_dtype)77) == 0);
    CHECK(!strcmp(em_dtype_name(EM_BF16), "bf16"));
    CHECK(em_dtype_is_integer(EM_PRED) && em_dtype_is_integer(EM_S64));
    CHECK(!em_dtype_is_integer(EM_F16) && em_dtype_is_float(EM_BF16));
    CHECK(em_dtype_is_complex(EM_C64) && !em_dtype_is_float(EM_C64));
    CHECK(em__real_dtype(EM_C128) == EM_F64);
}

EM_TEST(core_half_conversions) {
    /* Exact values, rounding to even, overflow to Inf, subnormals, NaN. */
    CHECK(em_f32_to_f16(1.0f) == 0x3c00);
    CHECK(em_f32_to_f16(-2.0f) == 0xc000);
    CHECK(em_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(em_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(em_f32_to_f16(5.9604645e-8f) == 0x0001);
    CHECK(em_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00); /* tie -> even */
    CHECK((em_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (em_f32_to_f16(NAN) & 0x3ff));
    CHECK(em_f16_to_f32(0x0001) == 5.9604645e-8f);
    CHECK(em_f16_to_f32(0xfc00) == -INFINITY);
    CHECK(signbit(em_f16_to_f32(0x8000)));
    for (uint32_t h = 0; h < 0x7c00; h++) /* every finite f16 round-trips */
        if (em_f32_to_f16(em_f16_to_f32((uint16_t)h)) != h) {
            CHECK(!"f16 round trip");
            break;
        }
    CHECK(em_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(em_bf16_to_f32(0xc000) == -2.0f);
    CHECK(isnan(em_bf16_to_f32(em_f32_to_bf16(NAN))));
}

EM_TEST(core_allocator_stats_and_cache) {
    em_memory_clear_cache();
    em_memory_stats s0, s1, s2;
    em_memory_get_stats(&s0);
    int64_t shape[1] = {1000};
    em_array *a = NULL;
    static double zeros[1000];
    CHECK_OK(em_from_data(zeros, sizeof zeros, shape, 1, EM_F64, &a));
    em_memory_get_stats(&s1);
    CHECK(s1.active >= s0.active + 8000);
    CHECK(s1.peak >= s1.active);
    em_array_release(a);
    em_memory_get_stats(&s2);
    CHECK(s2.active == s0.active);
    CHECK(s2.cache >= 8000); /* the block went to the cache */
    /* The same size is served from the cache. */
    CHECK_OK(em_from_data(zeros, sizeof zeros, shape, 1, EM_F64, &a));
    em_memory_stats s3;
    em_memory_get_stats(&s3);
    CHECK(s3.cache == s2.cache - (s3.active - s2.active));
    em_array_release(a);
    em_memory_clear_cache();
    em_memory_get_stats(&s3);
    CHECK(s3.cache == 0);
}

EM_TEST(core_memory_limit) {
    em_memory_clear_cache();
    em_memory_stats s;
    em_memory_get_stats(&s);
    em_memory_set_limit(s.active + 4096);
    int64_t shape[1] = {1 << 20};
    em_array *a = NULL;
    CHECK_ERR(em_from_data(NULL, (size_t)1 << 20, shape, 1, EM_U8, &a),
              EM_ERR_OOM, "memory limit");
    CHECK(a == NULL);
    em_memory_set_limit(0);
}

typedef struct counter_ctx {
    atomic_int count;
    atomic_int done_calls;
    atomic_int last_status;
} counter_ctx;

static em_status count_job(void *ctx) {
    atomic_fetch_add(&((counter_ctx *)ctx)->count, 1);
    return EM_OK;
}

static em_status failing_job(void *ctx) {
    (void)ctx;
    return em__fail(EM_ERR_RUNTIME, "boom");
}

static void count_done(em_status st, const char *msg, void *ctx) {
    (void)msg;
    counter_ctx *c = ctx;
    atomic_store(&c->last_status, (int)st);
    atomic_fetch_add(&c->done_calls, 1);
}

EM_TEST(core_stream_runs_jobs_in_order) {
    em_stream *s = NULL;
    CHECK_OK(em_stream_new(NULL, &s));
    counter_ctx c = {0};
    for (int i = 0; i < 100; i++)
        CHECK_OK(em_stream_submit(s, count_job, count_done, &c));
    CHECK_OK(em_stream_synchronize(s));
    CHECK(atomic_load(&c.count) == 100 && atomic_load(&c.done_calls) == 100);
    em_stream_close(s);
    CHECK_ERR(em_stream_submit(s, count_job, NULL, &c), EM_ERR_CLOSED, "closed");
    em_stream_release(s);
}

EM_TEST(core_stream_async_failure_reported_later) {
    em_stream *s = NULL;
    CHECK_OK(em_stream_new(NULL, &s));
    CHECK_OK(em_stream_submit(s, failing_job, NULL, NULL));
    CHECK_ERR(em_stream_synchronize(s), EM_ERR_RUNTIME, "boom");
    CHECK_OK(em_stream_synchronize(s)); /* reported once */
    em_stream_close(s);
    em_stream_release(s);
}

static em_status slow_job(void *ctx) {
    (void)ctx;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return EM_OK;
}

EM_TEST(core_stream_bounded_queue) {
    em_stream *s = NULL;
    em_stream_options opts = {.queue_limit = 2};
    CHECK_OK(em_stream_new(&opts, &s));
    counter_ctx c = {0};
    int busy = 0;
    for (int i = 0; i < 6; i++)
        if (em_stream_submit(s, slow_job, count_done, &c) == EM_ERR_BUSY)
            busy++;
    CHECK(busy > 0);
    CHECK(strstr(em_last_error(), "queue is full") != NULL);
    em_stream_close(s);
    /* Queued jobs complete (as closed) before the worker exits. */
    while (atomic_load(&c.done_calls) < 6 - busy) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    em_stream_release(s);
}

EM_TEST(core_eval_of_leaves_and_default_stream) {
    em_stream *d = NULL;
    CHECK_OK(em_default_stream(&d));
    CHECK(d != NULL);
    float v = 2.5f;
    em_array *a = NULL;
    CHECK_OK(em_scalar(&v, EM_F32, &a));
    counter_ctx c = {0};
    CHECK_OK(em_stream_eval(d, &a, 1, count_done, &c));
    CHECK_OK(em_stream_synchronize(d));
    CHECK(atomic_load(&c.done_calls) == 1 && atomic_load(&c.last_status) == 0);
    em_array *null_array = NULL;
    CHECK_ERR(em_eval(&null_array, 1), EM_ERR_ARGUMENT, "NULL");
    em_array_release(a);
}

typedef struct sum_ctx {
    atomic_llong total;
    atomic_int calls;
} sum_ctx;

static void sum_range(void *ctx, int64_t begin, int64_t end) {
    sum_ctx *c = ctx;
    long long t = 0;
    for (int64_t i = begin; i < end; i++)
        t += i;
    atomic_fetch_add(&c->total, t);
    atomic_fetch_add(&c->calls, 1);
}

EM_TEST(core_parallel_for_covers_range_once) {
    int64_t sizes[4] = {0, 10, 100000, 1000003};
    for (int k = 0; k < 4; k++) {
        sum_ctx c = {0};
        em__parallel_for(sizes[k], 1000, sum_range, &c);
        long long n = sizes[k];
        CHECK(atomic_load(&c.total) == n * (n - 1) / 2);
    }
    CHECK(em__num_threads() >= 1);
}

EM_TEST(core_collapse_dims) {
    int64_t shape[3] = {2, 3, 4};
    int64_t s_row[3] = {12, 4, 1};
    int64_t s_t[3] = {1, 2, 6}; /* a transposed layout: not mergeable */
    const int64_t *in1[1] = {s_row};
    int64_t out_shape[EM_MAX_NDIM], out_strides[2][EM_MAX_NDIM];
    CHECK(em__collapse(3, shape, 1, in1, out_shape, out_strides) == 1);
    CHECK(out_shape[0] == 24 && out_strides[0][0] == 1);
    const int64_t *in2[2] = {s_row, s_t};
    CHECK(em__collapse(3, shape, 2, in2, out_shape, out_strides) == 3);
    int64_t bshape[2] = {5, 1};
    int64_t bst[2] = {0, 7};
    const int64_t *in3[1] = {bst};
    CHECK(em__collapse(2, bshape, 1, in3, out_shape, out_strides) == 1);
    CHECK(out_shape[0] == 5 && out_strides[0][0] == 0);
}

/* GPU-only entry points refuse the CPU device with an error (they reached
 * for a GPU backend that the CPU does not have). */
EM_TEST(core_gpu_entry_points_refuse_the_cpu) {
    em_device_event *event = NULL;
    CHECK_ERR(em_device_event_record(EM_DEVICE_CPU, &event), EM_ERR_ARGUMENT,
              "is not a GPU");
    CHECK(event == NULL);
}
