/* Graph files: every format, labels, and malformed input that must fail cleanly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* Writes text to a file named name and loads it. */
static int load_text(igraph_t *g, const char *name, const char *text, ag_error_t *err)
{
    const char *p = tmp_path(name);
    write_text(p, text);
    return ag_graph_load(g, p, NULL, err);
}

/* Asserts the graph's edges are exactly pairs[0..2E) in edge-id order. */
static void assert_edges(const igraph_t *g, const int64_t *pairs, int64_t E)
{
    ck_assert_int_eq(igraph_ecount(g), E);
    for (int64_t e = 0; e < E; e++) {
        ck_assert_int_eq(IGRAPH_FROM(g, e), pairs[2 * e]);
        ck_assert_int_eq(IGRAPH_TO(g, e), pairs[2 * e + 1]);
    }
}

static void assert_labels(const igraph_t *g, const char *const *expected, int64_t n)
{
    ag_labels_t labels;
    ag_error_t err;
    ck_assert_int_eq(ag_labels_from_graph(&labels, g, &err), AG_OK);
    ck_assert_int_eq(labels.n, n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_str_eq(labels.str[i], expected[i]);
    ag_labels_destroy(&labels);
}

START_TEST(edgelist_with_comments)
{
    igraph_t g;
    ag_error_t err;
    ck_assert_int_eq(load_text(&g, "a.edges", "# a comment\n0 1\n1 2  # trailing\n\n2 0\n2 2\n",
                               &err), AG_OK);
    const int64_t pairs[] = {0, 1, 1, 2, 2, 0, 2, 2};
    ck_assert(igraph_is_directed(&g));
    assert_edges(&g, pairs, 4);
    const char *labels[] = {"0", "1", "2"};
    assert_labels(&g, labels, 3);
    igraph_destroy(&g);
}
END_TEST

START_TEST(ncol_and_lgl_names)
{
    igraph_t g;
    ag_error_t err;
    ck_assert_int_eq(load_text(&g, "a.ncol", "alpha beta\nbeta gamma 2.5\n", &err), AG_OK);
    const int64_t pairs[] = {0, 1, 1, 2};
    assert_edges(&g, pairs, 2);
    const char *names[] = {"alpha", "beta", "gamma"};
    assert_labels(&g, names, 3);
    igraph_destroy(&g);

    ck_assert_int_eq(load_text(&g, "a.lgl", "# alpha\nbeta\ngamma\n# beta\ngamma\n", &err), AG_OK);
    const int64_t lgl[] = {0, 1, 0, 2, 1, 2};
    assert_edges(&g, lgl, 3);
    assert_labels(&g, names, 3);
    igraph_destroy(&g);
}
END_TEST

START_TEST(shipped_graphs_load_with_labels)
{
    igraph_t g;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/sentence.gml", NULL, &err), AG_OK);
    const char *words[] = {"nah", "I", "d", "win"};
    assert_labels(&g, words, 4);
    ck_assert_int_eq(igraph_ecount(&g), 10);      /* causal: 1 + 2 + 3 + 4 */
    for (int64_t e = 0; e < 10; e++)
        ck_assert_int_le(IGRAPH_FROM(&g, e), IGRAPH_TO(&g, e));
    igraph_destroy(&g);

    ck_assert_int_eq(ag_graph_load(&g, "graphs/en_ja_cross.graphml", NULL, &err), AG_OK);
    const char *tokens[] = {"nah", "I", "d", "win", "いいえ", "勝つ", "さ"};
    assert_labels(&g, tokens, 7);
    ck_assert_int_eq(igraph_ecount(&g), 12);      /* every Japanese -> every English */
    for (int64_t e = 0; e < 12; e++) {
        ck_assert_int_ge(IGRAPH_FROM(&g, e), 4);
        ck_assert_int_lt(IGRAPH_TO(&g, e), 4);
    }
    igraph_destroy(&g);

    ck_assert_int_eq(ag_graph_load(&g, "graphs/patches16.net", NULL, &err), AG_OK);
    ck_assert_int_eq(igraph_vcount(&g), 16);
    ck_assert_int_eq(igraph_ecount(&g), 256);
    ag_labels_t labels;
    ck_assert_int_eq(ag_labels_from_graph(&labels, &g, &err), AG_OK);
    ck_assert_str_eq(labels.str[0], "p00");
    ck_assert_str_eq(labels.str[15], "p33");
    ag_labels_destroy(&labels);
    igraph_destroy(&g);

    ck_assert_int_eq(ag_graph_load(&g, "graphs/random10.edges", NULL, &err), AG_OK);
    ck_assert_int_eq(igraph_vcount(&g), 10);
    ck_assert_int_eq(igraph_ecount(&g), 40);
    igraph_destroy(&g);
}
END_TEST

START_TEST(format_override_and_names)
{
    igraph_t g;
    ag_error_t err;
    const char *p = tmp_path("noext");
    write_text(p, "0 1\n");
    ck_assert_fails_with(ag_graph_load(&g, p, NULL, &err), err, AG_EINVAL, "extension");
    ag_load_opts_t opts = {.format = AG_FORMAT_EDGELIST};
    ck_assert_int_eq(ag_graph_load(&g, p, &opts, &err), AG_OK);
    igraph_destroy(&g);
    ag_format_t f;
    ck_assert_int_eq(ag_format_parse(&f, "GraphML", &err), AG_OK);
    ck_assert_int_eq(f, AG_FORMAT_GRAPHML);
    ck_assert_fails_with(ag_format_parse(&f, "xyz", &err), err, AG_EINVAL, "'xyz'");
}
END_TEST

/* Malformed files: an error status naming the file, never an abort. */
typedef struct {
    const char *name, *text;
    ag_status_t status;
    const char *needle;
} bad_file_t;

static const bad_file_t bad_files[] = {
    {"one.edges", "0 1\n2\n", AG_EFORMAT, "bad.one.edges:2: one id"},
    {"word.edges", "0 x1\n", AG_EFORMAT, "'x1' is not a node id"},
    {"neg.edges", "-1 2\n", AG_EFORMAT, "'-1' is not a node id"},
    {"three.edges", "0 1 2\n", AG_EFORMAT, "more than two ids"},
    {"empty.edges", "", AG_EFORMAT, "no edges"},
    {"huge.edges", "0 1\n1 900000000\n", AG_ELIMIT, "node id 900000000"},
    {"huge.net", "*Vertices 900000000\n*Arcs\n1 2\n", AG_ELIMIT, "*Vertices 900000000"},
    {"range.net", "*Vertices 3\n*Arcs\n1 5\n", AG_EFORMAT, "not a valid pajek"},
    {"garbage.net", "\x01\x02 garbage )(*&\n", AG_EFORMAT, "not a valid pajek"},
    {"empty.gml", "", AG_EFORMAT, "not a valid gml"},
    {"trunc.gml", "graph [ directed 1 node [ id 0 ] node [ id 1 ", AG_EFORMAT, "not a valid gml"},
    {"undecl.gml", "graph [ node [ id 0 ] edge [ source 0 target 7 ] ]", AG_EFORMAT,
     "not a valid gml"},
    {"empty.graphml", "", AG_EFORMAT, "bad.empty.graphml"},
    {"garbage.graphml", "<<<>>> this is not xml", AG_EFORMAT, "malformed XML"},
    {"trunc.graphml", "<?xml version=\"1.0\"?>\n<graphml xmlns=\"http://graphml.graphdrawing.org/"
     "xmlns\"><graph edgedefault=\"directed\"><node id=\"a\"/><node id=", AG_EFORMAT,
     "malformed XML"},
    {"undecl.graphml", "<?xml version=\"1.0\"?>\n<graphml xmlns=\"http://graphml.graphdrawing."
     "org/xmlns\"><graph edgedefault=\"directed\"><node id=\"a\"/><edge source=\"a\" "
     "target=\"zz\"/></graph></graphml>\n", AG_EFORMAT, "node 'zz', which is not declared"},
    {"dup.graphml", "<?xml version=\"1.0\"?>\n<graphml xmlns=\"http://graphml.graphdrawing.org/"
     "xmlns\"><graph edgedefault=\"directed\"><node id=\"a\"/><node id=\"a\"/></graph>"
     "</graphml>\n", AG_EFORMAT, "'a' is declared twice"},
    {"nonodes.graphml", "<?xml version=\"1.0\"?>\n<graphml xmlns=\"http://graphml.graphdrawing."
     "org/xmlns\"><graph edgedefault=\"directed\"></graph></graphml>\n", AG_EFORMAT, "no nodes"},
    {"one.ncol", "lonely\n", AG_EFORMAT, "not a valid ncol"},
};

START_TEST(malformed_files_fail_cleanly)
{
    const bad_file_t *b = &bad_files[_i];
    char name[64];
    snprintf(name, sizeof name, "bad.%s", b->name);
    /* The library must not print: send stderr to a file and check it stays empty. */
    const char *log = tmp_path("stderr.log");
    fflush(stderr);
    ck_assert_ptr_nonnull(freopen(log, "w", stderr));
    igraph_t g;
    ag_error_t err = {AG_OK, ""};
    int rc = load_text(&g, name, b->text, &err);
    fflush(stderr);
    char *printed = read_text(log);
    ck_assert_msg(rc == (int)b->status, "%s: status %d (%s), expected %d", b->name, rc, err.msg,
                  b->status);
    ck_assert_msg(strstr(err.msg, b->needle), "%s: message '%s' lacks '%s'", b->name, err.msg,
                  b->needle);
    ck_assert_msg(printed[0] == '\0', "%s: the library printed '%s'", b->name, printed);
    free(printed);
}
END_TEST

static void never_called(const char *reason, const char *file, int line, igraph_error_t code)
{
    (void)reason, (void)file, (void)line, (void)code;
}

START_TEST(host_error_handler_is_restored)
{
    igraph_error_handler_t *before = igraph_set_error_handler(never_called);
    igraph_t g;
    ag_error_t err;
    ck_assert_int_ne(load_text(&g, "x.gml", "graph [ node [ id 0 ", &err), AG_OK);
    ck_assert_ptr_eq(igraph_set_error_handler(before), never_called);
}
END_TEST

START_TEST(missing_file)
{
    igraph_t g;
    ag_error_t err;
    ck_assert_fails_with(ag_graph_load(&g, tmp_path("nope.gml"), NULL, &err), err, AG_EIO,
                         "nope.gml: cannot open");
}
END_TEST

START_TEST(max_nodes_limit)
{
    igraph_t g;
    ag_error_t err;
    const char *p = tmp_path("ten.edges");
    write_text(p, "0 9\n");
    ag_load_opts_t opts = {.format = AG_FORMAT_AUTO, .max_nodes = 9};
    ck_assert_fails_with(ag_graph_load(&g, p, &opts, &err), err, AG_ELIMIT, "node id 9");
    opts.max_nodes = 10;
    ck_assert_int_eq(ag_graph_load(&g, p, &opts, &err), AG_OK);
    ck_assert_int_eq(igraph_vcount(&g), 10);
    igraph_destroy(&g);
}
END_TEST

Suite *graph_suite(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("graph");
    tcase_add_test(tc, edgelist_with_comments);
    tcase_add_test(tc, ncol_and_lgl_names);
    tcase_add_test(tc, shipped_graphs_load_with_labels);
    tcase_add_test(tc, format_override_and_names);
    tcase_add_loop_test(tc, malformed_files_fail_cleanly, 0,
                        (int)(sizeof bad_files / sizeof bad_files[0]));
    tcase_add_test(tc, host_error_handler_is_restored);
    tcase_add_test(tc, missing_file);
    tcase_add_test(tc, max_nodes_limit);
    suite_add_tcase(s, tc);
    return s;
}
