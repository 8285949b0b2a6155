/*
 * copy.h — the strided element copy shared by the shape, join, creation and
 * index ops.
 *
 * A copy moves elements between any two strided layouts (strides in
 * elements, possibly 0 or negative) without looking at their values, so one
 * kernel per element size (1, 2, 4, 8, 16 bytes) serves every dtype. Axes
 * that are contiguous for both sides are collapsed first, so a row-major to
 * row-major copy is one memcpy.
 */
#ifndef EMILY_OPS_COPY_H
#define EMILY_OPS_COPY_H

#include "internal.h"

/* A copy of `size` elements described once and run over any sub-range of
 * its row-major element order (the index ops copy one row at a time). */
typedef struct em_copy_plan {
    size_t elem_size; /* 1, 2, 4, 8 or 16 bytes */
    int ndim;         /* collapsed rank, >= 1 */
    int64_t size;     /* element count; 0 means nothing to copy */
    int64_t shape[EM_MAX_NDIM];
    int64_t dst_strides[EM_MAX_NDIM];
    int64_t src_strides[EM_MAX_NDIM];
} em_copy_plan;

/* Describe a copy of an array of `shape` from `src_strides` to
 * `dst_strides` (NULL: row-major for shape). */
void em__copy_plan_init(em_copy_plan *plan, size_t elem_size, int ndim,
                        const int64_t *shape, const int64_t *dst_strides,
                        const int64_t *src_strides);

/* Copy elements [begin, end) of the plan (row-major order of its shape) on
 * the calling thread. dst and src point at element 0 of each side. */
void em__copy_plan_range(const em_copy_plan *plan, void *dst, const void *src,
                         int64_t begin, int64_t end);

/* The whole copy, split across the thread pool when it is large. */
void em__copy_plan_run(const em_copy_plan *plan, void *dst, const void *src);

/* One-call forms of the above. */
void em__copy_strided(void *dst, const int64_t *dst_strides, const void *src,
                      const int64_t *src_strides, const int64_t *shape,
                      int ndim, size_t elem_size);

/* Copy the evaluated array `src` (any layout) into row-major `dst`. */
void em__copy_array(void *dst, const em_array *src);

#endif
