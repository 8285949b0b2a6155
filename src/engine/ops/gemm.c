/*
 * gemm.c — BLAS matrix products split over the engine's thread pool.
 *
 * OpenBLAS runs single-threaded (em__blas_single_threaded): its own
 * threads, which spin on sched_yield between calls, fought the engine's
 * pool for the same cores (a fifth of MiniLM's time went to sched_yield on
 * 2 cores), and it threads each call of a batch of small products
 * separately. Here the pool takes the batch's problems, or the rows (or
 * columns) of one problem, and each piece is one single-threaded BLAS call
 * on a sub-matrix: rows [r0, r1) of C = op(A) · op(B) need rows r0.. of
 * op(A) and all of op(B); columns need the matching columns of op(B).
 */
#include "dot_cpu.h"

#include <cblas.h>
#include <pthread.h>

/* BLAS wrappers: the real routines take scalars by value, the complex ones
 * by pointer (SCALAR turns a variable into the argument). */
#define BY_VALUE(v) (v)
#define BY_POINTER(v) (&(v))
#define DEFINE_BLAS_GEMM(NAME, T, ROUTINE, SCALAR)                             \
    void NAME(bool ta, bool tb, int m, int n, int k, const void *a, int lda,   \
              const void *b, int ldb, bool accumulate, void *c, int ldc) {     \
        T one = 1, beta = accumulate ? 1 : 0;                                  \
        ROUTINE(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,                 \
                tb ? CblasTrans : CblasNoTrans, m, n, k, SCALAR(one), a, lda,  \
                b, ldb, SCALAR(beta), c, ldc);                                 \
    }
DEFINE_BLAS_GEMM(em__gemm_f32_blas, float, cblas_sgemm, BY_VALUE)
DEFINE_BLAS_GEMM(em__gemm_f64, double, cblas_dgemm, BY_VALUE)
DEFINE_BLAS_GEMM(em__gemm_c64, em_c64_t, cblas_cgemm, BY_POINTER)
DEFINE_BLAS_GEMM(em__gemm_c128, em_c128_t, cblas_zgemm, BY_POINTER)

/* f32: our AVX-512 kernel where the CPU has AVX-512F (sgemm_avx512.c),
 * OpenBLAS elsewhere and where the kernel declines (an allocation failed,
 * an empty product). */
void em__gemm_f32(bool ta, bool tb, int m, int n, int k, const void *a, int lda,
                  const void *b, int ldb, bool accumulate, void *c, int ldc) {
    if (em__sgemm_avx512_available() &&
        em__sgemm_avx512(ta, tb, m, n, k, a, lda, b, ldb, accumulate, c, ldc))
        return;
    em__gemm_f32_blas(ta, tb, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
}

void openblas_set_num_threads(int num_threads);

static pthread_once_t single_once = PTHREAD_ONCE_INIT;
static void set_single(void) { openblas_set_num_threads(1); }

void em__blas_single_threaded(void) { pthread_once(&single_once, set_single); }

typedef struct gemm_job {
    const em_gemm_problem *p;
    int64_t pieces;     /* per problem */
    int64_t piece_len;  /* rows or columns per piece */
    bool split_columns; /* else rows */
} gemm_job;

static void gemm_task(void *ctx, int64_t u0, int64_t u1) {
    const gemm_job *j = ctx;
    const em_gemm_problem *p = j->p;
    size_t w = p->esz;
    for (int64_t u = u0; u < u1; u++) {
        int64_t bi = u / j->pieces, piece = u % j->pieces;
        const char *a = p->a[bi], *b = p->b[bi];
        char *c = p->c[bi];
        int64_t m = p->m, n = p->n;
        int64_t lo = piece * j->piece_len;
        int64_t len = j->split_columns ? n - lo : m - lo;
        if (len > j->piece_len)
            len = j->piece_len;
        if (len <= 0)
            continue;
        if (j->split_columns) {
            /* op(B)'s columns lo..: B's columns (not transposed) or rows. */
            b += (size_t)(p->tb ? lo * p->ldb : lo) * w;
            c += (size_t)lo * w;
            n = len;
        } else {
            /* op(A)'s rows lo..: A's rows (not transposed) or columns. */
            a += (size_t)(p->ta ? lo : lo * p->lda) * w;
            c += (size_t)(lo * p->ldc) * w;
            m = len;
        }
        p->gemm(p->ta, p->tb, (int)m, (int)n, (int)p->k, a, (int)p->lda, b,
                (int)p->ldb, p->accumulate, c, (int)p->ldc);
    }
}

void em__gemm_parallel(const em_gemm_problem *p) {
    em__blas_single_threaded();
    int threads = em__num_threads();
    gemm_job j = {p, 1, p->m, false};
    /* Fewer problems than threads: cut each along its longer side, into
     * pieces of at least 16 rows or 32 columns (the kernels' panel widths:
     * OpenBLAS's 16, sgemm_avx512.c's 32 columns). */
    if (p->nbatch < threads) {
        j.split_columns = p->n > p->m;
        int64_t side = j.split_columns ? p->n : p->m;
        int64_t want = (threads + p->nbatch - 1) / p->nbatch;
        int64_t len = (side + want - 1) / want;
        int64_t unit = j.split_columns ? 32 : 16;
        len = (len + unit - 1) / unit * unit;
        j.piece_len = len < side ? len : side;
        j.pieces = j.piece_len ? (side + j.piece_len - 1) / j.piece_len : 1;
    }
    int64_t flops = p->m * p->n * p->k / j.pieces;
    em__parallel_units(p->nbatch * j.pieces, flops, gemm_task, &j);
}

void em__gemm_one(em_gemm_fn gemm, size_t esz, bool ta, bool tb, int64_t m,
                  int64_t n, int64_t k, const void *a, int64_t lda,
                  const void *b, int64_t ldb, bool accumulate, void *c,
                  int64_t ldc) {
    const char *as[1] = {a}, *bs[1] = {b};
    char *cs[1] = {c};
    em_gemm_problem p = {.gemm = gemm,
                         .esz = esz,
                         .ta = ta,
                         .tb = tb,
                         .accumulate = accumulate,
                         .m = m,
                         .n = n,
                         .k = k,
                         .lda = lda,
                         .ldb = ldb,
                         .ldc = ldc,
                         .nbatch = 1,
                         .a = as,
                         .b = bs,
                         .c = cs};
    em__gemm_parallel(&p);
}
