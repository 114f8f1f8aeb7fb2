/* The model `train` learns: rounds of attention layers and a linear readout,
   one forward, loss, backward and optimizer step per epoch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/train.h"
#include "train/train.h"

static int weights_copy(ag_weights_t *dst, const ag_weights_t *src, ag_error_t *err)
{
    *dst = *src;
    for (int k = 0; k < AG_LAYER_ARRAYS; k++)
        *ag_layer_array(dst, k) = NULL;
    for (int k = 0; k < AG_LAYER_ARRAYS; k++) {
        const float *from = *ag_layer_array((ag_weights_t *)src, k);
        if (!from)
            continue;
        const int64_t n = ag_layer_array_size(src, k);
        float *to = ag_alloc(n, sizeof(float), err, "weights");
        if (!to) {
            ag_weights_destroy(dst);
            return ag_alloc_status();
        }
        memcpy(to, from, (size_t)n * sizeof(float));
        *ag_layer_array(dst, k) = to;
    }
    return AG_OK;
}

/* Does the loss depend on array k of a layer under this score and norm? (The
   features they decide; the rest are what the layer has.) */
static int array_used(int k, ag_score_kind_t kind, ag_norm_t norm)
{
    const unsigned decided = AG_LAYER_NORM | AG_LAYER_ADDITIVE | AG_LAYER_GATV2;
    return ag_layer_has(~decided | (norm == AG_NORM_LAYER ? AG_LAYER_NORM : 0u) |
                        (kind == AG_SCORE_ADDITIVE ? AG_LAYER_ADDITIVE : 0u) |
                        (kind == AG_SCORE_GATV2 ? AG_LAYER_GATV2 : 0u), k);
}

/* The readout: from the weights folder when it has one, else seeded. */
static int readout_init(model_t *m, const train_opts_t *to, ag_error_t *err)
{
    const int64_t C = m->C, D = m->D;
    char path[4096];
    snprintf(path, sizeof path, "%s/readout.npy", to->o.weights ? to->o.weights : "");
    FILE *f = to->o.weights ? fopen(path, "rb") : NULL;
    if (f) {
        fclose(f);
        int64_t has;
        int rc = ag_i_readout_read(to->o.weights, D, &has, &m->wr, &m->br, err);
        if (rc)
            return rc;
        if (has != C)
            return ag_fail(err, AG_EINVAL, "%s has %lld classes; --labels %s has %lld", path,
                           (long long)has, to->labels, (long long)C);
    } else {
        m->wr = ag_alloc(C * D, sizeof(float), err, "readout");
        m->br = ag_calloc(C, sizeof(float), err, "readout");
        if (!m->wr || !m->br)
            return ag_alloc_status();
        ag_random_normal(m->wr, C * D, to->o.seed, 101, 1.0f / sqrtf((float)D));
    }
    m->dwr = ag_alloc(C * D, sizeof(float), err, "readout gradient");
    m->dbr = ag_alloc(C, sizeof(float), err, "readout gradient");
    return m->dwr && m->dbr ? AG_OK : ag_alloc_status();
}

/* Registers the arrays the loss depends on; 0 of them is nothing to learn. */
static int register_params(model_t *m, const train_opts_t *to, ag_error_t *err)
{
    /* the layers the rounds use: the shared one, or one per round */
    const int used = m->rounds == 0 ? 0 : m->n_layers == 1 ? 1 : m->rounds;
    int n = 0, rc = AG_OK;
    for (int l = 0; l < used && !rc; l++)
        for (int k = 0; k < AG_LAYER_ARRAYS && !rc; k++) {
            float *p = *ag_layer_array(&m->layers[l], k), *g = *ag_layer_array(&m->grads[l], k);
            if (!p || !g || !array_used(k, m->score.kind, to->o.norm))
                continue;
            rc = ag_optimizer_add(m->opt, p, g, ag_layer_array_size(&m->layers[l], k), err);
            /* a process's rows of per-node arrays ([N, ...]): their norm is the whole's */
            int64_t shape[3];
            if (!rc && ag_layer_array_shape(&m->layers[l], k, shape) == 3 && m->N != m->total)
                rc = ag_i_optimizer_split_last(m->opt, shape[1] * shape[2], err);
            n++;
        }
    if (!rc && m->C && m->readout) {
        rc = ag_optimizer_add(m->opt, m->wr, m->dwr, m->C * m->D, err);
        if (!rc)
            rc = ag_optimizer_add(m->opt, m->br, m->dbr, m->C, err);
        n += 2;
    }
    if (!rc && n == 0)
        return ag_fail(err, AG_EINVAL, "nothing to learn: with --rounds 0 and --targets no "
                       "weight touches the loss (the targets are compared with the features "
                       "themselves); give --rounds 1 or more");
    return rc;
}

int model_init(model_t *m, const inputs_t *in, const train_opts_t *to, const task_t *t,
               const float *edge_bias, ag_error_t *err)
{
    memset(m, 0, sizeof *m);
    const run_opts_t *o = &to->o;
    m->N = in->N, m->D_in = m->D = in->x0.cols, m->C = t->C;
    m->readout = !o->model.spec.n_layers || o->model.spec.readout;
    m->total = in->total;
    m->rounds = (int)in->rounds;
    m->lr = to->opt.lr;
    m->score = in->score;
    m->score.edge_bias = edge_bias;
    ag_round_opts_init(&m->ro);
    m->ro.score = &m->score, m->ro.no_residual = o->no_residual, m->ro.norm = o->norm;
    m->ro.dropout = to->dropout[0], m->ro.attn_dropout = to->dropout[1];
    m->ro.resid_dropout = to->dropout[2];
    if (in->edges)
        m->ro.edge_features = in->edges->data, m->ro.edge_dim = in->edges->cols;
    m->seed = o->seed;
    m->layers = ag_calloc(in->n_layers, sizeof *m->layers, err, "weights");
    m->grads = ag_calloc(in->n_layers, sizeof *m->grads, err, "gradients");
    if (!m->layers || !m->grads)
        return ag_alloc_status();
    m->n_layers = in->n_layers;
    int rc = AG_OK;
    for (int l = 0; l < m->n_layers && !rc; l++) {
        ag_weights_t *w = &m->layers[l];
        if ((rc = weights_copy(w, &in->layers[l], err)))
            break;
        if (!o->weights && !o->model.spec.n_layers)   /* seeded: keep only the vectors this score has */
            for (int k = 6; k < AG_LAYER_ARRAYS; k++)
                if (!array_used(k, m->score.kind, o->norm)) {
                    free(*ag_layer_array(w, k));
                    *ag_layer_array(w, k) = NULL;
                }
        if (o->norm == AG_NORM_LAYER && (rc = ag_weights_add_layer_norm(w, err)))
            break;
        rc = ag_weights_grads_init(&m->grads[l], w, o->norm == AG_NORM_LAYER, err);
    }
    if (rc)
        return rc;
    const int64_t widest = m->rounds ? ag_rounds_widest(m->layers, m->n_layers, m->rounds)
                                     : m->D_in;
    if (m->rounds)
        m->D = ag_layer_width_out(&m->layers[m->n_layers == 1 ? 0 : m->rounds - 1]);
    if (o->model.spec.n_layers && (rc = model_layers_check(o, m->D_in, m->C, err)))
        return rc;
    if (m->C && m->readout && (rc = readout_init(m, to, err)))
        return rc;
    m->X = ag_alloc(m->N * widest, sizeof(float), err, "states");
    m->dX = ag_alloc(m->N * widest, sizeof(float), err, "state gradients");
    if (!m->X || !m->dX)
        return ag_alloc_status();
    if ((rc = ag_optimizer_init(&m->opt, &to->opt, err)))
        return rc;
    return register_params(m, to, err);
}

void model_free(model_t *m)
{
    for (int l = 0; l < m->n_layers; l++) {
        ag_weights_destroy(&m->layers[l]);
        ag_weights_destroy(&m->grads[l]);
    }
    free(m->layers), free(m->grads);
    free(m->wr), free(m->br), free(m->dwr), free(m->dbr);
    free(m->X), free(m->dX);
    ag_workspace_destroy(&m->ws);
    ag_tape_free(m->tape);
    ag_optimizer_free(m->opt);
    memset(m, 0, sizeof *m);
}

/* The loss on mask, its gradients when `grads`, and the correct count. */
static int loss_on(model_t *m, const task_t *t, const uint8_t *mask, int grads, double *loss,
                   int64_t *correct, ag_error_t *err)
{
    if (!m->C)
        return ag_loss_mse(m->X, t->targets.data, m->N, m->D, mask, loss,
                           grads ? m->dX : NULL, err);
    const ag_cross_entropy_t ce = {m->wr, m->br, m->C, t->labels, mask};
    ag_cross_entropy_out_t out = {.dX = grads ? m->dX : NULL, .dWr = grads ? m->dwr : NULL,
                                  .dbr = grads ? m->dbr : NULL};
    const int rc = ag_loss_cross_entropy(m->X, m->N, m->D, &ce, &out, err);
    if (loss)
        *loss = out.loss;
    if (correct)
        *correct = out.correct;
    return rc;
}

/* A node's score for class 1 against class 0: the difference of its two
   logits (the readout's, or the states' with no readout), which orders the
   nodes as the softmax's probability of class 1 does. */
static double class1_score(const model_t *m, int64_t i)
{
    const float *x = m->X + i * m->D;
    if (!m->readout)
        return (double)x[1] - (double)x[0];
    double s = (double)m->br[1] - (double)m->br[0];
    for (int64_t c = 0; c < m->D; c++)
        s += ((double)m->wr[m->D + c] - (double)m->wr[c]) * (double)x[c];
    return s;
}

typedef struct {
    double score;
    int positive;
} scored_t;

static int by_score(const void *a, const void *b)
{
    const double x = ((const scored_t *)a)->score, y = ((const scored_t *)b)->score;
    return (x > y) - (x < y);
}

/* ROC AUC of the labelled nodes of mask: the chance that a positive (class 1)
   scores above a negative, ties counted half: the Mann-Whitney U over the
   ranks, tied scores sharing their mean rank. NAN without both classes. */
static int auc_on(const model_t *m, const task_t *t, const uint8_t *mask, double *auc,
                  ag_error_t *err)
{
    *auc = NAN;
    scored_t *s = ag_alloc(m->N ? m->N : 1, sizeof *s, err, "ROC AUC");
    if (!s)
        return ag_alloc_status();
    int64_t n = 0, pos = 0;
    for (int64_t i = 0; i < t->N; i++)
        if ((!mask || mask[i]) && t->labels[i] >= 0) {
            s[n] = (scored_t){class1_score(m, i), t->labels[i] == 1};
            pos += s[n++].positive;
        }
    qsort(s, (size_t)n, sizeof *s, by_score);
    double rank_sum = 0;
    for (int64_t a = 0, b; a < n; a = b) {
        for (b = a; b < n && s[b].score == s[a].score; b++)
            ;
        int64_t p = 0;
        for (int64_t k = a; k < b; k++)
            p += s[k].positive;
        rank_sum += (double)p * (double)(a + 1 + b) / 2;   /* ranks a+1..b, averaged */
    }
    free(s);
    if (pos && n - pos)
        *auc = (rank_sum - (double)pos * (double)(pos + 1) / 2) / ((double)pos * (double)(n - pos));
    return AG_OK;
}

int model_drops(const model_t *m)
{
    return m->rounds > 0 && (m->ro.dropout > 0 || m->ro.attn_dropout > 0 ||
                             m->ro.resid_dropout > 0);
}

ag_round_opts_t model_round_opts(const model_t *m, int step)
{
    ag_round_opts_t ro = m->ro;
    if (step)
        ro.dropout_seed = rng_seed(m->seed, (uint64_t)m->steps);
    else
        ro.dropout = ro.attn_dropout = ro.resid_dropout = 0;
    return ro;
}

/* The rounds' forward from x0 into m->X, with the options of a step or not;
   tape NULL: inference (ag_rounds_run, in m->ws), nothing kept for a backward. */
static int forward(model_t *m, ag_nbhd_t *nb, const float *x0, int step, ag_tape_t **tape,
                   ag_error_t *err)
{
    memcpy(m->X, x0, (size_t)(m->N * m->D_in) * sizeof(float));
    const ag_round_opts_t ro = model_round_opts(m, step);
    if (m->rounds == 0)
        return AG_OK;
    if (!tape) {   /* a workspace of the largest H*d and the widest state, made once */
        int rc = m->ws.Q ? AG_OK
                         : ag_workspace_init(&m->ws, m->N,
                                             ag_i_layers_largest_hd(m->layers, m->n_layers),
                                             ag_rounds_widest(m->layers, m->n_layers, m->rounds),
                                             err);
        return rc ? rc : ag_rounds_run(nb, m->layers, m->n_layers, m->X, m->rounds, &ro,
                                       &m->ws, NULL, err);
    }
    return ag_rounds_forward_reuse(nb, m->layers, m->n_layers, m->X, m->rounds, &ro, tape, err);
}

int model_epoch(model_t *m, ag_nbhd_t *nb, const float *x0, const task_t *t, int step,
                epoch_t *f, ag_error_t *err)
{
    *f = (epoch_t){NAN, NAN, NAN, NAN, 0, 0, 0, {NAN, NAN, NAN}, 0};
    const int drops = model_drops(m);
    ag_tape_t **tape = &m->tape;   /* kept: every epoch's forward reuses its memory */
    /* the figures, without dropout: the step's forward too when there is none */
    int rc = forward(m, nb, x0, 0, step && !drops ? tape : NULL, err);
    if (!rc)
        rc = loss_on(m, t, t->train, step && !drops, &f->loss, &f->train_correct, err);
    if (!rc && t->eval)
        rc = loss_on(m, t, t->eval, 0, &f->eval_loss, &f->eval_correct, err);
    if (!rc && t->test)
        rc = loss_on(m, t, t->test, 0, &f->test_loss, &f->test_correct, err);
    const uint8_t *masks[3] = {t->train, t->eval, t->test};
    for (int k = 0; k < 3 && !rc && t->auc; k++)
        if (masks[k])
            rc = auc_on(m, t, masks[k], &f->auc[k], err);
    if (!rc && !isfinite(f->loss)) {
        f->diverged = 1;
        rc = ag_fail(err, AG_EINVAL, "the loss is not finite");   /* train.c says more */
    }
    if (!rc && step && drops) {   /* the step's forward, with dropout */
        double loss;
        int64_t correct;
        if (!(rc = forward(m, nb, x0, 1, tape, err)))
            rc = loss_on(m, t, t->train, 1, &loss, &correct, err);
    }
    if (!rc && step && m->rounds > 0)
        rc = ag_rounds_backward(*tape, m->dX, NULL, m->grads, err);
    if (!rc && step)
        rc = ag_optimizer_step(m->opt, &f->grad_norm, err);
    if (!rc && step)
        m->steps++;
    return rc;
}

int model_items(const model_t *m, folder_item_t *items, char (*names)[64])
{
    return ag_i_model_items(m->layers, m->n_layers, m->readout ? m->C : 0, m->D, m->wr, m->br,
                            items, names);
}

size_t model_text(char *buf, size_t cap, const train_opts_t *to, const inputs_t *in,
                  const char **name)
{
    const int file = to->o.model.spec.n_layers > 0;
    *name = file ? "model.txt" : "model.args";
    return file ? model_file_text(buf, cap, &to->o, to->dropout)
                : model_args(buf, cap, &to->o, in->H, in->rounds);
}
