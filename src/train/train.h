/*
 * train/: gradients and learning: the tape and the rounds' backward
 * (backprop.c, through model/round.c's ops), the losses (losses.c) and the
 * optimizers (optimizers.c). The one header of train/ that other folders
 * include.
 */
#ifndef AG_TRAIN_H
#define AG_TRAIN_H

#include "model/model.h"

/* The losses with r (NULL: the plain calls; see base/gemm.h); the counts
   that scale a loss are the whole's. */
int ag_i_loss_mse_r(const ag_i_reducer_t *r, const float *X, const float *Y, int64_t N,
                    int64_t D, const uint8_t *mask, double *loss, float *dX, ag_error_t *err);
int ag_i_loss_cross_entropy_r(const ag_i_reducer_t *r, const float *X, int64_t N, int64_t D,
                              const ag_cross_entropy_t *ce, ag_cross_entropy_out_t *out,
                              ag_error_t *err);

/* Where a caller keeps a buffer across calls: count floats, the same memory
   each call that fits it (NULL and err set: out of memory). */
typedef struct {
    float *(*get)(void *ctx, int64_t count, ag_error_t *err);
    void *ctx;
} ag_i_keeper_t;

/* ag_i_loss_cross_entropy_r with its logits in keep's buffer (NULL: its own,
   freed): a language model's head over a large vocabulary is tens of MB a
   step, which the C library maps and the kernel zeroes anew every call. */
int ag_i_loss_cross_entropy_kept_r(const ag_i_reducer_t *r, const float *X, int64_t N,
                                   int64_t D, const ag_cross_entropy_t *ce,
                                   ag_cross_entropy_out_t *out, const ag_i_keeper_t *keep,
                                   ag_error_t *err);

/* A buffer of count floats kept in the tape (freed with it). */
float *ag_i_tape_keep(ag_tape_t *t, int64_t count, ag_error_t *err);

/* Marks the last parameter added to opt as this process's rows of an array
   whose other rows are on other processes (per-node weights: rows of per_row
   elements, the process's first row a multiple of AG_GEMM_CHUNK):
   ag_i_optimizer_step_r sums its squares through the reducer, chunk by chunk
   in the whole array's order. */
int ag_i_optimizer_split_last(ag_optimizer_t *opt, int64_t per_row, ag_error_t *err);
/* ag_optimizer_step with r (NULL: the plain call): the norm of the split
   parameters is the whole arrays', the same bits as one process's. */
int ag_i_optimizer_step_r(ag_optimizer_t *opt, const ag_i_reducer_t *r, double *grad_norm,
                          ag_error_t *err);

/* A GPT's blocks' round options (pre-LayerNorm, scaled-dot, residuals; o's
   graphs; rotary positions pos for m's AG_LM_POS_ROPE; while training, o's
   dropout, nanoGPT's on the embeddings, attention weights and residual
   branches; o NULL: none). */
ag_round_opts_t ag_i_lm_round_opts(const ag_lm_t *m, const ag_lm_opts_t *o, const int64_t *pos,
                                   int train);

/* Where a language model's rows run: one process (ag_lm_loss), or a part of
   the batch on each of several (the MPI layer). */
typedef struct {
    const ag_i_reducer_t *r;   /* sums over rows (NULL: one process) */
    int64_t first_row;         /* the rows' first in the whole batch (dropout's masks) */
    /* the blocks on X [n, D] in place (train: keeping what the backward reads)
       and their backward (dY of the blocks' output, dX0 of their input) */
    int (*forward)(void *ctx, const ag_lm_t *m, float *X, const ag_round_opts_t *ro,
                   int train, ag_error_t *err);
    int (*backward)(void *ctx, const float *dY, float *dX0, ag_weights_t *grads,
                    ag_error_t *err);
    /* rc, agreed by every process (NULL: one process) */
    int (*agree)(void *ctx, int rc, ag_error_t *err);
    void *ctx;
    /* the head's logits kept across calls (NULL: allocated each call) */
    const ag_i_keeper_t *keep;
} ag_i_lm_rows_t;

/* ag_lm_loss on n rows (ids, pos, targets: these rows'), written once for
   one process and for several. */
AG_INTERNAL
int ag_i_lm_loss_rows(const ag_lm_t *m, int64_t n, const int64_t *ids, const int64_t *pos,
                      const int64_t *targets, const ag_lm_opts_t *opts, double *loss,
                      ag_lm_t *grads, const ag_i_lm_rows_t *rows, ag_error_t *err);

/* Adds a round's attention-vector gradients (da_src: additive's a_src and
   gatv2's a; da_dst: additive's a_dst) into the layer's g, when they are the
   layer's vectors and not the options' constants (opt_score->a_src). */
AG_INTERNAL
void ag_i_add_vector_grads(const ag_score_t *opt_score, const ag_score_t *sc, ag_weights_t *g,
                           const float *da_src, const float *da_dst, int64_t HD);

#endif
