/*
 * `attngraph plan`: its per-process numbers (from --csv) against a brute
 * force over every message of small inputs, the round model's arithmetic,
 * METIS against contiguous parts, a sampled plan of 1e8 nodes, and the
 * errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* One CSV row of plan. */
typedef struct {
    int ranks, rank, exact;
    long long first, dst, edges, work, halo, cut;
    double bytes, compute, comm;
} plan_row_t;

/* Reads plan's CSV into rows (malloc'ed); returns the count. */
static int read_plan_csv(const char *path, plan_row_t **rows)
{
    char *text = read_text(path);
    ck_assert_ptr_nonnull(text);
    static const char header[] = "ranks,rank,first,destinations,in_edges,work,halo_rows,cut,"
                                 "recv_bytes,compute_s,comm_s,exact,peak_bytes\n";
    ck_assert(strncmp(text, header, strlen(header)) == 0);
    int n = 0, cap = 64;
    *rows = malloc((size_t)cap * sizeof **rows);
    for (char *line = strchr(text, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        if (n == cap)
            *rows = realloc(*rows, (size_t)(cap *= 2) * sizeof **rows);
        plan_row_t *r = &(*rows)[n++];
        ck_assert_int_eq(sscanf(line, "%d,%d,%lld,%lld,%lld,%lld,%lld,%lld,%lf,%lf,%lf,%d",
                                &r->ranks, &r->rank, &r->first, &r->dst, &r->edges, &r->work,
                                &r->halo, &r->cut, &r->bytes, &r->compute, &r->comm, &r->exact),
                         12);
    }
    free(text);
    return n;
}

/* The rows of one P, checked against nb message by message: contiguous parts
   covering 0..N-1, work within one node of the mean, the counts, the bytes
   and the model's times (D 16, H 2, d 8, --rate 10,50, --bandwidth 2). */
static void check_rows(const plan_row_t *rows, int P, const ag_nbhd_t *nb)
{
    const int64_t N = nb->n_nodes;
    int64_t W = 0, w_max = 0;
    for (int64_t i = 0; i < N; i++) {
        const int64_t w = nb->edge_ptr[i + 1] - nb->edge_ptr[i] + 1;
        W += w;
        w_max = w > w_max ? w : w_max;
    }
    int64_t *src = malloc((size_t)(nb->n_edges + 1) * sizeof *src);
    ag_nbhd_sources(nb, 0, N, src);
    char *read = malloc((size_t)N);
    for (int p = 0; p < P; p++) {
        const plan_row_t *r = &rows[p];
        ck_assert_int_eq(r->ranks, P);
        ck_assert_int_eq(r->rank, p);
        ck_assert_int_eq(r->exact, 1);
        const long long lo = r->first, hi = p + 1 < P ? rows[p + 1].first : N;
        ck_assert_int_eq(r->dst, hi - lo);
        ck_assert(p > 0 || lo == 0);
        long long edges = 0, halo = 0, cut = 0;
        memset(read, 0, (size_t)N);
        for (long long i = lo; i < hi; i++)
            for (int64_t s = nb->edge_ptr[i]; s < nb->edge_ptr[i + 1]; s++, edges++)
                if (src[s] < lo || src[s] >= hi) {
                    cut++;
                    halo += !read[src[s]];
                    read[src[s]] = 1;
                }
        ck_assert_int_eq(r->edges, edges);
        ck_assert_int_eq(r->work, edges + (hi - lo));
        ck_assert_int_eq(r->halo, halo);
        ck_assert_int_eq(r->cut, cut);
        ck_assert(llabs(r->work * P - W) <= w_max * P);
        ck_assert(r->bytes == (double)halo * 2 * 2 * 8 * 4);
        const double compute = 4.0 * edges * 16 / 10e9 + 8.0 * (hi - lo) * 16 * 16 / 50e9;
        ck_assert(fabs(r->compute - compute) <= 1e-5 * compute + 1e-15);
        ck_assert(fabs(r->comm - r->bytes / 2e9) <= 1e-5 * r->comm + 1e-15);
    }
    free(src), free(read);
}

#define MODEL "--dim 16 --heads 2 --head-dim 8 --rate 10,50 --bandwidth 2"

START_TEST(plan_csr_against_brute_force)
{
    /* multi-edges, self-loops and isolated nodes */
    const int64_t N = 300;
    int64_t indptr[301], indices[3000], E = 0;
    uint64_t s = 99;
    indptr[0] = 0;
    for (int64_t i = 0; i < N; i++) {
        const int64_t deg = i % 7 == 0 ? 0 : (int64_t)((s = s * 6364136223846793005ull + 1) >> 60);
        for (int64_t k = 0; k < deg; k++) {
            s = s * 6364136223846793005ull + 1;
            indices[E + k] = (s >> 40) % 5 == 0 ? i : (int64_t)((s >> 33) % (uint64_t)N);
        }
        for (int64_t a = 1; a < deg; a++)
            for (int64_t b = E + a; b > E && indices[b - 1] > indices[b]; b--) {
                const int64_t t = indices[b];
                indices[b] = indices[b - 1], indices[b - 1] = t;
            }
        E += deg;
        indptr[i + 1] = E;
    }
    char shape[32];
    snprintf(shape, sizeof shape, "(%lld,)", (long long)(N + 1));
    write_npy_raw(tmp_path("plan_ip.npy"), "<i8", 0, shape, indptr, sizeof indptr);
    snprintf(shape, sizeof shape, "(%lld,)", (long long)E);
    write_npy_raw(tmp_path("plan_ix.npy"), "<i8", 0, shape, indices, (size_t)E * sizeof *indices);
    char args[2048];
    snprintf(args, sizeof args, "plan --ranks 1,3,7,400 --csr %s,%s " MODEL " --csv %s",
             tmp_path("plan_ip.npy"), tmp_path("plan_ix.npy"), tmp_path("plan.csv"));
    char *out, *err;
    ck_assert_msg(run_cli(args, &out, &err) == 0, "%s", err);
    ck_assert_ptr_nonnull(strstr(out, "400 processes, contiguous parts; counts exact"));
    free(out), free(err);
    plan_row_t *rows;
    ck_assert_int_eq(read_plan_csv(tmp_path("plan.csv"), &rows), 1 + 3 + 7 + 400);
    ag_nbhd_t nb;
    ag_error_t e;
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, N, indptr, indices, &e), AG_OK);
    check_rows(rows, 1, &nb);
    check_rows(rows + 1, 3, &nb);
    check_rows(rows + 4, 7, &nb);
    check_rows(rows + 11, 400, &nb);
    ag_nbhd_destroy(&nb);
    free(rows);
}
END_TEST

START_TEST(plan_pattern_against_brute_force)
{
    const char *cases[][2] = {{"causal&!strided:3", "on"}, {"window:4,2", "off"},
                              {"random:5,2+global:1", "keep"}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char args[2048];
        snprintf(args, sizeof args, "plan --ranks 4 --pattern '%s' --nodes 123 --self-loops %s "
                 MODEL " --csv %s", cases[k][0], cases[k][1], tmp_path("plan.csv"));
        char *out, *err;
        ck_assert_msg(run_cli(args, &out, &err) == 0, "%s", err);
        ck_assert_ptr_nonnull(strstr(out, "ring path"));
        free(out), free(err);
        plan_row_t *rows;
        ck_assert_int_eq(read_plan_csv(tmp_path("plan.csv"), &rows), 4);
        ag_pattern_t *pat;
        ag_nbhd_t nb;
        ag_error_t e;
        ck_assert_int_eq(ag_pattern_parse(&pat, cases[k][0], &e), AG_OK);
        const ag_self_loops_t self = cases[k][1][1] == 'n' ? AG_SELF_ON
                                     : cases[k][1][1] == 'f' ? AG_SELF_OFF : AG_SELF_KEEP;
        ck_assert_int_eq(ag_nbhd_from_pattern(&nb, pat, 123, self, &e), AG_OK);
        check_rows(rows, 4, &nb);
        ag_nbhd_destroy(&nb);
        ag_pattern_free(pat);
        free(rows);
    }
}
END_TEST

/* The number after "key": in a JSON line. */
static double json_number(const char *json, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *at = strstr(json, pattern);
    ck_assert_msg(at != NULL, "no %s in %s", key, json);
    return strtod(at + strlen(pattern), NULL);
}

START_TEST(plan_metis_cuts_less)
{
    if (!ag_partition_has_metis()) {   /* built with NO_METIS=1: refused, saying so */
        expect_cli("plan --ranks 3 graphs/planted.gml --partition metis", 1, 2, "no METIS");
        return;
    }
    char *out, *err;
    ck_assert_int_eq(run_cli("plan --ranks 3 graphs/planted.gml --partition metis --json "
                             "--rate 10,50", &out, &err), 0);
    const double cut = json_number(out, "edge_cut"), contiguous = json_number(out, "edge_cut_contiguous");
    ck_assert(cut > 0 && cut <= contiguous);
    ck_assert(json_number(out, "nodes") == 300);
    free(out), free(err);
    expect_cli("plan --ranks 2 graphs/karate.gml --partition metis --rate 10,50", 0, 1,
               "contiguous parts cut");
}
END_TEST

/* 1e8 nodes of random sources: sampled, quick, and said so. */
START_TEST(plan_sampled_large)
{
    char *out, *err;
    ck_assert_int_eq(run_cli("plan --ranks 4 --pattern random:8 --nodes 100000000 --rate 10,50 "
                             "--json", &out, &err), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"exact\": false"));
    ck_assert(json_number(out, "messages") == 8e8);
    /* a part of 2.5e7 reads 1.5e8 sources outside it, among 7.5e7 rows: 1-e^-2 of them */
    const char *parts = strstr(out, "\"halo\": ");
    const double halo = strtod(parts + 8, NULL), want = 7.5e7 * (1 - exp(-2.0));
    ck_assert_msg(fabs(halo / want - 1) < 0.01, "halo %g, want about %g", halo, want);
    free(out), free(err);
    expect_cli("plan --ranks 4 --pattern random:8 --nodes 100000000 --rate 10,50", 0, 1,
               "sampled estimate");
}
END_TEST

/* The ring path as attngraph-mpi runs it (mpi/ring.c): the halo path's parts, each
   process holding its own K/V rows, four buffers of 1,024 + 64 rows and the 64
   rows last taken, and receiving its halo in whole blocks of 1,024; only for one
   run of sources a destination and 16 or more in-edges a node. */
START_TEST(plan_ring_is_the_ring_mpi_runs)
{
    char args[512], *out, *err;
    snprintf(args, sizeof args, "plan --ranks 3 --pattern causal --nodes 20000 " MODEL
             " --csv %s", tmp_path("ring.csv"));
    ck_assert_msg(run_cli(args, &out, &err) == 0, "%s", err);
    ck_assert_ptr_nonnull(strstr(out, "(own + 4 blocks in flight + 64)"));
    free(out), free(err);
    plan_row_t *rows;
    ck_assert_int_eq(read_plan_csv(tmp_path("ring.csv"), &rows), 3);
    double held = 0, bytes = 0;
    for (int p = 0; p < 3; p++) {
        const double halo = rows[p].halo ? fmin(rows[p].halo + 2048.0, 20000.0 - rows[p].dst) : 0;
        held = fmax(held, (double)rows[p].dst + 4 * 1088 + 64);
        bytes = fmax(bytes, halo * 2 * 2 * 8 * 4);   /* a row: K and V, H d float32 */
    }
    free(rows);
    ck_assert_int_eq(run_cli("plan --ranks 3 --pattern causal --nodes 20000 " MODEL " --json",
                             &out, &err), 0);
    const char *ring = strstr(out, "\"ring\": {");
    ck_assert_ptr_nonnull(ring);
    ck_assert_double_eq(json_number(ring, "max_rows_held"), held);
    ck_assert_double_eq_tol(json_number(ring, "max_recv_bytes"), bytes, 1e-5 * bytes);
    free(out), free(err);
    /* several runs a destination: no ring */
    ck_assert_int_eq(run_cli("plan --ranks 3 --pattern window:8+global:1 --nodes 20000 " MODEL
                             " --json", &out, &err), 0);
    ck_assert_ptr_null(strstr(out, "\"ring\""));
    free(out), free(err);
    expect_cli("plan --ranks 3 --pattern random:4 --nodes 20000 " MODEL, 0, 1,
               "ring path: not for this pattern (destinations read several runs");
    /* one run, but too few in-edges for the tiled kernel the ring streams */
    expect_cli("plan --ranks 3 --pattern window:8 --nodes 20000 " MODEL, 0, 1,
               "ring path: not for this pattern (fewer than 16 in-edges a node");
}
END_TEST

/* Without --rate the rates are measured, on the input or a small one of its kind. */
START_TEST(plan_measures_rates)
{
    const char *cases[][2] = {{"plan --ranks 2 --pattern window:4 --nodes 100000 --json",
                               "'window:4' on 65536 nodes"},
                              {"plan --ranks 2 graphs/karate.gml", "the input itself"},
                              {"plan --ranks 2 --pattern blocks:3,5 --heads 2", "'blocks:3,5' on 8 nodes"},
                              {"plan --ranks 2 --pattern grid:300x300,1",
                               "65536 nodes of 9 random sources among 65536 rows"},
                              {"plan --ranks 2 --pattern random:10 --nodes 200000 --heads 2 "
                               "--dim 16", "'random:10' on 199335 nodes"},
                              /* 262,144 destinations mid-way through 300,000 nodes */
                              {"plan --ranks 1 --pattern random:4 --nodes 300000",
                               "'random:4' on 300000 nodes, destinations 18432..280575"},
                              /* dense: whole on fewer nodes */
                              {"plan --ranks 1 --pattern causal --nodes 300000",
                               "'causal' on 4687 nodes"}};
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char *out, *err, args[512];   /* every core to one process: measured alone */
        snprintf(args, sizeof args, "%s --threads %ld", cases[k][0], cores);
        ck_assert_msg(run_cli(args, &out, &err) == 0, "%s", err);
        if (strstr(cases[k][0], "--json")) {
            ck_assert(json_number(out, "kernel_gflops") > 0.01);
            ck_assert(json_number(out, "gemm_gflops") > 0.01);
        } else {
            ck_assert_msg(strstr(out, cases[k][1]) != NULL, "%s: no '%s' in\n%s", args,
                          cases[k][1], out);
            ck_assert_ptr_nonnull(strstr(out, "(measured now with"));
        }
        free(out), free(err);
    }
}
END_TEST

/* The first round also writes each process's queries and messages (8 n H d
   bytes) for the first time, at --rate's third figure (GB/s): the slowest
   process's first round against its later ones. */
START_TEST(plan_first_round)
{
    char *out, *err;
    ck_assert_int_eq(run_cli("plan --ranks 1 --pattern causal --nodes 100000 --dim 32 --heads 2 "
                             "--rate 10,50,2 --json", &out, &err), 0);
    const double round = json_number(out, "round_s"), first = json_number(out, "first_round_s");
    const double touch = 8.0 * 100000 * 32 / 2e9;
    ck_assert_msg(fabs(first - round - touch) < 1e-5 * first, "first %g, round %g, touch %g",
                  first, round, touch);
    ck_assert(json_number(out, "touch_gbs") == 2);
    free(out), free(err);
    /* 3 processes: the slowest one's, never less than a later round */
    ck_assert_int_eq(run_cli("plan --ranks 3 --pattern causal --nodes 100000 --dim 32 --heads 2 "
                             "--rate 10,50,2 --json", &out, &err), 0);
    const double r3 = json_number(out, "round_s"), f3 = json_number(out, "first_round_s");
    ck_assert(f3 > r3 && f3 - r3 >= touch / 3 * 0.99 && f3 - r3 <= touch);
    free(out), free(err);
    expect_cli("plan --ranks 1 --pattern causal --nodes 1000 --rate 10,50,4", 0, 1,
               "memory written the first time 4 GB/s (--rate)");
    expect_cli("plan --ranks 1 --pattern causal --nodes 1000 --rate 10,50", 0, 1,
               "first round at 1");
}
END_TEST

/* Processes that would share this machine are timed at once: their threads
   together on their rows together, the rate divided among them. */
START_TEST(plan_times_the_sharing_processes)
{
    /* 2 threads at once only where the build has OpenMP's */
    const long cores = ag_set_threads(2) == 2 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    ag_set_threads(0);
    char *out, *err;
    ck_assert_int_eq(run_cli("plan --ranks 4,1 --pattern random:4 --nodes 50000 --threads 1",
                             &out, &err), 0);
    ck_assert_msg(strstr(out, cores >= 2 ? "processes at once, as many as share this machine"
                                         : "(measured now with 1 thread:"), "%s", out);
    free(out), free(err);
    /* one process first: alone, whatever the cores */
    ck_assert_int_eq(run_cli("plan --ranks 1,4 --pattern random:4 --nodes 50000 --threads 1", &out,
                             &err), 0);
    ck_assert_ptr_nonnull(strstr(out, "(measured now with 1 thread: a busy"));
    free(out), free(err);
}
END_TEST

START_TEST(plan_errors)
{
    expect_cli("plan --ranks 0 --pattern causal --nodes 10", 2, 2, "--ranks '0'");
    expect_cli("plan --ranks 99999999999 --pattern causal --nodes 10", 2, 2, "1..1048576");
    expect_cli("plan --ranks 4,x --pattern causal --nodes 10", 2, 2, "--ranks '4,x'");
    expect_cli("plan --pattern causal --nodes 10", 2, 2, "--ranks P is needed");
    expect_cli("plan --ranks 2 --pattern causl --nodes 10", 2, 2, "causl");
    expect_cli("plan --ranks 2 --pattern causal", 2, 2, "give --nodes");
    expect_cli("plan --ranks 2 --pattern causal --nodes 2199023255553", 2, 2, "--nodes");
    expect_cli("plan --ranks 2 --pattern causal --nodes 10 --partition metis", 2, 2,
               "graph files and CSR");
    expect_cli("plan --ranks 2 graphs/karate.gml --exact", 2, 2, "for patterns");
    expect_cli("plan --ranks 2 --pattern causal --nodes 10 --sample 0", 2, 2, "--sample");
    expect_cli("plan --ranks 2 --pattern causal --nodes 10 --rate 0", 2, 2, "--rate '0'");
    expect_cli("plan --ranks 2 --pattern causal --nodes 10 --rate 10,50,2,3", 2, 2,
               "--rate '10,50,2,3'");
    expect_cli("plan --ranks 2 --pattern causal --nodes 10 --rate 10,,2", 2, 2, "--rate '10,,2'");
    expect_cli("plan --ranks 2 --pattern causal --nodes 10 --rate 10,50,0", 2, 2,
               "--rate '10,50,0'");
    expect_cli("plan --ranks 2 --pattern causal --nodes 10 --rate 10,", 2, 2, "--rate '10,'");
    expect_cli("plan --ranks 2 --pattern causal --nodes 10 --partition best", 2, 2,
               "contiguous or metis");
    expect_cli("plan --ranks 2 graphs/missing.gml", 1, 2, "missing.gml");
    expect_cli("plan --ranks 2 --pattern blocks:4,4 --nodes 10 --rate 1,1", 1, 2, "covers 8");
    expect_cli("plan --ranks 2 --pattern complete --nodes 3000000000 --rate 1,1", 1, 2,
               "more than a plan counts");
    /* more processes than nodes: empty parts, no failure */
    expect_cli("plan --ranks 12 --pattern causal --nodes 5 --rate 1,1", 0, 1, "12 processes");
}
END_TEST

Suite *plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, plan_csr_against_brute_force);
    tcase_add_test(tc, plan_pattern_against_brute_force);
    tcase_add_test(tc, plan_metis_cuts_less);
    tcase_add_test(tc, plan_sampled_large);
    tcase_add_test(tc, plan_ring_is_the_ring_mpi_runs);
    tcase_add_test(tc, plan_measures_rates);
    tcase_add_test(tc, plan_first_round);
    tcase_add_test(tc, plan_times_the_sharing_processes);
    tcase_add_test(tc, plan_errors);
    suite_add_tcase(s, tc);
    return s;
}
