/* `attngraph draw` and `compare --svg`: pictures of the shipped examples, rendered by a
   real renderer; errors that leave nothing half-written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svgcheck.h"
#include "testutil.h"

/* Runs the tool (asserting success), then checks the SVG it wrote: valid XML, and
   rendered by rsvg-convert to a PNG of the stated size that is not blank. */
static xmlDocPtr draw_and_render(const char *args, const char *svg_name)
{
    char cmd[4096], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "%s --out %s", args, tmp_path(svg_name));
    const int rc = run_cli(cmd, &out, &err);
    ck_assert_msg(rc == 0, "'%s' exited %d: %s", cmd, rc, err);
    ck_assert_ptr_nonnull(strstr(out, "wrote "));
    free(out), free(err);
    char *svg = read_text(tmp_path(svg_name));
    ck_assert_msg(strlen(svg) < 200000, "%s: %zu bytes", svg_name, strlen(svg));
    xmlDocPtr doc = svg_parse(svg);
    free(svg);
    double w, h;
    svg_size(doc, &w, &h);
    char png[256];
    snprintf(png, sizeof png, "%s.png", tmp_path(svg_name));
    render_png(tmp_path(svg_name), png);
    png_info_t info;
    png_read_info(png, &info);
    ck_assert_int_eq(info.width, (long)w);
    ck_assert_int_eq(info.height, (long)h);
    ck_assert_msg(info.colours >= 4 && info.inked > 0.02, "%s renders nearly blank: %d colours, "
                  "%.3f inked", svg_name, info.colours, info.inked);
    return doc;
}

START_TEST(test_heatmap_karate)
{
    xmlDocPtr doc = draw_and_render("draw heatmap graphs/karate.gml --heads 2", "heat.svg");
    /* karate: 78 undirected edges, 156 messages, no multi-edges: 156 cells */
    ck_assert_int_eq(svg_count(doc, "//s:rect[@class='edge']"), 156);
    ck_assert_int_eq(svg_count(doc, "//s:text[.='Mr. Hi']"), 2);   /* on both axes */
    xmlFreeDoc(doc);
}
END_TEST

START_TEST(test_heatmap_agrees_with_attn)
{
    /* the cells are the weights `run --attn` exports (mean over heads) */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "run graphs/sentence.gml --heads 2 --attn %s --quiet",
             tmp_path("a.csv"));
    ck_assert_int_eq(run_cli(cmd, NULL, NULL), 0);
    xmlDocPtr doc = draw_and_render("draw heatmap graphs/sentence.gml --heads 2", "s.svg");
    FILE *f = fopen(tmp_path("a.csv"), "r");
    char line[512];
    double sum[64][64] = {{0}};
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));   /* header */
    while (fgets(line, sizeof line, f)) {
        int s, d;
        double w;
        char *last = strrchr(line, ',');
        ck_assert_int_eq(sscanf(line, "%d,%d", &s, &d), 2);
        w = atof(last + 1);
        ck_assert(s < 64 && d < 64);
        sum[d][s] += w / 2;
    }
    fclose(f);
    xmlXPathObjectPtr cells = svg_nodes(doc, "//s:rect[@class='edge']");
    ck_assert_int_gt(cells->nodesetval->nodeNr, 0);
    for (int k = 0; k < cells->nodesetval->nodeNr; k++) {
        xmlNodePtr c = cells->nodesetval->nodeTab[k];
        const int d = (int)svg_num_attr(c, "data-dst"), s = (int)svg_num_attr(c, "data-src");
        ck_assert_double_eq_tol(svg_num_attr(c, "data-weight"), sum[d][s], 2e-6);
    }
    xmlXPathFreeObject(cells);
    xmlFreeDoc(doc);
}
END_TEST

START_TEST(test_heatmap_binned_cli)
{
    /* 1,200 nodes of causal (720,600 edges), summed a piece at a time */
    xmlDocPtr doc = draw_and_render("draw heatmap --pattern causal --nodes 1200 --bins 40",
                                    "binned.svg");
    ck_assert_int_eq(svg_count(doc, "//s:rect[@class='edge']"), 0);
    xmlXPathObjectPtr b = svg_nodes(doc, "//s:rect[@class='block']");
    /* the blocks on and below the diagonal */
    ck_assert_int_eq(b->nodesetval->nodeNr, 40 * 41 / 2);
    double edges = 0;
    for (int k = 0; k < b->nodesetval->nodeNr; k++)
        edges += svg_num_attr(b->nodesetval->nodeTab[k], "data-edges");
    ck_assert_double_eq(edges, 1200.0 * 1201 / 2);
    xmlXPathFreeObject(b);
    xmlFreeDoc(doc);
}
END_TEST

START_TEST(test_graph_pictures)
{
    xmlDocPtr doc = draw_and_render("draw graph graphs/karate.gml --heads 2", "g.svg");
    ck_assert_int_eq(svg_count(doc, "//s:path[@class='edge']"), 156);
    ck_assert_int_eq(svg_count(doc, "//s:circle[@class='node']"), 34);
    xmlFreeDoc(doc);
    doc = draw_and_render("draw graph --pattern causal --tokens 'the cat sat on the mat'",
                          "arc.svg");
    ck_assert_int_eq(svg_count(doc, "//s:path[@class='edge']"), 21);
    ck_assert_int_eq(svg_count(doc, "//s:path[@class='edge' and contains(@d, 'A')]"), 15);
    xmlFreeDoc(doc);
    /* the same command, the same bytes */
    char *a = read_text(tmp_path("g.svg"));
    xmlFreeDoc(draw_and_render("draw graph graphs/karate.gml --heads 2", "g2.svg"));
    char *b = read_text(tmp_path("g2.svg"));
    ck_assert_str_eq(a, b);
    free(a), free(b);
}
END_TEST

/* --classes colours the nodes by their labels; a CSR (not a sequence) is laid
   out, a pattern drawn in order. */
START_TEST(test_graph_classes_and_layouts)
{
    int64_t *labels, n;
    ag_error_t err;
    ck_assert_int_eq(ag_index_read_npy(&labels, &n, "graphs/karate/labels.npy", &err), AG_OK);
    ck_assert_int_eq(n, 34);
    xmlDocPtr doc = draw_and_render("draw graph graphs/karate.gml --classes "
                                    "graphs/karate/labels.npy", "classes.svg");
    xmlXPathObjectPtr p = svg_nodes(doc, "//s:circle[@class='node']");
    ck_assert_int_eq(p->nodesetval->nodeNr, 34);
    for (int i = 0; i < 34; i++) {
        char id[32], cls[32], want[32] = "";   /* -1: no data-class */
        xmlNodePtr node = p->nodesetval->nodeTab[i];
        const int64_t at = atoll(svg_attr(node, "data-id", id, sizeof id));
        if (labels[at] >= 0)
            snprintf(want, sizeof want, "%lld", (long long)labels[at]);
        ck_assert_str_eq(svg_attr(node, "data-class", cls, sizeof cls), want);
    }
    xmlXPathFreeObject(p);
    xmlFreeDoc(doc);
    free(labels);
    /* a ring of 12 as a CSR: Fruchterman-Reingold unless --layout arc */
    int64_t ip[13], ix[12];
    for (int i = 0; i <= 12; i++)
        ip[i] = i;
    for (int i = 0; i < 12; i++)
        ix[i] = (i + 11) % 12;
    ck_assert_int_eq(ag_npy_write_i64(tmp_path("ring-ip.npy"), ip, 13, &err), AG_OK);
    ck_assert_int_eq(ag_npy_write_i64(tmp_path("ring-ix.npy"), ix, 12, &err), AG_OK);
    char cmd[1024];
    const char *in_order = "nodes in order";
    for (int arc = 0; arc < 2; arc++) {
        snprintf(cmd, sizeof cmd, "draw graph --csr %s,%s%s", tmp_path("ring-ip.npy"),
                 tmp_path("ring-ix.npy"), arc ? " --layout arc" : "");
        xmlFreeDoc(draw_and_render(cmd, "ring.svg"));
        char *text = read_text(tmp_path("ring.svg"));
        ck_assert_msg(!strstr(text, in_order) == !arc, "--csr%s: %s", arc ? " --layout arc" : "",
                      arc ? "not in order" : "drawn in order");
        free(text);
    }
    xmlFreeDoc(draw_and_render("draw graph --pattern causal --nodes 12", "seq.svg"));
    char *text = read_text(tmp_path("seq.svg"));
    ck_assert_msg(strstr(text, in_order), "a pattern is drawn in order");
    free(text);
    expect_cli("draw graph graphs/karate.gml --classes graphs/planted/labels.npy --out x.svg",
               1, 2, "--classes graphs/planted/labels.npy holds 300 values; the graph has 34");
    expect_cli("draw heatmap graphs/karate.gml --classes graphs/karate/labels.npy --out x.svg",
               2, 2, "--classes is for the graph picture");
}
END_TEST

START_TEST(test_rounds_and_train)
{
    char cmd[1024];
    static const char hopfield[] = "run graphs/hopfield.gml --features graphs/hopfield/x.npy "
        "--weights graphs/hopfield --score dot --beta 0.25 --no-residual --rounds 20 "
        "--until 1e-6 --quiet --trace %s";
    snprintf(cmd, sizeof cmd, hopfield, tmp_path("trace.csv"));
    ck_assert_int_eq(run_cli(cmd, NULL, NULL), 0);
    snprintf(cmd, sizeof cmd, hopfield, tmp_path("run-trace.svg"));   /* the picture */
    ck_assert_int_eq(run_cli(cmd, NULL, NULL), 0);
    /* the run's own picture is the one draw rounds makes of its CSV */
    snprintf(cmd, sizeof cmd, "draw rounds %s --title 'convergence of rounds: "
             "graphs/hopfield.gml (gml, directed)'", tmp_path("trace.csv"));
    xmlFreeDoc(draw_and_render(cmd, "titled.svg"));
    char *from_run = read_text(tmp_path("run-trace.svg"));
    char *drawn = read_text(tmp_path("titled.svg"));
    ck_assert_str_eq(from_run, drawn);
    free(from_run), free(drawn);
    snprintf(cmd, sizeof cmd, "draw rounds %s", tmp_path("trace.csv"));
    xmlDocPtr doc = draw_and_render(cmd, "rounds.svg");
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='panel']"), 2);
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='series']"), 2);
    xmlFreeDoc(doc);
    /* the trace from standard input: the same picture, the title aside */
    snprintf(cmd, sizeof cmd, "draw rounds - --title %s --out %s", tmp_path("trace.csv"),
             tmp_path("piped.svg"));
    ck_assert_int_eq(run_cli_input(cmd, tmp_path("trace.csv"), NULL, NULL), 0);
    char *a = read_text(tmp_path("rounds.svg")), *b = read_text(tmp_path("piped.svg"));
    ck_assert_ptr_nonnull(strstr(a, "convergence of rounds: "));
    ck_assert_str_eq(strstr(a, "convergence of rounds: ") + strlen("convergence of rounds: "),
                     strstr(b, tmp_path("trace.csv")));
    free(a), free(b);
    snprintf(cmd, sizeof cmd, "train graphs/planted.gml --features graphs/planted/x.npy "
             "--labels graphs/planted/labels.npy --train-mask graphs/planted/train.npy "
             "--eval-mask graphs/planted/eval.npy --epochs 20 --log %s --svg %s --quiet",
             tmp_path("log.csv"), tmp_path("train-own.svg"));
    ck_assert_int_eq(run_cli(cmd, NULL, NULL), 0);
    snprintf(cmd, sizeof cmd, "draw train %s --title 'training: graphs/planted.gml'",
             tmp_path("log.csv"));
    xmlFreeDoc(draw_and_render(cmd, "train-titled.svg"));
    from_run = read_text(tmp_path("train-own.svg"));
    drawn = read_text(tmp_path("train-titled.svg"));
    ck_assert_str_eq(from_run, drawn);
    free(from_run), free(drawn);
    snprintf(cmd, sizeof cmd, "draw train %s", tmp_path("log.csv"));
    doc = draw_and_render(cmd, "train.svg");
    /* loss (training, evaluation) and accuracy (training, evaluation) */
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='panel']"), 2);
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='series']"), 4);
    xmlFreeDoc(doc);
}
END_TEST

START_TEST(test_compare_svg)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "compare --pattern causal --pattern window:3 --pattern docs:6,6 "
             "--tokens 'a b c d e f g h i j k l' --quiet --svg %s", tmp_path("cmp.svg"));
    ck_assert_int_eq(run_cli(cmd, NULL, NULL), 0);
    char *svg = read_text(tmp_path("cmp.svg"));
    xmlDocPtr doc = svg_parse(svg);
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='mask']"), 3);
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='chart']"), 7);
    /* the baseline has no change against itself: 7 x 3 bars less its two */
    ck_assert_int_eq(svg_count(doc, "//s:rect[@class='bar']"), 19);
    ck_assert_int_eq(svg_count(doc, "//s:rect[@class='bar' and @data-conn='1' and "
                                    "@data-value='33']"), 1);   /* window:3's edges */
    xmlFreeDoc(doc);
    free(svg);
    render_png(tmp_path("cmp.svg"), tmp_path("cmp.png"));
    png_info_t info;
    png_read_info(tmp_path("cmp.png"), &info);
    ck_assert(info.colours >= 4 && info.inked > 0.02);
}
END_TEST

START_TEST(test_errors)
{
    char out[512], dir[512], cmd[1024];   /* tmp_path's buffers are reused: copies */
    snprintf(out, sizeof out, "%s", tmp_path("keep.svg"));
    snprintf(dir, sizeof dir, "%s", tmp_path("x"));
    dir[strlen(dir) - 2] = '\0';
    write_text(tmp_path("bad.csv"),
               "round,change,entropy,max_weight\n1,0.5,0.1,0.9\n2,abc,0.1,0.9\n");
    write_text(tmp_path("wrong.csv"), "a,b\n1,2\n");
    write_text(tmp_path("ragged.csv"), "round,change,entropy\n1,2\n");
    static const struct {
        const char *args;
        int code;
        const char *needle;
    } cases[] = {
        {"draw rounds %s/missing.csv --out %s", 1, "missing.csv: cannot open"},
        {"draw rounds %s/bad.csv --out %s", 1, "row 2: 'abc' in column change is not a number"},
        {"draw rounds %s/wrong.csv --out %s", 1, "no column 'round'"},
        {"draw rounds %s/ragged.csv --out %s", 1, "line 2 has 2 fields; the header has 3"},
        {"draw train %s/wrong.csv --out %s", 1, "no column epoch (or step)"},
        {"draw heatmap graphs/karate.gml --heads 2 --head 2 --out %s%s", 1,
         "--head 2: the run has 2 heads (0..1)"},
        {"draw graph --pattern causal --nodes 3000 --out %s%s", 1, "draw a heatmap instead"},
        {"draw heatmap graphs/no-such.gml --out %s%s", 1, "no-such.gml"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        write_text(out, "old");
        if (strstr(cases[k].args, "%s/"))
            snprintf(cmd, sizeof cmd, cases[k].args, dir, out);
        else
            snprintf(cmd, sizeof cmd, cases[k].args, out, "");
        expect_cli(cmd, cases[k].code, 2, cases[k].needle);
        char *text = read_text(out);
        ck_assert_msg(strcmp(text, "old") == 0, "'%s' touched its output", cmd);
        free(text);
    }
    expect_cli("draw heatmap graphs/karate.gml --out pic.png", 2, 2, "this output is .svg");
    expect_cli("draw heatmap graphs/karate.gml", 2, 2, "--out FILE.svg");
    expect_cli("draw pie x.csv --out x.svg", 2, 2, "unknown picture 'pie'");
    expect_cli("draw", 2, 2, "usage: attngraph draw");
    expect_cli("draw heatmap graphs/karate.gml --layout fr --out x.svg", 2, 2,
               "--layout is for the graph picture");
    expect_cli("draw heatmap graphs/karate.gml --quiet --out x.svg", 2, 2, "--quiet");
    expect_cli("draw graph graphs/karate.gml --scale log --out x.svg", 2, 2,
               "--scale is for the heatmap");
    expect_cli("draw heatmap graphs/karate.gml --scale cubic --out x.svg", 2, 2,
               "--scale 'cubic': expected linear or log");
    expect_cli("draw --help", 0, 1, "draw heatmap");
    expect_cli("draw rounds --help", 0, 1, "run --trace");
}
END_TEST

Suite *draw_cli_suite(void)
{
    Suite *s = suite_create("draw_cli");
    TCase *t = tcase_create("draw_cli");
    tcase_set_timeout(t, 20);
    tcase_add_test(t, test_heatmap_karate);
    tcase_add_test(t, test_heatmap_agrees_with_attn);
    tcase_add_test(t, test_heatmap_binned_cli);
    tcase_add_test(t, test_graph_pictures);
    tcase_add_test(t, test_graph_classes_and_layouts);
    tcase_add_test(t, test_rounds_and_train);
    tcase_add_test(t, test_compare_svg);
    tcase_add_test(t, test_errors);
    suite_add_tcase(s, t);
    return s;
}
