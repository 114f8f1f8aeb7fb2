/*
 * Compiling a graph into the kernel's in-neighbourhoods: for each destination,
 * its sources ascending, stored as runs of consecutive sources. This is the
 * only module that walks igraph adjacency; it reads the edge arrays directly
 * (IGRAPH_FROM/IGRAPH_TO), so no igraph function runs here.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

void ag_nbhd_destroy(ag_nbhd_t *nb)
{
    if (!nb)
        return;
    free(nb->edge_ptr);
    free(nb->run_ptr);
    free(nb->run_src);
    free(nb->run_len);
    free(nb->edge_id);
    free(nb->out_ptr), free(nb->out_dst), free(nb->out_len), free(nb->out_nth);
    free(nb->run_slot);
    memset(nb, 0, sizeof *nb);
}

/* Fills the runs of nb from edge_ptr and the source of every slot. */
static int build_runs(ag_nbhd_t *nb, const int64_t *slot_src, ag_error_t *err)
{
    const int64_t N = nb->n_nodes;
    int64_t R = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t s = nb->edge_ptr[i]; s < nb->edge_ptr[i + 1]; s++)
            R += s == nb->edge_ptr[i] || slot_src[s] != slot_src[s - 1] + 1;
    nb->n_runs = R;
    nb->run_ptr = ag_alloc(N + 1, sizeof(int64_t), err, "neighbourhood runs");
    nb->run_src = ag_alloc(R, sizeof(int64_t), err, "neighbourhood runs");
    nb->run_len = ag_alloc(R, sizeof(int64_t), err, "neighbourhood runs");
    if (!nb->run_ptr || !nb->run_src || !nb->run_len)
        return ag_alloc_status();
    int64_t r = 0;
    for (int64_t i = 0; i < N; i++) {
        nb->run_ptr[i] = r;
        for (int64_t s = nb->edge_ptr[i]; s < nb->edge_ptr[i + 1]; s++) {
            if (s == nb->edge_ptr[i] || slot_src[s] != slot_src[s - 1] + 1) {
                nb->run_src[r] = slot_src[s];
                nb->run_len[r++] = 0;
            }
            nb->run_len[r - 1]++;
        }
    }
    nb->run_ptr[N] = r;
    return AG_OK;
}

/* Stable counting sort of idx[0..n) by key[idx[k]] into out; keys in 0..K-1. */
static void counting_sort(int64_t *out, const int64_t *idx, const int64_t *key, int64_t n,
                         int64_t K, int64_t *offsets /* [K+1] */)
{
    memset(offsets, 0, (size_t)(K + 1) * sizeof *offsets);
    for (int64_t k = 0; k < n; k++)
        offsets[key[idx ? idx[k] : k] + 1]++;
    for (int64_t v = 0; v < K; v++)
        offsets[v + 1] += offsets[v];
    for (int64_t k = 0; k < n; k++) {
        int64_t m = idx ? idx[k] : k;
        out[offsets[key[m]]++] = m;
    }
    /* offsets[v] now ends bucket v; shift back so offsets[v] starts it */
    memmove(offsets + 1, offsets, (size_t)K * sizeof *offsets);
    offsets[0] = 0;
}

int ag_nbhd_from_graph(ag_nbhd_t *nb, const igraph_t *graph, ag_error_t *err)
{
    memset(nb, 0, sizeof *nb);
    const int64_t N = igraph_vcount(graph), E_graph = igraph_ecount(graph);
    const int directed = igraph_is_directed(graph);

    /* Messages in edge-id order: u->v, and for undirected edges also v->u. */
    int64_t M = E_graph;
    if (!directed)
        for (int64_t e = 0; e < E_graph; e++)
            M += IGRAPH_FROM(graph, e) != IGRAPH_TO(graph, e);
    int64_t *src = ag_alloc(M, sizeof *src, err, "messages");
    int64_t *dst = ag_alloc(M, sizeof *dst, err, "messages");
    int64_t *eid = ag_alloc(M, sizeof *eid, err, "messages");
    int64_t *by_src = ag_alloc(M, sizeof *by_src, err, "messages");
    int64_t *order = ag_alloc(M, sizeof *order, err, "messages");
    int64_t *slot_src = ag_alloc(M, sizeof *slot_src, err, "messages");
    nb->edge_ptr = ag_alloc(N + 1, sizeof(int64_t), err, "neighbourhoods");
    nb->edge_id = ag_alloc(M, sizeof(int64_t), err, "neighbourhoods");
    int rc = AG_OK;
    if (!src || !dst || !eid || !by_src || !order || !slot_src || !nb->edge_ptr ||
        !nb->edge_id) {
        rc = ag_alloc_status();
        goto done;
    }

    int64_t k = 0;
    for (int64_t e = 0; e < E_graph; e++) {
        int64_t u = IGRAPH_FROM(graph, e), v = IGRAPH_TO(graph, e);
        src[k] = u, dst[k] = v, eid[k++] = e;
        if (!directed && u != v)
            src[k] = v, dst[k] = u, eid[k++] = e;
    }
    /* Sort by source, then stably by destination: sources ascend in each
       destination, ties (multi-edges) in edge-id order. */
    nb->n_nodes = N;
    nb->n_edges = M;
    counting_sort(by_src, NULL, src, M, N, nb->edge_ptr);
    counting_sort(order, by_src, dst, M, N, nb->edge_ptr);
    nb->edge_ptr[N] = M;
    for (int64_t s = 0; s < M; s++) {
        slot_src[s] = src[order[s]];
        nb->edge_id[s] = eid[order[s]];
    }
    rc = build_runs(nb, slot_src, err);
done:
    free(src);
    free(dst);
    free(eid);
    free(by_src);
    free(order);
    free(slot_src);
    if (rc)
        ag_nbhd_destroy(nb);
    return rc;
}

int ag_nbhd_self_loops(ag_nbhd_t *nb, ag_self_loops_t self, ag_error_t *err)
{
    if (self == AG_SELF_KEEP)
        return AG_OK;
    if (self != AG_SELF_ON && self != AG_SELF_OFF && self != AG_SELF_REPLACE)
        return ag_fail(err, AG_EINVAL, "self-loops mode %d; expected AG_SELF_KEEP, AG_SELF_ON, "
                       "AG_SELF_OFF or AG_SELF_REPLACE", (int)self);
    /* add: one loop per node (on: where there is none); drop: the node's own */
    const int add = self != AG_SELF_OFF, drop = self != AG_SELF_ON;
    const int64_t N = nb->n_nodes, E = nb->n_edges;
    int64_t *src = ag_alloc(E + 1, sizeof *src, err, "self-loops");
    if (!src)
        return ag_alloc_status();
    ag_nbhd_sources(nb, 0, N, src);
    /* the new size: one slot more for each node without a self edge (on), one
       less for each self edge (off), one loop a node instead of its self edges
       (replace) */
    int64_t E_new = add ? E + N : E;
    for (int64_t i = 0; i < N; i++) {
        int64_t selfs = 0;
        for (int64_t s = nb->edge_ptr[i]; s < nb->edge_ptr[i + 1]; s++)
            selfs += src[s] == i;
        E_new -= drop ? selfs : (selfs > 0);
    }
    /* Every result has edge ids, so exports keep the input's edge order with the
       added loops last: a graph's edge ids, or without them (CSR) the input's
       slot indices, which are the user's edge numbers. */
    ag_nbhd_t out = {.n_nodes = N, .n_edges = E_new};
    int64_t *out_src = ag_alloc(E_new + 1, sizeof *out_src, err, "self-loops");
    out.edge_ptr = ag_alloc(N + 1, sizeof(int64_t), err, "self-loops");
    out.edge_id = ag_alloc(E_new + 1, sizeof(int64_t), err, "self-loops");
    int rc = AG_OK;
    if (!out_src || !out.edge_ptr || !out.edge_id) {
        rc = ag_alloc_status();
        goto done;
    }
    int64_t t = 0;
    for (int64_t i = 0; i < N; i++) {
        out.edge_ptr[i] = t;
        int placed = !add;   /* the added loop still to place */
        for (int64_t s = nb->edge_ptr[i]; s <= nb->edge_ptr[i + 1]; s++) {
            const int end = s == nb->edge_ptr[i + 1];
            if (!placed && (end || src[s] >= i)) {
                placed = 1;
                /* sources ascend: the loop goes here, unless on keeps one */
                if (drop || end || src[s] != i) {
                    out_src[t] = i;
                    out.edge_id[t] = -1;
                    t++;
                }
            }
            if (end || (drop && src[s] == i))
                continue;
            out_src[t] = src[s];
            out.edge_id[t] = nb->edge_id ? nb->edge_id[s] : s;
            t++;
        }
    }
    out.edge_ptr[N] = t;
    rc = build_runs(&out, out_src, err);
done:
    free(src);
    free(out_src);
    if (rc) {
        ag_nbhd_destroy(&out);
        return rc;
    }
    ag_nbhd_destroy(nb);
    *nb = out;
    return AG_OK;
}

int ag_nbhd_from_csr(ag_nbhd_t *nb, int64_t n_nodes, const int64_t *indptr,
                     const int64_t *indices, ag_error_t *err)
{
    memset(nb, 0, sizeof *nb);
    if (n_nodes <= 0)
        return ag_fail(err, AG_EINVAL, "CSR: %lld nodes; expected at least 1",
                       (long long)n_nodes);
    if (indptr[0] != 0)
        return ag_fail(err, AG_EINVAL, "CSR: indptr[0] is %lld; expected 0",
                       (long long)indptr[0]);
    /* indptr whole first: only a non-decreasing indptr bounds the reads of indices
       (indices has indptr[N] entries) */
    for (int64_t i = 0; i < n_nodes; i++)
        if (indptr[i + 1] < indptr[i])
            return ag_fail(err, AG_EINVAL, "CSR: indptr decreases at %lld (%lld then %lld)",
                           (long long)i, (long long)indptr[i], (long long)indptr[i + 1]);
    for (int64_t i = 0; i < n_nodes; i++) {
        for (int64_t s = indptr[i]; s < indptr[i + 1]; s++) {
            if (indices[s] < 0 || indices[s] >= n_nodes)
                return ag_fail(err, AG_EINVAL, "CSR: indices[%lld] is %lld; expected a node "
                               "in 0..%lld", (long long)s, (long long)indices[s],
                               (long long)n_nodes - 1);
            if (s > indptr[i] && indices[s] < indices[s - 1])
                return ag_fail(err, AG_EINVAL, "CSR: sources of node %lld are not ascending "
                               "(indices[%lld] = %lld after %lld)", (long long)i, (long long)s,
                               (long long)indices[s], (long long)indices[s - 1]);
        }
    }
    nb->n_nodes = n_nodes;
    nb->n_edges = indptr[n_nodes];
    nb->edge_ptr = ag_alloc(n_nodes + 1, sizeof(int64_t), err, "neighbourhoods");
    if (!nb->edge_ptr)
        return ag_alloc_status();
    memcpy(nb->edge_ptr, indptr, (size_t)(n_nodes + 1) * sizeof(int64_t));
    int rc = build_runs(nb, indices, err);
    if (rc)
        ag_nbhd_destroy(nb);
    return rc;
}

/* A message on its way through ag_nbhd_from_edges' sorts: its destination and
   its rank in edge order (the kept columns, then the added loops). */
typedef struct {
    int64_t dst, rank;
} edge_item_t;

int ag_nbhd_from_edges(ag_nbhd_t *nb, int64_t n_src, int64_t n_dst, const int64_t *src,
                       const int64_t *dst, int64_t E, ag_self_loops_t self, int64_t *order,
                       ag_error_t *err)
{
    memset(nb, 0, sizeof *nb);
    const int64_t N = n_src > n_dst ? n_src : n_dst, L = n_src < n_dst ? n_src : n_dst;
    if (n_src < 0 || n_dst < 0 || N < 1 || E < 0 || N > INT64_MAX / 16 || E > INT64_MAX / 16)
        return ag_fail(err, AG_EINVAL, "edges: %lld sources, %lld destinations, %lld messages; "
                       "expected at least 1 node, no negative count and no count "
                       "near 2^63", (long long)n_src, (long long)n_dst, (long long)E);
    if (self != AG_SELF_KEEP && self != AG_SELF_ON && self != AG_SELF_OFF &&
        self != AG_SELF_REPLACE)
        return ag_fail(err, AG_EINVAL, "self-loops mode %d; expected AG_SELF_KEEP, AG_SELF_ON, "
                       "AG_SELF_OFF or AG_SELF_REPLACE", (int)self);
    for (int64_t k = 0; k < E; k++) {
        if (src[k] < 0 || src[k] >= n_src)
            return ag_fail(err, AG_EINVAL, "edge %lld has source %lld; expected a node id "
                           "0..%lld", (long long)k, (long long)src[k], (long long)n_src - 1);
        if (dst[k] < 0 || dst[k] >= n_dst)
            return ag_fail(err, AG_EINVAL, "edge %lld has target %lld; expected a node id "
                           "0..%lld", (long long)k, (long long)dst[k], (long long)n_dst - 1);
    }
    const int add = self == AG_SELF_ON || self == AG_SELF_REPLACE;
    const int drop = self == AG_SELF_OFF || self == AG_SELF_REPLACE;
    const int64_t room = E + (add ? L : 0);
    /* Both sorts read their input in order and only write at random: a random
       read waits for memory, a write does not. */
    edge_item_t *by_src = ag_alloc(room + 1, sizeof *by_src, err, "edges");
    int64_t *count = ag_calloc(N + 1, sizeof *count, err, "edges");
    int64_t *next = ag_alloc(N + 1, sizeof *next, err, "edges");
    unsigned char *looped = ag_calloc(L + 1, 1, err, "edges");
    nb->edge_ptr = ag_calloc(N + 1, sizeof(int64_t), err, "neighbourhoods");
    int64_t *slot_src = ag_alloc(room + 1, sizeof *slot_src, err, "neighbourhoods");
    nb->edge_id = ag_alloc(room + 1, sizeof(int64_t), err, "neighbourhoods");
    int rc = AG_OK;
    if (!by_src || !count || !next || !looped || !nb->edge_ptr || !slot_src || !nb->edge_id) {
        rc = ag_alloc_status();
        goto done;
    }
    int64_t *ptr = nb->edge_ptr;
    int64_t M = 0, kept = 0;
    for (int64_t k = 0; k < E; k++) {
        const int is_loop = src[k] == dst[k];
        if (is_loop)
            looped[src[k]] = 1;
        if (!(is_loop && drop))
            count[src[k] + 1]++, ptr[dst[k] + 1]++, kept++;
    }
    M = kept;
    for (int64_t i = 0; add && i < L; i++)
        if (self == AG_SELF_REPLACE || !looped[i])
            count[i + 1]++, ptr[i + 1]++, M++;
    for (int64_t v = 0; v < N; v++)
        count[v + 1] += count[v], ptr[v + 1] += ptr[v];
    /* 1: by source, stably (edge order) */
    int64_t r = 0;
    for (int64_t k = 0; k < E; k++)
        if (!(drop && src[k] == dst[k]))
            by_src[count[src[k]]++] = (edge_item_t){dst[k], r++};
    for (int64_t i = 0; add && i < L; i++)
        if (self == AG_SELF_REPLACE || !looped[i])
            by_src[count[i]++] = (edge_item_t){i, r++};
    /* 2: by destination, stably: sources ascend in each destination, ties
       (multi-edges) in edge order. The source of by_src[p] is the bucket p is
       in (count[v] now ends bucket v). */
    memcpy(next, ptr, (size_t)N * sizeof *next);   /* next[v]: where v's next slot goes */
    const int64_t *col = NULL;
    int64_t *cols = NULL;
    if (drop && kept < E) {   /* the column of each kept rank: loops were dropped */
        cols = ag_alloc(kept + 1, sizeof *cols, err, "edges");
        if (!cols) {
            rc = ag_alloc_status();
            goto done;
        }
        for (int64_t k = 0, j = 0; k < E; k++)
            if (src[k] != dst[k])
                cols[j++] = k;
        col = cols;
    }
    for (int64_t v = 0, p = 0; v < N; v++) {
        const int64_t end = count[v];
        for (; p < end; p++) {
            const edge_item_t it = by_src[p];
            const int64_t t = next[it.dst]++;
            slot_src[t] = v;
            nb->edge_id[t] = it.rank >= kept ? -1 : col ? col[it.rank] : it.rank;
            if (order)
                order[it.rank] = t;
        }
    }
    free(cols);
    nb->n_nodes = N;
    nb->n_edges = M;
    rc = build_runs(nb, slot_src, err);
done:
    free(by_src), free(count), free(next), free(looped), free(slot_src);
    if (rc)
        ag_nbhd_destroy(nb);
    return rc;
}

void ag_nbhd_sources(const ag_nbhd_t *nb, int64_t lo, int64_t hi, int64_t *src)
{
    int64_t k = 0;
    for (int64_t r = nb->run_ptr[lo]; r < nb->run_ptr[hi]; r++)
        for (int64_t j = 0; j < nb->run_len[r]; j++)
            src[k++] = nb->run_src[r] + j;
}

/* Slot order: edge k is slot k. */
static int slot_order(const ag_nbhd_t *nb, ag_edge_msg_t **msgs_out, int64_t **slot_out,
                      ag_error_t *err)
{
    const int64_t E = nb->n_edges;
    int64_t *src = ag_alloc(E, sizeof *src, err, "edge order");
    int64_t *slot = ag_alloc(E, sizeof *slot, err, "edge order");
    ag_edge_msg_t *msgs = ag_alloc(E, sizeof *msgs, err, "edge order");
    if (!src || !slot || !msgs) {
        free(src), free(slot), free(msgs);
        return ag_alloc_status();
    }
    ag_nbhd_sources(nb, 0, nb->n_nodes, src);
    for (int64_t i = 0; i < nb->n_nodes; i++)
        for (int64_t s = nb->edge_ptr[i]; s < nb->edge_ptr[i + 1]; s++) {
            msgs[s] = (ag_edge_msg_t){s, src[s], i};
            slot[s] = s;
        }
    free(src);
    *msgs_out = msgs;
    *slot_out = slot;
    return AG_OK;
}

int ag_edge_order(const ag_nbhd_t *nb, ag_edge_msg_t **msgs_out, int64_t **slot_out,
                  ag_error_t *err)
{
    *msgs_out = NULL;
    *slot_out = NULL;
    if (!nb->edge_id)
        return slot_order(nb, msgs_out, slot_out, err);
    const int64_t E = nb->n_edges, N = nb->n_nodes;
    int64_t max_eid = -1;
    for (int64_t s = 0; s < E; s++)
        if (nb->edge_id[s] > max_eid)
            max_eid = nb->edge_id[s];
    int64_t *slot_src = ag_alloc(E, sizeof *slot_src, err, "edge order");
    int64_t *offsets = ag_alloc(max_eid + 3, sizeof *offsets, err, "edge order");
    int64_t *slot = ag_alloc(E, sizeof *slot, err, "edge order");
    int64_t *key = ag_alloc(E, sizeof *key, err, "edge order");
    ag_edge_msg_t *msgs = ag_alloc(E, sizeof *msgs, err, "edge order");
    if (!slot_src || !offsets || !slot || !key || !msgs) {
        free(slot_src);
        free(offsets);
        free(slot);
        free(key);
        free(msgs);
        return ag_alloc_status();
    }
    ag_nbhd_sources(nb, 0, N, slot_src);
    /* added self-loops (edge id -1) come after the graph's edges, by node */
    for (int64_t s = 0; s < E; s++)
        key[s] = nb->edge_id[s] >= 0 ? nb->edge_id[s] : max_eid + 1;
    counting_sort(slot, NULL, key, E, max_eid + 2, offsets);
    free(key);
    for (int64_t k = 0; k < E; k++) {
        /* destination of a slot: the last node whose slots start at or before it */
        const int64_t s = slot[k];
        msgs[k] = (ag_edge_msg_t){nb->edge_id[s], slot_src[s],
                                  ag_i_last_at_most(nb->edge_ptr, N, s)};
    }
    /* An undirected edge's two messages: the one from the smaller node first. */
    for (int64_t k = 1; k < E; k++)
        if (msgs[k].edge_id >= 0 && msgs[k].edge_id == msgs[k - 1].edge_id &&
            msgs[k].src < msgs[k - 1].src) {
            ag_edge_msg_t t = msgs[k];
            msgs[k] = msgs[k - 1];
            msgs[k - 1] = t;
            int64_t ts = slot[k];
            slot[k] = slot[k - 1];
            slot[k - 1] = ts;
        }
    free(slot_src);
    free(offsets);
    *msgs_out = msgs;
    *slot_out = slot;
    return AG_OK;
}

int ag_graph_from_nbhd(igraph_t *graph, const ag_nbhd_t *nb, int64_t max_edges,
                       ag_error_t *err)
{
    const int64_t E = nb->n_edges;
    if (max_edges > 0 && E > max_edges)
        return ag_fail(err, AG_ELIMIT, "%lld edges are too many to materialise as a graph "
                       "(igraph needs ~32 bytes an edge: %.3g GB); the limit is %lld edge%s",
                       (long long)E, 32e-9 * (double)E, (long long)max_edges,
                       AG_PLURAL(max_edges));
    ag_edge_msg_t *msgs;
    int64_t *slot;
    int rc = ag_edge_order(nb, &msgs, &slot, err);
    if (rc)
        return rc;
    igraph_vector_int_t edges;
    ag_i_igraph_use_attributes();
    ag_i_igraph_enter();
    if (igraph_vector_int_init(&edges, 2 * E)) {
        rc = ag_fail(err, AG_ENOMEM, "graph of %lld edge%s: out of memory", (long long)E,
                     AG_PLURAL(E));
    } else {
        for (int64_t k = 0; k < E; k++) {
            VECTOR(edges)[2 * k] = msgs[k].src;
            VECTOR(edges)[2 * k + 1] = msgs[k].dst;
        }
        if (igraph_create(graph, &edges, nb->n_nodes, IGRAPH_DIRECTED))
            rc = ag_fail(err, AG_EIGRAPH, "graph of %lld edge%s: %s", (long long)E,
                         AG_PLURAL(E), ag_i_igraph_reason());
        igraph_vector_int_destroy(&edges);
    }
    ag_i_igraph_leave();
    free(msgs);
    free(slot);
    return rc;
}
