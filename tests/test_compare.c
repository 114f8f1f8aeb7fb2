/* `attngraph compare` across graph files and patterns: sizes, labels, distances. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Like expect_cli, but returns stdout (malloc'ed) for more checks. */
static char *cli_stdout(const char *args, int code, const char *needle)
{
    char *out, *err;
    int rc = run_cli(args, &out, &err);
    ck_assert_msg(rc == code, "'%s' exited %d, expected %d; stderr: %s", args, rc, code, err);
    ck_assert_msg(strstr(code ? err : out, needle), "'%s': lacks '%s':\n%s%s", args, needle,
                  out, err);
    free(err);
    return out;
}

START_TEST(pattern_takes_its_size_from_the_graph)
{
    /* sentence.gml has 4 nodes: complete on 4 is 16 messages */
    char *out = cli_stdout("compare --graph graphs/sentence.gml --pattern complete", 0,
                           "compare: 2 connectivities on 4 nodes");
    ck_assert_msg(strstr(out, "\ncomplete ") && strstr(out, " 16 "), "%s", out);
    free(out);
    /* the pattern first: the graph still sizes it, and names the nodes */
    out = cli_stdout("compare --pattern complete --graph graphs/sentence.gml", 0,
                     "on 4 nodes");
    ck_assert_msg(strstr(out, "'nah'"), "%s", out);
    free(out);
    /* a size that disagrees is still refused */
    free(cli_stdout("compare --graph graphs/sentence.gml --pattern complete --nodes 5", 1,
                    "has 5 nodes; the first connectivity ('graphs/sentence.gml') has 4"));
    free(cli_stdout("compare --pattern complete --pattern causal", 2, "needs a size"));
}
END_TEST

START_TEST(different_labels_for_a_node_id_are_refused)
{
    const char *other = tmp_path("other4.gml");
    write_text(other, "graph [ directed 1\n node [ id 0 label \"win\" ] node [ id 1 label \"d\" ]\n"
                      " node [ id 2 label \"I\" ] node [ id 3 label \"nah\" ]\n"
                      " edge [ source 0 target 1 ] ]\n");
    char args[1024];
    snprintf(args, sizeof args, "compare --graph graphs/sentence.gml --graph %s", other);
    free(cli_stdout(args, 1, "calls node 0 'win', but 'graphs/sentence.gml' calls it 'nah'"));
    free(cli_stdout("compare --graph graphs/sentence.gml --pattern causal --tokens 'a b c d'", 1,
                    "'causal' calls node 0 'a'"));
    /* the same labels, or a numbered pattern, are fine */
    free(cli_stdout("compare --graph graphs/sentence.gml --pattern causal --tokens "
                    "'nah I d win'", 0, "(baseline)"));
    free(cli_stdout("compare --graph graphs/sentence.gml --pattern causal --nodes 4", 0,
                    "(baseline)"));
}
END_TEST

/* The distance_mean field (7th) of the CSV row that starts with name. */
static void distance_field(const char *csv, const char *name, char *field, size_t cap)
{
    char start[256];
    snprintf(start, sizeof start, "\n%s,", name);
    const char *p = strstr(csv, start);
    ck_assert_msg(p != NULL, "no row for %s in\n%s", name, csv);
    p++;
    for (int k = 0; k < 6; k++)
        p = strchr(p, ',') + 1;
    size_t n = strcspn(p, ",");
    ck_assert_uint_lt(n, cap);
    memcpy(field, p, n);
    field[n] = '\0';
}

START_TEST(distance_only_for_patterns)
{
    char args[1024];
    const char *csv = tmp_path("cmp.csv"), *per_node = tmp_path("cmp_nodes.csv");
    snprintf(args, sizeof args, "compare --graph graphs/sentence.gml --pattern causal "
             "--csv %s --per-node %s", csv, per_node);
    char *out = cli_stdout(args, 0, "(baseline)");
    /* the graph's row shows '-' under dist_mean */
    const char *row = strstr(out, "\ngraphs/sentence.gml");
    ck_assert_ptr_nonnull(row);
    char cells[8][32];
    ck_assert_int_eq(sscanf(row, " %31s %31s %31s %31s %31s %31s", cells[0], cells[1], cells[2],
                            cells[3], cells[4], cells[5]), 6);
    ck_assert_str_eq(cells[5], "-");
    free(out);
    char *text = read_text(csv), field[64];
    distance_field(text, "graphs/sentence.gml", field, sizeof field);
    ck_assert_str_eq(field, "");
    distance_field(text, "causal", field, sizeof field);
    ck_assert_msg(strtod(field, NULL) > 0, "causal distance '%s'", field);
    free(text);
    /* per node: no distance for the graph's nodes */
    text = read_text(per_node);
    ck_assert_ptr_nonnull(strstr(text, "graphs/sentence.gml,1,I,2,"));
    const char *line = strstr(text, "graphs/sentence.gml,1,I,2,");
    line = strchr(line + strlen("graphs/sentence.gml,1,I,2,"), ',');
    ck_assert_msg(line[1] == ',', "graph node has a distance: %s", line);
    free(text);
}
END_TEST

/* The edges field (3rd) of the CSV row that starts with name, or -1. */
static long long edges_field(const char *csv, const char *name)
{
    char start[256];
    snprintf(start, sizeof start, "\n%s,", name);
    const char *p = strstr(csv, start);
    long long nodes, edges;
    if (!p || sscanf(p + strlen(start), "%lld,%lld", &nodes, &edges) != 2)
        return -1;
    return edges;
}

START_TEST(graph_on_standard_input_is_read_once)
{
    const char *in = tmp_path("stdin.edges");
    write_text(in, "0 1\n1 2\n");
    /* the pattern first: the graph sizes it, and its own run reuses what was read */
    const char *orders[] = {"compare --pattern complete --graph - --format edgelist --csv -",
                            "compare --graph - --format edgelist --pattern complete --csv -"};
    for (int k = 0; k < 2; k++) {
        char *out, *err;
        int rc = run_cli_input(orders[k], in, &out, &err);
        ck_assert_msg(rc == 0, "'%s' exited %d: %s", orders[k], rc, err);
        ck_assert_msg(strstr(err, "compare: 2 connectivities on 3 nodes"), "%s", err);
        ck_assert_int_eq(edges_field(out, "complete"), 9);
        ck_assert_int_eq(edges_field(out, "-"), 2);
        free(out), free(err);
    }
}
END_TEST

START_TEST(self_loops_apply_to_graph_files)
{
    /* sentence.gml: 10 edges, 4 of them self-loops; loops4.edges: 4 edges, 1 a loop */
    const char *other = tmp_path("loops4.edges");
    write_text(other, "0 1\n1 2\n2 3\n3 3\n");
    char args[1024], *out;
    snprintf(args, sizeof args, "compare --graph graphs/sentence.gml --graph %s "
             "--self-loops off --csv -", other);
    out = cli_stdout(args, 0, "graphs/sentence.gml,4,6,");
    ck_assert_int_eq(edges_field(out, other), 3);
    free(out);
    snprintf(args, sizeof args, "compare --graph graphs/sentence.gml --graph %s "
             "--self-loops on --csv -", other);
    out = cli_stdout(args, 0, "graphs/sentence.gml,4,10,");
    ck_assert_int_eq(edges_field(out, other), 7);
    free(out);
    /* mixed: the pattern and the graph file both lose their loops, as in run */
    out = cli_stdout("compare --pattern causal --graph graphs/sentence.gml --self-loops off "
                     "--csv -", 0, "causal,4,6,");
    ck_assert_int_eq(edges_field(out, "graphs/sentence.gml"), 6);
    free(out);
    expect_cli("run graphs/sentence.gml --self-loops off --dim 4", 0, 1, "10 edges, 6 messages");
}
END_TEST

Suite *compare_suite(void)
{
    Suite *s = suite_create("compare");
    TCase *tc = tcase_create("compare");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, pattern_takes_its_size_from_the_graph);
    tcase_add_test(tc, different_labels_for_a_node_id_are_refused);
    tcase_add_test(tc, distance_only_for_patterns);
    tcase_add_test(tc, graph_on_standard_input_is_read_once);
    tcase_add_test(tc, self_loops_apply_to_graph_files);
    suite_add_tcase(s, tc);
    return s;
}
