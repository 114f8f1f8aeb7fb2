/*
 * Patterns against brute-force predicates over all (i, j), written here from
 * the definitions in docs/patterns.md (i = destination, j = source), independently
 * of src/graph/pattern.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "testutil.h"

typedef int (*pred_fn)(int64_t i, int64_t j, int64_t N);

static int64_t iabs(int64_t x) { return x < 0 ? -x : x; }
static int p_complete(int64_t i, int64_t j, int64_t N) { (void)i, (void)j, (void)N; return 1; }
static int p_causal(int64_t i, int64_t j, int64_t N) { (void)N; return j <= i; }
static int p_window3(int64_t i, int64_t j, int64_t N) { (void)N; return i - 3 < j && j <= i; }
static int p_window100(int64_t i, int64_t j, int64_t N) { (void)N; return i - 100 < j && j <= i; }
static int p_window_2_1(int64_t i, int64_t j, int64_t N) { (void)N; return i - 2 <= j && j <= i + 1; }
static int p_window_0_0(int64_t i, int64_t j, int64_t N) { (void)N; return j == i; }
static int p_dilated_4_2(int64_t i, int64_t j, int64_t N) { (void)N; return iabs(i - j) <= 4 && iabs(i - j) % 2 == 0; }
static int p_dilated_5_3(int64_t i, int64_t j, int64_t N) { (void)N; return iabs(i - j) <= 5 && iabs(i - j) % 3 == 0; }
/* a window far wider than any N: the work must stay bounded by N (it once took 2W/D steps) */
static int p_dilated_huge_3(int64_t i, int64_t j, int64_t N) { (void)N; return iabs(i - j) % 3 == 0; }
static int p_strided3(int64_t i, int64_t j, int64_t N) { (void)N; return j <= i && (i - j) % 3 == 0; }
static int p_strided50(int64_t i, int64_t j, int64_t N) { (void)N; return j <= i && (i - j) % 50 == 0; }
static int p_fixed_4_1(int64_t i, int64_t j, int64_t N) { (void)N; return j <= i && (j / 4 == i / 4 || j % 4 >= 3); }
static int p_fixed_3_3(int64_t i, int64_t j, int64_t N) { (void)N; return j <= i; }
static int p_fixed_5_0(int64_t i, int64_t j, int64_t N) { (void)N; return j <= i && j / 5 == i / 5; }
static int p_prefix3(int64_t i, int64_t j, int64_t N) { (void)N; return j < 3 || j <= i; }
static int p_prefix40(int64_t i, int64_t j, int64_t N) { (void)N; return j < 40 || j <= i; }
static int p_global2(int64_t i, int64_t j, int64_t N) { (void)N; return i < 2 || j < 2; }
static int p_global_ids(int64_t i, int64_t j, int64_t N) { (void)N; return i == 1 || i == 4 || j == 1 || j == 4; }
static int p_padding5(int64_t i, int64_t j, int64_t N) { (void)N; return i < 5 && j < 5; }
static int p_padding90(int64_t i, int64_t j, int64_t N) { (void)N; return i < 90 && j < 90; }

typedef struct {
    const char *spec;
    pred_fn pred;
    int64_t min_n;    /* smallest N it makes sense on */
} case_t;

static const case_t cases[] = {
    {"complete", p_complete, 1}, {"causal", p_causal, 1}, {"window:3", p_window3, 1},
    {"window:100", p_window100, 1}, {"window:2,1", p_window_2_1, 1}, {"window:0,0", p_window_0_0, 1},
    {"dilated:4,2", p_dilated_4_2, 1}, {"dilated:5,3", p_dilated_5_3, 1},
    {"dilated:1000000000000,3", p_dilated_huge_3, 1},
    {"strided:3", p_strided3, 1}, {"strided:50", p_strided50, 1}, {"fixed:4,1", p_fixed_4_1, 1},
    {"fixed:3,3", p_fixed_3_3, 1}, {"fixed:5,0", p_fixed_5_0, 1}, {"prefix:3", p_prefix3, 1},
    {"prefix:40", p_prefix40, 1}, {"global:2", p_global2, 1}, {"global:1,4", p_global_ids, 5},
    {"padding:5", p_padding5, 1}, {"padding:90", p_padding90, 1},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static const int64_t sizes[] = {1, 2, 7, 16, 31};

/* The compiled edge set as a dense 0/1 matrix adj[i*N + j]; also checks the
   runs are ascending, disjoint and non-adjacent. */
static char *dense(const ag_nbhd_t *nb)
{
    const int64_t N = nb->n_nodes;
    char *adj = calloc(N * N, 1);
    for (int64_t i = 0; i < N; i++) {
        int64_t count = 0, prev_end = -1;
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++) {
            ck_assert_int_gt(nb->run_src[r], prev_end);     /* a gap between runs */
            ck_assert_int_ge(nb->run_len[r], 1);
            for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++) {
                ck_assert_int_lt(j, N);
                adj[i * N + j] = 1;
                count++;
            }
            prev_end = nb->run_src[r] + nb->run_len[r];
        }
        ck_assert_int_eq(count, nb->edge_ptr[i + 1] - nb->edge_ptr[i]);
    }
    return adj;
}

static void compile(ag_nbhd_t *nb, const char *spec, int64_t N, ag_self_loops_t self)
{
    ag_pattern_t *p;
    ag_error_t err;
    ck_assert_msg(ag_pattern_parse(&p, spec, &err) == AG_OK, "%s: %s", spec, err.msg);
    ck_assert_msg(ag_nbhd_from_pattern(nb, p, N, self, &err) == AG_OK, "%s: %s", spec, err.msg);
    ag_pattern_free(p);
}

/* Asserts that spec on N nodes has exactly the edges want(i, j). */
static void assert_edges_are(const char *spec, int64_t N, int (*want)(const void *, int64_t,
                             int64_t, int64_t), const void *ctx)
{
    ag_nbhd_t nb;
    compile(&nb, spec, N, AG_SELF_KEEP);
    char *adj = dense(&nb);
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            ck_assert_msg(adj[i * N + j] == !!want(ctx, i, j, N), "%s on N=%lld: edge %lld -> "
                          "%lld is %s", spec, (long long)N, (long long)j, (long long)i,
                          adj[i * N + j] ? "present" : "missing");
    free(adj);
    ag_nbhd_destroy(&nb);
}

static int want_case(const void *ctx, int64_t i, int64_t j, int64_t N)
{
    return ((const case_t *)ctx)->pred(i, j, N);
}

START_TEST(atoms_match_predicates)
{
    const case_t *c = &cases[_i];
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        if (sizes[s] >= c->min_n)
            assert_edges_are(c->spec, sizes[s], want_case, c);
}
END_TEST

/* Atoms that imply their own size. */
static int p_blocks(int64_t i, int64_t j, int64_t N)
{
    (void)N;   /* blocks:3,1,4: [0,3) [3,4) [4,8) */
    int64_t bi = i < 3 ? 0 : i < 4 ? 1 : 2, bj = j < 3 ? 0 : j < 4 ? 1 : 2;
    return bi == bj;
}
static int p_docs(int64_t i, int64_t j, int64_t N) { return p_blocks(i, j, N) && j <= i; }
static int p_cross(int64_t i, int64_t j, int64_t N) { (void)N; return j < 3 && i >= 3 && i < 7; }
static int p_grid(int64_t i, int64_t j, int64_t N)
{
    (void)N;   /* grid:3x4,1: row = id / 4, column = id % 4 */
    return iabs(i / 4 - j / 4) <= 1 && iabs(i % 4 - j % 4) <= 1;
}
static int p_grid0(int64_t i, int64_t j, int64_t N) { (void)N; return i == j; }
static int p_axial(int64_t i, int64_t j, int64_t N) { (void)N; return i / 4 == j / 4 || i % 4 == j % 4; }

START_TEST(sized_atoms_match_predicates)
{
    const case_t sized[] = {
        {"blocks:3,1,4", p_blocks, 8}, {"docs:3,1,4", p_docs, 8}, {"cross:3,4", p_cross, 7},
        {"grid:3x4,1", p_grid, 12}, {"grid:3x4,0", p_grid0, 12}, {"axial:3x4", p_axial, 12},
    };
    for (size_t k = 0; k < sizeof sized / sizeof sized[0]; k++) {
        assert_edges_are(sized[k].spec, sized[k].min_n, want_case, &sized[k]);
        ag_pattern_t *p;
        ag_error_t err;
        ck_assert_int_eq(ag_pattern_parse(&p, sized[k].spec, &err), AG_OK);
        ck_assert_int_eq(ag_pattern_size(p), sized[k].min_n);
        ag_nbhd_t nb;
        ck_assert_fails_with(ag_nbhd_from_pattern(&nb, p, sized[k].min_n + 1, AG_SELF_KEEP,
                                                  &err), err, AG_EINVAL, "covers");
        ag_pattern_free(p);
    }
}
END_TEST

/* Composition against set algebra on the predicates. */
typedef struct {
    const case_t *a, *b, *c;
    int form;
} combo_t;

static const char *const forms[] = {"%s+%s", "%s&%s", "!%s", "(%s+%s)&!%s", "%s&!%s+%s",
                                    "!(%s&%s)", "%s + ( %s & %s )"};
#define N_FORMS ((int)(sizeof forms / sizeof forms[0]))

static int want_combo(const void *ctx, int64_t i, int64_t j, int64_t N)
{
    const combo_t *k = ctx;
    int a = k->a->pred(i, j, N), b = k->b->pred(i, j, N), c = k->c->pred(i, j, N);
    switch (k->form) {
    case 0: return a || b;
    case 1: return a && b;
    case 2: return !a;
    case 3: return (a || b) && !c;
    case 4: return (a && !b) || c;   /* '&' binds tighter than '+' */
    case 5: return !(a && b);
    default: return a || (b && c);
    }
}

START_TEST(composition_is_set_algebra)
{
    char spec[256];
    for (int t = 0; t < 40; t++) {
        /* a fixed pseudo-random walk over triples of atoms and forms */
        combo_t k = {&cases[(t * 7 + _i) % N_CASES], &cases[(t * 11 + 3) % N_CASES],
                     &cases[(t * 5 + 1) % N_CASES], (t + _i) % N_FORMS};
        if (k.a->min_n > 16 || k.b->min_n > 16 || k.c->min_n > 16)
            continue;
        const char *f = forms[k.form];
        if (k.form == 2)
            snprintf(spec, sizeof spec, f, k.a->spec);
        else if (k.form == 0 || k.form == 1 || k.form == 5)
            snprintf(spec, sizeof spec, f, k.a->spec, k.b->spec);
        else
            snprintf(spec, sizeof spec, f, k.a->spec, k.b->spec, k.c->spec);
        assert_edges_are(spec, 16, want_combo, &k);
        assert_edges_are(spec, 7, want_combo, &k);
    }
}
END_TEST

START_TEST(self_loops_on_and_off)
{
    ag_nbhd_t nb;
    compile(&nb, "causal", 9, AG_SELF_OFF);
    char *adj = dense(&nb);
    for (int64_t i = 0; i < 9; i++)
        for (int64_t j = 0; j < 9; j++)
            ck_assert_int_eq(adj[i * 9 + j], j < i);
    free(adj);
    ag_nbhd_destroy(&nb);
    compile(&nb, "dilated:4,3", 9, AG_SELF_ON);      /* keeps its own self edges */
    adj = dense(&nb);
    for (int64_t i = 0; i < 9; i++)
        for (int64_t j = 0; j < 9; j++)
            ck_assert_int_eq(adj[i * 9 + j], iabs(i - j) <= 4 && iabs(i - j) % 3 == 0);
    free(adj);
    ag_nbhd_destroy(&nb);
    compile(&nb, "cross:2,3", 5, AG_SELF_ON);
    adj = dense(&nb);
    for (int64_t i = 0; i < 5; i++)
        for (int64_t j = 0; j < 5; j++)
            ck_assert_int_eq(adj[i * 5 + j], i == j || (j < 2 && i >= 2));
    free(adj);
    ag_nbhd_destroy(&nb);
}
END_TEST

START_TEST(random_is_distinct_and_reproducible)
{
    const int64_t N = 200;
    ag_nbhd_t a, b, c;
    compile(&a, "random:7,5", N, AG_SELF_KEEP);
    compile(&b, "random:7,5", N, AG_SELF_KEEP);
    compile(&c, "random:7,6", N, AG_SELF_KEEP);
    char *da = dense(&a), *db = dense(&b), *dc = dense(&c);
    ck_assert_mem_eq(da, db, N * N);
    ck_assert(memcmp(da, dc, N * N) != 0);
    int64_t hits[200] = {0};
    for (int64_t i = 0; i < N; i++) {
        ck_assert_int_eq(a.edge_ptr[i + 1] - a.edge_ptr[i], 7);   /* distinct: a set of 7 */
        for (int64_t j = 0; j < N; j++)
            hits[j] += da[i * N + j];
    }
    /* each source is picked ~7 times; a source never or 30 times picked means bias */
    for (int64_t j = 0; j < N; j++)
        ck_assert_int_lt(hits[j], 30);
    free(da), free(db), free(dc);
    ag_nbhd_destroy(&a), ag_nbhd_destroy(&b), ag_nbhd_destroy(&c);
    compile(&a, "random:50", 20, AG_SELF_KEEP);   /* K >= N: everything */
    ck_assert_int_eq(a.n_edges, 400);
    ag_nbhd_destroy(&a);
}
END_TEST

START_TEST(bigbird_blocks)
{
    /* 40 tokens in blocks of 4 (10 blocks): window 3 blocks, 1 global block, 2 random */
    const int64_t N = 40, B = 4;
    ag_nbhd_t nb;
    compile(&nb, "bigbird:4,3,1,2,9", N, AG_SELF_KEEP);
    char *adj = dense(&nb);
    for (int64_t i = 0; i < N; i++) {
        const int64_t qb = i / B;
        int64_t other_blocks = 0;
        for (int64_t kb = 0; kb < N / B; kb++) {
            /* a block is read whole or not at all */
            int any = 0, all = 1;
            for (int64_t j = kb * B; j < kb * B + B; j++)
                any |= adj[i * N + j], all &= adj[i * N + j];
            ck_assert_int_eq(any, all);
            if (qb == 0 || kb == 0 || iabs(kb - qb) <= 1)
                ck_assert_msg(all, "token %lld misses block %lld", (long long)i, (long long)kb);
            else
                other_blocks += all;
        }
        if (qb > 0)   /* exactly R = 2 random blocks beyond the window and the global */
            ck_assert_int_eq(other_blocks, 2);
        /* tokens of one query block read the same keys */
        if (i % B)
            ck_assert_mem_eq(adj + i * N, adj + (i - 1) * N, N);
    }
    free(adj);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* The kernel on a pattern equals the dense double reference masked by the predicate. */
START_TEST(attention_on_patterns_matches_masked_reference)
{
    const case_t *c = &cases[_i];
    const int64_t N = 16, H = 2, d = 3, HD = 6;
    if (c->min_n > N)
        return;
    int64_t src[256], dst[256], E = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            if (c->pred(i, j, N))
                src[E] = j, dst[E++] = i;
    float Q[96], K[96], V[96], M[96];
    double Mref[96];
    fill_uniform(Q, 96, 1, 1.5f), fill_uniform(K, 96, 2, 1.5f), fill_uniform(V, 96, 3, 1.0f);
    ag_nbhd_t nb;
    compile(&nb, c->spec, N, AG_SELF_KEEP);
    ag_error_t err;
    ck_assert_int_eq(ag_attention(&nb, Q, K, V, H, d, NULL, M, &err), AG_OK);
    ref_attention(N, src, dst, E, Q, K, V, H, d, Mref, NULL);
    double diff = max_abs_diff_fd(M, Mref, N * HD);
    ck_assert_msg(diff <= 2e-5, "%s: differs from the masked reference by %g", c->spec, diff);
    ag_nbhd_destroy(&nb);
}
END_TEST

START_TEST(blocks_equal_each_block_alone)
{
    const int64_t lens[] = {5, 3, 8}, N = 16, H = 2, d = 4, HD = 8;
    float Q[128], K[128], V[128], M[128], Mb[128];
    fill_uniform(Q, 128, 4, 2.0f), fill_uniform(K, 128, 5, 2.0f), fill_uniform(V, 128, 6, 1.0f);
    ag_nbhd_t nb;
    compile(&nb, "blocks:5,3,8", N, AG_SELF_KEEP);
    ag_error_t err;
    ck_assert_int_eq(ag_attention(&nb, Q, K, V, H, d, NULL, M, &err), AG_OK);
    ag_nbhd_destroy(&nb);
    int64_t start = 0;
    for (int b = 0; b < 3; b++) {
        compile(&nb, "complete", lens[b], AG_SELF_KEEP);
        const int64_t at = start * HD;
        ck_assert_int_eq(ag_attention(&nb, Q + at, K + at, V + at, H, d, NULL, Mb, &err), AG_OK);
        ck_assert_mem_eq(Mb, M + at, lens[b] * HD * sizeof(float));   /* bitwise */
        ag_nbhd_destroy(&nb);
        start += lens[b];
    }
}
END_TEST

/* UTF-8 labels "w0-語", "w1-語", ... */
static void make_labels(ag_labels_t *labels, int64_t n)
{
    labels->n = n;
    labels->str = malloc(n * sizeof *labels->str);
    for (int64_t i = 0; i < n; i++) {
        labels->str[i] = malloc(32);
        snprintf(labels->str[i], 32, "w%lld-語", (long long)i);
    }
}

START_TEST(export_then_reload_gives_the_same_edges)
{
    static const char *const specs[] = {"causal&!strided:3+global:1", "docs:4,5&window:2",
                                        "random:3,1", "grid:3x3,1"};
    static const char *const files[] = {"e.graphml", "e.gml", "e.net", "e.edges"};
    const int64_t N = 9;
    for (int s = 0; s < 4; s++)
        for (int f = 0; f < 4; f++) {
            ag_nbhd_t nb, back;
            compile(&nb, specs[s], N, AG_SELF_KEEP);
            ag_labels_t labels;
            ag_error_t err;
            make_labels(&labels, N);
            igraph_t g, h;
            ck_assert_int_eq(ag_graph_from_nbhd(&g, &nb, 0, &err), AG_OK);
            const char *path = tmp_path(files[f]);
            ck_assert_msg(ag_graph_write(&g, path, AG_FORMAT_AUTO, &labels, &err) == AG_OK,
                          "%s", err.msg);
            ck_assert_msg(ag_graph_load(&h, path, NULL, &err) == AG_OK, "%s: %s", files[f],
                          err.msg);
            ck_assert_int_eq(ag_nbhd_from_graph(&back, &h, &err), AG_OK);
            char *a = dense(&nb), *b = dense(&back);
            ck_assert_msg(memcmp(a, b, N * N) == 0, "%s through %s", specs[s], files[f]);
            ck_assert_int_eq(back.n_edges, nb.n_edges);
            if (f != 3) {   /* edge lists carry no labels */
                ag_labels_t got;
                ck_assert_int_eq(ag_labels_from_graph(&got, &h, &err), AG_OK);
                for (int64_t i = 0; i < N; i++)
                    ck_assert_str_eq(got.str[i], labels.str[i]);
                ag_labels_destroy(&got);
            }
            free(a), free(b);
            ag_labels_destroy(&labels);
            igraph_destroy(&g), igraph_destroy(&h);
            ag_nbhd_destroy(&nb), ag_nbhd_destroy(&back);
        }
}
END_TEST

START_TEST(export_refuses_too_many_edges)
{
    ag_nbhd_t nb;
    compile(&nb, "causal", 1000, AG_SELF_KEEP);
    igraph_t g;
    ag_error_t err;
    ck_assert_fails_with(ag_graph_from_nbhd(&g, &nb, 1000, &err), err, AG_ELIMIT,
                         "500500 edges are too many");
    ag_nbhd_destroy(&nb);
}
END_TEST

/* Bad specs: the status and the part of the spec the message must name. */
static const struct {
    const char *spec, *needle;
} bad_specs[] = {
    {"window:-1", "'-1' is not a non-negative integer"},
    {"window:0", "'window:0': window:W or window:L,R needs W >= 1"},
    {"blocks:3,x", "'blocks:3,x': 'x' is not a non-negative integer"},
    {"(causal+window:2", "'(' at '(causal+window:2' is never closed"},
    {"causal)", "')' at ')' has no matching '('"},
    {"causl", "unknown pattern 'causl'"},
    {"window:99999999999999999999", "'99999999999999999999' is too large"},
    {"blocks:9000000000000,9000000000000", "too large"},
    {"fixed:4,5", "needs C <= L"},
    {"grid:4,1", "'4' is not HxW"},
    {"causal:3", "'causal:3': causal needs no parameters"},
    {"", "ends where a name was expected"},
    {"causal+", "ends where a name was expected"},
    {"!", "ends where a name was expected"},
    {"causal window:2", "unexpected 'window:2'"},
    {"window:2,", "empty parameter"},
    {"dilated:3,0", "needs D >= 1"},
    {"strided:0", "needs L >= 1"},
    {"bigbird:4,3", "four or five parameters"},
    {"causal&&window:2", "unexpected '&'"},
};

START_TEST(bad_specs_name_the_offending_part)
{
    ag_pattern_t *p = (ag_pattern_t *)1;
    ag_error_t err = {AG_OK, ""};
    int rc = ag_pattern_parse(&p, bad_specs[_i].spec, &err);
    ck_assert_msg(rc == AG_EINVAL, "'%s' parsed (rc %d)", bad_specs[_i].spec, rc);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err.msg, bad_specs[_i].needle), "'%s': message '%s' lacks '%s'",
                  bad_specs[_i].spec, err.msg, bad_specs[_i].needle);
}
END_TEST

START_TEST(specs_that_fail_on_their_size)
{
    ag_pattern_t *p;
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&p, "window:2+global:1,99", &err), AG_OK);
    ck_assert_fails_with(ag_nbhd_from_pattern(&nb, p, 10, AG_SELF_KEEP, &err), err, AG_EINVAL,
                         "'global:1,99' names node 99, but the nodes are 0..9");
    ag_pattern_free(p);
    ck_assert_int_eq(ag_pattern_parse(&p, "docs:5,3&window:2", &err), AG_OK);
    ck_assert_fails_with(ag_nbhd_from_pattern(&nb, p, 10, AG_SELF_KEEP, &err), err, AG_EINVAL,
                         "'docs:5,3' covers 8 nodes, but there are 10");
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, p, 8, AG_SELF_KEEP, &err), AG_OK);
    ag_nbhd_destroy(&nb);
    ag_pattern_free(p);
}
END_TEST

/* Destinations lo..hi-1 of a pattern on N nodes: the whole pattern's runs for
   them, run by run, and no message for any other destination. */
START_TEST(rows_are_the_whole_patterns_rows)
{
    const char *specs[] = {"causal", "window:5", "random:4", "bigbird:8,1,1,1",
                           "causal&!strided:3"};
    const int64_t N = 500, ranges[][2] = {{0, 0}, {0, 500}, {100, 300}, {499, 500}, {250, 250}};
    ag_error_t err;
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        ag_pattern_t *pat;
        ck_assert_int_eq(ag_pattern_parse(&pat, specs[k], &err), AG_OK);
        ag_nbhd_t whole;
        ck_assert_int_eq(ag_nbhd_from_pattern(&whole, pat, N, AG_SELF_ON, &err), AG_OK);
        for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
            const int64_t lo = ranges[r][0], hi = ranges[r][1];
            ag_nbhd_t part;
            ck_assert_int_eq(ag_nbhd_from_pattern_rows(&part, pat, N, lo, hi, AG_SELF_ON, &err),
                             AG_OK);
            ck_assert_int_eq(part.n_nodes, N);
            ck_assert_int_eq(part.n_edges, whole.edge_ptr[hi] - whole.edge_ptr[lo]);
            ck_assert_int_eq(part.edge_ptr[N], part.n_edges);
            for (int64_t i = 0; i < N; i++) {
                const int in = i >= lo && i < hi;
                const int64_t deg = part.edge_ptr[i + 1] - part.edge_ptr[i];
                ck_assert_int_eq(deg, in ? whole.edge_ptr[i + 1] - whole.edge_ptr[i] : 0);
                const int64_t runs = part.run_ptr[i + 1] - part.run_ptr[i];
                ck_assert_int_eq(runs, in ? whole.run_ptr[i + 1] - whole.run_ptr[i] : 0);
                for (int64_t q = 0; q < runs; q++) {
                    const int64_t a = part.run_ptr[i] + q, b = whole.run_ptr[i] + q;
                    ck_assert_int_eq(part.run_src[a], whole.run_src[b]);
                    ck_assert_int_eq(part.run_len[a], whole.run_len[b]);
                }
            }
            ag_nbhd_destroy(&part);
        }
        ag_nbhd_destroy(&whole);
        ag_pattern_free(pat);
    }
    ag_pattern_t *pat;
    ck_assert_int_eq(ag_pattern_parse(&pat, "causal", &err), AG_OK);
    ag_nbhd_t nb;
    const int64_t bad[][2] = {{-1, 5}, {6, 5}, {0, 11}};
    for (size_t r = 0; r < sizeof bad / sizeof *bad; r++) {
        ck_assert_int_eq(ag_nbhd_from_pattern_rows(&nb, pat, 10, bad[r][0], bad[r][1], AG_SELF_ON,
                                                   &err), AG_EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "expected 0 <= lo <= hi <= N"));
        ck_assert_ptr_null(nb.edge_ptr);
    }
    ag_pattern_free(pat);
}
END_TEST

Suite *pattern_suite(void)
{
    Suite *s = suite_create("pattern");
    TCase *tc = tcase_create("pattern");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, atoms_match_predicates, 0, N_CASES);
    tcase_add_test(tc, sized_atoms_match_predicates);
    tcase_add_loop_test(tc, composition_is_set_algebra, 0, 3);
    tcase_add_test(tc, self_loops_on_and_off);
    tcase_add_test(tc, random_is_distinct_and_reproducible);
    tcase_add_test(tc, bigbird_blocks);
    tcase_add_loop_test(tc, attention_on_patterns_matches_masked_reference, 0, N_CASES);
    tcase_add_test(tc, blocks_equal_each_block_alone);
    tcase_add_test(tc, export_then_reload_gives_the_same_edges);
    tcase_add_test(tc, export_refuses_too_many_edges);
    tcase_add_loop_test(tc, bad_specs_name_the_offending_part, 0,
                        (int)(sizeof bad_specs / sizeof bad_specs[0]));
    tcase_add_test(tc, specs_that_fail_on_their_size);
    tcase_add_test(tc, rows_are_the_whole_patterns_rows);
    suite_add_tcase(s, tc);
    return s;
}
