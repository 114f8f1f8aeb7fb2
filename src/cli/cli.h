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

/* ---- options shared by run and compare ---- */

typedef struct {
    source_opts_t src;                 /* connectivity (run: one; compare: see compare.c) */
    const char *q, *k, *v;             /* raw attention mode */
    const char *features, *weights;    /* rounds mode */
    int64_t dim, head_dim, rounds, heads, threads;
    uint64_t seed;
    const char *out, *attn;
    int quiet;
} run_opts_t;

/* Option codes for getopt_long shared by the commands. */
enum {
    OPT_Q = 256, OPT_K, OPT_V, OPT_FEATURES, OPT_DIM, OPT_HEAD_DIM, OPT_WEIGHTS, OPT_ROUNDS,
    OPT_HEADS, OPT_SEED, OPT_THREADS, OPT_FORMAT, OPT_MAX_NODES, OPT_OUT, OPT_ATTN, OPT_QUIET,
    OPT_HELP, OPT_PATTERN, OPT_NODES, OPT_TOKENS, OPT_LABELS_FILE, OPT_SELF_LOOPS, OPT_GRAPH,
    OPT_CSV, OPT_PER_NODE, OPT_LABELS, OPT_MAX_EDGES
};

/* getopt_long entries of the input options (run and compare), ending {0}. */
extern const struct option input_options[];
#define INPUT_OPTIONS_HELP                                                                  \
    "Raw attention (one round on given messages; the output is M [N, H*d]):\n"            \
    "  --q Q.npy --k K.npy --v V.npy   queries, keys, values [N, H*d]\n"                  \
    "\n"                                                                                   \
    "Rounds with projections (the output is the final X [N, D]):\n"                       \
    "  --features X.npy    node states [N, D]\n"                                           \
    "  --dim D             seeded random features of width D instead (default 16)\n"     \
    "  --weights DIR       DIR/wq.npy wk.npy wv.npy [H*d, D], wo.npy [D, H*d]\n"          \
    "                      (default: seeded random, std 1/sqrt(fan_in))\n"               \
    "  --head-dim d        head width for random weights (default D/H)\n"                 \
    "  --rounds R          message rounds (default 1)\n"                                   \
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
/* Prints "attngraph CMD: MESSAGE" and the help hint; returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...);
/* getopt_long's complaint about argv[optind - 1] as a usage error. */
int getopt_error(const char *cmd, int c, char **argv);
/* Sets OpenMP and OpenBLAS threads (0: all cores); returns the count in use. */
int set_threads(int64_t threads);

/* ---- inputs and compute ---- */

typedef struct {
    int raw;                  /* 1: q, k, v given; 0: rounds on x0 */
    ag_matrix_t q, k, v, x0;
    ag_weights_t w;
    int64_t N, H, d;
} inputs_t;

/* Loads or draws the inputs for N nodes. */
int inputs_load(inputs_t *in, const run_opts_t *o, int64_t N, ag_error_t *err);
void inputs_free(inputs_t *in);

typedef struct {
    float *y;                 /* the output [N, cols]: M (raw) or the final X */
    int64_t cols;
    const float *Q, *K;       /* the last round's queries and keys (NULL after 0 rounds) */
    ag_workspace_t ws;
} result_t;

/* Runs the inputs on nb: raw attention, or `rounds` rounds from x0. */
int compute(result_t *r, const inputs_t *in, const ag_nbhd_t *nb, int64_t rounds,
            ag_error_t *err);
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

/* The readable summary: for the first `show` nodes, the top sources they
   attend to (mean over heads). Q, K: [N, H*d] of the round to report. */
int report_summary(FILE *f, const ag_nbhd_t *nb, const ag_labels_t *labels, const float *Q,
                   const float *K, int64_t H, int64_t d, int64_t show, ag_error_t *err);

/* Per-edge attention as CSV: src,dst,src_label,dst_label,head,weight in the
   graph's edge order. */
int report_attention_csv(const char *path, const ag_nbhd_t *nb, const ag_labels_t *labels,
                         const float *Q, const float *K, int64_t H, int64_t d, ag_error_t *err);

/* Writes s as a CSV field, quoted when it holds a comma, quote or line break. */
void csv_field(FILE *f, const char *s);

/* ---- commands ---- */

int cmd_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_pattern(int argc, char **argv);

#endif
