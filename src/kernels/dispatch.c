/*
 * The public entry points of the attention kernels, for both directions:
 * they check a score description, then plan (plan.c: the kernel that fits
 * the score and the neighbourhoods' shape) and compute. The weights and
 * figures of any score come from the generic kernel (generic.c).
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"

void ag_score_init(ag_score_t *score, ag_score_kind_t kind)
{
    *score = (ag_score_t)AG_SCORE_INIT;
    score->kind = kind;
}

/* The kinds whose messages may carry their own key and value terms. */
static int edge_terms_apply(ag_score_kind_t kind)
{
    return kind == AG_SCORE_SCALED_DOT || kind == AG_SCORE_DOT || kind == AG_SCORE_SIGMOID ||
           kind == AG_SCORE_GATV2;
}

int ag_score_check(const ag_score_t *sc, const ag_nbhd_t *nb, int64_t H, int64_t d,
                   ag_error_t *err)
{
    if (H <= 0 || d <= 0)
        return ag_fail(err, AG_EINVAL, "attention: %lld heads of width %lld; expected both >= 1",
                       (long long)H, (long long)d);
    if (!nb || !nb->edge_ptr || !nb->run_ptr)
        return ag_fail(err, AG_EINVAL, "attention: neighbourhoods are not compiled");
    if (!sc)
        return AG_OK;
    if (sc->kind < AG_SCORE_SCALED_DOT || sc->kind > AG_SCORE_LINEAR)
        return ag_fail(err, AG_EINVAL, "score: unknown kind %d", (int)sc->kind);
    if (!(sc->beta >= 0) || !isfinite(sc->beta))
        return ag_fail(err, AG_EINVAL, "score: beta %g; expected a finite value >= 0", sc->beta);
    if (!(sc->softcap >= 0) || !isfinite(sc->softcap))
        return ag_fail(err, AG_EINVAL, "score: softcap %g; expected a finite value >= 0",
                       sc->softcap);
    if (!(sc->dropout >= 0 && sc->dropout < 1))
        return ag_fail(err, AG_EINVAL, "score: dropout %g; expected a probability in [0, 1)",
                       sc->dropout);
    if (!isfinite(sc->slope))
        return ag_fail(err, AG_EINVAL, "score: slope %g; expected a finite value", sc->slope);
    if (!ag_i_is_softmax(sc->kind) && (sc->beta != 1 || sc->softcap > 0))
        return ag_fail(err, AG_EINVAL, "score: beta %g, softcap %g; beta and softcap apply to "
                       "softmax scores, not to %s: expected beta 1 and softcap 0 (as "
                       "AG_SCORE_INIT has them)", sc->beta, sc->softcap,
                       sc->kind == AG_SCORE_LINEAR ? "linear" : "sigmoid");
    if (sc->kind == AG_SCORE_LINEAR && (sc->edge_bias || sc->alibi))
        return ag_fail(err, AG_EINVAL, "score: linear attention takes no edge bias or ALiBi");
    if (sc->edge_pre && sc->kind != AG_SCORE_ADDITIVE)
        return ag_fail(err, AG_EINVAL, "score: edge_pre (a term inside the LeakyReLU) is "
                       "additive's; this score is another kind");
    if ((sc->edge_key || sc->edge_value) && !edge_terms_apply(sc->kind))
        return ag_fail(err, AG_EINVAL, "score: edge_key and edge_value (the messages' own key "
                       "and value terms) apply to scaled-dot, dot, sigmoid and gatv2 scores");
    if (sc->kind == AG_SCORE_ADDITIVE && (!sc->a_src || !sc->a_dst))
        return ag_fail(err, AG_EINVAL, "score: additive needs the vectors a_src and a_dst "
                       "[H, d]");
    if (sc->kind == AG_SCORE_GATV2 && !sc->a_src)
        return ag_fail(err, AG_EINVAL, "score: gatv2 needs the vector a [H, d] (a_src)");
    int rc = ag_check_finite(sc->kind == AG_SCORE_GATV2 ? "score: a" : "score: a_src",
                             sc->a_src, H, d, err);
    if (!rc)
        rc = ag_check_finite("score: a_dst", sc->a_dst, H, d, err);
    if (!rc)
        rc = ag_check_finite("score: edge_bias", sc->edge_bias, nb->n_edges, 1, err);
    if (!rc)
        rc = ag_check_finite("score: edge_pre", sc->edge_pre, nb->n_edges, H, err);
    if (!rc)
        rc = ag_check_finite("score: edge_key", sc->edge_key, nb->n_edges, H * d, err);
    if (!rc)
        rc = ag_check_finite("score: edge_value", sc->edge_value, nb->n_edges, H * d, err);
    return rc;
}

int ag_attention_weights(const ag_nbhd_t *nb, const float *Q, const float *K,
                         int64_t H, int64_t d, const ag_score_t *score, int64_t lo, int64_t hi,
                         float *W, ag_error_t *err)
{
    int rc = ag_score_check(score, nb, H, d, err);
    if (rc)
        return rc;
    if (lo < 0 || hi > nb->n_nodes || lo > hi)
        return ag_fail(err, AG_EINVAL, "attention weights: destinations %lld..%lld are outside "
                       "0..%lld", (long long)lo, (long long)hi, (long long)nb->n_nodes);
    return ag_i_generic_weights(nb, Q, K, H, d, score, lo, hi, W, err);
}

int ag_attention_stats(const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                       int64_t d, const ag_score_t *score, double *entropy, double *distance,
                       double *max_weight, ag_error_t *err)
{
    int rc = ag_score_check(score, nb, H, d, err);
    return rc ? rc : ag_i_generic_stats(nb, Q, K, H, d, score, entropy, distance, max_weight,
                                        err);
}

int ag_attention(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                 int64_t H, int64_t d, const ag_score_t *score, float *M, ag_error_t *err)
{
    return ag_attention_ex(nb, Q, K, V, H, d, score, M, NULL, err);
}

/* p fits a call on part lo..hi-1 (keys klo..khi-1), or is made anew for it. */
static int plan_part_for(ag_i_plan_t *p, int backward, const ag_nbhd_t *nb, int64_t H,
                         int64_t d, const ag_score_t *score, int64_t lo, int64_t hi,
                         int64_t klo, int64_t khi, const ag_i_layout_t *lay, ag_error_t *err)
{
    if (p->part && ag_i_plan_fits(p, backward, nb, H, d, score) && p->lo == lo && p->hi == hi &&
        p->klo == klo && p->khi == khi)
        return AG_OK;
    ag_i_plan_free(p);
    return ag_i_plan_part(p, backward, nb, H, d, score, lo, hi, klo, khi, lay, err);
}

int ag_i_forward_part(ag_i_plan_t *p, const ag_i_fwd_t *a, int64_t lo, int64_t hi, int64_t klo,
                      int64_t khi, const ag_i_layout_t *lay, ag_error_t *err)
{
    /* the score's checks, the edge bias's on the part's slots only */
    const ag_score_t *sc = a->score;
    ag_score_t no_bias = sc ? *sc : (ag_score_t)AG_SCORE_INIT;
    no_bias.edge_bias = NULL;
    if (sc && (sc->edge_pre || sc->edge_key || sc->edge_value))   /* the parts' backward
                                                                     views number slots
                                                                     otherwise */
        return ag_fail(err, AG_EINVAL, "score: edge_pre, edge_key and edge_value are not "
                       "supported on several processes");
    int rc = ag_score_check(&no_bias, a->nb, a->H, a->d, err);
    if (!rc && sc && sc->edge_bias)
        rc = ag_check_finite("score: edge_bias", sc->edge_bias + a->nb->edge_ptr[lo],
                             a->nb->edge_ptr[hi] - a->nb->edge_ptr[lo], 1, err);
    if (!rc)
        rc = plan_part_for(p, 0, a->nb, a->H, a->d, sc, lo, hi, klo, khi, lay, err);
    return rc ? rc : ag_i_forward(p, a, err);
}

int ag_i_backward_part(ag_i_plan_t *p, const ag_i_bwd_t *a, int64_t lo, int64_t hi,
                       int64_t klo, int64_t khi, const ag_i_layout_t *lay, ag_error_t *err)
{
    const int rc = plan_part_for(p, 1, a->nb, a->H, a->d, a->score, lo, hi, klo, khi, lay,
                                 err);
    return rc ? rc : ag_i_backward(p, a, err);
}

/* p fits this call, or is made anew for it. */
static int plan_for(ag_i_plan_t *p, int backward, ag_i_kernel_t kernel, const ag_nbhd_t *nb,
                    int64_t H, int64_t d, const ag_score_t *score, ag_error_t *err)
{
    if (!p->part && p->asked == kernel && ag_i_plan_fits(p, backward, nb, H, d, score))
        return AG_OK;
    ag_i_plan_free(p);
    return ag_i_plan(p, backward, kernel, nb, H, d, score, err);
}

int ag_i_attention_planned(ag_i_plan_t *p, const ag_nbhd_t *nb, const float *Q, const float *K,
                           const float *V, int64_t H, int64_t d, const ag_score_t *score,
                           float *M, const ag_attention_opts_t *opts, ag_error_t *err)
{
    int rc = ag_score_check(score, nb, H, d, err);
    if (!rc)
        rc = plan_for(p, 0, AG_I_KERNEL_AUTO, nb, H, d, score, err);
    if (rc)
        return rc;
    kext_t x = {0};
    if (opts)
        x = (kext_t){opts->entropy, opts->max_weight, opts->distance, opts->progress,
                     opts->progress_ctx, nb->n_edges * H, 0, 0, opts->lse};
    const ag_i_fwd_t a = {nb, Q, K, V, H, d, score, M, opts ? &x : NULL};
    rc = ag_i_forward(p, &a, err);
    if (!rc && x.progress)
        x.progress(x.total, x.total, x.ctx);
    return rc;
}

int ag_attention_ex(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                    int64_t H, int64_t d, const ag_score_t *score, float *M,
                    const ag_attention_opts_t *opts, ag_error_t *err)
{
    ag_i_plan_t p = {0};
    const int rc = ag_i_attention_planned(&p, nb, Q, K, V, H, d, score, M, opts, err);
    ag_i_plan_free(&p);
    return rc;
}

/* ---- backward ---- */

void ag_i_backward_rowdots(float *Dd, const float *dM, const float *M, int64_t N, int64_t H,
                           int64_t d)
{
    const int64_t HD = H * d;
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (N * HD >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < H; h++)
            Dd[i * H + h] = ag_i_dot(dM + i * HD + h * d, M + i * HD + h * d, d);
}

int ag_i_backward_planned(ag_i_plan_t *p, ag_nbhd_t *nb, const float *Q, const float *K,
                          const float *V, int64_t H, int64_t d, const ag_score_t *score,
                          const float *M, const float *lse, const float *dM,
                          const ag_attention_grads_t *g, ag_error_t *err)
{
    int rc = ag_score_check(score, nb, H, d, err);
    if (rc)
        return rc;
    if (!g || !g->dQ || !g->dK || !g->dV)
        return ag_fail(err, AG_EINVAL, "attention backward: dQ, dK and dV are required");
    if ((rc = ag_nbhd_transpose(nb, err)))
        return rc;
    if (g->d_edge_pre && (!score || score->kind != AG_SCORE_ADDITIVE))
        return ag_fail(err, AG_EINVAL, "attention backward: d_edge_pre is additive's edge "
                       "terms' gradient; this score is another kind");
    const ag_score_kind_t kind = score ? score->kind : AG_SCORE_SCALED_DOT;
    if ((g->d_edge_key || g->d_edge_value) && !edge_terms_apply(kind))
        return ag_fail(err, AG_EINVAL, "attention backward: d_edge_key and d_edge_value "
                       "apply to scaled-dot, dot, sigmoid and gatv2 scores");
    /* the slots' gradients (the edge bias's: the sum over heads of dL/ds) are
       not 0 even where the score has no such terms: the generic kernel keeps
       them per slot */
    const int per_slot = g->d_edge_bias || g->d_edge_key || g->d_edge_value;
    if ((rc = plan_for(p, 1, per_slot ? AG_I_KERNEL_GENERIC : AG_I_KERNEL_AUTO, nb, H, d, score,
                       err)))
        return rc;
    ag_i_bwd_t a = {nb, Q, K, V, dM, H, d, score, lse, NULL, *g};
    if (p->kernel == AG_I_KERNEL_GENERIC)
        return ag_i_backward(p, &a, err);
    if (g->d_a_src)       /* a plain score has no attention vectors */
        memset(g->d_a_src, 0, (size_t)(H * d) * sizeof *g->d_a_src);
    if (g->d_a_dst)
        memset(g->d_a_dst, 0, (size_t)(H * d) * sizeof *g->d_a_dst);
    const int64_t N = nb->n_nodes, HD = H * d;
    /* M and lse when not given: one forward; then D_i = rowsum(dM_i * M_i) per head */
    float *own = ag_alloc(N * H + (M && lse ? 0 : N * HD + N * H), sizeof(float), err,
                          "attention backward");
    if (!own)
        return ag_alloc_status();
    if (!M || !lse) {
        float *M2 = own + N * H, *lse2 = M2 + N * HD;
        kext_t x = {0};
        x.lse = lse2;
        const ag_i_fwd_t f = {nb, Q, K, V, H, d, score, M2, &x};
        rc = ag_i_attention_with(AG_I_KERNEL_AUTO, &f, err);
        M = M2, a.lse = lse2;
    }
    if (!rc) {
        ag_i_backward_rowdots(own, dM, M, N, H, d);
        a.Dd = own;
        rc = ag_i_backward(p, &a, err);
    }
    free(own);
    return rc;
}

int ag_attention_backward(ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                          int64_t H, int64_t d, const ag_score_t *score, const float *M,
                          const float *lse, const float *dM, const ag_attention_grads_t *g,
                          ag_error_t *err)
{
    ag_i_plan_t p = {0};
    const int rc = ag_i_backward_planned(&p, nb, Q, K, V, H, d, score, M, lse, dM, g, err);
    ag_i_plan_free(&p);
    return rc;
}
