/* The attngraph command-line tool: shared declarations. */
#ifndef AG_CLI_H
#define AG_CLI_H

#include <getopt.h>
#include <stdio.h>
#include <sys/types.h>

#include "attngraph.h"
#include "base/base.h"
#include "model/model.h"
#include "cli/source.h"

#define EXIT_BAD_INPUT 1
#define EXIT_USAGE 2
#define EXIT_SOFTWARE 70   /* sysexits.h: a fault of the program itself */
#define SUMMARY_NODES 20
#define DEFAULT_DIM 16

/* Option codes (opt_def_t.code) shared by the commands; see options.c. */
enum {
    OPT_Q = 256, OPT_K, OPT_V, OPT_FEATURES, OPT_DIM, OPT_HEAD_DIM, OPT_WEIGHTS, OPT_ROUNDS,
    OPT_HEADS, OPT_SEED, OPT_THREADS, OPT_FORMAT, OPT_MAX_NODES, OPT_OUT, OPT_ATTN, OPT_QUIET,
    OPT_HELP, OPT_PATTERN, OPT_NODES, OPT_TOKENS, OPT_LABELS_FILE, OPT_SELF_LOOPS, OPT_GRAPH,
    OPT_CSV, OPT_PER_NODE, OPT_LABELS, OPT_MAX_EDGES, OPT_SCORE, OPT_BETA, OPT_SOFTCAP,
    OPT_SLOPE, OPT_SIGMOID_BIAS, OPT_EDGE_BIAS, OPT_ALIBI, OPT_NO_RESIDUAL, OPT_NORM,
    OPT_POSENC, OPT_PER_NODE_WEIGHTS, OPT_TRACE, OPT_UNTIL, OPT_SAVE_ROUNDS, OPT_ATTN_ROUND,
    OPT_MESSAGES, OPT_WHO, OPT_TO, OPT_TOP, OPT_CSR, OPT_REPS, OPT_WARMUP, OPT_JSON, OPT_KERNEL,
    OPT_HEAD_MESSAGES, OPT_DIRECTED, OPT_UNDIRECTED, OPT_PROGRESS, OPT_NO_PROGRESS,
    OPT_MAX_MEMORY, OPT_DOUT, OPT_TARGETS, OPT_TRAIN_MASK, OPT_EVAL_MASK, OPT_TEST_MASK,
    OPT_EPOCHS, OPT_LR, OPT_OPTIMIZER, OPT_WEIGHT_DECAY, OPT_CLIP, OPT_MOMENTUM, OPT_SAVE, OPT_LOG,
    OPT_PREDICT, OPT_EVERY, OPT_BACKWARD, OPT_HEAD, OPT_BINS, OPT_LAYOUT, OPT_CLASSES, OPT_SVG,
    OPT_VMAX, OPT_TITLE, OPT_SCALE, OPT_RANKS, OPT_PARTITION, OPT_BANDWIDTH, OPT_RATE,
    OPT_SAMPLE, OPT_EXACT, OPT_PER_RANK, OPT_DROPOUT, OPT_ATTN_DROPOUT, OPT_MODEL, OPT_RESID_DROPOUT, OPT_EDGE_FEATURES,
    OPT_TEXT, OPT_BLOCK, OPT_BATCH, OPT_LAYERS, OPT_ITERS, OPT_MIN_LR, OPT_BETA2, OPT_EVAL_EVERY,
    OPT_EVAL_ITERS, OPT_LR_DECAY_ITERS, OPT_BIAS, OPT_BYTES, OPT_START, OPT_TEMPERATURE,
    OPT_TOP_K, OPT_HELD_OUT, OPT_DATA, OPT_SPLIT, OPT_METRIC, OPT_VOCAB, OPT_EXAMPLES,
    OPT_LENGTH, OPT_PAIRS, OPT_POWER, OPT_TRAIN_EXAMPLES, OPT_VAL_EXAMPLES, OPT_POSITIONS,
    OPT_PREDICTIONS, OPT_FILL, OPT_NO_MLP,
    OPT_END
};
#define OPT_COUNT (OPT_END - OPT_Q)
#define MAX_ATTN 8              /* run --attn: files written at once */

/* A command's options, declared once (options.c parses argv with them): each
   entry is an option (its name, whether it takes a value, the code opt_next
   returns) with the lines --help prints for it, a text between options, or
   another table whose entries come here. --help prints the texts in order. An
   option without help of its own is described by the text before it; either
   way opt_begin checks that the text names it, so no option goes unlisted. */
typedef struct opt_def {
    const char *name;              /* "heads" for --heads; NULL: a text or a table */
    int has_arg;                   /* no_argument or required_argument */
    int code;                      /* OPT_HEADS */
    int repeat;                    /* 1: may be given more than once */
    const char *help;              /* the lines --help prints here; NULL: none */
    const struct opt_def *table;   /* (name NULL) its entries here, ending OPT_DEF_END */
    int unlisted;                  /* with table: its options taken, their help not printed
                                      (the command says them in its own words, or refuses
                                      them with a reason) */
} opt_def_t;

#define OPT_VALUE(name, code, help) {name, required_argument, code, 0, help, NULL, 0}
#define OPT_VALUES(name, code, help) {name, required_argument, code, 1, help, NULL, 0}
#define OPT_FLAG(name, code, help) {name, no_argument, code, 0, help, NULL, 0}
#define OPT_PROSE(text) {NULL, 0, 0, 0, text, NULL, 0}
#define OPT_TABLE(t) {NULL, 0, 0, 0, NULL, t, 0}
#define OPT_TABLE_UNLISTED(t) {NULL, 0, 0, 0, NULL, t, 1}
#define OPT_HELP_LINE OPT_FLAG("help", OPT_HELP, "  -h, --help          this text\n")
/* Ends a table: the one entry with no name, help or table (so OPT_PROSE and
   OPT_TABLE never take NULL). */
#define OPT_DEF_END {0, 0, 0, 0, NULL, NULL, 0}

/* ---- a model described in a text file (model_file.c) ---- */

#define MODEL_MAX_LAYERS AG_MODEL_MAX_LAYERS

typedef struct {
    const char *path;             /* --model FILE, or --weights DIR/model.txt; NULL: none */
    ag_model_spec_t spec;         /* what it says; spec.n_layers 0 until it is read */
} model_file_t;

/* ---- options shared by run, compare and inspect ---- */

typedef struct {
    source_opts_t src;                 /* connectivity (run: one; compare: see compare.c) */
    const char *q, *k, *v;             /* raw attention mode */
    const char *features, *weights;    /* rounds mode */
    int64_t dim, head_dim, rounds, heads, threads;
    uint64_t seed;
    /* scores */
    ag_score_t score;
    const char *edge_bias;             /* numeric edge attribute added to the scores */
    const char *edge_features;         /* --edge-features: FILE.npy, or attributes "a,b" */
    /* rounds */
    int no_residual, per_node, posenc;
    ag_norm_t norm;
    const char *trace, *save_rounds;
    double until;                      /* > 0: stop when the relative change falls below */
    /* outputs */
    const char *out, *messages, *head_messages;
    const char *predict;               /* run --predict: classes from the readout */
    const char *attn[MAX_ATTN];        /* run --attn, repeatable: one file per format */
    int n_attn;
    int64_t attn_round;                /* 0: the last round */
    int64_t max_export;
    int quiet;
    const char *nodes_text;            /* --nodes as given: checked against --max-nodes */
    int progress;                      /* -1: on a terminal; 0: --no-progress; 1: --progress */
    unsigned char given[OPT_COUNT];    /* which input options were given (by code - OPT_Q) */
    model_file_t model;                /* --model FILE (run, train) */
} run_opts_t;

/* The input options (run, compare, inspect, draw heatmap and graph, grad, bench,
   train) in their help's sections; a command's table includes the ones
   it lists (options.c: opt_def_t). */
extern const opt_def_t input_raw_options[], input_features_options[], input_model_options[],
    input_until_options[], input_common_options[];
/* All five, for the commands that list them in this order. */
extern const opt_def_t input_options[];
/* --pattern and --csr as inspect and draw list them (run says more). */
extern const opt_def_t input_source_options[];
/* --quiet, for the commands that take it only to refuse it (bench, draw,
   inspect print what they print); the others say it in their own words. */
extern const opt_def_t quiet_refused[];
/* The input option, or --quiet, of that name (without "--") or code; NULL if none. */
const opt_def_t *input_option_named(const char *name);
const opt_def_t *input_option_coded(int code);

/* Defaults for run_opts_t. */
void run_opts_init(run_opts_t *o);
/* Handles an input option: 0 done, 1 not an input option, EXIT_USAGE bad value
   (message printed). */
int input_option(run_opts_t *o, int code, const char *arg, const char *cmd);
/* Checks option combinations and the options that need others (--nodes against
   --max-nodes, score options against --score); 0 or EXIT_USAGE (message printed). */
int input_options_check(run_opts_t *o, const char *cmd);
/* Refuses (EXIT_USAGE, message printed) more than one input read from standard
   input: o's graph, --features, --q/--k/--v, --csr parts, plus `more` the
   caller reads (compare's --graph files); 0 when at most one. Called by
   input_options_check with more = 0. */
int one_stdin_input(const run_opts_t *o, int more, const char *cmd);
/* ---- the words to the user (messages.c) ---- */

/* The program messages name: "attngraph", or "attngraph-mpi" (set by its main). */
extern const char *cli_program;
/* Prints "PROGRAM CMD: MESSAGE" and the help hint; returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...);
/* err's message after a prefix (printf's format), "PREFIX: MESSAGE", when rc
   is a failure; returns rc. */
int error_after(int rc, ag_error_t *err, const char *fmt, ...) AG_PRINTF(3, 4);
/* A command's exit status for rc: 0 on success; else the error on stderr, as a
   usage error (exit 2) when `usage`, or as bad input (exit 1). */
int finish(const char *cmd, int rc, int usage, const ag_error_t *err);

/* ---- parsing argv: one parser for every command (options.c) ---- */

#define OPT_MAX_POSITIONAL 4
#define OPT_MAX_OPTIONS 160
typedef struct {
    const char *cmd;                    /* "run": messages say "attngraph run: ..." */
    const opt_def_t *table;             /* the command's options and help */
    const opt_def_t *opts[OPT_MAX_OPTIONS];   /* its options, tables flattened */
    int n_opts;
    char fault[96];                     /* the table's first fault (opt_begin), or "": the
                                           command stops on it, so every test of it fails */
    int argc;
    char **argv;
    int next, after_dashes;
    const char *arg;                    /* the value of the option just returned, or NULL */
    const char *name;                   /* its name, without "--" */
    const char *pos[OPT_MAX_POSITIONAL];   /* positional arguments, in order */
    int n_pos;                          /* how many (may exceed OPT_MAX_POSITIONAL) */
    unsigned char seen[OPT_COUNT];
    const char *seen_arg[OPT_COUNT];
    int status;                         /* after opt_next returned -1: the exit status */
} opt_parser_t;

void opt_begin(opt_parser_t *p, const char *cmd, const opt_def_t *table, int argc,
               char **argv);
/* Prints the table's help to stdout: its texts in order, unlisted tables left out. */
void opt_print_help(const opt_def_t *table);
/* The next option's code (its value in p->arg); 0 when argv is done; -1 when the
   command should stop with p->status: 0 after printing help, EXIT_USAGE after a
   message (unknown or abbreviated name, missing value, option given twice). */
int opt_next(opt_parser_t *p);
/* 0, or EXIT_USAGE (message printed) when more than max positional arguments came. */
int opt_positional(const opt_parser_t *p, int max);
/* An integer option value in min..max (max >= INT64_MAX / 64: no upper limit
   named); 0, or EXIT_USAGE with the message printed. */
int opt_int(int64_t *out, const char *cmd, const char *name, const char *text, int64_t min,
            int64_t max);
/* A finite number option value >= min (> min when `above`; min <= -1e30: any
   number); 0, or EXIT_USAGE with the message printed. */
int opt_real(double *out, const char *cmd, const char *name, const char *text, double min,
             int above);

/* Takes GRAPH from the first positional argument if present, then checks that
   exactly one of GRAPH, --pattern and --csr was given; 0 or EXIT_USAGE. */
int source_args(run_opts_t *o, const opt_parser_t *p, const char *cmd);
/* EXIT_USAGE (message printed) when one of the input options codes[] (ending 0)
   was given: they do not apply to cmd, for the reason `why`; else 0. */
int refuse_options(const run_opts_t *o, const int *codes, const char *cmd, const char *why);

/* ---- inputs and compute ---- */

typedef struct {
    int raw;                  /* 1: q, k, v given; 0: rounds on x0 */
    ag_matrix_t q, k, v, x0;
    ag_weights_t *layers;     /* [n_layers] */
    int n_layers;
    float *vectors;           /* raw mode: seeded attention vectors, 3 x [H, d] */
    ag_score_t score;         /* the options' score */
    int64_t N, H, d, rounds;
    /* the graph's row of x0's first row and the graph's nodes: 0 and N, but a
       process's part under attngraph-mpi (per-node weights are its rows') */
    int64_t first, total;
    /* --edge-features [E, F] in the graph's slots (edge_features_load), the
       caller's; NULL: none. Layers with edges=yes read them. */
    const ag_matrix_t *edges;
} inputs_t;

/* When the options alone decide a run's shape (random features and weights),
   checks its states against the memory budget; AG_OK otherwise. */
int inputs_check_memory(const run_opts_t *o, int64_t N, ag_error_t *err);
/* m widened to `rows` rows (>= its own), the new ones zero: a pattern's
   virtual nodes after the input nodes' rows. */
int matrix_pad_rows(ag_matrix_t *m, int64_t rows, ag_error_t *err);
/* Loads or draws the inputs for N nodes; edges: the edge features the layers
   read (kept by the caller until inputs_free), or NULL. */
int inputs_load(inputs_t *in, const run_opts_t *o, int64_t N, const ag_matrix_t *edges,
                ag_error_t *err);
/* Rounds inputs on features already read (x0 is taken over: zeroed here, freed
   by inputs_free): positions, then the layers from --weights or the seed. */
int inputs_load_features(inputs_t *in, const run_opts_t *o, ag_matrix_t *x0,
                         const ag_matrix_t *edges, ag_error_t *err);
/* Raw attention on Q, K, V already read (taken over, as x0 above): their
   columns checked, additive and gatv2 given seeded vectors. */
int inputs_take_raw(inputs_t *in, const run_opts_t *o, ag_matrix_t *q, ag_matrix_t *k,
                    ag_matrix_t *v, ag_error_t *err);
/* The same for the rows of a part: x0 holds rows first.. of a graph of total nodes. */
int inputs_load_part(inputs_t *in, const run_opts_t *o, ag_matrix_t *x0, int64_t first,
                     int64_t total, const ag_matrix_t *edges, ag_error_t *err);
void inputs_free(inputs_t *in);

/* One row of the convergence trace. */
typedef struct {
    int round;
    ag_round_figures_t f;
} trace_row_t;

typedef struct {
    float *y;                 /* the output [N, cols]: M (raw) or the final X */
    int64_t cols;
    int rounds_done;
    /* the round whose attention is reported: its queries, keys and score */
    const float *Q, *K;       /* NULL when no round ran */
    ag_score_t score;
    float *Q_kept, *K_kept;   /* copies of --attn-round's queries and keys */
    ag_score_t kept_score;
    float *edge_bias;         /* per slot, from --edge-bias */
    trace_row_t *trace;       /* [rounds_done] when figures were asked for */
    ag_workspace_t ws;
    /* per node and head, the reported round's entropy and mean distance from
       the kernel's own pass (FIGURES_PER_NODE), else NULL */
    const float *entropy, *distance;
    float *entropy_kept, *distance_kept;   /* --attn-round's, or raw attention's */
} result_t;

/* --save-rounds: the states X [N, D] after round `round` as DIR/round-K.npy. */
int save_round(const char *dir, int round, const float *X, int64_t N, int64_t D,
               ag_error_t *err);
/* The trace of `done` rounds as a table on stdout, with --until's verdict. */
void print_trace(const trace_row_t *trace, int done, const run_opts_t *o, int64_t rounds);

/* compute's `figures`: the per-round trace (printed), and the reported
   round's per-node figures in result_t (compare). */
enum { FIGURES_TRACE = 1, FIGURES_PER_NODE = 2 };

/*
 * Runs the inputs on a source: raw attention, or the rounds from x0 with
 * the options' trace (--trace, --until, --save-rounds, --attn-round; figures
 * as `figures` asks: FIGURES_TRACE, FIGURES_PER_NODE). The trace CSV and round files go to paths given in
 * trace_tmp and rounds_dir (NULL: none).
 */
int compute(result_t *r, const inputs_t *in, const source_t *src, const run_opts_t *o,
            int figures, const char *trace_tmp, ag_error_t *err);
void result_free(result_t *r);

/* ---- outputs: written under a temporary name, renamed when all succeeded ---- */

/*
 * An output file. A regular file (or a new name; symlinks followed) is written
 * to a temporary beside it and renamed onto it by out_commit; a device, FIFO or
 * socket is written in place (`direct`); `-` (or a name for the same file as
 * standard output) is standard output: written to a temporary in $TMPDIR (or
 * /tmp) whose bytes out_commit copies to descriptor 1 (so `>> log` appends and
 * a pipe or socket works), and then the report lines go to stderr. Writers open
 * `file.path`, which names the temporary's open descriptor, not its name.
 */
typedef struct {
    const char *target;   /* the user's path, or NULL when unused */
    const char *option;   /* "--out": names it in messages */
    const char *exts;     /* accepted extensions, "npy" or "csv,npy"; NULL: any */
    int direct;           /* written in place (or standard output): never renamed over */
    int is_stdout;
    ag_i_file_t file;     /* writers write file.path: /dev/fd/<fd> (the temporary, by
                             its open descriptor, never by name), or the direct file */
} out_file_t;

/* Fills o without touching the disk. */
void out_init(out_file_t *o, const char *target, const char *option, const char *exts);
/*
 * Opens the outputs (those with a target): refuses, as usage errors (*usage
 * set), an extension not in exts and two outputs naming the same file, all
 * before creating anything; then creates the temporaries. On failure nothing
 * is left behind.
 */
int out_open_all(out_file_t *outs, int n, int *usage, ag_error_t *err);
/* out_init and out_open_all for one output. */
int out_open(out_file_t *o, const char *target, const char *option, const char *exts,
             ag_error_t *err);
/*
 * Puts the outputs in place: sets every temporary's mode (nothing is replaced
 * if that fails), renames each onto its file, then copies standard output's.
 * A rename that fails leaves the outputs before it replaced. Nothing to do
 * for a direct output.
 */
int out_commit_all(out_file_t *outs, int n, ag_error_t *err);
/* out_commit_all for one output. */
int out_commit(out_file_t *o, ag_error_t *err);
/* Removes the temporary file; the target itself is never touched. */
void out_abort(out_file_t *o);
/* Puts the user's names back into an error message that names a temporary
   (or standard output's descriptor). Call before out_abort. */
void out_name_errors(const out_file_t *outs, int n, ag_error_t *err);
/* The extension of the target's name ("" when none). */
const char *out_extension(const out_file_t *o);
/* Writes text (a picture, a table) to an opened output's path; the caller
   commits it. */
int out_write_text(out_file_t *o, const char *text, ag_error_t *err);
/* "wrote TARGET" on stdout for each output given, in order. */
void out_say_written(const out_file_t *outs, int n);
/* After a failure: err names the user's files (out_name_errors), and every
   output is removed (out_abort). */
void out_abort_all(out_file_t *outs, int n, ag_error_t *err);

/* --trace FILE.svg: the picture of the per-round figures (desc: the graph's). */
int write_trace_svg(out_file_t *out, const trace_row_t *trace, int done, const char *desc,
                    ag_error_t *err);

/* ---- what defines a trained model beyond its arrays (model_args.c) ---- */

/* The model's options as command-line text, "--heads 2 --rounds 3 --norm layer":
   what train --save writes to DIR/model.args. Returns the length the whole
   text needs (cap or more: it was cut). */
size_t model_args(char *buf, size_t cap, const run_opts_t *o, int64_t heads, int64_t rounds);
/* When the command gives none of the model's options, takes them from its
   --weights DIR/model.args (if any); 0, or EXIT_USAGE with the message printed. */
int model_args_defaults(run_opts_t *o, const char *cmd);
/* Refuses a --weights DIR whose model.args differs from the command's own
   options (AG_OK when there is no model.args). */
int model_args_check(const run_opts_t *o, int64_t heads, int64_t rounds, ag_error_t *err);

/* Reads the model file o->model.path into o->model, applying its options to o
   (refusing one the command gave too, and the options its layer lines
   replace: --heads, --rounds, ...); 0, or EXIT_USAGE with the message printed,
   naming the file and line. */
int model_file_read(run_opts_t *o, const char *path, const char *cmd);
/* The spec's value of model-wide key k into o, as the option of the same name
   sets it, marked given (a model file's keys, and model.args'). */
void model_key_apply(run_opts_t *o, const ag_model_spec_t *spec, ag_model_key_t k);
/* Refuses (naming the line) a layer that cannot be from input width D: a
   residual where the width changes; and, for `classes` > 0 with readout none, a
   last layer that does not write that many. */
int model_layers_check(const run_opts_t *o, int64_t D, int64_t classes, ag_error_t *err);
/* The layers o->model describes, from input width D: read from o->weights
   (DIR, or DIR/round-k/ for several layers; every shape checked) or drawn
   from o->seed. */
int model_file_layers(ag_weights_t **layers, const run_opts_t *o, int64_t D, int64_t edge_dim,
                      ag_error_t *err);
/* The text of o's model file (what train --save writes to DIR/model.txt), with
   train's dropout, attention and residual dropout when > 0; returns the length
   the whole text needs. */
size_t model_file_text(char *buf, size_t cap, const run_opts_t *o, const float dropout[3]);

/* Reads the whole file (or standard input for -) into *buf (malloc'ed,
   NUL-terminated; *len bytes), refusing one larger than max bytes
   (csv_table.c). */
int read_all(const char *path, char **buf, size_t *len, long max, ag_error_t *err);

/* ---- folders of outputs: the library's (base/folder.c) ---- */

typedef ag_i_folder_item_t folder_item_t;

/* Refuses, before any work, a folder that cannot be written or created. */
static inline int folder_check(const char *dir, const char *option, ag_error_t *err)
{
    return ag_i_folder_check(dir, option, err);
}
/* Writes items into dir whole or not at all, its temporaries removed when a
   signal ends the tool (the tool's choice, as for its single files). */
static inline int folder_write(const char *dir, const char *option, const folder_item_t *items,
                               int n, ag_error_t *err)
{
    ag_i_file_cleanup_on_signals();
    return ag_i_folder_write(dir, option, items, n, err);
}

/* ---- class predictions from a linear readout (predict.c) ---- */

/* run --predict: the classes by the readout of the folder weights (ag_i_readout_read's;
   readout 0: a model file's `readout none`, the argmax of X) of the final states
   X [N, D], written to path as int64 [N]. */
int write_predictions(const char *path, const char *weights, int readout, const float *X,
                      int64_t N, int64_t D, ag_error_t *err);

/* ---- reports ---- */

/* Attention weights of the reported round for destinations lo..hi-1. */
int result_weights(const result_t *r, const inputs_t *in, const source_t *s, int64_t lo,
                   int64_t hi, float *W, ag_error_t *err);

/* What a header of weights in percent adds for r's score: sigmoid's are not
   normalised over a node's sources ("" for the others). */
const char *weights_note(const result_t *r);

/* The readable summary: for the first `show` nodes, the top sources they
   attend to (mean over heads). */
int report_summary(FILE *f, const result_t *r, const inputs_t *in, const source_t *s,
                   int64_t show, ag_error_t *err);

/* --attn: refuses (AG_ELIMIT) exports beyond --max-edges weights on a graph of
   E messages, before the work. */
int attn_size_check(const run_opts_t *o, int64_t E, ag_error_t *err);

/*
 * Per-edge attention of the reported round, in the graph's edge order, to
 * out->path (the caller commits it) in the format of the target's extension:
 * .csv (src,dst,src_label,dst_label,head,weight), .npy [E, H], or .graphml
 * (the graph with edge attributes attn_h0.. and attn_mean); CSV for an output
 * without one (standard output, a FIFO, a device). Self-loops added by
 * --self-loops on or replace come after the graph's edges: the CSV then has a
 * last column `added` (1 on them), the GraphML an edge attribute `added`, the
 * .npy their rows last.
 */
int report_attention(const out_file_t *out, const result_t *r,
                     const inputs_t *in, const source_t *s, int64_t max_export,
                     ag_error_t *err);

/* Writes s as a CSV field, quoted when it holds a comma, quote or line break. */
void csv_field(FILE *f, const char *s);

/* ---- commands ---- */

/* Parses `attngraph run`'s options into o: -1 to go on, else the exit status
   (help printed, or a usage message). attngraph-mpi run reads the same. */
int run_parse(run_opts_t *o, int argc, char **argv);
/* run's output files, in one order for attngraph run and attngraph-mpi run
   (the order of their "wrote" lines): */
enum { RUN_OUT, RUN_MESSAGES, RUN_HEAD_MESSAGES, RUN_ATTN, RUN_TRACE = RUN_ATTN + MAX_ATTN,
       RUN_PREDICT, RUN_N_OUTS };
/* Names them from o (out_init; those not given stay unused). */
void run_outputs_init(out_file_t outs[RUN_N_OUTS], const run_opts_t *o);
/* Is --trace a picture (FILE.svg, drawn at the end) rather than a CSV written as
   the rounds run? */
int run_trace_is_svg(const run_opts_t *o, const out_file_t *outs);

/* What differs between a run on one process (attngraph run) and on several
   (attngraph-mpi run); the rest, the outputs opened first, committed, said or
   removed, is run_with's, written once. Each step returns its rc agreed by
   every process, so that all of them go on or stop together. */
typedef struct run_backend run_backend_t;
struct run_backend {
    int rank;   /* 0 writes the files and prints; the others only compute */
    /* rc agreed by every process, and *usage rank 0's (NULL: one process) */
    int (*agree)(run_backend_t *b, int rc, int *usage, ag_error_t *err);
    /* the graph (or this process's part) and the inputs */
    int (*load)(run_backend_t *b, int *usage, ag_error_t *err);
    /* the rounds, or one round of raw attention, and their figures (a --trace
       CSV into outs[RUN_TRACE] as they run) */
    int (*compute)(run_backend_t *b, out_file_t *outs, ag_error_t *err);
    /* the other outputs into their opened files */
    int (*write)(run_backend_t *b, out_file_t *outs, ag_error_t *err);
    /* the report, once the files are committed (not with --quiet) */
    int (*report)(run_backend_t *b, ag_error_t *err);
    void *ctx;
};
/* attngraph run's work on backend b, the options parsed; the exit status. */
int run_with(const run_opts_t *o, run_backend_t *b);

int cmd_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_pattern(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_grad(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_draw(int argc, char **argv);
int cmd_draw_rounds(int argc, char **argv);
int cmd_draw_train(int argc, char **argv);

/* ---- pictures (draw.c) ---- */

/* The training curve of a `train --log` CSV held in memory (text [len]); name
   stands for the file in messages. */
int draw_train_csv(const char *text, size_t len, const char *name, const char *title,
                   char **svg, ag_error_t *err);

/* libgomp's spin at a barrier in the tools, in pauses (cli/waits.c). */
#define CLI_SPINCOUNT "10000"
/* First thing in main: unless the environment sets OMP_WAIT_POLICY or
   GOMP_SPINCOUNT, restarts the tool with GOMP_SPINCOUNT=CLI_SPINCOUNT;
   returns only when no restart was needed, or it failed (err says why: a
   warning). */
int cli_short_waits(char **argv, ag_error_t *err);
/* How the threads of this run wait, in words (--version). */
const char *cli_waits(void);

#endif
