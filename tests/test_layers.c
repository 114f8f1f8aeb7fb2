/*
 * Layers of their own shapes (ag_weights_t's D_out, mean_heads, no_residual,
 * bias, act, one projection): GAT's and a transformer's stacks through
 * ag_rounds_forward, ag_rounds_backward and ag_rounds_run, against the double
 * reference (tests/reference.c: ref_layers_shaped) and central finite
 * differences of it; bitwise for 1 and 2 threads; shapes refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "reference.h"
#include "testutil.h"

/* 11 nodes: self-loops, a multi-edge, node 10 without in-edges. */
#define LN 11
static const int64_t l_src[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 3, 5, 7, 9, 0, 2, 4, 6, 10,
                                10, 8, 3};
static const int64_t l_dst[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 5, 7, 9, 5, 6, 8, 1, 0,
                                4, 2, 4};
#define LE ((int64_t)(sizeof l_src / sizeof l_src[0]))

/* One layer's shape: in width, heads, head width, out (0: no wo), and the rest. */
typedef struct {
    int64_t D, H, d, D_out;
    int one_projection, mean_heads, residual, bias;
    ag_activation_t act;
    int64_t F;                  /* a feed-forward sublayer of width F (0: none) */
    ag_activation_t ff_act;
    int qkv_bias;               /* biases on the projections */
    int skip;                   /* a skip projection: 1 summed, 2 gated (beta) */
    int post_norm;              /* the stack's LayerNorms after the sums */
    int edges;                  /* reads the edge features (EDIM wide) */
} shape_t;

#define EDIM 3

typedef struct {
    const char *name;
    ag_score_kind_t kind;
    int layer_norm, n;
    shape_t shape[3];
} stack_t;

static const stack_t stacks[] = {
    {"GAT: 5 -> 2 heads x 3 (ELU) -> 1 head x 4, averaged", AG_SCORE_ADDITIVE, 0, 2,
     {{5, 2, 3, 0, 1, 0, 0, 1, AG_ACT_ELU, 0, AG_ACT_NONE, 0, 0, 0, 0},
      {6, 1, 4, 0, 1, 1, 0, 1, AG_ACT_NONE, 0, AG_ACT_NONE, 0, 0, 0, 0}}},
    {"GATv2, two heads averaged, ReLU", AG_SCORE_GATV2, 0, 2,
     {{5, 2, 3, 0, 1, 0, 0, 1, AG_ACT_RELU, 0, AG_ACT_NONE, 0, 0, 0, 0},
      {6, 2, 3, 0, 1, 1, 0, 0, AG_ACT_NONE, 0, AG_ACT_NONE, 0, 0, 0, 0}}},
    {"transformer: 5 -> wo 4 (GELU), residual 4, one projection 3, LayerNorm",
     AG_SCORE_SCALED_DOT, 1, 3,
     {{5, 2, 2, 4, 0, 0, 0, 1, AG_ACT_GELU, 0, AG_ACT_NONE, 0, 0, 0, 0},
      {4, 2, 3, 4, 0, 0, 1, 1, AG_ACT_GELU, 0, AG_ACT_NONE, 0, 0, 0, 0},
      {4, 1, 3, 0, 1, 0, 0, 0, AG_ACT_NONE, 0, AG_ACT_NONE, 0, 0, 0, 0}}},
    {"transformer blocks: residual attention, then feed-forward 4 -> 8 -> 4, LayerNorm",
     AG_SCORE_SCALED_DOT, 1, 3,
     {{5, 2, 2, 4, 0, 0, 0, 1, AG_ACT_NONE, 8, AG_ACT_GELU, 0, 0, 0, 0},
      {4, 2, 2, 4, 0, 0, 1, 1, AG_ACT_NONE, 8, AG_ACT_GELU, 0, 0, 0, 0},
      {4, 1, 3, 0, 1, 1, 0, 0, AG_ACT_NONE, 6, AG_ACT_RELU, 0, 0, 0, 0}}},
    {"GAT with a feed-forward sublayer (no LayerNorm, no biases)", AG_SCORE_ADDITIVE, 0, 2,
     {{5, 2, 3, 0, 1, 0, 0, 0, AG_ACT_ELU, 12, AG_ACT_ELU, 0, 0, 0, 0},
      {6, 1, 4, 0, 1, 1, 0, 1, AG_ACT_NONE, 0, AG_ACT_NONE, 0, 0, 0, 0}}},
    {"TransformerConv: projection biases, gated then summed skips, edge features on keys and "
     "values", AG_SCORE_SCALED_DOT, 0, 2,
     {{5, 2, 3, 0, 0, 0, 0, 0, AG_ACT_ELU, 0, AG_ACT_NONE, 1, 2, 0, 1},
      {6, 2, 2, 0, 0, 1, 0, 1, AG_ACT_NONE, 0, AG_ACT_NONE, 1, 1, 0, 1}}},
    {"post-norm blocks (residual attention, sublayer), then GAT with edge features",
     AG_SCORE_ADDITIVE, 1, 3,
     {{5, 2, 2, 5, 0, 0, 1, 1, AG_ACT_NONE, 8, AG_ACT_GELU, 0, 0, 1, 0},
      {5, 2, 3, 0, 1, 0, 0, 1, AG_ACT_ELU, 0, AG_ACT_NONE, 1, 0, 0, 1},
      {6, 1, 4, 0, 1, 1, 0, 1, AG_ACT_NONE, 0, AG_ACT_NONE, 0, 0, 1, 1}}},
    {"GATv2 with edge features on the keys, a skip", AG_SCORE_GATV2, 0, 2,
     {{5, 2, 3, 0, 1, 0, 0, 1, AG_ACT_RELU, 0, AG_ACT_NONE, 0, 1, 0, 1},
      {6, 2, 3, 0, 1, 1, 0, 0, AG_ACT_NONE, 0, AG_ACT_NONE, 0, 0, 0, 1}}},
};

typedef struct {
    ag_weights_t w[3], g[3];
    ag_score_t score;
    ag_round_opts_t opts;
    int n;
    float *edges;             /* [E, EDIM] in the messages' order (the reference's) */
    float *edges_slots;       /* the same in nb's slot order (the library's) */
} stack_model_t;

static int64_t out_width(const shape_t *s)
{
    return s->D_out ? s->D_out : s->mean_heads ? s->d : s->H * s->d;
}

static float *uniform(int64_t n, uint64_t seed, float scale)
{
    float *x = malloc((size_t)n * sizeof *x);
    fill_uniform(x, n, seed, scale);
    return x;
}

/* The layers of st, drawn by the tests' own generator. */
static void stack_make(stack_model_t *m, const stack_t *st)
{
    memset(m, 0, sizeof *m);
    m->n = st->n;
    for (int l = 0; l < st->n; l++) {
        const shape_t *s = &st->shape[l];
        ag_weights_t *w = &m->w[l];
        const int64_t HD = s->H * s->d, out = out_width(s);
        const uint64_t seed = 100 * (uint64_t)(l + 1);
        *w = (ag_weights_t){.D = s->D, .H = s->H, .d = s->d, .D_out = s->D_out,
                            .mean_heads = s->mean_heads, .no_residual = !s->residual,
                            .act = s->act};
        w->wq = uniform(HD * s->D, seed + 1, 0.7f);
        if (!s->one_projection)
            w->wk = uniform(HD * s->D, seed + 2, 0.7f), w->wv = uniform(HD * s->D, seed + 3, 0.7f);
        if (s->D_out)
            w->wo = uniform(s->D_out * HD, seed + 4, 0.6f);
        if (s->bias)
            w->bias = uniform(out, seed + 5, 0.3f);
        if (st->kind == AG_SCORE_ADDITIVE)
            w->attn_src = uniform(HD, seed + 6, 0.8f), w->attn_dst = uniform(HD, seed + 7, 0.8f);
        if (st->kind == AG_SCORE_GATV2)
            w->attn = uniform(HD, seed + 6, 0.8f);
        if (st->layer_norm) {
            w->ln_weight = uniform(s->D, seed + 8, 0.3f);
            w->ln_bias = uniform(s->D, seed + 9, 0.3f);
            for (int64_t c = 0; c < s->D; c++)
                w->ln_weight[c] += 1.0f;
        }
        if (s->F) {
            w->F = s->F, w->ff_act = s->ff_act;
            w->w1 = uniform(s->F * out, seed + 10, 0.6f), w->w2 = uniform(out * s->F, seed + 11,
                                                                        0.4f);
            if (s->bias)
                w->b1 = uniform(s->F, seed + 12, 0.3f), w->b2 = uniform(out, seed + 13, 0.3f);
            if (st->layer_norm) {
                w->ln2_weight = uniform(out, seed + 14, 0.3f);
                w->ln2_bias = uniform(out, seed + 15, 0.3f);
                for (int64_t c = 0; c < out; c++)
                    w->ln2_weight[c] += 1.0f;
            }
        }
        if (s->qkv_bias) {
            w->bq = uniform(HD, seed + 16, 0.3f);
            if (!s->one_projection)
                w->bk = uniform(HD, seed + 17, 0.3f), w->bv = uniform(HD, seed + 18, 0.3f);
        }
        if (s->skip) {
            w->wskip = uniform(out * s->D, seed + 19, 0.6f), w->bskip = uniform(out, seed + 20,
                                                                               0.3f);
            if (s->skip == 2)
                w->wbeta = uniform(3 * out, seed + 21, 0.5f);
        }
        w->post_norm = s->post_norm;
        if (st->layer_norm && s->post_norm) {   /* its LayerNorm on the output's width */
            free(w->ln_weight), free(w->ln_bias);
            w->ln_weight = uniform(out, seed + 8, 0.3f), w->ln_bias = uniform(out, seed + 9, 0.3f);
            for (int64_t c = 0; c < out; c++)
                w->ln_weight[c] += 1.0f;
        }
        if (s->edges) {
            w->edge_dim = EDIM, w->wedge = uniform(HD * EDIM, seed + 22, 0.6f);
            if (st->kind == AG_SCORE_ADDITIVE)
                w->attn_edge = uniform(HD, seed + 23, 0.8f);
        }
        ag_error_t err;
        ck_assert_int_eq(ag_weights_grads_init(&m->g[l], w, st->layer_norm, &err), AG_OK);
    }
    m->score = (ag_score_t){SCORE_DEFAULTS, .kind = st->kind};
    m->opts = (ag_round_opts_t){ROUND_DEFAULTS, .score = &m->score,
                                .norm = st->layer_norm ? AG_NORM_LAYER : AG_NORM_NONE};
}

/* The stack's edge features for nb (E messages): drawn in the messages' order
   (nb's graph's edge order), and put in nb's slots for the library. */
static void stack_edges(stack_model_t *m, const ag_nbhd_t *nb)
{
    const int64_t E = nb->n_edges;
    m->edges = uniform(E * EDIM, 31, 1.0f);
    m->edges_slots = malloc((size_t)(E * EDIM) * sizeof(float));
    ag_edge_msg_t *msgs;
    int64_t *slot;
    ag_error_t err;
    ck_assert_int_eq(ag_edge_order(nb, &msgs, &slot, &err), AG_OK);
    for (int64_t k = 0; k < E; k++)
        memcpy(m->edges_slots + slot[k] * EDIM, m->edges + k * EDIM, EDIM * sizeof(float));
    free(msgs), free(slot);
    m->opts.edge_features = m->edges_slots, m->opts.edge_dim = EDIM;
}

static void stack_free(stack_model_t *m)
{
    for (int l = 0; l < m->n; l++)
        ag_weights_destroy(&m->w[l]), ag_weights_destroy(&m->g[l]);
    free(m->edges), free(m->edges_slots);
}

/* The reference's final states (widest-sized X) from X0 [N, D of layer 1]. */
static void ref_stack(const stack_t *st, const stack_model_t *m, const float *X0, double *X)
{
    ref_shaped_t L[3];
    for (int l = 0; l < st->n; l++) {
        const ag_weights_t *w = &m->w[l];
        const int gatv2 = st->kind == AG_SCORE_GATV2;
        L[l] = (ref_shaped_t){w->D, w->H, w->d, w->D_out, w->wq, w->wk, w->wv, w->wo,
                              w->mean_heads, !w->no_residual, w->bias, (int)w->act,
                              w->ln_weight, w->ln_bias, gatv2 ? w->attn : w->attn_src,
                              gatv2 ? NULL : w->attn_dst, w->F, w->w1, w->b1, w->w2, w->b2,
                              w->ln2_weight, w->ln2_bias, (int)w->ff_act,
                              .bq = w->bq, .bk = w->bk, .bv = w->bv, .wskip = w->wskip,
                              .bskip = w->bskip, .wbeta = w->wbeta, .post_norm = w->post_norm,
                              .edges = m->edges, .edge_dim = w->edge_dim, .wedge = w->wedge,
                              .attn_edge = w->attn_edge};
    }
    for (int64_t x = 0; x < LN * st->shape[0].D; x++)
        X[x] = X0[x];
    const ref_score_t sc = {.kind = (int)st->kind, .beta = 1.0, .slope = 0.2};
    ref_layers_shaped(LN, l_src, l_dst, LE, L, st->n, &sc, X);
}

/* L = sum(R * X_final) in double. */
static double ref_loss(const stack_t *st, const stack_model_t *m, const float *X0,
                       const float *R, int64_t n_out, double *X)
{
    ref_stack(st, m, X0, X);
    double L = 0;
    for (int64_t x = 0; x < n_out; x++)
        L += (double)R[x] * X[x];
    return L;
}

/* Central differences of ref_loss in each entry of A against grad; entries at
   a kink (ReLU, LeakyReLU at 0: the difference moves with the step) skipped,
   at most one in 10. Returns the worst error relative to the largest. */
static double check_grad(const char *what, const stack_t *st, const stack_model_t *m,
                         const float *X0, const float *R, int64_t n_out, double *X, float *A,
                         const float *grad, int64_t n)
{
    double *fd = malloc((size_t)n * sizeof *fd), big = 1e-3, worst = 0;
    int64_t at = 0, kinks = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t x = 0; x < n; x++) {
            const float keep = A[x], h = pass == 0 ? 1e-4f : 1e-5f;
            A[x] = keep + h;
            const float up = A[x];
            const double Lp = ref_loss(st, m, X0, R, n_out, X);
            A[x] = keep - h;
            const float down = A[x];
            const double Lm = ref_loss(st, m, X0, R, n_out, X);
            A[x] = keep;
            const double f = (Lp - Lm) / ((double)up - (double)down);
            if (pass == 0) {
                fd[x] = f, big = fmax(big, fabs(f));
                continue;
            }
            const double e = fabs(grad[x] - fd[x]) / big;
            if (e > 5e-4 && fabs(f - fd[x]) / big > 5e-4) {
                kinks++;
                continue;
            }
            if (!(e <= worst))
                worst = e, at = x;
        }
    ck_assert_msg(worst <= 5e-4, "%s: %s[%lld] = %.8g, finite differences %.8g (error %.3g)",
                  st->name, what, (long long)at, grad[at], fd[at], worst);
    ck_assert_msg(kinks <= 1 + n / 10, "%s: %s: %lld of %lld entries at kinks", st->name, what,
                  (long long)kinks, (long long)n);
    free(fd);
    return worst;
}

static void graph_make(ag_nbhd_t *nb)
{
    igraph_t g;
    build_graph(&g, LN, l_src, l_dst, LE, 1);
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(nb, &g, &err), AG_OK);
    igraph_destroy(&g);
}

START_TEST(shaped_layers_match_reference_and_finite_differences)
{
    const stack_t *st = &stacks[_i];
    stack_model_t m;
    stack_make(&m, st);
    ag_nbhd_t nb;
    graph_make(&nb);
    stack_edges(&m, &nb);
    const int64_t widest = ag_rounds_widest(m.w, m.n, m.n);
    const int64_t D0 = st->shape[0].D, out = out_width(&st->shape[st->n - 1]);
    float *X0 = uniform(LN * D0, 7, 1.0f), *R = uniform(LN * out, 8, 1.0f);
    float *X = calloc((size_t)(LN * widest), sizeof *X), *dX = malloc((size_t)(LN * D0) * 4);
    double *Xr = malloc((size_t)(LN * widest) * sizeof *Xr);
    memcpy(X, X0, (size_t)(LN * D0) * sizeof *X);
    ag_error_t err;
    ag_tape_t *tape;
    ck_assert_msg(ag_rounds_forward(&nb, m.w, m.n, X, m.n, &m.opts, &tape, &err) == AG_OK,
                  "%s: %s", st->name, err.msg);
    ref_stack(st, &m, X0, Xr);
    for (int64_t x = 0; x < LN * out; x++)
        ck_assert_msg(fabs(X[x] - Xr[x]) <= 1e-5 * (1 + fabs(Xr[x])), "%s: X[%lld] = %.8g, "
                      "reference %.8g", st->name, (long long)x, X[x], Xr[x]);
    /* inference runs the same layers to the same values */
    float *Xi = calloc((size_t)(LN * widest), sizeof *Xi);
    memcpy(Xi, X0, (size_t)(LN * D0) * sizeof *Xi);
    ag_workspace_t ws;
    int64_t HD = 0;
    for (int l = 0; l < m.n; l++)
        HD = m.w[l].H * m.w[l].d > HD ? m.w[l].H * m.w[l].d : HD;
    ck_assert_int_eq(ag_workspace_init(&ws, LN, HD, widest, &err), AG_OK);
    ck_assert_msg(ag_rounds_run(&nb, m.w, m.n, Xi, m.n, &m.opts, &ws, NULL, &err) == AG_OK,
                  "%s: %s", st->name, err.msg);
    ck_assert_int_eq(memcmp(Xi, X, (size_t)(LN * out) * sizeof *X), 0);
    ag_workspace_destroy(&ws);
    free(Xi);

    /* without dX0 the first round skips its input's gradient: the same weight gradients */
    ck_assert_int_eq(ag_rounds_backward(tape, R, NULL, m.g, &err), AG_OK);
    float *kept[3][AG_LAYER_ARRAYS];
    for (int l = 0; l < m.n; l++)
        for (int a = 0; a < AG_LAYER_ARRAYS; a++) {
            const float *g = *ag_layer_array(&m.g[l], a);
            const size_t bytes = (size_t)ag_layer_array_size(&m.g[l], a) * 4;
            kept[l][a] = g ? memcpy(malloc(bytes), g, bytes) : NULL;
        }
    ck_assert_msg(ag_rounds_backward(tape, R, dX, m.g, &err) == AG_OK, "%s: %s", st->name,
                  err.msg);
    ag_tape_free(tape);
    for (int l = 0; l < m.n; l++)
        for (int a = 0; a < AG_LAYER_ARRAYS; a++)
            if (kept[l][a]) {
                ck_assert_msg(memcmp(kept[l][a], *ag_layer_array(&m.g[l], a),
                                     (size_t)ag_layer_array_size(&m.g[l], a) * 4) == 0,
                              "%s: layer %d array %d differs without dX0", st->name, l + 1, a);
                free(kept[l][a]);
            }
    check_grad("dX", st, &m, X0, R, LN * out, Xr, X0, dX, LN * D0);
    for (int l = 0; l < m.n; l++) {
        for (int a = 0; a < AG_LAYER_ARRAYS; a++) {
            float *w = *ag_layer_array(&m.w[l], a), *g = *ag_layer_array(&m.g[l], a);
            const char *name = ag_layer_array_info(a)->name;
            const int64_t size = ag_layer_array_size(&m.w[l], a);
            if (!w)
                continue;
            ck_assert_msg(g != NULL && ag_layer_array_size(&m.g[l], a) == size, "%s: layer %d "
                          "has %s but no gradient of its size", st->name, l + 1, name);
            char what[64];
            snprintf(what, sizeof what, "layer %d d%s", l + 1, name);
            check_grad(what, st, &m, X0, R, LN * out, Xr, w, g, size);
        }
    }
    stack_free(&m);
    ag_nbhd_destroy(&nb);
    free(X0), free(R), free(X), free(dX), free(Xr);
}
END_TEST

#ifdef _OPENMP
/* A graph large enough that every parallel loop splits (4,099 nodes, 8 random
   in-edges and a self-loop each; the gemm's 1,024-row chunks, the kernels'
   destinations), from the tests' own generator. */
#define BIG 4099
static void big_graph_make(ag_nbhd_t *nb)
{
    int64_t *src = malloc(9 * BIG * sizeof *src), *dst = malloc(9 * BIG * sizeof *dst);
    float *r = malloc(8 * BIG * sizeof *r);
    fill_uniform(r, 8 * BIG, 21, 1.0f);
    for (int64_t i = 0; i < BIG; i++)
        for (int k = 0; k < 9; k++) {
            src[9 * i + k] = k == 8 ? i : (int64_t)((r[8 * i + k] + 1.0f) * 0.5f * (BIG - 1));
            dst[9 * i + k] = i;
        }
    igraph_t g;
    build_graph(&g, BIG, src, dst, 9 * BIG, 1);
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(nb, &g, &err), AG_OK);
    igraph_destroy(&g);
    free(src), free(dst), free(r);
}

/* The forward and every gradient of stack st on `threads`, with every dropout. */
static void run_on(int threads, const stack_t *st, float **X_out, float **g_out, int64_t *n_g)
{
    ck_assert_int_eq(ag_set_threads(threads), threads);
    stack_model_t m;
    stack_make(&m, st);
    m.opts.dropout = 0.2f, m.opts.attn_dropout = 0.3f, m.opts.resid_dropout = 0.25f;
    m.opts.dropout_seed = 11;
    ag_nbhd_t nb;
    big_graph_make(&nb);
    stack_edges(&m, &nb);
    const int64_t widest = ag_rounds_widest(m.w, m.n, m.n), D0 = st->shape[0].D;
    const int64_t out = out_width(&st->shape[st->n - 1]);
    float *X = calloc((size_t)(BIG * widest), sizeof *X), *R = uniform(BIG * out, 8, 1.0f);
    fill_uniform(X, BIG * D0, 7, 1.0f);
    ag_error_t err;
    ag_tape_t *tape;
    ck_assert_int_eq(ag_rounds_forward(&nb, m.w, m.n, X, m.n, &m.opts, &tape, &err), AG_OK);
    ck_assert_int_eq(ag_rounds_backward(tape, R, NULL, m.g, &err), AG_OK);
    ag_tape_free(tape);
    *g_out = malloc(4096 * sizeof(float));
    *n_g = 0;
    for (int l = 0; l < m.n; l++) {   /* every gradient, one after another */
        for (int a = 0; a < AG_LAYER_ARRAYS; a++) {
            const float *g = *ag_layer_array(&m.g[l], a);
            const int64_t size = ag_layer_array_size(&m.g[l], a);
            if (g) {
                ck_assert_int_le(*n_g + size, 4096);
                memcpy(*g_out + *n_g, g, (size_t)size * sizeof(float));
                *n_g += size;
            }
        }
    }
    *X_out = X;
    stack_free(&m);
    ag_nbhd_destroy(&nb);
    free(R);
    ag_set_threads(2);
}

START_TEST(shaped_layers_identical_for_1_and_2_threads)
{
    for (int s = 0; s < (int)(sizeof stacks / sizeof stacks[0]); s++) {
        float *X1, *X2, *g1, *g2;
        int64_t n1, n2;
        run_on(1, &stacks[s], &X1, &g1, &n1);
        run_on(2, &stacks[s], &X2, &g2, &n2);
        const int64_t out = out_width(&stacks[s].shape[stacks[s].n - 1]);
        ck_assert_int_eq(n1, n2);
        ck_assert_msg(memcmp(X1, X2, (size_t)(BIG * out) * 4) == 0, "%s: X", stacks[s].name);
        ck_assert_msg(memcmp(g1, g2, (size_t)n1 * 4) == 0, "%s: gradients", stacks[s].name);
        free(X1), free(X2), free(g1), free(g2);
    }
}
END_TEST
#endif

START_TEST(shaped_layers_refuse_impossible_shapes)
{
    stack_model_t m;
    stack_make(&m, &stacks[0]);   /* GAT: 5 -> 6 -> 4 */
    ag_nbhd_t nb;
    graph_make(&nb);
    float X[LN * 8] = {0};
    ag_error_t err;
    ag_tape_t *tape;
    /* one layer for two rounds that changes the width */
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 1, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 1 reads width 5; the layer before it writes 6");
    /* a residual across a change of width */
    m.w[0].no_residual = 0;
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "cannot add a residual; give it no_residual");
    m.w[0].no_residual = 1;
    /* wk without wv */
    m.w[1].wk = m.w[1].wq;
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 2 has wk but not wv");
    m.w[1].wk = NULL;
    /* mean_heads with wo */
    m.w[1].wo = m.w[1].wq, m.w[1].D_out = 4;
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 2 has wo and mean_heads");
    m.w[1].wo = NULL, m.w[1].D_out = 0;
    /* an activation out of range */
    m.w[0].act = (ag_activation_t)9;
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 1 has activation 9");
    m.w[0].act = AG_ACT_ELU;
    /* what the MPI layer runs: these layers; not one that cannot run, nor edge features */
    ck_assert_int_eq(ag_i_layers_mpi_check(m.w, 2, 2, &m.opts, &err), AG_OK);
    ag_weights_t half = m.w[1];
    half.wk = half.wq;
    ck_assert_fails_with(ag_i_layers_mpi_check(&half, 1, 1, &m.opts, &err), err, AG_EINVAL,
                         "layer 1 has wk but not wv");
    half = m.w[1], half.wedge = half.wq, half.edge_dim = 1;
    ck_assert_fails_with(ag_i_layers_mpi_check(&half, 1, 1, &m.opts, &err), err, AG_EINVAL,
                         "layer 1: the MPI layer runs no edge features");
    /* TransformerConv's and post-norm's parts where they cannot run */
    float *spare = uniform(6 * 6 * 3, 3, 0.5f);
    m.w[1].wbeta = spare;
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 2 has wbeta but no wskip");
    m.w[1].wbeta = NULL, m.w[1].wskip = spare, m.w[1].no_residual = 0, m.w[1].mean_heads = 0;
    m.w[1].H = 2, m.w[1].d = 3;   /* 6 -> 6, so that only the residual is wrong */
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 2 has a skip projection and a residual");
    m.w[1].wskip = NULL, m.w[1].no_residual = 1, m.w[1].mean_heads = 1;
    m.w[1].H = 1, m.w[1].d = 4;
    m.w[0].bk = spare;
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 1 has one projection and bk; its one bias is bq");
    m.w[0].bk = NULL, m.w[0].post_norm = 1;
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 1 is post-norm, and the options have no norm");
    m.w[0].post_norm = 0, m.w[0].wedge = spare, m.w[0].edge_dim = 2;
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 1 projects edge features (wedge), and the options "
                         "give none");
    m.opts.edge_features = spare, m.opts.edge_dim = 3;
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 1 reads edge features of width 2; the options' are "
                         "3 wide");
    m.opts.edge_dim = 2;
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 1 has an additive score without attn_edge");
    m.w[0].wedge = NULL;
    ck_assert_fails_with(ag_rounds_forward(&nb, m.w, 2, X, 2, &m.opts, &tape, &err), err,
                         AG_EINVAL, "layer 1 has edge_dim 2, no wedge");
    m.w[0].edge_dim = 0, m.opts.edge_features = NULL, m.opts.edge_dim = 0;
    free(spare);
    /* a workspace too narrow for the widest state */
    ag_workspace_t ws;
    ck_assert_int_eq(ag_workspace_init(&ws, LN, 6, 5, &err), AG_OK);
    ck_assert_fails_with(ag_rounds_run(&nb, m.w, 2, X, 2, &m.opts, &ws, NULL, &err), err,
                         AG_EINVAL, "expected [11, 6, 6]");
    ag_workspace_destroy(&ws);
    stack_free(&m);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* A model whose last layer writes the classes: cross-entropy with no readout
   (Wr NULL) is the reference's with an identity readout, loss and gradient. */
START_TEST(cross_entropy_without_readout)
{
    enum { N = 9, C = 4 };
    float X[N * C], I[C * C] = {0}, b[C] = {0.1f, -0.2f, 0.3f, 0.0f}, dX[N * C], dX_id[N * C];
    int64_t labels[N] = {0, 1, 2, 3, -1, 2, 1, 0, 3};
    fill_uniform(X, N * C, 5, 2.0f);
    for (int c = 0; c < C; c++)
        I[c * C + c] = 1.0f;
    double loss, loss_id;
    ag_error_t err;
    ag_cross_entropy_t ce = {.br = b, .C = C, .labels = labels};
    ag_cross_entropy_out_t out = {.dX = dX};
    ck_assert_int_eq(ag_loss_cross_entropy(X, N, C, &ce, &out, &err), AG_OK);
    loss = out.loss;
    ce.Wr = I, out.dX = dX_id;
    ck_assert_int_eq(ag_loss_cross_entropy(X, N, C, &ce, &out, &err), AG_OK);
    loss_id = out.loss;
    double Xd[N * C];
    for (int x = 0; x < N * C; x++)
        Xd[x] = X[x];
    ck_assert_double_eq_tol(loss, ref_loss_cross_entropy(Xd, N, C, I, b, C, labels, NULL), 1e-6);
    ck_assert_double_eq_tol(loss, loss_id, 1e-12);
    for (int x = 0; x < N * C; x++)
        ck_assert_float_eq_tol(dX[x], dX_id[x], 1e-7f);
    ce.Wr = NULL, ce.C = C - 1, out.dX = dX;
    ck_assert_fails_with(ag_loss_cross_entropy(X, N, C, &ce, &out, &err), err,
                         AG_EINVAL, "width 4; expected the 3 classes");
}
END_TEST

/* The table of a layer's arrays against the shapes docs/model-file.md lists,
   written out here: every field of ag_weights_t once, in its order. */
START_TEST(layer_array_table_matches_the_documented_shapes)
{
    /* D 5, 2 heads of 3, wo [7, 6]: out 7; F 11; edge features 4; post-norm */
    ag_weights_t w = {.D = 5, .H = 2, .d = 3, .D_out = 7, .F = 11, .edge_dim = 4,
                      .post_norm = 1};
    w.wo = (float[1]){0};
    static const struct {
        const char *name;
        int ndim;
        int64_t shape[3], fan_in;
    } want[] = {
        {"wq", 2, {6, 5}, 5}, {"wk", 2, {6, 5}, 5}, {"wv", 2, {6, 5}, 5},
        {"wo", 2, {7, 6}, 6}, {"ln_weight", 1, {7}, 7}, {"ln_bias", 1, {7}, 7},
        {"attn_src", 2, {2, 3}, 3}, {"attn_dst", 2, {2, 3}, 3}, {"attn", 2, {2, 3}, 3},
        {"bias", 1, {7}, 7}, {"w1", 2, {11, 7}, 7}, {"b1", 1, {11}, 11},
        {"w2", 2, {7, 11}, 11}, {"b2", 1, {7}, 7}, {"ln2_weight", 1, {7}, 7},
        {"ln2_bias", 1, {7}, 7}, {"bq", 1, {6}, 6}, {"bk", 1, {6}, 6}, {"bv", 1, {6}, 6},
        {"wskip", 2, {7, 5}, 5}, {"bskip", 1, {7}, 7}, {"wbeta", 1, {21}, 21},
        {"wedge", 2, {6, 4}, 4}, {"attn_edge", 2, {2, 3}, 3},
    };
    ck_assert_int_eq(sizeof want / sizeof want[0], AG_LAYER_ARRAYS);
    ck_assert_ptr_null(ag_layer_array_info(-1));
    ck_assert_ptr_null(ag_layer_array_info(AG_LAYER_ARRAYS));
    float **fields[] = {&w.wq, &w.wk, &w.wv, &w.wo, &w.ln_weight, &w.ln_bias, &w.attn_src,
                        &w.attn_dst, &w.attn, &w.bias, &w.w1, &w.b1, &w.w2, &w.b2,
                        &w.ln2_weight, &w.ln2_bias, &w.bq, &w.bk, &w.bv, &w.wskip, &w.bskip,
                        &w.wbeta, &w.wedge, &w.attn_edge};
    for (int k = 0; k < AG_LAYER_ARRAYS; k++) {
        const ag_layer_array_t *a = ag_layer_array_info(k);
        ck_assert_str_eq(a->name, want[k].name);
        ck_assert_ptr_eq(ag_layer_array(&w, k), fields[k]);
        int64_t shape[3];
        const int ndim = ag_layer_array_shape(&w, k, shape);
        ck_assert_msg(ndim == want[k].ndim, "%s: %d dimensions", a->name, ndim);
        int64_t n = 1;
        for (int x = 0; x < ndim; x++) {
            ck_assert_msg(shape[x] == want[k].shape[x], "%s: dimension %d is %lld", a->name, x,
                          (long long)shape[x]);
            n *= shape[x];
        }
        ck_assert_int_eq(ag_layer_array_size(&w, k), n);
        ck_assert_int_eq(ag_layer_array_fan_in(&w, k), want[k].fan_in);
        ck_assert_int_eq(a->decay, ndim >= 2);   /* nanoGPT's groups */
        /* gains start at 1, biases at 0, the rest drawn */
        const int gain = !strcmp(a->name, "ln_weight") || !strcmp(a->name, "ln2_weight");
        const int vector = ndim == 1 && strcmp(a->name, "wbeta");
        ck_assert_int_eq(a->init, gain ? AG_INIT_ONES : vector ? AG_INIT_ZEROS : AG_INIT_NORMAL);
    }
    /* per node: the projections gain the nodes' dimension, nothing else */
    w.per_node = 9;
    int64_t shape[3];
    ck_assert_int_eq(ag_layer_array_shape(&w, 1, shape), 3);
    ck_assert_int_eq(shape[0] * shape[1] * shape[2], 9 * 6 * 5);
    ck_assert_int_eq(ag_layer_array_fan_in(&w, 1), 5);
    ck_assert_int_eq(ag_layer_array_shape(&w, 19, shape), 2);
    /* what a layer has: GAT's (one projection, bias) and a GPT block without biases */
    const unsigned gat = AG_LAYER_ADDITIVE | AG_LAYER_BIAS;
    const unsigned gpt = AG_LAYER_QKV | AG_LAYER_WO | AG_LAYER_NORM | AG_LAYER_FFN;
    char has_gat[256] = "", has_gpt[256] = "";
    for (int k = 0; k < AG_LAYER_ARRAYS; k++) {
        if (ag_layer_has(gat, k))
            strcat(strcat(has_gat, " "), ag_layer_array_info(k)->name);
        if (ag_layer_has(gpt, k))
            strcat(strcat(has_gpt, " "), ag_layer_array_info(k)->name);
    }
    ck_assert_str_eq(has_gat, " wq attn_src attn_dst bias");
    ck_assert_str_eq(has_gpt, " wq wk wv wo ln_weight w1 w2 ln2_weight");
}
END_TEST

Suite *layers_suite(void)
{
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("shaped");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, shaped_layers_match_reference_and_finite_differences, 0,
                        (int)(sizeof stacks / sizeof stacks[0]));
#ifdef _OPENMP
    tcase_add_test(tc, shaped_layers_identical_for_1_and_2_threads);
#endif
    tcase_add_test(tc, shaped_layers_refuse_impossible_shapes);
    tcase_add_test(tc, cross_entropy_without_readout);
    tcase_add_test(tc, layer_array_table_matches_the_documented_shapes);
    suite_add_tcase(s, tc);
    return s;
}
