/*
 * ag_nbhd_transpose: every message j -> i appears exactly once among j's
 * out-runs, with the layer that counts it among j's messages to i, and the
 * out-runs of structured patterns stay compact.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Checks nb's transpose against its in-runs, message by message, with an
   N x N table of multiplicities (small N). */
static void check_transpose(ag_nbhd_t *nb)
{
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_transpose(nb, &err), AG_OK);
    const int64_t N = nb->n_nodes;
    int *want = calloc((size_t)(N * N), sizeof *want), *seen = calloc((size_t)(N * N), sizeof *seen);
    for (int64_t i = 0; i < N; i++) {
        int64_t slot = nb->edge_ptr[i];
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++) {
            ck_assert_int_eq(nb->run_slot[r], slot);
            slot += nb->run_len[r];
            for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++)
                want[i * N + j]++;
        }
    }
    int64_t total = 0;
    ck_assert_int_eq(nb->out_ptr[0], 0);
    ck_assert_int_eq(nb->out_ptr[N], nb->n_out_runs);
    for (int64_t j = 0; j < N; j++) {
        int64_t prev_end = -1, prev_nth = 0;
        for (int64_t r = nb->out_ptr[j]; r < nb->out_ptr[j + 1]; r++) {
            ck_assert_int_ge(nb->out_len[r], 1);
            /* layers in order; within a layer, ascending and not touching */
            ck_assert_int_ge(nb->out_nth[r], prev_nth);
            if (nb->out_nth[r] == prev_nth)
                ck_assert_int_gt(nb->out_dst[r], prev_end);
            prev_nth = nb->out_nth[r], prev_end = nb->out_dst[r] + nb->out_len[r];
            for (int64_t i = nb->out_dst[r]; i < nb->out_dst[r] + nb->out_len[r]; i++) {
                ck_assert_int_lt(i, N);
                ck_assert_int_eq(seen[i * N + j], nb->out_nth[r]);   /* the (nth+1)-th */
                seen[i * N + j]++;
                total++;
            }
        }
    }
    ck_assert_int_eq(total, nb->n_edges);
    ck_assert_mem_eq(want, seen, (size_t)(N * N) * sizeof *want);
    free(want), free(seen);
}

START_TEST(transpose_of_patterns)
{
    const char *specs[] = {"causal", "window:3", "complete", "causal&!strided:3",
                           "window:2+global:1", "window:2,3", "random:3,5", "dilated:6,2"};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++)
        for (int self = AG_SELF_KEEP; self <= AG_SELF_REPLACE; self++) {
            ag_pattern_t *p;
            ag_nbhd_t nb;
            ag_error_t err;
            ck_assert_int_eq(ag_pattern_parse(&p, specs[k], &err), AG_OK);
            const int rc = ag_nbhd_from_pattern(&nb, p, 23, (ag_self_loops_t)self, &err);
            ck_assert_msg(rc == AG_OK, "%s: %s", specs[k], err.msg);
            check_transpose(&nb);
            ag_nbhd_destroy(&nb);
            ag_pattern_free(p);
        }
}
END_TEST

START_TEST(transpose_of_multigraph)
{
    /* multi-edges (three 2 -> 5, two 4 -> 5), self-loops, isolated nodes 8 and 9 */
    const int64_t src[] = {0, 1, 2, 2, 2, 3, 4, 4, 5, 5, 6, 7, 1, 3, 0, 6, 7, 2};
    const int64_t dst[] = {5, 5, 5, 5, 5, 5, 5, 5, 5, 0, 0, 1, 1, 7, 6, 6, 7, 4};
    const int64_t E = sizeof src / sizeof *src;
    for (int directed = 0; directed <= 1; directed++) {
        igraph_t g;
        build_graph(&g, 10, src, dst, E, directed);
        ag_nbhd_t nb;
        ag_error_t err;
        ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
        check_transpose(&nb);
        ck_assert_int_eq(ag_nbhd_self_loops(&nb, AG_SELF_ON, &err), AG_OK);
        ck_assert_ptr_null(nb.out_ptr);   /* dropped: the runs changed */
        check_transpose(&nb);
        ck_assert_int_eq(ag_nbhd_self_loops(&nb, AG_SELF_REPLACE, &err), AG_OK);
        check_transpose(&nb);
        ag_nbhd_destroy(&nb);
        igraph_destroy(&g);
    }
}
END_TEST

START_TEST(transpose_of_random_csr)
{
    enum { N = 40 };
    int64_t indptr[N + 1], indices[N * 12];
    uint64_t x = 12345;
    indptr[0] = 0;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const int deg = (int)(x >> 60) % 12;
        int64_t *row = indices + indptr[i];
        for (int e = 0; e < deg; e++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            row[e] = (int64_t)(x >> 33) % 9 * 4 % N;   /* repeats: multi-edges */
        }
        for (int a = 1; a < deg; a++)   /* ascending, as a CSR must be */
            for (int b = a; b > 0 && row[b - 1] > row[b]; b--) {
                const int64_t t = row[b];
                row[b] = row[b - 1], row[b - 1] = t;
            }
        indptr[i + 1] = indptr[i] + deg;
    }
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, N, indptr, indices, &err), AG_OK);
    check_transpose(&nb);
    ag_nbhd_destroy(&nb);
}
END_TEST

START_TEST(transpose_of_long_causal_is_compact)
{
    ag_pattern_t *p;
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&p, "causal", &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, p, 65536, AG_SELF_KEEP, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_transpose(&nb, &err), AG_OK);
    ck_assert_int_eq(nb.n_out_runs, 65536);   /* source j: one run j .. N-1 */
    ck_assert_int_eq(nb.out_dst[100], 100);
    ck_assert_int_eq(nb.out_len[100], 65536 - 100);
    ck_assert_int_eq(ag_nbhd_transpose(&nb, &err), AG_OK);   /* a second call: kept */
    ag_nbhd_destroy(&nb);
    ag_pattern_free(p);
}
END_TEST

Suite *transpose_suite(void)
{
    Suite *s = suite_create("transpose");
    TCase *tc = tcase_create("transpose");
    tcase_add_test(tc, transpose_of_patterns);
    tcase_add_test(tc, transpose_of_multigraph);
    tcase_add_test(tc, transpose_of_random_csr);
    tcase_add_test(tc, transpose_of_long_causal_is_compact);
    suite_add_tcase(s, tc);
    return s;
}
