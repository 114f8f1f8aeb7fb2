/*
 * The kernels' plan (src/kernels/plan.c): which kernel the one rule picks,
 * what it refuses, a plan held across calls (reused while the calls fit it,
 * made anew when they do not) against fresh calls bit for bit, a plan's
 * team kept when OpenMP's thread count changes after it was made, and the
 * tiled forward's copies of each head's rows against the rows in place.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "testutil.h"

static ag_nbhd_t nbhd_of(const char *spec, int64_t N)
{
    ag_pattern_t *p;
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&p, spec, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, p, N, AG_SELF_KEEP, &err), AG_OK);
    ag_pattern_free(p);
    return nb;
}

/* The kernel a plan of this direction and score picks on spec's graph. */
static ag_i_kernel_t picked(const char *spec, int64_t N, int backward, const ag_score_t *sc)
{
    ag_nbhd_t nb = nbhd_of(spec, N);
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_transpose(&nb, &err), AG_OK);
    ag_i_plan_t p;
    ck_assert_int_eq(ag_i_plan(&p, backward, AG_I_KERNEL_AUTO, &nb, 2, 8, sc, &err), AG_OK);
    const ag_i_kernel_t k = p.kernel;
    ck_assert_ptr_nonnull(p.scratch);
    ag_i_plan_free(&p);
    ck_assert_ptr_null(p.scratch);
    ag_nbhd_destroy(&nb);
    return k;
}

START_TEST(plan_picks_by_the_rule)
{
    ag_score_t gatv2, beta, bias;
    ag_score_init(&gatv2, AG_SCORE_GATV2);
    ag_score_init(&beta, AG_SCORE_DOT);
    beta.beta = 0.5f;
    ag_score_init(&bias, AG_SCORE_SCALED_DOT);
    bias.alibi = 1;
    for (int bw = 0; bw < 2; bw++) {
        /* one run of 16 or more sources a destination on average: tiled */
        ck_assert_int_eq(picked("causal", 200, bw, NULL), AG_I_KERNEL_TILED);
        ck_assert_int_eq(picked("window:40", 300, bw, &beta), AG_I_KERNEL_TILED);
        /* several runs a destination whose tiles hold edges densely: blocks */
        ck_assert_int_eq(picked("bigbird:32,1,1,1", 600, bw, NULL), AG_I_KERNEL_BLOCKS);
        ck_assert_int_eq(picked("window:30+global:3", 600, bw, &beta), AG_I_KERNEL_BLOCKS);
        /* short runs, or sources scattered over the tiles: gather */
        ck_assert_int_eq(picked("window:3", 300, bw, NULL), AG_I_KERNEL_GATHER);
        ck_assert_int_eq(picked("random:20,1", 300, bw, NULL), AG_I_KERNEL_GATHER);
        ck_assert_int_eq(picked("random:64", 4096, bw, NULL), AG_I_KERNEL_GATHER);
        /* any other score, or ALiBi on a plain one: generic */
        ck_assert_int_eq(picked("causal", 200, bw, &bias), AG_I_KERNEL_GENERIC);
        ck_assert_int_eq(picked("causal", 200, bw, &gatv2), AG_I_KERNEL_GENERIC);
    }
}
END_TEST

START_TEST(plan_refusals_name_the_cause)
{
    ag_nbhd_t nb = nbhd_of("window:3+global:1", 40);
    ag_score_t cosine;
    ag_score_init(&cosine, AG_SCORE_COSINE);
    ag_i_plan_t p;
    ag_error_t err;
    ck_assert_fails_with(ag_i_plan(&p, 0, AG_I_KERNEL_TILED, &nb, 1, 4, NULL, &err), err,
                         AG_EINVAL, "more than one run");
    ck_assert_ptr_null(p.scratch);
    ck_assert_fails_with(ag_i_plan(&p, 0, AG_I_KERNEL_GATHER, &nb, 1, 4, &cosine, &err), err,
                         AG_EINVAL, "plain dot-product");
    ck_assert_fails_with(ag_i_plan(&p, 1, AG_I_KERNEL_GATHER, &nb, 1, 4, NULL, &err), err,
                         AG_EINVAL, "not transposed");
    ck_assert_ptr_null(p.scratch);
    ag_i_plan_free(&p);   /* a failed plan holds nothing: freeing it is safe */
    ag_nbhd_destroy(&nb);
    /* a multi-edge (a source read twice) has no place in a tile: gather */
    const int64_t indptr[4] = {0, 2, 3, 3}, indices[3] = {1, 1, 0};
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, 3, indptr, indices, &err), AG_OK);
    ck_assert_int_eq(ag_i_block_cells(&nb, 0, 3), -1);
    ck_assert_fails_with(ag_i_plan(&p, 0, AG_I_KERNEL_BLOCKS, &nb, 1, 4, NULL, &err), err,
                         AG_EINVAL, "block-sparse kernel: a destination reads a source twice");
    ck_assert_str_eq(ag_attention_kernel(&nb, 4, NULL), "gather");
    ag_nbhd_destroy(&nb);
}
END_TEST

/* The public ag_attention_kernel says what a plan picks. */
START_TEST(attention_kernel_names_the_plans_choice)
{
    ag_score_t gat;
    ag_score_init(&gat, AG_SCORE_ADDITIVE);
    const char *specs[] = {"causal", "bigbird:32,1,1,1", "random:20,1", "window:3"};
    for (int k = 0; k < 4; k++) {
        ag_nbhd_t nb = nbhd_of(specs[k], 600);
        ck_assert_str_eq(ag_attention_kernel(&nb, 8, NULL),
                         ag_i_kernel_name(picked(specs[k], 600, 0, NULL)));
        ck_assert_str_eq(ag_attention_kernel(&nb, 8, &gat), "generic");
        ag_nbhd_destroy(&nb);
    }
}
END_TEST

/* Random inputs for H heads of width d on N nodes. */
static float *inputs(int64_t N, int64_t H, int64_t d, uint64_t seed)
{
    float *x = malloc((size_t)(3 * N * H * d) * sizeof *x);
    fill_uniform(x, 3 * N * H * d, seed, 1.0f);
    return x;
}

/* One plan held across calls of other shapes and scores, against a fresh
   call each, bit for bit; the plan is kept while the calls fit it. */
START_TEST(held_plan_matches_fresh_calls)
{
    const int64_t N = 300;
    ag_nbhd_t causal = nbhd_of("causal", N), rnd = nbhd_of("random:9,2+window:1", N);
    ag_score_t gat;
    ag_score_init(&gat, AG_SCORE_GATV2);
    float a[4 * 8];
    fill_uniform(a, 4 * 8, 5, 1.0f);
    gat.a_src = a;
    const struct {
        ag_nbhd_t *nb;
        int64_t H, d;
        const ag_score_t *sc;
        int replan;   /* does this call need a new plan? */
    } calls[] = {
        {&causal, 2, 16, NULL, 1}, {&causal, 2, 16, NULL, 0}, {&causal, 4, 8, NULL, 1},
        {&causal, 4, 8, &gat, 1},  {&causal, 4, 8, &gat, 0},  {&rnd, 4, 8, &gat, 1},
        {&rnd, 2, 16, NULL, 1},
    };
    float *x = inputs(N, 4, 16, 3);
    float *M1 = malloc((size_t)(N * 64) * sizeof *M1), *M2 = malloc((size_t)(N * 64) * sizeof *M2);
    ag_i_plan_t held = {0};
    ag_error_t err;
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
        const int64_t HD = calls[c].H * calls[c].d;
        const float *Q = x, *K = x + N * HD, *V = x + 2 * N * HD;
        const float *before = held.scratch;
        ck_assert_int_eq(ag_i_attention_planned(&held, calls[c].nb, Q, K, V, calls[c].H,
                                                calls[c].d, calls[c].sc, M1, NULL, &err),
                         AG_OK);
        /* a plan made anew may land at the old address; one kept stays there */
        ck_assert_msg(calls[c].replan || held.scratch == before, "call %zu: made anew", c);
        ck_assert(held.H == calls[c].H && held.d == calls[c].d);
        ck_assert(held.kind == (calls[c].sc ? calls[c].sc->kind : AG_SCORE_SCALED_DOT));
        ck_assert_int_eq(ag_attention(calls[c].nb, Q, K, V, calls[c].H, calls[c].d, calls[c].sc,
                                      M2, &err),
                         AG_OK);
        ck_assert_msg(!memcmp(M1, M2, (size_t)(N * HD) * sizeof *M1),
                      "call %zu: the held plan's messages differ from a fresh call's", c);
    }
    ag_i_plan_free(&held);
    free(x), free(M1), free(M2);
    ag_nbhd_destroy(&causal), ag_nbhd_destroy(&rnd);
}
END_TEST

#ifdef _OPENMP
/* A plan made for one thread keeps its team when OpenMP's count grows
   before it computes (its scratch is cut for its team); so does the
   streamed kernel between its start and its steps. The same bits as a
   plan made for two threads. */
START_TEST(plan_keeps_its_team)
{
    const int64_t N = 512, H = 2, d = 32, HD = H * d;
    ag_nbhd_t nb = nbhd_of("causal", N);
    float *x = inputs(N, H, d, 11);
    const float *Q = x, *K = x + N * HD, *V = x + 2 * N * HD;
    float *M1 = malloc((size_t)(N * HD) * sizeof *M1), *M2 = malloc((size_t)(N * HD) * 4);
    float *M3 = malloc((size_t)(N * HD) * sizeof *M3);
    const ag_i_fwd_t a1 = {&nb, Q, K, V, H, d, NULL, M1, NULL}, a2 = {&nb, Q, K, V, H, d, NULL,
                                                                       M2, NULL};
    ag_error_t err;
    const int old = omp_get_max_threads();
    for (int k = AG_I_KERNEL_SIMPLE; k <= AG_I_KERNEL_GENERIC; k++) {
        omp_set_num_threads(1);
        ag_i_plan_t one;
        ck_assert_int_eq(ag_i_plan(&one, 0, (ag_i_kernel_t)k, &nb, H, d, NULL, &err), AG_OK);
        ck_assert_int_eq(one.threads, 1);
        omp_set_num_threads(4);
        ck_assert_int_eq(ag_i_forward(&one, &a1, &err), AG_OK);
        ag_i_plan_free(&one);
        omp_set_num_threads(2);
        ck_assert_int_eq(ag_i_attention_with((ag_i_kernel_t)k, &a2, &err), AG_OK);
        ck_assert_msg(!memcmp(M1, M2, (size_t)(N * HD) * sizeof *M1), "kernel %d", k);
    }
    ck_assert_int_eq(ag_i_attention_with(AG_I_KERNEL_TILED, &a2, &err), AG_OK);
    omp_set_num_threads(1);
    ag_tiled_stream_t *st;
    ck_assert_int_eq(ag_i_tiled_stream_begin(&st, &nb, 0, N, Q, H, d, 1.0f / sqrtf((float)d),
                                             &err),
                     AG_OK);
    omp_set_num_threads(4);
    ag_i_tiled_stream_feed(st, K, V, N);
    ag_i_tiled_stream_end(st, M3, NULL);
    ag_i_tiled_stream_free(st);
    ck_assert_msg(!memcmp(M3, M2, (size_t)(N * HD) * sizeof *M3), "the streamed kernel");
    omp_set_num_threads(old);
    free(x), free(M1), free(M2), free(M3);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* The tiled forward among several heads, on graphs of wide blocks (a band's
   narrow blocks read each row about once a head: no copies): each thread
   copies its heads' K and V rows, and takes blocks of the others' heads, read
   in place, when done with its own. Copied or in place, the same bits, on
   every variant (AVX2 scores 6 rows at a time in a copy, 4 in place: the same
   sums). */
START_TEST(head_copies_match_rows_read_in_place)
{
    const struct {
        int64_t N, H, d;
        int team;   /* the threads the call runs on */
    } calls[] = {{520, 4, 8, 2}, {1024, 2, 64, 2}};
    const int old = omp_get_max_threads();
    const ag_simd_level_t best = ag_i_simd_level();
    omp_set_num_threads(2);
    for (int level = AG_SIMD_BASE; level <= (int)best; level++) {
        ag_i_simd_force(level);
        for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
            const int64_t N = calls[c].N, H = calls[c].H, d = calls[c].d, HD = H * d;
            ag_nbhd_t nb = nbhd_of("causal", N);
            ck_assert_int_eq(nb.n_edges * H * d >= AG_PARALLEL_MIN_WORK, calls[c].team == 2);
            float *x = inputs(N, H, d, 5);
            float *M[2] = {malloc((size_t)(N * HD) * sizeof(float)),
                           malloc((size_t)(N * HD) * sizeof(float))};
            ag_error_t err;
            for (int k = 0; k < 2; k++) {
                /* different bytes in each: a block left out shows */
                memset(M[k], k ? 0xcd : 0xab, (size_t)(N * HD) * sizeof(float));
                const ag_i_fwd_t a = {&nb, x, x + N * HD, x + 2 * N * HD, H, d, NULL, M[k], NULL};
                ag_i_plan_t p;
                ck_assert_int_eq(ag_i_plan(&p, 0, AG_I_KERNEL_TILED, &nb, H, d, NULL, &err),
                                 AG_OK);
                ck_assert_int_eq(p.head_copies, 2);   /* a copy for each thread */
                if (k)
                    p.head_copies = 0;                /* rows read in place */
                ck_assert_int_eq(ag_i_forward(&p, &a, &err), AG_OK);
                ag_i_plan_free(&p);
            }
            ck_assert_msg(!memcmp(M[0], M[1], (size_t)(N * HD) * sizeof(float)),
                          "%s, N=%lld H=%lld: copied and in place differ",
                          ag_simd_isa(), (long long)N, (long long)H);
            free(x), free(M[0]), free(M[1]);
            ag_nbhd_destroy(&nb);
            nb = nbhd_of("window:100", N);   /* narrow blocks: no copies */
            ag_i_plan_t p;
            ck_assert_int_eq(ag_i_plan(&p, 0, AG_I_KERNEL_TILED, &nb, H, d, NULL, &err), AG_OK);
            ck_assert_int_eq(p.head_copies, 0);
            ag_i_plan_free(&p);
            ag_nbhd_destroy(&nb);
        }
    }
    ag_i_simd_force(-1);
    omp_set_num_threads(old);
}
END_TEST
#endif

Suite *kernel_plan_suite(void)
{
    Suite *s = suite_create("kernel_plan");
    TCase *tc = tcase_create("kernel_plan");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, plan_picks_by_the_rule);
    tcase_add_test(tc, plan_refusals_name_the_cause);
    tcase_add_test(tc, attention_kernel_names_the_plans_choice);
    tcase_add_test(tc, held_plan_matches_fresh_calls);
#ifdef _OPENMP
    tcase_add_test(tc, plan_keeps_its_team);
    tcase_add_test(tc, head_copies_match_rows_read_in_place);
#endif
    suite_add_tcase(s, tc);
    return s;
}
