/*
 * sgemm_avx512.c — f32 GEMM for CPUs with AVX-512F.
 *
 * Why: the OpenBLAS we link runs its AVX2 kernels on every CPU
 * (OPENBLAS_CORETYPE is pinned to Haswell), a third of what AVX-512
 * reaches on the same core. em__gemm_f32 (gemm.c) calls this when the CPU
 * has AVX-512F; other CPUs keep OpenBLAS. Single-threaded: the thread pool
 * splits the work (em__gemm_parallel).
 *
 * Layout (the Goto/BLIS scheme, loops reordered so C stays in L2):
 *   for each block of NC columns of op(B) (k x NC packed into NR-wide
 *   column panels per KC block, zero-padded to a multiple of NR; in L3),
 *     for each block of MC rows of C (MC x NC stays in L2),
 *       for each KC block: op(A)'s MC x KC packed into MR-tall row panels
 *       (zero-padded; L2),
 *         for each B panel (KC x NR, 24 KiB at most: stays in L1),
 *           for each A panel: an MR x NR tile of C held in 28 zmm
 *           registers, one k step = two loads of B, MR broadcasts of A,
 *           2*MR FMAs.
 * Packing handles the four ta/tb layouts, so the micro-kernel sees one.
 * Row edges use a kernel specialised for the rows left (no wasted FMAs),
 * column edges masked loads and stores of C. The first KC block stores
 * (or adds, when accumulating), later blocks add.
 */
#include "dot_cpu.h"

#if defined(__x86_64__) && !defined(EM_SIMD_BASELINE)

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>

#define AVX512 __attribute__((target("avx512f")))

/* KC: the B panel (KC x NR x 4 bytes = 24 KiB) and the A panel (10.5 KiB)
 * share L1 (48 KiB on Zen 5; KC 256 thrashed it). MC: the A block
 * (168 x 192 x 4 = 126 KiB) stays in L2 with its rows of C. NC: columns of
 * op(B) packed at once, all k rows of them, 4 MiB at most (L3). */
enum {
    MR = 14, /* rows of the C tile: 14 x 2 accumulators + 2 B + 1 A zmm */
    NR = 32, /* columns of the C tile: two zmm */
    KC_MAX = 192,
    MC_MAX = 12 * MR,
    NC_MAX = 4096,
    B_PACK_MAX = 1 << 20, /* floats of packed B (4 MiB, in L3) */
};

bool em__sgemm_avx512_available(void) {
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        /* The x86-64-v4 set, as the EM_CLONES clones require: every
         * AVX-512 server and desktop CPU has it, and emulators that pass
         * AVX512F through without executing AVX-512 (valgrind 3.19 reports
         * avx512f but not the rest) then take OpenBLAS. */
        v = __builtin_cpu_supports("avx512f") &&
                    __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512dq")
                ? 1
                : 0;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v == 1;
}

/* Per-thread packing buffers, grown on demand and kept: the pool's threads
 * live as long as the process, and a fresh multi-megabyte allocation per
 * call would be page-faulted in every time. A thread that exits frees its
 * own (the key's destructor runs in that thread). */
static _Thread_local float *packed_a, *packed_b;
static _Thread_local size_t packed_a_len, packed_b_len;
static pthread_key_t buffers_key;
static bool buffers_key_made;
static pthread_once_t buffers_once = PTHREAD_ONCE_INIT;

static void free_buffers(void *unused) {
    (void)unused;
    free(packed_a);
    free(packed_b);
    packed_a = packed_b = NULL;
    packed_a_len = packed_b_len = 0;
}

static void make_buffers_key(void) {
    buffers_key_made = pthread_key_create(&buffers_key, free_buffers) == 0;
}

static float *reserve(float **buf, size_t *len, size_t want) {
    if (*len >= want)
        return *buf;
    pthread_once(&buffers_once, make_buffers_key);
    if (buffers_key_made) /* any non-NULL value runs the destructor */
        pthread_setspecific(buffers_key, &buffers_key);
    free(*buf);
    *buf = aligned_alloc(64, (want * sizeof(float) + 63) & ~(size_t)63);
    *len = *buf ? want : 0;
    return *buf;
}

/* Loads rows [0, nrows) of a 16 x 16 block (row i at src + i * ld, its
 * first ncols values; the rest zero) and returns its transpose in out:
 * out[j] = column j. Unpacking pairs of rows, then pairs of pairs, gives
 * in each 128-bit lane a column of four rows; two rounds of 128-bit lane
 * shuffles gather the four lanes of each column. */
AVX512 static void transpose16(const float *src, size_t ld, int nrows,
                               int ncols, __m512 out[16]) {
    __mmask16 cols = (__mmask16)(ncols >= 16 ? 0xffff : (1u << ncols) - 1);
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = i < nrows ? _mm512_maskz_loadu_ps(cols, src + i * ld)
                         : _mm512_setzero_ps();
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#define PAIRS(OP, X, Y)                                                        \
    _mm512_castpd_ps(OP(_mm512_castps_pd(X), _mm512_castps_pd(Y)))
    for (int i = 0; i < 16; i += 4) {
        r[i] = PAIRS(_mm512_unpacklo_pd, t[i], t[i + 2]);
        r[i + 1] = PAIRS(_mm512_unpackhi_pd, t[i], t[i + 2]);
        r[i + 2] = PAIRS(_mm512_unpacklo_pd, t[i + 1], t[i + 3]);
        r[i + 3] = PAIRS(_mm512_unpackhi_pd, t[i + 1], t[i + 3]);
    }
#undef PAIRS
    /* r[4q + c], lane l: column 4l + c of rows 4q..4q+3. */
    for (int c = 0; c < 4; c++) {
        __m512 x0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
        __m512 x1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
        __m512 y0 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
        __m512 y1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
        out[c] = _mm512_shuffle_f32x4(x0, y0, 0x88);
        out[4 + c] = _mm512_shuffle_f32x4(x1, y1, 0x88);
        out[8 + c] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
        out[12 + c] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
    }
}

/* Asks for rows [0, nrows) of len values each (row i at src + i * ld) to
 * be brought into cache. Packing transposes short row segments (a panel's
 * kc values) that the hardware prefetchers do not follow; reading a
 * product's operands from memory then waited on every line (3x slower on
 * a batch of 192 attention products). Called one panel ahead. */
static void prefetch_rows(const float *src, size_t ld, int nrows, int len) {
    for (int i = 0; i < nrows; i++)
        for (int off = 0; off < len; off += 16)
            _mm_prefetch((const char *)(src + i * ld + off), _MM_HINT_T0);
}

/* Lanes [0, n) of a 16-lane mask, n clamped to 0..16. */
static inline __mmask16 first_lanes(int n) {
    return (__mmask16)(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1);
}

/* Packs `count` lines of an operand, each kc values long, into panels of
 * `width` lines (MR rows of op(A), or NR columns of op(B)): panel q holds
 * for each p the `width` values line[q*width + j][p], lines past count
 * zero. With `along`, line j's values are strided (value p of line j at
 * src[p * ld + j]: A stored (k, m), B stored (k, n)), so each p reads a
 * contiguous run of the panel's lines; otherwise line j is stored as one
 * row (at src + j * ld) and 16 values of 16 lines are transposed at a
 * time. */
AVX512 static void pack_panels(bool along, int count, int kc, const float *src,
                               int ld, int width, float *dst) {
    if (!along) /* the first panel; each prefetches the next */
        prefetch_rows(src, (size_t)ld, count < width ? count : width, kc);
    for (int q0 = 0; q0 < count; q0 += width) {
        int lines = count - q0 < width ? count - q0 : width;
        if (along) {
            for (int p = 0; p < kc; p++)
                for (int h = 0; h < width; h += 16)
                    _mm512_mask_storeu_ps(
                        dst + (size_t)p * width + h, first_lanes(width - h),
                        _mm512_maskz_loadu_ps(first_lanes(lines - h),
                                              src + (size_t)p * ld + q0 + h));
        } else {
            if (q0 + width < count)
                prefetch_rows(src + (size_t)(q0 + width) * ld, (size_t)ld,
                              count - q0 - width < width ? count - q0 - width
                                                         : width,
                              kc);
            for (int h = 0; h < width; h += 16) {
                int rows = lines - h < 16 ? lines - h : 16;
                __mmask16 store = first_lanes(width - h);
                if (rows <= 0) { /* the panel's last lines: zero */
                    for (int p = 0; p < kc; p++)
                        _mm512_mask_storeu_ps(dst + (size_t)p * width + h,
                                              store, _mm512_setzero_ps());
                    continue;
                }
                for (int p0 = 0; p0 < kc; p0 += 16) {
                    int ks = kc - p0 < 16 ? kc - p0 : 16;
                    __m512 col[16];
                    transpose16(src + (size_t)(q0 + h) * ld + p0, (size_t)ld,
                                rows, ks, col);
                    for (int p = 0; p < ks; p++)
                        _mm512_mask_storeu_ps(
                            dst + (size_t)(p0 + p) * width + h, store, col[p]);
                }
            }
        }
        dst += (size_t)kc * width;
    }
}

/* op(A) rows [0, mc), columns [0, kc) into panels of MR rows. */
AVX512 static void pack_a(bool ta, int mc, int kc, const float *a, int lda,
                          float *dst) {
    pack_panels(ta, mc, kc, a, lda, MR, dst);
}

/* op(B) rows [0, kc), columns [0, nc) into panels of NR columns. */
AVX512 static void pack_b(bool tb, int kc, int nc, const float *b, int ldb,
                          float *dst) {
    pack_panels(!tb, nc, kc, b, ldb, NR, dst);
}

/* C[0..ROWS)[0..NR) (columns masked by m0, m1) = or += the product of an
 * A panel and a B panel over kc steps. Inlined into one function per row
 * count so that the accumulators live in registers. */
#define KERNEL_BODY(ROWS)                                                      \
    __m512 acc0[MR], acc1[MR];                                                 \
    _Pragma("GCC unroll 14") for (int i = 0; i < ROWS; i++) {                  \
        /* C comes in while the FMAs run (its rows are far apart: no */        \
        /* hardware prefetcher follows them). */                               \
        _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);        \
        _mm_prefetch((const char *)(c + (size_t)i * ldc + 16), _MM_HINT_T0);   \
        acc0[i] = _mm512_setzero_ps();                                         \
        acc1[i] = _mm512_setzero_ps();                                         \
    }                                                                          \
    for (int p = 0; p < kc; p++) {                                             \
        __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);          \
        _Pragma("GCC unroll 14") for (int i = 0; i < ROWS; i++) {              \
            __m512 av = _mm512_set1_ps(ap[i]);                                 \
            acc0[i] = _mm512_fmadd_ps(av, b0, acc0[i]);                        \
            acc1[i] = _mm512_fmadd_ps(av, b1, acc1[i]);                        \
        }                                                                      \
        ap += MR;                                                              \
        bp += NR;                                                              \
    }                                                                          \
    _Pragma("GCC unroll 14") for (int i = 0; i < ROWS; i++) {                  \
        float *ci = c + (size_t)i * ldc;                                       \
        if (add) {                                                             \
            acc0[i] = _mm512_add_ps(acc0[i], _mm512_maskz_loadu_ps(m0, ci));   \
            acc1[i] =                                                          \
                _mm512_add_ps(acc1[i], _mm512_maskz_loadu_ps(m1, ci + 16));    \
        }                                                                      \
        _mm512_mask_storeu_ps(ci, m0, acc0[i]);                                \
        _mm512_mask_storeu_ps(ci + 16, m1, acc1[i]);                           \
    }

typedef void (*tile_fn)(int kc, const float *ap, const float *bp, float *c,
                        int ldc, bool add, __mmask16 m0, __mmask16 m1);

#define DEFINE_TILE(ROWS)                                                      \
    AVX512 static void tile_##ROWS(int kc, const float *ap, const float *bp,   \
                                   float *c, int ldc, bool add, __mmask16 m0,  \
                                   __mmask16 m1) {                             \
        KERNEL_BODY(ROWS)                                                      \
    }
DEFINE_TILE(1)
DEFINE_TILE(2)
DEFINE_TILE(3)
DEFINE_TILE(4)
DEFINE_TILE(5)
DEFINE_TILE(6)
DEFINE_TILE(7)
DEFINE_TILE(8)
DEFINE_TILE(9)
DEFINE_TILE(10)
DEFINE_TILE(11)
DEFINE_TILE(12)
DEFINE_TILE(13)
DEFINE_TILE(14)

static const tile_fn tiles[MR + 1] = {
    NULL,   tile_1, tile_2,  tile_3,  tile_4,  tile_5,  tile_6, tile_7,
    tile_8, tile_9, tile_10, tile_11, tile_12, tile_13, tile_14};

/* Blocks of at most `max` that split `len` evenly, rounded up to `unit`. */
static int block_len(int len, int max, int unit) {
    int nblocks = (len + max - 1) / max;
    int b = (len + nblocks - 1) / nblocks;
    b = (b + unit - 1) / unit * unit;
    return b < max ? b : max;
}

AVX512 bool em__sgemm_avx512(bool ta, bool tb, int m, int n, int k,
                             const float *a, int lda, const float *b, int ldb,
                             bool accumulate, float *c, int ldc) {
    if (m <= 0 || n <= 0 || k <= 0)
        return false;
    int kc_len = block_len(k, KC_MAX, 1);
    int mc_len = block_len(m, MC_MAX, MR);
    /* All of op(B)'s k rows for NC columns are packed at once (at most
     * B_PACK_MAX floats), so that each block of C rows takes every KC
     * block while it sits in L2, instead of a pass over all of C per KC
     * block (C of a 1024 x 384 piece is larger than L2). */
    int nc_max = B_PACK_MAX / k / NR * NR;
    if (nc_max > NC_MAX)
        nc_max = NC_MAX;
    if (nc_max < NR)
        nc_max = NR;
    int nc_len = block_len(n, nc_max, NR);
    int nc_padded = (nc_len + NR - 1) / NR * NR;
    float *pa = reserve(&packed_a, &packed_a_len, (size_t)mc_len * kc_len);
    float *pb = reserve(&packed_b, &packed_b_len, (size_t)nc_padded * k);
    if (!pa || !pb)
        return false;
    for (int j0 = 0; j0 < n; j0 += nc_len) {
        int nc = n - j0 < nc_len ? n - j0 : nc_len;
        /* KC block p0 of op(B)[.., j0..] at pb + p0 * nc_padded: B[p0][j0],
         * or B[j0][p0] stored (n, k). */
        for (int p0 = 0; p0 < k; p0 += kc_len)
            pack_b(tb, k - p0 < kc_len ? k - p0 : kc_len, nc,
                   b + (tb ? (size_t)j0 * ldb + p0 : (size_t)p0 * ldb + j0),
                   ldb, pb + (size_t)p0 * nc_padded);
        for (int i0 = 0; i0 < m; i0 += mc_len) {
            int mc = m - i0 < mc_len ? m - i0 : mc_len;
            for (int p0 = 0; p0 < k; p0 += kc_len) {
                int kc = k - p0 < kc_len ? k - p0 : kc_len;
                bool add = accumulate || p0 > 0;
                pack_a(ta, mc, kc,
                       a + (ta ? (size_t)p0 * lda + i0 : (size_t)i0 * lda + p0),
                       lda, pa);
                for (int jr = 0; jr < nc; jr += NR) {
                    int cols = nc - jr;
                    __mmask16 m0 =
                        (__mmask16)(cols >= 16 ? 0xffff : (1u << cols) - 1);
                    __mmask16 m1 =
                        (__mmask16)(cols >= NR  ? 0xffff
                                    : cols > 16 ? (1u << (cols - 16)) - 1
                                                : 0);
                    const float *bp =
                        pb + (size_t)p0 * nc_padded + (size_t)jr * kc;
                    for (int ir = 0; ir < mc; ir += MR) {
                        int rows = mc - ir < MR ? mc - ir : MR;
                        float *ct = c + (size_t)(i0 + ir) * ldc + j0 + jr;
                        /* The next tile's C, a whole tile ahead (the
                         * kernel's own prefetch has only its k loop). */
                        if (ir + MR < mc)
                            prefetch_rows(ct + (size_t)MR * ldc, (size_t)ldc,
                                          mc - ir - MR < MR ? mc - ir - MR : MR,
                                          cols < NR ? cols : NR);
                        tiles[rows](kc, pa + (size_t)ir * kc, bp, ct, ldc, add,
                                    m0, m1);
                    }
                }
            }
        }
    }
    return true;
}

#else

bool em__sgemm_avx512_available(void) { return false; }

bool em__sgemm_avx512(bool ta, bool tb, int m, int n, int k, const float *a,
                      int lda, const float *b, int ldb, bool accumulate,
                      float *c, int ldc) {
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)lda;
    (void)b, (void)ldb, (void)accumulate, (void)c, (void)ldc;
    return false;
}

#endif
