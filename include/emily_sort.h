/*
 * emily_sort.h — sorting along one axis (part of libemily; include after or
 * instead of emily.h).
 *
 * Both ops sort every row along `axis` independently (rows run on the
 * thread pool) and are always stable: equal elements keep their original
 * order, in either direction. The order is Nx's:
 *   - integers and floats by value; -0.0 and +0.0 are equal (stable order);
 *   - NaN is the largest value: ascending gives [-Inf, ..., Inf, NaN],
 *     descending puts NaN first; all NaNs are equal to each other.
 * Every real dtype is accepted (pred, u8..u64, s8..s64, f16, bf16, f32,
 * f64); complex inputs are rejected. `axis` may be negative; the input must
 * have rank >= 1. Rows of any length are allowed, including empty ones.
 *
 * The algorithm is an LSD radix sort over order-preserving integer keys (one
 * byte per pass, passes whose byte is the same for the whole row skipped),
 * with insertion sort for short rows.
 */
#ifndef EMILY_SORT_H
#define EMILY_SORT_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The values of `a` sorted along `axis`; same shape and dtype as `a`. */
em_status em_sort(em_array *a, int axis, bool descending, em_array **out);

/* The stable sorting permutation of `a` along `axis`: out has a's shape
 * and holds, at position k of each row, the index (along `axis`) of the
 * element that em_sort puts at k. index_dtype is any integer dtype other
 * than pred (0, i.e. EM_PRED, means EM_S64) wide enough for the axis. */
em_status em_argsort(em_array *a, int axis, bool descending,
                     em_dtype index_dtype, em_array **out);

#ifdef __cplusplus
}
#endif

#endif
