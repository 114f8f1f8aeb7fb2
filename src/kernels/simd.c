/* Which compiled variant of the vector kernels this CPU runs. */
#include "simd.h"

static int forced = -1;

void ag_simd_force(int level)
{
    forced = level >= AG_SIMD_BASE && level <= AG_SIMD_AVX512 ? level : -1;
}

ag_simd_level_t ag_simd_level(void)
{
    if (forced >= 0)
        return (ag_simd_level_t)forced;
#if AG_HAVE_VARIANTS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512cd"))
        return AG_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return AG_SIMD_AVX2;
#endif
    return AG_SIMD_BASE;
}
