/*
 * attngraph lm train: a GPT (the library's ag_lm_t) trained the way nanoGPT
 * trains shakespeare_char: B random windows of T+1 tokens of the training
 * stream a step (a text's characters, or token files), or B examples of an
 * example set (inputs and their targets, -100 not scored), the B sequences
 * one graph of B*T nodes (docs:T,...,T, or any pattern within each sequence),
 * AdamW with nanoGPT's decay groups, linear warmup then cosine decay,
 * clipping, and the mean loss and accuracy of train and validation batches
 * every k steps. Several --pattern train the same initial model on the same
 * batches under each and print one table: what a model learns under each
 * mask.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "cli/cli.h"
#include "cli/lm.h"
#include "model/model.h"

#define LM_MAX_PATTERNS 16
#define LM_MAX_LAYERS 1024

static const opt_def_t lm_train_options[] = {
    OPT_PROSE("usage: attngraph lm train (--text FILE | --tokens TRAIN[,VAL] | --examples DIR) [options]\n"
              "\n"
              "Trains a GPT on a text's characters, on token ids, or on example sets. A step\n"
              "reads B random windows of T+1 tokens (a text or a stream: the first 90% trains,\n"
              "the last 10% validates, as nanoGPT splits shakespeare_char; or TRAIN and VAL),\n"
              "or B random examples; the B sequences are one graph of B*T nodes (docs:T,...,T,\n"
              "causal within each), and --pattern SPEC applies SPEC within each sequence\n"
              "(docs:T,...&(SPEC)): several train the same initial model on the same batches\n"
              "under each, and a table compares them.\n"
              "\n"),
    OPT_VALUE("text", OPT_TEXT, "  --text FILE         the corpus, read as UTF-8 characters\n"),
    OPT_FLAG("bytes", OPT_BYTES,
             "  --bytes             read it as bytes (a vocabulary of the bytes it holds)\n"),
    OPT_VALUE("tokens", OPT_TOKENS,
              "  --tokens TRAIN[,VAL] token ids: nanoGPT's train.bin,val.bin (uint16) or 1-D\n"
              "                      integer .npy streams; one file is split 90/10\n"),
    OPT_VALUE("examples", OPT_EXAMPLES,
              "  --examples DIR      example sets: DIR/train_inputs.npy, train_targets.npy,\n"
              "                      val_inputs.npy, val_targets.npy ([n, T] integers; a target\n"
              "                      of -100 is not scored), as 'attngraph lm task' writes them;\n"
              "                      the validation figures read the whole validation set\n"),
    OPT_VALUE("vocab", OPT_VOCAB,
              "  --vocab V           the token ids' vocabulary (default: the largest id + 1)\n"),
    OPT_VALUE("block", OPT_BLOCK,
              "  --block T           sequence length (default 64; examples: their length)\n"),
    OPT_VALUE("batch", OPT_BATCH, "  --batch B           sequences a step (default 12)\n"),
    OPT_VALUE("layers", OPT_LAYERS,
              "  --layers L --heads H --dim D   the model (default 4, 4, 128)\n"),
    OPT_VALUE("heads", OPT_HEADS, NULL),
    OPT_VALUE("dim", OPT_DIM, NULL),
    OPT_VALUE("positions", OPT_POSITIONS,
              "  --positions P       learnt (absolute, nanoGPT's; default), rope (rotary, on the\n"
              "                      queries and keys) or none\n"),
    OPT_FLAG("no-mlp", OPT_NO_MLP,
             "  --no-mlp            attention-only blocks: no feed-forward sublayer (Zoology's\n"
             "                      model for recall; nanoGPT's blocks have one)\n"),
    OPT_FLAG("bias", OPT_BIAS,
             "  --bias              biases on every linear map and LayerNorm (nanoGPT's bias=True)\n"),
    OPT_VALUE("iters", OPT_ITERS, "  --iters N           optimizer steps (default 2000)\n"),
    OPT_VALUE("lr", OPT_LR,
              "  --lr LR --min-lr LR learning rate and its floor (default 1e-3, 1e-4)\n"),
    OPT_VALUE("min-lr", OPT_MIN_LR, NULL),
    OPT_VALUE("warmup", OPT_WARMUP, "  --warmup N          steps of linear warmup (default 100)\n"),
    OPT_VALUE("lr-decay-iters", OPT_LR_DECAY_ITERS,
              "  --lr-decay-iters N  the step where the cosine decay reaches --min-lr (default --iters)\n"),
    OPT_VALUE("beta2", OPT_BETA2,
              "  --beta2 B2          AdamW's beta2 (default 0.99; beta1 0.9)\n"),
    OPT_VALUE("weight-decay", OPT_WEIGHT_DECAY,
              "  --weight-decay W    AdamW's decay on matrices and embeddings (default 0.1)\n"),
    OPT_VALUE("clip", OPT_CLIP,
              "  --clip C            clip the gradients' global norm (default 1; 0: none)\n"),
    OPT_VALUE("dropout", OPT_DROPOUT,
              "  --dropout P         dropout on embeddings, attention and residuals (default 0)\n"),
    OPT_VALUE("eval-every", OPT_EVAL_EVERY,
              "  --eval-every K      the mean loss of --eval-iters batches of each split every K\n"
              "                      steps and at the end (default 250)\n"),
    OPT_VALUE("eval-iters", OPT_EVAL_ITERS,
              "  --eval-iters N      (default 20); the report's +-: the val mean's deviation\n"),
    OPT_VALUE("seed", OPT_SEED, "  --seed S            initial model and batches (default 1337)\n"),
    OPT_VALUES("pattern", OPT_PATTERN,
               "  --pattern SPEC      repeatable: train under each (default causal); 'A|B|C|D' gives\n"
               "                      block 1 A, block 2 B, ... (as many as --layers: a mask a block)\n"),
    OPT_VALUE("save", OPT_SAVE,
              "  --save DIR          the model (one --pattern): model.txt, vocab.npy and the arrays\n"),
    OPT_VALUE("log", OPT_LOG,
              "  --log FILE.csv      pattern,step,train_loss,val_loss,lr,seconds,train_acc,val_acc\n"
              "                      per evaluation (acc: the scored tokens whose likeliest\n"
              "                      prediction is the target)\n"),
    OPT_VALUE("predictions", OPT_PREDICTIONS,
              "  --predictions FILE.npy  example sets: the trained model's likeliest token at\n"
              "                      each scored position of the validation examples, [P, n, T]\n"
              "                      (a slice a --pattern, T their length; -100 where not\n"
              "                      scored); one process\n"),
    OPT_VALUE("threads", OPT_THREADS, "  --threads T         (default: the cores)\n"),
    OPT_FLAG("quiet", OPT_QUIET, "  --quiet             no report\n"),
    OPT_HELP_LINE,
    OPT_DEF_END,
};

typedef struct {
    const char *text, *tokens, *examples, *save, *log, *predictions;
    const char *patterns[LM_MAX_PATTERNS];
    int n_patterns;
    int64_t block, batch, layers, heads, dim, iters, warmup, decay_iters, eval_every;
    int64_t eval_iters, threads, vocab;
    int block_given;
    ag_lm_positions_t positions;
    double lr, min_lr, beta2, weight_decay, clip, dropout;
    int64_t seed;
    int bias, bytes, quiet, no_mlp;
} lm_opts_t;

/* nanoGPT's get_lr: linear warmup, cosine decay to min_lr, then min_lr. */
static double lr_at(const lm_opts_t *o, int64_t it)
{
    if (it < o->warmup)
        return o->lr * (double)(it + 1) / (double)(o->warmup + 1);
    if (it > o->decay_iters)
        return o->min_lr;
    const double ratio = o->decay_iters > o->warmup
                             ? (double)(it - o->warmup) / (double)(o->decay_iters - o->warmup) : 1;
    return o->min_lr + 0.5 * (1.0 + cos(3.141592653589793 * ratio)) * (o->lr - o->min_lr);
}

static int lm_parse(lm_opts_t *o, int argc, char **argv)
{
    *o = (lm_opts_t){.block = 64, .batch = 12, .layers = 4, .heads = 4, .dim = 128,
                     .iters = 2000, .warmup = 100, .decay_iters = -1, .eval_every = 250,
                     .eval_iters = 20, .lr = 1e-3, .min_lr = 1e-4, .beta2 = 0.99,
                     .weight_decay = 0.1, .clip = 1.0, .seed = 1337};
    opt_parser_t p;
    opt_begin(&p, "lm train", lm_train_options, argc, argv);
    const char *cmd = "lm train";
    int c, bad = 0;
    const int64_t big = INT64_MAX / 64;
    while (!bad && (c = opt_next(&p)) > 0) {
        const char *a = p.arg;
        switch (c) {
        case OPT_TEXT: o->text = a; break;
        case OPT_TOKENS: o->tokens = a; break;
        case OPT_EXAMPLES: o->examples = a; break;
        case OPT_VOCAB: bad = opt_int(&o->vocab, cmd, "vocab", a, 1, AG_LM_MAX_VOCAB); break;
        case OPT_BLOCK:
            bad = opt_int(&o->block, cmd, "block", a, 1, 1 << 20);
            o->block_given = 1;
            break;
        case OPT_BATCH: bad = opt_int(&o->batch, cmd, "batch", a, 1, 1 << 20); break;
        case OPT_LAYERS: bad = opt_int(&o->layers, cmd, "layers", a, 1, LM_MAX_LAYERS); break;
        case OPT_HEADS: bad = opt_int(&o->heads, cmd, "heads", a, 1, 4096); break;
        case OPT_DIM: bad = opt_int(&o->dim, cmd, "dim", a, 1, 1 << 16); break;
        case OPT_BIAS: o->bias = 1; break;
        case OPT_POSITIONS:
            if (ag_lm_positions_parse(a, &o->positions))
                bad = usage_error(cmd, "--positions '%s'; expected learnt, rope or none", a);
            break;
        case OPT_ITERS: bad = opt_int(&o->iters, cmd, "iters", a, 0, big); break;
        case OPT_LR: bad = opt_real(&o->lr, cmd, "lr", a, 0, 1); break;
        case OPT_MIN_LR: bad = opt_real(&o->min_lr, cmd, "min-lr", a, 0, 1); break;
        case OPT_WARMUP: bad = opt_int(&o->warmup, cmd, "warmup", a, 0, big); break;
        case OPT_LR_DECAY_ITERS:
            bad = opt_int(&o->decay_iters, cmd, "lr-decay-iters", a, 0, big);
            break;
        case OPT_BETA2: bad = opt_real(&o->beta2, cmd, "beta2", a, 0, 0); break;
        case OPT_WEIGHT_DECAY: bad = opt_real(&o->weight_decay, cmd, "weight-decay", a, 0, 0); break;
        case OPT_CLIP: bad = opt_real(&o->clip, cmd, "clip", a, 0, 0); break;
        case OPT_DROPOUT: bad = opt_real(&o->dropout, cmd, "dropout", a, 0, 0); break;
        case OPT_EVAL_EVERY: bad = opt_int(&o->eval_every, cmd, "eval-every", a, 1, big); break;
        case OPT_EVAL_ITERS: bad = opt_int(&o->eval_iters, cmd, "eval-iters", a, 1, 1 << 20); break;
        case OPT_SEED: bad = opt_int(&o->seed, cmd, "seed", a, 0, INT64_MAX); break;
        case OPT_PATTERN:
            if (o->n_patterns == LM_MAX_PATTERNS)
                bad = usage_error(cmd, "more than %d --pattern", LM_MAX_PATTERNS);
            else
                o->patterns[o->n_patterns++] = a;
            break;
        case OPT_SAVE: o->save = a; break;
        case OPT_LOG: o->log = a; break;
        case OPT_PREDICTIONS: o->predictions = a; break;
        case OPT_THREADS: bad = opt_int(&o->threads, cmd, "threads", a, 1, 4096); break;
        case OPT_BYTES: o->bytes = 1; break;
        case OPT_NO_MLP: o->no_mlp = 1; break;
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
    if (!!o->text + !!o->tokens + !!o->examples != 1)
        return usage_error(cmd, "give one of --text FILE, --tokens TRAIN[,VAL] and --examples "
                           "DIR: what to learn");
    if (o->bytes && !o->text)
        return usage_error(cmd, "--bytes reads --text as bytes; token ids are ids already");
    if (o->vocab && o->text)
        return usage_error(cmd, "--vocab is the token ids' (--tokens, --examples); a text's "
                           "vocabulary is its characters");
    if (o->dim % o->heads)
        return usage_error(cmd, "--dim %lld is not a multiple of --heads %lld",
                           (long long)o->dim, (long long)o->heads);
    if (o->positions == AG_LM_POS_ROPE && (o->dim / o->heads) % 2)
        return usage_error(cmd, "--positions rope turns pairs of a head's columns; --dim %lld "
                           "over --heads %lld gives heads of odd width %lld",
                           (long long)o->dim, (long long)o->heads,
                           (long long)(o->dim / o->heads));
    if (o->beta2 >= 1 || o->dropout >= 1)
        return usage_error(cmd, "--%s %g; expected a value below 1", o->beta2 >= 1 ? "beta2"
                           : "dropout", o->beta2 >= 1 ? o->beta2 : o->dropout);
    if (o->min_lr > o->lr)
        return usage_error(cmd, "--min-lr %g is above --lr %g", o->min_lr, o->lr);
    if (o->save && o->n_patterns > 1)
        return usage_error(cmd, "--save keeps one model: give one --pattern");
    if (o->predictions && !o->examples)
        return usage_error(cmd, "--predictions are an example set's (--examples DIR)");
    for (int k = 0; k < o->n_patterns; k++) {   /* every pattern before any trains */
        for (int j = 0; j < k; j++)
            if (!strcmp(o->patterns[j], o->patterns[k]))
                return usage_error(cmd, "--pattern %s given twice", o->patterns[k]);
        ag_nbhd_t *graphs[LM_MAX_LAYERS];
        ag_error_t err;
        if (ag_lm_graphs(graphs, o->layers, o->block, 1, o->patterns[k], &err))
            return usage_error(cmd, "--pattern '%s': %s", o->patterns[k], err.msg);
        ag_lm_graphs_free(graphs, o->layers);
    }
    if (o->save && o->n_patterns == 1 && strlen(o->patterns[0]) >= AG_LM_PATTERN_MAX)
        return usage_error(cmd, "--save: a pattern of %zu characters; model.txt keeps up to %d",
                           strlen(o->patterns[0]), AG_LM_PATTERN_MAX - 1);
    if (o->decay_iters < 0)
        o->decay_iters = o->iters;
    if (!o->n_patterns)
        o->patterns[o->n_patterns++] = "causal";
    return -1;
}

/* Streams of batches: training steps, and each evaluation's per split. */
enum { STREAM_TRAIN = 1, STREAM_EVAL = 2 };

typedef struct {
    const lm_opts_t *o;
    const corpus_t *c;
    int64_t *ids, *pos, *next;
    int64_t *predicted;   /* an evaluation's likeliest tokens (--predictions) */
    lm_backend_t *b;      /* where the losses run */
} batches_t;

/* Batch k of split (0: train, 1: validation), drawn by (seed, stream, k):
   inputs, positions and targets (-1: not scored) of B sequences. A stream
   gives B windows of its split; an example set B of its rows, or, from row
   first >= 0 on, its rows in order (a row past the split, and the block past
   an example, pad with targets -1). */
static void draw_batch(const batches_t *bt, int split, uint64_t stream, uint64_t k, int64_t first)
{
    const lm_opts_t *o = bt->o;
    const corpus_t *c = bt->c;
    const int64_t T = o->block, B = o->batch;
    const uint64_t state = rng_seed((uint64_t)o->seed, stream);
    int64_t lo, hi;
    if (c->rows)
        lo = split ? c->train_rows : 0, hi = split ? c->rows : c->train_rows;
    else
        lo = split ? c->split : 0, hi = split ? c->n : c->split;
    for (int64_t b = 0; b < B; b++) {
        const uint64_t draw = rng_at(state, k * (uint64_t)B + (uint64_t)b);
        int64_t *ids = bt->ids + b * T, *pos = bt->pos + b * T, *next = bt->next + b * T;
        for (int64_t t = 0; t < T; t++)
            ids[t] = 0, pos[t] = t, next[t] = -1;
        if (!c->rows) {   /* a window of T + 1 tokens */
            const int64_t start = lo + (int64_t)(draw % (uint64_t)(hi - lo - T));
            for (int64_t t = 0; t < T; t++)
                ids[t] = c->ids[start + t], next[t] = c->ids[start + t + 1];
            continue;
        }
        const int64_t row = first >= 0 ? first + b : lo + (int64_t)(draw % (uint64_t)(hi - lo));
        if (row >= hi)
            continue;
        memcpy(ids, c->inputs + row * c->width, (size_t)c->width * sizeof *ids);
        memcpy(next, c->targets + row * c->width, (size_t)c->width * sizeof *next);
    }
}

/* Does the batch drawn score any token? (an example set's rows may score none) */
static int batch_scores(const batches_t *bt)
{
    const int64_t n = bt->o->batch * bt->o->block;
    for (int64_t i = 0; i < n; i++)
        if (bt->next[i] >= 0)
            return 1;
    return 0;
}

/* An evaluation's figures of one split. */
typedef struct {
    double loss, sem, acc;   /* sem: the loss mean's standard deviation from the batches */
    int64_t batches, passed; /* those that scored something, and those passed over */
} split_eval_t;

/* The loss and accuracy of a split (0: train, 1: validation) at evaluation
   `round`: eval_iters batches (the same under every pattern), or an example
   set's whole validation set in order (its loss the mean over its scored
   tokens; with pred [val rows, width], the likeliest token at each scored
   position, -100 elsewhere). The sem says which differences between
   patterns are differences. */
static int eval_split(const ag_lm_t *m, ag_nbhd_t *nb, const ag_lm_opts_t *eo,
                      const batches_t *bt, int split, uint64_t round, int64_t *pred,
                      split_eval_t *out, ag_error_t *err)
{
    const lm_opts_t *o = bt->o;
    const corpus_t *c = bt->c;
    const int whole = c->rows && split;
    const int64_t batches = whole ? (c->rows - c->train_rows + o->batch - 1) / o->batch
                                  : o->eval_iters;
    double sum = 0, sum2 = 0, weighted = 0;
    int64_t correct = 0, counted = 0, ran = 0;
    for (int64_t k = 0; k < batches; k++) {
        draw_batch(bt, split, STREAM_EVAL + 2 * (uint64_t)split + 4 * round, (uint64_t)k,
                   whole ? c->train_rows + k * o->batch : -1);
        if (!batch_scores(bt))   /* examples with nothing scored: no loss to take */
            continue;
        ag_lm_opts_t e = *eo;
        int64_t right, scored;
        e.correct = &right, e.counted = &scored;
        const int64_t T = o->block, B = o->batch, first = c->train_rows + k * B;
        if (whole && pred)
            e.predicted = bt->predicted;
        double loss;
        int rc = bt->b->loss(bt->b, m, nb, bt->ids, bt->pos, bt->next, &e, &loss, NULL, err);
        if (rc)
            return rc;
        if (whole && pred)
            lm_keep_predictions(pred + (first - c->train_rows) * c->width, bt->predicted,
                                bt->next, c->rows - first < B ? c->rows - first : B, T,
                                c->width);
        sum += loss, sum2 += loss * loss, weighted += loss * (double)scored;
        correct += right, counted += scored, ran++;
    }
    if (!counted)   /* only a split of random draws can come to this */
        return ag_fail(err, AG_EINVAL, "--examples: the %lld batches drawn from the training "
                       "examples scored nothing (their targets all -100); expected some: raise "
                       "--eval-iters", (long long)batches);
    const double n = (double)ran;
    out->loss = whole ? weighted / (double)counted : sum / n;
    out->sem = n > 1 ? sqrt(fmax(0, (sum2 - sum * sum / n) / (n - 1)) / n) : 0;
    out->acc = (double)correct / (double)counted;
    out->batches = ran, out->passed = batches - ran;
    return AG_OK;
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* What a pattern's training ended with. */
typedef struct {
    double edges_per_token, seconds;
    split_eval_t train, val;
    double step_ms;       /* the median step (batch, loss, gradients, update) */
} lm_result_t;

static int compare_doubles(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Trains the model from the options' seed under pattern `spec`; rows of the
   log written to log (a memory stream). The model is left in m (for --save). */
static int train_pattern(ag_lm_t *m, const lm_opts_t *o, const corpus_t *c, const char *spec,
                         lm_backend_t *b, FILE *log, int64_t *pred, lm_result_t *res,
                         ag_error_t *err)
{
    ag_nbhd_t *graphs[LM_MAX_LAYERS];   /* a graph a block; one for all: graphs[0] */
    int rc = error_after(ag_lm_graphs(graphs, o->layers, o->block, o->batch, spec, err), err,
                         "--pattern '%s'", spec);
    if (rc)
        return rc;
    ag_nbhd_t *nb = graphs[0];
    const ag_lm_opts_t eval_opts = {.graphs = strchr(spec, '|') ? graphs : NULL};
    if (b->begin)
        rc = b->begin(b, nb, err);
    if (rc) {
        ag_lm_graphs_free(graphs, o->layers);
        return rc;
    }
    const int64_t n = o->batch * o->block;
    batches_t bt = {o, c, NULL, NULL, NULL, NULL, b};
    bt.ids = ag_alloc(4 * n, sizeof(int64_t), err, "batch");
    ag_lm_t g;
    memset(&g, 0, sizeof g);
    ag_optimizer_t *opt = NULL;
    ag_optimizer_opts_t oo = AG_OPTIMIZER_OPTS_INIT;
    oo.kind = AG_OPT_ADAMW, oo.lr = (float)o->lr, oo.beta2 = (float)o->beta2;
    oo.weight_decay = (float)o->weight_decay, oo.clip = (float)o->clip;
    if (!bt.ids)
        rc = ag_alloc_status();
    if (!rc)
        bt.pos = bt.ids + n, bt.next = bt.pos + n, bt.predicted = bt.next + n;
    if (!rc)
        rc = ag_lm_init(m, c->V, o->block, o->dim, o->layers, o->heads, o->bias,
                        (uint64_t)o->seed, err);
    if (!rc)
        rc = ag_lm_set_positions(m, o->positions, err);
    if (!rc && o->no_mlp)
        rc = ag_lm_set_mlp(m, 0, err);
    if (!rc)
        rc = ag_lm_grads_init(&g, m, err);
    if (!rc)
        rc = ag_optimizer_init(&opt, &oo, err);
    if (!rc)
        rc = ag_lm_optimizer_add(opt, m, &g, err);
    int64_t edges = 0;   /* the blocks' mean: E / n when they share one graph */
    for (int64_t l = 0; l < o->layers; l++)
        edges += graphs[l]->n_edges;
    res->edges_per_token = (double)edges / (double)(n * o->layers);
    double *step_s = rc ? NULL : ag_alloc(o->iters + 1, sizeof *step_s, err, "step times");
    if (!rc && !step_s)
        rc = ag_alloc_status();
    const double t0 = now_seconds();
    int64_t steps = 0;    /* the steps taken (a batch that scores nothing is none) */
    uint64_t evals = 0;   /* each evaluation reads batches of its own */
    for (int64_t it = 0; !rc && it <= o->iters; it++) {
        const double lr = lr_at(o, it);
        if (it % o->eval_every == 0 || it == o->iters) {
            rc = eval_split(m, nb, &eval_opts, &bt, 0, evals, NULL, &res->train, err);
            if (!rc)
                rc = eval_split(m, nb, &eval_opts, &bt, 1, evals++, it == o->iters ? pred : NULL,
                                &res->val, err);
            if (rc)
                break;
            res->seconds = now_seconds() - t0;
            if (!o->quiet && c->rows)   /* examples: accuracy is what they measure */
                printf("%-24s step %6lld: train loss %.4f, val loss %.4f, val acc %.4f, lr %.3g "
                       "(%.1f s)\n", spec, (long long)it, res->train.loss, res->val.loss,
                       res->val.acc, lr, res->seconds);
            else if (!o->quiet)
                printf("%-24s step %6lld: train loss %.4f, val loss %.4f, lr %.3g (%.1f s)\n",
                       spec, (long long)it, res->train.loss, res->val.loss, lr, res->seconds);
            csv_field(log, spec);   /* quoted where it holds a comma: fixed:16,4 */
            fprintf(log, ",%lld,%.6f,%.6f,%.6g,%.3f,%.6f,%.6f\n", (long long)it, res->train.loss,
                    res->val.loss, lr, res->seconds, res->train.acc, res->val.acc);
            fflush(stdout);
        }
        if (it == o->iters)
            break;
        const double step_t0 = now_seconds();
        draw_batch(&bt, 0, STREAM_TRAIN, (uint64_t)it, -1);
        if (!batch_scores(&bt))   /* nothing to learn from: no step */
            continue;
        const ag_lm_opts_t lo = {.dropout = (float)o->dropout,
                                 .seed = rng_seed((uint64_t)o->seed, 1000 + it),
                                 .graphs = eval_opts.graphs};
        double loss;
        if (!(rc = b->loss(b, m, nb, bt.ids, bt.pos, bt.next, &lo, &loss, &g, err)) &&
            !(rc = ag_optimizer_set_lr(opt, (float)lr, err)))
            rc = ag_optimizer_step(opt, NULL, err);
        step_s[steps++] = now_seconds() - step_t0;
    }
    res->seconds = now_seconds() - t0;
    res->step_ms = NAN;   /* no step taken: printed as - */
    if (!rc && steps > 0) {
        qsort(step_s, (size_t)steps, sizeof *step_s, compare_doubles);
        res->step_ms = 1e3 * step_s[steps / 2];
    }
    free(step_s);
    if (b->end)
        b->end(b);
    ag_optimizer_free(opt);
    ag_lm_destroy(&g);
    free(bt.ids);
    ag_lm_graphs_free(graphs, o->layers);
    return rc;
}

/* Does the data fit the block? A stream's splits must each hold more than a
   block (and one more token, the last target); an example set sets the block
   to its length unless --block is given, and an example longer is refused. */
static int corpus_fits(const corpus_t *c, lm_opts_t *o, ag_error_t *err)
{
    if (c->rows) {
        if (!o->block_given)
            o->block = c->width;
        if (o->block < c->width)
            return ag_fail(err, AG_EINVAL, "%s/train_inputs.npy: examples of %lld tokens, "
                           "longer than --block %lld; expected a block that holds an example "
                           "(leave --block out: it is then theirs)", o->examples,
                           (long long)c->width, (long long)o->block);
        return AG_OK;
    }
    if (c->split > o->block && c->n - c->split > o->block)
        return AG_OK;
    if (o->text)
        return ag_fail(err, AG_EINVAL, "%s has %lld characters: its 90%% and 10%% must each "
                       "hold more than a block of %lld (and one more for the next token); "
                       "give a longer text or a smaller --block", o->text, (long long)c->n,
                       (long long)o->block);
    return ag_fail(err, AG_EINVAL, "--tokens %s: %lld training and %lld validation tokens; "
                   "each must be more than a block of %lld (and one more for the next "
                   "token); give more tokens or a smaller --block", o->tokens,
                   (long long)c->split, (long long)(c->n - c->split), (long long)o->block);
}

/* The report's first line: what the model learns from. */
static void corpus_say(const corpus_t *c, const lm_opts_t *o)
{
    if (o->text)
        printf("text: %s: %lld characters, %lld distinct (train %lld, val %lld)\n", o->text,
               (long long)c->n, (long long)c->V, (long long)c->split,
               (long long)(c->n - c->split));
    else if (o->tokens)
        printf("tokens: %s: %lld, a vocabulary of %lld (train %lld, val %lld)\n", o->tokens,
               (long long)c->n, (long long)c->V, (long long)c->split,
               (long long)(c->n - c->split));
    else
        printf("examples: %s: %lld training and %lld validation examples of %lld tokens, a "
               "vocabulary of %lld\n", o->examples, (long long)c->train_rows,
               (long long)(c->rows - c->train_rows), (long long)c->width, (long long)c->V);
}

int lm_train_with(int argc, char **argv, lm_backend_t *b)
{
    lm_opts_t o;
    int status = lm_parse(&o, argc, argv);
    if (status >= 0)
        return status;
    for (int k = 0; b->one_graph && k < o.n_patterns; k++)
        if (strchr(o.patterns[k], '|'))
            return usage_error("lm train", "--pattern '%s': a pattern a block runs on one "
                               "process (attngraph lm train); the MPI layer's parts are one "
                               "graph's", o.patterns[k]);
    if (o.predictions && b->ranks > 1)
        return usage_error("lm train", "--predictions: one process (attngraph lm train); "
                           "each process here holds its own rows");
    if (b->rank != 0)   /* the first process writes the files */
        o.log = o.save = NULL;
    const int threads = b->threads ? b->threads(b, (int)o.threads) : ag_set_threads((int)o.threads);
    ag_error_t err = {AG_OK, ""};
    out_file_t outs[2];   /* --log, --predictions */
    out_init(&outs[0], o.log, "--log", "csv");
    out_init(&outs[1], o.predictions, "--predictions", "npy");
    int usage = 0;
    int rc = out_open_all(outs, 2, &usage, &err);
    if (!rc && o.save)
        rc = folder_check(o.save, "--save", &err);
    if (!rc && o.save)
        rc = ag_i_lm_model_save_check(o.save, o.layers, o.heads, o.bias, !o.no_mlp,
                                      o.positions, !o.text, &err);
    corpus_t c;
    memset(&c, 0, sizeof c);
    if (!rc)
        rc = o.text ? corpus_read(&c, o.text, o.bytes, &err)
             : o.tokens ? corpus_tokens(&c, o.tokens, o.vocab, &err)
                        : corpus_examples(&c, o.examples, o.vocab, &err);
    if (!rc)
        rc = corpus_fits(&c, &o, &err);
    if (b->agree)   /* every process goes on, or none */
        rc = b->agree(b, rc, &err);
    if (!rc && !o.quiet) {
        corpus_say(&c, &o);
        printf("model: %lld layers, %lld heads, width %lld, block %lld%s%s%s%s; batch %lld; "
               "%d thread%s%s%.0d%s\n", (long long)o.layers, (long long)o.heads,
               (long long)o.dim, (long long)o.block, o.no_mlp ? ", attention only" : "",
               o.bias ? ", biases" : "",
               o.positions ? ", positions " : "",
               o.positions ? ag_lm_positions_name(o.positions) : "",
               (long long)o.batch, threads, AG_PLURAL(threads),
               b->ranks > 1 ? " on each of " : "", b->ranks > 1 ? b->ranks : 0,
               b->ranks > 1 ? " processes" : "");
    }
    char *log = NULL;   /* the log's rows, written once all ran */
    size_t log_len = 0;
    FILE *logf = rc ? NULL : open_memstream(&log, &log_len);
    if (!rc && !logf)
        rc = ag_fail(&err, AG_ENOMEM, "out of memory for the log");
    const int64_t val_rows = c.rows - c.train_rows, pred_size = val_rows * c.width;
    int64_t *pred = NULL;   /* [patterns, val rows, width] */
    if (!rc && o.predictions &&
        !(pred = ag_alloc(o.n_patterns * pred_size, sizeof *pred, &err, "--predictions")))
        rc = ag_alloc_status();
    for (int64_t i = 0; pred && i < o.n_patterns * pred_size; i++)   /* rows passed over */
        pred[i] = -100;
    lm_result_t res[LM_MAX_PATTERNS];
    ag_lm_t m;
    memset(&m, 0, sizeof m);
    for (int k = 0; !rc && k < o.n_patterns; k++) {
        ag_lm_destroy(&m);
        rc = train_pattern(&m, &o, &c, o.patterns[k], b, logf, pred ? pred + k * pred_size : NULL,
                           &res[k], &err);
    }
    if (logf && fclose(logf) != 0 && !rc)
        rc = ag_fail(&err, AG_ENOMEM, "out of memory for the log");
    if (!rc && o.log) {
        FILE *f = fopen(outs[0].file.path, "w");
        if (!f || fputs("pattern,step,train_loss,val_loss,lr,seconds,train_acc,val_acc\n", f) < 0 ||
            (log && fputs(log, f) < 0) || fclose(f) != 0)
            rc = ag_fail(&err, AG_EIO, "--log %s: write failed", o.log);
    }
    if (!rc && pred) {
        const int64_t shape[3] = {o.n_patterns, val_rows, c.width};
        rc = ag_npy_write_i64_nd(outs[1].file.path, pred, 3, shape, &err);
    }
    if (!rc && o.save) {
        ag_lm_model_t saved = {.m = m, .chars = c.chars, .bytes = o.bytes, .ids = !c.chars};
        snprintf(saved.pattern, sizeof saved.pattern, "%s", o.patterns[0]);
        rc = ag_i_lm_model_save(&saved, o.save, "--save", &err);
    }
    if (!rc)
        rc = out_commit_all(outs, 2, &err);
    if (!rc && !o.quiet) {
        int width = 24;   /* the longest pattern's, a mask a block's too */
        for (int k = 0; k < o.n_patterns; k++)
            width = strlen(o.patterns[k]) > (size_t)width ? (int)strlen(o.patterns[k]) : width;
        const int acc = c.rows > 0;   /* examples: recall is their measure */
        const int64_t val_batches = res[0].val.batches;   /* (the same data under each) */
        char passed[64] = "";
        if (res[0].val.passed)
            snprintf(passed, sizeof passed, " (%lld more passed over: they score nothing)",
                     (long long)res[0].val.passed);
        printf("\n%-*s %15s %11s %9s %8s%s %9s %12s\n", width, "pattern", "edges per token",
               "train loss", "val loss", "+-", acc ? "   val acc" : "", "seconds", "ms a step");
        for (int k = 0; k < o.n_patterns; k++) {
            char sem[32] = "-", va[32] = "";   /* one batch: no spread to measure */
            if (val_batches > 1)
                snprintf(sem, sizeof sem, "%.4f", res[k].val.sem);
            if (acc)
                snprintf(va, sizeof va, " %9.4f", res[k].val.acc);
            char ms[32] = "-";   /* no step taken */
            if (!isnan(res[k].step_ms))
                snprintf(ms, sizeof ms, "%.1f", res[k].step_ms);
            printf("%-*s %15.2f %11.4f %9.4f %8s%s %9.1f %12s\n", width, o.patterns[k],
                   res[k].edges_per_token, res[k].train.loss, res[k].val.loss, sem, va,
                   res[k].seconds, ms);
        }
        if (acc)
            printf("(edges per token: the blocks' mean; val: the whole validation set, %lld "
                   "batch%s%s; +-: the val loss's standard deviation over them; val acc: its "
                   "scored tokens predicted right; ms a step: the median step, batch to update, "
                   "evaluations left out)\n", (long long)val_batches, val_batches == 1 ? "" : "es",
                   passed);
        else
            printf("(edges per token: the blocks' mean; +-: the val loss's standard deviation "
                   "from the %lld batch%s drawn; ms a step: the median step, batch to update, "
                   "evaluations left out)\n", (long long)o.eval_iters,
                   o.eval_iters == 1 ? "" : "es");
        if (o.save)
            printf("wrote %s\n", o.save);
        if (o.log)
            printf("wrote %s\n", o.log);
        if (o.predictions)
            printf("wrote %s\n", o.predictions);
    }
    if (rc) {
        out_abort_all(outs, 2, &err);
    }
    free(pred);
    free(log);
    ag_lm_destroy(&m);
    corpus_free(&c);
    return finish("lm train", rc, usage, &err);
}

/* One process: the steps and evaluations of a pattern share one tape (its
   memory sized once: a step faults in no new pages). */
static int one_process_loss(lm_backend_t *b, const ag_lm_t *m, ag_nbhd_t *nb,
                            const int64_t *ids, const int64_t *pos, const int64_t *next,
                            const ag_lm_opts_t *o, double *loss, ag_lm_t *grads,
                            ag_error_t *err)
{
    return ag_lm_loss(m, nb, ids, pos, next, o, loss, grads, b->ctx, err);
}

static void one_process_end(lm_backend_t *b)
{
    ag_tape_t **tape = b->ctx;
    ag_tape_free(*tape);
    *tape = NULL;
}

int cmd_lm(int argc, char **argv)
{
    static const char usage[] = "usage: attngraph lm train --text FILE [options]\n"
                                "       attngraph lm sample --model DIR [options]\n"
                                "       attngraph lm task mqar|copy --out DIR [options]\n"
                                "see 'attngraph lm train --help', 'attngraph lm sample --help', "
                                "'attngraph lm task --help'\n";
    if (argc < 2) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    const char *what = argv[1];
    if (!strcmp(what, "--help") || !strcmp(what, "-h") || !strcmp(what, "help")) {
        opt_print_help(lm_train_options);
        putchar('\n');
        int rc = lm_sample(2, (char *[]){"sample", "--help", NULL});
        putchar('\n');
        return rc ? rc : lm_task(2, (char *[]){"task", "--help", NULL});
    }
    if (!strcmp(what, "train")) {
        ag_tape_t *tape = NULL;
        lm_backend_t one = {.loss = one_process_loss, .end = one_process_end, .ctx = &tape};
        return lm_train_with(argc - 1, argv + 1, &one);
    }
    if (!strcmp(what, "sample"))
        return lm_sample(argc - 1, argv + 1);
    if (!strcmp(what, "task"))
        return lm_task(argc - 1, argv + 1);
    return usage_error("lm", "unknown subcommand '%s'; expected train, sample or task", what);
}
