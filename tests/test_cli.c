/* The built binary, end to end: outputs, exit codes and messages. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "reference.h"
#include "testutil.h"

START_TEST(help_and_version)
{
    expect_cli("--version", 0, 1, "attngraph " AG_VERSION);
    expect_cli("--help", 0, 1, "run GRAPH");
    expect_cli("run --help", 0, 1, "--max-nodes");
    expect_cli("", 2, 2, "usage");
    expect_cli("frobnicate", 2, 2, "unknown command 'frobnicate'");
}
END_TEST

START_TEST(usage_errors_exit_2)
{
    expect_cli("run", 2, 2, "no GRAPH");
    expect_cli("run graphs/sentence.gml --bogus", 2, 2, "unknown option '--bogus'");
    expect_cli("run graphs/sentence.gml --heads x", 2, 2, "--heads 'x' is not an integer");
    expect_cli("run graphs/sentence.gml --heads 0", 2, 2, "--heads '0'");
    expect_cli("run graphs/sentence.gml --q a.npy", 2, 2, "go together");
    expect_cli("run graphs/sentence.gml --format xyz", 2, 2, "unknown graph format 'xyz'");
    expect_cli("run graphs/sentence.gml --out", 2, 2, "needs a value");
}
END_TEST

START_TEST(summary_of_the_shipped_example)
{
    char *out;
    ck_assert_int_eq(run_cli("run graphs/sentence.gml --dim 16 --heads 2 --rounds 2", &out, NULL),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "4 nodes, 10 edges"));
    ck_assert_ptr_nonnull(strstr(out, "'nah' attends 'nah': 100.0%"));   /* causal: only itself */
    ck_assert_ptr_nonnull(strstr(out, "'win' attends "));
    ck_assert_ptr_null(strstr(out, "need not sum"));
    free(out);
    /* sigmoid's weights are not normalised: the header says that they need not sum to 1 */
    expect_cli("run graphs/sentence.gml --score sigmoid", 0, 1,
               "top 3 sources; sigmoid weights need not sum to 100%):");
    ck_assert_int_eq(run_cli("run graphs/sentence.gml --quiet", &out, NULL), 0);
    ck_assert_str_eq(out, "");
    free(out);
}
END_TEST

/* Writes a float32 matrix for the CLI to read. */
static const char *save(const char *name, const float *x, int64_t rows, int64_t cols)
{
    const char *p = tmp_path(name);
    ag_error_t err;
    ck_assert_int_eq(ag_npy_write_f32(p, x, rows, cols, &err), AG_OK);
    return p;
}

START_TEST(raw_attention_matches_reference)
{
    /* graphs/random10.edges: repeated edges, self-loops, node 9 receives nothing */
    igraph_t g;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/random10.edges", NULL, &err), AG_OK);
    const int64_t N = 10, E = igraph_ecount(&g), H = 2, d = 3, HD = 6;
    int64_t src[64], dst[64];
    for (int64_t e = 0; e < E; e++)
        src[e] = IGRAPH_FROM(&g, e), dst[e] = IGRAPH_TO(&g, e);
    igraph_destroy(&g);
    float Q[60], K[60], V[60];
    fill_uniform(Q, 60, 1, 1.0f), fill_uniform(K, 60, 2, 1.0f), fill_uniform(V, 60, 3, 1.0f);
    double Mref[60], Wref[128];
    ref_attention(N, src, dst, E, Q, K, V, H, d, Mref, Wref);
    char args[2048];
    snprintf(args, sizeof args, "run graphs/random10.edges --heads 2 --q %s --k %s --v %s "
             "--out %s --attn %s", save("q.npy", Q, N, HD), save("k.npy", K, N, HD),
             save("v.npy", V, N, HD), tmp_path("m.npy"), tmp_path("a.csv"));
    ck_assert_int_eq(run_cli(args, NULL, NULL), 0);
    ag_matrix_t M;
    ck_assert_int_eq(ag_matrix_read_npy(&M, tmp_path("m.npy"), &err), AG_OK);
    ck_assert_int_eq(M.rows, N);
    ck_assert_int_eq(M.cols, HD);
    ck_assert_double_le(max_abs_diff_fd(M.data, Mref, N * HD), 2e-5);
    for (int c = 0; c < HD; c++)
        ck_assert_float_eq(M.data[9 * HD + c], 0.0f);
    ag_matrix_destroy(&M);

    /* CSV: header, then edge e head h in the graph's edge order */
    char *csv = read_text(tmp_path("a.csv"));
    char *line = strtok(csv, "\n");
    ck_assert_str_eq(line, "src,dst,src_label,dst_label,head,weight");
    for (int64_t e = 0; e < E; e++)
        for (int64_t h = 0; h < H; h++) {
            line = strtok(NULL, "\n");
            ck_assert_ptr_nonnull(line);
            long long s, t, hh;
            char ls[16], lt[16];
            double w;
            ck_assert_int_eq(sscanf(line, "%lld,%lld,%15[^,],%15[^,],%lld,%lf", &s, &t, ls, lt,
                                    &hh, &w), 6);
            ck_assert_int_eq(s, src[e]);
            ck_assert_int_eq(t, dst[e]);
            ck_assert_int_eq(hh, h);
            ck_assert_int_eq(atoll(ls), s);              /* numbered labels */
            ck_assert_double_le(fabs(w - Wref[e * H + h]), 1e-5);
        }
    ck_assert_ptr_null(strtok(NULL, "\n"));
    free(csv);
}
END_TEST

START_TEST(rounds_with_weights_match_reference)
{
    const int64_t N = 4, D = 6, H = 2, d = 2, HD = 4;
    float X[24], wq[24], wk[24], wv[24], wo[24];
    fill_uniform(X, 24, 1, 1.0f), fill_uniform(wq, 24, 2, 0.5f), fill_uniform(wk, 24, 3, 0.5f);
    fill_uniform(wv, 24, 4, 0.5f), fill_uniform(wo, 24, 5, 0.5f);
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tmp_path("weights"));
    mkdir(dir, 0755);
    ag_error_t err;
    const char *names[] = {"wq", "wk", "wv", "wo"};
    const float *mats[] = {wq, wk, wv, wo};
    for (int m = 0; m < 4; m++) {
        char p[700];
        snprintf(p, sizeof p, "%s/%s.npy", dir, names[m]);
        ck_assert_int_eq(ag_npy_write_f32(p, mats[m], m < 3 ? HD : D, m < 3 ? D : HD, &err), 0);
    }
    /* graphs/sentence.gml is causal over 4 tokens */
    int64_t src[10], dst[10], E = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j <= i; j++)
            src[E] = j, dst[E++] = i;
    double Xref[24];
    for (int i = 0; i < 24; i++)
        Xref[i] = X[i];
    ref_rounds(N, src, dst, E, wq, wk, wv, wo, D, H, d, 3, Xref);
    char args[2048];
    snprintf(args, sizeof args, "run graphs/sentence.gml --heads 2 --rounds 3 --features %s "
             "--weights %s --out %s --quiet", save("x.npy", X, N, D), dir, tmp_path("x3.npy"));
    ck_assert_int_eq(run_cli(args, NULL, NULL), 0);
    ag_matrix_t out;
    ck_assert_int_eq(ag_matrix_read_npy(&out, tmp_path("x3.npy"), &err), AG_OK);
    ck_assert_int_eq(out.cols, D);
    ck_assert_double_le(max_abs_diff_fd(out.data, Xref, N * D), 1e-4);
    ag_matrix_destroy(&out);
}
END_TEST

START_TEST(bad_inputs_exit_1_with_a_clear_message)
{
    float x[12] = {0};
    char args[2048];
    snprintf(args, sizeof args, "run graphs/sentence.gml --q %s --k %s --v %s",
             save("q3.npy", x, 3, 4), save("k3.npy", x, 3, 4), save("v3.npy", x, 3, 4));
    expect_cli(args, 1, 2, "--q /");
    expect_cli(args, 1, 2, "q3.npy has 3 rows, the graph has 4 nodes");

    x[6] = NAN;
    snprintf(args, sizeof args, "run graphs/sentence.gml --features %s", save("xn.npy", x, 4, 3));
    expect_cli(args, 1, 2, "xn.npy: row 2, column 0 is NaN");

    x[6] = 0;
    expect_cli("run graphs/sentence.gml --dim 4 --heads 3", 2, 2,   /* the command line alone */
               "width D=4 (--dim) is not a multiple of 3 heads");
    snprintf(args, sizeof args, "run graphs/sentence.gml --features %s --weights %s",
             save("x4.npy", x, 4, 3), tmp_path("no-such-dir"));
    expect_cli(args, 1, 2, "no-such-dir/wq.npy: cannot open");
}
END_TEST

START_TEST(bad_graphs_exit_1)
{
    const char *p = tmp_path("huge.edges");
    write_text(p, "0 1\n1 900000000\n");
    char args[1024];
    snprintf(args, sizeof args, "run %s", p);
    expect_cli(args, 1, 2, "node id 900000000");
    expect_cli(args, 1, 2, "--max-nodes");
    write_text(p, "0 1\n1 20\n");
    snprintf(args, sizeof args, "run %s --max-nodes 20", p);
    expect_cli(args, 1, 2, "node id 20");
    snprintf(args, sizeof args, "run %s --max-nodes 21 --quiet", p);
    expect_cli(args, 0, 1, "");
    expect_cli("run graphs/nothing.gml", 1, 2, "graphs/nothing.gml: cannot open");
    p = tmp_path("bad.graphml");
    write_text(p, "<graphml><graph><node id=\"a\"/><edge source=\"a\" target=\"b\"/></graph>"
                  "</graphml>");
    snprintf(args, sizeof args, "run %s", p);
    expect_cli(args, 1, 2, "node 'b', which is not declared");
}
END_TEST

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.' || strncmp(e->d_name, ".out", 4) == 0;
    closedir(d);
    return n;
}

START_TEST(failed_run_leaves_old_outputs_alone)
{
    char dir[600], out[700], attn[700], args[2048];
    snprintf(dir, sizeof dir, "%s", tmp_path("outs"));
    mkdir(dir, 0755);
    snprintf(out, sizeof out, "%s/out.npy", dir);
    snprintf(attn, sizeof attn, "%s/attn.csv", dir);
    write_text(out, "stale");
    write_text(attn, "stale");
    float x[12] = {0};
    x[11] = INFINITY;
    snprintf(args, sizeof args, "run graphs/sentence.gml --features %s --out %s --attn %s",
             save("xi.npy", x, 4, 3), out, attn);
    expect_cli(args, 1, 2, "row 3, column 2 is Inf");
    char *old_out = read_text(out), *old_attn = read_text(attn);   /* as they were */
    ck_assert_str_eq(old_out, "stale");
    ck_assert_str_eq(old_attn, "stale");
    free(old_out), free(old_attn);
    ck_assert_int_eq(count_entries(dir), 2);   /* no temporary files either */

    /* success writes both, and leaves nothing else */
    snprintf(args, sizeof args, "run graphs/sentence.gml --out %s --attn %s --quiet", out, attn);
    expect_cli(args, 0, 1, "");
    ck_assert(file_exists(out) && file_exists(attn));
    ck_assert_int_eq(count_entries(dir), 2);
    /* an output in a missing folder fails before any work */
    expect_cli("run graphs/sentence.gml --out /nonexistent/dir/x.npy", 1, 2,
               "/nonexistent/dir/x.npy: cannot create");
}
END_TEST

START_TEST(csv_quotes_labels)
{
    const char *p = tmp_path("quoted.gml");
    write_text(p, "graph [ directed 1 node [ id 0 label \"a,b\" ] node [ id 1 label \"say "
                  "&quot;hi&quot;\" ] edge [ source 0 target 1 ] ]");
    char args[1024];
    snprintf(args, sizeof args, "run %s --attn %s --quiet", p, tmp_path("q.csv"));
    expect_cli(args, 0, 1, "");
    char *csv = read_text(tmp_path("q.csv"));
    ck_assert_msg(strstr(csv, "0,1,\"a,b\",\"say \"\"hi\"\"\",0,1\n"), "csv was:\n%s", csv);
    free(csv);
}
END_TEST

START_TEST(utf8_labels_in_summary)
{
    char *out;
    ck_assert_int_eq(run_cli("run graphs/en_ja_cross.graphml", &out, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "'いいえ' attends nothing"));
    ck_assert_ptr_nonnull(strstr(out, "'nah' attends '"));
    free(out);
}
END_TEST

START_TEST(pattern_export_and_reload)
{
    char args[1024];
    const char *g = tmp_path("causal.graphml");
    snprintf(args, sizeof args, "pattern causal --tokens 'nah I d win' --out %s", g);
    expect_cli(args, 0, 1, "pattern 'causal' on 4 nodes: 10 edges");
    igraph_t graph;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&graph, g, NULL, &err), AG_OK);
    ck_assert_int_eq(igraph_ecount(&graph), 10);
    ag_labels_t labels;
    ck_assert_int_eq(ag_labels_from_graph(&labels, &graph, &err), AG_OK);
    ck_assert_str_eq(labels.str[3], "win");
    ag_labels_destroy(&labels);
    igraph_destroy(&graph);

    snprintf(args, sizeof args, "pattern causal --nodes 65536 --out %s", tmp_path("big.graphml"));
    expect_cli(args, 1, 2, "2147516416 edges are too many to materialise");
    ck_assert(!file_exists(tmp_path("big.graphml")));
    snprintf(args, sizeof args, "pattern 'window:-1' --nodes 4 --out %s", tmp_path("x.gml"));
    expect_cli(args, 2, 2, "pattern 'window:-1': 'window:-1': '-1' is not");
    snprintf(args, sizeof args, "pattern causal --out %s", tmp_path("x.gml"));
    expect_cli(args, 2, 2, "needs a size");
    snprintf(args, sizeof args, "pattern 'docs:2,2' --nodes 5 --out %s", tmp_path("x.gml"));
    expect_cli(args, 2, 2, "'docs:2,2' covers 4 nodes, but there are 5");
    snprintf(args, sizeof args, "pattern 'docs:2,2' --out %s --format pajek --quiet",
             tmp_path("docs.txt"));
    expect_cli(args, 0, 1, "");
    char *text = read_text(tmp_path("docs.txt"));
    ck_assert_ptr_nonnull(strstr(text, "*Vertices 4"));
    free(text);
    /* LGL with names (igraph's own writer leaked them: seen under valgrind by
       check-valgrind, which runs this suite), an isolated node last */
    snprintf(args, sizeof args, "pattern 'window:2&!window:1' --tokens 'a b c d' --out %s "
             "--quiet", tmp_path("w.lgl"));
    expect_cli(args, 0, 1, "");
    text = read_text(tmp_path("w.lgl"));
    ck_assert_str_eq(text, "# a\nb\n# b\nc\n# c\nd\n");
    free(text);
    snprintf(args, sizeof args, "pattern 'strided:8' --nodes 2 --self-loops off --out %s "
             "--quiet", tmp_path("none.lgl"));
    expect_cli(args, 0, 1, "");
    text = read_text(tmp_path("none.lgl"));
    ck_assert_str_eq(text, "# 0\n# 1\n");
    free(text);
}
END_TEST

/* The causal pattern and the shipped causal graph are the same connectivity:
   identical inputs must give identical bits. */
START_TEST(run_on_a_pattern_equals_the_same_graph)
{
    char args[1024];
    snprintf(args, sizeof args, "run --pattern causal --tokens 'nah I d win' --dim 8 --heads 2 "
             "--rounds 3 --out %s --quiet", tmp_path("p.npy"));
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "run graphs/sentence.gml --dim 8 --heads 2 --rounds 3 --out %s "
             "--quiet", tmp_path("g.npy"));
    expect_cli(args, 0, 1, "");
    ag_matrix_t a, b;
    ag_error_t err;
    ck_assert_int_eq(ag_matrix_read_npy(&a, tmp_path("p.npy"), &err), AG_OK);
    ck_assert_int_eq(ag_matrix_read_npy(&b, tmp_path("g.npy"), &err), AG_OK);
    ck_assert_mem_eq(a.data, b.data, 4 * 8 * sizeof(float));
    ag_matrix_destroy(&a), ag_matrix_destroy(&b);
    expect_cli("run --pattern causal --tokens 'nah I d win'", 0, 1, "'win' attends");
    expect_cli("run --pattern causal", 2, 2, "needs a size");
    /* a pattern beside a graph file runs over its nodes and labels (its edges unread) */
    expect_cli("run graphs/sentence.gml --pattern causal", 0, 1,
               "pattern 'causal' over graphs/sentence.gml");
    expect_cli("run graphs/sentence.gml --csr a.npy,b.npy", 2, 2,
               "give a GRAPH file or --csr, not both");
    expect_cli("run graphs/sentence.gml --nodes 4", 2, 2, "are for patterns");
    expect_cli("run --pattern causal --nodes 3 --tokens 'a b'", 2, 2,
               "--tokens has 2 labels, but --nodes is 3");
}
END_TEST

/* Reads per-edge weights of a --attn CSV: w[dst*N + src] (single head). */
static void read_attn(const char *path, int64_t N, double *w)
{
    char *csv = read_text(path), *save = NULL;
    memset(w, 0, N * N * sizeof *w);
    strtok_r(csv, "\n", &save);   /* header */
    for (char *line; (line = strtok_r(NULL, "\n", &save));) {
        long long s, t, h;
        double x;
        char a[64], b[64];
        ck_assert_int_eq(sscanf(line, "%lld,%lld,%63[^,],%63[^,],%lld,%lf", &s, &t, a, b, &h, &x), 6);
        w[t * N + s] += x;
    }
    free(csv);
}

START_TEST(compare_table_and_csv)
{
    const int64_t N = 6;
    const char *tokens = "--tokens 'the cat sat on the mat'";
    char args[2048];
    snprintf(args, sizeof args, "compare --pattern causal --pattern window:2 --pattern "
             "'window:2+global:1' %s --rounds 2 --csv %s --per-node %s", tokens,
             tmp_path("cmp.csv"), tmp_path("nodes.csv"));
    expect_cli(args, 0, 1, "(baseline)");
    char *csv = read_text(tmp_path("cmp.csv"));
    ck_assert_ptr_nonnull(strstr(csv, "connectivity,nodes,edges,density,entropy_mean,"));
    ck_assert_ptr_nonnull(strstr(csv, "\ncausal,6,21,"));
    ck_assert_ptr_nonnull(strstr(csv, "\nwindow:2,6,11,"));
    ck_assert_ptr_nonnull(strstr(csv, "\nwindow:2+global:1,6,20,"));
    free(csv);

    /* recompute the window:2 entropies and distances from its --attn export */
    snprintf(args, sizeof args, "run --pattern window:2 %s --rounds 2 --attn %s --quiet", tokens,
             tmp_path("w.csv"));
    expect_cli(args, 0, 1, "");
    double w[36];
    read_attn(tmp_path("w.csv"), N, w);
    char *nodes = read_text(tmp_path("nodes.csv")), *save = NULL;
    int rows = 0;
    strtok_r(nodes, "\n", &save);
    for (char *line; (line = strtok_r(NULL, "\n", &save)); rows++) {
        char name[64], label[64];
        long long i, deg;
        double ent, dist, change, cosine;
        ck_assert_int_eq(sscanf(line, "%63[^,],%lld,%63[^,],%lld,%lf,%lf,%lf,%lf", name, &i,
                                label, &deg, &ent, &dist, &change, &cosine), 8);
        if (strcmp(name, "causal") == 0) {
            ck_assert_int_eq(deg, i + 1);
            ck_assert_double_eq(change, 0);      /* the baseline against itself */
            ck_assert_double_eq_tol(cosine, 1, 1e-12);
        }
        if (strcmp(name, "window:2") != 0)
            continue;
        double e = 0, dd = 0;
        for (int64_t j = 0; j < N; j++)
            if (w[i * N + j] > 0)
                e -= w[i * N + j] * log(w[i * N + j]), dd += w[i * N + j] * fabs((double)(i - j));
        ck_assert_double_eq_tol(ent, e, 1e-6);
        ck_assert_double_eq_tol(dist, dd, 1e-6);
        ck_assert_int_eq(deg, i == 0 ? 1 : 2);
    }
    ck_assert_int_eq(rows, 3 * N);
    free(nodes);

    /* a pattern and the graph it equals: no change at all */
    expect_cli("compare --graph graphs/sentence.gml --pattern causal --nodes 4", 0, 1,
               "causal                                 10   0.6250");
    char *out;
    run_cli("compare --graph graphs/sentence.gml --pattern causal --nodes 4", &out, NULL);
    ck_assert_msg(strstr(out, " 0.0000  1.0000"), "expected rel_L2 0 and cos 1:\n%s", out);
    free(out);
}
END_TEST

START_TEST(compare_errors)
{
    expect_cli("compare --pattern causal --nodes 4", 2, 2, "at least two");
    expect_cli("compare --graph graphs/sentence.gml --graph graphs/random10.edges", 1, 2,
               "'graphs/random10.edges' has 10 nodes; the first connectivity "
               "('graphs/sentence.gml') has 4");
    expect_cli("compare --pattern causal --pattern 'causal&' --nodes 4", 2, 2,
               "pattern 'causal&'");
    expect_cli("compare --pattern causal --pattern window:2 --nodes 4 extra", 2, 2,
               "unexpected argument 'extra'");
}
END_TEST

/* Messages of graphs/random10.edges (edge e: src[e] -> dst[e]). */
static int64_t random10(int64_t *src, int64_t *dst)
{
    igraph_t g;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/random10.edges", NULL, &err), AG_OK);
    const int64_t E = igraph_ecount(&g);
    for (int64_t e = 0; e < E; e++)
        src[e] = IGRAPH_FROM(&g, e), dst[e] = IGRAPH_TO(&g, e);
    igraph_destroy(&g);
    return E;
}

START_TEST(attention_exports_agree)
{
    int64_t src[64], dst[64];
    const int64_t E = random10(src, dst), N = 10, H = 2, d = 3, HD = 6;
    float Q[60], K[60], V[60];
    fill_uniform(Q, 60, 21, 1.5f), fill_uniform(K, 60, 22, 1.5f), fill_uniform(V, 60, 23, 1.0f);
    double M[60], W[128];
    const ref_score_t rs = {.kind = 1, .beta = 2, .slope = 0.2};   /* dot, beta 2 */
    ref_attention_scored(N, src, dst, E, Q, K, V, H, d, &rs, M, W);
    char q[512], k[512], v[512];   /* tmp_path's buffers get reused: keep copies */
    snprintf(q, sizeof q, "%s", save("eq.npy", Q, N, HD));
    snprintf(k, sizeof k, "%s", save("ek.npy", K, N, HD));
    snprintf(v, sizeof v, "%s", save("ev.npy", V, N, HD));
    const char *ext[] = {"csv", "npy", "graphml"};
    for (int x = 0; x < 3; x++) {
        char args[2048], name[32];
        snprintf(name, sizeof name, "w.%s", ext[x]);
        snprintf(args, sizeof args, "run graphs/random10.edges --heads 2 --score dot --beta 2 "
                 "--q %s --k %s --v %s --attn %s --quiet", q, k, v, tmp_path(name));
        expect_cli(args, 0, 1, "");
    }
    /* .npy: [E, H] in edge order */
    ag_matrix_t a;
    ag_error_t err;
    ck_assert_int_eq(ag_matrix_read_npy(&a, tmp_path("w.npy"), &err), AG_OK);
    ck_assert_int_eq(a.rows, E);
    ck_assert_int_eq(a.cols, H);
    ck_assert_double_le(max_abs_diff_fd(a.data, W, E * H), 1e-5);
    /* .csv: the same numbers, row e*H + h */
    char *csv = read_text(tmp_path("w.csv")), *save_ptr = NULL, *line;
    strtok_r(csv, "\n", &save_ptr);
    for (int64_t r = 0; (line = strtok_r(NULL, "\n", &save_ptr)); r++) {
        double w = atof(strrchr(line, ',') + 1);
        ck_assert_double_eq_tol(w, a.data[r], 1e-8);
    }
    free(csv);
    /* .graphml: edge attributes per head and their mean */
    igraph_t g;
    ck_assert_int_eq(ag_graph_load(&g, tmp_path("w.graphml"), NULL, &err), AG_OK);
    ck_assert_int_eq(igraph_ecount(&g), E);
    for (int64_t e = 0; e < E; e++) {
        ck_assert_double_eq_tol(EAN(&g, "attn_h0", e), a.data[e * H], 1e-7);
        ck_assert_double_eq_tol(EAN(&g, "attn_h1", e), a.data[e * H + 1], 1e-7);
        ck_assert_double_eq_tol(EAN(&g, "attn_mean", e), (a.data[e * H] + a.data[e * H + 1]) / 2,
                                1e-7);
    }
    igraph_destroy(&g);
    ag_matrix_destroy(&a);
}
END_TEST

START_TEST(inspect_answers_from_the_same_weights)
{
    char args[1024], *out;
    snprintf(args, sizeof args, "run graphs/sentence.gml --heads 2 --rounds 2 --attn %s --quiet",
             tmp_path("s.csv"));
    expect_cli(args, 0, 1, "");
    double w[16];   /* mean over heads, w[dst*4 + src] */
    memset(w, 0, sizeof w);
    char *csv = read_text(tmp_path("s.csv")), *sp = NULL, *line;
    strtok_r(csv, "\n", &sp);
    while ((line = strtok_r(NULL, "\n", &sp))) {
        long long s, t, h;
        char a[16], b[16];
        double x;
        ck_assert_int_eq(sscanf(line, "%lld,%lld,%15[^,],%15[^,],%lld,%lf", &s, &t, a, b, &h, &x), 6);
        w[t * 4 + s] += x / 2;
    }
    free(csv);
    ck_assert_int_eq(run_cli("inspect graphs/sentence.gml --heads 2 --rounds 2 --who I --to nah",
                             &out, NULL), 0);
    char want[128];
    snprintf(want, sizeof want, "'I' attends 'nah': %.1f%% (head 0: ", 100 * w[1 * 4 + 0]);
    ck_assert_msg(strstr(out, want), "expected '%s' in:\n%s", want, out);
    free(out);
    ck_assert_int_eq(run_cli("inspect graphs/sentence.gml --heads 2 --rounds 2 --who 3", &out,
                             NULL), 0);   /* node id 3 is 'win' */
    ck_assert_ptr_nonnull(strstr(out, "'win' attends (mean over heads, strongest first):"));
    free(out);
    expect_cli("inspect graphs/sentence.gml --score sigmoid --who win", 0, 1,
               "'win' attends (mean over heads, strongest first; sigmoid weights need not sum "
               "to 100%):");
    /* --top 1: the largest mean weight of all; node 0 attends only itself: 100% */
    expect_cli("inspect graphs/sentence.gml --top 1", 0, 1, "'nah' attends 'nah': 100.0%");
    expect_cli("inspect graphs/sentence.gml --who nah --to win", 0, 1,
               "'nah' does not attend 'win': there is no edge win -> nah");
    expect_cli("inspect graphs/sentence.gml --who zzz", 1, 2, "no node is labelled 'zzz'");
    expect_cli("inspect --pattern causal --tokens 'a b a' --who a", 1, 2,
               "label 'a' names nodes 0 and 2");
    expect_cli("inspect graphs/sentence.gml", 2, 2, "ask one question");
    expect_cli("inspect graphs/en_ja_cross.graphml --who 勝つ", 0, 1,
               "'勝つ' attends nothing (no in-edges)");
}
END_TEST

START_TEST(rounds_outputs_are_consistent)
{
    char args[2048];
    /* the attention of round 2 of 3 is the attention of a 2-round run */
    snprintf(args, sizeof args, "run graphs/random10.edges --heads 2 --dim 8 --rounds 3 "
             "--attn-round 2 --attn %s --save-rounds %s --trace %s --messages %s --quiet",
             tmp_path("r2of3.csv"), tmp_path("rounds"), tmp_path("trace.csv"),
             tmp_path("m3.npy"));
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "run graphs/random10.edges --heads 2 --dim 8 --rounds 2 "
             "--attn %s --out %s --quiet", tmp_path("r2.csv"), tmp_path("x2.npy"));
    expect_cli(args, 0, 1, "");
    char *a = read_text(tmp_path("r2of3.csv")), *b = read_text(tmp_path("r2.csv"));
    ck_assert_str_eq(a, b);
    free(a), free(b);
    ag_matrix_t x2, saved, m3;
    ag_error_t err;
    ck_assert_int_eq(ag_matrix_read_npy(&x2, tmp_path("x2.npy"), &err), AG_OK);
    char path[700];
    snprintf(path, sizeof path, "%s/round-2.npy", tmp_path("rounds"));
    ck_assert_int_eq(ag_matrix_read_npy(&saved, path, &err), AG_OK);
    ck_assert_mem_eq(saved.data, x2.data, 10 * 8 * sizeof(float));
    ck_assert_int_eq(ag_matrix_read_npy(&m3, tmp_path("m3.npy"), &err), AG_OK);
    ck_assert_int_eq(m3.cols, 8);   /* H*d */
    snprintf(args, sizeof args, "run graphs/random10.edges --heads 2 --dim 8 --rounds 3 "
             "--head-messages %s --quiet", tmp_path("h3.npy"));
    expect_cli(args, 0, 1, "");
    ag_array_t h3;
    ck_assert_int_eq(ag_array_read_npy(&h3, tmp_path("h3.npy"), &err), AG_OK);
    ck_assert_int_eq(h3.ndim, 3);
    ck_assert_int_eq(h3.shape[0], 2);     /* [H, N, d] */
    ck_assert_int_eq(h3.shape[1], 10);
    ck_assert_int_eq(h3.shape[2], 4);
    for (int h = 0; h < 2; h++)           /* head h of node i = columns h*d.. of row i */
        for (int i = 0; i < 10; i++)
            ck_assert_mem_eq(h3.data + (h * 10 + i) * 4, m3.data + i * 8 + h * 4, 16);
    ag_array_destroy(&h3);
    ag_matrix_destroy(&x2), ag_matrix_destroy(&saved), ag_matrix_destroy(&m3);
    char *trace = read_text(tmp_path("trace.csv"));
    ck_assert_ptr_nonnull(strstr(trace, "round,change,entropy,max_weight\n1,"));
    ck_assert_ptr_nonnull(strstr(trace, "\n3,"));
    ck_assert_ptr_null(strstr(trace, "\n4,"));
    free(trace);
    /* --until stops early and says so */
    expect_cli("run graphs/hopfield.gml --features graphs/hopfield/x.npy --weights "
               "graphs/hopfield --score dot --beta 0.25 --no-residual --rounds 20 --until 1e-6",
               0, 1, "converged after round 5");
    expect_cli("run graphs/sentence.gml --rounds 3 --attn-round 4 --attn x.csv", 2, 2,
               "--attn-round 4, but the run has 3 rounds");
}
END_TEST

START_TEST(edge_bias_from_a_graph_attribute)
{
    const char *p = tmp_path("biased.gml");
    write_text(p, "graph [ directed 1 node [ id 0 ] node [ id 1 ] node [ id 2 ]\n"
                  "edge [ source 0 target 2 dist 0.5 ] edge [ source 1 target 2 dist -3 ]\n"
                  "edge [ source 2 target 2 dist 1.25 ] edge [ source 0 target 1 dist 2 ] ]");
    const int64_t src[] = {0, 1, 2, 0}, dst[] = {2, 2, 2, 1};
    const double bias[] = {0.5, -3, 1.25, 2};
    float Q[6], K[6], V[6];
    fill_uniform(Q, 6, 1, 1.0f), fill_uniform(K, 6, 2, 1.0f), fill_uniform(V, 6, 3, 1.0f);
    double M[6];
    const ref_score_t rs = {.kind = 0, .beta = 1, .slope = 0.2, .bias = bias};
    ref_attention_scored(3, src, dst, 4, Q, K, V, 1, 2, &rs, M, NULL);
    char args[2048];
    snprintf(args, sizeof args, "run %s --edge-bias dist --q %s --k %s --v %s --out %s --quiet",
             p, save("bq.npy", Q, 3, 2), save("bk.npy", K, 3, 2), save("bv.npy", V, 3, 2),
             tmp_path("bm.npy"));
    expect_cli(args, 0, 1, "");
    ag_matrix_t m;
    ag_error_t err;
    ck_assert_int_eq(ag_matrix_read_npy(&m, tmp_path("bm.npy"), &err), AG_OK);
    ck_assert_double_le(max_abs_diff_fd(m.data, M, 6), 2e-5);
    ag_matrix_destroy(&m);
    snprintf(args, sizeof args, "run %s --edge-bias nope", p);
    expect_cli(args, 1, 2, "edge attribute 'nope' is not in the graph");
    expect_cli("run --pattern causal --nodes 3 --edge-bias dist", 2, 2,
               "a pattern has no edge attributes");
}
END_TEST

START_TEST(per_round_weight_folders)
{
    char dir[600], sub[700];
    snprintf(dir, sizeof dir, "%s", tmp_path("layers"));
    mkdir(dir, 0755);
    ag_error_t err;
    for (int r = 1; r <= 2; r++) {
        ag_weights_t w;
        ck_assert_int_eq(ag_weights_random(&w, 4, 1, 4, 0, 10 + r, &err), AG_OK);
        snprintf(sub, sizeof sub, "%s/round-%d", dir, r);
        mkdir(sub, 0755);
        const char *names[] = {"wq", "wk", "wv", "wo"};
        const float *mats[] = {w.wq, w.wk, w.wv, w.wo};
        for (int m = 0; m < 4; m++) {
            char path[800];
            snprintf(path, sizeof path, "%s/%s.npy", sub, names[m]);
            ck_assert_int_eq(ag_npy_write_f32(path, mats[m], 4, 4, &err), AG_OK);
        }
        ag_weights_destroy(&w);
    }
    char args[1024];
    snprintf(args, sizeof args, "run graphs/sentence.gml --dim 4 --weights %s", dir);
    expect_cli(args, 0, 1, "rounds: 2 (D=4, 1 head of width 4, scaled-dot scores, gather "
                           "kernel, a layer per round");
    snprintf(args, sizeof args, "run graphs/sentence.gml --dim 4 --weights %s --rounds 3", dir);
    expect_cli(args, 1, 2, "--rounds 3, but");
}
END_TEST

START_TEST(score_option_errors)
{
    expect_cli("run graphs/sentence.gml --score foo", 2, 2, "--score 'foo': expected");
    expect_cli("run graphs/sentence.gml --beta -0.5", 2, 2, "--beta '-0.5' is not a number >= 0");
    expect_cli("run graphs/sentence.gml --beta x", 2, 2, "--beta 'x' is not a number");
    expect_cli("run graphs/sentence.gml --score linear --beta 2", 2, 2,
               "--beta applies to softmax scores; linear scores");
    expect_cli("run graphs/sentence.gml --norm batch", 2, 2, "--norm 'batch'");
    expect_cli("run graphs/sentence.gml --q a --k b --v c --rounds 2", 2, 2,
               "round options");
    for (int k = 0; k < 7; k++) {
        static const char *kinds[] = {"scaled-dot", "dot", "cosine", "additive", "gatv2",
                                      "sigmoid", "linear"};
        char args[256];
        snprintf(args, sizeof args, "run graphs/patches16.net --score %s --heads 2 --rounds 2 "
                 "--norm layer --posenc sinusoidal --quiet", kinds[k]);
        expect_cli(args, 0, 1, "");
    }
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, help_and_version);
    tcase_add_test(tc, usage_errors_exit_2);
    tcase_add_test(tc, summary_of_the_shipped_example);
    tcase_add_test(tc, raw_attention_matches_reference);
    tcase_add_test(tc, rounds_with_weights_match_reference);
    tcase_add_test(tc, bad_inputs_exit_1_with_a_clear_message);
    tcase_add_test(tc, bad_graphs_exit_1);
    tcase_add_test(tc, failed_run_leaves_old_outputs_alone);
    tcase_add_test(tc, csv_quotes_labels);
    tcase_add_test(tc, utf8_labels_in_summary);
    tcase_add_test(tc, pattern_export_and_reload);
    tcase_add_test(tc, run_on_a_pattern_equals_the_same_graph);
    tcase_add_test(tc, compare_table_and_csv);
    tcase_add_test(tc, compare_errors);
    tcase_add_test(tc, attention_exports_agree);
    tcase_add_test(tc, inspect_answers_from_the_same_weights);
    tcase_add_test(tc, rounds_outputs_are_consistent);
    tcase_add_test(tc, edge_bias_from_a_graph_attribute);
    tcase_add_test(tc, per_round_weight_folders);
    tcase_add_test(tc, score_option_errors);
    suite_add_tcase(s, tc);
    return s;
}
