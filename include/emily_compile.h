/*
 * emily_compile.h — tracing a computation once and replaying it (part of
 * libemily; include after or instead of emily.h).
 *
 * A program is built from a traced lazy graph:
 *
 *   1. make one placeholder per input (em_placeholder): a pending node
 *      that has a shape and dtype but never a value;
 *   2. build the computation on the placeholders with the ordinary ops
 *      (the graph stays lazy; nothing is evaluated);
 *   3. em_program_new(placeholders, outputs) records the graph between
 *      them as a tape, simplifies it (common subexpressions, duplicate
 *      constants, dead nodes; fusion when asked for) and keeps it;
 *   4. em_program_run(prog, inputs) builds the same graph again on real
 *      inputs, in one call, and returns its outputs as lazy arrays:
 *      evaluate or read them as any other array.
 *
 * Replay builds exactly the nodes eager code would have built (same
 * primitives, parameters and layouts) and evaluates them with the ordinary
 * evaluator, so without fusion the results are bit-identical to running
 * the ops eagerly.
 *
 * Arrays that already hold data when the program is built and that the
 * outputs depend on (weights captured by a closure, constants) are
 * captured by reference: the program keeps them alive. Pending nodes that
 * do not depend on a placeholder are part of the tape and are computed
 * again by every run.
 *
 * Evaluating or reading a graph that contains a placeholder fails with
 * EM_ERR_ARGUMENT and a message that starts "placeholder: a traced input
 * has no value".
 */
#ifndef EMILY_COMPILE_H
#define EMILY_COMPILE_H

#include "emily.h"
#include "emily_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A pending array of `dtype` and `shape` that stands for a program input
 * (row-major layout). Its evaluation fails (see above). */
em_status em_placeholder(em_dtype dtype, const int64_t *shape, int ndim,
                         em_array **out);

/* Whether `a` is a placeholder made by em_placeholder. */
bool em_is_placeholder(const em_array *a);

typedef struct em_program em_program;

/* Build options; the zero value is the default (simplify, do not fuse). */
typedef struct em_program_options {
    bool fuse;     /* run the fusion pass (when the engine has one) */
    bool no_cse;   /* keep common subexpressions (for tests) */
    bool no_dedup; /* keep duplicate constants (for tests) */
    /* Capture outer values: pending arrays created before the first
     * placeholder (values of an enclosing trace that a loop's condition or
     * body closes over) become extra inputs of the program, after the
     * placeholders, instead of part of its tape. em_program_capture lists
     * them; each run takes them (or arrays of the same dtype, shape and
     * layout) as inputs n_in .. n_in + captures - 1. */
    bool capture_outer;
    /* Replay on a GPU as one CUDA graph (see "CUDA graphs" below). */
    bool cuda_graph;
} em_program_options;

/* Record the graph from `placeholders` (n_in distinct placeholders, each
 * at most once) to `outputs` (n_out arrays) as a program. An output may be
 * one of the placeholders or an array with data. Fails with
 * EM_ERR_ARGUMENT when an output depends on a placeholder that is not in
 * the list. opts may be NULL (defaults). Nothing is evaluated. */
em_status em_program_new(em_array *const *placeholders, size_t n_in,
                         em_array *const *outputs, size_t n_out,
                         const em_program_options *opts, em_program **out);

void em_program_retain(em_program *p);
void em_program_release(em_program *p); /* NULL is allowed */

/* Inputs a run takes: the placeholders, then the captures (if any). */
size_t em_program_num_inputs(const em_program *p);
size_t em_program_num_captures(const em_program *p);
/* Capture i (borrowed), as em_program_new found it. */
em_array *em_program_capture(const em_program *p, size_t i);
size_t em_program_num_outputs(const em_program *p);
/* The device input i (a placeholder or a capture) was traced on: replays
 * take arrays on that device only. */
em_device em_program_input_device(const em_program *p, size_t i);
/* The dtype and shape (ndim entries at *shape) of input / output i. */
void em_program_input_info(const em_program *p, size_t i, em_dtype *dtype,
                           const int64_t **shape, int *ndim);
void em_program_output_info(const em_program *p, size_t i, em_dtype *dtype,
                            const int64_t **shape, int *ndim);

/* Replay on `inputs` (n_in arrays, each with the dtype and shape of its
 * placeholder; any layout, evaluated or not). Writes n_out new lazy
 * references to outputs_out. Fails with EM_ERR_ARGUMENT naming the input
 * index, expected and given dtype/shape when they differ. Views traced on
 * a placeholder assumed its row-major layout, so an input with another
 * layout (a strided view, a nonzero offset) is first copied to row-major
 * by the replayed graph. An output that is a placeholder returns the
 * caller's input itself; a captured constant, the constant. */
em_status em_program_run(em_program *p, em_array *const *inputs, size_t n_in,
                         em_array **outputs_out);

/* CUDA graphs. A program built with cuda_graph set whose whole tape runs
 * on one GPU (every node, input and constant there; no outer captures; no
 * output that is an input or a constant) is replayed through one lazy
 * "cuda_graph" node: its first evaluation runs the program the ordinary
 * way (the warm-up: NVRTC compiles, cuBLAS handles, allocator growth), then
 * records the same work once more into a CUDA graph (stream capture) on
 * buffers the program owns; each later evaluation copies the arguments
 * into those buffers, launches the graph once and copies the outputs out
 * into fresh arrays (so outputs of earlier runs stay valid). An operation
 * that cannot be captured (a host read: a while loop's condition, linalg
 * info, a host transfer; a CPU node) makes the capture fail: the program is
 * then marked not capturable, with the reason in its stats, and runs the
 * ordinary way from then on. Results are those of the ordinary replay
 * (same kernels, same order). The graph and its device memory are freed
 * with the program. Without a GPU the option changes nothing.
 *
 * State: an output that the capture recorded in an input's buffer (an
 * in-place update, such as a KV cache given to em_dynamic_put_slice and
 * released by the caller) aliases that input. Once such an output is fed
 * back as that input, runs return it without a copy, in a buffer the
 * graph keeps; given back with no other reference to it, the next run
 * updates it in place (nothing copied in or out: a decode loop's caches).
 * While such an output is still held elsewhere, a run cannot overwrite it
 * and takes the ordinary way instead (same results, slower), and later
 * runs copy the state out.
 *
 * Binding: an argument the caller still holds at the first run (weights
 * passed as arguments, a loop's invariants) is read in place by the
 * graph, never copied, and kept alive by the program. A later run given
 * another array for it runs the ordinary way and records the graph again
 * with that input copied in (a few recaptures at most). Stats count the
 * aliased and bound inputs, the in-place launches and the captures. */
enum em_cuda_graph_state {
    EM_CUDA_GRAPH_OFF = 0,      /* not asked for */
    EM_CUDA_GRAPH_PENDING = 1,  /* capturable; captured at the first run */
    EM_CUDA_GRAPH_CAPTURED = 2, /* runs launch the graph */
    EM_CUDA_GRAPH_FALLBACK = 3, /* not capturable: cuda_graph_reason */
};

typedef struct em_program_stats {
    size_t nodes_before;     /* traced op nodes (placeholders not counted) */
    size_t nodes_after;      /* op nodes replayed per run */
    size_t cse_merged;       /* nodes removed as common subexpressions */
    size_t constants;        /* arrays with data captured by reference */
    size_t constants_merged; /* duplicate constants merged */
    int fused_kernels;       /* kernels made by the fusion pass */
    int cuda_graph;          /* enum em_cuda_graph_state */
    int64_t cuda_graph_nodes;   /* nodes of the captured graph */
    int64_t cuda_graph_replays; /* graph launches so far */
    size_t cuda_graph_bytes;    /* device memory the graph owns */
    size_t cuda_graph_state_inputs; /* inputs some output aliases */
    size_t cuda_graph_bound_inputs; /* inputs read in place, never copied */
    int64_t cuda_graph_in_place;    /* launches that updated state in place */
    int cuda_graph_captures;        /* captures so far (1 + recaptures) */
    char cuda_graph_reason[192]; /* why FALLBACK (empty otherwise) */
} em_program_stats;

void em_program_get_stats(const em_program *p, em_program_stats *out);

/* How many fused GPU kernels the CUDA backend has compiled (NVRTC) in this
 * process, all devices; 0 without the backend. Kernels are cached by the
 * program's structure, so programs that differ only in their shapes (or
 * strides) share one. */
int64_t em_fused_kernels_compiled(void);

/* ---- structured loop ---------------------------------------------------- */

/* A lazy loop: with `state` = the n arrays of `initial`, while `cond` (a
 * program of n inputs and one output, a scalar of any dtype: nonzero is
 * true) holds, state = `body`(state) (n inputs, n outputs of the same
 * dtypes and shapes as the inputs). Writes n lazy outputs, the final state.
 * The programs' captures (see capture_outer) become inputs of the loop and
 * are passed to each run after the state.
 * The programs are kept alive by the outputs. When evaluated, each
 * iteration replays and evaluates the programs. */
em_status em_while(em_program *cond, em_program *body, em_array *const *initial,
                   size_t n, em_array **outputs);

/* Called on the thread that evaluates a tapped loop, after each iteration,
 * with the iteration's taps (evaluated; borrowed: retain what you keep) and
 * the `site` given to em_while_tapped. It must not evaluate pending arrays
 * of other graphs; reading the taps (em_read) is fine. */
typedef void (*em_while_tap_fn)(uint64_t site, em_array *const *taps,
                                size_t ntaps);

/* em_while whose body gives ntaps more outputs after the n of the next
 * state: values the host observes once per iteration (Nx hooks inside a
 * loop, streamed tokens) without ending the loop. After each iteration the
 * taps are evaluated with the state and passed to `tap`. ntaps = 0 (tap
 * may then be NULL) is em_while. */
em_status em_while_tapped(em_program *cond, em_program *body,
                          em_array *const *initial, size_t n, size_t ntaps,
                          em_while_tap_fn tap, uint64_t site,
                          em_array **outputs);

#ifdef __cplusplus
}
#endif

#endif
