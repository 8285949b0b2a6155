/*
 * program_opt.c — the tape's simplification passes: common subexpression
 * elimination, merging of duplicate constants, dead node elimination; and
 * the pointer map they share with the program builder.
 *
 * Every pass rewrites the private tape in place (see tape.h): consumers of
 * a merged node are pointed at the node that stays, then the tape is
 * compacted. Nodes are visited in topological order, so by the time a node
 * is looked at, its inputs are already final.
 */
#include "tape.h"

#include <stdlib.h>

/* ---- shared rewriting helpers ------------------------------------------- */

/* FNV-1a over bytes, folded into h. */
static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Replace `*slot` by `to` (retaining it, releasing the old reference). */
static void rewire(em_array **slot, em_array *to) {
    if (*slot == to)
        return;
    em_array_retain(to);
    em_array_release(*slot);
    *slot = to;
}

/* Point every node input and output that `replaced` maps to a new array
 * (an index into `by`) at that array. */
static void rewire_all(em__tape *t, const em__ptr_map *replaced,
                       em_array *const *by) {
    size_t k;
    for (size_t i = 0; i < t->len; i++) {
        em_array *n = t->nodes[i];
        for (int j = 0; j < n->ninputs; j++)
            if (em__ptr_map_get(replaced, n->inputs[j], &k))
                rewire(&n->inputs[j], by[k]);
    }
    for (size_t i = 0; i < t->noutputs; i++)
        if (em__ptr_map_get(replaced, t->outputs[i], &k))
            rewire(&t->outputs[i], by[k]);
}

/* Drop (release) the nodes whose keep[i] is false, keeping the order. */
static void compact(em__tape *t, const bool *keep) {
    size_t w = 0;
    for (size_t i = 0; i < t->len; i++) {
        if (keep[i])
            t->nodes[w++] = t->nodes[i];
        else
            em_array_release(t->nodes[i]);
    }
    t->len = w;
}

/* Open-addressed table of candidate indices by hash (index + 1; 0 empty). */
typedef struct hash_index {
    size_t *slots;
    uint64_t *hashes;
    size_t cap;
} hash_index;

static bool hash_index_init(hash_index *h, size_t n) {
    size_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    h->slots = calloc(cap, sizeof *h->slots);
    h->hashes = calloc(cap, sizeof *h->hashes);
    h->cap = cap;
    return h->slots && h->hashes;
}

static void hash_index_free(hash_index *h) {
    free(h->slots);
    free(h->hashes);
}

/* Finds an entry with `hash` for which same(ctx, index) holds; else adds
 * `index` under `hash` and returns SIZE_MAX. The table never fills: it was
 * sized for every index that may be added. */
static size_t hash_index_find_or_add(hash_index *h, uint64_t hash, size_t index,
                                     bool (*same)(void *ctx, size_t other),
                                     void *ctx) {
    size_t j = (size_t)hash & (h->cap - 1);
    while (h->slots[j]) {
        if (h->hashes[j] == hash && same(ctx, h->slots[j] - 1))
            return h->slots[j] - 1;
        j = (j + 1) & (h->cap - 1);
    }
    h->slots[j] = index + 1;
    h->hashes[j] = hash;
    return SIZE_MAX;
}

/* ---- common subexpressions ---------------------------------------------- */

static uint64_t node_hash(const em_array *n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    h = hash_bytes(h, &n->prim, sizeof n->prim);
    h = hash_bytes(h, &n->dtype, sizeof n->dtype);
    h = hash_bytes(h, &n->ndim, sizeof n->ndim);
    h = hash_bytes(h, n->shape, sizeof(int64_t) * (size_t)n->ndim);
    h = hash_bytes(h, n->strides, sizeof(int64_t) * (size_t)n->ndim);
    h = hash_bytes(h, &n->offset, sizeof n->offset);
    h = hash_bytes(h, n->inputs, sizeof(em_array *) * (size_t)n->ninputs);
    if (n->params)
        h = hash_bytes(h, n->params, n->params_size);
    return h;
}

static bool same_node(const em_array *a, const em_array *b) {
    size_t nd = (size_t)a->ndim;
    return a->prim == b->prim && a->device == b->device &&
           a->dtype == b->dtype && a->ndim == b->ndim &&
           a->offset == b->offset && a->row_contiguous == b->row_contiguous &&
           a->ninputs == b->ninputs && a->params_size == b->params_size &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * nd) &&
           !memcmp(a->strides, b->strides, sizeof(int64_t) * nd) &&
           !memcmp(a->inputs, b->inputs,
                   sizeof(em_array *) * (size_t)a->ninputs) &&
           (a->params_size == 0 ||
            !memcmp(a->params, b->params, a->params_size));
}

typedef struct cse_ctx {
    em__tape *tape;
    size_t index;
} cse_ctx;

static bool cse_same(void *ctx, size_t other) {
    cse_ctx *c = ctx;
    return same_node(c->tape->nodes[c->index], c->tape->nodes[other]);
}

em_status em__tape_cse(em__tape *t, size_t *merged_out) {
    *merged_out = 0;
    if (t->len == 0)
        return EM_OK;
    hash_index index;
    em__ptr_map replaced = {0};
    bool *keep = malloc(t->len * sizeof *keep);
    em_status st = EM_OK;
    if (!hash_index_init(&index, t->len) || !keep) {
        st = em__fail(EM_ERR_OOM, "program: out of memory in CSE");
        goto done;
    }
    size_t merged = 0;
    for (size_t i = 0; i < t->len; i++) {
        em_array *n = t->nodes[i];
        size_t k;
        /* Inputs come earlier in the order: point them at the survivors
         * first, so that equal subtrees compare equal by pointer. */
        for (int j = 0; j < n->ninputs; j++)
            if (em__ptr_map_get(&replaced, n->inputs[j], &k))
                rewire(&n->inputs[j], t->nodes[k]);
        cse_ctx ctx = {t, i};
        size_t first =
            hash_index_find_or_add(&index, node_hash(n), i, cse_same, &ctx);
        keep[i] = first == SIZE_MAX;
        if (!keep[i]) {
            if (!em__ptr_map_put(&replaced, n, first)) {
                st = em__fail(EM_ERR_OOM, "program: out of memory in CSE");
                goto done;
            }
            merged++;
        }
    }
    size_t k;
    for (size_t i = 0; i < t->noutputs; i++)
        if (em__ptr_map_get(&replaced, t->outputs[i], &k))
            rewire(&t->outputs[i], t->nodes[k]);
    compact(t, keep);
    *merged_out = merged;
done:
    free(keep);
    hash_index_free(&index);
    em__ptr_map_free(&replaced);
    return st;
}

/* ---- duplicate constants ------------------------------------------------ */

#define DEDUP_MAX_BYTES ((size_t)64 << 10)

/* CPU constants only: their bytes are compared and hashed in place. */
static bool dedup_eligible(const em_array *c) {
    return em__tape_is_constant(c) && c->device == EM_DEVICE_CPU &&
           c->row_contiguous && c->offset == 0 &&
           em_array_nbytes(c) <= DEDUP_MAX_BYTES;
}

static bool same_constant(const em_array *a, const em_array *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) &&
           !memcmp(em__data(a), em__data(b), em_array_nbytes(a));
}

typedef struct dedup_ctx {
    em_array **list;
    size_t index;
} dedup_ctx;

static bool dedup_same(void *ctx, size_t other) {
    dedup_ctx *c = ctx;
    return same_constant(c->list[c->index], c->list[other]);
}

/* The distinct eligible constants the tape refers to, in first-use order. */
static em_status collect_constants(em__tape *t, em_array ***out, size_t *n) {
    em__ptr_map seen = {0};
    size_t cap = 16, len = 0;
    em_array **list = malloc(cap * sizeof *list);
    if (!list)
        return em__fail(EM_ERR_OOM, "program: out of memory");
    for (size_t i = 0; i <= t->len; i++) {
        em_array **refs = i < t->len ? t->nodes[i]->inputs : t->outputs;
        size_t nrefs = i < t->len ? (size_t)t->nodes[i]->ninputs : t->noutputs;
        for (size_t j = 0; j < nrefs; j++) {
            em_array *c = refs[j];
            size_t dummy;
            if (!dedup_eligible(c) || em__ptr_map_get(&seen, c, &dummy))
                continue;
            if (len == cap) {
                em_array **grown = realloc(list, cap * 2 * sizeof *list);
                if (!grown)
                    goto oom;
                list = grown;
                cap *= 2;
            }
            if (!em__ptr_map_put(&seen, c, len))
                goto oom;
            list[len++] = c;
        }
    }
    em__ptr_map_free(&seen);
    *out = list;
    *n = len;
    return EM_OK;
oom:
    em__ptr_map_free(&seen);
    free(list);
    return em__fail(EM_ERR_OOM, "program: out of memory");
}

em_status em__tape_dedup_constants(em__tape *t, size_t *merged_out) {
    *merged_out = 0;
    em_array **list = NULL;
    size_t n = 0;
    em_status st = collect_constants(t, &list, &n);
    if (st != EM_OK)
        return st;
    hash_index index = {0};
    em__ptr_map replaced = {0};
    if (!hash_index_init(&index, n)) {
        st = em__fail(EM_ERR_OOM, "program: out of memory");
        goto done;
    }
    size_t merged = 0;
    for (size_t i = 0; i < n; i++) {
        em_array *c = list[i];
        uint64_t h = 0xcbf29ce484222325ULL;
        h = hash_bytes(h, &c->dtype, sizeof c->dtype);
        h = hash_bytes(h, c->shape, sizeof(int64_t) * (size_t)c->ndim);
        h = hash_bytes(h, em__data(c), em_array_nbytes(c));
        dedup_ctx ctx = {list, i};
        size_t first = hash_index_find_or_add(&index, h, i, dedup_same, &ctx);
        if (first != SIZE_MAX) {
            if (!em__ptr_map_put(&replaced, c, first)) {
                st = em__fail(EM_ERR_OOM, "program: out of memory");
                goto done;
            }
            merged++;
        }
    }
    if (merged)
        rewire_all(t, &replaced, list);
    *merged_out = merged;
done:
    hash_index_free(&index);
    em__ptr_map_free(&replaced);
    free(list);
    return st;
}

/* ---- dead nodes --------------------------------------------------------- */

em_status em__tape_dce(em__tape *t) {
    if (t->len == 0)
        return EM_OK;
    em__ptr_map where = {0};
    bool *live = calloc(t->len, sizeof *live);
    em_status st = EM_OK;
    if (!live) {
        st = em__fail(EM_ERR_OOM, "program: out of memory in DCE");
        goto done;
    }
    for (size_t i = 0; i < t->len; i++)
        if (!em__ptr_map_put(&where, t->nodes[i], i)) {
            st = em__fail(EM_ERR_OOM, "program: out of memory in DCE");
            goto done;
        }
    size_t k;
    for (size_t i = 0; i < t->noutputs; i++)
        if (em__ptr_map_get(&where, t->outputs[i], &k))
            live[k] = true;
    /* Consumers come after their inputs: one backward sweep marks all. */
    for (size_t i = t->len; i-- > 0;) {
        if (!live[i])
            continue;
        em_array *n = t->nodes[i];
        for (int j = 0; j < n->ninputs; j++)
            if (em__ptr_map_get(&where, n->inputs[j], &k))
                live[k] = true;
    }
    compact(t, live);
done:
    free(live);
    em__ptr_map_free(&where);
    return st;
}
