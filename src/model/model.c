/*
 * A model as one object (ag_model_t): its description (spec.c), its layers'
 * weights and its readout. ag_model_init draws one as `attngraph train
 * --model FILE` does, ag_model_load reads the folder `train --save` writes,
 * and ag_model_run and ag_model_predict run it on a graph: what a C program
 * needs to use a trained model in three calls.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "model/model.h"

/* Array k of layer w drawn from the seed as the table says (Gaussian of
   standard deviation 1/sqrt(fan-in), zeros or ones). Layer l's array k draws
   from stream 16 l + k + 1; arrays 16.. from streams of their own, so that a
   model without them draws what it drew before they were. */
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

void ag_i_model_layers_free(ag_weights_t *layers, int n)
{
    for (int l = 0; layers && l < n; l++)
        ag_weights_destroy(&layers[l]);
    free(layers);
}

int ag_i_model_layers(ag_weights_t **layers, const ag_model_spec_t *spec, int64_t D,
                      int64_t edge_dim, const char *dir, uint64_t seed, ag_error_t *err)
{
    *layers = NULL;
    ag_weights_t *ws = ag_calloc(spec->n_layers, sizeof *ws, err, "weights");
    if (!ws)
        return ag_alloc_status();
    int rc = AG_OK;
    for (int l = 0; l < spec->n_layers && !rc; l++) {
        const ag_layer_spec_t *L = &spec->layers[l];
        ag_weights_t *w = &ws[l];
        ag_layer_spec_shape(w, L, D, edge_dim);
        const unsigned features = ag_layer_spec_features(L, spec->score.kind, spec->norm);
        char sub[4096];
        if (dir)
            snprintf(sub, sizeof sub, spec->n_layers > 1 ? "%s/round-%d" : "%s", dir, l + 1);
        for (int k = 0; k < AG_LAYER_ARRAYS && !rc; k++) {   /* in order: wo before widths */
            if (!ag_layer_has(features, k))
                continue;
            float **p = ag_layer_array(w, k);
            int64_t shape[3];
            const int ndim = ag_layer_array_shape(w, k, shape);
            if (dir) {
                rc = ag_i_weights_load_array(p, sub, ag_layer_array_info(k)->name, ndim, shape,
                                             0, err);
            } else {
                const int64_t n = ag_layer_array_size(w, k);
                if (!(*p = ag_alloc(n, sizeof(float), err, "weights")))
                    rc = ag_alloc_status();
                else
                    draw_array(*p, k, n, w, seed, l);
            }
        }
        D = ag_layer_width_out(w);
    }
    if (rc) {
        ag_i_model_layers_free(ws, spec->n_layers);
        return rc;
    }
    *layers = ws;
    return AG_OK;
}

/* The first layer's wq of a saved model (dir/round-1/ with round_dirs, else
   dir): its rows H*d, and its columns, the input's width D. */
static int saved_width(const char *dir, int round_dirs, int64_t *D,
                       ag_error_t *err)
{
    char path[4096];
    snprintf(path, sizeof path, round_dirs ? "%s/round-1/wq.npy" : "%s/wq.npy", dir);
    ag_array_t a;
    int rc = ag_array_read_npy(&a, path, err);
    if (rc)
        return rc;
    *D = a.shape[a.ndim - 1];
    ag_array_destroy(&a);
    return AG_OK;
}

/* The edge features' width of a saved model: the first edges=yes layer's wedge columns. */
static int saved_edge_width(const char *dir, const ag_model_spec_t *spec, int64_t *edge_dim,
                            ag_error_t *err)
{
    *edge_dim = 0;
    for (int l = 0; l < spec->n_layers; l++)
        if (spec->layers[l].edges) {
            char path[4096];
            snprintf(path, sizeof path, spec->n_layers > 1 ? "%s/round-%d/wedge.npy"
                                                           : "%s/wedge.npy", dir, l + 1);
            ag_array_t a;
            int rc = ag_array_read_npy(&a, path, err);
            if (rc)
                return rc;
            *edge_dim = a.shape[a.ndim - 1];
            ag_array_destroy(&a);
            break;
        }
    return AG_OK;
}

void ag_model_destroy(ag_model_t *m)
{
    if (!m)
        return;
    ag_i_model_layers_free(m->layers, m->spec.n_layers);
    free(m->wr);
    free(m->br);
    memset(m, 0, sizeof *m);
}

int64_t ag_model_width_out(const ag_model_t *m)
{
    return m->spec.n_layers ? ag_layer_width_out(&m->layers[m->spec.n_layers - 1]) : m->D;
}

/* An array's shape as "[3, 8]". */
static const char *shape_text(char *buf, size_t cap, const ag_array_t *a)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < a->ndim && used < cap; k++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", k ? ", " : "",
                                 (long long)a->shape[k]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
    return buf;
}

/* dir/readout.npy [C, W] and dir/readout_bias.npy [C] (zeros when the folder
   has none): the one reader of a folder's readout, the library's and the
   command line's. */
int ag_i_readout_read(const char *dir, int64_t W, int64_t *C, float **wr, float **br,
                      ag_error_t *err)
{
    char path[4096], bias_path[4096], got[96];
    ag_array_t w = {0}, b = {0};
    *C = 0, *wr = *br = NULL;
    snprintf(path, sizeof path, "%s/readout.npy", dir);
    snprintf(bias_path, sizeof bias_path, "%s/readout_bias.npy", dir);
    int rc = ag_array_read_npy(&w, path, err);
    if (!rc && (w.ndim != 2 || w.shape[0] < 1 || w.shape[1] != W))
        rc = ag_fail(err, AG_EINVAL, "%s is %s; expected [C, %lld]: a row of the states' "
                     "width a class", path, shape_text(got, sizeof got, &w), (long long)W);
    const int has_bias = !rc && access(bias_path, F_OK) == 0;
    if (has_bias && !(rc = ag_array_read_npy(&b, bias_path, err)) &&
        (b.ndim != 1 || b.shape[0] != w.shape[0]))
        rc = ag_fail(err, AG_EINVAL, "%s is %s; expected [%lld], one a class of %s", bias_path,
                     shape_text(got, sizeof got, &b), (long long)w.shape[0], path);
    if (!rc && !has_bias && !(b.data = ag_calloc(w.shape[0], sizeof(float), err, "readout")))
        rc = ag_alloc_status();
    if (rc) {
        ag_array_destroy(&w), ag_array_destroy(&b);
        return rc;
    }
    *C = w.shape[0], *wr = w.data, *br = b.data;
    return AG_OK;
}

/* Fills m from spec and its layers; the readout from dir or drawn (classes >
   0). name: where spec came from, in messages. */
static int model_make(ag_model_t *m, const ag_model_spec_t *spec, const char *name, int64_t D,
                      int64_t classes, int64_t edge_dim, const char *dir, uint64_t seed,
                      ag_error_t *err)
{
    memset(m, 0, sizeof *m);
    if (D < 1 || classes < 0 || edge_dim < 0)
        return ag_fail(err, AG_EINVAL, "%s: input width %lld, %lld classes, edge features "
                       "%lld; expected D >= 1 and the others >= 0", name, (long long)D,
                       (long long)classes, (long long)edge_dim);
    if (spec->n_layers < 1 || spec->n_layers > AG_MODEL_MAX_LAYERS)
        return ag_fail(err, AG_EINVAL, "%s: %d layers; expected 1..%d", name, spec->n_layers,
                       AG_MODEL_MAX_LAYERS);
    for (int l = 0; l < spec->n_layers; l++)
        if (spec->layers[l].edges && edge_dim < 1)
            return ag_fail(err, AG_EINVAL, "%s: layer %d reads edge features (edges=yes); "
                           "expected their width >= 1", name, l + 1);
    int rc = ag_model_spec_check(spec, name, D, classes, err);
    if (rc)
        return rc;
    m->spec = *spec, m->D = D, m->edge_dim = edge_dim;
    if ((rc = ag_i_model_layers(&m->layers, spec, D, edge_dim, dir, seed, err))) {
        memset(m, 0, sizeof *m);
        return rc;
    }
    const int64_t W = ag_model_width_out(m);
    if (spec->readout && dir) {
        rc = ag_i_readout_read(dir, W, &m->C, &m->wr, &m->br, err);
    } else if (spec->readout && classes) {
        m->C = classes;
        m->wr = ag_alloc(classes * W, sizeof(float), err, "readout");
        m->br = ag_calloc(classes, sizeof(float), err, "readout");
        if (!m->wr || !m->br)
            rc = ag_alloc_status();
        else   /* stream 101: what `train --model` draws */
            ag_random_normal(m->wr, classes * W, seed, 101, 1.0f / sqrtf((float)W));
    }
    if (rc)
        ag_model_destroy(m);
    return rc;
}

int ag_model_init(ag_model_t *m, const ag_model_spec_t *spec, int64_t D, int64_t classes,
                  int64_t edge_dim, uint64_t seed, ag_error_t *err)
{
    return model_make(m, spec, "model", D, classes, edge_dim, NULL, seed, err);
}

int ag_model_load_arrays(ag_model_t *m, const ag_model_spec_t *spec, const char *dir, int64_t D,
                         int64_t edge_dim, ag_error_t *err)
{
    char name[4096];
    snprintf(name, sizeof name, "%s/model.txt", dir);
    return model_make(m, spec, name, D, 0, edge_dim, dir, 0, err);
}

/* Does dir have readout.npy? (labels: a readout; targets: the states) */
static int has_readout(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/readout.npy", dir);
    return access(path, F_OK) == 0;
}

/* The layers round-1/, round-2/, ... of dir hold (while round-k/wq.npy exists),
   or 0 for none; more than a model takes is refused. */
static int count_round_dirs(const char *dir, int *n, ag_error_t *err)
{
    char path[4096];
    for (*n = 0; *n <= AG_MODEL_MAX_LAYERS; ++*n) {
        snprintf(path, sizeof path, "%s/round-%d/wq.npy", dir, *n + 1);
        if (access(path, F_OK) != 0)
            return AG_OK;
    }
    return ag_fail(err, AG_ELIMIT, "%s: more than %d layers (round-1/ .. round-%d/ and on); a "
                   "model holds up to %d", dir, AG_MODEL_MAX_LAYERS, AG_MODEL_MAX_LAYERS + 1,
                   AG_MODEL_MAX_LAYERS);
}

/* The model of a folder without model.txt: its layers as their files have
   them (ag_weights_load: shared or per-node arrays, the optional ones where
   present), one from dir that spec->rounds rounds share or one a round from
   dir/round-k/, under spec's one layer (model.args', or the defaults with
   the heads given); its readout where it has one and it is wanted. Arrays
   alone with ln_weight.npy say pre-norm, as Python's GraphAttention.load
   reads them. */
static int load_as_found(ag_model_t *m, ag_model_spec_t *spec, const char *dir, int has_args,
                         int readout, ag_error_t *err)
{
    int n;
    int rc = count_round_dirs(dir, &n, err);
    if (rc)
        return rc;
    if (has_args && n && spec->rounds != n)
        return ag_fail(err, AG_EINVAL, "%s/model.args says --rounds %d; the folder holds a "
                       "layer a round for %d (round-1/ .. round-%d/)", dir, spec->rounds, n,
                       n);
    const int round_dirs = n > 0;
    const ag_layer_spec_t one = spec->layers[0];
    spec->rounds = round_dirs ? 0 : spec->rounds;
    spec->n_layers = round_dirs ? n : 1;
    m->layers = ag_calloc(spec->n_layers, sizeof *m->layers, err, "weights");
    if (!m->layers)
        return ag_alloc_status();
    for (int l = 0; l < spec->n_layers && !rc; l++) {
        char sub[4096];
        snprintf(sub, sizeof sub, round_dirs ? "%s/round-%d" : "%s", dir, l + 1);
        rc = ag_weights_load(&m->layers[l], sub, one.heads, err);
        spec->layers[l] = one;
        spec->layers[l].dim = m->layers[l].d;
        m->layers[l].no_residual = !one.residual;
    }
    if (!rc && !has_args && m->layers[0].ln_weight)
        spec->norm = AG_NORM_LAYER;
    spec->readout = readout && has_readout(dir);
    if (!rc && spec->readout)
        rc = ag_i_readout_read(dir, ag_layer_width_out(&m->layers[spec->n_layers - 1]), &m->C,
                               &m->wr, &m->br, err);
    if (rc) {
        ag_i_model_layers_free(m->layers, spec->n_layers);
        memset(m, 0, sizeof *m);
        return rc;
    }
    m->spec = *spec, m->D = m->layers[0].D;
    return AG_OK;
}

int ag_model_load(ag_model_t *m, const char *dir, ag_error_t *err)
{
    return ag_model_load_ex(m, dir, NULL, err);
}

int ag_model_load_ex(ag_model_t *m, const char *dir, const ag_model_load_opts_t *opts,
                     ag_error_t *err)
{
    memset(m, 0, sizeof *m);
    const int64_t heads = opts ? opts->heads : 0;
    const int readout = !(opts && opts->no_readout);
    char text[4096], args[4096];
    snprintf(text, sizeof text, "%s/model.txt", dir);
    snprintf(args, sizeof args, "%s/model.args", dir);
    ag_model_spec_t spec;
    const int has_args = access(args, F_OK) == 0;
    if (access(text, F_OK) != 0 && (has_args || heads > 0)) {
        /* the rounds' options alone (model.args), or arrays alone: the defaults,
           one residual layer of the heads given, a round */
        int rc = has_args ? ag_model_args_read(&spec, dir, err) : AG_OK;
        if (!has_args) {
            ag_model_spec_init(&spec);
            spec.n_layers = 1, spec.rounds = 1;
            ag_layer_spec_init(&spec.layers[0]);
            spec.layers[0].heads = heads;
        }
        return rc ? rc : load_as_found(m, &spec, dir, has_args, readout, err);
    }
    /* a model file's folder: every array as the spec says */
    int64_t D, edge_dim;
    int rc = ag_model_spec_read(&spec, text, err);
    if (!rc)
        rc = saved_width(dir, spec.n_layers > 1, &D, err);
    if (!rc)
        rc = saved_edge_width(dir, &spec, &edge_dim, err);
    if (!rc && !readout && spec.readout) {   /* the layers alone, as a model without one */
        spec.readout = 0;
        return model_make(m, &spec, text, D, 0, edge_dim, dir, 0, err);
    }
    return rc ? rc : ag_model_load_arrays(m, &spec, dir, D, edge_dim, err);
}

/* ------------------------------------------------------------- saving */

int ag_i_model_items(const ag_weights_t *layers, int n_layers, int64_t C, int64_t width,
                     const float *wr, const float *br, ag_i_folder_item_t *items,
                     char (*names)[64])
{
    int n = 0;
    for (int l = 0; l < n_layers; l++) {
        const ag_weights_t *w = &layers[l];
        for (int k = 0; k < AG_LAYER_ARRAYS; k++) {
            const float *p = *ag_layer_array((ag_weights_t *)w, k);
            if (!p)
                continue;
            if (n_layers > 1)
                snprintf(names[n], 64, "round-%d/%s.npy", l + 1, ag_layer_array_info(k)->name);
            else
                snprintf(names[n], 64, "%s.npy", ag_layer_array_info(k)->name);
            ag_i_folder_item_t *it = &items[n];
            *it = (ag_i_folder_item_t){names[n], p, NULL, 0, {0, 0, 0}, NULL};
            it->ndim = ag_layer_array_shape(w, k, it->shape);
            n++;
        }
    }
    if (C > 0) {
        items[n++] = (ag_i_folder_item_t){"readout.npy", wr, NULL, 2, {C, width, 0}, NULL};
        items[n++] = (ag_i_folder_item_t){"readout_bias.npy", br, NULL, 1, {C, 0, 0}, NULL};
    }
    return n;
}

int ag_model_save(const ag_model_t *m, const char *dir, ag_error_t *err)
{
    if (!m || !m->layers || !dir)
        return ag_fail(err, AG_EINVAL, "ag_model_save: %s is NULL",
                       !dir ? "the folder" : "the model");
    if (m->spec.readout && (m->C < 1 || !m->wr || !m->br))
        return ag_fail(err, AG_EINVAL, "%s: the model has a linear readout and no classes "
                       "(ag_model_init with classes >= 1 draws its Wr)", dir);
    for (int l = 0; l < m->spec.n_layers; l++)
        if (m->layers[l].per_node)
            return ag_fail(err, AG_EINVAL, "%s: layer %d holds per-node weights ([N, H*d, D]), "
                           "which a model file cannot describe; save its arrays as they are "
                           "(ag_weights_load reads them)", dir, l + 1);
    int rc = ag_i_folder_check(dir, NULL, err);
    if (rc)
        return rc;
    const int cap = m->spec.n_layers * AG_LAYER_ARRAYS + 3;
    ag_i_folder_item_t *items = ag_calloc(cap, sizeof *items, err, "the model's files");
    char (*names)[64] = ag_calloc(cap, sizeof *names, err, "the model's files");
    const size_t len = ag_model_spec_text(NULL, 0, &m->spec);
    char *text = ag_alloc((int64_t)len + 1, 1, err, "the model's text");
    if (items && names && text) {
        ag_model_spec_text(text, len + 1, &m->spec);
        int n = ag_i_model_items(m->layers, m->spec.n_layers, m->spec.readout ? m->C : 0,
                                 ag_model_width_out(m), m->wr, m->br, items, names);
        items[n++] = (ag_i_folder_item_t){.name = "model.txt", .text = text};
        rc = ag_i_folder_write(dir, NULL, items, n, err);
    } else {
        rc = ag_alloc_status();
    }
    free(items), free(names), free(text);
    return rc;
}

/* ------------------------------------------------------------- running */

void ag_readout_predict(const float *X, int64_t N, int64_t D, const float *Wr, const float *br,
                        int64_t C, int64_t *pred)
{
    for (int64_t i = 0; i < N; i++) {
        const float *x = X + i * D;
        int64_t best = 0;
        double best_logit = 0;
        for (int64_t c = 0; c < C; c++) {
            double logit = br ? br[c] : 0;
            if (!Wr)   /* no readout: the states are the logits */
                logit += x[c];
            for (int64_t k = 0; Wr && k < D; k++)
                logit += (double)x[k] * Wr[c * D + k];
            if (c == 0 || logit > best_logit)
                best = c, best_logit = logit;
        }
        pred[i] = best;
    }
}

/* nb as the model shapes it (its self-loops) in *copy, made from nb's CSR and
   edge ids: the caller's graph stays as it was. */
int ag_i_nbhd_shaped_copy(ag_nbhd_t *copy, const ag_nbhd_t *nb, ag_self_loops_t self,
                          ag_error_t *err)
{
    int64_t *src = ag_alloc(nb->n_edges ? nb->n_edges : 1, sizeof *src, err, "graph copy");
    if (!src)
        return ag_alloc_status();
    ag_nbhd_sources(nb, 0, nb->n_nodes, src);
    int rc = ag_nbhd_from_csr(copy, nb->n_nodes, nb->edge_ptr, src, err);
    free(src);
    if (!rc && nb->edge_id) {
        if (!(copy->edge_id = ag_alloc(nb->n_edges ? nb->n_edges : 1, sizeof *copy->edge_id,
                                       err, "graph copy")))
            rc = ag_alloc_status();
        else
            memcpy(copy->edge_id, nb->edge_id, (size_t)nb->n_edges * sizeof *copy->edge_id);
    }
    if (!rc)
        rc = ag_nbhd_self_loops(copy, self, err);
    if (rc)
        ag_nbhd_destroy(copy);
    return rc;
}

/* The last layer's states [N, ag_model_width_out] of m on nb (shaped) from X,
   allocated; run with the caller's hooks (o, or NULL). */
static int model_states(const ag_model_t *m, const ag_nbhd_t *nb, const float *X,
                        const float *edge_features, const ag_model_run_opts_t *o,
                        float **states, ag_error_t *err)
{
    const ag_model_spec_t *spec = &m->spec;
    const ag_model_run_opts_t none = {0};
    o = o ? o : &none;
    *states = NULL;
    if (o->ws)   /* nothing to destroy if the run fails */
        memset(o->ws, 0, sizeof *o->ws);
    if (o->done)
        *o->done = 0;
    if (o->edge_bias && (spec->self_loops != AG_SELF_KEEP || ag_model_spec_layer_graphs(spec)))
        return ag_fail(err, AG_EINVAL, "model: edge_bias [E] is in nb's slot order; with the "
                       "model's self-loops (%s) or a graph a layer the messages are others",
                       ag_self_loops_name(spec->self_loops));
    if (spec->edge_bias[0] && !o->edge_bias)
        return ag_fail(err, AG_EINVAL, "model: its score adds the graph's edge attribute "
                       "'%s' (edge-bias), which a graph of the library does not carry; give "
                       "its values (ag_model_run_ex's edge_bias)", spec->edge_bias);
    if (m->edge_dim && !edge_features)
        return ag_fail(err, AG_EINVAL, "model: its layers read edge features; expected "
                       "edge_features [E, %lld]", (long long)m->edge_dim);
    const int64_t N = nb->n_nodes, D = m->D;
    const int L = spec->n_layers, R = spec->rounds ? spec->rounds : L;
    const int64_t widest = ag_rounds_widest(m->layers, L, R);
    /* a connectivity per layer: the graphs first, for their virtual nodes' rows */
    ag_nbhd_t **graphs = NULL;
    int64_t V = 0;
    int rc = AG_OK;
    if (ag_model_spec_layer_graphs(spec)) {   /* and the global heads' graphs after them */
        const char **specs = ag_calloc(2 * R, sizeof *specs, err, "the layers' graphs");
        if (!specs || !(graphs = ag_calloc(2 * R, sizeof *graphs, err, "the layers' graphs"))) {
            free(specs);
            return ag_alloc_status();
        }
        for (int r = 0; r < R; r++) {
            const ag_layer_spec_t *Lr = &spec->layers[L == 1 ? 0 : r];
            specs[r] = Lr->graph, specs[R + r] = Lr->global[0] ? Lr->global : Lr->graph;
        }
        rc = ag_i_layer_graphs(graphs, 2 * R, R, nb, specs, spec->self_loops, &V, err);
        free(specs);
        if (rc) {
            free(graphs);
            return rc;
        }
    }
    /* virtual nodes' rows start at zero; their states are the model's, not the output */
    float *S = ag_calloc((N + V) * widest, sizeof *S, err, "model states");
    if (!S) {
        ag_layer_graphs_free(graphs, 2 * R);
        free(graphs);
        return ag_alloc_status();
    }
    memcpy(S, X, (size_t)(N * D) * sizeof *S);
    if (spec->posenc)
        ag_posenc_sinusoidal(S, N, D);
    ag_nbhd_t shaped;
    rc = !graphs && spec->self_loops != AG_SELF_KEEP
             ? ag_i_nbhd_shaped_copy(&shaped, nb, spec->self_loops, err) : AG_OK;
    const int shape = !graphs && spec->self_loops != AG_SELF_KEEP && !rc;   /* a copy to destroy */
    ag_workspace_t own, *ws = o->ws ? o->ws : &own;
    ag_score_t score = spec->score;
    score.edge_bias = o->edge_bias;
    ag_round_opts_t opts = AG_ROUND_OPTS_INIT;
    opts.score = &score, opts.norm = spec->norm;
    opts.edge_features = edge_features, opts.edge_dim = m->edge_dim;
    opts.graphs = graphs;
    opts.global_graphs = graphs ? graphs + R : NULL;
    opts.on_round = o->on_round, opts.on_progress = o->on_progress, opts.ctx = o->ctx;
    opts.figures = o->figures;
    if (!rc && !(rc = ag_workspace_init(ws, N + V, ag_i_layers_largest_hd(m->layers, L), widest,
                                        err))) {
        rc = ag_rounds_run(graphs ? graphs[0] : shape ? &shaped : nb, m->layers, L, S, R, &opts,
                           ws, o->done, err);
        if (ws == &own || rc)
            ag_workspace_destroy(ws);
    }
    if (shape)
        ag_nbhd_destroy(&shaped);
    ag_layer_graphs_free(graphs, 2 * R);
    free(graphs);
    if (rc)
        free(S);
    else
        *states = S;
    return rc;
}

int ag_model_run_ex(const ag_model_t *m, const ag_nbhd_t *nb, const float *X,
                    const float *edge_features, const ag_model_run_opts_t *opts, float *out,
                    ag_error_t *err)
{
    float *S;
    int rc = model_states(m, nb, X, edge_features, opts, &S, err);
    if (rc)
        return rc;
    const int64_t N = nb->n_nodes, W = ag_model_width_out(m);
    if (m->C) {   /* logits = S Wr^T + br, summed as ag_readout_predict sums them */
        for (int64_t i = 0; i < N; i++)
            for (int64_t c = 0; c < m->C; c++) {
                double z = m->br[c];
                for (int64_t k = 0; k < W; k++)
                    z += (double)S[i * W + k] * m->wr[c * W + k];
                out[i * m->C + c] = (float)z;
            }
    } else {
        memcpy(out, S, (size_t)(N * W) * sizeof *out);
    }
    free(S);
    return AG_OK;
}

int ag_model_run(const ag_model_t *m, const ag_nbhd_t *nb, const float *X,
                 const float *edge_features, float *out, ag_error_t *err)
{
    return ag_model_run_ex(m, nb, X, edge_features, NULL, out, err);
}

int ag_model_predict(const ag_model_t *m, const ag_nbhd_t *nb, const float *X,
                     const float *edge_features, int64_t *pred, ag_error_t *err)
{
    float *S;
    int rc = model_states(m, nb, X, edge_features, NULL, &S, err);
    if (rc)
        return rc;
    const int64_t W = ag_model_width_out(m);
    ag_readout_predict(S, nb->n_nodes, W, m->wr, m->br, m->C ? m->C : W, pred);
    free(S);
    return AG_OK;
}
