/* Options shared by run, compare and inspect, and loading the inputs they name. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "base/base.h"
#include "model/model.h"

const opt_def_t input_raw_options[] = {
    OPT_TEXT("Raw attention (one round on given messages; the output is M [N, H*d]):\n"),
    OPT_VALUE("q", OPT_Q, "  --q Q.npy --k K.npy --v V.npy   queries, keys, values [N, H*d]\n"),
    OPT_VALUE("k", OPT_K, NULL),
    OPT_VALUE("v", OPT_V, NULL),
    OPT_TEXT("\n"),
    OPT_DEF_END,
};

const opt_def_t input_features_options[] = {
    OPT_TEXT("Rounds with projections (the output is the final X [N, D]):\n"),
    OPT_VALUE("features", OPT_FEATURES, "  --features X.npy    node states [N, D]\n"),
    OPT_VALUE("dim", OPT_DIM,
              "  --dim D             seeded random features of width D instead (default 16)\n"),
    OPT_DEF_END,
};

/* The options that define a model (train lists them as its own). */
const opt_def_t input_model_options[] = {
    OPT_VALUE("weights", OPT_WEIGHTS,
              "  --weights DIR       DIR/wq.npy wk.npy wv.npy [H*d, D] (or [N, H*d, D]: per node),\n"
              "                      wo.npy [D, H*d]; optional ln_weight.npy ln_bias.npy [D],\n"
              "                      attn_src.npy attn_dst.npy attn.npy [H, d]; or DIR/round-1/,\n"
              "                      round-2/, ...: one layer per round\n"
              "                      (default: seeded random, std 1/sqrt(fan_in)); a model\n"
              "                      file DIR/model.txt (train --save writes it) says its layers\n"),
    OPT_VALUE("model", OPT_MODEL,
              "  --model FILE        run, train: layers of their own widths, heads, outputs,\n"
              "                      biases, activations and feed-forward sublayers, described\n"
              "                      in FILE (and the score, norm, dropout, ...:\n"
              "                      docs/model-file.md)\n"),
    OPT_VALUE("edge-features", OPT_EDGE_FEATURES,
              "  --edge-features E.npy|ATTR,ATTR   run, train: edge features [edges, F] in the\n"
              "                      graph's edge order, or a graph file's numeric edge\n"
              "                      attributes; read by a model file's edges=yes layers\n"
              "                      (one process: attngraph-mpi refuses them)\n"),
    OPT_VALUE("head-dim", OPT_HEAD_DIM,
              "  --head-dim d        head width for random weights (default D/H)\n"),
    OPT_FLAG("per-node-weights", OPT_PER_NODE_WEIGHTS,
             "  --per-node-weights  random weights: each node its own Wq, Wk, Wv\n"),
    OPT_VALUE("rounds", OPT_ROUNDS,
              "  --rounds R          message rounds (default 1, or one per round-N/ folder)\n"),
    OPT_FLAG("no-residual", OPT_NO_RESIDUAL,
             "  --no-residual       X <- M Wo^T instead of X + M Wo^T\n"),
    OPT_VALUE("norm", OPT_NORM,
              "  --norm layer|none   pre-norm LayerNorm before the projections (default none)\n"),
    OPT_VALUE("posenc", OPT_POSENC,
              "  --posenc sinusoidal|none   add sinusoidal positions to the features\n"),
    OPT_DEF_END,
};

const opt_def_t input_until_options[] = {
    OPT_VALUE("until", OPT_UNTIL,
              "  --until TOL         stop once the relative change falls below TOL\n"),
    OPT_DEF_END,
};

const opt_def_t input_common_options[] = {
    OPT_TEXT("\n"
             "Scores:\n"),
    OPT_VALUE("score", OPT_SCORE,
              "  --score KIND        scaled-dot (default), dot, cosine, additive, gatv2, sigmoid,\n"
              "                      linear\n"),
    OPT_VALUE("beta", OPT_BETA,
              "  --beta B            inverse temperature of softmax scores (default 1)\n"),
    OPT_VALUE("softcap", OPT_SOFTCAP, "  --softcap C         s <- C tanh(s / C)\n"),
    OPT_VALUE("slope", OPT_SLOPE,
              "  --slope S           LeakyReLU slope of additive and gatv2 (default 0.2)\n"),
    OPT_VALUE("sigmoid-bias", OPT_SIGMOID_BIAS,
              "  --sigmoid-bias B    sigmoid: a = sigmoid(s + B) (default -ln(in-degree))\n"),
    OPT_VALUE("edge-bias", OPT_EDGE_BIAS,
              "  --edge-bias ATTR    add a numeric edge attribute of the graph file to the scores\n"),
    OPT_FLAG("alibi", OPT_ALIBI,
             "  --alibi             add ALiBi's per-head slope times (j - i)\n"),
    OPT_TEXT("\n"
             "Common:\n"),
    OPT_VALUE("heads", OPT_HEADS, "  --heads H           attention heads (default 1)\n"),
    OPT_VALUE("seed", OPT_SEED,
              "  --seed S            seed for random features and weights (default 1)\n"),
    OPT_VALUE("threads", OPT_THREADS,
              "  --threads T         threads (default: all cores, fewer while others run)\n"),
    OPT_VALUE("format", OPT_FORMAT,
              "  --format F          graph file format: edgelist, ncol, lgl, graphml, gml, pajek\n"
              "                      (default: from the extension)\n"),
    OPT_FLAG("undirected", OPT_UNDIRECTED,
             "  --undirected        edge list, NCOL, LGL: each line is a message both ways\n"),
    OPT_FLAG("directed", OPT_DIRECTED,
             "  --directed          ... one way, from the first node to the second (default)\n"),
    OPT_VALUE("max-nodes", OPT_MAX_NODES,
              "  --max-nodes N       refuse graphs with more nodes (default 20000000)\n"),
    OPT_VALUE("max-memory", OPT_MAX_MEMORY,
              "  --max-memory SIZE   refuse a run that needs more memory, e.g. 8G or 500M (default:\n"
              "                      the memory available when it starts)\n"),
    OPT_VALUE("nodes", OPT_NODES,
              "  --nodes N           pattern size (default: from --tokens or the pattern)\n"),
    OPT_VALUE("tokens", OPT_TOKENS, "  --tokens \"a b c\"    pattern nodes and their labels at once\n"),
    OPT_VALUE("labels-file", OPT_LABELS_FILE,
              "  --labels-file F     pattern labels, one a line\n"),
    OPT_VALUE("self-loops", OPT_SELF_LOOPS,
              "  --self-loops MODE   keep (default): as the graph, pattern or CSR says; off: no\n"
              "                      node attends to itself; on: a loop for each node without\n"
              "                      one (existing loops kept); replace: every loop removed, then\n"
              "                      one per node (PyG's GATConv); added loops come last in\n"
              "                      per-edge exports, marked added\n"),
    OPT_DEF_END,
};

const opt_def_t input_source_options[] = {
    OPT_VALUE("pattern", OPT_PATTERN,
              "  --pattern SPEC      run on a pattern instead of a graph file\n"),
    OPT_VALUE("csr", OPT_CSR,
              "  --csr IP.npy,IX.npy run on an in-neighbour CSR (see 'attngraph run --help')\n"),
    OPT_DEF_END,
};

const opt_def_t input_options[] = {
    OPT_TABLE(input_raw_options),   OPT_TABLE(input_features_options),
    OPT_TABLE(input_model_options), OPT_TABLE(input_until_options),
    OPT_TABLE(input_common_options), OPT_DEF_END,
};

const opt_def_t quiet_refused[] = {OPT_FLAG("quiet", OPT_QUIET, NULL), OPT_DEF_END};

/* The entry of table (tables within it searched too) named name, or of code
   when name is NULL; NULL when none is. */
static const opt_def_t *find(const opt_def_t *table, const char *name, int code)
{
    for (const opt_def_t *e = table; e->name || e->help || e->table; e++) {
        const opt_def_t *hit = e->table ? find(e->table, name, code)
                               : !e->name ? NULL
                               : name     ? (strcmp(e->name, name) == 0 ? e : NULL)
                                          : (e->code == code ? e : NULL);
        if (hit)
            return hit;
    }
    return NULL;
}

const opt_def_t *input_option_named(const char *name)
{
    const opt_def_t *e = find(input_options, name, 0);
    return e ? e : find(quiet_refused, name, 0);
}

const opt_def_t *input_option_coded(int code)
{
    const opt_def_t *e = find(input_options, NULL, code);
    return e ? e : find(quiet_refused, NULL, code);
}

void run_opts_init(run_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->rounds = 1;
    o->heads = 1;
    o->seed = 1;
    o->src.max_nodes = AG_DEFAULT_MAX_NODES;
    o->max_export = 50000000;
    o->progress = -1;
    ag_score_init(&o->score, AG_SCORE_SCALED_DOT);
}

/* Handles the score and round options; 1 when the code is not one of them. */
static int model_option(run_opts_t *o, int code, const char *arg, const char *cmd)
{
    double x;
    switch (code) {
    case OPT_SCORE:
        if (ag_score_kind_parse(arg, &o->score.kind) == 0)
            return 0;
        return usage_error(cmd, "--score '%s': expected scaled-dot, dot, cosine, additive, "
                           "gatv2, sigmoid or linear", arg);
    case OPT_BETA:
        if (opt_real(&x, cmd, "beta", arg, 0, 0))
            return EXIT_USAGE;
        o->score.beta = (float)x;
        return 0;
    case OPT_SOFTCAP:
        if (opt_real(&x, cmd, "softcap", arg, 0, 1))
            return EXIT_USAGE;
        o->score.softcap = (float)x;
        return 0;
    case OPT_SLOPE:
        if (opt_real(&x, cmd, "slope", arg, -1e30, 0))
            return EXIT_USAGE;
        o->score.slope = (float)x;
        return 0;
    case OPT_SIGMOID_BIAS:
        if (opt_real(&x, cmd, "sigmoid-bias", arg, -1e30, 0))
            return EXIT_USAGE;
        o->score.has_sigmoid_bias = 1;
        o->score.sigmoid_bias = (float)x;
        return 0;
    case OPT_EDGE_BIAS: o->edge_bias = arg; return 0;
    case OPT_ALIBI: o->score.alibi = 1; return 0;
    case OPT_NO_RESIDUAL: o->no_residual = 1; return 0;
    case OPT_PER_NODE_WEIGHTS: o->per_node = 1; return 0;
    case OPT_NORM:
        if (strcmp(arg, "layer") != 0 && strcmp(arg, "none") != 0)
            return usage_error(cmd, "--norm '%s': expected layer or none", arg);
        o->norm = arg[0] == 'l' ? AG_NORM_LAYER : AG_NORM_NONE;
        return 0;
    case OPT_POSENC:
        if (strcmp(arg, "sinusoidal") != 0 && strcmp(arg, "none") != 0)
            return usage_error(cmd, "--posenc '%s': expected sinusoidal or none", arg);
        o->posenc = arg[0] == 's';
        return 0;
    case OPT_UNTIL:
        return opt_real(&o->until, cmd, "until", arg, 0, 1);
    default:
        return 1;
    }
}

int input_option(run_opts_t *o, int code, const char *arg, const char *cmd)
{
    int64_t v;
    if (code >= OPT_Q && code < OPT_END)
        o->given[code - OPT_Q] = 1;
    switch (code) {
    case OPT_Q: o->q = arg; return 0;
    case OPT_K: o->k = arg; return 0;
    case OPT_V: o->v = arg; return 0;
    case OPT_FEATURES: o->features = arg; return 0;
    case OPT_WEIGHTS: o->weights = arg; return 0;
    case OPT_MODEL: o->model.path = arg; return 0;
    case OPT_EDGE_FEATURES: o->edge_features = arg; return 0;
    case OPT_FORMAT: o->src.format = arg; return 0;
    case OPT_TOKENS: o->src.tokens = arg; return 0;
    case OPT_LABELS_FILE: o->src.labels_file = arg; return 0;
    case OPT_QUIET: o->quiet = 1; return 0;
    case OPT_DIRECTED: o->src.direction = AG_EDGES_DIRECTED; return 0;
    case OPT_UNDIRECTED: o->src.direction = AG_EDGES_UNDIRECTED; return 0;
    case OPT_DIM: return opt_int(&o->dim, cmd, "dim", arg, 1, 1 << 20);
    case OPT_HEAD_DIM: return opt_int(&o->head_dim, cmd, "head-dim", arg, 1, 1 << 20);
    case OPT_ROUNDS: return opt_int(&o->rounds, cmd, "rounds", arg, 1, 1000000);
    case OPT_HEADS: return opt_int(&o->heads, cmd, "heads", arg, 1, 4096);
    case OPT_THREADS: return opt_int(&o->threads, cmd, "threads", arg, 1, 1024);
    case OPT_NODES: o->nodes_text = arg; return 0;   /* checked against --max-nodes later */
    case OPT_MAX_NODES:
        return opt_int(&o->src.max_nodes, cmd, "max-nodes", arg, 1, INT64_MAX / 64);
    case OPT_MAX_MEMORY: {
        /* bytes, or a number with K, M, G or T (powers of 1000, as the messages) */
        char *end;
        errno = 0;
        const double x = strtod(arg, &end);
        const char *units = "KMGT", *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
        const double bytes = x * (u ? pow(1000.0, (double)(u - units + 1)) : 1.0);
        if (errno || end == arg || (*end && (!u || end[1])) || !(bytes >= 1) || bytes > 9e18)
            return usage_error(cmd, "--max-memory '%s' is not a size: bytes, or a number with K, "
                               "M, G or T (8G, 500M)", arg);
        ag_set_memory_budget((int64_t)bytes);
        return 0;
    }
    case OPT_SEED:
        if (opt_int(&v, cmd, "seed", arg, 0, INT64_MAX))
            return EXIT_USAGE;
        o->seed = (uint64_t)v;
        return 0;
    case OPT_SELF_LOOPS:
        if (ag_self_loops_parse(arg, &o->src.self) == 0)
            return 0;
        return usage_error(cmd, "--self-loops '%s': expected on, off, keep or replace", arg);
    default:
        return model_option(o, code, arg, cmd);
    }
}

/* Is a score kind normalised by a softmax (beta and softcap apply)? */
static int softmax_kind(ag_score_kind_t kind)
{
    return kind != AG_SCORE_SIGMOID && kind != AG_SCORE_LINEAR;
}

/* How many of o's inputs are read from standard input ("-"). */
static int stdin_inputs(const run_opts_t *o)
{
    const char *paths[] = {o->src.graph, o->q, o->k, o->v, o->features};
    int n = 0;
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++)
        n += paths[k] && strcmp(paths[k], "-") == 0;
    return n + csr_stdin_count(o->src.csr);
}

int one_stdin_input(const run_opts_t *o, int more, const char *cmd)
{
    if (stdin_inputs(o) + more > 1)
        return usage_error(cmd, "only one input can be read from standard input (-)");
    return 0;
}

/* The model file of --model FILE, or of --weights DIR (DIR/model.txt), read
   into o->model: for run and train (the others run layers of one shape). */
static int model_file_find(run_opts_t *o, const char *cmd)
{
    static char path[4096];
    const int model_cmd = strcmp(cmd, "run") == 0 || strcmp(cmd, "train") == 0;
    if (o->weights && !o->model.path) {
        snprintf(path, sizeof path, "%s/model.txt", o->weights);
        if (access(path, F_OK) == 0)
            o->model.path = path;
    }
    if (!o->model.path)
        return 0;
    if (!model_cmd)
        return usage_error(cmd, "%s: %s runs layers of one shape; a model file (%s) is for "
                           "run and train", o->model.path, cmd,
                           o->given[OPT_MODEL - OPT_Q] ? "--model" : "model.txt in --weights");
    if (o->q)
        return usage_error(cmd, "--q/--k/--v run raw attention; --model runs a model's layers");
    return model_file_read(o, o->model.path, cmd);
}

int input_options_check(run_opts_t *o, const char *cmd)
{
    if (one_stdin_input(o, 0, cmd))
        return EXIT_USAGE;
    if (model_file_find(o, cmd))
        return EXIT_USAGE;
    if (o->edge_features && strcmp(cli_program, "attngraph") != 0)
        return usage_error(cmd, "--edge-features: the MPI layer runs no edge features (a "
                           "process's part holds no per-message terms); run them on one "
                           "process (attngraph %s)", cmd);
    if (o->edge_features && !o->model.path)
        return usage_error(cmd, "--edge-features %s: the layers of a model file with edges=yes "
                           "read edge features; give --model FILE (docs/model-file.md)",
                           o->edge_features);
    if (o->weights && !o->model.path && model_args_defaults(o, cmd))
        return EXIT_USAGE;
    if (o->nodes_text) {   /* here, once --max-nodes is known, so the message names it */
        char *end;
        errno = 0;
        long long v = strtoll(o->nodes_text, &end, 10);
        if (errno || end == o->nodes_text || *end || v < 1 || v > o->src.max_nodes)
            return usage_error(cmd, "--nodes '%s' is not an integer in 1..%lld (%s)",
                               o->nodes_text, (long long)o->src.max_nodes,
                               o->given[OPT_MAX_NODES - OPT_Q] ? "--max-nodes"
                                                              : "the default --max-nodes");
        o->src.nodes = v;
    }
    const ag_score_kind_t kind = o->score.kind;
    const char *kind_name = ag_score_kind_name(kind);
    if (o->given[OPT_SLOPE - OPT_Q] && kind != AG_SCORE_ADDITIVE && kind != AG_SCORE_GATV2)
        return usage_error(cmd, "--slope is the LeakyReLU slope of --score additive and "
                           "gatv2; it does not apply to %s", kind_name);
    if (o->given[OPT_SIGMOID_BIAS - OPT_Q] && kind != AG_SCORE_SIGMOID)
        return usage_error(cmd, "--sigmoid-bias is for --score sigmoid; it does not apply to "
                           "%s", kind_name);
    for (int k = 0; k < 2; k++)
        if (o->given[(k ? OPT_SOFTCAP : OPT_BETA) - OPT_Q] && !softmax_kind(kind))
            return usage_error(cmd, "--%s applies to softmax scores; %s scores are not "
                               "normalised by a softmax", k ? "softcap" : "beta", kind_name);
    if (kind == AG_SCORE_LINEAR && (o->given[OPT_EDGE_BIAS - OPT_Q] ||
                                    o->given[OPT_ALIBI - OPT_Q]))
        return usage_error(cmd, "--%s adds to scores; linear attention has none",
                           o->given[OPT_ALIBI - OPT_Q] ? "alibi" : "edge-bias");
    int n_qkv = !!o->q + !!o->k + !!o->v;
    if (n_qkv != 0 && n_qkv != 3)
        return usage_error(cmd, "--q, --k and --v go together");
    if (n_qkv && (o->features || o->dim || o->weights || o->head_dim))
        return usage_error(cmd, "--q/--k/--v run raw attention; they do not mix with "
                           "--features, --dim, --head-dim or --weights");
    if (n_qkv && (o->given[OPT_ROUNDS - OPT_Q] || o->until || o->no_residual || o->norm || o->posenc ||
                  o->per_node || o->save_rounds || o->trace || o->attn_round))
        return usage_error(cmd, "--q/--k/--v run exactly one round of attention; round "
                           "options (--rounds, --until, --no-residual, --norm, --posenc, "
                           "--per-node-weights, --trace, --save-rounds, --attn-round) do "
                           "not apply");
    if (o->features && o->dim)
        return usage_error(cmd, "give --features or --dim, not both");
    if (o->weights && o->head_dim)
        return usage_error(cmd, "--head-dim is for random weights; --weights sets its own");
    if (o->weights && o->per_node)
        return usage_error(cmd, "--per-node-weights is for random weights; per-node weights "
                           "from --weights are [N, H*d, D] arrays");
    if (o->src.tokens && o->src.labels_file)
        return usage_error(cmd, "give --tokens or --labels-file, not both");
    if (o->save_rounds && strcmp(o->save_rounds, "-") == 0)
        return usage_error(cmd, "--save-rounds names a directory; standard output (-) cannot "
                           "hold a file per round");
    if (o->edge_bias && (o->src.pattern || o->src.csr))
        return usage_error(cmd, "--edge-bias reads an edge attribute of a graph file; a %s has "
                           "no edge attributes", o->src.pattern ? "pattern" : "CSR");
    if (o->given[OPT_DIRECTED - OPT_Q] && o->given[OPT_UNDIRECTED - OPT_Q])
        return usage_error(cmd, "give --directed or --undirected, not both");
    /* --seed draws random features, weights or raw mode's attention vectors */
    const int vectors = kind == AG_SCORE_ADDITIVE || kind == AG_SCORE_GATV2;
    if (o->given[OPT_SEED - OPT_Q] && ((n_qkv && !vectors) || (o->features && o->weights)))
        return usage_error(cmd, "--seed does not apply: %s, so nothing is random",
                           n_qkv ? "--q/--k/--v give every input of the scores"
                                 : "--features and --weights give every input");
    /* a width from the command line alone that the heads do not divide (bench's
       heads have --head-dim, 64 by default, and it refuses --dim) */
    const int64_t D = o->dim ? o->dim : DEFAULT_DIM;
    if (!n_qkv && !o->features && !o->weights && !o->head_dim && D % o->heads &&
        strcmp(cmd, "bench") != 0)
        return usage_error(cmd, "width D=%lld (%s) is not a multiple of %lld heads; set --dim "
                           "or --head-dim", (long long)D, o->dim ? "--dim" : "the default",
                           (long long)o->heads);
    if (o->attn_round > o->rounds && !o->weights)   /* --weights DIR may set the rounds */
        return usage_error(cmd, "--attn-round %lld, but the run has %lld round%s",
                           (long long)o->attn_round, (long long)o->rounds, AG_PLURAL(o->rounds));
    return 0;
}

int refuse_options(const run_opts_t *o, const int *codes, const char *cmd, const char *why)
{
    for (int k = 0; codes[k]; k++)
        if (o->given[codes[k] - OPT_Q])
            return usage_error(cmd, "--%s does not apply: %s",
                               input_option_coded(codes[k])->name, why);
    return 0;
}

int source_args(run_opts_t *o, const opt_parser_t *p, const char *cmd)
{
    if (opt_positional(p, 1))
        return EXIT_USAGE;
    if (p->n_pos)
        o->src.graph = p->pos[0];
    if (o->src.format && !o->src.graph)
        return usage_error(cmd, "--format names the format of a GRAPH file; none was given");
    const int given = !!o->src.graph + !!o->src.pattern + !!o->src.csr;
    if (given == 0)
        return usage_error(cmd, "no GRAPH file, --pattern or --csr given");
    if (given > 1)
        return usage_error(cmd, "give one of a GRAPH file, --pattern and --csr");
    return 0;
}

/* ---- inputs ---- */

static int read_rows(ag_matrix_t *m, const char *option, const char *path, int64_t N,
                     ag_error_t *err)
{
    int rc = ag_matrix_read_npy(m, path, err);
    if (!rc && m->rows != N) {
        rc = ag_fail(err, AG_EINVAL, "%s %s has %lld row%s, the graph has %lld node%s", option,
                     path, (long long)m->rows, AG_PLURAL(m->rows), (long long)N, AG_PLURAL(N));
        ag_matrix_destroy(m);
    }
    return rc;
}

/* Raw attention's Q, K, V (in->q, k, v read) against each other and the heads;
   additive and gatv2 get seeded vectors (raw attention has no layer). */
static int raw_finish(inputs_t *in, const run_opts_t *o, ag_error_t *err)
{
    const int64_t HD = in->q.cols;
    if (in->k.cols != HD)
        return ag_fail(err, AG_EINVAL, "%s has %lld column%s; %s has %lld", o->k,
                       (long long)in->k.cols, AG_PLURAL(in->k.cols), o->q, (long long)HD);
    if (in->v.cols != HD)
        return ag_fail(err, AG_EINVAL, "%s has %lld column%s; %s has %lld", o->v,
                       (long long)in->v.cols, AG_PLURAL(in->v.cols), o->q, (long long)HD);
    if (HD == 0 || HD % o->heads)
        return ag_fail(err, AG_EINVAL, "%s has %lld column%s, not a positive multiple of %lld "
                       "head%s", o->q, (long long)HD, AG_PLURAL(HD), (long long)o->heads,
                       AG_PLURAL(o->heads));
    in->d = HD / o->heads;
    if (!(in->vectors = ag_alloc(3 * HD, sizeof(float), err, "attention vectors")))
        return ag_alloc_status();
    ag_random_normal(in->vectors, 3 * HD, o->seed, 7, 1.0f / sqrtf((float)in->d));
    if (in->score.kind == AG_SCORE_ADDITIVE)
        in->score.a_src = in->vectors, in->score.a_dst = in->vectors + HD;
    if (in->score.kind == AG_SCORE_GATV2)
        in->score.a_src = in->vectors + 2 * HD;
    in->rounds = 1;
    return AG_OK;
}

static int load_raw(inputs_t *in, const run_opts_t *o, ag_error_t *err)
{
    int rc = read_rows(&in->q, "--q", o->q, in->N, err);
    if (!rc)
        rc = read_rows(&in->k, "--k", o->k, in->N, err);
    if (!rc)
        rc = read_rows(&in->v, "--v", o->v, in->N, err);
    return rc ? rc : raw_finish(in, o, err);
}

int inputs_take_raw(inputs_t *in, const run_opts_t *o, ag_matrix_t *q, ag_matrix_t *k,
                    ag_matrix_t *v, ag_error_t *err)
{
    memset(in, 0, sizeof *in);
    in->raw = 1;
    in->N = in->total = q->rows;
    in->H = o->heads;
    in->score = o->score;
    in->q = *q, in->k = *k, in->v = *v;
    memset(q, 0, sizeof *q), memset(k, 0, sizeof *k), memset(v, 0, sizeof *v);
    int rc = raw_finish(in, o, err);
    if (rc)
        inputs_free(in);
    return rc;
}

/* Does dir/round-k/wq.npy exist? */
static int has_round_dir(const char *dir, int k)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/round-%d/wq.npy", dir, k);
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

/* One shared layer from --weights DIR, or DIR/round-1/, round-2/, ... */
static int load_layers(inputs_t *in, const run_opts_t *o, ag_error_t *err)
{
    int n = 0;
    while (has_round_dir(o->weights, n + 1))
        n++;
    const int64_t rounds = n && !o->given[OPT_ROUNDS - OPT_Q] ? n : o->rounds;
    int rc = model_args_check(o, o->heads, rounds, err);   /* before the arrays' shapes */
    if (rc)
        return rc;
    in->n_layers = n ? n : 1;
    in->layers = ag_calloc(in->n_layers, sizeof *in->layers, err, "weights");
    if (!in->layers)
        return ag_alloc_status();
    for (int k = 0; k < in->n_layers; k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, n ? "%s/round-%d" : "%s", o->weights, k + 1);
        if ((rc = ag_weights_load(&in->layers[k], dir, o->heads, err)))
            return rc;
        if (in->layers[k].D != in->x0.cols)
            return ag_fail(err, AG_EINVAL, "%s/wq.npy has %lld column%s (D); the features "
                           "have %lld", dir, (long long)in->layers[k].D,
                           AG_PLURAL(in->layers[k].D), (long long)in->x0.cols);
        if (in->layers[k].per_node && in->layers[k].per_node != in->total)
            return ag_fail(err, AG_EINVAL, "%s/wq.npy holds weights for %lld node%s; the "
                           "graph has %lld", dir, (long long)in->layers[k].per_node,
                           AG_PLURAL(in->layers[k].per_node), (long long)in->total);
        if (in->layers[k].per_node && in->N != in->total &&
            (rc = ag_i_weights_keep_rows(&in->layers[k], in->first, in->N, err)))
            return rc;
    }
    if (n && o->given[OPT_ROUNDS - OPT_Q] && o->rounds > n)
        return ag_fail(err, AG_EINVAL, "--rounds %lld, but %s has layers for %d round%s "
                       "(round-1/ .. round-%d/)", (long long)o->rounds, o->weights, n,
                       AG_PLURAL(n), n);
    in->rounds = rounds;
    return AG_OK;
}

/* The states a run of rounds keeps, against the memory budget, before the
   workspace is allocated: the features, the output, LayerNorm's input and the
   previous states [N, D], and Q, K, V, M [N, H*d], all float32. */
static int check_state_memory(int64_t N, int64_t D, int64_t H, int64_t d, ag_error_t *err)
{
    const double bytes = 4.0 * (double)N * (4.0 * (double)D + 4.0 * (double)(H * d));
    const int64_t budget = ag_memory_budget();
    if (bytes <= (double)budget)
        return AG_OK;
    return ag_fail(err, AG_ELIMIT, "%lld node%s with D=%lld and %lld head%s of width %lld need "
                   "%.3g GB of states; the memory budget is %.3g GB (the memory available now, "
                   "or --max-memory)", (long long)N, AG_PLURAL(N), (long long)D, (long long)H,
                   AG_PLURAL(H), (long long)d, bytes / 1e9, (double)budget / 1e9);
}

int inputs_check_memory(const run_opts_t *o, int64_t N, ag_error_t *err)
{
    if (o->q || o->features || o->weights)
        return AG_OK;   /* the files decide the shape: checked as they are read */
    const int64_t D = o->dim ? o->dim : DEFAULT_DIM;
    return check_state_memory(N, D, o->heads, o->head_dim ? o->head_dim : D / o->heads, err);
}

static int layers_for(inputs_t *in, const run_opts_t *o, ag_error_t *err);

static int load_rounds(inputs_t *in, const run_opts_t *o, ag_error_t *err)
{
    int rc0 = inputs_check_memory(o, in->N, err);   /* before drawing the features */
    if (rc0)
        return rc0;
    int rc;
    if (o->features) {
        if ((rc = read_rows(&in->x0, "--features", o->features, in->N, err)))
            return rc;
    } else {
        if ((rc = ag_matrix_init(&in->x0, in->N, o->dim ? o->dim : DEFAULT_DIM, err)))
            return rc;
        ag_random_normal(in->x0.data, in->x0.rows * in->x0.cols, o->seed, 0, 1.0f);
    }
    return layers_for(in, o, err);
}

/* Positions added to in->x0, then the layers: from --weights, or seeded. */
static int layers_for(inputs_t *in, const run_opts_t *o, ag_error_t *err)
{
    int rc;
    if (o->posenc)
        ag_posenc_sinusoidal(in->x0.data, in->N, in->x0.cols);
    const int64_t D = in->x0.cols;
    in->rounds = o->rounds;
    if (o->model.spec.n_layers) {   /* layers of their own shapes */
        if ((rc = model_file_layers(&in->layers, o, D, in->edges ? in->edges->cols : 0, err)))
            return rc;
        in->n_layers = o->model.spec.n_layers;
        in->rounds = o->model.spec.rounds ? o->model.spec.rounds : in->n_layers;
        /* the last round's heads: what run's exports of the final attention read */
        const ag_weights_t *last = &in->layers[in->n_layers - 1];
        in->H = last->H, in->d = last->d;
        return check_state_memory(in->N, ag_rounds_widest(in->layers, in->n_layers,
                                                          in->rounds),
                                  1, ag_i_layers_largest_hd(in->layers, in->n_layers), err);
    }
    if (o->weights) {
        if ((rc = load_layers(in, o, err)))
            return rc;
    } else {
        if (!o->head_dim && D % o->heads)
            return ag_fail(err, AG_EINVAL, "width D=%lld is not a multiple of %lld head%s; set "
                           "--head-dim", (long long)D, (long long)o->heads, AG_PLURAL(o->heads));
        const int64_t d = o->head_dim ? o->head_dim : D / o->heads;
        in->n_layers = 1;
        in->layers = ag_calloc(1, sizeof *in->layers, err, "weights");
        if (!in->layers)
            return ag_alloc_status();
        if ((rc = o->per_node && in->N != in->total
                      ? ag_i_weights_random_rows(in->layers, D, o->heads, d, in->first, in->N,
                                                 o->seed, err)
                      : ag_weights_random(in->layers, D, o->heads, d, o->per_node ? in->N : 0,
                                          o->seed, err)))
            return rc;
    }
    in->d = in->layers[0].d;
    return check_state_memory(in->N, in->x0.cols, in->H, in->d, err);
}

int inputs_load(inputs_t *in, const run_opts_t *o, int64_t N, const ag_matrix_t *edges,
                ag_error_t *err)
{
    memset(in, 0, sizeof *in);
    in->edges = edges;
    in->raw = o->q != NULL;
    in->N = in->total = N;
    in->H = o->heads;
    in->score = o->score;
    int rc = in->raw ? load_raw(in, o, err) : load_rounds(in, o, err);
    if (rc)
        inputs_free(in);
    return rc;
}

int inputs_load_features(inputs_t *in, const run_opts_t *o, ag_matrix_t *x0,
                         const ag_matrix_t *edges, ag_error_t *err)
{
    return inputs_load_part(in, o, x0, 0, x0->rows, edges, err);
}

int inputs_load_part(inputs_t *in, const run_opts_t *o, ag_matrix_t *x0, int64_t first,
                     int64_t total, const ag_matrix_t *edges, ag_error_t *err)
{
    memset(in, 0, sizeof *in);
    in->edges = edges;
    in->N = x0->rows;
    in->first = first, in->total = total;
    in->H = o->heads;
    in->score = o->score;
    in->x0 = *x0;
    memset(x0, 0, sizeof *x0);
    int rc = layers_for(in, o, err);
    if (rc)
        inputs_free(in);
    return rc;
}

void inputs_free(inputs_t *in)
{
    ag_matrix_destroy(&in->q);
    ag_matrix_destroy(&in->k);
    ag_matrix_destroy(&in->v);
    ag_matrix_destroy(&in->x0);
    for (int k = 0; in->layers && k < in->n_layers; k++)
        ag_weights_destroy(&in->layers[k]);
    free(in->layers);
    free(in->vectors);
    in->layers = NULL;
    in->vectors = NULL;
}
