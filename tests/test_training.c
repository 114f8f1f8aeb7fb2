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
    ag_score_kind_t kind;
    float beta;
} variant_t;

#define MAX_LAYERS 3
typedef struct {
    int64_t N, D, H, d;
    int n_layers;
    ag_weights_t w[MAX_LAYERS], g[MAX_LAYERS];
    ag_score_t score;
    ag_round_opts_t opts;
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
    m->score = (ag_score_t){.kind = v->kind, .beta = v->beta};
    m->opts = (ag_round_opts_t){.score = &m->score, .no_residual = !v->residual,
                                .norm = v->layer_norm ? AG_NORM_LAYER : AG_NORM_NONE};
}

static void model_free(model_t *m)
{
    for (int k = 0; k < m->n_layers; k++)
        ag_weights_destroy(&m->w[k]), ag_weights_destroy(&m->g[k]);
}

static ref_layer_t ref_of(const ag_weights_t *w)
{
    return (ref_layer_t){w->wq, w->wk, w->wv, w->wo, w->per_node != 0, w->ln_weight,
                         w->ln_bias, NULL, NULL};
}

/* The reference's final states for features X0 (float) through m's rounds. */
static void ref_forward(const tgraph_t *g, const model_t *m, const variant_t *v,
                        const float *X0, double *X)
{
    ref_layer_t layers[MAX_LAYERS];
    for (int k = 0; k < m->n_layers; k++)
        layers[k] = ref_of(&m->w[k]);
    const ref_score_t sc = {.kind = v->kind, .beta = v->beta != 0 ? v->beta : 1.0};
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

/* Largest |grad - fd| over an array, relative to the array's largest |fd|
   (at least 1e-3); asserts it is below tol and returns it. */
static double check_array(const char *what, const float *grad, int64_t n, const tgraph_t *g,
                          const model_t *m, const variant_t *v, const float *X0,
                          const float *dY, double *X, float *A, double tol)
{
    double *fd = malloc((size_t)n * sizeof *fd), big = 1e-3, worst = 0;
    int64_t at = 0;
    for (int64_t x = 0; x < n; x++) {
        fd[x] = fd_entry(g, m, v, X0, dY, X, A, x, 1e-3f);
        big = fmax(big, fabs(fd[x]));
    }
    for (int64_t x = 0; x < n; x++) {
        const double e = fabs(grad[x] - fd[x]) / big;
        if (!(e <= worst))
            worst = e, at = x;
    }
    ck_assert_msg(worst <= tol, "%s: %s[%lld] = %.8g, finite differences %.8g (error %.3g of "
                  "the largest %.3g; tolerance %.1g)", v->name, what, (long long)at, grad[at],
                  fd[at], worst, big, tol);
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
    const double tol = 5e-4;   /* measured worst: 7e-5 (undirected, LayerNorm, no residual) */
    double worst = check_array("dX", dX, ND, &g, &m, v, X0, dY, Xr, X0, tol);
    for (int k = 0; k < m.n_layers; k++) {
        ag_weights_t *w = &m.w[k], *gr = &m.g[k];
        const int64_t copies = w->per_node ? w->per_node : 1, HD = H * d;
        float *arrays[6] = {w->wq, w->wk, w->wv, w->wo, w->ln_weight, w->ln_bias};
        const float *grads[6] = {gr->wq, gr->wk, gr->wv, gr->wo, gr->ln_weight, gr->ln_bias};
        const int64_t sizes[6] = {copies * HD * D, copies * HD * D, copies * HD * D, D * HD,
                                  D, D};
        const char *names[6] = {"dwq", "dwk", "dwv", "dwo", "dln_weight", "dln_bias"};
        for (int a = 0; a < (v->layer_norm ? 6 : 4); a++) {
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

static const variant_t variants[] = {
    {"shared, 1 round", 1, 1, 0, 0, 1, 1, AG_SCORE_SCALED_DOT, 0},
    {"shared, 2 rounds, LayerNorm", 2, 1, 0, 1, 1, 1, AG_SCORE_SCALED_DOT, 0},
    {"shared, 3 rounds, no residual", 3, 1, 0, 0, 0, 1, AG_SCORE_SCALED_DOT, 0},
    {"per-round layers, 3 rounds, LayerNorm", 3, 3, 0, 1, 1, 1, AG_SCORE_SCALED_DOT, 0},
    {"per-round layers, 2 rounds, dot, beta 0.5", 2, 2, 0, 0, 1, 1, AG_SCORE_DOT, 0.5f},
    {"per-node weights, 2 rounds, LayerNorm", 2, 1, 1, 1, 1, 1, AG_SCORE_SCALED_DOT, 0},
    {"per-node per-round, 2 rounds, no residual", 2, 2, 1, 0, 0, 1, AG_SCORE_SCALED_DOT, 0},
    {"undirected, 2 rounds, LayerNorm, no residual", 2, 1, 0, 1, 0, 0, AG_SCORE_SCALED_DOT, 0},
};

START_TEST(rounds_gradients_match_finite_differences)
{
    const double worst = check_variant(&variants[_i]);
    if (getenv("AG_TEST_VERBOSE"))
        fprintf(stderr, "%s: worst %.3g\n", variants[_i].name, worst);
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
    return s;
}
