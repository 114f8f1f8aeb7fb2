/*
 * Graph files as people bring them: byte-order marks, undirected edge lists,
 * self-loops added or removed, GraphML round trips, edge attributes.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/graphml.h"   /* private: the GraphML checks */
#include "testutil.h"

#define BOM "\xEF\xBB\xBF"

/* One small graph in each text format; every one has 3 nodes a, b, c. */
static const struct {
    const char *name, *text;
} samples[] = {
    {"s.edges", "0 1\n1 2\n"},
    {"s.ncol", "a b\nb c\n"},
    {"s.lgl", "# a\nb\n# b\nc\n"},
    {"s.gml", "graph [\n directed 1\n node [ id 0 label \"a\" ]\n node [ id 1 label \"b\" ]\n"
              " node [ id 2 label \"c\" ]\n edge [ source 0 target 1 ]\n"
              " edge [ source 1 target 2 ]\n]\n"},
    {"s.net", "*Vertices 3\n1 \"a\"\n2 \"b\"\n3 \"c\"\n*Arcs\n1 2\n2 3\n"},
    {"s.graphml", "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                  "<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\">\n"
                  "<key id=\"label\" for=\"node\" attr.name=\"label\" attr.type=\"string\"/>\n"
                  "<graph edgedefault=\"directed\">\n"
                  "<node id=\"x\"><data key=\"label\">a</data></node>\n"
                  "<node id=\"y\"><data key=\"label\">b</data></node>\n"
                  "<node id=\"z\"><data key=\"label\">c</data></node>\n"
                  "<edge source=\"x\" target=\"y\"/><edge source=\"y\" target=\"z\"/>\n"
                  "</graph>\n</graphml>\n"},
};

/* Loads path and returns its labels joined by spaces. */
static char *load_summary(const char *path, int64_t *n_nodes, int64_t *n_edges)
{
    igraph_t g;
    ag_error_t err;
    int rc = ag_graph_load(&g, path, NULL, &err);
    ck_assert_msg(rc == AG_OK, "%s: %s", path, err.msg);
    *n_nodes = igraph_vcount(&g);
    *n_edges = igraph_ecount(&g);
    ag_labels_t labels;
    ck_assert_int_eq(ag_labels_from_graph(&labels, &g, &err), AG_OK);
    char *joined = calloc(1, 1024);
    for (int64_t i = 0; i < labels.n; i++)
        snprintf(joined + strlen(joined), 1024 - strlen(joined), "%s%s", i ? " " : "",
                 labels.str[i]);
    ag_labels_destroy(&labels);
    igraph_destroy(&g);
    return joined;
}

START_TEST(bom_is_skipped_in_every_text_format)
{
    for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++) {
        char bom_name[64], text[2048];
        snprintf(bom_name, sizeof bom_name, "bom_%s", samples[k].name);
        snprintf(text, sizeof text, BOM "%s", samples[k].text);
        write_text(tmp_path(samples[k].name), samples[k].text);
        write_text(tmp_path(bom_name), text);
        int64_t n0, e0, n1, e1;
        char *plain = load_summary(tmp_path(samples[k].name), &n0, &e0);
        char *bom = load_summary(tmp_path(bom_name), &n1, &e1);
        ck_assert_int_eq(n0, 3);
        ck_assert_int_eq(e0, 2);
        ck_assert_msg(n1 == n0 && e1 == e0, "%s: %lld nodes, %lld edges with a BOM; %lld, %lld "
                      "without", samples[k].name, (long long)n1, (long long)e1, (long long)n0,
                      (long long)e0);
        ck_assert_str_eq(bom, plain);
        free(plain);
        free(bom);
    }
}
END_TEST

START_TEST(bom_is_skipped_in_labels_file)
{
    write_text(tmp_path("bom_labels.txt"), BOM "first\nsecond\nthird\n");
    char args[1024], *out;
    snprintf(args, sizeof args, "run --pattern causal --labels-file %s --dim 4",
             tmp_path("bom_labels.txt"));
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    ck_assert_msg(strstr(out, "'first' attends 'first'"), "%s", out);
    free(out);
}
END_TEST

START_TEST(graph_and_labels_from_a_fifo)
{
    /* a FIFO cannot seek back: nothing before or after a byte-order mark is lost */
    const char *texts[] = {"0 1\n1 2\n", BOM "0 1\n1 2\n"};
    for (int k = 0; k < 2; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s", tmp_path("pipe.edges"));
        int pid = fifo_writer(path, texts[k]);
        igraph_t g;
        ag_error_t err;
        int rc = ag_graph_load(&g, path, NULL, &err);
        fifo_wait(pid);
        ck_assert_msg(rc == AG_OK, "%s", err.msg);
        ck_assert_int_eq(igraph_vcount(&g), 3);
        ck_assert_int_eq(igraph_ecount(&g), 2);
        igraph_destroy(&g);

        /* GraphML too: its id check and igraph read the same bytes */
        char text[2048];
        snprintf(text, sizeof text, "%s%s", k ? BOM : "", samples[5].text);
        snprintf(path, sizeof path, "%s", tmp_path("pipe.graphml"));
        pid = fifo_writer(path, text);
        int64_t n, e;
        char *labels = load_summary(path, &n, &e);
        fifo_wait(pid);
        ck_assert_str_eq(labels, "a b c");
        ck_assert_int_eq(e, 2);
        free(labels);

        /* the CLI: like `attngraph run <(printf '10 1\n1 2\n') --format edgelist` */
        snprintf(path, sizeof path, "%s", tmp_path("pipe_cli"));
        pid = fifo_writer(path, k ? BOM "10 1\n1 2\n" : "10 1\n1 2\n");
        char args[1024];
        snprintf(args, sizeof args, "run %s --format edgelist --dim 4", path);
        char *out, *errs;
        rc = run_cli(args, &out, &errs);
        fifo_wait(pid);
        ck_assert_msg(rc == 0 && strstr(out, ": 11 nodes, 2 edges"), "%s%s", out, errs);
        free(out), free(errs);

        /* a labels file */
        snprintf(path, sizeof path, "%s", tmp_path("pipe_labels"));
        pid = fifo_writer(path, k ? BOM "first\nsecond\nthird\n" : "first\nsecond\nthird\n");
        snprintf(args, sizeof args, "run --pattern causal --labels-file %s --dim 4", path);
        rc = run_cli(args, &out, &errs);
        fifo_wait(pid);
        ck_assert_msg(rc == 0 && strstr(out, "'first' attends 'first'") &&
                      strstr(out, "'third' attends"), "%s%s", out, errs);
        free(out), free(errs);
    }
}
END_TEST

/* ---- directions ---- */

static int load_as(igraph_t *g, const char *name, const char *text, ag_direction_t direction,
                   ag_error_t *err)
{
    write_text(tmp_path(name), text);
    ag_load_opts_t opts = {.direction = direction};
    return ag_graph_load(g, tmp_path(name), &opts, err);
}

START_TEST(undirected_edge_list_gives_two_messages_per_edge)
{
    /* a path 0-1-2-3 and a self-loop at 3: 3 edges each way, the loop once */
    static const char *const files[][2] = {
        {"u.edges", "0 1\n1 2\n2 3\n3 3\n"},
        {"u.ncol", "0 1\n1 2\n2 3\n3 3\n"},
        {"u.lgl", "# 0\n1\n# 1\n2\n# 2\n3\n# 3\n3\n"},
    };
    for (int k = 0; k < 3; k++) {
        igraph_t g;
        ag_error_t err;
        ag_nbhd_t nb;
        ck_assert_int_eq(load_as(&g, files[k][0], files[k][1], AG_EDGES_UNDIRECTED, &err),
                         AG_OK);
        ck_assert_msg(!igraph_is_directed(&g), "%s", files[k][0]);
        ck_assert_int_eq(igraph_ecount(&g), 4);
        ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
        ck_assert_int_eq(nb.n_edges, 2 * 3 + 1);
        /* node 0 now hears from 1 (it heard nothing when read as directed) */
        ck_assert_int_eq(nb.edge_ptr[1] - nb.edge_ptr[0], 1);
        ag_nbhd_destroy(&nb);
        igraph_destroy(&g);
        /* the default and --directed: one message per edge */
        ck_assert_int_eq(load_as(&g, files[k][0], files[k][1], AG_EDGES_DIRECTED, &err), AG_OK);
        ck_assert(igraph_is_directed(&g));
        ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
        ck_assert_int_eq(nb.n_edges, 4);
        ag_nbhd_destroy(&nb);
        igraph_destroy(&g);
    }
}
END_TEST

START_TEST(formats_that_state_direction_refuse_a_contradiction)
{
    igraph_t g;
    ag_error_t err;
    const char *gml_directed = "graph [ directed 1 node [ id 0 ] node [ id 1 ] "
                               "edge [ source 0 target 1 ] ]\n";
    const char *gml_undirected = "graph [ node [ id 0 ] node [ id 1 ] "
                                 "edge [ source 0 target 1 ] ]\n";
    ck_assert_fails_with(load_as(&g, "d.gml", gml_directed, AG_EDGES_UNDIRECTED, &err), err,
                         AG_EINVAL, "says its edges are directed");
    ck_assert_fails_with(load_as(&g, "u.gml", gml_undirected, AG_EDGES_DIRECTED, &err), err,
                         AG_EINVAL, "says its edges are undirected");
    ck_assert_int_eq(load_as(&g, "d.gml", gml_directed, AG_EDGES_DIRECTED, &err), AG_OK);
    igraph_destroy(&g);
    ck_assert_int_eq(load_as(&g, "u.gml", gml_undirected, AG_EDGES_UNDIRECTED, &err), AG_OK);
    igraph_destroy(&g);
    const char *net = "*Vertices 2\n*Arcs\n1 2\n";
    ck_assert_fails_with(load_as(&g, "d.net", net, AG_EDGES_UNDIRECTED, &err), err, AG_EINVAL,
                         "pajek file says its edges are directed");
    ck_assert_fails_with(load_as(&g, "d.graphml", samples[5].text, AG_EDGES_UNDIRECTED, &err),
                         err, AG_EINVAL, "graphml file says its edges are directed");
}
END_TEST

START_TEST(cli_undirected_and_directed)
{
    write_text(tmp_path("karate_like.edges"), "0 1\n0 2\n1 2\n2 3\n");
    char args[1024];
    snprintf(args, sizeof args, "run %s --undirected --dim 4", tmp_path("karate_like.edges"));
    expect_cli(args, 0, 1, "(edgelist, undirected): 4 nodes, 4 edges, 8 messages");
    snprintf(args, sizeof args, "run %s --dim 4", tmp_path("karate_like.edges"));
    expect_cli(args, 0, 1, "'0' attends nothing");
    snprintf(args, sizeof args, "run %s --directed --dim 4", tmp_path("karate_like.edges"));
    expect_cli(args, 0, 1, "(edgelist, directed): 4 nodes, 4 edges, 4 messages");
    expect_cli("run graphs/sentence.gml --undirected", 1, 2, "says its edges are directed");
    expect_cli("run --pattern causal --nodes 3 --undirected", 2, 2, "are for graph files");
}
END_TEST

/* ---- self-loops on graph files ---- */

/* Counts, straight from an edge list's text, its edges and self edges and
   which nodes have one. */
static void count_loops(const char *path, int64_t N, int64_t *edges, int64_t *loops,
                        int *has_loop)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    *edges = *loops = 0;
    memset(has_loop, 0, (size_t)N * sizeof *has_loop);
    while (fgets(line, sizeof line, f)) {
        long long u, v;
        if (line[0] == '#' || sscanf(line, "%lld %lld", &u, &v) != 2)
            continue;
        (*edges)++;
        if (u == v)
            (*loops)++, has_loop[u] = 1;
    }
    fclose(f);
}

/* Asserts nb is well formed: sources ascend in each destination, runs cover the slots. */
static void assert_ascending(const ag_nbhd_t *nb)
{
    int64_t *src = malloc((size_t)(nb->n_edges + 1) * sizeof *src);
    ag_nbhd_sources(nb, 0, nb->n_nodes, src);
    ck_assert_int_eq(nb->edge_ptr[nb->n_nodes], nb->n_edges);
    for (int64_t i = 0; i < nb->n_nodes; i++)
        for (int64_t s = nb->edge_ptr[i] + 1; s < nb->edge_ptr[i + 1]; s++)
            ck_assert_int_le(src[s - 1], src[s]);
    free(src);
}

START_TEST(self_loops_on_and_off_on_a_graph_file)
{
    const int64_t N = 10;
    int64_t edges, loops;
    int has_loop[10];
    count_loops("graphs/random10.edges", N, &edges, &loops, has_loop);
    int64_t without = 0;
    for (int64_t i = 0; i < N; i++)
        without += !has_loop[i];
    ck_assert_int_gt(loops, 0);
    ck_assert_int_gt(without, 0);

    igraph_t g;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/random10.edges", NULL, &err), AG_OK);
    for (int mode = AG_SELF_KEEP; mode <= AG_SELF_OFF; mode++) {
        ag_nbhd_t nb;
        ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
        ck_assert_int_eq(ag_nbhd_self_loops(&nb, (ag_self_loops_t)mode, &err), AG_OK);
        const int64_t expect = mode == AG_SELF_ON ? edges + without
                               : mode == AG_SELF_OFF ? edges - loops : edges;
        ck_assert_int_eq(nb.n_edges, expect);
        assert_ascending(&nb);
        int64_t *src = malloc((size_t)nb.n_edges * sizeof *src);
        ag_nbhd_sources(&nb, 0, N, src);
        int64_t added = 0;
        for (int64_t i = 0; i < N; i++) {
            int selfs = 0;
            for (int64_t s = nb.edge_ptr[i]; s < nb.edge_ptr[i + 1]; s++) {
                selfs += src[s] == i;
                if (nb.edge_id[s] < 0) {
                    ck_assert_int_eq(src[s], i);   /* only loops lack an edge id */
                    added++;
                } else {
                    ck_assert_int_eq(IGRAPH_FROM(&g, nb.edge_id[s]), src[s]);
                    ck_assert_int_eq(IGRAPH_TO(&g, nb.edge_id[s]), i);
                }
            }
            if (mode == AG_SELF_ON)
                ck_assert_int_ge(selfs, 1);
            if (mode == AG_SELF_OFF)
                ck_assert_int_eq(selfs, 0);
        }
        ck_assert_int_eq(added, mode == AG_SELF_ON ? without : 0);

        /* the graph's edge order: the file's edges, then the added loops by node */
        ag_edge_msg_t *msgs;
        int64_t *slot;
        ck_assert_int_eq(ag_edge_order(&nb, &msgs, &slot, &err), AG_OK);
        int64_t last = -1;
        for (int64_t k = 0; k < nb.n_edges; k++) {
            if (k >= nb.n_edges - added) {
                ck_assert_int_eq(msgs[k].edge_id, -1);
                ck_assert_int_eq(msgs[k].src, msgs[k].dst);
                ck_assert_int_gt(msgs[k].dst, last);
                last = msgs[k].dst;
            } else {
                ck_assert_int_ge(msgs[k].edge_id, 0);
            }
            ck_assert_int_eq(src[slot[k]], msgs[k].src);
        }
        /* an edge attribute gives an added loop no bias */
        float *bias;
        igraph_vector_t w;
        igraph_vector_init(&w, igraph_ecount(&g));
        igraph_vector_fill(&w, 2.5);
        SETEANV(&g, "w", &w);
        igraph_vector_destroy(&w);
        ck_assert_int_eq(ag_edge_attribute(&bias, &g, &nb, "w", &err), AG_OK);
        for (int64_t s = 0; s < nb.n_edges; s++)
            ck_assert_float_eq(bias[s], nb.edge_id[s] < 0 ? 0.0f : 2.5f);
        free(bias);
        free(msgs), free(slot), free(src);
        ag_nbhd_destroy(&nb);
    }
    igraph_destroy(&g);
}
END_TEST

START_TEST(cli_self_loops_on_a_graph_file)
{
    ag_error_t err;
    expect_cli("run graphs/random10.edges --self-loops on --dim 4", 0, 1,
               "(edgelist, directed, self-loops on): 10 nodes, 40 edges, 47 messages");
    expect_cli("run graphs/random10.edges --self-loops off --dim 4", 0, 1,
               "40 edges, 36 messages");
    /* node 9 hears nobody; with loops on it attends to itself */
    expect_cli("run graphs/random10.edges --self-loops on --dim 4", 0, 1, "'9' attends '9': 100.0%");

    /* --attn: the added loops come after the graph's 40 edges, marked added */
    char args[1024];
    const char *csv = tmp_path("loops_attn.csv");
    snprintf(args, sizeof args, "run graphs/random10.edges --self-loops on --dim 4 --quiet "
             "--attn %s", csv);
    expect_cli(args, 0, 1, "");
    char *text = read_text(csv);
    ck_assert_ptr_nonnull(text);
    ck_assert(strncmp(text, "src,dst,src_label,dst_label,head,weight,added\n", 46) == 0);
    int rows = 0, added = 0;
    for (char *p = strchr(text, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
        rows++;
        const char *end = strchr(p + 1, '\n');
        if (end && end[-1] == '1' && end[-2] == ',') {
            added++;
            long long u, v;
            ck_assert_int_eq(sscanf(p + 1, "%lld,%lld", &u, &v), 2);
            ck_assert_int_eq(u, v);
        } else {
            ck_assert_int_eq(added, 0);   /* no graph edge after an added loop */
        }
    }
    ck_assert_int_eq(rows, 47);
    ck_assert_int_eq(added, 7);
    free(text);

    /* GraphML: the loops become edges with added = 1 */
    const char *gml = tmp_path("loops_attn.graphml");
    snprintf(args, sizeof args, "run graphs/random10.edges --self-loops on --dim 4 --quiet "
             "--attn %s", gml);
    expect_cli(args, 0, 1, "");
    igraph_t g;
    ck_assert_int_eq(ag_graph_load(&g, gml, NULL, &err), AG_OK);
    ck_assert_int_eq(igraph_ecount(&g), 47);
    for (int64_t e = 0; e < 47; e++) {
        ck_assert_int_eq(EAN(&g, "added", e), e >= 40);
        if (e >= 40)
            ck_assert_int_eq(IGRAPH_FROM(&g, e), IGRAPH_TO(&g, e));
    }
    igraph_destroy(&g);

    /* .npy: [E, H], the added loops' rows last */
    const char *npy = tmp_path("loops_attn.npy");
    snprintf(args, sizeof args, "run graphs/random10.edges --self-loops on --dim 4 --heads 2 "
             "--quiet --attn %s", npy);
    expect_cli(args, 0, 1, "");
    ag_matrix_t m;
    ck_assert_int_eq(ag_matrix_read_npy(&m, npy, &err), AG_OK);
    ck_assert_int_eq(m.rows, 47);
    ck_assert_int_eq(m.cols, 2);
    ck_assert_float_eq(m.data[2 * 46], 1.0f);   /* node 9 has only its added loop */
    ag_matrix_destroy(&m);

    /* an edge bias still works: the added loops get none */
    write_text(tmp_path("w.ncol"), "a b 0.5\nb c 1.5\n");
    snprintf(args, sizeof args, "run %s --self-loops on --edge-bias weight --dim 4",
             tmp_path("w.ncol"));
    expect_cli(args, 0, 1, "'a' attends 'a': 100.0%");
    snprintf(args, sizeof args, "run %s --edge-bias wieght --dim 4", tmp_path("w.ncol"));
    expect_cli(args, 1, 2, "w.ncol (ncol, directed): --edge-bias: edge attribute 'wieght' is not "
               "in the graph; its numeric edge attributes: weight");
}
END_TEST

/* Writes a 1-D int64 .npy. */
static void write_index_npy(const char *path, const int64_t *v, int64_t n)
{
    char shape[32];
    snprintf(shape, sizeof shape, "(%lld,)", (long long)n);
    write_npy_raw(path, "<i8", 0, shape, v, (size_t)n * sizeof *v);
}

START_TEST(cli_self_loops_on_csr_keep_the_edge_order)
{
    /* edges in the user's order: 1->0, 2->1, 0->2 (node 0's source first) */
    const int64_t indptr[] = {0, 1, 2, 3}, indices[] = {1, 2, 0};
    write_index_npy(tmp_path("loops_ptr.npy"), indptr, 4);
    write_index_npy(tmp_path("loops_idx.npy"), indices, 3);
    char csr[1024], args[2048];
    snprintf(csr, sizeof csr, "%s,%s", tmp_path("loops_ptr.npy"), tmp_path("loops_idx.npy"));

    /* on: the three edges as given, then the added loops by node, marked added=1 */
    char csv[512];   /* tmp_path's buffers are reused */
    snprintf(csv, sizeof csv, "%s", tmp_path("csr_loops.csv"));
    snprintf(args, sizeof args, "run --csr %s --self-loops on --dim 4 --quiet --attn %s", csr,
             csv);
    expect_cli(args, 0, 1, "");
    static const int64_t on[6][3] = {{1, 0, 0}, {2, 1, 0}, {0, 2, 0},
                                     {0, 0, 1}, {1, 1, 1}, {2, 2, 1}};
    int64_t rows[16][3];
    ck_assert_int_eq(attn_csv_rows(csv, rows, 16), 6);
    for (int k = 0; k < 6; k++)
        ck_assert_msg(rows[k][0] == on[k][0] && rows[k][1] == on[k][1] && rows[k][2] == on[k][2],
                      "row %d: %lld,%lld added=%lld; expected %lld,%lld added=%lld", k,
                      (long long)rows[k][0], (long long)rows[k][1], (long long)rows[k][2],
                      (long long)on[k][0], (long long)on[k][1], (long long)on[k][2]);

    /* .npy: the same rows; node 2's only other source is 0, and its loop is last */
    const char *npy = tmp_path("csr_loops.npy");
    snprintf(args, sizeof args, "run --csr %s --self-loops on --dim 4 --quiet --attn %s", csr,
             npy);
    expect_cli(args, 0, 1, "");
    ag_matrix_t m;
    ag_error_t err;
    ck_assert_int_eq(ag_matrix_read_npy(&m, npy, &err), AG_OK);
    ck_assert_int_eq(m.rows, 6);
    for (int k = 0; k < 3; k++)   /* each node: its edge's and its loop's weights sum to 1 */
        ck_assert_float_eq_tol(m.data[on[k][1]] + m.data[3 + on[k][1]], 1.0f, 1e-5f);
    char *text = read_text(csv);
    float w0;
    ck_assert_int_eq(sscanf(strchr(text, '\n') + 1, "%*d,%*d,%*[^,],%*[^,],%*d,%g", &w0),
                     1);
    ck_assert_float_eq_tol(m.data[0], w0, 1e-6f);   /* row 0 is the edge 1->0 in both */
    free(text);
    ag_matrix_destroy(&m);

    /* GraphML: three edges, then three loops with added = 1 */
    const char *gml = tmp_path("csr_loops.graphml");
    snprintf(args, sizeof args, "run --csr %s --self-loops on --dim 4 --quiet --attn %s", csr,
             gml);
    expect_cli(args, 0, 1, "");
    igraph_t g;
    ck_assert_int_eq(ag_graph_load(&g, gml, NULL, &err), AG_OK);
    ck_assert_int_eq(igraph_ecount(&g), 6);
    for (int64_t e = 0; e < 6; e++) {
        ck_assert_int_eq(IGRAPH_FROM(&g, e), on[e][0]);
        ck_assert_int_eq(IGRAPH_TO(&g, e), on[e][1]);
        ck_assert_int_eq(EAN(&g, "added", e), on[e][2]);
    }
    igraph_destroy(&g);

    /* off: a CSR with loops (slots 0 and 3) loses them; the rest keep their order */
    const int64_t ptr2[] = {0, 2, 3, 5}, idx2[] = {0, 1, 2, 0, 2};
    write_index_npy(tmp_path("loops_ptr2.npy"), ptr2, 4);
    write_index_npy(tmp_path("loops_idx2.npy"), idx2, 5);
    snprintf(args, sizeof args, "run --csr %s,%s --self-loops off --dim 4 --quiet --attn %s",
             tmp_path("loops_ptr2.npy"), tmp_path("loops_idx2.npy"), csv);
    expect_cli(args, 0, 1, "");
    static const int64_t off[3][2] = {{1, 0}, {2, 1}, {0, 2}};
    ck_assert_int_eq(attn_csv_rows(csv, rows, 16), 3);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(rows[k][0], off[k][0]);
        ck_assert_int_eq(rows[k][1], off[k][1]);
        ck_assert_int_eq(rows[k][2], -1);   /* nothing added: no added column */
    }
    /* and --self-loops off on the loop-free CSR changes nothing */
    snprintf(args, sizeof args, "run --csr %s --self-loops off --dim 4 --quiet --attn %s", csr,
             csv);
    expect_cli(args, 0, 1, "");
    ck_assert_int_eq(attn_csv_rows(csv, rows, 16), 3);
    for (int k = 0; k < 3; k++)
        ck_assert(rows[k][0] == on[k][0] && rows[k][1] == on[k][1] && rows[k][2] == -1);
    /* a bad entry is named by its file and its place in it (as attngraph-mpi names it) */
    const int64_t bad[] = {1, 2, 7}, unsorted[] = {2, 0, 1, 0, 2};
    write_index_npy(tmp_path("bad_idx.npy"), bad, 3);
    snprintf(args, sizeof args, "run --csr %s,%s --dim 4 --quiet", tmp_path("loops_ptr.npy"),
             tmp_path("bad_idx.npy"));
    expect_cli(args, 1, 2, "bad_idx.npy: indices[2] is 7; expected a node in 0..2");
    write_index_npy(tmp_path("bad_idx.npy"), unsorted, 5);
    snprintf(args, sizeof args, "run --csr %s,%s --dim 4 --quiet", tmp_path("loops_ptr2.npy"),
             tmp_path("bad_idx.npy"));
    expect_cli(args, 1, 2, "bad_idx.npy: sources of node 0 are not ascending (indices[1] = 0 "
               "after 2)");
}
END_TEST

START_TEST(csr_self_loops_give_slot_ids)
{
    /* the library: kept slots keep their CSR index, added loops get -1 */
    const int64_t indptr[] = {0, 2, 3, 5}, indices[] = {0, 1, 2, 0, 2};
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, 3, indptr, indices, &err), AG_OK);
    ck_assert_ptr_null(nb.edge_id);
    ck_assert_int_eq(ag_nbhd_self_loops(&nb, AG_SELF_OFF, &err), AG_OK);
    ck_assert_ptr_nonnull(nb.edge_id);
    static const int64_t kept[] = {1, 2, 3};
    ck_assert_int_eq(nb.n_edges, 3);
    for (int s = 0; s < 3; s++)
        ck_assert_int_eq(nb.edge_id[s], kept[s]);
    /* an edge attribute needs the graph the ids belong to: a CSR has none */
    igraph_t g;
    const int64_t src[] = {0}, dst[] = {1};
    build_graph(&g, 3, src, dst, 1, 1);
    SETEAN(&g, "w", 0, 1.0);
    float *bias;
    ck_assert_fails_with(ag_edge_attribute(&bias, &g, &nb, "w", &err), err, AG_EINVAL,
                         "has 1 edge");
    igraph_destroy(&g);
    ag_nbhd_destroy(&nb);

    const int64_t ptr1[] = {0, 1, 2, 3}, idx1[] = {1, 2, 0};
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, 3, ptr1, idx1, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_self_loops(&nb, AG_SELF_ON, &err), AG_OK);
    static const int64_t ids[] = {-1, 0, -1, 1, 2, -1};   /* slots: 0<-0,1 1<-1,2 2<-0,2 */
    ck_assert_int_eq(nb.n_edges, 6);
    for (int s = 0; s < 6; s++)
        ck_assert_int_eq(nb.edge_id[s], ids[s]);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* ---- GraphML round trips ---- */

static void assert_joined_labels(const char *name, const char *expected)
{
    int64_t n, e;
    char *got = load_summary(tmp_path(name), &n, &e);
    ck_assert_msg(strcmp(got, expected) == 0, "%s: labels '%s', expected '%s'", name, got,
                  expected);
    free(got);
}

/* Asserts a GraphML file declares no `id` vertex attribute. */
static void assert_no_id_key(const char *path)
{
    char *text = read_text(path);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(!strstr(text, "attr.name=\"id\""), "%s declares an id attribute:\n%s", path,
                  text);
    free(text);
}

START_TEST(graphml_round_trip_without_id)
{
    /* ids n0, n1, n2 and no labels: numbered like an edge list */
    write_text(tmp_path("plain.graphml"),
               "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\">\n"
               "<graph edgedefault=\"directed\">\n"
               "<node id=\"n0\"/><node id=\"n1\"/><node id=\"n2\"/>\n"
               "<edge source=\"n0\" target=\"n1\"/><edge source=\"n1\" target=\"n2\"/>\n"
               "</graph>\n</graphml>\n");
    assert_joined_labels("plain.graphml", "0 1 2");
    write_text(tmp_path("plain.edges"), "0 1\n1 2\n");
    assert_joined_labels("plain.edges", "0 1 2");

    /* ids that mean something name the nodes, and survive a write without labels */
    write_text(tmp_path("named.graphml"),
               "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\">\n"
               "<graph edgedefault=\"directed\">\n"
               "<node id=\"alice\"/><node id=\"bob\"/>\n"
               "<edge source=\"alice\" target=\"bob\"/>\n"
               "</graph>\n</graphml>\n");
    assert_joined_labels("named.graphml", "alice bob");
    const char *inputs[][2] = {{"named.graphml", "alice bob"}, {"plain.graphml", "0 1 2"}};
    for (int k = 0; k < 2; k++) {
        igraph_t g;
        ag_error_t err;
        ck_assert_int_eq(ag_graph_load(&g, tmp_path(inputs[k][0]), NULL, &err), AG_OK);
        char out[64];
        snprintf(out, sizeof out, "rt_%s", inputs[k][0]);
        ck_assert_int_eq(ag_graph_write(&g, tmp_path(out), AG_FORMAT_GRAPHML, NULL, &err), AG_OK);
        igraph_destroy(&g);
        assert_no_id_key(tmp_path(out));
        assert_joined_labels(out, inputs[k][1]);
    }

    /* the CLI's GraphML exports carry labels, not ids */
    char args[1024];
    snprintf(args, sizeof args, "run graphs/en_ja_cross.graphml --dim 4 --quiet --attn %s",
             tmp_path("cross_attn.graphml"));
    expect_cli(args, 0, 1, "");
    assert_no_id_key(tmp_path("cross_attn.graphml"));
    int64_t n, e;
    char *orig = load_summary("graphs/en_ja_cross.graphml", &n, &e);
    char *back = load_summary(tmp_path("cross_attn.graphml"), &n, &e);
    ck_assert_str_eq(back, orig);
    free(orig), free(back);
    snprintf(args, sizeof args, "pattern causal --nodes 3 --out %s", tmp_path("c.graphml"));
    expect_cli(args, 0, 1, "");
    assert_no_id_key(tmp_path("c.graphml"));
    assert_joined_labels("c.graphml", "0 1 2");
}
END_TEST

START_TEST(graphml_in_memory_over_int_max_is_refused)
{
    /* libxml2 takes the length as an int: 4 GiB + n would be read as n bytes */
    const char *text = samples[5].text;
    ag_error_t err;
    ck_assert_int_eq(ag_i_graphml_check_ids("-", text, strlen(text), 100, &err), AG_OK);
    const size_t huge = ((size_t)1 << 32) + strlen(text);
    ck_assert_fails_with(ag_i_graphml_check_ids("-", text, huge, 100, &err), err, AG_ELIMIT,
                         "at most 2147483647 can be checked in memory");
    ck_assert_fails_with(ag_i_graphml_check_ids("-", text, (size_t)INT_MAX + 1, 100, &err), err,
                         AG_ELIMIT, "2147483648 bytes of GraphML");
}
END_TEST

START_TEST(counts_of_one_are_singular)
{
    igraph_t g;
    ag_error_t err;
    ag_load_opts_t one = {.max_nodes = 1};
    write_text(tmp_path("two.edges"), "0 1\n");
    ck_assert_fails_with(ag_graph_load(&g, tmp_path("two.edges"), &one, &err), err, AG_ELIMIT,
                         "implies more than 1 node;");
    write_text(tmp_path("two.net"), "*Vertices 2\n*Arcs\n1 2\n");
    ck_assert_fails_with(ag_graph_load(&g, tmp_path("two.net"), &one, &err), err, AG_ELIMIT,
                         "is more than 1 node;");
    write_text(tmp_path("two.graphml"), samples[5].text);
    ck_assert_fails_with(ag_graph_load(&g, tmp_path("two.graphml"), &one, &err), err,
                         AG_ELIMIT, "more than 1 node;");

    /* labels against nodes, each side one */
    const int64_t src[] = {0}, dst[] = {1};
    build_graph(&g, 2, src, dst, 1, 1);
    ag_labels_t labels;
    ck_assert_int_eq(ag_labels_numbered(&labels, 1, &err), AG_OK);
    ck_assert_fails_with(ag_graph_write(&g, tmp_path("w.gml"), AG_FORMAT_GML, &labels, &err),
                         err, AG_EINVAL, ": 1 label for 2 nodes");
    ag_labels_destroy(&labels);
    igraph_destroy(&g);
    build_graph(&g, 1, src, src, 1, 1);
    ck_assert_int_eq(ag_labels_numbered(&labels, 2, &err), AG_OK);
    ck_assert_fails_with(ag_graph_write(&g, tmp_path("w.gml"), AG_FORMAT_GML, &labels, &err),
                         err, AG_EINVAL, ": 2 labels for 1 node");
    ag_labels_destroy(&labels);

    /* an edge limit of one */
    ag_nbhd_t nb;
    const int64_t ptr[] = {0, 2}, idx[] = {0, 0};
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, 1, ptr, idx, &err), AG_OK);
    igraph_t big;
    ck_assert_fails_with(ag_graph_from_nbhd(&big, &nb, 1, &err), err, AG_ELIMIT,
                         "the limit is 1 edge");
    ck_assert_msg(!strstr(err.msg, "1 edges"), "%s", err.msg);
    ag_nbhd_destroy(&nb);
    igraph_destroy(&g);
}
END_TEST

Suite *graph_files_suite(void)
{
    Suite *s = suite_create("graph_files");
    TCase *tc = tcase_create("graph_files");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, bom_is_skipped_in_every_text_format);
    tcase_add_test(tc, bom_is_skipped_in_labels_file);
    tcase_add_test(tc, graph_and_labels_from_a_fifo);
    tcase_add_test(tc, undirected_edge_list_gives_two_messages_per_edge);
    tcase_add_test(tc, formats_that_state_direction_refuse_a_contradiction);
    tcase_add_test(tc, cli_undirected_and_directed);
    tcase_add_test(tc, self_loops_on_and_off_on_a_graph_file);
    tcase_add_test(tc, cli_self_loops_on_a_graph_file);
    tcase_add_test(tc, cli_self_loops_on_csr_keep_the_edge_order);
    tcase_add_test(tc, csr_self_loops_give_slot_ids);
    tcase_add_test(tc, graphml_round_trip_without_id);
    tcase_add_test(tc, graphml_in_memory_over_int_max_is_refused);
    tcase_add_test(tc, counts_of_one_are_singular);
    suite_add_tcase(s, tc);
    return s;
}
