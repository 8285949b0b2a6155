/*
 * test_in_range.c — em_indices_in_range (Emily's debug bounds check) on
 * GPU indices against the CPU's answer, for every integer dtype, with
 * indices inside, at and beyond the bound, negative, and huge u64 values.
 */
#include "cuda_test.h"

#include <math.h>

static const em_dtype index_dtypes[] = {EM_PRED, EM_U8,  EM_U16, EM_U32, EM_U64,
                                        EM_S8,   EM_S16, EM_S32, EM_S64};

void test_in_range(void) {
    const int64_t bounds[] = {1, 5, 200, 70000};
    int64_t shape[2] = {7, 9};
    for (size_t di = 0; di < sizeof index_dtypes / sizeof index_dtypes[0];
         di++) {
        em_dtype d = index_dtypes[di];
        for (size_t bi = 0; bi < sizeof bounds / sizeof bounds[0]; bi++) {
            /* small = bound + 1: mostly inside, sometimes exactly at it;
             * 0: the dtype's whole range (negatives, huge values). */
            for (int whole = 0; whole < 2; whole++) {
                int small = whole ? 0 : (int)(bounds[bi] + 1);
                em_array *idx = random_array(d, shape, 2, false, small);
                em_array *g = NULL, *cpu = NULL, *gpu = NULL;
                die_on(em_to_device(idx, GPU, &g), "to_device");
                die_on(em_indices_in_range(idx, bounds[bi], &cpu), "cpu");
                if (g)
                    die_on(em_indices_in_range(g, bounds[bi], &gpu), "gpu");
                if (cpu && gpu) {
                    double w = compare(cpu, gpu, "indices_in_range", 1);
                    record("in_range", em_dtype_name(d), w <= 1, w);
                }
                em_array_release(idx);
                em_array_release(g);
                em_array_release(cpu);
                em_array_release(gpu);
            }
        }
    }
}
