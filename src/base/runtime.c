/*
 * The machine the library runs on: OpenBLAS's kernel choice and thread counts.
 *
 * OpenBLAS 0.3.21 (Debian bookworm) picks its kernels once, when it loads, from
 * the CPU model, and it does not know some current CPUs: Intel Emerald Rapids
 * gets "Prescott" (SSE3; sgemm 4096^3 on 2 threads 65 GFLOP/s instead of 324).
 * Only the environment variable OPENBLAS_CORETYPE, set before the library
 * loads, changes the choice, so a program can only be fixed by starting it
 * again with the variable set (ag_blas_fix) or by setting it before it
 * starts. The same variable can also make things worse: this project's AMD
 * EPYC (Zen 5) machines start programs with OPENBLAS_CORETYPE=Haswell (AVX2;
 * sgemm 217 GFLOP/s), where OpenBLAS's own choice would be the AVX-512
 * "Cooperlake" kernels (416). So a core type slower than the CPU is replaced
 * whether OpenBLAS or the environment chose it; AG_BLAS_KEEP=1 keeps it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>

#include "base/base.h"

/* Instruction-set tiers of OpenBLAS's x86 core types: what their kernels use. */
enum { TIER_OLD = 0, TIER_AVX, TIER_AVX2, TIER_AVX512 };

#if defined(__x86_64__)
static int core_tier(const char *core)
{
    static const char *const avx512[] = {"SkylakeX", "CooperLake", "SapphireRapids"};
    static const char *const avx2[] = {"Haswell", "Zen"};
    static const char *const avx[] = {"Sandybridge", "Bulldozer", "Piledriver", "Steamroller",
                                      "Excavator"};
    for (size_t k = 0; k < sizeof avx512 / sizeof avx512[0]; k++)
        if (strcasecmp(core, avx512[k]) == 0)
            return TIER_AVX512;
    for (size_t k = 0; k < sizeof avx2 / sizeof avx2[0]; k++)
        if (strcasecmp(core, avx2[k]) == 0)
            return TIER_AVX2;
    for (size_t k = 0; k < sizeof avx / sizeof avx[0]; k++)
        if (strcasecmp(core, avx[k]) == 0)
            return TIER_AVX;
    return TIER_OLD;
}
#endif

/* The best tier this CPU runs, and the core type that names it. */
static int cpu_tier(const char **core)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
        *core = "SkylakeX";
        return TIER_AVX512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *core = "Haswell";
        return TIER_AVX2;
    }
    if (__builtin_cpu_supports("avx")) {
        *core = "Sandybridge";
        return TIER_AVX;
    }
#endif
    *core = NULL;
    return TIER_OLD;
}

void ag_blas_check(ag_blas_info_t *info)
{
    memset(info, 0, sizeof *info);
    const char *chosen = openblas_get_corename();
    snprintf(info->chosen, sizeof info->chosen, "%s", chosen ? chosen : "unknown");
    info->forced = getenv("OPENBLAS_CORETYPE") != NULL;
    const char *best;
    const int tier = cpu_tier(&best);
    snprintf(info->best, sizeof info->best, "%s", best ? best : info->chosen);
#if defined(__x86_64__)
    info->slow = best && core_tier(info->chosen) < tier;
#else
    (void)tier;   /* other architectures: OpenBLAS's own choice stands */
#endif
}

int ag_i_can_restart(void)
{
    /* valgrind runs the program inside its own: an execv of /proc/self/exe
       starts valgrind's tool binary, which refuses to run alone */
    const char *preload = getenv("LD_PRELOAD");
    return !(preload && strstr(preload, "vgpreload"));
}

/* Set in the restarted program: one restart at most, even if OpenBLAS ignores
   the core type it was given. Its value is the OPENBLAS_CORETYPE the program
   was started with ("=" and the value, or "-" for none). */
#define RESTARTED "AG_BLAS_RESTARTED"

/* OPENBLAS_CORETYPE as marker m (RESTARTED's value) says it was. */
static void coretype_as_it_was(const char *m)
{
    if (m[0] == '=')
        setenv("OPENBLAS_CORETYPE", m + 1, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
}

int ag_blas_fix(char **argv, ag_error_t *err)
{
    ag_blas_info_t info;
    ag_blas_check(&info);
    const char *marker = getenv(RESTARTED);
    if (marker) {   /* OpenBLAS has read its core type: the programs this one
                       starts get the environment it was started with, and
                       choose for themselves (one under valgrind has no AVX-512) */
        coretype_as_it_was(marker);
        unsetenv(RESTARTED);
        return AG_OK;
    }
    if (!info.slow || getenv("AG_BLAS_KEEP") || !ag_i_can_restart())
        return AG_OK;
    /* the environment as it was, for the restarted program and should the
       restart fail */
    const char *old = getenv("OPENBLAS_CORETYPE");
    char *was = malloc(old ? strlen(old) + 2 : 2);
    if (was)
        snprintf(was, old ? strlen(old) + 2 : 2, "%s%s", old ? "=" : "-", old ? old : "");
    if (was && setenv(RESTARTED, was, 1) == 0 &&
        setenv("OPENBLAS_CORETYPE", info.best, 1) == 0)
        execv("/proc/self/exe", argv);   /* returns only on failure */
    const int e = errno;
    if (was)
        coretype_as_it_was(was);
    unsetenv(RESTARTED);
    free(was);
    return ag_i_fail(err, AG_EIO, "OpenBLAS chose its %s kernels on a CPU that runs %s; "
                     "restarting with OPENBLAS_CORETYPE=%s failed: %s", info.chosen, info.best,
                     info.best, strerror(e));
}

const char *ag_version(void)
{
    return AG_VERSION;
}

int ag_set_threads(int threads)
{
#ifdef _OPENMP
    omp_set_num_threads(threads > 0 ? threads : ag_i_default_threads());
    const int n = omp_get_max_threads();
#else
    const int n = 1;
#endif
    ag_i_threads_choice(threads > 0 ? AG_I_THREADS_USER : AG_I_THREADS_DEFAULT);
    return n;
}

int ag_i_set_tool_threads(int threads)
{
    const int n = ag_set_threads(threads);
    if (threads > 0)
        ag_i_threads_choice(AG_I_THREADS_TOOL);
    return n;
}
