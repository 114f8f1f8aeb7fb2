/* Which compiled variant of the vector code this CPU runs (base/simd_level.h). */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

static int forced = -1;

static const char *const names[] = {"base", "avx2", "avx512"};

void ag_i_simd_force(int level)
{
    forced = level >= AG_SIMD_BASE && level <= AG_SIMD_AVX512 ? level : -1;
}

/* The best level the CPU runs. */
static ag_simd_level_t cpu_level(void)
{
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

/* AG_SIMD's level, -1 when unset, -2 when it names none. */
static int env_level(void)
{
    const char *s = getenv("AG_SIMD");
    if (!s || !*s)
        return -1;
    for (int k = 0; k <= AG_SIMD_AVX512; k++)
        if (strcmp(s, names[k]) == 0)
            return k;
    return -2;
}

ag_simd_level_t ag_i_simd_level(void)
{
    if (forced >= 0)
        return (ag_simd_level_t)forced;
    /* found once (the kernels ask on every call, some inside a parallel
       region): one atomic int, so a thread sees -1 or the level, never half */
    static int cached = -1;
    int level = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
    if (level < 0) {
        const int best = cpu_level(), want = env_level();
        level = want >= 0 && want < best ? want : best;
        __atomic_store_n(&cached, level, __ATOMIC_RELEASE);
    }
    return (ag_simd_level_t)level;
}

const char *ag_simd_isa(void)
{
    return names[ag_i_simd_level()];
}

int ag_simd_env_check(ag_error_t *err)
{
    const int want = env_level(), best = cpu_level();
    if (want == -2)
        return ag_fail(err, AG_EINVAL, "AG_SIMD '%s': expected base, avx2 or avx512",
                       getenv("AG_SIMD"));
    if (want > best)
        return ag_fail(err, AG_EINVAL, "AG_SIMD '%s': this CPU runs at most %s", names[want],
                       names[best]);
    return AG_OK;
}
