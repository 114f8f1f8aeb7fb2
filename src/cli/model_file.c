/*
 * A model described in a small text file (docs/model-file.md): the options
 * that shape every layer (score, norm, self-loops, ...), one line each, and a
 * `layer` line per layer with its own heads, head width, output, projection,
 * bias, activation and residual. `train --model FILE` starts from it, `train
 * --save DIR` writes it as DIR/model.txt beside the weights, and `run
 * --weights DIR` runs what it describes.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "model/model.h"

static const char *const act_names[] = {"none", "relu", "elu", "gelu"};

/* The options a model file may hold: the model's, and how the graph is shaped. */
static const int file_codes[] = {OPT_SCORE, OPT_BETA, OPT_SOFTCAP, OPT_SLOPE, OPT_SIGMOID_BIAS,
                                 OPT_ALIBI, OPT_EDGE_BIAS, OPT_NORM, OPT_POSENC,
                                 OPT_SELF_LOOPS, OPT_DIRECTED, OPT_UNDIRECTED};
/* The options a model file replaces: its layer lines say them per layer. */
static const int layer_codes[] = {OPT_HEADS, OPT_ROUNDS, OPT_NO_RESIDUAL, OPT_HEAD_DIM,
                                  OPT_PER_NODE_WEIGHTS};

#define COUNT(a) (sizeof a / sizeof a[0])

static const char *option_name(int code)
{
    for (int k = 0; input_options[k].name; k++)
        if (input_options[k].val == code)
            return input_options[k].name;
    return "?";
}

/* train's dropouts, as the file and the command line name them */
static const char *const dropout_names[3] = {"dropout", "attn-dropout", "resid-dropout"};

static int dropout_key(const char *key)
{
    for (int k = 0; k < 3; k++)
        if (strcmp(key, dropout_names[k]) == 0)
            return k;
    return -1;
}

static int is_file_code(int code)
{
    for (size_t k = 0; k < COUNT(file_codes); k++)
        if (file_codes[k] == code)
            return 1;
    return 0;
}

/* "yes" or "no" into *v; 0, or -1 for anything else. */
static int yes_no(const char *s, int *v)
{
    if (strcmp(s, "yes") == 0)
        return *v = 1, 0;
    if (strcmp(s, "no") == 0)
        return *v = 0, 0;
    return -1;
}

/* A positive integer up to max, or -1. */
static int64_t count_of(const char *s, int64_t max)
{
    char *end;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    return errno || end == s || *end || v < 1 || v > max ? -1 : v;
}

/* An activation's name into *act; 0, or -1 for another word. */
static int act_of(const char *s, ag_activation_t *act)
{
    for (int a = 0; a < (int)COUNT(act_names); a++)
        if (strcmp(s, act_names[a]) == 0)
            return *act = (ag_activation_t)a, 0;
    return -1;
}

/* The keys of a layer line: each parses its value into L (0, or -1: refused). */
static int key_heads(layer_spec_t *L, const char *v)
{
    return (L->heads = count_of(v, 4096)) < 0 ? -1 : 0;
}

static int key_dim(layer_spec_t *L, const char *v)
{
    return (L->dim = count_of(v, 1 << 20)) < 0 ? -1 : 0;
}

static int key_ffn(layer_spec_t *L, const char *v)
{
    return (L->ffn = count_of(v, 64)) < 0 ? -1 : 0;
}

static int key_bias(layer_spec_t *L, const char *v) { return yes_no(v, &L->bias); }
static int key_residual(layer_spec_t *L, const char *v) { return yes_no(v, &L->residual); }
static int key_act(layer_spec_t *L, const char *v) { return act_of(v, &L->act); }
static int key_ffn_act(layer_spec_t *L, const char *v) { return act_of(v, &L->ffn_act); }

static int key_out(layer_spec_t *L, const char *v)
{
    L->out = strcmp(v, "concat") == 0 ? OUT_CONCAT : strcmp(v, "mean") == 0 ? OUT_MEAN
                                                                             : OUT_LINEAR;
    return L->out == OUT_LINEAR && (L->out_width = count_of(v, 1 << 24)) < 0 ? -1 : 0;
}

static int key_qkv_bias(layer_spec_t *L, const char *v) { return yes_no(v, &L->qkv_bias); }
static int key_edges(layer_spec_t *L, const char *v) { return yes_no(v, &L->edges); }

static int key_skip(layer_spec_t *L, const char *v)
{
    static const char *const names[] = {"no", "sum", "gate"};
    for (int k = 0; k < 3; k++)
        if (strcmp(v, names[k]) == 0)
            return L->skip = k, 0;
    return -1;
}

static int key_norm(layer_spec_t *L, const char *v)
{
    L->post_norm = strcmp(v, "post") == 0;
    return L->post_norm || strcmp(v, "pre") == 0 ? 0 : -1;
}

static int key_projection(layer_spec_t *L, const char *v)
{
    L->one_projection = strcmp(v, "one") == 0;
    return L->one_projection || strcmp(v, "qkv") == 0 ? 0 : -1;
}

static const struct {
    const char *key;
    int (*parse)(layer_spec_t *L, const char *v);
    const char *expected;
} layer_keys[] = {
    {"heads", key_heads, "an integer in 1..4096"},
    {"dim", key_dim, "a head width, an integer >= 1"},
    {"out", key_out, "concat, mean or a width (wo's rows)"},
    {"projection", key_projection, "one (keys and values are the queries' projection) or qkv"},
    {"bias", key_bias, "yes or no"},
    {"act", key_act, "none, relu, elu or gelu"},
    {"residual", key_residual, "yes or no"},
    {"ffn", key_ffn, "the hidden width's ratio to the output's, an integer in 1..64"},
    {"ffn_act", key_ffn_act, "none, relu, elu or gelu"},
    {"qkv_bias", key_qkv_bias, "yes or no"},
    {"skip", key_skip, "no, sum (R = X Wskip^T + bskip added to the output) or gate (g R + "
     "(1 - g) O)"},
    {"norm", key_norm, "pre or post (with the file's norm layer)"},
    {"edges", key_edges, "yes (the layer reads --edge-features) or no"},
};

#define FILE_ERROR(...) (usage_error(cmd, __VA_ARGS__), EXIT_USAGE)

/* One `layer key=value ...` line (its words after `layer`) into L. */
static int layer_line(layer_spec_t *L, char *words, const char *path, int line,
                      const char *cmd)
{
    *L = (layer_spec_t){.line = line, .residual = -1, .ffn_act = AG_ACT_GELU};
    unsigned seen = 0;
    char *save = NULL;
    for (char *w = strtok_r(words, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        char *v = strchr(w, '=');
        if (!v || !v[1])
            return FILE_ERROR("%s line %d: '%s' is not key=value (heads=8, dim=8, out=concat, "
                              "...)", path, line, w);
        *v++ = '\0';
        size_t k = 0;
        while (k < COUNT(layer_keys) && strcmp(w, layer_keys[k].key) != 0)
            k++;
        if (k == COUNT(layer_keys))
            return FILE_ERROR("%s line %d: unknown layer key '%s'; expected heads, dim, out, "
                              "projection, bias, act, residual, ffn, ffn_act, qkv_bias, skip, "
                              "norm or edges", path, line, w);
        if (seen & 1u << k)
            return FILE_ERROR("%s line %d: %s given twice", path, line, w);
        seen |= 1u << k;
        if (layer_keys[k].parse(L, v) != 0)
            return FILE_ERROR("%s line %d: %s=%s; expected %s", path, line, w, v,
                              layer_keys[k].expected);
    }
    if (!L->heads || !L->dim)
        return FILE_ERROR("%s line %d: a layer needs heads=H and dim=d (the head width)", path,
                          line);
    if (L->skip && L->residual == 1)
        return FILE_ERROR("%s line %d: skip=%s and residual=yes; the skip is the layer's "
                          "residual (TransformerConv's root_weight)", path, line,
                          L->skip == 1 ? "sum" : "gate");
    return 0;
}

int model_file_read(run_opts_t *o, const char *path, const char *cmd)
{
    for (size_t k = 0; k < COUNT(layer_codes); k++)
        if (o->given[layer_codes[k] - OPT_Q])
            return FILE_ERROR("--%s: the model file %s describes every layer; give it there "
                              "(docs/model-file.md)", option_name(layer_codes[k]), path);
    FILE *f = fopen(path, "r");
    if (!f)
        return FILE_ERROR("--model %s: cannot read: %s", path, strerror(errno));
    model_spec_t *m = &o->model;
    *m = (model_spec_t){.path = path, .readout = 1};
    /* the options the command gave itself, which the file may not change */
    unsigned char given[OPT_COUNT];
    memcpy(given, o->given, sizeof given);
    static char lines[64][512];   /* the options keep pointers into them (--edge-bias ATTR) */
    char buf[4096];
    int line = 0, rc = 0, n_opts = 0, readout_seen = 0;
    while (!rc && fgets(buf, sizeof buf, f)) {
        line++;
        if (!strchr(buf, '\n') && !feof(f)) {
            rc = FILE_ERROR("%s line %d: longer than %zu bytes", path, line, sizeof buf - 2);
            break;
        }
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL, *key = strtok_r(buf, " \t\r\n", &save);
        if (!key)
            continue;
        char *rest = save ? save + strspn(save, " \t") : NULL;
        if (rest)
            rest[strcspn(rest, "\r\n")] = '\0';
        if (strcmp(key, "layer") == 0) {
            if (m->n_layers == MODEL_MAX_LAYERS)
                rc = FILE_ERROR("%s line %d: more than %d layers", path, line, MODEL_MAX_LAYERS);
            else
                rc = layer_line(&m->layers[m->n_layers++], rest ? rest : (char[]){""}, path,
                                line, cmd);
            continue;
        }
        char *value = rest && *rest ? strtok_r(rest, " \t", &save) : NULL;
        char *extra = value ? strtok_r(NULL, " \t", &save) : NULL;
        const struct option *opt = input_option_named(key);
        const int known = strcmp(key, "readout") == 0 || dropout_key(key) >= 0 ||
                          (opt && is_file_code(opt->val));
        if (!known) {
            rc = FILE_ERROR("%s line %d: unknown key '%s'; expected layer, readout, dropout, "
                            "attn-dropout, resid-dropout or one of the model's options (score, "
                            "beta, softcap, slope, sigmoid-bias, alibi, edge-bias, norm, posenc, "
                            "self-loops, directed, undirected)", path, line, key);
        } else if (extra) {
            rc = FILE_ERROR("%s line %d: '%s' after %s %s; one value per line", path, line,
                            extra, key, value);
        } else if ((strcmp(key, "readout") == 0 && readout_seen++) ||
                   (dropout_key(key) >= 0 && m->has_dropout[dropout_key(key)])) {
            rc = FILE_ERROR("%s line %d: %s given twice", path, line, key);
        } else if (strcmp(key, "readout") == 0) {
            m->readout = value && strcmp(value, "linear") == 0;
            if (!value || (m->readout == 0 && strcmp(value, "none") != 0))
                rc = FILE_ERROR("%s line %d: readout %s; expected linear (logits = X Wr^T + br) "
                                "or none (the last layer writes the classes)", path, line,
                                value ? value : "with no value");
        } else if (dropout_key(key) >= 0) {
            char *end = NULL;
            const double p = value ? strtod(value, &end) : NAN;
            if (!value || *end || !(p >= 0 && p < 1))
                rc = FILE_ERROR("%s line %d: %s %s; expected a probability in 0..1 (1 excluded)",
                                path, line, key, value ? value : "with no value");
            else
                m->dropout[dropout_key(key)] = (float)p, m->has_dropout[dropout_key(key)] = 1;
        } else {
            if ((opt->has_arg == required_argument) != (value != NULL))
                rc = FILE_ERROR("%s line %d: %s %s", path, line, key,
                                value ? "takes no value" : "needs a value");
            else if (given[opt->val - OPT_Q])
                rc = FILE_ERROR("--%s is given on the command line and in %s (line %d); give it "
                                "in one place", key, path, line);
            else if (o->given[opt->val - OPT_Q])   /* set by an earlier line */
                rc = FILE_ERROR("%s line %d: %s given twice", path, line, key);
            else if (n_opts == (int)COUNT(lines))
                rc = FILE_ERROR("%s line %d: more than %d options", path, line, (int)COUNT(lines));
            else if (value && strlen(value) >= sizeof lines[0])
                rc = FILE_ERROR("%s line %d: a value longer than %zu bytes", path, line,
                                sizeof lines[0] - 1);
            else if (input_option(o, opt->val, value ? strcpy(lines[n_opts++], value) : NULL,
                                  cmd))
                rc = FILE_ERROR("(that is %s line %d)", path, line);
        }
    }
    fclose(f);
    if (!rc && m->n_layers == 0)
        rc = FILE_ERROR("%s: no layer line (layer heads=H dim=d ...)", path);
    int reads_edges = 0;
    for (int l = 0; !rc && l < m->n_layers; l++) {   /* what the options decide */
        const layer_spec_t *L = &m->layers[l];
        reads_edges |= L->edges;
        if (L->post_norm && o->norm != AG_NORM_LAYER)
            rc = FILE_ERROR("%s line %d: norm=post, and the model has no norm; give the file "
                            "`norm layer`", path, L->line);
        else if (L->edges && strcmp(cli_program, "attngraph") != 0)
            rc = FILE_ERROR("%s line %d: edges=yes: the MPI layer runs no edge features (a "
                            "process's part holds no per-message terms); run it on one process "
                            "(attngraph %s)", path, L->line, cmd);
        else if (L->edges && !o->edge_features)
            rc = FILE_ERROR("%s line %d: edges=yes, and no --edge-features given", path,
                            L->line);
    }
    if (!rc && o->edge_features && !reads_edges)
        rc = FILE_ERROR("--edge-features %s given, and no layer of %s reads them; give a layer "
                        "edges=yes", o->edge_features, path);
    if (rc)
        return rc;
    o->heads = m->layers[0].heads, o->rounds = m->n_layers;
    return 0;
}

/* The layer's output width from input width D, or -1 when the line asks for
   what cannot be (messages name the line). */
static int64_t layer_out(const layer_spec_t *L, int64_t D)
{
    return L->out == OUT_CONCAT ? L->heads * L->dim : L->out == OUT_MEAN ? L->dim
           : L->out_width ? L->out_width : D;
}

int model_layers_check(const model_spec_t *m, int64_t D, int64_t classes, ag_error_t *err)
{
    for (int k = 0; k < m->n_layers; k++) {
        const layer_spec_t *L = &m->layers[k];
        const int64_t out = layer_out(L, D);
        if (L->residual == 1 && out != D)
            return ag_i_fail(err, AG_EINVAL, "%s line %d: layer %d reads width %lld and writes "
                             "%lld, so it cannot add a residual; residual=no, or an output of "
                             "width %lld", m->path, L->line, k + 1, (long long)D,
                             (long long)out, (long long)D);
        D = out;
    }
    if (!m->readout && classes && D != classes)
        return ag_i_fail(err, AG_EINVAL, "%s: readout none, so the last layer writes the "
                         "logits: width %lld; the labels have %lld classes (out=%lld, or "
                         "readout linear)", m->path, (long long)D, (long long)classes,
                         (long long)classes);
    return AG_OK;
}

/* Array k of layer w drawn from the seed as the table says (Gaussian of
   standard deviation 1/sqrt(fan-in), zeros or ones). Arrays 16.. draw from
   streams of their own, so that a model without them draws what it drew
   before they were. */
static void draw_array(float *p, int k, int64_t n, const ag_weights_t *w, uint64_t seed,
                       int layer)
{
    const ag_init_t init = ag_layer_array_info(k)->init;
    if (init != AG_INIT_NORMAL) {
        for (int64_t x = 0; x < n; x++)
            p[x] = init == AG_INIT_ONES ? 1.0f : 0.0f;
        return;
    }
    const uint64_t stream = k < 16 ? 16 * (uint64_t)layer + (uint64_t)k + 1
                                   : (1ull << 32) + 16 * (uint64_t)layer + (uint64_t)k;
    ag_random_normal(p, n, seed, stream, 1.0f / sqrtf((float)ag_layer_array_fan_in(w, k)));
}

/* A layer line's features (ag_layer_has) under the file's score and norm. */
static unsigned layer_features(const layer_spec_t *L, ag_score_kind_t kind, ag_norm_t norm)
{
    return (L->one_projection ? 0u : AG_LAYER_QKV) | (L->out == OUT_LINEAR ? AG_LAYER_WO : 0u) |
           (norm == AG_NORM_LAYER ? AG_LAYER_NORM | AG_LAYER_NORM_BIAS : 0u) |
           (kind == AG_SCORE_ADDITIVE ? AG_LAYER_ADDITIVE : 0u) |
           (kind == AG_SCORE_GATV2 ? AG_LAYER_GATV2 : 0u) | (L->bias ? AG_LAYER_BIAS : 0u) |
           (L->ffn > 0 ? AG_LAYER_FFN : 0u) | (L->qkv_bias ? AG_LAYER_QKV_BIAS : 0u) |
           (L->skip > 0 ? AG_LAYER_SKIP : 0u) | (L->skip == 2 ? AG_LAYER_GATE : 0u) |
           (L->edges ? AG_LAYER_EDGES : 0u);
}

int model_file_layers(ag_weights_t **layers, const run_opts_t *o, int64_t D, int64_t edge_dim,
                      ag_error_t *err)
{
    const model_spec_t *m = &o->model;
    int rc = model_layers_check(m, D, 0, err);   /* (the options' checks: model_file_read) */
    if (rc)
        return rc;
    ag_weights_t *ws = ag_i_calloc(m->n_layers, sizeof *ws, err, "weights");
    if (!ws)
        return ag_i_alloc_status();
    for (int l = 0; l < m->n_layers && !rc; l++) {
        const layer_spec_t *L = &m->layers[l];
        ag_weights_t *w = &ws[l];
        const int64_t out = layer_out(L, D);
        *w = (ag_weights_t){.D = D, .H = L->heads, .d = L->dim,
                            .D_out = L->out == OUT_LINEAR ? out : 0,
                            .mean_heads = L->out == OUT_MEAN,
                            .no_residual = L->skip || (L->residual == 1 ? 0 : L->residual == 0 ||
                                                                              out != D),
                            .act = L->act, .F = L->ffn * out, .ff_act = L->ffn_act,
                            .post_norm = L->post_norm, .edge_dim = L->edges ? edge_dim : 0};
        const unsigned features = layer_features(L, o->score.kind, o->norm);
        char dir[4096];
        if (o->weights)
            snprintf(dir, sizeof dir, m->n_layers > 1 ? "%s/round-%d" : "%s", o->weights, l + 1);
        for (int k = 0; k < AG_LAYER_ARRAYS && !rc; k++) {   /* in order: wo before widths */
            if (!ag_layer_has(features, k))
                continue;
            float **p = ag_layer_array(w, k);
            int64_t shape[3];
            const int ndim = ag_layer_array_shape(w, k, shape);
            if (o->weights) {
                rc = ag_i_weights_load_array(p, dir, ag_layer_array_info(k)->name, ndim, shape, 0,
                                             err);
            } else {
                const int64_t n = ag_layer_array_size(w, k);
                if (!(*p = ag_i_alloc(n, sizeof(float), err, "weights")))
                    rc = ag_i_alloc_status();
                else
                    draw_array(*p, k, n, w, o->seed, l);
            }
        }
        D = out;
    }
    if (rc) {
        for (int l = 0; l < m->n_layers; l++)
            ag_weights_destroy(&ws[l]);
        free(ws);
        return rc;
    }
    *layers = ws;
    return AG_OK;
}

/* x as the fewest digits that read back to the same float (0.6, not 0.600000024). */
static const char *float_text(char *buf, size_t cap, float x)
{
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, cap, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x)
            break;
    }
    return buf;
}

/* Appends to buf [cap] what printf would write. */
#define APPEND(...) (used += (size_t)snprintf(buf + used, used < cap ? cap - used : 0, __VA_ARGS__))

size_t model_file_text(char *buf, size_t cap, const run_opts_t *o, const float dropout[3])
{
    size_t used = 0;
    buf[0] = '\0';
    const model_spec_t *m = &o->model;
    /* the options as model.args writes them, one per line */
    char args[1024];
    model_args(args, sizeof args, o, o->heads, o->rounds);
    APPEND("# attngraph model (docs/model-file.md)\n");
    char *save = NULL;
    for (char *w = strtok_r(args, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        const struct option *opt = input_option_named(w + 2);
        char *arg = opt && opt->has_arg == required_argument ? strtok_r(NULL, " ", &save) : NULL;
        if (!opt || !is_file_code(opt->val))
            continue;   /* heads, rounds, no-residual: the layer lines' */
        APPEND("%s%s%s\n", w + 2, arg ? " " : "", arg ? arg : "");
    }
    char num[32];
    for (int k = 0; k < 3; k++)
        if (dropout[k] > 0)
            APPEND("%s %s\n", dropout_names[k], float_text(num, sizeof num, dropout[k]));
    APPEND("readout %s\n", m->readout ? "linear" : "none");
    for (int l = 0; l < m->n_layers; l++) {
        const layer_spec_t *L = &m->layers[l];
        APPEND("layer heads=%lld dim=%lld", (long long)L->heads, (long long)L->dim);
        if (L->out == OUT_LINEAR && L->out_width)
            APPEND(" out=%lld", (long long)L->out_width);
        else if (L->out != OUT_LINEAR)
            APPEND(" out=%s", L->out == OUT_CONCAT ? "concat" : "mean");
        APPEND(" projection=%s bias=%s act=%s", L->one_projection ? "one" : "qkv",
               L->bias ? "yes" : "no", act_names[L->act]);
        if (L->residual >= 0)
            APPEND(" residual=%s", L->residual ? "yes" : "no");
        if (L->ffn)
            APPEND(" ffn=%lld ffn_act=%s", (long long)L->ffn, act_names[L->ffn_act]);
        if (L->qkv_bias)
            APPEND(" qkv_bias=yes");
        if (L->skip)
            APPEND(" skip=%s", L->skip == 1 ? "sum" : "gate");
        if (L->post_norm)
            APPEND(" norm=post");
        if (L->edges)
            APPEND(" edges=yes");
        APPEND("\n");
    }
    return used;
}
