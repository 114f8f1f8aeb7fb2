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
 * those lists composes patterns. See README "Studying masks" for every atom.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "intervals.h"
#include "rng.h"

#define MAX_PARAM ((int64_t)1 << 40)   /* keeps i + param arithmetic far from overflow */
#define MAX_PARAMS 4096

typedef enum {
    P_COMPLETE, P_CAUSAL, P_WINDOW, P_WINDOW2, P_DILATED, P_STRIDED, P_FIXED, P_PREFIX,
    P_GLOBAL, P_GLOBAL_IDS, P_RANDOM, P_BIGBIRD, P_BLOCKS, P_DOCS, P_PADDING, P_CROSS,
    P_GRID, P_AXIAL, P_UNION, P_INTERSECT, P_NOT
} kind_t;

typedef struct pnode {
    kind_t kind;
    int64_t a[5];             /* the atom's parameters */
    int64_t *list;            /* blocks/docs: block starts [n_list+1]; global ids: sorted */
    int64_t n_list;
    struct pnode *l, *r;      /* operands */
    ivl_list_t buf;           /* this node's result for the current destination */
    int64_t *scratch;         /* random and bigbird sampling space */
    int64_t scratch_cap;
    char *text;               /* the atom as written, for messages */
} pnode_t;

struct ag_pattern {
    char *spec;
    pnode_t *root;
};

/* ---- parsing ---- */

typedef struct {
    const char *spec, *p;
    ag_error_t *err;
    int rc;
} parser_t;

static int parse_fail(parser_t *ps, ag_status_t status, const char *fmt, ...) AG_PRINTF(3, 4);

static int parse_fail(parser_t *ps, ag_status_t status, const char *fmt, ...)
{
    if (ps->rc)
        return ps->rc;          /* keep the first error */
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ps->rc = ag_fail(ps->err, status, "pattern '%s': %s", ps->spec, why);
}

static void node_free(pnode_t *n)
{
    if (!n)
        return;
    node_free(n->l);
    node_free(n->r);
    ivl_free(&n->buf);
    free(n->scratch);
    free(n->list);
    free(n->text);
    free(n);
}

static pnode_t *node_new(parser_t *ps, kind_t kind)
{
    pnode_t *n = calloc(1, sizeof *n);
    if (!n)
        parse_fail(ps, AG_ENOMEM, "out of memory");
    else
        n->kind = kind;
    return n;
}

static void skip_space(parser_t *ps)
{
    while (isspace((unsigned char)*ps->p))
        ps->p++;
}

static const struct {
    const char *name;
    kind_t kind;
    const char *usage;
} atoms[] = {
    {"complete", P_COMPLETE, "complete"},
    {"causal", P_CAUSAL, "causal"},
    {"window", P_WINDOW, "window:W or window:L,R"},
    {"dilated", P_DILATED, "dilated:W,D"},
    {"strided", P_STRIDED, "strided:L"},
    {"fixed", P_FIXED, "fixed:L,C"},
    {"prefix", P_PREFIX, "prefix:P"},
    {"global", P_GLOBAL, "global:G or global:i1,i2,..."},
    {"random", P_RANDOM, "random:K[,SEED]"},
    {"bigbird", P_BIGBIRD, "bigbird:B,W,G,R[,SEED]"},
    {"blocks", P_BLOCKS, "blocks:n1,n2,..."},
    {"docs", P_DOCS, "docs:n1,n2,..."},
    {"padding", P_PADDING, "padding:LEN"},
    {"cross", P_CROSS, "cross:S,T"},
    {"grid", P_GRID, "grid:HxW,R"},
    {"axial", P_AXIAL, "axial:HxW"},
};

#define N_ATOMS (sizeof atoms / sizeof atoms[0])

static const char *atom_usage(kind_t kind)
{
    for (size_t k = 0; k < N_ATOMS; k++)
        if (atoms[k].kind == kind || (kind == P_WINDOW2 && atoms[k].kind == P_WINDOW) ||
            (kind == P_GLOBAL_IDS && atoms[k].kind == P_GLOBAL))
            return atoms[k].usage;
    return "";
}

/* Parses one parameter: a non-negative integer, or HxW when hw is given. */
static int parse_number(parser_t *ps, const char *atom, const char *s, size_t len, int64_t *out)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return parse_fail(ps, AG_EINVAL, "'%s': %s '%.*s'", atom,
                          len ? "parameter too long:" : "empty parameter", (int)len, s);
    memcpy(buf, s, len);
    buf[len] = '\0';
    for (size_t k = 0; k < len; k++)
        if (!isdigit((unsigned char)buf[k]))
            return parse_fail(ps, AG_EINVAL, "'%s': '%s' is not a non-negative integer", atom, buf);
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno || v > MAX_PARAM)
        return parse_fail(ps, AG_EINVAL, "'%s': '%s' is too large (at most %lld)", atom, buf,
                          (long long)MAX_PARAM);
    *out = v;
    return AG_OK;
}

/* Parses "HxW" into out[0], out[1]. */
static int parse_hw(parser_t *ps, const char *atom, const char *s, size_t len, int64_t *out)
{
    const char *x = memchr(s, 'x', len);
    if (!x)
        return parse_fail(ps, AG_EINVAL, "'%s': '%.*s' is not HxW (e.g. 4x4)", atom, (int)len, s);
    if (parse_number(ps, atom, s, (size_t)(x - s), &out[0]) ||
        parse_number(ps, atom, x + 1, len - (size_t)(x - s) - 1, &out[1]))
        return ps->rc;
    if (out[0] < 1 || out[1] < 1)
        return parse_fail(ps, AG_EINVAL, "'%s': the grid needs H, W >= 1", atom);
    if (out[0] > MAX_PARAM / out[1])
        return parse_fail(ps, AG_EINVAL, "'%s': the grid is too large", atom);
    return AG_OK;
}

static int need(parser_t *ps, const pnode_t *n, int ok, const char *what)
{
    if (!ok)
        return parse_fail(ps, AG_EINVAL, "'%s': %s needs %s", n->text, atom_usage(n->kind), what);
    return AG_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Checks an atom's parameters p[0..n) and fills the node. */
static int setup_atom(parser_t *ps, pnode_t *n, const int64_t *p, int64_t np, int64_t *hw)
{
    int64_t *a = n->a;
    for (int64_t k = 0; k < np && k < 5; k++)
        a[k] = p[k];
    switch (n->kind) {
    case P_COMPLETE:
    case P_CAUSAL:
        return need(ps, n, np == 0, "no parameters");
    case P_WINDOW:
        if (np == 2)
            n->kind = P_WINDOW2;
        if (need(ps, n, np == 1 || np == 2, "one or two parameters"))
            return ps->rc;
        return need(ps, n, np == 2 || a[0] >= 1, "W >= 1");
    case P_DILATED:
        if (need(ps, n, np == 2, "two parameters"))
            return ps->rc;
        return need(ps, n, a[1] >= 1, "D >= 1");
    case P_STRIDED:
    case P_PREFIX:
    case P_PADDING:
        if (need(ps, n, np == 1, "one parameter"))
            return ps->rc;
        return need(ps, n, n->kind != P_STRIDED || a[0] >= 1, "L >= 1");
    case P_FIXED:
        if (need(ps, n, np == 2, "two parameters") || need(ps, n, a[0] >= 1, "L >= 1"))
            return ps->rc;
        return need(ps, n, a[1] <= a[0], "C <= L");
    case P_GLOBAL:
        if (need(ps, n, np >= 1, "parameters"))
            return ps->rc;
        if (np == 1)
            return need(ps, n, a[0] >= 1, "G >= 1");
        n->kind = P_GLOBAL_IDS;
        break;
    case P_RANDOM:
        return need(ps, n, np == 1 || np == 2, "one or two parameters");
    case P_BIGBIRD:
        if (need(ps, n, np == 4 || np == 5, "four or five parameters"))
            return ps->rc;
        return need(ps, n, a[0] >= 1, "B >= 1");
    case P_BLOCKS:
    case P_DOCS:
        if (need(ps, n, np >= 1, "block lengths"))
            return ps->rc;
        for (int64_t k = 0; k < np; k++)
            if (need(ps, n, p[k] >= 1, "lengths >= 1"))
                return ps->rc;
        break;
    case P_CROSS:
        if (need(ps, n, np == 2, "two parameters"))
            return ps->rc;
        return need(ps, n, a[0] >= 1 && a[1] >= 1, "S, T >= 1");
    case P_GRID:
        if (need(ps, n, np == 2 && hw, "HxW and R"))
            return ps->rc;
        a[2] = a[1], a[0] = hw[0], a[1] = hw[1];   /* H, W, R */
        return AG_OK;
    case P_AXIAL:
        if (need(ps, n, np == 1 && hw, "HxW"))
            return ps->rc;
        a[0] = hw[0], a[1] = hw[1];
        return AG_OK;
    default:
        return AG_OK;
    }
    /* list atoms: blocks/docs keep starts, global keeps sorted ids */
    n->list = malloc((size_t)(np + 1) * sizeof *n->list);
    if (!n->list)
        return parse_fail(ps, AG_ENOMEM, "out of memory");
    if (n->kind == P_GLOBAL_IDS) {
        memcpy(n->list, p, (size_t)np * sizeof *p);
        qsort(n->list, (size_t)np, sizeof *p, cmp_i64);
        n->n_list = np;
    } else {
        n->list[0] = 0;
        for (int64_t k = 0; k < np; k++) {
            n->list[k + 1] = n->list[k] + p[k];
            if (n->list[k + 1] > MAX_PARAM)
                return parse_fail(ps, AG_EINVAL, "'%s': the blocks are too long", n->text);
        }
        n->n_list = np;
    }
    return AG_OK;
}

static pnode_t *parse_atom(parser_t *ps)
{
    const char *start = ps->p;
    while (isalpha((unsigned char)*ps->p))
        ps->p++;
    size_t name_len = (size_t)(ps->p - start);
    if (name_len == 0) {
        if (*start)
            parse_fail(ps, AG_EINVAL, "unexpected '%c' at '%s'; expected a pattern name", *start,
                       start);
        else
            parse_fail(ps, AG_EINVAL, "the pattern ends where a name was expected");
        return NULL;
    }
    size_t k = 0;
    while (k < N_ATOMS && (strlen(atoms[k].name) != name_len ||
                           strncmp(atoms[k].name, start, name_len) != 0))
        k++;
    if (k == N_ATOMS) {
        parse_fail(ps, AG_EINVAL, "unknown pattern '%.*s'; expected complete, causal, window, "
                   "dilated, strided, fixed, prefix, global, random, bigbird, blocks, docs, "
                   "padding, cross, grid or axial", (int)name_len, start);
        return NULL;
    }
    const char *params = NULL;
    if (*ps->p == ':') {
        params = ++ps->p;
        while (*ps->p && !strchr("+&!() \t\n", *ps->p))
            ps->p++;
    }
    pnode_t *n = node_new(ps, atoms[k].kind);
    if (!n)
        return NULL;
    n->text = strndup(start, (size_t)(ps->p - start));
    int64_t *p = malloc(MAX_PARAMS * sizeof *p), np = 0, hw[2];
    int have_hw = 0;
    if (!n->text || !p) {
        parse_fail(ps, AG_ENOMEM, "out of memory");
    } else if (params) {
        const char *s = params;
        for (;;) {
            size_t len = strcspn(s, ",+&!() \t\n");
            if (np == MAX_PARAMS) {
                parse_fail(ps, AG_EINVAL, "'%s': more than %d parameters", n->text, MAX_PARAMS);
                break;
            }
            int is_hw = (n->kind == P_GRID || n->kind == P_AXIAL) && np == 0;
            if (is_hw ? parse_hw(ps, n->text, s, len, hw) : parse_number(ps, n->text, s, len, &p[np]))
                break;
            have_hw |= is_hw;
            np++;
            s += len;
            if (*s != ',')
                break;
            s++;
        }
    }
    if (!ps->rc)
        setup_atom(ps, n, p, np, have_hw ? hw : NULL);
    free(p);
    if (ps->rc) {
        node_free(n);
        return NULL;
    }
    return n;
}

static pnode_t *parse_union(parser_t *ps);

static pnode_t *parse_factor(parser_t *ps)
{
    skip_space(ps);
    if (*ps->p == '!') {
        ps->p++;
        pnode_t *n = node_new(ps, P_NOT);
        if (n && !(n->l = parse_factor(ps))) {
            node_free(n);
            return NULL;
        }
        return n;
    }
    if (*ps->p == '(') {
        const char *open = ps->p++;
        pnode_t *n = parse_union(ps);
        skip_space(ps);
        if (n && *ps->p != ')') {
            parse_fail(ps, AG_EINVAL, "the '(' at '%s' is never closed", open);
            node_free(n);
            return NULL;
        }
        ps->p++;
        return n;
    }
    return parse_atom(ps);
}

static pnode_t *parse_binary(parser_t *ps, char op, kind_t kind, pnode_t *(*next)(parser_t *))
{
    pnode_t *n = next(ps);
    skip_space(ps);
    while (n && *ps->p == op) {
        ps->p++;
        pnode_t *b = node_new(ps, kind);
        if (b) {
            b->l = n;
            n = b;
            n->r = next(ps);
        }
        if (!b || !n->r) {
            node_free(n);
            return NULL;
        }
        skip_space(ps);
    }
    return n;
}

static pnode_t *parse_term(parser_t *ps)
{
    return parse_binary(ps, '&', P_INTERSECT, parse_factor);
}

static pnode_t *parse_union(parser_t *ps)
{
    return parse_binary(ps, '+', P_UNION, parse_term);
}

int ag_pattern_parse(ag_pattern_t **out, const char *spec, ag_error_t *err)
{
    *out = NULL;
    parser_t ps = {spec, spec, err, AG_OK};
    pnode_t *root = parse_union(&ps);
    skip_space(&ps);
    if (root && *ps.p) {
        if (*ps.p == ')')
            parse_fail(&ps, AG_EINVAL, "the ')' at '%s' has no matching '('", ps.p);
        else
            parse_fail(&ps, AG_EINVAL, "unexpected '%s'; expected '+', '&' or the end", ps.p);
        node_free(root);
        return ps.rc;
    }
    if (!root)
        return ps.rc;
    ag_pattern_t *pat = malloc(sizeof *pat);
    if (!pat || !(pat->spec = strdup(spec))) {
        free(pat);
        node_free(root);
        return ag_fail(err, AG_ENOMEM, "pattern: out of memory");
    }
    pat->root = root;
    *out = pat;
    return AG_OK;
}

void ag_pattern_free(ag_pattern_t *pattern)
{
    if (!pattern)
        return;
    node_free(pattern->root);
    free(pattern->spec);
    free(pattern);
}

const char *ag_pattern_spec(const ag_pattern_t *pattern)
{
    return pattern->spec;
}

/* ---- sizes ---- */

/* The node count an atom implies (0: none), and the atom that implies it. */
static int64_t natural_size(const pnode_t *n, const pnode_t **who)
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
    case P_UNION:
    case P_INTERSECT: {
        int64_t s = natural_size(n->l, who);
        return s ? s : natural_size(n->r, who);
    }
    case P_NOT:
        return natural_size(n->l, who);
    default:
        return 0;
    }
}

int64_t ag_pattern_size(const ag_pattern_t *pattern)
{
    const pnode_t *who;
    return natural_size(pattern->root, &who);
}

/* Every atom that implies a size must agree with N; global ids must exist. */
static int check_size(const ag_pattern_t *pat, const pnode_t *n, int64_t N, ag_error_t *err)
{
    const pnode_t *who = NULL;
    switch (n->kind) {
    case P_UNION:
    case P_INTERSECT:
        if (check_size(pat, n->r, N, err))
            return err ? err->status : AG_EINVAL;
        /* fall through */
    case P_NOT:
        return check_size(pat, n->l, N, err);
    case P_GLOBAL_IDS:
        if (n->list[n->n_list - 1] >= N)
            return ag_fail(err, AG_EINVAL, "pattern '%s': '%s' names node %lld, but the nodes "
                           "are 0..%lld", pat->spec, n->text, (long long)n->list[n->n_list - 1],
                           (long long)N - 1);
        return AG_OK;
    default: {
        int64_t s = natural_size(n, &who);
        if (s && s != N)
            return ag_fail(err, AG_EINVAL, "pattern '%s': '%s' covers %lld nodes, but there are "
                           "%lld", pat->spec, who->text, (long long)s, (long long)N);
        return AG_OK;
    }
    }
}

/* ---- evaluation: the sources of destination i ---- */

/* At least `count` int64 of n's scratch, or NULL. */
static int64_t *node_scratch(pnode_t *n, int64_t count)
{
    if (count > n->scratch_cap) {
        int64_t *p = realloc(n->scratch, (size_t)count * sizeof *p);
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

/* Index of the block holding i: starts[b] <= i < starts[b+1]. */
static int64_t block_of(const pnode_t *n, int64_t i)
{
    int64_t lo = 0, hi = n->n_list;
    while (hi - lo > 1) {
        int64_t mid = (lo + hi) / 2;
        if (n->list[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static int in_list(const pnode_t *n, int64_t i)
{
    return bsearch(&i, n->list, (size_t)n->n_list, sizeof i, cmp_i64) != NULL;
}

/* Computes n's sources of destination i into n->buf; -1 when out of memory. */
static int eval(pnode_t *n, int64_t i, int64_t N)
{
    ivl_list_t *o = &n->buf;
    const int64_t *a = n->a;
    ivl_clear(o);
    int bad = 0;
    switch (n->kind) {
    case P_COMPLETE: bad = ivl_push(o, 0, N, N); break;
    case P_CAUSAL: bad = ivl_push(o, 0, i + 1, N); break;
    case P_WINDOW: bad = ivl_push(o, i - a[0] + 1, i + 1, N); break;
    case P_WINDOW2: bad = ivl_push(o, i - a[0], i + a[1] + 1, N); break;
    case P_DILATED:
        for (int64_t j = i - a[0] / a[1] * a[1]; j <= i + a[0] && !bad; j += a[1])
            bad = ivl_push(o, j, j + 1, N);
        break;
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
        int64_t b = block_of(n, i);
        bad = ivl_push(o, n->list[b], n->kind == P_DOCS ? i + 1 : n->list[b + 1], N);
        break;
    }
    case P_PADDING: bad = i < a[0] ? ivl_push(o, 0, a[0], N) : 0; break;
    case P_CROSS: bad = i >= a[0] && i < a[0] + a[1] ? ivl_push(o, 0, a[0], N) : 0; break;
    case P_GRID: {
        const int64_t W = a[1], R = a[2], y = i / W, x = i % W;
        for (int64_t yy = y - R; yy <= y + R && !bad; yy++)
            if (yy >= 0 && yy < a[0])
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
    case P_UNION:
    case P_INTERSECT:
        bad = eval(n->l, i, N) || eval(n->r, i, N) ||
              (n->kind == P_UNION ? ivl_union(o, &n->l->buf, &n->r->buf)
                                  : ivl_intersect(o, &n->l->buf, &n->r->buf));
        break;
    case P_NOT: bad = eval(n->l, i, N) || ivl_complement(o, &n->l->buf, N); break;
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
        int64_t *s = realloc(r->src, (size_t)cap * sizeof *s);
        if (!s)
            return -1;
        r->src = s;
        int64_t *l = realloc(r->len, (size_t)cap * sizeof *l);
        if (!l)
            return -1;
        r->len = l;
        r->cap = cap;
    }
    r->src[r->n] = src;
    r->len[r->n++] = len;
    return 0;
}

int ag_nbhd_from_pattern(ag_nbhd_t *nb, const ag_pattern_t *pattern, int64_t N,
                         ag_self_loops_t self, ag_error_t *err)
{
    memset(nb, 0, sizeof *nb);
    if (N < 1)
        return ag_fail(err, AG_EINVAL, "pattern '%s': %lld nodes; expected at least 1",
                       pattern->spec, (long long)N);
    if (N > MAX_PARAM)
        return ag_fail(err, AG_ELIMIT, "pattern '%s': %lld nodes is too many", pattern->spec,
                       (long long)N);
    int rc = check_size(pattern, pattern->root, N, err);
    if (rc)
        return rc;
    nb->n_nodes = N;
    nb->edge_ptr = ag_alloc(N + 1, sizeof(int64_t), err, "pattern");
    nb->run_ptr = ag_alloc(N + 1, sizeof(int64_t), err, "pattern");
    runs_t runs = {0};
    ivl_list_t self_set = {0}, others = {0}, tmp = {0}, *res = NULL;
    rc = nb->edge_ptr && nb->run_ptr ? AG_OK : AG_ENOMEM;
    int64_t E = 0;
    for (int64_t i = 0; i < N && !rc; i++) {
        nb->edge_ptr[i] = E;
        nb->run_ptr[i] = runs.n;
        if (eval(pattern->root, i, N)) {
            rc = ag_fail(err, AG_ENOMEM, "pattern '%s': out of memory", pattern->spec);
            break;
        }
        res = &pattern->root->buf;
        if (self != AG_SELF_KEEP) {
            ivl_clear(&self_set);
            ivl_clear(&tmp);
            int bad = ivl_push(&self_set, i, i + 1, N);
            if (self == AG_SELF_ON)
                bad = bad || ivl_union(&tmp, res, &self_set);
            else
                bad = bad || ivl_complement(&others, &self_set, N) ||
                      ivl_intersect(&tmp, res, &others);
            if (bad) {
                rc = ag_fail(err, AG_ENOMEM, "pattern '%s': out of memory", pattern->spec);
                break;
            }
            res = &tmp;
        }
        for (int64_t k = 0; k < res->n; k++) {
            if (runs_push(&runs, res->v[k].lo, res->v[k].hi - res->v[k].lo)) {
                rc = ag_fail(err, AG_ENOMEM, "pattern '%s': out of memory for %lld runs",
                             pattern->spec, (long long)runs.n);
                break;
            }
            E += res->v[k].hi - res->v[k].lo;
        }
    }
    ivl_free(&self_set);
    ivl_free(&others);
    ivl_free(&tmp);
    if (rc) {
        free(runs.src);
        free(runs.len);
        ag_nbhd_destroy(nb);
        return rc;
    }
    nb->edge_ptr[N] = E;
    nb->run_ptr[N] = runs.n;
    nb->n_edges = E;
    nb->n_runs = runs.n;
    nb->run_src = runs.src;
    nb->run_len = runs.len;
    return AG_OK;
}
