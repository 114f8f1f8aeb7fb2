/* The fused kernels' loops of each instruction set, registered in one place. */
#include "kernels/isa.h"

#define TILED(stem, isa) {stem##_q1_##isa, stem##_q4_##isa}
#define SET(level, isa)                                                                   \
    {level, TILED(ag_i_tile, isa), TILED(ag_i_block, isa), TILED(ag_i_grad, isa),       \
     TILED(ag_i_task, isa), ag_i_rows_##isa, ag_i_grad_rows_##isa, ag_i_srow_fwd_##isa,     \
     ag_i_srow_dst_##isa, ag_i_srow_src_##isa}

static const ag_i_isa_t sets[] = {
    [AG_SIMD_BASE] = SET(AG_SIMD_BASE, base),
    [AG_SIMD_AVX2] = SET(AG_SIMD_AVX2, avx2),
    [AG_SIMD_AVX512] = SET(AG_SIMD_AVX512, avx512),
};

const ag_i_isa_t *ag_i_isa(void)
{
    return &sets[ag_i_simd_level()];
}
