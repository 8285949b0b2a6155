/*
 * fast_params.h — parameter blocks of the Emily.Fast primitives
 * (fast_norm.c, fast_rope.c), read back by their vjp rules
 * (autodiff/fast.c) and GPU evals (gpu/gpu_fast.c).
 */
#ifndef EMILY_OPS_FAST_PARAMS_H
#define EMILY_OPS_FAST_PARAMS_H

#include "internal.h"

/* What a row primitive computes over the last axis. */
enum fast_row_kind {
    FAST_RMS_NORM = 0,
    FAST_LAYER_NORM = 1,
    FAST_SOFTMAX = 2,
};

/* rms_norm, layer_norm, softmax (last axis). Inputs: x, then weight when
 * has_weight, then bias when has_bias; all row-contiguous. */
typedef struct fast_row_params {
    int kind; /* enum fast_row_kind */
    bool has_weight, has_bias;
    double eps;
} fast_row_params;

/* rope. Inputs: x (row-contiguous), offset (0-d s32/s64), then freqs (1-D
 * f32, dims/2, contiguous) when has_freqs. */
typedef struct fast_rope_params {
    int64_t dims;
    bool traditional, has_freqs;
    double base, scale;
} fast_rope_params;

/* Reverse-mode rules (autodiff/fast.c) and GPU evals (gpu/gpu_fast.c). */
em_status em__vjp_fast_rows(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_fast_rope(em_array *, em_array *, const bool *, em_array **);
em_status em__gpu_fast_rows_eval(em_array *node);
em_status em__gpu_fast_rope_eval(em_array *node);

/* The inverse frequencies' default: base^(-2i/dims), i < dims/2. */
static inline double fast_rope_inv_freq(double base, int64_t dims, int64_t i) {
    return pow(base, -2.0 * (double)i / (double)dims);
}

#endif
