/* Private entry points of the attention kernels. */
#ifndef AG_KERNEL_H
#define AG_KERNEL_H

#include "attngraph.h"

/* Softmax attention with scores q.k * scale, one pass (kernel.c). */
int ag_i_attention_online(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                          int64_t H, int64_t d, float scale, float *M, ag_error_t *err);

#endif
