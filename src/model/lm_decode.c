/*
 * A GPT's decoder (ag_lm_t): one token at a time with a cache of keys and
 * values. Token t is one more node of the pattern's graph over the block: its
 * query reads the cached keys and values of its sources there, so what the
 * tokens before it computed is never computed again. It runs the rounds' GPT
 * block (pre-LayerNorm scaled-dot attention, wo and a residual, a pre-LayerNorm
 * GELU sublayer, the final LayerNorm and the tied head) on one row, with the
 * same products and LayerNorm; its logits agree with ag_lm_logits on the
 * prefix to rounding (the test compares them). ag_lm_generate draws tokens
 * with it, starting over from the last T/2 tokens when the context is full.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

struct ag_lm_decoder {
    const ag_lm_t *m;
    int64_t T, len;             /* the block (the cache's rows) and tokens read */
    int64_t **src_ptr, **src;   /* [L] each block's sources of each position (CSR);
                                   blocks of one graph share them (first_of) */
    const ag_nbhd_t **graph;    /* [L] the graph each block's were read from */
    float *K, *V;               /* cached keys and values (heads side by side): block l's
                                   rows[l] rows from row at[l] */
    int64_t *rows, *at;         /* [L] a block's cache is a ring of the positions its
                                   pattern reaches back: T under causal, W under window:W */
    float *x, *h, *q, *a, *f, *p;   /* one row: state, LayerNorm, query, attention
                                       output, sublayer [4D], weights [T] */
};

/* The first block that reads block l's graph (whose sources block l shares). */
static int64_t first_of(const ag_lm_decoder_t *dec, int64_t l)
{
    int64_t first = 0;
    while (dec->graph[first] != dec->graph[l])
        first++;
    return first;
}

void ag_lm_decoder_free(ag_lm_decoder_t *dec)
{
    if (!dec)
        return;
    for (int64_t l = 0; dec->src_ptr && dec->src && dec->graph && l < dec->m->L; l++)
        if (first_of(dec, l) == l)
            free(dec->src_ptr[l]), free(dec->src[l]);
    free(dec->src_ptr), free(dec->src), free(dec->graph), free(dec->rows), free(dec->at);
    free(dec->K), free(dec->V), free(dec->x);
    free(dec);
}

/* Block l's sources from nb's runs, refusing a source after its destination
   (a decoder has not read it yet). */
static int read_sources(ag_lm_decoder_t *dec, int64_t l, const ag_nbhd_t *nb, ag_error_t *err)
{
    const int64_t T = dec->T;
    if (!nb)
        return ag_fail(err, AG_EINVAL, "language model decoder: block %lld has no graph",
                       (long long)l + 1);
    if (nb->n_nodes != T)
        return ag_fail(err, AG_EINVAL, "language model decoder: a graph of %lld nodes; "
                       "expected the block's %lld (the pattern over one sequence)",
                       (long long)nb->n_nodes, (long long)T);
    int64_t *ptr = dec->src_ptr[l] = ag_alloc(T + 1, sizeof *ptr, err, "decoder");
    int64_t *src = dec->src[l] = ag_alloc(nb->n_edges > 0 ? nb->n_edges : 1, sizeof *src, err,
                                          "decoder");
    if (!ptr || !src)
        return ag_alloc_status();
    memcpy(ptr, nb->edge_ptr, (size_t)(T + 1) * sizeof *ptr);
    ag_nbhd_sources(nb, 0, T, src);
    for (int64_t t = 0; t < T; t++)
        for (int64_t e = ptr[t]; e < ptr[t + 1]; e++)
            if (src[e] > t)
                return ag_fail(err, AG_EINVAL, "language model decoder: block %lld's pattern "
                               "lets token %lld read token %lld, which comes after it; a "
                               "decoder needs a causal pattern", (long long)l + 1,
                               (long long)t, (long long)src[e]);
    return AG_OK;
}

/* The decoder of m with block l reading graphs[l] (graphs NULL: nb for every block). */
static int decoder_init(ag_lm_decoder_t **out, const ag_lm_t *m, const ag_nbhd_t *nb,
                        ag_nbhd_t *const *graphs, ag_error_t *err)
{
    *out = NULL;
    if (!m || !m->wte || (!nb && !graphs))
        return ag_fail(err, AG_EINVAL, "language model decoder: a model and a graph are "
                       "required");
    ag_lm_decoder_t *dec = ag_calloc(1, sizeof *dec, err, "decoder");
    if (!dec)
        return ag_alloc_status();
    const int64_t T = m->T, D = m->D;
    *dec = (ag_lm_decoder_t){.m = m, .T = T};
    dec->src_ptr = ag_calloc(m->L, sizeof *dec->src_ptr, err, "decoder");
    dec->src = ag_calloc(m->L, sizeof *dec->src, err, "decoder");
    dec->graph = ag_calloc(m->L, sizeof *dec->graph, err, "decoder");
    int rc = dec->src_ptr && dec->src && dec->graph ? AG_OK : ag_alloc_status();
    for (int64_t l = 0; !rc && l < m->L; l++)
        dec->graph[l] = graphs ? graphs[l] : nb;
    for (int64_t l = 0; !rc && l < m->L; l++) {
        const int64_t first = first_of(dec, l);
        if (first < l)   /* one graph, one copy of its sources */
            dec->src_ptr[l] = dec->src_ptr[first], dec->src[l] = dec->src[first];
        else
            rc = read_sources(dec, l, dec->graph[l], err);
    }
    dec->rows = rc ? NULL : ag_alloc(m->L, sizeof *dec->rows, err, "decoder");
    dec->at = rc ? NULL : ag_alloc(m->L, sizeof *dec->at, err, "decoder");
    if (!rc && (!dec->rows || !dec->at))
        rc = ag_alloc_status();
    int64_t cache = 0;   /* rows of all blocks: the furthest each block's pattern reads back */
    for (int64_t l = 0; !rc && l < m->L; l++) {
        const int64_t *ptr = dec->src_ptr[l], *src = dec->src[l], first = first_of(dec, l);
        int64_t back = first < l ? dec->rows[first] : 1;   /* one graph's, counted once */
        for (int64_t t = 0; first == l && t < T; t++)
            for (int64_t e = ptr[t]; e < ptr[t + 1]; e++)
                back = t - src[e] + 1 > back ? t - src[e] + 1 : back;
        dec->rows[l] = back, dec->at[l] = cache, cache += back;
    }
    if (!rc) {
        dec->K = ag_alloc(cache * D, sizeof *dec->K, err, "decoder's cache");
        dec->V = ag_alloc(cache * D, sizeof *dec->V, err, "decoder's cache");
        dec->x = ag_alloc(8 * D + T, sizeof *dec->x, err, "decoder");
        if (!dec->K || !dec->V || !dec->x)
            rc = ag_alloc_status();
    }
    if (rc) {
        ag_lm_decoder_free(dec);
        return rc;
    }
    dec->h = dec->x + D, dec->q = dec->h + D, dec->a = dec->q + D, dec->f = dec->a + D;
    dec->p = dec->f + 4 * D;
    *out = dec;
    return AG_OK;
}

int ag_lm_decoder_init(ag_lm_decoder_t **out, const ag_lm_t *m, const ag_nbhd_t *nb,
                       ag_error_t *err)
{
    return decoder_init(out, m, nb, NULL, err);
}

int ag_lm_decoder_init_layers(ag_lm_decoder_t **out, const ag_lm_t *m,
                              ag_nbhd_t *const *graphs, ag_error_t *err)
{
    return decoder_init(out, m, NULL, graphs, err);
}

int64_t ag_lm_decoder_length(const ag_lm_decoder_t *dec)
{
    return dec ? dec->len : 0;
}

int64_t ag_lm_decoder_cache_rows(const ag_lm_decoder_t *dec)
{
    return dec ? dec->at[dec->m->L - 1] + dec->rows[dec->m->L - 1] : 0;
}

void ag_lm_decoder_reset(ag_lm_decoder_t *dec)
{
    if (dec)
        dec->len = 0;
}

/* y [n] = W [n, in] x (+ b): one row of ag_i_gemm_xwt. */
static void project(float *y, const float *W, const float *b, const float *x, int64_t in,
                    int64_t n)
{
    ag_i_gemm_xwt(y, x, W, 1, in, n, 0.0f);
    for (int64_t k = 0; b && k < n; k++)
        y[k] += b[k];
}

/* dec->a = attention of position t's query dec->q over its sources' cached
   keys and values in layer l, head by head (scaled-dot softmax). */
static void attend(ag_lm_decoder_t *dec, int64_t l, int64_t t)
{
    const ag_lm_t *m = dec->m;
    const int64_t D = m->D, H = m->H, d = D / H;
    const int64_t *ptr = dec->src_ptr[l];
    const int64_t *src = dec->src[l] + ptr[t], n = ptr[t + 1] - ptr[t];
    const float *K = dec->K + dec->at[l] * D, *V = dec->V + dec->at[l] * D;
    const int64_t rows = dec->rows[l];   /* position j is row j % rows of the ring */
    const float scale = 1.0f / sqrtf((float)d);
    for (int64_t hh = 0; hh < H; hh++) {
        const float *q = dec->q + hh * d;
        float top = -INFINITY, sum = 0;
        for (int64_t e = 0; e < n; e++) {
            float s = 0;
            for (int64_t c = 0; c < d; c++)
                s += q[c] * K[src[e] % rows * D + hh * d + c];
            dec->p[e] = s * scale;
            top = fmaxf(top, dec->p[e]);
        }
        for (int64_t e = 0; e < n; e++)
            sum += dec->p[e] = expf(dec->p[e] - top);
        float *a = dec->a + hh * d;
        memset(a, 0, (size_t)d * sizeof *a);
        for (int64_t e = 0; e < n; e++)
            for (int64_t c = 0; c < d; c++)
                a[c] += dec->p[e] / sum * V[src[e] % rows * D + hh * d + c];
    }
}

int ag_lm_decoder_push(ag_lm_decoder_t *dec, int64_t id, float *logits, ag_error_t *err)
{
    if (!dec)
        return ag_fail(err, AG_EINVAL, "language model decoder: none");
    const ag_lm_t *m = dec->m;
    const int64_t t = dec->len, D = m->D, F = 4 * D;
    if (t == dec->T)
        return ag_fail(err, AG_ELIMIT, "language model decoder: the context holds the "
                       "block's %lld tokens; reset it (and read the last ones again) to go "
                       "on", (long long)dec->T);
    if (id < 0 || id >= m->V)
        return ag_fail(err, AG_EINVAL, "language model decoder: token %lld; expected an id "
                       "in [0, %lld)", (long long)id, (long long)m->V);
    const float eps = 1e-5f;   /* AG_ROUND_OPTS_INIT's, as ag_lm_loss runs the blocks */
    for (int64_t c = 0; c < D; c++)
        dec->x[c] = m->wte[id * D + c] + (m->wpe ? m->wpe[t * D + c] : 0.0f);
    for (int64_t l = 0; l < m->L; l++) {
        const ag_weights_t *w = &m->layers[l];
        const int64_t row = dec->at[l] + t % dec->rows[l];   /* over the oldest row */
        float *k = dec->K + row * D, *v = dec->V + row * D;
        ag_layer_norm(dec->h, dec->x, 1, D, w->ln_weight, w->ln_bias, eps);
        project(dec->q, w->wq, w->bq, dec->h, D, D);
        project(k, w->wk, w->bk, dec->h, D, D);
        project(v, w->wv, w->bv, dec->h, D, D);
        int rc = m->positions == AG_LM_POS_ROPE   /* the key is cached turned */
                     ? ag_i_rope(dec->q, k, 1, m->H, D / m->H, &t, 0.0f, 0, err) : AG_OK;
        if (rc)
            return rc;
        attend(dec, l, t);
        project(dec->h, w->wo, w->bias, dec->a, D, D);
        for (int64_t c = 0; c < D; c++)
            dec->x[c] += dec->h[c];
        if (!w->w1)   /* attention-only blocks (ag_lm_set_mlp) */
            continue;
        ag_layer_norm(dec->h, dec->x, 1, D, w->ln2_weight, w->ln2_bias, eps);
        project(dec->f, w->w1, w->b1, dec->h, D, F);
        for (int64_t c = 0; c < F; c++)
            dec->f[c] = ag_i_act_value(w->ff_act, dec->f[c]);
        project(dec->h, w->w2, w->b2, dec->f, F, D);
        for (int64_t c = 0; c < D; c++)
            dec->x[c] += dec->h[c];
    }
    dec->len++;
    if (logits) {
        ag_layer_norm(dec->h, dec->x, 1, D, m->lnf_weight, m->lnf_bias, eps);
        ag_i_gemm_xwt(logits, dec->h, m->wte, 1, D, m->V, 0.0f);
    }
    return AG_OK;
}

int64_t ag_lm_pick(const float *logits, int64_t V, double temperature, int64_t top_k, double u)
{
    int64_t best = 0;
    for (int64_t v = 1; v < V; v++)
        if (logits[v] > logits[best])
            best = v;
    if (!(temperature > 0) || V == 1)
        return best;
    /* the k-th largest logit: the least one kept (ties at it are kept too) */
    double floor_logit = -INFINITY;
    if (top_k > 0 && top_k < V) {
        double prev = INFINITY;
        for (int64_t kept = 0; kept < top_k;) {
            double next = -INFINITY;
            int64_t count = 0;
            for (int64_t v = 0; v < V; v++)
                if (logits[v] < prev && logits[v] > next)
                    next = logits[v];
            for (int64_t v = 0; v < V; v++)
                count += logits[v] == next;
            if (!count)   /* fewer values than k (NaN among them) */
                break;
            floor_logit = prev = next, kept += count;
        }
    }
    double total = 0;
    for (int64_t v = 0; v < V; v++)
        if (logits[v] >= floor_logit)
            total += exp(((double)logits[v] - logits[best]) / temperature);
    double at = u * total;
    for (int64_t v = 0; v < V; v++) {
        if (logits[v] < floor_logit)
            continue;
        at -= exp(((double)logits[v] - logits[best]) / temperature);
        if (at < 0)
            return v;
    }
    return best;   /* u * total rounded up to total */
}

/* Reads ids[at] into the decoder, starting it over from the last T/2 tokens
   before it when the context is full (positions restart at 0, as in
   training: the context stays between T/2 and T tokens). */
static int feed(ag_lm_decoder_t *dec, const int64_t *ids, int64_t at, float *logits,
                ag_error_t *err)
{
    int rc = AG_OK;
    if (dec->len == dec->T) {
        dec->len = 0;
        for (int64_t k = at - dec->T / 2; !rc && k < at; k++)
            rc = ag_lm_decoder_push(dec, ids[k], NULL, err);
    }
    return rc ? rc : ag_lm_decoder_push(dec, ids[at], logits, err);
}

static int generate(const ag_lm_t *m, const ag_nbhd_t *nb, ag_nbhd_t *const *graphs,
                    int64_t *ids, int64_t n_prompt, int64_t n, double temperature,
                    int64_t top_k, uint64_t seed, void (*emit)(int64_t token, void *ctx),
                    void *ctx, ag_error_t *err)
{
    if (n_prompt < 1 || n < 0 || !ids)
        return ag_fail(err, AG_EINVAL, "language model: a prompt of %lld tokens and %lld "
                       "to generate; expected a prompt of one or more", (long long)n_prompt,
                       (long long)n);
    if (!(temperature >= 0) || !isfinite(temperature) || top_k < 0)
        return ag_fail(err, AG_EINVAL, "language model: temperature %g, top-k %lld; "
                       "expected a finite temperature >= 0 and top-k >= 0", temperature,
                       (long long)top_k);
    ag_lm_decoder_t *dec;
    int rc = decoder_init(&dec, m, nb, graphs, err);
    if (rc)
        return rc;
    float *logits = ag_alloc(m->V, sizeof *logits, err, "logits");
    if (!logits)
        rc = ag_alloc_status();
    const uint64_t draws = rng_seed(seed, 1);
    for (int64_t k = 0; !rc && k < n_prompt; k++)
        rc = feed(dec, ids, k, logits, err);
    for (int64_t k = 0; !rc && k < n; k++) {
        const double u = (double)(rng_at(draws, (uint64_t)k) >> 11) * 0x1p-53;
        ids[n_prompt + k] = ag_lm_pick(logits, m->V, temperature, top_k, u);
        if (emit)
            emit(ids[n_prompt + k], ctx);
        if (k + 1 < n)
            rc = feed(dec, ids, n_prompt + k, logits, err);
    }
    free(logits);
    ag_lm_decoder_free(dec);
    return rc;
}

int ag_lm_generate(const ag_lm_t *m, const ag_nbhd_t *nb, int64_t *ids, int64_t n_prompt,
                   int64_t n, double temperature, int64_t top_k, uint64_t seed,
                   void (*emit)(int64_t token, void *ctx), void *ctx, ag_error_t *err)
{
    return generate(m, nb, NULL, ids, n_prompt, n, temperature, top_k, seed, emit, ctx, err);
}

int ag_lm_generate_layers(const ag_lm_t *m, ag_nbhd_t *const *graphs, int64_t *ids,
                          int64_t n_prompt, int64_t n, double temperature, int64_t top_k,
                          uint64_t seed, void (*emit)(int64_t token, void *ctx), void *ctx,
                          ag_error_t *err)
{
    return generate(m, NULL, graphs, ids, n_prompt, n, temperature, top_k, seed, emit, ctx,
                    err);
}
