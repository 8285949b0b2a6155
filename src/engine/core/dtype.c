/* dtype.c — sizes, names and classes of the dtypes. */
#include "internal.h"

static const struct {
    const char *name;
    size_t size;
} dtype_info[EM_DTYPE_COUNT] = {
    [EM_PRED] = {"pred", 1}, [EM_U8] = {"u8", 1},     [EM_U16] = {"u16", 2},
    [EM_U32] = {"u32", 4},   [EM_U64] = {"u64", 8},   [EM_S8] = {"s8", 1},
    [EM_S16] = {"s16", 2},   [EM_S32] = {"s32", 4},   [EM_S64] = {"s64", 8},
    [EM_F16] = {"f16", 2},   [EM_BF16] = {"bf16", 2}, [EM_F32] = {"f32", 4},
    [EM_F64] = {"f64", 8},   [EM_C64] = {"c64", 8},   [EM_C128] = {"c128", 16},
};

bool em_dtype_is_valid(int dtype) {
    return dtype >= 0 && dtype < EM_DTYPE_COUNT;
}

size_t em_dtype_size(em_dtype dtype) {
    return em_dtype_is_valid((int)dtype) ? dtype_info[dtype].size : 0;
}

const char *em_dtype_name(em_dtype dtype) {
    return em_dtype_is_valid((int)dtype) ? dtype_info[dtype].name : "invalid";
}

bool em_dtype_is_integer(em_dtype d) { return d >= EM_PRED && d <= EM_S64; }
bool em_dtype_is_signed(em_dtype d) { return d >= EM_S8 && d <= EM_C128; }
bool em_dtype_is_float(em_dtype d) { return d >= EM_F16 && d <= EM_F64; }
bool em_dtype_is_complex(em_dtype d) { return d == EM_C64 || d == EM_C128; }

em_dtype em__real_dtype(em_dtype d) {
    return d == EM_C64 ? EM_F32 : d == EM_C128 ? EM_F64 : d;
}

bool em__dtype_accepts(const char *accepts, em_dtype d) {
    if (!strcmp(accepts, "NUMERIC"))
        return EM_ACCEPTS_NUMERIC(d);
    if (!strcmp(accepts, "REAL"))
        return EM_ACCEPTS_REAL(d);
    if (!strcmp(accepts, "FLOATING"))
        return EM_ACCEPTS_FLOATING(d);
    if (!strcmp(accepts, "REALFLOAT"))
        return EM_ACCEPTS_REALFLOAT(d);
    if (!strcmp(accepts, "INTEGER"))
        return EM_ACCEPTS_INTEGER(d);
    return true;
}
