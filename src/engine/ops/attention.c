/*
 * attention.c — em_sdpa: fused scaled dot-product attention on the CPU
 * (include/emily_attention.h).
 *
 * The kernel (attention_kernel.h, instantiated below for f16, bf16, f32
 * and f64) runs flash-attention style: a task owns a block of query rows
 * of one (batch, KV head), the query heads of its group together, and
 * walks the keys in tiles of SDPA_TK with an online softmax, so memory is
 * O(rows x (D + Dv)) whatever Lk is.
 *
 * Two schedules:
 *   prefill  tasks (b, kvh, block of SDPA_RB rows): enough of them once
 *            there are a few dozen query rows.
 *   decode   Lq <= SDPA_DECODE_LQ over many keys: a (b, kvh) has only
 *            G * Lq rows, so the keys are split into chunks instead
 *            (flash-decoding); each (b, kvh, chunk) task leaves its rows'
 *            max, denominator and unnormalised output in a scratch buffer
 *            and a combine step rescales and sums them. One token over a
 *            4k cache then spreads over every thread even with one KV
 *            head.
 */
#include "internal.h"

#include "attention_params.h"
#include "emily_attention.h"

#include <stdlib.h>

#define SDPA_LANES 16        /* keys / output columns per register block */
#define SDPA_TK 64           /* keys per tile */
#define SDPA_RB 32           /* query rows per prefill task */
#define SDPA_DECODE_LQ 4     /* at most this many queries: decode schedule */
#define SDPA_MIN_CHUNK 256   /* keys per decode chunk, at least */
#define SDPA_ROWS_IN_PLACE 8 /* rows up to which K is read in place */

/* exp(x) for the softmax weights, x <= 0 or -inf (never above 0 there):
 * written so that loops over it vectorise (libm's expf does not).
 * exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln2 / 2, exp(r) by its
 * degree-7 Taylor polynomial (relative error below 1e-8); below -87 the
 * result is flushed to 0 (weights that small do not change a float sum). */
static inline float sdpa_expf(float x) {
    const float big = 12582912.0f; /* 1.5 * 2^23: adding it rounds to int */
    float xc = x < -87.0f ? -87.0f : x;
    float n = (xc * 1.44269504f + big) - big;
    float r = xc - n * 0.693359375f; /* ln 2, split hi + lo */
    r = r - n * -2.12194440e-4f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, 4);
    float y = p * two_n;
    return x < -87.0f ? 0.0f : (x != x ? x : y);
}
#define sdpa_exp(x) _Generic((x), float : sdpa_expf, default : exp)(x)

/* One evaluation: the geometry, the operands at their offsets with their
 * strides (elements), and the decode schedule's scratch. */
typedef struct sdpa_job {
    int64_t B, H, Hkv, G, Lq, Lk, D, Dv;
    double scale;
    int causal, mask_kind;
    const void *q, *k, *v, *mask, *sinks;
    int64_t qs[4], ks[4], vs[4], ms[4], sinks_stride;
    void *out;
    int64_t nchunks, chunk;
    void *partial; /* decode: [b, kvh, chunk][row][m, l, acc[Dv]] */
    size_t csize;  /* bytes of the compute type */
    atomic_bool oom;
} sdpa_job;

/* A task's scratch, one allocation (64-byte aligned parts). */
typedef struct sdpa_scratch {
    void *base;
    void *q, *kt, *v, *s, *acc, *m, *l, *mrow;
} sdpa_scratch;

static bool sdpa_scratch_new(sdpa_job *jb, size_t csize, int64_t rows,
                             sdpa_scratch *sc) {
    const int64_t r4 = (rows + 3) & ~(int64_t)3;
    const int64_t D = jb->D > 0 ? jb->D : 1, Dv = jb->Dv > 0 ? jb->Dv : 1;
    const int64_t counts[8] = {r4 * D,  D * SDPA_TK, SDPA_TK * Dv, r4 * SDPA_TK,
                               r4 * Dv, r4,          r4,           SDPA_TK};
    size_t off[8], total = 0;
    for (int i = 0; i < 8; i++) {
        off[i] = total;
        total += ((size_t)counts[i] * csize + 63) & ~(size_t)63;
    }
    char *base = aligned_alloc(64, total);
    if (!base) {
        atomic_store(&jb->oom, true);
        memset(sc, 0, sizeof *sc);
        return false;
    }
    sc->base = base;
    sc->q = base + off[0];
    sc->kt = base + off[1];
    sc->v = base + off[2];
    sc->s = base + off[3];
    sc->acc = base + off[4];
    sc->m = base + off[5];
    sc->l = base + off[6];
    sc->mrow = base + off[7];
    return true;
}
typedef struct sdpa_kernel {
    em_range_fn prefill, decode, combine;
    size_t csize;
} sdpa_kernel;

#define SDPA_SFX f16
#define SDPA_S em_f16_t
#define SDPA_C float
#define SDPA_LOAD em_f16_to_f32
#define SDPA_STORE em_f32_to_f16
#define SDPA_DIRECT 0
#include "attention_kernel.h"

#define SDPA_SFX bf16
#define SDPA_S em_bf16_t
#define SDPA_C float
#define SDPA_LOAD em_bf16_to_f32
#define SDPA_STORE em_f32_to_bf16
#define SDPA_DIRECT 0
#include "attention_kernel.h"

#define SDPA_SFX f32
#define SDPA_S float
#define SDPA_C float
#define SDPA_LOAD EM_LOAD_ID
#define SDPA_STORE EM_STORE_ID
#define SDPA_DIRECT 1
#include "attention_kernel.h"

#define SDPA_SFX f64
#define SDPA_S double
#define SDPA_C double
#define SDPA_LOAD EM_LOAD_ID
#define SDPA_STORE EM_STORE_ID
#define SDPA_DIRECT 1
#include "attention_kernel.h"

static const sdpa_kernel *sdpa_kernel_for(em_dtype dtype) {
    switch (dtype) {
    case EM_F16:
        return &sdpa_kernel_f16;
    case EM_BF16:
        return &sdpa_kernel_bf16;
    case EM_F32:
        return &sdpa_kernel_f32;
    case EM_F64:
        return &sdpa_kernel_f64;
    default:
        return NULL;
    }
}

/* a's strides broadcast (right-aligned) to rank 4: 0 on missing and
 * size-1 axes. */
static void sdpa_strides4(const em_array *a, int64_t out[4]) {
    for (int i = 0; i < 4; i++) {
        int ai = a->ndim - 4 + i;
        out[i] = ai >= 0 && a->shape[ai] != 1 ? a->strides[ai] : 0;
    }
}

static em_status sdpa_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const sdpa_params *p = node->params;
    const em_array *q = node->inputs[0], *k = node->inputs[1],
                   *v = node->inputs[2];
    const sdpa_kernel *kn = sdpa_kernel_for(node->dtype);
    sdpa_job jb;
    memset(&jb, 0, sizeof jb);
    jb.B = q->shape[0];
    jb.H = q->shape[1];
    jb.Lq = q->shape[2];
    jb.D = q->shape[3];
    jb.Hkv = k->shape[1];
    jb.Lk = k->shape[2];
    jb.Dv = v->shape[3];
    jb.G = jb.H / jb.Hkv;
    jb.scale = p->scale;
    jb.causal = p->causal;
    jb.mask_kind = p->mask_kind;
    jb.q = em__data(q);
    jb.k = em__data(k);
    jb.v = em__data(v);
    jb.out = em__data(node);
    jb.csize = kn->csize;
    atomic_init(&jb.oom, false);
    memcpy(jb.qs, q->strides, sizeof jb.qs);
    memcpy(jb.ks, k->strides, sizeof jb.ks);
    memcpy(jb.vs, v->strides, sizeof jb.vs);
    int next = 3;
    if (p->mask_kind != SDPA_MASK_NONE) {
        const em_array *mask = node->inputs[next++];
        jb.mask = em__data(mask);
        sdpa_strides4(mask, jb.ms);
    }
    if (p->has_sinks) {
        const em_array *sinks = node->inputs[next++];
        jb.sinks = em__data(sinks);
        jb.sinks_stride = sinks->strides[0];
    }

    const int64_t R = jb.G * jb.Lq, BH = jb.B * jb.Hkv;
    const int64_t per_key = jb.D + jb.Dv + 8;
    const int threads = em__num_threads();
    int64_t nchunks = 1;
    if (jb.Lq <= SDPA_DECODE_LQ && jb.Lk >= 2 * SDPA_MIN_CHUNK) {
        /* enough (b, kvh, chunk) tasks for a few per thread */
        int64_t want = (4 * threads + BH - 1) / BH;
        int64_t most = jb.Lk / SDPA_MIN_CHUNK;
        nchunks = want < most ? want : most;
    }
    if (nchunks > 1) {
        jb.nchunks = nchunks;
        jb.chunk = (jb.Lk + nchunks - 1) / nchunks;
        jb.chunk = (jb.chunk + SDPA_TK - 1) / SDPA_TK * SDPA_TK;
        jb.nchunks = (jb.Lk + jb.chunk - 1) / jb.chunk;
        size_t bytes = (size_t)(BH * jb.nchunks * R * (jb.Dv + 2)) * kn->csize;
        jb.partial = malloc(bytes ? bytes : 1);
        if (!jb.partial)
            return em__fail(EM_ERR_OOM,
                            "sdpa: out of memory for the decode partials "
                            "(%zu bytes)",
                            bytes);
        em__parallel_units(BH * jb.nchunks, R * jb.chunk * per_key, kn->decode,
                           &jb);
        if (!atomic_load(&jb.oom))
            em__parallel_units(BH, R * jb.nchunks * jb.Dv, kn->combine, &jb);
        free(jb.partial);
    } else {
        const int64_t nblk = (R + SDPA_RB - 1) / SDPA_RB;
        const int64_t rows = R < SDPA_RB ? R : SDPA_RB;
        em__parallel_units(BH * nblk, rows * (jb.Lk > 0 ? jb.Lk : 1) * per_key,
                           kn->prefill, &jb);
    }
    if (atomic_load(&jb.oom))
        return em__fail(EM_ERR_OOM, "sdpa: out of memory for a task's scratch");
    return EM_OK;
}

static const em_prim sdpa_prim = {"sdpa", sdpa_eval, em__vjp_sdpa,
                                  em__gpu_sdpa_eval};

static bool sdpa_dtype_ok(em_dtype d) {
    return d == EM_F16 || d == EM_BF16 || d == EM_F32 || d == EM_F64;
}

em_status em_sdpa(em_array *q, em_array *k, em_array *v,
                  const em_sdpa_options *opts, em_array **out) {
    if (out)
        *out = NULL;
    if (!q || !k || !v || !out)
        return em__fail(EM_ERR_ARGUMENT, "sdpa: NULL argument");
    em_sdpa_options zero;
    if (!opts) {
        memset(&zero, 0, sizeof zero);
        opts = &zero;
    }
    em_desc dq, dk, dv, dm;
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return em__fail(EM_ERR_ARGUMENT,
                        "sdpa: q %s, k %s and v %s must have rank 4 "
                        "(batch, heads, sequence, head_dim)",
                        em__describe(q, &dq), em__describe(k, &dk),
                        em__describe(v, &dv));
    if (q->dtype != k->dtype || q->dtype != v->dtype ||
        !sdpa_dtype_ok(q->dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "sdpa: q %s, k %s and v %s must share one dtype of "
                        "f16, bf16, f32 or f64",
                        em__describe(q, &dq), em__describe(k, &dk),
                        em__describe(v, &dv));
    const int64_t B = q->shape[0], H = q->shape[1], Lq = q->shape[2],
                  D = q->shape[3];
    const int64_t Hkv = k->shape[1], Lk = k->shape[2];
    if (k->shape[0] != B || v->shape[0] != B || v->shape[1] != Hkv ||
        v->shape[2] != Lk || k->shape[3] != D || Hkv < 1 || H % Hkv != 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "sdpa: q %s, k %s and v %s do not fit: expected q "
                        "(B, H, Lq, D), k (B, Hkv, Lk, D), v (B, Hkv, Lk, Dv) "
                        "with H a multiple of Hkv >= 1",
                        em__describe(q, &dq), em__describe(k, &dk),
                        em__describe(v, &dv));
    sdpa_params p;
    memset(&p, 0, sizeof p);
    p.scale =
        opts->scale != 0 ? opts->scale : (D > 0 ? 1 / sqrt((double)D) : 1);
    if (!isfinite(p.scale))
        return em__fail(EM_ERR_ARGUMENT, "sdpa: scale %g must be finite",
                        opts->scale);
    p.causal = opts->causal;
    em_array *inputs[5] = {q, k, v, NULL, NULL};
    int n = 3;
    if (opts->mask) {
        em_array *m = opts->mask;
        const int64_t full[4] = {B, H, Lq, Lk};
        bool fits = m->ndim <= 4;
        for (int i = 0; fits && i < m->ndim; i++) {
            int64_t want = full[4 - m->ndim + i];
            fits = m->shape[i] == want || m->shape[i] == 1;
        }
        if (!fits || (m->dtype != EM_PRED && m->dtype != q->dtype))
            return em__fail(EM_ERR_ARGUMENT,
                            "sdpa: mask %s must broadcast to (B, H, Lq, Lk) "
                            "= (%lld, %lld, %lld, %lld) and be pred or of "
                            "q's dtype (q %s, k %s)",
                            em__describe(m, &dm), (long long)B, (long long)H,
                            (long long)Lq, (long long)Lk, em__describe(q, &dq),
                            em__describe(k, &dk));
        p.mask_kind = m->dtype == EM_PRED ? SDPA_MASK_BOOL : SDPA_MASK_ADDITIVE;
        inputs[n++] = m;
    }
    if (opts->sinks) {
        em_array *s = opts->sinks;
        if (s->ndim != 1 || s->shape[0] != H || s->dtype != q->dtype)
            return em__fail(EM_ERR_ARGUMENT,
                            "sdpa: sinks %s must have shape (H) = (%lld) and "
                            "q's dtype (q %s)",
                            em__describe(s, &dm), (long long)H,
                            em__describe(q, &dq));
        p.has_sinks = 1;
        inputs[n++] = s;
    }
    const int64_t shape[4] = {B, H, Lq, v->shape[3]};
    em_status st = em__check_shape("sdpa", shape, 4, q->dtype, NULL);
    if (st != EM_OK)
        return st;
    return em__node_new_params(&sdpa_prim, q->dtype, shape, 4, inputs, n, &p,
                               sizeof p, out);
}
