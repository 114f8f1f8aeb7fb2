/*
 * `attngraph train`: learns the rounds' weights (and, for classes, a linear
 * readout) by gradient descent; under several connectivities, the same initial
 * model is trained under each and one table compares what each learnt.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "timing.h"
#include "train.h"

static const char train_usage[] =
    "usage: attngraph train (GRAPH | --pattern SPEC | --csr IP.npy,IX.npy) --features X.npy\n"
    "                       (--labels L.npy | --targets Y.npy) [options]\n"
    "       attngraph train --pattern A --pattern B [--graph FILE] ... [options]\n"
    "\n"
    "Trains R rounds of attention with projections (as 'attngraph run' computes them) from\n"
    "the features: with --labels, the classes of the nodes through a linear readout of\n"
    "the final states (logits = X Wr^T + br, cross-entropy); with --targets, the final\n"
    "states themselves (mean squared error). Prints the loss and accuracies every few\n"
    "epochs. Under several connectivities (--pattern and --graph, repeated) the same\n"
    "initial model is trained under each, and one table compares them.\n"
    "\n"
    "Task:\n"
    "  --features X.npy    node states [N, D]: the model width D is theirs\n"
    "  --labels L.npy      integer class per node [N], 0..C-1 (-1: unlabelled)\n"
    "  --targets Y.npy     target states [N, D] instead\n"
    "  --train-mask M.npy  the nodes the loss is taken on (bool, 0/1 integers) [N]\n"
    "                      (default: every labelled node)\n"
    "  --eval-mask M.npy   held-out nodes for the eval figures (default: the labelled\n"
    "                      nodes outside --train-mask, when it is given)\n"
    "\n"
    "Model (as in run): --rounds R (default 1; 0: the readout alone), --heads H,\n"
    "--head-dim d, --score ..., --no-residual, --norm layer (LayerNorm weights are\n"
    "learnt), --posenc sinusoidal, --per-node-weights; --weights DIR starts from a\n"
    "weights folder (with readout.npy and readout_bias.npy, if there), else the\n"
    "weights are drawn from --seed (default 1).\n"
    "\n"
    "Training:\n"
    "  --epochs E          optimizer steps on the whole graph (default 100)\n"
    "  --lr LR             learning rate (default 0.01)\n"
    "  --optimizer NAME    adam (default), adamw or sgd\n"
    "  --momentum M        sgd's momentum (default 0)\n"
    "  --weight-decay W    L2 penalty (adam, sgd) or decoupled decay (adamw) (default 0)\n"
    "  --clip C            scale the gradients to a global L2 norm of at most C\n"
    "  --every K           a line every K epochs (default: about ten lines)\n"
    "  --progress, --no-progress  the current epoch on standard error (default: when\n"
    "                      it is a terminal)\n"
    "\n"
    "Outputs (one connectivity; --log also with several):\n"
    "  --save DIR          the trained weights, in the layout run --weights reads, plus\n"
    "                      readout.npy [C, D] and readout_bias.npy [C]\n"
    "  --predict FILE.npy  the class of every node (int64 [N]) from the trained model\n"
    "  --log FILE.csv      per epoch: connectivity,epoch,loss,train_accuracy,eval_loss,\n"
    "                      eval_accuracy,grad_norm (epoch e: the model after e steps)\n"
    "  --quiet             print nothing on success\n"
    "\n"
    "Connectivity:\n"
    "  GRAPH, --graph FILE a graph file (--graph: repeatable)\n"
    "  --pattern SPEC      a pattern, sized by --nodes or the features (repeatable)\n"
    "  --csr IP.npy,IX.npy an in-neighbour CSR\n"
    "\n" INPUT_OPTIONS_HELP
    "  -h, --help          this text\n"
    "Same seed, same result: training is bitwise reproducible for any --threads.\n";

/* Options of run that train refuses, and why. */
static int refuse_for_train(const run_opts_t *o)
{
    static const int raw[] = {OPT_Q, OPT_K, OPT_V, 0};
    static const int others[] = {OPT_DIM, OPT_UNTIL, 0};
    if (refuse_options(o, raw, "train", "train learns rounds with projections from "
                       "--features; --q/--k/--v are fixed attention inputs"))
        return EXIT_USAGE;
    return refuse_options(o, others, "train", "the model starts from --features and runs "
                          "exactly --rounds rounds");
}

static int add_conn(train_opts_t *t, const char *name, int kind)
{
    if (t->n_conns == TRAIN_MAX_CONNS)
        return usage_error("train", "more than %d connectivities", TRAIN_MAX_CONNS);
    t->conns[t->n_conns++] = (train_conn_t){name, kind};
    return 0;
}

/* Options of train's own; 1 when c is none of them. */
static int train_option(train_opts_t *t, int c, const char *arg, const char *name)
{
    double x;
    int64_t v;
    switch (c) {
    case OPT_PATTERN: return add_conn(t, arg, 1);
    case OPT_GRAPH: return add_conn(t, arg, 0);
    case OPT_CSR: return add_conn(t, arg, 2);
    case OPT_LABELS: t->labels = arg; return 0;
    case OPT_TARGETS: t->targets = arg; return 0;
    case OPT_TRAIN_MASK: t->train_mask = arg; return 0;
    case OPT_EVAL_MASK: t->eval_mask = arg; return 0;
    case OPT_SAVE: t->save = arg; return 0;
    case OPT_LOG: t->log = arg; return 0;
    case OPT_PREDICT: t->predict = arg; return 0;
    case OPT_PROGRESS: case OPT_NO_PROGRESS: t->o.progress = c == OPT_PROGRESS; return 0;
    case OPT_EPOCHS: return opt_int(&t->epochs, "train", name, arg, 1, 100000000);
    case OPT_EVERY: return opt_int(&t->every, "train", name, arg, 1, INT64_MAX);
    case OPT_ROUNDS:   /* 0 is the readout alone */
        t->o.given[OPT_ROUNDS - OPT_Q] = 1;
        if (opt_int(&v, "train", name, arg, 0, 1000000))
            return EXIT_USAGE;
        t->o.rounds = v;
        return 0;
    case OPT_OPTIMIZER:
        if (strcmp(arg, "adam") == 0)
            t->opt.kind = AG_OPT_ADAM;
        else if (strcmp(arg, "adamw") == 0)
            t->opt.kind = AG_OPT_ADAMW;
        else if (strcmp(arg, "sgd") == 0)
            t->opt.kind = AG_OPT_SGD;
        else
            return usage_error("train", "--optimizer '%s': expected adam, adamw or sgd", arg);
        return 0;
    case OPT_LR: case OPT_CLIP:
        if (opt_real(&x, "train", name, arg, 0, 1))
            return EXIT_USAGE;
        *(c == OPT_LR ? &t->opt.lr : &t->opt.clip) = (float)x;
        return 0;
    case OPT_WEIGHT_DECAY: case OPT_MOMENTUM:
        if (opt_real(&x, "train", name, arg, 0, 0))
            return EXIT_USAGE;
        if (c == OPT_MOMENTUM && x >= 1)
            return usage_error("train", "--momentum '%s' is not a number in 0..1 (1 excluded)",
                               arg);
        *(c == OPT_MOMENTUM ? &t->opt.momentum : &t->opt.weight_decay) = (float)x;
        return 0;
    default:
        return 1;
    }
}

/* Combinations train refuses; 0 or EXIT_USAGE. */
static int train_checks(train_opts_t *t, const opt_parser_t *p)
{
    run_opts_t *o = &t->o;
    if (!t->n_conns)
        return usage_error("train", "no GRAPH file, --pattern or --csr given");
    int graphs = 0, csrs = 0, stdin_files = 0;
    for (int k = 0; k < t->n_conns; k++) {
        graphs += t->conns[k].kind == 0, csrs += t->conns[k].kind == 2;
        stdin_files += t->conns[k].kind == 0 && strcmp(t->conns[k].name, "-") == 0;
    }
    if (csrs > 1 || (csrs && t->n_conns > 1))
        return usage_error("train", "--csr trains on one connectivity; compare several with "
                           "--pattern and --graph");
    if (o->src.format && !graphs)
        return usage_error("train", "--format names the format of a GRAPH file; none was given");
    if (!o->features)
        return usage_error("train", "give --features X.npy, the node states [N, D] the model "
                           "starts from");
    if (!!t->labels == !!t->targets)
        return usage_error("train", t->labels ? "give --labels or --targets, not both"
                                              : "give --labels L.npy (a class per node) or "
                                                "--targets Y.npy (target states)");
    if (t->predict && !t->labels)
        return usage_error("train", "--predict writes classes; it needs --labels");
    if (t->n_conns > 1 && (t->save || t->predict))
        return usage_error("train", "--%s keeps one trained model; give one connectivity",
                           t->save ? "save" : "predict");
    if (p->seen[OPT_MOMENTUM - OPT_Q] && t->opt.kind != AG_OPT_SGD)
        return usage_error("train", "--momentum is sgd's; --optimizer is %s",
                           t->opt.kind == AG_OPT_ADAM ? "adam" : "adamw");
    if (t->save && strcmp(t->save, "-") == 0)
        return usage_error("train", "--save names a folder; standard output (-) cannot hold "
                           "the weight files");
    const char *more[] = {t->labels, t->targets, t->train_mask, t->eval_mask};
    for (size_t k = 0; k < sizeof more / sizeof more[0]; k++)
        stdin_files += more[k] && strcmp(more[k], "-") == 0;
    if (one_stdin_input(o, stdin_files, "train"))
        return EXIT_USAGE;
    if (refuse_for_train(o))
        return EXIT_USAGE;
    /* the readout is drawn from --seed even when --features and --weights are given */
    const unsigned char seed_given = o->given[OPT_SEED - OPT_Q];
    o->given[OPT_SEED - OPT_Q] = 0;
    const int64_t rounds = o->rounds;
    o->rounds = rounds ? rounds : 1;   /* run's checks know no --rounds 0 */
    int rc = input_options_check(o, "train");
    o->given[OPT_SEED - OPT_Q] = seed_given;
    o->rounds = rounds;
    return rc ? EXIT_USAGE : 0;
}

static int parse_train(train_opts_t *t, int argc, char **argv)
{
    static struct option longopts[112];
    static const struct option own[] = {
        {"pattern", required_argument, 0, OPT_PATTERN}, {"graph", required_argument, 0, OPT_GRAPH},
        {"csr", required_argument, 0, OPT_CSR}, {"labels", required_argument, 0, OPT_LABELS},
        {"targets", required_argument, 0, OPT_TARGETS},
        {"train-mask", required_argument, 0, OPT_TRAIN_MASK},
        {"eval-mask", required_argument, 0, OPT_EVAL_MASK},
        {"epochs", required_argument, 0, OPT_EPOCHS}, {"lr", required_argument, 0, OPT_LR},
        {"optimizer", required_argument, 0, OPT_OPTIMIZER},
        {"momentum", required_argument, 0, OPT_MOMENTUM},
        {"weight-decay", required_argument, 0, OPT_WEIGHT_DECAY},
        {"clip", required_argument, 0, OPT_CLIP}, {"every", required_argument, 0, OPT_EVERY},
        {"save", required_argument, 0, OPT_SAVE}, {"log", required_argument, 0, OPT_LOG},
        {"predict", required_argument, 0, OPT_PREDICT},
        {"progress", no_argument, 0, OPT_PROGRESS}, {"no-progress", no_argument, 0, OPT_NO_PROGRESS},
        {0, 0, 0, 0},
    };
    static const int repeatable[] = {OPT_PATTERN, OPT_GRAPH, 0};
    merge_options(longopts, sizeof longopts / sizeof longopts[0], own);
    memset(t, 0, sizeof *t);
    run_opts_init(&t->o);
    t->epochs = 100;
    t->opt = (ag_optimizer_opts_t){.kind = AG_OPT_ADAM, .lr = 0.01f};
    opt_parser_t p;
    opt_begin(&p, "train", train_usage, longopts, repeatable, argc, argv);
    int c;
    while ((c = opt_next(&p)) > 0) {
        int rc = train_option(t, c, p.arg, p.name);
        if (rc == 1)
            rc = input_option(&t->o, c, p.arg, "train");
        if (rc != 0)
            return rc;
    }
    if (c < 0)
        return p.status;
    if (opt_positional(&p, 1))
        return EXIT_USAGE;
    if (p.n_pos) {   /* GRAPH comes first, whatever the order on the line */
        memmove(t->conns + 1, t->conns, (size_t)t->n_conns * sizeof t->conns[0]);
        t->conns[0] = (train_conn_t){p.pos[0], 0};
        if (t->n_conns++ == TRAIN_MAX_CONNS)
            return usage_error("train", "more than %d connectivities", TRAIN_MAX_CONNS);
    }
    if (t->n_conns == 1) {   /* run's checks see the one source */
        const train_conn_t *c0 = &t->conns[0];
        *(c0->kind == 0 ? &t->o.src.graph : c0->kind == 1 ? &t->o.src.pattern : &t->o.src.csr) =
            c0->name;
    }
    return train_checks(t, &p) ? EXIT_USAGE : -1;
}

/* ---- progress and the report ---- */

typedef struct {
    int show, tty, open_line;
    double t0, last;
} epoch_progress_t;

static double pct(int64_t n, int64_t of)
{
    return of ? 100.0 * (double)n / (double)of : NAN;
}

/* "epoch 37/200: loss 0.51, train 85.0%, eval 80.2%, 1.2 s", at most every 0.1 s
   (rewritten on a terminal; a line a second with --progress elsewhere). */
static void progress_line(epoch_progress_t *p, const char *conn, int64_t e, int64_t epochs,
                          const epoch_t *f, const task_t *t)
{
    const double now = now_s();
    if (!p->show || now - p->last < (p->tty ? 0.1 : 1.0))
        return;
    p->last = now;
    fprintf(stderr, "%s%s%sepoch %lld/%lld: loss %.4g", p->tty ? "\r\033[K" : "progress: ",
            conn ? conn : "", conn ? ": " : "", (long long)e, (long long)epochs, f->loss);
    if (t->C)
        fprintf(stderr, ", train %.1f%%", pct(f->train_correct, t->n_train));
    if (t->C && t->eval)
        fprintf(stderr, ", eval %.1f%%", pct(f->eval_correct, t->n_eval));
    fprintf(stderr, ", %.1f s%s", now - p->t0, p->tty ? "" : "\n");
    p->open_line = p->tty;
    fflush(stderr);
}

static void progress_clear(epoch_progress_t *p)
{
    if (p->open_line)
        fputs("\r\033[K", stderr);
    p->open_line = 0;
}

static void print_row(const task_t *t, int64_t e, const epoch_t *f)
{
    printf("%5lld  %10.4g", (long long)e, f->loss);
    if (t->C) {
        printf("  %8.1f%%", pct(f->train_correct, t->n_train));
        if (t->eval)
            printf("  %8.1f%%", pct(f->eval_correct, t->n_eval));
    } else if (t->eval) {
        printf("  %10.4g", f->eval_loss);
    }
    putchar('\n');
}

static void print_row_header(const task_t *t)
{
    printf("epoch        loss");
    if (t->C)
        printf("  train_acc%s", t->eval ? "   eval_acc" : "");
    else if (t->eval)
        printf("   eval_loss");
    putchar('\n');
}

static void csv_value(FILE *f, double x)
{
    if (isnan(x))
        fputc(',', f);
    else
        fprintf(f, ",%.9g", x);
}

static void log_row(FILE *f, const char *conn, const task_t *t, int64_t e, const epoch_t *ep)
{
    csv_field(f, conn);
    fprintf(f, ",%lld", (long long)e);
    csv_value(f, ep->loss);
    csv_value(f, t->C ? pct(ep->train_correct, t->n_train) / 100 : NAN);
    csv_value(f, ep->eval_loss);
    csv_value(f, t->C && t->eval ? pct(ep->eval_correct, t->n_eval) / 100 : NAN);
    csv_value(f, ep->grad_norm);
    fputc('\n', f);
}

/* One connectivity's result. */
typedef struct {
    int64_t edges;
    epoch_t final;
    double best;               /* best eval accuracy (classes) or lowest eval loss */
    int64_t best_epoch;
    double seconds;
} outcome_t;

/* Better eval figure: more correct, or a lower loss. */
static int better(const task_t *t, const epoch_t *f, double best)
{
    return t->C ? (double)f->eval_correct > best : f->eval_loss < best;
}

/* ---- one training run ---- */

typedef struct {
    const train_opts_t *to;
    const task_t *task;
    const float *x0;
    int single, threads;
    FILE *log;
    epoch_progress_t progress;
} run_ctx_t;

static int train_one(run_ctx_t *cx, model_t *m, ag_nbhd_t *nb, const char *conn, outcome_t *out,
                     ag_error_t *err)
{
    const train_opts_t *to = cx->to;
    const task_t *t = cx->task;
    const int64_t E = to->epochs;
    const int64_t every = to->every ? to->every : (E >= 10 ? E / 10 : 1);
    const int rows = cx->single && !to->o.quiet;
    memset(out, 0, sizeof *out);
    out->edges = nb->n_edges;
    out->best = t->C ? -1 : INFINITY;
    const double t0 = now_s();
    cx->progress.t0 = t0;
    if (rows)
        print_row_header(t);
    int rc = AG_OK;
    epoch_t f;
    for (int64_t e = 0; e <= E && !rc; e++) {
        /* epoch e: the figures of the model after e steps; then step e+1 */
        if ((rc = model_epoch(m, nb, cx->x0, t, e < E, &f, err)))
            break;
        if (t->eval && better(t, &f, out->best))
            out->best = t->C ? (double)f.eval_correct : f.eval_loss, out->best_epoch = e;
        if (cx->log)
            log_row(cx->log, conn, t, e, &f);
        if (rows && (e % every == 0 || e == E)) {
            progress_clear(&cx->progress);
            print_row(t, e, &f);
            fflush(stdout);
        } else {
            progress_line(&cx->progress, cx->single ? NULL : conn, e, E, &f, t);
        }
    }
    progress_clear(&cx->progress);
    out->final = f;
    out->seconds = now_s() - t0;
    return rc;
}

static void print_final(const task_t *t, const outcome_t *r, int64_t epochs)
{
    printf("final (epoch %lld): loss %.4g", (long long)epochs, r->final.loss);
    if (t->C) {
        printf(", train accuracy %.1f%% (%lld/%lld)", pct(r->final.train_correct, t->n_train),
               (long long)r->final.train_correct, (long long)t->n_train);
        if (t->eval)
            printf(", eval accuracy %.1f%% (%lld/%lld); best eval accuracy %.1f%% at epoch %lld",
                   pct(r->final.eval_correct, t->n_eval), (long long)r->final.eval_correct,
                   (long long)t->n_eval, pct((int64_t)r->best, t->n_eval),
                   (long long)r->best_epoch);
    } else if (t->eval) {
        printf(", eval loss %.4g; best eval loss %.4g at epoch %lld", r->final.eval_loss,
               r->best, (long long)r->best_epoch);
    }
    printf("\n%lld epochs in %.2f s (%.1f epochs/s)\n", (long long)epochs, r->seconds,
           r->seconds > 0 ? (double)epochs / r->seconds : 0.0);
}

static void print_table(const train_opts_t *to, const task_t *t, const outcome_t *res)
{
    printf("%-24s %10s %10s", "connectivity", "edges", "loss");
    if (t->C)
        printf(" %9s%s", "train_acc", t->eval ? "  eval_acc  best_eval  at_epoch" : "");
    else if (t->eval)
        printf(" %10s %10s  at_epoch", "eval_loss", "best_eval");
    printf(" %8s\n", "time_s");
    for (int k = 0; k < to->n_conns; k++) {
        const outcome_t *r = &res[k];
        printf("%-24.24s %10lld %10.4g", to->conns[k].name, (long long)r->edges, r->final.loss);
        if (t->C) {
            printf(" %8.1f%%", pct(r->final.train_correct, t->n_train));
            if (t->eval)
                printf(" %8.1f%% %9.1f%% %9lld", pct(r->final.eval_correct, t->n_eval),
                       pct((int64_t)r->best, t->n_eval), (long long)r->best_epoch);
        } else if (t->eval) {
            printf(" %10.4g %10.4g %9lld", r->final.eval_loss, r->best, (long long)r->best_epoch);
        }
        printf(" %8.2f\n", r->seconds);
    }
}

static const char *score_name(ag_score_kind_t kind)
{
    static const char *const names[] = {"scaled-dot", "dot", "cosine", "additive", "gatv2",
                                        "sigmoid", "linear"};
    return names[kind];
}

static void print_setup(const train_opts_t *to, const inputs_t *in, const task_t *t,
                        int threads)
{
    static const char *const opt_names[] = {"adam", "adamw", "sgd"};
    const run_opts_t *o = &to->o;
    printf("train: %lld round%s (D=%lld, %lld head%s of width %lld, %s scores, %s, seed %llu); ",
           (long long)in->rounds, PLURAL(in->rounds), (long long)in->x0.cols, (long long)in->H,
           PLURAL(in->H), (long long)in->d, score_name(in->score.kind),
           o->weights ? "weights from file" : "random weights", (unsigned long long)o->seed);
    if (t->C)
        printf("%lld classes, %lld train", (long long)t->C, (long long)t->n_train);
    else
        printf("targets, %lld train", (long long)t->n_train);
    if (t->eval)
        printf(" and %lld eval", (long long)t->n_eval);
    printf(" node%s; %s, lr %g, %lld epoch%s, %d thread%s\n",
           PLURAL(t->eval ? t->n_eval : t->n_train), opt_names[to->opt.kind],
           (double)to->opt.lr, (long long)to->epochs, PLURAL(to->epochs), threads,
           PLURAL(threads));
}

/* ---- the command ---- */

/* A connectivity's source options (as compare makes them). */
static source_opts_t conn_source(const train_opts_t *to, int k, int64_t N)
{
    source_opts_t so = to->o.src;
    so.graph = so.pattern = so.csr = NULL;
    const train_conn_t *c = &to->conns[k];
    if (c->kind == 1) {
        so.pattern = c->name;
        so.direction = AG_EDGES_AUTO;   /* edge directions mean nothing to a pattern */
        so.size_hint = N;
    } else {
        *(c->kind == 0 ? &so.graph : &so.csr) = c->name;
        so.tokens = so.labels_file = NULL;
        so.nodes = 0;
    }
    return so;
}

/* The per-slot edge bias of --edge-bias on a graph file. */
static int edge_bias_of(float **bias, const source_t *s, const char *attr, ag_error_t *err)
{
    *bias = NULL;
    if (!attr)
        return AG_OK;
    if (!s->have_graph)
        return ag_fail(err, AG_EINVAL, "--edge-bias '%s' needs a graph file with that edge "
                       "attribute; %s has none", attr, s->desc);
    int rc = ag_edge_attribute(bias, &s->graph, &s->nb, attr, err);
    if (rc && err) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        ag_fail(err, (ag_status_t)rc, "%s: --edge-bias: %s", s->desc, why);
    }
    return rc;
}

typedef struct {
    source_t src;
    inputs_t in;
    task_t task;
    model_t model;
    ag_matrix_t x0;
    float *edge_bias;
    int64_t *pred;
    outcome_t res[TRAIN_MAX_CONNS];
    folder_item_t items[9 * 64 + 2];
    char names[9 * 64 + 2][64];
    int n_items;
    out_file_t outs[2];        /* --log, --predict */
} train_state_t;

/* Refuses a --save folder holding round-k/ layers of an earlier model that run
   --weights would read in place of the ones saved now (it reads round-1/, round-2/,
   ... as long as they are there). */
static int save_fits(const char *dir, int n_layers, ag_error_t *err)
{
    char path[4096];
    const int first = n_layers > 1 ? n_layers + 1 : 1;
    snprintf(path, sizeof path, "%s/round-%d/wq.npy", dir, first);
    FILE *f = fopen(path, "rb");
    if (!f)
        return AG_OK;
    fclose(f);
    return ag_fail(err, AG_EINVAL, "--save %s holds round-%d/, a layer of an earlier model: "
                   "run --weights would read it as part of this one; save to a new folder", dir,
                   first);
}

/* Trains on connectivity k; keeps the model of a single connectivity. */
static int run_conn(train_state_t *st, run_ctx_t *cx, int k, int *usage, ag_error_t *err)
{
    const train_opts_t *to = cx->to;
    const int64_t N = k == 0 ? st->x0.rows : st->in.N;
    source_opts_t so = conn_source(to, k, N);
    int rc = source_open(&st->src, &so, usage, err);
    if (rc)
        return rc;
    if (st->src.nb.n_nodes != N)
        return ag_fail(err, AG_EINVAL, "%s has %lld node%s; --features %s has %lld row%s",
                       st->src.desc, (long long)st->src.nb.n_nodes,
                       PLURAL(st->src.nb.n_nodes), to->o.features, (long long)N, PLURAL(N));
    if (k == 0) {
        if ((rc = inputs_load_features(&st->in, &to->o, &st->x0, err)) ||
            (rc = task_load(&st->task, to, N, st->in.x0.cols, err)) ||
            (to->save && (rc = save_fits(to->save, st->in.n_layers, err))))
            return rc;
        cx->task = &st->task;
        cx->x0 = st->in.x0.data;
    }
    if ((rc = edge_bias_of(&st->edge_bias, &st->src, to->o.edge_bias, err)))
        return rc;
    if ((rc = model_init(&st->model, &st->in, to, &st->task, st->edge_bias, err)))
        return rc;
    if (k == 0 && !to->o.quiet) {   /* the setup, once the first model is made */
        if (cx->single)
            source_print(&st->src);
        print_setup(to, &st->in, &st->task, cx->threads);
        fflush(stdout);
    }
    rc = train_one(cx, &st->model, &st->src.nb, to->conns[k].name, &st->res[k], err);
    if (!rc && cx->single && !to->o.quiet)
        print_final(&st->task, &st->res[k], to->epochs);
    if (!rc && cx->single) {   /* the outputs of the one model */
        if (to->predict) {
            readout_t r = {st->model.C, st->model.D, st->model.wr, st->model.br};
            if (!(st->pred = ag_alloc(N, sizeof *st->pred, err, "predictions")))
                return AG_ENOMEM;
            readout_predict(&r, st->model.X, N, st->pred);
            rc = npy_write_i64(st->outs[1].path, st->pred, N, err);
        }
        if (!rc && to->save)
            st->n_items = model_items(&st->model, st->items, st->names);
        return rc;
    }
    model_free(&st->model);
    free(st->edge_bias);
    st->edge_bias = NULL;
    source_close(&st->src);
    return rc;
}

/* The run command that predicts with the saved model. */
static void print_run_hint(const train_opts_t *to, const inputs_t *in)
{
    const run_opts_t *o = &to->o;
    const train_conn_t *c = &to->conns[0];
    printf("predict with: attngraph run %s%s%s", c->kind == 1 ? "--pattern '" : c->kind == 2 ?
           "--csr " : "", c->name, c->kind == 1 ? "'" : "");
    if (c->kind == 1)
        printf(" --nodes %lld", (long long)in->N);
    printf(" --features %s --weights %s --heads %lld --rounds %lld", o->features, to->save,
           (long long)in->H, (long long)in->rounds);
    if (in->score.kind)
        printf(" --score %s", score_name(in->score.kind));
    if (o->given[OPT_BETA - OPT_Q])
        printf(" --beta %g", (double)o->score.beta);
    if (o->given[OPT_SOFTCAP - OPT_Q])
        printf(" --softcap %g", (double)o->score.softcap);
    if (o->given[OPT_SLOPE - OPT_Q])
        printf(" --slope %g", (double)o->score.slope);
    if (o->score.has_sigmoid_bias)
        printf(" --sigmoid-bias %g", (double)o->score.sigmoid_bias);
    if (o->score.alibi)
        printf(" --alibi");
    if (o->edge_bias)
        printf(" --edge-bias %s", o->edge_bias);
    if (o->no_residual)
        printf(" --no-residual");
    if (o->norm == AG_NORM_LAYER)
        printf(" --norm layer");
    if (o->posenc)
        printf(" --posenc sinusoidal");
    if (o->src.self != AG_SELF_KEEP)
        printf(" --self-loops %s", o->src.self == AG_SELF_ON ? "on" : "off");
    if (o->src.direction != AG_EDGES_AUTO)
        printf(" --%s", o->src.direction == AG_EDGES_UNDIRECTED ? "undirected" : "directed");
    if (o->src.format)
        printf(" --format %s", o->src.format);
    printf(" --predict FILE.npy\n");
}

int cmd_train(int argc, char **argv)
{
    train_opts_t to;
    int status = parse_train(&to, argc, argv);
    if (status >= 0)
        return status;
    const int threads = ag_set_threads((int)to.o.threads);
    train_state_t *st = calloc(1, sizeof *st);
    if (!st) {
        fprintf(stderr, "attngraph: out of memory\n");
        return EXIT_BAD_INPUT;
    }
    ag_error_t err = {AG_OK, ""};
    int usage = 0;
    out_init(&st->outs[0], to.log, "--log", "csv");
    out_init(&st->outs[1], to.predict, "--predict", "npy");
    /* outputs first: a bad path fails before any work */
    int rc = to.save ? folder_check(to.save, "--save", &err) : AG_OK;
    if (!rc)
        rc = out_open_all(st->outs, 2, &usage, &err);
    run_ctx_t cx = {&to, NULL, NULL, to.n_conns == 1, threads, NULL, {0}};
    if (!rc && to.log && !(cx.log = fopen(st->outs[0].path, "w")))
        rc = ag_fail(&err, AG_EIO, "%s: cannot write", to.log);
    if (cx.log)
        fputs("connectivity,epoch,loss,train_accuracy,eval_loss,eval_accuracy,grad_norm\n",
              cx.log);
    cx.progress.tty = isatty(STDERR_FILENO);
    cx.progress.show = to.o.progress == 1 || (to.o.progress < 0 && !to.o.quiet &&
                                               cx.progress.tty);
    if (!rc)
        rc = ag_matrix_read_npy(&st->x0, to.o.features, &err);
    for (int k = 0; k < to.n_conns && !rc; k++)
        rc = run_conn(st, &cx, k, &usage, &err);
    if (cx.log && fclose(cx.log) != 0 && !rc)
        rc = ag_fail(&err, AG_EIO, "%s: write failed", to.log);
    if (!rc && to.save)
        rc = folder_write(to.save, "--save", st->items, st->n_items, &err);
    if (!rc)
        rc = out_commit_all(st->outs, 2, &err);
    if (!rc && !to.o.quiet && !cx.single) {
        printf("trained on %d connectivities of %lld nodes\n", to.n_conns, (long long)st->in.N);
        print_table(&to, &st->task, st->res);
    }
    if (!rc && !to.o.quiet) {
        if (to.save) {
            printf("wrote %s:", to.save);
            for (int k = 0; k < st->n_items; k++)
                printf(" %s", st->items[k].name);
            putchar('\n');
        }
        for (int k = 0; k < 2; k++)
            if (st->outs[k].target)
                printf("wrote %s\n", st->outs[k].target);
        if (to.save && st->task.C)
            print_run_hint(&to, &st->in);
    }
    if (rc) {
        out_name_errors(st->outs, 2, &err);
        for (int k = 0; k < 2; k++)
            out_abort(&st->outs[k]);
    }
    model_free(&st->model);
    free(st->edge_bias);
    free(st->pred);
    source_close(&st->src);
    task_free(&st->task);
    inputs_free(&st->in);
    ag_matrix_destroy(&st->x0);
    free(st);
    return finish("train", rc, usage, &err);
}
