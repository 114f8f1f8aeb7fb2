/*
 * Optimizers over float parameter arrays: SGD with momentum, Adam and AdamW,
 * with weight decay and clipping by the global L2 norm of the gradients.
 * Each step is elementwise (any thread owns its elements) after one norm
 * summed over the parameters in the order added, each in fixed chunks: the
 * same bits for any thread count. Per element the update runs in double and
 * stores floats, as PyTorch's formulas say (torch.optim.SGD, Adam, AdamW):
 *   g = clip_scale * grad (+ wd * p for SGD and Adam)
 *   SGD:  buf = momentum * buf + g;  p -= lr * buf   (buf = g without momentum)
 *   Adam: m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *         p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 *   AdamW: p -= lr * wd * p first, then Adam's step without the wd term.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"

typedef struct {
    float *p;
    const float *g;
    int64_t n;
    float *m, *v;             /* momentum or Adam's first moment; Adam's second */
    int64_t per_row;          /* split among processes: rows of this many elements; 0: not */
    int no_decay;             /* AG_OPT_NO_DECAY: no weight decay on it */
} param_t;

struct ag_optimizer {
    ag_optimizer_opts_t o;
    param_t *params;
    int n_params, cap;
    int64_t t;                /* steps taken */
};

static int opts_check(const ag_optimizer_opts_t *o, ag_error_t *err)
{
    if (o->kind < AG_OPT_ADAM || o->kind > AG_OPT_SGD)
        return ag_fail(err, AG_EINVAL, "optimizer: unknown kind %d", (int)o->kind);
    if (!(o->lr > 0) || !isfinite(o->lr))
        return ag_fail(err, AG_EINVAL, "optimizer: learning rate %g; expected a finite value > 0",
                       o->lr);
    if (!(o->momentum >= 0 && o->momentum < 1))
        return ag_fail(err, AG_EINVAL, "optimizer: momentum %g; expected 0 <= momentum < 1",
                       o->momentum);
    if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
        return ag_fail(err, AG_EINVAL, "optimizer: betas %g, %g; expected each in [0, 1)",
                       o->beta1, o->beta2);
    if (!(o->eps >= 0) || !isfinite(o->eps))
        return ag_fail(err, AG_EINVAL, "optimizer: eps %g; expected a finite value >= 0", o->eps);
    if (!(o->weight_decay >= 0) || !isfinite(o->weight_decay))
        return ag_fail(err, AG_EINVAL, "optimizer: weight decay %g; expected a finite value >= 0",
                       o->weight_decay);
    if (!(o->clip >= 0) || !isfinite(o->clip))
        return ag_fail(err, AG_EINVAL, "optimizer: clip %g; expected a finite value >= 0 (0: "
                       "none)", o->clip);
    return AG_OK;
}

void ag_optimizer_opts_init(ag_optimizer_opts_t *opts, ag_optimizer_kind_t kind)
{
    *opts = (ag_optimizer_opts_t)AG_OPTIMIZER_OPTS_INIT;
    opts->kind = kind;
}

int ag_optimizer_init(ag_optimizer_t **opt, const ag_optimizer_opts_t *o, ag_error_t *err)
{
    *opt = NULL;
    if (!o)
        return ag_fail(err, AG_EINVAL, "optimizer: no options");
    int rc = opts_check(o, err);
    if (rc)
        return rc;
    ag_optimizer_t *p = ag_calloc(1, sizeof *p, err, "optimizer");
    if (!p)
        return ag_alloc_status();
    p->o = *o;
    *opt = p;
    return AG_OK;
}

void ag_optimizer_free(ag_optimizer_t *opt)
{
    if (!opt)
        return;
    for (int k = 0; k < opt->n_params; k++)
        free(opt->params[k].m), free(opt->params[k].v);
    free(opt->params);
    free(opt);
}

int ag_optimizer_add(ag_optimizer_t *opt, float *param, const float *grad, int64_t n,
                     ag_error_t *err)
{
    return ag_optimizer_add_ex(opt, param, grad, n, 0, err);
}

int ag_optimizer_set_lr(ag_optimizer_t *opt, float lr, ag_error_t *err)
{
    if (!opt || !(lr > 0) || !isfinite(lr))
        return ag_fail(err, AG_EINVAL, "optimizer: learning rate %g; expected a finite value > 0",
                       lr);
    opt->o.lr = lr;
    return AG_OK;
}

int ag_optimizer_add_ex(ag_optimizer_t *opt, float *param, const float *grad, int64_t n,
                        unsigned flags, ag_error_t *err)
{
    if (flags & ~AG_OPT_NO_DECAY)
        return ag_fail(err, AG_EINVAL, "optimizer: flags %#x; expected AG_OPT_NO_DECAY or 0",
                       flags);
    if (!opt || !param || !grad || n <= 0)
        return ag_fail(err, AG_EINVAL, "optimizer: parameter %d: %s of %lld floats; expected an "
                       "array, its gradient and n >= 1", opt ? opt->n_params + 1 : 0,
                       param && grad ? "arrays" : "no array", (long long)n);
    if (opt->n_params == opt->cap) {
        const int cap = opt->cap ? 2 * opt->cap : 16;
        param_t *grown = ag_alloc(cap, sizeof *grown, err, "optimizer");
        if (!grown)
            return ag_alloc_status();
        if (opt->n_params)
            memcpy(grown, opt->params, (size_t)opt->n_params * sizeof *grown);
        free(opt->params);
        opt->params = grown, opt->cap = cap;
    }
    param_t p = {param, grad, n, NULL, NULL, 0, (flags & AG_OPT_NO_DECAY) != 0};
    const int adam = opt->o.kind != AG_OPT_SGD;
    if ((adam || opt->o.momentum > 0) &&
        !(p.m = ag_calloc(n, sizeof(float), err, "optimizer state")))
        return ag_alloc_status();
    if (adam && !(p.v = ag_calloc(n, sizeof(float), err, "optimizer state"))) {
        free(p.m);
        return ag_alloc_status();
    }
    opt->params[opt->n_params++] = p;
    return AG_OK;
}

static void squares(int64_t lo, int64_t hi, double *partial, void *ctx)
{
    const float *g = ctx;
    double s = 0;
    for (int64_t x = lo; x < hi; x++)
        s += (double)g[x] * g[x];
    partial[0] += s;
}

int ag_i_optimizer_split_last(ag_optimizer_t *opt, int64_t per_row, ag_error_t *err)
{
    if (!opt || !opt->n_params || per_row < 1 || opt->params[opt->n_params - 1].n % per_row)
        return ag_fail(err, AG_EINVAL, "optimizer: no parameter of rows of %lld elements to "
                       "split", (long long)per_row);
    opt->params[opt->n_params - 1].per_row = per_row;
    return AG_OK;
}

/* The global L2 norm of the gradients: parameters in order, each in fixed
   chunks (a split one's through r, in the whole array's chunks). */
static int grad_norm(const ag_optimizer_t *opt, const ag_i_reducer_t *r, double *norm,
                     ag_error_t *err)
{
    double total = 0;
    for (int k = 0; k < opt->n_params; k++) {
        const param_t *p = &opt->params[k];
        double s;
        ag_i_reducer_t by_elements;
        if (r && p->per_row)
            by_elements = *r, by_elements.per_row = p->per_row;
        int rc = ag_i_sum_rows_r(r && p->per_row ? &by_elements : NULL, p->n, 1, p->n, squares,
                                 (void *)p->g, &s, err);
        if (rc)
            return rc;
        total += s;
    }
    *norm = sqrt(total);
    return AG_OK;
}

static void step_sgd(const ag_optimizer_opts_t *o, const param_t *p, double scale)
{
    const double lr = o->lr, wd = p->no_decay ? 0.0 : o->weight_decay, mu = o->momentum;
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (p->n * 8 >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t x = 0; x < p->n; x++) {
        double g = scale * p->g[x] + wd * p->p[x];
        if (p->m) {
            g += mu * p->m[x];
            p->m[x] = (float)g;
        }
        p->p[x] = (float)(p->p[x] - lr * g);
    }
}

static void step_adam(const ag_optimizer_opts_t *o, const param_t *p, double scale, int64_t t)
{
    const double lr = o->lr, wd = p->no_decay ? 0.0 : o->weight_decay, b1 = o->beta1;
    const double b2 = o->beta2, eps = o->eps;
    const double c1 = 1 - pow(b1, (double)t), c2 = 1 - pow(b2, (double)t);
    /* AdamW decays w first, Adam adds wd w to the gradient: one formula with
       constants chosen here (no test in the loop: it vectorizes) */
    const double w_keep = o->kind == AG_OPT_ADAMW ? 1 - lr * wd : 1;
    const double g_wd = o->kind == AG_OPT_ADAMW ? 0 : wd;
    float *restrict P = p->p, *restrict M = p->m, *restrict V = p->v;
    const float *restrict G = p->g;
#pragma omp parallel for simd num_threads(ag_i_max_threads()) \
    if (p->n * 16 >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t x = 0; x < p->n; x++) {
        const double w0 = P[x], w = w_keep * w0, g = scale * G[x] + g_wd * w0;
        const double m = b1 * M[x] + (1 - b1) * g, v = b2 * V[x] + (1 - b2) * g * g;
        M[x] = (float)m, V[x] = (float)v;
        P[x] = (float)(w - lr * (m / c1) / (sqrt(v / c2) + eps));
    }
}

int ag_optimizer_step(ag_optimizer_t *opt, double *grad_norm_out, ag_error_t *err)
{
    return ag_i_optimizer_step_r(opt, NULL, grad_norm_out, err);
}

int ag_i_optimizer_step_r(ag_optimizer_t *opt, const ag_i_reducer_t *r, double *grad_norm_out,
                          ag_error_t *err)
{
    if (!opt)
        return ag_fail(err, AG_EINVAL, "optimizer: none");
    double norm;
    int rc = grad_norm(opt, r, &norm, err);
    if (rc)
        return rc;
    if (grad_norm_out)
        *grad_norm_out = norm;
    if (!isfinite(norm))
        return ag_fail(err, AG_EINVAL, "optimizer: the gradients are not finite (norm %g); no "
                       "parameter was changed", norm);
    const double scale = opt->o.clip > 0 && norm > opt->o.clip ? opt->o.clip / norm : 1.0;
    opt->t++;
    for (int k = 0; k < opt->n_params; k++) {
        if (opt->o.kind == AG_OPT_SGD)
            step_sgd(&opt->o, &opt->params[k], scale);
        else
            step_adam(&opt->o, &opt->params[k], scale, opt->t);
    }
    return AG_OK;
}
