/*
 * What defines a trained model beyond its arrays: the heads, the rounds, the
 * score, the round's form and how the graph was shaped (self-loops,
 * direction: they change the messages). train --save writes them, as
 * command-line text, to DIR/model.args; every command that reads --weights DIR
 * compares its own with them, so a model is never run with other heads or
 * rounds than it was trained with (the arrays alone cannot tell 2 heads of 8
 * from 1 of 16).
 *
 * One form for a value, whoever writes it (here, and Python's
 * attngraph.weights.model_args): the float32 the model uses, printed %.9g
 * (it reads back to the same float32), and left out where it is the
 * default of AG_SCORE_INIT.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "base/base.h"

/* Appends to buf [cap] what printf would write. */
#define APPEND(...) (used += (size_t)snprintf(buf + used, used < cap ? cap - used : 0, __VA_ARGS__))

size_t model_args(char *buf, size_t cap, const run_opts_t *o, int64_t heads, int64_t rounds)
{
    size_t used = 0;
    const ag_score_t *s = &o->score;
    const ag_score_t def = AG_SCORE_INIT;
    buf[0] = '\0';
    APPEND("--heads %lld --rounds %lld", (long long)heads, (long long)rounds);
    if (s->kind)
        APPEND(" --score %s", ag_score_kind_name(s->kind));
    if (s->beta != def.beta)
        APPEND(" --beta %.9g", (double)s->beta);
    if (s->softcap != def.softcap)
        APPEND(" --softcap %.9g", (double)s->softcap);
    if (s->slope != def.slope && (s->kind == AG_SCORE_ADDITIVE || s->kind == AG_SCORE_GATV2))
        APPEND(" --slope %.9g", (double)s->slope);
    if (s->has_sigmoid_bias)
        APPEND(" --sigmoid-bias %.9g", (double)s->sigmoid_bias);
    if (s->alibi)
        APPEND(" --alibi");
    if (o->edge_bias)
        APPEND(" --edge-bias %s", o->edge_bias);
    if (o->no_residual)
        APPEND(" --no-residual");
    if (o->norm == AG_NORM_LAYER)
        APPEND(" --norm layer");
    if (o->posenc)
        APPEND(" --posenc sinusoidal");
    if (o->src.self != AG_SELF_KEEP)
        APPEND(" --self-loops %s", ag_self_loops_name(o->src.self));
    if (o->src.direction != AG_EDGES_AUTO && o->src.graph)   /* graph files have one */
        APPEND(" --%s", o->src.direction == AG_EDGES_DIRECTED ? "directed" : "undirected");
    return used;
}

int model_args_check(const run_opts_t *o, int64_t heads, int64_t rounds, ag_error_t *err)
{
    char path[4096], saved[1024] = "", ours[1024];
    snprintf(path, sizeof path, "%s/model.args", o->weights);
    FILE *f = fopen(path, "r");
    if (!f)
        return AG_OK;   /* a folder not made by train --save: its arrays say all they can */
    const int read = fgets(saved, sizeof saved, f) != NULL;
    fclose(f);
    saved[strcspn(saved, "\r\n")] = '\0';
    if (!read || strncmp(saved, "--heads ", 8) != 0)
        return ag_fail(err, AG_EFORMAT, "%s: expected one line of options starting with "
                       "--heads (as train --save writes it)", path);
    model_args(ours, sizeof ours, o, heads, rounds);
    if (!o->src.graph)   /* a pattern or CSR has no direction to agree on */
        for (const char *const *w = (const char *const[]){" --directed", " --undirected", NULL};
             *w; w++) {
            char *at = strstr(saved, *w);
            if (at && (at[strlen(*w)] == '\0' || at[strlen(*w)] == ' '))
                memmove(at, at + strlen(*w), strlen(at + strlen(*w)) + 1);
        }
    if (strcmp(saved, ours) == 0)
        return AG_OK;
    return ag_fail(err, AG_EINVAL, "%s was trained with `%s` (%s); this command has `%s`: "
                   "give all of the model's options, or none to take them from it", o->weights, saved, path, ours);
}

/* The options model.args holds: the model's, and how the graph was shaped. Each
   group a command gives none of is taken from model.args (direction only for a
   graph file); a group given is compared as a whole (model_args_check). */
static const int model_codes[] = {OPT_HEADS, OPT_ROUNDS, OPT_SCORE, OPT_BETA, OPT_SOFTCAP,
                                  OPT_SLOPE, OPT_SIGMOID_BIAS, OPT_ALIBI, OPT_EDGE_BIAS,
                                  OPT_NO_RESIDUAL, OPT_NORM, OPT_POSENC};
static const int graph_codes[] = {OPT_SELF_LOOPS, OPT_DIRECTED, OPT_UNDIRECTED};

static int in_codes(const int *codes, size_t n, int code)
{
    for (size_t k = 0; k < n; k++)
        if (codes[k] == code)
            return 1;
    return 0;
}

static int any_given(const run_opts_t *o, const int *codes, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (o->given[codes[k] - OPT_Q])
            return 1;
    return 0;
}

#define COUNT(a) (sizeof a / sizeof a[0])

int model_args_defaults(run_opts_t *o, const char *cmd)
{
    const int model_given = any_given(o, model_codes, COUNT(model_codes));
    const int graph_given = any_given(o, graph_codes, COUNT(graph_codes));
    if (model_given && graph_given)
        return 0;   /* the command names both: model_args_check compares */
    static char line[1024];   /* the options keep pointers into it (--edge-bias ATTR) */
    char path[4096];
    snprintf(path, sizeof path, "%s/model.args", o->weights);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    const int read = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!read)
        return 0;   /* model_args_check names the file */
    char *save = NULL;
    for (char *w = strtok_r(line, " \r\n", &save); w; w = strtok_r(NULL, " \r\n", &save)) {
        const opt_def_t *opt = strncmp(w, "--", 2) == 0 ? input_option_named(w + 2) : NULL;
        char *arg = opt && opt->has_arg == required_argument ? strtok_r(NULL, " \r\n", &save)
                                                             : NULL;
        const int model = opt && in_codes(model_codes, COUNT(model_codes), opt->code);
        const int graph = opt && in_codes(graph_codes, COUNT(graph_codes), opt->code);
        const int bad = !(model || graph) || (opt->has_arg == required_argument && !arg);
        if (bad)
            return usage_error(cmd, "%s: '%s' is not one of the model's options (--heads, "
                               "--rounds, --score, ...)", path, w);
        if ((model && model_given) || (graph && graph_given) ||
            (opt->code != OPT_SELF_LOOPS && graph && !o->src.graph))
            continue;   /* given by the command, or a direction without a graph file */
        if (input_option(o, opt->code, arg, cmd))
            return EXIT_USAGE;
    }
    return 0;
}
