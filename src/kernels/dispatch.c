/*
 * The one entry point of the attention kernels, for both directions: checks
 * a score description, then sends plain dot-product softmax to the fused
 * kernel that fits the neighbourhoods' shape (tiled.c or gather.c) and every
 * other score function, and the weights and figures of any, to the generic
 * path (generic.c). simple.c holds the plain one-pass kernel the tests hold
 * the fused ones to.
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

int ag_score_check(const ag_score_t *sc, const ag_nbhd_t *nb, int64_t H, int64_t d,
                   ag_error_t *err)
{
    if (H <= 0 || d <= 0)
        return ag_i_fail(err, AG_EINVAL, "attention: %lld heads of width %lld; expected both >= 1",
                         (long long)H, (long long)d);
    if (!nb || !nb->edge_ptr || !nb->run_ptr)
        return ag_i_fail(err, AG_EINVAL, "attention: neighbourhoods are not compiled");
    if (!sc)
        return AG_OK;
    if (sc->kind < AG_SCORE_SCALED_DOT || sc->kind > AG_SCORE_LINEAR)
        return ag_i_fail(err, AG_EINVAL, "score: unknown kind %d", (int)sc->kind);
    if (!(sc->beta >= 0) || !isfinite(sc->beta))
        return ag_i_fail(err, AG_EINVAL, "score: beta %g; expected a finite value >= 0", sc->beta);
    if (!(sc->softcap >= 0) || !isfinite(sc->softcap))
        return ag_i_fail(err, AG_EINVAL, "score: softcap %g; expected a finite value >= 0",
                         sc->softcap);
    if (!isfinite(sc->slope))
        return ag_i_fail(err, AG_EINVAL, "score: slope %g; expected a finite value", sc->slope);
    if (!ag_i_is_softmax(sc->kind) && (sc->beta != 1 || sc->softcap > 0))
        return ag_i_fail(err, AG_EINVAL, "score: beta %g, softcap %g; beta and softcap apply to "
                         "softmax scores, not to %s: expected beta 1 and softcap 0 (as "
                         "AG_SCORE_INIT has them)", sc->beta, sc->softcap,
                         sc->kind == AG_SCORE_LINEAR ? "linear" : "sigmoid");
    if (sc->kind == AG_SCORE_LINEAR && (sc->edge_bias || sc->alibi))
        return ag_i_fail(err, AG_EINVAL, "score: linear attention takes no edge bias or ALiBi");
    if (sc->kind == AG_SCORE_ADDITIVE && (!sc->a_src || !sc->a_dst))
        return ag_i_fail(err, AG_EINVAL, "score: additive needs the vectors a_src and a_dst "
                         "[H, d]");
    if (sc->kind == AG_SCORE_GATV2 && !sc->a_src)
        return ag_i_fail(err, AG_EINVAL, "score: gatv2 needs the vector a [H, d] (a_src)");
    int rc = ag_check_finite(sc->kind == AG_SCORE_GATV2 ? "score: a" : "score: a_src",
                             sc->a_src, H, d, err);
    if (!rc)
        rc = ag_check_finite("score: a_dst", sc->a_dst, H, d, err);
    if (!rc)
        rc = ag_check_finite("score: edge_bias", sc->edge_bias, nb->n_edges, 1, err);
    return rc;
}

/* Can the one-pass kernel run it? Then *scale is its score multiplier. */
static int plain_dot(const ag_score_t *sc, int64_t d, float *scale)
{
    const float beta = sc ? sc->beta : 1.0f;
    if (sc && (sc->kind > AG_SCORE_DOT || sc->softcap > 0 || sc->edge_bias || sc->alibi))
        return 0;
    *scale = beta * (sc && sc->kind == AG_SCORE_DOT ? 1.0f : 1.0f / sqrtf((float)d));
    return 1;
}

int ag_i_plain_scale(const ag_score_t *score, int64_t d, float *scale)
{
    return plain_dot(score, d, scale);
}

int ag_i_use_tiled(int64_t N, int64_t E, int one_run)
{
    return one_run && N > 0 && N < INT32_MAX && E / N >= 16;
}

int ag_i_attention_auto(const ag_i_fwd_t *a, ag_error_t *err)
{
    /* The one-pass kernel (simple.c) is the reference the tests hold both
       fused kernels to. */
    const ag_nbhd_t *nb = a->nb;
    if (ag_i_use_tiled(nb->n_nodes, nb->n_edges, ag_i_tiled_applies(nb)))
        return ag_i_attention_tiled(a, err);
    return ag_i_attention_gather(a, err);
}

int ag_i_attention_part(const ag_i_fwd_t *a, int64_t lo, int64_t hi, int64_t klo, int64_t khi,
                        int one_run, ag_error_t *err)
{
    /* the score's checks, the edge bias's on the part's slots only */
    const ag_score_t *sc = a->score;
    ag_score_t no_bias = sc ? *sc : (ag_score_t)AG_SCORE_INIT;
    no_bias.edge_bias = NULL;
    int rc = ag_score_check(&no_bias, a->nb, a->H, a->d, err);
    if (!rc && sc && sc->edge_bias)
        rc = ag_check_finite("score: edge_bias", sc->edge_bias + a->nb->edge_ptr[lo],
                             a->nb->edge_ptr[hi] - a->nb->edge_ptr[lo], 1, err);
    if (rc)
        return rc;
    ag_i_fwd_t plain = *a;
    if (!plain_dot(sc, a->d, &plain.scale)) {
        if (a->x && a->x->lse)
            return ag_i_fail(err, AG_EINVAL, "attention on a part of the graph: the "
                             "log-sum-exp of plain dot-product scores only");
        return ag_i_attention_generic_range(a, lo, hi, klo, khi, err);
    }
    if (ag_i_use_tiled(a->nb->n_nodes, a->nb->n_edges, one_run))
        return ag_i_attention_tiled_range(&plain, lo, hi, err);
    return ag_i_attention_gather_range(&plain, lo, hi, err);
}

int ag_attention_weights(const ag_nbhd_t *nb, const float *Q, const float *K,
                         int64_t H, int64_t d, const ag_score_t *score, int64_t lo, int64_t hi,
                         float *W, ag_error_t *err)
{
    int rc = ag_score_check(score, nb, H, d, err);
    if (rc)
        return rc;
    if (lo < 0 || hi > nb->n_nodes || lo > hi)
        return ag_i_fail(err, AG_EINVAL, "attention weights: destinations %lld..%lld are outside "
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

int ag_attention_ex(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                    int64_t H, int64_t d, const ag_score_t *score, float *M,
                    const ag_attention_opts_t *opts, ag_error_t *err)
{
    int rc = ag_score_check(score, nb, H, d, err);
    if (rc)
        return rc;
    kext_t x = {0};
    if (opts)
        x = (kext_t){opts->entropy, opts->max_weight, opts->distance, opts->progress,
                     opts->progress_ctx, nb->n_edges * H, 0, 0, opts->lse};
    ag_i_fwd_t a = {nb, Q, K, V, H, d, 0.0f, score, M, opts ? &x : NULL};
    rc = plain_dot(score, d, &a.scale) ? ag_i_attention_auto(&a, err)
                                       : ag_i_attention_generic(&a, err);
    if (!rc && x.progress)
        x.progress(x.total, x.total, x.ctx);
    return rc;
}

/* ---- backward ---- */

int ag_i_backward_auto(const ag_i_bwd_t *a, ag_error_t *err)
{
    const ag_nbhd_t *nb = a->nb;
    if (ag_i_use_tiled(nb->n_nodes, nb->n_edges, ag_i_tiled_applies(nb)))
        return ag_i_backward_tiled(a, err);
    return ag_i_backward_gather(a, err);
}

int ag_i_backward_part(const ag_i_bwd_t *a, int one_run, int64_t qlo, int64_t qhi,
                       int64_t klo, int64_t khi, ag_error_t *err)
{
    if (ag_i_use_tiled(a->nb->n_nodes, a->nb->n_edges, one_run))
        return ag_i_backward_tiled_range(a, qlo, qhi, klo, khi, err);
    return ag_i_backward_gather_range(a, qlo, qhi, klo, khi, err);
}

void ag_i_backward_rowdots(float *Dd, const float *dM, const float *M, int64_t N, int64_t H,
                           int64_t d)
{
    const int64_t HD = H * d;
#pragma omp parallel for if (N * HD >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < H; h++)
            Dd[i * H + h] = ag_i_dot(dM + i * HD + h * d, M + i * HD + h * d, d);
}

int ag_attention_backward(ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                          int64_t H, int64_t d, const ag_score_t *score, const float *M,
                          const float *lse, const float *dM, const ag_attention_grads_t *g,
                          ag_error_t *err)
{
    int rc = ag_score_check(score, nb, H, d, err);
    if (rc)
        return rc;
    if (!g || !g->dQ || !g->dK || !g->dV)
        return ag_i_fail(err, AG_EINVAL, "attention backward: dQ, dK and dV are required");
    if ((rc = ag_nbhd_transpose(nb, err)))
        return rc;
    ag_i_bwd_t a = {nb, Q, K, V, dM, H, d, 0.0f, score, lse, NULL, *g};
    /* the edge bias's gradient (sum over heads of dL/ds per slot) is not 0 even
       where the score has no bias: the generic kernel keeps it per slot */
    if (!plain_dot(score, d, &a.scale) || g->d_edge_bias)
        return ag_i_backward_generic(&a, err);
    if (g->d_a_src)       /* a plain score has no attention vectors */
        memset(g->d_a_src, 0, (size_t)(H * d) * sizeof *g->d_a_src);
    if (g->d_a_dst)
        memset(g->d_a_dst, 0, (size_t)(H * d) * sizeof *g->d_a_dst);
    const int64_t N = nb->n_nodes, HD = H * d;
    /* M and lse when not given: one forward; then D_i = rowsum(dM_i * M_i) per head */
    float *own = ag_i_alloc(N * H + (M && lse ? 0 : N * HD + N * H), sizeof(float), err,
                            "attention backward");
    if (!own)
        return ag_i_alloc_status();
    float *Dd = own;
    if (!M || !lse) {
        float *M2 = own + N * H, *lse2 = M2 + N * HD;
        kext_t x = {0};
        x.lse = lse2;
        const ag_i_fwd_t f = {nb, Q, K, V, H, d, a.scale, score, M2, &x};
        if ((rc = ag_i_attention_auto(&f, err))) {
            free(own);
            return rc;
        }
        M = M2, a.lse = lse2;
    }
    ag_i_backward_rowdots(Dd, dM, M, N, H, d);
    a.Dd = Dd;
    rc = ag_i_backward_auto(&a, err);
    free(own);
    return rc;
}
