/*
 * nif_compile.c — NIFs for programs (include/emily_compile.h).
 *
 *   placeholder(dtype, shape)                 a traced input
 *   program_new(placeholders, outputs, options, capture_outer)
 *                                             a program resource; options:
 *                                             the fuse boolean, or a map
 *                                             %{fuse: bool, cuda_graph: bool}
 *   program_run(program, inputs)              the outputs, lazy, as a list
 *   program_stats(program)                    a map of em_program_stats
 *   while_loop(cond, body, state)             the final state, lazy, a list
 *   while_loop_tapped(cond, body, state, ntaps, site)
 *                                             the same, the body giving ntaps
 *                                             more outputs per iteration,
 *                                             sent to a hook channel (see
 *                                             nif_hooks.c)
 *
 * program_run is one NIF call that only builds nodes (microseconds);
 * evaluation stays the caller's choice, as for any op.
 */
#include "emily_device.h"
#include "nif.h"

#include "emily_compile.h"

#include <stdio.h>
#include <string.h>

typedef struct nif_program {
    em_program *program; /* owned reference */
} nif_program;

static ErlNifResourceType *nif_program_type;

static void program_dtor(ErlNifEnv *env, void *obj) {
    nif_program *res = obj;
    em_program_release(res->program);
    res->program = NULL;
}

int nif_compile_open_resources(ErlNifEnv *env) {
    ErlNifResourceFlags flags = ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER;
    nif_program_type = enif_open_resource_type(env, NULL, "emily_program",
                                               program_dtor, flags, NULL);
    return nif_program_type ? 0 : -1;
}

static bool get_program(nif_call *c, ERL_NIF_TERM term, const char *arg,
                        em_program **out) {
    nif_program *res;
    if (!enif_get_resource(c->env, term, nif_program_type, (void **)&res) ||
        !res->program) {
        nif_raise_bad_arg(c, arg, "an Emily program", term);
        return false;
    }
    *out = res->program;
    return true;
}

/* A list of the n new references in arrays (taken over, released on
 * failure). */
static ERL_NIF_TERM make_array_list(nif_call *c, em_array **arrays, size_t n) {
    ERL_NIF_TERM list = enif_make_list(c->env, 0);
    size_t i = n;
    while (i-- > 0) {
        ERL_NIF_TERM t = nif_make_array(c, arrays[i]); /* takes it */
        arrays[i] = NULL;
        if (c->raised) {
            while (i-- > 0)
                em_array_release(arrays[i]);
            return c->raised;
        }
        list = enif_make_list_cell(c->env, t, list);
    }
    return list;
}

NIF_DECL(placeholder) {
    nif_call c = NIF_CALL(env, "placeholder");
    em_dtype dtype;
    int64_t shape[EM_MAX_NDIM];
    int ndim;
    em_array *out;
    int device;
    if (!nif_get_dtype(&c, argv[0], "dtype", &dtype) ||
        !nif_get_i64_list(&c, argv[1], "shape", shape, &ndim) ||
        !nif_get_int(&c, argv[2], "device", &device))
        return c.raised;
    const char *reason = "";
    if (!em_device_available(device, &reason))
        return nif_raise_argument(&c, "device %d: %s", device, reason);
    /* Placeholders take the thread's default device; this scheduler
     * thread's default is restored before the call returns. */
    em_device old = em_set_default_device(device);
    em_status st = em_placeholder(dtype, shape, ndim, &out);
    em_set_default_device(old);
    return nif_result(&c, st, &out);
}

/* A boolean (fuse) or a map with optional :fuse and :cuda_graph booleans. */
static bool get_program_options(nif_call *c, ERL_NIF_TERM term,
                                em_program_options *opts) {
    if (!enif_is_map(c->env, term))
        return nif_get_bool(c, term, "fuse", &opts->fuse);
    const char *names[2] = {"fuse", "cuda_graph"};
    bool *fields[2] = {&opts->fuse, &opts->cuda_graph};
    for (int i = 0; i < 2; i++) {
        ERL_NIF_TERM value;
        if (enif_get_map_value(c->env, term, enif_make_atom(c->env, names[i]),
                               &value) &&
            !nif_get_bool(c, value, names[i], fields[i]))
            return false;
    }
    return true;
}

NIF_DECL(program_new) {
    nif_call c = NIF_CALL(env, "program_new");
    em_array **ins = NULL, **outs = NULL;
    size_t n_in, n_out;
    em_program_options opts = {0};
    if (!nif_get_array_list(&c, argv[0], "placeholders", &ins, &n_in))
        return c.raised;
    if (!nif_get_array_list(&c, argv[1], "outputs", &outs, &n_out) ||
        !get_program_options(&c, argv[2], &opts) ||
        !nif_get_bool(&c, argv[3], "capture_outer", &opts.capture_outer)) {
        enif_free(ins);
        if (outs)
            enif_free(outs);
        return c.raised;
    }
    em_program *prog = NULL;
    em_status st = em_program_new(ins, n_in, outs, n_out, &opts, &prog);
    enif_free(ins);
    enif_free(outs);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    nif_program *res = enif_alloc_resource(nif_program_type, sizeof *res);
    if (!res) {
        em_program_release(prog);
        return nif_raise_runtime(&c, "out of memory allocating a resource");
    }
    res->program = prog;
    ERL_NIF_TERM term = enif_make_resource(env, res);
    enif_release_resource(res);
    return term;
}

NIF_DECL(program_run) {
    nif_call c = NIF_CALL(env, "program_run");
    em_program *prog;
    em_array **ins;
    size_t n_in;
    if (!get_program(&c, argv[0], "program", &prog) ||
        !nif_get_array_list(&c, argv[1], "inputs", &ins, &n_in))
        return c.raised;
    size_t n_out = em_program_num_outputs(prog);
    em_array *small[16];
    em_array **outs =
        n_out <= 16 ? small : enif_alloc(sizeof(em_array *) * n_out);
    if (!outs) {
        enif_free(ins);
        return nif_raise_runtime(&c, "out of memory");
    }
    em_status st = em_program_run(prog, ins, n_in, outs);
    enif_free(ins);
    ERL_NIF_TERM result = st == EM_OK ? make_array_list(&c, outs, n_out)
                                      : nif_raise_status(&c, st);
    if (outs != small)
        enif_free(outs);
    return result;
}

NIF_DECL(program_stats) {
    nif_call c = NIF_CALL(env, "program_stats");
    em_program *prog;
    if (!get_program(&c, argv[0], "program", &prog))
        return c.raised;
    em_program_stats s;
    em_program_get_stats(prog, &s);
    static const char *graph_states[4] = {"off", "pending", "captured",
                                          "fallback"};
    int gs = s.cuda_graph >= 0 && s.cuda_graph < 4 ? s.cuda_graph : 0;
    ERL_NIF_TERM reason;
    size_t reason_len = strlen(s.cuda_graph_reason);
    unsigned char *reason_bytes = enif_make_new_binary(env, reason_len, &reason);
    if (reason_len)
        memcpy(reason_bytes, s.cuda_graph_reason, reason_len);
    ERL_NIF_TERM keys[17] = {
        enif_make_atom(env, "nodes_before"),
        enif_make_atom(env, "nodes_after"),
        enif_make_atom(env, "cse_merged"),
        enif_make_atom(env, "constants"),
        enif_make_atom(env, "constants_merged"),
        enif_make_atom(env, "fused_kernels"),
        enif_make_atom(env, "inputs"),
        enif_make_atom(env, "outputs"),
        enif_make_atom(env, "cuda_graph"),
        enif_make_atom(env, "cuda_graph_nodes"),
        enif_make_atom(env, "cuda_graph_replays"),
        enif_make_atom(env, "cuda_graph_bytes"),
        enif_make_atom(env, "cuda_graph_reason"),
        enif_make_atom(env, "cuda_graph_state_inputs"),
        enif_make_atom(env, "cuda_graph_in_place"),
        enif_make_atom(env, "cuda_graph_bound_inputs"),
        enif_make_atom(env, "cuda_graph_captures"),
    };
    ERL_NIF_TERM values[17] = {
        enif_make_uint64(env, s.nodes_before),
        enif_make_uint64(env, s.nodes_after),
        enif_make_uint64(env, s.cse_merged),
        enif_make_uint64(env, s.constants),
        enif_make_uint64(env, s.constants_merged),
        enif_make_int(env, s.fused_kernels),
        enif_make_uint64(env, em_program_num_inputs(prog)),
        enif_make_uint64(env, em_program_num_outputs(prog)),
        enif_make_atom(env, graph_states[gs]),
        enif_make_int64(env, s.cuda_graph_nodes),
        enif_make_int64(env, s.cuda_graph_replays),
        enif_make_uint64(env, s.cuda_graph_bytes),
        reason,
        enif_make_uint64(env, s.cuda_graph_state_inputs),
        enif_make_int64(env, s.cuda_graph_in_place),
        enif_make_uint64(env, s.cuda_graph_bound_inputs),
        enif_make_int(env, s.cuda_graph_captures),
    };
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, values, 17, &map);
    return map;
}

static ERL_NIF_TERM while_loop(ErlNifEnv *env, const ERL_NIF_TERM argv[],
                               bool tapped) {
    nif_call c = NIF_CALL(env, tapped ? "while_loop_tapped" : "while_loop");
    em_program *cond, *body;
    em_array **state;
    size_t n;
    int64_t ntaps = 0, site = 0;
    if (!get_program(&c, argv[0], "cond", &cond) ||
        !get_program(&c, argv[1], "body", &body) ||
        (tapped && (!nif_get_i64(&c, argv[3], "ntaps", &ntaps) ||
                    !nif_get_i64(&c, argv[4], "site", &site))))
        return c.raised;
    if (ntaps < 0 || site < 0)
        return nif_raise_argument(&c, "ntaps and site must be >= 0");
    if (!nif_get_array_list(&c, argv[2], "state", &state, &n))
        return c.raised;
    em_array **outs = enif_alloc(sizeof(em_array *) * (n ? n : 1));
    if (!outs) {
        enif_free(state);
        return nif_raise_runtime(&c, "out of memory");
    }
    em_status st = em_while_tapped(cond, body, state, n, (size_t)ntaps,
                                   nif_hook_tap, (uint64_t)site, outs);
    enif_free(state);
    ERL_NIF_TERM result =
        st == EM_OK ? make_array_list(&c, outs, n) : nif_raise_status(&c, st);
    enif_free(outs);
    return result;
}

NIF_DECL(while_loop) { return while_loop(env, argv, false); }

NIF_DECL(while_loop_tapped) { return while_loop(env, argv, true); }
