/*
 * elementwise_internal.h — what the fusion pass (fusion.c) needs to know
 * about the elementwise and reduction op files: which op a node is, and the
 * very kernels its unfused eval would run. Executing a fused program with
 * the same kernels is what makes fused results bit-identical to unfused
 * ones.
 *
 * Each em__<family>_op_of() returns true when `node` was built by that
 * family's builder, and writes the kernel `op` argument and the dtype that
 * selects the kernel (see em__ew_kernel in fusion.c for the table).
 */
#ifndef EMILY_OPS_ELEMENTWISE_INTERNAL_H
#define EMILY_OPS_ELEMENTWISE_INTERNAL_H

#include "elementwise.h"

/* unary.c: op = the em_unary_op, kernel dtype = the input's dtype. */
bool em__unary_op_of(const em_array *node, int *op, em_dtype *kernel_dtype);
em_ew_kernel em__unary_kernel(em_dtype dtype);

/* binary.c: op = the em_binary_op, kernel dtype = the inputs' dtype. */
bool em__binary_op_of(const em_array *node, int *op, em_dtype *kernel_dtype);
em_ew_kernel em__binary_kernel(em_dtype dtype);

/* select.c: select's op = the value size in bytes, kernel dtype = the
 * predicate's dtype; clip's op = 0, kernel dtype = the node's dtype. */
bool em__select_op_of(const em_array *node, int *op, em_dtype *kernel_dtype);
em_ew_kernel em__select_kernel(em_dtype dtype);
bool em__clip_op_of(const em_array *node, int *op, em_dtype *kernel_dtype);
em_ew_kernel em__clip_kernel(em_dtype dtype);

/* convert.c (as_type): op = source * EM_DTYPE_COUNT + destination, one
 * kernel for every pair (kernel dtype = the source's). */
bool em__as_type_op_of(const em_array *node, int *op, em_dtype *kernel_dtype);
em_ew_kernel em__as_type_kernel(void);

/* reduce.c: the reduction a node does (op, mask of reduced input axes). */
bool em__reduce_op_of(const em_array *node, em_reduce_op *op, unsigned *mask);
/* *out (one element of the op's output dtype) = the reduction of n
 * contiguous elements of `dtype` at x, folded exactly as the unfused
 * reduction folds one output when it does not split it across threads
 * (leaves of 4096, halves combined pairwise: float sum error within
 * about log2(n/4096) + 16-lane leaf rounding, always <= n eps sum|x|).
 * False when the op does not accept the dtype. */
bool em__reduce_contiguous(em_reduce_op op, em_dtype dtype, const void *x,
                           int64_t n, void *out);

/* A reduction of one output folded piece by piece (rows too long to keep
 * in registers): an accumulator of em__reduce_acc_size bytes (at most 16;
 * 0 when the op does not accept the dtype) is initialised, folds runs of
 * contiguous elements, merges another accumulator, and is finally written
 * as one element of the op's output dtype. Only for accepted (op, dtype). */
size_t em__reduce_acc_size(em_reduce_op op, em_dtype dtype);
void em__reduce_acc_init(em_reduce_op op, em_dtype dtype, void *acc);
void em__reduce_acc_fold(em_reduce_op op, em_dtype dtype, void *acc,
                         const void *x, int64_t n);
void em__reduce_acc_merge(em_reduce_op op, em_dtype dtype, void *acc,
                          const void *other);
void em__reduce_acc_final(em_reduce_op op, em_dtype dtype, const void *acc,
                          void *out);

#endif
