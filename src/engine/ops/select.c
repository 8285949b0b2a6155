/*
 * select.c — em_select (pred ? on_true : on_false) and em_clip
 * (min(max(a, lo), hi)), three-input elementwise ops with broadcasting.
 */
#include "elementwise.h"
#include "elementwise_internal.h"

/* ------------------------------------------------------------------------ */
/* select                                                                    */
/* ------------------------------------------------------------------------ */

/* One kernel per pred dtype (nonzero is true; NaN is nonzero); the values
 * are only moved, so they are handled by element size (`op`). */
typedef struct {
    uint64_t lo, hi;
} sel_16b;

#define SEL_CASE(bytes, T)                                                     \
    case bytes: {                                                              \
        T *o = out;                                                            \
        const T *t = in[1], *f = in[2];                                        \
        for (int64_t i = 0; i < n; i++)                                        \
            o[i] = ew_load(p[i]) != 0 ? t[i] : f[i];                           \
        break;                                                                 \
    }

#define SEL_DEFINE_KERNEL(E, sfx, S, C, L, ST)                                 \
    EM_CLONES static void sel_kernel_##sfx(int op, void *out,                  \
                                           const void *const *in, int64_t n) { \
        EM_EW_DTYPE_SCOPE(E, sfx, S, C);                                       \
        const ew_stor *p = in[0];                                              \
        switch (op) {                                                          \
            SEL_CASE(1, uint8_t)                                               \
            SEL_CASE(2, uint16_t)                                              \
            SEL_CASE(4, uint32_t)                                              \
            SEL_CASE(8, uint64_t)                                              \
            SEL_CASE(16, sel_16b)                                              \
        default:                                                               \
            break;                                                             \
        }                                                                      \
    }
EM_DTYPES_ALL(SEL_DEFINE_KERNEL)

#define SEL_KERNEL_ENTRY(E, sfx, S, C, L, ST) [E] = sel_kernel_##sfx,
static const em_ew_kernel select_kernels[EM_DTYPE_COUNT] = {
    EM_DTYPES_ALL(SEL_KERNEL_ENTRY)};

static em_status select_eval(em_array *node) {
    return em_ew_eval(node, select_kernels[node->inputs[0]->dtype],
                      (int)em_dtype_size(node->dtype), EM_PARALLEL_GRAIN);
}

static const em_prim select_prim = {"select", select_eval, em__vjp_select,
                                    em__gpu_select_eval};

em_status em_select(em_array *pred, em_array *on_true, em_array *on_false,
                    em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "select: out is NULL");
    *out = NULL;
    if (!pred || !on_true || !on_false)
        return em__fail(EM_ERR_ARGUMENT, "select: input is NULL");
    em_desc dt, df;
    if (on_true->dtype != on_false->dtype)
        return em__fail(EM_ERR_ARGUMENT,
                        "select: expected on_true and on_false of one dtype, "
                        "got %s and %s",
                        em__describe(on_true, &dt),
                        em__describe(on_false, &df));
    em_array *inputs[3] = {pred, on_true, on_false};
    int64_t shape[EM_MAX_NDIM];
    int ndim;
    em_status st = em_ew_broadcast("select", inputs, 3, shape, &ndim);
    if (st != EM_OK)
        return st;
    return em__node_new(&select_prim, on_true->dtype, shape, ndim, inputs, 3,
                        out);
}

/* ------------------------------------------------------------------------ */
/* clip                                                                      */
/* ------------------------------------------------------------------------ */

/* Float bounds and values propagate NaN, as maximum/minimum do. */
#define CLIP_DEFINE_KERNEL(cls, E, sfx, S, C)                                  \
    EM_CLONES static void clip_kernel_##sfx(                                   \
        int op, void *out, const void *const *in, int64_t n) {                 \
        EM_EW_DTYPE_SCOPE(E, sfx, S, C);                                       \
        const ew_stor *a = in[0], *lo = in[1], *hi = in[2];                    \
        ew_stor *o = out;                                                      \
        for (int64_t i = 0; i < n; i++) {                                      \
            ew_comp x = ew_load(a[i]), l = ew_load(lo[i]), h = ew_load(hi[i]); \
            ew_comp m = EM_EW_##cls##_MAX(x, l);                               \
            o[i] = ew_store(EM_EW_##cls##_MIN(m, h));                          \
        }                                                                      \
    }
#define CLIP_KERNEL_INT(E, sfx, S, C, L, ST)                                   \
    CLIP_DEFINE_KERNEL(INT, E, sfx, S, C)
#define CLIP_KERNEL_FLT(E, sfx, S, C, L, ST)                                   \
    CLIP_DEFINE_KERNEL(FLT, E, sfx, S, C)
EM_DTYPES_INT(CLIP_KERNEL_INT)
EM_DTYPES_REALFLOAT(CLIP_KERNEL_FLT)

#define CLIP_KERNEL_ENTRY(E, sfx, S, C, L, ST) [E] = clip_kernel_##sfx,
static const em_ew_kernel clip_kernels[EM_DTYPE_COUNT] = {
    EM_DTYPES_REAL(CLIP_KERNEL_ENTRY)};

static em_status clip_eval(em_array *node) {
    return em_ew_eval(node, clip_kernels[node->dtype], 0, EM_PARALLEL_GRAIN);
}

static const em_prim clip_prim = {"clip", clip_eval, em__vjp_clip,
                                  em__gpu_clip_eval};

em_status em_clip(em_array *a, em_array *lo, em_array *hi, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "clip: out is NULL");
    *out = NULL;
    if (!a || !lo || !hi)
        return em__fail(EM_ERR_ARGUMENT, "clip: input is NULL");
    em_desc da, dl, dh;
    if (lo->dtype != a->dtype || hi->dtype != a->dtype)
        return em__fail(EM_ERR_ARGUMENT,
                        "clip: expected lo and hi of a's dtype, got a %s, "
                        "lo %s, hi %s",
                        em__describe(a, &da), em__describe(lo, &dl),
                        em__describe(hi, &dh));
    if (!EM_ACCEPTS_REAL(a->dtype))
        return em__fail(EM_ERR_ARGUMENT, "clip: expected %s, got %s",
                        em_ew_accepts_text("REAL"), em__describe(a, &da));
    em_array *inputs[3] = {a, lo, hi};
    int64_t shape[EM_MAX_NDIM];
    int ndim;
    em_status st = em_ew_broadcast("clip", inputs, 3, shape, &ndim);
    if (st != EM_OK)
        return st;
    if (ndim != a->ndim ||
        memcmp(shape, a->shape, sizeof(int64_t) * (size_t)ndim) != 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "clip: expected lo and hi to broadcast to a's shape, "
                        "got a %s, lo %s, hi %s",
                        em__describe(a, &da), em__describe(lo, &dl),
                        em__describe(hi, &dh));
    return em__node_new(&clip_prim, a->dtype, a->shape, a->ndim, inputs, 3,
                        out);
}

/* ---- for the fusion pass (elementwise_internal.h) ---------------------- */

bool em__select_op_of(const em_array *node, int *op, em_dtype *kernel_dtype) {
    if (node->prim != &select_prim)
        return false;
    *op = (int)em_dtype_size(node->dtype);
    *kernel_dtype = node->inputs[0]->dtype;
    return true;
}

em_ew_kernel em__select_kernel(em_dtype dtype) { return select_kernels[dtype]; }

bool em__clip_op_of(const em_array *node, int *op, em_dtype *kernel_dtype) {
    if (node->prim != &clip_prim)
        return false;
    *op = 0;
    *kernel_dtype = node->dtype;
    return true;
}

em_ew_kernel em__clip_kernel(em_dtype dtype) { return clip_kernels[dtype]; }
