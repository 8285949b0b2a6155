/*
 * fusion.c — the compiler's fusion pass (em__fuse_tape, tape.h).
 *
 * Grouping. The tape is walked from its last node back. An elementwise
 * node (unary, binary, select, clip, as_type) or a reduction over trailing
 * axes (sum, product, max, min) not yet in a group starts a group as its
 * root; the nodes it reads are then visited in decreasing tape order and
 * join when
 *   - they are elementwise ops, or reductions over the group's row axes
 *     that keep those axes (only the root may drop them),
 *   - every consumer of theirs is already in the group and they are not
 *     tape outputs (anything read from outside must be materialised, so it
 *     is left to root a group of its own),
 *   - their shape is the group's wide shape W or, when rows fit registers,
 *     W with its row axes 1 (a per-row value such as a softmax max).
 * Because consumers come after their inputs in the tape, a node's consumers
 * are all decided when it is visited. Groups of one node are left alone.
 * External inputs of any shape that broadcasts, any strides (views stay
 * outside and are read through their strides), are loads.
 *
 * GPU groups (all members on the root's GPU) follow the same rules, except
 * that rows of any length are kept whole (the fused GPU kernel walks a row
 * with one block, gpu_fusion.c) and a kernel reads at most
 * FZ_GPU_MAX_LOADS inputs.
 *
 * Rewrite. The root node becomes the fused node in place (prim "fused",
 * inputs = the group's external inputs, params = the program; tape nodes
 * are private templates, so this is allowed), and its consumers and the
 * tape outputs need no remapping; the other members are dropped from the
 * tape. The program's modes (tiles, rows, chunks) are described in
 * fusion.h.
 */
#include "fusion.h"
#include "tape.h"

#include "ops/elementwise_internal.h"

#include <stdlib.h>

/* Members of one group at most (each adds an instruction and a few loads). */
#define FZ_MAX_MEMBERS 40

/* What a tape node is to the pass. */
typedef struct fz_node {
    uint8_t kind;   /* FZ_EW, FZ_REDUCE, or 0xff: not fusable */
    uint8_t family; /* FZ_EW */
    uint8_t kdtype;
    uint8_t nred; /* FZ_REDUCE: how many trailing axes it reduces */
    int32_t op;
} fz_node;
#define FZ_NOT_FUSABLE 0xff

static fz_node fz_classify(const em_array *a) {
    fz_node f = {FZ_NOT_FUSABLE, 0, 0, 0, 0};
    int op;
    em_dtype kd;
    if (!a->prim || atomic_load(&((em_array *)a)->state) != EM_NODE_PENDING)
        return f;
    /* GPU nodes fuse when the CUDA backend is there to compile the fused
     * kernel (gpu_fusion.c). */
    if (a->device != EM_DEVICE_CPU && !em_device_available(a->device, NULL))
        return f;
    struct {
        bool (*of)(const em_array *, int *, em_dtype *);
        enum fz_family family;
    } const families[] = {
        {em__unary_op_of, FZ_UNARY},     {em__binary_op_of, FZ_BINARY},
        {em__select_op_of, FZ_SELECT},   {em__clip_op_of, FZ_CLIP},
        {em__as_type_op_of, FZ_AS_TYPE},
    };
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (families[i].of(a, &op, &kd)) {
            f.kind = FZ_EW;
            f.family = (uint8_t)families[i].family;
            f.kdtype = (uint8_t)kd;
            f.op = op;
            return f;
        }
    em_reduce_op rop;
    unsigned mask;
    if (em__reduce_op_of(a, &rop, &mask) && a->ninputs == 1 &&
        (rop == EM_REDUCE_sum || rop == EM_REDUCE_product ||
         rop == EM_REDUCE_max || rop == EM_REDUCE_min)) {
        /* The reduced axes must be the trailing ones: each output is then
         * one contiguous run of W. */
        const em_array *in = a->inputs[0];
        int k = __builtin_popcount(mask);
        unsigned all = (1u << in->ndim) - 1;
        if (k >= 1 && mask == (all & ~((1u << (in->ndim - k)) - 1))) {
            f.kind = FZ_REDUCE;
            f.nred = (uint8_t)k;
            f.kdtype = (uint8_t)in->dtype;
            f.op = (int32_t)rop;
        }
    }
    return f;
}

static bool fz_same_shape(const em_array *a, const int64_t *shape, int nd) {
    return a->ndim == nd &&
           memcmp(a->shape, shape, sizeof(int64_t) * (size_t)nd) == 0;
}

/* ---- the pass's working state -------------------------------------------- */

typedef struct fz_pass {
    em__tape *tape;
    size_t n;
    fz_node *info;
    bool *is_output;
    /* Consumers of node i: cons[cons_at[i] .. cons_at[i + 1]). */
    size_t *cons_at, *cons;
    long *group;  /* root index of i's group, -1 for none */
    long *wanted; /* root index of the group that reads i (a candidate) */
    /* (pointer, index) pairs sorted by pointer, to find a node's index. */
    struct fz_ptr_index {
        const em_array *ptr;
        size_t idx;
    } * index;
} fz_pass;

static int fz_cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const struct fz_ptr_index *)a)->ptr;
    uintptr_t y = (uintptr_t)((const struct fz_ptr_index *)b)->ptr;
    return x < y ? -1 : x > y;
}

/* The tape index of `a`, or -1 when it is not a tape node. */
static long fz_index_of(const fz_pass *ps, const em_array *a) {
    struct fz_ptr_index key = {a, 0};
    const struct fz_ptr_index *hit =
        bsearch(&key, ps->index, ps->n, sizeof key, fz_cmp_ptr);
    return hit ? (long)hit->idx : -1;
}

static void fz_pass_free(fz_pass *ps) {
    free(ps->info);
    free(ps->is_output);
    free(ps->cons_at);
    free(ps->cons);
    free(ps->group);
    free(ps->wanted);
    free(ps->index);
}

static em_status fz_pass_init(fz_pass *ps, em__tape *tape) {
    memset(ps, 0, sizeof *ps);
    size_t n = tape->len;
    ps->tape = tape;
    ps->n = n;
    ps->info = malloc(sizeof *ps->info * n);
    ps->is_output = calloc(n, sizeof *ps->is_output);
    ps->cons_at = calloc(n + 1, sizeof *ps->cons_at);
    ps->group = malloc(sizeof *ps->group * n);
    ps->wanted = malloc(sizeof *ps->wanted * n);
    ps->index = malloc(sizeof *ps->index * n);
    if (!ps->info || !ps->is_output || !ps->cons_at || !ps->group ||
        !ps->wanted || !ps->index)
        return em__fail(EM_ERR_OOM, "fuse: out of memory");
    for (size_t i = 0; i < n; i++) {
        ps->index[i].ptr = tape->nodes[i];
        ps->index[i].idx = i;
        ps->info[i] = fz_classify(tape->nodes[i]);
        ps->group[i] = -1;
        ps->wanted[i] = -1;
    }
    qsort(ps->index, n, sizeof *ps->index, fz_cmp_ptr);
    for (size_t o = 0; o < tape->noutputs; o++) {
        long i = fz_index_of(ps, tape->outputs[o]);
        if (i >= 0)
            ps->is_output[i] = true;
    }
    /* Consumer lists (counting sort by input). */
    size_t edges = 0;
    for (size_t c = 0; c < n; c++)
        for (int k = 0; k < tape->nodes[c]->ninputs; k++) {
            long i = fz_index_of(ps, tape->nodes[c]->inputs[k]);
            if (i >= 0) {
                ps->cons_at[i + 1]++;
                edges++;
            }
        }
    for (size_t i = 0; i < n; i++)
        ps->cons_at[i + 1] += ps->cons_at[i];
    ps->cons = malloc(sizeof *ps->cons * (edges ? edges : 1));
    size_t *fill = malloc(sizeof *fill * (n ? n : 1));
    if (!ps->cons || !fill) {
        free(fill);
        return em__fail(EM_ERR_OOM, "fuse: out of memory");
    }
    memcpy(fill, ps->cons_at, sizeof *fill * n);
    for (size_t c = 0; c < n; c++)
        for (int k = 0; k < tape->nodes[c]->ninputs; k++) {
            long i = fz_index_of(ps, tape->nodes[c]->inputs[k]);
            if (i >= 0)
                ps->cons[fill[i]++] = c;
        }
    free(fill);
    return EM_OK;
}

/* ---- grouping -------------------------------------------------------- */

typedef struct fz_group {
    long root;
    int nd;
    int64_t wide[EM_MAX_NDIM];   /* W */
    int64_t narrow[EM_MAX_NDIM]; /* W with its nred trailing axes 1 */
    int nred;                    /* axes that make a row (row mode) */
    bool rows_ok;                /* per-row members allowed */
    bool chunked;                /* a reduction root over long rows */
    size_t members[FZ_MAX_MEMBERS];
    bool member_narrow[FZ_MAX_MEMBERS];
    int nmembers;
} fz_group;

/* The wide shape W of a group rooted at `root` and its row (the nred
 * trailing axes a reduction folds): a reduction root's input shape and
 * axes. An elementwise root searches the elementwise nodes it reads
 * (breadth first, a bounded number) for a reduction that keeps its axes:
 * if that reduction reads the root's shape, W is the root's shape (the
 * root is wide, like a softmax); if it gives the root's shape, W is the
 * reduction's input (the root is per-row, like a variance). Without one,
 * W is the root's shape and a row its last axis. */
static void fz_wide_shape(const fz_pass *ps, size_t root, fz_group *g) {
    const em_array *r = ps->tape->nodes[root];
    const em_array *src = r;
    g->nred = 1;
    if (ps->info[root].kind == FZ_REDUCE) {
        src = r->inputs[0];
        g->nred = ps->info[root].nred;
    } else {
        const em_array *queue[FZ_MAX_MEMBERS];
        int head = 0, tail = 0;
        bool found = false;
        queue[tail++] = r;
        while (head < tail && !found) {
            const em_array *a = queue[head++];
            long i = fz_index_of(ps, a);
            if (i < 0)
                continue;
            if (ps->info[i].kind == FZ_REDUCE) {
                const em_array *in = a->inputs[0];
                if (a->ndim != in->ndim)
                    continue;
                if (fz_same_shape(in, r->shape, r->ndim) ||
                    fz_same_shape(a, r->shape, r->ndim)) {
                    src = in;
                    g->nred = ps->info[i].nred;
                    found = true;
                }
                continue;
            }
            if (ps->info[i].kind != FZ_EW)
                continue;
            for (int k = 0; k < a->ninputs && tail < FZ_MAX_MEMBERS; k++)
                queue[tail++] = a->inputs[k];
        }
    }
    g->nd = src->ndim;
    memcpy(g->wide, src->shape, sizeof(int64_t) * (size_t)src->ndim);
    memcpy(g->narrow, src->shape, sizeof(int64_t) * (size_t)src->ndim);
    g->rows_ok = g->chunked = false;
    if (g->nd >= g->nred) {
        int64_t len = 1; /* no overflow: shapes were validated */
        for (int d = g->nd - g->nred; d < g->nd; d++) {
            len *= g->wide[d];
            g->narrow[d] = 1;
        }
        /* The GPU kernel walks rows of any length (one block per row). */
        bool gpu = r->device != EM_DEVICE_CPU;
        g->rows_ok = gpu || (len >= FZ_MIN_ROW && len <= FZ_MAX_ROW);
        g->chunked =
            !gpu && ps->info[root].kind == FZ_REDUCE && len > FZ_MAX_ROW;
    }
}

/* Whether tape node i may join g (as a wide or a narrow member). */
static bool fz_can_join(const fz_pass *ps, const fz_group *g, size_t i,
                        bool is_root, bool *narrow) {
    const em_array *a = ps->tape->nodes[i];
    const fz_node *f = &ps->info[i];
    if (f->kind == FZ_NOT_FUSABLE || ps->group[i] >= 0 ||
        a->device != ps->tape->nodes[g->root]->device)
        return false;
    if (!is_root) {
        if (ps->is_output[i])
            return false;
        for (size_t c = ps->cons_at[i]; c < ps->cons_at[i + 1]; c++)
            if (ps->group[ps->cons[c]] != g->root)
                return false;
    }
    if (f->kind == FZ_REDUCE) {
        if (!(g->rows_ok || (g->chunked && is_root)) || f->nred != g->nred ||
            !fz_same_shape(a->inputs[0], g->wide, g->nd))
            return false;
        *narrow = true;
        /* Dropping the axes only works for the root: a consumer would
         * broadcast the result against the wrong axes. */
        return fz_same_shape(a, g->narrow, g->nd) ||
               (is_root && fz_same_shape(a, g->narrow, g->nd - g->nred));
    }
    if (fz_same_shape(a, g->wide, g->nd)) {
        *narrow = false;
        return true;
    }
    *narrow = true;
    return g->rows_ok && fz_same_shape(a, g->narrow, g->nd);
}

static void fz_want_inputs(fz_pass *ps, const fz_group *g, size_t i,
                           long *lowest) {
    const em_array *a = ps->tape->nodes[i];
    for (int k = 0; k < a->ninputs; k++) {
        long j = fz_index_of(ps, a->inputs[k]);
        if (j >= 0) {
            ps->wanted[j] = g->root;
            if (j < *lowest)
                *lowest = j;
        }
    }
}

/* Collect the group rooted at `root` (members in increasing tape order). */
static void fz_collect(fz_pass *ps, size_t root, fz_group *g) {
    g->root = (long)root;
    g->nmembers = 0;
    fz_wide_shape(ps, root, g);
    bool narrow;
    if (!fz_can_join(ps, g, root, true, &narrow))
        return;
    size_t picked[FZ_MAX_MEMBERS];
    bool picked_narrow[FZ_MAX_MEMBERS];
    int count = 0;
    picked[count] = root;
    picked_narrow[count++] = narrow;
    ps->group[root] = g->root;
    long lowest = (long)root;
    fz_want_inputs(ps, g, root, &lowest);
    for (long j = (long)root - 1; j >= lowest && count < FZ_MAX_MEMBERS; j--) {
        if (ps->wanted[j] != g->root ||
            !fz_can_join(ps, g, (size_t)j, false, &narrow))
            continue;
        ps->group[j] = g->root;
        picked[count] = (size_t)j;
        picked_narrow[count++] = narrow;
        fz_want_inputs(ps, g, (size_t)j, &lowest);
    }
    for (int m = 0; m < count; m++) { /* reverse: increasing tape order */
        g->members[m] = picked[count - 1 - m];
        g->member_narrow[m] = picked_narrow[count - 1 - m];
    }
    g->nmembers = count;
}

/* ---- program building ------------------------------------------------ */

typedef struct fz_builder {
    /* Instructions; until registers are assigned, a source names the
     * instruction whose value it reads. */
    fz_instr instr[FZ_MAX_INSTR];
    int ninstr;
    em_array *ext[FZ_MAX_INSTR]; /* external inputs, in first-use order */
    int next;
    /* Loads made so far: (external index, narrow) -> instruction. */
    int load_ext[FZ_MAX_INSTR];
    bool load_narrow[FZ_MAX_INSTR];
    int load_instr[FZ_MAX_INSTR];
    int nloads;
} fz_builder;

/* The instruction that loads external array `a` at the given width. */
static int fz_load(fz_builder *b, em_array *a, bool narrow) {
    int e = 0;
    while (e < b->next && b->ext[e] != a)
        e++;
    for (int l = 0; l < b->nloads; l++)
        if (b->load_ext[l] == e && b->load_narrow[l] == narrow)
            return b->load_instr[l];
    if (b->ninstr >= FZ_MAX_INSTR)
        return -1;
    if (e == b->next)
        b->ext[b->next++] = a;
    fz_instr *in = &b->instr[b->ninstr];
    memset(in, 0, sizeof *in);
    in->kind = FZ_LOAD;
    in->dtype = (uint8_t)a->dtype;
    in->kdtype = (uint8_t)a->dtype;
    in->narrow = narrow;
    in->invariant = a->size == 1;
    in->op = e;
    b->load_ext[b->nloads] = e;
    b->load_narrow[b->nloads] = narrow;
    b->load_instr[b->nloads++] = b->ninstr;
    return b->ninstr++;
}

/* Give every value a register: a register is reused once its value's last
 * reader has run; an instruction never writes a register it reads. The
 * last instruction writes the output. False when more than FZ_MAX_REGS are
 * needed. */
static bool fz_assign_registers(fz_builder *b, int *nregs_out) {
    int last_use[FZ_MAX_INSTR], reg[FZ_MAX_INSTR], free_regs[FZ_MAX_REGS];
    int nfree = 0, nregs = 0;
    for (int k = 0; k < b->ninstr; k++)
        last_use[k] = k;
    for (int k = 0; k < b->ninstr; k++)
        for (int j = 0; j < b->instr[k].nsrc; j++)
            last_use[b->instr[k].src[j]] = k;
    for (int k = 0; k < b->ninstr; k++) {
        fz_instr *in = &b->instr[k];
        if (k == b->ninstr - 1) {
            reg[k] = -1;
        } else if (nfree > 0 && !in->invariant) {
            reg[k] = free_regs[--nfree];
        } else {
            if (nregs == FZ_MAX_REGS)
                return false;
            reg[k] = nregs++;
        }
        for (int j = 0; j < in->nsrc; j++) {
            int v = in->src[j];
            in->src[j] = (int16_t)reg[v];
            bool repeated = false;
            for (int i = 0; i < j; i++)
                repeated = repeated || b->instr[k].src[i] == reg[v];
            /* An invariant load keeps its register: later tiles reuse it. */
            if (last_use[v] == k && !repeated && !b->instr[v].invariant)
                free_regs[nfree++] = reg[v];
        }
        in->dst = (int16_t)reg[k];
    }
    *nregs_out = nregs;
    return true;
}

/* Build the program of g; false when it does not fit the limits. */
static bool fz_build(const fz_pass *ps, const fz_group *g, fz_builder *b,
                     fz_program *head) {
    memset(b, 0, sizeof *b);
    int value_of[FZ_MAX_MEMBERS];
    bool row_mode = false;
    for (int m = 0; m < g->nmembers; m++)
        row_mode = row_mode || g->member_narrow[m];
    for (int m = 0; m < g->nmembers; m++) {
        em_array *a = ps->tape->nodes[g->members[m]];
        const fz_node *f = &ps->info[g->members[m]];
        bool narrow = g->member_narrow[m];
        fz_instr tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.kind = f->kind;
        tmp.family = f->family;
        tmp.dtype = (uint8_t)a->dtype;
        tmp.kdtype = f->kdtype;
        tmp.narrow = narrow;
        tmp.op = f->op;
        tmp.nsrc = (uint8_t)a->ninputs;
        if (a->ninputs > FZ_MAX_SRC)
            return false;
        for (int k = 0; k < a->ninputs; k++) {
            em_array *in = a->inputs[k];
            int src = -1;
            bool src_narrow = false;
            for (int q = 0; q < m; q++)
                if (ps->tape->nodes[g->members[q]] == in) {
                    src = value_of[q];
                    src_narrow = g->member_narrow[q];
                }
            if (src < 0) {
                /* Loads take the reader's width; a reduction reads a row. */
                src_narrow = narrow && f->kind != FZ_REDUCE;
                src = fz_load(b, in, src_narrow);
                if (src < 0)
                    return false;
            }
            tmp.src[k] = (int16_t)src;
            if (src_narrow)
                tmp.src_narrow |= (uint8_t)(1u << k);
        }
        if (b->ninstr >= FZ_MAX_INSTR)
            return false;
        value_of[m] = b->ninstr;
        b->instr[b->ninstr++] = tmp;
    }
    int nregs;
    if (!fz_assign_registers(b, &nregs))
        return false;
    if (ps->tape->nodes[g->root]->device != EM_DEVICE_CPU &&
        b->nloads > FZ_GPU_MAX_LOADS)
        return false;
    memset(head, 0, sizeof *head);
    head->ninstr = b->ninstr;
    head->nregs = nregs;
    head->mode = g->chunked ? FZ_MODE_CHUNKS
                 : row_mode ? FZ_MODE_ROWS
                            : FZ_MODE_TILES;
    head->nred = head->mode == FZ_MODE_TILES ? 0 : g->nred;
    head->ndim = g->nd;
    memcpy(head->shape, g->wide, sizeof(int64_t) * (size_t)g->nd);
    int esize = 1;
    for (int k = 0; k < b->ninstr; k++) {
        int e = (int)em_dtype_size((em_dtype)b->instr[k].dtype);
        int ek = (int)em_dtype_size((em_dtype)b->instr[k].kdtype);
        esize = e > esize ? e : esize;
        esize = ek > esize ? ek : esize;
    }
    head->reg_esize = esize;
    return true;
}

/* Turn the root into the fused node: new prim, params and inputs. */
static em_status fz_rewrite_root(em_array *root, const fz_builder *b,
                                 const fz_program *head) {
    size_t size = fz_program_size(b->ninstr);
    fz_program *p = calloc(1, size);
    em_array **inputs =
        malloc(sizeof *inputs * (size_t)(b->next ? b->next : 1));
    if (!p || !inputs) {
        free(p);
        free(inputs);
        return em__fail(EM_ERR_OOM, "fuse: out of memory");
    }
    memcpy(p, head, sizeof *head);
    memcpy(p->instr, b->instr, sizeof(fz_instr) * (size_t)b->ninstr);
    for (int e = 0; e < b->next; e++) {
        em_array_retain(b->ext[e]);
        inputs[e] = b->ext[e];
    }
    for (int k = 0; k < root->ninputs; k++)
        em_array_release(root->inputs[k]);
    free(root->inputs);
    root->inputs = inputs;
    root->ninputs = b->next;
    free(root->params);
    root->params = p;
    root->params_size = size;
    root->prim = &em__fused_prim;
    return EM_OK;
}

em_status em__fuse_tape(em__tape *tape, int *fused_kernels_out) {
    if (fused_kernels_out)
        *fused_kernels_out = 0;
    if (!tape)
        return em__fail(EM_ERR_ARGUMENT, "fuse: tape is NULL");
    if (tape->len < 2)
        return EM_OK;
    fz_pass ps;
    em_status st = fz_pass_init(&ps, tape);
    fz_group *g = malloc(sizeof *g);
    fz_builder *b = malloc(sizeof *b);
    bool *drop = calloc(tape->len, sizeof *drop);
    if (st == EM_OK && (!g || !b || !drop))
        st = em__fail(EM_ERR_OOM, "fuse: out of memory");
    int fused = 0;
    for (size_t r = tape->len; st == EM_OK && r-- > 0;) {
        if (ps.group[r] >= 0 || ps.info[r].kind == FZ_NOT_FUSABLE)
            continue;
        fz_collect(&ps, r, g);
        fz_program head;
        if (g->nmembers < 2 || !fz_build(&ps, g, b, &head)) {
            /* Not worth it or too big: leave the nodes as they are. */
            for (int m = 0; m < g->nmembers; m++)
                ps.group[g->members[m]] = -1;
            ps.group[r] = -2; /* never a root again */
            continue;
        }
        st = fz_rewrite_root(tape->nodes[r], b, &head);
        if (st != EM_OK)
            break;
        for (int m = 0; m < g->nmembers; m++)
            if (g->members[m] != r)
                drop[g->members[m]] = true;
        fused++;
    }
    if (st == EM_OK) {
        size_t w = 0;
        for (size_t i = 0; i < tape->len; i++) {
            if (drop[i])
                em_array_release(tape->nodes[i]);
            else
                tape->nodes[w++] = tape->nodes[i];
        }
        tape->len = w;
        if (fused_kernels_out)
            *fused_kernels_out = fused;
    }
    free(drop);
    free(b);
    free(g);
    fz_pass_free(&ps);
    return st;
}
