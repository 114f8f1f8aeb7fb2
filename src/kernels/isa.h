/*
 * The fused kernels' loops, registered once per instruction set (as BLIS's
 * bli_cntx_init_<arch> registers its micro-kernels): isa.c holds one table
 * for each of base, avx2 and avx512, and a kernel call takes the table of the
 * set it runs (ag_i_isa) once, at its start. Each loop is written once, as an
 * always-inline body in its kernel's file, and compiled there for every set
 * (the *_VARIANTS macros); the argument structs are each file's own.
 */
#ifndef AG_KERNELS_ISA_H
#define AG_KERNELS_ISA_H

#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "kernels/tiled_micro.h"
#include "kernels/score_rows.h"

struct ag_i_kv_head;       /* tiled.c */
struct ag_i_bw_args;
struct ag_i_bw_buf;
struct ag_i_stream_block;  /* tiled_stream.c */
struct ag_tiled_stream;
struct ag_i_gbw_args;      /* gather.c */
struct ag_i_gbw_buf;

/* tiled.c: the forward's blocks, and both passes of the backward */
typedef void ag_i_block_f(const ag_nbhd_t *nb, int64_t i0, int64_t nq, int64_t next,
                          const float *Q, const struct ag_i_kv_head *kv, int64_t H, int64_t d,
                          int64_t h, float scale2, float *M, const tile_buf_t *b,
                          const kext_t *x, ag_i_tile_fn step, const int64_t *tiles,
                          int64_t n_tiles);
typedef void ag_i_grad_f(const struct ag_i_bw_args *a, int pass, int64_t i0, int64_t nq,
                         int64_t h, const struct ag_i_bw_buf *b);
/* tiled_stream.c: one block and head of the streamed forward over a window */
typedef void ag_i_task_f(const struct ag_tiled_stream *st, const struct ag_i_stream_block *g,
                         int64_t h, int64_t *next, float *acc, float *m, float *l,
                         const float *K, const float *V, int64_t b, float *qt, float *S);
/* gather.c: destinations lo..hi-1 of the forward, and nodes of a backward pass */
typedef void ag_i_rows_f(const ag_nbhd_t *nb, int64_t lo, int64_t hi, const float *Q,
                         const float *K, const float *V, int64_t H, int64_t d, float scale2,
                         float *M, float *s, int64_t *src, float *q, const kext_t *x,
                         int64_t end);
typedef void ag_i_grad_rows_f(const struct ag_i_gbw_args *a, int pass, int64_t lo, int64_t hi,
                              const struct ag_i_gbw_buf *b);

/* One instruction set's loops; the tiled ones [QV == 4] (blocks of 16 or 64). */
struct ag_i_isa {
    ag_simd_level_t level;
    ag_i_tile_f *tile[2];
    ag_i_block_f *block[2];
    ag_i_grad_f *grad[2];
    ag_i_task_f *task[2];
    ag_i_rows_f *rows;
    ag_i_grad_rows_f *grad_rows;
    ag_i_srow_fwd_f *srow_fwd;   /* score_rows.c: the generic kernel's rows */
    ag_i_srow_dst_f *srow_dst;
    ag_i_srow_src_f *srow_src;
};

/* The loops each kernel file compiles, named stem_qV_isa (tiled: QV 4 or 1)
   or stem_isa (gather, score_rows). */
#define AG_I_TILED_NAMES(type, stem)                                                     \
    type stem##_q4_avx512, stem##_q1_avx512, stem##_q4_avx2, stem##_q1_avx2, stem##_q4_base, \
        stem##_q1_base;
AG_I_TILED_NAMES(ag_i_tile_f, ag_i_tile)
AG_I_TILED_NAMES(ag_i_block_f, ag_i_block)
AG_I_TILED_NAMES(ag_i_grad_f, ag_i_grad)
AG_I_TILED_NAMES(ag_i_task_f, ag_i_task)
ag_i_rows_f ag_i_rows_avx512, ag_i_rows_avx2, ag_i_rows_base;
ag_i_grad_rows_f ag_i_grad_rows_avx512, ag_i_grad_rows_avx2, ag_i_grad_rows_base;
ag_i_srow_fwd_f ag_i_srow_fwd_avx512, ag_i_srow_fwd_avx2, ag_i_srow_fwd_base;
ag_i_srow_dst_f ag_i_srow_dst_avx512, ag_i_srow_dst_avx2, ag_i_srow_dst_base;
ag_i_srow_src_f ag_i_srow_src_avx512, ag_i_srow_src_avx2, ag_i_srow_src_base;

typedef struct ag_i_isa ag_i_isa_t;
/* The loops of the set this process runs (ag_i_simd_level: the CPU's best, or
   AG_SIMD's, or the one ag_i_simd_force set). */
const ag_i_isa_t *ag_i_isa(void);

#endif
