/*
 * train/: gradients and learning: the round step's backward and the rounds'
 * (backprop.c), the losses (losses.c) and the optimizers (optimizers.c). The
 * one header of train/ that other folders include.
 */
#ifndef AG_TRAIN_H
#define AG_TRAIN_H

#include "model/model.h"

/*
 * One round's backward, written once for training on one process
 * (backprop.c) and on several (mpi/train.c), the reverse of
 * ag_i_round_forward on this process's n rows: from dX = dL/d(round output)
 * in b->dX, with X and M of the forward,
 *   dM = dX Wo (g->wo += dX^T M);  attend_back: dQ, dK, dV from dM (and the
 *   score's vectors' gradients into g);  back through the projections (and
 *   g's wq, wk, wv) and the norm to dX = dL/d(round input).
 * Sums over rows go through red (NULL: this process holds every row); g may
 * be NULL (no weight gradients). b->Xn and b->dXn are scratch [n, D].
 */
typedef struct {
    const float *X, *M;              /* the forward's input [n, D] and M [n, H*d] */
    float *dX;                       /* [n, D], in and out */
    float *dM, *dQ, *dK, *dV;        /* [n, H*d] */
    float *Xn, *dXn;                 /* [n, D] */
} ag_i_round_back_t;

typedef int (*ag_i_attend_back_fn)(void *ctx, const ag_weights_t *w, ag_weights_t *g,
                                   const ag_score_t *sc, ag_error_t *err);

AG_INTERNAL
int ag_i_round_backward(int64_t n, const ag_weights_t *w, ag_weights_t *g, int k,
                        const ag_round_opts_t *o, const ag_i_round_back_t *b,
                        const ag_i_reducer_t *red, ag_i_attend_back_fn attend_back,
                        void *ctx, ag_error_t *err);

/* The losses with r (NULL: the plain calls; see base/gemm.h); the counts
   that scale a loss are the whole's. */
int ag_i_loss_mse_r(const ag_i_reducer_t *r, const float *X, const float *Y, int64_t N,
                    int64_t D, const uint8_t *mask, double *loss, float *dX, ag_error_t *err);
int ag_i_loss_cross_entropy_r(const ag_i_reducer_t *r, const float *X, int64_t N, int64_t D,
                              const float *Wr, const float *br, int64_t C,
                              const int64_t *labels, const uint8_t *mask, double *loss,
                              float *dX, float *dWr, float *dbr, int64_t *correct,
                              int64_t *counted, int64_t *pred, ag_error_t *err);

#endif
