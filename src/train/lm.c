/*
 * A GPT as the rounds run it: embeddings (model/embedding.c), L layers of
 * ag_weights_t (pre-LayerNorm attention with wo and a residual, then a
 * pre-LayerNorm feed-forward sublayer of width 4D with GELU), a final
 * LayerNorm and the head tied to the token embeddings: the next-token
 * cross-entropy is ag_loss_cross_entropy with wte as its readout. Nothing
 * here is a kernel of its own; the batch is one graph.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "train/train.h"

void ag_lm_destroy(ag_lm_t *m)
{
    if (!m)
        return;
    for (int64_t l = 0; m->layers && l < m->L; l++)
        ag_weights_destroy(&m->layers[l]);
    free(m->layers), free(m->wte), free(m->wpe), free(m->lnf_weight), free(m->lnf_bias);
    memset(m, 0, sizeof *m);
}

/* A new array of n floats: normal(0, scale) from (seed, stream), or `fill`
   (scale 0). */
static float *array(int64_t n, uint64_t seed, uint64_t stream, float scale, float fill,
                    ag_error_t *err)
{
    float *p = ag_alloc(n, sizeof *p, err, "language model");
    if (p && scale > 0)
        ag_random_normal(p, n, seed, stream, scale);
    for (int64_t x = 0; p && scale == 0 && x < n; x++)
        p[x] = fill;
    return p;
}

/* Makes m's arrays (shapes from m's sizes): from seed, or zeroed (seed 0 and
   zero: gradients). */
static int make(ag_lm_t *m, int zero, uint64_t seed, ag_error_t *err)
{
    const int64_t V = m->V, T = m->T, D = m->D, L = m->L, H = m->H;
    const float std = zero ? 0.0f : 0.02f;
    const float proj = zero ? 0.0f : 0.02f / sqrtf(2.0f * (float)L);   /* GPT-2's c_proj */
    const float one = zero ? 0.0f : 1.0f;
    m->wte = array(V * D, seed, 1, std, 0, err);
    m->wpe = array(T * D, seed, 2, std, 0, err);
    m->lnf_weight = array(D, seed, 0, 0, one, err);
    m->lnf_bias = m->bias ? array(D, seed, 0, 0, 0, err) : NULL;
    m->layers = ag_calloc(L, sizeof *m->layers, err, "language model");
    if (!m->wte || !m->wpe || !m->lnf_weight || (m->bias && !m->lnf_bias) || !m->layers)
        return ag_alloc_status();
    for (int64_t l = 0; l < L; l++) {
        ag_weights_t *w = &m->layers[l];
        *w = (ag_weights_t){.D = D, .H = H, .d = D / H, .D_out = D, .F = 4 * D,
                            .ff_act = AG_ACT_GELU};
        /* a GPT block: nanoGPT's, its biases with bias */
        const unsigned features = AG_LAYER_QKV | AG_LAYER_WO | AG_LAYER_NORM | AG_LAYER_FFN |
                                  (m->bias ? AG_LAYER_NORM_BIAS | AG_LAYER_BIAS |
                                             AG_LAYER_QKV_BIAS : 0u);
        for (int k = 0; k < AG_LAYER_ARRAYS; k++) {   /* in order: wo before the widths */
            if (!ag_layer_has(features, k))
                continue;
            const ag_init_t init = ag_layer_array_info(k)->init;
            const int residual_out = k == 3 || k == 12;   /* wo, w2: GPT-2's scaled draws */
            const uint64_t stream = 16 + 32 * (uint64_t)l + (uint64_t)k;
            if (!(*ag_layer_array(w, k) = array(ag_layer_array_size(w, k), seed, stream,
                                                init == AG_INIT_NORMAL
                                                    ? (residual_out ? proj : std) : 0.0f,
                                                init == AG_INIT_ONES ? one : 0.0f, err)))
                return ag_alloc_status();
        }
    }
    return AG_OK;
}

static int shape_check(int64_t V, int64_t T, int64_t D, int64_t L, int64_t H, ag_error_t *err)
{
    if (V < 1 || T < 1 || D < 1 || L < 1 || H < 1 || D % H)
        return ag_fail(err, AG_EINVAL, "language model: vocabulary %lld, block %lld, width "
                       "%lld, %lld layers of %lld heads; expected sizes >= 1 and the width a "
                       "multiple of the heads", (long long)V, (long long)T, (long long)D,
                       (long long)L, (long long)H);
    if (V > INT32_MAX || T > INT32_MAX || 4 * D > INT32_MAX || L > 1 << 16)
        return ag_fail(err, AG_ELIMIT, "language model: sizes beyond 2^31 are not supported");
    return AG_OK;
}

int ag_lm_init(ag_lm_t *m, int64_t V, int64_t T, int64_t D, int64_t L, int64_t H, int bias,
               uint64_t seed, ag_error_t *err)
{
    memset(m, 0, sizeof *m);
    int rc = shape_check(V, T, D, L, H, err);
    if (rc)
        return rc;
    *m = (ag_lm_t){.V = V, .T = T, .D = D, .L = L, .H = H, .bias = bias != 0};
    if ((rc = make(m, 0, seed, err)))
        ag_lm_destroy(m);
    return rc;
}

int ag_lm_grads_init(ag_lm_t *g, const ag_lm_t *m, ag_error_t *err)
{
    memset(g, 0, sizeof *g);
    int rc = shape_check(m->V, m->T, m->D, m->L, m->H, err);
    if (rc)
        return rc;
    *g = (ag_lm_t){.V = m->V, .T = m->T, .D = m->D, .L = m->L, .H = m->H, .bias = m->bias};
    if ((rc = make(g, 1, 0, err)))
        ag_lm_destroy(g);
    else if (!m->wpe)   /* m's positions: no table to learn */
        rc = ag_lm_set_positions(g, m->positions, err);
    if (!rc && !ag_lm_has_mlp(m))   /* m's blocks */
        rc = ag_lm_set_mlp(g, 0, err);
    return rc;
}

int ag_lm_has_mlp(const ag_lm_t *m)
{
    return m && m->layers && m->L > 0 && m->layers[0].w1 != NULL;
}

int ag_lm_set_mlp(ag_lm_t *m, int mlp, ag_error_t *err)
{
    if (!m || !m->layers)
        return ag_fail(err, AG_EINVAL, "language model: no model (from ag_lm_init)");
    if (mlp && !ag_lm_has_mlp(m))
        return ag_fail(err, AG_EINVAL, "language model: its blocks have no feed-forward "
                       "sublayer to keep; expected a model drawn with one (ag_lm_init)");
    for (int64_t l = 0; !mlp && l < m->L; l++) {
        ag_weights_t *w = &m->layers[l];
        for (int k = 0; k < AG_LAYER_ARRAYS; k++)
            if (ag_layer_array_info(k)->needs & AG_LAYER_FFN) {   /* ln2, w1, b1, w2, b2 */
                float **a = ag_layer_array(w, k);
                free(*a);
                *a = NULL;
            }
        w->F = 0;
    }
    return AG_OK;
}

static const char *const position_names[] = {"learnt", "rope", "none"};

const char *ag_lm_positions_name(ag_lm_positions_t positions)
{
    return positions >= AG_LM_POS_LEARNT && positions <= AG_LM_POS_NONE
               ? position_names[positions] : "unknown";
}

int ag_lm_positions_parse(const char *name, ag_lm_positions_t *positions)
{
    for (int k = 0; k < 3; k++)
        if (name && !strcmp(name, position_names[k])) {
            *positions = (ag_lm_positions_t)k;
            return AG_OK;
        }
    return AG_EINVAL;
}

int ag_lm_set_positions(ag_lm_t *m, ag_lm_positions_t positions, ag_error_t *err)
{
    if (positions < AG_LM_POS_LEARNT || positions > AG_LM_POS_NONE)
        return ag_fail(err, AG_EINVAL, "language model: positions %d; expected "
                       "AG_LM_POS_LEARNT, AG_LM_POS_ROPE or AG_LM_POS_NONE", (int)positions);
    if (positions == AG_LM_POS_LEARNT && !m->wpe)
        return ag_fail(err, AG_EINVAL, "language model: learnt positions need a table wpe that "
                       "this model has not; draw it with ag_lm_init");
    if (positions == AG_LM_POS_ROPE && (m->D / m->H) % 2)
        return ag_fail(err, AG_EINVAL, "language model: rotary positions turn pairs of a "
                       "head's columns; heads of width %lld are odd", (long long)(m->D / m->H));
    if (positions != AG_LM_POS_LEARNT) {
        free(m->wpe);
        m->wpe = NULL;
    }
    m->positions = positions;
    return AG_OK;
}

ag_round_opts_t ag_i_lm_round_opts(const ag_lm_t *m, const ag_lm_opts_t *o, const int64_t *pos,
                                   int train)
{
    ag_round_opts_t ro = AG_ROUND_OPTS_INIT;
    ro.norm = AG_NORM_LAYER;
    ro.graphs = o ? o->graphs : NULL;
    ro.rope_positions = m->positions == AG_LM_POS_ROPE ? pos : NULL;
    if (train && o && o->dropout > 0)
        ro.attn_dropout = ro.resid_dropout = o->dropout, ro.dropout_seed = rng_seed(o->seed, 2);
    return ro;
}

static int check_call(const ag_lm_t *m, const ag_nbhd_t *nb, const int64_t *ids,
                      const int64_t *pos, ag_error_t *err)
{
    if (!m || !m->wte || !nb || !ids || !pos)
        return ag_fail(err, AG_EINVAL, "language model: a model, a graph, ids and positions "
                       "are required");
    return AG_OK;
}

static int logits_on(const ag_lm_t *m, const ag_nbhd_t *nb, ag_nbhd_t *const *graphs,
                     const int64_t *ids, const int64_t *pos, float *logits, ag_error_t *err)
{
    int rc = check_call(m, nb, ids, pos, err);
    if (rc)
        return rc;
    const int64_t n = nb->n_nodes, D = m->D, V = m->V;
    float *X = ag_alloc(n * D, sizeof *X, err, "language model");
    ag_workspace_t ws;
    memset(&ws, 0, sizeof ws);
    if (!X)
        return ag_alloc_status();
    const ag_lm_opts_t o = {.graphs = graphs};
    const ag_round_opts_t ro = ag_i_lm_round_opts(m, &o, pos, 0);
    if (!(rc = ag_embed(X, ids, pos, n, m->wte, V, m->wpe, m->T, D, err)) &&
        !(rc = ag_workspace_init(&ws, n, D, D, err)) &&
        !(rc = ag_rounds_run(nb, m->layers, (int)m->L, X, (int)m->L, &ro, &ws, NULL, err))) {
        ag_layer_norm(X, X, n, D, m->lnf_weight, m->lnf_bias, ro.ln_eps);
        ag_i_gemm_xwt(logits, X, m->wte, n, D, V, 0.0f);
    }
    ag_workspace_destroy(&ws);
    free(X);
    return rc;
}

int ag_lm_logits(const ag_lm_t *m, const ag_nbhd_t *nb, const int64_t *ids, const int64_t *pos,
                 float *logits, ag_error_t *err)
{
    return logits_on(m, nb, NULL, ids, pos, logits, err);
}

int ag_lm_logits_layers(const ag_lm_t *m, ag_nbhd_t *const *graphs, const int64_t *ids,
                        const int64_t *pos, float *logits, ag_error_t *err)
{
    return logits_on(m, graphs ? graphs[0] : NULL, graphs, ids, pos, logits, err);
}

int ag_i_lm_loss_rows(const ag_lm_t *m, int64_t n, const int64_t *ids, const int64_t *pos,
                      const int64_t *targets, const ag_lm_opts_t *opts, double *loss,
                      ag_lm_t *grads, const ag_i_lm_rows_t *rows, ag_error_t *err)
{
    int rc = AG_OK;
    if (!targets)
        rc = ag_fail(err, AG_EINVAL, "language model: no targets");
    if (!rc && opts && !(opts->dropout >= 0 && opts->dropout < 1))
        rc = ag_fail(err, AG_EINVAL, "language model: dropout %g; expected a probability in "
                     "[0, 1)", opts->dropout);
    if (!rc && grads && (grads->V != m->V || grads->T != m->T || grads->D != m->D ||
                         grads->L != m->L || grads->bias != m->bias ||
                         grads->positions != m->positions ||
                         ag_lm_has_mlp(grads) != ag_lm_has_mlp(m)))
        rc = ag_fail(err, AG_EINVAL, "language model: gradients of another shape");
    const int64_t D = m->D, V = m->V, row0 = rows->first_row;
    const ag_i_reducer_t *r = rows->r;
    const int train = grads != NULL;
    const ag_round_opts_t ro = ag_i_lm_round_opts(m, opts, pos, train);
    const float p = train && opts ? opts->dropout : 0.0f;
    float *X = rc ? NULL : ag_alloc(3 * n > 0 ? 3 * n * D : 1, sizeof *X, err,
                                    "language model");
    if (!rc && !X)
        rc = ag_alloc_status();
    float *Y = X ? X + n * D : NULL, *dY = Y ? Y + n * D : NULL;   /* LN's output, dY */
    if (!rc)
        rc = ag_embed(X, ids, pos, n, m->wte, V, m->wpe, m->T, D, err);
    if (!rc && p > 0)   /* nanoGPT's dropout on the embeddings' sum */
        rc = ag_dropout(X, X, row0, n, D, p, rng_seed(opts->seed, 1), err);
    if (rows->agree)   /* every process goes on, or none */
        rc = rows->agree(rows->ctx, rc, err);
    if (!rc)
        rc = rows->forward(rows->ctx, m, X, &ro, train, err);
    if (!rc) {   /* the final LayerNorm (its input kept in X), the tied head and the loss */
        ag_layer_norm(Y, X, n, D, m->lnf_weight, m->lnf_bias, ro.ln_eps);
        const ag_cross_entropy_t ce = {.Wr = m->wte, .C = V, .labels = targets};
        ag_cross_entropy_out_t got = {.dX = train ? dY : NULL,
                                      .dWr = train ? grads->wte : NULL,
                                      .pred_counted = opts ? opts->predicted : NULL};
        rc = ag_i_loss_cross_entropy_kept_r(r, Y, n, D, &ce, &got, rows->keep, err);
        if (!rc && loss)
            *loss = got.loss;
        if (!rc && opts && opts->correct)
            *opts->correct = got.correct;
        if (!rc && opts && opts->counted)
            *opts->counted = got.counted;
    }
    if (!rc && train) {
        memset(grads->lnf_weight, 0, (size_t)D * sizeof(float));
        if (grads->lnf_bias)
            memset(grads->lnf_bias, 0, (size_t)D * sizeof(float));
        memset(Y, 0, (size_t)(n * D) * sizeof *Y);   /* dX of the blocks' output */
        rc = ag_i_layer_norm_backward_r(r, Y, grads->lnf_weight, grads->lnf_bias, dY, X, n, D,
                                        m->lnf_weight, ro.ln_eps, err);
    }
    if (!rc && train)   /* the blocks' backward: dX0 (the embeddings' gradient) into dY */
        rc = rows->backward(rows->ctx, Y, dY, grads->layers, err);
    if (!rc && train && p > 0)
        rc = ag_dropout(dY, dY, row0, n, D, p, rng_seed(opts->seed, 1), err);
    if (!rc && train) {   /* wte's gradient holds the head's; the inputs' add to it */
        if (grads->wpe)
            memset(grads->wpe, 0, (size_t)(m->T * D) * sizeof(float));
        rc = ag_i_embed_backward_r(r, grads->wte, grads->wpe, dY, ids, pos, n, V, m->T, D,
                                   err);
    }
    free(X);
    return rc;
}

/* One process's blocks: the rounds with a tape (training, and inference
   where the caller keeps a tape: its memory serves both), or a workspace. */
typedef struct {
    ag_nbhd_t *nb;
    ag_tape_t **tape;   /* the caller's (kept across calls) or own */
    int kept;
    ag_workspace_t ws;
} one_process_t;

static int one_forward(void *ctx, const ag_lm_t *m, float *X, const ag_round_opts_t *ro,
                       int train, ag_error_t *err)
{
    one_process_t *c = ctx;
    if (train || c->kept)
        return ag_rounds_forward_reuse(c->nb, m->layers, (int)m->L, X, (int)m->L, ro, c->tape,
                                       err);
    int rc = ag_workspace_init(&c->ws, c->nb->n_nodes, m->D, m->D, err);
    return rc ? rc : ag_rounds_run(c->nb, m->layers, (int)m->L, X, (int)m->L, ro, &c->ws, NULL,
                                   err);
}

static int one_backward(void *ctx, const float *dY, float *dX0, ag_weights_t *grads,
                        ag_error_t *err)
{
    one_process_t *c = ctx;
    return ag_rounds_backward(*c->tape, dY, dX0, grads, err);
}

/* The head's logits in the kept tape (made by the forward before the head). */
static float *one_keep(void *ctx, int64_t count, ag_error_t *err)
{
    one_process_t *c = ctx;
    return ag_i_tape_keep(*c->tape, count, err);
}

int ag_lm_loss(const ag_lm_t *m, ag_nbhd_t *nb, const int64_t *ids, const int64_t *pos,
               const int64_t *targets, const ag_lm_opts_t *opts, double *loss, ag_lm_t *grads,
               ag_tape_t **tape, ag_error_t *err)
{
    int rc = check_call(m, nb, ids, pos, err);
    if (rc)
        return rc;
    ag_tape_t *own = NULL;
    one_process_t c = {nb, tape ? tape : &own, tape != NULL, {0}};
    const ag_i_keeper_t keep = {one_keep, &c};
    const ag_i_lm_rows_t rows = {NULL, 0, one_forward, one_backward, NULL, &c,
                                 tape ? &keep : NULL};
    rc = ag_i_lm_loss_rows(m, nb->n_nodes, ids, pos, targets, opts, loss, grads, &rows, err);
    ag_tape_free(own);
    ag_workspace_destroy(&c.ws);
    return rc;
}

int ag_lm_optimizer_add(ag_optimizer_t *opt, ag_lm_t *m, const ag_lm_t *g, ag_error_t *err)
{
    /* nanoGPT's groups: arrays of two or more dimensions decay (the table's), the rest not */
    int rc = ag_optimizer_add_ex(opt, m->wte, g->wte, m->V * m->D, 0, err);
    if (!rc && m->wpe)
        rc = ag_optimizer_add_ex(opt, m->wpe, g->wpe, m->T * m->D, 0, err);
    for (int64_t l = 0; !rc && l < m->L; l++)
        for (int k = 0; !rc && k < AG_LAYER_ARRAYS; k++) {
            float *p = *ag_layer_array(&m->layers[l], k);
            if (p)
                rc = ag_optimizer_add_ex(opt, p, *ag_layer_array(&g->layers[l], k),
                                         ag_layer_array_size(&m->layers[l], k),
                                         ag_layer_array_info(k)->decay ? 0 : AG_OPT_NO_DECAY,
                                         err);
        }
    if (!rc)
        rc = ag_optimizer_add_ex(opt, m->lnf_weight, g->lnf_weight, m->D, AG_OPT_NO_DECAY, err);
    if (!rc && m->lnf_bias)
        rc = ag_optimizer_add_ex(opt, m->lnf_bias, g->lnf_bias, m->D, AG_OPT_NO_DECAY, err);
    return rc;
}
