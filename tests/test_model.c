/* Message rounds with projections, weights and the seeded generator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>

#include "reference.h"
#include "testutil.h"

/* A random directed graph with a self-loop on every node plus extra edges. */
static int64_t random_edges(int64_t N, int64_t extra, int64_t *src, int64_t *dst)
{
    float r[512];
    fill_uniform(r, 2 * extra, 99, 1.0f);
    int64_t E = 0;
    for (int64_t i = 0; i < N; i++)
        src[E] = i, dst[E++] = i;
    for (int64_t e = 0; e < extra; e++) {
        src[E] = (int64_t)((r[2 * e] + 1) / 2 * N) % N;
        dst[E++] = (int64_t)((r[2 * e + 1] + 1) / 2 * N) % N;
    }
    return E;
}

static void check_rounds(int64_t N, int64_t D, int64_t H, int64_t d, int rounds)
{
    int64_t src[300], dst[300];
    int64_t E = random_edges(N, 40, src, dst);
    igraph_t g;
    build_graph(&g, N, src, dst, E, 1);
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    igraph_destroy(&g);

    ag_weights_t w;
    ck_assert_int_eq(ag_weights_random(&w, D, H, d, 0, 5, &err), AG_OK);
    float *X = malloc(N * D * sizeof *X);
    double *Xref = malloc(N * D * sizeof *Xref);
    fill_uniform(X, N * D, 17, 1.0f);
    for (int64_t i = 0; i < N * D; i++)
        Xref[i] = X[i];
    ag_workspace_t ws;
    ck_assert_int_eq(ag_workspace_init(&ws, N, H * d, D, &err), AG_OK);
    ck_assert_int_eq(ag_rounds_run(&nb, &w, 1, X, rounds, NULL, &ws, NULL, &err), AG_OK);
    ref_rounds(N, src, dst, E, w.wq, w.wk, w.wv, w.wo, D, H, d, rounds, Xref);
    for (int64_t i = 0; i < N * D; i++)
        ck_assert_msg(fabs(X[i] - Xref[i]) <= 1e-4 * (1 + fabs(Xref[i])),
                      "X[%lld] = %.9g, reference %.9g", (long long)i, X[i], Xref[i]);
    ag_workspace_destroy(&ws);
    ag_weights_destroy(&w);
    ag_nbhd_destroy(&nb);
    free(X), free(Xref);
}

START_TEST(rounds_match_reference)
{
    check_rounds(11, 12, 3, 4, 3);     /* H*d = D */
    check_rounds(13, 12, 2, 5, 2);     /* H*d = 10 != D = 12 */
    check_rounds(7, 6, 1, 6, 1);
}
END_TEST

START_TEST(zero_rounds_leave_states_alone)
{
    const int64_t src[] = {0, 1}, dst[] = {1, 0};
    igraph_t g;
    build_graph(&g, 2, src, dst, 2, 1);
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    igraph_destroy(&g);
    ag_weights_t w;
    ag_weights_random(&w, 4, 1, 4, 0, 1, &err);
    float X[8], X0[8];
    fill_uniform(X, 8, 3, 1.0f);
    memcpy(X0, X, sizeof X);
    ag_workspace_t ws;
    ag_workspace_init(&ws, 2, 4, 4, &err);
    ck_assert_int_eq(ag_rounds_run(&nb, &w, 1, X, 0, NULL, &ws, NULL, &err), AG_OK);
    ck_assert_mem_eq(X, X0, sizeof X);
    ag_workspace_t small;
    ag_workspace_init(&small, 2, 3, 4, &err);
    ck_assert_fails_with(ag_rounds_run(&nb, &w, 1, X, 1, NULL, &small, NULL, &err), err, AG_EINVAL, "workspace");
    ag_workspace_destroy(&small);
    ag_workspace_destroy(&ws);
    ag_weights_destroy(&w);
    ag_nbhd_destroy(&nb);
}
END_TEST

START_TEST(random_weights_are_reproducible_and_scaled)
{
    ag_weights_t a, b, c;
    ag_error_t err;
    const int64_t D = 256, H = 4, d = 64;
    ck_assert_int_eq(ag_weights_random(&a, D, H, d, 0, 7, &err), AG_OK);
    ck_assert_int_eq(ag_weights_random(&b, D, H, d, 0, 7, &err), AG_OK);
    ck_assert_int_eq(ag_weights_random(&c, D, H, d, 0, 8, &err), AG_OK);
    ck_assert_mem_eq(a.wq, b.wq, D * H * d * sizeof(float));
    ck_assert_mem_eq(a.wo, b.wo, D * H * d * sizeof(float));
    ck_assert(memcmp(a.wq, c.wq, D * H * d * sizeof(float)) != 0);
    ck_assert(memcmp(a.wq, a.wk, D * H * d * sizeof(float)) != 0);   /* own streams */
    double sum = 0, sq = 0;
    const int64_t n = D * H * d;
    for (int64_t i = 0; i < n; i++)
        sum += a.wq[i], sq += (double)a.wq[i] * a.wq[i];
    double mean = sum / n, sd = sqrt(sq / n - mean * mean);
    ck_assert_double_lt(fabs(mean), 0.01 / sqrt(D));
    ck_assert_double_lt(fabs(sd * sqrt(D) - 1), 0.02);       /* std 1/sqrt(D) */
    ag_weights_destroy(&a), ag_weights_destroy(&b), ag_weights_destroy(&c);
}
END_TEST

static void save(const char *dir, const char *name, int64_t rows, int64_t cols)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    float *x = calloc(rows * cols, sizeof *x);
    ag_error_t err;
    ck_assert_int_eq(ag_npy_write_f32(path, x, rows, cols, &err), AG_OK);
    free(x);
}

START_TEST(weights_load_checks_shapes)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tmp_path("wdir"));
    mkdir(dir, 0755);
    ag_weights_t w;
    ag_error_t err;
    ck_assert_fails_with(ag_weights_load(&w, dir, 1, &err), err, AG_EIO, "wq.npy");
    save(dir, "wq", 12, 8);
    save(dir, "wk", 12, 8);
    save(dir, "wv", 12, 8);
    save(dir, "wo", 8, 12);
    ck_assert_int_eq(ag_weights_load(&w, dir, 3, &err), AG_OK);
    ck_assert_int_eq(w.D, 8);
    ck_assert_int_eq(w.H, 3);
    ck_assert_int_eq(w.d, 4);
    ag_weights_destroy(&w);
    ck_assert_fails_with(ag_weights_load(&w, dir, 5, &err), err, AG_EINVAL,
                         "12 rows, not a multiple of 5 heads");
    save(dir, "wv", 12, 9);
    ck_assert_fails_with(ag_weights_load(&w, dir, 3, &err), err, AG_EINVAL,
                         "wv.npy is [12, 9]; expected [12, 8]");
    save(dir, "wv", 12, 8);
    save(dir, "wo", 12, 8);
    ck_assert_fails_with(ag_weights_load(&w, dir, 3, &err), err, AG_EINVAL,
                         "wo.npy is [12, 8]; expected [8, 12]");
}
END_TEST

START_TEST(random_normal_is_standard)
{
    const int64_t n = 200001;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    ag_random_normal(x, n, 3, 0, 1.0f);
    ag_random_normal(y, n, 3, 0, 1.0f);
    ck_assert_mem_eq(x, y, n * sizeof *x);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++)
        sum += x[i], sq += (double)x[i] * x[i];
    ck_assert_double_lt(fabs(sum / n), 0.01);
    ck_assert_double_lt(fabs(sq / n - 1), 0.02);
    free(x), free(y);
}
END_TEST

#ifdef _OPENMP
START_TEST(rounds_identical_for_1_and_2_threads)
{
    const int64_t N = 64, D = 32, H = 4, d = 8;
    int64_t src[300], dst[300];
    int64_t E = random_edges(N, 100, src, dst);
    igraph_t g;
    build_graph(&g, N, src, dst, E, 1);
    ag_nbhd_t nb;
    ag_error_t err;
    ag_nbhd_from_graph(&nb, &g, &err);
    igraph_destroy(&g);
    ag_weights_t w;
    ag_weights_random(&w, D, H, d, 0, 2, &err);
    float *X1 = malloc(N * D * 4), *X2 = malloc(N * D * 4);
    fill_uniform(X1, N * D, 4, 1.0f);
    memcpy(X2, X1, N * D * 4);
    ag_workspace_t ws;
    ag_workspace_init(&ws, N, H * d, D, &err);
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
    ck_assert_int_eq(ag_rounds_run(&nb, &w, 1, X1, 3, NULL, &ws, NULL, &err), AG_OK);
    omp_set_num_threads(2);
    openblas_set_num_threads(2);
    ck_assert_int_eq(ag_rounds_run(&nb, &w, 1, X2, 3, NULL, &ws, NULL, &err), AG_OK);
    ck_assert_mem_eq(X1, X2, N * D * 4);
    ag_workspace_destroy(&ws);
    ag_weights_destroy(&w);
    ag_nbhd_destroy(&nb);
    free(X1), free(X2);
}
END_TEST
#endif

Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, rounds_match_reference);
    tcase_add_test(tc, zero_rounds_leave_states_alone);
    tcase_add_test(tc, random_weights_are_reproducible_and_scaled);
    tcase_add_test(tc, weights_load_checks_shapes);
    tcase_add_test(tc, random_normal_is_standard);
#ifdef _OPENMP
    tcase_add_test(tc, rounds_identical_for_1_and_2_threads);
#endif
    suite_add_tcase(s, tc);
    return s;
}
