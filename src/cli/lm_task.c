/*
 * attngraph lm task: the recall tasks' example sets (the library's
 * ag_lm_task_make) as lm train --examples and PyTorch read them: DIR/
 * train_inputs.npy, train_targets.npy, val_inputs.npy, val_targets.npy (int64
 * [n, T], a target of -100 not scored) and val_distance.npy (how far back
 * each scored position's evidence stands), written whole or not at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "cli/lm.h"

static const opt_def_t task_options[] = {
    OPT_PROSE("usage: attngraph lm task mqar --vocab V --length T --pairs P --out DIR [options]\n"
              "       attngraph lm task copy --vocab V --length T --out DIR [options]\n"
              "\n"
              "Writes a recall task's example sets for lm train --examples DIR:\n"
              "  mqar  multi-query associative recall (Zoology, Arora et al. 2024): P key-value\n"
              "        pairs, then each key again after a power-law gap; the value is the target\n"
              "  copy  T/2 random tokens, the separator 0, the same tokens again: each is the\n"
              "        target T/2 positions after its first place\n"
              "Example k is drawn from (--seed, k) alone; the validation set is the examples\n"
              "after the training set's.\n"
              "\n"),
    OPT_VALUE("vocab", OPT_VOCAB, "  --vocab V           the vocabulary (MQAR: keys 1..V/2-1, values V/2..V-1)\n"),
    OPT_VALUE("length", OPT_LENGTH, "  --length T          tokens an example (even)\n"),
    OPT_VALUE("pairs", OPT_PAIRS, "  --pairs P           MQAR's key-value pairs (1..T/4)\n"),
    OPT_VALUE("power", OPT_POWER,
              "  --power A           MQAR's gaps: weight (g+1)^(A-1) (default 0.01, Zoology's)\n"),
    OPT_VALUE("fill", OPT_FILL,
              "  --fill F            MQAR's tokens between the queries: random (default) or\n"
              "                      zero (Zoology's random_non_queries=False, its Figure 2)\n"),
    OPT_VALUE("train", OPT_TRAIN_EXAMPLES, "  --train N           training examples (default 100000)\n"),
    OPT_VALUE("val", OPT_VAL_EXAMPLES, "  --val N             validation examples (default 3000)\n"),
    OPT_VALUE("seed", OPT_SEED, "  --seed S            (default 1)\n"),
    OPT_VALUE("out", OPT_OUT, "  --out DIR           the folder (made if missing; its parent must exist)\n"),
    OPT_VALUE("threads", OPT_THREADS, "  --threads T         (default: the cores)\n"),
    OPT_FLAG("quiet", OPT_QUIET, "  --quiet             print nothing on success\n"),
    OPT_HELP_LINE,
    OPT_DEF_END,
};

typedef struct {
    ag_lm_task_t task;
    int64_t train, val, threads;
    const char *out;
    int quiet;
} task_opts_t;

static int task_parse(task_opts_t *o, int argc, char **argv)
{
    const char *cmd = "lm task";
    *o = (task_opts_t){.task = {.power = 0.01, .seed = 1}, .train = 100000, .val = 3000};
    if (argc < 2 || argv[1][0] == '-') {   /* --help, or the kind left out */
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            opt_print_help(task_options);
            return 0;
        }
        return usage_error(cmd, "give the task first: mqar or copy");
    }
    if (!strcmp(argv[1], "mqar"))
        o->task.kind = AG_TASK_MQAR;
    else if (!strcmp(argv[1], "copy"))
        o->task.kind = AG_TASK_COPY;
    else
        return usage_error(cmd, "unknown task '%s'; expected mqar or copy", argv[1]);
    opt_parser_t p;
    opt_begin(&p, cmd, task_options, argc - 1, argv + 1);
    int c, bad = 0;
    int64_t seed = 1;
    while (!bad && (c = opt_next(&p)) > 0) {
        const char *a = p.arg;
        switch (c) {
        case OPT_VOCAB: bad = opt_int(&o->task.vocab, cmd, "vocab", a, 4, AG_LM_MAX_VOCAB); break;
        case OPT_LENGTH: bad = opt_int(&o->task.length, cmd, "length", a, 2, 1 << 20); break;
        case OPT_PAIRS: bad = opt_int(&o->task.pairs, cmd, "pairs", a, 1, 1 << 20); break;
        case OPT_POWER: bad = opt_real(&o->task.power, cmd, "power", a, 0, 1); break;
        case OPT_FILL:
            if (strcmp(a, "random") && strcmp(a, "zero"))
                bad = usage_error(cmd, "--fill '%s'; expected random or zero", a);
            o->task.zero_fill = !strcmp(a, "zero");
            break;
        case OPT_TRAIN_EXAMPLES: bad = opt_int(&o->train, cmd, "train", a, 1, 1 << 28); break;
        case OPT_VAL_EXAMPLES: bad = opt_int(&o->val, cmd, "val", a, 1, 1 << 28); break;
        case OPT_SEED: bad = opt_int(&seed, cmd, "seed", a, 0, INT64_MAX); break;
        case OPT_OUT: o->out = a; break;
        case OPT_THREADS: bad = opt_int(&o->threads, cmd, "threads", a, 1, 4096); break;
        case OPT_QUIET: o->quiet = 1; break;
        default: break;
        }
    }
    if (bad)
        return bad;
    if (c < 0)
        return p.status;
    if (opt_positional(&p, 0))
        return EXIT_USAGE;
    o->task.seed = (uint64_t)seed;
    const int mqar = o->task.kind == AG_TASK_MQAR;
    if (!o->task.vocab || !o->task.length || (mqar && !o->task.pairs) || !o->out)
        return usage_error(cmd, "give --vocab, --length%s and --out", mqar ? ", --pairs" : "");
    if (!mqar && (p.seen[OPT_PAIRS - OPT_Q] || p.seen[OPT_POWER - OPT_Q] ||
                  p.seen[OPT_FILL - OPT_Q]))
        return usage_error(cmd, "--pairs, --power and --fill are MQAR's; copy has none");
    ag_error_t err;
    if (ag_lm_task_make(&o->task, 0, 0, NULL, NULL, NULL, &err))   /* before any work */
        return usage_error(cmd, "%s", err.msg);
    return -1;
}

int lm_task(int argc, char **argv)
{
    task_opts_t o;
    int status = task_parse(&o, argc, argv);
    if (status >= 0)
        return status;
    if (o.threads)
        ag_set_threads((int)o.threads);
    ag_error_t err = {AG_OK, ""};
    const int64_t T = o.task.length, n = o.train + o.val;
    int rc = ag_i_folder_check(o.out, "--out", &err);
    int64_t *x = NULL, *y = NULL, *dist = NULL;
    if (!rc && (!(x = ag_alloc(n * T, sizeof *x, &err, "examples")) ||
                !(y = ag_alloc(n * T, sizeof *y, &err, "examples")) ||
                !(dist = ag_alloc(o.val * T, sizeof *dist, &err, "examples"))))
        rc = ag_alloc_status();
    if (!rc)
        rc = ag_lm_task_make(&o.task, 0, o.train, x, y, NULL, &err);
    if (!rc)
        rc = ag_lm_task_make(&o.task, o.train, o.val, x + o.train * T, y + o.train * T, dist,
                             &err);
    int64_t scored = 0;
    for (int64_t i = 0; !rc && i < n * T; i++) {   /* PyTorch's ignore_index */
        scored += y[i] >= 0;
        y[i] = y[i] < 0 ? -100 : y[i];
    }
    if (!rc) {
        const ag_i_folder_item_t items[] = {
            {.name = "train_inputs.npy", .i64 = x, .ndim = 2, .shape = {o.train, T}},
            {.name = "train_targets.npy", .i64 = y, .ndim = 2, .shape = {o.train, T}},
            {.name = "val_inputs.npy", .i64 = x + o.train * T, .ndim = 2, .shape = {o.val, T}},
            {.name = "val_targets.npy", .i64 = y + o.train * T, .ndim = 2, .shape = {o.val, T}},
            {.name = "val_distance.npy", .i64 = dist, .ndim = 2, .shape = {o.val, T}},
        };
        rc = ag_i_folder_write(o.out, "--out", items, 5, &err);
    }
    if (!rc && !o.quiet)
        printf("%s: %lld training and %lld validation examples of %lld tokens, a vocabulary "
               "of %lld, %.1f scored tokens an example\nwrote %s\n",
               o.task.kind == AG_TASK_MQAR ? "mqar" : "copy", (long long)o.train,
               (long long)o.val, (long long)T, (long long)o.task.vocab,
               (double)scored / (double)n, o.out);
    free(x), free(y), free(dist);
    return finish("lm task", rc, 0, &err);
}
