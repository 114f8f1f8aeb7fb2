/* Line plots: panels of series side by side (convergence of rounds, training curves). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "draw/svg.h"

#define PLOT_W 360.0
#define PLOT_H 240.0
#define LEFT 62.0      /* room for the y ticks and label */
#define GAP 40.0       /* between panels */
#define LEGEND_LINE 15.0


typedef struct {
    double x0, x1, y0, y1;   /* data ranges (y in log10 for a log panel) */
    double px, py;           /* the plot area's top-left corner */
    int log_y;
    int integer_x;           /* every x is a whole number (rounds, epochs): whole ticks */
} axes_t;

static int usable(const ag_panel_t *p, double y)
{
    return isfinite(y) && (!p->log_y || y > 0);
}

/* Data ranges of a panel; 0 when it has no point to draw. */
static int ranges(const ag_panel_t *p, axes_t *a)
{
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    int integer_x = 1;
    for (int s = 0; s < p->n_series; s++)
        for (int64_t i = 0; i < p->series[s].n; i++) {
            const double x = p->series[s].x[i], y = p->series[s].y[i];
            if (!isfinite(x) || !usable(p, y))
                continue;
            const double v = p->log_y ? log10(y) : y;
            integer_x &= x == floor(x);
            x0 = fmin(x0, x), x1 = fmax(x1, x), y0 = fmin(y0, v), y1 = fmax(y1, v);
        }
    if (!(x0 <= x1))
        return 0;
    if (x1 == x0)
        x0 -= 0.5, x1 += 0.5;
    if (p->log_y) {
        y0 = floor(y0), y1 = ceil(y1);
        if (y1 == y0)
            y1 += 1;
    } else {
        const double pad = y1 > y0 ? (y1 - y0) * 0.06 : fmax(fabs(y0) * 0.1, 0.5);
        y0 -= pad, y1 += pad;
    }
    *a = (axes_t){x0, x1, y0, y1, 0, 0, p->log_y, integer_x};
    return 1;
}

static double to_px_x(const axes_t *a, double x)
{
    return a->px + (x - a->x0) / (a->x1 - a->x0) * PLOT_W;
}

static double to_px_y(const axes_t *a, double y)
{
    const double v = a->log_y ? log10(y) : y;
    return a->py + PLOT_H - (v - a->y0) / (a->y1 - a->y0) * PLOT_H;
}

static void draw_axes(svg_t *s, const ag_panel_t *p, const axes_t *a)
{
    char num[32];
    svg_printf(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
               "stroke=\"#444444\" stroke-width=\"0.75\"/>\n", a->px, a->py, PLOT_W, PLOT_H);
    double t[32];
    int n = svg_ticks(a->x0, a->x1, 6, t, 32);
    for (int k = 0; k < n; k++) {
        if (a->integer_x && t[k] != floor(t[k]))
            continue;
        const double x = to_px_x(a, t[k]);
        svg_printf(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>",
                   x, a->py + PLOT_H, x, a->py + PLOT_H + 4);
        svg_text(s, x, a->py + PLOT_H + 15, 10, "middle", NULL, svg_num(t[k], num));
    }
    if (a->log_y) {   /* a tick per decade (every other one past eight) */
        const int step = a->y1 - a->y0 > 8 ? 2 : 1;
        n = 0;
        for (double e = a->y0; e <= a->y1 && n < 32; e += step)
            t[n++] = pow(10, e);
    } else {
        n = svg_ticks(a->y0, a->y1, 5, t, 32);
    }
    for (int k = 0; k < n; k++) {
        const double y = to_px_y(a, t[k]);
        svg_printf(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>",
                   a->px, y, a->px + PLOT_W, y, a->px - 4, y, a->px, y);
        if (a->log_y)
            snprintf(num, sizeof num, "1e%d", (int)lround(log10(t[k])));
        else
            svg_num(t[k], num);
        svg_text(s, a->px - 6, y + 3.5, 10, "end", NULL, num);
    }
    if (p->title)
        svg_text(s, a->px + PLOT_W / 2, a->py - 8, 12, "middle", "font-weight=\"bold\"", p->title);
    if (p->xlabel)
        svg_text(s, a->px + PLOT_W / 2, a->py + PLOT_H + 32, 11, "middle", NULL, p->xlabel);
    if (p->ylabel) {
        char rot[96];
        const double x = a->px - LEFT + 14, y = a->py + PLOT_H / 2;
        snprintf(rot, sizeof rot, "transform=\"rotate(-90 %.1f %.1f)\"", x, y);
        svg_text(s, x, y, 11, "middle", rot, p->ylabel);
    }
}

static const char *series_colour(const ag_series_t *se, int k)
{
    return svg_category(se->colour >= 1 && se->colour <= 10 ? se->colour - 1 : k);
}

static void draw_series(svg_t *s, const ag_panel_t *p, const axes_t *a, int k,
                        const ag_series_t *se)
{
    const char *colour = series_colour(se, k);
    svg_printf(s, "<g class=\"series\" stroke=\"%s\" fill=\"%s\">\n<path fill=\"none\" "
               "stroke-width=\"1.8\"%s d=\"", colour, colour,
               se->dashed ? " stroke-dasharray=\"5 3\"" : "");
    int pen = 0;
    for (int64_t i = 0; i < se->n; i++) {
        if (!isfinite(se->x[i]) || !usable(p, se->y[i])) {
            pen = 0;   /* a gap */
            continue;
        }
        svg_printf(s, "%s%.2f,%.2f ", pen ? "L" : "M", to_px_x(a, se->x[i]),
                   to_px_y(a, se->y[i]));
        pen = 1;
    }
    svg_printf(s, "\"/>\n");
    for (int64_t i = 0; i < se->n && se->n <= 60; i++)
        if (isfinite(se->x[i]) && usable(p, se->y[i]))
            svg_printf(s, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.2\" stroke=\"none\"/>",
                       to_px_x(a, se->x[i]), to_px_y(a, se->y[i]));
    svg_printf(s, "</g>\n");
}

static void draw_legend(svg_t *s, const ag_panel_t *p, const axes_t *a)
{
    for (int k = 0, line = 0; k < p->n_series; k++) {
        if (!p->series[k].name)
            continue;
        const double y = a->py + PLOT_H + 48 + LEGEND_LINE * line++;
        svg_printf(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"2\"%s/>\n", a->px, y - 4, a->px + 22, y - 4,
                   series_colour(&p->series[k], k),
                   p->series[k].dashed ? " stroke-dasharray=\"5 3\"" : "");
        char buf[160];
        svg_text(s, a->px + 28, y, 10, NULL, NULL,
                 svg_clip(p->series[k].name, 60, buf, sizeof buf));
    }
}

int ag_draw_panels(char **svg, const ag_panel_t *panels, int n_panels, const char *title,
                   ag_error_t *err)
{
    *svg = NULL;
    if (!panels || n_panels < 1 || n_panels > 16)
        return ag_fail(err, AG_EINVAL, "curves: %d panels; expected 1 to 16", n_panels);
    int legend = 0;
    for (int k = 0; k < n_panels; k++) {
        const ag_panel_t *p = &panels[k];
        if (p->n_series < 0 || (p->n_series && !p->series))
            return ag_fail(err, AG_EINVAL, "curves: panel %d has %d series and no array", k,
                           p->n_series);
        int named = 0;
        for (int j = 0; j < p->n_series; j++) {
            const ag_series_t *se = &p->series[j];
            if (se->n < 0 || (se->n && (!se->x || !se->y)))
                return ag_fail(err, AG_EINVAL, "curves: series %d of panel %d has %lld points "
                               "and no x or y", j, k, (long long)se->n);
            named += se->name != NULL;
        }
        legend = named > legend ? named : legend;
    }
    const double top = title ? 56 : 36;
    const double width = n_panels * (LEFT + PLOT_W) + (n_panels - 1) * GAP + 30;
    const double height = top + PLOT_H + 44 + legend * LEGEND_LINE + 16;
    svg_t s;
    svg_begin(&s, width, height);
    if (title)
        svg_text(&s, 10, 20, 15, NULL, "font-weight=\"bold\"", title);
    for (int k = 0; k < n_panels; k++) {
        const ag_panel_t *p = &panels[k];
        axes_t a;
        const double px = 10 + LEFT + k * (LEFT + PLOT_W + GAP);
        svg_printf(&s, "<g class=\"panel\">\n");
        if (!ranges(p, &a)) {
            a = (axes_t){0, 1, 0, 1, px, top, 0, 0};
            draw_axes(&s, p, &a);
            svg_text(&s, px + PLOT_W / 2, top + PLOT_H / 2, 11, "middle", "fill=\"#777777\"",
                     p->log_y ? "no positive values to draw" : "no values to draw");
        } else {
            a.px = px, a.py = top;
            draw_axes(&s, p, &a);
            for (int j = 0; j < p->n_series; j++)
                draw_series(&s, p, &a, j, &p->series[j]);
            draw_legend(&s, p, &a);
        }
        svg_printf(&s, "</g>\n");
    }
    return svg_finish(&s, svg, err);
}

int ag_draw_rounds(char **svg, const double *round, const double *change,
                   const double *entropy, int64_t n, const char *title, ag_error_t *err)
{
    *svg = NULL;
    if (n < 1 || !round || !change)
        return ag_fail(err, AG_EINVAL, "rounds picture: %lld rounds; expected at least one, "
                       "with their numbers and changes", (long long)n);
    const ag_series_t c = {"relative change |X_r - X_r-1| / |X_r-1|", round, change, n, 0, 1};
    const ag_series_t e = {"mean attention entropy (nats)", round, entropy, n, 0, 3};
    const ag_panel_t panels[2] = {
        {"change per round (log scale)", "round", "relative change", 1, &c, 1},
        {"attention entropy", "round", "entropy (nats)", 0, &e, 1},
    };
    return ag_draw_panels(svg, panels, entropy ? 2 : 1, title, err);
}
