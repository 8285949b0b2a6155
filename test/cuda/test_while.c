/*
 * test_while.c — em_while with its state on the GPU against the same loop
 * on the CPU: programs traced on GPU placeholders, the condition read back
 * once per iteration, the final state packed on the device.
 */
#include "cuda_test.h"
#include "emily_compile.h"

#include <math.h>
#include <stdio.h>

/* cond(i, x) = i < 7; body(i, x) = (i + 1, x * 1.5 + i), traced on
 * `device` (placeholders there; the numbers are CPU scalars that follow). */
static void loop_on(em_device device, em_program **cond, em_program **body) {
    int64_t vshape[1] = {33};
    em_device old = em_set_default_device(device);
    em_array *i = NULL, *x = NULL;
    die_on(em_placeholder(EM_S32, NULL, 0, &i), "placeholder i");
    die_on(em_placeholder(EM_F32, vshape, 1, &x), "placeholder x");
    em_set_default_device(old);
    em_array *seven = NULL, *one = NULL, *half3 = NULL, *lt = NULL, *i1 = NULL,
             *scaled = NULL, *fi = NULL, *x1 = NULL;
    die_on(em_scalar_s64(7, EM_S32, &seven), "scalar");
    die_on(em_scalar_s64(1, EM_S32, &one), "scalar");
    die_on(em_scalar_f64(1.5, EM_F32, &half3), "scalar");
    die_on(em_binary(EM_BINARY_less, i, seven, &lt), "less");
    die_on(em_binary(EM_BINARY_add, i, one, &i1), "add");
    die_on(em_binary(EM_BINARY_multiply, x, half3, &scaled), "multiply");
    die_on(em_as_type(i, EM_F32, &fi), "as_type");
    die_on(em_binary(EM_BINARY_add, scaled, fi, &x1), "add");
    em_array *state[2] = {i, x}, *next[2] = {i1, x1};
    die_on(em_program_new(state, 2, &lt, 1, NULL, cond), "cond program");
    die_on(em_program_new(state, 2, next, 2, NULL, body), "body program");
    em_array *all[10] = {i, x, seven, one, half3, lt, i1, scaled, fi, x1};
    for (int k = 0; k < 10; k++)
        em_array_release(all[k]);
}

static void run_loop(em_device device, em_array *i0, em_array *x0,
                     em_array **out) {
    em_program *cond = NULL, *body = NULL;
    loop_on(device, &cond, &body);
    em_array *gi = NULL, *gx = NULL;
    die_on(em_to_device(i0, device, &gi), "to_device");
    die_on(em_to_device(x0, device, &gx), "to_device");
    em_array *init[2] = {gi, gx};
    out[0] = out[1] = NULL;
    if (cond && body)
        die_on(em_while(cond, body, init, 2, out), "while");
    em_program_release(cond);
    em_program_release(body);
    em_array_release(gi);
    em_array_release(gx);
}

void test_while(void) {
    int64_t vshape[1] = {33};
    em_array *i0 = NULL, *x0 = random_array(EM_F32, vshape, 1, false, 0);
    die_on(em_scalar_s64(0, EM_S32, &i0), "scalar");
    em_array *cpu[2], *gpu[2];
    run_loop(EM_DEVICE_CPU, i0, x0, cpu);
    run_loop(GPU, i0, x0, gpu);
    if (cpu[0] && gpu[0]) {
        record("while", "on the GPU", em_array_device(gpu[1]) == GPU, 0);
        double w0 = compare(cpu[0], gpu[0], "while counter", 1);
        double w1 = compare(cpu[1], gpu[1], "while state", 1);
        record("while", "counter", w0 <= 1, w0);
        record("while", "state", w1 <= 1, w1);
    } else {
        record("while", "built on both devices", false, INFINITY);
    }
    /* A CPU state given to programs traced on the GPU: a clear error. */
    em_program *cond = NULL, *body = NULL;
    loop_on(GPU, &cond, &body);
    em_array *init[2] = {i0, x0}, *junk[2] = {0};
    em_status st = cond && body ? em_while(cond, body, init, 2, junk) : EM_OK;
    record("while", "CPU state for GPU programs", st == EM_ERR_ARGUMENT,
           st == EM_ERR_ARGUMENT ? 0 : INFINITY);
    em_program_release(cond);
    em_program_release(body);
    for (int k = 0; k < 2; k++) {
        em_array_release(cpu[k]);
        em_array_release(gpu[k]);
    }
    em_array_release(i0);
    em_array_release(x0);
}
