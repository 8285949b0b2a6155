/*
 * tape.h — the compiler's intermediate form, shared by the program builder
 * (program.c), its simplification passes (program_opt.c) and the fusion
 * pass (fusion.c).
 *
 * A tape is the traced graph in topological order. Its nodes are private
 * copies of the traced nodes (the program made them; nobody else holds or
 * evaluates them), so a pass may rewrite their `inputs` in place. An input
 * of a tape node is another tape node, one of `inputs` (a placeholder), or
 * a captured constant (an array with data, state DONE). Tape nodes are
 * templates: they are never evaluated, only cloned by em_program_run.
 *
 * A clone copies the node's primitive, dtype, shape, strides, offset,
 * row_contiguous flag and its params_size parameter bytes (memcpy): no
 * op's parameters hold pointers. A pass that makes nodes needing other
 * objects at eval time must hold them some other way, e.g. as inputs (see
 * em__program_holder below, which the while loop uses for its programs).
 */
#ifndef EMILY_TAPE_H
#define EMILY_TAPE_H

#include "emily_compile.h"
#include "internal.h"

typedef struct em__tape {
    em_array *
        *nodes; /* topological order, each retained; pending template nodes */
    size_t len;
    em_array **inputs; /* the placeholders, retained (then the captured
                          outer values, see capture_outer) */
    size_t ninputs;
    em_array **
        outputs; /* retained; each is in nodes, an input, or a leaf with data */
    size_t noutputs;
} em__tape;

/* Fusion pass (the fusion helper implements it in src/engine/compile/fusion.c):
 * rewrites tape in place, replacing groups of nodes by fused nodes; may
 * change nodes/len/outputs. */
em_status em__fuse_tape(em__tape *tape, int *fused_kernels_out);

/* The simplification passes (program_opt.c). Each keeps the tape
 * topologically ordered and every node retained exactly once by it. */

/* Merge nodes with the same primitive, dtype, shape, layout, parameter
 * bytes and inputs into the first of them; returns how many were merged. */
em_status em__tape_cse(em__tape *tape, size_t *merged);

/* Merge captured constants (row-major, offset 0, at most 64 KiB) that have
 * the same dtype, shape and bytes; returns how many were merged. */
em_status em__tape_dedup_constants(em__tape *tape, size_t *merged);

/* Drop nodes no output depends on. */
em_status em__tape_dce(em__tape *tape);

/* True for a captured constant: an array with data. */
static inline bool em__tape_is_constant(const em_array *a) {
    return atomic_load(&((em_array *)a)->state) == EM_NODE_DONE;
}


/* ---- programs as values (program.c; used by the while loop) ------------ */

/* A 0-d u64 array with data whose buffer keeps `p` alive (retained until
 * the array's buffer is freed): a program becomes an input of a node,
 * counted, cloned and captured as any array. Its bytes identify p. */
em_status em__program_holder(em_program *p, em_array **out);
/* The program a holder array stands for. */
em_program *em__program_from_holder(const em_array *holder);

#endif
