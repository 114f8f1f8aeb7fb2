/*
 * The attention heatmap: destinations (rows) x sources (columns), a cell per
 * distinct edge coloured by its weight on a hatched grey "no edge" ground,
 * binned into blocks when there are too many nodes or cells to draw one by one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "draw/heatmap.h"

#define LABEL_CHARS 24    /* longer labels are cut */
#define MATRIX_PX 720.0   /* about the matrix's side */
#define TOOLTIPS_MAX 2000 /* cells with a <title> (hover text) */

static int by_dst_src(const void *a, const void *b)
{
    const cell_t *x = a, *y = b;
    if (x->dst != y->dst)
        return (x->dst > y->dst) - (x->dst < y->dst);
    return (x->src > y->src) - (x->src < y->src);
}

/* The edges as cells sorted by (dst, src), multi-edges added up: *n cells. */
static cell_t *merge_cells(const ag_edge_weights_t *a, int64_t *n, ag_error_t *err)
{
    cell_t *c = ag_alloc(a->n_edges + 1, sizeof *c, err, "heatmap");
    if (!c)
        return NULL;
    for (int64_t k = 0; k < a->n_edges; k++)
        c[k] = (cell_t){a->dst[k], a->src[k], edges_weight(a, k)};
    qsort(c, (size_t)a->n_edges, sizeof *c, by_dst_src);
    int64_t m = 0;
    for (int64_t k = 0; k < a->n_edges; k++) {
        if (m && c[m - 1].dst == c[k].dst && c[m - 1].src == c[k].src)
            c[m - 1].w += c[k].w;
        else
            c[m++] = c[k];
    }
    *n = m;
    return c;
}

/* The geometry: g rows and columns of cs pixels from (mx, my). */
typedef struct {
    int64_t N, g;          /* nodes; rows (= columns): N, or the blocks */
    int binned;
    double cs, mx, my, width, height, font, head;
    int64_t every;         /* a label every this many rows */
    double vmax;
    int log_scale;
    double vmin;           /* log scale: the bottom */
} frame_t;

/* Where weight w falls on the colour scale, 0 .. 1. */
static double scale_at(const frame_t *f, double w)
{
    if (!f->log_scale)
        return w / f->vmax;
    if (!(w > f->vmin))
        return 0;
    return (log10(w) - log10(f->vmin)) / (log10(f->vmax) - log10(f->vmin));
}

/* First node of block b of g over N nodes (node i is in block i*g/N). */
static int64_t block_first(int64_t b, int64_t g, int64_t N)
{
    return (b * N + g - 1) / g;
}

static const char *row_label(const ag_edge_weights_t *a, const frame_t *f, int64_t r,
                             char *buf, size_t size)
{
    char num[32];
    const int64_t i = f->binned ? block_first(r, f->g, f->N) : r;
    return svg_clip(edges_label(a, i, num), LABEL_CHARS, buf, size);
}

static void layout(frame_t *f, const ag_edge_weights_t *a)
{
    f->cs = fmin(28, fmax(1, floor(MATRIX_PX / (double)f->g * 4) / 4));
    f->font = fmin(12, fmax(9, f->cs * 0.75));
    f->every = (int64_t)ceil((f->font + 2) / f->cs);
    double lw = 0;
    char buf[128];
    for (int64_t r = 0; r < f->g; r += f->every)
        lw = fmax(lw, svg_text_width(row_label(a, f, r, buf, sizeof buf), f->font));
    const double head = f->head = a->title ? 44 : 24;
    f->mx = 10 + 18 + lw + 6;
    f->my = head + 18 + lw + 6;
    const double side = f->cs * (double)f->g;
    f->width = fmax(f->mx + side + 100,
                    20 + fmax(svg_text_width(a->title, 15), 0.62 * 11 * 80));
    f->height = f->my + fmax(side, 170) + 40;
}

static void draw_defs(svg_t *s)
{
    char grey[8];
    svg_printf(s, "<defs>\n<pattern id=\"nonedge\" width=\"6\" height=\"6\" "
               "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
               "<rect width=\"6\" height=\"6\" fill=\"%s\"/>"
               "<rect width=\"2\" height=\"6\" fill=\"#f2f2f2\"/></pattern>\n",
               svg_hex(ag_colormap_nonedge(), grey));
    svg_printf(s, "<linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">");
    for (int k = 0; k <= 10; k++) {
        char c[8];
        svg_printf(s, "<stop offset=\"%.1f\" stop-color=\"%s\"/>", k / 10.0,
                   svg_hex(ag_colormap_viridis(k / 10.0), c));
    }
    svg_printf(s, "</linearGradient>\n</defs>\n");
}

static void draw_labels(svg_t *s, const ag_edge_weights_t *a, const frame_t *f)
{
    char buf[128];
    const double side = f->cs * (double)f->g;
    svg_printf(s, "<g class=\"row-labels\" fill=\"#222222\">\n");
    for (int64_t r = 0; r < f->g; r += f->every)
        svg_text(s, f->mx - 4, f->my + (r + 0.5) * f->cs + f->font * 0.35, f->font, "end", NULL,
                 row_label(a, f, r, buf, sizeof buf));
    svg_printf(s, "</g>\n<g class=\"column-labels\" fill=\"#222222\">\n");
    for (int64_t c = 0; c < f->g; c += f->every) {
        const double x = f->mx + (c + 0.5) * f->cs + f->font * 0.35, y = f->my - 4;
        char rot[96];
        snprintf(rot, sizeof rot, "transform=\"rotate(-90 %.1f %.1f)\"", x, y);
        svg_text(s, x, y, f->font, "start", rot, row_label(a, f, c, buf, sizeof buf));
    }
    svg_printf(s, "</g>\n");
    char what[128], rot[96];
    if (f->binned)
        snprintf(what, sizeof what, " (blocks of about %.3g nodes)", (double)f->N / (double)f->g);
    else
        what[0] = '\0';
    char text[256];
    snprintf(text, sizeof text, "source j (key)%s", what);
    svg_text(s, f->mx + side / 2, f->head + 13, 12, "middle",
             "font-weight=\"bold\"", text);
    const double x = 20, y = f->my + side / 2;
    snprintf(rot, sizeof rot, "transform=\"rotate(-90 %.1f %.1f)\" font-weight=\"bold\"", x, y);
    snprintf(text, sizeof text, "destination i (query)%s", what);
    svg_text(s, x, y, 12, "middle", rot, text);
}

static void draw_colour_bar(svg_t *s, const frame_t *f)
{
    const double x = f->mx + f->cs * (double)f->g + 24, y = f->my, h = 120;
    svg_printf(s, "<g class=\"colorbar\">\n<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" "
               "height=\"%.0f\" fill=\"url(#scale)\" stroke=\"#444444\" stroke-width=\"0.5\"/>\n",
               x, y, h);
    double ticks[16];
    int n = 0;
    if (!f->log_scale)
        n = svg_ticks(0, f->vmax, 4, ticks, 16);
    else   /* the decades between the ends (the ends themselves when there is none) */
        for (double e = ceil(log10(f->vmin) - 1e-9); e <= log10(f->vmax) + 1e-9 && n < 16; e++)
            ticks[n++] = pow(10, e);
    if (f->log_scale && n < 2)
        ticks[0] = f->vmin, ticks[1] = f->vmax, n = 2;
    for (int k = 0; k < n; k++) {
        const double ty = y + h - fmin(1, scale_at(f, ticks[k])) * h;
        char num[32];
        svg_printf(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>",
                   x + 14, ty, x + 18, ty);
        svg_text(s, x + 20, ty + 3.5, 10, NULL, NULL, svg_num(ticks[k], num));
    }
    svg_text(s, x, y - 10, 10, NULL, NULL, f->log_scale ? "weight (log)" : "weight");
    svg_printf(s, "<rect class=\"legend-nonedge\" x=\"%.1f\" y=\"%.1f\" width=\"14\" "
               "height=\"14\" fill=\"url(#nonedge)\" stroke=\"#444444\" stroke-width=\"0.5\"/>\n",
               x, y + h + 16);
    svg_text(s, x + 18, y + h + 27, 10, NULL, NULL, "no edge");
    svg_printf(s, "</g>\n");
}

static void draw_cells(svg_t *s, const ag_edge_weights_t *a, const frame_t *f,
                       const cell_t *c, int64_t n)
{
    svg_printf(s, "<g class=\"cells\">\n");
    for (int64_t k = 0; k < n; k++) {
        char col[8], w[32];
        svg_printf(s, "<rect class=\"edge\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                   "fill=\"%s\" data-dst=\"%lld\" data-src=\"%lld\" data-weight=\"%.6g\"",
                   f->mx + c[k].src * f->cs, f->my + c[k].dst * f->cs, f->cs, f->cs,
                   svg_hex(ag_colormap_viridis(scale_at(f, c[k].w)), col), (long long)c[k].dst,
                   (long long)c[k].src, c[k].w);
        if (n <= TOOLTIPS_MAX) {
            char d[32], sname[32];
            svg_printf(s, "><title>");
            svg_escaped(s, edges_label(a, c[k].dst, d));
            svg_printf(s, " \xE2\x86\x90 ");   /* ← */
            svg_escaped(s, edges_label(a, c[k].src, sname));
            svg_printf(s, ": %s</title></rect>\n", svg_num(c[k].w, w));
        } else {
            svg_printf(s, "/>\n");
        }
    }
    svg_printf(s, "</g>\n");
}

/* Binned: the mean weight of the edges in each block (sum[g*g], count[g*g]). */
static void draw_blocks(svg_t *s, const frame_t *f, const double *sum, const int64_t *count)
{
    svg_printf(s, "<g class=\"blocks\">\n");
    for (int64_t r = 0; r < f->g; r++)
        for (int64_t c = 0; c < f->g; c++) {
            const int64_t n = count[r * f->g + c];
            if (!n)
                continue;
            const double mean = sum[r * f->g + c] / (double)n;
            char col[8];
            svg_printf(s, "<rect class=\"block\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                       "height=\"%.2f\" fill=\"%s\" data-edges=\"%lld\" data-weight=\"%.6g\"/>\n",
                       f->mx + c * f->cs, f->my + r * f->cs, f->cs, f->cs,
                       svg_hex(ag_colormap_viridis(scale_at(f, mean)), col), (long long)n, mean);
        }
    svg_printf(s, "</g>\n");
}

static void draw_header(svg_t *s, const ag_edge_weights_t *a, const frame_t *f, int64_t cells)
{
    char head[64], line[256];
    if (a->title)
        svg_text(s, 10, 20, 15, NULL, "font-weight=\"bold\"", a->title);
    if (f->binned)
        snprintf(line, sizeof line, "attention weight (%s): %lld nodes in %lld x %lld blocks, "
                 "each the mean of its edges", edges_head_text(a, head, sizeof head),
                 (long long)f->N, (long long)f->g, (long long)f->g);
    else
        snprintf(line, sizeof line, "attention weight (%s): %lld node%s, %lld edge%s",
                 edges_head_text(a, head, sizeof head), (long long)f->N, AG_PLURAL(f->N),
                 (long long)cells, AG_PLURAL(cells));
    if (f->log_scale)
        snprintf(line + strlen(line), sizeof line - strlen(line), "; log colour scale");
    svg_text(s, 10, a->title ? 38 : 18, 11, NULL, "fill=\"#555555\"", line);
}

int heatmap_opts_check(const ag_heatmap_opts_t *o, ag_error_t *err)
{
    if (o && (o->max_nodes < 0 || o->max_cells < 0 || o->bins < 0 || !(o->vmax >= 0) ||
              !(o->vmin >= 0) || (o->vmin > 0 && o->vmax > 0 && o->vmin >= o->vmax)))
        return ag_fail(err, AG_EINVAL, "heatmap: max_nodes %lld, max_cells %lld, bins %lld, "
                       "vmin %g, vmax %g; expected numbers >= 0, vmin below vmax",
                       (long long)o->max_nodes, (long long)o->max_cells, (long long)o->bins,
                       o->vmin, o->vmax);
    return AG_OK;
}

/* The ends of the colour scale: the options', or the weights drawn. */
static void scale_ends(frame_t *f, const cell_t *c, int64_t n, const ag_heatmap_bins_t *bins,
                       const ag_heatmap_opts_t *o)
{
    double top = 0, bottom = INFINITY;
    for (int64_t k = 0; k < (bins ? f->g * f->g : n); k++) {
        const double w = bins ? (bins->count[k] ? bins->sum[k] / (double)bins->count[k] : NAN)
                              : c[k].w;
        if (w > 0)
            top = fmax(top, w), bottom = fmin(bottom, w);
    }
    f->log_scale = o && o->log_scale;
    f->vmax = o && o->vmax > 0 ? o->vmax : top > 0 ? top : 1;
    f->vmin = o && o->vmin > 0 ? o->vmin : fmax(bottom, f->vmax * 1e-6);
    if (!(f->vmin < f->vmax))   /* one weight only, or none */
        f->vmin = f->vmax / 10;
}

int heatmap_render(char **svg, const ag_edge_weights_t *meta, const cell_t *c, int64_t n,
                   const ag_heatmap_bins_t *bins, const ag_heatmap_opts_t *o, ag_error_t *err)
{
    frame_t f = {.N = meta->n_nodes, .g = bins ? bins->g : meta->n_nodes};
    f.binned = f.g < f.N;
    scale_ends(&f, c, n, bins, o);
    layout(&f, meta);
    svg_t s;
    svg_begin(&s, f.width, f.height);
    draw_defs(&s);
    draw_header(&s, meta, &f, n);
    const double side = f.cs * (double)f.g;
    svg_printf(&s, "<rect class=\"nonedge\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
               "fill=\"url(#nonedge)\"/>\n", f.mx, f.my, side, side);
    if (bins)
        draw_blocks(&s, &f, bins->sum, bins->count);
    else
        draw_cells(&s, meta, &f, c, n);
    svg_printf(&s, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
               "stroke=\"#444444\" stroke-width=\"0.75\"/>\n", f.mx, f.my, side, side);
    draw_labels(&s, meta, &f);
    draw_colour_bar(&s, &f);
    return svg_finish(&s, svg, err);
}

int ag_draw_heatmap(char **svg, const ag_edge_weights_t *a, const ag_heatmap_opts_t *opts,
                    ag_error_t *err)
{
    *svg = NULL;
    int rc = edges_check(a, "heatmap", err);
    if (rc)
        return rc;
    const ag_heatmap_opts_t none = {0, 0, 0, 0, 0, 0};
    const ag_heatmap_opts_t *o = opts ? opts : &none;
    if ((rc = heatmap_opts_check(o, err)))
        return rc;
    int64_t n = 0;
    cell_t *c = merge_cells(a, &n, err);
    if (!c)
        return ag_alloc_status();
    const int64_t bins = o->bins ? o->bins : AG_HEATMAP_BINS;
    const int binned = (a->n_nodes > (o->max_nodes ? o->max_nodes : AG_HEATMAP_MAX_NODES) ||
                        n > (o->max_cells ? o->max_cells : AG_HEATMAP_MAX_CELLS)) &&
                       bins < a->n_nodes;
    ag_heatmap_bins_t *b = NULL;
    if (binned && !(rc = ag_heatmap_bins_new(&b, a->n_nodes, bins, err))) {
        b->heads = a->heads, b->head = a->head;
        for (int64_t k = 0; k < n; k++)
            bins_add_cell(b, c[k].dst, c[k].src, c[k].w);
    }
    if (!rc)
        rc = heatmap_render(svg, a, c, n, b, o, err);
    ag_heatmap_bins_free(b);
    free(c);
    return rc;
}
