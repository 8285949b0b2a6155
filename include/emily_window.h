/*
 * emily_window.h — window reductions and window scatters (part of
 * libemily; include after or instead of emily.h).
 *
 * These are the engine primitives behind Nx.window_sum/product/max/min and
 * Nx.window_scatter_max/min. Conventions are those of emily.h: em_status
 * results, new references through `out`, borrowed inputs.
 *
 * Geometry, per axis i of the rank-n input (n >= 0):
 *   window[i]     >= 1, the window size;
 *   strides[i]    >= 1 (NULL: all 1);
 *   dilations[i]  >= 1 (NULL: all 1): window element k sits at k*dilation;
 *   pad_low[i], pad_high[i] (NULL: all 0): padding before/after the axis
 *                 (negative values crop).
 * The padded length is P = dim + low + high and the dilated window
 * W = (window - 1) * dilation + 1; the output length is (P - W) / stride + 1
 * when P >= W, else 0. Output element o covers the padded positions
 * o*stride + k*dilation, k < window.
 */
#ifndef EMILY_WINDOW_H
#define EMILY_WINDOW_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum em_window_op {
    EM_WINDOW_SUM = 0,
    EM_WINDOW_PRODUCT = 1,
    EM_WINDOW_MAX = 2,
    EM_WINDOW_MIN = 3,
} em_window_op;

typedef struct em_window_options {
    int64_t window[EM_MAX_NDIM];
    int64_t strides[EM_MAX_NDIM]; /* 0 means 1 */
    int64_t pad_low[EM_MAX_NDIM];
    int64_t pad_high[EM_MAX_NDIM];
    int64_t dilations[EM_MAX_NDIM]; /* 0 means 1 */
} em_window_options;

/* Reduce every window of `a`. Padding holds the reduction's identity (as
 * Nx pads): 0 for sum, 1 for product, the lowest value for max (-Inf for
 * floats, the type's minimum for integers) and the highest for min. The
 * output keeps a's dtype; integer sums and products wrap; float max/min
 * propagate NaN. Sum and product accept every dtype, max and min every
 * real dtype. Threaded over output elements. */
em_status em_window_reduce(em_window_op op, em_array *a,
                           const em_window_options *opts, em_array **out);

/* Nx.window_scatter_max (select_max true) / window_scatter_min: for each
 * window of `a` (geometry as above; dilations must be 1), the position of
 * its max (min) among the window's non-padding elements — ties pick the
 * LAST such position in row-major window order, as Nx's BinaryBackend —
 * receives the matching element of `source` (whose shape is the window
 * output shape). The output has a's shape and source's dtype, starts as
 * `init_value` (a one-element array of source's dtype) everywhere, and
 * accumulates by addition in window order. A window made only of padding
 * scatters nothing. `a` has any real dtype. */
em_status em_window_scatter(bool select_max, em_array *a, em_array *source,
                            em_array *init_value, const em_window_options *opts,
                            em_array **out);

#ifdef __cplusplus
}
#endif

#endif
