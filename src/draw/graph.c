/*
 * The graph itself: nodes at given positions (a layout) or on a line (an arc
 * diagram for sequences), one curved arrow per edge whose width and opacity
 * rise with its attention weight.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "draw/edges.h"

#define LABEL_CHARS 24
#define LABELS_MAX 400     /* more nodes: no labels, they would cover the picture */
#define EDGE_COLOUR "#1f3b73"
#define ARROW_PX 9.0
#define ARC_FLAT 0.7     /* an arc's height over half its span */

typedef struct {
    double *x, *y;           /* node centres in pixels */
    double r, font, width, height;
    int arcs;
    double vmax;
} canvas_t;

typedef struct {
    int64_t k;
    double w;
} order_t;

static int by_weight(const void *a, const void *b)
{
    const order_t *x = a, *y = b;
    if (x->w != y->w)
        return (x->w > y->w) - (x->w < y->w);
    return (x->k > y->k) - (x->k < y->k);
}

static double max_label_width(const ag_edge_weights_t *a, double font)
{
    double w = 0;
    char buf[128], num[32];
    for (int64_t i = 0; i < a->n_nodes && a->n_nodes <= LABELS_MAX; i++)
        w = fmax(w, svg_text_width(svg_clip(edges_label(a, i, num), LABEL_CHARS, buf,
                                            sizeof buf), font));
    return w;
}

/* Positions from a layout, scaled into a square that grows with N. */
static void place_layout(canvas_t *c, const ag_edge_weights_t *a, const double *xy, double top)
{
    const int64_t N = a->n_nodes;
    const double side = fmin(900, fmax(360, sqrt((double)N) * 90));
    c->r = fmin(10, fmax(2.5, side / sqrt((double)N) / 7));
    c->font = N > 100 ? 9 : 11;
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    for (int64_t i = 0; i < N; i++)
        for (int d = 0; d < 2; d++)
            lo[d] = fmin(lo[d], xy[2 * i + d]), hi[d] = fmax(hi[d], xy[2 * i + d]);
    const double lw = max_label_width(a, c->font), m = 20 + c->r;
    for (int64_t i = 0; i < N; i++) {
        const double u = hi[0] > lo[0] ? (xy[2 * i] - lo[0]) / (hi[0] - lo[0]) : 0.5;
        const double v = hi[1] > lo[1] ? (xy[2 * i + 1] - lo[1]) / (hi[1] - lo[1]) : 0.5;
        c->x[i] = m + u * side;
        c->y[i] = top + m + v * side;
    }
    c->width = 2 * m + side + lw + 8;
    c->height = top + 2 * m + side + 10;
}

/* Nodes on a line in id order; forward arcs above, backward arcs below. */
static void place_line(canvas_t *c, const ag_edge_weights_t *a, double top)
{
    const int64_t N = a->n_nodes;
    const double gap = fmin(60, fmax(4, 1000.0 / (double)N));
    double up = 0, down = 0;
    for (int64_t k = 0; k < a->n_edges; k++) {
        const double h = fabs((double)(a->dst[k] - a->src[k])) * gap / 2 * ARC_FLAT;
        if (a->src[k] < a->dst[k])
            up = fmax(up, h);
        else
            down = fmax(down, a->src[k] == a->dst[k] ? 0 : h);
    }
    c->r = fmin(6, fmax(2, gap / 5));
    c->font = gap >= 14 ? 11 : 9;
    const double lw = N <= LABELS_MAX ? max_label_width(a, c->font) * 0.71 : 0;
    up += 20 + c->r * 3, down = fmax(down, lw) + 20 + c->r * 3;
    const double left = 20 + fmax(c->r, lw * 0.71);
    for (int64_t i = 0; i < N; i++) {
        c->x[i] = left + gap * (double)i;
        c->y[i] = top + up;
    }
    c->width = left + gap * (double)(N - 1) + 40;
    c->height = top + up + down + 40;
    c->arcs = 1;
}

static void draw_defs(svg_t *s, const canvas_t *c)
{
    /* the arrow's tip stops at the node's rim: refX is in the viewBox's units
       (10 of them are ARROW_PX pixels) */
    svg_printf(s, "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"%.2f\" refY=\"5\" "
               "markerWidth=\"%.1f\" markerHeight=\"%.1f\" markerUnits=\"userSpaceOnUse\" "
               "orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"%s\"/></marker></defs>\n",
               10 + (c->r + 1) * 10 / ARROW_PX, ARROW_PX, ARROW_PX, EDGE_COLOUR);
}

static double edge_width(double t)
{
    return 0.4 + 4.6 * t;
}

static double edge_opacity(double t)
{
    return 0.12 + 0.88 * t;
}

/* The path of edge k from (xs, ys) to (xd, yd). */
static void edge_path(svg_t *s, const canvas_t *c, int64_t src, int64_t dst)
{
    const double xs = c->x[src], ys = c->y[src], xd = c->x[dst], yd = c->y[dst];
    if (src == dst) {   /* a loop above the node */
        const double r = c->r;
        svg_printf(s, "M%.2f,%.2f C%.2f,%.2f %.2f,%.2f %.2f,%.2f", xs - r * 0.7, ys - r * 0.7,
                   xs - r * 3, ys - r * 4.5, xs + r * 3, ys - r * 4.5, xs + r * 0.7,
                   ys - r * 0.7);
        return;
    }
    if (c->arcs) {
        const double rx = fabs(xd - xs) / 2;
        svg_printf(s, "M%.2f,%.2f A%.2f,%.2f 0 0 1 %.2f,%.2f", xs, ys, rx, rx * ARC_FLAT, xd, yd);
        return;
    }
    /* bend to the right of the direction, so u -> v and v -> u part */
    const double mx = (xs + xd) / 2, my = (ys + yd) / 2, dx = xd - xs, dy = yd - ys;
    svg_printf(s, "M%.2f,%.2f Q%.2f,%.2f %.2f,%.2f", xs, ys, mx - dy * 0.15, my + dx * 0.15,
               xd, yd);
}

static void draw_edges(svg_t *s, const ag_edge_weights_t *a, const canvas_t *c,
                       const order_t *order)
{
    svg_printf(s, "<g class=\"edges\" fill=\"none\" stroke=\"%s\" stroke-linecap=\"round\">\n",
               EDGE_COLOUR);
    for (int64_t n = 0; n < a->n_edges; n++) {
        const int64_t k = order[n].k;
        const double w = order[n].w, t = fmin(1, fmax(0, w / c->vmax));
        svg_printf(s, "<path class=\"edge\" data-src=\"%lld\" data-dst=\"%lld\" "
                   "data-weight=\"%.6g\" stroke-width=\"%.3f\" opacity=\"%.3f\"%s d=\"",
                   (long long)a->src[k], (long long)a->dst[k], w, edge_width(t), edge_opacity(t),
                   /* a loop needs no arrow to say where it goes */
                   a->src[k] == a->dst[k] ? "" : " marker-end=\"url(#arrow)\"");
        edge_path(s, c, a->src[k], a->dst[k]);
        svg_printf(s, "\"/>\n");
    }
    svg_printf(s, "</g>\n");
}

static void draw_nodes(svg_t *s, const ag_edge_weights_t *a, const canvas_t *c,
                       const int64_t *classes)
{
    svg_printf(s, "<g class=\"nodes\" fill=\"#f7f7f7\" stroke=\"#333333\" stroke-width=\"1\">\n");
    for (int64_t i = 0; i < a->n_nodes; i++) {
        svg_printf(s, "<circle class=\"node\" data-id=\"%lld\" cx=\"%.2f\" cy=\"%.2f\" "
                   "r=\"%.2f\"", (long long)i, c->x[i], c->y[i], c->r);
        if (classes && classes[i] >= 0)
            svg_printf(s, " data-class=\"%lld\" fill=\"%s\"", (long long)classes[i],
                       svg_category(classes[i]));
        svg_printf(s, "/>\n");
    }
    svg_printf(s, "</g>\n");
    if (a->n_nodes > LABELS_MAX)
        return;
    /* a white halo keeps labels readable over the edges */
    svg_printf(s, "<g class=\"labels\" fill=\"#111111\" stroke=\"#ffffff\" stroke-width=\"3\" "
               "paint-order=\"stroke\">\n");
    for (int64_t i = 0; i < a->n_nodes; i++) {
        char buf[128], num[32], rot[96];
        const char *l = svg_clip(edges_label(a, i, num), LABEL_CHARS, buf, sizeof buf);
        if (c->arcs) {
            const double x = c->x[i] - c->font * 0.3, y = c->y[i] + c->r + 4;
            snprintf(rot, sizeof rot, "transform=\"rotate(45 %.2f %.2f)\"", x, y);
            svg_text(s, x, y + c->font * 0.35, c->font, "start", rot, l);
        } else {
            svg_text(s, c->x[i] + c->r + 2, c->y[i] - c->r, c->font, "start", NULL, l);
        }
    }
    svg_printf(s, "</g>\n");
}

static void draw_header(svg_t *s, const ag_edge_weights_t *a, const canvas_t *c)
{
    char head[64], line[256], num[32];
    if (a->title)
        svg_text(s, 10, 20, 15, NULL, "font-weight=\"bold\"", a->title);
    snprintf(line, sizeof line, "%lld node%s, %lld edge%s; width and opacity: attention "
             "(%s), widest at %s", (long long)a->n_nodes, AG_PLURAL(a->n_nodes),
             (long long)a->n_edges, AG_PLURAL(a->n_edges), edges_head_text(a, head, sizeof head),
             svg_num(c->vmax, num));
    svg_text(s, 10, a->title ? 38 : 18, 11, NULL, "fill=\"#555555\"", line);
    if (c->arcs)
        svg_text(s, 10, c->height - 12, 10, NULL, "fill=\"#555555\"",
                 "nodes in order; arcs above go forward (to a later node), arcs below backward");
}

int ag_draw_graph(char **svg, const ag_edge_weights_t *a, const ag_graph_opts_t *opts,
                  ag_error_t *err)
{
    *svg = NULL;
    int rc = edges_check(a, "graph picture", err);
    if (rc)
        return rc;
    if (a->n_nodes > AG_GRAPH_MAX_NODES || a->n_edges > AG_GRAPH_MAX_EDGES)
        return ag_fail(err, AG_ELIMIT, "graph picture: %lld nodes and %lld edges; at most %d "
                       "nodes and %d edges make a readable picture (draw a heatmap instead)",
                       (long long)a->n_nodes, (long long)a->n_edges, AG_GRAPH_MAX_NODES,
                       AG_GRAPH_MAX_EDGES);
    const double vmax_opt = opts ? opts->vmax : 0;
    if (!(vmax_opt >= 0))
        return ag_fail(err, AG_EINVAL, "graph picture: vmax %g; expected a number >= 0",
                       vmax_opt);
    const double *xy = opts ? opts->xy : NULL;
    for (int64_t i = 0; xy && i < 2 * a->n_nodes; i++)
        if (!isfinite(xy[i]))
            return ag_fail(err, AG_EINVAL, "graph picture: node %lld's position is not finite",
                           (long long)i / 2);
    const int64_t *classes = opts ? opts->classes : NULL;
    for (int64_t i = 0; classes && i < a->n_nodes; i++)
        if (classes[i] < -1)
            return ag_fail(err, AG_EINVAL, "graph picture: node %lld's class is %lld; "
                           "expected 0, 1, ... or -1 (none)", (long long)i,
                           (long long)classes[i]);
    canvas_t c = {0};
    c.x = ag_alloc(2 * a->n_nodes, sizeof *c.x, err, "graph picture");
    order_t *order = ag_alloc(a->n_edges + 1, sizeof *order, err, "graph picture");
    if (!c.x || !order) {
        free(c.x), free(order);
        return ag_alloc_status();
    }
    c.y = c.x + a->n_nodes;
    double top = 0;
    for (int64_t k = 0; k < a->n_edges; k++) {
        order[k] = (order_t){k, edges_weight(a, k)};
        top = fmax(top, order[k].w);
    }
    qsort(order, (size_t)a->n_edges, sizeof *order, by_weight);   /* strong edges on top */
    c.vmax = vmax_opt > 0 ? vmax_opt : top > 0 ? top : 1;
    const double head = a->title ? 50 : 30;
    if (xy)
        place_layout(&c, a, xy, head);
    else
        place_line(&c, a, head);
    c.width = fmax(c.width, 20 + svg_text_width(a->title, 15));
    c.width = fmax(c.width, 20 + 0.62 * 11 * 90);   /* the line under the title */
    if (c.arcs)
        c.width = fmax(c.width, 20 + 0.62 * 10 * 80);
    svg_t s;
    svg_begin(&s, c.width, c.height);
    draw_defs(&s, &c);
    draw_header(&s, a, &c);
    draw_edges(&s, a, &c, order);
    draw_nodes(&s, a, &c, classes);
    free(c.x), free(order);
    return svg_finish(&s, svg, err);
}
