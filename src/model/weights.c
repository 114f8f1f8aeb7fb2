/*
 * Layer weights: seeded Gaussian initialisation and loading a weights folder
 * (wq.npy, wk.npy, ...). Weights are [out, in] like torch.nn.Linear.weight.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"

/* Uniform in (0, 1) from 64 random bits: 53 of them, never 0. */
static double uniform01(uint64_t bits)
{
    return ((double)(bits >> 11) + 0.5) * 0x1.0p-53;
}

/* Box-Muller pair p of a stream: radius and angle from draws 2p and 2p+1, so
   the numbers are the same for any thread count and any range asked for. */
static void normal_pair(uint64_t state, int64_t p, double *r, double *t)
{
    *r = sqrt(-2.0 * log(uniform01(rng_at(state, (uint64_t)(2 * p)))));
    *t = 6.283185307179586 * uniform01(rng_at(state, (uint64_t)(2 * p + 1)));
}

void ag_random_normal(float *x, int64_t n, uint64_t seed, uint64_t stream, float scale)
{
    const uint64_t state = rng_seed(seed, stream);
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n * 16 >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t p = 0; p < (n + 1) / 2; p++) {
        double r, t;
        normal_pair(state, p, &r, &t);
        x[2 * p] = (float)(r * cos(t)) * scale;
        if (2 * p + 1 < n)
            x[2 * p + 1] = (float)(r * sin(t)) * scale;
    }
}

void ag_i_random_normal_range(float *x, int64_t first, int64_t n, uint64_t seed,
                              uint64_t stream, float scale)
{
    const uint64_t state = rng_seed(seed, stream);
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n * 16 >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const int64_t k = first + i;
        double r, t;
        normal_pair(state, k / 2, &r, &t);
        x[i] = (float)(k % 2 == 0 ? r * cos(t) : r * sin(t)) * scale;
    }
}

void ag_weights_destroy(ag_weights_t *w)
{
    if (!w)
        return;
    for (int k = 0; k < AG_LAYER_ARRAYS; k++)
        free(*ag_layer_array(w, k));
    memset(w, 0, sizeof *w);
}

/* ag_weights_random's draws with per_node rows of per-node projections, those
   of nodes first..first+per_node-1 of a per-node draw for more nodes. */
static int draw(ag_weights_t *w, int64_t D, int64_t H, int64_t d, int64_t per_node, int64_t first,
                uint64_t seed, ag_error_t *err)
{
    memset(w, 0, sizeof *w);
    if (D <= 0 || H <= 0 || d <= 0 || per_node < 0 || first < 0)
        return ag_fail(err, AG_EINVAL, "weights: D=%lld, H=%lld, d=%lld; expected all >= 1",
                       (long long)D, (long long)H, (long long)d);
    const int64_t HD = H * d;
    w->D = D, w->H = H, w->d = d, w->per_node = per_node;
    /* every attention vector (the score reads its own); LayerNorm stays the identity */
    const unsigned features = AG_LAYER_QKV | AG_LAYER_WO | AG_LAYER_ADDITIVE | AG_LAYER_GATV2;
    for (int m = 0; m < AG_LAYER_ARRAYS; m++) {
        if (!ag_layer_has(features, m))
            continue;
        const int64_t n = ag_layer_array_size(w, m);
        float **p = ag_layer_array(w, m);
        if (!(*p = ag_alloc(n, sizeof(float), err, "weights"))) {
            ag_weights_destroy(w);
            return ag_alloc_status();
        }
        const float scale = 1.0f / sqrtf((float)ag_layer_array_fan_in(w, m));
        if (m < 3 && first)   /* the same numbers; the whole draw makes two at a time */
            ag_i_random_normal_range(*p, first * HD * D, n, seed, (uint64_t)m + 1, scale);
        else
            ag_random_normal(*p, n, seed, (uint64_t)m + 1, scale);
    }
    return AG_OK;
}

int ag_weights_random(ag_weights_t *w, int64_t D, int64_t H, int64_t d, int64_t per_node,
                      uint64_t seed, ag_error_t *err)
{
    return draw(w, D, H, d, per_node, 0, seed, err);
}

int ag_i_weights_random_rows(ag_weights_t *w, int64_t D, int64_t H, int64_t d, int64_t first,
                             int64_t rows, uint64_t seed, ag_error_t *err)
{
    if (rows < 0)
        return ag_fail(err, AG_EINVAL, "weights: %lld rows of per-node weights; expected >= 0",
                       (long long)rows);
    return draw(w, D, H, d, rows, first, seed, err);
}

int ag_i_weights_keep_rows(ag_weights_t *w, int64_t first, int64_t rows, ag_error_t *err)
{
    const int64_t per = w->H * w->d * w->D;
    if (!w->per_node || first < 0 || rows < 0 || first + rows > w->per_node)
        return ag_fail(err, AG_EINVAL, "weights: rows %lld..%lld of %lld per-node weights",
                       (long long)first, (long long)(first + rows), (long long)w->per_node);
    if (rows == 0)   /* no rows: the shapes of shared weights, which nothing reads */
        first = 0;
    const int64_t keep = rows ? rows : 1;
    float *kept[3] = {NULL, NULL, NULL};
    for (int m = 0; m < 3; m++)
        if (!(kept[m] = ag_alloc(keep * per, sizeof(float), err, "weights"))) {
            free(kept[0]), free(kept[1]);
            return ag_alloc_status();
        }
    for (int m = 0; m < 3; m++) {
        float **p = ag_layer_array(w, m);
        memcpy(kept[m], *p + first * per, (size_t)(keep * per) * sizeof(float));
        free(*p);
        *p = kept[m];
    }
    w->per_node = rows;
    return AG_OK;
}

int ag_i_weights_load_array(float **out, const char *dir, const char *name, int ndim,
                            const int64_t *want, int optional, ag_error_t *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    *out = NULL;
    FILE *probe = fopen(path, "rb");
    if (!probe && optional)
        return AG_OK;
    if (probe)
        fclose(probe);
    ag_array_t a;
    int rc = ag_array_read_npy(&a, path, err);
    if (rc)
        return rc;
    int ok = a.ndim == ndim;
    for (int k = 0; ok && k < ndim; k++)
        ok = a.shape[k] == want[k];
    if (!ok) {
        char got[96] = "", exp[96] = "";
        for (int k = 0; k < a.ndim; k++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "",
                     (long long)a.shape[k]);
        for (int k = 0; k < ndim; k++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%lld", k ? ", " : "",
                     (long long)want[k]);
        ag_array_destroy(&a);
        return ag_fail(err, AG_EINVAL, "%s is [%s]; expected [%s]%s", path, got, exp,
                       ndim == 2 && strncmp(name, "attn", 4) ? " ([out, in] like "
                       "torch.nn.Linear.weight)" : "");
    }
    *out = a.data;
    return AG_OK;
}

int ag_weights_load(ag_weights_t *w, const char *dir, int64_t H, ag_error_t *err)
{
    memset(w, 0, sizeof *w);
    if (H <= 0)
        return ag_fail(err, AG_EINVAL, "weights: %lld heads; expected >= 1", (long long)H);
    /* wq decides: [H*d, D] shared, or [N, H*d, D] per node */
    char path[4096];
    snprintf(path, sizeof path, "%s/wq.npy", dir);
    ag_array_t a;
    int rc = ag_array_read_npy(&a, path, err);
    if (rc)
        return rc;
    if (a.ndim != 2 && a.ndim != 3) {
        ag_array_destroy(&a);
        return ag_fail(err, AG_EINVAL, "%s has %d dimensions; expected [H*d, D] or per node "
                       "[N, H*d, D]", path, a.ndim);
    }
    const int per_node = a.ndim == 3;
    int64_t shape[3];
    memcpy(shape, a.shape, sizeof shape);
    w->wq = a.data;
    w->per_node = per_node ? shape[0] : 0;
    const int64_t HD = shape[per_node], D = shape[per_node + 1];
    if (HD % H != 0)
        rc = ag_fail(err, AG_EINVAL, "%s has %lld row%s, not a multiple of %lld head%s",
                     path, (long long)HD, HD == 1 ? "" : "s", (long long)H, H == 1 ? "" : "s");
    w->D = D, w->H = H, w->d = HD / H;
    /* the rest of a plain layer's arrays: wk wv wo, then the optional ones */
    for (int k = 1; k <= 8 && !rc; k++) {
        int64_t want[3];
        const int ndim = ag_layer_array_shape(w, k, want);
        rc = ag_i_weights_load_array(ag_layer_array(w, k), dir, ag_layer_array_info(k)->name,
                                     ndim, want, k > 3, err);
    }
    if (rc)
        ag_weights_destroy(w);
    return rc;
}

int64_t ag_layer_width_out(const ag_weights_t *w)
{
    if (w->wo)
        return w->D_out ? w->D_out : w->D;
    return w->mean_heads ? w->d : w->H * w->d;
}

int64_t ag_rounds_widest(const ag_weights_t *layers, int n_layers, int rounds)
{
    int64_t widest = n_layers > 0 ? layers[0].D : 0;
    for (int r = 0; r < rounds && n_layers > 0; r++) {
        const int64_t out = ag_layer_width_out(&layers[n_layers == 1 ? 0 : r]);
        widest = out > widest ? out : widest;
    }
    return widest;
}

int64_t ag_i_layers_largest_hd(const ag_weights_t *layers, int n_layers)
{
    int64_t HD = 0;
    for (int k = 0; k < n_layers; k++)
        HD = layers[k].H * layers[k].d > HD ? layers[k].H * layers[k].d : HD;
    return HD;
}

int ag_weights_grads_init(ag_weights_t *g, const ag_weights_t *w, int layer_norm,
                          ag_error_t *err)
{
    memset(g, 0, sizeof *g);
    if (w->D <= 0 || w->H <= 0 || w->d <= 0 || w->per_node < 0)
        return ag_fail(err, AG_EINVAL, "gradients: weights of D=%lld, H=%lld, d=%lld; expected "
                       "all >= 1", (long long)w->D, (long long)w->H, (long long)w->d);
    g->D = w->D, g->H = w->H, g->d = w->d, g->per_node = w->per_node;
    g->D_out = w->D_out, g->mean_heads = w->mean_heads, g->F = w->F;
    g->post_norm = w->post_norm, g->edge_dim = w->edge_dim, g->no_residual = w->no_residual;
    g->act = w->act, g->ff_act = w->ff_act;   /* the layer the gradients are of */
    /* wq always, LayerNorm's when asked (the sublayer's with one), the rest where w
       has them; in order, so that wo is there before the widths that read it */
    for (int m = 0; m < AG_LAYER_ARRAYS; m++) {
        const float *has = *ag_layer_array((ag_weights_t *)w, m);
        const int wanted = m == 0 || has || (m >= 4 && m < 6 && layer_norm) ||
                           (m >= 14 && m < 16 && layer_norm && w->w1);
        if (wanted && !(*ag_layer_array(g, m) = ag_calloc(ag_layer_array_size(w, m),
                                                          sizeof(float), err, "gradients"))) {
            ag_weights_destroy(g);
            return ag_alloc_status();
        }
    }
    return AG_OK;
}

int ag_weights_add_layer_norm(ag_weights_t *w, ag_error_t *err)
{
    if (w->D <= 0)
        return ag_fail(err, AG_EINVAL, "weights: D=%lld; expected >= 1", (long long)w->D);
    const int64_t width = w->post_norm ? ag_layer_width_out(w) : w->D;
    if (!w->ln_weight) {
        if (!(w->ln_weight = ag_alloc(width, sizeof(float), err, "LayerNorm weight")))
            return ag_alloc_status();
        for (int64_t c = 0; c < width; c++)
            w->ln_weight[c] = 1.0f;
    }
    if (!w->ln_bias && !(w->ln_bias = ag_calloc(width, sizeof(float), err, "LayerNorm bias")))
        return ag_alloc_status();
    return AG_OK;
}

void ag_i_weights_zero(ag_weights_t *w)
{
    for (int k = 0; k < AG_LAYER_ARRAYS; k++) {
        float *p = *ag_layer_array(w, k);
        if (p)
            memset(p, 0, (size_t)ag_layer_array_size(w, k) * sizeof *p);
    }
}
