/*
 * Score functions and the generic attention path.
 *
 * For destination i, head h and in-edge j -> i (slot s):
 *   raw score   scaled-dot q.k/sqrt(d) | dot q.k | cosine cos(q,k)
 *               | additive LeakyReLU(a_dst.q_i + a_src.k_j) | gatv2 a.LeakyReLU(q_i + k_j)
 *               | sigmoid q.k/sqrt(d) | linear phi(q).phi(k), phi(x) = elu(x) + 1
 *   softmax kinds: s <- beta * s, then softcap C: s <- C tanh(s / C)
 *   all but linear: s <- s + edge_bias[slot] + alibi_h * (j - i)
 *   weights     softmax over i's in-edges | sigmoid(s + b_i), b_i = -ln(in-degree)
 *               | linear: s / sum of s over i's in-edges
 *
 * The generic path scores a destination's edges into a per-thread buffer,
 * normalises them, then accumulates V: two passes over the edges. Plain
 * dot-product softmax goes to the fused kernels instead (dispatch.c picks the
 * tiled or the gather kernel).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kernels.h"
#include "vec.h"

int ag_i_is_softmax(ag_score_kind_t kind)
{
    return kind != AG_SCORE_SIGMOID && kind != AG_SCORE_LINEAR;
}

/* ---- scoring context: per-node precomputations, made before the parallel region ---- */

typedef struct {
    ag_score_t sc;            /* with defaults filled in */
    int64_t H, d;
    float scale;              /* multiplier of q.k */
    const float *Q, *K;       /* what dot products read (phi(Q), phi(K) for linear) */
    float *owned;             /* one allocation behind the arrays below */
    float *e_src, *e_dst;     /* additive: a_src.k_j and a_dst.q_i [N, H] */
    float *norm_q, *norm_k;   /* cosine: |q_i|, |k_j| per head [N, H] */
    float *alibi;             /* [H] */
} sctx_t;

static float elu1(float x)
{
    return x > 0 ? x + 1.0f : expf(x);
}

static float leaky(float x, float slope)
{
    return x > 0 ? x : slope * x;
}

static int sctx_init(sctx_t *c, const ag_score_t *score, const ag_nbhd_t *nb, const float *Q,
                     const float *K, int64_t H, int64_t d, ag_error_t *err)
{
    memset(c, 0, sizeof *c);
    c->sc = score ? *score : (ag_score_t){0};
    if (c->sc.beta == 0)
        c->sc.beta = 1;
    if (c->sc.slope == 0)
        c->sc.slope = 0.2f;
    c->H = H, c->d = d, c->Q = Q, c->K = K;
    const ag_score_kind_t kind = c->sc.kind;
    c->scale = kind == AG_SCORE_DOT || kind == AG_SCORE_LINEAR || kind == AG_SCORE_COSINE
                   ? 1.0f : 1.0f / sqrtf((float)d);
    const int64_t N = nb->n_nodes, HD = H * d;
    int64_t need = H;                                       /* alibi */
    if (kind == AG_SCORE_ADDITIVE || kind == AG_SCORE_COSINE)
        need += 2 * N * H;
    if (kind == AG_SCORE_LINEAR)
        need += 2 * N * HD;
    c->owned = ag_alloc(need, sizeof(float), err, "score");
    if (!c->owned)
        return AG_ENOMEM;
    c->alibi = c->owned;
    for (int64_t h = 0; h < H; h++)   /* ALiBi's geometric slopes, 2^(-8(h+1)/H) */
        c->alibi[h] = c->sc.alibi ? exp2f(-8.0f * (float)(h + 1) / (float)H) : 0.0f;
    float *more = c->owned + H;
    if (kind == AG_SCORE_ADDITIVE || kind == AG_SCORE_COSINE) {
        float *a = more, *b = more + N * H;
#pragma omp parallel for if (N * H * d >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t i = 0; i < N; i++)
            for (int64_t h = 0; h < H; h++) {
                const float *q = Q + i * HD + h * d, *k = K + i * HD + h * d;
                if (kind == AG_SCORE_ADDITIVE) {
                    a[i * H + h] = dot(c->sc.a_src + h * d, k, d);
                    b[i * H + h] = dot(c->sc.a_dst + h * d, q, d);
                } else {
                    a[i * H + h] = sqrtf(dot(q, q, d));
                    b[i * H + h] = sqrtf(dot(k, k, d));
                }
            }
        if (kind == AG_SCORE_ADDITIVE)
            c->e_src = a, c->e_dst = b;
        else
            c->norm_q = a, c->norm_k = b;
    }
    if (kind == AG_SCORE_LINEAR) {
        float *pq = more, *pk = more + N * HD;
#pragma omp parallel for if (N * HD >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t x = 0; x < N * HD; x++) {
            pq[x] = elu1(Q[x]);
            pk[x] = elu1(K[x]);
        }
        c->Q = pq, c->K = pk;
    }
    return AG_OK;
}

/* The score of edge j -> i, slot s, head h (before normalisation). */
static inline float score_edge(const sctx_t *c, int64_t i, int64_t j, int64_t s, int64_t h)
{
    const int64_t H = c->H, d = c->d, HD = H * d;
    const float *q = c->Q + i * HD + h * d, *k = c->K + j * HD + h * d;
    float x;
    switch (c->sc.kind) {
    case AG_SCORE_COSINE: {
        const float n = c->norm_q[i * H + h] * c->norm_k[j * H + h];
        x = n > 0 ? dot(q, k, d) / n : 0.0f;
        break;
    }
    case AG_SCORE_ADDITIVE:
        x = leaky(c->e_dst[i * H + h] + c->e_src[j * H + h], c->sc.slope);
        break;
    case AG_SCORE_GATV2: {
        const float *a = c->sc.a_src + h * d;
        x = 0;
        for (int64_t t = 0; t < d; t++)
            x += a[t] * leaky(q[t] + k[t], c->sc.slope);
        break;
    }
    default:
        x = dot(q, k, d) * c->scale;
    }
    if (c->sc.kind == AG_SCORE_LINEAR)
        return x;
    if (ag_i_is_softmax(c->sc.kind)) {
        x *= c->sc.beta;
        if (c->sc.softcap > 0)
            x = c->sc.softcap * tanhf(x / c->sc.softcap);
    }
    if (c->sc.edge_bias)
        x += c->sc.edge_bias[s];
    return x + c->alibi[h] * (float)(j - i);
}

/* Scores of i's slots into W[slot * H + h] (slots counted from i's first). */
static void score_row(const sctx_t *c, const ag_nbhd_t *nb, int64_t i, float *W)
{
    int64_t slot = 0, s0 = nb->edge_ptr[i];
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++, slot++)
            for (int64_t h = 0; h < c->H; h++)
                W[slot * c->H + h] = score_edge(c, i, j, s0 + slot, h);
}

/* -sum a ln a and the largest a over `deg` weights of head h (weights that
   are not a softmax: sigmoid, linear). */
static void direct_figures(const kext_t *x, int64_t i, int64_t h, int64_t H, const float *W,
                           int64_t deg)
{
    float ent = 0, top = 0;
    for (int64_t e = 0; e < deg; e++) {
        const float a = W[e * H + h];
        if (a > 0)
            ent -= a * logf(a);
        top = fmaxf(top, a);
    }
    if (x->distance)
        x->distance[i * H + h] = deg ? 0.0f : NAN;   /* summed by the caller */
    if (x->entropy)
        x->entropy[i * H + h] = deg ? ent : NAN;
    if (x->max_weight)
        x->max_weight[i * H + h] = deg ? top : NAN;
}

/* Scores -> weights, in place, for the `deg` slots of destination i; with x
   asking for figures, also i's figures per head (kernel.h: a softmax's come
   from its max and sum, with u = sum p (s - max)). */
static void normalise_row(const sctx_t *c, float *W, int64_t i, int64_t deg, const kext_t *x)
{
    const int64_t H = c->H;
    const int stats = kext_stats(x);
    for (int64_t h = 0; h < H; h++) {
        if (c->sc.kind == AG_SCORE_SIGMOID) {
            const float b = c->sc.has_sigmoid_bias ? c->sc.sigmoid_bias : -logf((float)deg);
            for (int64_t e = 0; e < deg; e++)
                W[e * H + h] = 1.0f / (1.0f + expf(-(W[e * H + h] + b)));
            if (stats)
                direct_figures(x, i, h, H, W, deg);
            continue;
        }
        if (c->sc.kind == AG_SCORE_LINEAR) {
            float sum = 0;
            for (int64_t e = 0; e < deg; e++)
                sum += W[e * H + h];
            for (int64_t e = 0; e < deg; e++)
                W[e * H + h] = sum > 0 ? W[e * H + h] / sum : 0.0f;
            if (stats)
                direct_figures(x, i, h, H, W, deg);
            continue;
        }
        float mx = -INFINITY, sum = 0, u = 0;
        for (int64_t e = 0; e < deg; e++)
            mx = fmaxf(mx, W[e * H + h]);
        for (int64_t e = 0; e < deg; e++) {
            const float y = W[e * H + h] - mx, p = exp_or_zero(y);
            sum += (W[e * H + h] = p);
            u += p * y;
        }
        for (int64_t e = 0; e < deg; e++)
            W[e * H + h] /= sum;
        if (stats)
            kext_put(x, i, h, H, sum, u, 0.0f, 1.0f);   /* the distance: by the caller */
    }
}

static int64_t max_in_degree(const ag_nbhd_t *nb)
{
    int64_t m = 0;
    for (int64_t i = 0; i < nb->n_nodes; i++)
        if (nb->edge_ptr[i + 1] - nb->edge_ptr[i] > m)
            m = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
    return m;
}

/* A context and per-thread buffers of the largest in-degree x H floats. */
static int generic_begin(sctx_t *c, scratch_t *buf, const ag_score_t *score,
                         const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                         int64_t d, ag_error_t *err)
{
    int rc = ag_score_check(score, nb, H, d, err);
    if (rc || (rc = sctx_init(c, score, nb, Q, K, H, d, err)))
        return rc;
    buf->stride = scratch_stride(max_in_degree(nb) * H);
    buf->buf = ag_alloc((int64_t)max_threads() * buf->stride, sizeof(float), err,
                        "attention buffer");
    if (!buf->buf) {
        free(c->owned);
        return AG_ENOMEM;
    }
    return AG_OK;
}

static void generic_end(sctx_t *c, scratch_t *buf)
{
    free(c->owned);
    free(buf->buf);
}

int ag_i_attention_generic(const ag_nbhd_t *nb, const float *Q, const float *K,
                           const float *V, int64_t H, int64_t d, const ag_score_t *score,
                           float *M, kext_t *xp, ag_error_t *err)
{
    int rc;
    sctx_t c;
    scratch_t buf;
    if ((rc = generic_begin(&c, &buf, score, nb, Q, K, H, d, err)))
        return rc;
    const int64_t HD = H * d;
#pragma omp parallel for if (nb->n_edges * HD >= AG_PARALLEL_MIN_WORK) schedule(dynamic, 16)
    for (int64_t i = 0; i < nb->n_nodes; i++) {
        float *W = scratch_mine(&buf), *m_i = M + i * HD;
        score_row(&c, nb, i, W);
        normalise_row(&c, W, i, nb->edge_ptr[i + 1] - nb->edge_ptr[i], xp);
        memset(m_i, 0, (size_t)HD * sizeof *m_i);
        int64_t slot = 0;
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
            for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++, slot++)
                for (int64_t h = 0; h < H; h++) {
                    const float a = W[slot * H + h], *v = V + j * HD + h * d;
                    float *acc = m_i + h * d;
#pragma omp simd
                    for (int64_t k = 0; k < d; k++)
                        acc[k] += a * v[k];
                    if (kext_distance(xp))   /* normalise_row left 0 (or NAN) */
                        xp->distance[i * H + h] += a * (float)(i > j ? i - j : j - i);
                }
        kext_done(xp, (nb->edge_ptr[i + 1] - nb->edge_ptr[i]) * H);
    }
    generic_end(&c, &buf);
    return AG_OK;
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
    sctx_t c;
    if ((rc = sctx_init(&c, score, nb, Q, K, H, d, err)))
        return rc;
    const int64_t base = nb->edge_ptr[lo];
#pragma omp parallel for if ((nb->edge_ptr[hi] - base) * H * d >= AG_PARALLEL_MIN_WORK) schedule(dynamic, 16)
    for (int64_t i = lo; i < hi; i++) {
        float *W_i = W + (nb->edge_ptr[i] - base) * H;
        score_row(&c, nb, i, W_i);
        normalise_row(&c, W_i, i, nb->edge_ptr[i + 1] - nb->edge_ptr[i], NULL);
    }
    free(c.owned);
    return AG_OK;
}

int ag_attention_stats(const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                       int64_t d, const ag_score_t *score, double *entropy, double *distance,
                       double *max_weight, ag_error_t *err)
{
    sctx_t c;
    scratch_t buf;
    int rc = generic_begin(&c, &buf, score, nb, Q, K, H, d, err);
    if (rc)
        return rc;
#pragma omp parallel for if (nb->n_edges * H * d >= AG_PARALLEL_MIN_WORK) schedule(dynamic, 16)
    for (int64_t i = 0; i < nb->n_nodes; i++) {
        const int64_t deg = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
        double ent = NAN, dist = NAN, top = NAN;
        if (deg > 0) {
            float *W = scratch_mine(&buf);
            score_row(&c, nb, i, W);
            normalise_row(&c, W, i, deg, NULL);
            ent = dist = top = 0;
            int64_t slot = 0;
            for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
                for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++, slot++)
                    for (int64_t h = 0; h < H; h++) {
                        const double a = W[slot * H + h];
                        if (a > 0)
                            ent -= a * log(a);
                        dist += a * (double)(i > j ? i - j : j - i);
                        top = fmax(top, a);
                    }
            ent /= (double)H, dist /= (double)H;
        }
        if (entropy)
            entropy[i] = ent;
        if (distance)
            distance[i] = dist;
        if (max_weight)
            max_weight[i] = top;
    }
    generic_end(&c, &buf);
    return AG_OK;
}

int ag_i_backward_generic(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                          int64_t H, int64_t d, const ag_score_t *score, const float *dM,
                          const ag_attention_grads_t *g, ag_error_t *err)
{
    (void)nb, (void)Q, (void)K, (void)V, (void)H, (void)d, (void)score, (void)dM, (void)g;
    return ag_fail(err, AG_EINVAL, "attention backward: not yet for this score");
}
