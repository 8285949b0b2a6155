/*
 * io_internal.h — what the weight-file readers share: a reference-counted
 * read-only mapping of a file, and a strict JSON parser.
 */
#ifndef EMILY_IO_INTERNAL_H
#define EMILY_IO_INTERNAL_H

#include "emily_io.h"
#include "internal.h"

/* ---- mappings ----------------------------------------------------------- */

/* The bytes of a weight file: mmap'ed read-only, or a 64-byte aligned
 * heap copy (the *_open_memory entry points). Each open handle and each
 * array aliasing the bytes holds a reference. */
typedef struct em_io_mapping {
    atomic_int refcount;
    const uint8_t *data;
    size_t size;
    bool mapped; /* munmap, not free, on the last release */
} em_io_mapping;

/* Map `path` (`what` names the format in messages: "safetensors"). */
em_status em__io_map_file(const char *what, const char *path,
                          em_io_mapping **out);
em_status em__io_map_memory(const char *what, const void *bytes, size_t n,
                            em_io_mapping **out);
void em__io_mapping_retain(em_io_mapping *m);
void em__io_mapping_release(em_io_mapping *m);

/* A new evaluated array over `nbytes` at `data` inside mapping `m` (which
 * gains a reference); data not aligned to the element size is copied. */
em_status em__io_array(em_io_mapping *m, const uint8_t *data, size_t nbytes,
                       const int64_t *shape, int ndim, em_dtype dtype,
                       em_array **out);

/* A heap copy of `name` for messages (the base name is enough to tell
 * files apart; the full path is kept). NULL-safe: "<memory>". */
char *em__io_strdup(const char *s);

/* ---- JSON --------------------------------------------------------------- */

typedef enum em_json_kind {
    EM_JSON_NULL,
    EM_JSON_BOOL,
    EM_JSON_INT,   /* integral and within int64 */
    EM_JSON_FLOAT, /* anything else numeric */
    EM_JSON_STRING,
    EM_JSON_ARRAY,
    EM_JSON_OBJECT,
} em_json_kind;

/* A parsed value. Strings (and object keys) are NUL-terminated heap copies
 * with escapes decoded and other bytes passed through; `len` excludes the
 * terminator (a decoded \u0000 makes it longer than strlen). */
typedef struct em_json {
    em_json_kind kind;
    bool boolean;
    int64_t integer;
    double number;
    char *string;
    size_t len;                /* string bytes; array/object entries */
    struct em_json *items;     /* array elements / object values */
    char **keys;               /* object keys, in file order */
    size_t *key_lens;
    size_t offset;             /* where the value starts in the text */
} em_json;

/* The deepest nesting of arrays and objects accepted. */
#define EM_JSON_MAX_DEPTH 64

/* Parse exactly one value from `n` bytes (surrounding whitespace allowed).
 * On failure EM_ERR_ARGUMENT with "<what>: invalid JSON: <message> at byte
 * <base + offset>" (base: where the text starts in its file). */
em_status em__json_parse(const char *what, const char *text, size_t n,
                         size_t base, em_json *out);
void em__json_free(em_json *v);
/* The value under `key` of an object, or NULL. */
const em_json *em__json_get(const em_json *object, const char *key);

#endif
