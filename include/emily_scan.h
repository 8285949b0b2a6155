/*
 * emily_scan.h — cumulative (scan) ops along one axis (part of libemily;
 * include after or instead of emily.h).
 *
 * out[..., i, ...] = op(a[..., 0, ...], ..., a[..., i, ...]) along `axis`
 * (with `reverse`: op(a[..., i, ...], ..., a[..., n-1, ...])), the
 * primitive behind Nx.cumulative_sum/product/max/min. Output shape and dtype
 * are the input's.
 *
 *   - sum, product: every dtype but pred; integers wrap (two's complement);
 *     floats accumulate in the compute type (float for f16/bf16) and every
 *     partial result is rounded to the dtype as it is stored;
 *   - max, min: every real dtype (pred too); a NaN propagates to every
 *     later position of its lane, as in Nx.
 *
 * Lanes (positions of the other axes) run in parallel on the thread pool; a
 * few very long lanes are split into blocks scanned in parallel and then
 * offset by the preceding blocks' totals (for floats this may round
 * differently from a strictly serial sum, within the usual error bounds).
 * Inputs may have any strides (views: transposes, slices, broadcasts).
 */
#ifndef EMILY_SCAN_H
#define EMILY_SCAN_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum em_scan_op {
    EM_SCAN_SUM = 0,
    EM_SCAN_PRODUCT = 1,
    EM_SCAN_MAX = 2,
    EM_SCAN_MIN = 3,
    EM_SCAN_COUNT
} em_scan_op;

/* Cumulative `op` along `axis` (negative counts from the end). The input
 * has rank >= 1; axes of any size, 0 included, are allowed. */
em_status em_scan(em_scan_op op, em_array *a, int axis, bool reverse,
                  em_array **out);

#ifdef __cplusplus
}
#endif

#endif
