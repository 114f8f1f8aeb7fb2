/*
 * The process the library runs in: its version, the threads, and whether the
 * tools may start themselves again (cli/waits.c).
 */
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/base.h"

int ag_i_can_restart(void)
{
    /* valgrind runs the program inside its own: an execv of /proc/self/exe
       starts valgrind's tool binary, which refuses to run alone */
    const char *preload = getenv("LD_PRELOAD");
    return !(preload && strstr(preload, "vgpreload"));
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
