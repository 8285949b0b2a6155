/*
 * emily_linalg.h — dense linear algebra over LAPACK (part of libemily;
 * include after or instead of emily.h).
 *
 * Every op works on the last two axes of its inputs ("matrices") and runs
 * once per matrix of the leading ("batch") axes, which must be equal for
 * the two operands of solve and triangular_solve. Inputs may have any
 * layout; each matrix is copied to a row-major scratch and factorized with
 * LAPACKE. Dtypes: f32, f64, c64 and c128 (svd: f32 and f64); results have
 * the input's dtype. Multi-output ops return views into one buffer that
 * one factorization fills, so asking for q and r costs one QR.
 *
 * Failures that depend on the values are reported when the result is
 * evaluated, as EM_ERR_ARGUMENT naming the op: a singular matrix in solve
 * and triangular_solve, a matrix that is not positive definite in
 * cholesky. invert of a singular matrix gives NaNs and its determinant is
 * 0 (as Nx); an eigh/svd that does not converge gives NaNs.
 */
#ifndef EMILY_LINALG_H
#define EMILY_LINALG_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Lower Cholesky factor L of Hermitian positive-definite [..., n, n]
 * matrices (A = L·Lᴴ; only the lower triangle of A is read; the strict
 * upper triangle of L is 0). */
em_status em_cholesky(em_array *a, em_array **out);

/* QR of [..., m, n] (k = min(m, n)): reduced q [..., m, k], r [..., k, n];
 * complete q [..., m, m], r [..., m, n]. Householder QR (LAPACK geqrf);
 * for real inputs each reflection's sign is chosen so that r's diagonal
 * has the sign of the pivot column's leading entry (Nx's convention). */
em_status em_qr(em_array *a, bool complete, em_array **q, em_array **r);

/* A = P·L·U of square [..., n, n] with partial pivoting (LAPACK getrf):
 * p is the permutation matrix (in a's dtype), l unit lower triangular, u
 * upper triangular. Singular matrices are factorized too. */
em_status em_lu(em_array *a, em_array **p, em_array **l, em_array **u);

/* Eigenvalues (ascending, [..., n]) and eigenvectors (the columns of
 * [..., n, n]) of Hermitian matrices; the lower triangle is read. For
 * complex inputs the eigenvalues are stored with imaginary part 0. */
em_status em_eigh(em_array *a, em_array **w, em_array **v);

/* A = U·diag(S)·Vt for [..., m, n] (k = min(m, n)), S descending [..., k];
 * full: u [..., m, m], vt [..., n, n]; else u [..., m, k], vt [..., k, n].
 * f32 and f64 only. */
em_status em_svd(em_array *a, bool full, em_array **u, em_array **s,
                 em_array **vt);

/* Solve op(A)·X = B (left_side) or X·op(A) = B with A triangular
 * [..., n, n] (`lower` says which triangle is read), op(A) = A or Aᵀ
 * (transpose). b is [..., n, k] (left) / [..., k, n] (right), or a batch of
 * vectors [..., n]. a and b share a dtype; the result has b's shape. */
em_status em_triangular_solve(em_array *a, em_array *b, bool left_side,
                              bool lower, bool transpose, em_array **out);

/* Solve A·X = B for square A [..., n, n] with b [..., n, k] or [..., n]
 * (LU with partial pivoting). */
em_status em_solve(em_array *a, em_array *b, em_array **out);

/* Determinant of square [..., n, n]: shape [...] (1 for 0x0 matrices). */
em_status em_determinant(em_array *a, em_array **out);

/* Inverse of square [..., n, n]; a singular matrix gives NaNs. */
em_status em_invert(em_array *a, em_array **out);

#ifdef __cplusplus
}
#endif

#endif
