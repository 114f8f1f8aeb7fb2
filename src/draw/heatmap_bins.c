/* Binned heatmaps built from pieces: block sums, never an array of every edge. */
#include <math.h>
#include <stdlib.h>

#include "draw/heatmap.h"

int ag_heatmap_bins_new(ag_heatmap_bins_t **bins, int64_t n_nodes, int64_t n_bins,
                        ag_error_t *err)
{
    *bins = NULL;
    const int64_t g = n_bins ? n_bins : AG_HEATMAP_BINS < n_nodes ? AG_HEATMAP_BINS : n_nodes;
    if (n_nodes < 1 || g < 1 || g > n_nodes || g > 4096)
        return ag_fail(err, AG_EINVAL, "heatmap: %lld bins for %lld nodes; expected 1 to the "
                       "number of nodes (at most 4096)", (long long)n_bins, (long long)n_nodes);
    ag_heatmap_bins_t *b = ag_calloc(1, sizeof *b, err, "heatmap");
    if (!b)
        return ag_alloc_status();
    b->n_nodes = n_nodes, b->g = g;
    b->last_dst = b->last_src = -1;
    b->sum = ag_calloc(g * g, sizeof *b->sum, err, "heatmap");
    b->count = ag_calloc(g * g, sizeof *b->count, err, "heatmap");
    if (!b->sum || !b->count) {
        ag_heatmap_bins_free(b);
        return ag_alloc_status();
    }
    *bins = b;
    return AG_OK;
}

void bins_add_cell(ag_heatmap_bins_t *b, int64_t dst, int64_t src, double w)
{
    const int64_t k = dst * b->g / b->n_nodes * b->g + src * b->g / b->n_nodes;
    b->sum[k] += w;
    b->count[k] += !(dst == b->last_dst && src == b->last_src);
    b->last_dst = dst, b->last_src = src;
}

int ag_heatmap_bins_add(ag_heatmap_bins_t *b, const ag_edge_weights_t *a, ag_error_t *err)
{
    if (!b)
        return ag_fail(err, AG_EINVAL, "heatmap: no bins given");
    int rc = edges_check(a, "heatmap", err);
    if (rc)
        return rc;
    if (a->n_nodes != b->n_nodes)
        return ag_fail(err, AG_EINVAL, "heatmap: edges over %lld nodes added to bins over %lld",
                       (long long)a->n_nodes, (long long)b->n_nodes);
    if (b->heads && (a->heads != b->heads || a->head != b->head))
        return ag_fail(err, AG_EINVAL, "heatmap: edges of head %lld of %lld added to bins of "
                       "head %lld of %lld", (long long)a->head, (long long)a->heads,
                       (long long)b->head, (long long)b->heads);
    b->heads = a->heads, b->head = a->head;
    for (int64_t k = 0; k < a->n_edges; k++)
        bins_add_cell(b, a->dst[k], a->src[k], edges_weight(a, k));
    return AG_OK;
}

int ag_draw_heatmap_bins(char **svg, const ag_heatmap_bins_t *b, const char *const *labels,
                         const char *title, const ag_heatmap_opts_t *opts, ag_error_t *err)
{
    *svg = NULL;
    if (!b)
        return ag_fail(err, AG_EINVAL, "heatmap: no bins given");
    int rc = heatmap_opts_check(opts, err);
    if (rc)
        return rc;
    int64_t cells = 0;
    for (int64_t k = 0; k < b->g * b->g; k++)
        cells += b->count[k];
    const ag_edge_weights_t meta = {b->n_nodes, 0, NULL, NULL, NULL, b->heads ? b->heads : 1,
                                    b->heads ? b->head : -1, labels, title};
    return heatmap_render(svg, &meta, NULL, cells, b, opts, err);
}

void ag_heatmap_bins_free(ag_heatmap_bins_t *b)
{
    if (!b)
        return;
    free(b->sum);
    free(b->count);
    free(b);
}
