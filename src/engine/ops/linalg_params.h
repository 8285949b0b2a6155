/*
 * linalg_params.h — the parameters of the fft and linalg nodes, shared by
 * their CPU evals (fft.c, linalg.c) and GPU evals (gpu_fft.c,
 * gpu_linalg.c).
 */
#ifndef EMILY_LINALG_PARAMS_H
#define EMILY_LINALG_PARAMS_H

#include "emily_fft.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct fft_params {
    int axis;
    int64_t n;
    em_fft_mode mode;
    double eps;
} fft_params;

/* The linalg ops (the order of em_cuda_linalg_op too). */
typedef enum lop {
    OP_CHOL,
    OP_QR,
    OP_LU,
    OP_EIGH,
    OP_SVD,
    OP_TRSOLVE,
    OP_SOLVE,
    OP_DET,
    OP_INV,
} lop;

typedef struct lparams {
    lop op;
    int64_t batch; /* matrices */
    int64_t m, n;  /* a's matrix shape */
    int64_t k;     /* right-hand sides (solve, triangular_solve) */
    int64_t per;   /* output elements per matrix */
    bool flag;     /* qr: complete; svd: full matrices */
    bool left, lower, trans;
} lparams;

/* The error the CPU and GPU evals report when matrix i of the batch fails
 * on its values (cholesky: not positive definite; solve and
 * triangular_solve: singular). */
em_status em__linalg_value_error(const lparams *p, int64_t i);

#endif
