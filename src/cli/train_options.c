/* `attngraph train`'s options: the help text, the parser and the combinations refused. */
#include <stdio.h>
#include <string.h>

#include "cli/train.h"

/* Input options train takes only to refuse them (refuse_for_train says why). */
static const opt_def_t refused_by_train[] = {
    OPT_VALUE("dim", OPT_DIM, NULL),
    OPT_VALUE("until", OPT_UNTIL, NULL),
    OPT_DEF_END,
};

static const opt_def_t train_options[] = {
    OPT_PROSE("usage: attngraph train (GRAPH | --pattern SPEC | --csr IP.npy,IX.npy) --features X.npy\n"
              "                       (--labels L.npy | --targets Y.npy) [options]\n"
              "       attngraph train --pattern A --pattern B [--graph FILE] ... [options]\n"
              "\n"
              "Trains R rounds of attention with projections (as 'attngraph run' computes them) from\n"
              "the features: with --labels, the classes of the nodes through a linear readout of\n"
              "the final states (logits = X Wr^T + br, cross-entropy); with --targets, the final\n"
              "states themselves (mean squared error). Prints the loss and accuracies every few\n"
              "epochs. Under several connectivities (--pattern and --graph, repeated) the same\n"
              "initial model is trained under each, and one table compares them. Patterns that\n"
              "read a graph ('graph+virtual:1', 'hops:2') run over the GRAPH (or the first\n"
              "--graph or --csr), which is then no connectivity of its own ('--pattern graph' is).\n"
              "\n"
              "Task:\n"),
    OPT_VALUE("features", OPT_FEATURES,
              "  --features X.npy    node states [N, D]: the model width D is theirs\n"),
    OPT_VALUE("labels", OPT_LABELS,
              "  --labels L.npy      integer class per node [N], 0..C-1 (-1: unlabelled)\n"),
    OPT_VALUE("targets", OPT_TARGETS, "  --targets Y.npy     target states [N, D] instead\n"),
    OPT_VALUE("train-mask", OPT_TRAIN_MASK,
              "  --train-mask M.npy  the nodes the loss is taken on (bool, 0/1 integers) [N]\n"
              "                      (default: every labelled node)\n"),
    OPT_VALUE("eval-mask", OPT_EVAL_MASK,
              "  --eval-mask M.npy   held-out nodes for the eval figures (default: the labelled\n"
              "                      nodes outside --train-mask and --test-mask, when\n"
              "                      --train-mask is given)\n"),
    OPT_VALUE("test-mask", OPT_TEST_MASK,
              "  --test-mask M.npy   nodes reported once: their accuracy (or loss) at the epoch\n"
              "                      of the best eval figure (the last epoch without eval nodes)\n"),
    OPT_VALUE("data", OPT_DATA,
              "  --data ARCHIVE.npz  a benchmark archive (Platonov et al.'s heterophilous graphs):\n"
              "                      the GRAPH (its edges, both ways), --features\n"
              "                      ARCHIVE.npz:node_features, --labels ...:node_labels and the\n"
              "                      masks ...:train_masks, val_masks, test_masks, where no\n"
              "                      option names others\n"),
    OPT_VALUE("split", OPT_SPLIT,
              "  --split K           row K of masks of several splits [S, N] (default 0)\n"),
    OPT_VALUE("metric", OPT_METRIC,
              "  --metric M          accuracy, or auc (ROC AUC of class 1; two classes): what the\n"
              "                      lines report and the best eval epoch is chosen by (default:\n"
              "                      auc for --data with two classes, else accuracy)\n"),
    OPT_PROSE("\n"
              "Model (--rounds 0: the readout alone; --norm layer: LayerNorm weights are learnt;\n"
              "--weights DIR starts from a weights folder, with its readout.npy and\n"
              "readout_bias.npy if there; else the weights are drawn from --seed, default 1):\n"),
    OPT_TABLE(input_model_options),
    OPT_PROSE("\n"
              "Training:\n"),
    OPT_VALUE("epochs", OPT_EPOCHS,
              "  --epochs E          optimizer steps on the whole graph (default 100)\n"),
    OPT_VALUE("lr", OPT_LR, "  --lr LR             learning rate (default 0.01)\n"),
    OPT_VALUE("optimizer", OPT_OPTIMIZER, "  --optimizer NAME    adam (default), adamw or sgd\n"),
    OPT_VALUE("momentum", OPT_MOMENTUM, "  --momentum M        sgd's momentum (default 0)\n"),
    OPT_VALUE("weight-decay", OPT_WEIGHT_DECAY,
              "  --weight-decay W    L2 penalty (adam, sgd) or decoupled decay (adamw) (default 0)\n"),
    OPT_VALUE("clip", OPT_CLIP,
              "  --clip C            scale the gradients to a global L2 norm of at most C\n"),
    OPT_VALUE("dropout", OPT_DROPOUT,
              "  --dropout P         while training, drop what each round's projections read\n"
              "                      (after LayerNorm), each node's channel with probability P\n"),
    OPT_VALUE("attn-dropout", OPT_ATTN_DROPOUT,
              "  --attn-dropout P    while training, drop each message's attention weight in\n"
              "                      each head with probability P (after the softmax); the\n"
              "                      figures come from the model without dropout\n"),
    OPT_VALUE("resid-dropout", OPT_RESID_DROPOUT,
              "  --resid-dropout P   while training, drop what a layer with a residual adds to\n"
              "                      the states, and what a feed-forward sublayer adds\n"),
    OPT_VALUE("every", OPT_EVERY,
              "  --every K           a line every K epochs (default: about ten lines)\n"),
    OPT_FLAG("progress", OPT_PROGRESS,
             "  --progress, --no-progress  the current epoch on standard error (default: when\n"
             "                      it is a terminal)\n"),
    OPT_FLAG("no-progress", OPT_NO_PROGRESS, NULL),
    OPT_PROSE("\n"
              "Outputs (one connectivity; --log and --svg also with several):\n"),
    OPT_VALUE("save", OPT_SAVE,
              "  --save DIR          the trained weights, in the layout run --weights reads, plus\n"
              "                      readout.npy [C, D] and readout_bias.npy [C]\n"),
    OPT_VALUE("predict", OPT_PREDICT,
              "  --predict FILE.npy  the class of every node (int64 [N]) from the trained model\n"),
    OPT_VALUE("log", OPT_LOG,
              "  --log FILE.csv      per epoch: connectivity,epoch,loss,train_accuracy,eval_loss,\n"
              "                      eval_accuracy,grad_norm,test_loss,test_accuracy (epoch e:\n"
              "                      the model after e steps; test: with --test-mask)\n"),
    OPT_VALUE("svg", OPT_SVG,
              "  --svg FILE.svg      the training curve: loss and accuracy per epoch (the picture\n"
              "                      'attngraph draw train' makes of the --log file)\n"),
    OPT_FLAG("quiet", OPT_QUIET, "  --quiet             print nothing on success\n"),
    OPT_PROSE("\n"
              "Connectivity:\n"
              "  GRAPH, --graph FILE a graph file (--graph: repeatable)\n"),
    OPT_VALUES("graph", OPT_GRAPH, NULL),
    OPT_VALUES("pattern", OPT_PATTERN,
               "  --pattern SPEC      a pattern, sized by --nodes or the features (repeatable)\n"),
    OPT_VALUE("csr", OPT_CSR, "  --csr IP.npy,IX.npy an in-neighbour CSR\n"),
    OPT_TABLE(input_common_options),
    OPT_TABLE_UNLISTED(input_raw_options),
    OPT_TABLE_UNLISTED(refused_by_train),
    OPT_HELP_LINE,
    OPT_PROSE("Same seed, same result: training is bitwise reproducible for any --threads.\n"),
    OPT_DEF_END,
};

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
    case OPT_DATA: t->data = arg; return 0;
    case OPT_SPLIT: return opt_int(&t->split, "train", name, arg, 0, 1000000);
    case OPT_METRIC:
        if (strcmp(arg, "accuracy") == 0 || strcmp(arg, "auc") == 0) {
            t->metric = strcmp(arg, "auc") == 0 ? METRIC_AUC : METRIC_ACCURACY;
            return 0;
        }
        return usage_error("train", "--metric '%s': expected accuracy or auc", arg);
    case OPT_TRAIN_MASK: t->train_mask = arg; return 0;
    case OPT_EVAL_MASK: t->eval_mask = arg; return 0;
    case OPT_TEST_MASK: t->test_mask = arg; return 0;
    case OPT_SAVE: t->save = arg; return 0;
    case OPT_LOG: t->log = arg; return 0;
    case OPT_SVG: t->svg = arg; return 0;
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
    case OPT_DROPOUT: case OPT_ATTN_DROPOUT: case OPT_RESID_DROPOUT:
        if (opt_real(&x, "train", name, arg, 0, 0))
            return EXIT_USAGE;
        if (x >= 1)
            return usage_error("train", "--%s '%s' is not a probability in 0..1 (1 excluded)",
                               name, arg);
        t->dropout[c == OPT_DROPOUT ? 0 : c == OPT_ATTN_DROPOUT ? 1 : 2] = (float)x;
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
    int graphs = t->operand.name && t->operand.kind == 0, csrs = 0, stdin_files = 0;
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
    const char *more[] = {t->labels, t->targets, t->train_mask, t->eval_mask, t->test_mask};
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
    /* a model file's dropouts, unless the command gives its own */
    static const int codes[3] = {OPT_DROPOUT, OPT_ATTN_DROPOUT, OPT_RESID_DROPOUT};
    for (int k = 0; k < 3; k++)
        if (o->model.spec.line[AG_KEY_DROPOUT + k] && !p->seen[codes[k] - OPT_Q])
            t->dropout[k] = o->model.spec.dropout[k];
    if (!rounds)   /* else keep what the check set: --weights DIR/model.args's rounds */
        o->rounds = 0;
    return rc ? EXIT_USAGE : 0;
}

int parse_train(train_opts_t *t, int argc, char **argv)
{
    memset(t, 0, sizeof *t);
    run_opts_init(&t->o);
    t->epochs = 100;
    t->split = -1;
    ag_optimizer_opts_init(&t->opt, AG_OPT_ADAM);
    opt_parser_t p;
    opt_begin(&p, "train", train_options, argc, argv);
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
    if (t->data && p.n_pos)
        return usage_error("train", "--data %s is the graph; give it or GRAPH %s, not both",
                           t->data, p.pos[0]);
    if (t->data) {   /* the archive's members, where no option names others */
        const char *member[5] = {"node_features", "node_labels", "train_masks", "val_masks",
                                 "test_masks"};
        const char **into[5] = {&t->o.features, &t->labels, &t->train_mask, &t->eval_mask,
                                &t->test_mask};
        for (int k = 0; k < 5; k++)
            if (!*into[k] && !(k == 1 && t->targets)) {
                if ((size_t)snprintf(t->data_paths[k], sizeof t->data_paths[k], "%s:%s",
                                     t->data, member[k]) >= sizeof t->data_paths[k])
                    return usage_error("train", "--data %s: the name is too long", t->data);
                *into[k] = t->data_paths[k];
            }
        p.pos[p.n_pos++] = t->data;
    }
    if (p.n_pos) {   /* GRAPH comes first, whatever the order on the line */
        memmove(t->conns + 1, t->conns, (size_t)t->n_conns * sizeof t->conns[0]);
        t->conns[0] = (train_conn_t){p.pos[0], 0};
        if (t->n_conns++ == TRAIN_MAX_CONNS)
            return usage_error("train", "more than %d connectivities", TRAIN_MAX_CONNS);
    }
    /* the first graph file or CSR is the operand of patterns that read a graph,
       as run's GRAPH is, and no connectivity of its own ('--pattern graph' is it) */
    int reads = 0;
    for (int k = 0; k < t->n_conns; k++)
        reads |= t->conns[k].kind == 1 && pattern_reads_graph(t->conns[k].name);
    for (int k = 0; reads && k < t->n_conns; k++)
        if (t->conns[k].kind != 1) {
            t->operand = t->conns[k];
            memmove(t->conns + k, t->conns + k + 1, (size_t)(t->n_conns - k - 1) *
                    sizeof t->conns[0]);
            t->n_conns--;
            break;
        }
    if (t->n_conns == 1) {   /* run's checks see the one source */
        const train_conn_t *c0 = &t->conns[0];
        *(c0->kind == 0 ? &t->o.src.graph : c0->kind == 1 ? &t->o.src.pattern : &t->o.src.csr) =
            c0->name;
    }
    return train_checks(t, &p) ? EXIT_USAGE : -1;
}
