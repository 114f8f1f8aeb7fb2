/*
 * OpenBLAS 0.3.21 (Debian bookworm) does not recognise some newer x86 CPUs
 * (this project's machines: Sapphire Rapids) and falls back to its
 * "Prescott" SSE3 kernels, measured 5x slower here (65 instead of 324
 * GFLOP/s for sgemm on 2 threads). The kernels are chosen when the library
 * loads, so when that happened we name the right core type and start the
 * program again. A user's own OPENBLAS_CORETYPE is always left alone.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cblas.h>

#include "openblas_fix.h"

void openblas_fix_coretype(char **argv)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (getenv("OPENBLAS_CORETYPE"))
        return;
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "Prescott") != 0)
        return;
    __builtin_cpu_init();
    const char *better = NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        better = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        better = "Haswell";
    if (!better)
        return;
    setenv("OPENBLAS_CORETYPE", better, 1);
    execv("/proc/self/exe", argv);   /* only returns on failure: go on as we are */
#else
    (void)argv;
#endif
}
