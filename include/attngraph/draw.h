/*
 * attngraph — pictures as SVG: attention heatmaps, graphs, curves, mask
 * comparisons. No igraph header needed (the layout is computed with igraph
 * inside the library, from plain edge arrays).
 *
 * Every ag_draw_* function makes a whole SVG document (self-contained UTF-8
 * XML, width and height in pixels on the root) in a malloc'ed, NUL-terminated
 * string *svg (NULL on failure; free with ag_svg_free), and nothing else:
 * ag_svg_save writes it to a file atomically. Labels are UTF-8 (invalid
 * bytes become U+FFFD) and XML-escaped. The same inputs give the same bytes.
 */
#ifndef ATTNGRAPH_DRAW_H
#define ATTNGRAPH_DRAW_H

#include <stdint.h>
#include "attngraph/core.h"

AG_BEGIN_DECLS

/* Frees a picture made by an ag_draw_* function (NULL is fine). */
void ag_svg_free(char *svg);

/*
 * Writes svg to path whole or not at all: through a temporary beside it,
 * renamed into place (an existing file stays as it was on failure); a device
 * or FIFO is written in place.
 */
int ag_svg_save(const char *path, const char *svg, ag_error_t *err);

/* ------------------------------------------------------------ colour maps */

typedef struct {
    uint8_t r, g, b;
} ag_rgb_t;

/* Viridis (perceptually uniform, its lightness rising with t) at t in [0, 1]
   (clamped; NaN gives the low end). */
ag_rgb_t ag_colormap_viridis(double t);
/* The colour of "no edge here": a neutral light grey that no viridis colour is. */
ag_rgb_t ag_colormap_nonedge(void);

/* ------------------------------------------------------- edge weights */

/*
 * Weighted edges to draw: edge k is src[k] -> dst[k] (dst attends to src),
 * with weights weight[k * heads + h] (attention is [E, H], as
 * ag_attention_weights and `run --attn` give it).
 */
typedef struct {
    int64_t n_nodes;
    int64_t n_edges;
    const int64_t *src, *dst;        /* [n_edges], in 0..n_nodes-1 */
    const float *weight;             /* [n_edges, heads]; finite */
    int64_t heads;                   /* >= 1 */
    int64_t head;                    /* the head drawn, or -1: the mean over heads */
    const char *const *labels;       /* [n_nodes] UTF-8, or NULL: node numbers */
    const char *title;               /* a line above the picture, or NULL */
} ag_edge_weights_t;

/* ---------------------------------------------------------------- heatmap */

#define AG_HEATMAP_MAX_NODES 1000     /* above: binned */
#define AG_HEATMAP_MAX_CELLS 20000    /* above (distinct edges): binned */
#define AG_HEATMAP_BINS 128           /* blocks per axis when binned */

typedef struct {
    int64_t max_nodes;   /* more nodes than this are binned (0: AG_HEATMAP_MAX_NODES) */
    int64_t max_cells;   /* so are more distinct (dst, src) cells (0: AG_HEATMAP_MAX_CELLS) */
    int64_t bins;        /* blocks per axis when binned (0: AG_HEATMAP_BINS) */
    double vmax;         /* weight at the top of the colour scale (0: the largest drawn) */
    int log_scale;       /* colour by log10 of the weight, vmin .. vmax (attention over
                            many sources is small everywhere: a linear scale is all dark) */
    double vmin;         /* log scale: the weight at the bottom (0: the smallest positive
                            drawn, at least vmax / 1e6); weights below it, 0 too, take the
                            lowest colour, which is still no "no edge" grey */
} ag_heatmap_opts_t;

/* The defaults (each 0 or NULL: see the fields). */
#define AG_HEATMAP_OPTS_INIT {0}

/*
 * Destinations (rows) x sources (columns): one cell per distinct (dst, src)
 * pair, <rect class="edge" data-dst data-src data-weight>, coloured by weight
 * (viridis, 0 .. vmax; the slots of a multi-edge add up, as attention to that
 * source), on a hatched grey background where there is no edge; a colour bar
 * with its scale. Above max_nodes nodes or max_cells cells the picture is
 * binned: each block of about N/bins nodes a side is one <rect class="block">
 * coloured by the mean weight of the edges inside (data-edges counts them);
 * blocks without edges stay grey. opts may be NULL.
 */
int ag_draw_heatmap(char **svg, const ag_edge_weights_t *a, const ag_heatmap_opts_t *opts,
                    ag_error_t *err);

/*
 * Binned heatmaps of any size, from edges given in pieces (a destination range
 * at a time), so that no array of every edge is needed: ag_heatmap_bins_new
 * makes bins x bins blocks over n_nodes nodes (bins at most n_nodes; 0:
 * AG_HEATMAP_BINS); each ag_heatmap_bins_add adds a's edges (its n_nodes must
 * match; heads and head must be the same in every piece). A (dst, src) pair
 * repeated right after itself is one cell (a multi-edge, as compiled
 * neighbourhoods give them). ag_draw_heatmap_bins then draws what
 * ag_draw_heatmap draws when it bins (labels [n_nodes] or NULL, title or
 * NULL; of opts, which may be NULL, vmax, log_scale and vmin count).
 */
typedef struct ag_heatmap_bins ag_heatmap_bins_t;
int ag_heatmap_bins_new(ag_heatmap_bins_t **bins, int64_t n_nodes, int64_t n_bins,
                        ag_error_t *err);
int ag_heatmap_bins_add(ag_heatmap_bins_t *bins, const ag_edge_weights_t *a, ag_error_t *err);
int ag_draw_heatmap_bins(char **svg, const ag_heatmap_bins_t *bins, const char *const *labels,
                         const char *title, const ag_heatmap_opts_t *opts, ag_error_t *err);
void ag_heatmap_bins_free(ag_heatmap_bins_t *bins);

/* ------------------------------------------------------------ graph picture */

/*
 * A Fruchterman-Reingold layout (igraph's, seeded: the same seed gives the
 * same layout) of the graph with these edges, direction ignored, into xy
 * [n_nodes, 2], scaled into [0, 1] x [0, 1].
 */
int ag_layout_fr(double *xy, int64_t n_nodes, int64_t n_edges, const int64_t *src,
                 const int64_t *dst, uint64_t seed, ag_error_t *err);

#define AG_GRAPH_MAX_NODES 2000
#define AG_GRAPH_MAX_EDGES 20000

typedef struct {
    const double *xy;    /* [n_nodes, 2] positions (any scale), or NULL: an arc diagram,
                            nodes on a line in id order (sequences, patterns) */
    double vmax;         /* weight drawn widest and most opaque (0: the largest) */
    const int64_t *classes;   /* [n_nodes] each node's class or prediction, its fill
                                 colour (Tableau's ten, in turn); -1: none (grey);
                                 NULL: every node grey */
} ag_graph_opts_t;

/* The defaults (each 0 or NULL: see the fields). */
#define AG_GRAPH_OPTS_INIT {0}

/*
 * The graph: nodes as labelled circles, one <path class="edge" data-src
 * data-dst data-weight> per edge with an arrow at its destination, its width
 * and opacity rising with the weight. Two directions of a pair bend apart;
 * a self-loop is a small loop. Pictures of more than AG_GRAPH_MAX_NODES
 * nodes or AG_GRAPH_MAX_EDGES edges are refused (AG_ELIMIT): they would be
 * unreadable; use the heatmap.
 */
int ag_draw_graph(char **svg, const ag_edge_weights_t *a, const ag_graph_opts_t *opts,
                  ag_error_t *err);

/* ----------------------------------------------------------------- curves */

/* One line of a panel: points (x[i], y[i]); NaN y values are gaps. */
typedef struct {
    const char *name;    /* in the legend (NULL: none) */
    const double *x, *y;
    int64_t n;
    int dashed;
    int colour;          /* 1..10: that colour of the palette; 0: the series' place */
} ag_series_t;

/* One plot: its series share the axes. */
typedef struct {
    const char *title, *xlabel, *ylabel;
    int log_y;           /* log scale (values <= 0 are left out) */
    const ag_series_t *series;
    int n_series;
} ag_panel_t;

/* Panels side by side, each with axes, ticks, a legend. */
int ag_draw_panels(char **svg, const ag_panel_t *panels, int n_panels, const char *title,
                   ag_error_t *err);

/*
 * The convergence of rounds (what `run --trace` writes): change per round on
 * a log scale beside the mean attention entropy. entropy may be NULL.
 */
int ag_draw_rounds(char **svg, const double *round, const double *change,
                   const double *entropy, int64_t n, const char *title, ag_error_t *err);

/* ---------------------------------------------------------------- compare */

/*
 * A mask as a grid x grid picture: cell [a, b] is the fraction of the block
 * of destinations a x sources b that are edges (0 .. 1). fill is [grid, grid].
 * Blocks split 0..N-1 evenly (a block is about N/grid nodes a side; grid is
 * at most N). Time O(N + runs), whatever the number of edges.
 */
int ag_mask_grid(double *fill, int64_t grid, const ag_nbhd_t *nb, ag_error_t *err);

/*
 * Connectivities side by side: for each its mask (fill [grid, grid] from
 * ag_mask_grid) and name, then one bar chart per figure (figure f of
 * connectivity c is figures[c * n_figures + f]; NaN: not applicable, no bar).
 */
typedef struct {
    int n_conns;
    const char *const *names;        /* [n_conns] */
    int64_t n_nodes;
    int64_t grid;
    const double *masks;             /* [n_conns, grid, grid] */
    int n_figures;
    const char *const *figure_names; /* [n_figures] */
    const double *figures;           /* [n_conns, n_figures] */
    const char *title;
} ag_compare_picture_t;

int ag_draw_compare(char **svg, const ag_compare_picture_t *c, ag_error_t *err);

AG_END_DECLS

#endif /* ATTNGRAPH_DRAW_H */
