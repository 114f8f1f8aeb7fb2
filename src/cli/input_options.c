/* The input options of run, compare, inspect, draw, grad, bench and train: their
   table, which also writes their help, and what each sets in run_opts_t
   (input_option, which plan calls for the few it takes). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/base.h"

const opt_def_t input_raw_options[] = {
    OPT_PROSE("Raw attention (one round on given messages; the output is M [N, H*d]):\n"),
    OPT_VALUE("q", OPT_Q, "  --q Q.npy --k K.npy --v V.npy   queries, keys, values [N, H*d]\n"),
    OPT_VALUE("k", OPT_K, NULL),
    OPT_VALUE("v", OPT_V, NULL),
    OPT_PROSE("\n"),
    OPT_DEF_END,
};

const opt_def_t input_features_options[] = {
    OPT_PROSE("Rounds with projections (the output is the final X [N, D]):\n"),
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
    OPT_PROSE("\n"
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
    OPT_PROSE("\n"
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
              "  --pattern SPEC      run on a pattern instead of a graph file; beside a GRAPH\n"
              "                      or --csr, over its nodes ('graph+virtual:1', 'hops:2')\n"),
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
