/*
 * Training: the rounds' backward (ag_rounds_forward / ag_rounds_backward), the
 * losses and the optimizers. Gradients are held to central finite differences
 * of the double-precision reference (tests/reference.c), which shares no code
 * with the library; optimizer steps to their formulas written out here in
 * double; training from a seed to the same bits on 1 and 2 threads.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "testutil.h"

/* ---- a small awkward graph ---- */

/* 13 nodes (prime): self-loops, multi-edges (2->5 twice, 1->4 three times),
   node 12 isolated, node 11 with out-edges but no in-edges. Undirected, each
   edge is two messages (a self-loop one). */
#define TG_N 13
#define TG_MAXE 128
typedef struct {
    int64_t N, E, src[TG_MAXE], dst[TG_MAXE];
    ag_nbhd_t nb;
} tgraph_t;

static const int64_t tg_edges[][2] = {
    {0, 0}, {3, 3}, {7, 7}, {2, 5}, {2, 5}, {1, 4}, {1, 4}, {1, 4}, {11, 0}, {11, 6},
    {0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}, {7, 8}, {8, 9}, {9, 10},
    {10, 0}, {5, 1}, {9, 3}, {6, 2}, {8, 8}, {4, 9}, {10, 7}, {3, 10},
};

static void tgraph_make(tgraph_t *g, int directed)
{
    const int64_t n_edges = sizeof tg_edges / sizeof tg_edges[0];
    int64_t s[64], t[64];
    g->N = TG_N, g->E = 0;
    for (int64_t e = 0; e < n_edges; e++) {
        const int64_t u = tg_edges[e][0], v = tg_edges[e][1];
        if (!directed && (u == 11 || v == 11))
            continue;   /* node 11 keeps no in-edges only when directed */
        g->src[g->E] = u, g->dst[g->E++] = v;
        if (!directed && u != v)
            g->src[g->E] = v, g->dst[g->E++] = u;
    }
    /* the igraph graph from the listed edges (without the dropped ones) */
    int64_t m = 0;
    for (int64_t e = 0; e < n_edges; e++)
        if (directed || (tg_edges[e][0] != 11 && tg_edges[e][1] != 11))
            s[m] = tg_edges[e][0], t[m++] = tg_edges[e][1];
    igraph_t ig;
    build_graph(&ig, g->N, s, t, m, directed);
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(&g->nb, &ig, &err), AG_OK);
    igraph_destroy(&ig);
    ck_assert_int_eq(g->nb.n_edges, g->E);
}

/* ---- a model: layers, their gradients, the options ---- */

typedef struct {
    const char *name;
    int rounds, n_layers, per_node, layer_norm, residual, directed;
    ag_score_t score;         /* kind and options; vectors from the layers */
    int edge_bias;            /* a random bias per message (data: no gradient) */
} variant_t;

#define MAX_LAYERS 3
typedef struct {
    int64_t N, D, H, d;
    int n_layers;
    ag_weights_t w[MAX_LAYERS], g[MAX_LAYERS];
    ag_score_t score;
    ag_round_opts_t opts;
    float *bias;              /* [E] in slot order (the library's), or NULL */
    double *ref_bias;         /* [E] in the message list's order (the reference's) */
} model_t;

static void model_make(model_t *m, const variant_t *v, int64_t N, int64_t D, int64_t H,
                       int64_t d, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->N = N, m->D = D, m->H = H, m->d = d, m->n_layers = v->n_layers;
    ag_error_t err;
    for (int k = 0; k < v->n_layers; k++) {
        ck_assert_int_eq(ag_weights_random(&m->w[k], D, H, d, v->per_node ? N : 0,
                                           seed + (uint64_t)k, &err), AG_OK);
        if (v->layer_norm) {
            ck_assert_int_eq(ag_weights_add_layer_norm(&m->w[k], &err), AG_OK);
            /* away from 1 and 0, so that their gradients matter */
            fill_uniform(m->w[k].ln_bias, D, seed + 50 + (uint64_t)k, 0.3f);
            fill_uniform(m->w[k].ln_weight, D, seed + 60 + (uint64_t)k, 0.3f);
            for (int64_t c = 0; c < D; c++)
                m->w[k].ln_weight[c] += 1.0f;
        }
        ck_assert_int_eq(ag_weights_grads_init(&m->g[k], &m->w[k], v->layer_norm, &err), AG_OK);
    }
    m->score = v->score;
    m->opts = (ag_round_opts_t){ROUND_DEFAULTS, .score = &m->score, .no_residual = !v->residual,
                                .norm = v->layer_norm ? AG_NORM_LAYER : AG_NORM_NONE};
}

/* A random bias per message of g, as data: the list's message k travels in
   slot slot[k] (ag_edge_order; directed graphs, whose edge k is message k). */
static void model_set_bias(model_t *m, tgraph_t *g)
{
    ag_edge_msg_t *msgs;
    int64_t *slot;
    ag_error_t err;
    ck_assert_int_eq(ag_edge_order(&g->nb, &msgs, &slot, &err), AG_OK);
    float *b = malloc((size_t)g->E * sizeof *b);
    fill_uniform(b, g->E, 44, 1.0f);
    m->bias = malloc((size_t)g->E * sizeof *m->bias);
    m->ref_bias = malloc((size_t)g->E * sizeof *m->ref_bias);
    for (int64_t k = 0; k < g->E; k++) {
        ck_assert(msgs[k].src == g->src[k] && msgs[k].dst == g->dst[k]);
        m->bias[slot[k]] = b[k], m->ref_bias[k] = b[k];
    }
    m->score.edge_bias = m->bias;
    free(b), free(msgs), free(slot);
}

static void model_free(model_t *m)
{
    for (int k = 0; k < m->n_layers; k++)
        ag_weights_destroy(&m->w[k]), ag_weights_destroy(&m->g[k]);
    free(m->bias), free(m->ref_bias);
}

/* The reference's layer: gatv2 reads its vector a as a_src. */
static ref_layer_t ref_of(const ag_weights_t *w, ag_score_kind_t kind)
{
    const int gatv2 = kind == AG_SCORE_GATV2;
    return (ref_layer_t){w->wq, w->wk, w->wv, w->wo, w->per_node != 0, w->ln_weight,
                         w->ln_bias, gatv2 ? w->attn : w->attn_src, gatv2 ? NULL : w->attn_dst};
}

/* The reference's description of the library's score (whose zeros mean defaults). */
static ref_score_t ref_score_of(const ag_score_t *s, const double *bias)
{
    return (ref_score_t){.kind = (int)s->kind, .beta = s->beta != 0 ? s->beta : 1.0,
                         .softcap = s->softcap, .slope = s->slope != 0 ? s->slope : 0.2,
                         .bias = bias, .alibi = s->alibi};
}

/* The reference's final states for features X0 (float) through m's rounds. */
static void ref_forward(const tgraph_t *g, const model_t *m, const variant_t *v,
                        const float *X0, double *X)
{
    ref_layer_t layers[MAX_LAYERS];
    for (int k = 0; k < m->n_layers; k++)
        layers[k] = ref_of(&m->w[k], v->score.kind);
    const ref_score_t sc = ref_score_of(&v->score, m->ref_bias);
    for (int64_t x = 0; x < m->N * m->D; x++)
        X[x] = X0[x];
    ref_rounds_scored(g->N, g->src, g->dst, g->E, layers, m->n_layers, m->D, m->H, m->d,
                      v->rounds, v->residual, v->layer_norm, &sc, X);
}

/* L = sum(dY * X_R) in double. */
static double ref_dot_loss(const tgraph_t *g, const model_t *m, const variant_t *v,
                           const float *X0, const float *dY, double *X)
{
    ref_forward(g, m, v, X0, X);
    double L = 0;
    for (int64_t x = 0; x < m->N * m->D; x++)
        L += (double)dY[x] * X[x];
    return L;
}

/* Central difference of ref_dot_loss in entry x of A (a float array the
   reference reads), divided by the float step actually taken. */
static double fd_entry(const tgraph_t *g, const model_t *m, const variant_t *v, const float *X0,
                       const float *dY, double *X, float *A, int64_t x, float h)
{
    const float keep = A[x];
    A[x] = keep + h;
    const float up = A[x];
    const double Lp = ref_dot_loss(g, m, v, X0, dY, X);
    A[x] = keep - h;
    const float down = A[x];
    const double Lm = ref_dot_loss(g, m, v, X0, dY, X);
    A[x] = keep;
    return (Lp - Lm) / ((double)up - (double)down);
}

/* Entries skipped at kinks, for the report (AG_TEST_VERBOSE). */
static int64_t kinks_seen;

/*
 * Largest |grad - fd| over an array, relative to the array's largest |fd|
 * (at least 1e-3); asserts it is below tol and returns it. Where they
 * disagree and the difference with step h/16 moves by more than tol too, the
 * loss has a kink within h (LeakyReLU at 0 in GAT scores): that entry is
 * skipped; at most 1 in 20 (and 1 in small arrays) may be.
 */
static double check_array(const char *what, const float *grad, int64_t n, const tgraph_t *g,
                          const model_t *m, const variant_t *v, const float *X0,
                          const float *dY, double *X, float *A, double tol)
{
    const float h = 1e-3f;
    double *fd = malloc((size_t)n * sizeof *fd), big = 1e-3, worst = 0;
    int64_t at = 0, skipped = 0;
    for (int64_t x = 0; x < n; x++) {
        fd[x] = fd_entry(g, m, v, X0, dY, X, A, x, h);
        big = fmax(big, fabs(fd[x]));
    }
    for (int64_t x = 0; x < n; x++) {
        const double e = fabs(grad[x] - fd[x]) / big;
        if (e > tol && fabs(fd_entry(g, m, v, X0, dY, X, A, x, h / 16) - fd[x]) / big > tol) {
            skipped++;
            continue;
        }
        if (!(e <= worst))
            worst = e, at = x;
    }
    ck_assert_msg(worst <= tol, "%s: %s[%lld] = %.8g, finite differences %.8g (error %.3g of "
                  "the largest %.3g; tolerance %.1g)", v->name, what, (long long)at, grad[at],
                  fd[at], worst, big, tol);
    ck_assert_msg(skipped <= (n < 20 ? 1 : n / 20), "%s: %s: %lld of %lld entries at kinks",
                  v->name, what, (long long)skipped, (long long)n);
    kinks_seen += skipped;
    free(fd);
    return worst;
}

/* Runs the library's forward and backward of variant v and checks dX and every
   weight gradient against finite differences. Returns the worst error. */
static double check_variant(const variant_t *v)
{
    const int64_t D = 6, H = 3, d = 5;
    tgraph_t g;
    tgraph_make(&g, v->directed);
    model_t m;
    model_make(&m, v, g.N, D, H, d, 31);
    if (v->edge_bias)
        model_set_bias(&m, &g);
    const int64_t ND = g.N * D;
    float *X0 = malloc((size_t)ND * sizeof *X0), *X = malloc((size_t)ND * sizeof *X);
    float *dY = malloc((size_t)ND * sizeof *dY), *dX = malloc((size_t)ND * sizeof *dX);
    double *Xr = malloc((size_t)ND * sizeof *Xr);
    fill_uniform(X0, ND, 7, 1.0f);
    fill_uniform(dY, ND, 8, 1.0f);
    memcpy(X, X0, (size_t)ND * sizeof *X);
    ag_error_t err;
    ag_tape_t *tape;
    ck_assert_msg(ag_rounds_forward(&g.nb, m.w, m.n_layers, X, v->rounds, &m.opts, &tape,
                                    &err) == AG_OK, "%s: %s", v->name, err.msg);
    /* the forward is the reference's */
    ref_forward(&g, &m, v, X0, Xr);
    for (int64_t x = 0; x < ND; x++)
        ck_assert_msg(fabs(X[x] - Xr[x]) <= 1e-4 * (1 + fabs(Xr[x])), "%s: X[%lld] = %.8g, "
                      "reference %.8g", v->name, (long long)x, X[x], Xr[x]);
    ck_assert_msg(ag_rounds_backward(tape, dY, dX, m.g, &err) == AG_OK, "%s: %s", v->name,
                  err.msg);
    ag_tape_free(tape);
    const double tol = 5e-4;   /* measured worst: 8e-5 (gatv2; undirected, LayerNorm) */
    double worst = check_array("dX", dX, ND, &g, &m, v, X0, dY, Xr, X0, tol);
    for (int k = 0; k < m.n_layers; k++) {
        ag_weights_t *w = &m.w[k], *gr = &m.g[k];
        const int64_t copies = w->per_node ? w->per_node : 1, HD = H * d;
        float *arrays[9] = {w->wq, w->wk, w->wv, w->wo, w->ln_weight, w->ln_bias,
                            w->attn_src, w->attn_dst, w->attn};
        const float *grads[9] = {gr->wq, gr->wk, gr->wv, gr->wo, gr->ln_weight, gr->ln_bias,
                                 gr->attn_src, gr->attn_dst, gr->attn};
        const int64_t sizes[9] = {copies * HD * D, copies * HD * D, copies * HD * D, D * HD,
                                  D, D, HD, HD, HD};
        const char *names[9] = {"dwq", "dwk", "dwv", "dwo", "dln_weight", "dln_bias",
                                "dattn_src", "dattn_dst", "dattn"};
        for (int a = 0; a < 9; a++) {
            if (!arrays[a])
                continue;   /* no LayerNorm */
            ck_assert_ptr_nonnull(grads[a]);
            char what[64];
            snprintf(what, sizeof what, "layer %d %s", k + 1, names[a]);
            worst = fmax(worst, check_array(what, grads[a], sizes[a], &g, &m, v, X0, dY, Xr,
                                            arrays[a], tol));
        }
    }
    model_free(&m);
    ag_nbhd_destroy(&g.nb);
    free(X0), free(X), free(dY), free(dX), free(Xr);
    return worst;
}

#define SCALED_DOT {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT}
static const variant_t variants[] = {
    {"shared, 1 round", 1, 1, 0, 0, 1, 1, SCALED_DOT, 0},
    {"shared, 2 rounds, LayerNorm", 2, 1, 0, 1, 1, 1, SCALED_DOT, 0},
    {"shared, 3 rounds, no residual", 3, 1, 0, 0, 0, 1, SCALED_DOT, 0},
    {"per-round layers, 3 rounds, LayerNorm", 3, 3, 0, 1, 1, 1, SCALED_DOT, 0},
    {"per-round layers, 2 rounds, dot, beta 0.5", 2, 2, 0, 0, 1, 1,
     {SCORE_DEFAULTS, .kind = AG_SCORE_DOT, .beta = 0.5f}, 0},
    {"per-node weights, 2 rounds, LayerNorm", 2, 1, 1, 1, 1, 1, SCALED_DOT, 0},
    {"per-node per-round, 2 rounds, no residual", 2, 2, 1, 0, 0, 1, SCALED_DOT, 0},
    {"undirected, 2 rounds, LayerNorm, no residual", 2, 1, 0, 1, 0, 0, SCALED_DOT, 0},
    {"scaled-dot, edge bias, 2 rounds", 2, 1, 0, 0, 1, 1, SCALED_DOT, 1},
    {"additive (GAT), shared, 2 rounds, LayerNorm", 2, 1, 0, 1, 1, 1,
     {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE}, 0},
    {"additive (GAT), per-round, edge bias", 2, 2, 0, 0, 1, 1,
     {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE, .slope = 0.1f}, 1},
    {"gatv2, shared, 2 rounds", 2, 1, 0, 0, 1, 1, {SCORE_DEFAULTS, .kind = AG_SCORE_GATV2}, 0},
    {"gatv2, per-round, 2 rounds, LayerNorm, no residual", 2, 2, 0, 1, 0, 1,
     {SCORE_DEFAULTS, .kind = AG_SCORE_GATV2}, 0},
    {"cosine, softcap, alibi, 2 rounds", 2, 1, 0, 1, 1, 1,
     {SCORE_DEFAULTS, .kind = AG_SCORE_COSINE, .beta = 3.0f, .softcap = 2.0f, .alibi = 1}, 0},
    {"sigmoid, 2 rounds", 2, 1, 0, 0, 1, 1, {SCORE_DEFAULTS, .kind = AG_SCORE_SIGMOID}, 0},
    {"linear, per-round, 2 rounds", 2, 2, 0, 1, 1, 1, {SCORE_DEFAULTS, .kind = AG_SCORE_LINEAR}, 0},
};

START_TEST(rounds_gradients_match_finite_differences)
{
    const double worst = check_variant(&variants[_i]);
    if (getenv("AG_TEST_VERBOSE"))
        fprintf(stderr, "%-52s worst %.3g, %lld entries at kinks\n", variants[_i].name, worst,
                (long long)kinks_seen);
}
END_TEST

/* ---- losses ---- */

/* Largest |a - b| over n values relative to the largest |b| (at least floor). */
static double rel_error(const float *a, const double *b, int64_t n, double floor)
{
    double big = floor, worst = 0;
    for (int64_t x = 0; x < n; x++)
        big = fmax(big, fabs(b[x]));
    for (int64_t x = 0; x < n; x++) {
        const double e = fabs(a[x] - b[x]) / big;
        if (!(e <= worst))
            worst = e;
    }
    return worst;
}

START_TEST(mse_matches_reference_and_finite_differences)
{
    const int64_t N = 13, D = 6, ND = N * D;
    float X[13 * 6], Y[13 * 6], dX[13 * 6], dX_all[13 * 6];
    double Xd[13 * 6], fd[13 * 6];
    uint8_t mask[13] = {1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1}, ones[13];
    memset(ones, 1, sizeof ones);
    fill_uniform(X, ND, 1, 2.0f);
    fill_uniform(Y, ND, 2, 2.0f);
    for (int64_t x = 0; x < ND; x++)
        Xd[x] = X[x];
    ag_error_t err;
    double loss, loss_all, loss_ones;
    ck_assert_int_eq(ag_loss_mse(X, Y, N, D, mask, &loss, dX, &err), AG_OK);
    const double want = ref_loss_mse(Xd, Y, N, D, mask);
    ck_assert_msg(fabs(loss - want) <= 1e-12 * want, "loss %.17g, reference %.17g", loss, want);
    for (int64_t x = 0; x < ND; x++) {
        const double keep = Xd[x];
        Xd[x] = keep + 1e-4;
        const double up = ref_loss_mse(Xd, Y, N, D, mask);
        Xd[x] = keep - 1e-4;
        fd[x] = (up - ref_loss_mse(Xd, Y, N, D, mask)) / 2e-4;
        Xd[x] = keep;
        if (!mask[x / D])
            ck_assert_float_eq(dX[x], 0.0f);
    }
    const double e = rel_error(dX, fd, ND, 1e-6);
    ck_assert_msg(e <= 1e-6, "dX off by %.3g of the largest", e);
    /* no mask is every node */
    ck_assert_int_eq(ag_loss_mse(X, Y, N, D, NULL, &loss_all, dX_all, &err), AG_OK);
    ck_assert_int_eq(ag_loss_mse(X, Y, N, D, ones, &loss_ones, dX, &err), AG_OK);
    ck_assert(loss_all == loss_ones);
    ck_assert_mem_eq(dX, dX_all, sizeof dX);
}
END_TEST

/* Double logits of row i (the tests' own readout). */
static void ref_logits(const float *X, int64_t i, int64_t D, const float *Wr, const float *br,
                       int64_t C, double *z)
{
    for (int64_t c = 0; c < C; c++) {
        z[c] = br[c];
        for (int64_t k = 0; k < D; k++)
            z[c] += (double)X[i * D + k] * Wr[c * D + k];
    }
}

/* Central difference of the reference cross-entropy in float entry x of A (Wr or br). */
static double ce_fd_float(const double *Xd, int64_t N, int64_t D, float *Wr, float *br,
                          int64_t C, const int64_t *labels, const uint8_t *mask, float *A,
                          int64_t x, float h)
{
    const float keep = A[x];
    A[x] = keep + h;
    const float up = A[x];
    const double Lp = ref_loss_cross_entropy(Xd, N, D, Wr, br, C, labels, mask);
    A[x] = keep - h;
    const float down = A[x];
    const double Lm = ref_loss_cross_entropy(Xd, N, D, Wr, br, C, labels, mask);
    A[x] = keep;
    return (Lp - Lm) / ((double)up - (double)down);
}

/* _i = 0: logits of order 1; _i = 1: of order 1e4 (a softmax that is nearly one-hot). */
START_TEST(cross_entropy_matches_reference_and_finite_differences)
{
    enum { N = 13, D = 6, C = 4 };
    const float scale = _i ? 1e4f : 1.0f;
    float X[N * D], Wr[C * D], br[C], dX[N * D], dWr[C * D], dbr[C];
    double Xd[N * D], fdX[N * D], fdW[C * D], fdb[C];
    const int64_t labels[N] = {0, 3, -1, 2, 1, 1, -1, 0, 3, 2, 2, 1, 0};
    const uint8_t mask[N] = {1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1};
    int64_t pred[N], correct, counted;
    fill_uniform(X, N * D, 3, 1.0f);
    fill_uniform(Wr, C * D, 4, scale);
    fill_uniform(br, C, 5, scale);
    for (int64_t x = 0; x < N * D; x++)
        Xd[x] = X[x];
    ag_error_t err;
    double loss;
    const ag_cross_entropy_t ce = {Wr, br, C, labels, mask};
    ag_cross_entropy_out_t out = {.dX = dX, .dWr = dWr, .dbr = dbr, .pred = pred};
    ck_assert_int_eq(ag_loss_cross_entropy(X, N, D, &ce, &out, &err), AG_OK);
    loss = out.loss, correct = out.correct, counted = out.counted;
    const double want = ref_loss_cross_entropy(Xd, N, D, Wr, br, C, labels, mask);
    ck_assert_msg(fabs(loss - want) <= 1e-6 * (1 + fabs(want)), "loss %.12g, reference %.12g",
                  loss, want);
    /* predictions and accuracy from the tests' own logits */
    int64_t want_correct = 0, want_counted = 0;
    for (int64_t i = 0; i < N; i++) {
        double z[C];
        ref_logits(X, i, D, Wr, br, C, z);
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            best = z[c] > z[best] ? c : best;
        ck_assert_int_eq(pred[i], best);
        if (mask[i] && labels[i] >= 0)
            want_counted++, want_correct += best == labels[i];
    }
    ck_assert_int_eq(counted, want_counted);
    ck_assert_int_eq(correct, want_correct);
    ck_assert_int_gt(correct, 0);
    /* gradients: dX in double steps, dWr and dbr in float steps */
    const double hx = _i ? 1e-7 : 1e-4;
    for (int64_t x = 0; x < N * D; x++) {
        const double keep = Xd[x];
        Xd[x] = keep + hx;
        const double up = ref_loss_cross_entropy(Xd, N, D, Wr, br, C, labels, mask);
        Xd[x] = keep - hx;
        fdX[x] = (up - ref_loss_cross_entropy(Xd, N, D, Wr, br, C, labels, mask)) / (2 * hx);
        Xd[x] = keep;
    }
    for (int64_t x = 0; x < C * D; x++)
        fdW[x] = ce_fd_float(Xd, N, D, Wr, br, C, labels, mask, Wr, x, _i ? 1e-2f : 1e-3f);
    for (int64_t x = 0; x < C; x++)
        fdb[x] = ce_fd_float(Xd, N, D, Wr, br, C, labels, mask, br, x, _i ? 1e-2f : 1e-3f);
    const double eX = rel_error(dX, fdX, N * D, 1e-6), eW = rel_error(dWr, fdW, C * D, 1e-6);
    const double eb = rel_error(dbr, fdb, C, 1e-6);
    if (getenv("AG_TEST_VERBOSE"))
        fprintf(stderr, "cross-entropy x%g: dX %.3g, dWr %.3g, dbr %.3g\n", scale, eX, eW, eb);
    ck_assert_msg(eX <= 1e-5 && eW <= 1e-5 && eb <= 1e-5, "scale %g: errors dX %.3g, dWr %.3g, "
                  "dbr %.3g of the largest", scale, eX, eW, eb);
}
END_TEST

/* ---- the whole chain: positions, rounds, readout ---- */

/* The tests' own sinusoidal positions, in double. */
static void positions_ref(double *X, int64_t N, int64_t D)
{
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < D; c++) {
            const double angle = (double)i / pow(10000.0, (double)(c - c % 2) / (double)D);
            X[i * D + c] += c % 2 ? cos(angle) : sin(angle);
        }
}

typedef struct {
    const tgraph_t *g;
    const model_t *m;
    const variant_t *v;
    const float *Wr, *br;
    const int64_t *labels;
    const uint8_t *mask;
    int64_t C;
} chain_t;

/* L = cross-entropy(readout(rounds(F + positions))) in double. */
static double chain_loss(const chain_t *c, const double *F)
{
    const int64_t N = c->m->N, D = c->m->D;
    double *X = malloc((size_t)(N * D) * sizeof *X);
    memcpy(X, F, (size_t)(N * D) * sizeof *X);
    positions_ref(X, N, D);
    ref_layer_t layers[MAX_LAYERS];
    for (int k = 0; k < c->m->n_layers; k++)
        layers[k] = ref_of(&c->m->w[k], AG_SCORE_SCALED_DOT);
    const ref_score_t sc = {.kind = 0, .beta = 1};
    ref_rounds_scored(c->g->N, c->g->src, c->g->dst, c->g->E, layers, c->m->n_layers, D,
                      c->m->H, c->m->d, c->v->rounds, c->v->residual, c->v->layer_norm, &sc, X);
    const double L = ref_loss_cross_entropy(X, N, D, c->Wr, c->br, c->C, c->labels, c->mask);
    free(X);
    return L;
}

static double chain_fd_float(const chain_t *c, const double *F, float *A, int64_t x)
{
    const float keep = A[x];
    A[x] = keep + 1e-3f;
    const float up = A[x];
    const double Lp = chain_loss(c, F);
    A[x] = keep - 1e-3f;
    const float down = A[x];
    const double Lm = chain_loss(c, F);
    A[x] = keep;
    return (Lp - Lm) / ((double)up - (double)down);
}

START_TEST(chain_gradients_match_finite_differences)
{
    const variant_t v = {"chain", 2, 2, 0, 1, 1, 1, {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT}, 0};
    enum { D = 6, C = 3 };
    tgraph_t g;
    tgraph_make(&g, 1);
    model_t m;
    model_make(&m, &v, g.N, D, 3, 5, 77);
    const int64_t N = g.N, ND = N * D;
    float F[TG_N * D], X[TG_N * D], dXR[TG_N * D], dF[TG_N * D], Wr[C * D], br[C];
    double Fd[TG_N * D], fd[TG_N * D];
    const int64_t labels[TG_N] = {0, 1, 2, -1, 1, 0, 2, 2, 1, 0, -1, 1, 2};
    const uint8_t mask[TG_N] = {1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    fill_uniform(F, ND, 11, 1.0f);
    fill_uniform(Wr, C * D, 12, 1.0f);
    fill_uniform(br, C, 13, 0.5f);
    memcpy(X, F, sizeof X);
    ag_posenc_sinusoidal(X, N, D);
    ag_error_t err;
    ag_tape_t *tape;
    double loss;
    ck_assert_int_eq(ag_rounds_forward(&g.nb, m.w, 2, X, 2, &m.opts, &tape, &err), AG_OK);
    const ag_cross_entropy_t ce = {Wr, br, C, labels, mask};
    ag_cross_entropy_out_t out = {.dX = dXR};
    ck_assert_int_eq(ag_loss_cross_entropy(X, N, D, &ce, &out, &err), AG_OK);
    loss = out.loss;
    ck_assert_int_eq(ag_rounds_backward(tape, dXR, dF, m.g, &err), AG_OK);
    ag_tape_free(tape);
    const chain_t c = {&g, &m, &v, Wr, br, labels, mask, C};
    for (int64_t x = 0; x < ND; x++)
        Fd[x] = F[x];
    const double want = chain_loss(&c, Fd);
    ck_assert_msg(fabs(loss - want) <= 1e-5 * (1 + want), "loss %.9g, reference %.9g", loss, want);
    for (int64_t x = 0; x < ND; x++) {
        const double keep = Fd[x];
        Fd[x] = keep + 1e-4;
        const double up = chain_loss(&c, Fd);
        Fd[x] = keep - 1e-4;
        fd[x] = (up - chain_loss(&c, Fd)) / 2e-4;
        Fd[x] = keep;
    }
    double e = rel_error(dF, fd, ND, 1e-6), worst = e;
    ck_assert_msg(e <= 5e-4, "dF off by %.3g of the largest", e);
    /* a few weights of each layer: the first wq rows, ln_bias, ln_weight */
    for (int k = 0; k < 2; k++) {
        float *arrays[3] = {m.w[k].wq, m.w[k].ln_bias, m.w[k].ln_weight};
        const float *grads[3] = {m.g[k].wq, m.g[k].ln_bias, m.g[k].ln_weight};
        for (int a = 0; a < 3; a++) {
            double fw[2 * D];
            for (int64_t x = 0; x < 2 * D && (a == 0 || x < D); x++)
                fw[x] = chain_fd_float(&c, Fd, arrays[a], x);
            e = rel_error(grads[a], fw, a == 0 ? 2 * D : D, 1e-6);
            worst = fmax(worst, e);
            ck_assert_msg(e <= 5e-4, "layer %d array %d off by %.3g of the largest", k + 1, a, e);
        }
    }
    if (getenv("AG_TEST_VERBOSE"))
        fprintf(stderr, "chain: worst %.3g\n", worst);
    model_free(&m);
    ag_nbhd_destroy(&g.nb);
}
END_TEST

/* ---- optimizers ---- */

typedef struct {
    const char *name;
    ag_optimizer_opts_t o;
} opt_case_t;

static const opt_case_t opt_cases[] = {
    {"sgd", {OPTIMIZER_DEFAULTS, .kind = AG_OPT_SGD, .lr = 0.1f}},
    {"sgd momentum, weight decay, clip", {OPTIMIZER_DEFAULTS, .kind = AG_OPT_SGD, .lr = 0.1f, .momentum = 0.9f,
                                          .weight_decay = 0.01f, .clip = 0.5f}},
    {"adam, weight decay", {OPTIMIZER_DEFAULTS, .kind = AG_OPT_ADAM, .lr = 0.01f, .weight_decay = 0.01f}},
    {"adamw, betas, eps, clip", {OPTIMIZER_DEFAULTS, .kind = AG_OPT_ADAMW, .lr = 0.01f, .beta1 = 0.8f,
                                 .beta2 = 0.99f, .eps = 1e-6f, .weight_decay = 0.1f,
                                 .clip = 0.3f}},
    {"adam, clip not reached", {OPTIMIZER_DEFAULTS, .kind = AG_OPT_ADAM, .lr = 0.05f, .clip = 100.0f}},
    {"adam, beta1 0 (no momentum), beta2 0, eps 0", {.kind = AG_OPT_ADAM, .lr = 0.05f}},
};

/* One step of the formulas (PyTorch's SGD, Adam, AdamW) in double over n values. */
static void ref_opt_step(const ag_optimizer_opts_t *o, double *p, const double *g, double *m,
                         double *v, int64_t n, int t)
{
    const double b1 = o->beta1, b2 = o->beta2, eps = o->eps, lr = o->lr, wd = o->weight_decay;
    for (int64_t x = 0; x < n; x++) {
        double gx = g[x];
        if (o->kind == AG_OPT_SGD) {
            gx += wd * p[x];
            m[x] = t == 1 ? gx : o->momentum * m[x] + gx;   /* torch: buf = g at first */
            p[x] -= lr * (o->momentum > 0 ? m[x] : gx);
            continue;
        }
        if (o->kind == AG_OPT_ADAMW)
            p[x] *= 1 - lr * wd;
        else
            gx += wd * p[x];
        m[x] = b1 * m[x] + (1 - b1) * gx;
        v[x] = b2 * v[x] + (1 - b2) * gx * gx;
        const double mhat = m[x] / (1 - pow(b1, t)), vhat = v[x] / (1 - pow(b2, t));
        p[x] -= lr * mhat / (sqrt(vhat) + eps);
    }
}

START_TEST(optimizer_steps_match_formulas)
{
    const opt_case_t *oc = &opt_cases[_i];
    enum { NA = 7, NB = 5, NT = NA + NB };
    float pa[NA], pb[NB], ga[NA], gb[NB];
    double p[NT], g[NT], m[NT] = {0}, v[NT] = {0};
    fill_uniform(pa, NA, 21, 1.0f);
    fill_uniform(pb, NB, 22, 1.0f);
    for (int x = 0; x < NT; x++)
        p[x] = x < NA ? pa[x] : pb[x - NA];
    ag_optimizer_t *opt;
    ag_error_t err;
    ck_assert_int_eq(ag_optimizer_init(&opt, &oc->o, &err), AG_OK);
    ck_assert_int_eq(ag_optimizer_add(opt, pa, ga, NA, &err), AG_OK);
    ck_assert_int_eq(ag_optimizer_add(opt, pb, gb, NB, &err), AG_OK);
    int clipped = 0;
    for (int t = 1; t <= 5; t++) {
        fill_uniform(ga, NA, 100 + t, 1.0f);
        fill_uniform(gb, NB, 200 + t, 1.0f);
        double norm = 0, got_norm;
        for (int x = 0; x < NT; x++) {
            g[x] = x < NA ? ga[x] : gb[x - NA];
            norm += g[x] * g[x];
        }
        norm = sqrt(norm);
        const double scale = oc->o.clip > 0 && norm > oc->o.clip ? oc->o.clip / norm : 1;
        clipped += scale < 1;
        for (int x = 0; x < NT; x++)
            g[x] *= scale;
        ck_assert_int_eq(ag_optimizer_step(opt, &got_norm, &err), AG_OK);
        ck_assert_msg(fabs(got_norm - norm) <= 1e-12 * norm, "norm %.17g, want %.17g", got_norm,
                      norm);
        ref_opt_step(&oc->o, p, g, m, v, NT, t);
        for (int x = 0; x < NT; x++) {
            const float got = x < NA ? pa[x] : pb[x - NA];
            ck_assert_msg(fabs(got - p[x]) <= 1e-6 * (1 + fabs(p[x])), "%s, step %d: p[%d] = "
                          "%.9g, formula %.9g", oc->name, t, x, got, p[x]);
        }
    }
    ck_assert_int_eq(clipped, oc->o.clip > 0 && oc->o.clip < 1 ? 5 : 0);
    ag_optimizer_free(opt);
}
END_TEST

/* ---- training ---- */

/* A model with a readout and an optimizer over all of their arrays. */
typedef struct {
    model_t m;
    ag_nbhd_t *nb;
    int rounds;
    int64_t C;
    float *F, *X, *dX, *Wr, *br, *dWr, *dbr;
    const int64_t *labels;
    const uint8_t *mask;
    ag_optimizer_t *opt;
} trainer_t;

static void trainer_make(trainer_t *t, ag_nbhd_t *nb, const variant_t *v, int64_t D, int64_t H,
                         int64_t d, int64_t C, const int64_t *labels, const uint8_t *mask,
                         const ag_optimizer_opts_t *o)
{
    const int64_t N = nb->n_nodes;
    memset(t, 0, sizeof *t);
    model_make(&t->m, v, N, D, H, d, 3);
    t->nb = nb, t->rounds = v->rounds, t->C = C, t->labels = labels, t->mask = mask;
    t->F = malloc((size_t)(N * D) * sizeof(float));
    t->X = malloc((size_t)(N * D) * sizeof(float));
    t->dX = malloc((size_t)(N * D) * sizeof(float));
    t->Wr = malloc((size_t)(C * D) * sizeof(float));
    t->dWr = malloc((size_t)(C * D) * sizeof(float));
    t->br = calloc((size_t)C, sizeof(float));
    t->dbr = malloc((size_t)C * sizeof(float));
    ag_random_normal(t->F, N * D, 9, 0, 1.0f);
    ag_random_normal(t->Wr, C * D, 9, 1, 1.0f / sqrtf((float)D));
    ag_error_t err;
    ck_assert_int_eq(ag_optimizer_init(&t->opt, o, &err), AG_OK);
    for (int k = 0; k < t->m.n_layers; k++) {
        ag_weights_t *w = &t->m.w[k], *g = &t->m.g[k];
        const int64_t HD = H * d, copies = w->per_node ? w->per_node : 1;
        float *ws[6] = {w->wq, w->wk, w->wv, w->wo, w->ln_weight, w->ln_bias};
        const float *gs[6] = {g->wq, g->wk, g->wv, g->wo, g->ln_weight, g->ln_bias};
        const int64_t n[6] = {copies * HD * D, copies * HD * D, copies * HD * D, D * HD, D, D};
        for (int a = 0; a < 6; a++)
            if (ws[a])
                ck_assert_int_eq(ag_optimizer_add(t->opt, ws[a], gs[a], n[a], &err), AG_OK);
    }
    ck_assert_int_eq(ag_optimizer_add(t->opt, t->Wr, t->dWr, C * D, &err), AG_OK);
    ck_assert_int_eq(ag_optimizer_add(t->opt, t->br, t->dbr, C, &err), AG_OK);
}

static void trainer_free(trainer_t *t)
{
    model_free(&t->m);
    ag_optimizer_free(t->opt);
    free(t->F), free(t->X), free(t->dX), free(t->Wr), free(t->br), free(t->dWr), free(t->dbr);
}

/* One step: forward, loss, backward, optimizer. Returns the loss. */
static double trainer_step(trainer_t *t, int64_t *correct)
{
    const int64_t N = t->nb->n_nodes, D = t->m.D;
    ag_error_t err;
    ag_tape_t *tape;
    double loss;
    memcpy(t->X, t->F, (size_t)(N * D) * sizeof *t->X);
    ck_assert_msg(ag_rounds_forward(t->nb, t->m.w, t->m.n_layers, t->X, t->rounds, &t->m.opts,
                                    &tape, &err) == AG_OK, "%s", err.msg);
    const ag_cross_entropy_t ce = {t->Wr, t->br, t->C, t->labels, t->mask};
    ag_cross_entropy_out_t out = {.dX = t->dX, .dWr = t->dWr, .dbr = t->dbr};
    ck_assert_msg(ag_loss_cross_entropy(t->X, N, D, &ce, &out, &err) == AG_OK, "%s", err.msg);
    loss = out.loss;
    if (correct)
        *correct = out.correct;
    ck_assert_msg(ag_rounds_backward(tape, t->dX, NULL, t->m.g, &err) == AG_OK, "%s", err.msg);
    ag_tape_free(tape);
    ck_assert_msg(ag_optimizer_step(t->opt, NULL, &err) == AG_OK, "%s", err.msg);
    return loss;
}

/* 31 nodes of random features in 3 classes, attending over a window: Adam
   fits it in 50 steps. */
START_TEST(loss_decreases_on_a_tiny_problem)
{
    enum { N = 31, D = 8, C = 3 };
    ag_pattern_t *p;
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&p, "window:3", &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, p, N, AG_SELF_KEEP, &err), AG_OK);
    ag_pattern_free(p);
    int64_t labels[N];
    uint8_t mask[N];
    for (int64_t i = 0; i < N; i++)
        labels[i] = (i * 7) % C, mask[i] = 1;
    const variant_t v = {"tiny", 2, 1, 0, 1, 1, 1, {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT}, 0};
    const ag_optimizer_opts_t o = {OPTIMIZER_DEFAULTS, .kind = AG_OPT_ADAM, .lr = 0.03f};
    trainer_t t;
    trainer_make(&t, &nb, &v, D, 2, 4, C, labels, mask, &o);
    int64_t correct0, correct = 0;
    const double first = trainer_step(&t, &correct0);
    double last = first;
    for (int step = 1; step < 50; step++)
        last = trainer_step(&t, &correct);
    if (getenv("AG_TEST_VERBOSE"))
        fprintf(stderr, "tiny: loss %.4f -> %.4f, correct %lld -> %lld of %d\n", first, last,
                (long long)correct0, (long long)correct, N);
    ck_assert_msg(last < 0.5 * first, "loss %g -> %g over 50 steps", first, last);
    ck_assert_int_gt(correct, correct0);
    trainer_free(&t);
    ag_nbhd_destroy(&nb);
}
END_TEST

#ifdef _OPENMP
/* Weights after `steps` steps on `threads` threads, into out. */
static void train_on_threads(int threads, int steps, float **out, int64_t *n_out,
                             double *losses)
{
    enum { N = 4099, D = 32, H = 4, d = 8, C = 5, EXTRA = 12000 };
    ck_assert_int_eq(ag_set_threads(threads), threads);
    int64_t *src = malloc((N + EXTRA) * sizeof *src), *dst = malloc((N + EXTRA) * sizeof *dst);
    float *r = malloc(2 * EXTRA * sizeof *r);
    fill_uniform(r, 2 * EXTRA, 5, 1.0f);
    int64_t E = 0;
    for (int64_t i = 0; i < N; i++)
        src[E] = i, dst[E++] = i;
    for (int64_t e = 0; e < EXTRA; e++)
        src[E] = (int64_t)((r[2 * e] + 1) / 2 * N) % N,
        dst[E++] = (int64_t)((r[2 * e + 1] + 1) / 2 * N) % N;
    igraph_t ig;
    build_graph(&ig, N, src, dst, E, 1);
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &ig, &err), AG_OK);
    igraph_destroy(&ig);
    int64_t *labels = malloc(N * sizeof *labels);
    uint8_t *mask = malloc(N);
    for (int64_t i = 0; i < N; i++)
        labels[i] = i % 7 == 0 ? -1 : (i * 13) % C, mask[i] = i % 3 != 0;
    const variant_t v = {"threads", 2, 2, 0, 1, 1, 1, {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT}, 0};
    const ag_optimizer_opts_t o = {OPTIMIZER_DEFAULTS, .kind = AG_OPT_ADAMW, .lr = 0.01f, .weight_decay = 0.01f,
                                   .clip = 1.0f};
    trainer_t t;
    trainer_make(&t, &nb, &v, D, H, d, C, labels, mask, &o);
    for (int s = 0; s < steps; s++)
        losses[s] = trainer_step(&t, NULL);
    /* every trained array, one after another */
    int64_t n = 0;
    *out = NULL;
    for (int k = 0; k < 2; k++) {
        const ag_weights_t *w = &t.m.w[k];
        const float *ws[6] = {w->wq, w->wk, w->wv, w->wo, w->ln_weight, w->ln_bias};
        const int64_t sizes[6] = {H * d * D, H * d * D, H * d * D, D * H * d, D, D};
        for (int a = 0; a < 6; a++) {
            *out = realloc(*out, (size_t)(n + sizes[a]) * sizeof **out);
            memcpy(*out + n, ws[a], (size_t)sizes[a] * sizeof **out);
            n += sizes[a];
        }
    }
    *out = realloc(*out, (size_t)(n + C * D + C) * sizeof **out);
    memcpy(*out + n, t.Wr, C * D * sizeof **out);
    memcpy(*out + n + C * D, t.br, C * sizeof **out);
    *n_out = n + C * D + C;
    trainer_free(&t);
    ag_nbhd_destroy(&nb);
    free(src), free(dst), free(r), free(labels), free(mask);
}

START_TEST(training_identical_for_1_and_2_threads)
{
    float *w1, *w2;
    int64_t n1, n2;
    double l1[4], l2[4];
    train_on_threads(1, 4, &w1, &n1, l1);
    train_on_threads(2, 4, &w2, &n2, l2);
    ck_assert_int_eq(n1, n2);
    ck_assert_mem_eq(l1, l2, sizeof l1);
    ck_assert_mem_eq(w1, w2, (size_t)n1 * sizeof *w1);
    ck_assert_msg(l1[3] < l1[0], "loss %g -> %g", l1[0], l1[3]);
    free(w1), free(w2);
}
END_TEST
#endif

/* ---- errors ---- */

/* With few rows labelled (an example set's scored tokens) the head is made for
   those rows alone (no [N, C] logits); asking for every row's argmax makes the
   whole. Both give the loss, dX and dWr bit for bit, for every tail of rows
   and across chunks of 1,024 rows; and both agree with the double formula. */
START_TEST(cross_entropy_of_few_rows_is_the_whole_bit_for_bit)
{
    enum { ROWS = 2600, DIM = 24, CLASSES = 37 };
    float *X = malloc(ROWS * DIM * sizeof *X), *Wr = malloc(CLASSES * DIM * sizeof *Wr);
    int64_t *labels = malloc(ROWS * sizeof *labels), *pred = malloc(ROWS * sizeof *pred);
    fill_uniform(X, ROWS * DIM, 3, 1.0f);
    fill_uniform(Wr, CLASSES * DIM, 4, 0.5f);
    for (int64_t i = 0; i < ROWS; i++)   /* about one row in 9, none in the second chunk */
        labels[i] = (i % 9 == 4 || i == ROWS - 1) && (i < 1024 || i >= 2048)
                        ? (i * 7) % CLASSES : -1;
    float *dX[2], *dWr[2];
    double loss[2];
    int64_t correct[2];
    ag_error_t err;
    for (int k = 0; k < 2; k++) {
        dX[k] = malloc(ROWS * DIM * sizeof *dX[k]), dWr[k] = malloc(CLASSES * DIM * sizeof *dWr[k]);
        const ag_cross_entropy_t ce = {.Wr = Wr, .C = CLASSES, .labels = labels};
        ag_cross_entropy_out_t out = {.dX = dX[k], .dWr = dWr[k], .pred = k ? pred : NULL};
        ck_assert_msg(ag_loss_cross_entropy(X, ROWS, DIM, &ce, &out, &err) == AG_OK, "%s",
                      err.msg);
        loss[k] = out.loss, correct[k] = out.correct;
    }
    ck_assert(loss[0] == loss[1]);
    ck_assert_int_eq(correct[0], correct[1]);
    ck_assert_int_eq(memcmp(dX[0], dX[1], ROWS * DIM * sizeof *dX[0]), 0);
    ck_assert_int_eq(memcmp(dWr[0], dWr[1], CLASSES * DIM * sizeof *dWr[0]), 0);
    double *Xd = malloc(ROWS * DIM * sizeof *Xd);
    for (int64_t x = 0; x < ROWS * DIM; x++)
        Xd[x] = X[x];
    const double want = ref_loss_cross_entropy(Xd, ROWS, DIM, Wr, NULL, CLASSES, labels, NULL);
    ck_assert_msg(fabs(loss[0] - want) <= 1e-6 * fabs(want), "loss %.9g, in double %.9g",
                  loss[0], want);
    for (int k = 0; k < 2; k++)
        free(dX[k]), free(dWr[k]);
    free(X), free(Wr), free(labels), free(pred), free(Xd);
}
END_TEST

START_TEST(losses_refuse_bad_input)
{
    enum { N = 5, D = 3, C = 2 };
    float X[N * D] = {0}, Y[N * D] = {0}, Wr[C * D] = {0}, dX[N * D];
    int64_t labels[N] = {0, 1, -1, 1, 0};
    const uint8_t none[N] = {0}, some[N] = {0, 0, 1, 0, 0};
    ag_error_t err;
    double loss;
    ck_assert_fails_with(ag_loss_mse(X, Y, N, D, none, &loss, dX, &err), err, AG_EINVAL,
                         "mask selects none");
    ck_assert_fails_with(ag_loss_mse(X, Y, 0, D, NULL, &loss, dX, &err), err, AG_EINVAL,
                         "[0, 3]");
    ck_assert_fails_with(ag_loss_mse(X, NULL, N, D, NULL, &loss, dX, &err), err, AG_EINVAL,
                         "no states or targets");
    /* node 2 is in the mask but unlabelled: nothing to count */
    ag_cross_entropy_t ce = {.Wr = Wr, .C = C, .labels = labels, .mask = some};
    ag_cross_entropy_out_t out = {.dX = dX};
    ck_assert_fails_with(ag_loss_cross_entropy(X, N, D, &ce, &out, &err), err, AG_EINVAL,
                         "no node is both in the mask and labelled");
    ce.mask = NULL;
    labels[3] = C;
    ck_assert_fails_with(ag_loss_cross_entropy(X, N, D, &ce, &out, &err), err, AG_EINVAL,
                         "node 3 has label 2; expected 0..1");
    labels[3] = -2;
    ck_assert_fails_with(ag_loss_cross_entropy(X, N, D, &ce, &out, &err), err, AG_EINVAL,
                         "label -2");
    labels[3] = 1;
    ce.C = 0;
    ck_assert_fails_with(ag_loss_cross_entropy(X, N, D, &ce, &out, &err), err, AG_EINVAL,
                         "0 classes");
    ce.C = C, ce.Wr = NULL;
    ck_assert_fails_with(ag_loss_cross_entropy(X, N, D, &ce, &out, &err), err, AG_EINVAL,
                         "no readout, so the states are the logits: width 3; expected the 2 "
                         "classes");
    /* all well: no bias is a zero bias */
    ce.Wr = Wr;
    ck_assert_int_eq(ag_loss_cross_entropy(X, N, D, &ce, &out, &err), AG_OK);
    ck_assert_double_eq_tol(out.loss, log(2.0), 1e-12);
}
END_TEST

START_TEST(rounds_training_refuses_mismatches)
{
    tgraph_t g;
    tgraph_make(&g, 1);
    const variant_t v = {"errors", 2, 2, 0, 1, 1, 1, {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT}, 0};
    model_t m;
    model_make(&m, &v, g.N, 6, 3, 5, 1);
    float X[TG_N * 6] = {0}, dY[TG_N * 6] = {0};
    ag_error_t err;
    ag_tape_t *tape = (ag_tape_t *)1;
    ck_assert_fails_with(ag_rounds_forward(&g.nb, m.w, 2, X, 3, &m.opts, &tape, &err), err,
                         AG_EINVAL, "3 rounds with 2 layers");
    ck_assert_ptr_null(tape);
    ag_weights_t other;
    ck_assert_int_eq(ag_weights_random(&other, 6, 3, 5, 7, 1, &err), AG_OK);
    ag_weights_t pair[2] = {m.w[0], other};
    ck_assert_fails_with(ag_rounds_forward(&g.nb, pair, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "per-node weights for 7 nodes; the graph has 13");
    ck_assert_fails_with(ag_rounds_forward(&g.nb, m.w, 2, X, 2, &m.opts, NULL, &err), err,
                         AG_EINVAL, "no tape");
    ck_assert_int_eq(ag_rounds_forward(&g.nb, m.w, 2, X, 2, &m.opts, &tape, &err), AG_OK);
    /* gradients shaped for another layer */
    ag_weights_t wrong[2];
    ck_assert_int_eq(ag_weights_grads_init(&wrong[0], &m.w[0], 1, &err), AG_OK);
    ck_assert_int_eq(ag_weights_grads_init(&wrong[1], &other, 1, &err), AG_OK);
    ck_assert_fails_with(ag_rounds_backward(tape, dY, NULL, wrong, &err), err, AG_EINVAL,
                         "gradients 2 are for D=6, 3 heads of 5, per node 7");
    ck_assert_fails_with(ag_rounds_backward(tape, NULL, NULL, m.g, &err), err, AG_EINVAL,
                         "dY");
    /* NULL gradients: dX alone */
    ck_assert_int_eq(ag_rounds_backward(tape, dY, X, NULL, &err), AG_OK);
    ag_tape_free(tape);
    ck_assert_int_eq(ag_tape_bytes(13, 6, 3, 5, 2), 2 * 13 * (6 + 4 * 15 + 3) * 4);
    ck_assert_int_eq(ag_tape_bytes(-1, 6, 3, 5, 2), -1);
    ck_assert_int_eq(ag_tape_bytes(INT64_MAX / 8, 64, 1, 64, 1), -1);
    ag_weights_t bad = {0}, gbad;
    ck_assert_fails_with(ag_weights_grads_init(&gbad, &bad, 0, &err), err, AG_EINVAL, "D=0");
    ag_weights_destroy(&wrong[0]), ag_weights_destroy(&wrong[1]), ag_weights_destroy(&other);
    model_free(&m);
    ag_nbhd_destroy(&g.nb);
}
END_TEST

/* No rounds: X unchanged, dX = dY, every gradient zero (even where it held something). */
START_TEST(zero_rounds_pass_the_gradient_through)
{
    tgraph_t g;
    tgraph_make(&g, 1);
    const variant_t v = {"zero", 0, 1, 0, 1, 1, 1, {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT}, 0};
    model_t m;
    model_make(&m, &v, g.N, 6, 3, 5, 1);
    float X[TG_N * 6], X0[TG_N * 6], dY[TG_N * 6], dX[TG_N * 6];
    fill_uniform(X, TG_N * 6, 1, 1.0f);
    fill_uniform(dY, TG_N * 6, 2, 1.0f);
    memcpy(X0, X, sizeof X);
    m.g[0].wq[3] = m.g[0].ln_bias[1] = 7.0f;
    ag_error_t err;
    ag_tape_t *tape;
    ck_assert_int_eq(ag_rounds_forward(&g.nb, m.w, 1, X, 0, &m.opts, &tape, &err), AG_OK);
    ck_assert_mem_eq(X, X0, sizeof X);
    ck_assert_int_eq(ag_rounds_backward(tape, dY, dX, m.g, &err), AG_OK);
    ck_assert_mem_eq(dX, dY, sizeof dX);
    ck_assert(m.g[0].wq[3] == 0 && m.g[0].ln_bias[1] == 0);
    ag_tape_free(tape);
    model_free(&m);
    ag_nbhd_destroy(&g.nb);
}
END_TEST

START_TEST(optimizer_refuses_bad_settings)
{
    ag_optimizer_t *opt = (ag_optimizer_t *)1;
    ag_error_t err;
    const struct {
        ag_optimizer_opts_t o;
        const char *needle;
    } bad[] = {
        {{OPTIMIZER_DEFAULTS, .kind = AG_OPT_ADAM, .lr = 0}, "learning rate 0"},
        {{OPTIMIZER_DEFAULTS, .kind = AG_OPT_SGD, .lr = NAN}, "learning rate nan"},
        {{OPTIMIZER_DEFAULTS, .kind = AG_OPT_SGD, .lr = 0.1f, .momentum = 1}, "momentum 1"},
        {{OPTIMIZER_DEFAULTS, .kind = AG_OPT_ADAM, .lr = 0.1f, .beta2 = 1}, "betas 0.9, 1"},
        {{OPTIMIZER_DEFAULTS, .kind = AG_OPT_ADAMW, .lr = 0.1f, .weight_decay = -1}, "weight decay -1"},
        {{OPTIMIZER_DEFAULTS, .kind = AG_OPT_ADAM, .lr = 0.1f, .clip = -1}, "clip -1"},
        {{OPTIMIZER_DEFAULTS, .kind = (ag_optimizer_kind_t)7, .lr = 0.1f}, "unknown kind 7"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ck_assert_fails_with(ag_optimizer_init(&opt, &bad[k].o, &err), err, AG_EINVAL,
                             bad[k].needle);
        ck_assert_ptr_null(opt);
    }
    const ag_optimizer_opts_t o = {OPTIMIZER_DEFAULTS, .kind = AG_OPT_ADAM, .lr = 0.1f};
    ck_assert_int_eq(ag_optimizer_init(&opt, &o, &err), AG_OK);
    float p[3] = {1, 2, 3}, g[3] = {0.5f, NAN, 0};
    ck_assert_fails_with(ag_optimizer_add(opt, p, g, 0, &err), err, AG_EINVAL, "n >= 1");
    ck_assert_fails_with(ag_optimizer_add(opt, p, NULL, 3, &err), err, AG_EINVAL, "no array");
    ck_assert_int_eq(ag_optimizer_add(opt, p, g, 3, &err), AG_OK);
    /* a gradient that is not finite changes nothing */
    ck_assert_fails_with(ag_optimizer_step(opt, NULL, &err), err, AG_EINVAL, "not finite");
    ck_assert(p[0] == 1 && p[1] == 2 && p[2] == 3);
    g[1] = 0.25f;
    ck_assert_int_eq(ag_optimizer_step(opt, NULL, &err), AG_OK);
    ck_assert(p[0] < 1 && p[1] < 2 && p[2] == 3);   /* Adam's first step: lr sign(g) */
    ag_optimizer_free(opt);
}
END_TEST

Suite *training_suite(void)
{
    Suite *s = suite_create("training");
    TCase *tc = tcase_create("gradients");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, rounds_gradients_match_finite_differences, 0,
                        (int)(sizeof variants / sizeof variants[0]));
    suite_add_tcase(s, tc);
    TCase *losses = tcase_create("losses");
    tcase_add_test(losses, mse_matches_reference_and_finite_differences);
    tcase_add_loop_test(losses, cross_entropy_matches_reference_and_finite_differences, 0, 2);
    tcase_add_test(losses, chain_gradients_match_finite_differences);
    tcase_set_timeout(losses, 20);
    suite_add_tcase(s, losses);
    TCase *opt = tcase_create("optimizers");
    tcase_add_loop_test(opt, optimizer_steps_match_formulas, 0,
                        (int)(sizeof opt_cases / sizeof opt_cases[0]));
    suite_add_tcase(s, opt);
    TCase *train = tcase_create("training");
    tcase_set_timeout(train, 20);
    tcase_add_test(train, loss_decreases_on_a_tiny_problem);
#ifdef _OPENMP
    tcase_add_test(train, training_identical_for_1_and_2_threads);
#endif
    suite_add_tcase(s, train);
    TCase *errors = tcase_create("errors");
    tcase_add_test(errors, losses_refuse_bad_input);
    tcase_add_test(errors, cross_entropy_of_few_rows_is_the_whole_bit_for_bit);
    tcase_add_test(errors, rounds_training_refuses_mismatches);
    tcase_add_test(errors, optimizer_refuses_bad_settings);
    tcase_add_test(errors, zero_rounds_pass_the_gradient_through);
    suite_add_tcase(s, errors);
    return s;
}
