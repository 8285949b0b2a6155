/* Programs: placeholders, build, replay (bit-identical to eager), CSE,
 * constant dedup, DCE, errors, while loops. */
#include "emily_compile.h"
#include "test.h"

#include <stdlib.h>

static em_array *ph(em_dtype dt, const int64_t *shape, int ndim) {
    em_array *p = NULL;
    CHECK_OK(em_placeholder(dt, shape, ndim, &p));
    return p;
}

/* Random f64 values in [-2, 2), converted to dtype. */
static em_array *rand_array(const int64_t *shape, int ndim, em_dtype dt,
                            unsigned *seed) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)rand_r(seed) / RAND_MAX * 4.0 - 2.0;
    em_array *a = t_from_f64(v, shape, ndim, dt);
    free(v);
    return a;
}

/* Whether two arrays evaluate to the same bytes. */
static bool same_bytes(em_array *a, em_array *b) {
    size_t n = em_array_nbytes(a);
    if (n != em_array_nbytes(b) || em_array_dtype(a) != em_array_dtype(b))
        return false;
    unsigned char *x = malloc(n ? n : 1), *y = malloc(n ? n : 1);
    bool same = em_read(a, x, n) == EM_OK && em_read(b, y, n) == EM_OK &&
                memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return same;
}

/* f(x, y) = exp(x) * y + sum(x, axis 1, keep) - transpose(y)[0:2, :]^T */
static em_status build_f(em_array *x, em_array *y, em_array **out) {
    em_array *e = NULL, *m = NULL, *s = NULL, *a = NULL, *t = NULL, *t2 = NULL;
    int axes[1] = {1}, perm[2] = {1, 0};
    em_status st = em_unary(EM_UNARY_exp, x, &e);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_multiply, e, y, &m);
    if (st == EM_OK)
        st = em_reduce(EM_REDUCE_sum, x, axes, 1, true, &s);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_add, m, s, &a);
    if (st == EM_OK)
        st = em_transpose(y, perm, 2, &t);
    if (st == EM_OK)
        st = em_transpose(t, perm, 2, &t2);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_subtract, a, t2, out);
    em_array_release(e);
    em_array_release(m);
    em_array_release(s);
    em_array_release(a);
    em_array_release(t);
    em_array_release(t2);
    return st;
}

EM_TEST(placeholder_cannot_be_read) {
    int64_t shape[2] = {2, 3};
    em_array *p = ph(EM_F32, shape, 2), *e = NULL;
    CHECK(em_is_placeholder(p));
    CHECK_OK(em_unary(EM_UNARY_exp, p, &e));
    CHECK(!em_is_placeholder(e));
    CHECK_ERR(em_eval(&e, 1), EM_ERR_ARGUMENT,
              "placeholder: a traced input has no value");
    float buf[6];
    CHECK_ERR(em_read(e, buf, sizeof buf), EM_ERR_ARGUMENT, "f32[2,3]");
    CHECK(!em_array_is_evaluated(e));
    em_array *bad = NULL;
    int64_t neg[1] = {-1};
    CHECK_ERR(em_placeholder(EM_F32, neg, 1, &bad), EM_ERR_ARGUMENT,
              "negative");
    CHECK(bad == NULL);
    em_array_release(e);
    em_array_release(p);
}

EM_TEST(program_replay_is_bit_identical) {
    const em_dtype dtypes[3] = {EM_F32, EM_F64, EM_BF16};
    unsigned seed = 7;
    for (int d = 0; d < 3; d++) {
        int64_t shape[2] = {3, 5};
        em_array *px = ph(dtypes[d], shape, 2), *py = ph(dtypes[d], shape, 2);
        em_array *traced = NULL;
        CHECK_OK(build_f(px, py, &traced));
        em_array *ins[2] = {px, py};
        em_program *prog = NULL;
        CHECK_OK(em_program_new(ins, 2, &traced, 1, NULL, &prog));
        CHECK(em_program_num_inputs(prog) == 2);
        CHECK(em_program_num_outputs(prog) == 1);
        for (int run = 0; run < 3; run++) {
            em_array *x = rand_array(shape, 2, dtypes[d], &seed);
            em_array *y = rand_array(shape, 2, dtypes[d], &seed);
            em_array *eager = NULL, *replayed = NULL;
            CHECK_OK(build_f(x, y, &eager));
            em_array *args[2] = {x, y};
            CHECK_OK(em_program_run(prog, args, 2, &replayed));
            CHECK(!em_array_is_evaluated(replayed)); /* lazy */
            CHECK(same_bytes(eager, replayed));
            em_array_release(eager);
            em_array_release(replayed);
            em_array_release(x);
            em_array_release(y);
        }
        em_program_stats stats;
        em_program_get_stats(prog, &stats);
        /* exp mul sum add transpose x2 subtract (+ broadcast views) */
        CHECK(stats.nodes_before >= 7);
        CHECK(stats.nodes_after == stats.nodes_before);
        CHECK(stats.fused_kernels == 0);
        em_program_release(prog);
        em_array_release(traced);
        em_array_release(px);
        em_array_release(py);
    }
}

/* A strided (transposed) or offset (sliced) input is copied into the
 * placeholder's layout first: views traced on the placeholder stay right. */
EM_TEST(program_strided_and_offset_inputs) {
    int64_t shape[2] = {3, 4}, tshape[2] = {4, 3}, big[2] = {5, 4};
    em_array *p = ph(EM_F64, shape, 2), *traced = NULL;
    int64_t start[2] = {1, 0}, stop[2] = {3, 4}, step[2] = {1, 2};
    CHECK_OK(em_slice(p, start, stop, step, &traced));
    em_program *prog = NULL;
    CHECK_OK(em_program_new(&p, 1, &traced, 1, NULL, &prog));
    unsigned seed = 3;
    em_array *base = rand_array(tshape, 2, EM_F64, &seed), *xt = NULL;
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(base, perm, 2, &xt));
    em_array *tall = rand_array(big, 2, EM_F64, &seed), *xo = NULL;
    int64_t s0[2] = {2, 0}, s1[2] = {5, 4}, one[2] = {1, 1};
    CHECK_OK(em_slice(tall, s0, s1, one, &xo)); /* offset 8 */
    em_array *inputs[2] = {xt, xo};
    for (int i = 0; i < 2; i++) {
        em_array *eager = NULL, *replayed = NULL;
        CHECK_OK(em_slice(inputs[i], start, stop, step, &eager));
        CHECK_OK(em_program_run(prog, &inputs[i], 1, &replayed));
        double a[4], b[4];
        t_read_f64(eager, a, 4);
        t_read_f64(replayed, b, 4);
        CHECK(memcmp(a, b, sizeof a) == 0);
        em_array_release(eager);
        em_array_release(replayed);
    }
    em_array_release(xt);
    em_array_release(xo);
    em_array_release(base);
    em_array_release(tall);
    em_program_release(prog);
    em_array_release(traced);
    em_array_release(p);
}

EM_TEST(program_cse_merges_duplicates) {
    int64_t shape[1] = {4};
    em_array *p = ph(EM_F32, shape, 1);
    em_array *e1 = NULL, *e2 = NULL, *sum = NULL;
    CHECK_OK(em_unary(EM_UNARY_exp, p, &e1));
    CHECK_OK(em_unary(EM_UNARY_exp, p, &e2));
    CHECK_OK(em_binary(EM_BINARY_add, e1, e2, &sum));
    em_program *prog = NULL, *plain = NULL;
    CHECK_OK(em_program_new(&p, 1, &sum, 1, NULL, &prog));
    em_program_options no_cse = {.no_cse = true};
    CHECK_OK(em_program_new(&p, 1, &sum, 1, &no_cse, &plain));
    em_program_stats s;
    em_program_get_stats(prog, &s);
    CHECK(s.nodes_before == 3);
    CHECK(s.nodes_after == 2);
    CHECK(s.cse_merged == 1);
    em_program_get_stats(plain, &s);
    CHECK(s.nodes_after == 3 && s.cse_merged == 0);
    double v[4] = {0, 1, -1, 0.5};
    em_array *x = t_from_f64(v, shape, 1, EM_F32), *a = NULL, *b = NULL;
    CHECK_OK(em_program_run(prog, &x, 1, &a));
    CHECK_OK(em_program_run(plain, &x, 1, &b));
    double out[4];
    t_read_f64(a, out, 4);
    for (int i = 0; i < 4; i++)
        CHECK_NEAR(out[i], 2 * (double)expf((float)v[i]), 1e-6);
    CHECK(same_bytes(a, b));
    em_array_release(a);
    em_array_release(b);
    em_array_release(x);
    em_program_release(prog);
    em_program_release(plain);
    em_array_release(e1);
    em_array_release(e2);
    em_array_release(sum);
    em_array_release(p);
}

EM_TEST(program_dedups_constants_and_keeps_them_alive) {
    int64_t shape[1] = {3};
    double w[3] = {1.5, -2, 4};
    em_array *c1 = t_from_f64(w, shape, 1, EM_F64);
    em_array *c2 = t_from_f64(w, shape, 1, EM_F64);
    CHECK_OK(em_eval(&c1, 1));
    CHECK_OK(em_eval(&c2, 1));
    em_array *p = ph(EM_F64, shape, 1), *m1 = NULL, *m2 = NULL, *s = NULL;
    CHECK_OK(em_binary(EM_BINARY_multiply, p, c1, &m1));
    CHECK_OK(em_binary(EM_BINARY_multiply, p, c2, &m2));
    CHECK_OK(em_binary(EM_BINARY_add, m1, m2, &s));
    em_program *prog = NULL;
    CHECK_OK(em_program_new(&p, 1, &s, 1, NULL, &prog));
    em_program_stats st;
    em_program_get_stats(prog, &st);
    CHECK(st.constants == 1);
    CHECK(st.constants_merged == 1);
    /* x*c1 and x*c2 became the same expression, then one node. */
    CHECK(st.cse_merged == 1);
    CHECK(st.nodes_after == 2);
    /* The trace and the weights are dropped: the program keeps what it
     * needs. */
    em_array_release(m1);
    em_array_release(m2);
    em_array_release(s);
    em_array_release(c1);
    em_array_release(c2);
    em_array_release(p);
    double xv[3] = {2, 3, -1}, out[3];
    em_array *x = t_from_f64(xv, shape, 1, EM_F64), *y = NULL;
    CHECK_OK(em_program_run(prog, &x, 1, &y));
    t_read_f64(y, out, 3);
    for (int i = 0; i < 3; i++)
        CHECK(out[i] == 2 * xv[i] * w[i]);
    em_array_release(y);
    em_array_release(x);
    em_program_release(prog);
}

EM_TEST(program_outputs_inputs_and_constants) {
    int64_t shape[1] = {2};
    double cv[2] = {5, 6}, xv[2] = {1, 2}, out[2];
    em_array *c = t_from_f64(cv, shape, 1, EM_F64);
    CHECK_OK(em_eval(&c, 1));
    em_array *p = ph(EM_F64, shape, 1), *neg = NULL;
    CHECK_OK(em_unary(EM_UNARY_negate, p, &neg));
    em_array *outs[3] = {p, c, neg};
    em_program *prog = NULL;
    CHECK_OK(em_program_new(&p, 1, outs, 3, NULL, &prog));
    em_array *x = t_from_f64(xv, shape, 1, EM_F64), *got[3] = {0};
    CHECK_OK(em_program_run(prog, &x, 1, got));
    CHECK(got[0] == x); /* the caller's input itself */
    t_read_f64(got[1], out, 2);
    CHECK(out[0] == 5 && out[1] == 6);
    t_read_f64(got[2], out, 2);
    CHECK(out[0] == -1 && out[1] == -2);
    em_dtype dt;
    const int64_t *sh;
    int nd;
    em_program_output_info(prog, 2, &dt, &sh, &nd);
    CHECK(dt == EM_F64 && nd == 1 && sh[0] == 2);
    for (int i = 0; i < 3; i++)
        em_array_release(got[i]);
    em_array_release(x);
    em_program_release(prog);
    em_array_release(neg);
    em_array_release(p);
    em_array_release(c);
}

EM_TEST(program_errors) {
    int64_t shape[2] = {2, 3}, other[1] = {3};
    em_array *p = ph(EM_F32, shape, 2), *q = ph(EM_F32, shape, 2);
    em_array *sum = NULL;
    CHECK_OK(em_binary(EM_BINARY_add, p, q, &sum));
    em_program *prog = NULL;
    /* q is not among the inputs */
    CHECK_ERR(em_program_new(&p, 1, &sum, 1, NULL, &prog), EM_ERR_ARGUMENT,
              "not one of the program's 1 inputs");
    CHECK(prog == NULL);
    em_array *dup[2] = {p, p};
    CHECK_ERR(em_program_new(dup, 2, &sum, 1, NULL, &prog), EM_ERR_ARGUMENT,
              "same placeholder");
    em_array *notph[2] = {p, sum};
    CHECK_ERR(em_program_new(notph, 2, &sum, 1, NULL, &prog), EM_ERR_ARGUMENT,
              "input 1 (f32[2,3]) is not a placeholder");
    em_array *ins[2] = {p, q};
    CHECK_OK(em_program_new(ins, 2, &sum, 1, NULL, &prog));
    double v[6] = {0};
    em_array *good = t_from_f64(v, shape, 2, EM_F32);
    em_array *wrong_type = t_from_f64(v, shape, 2, EM_F64);
    em_array *wrong_shape = t_from_f64(v, other, 1, EM_F32);
    em_array *out = NULL;
    CHECK_ERR(em_program_run(prog, &good, 1, &out), EM_ERR_ARGUMENT,
              "expected 2 inputs, got 1");
    em_array *a1[2] = {good, wrong_type};
    CHECK_ERR(em_program_run(prog, a1, 2, &out), EM_ERR_ARGUMENT,
              "input 1: expected f32[2,3], got f64[2,3]");
    em_array *a2[2] = {wrong_shape, good};
    CHECK_ERR(em_program_run(prog, a2, 2, &out), EM_ERR_ARGUMENT,
              "input 0: expected f32[2,3], got f32[3]");
    CHECK(out == NULL);
    em_array_release(good);
    em_array_release(wrong_type);
    em_array_release(wrong_shape);
    em_program_release(prog);
    em_array_release(sum);
    em_array_release(p);
    em_array_release(q);
}

/* cond(i, acc) = i < 5; body(i, acc) = (i + 1, acc * 2), followed with
 * tapped: by the same two values again, as taps. */
static void loop_programs_tapped(em_program **cond, em_program **body,
                                 bool tapped) {
    int64_t vshape[1] = {3};
    em_array *i = ph(EM_S64, NULL, 0), *acc = ph(EM_F64, vshape, 1);
    em_array *five = NULL, *one = NULL, *two = NULL, *lt = NULL, *i1 = NULL,
             *acc2 = NULL;
    CHECK_OK(em_scalar_s64(5, EM_S64, &five));
    CHECK_OK(em_scalar_s64(1, EM_S64, &one));
    CHECK_OK(em_scalar_f64(2, EM_F64, &two));
    CHECK_OK(em_binary(EM_BINARY_less, i, five, &lt));
    CHECK_OK(em_binary(EM_BINARY_add, i, one, &i1));
    CHECK_OK(em_binary(EM_BINARY_multiply, acc, two, &acc2));
    em_array *state[2] = {i, acc}, *next[4] = {i1, acc2, i1, acc2};
    CHECK_OK(em_program_new(state, 2, &lt, 1, NULL, cond));
    CHECK_OK(em_program_new(state, 2, next, tapped ? 4 : 2, NULL, body));
    em_array *all[8] = {i, acc, five, one, two, lt, i1, acc2};
    for (int k = 0; k < 8; k++)
        em_array_release(all[k]);
}

static void loop_programs(em_program **cond, em_program **body) {
    loop_programs_tapped(cond, body, false);
}

EM_TEST(while_loop_runs_until_false) {
    em_program *cond = NULL, *body = NULL;
    loop_programs(&cond, &body);
    int64_t vshape[1] = {3};
    double av[3] = {1, -0.5, 3};
    em_array *i0 = NULL, *acc0 = t_from_f64(av, vshape, 1, EM_F64);
    CHECK_OK(em_scalar_s64(0, EM_S64, &i0));
    em_array *init[2] = {i0, acc0}, *out[2] = {0};
    CHECK_OK(em_while(cond, body, init, 2, out));
    /* The loop keeps its programs. */
    em_program_release(cond);
    em_program_release(body);
    double iv, res[3];
    t_read_f64(out[0], &iv, 1);
    t_read_f64(out[1], res, 3);
    CHECK(iv == 5);
    for (int k = 0; k < 3; k++)
        CHECK(res[k] == av[k] * 32);
    /* Zero iterations: the initial state. */
    em_array *i9 = NULL, *out9[2] = {0};
    CHECK_OK(em_scalar_s64(9, EM_S64, &i9));
    em_program *c2 = NULL, *b2 = NULL;
    loop_programs(&c2, &b2);
    em_array *init9[2] = {i9, acc0};
    CHECK_OK(em_while(c2, b2, init9, 2, out9));
    t_read_f64(out9[0], &iv, 1);
    t_read_f64(out9[1], res, 3);
    CHECK(iv == 9 && res[0] == 1 && res[2] == 3);
    /* Errors: wrong state count and types. */
    em_array *bad[2] = {acc0, i0};
    em_array *junk[2] = {0};
    CHECK_ERR(em_while(c2, b2, bad, 2, junk), EM_ERR_ARGUMENT,
              "while: state 0 is f64[3] but condition input 0 is s64[]");
    CHECK_ERR(em_while(c2, b2, init, 1, junk), EM_ERR_ARGUMENT,
              "the condition takes 2 inputs");
    CHECK_ERR(em_while(b2, b2, init, 2, junk), EM_ERR_ARGUMENT,
              "gives 2 outputs");
    em_program_release(c2);
    em_program_release(b2);
    for (int k = 0; k < 2; k++) {
        em_array_release(out[k]);
        em_array_release(out9[k]);
    }
    em_array_release(i0);
    em_array_release(i9);
    em_array_release(acc0);
}

/* Taps seen by record_taps: the site and each iteration's tapped i. */
static uint64_t tapped_site;
static int tapped_count;
static double tapped_i[8];

static void record_taps(uint64_t site, em_array *const *taps, size_t ntaps) {
    tapped_site = site;
    if (ntaps == 2 && tapped_count < 8) {
        double acc[3];
        t_read_f64(taps[0], &tapped_i[tapped_count], 1);
        t_read_f64(taps[1], acc, 3); /* evaluated already: readable */
        tapped_count++;
    }
}

/* A tapped loop hands each iteration's extra body outputs to its callback,
 * and computes the same final state as the untapped loop. */
EM_TEST(while_loop_taps_each_iteration) {
    em_program *cond = NULL, *body = NULL;
    loop_programs_tapped(&cond, &body, true);
    int64_t vshape[1] = {3};
    double av[3] = {1, -0.5, 3};
    em_array *i0 = NULL, *acc0 = t_from_f64(av, vshape, 1, EM_F64);
    CHECK_OK(em_scalar_s64(2, EM_S64, &i0));
    em_array *init[2] = {i0, acc0}, *out[2] = {0}, *junk[2] = {0};
    CHECK_ERR(em_while_tapped(cond, body, init, 2, 2, NULL, 7, junk),
              EM_ERR_ARGUMENT, "2 taps but no callback");
    CHECK_ERR(em_while(cond, body, init, 2, junk), EM_ERR_ARGUMENT,
              "gives 4 outputs, expected 2 inputs (the state) and 2 outputs");
    tapped_count = 0;
    CHECK_OK(em_while_tapped(cond, body, init, 2, 2, record_taps, 7, out));
    CHECK(tapped_count == 0); /* lazy: nothing ran yet */
    double iv, res[3];
    t_read_f64(out[0], &iv, 1);
    t_read_f64(out[1], res, 3);
    CHECK(iv == 5 && res[0] == 8 && res[1] == -4 && res[2] == 24);
    CHECK(tapped_site == 7 && tapped_count == 3);
    for (int k = 0; k < 3; k++)
        CHECK(tapped_i[k] == 3 + k);
    em_array *all[] = {i0, acc0, out[0], out[1]};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        em_array_release(all[k]);
    em_program_release(cond);
    em_program_release(body);
}

/* A loop traced inside a program replays like any op. */
EM_TEST(while_loop_inside_a_program) {
    em_program *cond = NULL, *body = NULL;
    loop_programs(&cond, &body);
    int64_t vshape[1] = {3};
    em_array *pi = ph(EM_S64, NULL, 0), *pacc = ph(EM_F64, vshape, 1);
    em_array *state[2] = {pi, pacc}, *loop_out[2] = {0};
    CHECK_OK(em_while(cond, body, state, 2, loop_out));
    em_program_release(cond);
    em_program_release(body);
    em_program *outer = NULL;
    CHECK_OK(em_program_new(state, 2, loop_out, 2, NULL, &outer));
    em_array_release(loop_out[0]);
    em_array_release(loop_out[1]);
    em_array_release(pi);
    em_array_release(pacc);
    for (int64_t start = 0; start < 7; start += 3) {
        double av[3] = {1, 2, 3}, iv, res[3];
        em_array *i0 = NULL, *acc0 = t_from_f64(av, vshape, 1, EM_F64);
        CHECK_OK(em_scalar_s64(start, EM_S64, &i0));
        em_array *init[2] = {i0, acc0}, *out[2] = {0};
        CHECK_OK(em_program_run(outer, init, 2, out));
        t_read_f64(out[0], &iv, 1);
        t_read_f64(out[1], res, 3);
        int64_t iters = start < 5 ? 5 - start : 0;
        CHECK(iv == (double)(start < 5 ? 5 : start));
        for (int k = 0; k < 3; k++)
            CHECK(res[k] == av[k] * (double)(1 << iters));
        em_array_release(out[0]);
        em_array_release(out[1]);
        em_array_release(i0);
        em_array_release(acc0);
    }
    em_program_release(outer);
}

/* A condition that closes over a value of the enclosing trace: with
 * capture_outer the value becomes an input of the condition program and of
 * the loop node, so the outer program passes it on at every run. */
EM_TEST(while_loop_captures_outer_values) {
    em_array *limit = ph(EM_S64, NULL, 0); /* outer input */
    em_array *bump = NULL, *one = NULL;
    CHECK_OK(em_scalar_s64(1, EM_S64, &one));
    CHECK_OK(em_binary(EM_BINARY_add, limit, one, &bump)); /* outer node */
    em_array *i = ph(EM_S64, NULL, 0), *lt = NULL, *i1 = NULL;
    CHECK_OK(em_binary(EM_BINARY_less, i, bump, &lt));
    CHECK_OK(em_binary(EM_BINARY_add, i, one, &i1));
    em_program_options capture = {.capture_outer = true};
    em_program *cond = NULL, *body = NULL, *bad = NULL;
    CHECK_ERR(em_program_new(&i, 1, &lt, 1, NULL, &bad), EM_ERR_ARGUMENT,
              "not one of the program's 1 inputs");
    CHECK_OK(em_program_new(&i, 1, &lt, 1, &capture, &cond));
    CHECK_OK(em_program_new(&i, 1, &i1, 1, &capture, &body));
    CHECK(em_program_num_inputs(cond) == 2);
    CHECK(em_program_num_captures(cond) == 1);
    CHECK(em_program_capture(cond, 0) == bump);
    CHECK(em_program_num_captures(body) == 0);
    em_array *start = ph(EM_S64, NULL, 0), *loop_out = NULL;
    CHECK_OK(em_while(cond, body, &start, 1, &loop_out));
    em_array *outer_in[2] = {limit, start};
    em_program *outer = NULL;
    CHECK_OK(em_program_new(outer_in, 2, &loop_out, 1, NULL, &outer));
    em_array *all[9] = {limit, bump, one, i, lt, i1, start, loop_out, NULL};
    for (int k = 0; all[k]; k++)
        em_array_release(all[k]);
    em_program_release(cond);
    em_program_release(body);
    for (int64_t lim = 0; lim < 6; lim += 2) {
        em_array *a = NULL, *b = NULL, *out = NULL;
        CHECK_OK(em_scalar_s64(lim, EM_S64, &a));
        CHECK_OK(em_scalar_s64(1, EM_S64, &b));
        em_array *args[2] = {a, b};
        CHECK_OK(em_program_run(outer, args, 2, &out));
        double v;
        t_read_f64(out, &v, 1);
        CHECK(v == (double)(lim + 1 > 1 ? lim + 1 : 1));
        em_array_release(out);
        em_array_release(a);
        em_array_release(b);
    }
    em_program_release(outer);
}

/* Large programs: more than 64 inputs, nodes and node inputs (the replay's
 * heap paths), checked against the eager graph. */
EM_TEST(program_many_inputs_and_nodes) {
    enum { N = 70 };
    int64_t shape[1] = {2};
    em_array *phs[N], *vals[N];
    unsigned seed = 11;
    for (int i = 0; i < N; i++) {
        phs[i] = ph(EM_F64, shape, 1);
        vals[i] = rand_array(shape, 1, EM_F64, &seed);
    }
    em_array *built[2] = {0};
    for (int pass = 0; pass < 2; pass++) {
        em_array **in = pass ? vals : phs, *cat = NULL, *acc = NULL;
        CHECK_OK(em_concatenate(in, N, 0, &cat));
        acc = cat;
        for (int k = 0; k < 80; k++) { /* a chain of 80 nodes */
            em_array *next = NULL;
            CHECK_OK(
                em_unary(k % 2 ? EM_UNARY_sin : EM_UNARY_tanh, acc, &next));
            em_array_release(acc);
            acc = next;
        }
        built[pass] = acc;
    }
    em_program *prog = NULL;
    CHECK_OK(em_program_new(phs, N, &built[0], 1, NULL, &prog));
    em_program_stats st;
    em_program_get_stats(prog, &st);
    CHECK(st.nodes_after == 81);
    em_array *out = NULL;
    CHECK_OK(em_program_run(prog, vals, N, &out));
    CHECK(same_bytes(out, built[1]));
    em_array_release(out);
    em_program_release(prog);
    for (int i = 0; i < N; i++) {
        em_array_release(phs[i]);
        em_array_release(vals[i]);
    }
    em_array_release(built[0]);
    em_array_release(built[1]);
}
