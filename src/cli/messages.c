/*
 * The tool's words to its user: usage errors (exit 2, with the way to --help),
 * failures found in the inputs (exit 1), and a failure's message given the
 * context it happened in. One form for every command and both programs
 * (cli_program: "attngraph" or "attngraph-mpi").
 */
#include <stdarg.h>
#include <stdio.h>

#include "base/base.h"
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
    va_list ap;
    va_start(ap, fmt);
    rc = ag_i_fail_prefix_v(rc, err, fmt, ap);
    va_end(ap);
    return rc;
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
