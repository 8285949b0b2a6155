/*
 * test_cuda_graph.c — the cuda_graph program option where no graph can be
 * captured (test/cuda/test_cuda_graph.c covers the GPU): a program on the
 * CPU reports FALLBACK with its reason and replays exactly as without the
 * option.
 */
#include "emily_compile.h"
#include "test.h"

#include <string.h>

EM_TEST(program_cuda_graph_on_the_cpu_replays_as_usual) {
    int64_t shape[1] = {5};
    em_array *p = NULL, *e = NULL, *two = NULL, *y = NULL;
    CHECK_OK(em_placeholder(EM_F32, shape, 1, &p));
    CHECK_OK(em_unary(EM_UNARY_exp, p, &e));
    CHECK_OK(em_scalar_f64(2, EM_F32, &two));
    CHECK_OK(em_binary(EM_BINARY_multiply, e, two, &y));
    em_program *with = NULL, *without = NULL;
    em_program_options graph = {.cuda_graph = true};
    CHECK_OK(em_program_new(&p, 1, &y, 1, &graph, &with));
    CHECK_OK(em_program_new(&p, 1, &y, 1, NULL, &without));
    em_program_stats s;
    em_program_get_stats(with, &s);
    CHECK(s.cuda_graph == EM_CUDA_GRAPH_FALLBACK);
    CHECK(strstr(s.cuda_graph_reason, "not on a GPU") != NULL);
    em_program_get_stats(without, &s);
    CHECK(s.cuda_graph == EM_CUDA_GRAPH_OFF && s.cuda_graph_reason[0] == 0);
    double v[5] = {0, 1, -1, 0.5, 3};
    em_array *x = t_from_f64(v, shape, 1, EM_F32);
    for (int run = 0; run < 3; run++) {
        em_array *a = NULL, *b = NULL;
        CHECK_OK(em_program_run(with, &x, 1, &a));
        CHECK_OK(em_program_run(without, &x, 1, &b));
        double got[5], want[5];
        t_read_f64(a, got, 5);
        t_read_f64(b, want, 5);
        CHECK(memcmp(got, want, sizeof got) == 0);
        em_array_release(a);
        em_array_release(b);
    }
    em_program_get_stats(with, &s);
    CHECK(s.cuda_graph_replays == 0 && s.cuda_graph_bytes == 0);
    em_array_release(x);
    em_program_release(with);
    em_program_release(without);
    em_array *all[4] = {p, e, two, y};
    for (int i = 0; i < 4; i++)
        em_array_release(all[i]);
}
