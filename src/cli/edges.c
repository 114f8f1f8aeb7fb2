/*
 * Per-edge inputs of the command line, in the graph's slots: --edge-bias (a
 * numeric edge attribute added to the scores) and --edge-features (the rows
 * a layer with edges=yes projects into its score). Both name the file in
 * their messages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "cli/source.h"

/* err's message after "DESC: OPTION: " */
static int named(int rc, const source_t *s, const char *option, ag_error_t *err)
{
    if (rc && err) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        ag_i_fail(err, (ag_status_t)rc, "%s: %s: %s", s->desc, option, why);
    }
    return rc;
}

int edge_bias_load(float **bias, const source_t *s, const char *attr, ag_error_t *err)
{
    *bias = NULL;
    if (!attr)
        return AG_OK;
    if (!s->have_graph)
        return ag_i_fail(err, AG_EINVAL, "--edge-bias '%s' needs a graph file with that edge "
                         "attribute; %s has none", attr, s->desc);
    return named(ag_edge_attribute(bias, &s->graph, &s->nb, attr, err), s, "--edge-bias", err);
}

/* Does spec name a .npy file (else: edge attributes)? */
static int is_npy(const char *spec)
{
    const size_t n = strlen(spec);
    return n >= 4 && strcmp(spec + n - 4, ".npy") == 0;
}

/* F's rows per slot from the attributes named in spec (comma-separated). */
static int from_attributes(ag_matrix_t *F, const source_t *s, const char *spec, ag_error_t *err)
{
    if (!s->have_graph)
        return ag_i_fail(err, AG_EINVAL, "--edge-features %s: edge attributes need a graph "
                         "file; %s has none (or give an [E, F] .npy file)", spec, s->desc);
    int64_t cols = 1;
    for (const char *c = spec; *c; c++)
        cols += *c == ',';
    int rc = ag_matrix_init(F, s->nb.n_edges, cols, err);
    char name[256];
    const char *at = spec;
    for (int64_t c = 0; !rc && c < cols; c++) {
        const size_t len = strcspn(at, ",");
        if (len == 0 || len >= sizeof name) {
            rc = ag_i_fail(err, AG_EINVAL, "--edge-features %s: attribute %lld is %s; expected "
                           "names separated by commas (or an [E, F] .npy file)", spec,
                           (long long)c + 1, len ? "too long" : "empty");
            break;
        }
        memcpy(name, at, len), name[len] = '\0';
        at += len + (at[len] == ',');
        float *values;
        if ((rc = named(ag_edge_attribute(&values, &s->graph, &s->nb, name, err), s,
                        "--edge-features", err)))
            break;
        for (int64_t e = 0; e < s->nb.n_edges; e++)
            F->data[e * cols + c] = values[e];
        free(values);
    }
    return rc;
}

/* F's rows per slot from an [edges, F] .npy file in the graph's edge order;
   *added[s] = 1 for a self-loop added by --self-loops (no row of its own). */
static int from_npy(ag_matrix_t *F, unsigned char *added, const source_t *s, const char *path,
                    ag_error_t *err)
{
    ag_matrix_t rows;
    int rc = ag_matrix_read_npy(&rows, path, err);
    if (rc)
        return rc;
    ag_edge_msg_t *msgs = NULL;
    int64_t *slot = NULL, edges = 0;
    if ((rc = ag_edge_order(&s->nb, &msgs, &slot, err))) {
        ag_matrix_destroy(&rows);
        return rc;
    }
    /* the graph's edges: a graph file's (an undirected edge's two messages
       share its row), else one a message */
    for (int64_t k = 0; k < s->nb.n_edges; k++)
        edges = msgs[k].edge_id >= edges ? msgs[k].edge_id + 1 : edges;
    if (s->have_graph)
        edges = (int64_t)igraph_ecount(&s->graph);
    if (rows.cols < 1)
        rc = ag_i_fail(err, AG_EINVAL, "--edge-features %s is [%lld, 0]; expected [edges, F] "
                       "with F >= 1", path, (long long)rows.rows);
    else if (rows.rows != edges)
        rc = ag_i_fail(err, AG_EINVAL, "--edge-features %s has %lld row%s; %s has %lld edge%s "
                       "(one row an edge, in the graph's edge order)", path,
                       (long long)rows.rows, AG_PLURAL(rows.rows), s->desc, (long long)edges,
                       AG_PLURAL(edges));
    if (!rc)
        rc = ag_check_finite(path, rows.data, rows.rows, rows.cols, err);
    if (!rc)
        rc = ag_matrix_init(F, s->nb.n_edges, rows.cols, err);
    for (int64_t k = 0; !rc && k < s->nb.n_edges; k++) {
        added[slot[k]] = msgs[k].edge_id < 0;
        if (msgs[k].edge_id >= 0)
            memcpy(F->data + slot[k] * rows.cols, rows.data + msgs[k].edge_id * rows.cols,
                   (size_t)rows.cols * sizeof(float));
    }
    free(msgs), free(slot);
    ag_matrix_destroy(&rows);
    return rc;
}

/* A self-loop the options added gets the mean of its node's other in-edges'
   rows (0 without any): PyG's fill_value "mean". */
static int fill_added_loops(ag_matrix_t *F, const unsigned char *added, const source_t *s,
                            ag_error_t *err)
{
    ag_edge_msg_t *msgs = NULL;
    int64_t *slot = NULL;
    const int64_t N = s->nb.n_nodes, C = F->cols;
    int rc = ag_edge_order(&s->nb, &msgs, &slot, err);
    double *sum = rc ? NULL : ag_i_calloc(N * C + N, sizeof *sum, err, "--edge-features");
    if (!rc && !sum)
        rc = ag_i_alloc_status();
    for (int64_t k = 0; !rc && k < s->nb.n_edges; k++)
        if (!added[slot[k]]) {
            const int64_t i = msgs[k].dst;
            for (int64_t c = 0; c < C; c++)
                sum[i * C + c] += F->data[slot[k] * C + c];
            sum[N * C + i] += 1;
        }
    for (int64_t k = 0; !rc && k < s->nb.n_edges; k++)
        if (added[slot[k]]) {
            const int64_t i = msgs[k].dst;
            const double n = sum[N * C + i];
            for (int64_t c = 0; c < C; c++)
                F->data[slot[k] * C + c] = n > 0 ? (float)(sum[i * C + c] / n) : 0.0f;
        }
    free(sum), free(msgs), free(slot);
    return rc;
}

int edge_features_load(ag_matrix_t *F, const source_t *s, const char *spec, ag_error_t *err)
{
    memset(F, 0, sizeof *F);
    if (!spec)
        return AG_OK;
    unsigned char *added = ag_i_calloc(s->nb.n_edges ? s->nb.n_edges : 1, 1, err,
                                       "--edge-features");
    if (!added)
        return ag_i_alloc_status();
    int rc;
    if (is_npy(spec)) {
        rc = from_npy(F, added, s, spec, err);
    } else {   /* attributes: ag_edge_attribute gives an added loop 0; find them */
        ag_edge_msg_t *msgs = NULL;
        int64_t *slot = NULL;
        rc = ag_edge_order(&s->nb, &msgs, &slot, err);
        for (int64_t k = 0; !rc && k < s->nb.n_edges; k++)
            added[slot[k]] = msgs[k].edge_id < 0;
        free(msgs), free(slot);
        if (!rc)
            rc = from_attributes(F, s, spec, err);
    }
    if (!rc)
        rc = fill_added_loops(F, added, s, err);
    free(added);
    if (rc)
        ag_matrix_destroy(F);
    return rc;
}
