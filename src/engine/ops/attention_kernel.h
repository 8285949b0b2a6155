/*
 * attention_kernel.h — the CPU attention kernel, written once and
 * instantiated by ops/attention.c for each dtype: it is included once per
 * dtype with
 *   SDPA_SFX    name suffix (f32, ...)
 *   SDPA_S      storage type, SDPA_C compute type (float, or double for f64)
 *   SDPA_LOAD   storage -> compute, SDPA_STORE compute -> storage
 *   SDPA_DIRECT 1 when storage == compute (V tiles are then read in place)
 * and undefines them at the end. The shared definitions (sdpa_job, the
 * tile sizes, the scratch layout, sdpa_exp) are in attention.c.
 *
 * One task owns `nr` query rows of one (batch b, KV head kvh): row r is
 * query position i = r / G of query head kvh * G + r % G, so that the
 * heads sharing a KV head read each K/V tile once. For each tile of TK
 * keys it
 *   1. loads the tile of K transposed into KT[d][j] (compute type, padded
 *      to a multiple of SDPA_LANES keys with zeros) and V as rows (in place
 *      when SDPA_DIRECT and V's last axis is contiguous);
 *   2. computes the scores of four rows at a time against SDPA_LANES keys
 *      held in registers (q was scaled when it was loaded); with at most
 *      SDPA_ROWS_IN_PLACE rows (decoding) K is read in place instead, a
 *      key at a time, and the transposed copy is skipped;
 *   3. applies the mask and the causal limit, updates each row's running
 *      max m and denominator l and rescales its accumulator (online
 *      softmax), turning the scores into weights;
 *   4. accumulates weights x V into the rows' accumulators, four rows and
 *      SDPA_LANES output columns at a time.
 */
#define SDPA_CAT2(a, b) a##_##b
#define SDPA_CAT(a, b) SDPA_CAT2(a, b)
#define SN(name) SDPA_CAT(name, SDPA_SFX)
/* Fully unrolls the loops over a register block's rows and column blocks
 * so that its accumulators stay in registers. */
#ifndef SDPA_UNROLL
#if defined(__clang__)
#define SDPA_UNROLL _Pragma("clang loop unroll(full)")
#else
#define SDPA_UNROLL _Pragma("GCC unroll 16")
#endif
#endif

/* dst[r * d_rs + c * d_cs] = LOAD(src[r * rs + c * cs]). */
EM_CLONES static void SN(sdpa_load)(SDPA_C *restrict dst, int64_t d_rs,
                                    int64_t d_cs, const SDPA_S *restrict src,
                                    int64_t rs, int64_t cs, int64_t rows,
                                    int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        SDPA_C *d = dst + r * d_rs;
        const SDPA_S *s = src + r * rs;
        if (cs == 1 && d_cs == 1) {
            for (int64_t c = 0; c < cols; c++)
                d[c] = SDPA_LOAD(s[c]);
        } else {
            for (int64_t c = 0; c < cols; c++)
                d[c * d_cs] = SDPA_LOAD(s[c * cs]);
        }
    }
}

/* SDPA_LANES compute values as one GCC vector: the register blocks of the
 * two loops below stay in registers (one zmm, two ymm or four xmm per
 * block, whichever clone runs). */
typedef SDPA_C SN(sdpa_vec)
    __attribute__((vector_size(SDPA_LANES * sizeof(SDPA_C))));

/* Sc[r][j] = Q[r] . KT[:, j] for r < nr4 (a multiple of 4), j < tkp (a
 * multiple of SDPA_LANES). */
EM_CLONES static void SN(sdpa_scores)(const SDPA_C *restrict Q, int64_t D,
                                      const SDPA_C *restrict KT, int64_t tkp,
                                      SDPA_C *restrict Sc, int64_t nr4) {
    typedef SN(sdpa_vec) vec;
    for (int64_t r = 0; r < nr4; r += 4) {
        const SDPA_C *q0 = Q + r * D, *q1 = q0 + D, *q2 = q1 + D, *q3 = q2 + D;
        for (int64_t jb = 0; jb < tkp; jb += SDPA_LANES) {
            vec a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (int64_t d = 0; d < D; d++) {
                vec kt;
                memcpy(&kt, KT + d * tkp + jb, sizeof kt);
                a0 += q0[d] * kt;
                a1 += q1[d] * kt;
                a2 += q2[d] * kt;
                a3 += q3[d] * kt;
            }
            SDPA_C *s = Sc + r * tkp + jb;
            memcpy(s, &a0, sizeof a0);
            memcpy(s + tkp, &a1, sizeof a1);
            memcpy(s + 2 * tkp, &a2, sizeof a2);
            memcpy(s + 3 * tkp, &a3, sizeof a3);
        }
    }
}

/* The sum of a vector's lanes as a halving tree (lane l plus lane l + w
 * for w = LANES/2, ..., 1): log2(LANES) dependent vector adds where a
 * running sum would chain LANES scalar ones (which made this the decode
 * step's hottest loop); the order is fixed by SDPA_LANES, not by the clone
 * that runs. */
static inline __attribute__((always_inline)) SDPA_C
SN(sdpa_hsum)(const SN(sdpa_vec) * v) {
    _Static_assert(SDPA_LANES == 16, "sdpa_hsum halves 16 lanes");
    /* By pointer: a vector argument's ABI depends on the clone's ISA. */
    SN(sdpa_vec) a = *v;
    a += __builtin_shufflevector(a, a, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10,
                                 11, 12, 13, 14, 15);
    a += __builtin_shufflevector(a, a, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5,
                                 6, 7);
    a += __builtin_shufflevector(a, a, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
                                 2, 3);
    a += __builtin_shufflevector(a, a, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                 1, 1);
    return a[0];
}

/* Row r's score against key j, K's rows read in place (ldk apart, last axis
 * contiguous) and converted on the fly, for `nrows` (1 or 4) rows sharing
 * each key's loads. */
#define SDPA_SCORES_IN_PLACE(nrows)                                            \
    for (int64_t j = 0; j < tk; j++) {                                         \
        const SDPA_S *k = K + j * ldk;                                         \
        vec a[nrows] = {{0}};                                                  \
        for (int64_t d = 0; d < Dl; d += SDPA_LANES) {                         \
            SDPA_C kc[SDPA_LANES];                                             \
            SDPA_UNROLL                                                        \
            for (int l = 0; l < SDPA_LANES; l++)                               \
                kc[l] = SDPA_LOAD(k[d + l]);                                   \
            vec kv;                                                            \
            memcpy(&kv, kc, sizeof kv);                                        \
            SDPA_UNROLL                                                        \
            for (int i = 0; i < (nrows); i++) {                                \
                vec x;                                                         \
                memcpy(&x, Q + (r + i) * D + d, sizeof x);                     \
                a[i] += x * kv;                                                \
            }                                                                  \
        }                                                                      \
        SDPA_UNROLL                                                            \
        for (int i = 0; i < (nrows); i++) {                                    \
            SDPA_C sum = SN(sdpa_hsum)(&a[i]);                                 \
            for (int64_t d = Dl; d < D; d++)                                   \
                sum += Q[(r + i) * D + d] * SDPA_LOAD(k[d]);                   \
            Sc[(r + i) * tkp + j] = sum;                                       \
        }                                                                      \
    }

/* The scores of the nr real rows (of the nr4 in the block) with K's rows
 * read in place, a key at a time: for the few rows of a decoding step a
 * transposed copy of the tile would cost more than the dot products it
 * feeds. Rows in fours, then one at a time: a decoding step without
 * grouped heads has one row, and computing the block's padding rows
 * quadrupled its work. The padding rows' scores are left to the caller. */
EM_CLONES static void SN(sdpa_scores_rows)(const SDPA_C *restrict Q, int64_t D,
                                           const SDPA_S *restrict K,
                                           int64_t ldk, int64_t tk,
                                           SDPA_C *restrict Sc, int64_t tkp,
                                           int64_t nr) {
    typedef SN(sdpa_vec) vec;
    const int64_t Dl = D & ~(int64_t)(SDPA_LANES - 1);
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4)
        SDPA_SCORES_IN_PLACE(4)
    for (; r < nr; r++)
        SDPA_SCORES_IN_PLACE(1)
}
#undef SDPA_SCORES_IN_PLACE

/* One row's online-softmax step over its tk scores s (masked ones -inf):
 * s becomes the weights exp(s - m'), m and l are updated, acc rescaled.
 * Columns tk..tkp of s are zeroed so that the accumulation can run over
 * whole lanes. */
EM_CLONES static void SN(sdpa_softmax_row)(SDPA_C *restrict s, int64_t tk,
                                           int64_t tkp, SDPA_C *m, SDPA_C *l,
                                           SDPA_C *restrict acc, int64_t Dv) {
    SDPA_C lanes[SDPA_LANES];
    for (int i = 0; i < SDPA_LANES; i++)
        lanes[i] = -INFINITY;
    int64_t j = 0;
    for (; j + SDPA_LANES <= tk; j += SDPA_LANES)
        for (int i = 0; i < SDPA_LANES; i++)
            lanes[i] = s[j + i] > lanes[i] ? s[j + i] : lanes[i];
    SDPA_C tmax = -INFINITY;
    for (int i = 0; i < SDPA_LANES; i++)
        tmax = lanes[i] > tmax ? lanes[i] : tmax;
    for (; j < tk; j++)
        tmax = s[j] > tmax ? s[j] : tmax;
    const SDPA_C mold = *m, mnew = tmax > mold ? tmax : mold;
    if (mnew == -INFINITY) { /* nothing unmasked so far */
        for (j = 0; j < tkp; j++)
            s[j] = 0;
        return;
    }
    for (j = 0; j < tk; j++)
        s[j] = sdpa_exp(s[j] - mnew);
    for (; j < tkp; j++)
        s[j] = 0;
    for (int i = 0; i < SDPA_LANES; i++)
        lanes[i] = 0;
    for (j = 0; j < tkp; j += SDPA_LANES)
        for (int i = 0; i < SDPA_LANES; i++)
            lanes[i] += s[j + i];
    SDPA_C sum = 0;
    for (int i = 0; i < SDPA_LANES; i++)
        sum += lanes[i];
    const SDPA_C corr = sdpa_exp(mold - mnew); /* 0 when mold is -inf */
    *l = *l * corr + sum;
    *m = mnew;
    if (corr != 1)
        for (int64_t e = 0; e < Dv; e++)
            acc[e] *= corr;
}

/* acc[r][e] += sum_{j < tk} P[r][j] * V[j][e] for `nrows` rows from r,
 * `nblk` blocks of SDPA_LANES output columns at a time (nrows x nblk
 * independent accumulators, so that the FMAs do not wait on each other);
 * V rows ldv apart. */
#define SDPA_ACCUMULATE(nrows, nblk)                                           \
    for (; eb + (nblk)*SDPA_LANES <= Dv; eb += (nblk)*SDPA_LANES) {            \
        vec a[nrows][nblk];                                                    \
        SDPA_UNROLL                                                            \
        for (int i = 0; i < (nrows); i++)                                      \
            SDPA_UNROLL                                                        \
        for (int c = 0; c < (nblk); c++)                                       \
            memcpy(&a[i][c], acc + (r + i) * Dv + eb + c * SDPA_LANES,         \
                   sizeof a[i][c]);                                            \
        for (int64_t j = 0; j < tk; j++)                                       \
            SDPA_UNROLL                                                        \
        for (int c = 0; c < (nblk); c++) {                                     \
            vec vj;                                                            \
            memcpy(&vj, V + j * ldv + eb + c * SDPA_LANES, sizeof vj);         \
            SDPA_UNROLL                                                        \
            for (int i = 0; i < (nrows); i++)                                  \
                a[i][c] += P[(r + i) * tkp + j] * vj;                          \
        }                                                                      \
        SDPA_UNROLL                                                            \
        for (int i = 0; i < (nrows); i++)                                      \
            SDPA_UNROLL                                                        \
        for (int c = 0; c < (nblk); c++)                                       \
            memcpy(acc + (r + i) * Dv + eb + c * SDPA_LANES, &a[i][c],         \
                   sizeof a[i][c]);                                            \
    }

/* The columns past the last whole block, for rows [r, r + nrows). */
#define SDPA_ACCUMULATE_TAIL(nrows)                                            \
    for (int64_t j = 0; eb < Dv && j < tk; j++)                                \
        SDPA_UNROLL                                                            \
    for (int i = 0; i < (nrows); i++)                                          \
        for (int64_t e = eb; e < Dv; e++)                                      \
            acc[(r + i) * Dv + e] += P[(r + i) * tkp + j] * V[j * ldv + e];

/* The nr real rows (padding rows have no weight): in fours, sharing each
 * V row's loads, then one at a time over four column blocks. */
EM_CLONES static void SN(sdpa_accumulate)(const SDPA_C *restrict P, int64_t tkp,
                                          int64_t tk, const SDPA_C *restrict V,
                                          int64_t ldv, int64_t Dv,
                                          SDPA_C *restrict acc, int64_t nr) {
    typedef SN(sdpa_vec) vec;
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4) {
        int64_t eb = 0;
        SDPA_ACCUMULATE(4, 1)
        SDPA_ACCUMULATE_TAIL(4)
    }
    for (; r < nr; r++) {
        int64_t eb = 0;
        SDPA_ACCUMULATE(1, 4)
        SDPA_ACCUMULATE(1, 1)
        SDPA_ACCUMULATE_TAIL(1)
    }
}
#undef SDPA_ACCUMULATE
#undef SDPA_ACCUMULATE_TAIL

/* Rows [r0, r0 + nr) of (b, kvh) over keys [j_begin, j_end): the rows'
 * m, l and acc (nr rounded up to 4 rows, set up by the caller) are
 * updated. The scratch's Q block holds the rows' scaled queries. */
static void SN(sdpa_attend)(const sdpa_job *jb, sdpa_scratch *sc, int64_t b,
                            int64_t kvh, int64_t r0, int64_t nr,
                            int64_t j_begin, int64_t j_end) {
    const int64_t D = jb->D, Dv = jb->Dv, G = jb->G;
    const int64_t nr4 = (nr + 3) & ~(int64_t)3;
    const SDPA_S *kb = (const SDPA_S *)jb->k + b * jb->ks[0] + kvh * jb->ks[1];
    const SDPA_S *vb = (const SDPA_S *)jb->v + b * jb->vs[0] + kvh * jb->vs[1];
    const bool v_in_place = SDPA_DIRECT && jb->vs[3] == 1;
    const bool k_rows = nr4 <= SDPA_ROWS_IN_PLACE && jb->ks[3] == 1;
    SDPA_C *KT = sc->kt, *Sc = sc->s, *Vt = sc->v, *mrow = sc->mrow;
    SDPA_C *m = sc->m, *l = sc->l, *acc = sc->acc;
    const SDPA_C *Q = sc->q;
    for (int64_t j0 = j_begin; j0 < j_end; j0 += SDPA_TK) {
        const int64_t tk = j_end - j0 < SDPA_TK ? j_end - j0 : SDPA_TK;
        const int64_t tkp = (tk + SDPA_LANES - 1) & ~(int64_t)(SDPA_LANES - 1);
        /* 1. the tiles (K transposed only when enough rows share it) */
        if (!k_rows) {
            SN(sdpa_load)
            (KT, 1, tkp, kb + j0 * jb->ks[2], jb->ks[2], jb->ks[3], tk, D);
            if (tkp > tk)
                for (int64_t d = 0; d < D; d++)
                    memset(KT + d * tkp + tk, 0,
                           (size_t)(tkp - tk) * sizeof(SDPA_C));
        }
        const SDPA_C *V;
        int64_t ldv;
        if (v_in_place) {
            V = (const SDPA_C *)(const void *)(vb + j0 * jb->vs[2]);
            ldv = jb->vs[2];
        } else {
            SN(sdpa_load)
            (Vt, Dv, 1, vb + j0 * jb->vs[2], jb->vs[2], jb->vs[3], tk, Dv);
            V = Vt;
            ldv = Dv;
        }
        /* 2. scores */
        if (k_rows)
            SN(sdpa_scores_rows)
        (Q, D, kb + j0 * jb->ks[2], jb->ks[2], tk, Sc, tkp, nr);
        else SN(sdpa_scores)(Q, D, KT, tkp, Sc, nr4);
        /* 3. mask, causal limit, online softmax */
        for (int64_t r = 0; r < nr4; r++) {
            SDPA_C *s = Sc + r * tkp;
            if (r >= nr) { /* padding rows: no weight */
                memset(s, 0, (size_t)tkp * sizeof(SDPA_C));
                continue;
            }
            const int64_t row = r0 + r, i = row / G, h = kvh * G + row % G;
            if (jb->mask) {
                const int64_t moff =
                    b * jb->ms[0] + h * jb->ms[1] + i * jb->ms[2];
                if (jb->mask_kind == SDPA_MASK_BOOL) {
                    const uint8_t *mk = (const uint8_t *)jb->mask + moff;
                    for (int64_t j = 0; j < tk; j++)
                        if (!mk[(j0 + j) * jb->ms[3]])
                            s[j] = -INFINITY;
                } else {
                    SN(sdpa_load)
                    (mrow, 0, 1,
                     (const SDPA_S *)jb->mask + moff + j0 * jb->ms[3], 0,
                     jb->ms[3], 1, tk);
                    for (int64_t j = 0; j < tk; j++)
                        s[j] += mrow[j];
                }
            }
            if (jb->causal) {
                const int64_t limit = i + jb->Lk - jb->Lq; /* last key */
                int64_t first = limit + 1 - j0;
                for (int64_t j = first < 0 ? 0 : first; j < tk; j++)
                    s[j] = -INFINITY;
            }
            SN(sdpa_softmax_row)
            (s, tk, tkp, &m[r], &l[r], acc + r * Dv, Dv);
        }
        /* 4. weights x V */
        SN(sdpa_accumulate)(Sc, tkp, tk, V, ldv, Dv, acc, nr);
    }
}

/* Load rows [r0, r0 + nr) of (b, kvh)'s queries, scaled, into the Q
 * block (rows up to a multiple of 4 zeroed) and reset m, l and acc. */
static void SN(sdpa_begin)(const sdpa_job *jb, sdpa_scratch *sc, int64_t b,
                           int64_t kvh, int64_t r0, int64_t nr) {
    const int64_t D = jb->D, Dv = jb->Dv, G = jb->G;
    const int64_t nr4 = (nr + 3) & ~(int64_t)3;
    SDPA_C *Q = sc->q, *m = sc->m, *l = sc->l, *acc = sc->acc;
    for (int64_t r = 0; r < nr4; r++) {
        SDPA_C *dst = Q + r * D;
        m[r] = -INFINITY;
        l[r] = 0;
        memset(acc + r * Dv, 0, (size_t)Dv * sizeof(SDPA_C));
        if (r >= nr) {
            memset(dst, 0, (size_t)D * sizeof(SDPA_C));
            continue;
        }
        const int64_t row = r0 + r, i = row / G, h = kvh * G + row % G;
        const SDPA_S *src = (const SDPA_S *)jb->q + b * jb->qs[0] +
                            h * jb->qs[1] + i * jb->qs[2];
        SN(sdpa_load)(dst, 0, 1, src, 0, jb->qs[3], 1, D);
        const SDPA_C scale = (SDPA_C)jb->scale;
        for (int64_t d = 0; d < D; d++)
            dst[d] *= scale;
    }
}

/* The output row of head h, query i from its final m, l and acc
 * (attention.c's sdpa_finish_row for the sinks and fully masked rows). */
static void SN(sdpa_store_row)(const sdpa_job *jb, int64_t b, int64_t h,
                               int64_t i, SDPA_C m, SDPA_C l,
                               const SDPA_C *acc) {
    SDPA_S *dst = (SDPA_S *)jb->out + ((b * jb->H + h) * jb->Lq + i) * jb->Dv;
    SDPA_C factor = 0;
    if (m != -INFINITY) {
        if (jb->sinks) {
            SDPA_C sink;
            SN(sdpa_load)
            (&sink, 0, 1, (const SDPA_S *)jb->sinks + h * jb->sinks_stride, 0,
             1, 1, 1);
            /* exp(m - M) / (l exp(m - M) + exp(sink - M)), M = max(m, sink),
             * so that neither exponential overflows */
            const SDPA_C M = sink > m ? sink : m;
            const SDPA_C a = (SDPA_C)exp((double)(m - M));
            factor = a / (l * a + (SDPA_C)exp((double)(sink - M)));
        } else {
            factor = 1 / l;
        }
    }
    for (int64_t e = 0; e < jb->Dv; e++)
        dst[e] = SDPA_STORE(acc[e] * factor);
}

/* Prefill units: (b, kvh, block of SDPA_RB rows). */
static void SN(sdpa_prefill)(void *ctx, int64_t begin, int64_t end) {
    sdpa_job *jb = ctx;
    sdpa_scratch sc;
    if (!sdpa_scratch_new(jb, sizeof(SDPA_C), SDPA_RB, &sc))
        return;
    const int64_t R = jb->G * jb->Lq, nblk = (R + SDPA_RB - 1) / SDPA_RB;
    for (int64_t u = begin; u < end; u++) {
        const int64_t blk = u % nblk, bh = u / nblk;
        const int64_t b = bh / jb->Hkv, kvh = bh % jb->Hkv;
        const int64_t r0 = blk * SDPA_RB;
        const int64_t nr = R - r0 < SDPA_RB ? R - r0 : SDPA_RB;
        SN(sdpa_begin)(jb, &sc, b, kvh, r0, nr);
        int64_t j_end = jb->Lk;
        if (jb->causal) { /* the block's last row sees the most keys */
            const int64_t last = (r0 + nr - 1) / jb->G + jb->Lk - jb->Lq + 1;
            j_end = last < j_end ? (last < 0 ? 0 : last) : j_end;
        }
        SN(sdpa_attend)(jb, &sc, b, kvh, r0, nr, 0, j_end);
        for (int64_t r = 0; r < nr; r++) {
            const int64_t row = r0 + r;
            SN(sdpa_store_row)
            (jb, b, kvh * jb->G + row % jb->G, row / jb->G, ((SDPA_C *)sc.m)[r],
             ((SDPA_C *)sc.l)[r], (SDPA_C *)sc.acc + r * jb->Dv);
        }
    }
    free(sc.base);
}

/* Decode units: (b, kvh, key chunk c), all R rows; the partial m, l and
 * acc of each row go to jb->partial. */
static void SN(sdpa_decode)(void *ctx, int64_t begin, int64_t end) {
    sdpa_job *jb = ctx;
    const int64_t R = jb->G * jb->Lq, Dv = jb->Dv;
    sdpa_scratch sc;
    if (!sdpa_scratch_new(jb, sizeof(SDPA_C), R, &sc))
        return;
    for (int64_t u = begin; u < end; u++) {
        const int64_t c = u % jb->nchunks, bh = u / jb->nchunks;
        const int64_t b = bh / jb->Hkv, kvh = bh % jb->Hkv;
        int64_t j0 = c * jb->chunk, j1 = j0 + jb->chunk;
        if (j1 > jb->Lk)
            j1 = jb->Lk;
        if (jb->causal) {
            const int64_t last = (R - 1) / jb->G + jb->Lk - jb->Lq + 1;
            if (j1 > last)
                j1 = last < j0 ? j0 : last;
        }
        SN(sdpa_begin)(jb, &sc, b, kvh, 0, R);
        SN(sdpa_attend)(jb, &sc, b, kvh, 0, R, j0, j1);
        SDPA_C *part = (SDPA_C *)jb->partial + u * R * (Dv + 2);
        for (int64_t r = 0; r < R; r++) {
            SDPA_C *p = part + r * (Dv + 2);
            p[0] = ((SDPA_C *)sc.m)[r];
            p[1] = ((SDPA_C *)sc.l)[r];
            memcpy(p + 2, (SDPA_C *)sc.acc + r * Dv,
                   (size_t)Dv * sizeof(SDPA_C));
        }
    }
    free(sc.base);
}

/* Combine units: one (b, kvh) each, all R rows over the chunks. */
static void SN(sdpa_combine)(void *ctx, int64_t begin, int64_t end) {
    sdpa_job *jb = ctx;
    const int64_t R = jb->G * jb->Lq, Dv = jb->Dv, nc = jb->nchunks;
    SDPA_C *acc = malloc((size_t)(Dv > 0 ? Dv : 1) * sizeof(SDPA_C));
    if (!acc) {
        atomic_store(&jb->oom, true);
        return;
    }
    for (int64_t bh = begin; bh < end; bh++) {
        const int64_t b = bh / jb->Hkv, kvh = bh % jb->Hkv;
        const SDPA_C *part =
            (const SDPA_C *)jb->partial + bh * nc * R * (Dv + 2);
        for (int64_t r = 0; r < R; r++) {
            SDPA_C M = -INFINITY, L = 0;
            for (int64_t c = 0; c < nc; c++) {
                const SDPA_C mc = part[(c * R + r) * (Dv + 2)];
                M = mc > M ? mc : M;
            }
            memset(acc, 0, (size_t)Dv * sizeof(SDPA_C));
            if (M != -INFINITY) {
                for (int64_t c = 0; c < nc; c++) {
                    const SDPA_C *p = part + (c * R + r) * (Dv + 2);
                    if (p[0] == -INFINITY)
                        continue;
                    const SDPA_C w = sdpa_exp(p[0] - M);
                    L += p[1] * w;
                    for (int64_t e = 0; e < Dv; e++)
                        acc[e] += p[2 + e] * w;
                }
            }
            SN(sdpa_store_row)
            (jb, b, kvh * jb->G + r % jb->G, r / jb->G, M, L, acc);
        }
    }
    free(acc);
}

static const sdpa_kernel SN(sdpa_kernel) = {SN(sdpa_prefill), SN(sdpa_decode),
                                            SN(sdpa_combine), sizeof(SDPA_C)};

#undef SN
#undef SDPA_CAT
#undef SDPA_CAT2
#undef SDPA_SFX
#undef SDPA_S
#undef SDPA_C
#undef SDPA_LOAD
#undef SDPA_STORE
#undef SDPA_DIRECT
