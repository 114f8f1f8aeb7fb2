/*
 * What defines a trained model beyond its arrays: the heads, the rounds, the
 * score and the round's form. train --save writes them, as command-line text,
 * to DIR/model.args; every command that reads --weights DIR compares its own
 * with them, so a model is never run with other heads or rounds than it was
 * trained with (the arrays alone cannot tell 2 heads of 8 from 1 of 16).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "internal.h"

const char *const score_names[AG_SCORE_KINDS] = {"scaled-dot", "dot", "cosine", "additive",
                                                  "gatv2", "sigmoid", "linear"};

/* Appends to buf [cap] what printf would write. */
#define APPEND(...) (used += (size_t)snprintf(buf + used, used < cap ? cap - used : 0, __VA_ARGS__))

void model_args(char *buf, size_t cap, const run_opts_t *o, int64_t heads, int64_t rounds)
{
    size_t used = 0;
    const ag_score_t *s = &o->score;
    buf[0] = '\0';
    APPEND("--heads %lld --rounds %lld", (long long)heads, (long long)rounds);
    if (s->kind)
        APPEND(" --score %s", score_names[s->kind]);
    if (s->beta != 0 && s->beta != 1)
        APPEND(" --beta %.9g", (double)s->beta);
    if (s->softcap > 0)
        APPEND(" --softcap %.9g", (double)s->softcap);
    if (s->slope != 0)
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
    if (strcmp(saved, ours) == 0)
        return AG_OK;
    return ag_fail(err, AG_EINVAL, "%s was trained with `%s` (%s); this command has `%s`: "
                   "give the model's options", o->weights, saved, path, ours);
}
