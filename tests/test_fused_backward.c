/*
 * The fused backward kernels (tiled.c, gather.c, and the tiled one on the
 * block-sparse lists of blocks.c) against the simple backward
 * (simple.c), against gradients computed in double straight from the formulas
 * over the message list (independent of the kernels and of the transpose), and
 * against central finite differences of the double reference forward: on every
 * pattern atom, on random CSR graphs with multi-edges and isolated nodes, sizes
 * that fill no block, d in {5, 16, 64}, H in {1, 3}; 1 and 2 threads bitwise
 * identical; every instruction-set variant. Also the forwards' log-sum-exp.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "reference.h"
#include "testutil.h"

/* A problem: neighbourhoods (transposed), its messages, inputs. */
typedef struct {
    ag_nbhd_t nb;
    int64_t N, E, H, d;
    int64_t *src, *dst;               /* messages in slot order (dst ascending) */
    float *Q, *K, *V, *dM;            /* [N, H*d] */
    float scale;
    ag_score_t score;                 /* plain dot-product, times scale */
} prob_t;

/* The forward's operands of p (its scale: the plain kernels). */
static ag_i_fwd_t fwd_of(const prob_t *p, float *M, kext_t *x)
{
    return (ag_i_fwd_t){&p->nb, p->Q, p->K, p->V, p->H, p->d, &p->score, M, x};
}

/* The backward's, writing dQ, dK and dV at g, g + n and g + 2n (n = N*H*d). */
static ag_i_bwd_t bwd_of(const prob_t *p, const float *lse, const float *Dd, float *g)
{
    const int64_t n = p->N * p->H * p->d;
    return (ag_i_bwd_t){&p->nb, p->Q, p->K, p->V, p->dM, p->H, p->d, &p->score, lse, Dd,
                        {.dQ = g, .dK = g + n, .dV = g + 2 * n}};
}

/* The messages of nb (slots grouped by destination). */
static void prob_messages(prob_t *p)
{
    p->N = p->nb.n_nodes, p->E = p->nb.n_edges;
    p->src = malloc((size_t)(p->E + 1) * sizeof *p->src);
    p->dst = malloc((size_t)(p->E + 1) * sizeof *p->dst);
    ag_nbhd_sources(&p->nb, 0, p->N, p->src);
    for (int64_t i = 0; i < p->N; i++)
        for (int64_t s = p->nb.edge_ptr[i]; s < p->nb.edge_ptr[i + 1]; s++)
            p->dst[s] = i;
}

/* Inputs with |q| up to q_scale, the rest up to 1; scale 1/sqrt(d). */
static void prob_inputs(prob_t *p, int64_t H, int64_t d, float q_scale, uint64_t seed)
{
    ag_error_t err;
    ck_assert_msg(ag_nbhd_transpose(&p->nb, &err) == AG_OK, "%s", err.msg);
    prob_messages(p);
    p->H = H, p->d = d, p->scale = 1.0f / sqrtf((float)d);
    p->score = *AG_I_DOT_SCORE(p->scale);
    const int64_t n = p->N * H * d;
    float **arrays[4] = {&p->Q, &p->K, &p->V, &p->dM};
    for (int a = 0; a < 4; a++) {
        *arrays[a] = malloc((size_t)(n + 1) * sizeof(float));
        fill_uniform(*arrays[a], n, seed + (uint64_t)a, a == 0 ? q_scale : 1.0f);
    }
}

static void prob_pattern(prob_t *p, const char *spec, int64_t N, int64_t H, int64_t d,
                         float q_scale)
{
    ag_pattern_t *pat;
    ag_error_t err;
    ck_assert_msg(ag_pattern_parse(&pat, spec, &err) == AG_OK, "%s", err.msg);
    ck_assert_msg(ag_nbhd_from_pattern(&p->nb, pat, N, AG_SELF_KEEP, &err) == AG_OK, "%s",
                  err.msg);
    ag_pattern_free(pat);
    prob_inputs(p, H, d, q_scale, (uint64_t)N * 31 + (uint64_t)d);
}

static void prob_free(prob_t *p)
{
    ag_nbhd_destroy(&p->nb);
    free(p->src), free(p->dst), free(p->Q), free(p->K), free(p->V), free(p->dM);
}

/* Gradients of L = sum dM * M in double from the formulas: per destination and
   head, p_e = exp(s_e - lse), D = dM_i . M_i, dS_e = p_e (dM_i . v_j - D); also
   lse [N, H] (-inf without in-edges). */
static void ref_grads(const prob_t *p, double *gQ, double *gK, double *gV, double *lse)
{
    const int64_t H = p->H, d = p->d, HD = H * d, N = p->N;
    memset(gQ, 0, (size_t)(N * HD) * sizeof *gQ);
    memset(gK, 0, (size_t)(N * HD) * sizeof *gK);
    memset(gV, 0, (size_t)(N * HD) * sizeof *gV);
    double *s = malloc((size_t)(p->E + 1) * sizeof *s), *m = malloc((size_t)d * sizeof *m);
    int64_t e0 = 0;
    for (int64_t i = 0; i < N; i++) {
        int64_t e1 = e0;
        while (e1 < p->E && p->dst[e1] == i)
            e1++;
        for (int64_t h = 0; h < H; h++) {
            const int64_t o = h * d;
            double mx = -INFINITY, z = 0, D = 0;
            for (int64_t e = e0; e < e1; e++) {
                double qk = 0;
                for (int64_t c = 0; c < d; c++)
                    qk += (double)p->Q[i * HD + o + c] * p->K[p->src[e] * HD + o + c];
                s[e] = qk * p->scale;
                mx = fmax(mx, s[e]);
            }
            for (int64_t e = e0; e < e1; e++)
                z += exp(s[e] - mx);
            lse[i * H + h] = e1 > e0 ? mx + log(z) : -INFINITY;
            memset(m, 0, (size_t)d * sizeof *m);
            for (int64_t e = e0; e < e1; e++)
                for (int64_t c = 0; c < d; c++)
                    m[c] += exp(s[e] - lse[i * H + h]) * p->V[p->src[e] * HD + o + c];
            for (int64_t c = 0; c < d; c++)
                D += (double)p->dM[i * HD + o + c] * m[c];
            for (int64_t e = e0; e < e1; e++) {
                const int64_t j = p->src[e];
                const double pe = exp(s[e] - lse[i * H + h]);
                double dp = 0;
                for (int64_t c = 0; c < d; c++)
                    dp += (double)p->dM[i * HD + o + c] * p->V[j * HD + o + c];
                const double ds = pe * (dp - D);
                for (int64_t c = 0; c < d; c++) {
                    gQ[i * HD + o + c] += p->scale * ds * p->K[j * HD + o + c];
                    gK[j * HD + o + c] += p->scale * ds * p->Q[i * HD + o + c];
                    gV[j * HD + o + c] += pe * p->dM[i * HD + o + c];
                }
            }
        }
        e0 = e1;
    }
    free(s), free(m);
}

/* The forward of a fused kernel (fn) with lse; M is bitwise the same as
   without it. Dd [N, H] = rowsum(dM * M). */
static void forward(const prob_t *p, ag_i_kernel_t fn, float *M, float *lse, float *Dd)
{
    const int64_t N = p->N, H = p->H, d = p->d, HD = H * d;
    float *M0 = malloc((size_t)(N * HD + 1) * sizeof *M0);
    kext_t x = {0};
    x.lse = lse;
    ag_error_t err;
    const ag_i_fwd_t alone = fwd_of(p, M0, NULL), with_lse = fwd_of(p, M, &x);
    ck_assert_int_eq(ag_i_attention_with(fn, &alone, &err), AG_OK);
    ck_assert_int_eq(ag_i_attention_with(fn, &with_lse, &err), AG_OK);
    ck_assert_mem_eq(M0, M, (size_t)(N * HD) * sizeof *M);
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < H; h++) {
            double s = 0;
            for (int64_t c = 0; c < d; c++)
                s += (double)p->dM[i * HD + h * d + c] * M[i * HD + h * d + c];
            Dd[i * H + h] = (float)s;
        }
    free(M0);
}

/* Largest |a - b| over n, relative to max(1, max |b|). */
static double rel_err(const float *a, const double *b, int64_t n)
{
    double worst = 0, big = 1;
    for (int64_t x = 0; x < n; x++) {
        worst = fmax(worst, fabs((double)a[x] - b[x]));
        big = fmax(big, fabs(b[x]));
    }
    return worst / big;
}

/* L = sum dM * M with M from the double reference forward (tests/reference.c). */
static double ref_loss(const prob_t *p)
{
    const int64_t n = p->N * p->H * p->d;
    double *M = malloc((size_t)n * sizeof *M), L = 0;
    ref_attention_sparse(p->N, p->src, p->dst, p->E, p->Q, p->K, p->V, p->H, p->d, M);
    for (int64_t x = 0; x < n; x++)
        L += (double)p->dM[x] * M[x];
    free(M);
    return L;
}

/* A few entries of each gradient against central differences of ref_loss. */
static void check_finite_differences(prob_t *p, const float *g[3], const char *what)
{
    const int64_t n = p->N * p->H * p->d;
    float *arrays[3] = {p->Q, p->K, p->V};
    uint64_t r = 12345;
    for (int a = 0; a < 3; a++)
        for (int k = 0; k < 5; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            const int64_t x = (int64_t)((r >> 20) % (uint64_t)n);
            const float keep = arrays[a][x], h = 1e-2f;
            arrays[a][x] = keep + h;
            const double up = arrays[a][x], Lp = ref_loss(p);
            arrays[a][x] = keep - h;
            const double down = arrays[a][x], Lm = ref_loss(p);
            arrays[a][x] = keep;
            const double want = (Lp - Lm) / (up - down);
            ck_assert_msg(fabs(g[a][x] - want) <= 2e-3 + 2e-3 * fabs(want),
                          "%s: d%c[%lld] = %g, finite differences %g", what, "QKV"[a],
                          (long long)x, g[a][x], want);
        }
}

/* Tolerances of the float kernels against the double gradients (relative to
   the largest entry, at least 1), measured well below these. */
#define TOL_GRAD 1e-5
#define TOL_LSE 2e-6

/* Every backward that applies to p (simple, gather; tiled on one run per
   destination; blocks without multi-edges), with lse from each fused
   forward, against the double gradients, each other and (fd) finite
   differences. */
static void check_problem(prob_t *p, const char *what, int fd)
{
    const int64_t N = p->N, H = p->H, d = p->d, n = N * H * d;
    double *gQ = malloc((size_t)(3 * n + N * H + 1) * sizeof *gQ);
    double *gK = gQ + n, *gV = gK + n, *lse_ref = gV + n;
    ref_grads(p, gQ, gK, gV, lse_ref);
    float *M = malloc((size_t)(n + 1) * sizeof *M), *lse = malloc((size_t)(N * H + 1) * 4);
    float *Dd = malloc((size_t)(N * H + 1) * 4), *g = malloc((size_t)(3 * n + 1) * 4);
    float *s = malloc((size_t)(3 * n + 1) * 4);
    ag_i_kernel_t fns[4] = {AG_I_KERNEL_SIMPLE, AG_I_KERNEL_GATHER};
    int n_fns = 2;
    if (ag_i_tiled_applies(&p->nb))
        fns[n_fns++] = AG_I_KERNEL_TILED;
    if (ag_i_block_cells(&p->nb, 0, N) >= 0)
        fns[n_fns++] = AG_I_KERNEL_BLOCKS;
    ag_error_t err;
    for (int fw = 1; fw < n_fns; fw++) {
        forward(p, fns[fw], M, lse, Dd);
        for (int64_t x = 0; x < N * H; x++) {
            if (isinf(lse_ref[x])) {
                ck_assert_msg(isinf(lse[x]) && lse[x] < 0, "%s: lse[%lld] = %g, want -inf",
                              what, (long long)x, lse[x]);
                continue;
            }
            ck_assert_msg(fabs(lse[x] - lse_ref[x]) <= TOL_LSE * fmax(1, fabs(lse_ref[x])),
                          "%s: %s forward's lse[%lld] = %.9g, reference %.9g", what,
                          ag_i_kernel_name(fns[fw]), (long long)x, lse[x], lse_ref[x]);
        }
        const ag_i_bwd_t ref = bwd_of(p, lse, Dd, s), fused = bwd_of(p, lse, Dd, g);
        ck_assert_int_eq(ag_i_backward_with(AG_I_KERNEL_SIMPLE, &ref, &err), AG_OK);
        for (int k = 1; k < n_fns; k++) {
            const char *name = ag_i_kernel_name(fns[k]);
            ck_assert_msg(ag_i_backward_with(fns[k], &fused, &err) == AG_OK, "%s", err.msg);
            const double *want[3] = {gQ, gK, gV};
            for (int a = 0; a < 3; a++) {
                const double e = rel_err(g + a * n, want[a], n);
                ck_assert_msg(e <= TOL_GRAD, "%s N=%lld H=%lld d=%lld: %s backward's d%c is "
                              "%g from the double gradient", what, (long long)N, (long long)H,
                              (long long)d, name, "QKV"[a], e);
                double to_simple = 0, big = 1;
                for (int64_t x = 0; x < n; x++) {
                    to_simple = fmax(to_simple, fabs(g[a * n + x] - s[a * n + x]));
                    big = fmax(big, fabs(want[a][x]));
                }
                ck_assert_msg(to_simple <= 2 * TOL_GRAD * big, "%s: %s backward's d%c is %g "
                              "from the simple one's", what, name, "QKV"[a], to_simple / big);
            }
            if (fd && fw == n_fns - 1) {
                const float *gr[3] = {g, g + n, g + 2 * n};
                check_finite_differences(p, gr, what);
            }
        }
    }
    free(gQ), free(M), free(lse), free(Dd), free(g), free(s);
}

static const struct {
    const char *spec;
    int64_t N, H, d;
} atoms[] = {
    {"complete", 133, 3, 5},
    {"complete", 300, 1, 64},             /* wide blocks (64 destinations) */
    {"causal", 150, 1, 16},
    {"causal", 700, 3, 16},               /* wide blocks, H odd */
    {"window:7", 140, 3, 64},
    {"window:128", 300, 1, 64},           /* narrow blocks, tiles inside every run */
    {"window:5,3", 133, 1, 5},
    {"dilated:9,2", 133, 3, 16},
    {"strided:5", 133, 1, 64},
    {"fixed:8,2", 133, 3, 5},
    {"prefix:20", 133, 1, 16},
    {"global:3", 133, 3, 64},
    {"random:9,2", 133, 1, 5},
    {"bigbird:8,3,1,1", 133, 3, 16},
    {"blocks:40,1,60,32", 133, 1, 64},
    {"docs:50,1,82", 133, 3, 5},
    {"padding:100", 133, 1, 16},          /* queries from 100 on get nothing */
    {"causal&padding:100", 133, 3, 64},
    {"cross:53,80", 133, 1, 5},           /* sources receive nothing */
    {"grid:7x19,2", 133, 3, 16},
    {"axial:7x19", 133, 1, 64},
    {"complete", 1, 1, 4},
    {"bigbird:32,1,1,1", 300, 2, 16},     /* block-sparse: wide groups, full tiles */
    {"window:30+global:3", 260, 1, 64},   /* narrow groups, partial tiles */
    {"fixed:64,8", 400, 3, 16},
    {"docs:150,1,249&dilated:60,2", 400, 1, 5},
};
#define N_ATOMS ((int)(sizeof atoms / sizeof atoms[0]))

START_TEST(every_pattern_atom)
{
    prob_t p;
    prob_pattern(&p, atoms[_i].spec, atoms[_i].N, atoms[_i].H, atoms[_i].d, 1.5f);
    check_problem(&p, atoms[_i].spec, 1);
    prob_free(&p);
}
END_TEST

/* Sharp scores (|s| up to ~20 sqrt(d)): most weights underflow to 0. */
START_TEST(sharp_scores)
{
    const char *specs[] = {"causal", "window:9", "random:7,1+window:1"};
    for (int k = 0; k < 3; k++) {
        prob_t p;
        prob_pattern(&p, specs[k], 200, 2, 16, 20.0f);
        check_problem(&p, specs[k], 0);
        prob_free(&p);
    }
}
END_TEST

/* A problem on a CSR of in-neighbours. */
static void prob_csr(prob_t *p, int64_t N, int64_t *indptr, int64_t *indices,
                     int64_t H, int64_t d)
{
    ag_error_t err;
    ck_assert_msg(ag_nbhd_from_csr(&p->nb, N, indptr, indices, &err) == AG_OK, "%s", err.msg);
    prob_inputs(p, H, d, 1.5f, (uint64_t)N);
}

static uint64_t next_rand(uint64_t *r)
{
    *r = *r * 6364136223846793005ull + 1442695040888963407ull;
    return *r >> 24;
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Random sources with repeats (multi-edges), a fifth of the nodes isolated. */
START_TEST(random_csr_with_multi_edges)
{
    const int64_t N = 97;
    int64_t indptr[98], indices[97 * 14];
    uint64_t r = 5;
    indptr[0] = 0;
    for (int64_t i = 0; i < N; i++) {
        const int64_t deg = next_rand(&r) % 5 == 0 ? 0 : (int64_t)(next_rand(&r) % 14);
        for (int64_t k = 0; k < deg; k++)
            indices[indptr[i] + k] = (int64_t)(next_rand(&r) % 20) * (i % 3 ? 1 : 4) % N;
        qsort(indices + indptr[i], (size_t)deg, sizeof *indices, cmp_i64);
        indptr[i + 1] = indptr[i] + deg;
    }
    for (int k = 0; k < 2; k++) {
        prob_t p;
        prob_csr(&p, N, indptr, indices, k ? 3 : 1, k ? 16 : 5);
        check_problem(&p, "random CSR", 1);
        prob_free(&p);
    }
}
END_TEST

/* One run per destination at random places and lengths (the tiled kernel's
   shape, without the order of a pattern), some nodes isolated; short runs
   (narrow blocks) and long ones (wide blocks). */
START_TEST(random_intervals)
{
    const int64_t sizes[2] = {211, 401}, H[2] = {3, 1}, d[2] = {16, 64};
    for (int k = 0; k < 2; k++) {
        const int64_t N = sizes[k];
        int64_t *indptr = malloc((size_t)(N + 1) * sizeof *indptr);
        int64_t *indices = malloc((size_t)(N * N) * sizeof *indices);
        uint64_t r = 77 + (uint64_t)k;
        indptr[0] = 0;
        for (int64_t i = 0; i < N; i++) {
            int64_t len = 0, lo = 0;
            if (next_rand(&r) % 6) {
                len = k ? N / 2 + (int64_t)(next_rand(&r) % (uint64_t)(N / 2))
                        : 1 + (int64_t)(next_rand(&r) % 40);
                lo = (int64_t)(next_rand(&r) % (uint64_t)(N - len + 1));
            }
            for (int64_t x = 0; x < len; x++)
                indices[indptr[i] + x] = lo + x;
            indptr[i + 1] = indptr[i] + len;
        }
        prob_t p;
        prob_csr(&p, N, indptr, indices, H[k], d[k]);
        ck_assert(ag_i_tiled_applies(&p.nb));
        check_problem(&p, k ? "long random intervals" : "short random intervals", k == 0);
        prob_free(&p);
        free(indptr), free(indices);
    }
}
END_TEST

/* Multi-edges and self-loops through igraph (graphs/random10.edges). */
START_TEST(graph_with_multi_edges)
{
    igraph_t g;
    prob_t p;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/random10.edges", NULL, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_graph(&p.nb, &g, &err), AG_OK);
    igraph_destroy(&g);
    prob_inputs(&p, 3, 5, 2.0f, 3);
    check_problem(&p, "random10.edges", 1);
    prob_free(&p);
}
END_TEST

/* The public entry: scaled-dot with beta and plain dot go to the fused kernels
   (tiled or gather), with M and lse given or recomputed: the same bits. */
START_TEST(public_backward_for_plain_scores)
{
    const char *specs[2] = {"causal", "random:5,3"};
    const ag_score_kind_t kinds[2] = {AG_SCORE_SCALED_DOT, AG_SCORE_DOT};
    for (int k = 0; k < 2; k++)
        for (int kind = 0; kind < 2; kind++) {
            prob_t p;
            prob_pattern(&p, specs[k], 300, 2, 16, 1.0f);
            const ag_score_t sc = {SCORE_DEFAULTS, .kind = kinds[kind], .beta = kind ? 1.0f : 0.7f};
            p.scale = kind ? 1.0f : 0.7f / 4.0f;
            const int64_t N = p.N, H = p.H, n = N * H * p.d;
            float *M = malloc((size_t)n * 4), *lse = malloc((size_t)(N * H) * 4);
            float *g1 = malloc((size_t)(3 * n) * 4), *g2 = malloc((size_t)(3 * n) * 4);
            double *gQ = malloc((size_t)(3 * n + N * H) * sizeof *gQ);
            ref_grads(&p, gQ, gQ + n, gQ + 2 * n, gQ + 3 * n);
            ag_attention_opts_t o = {.lse = lse};
            ag_error_t err;
            ck_assert_int_eq(ag_attention_ex(&p.nb, p.Q, p.K, p.V, H, p.d, &sc, M, &o, &err),
                             AG_OK);
            ag_attention_grads_t a = {.dQ = g1, .dK = g1 + n, .dV = g1 + 2 * n};
            ag_attention_grads_t b = {.dQ = g2, .dK = g2 + n, .dV = g2 + 2 * n};
            ck_assert_int_eq(ag_attention_backward(&p.nb, p.Q, p.K, p.V, H, p.d, &sc, M, lse,
                                                   p.dM, &a, &err), AG_OK);
            ck_assert_int_eq(ag_attention_backward(&p.nb, p.Q, p.K, p.V, H, p.d, &sc, NULL,
                                                   NULL, p.dM, &b, &err), AG_OK);
            ck_assert_mem_eq(g1, g2, (size_t)(3 * n) * 4);
            for (int x = 0; x < 3; x++)
                ck_assert_msg(rel_err(g1 + x * n, gQ + x * n, n) <= TOL_GRAD * 5,
                              "%s kind %d: d%c %g from the double gradient", specs[k], kind,
                              "QKV"[x], rel_err(g1 + x * n, gQ + x * n, n));
            free(M), free(lse), free(g1), free(g2), free(gQ);
            prob_free(&p);
        }
}
END_TEST

START_TEST(fused_backward_refusals)
{
    prob_t p;
    prob_pattern(&p, "window:2+global:1", 10, 1, 4, 1.0f);
    float x[40] = {0};
    ag_error_t err;
    ag_i_bwd_t bad = {&p.nb, x, x, x, x, 1, 4, NULL, x, x, {.dQ = x, .dK = x, .dV = x}};
    ck_assert_fails_with(ag_i_backward_with(AG_I_KERNEL_TILED,
                                            &bad, &err), err, AG_EINVAL, "more than one run");
    prob_free(&p);
    ag_pattern_t *pat;
    ag_nbhd_t nb;
    ck_assert_int_eq(ag_pattern_parse(&pat, "causal", &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, pat, 10, AG_SELF_KEEP, &err), AG_OK);
    ag_pattern_free(pat);
    bad.nb = &nb;
    ck_assert_fails_with(ag_i_backward_with(AG_I_KERNEL_TILED,
                                            &bad, &err), err, AG_EINVAL, "not transposed");
    ck_assert_fails_with(ag_i_backward_with(AG_I_KERNEL_GATHER,
                                            &bad, &err), err, AG_EINVAL, "not transposed");
    ag_nbhd_destroy(&nb);
}
END_TEST

#ifdef _OPENMP
/* Gradients of one kernel on 1 and 2 threads, bitwise. */
static void same_on_1_and_2_threads(prob_t *p, ag_i_kernel_t fn)
{
    const int64_t N = p->N, H = p->H, d = p->d, n = N * H * d;
    float *M = malloc((size_t)n * 4), *lse = malloc((size_t)(N * H) * 4);
    float *Dd = malloc((size_t)(N * H) * 4);
    float *g1 = malloc((size_t)(3 * n) * 4), *g2 = malloc((size_t)(3 * n) * 4);
    forward(p, AG_I_KERNEL_GATHER, M, lse, Dd);
    ag_error_t err;
    omp_set_num_threads(1);
    const ag_i_bwd_t one = bwd_of(p, lse, Dd, g1), two = bwd_of(p, lse, Dd, g2);
    ck_assert_int_eq(ag_i_backward_with(fn, &one, &err), AG_OK);
    omp_set_num_threads(2);
    ck_assert_int_eq(ag_i_backward_with(fn, &two, &err), AG_OK);
    ck_assert_mem_eq(g1, g2, (size_t)(3 * n) * 4);
    free(M), free(lse), free(Dd), free(g1), free(g2);
}

START_TEST(identical_for_1_and_2_threads)
{
    prob_t p;
    prob_pattern(&p, "causal", 777, 2, 24, 1.5f);   /* wide blocks */
    same_on_1_and_2_threads(&p, AG_I_KERNEL_TILED);
    same_on_1_and_2_threads(&p, AG_I_KERNEL_GATHER);
    prob_free(&p);
    prob_pattern(&p, "window:40", 1000, 1, 64, 1.5f);   /* narrow blocks */
    same_on_1_and_2_threads(&p, AG_I_KERNEL_TILED);
    prob_free(&p);
    prob_pattern(&p, "random:16,1+window:1", 2000, 3, 16, 1.5f);
    same_on_1_and_2_threads(&p, AG_I_KERNEL_GATHER);
    same_on_1_and_2_threads(&p, AG_I_KERNEL_BLOCKS);
    prob_free(&p);
    /* both widths of the block-sparse lists, full and partial tiles */
    prob_pattern(&p, "bigbird:32,1,1,2", 1500, 2, 24, 1.5f);
    same_on_1_and_2_threads(&p, AG_I_KERNEL_BLOCKS);
    prob_free(&p);
    prob_pattern(&p, "dilated:100,3+global:2", 1300, 1, 64, 1.5f);
    same_on_1_and_2_threads(&p, AG_I_KERNEL_BLOCKS);
    prob_free(&p);
}
END_TEST
#endif

/* Every compiled variant (x86-64 baseline, AVX2, AVX-512), forced one by one. */
START_TEST(every_instruction_set_variant)
{
    const ag_simd_level_t best = ag_i_simd_level();
    for (int level = AG_SIMD_BASE; level <= (int)best; level++) {
        ag_i_simd_force(level);
        const struct {
            const char *spec;
            int64_t N, H, d;
        } cases[] = {{"causal", 150, 2, 20}, {"complete", 300, 1, 64}, {"window:40", 300, 3, 5},
                     {"random:9,2+window:2", 200, 2, 16}, {"bigbird:16,1,2,1", 250, 2, 16},
                     {"fixed:32,4", 300, 1, 64}, {"strided:7+window:20", 170, 3, 5}};
        for (int k = 0; k < 7; k++) {
            prob_t p;
            prob_pattern(&p, cases[k].spec, cases[k].N, cases[k].H, cases[k].d, 1.5f);
            check_problem(&p, cases[k].spec, 0);
            prob_free(&p);
        }
    }
    ag_i_simd_force(-1);
    ck_assert_int_eq(ag_i_simd_level(), best);
}
END_TEST

/* attngraph bench warms up by time unless told a count: 0.2 s of untimed
   runs (a 2-thread process here runs its first milliseconds up to 3x slower),
   at least 2 of them. */
START_TEST(cli_bench_warms_up_by_time)
{
    expect_cli("bench --pattern causal --nodes 30 --reps 1 --warmup 3 --json", 0, 1,
               "\"warmup\": 3,");
    char *out;
    ck_assert_int_eq(run_cli("bench --pattern causal --nodes 30 --reps 1 --json", &out, NULL), 0);
    const char *at = strstr(out, "\"warmup\": ");
    ck_assert_msg(at, "%s", out);
    /* a 30-node causal round takes microseconds: 0.2 s is thousands of runs */
    ck_assert_msg(atoll(at + strlen("\"warmup\": ")) >= 100, "%s", out);
    free(out);
}
END_TEST

/* attngraph bench names the kernel its plan ran, and takes one by name. */
START_TEST(cli_bench_names_the_kernel)
{
    expect_cli("bench --pattern causal --nodes 30 --reps 1 --json", 0, 1,
               "\"kernel\": \"gather\",");   /* 15 edges a node: too few for tiles */
    expect_cli("bench --pattern causal --nodes 300 --reps 1 --json", 0, 1,
               "\"kernel\": \"tiled\",");
    expect_cli("bench --pattern bigbird:32,1,1,1 --nodes 600 --reps 1 --json --backward", 0, 1,
               "\"kernel\": \"blocks\",");
    expect_cli("bench --pattern causal --nodes 300 --reps 1 --kernel blocks", 0, 1,
               "blocks kernel");
    expect_cli("bench --pattern causal --nodes 30 --kernel tiles", 2, 2,
               "--kernel 'tiles': expected auto, simple, tiled, blocks or gather");
}
END_TEST

/* attngraph bench --backward times the backward kernels and says so. */
START_TEST(cli_bench_backward)
{
    expect_cli("bench --pattern causal --nodes 300 --backward --reps 1 --warmup 0 --json", 0, 1,
               "\"pass\": \"backward\"");
    expect_cli("bench --pattern random:5 --nodes 300 --backward --kernel gather --reps 1", 0, 1,
               "backward median");
    expect_cli("bench --pattern causal --nodes 30 --reps 1 --json", 0, 1,
               "\"pass\": \"forward\"");
    expect_cli("bench --pattern causal --nodes 30 --backward --kernel tiled --reps 1", 0, 1,
               "GFLOP/s useful");
    expect_cli("bench --pattern causal --nodes 8 --backward --out x.npy", 2, 2,
               "does not go with --backward");
}
END_TEST

/* AG_SIMD picks the kernels' variant for the tool; bench names it; a name of
   no variant is refused (the forked test's environment only). */
START_TEST(cli_simd_variant_from_the_environment)
{
    setenv("AG_SIMD", "base", 1);
    expect_cli("bench --pattern causal --nodes 30 --reps 1 --json", 0, 1, "\"isa\": \"base\"");
    expect_cli("--version", 0, 1, "kernels and products: base");
    setenv("AG_SIMD", "avx3", 1);
    expect_cli("bench --pattern causal --nodes 30 --reps 1", 2, 2,
               "AG_SIMD 'avx3': expected base, avx2 or avx512");
    unsetenv("AG_SIMD");
}
END_TEST

Suite *fused_backward_suite(void)
{
    Suite *s = suite_create("fused_backward");
    TCase *tc = tcase_create("fused_backward");
    tcase_set_timeout(tc, 20);
    tcase_add_loop_test(tc, every_pattern_atom, 0, N_ATOMS);
    tcase_add_test(tc, sharp_scores);
    tcase_add_test(tc, random_csr_with_multi_edges);
    tcase_add_test(tc, random_intervals);
    tcase_add_test(tc, graph_with_multi_edges);
    tcase_add_test(tc, public_backward_for_plain_scores);
    tcase_add_test(tc, fused_backward_refusals);
    tcase_add_test(tc, cli_bench_backward);
    tcase_add_test(tc, cli_bench_warms_up_by_time);
    tcase_add_test(tc, cli_bench_names_the_kernel);
    tcase_add_test(tc, cli_simd_variant_from_the_environment);
#ifdef _OPENMP
    tcase_add_test(tc, identical_for_1_and_2_threads);
#endif
    tcase_add_test(tc, every_instruction_set_variant);
    suite_add_tcase(s, tc);
    return s;
}
