/* The attngraph command-line tool: shared declarations. */
#ifndef AG_CLI_H
#define AG_CLI_H

#include <getopt.h>
#include <stdio.h>

#include "attngraph.h"
#include "source.h"

#define EXIT_BAD_INPUT 1
#define EXIT_USAGE 2
#define SUMMARY_NODES 20
#define DEFAULT_DIM 16

/* ---- options shared by run, compare and inspect ---- */

typedef struct {
    source_opts_t src;                 /* connectivity (run: one; compare: see compare.c) */
    const char *q, *k, *v;             /* raw attention mode */
    const char *features, *weights;    /* rounds mode */
    int64_t dim, head_dim, rounds, heads, threads;
    int rounds_given;
    uint64_t seed;
    /* scores */
    ag_score_t score;
    const char *edge_bias;             /* numeric edge attribute added to the scores */
    /* rounds */
    int no_residual, per_node, posenc;
    ag_norm_t norm;
    const char *trace, *save_rounds;
    double until;                      /* > 0: stop when the relative change falls below */
    /* outputs */
    const char *out, *attn, *messages, *head_messages;
    int64_t attn_round;                /* 0: the last round */
    int64_t max_export;
    int quiet;
    int progress;                      /* -1: on a terminal; 0: --no-progress; 1: --progress */
} run_opts_t;

/* Option codes for getopt_long shared by the commands. */
enum {
    OPT_Q = 256, OPT_K, OPT_V, OPT_FEATURES, OPT_DIM, OPT_HEAD_DIM, OPT_WEIGHTS, OPT_ROUNDS,
    OPT_HEADS, OPT_SEED, OPT_THREADS, OPT_FORMAT, OPT_MAX_NODES, OPT_OUT, OPT_ATTN, OPT_QUIET,
    OPT_HELP, OPT_PATTERN, OPT_NODES, OPT_TOKENS, OPT_LABELS_FILE, OPT_SELF_LOOPS, OPT_GRAPH,
    OPT_CSV, OPT_PER_NODE, OPT_LABELS, OPT_MAX_EDGES, OPT_SCORE, OPT_BETA, OPT_SOFTCAP,
    OPT_SLOPE, OPT_SIGMOID_BIAS, OPT_EDGE_BIAS, OPT_ALIBI, OPT_NO_RESIDUAL, OPT_NORM,
    OPT_POSENC, OPT_PER_NODE_WEIGHTS, OPT_TRACE, OPT_UNTIL, OPT_SAVE_ROUNDS, OPT_ATTN_ROUND,
    OPT_MESSAGES, OPT_WHO, OPT_TO, OPT_TOP, OPT_CSR, OPT_REPS, OPT_WARMUP, OPT_JSON, OPT_KERNEL,
    OPT_HEAD_MESSAGES, OPT_PROGRESS, OPT_NO_PROGRESS
};

/* getopt_long entries of the input options (run, compare, inspect), ending {0}. */
extern const struct option input_options[];
#define INPUT_OPTIONS_HELP                                                                  \
    "Raw attention (one round on given messages; the output is M [N, H*d]):\n"            \
    "  --q Q.npy --k K.npy --v V.npy   queries, keys, values [N, H*d]\n"                  \
    "\n"                                                                                   \
    "Rounds with projections (the output is the final X [N, D]):\n"                       \
    "  --features X.npy    node states [N, D]\n"                                           \
    "  --dim D             seeded random features of width D instead (default 16)\n"     \
    "  --weights DIR       DIR/wq.npy wk.npy wv.npy [H*d, D] (or [N, H*d, D]: per node),\n"\
    "                      wo.npy [D, H*d]; optional ln_weight.npy ln_bias.npy [D],\n"    \
    "                      attn_src.npy attn_dst.npy attn.npy [H, d]; or DIR/round-1/,\n" \
    "                      round-2/, ...: one layer per round\n"                          \
    "                      (default: seeded random, std 1/sqrt(fan_in))\n"               \
    "  --head-dim d        head width for random weights (default D/H)\n"                 \
    "  --per-node-weights  random weights: each node its own Wq, Wk, Wv\n"               \
    "  --rounds R          message rounds (default 1, or one per round-N/ folder)\n"     \
    "  --until TOL         stop once the relative change falls below TOL\n"              \
    "  --no-residual       X <- M Wo^T instead of X + M Wo^T\n"                           \
    "  --norm layer|none   pre-norm LayerNorm before the projections (default none)\n"   \
    "  --posenc sinusoidal|none   add sinusoidal positions to the features\n"            \
    "\n"                                                                                   \
    "Scores:\n"                                                                            \
    "  --score KIND        scaled-dot (default), dot, cosine, additive, gatv2, sigmoid,\n"\
    "                      linear\n"                                                      \
    "  --beta B            inverse temperature of softmax scores (default 1)\n"          \
    "  --softcap C         s <- C tanh(s / C)\n"                                          \
    "  --slope S           LeakyReLU slope of additive and gatv2 (default 0.2)\n"        \
    "  --sigmoid-bias B    sigmoid: a = sigmoid(s + B) (default -ln(in-degree))\n"       \
    "  --edge-bias ATTR    add a numeric edge attribute of the graph file to the scores\n"\
    "  --alibi             add ALiBi's per-head slope times (j - i)\n"                   \
    "\n"                                                                                   \
    "Common:\n"                                                                            \
    "  --heads H           attention heads (default 1)\n"                                  \
    "  --seed S            seed for random features and weights (default 1)\n"            \
    "  --threads T         OpenMP and OpenBLAS threads (default: all cores)\n"            \
    "  --format F          graph file format: edgelist, ncol, lgl, graphml, gml, pajek\n"\
    "                      (default: from the extension)\n"                               \
    "  --max-nodes N       refuse graphs with more nodes (default 20000000)\n"           \
    "  --nodes N           pattern size (default: from --tokens or the pattern)\n"       \
    "  --tokens \"a b c\"    pattern nodes and their labels at once\n"                   \
    "  --labels-file F     pattern labels, one a line\n"                                  \
    "  --self-loops on|off|keep   force or remove self edges of patterns (default keep)\n"

/* Defaults for run_opts_t. */
void run_opts_init(run_opts_t *o);
/* Handles an input option: 0 done, 1 not an input option, EXIT_USAGE bad value
   (message printed). */
int input_option(run_opts_t *o, int code, const char *arg, const char *cmd);
/* Checks option combinations; 0 or EXIT_USAGE (message printed). */
int input_options_check(const run_opts_t *o, const char *cmd);
/* Takes GRAPH from argv[optind] if present, then checks that exactly one of
   GRAPH, --pattern and --csr was given; 0 or EXIT_USAGE (message printed). */
int source_args(run_opts_t *o, int argc, char **argv, const char *cmd);
/* Fills longopts with input_options followed by own (both ending {0}). */
void merge_options(struct option *longopts, size_t cap, const struct option *own);
/* Prints "attngraph CMD: MESSAGE" and the help hint; returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...);
/* A command's exit status for rc: 0 on success; else the error on stderr, as a
   usage error (exit 2) when `usage`, or as bad input (exit 1). */
int finish(const char *cmd, int rc, int usage, const ag_error_t *err);
/* getopt_long's complaint about argv[optind - 1] as a usage error. */
int getopt_error(const char *cmd, int c, char **argv);
/* Sets OpenMP and OpenBLAS threads (0: all cores); returns the count in use. */
int set_threads(int64_t threads);

/* ---- inputs and compute ---- */

typedef struct {
    int raw;                  /* 1: q, k, v given; 0: rounds on x0 */
    ag_matrix_t q, k, v, x0;
    ag_weights_t *layers;     /* [n_layers] */
    int n_layers;
    float *vectors;           /* raw mode: seeded attention vectors, 3 x [H, d] */
    ag_score_t score;         /* the options' score */
    int64_t N, H, d, rounds;
} inputs_t;

/* Loads or draws the inputs for N nodes. */
int inputs_load(inputs_t *in, const run_opts_t *o, int64_t N, ag_error_t *err);
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

typedef struct {
    const char *target;   /* the user's path, or NULL when unused */
    char tmp[4096];       /* where it is written meanwhile */
} out_file_t;

/* Creates the temporary file beside target (so the rename stays on one disk). */
int out_open(out_file_t *o, const char *target, ag_error_t *err);
/* Renames the temporary file onto the target. */
int out_commit(out_file_t *o, ag_error_t *err);
/* Removes the temporary file and any stale target: a failed run leaves nothing. */
void out_abort(out_file_t *o);

/* ---- reports ---- */

/* Attention weights of the reported round for destinations lo..hi-1. */
int result_weights(const result_t *r, const inputs_t *in, const source_t *s, int64_t lo,
                   int64_t hi, float *W, ag_error_t *err);

/* The readable summary: for the first `show` nodes, the top sources they
   attend to (mean over heads). */
int report_summary(FILE *f, const result_t *r, const inputs_t *in, const source_t *s,
                   int64_t show, ag_error_t *err);

/*
 * Per-edge attention of the reported round, in the graph's edge order, to
 * path (written as is; the caller handles temporaries) in the format of
 * `name`'s extension: .csv (src,dst,src_label,dst_label,head,weight), .npy
 * [E, H], or .graphml (the graph with edge attributes attn_h0.. and attn_mean).
 */
int report_attention(const char *path, const char *name, const result_t *r,
                     const inputs_t *in, const source_t *s, int64_t max_export,
                     ag_error_t *err);

/* Writes s as a CSV field, quoted when it holds a comma, quote or line break. */
void csv_field(FILE *f, const char *s);

/* ---- commands ---- */

int cmd_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_pattern(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
