/*
 * A model's description as text (docs/model-file.md): one model-wide setting a
 * line (score, norm, self-loops, dropout, readout, ...) and a `layer
 * key=value ...` line per layer. The one parser and the one writer of the
 * format: `train --model FILE` and `run --weights DIR` read it through them,
 * `train --save` writes DIR/model.txt with them, and ag_model_load and
 * Python's load_model read it.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"

#define COUNT(a) (sizeof a / sizeof a[0])

static const char *const score_names[AG_SCORE_KINDS] = {"scaled-dot", "dot", "cosine", "additive",
                                                         "gatv2", "sigmoid", "linear"};
static const char *const self_names[] = {"keep", "on", "off", "replace"};
static const char *const act_names[] = {"none", "relu", "elu", "gelu"};

const char *ag_score_kind_name(ag_score_kind_t kind)
{
    return (unsigned)kind < AG_SCORE_KINDS ? score_names[kind] : "?";
}

int ag_score_kind_parse(const char *name, ag_score_kind_t *kind)
{
    for (int k = 0; k < AG_SCORE_KINDS; k++)
        if (strcmp(name, score_names[k]) == 0)
            return *kind = (ag_score_kind_t)k, 0;
    return -1;
}

const char *ag_self_loops_name(ag_self_loops_t self)
{
    return (unsigned)self < COUNT(self_names) ? self_names[self] : "?";
}

int ag_self_loops_parse(const char *name, ag_self_loops_t *self)
{
    for (int k = 0; k < (int)COUNT(self_names); k++)
        if (strcmp(name, self_names[k]) == 0)
            return *self = (ag_self_loops_t)k, 0;
    return -1;
}

/* ------------------------------------------------------------ layer lines */

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

static const char *act_name(ag_activation_t act)
{
    return (unsigned)act < COUNT(act_names) ? act_names[act] : "?";
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
static int key_heads(ag_layer_spec_t *L, const char *v)
{
    return (L->heads = count_of(v, 4096)) < 0 ? -1 : 0;
}

static int key_dim(ag_layer_spec_t *L, const char *v)
{
    return (L->dim = count_of(v, 1 << 20)) < 0 ? -1 : 0;
}

static int key_ffn(ag_layer_spec_t *L, const char *v)
{
    return (L->ffn = count_of(v, 64)) < 0 ? -1 : 0;
}

static int key_bias(ag_layer_spec_t *L, const char *v) { return yes_no(v, &L->bias); }
static int key_residual(ag_layer_spec_t *L, const char *v) { return yes_no(v, &L->residual); }
static int key_act(ag_layer_spec_t *L, const char *v) { return act_of(v, &L->act); }
static int key_ffn_act(ag_layer_spec_t *L, const char *v) { return act_of(v, &L->ffn_act); }
static int key_qkv_bias(ag_layer_spec_t *L, const char *v) { return yes_no(v, &L->qkv_bias); }
static int key_edges(ag_layer_spec_t *L, const char *v) { return yes_no(v, &L->edges); }

/* A pattern (parsed here, so a mistake names the line), compiled when the
   model meets its graph. */
static int pattern_key(char *to, size_t cap, const char *v)
{
    ag_pattern_t *p;
    if (strlen(v) >= cap || strchr(v, '|') || ag_pattern_parse(&p, v, NULL))
        return -1;
    ag_pattern_free(p);
    snprintf(to, cap, "%s", v);
    return 0;
}

static int key_graph(ag_layer_spec_t *L, const char *v)
{
    return pattern_key(L->graph, sizeof L->graph, v);
}

static int key_global(ag_layer_spec_t *L, const char *v)
{
    return pattern_key(L->global, sizeof L->global, v);
}

static int key_global_heads(ag_layer_spec_t *L, const char *v)
{
    return (L->global_heads = count_of(v, 4095)) < 0 ? -1 : 0;
}

static int key_out(ag_layer_spec_t *L, const char *v)
{
    L->out = strcmp(v, "concat") == 0 ? AG_OUT_CONCAT
             : strcmp(v, "mean") == 0 ? AG_OUT_MEAN : AG_OUT_LINEAR;
    return L->out == AG_OUT_LINEAR && (L->out_width = count_of(v, 1 << 24)) < 0 ? -1 : 0;
}

static int key_skip(ag_layer_spec_t *L, const char *v)
{
    static const char *const names[] = {"no", "sum", "gate"};
    for (int k = 0; k < 3; k++)
        if (strcmp(v, names[k]) == 0)
            return L->skip = k, 0;
    return -1;
}

static int key_norm(ag_layer_spec_t *L, const char *v)
{
    L->post_norm = strcmp(v, "post") == 0;
    return L->post_norm || strcmp(v, "pre") == 0 ? 0 : -1;
}

static int key_projection(ag_layer_spec_t *L, const char *v)
{
    L->one_projection = strcmp(v, "one") == 0;
    return L->one_projection || strcmp(v, "qkv") == 0 ? 0 : -1;
}

static const struct {
    const char *key;
    int (*parse)(ag_layer_spec_t *L, const char *v);
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
    {"graph", key_graph, "a pattern over the model's graph, such as graph+expander:3 or "
     "hops:2 (docs/patterns.md; no spaces, one layer's)"},
    {"global", key_global, "a pattern over the model's graph for the global heads, such as "
     "expander:3 or complete (docs/patterns.md; no spaces)"},
    {"global_heads", key_global_heads, "how many of the heads attend over global=, an "
     "integer in 1..heads-1"},
};

void ag_layer_spec_init(ag_layer_spec_t *L)
{
    *L = (ag_layer_spec_t){.residual = -1, .ffn_act = AG_ACT_GELU};
}

/* One `layer key=value ...` line (its words after `layer`, changed in place) into L. */
static int layer_line(ag_layer_spec_t *L, char *words, const char *path, int line,
                      ag_error_t *err)
{
    ag_layer_spec_init(L);
    L->line = line;
    unsigned seen = 0;
    char *save = NULL;
    for (char *w = strtok_r(words, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        char *v = strchr(w, '=');
        if (!v || !v[1])
            return ag_fail(err, AG_EFORMAT, "%s line %d: '%s' is not key=value (heads=8, "
                           "dim=8, out=concat, ...)", path, line, w);
        *v++ = '\0';
        size_t k = 0;
        while (k < COUNT(layer_keys) && strcmp(w, layer_keys[k].key) != 0)
            k++;
        if (k == COUNT(layer_keys))
            return ag_fail(err, AG_EFORMAT, "%s line %d: unknown layer key '%s'; expected "
                           "heads, dim, out, projection, bias, act, residual, ffn, ffn_act, "
                           "qkv_bias, skip, norm, edges, graph, global or global_heads", path, line, w);
        if (seen & 1u << k)
            return ag_fail(err, AG_EFORMAT, "%s line %d: %s given twice", path, line, w);
        seen |= 1u << k;
        if (layer_keys[k].parse(L, v) != 0)
            return ag_fail(err, AG_EINVAL, "%s line %d: %s=%s; expected %s", path, line, w, v,
                           layer_keys[k].expected);
    }
    if (!L->heads || !L->dim)
        return ag_fail(err, AG_EFORMAT, "%s line %d: a layer needs heads=H and dim=d (the "
                       "head width)", path, line);
    if (L->skip && L->residual == 1)
        return ag_fail(err, AG_EINVAL, "%s line %d: skip=%s and residual=yes; the skip is "
                       "the layer's residual (TransformerConv's root_weight)", path, line,
                       L->skip == 1 ? "sum" : "gate");
    if (L->global_heads && !L->global[0])
        return ag_fail(err, AG_EINVAL, "%s line %d: global_heads=%lld without global=SPEC "
                       "(the connectivity those heads attend over)", path, line,
                       (long long)L->global_heads);
    if (L->global[0] && L->heads < 2)
        return ag_fail(err, AG_EINVAL, "%s line %d: global=%s with heads=1; expected heads "
                       ">= 2: the local heads and the global ones", path, line, L->global);
    if (L->global[0] && !L->global_heads)
        L->global_heads = L->heads / 2;
    if (L->global[0] && L->global_heads >= L->heads)
        return ag_fail(err, AG_EINVAL, "%s line %d: global_heads=%lld of heads=%lld; expected "
                       "1..%lld, leaving a local head", path, line, (long long)L->global_heads,
                       (long long)L->heads, (long long)L->heads - 1);
    if (L->global[0] && L->edges)
        return ag_fail(err, AG_EINVAL, "%s line %d: global=%s and edges=yes; edge features "
                       "are the graph's messages, and the global heads read other edges", path,
                       line, L->global);
    return AG_OK;
}

/* ------------------------------------------------------ model-wide lines */

static const struct {
    const char *name;
    int takes_value;
} model_keys[AG_MODEL_KEYS] = {
    [AG_KEY_SCORE] = {"score", 1}, [AG_KEY_BETA] = {"beta", 1},
    [AG_KEY_SOFTCAP] = {"softcap", 1}, [AG_KEY_SLOPE] = {"slope", 1},
    [AG_KEY_SIGMOID_BIAS] = {"sigmoid-bias", 1}, [AG_KEY_ALIBI] = {"alibi", 0},
    [AG_KEY_EDGE_BIAS] = {"edge-bias", 1}, [AG_KEY_NORM] = {"norm", 1},
    [AG_KEY_POSENC] = {"posenc", 1}, [AG_KEY_SELF_LOOPS] = {"self-loops", 1},
    [AG_KEY_DIRECTED] = {"directed", 0}, [AG_KEY_UNDIRECTED] = {"undirected", 0},
    [AG_KEY_DROPOUT] = {"dropout", 1}, [AG_KEY_ATTN_DROPOUT] = {"attn-dropout", 1},
    [AG_KEY_RESID_DROPOUT] = {"resid-dropout", 1}, [AG_KEY_READOUT] = {"readout", 1},
    [AG_KEY_ROUNDS] = {"rounds", 1},
};

const char *ag_model_key_name(ag_model_key_t key)
{
    return (unsigned)key < AG_MODEL_KEYS ? model_keys[key].name : "?";
}

/* A number for key k: min its least (above: excluded; min <= -1e30: any). */
static int real_value(double *out, const char *v, const char *path, int line, const char *key,
                      double min, int above, ag_error_t *err)
{
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (!errno && end != v && !*end && isfinite(x) && fabs(x) > FLT_MAX)   /* held as float */
        return ag_fail(err, AG_EINVAL, "%s line %d: %s '%s' is beyond float32's range "
                       "(%.3g)", path, line, key, v, (double)FLT_MAX);
    if (errno || end == v || *end || !isfinite(x) || x < min || (above && x == min)) {
        if (min <= -1e30)
            return ag_fail(err, AG_EINVAL, "%s line %d: %s '%s' is not a number", path, line,
                           key, v);
        return ag_fail(err, AG_EINVAL, "%s line %d: %s '%s' is not a number %s %g", path,
                       line, key, v, above ? ">" : ">=", min);
    }
    *out = x;
    return AG_OK;
}

/* The value v (NULL for a switch) of model-wide key k into spec. */
static int model_value(ag_model_spec_t *spec, ag_model_key_t k, const char *v, const char *path,
                       int line, ag_error_t *err)
{
    const char *key = model_keys[k].name;
    double x = 0;
    int rc = AG_OK;
    switch (k) {
    case AG_KEY_SCORE:
        if (ag_score_kind_parse(v, &spec->score.kind))
            rc = ag_fail(err, AG_EINVAL, "%s line %d: score '%s': expected scaled-dot, dot, "
                         "cosine, additive, gatv2, sigmoid or linear", path, line, v);
        break;
    case AG_KEY_BETA:
        if (!(rc = real_value(&x, v, path, line, key, 0, 0, err)))
            spec->score.beta = (float)x;
        break;
    case AG_KEY_SOFTCAP:
        if (!(rc = real_value(&x, v, path, line, key, 0, 1, err)))
            spec->score.softcap = (float)x;
        break;
    case AG_KEY_SLOPE:
        if (!(rc = real_value(&x, v, path, line, key, -1e30, 0, err)))
            spec->score.slope = (float)x;
        break;
    case AG_KEY_SIGMOID_BIAS:
        if (!(rc = real_value(&x, v, path, line, key, -1e30, 0, err)))
            spec->score.sigmoid_bias = (float)x, spec->score.has_sigmoid_bias = 1;
        break;
    case AG_KEY_ALIBI: spec->score.alibi = 1; break;
    case AG_KEY_EDGE_BIAS:
        if (strlen(v) >= sizeof spec->edge_bias)
            rc = ag_fail(err, AG_ELIMIT, "%s line %d: a value longer than %zu bytes", path,
                         line, sizeof spec->edge_bias - 1);
        else
            strcpy(spec->edge_bias, v);
        break;
    case AG_KEY_NORM:
        if (strcmp(v, "layer") != 0 && strcmp(v, "none") != 0)
            rc = ag_fail(err, AG_EINVAL, "%s line %d: norm '%s': expected layer or none", path,
                         line, v);
        spec->norm = v[0] == 'l' ? AG_NORM_LAYER : AG_NORM_NONE;
        break;
    case AG_KEY_POSENC:
        if (strcmp(v, "sinusoidal") != 0 && strcmp(v, "none") != 0)
            rc = ag_fail(err, AG_EINVAL, "%s line %d: posenc '%s': expected sinusoidal or "
                         "none", path, line, v);
        spec->posenc = v[0] == 's';
        break;
    case AG_KEY_SELF_LOOPS:
        if (ag_self_loops_parse(v, &spec->self_loops))
            rc = ag_fail(err, AG_EINVAL, "%s line %d: self-loops '%s': expected on, off, keep "
                         "or replace", path, line, v);
        break;
    case AG_KEY_DIRECTED: spec->directed = 1; break;
    case AG_KEY_UNDIRECTED: spec->directed = 0; break;
    case AG_KEY_DROPOUT: case AG_KEY_ATTN_DROPOUT: case AG_KEY_RESID_DROPOUT: {
        char *end = NULL;
        const double p = strtod(v, &end);
        if (*end || !(p >= 0 && p < 1))
            rc = ag_fail(err, AG_EINVAL, "%s line %d: %s %s; expected a probability in 0..1 "
                         "(1 excluded)", path, line, key, v);
        spec->dropout[k - AG_KEY_DROPOUT] = (float)p;
        break;
    }
    case AG_KEY_READOUT:
        spec->readout = strcmp(v, "linear") == 0;
        if (!spec->readout && strcmp(v, "none") != 0)
            rc = ag_fail(err, AG_EINVAL, "%s line %d: readout %s; expected linear (logits = X "
                         "Wr^T + br) or none (the last layer writes the classes)", path, line,
                         v);
        break;
    case AG_KEY_ROUNDS: {
        char *end = NULL;
        errno = 0;
        const long r = strtol(v, &end, 10);
        if (errno || end == v || *end || r < 1 || r > 1000000)
            rc = ag_fail(err, AG_EINVAL, "%s line %d: rounds %s; expected a count of rounds in "
                         "1..1000000 (the one layer run that many times)", path, line, v);
        spec->rounds = (int)r;
        break;
    }
    case AG_MODEL_KEYS:
        break;
    }
    return rc;
}

int ag_i_model_key_set(ag_model_spec_t *spec, const char *key, const char *value,
                       const char *path, int line, ag_error_t *err)
{
    int k = 0;
    while (k < AG_MODEL_KEYS && strcmp(key, model_keys[k].name) != 0)
        k++;
    if (k == AG_MODEL_KEYS || model_keys[k].takes_value != (value != NULL))
        return ag_fail(err, AG_EFORMAT, "%s: unexpected '%s%s%s'", path, key, value ? " " : "",
                       value ? value : "");
    spec->line[k] = line;
    return model_value(spec, (ag_model_key_t)k, value, path, line, err);
}

void ag_model_spec_init(ag_model_spec_t *spec)
{
    memset(spec, 0, sizeof *spec);
    ag_score_init(&spec->score, AG_SCORE_SCALED_DOT);
    spec->directed = -1;
    spec->readout = 1;
}

/* One line of the text (changed in place; its comment cut). */
static int spec_line(ag_model_spec_t *spec, char *buf, const char *path, int line,
                     ag_error_t *err)
{
    char *hash = strchr(buf, '#');
    if (hash)
        *hash = '\0';
    char *save = NULL, *key = strtok_r(buf, " \t\r\n", &save);
    if (!key)
        return AG_OK;
    char *rest = save ? save + strspn(save, " \t") : NULL;
    if (rest)
        rest[strcspn(rest, "\r\n")] = '\0';
    if (strcmp(key, "layer") == 0) {
        if (spec->n_layers == AG_MODEL_MAX_LAYERS)
            return ag_fail(err, AG_ELIMIT, "%s line %d: more than %d layers", path, line,
                           AG_MODEL_MAX_LAYERS);
        return layer_line(&spec->layers[spec->n_layers++], rest ? rest : (char[]){""}, path,
                          line, err);
    }
    char *value = rest && *rest ? strtok_r(rest, " \t", &save) : NULL;
    char *extra = value ? strtok_r(NULL, " \t", &save) : NULL;
    int k = 0;
    while (k < AG_MODEL_KEYS && strcmp(key, model_keys[k].name) != 0)
        k++;
    if (k == AG_MODEL_KEYS && (!strcmp(key, "vocab") || !strcmp(key, "block")))
        return ag_fail(err, AG_EFORMAT, "%s line %d: '%s' is a language model's key: the "
                       "folder is one `lm train --save` wrote (ag_lm_model_load, `attngraph "
                       "lm sample --model`, attngraph.lm.LM.load read it)", path, line, key);
    if (k == AG_MODEL_KEYS)
        return ag_fail(err, AG_EFORMAT, "%s line %d: unknown key '%s'; expected layer, "
                       "readout, dropout, attn-dropout, resid-dropout or one of the model's "
                       "options (score, beta, softcap, slope, sigmoid-bias, alibi, edge-bias, "
                       "norm, posenc, self-loops, directed, undirected)", path, line, key);
    if (extra)
        return ag_fail(err, AG_EFORMAT, "%s line %d: '%s' after %s %s; one value per line",
                       path, line, extra, key, value);
    if (spec->line[k])
        return ag_fail(err, AG_EFORMAT, "%s line %d: %s given twice", path, line, key);
    if (model_keys[k].takes_value != (value != NULL))
        return ag_fail(err, AG_EFORMAT, "%s line %d: %s %s", path, line, key,
                       value ? "takes no value" : "needs a value");
    spec->line[k] = line;
    return model_value(spec, (ag_model_key_t)k, value, path, line, err);
}

int ag_model_spec_parse(ag_model_spec_t *spec, const char *text, const char *path,
                        ag_error_t *err)
{
    ag_model_spec_init(spec);
    char buf[4096];
    int line = 0, rc = AG_OK;
    for (const char *at = text; !rc && *at;) {
        const size_t len = strcspn(at, "\n");
        line++;
        if (len > sizeof buf - 2)
            return ag_fail(err, AG_ELIMIT, "%s line %d: longer than %zu bytes", path, line,
                           sizeof buf - 2);
        memcpy(buf, at, len);
        buf[len] = '\0';
        at += len + (at[len] == '\n');
        rc = spec_line(spec, buf, path, line, err);
    }
    if (!rc && spec->n_layers == 0)
        rc = ag_fail(err, AG_EFORMAT, "%s: no layer line (layer heads=H dim=d ...)", path);
    if (!rc && spec->rounds && spec->n_layers != 1)
        rc = ag_fail(err, AG_EINVAL, "%s line %d: rounds %d runs one layer %d times, its "
                     "weights shared; the file has %d layer lines (give one, or no rounds line "
                     "for a layer a round)", path, spec->line[AG_KEY_ROUNDS], spec->rounds,
                     spec->rounds, spec->n_layers);
    if (!rc && spec->line[AG_KEY_DIRECTED] && spec->line[AG_KEY_UNDIRECTED])
        rc = ag_fail(err, AG_EINVAL, "%s line %d: directed and undirected; give one", path,
                     spec->line[AG_KEY_UNDIRECTED] > spec->line[AG_KEY_DIRECTED]
                           ? spec->line[AG_KEY_UNDIRECTED] : spec->line[AG_KEY_DIRECTED]);
    if (rc)   /* zeroed on failure, as every out-parameter */
        memset(spec, 0, sizeof *spec);
    return rc;
}

int ag_model_spec_read(ag_model_spec_t *spec, const char *path, ag_error_t *err)
{
    char *text;
    size_t n;
    int rc = ag_i_read_text(path, &text, &n, err);
    if (rc)
        return rc;
    if (strlen(text) != n)
        rc = ag_fail(err, AG_EFORMAT, "%s: a NUL byte at offset %zu; expected a text",
                     path, strlen(text));
    else
        rc = ag_model_spec_parse(spec, text, path, err);
    free(text);
    return rc;
}

/* ------------------------------------------------------------- the text */

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

size_t ag_model_spec_text(char *buf, size_t cap, const ag_model_spec_t *spec)
{
    size_t used = 0;
    if (cap)
        buf[0] = '\0';
    const ag_score_t *s = &spec->score, def = AG_SCORE_INIT;
    /* the model's options: what differs from the defaults, each as its float32 %.9g */
    APPEND("# attngraph model (docs/model-file.md)\n");
    if (s->kind)
        APPEND("score %s\n", ag_score_kind_name(s->kind));
    if (s->beta != def.beta)
        APPEND("beta %.9g\n", (double)s->beta);
    if (s->softcap != def.softcap)
        APPEND("softcap %.9g\n", (double)s->softcap);
    if (s->slope != def.slope && (s->kind == AG_SCORE_ADDITIVE || s->kind == AG_SCORE_GATV2))
        APPEND("slope %.9g\n", (double)s->slope);
    if (s->has_sigmoid_bias)
        APPEND("sigmoid-bias %.9g\n", (double)s->sigmoid_bias);
    if (s->alibi)
        APPEND("alibi\n");
    if (spec->edge_bias[0])
        APPEND("edge-bias %s\n", spec->edge_bias);
    if (spec->norm == AG_NORM_LAYER)
        APPEND("norm layer\n");
    if (spec->posenc)
        APPEND("posenc sinusoidal\n");
    if (spec->self_loops != AG_SELF_KEEP)
        APPEND("self-loops %s\n", ag_self_loops_name(spec->self_loops));
    if (spec->directed >= 0)
        APPEND("%s\n", spec->directed ? "directed" : "undirected");
    char num[32];
    for (int k = 0; k < 3; k++)
        if (spec->dropout[k] > 0)
            APPEND("%s %s\n", model_keys[AG_KEY_DROPOUT + k].name,
                   float_text(num, sizeof num, spec->dropout[k]));
    APPEND("readout %s\n", spec->readout ? "linear" : "none");
    if (spec->rounds)
        APPEND("rounds %d\n", spec->rounds);
    for (int l = 0; l < spec->n_layers; l++) {
        const ag_layer_spec_t *L = &spec->layers[l];
        APPEND("layer heads=%lld dim=%lld", (long long)L->heads, (long long)L->dim);
        if (L->out == AG_OUT_LINEAR && L->out_width)
            APPEND(" out=%lld", (long long)L->out_width);
        else if (L->out != AG_OUT_LINEAR)
            APPEND(" out=%s", L->out == AG_OUT_CONCAT ? "concat" : "mean");
        APPEND(" projection=%s bias=%s act=%s", L->one_projection ? "one" : "qkv",
               L->bias ? "yes" : "no", act_name(L->act));
        if (L->residual >= 0)
            APPEND(" residual=%s", L->residual ? "yes" : "no");
        if (L->ffn)
            APPEND(" ffn=%lld ffn_act=%s", (long long)L->ffn, act_name(L->ffn_act));
        if (L->qkv_bias)
            APPEND(" qkv_bias=yes");
        if (L->skip)
            APPEND(" skip=%s", L->skip == 1 ? "sum" : "gate");
        if (L->post_norm)
            APPEND(" norm=post");
        if (L->edges)
            APPEND(" edges=yes");
        if (L->graph[0])
            APPEND(" graph=%s", L->graph);
        if (L->global[0])
            APPEND(" global=%s global_heads=%lld", L->global, (long long)L->global_heads);
        APPEND("\n");
    }
    return used;
}

int ag_model_spec_layer_graphs(const ag_model_spec_t *spec)
{
    for (int l = 0; l < spec->n_layers; l++)
        if (spec->layers[l].graph[0] || spec->layers[l].global[0])
            return 1;
    return 0;
}

/* ------------------------------------------------- what the spec decides */

int64_t ag_layer_spec_width_out(const ag_layer_spec_t *L, int64_t D)
{
    return L->out == AG_OUT_CONCAT ? L->heads * L->dim : L->out == AG_OUT_MEAN ? L->dim
           : L->out_width ? L->out_width : D;
}

unsigned ag_layer_spec_features(const ag_layer_spec_t *L, ag_score_kind_t kind, ag_norm_t norm)
{
    return (L->one_projection ? 0u : AG_LAYER_QKV) | (L->out == AG_OUT_LINEAR ? AG_LAYER_WO : 0u) |
           (norm == AG_NORM_LAYER ? AG_LAYER_NORM | AG_LAYER_NORM_BIAS : 0u) |
           (kind == AG_SCORE_ADDITIVE ? AG_LAYER_ADDITIVE : 0u) |
           (kind == AG_SCORE_GATV2 ? AG_LAYER_GATV2 : 0u) | (L->bias ? AG_LAYER_BIAS : 0u) |
           (L->ffn > 0 ? AG_LAYER_FFN : 0u) | (L->qkv_bias ? AG_LAYER_QKV_BIAS : 0u) |
           (L->skip > 0 ? AG_LAYER_SKIP : 0u) | (L->skip == 2 ? AG_LAYER_GATE : 0u) |
           (L->edges ? AG_LAYER_EDGES : 0u);
}

void ag_layer_spec_shape(ag_weights_t *w, const ag_layer_spec_t *L, int64_t D, int64_t edge_dim)
{
    const int64_t out = ag_layer_spec_width_out(L, D);
    *w = (ag_weights_t){.D = D, .H = L->heads, .d = L->dim,
                        .D_out = L->out == AG_OUT_LINEAR ? out : 0,
                        .mean_heads = L->out == AG_OUT_MEAN,
                        .no_residual = L->skip || (L->residual == 1 ? 0 : L->residual == 0 ||
                                                                          out != D),
                        .act = L->act, .F = L->ffn * out, .ff_act = L->ffn_act,
                        .post_norm = L->post_norm, .edge_dim = L->edges ? edge_dim : 0,
                        .global_heads = !L->global[0] ? 0
                                        : L->global_heads ? L->global_heads : L->heads / 2};
}

int ag_model_spec_check(const ag_model_spec_t *spec, const char *path, int64_t D,
                        int64_t classes, ag_error_t *err)
{
    if (spec->n_layers < 1 || spec->n_layers > AG_MODEL_MAX_LAYERS)
        return ag_fail(err, AG_EINVAL, "%s: %d layers; expected 1..%d", path, spec->n_layers,
                       AG_MODEL_MAX_LAYERS);
    if (spec->rounds < 0 || (spec->rounds > 0 && spec->n_layers != 1))
        return ag_fail(err, AG_EINVAL, "%s: rounds %d with %d layers; a count of rounds runs "
                       "one layer, its weights shared", path, spec->rounds, spec->n_layers);
    const int64_t D_in = D;
    int own_graph = 0, edges = 0;   /* lines of a layer with graph= or global=, edges=yes */
    for (int k = 0; k < spec->n_layers; k++) {
        const ag_layer_spec_t *L = &spec->layers[k];
        if (!own_graph && (L->graph[0] || L->global[0]))
            own_graph = k + 1;
        if (!edges && L->edges)
            edges = k + 1;
    }
    if (own_graph && edges)
        return ag_fail(err, AG_EINVAL, "%s line %d: %s=%s, and line %d: edges=yes; a model "
                       "with a graph a layer reads no edge features (their rows are one "
                       "graph's messages)", path, spec->layers[own_graph - 1].line,
                       spec->layers[own_graph - 1].graph[0] ? "graph" : "global",
                       spec->layers[own_graph - 1].graph[0] ? spec->layers[own_graph - 1].graph
                                                           : spec->layers[own_graph - 1].global,
                       spec->layers[edges - 1].line);
    for (int k = 0; k < spec->n_layers; k++) {
        const ag_layer_spec_t *L = &spec->layers[k];
        if (L->global[0] && (L->heads < 2 || L->global_heads < 0 ||
                             L->global_heads >= L->heads))
            return ag_fail(err, AG_EINVAL, "%s line %d: global=%s with heads=%lld and "
                           "global_heads=%lld; expected heads >= 2 and global_heads in 1..%lld "
                           "(0: heads/2)", path, L->line, L->global, (long long)L->heads,
                           (long long)L->global_heads, (long long)L->heads - 1);
        if (!L->global[0] && L->global_heads)
            return ag_fail(err, AG_EINVAL, "%s line %d: global_heads=%lld without global=SPEC",
                           path, L->line, (long long)L->global_heads);
        if (L->post_norm && spec->norm != AG_NORM_LAYER)
            return ag_fail(err, AG_EINVAL, "%s line %d: norm=post, and the model has no norm; "
                           "give the file `norm layer`", path, L->line);
        if (L->global[0] && (spec->score.alibi || spec->edge_bias[0]))
            return ag_fail(err, AG_EINVAL, "%s line %d: global=%s with %s; the global heads "
                           "read edges of their own, which have no %s", path, L->line,
                           L->global, spec->score.alibi ? "alibi" : "edge-bias",
                           spec->score.alibi ? "per-head slopes of the layer's" :
                           "edge attribute");
        if (D <= 0)
            continue;
        const int64_t out = ag_layer_spec_width_out(L, D);
        if (L->residual == 1 && out != D)
            return ag_fail(err, AG_EINVAL, "%s line %d: layer %d reads width %lld and writes "
                           "%lld, so it cannot add a residual; residual=no, or an output of "
                           "width %lld", path, L->line, k + 1, (long long)D, (long long)out,
                           (long long)D);
        D = out;
    }
    if (spec->rounds > 1 && D > 0 && D != D_in)
        return ag_fail(err, AG_EINVAL, "%s line %d: rounds %d runs one layer again on what it "
                       "writes, so it must keep the width: it reads %lld and writes %lld",
                       path, spec->line[AG_KEY_ROUNDS], spec->rounds, (long long)D_in,
                       (long long)D);
    if (D > 0 && !spec->readout && classes > 0 && D != classes)
        return ag_fail(err, AG_EINVAL, "%s: readout none, so the last layer writes the "
                       "logits: width %lld; the labels have %lld classes (out=%lld, or "
                       "readout linear)", path, (long long)D, (long long)classes,
                       (long long)classes);
    return AG_OK;
}
