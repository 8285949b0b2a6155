/*
 * params.h — node parameters of the primitives that have GPU kernels, so
 * that the CPU eval (in the op's file) and the GPU eval (src/engine/gpu.c)
 * read one definition.
 */
#ifndef EMILY_OPS_PARAMS_H
#define EMILY_OPS_PARAMS_H

#include "internal.h"

typedef struct iota_params {
    int axis;
} iota_params;

typedef struct reduce_params {
    em_reduce_op op;
    unsigned mask; /* reduced axes of the input */
} reduce_params;

typedef struct argreduce_params {
    em_argreduce_op op;
    bool tie_high;
    unsigned mask;
} argreduce_params;

typedef struct gather_params {
    int naxes;
    int axes[EM_MAX_NDIM];
} gather_params;

/* take and take_along_axis */
typedef struct axis_params {
    int axis;
} axis_params;

typedef struct scan_params {
    int op; /* em_scan_op */
    int axis;
    bool reverse;
} scan_params;

typedef struct dot_params {
    int nbatch, nm, nk, nn;
    int64_t batch_shape[EM_MAX_NDIM];
    int batch_a[EM_MAX_NDIM], batch_b[EM_MAX_NDIM]; /* -1: broadcast */
    int m_axes[EM_MAX_NDIM];                        /* a's free axes */
    int k_a[EM_MAX_NDIM], k_b[EM_MAX_NDIM];         /* contracted pairs */
    int n_axes[EM_MAX_NDIM];                        /* b's free axes */
} dot_params;

#endif
