/*
 * Score functions and the generic attention path.
 *
 * For destination i, head h and in-edge j -> i (slot s):
 *   raw score   scaled-dot q.k/sqrt(d) | dot q.k | cosine cos(q,k)
 *               | additive LeakyReLU(a_dst.q_i + a_src.k_j [+ edge_pre[s, h]])
 *               | gatv2 a.LeakyReLU(q_i + k_j)
 *               | sigmoid q.k/sqrt(d) | linear phi(q).phi(k), phi(x) = elu(x) + 1
 *   softmax kinds: s <- beta * s, then softcap C: s <- C tanh(s / C)
 *   all but linear: s <- s + edge_bias[slot] + alibi_h * (j - i)
 *   weights     softmax over i's in-edges | sigmoid(s + b_i), b_i = -ln(in-degree)
 *               | linear: s / sum of s over i's in-edges
 *   dropout     a <- a z, z = 0 or 1/(1-p) by a hash of (seed, i, j, occurrence, head)
 *
 * The generic path scores a destination's edges into a per-thread buffer,
 * normalises them, then accumulates V: two passes over the edges. Its softmax
 * kinds without per-message terms or softcap run those rows on vectors,
 * per instruction set (score_rows.c); this file keeps the per-node terms, the
 * states and the chain rule through the terms for them, and the scalar rows
 * for the rest. Plain
 * dot-product softmax goes to the fused kernels instead (dispatch.c picks the
 * tiled or the gather kernel). Its backward (below) keeps no memory per edge
 * either: per destination, the normalisers and D (3 x N x H floats), from
 * which the pass over sources computes every message's weight again.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "kernels/isa.h"
#include "kernels/score_rows.h"

int ag_i_is_softmax(ag_score_kind_t kind)
{
    return kind != AG_SCORE_SIGMOID && kind != AG_SCORE_LINEAR;
}

/* ---- scoring context: per-node precomputations, made before the parallel region ---- */

typedef struct {
    ag_score_t sc;            /* the caller's, or AG_SCORE_INIT */
    int64_t H, d;
    float scale;              /* multiplier of q.k */
    const float *Q, *K;       /* what dot products read (phi(Q), phi(K) for linear) */
    float *owned;             /* the terms' allocation without a plan, or NULL */
    float *e_src, *e_dst;     /* additive: a_src.k_j and a_dst.q_i [N, H] */
    float *norm_q, *norm_k;   /* cosine: |q_i|, |k_j| per head [N, H] */
    float *g_dst, *g_src;     /* gatv2: a'.q_i and a'.k_j [N, H] (see raw_score) */
    float *a_abs, *a_lin;     /* gatv2: a'' and a' [H*d] */
    float *alibi;             /* [H] */
    ag_i_drop_t drop;         /* attention dropout's draws (score_rows.h) */
    int vec;                  /* do the rows run on vectors (score_rows.c: vector_rows)? */
    srow_t row;               /* what they read */
} sctx_t;

/* Do the vector rows (score_rows.c) run this score: softmax, with nothing
   of a message's own (edge bias or terms) and no softcap? */
static int vector_rows(const ag_score_t *sc)
{
    return ag_i_is_softmax(sc->kind) && sc->softcap == 0 && !sc->edge_bias && !sc->edge_pre &&
           !sc->edge_key && !sc->edge_value;
}

/* Linear's feature map phi(x) = elu(x) + 1 (x + 1 above 0, e^x below) or,
   with slope, its derivative (1 above 0, e^x below) times g, over n floats,
   8 at a time (expf one float at a time made linear scores 0.89-0.93x the
   one-pass kernel's speed on a random graph, AMD EPYC Milan). The last
   floats go through a padded vector: every float the same operations. */
static void phi_floats(float *out, const float *x, int64_t n, int slope)
{
    for (int64_t t = 0; t < n; t += 8) {
        const int64_t k = n - t < 8 ? n - t : 8;
        float xs[8] = {0}, os[8] = {0};
        const float *xp = x + t;
        float *op = out + t;
        if (k < 8) {
            memcpy(xs, xp, (size_t)k * sizeof(float));
            memcpy(os, op, (size_t)k * sizeof(float));
            xp = xs, op = os;
        }
        const v8f v = v8_load(xp), e = v8_exp_nonpos(v);
        const v8i above = v > v8_set1(0.0f);
        v8_store(op, slope ? v8_load(op) * v8_select(above, v8_set1(1.0f), e)
                           : v8_select(above, v + v8_set1(1.0f), e));
        if (k < 8)
            memcpy(out + t, os, (size_t)k * sizeof(float));
    }
}

static float leaky(float x, float slope)
{
    return x > 0 ? x : slope * x;
}

/* LeakyReLU's derivative. */
static float leaky_slope(float x, float slope)
{
    return x > 0 ? 1.0f : slope;
}

/* pos where x > 0, else neg. The per-channel loops of gatv2's backward are written
   (by_sign(u, c, c slope) * a) * u, selecting between values computed before
   the loop: gcc does not vectorise x > 0 ? x : slope * x (under trapping math
   it will not compute slope * x speculatively) and keeps a branch that is
   mispredicted half the time, 4x slower. */
static inline float by_sign(float x, float pos, float neg)
{
    return x > 0 ? pos : neg;
}

/*
 * The rows a call reads: queries of destinations [qlo, qhi) and keys of
 * sources [klo, khi), indexed by global node. The whole graph reads 0..N
 * of both; a process of the MPI layer its own destinations and the window
 * of sources it holds. Per-node terms are made for those rows only, each
 * as the whole graph's call makes it, so the bits do not depend on the rows.
 */
typedef struct {
    int64_t qlo, qhi, klo, khi;
} rows_t;

static rows_t all_rows(const ag_nbhd_t *nb)
{
    return (rows_t){0, nb->n_nodes, 0, nb->n_nodes};
}

/* out[i * H + h] for rows lo..hi-1 of X [.., H*d]: vec's head h . x_ih, or
   |x_ih| without vec (each array indexed by global node). */
static void head_terms(float *out, const float *X, const float *vec, int64_t lo, int64_t hi,
                       int64_t H, int64_t d)
{
    const int64_t HD = H * d;
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if ((hi - lo) * HD >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = lo; i < hi; i++)
        for (int64_t h = 0; h < H; h++) {
            const float *x = X + i * HD + h * d;
            out[i * H + h] = vec ? ag_i_dot(vec + h * d, x, d) : sqrtf(ag_i_dot(x, x, d));
        }
}

/* The floats of the per-node terms of a score kind for the rows given. */
static int64_t terms_need(ag_score_kind_t kind, rows_t rows, int64_t H, int64_t d)
{
    const int64_t nq = rows.qhi - rows.qlo, nk = rows.khi - rows.klo;
    int64_t need = H;                                       /* alibi */
    if (kind == AG_SCORE_ADDITIVE || kind == AG_SCORE_COSINE || kind == AG_SCORE_GATV2)
        need += (nq + nk) * H;
    if (kind == AG_SCORE_GATV2)
        need += 2 * H * d;
    if (kind == AG_SCORE_LINEAR)
        need += (nq + nk) * H * d;
    return need;
}

static ag_score_kind_t kind_of(const ag_score_t *score)
{
    return score ? score->kind : AG_SCORE_SCALED_DOT;
}

/* The stream of rng_seed(dropout_seed, .) that attention dropout draws from. */
#define DROPOUT_STREAM 0x61747464726f70ull   /* "attdrop" */

/* The context of a score for the rows given, its per-node terms made in
   `terms` (terms_need floats). */
static void sctx_init(sctx_t *c, const ag_score_t *score, rows_t rows, const float *Q,
                      const float *K, int64_t H, int64_t d, float *terms)
{
    memset(c, 0, sizeof *c);
    c->sc = score ? *score : (ag_score_t)AG_SCORE_INIT;
    c->H = H, c->d = d, c->Q = Q, c->K = K;
    const ag_score_kind_t kind = c->sc.kind;
    c->scale = kind == AG_SCORE_DOT || kind == AG_SCORE_LINEAR || kind == AG_SCORE_COSINE
                   ? 1.0f : 1.0f / sqrtf((float)d);
    c->drop.scale = 1.0f;
    if (c->sc.dropout > 0) {   /* p 2^64 < 2^64: p <= 1 - 2^-24 */
        c->drop.state = rng_seed(c->sc.dropout_seed, DROPOUT_STREAM);
        c->drop.below = (uint64_t)((double)c->sc.dropout * 18446744073709551616.0);
        c->drop.scale = 1.0f / (1.0f - c->sc.dropout);
    }
    const int64_t HD = H * d, qlo = rows.qlo, klo = rows.klo;
    const int64_t nq = rows.qhi - qlo, nk = rows.khi - klo;
    (void)nk;   /* read by the pragmas only */
    c->alibi = terms;
    for (int64_t h = 0; h < H; h++)   /* ALiBi's geometric slopes, 2^(-8(h+1)/H) */
        c->alibi[h] = c->sc.alibi ? exp2f(-8.0f * (float)(h + 1) / (float)H) : 0.0f;
    /* per-query terms [nq, H] (or [nq, HD]) then per-key terms, each array
       addressed by global node through a pointer moved back by its first row */
    float *more = terms + H;
    float *at_q = more - qlo * H, *at_k = more + nq * H - klo * H;
    if (kind == AG_SCORE_ADDITIVE) {
        head_terms(at_q, Q, c->sc.a_dst, qlo, rows.qhi, H, d);
        head_terms(at_k, K, c->sc.a_src, klo, rows.khi, H, d);
        c->e_src = at_k, c->e_dst = at_q;
    }
    if (kind == AG_SCORE_COSINE) {
        head_terms(at_q, Q, NULL, qlo, rows.qhi, H, d);
        head_terms(at_k, K, NULL, klo, rows.khi, H, d);
        c->norm_q = at_q, c->norm_k = at_k;
    }
    if (kind == AG_SCORE_GATV2) {   /* a' = a (1 + slope)/2, a'' = a (1 - slope)/2 */
        float *a1 = more + (nq + nk) * H, *a2 = a1 + HD;
        for (int64_t t = 0; t < HD; t++) {
            a1[t] = c->sc.a_src[t] * (0.5f + 0.5f * c->sc.slope);
            a2[t] = c->sc.a_src[t] * (0.5f - 0.5f * c->sc.slope);
        }
        head_terms(at_q, Q, a1, qlo, rows.qhi, H, d);
        head_terms(at_k, K, a1, klo, rows.khi, H, d);
        c->g_dst = at_q, c->g_src = at_k, c->a_abs = a2, c->a_lin = a1;
    }
    if (kind == AG_SCORE_LINEAR) {
        float *pq = more - qlo * HD, *pk = more + nq * HD - klo * HD;
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (nq * HD >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t i = qlo; i < rows.qhi; i++)
            phi_floats(pq + i * HD, Q + i * HD, HD, 0);
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (nk * HD >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t j = klo; j < rows.khi; j++)
            phi_floats(pk + j * HD, K + j * HD, HD, 0);
        c->Q = pq, c->K = pk;
    }
    c->vec = vector_rows(&c->sc);
    c->row = (srow_t){kind, H, d, c->sc.beta, c->scale, c->sc.slope, c->Q, c->K,
                      c->e_dst ? c->e_dst : c->g_dst ? c->g_dst : c->norm_q,
                      c->e_src ? c->e_src : c->g_src ? c->g_src : c->norm_k,
                      c->sc.a_src, c->a_abs, c->sc.alibi ? c->alibi : NULL, c->drop};
}

/* sctx_init with terms of its own (c->owned; ag_attention_weights and
   ag_attention_stats, which run without a plan). */
static int sctx_alloc(sctx_t *c, const ag_score_t *score, rows_t rows, const float *Q,
                      const float *K, int64_t H, int64_t d, ag_error_t *err)
{
    float *terms = ag_alloc(terms_need(kind_of(score), rows, H, d), sizeof(float), err,
                            "score");
    if (!terms)
        return ag_alloc_status();
    sctx_init(c, score, rows, Q, K, H, d, terms);
    c->owned = terms;
    return AG_OK;
}

/*
 * Dropout's masks are hashes of the message itself: (seed, destination i,
 * source j, its occurrence nth among the messages j -> i, head h). Slots
 * will not do: the MPI layer's backward views number them differently, and
 * hold only some of a destination's messages. So any process count, as any
 * thread count, draws the same (score_rows.h: ag_i_drop_key).
 */

/* Destination i's weights W [its slots, H] times their dropout factors. */
static void drop_row(const sctx_t *c, const ag_nbhd_t *nb, float *W, int64_t i)
{
    if (!c->drop.below)
        return;
    int64_t e = 0;
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++, e++) {
            const uint64_t key = ag_i_drop_key(&c->drop, i, j, ag_i_occurrence(nb, i, r, j));
            for (int64_t h = 0; h < c->H; h++)
                W[e * c->H + h] *= ag_i_drop_factor(&c->drop, key, h);
        }
}

/* Is the raw score a function of q_i.k_j (all kinds but the GAT ones)? */
static inline int raw_is_dot(const sctx_t *c)
{
    return c->sc.kind != AG_SCORE_ADDITIVE && c->sc.kind != AG_SCORE_GATV2;
}

/* The raw score of edge j -> i, head h from qk = q_i.k_j (raw_is_dot kinds). */
static inline float raw_of_dot(const sctx_t *c, int64_t i, int64_t j, int64_t h, float qk)
{
    if (c->sc.kind == AG_SCORE_COSINE) {
        const float n = c->norm_q[i * c->H + h] * c->norm_k[j * c->H + h];
        return n > 0 ? qk / n : 0.0f;
    }
    return qk * c->scale;
}

/* What additive's LeakyReLU takes for edge j -> i in slot s, head h:
   a_dst.q_i + a_src.k_j, plus the edge's own term where the score has one. */
static inline float gat_sum(const sctx_t *c, int64_t i, int64_t j, int64_t s, int64_t h)
{
    const int64_t H = c->H;
    const float u = c->e_dst[i * H + h] + c->e_src[j * H + h];
    return c->sc.edge_pre ? u + c->sc.edge_pre[s * H + h] : u;
}

/* Head h of the message in slot s's own key and value terms (each NULL where
   the score has none): the message's key is k_j + that, its value v_j + that. */
static inline const float *edge_key(const sctx_t *c, int64_t s, int64_t h)
{
    return c->sc.edge_key ? c->sc.edge_key + (s * c->H + h) * c->d : NULL;
}

static inline const float *edge_value(const sctx_t *c, int64_t s, int64_t h)
{
    return c->sc.edge_value ? c->sc.edge_value + (s * c->H + h) * c->d : NULL;
}

/* gatv2's a''.|q + k + ek| and a'.ek (ek: the message's key term). */
static inline float gatv2_edge(const sctx_t *c, const float *q, const float *k, const float *ek,
                               int64_t h)
{
    const int64_t d = c->d;
    const float *a = c->a_abs + h * d, *a1 = c->a_lin + h * d;
    float x = 0;
#pragma omp simd reduction(+ : x)
    for (int64_t t = 0; t < d; t++)
        x += a[t] * fabsf(q[t] + k[t] + ek[t]) + a1[t] * ek[t];
    return x;
}

/* x's 8 lanes added in order. */
AG_INLINE float lanes_sum8(v8f x)
{
    float s = 0;
    for (int t = 0; t < 8; t++)
        s += x[t];
    return s;
}

/*
 * The sums over channels of the scores that have one (every kind but
 * additive: q.k, or gatv2's a''.|q + k|), for n = 1 or 4 sources whose rows
 * lie HD apart from k, when d is a multiple of 8: each source's sum in 8
 * lanes, then its lanes in order, so one source alone and four together give
 * the same bits (raw_score, which the backward runs, takes them one at a
 * time). Four at once are four independent chains: one source's chain waited
 * on its own adds at every step (gatv2 ran at the one-pass kernel's speed).
 * 8 lanes: four sums and the query fit the baseline's 16 registers.
 */
AG_INLINE void channel_sums(const float *q, const float *a, const float *k, int64_t HD,
                            int64_t d, float *out, const int n, const int gatv2)
{
    v8f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    const v8i no_sign = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff,
                         0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
    for (int64_t t = 0; t < d; t += 8) {
        const v8f x = v8_load(q + t), w = gatv2 ? v8_load(a + t) : x;
#define TERM(r)                                                                             \
    (gatv2 ? w * (v8f)((v8i)(x + v8_load(k + (r) * HD + t)) & no_sign)                      \
           : x * v8_load(k + (r) * HD + t))
        s0 += TERM(0);
        if (n == 4)
            s1 += TERM(1), s2 += TERM(2), s3 += TERM(3);
#undef TERM
    }
    out[0] = lanes_sum8(s0);
    if (n == 4)
        out[1] = lanes_sum8(s1), out[2] = lanes_sum8(s2), out[3] = lanes_sum8(s3);
}

/* a.b over d channels (a multiple of 8): channel_sums' dot product of one row. */
AG_INLINE float dot8(const float *a, const float *b, int64_t d)
{
    float s;
    channel_sums(a, NULL, b, 0, d, &s, 1, 0);
    return s;
}

/* q.k and g.v in one loop (two chains, not one), each as dot8 takes it: the
   same lanes, the same order. */
AG_INLINE void dot8_pair(const float *q, const float *k, const float *g, const float *v,
                         int64_t d, float *qk, float *gv)
{
    v8f x = {0}, y = {0};
    for (int64_t t = 0; t < d; t += 8) {
        x += v8_load(q + t) * v8_load(k + t);
        y += v8_load(g + t) * v8_load(v + t);
    }
    *qk = lanes_sum8(x), *gv = lanes_sum8(y);
}

/* Does kind's raw score of destination i take channel_sums (no key terms of
   its own, d a multiple of 8)? */
AG_INLINE int by_channel_sums(const sctx_t *c, ag_score_kind_t kind)
{
    return kind != AG_SCORE_ADDITIVE && !c->sc.edge_key && c->d % 8 == 0;
}

/* The raw scores of the n (1 or 4) sources j.. of destination i, head h,
   from channel_sums (by_channel_sums holds). */
AG_INLINE void raw_scores_by_sums(const sctx_t *c, ag_score_kind_t kind, int64_t i, int64_t j,
                                  int64_t h, float *out, const int n)
{
    const int64_t H = c->H, d = c->d, HD = H * d;
    const float *q = c->Q + i * HD + h * d, *k = c->K + j * HD + h * d;
    if (kind == AG_SCORE_GATV2) {
        channel_sums(q, c->a_abs + h * d, k, HD, d, out, n, 1);
        for (int e = 0; e < n; e++)
            out[e] = c->g_dst[i * H + h] + c->g_src[(j + e) * H + h] + out[e];
    } else {
        channel_sums(q, NULL, k, HD, d, out, n, 0);
        for (int e = 0; e < n; e++)
            out[e] = raw_of_dot(c, i, j + e, h, out[e]);
    }
}

/* The raw score r of edge j -> i (slot s), head h: the kind's formula alone
   (before beta, softcap, edge bias and ALiBi). kind is c->sc.kind, passed apart so
   that a caller's loop over edges is compiled once per kind (score_row).
   gatv2's sum a.leaky(u), u = q_i + k_j, is taken as a'.q_i + a'.k_j +
   a''.|u| (leaky(u) = (1 + slope)/2 u + (1 - slope)/2 |u| for any slope):
   the first two terms are per node, and the last is three operations per
   channel where the select of leaky's two branches took six. */
AG_INLINE float raw_score_of(const sctx_t *c, ag_score_kind_t kind, int64_t i, int64_t j,
                             int64_t s, int64_t h)
{
    const int64_t H = c->H, d = c->d, HD = H * d;
    const float *q = c->Q + i * HD + h * d, *k = c->K + j * HD + h * d;
    if (by_channel_sums(c, kind)) {
        float r;
        raw_scores_by_sums(c, kind, i, j, h, &r, 1);
        return r;
    }
    switch (kind) {
    case AG_SCORE_ADDITIVE:
        return leaky(gat_sum(c, i, j, s, h), c->sc.slope);
    case AG_SCORE_GATV2: {
        const float *a = c->a_abs + h * d, *ek = edge_key(c, s, h);
        float x = 0;
        if (ek)
            x = gatv2_edge(c, q, k, ek, h);
        else
#pragma omp simd reduction(+ : x)
            for (int64_t t = 0; t < d; t++)
                x += a[t] * fabsf(q[t] + k[t]);
        return c->g_dst[i * H + h] + c->g_src[j * H + h] + x;
    }
    default: {
        const float *ek = edge_key(c, s, h);
        return raw_of_dot(c, i, j, h, ek ? ag_i_dot(q, k, d) + ag_i_dot(q, ek, d)
                                         : ag_i_dot(q, k, d));
    }
    }
}

static inline float raw_score(const sctx_t *c, int64_t i, int64_t j, int64_t s, int64_t h)
{
    return raw_score_of(c, c->sc.kind, i, j, s, h);
}

/* The score of edge j -> i, slot s, head h from its raw score r (before
   normalisation). */
static inline float finish_score(const sctx_t *c, float r, int64_t i, int64_t j, int64_t s,
                                 int64_t h)
{
    float x = r;
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

/* Scores of i's slots into W[slot * H + h] (slots counted from i's first),
   for scores of the given kind. */
AG_INLINE void score_row_of(const sctx_t *c, ag_score_kind_t kind, const ag_nbhd_t *nb,
                            int64_t i, float *W)
{
    const int64_t H = c->H;
    const int quad = by_channel_sums(c, kind);
    int64_t slot = 0, s0 = nb->edge_ptr[i];
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++) {
        const int64_t end = nb->run_src[r] + nb->run_len[r];
        int64_t j = nb->run_src[r];
        for (; quad && j + 4 <= end; j += 4, slot += 4)   /* four sources at once */
            for (int64_t h = 0; h < H; h++) {
                float x[4];
                raw_scores_by_sums(c, kind, i, j, h, x, 4);
                for (int e = 0; e < 4; e++) {
                    const int64_t s = s0 + slot + e;
                    W[(slot + e) * H + h] = finish_score(c, x[e], i, j + e, s, h);
                }
            }
        for (; j < end; j++, slot++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t s = s0 + slot;
                W[slot * H + h] = finish_score(c, raw_score_of(c, kind, i, j, s, h), i, j, s, h);
            }
    }
}

/* score_row_of, its loop compiled once per kind (the kind's formula inlined). */
static void score_row(const sctx_t *c, const ag_nbhd_t *nb, int64_t i, float *W)
{
    switch (c->sc.kind) {
    case AG_SCORE_ADDITIVE:
        score_row_of(c, AG_SCORE_ADDITIVE, nb, i, W);
        break;
    case AG_SCORE_GATV2:
        score_row_of(c, AG_SCORE_GATV2, nb, i, W);
        break;
    case AG_SCORE_COSINE:
        score_row_of(c, AG_SCORE_COSINE, nb, i, W);
        break;
    default:   /* dot, scaled-dot, sigmoid, linear: q.k times a scale */
        score_row_of(c, AG_SCORE_DOT, nb, i, W);
    }
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

/* What normalise_row keeps of destination i, head h for the backward
   (st: [H, ST_N] per destination): softmax: the max score and the sum of
   exp(x - max); sigmoid: the bias b_i (in ST_SHIFT); linear: the sum of the
   scores; and D = sum_e a_e dA_e (weights_backward). */
enum { ST_SHIFT, ST_SUM, ST_D, ST_N };
_Static_assert(ST_N == AG_I_GENERIC_STATE, "kernels.h's count of a destination's state");

/* Scores -> weights, in place, for the `deg` slots of destination i; with x
   asking for figures, also i's figures per head (kernels.h: a softmax's come
   from its max and sum, with u = sum p (s - max)); with st, i's normalisers
   (ST_SHIFT, ST_SUM), from which weight_of gives each weight again. */
static void normalise_row(const sctx_t *c, float *W, int64_t i, int64_t deg, const kext_t *x,
                          float *st)
{
    const int64_t H = c->H;
    const int stats = kext_stats(x);
    for (int64_t h = 0; h < H; h++) {
        if (c->sc.kind == AG_SCORE_SIGMOID) {
            const float b = c->sc.has_sigmoid_bias ? c->sc.sigmoid_bias : -logf((float)deg);
            for (int64_t e = 0; e < deg; e++)
                W[e * H + h] = 1.0f / (1.0f + expf(-(W[e * H + h] + b)));
            if (st)
                st[h * ST_N + ST_SHIFT] = b;
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
            if (st)
                st[h * ST_N + ST_SUM] = sum;
            if (stats)
                direct_figures(x, i, h, H, W, deg);
            continue;
        }
        float mx = -INFINITY, sum = 0, u = 0;
        for (int64_t e = 0; e < deg; e++)
            mx = fmaxf(mx, W[e * H + h]);
        for (int64_t e = 0; e < deg; e++) {
            const float y = W[e * H + h] - mx, p = ag_i_exp_or_zero(y);
            sum += (W[e * H + h] = p);
            u += p * y;
        }
        for (int64_t e = 0; e < deg; e++)
            W[e * H + h] /= sum;
        if (st)
            st[h * ST_N + ST_SHIFT] = mx, st[h * ST_N + ST_SUM] = sum;
        kext_lse(x, i, h, H, mx, sum, 1.0f);
        if (stats)
            kext_put(x, i, h, H, sum, u, 0.0f, 1.0f);   /* the distance: by the caller */
    }
}

/* The weight of score x from its destination's normalisers (st: one head's
   [ST_N]): normalise_row's arithmetic, so the same bits. */
static inline float weight_of(const sctx_t *c, float x, const float *st)
{
    switch (c->sc.kind) {
    case AG_SCORE_SIGMOID:
        return 1.0f / (1.0f + expf(-(x + st[ST_SHIFT])));
    case AG_SCORE_LINEAR:
        return st[ST_SUM] > 0 ? x / st[ST_SUM] : 0.0f;
    default:
        return ag_i_exp_or_zero(x - st[ST_SHIFT]) / st[ST_SUM];
    }
}

static int64_t max_in_degree(const ag_nbhd_t *nb, int64_t lo, int64_t hi)
{
    int64_t m = 0;
    for (int64_t i = lo; i < hi; i++)
        if (nb->edge_ptr[i + 1] - nb->edge_ptr[i] > m)
            m = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
    return m;
}

/* A context for all rows and a buffer of the largest in-degree x H floats
   for each of `threads`, allocated (ag_attention_stats, which runs without a
   plan). */
static int stats_begin(sctx_t *c, ag_i_scratch_t *buf, int threads, const ag_score_t *score,
                       const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                       int64_t d, ag_error_t *err)
{
    int rc = sctx_alloc(c, score, all_rows(nb), Q, K, H, d, err);
    if (rc)
        return rc;
    buf->stride = ag_i_scratch_stride(max_in_degree(nb, 0, nb->n_nodes) * H);
    buf->buf = ag_alloc((int64_t)threads * buf->stride, sizeof(float), err,
                        "attention buffer");
    if (!buf->buf) {
        free(c->owned);
        return ag_alloc_status();
    }
    return AG_OK;
}

/* The rows at the head of each run of sources (or destinations) that the
   passes prefetch for the next node (prefetch_runs: the hardware follows the
   rest of a long run). */
#define RUN_HEAD 4

/* Channels c0 .. c0+B-1 of head h of row i of M: B accumulators in
   registers over all the edges (B = 32 keeps 8 of the baseline's 16 vector
   registers busy and reads half of a 64-channel row a pass). */
AG_INLINE void weighted_sum_block(const ag_nbhd_t *nb, int64_t i, const float *W, const float *V,
                                  int64_t H, int64_t d, int64_t h, int64_t c0, float *m_i,
                                  const int B)
{
    const int64_t HD = H * d;
    float acc[32] = {0};
    int64_t slot = 0;
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++, slot++) {
            const float a = W[slot * H + h], *v = V + j * HD + h * d + c0;
#pragma GCC unroll 32
            for (int k = 0; k < B; k++)
                acc[k] += a * v[k];
        }
    memcpy(m_i + h * d + c0, acc, (size_t)B * sizeof(float));
}

/* Row i of M [H*d]: the sum over i's slots of their weights W [slot, H]
   times the sources' rows of V. Where d is a multiple of 16, blocks of 32
   or 16 channels stay in registers over all the edges (weighted_sum_block),
   instead of a load and a store of M's row at every edge; each channel
   still adds the edges in their order, so the bits are the same either way. */
static void weighted_sum_row(const ag_nbhd_t *nb, int64_t i, const float *W, const float *V,
                             int64_t H, int64_t d, float *m_i)
{
    const int64_t HD = H * d;
    if (d % 16) {
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
                }
        return;
    }
    for (int64_t h = 0; h < H; h++) {
        int64_t c0 = 0;
        for (; c0 + 32 <= d; c0 += 32)
            weighted_sum_block(nb, i, W, V, H, d, h, c0, m_i, 32);
        if (c0 < d)
            weighted_sum_block(nb, i, W, V, H, d, h, c0, m_i, 16);
    }
}

/* m_i [H*d] += the sum over destination i's deg slots (from s0) of their
   weights W [slot, H] times the slots' own value terms. */
static void edge_values_row(const sctx_t *c, const float *W, int64_t s0, int64_t deg, float *m_i)
{
    const int64_t H = c->H, d = c->d;
    for (int64_t e = 0; e < deg; e++)
        for (int64_t h = 0; h < H; h++) {
            const float a = W[e * H + h], *ev = edge_value(c, s0 + e, h);
            float *acc = m_i + h * d;
#pragma omp simd
            for (int64_t t = 0; t < d; t++)
                acc[t] += a * ev[t];
        }
}

void ag_i_generic_forward(const ag_i_plan_t *p, const ag_i_fwd_t *a)
{
    const ag_nbhd_t *nb = a->nb;
    const float *V = a->V;
    const int64_t H = a->H, d = a->d, lo = p->lo, hi = p->hi;
    float *M = a->M;
    kext_t *xp = a->x;
    sctx_t c;
    sctx_init(&c, a->score, (rows_t){lo, hi, p->klo, p->khi}, a->Q, a->K, H, d, p->shared);
    const ag_i_scratch_t buf = {p->scratch, p->per_thread};
    const int64_t HD = H * d;
    /* the rows of K the scores read (GAT's read per-node terms only): those of
       the next destination are fetched while this one's are scored, as its V
       rows are; on a sparse graph they are random and each would stall */
    const float *K_read = c.sc.kind == AG_SCORE_ADDITIVE ? NULL : c.K;
#pragma omp parallel for num_threads(p->threads) \
    if ((nb->edge_ptr[hi] - nb->edge_ptr[lo]) * HD >= AG_PARALLEL_MIN_WORK) schedule(dynamic, 16)
    for (int64_t i = lo; i < hi; i++) {
        float *W = ag_i_scratch_mine(&buf), *m_i = M + i * HD;
        if (K_read && i + 1 < hi)
            prefetch_rows(nb, i + 1, K_read, HD, 0, HD, RUN_HEAD);
        if (c.row.t_src && i + 1 < hi)   /* the sources' per-node terms */
            prefetch_rows(nb, i + 1, c.row.t_src, H, 0, H, RUN_HEAD);
        prefetch_rows(nb, i, V, HD, 0, HD, RUN_HEAD);
        if (c.vec) {   /* the row on vectors (score_rows.c) */
            p->isa->srow_fwd(&c.row, nb, i, V, m_i, W, xp);
            kext_done(xp, (nb->edge_ptr[i + 1] - nb->edge_ptr[i]) * H);
            continue;
        }
        score_row(&c, nb, i, W);
        normalise_row(&c, W, i, nb->edge_ptr[i + 1] - nb->edge_ptr[i], xp, NULL);
        drop_row(&c, nb, W, i);
        weighted_sum_row(nb, i, W, V, H, d, m_i);
        if (c.sc.edge_value)
            edge_values_row(&c, W, nb->edge_ptr[i], nb->edge_ptr[i + 1] - nb->edge_ptr[i], m_i);
        if (kext_distance(xp)) {   /* normalise_row left 0 (or NAN) */
            int64_t slot = 0;
            for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
                for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++, slot++)
                    for (int64_t h = 0; h < H; h++)
                        xp->distance[i * H + h] += W[slot * H + h] * (float)(i > j ? i - j : j - i);
        }
        kext_done(xp, (nb->edge_ptr[i + 1] - nb->edge_ptr[i]) * H);
    }
}

int ag_i_generic_weights(const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                         int64_t d, const ag_score_t *score, int64_t lo, int64_t hi, float *W,
                         ag_error_t *err)
{
    sctx_t c;
    int rc = sctx_alloc(&c, score, all_rows(nb), Q, K, H, d, err);
    if (rc)
        return rc;
    const int64_t base = nb->edge_ptr[lo];
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if ((nb->edge_ptr[hi] - base) * H * d >= AG_PARALLEL_MIN_WORK) schedule(dynamic, 16)
    for (int64_t i = lo; i < hi; i++) {
        float *W_i = W + (nb->edge_ptr[i] - base) * H;
        score_row(&c, nb, i, W_i);
        normalise_row(&c, W_i, i, nb->edge_ptr[i + 1] - nb->edge_ptr[i], NULL, NULL);
        drop_row(&c, nb, W_i, i);
    }
    free(c.owned);
    return AG_OK;
}

int ag_i_generic_stats(const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                       int64_t d, const ag_score_t *score, double *entropy, double *distance,
                       double *max_weight, ag_error_t *err)
{
    sctx_t c;
    ag_i_scratch_t buf;
    const int threads = ag_i_max_threads();   /* read once: the buffers are per thread */
    int rc = stats_begin(&c, &buf, threads, score, nb, Q, K, H, d, err);
    if (rc)
        return rc;
#pragma omp parallel for num_threads(threads) if (nb->n_edges * H * d >= AG_PARALLEL_MIN_WORK) \
    schedule(dynamic, 16)
    for (int64_t i = 0; i < nb->n_nodes; i++) {
        const int64_t deg = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
        double ent = NAN, dist = NAN, top = NAN;
        if (deg > 0) {
            float *W = ag_i_scratch_mine(&buf);
            score_row(&c, nb, i, W);
            normalise_row(&c, W, i, deg, NULL, NULL);
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
    free(c.owned), free(buf.buf);
    return AG_OK;
}

/* ---- backward ----
 *
 * L = sum(dM * M). For destination i, head h and slot s (edge j -> i, raw
 * score r, score x, weight a):
 *   dA_s = z_s dM_i . v_j   (z_s: dropout's factor, 0 or 1/(1-p); 1 without dropout,
 *                            and dV_j gets a_s z_s dM_i)
 *   softmax  dx_s = a_s (dA_s - sum_e a_e dA_e)
 *   sigmoid  dx_s = dA_s a_s (1 - a_s)          (b_i is a constant)
 *   linear   dr_s = (dA_s - sum_e a_e dA_e) / sum_e r_e   (0 when the sum is <= 0)
 *   d_edge_bias[s] = sum_h dx_s; dr_s = dx_s beta (1 - tanh^2(beta r_s / C))
 * then dr flows into q_i and k_j through the raw score's formula.
 *
 * Pass 1 over destinations scores each destination's slots into per-thread
 * scratch (as the forward), writes dQ and d_edge_bias (a destination owns its
 * slots) and keeps, per destination and head, the normalisers (max and sum of
 * the softmax, sigmoid's b_i, linear's sum of scores) and D = sum_e a_e dA_e:
 * ST_N x N x H floats, nothing per edge. Pass 2 over sources walks the
 * out-runs and, per message j -> i, computes its score, weight a, dA and dr
 * again from those with pass 1's formulas (gcc gives the same bits), and
 * writes dK and dV. That costs pass 1's two dot products again per message
 * and saves an E x H buffer (on causal 65,536 nodes, 17 GB a head). Only a
 * score with an edge bias needs the message's slot (a binary search among i's
 * in-runs). The attention vectors' gradients are
 * sums over every edge: each fixed chunk of GRAD_CHUNK nodes sums its own
 * share, and the chunks are added in order, so no thread count changes a bit.
 */

#define GRAD_CHUNK AG_I_GENERIC_CHUNK   /* nodes a chunk: of the loops and of the vectors'
                                           partial sums */

typedef struct {
    sctx_t c;
    const float *Q, *K;       /* the caller's (c.Q, c.K are phi(Q), phi(K) for linear) */
    const float *V, *dM;
    float *state;             /* [N, H, ST_N] pass 1's normalisers and D per destination */
    ag_i_scratch_t buf;       /* per thread: weights, raw scores and dA of a destination's
                                 slots ([largest in-degree, H] each), then [H] */
    int threads;              /* the plan's team */
    int vec;                  /* the rows on vectors (sctx_t's vec, and no edge
                                 term's gradient asked) */
    const ag_i_isa_t *isa;
} bctx_t;

/* dL/dx (the score before the normalisation; linear: dL/dr) of a message
   with weight a and dA = dL/da, from its destination's st (one head's [ST_N]). */
static inline float score_grad(const sctx_t *c, float a, float dA, const float *st)
{
    switch (c->sc.kind) {
    case AG_SCORE_SIGMOID:   /* b_i is a constant */
        return dA * (a * (1.0f - a));
    case AG_SCORE_LINEAR:
        return st[ST_SUM] > 0 ? (dA - st[ST_D]) / st[ST_SUM] : 0.0f;
    default:
        return a * (dA - st[ST_D]);
    }
}

/* dA (dL/da of destination i's deg slots, weights A) -> dL/dx, in place;
   D = sum_e a_e dA_e into st (st's normalisers from normalise_row). */
static void weights_backward(const sctx_t *c, const float *A, float *dA, int64_t deg, float *st)
{
    const int64_t H = c->H;
    for (int64_t h = 0; h < H; h++) {
        float D = 0;
        if (c->sc.kind != AG_SCORE_SIGMOID)
            for (int64_t e = 0; e < deg; e++)
                D += A[e * H + h] * dA[e * H + h];
        st[h * ST_N + ST_D] = D;
        for (int64_t e = 0; e < deg; e++)
            dA[e * H + h] = score_grad(c, A[e * H + h], dA[e * H + h], st + h * ST_N);
    }
}

/* dL/dr from dL/dx for raw score r: beta's and softcap's chain rule (the
   edge bias and ALiBi only add). */
static inline float finish_backward(const sctx_t *c, float r, float dx)
{
    if (!ag_i_is_softmax(c->sc.kind))
        return dx;
    float g = dx * c->sc.beta;
    if (c->sc.softcap > 0) {
        const float t = tanhf(r * c->sc.beta / c->sc.softcap);
        g *= 1.0f - t * t;
    }
    return g;
}

/* dr (dL/dr) of edge j -> i (slot s), head h into dq [d] of head h;
   additive: into T, the sum of dL/dt over i's slots (returns dL/dt, the edge
   term's gradient too); gatv2: a's gradient into part [d]; the message's key
   term's gradient into dek [d] (NULL: not wanted). */
static inline float raw_backward_q(const sctx_t *c, int64_t i, int64_t j, int64_t s, int64_t h,
                                   float dr, float *dq, float *T, float *part, float *dek)
{
    const int64_t H = c->H, d = c->d, HD = H * d;
    const float *q = c->Q + i * HD + h * d, *k = c->K + j * HD + h * d;
    const float *ek = edge_key(c, s, h);
    switch (c->sc.kind) {
    case AG_SCORE_COSINE: {   /* d cos / dq = k / (|q||k|) - cos q / |q|^2: the first
                                 term here, the second once per row (raw_backward_row) */
        const float n = c->norm_q[i * H + h] * c->norm_k[j * H + h];
        if (n > 0) {
            const float u = dr / n;
#pragma omp simd
            for (int64_t t = 0; t < d; t++)
                dq[t] += u * k[t];
        }
        break;
    }
    case AG_SCORE_ADDITIVE: {
        const float dt = dr * leaky_slope(gat_sum(c, i, j, s, h), c->sc.slope);
        T[h] += dt;
        return dt;
    }
    case AG_SCORE_GATV2: {
        const float *a = c->sc.a_src + h * d, neg = dr * c->sc.slope;
        if (ek) {   /* u = q + k + ek; the key term's gradient is q's */
            for (int64_t t = 0; t < d; t++) {
                const float u = q[t] + k[t] + ek[t], du = by_sign(u, dr, neg) * a[t];
                if (part)
                    part[t] += by_sign(u, dr, neg) * u;
                dq[t] += du;
                if (dek)
                    dek[t] = du;
            }
            break;
        }
        if (part)
#pragma omp simd
            for (int64_t t = 0; t < d; t++) {
                const float u = q[t] + k[t];
                part[t] += by_sign(u, dr, neg) * u;
            }
#pragma omp simd
        for (int64_t t = 0; t < d; t++)
            dq[t] += by_sign(q[t] + k[t], dr, neg) * a[t];
        if (dek)
#pragma omp simd
            for (int64_t t = 0; t < d; t++)
                dek[t] = by_sign(q[t] + k[t], dr, neg) * a[t];
        break;
    }
    default:   /* dot products: times the scale (or phi') once per row */
#pragma omp simd
        for (int64_t t = 0; t < d; t++)
            dq[t] += dr * k[t];
        if (ek)
#pragma omp simd
            for (int64_t t = 0; t < d; t++)
                dq[t] += dr * ek[t];
        if (dek)   /* the row's scale now: the key term is the slot's alone */
#pragma omp simd
            for (int64_t t = 0; t < d; t++)
                dek[t] = dr * c->scale * q[t];
    }
    return 0.0f;
}

/* The same into dk [d] of head h for source j (T: additive's sum of dL/dt). */
static inline void raw_backward_k(const sctx_t *c, int64_t i, int64_t j, int64_t s, int64_t h,
                                  float dr, float *dk, float *T)
{
    const int64_t H = c->H, d = c->d, HD = H * d;
    const float *q = c->Q + i * HD + h * d, *k = c->K + j * HD + h * d;
    const float *ek = edge_key(c, s, h);
    switch (c->sc.kind) {
    case AG_SCORE_COSINE: {
        const float n = c->norm_q[i * H + h] * c->norm_k[j * H + h];
        if (n > 0) {
            const float u = dr / n;
#pragma omp simd
            for (int64_t t = 0; t < d; t++)
                dk[t] += u * q[t];
        }
        break;
    }
    case AG_SCORE_ADDITIVE:
        T[h] += dr * leaky_slope(gat_sum(c, i, j, s, h), c->sc.slope);
        break;
    case AG_SCORE_GATV2: {
        const float *a = c->sc.a_src + h * d, neg = dr * c->sc.slope;
        if (ek)
#pragma omp simd
            for (int64_t t = 0; t < d; t++)
                dk[t] += by_sign(q[t] + k[t] + ek[t], dr, neg) * a[t];
        else
#pragma omp simd
            for (int64_t t = 0; t < d; t++)
                dk[t] += by_sign(q[t] + k[t], dr, neg) * a[t];
        break;
    }
    default:
#pragma omp simd
        for (int64_t t = 0; t < d; t++)
            dk[t] += dr * q[t];
    }
}

/* A query's or key's gradient g [H*d] of node n after its edges (X: the
   caller's Q or K, x its row): the dot products' scale; linear's phi'(x);
   additive's T[h] times its vector (vec: a_dst or a_src) and that vector's
   share T[h] x into part; cosine's second term. With g = sum over edges of
   dr / (|q||k|) times the other side's row, that term, -sum dr cos x / |x|^2,
   is -(x.g) x / |x|^2 (dr cos = dr q.k / (|q||k|)): g loses its part along x. */
static void raw_backward_row(const sctx_t *c, int64_t n, const float *X, const float *vec,
                             const float *T, float *g, float *part)
{
    const int64_t H = c->H, d = c->d, HD = H * d;
    const float *x = X + n * HD;
    switch (c->sc.kind) {
    case AG_SCORE_COSINE:
        for (int64_t h = 0; h < H; h++) {
            const float *xh = x + h * d, xx = ag_i_dot(xh, xh, d);
            float *gh = g + h * d;
            const float w = xx > 0 ? ag_i_dot(xh, gh, d) / xx : 0.0f;
#pragma omp simd
            for (int64_t t = 0; t < d; t++)
                gh[t] -= w * xh[t];
        }
        break;
    case AG_SCORE_GATV2:
        break;
    case AG_SCORE_ADDITIVE:
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < d; t++) {
                g[h * d + t] = T[h] * vec[h * d + t];
                if (part)
                    part[h * d + t] += T[h] * x[h * d + t];
            }
        break;
    case AG_SCORE_LINEAR:
        phi_floats(g, x, HD, 1);
        break;
    default:
        for (int64_t t = 0; t < HD; t++)
            g[t] *= c->scale;
    }
}

/* The value terms' gradients of destination i's slots, dev [its slots, H*d]:
   each a z dM_i (A: the weights before dropout). */
static void edge_value_grads(const sctx_t *c, const ag_nbhd_t *nb, int64_t i, const float *A,
                             const float *dm, float *dev)
{
    const int64_t H = c->H, d = c->d;
    int64_t e = 0;
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++, e++) {
            const uint64_t key =
                c->drop.below ? ag_i_drop_key(&c->drop, i, j, ag_i_occurrence(nb, i, r, j)) : 0;
            for (int64_t h = 0; h < H; h++) {
                const float az = A[e * H + h] * ag_i_drop_factor(&c->drop, key, h);
                float *out = dev + (e * H + h) * d;
#pragma omp simd
                for (int64_t t = 0; t < d; t++)
                    out[t] = az * dm[h * d + t];
            }
        }
}

/* Destination i: its normalisers and D into state, row i of dQ, its slots'
   gradients (g's d_edge_bias, d_edge_pre, d_edge_key, d_edge_value; each NULL:
   not wanted) and its share of the vector's gradient (part: the chunk's
   [H*d], or NULL). */
static void backward_dst(const bctx_t *b, const ag_nbhd_t *nb, int64_t i,
                         const ag_attention_grads_t *g, float *part)
{
    const sctx_t *c = &b->c;
    const int64_t H = c->H, d = c->d, HD = H * d, s0 = nb->edge_ptr[i];
    const int64_t deg = nb->edge_ptr[i + 1] - s0;
    float *A = ag_i_scratch_mine(&b->buf), *G = A + deg * H, *dA = G + deg * H, *T = dA + deg * H;
    if (b->vec && AG_I_SROW_FLOATS(deg) > 3 * deg * H)   /* past the vector rows' scratch */
        T = A + AG_I_SROW_FLOATS(deg);
    float *st = b->state + i * H * ST_N, *dq = g->dQ + i * HD;
    float *d_bias = g->d_edge_bias, *d_pre = g->d_edge_pre;
    const float *dm = b->dM + i * HD;
    if (b->vec) {
        const int gatv2 = c->sc.kind == AG_SCORE_GATV2;
        b->isa->srow_dst(&c->row, nb, i, b->V, b->dM, st, dq, T, d_bias ? d_bias + s0 : NULL,
                         gatv2 ? part : NULL, A);
        raw_backward_row(c, i, b->Q, c->sc.a_dst, T, dq, gatv2 ? NULL : part);
        return;
    }
    int64_t e = 0;
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++, e++) {
            const uint64_t key =
                c->drop.below ? ag_i_drop_key(&c->drop, i, j, ag_i_occurrence(nb, i, r, j)) : 0;
            for (int64_t h = 0; h < H; h++) {
                const float x = raw_score(c, i, j, s0 + e, h);
                G[e * H + h] = x;
                A[e * H + h] = finish_score(c, x, i, j, s0 + e, h);
                const float *ev = edge_value(c, s0 + e, h);
                const float *vj = b->V + j * HD + h * d;   /* source_message's order */
                const float gv = d % 8 ? ag_i_dot(dm + h * d, vj, d) : dot8(dm + h * d, vj, d);
                dA[e * H + h] = (ev ? gv + ag_i_dot(dm + h * d, ev, d) : gv) *
                                ag_i_drop_factor(&c->drop, key, h);
            }
        }
    normalise_row(c, A, i, deg, NULL, st);
    if (g->d_edge_value)   /* a slot's value term reaches M_i with weight a z */
        edge_value_grads(c, nb, i, A, dm, g->d_edge_value + s0 * HD);
    weights_backward(c, A, dA, deg, st);
    if (d_bias)
        for (e = 0; e < deg; e++) {
            float sum = 0;
            for (int64_t h = 0; h < H; h++)
                sum += dA[e * H + h];
            d_bias[s0 + e] = c->sc.kind == AG_SCORE_LINEAR ? 0.0f : sum;
        }
    memset(dq, 0, (size_t)HD * sizeof *dq);
    memset(T, 0, (size_t)H * sizeof *T);
    const int gatv2 = c->sc.kind == AG_SCORE_GATV2;
    e = 0;
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++, e++)
            for (int64_t h = 0; h < H; h++) {
                const float dr = finish_backward(c, G[e * H + h], dA[e * H + h]);
                float *dek = g->d_edge_key ? g->d_edge_key + (s0 + e) * HD + h * d : NULL;
                const float dt = raw_backward_q(c, i, j, s0 + e, h, dr, dq + h * d, T,
                                                gatv2 && part ? part + h * d : NULL, dek);
                if (d_pre)
                    d_pre[(s0 + e) * H + h] = dt;
            }
    raw_backward_row(c, i, b->Q, c->sc.a_dst, T, dq, gatv2 ? NULL : part);
}

/* The slot of the (nth+1)-th message j -> i. i's slots list sources in
   ascending order, so the runs that hold j are consecutive, from the first
   run that ends after j. */
static inline int64_t slot_of(const ag_nbhd_t *nb, int64_t i, int64_t j, int64_t nth)
{
    int64_t lo = nb->run_ptr[i], hi = nb->run_ptr[i + 1];
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (nb->run_src[mid] + nb->run_len[mid] > j)
            hi = mid;
        else
            lo = mid + 1;
    }
    const int64_t r = lo + nth;
    return nb->run_slot[r] + (j - nb->run_src[r]);
}

/* The message j -> i in slot s (used only with the slots' own terms), the nth from j
   to i (used only with dropout), into source j's dk, dv [H*d] (T: additive's
   sums of dL/dt): its score, weight, dA and dr from i's state, as pass 1 had
   them. */
static inline void source_message(const bctx_t *b, int64_t i, int64_t j, int64_t s,
                                  int64_t nth, float *dk, float *dv, float *T)
{
    const sctx_t *c = &b->c;
    const uint64_t key = c->drop.below ? ag_i_drop_key(&c->drop, i, j, nth) : 0;
    const int64_t H = c->H, d = c->d, HD = H * d;
    for (int64_t h = 0; h < H; h++) {
        const float *st = b->state + (i * H + h) * ST_N, *g = b->dM + i * HD + h * d;
        const float *v = b->V + j * HD + h * d;
        float r, dA;
        const float *ev = edge_value(c, s, h);
        if (raw_is_dot(c) && !c->sc.edge_key && !ev) {   /* both dot products in one loop:
                                                            two chains, not one */
            const float *q = c->Q + i * HD + h * d, *k = c->K + j * HD + h * d;
            float qk = 0, gv = 0;
            if (d % 8 == 0)   /* the sums of the forward's channel_sums and of pass 1 */
                dot8_pair(q, k, g, v, d, &qk, &gv);
            else
#pragma omp simd reduction(+ : qk, gv)
                for (int64_t t = 0; t < d; t++)
                    qk += q[t] * k[t], gv += g[t] * v[t];
            r = raw_of_dot(c, i, j, h, qk), dA = gv;
        } else {
            r = raw_score(c, i, j, s, h), dA = ag_i_dot(g, v, d);
            if (ev)
                dA += ag_i_dot(g, ev, d);
        }
        const float z = ag_i_drop_factor(&c->drop, key, h);   /* the weight used was a z */
        dA *= z;
        const float a = weight_of(c, finish_score(c, r, i, j, s, h), st);
        const float dr = finish_backward(c, r, score_grad(c, a, dA, st));
        float *dvh = dv + h * d;
#pragma omp simd
        for (int64_t t = 0; t < d; t++)
            dvh[t] += a * z * g[t];
        raw_backward_k(c, i, j, s, h, dr, dk + h * d, T);
    }
}

/* Source j: rows j of dK and dV over its out-edges, and its share of
   additive's a_src gradient (part, or NULL). */
static void backward_src(const bctx_t *b, const ag_nbhd_t *nb, int64_t j, float *dK, float *dV,
                         float *part)
{
    const int64_t H = b->c.H, HD = H * b->c.d;
    const ag_score_t *sc = &b->c.sc;
    const int biased = sc->edge_bias || sc->edge_pre || sc->edge_key || sc->edge_value;
    float *dk = dK + j * HD, *dv = dV + j * HD, *T = ag_i_scratch_mine(&b->buf);
    if (b->vec) {
        b->isa->srow_src(&b->c.row, nb, j, b->V, b->dM, b->state, dk, dv, T);
        raw_backward_row(&b->c, j, b->K, b->c.sc.a_src, T, dk, part);
        return;
    }
    memset(dk, 0, (size_t)HD * sizeof *dk);
    memset(dv, 0, (size_t)HD * sizeof *dv);
    memset(T, 0, (size_t)H * sizeof *T);
    for (int64_t r = nb->out_ptr[j]; r < nb->out_ptr[j + 1]; r++)
        for (int64_t i = nb->out_dst[r]; i < nb->out_dst[r] + nb->out_len[r]; i++)
            source_message(b, i, j, biased ? slot_of(nb, i, j, nb->out_nth[r]) : 0,
                           nb->out_nth[r], dk, dv, T);
    raw_backward_row(&b->c, j, b->K, b->c.sc.a_src, T, dk, part);
}

/* out [HD] = the chunks' partial sums [chunks, HD], added chunk by chunk. */
static void sum_chunks(const float *part, int64_t chunks, int64_t HD, float *out)
{
    memset(out, 0, (size_t)HD * sizeof *out);
    for (int64_t k = 0; k < chunks; k++)
        for (int64_t x = 0; x < HD; x++)
            out[x] += part[k * HD + x];
}

/* Prefetches the rows that node n reads in pass 1 (its sources' rows of K,
   or phi(K), and V) or pass 2 (its destinations' rows of Q, or phi(Q), and
   dM); GAT's scores read per-node terms instead of K and Q. */
static inline __attribute__((always_inline)) void
prefetch_next(const bctx_t *b, const ag_nbhd_t *nb, int64_t n, int to_src)
{
    const int64_t H = b->c.H, HD = H * b->c.d;
    const int gat = b->c.sc.kind == AG_SCORE_ADDITIVE;
    const srow_t *row = &b->c.row;
    if (to_src) {
        const int64_t *ptr = nb->out_ptr, *first = nb->out_dst, *len = nb->out_len;
        if (!gat)
            prefetch_runs(ptr, first, len, n, b->c.Q, HD, 0, HD, RUN_HEAD);
        prefetch_runs(ptr, first, len, n, b->dM, HD, 0, HD, RUN_HEAD);
        if (b->vec) {   /* the vector rows read each destination's state and terms */
            prefetch_runs(ptr, first, len, n, b->state, H * ST_N, 0, H * ST_N, RUN_HEAD);
            if (row->t_dst)
                prefetch_runs(ptr, first, len, n, row->t_dst, H, 0, H, RUN_HEAD);
        }
    } else {
        if (!gat)
            prefetch_rows(nb, n, b->c.K, HD, 0, HD, RUN_HEAD);
        prefetch_rows(nb, n, b->V, HD, 0, HD, RUN_HEAD);
        if (b->vec && row->t_src)
            prefetch_rows(nb, n, row->t_src, H, 0, H, RUN_HEAD);
    }
}

/* The chunks of GRAD_CHUNK nodes in lo..hi-1 (lo a multiple of GRAD_CHUNK). */
static int64_t chunks_in(int64_t lo, int64_t hi)
{
    return lo < hi ? (hi + GRAD_CHUNK - 1) / GRAD_CHUNK - lo / GRAD_CHUNK : 0;
}

/* Pass 1 (to_src 0: destinations lo..hi-1, dQ) or pass 2 (sources lo..hi-1,
   dK and dV) over chunks of GRAD_CHUNK nodes (lo a multiple of GRAD_CHUNK);
   with part set, each chunk's share of a vector's gradient [chunks, H*d]. */
static void backward_pass(const bctx_t *b, const ag_nbhd_t *nb, const ag_attention_grads_t *g,
                          int to_src, int64_t lo, int64_t hi, float *part)
{
    const int64_t HD = b->c.H * b->c.d, k0 = lo / GRAD_CHUNK, chunks = chunks_in(lo, hi);
#pragma omp parallel for num_threads(b->threads) if (nb->n_edges * HD >= AG_PARALLEL_MIN_WORK) \
    schedule(dynamic, 1)
    for (int64_t k = 0; k < chunks; k++) {
        float *mine = part ? part + k * HD : NULL;
        if (mine)
            memset(mine, 0, (size_t)HD * sizeof *mine);
        const int64_t end = (k0 + k + 1) * GRAD_CHUNK < hi ? (k0 + k + 1) * GRAD_CHUNK : hi;
        for (int64_t n = (k0 + k) * GRAD_CHUNK; n < end; n++) {
            if (n + 1 < hi)   /* the next node's scattered rows, as in the forward */
                prefetch_next(b, nb, n + 1, to_src);
            if (to_src)
                backward_src(b, nb, n, g->dK, g->dV, mine);
            else
                backward_dst(b, nb, n, g, mine);
        }
    }
}

int ag_i_generic_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                      const ag_score_t *score, ag_error_t *err)
{
    /* a part's backward reads the queries of destinations wlo..whi-1 */
    const rows_t rows = p->part && p->backward ? (rows_t){p->wlo, p->whi, p->klo, p->khi}
                                               : (rows_t){p->lo, p->hi, p->klo, p->khi};
    const ag_score_kind_t kind = kind_of(score);
    p->max_deg = max_in_degree(nb, p->lo, p->hi);
    /* per thread: a destination's weights [max_deg, H] (the backward: also
       raw scores and dA, then [H]); shared: the per-node terms, then the
       backward's per-destination state and GAT vectors' partials */
    int64_t per_thread = p->backward ? 3 * p->max_deg * H : p->max_deg * H;
    if (per_thread < AG_I_SROW_FLOATS(p->max_deg))   /* the vector rows' (score_rows.h) */
        per_thread = AG_I_SROW_FLOATS(p->max_deg);
    per_thread += p->backward ? H : 0;
    int64_t shared = terms_need(kind, rows, H, d);
    const int gat = kind == AG_SCORE_ADDITIVE || kind == AG_SCORE_GATV2;
    if (p->backward && !p->part)   /* a part's states and partials are the caller's */
        shared += nb->n_nodes * H * ST_N + (gat ? chunks_in(0, nb->n_nodes) * H * d : 0);
    return ag_i_plan_scratch(p, ag_i_scratch_stride(per_thread), shared,
                             p->backward ? "attention backward" : "attention buffer", err);
}

/* The backward's context: the terms in the plan's scratch for the rows it
   reads, the states at `state` (indexed by global destination). */
static bctx_t back_context(const ag_i_plan_t *p, const ag_i_bwd_t *a, float *state)
{
    bctx_t b = {.Q = a->Q, .K = a->K, .V = a->V, .dM = a->dM, .state = state,
                .buf = {p->scratch, p->per_thread}, .threads = p->threads};
    const rows_t rows = p->part ? (rows_t){p->wlo, p->whi, p->klo, p->khi}
                                : (rows_t){p->lo, p->hi, p->klo, p->khi};
    sctx_init(&b.c, a->score, rows, a->Q, a->K, a->H, a->d, p->shared);
    const ag_attention_grads_t *g = &a->g;
    b.vec = b.c.vec && !g->d_edge_pre && !g->d_edge_key && !g->d_edge_value;
    b.isa = p->isa;
    return b;
}

void ag_i_generic_backward(const ag_i_plan_t *p, const ag_i_bwd_t *a)
{
    const ag_nbhd_t *nb = a->nb;
    const int64_t H = a->H, d = a->d, HD = H * d, N = nb->n_nodes;
    const ag_attention_grads_t *g = &a->g;
    const ag_score_kind_t kind = kind_of(a->score);
    float *state = p->shared + terms_need(kind, (rows_t){0, N, 0, N}, H, d);
    bctx_t b = back_context(p, a, state);
    const int gat = kind == AG_SCORE_ADDITIVE || kind == AG_SCORE_GATV2;
    float *part = state + N * H * ST_N;
    /* the vectors' gradients: gatv2's a and additive's a_dst from the
       destinations, additive's a_src from the sources */
    float *want_dst = kind == AG_SCORE_GATV2 ? g->d_a_src
                      : kind == AG_SCORE_ADDITIVE ? g->d_a_dst : NULL;
    float *want_src = kind == AG_SCORE_ADDITIVE ? g->d_a_src : NULL;
    backward_pass(&b, nb, g, 0, 0, N, want_dst ? part : NULL);
    if (want_dst)
        sum_chunks(part, chunks_in(0, N), HD, want_dst);
    backward_pass(&b, nb, g, 1, 0, N, want_src ? part : NULL);
    if (want_src)
        sum_chunks(part, chunks_in(0, N), HD, want_src);
    if (g->d_a_src && !gat)
        memset(g->d_a_src, 0, (size_t)HD * sizeof *g->d_a_src);
    if (g->d_a_dst && kind != AG_SCORE_ADDITIVE)
        memset(g->d_a_dst, 0, (size_t)HD * sizeof *g->d_a_dst);
}

int64_t ag_i_generic_chunks(int64_t lo, int64_t hi)
{
    return chunks_in(lo, hi);
}

void ag_i_generic_backward_pass(const ag_i_plan_t *p, const ag_i_bwd_t *a, int pass,
                                float *state, float *part)
{
    const bctx_t b = back_context(p, a, state);
    backward_pass(&b, a->nb, &a->g, pass, p->lo, p->hi, part);
}
