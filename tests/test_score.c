/*
 * Score functions against the scored dense double reference (tests/reference.c):
 * every kind on a random graph with multi-edges, self-loops and a node with no
 * in-edges; huge logits; linear attention against its closed form.
 * Tolerance as in test_kernel.c: 2e-5 on outputs, 1e-5 on weights.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "testutil.h"

/* widths: D, and D_WIDE, a multiple of 16 but not of 32 (generic.c's blocked sums: a
   block of 32 channels, then one of 16; channel_sums' 8 lanes) */
enum { N = 13, H = 2, D = 5, D_WIDE = 48, HD_MAX = H * D_WIDE, MAX_E = 128 };

typedef struct {
    int64_t src[MAX_E], dst[MAX_E], E;
    ag_nbhd_t nb;
    int64_t d, HD;   /* head width, H * d */
    float Q[N * HD_MAX], K[N * HD_MAX], V[N * HD_MAX], a_src[HD_MAX], a_dst[HD_MAX];
    double bias[MAX_E];
    float bias_slot[MAX_E];
} fixture_t;

/* A random directed graph (node N-1 receives nothing) compiled from igraph;
   message e is edge e, and bias_slot holds bias[] in slot order; heads of
   width d. */
static void setup_wide(fixture_t *f, float scale, int64_t d)
{
    f->d = d, f->HD = H * d;
    const int64_t HD = f->HD;
    float r[2 * 60];
    fill_uniform(r, 120, 31, 1.0f);
    f->E = 0;
    for (int e = 0; e < 60; e++) {
        f->src[f->E] = (int64_t)((r[2 * e] + 1) / 2 * N) % N;
        f->dst[f->E++] = (int64_t)((r[2 * e + 1] + 1) / 2 * (N - 1)) % (N - 1);
    }
    f->src[f->E] = 4, f->dst[f->E++] = 4;     /* a self-loop, twice */
    f->src[f->E] = 4, f->dst[f->E++] = 4;
    igraph_t g;
    build_graph(&g, N, f->src, f->dst, f->E, 1);
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(&f->nb, &g, &err), AG_OK);
    igraph_destroy(&g);
    fill_uniform(f->Q, N * HD, 1, scale);
    fill_uniform(f->K, N * HD, 2, scale);
    fill_uniform(f->V, N * HD, 3, 1.0f);
    fill_uniform(f->a_src, HD, 4, 1.0f);
    fill_uniform(f->a_dst, HD, 5, 1.0f);
    float b[MAX_E];
    fill_uniform(b, f->E, 6, 2.0f);
    for (int64_t e = 0; e < f->E; e++)
        f->bias[e] = b[e];
    for (int64_t s = 0; s < f->E; s++)
        f->bias_slot[s] = (float)f->bias[f->nb.edge_id[s]];
}

static void setup(fixture_t *f, float scale)
{
    setup_wide(f, scale, D);
}

/* Runs both and compares messages and every weight (in the graph's edge order). */
static void check(fixture_t *f, const ag_score_t *sc, const ref_score_t *rs, const char *what)
{
    const int64_t d = f->d, HD = f->HD;
    float M[N * HD_MAX], W[MAX_E * H];
    double Mref[N * HD_MAX], Wref[MAX_E * H];
    ag_error_t err;
    ck_assert_msg(ag_attention(&f->nb, f->Q, f->K, f->V, H, d, sc, M, &err) == AG_OK, "%s: %s",
                  what, err.msg);
    ck_assert_int_eq(ag_attention_weights(&f->nb, f->Q, f->K, H, d, sc, 0, N, W, &err), AG_OK);
    ref_attention_scored(N, f->src, f->dst, f->E, f->Q, f->K, f->V, H, d, rs, Mref, Wref);
    double dm = max_abs_diff_fd(M, Mref, N * HD);
    ck_assert_msg(dm <= 2e-5, "%s, d=%lld: messages off by %g", what, (long long)d, dm);
    for (int64_t s = 0; s < f->E; s++)
        for (int64_t h = 0; h < H; h++) {
            double e = fabs(W[s * H + h] - Wref[f->nb.edge_id[s] * H + h]);
            ck_assert_msg(e <= 1e-5, "%s: weight of slot %lld head %lld off by %g", what,
                          (long long)s, (long long)h, e);
        }
    for (int c = 0; c < HD; c++)   /* the last node has no in-edges */
        ck_assert_float_eq(M[(N - 1) * HD + c], 0.0f);
}

static const struct {
    const char *name;
    ag_score_t sc;
    ref_score_t rs;
} kinds[] = {
    /* name, ours, the reference's (beta and slope spelt out: it has no defaults) */
    {"scaled-dot", {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT}, {.kind = 0, .beta = 1, .slope = 0.2}},
    {"dot", {SCORE_DEFAULTS, .kind = AG_SCORE_DOT}, {.kind = 1, .beta = 1, .slope = 0.2}},
    {"dot beta 3", {SCORE_DEFAULTS, .kind = AG_SCORE_DOT, .beta = 3}, {.kind = 1, .beta = 3, .slope = 0.2}},
    {"cosine beta 4", {SCORE_DEFAULTS, .kind = AG_SCORE_COSINE, .beta = 4}, {.kind = 2, .beta = 4, .slope = 0.2}},
    {"additive", {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE}, {.kind = 3, .beta = 1, .slope = 0.2}},
    {"additive slope 0.5", {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE, .slope = 0.5f},
     {.kind = 3, .beta = 1, .slope = 0.5}},
    {"additive slope 0 (ReLU)", {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE, .slope = 0},
     {.kind = 3, .beta = 1, .slope = 0}},
    {"gatv2", {SCORE_DEFAULTS, .kind = AG_SCORE_GATV2}, {.kind = 4, .beta = 1, .slope = 0.2}},
    {"gatv2 slope 0 (ReLU)", {SCORE_DEFAULTS, .kind = AG_SCORE_GATV2, .slope = 0},
     {.kind = 4, .beta = 1, .slope = 0}},
    {"dot beta 0 (uniform)", {SCORE_DEFAULTS, .kind = AG_SCORE_DOT, .beta = 0},
     {.kind = 1, .beta = 0, .slope = 0.2}},
    {"cosine beta 0 (uniform)", {SCORE_DEFAULTS, .kind = AG_SCORE_COSINE, .beta = 0},
     {.kind = 2, .beta = 0, .slope = 0.2}},
    {"sigmoid", {SCORE_DEFAULTS, .kind = AG_SCORE_SIGMOID}, {.kind = 5, .beta = 1, .slope = 0.2}},
    {"sigmoid bias -1", {SCORE_DEFAULTS, .kind = AG_SCORE_SIGMOID, .has_sigmoid_bias = 1, .sigmoid_bias = -1},
     {.kind = 5, .beta = 1, .slope = 0.2, .has_sigmoid_bias = 1, .sigmoid_bias = -1}},
    {"linear", {SCORE_DEFAULTS, .kind = AG_SCORE_LINEAR}, {.kind = 6, .beta = 1, .slope = 0.2}},
    {"scaled-dot softcap 0.5", {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT, .softcap = 0.5f},
     {.kind = 0, .beta = 1, .softcap = 0.5, .slope = 0.2}},
    {"dot beta 2 softcap 3", {SCORE_DEFAULTS, .kind = AG_SCORE_DOT, .beta = 2, .softcap = 3},
     {.kind = 1, .beta = 2, .softcap = 3, .slope = 0.2}},
    {"scaled-dot alibi", {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT, .alibi = 1},
     {.kind = 0, .beta = 1, .slope = 0.2, .alibi = 1}},
    {"sigmoid alibi", {SCORE_DEFAULTS, .kind = AG_SCORE_SIGMOID, .alibi = 1},
     {.kind = 5, .beta = 1, .slope = 0.2, .alibi = 1}},
};
#define N_KINDS ((int)(sizeof kinds / sizeof kinds[0]))

START_TEST(each_kind_matches_reference)
{
    fixture_t *f = malloc(sizeof *f);
    setup_wide(f, 1.5f, _i % 2 ? D_WIDE : D);   /* each kind at both widths */
    const int k = _i / 2;
    ag_score_t sc = kinds[k].sc;
    ref_score_t rs = kinds[k].rs;
    sc.a_src = rs.a_src = f->a_src;   /* gatv2: the vector a */
    sc.a_dst = rs.a_dst = f->a_dst;
    check(f, &sc, &rs, kinds[k].name);
    /* and with an edge bias on every message */
    sc.edge_bias = sc.kind == AG_SCORE_LINEAR ? NULL : f->bias_slot;
    rs.bias = sc.kind == AG_SCORE_LINEAR ? NULL : f->bias;
    check(f, &sc, &rs, kinds[k].name);
    ag_nbhd_destroy(&f->nb);
    free(f);
}
END_TEST

/* Scores of ~1e4: softmax kinds stay finite and exact. */
START_TEST(huge_logits_every_softmax_kind)
{
    fixture_t *f = malloc(sizeof *f);
    setup(f, 1.0f);
    for (int64_t x = 0; x < N * f->HD; x++)   /* integers: q.k is exact in float */
        f->Q[x] = roundf(f->Q[x] * 60), f->K[x] = roundf(f->K[x] * 60);
    for (int k = 0; k < N_KINDS; k++) {
        ag_score_t sc = kinds[k].sc;
        ref_score_t rs = kinds[k].rs;
        if (sc.kind == AG_SCORE_LINEAR || sc.kind == AG_SCORE_SIGMOID ||
            sc.kind == AG_SCORE_COSINE || sc.kind >= AG_SCORE_ADDITIVE)
            continue;   /* dot-product softmax kinds: the ones whose logits grow with |q||k| */
        check(f, &sc, &rs, kinds[k].name);
    }
    ag_nbhd_destroy(&f->nb);
    free(f);
}
END_TEST

/* Linear attention on a complete graph has a closed form:
   m_i = phi(q_i)^T S / (phi(q_i)^T z), S = sum_j phi(k_j) v_j^T, z = sum_j phi(k_j).
   Each width and range: d = 4 (phi's padded last vector only), 37 (two whole
   vectors and a padded one); inputs in [-2, 2], and in [-80, 1], where phi
   is e^x down to where a float has no normal value left. */
START_TEST(linear_closed_form)
{
    enum { n = 9, DMAX = 37 };
    const int d = _i % 2 ? DMAX : 4;
    const float lo = _i < 2 ? -2.0f : -80.0f, hi = _i < 2 ? 2.0f : 1.0f;
    float Q[n * DMAX], K[n * DMAX], V[n * DMAX], M[n * DMAX];
    fill_uniform(Q, n * d, 11, 1.0f), fill_uniform(K, n * d, 12, 1.0f);
    fill_uniform(V, n * d, 13, 1.0f);
    for (int x = 0; x < n * d; x++)   /* [-1, 1] to [lo, hi] */
        Q[x] = lo + (Q[x] + 1) / 2 * (hi - lo), K[x] = lo + (K[x] + 1) / 2 * (hi - lo);
    ag_pattern_t *p;
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&p, "complete", &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, p, n, AG_SELF_KEEP, &err), AG_OK);
    ag_score_t sc = {SCORE_DEFAULTS, .kind = AG_SCORE_LINEAR};
    ck_assert_int_eq(ag_attention(&nb, Q, K, V, 1, d, &sc, M, &err), AG_OK);
    double S[DMAX][DMAX] = {{0}}, z[DMAX] = {0};
    for (int j = 0; j < n; j++)
        for (int a = 0; a < d; a++) {
            double pk = K[j * d + a] > 0 ? K[j * d + a] + 1.0 : exp(K[j * d + a]);
            z[a] += pk;
            for (int b = 0; b < d; b++)
                S[a][b] += pk * V[j * d + b];
        }
    for (int i = 0; i < n; i++) {
        double pq[DMAX], den = 0;
        for (int a = 0; a < d; a++) {
            pq[a] = Q[i * d + a] > 0 ? Q[i * d + a] + 1.0 : exp(Q[i * d + a]);
            den += pq[a] * z[a];
        }
        for (int b = 0; b < d; b++) {
            double num = 0;
            for (int a = 0; a < d; a++)
                num += pq[a] * S[a][b];
            ck_assert_double_eq_tol(M[i * d + b], num / den, 2e-6);
        }
    }
    ag_nbhd_destroy(&nb);
    ag_pattern_free(p);
}
END_TEST

START_TEST(softcap_bounds_scores)
{
    /* with softcap C, any two weights of a destination differ by at most e^(2C) */
    fixture_t *f = malloc(sizeof *f);
    setup(f, 5.0f);
    ag_score_t sc = {SCORE_DEFAULTS, .kind = AG_SCORE_DOT, .softcap = 0.75f};
    float W[MAX_E * H];
    ag_error_t err;
    ck_assert_int_eq(ag_attention_weights(&f->nb, f->Q, f->K, H, D, &sc, 0, N, W, &err), AG_OK);
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < H; h++) {
            float lo = 1, hi = 0;
            for (int64_t s = f->nb.edge_ptr[i]; s < f->nb.edge_ptr[i + 1]; s++)
                lo = fminf(lo, W[s * H + h]), hi = fmaxf(hi, W[s * H + h]);
            if (f->nb.edge_ptr[i + 1] > f->nb.edge_ptr[i])
                ck_assert_float_le(hi / lo, expf(2 * 0.75f) * 1.0001f);
        }
    ag_nbhd_destroy(&f->nb);
    free(f);
}
END_TEST

START_TEST(bad_scores_are_refused)
{
    fixture_t *f = malloc(sizeof *f);
    setup(f, 1.0f);
    float M[N * HD_MAX];
    ag_error_t err;
    ag_score_t sc = {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE};
    ck_assert_fails_with(ag_attention(&f->nb, f->Q, f->K, f->V, H, D, &sc, M, &err), err,
                         AG_EINVAL, "a_src and a_dst");
    sc = (ag_score_t){SCORE_DEFAULTS, .kind = AG_SCORE_LINEAR, .beta = 2};
    ck_assert_fails_with(ag_attention(&f->nb, f->Q, f->K, f->V, H, D, &sc, M, &err), err,
                         AG_EINVAL, "not to linear");
    sc = (ag_score_t){SCORE_DEFAULTS, .kind = AG_SCORE_LINEAR, .alibi = 1};
    ck_assert_fails_with(ag_attention(&f->nb, f->Q, f->K, f->V, H, D, &sc, M, &err), err,
                         AG_EINVAL, "no edge bias or ALiBi");
    sc = (ag_score_t){SCORE_DEFAULTS, .kind = AG_SCORE_DOT, .beta = -1};
    ck_assert_fails_with(ag_attention(&f->nb, f->Q, f->K, f->V, H, D, &sc, M, &err), err,
                         AG_EINVAL, "beta -1");
    sc = (ag_score_t){SCORE_DEFAULTS, .dropout = 1};
    ck_assert_fails_with(ag_attention(&f->nb, f->Q, f->K, f->V, H, D, &sc, M, &err), err,
                         AG_EINVAL, "dropout 1; expected a probability in [0, 1)");
    ag_nbhd_destroy(&f->nb);
    free(f);
}
END_TEST

START_TEST(stats_match_weights)
{
    fixture_t *f = malloc(sizeof *f);
    setup(f, 1.5f);
    ag_score_t sc = {SCORE_DEFAULTS, .kind = AG_SCORE_COSINE, .beta = 3};
    float W[MAX_E * H];
    double ent[N], dist[N], top[N];
    ag_error_t err;
    ck_assert_int_eq(ag_attention_weights(&f->nb, f->Q, f->K, H, D, &sc, 0, N, W, &err), AG_OK);
    ck_assert_int_eq(ag_attention_stats(&f->nb, f->Q, f->K, H, D, &sc, ent, dist, top, &err),
                     AG_OK);
    int64_t src[MAX_E];
    ag_nbhd_sources(&f->nb, 0, N, src);
    for (int64_t i = 0; i < N; i++) {
        if (f->nb.edge_ptr[i + 1] == f->nb.edge_ptr[i]) {
            ck_assert(isnan(ent[i]) && isnan(dist[i]) && isnan(top[i]));
            continue;
        }
        double e = 0, dd = 0, t = 0;
        for (int64_t s = f->nb.edge_ptr[i]; s < f->nb.edge_ptr[i + 1]; s++)
            for (int64_t h = 0; h < H; h++) {
                const double a = W[s * H + h];
                e -= a > 0 ? a * log(a) / H : 0;
                dd += a * fabs((double)(i - src[s])) / H;
                t = fmax(t, a);
            }
        ck_assert_double_eq_tol(ent[i], e, 1e-6);
        ck_assert_double_eq_tol(dist[i], dd, 1e-6);
        ck_assert_double_eq_tol(top[i], t, 1e-7);
    }
    ag_nbhd_destroy(&f->nb);
    free(f);
}
END_TEST

/* The initialisers hold the documented defaults (docs/python.md "Values are taken as
   given"), field by field, and the init functions give the same. */
START_TEST(initialisers_hold_the_documented_defaults)
{
    const ag_score_t sc = AG_SCORE_INIT;
    ck_assert_int_eq(sc.kind, AG_SCORE_SCALED_DOT);
    ck_assert(sc.beta == 1.0f && sc.softcap == 0.0f && sc.slope == 0.2f);
    ck_assert(!sc.a_src && !sc.a_dst && !sc.edge_bias && !sc.alibi && !sc.has_sigmoid_bias);
    ag_score_t s2;
    memset(&s2, 0xff, sizeof s2);
    ag_score_init(&s2, AG_SCORE_GATV2);
    ck_assert_int_eq(s2.kind, AG_SCORE_GATV2);
    ck_assert(s2.beta == 1.0f && s2.softcap == 0.0f && s2.slope == 0.2f && !s2.a_src);
    const ag_round_opts_t ro = AG_ROUND_OPTS_INIT;
    ck_assert(ro.ln_eps == 1e-5f && !ro.score && !ro.no_residual && ro.norm == AG_NORM_NONE);
    ck_assert(!ro.on_round && !ro.figures && !ro.on_progress);
    ag_round_opts_t r2;
    memset(&r2, 0xff, sizeof r2);
    ag_round_opts_init(&r2);
    ck_assert(r2.ln_eps == 1e-5f && !r2.score && !r2.on_round);
    const ag_optimizer_opts_t oo = AG_OPTIMIZER_OPTS_INIT;
    ck_assert_int_eq(oo.kind, AG_OPT_ADAM);
    ck_assert(oo.lr == 0.01f && oo.beta1 == 0.9f && oo.beta2 == 0.999f && oo.eps == 1e-8f);
    ck_assert(oo.momentum == 0 && oo.weight_decay == 0 && oo.clip == 0);
    ag_optimizer_opts_t o2;
    memset(&o2, 0xff, sizeof o2);
    ag_optimizer_opts_init(&o2, AG_OPT_SGD);
    ck_assert_int_eq(o2.kind, AG_OPT_SGD);
    ck_assert(o2.lr == 0.01f && o2.beta1 == 0.9f && o2.eps == 1e-8f && o2.momentum == 0);
}
END_TEST

Suite *score_suite(void)
{
    Suite *s = suite_create("score");
    TCase *tc = tcase_create("score");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, each_kind_matches_reference, 0, 2 * N_KINDS);
    tcase_add_test(tc, huge_logits_every_softmax_kind);
    tcase_add_loop_test(tc, linear_closed_form, 0, 4);
    tcase_add_test(tc, softcap_bounds_scores);
    tcase_add_test(tc, bad_scores_are_refused);
    tcase_add_test(tc, stats_match_weights);
    tcase_add_test(tc, initialisers_hold_the_documented_defaults);
    suite_add_tcase(s, tc);
    return s;
}
