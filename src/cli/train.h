/* `attngraph train`: options, the task (labels or targets, masks) and the model. */
#ifndef AG_CLI_TRAIN_H
#define AG_CLI_TRAIN_H

#include "cli/cli.h"

#define TRAIN_MAX_CONNS 16
/* The first line of --log (and of what --svg draws). */
#define TRAIN_LOG_HEADER \
    "connectivity,epoch,loss,train_accuracy,eval_loss,eval_accuracy,grad_norm,test_loss," \
    "test_accuracy,train_auc,eval_auc,test_auc\n"

typedef struct {
    const char *name;               /* the spec or file, as given */
    int kind;                       /* 0 graph file, 1 pattern, 2 CSR */
} train_conn_t;

typedef struct {
    run_opts_t o;                   /* inputs, scores, rounds (o.rounds may be 0), seed */
    train_conn_t conns[TRAIN_MAX_CONNS];
    int n_conns;
    train_conn_t operand;           /* the graph file or CSR that the patterns reading a
                                       graph (graph, hops:K) run over; name NULL: none */
    const char *targets, *labels, *train_mask, *eval_mask, *test_mask;
    const char *data;               /* --data ARCHIVE.npz: the graph, features, labels, masks */
    int64_t split;                  /* --split K: row K of 2-D masks [splits, N]; -1: none */
    int metric;                     /* --metric: METRIC_AUTO, METRIC_ACCURACY, METRIC_AUC */
    char data_paths[5][1024];       /* --data's members, where no option names another */
    int64_t epochs, every;          /* every 0: about ten lines */
    ag_optimizer_opts_t opt;
    float dropout[3];               /* while training, ag_round_opts_t's dropout,
                                       attn_dropout and resid_dropout */
    const char *save, *log, *predict, *svg;
} train_opts_t;

enum { METRIC_AUTO = 0, METRIC_ACCURACY, METRIC_AUC };

/* What is learnt: classes (labels) or states (targets), on which nodes. */
typedef struct {
    int64_t N, C;                   /* C: classes (0: targets, mean squared error) */
    int64_t *labels;                /* [N], -1 unlabelled */
    ag_matrix_t targets;            /* [N, D] */
    uint8_t *train, *eval, *test;   /* [N] masks; eval, test NULL: none */
    int64_t n_train, n_eval, n_test;   /* nodes that count: in the mask (and labelled) */
    int auc;                        /* two classes judged by ROC AUC, not accuracy */
} task_t;

/* Reads --labels or --targets and the masks for N nodes of width D, checking
   every value; the default train mask is every (labelled) node, the default
   eval mask the labelled nodes outside --train-mask when one is given. */
int task_load(task_t *t, const train_opts_t *o, int64_t N, int64_t D, ag_error_t *err);
/* Appends V nodes that nothing counts (unlabelled, outside every mask, zero
   targets): a pattern's virtual nodes. */
int task_add_virtual(task_t *t, int64_t V, ag_error_t *err);
void task_free(task_t *t);

/* Figures of the model after a number of steps. */
typedef struct {
    double loss, eval_loss, test_loss, grad_norm;   /* NAN when there is none */
    int64_t train_correct, eval_correct, test_correct;
    double auc[3];                       /* ROC AUC on train, eval, test (task_t.auc; NAN
                                            without) */
    int diverged;                        /* the loss was computed and is not finite */
} epoch_t;

/* The model being trained: the rounds' layers and, for classes, a readout. */
typedef struct {
    ag_weights_t *layers, *grads;
    int n_layers, rounds;
    int64_t N, D, C;                /* D: the final states' width (the readout's input) */
    int64_t D_in;                   /* the features' width */
    int readout;                    /* a linear readout (else the last layer writes the classes) */
    int64_t total;                  /* the graph's nodes (N: this process's rows of them) */
    float *wr, *br, *dwr, *dbr;     /* readout [C, D] and [C] with gradients */
    float *X, *dX;                  /* states and their gradient: [N, the widest of the rounds] */
    ag_workspace_t ws;              /* the forwards that keep no tape (the figures) */
    ag_tape_t *tape;                /* the steps' tape, kept from epoch to epoch */
    ag_optimizer_t *opt;
    float lr;                       /* for messages */
    ag_round_opts_t ro;             /* model_round_opts gives each step its dropout seed */
    ag_score_t score;
    uint64_t seed;                  /* --seed: the dropout masks' */
    int64_t steps;                  /* steps taken */
} model_t;

/*
 * A model from the initial layers (copied) and, for classes, a readout from
 * --weights DIR/readout.npy or drawn from the seed. Registers with the
 * optimizer exactly the arrays the loss depends on.
 */
int model_init(model_t *m, const inputs_t *in, const train_opts_t *to, const task_t *t,
               const float *edge_bias, ag_error_t *err);
void model_free(model_t *m);
/* Does m train with dropout? Then an epoch runs two forwards: the figures
   without dropout, the step with it. */
int model_drops(const model_t *m);
/* The options of m's next step's forward (step 1: dropout_seed a hash of the
   seed and the steps taken), or of its evaluation (step 0: without dropout). */
ag_round_opts_t model_round_opts(const model_t *m, int step);
/* The figures of the model now; with `step`, then one optimizer step. m->X holds
   the final states afterwards. */
int model_epoch(model_t *m, ag_nbhd_t *nb, const float *x0, const task_t *t, int step,
                epoch_t *f, ag_error_t *err);
/* The model's arrays as files of a weights folder (run --weights reads them):
   items [n_layers x AG_LAYER_ARRAYS + 2]; returns how many. */
int model_items(const model_t *m, folder_item_t *items, char (*names)[64]);
/* What defines the model, as --save writes it beside the arrays: a model
   file's model.txt, else the options' model.args (*name says which). Returns
   the bytes it needs, as snprintf. */
size_t model_text(char *buf, size_t cap, const train_opts_t *to, const inputs_t *in,
                  const char **name);

/* ---- options (train_options.c) ---- */

/* Parses argv; -1 to go on, else the exit status (help printed, or a usage error). */
int parse_train(train_opts_t *t, int argc, char **argv);

/* ---- the report (train_report.c) ---- */

typedef struct {
    int show, tty, open_line;       /* progress on stderr; rewritten on a terminal */
    double t0, last;
} epoch_progress_t;

/* One connectivity's result. */
typedef struct {
    int64_t edges;
    epoch_t final;
    double best;               /* best eval accuracy (classes) or lowest eval loss */
    int64_t best_epoch;
    epoch_t at_best;           /* the figures of best_epoch (without eval: the last) */
    double seconds;
} outcome_t;

/* 100 n / of, NAN when of is 0. */
double pct(int64_t n, int64_t of);
/* The figure a mask is judged by, in percent: its accuracy, or 100 x ROC AUC
   (which: 0 train, 1 eval, 2 test). */
double figure(const task_t *t, const epoch_t *f, int which);
void progress_line(epoch_progress_t *p, const char *conn, int64_t e, int64_t epochs,
                   const epoch_t *f, const task_t *t);
void progress_clear(epoch_progress_t *p);
void print_row_header(const task_t *t);
void print_row(const task_t *t, int64_t e, const epoch_t *f);
void log_row(FILE *f, const char *conn, const task_t *t, int64_t e, const epoch_t *ep);
void print_setup(const train_opts_t *to, const inputs_t *in, const task_t *t, int threads);
void print_final(const task_t *t, const outcome_t *r, int64_t epochs);
void print_table(const train_opts_t *to, const task_t *t, const outcome_t *res);
void print_run_hint(const train_opts_t *to, const inputs_t *in);

/* One epoch: the figures of the model after `step`s so far, then (step set)
   one more step. model_epoch's on one process; the parts' on several. */
typedef int (*epoch_fn)(void *ctx, int step, epoch_t *f, ag_error_t *err);

/* What a training run writes to and prints. */
typedef struct {
    const train_opts_t *to;
    const task_t *task;
    int single, threads;
    int root;                  /* prints (attngraph-mpi: rank 0 only) */
    FILE *log;
    FILE *curve;               /* --svg: the log again, in memory */
    epoch_progress_t progress;
} run_ctx_t;

/* Epochs 0..to->epochs of one connectivity (edges messages) through epoch:
   the rows of the table, the log's rows, the progress line, and its outcome.
   lr names the learning rate when the loss diverges. */
int train_epochs(run_ctx_t *cx, epoch_fn epoch, void *ctx, int64_t edges, float lr,
                 const char *conn, outcome_t *out, ag_error_t *err);

/* What differs between training on one process (attngraph train) and on
   several (attngraph-mpi train); the rest, its outputs, log and report, is
   train_with's, written once. */
typedef struct train_backend train_backend_t;
struct train_backend {
    int rank;       /* 0 writes the files and prints; the others only compute */
    int progress;   /* shows the epoch on standard error (--progress; one process) */
    /* rc agreed by every process, and *usage rank 0's (NULL: one process) */
    int (*agree)(train_backend_t *b, int rc, int *usage, ag_error_t *err);
    /* connectivity k: its graph (or part), rows and model (the same initial
       one for every k; k = 0 sets cx->task), its epochs through train_epochs
       into *res, and a single connectivity's last lines */
    int (*connectivity)(train_backend_t *b, run_ctx_t *cx, int k, outcome_t *res, int *usage,
                        ag_error_t *err);
    /* a single connectivity's model, after its epochs: its classes into the
       opened --predict file; its --save folder */
    int (*predict)(train_backend_t *b, out_file_t *out, ag_error_t *err);
    int (*save)(train_backend_t *b, ag_error_t *err);
    /* the report's line for --save's folder; then its last line (NULL: none) */
    void (*said_saved)(train_backend_t *b);
    void (*report_end)(train_backend_t *b);
    void *ctx;
};
/* attngraph train's work, the options parsed and threads set, on backend b;
   returns the exit status. */
int train_with(const train_opts_t *to, int threads, train_backend_t *b);

#endif
