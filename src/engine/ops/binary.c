/*
 * binary.c — em_binary: the two-input elementwise ops listed in emily_ops.h,
 * with numpy/Nx broadcasting.
 *
 * Each op is an expression rule per dtype class it accepts (BIN_INT_<op>,
 * BIN_FLT_<op>, BIN_CPX_<op>, over compute values `a` and `b` of one type);
 * one kernel per dtype switches over the ops. Broadcast inputs are read
 * through zero strides by em_ew_eval (elementwise.h): nothing is copied.
 */
#include "elementwise.h"
#include "elementwise_internal.h"

#define BIN_T(x) __typeof__(x)
#define BIN_W(x) EM_EW_WIDE_U(BIN_T(x))
#define BIN_RF2(fn, a, b) _Generic((a), float : fn##f, default : fn)(a, b)
#define BIN_CF2(fn, a, b)                                                      \
    _Generic((a), float complex : fn##f, default : fn)(a, b)

/* Bit width of an integer operand; pred counts as a 1-bit integer. */
#define BIN_INT_WIDTH(x) (ew_dtype == EM_PRED ? 1 : EM_EW_BITS(x))
/* b is the signed value -1 (never true for unsigned types). */
#define BIN_IS_MINUS_ONE(b) (EM_EW_IS_SIGNED(BIN_T(b)) && (b) == (BIN_T(b)) - 1)

/* ------------------------------------------------------------------------ */
/* Arithmetic rules: the result has the operands' type                       */
/* ------------------------------------------------------------------------ */

/* Integers wrap: computed in the unsigned type (signed overflow is UB). */
#define BIN_INT_add(a, b) ((BIN_T(a))((BIN_W(a))(a) + (BIN_W(a))(b)))
#define BIN_FLT_add(a, b) ((a) + (b))
#define BIN_CPX_add(a, b) ((a) + (b))
#define BIN_INT_subtract(a, b) ((BIN_T(a))((BIN_W(a))(a) - (BIN_W(a))(b)))
#define BIN_FLT_subtract(a, b) ((a) - (b))
#define BIN_CPX_subtract(a, b) ((a) - (b))
#define BIN_INT_multiply(a, b) ((BIN_T(a))((BIN_W(a))(a) * (BIN_W(a))(b)))
#define BIN_FLT_multiply(a, b) ((a) * (b))
#define BIN_CPX_multiply(a, b) ((a) * (b))

/* Integer division truncates toward zero; x/0 gives 0 and MIN/-1 wraps to
 * MIN, never a trap. Integer `divide` is the same as `quotient` (Nx's
 * divide converts integers to float before it reaches the engine). */
#define BIN_INT_quotient(a, b)                                                 \
    ((BIN_T(a))((b) == 0              ? 0                                      \
                : BIN_IS_MINUS_ONE(b) ? (BIN_T(a))(0u - (BIN_W(a))(a))         \
                                      : (a) / (b)))
#define BIN_INT_divide(a, b) BIN_INT_quotient(a, b)
#define BIN_FLT_divide(a, b) ((a) / (b))
#define BIN_CPX_divide(a, b) ((a) / (b))

/* The remainder has the dividend's sign (C's %, fmod); x%0 gives 0. */
#define BIN_INT_remainder(a, b)                                                \
    ((BIN_T(a))((b) == 0 || BIN_IS_MINUS_ONE(b) ? 0 : (a) % (b)))
#define BIN_FLT_remainder(a, b) BIN_RF2(fmod, a, b)

/*
 * Integer pow is exact and wraps (square and multiply in the unsigned
 * type). A negative exponent has no integer result; it gives 0, except for
 * bases 1 (gives 1) and -1 (gives +-1 by the exponent's parity), where the
 * exact result is an integer.
 */
#define BIN_INT_pow(a, b)                                                      \
    ({                                                                         \
        BIN_T(a) base_ = (a), exp_ = (b);                                      \
        BIN_W(a) acc_ = 1, sq_ = (BIN_W(a))base_;                              \
        if (EM_EW_IS_NEG(exp_)) {                                              \
            acc_ = base_ == 1                ? 1                               \
                   : BIN_IS_MINUS_ONE(base_) ? ((exp_ & 1) ? sq_ : 1)          \
                                             : 0;                              \
        } else {                                                               \
            while (exp_ != 0) {                                                \
                if (exp_ & 1)                                                  \
                    acc_ *= sq_;                                               \
                sq_ *= sq_;                                                    \
                exp_ = (BIN_T(a))(exp_ >> 1);                                  \
            }                                                                  \
        }                                                                      \
        (BIN_T(a)) acc_;                                                       \
    })
#define BIN_FLT_pow(a, b) BIN_RF2(pow, a, b)
#define BIN_CPX_pow(a, b) BIN_CF2(cpow, a, b)

/* Float max/min propagate NaN. */
#define BIN_INT_minimum(a, b) EM_EW_INT_MIN(a, b)
#define BIN_FLT_minimum(a, b) EM_EW_FLT_MIN(a, b)
#define BIN_INT_maximum(a, b) EM_EW_INT_MAX(a, b)
#define BIN_FLT_maximum(a, b) EM_EW_FLT_MAX(a, b)

#define BIN_FLT_atan2(a, b) BIN_RF2(atan2, a, b)

#define BIN_INT_bitwise_and(a, b) ((BIN_T(a))((a) & (b)))
#define BIN_INT_bitwise_or(a, b) ((BIN_T(a))((a) | (b)))
#define BIN_INT_bitwise_xor(a, b) ((BIN_T(a))((a) ^ (b)))

/* Shifts by a negative count or by the width or more give 0, or -1 for an
 * arithmetic right shift of a negative value. Right shifts are arithmetic
 * for signed types (gcc and clang define >> on negative values so). */
#define BIN_SHIFT_OUT_OF_RANGE(a, b)                                           \
    (EM_EW_IS_NEG(b) || (uint64_t)(b) >= (uint64_t)BIN_INT_WIDTH(a))
#define BIN_INT_left_shift(a, b)                                               \
    ((BIN_T(a))(BIN_SHIFT_OUT_OF_RANGE(a, b) ? 0 : (BIN_W(a))(a) << (b)))
#define BIN_INT_right_shift(a, b)                                              \
    ((BIN_T(a))(BIN_SHIFT_OUT_OF_RANGE(a, b)                                   \
                    ? (EM_EW_IS_NEG(a) ? (BIN_T(a)) - 1 : 0)                   \
                    : (a) >> (b)))

/* ------------------------------------------------------------------------ */
/* Comparison and logical rules: pred results                                */
/* ------------------------------------------------------------------------ */

/* Comparisons involving NaN are false (not_equal: true), as in IEEE. */
#define BIN_ANY_equal(a, b) ((_Bool)((a) == (b)))
#define BIN_INT_equal BIN_ANY_equal
#define BIN_FLT_equal BIN_ANY_equal
#define BIN_CPX_equal BIN_ANY_equal
#define BIN_ANY_not_equal(a, b) ((_Bool)((a) != (b)))
#define BIN_INT_not_equal BIN_ANY_not_equal
#define BIN_FLT_not_equal BIN_ANY_not_equal
#define BIN_CPX_not_equal BIN_ANY_not_equal
#define BIN_INT_less(a, b) ((_Bool)((a) < (b)))
#define BIN_FLT_less BIN_INT_less
#define BIN_INT_less_equal(a, b) ((_Bool)((a) <= (b)))
#define BIN_FLT_less_equal BIN_INT_less_equal
#define BIN_INT_greater(a, b) ((_Bool)((a) > (b)))
#define BIN_FLT_greater BIN_INT_greater
#define BIN_INT_greater_equal(a, b) ((_Bool)((a) >= (b)))
#define BIN_FLT_greater_equal BIN_INT_greater_equal

/* Nonzero is true: NaN is true; a complex is false only when both parts
 * are zero. */
#define BIN_ANY_logical_and(a, b) ((_Bool)((a) != 0 && (b) != 0))
#define BIN_INT_logical_and BIN_ANY_logical_and
#define BIN_FLT_logical_and BIN_ANY_logical_and
#define BIN_CPX_logical_and BIN_ANY_logical_and
#define BIN_ANY_logical_or(a, b) ((_Bool)((a) != 0 || (b) != 0))
#define BIN_INT_logical_or BIN_ANY_logical_or
#define BIN_FLT_logical_or BIN_ANY_logical_or
#define BIN_CPX_logical_or BIN_ANY_logical_or
#define BIN_ANY_logical_xor(a, b) ((_Bool)(((a) != 0) != ((b) != 0)))
#define BIN_INT_logical_xor BIN_ANY_logical_xor
#define BIN_FLT_logical_xor BIN_ANY_logical_xor
#define BIN_CPX_logical_xor BIN_ANY_logical_xor

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

#define BIN_ARITH_LOOP(RULE)                                                   \
    {                                                                          \
        ew_stor *o = out;                                                      \
        for (int64_t i = 0; i < n; i++) {                                      \
            ew_comp x = ew_load(a[i]), y = ew_load(b[i]);                      \
            o[i] = ew_store(RULE(x, y));                                       \
        }                                                                      \
    }
#define BIN_PRED_LOOP(RULE)                                                    \
    {                                                                          \
        uint8_t *o = out;                                                      \
        for (int64_t i = 0; i < n; i++) {                                      \
            ew_comp x = ew_load(a[i]), y = ew_load(b[i]);                      \
            o[i] = (uint8_t)RULE(x, y);                                        \
        }                                                                      \
    }

#define BIN_CASE(kind, cls, name)                                              \
    case EM_BINARY_##name:                                                     \
        BIN_##kind##_LOOP(BIN_##cls##_##name) break;
#define BIN_ARITH_INT(name, acc) EM_EW_INT_##acc(BIN_CASE(ARITH, INT, name))
#define BIN_ARITH_FLT(name, acc) EM_EW_FLT_##acc(BIN_CASE(ARITH, FLT, name))
#define BIN_ARITH_CPX(name, acc) EM_EW_CPX_##acc(BIN_CASE(ARITH, CPX, name))
#define BIN_PRED_INT(name, acc) EM_EW_INT_##acc(BIN_CASE(PRED, INT, name))
#define BIN_PRED_FLT(name, acc) EM_EW_FLT_##acc(BIN_CASE(PRED, FLT, name))
#define BIN_PRED_CPX(name, acc) EM_EW_CPX_##acc(BIN_CASE(PRED, CPX, name))

#define BIN_DEFINE_KERNEL(cls, E, sfx, S, C)                                   \
    EM_CLONES static void bin_kernel_##sfx(int op, void *out,                  \
                                           const void *const *in, int64_t n) { \
        EM_EW_DTYPE_SCOPE(E, sfx, S, C);                                       \
        const ew_stor *a = in[0], *b = in[1];                                  \
        switch ((em_binary_op)op) {                                            \
            EM_BINARY_ARITH_OPS(BIN_ARITH_##cls)                               \
            EM_BINARY_PRED_OPS(BIN_PRED_##cls)                                 \
        default:                                                               \
            break;                                                             \
        }                                                                      \
    }
#define BIN_KERNEL_INT(E, sfx, S, C, L, ST) BIN_DEFINE_KERNEL(INT, E, sfx, S, C)
#define BIN_KERNEL_FLT(E, sfx, S, C, L, ST) BIN_DEFINE_KERNEL(FLT, E, sfx, S, C)
#define BIN_KERNEL_CPX(E, sfx, S, C, L, ST) BIN_DEFINE_KERNEL(CPX, E, sfx, S, C)
EM_DTYPES_INT(BIN_KERNEL_INT)
EM_DTYPES_REALFLOAT(BIN_KERNEL_FLT)
EM_DTYPES_COMPLEX(BIN_KERNEL_CPX)

#define BIN_KERNEL_ENTRY(E, sfx, S, C, L, ST) [E] = bin_kernel_##sfx,
static const em_ew_kernel binary_kernels[EM_DTYPE_COUNT] = {
    EM_DTYPES_ALL(BIN_KERNEL_ENTRY)};

/* ------------------------------------------------------------------------ */
/* Build and eval                                                            */
/* ------------------------------------------------------------------------ */

static em_status binary_eval(em_array *node);

/* One primitive per op (its name is the op's); params hold the op number. */
static const em_prim binary_prims[EM_BINARY_COUNT] = {
#define EM_X(name, accepts)                                                    \
    {#name, binary_eval, em__vjp_binary, em__gpu_binary_eval},
    EM_BINARY_OPS(EM_X)
#undef EM_X
};

const char *em_binary_name(em_binary_op op) {
    return (unsigned)op < EM_BINARY_COUNT ? binary_prims[op].name : "unknown";
}

static bool binary_is_pred_op(em_binary_op op) {
    switch (op) {
#define EM_X(name, accepts) case EM_BINARY_##name:
        EM_BINARY_PRED_OPS(EM_X)
#undef EM_X
        return true;
    default:
        return false;
    }
}

/* Ops that cost about as much as a copy (one thread takes more of them). */
static bool binary_is_cheap(em_binary_op op, em_dtype dtype) {
    if (em_dtype_is_complex(dtype) || dtype == EM_F16 || dtype == EM_BF16)
        return false;
    switch (op) {
    case EM_BINARY_divide:
    case EM_BINARY_quotient:
    case EM_BINARY_remainder:
        return em_dtype_is_float(dtype) && op == EM_BINARY_divide;
    case EM_BINARY_pow:
    case EM_BINARY_atan2:
        return false;
    default:
        return true;
    }
}

static em_status binary_eval(em_array *node) {
    em_binary_op op = (em_binary_op)(node->prim - binary_prims);
    em_dtype dtype = node->inputs[0]->dtype;
    int64_t grain =
        binary_is_cheap(op, dtype) ? EM_PARALLEL_GRAIN : EM_PARALLEL_GRAIN / 16;
    return em_ew_eval(node, binary_kernels[dtype], (int)op, grain);
}

em_status em_binary(em_binary_op op, em_array *a, em_array *b, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "em_binary: out is NULL");
    *out = NULL;
    if ((unsigned)op >= EM_BINARY_COUNT)
        return em__fail(EM_ERR_ARGUMENT,
                        "em_binary: unknown op %d (expected 0..%d)", (int)op,
                        EM_BINARY_COUNT - 1);
    const char *name = binary_prims[op].name;
    if (!a || !b)
        return em__fail(EM_ERR_ARGUMENT, "%s: input is NULL", name);
    em_desc da, db;
    if (a->dtype != b->dtype)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: expected inputs of one dtype, got %s and %s "
                        "(convert one with em_as_type first)",
                        name, em__describe(a, &da), em__describe(b, &db));

    bool ok = false;
    const char *accepts = "ANY";
    switch (op) {
#define EM_X(opname, acc)                                                      \
    case EM_BINARY_##opname:                                                   \
        ok = EM_ACCEPTS_##acc(a->dtype);                                       \
        accepts = #acc;                                                        \
        break;
        EM_BINARY_OPS(EM_X)
#undef EM_X
    default:
        break;
    }
    if (!ok)
        return em__fail(EM_ERR_ARGUMENT, "%s: expected %s, got %s and %s", name,
                        em_ew_accepts_text(accepts), em__describe(a, &da),
                        em__describe(b, &db));

    int64_t shape[EM_MAX_NDIM];
    int ndim;
    em_array *inputs[2] = {a, b};
    em_status st = em_ew_broadcast(name, inputs, 2, shape, &ndim);
    if (st != EM_OK)
        return st;

    em_dtype odt = binary_is_pred_op(op) ? EM_PRED : a->dtype;
    int param = (int)op;
    return em__node_new_params(&binary_prims[op], odt, shape, ndim, inputs, 2,
                               &param, sizeof param, out);
}

/* ---- for the fusion pass (elementwise_internal.h) ---------------------- */

bool em__binary_op_of(const em_array *node, int *op, em_dtype *kernel_dtype) {
    if (!node->prim || node->prim->eval != binary_eval)
        return false;
    *op = (int)(node->prim - binary_prims);
    *kernel_dtype = node->inputs[0]->dtype;
    return true;
}

em_ew_kernel em__binary_kernel(em_dtype dtype) { return binary_kernels[dtype]; }
