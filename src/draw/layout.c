/* A seeded Fruchterman-Reingold layout from plain edge arrays, through igraph. */
#include <igraph.h>
#include <math.h>
#include <stdlib.h>

#include "base/base.h"
#include "attngraph/draw.h"

#define LAYOUT_ITERATIONS 500

/* Scales the columns of xy [n, 2] into [0, 1] (a single point goes to the centre). */
static void normalise(double *xy, int64_t n)
{
    for (int c = 0; c < 2; c++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t i = 0; i < n; i++)
            lo = fmin(lo, xy[2 * i + c]), hi = fmax(hi, xy[2 * i + c]);
        for (int64_t i = 0; i < n; i++)
            xy[2 * i + c] = hi > lo ? (xy[2 * i + c] - lo) / (hi - lo) : 0.5;
    }
}

int ag_layout_fr(double *xy, int64_t n_nodes, int64_t n_edges, const int64_t *src,
                 const int64_t *dst, uint64_t seed, ag_error_t *err)
{
    if (!xy || n_nodes < 1 || n_edges < 0 || (n_edges && (!src || !dst)))
        return ag_fail(err, AG_EINVAL, "layout: %lld nodes and %lld edges; expected at least "
                       "one node, positions [N, 2] and the src, dst arrays",
                       (long long)n_nodes, (long long)n_edges);
    for (int64_t k = 0; k < n_edges; k++)
        if (src[k] < 0 || src[k] >= n_nodes || dst[k] < 0 || dst[k] >= n_nodes)
            return ag_fail(err, AG_EINVAL, "layout: edge %lld is %lld -> %lld; nodes are "
                           "0..%lld", (long long)k, (long long)src[k], (long long)dst[k],
                           (long long)n_nodes - 1);
    /* start from our own seeded positions; igraph's random numbers (used only
       to separate coincident nodes) come from a private generator, seeded too,
       so the host's default generator is left alone */
    float *start = ag_alloc(2 * n_nodes, sizeof *start, err, "layout");
    if (!start)
        return ag_alloc_status();
    ag_random_normal(start, 2 * n_nodes, seed, 0x1a70u, (float)sqrt((double)n_nodes));
    int rc = AG_OK;
    igraph_vector_int_t edges;
    igraph_t g;
    igraph_matrix_t res;
    igraph_rng_t rng, *host_rng = igraph_rng_default();
    ag_i_igraph_enter();
    int have_edges = 0, have_g = 0, have_res = 0, have_rng = 0;
    if (igraph_vector_int_init(&edges, 2 * n_edges) || !(have_edges = 1) ||
        igraph_matrix_init(&res, n_nodes, 2) || !(have_res = 1) ||
        igraph_rng_init(&rng, &igraph_rngtype_pcg32) || !(have_rng = 1)) {
        rc = ag_fail(err, AG_ENOMEM, "layout: out of memory");
    } else {
        for (int64_t k = 0; k < n_edges; k++) {
            VECTOR(edges)[2 * k] = src[k];
            VECTOR(edges)[2 * k + 1] = dst[k];
        }
        for (int64_t i = 0; i < n_nodes; i++) {
            MATRIX(res, i, 0) = start[2 * i];
            MATRIX(res, i, 1) = start[2 * i + 1];
        }
        igraph_rng_seed(&rng, seed);
        igraph_rng_set_default(&rng);
        if (igraph_create(&g, &edges, n_nodes, IGRAPH_UNDIRECTED) || !(have_g = 1) ||
            igraph_layout_fruchterman_reingold(&g, &res, 1, LAYOUT_ITERATIONS,
                                               sqrt((double)n_nodes) / 10,
                                               IGRAPH_LAYOUT_AUTOGRID, NULL, NULL, NULL,
                                               NULL, NULL))
            rc = ag_fail(err, AG_EIGRAPH, "layout: igraph failed: %s", ag_i_igraph_reason());
        igraph_rng_set_default(host_rng);
    }
    if (!rc)
        for (int64_t i = 0; i < n_nodes; i++)
            xy[2 * i] = MATRIX(res, i, 0), xy[2 * i + 1] = MATRIX(res, i, 1);
    if (have_g)
        igraph_destroy(&g);
    if (have_rng)
        igraph_rng_destroy(&rng);
    if (have_res)
        igraph_matrix_destroy(&res);
    if (have_edges)
        igraph_vector_int_destroy(&edges);
    ag_i_igraph_leave();
    free(start);
    if (!rc)
        normalise(xy, n_nodes);
    return rc;
}
