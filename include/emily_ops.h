/*
 * emily_ops.h — the registry of elementwise primitives.
 *
 * Every elementwise primitive is declared here exactly once. The engine
 * (enum values, names, dtype rules, kernels), the NIF table and the
 * Elixir stubs of Emily.Native are all generated from these lists, so adding
 * an elementwise op means: one line here, one kernel line in the op family's
 * source file, and (if it is user facing) one function in Emily.Tensor.
 *
 * Columns: X(name, accepts)
 *   name    — lower-case identifier; becomes EM_UNARY_<NAME> / EM_BINARY_<NAME>,
 *             the NIF name and the Emily.Native function name.
 *   accepts — which input dtypes the op accepts:
 *             NUMERIC  every dtype but pred
 *             REAL     integers and real floats (no complex)
 *             FLOATING real and complex floats
 *             REALFLOAT real floats only
 *             INTEGER  integers (pred included)
 *             ANY      every dtype
 *
 * Output dtype: the input dtype, except where the family says otherwise
 * (comparisons and logical ops give pred; abs, real and imag of a complex
 * give its real counterpart). Binary ops require both inputs to have the
 * same dtype; the caller converts first (Emily.Tensor applies Nx's
 * promotion rules).
 */
#ifndef EMILY_OPS_H
#define EMILY_OPS_H

#define EM_UNARY_OPS(X)                                                        \
    X(negate, NUMERIC)                                                         \
    X(abs, NUMERIC)                                                            \
    X(sign, NUMERIC)                                                           \
    X(floor, REAL)                                                             \
    X(ceil, REAL)                                                              \
    X(round, REAL)                                                             \
    X(sqrt, FLOATING)                                                          \
    X(rsqrt, FLOATING)                                                         \
    X(exp, FLOATING)                                                           \
    X(expm1, FLOATING)                                                         \
    X(log, FLOATING)                                                           \
    X(log1p, FLOATING)                                                         \
    X(sin, FLOATING)                                                           \
    X(cos, FLOATING)                                                           \
    X(tanh, FLOATING)                                                          \
    X(sigmoid, FLOATING)                                                       \
    X(erf, REALFLOAT)                                                          \
    X(logical_not, ANY)                                                        \
    X(bitwise_not, INTEGER)                                                    \
    X(is_nan, ANY)                                                             \
    X(is_infinity, ANY)                                                        \
    X(tan, FLOATING)                                                           \
    X(acos, FLOATING)                                                          \
    X(asin, FLOATING)                                                          \
    X(atan, FLOATING)                                                          \
    X(cosh, FLOATING)                                                          \
    X(sinh, FLOATING)                                                          \
    X(acosh, FLOATING)                                                         \
    X(asinh, FLOATING)                                                         \
    X(atanh, FLOATING)                                                         \
    X(cbrt, FLOATING)                                                          \
    X(erfc, REALFLOAT)                                                         \
    X(erf_inv, REALFLOAT)                                                      \
    X(real, FLOATING)                                                          \
    X(imag, FLOATING)                                                          \
    X(conjugate, FLOATING)                                                     \
    X(population_count, INTEGER)                                               \
    X(count_leading_zeros, INTEGER)

/* Arithmetic: output has the input dtype. */
#define EM_BINARY_ARITH_OPS(X)                                                 \
    X(add, NUMERIC)                                                            \
    X(subtract, NUMERIC)                                                       \
    X(multiply, NUMERIC)                                                       \
    X(divide, NUMERIC)                                                         \
    X(pow, NUMERIC)                                                            \
    X(minimum, REAL)                                                           \
    X(maximum, REAL)                                                           \
    X(remainder, REAL)                                                         \
    X(quotient, INTEGER)                                                       \
    X(atan2, REALFLOAT)                                                        \
    X(bitwise_and, INTEGER)                                                    \
    X(bitwise_or, INTEGER)                                                     \
    X(bitwise_xor, INTEGER)                                                    \
    X(left_shift, INTEGER)                                                     \
    X(right_shift, INTEGER)

/* Comparisons and logical ops: output is pred. */
#define EM_BINARY_PRED_OPS(X)                                                  \
    X(equal, ANY)                                                              \
    X(not_equal, ANY)                                                          \
    X(less, REAL)                                                              \
    X(less_equal, REAL)                                                        \
    X(greater, REAL)                                                           \
    X(greater_equal, REAL)                                                     \
    X(logical_and, ANY)                                                        \
    X(logical_or, ANY)                                                         \
    X(logical_xor, ANY)

#define EM_BINARY_OPS(X) EM_BINARY_ARITH_OPS(X) EM_BINARY_PRED_OPS(X)

#define EM_REDUCE_OPS(X)                                                       \
    X(sum, NUMERIC)                                                            \
    X(product, NUMERIC)                                                        \
    X(max, REAL)                                                               \
    X(min, REAL)                                                               \
    X(all, ANY)                                                                \
    X(any, ANY)

#endif
