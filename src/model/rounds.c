/*
 * Message rounds on one process: the round's operations (round.c) on the
 * whole graph, the buffers they keep and the figures of a round. Every
 * projection is y = x W^T with W [out, in], through gemm.c's fixed row
 * blocks (the same bits for any thread count).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "model/model.h"

void ag_workspace_destroy(ag_workspace_t *ws)
{
    if (!ws)
        return;
    free(ws->Q), free(ws->K), free(ws->V), free(ws->M), free(ws->Xn), free(ws->X_prev);
    free(ws->entropy), free(ws->max_weight), free(ws->distance), free(ws->edge_terms);
    memset(ws, 0, sizeof *ws);
}

int ag_workspace_init(ag_workspace_t *ws, int64_t N, int64_t HD, int64_t D, ag_error_t *err)
{
    memset(ws, 0, sizeof *ws);
    if (N <= 0 || HD <= 0 || D <= 0 || N > INT64_MAX / (HD > D ? HD : D))
        return ag_fail(err, AG_EINVAL, "workspace: [%lld, %lld, %lld] is not a valid size",
                       (long long)N, (long long)HD, (long long)D);
    ws->N = N, ws->HD = HD, ws->D = D;
    float **bufs[4] = {&ws->Q, &ws->K, &ws->V, &ws->M};
    for (int b = 0; b < 4; b++)
        if (!(*bufs[b] = ag_alloc(N * HD, sizeof(float), err, "workspace"))) {
            ag_workspace_destroy(ws);
            return ag_alloc_status();
        }
    return AG_OK;   /* Xn and X_prev: by ag_rounds_run, when a run needs them */
}

static int one_projection(const ag_weights_t *w)
{
    return !w->wk && !w->wv;
}

/* Checks layer w (k its index, for messages) for a shape it can run. */
static int layer_check(const ag_weights_t *w, int k, const ag_round_opts_t *o, ag_error_t *err)
{
    if (w->D <= 0 || w->H <= 0 || w->d <= 0 || !w->wq)
        return ag_fail(err, AG_EINVAL, "rounds: layer %d has D=%lld, %lld heads of %lld%s; "
                       "expected sizes >= 1 and wq", k + 1, (long long)w->D, (long long)w->H,
                       (long long)w->d, w->wq ? "" : " and no wq");
    if (!w->wk != !w->wv)
        return ag_fail(err, AG_EINVAL, "rounds: layer %d has %s but not %s; expected both, or "
                       "neither (one projection for queries, keys and values)", k + 1,
                       w->wk ? "wk" : "wv", w->wk ? "wv" : "wk");
    if (w->wo && w->mean_heads)
        return ag_fail(err, AG_EINVAL, "rounds: layer %d has wo and mean_heads; mean_heads "
                       "averages the heads of a layer without wo", k + 1);
    if (w->wo ? w->D_out < 0 : w->D_out != 0)
        return ag_fail(err, AG_EINVAL, "rounds: layer %d has D_out %lld%s; D_out is wo's rows "
                       "(0: D)", k + 1, (long long)w->D_out, w->wo ? "" : " and no wo");
    if ((unsigned)w->act > AG_ACT_GELU)
        return ag_fail(err, AG_EINVAL, "rounds: layer %d has activation %d; expected none, "
                       "relu, elu or gelu", k + 1, (int)w->act);
    if (w->w1 ? w->F <= 0 || !w->w2 || (unsigned)w->ff_act > AG_ACT_GELU
              : w->w2 || w->b1 || w->b2)
        return ag_fail(err, AG_EINVAL, "rounds: layer %d's feed-forward sublayer has F=%lld, "
                       "%s, %s, activation %d; expected F >= 1, w1 and w2 (or neither, and no "
                       "b1 or b2)", k + 1, (long long)w->F, w->w1 ? "w1" : "no w1",
                       w->w2 ? "w2" : "no w2", (int)w->ff_act);
    const int64_t out = ag_layer_width_out(w);
    const int residual = !w->no_residual && !(o && o->no_residual);
    if ((w->wbeta || w->bskip) && !w->wskip)
        return ag_fail(err, AG_EINVAL, "rounds: layer %d has %s but no wskip; the gate and "
                       "the skip's bias need the skip projection", k + 1,
                       w->wbeta ? "wbeta" : "bskip");
    if (w->wskip && residual)
        return ag_fail(err, AG_EINVAL, "rounds: layer %d has a skip projection and a "
                       "residual; the skip is the layer's residual (give it no_residual)",
                       k + 1);
    if (one_projection(w) && (w->bk || w->bv))
        return ag_fail(err, AG_EINVAL, "rounds: layer %d has one projection and %s; its one "
                       "bias is bq", k + 1, w->bk ? "bk" : "bv");
    if (w->post_norm && !(o && o->norm == AG_NORM_LAYER))
        return ag_fail(err, AG_EINVAL, "rounds: layer %d is post-norm, and the options have "
                       "no norm; post_norm moves the options' LayerNorm after the sums", k + 1);
    if (w->wedge ? w->edge_dim <= 0 : w->edge_dim != 0 || w->attn_edge)
        return ag_fail(err, AG_EINVAL, "rounds: layer %d has edge_dim %lld%s%s; expected "
                       "edge_dim >= 1 with wedge, or neither (and no attn_edge)", k + 1,
                       (long long)w->edge_dim, w->wedge ? " and wedge" : ", no wedge",
                       w->attn_edge ? " and attn_edge" : "");
    if (w->wedge) {
        const ag_score_kind_t kind = o && o->score ? o->score->kind : AG_SCORE_SCALED_DOT;
        const ag_score_t *sc = o ? o->score : NULL;
        if (!o || !o->edge_features)
            return ag_fail(err, AG_EINVAL, "rounds: layer %d projects edge features "
                           "(wedge), and the options give none", k + 1);
        if (o->edge_dim != w->edge_dim)
            return ag_fail(err, AG_EINVAL, "rounds: layer %d reads edge features of width "
                           "%lld; the options' are %lld wide", k + 1, (long long)w->edge_dim,
                           (long long)o->edge_dim);
        if ((kind == AG_SCORE_ADDITIVE) != (w->attn_edge != NULL))
            return ag_fail(err, AG_EINVAL, "rounds: layer %d %s; attn_edge [H, d] is the "
                           "additive score's term of the edge features, and only its", k + 1,
                           w->attn_edge ? "has attn_edge under another score"
                                          : "has an additive score without attn_edge");
        if (sc && (sc->edge_pre || sc->edge_key || sc->edge_value))
            return ag_fail(err, AG_EINVAL, "rounds: layer %d projects edge features, and the "
                           "options' score has edge terms of its own; expected one or the "
                           "other", k + 1);
    }
    if (residual && out != w->D)
        return ag_fail(err, AG_EINVAL, "rounds: layer %d writes width %lld from width %lld, "
                       "so it cannot add a residual; give it no_residual", k + 1,
                       (long long)out, (long long)w->D);
    if (w->D > INT32_MAX || w->H * w->d > INT32_MAX || out > INT32_MAX)
        return ag_fail(err, AG_ELIMIT, "rounds: dimensions beyond 2^31 are not "
                       "supported by BLAS");
    return AG_OK;
}

int ag_i_layers_check(const ag_weights_t *layers, int n_layers, int rounds,
                      const ag_round_opts_t *opts, ag_error_t *err)
{
    if (!layers || rounds < 0 || n_layers < 1 || (n_layers > 1 && n_layers < rounds))
        return ag_fail(err, AG_EINVAL, "rounds: %d rounds with %d layers; expected one layer "
                       "for all rounds or one per round", rounds, n_layers);
    for (int k = 0; k < n_layers; k++) {
        int rc = layer_check(&layers[k], k, opts, err);
        if (rc)
            return rc;
    }
    /* each round reads the width the one before wrote */
    for (int r = 1; r < rounds; r++) {
        const ag_weights_t *w = &layers[n_layers == 1 ? 0 : r];
        const ag_weights_t *before = &layers[n_layers == 1 ? 0 : r - 1];
        if (w->D != ag_layer_width_out(before))
            return ag_fail(err, AG_EINVAL, "rounds: layer %d reads width %lld; the layer "
                           "before it writes %lld", n_layers == 1 ? 1 : r + 1,
                           (long long)w->D, (long long)ag_layer_width_out(before));
    }
    return AG_OK;
}

int ag_i_rounds_check(const ag_nbhd_t *nb, const ag_weights_t *layers, int n_layers,
                      int rounds, const ag_round_opts_t *opts, ag_error_t *err)
{
    const int64_t N = nb->n_nodes;
    if (N > INT32_MAX)
        return ag_fail(err, AG_ELIMIT, "rounds: dimensions beyond 2^31 are not "
                       "supported by BLAS");
    int rc = ag_i_layers_check(layers, n_layers, rounds, opts, err);
    for (int r = 0; !rc && opts && opts->graphs && r < rounds; r++) {
        const ag_nbhd_t *g = opts->graphs[r];
        if (!g || g->n_nodes != N)
            return ag_fail(err, AG_EINVAL, "rounds: round %d's graph %s; expected one of the "
                           "graph's %lld nodes", r + 1, !g ? "is NULL" : "has another size",
                           (long long)N);
        if (opts->edge_features)
            return ag_fail(err, AG_EINVAL, "rounds: edge features with a graph per round; "
                           "their rows are one graph's messages");
    }
    for (int r = 0; !rc && r < rounds; r++) {   /* GraphGPS's layers: their global graphs */
        const ag_weights_t *w = &layers[n_layers == 1 ? 0 : r];
        const ag_nbhd_t *g = ag_i_round_global(opts, r);
        if (!w->global_heads)
            continue;
        if (w->global_heads < 0 || w->global_heads >= w->H)
            return ag_fail(err, AG_EINVAL, "rounds: layer %d has %lld global heads of %lld; "
                           "expected 1..%lld", n_layers == 1 ? 1 : r + 1,
                           (long long)w->global_heads, (long long)w->H, (long long)w->H - 1);
        if (!g)
            return ag_fail(err, AG_EINVAL, "rounds: round %d's layer has global heads; its "
                           "global graph is not given (opts.global_graphs)", r + 1);
        if (g->n_nodes != N)
            return ag_fail(err, AG_EINVAL, "rounds: round %d's global graph has %lld nodes; "
                           "expected the graph's %lld", r + 1, (long long)g->n_nodes,
                           (long long)N);
        const ag_score_t *sc = opts->score;
        if (w->wedge || (sc && (sc->alibi || sc->edge_bias)))
            return ag_fail(err, AG_EINVAL, "rounds: round %d's layer has global heads and %s; "
                           "the global graph's edges carry none", r + 1,
                           w->wedge ? "edge features (wedge)" : sc->alibi ? "alibi"
                                                               : "an edge bias");
    }
    for (int k = 0; !rc && k < n_layers; k++) {
        const ag_weights_t *w = &layers[k];
        if (w->per_node && w->per_node != N)
            return ag_fail(err, AG_EINVAL, "rounds: layer %d has per-node weights for %lld "
                           "node%s; the graph has %lld", k + 1, (long long)w->per_node,
                           AG_PLURAL(w->per_node), (long long)N);
    }
    return rc;
}

/* The largest H*d and H of the layers rounds 1..rounds use. */
static void largest_heads(const ag_weights_t *layers, int n_layers, int rounds, int64_t *HD,
                          int64_t *H)
{
    *HD = layers[0].H * layers[0].d, *H = layers[0].H;
    for (int r = 0; r < rounds; r++) {
        const ag_weights_t *w = &layers[n_layers == 1 ? 0 : r];
        *HD = w->H * w->d > *HD ? w->H * w->d : *HD;
        *H = w->H > *H ? w->H : *H;
    }
}

int ag_i_layers_mpi_check(const ag_weights_t *layers, int n_layers, int rounds,
                          const ag_round_opts_t *opts, ag_error_t *err)
{
    if (opts && opts->graphs)
        return ag_fail(err, AG_EINVAL, "rounds: a graph per round runs on one process (the "
                       "MPI layer's parts are one graph's)");
    for (int k = 0; layers && k < n_layers; k++)
        if (layers[k].wedge || layers[k].global_heads)
            return ag_fail(err, AG_EINVAL, "layer %d: the MPI layer runs no %s", k + 1,
                           layers[k].wedge ? "edge features (wedge): a part holds no "
                           "per-message terms" : "global heads (a graph per round runs on "
                           "one process)");
    return ag_i_layers_check(layers, n_layers, rounds, opts, err);
}

static int check_workspace(const ag_workspace_t *ws, const ag_nbhd_t *nb,
                           const ag_weights_t *layers, int n_layers, int rounds,
                           ag_error_t *err)
{
    int64_t HD, H;
    largest_heads(layers, n_layers, rounds, &HD, &H);
    const int64_t D = ag_rounds_widest(layers, n_layers, rounds);
    if (ws->N != nb->n_nodes || ws->HD < HD || ws->D < D)
        return ag_fail(err, AG_EINVAL, "rounds: workspace is [%lld, %lld, %lld]; expected "
                       "[%lld, %lld, %lld] (the largest H*d and state width)",
                       (long long)ws->N, (long long)ws->HD, (long long)ws->D,
                       (long long)nb->n_nodes, (long long)HD, (long long)D);
    return AG_OK;
}

const ag_nbhd_t *ag_i_round_graph(const ag_nbhd_t *nb, const ag_round_opts_t *opts, int r)
{
    return opts && opts->graphs ? opts->graphs[r] : nb;
}

ag_nbhd_t *ag_i_round_global(const ag_round_opts_t *opts, int r)
{
    return opts && opts->global_graphs ? opts->global_graphs[r] : NULL;
}

int ag_i_round_plan(const ag_round_opts_t *opts, int r)
{
    int first = 0;
    while (opts && opts->graphs && opts->graphs[first] != opts->graphs[r])
        first++;
    return first;
}

void ag_round_opts_init(ag_round_opts_t *opts)
{
    *opts = (ag_round_opts_t)AG_ROUND_OPTS_INIT;
}

/* One process's attention: the kernel on the whole graph, with the figures
   and progress the options ask for, planned at the first round and run by
   every round. */
typedef struct {
    const ag_nbhd_t *nb;
    const ag_nbhd_t *global;   /* the global heads' graph, or NULL */
    const ag_workspace_t *ws;
    const ag_attention_opts_t *attn;
    ag_i_plan_t *plan;
} whole_graph_t;

static int attend_whole(void *ctx, const ag_weights_t *w, const ag_score_t *sc, ag_error_t *err)
{
    const whole_graph_t *g = ctx;
    if (w->global_heads)
        return ag_i_attention_split(g->nb, g->global, g->ws->Q, g->ws->K, g->ws->V, w->H, w->d,
                                    w->global_heads, sc, g->ws->M, g->attn, err);
    return ag_i_attention_planned(g->plan, g->nb, g->ws->Q, g->ws->K, g->ws->V, w->H, w->d, sc,
                                  g->ws->M, g->attn, err);
}

/* ag_attention_ex's progress, told the round. */
typedef struct {
    const ag_round_opts_t *opts;
    int round;
} round_progress_t;

static void round_progress(int64_t done, int64_t total, void *ctx)
{
    const round_progress_t *p = ctx;
    p->opts->on_progress(p->round, done, total, p->opts->ctx);
}

int ag_rounds_run(const ag_nbhd_t *nb, const ag_weights_t *layers, int n_layers, float *X,
                  int rounds, const ag_round_opts_t *opts, ag_workspace_t *ws, int *done,
                  ag_error_t *err)
{
    if (done)
        *done = 0;
    int rc = ag_i_rounds_check(nb, layers, n_layers, rounds, opts, err);
    if (!rc)
        rc = ag_check_finite("rounds: x", X, nb->n_nodes, layers[0].D, err);
    if (!rc)
        rc = check_workspace(ws, nb, layers, n_layers, rounds, err);
    if (rc)
        return rc;
    const int64_t N = nb->n_nodes, D = ws->D;
    const int layer_norm = opts && opts->norm == AG_NORM_LAYER;
    const int callback = opts && opts->on_round;
    /* the buffers only some runs need, made once and kept in ws */
    if (layer_norm && !ws->Xn && !(ws->Xn = ag_alloc(N * D, sizeof(float), err, "workspace")))
        return ag_alloc_status();
    if (callback && !ws->X_prev &&
        !(ws->X_prev = ag_alloc(N * D, sizeof(float), err, "workspace")))
        return ag_alloc_status();
    const int figures = callback && opts->figures, distance = figures && opts->figures == 2;
    int64_t HD, H;
    largest_heads(layers, n_layers, rounds, &HD, &H);
    float **bufs[3] = {&ws->entropy, &ws->max_weight, &ws->distance};
    for (int b = 0; b < (distance ? 3 : figures ? 2 : 0); b++)
        if (!*bufs[b] && !(*bufs[b] = ag_alloc(N * H, sizeof(float), err, "workspace")))
            return ag_alloc_status();
    round_progress_t progress = {opts, 0};
    const ag_attention_opts_t attn = {
        .entropy = figures ? ws->entropy : NULL, .max_weight = figures ? ws->max_weight : NULL,
        .distance = distance ? ws->distance : NULL,
        .progress = opts && opts->on_progress ? round_progress : NULL, .progress_ctx = &progress};
    /* the feed-forward sublayers' buffers, for this call: its normed input, U (= A) */
    int64_t F = 0;
    for (int r = 0; r < rounds; r++) {
        const ag_weights_t *w = &layers[n_layers == 1 ? 0 : r];
        F = w->w1 && w->F > F ? w->F : F;
    }
    /* and the skips' R [N, widest], the edge features' terms [E, H*d] and [E, H] */
    int skip = 0, edges = 0;
    for (int r = 0; r < rounds; r++) {
        const ag_weights_t *w = &layers[n_layers == 1 ? 0 : r];
        skip |= w->wskip != NULL, edges |= w->wedge != NULL;
    }
    const int64_t E = nb->n_edges;   /* edge features: one graph for every round */
    float *Hn = F && layer_norm ? ag_alloc(N * D, sizeof(float), err, "rounds") : NULL;
    float *U = F ? ag_alloc(N * F, sizeof(float), err, "rounds") : NULL;
    float *R = skip ? ag_alloc(N * D, sizeof(float), err, "rounds") : NULL;
    /* kept in ws: the last round's score (the callbacks', the caller's reports) reads them */
    free(ws->edge_terms);
    float *Pe = ws->edge_terms = edges ? ag_alloc(E * HD + E * H, sizeof(float), err,
                                                  "workspace") : NULL;
    if ((F && (!U || (layer_norm && !Hn))) || (skip && !R) || (edges && !Pe)) {
        free(Hn), free(U), free(R);
        return ag_alloc_status();
    }
    const ag_i_round_bufs_t rb = {.Xn = ws->Xn, .Q = ws->Q, .K = ws->K, .V = ws->V, .M = ws->M,
                                  .Hn = Hn, .U = U, .A = U, .R = R, .Pe = Pe,
                                  .Epre = Pe ? Pe + E * HD : NULL, .E = E};
    /* a plan a graph: made by the first round on it, run by every round on it */
    ag_i_plan_t *plans = ag_calloc(rounds > 0 ? rounds : 1, sizeof *plans, err, "rounds");
    if (!plans) {
        free(Hn), free(U), free(R);
        return ag_alloc_status();
    }
    for (int r = 0; !rc && r < rounds; r++) {
        const int k = n_layers == 1 ? 0 : r;
        const ag_weights_t *w = &layers[k];
        const ag_nbhd_t *g = ag_i_round_graph(nb, opts, r);
        const whole_graph_t whole = {g, ag_i_round_global(opts, r), ws, &attn,
                                     &plans[ag_i_round_plan(opts, r)]};
        if (callback)
            memcpy(ws->X_prev, X, (size_t)(N * w->D) * sizeof *X);
        progress.round = r + 1;
        ag_score_t sc;
        const ag_i_round_at_t at = {.k = k, .r = r};   /* inference: no dropout */
        if ((rc = ag_i_round_forward(X, N, w, at, opts, &rb, &sc, attend_whole, (void *)&whole,
                                     err)))
            break;
        if (done)
            *done = r + 1;
        if (callback) {
            ag_round_t info = {r + 1, g, w, &sc, X, ws->X_prev, ws,
                               figures ? ws->entropy : NULL, figures ? ws->max_weight : NULL,
                               distance ? ws->distance : NULL};
            rc = opts->on_round(&info, opts->ctx);
            if (rc == AG_STOP) {
                rc = AG_OK;
                break;
            }
        }
    }
    for (int r = 0; r < rounds; r++)
        ag_i_plan_free(&plans[r]);
    free(plans), free(Hn), free(U), free(R);
    return rc;
}

/* Sum of squares of a - b and of b over n values, the same bits for any
   thread count: fixed chunks summed in parallel, then in order. */
#define FIG_CHUNKS 256
static void change_sums(const float *a, const float *b, int64_t n, double *diff, double *base)
{
    double part[2 * FIG_CHUNKS];
    const int64_t per = (n + FIG_CHUNKS - 1) / FIG_CHUNKS;
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int c = 0; c < FIG_CHUNKS; c++) {
        double dd = 0, bb = 0;
        const int64_t lo = c * per, hi = lo + per < n ? lo + per : n;
        for (int64_t x = lo; x < hi; x++) {
            const double u = a[x], v = b[x];
            dd += (u - v) * (u - v);
            bb += v * v;
        }
        part[2 * c] = dd, part[2 * c + 1] = bb;
    }
    *diff = *base = 0;
    for (int c = 0; c < FIG_CHUNKS; c++)
        *diff += part[2 * c], *base += part[2 * c + 1];
}

int ag_round_figures(const ag_round_t *round, ag_round_figures_t *f, ag_error_t *err)
{
    const ag_workspace_t *ws = round->ws;
    const int64_t N = ws->N, D = round->w->D, H = round->w->H;
    double diff, base;
    f->change = NAN;   /* a layer that changes the width: no change to measure */
    if (ag_layer_width_out(round->w) == D) {
        change_sums(round->X, round->X_prev, N * D, &diff, &base);
        f->change = base > 0 ? sqrt(diff / base) : (diff > 0 ? INFINITY : 0);
    }
    double sum = 0;
    int64_t n = 0;
    f->max_weight = 0;
    if (round->entropy && round->max_weight) {   /* the kernel's own figures */
        for (int64_t i = 0; i < N; i++) {
            if (isnan(round->entropy[i * H]))
                continue;                           /* no in-edges */
            double e = 0;
            for (int64_t h = 0; h < H; h++) {
                e += round->entropy[i * H + h];
                f->max_weight = fmax(f->max_weight, round->max_weight[i * H + h]);
            }
            sum += e / (double)H, n++;
        }
        f->entropy = n ? sum / (double)n : NAN;
        return AG_OK;
    }
    double *stats = ag_alloc(2 * N, sizeof *stats, err, "round figures");
    if (!stats)
        return ag_alloc_status();
    int rc = ag_attention_stats(round->nb, ws->Q, ws->K, H, round->w->d, round->score,
                                stats, NULL, stats + N, err);
    for (int64_t i = 0; !rc && i < N; i++)
        if (isfinite(stats[i])) {
            sum += stats[i], n++;
            f->max_weight = fmax(f->max_weight, stats[N + i]);
        }
    f->entropy = n ? sum / (double)n : NAN;
    free(stats);
    return rc;
}
