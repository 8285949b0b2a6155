/*
 * emily_io.h — weight files: safetensors and GGUF (part of libemily;
 * include after or instead of emily.h).
 *
 * Both readers map the file read-only and parse its header in full before
 * returning: every offset, length and count is checked against the size of
 * the file, so a truncated or hostile file gives EM_ERR_ARGUMENT with a
 * message naming the file, the field and the byte offset, never a read
 * outside the mapping. (A file truncated by another process *after* it was
 * mapped can still raise SIGBUS on access: the usual caveat of mmap.)
 *
 * Tensors come out as evaluated CPU arrays that alias the mapped bytes (no
 * copy; a tensor whose bytes are not aligned to its element size is copied
 * instead). The mapping is reference-counted: closing the file drops the
 * file's reference, and each array holds its own, so arrays outlive the
 * handle they came from. The aliased buffers are pinned: the engine never
 * writes them. Use em_to_device to move an array to a GPU.
 *
 * Byte order: both formats store little-endian data, as the engine's host
 * does; no conversion is done.
 */
#ifndef EMILY_IO_H
#define EMILY_IO_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* safetensors                                                               */
/* ------------------------------------------------------------------------ */
/*
 * Layout: an 8-byte little-endian header length N, N bytes of JSON
 * ({"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...,
 * "__metadata__": {"key": "value", ...}}), then the data area; offsets are
 * relative to the data area's start. Checked on open: N <= 100 MB and fits
 * the file; strict JSON of bounded depth; tensor names unique; shapes of
 * non-negative integers whose product does not overflow; 0 <= b <= e <= the
 * data area's size; e - b == the byte size of the shape and dtype (when the
 * dtype is known); no two tensors overlap.
 */

typedef struct em_safetensors em_safetensors;

/* Map `path` and parse its header. */
em_status em_safetensors_open(const char *path, em_safetensors **out);
/* The same over a copy of `n` bytes at `bytes` (tests, fuzzing). */
em_status em_safetensors_open_memory(const void *bytes, size_t n,
                                     em_safetensors **out);
/* Drop the handle (NULL allowed). Arrays from em_safetensors_get keep the
 * mapping alive until they are released. */
void em_safetensors_close(em_safetensors *f);

/* One tensor of the header. dtype_name is the file's spelling ("F32",
 * "F8_E4M3", ...); dtype is the engine's dtype, or -1 for one the engine
 * lacks (em_safetensors_get then fails with EM_ERR_UNSUPPORTED). Pointers
 * stay valid while the handle is open. */
typedef struct em_safetensors_tensor {
    const char *name;       /* NUL-terminated; may hold any UTF-8 */
    const char *dtype_name; /* NUL-terminated */
    int dtype;              /* em_dtype or -1 */
    int ndim;
    const int64_t *shape;  /* ndim entries */
    int64_t begin, end;    /* byte offsets into the data area */
} em_safetensors_tensor;

/* Tensors in the header's order. */
int64_t em_safetensors_count(const em_safetensors *f);
em_status em_safetensors_tensor_at(const em_safetensors *f, int64_t index,
                                   em_safetensors_tensor *out);
/* The index of tensor `name`, or -1. */
int64_t em_safetensors_find(const em_safetensors *f, const char *name);

/* The __metadata__ string map, in the header's order. */
int64_t em_safetensors_metadata_count(const em_safetensors *f);
em_status em_safetensors_metadata_at(const em_safetensors *f, int64_t index,
                                     const char **key, const char **value);

/* Tensor `name` as a new evaluated array aliasing the mapped bytes.
 * EM_ERR_ARGUMENT for an unknown name; EM_ERR_UNSUPPORTED for a dtype the
 * engine lacks (the message names it) or more than EM_MAX_NDIM dims. */
em_status em_safetensors_get(em_safetensors *f, const char *name,
                             em_array **out);

/* The bytes of tensor `name`, whatever its dtype (F8_E4M3 and the other
 * dtypes the engine lacks included), as a new evaluated u8 array of shape
 * [end - begin] aliasing the mapping. */
em_status em_safetensors_get_bytes(em_safetensors *f, const char *name,
                                   em_array **out);

/* Write `n` arrays under `names` (unique) and `nmeta` metadata pairs to
 * `path`. The arrays are evaluated and read as row-major bytes; every
 * engine dtype but c128 has a safetensors name (pred is BOOL, c64 is C64).
 * Like the reference writer, tensors are laid out by decreasing element
 * size and then by name, and the header is padded with spaces to a multiple
 * of 8 bytes, so each tensor is aligned to its element size in the file.
 * The file is written beside `path` under a temporary name and renamed
 * over it once complete. */
em_status em_safetensors_save(const char *path, const char *const *names,
                              em_array *const *arrays, size_t n,
                              const char *const *metadata_keys,
                              const char *const *metadata_values,
                              size_t nmeta);

/* A sharded checkpoint's index (model.safetensors.index.json): its
 * "weight_map" object of tensor name -> shard file name, in file order. */
typedef struct em_safetensors_index em_safetensors_index;
em_status em_safetensors_index_open(const char *path,
                                    em_safetensors_index **out);
/* The same over `n` bytes of JSON (not retained). */
em_status em_safetensors_index_parse(const void *json, size_t n,
                                     em_safetensors_index **out);
void em_safetensors_index_close(em_safetensors_index *index);
int64_t em_safetensors_index_count(const em_safetensors_index *index);
em_status em_safetensors_index_at(const em_safetensors_index *index,
                                  int64_t i, const char **tensor,
                                  const char **file);

/* ------------------------------------------------------------------------ */
/* GGUF (versions 2 and 3)                                                   */
/* ------------------------------------------------------------------------ */
/*
 * Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count, the
 * metadata (u64-length string key, u32 value type, value), the tensor infos
 * (name, u32 n_dims, n_dims u64 dims innermost first, u32 ggml type, u64
 * offset), padding to general.alignment (default 32), then the data
 * section. Checked on open: every length and count against the bytes left,
 * value types, nesting depth of arrays (<= 16), bools of 0 or 1, the
 * alignment (a power of two), unique tensor names, n_dims <= EM_MAX_NDIM,
 * offsets aligned and inside the file, no two tensors overlapping, and for
 * every type whose block size is known the innermost dim a whole number of
 * blocks.
 */

typedef enum em_gguf_type {
    EM_GGUF_U8 = 0,
    EM_GGUF_I8 = 1,
    EM_GGUF_U16 = 2,
    EM_GGUF_I16 = 3,
    EM_GGUF_U32 = 4,
    EM_GGUF_I32 = 5,
    EM_GGUF_F32 = 6,
    EM_GGUF_BOOL = 7,
    EM_GGUF_STRING = 8,
    EM_GGUF_ARRAY = 9,
    EM_GGUF_U64 = 10,
    EM_GGUF_I64 = 11,
    EM_GGUF_F64 = 12,
} em_gguf_type;

/* "u8", "string", "array", ...; NULL for an unknown number. */
const char *em_gguf_type_name(int type);

typedef struct em_gguf em_gguf;

em_status em_gguf_open(const char *path, em_gguf **out);
/* The same over a copy of `n` bytes at `bytes` (tests, fuzzing). */
em_status em_gguf_open_memory(const void *bytes, size_t n, em_gguf **out);
/* Drop the handle (NULL allowed); values and infos obtained from it become
 * invalid, arrays from em_gguf_get stay valid. */
void em_gguf_close(em_gguf *f);

uint32_t em_gguf_version(const em_gguf *f);
/* general.alignment, or 32. */
uint64_t em_gguf_alignment(const em_gguf *f);
/* Offset in the file of the data section. */
uint64_t em_gguf_data_offset(const em_gguf *f);

/* A metadata value, borrowed from the open file. Strings are not
 * NUL-terminated (and may contain NUL): use the length. Read values with
 * the functions below; `internal_` is private. */
typedef struct em_gguf_value {
    int type;          /* em_gguf_type */
    const void *data;  /* the scalar's bytes (unaligned), the string's, or
                        * the first element of an array */
    uint64_t len;      /* string bytes or array elements */
    int elem_type;     /* arrays: the elements' em_gguf_type */
    const void *internal_;
} em_gguf_value;

int64_t em_gguf_kv_count(const em_gguf *f);
em_status em_gguf_kv_at(const em_gguf *f, int64_t index, const char **key,
                        size_t *key_len, em_gguf_value *value);
/* The value of `key` (NUL-terminated); EM_ERR_ARGUMENT when absent. */
em_status em_gguf_find_kv(const em_gguf *f, const char *key,
                          em_gguf_value *value);

/* Scalars converted to the requested C type: integers and bools to i64 or
 * u64 when the value fits, any number to f64. EM_ERR_ARGUMENT otherwise. */
em_status em_gguf_value_i64(const em_gguf_value *v, int64_t *out);
em_status em_gguf_value_u64(const em_gguf_value *v, uint64_t *out);
em_status em_gguf_value_f64(const em_gguf_value *v, double *out);
em_status em_gguf_value_string(const em_gguf_value *v, const char **data,
                               size_t *len);
/* Element i of an array (any element type, nested arrays included). */
em_status em_gguf_value_element(const em_gguf_value *v, uint64_t i,
                                em_gguf_value *out);

/* A tensor info. dims are in the file's order, innermost first; shape is
 * the row-major (outermost first) order the engine uses. */
typedef struct em_gguf_tensor {
    const char *name; /* not NUL-terminated: name_len bytes */
    size_t name_len;
    int n_dims;
    uint64_t dims[EM_MAX_NDIM];
    int64_t shape[EM_MAX_NDIM];
    int ggml_type;        /* em_ggml_type's numbering (emily_ggml.h) */
    const char *type_name; /* "q4_k", "iq2_xs", ...; "unknown" */
    uint64_t offset;      /* relative to the data section */
    uint64_t nbytes;      /* 0 when the type's block size is unknown */
} em_gguf_tensor;

int64_t em_gguf_tensor_count(const em_gguf *f);
em_status em_gguf_tensor_at(const em_gguf *f, int64_t index,
                            em_gguf_tensor *out);
/* The index of the tensor named `name` (NUL-terminated), or -1. */
int64_t em_gguf_find_tensor(const em_gguf *f, const char *name);

/* Tensor `name` as a new evaluated array aliasing the mapped bytes, and its
 * ggml type in *ggml_type (may be NULL).
 *   f32, f16, bf16, f64, i8, i16, i32, i64: an array of that dtype and the
 *     tensor's row-major shape (GGUF's dims reversed);
 *   block types the engine reads (emily_ggml.h: q4_0 ... q6_k): a u8 array
 *     (rows, K / block_elems * block_bytes) of the raw blocks, where K is
 *     the innermost dim and rows the product of the others;
 *   any other type: EM_ERR_UNSUPPORTED naming it. */
em_status em_gguf_get(em_gguf *f, const char *name, em_array **out,
                      int *ggml_type);

#ifdef __cplusplus
}
#endif

#endif
