/*
 * ag_attention_backward against central finite differences of the dense
 * double-precision reference forward (tests/reference.c): the gradient of
 * L = sum(dM * M) with respect to every entry of Q, K and V, the edge biases
 * and the attention vectors, for every score kind, on graphs with multi-edges,
 * self-loops, isolated nodes and undirected edges; logits of magnitude 1e4;
 * 1 and 2 threads bitwise the same; the error paths.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/base.h"
#include "kernels/kernels.h"
#include "reference.h"
#include "testutil.h"

/* A graph as messages, and its compiled neighbourhoods. */
typedef struct {
    int64_t N, E;
    int64_t *src, *dst;
    ag_nbhd_t nb;
} bw_graph_t;

/* g's messages in slot order from its compiled neighbourhoods. */
static void slot_messages(bw_graph_t *g, int64_t N)
{
    g->N = N, g->E = g->nb.n_edges;
    g->src = malloc((size_t)(g->E + 1) * sizeof *g->src);
    g->dst = malloc((size_t)(g->E + 1) * sizeof *g->dst);
    ag_nbhd_sources(&g->nb, 0, N, g->src);
    for (int64_t i = 0; i < N; i++)
        for (int64_t s = g->nb.edge_ptr[i]; s < g->nb.edge_ptr[i + 1]; s++)
            g->dst[s] = i;
}

/* Messages of a pattern compiled on N nodes (sources of each destination in
   slot order). */
static void graph_from_pattern(bw_graph_t *g, const char *spec, int64_t N)
{
    ag_pattern_t *p;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&p, spec, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&g->nb, p, N, AG_SELF_KEEP, &err), AG_OK);
    ag_pattern_free(p);
    slot_messages(g, N);
}

/* The igraph graph of the edges src[e] -> dst[e] (undirected: both ways),
   compiled; messages in slot order. */
static void graph_from_edges(bw_graph_t *g, int64_t N, const int64_t *src, const int64_t *dst,
                             int64_t E, int directed)
{
    igraph_t ig;
    ag_error_t err;
    build_graph(&ig, N, src, dst, E, directed);
    ck_assert_int_eq(ag_nbhd_from_graph(&g->nb, &ig, &err), AG_OK);
    igraph_destroy(&ig);
    slot_messages(g, N);
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

/* ---- awkward graphs ---- */

/* A directed multigraph on 13 nodes: 0 -> 3 twice, 2 -> 7 three times,
   self-loops 5 -> 5 (twice) and 9 -> 9, node 11 sends but receives nothing,
   node 12 is isolated; then pseudo-random edges. Returns E. */
static int64_t multigraph_edges(int64_t *src, int64_t *dst, int64_t E_want, int64_t N)
{
    static const int64_t fixed[][2] = {{0, 3}, {0, 3}, {2, 7}, {2, 7}, {2, 7},
                                       {5, 5}, {5, 5}, {9, 9}, {11, 0}, {11, 4}};
    int64_t E = 0;
    for (size_t k = 0; k < sizeof fixed / sizeof *fixed; k++)
        src[E] = fixed[k][0], dst[E++] = fixed[k][1];
    uint64_t x = 12345;
    while (E < E_want) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        src[E] = (int64_t)((x >> 33) % (uint64_t)(N - 1));   /* never N-1 */
        dst[E++] = (int64_t)((x >> 45) % (uint64_t)(N - 2)); /* never N-2, N-1 */
    }
    return E;
}

static void multigraph(bw_graph_t *g)
{
    int64_t src[48], dst[48];
    graph_from_edges(g, 13, src, dst, multigraph_edges(src, dst, 48, 13), 1);
}

/* An undirected graph on 11 nodes with a self-loop, a double edge, and node
   10 isolated. */
static void undirected_graph(bw_graph_t *g)
{
    static const int64_t src[] = {0, 1, 1, 4, 2, 3, 5, 6, 7, 8, 9, 0, 3, 6, 2};
    static const int64_t dst[] = {1, 2, 2, 4, 5, 7, 8, 9, 9, 0, 3, 6, 3, 6, 8};
    graph_from_edges(g, 11, src, dst, (int64_t)(sizeof src / sizeof *src), 0);
}

enum { G_PATTERN, G_MULTI, G_UNDIRECTED, G_CAUSAL, G_COUNT };

static void awkward_graph(bw_graph_t *g, int which)
{
    if (which == G_PATTERN)
        graph_from_pattern(g, "random:4,3", 13);
    else if (which == G_CAUSAL)   /* runs of 1-13 sources: groups of four and leftovers */
        graph_from_pattern(g, "causal", 13);
    else if (which == G_MULTI)
        multigraph(g);
    else
        undirected_graph(g);
}

/* ---- a problem: a graph, inputs, a score, the gradients ---- */

typedef struct {
    bw_graph_t g;
    int64_t H, d;
    float *Q, *K, *V, *dM;    /* [N, H*d] */
    float *bias;              /* [E] in slot order; zeros when the score takes none */
    float *a_src, *a_dst;     /* [H, d] */
    ag_score_t sc;            /* its edge_bias and vectors point at the arrays above */
    float *dQ, *dK, *dV, *d_bias, *d_a_src, *d_a_dst;
    float *mem;
} problem_t;

/* Score variants: every kind, with and without beta, softcap, edge bias
   (bias set) and ALiBi. */
static const struct {
    const char *name;
    ag_score_t sc;
    int bias;
} variants[] = {
    {"scaled-dot beta softcap", {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT, .beta = 1.7f, .softcap = 2.5f}, 0},
    {"dot edge-bias", {SCORE_DEFAULTS, .kind = AG_SCORE_DOT}, 1},
    {"scaled-dot alibi", {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT, .alibi = 1}, 0},
    {"cosine beta", {SCORE_DEFAULTS, .kind = AG_SCORE_COSINE, .beta = 3}, 0},
    {"cosine beta softcap alibi edge-bias",
     {SCORE_DEFAULTS, .kind = AG_SCORE_COSINE, .beta = 4, .softcap = 3, .alibi = 1}, 1},
    {"additive", {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE}, 0},
    {"additive slope softcap edge-bias", {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE, .slope = 0.1f,
                                          .softcap = 2}, 1},
    {"gatv2", {SCORE_DEFAULTS, .kind = AG_SCORE_GATV2}, 0},
    {"gatv2 beta alibi edge-bias", {SCORE_DEFAULTS, .kind = AG_SCORE_GATV2, .beta = 0.7f, .alibi = 1}, 1},
    {"sigmoid", {SCORE_DEFAULTS, .kind = AG_SCORE_SIGMOID}, 0},
    {"sigmoid bias alibi edge-bias", {SCORE_DEFAULTS, .kind = AG_SCORE_SIGMOID, .has_sigmoid_bias = 1,
                                      .sigmoid_bias = -0.5f, .alibi = 1}, 1},
    {"linear", {SCORE_DEFAULTS, .kind = AG_SCORE_LINEAR}, 0},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof *variants))

/* Takes g; inputs from seed, Q and K uniform in [-qk, qk]. */
static void problem_init(problem_t *p, bw_graph_t *g, int64_t H, int64_t d, int variant,
                         uint64_t seed, float qk)
{
    memset(p, 0, sizeof *p);
    p->g = *g, p->H = H, p->d = d;
    const int64_t n = g->N * H * d, E = g->E, HD = H * d;
    p->mem = malloc((size_t)(8 * n + 2 * (E + 1) + 4 * HD) * sizeof *p->mem);
    float *x = p->mem;
    p->Q = x, p->K = x + n, p->V = x + 2 * n, p->dM = x + 3 * n;
    p->dQ = x + 4 * n, p->dK = x + 5 * n, p->dV = x + 6 * n;   /* 7n: spare */
    p->bias = x + 8 * n, p->d_bias = p->bias + E + 1;
    p->a_src = p->d_bias + E + 1, p->a_dst = p->a_src + HD;
    p->d_a_src = p->a_dst + HD, p->d_a_dst = p->d_a_src + HD;
    fill_uniform(p->Q, n, seed, qk);
    fill_uniform(p->K, n, seed + 1, qk);
    fill_uniform(p->V, n, seed + 2, 1.0f);
    fill_uniform(p->dM, n, seed + 3, 1.0f);
    fill_uniform(p->a_src, HD, seed + 4, 0.8f);
    fill_uniform(p->a_dst, HD, seed + 5, 0.8f);
    memset(p->bias, 0, (size_t)E * sizeof *p->bias);
    p->sc = variants[variant].sc;
    if (variants[variant].bias) {
        fill_uniform(p->bias, E, seed + 6, 1.0f);
        p->sc.edge_bias = p->bias;
    }
    if (p->sc.kind == AG_SCORE_ADDITIVE || p->sc.kind == AG_SCORE_GATV2)
        p->sc.a_src = p->a_src;
    if (p->sc.kind == AG_SCORE_ADDITIVE)
        p->sc.a_dst = p->a_dst;
}

static void problem_free(problem_t *p)
{
    graph_free(&p->g);
    free(p->mem);
}

/* The reference's description of p's score, with bias [E] per message. */
static ref_score_t ref_score_of(const problem_t *p, const double *bias)
{
    const ag_score_t *s = &p->sc;
    return (ref_score_t){(int)s->kind, s->beta != 0 ? s->beta : 1.0, s->softcap,
                         s->slope != 0 ? s->slope : 0.2, p->a_src, p->a_dst, bias, s->alibi,
                         s->has_sigmoid_bias, s->sigmoid_bias, NULL, NULL, NULL, NULL};
}

/* L = sum dM * M with M from the double reference (messages in slot order,
   the bias always given: zeros when the score has none). */
static double problem_loss(const problem_t *p)
{
    const int64_t n = p->g.N * p->H * p->d, E = p->g.E;
    double *M = malloc((size_t)n * sizeof *M), *bias = malloc((size_t)(E + 1) * sizeof *bias);
    for (int64_t e = 0; e < E; e++)
        bias[e] = p->bias[e];
    const ref_score_t rs = ref_score_of(p, bias);
    ref_attention_scored(p->g.N, p->g.src, p->g.dst, E, p->Q, p->K, p->V, p->H, p->d, &rs, M,
                         NULL);
    double L = 0;
    for (int64_t x = 0; x < n; x++)
        L += (double)p->dM[x] * M[x];
    free(M), free(bias);
    return L;
}

/* Central difference of problem_loss in entry x of A (an array of p), step h. */
static double problem_fd(problem_t *p, float *A, int64_t x, float h)
{
    const float keep = A[x];
    A[x] = keep + h;
    const float up = A[x];
    const double Lp = problem_loss(p);
    A[x] = keep - h;
    const float down = A[x];
    const double Lm = problem_loss(p);
    A[x] = keep;
    return (Lp - Lm) / ((double)up - (double)down);
}

/* The largest |analytic - fd| / (1 + |fd|) seen and the entries skipped at
   kinks, for the report (AG_TEST_VERBOSE). */
static double worst_seen;
static int64_t kinks_seen;

/*
 * Asserts |grad[x] - fd| <= tol (1 + |fd|) for x < n. Where they disagree and
 * the difference with step h/16 moves by more than tol too, the loss has a
 * kink within h (LeakyReLU at 0): that entry is skipped; at most 1 in 50 may be.
 */
static void check_grad(problem_t *p, const char *what, const char *name, float *A,
                       const float *grad, int64_t n, float h, double tol)
{
    int64_t skipped = 0;
    for (int64_t x = 0; x < n; x++) {
        const double want = problem_fd(p, A, x, h);
        ck_assert_msg(isfinite(grad[x]), "%s: %s[%lld] = %g", what, name, (long long)x,
                      grad[x]);
        double e = fabs(grad[x] - want) / (1 + fabs(want));
        if (e > tol) {
            const double fine = problem_fd(p, A, x, h / 16);
            if (fabs(fine - want) / (1 + fabs(want)) > tol) {
                skipped++;
                continue;
            }
        }
        ck_assert_msg(e <= tol, "%s: %s[%lld] = %.7g, finite differences %.7g", what, name,
                      (long long)x, grad[x], want);
        if (e > worst_seen)
            worst_seen = e;
    }
    ck_assert_msg(skipped <= n / 50, "%s: %s: %lld of %lld entries at kinks", what, name,
                  (long long)skipped, (long long)n);
    kinks_seen += skipped;
}

/* ag_attention_backward on p into its gradient arrays (first filled with NAN:
   each must be overwritten). */
static int problem_backward(problem_t *p, ag_error_t *err)
{
    const int64_t n = p->g.N * p->H * p->d, HD = p->H * p->d;
    float *outs[] = {p->dQ, p->dK, p->dV, p->d_bias, p->d_a_src, p->d_a_dst};
    const int64_t sizes[] = {n, n, n, p->g.E, HD, HD};
    for (int k = 0; k < 6; k++)
        for (int64_t x = 0; x < sizes[k]; x++)
            outs[k][x] = NAN;
    ag_attention_grads_t gr = {.dQ = p->dQ, .dK = p->dK, .dV = p->dV, .d_a_src = p->d_a_src,
                               .d_a_dst = p->d_a_dst, .d_edge_bias = p->d_bias};
    return ag_attention_backward(&p->g.nb, p->Q, p->K, p->V, p->H, p->d, &p->sc, NULL, NULL,
                                 p->dM, &gr, err);
}

/* Every gradient of p against finite differences. */
static void check_problem(problem_t *p, const char *what, float h, double tol)
{
    ag_error_t err;
    ck_assert_msg(problem_backward(p, &err) == AG_OK, "%s: %s", what, err.msg);
    const int64_t n = p->g.N * p->H * p->d, HD = p->H * p->d;
    check_grad(p, what, "dQ", p->Q, p->dQ, n, h, tol);
    check_grad(p, what, "dK", p->K, p->dK, n, h, tol);
    check_grad(p, what, "dV", p->V, p->dV, n, h, tol);
    check_grad(p, what, "d_edge_bias", p->bias, p->d_bias, p->g.E, h, tol);
    /* vectors a kind does not read get zeros */
    check_grad(p, what, "d_a_src", p->a_src, p->d_a_src, HD, h, tol);
    check_grad(p, what, "d_a_dst", p->a_dst, p->d_a_dst, HD, h, tol);
}

/* Every score variant on one awkward graph, H = 3, d = 5; on the causal
   graph d = 16, where generic.c sums each score's channels in lanes of 8,
   four sources of a run at a time. */
static void every_kind_on(int which)
{
    const char *graphs[] = {"pattern random:4,3", "multigraph", "undirected", "causal, d = 16"};
    for (int v = 0; v < N_VARIANTS; v++) {
        bw_graph_t g;
        awkward_graph(&g, which);
        problem_t p;
        problem_init(&p, &g, 3, which == G_CAUSAL ? 16 : 5, v, 10 + 7 * (uint64_t)v, 1.5f);
        char what[160];
        snprintf(what, sizeof what, "%s on %s", variants[v].name, graphs[which]);
        worst_seen = 0, kinks_seen = 0;
        check_problem(&p, what, 1e-3f, 1e-5);
        if (getenv("AG_TEST_VERBOSE"))
            fprintf(stderr, "%-36s on %-18s E %3lld: |g - fd| / (1 + |fd|) <= %.2e, %lld kinks\n",
                    variants[v].name, graphs[which], (long long)p.g.E, worst_seen,
                    (long long)kinks_seen);
        problem_free(&p);
    }
}

START_TEST(every_kind_on_a_pattern)
{
    every_kind_on(G_PATTERN);
}
END_TEST

START_TEST(every_kind_on_a_multigraph)
{
    every_kind_on(G_MULTI);
}
END_TEST

START_TEST(every_kind_on_an_undirected_graph)
{
    every_kind_on(G_UNDIRECTED);
}
END_TEST

START_TEST(every_kind_on_a_causal_graph_of_wider_heads)
{
    every_kind_on(G_CAUSAL);
}
END_TEST

/*
 * The score kinds on vectors (score_rows.c: scaled-dot with ALiBi, cosine,
 * additive, gatv2). Gradients against finite differences on causal 70 with d = 9
 * (rows of more messages than a chunk of 64, in and out; a channel past the
 * vectors); then on every compiled instruction set, with d = 41 (every width
 * of block of channels), the forward against the double reference; every
 * set sums in the same order and fuses no product into a sum, so all give
 * the same bits.
 */
static void score_rows_by_finite_differences(int variant)
{
    const int64_t N = 70, H = 1, d = 9, n = N * H * d;
    bw_graph_t g;
    graph_from_pattern(&g, "causal", N);
    problem_t p;
    problem_init(&p, &g, H, d, variant, 90 + (uint64_t)variant, 1.5f);
    const char *what = variants[variant].name;
    ag_error_t err;
    ck_assert_int_eq(problem_backward(&p, &err), AG_OK);
    /* (GAT's: a smaller step, that fewer of the messages' LeakyReLUs cross 0) */
    const int gat = p.sc.kind == AG_SCORE_ADDITIVE || p.sc.kind == AG_SCORE_GATV2;
    const float step = gat ? 1e-4f : 1e-3f;
    check_grad(&p, what, "dQ", p.Q, p.dQ, n, step, 1e-5);
    check_grad(&p, what, "dK", p.K, p.dK, n, step, 1e-5);
    check_grad(&p, what, "dV", p.V, p.dV, n, step, 1e-5);
    if (gat) {
        /* a step in an attention vector moves all 2,485 messages' LeakyReLUs,
           and one of them crosses 0: its gradients against the scalar rows
           instead (which asking for an edge term's gradient takes) */
        float *two = malloc((size_t)(3 * n + 2 * H * d + p.g.E * H * d) * sizeof *two);
        float *edge = two + 3 * n + 2 * H * d;
        ag_attention_grads_t gr = {.dQ = two, .dK = two + n, .dV = two + 2 * n,
                                   .d_a_src = two + 3 * n, .d_a_dst = two + 3 * n + H * d};
        if (p.sc.kind == AG_SCORE_ADDITIVE)
            gr.d_edge_pre = edge;
        else
            gr.d_edge_key = edge;
        ck_assert_int_eq(ag_attention_backward(&p.g.nb, p.Q, p.K, p.V, H, d, &p.sc, NULL, NULL,
                                               p.dM, &gr, &err), AG_OK);
        const float *mine[] = {p.dQ, p.dK, p.dV, p.d_a_src, p.d_a_dst};
        const float *scalar[] = {gr.dQ, gr.dK, gr.dV, gr.d_a_src, gr.d_a_dst};
        for (int a = 0; a < 5; a++)
            for (int64_t x = 0; x < (a < 3 ? n : H * d); x++)
                ck_assert_msg(fabs(mine[a][x] - scalar[a][x]) <= 1e-5 * (1 + fabs(scalar[a][x])),
                              "%s: gradient %d [%lld] = %.7g, the scalar rows' %.7g", what, a,
                              (long long)x, mine[a][x], scalar[a][x]);
        free(two);
    }
    problem_free(&p);
}

/* M, then dQ, dK, dV [4 n] of the problem on causal 70, H = 2, d = 41, on the
   instruction set forced; M checked against the reference. */
static float *score_rows_outputs(int variant, int level)
{
    const int64_t N = 70, H = 2, d = 41, n = N * H * d;
    ag_i_simd_force(level);
    bw_graph_t g;
    graph_from_pattern(&g, "causal", N);
    problem_t p;
    problem_init(&p, &g, H, d, variant, 95 + (uint64_t)variant, 1.5f);
    ag_error_t err;
    ck_assert_int_eq(problem_backward(&p, &err), AG_OK);
    float *out = malloc((size_t)(4 * n) * sizeof *out);
    ck_assert_int_eq(ag_attention(&p.g.nb, p.Q, p.K, p.V, H, d, &p.sc, out, &err), AG_OK);
    memcpy(out + n, p.dQ, (size_t)n * sizeof *out);
    memcpy(out + 2 * n, p.dK, (size_t)n * sizeof *out);
    memcpy(out + 3 * n, p.dV, (size_t)n * sizeof *out);
    double *M = malloc((size_t)n * sizeof *M), *bias = calloc((size_t)p.g.E, sizeof *bias);
    const ref_score_t rs = ref_score_of(&p, bias);
    ref_attention_scored(N, p.g.src, p.g.dst, p.g.E, p.Q, p.K, p.V, H, d, &rs, M, NULL);
    for (int64_t x = 0; x < n; x++)
        ck_assert_msg(fabs(out[x] - M[x]) <= 1e-5 * (1 + fabs(M[x])),
                      "%s, level %d: M[%lld] = %.7g, reference %.7g", variants[variant].name,
                      level, (long long)x, out[x], M[x]);
    free(M), free(bias);
    problem_free(&p);
    ag_i_simd_force(-1);
    return out;
}

START_TEST(score_rows_on_every_instruction_set)
{
    const int kinds[] = {2, 3, 5, 7};   /* scaled-dot alibi, cosine beta, additive, gatv2 */
    const int best = (int)ag_i_simd_level();
    const int64_t n = 70 * 2 * 41;
    for (int k = 0; k < 4; k++) {
        const char *name = variants[kinds[k]].name;
        score_rows_by_finite_differences(kinds[k]);
        float *got[3] = {NULL, NULL, NULL};
        for (int level = AG_SIMD_BASE; level <= best; level++)
            got[level] = score_rows_outputs(kinds[k], level);
        for (int level = AG_SIMD_BASE; level < best; level++)
            ck_assert_msg(!memcmp(got[level], got[best], (size_t)(4 * n) * sizeof(float)),
                          "%s: level %d and level %d differ", name, level, best);
        for (int level = AG_SIMD_BASE; level <= best; level++)
            free(got[level]);
    }
}
END_TEST

/* ---- the edge bias in the graph's edge order ---- */

/*
 * d_edge_bias is in slot order; ag_edge_order maps it to the graph's
 * messages. The reference here takes the messages in the graph's order with a
 * bias per message, so only that mapping connects the two.
 */
static void edge_bias_in_edge_order(bw_graph_t *g, int variant, const int64_t *src,
                                    const int64_t *dst)
{
    problem_t p;
    problem_init(&p, g, 3, 5, variant, 99, 1.5f);
    const int64_t E = p.g.E, N = p.g.N, n = N * p.H * p.d;
    ag_edge_msg_t *msgs;
    int64_t *slot;
    ag_error_t err;
    ck_assert_int_eq(ag_edge_order(&p.g.nb, &msgs, &slot, &err), AG_OK);
    int64_t *msrc = malloc((size_t)E * sizeof *msrc), *mdst = malloc((size_t)E * sizeof *mdst);
    double *b = malloc((size_t)E * sizeof *b), *M = malloc((size_t)n * sizeof *M);
    for (int64_t k = 0; k < E; k++) {
        if (src)   /* directed: message k is edge k as given */
            ck_assert(msgs[k].src == src[k] && msgs[k].dst == dst[k]);
        msrc[k] = msgs[k].src, mdst[k] = msgs[k].dst;
        b[k] = p.bias[slot[k]];
    }
    ck_assert_int_eq(problem_backward(&p, &err), AG_OK);
    const ref_score_t rs = ref_score_of(&p, b);
    for (int64_t k = 0; k < E; k++) {
        double L[2];
        const double keep = b[k], h = 1e-3;
        for (int side = 0; side < 2; side++) {
            b[k] = keep + (side ? -h : h);
            ref_attention_scored(N, msrc, mdst, E, p.Q, p.K, p.V, p.H, p.d, &rs, M, NULL);
            L[side] = 0;
            for (int64_t x = 0; x < n; x++)
                L[side] += (double)p.dM[x] * M[x];
        }
        b[k] = keep;
        const double want = (L[0] - L[1]) / (2 * h), got = p.d_bias[slot[k]];
        ck_assert_msg(fabs(got - want) <= 1e-5 * (1 + fabs(want)),
                      "%s: edge %lld (%lld -> %lld): %.7g, finite differences %.7g",
                      variants[variant].name, (long long)msgs[k].edge_id,
                      (long long)msgs[k].src, (long long)msgs[k].dst, got, want);
    }
    free(msgs), free(slot), free(msrc), free(mdst), free(b), free(M);
    problem_free(&p);
}

START_TEST(edge_bias_gradient_in_graph_edge_order)
{
    int64_t src[48], dst[48];
    const int64_t E = multigraph_edges(src, dst, 48, 13);
    for (int v = 0; v < N_VARIANTS; v++) {
        if (!variants[v].bias)
            continue;
        bw_graph_t g;
        graph_from_edges(&g, 13, src, dst, E, 1);
        edge_bias_in_edge_order(&g, v, src, dst);
        undirected_graph(&g);
        edge_bias_in_edge_order(&g, v, NULL, NULL);
    }
}
END_TEST

/* ---- logits of magnitude 1e4 ---- */

/*
 * Each destination's slots get the same bias of magnitude 1e4 on top of
 * their own: the softmax does not change, so the gradients must match finite
 * differences (of the double reference, which keeps the large bias exactly)
 * and the gradients without the large part; each destination's d_edge_bias
 * sums to 0 per head, hence over heads.
 */
START_TEST(large_logits_that_cancel)
{
    for (int v = 0; v < N_VARIANTS; v++) {
        const ag_score_kind_t kind = variants[v].sc.kind;
        if (!ag_i_is_softmax(kind))
            continue;
        bw_graph_t g;
        multigraph(&g);
        problem_t p, small;
        problem_init(&p, &g, 3, 5, v, 50, 1.5f);
        multigraph(&g);
        problem_init(&small, &g, 3, 5, v, 50, 1.5f);
        ag_error_t err;
        ck_assert_int_eq(problem_backward(&small, &err), AG_OK);
        p.sc.edge_bias = p.bias;
        for (int64_t i = 0; i < p.g.N; i++)
            for (int64_t s = p.g.nb.edge_ptr[i]; s < p.g.nb.edge_ptr[i + 1]; s++)
                p.bias[s] += (i % 2 ? 1e4f : -1e4f) * (float)(1 + i % 3);
        ck_assert_int_eq(problem_backward(&p, &err), AG_OK);
        const int64_t n = p.g.N * p.H * p.d;
        char what[160];
        snprintf(what, sizeof what, "%s, biases of 1e4", variants[v].name);
        worst_seen = 0;
        /* float scores near 1e4 are rounded to 2^-11: weights to ~5e-4 */
        check_grad(&p, what, "dQ", p.Q, p.dQ, n, 1e-3f, 1e-2);
        check_grad(&p, what, "dK", p.K, p.dK, n, 1e-3f, 1e-2);
        check_grad(&p, what, "dV", p.V, p.dV, n, 1e-3f, 1e-2);
        const float *big[] = {p.dQ, p.dK, p.dV, p.d_bias}, *ref[] = {small.dQ, small.dK,
                                                                      small.dV, small.d_bias};
        const int64_t sizes[] = {n, n, n, p.g.E};
        double diff = 0;
        for (int a = 0; a < 4; a++)
            for (int64_t x = 0; x < sizes[a]; x++)
                diff = fmax(diff, fabs(big[a][x] - ref[a][x]));
        ck_assert_msg(diff <= 1e-2, "%s: %g from the gradients without 1e4", what, diff);
        for (int64_t i = 0; i < p.g.N; i++) {
            double sum = 0;
            for (int64_t s = p.g.nb.edge_ptr[i]; s < p.g.nb.edge_ptr[i + 1]; s++)
                sum += p.d_bias[s];
            ck_assert_msg(fabs(sum) <= 1e-5, "%s: node %lld's d_edge_bias sums to %g", what,
                          (long long)i, sum);
        }
        if (getenv("AG_TEST_VERBOSE"))
            fprintf(stderr, "%-36s biases 1e4: |g - fd| / (1 + |fd|) <= %.2e, "
                    "|g - g(no 1e4)| <= %.2e\n", variants[v].name, worst_seen, diff);
        problem_free(&p), problem_free(&small);
    }
}
END_TEST

/*
 * Scores of magnitude 1e4 (large Q and K, or beta 1e4 on cosine): softmax and
 * sigmoid weights saturate at 0 and 1. Every gradient must be finite; dV must
 * be sum_i a_ij dM_i with the reference's weights; for softmax kinds the rows
 * of dV sum to the sum of dM over nodes with in-edges; dQ, dK against finite
 * differences (about 0 where saturated; linear attention does not saturate).
 */
START_TEST(large_saturated_logits)
{
    static const struct {
        const char *name;
        ag_score_t sc;
        float qk, vec;        /* Q and K in [-qk, qk], vectors in [-vec, vec] */
        float h;              /* the finite differences' step: moves a score by < 1 */
        int plain;            /* no d_edge_bias asked: the plain dot-product kernels */
    } cases[] = {
        {"scaled-dot", {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT}, 170, 0, 1e-2f, 0},
        {"scaled-dot (plain kernels)", {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT}, 170, 0, 1e-2f, 1},
        {"scaled-dot softcap 5e3", {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT, .softcap = 5e3f}, 170, 0,
         1e-2f, 0},
        {"dot alibi", {SCORE_DEFAULTS, .kind = AG_SCORE_DOT, .alibi = 1}, 76, 0, 1e-2f, 0},
        {"cosine beta 1e4", {SCORE_DEFAULTS, .kind = AG_SCORE_COSINE, .beta = 1e4f}, 1.5f, 0, 1e-5f, 0},
        {"additive", {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE}, 3000, 5, 1e-2f, 0},
        {"gatv2", {SCORE_DEFAULTS, .kind = AG_SCORE_GATV2}, 3000, 5, 1e-2f, 0},
        {"sigmoid", {SCORE_DEFAULTS, .kind = AG_SCORE_SIGMOID}, 170, 0, 1e-2f, 0},
        {"linear", {SCORE_DEFAULTS, .kind = AG_SCORE_LINEAR}, 60, 0, 1e-3f, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        bw_graph_t g;
        multigraph(&g);
        problem_t p;
        problem_init(&p, &g, 3, 5, 0, 70 + c, cases[c].qk);
        p.sc = cases[c].sc;
        const int64_t HD = p.H * p.d, n = p.g.N * HD, E = p.g.E, H = p.H, d = p.d;
        if (cases[c].vec > 0) {
            fill_uniform(p.a_src, HD, 71, cases[c].vec);
            fill_uniform(p.a_dst, HD, 72, cases[c].vec);
            p.sc.a_src = p.a_src, p.sc.a_dst = p.a_dst;
        }
        ag_error_t err;
        ck_assert_int_eq(problem_backward(&p, &err), AG_OK);
        if (cases[c].plain) {
            ag_attention_grads_t gr = {.dQ = p.dQ, .dK = p.dK, .dV = p.dV};
            ck_assert_int_eq(ag_attention_backward(&p.g.nb, p.Q, p.K, p.V, H, d, &p.sc, NULL,
                                                   NULL, p.dM, &gr, &err), AG_OK);
        }
        double *M = malloc((size_t)n * sizeof *M), *W = malloc((size_t)E * H * sizeof *W);
        double *bias = calloc((size_t)E, sizeof *bias), *dV = calloc((size_t)n, sizeof *dV);
        const ref_score_t rs = ref_score_of(&p, bias);
        ref_attention_scored(p.g.N, p.g.src, p.g.dst, E, p.Q, p.K, p.V, H, d, &rs, M, W);
        double top = 0;   /* the largest |dV - sum a dM| */
        for (int64_t e = 0; e < E; e++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t t = 0; t < d; t++)
                    dV[p.g.src[e] * HD + h * d + t] += W[e * H + h] * p.dM[p.g.dst[e] * HD + h * d + t];
        for (int64_t x = 0; x < n; x++) {
            ck_assert_msg(isfinite(p.dQ[x]) && isfinite(p.dK[x]) && isfinite(p.dV[x]),
                          "%s: not finite at %lld", cases[c].name, (long long)x);
            top = fmax(top, fabs(p.dV[x] - dV[x]));
        }
        /* scores near 1e4 are rounded to ~1e-3, and so is the plain kernels' float
           lse in P = exp(s - lse): weights of near ties move by that much */
        const double tol_v = cases[c].plain ? 2e-3 : 1e-4;
        ck_assert_msg(top <= tol_v, "%s: dV %g from sum a dM", cases[c].name, top);
        if (ag_i_is_softmax(p.sc.kind))
            for (int64_t t = 0; t < HD; t++) {
                double want = 0, got = 0, mass = 0;
                for (int64_t i = 0; i < p.g.N; i++) {
                    got += p.dV[i * HD + t];
                    if (p.g.nb.edge_ptr[i + 1] > p.g.nb.edge_ptr[i])
                        want += p.dM[i * HD + t], mass += fabs(p.dM[i * HD + t]);
                }
                /* each row's weights sum to 1 within tol_v (plain: the float lse's
                   rounding), so the column within tol_v times the dM it carries */
                const double tol_col = cases[c].plain ? tol_v * fmax(1.0, mass) : tol_v;
                ck_assert_msg(fabs(got - want) <= tol_col, "%s: column %lld of dV sums to %g, "
                              "dM over nodes with in-edges to %g", cases[c].name,
                              (long long)t, got, want);
            }
        for (int64_t e = 0; e < E && !cases[c].plain; e++)
            ck_assert(isfinite(p.d_bias[e]));
        worst_seen = 0;
        check_grad(&p, cases[c].name, "dQ", p.Q, p.dQ, n, cases[c].h, 5e-4);
        check_grad(&p, cases[c].name, "dK", p.K, p.dK, n, cases[c].h, 5e-4);
        if (getenv("AG_TEST_VERBOSE"))
            fprintf(stderr, "%-36s scores 1e4: |dV - sum a dM| <= %.2e, dQ dK |g - fd| / "
                    "(1 + |fd|) <= %.2e\n", cases[c].name, top, worst_seen);
        free(M), free(W), free(bias), free(dV);
        problem_free(&p);
    }
}
END_TEST

/* ---- threads ---- */

#ifdef _OPENMP
/* Every variant's gradients on 1 and 2 threads: the same bits. */
START_TEST(threads_give_identical_gradients)
{
    for (int which = 0; which < 2; which++)
        for (int v = 0; v < N_VARIANTS; v++) {
            bw_graph_t g;
            if (which == 0) {   /* multi-edges, self-loops, nodes 99 and 100 without in-edges */
                int64_t *src = malloc(4000 * sizeof *src), *dst = malloc(4000 * sizeof *dst);
                graph_from_edges(&g, 101, src, dst, multigraph_edges(src, dst, 4000, 101), 1);
                free(src), free(dst);
            } else {
                graph_from_pattern(&g, "causal", 331);
            }
            problem_t p;
            problem_init(&p, &g, 3, 7, v, 5, 1.5f);
            /* enough work that two threads really run (smaller regions run on one) */
            ck_assert_int_ge(p.g.E * p.H * p.d, AG_PARALLEL_MIN_WORK);
            const int64_t n = p.g.N * p.H * p.d, HD = p.H * p.d;
            float *one = malloc((size_t)(3 * n + p.g.E + 2 * HD) * sizeof *one);
            float *outs[] = {p.dQ, p.dK, p.dV, p.d_bias, p.d_a_src, p.d_a_dst};
            const int64_t sizes[] = {n, n, n, p.g.E, HD, HD};
            ag_error_t err;
            omp_set_num_threads(1);
            ck_assert_int_eq(problem_backward(&p, &err), AG_OK);
            float *at = one;
            for (int k = 0; k < 6; at += sizes[k++])
                memcpy(at, outs[k], (size_t)sizes[k] * sizeof *at);
            omp_set_num_threads(2);
            ck_assert_int_eq(problem_backward(&p, &err), AG_OK);
            at = one;
            for (int k = 0; k < 6; at += sizes[k++])
                ck_assert_msg(!memcmp(at, outs[k], (size_t)sizes[k] * sizeof *at),
                              "%s: gradient %d differs on 2 threads", variants[v].name, k);
            free(one);
            problem_free(&p);
        }
}
END_TEST
#endif

/* ---- the plain dot-product kernels on the same graphs ---- */

/*
 * Plain dot-product softmax (no score, and dot with beta) goes to the fused
 * kernels; AG_I_KERNEL_SIMPLE is called directly too, with lse and D from
 * the one-pass forward.
 */
START_TEST(plain_dot_on_awkward_graphs)
{
    const char *graphs[] = {"pattern", "multigraph", "undirected", "causal"};
    for (int which = 0; which < G_COUNT; which++)
        for (int k = 0; k < 3; k++) {
            bw_graph_t g;
            awkward_graph(&g, which);
            problem_t p;
            problem_init(&p, &g, 3, 5, 0, 30 + k, 1.5f);
            p.sc = (ag_score_t){SCORE_DEFAULTS, .kind = k == 1 ? AG_SCORE_DOT : AG_SCORE_SCALED_DOT,
                                .beta = k == 1 ? 0.5f : 1};
            char what[96];
            snprintf(what, sizeof what, "%s on %s", k == 0 ? "no score" : k == 1 ? "dot beta 0.5"
                     : "simple kernel", graphs[which]);
            worst_seen = 0;
            if (k < 2) {   /* the plain kernels (no d_edge_bias asked), then the generic */
                const int64_t n = p.g.N * p.H * p.d;
                ag_attention_grads_t gr = {.dQ = p.dQ, .dK = p.dK, .dV = p.dV};
                ag_error_t err;
                ck_assert_int_eq(ag_attention_backward(&p.g.nb, p.Q, p.K, p.V, p.H, p.d, &p.sc,
                                                       NULL, NULL, p.dM, &gr, &err), AG_OK);
                check_grad(&p, what, "dQ", p.Q, p.dQ, n, 1e-4f, 1e-5);
                check_grad(&p, what, "dK", p.K, p.dK, n, 1e-4f, 1e-5);
                check_grad(&p, what, "dV", p.V, p.dV, n, 1e-4f, 1e-5);
                check_problem(&p, what, 1e-3f, 1e-5);
            } else {
                const int64_t N = p.g.N, H = p.H, d = p.d, HD = H * d;
                float *M = malloc((size_t)(N * HD + 2 * N * H) * sizeof *M);
                float *lse = M + N * HD, *Dd = lse + N * H;
                kext_t x = {0};
                x.lse = lse;
                ag_error_t err;
                ck_assert_int_eq(ag_nbhd_transpose(&p.g.nb, &err), AG_OK);
                ck_assert_int_eq(
                    ag_i_attention_with(AG_I_KERNEL_SIMPLE,
                                        &(ag_i_fwd_t){&p.g.nb, p.Q, p.K, p.V, H, d,
                                                        AG_I_DOT_SCORE(1 / sqrtf((float)d)), M, &x},
                                          &err),
                    AG_OK);
                for (int64_t i = 0; i < N * H; i++)
                    Dd[i] = ag_i_dot(p.dM + i * d, M + i * d, d);
                const ag_i_bwd_t op = {&p.g.nb, p.Q, p.K, p.V, p.dM, H, d,
                                       AG_I_DOT_SCORE(1 / sqrtf((float)d)), lse, Dd,
                                       {.dQ = p.dQ, .dK = p.dK, .dV = p.dV}};
                ck_assert_int_eq(ag_i_backward_with(AG_I_KERNEL_SIMPLE, &op, &err), AG_OK);
                const int64_t n = N * HD;
                check_grad(&p, what, "dQ", p.Q, p.dQ, n, 1e-4f, 1e-5);
                check_grad(&p, what, "dK", p.K, p.dK, n, 1e-4f, 1e-5);
                check_grad(&p, what, "dV", p.V, p.dV, n, 1e-4f, 1e-5);
                free(M);
            }
            if (getenv("AG_TEST_VERBOSE"))
                fprintf(stderr, "%-36s |g - fd| / (1 + |fd|) <= %.2e\n", what, worst_seen);
            problem_free(&p);
        }
}
END_TEST

/* ---- the generic forward's log-sum-exp ---- */

START_TEST(generic_forward_writes_lse)
{
    for (int v = 0; v < N_VARIANTS; v++) {
        bw_graph_t g;
        multigraph(&g);
        problem_t p;
        problem_init(&p, &g, 3, 5, v, 40, 1.5f);
        const int64_t N = p.g.N, H = p.H, HD = H * p.d;
        float *M1 = malloc((size_t)(2 * N * HD + N * H) * sizeof *M1);
        float *M2 = M1 + N * HD, *lse = M2 + N * HD;
        for (int64_t x = 0; x < N * H; x++)
            lse[x] = 123.0f;
        ag_attention_opts_t opts = {0};
        opts.lse = lse;
        ag_error_t err;
        ck_assert_int_eq(ag_attention(&p.g.nb, p.Q, p.K, p.V, H, p.d, &p.sc, M1, &err), AG_OK);
        ck_assert_int_eq(ag_attention_ex(&p.g.nb, p.Q, p.K, p.V, H, p.d, &p.sc, M2, &opts, &err),
                         AG_OK);
        ck_assert_mem_eq(M1, M2, (size_t)(N * HD) * sizeof *M1);
        double *want = malloc((size_t)(N * H) * sizeof *want);
        double *bias = malloc((size_t)(p.g.E + 1) * sizeof *bias);
        for (int64_t e = 0; e < p.g.E; e++)
            bias[e] = p.bias[e];
        const ref_score_t rs = ref_score_of(&p, bias);
        ref_lse_scored(N, p.g.src, p.g.dst, p.g.E, p.Q, p.K, H, p.d, &rs, want);
        for (int64_t x = 0; x < N * H; x++) {
            if (!ag_i_is_softmax(p.sc.kind))
                ck_assert_msg(lse[x] == 123.0f, "%s: lse[%lld] written", variants[v].name,
                              (long long)x);
            else if (isinf(want[x]))
                ck_assert_msg(lse[x] == -INFINITY, "%s: lse[%lld] = %g without in-edges",
                              variants[v].name, (long long)x, lse[x]);
            else
                ck_assert_msg(fabs(lse[x] - want[x]) <= 1e-5 * (1 + fabs(want[x])),
                              "%s: lse[%lld] = %.7g, reference %.7g", variants[v].name,
                              (long long)x, lse[x], want[x]);
        }
        free(M1), free(want), free(bias);
        problem_free(&p);
    }
}
END_TEST

/* ---- memory: nothing per edge ---- */

/*
 * The generic backward keeps per-destination state (3 x N x H floats) and
 * per-thread scratch, nothing per message: cosine on causal 8192 nodes
 * (E = 33.6M) runs forward and backward under a 64 MB budget, where a pair of
 * floats per message and head (268 MB) would be refused. With dM zero beyond
 * the first n rows, rows < n of M, dQ, dK and dV are exactly those of causal
 * n (node i sees only j <= i; later destinations add exact zeros), and those
 * are checked against finite differences here.
 */
START_TEST(generic_backward_keeps_nothing_per_edge)
{
    const int64_t N = 8192, n = 48, H = 1, d = 8, HD = H * d;
    const ag_score_t cosine = {SCORE_DEFAULTS, .kind = AG_SCORE_COSINE};
    ag_error_t err;
    bw_graph_t g;
    graph_from_pattern(&g, "causal", n);
    problem_t p;
    problem_init(&p, &g, H, d, 0, 60, 1.5f);
    p.sc = cosine;
    worst_seen = 0;
    check_problem(&p, "cosine on causal 48", 1e-3f, 1e-5);
    float *m_small = malloc((size_t)(n * HD) * sizeof *m_small);
    ck_assert_int_eq(ag_attention(&p.g.nb, p.Q, p.K, p.V, H, d, &cosine, m_small, &err), AG_OK);

    ag_pattern_t *pat;
    ag_nbhd_t nb;
    ck_assert_int_eq(ag_pattern_parse(&pat, "causal", &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, pat, N, AG_SELF_KEEP, &err), AG_OK);
    ag_pattern_free(pat);
    const int64_t budget_bytes = 64 << 20;
    ck_assert_int_gt(2 * nb.n_edges * H * (int64_t)sizeof(float), 4 * budget_bytes);
    float *mem = calloc((size_t)(8 * N * HD), sizeof *mem);
    float *Q = mem, *K = Q + N * HD, *V = K + N * HD, *dM = V + N * HD, *M = dM + N * HD;
    float *dQ = M + N * HD, *dK = dQ + N * HD, *dV = dK + N * HD;
    fill_uniform(Q, N * HD, 61, 1.5f);
    fill_uniform(K, N * HD, 62, 1.5f);
    fill_uniform(V, N * HD, 63, 1.0f);
    const size_t rows = (size_t)(n * HD) * sizeof *Q;
    memcpy(Q, p.Q, rows), memcpy(K, p.K, rows), memcpy(V, p.V, rows), memcpy(dM, p.dM, rows);
    ag_attention_grads_t gr = {.dQ = dQ, .dK = dK, .dV = dV};
    const int64_t budget = ag_set_memory_budget(budget_bytes);
    const int fwd = ag_attention(&nb, Q, K, V, H, d, &cosine, M, &err);
    const int bwd = fwd ? fwd : ag_attention_backward(&nb, Q, K, V, H, d, &cosine, M, NULL, dM,
                                                      &gr, &err);
    ag_set_memory_budget(budget);
    ck_assert_msg(fwd == AG_OK && bwd == AG_OK, "causal %lld under 64 MB: %s", (long long)N,
                  err.msg);
    ck_assert_mem_eq(M, m_small, rows);
    ck_assert_mem_eq(dQ, p.dQ, rows);
    ck_assert_mem_eq(dK, p.dK, rows);
    ck_assert_mem_eq(dV, p.dV, rows);
    for (int64_t x = n * HD; x < N * HD; x++)
        ck_assert_msg(dQ[x] == 0 && dK[x] == 0 && dV[x] == 0, "entry %lld: a gradient of a "
                      "node that neither it nor any node it reaches has dM for is not 0",
                      (long long)x);
    free(mem), free(m_small);
    ag_nbhd_destroy(&nb);
    problem_free(&p);
}
END_TEST

/* ---- errors ---- */

START_TEST(backward_refuses_what_it_cannot_do)
{
    bw_graph_t g;
    multigraph(&g);
    problem_t p;
    problem_init(&p, &g, 3, 5, 5, 1, 1.5f);   /* additive */
    ag_error_t err;
    const int64_t H = p.H, d = p.d;
    float *Q = p.Q, *K = p.K, *V = p.V, *dM = p.dM;
    ag_attention_grads_t full = {.dQ = p.dQ, .dK = p.dK, .dV = p.dV, .d_a_src = p.d_a_src,
                                 .d_a_dst = p.d_a_dst, .d_edge_bias = p.d_bias};
    for (int k = 0; k < 3; k++) {
        ag_attention_grads_t gr = full;
        if (k == 0)
            gr.dQ = NULL;
        else if (k == 1)
            gr.dK = NULL;
        else
            gr.dV = NULL;
        ck_assert_fails_with(ag_attention_backward(&p.g.nb, Q, K, V, H, d, &p.sc, NULL, NULL,
                                                   dM, &gr, &err), err, AG_EINVAL,
                             "dQ, dK and dV are required");
    }
    ck_assert_fails_with(ag_attention_backward(&p.g.nb, Q, K, V, H, d, &p.sc, NULL, NULL, dM,
                                               NULL, &err), err, AG_EINVAL, "required");
    ag_score_t sc = p.sc;
    sc.a_dst = NULL;
    ck_assert_fails_with(ag_attention_backward(&p.g.nb, Q, K, V, H, d, &sc, NULL, NULL, dM,
                                               &full, &err), err, AG_EINVAL, "a_src and a_dst");
    sc = (ag_score_t){SCORE_DEFAULTS, .kind = AG_SCORE_GATV2};
    ck_assert_fails_with(ag_attention_backward(&p.g.nb, Q, K, V, H, d, &sc, NULL, NULL, dM,
                                               &full, &err), err, AG_EINVAL, "gatv2 needs");
    sc = (ag_score_t){SCORE_DEFAULTS, .kind = AG_SCORE_LINEAR, .alibi = 1};
    ck_assert_fails_with(ag_attention_backward(&p.g.nb, Q, K, V, H, d, &sc, NULL, NULL, dM,
                                               &full, &err), err, AG_EINVAL, "no edge bias");
    sc = (ag_score_t){SCORE_DEFAULTS, .kind = AG_SCORE_SIGMOID, .softcap = 2};
    ck_assert_fails_with(ag_attention_backward(&p.g.nb, Q, K, V, H, d, &sc, NULL, NULL, dM,
                                               &full, &err), err, AG_EINVAL, "softcap");
    ck_assert_fails_with(ag_attention_backward(&p.g.nb, Q, K, V, 0, d, &p.sc, NULL, NULL, dM,
                                               &full, &err), err, AG_EINVAL, "heads");
    /* its per-destination state (3 x N x H floats) counts against the memory
       budget: sigmoid with H = 4096 heads on 4096 nodes would take 201 MB
       (the inputs, 67 MB each, are never touched) */
    bw_graph_t big;
    graph_from_pattern(&big, "window:1", 4096);
    const int64_t many = 4096;
    float *x = calloc((size_t)(4 * 4096 * many), sizeof *x);
    const int64_t n = 4096 * many;
    ag_attention_grads_t gx = {.dQ = x + n, .dK = x + 2 * n, .dV = x + 3 * n};
    const ag_score_t sigmoid = {SCORE_DEFAULTS, .kind = AG_SCORE_SIGMOID};
    const int64_t budget = ag_set_memory_budget(100 << 20);
    ck_assert_fails_with(ag_attention_backward(&big.nb, x, x, x, many, 1, &sigmoid, NULL, NULL,
                                               x, &gx, &err), err, AG_ELIMIT,
                         "attention backward");
    ag_set_memory_budget(budget);
    free(x);
    graph_free(&big);
    /* the generic kernel itself wants the transpose */
    ag_nbhd_t plain;
    ck_assert_int_eq(ag_nbhd_from_csr(&plain, 1, (int64_t[]){0, 1}, (int64_t[]){0}, &err), AG_OK);
    ck_assert_fails_with(
        ag_i_backward_with(AG_I_KERNEL_GENERIC,
                           &(ag_i_bwd_t){&plain, Q, K, V, dM, H, d, &p.sc, NULL, NULL, full}, &err),
        err, AG_EINVAL, "not transposed");
    ag_nbhd_destroy(&plain);
    problem_free(&p);
}
END_TEST

Suite *backward_suite(void)
{
    Suite *s = suite_create("backward");
    TCase *tc = tcase_create("backward");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, scaled_dot_matches_finite_differences);
    tcase_add_test(tc, every_kind_on_a_pattern);
    tcase_add_test(tc, every_kind_on_a_multigraph);
    tcase_add_test(tc, every_kind_on_an_undirected_graph);
    tcase_add_test(tc, every_kind_on_a_causal_graph_of_wider_heads);
    tcase_add_test(tc, score_rows_on_every_instruction_set);
    tcase_add_test(tc, edge_bias_gradient_in_graph_edge_order);
    tcase_add_test(tc, large_logits_that_cancel);
    tcase_add_test(tc, large_saturated_logits);
#ifdef _OPENMP
    tcase_add_test(tc, threads_give_identical_gradients);
#endif
    tcase_add_test(tc, plain_dot_on_awkward_graphs);
    tcase_add_test(tc, generic_forward_writes_lse);
    tcase_add_test(tc, generic_backward_keeps_nothing_per_edge);
    tcase_add_test(tc, backward_refuses_what_it_cannot_do);
    suite_add_tcase(s, tc);
    return s;
}
