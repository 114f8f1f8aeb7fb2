/*
 * ag_attention_backward against central finite differences of the dense
 * double-precision reference forward (tests/reference.c): the gradient of
 * L = sum(dM * M) with respect to every entry of Q, K and V.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "testutil.h"

/* A graph as messages, and its compiled neighbourhoods. */
typedef struct {
    int64_t N, E;
    int64_t *src, *dst;
    ag_nbhd_t nb;
} bw_graph_t;

/* Messages of a pattern compiled on N nodes (sources of each destination in
   slot order). */
static void graph_from_pattern(bw_graph_t *g, const char *spec, int64_t N)
{
    ag_pattern_t *p;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&p, spec, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&g->nb, p, N, AG_SELF_KEEP, &err), AG_OK);
    ag_pattern_free(p);
    g->N = N, g->E = g->nb.n_edges;
    g->src = malloc((size_t)(g->E + 1) * sizeof *g->src);
    g->dst = malloc((size_t)(g->E + 1) * sizeof *g->dst);
    ag_nbhd_sources(&g->nb, 0, N, g->src);
    for (int64_t i = 0; i < N; i++)
        for (int64_t s = g->nb.edge_ptr[i]; s < g->nb.edge_ptr[i + 1]; s++)
            g->dst[s] = i;
}

static void graph_free(bw_graph_t *g)
{
    ag_nbhd_destroy(&g->nb);
    free(g->src), free(g->dst);
}

/* L = sum dM * M with M from the double reference. */
static double ref_loss(const bw_graph_t *g, const float *Q, const float *K, const float *V,
                       int64_t H, int64_t d, const float *dM)
{
    const int64_t n = g->N * H * d;
    double *M = malloc((size_t)n * sizeof *M), L = 0;
    ref_attention(g->N, g->src, g->dst, g->E, Q, K, V, H, d, M, NULL);
    for (int64_t x = 0; x < n; x++)
        L += (double)dM[x] * M[x];
    free(M);
    return L;
}

/* Central difference of ref_loss in entry x of A (one of Q, K, V). */
static double fd(const bw_graph_t *g, float *Q, float *K, float *V, int64_t H, int64_t d,
                 const float *dM, float *A, int64_t x)
{
    const float keep = A[x], h = 1e-2f;
    A[x] = keep + h;
    const float up = A[x];
    const double Lp = ref_loss(g, Q, K, V, H, d, dM);
    A[x] = keep - h;
    const float down = A[x];
    const double Lm = ref_loss(g, Q, K, V, H, d, dM);
    A[x] = keep;
    return (Lp - Lm) / ((double)up - (double)down);
}

START_TEST(scaled_dot_matches_finite_differences)
{
    const char *specs[] = {"causal", "window:3+global:1", "random:4,3", "complete"};
    const int64_t H = 2, d = 5, N = 13, HD = H * d;
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        bw_graph_t g;
        graph_from_pattern(&g, specs[k], N);
        float *buf = malloc((size_t)(7 * N * HD) * sizeof *buf);
        float *Q = buf, *K = Q + N * HD, *V = K + N * HD, *dM = V + N * HD;
        float *dQ = dM + N * HD, *dK = dQ + N * HD, *dV = dK + N * HD;
        fill_uniform(Q, N * HD, 1 + k, 1.5f);
        fill_uniform(K, N * HD, 2 + k, 1.5f);
        fill_uniform(V, N * HD, 3 + k, 1.0f);
        fill_uniform(dM, N * HD, 4 + k, 1.0f);
        ag_attention_grads_t gr = {.dQ = dQ, .dK = dK, .dV = dV};
        ag_error_t err;
        ck_assert_int_eq(ag_attention_backward(&g.nb, Q, K, V, H, d, NULL, NULL, NULL, dM, &gr,
                                               &err), AG_OK);
        float *arrays[3] = {Q, K, V}, *grads[3] = {dQ, dK, dV};
        for (int a = 0; a < 3; a++)
            for (int64_t x = 0; x < N * HD; x++) {
                const double want = fd(&g, Q, K, V, H, d, dM, arrays[a], x);
                ck_assert_msg(fabs(grads[a][x] - want) <= 2e-3 + 2e-3 * fabs(want),
                              "%s: d%c[%lld] = %g, finite differences %g", specs[k], "QKV"[a],
                              (long long)x, grads[a][x], want);
            }
        free(buf);
        graph_free(&g);
    }
}
END_TEST

Suite *backward_suite(void)
{
    Suite *s = suite_create("backward");
    TCase *tc = tcase_create("backward");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, scaled_dot_matches_finite_differences);
    suite_add_tcase(s, tc);
    return s;
}
