/*
 * How the tools' threads wait: a short spin at a barrier, then sleep.
 *
 * libgomp spins 300,000 pauses (5-15 ms) at every barrier before it sleeps,
 * unless told otherwise, and reads how long once, when it loads. Beside other
 * programs that spin burns the core the thread it waits for needs: two GAT
 * epochs side by side on 2 cores of a Zen 5 took 3.8x the quiet epoch each,
 * 1.9x with 10,000 pauses (0.2-0.5 ms: longer than the gaps between a step's
 * regions, so the quiet lm train step did not slow down: 26.1 against
 * 26.2 ms, the medians of 6 alternating runs). So the tools start with
 * GOMP_SPINCOUNT set, unless the user set it or OMP_WAIT_POLICY. A library
 * cannot do this for its host program (it shrinks its team instead,
 * base/share.c), and neither can a program once it runs: libgomp has loaded
 * before main, and setenv in a .preinit_array function is undone by the C
 * library's own start. So a tool that lacks it sets it and starts itself
 * again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

int cli_short_waits(char **argv, ag_error_t *err)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || !ag_i_can_restart())
        return AG_OK;
    if (setenv("GOMP_SPINCOUNT", CLI_SPINCOUNT, 1) != 0)
        return AG_OK;
    execv("/proc/self/exe", argv);   /* returns only on failure */
    const int e = errno;
    unsetenv("GOMP_SPINCOUNT");   /* --version then says what libgomp does */
    return ag_fail(err, AG_EIO, "restarting with GOMP_SPINCOUNT=%s (threads that wait "
                   "briefly, then sleep) failed: %s", CLI_SPINCOUNT, strerror(e));
}

const char *cli_waits(void)
{
    static char text[160];
    const char *policy = getenv("OMP_WAIT_POLICY"), *spins = getenv("GOMP_SPINCOUNT");
    if (policy || (spins && strcmp(spins, CLI_SPINCOUNT) != 0))
        snprintf(text, sizeof text, "as the environment says (OMP_WAIT_POLICY=%s, "
                 "GOMP_SPINCOUNT=%s)", policy ? policy : "unset", spins ? spins : "unset");
    else if (spins)
        snprintf(text, sizeof text, "spin %s pauses, then sleep", CLI_SPINCOUNT);
    else
        snprintf(text, sizeof text, "libgomp's own (a long spin)");
    return text;
}
