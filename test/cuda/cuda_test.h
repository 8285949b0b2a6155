/*
 * cuda_test.h — shared by the GPU test families (one file each in test/cuda): each
 * family builds the same graph from the same random inputs on the CPU and
 * on gpu:0 and compares the two with the helpers below (support.c).
 */
#ifndef EMILY_CUDA_TEST_H
#define EMILY_CUDA_TEST_H

#include "emily.h"
#include "emily_device.h"

#include <stdbool.h>
#include <stdint.h>

#define GPU EM_DEVICE_GPU(0)

/* ---- bookkeeping: one row per family in the summary table ---- */
typedef struct family_stats {
    const char *name;
    int cases, failed;
    double worst; /* largest error seen, in units of the tolerance */
} family_stats;

#define MAX_FAMILIES 64
extern family_stats families[MAX_FAMILIES];
extern int nfamilies;
extern int total_failed;

family_stats *family(const char *name);
/* One case of family `fam`: passes when ok; worst is its error in units of
 * the tolerance (printed with FAIL lines, kept per family). */
void record(const char *fam, const char *what, bool ok, double worst);
/* Counts a failed setup step (st != EM_OK) with the engine's message. */
void die_on(em_status st, const char *what);

/* ---- random inputs ---- */
extern uint64_t rng; /* xorshift state; TEST_CUDA_SEED perturbs it */
uint64_t next_u64(void);
double next_unit(void); /* uniform in [0, 1) */
void f32_to_f16_bits(const float *src, uint16_t *dst, int64_t n);
/* `n` random elements of dtype d into buf. Floats in [-3, 3] with edge
 * values (0, -0, +-Inf, NaN, tiny) at a few positions when `edges`;
 * integers over their whole range, or in [0, small) when small > 0. */
void fill_random(em_dtype d, void *buf, int64_t n, bool edges, int small);
/* A new CPU array of random elements (as fill_random). */
em_array *random_array(em_dtype d, const int64_t *shape, int ndim, bool edges,
                       int small);
/* A new CPU pred array (lq, lk) for attention: each key kept with
 * probability 0.7, none of the first row's when dead_row (a row that
 * attends to nothing). */
em_array *random_keep_mask(int64_t lq, int64_t lk, bool dead_row);
/* The em_sdpa inputs after q, k and v: in[3] the mask (kind 1: additive
 * (1, H, Lq, Lk) of dt; 2: random_keep_mask; else none), in[4] the sinks
 * (H) of dt when `sinks`. */
void sdpa_random_extras(em_dtype dt, int mask, bool dead_row, bool sinks,
                        int64_t H, int64_t Lq, int64_t Lk, em_array **in);
/* gpu[i] = cpu[i] moved to the GPU, for i in [from, n) where cpu[i] is set. */
void copy_to_gpu(em_array *const *cpu, em_array **gpu, int from, int n);
/* K and V (in[1], in[2]) on both sides replaced by views of their first n
 * positions (axis 2) and dk / dv features (axis 3): a longer cache. */
void sdpa_cache_views(em_array **cpu_in, em_array **gpu_in, int64_t n,
                      int64_t dk, int64_t dv);

/* ---- comparisons: each returns the worst error in units of the tolerance
 * (<= 1 passes) and prints the first mismatch ---- */
/* Relative tolerance per float dtype (a few ulp); 0 for exact dtypes. */
double rtol_of(em_dtype d);
/* Element `i` of a buffer of dtype d as a double (part 1: imaginary). */
double load_real(em_dtype d, const void *p, int64_t i, int part);
/* Same dtype and shape; integers exactly, floats within rtol * tol_scale
 * relative (against |cpu| + 1e-3), NaN/Inf must match. */
double compare(em_array *cpu, em_array *gpu, const char *what,
               double tol_scale);
/* As compare, relative to |cpu| + floor (sums: floor near the terms'
 * magnitude); complex by modulus. */
double compare_floor(em_array *cpu, em_array *gpu, const char *what,
                     double tol_scale, double floor);
/* The values of `a` as complex doubles (malloc'ed; read back). */
double *as_c128_values(em_array *a, int64_t *n);
/* GPU error against a float64 reference within twice the CPU's own error
 * (or the dtype's tolerance): for ill-conditioned functions. */
double compare_ref(em_array *cpu, em_array *gpu, em_array *ref,
                   const char *what);
/* ||gpu - cpu|| / ||cpu|| over tol (matrix products, solvers). */
double compare_norm(em_array *cpu, em_array *gpu, double tol);

/* ---- input layouts ---- */
enum layout { CONTIGUOUS, TRANSPOSED, SLICED, LAYOUT_COUNT };
extern const char *layout_names[];
/* A [rows, cols] input of layout l: the CPU base array the view is cut
 * from (transposed: [cols, rows]; sliced: [2 rows, 2 cols + 1]). */
em_array *base_for(em_dtype d, int64_t rows, int64_t cols, enum layout l,
                   bool edges, int small);
/* The [rows, cols] view of `base` on `device` (base copied there first). */
em_array *view_on(em_array *base, em_device device, enum layout l);

#define NDTYPES 15
extern const em_dtype all_dtypes[NDTYPES];
/* TEST_CUDA_QUICK=1 keeps four dtypes (for slow runs under
 * compute-sanitizer). */
extern bool quick;
bool skip_dtype(em_dtype d);

/* ---- families in their own files (test/cuda/test_<family>.c), each
 * called from main() in test_cuda.c ---- */
void test_while(void);    /* test_while.c */
void test_in_range(void); /* test_in_range.c */
void test_streams(void); /* test_streams.c: one CUDA stream per engine stream */
void test_fft(void);     /* test_linalg.c */
void test_linalg(void);  /* test_linalg.c */
/* test_conv.c: conv, window reduce/scatter, random_erf_inv, top_k */
void test_conv(void);
void test_window(void);
void test_erf_inv(void);
void test_top_k(void);
void test_fusion(void);      /* fused programs vs unfused, on the GPU */
void test_fast(void);        /* test_fast.c: Emily.Fast norms, softmax, RoPE */
void test_quant(void);       /* test_quant.c: affine quantization */
void test_ggml(void);        /* test_ggml.c: ggml block formats */
void test_cuda_graph(void);  /* test_cuda_graph.c: programs as CUDA graphs */
void test_cuda_graph_state(void); /* test_cuda_graph_state.c: state, binding */
void test_attention(void);   /* test_attention.c: em_sdpa */
void test_distributed(void); /* test_distributed.c: collectives, NCCL */
/* test_attention_prefill.c: tensor-core prefill attention */
void test_attention_prefill(void);
/* test_attention_decode.c: em_sdpa, Lq <= 16 */
void test_attention_decode(void);
/* test_decode.c: em_fast_linear (decode path) */
void test_decode(void);

#endif
