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
    return error_after(rc, err, "%s: %s", s->desc, option);
}

int edge_bias_load(float **bias, const source_t *s, const char *attr, ag_error_t *err)
{
    *bias = NULL;
    if (!attr)
        return AG_OK;
    if (!s->have_graph)
        return ag_fail(err, AG_EINVAL, "--edge-bias '%s' needs a graph file with that edge "
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
        return ag_fail(err, AG_EINVAL, "--edge-features %s: edge attributes need a graph "
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
            rc = ag_fail(err, AG_EINVAL, "--edge-features %s: attribute %lld is %s; expected "
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

/* The messages in the graph's edge order and their slots (ag_edge_order's);
   a message without an edge id is a self-loop --self-loops added. */
typedef struct {
    ag_edge_msg_t *msgs;
    int64_t *slot;
} order_t;

/* F's rows per slot from an [edges, F] .npy file in the graph's edge order. */
static int from_npy(ag_matrix_t *F, const order_t *o, const source_t *s, const char *path,
                    ag_error_t *err)
{
    ag_matrix_t rows;
    int rc = ag_matrix_read_npy(&rows, path, err);
    if (rc)
        return rc;
    /* the graph's edges: a graph file's (an undirected edge's two messages
       share its row), else one a message */
    int64_t edges = 0;
    for (int64_t k = 0; k < s->nb.n_edges; k++)
        edges = o->msgs[k].edge_id >= edges ? o->msgs[k].edge_id + 1 : edges;
    if (s->have_graph)
        edges = (int64_t)igraph_ecount(&s->graph);
    if (rows.cols < 1)
        rc = ag_fail(err, AG_EINVAL, "--edge-features %s is [%lld, 0]; expected [edges, F] "
                     "with F >= 1", path, (long long)rows.rows);
    else if (rows.rows != edges)
        rc = ag_fail(err, AG_EINVAL, "--edge-features %s has %lld row%s; %s has %lld edge%s "
                     "(one row an edge, in the graph's edge order)", path,
                     (long long)rows.rows, AG_PLURAL(rows.rows), s->desc, (long long)edges,
                     AG_PLURAL(edges));
    if (!rc)
        rc = ag_check_finite(path, rows.data, rows.rows, rows.cols, err);
    if (!rc)
        rc = ag_matrix_init(F, s->nb.n_edges, rows.cols, err);
    for (int64_t k = 0; !rc && k < s->nb.n_edges; k++)
        if (o->msgs[k].edge_id >= 0)
            memcpy(F->data + o->slot[k] * rows.cols, rows.data + o->msgs[k].edge_id * rows.cols,
                   (size_t)rows.cols * sizeof(float));
    ag_matrix_destroy(&rows);
    return rc;
}

/* A self-loop the options added gets the mean of its node's other in-edges'
   rows (0 without any): PyG's fill_value "mean". */
static int fill_added_loops(ag_matrix_t *F, const order_t *o, const source_t *s,
                            ag_error_t *err)
{
    const int64_t N = s->nb.n_nodes, C = F->cols;
    double *sum = ag_calloc(N * C + N, sizeof *sum, err, "--edge-features");
    if (!sum)
        return ag_alloc_status();
    for (int pass = 0; pass < 2; pass++)   /* the sums of real edges, then the loops' means */
        for (int64_t k = 0; k < s->nb.n_edges; k++) {
            const int64_t i = o->msgs[k].dst;
            float *row = F->data + o->slot[k] * C;
            const double n = sum[N * C + i];
            if (pass == 0 && o->msgs[k].edge_id >= 0) {
                for (int64_t c = 0; c < C; c++)
                    sum[i * C + c] += row[c];
                sum[N * C + i] += 1;
            } else if (pass == 1 && o->msgs[k].edge_id < 0) {
                for (int64_t c = 0; c < C; c++)
                    row[c] = n > 0 ? (float)(sum[i * C + c] / n) : 0.0f;
            }
        }
    free(sum);
    return AG_OK;
}

int edge_features_load(ag_matrix_t *F, const source_t *s, const char *spec, ag_error_t *err)
{
    memset(F, 0, sizeof *F);
    if (!spec)
        return AG_OK;
    order_t o = {NULL, NULL};
    int rc = ag_edge_order(&s->nb, &o.msgs, &o.slot, err);
    if (!rc)   /* (ag_edge_attribute gives an added loop 0: filled below) */
        rc = is_npy(spec) ? from_npy(F, &o, s, spec, err) : from_attributes(F, s, spec, err);
    if (!rc)
        rc = fill_added_loops(F, &o, s, err);
    free(o.msgs), free(o.slot);
    if (rc)
        ag_matrix_destroy(F);
    return rc;
}
