/* The input options' combinations checked, and loading the inputs they name. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "base/base.h"
#include "model/model.h"

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
                               input_option_coded(codes[k]) ? input_option_coded(codes[k])->name
                                                            : "(an option)",
                               why);
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
    if (!o->src.graph && !o->src.pattern && !o->src.csr)
        return usage_error(cmd, "no GRAPH file, --pattern or --csr given");
    if (o->src.graph && o->src.csr)   /* a pattern may run over either: its word graph */
        return usage_error(cmd, "give a GRAPH file or --csr, not both");
    return 0;
}

/* ---- inputs ---- */

int matrix_pad_rows(ag_matrix_t *m, int64_t rows, ag_error_t *err)
{
    ag_matrix_t all;
    int rc = ag_matrix_init(&all, rows, m->cols, err);
    if (rc)
        return rc;
    memcpy(all.data, m->data, (size_t)(m->rows * m->cols) * sizeof *m->data);
    ag_matrix_destroy(m);
    *m = all;
    return AG_OK;
}

/* A row a node, for N nodes of which the last V are a pattern's virtual ones:
   N rows give theirs, N - V rows leave them zero. */
static int read_rows(ag_matrix_t *m, const char *option, const char *path, int64_t N,
                     int64_t V, ag_error_t *err)
{
    int rc = ag_matrix_read_npy(m, path, err);
    if (!rc && V && m->rows == N - V) {
        if ((rc = matrix_pad_rows(m, N, err)))
            ag_matrix_destroy(m);
    } else if (!rc && m->rows != N) {
        char virt[96] = "";
        if (V)
            snprintf(virt, sizeof virt, " (%lld of them virtual: %lld rows leave those zero)",
                     (long long)V, (long long)(N - V));
        rc = ag_fail(err, AG_EINVAL, "%s %s has %lld row%s, the graph has %lld node%s%s", option,
                     path, (long long)m->rows, AG_PLURAL(m->rows), (long long)N, AG_PLURAL(N),
                     virt);
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
    const int64_t V = pattern_virtual_nodes(o->src.pattern);
    int rc = read_rows(&in->q, "--q", o->q, in->N, V, err);
    if (!rc)
        rc = read_rows(&in->k, "--k", o->k, in->N, V, err);
    if (!rc)
        rc = read_rows(&in->v, "--v", o->v, in->N, V, err);
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

/* The layers of --weights DIR, as the library reads a folder (ag_model_load_ex:
   one shared layer, or DIR/round-1/, round-2/, ...; --heads for arrays alone). */
static int load_layers(inputs_t *in, const run_opts_t *o, ag_error_t *err)
{
    ag_model_t m;   /* the layers alone: the readout is run --predict's, read apart */
    const ag_model_load_opts_t lo = {.heads = o->heads, .no_readout = 1};
    int rc = ag_model_load_ex(&m, o->weights, &lo, err);
    if (rc)
        return rc;
    const int n = m.spec.rounds ? 0 : m.spec.n_layers;   /* round-k/'s layers, or shared */
    const int64_t rounds = n && !o->given[OPT_ROUNDS - OPT_Q] ? n : o->rounds;
    if ((rc = model_args_check(o, o->heads, rounds, err))) {   /* before the features' width */
        ag_model_destroy(&m);
        return rc;
    }
    in->n_layers = m.spec.n_layers;
    in->layers = m.layers;   /* taken */
    m.layers = NULL, m.spec.n_layers = 0;
    ag_model_destroy(&m);
    for (int k = 0; k < in->n_layers; k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, n ? "%s/round-%d" : "%s", o->weights, k + 1);
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
        if ((rc = read_rows(&in->x0, "--features", o->features, in->N,
                            pattern_virtual_nodes(o->src.pattern), err)))
            return rc;
    } else {
        if ((rc = ag_matrix_init(&in->x0, in->N, o->dim ? o->dim : DEFAULT_DIM, err)))
            return rc;
        ag_random_normal(in->x0.data, in->x0.rows * in->x0.cols, o->seed, 0, 1.0f);
    }
    return layers_for(in, o, err);
}

static int make_layers(inputs_t *in, const run_opts_t *o, ag_error_t *err);

/* Positions added to in->x0, then the layers: from --weights, or seeded; each
   without its residual under --no-residual (the layer says it to the library). */
static int layers_for(inputs_t *in, const run_opts_t *o, ag_error_t *err)
{
    int rc = make_layers(in, o, err);
    for (int k = 0; !rc && k < in->n_layers; k++)
        in->layers[k].no_residual |= o->no_residual;
    return rc;
}

static int make_layers(inputs_t *in, const run_opts_t *o, ag_error_t *err)
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
