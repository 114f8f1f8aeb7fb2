/*
 * The dense product of one thread, C = (beta ? C : 0) + A B, with its sums in
 * an order the library fixes: entry (i, j) is one chain of multiply-adds over
 * p = 0, 1, .., k-1, starting from C's value (beta) or 0. The cuts below
 * (blocks of k, panels of columns, strips of rows, tails copied through a
 * tile) never reorder a chain: a block of k ends with the entry in C, and the
 * next block goes on from there. So the bits depend on the sizes and the
 * values only: not on the thread count, the block a row falls in, the CPU
 * model or which library loaded first. The AVX2 and AVX-512 variants fuse
 * each multiply-add (the same bits on every CPU that has FMA: one lane of
 * either computes the same chain; -ffp-contract=fast at -O2, which the
 * Makefile holds this file to); the baseline variant multiplies, then adds.
 *
 * The micro-kernel is BLIS's (Van Zee & van de Geijn, 2015): MR rows times NR
 * columns of C in registers, for each p one row of a packed panel of B
 * (NR floats) and MR broadcasts of A; MR x NR = 12 x 32 on AVX-512 (24 of its
 * 32 registers), 6 x 16 on AVX2 and 6 x 8 on the baseline (12 of 16). A is read
 * where it lies (row-major, or transposed for A^T B: packing its strips cost
 * more than it saved on the models' shapes); B's panels are packed on the
 * stack, unless B's rows already hold them and few strips read them (A^T B's
 * blocks of 64 rows). Tails (fewer than MR rows, fewer than NR columns) run
 * the same kernel on a copy of C's tile (a half-width one for a tail of at
 * most NR/2 columns). Against OpenBLAS 0.3.21's best kernels on one thread of
 * a Zen 5: 0.94-1.14x on the models' shapes (k and n 64-1433; 0.94 with 65
 * columns, a tail of one), 0.91x at n = k = 1024 (docs/performance.md).
 */
#include <stdint.h>
#include <string.h>

#include "base/base.h"

/* k in blocks of KC: a packed panel (KC x NR floats, 32 KB on AVX-512) stays
   in the first-level cache while the strips of A pass it; n in blocks of NC
   columns: C's block [m, NC] stays in the second-level cache while the blocks
   of k pass over it (a C read and written from memory at every block of k
   cost 0.8x OpenBLAS at n = k = 1024). */
#define KC 256
#define NC 128

#define ROWS_6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define ROWS_12(X) ROWS_6(X) X(6) X(7) X(8) X(9) X(10) X(11)

typedef float v16 __attribute__((vector_size(64)));
typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));
typedef float v16_u __attribute__((vector_size(64), aligned(4), may_alias));
typedef float v8_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef float v4_u __attribute__((vector_size(16), aligned(4), may_alias));

/* Where A's entry (i, p) lies: a_rs between rows, a_cs between columns. */
typedef struct {
    const float *a;
    int64_t rs, cs;
} operand_t;

/*
 * The micro-kernel: C's tile [mr <= MR, NR] (row stride ldc) = (load ? C : 0)
 * + sum over p < kc of A(r, p) B(p, :), B's panel rows b_step apart. Rows of A
 * past mr read row mr-1 (their results are not stored: the caller's tile
 * holds MR rows). The accumulators are named variables: GCC does not keep an
 * array of vectors in registers.
 */
#define MICRO(name, target, VT, VT_U, LANES, ROWS, M)                                        \
    target static inline __attribute__((always_inline)) void name(                          \
        int64_t kc, operand_t A, int mr, const float *B, int64_t b_step, float *C,          \
        int64_t ldc, int load)                                                               \
    {                                                                                        \
        typedef VT V;   /* the names the row macros use */                                   \
        typedef VT_U V_U;                                                                    \
        enum { L = LANES };                                                                  \
        ROWS(M##_DECL)                                                                       \
        if (load) {                                                                          \
            ROWS(M##_LOAD)                                                                   \
        }                                                                                    \
        for (int64_t p = 0; p < kc; p++, B += b_step) {                                      \
            M##_B                                                                            \
            ROWS(M##_STEP)                                                                   \
        }                                                                                    \
        ROWS(M##_STORE)                                                                      \
    }
#define M_DECL(r)                                                                            \
    const float *a##r = A.a + (r < mr ? r : mr - 1) * A.rs;                                 \
    V c##r##0 = {0.0f}, c##r##1 = {0.0f};
#define M_B const V b0 = *(const V_U *)B, b1 = *(const V_U *)(B + L);
#define M_LOAD(r) c##r##0 = *(const V_U *)(C + r * ldc), c##r##1 = *(const V_U *)(C + r * ldc + L);
#define M_STEP(r)                                                                            \
    {                                                                                        \
        const float x = a##r[p * A.cs];   /* a scalar times a vector: a broadcast */          \
        c##r##0 += x * b0, c##r##1 += x * b1;                                                \
    }
#define M_STORE(r) *(V_U *)(C + r * ldc) = c##r##0, *(V_U *)(C + r * ldc + L) = c##r##1;

/* The same on half a panel (its first L columns: MICRO with these row macros):
   a tail of at most L columns (the GPT's head: 65 = 2 x 32 + 1) costs half the
   full kernel. */
#define H_B const V b0 = *(const V_U *)B;
#define H_DECL(r)                                                                            \
    const float *a##r = A.a + (r < mr ? r : mr - 1) * A.rs;                                 \
    V c##r##0 = {0.0f};
#define H_LOAD(r) c##r##0 = *(const V_U *)(C + r * ldc);
#define H_STEP(r) c##r##0 += a##r[p * A.cs] * b0;
#define H_STORE(r) *(V_U *)(C + r * ldc) = c##r##0;

/*
 * One variant: C [m, n] (ldc) = (beta ? C : 0) + A B over k, B(p, j) at
 * B[p * b_rs + j * b_cs]. For each block of NC columns, each block of k, each
 * panel of NR columns (read in place when b_cs is 1, the panel whole and at
 * most 96 rows read it; else packed), each strip of MR rows: the micro-kernel
 * on C itself, or on a tile copy (the half-width one for a narrow tail).
 */
#define SGEMM(name, micro, half, target, MR, NR)                                             \
    target static void name(int64_t m, int64_t n, int64_t k, operand_t A, const float *B,    \
                            int64_t b_rs, int64_t b_cs, int beta, float *C, int64_t ldc)      \
    {                                                                                        \
        float panel[KC * NR], tile[MR * NR];                                                 \
        for (int64_t jc = 0; jc < n; jc += NC)                                               \
        for (int64_t p0 = 0; p0 < k || (p0 == 0 && !beta); p0 += KC) {                       \
            const int64_t kc = k - p0 < KC ? k - p0 : KC;                                    \
            const int load = beta || p0 > 0;                                                 \
            for (int64_t j0 = jc; j0 < n && j0 < jc + NC; j0 += NR) {                        \
                const int64_t nr = n - j0 < NR ? n - j0 : NR;                                \
                const float *bp = B + p0 * b_rs + j0 * b_cs;                                 \
                int64_t b_step = b_rs;                                                       \
                /* packed (zeros past n, along B's rows) unless B's rows are the     \
                   panel and few strips read it: rows far apart share cache sets     \
                   (4 KB: 0.66x OpenBLAS on AVX2 at n = 1024) */                       \
                if (b_cs != 1 || nr < NR || m > 96) {                                        \
                    if (nr < NR)                                                             \
                        memset(panel, 0, sizeof panel);                                      \
                    if (b_cs == 1)                                                           \
                        for (int64_t p = 0; p < kc; p++)                                     \
                            memcpy(panel + p * NR, bp + p * b_rs, (size_t)nr * sizeof *bp);  \
                    else   /* B^T's rows: its columns 4 KB apart would share cache sets */  \
                        for (int64_t j = 0; j < nr; j++)                                     \
                            for (int64_t p = 0; p < kc; p++)                                 \
                                panel[p * NR + j] = bp[p * b_rs + j * b_cs];                 \
                    bp = panel, b_step = NR;                                                 \
                }                                                                            \
                for (int64_t i0 = 0; i0 < m; i0 += MR) {                                     \
                    const int mr = m - i0 < MR ? (int)(m - i0) : MR;                         \
                    const operand_t a = {A.a + i0 * A.rs + p0 * A.cs, A.rs, A.cs};           \
                    float *c = C + i0 * ldc + j0;                                            \
                    if (mr == MR && nr == NR) {                                              \
                        micro(kc, a, mr, bp, b_step, c, ldc, load);                          \
                        continue;                                                            \
                    }                                                                        \
                    memset(tile, 0, sizeof tile);                                            \
                    for (int r = 0; r < mr && load; r++)                                     \
                        memcpy(tile + r * NR, c + r * ldc, (size_t)nr * sizeof *c);          \
                    if (nr <= NR / 2)                                                        \
                        half(kc, a, mr, bp, b_step, tile, NR, load);                         \
                    else                                                                     \
                        micro(kc, a, mr, bp, b_step, tile, NR, load);                        \
                    for (int r = 0; r < mr; r++)                                             \
                        memcpy(c + r * ldc, tile + r * NR, (size_t)nr * sizeof *c);          \
                }                                                                            \
            }                                                                                \
            if (k == 0)                                                                      \
                break;                                                                       \
        }                                                                                    \
    }

#define NO_TARGET
MICRO(micro_base, NO_TARGET, v4, v4_u, 4, ROWS_6, M)
MICRO(half_base, NO_TARGET, v4, v4_u, 4, ROWS_6, H)
SGEMM(sgemm_base, micro_base, half_base, NO_TARGET, 6, 8)
#if AG_HAVE_VARIANTS
MICRO(micro_avx2, AG_TARGET_AVX2, v8, v8_u, 8, ROWS_6, M)
MICRO(half_avx2, AG_TARGET_AVX2, v8, v8_u, 8, ROWS_6, H)
SGEMM(sgemm_avx2, micro_avx2, half_avx2, AG_TARGET_AVX2, 6, 16)
MICRO(micro_avx512, AG_TARGET_AVX512, v16, v16_u, 16, ROWS_12, M)
MICRO(half_avx512, AG_TARGET_AVX512, v16, v16_u, 16, ROWS_12, H)
SGEMM(sgemm_avx512, micro_avx512, half_avx512, AG_TARGET_AVX512, 12, 32)
#endif

void ag_i_sgemm(int64_t m, int64_t n, int64_t k, const float *A, int64_t a_rs, int64_t a_cs,
                const float *B, int64_t b_rs, int64_t b_cs, int beta, float *C, int64_t ldc)
{
    const operand_t a = {A, a_rs, a_cs};
    if (m <= 0 || n <= 0)
        return;
#if AG_HAVE_VARIANTS
    switch (ag_i_simd_level()) {
    case AG_SIMD_AVX512: sgemm_avx512(m, n, k, a, B, b_rs, b_cs, beta, C, ldc); return;
    case AG_SIMD_AVX2: sgemm_avx2(m, n, k, a, B, b_rs, b_cs, beta, C, ldc); return;
    case AG_SIMD_BASE: break;
    }
#endif
    sgemm_base(m, n, k, a, B, b_rs, b_cs, beta, C, ldc);
}
