/* error.c — per-thread error messages and short array descriptions. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

const char *em_last_error(void) { return last_error; }

em_status em__fail(em_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

const char *em__describe_shape(const int64_t *shape, int ndim, em_desc *buf) {
    size_t used = 0;
    buf->text[0] = '[';
    used = 1;
    for (int i = 0; i < ndim && used < sizeof buf->text; i++) {
        int n = snprintf(buf->text + used, sizeof buf->text - used, "%s%lld",
                         i ? "," : "", (long long)shape[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (used < sizeof buf->text - 1) {
        buf->text[used++] = ']';
        buf->text[used] = '\0';
    } else {
        buf->text[sizeof buf->text - 1] = '\0';
    }
    return buf->text;
}

const char *em__describe(const em_array *a, em_desc *buf) {
    if (!a) {
        snprintf(buf->text, sizeof buf->text, "(null)");
        return buf->text;
    }
    em_desc shape;
    em__describe_shape(a->shape, a->ndim, &shape);
    snprintf(buf->text, sizeof buf->text, "%s%s", em_dtype_name(a->dtype),
             shape.text);
    return buf->text;
}
