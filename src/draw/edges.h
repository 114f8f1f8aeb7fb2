/* Checks and per-edge weights shared by the heatmap and the graph picture. */
#ifndef AG_DRAW_EDGES_H
#define AG_DRAW_EDGES_H

#include "draw/svg.h"

/* Checks a's sizes, ids, head and weights; `what` names the picture. */
int edges_check(const ag_edge_weights_t *a, const char *what, ag_error_t *err);
/* The drawn weight of edge k: its head's, or the mean over heads. */
double edges_weight(const ag_edge_weights_t *a, int64_t k);
/* Node i's label (a's, or its number written into buf). */
const char *edges_label(const ag_edge_weights_t *a, int64_t i, char buf[32]);
/* "head 2" or "mean over 4 heads" into buf. */
const char *edges_head_text(const ag_edge_weights_t *a, char *buf, size_t size);

#endif
