/*
 * emily_pad.h — padding and slices whose start is read at evaluation time.
 *
 * These are the engine primitives behind Nx.pad/3 and the tensor-start forms
 * of Nx.slice/4 and Nx.put_slice/3. Conventions are those of emily.h:
 * em_status results, new references through `out`, borrowed inputs.
 */
#ifndef EMILY_PAD_H
#define EMILY_PAD_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Nx.pad: per axis i, `low[i]` copies of `value` before the elements,
 * `high[i]` after them and `interior[i]` between each pair of neighbours.
 * A negative low or high removes that many elements from the (interior
 * padded) edge instead. interior[i] >= 0. Output size per axis:
 *     low + high + d + max(d - 1, 0) * interior
 * which must be >= 0. `value` holds one element (a 0-d array, or any
 * array of size 1) and has a's dtype. A 0-d `a` is returned as is.
 * Only cropping (interior 0, low and high <= 0) gives a view. */
em_status em_pad(em_array *a, em_array *value, const int64_t *low,
                 const int64_t *high, const int64_t *interior, em_array **out);

/* Nx.slice with start indices known only at evaluation: `starts` is a 1-D
 * array of any integer dtype with one entry per axis of `a`. At eval each
 * start is CLAMPED into [0, dim - sizes[i]] (as Nx does) so the window
 * always fits. sizes[i] in [0, dim]; strides NULL means 1 (else >= 1).
 * The output has shape ceil(sizes[i] / strides[i]) and is a copy. */
em_status em_dynamic_slice(em_array *a, em_array *starts, const int64_t *sizes,
                           const int64_t *strides, em_array **out);

/* Nx.put_slice with start indices read at evaluation: a copy of `a` with
 * `update` (same dtype and rank, each dim <= a's) written at the starts of
 * the 1-D integer array `starts`, each clamped into
 * [0, dim - update_dim]. */
em_status em_dynamic_put_slice(em_array *a, em_array *starts, em_array *update,
                               em_array **out);

#ifdef __cplusplus
}
#endif

#endif
