/*
 * mapping.c — reference-counted read-only mappings of weight files, and
 * arrays that alias them.
 */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

em_status em__io_map_file(const char *what, const char *path,
                          em_io_mapping **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return em__fail(EM_ERR_ARGUMENT, "%s: cannot open %s: %s", what, path,
                        strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return em__fail(EM_ERR_ARGUMENT, "%s: %s is not a regular file", what,
                        path);
    }
    em_io_mapping *m = calloc(1, sizeof *m);
    if (!m) {
        close(fd);
        return em__fail(EM_ERR_OOM, "%s: out of memory opening %s", what,
                        path);
    }
    atomic_init(&m->refcount, 1);
    m->size = (size_t)st.st_size;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            close(fd);
            free(m);
            return em__fail(EM_ERR_RUNTIME, "%s: cannot map %s: %s", what,
                            path, strerror(err));
        }
        m->data = p;
        m->mapped = true;
    }
    close(fd);
    *out = m;
    return EM_OK;
}

em_status em__io_map_memory(const char *what, const void *bytes, size_t n,
                            em_io_mapping **out) {
    *out = NULL;
    em_io_mapping *m = calloc(1, sizeof *m);
    /* Rounded up to the alignment, as aligned_alloc requires; 64 bytes
     * like the engine's buffers, so tensors align as in a mapped file. */
    void *copy = n ? aligned_alloc(64, (n + 63) & ~(size_t)63) : NULL;
    if (!m || (n && !copy)) {
        free(m);
        free(copy);
        return em__fail(EM_ERR_OOM, "%s: out of memory copying %zu bytes",
                        what, n);
    }
    if (n)
        memcpy(copy, bytes, n);
    atomic_init(&m->refcount, 1);
    m->data = copy;
    m->size = n;
    *out = m;
    return EM_OK;
}

void em__io_mapping_retain(em_io_mapping *m) {
    atomic_fetch_add_explicit(&m->refcount, 1, memory_order_relaxed);
}

void em__io_mapping_release(em_io_mapping *m) {
    if (!m ||
        atomic_fetch_sub_explicit(&m->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (m->mapped)
        munmap((void *)m->data, m->size);
    else
        free((void *)m->data);
    free(m);
}

static void release_mapping(void *ctx) { em__io_mapping_release(ctx); }

em_status em__io_array(em_io_mapping *m, const uint8_t *data, size_t nbytes,
                       const int64_t *shape, int ndim, em_dtype dtype,
                       em_array **out) {
    *out = NULL;
    size_t esize = em_dtype_size(dtype);
    if (nbytes == 0 || (uintptr_t)data % esize != 0)
        return em_from_data(data, nbytes, shape, ndim, dtype, out);
    em__io_mapping_retain(m);
    em_status st =
        em_from_external(data, nbytes, shape, ndim, dtype, release_mapping, m,
                         out);
    if (st != EM_OK)
        em__io_mapping_release(m); /* the buffer never took it */
    return st;
}

char *em__io_strdup(const char *s) {
    if (!s)
        s = "<memory>";
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy)
        memcpy(copy, s, n);
    return copy;
}
