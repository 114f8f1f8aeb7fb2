/* What the rounds (rounds.c) share with their training forward and backward (backprop.c). */
#ifndef AG_ROUNDS_H
#define AG_ROUNDS_H

#include "attngraph.h"

/* Checks the round count against the layers and every layer against the first and nb. */
int ag_i_rounds_check(const ag_nbhd_t *nb, const ag_weights_t *layers, int n_layers,
                      int rounds, ag_error_t *err);

/* LayerNorm's epsilon of the options (NULL: the default). */
float ag_i_ln_eps(const ag_round_opts_t *o);

/* The score of a round with layer w (index k, for messages): the options' score
   with the layer's attention vectors filled in where the options have none.
   Refuses a negative or non-finite ln_eps (every path calls it before its first round). */
int ag_i_round_score(ag_score_t *sc, const ag_round_opts_t *o, const ag_weights_t *w, int k,
                     ag_error_t *err);

/* Q, K, V [N, H*d] = Xn [N, D] times w's projections (shared or per node). */
void ag_i_project_qkv(const ag_weights_t *w, const float *Xn, int64_t N, float *Q, float *K,
                      float *V);

/*
 * LayerNorm's backward for Y = LayerNorm(X) (ag_layer_norm, weight NULL: 1):
 * dX += dL/dX from dY; dW += sum over rows of dY * xhat and dB += sum of dY
 * (each NULL: not wanted), summed over rows in fixed chunks (the same bits
 * for any thread count). Fails only for memory.
 */
int ag_i_layer_norm_backward(float *dX, float *dW, float *dB, const float *dY, const float *X,
                             int64_t N, int64_t D, const float *weight, float eps,
                             ag_error_t *err);

/* The arrays of w, in the order wq wk wv wo ln_weight ln_bias attn_src attn_dst
   attn, and the floats each has (or would have) by w's sizes. */
#define AG_I_WEIGHT_ARRAYS 9
int ag_i_weights_arrays(ag_weights_t *w, float **arrays[AG_I_WEIGHT_ARRAYS],
                        int64_t sizes[AG_I_WEIGHT_ARRAYS]);

#endif
