/*
 * tape.h — the compiler's intermediate form: a traced graph in topological
 * order. Tape nodes are templates: the compiler clones them for each replay
 * (same prim, dtype, shape, strides, offset, params bytes, inputs remapped)
 * and never evaluates them, so a pass may rewrite them in place.
 */
#ifndef EMILY_TAPE_H
#define EMILY_TAPE_H

#include "internal.h"

typedef struct em__tape {
    em_array **nodes; /* topological order, each retained; pending template nodes */
    size_t len;
    em_array **inputs; /* the placeholders, retained */
    size_t ninputs;
    em_array **outputs; /* retained; each is in nodes, an input, or a leaf with data */
    size_t noutputs;
} em__tape;

/* Fusion pass (fusion.c): rewrites tape in place, replacing groups of nodes
 * by fused nodes; may change nodes/len/outputs. A fused node is an ordinary
 * node (prim "fused") whose eval runs the program in its params (plain
 * bytes) over its inputs, so it may be cloned or evaluated directly.
 * *fused_kernels_out (may be NULL) = the number of fused nodes made. */
em_status em__fuse_tape(em__tape *tape, int *fused_kernels_out);

#endif
