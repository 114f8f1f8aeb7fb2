/*
 * A round as a list of operations, each with its forward and its backward,
 * written once for the rounds, training and the MPI layer:
 *
 *   norm     Xn = LayerNorm(X) (the options' norm, pre-norm) or X
 *   dropout  Xn = dropout(Xn) while training (the options' dropout)
 *   skip     R = Xn Wskip^T + bskip (a layer with a skip)
 *   project  Q, K, V = Xn Wq^T + bq, Xn Wk^T + bk, Xn Wv^T + bv (shared or per node)
 *   rope     Q, K turned by the rows' positions (the options' rotary positions)
 *   edges    the edge features' terms of the score, e Wedge^T (a layer with wedge)
 *   attend   M = attention(Q, K, V): the caller's step (one process: the
 *            kernel on the whole graph; MPI: the rows exchanged first)
 *   output   X = X + M Wo^T (or M Wo^T without the residual); a layer without
 *            wo: M, its heads concatenated or averaged (and X + that)
 *   gate     X = X + R, or g R + (1 - g) X with the gate's g (a layer with a skip)
 *   bias     X += the layer's bias
 *   postnorm X = LayerNorm(X) (the options' norm, a post-norm layer)
 *   act      X = act(X) (the layer's activation; the tape keeps its input)
 *   ffn      X = X + W2 ff_act(W1 LayerNorm2(X) + b1) + b2 (a layer with w1;
 *            post-norm: X = LayerNorm2(X + W2 ff_act(W1 X + b1) + b2))
 *
 * The forward runs them in order; the backward runs each op's `remake` in
 * order (the activations the tape does not keep: LayerNorm's output), then
 * the backwards in reverse. A new sublayer is one more entry in the list, not
 * another copy of the round.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"

/* LayerNorm's epsilon of the options (NULL: the default). */
static float ln_eps(const ag_round_opts_t *o)
{
    return o ? o->ln_eps : (ag_round_opts_t)AG_ROUND_OPTS_INIT.ln_eps;
}

/* Streams of the options' dropout_seed: round r's masks of features and of
   attention weights. */
static uint64_t feature_seed(const ag_round_opts_t *o, int r)
{
    return rng_seed(o->dropout_seed, 2 * (uint64_t)r);
}

static uint64_t attention_seed(const ag_round_opts_t *o, int r)
{
    return rng_seed(o->dropout_seed, 2 * (uint64_t)r + 1);
}

/* Round r's masks of its residual branches (branch 0: the attention's, 1:
   the feed-forward sublayer's), streams apart from the two above. */
static uint64_t residual_seed(const ag_round_opts_t *o, int r, int branch)
{
    return rng_seed(o->dropout_seed, (1ull << 32) + 2 * (uint64_t)r + (uint64_t)branch);
}

/* Does this call drop features? Residual branches? */
static int drops_features(const ag_round_opts_t *o, ag_i_round_at_t at)
{
    return at.training && o && o->dropout > 0;
}

static int drops_residual(const ag_round_opts_t *o, ag_i_round_at_t at)
{
    return at.training && o && o->resid_dropout > 0;
}

/* The score of a round with layer w (at.k, its index for messages): the
   options' score with the layer's attention vectors filled in where the
   options have none, and the round's attention dropout while training.
   Refuses a negative or non-finite ln_eps, and dropout outside [0, 1). */
static int round_score(ag_score_t *sc, const ag_round_opts_t *o, const ag_weights_t *w,
                       ag_i_round_at_t at, ag_error_t *err)
{
    const int k = at.k;
    if (o && (!(o->ln_eps >= 0) || !isfinite(o->ln_eps)))
        return ag_fail(err, AG_EINVAL, "rounds: ln_eps %g; expected a finite value >= 0 (1e-5 "
                       "in AG_ROUND_OPTS_INIT)", o->ln_eps);
    if (o && (!(o->dropout >= 0 && o->dropout < 1) ||
              !(o->attn_dropout >= 0 && o->attn_dropout < 1) ||
              !(o->resid_dropout >= 0 && o->resid_dropout < 1)))
        return ag_fail(err, AG_EINVAL, "rounds: dropout %g, attention dropout %g, residual "
                       "dropout %g; expected probabilities in [0, 1)", o->dropout,
                       o->attn_dropout, o->resid_dropout);
    *sc = o && o->score ? *o->score : (ag_score_t)AG_SCORE_INIT;
    if (at.training && o && o->attn_dropout > 0)
        sc->dropout = o->attn_dropout, sc->dropout_seed = attention_seed(o, at.r);
    if (sc->kind == AG_SCORE_ADDITIVE && !sc->a_src) {
        sc->a_src = w->attn_src, sc->a_dst = w->attn_dst;
        if (!sc->a_src || !sc->a_dst)
            return ag_fail(err, AG_EINVAL, "rounds: additive scores need attn_src and attn_dst "
                           "[H, d] in layer %d's weights", k + 1);
    }
    if (sc->kind == AG_SCORE_GATV2 && !sc->a_src) {
        sc->a_src = w->attn;
        if (!sc->a_src)
            return ag_fail(err, AG_EINVAL, "rounds: gatv2 scores need attn [H, d] in layer %d's "
                           "weights", k + 1);
    }
    return AG_OK;
}

/* What the ops of one round read and write, in either direction. */
typedef struct {
    int64_t n;                        /* this process's rows */
    ag_i_round_at_t at;               /* the round, its first row, training or not */
    const ag_weights_t *w;
    ag_weights_t *g;                  /* backward: the weights' gradients (NULL: none) */
    const ag_round_opts_t *o;
    ag_score_t *sc;                   /* the round's score (round_score; edges adds the
                                         edge features' terms) */
    float *X;                         /* forward: the states [n, D], in place */
    const ag_i_round_bufs_t *f;       /* forward buffers */
    const ag_i_round_back_t *b;       /* backward buffers */
    const ag_i_reducer_t *red;        /* backward: sums over rows (NULL: one process) */
    const float *Xin;                 /* what the projections read: Xn or X */
    const float *ffn_Yn;              /* backward: what the sublayer's W1 read */
    ag_i_attend_fn attend;
    ag_i_attend_back_fn attend_back;
    void *ctx;                        /* the attention steps' */
} step_t;

typedef struct {
    const char *name;
    int (*forward)(step_t *s, ag_error_t *err);
    int (*remake)(step_t *s, ag_error_t *err);     /* NULL: nothing to recompute */
    int (*backward)(step_t *s, ag_error_t *err);
} op_t;

/* helpers of several ops (below) */
static void add_rows(float *Y, const float *bias, int64_t n, int64_t width);
static void add_into(float *X, const float *Y, int64_t m);
static int add_column_sums(const step_t *s, float *g, const float *dY, int64_t width,
                           ag_error_t *err);

static int layer_norm(const step_t *s)
{
    return s->o && s->o->norm == AG_NORM_LAYER;
}

/* Where the layer's LayerNorms are: on what its sums read, or after them. */
static int pre_norm(const step_t *s)
{
    return layer_norm(s) && !s->w->post_norm;
}

static int post_norm(const step_t *s)
{
    return layer_norm(s) && s->w->post_norm;
}

/* ---- norm ---- */

static int norm_forward(step_t *s, ag_error_t *err)
{
    (void)err;
    s->Xin = s->X;
    if (pre_norm(s)) {
        ag_layer_norm(s->f->Xn, s->X, s->n, s->w->D, s->w->ln_weight, s->w->ln_bias,
                      ln_eps(s->o));
        s->Xin = s->f->Xn;
    }
    return AG_OK;
}

static int norm_remake(step_t *s, ag_error_t *err)
{
    (void)err;
    s->Xin = s->b->X;
    if (pre_norm(s)) {
        ag_layer_norm(s->b->Xn, s->b->X, s->n, s->w->D, s->w->ln_weight, s->w->ln_bias,
                      ln_eps(s->o));
        s->Xin = s->b->Xn;
    }
    return AG_OK;
}

/* Is what reaches the projections' input wanted: for dX, or LayerNorm's weights? */
static int needs_dXn(const step_t *s)
{
    return !s->at.no_input_grad || (pre_norm(s) && s->g);
}

/* dX (the gradient past the round, from output's backward) += what reached Xn */
static int norm_backward(step_t *s, ag_error_t *err)
{
    const ag_i_round_back_t *b = s->b;
    const int64_t n = s->n, D = s->w->D;
    if (!needs_dXn(s))
        return AG_OK;
    if (pre_norm(s))
        return ag_i_layer_norm_backward_r(s->red, b->dX, s->g ? s->g->ln_weight : NULL,
                                          s->g ? s->g->ln_bias : NULL, b->dXn, b->X, n, D,
                                          s->w->ln_weight, ln_eps(s->o), err);
    if (s->at.no_input_grad)
        return AG_OK;
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n * D >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t x = 0; x < n * D; x++)
        b->dX[x] += b->dXn[x];
    return AG_OK;
}

/* ---- dropout: on what the projections read, while training ---- */

/* Xn = dropout(in) (Xn may be in: the norm's output, dropped in place). */
static void drop_into(const step_t *s, float *Xn, const float *in)
{
    ag_error_t ignored;   /* the options' p was checked in round_score */
    ag_dropout(Xn, in, s->at.row0, s->n, s->w->D, s->o->dropout, feature_seed(s->o, s->at.r),
               &ignored);
}

/* What the projections read, dropped into Xn while training. */
static int drop_input(step_t *s, float *Xn)
{
    if (drops_features(s->o, s->at)) {
        drop_into(s, Xn, s->Xin);
        s->Xin = Xn;
    }
    return AG_OK;
}

static int dropout_forward(step_t *s, ag_error_t *err)
{
    (void)err;
    return drop_input(s, s->f->Xn);
}

static int dropout_remake(step_t *s, ag_error_t *err)
{
    (void)err;
    return drop_input(s, s->b->Xn);
}

/* dXn (what reached the dropped Xn) times the same mask: what reached its input */
static int dropout_backward(step_t *s, ag_error_t *err)
{
    (void)err;
    if (drops_features(s->o, s->at) && needs_dXn(s))
        drop_into(s, s->b->dXn, s->b->dXn);
    return AG_OK;
}

/* ---- skip: a projection of what the projections read (root_weight) ---- */

static int skip_forward(step_t *s, ag_error_t *err)
{
    (void)err;
    const ag_weights_t *w = s->w;
    if (w->wskip) {
        const int64_t out = ag_layer_width_out(w);
        ag_i_gemm_xwt(s->f->R, s->Xin, w->wskip, s->n, w->D, out, 0.0f);
        add_rows(s->f->R, w->bskip, s->n, out);
    }
    return AG_OK;
}

/* from dR (the gate's backward): dWskip, dbskip, and dXn += dR Wskip (after
   the projections' backward wrote dXn) */
static int skip_backward(step_t *s, ag_error_t *err)
{
    const ag_weights_t *w = s->w;
    if (!w->wskip)
        return AG_OK;
    const ag_i_round_back_t *b = s->b;
    const int64_t n = s->n, out = ag_layer_width_out(w);
    int rc = s->g && s->g->wskip ? ag_i_gemm_atb_r(s->red, s->g->wskip, b->dR, s->Xin, n, out,
                                                   w->D, err) : AG_OK;
    if (!rc && s->g && s->g->bskip)
        rc = add_column_sums(s, s->g->bskip, b->dR, out, err);
    if (!rc && needs_dXn(s))
        ag_i_gemm_xw(b->dXn, b->dR, w->wskip, n, out, w->D, 1.0f);
    return rc;
}

/* ---- project ---- */

/* Do keys and values share the queries' projection (GAT's one `lin`)? */
static int one_projection(const ag_weights_t *w)
{
    return !w->wk && !w->wv;
}


/* Q, K, V [N, H*d] = Xn [N, D] times w's projections (shared or per node),
   plus their biases; with one projection, K and V are copies of Q (the
   attention reads three). */
static void project_qkv(const ag_weights_t *w, const float *Xn, int64_t N, float *Q, float *K,
                        float *V)
{
    const int64_t D = w->D, HD = w->H * w->d;
    const float *mats[3] = {w->wq, w->wk, w->wv}, *biases[3] = {w->bq, w->bk, w->bv};
    float *outs[3] = {Q, K, V};
    for (int m = 0; m < (one_projection(w) ? 1 : 3); m++) {
        if (w->per_node)
            ag_i_project_per_node(outs[m], Xn, mats[m], N, D, HD);
        else
            ag_i_gemm_xwt(outs[m], Xn, mats[m], N, D, HD, 0.0f);
        add_rows(outs[m], biases[m], N, HD);
    }
    if (one_projection(w)) {
        memcpy(K, Q, (size_t)(N * HD) * sizeof *Q);
        memcpy(V, Q, (size_t)(N * HD) * sizeof *Q);
    }
}

static int project_forward(step_t *s, ag_error_t *err)
{
    (void)err;
    project_qkv(s->w, s->Xin, s->n, s->f->Q, s->f->K, s->f->V);
    return AG_OK;
}

/* dXn = sum over Q, K, V of dP W (and dW += dP^T Xn) for the layer's projections. */
static int project_backward(step_t *s, ag_error_t *err)
{
    const ag_weights_t *w = s->w;
    const ag_i_round_back_t *b = s->b;
    const int64_t n = s->n, D = w->D, HD = w->H * w->d;
    const float *W[3] = {w->wq, w->wk, w->wv}, *dP[3] = {b->dQ, b->dK, b->dV};
    float *dW[3] = {s->g ? s->g->wq : NULL, s->g ? s->g->wk : NULL, s->g ? s->g->wv : NULL};
    const int want_dXn = needs_dXn(s);
    if (w->per_node && want_dXn)
        memset(b->dXn, 0, (size_t)(n * D) * sizeof *b->dXn);
    if (one_projection(w)) {   /* Q, K and V are one product: dP = dQ + dK + dV */
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n * HD >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t x = 0; x < n * HD; x++)
            b->dQ[x] += b->dK[x] + b->dV[x];
    }
    float *dB[3] = {s->g ? s->g->bq : NULL, s->g ? s->g->bk : NULL, s->g ? s->g->bv : NULL};
    for (int m = 0; m < (one_projection(w) ? 1 : 3); m++) {
        int rc = dB[m] ? add_column_sums(s, dB[m], dP[m], HD, err) : AG_OK;
        if (rc)
            return rc;
        if (w->per_node) {   /* each row its own matrices: no sum over rows */
            ag_i_project_per_node_backward(b->dXn, dW[m], dP[m], s->Xin, W[m], n, D, HD);
            continue;
        }
        rc = dW[m] ? ag_i_gemm_atb_r(s->red, dW[m], dP[m], s->Xin, n, HD, D, err) : AG_OK;
        if (rc)
            return rc;
        if (want_dXn)
            ag_i_gemm_xw(b->dXn, dP[m], W[m], n, HD, D, m ? 1.0f : 0.0f);
    }
    return AG_OK;
}

/* ---- rope: rotary positions on the queries and keys ---- */

/* Q and K turned (forward), or dQ and dK turned back (backward: the
   gradients of the projections' outputs) */
static int rope_turn(const step_t *s, float *Q, float *K, int inverse, ag_error_t *err)
{
    const ag_round_opts_t *o = s->o;
    if (!o || !o->rope_positions)
        return AG_OK;
    return ag_i_rope(Q, K, s->n, s->w->H, s->w->d, o->rope_positions, o->rope_base, inverse,
                     err);
}

static int rope_forward(step_t *s, ag_error_t *err)
{
    return rope_turn(s, s->f->Q, s->f->K, 0, err);
}

static int rope_backward(step_t *s, ag_error_t *err)
{
    return rope_turn(s, s->b->dQ, s->b->dK, 1, err);
}

/* ---- edges: the edge features' terms of the score ---- */

static int uses_edges(const step_t *s)
{
    return s->w->wedge && s->o && s->o->edge_features;
}

/* Pe = e Wedge^T [E, H*d] for every message, and the score's terms: additive's
   Epre [E, H] = per head sum_c Pe attn_edge; gatv2's key; others' key and value. */
static void edge_terms(const step_t *s, float *Pe, float *Epre, int64_t E)
{
    const ag_weights_t *w = s->w;
    const int64_t H = w->H, d = w->d, HD = H * d;
    ag_i_gemm_xwt(Pe, s->o->edge_features, w->wedge, E, w->edge_dim, HD, 0.0f);
    if (s->sc->kind == AG_SCORE_ADDITIVE) {
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (E * HD >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t e = 0; e < E; e++)
            for (int64_t h = 0; h < H; h++) {
                float t = 0;
                for (int64_t c = 0; c < d; c++)
                    t += Pe[e * HD + h * d + c] * w->attn_edge[h * d + c];
                Epre[e * H + h] = t;
            }
        s->sc->edge_pre = Epre;
    } else {
        s->sc->edge_key = Pe;
        s->sc->edge_value = s->sc->kind == AG_SCORE_GATV2 ? NULL : Pe;
    }
}

static int edges_forward(step_t *s, ag_error_t *err)
{
    (void)err;
    if (uses_edges(s))
        edge_terms(s, s->f->Pe, s->f->Epre, s->f->E);
    return AG_OK;
}

static int edges_remake(step_t *s, ag_error_t *err)
{
    (void)err;
    if (uses_edges(s))
        edge_terms(s, s->b->Pe, s->b->Epre, s->b->E);
    return AG_OK;
}

/* Rows of attn_edge's gradient: sum over messages of dEpre[e, h] Pe[e, h, c]. */
typedef struct {
    const float *dEpre, *Pe;
    int64_t H, d;
} edge_vec_rows_t;

static void edge_vec_rows(int64_t lo, int64_t hi, double *partial, void *ctx)
{
    const edge_vec_rows_t *r = ctx;
    const int64_t H = r->H, d = r->d, HD = H * d;
    for (int64_t e = lo; e < hi; e++)
        for (int64_t x = 0; x < HD; x++)
            partial[x] += (double)r->dEpre[e * H + x / d] * r->Pe[e * HD + x];
}

/* From the attention's dEk, dEv or dEpre: dPe (in dEk), dWedge += dPe^T e, and
   attn_edge's gradient. */
static int edges_backward(step_t *s, ag_error_t *err)
{
    if (!uses_edges(s) || !s->g)
        return AG_OK;
    const ag_weights_t *w = s->w;
    const ag_i_round_back_t *b = s->b;
    const int64_t E = b->E, H = w->H, d = w->d, HD = H * d;
    float *dPe = b->dEk;
    int rc = AG_OK;
    if (s->sc->kind == AG_SCORE_ADDITIVE) {
        if (s->g->attn_edge) {
            double *sums = ag_alloc(HD, sizeof *sums, err, "edge gradients");
            if (!sums)
                return ag_alloc_status();
            const edge_vec_rows_t rows = {b->dEpre, b->Pe, H, d};
            rc = ag_i_sum_rows(E, HD, E * HD, edge_vec_rows, (void *)&rows, sums, err);
            for (int64_t x = 0; !rc && x < HD; x++)
                s->g->attn_edge[x] += (float)sums[x];
            free(sums);
        }
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (E * HD >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t e = 0; e < E; e++)
            for (int64_t x = 0; x < HD; x++)
                dPe[e * HD + x] = b->dEpre[e * H + x / d] * w->attn_edge[x];
    } else if (s->sc->edge_value) {
        add_into(dPe, b->dEv, E * HD);
    }
    if (!rc && s->g->wedge)
        rc = ag_i_gemm_atb(s->g->wedge, dPe, s->o->edge_features, E, HD, w->edge_dim, err);
    return rc;
}

/* ---- attend: the caller's steps ---- */

static int attend_forward(step_t *s, ag_error_t *err)
{
    return s->attend(s->ctx, s->w, s->sc, err);
}

static int attend_backward(step_t *s, ag_error_t *err)
{
    return s->attend_back(s->ctx, s->w, s->g, s->sc, err);
}

/* ---- output: projection and residual ---- */

static int residual(const step_t *s)
{
    return !(s->o && s->o->no_residual) && !s->w->no_residual;
}

/* A residual branch Y [n, width] times its mask (branch 0: the attention's,
   1: the feed-forward sublayer's), in place; the backward's is the same call. */
static void drop_branch(const step_t *s, float *Y, int64_t width, int branch)
{
    ag_error_t ignored;   /* p was checked in round_score */
    ag_dropout(Y, Y, s->at.row0, s->n, width, s->o->resid_dropout,
               residual_seed(s->o, s->at.r, branch), &ignored);
}

static void add_into(float *X, const float *Y, int64_t m)
{
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (m >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t x = 0; x < m; x++)
        X[x] += Y[x];
}

/* X (out width) = (X +) M Wo^T, or M's heads concatenated or averaged; with
   residual dropout, the branch goes to Xn (free once projected), is dropped,
   then added. */
static int output_forward(step_t *s, ag_error_t *err)
{
    (void)err;
    const ag_weights_t *w = s->w;
    const int64_t n = s->n, H = w->H, d = w->d, out = ag_layer_width_out(w);
    const int dropped = residual(s) && drops_residual(s->o, s->at);
    float *Y = dropped ? s->f->Xn : s->X;
    const float beta = residual(s) && !dropped ? 1.0f : 0.0f;
    const float *M = s->f->M;
    if (w->wo)
        ag_i_gemm_xwt(Y, M, w->wo, n, H * d, out, beta);
    else
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n * H * d >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < out; c++) {
                float v = 0;
                if (w->mean_heads) {
                    for (int64_t h = 0; h < H; h++)
                        v += M[i * H * d + h * d + c];
                    v /= (float)H;
                } else {
                    v = M[i * out + c];
                }
                Y[i * out + c] = beta != 0 ? Y[i * out + c] + v : v;   /* no NaN * 0 */
            }
    if (dropped) {
        drop_branch(s, Y, out, 0);
        add_into(s->X, Y, n * out);
    }
    return AG_OK;
}

/* dM = dX' Wo, dWo += dX'^T M (or dM = the heads' share of dX'); dX keeps dX'
   for the residual's path (0 without, at the input's width) */
static int output_backward(step_t *s, ag_error_t *err)
{
    const ag_weights_t *w = s->w;
    const ag_i_round_back_t *b = s->b;
    const int64_t n = s->n, H = w->H, d = w->d, HD = H * d, out = ag_layer_width_out(w);
    int rc = AG_OK;
    /* what reached the branch: dX' through the forward's mask (in dXn, free until
       the projections' backward) */
    const float *dY = b->dX;
    if (residual(s) && drops_residual(s->o, s->at)) {
        memcpy(b->dXn, b->dX, (size_t)(n * out) * sizeof *b->dX);
        drop_branch(s, b->dXn, out, 0);
        dY = b->dXn;
    }
    if (w->wo) {
        ag_i_gemm_xw(b->dM, dY, w->wo, n, out, HD, 0.0f);
        if (s->g && s->g->wo)
            rc = ag_i_gemm_atb_r(s->red, s->g->wo, dY, b->M, n, out, HD, err);
    } else {
        const float share = w->mean_heads ? 1.0f / (float)H : 1.0f;
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n * HD >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t i = 0; i < n; i++)
            for (int64_t x = 0; x < HD; x++)
                b->dM[i * HD + x] = w->mean_heads ? dY[i * out + x % d] * share
                                                  : dY[i * out + x];
    }
    if (!rc && !residual(s))
        memset(b->dX, 0, (size_t)(n * w->D) * sizeof *b->dX);
    return rc;
}

/* ---- gate: the skip's R with the attention's output O (in X) ---- */

/* Row i's gate sigmoid(wbeta . [O, R, O - R]) */
static float gate_of(const float *wbeta, const float *O, const float *R, int64_t out)
{
    float z = 0;
    for (int64_t c = 0; c < out; c++)
        z += wbeta[c] * O[c] + wbeta[out + c] * R[c] + wbeta[2 * out + c] * (O[c] - R[c]);
    return 1.0f / (1.0f + expf(-z));
}

static int gate_forward(step_t *s, ag_error_t *err)
{
    (void)err;
    const ag_weights_t *w = s->w;
    if (!w->wskip)
        return AG_OK;
    const int64_t n = s->n, out = ag_layer_width_out(w);
    const float *R = s->f->R;
    if (!w->wbeta) {
        add_into(s->X, R, n * out);
        return AG_OK;
    }
    if (s->f->O)
        memcpy(s->f->O, s->X, (size_t)(n * out) * sizeof *s->X);
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n * out * 4 >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float *x = s->X + i * out;
        const float *r = R + i * out;
        const float g = gate_of(w->wbeta, x, r, out);
        for (int64_t c = 0; c < out; c++)
            x[c] = g * r[c] + (1 - g) * x[c];
    }
    return AG_OK;
}

/* wbeta's gradient rows: dz_i [O_i, R_i, O_i - R_i] */
typedef struct {
    const float *dz, *O, *R;
    int64_t out;
} gate_rows_t;

static void gate_rows(int64_t lo, int64_t hi, double *partial, void *ctx)
{
    const gate_rows_t *t = ctx;
    const int64_t out = t->out;
    for (int64_t i = lo; i < hi; i++)
        for (int64_t c = 0; c < out; c++) {
            const double dz = t->dz[i], o = t->O[i * out + c], r = t->R[i * out + c];
            partial[c] += dz * o, partial[out + c] += dz * r, partial[2 * out + c] += dz * (o - r);
        }
}

/* dX (the output's, in place) -> dO in dX and dR; wbeta's gradient */
static int gate_backward(step_t *s, ag_error_t *err)
{
    const ag_weights_t *w = s->w;
    if (!w->wskip)
        return AG_OK;
    const ag_i_round_back_t *b = s->b;
    const int64_t n = s->n, out = ag_layer_width_out(w);
    if (!w->wbeta) {   /* X = O + R: both get dX */
        memcpy(b->dR, b->dX, (size_t)(n * out) * sizeof *b->dX);
        return AG_OK;
    }
    float *dz = ag_alloc(n ? n : 1, sizeof *dz, err, "gate gradient");
    if (!dz)
        return ag_i_reducer_failed(s->red, 3 * out, err);
    const float *wb = w->wbeta;
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n * out * 4 >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float *O = b->O + i * out, *R = b->R + i * out;
        float *dX = b->dX + i * out, *dR = b->dR + i * out;
        const float g = gate_of(wb, O, R, out);
        float dg = 0;
        for (int64_t c = 0; c < out; c++)
            dg += dX[c] * (R[c] - O[c]);
        dz[i] = dg * g * (1 - g);
        for (int64_t c = 0; c < out; c++) {
            dR[c] = g * dX[c] + dz[i] * (wb[out + c] - wb[2 * out + c]);
            dX[c] = (1 - g) * dX[c] + dz[i] * (wb[c] + wb[2 * out + c]);
        }
    }
    int rc = AG_OK;
    if (s->g && s->g->wbeta) {
        double *sums = ag_alloc(3 * out, sizeof *sums, err, "gate gradient");
        const gate_rows_t rows = {dz, b->O, b->R, out};
        rc = sums ? ag_i_sum_rows_r(s->red, n, 3 * out, n * out * 3, gate_rows, (void *)&rows,
                                    sums, err)
                  : ag_i_reducer_failed(s->red, 3 * out, err);
        for (int64_t c = 0; !rc && c < 3 * out; c++)
            s->g->wbeta[c] += (float)sums[c];
        free(sums);
    }
    free(dz);
    return rc;
}

/* ---- bias ---- */

/* g (a bias's gradient [width]) += the column sums of dY [n, width] */
static int add_column_sums(const step_t *s, float *g, const float *dY, int64_t width,
                           ag_error_t *err)
{
    double *sums = ag_alloc(width, sizeof *sums, err, "bias gradient");
    if (!sums)
        return ag_i_reducer_failed(s->red, width, err);
    int rc = ag_i_sum_columns_r(s->red, dY, s->n, width, sums, err);
    for (int64_t c = 0; !rc && c < width; c++)
        g[c] += (float)sums[c];
    free(sums);
    return rc;
}

/* Y [n, width] += bias in every row (bias NULL: nothing) */
static void add_rows(float *Y, const float *bias, int64_t n, int64_t width)
{
    if (bias)
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n * width >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < width; c++)
                Y[i * width + c] += bias[c];
}

static int bias_forward(step_t *s, ag_error_t *err)
{
    (void)err;
    add_rows(s->X, s->w->bias, s->n, ag_layer_width_out(s->w));
    return AG_OK;
}

static int bias_backward(step_t *s, ag_error_t *err)
{
    if (!s->w->bias || !s->g || !s->g->bias)
        return AG_OK;
    return add_column_sums(s, s->g->bias, s->b->dX, ag_layer_width_out(s->w), err);
}

/* ---- postnorm: LayerNorm after the layer's sums ---- */

/* X = LayerNorm(X) with (weight, bias) [width] in place, its input kept in P
   when the caller keeps it */
static void norm_in_place(const step_t *s, float *P, const float *weight, const float *bias)
{
    const int64_t width = ag_layer_width_out(s->w);
    if (P)
        memcpy(P, s->X, (size_t)(s->n * width) * sizeof *s->X);
    ag_layer_norm(s->X, s->X, s->n, width, weight, bias, ln_eps(s->o));
}

/* dX = LayerNorm's backward of dX at its input P (dXn as scratch) */
static int norm_in_place_backward(const step_t *s, const float *P, const float *weight,
                                  float *dW, float *dB, ag_error_t *err)
{
    const ag_i_round_back_t *b = s->b;
    const int64_t n = s->n, width = ag_layer_width_out(s->w);
    if (!P)
        return ag_fail(err, AG_EINVAL, "rounds backward: layer %d's post-norm has no kept "
                       "input", s->at.k + 1);
    memcpy(b->dXn, b->dX, (size_t)(n * width) * sizeof *b->dX);
    memset(b->dX, 0, (size_t)(n * width) * sizeof *b->dX);
    return ag_i_layer_norm_backward_r(s->red, b->dX, dW, dB, b->dXn, P, n, width, weight,
                                      ln_eps(s->o), err);
}

static int postnorm_forward(step_t *s, ag_error_t *err)
{
    (void)err;
    if (post_norm(s))
        norm_in_place(s, s->f->P, s->w->ln_weight, s->w->ln_bias);
    return AG_OK;
}

static int postnorm_backward(step_t *s, ag_error_t *err)
{
    if (!post_norm(s))
        return AG_OK;
    return norm_in_place_backward(s, s->b->P, s->w->ln_weight, s->g ? s->g->ln_weight : NULL,
                                  s->g ? s->g->ln_bias : NULL, err);
}

/* ---- activation ---- */

/* X = act(X); the input kept in f->Z when the caller keeps one (the tape) */
static int act_forward(step_t *s, ag_error_t *err)
{
    (void)err;
    const ag_activation_t act = s->w->act;
    const int64_t m = s->n * ag_layer_width_out(s->w);
    if (act == AG_ACT_NONE)
        return AG_OK;
    if (s->f->Z)
        memcpy(s->f->Z, s->X, (size_t)m * sizeof *s->X);
    ag_i_act_rows(act, s->X, s->X, m);
    return AG_OK;
}

static int act_backward(step_t *s, ag_error_t *err)
{
    const ag_activation_t act = s->w->act;
    const int64_t m = s->n * ag_layer_width_out(s->w);
    if (act == AG_ACT_NONE)
        return AG_OK;
    if (!s->b->Z)
        return ag_fail(err, AG_EINVAL, "rounds backward: layer %d's activation has no kept "
                       "input", s->at.k + 1);
    ag_i_act_backward_rows(act, s->b->dX, s->b->Z, m);
    return AG_OK;
}

/* ---- ffn: a feed-forward sublayer on the layer's output ---- */

static int has_ffn(const step_t *s)
{
    return s->w->w1 != NULL;
}

/* What the sublayer's first product reads: LayerNorm(Y) into Hn, or Y. */
static const float *ffn_input(const step_t *s, const float *Y, float *Hn)
{
    if (!pre_norm(s))
        return Y;
    ag_layer_norm(Hn, Y, s->n, ag_layer_width_out(s->w), s->w->ln2_weight, s->w->ln2_bias,
                  ln_eps(s->o));
    return Hn;
}

/* A = ff_act(U) [n, F] (A may be U) */
static void ffn_hidden(const step_t *s, const float *U, float *A)
{
    ag_i_act_rows(s->w->ff_act, A, U, s->n * s->w->F);
}

/* Y = Y + W2 ff_act(W1 Yn + b1) + b2 */
static int ffn_forward(step_t *s, ag_error_t *err)
{
    (void)err;
    if (!has_ffn(s))
        return AG_OK;
    const ag_weights_t *w = s->w;
    const ag_i_round_bufs_t *f = s->f;
    const int64_t n = s->n, out = ag_layer_width_out(w), F = w->F;
    if (f->ffn_in)
        memcpy(f->ffn_in, s->X, (size_t)(n * out) * sizeof *s->X);
    const float *Yn = ffn_input(s, s->X, f->Hn);
    ag_i_gemm_xwt(f->U, Yn, w->w1, n, out, F, 0.0f);
    add_rows(f->U, w->b1, n, F);
    ffn_hidden(s, f->U, f->A);
    if (!drops_residual(s->o, s->at)) {
        ag_i_gemm_xwt(s->X, f->A, w->w2, n, F, out, 1.0f);
        add_rows(s->X, w->b2, n, out);
    } else {   /* the branch in Hn (read by W1 already), dropped, then added */
        ag_i_gemm_xwt(f->Hn, f->A, w->w2, n, F, out, 0.0f);
        add_rows(f->Hn, w->b2, n, out);
        drop_branch(s, f->Hn, out, 1);
        add_into(s->X, f->Hn, n * out);
    }
    if (post_norm(s))
        norm_in_place(s, f->ffn_sum, w->ln2_weight, w->ln2_bias);
    return AG_OK;
}

/* the sublayer's input after the norm, and the activation, from the tape */
static int ffn_remake(step_t *s, ag_error_t *err)
{
    (void)err;
    if (has_ffn(s)) {
        s->ffn_Yn = ffn_input(s, s->b->ffn_in, s->b->Hn);
        ffn_hidden(s, s->b->U, s->b->A);
    }
    return AG_OK;
}

/* From dY (in dX; it flows on to the residual's path unchanged): the
   products' and biases' gradients, and what reaches the sublayer's input
   (through LayerNorm's backward) added into dX. */
static int ffn_backward(step_t *s, ag_error_t *err)
{
    if (!has_ffn(s))
        return AG_OK;
    const ag_weights_t *w = s->w;
    ag_weights_t *g = s->g;
    const ag_i_round_back_t *b = s->b;
    const int64_t n = s->n, out = ag_layer_width_out(w), F = w->F;
    int rc = post_norm(s) ? norm_in_place_backward(s, b->ffn_sum, w->ln2_weight,
                                                   g ? g->ln2_weight : NULL,
                                                   g ? g->ln2_bias : NULL, err) : AG_OK;
    if (rc)
        return rc;
    const float *dB = b->dX;   /* what reached the branch: through its mask (in dHn) */
    if (drops_residual(s->o, s->at)) {
        memcpy(b->dHn, b->dX, (size_t)(n * out) * sizeof *b->dX);
        drop_branch(s, b->dHn, out, 1);
        dB = b->dHn;
    }
    ag_i_gemm_xw(b->dA, dB, w->w2, n, out, F, 0.0f);   /* dA = dB W2 */
    if (g && g->w2)
        rc = ag_i_gemm_atb_r(s->red, g->w2, dB, b->A, n, out, F, err);
    if (!rc && g && g->b2)
        rc = add_column_sums(s, g->b2, dB, out, err);
    ag_i_act_backward_rows(w->ff_act, b->dA, b->U, n * F);   /* dU = dA ff_act'(U) */
    if (!rc && g && g->w1)
        rc = ag_i_gemm_atb_r(s->red, g->w1, b->dA, s->ffn_Yn, n, F, out, err);
    if (!rc && g && g->b1)
        rc = add_column_sums(s, g->b1, b->dA, F, err);
    if (rc)
        return rc;
    ag_i_gemm_xw(b->dHn, b->dA, w->w1, n, F, out, 0.0f);   /* dYn = dU W1 */
    if (pre_norm(s))
        return ag_i_layer_norm_backward_r(s->red, b->dX, g ? g->ln2_weight : NULL,
                                          g ? g->ln2_bias : NULL, b->dHn, b->ffn_in, n, out,
                                          w->ln2_weight, ln_eps(s->o), err);
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n * out >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t x = 0; x < n * out; x++)
        b->dX[x] += b->dHn[x];
    return AG_OK;
}

static const op_t round_ops[] = {
    {"norm", norm_forward, norm_remake, norm_backward},
    {"dropout", dropout_forward, dropout_remake, dropout_backward},
    {"skip", skip_forward, NULL, skip_backward},
    {"project", project_forward, NULL, project_backward},
    {"rope", rope_forward, NULL, rope_backward},
    {"edges", edges_forward, edges_remake, edges_backward},
    {"attend", attend_forward, NULL, attend_backward},
    {"output", output_forward, NULL, output_backward},
    {"gate", gate_forward, NULL, gate_backward},
    {"bias", bias_forward, NULL, bias_backward},
    {"postnorm", postnorm_forward, NULL, postnorm_backward},
    {"act", act_forward, NULL, act_backward},
    {"ffn", ffn_forward, ffn_remake, ffn_backward},
};
#define N_OPS ((int)(sizeof round_ops / sizeof round_ops[0]))

int ag_i_round_forward(float *X, int64_t n, const ag_weights_t *w, ag_i_round_at_t at,
                       const ag_round_opts_t *o, const ag_i_round_bufs_t *b, ag_score_t *sc,
                       ag_i_attend_fn attend, void *ctx, ag_error_t *err)
{
    int rc = round_score(sc, o, w, at, err);
    step_t s = {.n = n, .at = at, .w = w, .o = o, .sc = sc, .X = X, .f = b, .attend = attend,
                .ctx = ctx};
    for (int i = 0; !rc && i < N_OPS; i++)
        rc = round_ops[i].forward(&s, err);
    return rc;
}

int ag_i_round_backward(int64_t n, const ag_weights_t *w, ag_weights_t *g, ag_i_round_at_t at,
                        const ag_round_opts_t *o, const ag_i_round_back_t *b,
                        const ag_i_reducer_t *red, ag_i_attend_back_fn attend_back,
                        void *ctx, ag_error_t *err)
{
    ag_score_t sc;
    int rc = round_score(&sc, o, w, at, err);
    step_t s = {.n = n, .at = at, .w = w, .g = g, .o = o, .sc = &sc, .b = b, .red = red,
                .attend_back = attend_back, .ctx = ctx};
    for (int i = 0; !rc && i < N_OPS; i++)
        if (round_ops[i].remake)
            rc = round_ops[i].remake(&s, err);
    for (int i = N_OPS - 1; !rc && i >= 0; i--)
        rc = round_ops[i].backward(&s, err);
    return rc;
}

ag_i_kept_t ag_i_round_kept(const ag_weights_t *w, int layer_norm)
{
    const int post = layer_norm && w->post_norm;
    return (ag_i_kept_t){w->act != AG_ACT_NONE, w->w1 != NULL, w->wskip != NULL,
                         w->wbeta != NULL, post, post && w->w1};
}

int64_t ag_i_kept_width(const ag_weights_t *w, ag_i_kept_t k)
{
    const int64_t out = ag_layer_width_out(w);
    return (k.ffn ? out + w->F : 0) + out * (k.Z + k.R + k.O + k.P + k.ffn_sum);
}

int64_t *ag_i_round_shapes(const ag_weights_t *layers, int n_layers, int rounds,
                           int layer_norm, ag_error_t *err)
{
    int64_t *s = ag_alloc(AG_I_ROUND_SHAPE * (rounds > 0 ? rounds : 1), sizeof *s, err,
                          "tape");
    for (int r = 0; s && r < rounds; r++) {
        const ag_weights_t *w = &layers[n_layers == 1 ? 0 : r];
        const ag_i_kept_t k = ag_i_round_kept(w, layer_norm);
        int64_t *x = s + AG_I_ROUND_SHAPE * r;
        x[0] = w->D, x[1] = w->H, x[2] = w->d, x[3] = ag_layer_width_out(w);
        x[4] = w->w1 ? w->F : 0;
        x[5] = k.Z | k.ffn << 1 | k.R << 2 | k.O << 3 | k.P << 4 | k.ffn_sum << 5 |
               (w->wedge != NULL) << 6;
    }
    return s;
}

float *ag_i_kept_carve(ag_i_round_bufs_t *b, const ag_weights_t *w, ag_i_kept_t k, int64_t n,
                       float *at)
{
    const int64_t out = ag_layer_width_out(w);
    float **kept[] = {&b->Z, &b->ffn_in, &b->U, &b->R, &b->O, &b->P, &b->ffn_sum};
    const int has[] = {k.Z, k.ffn, k.ffn, k.R, k.O, k.P, k.ffn_sum};
    for (size_t x = 0; x < sizeof has / sizeof has[0]; x++) {
        *kept[x] = has[x] ? at : NULL;
        at += has[x] ? n * (kept[x] == &b->U ? w->F : out) : 0;
    }
    return at;
}
