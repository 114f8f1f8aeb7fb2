/*
 * The pattern language over a loaded graph: graph, hops:K, expander:D,
 * virtual:V and self, against dense references written here from
 * docs/patterns.md (adjacency matrices, their boolean powers, permutations
 * read back from the edges), independently of src/graph/pattern.c; their
 * refusals; and the command line's pattern over a graph file.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* A directed multigraph of n nodes with self-loops and repeated edges, E
   messages drawn by a seeded generator: the bound graph of every test. */
static void random_graph(ag_nbhd_t *g, char *adj, int64_t n, int64_t E, uint64_t seed)
{
    int64_t *src = malloc((size_t)E * sizeof *src), *dst = malloc((size_t)E * sizeof *dst);
    uint64_t s = seed * 2654435761u + 1;
    for (int64_t k = 0; k < E; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        src[k] = (int64_t)((s >> 33) % (uint64_t)n);
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        dst[k] = (int64_t)((s >> 33) % (uint64_t)n);
        if (k % 7 == 3)
            src[k] = src[k - 1], dst[k] = dst[k - 1];   /* a repeat: a multi-edge */
        adj[dst[k] * n + src[k]] = 1;
    }
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_edges(g, n, n, src, dst, E, AG_SELF_KEEP, NULL, &err), AG_OK);
    free(src);
    free(dst);
}

/* spec over g compiled on N nodes, as a dense 0/1 matrix [N, N] (runs checked
   ascending and disjoint, so a pattern lists a source once). */
static char *compiled(const char *spec, const ag_nbhd_t *g, int64_t N, ag_self_loops_t self)
{
    ag_pattern_t *p;
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_msg(ag_pattern_parse(&p, spec, &err) == AG_OK, "%s: %s", spec, err.msg);
    if (g)
        ck_assert_int_eq(ag_pattern_bind_graph(p, g, &err), AG_OK);
    ck_assert_msg(ag_nbhd_from_pattern(&nb, p, N, self, &err) == AG_OK, "%s: %s", spec, err.msg);
    ag_pattern_free(p);
    ck_assert_int_eq(nb.n_nodes, N);
    char *m = calloc((size_t)(N * N), 1);
    for (int64_t i = 0; i < N; i++) {
        int64_t prev_end = -1, count = 0;
        for (int64_t r = nb.run_ptr[i]; r < nb.run_ptr[i + 1]; r++) {
            ck_assert_int_gt(nb.run_src[r], prev_end);
            for (int64_t j = nb.run_src[r]; j < nb.run_src[r] + nb.run_len[r]; j++)
                m[i * N + j] = 1, count++;
            prev_end = nb.run_src[r] + nb.run_len[r];
        }
        ck_assert_int_eq(count, nb.edge_ptr[i + 1] - nb.edge_ptr[i]);
    }
    ag_nbhd_destroy(&nb);
    return m;
}

static void assert_same(const char *spec, const char *got, const char *want, int64_t N)
{
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            ck_assert_msg(got[i * N + j] == want[i * N + j], "%s on %lld nodes: %lld -> %lld is "
                          "%s", spec, (long long)N, (long long)j, (long long)i,
                          got[i * N + j] ? "present" : "missing");
}

START_TEST(graph_is_the_bound_graphs_edges_once)
{
    const int64_t n = 23;
    char *adj = calloc(n * n, 1), *want = calloc(n * n, 1);
    ag_nbhd_t g;
    random_graph(&g, adj, n, 90, 1);
    char *got = compiled("graph", &g, n, AG_SELF_KEEP);
    assert_same("graph", got, adj, n);
    free(got);
    /* graph & !self: the loops gone; self: the identity; a loop on every node with on */
    for (int64_t i = 0; i < n * n; i++)
        want[i] = adj[i] && i / n != i % n;
    assert_same("graph&!self", got = compiled("graph&!self", &g, n, AG_SELF_KEEP), want, n);
    free(got);
    assert_same("graph", got = compiled("graph", &g, n, AG_SELF_OFF), want, n);
    free(got);
    for (int64_t i = 0; i < n * n; i++)
        want[i] = adj[i] || i / n == i % n;
    assert_same("graph+self", got = compiled("graph+self", &g, n, AG_SELF_KEEP), want, n);
    free(got);
    /* composition with a sequence word: union with the causal mask */
    for (int64_t i = 0; i < n * n; i++)
        want[i] = adj[i] || i % n <= i / n;
    assert_same("graph+causal", got = compiled("graph+causal", &g, n, AG_SELF_KEEP), want, n);
    free(got);
    ag_nbhd_destroy(&g);
    free(adj);
    free(want);
}
END_TEST

/* hops:K against the boolean powers of the adjacency: reach[i][j] after k
   steps is OR over m of reach_{k-1}[i][m] and adj[m][j]. */
START_TEST(hops_are_paths_of_one_to_k_edges)
{
    const int64_t n = 30;
    char *adj = calloc(n * n, 1), *step = calloc(n * n, 1), *any = calloc(n * n, 1),
         *next = calloc(n * n, 1);
    ag_nbhd_t g;
    random_graph(&g, adj, n, 45, 2 + (uint64_t)_i);   /* sparse: hops grow level by level */
    memcpy(step, adj, (size_t)(n * n));
    memcpy(any, adj, (size_t)(n * n));
    for (int64_t K = 1; K <= 5; K++) {
        char spec[32];
        snprintf(spec, sizeof spec, "hops:%lld", (long long)K);
        char *got = compiled(spec, &g, n, AG_SELF_KEEP);
        assert_same(spec, got, any, n);
        free(got);
        /* one more edge: j -> m -> ... -> i, with m -> i an edge (adj[i][m]) */
        memset(next, 0, (size_t)(n * n));
        for (int64_t i = 0; i < n; i++)
            for (int64_t m = 0; m < n; m++)
                if (adj[i * n + m])
                    for (int64_t j = 0; j < n; j++)
                        next[i * n + j] |= step[m * n + j];
        memcpy(step, next, (size_t)(n * n));
        for (int64_t k = 0; k < n * n; k++)
            any[k] |= step[k];
    }
    /* one pattern compiled twice (the marks of a search must not hide the next
       search for the same destination): the same messages */
    ag_pattern_t *p;
    ag_nbhd_t one, two;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&p, "hops:2", &err), AG_OK);
    ck_assert_int_eq(ag_pattern_bind_graph(p, &g, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&one, p, n, AG_SELF_KEEP, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&two, p, n, AG_SELF_KEEP, &err), AG_OK);
    ck_assert_int_eq(one.n_edges, two.n_edges);
    ck_assert_int_eq(one.n_runs, two.n_runs);
    ck_assert(memcmp(one.run_src, two.run_src, (size_t)one.n_runs * sizeof *one.run_src) == 0);
    ag_nbhd_destroy(&one);
    ag_nbhd_destroy(&two);
    ag_pattern_free(p);
    ag_nbhd_destroy(&g);
    free(adj), free(step), free(any), free(next);
}
END_TEST

/* expander:D: each node's sources are p(i) and p^-1(i) of D permutations. The
   edges hold no permutation directly, so the test checks what defines one:
   symmetric (j -> i iff i -> j), at most 2D sources a node and at least one,
   deterministic by seed, another seed another graph, and connected (an
   expander of D >= 2 on 200 nodes is, with overwhelming probability). */
START_TEST(expander_is_symmetric_regular_and_connected)
{
    const int64_t N = 200;
    char *a = compiled("expander:3", NULL, N, AG_SELF_KEEP);
    char *b = compiled("expander:3,0", NULL, N, AG_SELF_KEEP);
    char *c = compiled("expander:3,7", NULL, N, AG_SELF_KEEP);
    assert_same("expander:3 is expander:3,0", a, b, N);
    ck_assert_msg(memcmp(a, c, (size_t)(N * N)) != 0, "seed 7 drew seed 0's graph");
    int64_t total = 0;
    for (int64_t i = 0; i < N; i++) {
        int64_t deg = 0;
        for (int64_t j = 0; j < N; j++) {
            ck_assert_msg(a[i * N + j] == a[j * N + i], "%lld -> %lld without its reverse",
                          (long long)j, (long long)i);
            deg += a[i * N + j];
        }
        ck_assert_int_ge(deg, 1);
        ck_assert_int_le(deg, 6);
        total += deg;
    }
    ck_assert_int_ge(total, 5 * N);   /* repeats are rare: close to 2D a node */
    /* breadth-first from node 0 reaches every node, in O(log N) levels */
    int64_t *level = malloc((size_t)N * sizeof *level), *queue = malloc((size_t)N * sizeof *queue);
    for (int64_t i = 0; i < N; i++)
        level[i] = -1;
    int64_t head = 0, tail = 0;
    level[0] = 0, queue[tail++] = 0;
    while (head < tail) {
        const int64_t u = queue[head++];
        for (int64_t v = 0; v < N; v++)
            if (a[v * N + u] && level[v] < 0)
                level[v] = level[u] + 1, queue[tail++] = v;
    }
    ck_assert_int_eq(tail, N);
    ck_assert_int_le(level[queue[N - 1]], 8);   /* log_5(200) is 3.3 */
    free(level), free(queue), free(a), free(b), free(c);
}
END_TEST

/* virtual:V: the last V of N nodes read every node and are read by every
   node; the other words live on the first N - V. */
START_TEST(virtual_nodes_link_both_ways_to_all)
{
    const int64_t n = 12, V = 2, N = n + V;
    char *adj = calloc(n * n, 1), *want = calloc(N * N, 1);
    ag_nbhd_t g;
    random_graph(&g, adj, n, 30, 5);
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            want[i * N + j] = i >= n || j >= n || adj[i * n + j];
    char *got = compiled("graph+virtual:2", &g, N, AG_SELF_KEEP);
    assert_same("graph+virtual:2", got, want, N);
    free(got);
    /* causal lives on the first n; the complement is taken over all N nodes */
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            want[i * N + j] = i >= n || j >= n || (j <= i);
    assert_same("causal+virtual:2", got = compiled("causal+virtual:2", &g, N, AG_SELF_KEEP), want,
                N);
    free(got);
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            want[i * N + j] = i < n && j < n;
    assert_same("!virtual:2", got = compiled("!virtual:2", &g, N, AG_SELF_KEEP), want, N);
    free(got);
    /* self-loops off: the virtual nodes do not read themselves either */
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            want[i * N + j] = i != j && (i >= n || j >= n || adj[i * n + j]);
    assert_same("graph+virtual:2, off", got = compiled("graph+virtual:2", &g, N, AG_SELF_OFF),
                want, N);
    free(got);
    /* the size: the bound graph's nodes plus V; virtual only: no size of its own */
    ag_pattern_t *p;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&p, "graph+virtual:2", &err), AG_OK);
    ck_assert_int_eq(ag_pattern_virtual(p), 2);
    ck_assert_int_eq(ag_pattern_needs_graph(p), 1);
    ck_assert_int_eq(ag_pattern_size(p), 0);   /* nothing bound yet */
    ck_assert_int_eq(ag_pattern_bind_graph(p, &g, &err), AG_OK);
    ck_assert_int_eq(ag_pattern_size(p), N);
    ag_pattern_free(p);
    ck_assert_int_eq(ag_pattern_parse(&p, "causal+virtual:3", &err), AG_OK);
    ck_assert_int_eq(ag_pattern_size(p), 0);
    ck_assert_int_eq(ag_pattern_needs_graph(p), 0);
    ag_pattern_free(p);
    ag_nbhd_destroy(&g);
    free(adj);
    free(want);
}
END_TEST

START_TEST(graph_words_refuse_what_they_cannot_do)
{
    ag_pattern_t *p = NULL;
    ag_nbhd_t nb, g;
    ag_error_t err;
    char adj[100] = {0};
    random_graph(&g, adj, 10, 20, 3);
    ck_assert_int_eq(ag_pattern_parse(&p, "graph+virtual:1", &err), AG_OK);
    ck_assert_fails_with(ag_nbhd_from_pattern(&nb, p, 11, AG_SELF_KEEP, &err), err, AG_EINVAL,
                         "'graph' reads a graph, and none was given");
    ck_assert_int_eq(ag_pattern_bind_graph(p, &g, &err), AG_OK);
    ck_assert_fails_with(ag_nbhd_from_pattern(&nb, p, 12, AG_SELF_KEEP, &err), err, AG_EINVAL,
                         "'graph' covers 10 nodes, but there are 11 before the virtual ones");
    ck_assert_fails_with(ag_nbhd_from_pattern(&nb, p, 1, AG_SELF_KEEP, &err), err, AG_EINVAL,
                         "1 nodes, virtual ones included; expected at least 2");
    ag_pattern_free(p);
    ck_assert_int_eq(ag_pattern_parse(&p, "graph+expander:6", &err), AG_OK);
    ck_assert_int_eq(ag_pattern_bind_graph(p, &g, &err), AG_OK);
    ck_assert_fails_with(ag_nbhd_from_pattern(&nb, p, 10, AG_SELF_KEEP, &err), err, AG_EINVAL,
                         "'expander:6' draws 12 sources a node (6 permutations and their "
                         "inverses), more than the 10 nodes; expected D <= 5");
    ag_pattern_free(p);
    static const struct {
        const char *spec, *needle;
    } bad[] = {
        {"virtual:0", "virtual:V needs V >= 1"},
        {"virtual", "virtual:V needs one parameter"},
        {"hops:0", "hops:K needs K >= 1"},
        {"expander:0", "expander:D[,SEED] needs D >= 1"},
        {"graph:2", "graph needs no parameters"},
        {"causal+virtual:1+virtual:2", "'virtual:1' and 'virtual:2' disagree"},
        {"grahp", "unknown pattern 'grahp'; expected complete"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        p = (ag_pattern_t *)1;
        ck_assert_fails_with(ag_pattern_parse(&p, bad[k].spec, &err), err, AG_EINVAL,
                             bad[k].needle);
        ck_assert_ptr_null(p);
    }
    ag_nbhd_destroy(&g);
}
END_TEST

/* The command line: a graph file beside --pattern; outputs cover the input
   nodes; nothing written on a refusal. */
START_TEST(cli_runs_a_pattern_over_a_graph_file)
{
    char args[1024], *out, *err;
    const char *gml = "graphs/karate.gml";
    snprintf(args, sizeof args, "run %s --pattern 'graph+virtual:1' --out %s", gml,
             tmp_path("pv.npy"));
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    ck_assert_msg(strstr(out, "pattern 'graph+virtual:1' over graphs/karate.gml") &&
                  strstr(out, "35 nodes: 225 messages"), "%s", out);
    free(out), free(err);
    ag_matrix_t y;
    ag_error_t e;
    ck_assert_int_eq(ag_matrix_read_npy(&y, tmp_path("pv.npy"), &e), AG_OK);
    ck_assert_int_eq(y.rows, 34);   /* the karate club's members, not the virtual node */
    ag_matrix_destroy(&y);
    /* graph over the file is the file: the same output, byte for byte */
    snprintf(args, sizeof args, "run %s --pattern graph --out %s", gml, tmp_path("pg.npy"));
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    free(out), free(err);
    snprintf(args, sizeof args, "run %s --out %s", gml, tmp_path("g.npy"));
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    free(out), free(err);
    expect_same_bytes(tmp_path("pg.npy"), tmp_path("g.npy"));
    expect_cli("run --pattern graph --nodes 5", 2, 2, "'graph' reads a graph, and none was given");
    snprintf(args, sizeof args, "run %s --pattern 'graph+expander:20' --out %s", gml,
             tmp_path("never.npy"));
    expect_cli(args, 2, 2, "'expander:20' draws 40 sources a node");
    ck_assert(!file_exists(tmp_path("never.npy")));
    snprintf(args, sizeof args, "pattern 'hops:2&!self' --graph %s --out %s", gml,
             tmp_path("h.gml"));
    expect_cli(args, 0, 1, "on 34 nodes");
    snprintf(args, sizeof args, "compare --graph %s --pattern graph --pattern 'graph+expander:3'",
             gml);
    expect_cli(args, 0, 1, "graph+expander:3");
}
END_TEST

/* train: patterns reading the graph run over it (no connectivity of its
   own); virtual nodes are outside the task; --pattern graph is the file. */
START_TEST(train_runs_patterns_over_the_graph_file)
{
    char args[2048], *out, *err, *out2, *err2;
    const char *task = "--features graphs/planted/x.npy --labels graphs/planted/labels.npy "
                       "--train-mask graphs/planted/train.npy --epochs 5 --seed 3";
    snprintf(args, sizeof args, "train graphs/planted.gml --pattern graph %s", task);
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    snprintf(args, sizeof args, "train graphs/planted.gml %s", task);
    ck_assert_int_eq(run_cli(args, &out2, &err2), 0);
    /* the same training, line for line, but the graph's description */
    const char *a = strstr(out, "final"), *b = strstr(out2, "final");
    ck_assert_msg(a && b && strcspn(a, "\n") == strcspn(b, "\n") &&
                  strncmp(a, b, strcspn(a, "\n")) == 0, "%s\n---\n%s", out, out2);
    free(out), free(err), free(out2), free(err2);
    snprintf(args, sizeof args, "train graphs/planted.gml --pattern 'graph+virtual:1' %s "
             "--predict %s", task, tmp_path("vp.npy"));
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    free(out), free(err);
    int64_t *pred, n;
    ag_error_t e;
    ag_matrix_t x;
    ck_assert_int_eq(ag_matrix_read_npy(&x, "graphs/planted/x.npy", &e), AG_OK);
    ck_assert_int_eq(ag_index_read_npy(&pred, &n, tmp_path("vp.npy"), &e), AG_OK);
    ck_assert_int_eq(n, x.rows);   /* the input nodes' classes, not the virtual node's */
    free(pred);
    ag_matrix_destroy(&x);
    snprintf(args, sizeof args, "train graphs/planted.gml --pattern 'graph+virtual:1' "
             "--pattern 'graph+expander:2' %s", task);
    expect_cli(args, 1, 2, "appends 0 virtual nodes, the first connectivity 1");
}
END_TEST

/* ag_layer_graphs: each layer's pattern over the graph, every graph widened to
   the most virtual nodes a layer appends, equal specs sharing one graph. */
START_TEST(layer_graphs_share_one_node_set)
{
    const int64_t n = 15;
    char *adj = calloc(n * n, 1);
    ag_nbhd_t g, *graphs[4];
    ag_error_t err;
    random_graph(&g, adj, n, 40, 9);
    const char *specs[4] = {"", "graph+virtual:2", "hops:2", "graph+virtual:2"};
    int64_t V = -1;
    ck_assert_msg(ag_layer_graphs(graphs, 4, &g, specs, AG_SELF_OFF, &V, &err) == AG_OK, "%s",
                  err.msg);
    ck_assert_int_eq(V, 2);
    ck_assert_ptr_eq(graphs[1], graphs[3]);
    for (int l = 0; l < 4; l++)
        ck_assert_int_eq(graphs[l]->n_nodes, n + 2);
    /* layer 1: the graph as it is (multi-edges kept), self-loops off, the virtual
       nodes isolated */
    ag_nbhd_t off;
    int64_t *ptr = malloc((size_t)(n + 1) * sizeof *ptr), *src = malloc((size_t)g.n_edges * 8);
    memcpy(ptr, g.edge_ptr, (size_t)(n + 1) * sizeof *ptr);
    ag_nbhd_sources(&g, 0, n, src);
    ck_assert_int_eq(ag_nbhd_from_csr(&off, n, ptr, src, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_self_loops(&off, AG_SELF_OFF, &err), AG_OK);
    for (int64_t i = 0; i < n + 2; i++)
        ck_assert_int_eq(graphs[0]->edge_ptr[i + 1] - graphs[0]->edge_ptr[i],
                         i < n ? off.edge_ptr[i + 1] - off.edge_ptr[i] : 0);
    ag_nbhd_destroy(&off);
    free(ptr), free(src);
    /* layer 2 by its definition: the virtual nodes linked to all, no self-loop */
    const int64_t N = n + 2;
    char *want = calloc((size_t)(N * N), 1);
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            want[i * N + j] = i != j && (i >= n || j >= n || adj[i * n + j]);
    for (int64_t i = 0; i < N; i++)
        for (int64_t r = graphs[1]->run_ptr[i]; r < graphs[1]->run_ptr[i + 1]; r++)
            for (int64_t j = graphs[1]->run_src[r]; j < graphs[1]->run_src[r] + graphs[1]->run_len[r];
                 j++)
                want[i * N + j]--;
    for (int64_t k = 0; k < N * N; k++)
        ck_assert_int_eq(want[k], 0);
    free(want);
    ag_layer_graphs_free(graphs, 4);
    for (int l = 0; l < 4; l++)
        ck_assert_ptr_null(graphs[l]);
    const char *bad[2] = {"graph", "hops:0"};
    ck_assert_fails_with(ag_layer_graphs(graphs, 2, &g, bad, AG_SELF_KEEP, &V, &err), err,
                         AG_EINVAL, "layer 2: pattern 'hops:0'");
    ag_nbhd_destroy(&g);
    free(adj);
}
END_TEST

/* A model file's graph= keys: train --predict and the library's model
   (ag_model_load, ag_model_predict: the one reader) agree on every node; a
   run on the saved folder predicts the same; a list 'A|B' of the wrong
   length, and an attention export of such a model, are refused. */
START_TEST(a_graph_a_layer_trains_and_predicts)
{
    char model[1024];   /* tmp_path's buffer is its next call's */
    snprintf(model, sizeof model, "%s", tmp_path("layers.txt"));
    write_text(model, "norm layer\n"
                      "self-loops on   # each layer's graph gets them, as run's must\n"
                      "layer heads=2 dim=4 out=8 bias=yes\n"
                      "layer heads=2 dim=4 out=8 bias=yes graph=graph+virtual:1\n"
                      "layer heads=1 dim=8 bias=yes graph=hops:2&!self\n");
    char args[2048], *out, *err;
    const char *task = "--features graphs/planted/x.npy --labels graphs/planted/labels.npy "
                       "--train-mask graphs/planted/train.npy --epochs 4";
    snprintf(args, sizeof args, "train graphs/planted.gml --model %s %s --predict %s --save %s",
             model, task, tmp_path("lp.npy"), tmp_path("lsave"));
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    ck_assert_msg(strstr(out, "predict with: attngraph run graphs/planted.gml --features "
                              "graphs/planted/x.npy --weights "), "%s", out);   /* the hint runs */
    free(out), free(err);
    ag_model_t m;
    ag_error_t e;
    ck_assert_msg(ag_model_load(&m, tmp_path("lsave"), &e) == AG_OK, "%s", e.msg);
    ck_assert_str_eq(m.spec.layers[1].graph, "graph+virtual:1");
    expect_planted_predictions(&m, tmp_path("lp.npy"));
    ag_model_destroy(&m);
    /* 'graph|graph' is the graph itself; a list of the wrong length is refused */
    snprintf(args, sizeof args, "train graphs/planted.gml --pattern 'graph|graph' --rounds 2 %s",
             task);
    char *a, *b;
    ck_assert_int_eq(run_cli(args, &a, &err), 0);
    free(err);
    snprintf(args, sizeof args, "train graphs/planted.gml --rounds 2 %s", task);
    ck_assert_int_eq(run_cli(args, &b, &err), 0);
    free(err);
    const char *fa = strstr(a, "final"), *fb = strstr(b, "final");
    ck_assert(fa && fb && strcspn(fa, "\n") == strcspn(fb, "\n") &&
              strncmp(fa, fb, strcspn(fa, "\n")) == 0);
    free(a), free(b);
    snprintf(args, sizeof args, "train graphs/planted.gml --pattern 'graph|complete|graph' "
             "--rounds 2 %s", task);
    expect_cli(args, 1, 2, "gives 3 layers' graphs; the model has 2 rounds");
    /* run on the saved folder: the states of the input nodes, as the library's */
    snprintf(args, sizeof args, "run graphs/planted.gml --weights %s --features "
             "graphs/planted/x.npy --predict %s --save-rounds %s --out %s --quiet",
             tmp_path("lsave"), tmp_path("lr.npy"), tmp_path("lrounds"), tmp_path("ly.npy"));
    expect_cli(args, 0, 1, "");
    expect_same_bytes(tmp_path("lp.npy"), tmp_path("lr.npy"));
    /* the saved rounds are the graph's nodes, not the layer's virtual one: the last
       is the output */
    ag_array_t last, y;
    ck_assert_int_eq(ag_array_read_npy(&last, tmp_path("lrounds/round-3.npy"), &e), AG_OK);
    ck_assert_int_eq(ag_array_read_npy(&y, tmp_path("ly.npy"), &e), AG_OK);
    ck_assert_int_eq(last.shape[0], 300);
    ck_assert_int_eq(memcmp(last.data, y.data, (size_t)(300 * y.shape[1]) * sizeof *y.data), 0);
    ag_array_destroy(&last), ag_array_destroy(&y);
    /* run --model FILE --seed draws what ag_model_init draws, and computes what
       ag_model_run computes, bit for bit: each layer's graph with the file's
       self-loops (hops:2&!self gets them back) */
    ag_model_spec_t spec;
    ck_assert_int_eq(ag_model_spec_read(&spec, model, &e), AG_OK);
    spec.readout = 0;
    ag_model_t fresh;
    ck_assert_msg(ag_model_init(&fresh, &spec, 8, 0, 0, 11, &e) == AG_OK, "%s", e.msg);
    igraph_t g;
    ag_nbhd_t nb;
    ag_array_t x;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/planted.gml", NULL, &e), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &e), AG_OK);
    igraph_destroy(&g);
    ck_assert_int_eq(ag_array_read_npy(&x, "graphs/planted/x.npy", &e), AG_OK);
    float *want = malloc((size_t)(300 * 8) * sizeof *want);
    ck_assert_msg(ag_model_run(&fresh, &nb, x.data, NULL, want, &e) == AG_OK, "%s", e.msg);
    char drawn[1024];
    snprintf(drawn, sizeof drawn, "%s", tmp_path("drawn.txt"));
    char *text = read_text(model);
    write_text(drawn, "readout none\n");
    FILE *f = fopen(drawn, "a");
    fputs(text, f), fclose(f);
    free(text);
    snprintf(args, sizeof args, "run graphs/planted.gml --model %s --features "
             "graphs/planted/x.npy --seed 11 --out %s --quiet", drawn, tmp_path("ld.npy"));
    expect_cli(args, 0, 1, "");
    ck_assert_int_eq(ag_array_read_npy(&y, tmp_path("ld.npy"), &e), AG_OK);
    ck_assert_int_eq(y.shape[0], 300);
    ck_assert_int_eq(y.shape[1], 8);
    ck_assert_int_eq(memcmp(y.data, want, (size_t)(300 * 8) * sizeof *want), 0);
    ag_array_destroy(&y), ag_array_destroy(&x);
    free(want);
    ag_model_destroy(&fresh);
    ag_nbhd_destroy(&nb);
    snprintf(args, sizeof args, "run graphs/planted.gml --model %s --attn %s", model,
             tmp_path("la.csv"));
    expect_cli(args, 2, 2, "--attn: its layers attend over graphs of their own");
    write_text(model, "layer heads=1 dim=8 graph=graph+\n");
    snprintf(args, sizeof args, "train graphs/planted.gml --model %s %s", model, task);
    expect_cli(args, 2, 2, "line 1: graph=graph+; expected a pattern over the model's graph");
}
END_TEST

Suite *pattern_graph_suite(void)
{
    Suite *s = suite_create("pattern_graph");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, graph_is_the_bound_graphs_edges_once);
    tcase_add_loop_test(tc, hops_are_paths_of_one_to_k_edges, 0, 3);
    tcase_add_test(tc, expander_is_symmetric_regular_and_connected);
    tcase_add_test(tc, virtual_nodes_link_both_ways_to_all);
    tcase_add_test(tc, graph_words_refuse_what_they_cannot_do);
    tcase_add_test(tc, cli_runs_a_pattern_over_a_graph_file);
    tcase_add_test(tc, train_runs_patterns_over_the_graph_file);
    tcase_add_test(tc, layer_graphs_share_one_node_set);
    tcase_add_test(tc, a_graph_a_layer_trains_and_predicts);
    suite_add_tcase(s, tc);
    return s;
}
