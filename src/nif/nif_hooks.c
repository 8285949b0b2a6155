/*
 * nif_hooks.c — hook channels: how a loop running on a stream's worker
 * hands values to the Elixir process that ran its program, once per
 * iteration (Nx hooks inside `while`, such as a generation loop's streamed
 * tokens).
 *
 *   hook_channel_open()        {channel, id}: a resource, and the integer the
 *                              program receives (as an s64 scalar input)
 *   hook_channel_close(channel) stop delivering (also done on GC)
 *
 * A program is compiled once and run by any process, so the destination
 * cannot be part of the loop: each run opens a channel and passes its id to
 * the program as an ordinary input, and a tapped loop (em_while_tapped)
 * gives that id back as its first tap. nif_hook_tap, the loop's callback,
 * reads it, finds the channel and sends `{:emily_hook, id, site, taps}` to
 * the channel's process, `taps` being new tensor references (the id, unique
 * in the VM's life, is what the receiver matches on). An id whose
 * channel is closed (the run ended or raised) drops the values. Messages
 * sent by one worker thread arrive in order, before the `{ref, result}` of
 * the evaluation that ran the loop.
 */
#include "nif.h"

#include "emily_compile.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct hook_channel {
    uint64_t id;
    ErlNifPid pid;
    struct hook_channel *next;
} hook_channel;

typedef struct nif_hook_channel {
    uint64_t id; /* 0 once closed */
} nif_hook_channel;

static ErlNifResourceType *nif_channel_type;
static pthread_mutex_t channels_lock = PTHREAD_MUTEX_INITIALIZER;
static hook_channel *channels;
static atomic_uint_fast64_t last_id;

/* Unlinks and frees channel `id` (absent: nothing). */
static void unregister(uint64_t id) {
    pthread_mutex_lock(&channels_lock);
    for (hook_channel **p = &channels; *p; p = &(*p)->next) {
        if ((*p)->id == id) {
            hook_channel *gone = *p;
            *p = gone->next;
            enif_free(gone);
            break;
        }
    }
    pthread_mutex_unlock(&channels_lock);
}

static void channel_dtor(ErlNifEnv *env, void *obj) {
    nif_hook_channel *res = obj;
    if (res->id)
        unregister(res->id);
    res->id = 0;
}

int nif_hooks_open_resources(ErlNifEnv *env) {
    ErlNifResourceFlags flags = ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER;
    nif_channel_type = enif_open_resource_type(
        env, NULL, "emily_hook_channel", channel_dtor, flags, NULL);
    return nif_channel_type ? 0 : -1;
}

NIF_DECL(hook_channel_open) {
    nif_call c = NIF_CALL(env, "hook_channel_open");
    hook_channel *ch = enif_alloc(sizeof *ch);
    nif_hook_channel *res =
        enif_alloc_resource(nif_channel_type, sizeof *res);
    if (!ch || !res || !enif_self(env, &ch->pid)) {
        if (ch)
            enif_free(ch);
        if (res)
            enif_release_resource(res);
        return nif_raise_runtime(&c, "cannot open a hook channel here");
    }
    ch->id = atomic_fetch_add(&last_id, 1) + 1;
    res->id = ch->id;
    pthread_mutex_lock(&channels_lock);
    ch->next = channels;
    channels = ch;
    pthread_mutex_unlock(&channels_lock);
    ERL_NIF_TERM term = enif_make_resource(env, res);
    enif_release_resource(res);
    return enif_make_tuple2(env, term, enif_make_uint64(env, ch->id));
}

NIF_DECL(hook_channel_close) {
    nif_call c = NIF_CALL(env, "hook_channel_close");
    nif_hook_channel *res;
    if (!enif_get_resource(env, argv[0], nif_channel_type, (void **)&res))
        return nif_raise_bad_arg(&c, "channel", "a hook channel", argv[0]);
    if (res->id)
        unregister(res->id);
    res->id = 0;
    return atoms.ok;
}

/* A resource term owning a new reference to `a` in `env`, or 0 when out of
 * memory. */
static ERL_NIF_TERM tap_term(ErlNifEnv *env, em_array *a) {
    nif_array *res = enif_alloc_resource(nif_array_type, sizeof *res);
    if (!res)
        return 0;
    em_array_retain(a);
    res->array = a;
    ERL_NIF_TERM term = enif_make_resource(env, res);
    enif_release_resource(res);
    return term;
}

void nif_hook_tap(uint64_t site, em_array *const *taps, size_t ntaps) {
    int64_t id = 0;
    if (ntaps == 0 || em_array_size(taps[0]) != 1 ||
        em_array_dtype(taps[0]) != EM_S64 ||
        em_read(taps[0], &id, sizeof id) != EM_OK || id <= 0)
        return; /* not a channel id: nobody to tell */
    ErlNifEnv *env = enif_alloc_env();
    if (!env)
        return;
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (size_t i = ntaps; i-- > 1;) {
        ERL_NIF_TERM t = tap_term(env, taps[i]);
        if (!t) {
            enif_free_env(env); /* the resources made so far go with it */
            return;
        }
        list = enif_make_list_cell(env, t, list);
    }
    pthread_mutex_lock(&channels_lock);
    hook_channel *ch = channels;
    while (ch && ch->id != (uint64_t)id)
        ch = ch->next;
    if (ch) {
        ERL_NIF_TERM msg = enif_make_tuple4(
            env, enif_make_atom(env, "emily_hook"),
            enif_make_uint64(env, (uint64_t)id), enif_make_uint64(env, site),
            list);
        /* A dead process is fine: the message is dropped. */
        enif_send(NULL, &ch->pid, env, msg);
    }
    pthread_mutex_unlock(&channels_lock);
    enif_free_env(env);
}
