/*
 * The figures a round reports (entropy, largest weight) from the kernels' own
 * pass (ag_attention_ex) against ag_attention_stats, the independent path
 * that scores and normalises every edge again in double: every pattern atom,
 * random graphs, every score kind, each fast kernel, sharp logits; M bitwise
 * unchanged by asking for figures; 1 and 2 threads bitwise equal.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/kernels.h"
#include "testutil.h"

static void compile(ag_nbhd_t *nb, const char *spec, int64_t N, ag_self_loops_t self)
{
    ag_pattern_t *p;
    ag_error_t err;
    ck_assert_msg(ag_pattern_parse(&p, spec, &err) == AG_OK, "%s", err.msg);
    ck_assert_msg(ag_nbhd_from_pattern(nb, p, N, self, &err) == AG_OK, "%s", err.msg);
    ag_pattern_free(p);
}

typedef struct {
    ag_nbhd_t nb;
    int64_t N, H, d;
    float *Q, *K, *V, *vecs;
} fix_t;

static void fix_init(fix_t *f, const char *spec, int64_t N, int64_t H, int64_t d, float q_scale,
                     ag_self_loops_t self)
{
    compile(&f->nb, spec, N, self);
    f->N = f->nb.n_nodes, f->H = H, f->d = d;
    const int64_t n = f->N * H * d;
    f->Q = malloc((size_t)n * sizeof(float));
    f->K = malloc((size_t)n * sizeof(float));
    f->V = malloc((size_t)n * sizeof(float));
    f->vecs = malloc((size_t)(3 * H * d) * sizeof(float));
    fill_uniform(f->Q, n, 11, q_scale);
    fill_uniform(f->K, n, 12, 1.0f);
    fill_uniform(f->V, n, 13, 1.0f);
    fill_uniform(f->vecs, 3 * H * d, 14, 1.0f);
}

static void fix_free(fix_t *f)
{
    free(f->Q), free(f->K), free(f->V), free(f->vecs);
    ag_nbhd_destroy(&f->nb);
}

/* Per-head figures [N, H] against ag_attention_stats (mean / largest over heads). */
static void check_against_stats(const fix_t *f, const ag_score_t *sc, const float *ent,
                                const float *top, const float *dist, const char *what)
{
    const int64_t N = f->N, H = f->H;
    double *ref_ent = malloc((size_t)N * sizeof(double)), *ref_top = malloc((size_t)N * sizeof(double));
    double *ref_dist = malloc((size_t)N * sizeof(double));
    ag_error_t err;
    ck_assert_msg(ag_attention_stats(&f->nb, f->Q, f->K, H, f->d, sc, ref_ent, ref_dist, ref_top,
                                     &err) == AG_OK, "%s", err.msg);
    double worst_ent = 0, worst_top = 0, worst_dist = 0;
    for (int64_t i = 0; i < N; i++) {
        double e = 0, t = 0, g = 0;
        for (int64_t h = 0; h < H; h++)
            e += ent[i * H + h], t = h ? fmax(t, top[i * H + h]) : top[i * H + h],
            g += dist[i * H + h];
        e /= (double)H, g /= (double)H;
        if (isnan(ref_ent[i])) {
            ck_assert_msg(isnan(e) && isnan(t) && isnan(g), "%s: node %lld has no in-edges, "
                          "figures %g %g %g", what, (long long)i, e, t, g);
            continue;
        }
        worst_ent = fmax(worst_ent, fabs(e - ref_ent[i]) / fmax(1.0, fabs(ref_ent[i])));
        worst_top = fmax(worst_top, fabs(t - ref_top[i]));
        worst_dist = fmax(worst_dist, fabs(g - ref_dist[i]) / fmax(1.0, fabs(ref_dist[i])));
    }
    ck_assert_msg(worst_ent < 5e-5, "%s: entropy off by %g", what, worst_ent);
    ck_assert_msg(worst_top < 1e-5, "%s: largest weight off by %g", what, worst_top);
    ck_assert_msg(worst_dist < 5e-5, "%s: distance off by %g", what, worst_dist);
    free(ref_ent), free(ref_top), free(ref_dist);
}

/* ag_attention_ex on one score: M bitwise as ag_attention's, figures as the stats'. */
static void check_public(const fix_t *f, const ag_score_t *sc, const char *what)
{
    const int64_t n = f->N * f->H * f->d, NH = f->N * f->H;
    float *M0 = malloc((size_t)n * sizeof(float)), *M1 = malloc((size_t)n * sizeof(float));
    float *ent = malloc((size_t)NH * sizeof(float)), *top = malloc((size_t)NH * sizeof(float));
    float *dist = malloc((size_t)NH * sizeof(float));
    ag_error_t err;
    ck_assert_msg(ag_attention(&f->nb, f->Q, f->K, f->V, f->H, f->d, sc, M0, &err) == AG_OK,
                  "%s", err.msg);
    const ag_attention_opts_t opts = {.entropy = ent, .max_weight = top, .distance = dist};
    ck_assert_msg(ag_attention_ex(&f->nb, f->Q, f->K, f->V, f->H, f->d, sc, M1, &opts, &err) ==
                  AG_OK, "%s", err.msg);
    ck_assert_msg(memcmp(M0, M1, (size_t)n * sizeof(float)) == 0, "%s: M changed", what);
    check_against_stats(f, sc, ent, top, dist, what);
    free(M0), free(M1), free(ent), free(top), free(dist);
}

/* One private kernel (plain scaled-dot scores) with figures. */
static void check_kernel(const fix_t *f, ag_i_kernel_t kernel, const char *what)
{
    const int64_t n = f->N * f->H * f->d, NH = f->N * f->H;
    float *M0 = malloc((size_t)n * sizeof(float)), *M1 = malloc((size_t)n * sizeof(float));
    float *ent = malloc((size_t)NH * sizeof(float)), *top = malloc((size_t)NH * sizeof(float));
    float *dist = malloc((size_t)NH * sizeof(float));
    const float scale = 1.0f / sqrtf((float)f->d);
    ag_error_t err;
    ck_assert_int_eq(
        ag_i_attention_with(kernel,
                            &(ag_i_fwd_t){&f->nb, f->Q, f->K, f->V, f->H, f->d,
                                          AG_I_DOT_SCORE(scale), M0, NULL},
                            &err),
        AG_OK);
    kext_t x = {ent, top, dist, NULL, NULL, 0, 0, 0, NULL};
    ck_assert_int_eq(
        ag_i_attention_with(kernel,
                            &(ag_i_fwd_t){&f->nb, f->Q, f->K, f->V, f->H, f->d,
                                          AG_I_DOT_SCORE(scale), M1, &x},
                            &err),
        AG_OK);
    ck_assert_msg(memcmp(M0, M1, (size_t)n * sizeof(float)) == 0, "%s: M changed", what);
    check_against_stats(f, NULL, ent, top, dist, what);
    free(M0), free(M1), free(ent), free(top), free(dist);
}

static const char *const atoms[] = {
    "complete", "causal", "window:5", "window:3,9", "dilated:4,2", "strided:3",
    "fixed:4,1", "prefix:7", "global:2", "global:1,4", "random:5,3", "bigbird:4,3,1,2",
    "blocks:7,5,9,19", "docs:9,1,11,19", "padding:30", "cross:15,25", "grid:5x8,1", "axial:5x8",
    "causal&!strided:3+global:2", "docs:5,35&window:2",
};
#define N_ATOMS ((int)(sizeof atoms / sizeof atoms[0]))

/* Every atom through the public entry and each kernel that applies. */
START_TEST(test_atoms)
{
    fix_t f;
    fix_init(&f, atoms[_i], 40, 2, 19, 2.0f, AG_SELF_KEEP);
    check_public(&f, NULL, atoms[_i]);
    check_kernel(&f, AG_I_KERNEL_SIMPLE, atoms[_i]);
    check_kernel(&f, AG_I_KERNEL_GATHER, atoms[_i]);
    if (ag_i_tiled_applies(&f.nb))
        check_kernel(&f, AG_I_KERNEL_TILED, atoms[_i]);
    fix_free(&f);
}
END_TEST

/* Sizes that fill tiles and vectors, sharp and huge logits (a large running max). */
START_TEST(test_sharp_and_large)
{
    static const struct {
        const char *spec;
        int64_t N, H, d;
        float q;
    } cases[] = {{"causal", 300, 2, 64, 1.0f}, {"causal", 300, 1, 20, 40.0f},
                 {"complete", 140, 3, 16, 400.0f}, {"window:128", 600, 1, 64, 8.0f},
                 {"random:40,2", 500, 2, 32, 30.0f}, {"causal", 70, 1, 16, 0.0f}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        fix_t f;
        fix_init(&f, cases[k].spec, cases[k].N, cases[k].H, cases[k].d, cases[k].q,
                 AG_SELF_KEEP);
        check_kernel(&f, AG_I_KERNEL_SIMPLE, cases[k].spec);
        check_kernel(&f, AG_I_KERNEL_GATHER, cases[k].spec);
        if (ag_i_tiled_applies(&f.nb))
            check_kernel(&f, AG_I_KERNEL_TILED, cases[k].spec);
        check_public(&f, NULL, cases[k].spec);
        fix_free(&f);
    }
}
END_TEST

/* Every score kind and option on the generic path (and dot on the fast one). */
START_TEST(test_score_kinds)
{
    fix_t f;
    fix_init(&f, "random:6,2+window:2", 60, 2, 8, 2.0f, AG_SELF_ON);
    float *bias = malloc((size_t)f.nb.n_edges * sizeof(float));
    fill_uniform(bias, f.nb.n_edges, 15, 1.0f);
    const float *a = f.vecs, *b = f.vecs + f.H * f.d;
    const ag_score_t scores[] = {
        {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT},
        {SCORE_DEFAULTS, .kind = AG_SCORE_DOT, .beta = 0.5f},
        {SCORE_DEFAULTS, .kind = AG_SCORE_COSINE, .beta = 3.0f},
        {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE, .a_src = a, .a_dst = b},
        {SCORE_DEFAULTS, .kind = AG_SCORE_GATV2, .a_src = a, .slope = 0.1f},
        {SCORE_DEFAULTS, .kind = AG_SCORE_SIGMOID},
        {SCORE_DEFAULTS, .kind = AG_SCORE_SIGMOID, .has_sigmoid_bias = 1, .sigmoid_bias = 0.5f},
        {SCORE_DEFAULTS, .kind = AG_SCORE_LINEAR},
        {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT, .softcap = 2.0f, .alibi = 1},
        {SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT, .edge_bias = bias},
    };
    for (size_t k = 0; k < sizeof scores / sizeof scores[0]; k++) {
        char what[32];
        snprintf(what, sizeof what, "score %zu", k);
        check_public(&f, &scores[k], what);
    }
    free(bias);
    fix_free(&f);
}
END_TEST

/* Random graphs from a CSR, with isolated nodes and repeated sources. */
START_TEST(test_random_csr)
{
    const int64_t N = 300, H = 3, d = 24;
    int64_t *indptr = malloc((N + 1) * sizeof *indptr), *indices = malloc(N * 30 * sizeof *indices);
    uint64_t s = 12345;
    indptr[0] = 0;
    for (int64_t i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const int64_t deg = i % 17 == 0 ? 0 : (int64_t)(s % 30);
        int64_t j = 0;
        for (int64_t e = 0; e < deg; e++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            j += (int64_t)(s % 3);           /* ascending, repeats allowed */
            indices[indptr[i] + e] = j < N ? j : N - 1;
        }
        indptr[i + 1] = indptr[i] + deg;
    }
    fix_t f;
    fix_init(&f, "complete", 1, H, d, 1.0f, AG_SELF_KEEP);   /* buffers resized below */
    ag_nbhd_destroy(&f.nb);
    ag_error_t err;
    ck_assert_msg(ag_nbhd_from_csr(&f.nb, N, indptr, indices, &err) == AG_OK, "%s", err.msg);
    f.N = N;
    free(f.Q), free(f.K), free(f.V);
    f.Q = malloc(N * H * d * sizeof(float)), f.K = malloc(N * H * d * sizeof(float));
    f.V = malloc(N * H * d * sizeof(float));
    fill_uniform(f.Q, N * H * d, 21, 3.0f);
    fill_uniform(f.K, N * H * d, 22, 1.0f);
    fill_uniform(f.V, N * H * d, 23, 1.0f);
    check_public(&f, NULL, "csr");
    check_kernel(&f, AG_I_KERNEL_SIMPLE, "csr simple");
    check_kernel(&f, AG_I_KERNEL_GATHER, "csr gather");
    const ag_score_t cos = {SCORE_DEFAULTS, .kind = AG_SCORE_COSINE};
    check_public(&f, &cos, "csr cosine");
    free(indptr), free(indices);
    fix_free(&f);
}
END_TEST

/* The figures and M are bitwise the same on 1 and 2 threads. */
START_TEST(test_threads)
{
    static const char *const specs[] = {"causal", "window:20", "random:9,2+window:2"};
    for (int k = 0; k < 3; k++) {
        fix_t f;
        fix_init(&f, specs[k], 333, 2, 32, 2.0f, AG_SELF_KEEP);
        const int64_t n = f.N * f.H * f.d, NH = f.N * f.H;
        float *M[2], *ent[2], *top[2], *dist[2];
        for (int t = 0; t < 2; t++) {
            M[t] = malloc((size_t)n * sizeof(float));
            dist[t] = malloc((size_t)NH * sizeof(float));
            ent[t] = malloc((size_t)NH * sizeof(float));
            top[t] = malloc((size_t)NH * sizeof(float));
#ifdef _OPENMP
            omp_set_num_threads(t + 1);
#endif
            const ag_attention_opts_t o = {.entropy = ent[t], .max_weight = top[t],
                                           .distance = dist[t]};
            ag_error_t err;
            ck_assert_int_eq(ag_attention_ex(&f.nb, f.Q, f.K, f.V, f.H, f.d, NULL, M[t], &o,
                                             &err), AG_OK);
        }
        ck_assert(memcmp(M[0], M[1], (size_t)n * sizeof(float)) == 0);
        ck_assert(memcmp(ent[0], ent[1], (size_t)NH * sizeof(float)) == 0);
        ck_assert(memcmp(top[0], top[1], (size_t)NH * sizeof(float)) == 0);
        ck_assert(memcmp(dist[0], dist[1], (size_t)NH * sizeof(float)) == 0);
        for (int t = 0; t < 2; t++)
            free(M[t]), free(ent[t]), free(top[t]), free(dist[t]);
        fix_free(&f);
    }
}
END_TEST

/* Progress: non-decreasing, ends at the total (messages x heads), on thread 0;
   reports within the run on a run of milliseconds (causal). */
typedef struct {
    int64_t calls, last, total, bad;
} progress_log_t;

static void log_progress(int64_t done, int64_t total, void *ctx)
{
    progress_log_t *p = ctx;
#ifdef _OPENMP
    if (omp_get_thread_num() != 0)
        p->bad++;
#endif
    if (done < p->last || done > total)
        p->bad++;
    p->calls++, p->last = done, p->total = total;
}

START_TEST(test_progress)
{
    static const char *const specs[] = {"causal", "random:9,2", "window:3"};
    const ag_score_t cos = {SCORE_DEFAULTS, .kind = AG_SCORE_COSINE};
    for (int k = 0; k < 8; k++) {
        const int threads = k < 4 ? 1 : 2;
        fix_t f;
        fix_init(&f, specs[k % 3], 2000, 2, 16, 1.0f, AG_SELF_KEEP);
        float *M = malloc((size_t)(f.N * f.H * f.d) * sizeof(float));
        progress_log_t log = {0, 0, 0, 0};
        const ag_attention_opts_t o = {.progress = log_progress, .progress_ctx = &log};
        ag_error_t err;
#ifdef _OPENMP
        omp_set_num_threads(threads);
#endif
        ck_assert_int_eq(ag_attention_ex(&f.nb, f.Q, f.K, f.V, f.H, f.d, k % 4 == 3 ? &cos : NULL,
                                         M, &o, &err), AG_OK);
        ck_assert_int_eq(log.bad, 0);
        /* thread 0 reports as it finishes its tasks: on one thread it does them
           all; on two, on a run of milliseconds on a busy machine, the other
           thread can take them all, and only the final report comes */
        ck_assert_msg(log.calls >= (threads == 1 ? 10 : 1), "%d %s: %lld calls", k,
                      specs[k % 3], (long long)log.calls);
        ck_assert_int_eq(log.total, f.nb.n_edges * f.H);
        ck_assert_int_eq(log.last, log.total);
        free(M);
        fix_free(&f);
    }
}
END_TEST

/* ag_round_figures from the round's own figures equals the figures scored again,
   and asking for them changes no bit of X. */
typedef struct {
    int calls;
} rounds_ctx_t;

static int compare_figures(const ag_round_t *round, void *p)
{
    rounds_ctx_t *c = p;
    ck_assert_ptr_nonnull(round->entropy);
    ck_assert_ptr_nonnull(round->max_weight);
    ag_round_figures_t fast, slow;
    ag_error_t err;
    ck_assert_int_eq(ag_round_figures(round, &fast, &err), AG_OK);
    ag_round_t again = *round;
    again.entropy = again.max_weight = NULL;
    ck_assert_int_eq(ag_round_figures(&again, &slow, &err), AG_OK);
    ck_assert_double_eq(fast.change, slow.change);
    ck_assert_double_eq_tol(fast.entropy, slow.entropy, 1e-5 * fmax(1, slow.entropy));
    ck_assert_double_eq_tol(fast.max_weight, slow.max_weight, 1e-5);
    c->calls++;
    return AG_OK;
}

START_TEST(test_rounds)
{
    static const char *const specs[] = {"causal", "random:7,2+window:1", "cross:30,170"};
    const ag_score_t scores[] = {{SCORE_DEFAULTS, .kind = AG_SCORE_SCALED_DOT}, {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE},
                                 {SCORE_DEFAULTS, .kind = AG_SCORE_LINEAR}};
    for (int k = 0; k < 3; k++) {
        ag_nbhd_t nb;
        compile(&nb, specs[k], 200, AG_SELF_KEEP);
        const int64_t N = nb.n_nodes, D = 24, H = 2, d = 12;
        ag_weights_t w;
        ag_error_t err;
        ck_assert_int_eq(ag_weights_random(&w, D, H, d, 0, 4, &err), AG_OK);
        float *X = malloc(N * D * sizeof *X), *X2 = malloc(N * D * sizeof *X2);
        fill_uniform(X, N * D, 5, 1.0f);
        memcpy(X2, X, N * D * sizeof *X);
        ag_workspace_t ws;
        ck_assert_int_eq(ag_workspace_init(&ws, N, H * d, D, &err), AG_OK);
        rounds_ctx_t c = {0};
        const ag_round_opts_t with = {ROUND_DEFAULTS, .score = &scores[k], .on_round = compare_figures, .ctx = &c,
                                      .figures = 1};
        const ag_round_opts_t without = {ROUND_DEFAULTS, .score = &scores[k]};
        ck_assert_msg(ag_rounds_run(&nb, &w, 1, X, 3, &with, &ws, NULL, &err) == AG_OK, "%s",
                      err.msg);
        ck_assert_int_eq(c.calls, 3);
        ck_assert_int_eq(ag_rounds_run(&nb, &w, 1, X2, 3, &without, &ws, NULL, &err), AG_OK);
        ck_assert(memcmp(X, X2, N * D * sizeof *X) == 0);
        ag_workspace_destroy(&ws);
        ag_weights_destroy(&w);
        free(X), free(X2);
        ag_nbhd_destroy(&nb);
    }
}
END_TEST

/* The CLI: progress on standard error only when asked (the tests' stderr is a
   file, not a terminal); the report on stdout is the same either way. */
START_TEST(test_cli_progress)
{
    char *out0, *err0, *out1, *err1;
    const char *run = "run --pattern causal --nodes 300 --rounds 2 --dim 8";
    char args[256];
    ck_assert_int_eq(run_cli(run, &out0, &err0), 0);
    ck_assert_str_eq(err0, "");
    snprintf(args, sizeof args, "%s --progress", run);
    ck_assert_int_eq(run_cli(args, &out1, &err1), 0);
    ck_assert_str_eq(out0, out1);
    ck_assert_msg(strstr(err1, "progress: round 1/2 done") && strstr(err1, "round 2/2 done"),
                  "stderr: %s", err1);
    free(out1), free(err1);
    snprintf(args, sizeof args, "%s --progress --no-progress", run);
    ck_assert_int_eq(run_cli(args, &out1, &err1), 0);
    ck_assert_str_eq(out0, out1);
    ck_assert_str_eq(err1, "");
    free(out1), free(err1);
    /* forced even with --quiet (stdout stays empty) */
    snprintf(args, sizeof args, "%s --quiet --progress", run);
    ck_assert_int_eq(run_cli(args, &out1, &err1), 0);
    ck_assert_str_eq(out1, "");
    ck_assert_ptr_nonnull(strstr(err1, "round 2/2 done"));
    free(out0), free(err0), free(out1), free(err1);
}
END_TEST

/* A run of minutes says so before it starts (it is stopped after 3 s), and
   --no-progress keeps it silent. */
START_TEST(test_cli_estimate)
{
    for (int quiet = 0; quiet < 2; quiet++) {
        char cmd[512];
        const char *e = tmp_path("estimate.stderr");
        snprintf(cmd, sizeof cmd, "timeout 3 " AG_CLI_PATH " run --pattern complete "
                 "--nodes 1000000 --dim 64 %s >/dev/null 2>'%s'", quiet ? "--no-progress" : "", e);
        ck_assert_int_ne(system(cmd), 0);   /* killed */
        char *text = read_text(e);
        ck_assert_ptr_nonnull(text);
        if (quiet)
            ck_assert_str_eq(text, "");
        else
            ck_assert_msg(strstr(text, "this run should take about") &&
                          strstr(text, "1e+12 messages x 1 head of width 64"), "%s", text);
        free(text);
    }
}
END_TEST

/* Numbered sources keep no label strings: ag_label writes the number. */
START_TEST(test_lazy_labels)
{
    char buf[AG_LABEL_NUMBER_SIZE];
    const ag_labels_t numbers = {12345678901, NULL};
    ck_assert_str_eq(ag_label(&numbers, 12345678900, buf, sizeof buf), "12345678900");
    char *strs[] = {"a", "b"};
    const ag_labels_t named = {2, strs};
    ck_assert_str_eq(ag_label(&named, 1, buf, sizeof buf), "b");
    /* the CLI prints and exports the numbers as before */
    char *out, *err;
    const char *csv = tmp_path("lazy.csv"), *gml = tmp_path("lazy.graphml");
    char args[512];
    snprintf(args, sizeof args, "run --pattern causal --nodes 30 --attn %s", csv);
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    ck_assert_msg(strstr(out, "  '19' attends '"), "%s", out);
    free(out), free(err);
    char *text = read_text(csv);
    ck_assert_ptr_nonnull(strstr(text, "\n3,7,3,7,0,"));
    free(text);
    snprintf(args, sizeof args, "run --pattern window:2 --nodes 30 --attn %s --quiet", gml);
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    free(out), free(err);
    text = read_text(gml);
    ck_assert_ptr_nonnull(strstr(text, ">29</data>"));
    free(text);
    ck_assert_int_eq(run_cli("inspect --pattern causal --nodes 30 --who 7 --to 3", &out, &err), 0);
    ck_assert_msg(strstr(out, "'7' attends '3': "), "%s %s", out, err);
    free(out), free(err);
}
END_TEST

Suite *figures_suite(void)
{
    Suite *s = suite_create("figures");
    TCase *tc = tcase_create("figures");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_atoms, 0, N_ATOMS);
    tcase_add_test(tc, test_sharp_and_large);
    tcase_add_test(tc, test_score_kinds);
    tcase_add_test(tc, test_random_csr);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_progress);
    tcase_add_test(tc, test_rounds);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("cli");
    tcase_set_timeout(cli, 60);
    tcase_add_test(cli, test_cli_progress);
    tcase_add_test(cli, test_cli_estimate);
    tcase_add_test(cli, test_lazy_labels);
    suite_add_tcase(s, cli);
    return s;
}
