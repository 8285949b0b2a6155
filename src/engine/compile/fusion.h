/*
 * fusion.h — the fused primitive's program format, shared by the fusion
 * pass (fusion.c builds programs) and the interpreter (fusion_kernel.c runs
 * them). Internal to the engine.
 *
 * A program is a straight line of instructions over registers. Each
 * instruction is a load of one of the node's inputs (read through its
 * broadcast strides), an elementwise op run by the very kernel its unfused
 * node runs, or a reduction over the last axis. The interpreter runs the
 * program over tiles of the output:
 *   - elementwise mode: tiles of a few thousand consecutive elements of the
 *     row-major output, so that every register stays in L1/L2;
 *   - row mode (a reduction or a per-row value inside the group): tiles of
 *     whole rows of the "wide" shape W, a row being its last nred axes (one
 *     long row, or as many short rows as fit a tile). Wide registers hold
 *     the rows, narrow ones one element per row (shape W with its last
 *     nred axes 1); a
 *     reduction turns a wide register into a narrow one, and an elementwise
 *     op reading a narrow register repeats each value along its row.
 *   - chunks mode (a reduction root over rows too long for registers):
 *     each row is cut into chunks of fixed length (so the result does not
 *     depend on the thread count), each chunk runs the elementwise part
 *     tile by tile and folds it into its own accumulator, and a row's
 *     accumulators are merged in order.
 * A load of a one-element input is "invariant": filled on a work unit's
 * first tile into a register of its own and reused by its later tiles.
 * The params are plain bytes (no pointers) so the node can be cloned and
 * compared byte for byte.
 */
#ifndef EMILY_FUSION_H
#define EMILY_FUSION_H

#include "internal.h"

enum fz_kind { FZ_LOAD = 0, FZ_EW = 1, FZ_REDUCE = 2 };
/* How the interpreter walks the output (see above). */
enum fz_mode { FZ_MODE_TILES = 0, FZ_MODE_ROWS = 1, FZ_MODE_CHUNKS = 2 };
/* Elementwise families: which kernel table an FZ_EW instruction uses. */
enum fz_family {
    FZ_UNARY = 0,
    FZ_BINARY = 1,
    FZ_SELECT = 2,
    FZ_CLIP = 3,
    FZ_AS_TYPE = 4,
};

#define FZ_MAX_INSTR 128
#define FZ_MAX_REGS 32
#define FZ_MAX_SRC 3
/* Row mode keeps whole rows in registers: rows between these lengths (a
 * tile holds several short rows); longer rows reduce by chunks. */
#define FZ_MIN_ROW 2
#define FZ_MAX_ROW 16384
#define FZ_CHUNK 65536
/* Inputs one GPU kernel reads at most (loads of a GPU group). */
#define FZ_GPU_MAX_LOADS 16

typedef struct fz_instr {
    uint8_t kind;       /* enum fz_kind */
    uint8_t family;     /* FZ_EW: enum fz_family */
    uint8_t dtype;      /* result dtype */
    uint8_t kdtype;     /* dtype that picks the kernel (or the reduced dtype) */
    uint8_t narrow;     /* row mode: one element per row */
    uint8_t nsrc;       /* source registers */
    uint8_t src_narrow; /* bit j: source j is narrow (broadcast it) */
    uint8_t invariant;  /* FZ_LOAD of one element: filled once per unit, in
                           a register of its own */
    int16_t dst;        /* register; -1 = the node's output */
    int16_t src[FZ_MAX_SRC];
    int32_t op; /* kernel op; reduce op; FZ_LOAD: index into node->inputs */
} fz_instr;

typedef struct fz_program {
    int32_t ninstr;
    int32_t nregs;
    int32_t mode;      /* enum fz_mode */
    int32_t reg_esize; /* bytes per element of the widest register */
    int32_t ndim;      /* the wide shape W (row mode) / the output shape */
    int32_t nred;      /* rows and chunks: a row is W's last nred axes */
    int64_t shape[EM_MAX_NDIM];
    fz_instr instr[];
} fz_program;

static inline size_t fz_program_size(int ninstr) {
    return sizeof(fz_program) + sizeof(fz_instr) * (size_t)ninstr;
}

/* The fused primitive: eval runs node->params (an fz_program) over
 * node->inputs. */
extern const em_prim em__fused_prim;

/* Whether node->params is a program the fused evals can run on
 * node->inputs (fusion_kernel.c). */
bool em__fz_valid(const em_array *node);
/* The fused prim's GPU eval (gpu_fusion.c). */
em_status em__gpu_fused_eval(em_array *node);

#endif
