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
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* Does text name --name as a whole word ("--attn" is not in "--attn-round")? */
static int names_option(const char *text, const char *name)
{
    const size_t len = strlen(name);
    for (const char *at = text; (at = strstr(at, "--")) != NULL; at += 2)
        if (strncmp(at + 2, name, len) == 0) {
            const char c = at[2 + len];
            if (!(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '-')
                return 1;
        }
    return 0;
}

/* Puts table's options into p->opts, checking that each is named by its help
   or, without one, by the text before it (*text, NULL in an unlisted table). */
static void flatten(opt_parser_t *p, const opt_def_t *table, const char **text, int unlisted)
{
    for (const opt_def_t *e = table; e->name || e->help || e->table; e++) {
        if (e->table) {
            flatten(p, e->table, text, unlisted || e->unlisted);
            continue;
        }
        if (e->help && !unlisted)
            *text = e->help;
        if (!e->name)
            continue;
        const char *fault = NULL;
        for (int k = 0; k < p->n_opts; k++)
            if (strcmp(p->opts[k]->name, e->name) == 0)
                fault = "is declared twice";
        if (!unlisted && (!*text || !names_option(*text, e->name)))
            fault = "is not named by its help";
        if (e->code < OPT_Q || e->code >= OPT_END)
            fault = "has no code";
        if (p->n_opts == OPT_MAX_OPTIONS)
            fault = "is one more than OPT_MAX_OPTIONS";
        if (fault && !p->fault[0])
            snprintf(p->fault, sizeof p->fault, "--%s %s", e->name, fault);
        if (!fault)
            p->opts[p->n_opts++] = e;
    }
}

void opt_begin(opt_parser_t *p, const char *cmd, const opt_def_t *table, int argc,
               char **argv)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->table = table;
    p->argc = argc;
    p->argv = argv;
    p->next = 1;
    const char *text = NULL;
    flatten(p, table, &text, 0);
}

static void print_help(const opt_def_t *table, int unlisted)
{
    for (const opt_def_t *e = table; e->name || e->help || e->table; e++)
        if (e->table)
            print_help(e->table, unlisted || e->unlisted);
        else if (e->help && !unlisted)
            fputs(e->help, stdout);
}

void opt_print_help(const opt_def_t *table)
{
    print_help(table, 0);
}

static int stop(opt_parser_t *p, int status)
{
    p->status = status;
    return -1;
}

/* A list of option names, sorted, so that a message reads the same whatever
   the table's order. */
typedef struct {
    const char *name[64];
    int n;
} names_t;

static void names_add(names_t *l, const char *name)
{
    if (l->n == 64)
        return;
    int at = l->n++;
    while (at > 0 && strcmp(l->name[at - 1], name) > 0) {
        l->name[at] = l->name[at - 1];
        at--;
    }
    l->name[at] = name;
}

/* "--attn, --head-dim or --heads" into buf; returns the count. */
static int names_write(const names_t *l, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int k = 0; k < l->n; k++) {
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s--%s", k == 0 ? "" : k == l->n - 1 ? " or " : ", ",
                 l->name[k]);
    }
    return l->n;
}

/* The options whose names start with name[0..len), into buf; their count. */
static int candidates(const opt_parser_t *p, const char *name, size_t len, char *buf,
                      size_t cap)
{
    names_t l = {.n = 0};
    for (int k = 0; k < p->n_opts; k++)
        if (strncmp(p->opts[k]->name, name, len) == 0)
            names_add(&l, p->opts[k]->name);
    return names_write(&l, buf, cap);
}

/* The edit distance between a[0..n) and b (insertions, deletions,
   substitutions and swaps of neighbours, each 1: Damerau's optimal string
   alignment); 10 for names over 63 bytes, too far to suggest. */
static int distance(const char *a, size_t n, const char *b)
{
    const size_t m = strlen(b);
    if (n > 63 || m > 63)
        return 10;
    int d[64][64];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            best = d[i - 1][j] + 1 < best ? d[i - 1][j] + 1 : best;
            best = d[i][j - 1] + 1 < best ? d[i][j - 1] + 1 : best;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

/* The options nearest to a misspelt name[0..len) (at most 1 edit for names of
   up to 4 letters, 2 for longer ones), into buf; their count. */
static int nearest(const opt_parser_t *p, const char *name, size_t len, char *buf, size_t cap)
{
    const int most = len <= 4 ? 1 : 2;
    int best = most + 1;
    for (int k = 0; k < p->n_opts; k++) {
        const int dist = distance(name, len, p->opts[k]->name);
        best = dist < best ? dist : best;
    }
    names_t l = {.n = 0};
    for (int k = 0; k < p->n_opts && best <= most; k++)
        if (distance(name, len, p->opts[k]->name) == best)
            names_add(&l, p->opts[k]->name);
    return names_write(&l, buf, cap);
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
    for (int k = 0; k < p->n_opts; k++)
        if (strlen(p->opts[k]->name) == len && strncmp(p->opts[k]->name, a + 2, len) == 0)
            return 1;
    return strcmp(a, "--help") == 0;
}

int opt_next(opt_parser_t *p)
{
    if (p->fault[0]) {   /* a fault of the program, not of the command line */
        fprintf(stderr, "%s %s: internal error: in the option table, %s\n", cli_program,
                p->cmd, p->fault);
        return stop(p, EXIT_SOFTWARE);
    }
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
            opt_print_help(p->table);
            return stop(p, 0);
        }
        if (a[1] != '-')
            return stop(p, usage_error(p->cmd, "unknown option '%s'", a));
        const char *name = a + 2, *eq = strchr(name, '=');
        const size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const opt_def_t *opt = NULL;
        for (int k = 0; k < p->n_opts && !opt; k++)
            if (strlen(p->opts[k]->name) == len && strncmp(p->opts[k]->name, name, len) == 0)
                opt = p->opts[k];
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
            if (len && nearest(p, name, len, list, sizeof list))
                return stop(p, usage_error(p->cmd, "unknown option '--%.*s'; did you mean %s?",
                                           (int)len, name, list));
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
        const int slot = opt->code - OPT_Q;
        if (p->seen[slot] && !opt->repeat) {
            if (arg)
                return stop(p, usage_error(p->cmd, "--%s given twice ('%s', then '%s'); give "
                                           "it once", opt->name, p->seen_arg[slot], arg));
            return stop(p, usage_error(p->cmd, "--%s given twice; give it once", opt->name));
        }
        p->seen[slot] = 1;
        p->seen_arg[slot] = arg;
        p->arg = arg;
        p->name = opt->name;
        return opt->code;
    }
    return 0;
}

int opt_positional(const opt_parser_t *p, int max)
{
    if (p->n_pos > max)
        return usage_error(p->cmd, "unexpected argument '%s'", p->pos[max]);
    return 0;
}

/* ---- option values as numbers, refused with a message naming the option ---- */

/* An integer option value in [min, max]; 0 on success. */
int opt_int(int64_t *out, const char *cmd, const char *name, const char *text, int64_t min,
            int64_t max)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) {
        if (max >= INT64_MAX / 64)   /* no real upper limit: do not print a huge number */
            return usage_error(cmd, "--%s '%s' is not an integer >= %lld", name, text,
                               (long long)min);
        return usage_error(cmd, "--%s '%s' is not an integer in %lld..%lld", name, text,
                           (long long)min, (long long)max);
    }
    *out = v;
    return 0;
}

int opt_real(double *out, const char *cmd, const char *name, const char *text, double min,
             int above)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (!errno && end != text && !*end && isfinite(v) && fabs(v) > FLT_MAX)   /* held as float */
        return usage_error(cmd, "--%s '%s' is beyond float32's range (%.3g)", name, text,
                           (double)FLT_MAX);
    if (errno || end == text || *end || !isfinite(v) || v < min || (above && v == min)) {
        if (min <= -1e30)
            return usage_error(cmd, "--%s '%s' is not a number", name, text);
        return usage_error(cmd, "--%s '%s' is not a number %s %g", name, text,
                           above ? ">" : ">=", min);
    }
    *out = v;
    return 0;
}
