/*
 * The tool's words to its user: usage errors (exit 2, with the way to --help),
 * failures found in the inputs (exit 1), and a failure's message given the
 * context it happened in. One form for every command and both programs
 * (cli_program: "attngraph" or "attngraph-mpi").
 */
#include <stdarg.h>
#include <stdio.h>

#include "cli/cli.h"

const char *cli_program = "attngraph";

int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s %s: ", cli_program, cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nsee '%s %s --help'\n", cli_program, cmd);
    va_end(ap);
    return EXIT_USAGE;
}

int error_after(int rc, ag_error_t *err, const char *fmt, ...)
{
    if (!rc || !err)
        return rc;
    char prefix[sizeof err->msg], why[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    snprintf(why, sizeof why, "%s", err->msg);
    return ag_fail(err, (ag_status_t)rc, "%s: %s", prefix, why);
}

int finish(const char *cmd, int rc, int usage, const ag_error_t *err)
{
    if (!rc)
        return 0;
    if (usage)
        return usage_error(cmd, "%s", err->msg);
    fprintf(stderr, "%s: %s\n", cli_program, err->msg);
    return EXIT_BAD_INPUT;
}
