/*
 * The fast kernels against the simple one-pass kernel and the dense double
 * reference: every single-run pattern, sizes that do not fill tiles or
 * vectors, isolated nodes, sharp and huge logits, thread counts; and the
 * vector exp2 against libm over the whole range the kernels use.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "reference.h"
#include "kernels/simd.h"
#include "testutil.h"

static const struct {
    const char *spec;
    int64_t N, H, d;
} shapes[] = {
    {"complete", 130, 1, 64},           /* N not a multiple of 64 */
    {"complete", 300, 1, 64},           /* wide blocks (degree >= 256) */
    {"causal", 700, 2, 42},             /* wide, d not a multiple of 4 or 6 */
    {"causal", 97, 3, 5},               /* d below a vector, H odd */
    {"causal", 300, 2, 17},             /* d not a multiple of 4 or 8 */
    {"window:7", 200, 1, 70},
    {"window:128", 700, 1, 64},         /* narrow blocks */
    {"window:3,9", 150, 2, 8},
    {"prefix:40", 120, 1, 33},
    {"docs:50,1,79", 130, 2, 16},       /* a one-token document */
    {"blocks:64,64,3", 131, 1, 12},
    {"causal&padding:90", 128, 1, 16},  /* queries beyond 90 get nothing */
    {"cross:40,60", 100, 1, 24},        /* sources receive nothing */
    {"complete", 1, 1, 4},
};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static void compile(ag_nbhd_t *nb, const char *spec, int64_t N)
{
    ag_pattern_t *p;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&p, spec, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(nb, p, N, AG_SELF_KEEP, &err), AG_OK);
    ag_pattern_free(p);
}

/* Messages of nb, for the reference. */
static int64_t messages(const ag_nbhd_t *nb, int64_t **src, int64_t **dst)
{
    *src = malloc((nb->n_edges + 1) * sizeof **src);
    *dst = malloc((nb->n_edges + 1) * sizeof **dst);
    ag_nbhd_sources(nb, 0, nb->n_nodes, *src);
    for (int64_t i = 0; i < nb->n_nodes; i++)
        for (int64_t s = nb->edge_ptr[i]; s < nb->edge_ptr[i + 1]; s++)
            (*dst)[s] = i;
    return nb->n_edges;
}

/* Runs the kernel and checks it against the simple kernel and the reference. */
static void check_kernel(ag_i_kernel_t kernel, const char *spec, int64_t N, int64_t H,
                         int64_t d, float q_scale)
{
    ag_nbhd_t nb;
    compile(&nb, spec, N);
    const int64_t HD = H * d;
    float *Q = malloc(N * HD * 4), *K = malloc(N * HD * 4), *V = malloc(N * HD * 4);
    float *M = malloc(N * HD * 4), *Ms = malloc(N * HD * 4);
    double *Mref = malloc(N * HD * sizeof *Mref);
    fill_uniform(Q, N * HD, 7, q_scale), fill_uniform(K, N * HD, 8, 1.0f);
    fill_uniform(V, N * HD, 9, 1.0f);
    ag_error_t err;
    const float scale = 1.0f / sqrtf((float)d);
    ck_assert_msg(ag_i_attention_with(kernel,
                                      &(ag_i_fwd_t){&nb, Q, K, V, H, d,
                                                    AG_I_DOT_SCORE(scale), M, NULL},
                                      &err) == AG_OK,
                  "%s", err.msg);
    ck_assert_int_eq(
        ag_i_attention_with(AG_I_KERNEL_SIMPLE,
                            &(ag_i_fwd_t){&nb, Q, K, V, H, d, AG_I_DOT_SCORE(scale), Ms, NULL},
                            &err),
        AG_OK);
    int64_t *src, *dst;
    const int64_t E = messages(&nb, &src, &dst);
    ref_attention(N, src, dst, E, Q, K, V, H, d, Mref, NULL);
    const double to_ref = max_abs_diff_fd(M, Mref, N * HD);
    double to_simple = 0;
    for (int64_t x = 0; x < N * HD; x++)
        to_simple = fmax(to_simple, fabs((double)M[x] - Ms[x]));
    ck_assert_msg(to_ref <= 2e-5, "%s N=%lld H=%lld d=%lld q*%g: %g from the reference", spec,
                  (long long)N, (long long)H, (long long)d, q_scale, to_ref);
    ck_assert_msg(to_simple <= 2e-5, "%s: %g from the simple kernel", spec, to_simple);
    for (int64_t i = 0; i < N; i++)
        if (nb.edge_ptr[i + 1] == nb.edge_ptr[i])
            for (int64_t c = 0; c < HD; c++)
                ck_assert_float_eq(M[i * HD + c], 0.0f);
    free(Q), free(K), free(V), free(M), free(Ms), free(Mref), free(src), free(dst);
    ag_nbhd_destroy(&nb);
}

/* Both fast kernels on every single-run shape, with ordinary and sharp scores
   (|s| up to ~30 * sqrt(d), far past the cut-off of exp2). */
START_TEST(fast_kernels_match_reference)
{
    const ag_i_kernel_t kernels[] = {AG_I_KERNEL_TILED, AG_I_KERNEL_GATHER};
    for (int k = 0; k < 2; k++)
        for (int sharp = 0; sharp < 2; sharp++)
            check_kernel(kernels[k], shapes[_i].spec, shapes[_i].N, shapes[_i].H,
                         shapes[_i].d, sharp ? 30.0f : 1.0f);
}
END_TEST

/* Irregular neighbourhoods: several runs, random sources, degrees that do
   not fill a vector, a node without in-edges. */
START_TEST(gather_on_irregular_graphs)
{
    check_kernel(AG_I_KERNEL_GATHER, "random:16,3+window:1", 500, 1, 64, 1.0f);
    check_kernel(AG_I_KERNEL_GATHER, "random:5,4", 90, 3, 7, 3.0f);
    check_kernel(AG_I_KERNEL_GATHER, "causal&!strided:3+global:2", 77, 2, 33, 1.0f);
    check_kernel(AG_I_KERNEL_GATHER, "bigbird:8,3,1,2", 96, 2, 16, 2.0f);
    /* multi-edges through igraph: random10 has repeated edges and self-loops */
    igraph_t g;
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/random10.edges", NULL, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    float Q[60], K[60], V[60], M[60];
    double Mref[60];
    fill_uniform(Q, 60, 1, 2.0f), fill_uniform(K, 60, 2, 2.0f), fill_uniform(V, 60, 3, 1.0f);
    int64_t src[64], dst[64];
    for (int64_t e = 0; e < igraph_ecount(&g); e++)
        src[e] = IGRAPH_FROM(&g, e), dst[e] = IGRAPH_TO(&g, e);
    ck_assert_int_eq(
        ag_i_attention_with(AG_I_KERNEL_GATHER,
                            &(ag_i_fwd_t){&nb, Q, K, V, 2, 3,
                                          AG_I_DOT_SCORE(1 / sqrtf(3)), M, NULL},
                            &err),
        AG_OK);
    ref_attention(10, src, dst, igraph_ecount(&g), Q, K, V, 2, 3, Mref, NULL);
    ck_assert_double_le(max_abs_diff_fd(M, Mref, 60), 2e-5);
    ag_nbhd_destroy(&nb);
    igraph_destroy(&g);
}
END_TEST

START_TEST(tiled_refuses_several_runs)
{
    ag_nbhd_t nb;
    compile(&nb, "window:2+global:1", 10);
    ck_assert(!ag_i_tiled_applies(&nb));
    float x[40] = {0};
    ag_error_t err;
    ck_assert_fails_with(
        ag_i_attention_with(AG_I_KERNEL_TILED,
                            &(ag_i_fwd_t){&nb, x, x, x, 1, 4, AG_I_DOT_SCORE(1.0f), x, NULL},
                            &err), err,
        AG_EINVAL, "more than one run");
    ag_nbhd_destroy(&nb);
}
END_TEST

/* Logits ~1e4, exact in float: the fast kernels equal the reference too. */
START_TEST(tiled_huge_logits)
{
    const int64_t N = 100, d = 4;
    ag_nbhd_t nb;
    compile(&nb, "causal", N);
    float Q[400], K[400], V[400], M[400];
    double Mref[400];
    fill_uniform(Q, 400, 1, 60.0f), fill_uniform(K, 400, 2, 60.0f), fill_uniform(V, 400, 3, 1.0f);
    for (int x = 0; x < 400; x++)
        Q[x] = roundf(Q[x]), K[x] = roundf(K[x]);
    ag_error_t err;
    ck_assert_int_eq(
        ag_i_attention_with(AG_I_KERNEL_TILED,
                            &(ag_i_fwd_t){&nb, Q, K, V, 1, d, AG_I_DOT_SCORE(0.5f), M, NULL},
                            &err), AG_OK);
    int64_t *src, *dst;
    const int64_t E = messages(&nb, &src, &dst);
    ref_attention(N, src, dst, E, Q, K, V, 1, d, Mref, NULL);
    for (int x = 0; x < 400; x++)
        ck_assert(isfinite(M[x]));
    /* scores are multiples of 0.5 in ~[-7200, 7200]; log2e folding rounds them
       by up to ~1e-3 absolute, so weights of near-ties move by ~1e-3 */
    ck_assert_double_le(max_abs_diff_fd(M, Mref, 400), 2e-3);
    free(src), free(dst);
    ag_nbhd_destroy(&nb);
}
END_TEST

#ifdef _OPENMP
START_TEST(fast_kernels_identical_for_1_and_2_threads)
{
    ag_nbhd_t nb;
    compile(&nb, "causal", 777);
    const int64_t N = 777, H = 2, d = 24, HD = 48;
    float *Q = malloc(N * HD * 4), *K = malloc(N * HD * 4), *V = malloc(N * HD * 4);
    float *M1 = malloc(N * HD * 4), *M2 = malloc(N * HD * 4);
    fill_uniform(Q, N * HD, 1, 2.0f), fill_uniform(K, N * HD, 2, 2.0f);
    fill_uniform(V, N * HD, 3, 1.0f);
    ag_error_t err;
    omp_set_num_threads(1);
    ck_assert_int_eq(
        ag_i_attention_with(AG_I_KERNEL_TILED,
                            &(ag_i_fwd_t){&nb, Q, K, V, H, d, AG_I_DOT_SCORE(0.2f), M1, NULL},
                            &err), AG_OK);
    /* 2 threads take a head each, 3 share each head's blocks */
    for (int t = 2; t <= 3; t++) {
        omp_set_num_threads(t);
        ck_assert_int_eq(
            ag_i_attention_with(AG_I_KERNEL_TILED,
                                &(ag_i_fwd_t){&nb, Q, K, V, H, d, AG_I_DOT_SCORE(0.2f), M2, NULL},
                                &err),
            AG_OK);
        ck_assert_mem_eq(M1, M2, N * HD * 4);
    }
    omp_set_num_threads(1);
    ck_assert_int_eq(
        ag_i_attention_with(AG_I_KERNEL_GATHER,
                            &(ag_i_fwd_t){&nb, Q, K, V, H, d, AG_I_DOT_SCORE(0.2f), M1, NULL},
                            &err),
        AG_OK);
    omp_set_num_threads(2);
    ck_assert_int_eq(
        ag_i_attention_with(AG_I_KERNEL_GATHER,
                            &(ag_i_fwd_t){&nb, Q, K, V, H, d, AG_I_DOT_SCORE(0.2f), M2, NULL},
                            &err),
        AG_OK);
    ck_assert_mem_eq(M1, M2, N * HD * 4);
    free(Q), free(K), free(V), free(M1), free(M2);
    ag_nbhd_destroy(&nb);
}
END_TEST
#endif

/* The vector exp2 as each variant compiles it. Vectors stay inside the inlined
   body: clang refuses a 512-bit vector at a call boundary of an AVX2 function. */
AG_INLINE void exp2_rows(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += AG_LANES)
        v_store(y + i, v_exp2(v_load(x + i)));
}
#define EXP2_VARIANT(name, target)                                                          \
    target static void name(const float *x, float *y, int64_t n) { exp2_rows(x, y, n); }
EXP2_VARIANT(exp2_avx512, AG_TARGET_AVX512)
EXP2_VARIANT(exp2_avx2, AG_TARGET_AVX2)
EXP2_VARIANT(exp2_base, )

static void exp2_all(const float *x, float *y, int64_t n)
{
    static void (*const variants[3])(const float *, float *, int64_t) = {exp2_base, exp2_avx2,
                                                                         exp2_avx512};
    variants[ag_i_simd_level()](x, y, n);
}

/* The vector exp2 over [-126, 0] against libm in double: relative error
   below 2.5e-7 (about 2 ulp); exact 0 below -126 and for -inf; 2^0 = 1. */
START_TEST(vector_exp2_accuracy)
{
    enum { n = 1 << 20 };
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (int64_t i = 0; i < n; i++)
        x[i] = -126.0f * (float)i / n;
    exp2_all(x, y, n);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        const double want = exp2((double)x[i]);
        worst = fmax(worst, fabs(y[i] - want) / want);
    }
    ck_assert_msg(worst < 2.5e-7, "largest relative error %g", worst);
    float edge[16] = {-INFINITY, -126.5f, -127.0f, -1000.0f, 0.0f, -1.0f, -0.5f, -126.0f};
    float out[16];
    exp2_all(edge, out, 16);
    ck_assert_float_eq(out[0], 0.0f);
    ck_assert_float_eq(out[1], 0.0f);
    ck_assert_float_eq(out[2], 0.0f);
    ck_assert_float_eq(out[3], 0.0f);
    ck_assert_float_eq_tol(out[4], 1.0f, 2.5e-7f);
    ck_assert_float_eq_tol(out[5], 0.5f, 1.25e-7f);
    ck_assert_float_eq_tol(out[6], 0.70710678f, 2e-7f);
    ck_assert(out[7] >= 1e-38f);            /* 2^-126 is normal, not flushed */
    free(x), free(y);
}
END_TEST

/* Every compiled variant (x86-64 baseline, AVX2, AVX-512) computes the same
   attention: forced one by one (this CPU runs them all when it has AVX-512). */
START_TEST(every_instruction_set_variant)
{
    const ag_simd_level_t best = ag_i_simd_level();
    for (int level = AG_SIMD_BASE; level <= (int)best; level++) {
        ag_i_simd_force(level);
        check_kernel(AG_I_KERNEL_TILED, "causal", 150, 2, 20, 1.0f);
        check_kernel(AG_I_KERNEL_TILED, "window:40", 300, 1, 64, 3.0f);
        check_kernel(AG_I_KERNEL_GATHER, "random:9,2+window:2", 200, 2, 24, 1.0f);
        float x[32] = {-126.0f, -3.5f, -0.25f, 0.0f, -INFINITY, -200.0f}, y[32];
        exp2_all(x, y, 16);
        ck_assert_float_eq_tol(y[1], exp2f(-3.5f), 2.5e-7f * exp2f(-3.5f));
        ck_assert_float_eq(y[4], 0.0f);
        ck_assert_float_eq(y[5], 0.0f);
    }
    ag_i_simd_force(-1);
    ck_assert_int_eq(ag_i_simd_level(), best);
}
END_TEST

/* Each instruction set's table (isa.c) holds its own loops: forcing a set
   gives its table, and no two sets share an entry (a set registered with
   another's loops would run, and pass every bitwise test between the two). */
START_TEST(each_instruction_set_registers_its_own_loops)
{
    const ag_simd_level_t best = ag_i_simd_level();
    const ag_i_isa_t *sets[3] = {NULL, NULL, NULL};
    for (int level = AG_SIMD_BASE; level <= (int)best; level++) {
        ag_i_simd_force(level);
        sets[level] = ag_i_isa();
        ck_assert_int_eq(sets[level]->level, level);
    }
    ag_i_simd_force(-1);
    for (int a = AG_SIMD_BASE; a <= (int)best; a++)
        for (int b = a + 1; b <= (int)best; b++) {
            const ag_i_isa_t *x = sets[a], *y = sets[b];
            for (int w = 0; w < 2; w++) {
                ck_assert(x->tile[w] != y->tile[w] && x->block[w] != y->block[w]);
                ck_assert(x->grad[w] != y->grad[w] && x->task[w] != y->task[w]);
            }
            ck_assert(x->rows != y->rows && x->grad_rows != y->grad_rows);
            ck_assert(x->srow_fwd != y->srow_fwd && x->srow_dst != y->srow_dst &&
                      x->srow_src != y->srow_src);
        }
    for (int level = AG_SIMD_BASE; level <= (int)best; level++)
        for (int w = 0; w < 2; w++)   /* the two block widths are two loops */
            ck_assert(sets[level]->block[w] != sets[level]->block[!w]);
}
END_TEST

Suite *fast_suite(void)
{
    Suite *s = suite_create("fast");
    TCase *tc = tcase_create("fast");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, fast_kernels_match_reference, 0, N_SHAPES);
    tcase_add_test(tc, gather_on_irregular_graphs);
    tcase_add_test(tc, tiled_refuses_several_runs);
    tcase_add_test(tc, tiled_huge_logits);
#ifdef _OPENMP
    tcase_add_test(tc, fast_kernels_identical_for_1_and_2_threads);
#endif
    tcase_add_test(tc, vector_exp2_accuracy);
    tcase_add_test(tc, every_instruction_set_variant);
    tcase_add_test(tc, each_instruction_set_registers_its_own_loops);
    suite_add_tcase(s, tc);
    return s;
}
