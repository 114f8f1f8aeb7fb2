/*
 * GraphGPS's layer on the fused kernels: a layer's first H - G heads attend
 * over the round's graph, its last G heads over a global graph (an expander,
 * all pairs, virtual nodes). Each head's projections are its own rows of Wq,
 * Wk, Wv and its own columns of Wo, so splitting the heads is GPS's local and
 * global attention, each with its own weights, added by Wo.
 *
 * The kernels read heads as [N, H*d] rows; each group's columns are gathered
 * into rows of their own, run, and scattered back: 4 (forward) or 8
 * (backward) extra [N, H*d] copies, against attention's O(E H d).
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"

/* The columns [c0, c0 + w) of rows of width W: to [n, w] from, or back. */
static void gather(float *to, const float *from, int64_t n, int64_t W, int64_t c0, int64_t w)
{
#pragma omp parallel for num_threads(ag_i_max_threads()) if (n * w >= AG_PARALLEL_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        memcpy(to + i * w, from + i * W + c0, (size_t)w * sizeof *to);
}

static void scatter(float *to, const float *from, int64_t n, int64_t W, int64_t c0, int64_t w)
{
#pragma omp parallel for num_threads(ag_i_max_threads()) if (n * w >= AG_PARALLEL_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        memcpy(to + i * W + c0, from + i * w, (size_t)w * sizeof *to);
}

/* Q, K, V's columns of heads h0 .. h0 + Hg - 1 into q, k, v [N, Hg*d]. */
static void gather_qkv(float *q, float *k, float *v, const float *Q, const float *K,
                       const float *V, int64_t N, int64_t H, int64_t d, int64_t h0, int64_t Hg)
{
    gather(q, Q, N, H * d, h0 * d, Hg * d);
    gather(k, K, N, H * d, h0 * d, Hg * d);
    gather(v, V, N, H * d, h0 * d, Hg * d);
}

/* Group j's heads: the local ones (j 0) or the last G. */
static void group(int j, int64_t H, int64_t G, int64_t *h0, int64_t *Hg)
{
    *h0 = j ? H - G : 0;
    *Hg = j ? G : H - G;
}

/* The score of group j: its heads' rows of the attention vectors; the global
   heads' attention dropout from a stream of their own. */
static ag_score_t group_score(const ag_score_t *sc, int j, int64_t h0, int64_t d)
{
    ag_score_t g = *sc;
    if (g.a_src)
        g.a_src += h0 * d;
    if (g.a_dst)
        g.a_dst += h0 * d;
    if (j)
        g.dropout_seed = rng_seed(sc->dropout_seed, 1);
    return g;
}

static int refuse_edge_terms(const ag_score_t *sc, ag_error_t *err)
{
    const char *term = sc->alibi ? "alibi" : sc->edge_bias ? "an edge bias"
                       : sc->edge_pre ? "additive's edge terms" : sc->edge_key ? "edge keys"
                       : sc->edge_value ? "edge values" : NULL;
    if (term)
        return ag_fail(err, AG_EINVAL, "a layer with global heads: its score has %s, which "
                       "the global graph's edges do not carry", term);
    return AG_OK;
}

/* The caller's progress over both groups: group 2's work counted after group 1's. */
typedef struct {
    void (*fn)(int64_t done, int64_t total, void *ctx);
    void *ctx;
    int64_t before, total;
} progress_t;

static void group_progress(int64_t done, int64_t total, void *ctx)
{
    const progress_t *p = ctx;
    (void)total;
    p->fn(p->before + done, p->total, p->ctx);
}

int ag_i_attention_split(const ag_nbhd_t *local, const ag_nbhd_t *global, const float *Q,
                         const float *K, const float *V, int64_t H, int64_t d, int64_t G,
                         const ag_score_t *sc, float *M, const ag_attention_opts_t *opts,
                         ag_error_t *err)
{
    int rc = refuse_edge_terms(sc, err);
    if (rc)
        return rc;
    if (global->n_nodes != local->n_nodes)
        return ag_fail(err, AG_EINVAL, "global graph of %lld nodes; the round's graph has "
                       "%lld", (long long)global->n_nodes, (long long)local->n_nodes);
    const int64_t N = local->n_nodes, HD = H * d, most = (G > H - G ? G : H - G);
    const ag_attention_opts_t none = AG_ATTENTION_OPTS_INIT;
    const ag_attention_opts_t *o = opts ? opts : &none;
    float *const per_head[4] = {o->entropy, o->max_weight, o->distance, o->lse};
    float *buf = ag_alloc(N * (4 * most * d + 4 * most), sizeof *buf, err, "global heads");
    if (!buf)
        return ag_alloc_status();
    float *q = buf, *k = q + N * most * d, *v = k + N * most * d, *m = v + N * most * d;
    float *fig = m + N * most * d;   /* [4][N, most] */
    progress_t progress = {o->progress, o->progress_ctx, 0,
                           local->n_edges * (H - G) + global->n_edges * G};
    for (int j = 0; j < 2 && !rc; j++) {
        int64_t h0, Hg;
        group(j, H, G, &h0, &Hg);
        gather_qkv(q, k, v, Q, K, V, N, H, d, h0, Hg);
        const ag_score_t gs = group_score(sc, j, h0, d);
        ag_attention_opts_t go = *o;
        progress.before = j ? local->n_edges * (H - G) : 0;
        if (o->progress)
            go.progress = group_progress, go.progress_ctx = &progress;
        float **mine[4] = {&go.entropy, &go.max_weight, &go.distance, &go.lse};
        for (int f = 0; f < 4; f++) {   /* what the kernel leaves untouched stays as given */
            *mine[f] = per_head[f] ? fig + f * N * most : NULL;
            if (per_head[f])
                gather(*mine[f], per_head[f], N, H, h0, Hg);
        }
        rc = ag_attention_ex(j ? global : local, q, k, v, Hg, d, &gs, m, &go, err);
        if (rc)
            break;
        scatter(M, m, N, HD, h0 * d, Hg * d);
        for (int f = 0; f < 4; f++)
            if (per_head[f])
                scatter(per_head[f], fig + f * N * most, N, H, h0, Hg);
    }
    free(buf);
    return rc;
}

int ag_i_backward_split(ag_nbhd_t *local, ag_nbhd_t *global, const float *Q, const float *K,
                        const float *V, int64_t H, int64_t d, int64_t G, const ag_score_t *sc,
                        const float *M, const float *lse, const float *dM,
                        const ag_attention_grads_t *g, ag_error_t *err)
{
    int rc = refuse_edge_terms(sc, err);
    if (rc)
        return rc;
    if (g->d_edge_bias || g->d_edge_pre || g->d_edge_key || g->d_edge_value)
        return ag_fail(err, AG_EINVAL, "a layer with global heads has no edge terms' "
                       "gradients");
    const int64_t N = local->n_nodes, HD = H * d, most = (G > H - G ? G : H - G);
    const int64_t n = N * most * d;
    float *buf = ag_alloc(8 * n + N * most, sizeof *buf, err, "global heads' gradients");
    if (!buf)
        return ag_alloc_status();
    float *q = buf, *k = q + n, *v = k + n, *m = v + n, *dm = m + n, *dq = dm + n,
          *dk = dq + n, *dv = dk + n, *l = dv + n;
    for (int j = 0; j < 2 && !rc; j++) {
        int64_t h0, Hg;
        group(j, H, G, &h0, &Hg);
        gather_qkv(q, k, v, Q, K, V, N, H, d, h0, Hg);
        gather(dm, dM, N, HD, h0 * d, Hg * d);
        if (M)
            gather(m, M, N, HD, h0 * d, Hg * d);
        if (lse)
            gather(l, lse, N, H, h0, Hg);
        const ag_score_t gs = group_score(sc, j, h0, d);
        const ag_attention_grads_t gg = {
            .dQ = dq, .dK = dk, .dV = dv,
            .d_a_src = g->d_a_src ? g->d_a_src + h0 * d : NULL,
            .d_a_dst = g->d_a_dst ? g->d_a_dst + h0 * d : NULL};
        rc = ag_attention_backward(j ? global : local, q, k, v, Hg, d, &gs, M ? m : NULL,
                                   lse ? l : NULL, dm, &gg, err);
        if (rc)
            break;
        scatter(g->dQ, dq, N, HD, h0 * d, Hg * d);
        scatter(g->dK, dk, N, HD, h0 * d, Hg * d);
        scatter(g->dV, dv, N, HD, h0 * d, Hg * d);
    }
    free(buf);
    return rc;
}
