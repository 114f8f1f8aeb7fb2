/*
 * Training through the rounds: a forward that keeps each round's activations
 * on a tape, and the backward that walks the rounds in reverse.
 *
 * Round r (layer w): Xn = LayerNorm(X) or X; Q, K, V = Xn Wq^T, Xn Wk^T, Xn Wv^T;
 * M = attention(Q, K, V); X' = X + M Wo^T (or M Wo^T). Its backward from dX':
 *   dM = dX' Wo,  dWo += dX'^T M;
 *   dQ, dK, dV (and the attention vectors') = ag_attention_backward(dM);
 *   dWq += dQ^T Xn (and k, v);  dXn = dQ Wq + dK Wk + dV Wv;
 *   dX = dX' (residual, else 0) + LayerNorm's backward of dXn (or dXn).
 * (A layer's bias, activation and feed-forward sublayer are more ops of
 * model/round.c's list, with their backwards there.) Every product goes through gemm.c and every sum over rows in fixed chunks,
 * so gradients are the same bits for any thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "train/train.h"

/* The forward's scratch: LayerNorm's output and dropout's, [N, widest]; the
   feed-forward sublayer's normed input [N, widest] and activation [N, F]. */
typedef struct {
    float *Xn, *Hn, *A;
    float *Pe;   /* the edge features' terms: [E, H*d], then [E, H] in as much again */
    int64_t n_Xn, n_Hn, n_A, n_Pe;   /* the floats each holds (they grow, never shrink) */
} fwd_scratch_t;

/* The backward's buffers: dX [N, D] (the gradient flowing down), Xn and dXn
   [N, D], dM, dQ, dK, dV [N, H*d], and two [H, d] vectors. */
typedef struct {
    float *dX, *Xn, *dXn, *dM, *dQ, *dK, *dV, *da_src, *da_dst;
    float *Hn, *dHn, *A, *dA;   /* the feed-forward sublayers': [N, widest], [N, F] */
    float *dR;                  /* the skips': [N, widest] */
    float *Pe, *Epre, *dEk, *dEv, *dEpre;   /* the edge features': [E, H*d] (Epre, dEpre
                                               [E, H] within as much) */
} back_bufs_t;

struct ag_tape {
    ag_nbhd_t **graph;        /* [rounds] each round's graph (the argument, or the
                                 options' graphs) */
    const int64_t **made;     /* [2 rounds] their edge_ptr and run_ptr when the tape was made */
    const ag_weights_t *layers;
    int n_layers, rounds;
    ag_round_opts_t opts;     /* the caller's, or AG_ROUND_OPTS_INIT */
    int layer_norm;
    int64_t N, E;
    int64_t *shape;           /* the rounds' shapes (ag_i_round_shapes) it was made for */
    int64_t widest, HD, F;    /* the widest state, the largest H*d and F of the rounds */
    int edges;                /* a round projects edge features */
    int64_t *start;           /* [rounds + 1]: where each round's activations begin */
    float *acts;              /* per round: X [N, D], Q K V M [N, H*d], lse [N, H], and
                                 what round_kept says */
    unsigned char *has_lse;   /* per round: the kernel wrote lse (sigmoid and linear
                                 scores, and kernels without it, leave it NaN) */
    fwd_scratch_t fs;         /* the forward's scratch and the backward's buffers, made */
    back_bufs_t back;         /* when first needed and kept for the next step */
    ag_i_plan_t *forward, *backward;   /* [rounds] the kernels' plans, made by the first
                                          round on a graph (plan_of) and run by every round
                                          on it (of every step) */
    float *kept;              /* a caller's buffer across steps (ag_i_tape_keep) */
    int64_t kept_count;
};

float *ag_i_tape_keep(ag_tape_t *t, int64_t count, ag_error_t *err)
{
    if (count > t->kept_count) {
        free(t->kept);
        t->kept_count = 0;
        if (!(t->kept = ag_alloc(count, sizeof *t->kept, err, "the tape's kept buffer")))
            return NULL;
        t->kept_count = count;
    }
    return t->kept;
}

/* The first round on round r's graph: whose plans round r runs. */
static int plan_of(const ag_tape_t *t, int r)
{
    int first = 0;
    while (t->graph[first] != t->graph[r])
        first++;
    return first;
}

static const ag_weights_t *round_layer(const ag_tape_t *t, int r)
{
    return &t->layers[t->n_layers == 1 ? 0 : r];
}

/* Floats a round of layer w keeps per node. */
static int64_t round_width(const ag_tape_t *t, const ag_weights_t *w)
{
    return w->D + 4 * w->H * w->d + w->H +
           ag_i_kept_width(w, ag_i_round_kept(w, t->layer_norm));
}

/* Round r's activations on the tape: X, Q, K, V, M, lse, and what the layer
   keeps (ag_i_round_kept; the others NULL). */
typedef struct {
    float *X, *Q, *K, *V, *M, *lse;
    ag_i_round_bufs_t kept;       /* Z, ffn_in, U, R, O, P, ffn_sum */
} acts_t;

static acts_t round_acts(const ag_tape_t *t, int r)
{
    const ag_weights_t *w = round_layer(t, r);
    const int64_t N = t->N, HD = w->H * w->d;
    acts_t a = {.X = t->acts + t->start[r]};
    a.Q = a.X + N * w->D, a.K = a.Q + N * HD, a.V = a.K + N * HD, a.M = a.V + N * HD;
    a.lse = a.M + N * HD;
    ag_i_kept_carve(&a.kept, w, ag_i_round_kept(w, t->layer_norm), N, a.lse + N * w->H);
    return a;
}

int64_t ag_tape_bytes(int64_t N, int64_t D, int64_t H, int64_t d, int rounds)
{
    /* -1 for negative sizes and sizes whose bytes overflow (checked in double first) */
    if (N < 0 || D < 0 || H < 0 || d < 0 || rounds < 0 ||
        (double)N * ((double)D + 4.0 * (double)H * (double)d + (double)H) * 4.0 * rounds > 9e18)
        return -1;
    return N * (D + 4 * H * d + H) * 4 * rounds;
}

static void back_free(back_bufs_t *b)
{
    free(b->dX), free(b->Xn), free(b->dXn), free(b->dM);
    free(b->Hn), free(b->dHn), free(b->A), free(b->dA), free(b->dR), free(b->Pe);
    memset(b, 0, sizeof *b);
}

void ag_tape_free(ag_tape_t *tape)
{
    if (!tape)
        return;
    free(tape->acts), free(tape->has_lse), free(tape->start), free(tape->shape);
    free(tape->fs.Xn), free(tape->fs.Hn), free(tape->fs.A), free(tape->fs.Pe);
    back_free(&tape->back);
    for (int r = 0; r < tape->rounds; r++) {
        if (tape->forward)
            ag_i_plan_free(&tape->forward[r]);
        if (tape->backward)
            ag_i_plan_free(&tape->backward[r]);
    }
    free(tape->forward), free(tape->backward), free(tape->graph), free(tape->made);
    free(tape->kept);
    free(tape);
}

/* A new tape for these rounds on nb, or each round on opts' graph (it takes
   shape, ag_i_round_shapes's). */
static int tape_init(ag_tape_t **tape, ag_nbhd_t *nb, const ag_round_opts_t *opts,
                     const ag_weights_t *layers, int n_layers, int rounds, int layer_norm,
                     int64_t *shape, ag_error_t *err)
{
    ag_tape_t *t = ag_calloc(1, sizeof *t, err, "tape");
    if (!t) {
        free(shape);
        return ag_alloc_status();
    }
    *t = (ag_tape_t){.layers = layers, .n_layers = n_layers, .rounds = rounds,
                     .layer_norm = layer_norm, .N = nb->n_nodes, .E = nb->n_edges,
                     .shape = shape, .widest = ag_rounds_widest(layers, n_layers, rounds)};
    const int slots = rounds > 0 ? rounds : 1;
    t->graph = ag_calloc(slots, sizeof *t->graph, err, "tape");
    t->made = ag_calloc(2 * slots, sizeof *t->made, err, "tape");
    t->forward = ag_calloc(slots, sizeof *t->forward, err, "tape");
    t->backward = ag_calloc(slots, sizeof *t->backward, err, "tape");
    if (!t->graph || !t->made || !t->forward || !t->backward) {
        ag_tape_free(t);
        return ag_alloc_status();
    }
    for (int r = 0; r < rounds; r++) {
        t->graph[r] = opts && opts->graphs ? opts->graphs[r] : nb;
        t->made[2 * r] = t->graph[r]->edge_ptr, t->made[2 * r + 1] = t->graph[r]->run_ptr;
    }
    t->start = ag_alloc(rounds + 1, sizeof *t->start, err, "tape");
    double floats = 0;   /* in double first: a size that overflows fails here */
    for (int r = 0; t->start && r < rounds; r++) {
        const ag_weights_t *w = round_layer(t, r);
        t->start[r] = (int64_t)floats;
        floats += (double)t->N * (double)round_width(t, w);
        t->edges |= w->wedge != NULL;
        t->HD = w->H * w->d > t->HD ? w->H * w->d : t->HD;
        t->F = w->w1 && w->F > t->F ? w->F : t->F;
    }
    if (t->start && floats * 4.0 > 9e18) {
        ag_tape_free(t);
        return ag_fail(err, AG_ELIMIT, "rounds forward: a tape of %d rounds on %lld nodes "
                       "overflows", rounds, (long long)nb->n_nodes);
    }
    if (t->start)
        t->start[rounds] = (int64_t)floats;
    t->acts = t->start ? ag_alloc(t->start[rounds], sizeof(float), err,
                                  "tape of the rounds' activations") : NULL;
    t->has_lse = ag_calloc(rounds + 1, 1, err, "tape");
    if (!t->start || !t->acts || !t->has_lse) {
        ag_tape_free(t);
        return ag_alloc_status();
    }
    *tape = t;
    return AG_OK;
}

/* Did the kernel write every log-sum-exp (none left NaN)? */
static int lse_written(const float *lse, int64_t n)
{
    for (int64_t x = 0; x < n; x++)
        if (isnan(lse[x]))
            return 0;
    return 1;
}

/* The tape's attention of round r: the kernel on the whole graph, keeping the
   log-sum-exp where the kernel writes one (every plain dot-product score). */
typedef struct {
    ag_tape_t *t;
    int r;
    acts_t a;
} tape_round_t;

static int attend_taped(void *ctx, const ag_weights_t *w, const ag_score_t *sc, ag_error_t *err)
{
    const tape_round_t *tr = ctx;
    const acts_t *a = &tr->a;
    const int64_t NH = tr->t->N * w->H;
    for (int64_t x = 0; x < NH; x++)
        a->lse[x] = NAN;
    const ag_attention_opts_t ao = {.lse = a->lse};
    const ag_tape_t *t = tr->t;
    int rc = w->global_heads
                 ? ag_i_attention_split(t->graph[tr->r], ag_i_round_global(&t->opts, tr->r),
                                        a->Q, a->K, a->V, w->H, w->d, w->global_heads, sc,
                                        a->M, &ao, err)
                 : ag_i_attention_planned(&t->forward[plan_of(t, tr->r)], t->graph[tr->r], a->Q,
                                          a->K, a->V, w->H, w->d, sc, a->M, &ao, err);
    if (!rc)
        tr->t->has_lse[tr->r] = (unsigned char)lse_written(a->lse, NH);
    return rc;
}

static int forward_round(ag_tape_t *t, int r, float *X, const fwd_scratch_t *fs,
                         ag_error_t *err)
{
    const int k = t->n_layers == 1 ? 0 : r;
    const tape_round_t tr = {t, r, round_acts(t, r)};
    memcpy(tr.a.X, X, (size_t)(t->N * round_layer(t, r)->D) * sizeof *X);
    ag_i_round_bufs_t b = tr.a.kept;
    b.Xn = fs->Xn, b.Q = tr.a.Q, b.K = tr.a.K, b.V = tr.a.V, b.M = tr.a.M, b.Hn = fs->Hn;
    b.A = fs->A, b.Pe = fs->Pe, b.E = t->E;   /* edge features: one graph for every round */
    b.Epre = fs->Pe ? fs->Pe + t->E * t->HD : NULL;
    ag_score_t sc;
    return ag_i_round_forward(X, t->N, &t->layers[k], (ag_i_round_at_t){k, r, 0, 1, 0}, &t->opts,
                              &b, &sc, attend_taped, (void *)&tr, err);
}

/* A tape made on these very graphs (the same arrays: a graph rebuilt in its
   place needs a new tape) for these shapes: its memory and plans serve again. */
static int tape_fits(const ag_tape_t *t, const ag_nbhd_t *nb, const ag_round_opts_t *opts,
                     int n_layers, int rounds, int layer_norm, const int64_t *shape)
{
    if (!(t->N == nb->n_nodes && t->E == nb->n_edges && t->n_layers == n_layers &&
          t->rounds == rounds && t->layer_norm == layer_norm &&
          memcmp(t->shape, shape, (size_t)(AG_I_ROUND_SHAPE * rounds) * sizeof *shape) == 0))
        return 0;
    for (int r = 0; r < rounds; r++) {
        const ag_nbhd_t *g = ag_i_round_graph(nb, opts, r);
        if (t->graph[r] != g || t->made[2 * r] != g->edge_ptr || t->made[2 * r + 1] != g->run_ptr)
            return 0;
    }
    return 1;
}

/* *p holds at least `need` floats (what it held is lost when it grows). */
static int scratch(float **p, int64_t *have, int64_t need, ag_error_t *err)
{
    if (need <= *have)
        return AG_OK;
    free(*p);
    *have = 0;
    if (!(*p = ag_alloc(need, sizeof **p, err, "rounds forward")))
        return ag_alloc_status();
    *have = need;
    return AG_OK;
}

/* The forward's scratch for the tape's options (a placeholder float where a
   buffer is not read). */
static int fwd_scratch(ag_tape_t *t, ag_error_t *err)
{
    fwd_scratch_t *fs = &t->fs;
    const int resid = t->opts.resid_dropout > 0;   /* its branches go to Xn and Hn */
    const int64_t wide = t->N * t->widest;
    int rc = scratch(&fs->Xn, &fs->n_Xn,
                     t->layer_norm || t->opts.dropout > 0 || resid ? wide : 1, err);
    if (!rc && t->F)
        rc = scratch(&fs->Hn, &fs->n_Hn, t->layer_norm || resid ? wide : 1, err);
    if (!rc && t->F)
        rc = scratch(&fs->A, &fs->n_A, t->N * t->F, err);
    if (!rc && t->edges)
        rc = scratch(&fs->Pe, &fs->n_Pe, 2 * t->E * t->HD, err);
    return rc;
}

int ag_rounds_forward(ag_nbhd_t *nb, const ag_weights_t *layers, int n_layers, float *X,
                      int rounds, const ag_round_opts_t *opts, ag_tape_t **tape,
                      ag_error_t *err)
{
    if (tape)
        *tape = NULL;   /* whatever it held: a new tape */
    return ag_rounds_forward_reuse(nb, layers, n_layers, X, rounds, opts, tape, err);
}

int ag_rounds_forward_reuse(ag_nbhd_t *nb, const ag_weights_t *layers, int n_layers, float *X,
                            int rounds, const ag_round_opts_t *opts, ag_tape_t **tape,
                            ag_error_t *err)
{
    if (!tape)
        return ag_fail(err, AG_EINVAL, "rounds forward: no tape to fill");
    ag_tape_t *t = *tape;
    *tape = NULL;
    int rc = AG_OK;
    if (!nb || !layers || !X)
        rc = ag_fail(err, AG_EINVAL, "rounds forward: graph, layers and X are required");
    if (!rc)
        rc = ag_i_rounds_check(nb, layers, n_layers, rounds, opts, err);
    if (!rc)
        rc = ag_check_finite("rounds forward: x", X, nb->n_nodes, layers[0].D, err);
    /* the backward's transposes now, so that a graph too large fails before any work */
    if (!rc && !(opts && opts->graphs))
        rc = ag_nbhd_transpose(nb, err);
    for (int r = 0; !rc && opts && opts->graphs && r < rounds; r++)
        rc = ag_nbhd_transpose(opts->graphs[r], err);
    for (int r = 0; !rc && r < rounds; r++)   /* and the global heads' graphs */
        if (layers[n_layers == 1 ? 0 : r].global_heads)
            rc = ag_nbhd_transpose(ag_i_round_global(opts, r), err);
    const int layer_norm = opts && opts->norm == AG_NORM_LAYER;
    int64_t *shape = rc ? NULL : ag_i_round_shapes(layers, n_layers, rounds, layer_norm, err);
    if (!rc && !shape)
        rc = ag_alloc_status();
    if (!rc && t && tape_fits(t, nb, opts, n_layers, rounds, layer_norm, shape))
        free(shape);   /* an earlier step's tape, used again */
    else {
        ag_tape_free(t);
        t = NULL;
        if (!rc)
            rc = tape_init(&t, nb, opts, layers, n_layers, rounds, layer_norm, shape, err);
        else
            free(shape);
    }
    if (rc) {
        ag_tape_free(t);
        return rc;
    }
    t->layers = layers;   /* what may change between steps on one tape */
    t->opts = opts ? *opts : (ag_round_opts_t)AG_ROUND_OPTS_INIT;
    rc = fwd_scratch(t, err);
    for (int r = 0; !rc && r < rounds; r++)
        rc = forward_round(t, r, X, &t->fs, err);
    if (rc) {
        ag_tape_free(t);
        return rc;
    }
    *tape = t;
    return AG_OK;
}

/* ---- backward ---- */

/* The backward's buffers, made by a tape's first backward and kept on it. */
static int back_alloc(back_bufs_t *b, const ag_tape_t *t, ag_error_t *err)
{
    const int64_t N = t->N, D = t->widest, HD = t->HD;
    b->dX = ag_alloc(N * D, sizeof(float), err, "rounds backward");
    b->Xn = ag_alloc(N * D, sizeof(float), err, "rounds backward");
    b->dXn = ag_alloc(N * D, sizeof(float), err, "rounds backward");
    b->dM = ag_alloc(4 * N * HD + 2 * HD, sizeof(float), err, "rounds backward");
    if (!b->dX || !b->Xn || !b->dXn || !b->dM)
        return ag_alloc_status();
    if (t->F && (!(b->Hn = ag_alloc(N * D, sizeof(float), err, "rounds backward")) ||
                 !(b->dHn = ag_alloc(N * D, sizeof(float), err, "rounds backward")) ||
                 !(b->A = ag_alloc(N * t->F, sizeof(float), err, "rounds backward")) ||
                 !(b->dA = ag_alloc(N * t->F, sizeof(float), err, "rounds backward"))))
        return ag_alloc_status();
    int skip = 0;
    for (int r = 0; r < t->rounds; r++)
        skip |= round_layer(t, r)->wskip != NULL;
    if (skip && !(b->dR = ag_alloc(N * D, sizeof(float), err, "rounds backward")))
        return ag_alloc_status();
    const int64_t E = t->E;
    if (t->edges && !(b->Pe = ag_alloc(5 * E * HD, sizeof(float), err, "rounds backward")))
        return ag_alloc_status();
    if (t->edges) {
        b->Epre = b->Pe + E * HD, b->dEk = b->Epre + E * HD, b->dEv = b->dEk + E * HD;
        b->dEpre = b->dEv + E * HD;
    }
    b->dQ = b->dM + N * HD, b->dK = b->dQ + N * HD, b->dV = b->dK + N * HD;
    b->da_src = b->dV + N * HD, b->da_dst = b->da_src + HD;
    return AG_OK;
}

/* Checks grads against the layers and zeroes every array they have. */
static int grads_reset(const ag_tape_t *t, ag_weights_t *grads, ag_error_t *err)
{
    for (int k = 0; grads && k < t->n_layers; k++) {
        ag_weights_t *g = &grads[k];
        const ag_weights_t *w = &t->layers[k];
        if (g->D != w->D || g->H != w->H || g->d != w->d || g->per_node != w->per_node ||
            ag_layer_width_out(g) != ag_layer_width_out(w) ||
            (!g->wq || !g->wk != !w->wk || !g->wo != !w->wo || !g->bias != !w->bias))
            return ag_fail(err, AG_EINVAL, "rounds backward: gradients %d are for D=%lld, "
                           "%lld heads of %lld, per node %lld; layer %d has D=%lld, %lld heads "
                           "of %lld, per node %lld", k + 1, (long long)g->D, (long long)g->H,
                           (long long)g->d, (long long)g->per_node, k + 1, (long long)w->D,
                           (long long)w->H, (long long)w->d, (long long)w->per_node);
        ag_i_weights_zero(g);
    }
    return AG_OK;
}

void ag_i_add_vector_grads(const ag_score_t *opt_score, const ag_score_t *sc, ag_weights_t *g,
                           const float *da_src, const float *da_dst, int64_t HD)
{
    if (!g || (opt_score && opt_score->a_src))
        return;
    float *to_src = sc->kind == AG_SCORE_ADDITIVE ? g->attn_src
                    : sc->kind == AG_SCORE_GATV2 ? g->attn : NULL;
    float *to_dst = sc->kind == AG_SCORE_ADDITIVE ? g->attn_dst : NULL;
    for (int64_t x = 0; to_src && x < HD; x++)
        to_src[x] += da_src[x];
    for (int64_t x = 0; to_dst && x < HD; x++)
        to_dst[x] += da_dst[x];
}

/* The tape's attention backward of round r: the kernels on the whole graph
   (any score), with the forward's log-sum-exp where it kept one. */
typedef struct {
    ag_tape_t *t;
    int r;
    const back_bufs_t *b;
} tape_back_t;

static int attend_back_taped(void *ctx, const ag_weights_t *w, ag_weights_t *g,
                             const ag_score_t *sc, ag_error_t *err)
{
    const tape_back_t *tb = ctx;
    ag_tape_t *t = tb->t;
    const back_bufs_t *b = tb->b;
    const acts_t a = round_acts(t, tb->r);
    const int vectors = sc->kind == AG_SCORE_ADDITIVE || sc->kind == AG_SCORE_GATV2;
    const ag_attention_grads_t ag = {.dQ = b->dQ, .dK = b->dK, .dV = b->dV,
                                     .d_a_src = vectors ? b->da_src : NULL,
                                     .d_a_dst = sc->kind == AG_SCORE_ADDITIVE ? b->da_dst : NULL,
                                     .d_edge_pre = sc->edge_pre ? b->dEpre : NULL,
                                     .d_edge_key = sc->edge_key ? b->dEk : NULL,
                                     .d_edge_value = sc->edge_value ? b->dEv : NULL};
    int rc = w->global_heads
                 ? ag_i_backward_split(t->graph[tb->r], ag_i_round_global(&t->opts, tb->r), a.Q,
                                       a.K, a.V, w->H, w->d, w->global_heads, sc, a.M,
                                       t->has_lse[tb->r] ? a.lse : NULL, b->dM, &ag, err)
                 : ag_i_backward_planned(&t->backward[plan_of(t, tb->r)], t->graph[tb->r], a.Q,
                                         a.K, a.V, w->H, w->d, sc, a.M,
                                         t->has_lse[tb->r] ? a.lse : NULL, b->dM, &ag, err);
    if (!rc && vectors)
        ag_i_add_vector_grads(t->opts.score, sc, g, b->da_src, b->da_dst, w->H * w->d);
    return rc;
}

static int backward_round(ag_tape_t *t, int r, ag_weights_t *grads, back_bufs_t *b,
                          int input_grad, ag_error_t *err)
{
    const int k = t->n_layers == 1 ? 0 : r;
    const acts_t a = round_acts(t, r);
    const ag_i_round_back_t rb = {
        .X = a.X, .M = a.M, .dX = b->dX, .dM = b->dM, .dQ = b->dQ, .dK = b->dK, .dV = b->dV,
        .Xn = b->Xn, .dXn = b->dXn, .Z = a.kept.Z, .ffn_in = a.kept.ffn_in, .U = a.kept.U,
        .Hn = b->Hn, .dHn = b->dHn, .A = b->A, .dA = b->dA, .R = a.kept.R, .O = a.kept.O,
        .P = a.kept.P, .ffn_sum = a.kept.ffn_sum, .dR = b->dR, .Pe = b->Pe, .Epre = b->Epre,
        .E = t->E,
        .dEk = b->dEk, .dEv = b->dEv, .dEpre = b->dEpre};
    const tape_back_t tb = {t, r, b};
    return ag_i_round_backward(t->N, &t->layers[k], grads ? &grads[k] : NULL,
                               (ag_i_round_at_t){k, r, 0, 1, !input_grad}, &t->opts, &rb, NULL,
                               attend_back_taped, (void *)&tb, err);
}

int ag_rounds_backward(ag_tape_t *tape, const float *dY, float *dX0, ag_weights_t *grads,
                       ag_error_t *err)
{
    if (!tape || !dY)
        return ag_fail(err, AG_EINVAL, "rounds backward: a tape and dY are required");
    int rc = grads_reset(tape, grads, err);
    if (rc)
        return rc;
    back_bufs_t *b = &tape->back;
    if (!b->dX && (rc = back_alloc(b, tape, err))) {
        back_free(b);
        return rc;
    }
    const int64_t D_in = tape->layers[0].D;
    const int64_t D_out = tape->rounds ? ag_layer_width_out(round_layer(tape, tape->rounds - 1))
                                       : D_in;
    memcpy(b->dX, dY, (size_t)(tape->N * D_out) * sizeof *dY);
    for (int r = tape->rounds - 1; !rc && r >= 0; r--)
        rc = backward_round(tape, r, grads, b, r > 0 || dX0, err);   /* the first round's
                                                                       dX: for dX0 only */
    if (!rc && dX0)
        memcpy(dX0, b->dX, (size_t)(tape->N * D_in) * sizeof *dX0);
    return rc;
}
