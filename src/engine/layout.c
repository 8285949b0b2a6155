/* layout.c — collapsing dimensions before strided loops. */
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
