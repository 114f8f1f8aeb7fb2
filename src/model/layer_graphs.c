/*
 * A connectivity per layer over one graph: each layer's pattern ("graph",
 * "graph+expander:3", "hops:2", "complete", ...) compiled over the graph the
 * model runs on, whose edges its words graph and hops:K read. Layers may
 * append virtual nodes: every layer's graph then has the largest count of
 * them, a layer that appends fewer leaving the others isolated (no message to
 * or from them: their states pass that round unchanged).
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"

/* nb widened to N nodes: the new ones receive nothing. */
static int pad_nodes(ag_nbhd_t *nb, int64_t N, ag_error_t *err)
{
    const int64_t n = nb->n_nodes;
    if (N == n)
        return AG_OK;
    int64_t *e = ag_i_realloc(nb->edge_ptr, N + 1, sizeof *e, err, "a layer's graph");
    if (!e)
        return ag_alloc_status();
    nb->edge_ptr = e;
    int64_t *r = ag_i_realloc(nb->run_ptr, N + 1, sizeof *r, err, "a layer's graph");
    if (!r)
        return ag_alloc_status();
    nb->run_ptr = r;
    for (int64_t i = n + 1; i <= N; i++)
        e[i] = e[n], r[i] = r[n];
    nb->n_nodes = N;
    return AG_OK;
}

static int layer_graph(ag_nbhd_t *g, const ag_nbhd_t *nb, const char *spec, ag_self_loops_t self,
                       ag_error_t *err)
{
    if (!spec || !spec[0])
        return ag_i_nbhd_shaped_copy(g, nb, self, err);
    ag_pattern_t *p;
    int rc = ag_pattern_parse(&p, spec, err);
    if (!rc && !(rc = ag_pattern_bind_graph(p, nb, err)))
        rc = ag_nbhd_from_pattern(g, p, nb->n_nodes + ag_pattern_virtual(p), self, err);
    ag_pattern_free(p);
    return rc;
}

void ag_layer_graphs_free(ag_nbhd_t **graphs, int L)
{
    ag_lm_graphs_free(graphs, L);   /* the same: graphs shared by blocks, freed once */
}

/* "layer 2", or "layer 2's global heads" for entries past the first R. */
static const char *layer_name(char *buf, size_t cap, int l, int R)
{
    snprintf(buf, cap, l < R ? "layer %d" : "layer %d's global heads", l % R + 1);
    return buf;
}

int ag_layer_graphs(ag_nbhd_t **graphs, int L, const ag_nbhd_t *nb, const char *const *specs,
                    ag_self_loops_t self, int64_t *n_virtual, ag_error_t *err)
{
    return ag_i_layer_graphs(graphs, L, L, nb, specs, self, n_virtual, err);
}

int ag_i_layer_graphs(ag_nbhd_t **graphs, int L, int R, const ag_nbhd_t *nb,
                      const char *const *specs, ag_self_loops_t self, int64_t *n_virtual,
                      ag_error_t *err)
{
    char name[64];
    *n_virtual = 0;
    for (int l = 0; l < L; l++)
        graphs[l] = NULL;
    int rc = AG_OK;
    for (int l = 0; !rc && l < L; l++) {   /* the most virtual nodes a layer appends */
        ag_pattern_t *p;
        if (!specs[l] || !specs[l][0])
            continue;
        if ((rc = ag_pattern_parse(&p, specs[l], err)))
            ag_i_fail_prefix(rc, err, "%s", layer_name(name, sizeof name, l, R));
        else if (ag_pattern_virtual(p) > *n_virtual)
            *n_virtual = ag_pattern_virtual(p);
        ag_pattern_free(p);
    }
    for (int l = 0; !rc && l < L; l++) {
        const char *one = specs[l] ? specs[l] : "";
        for (int j = 0; j < l && !graphs[l]; j++)   /* the same spec as a layer before */
            if (strcmp(specs[j] ? specs[j] : "", one) == 0)
                graphs[l] = graphs[j];
        if (graphs[l])
            continue;
        if (!(graphs[l] = ag_calloc(1, sizeof *graphs[l], err, "a layer's graph"))) {
            rc = ag_alloc_status();
        } else if ((rc = layer_graph(graphs[l], nb, one, self, err))) {
            free(graphs[l]), graphs[l] = NULL;   /* not made: not ag_layer_graphs_free's */
            ag_i_fail_prefix(rc, err, "%s: graph '%s'", layer_name(name, sizeof name, l, R),
                             one[0] ? one : "(the graph's)");
        } else {
            rc = pad_nodes(graphs[l], nb->n_nodes + *n_virtual, err);
        }
    }
    if (rc) {
        ag_layer_graphs_free(graphs, L);
        *n_virtual = 0;
    }
    return rc;
}
