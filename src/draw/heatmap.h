/* The heatmap's parts shared by the one-call and the piecewise (binned) forms. */
#ifndef AG_DRAW_HEATMAP_H
#define AG_DRAW_HEATMAP_H

#include "draw/edges.h"

/* A cell: the summed weight of the edges src -> dst. */
typedef struct {
    int64_t dst, src;
    double w;
} cell_t;

struct ag_heatmap_bins {
    int64_t n_nodes, g;        /* nodes; blocks a side */
    int64_t heads, head;       /* of the edges added (0 heads: none added yet) */
    double *sum;               /* [g * g] summed cell weights */
    int64_t *count;            /* [g * g] cells */
    int64_t last_dst, last_src;   /* the last pair added: a repeat is the same cell */
};

/* Adds the cell src -> dst of weight w to its block. */
void bins_add_cell(ag_heatmap_bins_t *b, int64_t dst, int64_t src, double w);

/*
 * Draws the heatmap: `meta` gives the nodes, labels, title and heads (its
 * edges are not read); either the cells c [n] (one per distinct pair), or,
 * when bins is not NULL, its blocks; o (checked, or NULL) the colour scale.
 */
int heatmap_render(char **svg, const ag_edge_weights_t *meta, const cell_t *c, int64_t n,
                   const ag_heatmap_bins_t *bins, const ag_heatmap_opts_t *o, ag_error_t *err);
/* Refuses options out of range; o may be NULL (the defaults). */
int heatmap_opts_check(const ag_heatmap_opts_t *o, ag_error_t *err);

#endif
