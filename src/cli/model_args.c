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
#include <unistd.h>

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

/* o with the options of model.args' spec in place of its own: what the line
   says, in model_args' form. */
static void saved_options(run_opts_t *saved, const run_opts_t *o, const ag_model_spec_t *spec)
{
    *saved = *o;
    ag_score_init(&saved->score, AG_SCORE_SCALED_DOT);
    saved->edge_bias = NULL;
    saved->no_residual = !spec->layers[0].residual;
    saved->norm = AG_NORM_NONE, saved->posenc = 0;
    saved->src.self = AG_SELF_KEEP, saved->src.direction = AG_EDGES_AUTO;
    for (int k = 0; k < AG_MODEL_KEYS; k++)
        if (spec->line[k])
            model_key_apply(saved, spec, (ag_model_key_t)k);
}

int model_args_check(const run_opts_t *o, int64_t heads, int64_t rounds, ag_error_t *err)
{
    char path[4096], saved[1024], ours[1024];
    snprintf(path, sizeof path, "%s/model.args", o->weights);
    if (access(path, F_OK) != 0)
        return AG_OK;   /* a folder not made by train --save: its arrays say all they can */
    ag_model_spec_t spec;
    int rc = ag_model_args_read(&spec, o->weights, err);
    if (rc)
        return rc;
    run_opts_t as_saved;   /* points into spec (--edge-bias ATTR) while both live */
    saved_options(&as_saved, o, &spec);
    /* both in one form; a pattern or CSR has no direction to agree on (model_args
       leaves it out) */
    model_args(saved, sizeof saved, &as_saved, spec.layers[0].heads, spec.rounds);
    model_args(ours, sizeof ours, o, heads, rounds);
    if (strcmp(saved, ours) == 0)
        return AG_OK;
    return ag_fail(err, AG_EINVAL, "%s was trained with `%s` (%s); this command has `%s`: "
                   "give all of the model's options, or none to take them from it", o->weights,
                   saved, path, ours);
}

/* The options model.args holds: the model's, and how the graph was shaped. Each
   group a command gives none of is taken from model.args, as the library reads
   it (ag_model_args_read; direction only for a graph file); a group given is
   compared as a whole (model_args_check). */
static const int model_codes[] = {OPT_HEADS, OPT_ROUNDS, OPT_SCORE, OPT_BETA, OPT_SOFTCAP,
                                  OPT_SLOPE, OPT_SIGMOID_BIAS, OPT_ALIBI, OPT_EDGE_BIAS,
                                  OPT_NO_RESIDUAL, OPT_NORM, OPT_POSENC};
static const int graph_codes[] = {OPT_SELF_LOOPS, OPT_DIRECTED, OPT_UNDIRECTED};

static int any_given(const run_opts_t *o, const int *codes, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (o->given[codes[k] - OPT_Q])
            return 1;
    return 0;
}

#define COUNT(a) (sizeof a / sizeof a[0])
#define GIVEN(code) (o->given[(code) - OPT_Q] = 1)

int model_args_defaults(run_opts_t *o, const char *cmd)
{
    const int model_given = any_given(o, model_codes, COUNT(model_codes));
    const int graph_given = any_given(o, graph_codes, COUNT(graph_codes));
    char path[4096];
    snprintf(path, sizeof path, "%s/model.args", o->weights);
    if ((model_given && graph_given) || access(path, F_OK) != 0)
        return 0;   /* the command names both (model_args_check compares), or no file */
    static ag_model_spec_t spec;   /* the options keep a pointer into it (--edge-bias ATTR) */
    ag_error_t err;
    if (ag_model_args_read(&spec, o->weights, &err))
        return usage_error(cmd, "%s", err.msg);
    if (!model_given) {
        const ag_layer_spec_t *L = &spec.layers[0];
        o->heads = L->heads, o->rounds = spec.rounds;
        GIVEN(OPT_HEADS), GIVEN(OPT_ROUNDS);
        if (!L->residual)
            o->no_residual = 1, GIVEN(OPT_NO_RESIDUAL);
    }
    for (int k = 0; k < AG_MODEL_KEYS; k++) {   /* the keys it holds, group by group */
        const int graph = k == AG_KEY_SELF_LOOPS || k == AG_KEY_DIRECTED ||
                          k == AG_KEY_UNDIRECTED;
        if (spec.line[k] && !(graph ? graph_given || (k != AG_KEY_SELF_LOOPS && !o->src.graph)
                                    : model_given))
            model_key_apply(o, &spec, (ag_model_key_t)k);
    }
    return 0;
}
