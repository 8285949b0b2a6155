/*
 * params.h — the parameter blocks (node->params) of the primitives whose
 * reverse-mode rules need them (src/engine/autodiff/). The op family's source
 * file writes them when it builds a node; the vjp rules read them back, so
 * they are declared once, here.
 */
#ifndef EMILY_OPS_PARAMS_H
#define EMILY_OPS_PARAMS_H

#include "internal.h"

/* unary, binary: the op number (int). */

typedef struct iota_params {
    int axis;
} iota_params;

typedef struct argreduce_params {
    em_argreduce_op op;
    bool tie_high;
    unsigned mask;
} argreduce_params;

typedef struct reduce_params {
    em_reduce_op op;
    unsigned mask; /* reduced axes of the input */
} reduce_params;

typedef struct dot_params {
    int nbatch, nm, nk, nn;
    int64_t batch_shape[EM_MAX_NDIM];
    int batch_a[EM_MAX_NDIM], batch_b[EM_MAX_NDIM]; /* -1: broadcast */
    int m_axes[EM_MAX_NDIM];                        /* a's free axes */
    int k_a[EM_MAX_NDIM], k_b[EM_MAX_NDIM];         /* contracted pairs */
    int n_axes[EM_MAX_NDIM];                        /* b's free axes */
} dot_params;

/* Views: what the strides fixed at build time no longer tell. */
typedef struct transpose_params {
    int perm[EM_MAX_NDIM]; /* output axis i is input axis perm[i] */
} transpose_params;

typedef struct slice_params {
    int64_t start[EM_MAX_NDIM];
    int64_t step[EM_MAX_NDIM];
} slice_params;

typedef struct reverse_params {
    unsigned mask; /* reversed axes */
} reverse_params;

typedef struct gather_params {
    int naxes;
    int axes[EM_MAX_NDIM];
} gather_params;

/* take, take_along_axis */
typedef struct axis_params {
    int axis;
} axis_params;

/* indexed_add, indexed_put */
typedef struct scatter_params {
    int naxes;
    int axes[EM_MAX_NDIM];
    bool add;
} scatter_params;

typedef struct put_slice_params {
    int64_t start[EM_MAX_NDIM];
} put_slice_params;

typedef struct concat_params {
    int axis;
} concat_params;

typedef struct pad_params {
    int64_t low[EM_MAX_NDIM];
    int64_t interior[EM_MAX_NDIM];
} pad_params;

/* Where a pad's input lands in its output (both of the node), for the CPU
 * and GPU evals: the block of input elements that survive the cropping,
 * `shape`, read from a + src_off (a's strides) and written to out + dst_off
 * with dst_strides (offsets and strides in elements). False when nothing
 * survives. */
bool em__pad_block(const em_array *node, const em_array *a,
                   const pad_params *p, int64_t *shape, int64_t *dst_strides,
                   int64_t *dst_off, int64_t *src_off);

typedef struct dslice_params {
    int64_t sizes[EM_MAX_NDIM];
    int64_t strides[EM_MAX_NDIM];
} dslice_params;

typedef struct scan_params {
    int op; /* em_scan_op */
    int axis;
    bool reverse;
} scan_params;

typedef struct sort_params {
    int axis; /* normalised */
    bool descending;
    bool indices; /* argsort */
} sort_params;

/* window_reduce, window_scatter */
typedef struct win_params {
    int op; /* em_window_op, or the select direction for scatter */
    int64_t window[EM_MAX_NDIM];
    int64_t strides[EM_MAX_NDIM];
    int64_t dil[EM_MAX_NDIM];
    int64_t low[EM_MAX_NDIM];
} win_params;

/* conv: per spatial axis (the high padding follows from the shapes) */
typedef struct conv_params {
    int64_t strides[EM_MAX_NDIM], low[EM_MAX_NDIM], idil[EM_MAX_NDIM],
        kdil[EM_MAX_NDIM];
    int64_t fgroups, bgroups;
} conv_params;

#endif
