/* Driver of scripts/cuda_emulate.sh: the conv / window / erf_inv families of
 * test_cuda against the emulated plugin (top_k needs sort and gather, which
 * the emulator does not have). */
#include "cuda_test.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    setenv("EMILY_CUDA_POISON", "1", 1);
    const char *reason;
    if (!em_device_available(GPU, &reason)) {
        printf("skipped: %s\n", reason);
        return 1;
    }
    test_erf_inv();
    test_window();
    test_conv();
    em_memory_clear_device_cache(GPU);
    em_memory_stats ms;
    em_memory_get_device_stats(GPU, &ms);
    record("memory", "GPU bytes active after releasing everything",
           ms.active == 0, ms.active ? INFINITY : 0);
    printf("\n%-10s %7s %7s %14s\n", "family", "cases", "failed", "worst/tol");
    for (int i = 0; i < nfamilies; i++)
        printf("%-10s %7d %7d %14.3g\n", families[i].name, families[i].cases,
               families[i].failed, families[i].worst);
    printf("%s: %d failed\n", total_failed ? "FAILED" : "PASSED", total_failed);
    return total_failed != 0;
}
