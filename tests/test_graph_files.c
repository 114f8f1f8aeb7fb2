/*
 * Graph files as people bring them: byte-order marks, undirected edge lists,
 * self-loops added or removed, GraphML round trips, edge attributes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Loads name (in the scratch folder) and returns its labels joined by spaces. */
static char *load_summary(const char *name, int64_t *n_nodes, int64_t *n_edges)
{
    igraph_t g;
    ag_error_t err;
    int rc = ag_graph_load(&g, tmp_path(name), NULL, &err);
    ck_assert_msg(rc == AG_OK, "%s: %s", name, err.msg);
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
        char *plain = load_summary(samples[k].name, &n0, &e0);
        char *bom = load_summary(bom_name, &n1, &e1);
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

Suite *graph_files_suite(void)
{
    Suite *s = suite_create("graph_files");
    TCase *tc = tcase_create("graph_files");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, bom_is_skipped_in_every_text_format);
    tcase_add_test(tc, bom_is_skipped_in_labels_file);
    suite_add_tcase(s, tc);
    return s;
}
