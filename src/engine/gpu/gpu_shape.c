/*
 * gpu_shape.c — the GPU evals of the shape ops that assemble or cut arrays:
 * pad, concatenate, put_slice, dynamic_slice, dynamic_put_slice (eye's is
 * in creation.c, next to the CPU one), and the scatters that update an
 * array in place the same way: indexed_add, indexed_put.
 *
 * Each is the CPU eval's sequence of strided copies (pad.c, join.c,
 * dynamic_slice.c) with the copies queued on the GPU by the backend's one
 * copy kernel (by element size, so every dtype). The dynamic slices' starts
 * stay on the device: the kernel reads and clamps them, so an eval never
 * waits for the GPU.
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "ops/params.h"

/* Starts read on the device: entry i of `starts` clamped into [0, hi[i]]
 * and multiplied by mul[i], added to the src (side 1) or dst (side 2). */
typedef struct gpu_starts {
    const em_array *starts;
    int side;
    int64_t hi[EM_MAX_NDIM], mul[EM_MAX_NDIM];
} gpu_starts;

static em_status gpu_copy(em_device device, void *dst,
                          const int64_t *dst_strides, const void *src,
                          const int64_t *src_strides, const int64_t *shape,
                          int ndim, size_t elem_size, const gpu_starts *dyn) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(device, &api, &ord);
    if (st != EM_OK)
        return st;
    int64_t row[EM_MAX_NDIM];
    int64_t n = em__row_strides(shape, ndim, row);
    if (n == 0)
        return EM_OK;
    const int64_t *both[2] = {src_strides, dst_strides ? dst_strides : row};
    int64_t cstrides[2][EM_MAX_NDIM];
    em_cuda_copy job;
    memset(&job, 0, sizeof job);
    job.ndim = em__collapse(ndim, shape, 2, both, job.shape, cstrides);
    if (job.ndim == 0) {
        job.ndim = 1;
        job.shape[0] = 1;
        cstrides[0][0] = cstrides[1][0] = 0;
    }
    for (int d = 0; d < job.ndim; d++) {
        job.src_stride[d] = cstrides[0][d];
        job.dst_stride[d] = cstrides[1][d];
    }
    job.elem_size = (int)elem_size;
    job.n = n;
    job.src = src;
    job.dst = dst;
    if (dyn) {
        job.starts = em__data(dyn->starts);
        job.dtype_starts = dyn->starts->dtype;
        job.starts_stride = dyn->starts->strides[0];
        job.starts_side = dyn->side;
        job.nstarts = (int)dyn->starts->shape[0];
        memcpy(job.start_hi, dyn->hi, sizeof job.start_hi);
        memcpy(job.start_mul, dyn->mul, sizeof job.start_mul);
    }
    int rc = api->copy(ord, &job);
    return rc ? em__gpu_fail(api, rc, "copy") : EM_OK;
}

em_status em__gpu_copy_strided(em_device device, void *dst,
                               const int64_t *dst_strides, const void *src,
                               const int64_t *src_strides, const int64_t *shape,
                               int ndim, size_t elem_size) {
    return gpu_copy(device, dst, dst_strides, src, src_strides, shape, ndim,
                    elem_size, NULL);
}

/* `node`'s buffer holds `a` already when em__alloc_output donated it;
 * otherwise copy `a` in (put_slice, dynamic_put_slice). */
static em_status alloc_from(em_array *node) {
    em_array *a = node->inputs[0];
    em_buffer *a_buffer = a->buffer;
    em_status st = em__alloc_output(node, &a, 1);
    if (st != EM_OK || node->buffer == a_buffer || node->size == 0)
        return st;
    return gpu_copy(node->device, em__data(node), NULL, em__data(a), a->strides,
                    a->shape, a->ndim, em_dtype_size(a->dtype), NULL);
}

em_status em__gpu_pad_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const pad_params *p = node->params;
    const em_array *a = node->inputs[0], *value = node->inputs[1];
    const int ndim = node->ndim;
    const size_t es = em_dtype_size(node->dtype);
    char *dst = em__data(node);
    int64_t zeros[EM_MAX_NDIM] = {0};
    st = gpu_copy(node->device, dst, NULL, em__data(value), zeros, node->shape,
                  ndim, es, NULL);
    if (st != EM_OK || a->size == 0)
        return st;
    int64_t shape[EM_MAX_NDIM], dst_strides[EM_MAX_NDIM], dst_off, src_off;
    if (!em__pad_block(node, a, p, shape, dst_strides, &dst_off, &src_off))
        return EM_OK;
    return gpu_copy(node->device, dst + (size_t)dst_off * es, dst_strides,
                    (const char *)em__data(a) + src_off * (int64_t)es,
                    a->strides, shape, ndim, es, NULL);
}

em_status em__gpu_concat_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const concat_params *p = node->params;
    size_t es = em_dtype_size(node->dtype);
    char *dst = em__data(node);
    int64_t at = 0;
    for (int i = 0; i < node->ninputs && st == EM_OK; i++) {
        const em_array *in = node->inputs[i];
        if (in->size > 0)
            st = gpu_copy(node->device,
                          dst + (size_t)(at * node->strides[p->axis]) * es,
                          node->strides, em__data(in), in->strides, in->shape,
                          in->ndim, es, NULL);
        at += in->shape[p->axis];
    }
    return st;
}

em_status em__gpu_put_slice_eval(em_array *node) {
    em_status st = alloc_from(node);
    const em_array *update = node->inputs[1];
    if (st != EM_OK || update->size == 0)
        return st;
    const put_slice_params *p = node->params;
    int64_t offset = 0;
    for (int i = 0; i < node->ndim; i++)
        offset += p->start[i] * node->strides[i];
    size_t es = em_dtype_size(node->dtype);
    return gpu_copy(node->device, (char *)em__data(node) + (size_t)offset * es,
                    node->strides, em__data(update), update->strides,
                    update->shape, update->ndim, es, NULL);
}

em_status em__gpu_dynamic_slice_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const dslice_params *p = node->params;
    const em_array *a = node->inputs[0];
    gpu_starts dyn = {node->inputs[1], 1, {0}, {0}};
    int64_t src_strides[EM_MAX_NDIM];
    for (int i = 0; i < a->ndim; i++) {
        dyn.hi[i] = a->shape[i] - p->sizes[i];
        dyn.mul[i] = a->strides[i];
        src_strides[i] = a->strides[i] * p->strides[i];
    }
    return gpu_copy(node->device, em__data(node), NULL, em__data(a),
                    src_strides, node->shape, node->ndim,
                    em_dtype_size(node->dtype), &dyn);
}

em_status em__gpu_dynamic_put_slice_eval(em_array *node) {
    em_status st = alloc_from(node);
    const em_array *update = node->inputs[2];
    if (st != EM_OK || update->size == 0)
        return st;
    gpu_starts dyn = {node->inputs[1], 2, {0}, {0}};
    for (int i = 0; i < node->ndim; i++) {
        dyn.hi[i] = node->shape[i] - update->shape[i];
        dyn.mul[i] = node->strides[i];
    }
    return gpu_copy(node->device, em__data(node), node->strides,
                    em__data(update), update->strides, update->shape,
                    update->ndim, em_dtype_size(node->dtype), &dyn);
}

/* eye: zeros, then the dtype's 1 (`one`, es bytes as stored) along the
 * k-th diagonal of every matrix, both copied from a 32-byte device buffer
 * holding a 0 and a 1 (all-zero bytes are 0 in every dtype). */
em_status em__gpu_eye_eval_with(em_array *node, int64_t k, const void *one) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const size_t es = em_dtype_size(node->dtype);
    unsigned char host[32] = {0};
    memcpy(host + 16, one, es);
    em_buffer *consts = NULL;
    st = em__buffer_new_on(node->device, sizeof host, &consts);
    if (st != EM_OK)
        return st;
    int rc = api->copy_to_device(ord, consts->data, host, sizeof host);
    if (rc) {
        em__buffer_release(consts);
        return em__gpu_fail(api, rc, "eye");
    }
    const char *zero = consts->data, *unit = zero + 16;
    int64_t zeros[EM_MAX_NDIM] = {0};
    st = gpu_copy(node->device, em__data(node), NULL, zero, zeros, node->shape,
                  node->ndim, es, NULL);
    const int64_t rows = node->shape[node->ndim - 2],
                  cols = node->shape[node->ndim - 1];
    /* The diagonal crosses row i when 0 <= i + k < cols (compared without
     * overflow: k may be near INT64's limits). */
    if (st == EM_OK && k < cols && k > -rows) {
        int64_t first = k < 0 ? -k : 0;
        int64_t end = cols - k < rows ? cols - k : rows;
        int64_t shape[2] = {node->size / (rows * cols), end - first};
        int64_t dst_strides[2] = {rows * cols, cols + 1};
        int64_t src_strides[2] = {0, 0};
        st = gpu_copy(node->device,
                      (char *)em__data(node) +
                          (size_t)(first * cols + first + k) * es,
                      dst_strides, unit, src_strides, shape, 2, es, NULL);
    }
    /* Released after the copies are queued: the device's one stream orders
     * any reuse of the block after them. */
    em__buffer_release(consts);
    return st;
}

/* ---- indexed_add / indexed_put ------------------------------------------ */

/* The output starts as a's values (its buffer when donated, as on the
 * CPU); then one thread per update element combines it into its target
 * (index.c's semantics; see em_cuda_scatter). put first claims each target
 * for its highest row in a scratch array of int64 row numbers. */
em_status em__gpu_scatter_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(node->device, &api, &ord);
    if (st == EM_OK)
        st = alloc_from(node);
    const em_array *idx = node->inputs[1], *upd = node->inputs[2];
    if (st != EM_OK || node->size == 0 || upd->size == 0)
        return st;
    const scatter_params *p = node->params;
    em_cuda_scatter job;
    memset(&job, 0, sizeof job);
    job.add = p->add;
    job.dtype = node->dtype;
    job.dtype_index = idx->dtype;
    job.ndim = upd->ndim;
    job.nrow_dims = idx->ndim - 1;
    job.k = p->naxes;
    job.n = upd->size;
    for (int d = 0; d < upd->ndim; d++) {
        job.shape[d] = upd->shape[d];
        job.u_stride[d] = upd->strides[d];
    }
    for (int d = 0; d < job.nrow_dims; d++)
        job.i_stride[d] = idx->strides[d];
    job.entry_stride = idx->strides[idx->ndim - 1];
    unsigned indexed = 0;
    for (int j = 0; j < p->naxes; j++) {
        indexed |= 1u << p->axes[j];
        job.axis_stride[j] = node->strides[p->axes[j]];
        job.axis_dim[j] = node->shape[p->axes[j]];
    }
    /* The updates' trailing axes are the output's other axes, in order. */
    int d = job.nrow_dims;
    for (int i = 0; i < node->ndim; i++)
        if (!(indexed & (1u << i)))
            job.o_stride[d++] = node->strides[i];
    job.updates = em__data(upd);
    job.indices = em__data(idx);
    job.out = em__data(node);
    em_buffer *winner = NULL;
    if (!p->add) {
        size_t bytes = (size_t)node->size * sizeof(int64_t);
        st = em__buffer_new_on(node->device, bytes, &winner);
        if (st != EM_OK)
            return st;
        int rc = api->memset(ord, winner->data, 0xff, bytes); /* all -1 */
        if (rc) {
            em__buffer_release(winner);
            return em__gpu_fail(api, rc, node->prim->name);
        }
        job.winner = winner->data;
    }
    int rc = api->scatter(ord, &job);
    /* Released once queued: the device's one stream orders reuse after. */
    em__buffer_release(winner);
    return rc ? em__gpu_fail(api, rc, node->prim->name) : EM_OK;
}
