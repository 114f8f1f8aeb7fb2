/*
 * attngraph lm sample: text from a model `lm train --save` wrote, one token at
 * a time by the library's ag_lm_generate (a cache of keys and values: each new
 * token is one more node of the pattern's graph, the tokens before it are not
 * computed again; a full context starts over from its last half).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "cli/lm.h"

static const opt_def_t sample_options[] = {
    OPT_PROSE("usage: attngraph lm sample --model DIR [options]\n"
              "\n"
              "Generates text from a model `attngraph lm train --save DIR` wrote: --start, then\n"
              "--tokens more characters, each drawn from the model's next-token distribution,\n"
              "each written as it is drawn, then a newline.\n"
              "The keys and values of the tokens read are cached: a new token attends to its\n"
              "sources in the pattern without computing the others again.\n"
              "\n"),
    OPT_VALUE("model", OPT_MODEL, "  --model DIR         the model folder\n"),
    OPT_VALUE("tokens", OPT_TOKENS, "  --tokens N          characters to generate (default 500)\n"),
    OPT_VALUE("start", OPT_START,
              "  --start TEXT        the text to continue (default a newline); a model of token\n"
              "                      ids reads ids: --start '12 7 301' (default 0) and writes\n"
              "                      ids, a space between\n"),
    OPT_VALUE("temperature", OPT_TEMPERATURE,
              "  --temperature X     divides the logits (default 1; 0: always the likeliest)\n"),
    OPT_VALUE("top-k", OPT_TOP_K,
              "  --top-k K           draw among the K likeliest only (default 0: all)\n"),
    OPT_VALUE("seed", OPT_SEED, "  --seed S            the draws (default 1337)\n"),
    OPT_VALUE("pattern", OPT_PATTERN,
              "  --pattern SPEC      the graph within the context, made causal as in training\n"
              "                      (docs:T&(SPEC); default the one it trained under, model.txt's;\n"
              "                      'A|B|...': one a block)\n"),
    OPT_VALUE("examples", OPT_EXAMPLES,
              "  --examples DIR      instead of sampling, the loss and the accuracy of the\n"
              "                      scored tokens over DIR's validation examples\n"
              "                      (val_inputs.npy, val_targets.npy, as lm task writes them)\n"),
    OPT_VALUE("predictions", OPT_PREDICTIONS,
              "  --predictions FILE.npy  with --examples: the likeliest token at each scored\n"
              "                      position, [n, T] (-100 where not scored)\n"),
    OPT_VALUE("batch", OPT_BATCH, "  --batch B           with --examples: sequences a batch (default 16)\n"),
    OPT_VALUE("threads", OPT_THREADS, "  --threads T         (default: the cores)\n"),
    OPT_HELP_LINE,
    OPT_DEF_END,
};

typedef struct {
    const char *model, *start, *pattern, *examples, *predictions;
    int start_given;
    int64_t tokens, top_k, seed, threads, batch;
    double temperature;
} sample_opts_t;

static int sample_parse(sample_opts_t *o, int argc, char **argv)
{
    *o = (sample_opts_t){.start = "\n", .tokens = 500, .seed = 1337, .temperature = 1.0,
                         .batch = 16};
    const char *cmd = "lm sample";
    opt_parser_t p;
    opt_begin(&p, cmd, sample_options, argc, argv);
    int c, bad = 0;
    while (!bad && (c = opt_next(&p)) > 0) {
        const char *a = p.arg;
        switch (c) {
        case OPT_MODEL: o->model = a; break;
        case OPT_TOKENS: bad = opt_int(&o->tokens, cmd, "tokens", a, 0, INT64_MAX / 64); break;
        case OPT_START: o->start = a, o->start_given = 1; break;
        case OPT_TEMPERATURE: bad = opt_real(&o->temperature, cmd, "temperature", a, 0, 0); break;
        case OPT_TOP_K: bad = opt_int(&o->top_k, cmd, "top-k", a, 0, INT64_MAX / 64); break;
        case OPT_SEED: bad = opt_int(&o->seed, cmd, "seed", a, 0, INT64_MAX); break;
        case OPT_PATTERN: o->pattern = a; break;
        case OPT_THREADS: bad = opt_int(&o->threads, cmd, "threads", a, 1, 4096); break;
        case OPT_EXAMPLES: o->examples = a; break;
        case OPT_PREDICTIONS: o->predictions = a; break;
        case OPT_BATCH: bad = opt_int(&o->batch, cmd, "batch", a, 1, 1 << 16); break;
        default: break;
        }
    }
    if (bad)
        return bad;
    if (c < 0)
        return p.status;
    if (opt_positional(&p, 0))
        return EXIT_USAGE;
    if (!o->model)
        return usage_error(cmd, "--model DIR is needed: a folder `lm train --save` wrote");
    static const int drawing[] = {OPT_TOKENS, OPT_START, OPT_TEMPERATURE, OPT_TOP_K, OPT_SEED};
    for (size_t k = 0; o->examples && k < sizeof drawing / sizeof *drawing; k++)
        if (p.seen[drawing[k] - OPT_Q])
            return usage_error(cmd, "--examples scores the model; --tokens, --start, "
                               "--temperature, --top-k and --seed are for sampling");
    if (!o->examples && (p.seen[OPT_PREDICTIONS - OPT_Q] || p.seen[OPT_BATCH - OPT_Q]))
        return usage_error(cmd, "--predictions and --batch go with --examples DIR");
    return -1;
}

/* start as ids: numbers separated by spaces, each below V. */
static int start_numbers(const ag_lm_model_t *lm, const char *start, int64_t **ids, int64_t *n,
                         int *usage, ag_error_t *err)
{
    *n = 0;
    *ids = ag_alloc((int64_t)strlen(start) / 2 + 1, sizeof **ids, err, "--start");
    if (!*ids)
        return ag_alloc_status();
    for (const char *p = start + strspn(start, " \t,"); *p; p += strspn(p, " \t,")) {
        char *end;
        const long long v = strtoll(p, &end, 10);
        if (end == p || (*end && !strchr(" \t,", *end)) || v < 0 || v >= lm->m.V) {
            *usage = 1;
            free(*ids), *ids = NULL;
            return ag_fail(err, AG_EINVAL, "--start '%s': token %lld is '%.*s'; expected ids in "
                           "0..%lld (the model's vocabulary), a space between", start,
                           (long long)*n + 1, (int)strcspn(p, " \t,"), p,
                           (long long)lm->m.V - 1);
        }
        (*ids)[(*n)++] = v, p = end;
    }
    if (*n)
        return AG_OK;
    *usage = 1;
    free(*ids), *ids = NULL;
    return ag_fail(err, AG_EINVAL, "--start is empty; expected at least one token id");
}

/* start's characters as token ids ([n] malloc'ed); a character the
   vocabulary lacks is named (usage: 1). A model of ids reads numbers. */
static int start_ids(const ag_lm_model_t *lm, const char *start, int64_t **ids, int64_t *n,
                     int *usage, ag_error_t *err)
{
    if (lm->ids)
        return start_numbers(lm, start, ids, n, usage, err);
    const int64_t len = (int64_t)strlen(start);
    int32_t *cps = ag_alloc(len + 1, sizeof *cps, err, "--start");
    int64_t count = 0;
    int rc = cps ? lm_decode_text("--start", "", start, len, lm->bytes, cps, &count, err)
                 : ag_alloc_status();
    if (cps && rc)
        *usage = 1;
    *ids = rc ? NULL : ag_alloc(count + 1, sizeof **ids, err, "--start");
    if (!rc && !*ids)
        rc = ag_alloc_status();
    for (int64_t k = 0; !rc && k < count; k++) {
        int64_t lo = 0, hi = lm->m.V;   /* chars ascend */
        while (lo < hi) {
            const int64_t mid = (lo + hi) / 2;
            if (lm->chars[mid] < cps[k])
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == lm->m.V || lm->chars[lo] != cps[k]) {
            *usage = 1;
            rc = ag_fail(err, AG_EINVAL, lm->bytes ? "--start: byte %lld (0x%02X) is not in "
                         "the model's vocabulary of %lld" : "--start: character %lld (U+%04X) "
                         "is not in the model's vocabulary of %lld", (long long)k + 1,
                         (unsigned)cps[k], (long long)lm->m.V);
        }
        (*ids)[k] = lo;
    }
    if (!rc && count == 0) {
        *usage = 1;
        rc = ag_fail(err, AG_EINVAL, "--start is empty; expected at least one character "
                     "(the default is a newline)");
    }
    free(cps);
    if (rc) {
        free(*ids);
        *ids = NULL;
    }
    *n = count;
    return rc;
}

/* Writes code point cp (bytes: the byte) to stdout. */
static void put_char(int32_t cp, int bytes)
{
    char out[4];
    int n = 0;
    if (bytes || cp < 0x80)
        out[n++] = (char)cp;
    else if (cp < 0x800)
        out[n++] = (char)(0xC0 | cp >> 6), out[n++] = (char)(0x80 | (cp & 0x3F));
    else if (cp < 0x10000)
        out[n++] = (char)(0xE0 | cp >> 12), out[n++] = (char)(0x80 | (cp >> 6 & 0x3F)),
        out[n++] = (char)(0x80 | (cp & 0x3F));
    else
        out[n++] = (char)(0xF0 | cp >> 18), out[n++] = (char)(0x80 | (cp >> 12 & 0x3F)),
        out[n++] = (char)(0x80 | (cp >> 6 & 0x3F)), out[n++] = (char)(0x80 | (cp & 0x3F));
    fwrite(out, 1, (size_t)n, stdout);
}

typedef struct {
    const ag_lm_model_t *lm;
} emit_t;

/* Token `at` of a text (its character), or of ids (its number, a space before
   all but the first). */
static void put_token(const ag_lm_model_t *lm, int64_t token, int first)
{
    if (lm->ids)
        printf("%s%lld", first ? "" : " ", (long long)token);
    else
        put_char(lm->chars[token], lm->bytes);
}

/* ag_lm_generate's emit: the token, out at once. */
static void emit_token(int64_t token, void *ctx)
{
    const emit_t *e = ctx;
    put_token(e->lm, token, 0);
    fflush(stdout);
}

int lm_sample(int argc, char **argv)
{
    sample_opts_t o;
    int status = sample_parse(&o, argc, argv);
    if (status >= 0)
        return status;
    ag_set_threads((int)o.threads);
    ag_error_t err = {AG_OK, ""};
    int usage = 0;
    ag_lm_model_t lm;
    ag_nbhd_t **graphs = NULL;   /* a graph a block (blocks of one pattern share one) */
    int64_t *ids = NULL, n = 0;
    int rc = ag_lm_model_load(&lm, o.model, &err);
    const char *spec = o.pattern ? o.pattern : lm.pattern;
    if (!rc && !(graphs = ag_calloc(lm.m.L, sizeof *graphs, &err, "the blocks' graphs")))
        rc = ag_alloc_status();
    if (!rc && (rc = ag_lm_graphs(graphs, lm.m.L, lm.m.T, 1, spec, &err))) {
        usage = o.pattern != NULL;
        if (usage)
            error_after(rc, &err, "--pattern '%s'", spec);
        else   /* the pattern it trained under: name the folder */
            error_after(rc, &err, "--model %s: its pattern '%s'", o.model, spec);
    }
    if (!rc && o.examples) {   /* scores, draws nothing */
        rc = lm_score(&lm, spec, o.examples, o.batch, o.predictions, &usage, &err);
        if (graphs)
            ag_lm_graphs_free(graphs, lm.m.L);
        free(graphs);
        ag_lm_model_destroy(&lm);
        return finish("lm sample", rc, usage, &err);
    }
    if (!rc)   /* a model of ids starts from id 0 unless told */
        rc = start_ids(&lm, lm.ids && !o.start_given ? "0" : o.start, &ids, &n, &usage, &err);
    int64_t *all = rc ? NULL : realloc(ids, (size_t)(n + o.tokens) * sizeof *ids);
    if (!rc && !all)
        rc = ag_fail(&err, AG_ENOMEM, "--tokens %lld: out of memory for the text's %lld "
                     "tokens", (long long)o.tokens, (long long)(n + o.tokens));
    if (all)
        ids = all;
    for (int64_t k = 0; !rc && k < n; k++)   /* the start, then each token as it comes */
        put_token(&lm, ids[k], k == 0);
    emit_t out = {&lm};
    if (!rc)
        rc = ag_lm_generate_layers(&lm.m, graphs, ids, n, o.tokens, o.temperature, o.top_k,
                                   (uint64_t)o.seed, emit_token, &out, &err);
    if (!rc)
        putchar('\n');
    free(ids);
    if (graphs)
        ag_lm_graphs_free(graphs, lm.m.L);
    free(graphs);
    ag_lm_model_destroy(&lm);
    return finish("lm sample", rc, usage, &err);
}
