/*
 * Connectivity patterns: a small language of who-attends-whom, compiled
 * straight into the kernel's runs (no igraph edges needed).
 *
 *   expr   := term ('+' term)*        union
 *   term   := factor ('&' factor)*    intersection (binds tighter than '+')
 *   factor := '!' factor | '(' expr ')' | atom
 *   atom   := name [':' param (',' param)*]
 *
 * i is the destination (query), j the source (key). Each atom yields, for a
 * destination i, its sources as a sorted list of intervals; set algebra on
 * those lists composes patterns. See docs/patterns.md for every atom.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/pattern_ast.h"
#include "graph/graph.h"

/* ---- sizes ---- */

/* The node count an atom implies before the virtual nodes (0: none), and the
   atom that implies it. */
static int64_t natural_size(const ag_pattern_t *pat, const pnode_t *n, const pnode_t **who)
{
    switch (n->kind) {
    case P_BLOCKS:
    case P_DOCS:
        *who = n;
        return n->list[n->n_list];
    case P_CROSS:
        *who = n;
        return n->a[0] + n->a[1];
    case P_GRID:
    case P_AXIAL:
        *who = n;
        return n->a[0] * n->a[1];
    case P_GRAPH:
    case P_HOPS:
        *who = n;
        return pat->graph ? pat->graph->n_nodes : 0;
    case P_UNION:
    case P_INTERSECT: {
        int64_t s = natural_size(pat, n->l, who);
        return s ? s : natural_size(pat, n->r, who);
    }
    case P_NOT:
        return natural_size(pat, n->l, who);
    default:
        return 0;
    }
}

int64_t ag_pattern_size(const ag_pattern_t *pattern)
{
    const pnode_t *who;
    const int64_t base = natural_size(pattern, pattern->root, &who);
    return base ? base + pattern->n_virtual : 0;
}

int64_t ag_pattern_virtual(const ag_pattern_t *pattern)
{
    return pattern->n_virtual;
}

static int reads_graph(const pnode_t *n)
{
    return n && (n->kind == P_GRAPH || n->kind == P_HOPS || reads_graph(n->l) ||
                 reads_graph(n->r));
}

int ag_pattern_needs_graph(const ag_pattern_t *pattern)
{
    return reads_graph(pattern->root);
}

int ag_pattern_bind_graph(ag_pattern_t *pattern, const ag_nbhd_t *graph, ag_error_t *err)
{
    if (graph && (graph->n_nodes < 0 || !graph->run_ptr || (graph->n_runs && !graph->run_src)))
        return ag_fail(err, AG_EINVAL, "pattern '%s': the graph to bind is not a compiled "
                       "neighbourhood (no runs)", pattern->spec);
    pattern->graph = graph;
    return AG_OK;
}

/* Every atom that implies a size must agree with Nb, the nodes before the
   virtual ones; global ids must exist; the graph must be there. */
static int check_size(const ag_pattern_t *pat, const pnode_t *n, int64_t Nb, ag_error_t *err)
{
    const pnode_t *who = NULL;
    switch (n->kind) {
    case P_UNION:
    case P_INTERSECT:
        if (check_size(pat, n->r, Nb, err))
            return err ? err->status : AG_EINVAL;
        /* fall through */
    case P_NOT:
        return check_size(pat, n->l, Nb, err);
    case P_GLOBAL_IDS:
        if (n->list[n->n_list - 1] >= Nb)
            return ag_fail(err, AG_EINVAL, "pattern '%s': '%s' names node %lld, but the nodes "
                           "are 0..%lld", pat->spec, n->text, (long long)n->list[n->n_list - 1],
                           (long long)Nb - 1);
        return AG_OK;
    case P_EXPANDER:
        if (2 * n->a[0] > Nb)
            return ag_fail(err, AG_EINVAL, "pattern '%s': '%s' draws %lld sources a node (%lld "
                           "permutations and their inverses), more than the %lld node%s; "
                           "expected D <= %lld", pat->spec, n->text, (long long)(2 * n->a[0]),
                           (long long)n->a[0], (long long)Nb, AG_PLURAL(Nb),
                           (long long)(Nb / 2));
        return AG_OK;
    case P_GRAPH:
    case P_HOPS:
        if (!pat->graph)
            return ag_fail(err, AG_EINVAL, "pattern '%s': '%s' reads a graph, and none was "
                           "given (attngraph run FILE --pattern SPEC, attngraph pattern SPEC "
                           "--graph FILE; ag_pattern_bind_graph in C; graph= in Python)", pat->spec, n->text);
        /* fall through */
    default: {
        int64_t s = natural_size(pat, n, &who);
        if (s && s != Nb)
            return ag_fail(err, AG_EINVAL, "pattern '%s': '%s' covers %lld node%s, but there "
                           "%s %lld%s", pat->spec, who->text, (long long)s, s == 1 ? "" : "s",
                           Nb == 1 ? "is" : "are", (long long)Nb,
                           pat->n_virtual ? " before the virtual ones" : "");
        return AG_OK;
    }
    }
}

/* ---- evaluation: the sources of destination i ---- */

/* At least `count` int64 of n's scratch, or NULL. */
static int64_t *node_scratch(pnode_t *n, int64_t count)
{
    if (count > n->scratch_cap) {
        int64_t *p = ag_i_realloc(n->scratch, count, sizeof *p, NULL, "pattern scratch");
        if (!p)
            return NULL;
        n->scratch = p;
        n->scratch_cap = count;
    }
    return n->scratch;
}

/*
 * K distinct sources of 0..N-1, seeded per destination: Floyd's algorithm
 * (one draw per pick) with an open-addressing set of the picks, O(K).
 */
static int random_sources(pnode_t *n, int64_t N, int64_t i)
{
    const int64_t K = n->a[0];
    ivl_list_t *o = &n->buf;
    if (K >= N)
        return ivl_push(o, 0, N, N);
    int64_t slots = 1;
    while (slots < 2 * K)
        slots *= 2;
    int64_t *picks = node_scratch(n, K + slots), *set = picks + K;
    if (!picks)
        return -1;
    for (int64_t k = 0; k < slots; k++)
        set[k] = -1;
    uint64_t state = rng_seed((uint64_t)n->a[1], (uint64_t)i);
    for (int64_t j = N - K, m = 0; j < N; j++, m++) {
        int64_t t = rng_below(&state, j + 1), h;
        /* t already picked? then pick j, which cannot be (all picks so far are < j) */
        for (h = (int64_t)(((uint64_t)t * 0x9E3779B97F4A7C15ull) >> 40) & (slots - 1);
             set[h] != -1 && set[h] != t; h = (h + 1) & (slots - 1))
            ;
        if (set[h] == t) {
            t = j;
            for (h = (int64_t)(((uint64_t)t * 0x9E3779B97F4A7C15ull) >> 40) & (slots - 1);
                 set[h] != -1; h = (h + 1) & (slots - 1))
                ;
        }
        set[h] = t;
        picks[m] = t;
    }
    qsort(picks, (size_t)K, sizeof *picks, cmp_i64);
    for (int64_t m = 0; m < K; m++)
        if (ivl_push(o, picks[m], picks[m] + 1, N))
            return -1;
    return 0;
}

/*
 * BigBird (Zaheer et al. 2020), for query block qb of B tokens: W sliding
 * blocks centred on qb, the first G blocks (global: they also read every
 * block), and R random blocks among the rest, seeded per query block.
 */
static int bigbird_sources(pnode_t *n, int64_t N, int64_t qb)
{
    const int64_t B = n->a[0], W = n->a[1], G = n->a[2], R = n->a[3];
    const int64_t n_blocks = (N + B - 1) / B, w_lo = qb - W / 2, w_hi = w_lo + W;
    ivl_list_t *o = &n->buf;
    if (qb < G)
        return ivl_push(o, 0, N, N);
    int64_t *pool = node_scratch(n, n_blocks), n_pool = 0;
    if (!pool)
        return -1;
    for (int64_t b = G; b < n_blocks; b++)
        if (b < w_lo || b >= w_hi)
            pool[n_pool++] = b;
    /* a partial Fisher-Yates shuffle draws R distinct blocks */
    uint64_t state = rng_seed((uint64_t)n->a[4], (uint64_t)qb);
    const int64_t take = R < n_pool ? R : n_pool;
    for (int64_t r = 0; r < take; r++) {
        int64_t k = r + rng_below(&state, n_pool - r), t = pool[r];
        pool[r] = pool[k];
        pool[k] = t;
    }
    qsort(pool, (size_t)take, sizeof *pool, cmp_i64);
    for (int64_t r = 0; r < take; r++)
        pool[r] = pool[r] * B;               /* to token offsets */
    /* push in ascending order: the globals, randoms before the window, the
       window, randoms after it */
    int bad = ivl_push(o, 0, G * B, N);
    int64_t r = 0;
    while (!bad && r < take && pool[r] < w_lo * B)
        bad = ivl_push(o, pool[r], pool[r] + B, N), r++;
    if (!bad)
        bad = ivl_push(o, w_lo * B, w_hi * B, N);
    while (!bad && r < take)
        bad = ivl_push(o, pool[r], pool[r] + B, N), r++;
    return bad ? -1 : 0;
}

/* Appends [j, j+1) for each of the r sorted ids (repeats merge). */
static int push_ids(ivl_list_t *o, const int64_t *ids, int64_t r, int64_t N)
{
    for (int64_t m = 0; m < r; m++)
        if (ivl_push(o, ids[m], ids[m] + 1, N))
            return -1;
    return 0;
}

/* The graph's in-neighbours of i: its runs, ascending (a multi-edge's repeat
   overlaps the run before it and merges). */
static int graph_sources(const ag_nbhd_t *g, int64_t i, ivl_list_t *o)
{
    for (int64_t r = g->run_ptr[i]; r < g->run_ptr[i + 1]; r++)
        if (ivl_push(o, g->run_src[r], g->run_src[r] + g->run_len[r], g->n_nodes))
            return -1;
    return 0;
}

/*
 * hops:K, the sources j with a path j -> ... -> i of 1 to K of the graph's
 * edges: a breadth-first search backwards from i, level by level. The
 * scratch holds a mark per node (the search that last reached it: a[4]
 * counts them) and the found nodes in order of their level, so a search
 * costs the in-edges of what it finds, not N.
 */
static int hops_sources(pnode_t *n, const ag_nbhd_t *g, int64_t i)
{
    const int64_t N = g->n_nodes;
    if (n->scratch_n != N) {
        int64_t *s = node_scratch(n, 2 * N);
        if (!s)
            return -1;
        for (int64_t k = 0; k < N; k++)
            s[k] = 0;
        n->scratch_n = N;
        n->a[4] = 0;
    }
    int64_t *mark = n->scratch, *found = n->scratch + N, n_found = 0, lo = 0;
    const int64_t search = ++n->a[4];
    for (int64_t level = 0; level < n->a[0]; level++) {
        const int64_t hi = n_found;
        /* the frontier: i itself first, then the nodes found at the last level */
        for (int64_t f = level ? lo : -1; f < (level ? hi : 0); f++) {
            const int64_t u = f < 0 ? i : found[f];
            for (int64_t r = g->run_ptr[u]; r < g->run_ptr[u + 1]; r++)
                for (int64_t j = g->run_src[r]; j < g->run_src[r] + g->run_len[r]; j++)
                    if (mark[j] != search)
                        mark[j] = search, found[n_found++] = j;
        }
        if (n_found == hi)
            break;                           /* nothing new: no further level adds any */
        lo = hi;
    }
    qsort(found, (size_t)n_found, sizeof *found, cmp_i64);
    return push_ids(&n->buf, found, n_found, N);
}

/*
 * expander:D[,SEED], Exphormer's (Shirzad et al. 2023): D random permutations
 * p of the N nodes, each sending i -> p(i) and p(i) -> i; node i's sources are
 * p(i) and p^-1(i) for each. The union of D random permutations and their
 * inverses is a 2D-regular graph (a multigraph before merging repeats) that is
 * an expander with high probability (Friedman 2008: its second adjacency
 * eigenvalue is near 2 sqrt(2D - 1)), so every node reaches every other in
 * O(log N) steps. The permutations, 2DN ids, are drawn once per N.
 */
static int expander_sources(pnode_t *n, int64_t N, int64_t i)
{
    const int64_t D = n->a[0];
    if (n->scratch_n != N) {
        int64_t *s = node_scratch(n, 2 * D * N + 2 * D);
        if (!s)
            return -1;
        for (int64_t d = 0; d < D; d++) {
            int64_t *p = s + 2 * d * N, *inv = p + N;
            uint64_t state = rng_seed((uint64_t)n->a[1], (uint64_t)d);
            for (int64_t k = 0; k < N; k++)
                p[k] = k;
            for (int64_t k = N - 1; k > 0; k--) {   /* Fisher-Yates */
                const int64_t t = rng_below(&state, k + 1), x = p[k];
                p[k] = p[t], p[t] = x;
            }
            for (int64_t k = 0; k < N; k++)
                inv[p[k]] = k;
        }
        n->scratch_n = N;
    }
    int64_t *ids = n->scratch + 2 * D * N;
    for (int64_t d = 0; d < D; d++)
        ids[2 * d] = n->scratch[2 * d * N + i], ids[2 * d + 1] = n->scratch[(2 * d + 1) * N + i];
    qsort(ids, (size_t)(2 * D), sizeof *ids, cmp_i64);
    return push_ids(&n->buf, ids, 2 * D, N);
}

static int in_list(const pnode_t *n, int64_t i)
{
    return bsearch(&i, n->list, (size_t)n->n_list, sizeof i, cmp_i64) != NULL;
}

/* Computes n's sources of destination i into n->buf; -1 when out of memory.
   N counts every node, Nb those before the virtual ones: the atoms other than
   virtual:V and self live on 0..Nb-1 and give the virtual nodes nothing. */
static int eval(const ag_pattern_t *pat, pnode_t *n, int64_t i, int64_t N, int64_t Nb)
{
    ivl_list_t *o = &n->buf;
    const int64_t *a = n->a;
    ivl_clear(o);
    int bad = 0;
    switch (n->kind) {
    case P_VIRTUAL: return ivl_push(o, i < Nb ? Nb : 0, N, N);
    case P_SELF: return ivl_push(o, i, i + 1, N);
    case P_UNION:
    case P_INTERSECT:
        bad = eval(pat, n->l, i, N, Nb) || eval(pat, n->r, i, N, Nb) ||
              (n->kind == P_UNION ? ivl_union(o, &n->l->buf, &n->r->buf)
                                  : ivl_intersect(o, &n->l->buf, &n->r->buf));
        return bad ? -1 : 0;
    case P_NOT:
        return eval(pat, n->l, i, N, Nb) || ivl_complement(o, &n->l->buf, N) ? -1 : 0;
    default:
        if (i >= Nb)
            return 0;
        N = Nb;
    }
    switch (n->kind) {
    case P_GRAPH: bad = graph_sources(pat->graph, i, o); break;
    case P_HOPS: bad = hops_sources(n, pat->graph, i); break;
    case P_EXPANDER: bad = expander_sources(n, N, i); break;
    case P_COMPLETE: bad = ivl_push(o, 0, N, N); break;
    case P_CAUSAL: bad = ivl_push(o, 0, i + 1, N); break;
    case P_WINDOW: bad = ivl_push(o, i - a[0] + 1, i + 1, N); break;
    case P_WINDOW2: bad = ivl_push(o, i - a[0], i + a[1] + 1, N); break;
    case P_DILATED: {
        /* j = i + k*D, |j - i| <= W, clamped to 0..N-1 so the work is bounded by N */
        int64_t j = i - a[0] / a[1] * a[1];
        const int64_t last = i + a[0] < N - 1 ? i + a[0] : N - 1;
        if (j < 0)
            j = i % a[1];
        for (; j <= last && !bad; j += a[1])
            bad = ivl_push(o, j, j + 1, N);
        break;
    }
    case P_STRIDED:
        for (int64_t j = i % a[0]; j <= i && !bad; j += a[0])
            bad = ivl_push(o, j, j + 1, N);
        break;
    case P_FIXED: {
        /* the summary columns (last C of each earlier block), then i's own block */
        const int64_t L = a[0], C = a[1], own = i / L * L;
        for (int64_t b = 0; b < own && !bad; b += L)
            bad = ivl_push(o, b + L - C, b + L, N);
        if (!bad)
            bad = ivl_push(o, own, i + 1, N);
        break;
    }
    case P_PREFIX: bad = ivl_push(o, 0, i + 1 > a[0] ? i + 1 : a[0], N); break;
    case P_GLOBAL: bad = ivl_push(o, 0, i < a[0] ? N : a[0], N); break;
    case P_GLOBAL_IDS:           /* a global node reads all; the others read the globals */
        if (in_list(n, i))
            bad = ivl_push(o, 0, N, N);
        else
            for (int64_t k = 0; k < n->n_list && !bad; k++)
                bad = ivl_push(o, n->list[k], n->list[k] + 1, N);
        break;
    case P_RANDOM: bad = random_sources(n, N, i); break;
    case P_BIGBIRD: bad = bigbird_sources(n, N, i / a[0]); break;
    case P_BLOCKS:
    case P_DOCS: {
        const int64_t b = ag_i_last_at_most(n->list, n->n_list, i);   /* the block holding i */
        bad = ivl_push(o, n->list[b], n->kind == P_DOCS ? i + 1 : n->list[b + 1], N);
        break;
    }
    case P_PADDING: bad = i < a[0] ? ivl_push(o, 0, a[0], N) : 0; break;
    case P_CROSS: bad = i >= a[0] && i < a[0] + a[1] ? ivl_push(o, 0, a[0], N) : 0; break;
    case P_GRID: {
        /* rows y-R .. y+R clamped to the grid first: R may be far larger than H */
        const int64_t W = a[1], R = a[2], y = i / W, x = i % W;
        const int64_t y_lo = y - R > 0 ? y - R : 0, y_hi = y + R < a[0] - 1 ? y + R : a[0] - 1;
        for (int64_t yy = y_lo; yy <= y_hi && !bad; yy++)
            bad = ivl_push(o, yy * W + (x - R > 0 ? x - R : 0),
                           yy * W + (x + R + 1 < W ? x + R + 1 : W), N);
        break;
    }
    case P_AXIAL: {
        const int64_t W = a[1], y = i / W, x = i % W;
        for (int64_t yy = 0; yy < a[0] && !bad; yy++)
            bad = yy == y ? ivl_push(o, y * W, y * W + W, N) : ivl_push(o, yy * W + x, yy * W + x + 1, N);
        break;
    }
    default: break;   /* the operators, virtual and self: above */
    }
    return bad ? -1 : 0;
}

/* ---- compiling into runs ---- */

typedef struct {
    int64_t *src, *len;
    int64_t n, cap;
} runs_t;

static int runs_push(runs_t *r, int64_t src, int64_t len)
{
    if (r->n == r->cap) {
        int64_t cap = r->cap ? 2 * r->cap : 1024;
        int64_t *s = ag_i_realloc(r->src, cap, sizeof *s, NULL, "runs");
        if (!s)
            return -1;
        r->src = s;
        int64_t *l = ag_i_realloc(r->len, cap, sizeof *l, NULL, "runs");
        if (!l)
            return -1;
        r->len = l;
        r->cap = cap;
    }
    r->src[r->n] = src;
    r->len[r->n++] = len;
    return 0;
}

int pattern_check(const ag_pattern_t *pattern, int64_t N, ag_error_t *err)
{
    const int64_t V = pattern->n_virtual;
    if (N - V < 1)
        return ag_fail(err, AG_EINVAL, "pattern '%s': %lld nodes%s; expected at least %lld",
                       pattern->spec, (long long)N, V ? ", virtual ones included" : "",
                       (long long)V + 1);
    if (N > MAX_PARAM)
        return ag_fail(err, AG_ELIMIT, "pattern '%s': %lld nodes is too many", pattern->spec,
                       (long long)N);
    return check_size(pattern, pattern->root, N - V, err);
}

void pattern_eval_free(pattern_eval_t *ev)
{
    ivl_free(&ev->self_set);
    ivl_free(&ev->others);
    ivl_free(&ev->tmp);
}

const ivl_list_t *pattern_sources(const ag_pattern_t *pattern, int64_t N, ag_self_loops_t self,
                                  int64_t i, pattern_eval_t *ev)
{
    if (eval(pattern, pattern->root, i, N, N - pattern->n_virtual))
        return NULL;
    const ivl_list_t *res = &pattern->root->buf;
    if (self == AG_SELF_KEEP)
        return res;
    ivl_clear(&ev->self_set);
    ivl_clear(&ev->tmp);
    int bad = ivl_push(&ev->self_set, i, i + 1, N);
    /* res is a set (no source twice): replace, i.e. off and then one loop, is on */
    if (self == AG_SELF_ON || self == AG_SELF_REPLACE)
        bad = bad || ivl_union(&ev->tmp, res, &ev->self_set);
    else
        bad = bad || ivl_complement(&ev->others, &ev->self_set, N) ||
              ivl_intersect(&ev->tmp, res, &ev->others);
    return bad ? NULL : &ev->tmp;
}

/* Destinations lo..hi-1 of the pattern on N nodes (checked) into nb as 0..hi-lo-1,
   sources global; with degrees_only, only edge_ptr (no runs kept). */
static int compile_range(ag_nbhd_t *nb, const ag_pattern_t *pattern, int64_t N, int64_t lo,
                         int64_t hi, ag_self_loops_t self, int degrees_only, ag_error_t *err)
{
    memset(nb, 0, sizeof *nb);
    if (self != AG_SELF_KEEP && self != AG_SELF_ON && self != AG_SELF_OFF &&
        self != AG_SELF_REPLACE)
        return ag_fail(err, AG_EINVAL, "pattern '%s': self-loops mode %d; expected "
                       "AG_SELF_KEEP, AG_SELF_ON, AG_SELF_OFF or AG_SELF_REPLACE",
                       pattern->spec, (int)self);
    int rc = pattern_check(pattern, N, err);
    if (rc)
        return rc;
    const int64_t n = hi - lo;
    nb->n_nodes = n;
    nb->edge_ptr = ag_alloc(n + 1, sizeof(int64_t), err, "pattern");
    nb->run_ptr = degrees_only ? NULL : ag_alloc(n + 1, sizeof(int64_t), err, "pattern");
    runs_t runs = {0};
    pattern_eval_t ev = {0};
    rc = nb->edge_ptr && (degrees_only || nb->run_ptr) ? AG_OK : ag_alloc_status();
    int64_t E = 0;
    for (int64_t i = lo; i < hi && !rc; i++) {
        nb->edge_ptr[i - lo] = E;
        if (!degrees_only)
            nb->run_ptr[i - lo] = runs.n;
        const ivl_list_t *res = pattern_sources(pattern, N, self, i, &ev);
        if (!res) {
            rc = ag_fail(err, ag_alloc_status(), "pattern '%s': %s", pattern->spec,
                         ag_i_alloc_reason());
            break;
        }
        for (int64_t k = 0; k < res->n; k++) {
            if (!degrees_only && runs_push(&runs, res->v[k].lo, res->v[k].hi - res->v[k].lo)) {
                rc = ag_fail(err, ag_alloc_status(), "pattern '%s': %s for %lld runs",
                             pattern->spec, ag_i_alloc_reason(), (long long)runs.n);
                break;
            }
            E += res->v[k].hi - res->v[k].lo;
        }
    }
    pattern_eval_free(&ev);
    if (rc) {
        free(runs.src);
        free(runs.len);
        ag_nbhd_destroy(nb);
        return rc;
    }
    nb->edge_ptr[n] = E;
    if (!degrees_only)
        nb->run_ptr[n] = runs.n;
    nb->n_edges = E;
    nb->n_runs = runs.n;
    nb->run_src = runs.src;
    nb->run_len = runs.len;
    return AG_OK;
}

int ag_nbhd_from_pattern(ag_nbhd_t *nb, const ag_pattern_t *pattern, int64_t N,
                         ag_self_loops_t self, ag_error_t *err)
{
    return compile_range(nb, pattern, N, 0, N, self, 0, err);
}

int ag_nbhd_from_pattern_rows(ag_nbhd_t *nb, const ag_pattern_t *pattern, int64_t N, int64_t lo,
                              int64_t hi, ag_self_loops_t self, ag_error_t *err)
{
    memset(nb, 0, sizeof *nb);
    if (!(lo >= 0 && lo <= hi && hi <= N))
        return ag_fail(err, AG_EINVAL, "pattern '%s': destinations lo %lld to hi %lld (not "
                       "included) of %lld nodes; expected 0 <= lo <= hi <= N", pattern->spec,
                       (long long)lo, (long long)hi, (long long)N);
    int rc = compile_range(nb, pattern, N, lo, hi, self, 0, err);
    if (rc)
        return rc;
    /* the part's offsets, widened to all N destinations (none before lo or from hi) */
    int64_t *edge_ptr = ag_alloc(N + 1, sizeof *edge_ptr, err, "pattern");
    int64_t *run_ptr = ag_alloc(N + 1, sizeof *run_ptr, err, "pattern");
    if (!edge_ptr || !run_ptr) {
        free(edge_ptr), free(run_ptr);
        ag_nbhd_destroy(nb);
        return ag_alloc_status();
    }
    for (int64_t i = 0; i <= N; i++) {
        const int64_t k = i < lo ? 0 : i > hi ? hi - lo : i - lo;
        edge_ptr[i] = nb->edge_ptr[k], run_ptr[i] = nb->run_ptr[k];
    }
    free(nb->edge_ptr), free(nb->run_ptr);
    nb->edge_ptr = edge_ptr, nb->run_ptr = run_ptr, nb->n_nodes = N;
    return AG_OK;
}

int ag_i_nbhd_from_pattern_part(ag_nbhd_t *nb, const ag_pattern_t *pattern, int64_t N,
                                int64_t lo, int64_t hi, ag_self_loops_t self, ag_error_t *err)
{
    return compile_range(nb, pattern, N, lo, hi, self, 0, err);
}

int ag_i_pattern_edge_ptr(int64_t **edge_ptr, const ag_pattern_t *pattern, int64_t N,
                          ag_self_loops_t self, ag_error_t *err)
{
    ag_nbhd_t nb;
    *edge_ptr = NULL;
    int rc = compile_range(&nb, pattern, N, 0, N, self, 1, err);
    if (!rc)
        *edge_ptr = nb.edge_ptr, nb.edge_ptr = NULL;
    ag_nbhd_destroy(&nb);
    return rc;
}
