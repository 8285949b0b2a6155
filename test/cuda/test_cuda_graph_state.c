/*
 * test_cuda_graph_state.c — CUDA graphs that keep state on the GPU
 * (include/emily_compile.h, "State") and read arguments in place.
 *
 * The program is a decode step's shape in miniature: a cache updated at a
 * moving row (em_dynamic_put_slice) and a reduction of the new cache,
 * replayed step after step with the cache fed back, against the same
 * program replayed the ordinary way on the CPU. Checked along the way:
 * the cache becomes state (aliased) and is updated in place once the
 * caller gives it up; an old cache the caller keeps is never overwritten
 * (those runs take the ordinary way, and later runs copy the state
 * instead of handing it out); a handed-out cache outlives its program;
 * arguments that stay the same are read in place, arguments that change
 * cost one recapture, arguments the program does not read cost nothing.
 */
#include "cuda_test.h"
#include "emily_compile.h"
#include "emily_pad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 8, COLS = 16, STEPS = 12, KEEP_AT = 8 };

/* (cache, row, starts) -> (cache with 2 * row at starts, sum of it). */
static em_program *step_program(em_device dev, bool graph) {
    const int64_t cs[2] = {ROWS, COLS}, rs[2] = {1, COLS}, ss[1] = {2};
    em_device old = em_set_default_device(dev);
    em_array *in[3] = {NULL}, *two = NULL, *scaled = NULL, *out[2] = {NULL};
    die_on(em_placeholder(EM_F32, cs, 2, &in[0]), "state: placeholder");
    die_on(em_placeholder(EM_F32, rs, 2, &in[1]), "state: placeholder");
    die_on(em_placeholder(EM_S32, ss, 1, &in[2]), "state: placeholder");
    die_on(em_scalar_f64(2, EM_F32, &two), "state: scalar");
    die_on(em_binary(EM_BINARY_multiply, in[1], two, &scaled), "state: mul");
    die_on(em_dynamic_put_slice(in[0], in[2], scaled, &out[0]), "state: put");
    die_on(em_reduce(EM_REDUCE_sum, out[0], NULL, 0, false, &out[1]),
           "state: sum");
    em_set_default_device(old);
    em_program_options o = {.cuda_graph = graph};
    em_program *p = NULL;
    if (out[0] && out[1])
        die_on(em_program_new(in, 3, out, 2, &o, &p), "state: program");
    em_array *all[6] = {in[0], in[1], in[2], two, scaled, out[0]};
    for (int i = 0; i < 6; i++)
        em_array_release(all[i]);
    em_array_release(out[1]);
    return p;
}

static em_array *on(em_array *cpu, em_device dev) {
    if (dev == EM_DEVICE_CPU) {
        em_array_retain(cpu);
        return cpu;
    }
    em_array *g = NULL;
    die_on(em_to_device(cpu, dev, &g), "state: to_device");
    die_on(em_eval(&g, 1), "state: eval");
    return g;
}

static bool equal_bytes(em_array *a, em_array *b) {
    size_t n = em_array_nbytes(a);
    float *x = malloc(n), *y = malloc(n);
    bool same = x && y && n == em_array_nbytes(b) &&
                em_read(a, x, n) == EM_OK && em_read(b, y, n) == EM_OK &&
                memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return same;
}

/* One step on both sides: caches[d] is replaced by the new cache (the old
 * one given up before evaluating, unless *kept receives it). */
static void step(em_program *p, em_array **cache, em_array *row,
                 em_array *starts, em_array **total, em_array **kept) {
    em_array *args[3] = {*cache, row, starts}, *out[2] = {NULL, NULL};
    die_on(em_program_run(p, args, 3, out), "state: run");
    if (kept)
        *kept = *cache;
    else
        em_array_release(*cache);
    *cache = out[0];
    *total = out[1];
    die_on(em_eval(out, 2), "state: eval");
}

static void feed_back(void) {
    char what[160];
    em_program *ref = step_program(EM_DEVICE_CPU, false);
    em_program *graph = step_program(GPU, true);
    const int64_t cs[2] = {ROWS, COLS}, rs[2] = {1, COLS};
    em_array *start_cpu = random_array(EM_F32, cs, 2, false, 0);
    em_array *cache[2] = {on(start_cpu, EM_DEVICE_CPU), on(start_cpu, GPU)};
    em_array_release(start_cpu);
    em_array *kept = NULL, *kept_ref = NULL;
    /* The same row and starts arrays for steps 0 and 1: bound, read in
     * place; new ones from step 2 on: a recapture without binding them. */
    em_array *row_cpu = NULL, *row = NULL, *starts_cpu = NULL, *starts = NULL;
    for (int s = 0; ref && graph && s < STEPS; s++) {
        if (s != 1) {
            em_array *old[4] = {row_cpu, row, starts_cpu, starts};
            for (int i = 0; i < 4; i++)
                em_array_release(old[i]);
            row_cpu = random_array(EM_F32, rs, 2, false, 0);
            const int32_t at[2] = {(s * 5) % ROWS, 0};
            const int64_t two = 2;
            die_on(em_from_data(at, sizeof at, &two, 1, EM_S32, &starts_cpu),
                   "state: starts");
            row = on(row_cpu, GPU);
            starts = on(starts_cpu, GPU);
        }
        em_array *total[2] = {NULL, NULL};
        if (s == KEEP_AT) { /* the CPU's copy of the cache kept below */
            kept_ref = cache[0];
            em_array_retain(kept_ref);
        }
        step(ref, &cache[0], row_cpu, starts_cpu, &total[0], NULL);
        step(graph, &cache[1], row, starts, &total[1],
             s == KEEP_AT ? &kept : NULL);
        snprintf(what, sizeof what, "state: step %d cache, exact", s);
        record("cuda_graph", what, equal_bytes(cache[0], cache[1]), 0);
        snprintf(what, sizeof what, "state: step %d sum", s);
        double e = compare(total[0], total[1], what, 64);
        record("cuda_graph", what, e <= 1, e);
        if (s == KEEP_AT + 1) {
            /* Runs KEEP_AT and KEEP_AT + 1 did not overwrite it. */
            record("cuda_graph", "state: a kept cache is never overwritten",
                   kept && equal_bytes(kept, kept_ref), 0);
            em_array_release(kept);
            em_array_release(kept_ref);
            kept = kept_ref = NULL;
        }
        em_array_release(total[0]);
        em_array_release(total[1]);
    }
    em_program_stats st = {0};
    if (graph)
        em_program_get_stats(graph, &st);
    printf("  state: %d captures, %lld replays, %zu state inputs, %zu bound, "
           "%lld in place\n",
           st.cuda_graph_captures, (long long)st.cuda_graph_replays,
           st.cuda_graph_state_inputs, st.cuda_graph_bound_inputs,
           (long long)st.cuda_graph_in_place);
    record("cuda_graph", "state: the cache is state",
           st.cuda_graph == EM_CUDA_GRAPH_CAPTURED &&
               st.cuda_graph_state_inputs == 1,
           0);
    /* Capture at step 0 (row and starts bound), recapture at step 2 (they
     * changed): 2 captures, nothing bound after. */
    record("cuda_graph", "state: changed arguments recapture once",
           st.cuda_graph_captures == 2 && st.cuda_graph_bound_inputs == 0, 0);
    /* Step 1 launches (the cache copied in and out; it is the warm-up's
     * output: fed back, so the state is handed out from then on); step 2
     * recaptures; 3 launches, 4 launches and hands the cache out, 5, 6
     * and 7 update it in place; the cache kept at KEEP_AT = 8 makes runs
     * 8 and 9 take the ordinary way, and 10 and 11 copy the state in and
     * out. */
    record("cuda_graph", "state: updated in place while given up",
           st.cuda_graph_in_place == 3, 0);
    record("cuda_graph", "state: launches", st.cuda_graph_replays == 8, 0);
    em_program_release(graph);
    em_program_release(ref);
    em_array *rest[6] = {cache[0], cache[1], row_cpu, row, starts_cpu, starts};
    for (int i = 0; i < 6; i++)
        em_array_release(rest[i]);
}

/* Three steps with the same row: the third hands the state buffer out;
 * released with the program still held, it keeps its values. */
static void state_outlives_program(void) {
    em_program *ref = step_program(EM_DEVICE_CPU, false);
    em_program *graph = step_program(GPU, true);
    const int64_t cs[2] = {ROWS, COLS}, rs[2] = {1, COLS}, two = 2;
    const int32_t at[2] = {3, 0};
    em_array *start = random_array(EM_F32, cs, 2, false, 0);
    em_array *row_cpu = random_array(EM_F32, rs, 2, false, 0);
    em_array *starts_cpu = NULL;
    die_on(em_from_data(at, sizeof at, &two, 1, EM_S32, &starts_cpu),
           "state: starts");
    em_array *cache[2] = {on(start, EM_DEVICE_CPU), on(start, GPU)};
    em_array *row = on(row_cpu, GPU), *starts = on(starts_cpu, GPU);
    for (int s = 0; ref && graph && s < 3; s++) {
        em_array *total[2] = {NULL, NULL};
        step(ref, &cache[0], row_cpu, starts_cpu, &total[0], NULL);
        step(graph, &cache[1], row, starts, &total[1], NULL);
        em_array_release(total[0]);
        em_array_release(total[1]);
    }
    em_program_stats st = {0};
    if (graph)
        em_program_get_stats(graph, &st);
    em_program_release(graph);
    em_program_release(ref);
    record("cuda_graph", "state: a handed-out cache outlives its program",
           graph && st.cuda_graph_replays == 2 &&
               equal_bytes(cache[0], cache[1]),
           0);
    em_array *rest[7] = {start,      cache[0], cache[1], row_cpu,
                         starts_cpu, row,      starts};
    for (int i = 0; i < 7; i++)
        em_array_release(rest[i]);
}

/* (x, unused) -> 2x: the unused input is neither bound nor copied, so new
 * arrays there cost no recapture. */
static void unused_input(void) {
    const int64_t shape[1] = {1000};
    em_device old = em_set_default_device(GPU);
    em_array *ph[2] = {NULL, NULL}, *two = NULL, *y = NULL;
    die_on(em_placeholder(EM_F32, shape, 1, &ph[0]), "unused: placeholder");
    die_on(em_placeholder(EM_F32, shape, 1, &ph[1]), "unused: placeholder");
    die_on(em_scalar_f64(2, EM_F32, &two), "unused: scalar");
    die_on(em_binary(EM_BINARY_multiply, ph[0], two, &y), "unused: mul");
    em_set_default_device(old);
    em_program_options o = {.cuda_graph = true};
    em_program *p = NULL;
    if (y)
        die_on(em_program_new(ph, 2, &y, 1, &o, &p), "unused: program");
    em_array *x_cpu = random_array(EM_F32, shape, 1, false, 0);
    em_array *x = on(x_cpu, GPU), *want = NULL;
    die_on(em_binary(EM_BINARY_multiply, x_cpu, two, &want), "unused: want");
    for (int r = 0; p && r < 3; r++) {
        em_array *junk_cpu = random_array(EM_F32, shape, 1, false, 0);
        em_array *args[2] = {x, on(junk_cpu, GPU)}, *out = NULL;
        die_on(em_program_run(p, args, 2, &out), "unused: run");
        die_on(em_eval(&out, 1), "unused: eval");
        record("cuda_graph", "unused input: results",
               out && equal_bytes(want, out), 0);
        em_array_release(out);
        em_array_release(args[1]);
        em_array_release(junk_cpu);
    }
    em_program_stats st = {0};
    if (p)
        em_program_get_stats(p, &st);
    record("cuda_graph", "unused input: no recapture, x bound",
           st.cuda_graph_captures == 1 && st.cuda_graph_replays == 2 &&
               st.cuda_graph_bound_inputs == 1,
           0);
    em_program_release(p);
    em_array *rest[7] = {ph[0], ph[1], two, y, x_cpu, x, want};
    for (int i = 0; i < 7; i++)
        em_array_release(rest[i]);
}

void test_cuda_graph_state(void) {
    unused_input();
    feed_back();
    state_outlives_program();
}
