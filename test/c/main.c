/* Runs every registered C test and prints "N passed, N failed". */
#include "test.h"

#include <stdarg.h>
#include <stdlib.h>

#define MAX_TESTS 1024

static struct {
    const char *name;
    em_test_fn fn;
} tests[MAX_TESTS];
static int ntests;
static int current_failures;

void em_test_register(const char *name, em_test_fn fn) {
    if (ntests < MAX_TESTS) {
        tests[ntests].name = name;
        tests[ntests].fn = fn;
        ntests++;
    }
}

void em_test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    current_failures++;
    fprintf(stderr, "  %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

em_array *t_from_f64(const double *values, const int64_t *shape, int ndim,
                     em_dtype dtype) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    em_array *src = NULL, *out = NULL;
    if (em_from_data(values, (size_t)n * sizeof(double), shape, ndim, EM_F64,
                     &src) != EM_OK)
        return NULL;
    if (dtype == EM_F64)
        return src;
    em_status st = em_as_type(src, dtype, &out);
    em_array_release(src);
    return st == EM_OK ? out : NULL;
}

void t_read_f64(em_array *a, double *out, size_t n) {
    em_array *conv = NULL;
    if (em_as_type(a, EM_F64, &conv) != EM_OK ||
        em_read(conv, out, n * sizeof(double)) != EM_OK)
        em_test_fail(__FILE__, __LINE__, "t_read_f64: %s", em_last_error());
    em_array_release(conv);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;
    for (int i = 0; i < ntests; i++) {
        if (filter && !strstr(tests[i].name, filter))
            continue;
        current_failures = 0;
        tests[i].fn();
        if (current_failures) {
            failed++;
            printf("FAIL %s\n", tests[i].name);
        } else {
            passed++;
        }
    }
    printf("engine: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
