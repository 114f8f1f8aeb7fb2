/* Dense masked attention in double precision: the tests' ground truth. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

/*
 * The core: count[i*N + j] is the number of edges j -> i (a mask with
 * multiplicities); q, k, v, m are double [N, H*d]. W as in ref_attention.
 */
static void dense_attention(int64_t N, const double *count, const int64_t *src,
                            const int64_t *dst, int64_t E, const double *q, const double *k,
                            const double *v, int64_t H, int64_t d, double *m, double *W)
{
    const int64_t HD = H * d;
    double *s = malloc((size_t)N * sizeof *s);
    memset(m, 0, (size_t)(N * HD) * sizeof *m);
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < N; i++) {
            double mx = -INFINITY, z = 0;
            for (int64_t j = 0; j < N; j++) {
                double dotp = 0;
                for (int64_t c = 0; c < d; c++)
                    dotp += q[i * HD + h * d + c] * k[j * HD + h * d + c];
                s[j] = dotp / sqrt((double)d);
                if (count[i * N + j] > 0 && s[j] > mx)
                    mx = s[j];
            }
            for (int64_t j = 0; j < N; j++)
                if (count[i * N + j] > 0)
                    z += count[i * N + j] * exp(s[j] - mx);
            for (int64_t j = 0; z > 0 && j < N; j++) {
                if (count[i * N + j] == 0)
                    continue;
                double a = count[i * N + j] * exp(s[j] - mx) / z;
                for (int64_t c = 0; c < d; c++)
                    m[i * HD + h * d + c] += a * v[j * HD + h * d + c];
            }
            if (W)
                for (int64_t e = 0; e < E; e++)
                    if (dst[e] == i)
                        W[e * H + h] = exp(s[src[e]] - mx) / z;
        }
    free(s);
}

static double *edge_counts(int64_t N, const int64_t *src, const int64_t *dst, int64_t E)
{
    double *count = calloc((size_t)(N * N), sizeof *count);
    for (int64_t e = 0; e < E; e++)
        count[dst[e] * N + src[e]] += 1;
    return count;
}

static double *to_double(const float *x, int64_t n)
{
    double *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

void ref_attention(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                   const float *Q, const float *K, const float *V, int64_t H, int64_t d,
                   double *M, double *W)
{
    double *count = edge_counts(N, src, dst, E);
    double *q = to_double(Q, N * H * d), *k = to_double(K, N * H * d), *v = to_double(V, N * H * d);
    dense_attention(N, count, src, dst, E, q, k, v, H, d, M, W);
    free(count), free(q), free(k), free(v);
}

/* Y [N, out] = X [N, in] W^T, W float [out, in], or W_i per node ([N, out, in]). */
static void project(double *Y, const double *X, const float *W, int64_t N, int64_t in,
                    int64_t out, int per_node)
{
    for (int64_t i = 0; i < N; i++) {
        const float *Wi = per_node ? W + i * out * in : W;
        for (int64_t o = 0; o < out; o++) {
            double acc = 0;
            for (int64_t c = 0; c < in; c++)
                acc += X[i * in + c] * (double)Wi[o * in + c];
            Y[i * out + o] = acc;
        }
    }
}

static void scored_attention(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                             const double *Q, const double *K, const double *V, int64_t H,
                             int64_t d, const ref_score_t *sc, double *M, double *W);

void ref_rounds_layers(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                       const ref_layer_t *layers, int n_layers, int64_t D, int64_t H, int64_t d,
                       int rounds, int residual, int layer_norm, double *X)
{
    ref_rounds_scored(N, src, dst, E, layers, n_layers, D, H, d, rounds, residual, layer_norm,
                      NULL, X);
}

/* Y[i] = LayerNorm(X[i]) (eps 1e-5) with w, b [D] (NULL: 1 and 0), or X[i]
   itself when !norm, for rows i < N of width D. */
static void ref_layer_norm(double *Y, const double *X, int64_t N, int64_t D, int norm,
                           const float *w, const float *b)
{
    for (int64_t i = 0; i < N; i++) {
        const double *x = X + i * D;
        double mean = 0, var = 0;
        for (int64_t c = 0; c < D; c++)
            mean += x[c] / (double)D;
        for (int64_t c = 0; c < D; c++)
            var += (x[c] - mean) * (x[c] - mean) / (double)D;
        for (int64_t c = 0; c < D; c++)
            Y[i * D + c] = !norm ? x[c] : (x[c] - mean) / sqrt(var + 1e-5) * (w ? w[c] : 1.0) +
                                              (b ? b[c] : 0.0);
    }
}

void ref_rounds_scored(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                       const ref_layer_t *layers, int n_layers, int64_t D, int64_t H,
                       int64_t d, int rounds, int residual, int layer_norm,
                       const ref_score_t *sc, double *X)
{
    const int64_t HD = H * d;
    double *count = edge_counts(N, src, dst, E);
    double *q = malloc((size_t)(N * HD) * sizeof *q), *k = malloc((size_t)(N * HD) * sizeof *k);
    double *v = malloc((size_t)(N * HD) * sizeof *v), *m = malloc((size_t)(N * HD) * sizeof *m);
    double *y = malloc((size_t)(N * D) * sizeof *y), *xn = malloc((size_t)(N * D) * sizeof *xn);
    for (int r = 0; r < rounds; r++) {
        const ref_layer_t *L = &layers[n_layers == 1 ? 0 : r];
        ref_layer_norm(xn, X, N, D, layer_norm, L->ln_w, L->ln_b);
        project(q, xn, L->wq, N, D, HD, L->per_node);
        project(k, xn, L->wk, N, D, HD, L->per_node);
        project(v, xn, L->wv, N, D, HD, L->per_node);
        if (sc) {   /* the layer's vectors, where it has them */
            ref_score_t round_sc = *sc;
            if (L->a_src)
                round_sc.a_src = L->a_src, round_sc.a_dst = L->a_dst;
            scored_attention(N, src, dst, E, q, k, v, H, d, &round_sc, m, NULL);
        } else {
            dense_attention(N, count, src, dst, E, q, k, v, H, d, m, NULL);
        }
        project(y, m, L->wo, N, HD, D, 0);
        for (int64_t x = 0; x < N * D; x++)
            X[x] = (residual ? X[x] : 0.0) + y[x];
    }
    free(count), free(q), free(k), free(v), free(m), free(y), free(xn);
}

static double ref_act(int act, double z)
{
    switch (act) {
    case 1: return z > 0 ? z : 0;
    case 2: return z > 0 ? z : exp(z) - 1;
    case 3: return 0.5 * z * (1 + erf(z / sqrt(2.0)));
    default: return z;
    }
}

/* Y [N, width] += b in every row (b NULL: nothing) */
static void add_bias(double *Y, const float *b, int64_t N, int64_t width)
{
    for (int64_t x = 0; b && x < N * width; x++)
        Y[x] += b[x % width];
}

void ref_layers_shaped(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                       const ref_shaped_t *layers, int n, const ref_score_t *sc, double *X)
{
    for (int l = 0; l < n; l++) {
        const ref_shaped_t *L = &layers[l];
        const int64_t D = L->D, H = L->H, d = L->d, HD = H * d;
        const int64_t out = L->wo ? L->D_out : L->mean_heads ? d : HD;
        const int pre = L->ln_w && !L->post_norm, post = L->ln_w && L->post_norm;
        double *xn = malloc((size_t)(N * D) * sizeof *xn), *q = malloc((size_t)(N * HD) * sizeof *q);
        double *k = malloc((size_t)(N * HD) * sizeof *k), *v = malloc((size_t)(N * HD) * sizeof *v);
        double *m = malloc((size_t)(N * HD) * sizeof *m), *z = malloc((size_t)(N * out) * sizeof *z);
        double *r = malloc((size_t)(N * out) * sizeof *r);
        double *pe = malloc((size_t)(E * HD + 1) * sizeof *pe);
        double *epre = malloc((size_t)(E * H + 1) * sizeof *epre);
        ref_layer_norm(xn, X, N, D, pre, L->ln_w, L->ln_b);
        project(q, xn, L->wq, N, D, HD, 0);
        add_bias(q, L->bq, N, HD);
        if (L->wk) {
            project(k, xn, L->wk, N, D, HD, 0), add_bias(k, L->bk, N, HD);
            project(v, xn, L->wv, N, D, HD, 0), add_bias(v, L->bv, N, HD);
        } else {
            memcpy(k, q, (size_t)(N * HD) * sizeof *q), memcpy(v, q, (size_t)(N * HD) * sizeof *q);
        }
        for (int64_t i = 0; sc->rope_pos && i < N; i++)   /* rotary positions */
            for (int64_t h = 0; h < H; h++)
                for (int64_t j = 0; j < d / 2; j++) {
                    const double a = (double)sc->rope_pos[i] * pow(10000.0, -2.0 * j / d);
                    double *p[2] = {q + i * HD + h * d, k + i * HD + h * d};
                    for (int t = 0; t < 2; t++) {
                        const double x = p[t][j], y = p[t][j + d / 2];
                        p[t][j] = x * cos(a) - y * sin(a);
                        p[t][j + d / 2] = x * sin(a) + y * cos(a);
                    }
                }
        ref_score_t round_sc = *sc;
        round_sc.a_src = L->a_src, round_sc.a_dst = L->a_dst;
        if (L->wedge) {   /* the edge features' terms */
            double *e_in = malloc((size_t)(E * L->edge_dim + 1) * sizeof *e_in);
            for (int64_t x = 0; x < E * L->edge_dim; x++)
                e_in[x] = L->edges[x];
            project(pe, e_in, L->wedge, E, L->edge_dim, HD, 0);
            free(e_in);
            if (sc->kind == 3) {
                for (int64_t e = 0; e < E; e++)
                    for (int64_t h = 0; h < H; h++) {
                        epre[e * H + h] = 0;
                        for (int64_t c = 0; c < d; c++)
                            epre[e * H + h] += pe[e * HD + h * d + c] * L->attn_edge[h * d + c];
                    }
                round_sc.edge_pre = epre;
            } else {
                round_sc.edge_key = pe;
                round_sc.edge_value = sc->kind == 4 ? NULL : pe;
            }
        }
        scored_attention(N, src, dst, E, q, k, v, H, d, &round_sc, m, NULL);
        if (L->wo) {
            project(z, m, L->wo, N, HD, out, 0);
        } else {
            for (int64_t i = 0; i < N; i++)
                for (int64_t c = 0; c < out; c++) {
                    double sum = 0;
                    for (int64_t h = 0; h < (L->mean_heads ? H : 1); h++)
                        sum += m[i * HD + h * d + c];
                    z[i * out + c] = L->mean_heads ? sum / (double)H : m[i * HD + c];
                }
        }
        if (L->wskip) {   /* the skip, summed or gated */
            project(r, xn, L->wskip, N, D, out, 0);
            add_bias(r, L->bskip, N, out);
            for (int64_t i = 0; i < N; i++) {
                double g = 0.5, t = 0;
                double *zi = z + i * out, *ri = r + i * out;
                for (int64_t c = 0; L->wbeta && c < out; c++)
                    t += L->wbeta[c] * zi[c] + L->wbeta[out + c] * ri[c] +
                         L->wbeta[2 * out + c] * (zi[c] - ri[c]);
                if (L->wbeta)
                    g = 1 / (1 + exp(-t));
                for (int64_t c = 0; c < out; c++)
                    zi[c] = L->wbeta ? g * ri[c] + (1 - g) * zi[c] : zi[c] + ri[c];
            }
        }
        for (int64_t i = 0; i < N; i++)
            for (int64_t c = 0; c < out; c++)
                z[i * out + c] += (L->bias ? L->bias[c] : 0.0) + (L->residual ? X[i * D + c] : 0.0);
        if (post)
            ref_layer_norm(z, z, N, out, 1, L->ln_w, L->ln_b);
        for (int64_t x = 0; x < N * out; x++)
            X[x] = ref_act(L->act, z[x]);
        for (int64_t i = 0; L->w1 && i < N; i++) {   /* the feed-forward sublayer, row by row */
            double *y = X + i * out, yn[64], u[256];
            ref_layer_norm(yn, y, 1, out, pre, L->ln2_w, L->ln2_b);
            for (int64_t f = 0; f < L->F; f++) {
                double t = L->b1 ? L->b1[f] : 0.0;
                for (int64_t c = 0; c < out; c++)
                    t += (double)L->w1[f * out + c] * yn[c];
                u[f] = ref_act(L->ff_act, t);
            }
            for (int64_t c = 0; c < out; c++) {
                double t = L->b2 ? L->b2[c] : 0.0;
                for (int64_t f = 0; f < L->F; f++)
                    t += (double)L->w2[c * L->F + f] * u[f];
                y[c] += t;
            }
            if (post)
                ref_layer_norm(y, y, 1, out, 1, L->ln2_w, L->ln2_b);
        }
        free(xn), free(q), free(k), free(v), free(m), free(z), free(r), free(pe), free(epre);
    }
}

void ref_rounds(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                const float *wq, const float *wk, const float *wv, const float *wo,
                int64_t D, int64_t H, int64_t d, int rounds, double *X)
{
    const ref_layer_t layer = {wq, wk, wv, wo, 0, NULL, NULL, NULL, NULL};
    ref_rounds_layers(N, src, dst, E, &layer, 1, D, H, d, rounds, 1, 0, X);
}

static double ref_leaky(double x, double slope)
{
    return x > 0 ? x : slope * x;
}

static double ref_phi(double x)   /* elu(x) + 1 */
{
    return x > 0 ? x + 1 : exp(x);
}

/* The score of message e (j -> i) for head h, before normalisation. */
static double ref_score(const ref_score_t *sc, const double *Q, const double *K, int64_t H,
                        int64_t d, int64_t i, int64_t j, int64_t e, int64_t h)
{
    const double *q = Q + (i * H + h) * d, *k = K + (j * H + h) * d;
    double ke[512];   /* the message's key: k_j + its edge term */
    if (sc->edge_key) {
        for (int64_t c = 0; c < d; c++)
            ke[c] = k[c] + sc->edge_key[e * H * d + h * d + c];
        k = ke;
    }
    double qk = 0, qq = 0, kk = 0, s;
    for (int64_t c = 0; c < d; c++)
        qk += q[c] * k[c], qq += q[c] * q[c], kk += k[c] * k[c];
    switch (sc->kind) {
    case 1: s = qk; break;
    case 2: s = qq > 0 && kk > 0 ? qk / sqrt(qq * kk) : 0; break;
    case 3: {
        double a = 0;
        for (int64_t c = 0; c < d; c++)
            a += (double)sc->a_dst[h * d + c] * q[c] + (double)sc->a_src[h * d + c] * k[c];
        s = ref_leaky(a + (sc->edge_pre ? sc->edge_pre[e * H + h] : 0.0), sc->slope);
        break;
    }
    case 4:
        s = 0;
        for (int64_t c = 0; c < d; c++)
            s += (double)sc->a_src[h * d + c] * ref_leaky(q[c] + k[c], sc->slope);
        break;
    case 6:
        s = 0;
        for (int64_t c = 0; c < d; c++)
            s += ref_phi(q[c]) * ref_phi(k[c]);
        return s;
    default: s = qk / sqrt((double)d);   /* scaled-dot and sigmoid */
    }
    if (sc->kind != 5) {
        s *= sc->beta;
        if (sc->softcap > 0)
            s = sc->softcap * tanh(s / sc->softcap);
    }
    if (sc->bias)
        s += sc->bias[e];
    if (sc->alibi)
        s += pow(2.0, -8.0 * (double)(h + 1) / (double)H) * (double)(j - i);
    return s;
}

/* ref_attention_scored on double Q, K, V. */
static void scored_attention(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                             const double *Q, const double *K, const double *V, int64_t H,
                             int64_t d, const ref_score_t *sc, double *M, double *W)
{
    double *s = malloc((size_t)(E + 1) * sizeof *s);
    memset(M, 0, (size_t)(N * H * d) * sizeof *M);
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < H; h++) {
            int64_t deg = 0;
            double mx = -INFINITY, z = 0;
            for (int64_t e = 0; e < E; e++)
                if (dst[e] == i) {
                    s[e] = ref_score(sc, Q, K, H, d, i, src[e], e, h);
                    mx = fmax(mx, s[e]);
                    deg++;
                }
            for (int64_t e = 0; e < E; e++)
                if (dst[e] == i)
                    z += sc->kind == 6 ? s[e] : exp(s[e] - mx);
            for (int64_t e = 0; e < E; e++) {
                if (dst[e] != i)
                    continue;
                double a;
                if (sc->kind == 5)
                    a = 1 / (1 + exp(-(s[e] + (sc->has_sigmoid_bias ? sc->sigmoid_bias
                                                                    : -log((double)deg)))));
                else if (sc->kind == 6)
                    a = z > 0 ? s[e] / z : 0;
                else
                    a = exp(s[e] - mx) / z;
                if (W)
                    W[e * H + h] = a;
                for (int64_t c = 0; c < d; c++)
                    M[(i * H + h) * d + c] += a * (V[(src[e] * H + h) * d + c] +
                                                   (sc->edge_value ? sc->edge_value[(e * H + h)
                                                                                    * d + c]
                                                                   : 0.0));
            }
        }
    free(s);
}

void ref_attention_scored(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                          const float *Q, const float *K, const float *V, int64_t H, int64_t d,
                          const ref_score_t *sc, double *M, double *W)
{
    double *q = to_double(Q, N * H * d), *k = to_double(K, N * H * d), *v = to_double(V, N * H * d);
    scored_attention(N, src, dst, E, q, k, v, H, d, sc, M, W);
    free(q), free(k), free(v);
}

void ref_lse_scored(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                    const float *Q, const float *K, int64_t H, int64_t d, const ref_score_t *sc,
                    double *lse)
{
    double *q = to_double(Q, N * H * d), *k = to_double(K, N * H * d);
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < H; h++) {
            double mx = -INFINITY, z = 0;
            for (int64_t e = 0; e < E; e++)
                if (dst[e] == i)
                    mx = fmax(mx, ref_score(sc, q, k, H, d, i, src[e], e, h));
            for (int64_t e = 0; e < E; e++)
                if (dst[e] == i)
                    z += exp(ref_score(sc, q, k, H, d, i, src[e], e, h) - mx);
            lse[i * H + h] = z > 0 ? mx + log(z) : -INFINITY;
        }
    free(q), free(k);
}

void ref_attention_sparse(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                          const float *Q, const float *K, const float *V, int64_t H, int64_t d,
                          double *M)
{
    const int64_t HD = H * d;
    int64_t max_deg = 0;
    for (int64_t e = 0, start = 0; e <= E; e++)
        if (e == E || (e > start && dst[e] != dst[start])) {
            max_deg = e - start > max_deg ? e - start : max_deg;
            start = e;
        }
    double *s = malloc((size_t)(max_deg + 1) * sizeof *s);
    memset(M, 0, (size_t)(N * HD) * sizeof *M);
    for (int64_t lo = 0; lo < E;) {
        int64_t hi = lo, i = dst[lo];
        while (hi < E && dst[hi] == i)
            hi++;
        for (int64_t h = 0; h < H; h++) {
            double mx = -INFINITY, z = 0;
            for (int64_t e = lo; e < hi; e++) {
                double dotp = 0;
                for (int64_t c = 0; c < d; c++)
                    dotp += (double)Q[i * HD + h * d + c] * K[src[e] * HD + h * d + c];
                s[e - lo] = dotp / sqrt((double)d);
                mx = fmax(mx, s[e - lo]);
            }
            for (int64_t e = lo; e < hi; e++)
                z += exp(s[e - lo] - mx);
            for (int64_t e = lo; e < hi; e++) {
                const double a = exp(s[e - lo] - mx) / z;
                for (int64_t c = 0; c < d; c++)
                    M[i * HD + h * d + c] += a * V[src[e] * HD + h * d + c];
            }
        }
        lo = hi;
    }
    free(s);
}

double ref_loss_mse(const double *X, const float *Y, int64_t N, int64_t D, const uint8_t *mask)
{
    double sum = 0;
    int64_t rows = 0;
    for (int64_t i = 0; i < N; i++) {
        if (mask && !mask[i])
            continue;
        rows++;
        for (int64_t c = 0; c < D; c++)
            sum += (X[i * D + c] - Y[i * D + c]) * (X[i * D + c] - Y[i * D + c]);
    }
    return sum / (double)(rows * D);
}

double ref_loss_cross_entropy(const double *X, int64_t N, int64_t D, const float *Wr,
                              const float *br, int64_t C, const int64_t *labels,
                              const uint8_t *mask)
{
    double *z = malloc((size_t)C * sizeof *z), sum = 0;
    int64_t n = 0;
    for (int64_t i = 0; i < N; i++) {
        if ((mask && !mask[i]) || labels[i] < 0)
            continue;
        double mx = -INFINITY, total = 0;
        for (int64_t c = 0; c < C; c++) {
            z[c] = br ? br[c] : 0.0;
            for (int64_t k = 0; k < D; k++)
                z[c] += X[i * D + k] * Wr[c * D + k];
            mx = fmax(mx, z[c]);
        }
        for (int64_t c = 0; c < C; c++)
            total += exp(z[c] - mx);
        sum += mx + log(total) - z[labels[i]];
        n++;
    }
    free(z);
    return sum / (double)n;
}

double ref_lm_loss(const ref_lm_t *m, int64_t B, const int64_t *ids, const int64_t *targets)
{
    const int64_t T = m->T, D = m->D, N = B * T, most = B * T * (T + 1) / 2;
    int64_t *src = malloc((size_t)most * sizeof *src), *dst = malloc((size_t)most * sizeof *dst);
    double *X = calloc((size_t)(N * D), sizeof *X);
    int64_t *at = malloc((size_t)N * sizeof *at);   /* each token's place */
    for (int64_t i = 0; i < N; i++) {
        at[i] = i % T;
        for (int64_t c = 0; c < D; c++)
            X[i * D + c] = (double)m->wte[ids[i] * D + c] + (m->rope ? 0.0 : m->wpe[at[i] * D + c]);
    }
    const ref_score_t sc = {.kind = 0, .beta = 1.0, .rope_pos = m->rope ? at : NULL};
    for (int64_t l = 0; l < m->L; l++) {   /* each block on its own messages */
        const int64_t W = m->window ? m->window[l] : 0;
        int64_t E = 0;
        for (int64_t b = 0; b < B; b++)   /* i reads j <= i of its own sequence, the last W */
            for (int64_t i = 0; i < T; i++)
                for (int64_t j = W > 0 && i - W + 1 > 0 ? i - W + 1 : 0; j <= i; j++)
                    src[E] = b * T + j, dst[E] = b * T + i, E++;
        ref_layers_shaped(N, src, dst, E, &m->layers[l], 1, &sc, X);
    }
    ref_layer_norm(X, X, N, D, 1, m->lnf_w, m->lnf_b);
    double loss = 0;
    int64_t counted = 0;
    for (int64_t i = 0; i < N; i++) {
        if (targets[i] < 0)
            continue;
        double mx = -INFINITY, z = 0, *logit = malloc((size_t)m->V * sizeof *logit);
        for (int64_t v = 0; v < m->V; v++) {
            logit[v] = 0;
            for (int64_t c = 0; c < D; c++)
                logit[v] += X[i * D + c] * m->wte[v * D + c];
            mx = fmax(mx, logit[v]);
        }
        for (int64_t v = 0; v < m->V; v++)
            z += exp(logit[v] - mx);
        loss += mx + log(z) - logit[targets[i]], counted++;
        free(logit);
    }
    free(src), free(dst), free(X), free(at);
    return counted ? loss / (double)counted : 0;
}
