/* layout.c — collapsing dimensions before strided loops, and splitting a
 * reduction's axes into kept and reduced ones. */
#include "internal.h"

int em__collapse(int ndim, const int64_t *shape, int k,
                 const int64_t *const *strides_in, int64_t *shape_out,
                 int64_t (*strides_out)[EM_MAX_NDIM]) {
    int n = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 1)
            continue; /* size-1 axes never move the pointer */
        bool merge = n > 0;
        for (int j = 0; j < k && merge; j++)
            merge = strides_out[j][n - 1] == strides_in[j][i] * shape[i];
        if (merge) {
            shape_out[n - 1] *= shape[i];
            for (int j = 0; j < k; j++)
                strides_out[j][n - 1] = strides_in[j][i];
        } else {
            shape_out[n] = shape[i];
            for (int j = 0; j < k; j++)
                strides_out[j][n] = strides_in[j][i];
            n++;
        }
    }
    return n;
}

int64_t em__split_axes(const em_array *in, unsigned mask, int64_t *kept_shape,
                       int64_t *kept_strides, int *nkept, int64_t *red_shape,
                       int64_t *red_strides, int *nred) {
    /* An empty array's other dimensions may be as large as int64 allows
     * (em__check_shape accepts [0, 2^62, 2^62]): their product would
     * overflow, and nothing is read anyway. */
    int64_t count = in->size == 0 ? 0 : 1;
    int no = 0, nr = 0;
    for (int i = 0; i < in->ndim; i++) {
        if (mask & (1u << i)) {
            red_shape[nr] = in->shape[i];
            red_strides[nr++] = in->strides[i];
            if (in->size != 0)
                count *= in->shape[i];
        } else {
            kept_shape[no] = in->shape[i];
            kept_strides[no++] = in->strides[i];
        }
    }
    *nkept = no;
    *nred = nr;
    return count;
}

bool em__group_stride(const int64_t *shape, const int64_t *stride, int n,
                      int64_t *out) {
    int64_t inner = 0, span = 1;
    bool any = false;
    for (int i = n - 1; i >= 0; i--) {
        if (shape[i] == 1)
            continue;
        if (!any) {
            inner = stride[i];
            any = true;
        } else if (stride[i] != inner * span) {
            return false;
        }
        span *= shape[i];
    }
    *out = inner;
    return true;
}
