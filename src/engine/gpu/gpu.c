/*
 * gpu.c — the GPU evals of the primitives that have CUDA kernels.
 *
 * Each eval allocates the node's output on its GPU (em__alloc_output, which
 * may donate an input's device buffer), works out the layout exactly as the
 * CPU eval does (collapsed axes, element strides, broadcast as stride 0) and
 * hands a plain description to the CUDA backend (src/cuda/), which queues
 * the kernel and returns before it runs.
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "ops/params.h"

#include <limits.h>

static em_status backend_of(const em_array *node, const em_cuda_api **api,
                            int *ord) {
    return em__gpu_backend(node->device, api, ord);
}

em_status em__gpu_prepare(em_array *node, const em_cuda_api **api, int *ord) {
    em_status st = backend_of(node, api, ord);
    return st == EM_OK ? em__alloc_output(node, NULL, 0) : st;
}

/* ---- elementwise -------------------------------------------------------- */

/* Queue out = f(inputs) over the index space `shape` (nd axes): the output
 * row-major for that shape, inputs broadcast to it (right-aligned). */
static int ew_launch(const em_cuda_api *api, int ord, int family, int op,
                     void *out, em_dtype out_dtype, int nd,
                     const int64_t *shape, int nin, em_array *const *inputs) {
    int64_t bstrides[EM_CUDA_MAX_IN + 1][EM_MAX_NDIM];
    const int64_t *sin[EM_CUDA_MAX_IN + 1];
    int64_t n = em__row_strides(shape, nd, bstrides[0]);
    if (n == 0)
        return 0;
    sin[0] = bstrides[0];
    for (int k = 0; k < nin; k++) {
        const em_array *in = inputs[k];
        int lead = nd - in->ndim;
        for (int d = 0; d < nd; d++) {
            int j = d - lead;
            bstrides[k + 1][d] =
                (j < 0 || in->shape[j] == 1) ? 0 : in->strides[j];
        }
        sin[k + 1] = bstrides[k + 1];
    }
    em_cuda_ew job;
    memset(&job, 0, sizeof job);
    int64_t cstrides[EM_CUDA_MAX_IN + 1][EM_MAX_NDIM];
    job.ndim = em__collapse(nd, shape, nin + 1, sin, job.shape, cstrides);
    if (job.ndim == 0) {
        job.ndim = 1;
        job.shape[0] = 1;
        for (int k = 0; k <= nin; k++)
            cstrides[k][0] = 1;
    }
    job.family = family;
    job.op = op;
    job.nin = nin;
    job.n = n;
    job.dtype_out = out_dtype;
    job.dtype_in = inputs[nin - 1]->dtype;
    job.dtype_pred = inputs[0]->dtype;
    for (int k = 0; k < nin; k++) {
        job.in[k] = em__data(inputs[k]);
        for (int d = 0; d < job.ndim; d++)
            job.strides[k][d] = cstrides[k + 1][d];
    }
    job.out = out;
    return api->elementwise(ord, &job);
}

static em_status ew_run(em_array *node, int family, int op) {
    const em_cuda_api *api;
    int ord;
    em_status st = backend_of(node, &api, &ord);
    if (st == EM_OK)
        st = em__alloc_output(node, node->inputs, node->ninputs);
    if (st != EM_OK || node->size == 0)
        return st;
    int rc = ew_launch(api, ord, family, op, em__data(node), node->dtype,
                       node->ndim, node->shape, node->ninputs, node->inputs);
    return rc ? em__gpu_fail(api, rc, node->prim->name) : EM_OK;
}

em_status em__gpu_unary_eval(em_array *node) {
    return ew_run(node, EM_CUDA_UNARY, *(const int *)node->params);
}

em_status em__gpu_binary_eval(em_array *node) {
    return ew_run(node, EM_CUDA_BINARY, *(const int *)node->params);
}

em_status em__gpu_select_eval(em_array *node) {
    return ew_run(node, EM_CUDA_SELECT, 0);
}

em_status em__gpu_clip_eval(em_array *node) {
    return ew_run(node, EM_CUDA_CLIP, 0);
}

/* as_type, contiguous and copying reshapes. A reshape's input has another
 * shape: iterating over the input's shape writes its elements in row-major
 * order, which is the reshaped array's row-major layout too. */
em_status em__gpu_cast_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = backend_of(node, &api, &ord);
    if (st == EM_OK)
        st = em__alloc_output(node, node->inputs, 1);
    if (st != EM_OK || node->size == 0)
        return st;
    em_array *in = node->inputs[0];
    int rc = ew_launch(api, ord, EM_CUDA_CAST, 0, em__data(node), node->dtype,
                       in->ndim, in->shape, 1, &in);
    return rc ? em__gpu_fail(api, rc, node->prim->name) : EM_OK;
}

/* ---- creation ----------------------------------------------------------- */

em_status em__gpu_iota_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const iota_params *p = node->params;
    int rc = api->iota(ord, node->dtype, em__data(node), node->size,
                       node->shape[p->axis], node->strides[p->axis]);
    return rc ? em__gpu_fail(api, rc, "iota") : EM_OK;
}

/* ---- reductions --------------------------------------------------------- */

static em_status reduce_run(em_array *node, unsigned mask, int op, int is_arg,
                            bool tie_high) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_array *in = node->inputs[0];
    em_cuda_reduce job;
    memset(&job, 0, sizeof job);
    int64_t oshape[EM_MAX_NDIM], ostride_in[EM_MAX_NDIM],
        ostride_out[EM_MAX_NDIM], rshape[EM_MAX_NDIM], rstride[EM_MAX_NDIM];
    int no, nr;
    int64_t rn =
        em__split_axes(in, mask, oshape, ostride_in, &no, rshape, rstride, &nr);
    job.nout = em__row_strides(oshape, no, ostride_out);
    const int64_t *ostrides[2] = {ostride_in, ostride_out};
    int64_t collapsed[2][EM_MAX_NDIM];
    job.ko = em__collapse(no, oshape, 2, ostrides, job.oshape, collapsed);
    memcpy(job.ostride, collapsed[0], sizeof job.ostride);
    /* Collapsing keeps the reduced axes' row-major order, so a position in
     * the collapsed space is the flat index argmax reports. */
    const int64_t *rstrides[1] = {rstride};
    int64_t rcollapsed[1][EM_MAX_NDIM];
    job.kr =
        rn ? em__collapse(nr, rshape, 1, rstrides, job.rshape, rcollapsed) : 0;
    memcpy(job.rstride, rcollapsed[0], sizeof job.rstride);
    job.rn = rn;
    job.op = op;
    job.is_arg = is_arg;
    job.tie_high = tie_high;
    job.dtype_in = in->dtype;
    job.dtype_out = node->dtype;
    job.in = em__data(in);
    job.out = em__data(node);
    int rc = api->reduce(ord, &job);
    return rc ? em__gpu_fail(api, rc, node->prim->name) : EM_OK;
}

em_status em__gpu_reduce_eval(em_array *node) {
    const reduce_params *p = node->params;
    return reduce_run(node, p->mask, (int)p->op, 0, false);
}

em_status em__gpu_argreduce_eval(em_array *node) {
    const argreduce_params *p = node->params;
    return reduce_run(node, p->mask, (int)p->op, 1, p->tie_high);
}

/* ---- dot ---------------------------------------------------------------- */

/* One operand as [batch, rows, cols]: read in place by cuBLAS when its
 * matrix is row- or column-major with one batch stride, else packed
 * row-major into a temporary buffer by the copy kernel. */
typedef struct gemm_operand {
    const void *data;
    int64_t rows, cols, ld, batch_stride;
    int trans;
    em_buffer *packed; /* owned temporary, or NULL */
} gemm_operand;

static em_status gemm_operand_make(const em_cuda_api *api, int ord, em_array *x,
                                   const dot_params *p, bool is_a,
                                   gemm_operand *g) {
    int nb = p->nbatch;
    const int *batch = is_a ? p->batch_a : p->batch_b;
    int nr = is_a ? p->nm : p->nk, nc = is_a ? p->nk : p->nn;
    const int *rows = is_a ? p->m_axes : p->k_b;
    const int *cols = is_a ? p->k_a : p->n_axes;
    int64_t shape[3 * EM_MAX_NDIM], stride[3 * EM_MAX_NDIM];
    int d = 0;
    int64_t nbatch = 1;
    g->rows = g->cols = 1;
    g->packed = NULL;
    for (int i = 0; i < nb; i++, d++) {
        shape[d] = p->batch_shape[i];
        stride[d] = batch[i] < 0 ? 0 : x->strides[batch[i]];
        nbatch *= shape[d];
    }
    for (int i = 0; i < nr; i++, d++) {
        shape[d] = x->shape[rows[i]];
        stride[d] = x->strides[rows[i]];
        g->rows *= shape[d];
    }
    for (int i = 0; i < nc; i++, d++) {
        shape[d] = x->shape[cols[i]];
        stride[d] = x->strides[cols[i]];
        g->cols *= shape[d];
    }
    int64_t sb = 0, sr = 0, sc = 0;
    bool fits = em__group_stride(shape, stride, nb, &sb) &&
                em__group_stride(shape + nb, stride + nb, nr, &sr) &&
                em__group_stride(shape + nb + nr, stride + nb + nr, nc, &sc);
    int64_t r = g->rows, c = g->cols;
    if (fits && (c == 1 || sc == 1) && (r == 1 || sr >= c)) {
        g->trans = 0;
        g->ld = r == 1 ? c : sr;
    } else if (fits && (r == 1 || sr == 1) && (c == 1 || sc >= r)) {
        g->trans = 1;
        g->ld = c == 1 ? r : sc;
    } else {
        fits = false;
    }
    if (fits && g->ld >= 1 && g->ld <= INT_MAX) {
        g->data = em__data(x);
        g->batch_stride = nbatch > 1 ? sb : 0;
        return EM_OK;
    }
    /* Pack: drop size-1 axes, collapse [batch..., rows..., cols...] against
     * its row-major layout, then one strided copy. */
    int64_t out_strides[3 * EM_MAX_NDIM];
    int64_t total = em__row_strides(shape, d, out_strides);
    int64_t kshape[EM_MAX_NDIM], kin[EM_MAX_NDIM], kout[EM_MAX_NDIM];
    int kept = 0;
    for (int i = 0; i < d; i++) {
        if (shape[i] == 1)
            continue;
        if (kept == EM_MAX_NDIM)
            return em__fail(EM_ERR_UNSUPPORTED,
                            "dot: an operand with more than %d non-unit "
                            "batch/free/contracted axes is not supported on "
                            "the GPU",
                            EM_MAX_NDIM);
        kshape[kept] = shape[i];
        kin[kept] = stride[i];
        kout[kept++] = out_strides[i];
    }
    const int64_t *both[2] = {kin, kout};
    em_cuda_ew job;
    memset(&job, 0, sizeof job);
    int64_t cstr[2][EM_MAX_NDIM];
    int64_t cshape[EM_MAX_NDIM];
    int cn = em__collapse(kept, kshape, 2, both, cshape, cstr);
    em_status st = em__buffer_new_on(
        x->device, (size_t)total * em_dtype_size(x->dtype), &g->packed);
    if (st != EM_OK)
        return st;
    job.family = EM_CUDA_CAST;
    job.nin = 1;
    job.dtype_in = job.dtype_out = job.dtype_pred = x->dtype;
    job.n = total;
    job.ndim = cn ? cn : 1;
    for (int i = 0; i < cn; i++) {
        job.shape[i] = cshape[i];
        job.strides[0][i] = cstr[0][i];
    }
    if (cn == 0) {
        job.shape[0] = 1;
        job.strides[0][0] = 1;
    }
    job.in[0] = em__data(x);
    job.out = g->packed->data;
    int rc = total ? api->elementwise(ord, &job) : 0;
    if (rc)
        return em__gpu_fail(api, rc, "dot (packing an operand)");
    g->data = g->packed->data;
    g->trans = 0;
    g->ld = c;
    g->batch_stride = nbatch > 1 ? r * c : 0;
    return EM_OK;
}

em_status em__gpu_dot_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const dot_params *p = node->params;
    gemm_operand ga, gb;
    memset(&ga, 0, sizeof ga);
    memset(&gb, 0, sizeof gb);
    st = gemm_operand_make(api, ord, node->inputs[0], p, true, &ga);
    if (st == EM_OK)
        st = gemm_operand_make(api, ord, node->inputs[1], p, false, &gb);
    if (st == EM_OK) {
        em_cuda_gemm job;
        memset(&job, 0, sizeof job);
        job.dtype = node->dtype;
        job.batch = 1;
        for (int i = 0; i < p->nbatch; i++)
            job.batch *= p->batch_shape[i];
        job.m = ga.rows;
        job.k = ga.cols;
        job.n = gb.cols;
        job.a = ga.data;
        job.b = gb.data;
        job.c = em__data(node);
        job.trans_a = ga.trans;
        job.trans_b = gb.trans;
        job.lda = ga.ld;
        job.ldb = gb.ld;
        job.stride_a = ga.batch_stride;
        job.stride_b = gb.batch_stride;
        int rc = api->gemm(ord, &job);
        if (rc)
            st = em__gpu_fail(api, rc, node->prim->name);
    }
    /* Released after the GEMM is queued: the one stream per device orders
     * any reuse of these blocks after it. */
    em__buffer_release(ga.packed);
    em__buffer_release(gb.packed);
    return st;
}

/* ---- random ------------------------------------------------------------- */

em_status em__gpu_random_bits_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_array *key = node->inputs[0];
    /* The same counter layout as the CPU (random.c). */
    int64_t m = node->dtype == EM_U64 ? 2 * node->size : node->size;
    int64_t half = (m + 1) / 2;
    int64_t count = node->dtype == EM_U64 ? node->size : half;
    int rc = api->random_bits(ord, em__data(key), key->strides[0],
                              em__data(node), node->dtype, m, half, count);
    return rc ? em__gpu_fail(api, rc, "random_bits") : EM_OK;
}

em_status em__gpu_threefry_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_array *key = node->inputs[0];
    int rc = api->threefry_pairs(ord, em__data(key), key->strides[0],
                                 em__data(node->inputs[1]), em__data(node),
                                 node->size / 2);
    return rc ? em__gpu_fail(api, rc, "threefry2x32") : EM_OK;
}

/* ---- indexed reads ------------------------------------------------------ */

static em_status gather_run(em_array *node, em_cuda_gather *job) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_array *a = node->inputs[0], *idx = node->inputs[1];
    job->dtype_index = idx->dtype;
    job->elem_size = (int)em_dtype_size(a->dtype);
    job->ndim = node->ndim;
    job->n = node->size;
    for (int d = 0; d < node->ndim; d++)
        job->shape[d] = node->shape[d];
    job->a = em__data(a);
    job->indices = em__data(idx);
    job->out = em__data(node);
    int rc = api->gather(ord, job);
    return rc ? em__gpu_fail(api, rc, node->prim->name) : EM_OK;
}

/* Output [index rows..., a's other axes...]; row r's k entries address
 * a's axes p->axes. */
em_status em__gpu_gather_eval(em_array *node) {
    const gather_params *p = node->params;
    const em_array *a = node->inputs[0], *idx = node->inputs[1];
    em_cuda_gather job;
    memset(&job, 0, sizeof job);
    unsigned mask = 0;
    job.k = p->naxes;
    for (int j = 0; j < p->naxes; j++) {
        mask |= 1u << p->axes[j];
        job.axis_stride[j] = a->strides[p->axes[j]];
        job.axis_dim[j] = a->shape[p->axes[j]];
    }
    job.entry_stride = idx->strides[idx->ndim - 1];
    int d = 0;
    for (int i = 0; i < idx->ndim - 1; i++, d++)
        job.i_stride[d] = idx->strides[i];
    for (int i = 0; i < a->ndim; i++)
        if (!(mask & (1u << i)))
            job.a_stride[d++] = a->strides[i];
    return gather_run(node, &job);
}

/* Output [a before axis..., indices..., a after axis...]. */
em_status em__gpu_take_eval(em_array *node) {
    int axis = ((const axis_params *)node->params)->axis;
    const em_array *a = node->inputs[0], *idx = node->inputs[1];
    em_cuda_gather job;
    memset(&job, 0, sizeof job);
    job.k = 1;
    job.axis_stride[0] = a->strides[axis];
    job.axis_dim[0] = a->shape[axis];
    int d = 0;
    for (int i = 0; i < axis; i++)
        job.a_stride[d++] = a->strides[i];
    for (int i = 0; i < idx->ndim; i++)
        job.i_stride[d++] = idx->strides[i];
    for (int i = axis + 1; i < a->ndim; i++)
        job.a_stride[d++] = a->strides[i];
    return gather_run(node, &job);
}

/* a and the indices both read broadcast to the output's shape; the indexed
 * axis of a contributes through the index only. */
em_status em__gpu_take_along_eval(em_array *node) {
    int axis = ((const axis_params *)node->params)->axis;
    const em_array *a = node->inputs[0], *idx = node->inputs[1];
    em_cuda_gather job;
    memset(&job, 0, sizeof job);
    job.k = 1;
    job.axis_stride[0] = a->strides[axis];
    job.axis_dim[0] = a->shape[axis];
    for (int i = 0; i < node->ndim; i++) {
        job.i_stride[i] = idx->shape[i] == node->shape[i] ? idx->strides[i] : 0;
        job.a_stride[i] =
            i == axis || a->shape[i] != node->shape[i] ? 0 : a->strides[i];
    }
    return gather_run(node, &job);
}

/* ---- scans -------------------------------------------------------------- */

em_status em__gpu_scan_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const scan_params *p = node->params;
    const em_array *in = node->inputs[0];
    em_cuda_scan job;
    memset(&job, 0, sizeof job);
    job.op = p->op;
    job.dtype = node->dtype;
    job.n = node->shape[p->axis];
    job.nlanes = node->size / job.n;
    for (int i = 0; i < node->ndim; i++) {
        if (i == p->axis)
            continue;
        job.lane_shape[job.nlane_dims] = node->shape[i];
        job.lane_in[job.nlane_dims] = in->strides[i];
        job.lane_out[job.nlane_dims++] = node->strides[i];
    }
    int64_t sa = in->strides[p->axis], oa = node->strides[p->axis];
    const char *src = em__data(in);
    char *dst = em__data(node);
    size_t es = em_dtype_size(node->dtype);
    if (p->reverse) { /* walk from the last element with negated steps */
        src += (job.n - 1) * sa * (int64_t)es;
        dst += (job.n - 1) * oa * (int64_t)es;
        sa = -sa;
        oa = -oa;
    }
    job.step_in = sa;
    job.step_out = oa;
    job.in = src;
    job.out = dst;
    int rc = api->scan(ord, &job);
    return rc ? em__gpu_fail(api, rc, "scan") : EM_OK;
}

/* ---- sort / argsort ----------------------------------------------------- */

/* Rows laid out as sort.c's eval does: the sorted axis apart, the other
 * axes unravelled per row; the output is row-major. */
em_status em__gpu_sort_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    const em_array *in = node->inputs[0];
    if (st != EM_OK || in->size == 0)
        return st;
    const sort_params *p = node->params;
    em_cuda_sort job;
    memset(&job, 0, sizeof job);
    job.dtype = in->dtype;
    job.out_dtype = node->dtype;
    job.indices = p->indices;
    job.descending = p->descending;
    job.rows = 1;
    for (int d = 0; d < in->ndim; d++) {
        if (d == p->axis)
            continue;
        job.oshape[job.nouter] = in->shape[d];
        job.istride[job.nouter] = in->strides[d];
        job.ostride[job.nouter++] = node->strides[d];
        job.rows *= in->shape[d];
    }
    job.n = in->shape[p->axis];
    job.in_axis_stride = in->strides[p->axis];
    job.out_axis_stride = node->strides[p->axis];
    job.in = em__data(in);
    job.out = em__data(node);
    int rc = api->sort(ord, &job);
    return rc ? em__gpu_fail(api, rc, p->indices ? "argsort" : "sort") : EM_OK;
}
