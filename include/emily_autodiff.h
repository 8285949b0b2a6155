/*
 * emily_autodiff.h — reverse-mode automatic differentiation.
 *
 * Transforms are graph rewrites (DESIGN.md §3.7): every primitive carries a
 * vector-Jacobian-product rule that builds the cotangents of its inputs from
 * the cotangent of its output with the ordinary op builders. em_vjp walks
 * the lazy graph backwards from the outputs and returns the gradients as
 * new, unevaluated nodes, so the forward and backward passes evaluate (or
 * compile) together.
 *
 * Usage: wrap each differentiated input in em_identity (a fresh node, so one
 * handle used twice or a weight also used elsewhere gets a node of its
 * own), build the function from the wrappers, then call em_vjp with the
 * wrappers as `wrt`.
 *
 * Rules: only real float (f16, bf16, f32, f64) gradients flow. Nodes with
 * integer or pred outputs (comparisons, argmax, random bits, integer
 * arithmetic) contribute zero, as in Nx. A float node on a path from a
 * wrapper to an output whose primitive has no rule fails with
 * EM_ERR_ARGUMENT "grad: no gradient rule for <prim>" (today: linalg,
 * window_scatter, random_erf_inv, conv with batch_groups); so does a
 * gradient that would flow through a complex value (fft).
 */
#ifndef EMILY_AUTODIFF_H
#define EMILY_AUTODIFF_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A new pending node equal to `a` (a view sharing its buffer once
 * evaluated). Its creation order marks where the differentiated function
 * starts: nodes built before it are constants of the gradient. */
em_status em_identity(em_array *a, em_array **out);

/* `a` unchanged, but no gradient flows through it (its rule gives a zero
 * cotangent). A view. */
em_status em_stop_gradient(em_array *a, em_array **out);

/* Gradients of sum_k <outputs[k], cotangents[k]> with respect to each
 * wrt[i]: grads[i] gets a new reference, shaped and typed as wrt[i] (zeros
 * when no path leads from wrt[i] to an output). cotangents[k] has the shape
 * and dtype of outputs[k]. wrt entries should be em_identity wrappers
 * created before the outputs were built.
 *
 * Fails with EM_ERR_ARGUMENT (grads all NULL) when a primitive on the path
 * has no rule, when a gradient would flow through a complex value, or when
 * a float node built after the wrappers was evaluated and then used
 * (evaluation detaches a node from its inputs,
 * cutting the path: "... was evaluated inside the differentiated
 * function"; integer nodes, inputs of em_stop_gradient and the wrappers
 * themselves are exempt). Nothing is evaluated. */
em_status em_vjp(em_array *const *outputs, em_array *const *cotangents,
                 size_t noutputs, em_array *const *wrt, size_t nwrt,
                 em_array **grads);

#ifdef __cplusplus
}
#endif

#endif
