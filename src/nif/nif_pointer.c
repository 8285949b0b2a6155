/*
 * nif_pointer.c — releasing a tensor's engine reference early
 * (backend_deallocate) and raw pointers to a tensor's bytes (to_pointer /
 * from_pointer).
 *
 * A raw address coming back from Elixir can be anything: an integer typed
 * by hand, a pointer into memory freed since, a pointer from another VM.
 * Reading it blindly would crash the VM. So to_pointer records every
 * address it hands out in a registry, with a retained reference to the
 * (pinned, never again written) array that owns the bytes, and from_pointer
 * copies only from a range inside a live entry (whose array it retains
 * under the registry's lock for the time of the copy).
 * An entry lives as long as the tensor it was made from: the tensor's
 * resource destructor, or backend_deallocate, removes it.
 *
 * Deallocation clears the resource's array pointer atomically; later uses
 * of the tensor raise ArgumentError (nif_get_array). A call that read the
 * pointer on another scheduler an instant before may still be using it, so
 * the array goes to a graveyard and is released only when no NIF call is
 * running (every NIF body runs between nif_enter and nif_leave, which count
 * the calls in flight): a call that starts later cannot reach it.
 */
#include "nif.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

/* ---- the registry of handed-out pointers -------------------------------- */

typedef struct pointer_entry {
    struct pointer_entry *next;
    const nif_array *owner; /* the tensor's resource (not retained) */
    em_array *pinned;       /* retained: keeps the bytes alive */
    uintptr_t start;
    size_t size;
} pointer_entry;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pointer_entry *registry;
/* Read without the lock by the destructor of every array resource, so
 * that the common case (no pointer ever handed out) costs one load. */
static size_t registry_count;

void nif_pointer_forget(const nif_array *owner) {
    if (__atomic_load_n(&registry_count, __ATOMIC_ACQUIRE) == 0)
        return;
    pointer_entry *dropped = NULL;
    pthread_mutex_lock(&registry_lock);
    for (pointer_entry **p = &registry; *p;) {
        pointer_entry *e = *p;
        if (e->owner == owner) {
            *p = e->next;
            e->next = dropped;
            dropped = e;
            __atomic_sub_fetch(&registry_count, 1, __ATOMIC_RELEASE);
        } else {
            p = &e->next;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    /* Released outside the lock: freeing a buffer may take a while. */
    while (dropped) {
        pointer_entry *next = dropped->next;
        em_array_release(dropped->pinned);
        enif_free(dropped);
        dropped = next;
    }
}

/* ---- calls in flight and the graveyard ---------------------------------- */

typedef struct grave {
    struct grave *next;
    em_array *array;
} grave;

static atomic_long calls_in_flight;
static atomic_long graves_waiting; /* lets nif_leave skip the lock */
static pthread_mutex_t graveyard_lock = PTHREAD_MUTEX_INITIALIZER;
static grave *graveyard;

void nif_enter(void) { atomic_fetch_add(&calls_in_flight, 1); }

void nif_leave(void) {
    if (atomic_fetch_sub(&calls_in_flight, 1) != 1 ||
        atomic_load(&graves_waiting) == 0)
        return;
    /* Checked again under the lock that bury() takes: when no call is in
     * flight now, every buried array was unreachable before this moment
     * (its pointer was cleared before it was buried), and no call that
     * read it is left. */
    grave *dead = NULL;
    pthread_mutex_lock(&graveyard_lock);
    if (atomic_load(&calls_in_flight) == 0) {
        dead = graveyard;
        graveyard = NULL;
        atomic_store(&graves_waiting, 0);
    }
    pthread_mutex_unlock(&graveyard_lock);
    while (dead) {
        grave *next = dead->next;
        em_array_release(dead->array);
        enif_free(dead);
        dead = next;
    }
}

/* Release `a` once no NIF call that might hold it is running. */
static void bury(em_array *a) {
    grave *g = enif_alloc(sizeof *g);
    if (!g)
        return; /* cannot defer safely: keep the array (a leak, not a crash) */
    g->array = a;
    pthread_mutex_lock(&graveyard_lock);
    g->next = graveyard;
    graveyard = g;
    atomic_fetch_add(&graves_waiting, 1);
    pthread_mutex_unlock(&graveyard_lock);
}

/* ---- deallocation --------------------------------------------------------- */

static bool get_resource(nif_call *c, ERL_NIF_TERM term, nif_array **out) {
    if (enif_get_resource(c->env, term, nif_array_type, (void **)out))
        return true;
    nif_raise_bad_arg(c, "tensor", "an Emily array reference", term);
    return false;
}

NIF_DECL(deallocate) {
    nif_call c = NIF_CALL(env, "backend_deallocate");
    nif_array *res;
    if (!get_resource(&c, argv[0], &res))
        return c.raised;
    em_array *a = __atomic_exchange_n(&res->array, NULL, __ATOMIC_ACQ_REL);
    if (!a)
        return enif_make_atom(env, "already_deallocated");
    nif_pointer_forget(res);
    bury(a); /* released when this call leaves, if it is the only one */
    return atoms.ok;
}

NIF_DECL(is_deallocated) {
    nif_call c = NIF_CALL(env, "is_deallocated");
    nif_array *res;
    if (!get_resource(&c, argv[0], &res))
        return c.raised;
    return __atomic_load_n(&res->array, __ATOMIC_ACQUIRE) ? atoms.no
                                                          : atoms.yes;
}

/* ---- to_pointer ------------------------------------------------------------ */

/* to_pointer(owner, contiguous): `contiguous` is the evaluated row-major
 * form of `owner` (the same array when it already was). Answers
 * {address, byte_size}; the first pair again for a tensor already asked
 * (a strided one gets a fresh `contiguous` copy on every call). */
NIF_DECL(to_pointer) {
    nif_call c = NIF_CALL(env, "to_pointer");
    nif_array *owner;
    em_array *a;
    if (!get_resource(&c, argv[0], &owner) ||
        !nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_array(&c, argv[1], "contiguous", &a))
        return c.raised;
    const void *data;
    size_t nbytes;
    em_status st = em_array_data(a, &data, &nbytes);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    if (nbytes == 0)
        return nif_raise_argument(
            &c, "the tensor has no bytes (an empty tensor has no pointer)");

    pointer_entry *fresh = enif_alloc(sizeof *fresh);
    if (!fresh)
        return nif_raise_runtime(&c, "out of memory");
    uintptr_t start = (uintptr_t)data;
    bool known = false;
    pthread_mutex_lock(&registry_lock);
    for (pointer_entry *e = registry; e && !known; e = e->next)
        if (e->owner == owner) {
            known = true;
            start = e->start;
            nbytes = e->size;
        }
    if (!known) {
        em_array_retain(a);
        *fresh = (pointer_entry){.next = registry,
                                 .owner = owner,
                                 .pinned = a,
                                 .start = start,
                                 .size = nbytes};
        registry = fresh;
        __atomic_add_fetch(&registry_count, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&registry_lock);
    if (known)
        enif_free(fresh);
    return enif_make_tuple2(env, enif_make_uint64(env, (ErlNifUInt64)start),
                            enif_make_uint64(env, (ErlNifUInt64)nbytes));
}

/* ---- from_pointer -------------------------------------------------------- */

static ERL_NIF_TERM from_pointer_dirty(ErlNifEnv *env, int argc,
                                       const ERL_NIF_TERM argv[]);

static ERL_NIF_TERM from_pointer(ErlNifEnv *env, const ERL_NIF_TERM argv[],
                                 bool dirty) {
    nif_call c = NIF_CALL(env, "from_pointer");
    ErlNifUInt64 address;
    int64_t shape[EM_MAX_NDIM];
    int ndim;
    em_dtype dtype;
    if (!enif_get_uint64(env, argv[0], &address))
        return nif_raise_bad_arg(&c, "address", "a non-negative integer",
                                 argv[0]);
    if (!nif_get_i64_list(&c, argv[1], "shape", shape, &ndim) ||
        !nif_get_dtype(&c, argv[2], "type", &dtype))
        return c.raised;

    /* Bytes needed, with overflow checks; a zero dimension needs none. */
    uint64_t needed = em_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return nif_raise_argument(&c, "negative dimension %" PRId64,
                                      shape[i]);
        if (shape[i] != 0 && needed > UINT64_MAX / (uint64_t)shape[i])
            return nif_raise_argument(&c, "the shape needs more than 2^64 "
                                          "bytes");
        needed *= (uint64_t)shape[i];
    }
    if (!dirty && needed > DIRTY_COPY_BYTES)
        return enif_schedule_nif(env, "from_pointer",
                                 ERL_NIF_DIRTY_JOB_CPU_BOUND,
                                 from_pointer_dirty, 3, argv);

    /* The entry's array is retained under the lock, so its bytes stay
     * alive (and unwritten) while they are copied outside it: a large
     * copy does not hold up other pointers or tensor destructors. */
    em_array *source = NULL;
    pthread_mutex_lock(&registry_lock);
    for (pointer_entry *e = registry; e && !source; e = e->next) {
        if (address < e->start || address - e->start >= e->size)
            continue;
        if (needed > e->size - (address - e->start))
            continue; /* the read would run past this range's end */
        source = e->pinned;
        em_array_retain(source);
    }
    pthread_mutex_unlock(&registry_lock);
    if (!source)
        return nif_raise_argument(
            &c,
            "address 0x%" PRIx64 " with %" PRIu64
            " bytes is not inside a pointer that to_pointer/2 handed out in "
            "this VM and whose tensor is still alive",
            (uint64_t)address, needed);
    em_array *out;
    em_status st = em_from_data((const void *)(uintptr_t)address,
                                (size_t)needed, shape, ndim, dtype, &out);
    em_array_release(source);
    return nif_result(&c, st, &out);
}

NIF_DECL(from_pointer) { return from_pointer(env, argv, false); }

static ERL_NIF_TERM from_pointer_dirty(ErlNifEnv *env, int argc,
                                       const ERL_NIF_TERM argv[]) {
    /* A dirty continuation is a NIF call of its own. */
    nif_enter();
    ERL_NIF_TERM result = from_pointer(env, argv, true);
    nif_leave();
    return result;
}

/* ---- copy ----------------------------------------------------------------- */

/* copy(tensor): a new evaluated array with a copy of the bytes of an
 * evaluated row-major one (backend_copy: a buffer of its own, which
 * deallocating the original does not touch). */
static ERL_NIF_TERM copy_dirty(ErlNifEnv *env, int argc,
                               const ERL_NIF_TERM argv[]);

static ERL_NIF_TERM copy(ErlNifEnv *env, const ERL_NIF_TERM argv[],
                         bool dirty) {
    nif_call c = NIF_CALL(env, "backend_copy");
    em_array *a;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    if (!dirty && em_array_nbytes(a) > DIRTY_COPY_BYTES)
        return enif_schedule_nif(env, "copy", ERL_NIF_DIRTY_JOB_CPU_BOUND,
                                 copy_dirty, 1, argv);
    const void *data;
    size_t nbytes;
    em_status st = em_array_data(a, &data, &nbytes);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    em_array *out;
    st = em_from_data(data, nbytes, em_array_shape(a), em_array_ndim(a),
                      em_array_dtype(a), &out);
    return nif_result(&c, st, &out);
}

NIF_DECL(copy) { return copy(env, argv, false); }

static ERL_NIF_TERM copy_dirty(ErlNifEnv *env, int argc,
                               const ERL_NIF_TERM argv[]) {
    /* A dirty continuation is a NIF call of its own. */
    nif_enter();
    ERL_NIF_TERM result = copy(env, argv, true);
    nif_leave();
    return result;
}
