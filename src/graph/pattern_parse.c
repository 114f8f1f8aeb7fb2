/*
 * Parsing connectivity patterns (the grammar and the atoms are described in
 * pattern.c). Every error names the spec and the offending part of it.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/pattern_ast.h"

/* Limits that keep every recursion over the tree (parsing, compiling,
   freeing) far from the end of the stack, whatever the spec. */
#define MAX_DEPTH 64        /* nested '(' and '!' */
#define MAX_NODES 4096      /* atoms and operators in one spec */

typedef struct {
    const char *spec, *p;
    ag_error_t *err;
    int rc;
    int depth, nodes;
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
    /* a long spec is shortened, so the reason always fits the message */
    const int long_spec = strlen(ps->spec) > 60;
    return ps->rc = ag_fail(ps->err, status, "pattern '%.*s%s': %s", long_spec ? 48 : 60,
                            ps->spec, long_spec ? "..." : "", why);
}

void pattern_node_free(pnode_t *n)
{
    if (!n)
        return;
    pattern_node_free(n->l);
    pattern_node_free(n->r);
    ivl_free(&n->buf);
    free(n->scratch);
    free(n->list);
    free(n->text);
    free(n);
}

static pnode_t *node_new(parser_t *ps, kind_t kind)
{
    if (++ps->nodes > MAX_NODES) {
        parse_fail(ps, AG_ELIMIT, "more than %d atoms and operators; expected fewer",
                   MAX_NODES);
        return NULL;
    }
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
    {"self", P_SELF, "self"},
    {"graph", P_GRAPH, "graph"},
    {"hops", P_HOPS, "hops:K"},
    {"expander", P_EXPANDER, "expander:D[,SEED]"},
    {"virtual", P_VIRTUAL, "virtual:V"},
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

/* Checks an atom's parameters p[0..n) and fills the node. */
static int setup_atom(parser_t *ps, pnode_t *n, const int64_t *p, int64_t np, int64_t *hw)
{
    int64_t *a = n->a;
    for (int64_t k = 0; k < np && k < 5; k++)
        a[k] = p[k];
    switch (n->kind) {
    case P_COMPLETE:
    case P_CAUSAL:
    case P_SELF:
    case P_GRAPH:
        return need(ps, n, np == 0, "no parameters");
    case P_HOPS:
        if (need(ps, n, np == 1, "one parameter"))
            return ps->rc;
        return need(ps, n, a[0] >= 1, "K >= 1");
    case P_EXPANDER:
        if (need(ps, n, np == 1 || np == 2, "one or two parameters"))
            return ps->rc;
        return need(ps, n, a[0] >= 1, "D >= 1");
    case P_VIRTUAL:
        if (need(ps, n, np == 1, "one parameter"))
            return ps->rc;
        return need(ps, n, a[0] >= 1, "V >= 1 (virtual:0 appends no node)");
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
                   "padding, cross, grid, axial, self, graph, hops, expander or virtual", (int)name_len, start);
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
        pattern_node_free(n);
        return NULL;
    }
    return n;
}

static pnode_t *parse_union(parser_t *ps);

static pnode_t *parse_nested(parser_t *ps);

static pnode_t *parse_factor(parser_t *ps)
{
    skip_space(ps);
    if (*ps->p != '!' && *ps->p != '(')
        return parse_atom(ps);
    if (ps->depth == MAX_DEPTH) {
        parse_fail(ps, AG_ELIMIT, "nesting of '(' and '!' deeper than %d levels at '%.20s'",
                   MAX_DEPTH, ps->p);
        return NULL;
    }
    ps->depth++;
    pnode_t *n = parse_nested(ps);
    ps->depth--;
    return n;
}

/* '!' FACTOR or '(' UNION ')', at ps->p. */
static pnode_t *parse_nested(parser_t *ps)
{
    if (*ps->p == '!') {
        ps->p++;
        pnode_t *n = node_new(ps, P_NOT);
        if (n && !(n->l = parse_factor(ps))) {
            pattern_node_free(n);
            return NULL;
        }
        return n;
    }
    const char *open = ps->p++;
    pnode_t *n = parse_union(ps);
    if (!n)
        return NULL;   /* ps->p may be at the end: never step past it */
    skip_space(ps);
    if (*ps->p != ')') {
        parse_fail(ps, AG_EINVAL, "the '(' at '%s' is never closed", open);
        pattern_node_free(n);
        return NULL;
    }
    ps->p++;
    return n;
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
            pattern_node_free(n);
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

/* The V of every virtual:V under n into *V: they must agree (one set of
   appended nodes). */
static int virtual_count(parser_t *ps, const pnode_t *n, const pnode_t **first)
{
    if (!n)
        return AG_OK;
    if (n->kind == P_VIRTUAL) {
        if (*first && (*first)->a[0] != n->a[0])
            return parse_fail(ps, AG_EINVAL, "'%s' and '%s' disagree: a pattern appends one "
                              "set of virtual nodes", (*first)->text, n->text);
        if (!*first)
            *first = n;
    }
    if (virtual_count(ps, n->l, first))
        return ps->rc;
    return virtual_count(ps, n->r, first);
}

int ag_pattern_parse(ag_pattern_t **out, const char *spec, ag_error_t *err)
{
    *out = NULL;
    parser_t ps = {spec, spec, err, AG_OK, 0, 0};
    pnode_t *root = parse_union(&ps);
    skip_space(&ps);
    if (root && *ps.p) {
        if (*ps.p == ')')
            parse_fail(&ps, AG_EINVAL, "the ')' at '%s' has no matching '('", ps.p);
        else
            parse_fail(&ps, AG_EINVAL, "unexpected '%s'; expected '+', '&' or the end", ps.p);
        pattern_node_free(root);
        return ps.rc;
    }
    if (!root)
        return ps.rc;
    const pnode_t *virt = NULL;
    if (virtual_count(&ps, root, &virt)) {
        pattern_node_free(root);
        return ps.rc;
    }
    ag_pattern_t *pat = calloc(1, sizeof *pat);
    if (!pat || !(pat->spec = strdup(spec))) {
        free(pat);
        pattern_node_free(root);
        return ag_fail(err, AG_ENOMEM, "pattern: out of memory");
    }
    pat->root = root;
    pat->n_virtual = virt ? virt->a[0] : 0;
    *out = pat;
    return AG_OK;
}

void ag_pattern_free(ag_pattern_t *pattern)
{
    if (!pattern)
        return;
    pattern_node_free(pattern->root);
    free(pattern->spec);
    free(pattern);
}

const char *ag_pattern_spec(const ag_pattern_t *pattern)
{
    return pattern->spec;
}

