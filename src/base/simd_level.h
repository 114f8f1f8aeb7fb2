/*
 * Which compiled variant of the vector code this process runs: the kernels'
 * (kernels/simd.h) and the dense products' (base/sgemm.c). A variant is a
 * function compiled with a target attribute; ag_i_simd_level() picks one at
 * run time (the CPU's best, AG_SIMD's, or the one a test forced).
 */
#ifndef AG_SIMD_LEVEL_H
#define AG_SIMD_LEVEL_H

#if defined(__x86_64__) && defined(__GNUC__)
#define AG_HAVE_VARIANTS 1
#define AG_TARGET_AVX512 __attribute__((target("avx512f,avx512cd,avx512bw,avx512dq,avx512vl,fma")))
#define AG_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define AG_HAVE_VARIANTS 0
#define AG_TARGET_AVX512
#define AG_TARGET_AVX2
#endif

typedef enum { AG_SIMD_BASE = 0, AG_SIMD_AVX2, AG_SIMD_AVX512 } ag_simd_level_t;

/* The best level this CPU runs, or the one forced by ag_i_simd_force. */
ag_simd_level_t ag_i_simd_level(void);
/* Forces a level (tests compare every variant); AG_SIMD_AVX512 + 1 resets. */
void ag_i_simd_force(int level);

#endif
