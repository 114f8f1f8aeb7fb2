/*
 * The memory budget's refusals keep their status: every path that allocates
 * under the budget returns AG_ELIMIT when the budget refuses an array, the
 * status recorded in err (never AG_ENOMEM), also when err is NULL.
 *
 * Sizes: the budget checks arrays of 64 MiB and more, so each case asks for
 * one such array from small inputs (a node with many runs, wide heads). Big
 * inputs the refused call would read come from calloc and are never touched;
 * nothing large is allocated for real.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "testutil.h"

#define BUDGET ((int64_t)1 << 20)
#define BIG ((int64_t)1 << 24)   /* floats: 64 MiB, the smallest array checked */

/* rc and err's status are AG_ELIMIT, and err's message names the budget. */
#define ck_refused(rc, err)                                                                \
    do {                                                                                   \
        ck_assert_int_eq((rc), AG_ELIMIT);                                                 \
        ck_assert_int_eq((err).status, AG_ELIMIT);                                         \
        ck_assert_msg(strstr((err).msg, "the memory budget is") != NULL,                   \
                      "message '%s' does not name the budget", (err).msg);                 \
    } while (0)

/*
 * N nodes; node 0 reads every node `runs` times over (one run of N sources
 * each: an in-degree of runs x N), every other node itself. The gather and
 * generic kernels size their buffers by the largest in-degree.
 */
typedef struct {
    ag_nbhd_t nb;
    int64_t edge_ptr[1025], run_ptr[1025];
    int64_t *run_src, *run_len;
} wide_t;

static void wide_init(wide_t *w, int64_t N, int64_t runs)
{
    ck_assert_int_le(N, 1024);
    const int64_t R = runs + N - 1;
    w->run_src = malloc((size_t)R * sizeof *w->run_src);
    w->run_len = malloc((size_t)R * sizeof *w->run_len);
    for (int64_t r = 0; r < runs; r++)
        w->run_src[r] = 0, w->run_len[r] = N;
    w->edge_ptr[0] = w->run_ptr[0] = 0;
    w->edge_ptr[1] = runs * N, w->run_ptr[1] = runs;
    for (int64_t i = 1; i < N; i++) {
        w->run_src[runs + i - 1] = i, w->run_len[runs + i - 1] = 1;
        w->edge_ptr[i + 1] = w->edge_ptr[i] + 1, w->run_ptr[i + 1] = w->run_ptr[i] + 1;
    }
    w->nb = (ag_nbhd_t){.n_nodes = N, .n_edges = w->edge_ptr[N], .n_runs = R,
                        .edge_ptr = w->edge_ptr, .run_ptr = w->run_ptr,
                        .run_src = w->run_src, .run_len = w->run_len};
}

static void wide_free(wide_t *w)
{
    free(w->run_src), free(w->run_len);
}

static ag_nbhd_t pattern_nbhd(const char *spec, int64_t N)
{
    ag_error_t err;
    ag_pattern_t *pat;
    ag_nbhd_t nb;
    ck_assert_int_eq(ag_pattern_parse(&pat, spec, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, pat, N, AG_SELF_KEEP, &err), AG_OK);
    ag_pattern_free(pat);
    return nb;
}

/* The gather kernel (ag_attention's choice for several runs a node): per
   thread 3 floats an in-edge of the largest in-degree, 2^24 here. */
START_TEST(gather_kernel_refusal_is_a_limit)
{
    wide_t w;
    wide_init(&w, 1024, BIG / 1024);
    const int64_t H = 1, d = 16;
    float *x = calloc((size_t)(4 * 1024 * H * d), sizeof *x);
    ag_error_t err;
    const int64_t old = ag_set_memory_budget(BUDGET);
    ck_refused(ag_attention(&w.nb, x, x, x, H, d, NULL, x + 3 * 1024 * H * d, &err), err);
    ck_assert_msg(strstr(err.msg, "gather kernel buffers"), "%s", err.msg);
    ck_assert_int_eq(ag_attention(&w.nb, x, x, x, H, d, NULL, x + 3 * 1024 * H * d, NULL),
                     AG_ELIMIT);
    ag_set_memory_budget(old);
    free(x);
    wide_free(&w);
}
END_TEST

/* The generic kernel (additive scores): per thread a float an in-edge. */
START_TEST(generic_kernel_refusal_is_a_limit)
{
    wide_t w;
    wide_init(&w, 1024, BIG / 1024);
    const int64_t H = 1, d = 16;
    float *x = calloc((size_t)(4 * 1024 * H * d), sizeof *x);
    const float a[16] = {0};
    ag_score_t additive;
    ag_score_init(&additive, AG_SCORE_ADDITIVE);
    additive.a_src = additive.a_dst = a;
    ag_error_t err;
    const int64_t old = ag_set_memory_budget(BUDGET);
    ck_refused(ag_attention(&w.nb, x, x, x, H, d, &additive, x + 3 * 1024 * H * d, &err), err);
    ck_assert_msg(strstr(err.msg, "attention buffer"), "%s", err.msg);
    ck_assert_int_eq(ag_attention(&w.nb, x, x, x, H, d, &additive, x + 3 * 1024 * H * d, NULL),
                     AG_ELIMIT);
    ag_set_memory_budget(old);
    free(x);
    wide_free(&w);
}
END_TEST

/* The tiled kernel (one run a node, 16 in-edges a node): per thread 2 x d
   floats a row of a block of 16 or more; heads of width 2^19. */
START_TEST(tiled_kernel_refusal_is_a_limit)
{
    ag_nbhd_t nb = pattern_nbhd("complete", 16);
    const int64_t H = 1, d = (int64_t)1 << 19;
    float *x = calloc((size_t)(16 * H * d), sizeof *x);   /* Q, K, V and M: never touched */
    ag_error_t err;
    const int64_t old = ag_set_memory_budget(BUDGET);
    ck_refused(ag_attention(&nb, x, x, x, H, d, NULL, x, &err), err);
    ck_assert_msg(strstr(err.msg, "tiled kernel buffers"), "%s", err.msg);
    ck_assert_int_eq(ag_attention(&nb, x, x, x, H, d, NULL, x, NULL), AG_ELIMIT);
    ag_set_memory_budget(old);
    free(x);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* The one-pass kernel: per thread 4 floats a head; 2^22 heads of width 1. */
START_TEST(simple_kernel_refusal_is_a_limit)
{
    ag_nbhd_t nb = pattern_nbhd("causal", 1);
    const int64_t H = BIG / 4, d = 1;
    float *x = calloc((size_t)(H * d), sizeof *x);
    ag_error_t err;
    const int64_t old = ag_set_memory_budget(BUDGET);
    ck_refused(ag_i_attention_with(AG_I_KERNEL_SIMPLE,
                                   &(ag_i_fwd_t){&nb, x, x, x, H, d, AG_I_DOT_SCORE(1.0f), x, NULL},
                                   &err),
               err);
    ck_assert_int_eq(
        ag_i_attention_with(AG_I_KERNEL_SIMPLE,
                            &(ag_i_fwd_t){&nb, x, x, x, H, d, AG_I_DOT_SCORE(1.0f), x, NULL}, NULL),
        AG_ELIMIT);
    ag_set_memory_budget(old);
    free(x);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* ag_attention_backward without the forward's M and lse keeps its own
   [N, H*d] messages: 1024 nodes of width 2^14 (its kernel's buffers, 34 MB,
   are refused first now that a set budget holds for every array). */
START_TEST(attention_backward_refusal_is_a_limit)
{
    ag_nbhd_t nb = pattern_nbhd("causal", 1024);
    const int64_t H = 1, d = BIG / 1024;
    float *x = calloc((size_t)(1024 * H * d), sizeof *x);   /* every input and output */
    const ag_attention_grads_t g = {.dQ = x, .dK = x, .dV = x};
    ag_error_t err;
    const int64_t old = ag_set_memory_budget(BUDGET);
    ck_refused(ag_attention_backward(&nb, x, x, x, H, d, NULL, NULL, NULL, x, &g, &err), err);
    ck_assert_msg(strstr(err.msg, "backward"), "%s", err.msg);
    ck_assert_int_eq(ag_attention_backward(&nb, x, x, x, H, d, NULL, NULL, NULL, x, &g, NULL),
                     AG_ELIMIT);
    ag_set_memory_budget(old);
    free(x);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* Rounds: the workspace [N, H*d], and the LayerNorm states [N, D] that
   ag_rounds_run makes itself. */
START_TEST(rounds_refusal_is_a_limit)
{
    ag_nbhd_t nb = pattern_nbhd("causal", 1024);
    const int64_t N = 1024, wide = BIG / 1024;
    ag_error_t err;
    ag_workspace_t ws;
    const int64_t old = ag_set_memory_budget(BUDGET);
    ck_refused(ag_workspace_init(&ws, N, wide, 1, &err), err);
    ck_assert_msg(strstr(err.msg, "workspace"), "%s", err.msg);
    ck_assert_int_eq(ag_workspace_init(&ws, N, wide, 1, NULL), AG_ELIMIT);
    ag_matrix_t m;
    ck_refused(ag_matrix_init(&m, N, wide, &err), err);
    ck_assert_int_eq(ag_matrix_init(&m, N, wide, NULL), AG_ELIMIT);

    ag_weights_t w;   /* D = 2^14, one head of width 1 */
    ck_assert_int_eq(ag_weights_random(&w, wide, 1, 1, 0, 1, &err), AG_OK);
    ck_assert_int_eq(ag_workspace_init(&ws, N, 1, wide, &err), AG_OK);
    float *X = calloc((size_t)(N * wide), sizeof *X);   /* never touched */
    ag_round_opts_t ln = AG_ROUND_OPTS_INIT;
    ln.norm = AG_NORM_LAYER;
    ck_refused(ag_rounds_run(&nb, &w, 1, X, 1, &ln, &ws, NULL, &err), err);
    ck_assert_int_eq(ag_rounds_run(&nb, &w, 1, X, 1, &ln, &ws, NULL, NULL), AG_ELIMIT);
    ag_set_memory_budget(old);
    free(X);
    ag_workspace_destroy(&ws);
    ag_weights_destroy(&w);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* Training: the forward's tape, the backward's buffers, the cross-entropy's
   logits (through its reducer) and an optimizer's state. */
START_TEST(training_refusal_is_a_limit)
{
    ag_nbhd_t nb = pattern_nbhd("causal", 1024);
    const int64_t N = 1024, D = BIG / 1024;
    ag_error_t err;
    ag_weights_t w, g;
    ck_assert_int_eq(ag_weights_random(&w, D, 1, 1, 0, 1, &err), AG_OK);
    ck_assert_int_eq(ag_weights_grads_init(&g, &w, 0, &err), AG_OK);
    float *X = calloc((size_t)(N * D), sizeof *X);   /* X and dY: never touched */
    ag_tape_t *tape = NULL;
    const int64_t old = ag_set_memory_budget(BUDGET);
    /* a round's tape holds X [N, D] */
    ck_refused(ag_rounds_forward(&nb, &w, 1, X, 1, NULL, &tape, &err), err);
    ck_assert_msg(strstr(err.msg, "tape"), "%s", err.msg);
    ck_assert_ptr_null(tape);
    ck_assert_int_eq(ag_rounds_forward(&nb, &w, 1, X, 1, NULL, &tape, NULL), AG_ELIMIT);
    /* no round: an empty tape, and the backward asks for 3 x [N, D] at once */
    ck_assert_int_eq(ag_rounds_forward(&nb, &w, 1, X, 0, NULL, &tape, &err), AG_OK);
    ck_refused(ag_rounds_backward(tape, X, NULL, &g, &err), err);
    ck_assert_msg(strstr(err.msg, "rounds backward"), "%s", err.msg);
    ck_assert_int_eq(ag_rounds_backward(tape, X, NULL, &g, NULL), AG_ELIMIT);
    ag_tape_free(tape);

    /* logits [N, C] for C = 2^14 classes of width 1 */
    const int64_t C = D;
    int64_t labels[1024] = {0};
    const ag_cross_entropy_t ce = {.Wr = X, .C = C, .labels = labels};
    ag_cross_entropy_out_t out = AG_CROSS_ENTROPY_OUT_INIT;
    ck_refused(ag_loss_cross_entropy(X, N, 1, &ce, &out, &err), err);
    ck_assert_int_eq(ag_loss_cross_entropy(X, N, 1, &ce, &out, NULL), AG_ELIMIT);
    /* Adam's moments for 2^24 parameters */
    ag_optimizer_t *opt;
    const ag_optimizer_opts_t adam = AG_OPTIMIZER_OPTS_INIT;
    ck_assert_int_eq(ag_optimizer_init(&opt, &adam, &err), AG_OK);
    ck_refused(ag_optimizer_add(opt, X, X, N * D, &err), err);
    ck_assert_int_eq(ag_optimizer_add(opt, X, X, N * D, NULL), AG_ELIMIT);
    ag_set_memory_budget(old);
    ag_optimizer_free(opt);
    free(X);
    ag_weights_destroy(&g);
    ag_weights_destroy(&w);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* A budget that was set holds for arrays of any size (small ones were let
   through unchecked: only those of 64 MiB and more were). */
START_TEST(a_set_budget_holds_for_small_arrays)
{
    ag_error_t err;
    const int64_t old = ag_set_memory_budget(BUDGET);
    void *p = ag_alloc(BUDGET / 4 + 1, sizeof(float), &err, "a small array");
    ck_assert_ptr_null(p);
    ck_refused(AG_ELIMIT, err);
    ck_assert_msg(strstr(err.msg, "a small array needs") != NULL, "%s", err.msg);
    ck_assert_int_eq(ag_alloc_status(), AG_ELIMIT);
    ck_assert_ptr_null(ag_calloc(BUDGET, 2, NULL, "a small array"));
    ck_assert_ptr_null(ag_i_alloc_lines(BUDGET, 2, NULL, "a small array"));
    /* within the budget, and without one set, it is allocated */
    p = ag_alloc(BUDGET / 4, sizeof(float), &err, "a small array");
    ck_assert_ptr_nonnull(p);
    free(p);
    ag_set_memory_budget(0);
    p = ag_alloc(BUDGET, 2, &err, "a small array");
    ck_assert_ptr_nonnull(p);
    free(p);
    ag_set_memory_budget(old);
}
END_TEST

/* Arrays that grow hold to the budget too: the pattern compiler's runs
   (random:4 on 2,000 nodes: 8,000 runs, 64 KB a list, grown by doubling
   from 1,024) and the partition planner's lists, under a budget of 20 KB
   (each node's 16 KB of offsets fit). */
START_TEST(growing_arrays_hold_to_the_budget)
{
    ag_error_t err;
    ag_pattern_t *pat;
    ag_nbhd_t nb;
    ck_assert_int_eq(ag_pattern_parse(&pat, "random:4", &err), AG_OK);
    const int64_t old = ag_set_memory_budget(20 << 10);
    const int rc = ag_nbhd_from_pattern(&nb, pat, 2000, AG_SELF_KEEP, &err);
    ck_assert_int_eq(rc, AG_ELIMIT);
    ck_assert_msg(strstr(err.msg, "pattern 'random:4': over the memory budget for 2048 runs"),
                  "%s", err.msg);
    int64_t first[3];
    ag_part_stats_t st[2];
    ck_assert_int_eq(ag_partition_pattern(first, st, pat, 20000, AG_SELF_KEEP, 2,
                                          AG_SAMPLE_EXACT, NULL, &err), AG_ELIMIT);
    ck_assert_msg(strstr(err.msg, "memory budget"), "%s", err.msg);
    ag_set_memory_budget(old);
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, pat, 2000, AG_SELF_KEEP, &err), AG_OK);
    ag_nbhd_destroy(&nb);
    ag_pattern_free(pat);
}
END_TEST

Suite *budget_suite(void)
{
    Suite *s = suite_create("budget");
    TCase *tc = tcase_create("budget");
    tcase_add_test(tc, gather_kernel_refusal_is_a_limit);
    tcase_add_test(tc, generic_kernel_refusal_is_a_limit);
    tcase_add_test(tc, tiled_kernel_refusal_is_a_limit);
    tcase_add_test(tc, simple_kernel_refusal_is_a_limit);
    tcase_add_test(tc, attention_backward_refusal_is_a_limit);
    tcase_add_test(tc, rounds_refusal_is_a_limit);
    tcase_add_test(tc, training_refusal_is_a_limit);
    tcase_add_test(tc, a_set_budget_holds_for_small_arrays);
    tcase_add_test(tc, growing_arrays_hold_to_the_budget);
    suite_add_tcase(s, tc);
    return s;
}
