/* What the heatmap and the graph picture both need from weighted edges. */
#include <math.h>
#include <stdio.h>

#include "draw/edges.h"

int edges_check(const ag_edge_weights_t *a, const char *what, ag_error_t *err)
{
    if (!a)
        return ag_fail(err, AG_EINVAL, "%s: no edges given", what);
    if (a->n_nodes < 1)
        return ag_fail(err, AG_EINVAL, "%s: %lld nodes; a picture needs at least one", what,
                       (long long)a->n_nodes);
    if (a->n_edges < 0 || (a->n_edges > 0 && (!a->src || !a->dst || !a->weight)))
        return ag_fail(err, AG_EINVAL, "%s: %lld edges without their src, dst and weight "
                       "arrays", what, (long long)a->n_edges);
    if (a->heads < 1 || a->head < -1 || a->head >= a->heads)
        return ag_fail(err, AG_EINVAL, "%s: head %lld of %lld heads; expected -1 (the mean) "
                       "or 0..%lld", what, (long long)a->head, (long long)a->heads,
                       (long long)a->heads - 1);
    for (int64_t k = 0; k < a->n_edges; k++) {
        if (a->src[k] < 0 || a->src[k] >= a->n_nodes || a->dst[k] < 0 ||
            a->dst[k] >= a->n_nodes)
            return ag_fail(err, AG_EINVAL, "%s: edge %lld is %lld -> %lld; nodes are 0..%lld",
                           what, (long long)k, (long long)a->src[k], (long long)a->dst[k],
                           (long long)a->n_nodes - 1);
        for (int64_t h = 0; h < a->heads; h++)
            if (!isfinite(a->weight[k * a->heads + h]))
                return ag_fail(err, AG_EINVAL, "%s: the weight of edge %lld (head %lld) is %g; "
                               "expected a finite number", what, (long long)k, (long long)h,
                               (double)a->weight[k * a->heads + h]);
    }
    return AG_OK;
}

double edges_weight(const ag_edge_weights_t *a, int64_t k)
{
    const float *w = a->weight + k * a->heads;
    if (a->head >= 0)
        return w[a->head];
    double s = 0;
    for (int64_t h = 0; h < a->heads; h++)
        s += w[h];
    return s / (double)a->heads;
}

const char *edges_label(const ag_edge_weights_t *a, int64_t i, char buf[32])
{
    if (a->labels && a->labels[i])
        return a->labels[i];
    snprintf(buf, 32, "%lld", (long long)i);
    return buf;
}

const char *edges_head_text(const ag_edge_weights_t *a, char *buf, size_t size)
{
    if (a->head >= 0)
        snprintf(buf, size, "head %lld", (long long)a->head);
    else if (a->heads == 1)
        snprintf(buf, size, "one head");
    else
        snprintf(buf, size, "mean over %lld heads", (long long)a->heads);
    return buf;
}
