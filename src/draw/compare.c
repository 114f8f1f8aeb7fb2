/* Masks side by side, and the compare table's figures as bars. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "draw/svg.h"

#define THUMB 120.0        /* a mask's side in pixels */
#define THUMB_COL 170.0    /* the column a mask takes */
#define THUMBS_PER_ROW 6
#define BAR_ROW 16.0
#define BAR_NAMES 150.0    /* room for the connectivity names left of the bars */
#define BAR_LEN 170.0
#define CHARTS_PER_ROW 3


/* First node of block b of g blocks over N nodes. */
static int64_t first(int64_t b, int64_t g, int64_t N)
{
    return (b * N + g - 1) / g;
}

int ag_mask_grid(double *fill, int64_t grid, const ag_nbhd_t *nb, ag_error_t *err)
{
    if (!fill || !nb || nb->n_nodes < 1 || grid < 1 || grid > nb->n_nodes)
        return ag_fail(err, AG_EINVAL, "mask grid: %lld blocks for %lld nodes; expected 1..N",
                       (long long)grid, nb ? (long long)nb->n_nodes : 0LL);
    const int64_t N = nb->n_nodes, g = grid;
    memset(fill, 0, (size_t)(g * g) * sizeof *fill);
    for (int64_t i = 0; i < N; i++) {
        double *row = fill + (i * g / N) * g;
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++) {
            /* a run of sources split at the column blocks it crosses */
            int64_t j = nb->run_src[r];
            const int64_t end = j + nb->run_len[r];
            while (j < end) {
                const int64_t b = j * g / N, stop = first(b + 1, g, N);
                const int64_t upto = stop < end ? stop : end;
                row[b] += (double)(upto - j);
                j = upto;
            }
        }
    }
    for (int64_t a = 0; a < g; a++)
        for (int64_t b = 0; b < g; b++) {
            const double area = (double)(first(a + 1, g, N) - first(a, g, N)) *
                                (double)(first(b + 1, g, N) - first(b, g, N));
            fill[a * g + b] = fmin(1, fill[a * g + b] / area);   /* multi-edges count once */
        }
    return AG_OK;
}

/* The colour of a block filled f (0..1), quantised so equal neighbours merge. */
static ag_rgb_t mask_colour(double f)
{
    const double t = round(f * 16) / 16;
    return (ag_rgb_t){(uint8_t)lround(255 - t * (255 - 0x1f)),
                      (uint8_t)lround(255 - t * (255 - 0x3b)),
                      (uint8_t)lround(255 - t * (255 - 0x73))};
}

static int same(ag_rgb_t x, ag_rgb_t y)
{
    return x.r == y.r && x.g == y.g && x.b == y.b;
}

static void draw_mask(svg_t *s, const ag_compare_picture_t *c, int k, double x, double y)
{
    const int64_t g = c->grid;
    const double cs = THUMB / (double)g;
    const double *m = c->masks + (int64_t)k * g * g;
    char buf[96];
    svg_printf(s, "<g class=\"mask\" data-name=\"");
    svg_escaped(s, c->names[k]);
    svg_printf(s, "\">\n");
    svg_text(s, x + THUMB / 2, y - 6, 11, "middle", "font-weight=\"bold\"",
             svg_clip(c->names[k], 26, buf, sizeof buf));
    svg_printf(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n",
               x, y, THUMB, THUMB);
    for (int64_t a = 0; a < g; a++)
        for (int64_t b = 0; b < g;) {
            int64_t e = b + 1;
            const ag_rgb_t col = mask_colour(m[a * g + b]);
            while (e < g && same(mask_colour(m[a * g + e]), col))
                e++;
            if (!same(col, mask_colour(0))) {
                char hex[8];
                svg_printf(s, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                           "fill=\"%s\"/>\n", x + b * cs, y + a * cs, (e - b) * cs, cs,
                           svg_hex(col, hex));
            }
            b = e;
        }
    svg_printf(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
               "stroke=\"#444444\" stroke-width=\"0.75\"/>\n</g>\n", x, y, THUMB, THUMB);
}

static void draw_chart(svg_t *s, const ag_compare_picture_t *c, int f, double x, double y)
{
    double lo = 0, hi = 0;
    for (int k = 0; k < c->n_conns; k++) {
        const double v = c->figures[k * c->n_figures + f];
        if (isfinite(v))
            lo = fmin(lo, v), hi = fmax(hi, v);
    }
    const double span = hi > lo ? hi - lo : 1, zero = x + BAR_NAMES + (0 - lo) / span * BAR_LEN;
    svg_printf(s, "<g class=\"chart\" data-figure=\"");
    svg_escaped(s, c->figure_names[f]);
    svg_printf(s, "\">\n");
    svg_text(s, x, y, 11, NULL, "font-weight=\"bold\"", c->figure_names[f]);
    for (int k = 0; k < c->n_conns; k++) {
        const double v = c->figures[k * c->n_figures + f], row = y + 8 + k * BAR_ROW;
        char buf[96], num[32];
        svg_text(s, x + BAR_NAMES - 6, row + 11, 10, "end", NULL,
                 svg_clip(c->names[k], 22, buf, sizeof buf));
        if (!isfinite(v)) {
            svg_text(s, zero + 4, row + 11, 10, NULL, "fill=\"#777777\"", "\xE2\x80\x93");
            continue;
        }
        const double len = fabs(v) / span * BAR_LEN, bx = v < 0 ? zero - len : zero;
        svg_printf(s, "<rect class=\"bar\" data-conn=\"%d\" data-value=\"%.6g\" x=\"%.2f\" "
                   "y=\"%.2f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"/>\n", k, v, bx, row + 2,
                   len, BAR_ROW - 4, svg_category(k));
        svg_text(s, (v < 0 ? zero : bx + len) + 4, row + 11, 10, NULL, NULL, svg_num(v, num));
    }
    svg_printf(s, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#444444\"/>\n"
               "</g>\n", zero, y + 8, zero, y + 8 + c->n_conns * BAR_ROW);
}

int ag_draw_compare(char **svg, const ag_compare_picture_t *c, ag_error_t *err)
{
    *svg = NULL;
    if (!c || c->n_conns < 1 || !c->names || c->n_figures < 0 ||
        (c->n_figures && (!c->figures || !c->figure_names)))
        return ag_fail(err, AG_EINVAL, "compare picture: expected at least one connectivity "
                       "with its name, and figure names and values");
    if (c->grid < 1 || c->grid > 1024 || !c->masks)
        return ag_fail(err, AG_EINVAL, "compare picture: mask grid %lld; expected 1..1024 with "
                       "the masks", (long long)c->grid);
    for (int k = 0; k < c->n_conns; k++)
        if (!c->names[k])
            return ag_fail(err, AG_EINVAL, "compare picture: connectivity %d has no name", k);
    const int per_row = c->n_conns < THUMBS_PER_ROW ? c->n_conns : THUMBS_PER_ROW;
    const int thumb_rows = (c->n_conns + THUMBS_PER_ROW - 1) / THUMBS_PER_ROW;
    const int charts = c->n_figures, chart_cols = charts < CHARTS_PER_ROW ? charts : CHARTS_PER_ROW;
    const double chart_w = BAR_NAMES + BAR_LEN + 60, chart_h = 24 + c->n_conns * BAR_ROW;
    const double top = c->title ? 64 : 44, thumbs_h = thumb_rows * (THUMB + 34);
    const double width = fmax(20 + per_row * THUMB_COL, 20 + chart_cols * chart_w);
    const double height = top + thumbs_h + ((charts + CHARTS_PER_ROW - 1) / CHARTS_PER_ROW) *
                                               chart_h + 20;
    svg_t s;
    svg_begin(&s, width, height);
    if (c->title)
        svg_text(&s, 10, 20, 15, NULL, "font-weight=\"bold\"", c->title);
    char line[160];
    snprintf(line, sizeof line, "masks of %lld nodes (destination i down, source j across; "
             "darker: more of the block attends)", (long long)c->n_nodes);
    svg_text(&s, 10, c->title ? 38 : 18, 11, NULL, "fill=\"#555555\"", line);
    for (int k = 0; k < c->n_conns; k++)
        draw_mask(&s, c, k, 20 + (k % THUMBS_PER_ROW) * THUMB_COL,
                  top + (k / THUMBS_PER_ROW) * (THUMB + 34));
    for (int f = 0; f < charts; f++)
        draw_chart(&s, c, f, 10 + (f % CHARTS_PER_ROW) * chart_w,
                   top + thumbs_h + (f / CHARTS_PER_ROW) * chart_h + 6);
    return svg_finish(&s, svg, err);
}
