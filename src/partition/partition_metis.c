/*
 * METIS k-way partitions of the destinations: parts that cut few edges, so
 * few K/V rows cross between processes. The only file that includes
 * metis.h; a build with AG_NO_METIS (make NO_METIS=1) has none.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#ifndef AG_NO_METIS
#include <metis.h>
#endif

/* Every node its own part (P >= N), or all in part 0 (P = 1): no METIS needed. */
static int trivial_parts(ag_partition_t *pt, const ag_nbhd_t *nb, int n_parts, ag_error_t *err)
{
    const int64_t N = nb->n_nodes;
    int32_t *owner = ag_alloc(N, sizeof *owner, err, "partition owners");
    if (!owner)
        return ag_alloc_status();
    for (int64_t i = 0; i < N; i++)
        owner[i] = n_parts == 1 ? 0 : (int32_t)i;
    int rc = ag_partition_from_owner(pt, N, owner, n_parts, err);
    free(owner);
    return rc;
}

#ifndef AG_NO_METIS

int ag_partition_has_metis(void)
{
    return 1;
}

static int by_value(const void *a, const void *b)
{
    const idx_t x = *(const idx_t *)a, y = *(const idx_t *)b;
    return (x > y) - (x < y);
}

/* The symmetrised graph of nb in METIS's CSR (self-loops dropped; parallel
   edges merged into one whose weight is their count). */
typedef struct {
    idx_t *xadj, *adjncy, *adjwgt, *vwgt;
} metis_graph_t;

static void metis_graph_free(metis_graph_t *g)
{
    free(g->xadj), free(g->adjncy), free(g->adjwgt), free(g->vwgt);
}

static int metis_graph(metis_graph_t *g, const ag_nbhd_t *nb, ag_error_t *err)
{
    const int64_t N = nb->n_nodes;
    memset(g, 0, sizeof *g);
    int64_t *deg = ag_calloc(N + 1, sizeof *deg, err, "METIS graph");
    if (!deg)
        return ag_alloc_status();
    for (int64_t i = 0; i < N; i++)
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
            for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++)
                if (j != i)
                    deg[i + 1]++, deg[j + 1]++;
    for (int64_t i = 0; i < N; i++)
        deg[i + 1] += deg[i];
    const int64_t A = deg[N];
    g->xadj = ag_alloc(N + 1, sizeof *g->xadj, err, "METIS graph");
    g->adjncy = ag_alloc(A, sizeof *g->adjncy, err, "METIS graph");
    g->adjwgt = ag_alloc(A, sizeof *g->adjwgt, err, "METIS graph");
    g->vwgt = ag_alloc(N, sizeof *g->vwgt, err, "METIS graph");
    if (!g->xadj || !g->adjncy || !g->adjwgt || !g->vwgt) {
        free(deg);
        metis_graph_free(g);
        return ag_alloc_status();
    }
    for (int64_t i = 0; i < N; i++) {
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
            for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++)
                if (j != i) {
                    g->adjncy[deg[i]++] = (idx_t)j;
                    g->adjncy[deg[j]++] = (idx_t)i;
                }
        g->vwgt[i] = (idx_t)(nb->edge_ptr[i + 1] - nb->edge_ptr[i] + AG_PARTITION_NODE_WORK);
    }
    /* deg[i] now ends node i's list; sort each list and merge repeats into weights */
    int64_t out = 0, start = 0;
    for (int64_t i = 0; i < N; i++) {
        const int64_t end = deg[i];
        qsort(g->adjncy + start, (size_t)(end - start), sizeof *g->adjncy, by_value);
        g->xadj[i] = (idx_t)out;
        for (int64_t k = start; k < end; k++) {
            if (k > start && g->adjncy[k] == g->adjncy[k - 1]) {
                g->adjwgt[out - 1]++;
                continue;
            }
            g->adjncy[out] = g->adjncy[k];
            g->adjwgt[out++] = 1;
        }
        start = end;
    }
    g->xadj[N] = (idx_t)out;
    free(deg);
    return AG_OK;
}

int ag_partition_metis(ag_partition_t *pt, const ag_nbhd_t *nb, int n_parts, int64_t seed,
                       ag_error_t *err)
{
    memset(pt, 0, sizeof *pt);
    const int64_t N = nb->n_nodes;
    if (n_parts < 1 || n_parts > AG_PARTITION_MAX_PARTS)
        return ag_fail(err, AG_EINVAL, "partition: %d parts; expected 1 to %d", n_parts,
                       AG_PARTITION_MAX_PARTS);
    if (N < 1)
        return ag_fail(err, AG_EINVAL, "partition: %lld nodes; expected at least 1",
                       (long long)N);
    if (n_parts == 1 || n_parts >= N)
        return trivial_parts(pt, nb, n_parts, err);
    /* METIS counts in 32 bits: adjacency entries (2 per message) and total vertex weight */
    if (nb->n_edges + N > INT32_MAX / 2)
        return ag_fail(err, AG_ELIMIT,
                       "METIS: %lld nodes and %lld messages; its 32-bit indices take at most "
                       "%d in all", (long long)N, (long long)nb->n_edges, INT32_MAX / 2);
    if (seed < 0 || seed > INT32_MAX)
        return ag_fail(err, AG_EINVAL, "METIS: seed %lld; expected 0 to %d", (long long)seed,
                       INT32_MAX);
    metis_graph_t g;
    int rc = metis_graph(&g, nb, err);
    if (rc)
        return rc;
    idx_t n = (idx_t)N, ncon = 1, nparts = n_parts, objval = 0;
    idx_t options[METIS_NOPTIONS];
    METIS_SetDefaultOptions(options);
    options[METIS_OPTION_SEED] = (idx_t)seed;
    options[METIS_OPTION_NUMBERING] = 0;
    idx_t *part = ag_alloc(N, sizeof *part, err, "METIS parts");
    int32_t *owner = ag_alloc(N, sizeof *owner, err, "partition owners");
    if (!part || !owner)
        rc = ag_alloc_status();
    else {
        int m = METIS_PartGraphKway(&n, &ncon, g.xadj, g.adjncy, g.vwgt, NULL, g.adjwgt,
                                    &nparts, NULL, NULL, options, &objval, part);
        /* METIS 5.1's k-way gave up (METIS_ERROR) on a random graph of 2e6 nodes x 16
           in 64 parts; recursive bisection is the other way it partitions */
        if (m == METIS_ERROR)
            m = METIS_PartGraphRecursive(&n, &ncon, g.xadj, g.adjncy, g.vwgt, NULL, g.adjwgt,
                                         &nparts, NULL, NULL, options, &objval, part);
        if (m != METIS_OK)
            rc = ag_fail(err, m == METIS_ERROR_MEMORY ? AG_ENOMEM : AG_EINVAL,
                         "METIS failed (code %d) on %lld nodes, %d parts", m,
                         (long long)N, n_parts);
    }
    metis_graph_free(&g);
    if (!rc) {
        for (int64_t i = 0; i < N; i++)
            owner[i] = (int32_t)part[i];
        rc = ag_partition_from_owner(pt, N, owner, n_parts, err);
    }
    free(part);
    free(owner);
    return rc;
}

#else /* AG_NO_METIS */

int ag_partition_has_metis(void)
{
    return 0;
}

int ag_partition_metis(ag_partition_t *pt, const ag_nbhd_t *nb, int n_parts, int64_t seed,
                       ag_error_t *err)
{
    (void)seed;
    memset(pt, 0, sizeof *pt);
    if (n_parts == 1)
        return trivial_parts(pt, nb, n_parts, err);
    return ag_fail(err, AG_EINVAL, "--partition metis: this build has no METIS "
                                   "(built with NO_METIS=1; install libmetis-dev and rebuild)");
}

#endif
