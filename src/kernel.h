/* Private entry points of the attention kernels. */
#ifndef AG_KERNEL_H
#define AG_KERNEL_H

#include "attngraph.h"

/* Softmax attention with scores q.k * scale, one pass (kernel.c). */
int ag_i_attention_online(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                          int64_t H, int64_t d, float scale, float *M, ag_error_t *err);

/* Does every destination have at most one run (the tiled kernel's shape)? */
int ag_i_tiled_applies(const ag_nbhd_t *nb);

/* Softmax attention with scores q.k * scale, fused and tiled (tiled.c);
   every destination must have at most one run. */
int ag_i_attention_tiled(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                         int64_t H, int64_t d, float scale, float *M, ag_error_t *err);
/* Softmax attention with scores q.k * scale for any neighbourhoods, reading
   scattered rows with prefetching (gather.c). */
int ag_i_attention_gather(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                          int64_t H, int64_t d, float scale, float *M, ag_error_t *err);

/* The fastest kernel that applies to nb's shape. */
int ag_i_attention_auto(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                        int64_t H, int64_t d, float scale, float *M, ag_error_t *err);

#endif
