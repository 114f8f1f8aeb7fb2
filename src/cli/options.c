/*
 * The one option parser of the commands (instead of one getopt loop each).
 *
 * Rules, the same for every command:
 * - Long options are written in full: "--heads 4" or "--heads=4". An
 *   abbreviation is refused and the message names the options it could mean,
 *   so adding an option never changes what an existing command line means
 *   (inspect's "--attn" used to be read as --attn-round).
 * - An option given twice is refused, naming it, unless the command declares
 *   it repeatable (run --attn, compare --pattern/--graph).
 * - -h and --help print the command's help to stdout and exit 0.
 * - "--" ends the options; everything else is a positional argument, in order.
 * - An option's value never is another option of the command ("--out --quiet"
 *   forgot the file); "--out=--quiet" says it is meant.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

void opt_begin(opt_parser_t *p, const char *cmd, const char *help,
               const struct option *longopts, const int *repeatable, int argc, char **argv)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->help = help;
    p->longopts = longopts;
    p->repeatable = repeatable;
    p->argc = argc;
    p->argv = argv;
    p->next = 1;
}

static int stop(opt_parser_t *p, int status)
{
    p->status = status;
    return -1;
}

/* "--attn, --attn-round": the options whose names start with name[0..len). */
static int candidates(const opt_parser_t *p, const char *name, size_t len, char *buf,
                      size_t cap)
{
    const char *found[64];
    int n = 0;
    for (int k = 0; p->longopts[k].name && n < 64; k++)
        if (strncmp(p->longopts[k].name, name, len) == 0) {
            /* sorted, so the message reads the same whatever the table's order */
            int at = n++;
            while (at > 0 && strcmp(found[at - 1], p->longopts[k].name) > 0) {
                found[at] = found[at - 1];
                at--;
            }
            found[at] = p->longopts[k].name;
        }
    buf[0] = '\0';
    for (int k = 0; k < n; k++) {
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s--%s", k == 0 ? "" : k == n - 1 ? " or " : ", ",
                 found[k]);
    }
    return n;
}

/* Is a an option of this command ("--name", "--name=...", "-h")? Such a word
   after an option that needs a value means the value was forgotten. */
static int is_option(const opt_parser_t *p, const char *a)
{
    if (strcmp(a, "-h") == 0)
        return 1;
    if (strncmp(a, "--", 2) != 0)
        return 0;
    const size_t len = strcspn(a + 2, "=");
    for (int k = 0; p->longopts[k].name; k++)
        if (strlen(p->longopts[k].name) == len && strncmp(p->longopts[k].name, a + 2, len) == 0)
            return 1;
    return strcmp(a, "--help") == 0;
}

static int repeatable(const opt_parser_t *p, int code)
{
    for (int k = 0; p->repeatable && p->repeatable[k]; k++)
        if (p->repeatable[k] == code)
            return 1;
    return 0;
}

int opt_next(opt_parser_t *p)
{
    while (p->next < p->argc) {
        char *a = p->argv[p->next++];
        if (p->after_dashes || a[0] != '-' || a[1] == '\0') {
            if (p->n_pos < OPT_MAX_POSITIONAL)
                p->pos[p->n_pos] = a;
            p->n_pos++;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            p->after_dashes = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(p->help, stdout);
            return stop(p, 0);
        }
        if (a[1] != '-')
            return stop(p, usage_error(p->cmd, "unknown option '%s'", a));
        const char *name = a + 2, *eq = strchr(name, '=');
        const size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const struct option *opt = NULL;
        for (int k = 0; p->longopts[k].name && !opt; k++)
            if (strlen(p->longopts[k].name) == len && strncmp(p->longopts[k].name, name, len) == 0)
                opt = &p->longopts[k];
        if (!opt) {
            char list[1024];
            int n = len ? candidates(p, name, len, list, sizeof list) : 0;
            if (n > 1)
                return stop(p, usage_error(p->cmd, "ambiguous option '--%.*s': could be %s "
                                           "(options are not abbreviated)", (int)len, name,
                                           list));
            if (n == 1)
                return stop(p, usage_error(p->cmd, "unknown option '--%.*s'; did you mean %s? "
                                           "(options are not abbreviated)", (int)len, name,
                                           list));
            return stop(p, usage_error(p->cmd, "unknown option '--%.*s'", (int)len, name));
        }
        const char *arg = NULL;
        if (opt->has_arg == no_argument && eq)
            return stop(p, usage_error(p->cmd, "option '--%s' takes no value", opt->name));
        if (opt->has_arg != no_argument) {
            if (eq)
                arg = eq + 1;
            else if (p->next < p->argc && !is_option(p, p->argv[p->next]))
                arg = p->argv[p->next++];
            else if (p->next < p->argc)
                return stop(p, usage_error(p->cmd, "option '--%s' needs a value; '%s' is the "
                                           "next option (write --%s=%s for a value that "
                                           "looks like one)", opt->name, p->argv[p->next],
                                           opt->name, p->argv[p->next]));
            else
                return stop(p, usage_error(p->cmd, "option '--%s' needs a value", opt->name));
        }
        const int slot = opt->val - OPT_Q;
        if (slot >= 0 && slot < OPT_COUNT && p->seen[slot] && !repeatable(p, opt->val)) {
            if (arg)
                return stop(p, usage_error(p->cmd, "--%s given twice ('%s', then '%s'); give "
                                           "it once", opt->name, p->seen_arg[slot], arg));
            return stop(p, usage_error(p->cmd, "--%s given twice; give it once", opt->name));
        }
        if (slot >= 0 && slot < OPT_COUNT) {
            p->seen[slot] = 1;
            p->seen_arg[slot] = arg;
        }
        p->arg = arg;
        p->name = opt->name;
        return opt->val;
    }
    return 0;
}

int opt_positional(const opt_parser_t *p, int max)
{
    if (p->n_pos > max)
        return usage_error(p->cmd, "unexpected argument '%s'", p->pos[max]);
    return 0;
}
