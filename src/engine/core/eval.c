/*
 * eval.c — evaluating a lazy graph.
 *
 * The graph is walked once, without recursion, into topological (post)
 * order; nodes already evaluated are leaves. Each node then runs its
 * primitive and is detached from its inputs, so a buffer is freed as soon
 * as its last consumer has run and no user holds it.
 *
 * Concurrency: several threads (streams) may evaluate graphs that share
 * nodes. A node is claimed with a compare-and-swap PENDING -> RUNNING; a
 * thread that finds a node RUNNING elsewhere waits for it. The walk and the
 * detach both touch `inputs`, so they hold graph_lock; kernels run without
 * any lock.
 */
#include "gpu/gpu_stream.h"
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t node_finished = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
/* Threads blocked in run_node on a node another thread runs: a finished
 * node signals node_finished only when there are any (an eager op pays
 * no lock and no broadcast for nobody). */
static atomic_int waiters;

typedef struct node_list {
    em_array **items;
    size_t len, cap;
} node_list;

static bool list_push(node_list *l, em_array *a) {
    if (l->len == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 64;
        em_array **grown = realloc(l->items, ncap * sizeof *grown);
        if (!grown)
            return false;
        l->items = grown;
        l->cap = ncap;
    }
    l->items[l->len++] = a;
    return true;
}

/* Pointer set for the walk (open addressing; the graph may be large). */
typedef struct node_set {
    em_array **slots;
    size_t cap, len;
} node_set;


/* Returns 1 if inserted, 0 if present, -1 on allocation failure. */
static int set_insert(node_set *s, em_array *a) {
    if ((s->len + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 128;
        em_array **slots = calloc(ncap, sizeof *slots);
        if (!slots)
            return -1;
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i]) {
                size_t j = em__hash_ptr(s->slots[i]) & (ncap - 1);
                while (slots[j])
                    j = (j + 1) & (ncap - 1);
                slots[j] = s->slots[i];
            }
        free(s->slots);
        s->slots = slots;
        s->cap = ncap;
    }
    size_t j = em__hash_ptr(a) & (s->cap - 1);
    while (s->slots[j]) {
        if (s->slots[j] == a)
            return 0;
        j = (j + 1) & (s->cap - 1);
    }
    s->slots[j] = a;
    s->len++;
    return 1;
}

typedef struct walk_frame {
    em_array *node;
    int next_input;
} walk_frame;

/* Post-order of every pending node reachable from roots; each retained. */
static em_status topo_order(em_array *const *roots, size_t n,
                            node_list *order) {
    node_set seen = {0};
    walk_frame *stack = NULL;
    size_t depth = 0, cap = 0;
    em_status st = EM_OK;

    pthread_mutex_lock(&graph_lock);
    for (size_t r = 0; r < n && st == EM_OK; r++) {
        em_array *root = roots[r];
        if (atomic_load(&root->state) == EM_NODE_DONE)
            continue;
        int ins = set_insert(&seen, root);
        if (ins <= 0) {
            if (ins < 0)
                st = em__fail(EM_ERR_OOM,
                              "eval: out of memory walking the graph");
            continue;
        }
        if (depth == cap) {
            cap = cap ? cap * 2 : 64;
            walk_frame *g = realloc(stack, cap * sizeof *g);
            if (!g) {
                st = em__fail(EM_ERR_OOM,
                              "eval: out of memory walking the graph");
                break;
            }
            stack = g;
        }
        stack[depth++] = (walk_frame){root, 0};
        while (depth && st == EM_OK) {
            walk_frame *f = &stack[depth - 1];
            if (f->next_input < f->node->ninputs) {
                em_array *in = f->node->inputs[f->next_input++];
                if (atomic_load(&in->state) == EM_NODE_DONE)
                    continue;
                int added = set_insert(&seen, in);
                if (added < 0)
                    st = em__fail(EM_ERR_OOM,
                                  "eval: out of memory walking the graph");
                if (added <= 0)
                    continue;
                if (depth == cap) {
                    cap *= 2;
                    walk_frame *g = realloc(stack, cap * sizeof *g);
                    if (!g) {
                        st = em__fail(EM_ERR_OOM,
                                      "eval: out of memory walking the graph");
                        break;
                    }
                    stack = g;
                }
                stack[depth++] = (walk_frame){in, 0};
            } else {
                em_array_retain(f->node);
                if (!list_push(order, f->node)) {
                    em_array_release(f->node);
                    st = em__fail(EM_ERR_OOM,
                                  "eval: out of memory walking the graph");
                }
                depth--;
            }
        }
    }
    pthread_mutex_unlock(&graph_lock);
    free(stack);
    free(seen.slots);
    return st;
}

/* Mark done and drop the inputs (outside the lock: releasing may free a
 * whole subgraph). */
static void finish_node(em_array *node) {
    pthread_mutex_lock(&graph_lock);
    em_array **inputs = node->inputs;
    int ninputs = node->ninputs;
    node->inputs = NULL;
    node->ninputs = 0;
    atomic_store(&node->state, EM_NODE_DONE);
    pthread_mutex_unlock(&graph_lock);
    for (int i = 0; i < ninputs; i++)
        em_array_release(inputs[i]);
    free(inputs);
}

/* A waiter counts itself before it looks at the node's state, and the
 * state is stored before this count is read (both sequentially
 * consistent): either we see the waiter, or it sees the new state. */
static void notify_finished(void) {
    if (atomic_load(&waiters) == 0)
        return;
    pthread_mutex_lock(&wait_lock);
    pthread_cond_broadcast(&node_finished);
    pthread_mutex_unlock(&wait_lock);
}

/* Run one node, or wait for the thread that is running it. */
static em_status run_node(em_array *node) {
    for (;;) {
        int expected = EM_NODE_PENDING;
        if (atomic_compare_exchange_strong(&node->state, &expected,
                                           EM_NODE_RUNNING))
            break;
        if (expected == EM_NODE_DONE)
            return EM_OK;
        /* RUNNING on another thread: wait for any node to finish. */
        atomic_fetch_add(&waiters, 1);
        pthread_mutex_lock(&wait_lock);
        while (atomic_load(&node->state) == EM_NODE_RUNNING)
            pthread_cond_wait(&node_finished, &wait_lock);
        pthread_mutex_unlock(&wait_lock);
        atomic_fetch_sub(&waiters, 1);
        /* PENDING again means the other thread failed; try ourselves. */
    }
    /* GPU nodes run their primitive's GPU eval. A graph rewritten after it
     * was built (a pass that swaps in a CPU-only primitive) must fail, not
     * run a CPU kernel on device memory. */
    em_status st;
    if (node->device == EM_DEVICE_CPU)
        st = node->prim->eval(node);
    else if (node->prim->gpu_eval) {
        /* Inputs made (or last used) on another engine stream's CUDA
         * stream are waited for first (gpu_stream.h). */
        st = em__gpu_order_inputs(node);
        if (st == EM_OK)
            st = node->prim->gpu_eval(node);
        if (st == EM_OK)
            st = em__gpu_mark_used(node);
    } else
        st = em__fail(EM_ERR_UNSUPPORTED, "%s: not implemented on the GPU yet",
                      node->prim->name);
    if (st == EM_OK) {
        finish_node(node);
    } else {
        /* Failures are not sticky: the node can be evaluated again (after
         * clear_cache, say). Drop any partial buffer. */
        em__buffer_release(node->buffer);
        node->buffer = NULL;
        atomic_store(&node->state, EM_NODE_PENDING);
    }
    notify_finished();
    return st;
}

em_status em__topo_order(em_array *const *roots, size_t n, em_array ***out,
                         size_t *len) {
    node_list order = {0};
    em_status st = topo_order(roots, n, &order);
    if (st != EM_OK) {
        for (size_t i = 0; i < order.len; i++)
            em_array_release(order.items[i]);
        free(order.items);
        order.items = NULL;
        order.len = 0;
    }
    *out = order.items;
    *len = order.len;
    return st;
}

em_status em__node_inputs(em_array *node, em_array ***out, int *n) {
    *out = NULL;
    *n = -1;
    pthread_mutex_lock(&graph_lock);
    if (atomic_load(&node->state) == EM_NODE_DONE) {
        pthread_mutex_unlock(&graph_lock);
        return EM_OK;
    }
    int count = node->ninputs;
    em_array **copy = malloc(sizeof *copy * (size_t)(count ? count : 1));
    if (copy)
        for (int i = 0; i < count; i++) {
            copy[i] = node->inputs[i];
            em_array_retain(copy[i]);
        }
    pthread_mutex_unlock(&graph_lock);
    if (!copy)
        return em__fail(EM_ERR_OOM, "out of memory copying a node's inputs");
    *out = copy;
    *n = count;
    return EM_OK;
}

/* Whether `node` is pending and all its inputs are evaluated. */
static bool ready_to_run(em_array *node) {
    if (atomic_load(&node->state) == EM_NODE_DONE)
        return false;
    pthread_mutex_lock(&graph_lock);
    bool ready = atomic_load(&node->state) != EM_NODE_DONE;
    for (int i = 0; ready && i < node->ninputs; i++)
        ready = atomic_load(&node->inputs[i]->state) == EM_NODE_DONE;
    pthread_mutex_unlock(&graph_lock);
    return ready;
}

em_status em__eval_arrays(em_array *const *arrays, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!arrays[i])
            return em__fail(EM_ERR_ARGUMENT, "eval: array %zu is NULL", i);
    if (n == 1 && atomic_load(&arrays[0]->state) == EM_NODE_DONE)
        return EM_OK;
    if (n == 1 && ready_to_run(arrays[0])) {
        /* An eager op: one pending node over evaluated inputs needs no
         * walk (no set, stack or order list to allocate). */
        em_array_retain(arrays[0]);
        em_status st = run_node(arrays[0]);
        em_array_release(arrays[0]);
        return st;
    }
    node_list order = {0};
    em_status st = topo_order(arrays, n, &order);
    size_t i = 0;
    for (; i < order.len && st == EM_OK; i++) {
        st = run_node(order.items[i]);
        /* Drop our reference now so that consumers later in the order may
         * donate this node's buffer (donation needs a refcount of 1). */
        em_array_release(order.items[i]);
    }
    for (; i < order.len; i++)
        em_array_release(order.items[i]);
    free(order.items);
    return st;
}

em_status em_eval(em_array *const *arrays, size_t n) {
    return em__eval_arrays(arrays, n);
}
