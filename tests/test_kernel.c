/*
 * The attention kernel and compiled neighbourhoods, against the dense double
 * reference (tests/reference.c).
 *
 * Tolerance: with V in [-1, 1] and scores of order 1-10, float32 accumulation
 * keeps every output within 2e-5 (absolute) of the double reference, and every
 * weight within 1e-5.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/base.h"
#include "reference.h"
#include "testutil.h"

#define TOL_M 2e-5
#define TOL_W 1e-5

/* A list of messages built by a test, the reference's input. */
typedef struct {
    int64_t N, E;
    int64_t src[4096], dst[4096];
} msgs_t;

static void add(msgs_t *m, int64_t u, int64_t v)
{
    ck_assert_int_lt(m->E, 4096);
    m->src[m->E] = u;
    m->dst[m->E++] = v;
}

static void make_causal(msgs_t *m, int64_t N)
{
    m->N = N, m->E = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j <= i; j++)
            add(m, j, i);
}

static void make_complete(msgs_t *m, int64_t N)
{
    m->N = N, m->E = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            add(m, j, i);
}

static void make_cross(msgs_t *m, int64_t S, int64_t T)
{
    m->N = S + T, m->E = 0;
    for (int64_t s = 0; s < S; s++)
        for (int64_t t = 0; t < T; t++)
            add(m, s, S + t);
}

/* Random directed edges with repeats and self-loops; the last node receives nothing. */
static void make_random(msgs_t *m, int64_t N, int64_t E, uint64_t seed)
{
    float r[2 * 4096];
    fill_uniform(r, 2 * E, seed, 1.0f);
    m->N = N, m->E = 0;
    for (int64_t e = 0; e < E; e++) {
        int64_t u = (int64_t)((r[2 * e] + 1) / 2 * N) % N;
        int64_t v = (int64_t)((r[2 * e + 1] + 1) / 2 * (N - 1)) % (N - 1);
        add(m, u, v);
    }
    add(m, 3, 3), add(m, 3, 3), add(m, 0, 1), add(m, 0, 1);   /* sure repeats and loops */
}

/* Compiles m into nb, as a directed graph with m's edges in order. */
static void compile(ag_nbhd_t *nb, const msgs_t *m)
{
    igraph_t g;
    build_graph(&g, m->N, m->src, m->dst, m->E, 1);
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(nb, &g, &err), AG_OK);
    igraph_destroy(&g);
}

/*
 * Runs the kernel on m with random Q, K, V of the given scale and checks the
 * messages and every weight against the reference, weights summing to 1 and
 * zero rows for nodes without in-edges.
 */
static void check_against_reference(const msgs_t *m, const ag_nbhd_t *nb, int64_t H, int64_t d,
                                    float scale, uint64_t seed)
{
    const int64_t N = m->N, HD = H * d, E = m->E;
    float *Q = malloc(N * HD * sizeof *Q), *K = malloc(N * HD * sizeof *K);
    float *V = malloc(N * HD * sizeof *V), *M = malloc(N * HD * sizeof *M);
    float *W = malloc((E * H + 1) * sizeof *W);
    double *Mref = malloc(N * HD * sizeof *Mref), *Wref = malloc((E * H + 1) * sizeof *Wref);
    fill_uniform(Q, N * HD, seed, scale);
    fill_uniform(K, N * HD, seed + 1, scale);
    fill_uniform(V, N * HD, seed + 2, 1.0f);
    ag_error_t err;
    ck_assert_int_eq(ag_attention(nb, Q, K, V, H, d, NULL, M, &err), AG_OK);
    ck_assert_int_eq(ag_attention_weights(nb, Q, K, H, d, NULL, 0, N, W, &err), AG_OK);
    ref_attention(N, m->src, m->dst, E, Q, K, V, H, d, Mref, Wref);

    double diff = max_abs_diff_fd(M, Mref, N * HD);
    ck_assert_msg(diff <= TOL_M, "messages differ from the reference by %g", diff);

    /* weights in the graph's edge order: message k of m is edge k */
    ag_edge_msg_t *order;
    int64_t *slot;
    ck_assert_int_eq(ag_edge_order(nb, &order, &slot, &err), AG_OK);
    ck_assert_int_eq(nb->n_edges, E);
    for (int64_t k = 0; k < E; k++) {
        ck_assert_int_eq(order[k].edge_id, k);
        ck_assert_int_eq(order[k].src, m->src[k]);
        ck_assert_int_eq(order[k].dst, m->dst[k]);
        for (int64_t h = 0; h < H; h++) {
            double e = fabs(W[slot[k] * H + h] - Wref[k * H + h]);
            ck_assert_msg(e <= TOL_W, "weight of edge %lld head %lld off by %g", (long long)k,
                          (long long)h, e);
        }
    }
    /* per destination and head: weights sum to 1, or the row is zero */
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < H; h++) {
            double sum = 0;
            for (int64_t s = nb->edge_ptr[i]; s < nb->edge_ptr[i + 1]; s++)
                sum += W[s * H + h];
            if (nb->edge_ptr[i + 1] > nb->edge_ptr[i]) {
                ck_assert_msg(fabs(sum - 1) < 1e-5, "node %lld head %lld sums to %.9g",
                              (long long)i, (long long)h, sum);
            } else {
                for (int64_t c = 0; c < d; c++)
                    ck_assert_float_eq(M[i * HD + h * d + c], 0.0f);
            }
        }
    free(order), free(slot);
    free(Q), free(K), free(V), free(M), free(W), free(Mref), free(Wref);
}

static void check_msgs(const msgs_t *m, int64_t H, int64_t d, float scale)
{
    ag_nbhd_t nb;
    compile(&nb, m);
    check_against_reference(m, &nb, H, d, scale, 42);
    ag_nbhd_destroy(&nb);
}

START_TEST(causal_matches_reference)
{
    msgs_t m;
    make_causal(&m, 17);
    check_msgs(&m, 1, 8, 1.0f);
    check_msgs(&m, 2, 16, 2.0f);
}
END_TEST

START_TEST(complete_matches_reference)
{
    msgs_t m;
    make_complete(&m, 16);
    check_msgs(&m, 4, 4, 1.5f);
}
END_TEST

START_TEST(cross_matches_reference)
{
    msgs_t m;
    make_cross(&m, 4, 3);        /* sources receive nothing: zero rows */
    check_msgs(&m, 1, 6, 1.0f);
}
END_TEST

START_TEST(random_multi_edges_self_loops_isolated)
{
    msgs_t m;
    make_random(&m, 13, 60, 7);
    check_msgs(&m, 2, 3, 1.0f);
}
END_TEST

START_TEST(odd_sizes)
{
    msgs_t m;
    make_causal(&m, 31);         /* N prime, d = 5, H = 3 */
    check_msgs(&m, 3, 5, 1.0f);
    make_random(&m, 31, 200, 3);
    check_msgs(&m, 3, 5, 1.0f);
}
END_TEST

START_TEST(undirected_counts_both_ways)
{
    /* 0-1, 1-2, 2-2 (self-loop: one message), 1-2 again (multi-edge) */
    const int64_t src[] = {0, 1, 2, 1}, dst[] = {1, 2, 2, 2};
    igraph_t g;
    build_graph(&g, 4, src, dst, 4, 0);
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    igraph_destroy(&g);
    ck_assert_int_eq(nb.n_edges, 7);
    msgs_t m = {.N = 4};
    add(&m, 0, 1), add(&m, 1, 0), add(&m, 1, 2), add(&m, 2, 1), add(&m, 2, 2);
    add(&m, 1, 2), add(&m, 2, 1);
    /* check_against_reference expects message k to be edge k; here edge e has
       two messages, so compare messages only and the order by hand. */
    ag_edge_msg_t *order;
    int64_t *slot;
    ck_assert_int_eq(ag_edge_order(&nb, &order, &slot, &err), AG_OK);
    const int64_t want_eid[] = {0, 0, 1, 1, 2, 3, 3};
    for (int k = 0; k < 7; k++) {
        ck_assert_int_eq(order[k].edge_id, want_eid[k]);
        ck_assert_int_eq(order[k].src, m.src[k]);
        ck_assert_int_eq(order[k].dst, m.dst[k]);
    }
    free(order), free(slot);

    const int64_t H = 2, d = 3, HD = 6;
    float Q[24], K[24], V[24], M[24];
    double Mref[24];
    fill_uniform(Q, 24, 1, 1.0f), fill_uniform(K, 24, 2, 1.0f), fill_uniform(V, 24, 3, 1.0f);
    ck_assert_int_eq(ag_attention(&nb, Q, K, V, H, d, NULL, M, &err), AG_OK);
    ref_attention(4, m.src, m.dst, m.E, Q, K, V, H, d, Mref, NULL);
    ck_assert_double_le(max_abs_diff_fd(M, Mref, 4 * HD), TOL_M);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* Scores of magnitude ~1e4, computed exactly in float (integer inputs), so
   the only error is the softmax's: no NaN, no overflow, the right answer. */
START_TEST(huge_logits)
{
    msgs_t m;
    make_complete(&m, 12);
    const int64_t N = 12, H = 1, d = 4;
    float Q[48], K[48], V[48], M[48], W[144];
    double Mref[48], Wref[144];
    fill_uniform(Q, 48, 11, 60.0f);
    fill_uniform(K, 48, 12, 60.0f);
    fill_uniform(V, 48, 13, 1.0f);
    for (int i = 0; i < 48; i++)
        Q[i] = roundf(Q[i]), K[i] = roundf(K[i]);
    double max_score = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int c = 0; c < d; c++)
                s += Q[i * d + c] * K[j * d + c];
            max_score = fmax(max_score, fabs(s / 2));
        }
    ck_assert_double_gt(max_score, 2000);
    ag_nbhd_t nb;
    compile(&nb, &m);
    ag_error_t err;
    ck_assert_int_eq(ag_attention(&nb, Q, K, V, H, d, NULL, M, &err), AG_OK);
    ck_assert_int_eq(ag_attention_weights(&nb, Q, K, H, d, NULL, 0, N, W, &err), AG_OK);
    ref_attention(N, m.src, m.dst, m.E, Q, K, V, H, d, Mref, Wref);
    for (int i = 0; i < 48; i++)
        ck_assert(isfinite(M[i]));
    ck_assert_double_le(max_abs_diff_fd(M, Mref, 48), TOL_M);
    ck_assert_double_le(max_abs_diff_fd(W, Wref, 144), TOL_W);   /* complete: slot = edge */
    ag_nbhd_destroy(&nb);
}
END_TEST

#ifdef _OPENMP
START_TEST(threads_give_identical_bits)
{
    msgs_t *m = malloc(sizeof *m);
    make_random(m, 97, 4000, 5);
    ag_nbhd_t nb;
    compile(&nb, m);
    const int64_t N = 97, H = 3, d = 7, HD = 21;
    /* enough work that two threads really run (smaller regions run on one) */
    ck_assert_int_ge(nb.n_edges * HD, AG_PARALLEL_MIN_WORK);
    float *Q = malloc(N * HD * 4), *K = malloc(N * HD * 4), *V = malloc(N * HD * 4);
    float *M1 = malloc(N * HD * 4), *M2 = malloc(N * HD * 4);
    float *W1 = malloc(nb.n_edges * H * 4), *W2 = malloc(nb.n_edges * H * 4);
    fill_uniform(Q, N * HD, 1, 2.0f), fill_uniform(K, N * HD, 2, 2.0f);
    fill_uniform(V, N * HD, 3, 1.0f);
    ag_error_t err;
    omp_set_num_threads(1);
    ck_assert_int_eq(ag_attention(&nb, Q, K, V, H, d, NULL, M1, &err), AG_OK);
    ck_assert_int_eq(ag_attention_weights(&nb, Q, K, H, d, NULL, 0, N, W1, &err), AG_OK);
    omp_set_num_threads(2);
    ck_assert_int_eq(ag_attention(&nb, Q, K, V, H, d, NULL, M2, &err), AG_OK);
    ck_assert_int_eq(ag_attention_weights(&nb, Q, K, H, d, NULL, 0, N, W2, &err), AG_OK);
    ck_assert_mem_eq(M1, M2, N * HD * 4);
    ck_assert_mem_eq(W1, W2, nb.n_edges * H * 4);
    ag_nbhd_destroy(&nb);
    free(m), free(Q), free(K), free(V), free(M1), free(M2), free(W1), free(W2);
}
END_TEST
#endif

START_TEST(runs_of_consecutive_sources)
{
    msgs_t m;
    make_causal(&m, 50);
    ag_nbhd_t nb;
    compile(&nb, &m);
    ck_assert_int_eq(nb.n_runs, 50);          /* causal: one run per node */
    for (int64_t i = 0; i < 50; i++) {
        ck_assert_int_eq(nb.run_src[nb.run_ptr[i]], 0);
        ck_assert_int_eq(nb.run_len[nb.run_ptr[i]], i + 1);
    }
    ag_nbhd_destroy(&nb);

    /* sources 5, 3, 4, 4, 9 -> ascending 3 4 4 5 9 -> runs [3,4] [4,5] [9] */
    msgs_t r = {.N = 10};
    add(&r, 5, 0), add(&r, 3, 0), add(&r, 4, 0), add(&r, 4, 0), add(&r, 9, 0);
    compile(&nb, &r);
    ck_assert_int_eq(nb.n_runs, 3);
    int64_t src[5];
    ag_nbhd_sources(&nb, 0, 1, src);
    const int64_t want[] = {3, 4, 4, 5, 9};
    ck_assert_mem_eq(src, want, sizeof want);
    ag_nbhd_destroy(&nb);
}
END_TEST

START_TEST(csr_input_is_validated)
{
    ag_nbhd_t nb;
    ag_error_t err;
    const int64_t indptr[] = {0, 2, 3, 5}, indices[] = {0, 1, 2, 0, 2};
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, 3, indptr, indices, &err), AG_OK);
    ck_assert_int_eq(nb.n_edges, 5);
    ck_assert_ptr_null(nb.edge_id);
    ag_edge_msg_t *o;
    int64_t *s;
    ck_assert_int_eq(ag_edge_order(&nb, &o, &s, &err), AG_OK);   /* no edge ids: slot order */
    const int64_t want_src[] = {0, 1, 2, 0, 2}, want_dst[] = {0, 0, 1, 2, 2};
    for (int k = 0; k < 5; k++) {
        ck_assert_int_eq(o[k].edge_id, k);
        ck_assert_int_eq(s[k], k);
        ck_assert_int_eq(o[k].src, want_src[k]);
        ck_assert_int_eq(o[k].dst, want_dst[k]);
    }
    free(o), free(s);
    ag_nbhd_destroy(&nb);

    const int64_t bad_start[] = {1, 2, 3, 5};
    ck_assert_fails_with(ag_nbhd_from_csr(&nb, 3, bad_start, indices, &err), err, AG_EINVAL,
                         "indptr[0] is 1");
    const int64_t decreasing[] = {0, 3, 2, 5};
    ck_assert_fails_with(ag_nbhd_from_csr(&nb, 3, decreasing, indices, &err), err, AG_EINVAL,
                         "decreases");
    const int64_t out_of_range[] = {0, 1, 7, 0, 2};
    ck_assert_fails_with(ag_nbhd_from_csr(&nb, 3, indptr, out_of_range, &err), err, AG_EINVAL,
                         "indices[2] is 7");
    const int64_t unsorted[] = {1, 0, 2, 0, 2};
    ck_assert_fails_with(ag_nbhd_from_csr(&nb, 3, indptr, unsorted, &err), err, AG_EINVAL,
                         "not ascending");
}
END_TEST

START_TEST(bad_kernel_arguments)
{
    msgs_t m;
    make_causal(&m, 3);
    ag_nbhd_t nb;
    compile(&nb, &m);
    float x[9] = {0};
    ag_error_t err;
    ck_assert_fails_with(ag_attention(&nb, x, x, x, 0, 3, NULL, x, &err), err, AG_EINVAL, "0 heads");
    ck_assert_fails_with(ag_attention_weights(&nb, x, x, 1, 3, NULL, 2, 9, x, &err), err, AG_EINVAL,
                         "outside");
    ag_nbhd_destroy(&nb);
}
END_TEST

Suite *kernel_suite(void)
{
    Suite *s = suite_create("kernel");
    TCase *tc = tcase_create("kernel");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, causal_matches_reference);
    tcase_add_test(tc, complete_matches_reference);
    tcase_add_test(tc, cross_matches_reference);
    tcase_add_test(tc, random_multi_edges_self_loops_isolated);
    tcase_add_test(tc, odd_sizes);
    tcase_add_test(tc, undirected_counts_both_ways);
    tcase_add_test(tc, huge_logits);
#ifdef _OPENMP
    tcase_add_test(tc, threads_give_identical_bits);
#endif
    tcase_add_test(tc, runs_of_consecutive_sources);
    tcase_add_test(tc, csr_input_is_validated);
    tcase_add_test(tc, bad_kernel_arguments);
    suite_add_tcase(s, tc);
    return s;
}
