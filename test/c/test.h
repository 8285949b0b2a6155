/*
 * test.h — a tiny C test harness. Each test file defines tests with
 * EM_TEST(name) { ... }; they register themselves at load time and
 * test/c/main.c runs them all, printing "N passed, N failed".
 */
#ifndef EMILY_TEST_H
#define EMILY_TEST_H

#include "emily.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef void (*em_test_fn)(void);
void em_test_register(const char *name, em_test_fn fn);
/* Count a failed check in the running test and print where it failed. */
void em_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define EM_TEST(name)                                                          \
    static void name(void);                                                    \
    __attribute__((constructor)) static void name##_register(void) {           \
        em_test_register(#name, name);                                         \
    }                                                                          \
    static void name(void)

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            em_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);              \
    } while (0)

/* Expect an EM_OK status; on failure print em_last_error(). */
#define CHECK_OK(expr)                                                         \
    do {                                                                       \
        em_status st_ = (expr);                                                \
        if (st_ != EM_OK)                                                      \
            em_test_fail(__FILE__, __LINE__, "%s -> %d: %s", #expr, (int)st_,  \
                         em_last_error());                                     \
    } while (0)

/* Expect a given failure status whose message contains `needle`. */
#define CHECK_ERR(expr, status, needle)                                        \
    do {                                                                       \
        em_status st_ = (expr);                                                \
        if (st_ != (status) || !strstr(em_last_error(), (needle)))             \
            em_test_fail(__FILE__, __LINE__, "%s -> %d (%s), wanted %d (%s)",  \
                         #expr, (int)st_, em_last_error(), (int)(status),      \
                         (needle));                                            \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                  \
    do {                                                                       \
        double a_ = (double)(a), b_ = (double)(b);                             \
        if (!(fabs(a_ - b_) <= (tol) || (isnan(a_) && isnan(b_))))             \
            em_test_fail(__FILE__, __LINE__, "%s = %.17g, wanted %.17g", #a,   \
                         a_, b_);                                              \
    } while (0)

/* Helpers (test/c/main.c). */
em_array *t_from_f64(const double *values, const int64_t *shape, int ndim,
                     em_dtype dtype);           /* converts each value */
void t_read_f64(em_array *a, double *out, size_t n); /* eval + convert */

#endif
