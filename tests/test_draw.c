/* The pictures of the library: valid SVG, one mark per edge, colours and widths that
   follow the weights, escaped labels, binning, layouts, errors. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "svgcheck.h"
#include "testutil.h"

/* A small graph: 5 nodes, edges with distinct weights from ~0 to 1, two heads
   whose mean is the weight, a multi-edge (1 -> 0 twice) and a self-loop. */
enum { N5 = 5, E5 = 9 };
static const int64_t src5[E5] = {1, 1, 2, 3, 4, 0, 2, 3, 3};
static const int64_t dst5[E5] = {0, 0, 0, 1, 1, 2, 3, 3, 4};
static const double w5[E5] = {0.2, 0.1, 0.7, 1e-6, 0.999999, 1.0, 0.35, 0.65, 0.5};
static float heads5[E5 * 2];

static ag_edge_weights_t small_edges(const char *const *labels)
{
    for (int k = 0; k < E5; k++)   /* the mean of the two heads is w5[k] */
        heads5[2 * k] = (float)(w5[k] * 0.5), heads5[2 * k + 1] = (float)(w5[k] * 1.5);
    return (ag_edge_weights_t){N5, E5, src5, dst5, heads5, 2, -1, labels, "five nodes"};
}

static int same_node_pair(int64_t d, int64_t s, int k)
{
    return dst5[k] == d && src5[k] == s;
}

START_TEST(test_heatmap_cells)
{
    ag_edge_weights_t a = small_edges(NULL);
    char *svg;
    ag_error_t err;
    ck_assert_int_eq(ag_draw_heatmap(&svg, &a, NULL, &err), AG_OK);
    xmlDocPtr doc = svg_parse(svg);
    double width, height;
    svg_size(doc, &width, &height);
    ck_assert(width > 100 && height > 100);
    /* one cell per distinct (dst, src): the multi-edge 1 -> 0 is one cell, its weights added */
    xmlXPathObjectPtr cells = svg_nodes(doc, "//s:rect[@class='edge']");
    const int n = cells->nodesetval ? cells->nodesetval->nodeNr : 0;
    ck_assert_int_eq(n, E5 - 1);
    double lum[E5], wt[E5];
    char fills[E5][16];
    for (int c = 0; c < n; c++) {
        xmlNodePtr node = cells->nodesetval->nodeTab[c];
        const int64_t d = (int64_t)svg_num_attr(node, "data-dst");
        const int64_t s = (int64_t)svg_num_attr(node, "data-src");
        double expect = 0;
        int found = 0;
        for (int k = 0; k < E5; k++)
            if (same_node_pair(d, s, k))
                expect += w5[k], found++;
        ck_assert_msg(found, "a cell %lld <- %lld that is no edge", (long long)d, (long long)s);
        wt[c] = svg_num_attr(node, "data-weight");
        ck_assert_double_eq_tol(wt[c], expect, 1e-5);
        svg_attr(node, "fill", fills[c], sizeof fills[c]);
        lum[c] = svg_luminance(fills[c]);
    }
    /* colour monotone in weight: viridis gets lighter as the weight grows */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (wt[i] < wt[j] - 0.02)
                ck_assert_msg(lum[i] < lum[j], "weight %g is lighter (%s) than %g (%s)", wt[i],
                              fills[i], wt[j], fills[j]);
    /* non-edges: a grey pattern that no edge colour is, not even weight ~0 */
    ck_assert_int_eq(svg_count(doc, "//s:rect[@class='nonedge' and @fill='url(#nonedge)']"), 1);
    xmlXPathObjectPtr grey = svg_nodes(doc, "//s:pattern[@id='nonedge']/s:rect");
    ck_assert(grey->nodesetval && grey->nodesetval->nodeNr >= 1);
    for (int g = 0; g < grey->nodesetval->nodeNr; g++) {
        char col[16];
        svg_attr(grey->nodesetval->nodeTab[g], "fill", col, sizeof col);
        unsigned r, gg, b;
        sscanf(col, "#%2x%2x%2x", &r, &gg, &b);
        for (int c = 0; c < n; c++) {
            unsigned er, eg, eb;
            sscanf(fills[c], "#%2x%2x%2x", &er, &eg, &eb);
            const int dist = abs((int)r - (int)er) + abs((int)gg - (int)eg) + abs((int)b - (int)eb);
            ck_assert_msg(dist > 60, "edge colour %s is close to the no-edge grey %s", fills[c],
                          col);
        }
    }
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='colorbar']"), 1);
    xmlXPathFreeObject(grey);
    xmlXPathFreeObject(cells);
    xmlFreeDoc(doc);
    ag_svg_free(svg);
}
END_TEST

START_TEST(test_heatmap_log_scale)
{
    /* weights over six decades and a zero: lighter as they grow (each decade its own
       colour, where a linear scale leaves all but the largest dark), the zero at the
       bottom and still not the no-edge grey; decades on the colour bar */
    static const int64_t src[7] = {0, 1, 2, 3, 4, 5, 6}, dst[7] = {1, 2, 3, 4, 5, 6, 0};
    static const float w[7] = {0, 1e-6f, 1e-5f, 1e-4f, 1e-3f, 1e-2f, 1e-1f};
    const ag_edge_weights_t a = {7, 7, src, dst, w, 1, -1, NULL, NULL};
    const ag_heatmap_opts_t o = {.log_scale = 1};
    char *svg;
    ck_assert_int_eq(ag_draw_heatmap(&svg, &a, &o, NULL), AG_OK);
    xmlDocPtr doc = svg_parse(svg);
    double last = -1;
    char grey[8];
    const ag_rgb_t g = ag_colormap_nonedge();
    snprintf(grey, sizeof grey, "#%02x%02x%02x", g.r, g.g, g.b);
    for (int k = 1; k < 7; k++) {
        char xp[128], fill[16];
        snprintf(xp, sizeof xp, "//s:rect[@class='edge' and @data-src='%d']", k);
        xmlXPathObjectPtr c = svg_nodes(doc, xp);
        ck_assert_int_eq(c->nodesetval->nodeNr, 1);
        svg_attr(c->nodesetval->nodeTab[0], "fill", fill, sizeof fill);
        ck_assert_str_ne(fill, grey);
        ck_assert_msg(svg_luminance(fill) > last + 5, "1e%d is not lighter than the decade "
                      "below", k - 7);
        last = svg_luminance(fill);
        xmlXPathFreeObject(c);
    }
    ck_assert_int_eq(svg_count(doc, "//s:rect[@class='edge' and @data-src='0' and "
                                    "@fill='#440154']"), 1);   /* the bottom of viridis */
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='colorbar']/s:text[.='1e-06']"), 1);
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='colorbar']/s:text[.='0.1']"), 1);
    xmlFreeDoc(doc);
    ag_svg_free(svg);
}
END_TEST

START_TEST(test_heatmap_one_head)
{
    ag_edge_weights_t a = small_edges(NULL);
    a.head = 1;   /* head 1 is 1.5 x the mean */
    char *svg;
    ck_assert_int_eq(ag_draw_heatmap(&svg, &a, NULL, NULL), AG_OK);
    xmlDocPtr doc = svg_parse(svg);
    xmlXPathObjectPtr cells = svg_nodes(doc, "//s:rect[@class='edge' and @data-dst='2']");
    ck_assert_int_eq(cells->nodesetval->nodeNr, 1);
    ck_assert_double_eq_tol(svg_num_attr(cells->nodesetval->nodeTab[0], "data-weight"), 1.5,
                            1e-6);
    xmlXPathFreeObject(cells);
    xmlFreeDoc(doc);
    ag_svg_free(svg);
}
END_TEST

START_TEST(test_labels_escaped)
{
    const char *labels[N5] = {"<a&b>", "勝つ", "quote\"'", ("bad\xff" "byte"), "tab\tctl\x01"};
    ag_edge_weights_t a = small_edges(labels);
    a.title = "title <&> 日本";
    char *svg;
    ck_assert_int_eq(ag_draw_heatmap(&svg, &a, NULL, NULL), AG_OK);
    xmlDocPtr doc = svg_parse(svg);
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='row-labels']/s:text[.='<a&b>']"), 1);
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='column-labels']/s:text[.='勝つ']"), 1);
    ck_assert_int_eq(svg_count(doc, "//s:text[.='title <&> 日本']"), 1);
    ck_assert_int_eq(svg_count(doc, "//s:text[.=concat('quote\"', \"'\")]"), 2);
    ck_assert_int_eq(svg_count(doc, "//s:text[.='bad\xEF\xBF\xBD" "byte']"), 2);
    ck_assert_int_eq(svg_count(doc, "//s:text[.='tab\tctl']"), 2);
    xmlFreeDoc(doc);
    ag_svg_free(svg);
    ck_assert_int_eq(ag_draw_graph(&svg, &a, NULL, NULL), AG_OK);
    doc = svg_parse(svg);
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='labels']/s:text[.='<a&b>']"), 1);
    xmlFreeDoc(doc);
    ag_svg_free(svg);
}
END_TEST

/* Random edges over N nodes (distinct pairs unless dup). */
static void random_edges(int64_t N, int64_t E, int64_t *src, int64_t *dst, float *w,
                         uint64_t seed)
{
    uint64_t x = seed;
    for (int64_t k = 0; k < E; k++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        src[k] = (int64_t)((x >> 33) % (uint64_t)N);
        x = x * 6364136223846793005u + 1442695040888963407u;
        dst[k] = (int64_t)((x >> 33) % (uint64_t)N);
        w[k] = (float)((x >> 11) % 1000) / 1000.0f;
    }
}

START_TEST(test_heatmap_binned)
{
    enum { N = 1500, E = 30000 };
    int64_t *src = malloc(E * sizeof *src), *dst = malloc(E * sizeof *dst);
    float *w = malloc(E * sizeof *w);
    random_edges(N, E, src, dst, w, 7);
    ag_edge_weights_t a = {N, E, src, dst, w, 1, -1, NULL, NULL};
    char *svg;
    ck_assert_int_eq(ag_draw_heatmap(&svg, &a, NULL, NULL), AG_OK);
    ck_assert_msg(strlen(svg) < 5000000, "binned picture of %zu bytes", strlen(svg));
    xmlDocPtr doc = svg_parse(svg);
    ck_assert_int_eq(svg_count(doc, "//s:rect[@class='edge']"), 0);
    const int blocks = svg_count(doc, "//s:rect[@class='block']");
    ck_assert(blocks > 0 && blocks <= AG_HEATMAP_BINS * AG_HEATMAP_BINS);
    /* the blocks hold every edge (multi-edges count once), each its mean */
    xmlXPathObjectPtr b = svg_nodes(doc, "//s:rect[@class='block']");
    double edges = 0;
    for (int k = 0; k < b->nodesetval->nodeNr; k++) {
        edges += svg_num_attr(b->nodesetval->nodeTab[k], "data-edges");
        const double mean = svg_num_attr(b->nodesetval->nodeTab[k], "data-weight");
        ck_assert(mean >= 0 && mean <= 2);
    }
    int64_t distinct = 0;
    char *seen = calloc((size_t)N * N, 1);
    for (int64_t k = 0; k < E; k++)
        distinct += !seen[dst[k] * N + src[k]], seen[dst[k] * N + src[k]] = 1;
    ck_assert_double_eq(edges, (double)distinct);
    xmlXPathFreeObject(b);
    xmlFreeDoc(doc);
    ag_svg_free(svg);
    /* below the node threshold but over max_cells: binned too; bins is obeyed */
    a.n_nodes = 300;
    for (int64_t k = 0; k < E; k++)
        src[k] %= 300, dst[k] %= 300;
    const ag_heatmap_opts_t o = {.max_cells = 1000, .bins = 50};
    ck_assert_int_eq(ag_draw_heatmap(&svg, &a, &o, NULL), AG_OK);
    doc = svg_parse(svg);
    ck_assert_int_eq(svg_count(doc, "//s:rect[@class='edge']"), 0);
    ck_assert_int_le(svg_count(doc, "//s:rect[@class='block']"), 50 * 50);
    ck_assert_int_gt(svg_count(doc, "//s:rect[@class='block']"), 2000);
    xmlFreeDoc(doc);
    ag_svg_free(svg);
    free(src), free(dst), free(w), free(seen);
}
END_TEST

static int by_pair(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

START_TEST(test_heatmap_pieces)
{
    /* distinct random pairs sorted by (dst, src), added in three pieces, draw the
       same bytes as the one call; a repeated pair is one cell */
    enum { N = 1200, E = 5000 };
    int64_t *src = malloc(E * sizeof *src), *dst = malloc(E * sizeof *dst);
    int64_t (*pair)[2] = malloc(E * sizeof *pair);
    float *w = malloc(E * sizeof *w), *ws = malloc(E * sizeof *ws);
    random_edges(N, E, src, dst, w, 11);
    for (int k = 0; k < E; k++)
        pair[k][0] = dst[k], pair[k][1] = src[k];
    qsort(pair, E, sizeof *pair, by_pair);
    int64_t n = 0;
    for (int k = 0; k < E; k++)
        if (!n || pair[k][0] != dst[n - 1] || pair[k][1] != src[n - 1])
            dst[n] = pair[k][0], src[n] = pair[k][1], ws[n] = w[k], n++;
    ag_edge_weights_t a = {N, n, src, dst, ws, 1, -1, NULL, "pieces"};
    char *whole, *pieces;
    ck_assert_int_eq(ag_draw_heatmap(&whole, &a, NULL, NULL), AG_OK);
    ag_heatmap_bins_t *b;
    ck_assert_int_eq(ag_heatmap_bins_new(&b, N, 0, NULL), AG_OK);
    const int64_t cut[4] = {0, n / 3, n / 2, n};
    for (int p = 0; p < 3; p++) {
        ag_edge_weights_t piece = a;
        piece.n_edges = cut[p + 1] - cut[p];
        piece.src = src + cut[p], piece.dst = dst + cut[p], piece.weight = ws + cut[p];
        ck_assert_int_eq(ag_heatmap_bins_add(b, &piece, NULL), AG_OK);
    }
    ck_assert_int_eq(ag_draw_heatmap_bins(&pieces, b, NULL, "pieces", NULL, NULL), AG_OK);
    ck_assert_str_eq(whole, pieces);
    ag_svg_free(pieces);
    /* the last edge again, right after itself: the same cell, more weight */
    ag_edge_weights_t again = a;
    again.n_edges = 1, again.src += n - 1, again.dst += n - 1, again.weight += n - 1;
    ck_assert_int_eq(ag_heatmap_bins_add(b, &again, NULL), AG_OK);
    ck_assert_int_eq(ag_draw_heatmap_bins(&pieces, b, NULL, "pieces", NULL, NULL), AG_OK);
    xmlDocPtr doc = svg_parse(pieces);
    xmlXPathObjectPtr blocks = svg_nodes(doc, "//s:rect[@class='block']");
    double edges = 0;
    for (int k = 0; k < blocks->nodesetval->nodeNr; k++)
        edges += svg_num_attr(blocks->nodesetval->nodeTab[k], "data-edges");
    ck_assert_double_eq(edges, (double)n);
    xmlXPathFreeObject(blocks);
    xmlFreeDoc(doc);
    ck_assert_str_ne(whole, pieces);
    /* refusals: other nodes, other heads, bins over N */
    ag_error_t err;
    ag_edge_weights_t other = a;
    other.n_nodes = N + 1;
    ck_assert_fails_with(ag_heatmap_bins_add(b, &other, &err), err, AG_EINVAL, "1201 nodes");
    other = a;
    other.head = 0;
    ck_assert_fails_with(ag_heatmap_bins_add(b, &other, &err), err, AG_EINVAL, "head 0 of 1");
    ag_heatmap_bins_t *none = (ag_heatmap_bins_t *)1;
    ck_assert_fails_with(ag_heatmap_bins_new(&none, 10, 11, &err), err, AG_EINVAL, "11 bins");
    ck_assert_ptr_null(none);
    ag_heatmap_bins_free(b);
    ag_svg_free(whole), ag_svg_free(pieces);
    free(src), free(dst), free(pair), free(w), free(ws);
}
END_TEST

START_TEST(test_graph_paths)
{
    ag_edge_weights_t a = small_edges(NULL);
    double xy[2 * N5];
    ck_assert_int_eq(ag_layout_fr(xy, N5, E5, src5, dst5, 3, NULL), AG_OK);
    for (int pass = 0; pass < 2; pass++) {   /* a layout, then an arc diagram */
        const ag_graph_opts_t o = {pass ? NULL : xy, 0, NULL};
        char *svg;
        ck_assert_int_eq(ag_draw_graph(&svg, &a, &o, NULL), AG_OK);
        xmlDocPtr doc = svg_parse(svg);
        xmlXPathObjectPtr p = svg_nodes(doc, "//s:path[@class='edge']");
        ck_assert_int_eq(p->nodesetval->nodeNr, E5);   /* each slot of the multi-edge too */
        ck_assert_int_eq(svg_count(doc, "//s:circle[@class='node']"), N5);
        double wt[E5], width[E5], op[E5];
        for (int k = 0; k < E5; k++) {
            xmlNodePtr node = p->nodesetval->nodeTab[k];
            wt[k] = svg_num_attr(node, "data-weight");
            width[k] = svg_num_attr(node, "stroke-width");
            op[k] = svg_num_attr(node, "opacity");
            char d[16];
            ck_assert_str_ne(svg_attr(node, "d", d, sizeof d), "");
        }
        for (int i = 0; i < E5; i++)
            for (int j = 0; j < E5; j++)
                if (wt[i] < wt[j]) {   /* strictly where the 3 decimals can show it */
                    const int apart = wt[j] - wt[i] > 0.01;
                    ck_assert_msg(apart ? width[i] < width[j] : width[i] <= width[j],
                                  "weight %g drawn wider than %g", wt[i], wt[j]);
                    ck_assert(apart ? op[i] < op[j] : op[i] <= op[j]);
                }
        /* arrows on every edge but the self-loop */
        ck_assert_int_eq(svg_count(doc, "//s:path[@class='edge' and @marker-end]"), E5 - 1);
        xmlXPathFreeObject(p);
        xmlFreeDoc(doc);
        ag_svg_free(svg);
    }
}
END_TEST

/* Nodes coloured by class: Tableau's colours in turn (class 12 as class 2), the
   class in data-class, no colour for -1; a class below -1 refused. */
START_TEST(test_graph_classes)
{
    ag_edge_weights_t a = small_edges(NULL);
    const int64_t classes[N5] = {0, 2, -1, 12, 2};
    const char *want[N5] = {"#1f77b4", "#2ca02c", NULL, "#2ca02c", "#2ca02c"};
    const ag_graph_opts_t o = {NULL, 0, classes};
    char *svg;
    ck_assert_int_eq(ag_draw_graph(&svg, &a, &o, NULL), AG_OK);
    xmlDocPtr doc = svg_parse(svg);
    xmlXPathObjectPtr p = svg_nodes(doc, "//s:circle[@class='node']");
    ck_assert_int_eq(p->nodesetval->nodeNr, N5);
    for (int i = 0; i < N5; i++) {
        xmlNodePtr node = p->nodesetval->nodeTab[i];
        char id[16], fill[16], cls[16];
        ck_assert_int_eq(atoi(svg_attr(node, "data-id", id, sizeof id)), i);
        svg_attr(node, "fill", fill, sizeof fill);
        svg_attr(node, "data-class", cls, sizeof cls);
        if (want[i]) {
            ck_assert_str_eq(fill, want[i]);
            ck_assert_int_eq(atoll(cls), classes[i]);
        } else {
            ck_assert_str_eq(fill, "");   /* the group's grey */
            ck_assert_str_eq(cls, "");
        }
    }
    xmlXPathFreeObject(p);
    xmlFreeDoc(doc);
    ag_svg_free(svg);
    const int64_t bad[N5] = {0, 1, -2, 0, 0};
    const ag_graph_opts_t ob = {NULL, 0, bad};
    ag_error_t err;
    ck_assert_fails_with(ag_draw_graph(&svg, &a, &ob, &err), err, AG_EINVAL,
                         "node 2's class is -2; expected 0, 1, ... or -1 (none)");
}
END_TEST

START_TEST(test_layout_seeded)
{
    double a[2 * N5], b[2 * N5], c[2 * N5];
    ck_assert_int_eq(ag_layout_fr(a, N5, E5, src5, dst5, 11, NULL), AG_OK);
    ck_assert_int_eq(ag_layout_fr(b, N5, E5, src5, dst5, 11, NULL), AG_OK);
    ck_assert_int_eq(ag_layout_fr(c, N5, E5, src5, dst5, 12, NULL), AG_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    ck_assert(memcmp(a, c, sizeof a) != 0);
    for (int i = 0; i < 2 * N5; i++)
        ck_assert(a[i] >= 0 && a[i] <= 1);
    /* the same picture, byte for byte */
    ag_edge_weights_t e = small_edges(NULL);
    const ag_graph_opts_t o = {a, 0, NULL};
    char *s1, *s2;
    ck_assert_int_eq(ag_draw_graph(&s1, &e, &o, NULL), AG_OK);
    ck_assert_int_eq(ag_draw_graph(&s2, &e, &o, NULL), AG_OK);
    ck_assert_str_eq(s1, s2);
    ag_svg_free(s1), ag_svg_free(s2);
}
END_TEST

START_TEST(test_errors)
{
    ag_edge_weights_t a = small_edges(NULL);
    char *svg = (char *)1;
    ag_error_t err;
    int64_t bad_src[E5];
    memcpy(bad_src, src5, sizeof bad_src);
    bad_src[3] = 5;
    a.src = bad_src;
    ck_assert_fails_with(ag_draw_heatmap(&svg, &a, NULL, &err), err, AG_EINVAL, "edge 3 is 5 -> 1");
    ck_assert_ptr_null(svg);
    a = small_edges(NULL);
    heads5[7] = NAN;
    ck_assert_fails_with(ag_draw_graph(&svg, &a, NULL, &err), err, AG_EINVAL,
                         "edge 3 (head 1) is nan");
    a = small_edges(NULL);
    a.head = 2;
    ck_assert_fails_with(ag_draw_heatmap(&svg, &a, NULL, &err), err, AG_EINVAL, "head 2 of 2");
    a.head = -1, a.n_nodes = 0;
    ck_assert_fails_with(ag_draw_heatmap(&svg, &a, NULL, &err), err, AG_EINVAL, "0 nodes");
    a = small_edges(NULL);
    const ag_heatmap_opts_t neg = {.vmax = -1};
    ck_assert_fails_with(ag_draw_heatmap(&svg, &a, &neg, &err), err, AG_EINVAL, "vmax -1");
    const ag_heatmap_opts_t upside_down = {.log_scale = 1, .vmin = 0.5, .vmax = 0.1};
    ck_assert_fails_with(ag_draw_heatmap(&svg, &a, &upside_down, &err), err, AG_EINVAL,
                         "vmin below vmax");
    a.n_nodes = AG_GRAPH_MAX_NODES + 1;
    ck_assert_fails_with(ag_draw_graph(&svg, &a, NULL, &err), err, AG_ELIMIT, "heatmap");
    ck_assert_fails_with(ag_layout_fr(NULL, 3, 0, NULL, NULL, 1, &err), err, AG_EINVAL, "layout");
    ck_assert_fails_with(ag_draw_panels(&svg, NULL, 0, NULL, &err), err, AG_EINVAL, "0 panels");
    ck_assert_fails_with(ag_draw_rounds(&svg, NULL, NULL, NULL, 0, NULL, &err), err, AG_EINVAL,
                         "0 rounds");
    ck_assert_ptr_null(svg);
}
END_TEST

START_TEST(test_save_atomic)
{
    ag_error_t err;
    const char *path = tmp_path("pic.svg");
    write_text(path, "old");
    ck_assert_int_eq(ag_svg_save(path, "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n", &err),
                     AG_OK);
    char *text = read_text(path);
    ck_assert_str_eq(text, "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n");
    free(text);
    /* the permissions fopen gives (0666 less the umask), and the umask untouched */
    const mode_t mask = umask(027);
    const char *fresh = tmp_path("fresh.svg");
    ck_assert_int_eq(ag_svg_save(fresh, "<svg/>", &err), AG_OK);
    struct stat st;
    ck_assert_int_eq(stat(fresh, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0640);
    ck_assert_int_eq(umask(mask), 027);
    /* a folder that is not there: refused, nothing left behind */
    ck_assert_fails_with(ag_svg_save(tmp_path("no/such/pic.svg"), "x", &err), err, AG_EIO,
                         "cannot create");
    ck_assert_fails_with(ag_svg_save(tmp_path(""), "x", &err), err, AG_EIO, "directory");
    ck_assert_fails_with(ag_svg_save(path, NULL, &err), err, AG_EINVAL, "no picture");
    text = read_text(path);   /* still the last good picture */
    ck_assert_ptr_nonnull(strstr(text, "<svg"));
    free(text);
    /* an existing file keeps its permissions; a symlink stays a link and its
       file gets the picture (a rename over the link replaced it before) */
    ck_assert_int_eq(chmod(path, 0604), 0);
    const char *link = tmp_path("link.svg");
    unlink(link);
    ck_assert_int_eq(symlink(path, link), 0);
    ck_assert_int_eq(ag_svg_save(link, "<svg>new</svg>", &err), AG_OK);
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0604);
    text = read_text(path);
    ck_assert_str_eq(text, "<svg>new</svg>");
    free(text);
    /* a device is written in place, and stays one */
    ck_assert_int_eq(ag_svg_save("/dev/null", "<svg/>", &err), AG_OK);
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    ck_assert(S_ISCHR(st.st_mode));
    /* no temporary left beside the pictures */
    DIR *dir = opendir(tmp_path(""));
    ck_assert_ptr_nonnull(dir);
    for (struct dirent *e; (e = readdir(dir));)
        ck_assert_msg(!strstr(e->d_name, ".svg."), "left behind: %s", e->d_name);
    closedir(dir);
}
END_TEST

START_TEST(test_curves)
{
    const double round[5] = {1, 2, 3, 4, 5}, change[5] = {0.4, 0.03, 6e-4, 0, 2e-7};
    const double entropy[5] = {0.04, 0.004, 0.0026, 0.0026, NAN};
    char *svg;
    ck_assert_int_eq(ag_draw_rounds(&svg, round, change, entropy, 5, "t", NULL), AG_OK);
    xmlDocPtr doc = svg_parse(svg);
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='panel']"), 2);
    /* the log panel leaves out the zero: 4 points; the NaN entropy is a gap */
    ck_assert_int_eq(svg_count(doc, "(//s:g[@class='panel'])[1]//s:circle"), 4);
    ck_assert_int_eq(svg_count(doc, "(//s:g[@class='panel'])[2]//s:circle"), 4);
    ck_assert_int_eq(svg_count(doc, "//s:text[.='1e-7']"), 1);
    xmlFreeDoc(doc);
    ag_svg_free(svg);
    /* nothing positive to put on a log scale: said, not drawn */
    const double zeros[2] = {0, 0};
    ck_assert_int_eq(ag_draw_rounds(&svg, round, zeros, NULL, 2, NULL, NULL), AG_OK);
    doc = svg_parse(svg);
    ck_assert_int_eq(svg_count(doc, "//s:text[.='no positive values to draw']"), 1);
    xmlFreeDoc(doc);
    ag_svg_free(svg);
}
END_TEST

START_TEST(test_mask_grid)
{
    /* against a dense count: causal & window on 23 nodes, grids that do and do
       not divide N */
    static const char *const specs[] = {"causal", "window:4", "causal&strided:3+global:1"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (int64_t g = 1; g <= 23; g += 5) {
            ag_pattern_t *p;
            ag_nbhd_t nb;
            ck_assert_int_eq(ag_pattern_parse(&p, specs[s], NULL), AG_OK);
            ck_assert_int_eq(ag_nbhd_from_pattern(&nb, p, 23, AG_SELF_KEEP, NULL), AG_OK);
            double fill[23 * 23], count[23 * 23] = {0}, area[23 * 23] = {0};
            ck_assert_int_eq(ag_mask_grid(fill, g, &nb, NULL), AG_OK);
            int64_t *src = malloc((size_t)nb.n_edges * sizeof *src);
            ag_nbhd_sources(&nb, 0, 23, src);
            for (int64_t i = 0; i < 23; i++) {
                for (int64_t e = nb.edge_ptr[i]; e < nb.edge_ptr[i + 1]; e++)
                    count[(i * g / 23) * g + src[e] * g / 23] += 1;
                for (int64_t j = 0; j < 23; j++)
                    area[(i * g / 23) * g + j * g / 23] += 1;
            }
            for (int64_t b = 0; b < g * g; b++)
                ck_assert_double_eq_tol(fill[b], count[b] / area[b], 1e-12);
            free(src);
            ag_nbhd_destroy(&nb);
            ag_pattern_free(p);
        }
}
END_TEST

START_TEST(test_compare_picture)
{
    const char *names[2] = {"causal", "window:<2>"};
    const char *fig_names[2] = {"edges", "rel L2"};
    const double masks[2 * 4] = {1, 0, 1, 1, 1, 0, 0.5, 1};
    const double figures[4] = {3, NAN, 2, 0.25};
    const ag_compare_picture_t c = {2, names, 2, 2, masks, 2, fig_names, figures, "cmp"};
    char *svg;
    ck_assert_int_eq(ag_draw_compare(&svg, &c, NULL), AG_OK);
    xmlDocPtr doc = svg_parse(svg);
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='mask']"), 2);
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='chart']"), 2);
    ck_assert_int_eq(svg_count(doc, "//s:rect[@class='bar']"), 3);   /* NaN: no bar */
    ck_assert_int_eq(svg_count(doc, "//s:g[@class='mask' and @data-name='window:<2>']"), 1);
    xmlFreeDoc(doc);
    ag_svg_free(svg);
}
END_TEST

START_TEST(test_colormap)
{
    /* viridis' lightness rises (at steps of 0.01: rounding to 8 bits jitters
       finer ones); the grey is none of its colours */
    double last = -1;
    const ag_rgb_t g = ag_colormap_nonedge();
    for (int k = 0; k <= 100; k++) {
        const ag_rgb_t c = ag_colormap_viridis(k / 100.0);
        const double lum = 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b;
        ck_assert_msg(lum > last, "viridis gets darker at %g", k / 100.0);
        last = lum;
        ck_assert(abs(c.r - g.r) + abs(c.g - g.g) + abs(c.b - g.b) > 60);
    }
    const ag_rgb_t lo = ag_colormap_viridis(NAN), hi = ag_colormap_viridis(7);
    ck_assert(lo.r == 0x44 && lo.g == 0x01 && lo.b == 0x54);
    ck_assert(hi.r == 0xfd && hi.g == 0xe7 && hi.b == 0x25);
}
END_TEST

Suite *draw_suite(void)
{
    Suite *s = suite_create("draw");
    TCase *t = tcase_create("draw");
    tcase_add_test(t, test_heatmap_cells);
    tcase_add_test(t, test_heatmap_one_head);
    tcase_add_test(t, test_heatmap_log_scale);
    tcase_add_test(t, test_labels_escaped);
    tcase_add_test(t, test_heatmap_binned);
    tcase_add_test(t, test_heatmap_pieces);
    tcase_add_test(t, test_graph_paths);
    tcase_add_test(t, test_graph_classes);
    tcase_add_test(t, test_layout_seeded);
    tcase_add_test(t, test_errors);
    tcase_add_test(t, test_save_atomic);
    tcase_add_test(t, test_curves);
    tcase_add_test(t, test_mask_grid);
    tcase_add_test(t, test_compare_picture);
    tcase_add_test(t, test_colormap);
    suite_add_tcase(s, t);
    return s;
}
