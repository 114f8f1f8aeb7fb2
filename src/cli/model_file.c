/*
 * The tool's side of a model file (docs/model-file.md; the library parses and
 * writes it: ag_model_spec_*): its model-wide lines become the options of the
 * same names, refused where the command line gives them too; the layers come
 * from the library (drawn, or read from --weights DIR). `train --model FILE`
 * starts from it, `train --save DIR` writes DIR/model.txt, and `run --weights
 * DIR` runs what it describes.
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "model/model.h"

/* The options a model file may hold: the model's, and how the graph is shaped
   (its keys by ag_model_key_t; the dropouts and the readout are train's). */
static const int key_codes[AG_MODEL_KEYS] = {
    [AG_KEY_SCORE] = OPT_SCORE, [AG_KEY_BETA] = OPT_BETA, [AG_KEY_SOFTCAP] = OPT_SOFTCAP,
    [AG_KEY_SLOPE] = OPT_SLOPE, [AG_KEY_SIGMOID_BIAS] = OPT_SIGMOID_BIAS,
    [AG_KEY_ALIBI] = OPT_ALIBI, [AG_KEY_EDGE_BIAS] = OPT_EDGE_BIAS, [AG_KEY_NORM] = OPT_NORM,
    [AG_KEY_POSENC] = OPT_POSENC, [AG_KEY_SELF_LOOPS] = OPT_SELF_LOOPS,
    [AG_KEY_DIRECTED] = OPT_DIRECTED, [AG_KEY_UNDIRECTED] = OPT_UNDIRECTED,
};
/* The options a model file replaces: its layer lines say them per layer. */
static const int layer_codes[] = {OPT_HEADS, OPT_ROUNDS, OPT_NO_RESIDUAL, OPT_HEAD_DIM,
                                  OPT_PER_NODE_WEIGHTS};

#define COUNT(a) (sizeof a / sizeof a[0])

static const char *option_name(int code)
{
    const opt_def_t *e = input_option_coded(code);
    return e ? e->name : "?";
}

#define FILE_ERROR(...) (usage_error(cmd, __VA_ARGS__), EXIT_USAGE)

void model_key_apply(run_opts_t *o, const ag_model_spec_t *spec, ag_model_key_t k)
{
    const ag_score_t *s = &spec->score;
    o->given[key_codes[k] - OPT_Q] = 1;
    switch (k) {
    case AG_KEY_SCORE: o->score.kind = s->kind; break;
    case AG_KEY_BETA: o->score.beta = s->beta; break;
    case AG_KEY_SOFTCAP: o->score.softcap = s->softcap; break;
    case AG_KEY_SLOPE: o->score.slope = s->slope; break;
    case AG_KEY_SIGMOID_BIAS:
        o->score.sigmoid_bias = s->sigmoid_bias, o->score.has_sigmoid_bias = 1;
        break;
    case AG_KEY_ALIBI: o->score.alibi = 1; break;
    case AG_KEY_EDGE_BIAS: o->edge_bias = spec->edge_bias; break;
    case AG_KEY_NORM: o->norm = spec->norm; break;
    case AG_KEY_POSENC: o->posenc = spec->posenc; break;
    case AG_KEY_SELF_LOOPS: o->src.self = spec->self_loops; break;
    case AG_KEY_DIRECTED: o->src.direction = AG_EDGES_DIRECTED; break;
    case AG_KEY_UNDIRECTED: o->src.direction = AG_EDGES_UNDIRECTED; break;
    default: break;
    }
}

/* The model o runs: the file's layers and readout under the options of the
   file and the command line together (what train --save writes). */
static void merged_spec(ag_model_spec_t *spec, const run_opts_t *o)
{
    *spec = o->model.spec;
    spec->score = o->score;
    snprintf(spec->edge_bias, sizeof spec->edge_bias, "%s", o->edge_bias ? o->edge_bias : "");
    spec->norm = o->norm, spec->posenc = o->posenc, spec->self_loops = o->src.self;
    spec->directed = o->src.direction == AG_EDGES_AUTO || !o->src.graph   /* files have one */
                     ? -1 : o->src.direction == AG_EDGES_DIRECTED;
}

int model_file_read(run_opts_t *o, const char *path, const char *cmd)
{
    for (size_t k = 0; k < COUNT(layer_codes); k++)
        if (o->given[layer_codes[k] - OPT_Q])
            return FILE_ERROR("--%s: the model file %s describes every layer; give it there "
                              "(docs/model-file.md)", option_name(layer_codes[k]), path);
    ag_model_spec_t *spec = &o->model.spec;
    ag_error_t err;
    if (ag_model_spec_read(spec, path, &err))
        return FILE_ERROR("%s%s", err.status == AG_EIO ? "--model " : "", err.msg);
    for (int k = 0; k < AG_MODEL_KEYS; k++) {   /* the command's own options stay its own */
        if (!spec->line[k] || !key_codes[k])
            continue;
        if (o->given[key_codes[k] - OPT_Q])
            return FILE_ERROR("--%s is given on the command line and in %s (line %d); give it "
                              "in one place", ag_model_key_name((ag_model_key_t)k), path,
                              spec->line[k]);
        model_key_apply(o, spec, (ag_model_key_t)k);
    }
    ag_model_spec_t merged;
    merged_spec(&merged, o);
    if (ag_model_spec_check(&merged, path, 0, 0, &err))
        return FILE_ERROR("%s", err.msg);
    int reads_edges = 0;
    for (int l = 0; l < spec->n_layers; l++) {   /* what the command decides */
        const ag_layer_spec_t *L = &spec->layers[l];
        reads_edges |= L->edges;
        if (L->edges && strcmp(cli_program, "attngraph") != 0)
            return FILE_ERROR("%s line %d: edges=yes: the MPI layer runs no edge features (a "
                              "process's part holds no per-message terms); run it on one "
                              "process (attngraph %s)", path, L->line, cmd);
        if ((L->graph[0] || L->global[0]) && strcmp(cli_program, "attngraph") != 0)
            return FILE_ERROR("%s line %d: %s=%s: a graph a layer runs in attngraph train "
                              "and run and in the library (ag_model_run; Python's "
                              "Model.run), not on several processes (%s %s) yet", path,
                              L->line, L->graph[0] ? "graph" : "global",
                              L->graph[0] ? L->graph : L->global, cli_program, cmd);
        if (L->edges && !o->edge_features)
            return FILE_ERROR("%s line %d: edges=yes, and no --edge-features given", path,
                              L->line);
    }
    if (o->edge_features && !reads_edges)
        return FILE_ERROR("--edge-features %s given, and no layer of %s reads them; give a layer "
                          "edges=yes", o->edge_features, path);
    o->heads = spec->layers[0].heads, o->rounds = spec->rounds ? spec->rounds : spec->n_layers;
    return 0;
}

int model_layers_check(const run_opts_t *o, int64_t D, int64_t classes, ag_error_t *err)
{
    ag_model_spec_t spec;
    merged_spec(&spec, o);
    return ag_model_spec_check(&spec, o->model.path, D, classes, err);
}

int model_file_layers(ag_weights_t **layers, const run_opts_t *o, int64_t D, int64_t edge_dim,
                      ag_error_t *err)
{
    ag_model_spec_t spec;
    merged_spec(&spec, o);
    int rc = ag_model_spec_check(&spec, o->model.path, D, 0, err);
    return rc ? rc : ag_i_model_layers(layers, &spec, D, edge_dim, o->weights, o->seed, err);
}

size_t model_file_text(char *buf, size_t cap, const run_opts_t *o, const float dropout[3])
{
    ag_model_spec_t spec;
    merged_spec(&spec, o);
    memcpy(spec.dropout, dropout, sizeof spec.dropout);
    return ag_model_spec_text(buf, cap, &spec);
}
