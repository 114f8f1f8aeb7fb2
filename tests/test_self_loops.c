/*
 * --self-loops replace against PyG: GATConv, GATv2Conv and TransformerConv
 * (add_self_loops=True) run remove_self_loops and then add_self_loops, so
 * every node attends to itself exactly once, and the loops come after the
 * other edges, in node order. The reference here is that edge list written
 * out by hand, attended to by the dense double-precision reference.
 * ag_nbhd_from_edges (PyG's edge_index, bipartite too, every self-loop mode)
 * against a brute-force reference: each destination's messages collected and
 * sorted with qsort, the mode applied by hand.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "testutil.h"

#define TOL_M 2e-5
#define TOL_W 1e-5

/* The test graph: node 1 has two self-loops, node 2 one, nodes 0, 3, 4 none;
   node 0 and node 1 hear from a larger node (their loop goes before it in
   their slots). Edge k of the file is (file_src[k], file_dst[k]). */
enum { N = 5, E_FILE = 9 };
static const int64_t file_src[E_FILE] = {0, 1, 2, 1, 3, 2, 1, 0, 4};
static const int64_t file_dst[E_FILE] = {1, 1, 0, 1, 2, 2, 3, 4, 1};
static const char file_text[] = "0 1\n1 1\n2 0\n1 1\n3 2\n2 2\n1 3\n0 4\n4 1\n";

/* PyG's edge_index after remove_self_loops + add_self_loops: the file's edges
   without loops, in order, then i -> i for every node. */
enum { E_PYG = 11 };
static const int64_t pyg_src[E_PYG] = {0, 2, 3, 1, 0, 4, 0, 1, 2, 3, 4};
static const int64_t pyg_dst[E_PYG] = {1, 0, 2, 3, 4, 1, 0, 1, 2, 3, 4};
static const int64_t pyg_file_edge[E_PYG] = {0, 2, 4, 6, 7, 8, -1, -1, -1, -1, -1};

/* The same graph as an in-neighbour CSR (sources ascending); its edge order is
   the entries' order, so PyG's edges are the entries without loops, then the
   loops; the CSR index of each. */
static const int64_t csr_ptr[N + 1] = {0, 1, 5, 7, 8, 9};
static const int64_t csr_idx[E_FILE] = {2, 0, 1, 1, 4, 2, 3, 1, 0};
static const int64_t csr_pyg_src[E_PYG] = {2, 0, 4, 3, 1, 0, 0, 1, 2, 3, 4};
static const int64_t csr_pyg_dst[E_PYG] = {0, 1, 1, 2, 3, 4, 0, 1, 2, 3, 4};
static const int64_t csr_pyg_entry[E_PYG] = {0, 1, 4, 6, 7, 8, -1, -1, -1, -1, -1};

/* PyG's edge list: edge k is src[k] -> dst[k], with id[k] (-1: an added loop) */
typedef struct {
    const int64_t *src, *dst, *id;
} pyg_t;
static const pyg_t file_pyg = {pyg_src, pyg_dst, pyg_file_edge};
static const pyg_t csr_pyg = {csr_pyg_src, csr_pyg_dst, csr_pyg_entry};

static void load_file(igraph_t *g)
{
    const char *path = tmp_path("loops.edges");
    write_text(path, file_text);
    ag_error_t err;
    ck_assert_msg(ag_graph_load(g, path, NULL, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(igraph_vcount(g), N);
    ck_assert_int_eq(igraph_ecount(g), E_FILE);
}

/* nb after replace: one loop per node (edge id -1) and the graph's other edges
   (edge id from want_id), sources ascending in each destination; in the edge
   order, PyG's edges one by one: the added loops last, by node. */
static void check_replaced(const ag_nbhd_t *nb, const pyg_t *want)
{
    ck_assert_int_eq(nb->n_nodes, N);
    ck_assert_int_eq(nb->n_edges, E_PYG);
    ck_assert_ptr_nonnull(nb->edge_id);
    int64_t src[E_PYG];
    ag_nbhd_sources(nb, 0, N, src);
    for (int64_t i = 0; i < N; i++) {
        int loops = 0;
        for (int64_t s = nb->edge_ptr[i]; s < nb->edge_ptr[i + 1]; s++) {
            if (s > nb->edge_ptr[i])
                ck_assert_int_le(src[s - 1], src[s]);   /* the kernels read them ascending */
            if (src[s] == i) {
                loops++;
                ck_assert_int_eq(nb->edge_id[s], -1);   /* the one loop is the added one */
            } else {
                ck_assert_int_ge(nb->edge_id[s], 0);
            }
        }
        ck_assert_msg(loops == 1, "node %lld attends to itself %d times; expected once",
                      (long long)i, loops);
    }
    ag_edge_msg_t *msgs;
    int64_t *slot;
    ag_error_t err;
    ck_assert_int_eq(ag_edge_order(nb, &msgs, &slot, &err), AG_OK);
    for (int k = 0; k < E_PYG; k++) {
        ck_assert_msg(msgs[k].src == want->src[k] && msgs[k].dst == want->dst[k] &&
                      msgs[k].edge_id == want->id[k],
                      "edge %d is %lld -> %lld (id %lld); expected %lld -> %lld (id %lld)", k,
                      (long long)msgs[k].src, (long long)msgs[k].dst, (long long)msgs[k].edge_id,
                      (long long)want->src[k], (long long)want->dst[k], (long long)want->id[k]);
        ck_assert_int_eq(src[slot[k]], msgs[k].src);
    }
    free(msgs), free(slot);
}

/* Attention over nb against the reference on PyG's edge list: messages for
   scaled-dot and GAT's additive score, and per-edge weights in edge order.
   Returns the largest difference of the messages (scaled-dot). */
static double diff_from_pyg(const ag_nbhd_t *nb, const pyg_t *pyg)
{
    enum { H = 2, d = 3, HD = H * d };
    float Q[N * HD], K[N * HD], V[N * HD], M[N * HD], a_src[HD], a_dst[HD];
    double Mref[N * HD], Wref[E_PYG * H];
    fill_uniform(Q, N * HD, 31, 1.5f), fill_uniform(K, N * HD, 32, 1.5f);
    fill_uniform(V, N * HD, 33, 1.0f), fill_uniform(a_src, HD, 34, 1.0f);
    fill_uniform(a_dst, HD, 35, 1.0f);
    ag_error_t err;
    ck_assert_int_eq(ag_attention(nb, Q, K, V, H, d, NULL, M, &err), AG_OK);
    ref_attention(N, pyg->src, pyg->dst, E_PYG, Q, K, V, H, d, Mref, Wref);
    const double diff = max_abs_diff_fd(M, Mref, N * HD);

    /* GATConv's score: LeakyReLU(a_dst . q_i + a_src . k_j), slope 0.2 */
    const ag_score_t gat = {SCORE_DEFAULTS, .kind = AG_SCORE_ADDITIVE, .a_src = a_src,
                            .a_dst = a_dst};
    const ref_score_t gat_ref = {.kind = 3, .beta = 1, .slope = 0.2, .a_src = a_src,
                                 .a_dst = a_dst};
    double Mgat[N * HD];
    float Mg[N * HD];
    ck_assert_int_eq(ag_attention(nb, Q, K, V, H, d, &gat, Mg, &err), AG_OK);
    ref_attention_scored(N, pyg->src, pyg->dst, E_PYG, Q, K, V, H, d, &gat_ref, Mgat, NULL);
    const double diff_gat = max_abs_diff_fd(Mg, Mgat, N * HD);
    if (nb->n_edges != E_PYG)
        return diff > diff_gat ? diff : diff_gat;
    ck_assert_msg(diff_gat <= TOL_M, "additive: messages differ from PyG's by %g", diff_gat);

    /* the weights in the graph's edge order are PyG's edge by edge */
    float W[E_PYG * H];
    ck_assert_int_eq(ag_attention_weights(nb, Q, K, H, d, NULL, 0, N, W, &err), AG_OK);
    ag_edge_msg_t *msgs;
    int64_t *slot;
    ck_assert_int_eq(ag_edge_order(nb, &msgs, &slot, &err), AG_OK);
    for (int k = 0; k < E_PYG; k++)
        for (int h = 0; h < H; h++)
            ck_assert_msg(fabs(W[slot[k] * H + h] - Wref[k * H + h]) <= TOL_W,
                          "edge %d head %d: weight %g; PyG's %g", k, h, W[slot[k] * H + h],
                          Wref[k * H + h]);
    free(msgs), free(slot);
    return diff;
}

START_TEST(replace_on_a_graph_file_is_pyg)
{
    igraph_t g;
    load_file(&g);
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_self_loops(&nb, AG_SELF_REPLACE, &err), AG_OK);
    check_replaced(&nb, &file_pyg);
    const double diff = diff_from_pyg(&nb, &file_pyg);
    ck_assert_msg(diff <= TOL_M, "replace: messages differ from PyG's by %g", diff);
    /* the transpose (the backward's) sees the same messages */
    ck_assert_int_eq(ag_nbhd_transpose(&nb, &err), AG_OK);
    ag_nbhd_destroy(&nb);

    /* on keeps node 1's two loops: not PyG's result on this graph */
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_self_loops(&nb, AG_SELF_ON, &err), AG_OK);
    ck_assert_int_eq(nb.n_edges, E_PYG + 1);
    ck_assert_double_gt(diff_from_pyg(&nb, &file_pyg), 1e-2);
    ag_nbhd_destroy(&nb);
    igraph_destroy(&g);
}
END_TEST

START_TEST(replace_on_an_undirected_graph_file)
{
    /* undirected: 0-1, 1-1, 1-1, 2-1; a loop is one message, removed; one added */
    const int64_t src[] = {0, 1, 1, 2}, dst[] = {1, 1, 1, 1};
    igraph_t g;
    build_graph(&g, 3, src, dst, 4, 0);
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    ck_assert_int_eq(nb.n_edges, 6);
    ck_assert_int_eq(ag_nbhd_self_loops(&nb, AG_SELF_REPLACE, &err), AG_OK);
    ag_edge_msg_t *msgs;
    int64_t *slot;
    ck_assert_int_eq(ag_edge_order(&nb, &msgs, &slot, &err), AG_OK);
    static const int64_t want[7][3] = {{0, 0, 1}, {0, 1, 0}, {3, 1, 2}, {3, 2, 1},
                                       {-1, 0, 0}, {-1, 1, 1}, {-1, 2, 2}};
    ck_assert_int_eq(nb.n_edges, 7);
    for (int k = 0; k < 7; k++)
        ck_assert(msgs[k].edge_id == want[k][0] && msgs[k].src == want[k][1] &&
                  msgs[k].dst == want[k][2]);
    free(msgs), free(slot);
    ag_nbhd_destroy(&nb);
    igraph_destroy(&g);
}
END_TEST

START_TEST(replace_on_a_csr_is_pyg)
{
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, N, csr_ptr, csr_idx, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_self_loops(&nb, AG_SELF_REPLACE, &err), AG_OK);
    check_replaced(&nb, &csr_pyg);   /* kept slots keep their CSR index */
    const double diff = diff_from_pyg(&nb, &csr_pyg);
    ck_assert_msg(diff <= TOL_M, "replace: messages differ from PyG's by %g", diff);
    /* replace again changes nothing: there is one loop a node already */
    ck_assert_int_eq(ag_nbhd_self_loops(&nb, AG_SELF_REPLACE, &err), AG_OK);
    ck_assert_int_eq(nb.n_edges, E_PYG);
    ag_nbhd_destroy(&nb);

    /* a loop-free CSR: replace is on */
    const int64_t ptr1[] = {0, 1, 2, 3}, idx1[] = {1, 2, 0};
    ag_nbhd_t on;
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, 3, ptr1, idx1, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_csr(&on, 3, ptr1, idx1, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_self_loops(&nb, AG_SELF_REPLACE, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_self_loops(&on, AG_SELF_ON, &err), AG_OK);
    ck_assert_int_eq(nb.n_edges, 6);
    ck_assert_int_eq(nb.n_runs, on.n_runs);
    ck_assert_mem_eq(nb.edge_id, on.edge_id, 6 * sizeof(int64_t));
    ck_assert_mem_eq(nb.run_src, on.run_src, (size_t)nb.n_runs * sizeof(int64_t));
    ag_nbhd_destroy(&nb);
    ag_nbhd_destroy(&on);
}
END_TEST

START_TEST(replace_on_a_pattern_is_one_loop_a_node)
{
    /* a pattern never lists a source twice: replace is off plus one loop a node,
       the same as on; edge k stays slot k */
    const char *specs[] = {"causal", "dilated:4,3", "cross:2,3", "causal&!window:1"};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        ag_pattern_t *p;
        ag_nbhd_t off, rep;
        ag_error_t err;
        ck_assert_int_eq(ag_pattern_parse(&p, specs[k], &err), AG_OK);
        ck_assert_int_eq(ag_nbhd_from_pattern(&off, p, 5, AG_SELF_OFF, &err), AG_OK);
        ck_assert_int_eq(ag_nbhd_from_pattern(&rep, p, 5, AG_SELF_REPLACE, &err), AG_OK);
        ck_assert_ptr_null(rep.edge_id);
        ck_assert_int_eq(rep.n_edges, off.n_edges + 5);
        int64_t src[25];
        ag_nbhd_sources(&rep, 0, 5, src);
        for (int64_t i = 0; i < 5; i++) {
            int loops = 0;
            for (int64_t s = rep.edge_ptr[i]; s < rep.edge_ptr[i + 1]; s++)
                loops += src[s] == i;
            ck_assert_msg(loops == 1, "%s: node %lld attends to itself %d times", specs[k],
                          (long long)i, loops);
            ck_assert_int_eq(rep.edge_ptr[i + 1] - rep.edge_ptr[i],
                             off.edge_ptr[i + 1] - off.edge_ptr[i] + 1);
        }
        ag_nbhd_destroy(&off);
        ag_nbhd_destroy(&rep);
        ag_pattern_free(p);
    }
}
END_TEST

START_TEST(unknown_modes_are_refused)
{
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, N, csr_ptr, csr_idx, &err), AG_OK);
    ck_assert_fails_with(ag_nbhd_self_loops(&nb, (ag_self_loops_t)7, &err), err, AG_EINVAL,
                         "self-loops mode 7; expected");
    ck_assert_int_eq(nb.n_edges, E_FILE);   /* unchanged */
    ag_nbhd_destroy(&nb);
    ag_pattern_t *p;
    ck_assert_int_eq(ag_pattern_parse(&p, "causal", &err), AG_OK);
    ck_assert_fails_with(ag_nbhd_from_pattern(&nb, p, 4, (ag_self_loops_t)-1, &err), err,
                         AG_EINVAL, "self-loops mode -1");
    ag_pattern_free(p);
}
END_TEST

/* ---- edge lists (ag_nbhd_from_edges) ---- */

/* The reference for ag_nbhd_from_edges, by brute force: the messages kept in
   edge order (item m: src -> dst, column col, -1 an added loop), then for each
   destination its items sorted by (source, m) with qsort. */
typedef struct {
    int64_t N, M;            /* nodes, messages */
    int64_t *src, *dst, *col;   /* [M] in edge order */
    int64_t *ptr;            /* [N+1] first slot of each destination */
    int64_t *slot_item;      /* [M] the item in each slot */
    int64_t *item_slot;      /* [M] the slot of each item: order */
} ref_edges_t;

static const int64_t *cmp_src;   /* qsort's key: the items' sources */

static int by_src_then_item(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    if (cmp_src[x] != cmp_src[y])
        return cmp_src[x] < cmp_src[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static void ref_edges(ref_edges_t *r, int64_t n_src, int64_t n_dst, const int64_t *src,
                      const int64_t *dst, int64_t E, ag_self_loops_t self)
{
    const int64_t n_nodes = n_src > n_dst ? n_src : n_dst, L = n_src < n_dst ? n_src : n_dst;
    const size_t room = (size_t)(E + L + 1);
    r->N = n_nodes;
    r->src = malloc(room * sizeof(int64_t)), r->dst = malloc(room * sizeof(int64_t));
    r->col = malloc(room * sizeof(int64_t)), r->slot_item = malloc(room * sizeof(int64_t));
    r->item_slot = malloc(room * sizeof(int64_t));
    r->ptr = malloc((size_t)(n_nodes + 1) * sizeof(int64_t));
    int *has_loop = calloc((size_t)L + 1, sizeof *has_loop);
    int64_t M = 0;
    for (int64_t k = 0; k < E; k++) {
        if (src[k] == dst[k]) {
            has_loop[src[k]] = 1;
            if (self == AG_SELF_OFF || self == AG_SELF_REPLACE)
                continue;
        }
        r->src[M] = src[k], r->dst[M] = dst[k], r->col[M++] = k;
    }
    if (self == AG_SELF_ON || self == AG_SELF_REPLACE)
        for (int64_t i = 0; i < L; i++)
            if (self == AG_SELF_REPLACE || !has_loop[i])
                r->src[M] = i, r->dst[M] = i, r->col[M++] = -1;
    r->M = M;
    int64_t t = 0;
    cmp_src = r->src;
    for (int64_t i = 0; i < n_nodes; i++) {
        r->ptr[i] = t;
        for (int64_t m = 0; m < M; m++)
            if (r->dst[m] == i)
                r->slot_item[t++] = m;
        qsort(r->slot_item + r->ptr[i], (size_t)(t - r->ptr[i]), sizeof(int64_t),
              by_src_then_item);
    }
    r->ptr[n_nodes] = t;
    for (int64_t s = 0; s < M; s++)
        r->item_slot[r->slot_item[s]] = s;
    free(has_loop);
}

static void ref_edges_free(ref_edges_t *r)
{
    free(r->src), free(r->dst), free(r->col), free(r->ptr), free(r->slot_item);
    free(r->item_slot);
}

/* nb and order against the reference, field by field (what names the case). */
static void check_from_edges(const ag_nbhd_t *nb, const int64_t *order, int64_t room,
                             const ref_edges_t *r, const char *what)
{
    ck_assert_msg(nb->n_nodes == r->N && nb->n_edges == r->M,
                  "%s: %lld nodes, %lld messages; expected %lld, %lld", what,
                  (long long)nb->n_nodes, (long long)nb->n_edges, (long long)r->N,
                  (long long)r->M);
    const int64_t n_nodes = r->N, M = r->M;
    for (int64_t i = 0; i <= n_nodes; i++)
        ck_assert_msg(nb->edge_ptr[i] == r->ptr[i], "%s: edge_ptr[%lld] %lld; expected %lld",
                      what, (long long)i, (long long)nb->edge_ptr[i], (long long)r->ptr[i]);
    ck_assert_ptr_nonnull(nb->edge_id);
    int64_t *src = malloc((size_t)(M + 1) * sizeof *src);
    ag_nbhd_sources(nb, 0, n_nodes, src);
    for (int64_t s = 0; s < M; s++) {
        const int64_t m = r->slot_item[s];
        ck_assert_msg(src[s] == r->src[m] && nb->edge_id[s] == r->col[m],
                      "%s: slot %lld is from %lld (edge %lld); expected from %lld (edge %lld)",
                      what, (long long)s, (long long)src[s], (long long)nb->edge_id[s],
                      (long long)r->src[m], (long long)r->col[m]);
    }
    /* the runs: each destination's, at least one source each, maximal (a run
       that continues the one before would have been merged; a repeated source
       starts a new one) */
    ck_assert_int_eq(nb->run_ptr[0], 0);
    ck_assert_int_eq(nb->run_ptr[n_nodes], nb->n_runs);
    int64_t runs = 0;
    for (int64_t i = 0; i < n_nodes; i++) {
        ck_assert_int_eq(nb->run_ptr[i], runs);
        int64_t slots = 0;
        for (int64_t rr = nb->run_ptr[i]; rr < nb->run_ptr[i + 1]; rr++) {
            ck_assert_int_ge(nb->run_len[rr], 1);
            if (rr > nb->run_ptr[i])
                ck_assert_msg(nb->run_src[rr] != nb->run_src[rr - 1] + nb->run_len[rr - 1],
                              "%s: node %lld: run %lld continues the one before", what,
                              (long long)i, (long long)rr);
            slots += nb->run_len[rr];
        }
        ck_assert_int_eq(slots, r->ptr[i + 1] - r->ptr[i]);
        for (int64_t s = r->ptr[i]; s < r->ptr[i + 1]; s++)
            runs += s == r->ptr[i] || r->src[r->slot_item[s]] != r->src[r->slot_item[s - 1]] + 1;
    }
    ck_assert_int_eq(nb->n_runs, runs);
    if (order) {
        for (int64_t m = 0; m < M; m++)
            ck_assert_msg(order[m] == r->item_slot[m], "%s: order[%lld] %lld; expected %lld",
                          what, (long long)m, (long long)order[m], (long long)r->item_slot[m]);
        for (int64_t m = M; m < room; m++)
            ck_assert_int_eq(order[m], -7);   /* untouched past the messages */
    }
    /* ag_edge_order walks the same messages in the same order */
    ag_edge_msg_t *msgs;
    int64_t *slot;
    ag_error_t err;
    ck_assert_int_eq(ag_edge_order(nb, &msgs, &slot, &err), AG_OK);
    for (int64_t m = 0; m < M; m++)
        ck_assert_msg(slot[m] == r->item_slot[m] && msgs[m].edge_id == r->col[m] &&
                      msgs[m].src == r->src[m] && msgs[m].dst == r->dst[m],
                      "%s: edge order %lld: slot %lld, %lld -> %lld (id %lld); expected slot "
                      "%lld, %lld -> %lld (id %lld)", what, (long long)m, (long long)slot[m],
                      (long long)msgs[m].src, (long long)msgs[m].dst, (long long)msgs[m].edge_id,
                      (long long)r->item_slot[m], (long long)r->src[m], (long long)r->dst[m],
                      (long long)r->col[m]);
    free(msgs), free(slot), free(src);
}

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

/* E random messages on n_src x n_dst: multi-edges (a quarter repeat an earlier
   message), self-loops (a fifth, some of them repeated too), and when
   n_dst >= 3 a last destination that hears nothing. */
static void random_edges(int64_t *src, int64_t *dst, int64_t E, int64_t n_src, int64_t n_dst,
                         uint64_t seed)
{
    uint64_t x = seed;
    const int64_t L = n_src < n_dst ? n_src : n_dst, heard = n_dst >= 3 ? n_dst - 1 : n_dst;
    for (int64_t k = 0; k < E; k++) {
        const uint64_t u = lcg(&x) % 20;
        if (k > 0 && u < 5) {
            const int64_t j = (int64_t)(lcg(&x) % (uint64_t)k);
            src[k] = src[j], dst[k] = dst[j];
        } else if (u < 9 && L > 0 && (int64_t)(lcg(&x) % (uint64_t)n_dst) < heard) {
            src[k] = dst[k] = (int64_t)(lcg(&x) % (uint64_t)(L < heard ? L : heard));
        } else {
            src[k] = (int64_t)(lcg(&x) % (uint64_t)n_src);
            dst[k] = (int64_t)(lcg(&x) % (uint64_t)heard);
        }
    }
}

static const char *const mode_names[] = {"keep", "on", "off", "replace"};

START_TEST(edges_against_a_brute_force_reference)
{
    /* square, bipartite both ways, one node, one source or one destination,
       nodes without edges (sources 0: no message at all) */
    static const int64_t shapes[][3] = {{1, 1, 3},  {2, 2, 6},   {6, 6, 20}, {17, 17, 60},
                                        {5, 11, 30}, {11, 5, 30}, {1, 7, 9},  {7, 1, 9},
                                        {3, 20, 25}, {20, 3, 25}, {9, 9, 2},  {0, 4, 0},
                                        {4, 0, 0}};
    int tried = 0;
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
        for (uint64_t seed = 1; seed <= 6; seed++)
            for (int64_t E_try = 0; E_try <= 1; E_try++) {
                const int64_t n_src = shapes[c][0], n_dst = shapes[c][1];
                const int64_t E = E_try ? shapes[c][2] * (int64_t)seed / 3 : 0;
                if (E_try && E == 0)
                    continue;
                const int64_t L = n_src < n_dst ? n_src : n_dst, room = E + L;
                int64_t *src = malloc((size_t)(E + 1) * sizeof *src);
                int64_t *dst = malloc((size_t)(E + 1) * sizeof *dst);
                int64_t *order = malloc((size_t)(room + 1) * sizeof *order);
                random_edges(src, dst, E, n_src, n_dst, seed * 7919 + c);
                for (int self = AG_SELF_KEEP; self <= AG_SELF_REPLACE; self++) {
                    char what[128];
                    snprintf(what, sizeof what, "%lld x %lld, %lld edges, seed %llu, %s",
                             (long long)n_src, (long long)n_dst, (long long)E,
                             (unsigned long long)seed, mode_names[self]);
                    ref_edges_t r;
                    ref_edges(&r, n_src, n_dst, src, dst, E, (ag_self_loops_t)self);
                    for (int64_t m = 0; m < room + 1; m++)
                        order[m] = -7;
                    ag_nbhd_t nb, plain;
                    ag_error_t err;
                    int rc = ag_nbhd_from_edges(&nb, n_src, n_dst, src, dst, E,
                                                (ag_self_loops_t)self, order, &err);
                    ck_assert_msg(rc == AG_OK, "%s: %s", what, err.msg);
                    check_from_edges(&nb, order, room, &r, what);
                    /* no order wanted: the same neighbourhoods */
                    rc = ag_nbhd_from_edges(&plain, n_src, n_dst, src, dst, E,
                                            (ag_self_loops_t)self, NULL, &err);
                    ck_assert_msg(rc == AG_OK, "%s: %s", what, err.msg);
                    check_from_edges(&plain, NULL, 0, &r, what);
                    /* the backward's transpose takes it */
                    ck_assert_int_eq(ag_nbhd_transpose(&nb, &err), AG_OK);
                    ag_nbhd_destroy(&nb), ag_nbhd_destroy(&plain);
                    ref_edges_free(&r);
                    tried++;
                }
                free(src), free(dst), free(order);
            }
    ck_assert_int_ge(tried, 13 * 6 * 4);
}
END_TEST

START_TEST(edges_equal_csr_then_self_loops)
{
    /* a square graph: the CSR of the same messages (sources ascending, ties in
       edge order) gives the same slots; the CSR's edge ids are its entries, so
       entry t is column perm[t] of the edge list */
    for (uint64_t seed = 1; seed <= 12; seed++) {
        const int64_t n_nodes = 3 + (int64_t)(seed * 5 % 23), E = (int64_t)(seed * 11 % 70);
        int64_t *src = malloc((size_t)(E + 1) * sizeof *src);
        int64_t *dst = malloc((size_t)(E + 1) * sizeof *dst);
        int64_t *perm = malloc((size_t)(E + 1) * sizeof *perm);
        int64_t *indices = malloc((size_t)(E + 1) * sizeof *indices);
        int64_t *indptr = malloc((size_t)(n_nodes + 1) * sizeof *indptr);
        random_edges(src, dst, E, n_nodes, n_nodes, seed * 104729);
        /* the CSR by brute force: each destination's columns, by (source, column) */
        int64_t t = 0;
        cmp_src = src;
        for (int64_t i = 0; i < n_nodes; i++) {
            indptr[i] = t;
            for (int64_t k = 0; k < E; k++)
                if (dst[k] == i)
                    perm[t++] = k;
            qsort(perm + indptr[i], (size_t)(t - indptr[i]), sizeof *perm, by_src_then_item);
        }
        indptr[n_nodes] = t;
        for (int64_t s = 0; s < E; s++)
            indices[s] = src[perm[s]];
        for (int self = AG_SELF_KEEP; self <= AG_SELF_REPLACE; self++) {
            ag_nbhd_t csr, edges;
            ag_error_t err;
            ck_assert_int_eq(ag_nbhd_from_csr(&csr, n_nodes, indptr, indices, &err), AG_OK);
            ck_assert_int_eq(ag_nbhd_self_loops(&csr, (ag_self_loops_t)self, &err), AG_OK);
            ck_assert_int_eq(ag_nbhd_from_edges(&edges, n_nodes, n_nodes, src, dst, E,
                                                (ag_self_loops_t)self, NULL, &err), AG_OK);
            ck_assert_int_eq(edges.n_nodes, csr.n_nodes);
            ck_assert_int_eq(edges.n_edges, csr.n_edges);
            ck_assert_int_eq(edges.n_runs, csr.n_runs);
            ck_assert_mem_eq(edges.edge_ptr, csr.edge_ptr,
                             (size_t)(n_nodes + 1) * sizeof(int64_t));
            const int64_t M = csr.n_edges;
            int64_t *a = malloc((size_t)(M + 1) * sizeof *a);
            int64_t *b = malloc((size_t)(M + 1) * sizeof *b);
            ag_nbhd_sources(&edges, 0, n_nodes, a);
            ag_nbhd_sources(&csr, 0, n_nodes, b);
            ck_assert_mem_eq(a, b, (size_t)M * sizeof *a);
            for (int64_t s = 0; s < M; s++) {
                /* keep leaves the CSR without ids: entry s */
                const int64_t entry = csr.edge_id ? csr.edge_id[s] : s;
                ck_assert_msg(edges.edge_id[s] == (entry < 0 ? -1 : perm[entry]),
                              "seed %llu, %s: slot %lld has edge %lld; the CSR's entry %lld "
                              "is column %lld", (unsigned long long)seed, mode_names[self],
                              (long long)s, (long long)edges.edge_id[s], (long long)entry,
                              (long long)(entry < 0 ? -1 : perm[entry]));
            }
            free(a), free(b);
            ag_nbhd_destroy(&csr), ag_nbhd_destroy(&edges);
        }
        free(src), free(dst), free(perm), free(indices), free(indptr);
    }
}
END_TEST

START_TEST(edges_replace_is_pyg)
{
    /* the file's edges as an edge_index: PyG's list again, the columns as ids */
    ag_nbhd_t nb;
    ag_error_t err;
    int64_t order[E_FILE + N];
    ck_assert_int_eq(ag_nbhd_from_edges(&nb, N, N, file_src, file_dst, E_FILE,
                                        AG_SELF_REPLACE, order, &err), AG_OK);
    check_replaced(&nb, &file_pyg);
    const double diff = diff_from_pyg(&nb, &file_pyg);
    ck_assert_msg(diff <= TOL_M, "replace: messages differ from PyG's by %g", diff);
    int64_t src[E_PYG];
    ag_nbhd_sources(&nb, 0, N, src);
    for (int k = 0; k < E_PYG; k++) {   /* order: PyG's edge k travels in slot order[k] */
        ck_assert_int_eq(src[order[k]], pyg_src[k]);
        ck_assert_int_ge(order[k], nb.edge_ptr[pyg_dst[k]]);
        ck_assert_int_lt(order[k], nb.edge_ptr[pyg_dst[k] + 1]);
    }
    ag_nbhd_destroy(&nb);
}
END_TEST

/* nb after a refusal: all zero, and destroy is safe */
static void expect_zeroed(ag_nbhd_t *nb)
{
    const ag_nbhd_t zero = {0};
    ck_assert_mem_eq(nb, &zero, sizeof zero);
    ag_nbhd_destroy(nb);
}

START_TEST(edges_out_of_range_are_refused)
{
    static const int64_t src[] = {0, 1, 2, 1}, dst[] = {1, 0, 1, 2};
    static const int64_t big_src[] = {0, 1, 5}, big_dst[] = {1, 4, 0};
    static const int64_t neg_src[] = {0, -1}, neg_dst[] = {0, -3};
    static const struct {
        int64_t n_src, n_dst;
        const int64_t *src, *dst;
        int64_t E;
        int self;
        const char *needle;
    } bad[] = {
        {3, 3, big_src, dst, 3, AG_SELF_KEEP, "edge 2 has source 5; expected a node id 0..2"},
        {2, 5, src, dst, 4, AG_SELF_ON, "edge 2 has source 2; expected a node id 0..1"},
        {3, 4, src, big_dst, 3, AG_SELF_OFF, "edge 1 has target 4; expected a node id 0..3"},
        {3, 2, src, dst, 4, AG_SELF_REPLACE, "edge 3 has target 2; expected a node id 0..1"},
        {3, 3, neg_src, dst, 2, AG_SELF_KEEP, "edge 1 has source -1"},
        {3, 3, src, neg_dst, 2, AG_SELF_KEEP, "edge 1 has target -3"},
        {0, 0, src, dst, 0, AG_SELF_KEEP, "0 sources, 0 destinations, 0 messages"},
        {0, 0, src, dst, 4, AG_SELF_ON, "0 sources, 0 destinations, 4 messages"},
        {-2, 3, src, dst, 4, AG_SELF_KEEP, "-2 sources"},
        {3, -1, src, dst, 4, AG_SELF_KEEP, "-1 destinations"},
        {3, 3, src, dst, -4, AG_SELF_KEEP, "-4 messages"},
        {0, 3, src, dst, 1, AG_SELF_KEEP, "edge 0 has source 0"},
        {3, 3, src, dst, 4, 7, "self-loops mode 7; expected AG_SELF_KEEP"},
        {3, 3, src, dst, 4, -1, "self-loops mode -1"},
    };
    for (size_t c = 0; c < sizeof bad / sizeof *bad; c++) {
        ag_nbhd_t nb;
        memset(&nb, 0xab, sizeof nb);   /* whatever the caller's memory held */
        int64_t order[16];
        ag_error_t err = {AG_OK, ""};
        const int rc = ag_nbhd_from_edges(&nb, bad[c].n_src, bad[c].n_dst, bad[c].src,
                                          bad[c].dst, bad[c].E, (ag_self_loops_t)bad[c].self,
                                          order, &err);
        ck_assert_msg(rc == AG_EINVAL, "case %zu: status %d (%s)", c, rc, err.msg);
        ck_assert_msg(strstr(err.msg, bad[c].needle), "case %zu: message '%s' lacks '%s'", c,
                      err.msg, bad[c].needle);
        expect_zeroed(&nb);
    }
    /* over the memory budget: refused the same way, nothing left behind */
    ag_nbhd_t nb;
    ag_error_t err;
    const int64_t before = ag_set_memory_budget(16);
    const int rc = ag_nbhd_from_edges(&nb, 3, 3, src, dst, 4, AG_SELF_ON, NULL, &err);
    ag_set_memory_budget(before);
    ck_assert_fails_with(rc, err, AG_ELIMIT, "memory budget");
    expect_zeroed(&nb);
}
END_TEST

/* ---- the command line ---- */

static void expect_pyg_rows(const char *csv)
{
    int64_t rows[32][3];
    ck_assert_int_eq(attn_csv_rows(csv, rows, 32), E_PYG);
    for (int k = 0; k < E_PYG; k++)
        ck_assert_msg(rows[k][0] == pyg_src[k] && rows[k][1] == pyg_dst[k] &&
                      rows[k][2] == (pyg_file_edge[k] < 0),
                      "%s row %d: %lld,%lld added=%lld; expected %lld,%lld added=%d", csv, k,
                      (long long)rows[k][0], (long long)rows[k][1], (long long)rows[k][2],
                      (long long)pyg_src[k], (long long)pyg_dst[k], pyg_file_edge[k] < 0);
}

START_TEST(cli_self_loops_replace)
{
    char edges[512], args[2048], csv[512], path[512];   /* tmp_path's buffers are reused */
    snprintf(edges, sizeof edges, "%s", tmp_path("cli_loops.edges"));
    write_text(edges, file_text);
    snprintf(args, sizeof args, "run %s --self-loops replace --dim 4", edges);
    expect_cli(args, 0, 1, "(edgelist, directed, self-loops replace): 5 nodes, 9 edges, "
               "11 messages");
    snprintf(args, sizeof args, "run %s --self-loops on --dim 4", edges);
    expect_cli(args, 0, 1, "9 edges, 12 messages");   /* on keeps node 1's two */

    /* --attn CSV: PyG's edges, the added loops last and marked */
    snprintf(csv, sizeof csv, "%s", tmp_path("replace.csv"));
    snprintf(args, sizeof args, "run %s --self-loops replace --dim 4 --quiet --attn %s", edges,
             csv);
    expect_cli(args, 0, 1, "");
    expect_pyg_rows(csv);

    /* GraphML: the file's edges (its loops carry no message: weight 0), then the
       five added loops, added = 1 */
    snprintf(path, sizeof path, "%s", tmp_path("replace.graphml"));
    snprintf(args, sizeof args, "run %s --self-loops replace --dim 4 --quiet --attn %s", edges,
             path);
    expect_cli(args, 0, 1, "");
    igraph_t g;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&g, path, NULL, &err), AG_OK);
    ck_assert_int_eq(igraph_ecount(&g), E_FILE + N);
    for (int64_t e = 0; e < E_FILE + N; e++) {
        ck_assert_int_eq(EAN(&g, "added", e), e >= E_FILE);
        if (e >= E_FILE)
            ck_assert_int_eq(IGRAPH_FROM(&g, e), e - E_FILE);
        if (e < E_FILE && file_src[e] == file_dst[e])
            ck_assert_double_eq(EAN(&g, "attn_mean", e), 0.0);
        if (e >= E_FILE || file_src[e] != file_dst[e])
            ck_assert_double_gt(EAN(&g, "attn_mean", e), 0.0);
    }
    igraph_destroy(&g);

    /* CSR: the entries kept in their order, then the loops; the same rows */
    char ptr_path[512], idx_path[512];
    snprintf(ptr_path, sizeof ptr_path, "%s", tmp_path("replace_ptr.npy"));
    snprintf(idx_path, sizeof idx_path, "%s", tmp_path("replace_idx.npy"));
    write_npy_raw(ptr_path, "<i8", 0, "(6,)", csr_ptr, sizeof csr_ptr);
    write_npy_raw(idx_path, "<i8", 0, "(9,)", csr_idx, sizeof csr_idx);
    snprintf(args, sizeof args, "run --csr %s,%s --self-loops replace --dim 4 --quiet "
             "--attn %s", ptr_path, idx_path, csv);
    expect_cli(args, 0, 1, "");
    int64_t rows[32][3];
    ck_assert_int_eq(attn_csv_rows(csv, rows, 32), E_PYG);
    for (int k = 0; k < E_PYG; k++)
        ck_assert(rows[k][0] == csr_pyg_src[k] && rows[k][1] == csr_pyg_dst[k] &&
                  rows[k][2] == (csr_pyg_entry[k] < 0));

    /* .npy: [E, H] rows in the same order; node 3's loop is its last row */
    snprintf(path, sizeof path, "%s", tmp_path("replace.npy"));
    snprintf(args, sizeof args, "run %s --self-loops replace --dim 4 --heads 2 --quiet "
             "--attn %s", edges, path);
    expect_cli(args, 0, 1, "");
    ag_matrix_t m;
    ck_assert_int_eq(ag_matrix_read_npy(&m, path, &err), AG_OK);
    ck_assert_int_eq(m.rows, E_PYG);
    for (int h = 0; h < 2; h++)   /* node 3 hears 1 (row 3) and itself (row 9) */
        ck_assert_float_eq_tol(m.data[3 * 2 + h] + m.data[9 * 2 + h], 1.0f, 1e-5f);
    ag_matrix_destroy(&m);

    /* a pattern: replace is on there */
    snprintf(args, sizeof args, "pattern 'causal&!window:1' --nodes 4 --self-loops replace "
             "--out %s", tmp_path("replace.ncol"));
    expect_cli(args, 0, 1, "");
    char *text = read_text(tmp_path("replace.ncol"));
    ck_assert_ptr_nonnull(text);
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    ck_assert_int_eq(lines, 10);   /* causal on 4 nodes */
    free(text);

    expect_cli("run graphs/sentence.gml --self-loops bogus", 2, 2,
               "--self-loops 'bogus': expected on, off, keep or replace");
    expect_cli("pattern causal --nodes 3 --out - --self-loops yes", 2, 2,
               "expected on, off, keep or replace");
}
END_TEST

Suite *self_loops_suite(void)
{
    Suite *s = suite_create("self_loops");
    TCase *tc = tcase_create("self_loops");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, replace_on_a_graph_file_is_pyg);
    tcase_add_test(tc, replace_on_an_undirected_graph_file);
    tcase_add_test(tc, replace_on_a_csr_is_pyg);
    tcase_add_test(tc, replace_on_a_pattern_is_one_loop_a_node);
    tcase_add_test(tc, unknown_modes_are_refused);
    tcase_add_test(tc, edges_against_a_brute_force_reference);
    tcase_add_test(tc, edges_equal_csr_then_self_loops);
    tcase_add_test(tc, edges_replace_is_pyg);
    tcase_add_test(tc, edges_out_of_range_are_refused);
    tcase_add_test(tc, cli_self_loops_replace);
    suite_add_tcase(s, tc);
    return s;
}
