/* The library's contract around its calls: threads, the variant it runs, and
   what a failed init leaves behind. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "testutil.h"
#include "base/share.h"

static int all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t k = 0; k < n; k++)
        if (b[k])
            return 0;
    return 1;
}

/* Fills x with garbage, as an uninitialised variable may hold. */
#define GARBAGE(x) memset(&(x), 0xAB, sizeof(x))
#define ASSERT_ZEROED(x) ck_assert_msg(all_zero(&(x), sizeof(x)), #x " is not zeroed")

/* Every init function, made to fail on garbage-filled out-parameters, leaves
   them zeroed so that destroying them is safe (an ASan build checks the
   destroy). Failures are made both before and after the first allocation. */
START_TEST(failed_init_leaves_zeroed_out_parameters)
{
    ag_error_t err;
    ag_array_t a;
    ag_matrix_t m;
    GARBAGE(a);
    ck_assert_int_ne(ag_array_read_npy(&a, tmp_path("missing.npy"), &err), AG_OK);
    ASSERT_ZEROED(a);
    ag_array_destroy(&a);

    /* a NaN is found after the data was read and converted */
    const double bad[2] = {1.0, NAN};
    write_npy_raw(tmp_path("nan.npy"), "<f8", 0, "(1, 2)", bad, sizeof bad);
    GARBAGE(m);
    ck_assert_int_eq(ag_matrix_read_npy(&m, tmp_path("nan.npy"), &err), AG_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "NaN"));
    ASSERT_ZEROED(m);
    ag_matrix_destroy(&m);

    /* a 3-D array is refused after it was read whole */
    const float cube[8] = {0};
    const int64_t shape[3] = {2, 2, 2};
    ck_assert_int_eq(ag_npy_write_f32_nd(tmp_path("cube.npy"), cube, 3, shape, &err), AG_OK);
    GARBAGE(m);
    ck_assert_int_eq(ag_matrix_read_npy(&m, tmp_path("cube.npy"), &err), AG_EFORMAT);
    ASSERT_ZEROED(m);
    ag_matrix_destroy(&m);

    int64_t *idx, n;
    GARBAGE(idx), GARBAGE(n);
    ck_assert_int_ne(ag_index_read_npy(&idx, &n, tmp_path("cube.npy"), &err), AG_OK);
    ck_assert_ptr_null(idx);
    ck_assert_int_eq(n, 0);

    GARBAGE(m);
    ck_assert_int_eq(ag_matrix_init(&m, -1, 4, &err), AG_EINVAL);
    ASSERT_ZEROED(m);
    ag_matrix_destroy(&m);

    ag_labels_t labels;
    GARBAGE(labels);
    ck_assert_int_ne(ag_labels_numbered(&labels, INT64_MAX / 4, &err), AG_OK);
    ASSERT_ZEROED(labels);
    ag_labels_destroy(&labels);

    ag_nbhd_t nb;
    const int64_t indptr[3] = {1, 1, 1}, indices[1] = {0};
    GARBAGE(nb);
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, 2, indptr, indices, &err), AG_EINVAL);
    ASSERT_ZEROED(nb);
    ag_nbhd_destroy(&nb);

    ag_pattern_t *pat;
    GARBAGE(pat);
    ck_assert_int_ne(ag_pattern_parse(&pat, "causal&", &err), AG_OK);
    ck_assert_ptr_null(pat);
    ag_pattern_free(pat);
    ck_assert_int_eq(ag_pattern_parse(&pat, "causal", &err), AG_OK);
    GARBAGE(nb);
    ck_assert_int_ne(ag_nbhd_from_pattern(&nb, pat, 0, AG_SELF_KEEP, &err), AG_OK);
    ASSERT_ZEROED(nb);
    ag_nbhd_destroy(&nb);

    /* edge order and edge attributes of a compiled pattern */
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, pat, 3, AG_SELF_KEEP, &err), AG_OK);
    igraph_t g;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/sentence.gml", NULL, &err), AG_OK);
    float *values;
    GARBAGE(values);
    ck_assert_int_ne(ag_edge_attribute(&values, &g, &nb, "weight", &err), AG_OK);
    ck_assert_ptr_null(values);
    igraph_destroy(&g);
    ag_nbhd_destroy(&nb);
    ag_pattern_free(pat);

    ag_weights_t w;
    GARBAGE(w);
    ck_assert_int_eq(ag_weights_random(&w, 0, 1, 4, 0, 1, &err), AG_EINVAL);
    ASSERT_ZEROED(w);
    ag_weights_destroy(&w);
    GARBAGE(w);
    ck_assert_int_ne(ag_weights_load(&w, tmp_path("no-such-folder"), 1, &err), AG_OK);
    ASSERT_ZEROED(w);
    ag_weights_destroy(&w);
    /* wq loads, then wk has the wrong shape: fails after allocating */
    mkdir(tmp_path("wbad"), 0777);
    const float wq[2 * 3] = {0};
    ck_assert_int_eq(ag_npy_write_f32(tmp_path("wbad/wq.npy"), wq, 2, 3, &err), AG_OK);
    ck_assert_int_eq(ag_npy_write_f32(tmp_path("wbad/wk.npy"), wq, 3, 2, &err), AG_OK);
    GARBAGE(w);
    ck_assert_int_ne(ag_weights_load(&w, tmp_path("wbad"), 1, &err), AG_OK);
    ASSERT_ZEROED(w);
    ag_weights_destroy(&w);

    ag_workspace_t ws;
    GARBAGE(ws);
    ck_assert_int_eq(ag_workspace_init(&ws, 0, 4, 4, &err), AG_EINVAL);
    ASSERT_ZEROED(ws);
    ag_workspace_destroy(&ws);
}
END_TEST

/* A destroy after a successful init leaves the struct zeroed, so a second
   destroy is harmless too. */
START_TEST(destroy_twice_is_safe)
{
    ag_error_t err;
    ag_matrix_t m;
    ck_assert_int_eq(ag_matrix_init(&m, 3, 2, &err), AG_OK);
    ag_matrix_destroy(&m);
    ASSERT_ZEROED(m);
    ag_matrix_destroy(&m);
    ag_labels_t labels;
    ck_assert_int_eq(ag_labels_numbered(&labels, 5, &err), AG_OK);
    ag_labels_destroy(&labels);
    ASSERT_ZEROED(labels);
    ag_labels_destroy(&labels);
    ag_weights_t w;
    ck_assert_int_eq(ag_weights_random(&w, 4, 2, 2, 0, 1, &err), AG_OK);
    ag_weights_destroy(&w);
    ASSERT_ZEROED(w);
    ag_weights_destroy(&w);
}
END_TEST

START_TEST(set_threads_sets_both)
{
#ifdef _OPENMP
    ck_assert_int_eq(ag_set_threads(1), 1);
    ck_assert_int_eq(omp_get_max_threads(), 1);
    ck_assert_int_eq(ag_set_threads(2), 2);
    ck_assert_int_eq(omp_get_max_threads(), 2);
#else
    ck_assert_int_eq(ag_set_threads(2), 1);
#endif
}
END_TEST

/* ag_set_threads(0) is the default: OMP_NUM_THREADS's count, or the cores
   (it was every core, over OMP_NUM_THREADS); the tools start with libgomp's
   threads spinning briefly before they sleep, unless the environment says how
   they wait. */
static char *saved_env(const char *name)
{
    const char *v = getenv(name);
    char *copy = v ? strdup(v) : NULL;
    unsetenv(name);
    return copy;
}

static void restore_env(const char *name, char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    free(value);
}

START_TEST(cli_threads_keep_what_the_environment_says)
{
    char *out;
    char *threads = saved_env("OMP_NUM_THREADS"), *policy = saved_env("OMP_WAIT_POLICY"),
         *spins = saved_env("GOMP_SPINCOUNT"), *fixed = saved_env("AG_THREADS_FIXED");
    setenv("OMP_NUM_THREADS", "5", 1);
    ck_assert_int_eq(run_cli("--version", &out, NULL), 0);
#ifdef _OPENMP
    ck_assert_msg(strstr(out, "\nthreads: 5, as OMP_NUM_THREADS says;"), "%s", out);
#else
    ck_assert_msg(strstr(out, "\nthreads: 1, as OMP_NUM_THREADS says;"), "%s", out);
#endif
    free(out);
    unsetenv("OMP_NUM_THREADS");
    ck_assert_int_eq(run_cli("--version", &out, NULL), 0);
    ck_assert_msg(strstr(out, "fewer while other programs keep the cores busy; waits: spin "
                              "10000 pauses, then sleep\n"), "%s", out);
    free(out);
    setenv("OMP_WAIT_POLICY", "active", 1);
    ck_assert_int_eq(run_cli("--version", &out, NULL), 0);
    ck_assert_msg(strstr(out, "waits: as the environment says (OMP_WAIT_POLICY=active, "
                              "GOMP_SPINCOUNT=unset)\n"), "%s", out);
    free(out);
    unsetenv("OMP_WAIT_POLICY");
    setenv("GOMP_SPINCOUNT", "300000", 1);
    ck_assert_int_eq(run_cli("--version", &out, NULL), 0);
    ck_assert_msg(strstr(out, "(OMP_WAIT_POLICY=unset, GOMP_SPINCOUNT=300000)\n"), "%s", out);
    free(out);
    unsetenv("GOMP_SPINCOUNT");
    setenv("AG_THREADS_FIXED", "1", 1);
    ck_assert_int_eq(run_cli("--version", &out, NULL), 0);
    ck_assert_msg(strstr(out, "all of them (AG_THREADS_FIXED)"), "%s", out);
    free(out);
    restore_env("OMP_NUM_THREADS", threads), restore_env("OMP_WAIT_POLICY", policy);
    restore_env("GOMP_SPINCOUNT", spins), restore_env("AG_THREADS_FIXED", fixed);
}
END_TEST

/* The team under contention (base/share.c), window by window: 20 ms windows
   with the share f of the time the calling thread waited for a core. */
static int window(ag_i_share_t *s, double f, int64_t regions, int max, double at_s)
{
    const int64_t span = AG_I_SHARE_WINDOW_NS;
    const ag_i_share_window_t w = {span, (int64_t)(f * (double)span), regions, max,
                                   (int64_t)(at_s * 1e9)};
    return ag_i_share_step(s, &w);
}

START_TEST(team_shrinks_while_the_cores_are_busy)
{
    ag_i_share_t s = {0};
    /* quiet: the full team */
    ck_assert_int_eq(window(&s, 0.01, 100, 2, 1.0), 2);
    ck_assert_int_eq(window(&s, 0.10, 100, 2, 1.02), 2);
    /* short regions (100 in 20 ms) beside a busy loop (f = 1 - 2/3): one thread */
    ck_assert_int_eq(window(&s, 0.33, 100, 2, 1.04), 1);
    ck_assert_int_eq(s.pause, AG_I_SHARE_PROBE_FIRST_NS);
    /* one thread cannot see whether the loop has gone: it waits for the trial */
    ck_assert_int_eq(window(&s, 0.0, 50, 2, 1.1), 1);
    ck_assert_int_eq(window(&s, 0.0, 50, 2, 1.239), 1);
    ck_assert_int_eq(window(&s, 0.0, 50, 2, 1.24), 2);   /* the trial */
    /* the loop is still there: one thread again, and twice as long a pause */
    ck_assert_int_eq(window(&s, 0.33, 100, 2, 1.26), 1);
    ck_assert_int_eq(s.pause, 2 * AG_I_SHARE_PROBE_FIRST_NS);
    ck_assert_int_eq(window(&s, 0.0, 50, 2, 1.65), 1);
    ck_assert_int_eq(window(&s, 0.0, 50, 2, 1.66), 2);
    /* failed trials double the pause up to its most */
    double t = 1.68;
    for (int k = 0; k < 8; k++) {
        ck_assert_int_eq(window(&s, 0.5, 100, 2, t), 1);
        t += (double)s.pause / 1e9 + 0.001;
        ck_assert_int_eq(window(&s, 0.0, 50, 2, t), 2);
        t += 0.02;
    }
    ck_assert_int_eq(s.pause, AG_I_SHARE_PROBE_MAX_NS);
    /* a trial that finds the cores free keeps the full team, and starts afresh */
    ck_assert_int_eq(window(&s, 0.02, 100, 2, t), 2);
    ck_assert_int_eq(s.pause, 0);
    ck_assert_int_eq(window(&s, 0.02, 100, 2, t + 5), 2);
    ck_assert_int_eq(window(&s, 0.5, 100, 2, t + 6), 1);
    ck_assert_int_eq(s.pause, AG_I_SHARE_PROBE_FIRST_NS);
    /* long regions (4 in 20 ms: 5 ms each) keep the full team, and restore it */
    ck_assert_int_eq(window(&s, 0.5, 4, 2, t + 6.02), 2);
    ck_assert_int_eq(window(&s, 0.5, 4, 2, t + 6.04), 2);
    /* ... judged as on the full team: 4 regions in 20 ms on 1 of 2 threads
       would be 2.5 ms apart on 2, 6 would be 1.7 ms apart */
    ck_assert_int_eq(window(&s, 0.5, 100, 2, t + 6.06), 1);
    ck_assert_int_eq(window(&s, 0.5, 4, 2, t + 6.08), 2);
    ck_assert_int_eq(window(&s, 0.5, 100, 2, t + 6.10), 1);
    ck_assert_int_eq(window(&s, 0.5, 6, 2, t + 6.12), 1);
    /* long regions on one thread beside a loop that takes the other core
       (f = 0): the full team at once, not at the next trial */
    ck_assert_int_eq(window(&s, 0.0, 4, 2, t + 6.14), 2);
    /* 16 cores beside 8 busy threads (f = 1 - 16/24): the 8 cores they leave */
    ag_i_share_t big = {0};
    ck_assert_int_eq(window(&big, 1.0 / 3, 1000, 16, 1.0), 8);
    /* 16 busy threads beside 8 of ours (f = 1 - 16/24 again): one */
    ck_assert_int_eq(window(&big, 1.0 / 3, 1000, 16, 1.02), 1);
    /* a window when the others are gone keeps what it has until the trial */
    ck_assert_int_eq(window(&big, 0.0, 1000, 16, 1.04), 1);
}
END_TEST

/* --version names the variant the kernels and products run: the CPU's best,
   or AG_SIMD's. */
START_TEST(version_names_the_variant)
{
    char expect[64], *out;
    snprintf(expect, sizeof expect, "kernels and products: %s\n", ag_simd_isa());
    ck_assert_int_eq(run_cli("--version", &out, NULL), 0);
    ck_assert_msg(strstr(out, expect), "expected '%s' in:\n%s", expect, out);
    ck_assert_msg(!strstr(out, "OpenBLAS"), "%s", out);   /* no BLAS under the tool */
    free(out);
    setenv("AG_SIMD", "base", 1);
    ck_assert_int_eq(run_cli("--version", &out, NULL), 0);
    ck_assert_msg(strstr(out, "kernels and products: base\n"), "%s", out);
    free(out);
    unsetenv("AG_SIMD");   /* later tests (CK_FORK=no) run with the usual environment */
}
END_TEST

Suite *runtime_suite(void)
{
    Suite *s = suite_create("runtime");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, failed_init_leaves_zeroed_out_parameters);
    tcase_add_test(tc, destroy_twice_is_safe);
    tcase_add_test(tc, set_threads_sets_both);
    tcase_add_test(tc, version_names_the_variant);
    tcase_add_test(tc, cli_threads_keep_what_the_environment_says);
    tcase_add_test(tc, team_shrinks_while_the_cores_are_busy);
    suite_add_tcase(s, tc);
    return s;
}
