/* Connectivity for a command: a graph file, or a pattern compiled on N nodes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "base/base.h"
#include "cli/source.h"

/* Appends a copy of s[0..len) to labels (grown by doubling). */
static int labels_push(ag_labels_t *l, int64_t *cap, const char *s, size_t len)
{
    if (l->n == *cap) {
        int64_t c = *cap ? 2 * *cap : 16;
        char **p = realloc(l->str, (size_t)c * sizeof *p);
        if (!p)
            return -1;
        l->str = p;
        *cap = c;
    }
    if (!(l->str[l->n] = strndup(s, len)))
        return -1;
    l->n++;
    return 0;
}

int labels_from_tokens(ag_labels_t *labels, const char *tokens, ag_error_t *err)
{
    *labels = (ag_labels_t){0, NULL};
    int64_t cap = 0;
    for (const char *p = tokens;;) {
        p += strspn(p, " \t\n");
        if (!*p)
            break;
        size_t len = strcspn(p, " \t\n");
        if (labels_push(labels, &cap, p, len)) {
            ag_labels_destroy(labels);
            return ag_fail(err, AG_ENOMEM, "--tokens: out of memory");
        }
        p += len;
    }
    if (labels->n == 0)
        return ag_fail(err, AG_EINVAL, "--tokens '%s' has no tokens", tokens);
    return AG_OK;
}

int labels_from_file(ag_labels_t *labels, const char *path, ag_error_t *err)
{
    *labels = (ag_labels_t){0, NULL};
    FILE *f = fopen(path, "r");
    if (!f)
        return ag_fail(err, AG_EIO, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t n = 0;
    ssize_t len;
    int64_t cap = 0;
    int rc = AG_OK;
    while ((len = getline(&line, &n, f)) != -1) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        /* a byte-order mark: stripped from the first line, not sought past, so
           a FIFO or a pipe loses nothing */
        const size_t bom =
            labels->n == 0 && len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
        if (labels_push(labels, &cap, line + bom, (size_t)len - bom)) {
            rc = ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
            break;
        }
    }
    free(line);
    if (!rc && ferror(f))
        rc = ag_fail(err, AG_EIO, "%s: read error", path);
    fclose(f);
    if (!rc && labels->n == 0)
        rc = ag_fail(err, AG_EINVAL, "%s: no labels (expected one a line)", path);
    if (rc)
        ag_labels_destroy(labels);
    return rc;
}

static int open_graph(source_t *s, const source_opts_t *o, int *usage, ag_error_t *err)
{
    struct stat st;
    if (stat(o->graph, &st) == 0 && S_ISDIR(st.st_mode))
        return ag_fail(err, AG_EIO, "%s is a directory, not a graph file", o->graph);
    ag_load_opts_t load = {AG_FORMAT_AUTO, o->max_nodes, o->direction};
    if (strcmp(o->graph, "-") == 0 && !o->format) {
        *usage = 1;
        return ag_fail(err, AG_EINVAL, "a graph on standard input (-) needs --format");
    }
    int rc = o->format ? ag_format_parse(&load.format, o->format, err)
                       : ag_format_from_path(&load.format, o->graph, err);
    if (rc) {   /* an unknown --format, or a name whose extension says nothing */
        *usage = 1;
        return rc;
    }
    if ((rc = ag_graph_load(&s->graph, o->graph, &load, err))) {
        *usage = load.format == AG_FORMAT_DOT;   /* refused by its format, unread */
        return rc;
    }
    s->have_graph = 1;
    snprintf(s->desc, sizeof s->desc, "%s (%s, %s%s%s)", o->graph, ag_format_name(load.format),
             igraph_is_directed(&s->graph) ? "directed" : "undirected",
             o->self == AG_SELF_KEEP ? "" : ", self-loops ",
             o->self == AG_SELF_KEEP ? "" : ag_self_loops_name(o->self));
    if ((rc = ag_labels_from_graph(&s->labels, &s->graph, err)))
        return rc;
    if ((rc = ag_nbhd_from_graph(&s->nb, &s->graph, err)))
        return rc;
    return ag_nbhd_self_loops(&s->nb, o->self, err);
}

/* Labels for the virtual nodes after n named ones: "virtual0", "virtual1", ...
   (numbered labels stay numbers). */
static int labels_add_virtual(ag_labels_t *l, int64_t V, ag_error_t *err)
{
    if (!l->str) {
        l->n += V;
        return AG_OK;
    }
    char **p = realloc(l->str, (size_t)(l->n + V) * sizeof *p);
    if (!p)
        return ag_fail(err, AG_ENOMEM, "labels: out of memory");
    l->str = p;
    for (int64_t v = 0; v < V; v++) {
        char buf[40];
        snprintf(buf, sizeof buf, "virtual%lld", (long long)v);
        if (!(l->str[l->n] = strdup(buf)))
            return ag_fail(err, AG_ENOMEM, "labels: out of memory");
        l->n++;
    }
    return AG_OK;
}

/* What a spec says of itself: its virtual nodes, and whether it reads a graph
   (0 and 0 for NULL or a spec that does not parse: its reader says why). */
static void pattern_traits(const char *spec, int64_t *V, int *reads)
{
    ag_pattern_t *pat;
    *V = 0, *reads = 0;
    if (spec && !ag_pattern_parse(&pat, spec, NULL)) {
        *V = ag_pattern_virtual(pat), *reads = ag_pattern_needs_graph(pat);
        ag_pattern_free(pat);
    }
}

int64_t pattern_virtual_nodes(const char *spec)
{
    int64_t V;
    int reads;
    pattern_traits(spec, &V, &reads);
    return V;
}

int pattern_reads_graph(const char *spec)
{
    int64_t V;
    int reads;
    if (spec && strchr(spec, '|'))   /* a connectivity a layer: over the graph */
        return 1;
    pattern_traits(spec, &V, &reads);
    return reads;
}

/* The pattern over the graph s holds (its nodes and labels; graph and hops:K
   read its edges): s's neighbourhoods become the pattern's, plus its virtual
   nodes. The graph's self-loops option applies to the pattern, not to the
   edges it reads. */
static int pattern_over_graph(source_t *s, const source_opts_t *o, int *usage, ag_error_t *err)
{
    ag_pattern_t *pat;
    int rc = ag_pattern_parse(&pat, o->pattern, err);
    if (rc) {
        *usage = 1;
        return rc;
    }
    ag_nbhd_t graph = s->nb, nb;
    const int64_t V = ag_pattern_virtual(pat);
    rc = ag_pattern_bind_graph(pat, &graph, err);
    if (!rc && (rc = ag_nbhd_from_pattern(&nb, pat, graph.n_nodes + V, o->self, err)) == AG_EINVAL)
        *usage = 1;
    ag_pattern_free(pat);
    if (rc)
        return rc;
    ag_nbhd_destroy(&graph);
    s->nb = nb;
    s->n_virtual = V;
    if (s->have_graph)   /* its edges are no longer the messages: nothing may read them */
        igraph_destroy(&s->graph);
    s->have_graph = 0;
    char was[200];
    snprintf(was, sizeof was, "%.190s", s->desc);
    snprintf(s->desc, sizeof s->desc, "pattern '%.200s' over %s", o->pattern, was);
    return labels_add_virtual(&s->labels, V, err);
}

static int open_pattern(source_t *s, const source_opts_t *o, int *usage, ag_error_t *err)
{
    ag_pattern_t *pat;
    int rc = ag_pattern_parse(&pat, o->pattern, err);
    if (rc) {
        *usage = 1;
        return rc;
    }
    const int64_t V = ag_pattern_virtual(pat);
    int64_t N = o->nodes;
    /* mistakes in --tokens, --nodes or the spec are usage (exit 2); a labels file is input */
    if (o->tokens) {
        rc = labels_from_tokens(&s->labels, o->tokens, err);
        *usage = rc != AG_OK;
    } else if (o->labels_file) {
        rc = labels_from_file(&s->labels, o->labels_file, err);
    }
    if (!rc && s->labels.str) {
        if (N && N != s->labels.n) {
            *usage = o->tokens != NULL;
            rc = ag_fail(err, AG_EINVAL, "%s has %lld label%s, but --nodes is %lld",
                         o->tokens ? "--tokens" : o->labels_file, (long long)s->labels.n,
                         AG_PLURAL(s->labels.n), (long long)N);
        }
        N = s->labels.n;
    }
    /* --nodes, --tokens and a graph's size count the nodes before the virtual ones */
    if (N)
        N += V;
    else if (o->size_hint)
        N = o->size_hint + V;
    if (!rc && N == 0 && !(N = ag_pattern_size(pat))) {
        *usage = 1;
        rc = ag_fail(err, AG_EINVAL, "pattern '%s' needs a size: give --nodes N or --tokens",
                     o->pattern);
    }
    if (!rc && N > o->max_nodes) {
        *usage = !o->labels_file;
        rc = ag_fail(err, AG_ELIMIT, "%lld nodes is more than the limit of %lld (--max-nodes)",
                     (long long)N, (long long)o->max_nodes);
    }
    if (!rc && (rc = ag_nbhd_from_pattern(&s->nb, pat, N, o->self, err)) == AG_EINVAL)
        *usage = !o->labels_file;   /* the spec does not fit --nodes or --tokens */
    if (!rc && !s->labels.str)
        s->labels = (ag_labels_t){N, NULL};   /* node numbers, made when printed */
    else if (!rc)
        rc = labels_add_virtual(&s->labels, V, err);
    if (!rc)
        snprintf(s->desc, sizeof s->desc, "pattern '%s'", o->pattern);
    s->n_virtual = rc ? 0 : V;
    ag_pattern_free(pat);
    return rc;
}

int csr_paths(const char *csr, char **indptr, const char **indices, int *usage,
              ag_error_t *err)
{
    const char *comma = strchr(csr, ',');
    if (!comma || comma == csr || !comma[1]) {
        *usage = 1;
        return ag_fail(err, AG_EINVAL, "--csr '%s': expected INDPTR.npy,INDICES.npy", csr);
    }
    if (!(*indptr = strndup(csr, (size_t)(comma - csr))))
        return ag_fail(err, AG_ENOMEM, "out of memory");
    *indices = comma + 1;
    return AG_OK;
}

int csr_stdin_count(const char *csr)
{
    const char *comma = csr ? strchr(csr, ',') : NULL;
    return comma ? (comma == csr + 1 && csr[0] == '-') + (strcmp(comma + 1, "-") == 0) : 0;
}

/* The fast path for huge graphs: CSR arrays straight into runs, no igraph. */
static int open_csr(source_t *s, const source_opts_t *o, int *usage, ag_error_t *err)
{
    char *indptr_path;
    const char *indices_path;
    int rc = csr_paths(o->csr, &indptr_path, &indices_path, usage, err);
    if (rc)
        return rc;
    int64_t *indptr = NULL, *indices = NULL, n_ptr = 0, n_idx = 0;
    rc = ag_index_read_npy(&indptr, &n_ptr, indptr_path, err);
    if (!rc && n_ptr < 2)
        rc = ag_fail(err, AG_EINVAL, "%s has %lld entr%s; expected N+1 >= 2", indptr_path,
                     (long long)n_ptr, n_ptr == 1 ? "y" : "ies");
    if (!rc && n_ptr - 1 > o->max_nodes)
        rc = ag_fail(err, AG_ELIMIT, "%s describes %lld nodes, more than the limit of %lld "
                     "(--max-nodes)", indptr_path, (long long)(n_ptr - 1),
                     (long long)o->max_nodes);
    if (!rc)
        rc = ag_index_read_npy(&indices, &n_idx, indices_path, err);
    if (!rc && indptr[n_ptr - 1] != n_idx)
        rc = ag_fail(err, AG_EINVAL, "%s ends at %lld, but %s has %lld entr%s", indptr_path,
                     (long long)indptr[n_ptr - 1], indices_path, (long long)n_idx,
                     n_idx == 1 ? "y" : "ies");
    if (!rc && (rc = ag_nbhd_from_csr(&s->nb, n_ptr - 1, indptr, indices, err)) &&
        strncmp(err->msg, "CSR: ", 5) == 0) {   /* name the file: the MPI tool's words */
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg + 5);
        ag_fail(err, (ag_status_t)rc, "%s: %s",
                strncmp(why, "indptr", 6) == 0 ? indptr_path : indices_path, why);
    }
    if (!rc)
        rc = ag_nbhd_self_loops(&s->nb, o->self, err);
    if (!rc)
        s->labels = (ag_labels_t){n_ptr - 1, NULL};   /* node numbers, made when printed */
    if (!rc)
        snprintf(s->desc, sizeof s->desc, "CSR %s", o->csr);
    free(indptr_path);
    free(indptr);
    free(indices);
    return rc;
}

int source_open(source_t *s, const source_opts_t *o, int *usage, ag_error_t *err)
{
    memset(s, 0, sizeof *s);
    *usage = 0;
    if ((o->graph || o->csr) && (o->tokens || o->labels_file || o->nodes)) {
        *usage = 1;
        if (o->pattern)
            return ag_fail(err, AG_EINVAL, "--tokens, --labels-file and --nodes size a "
                           "pattern alone; pattern '%s' over %s takes its nodes and labels",
                           o->pattern, o->graph ? o->graph : o->csr);
        return ag_fail(err, AG_EINVAL, "--tokens, --labels-file and --nodes are for patterns; "
                       "'%s' is a %s", o->graph ? o->graph : o->csr,
                       o->graph ? "graph file" : "CSR");
    }
    if (!o->graph && o->direction != AG_EDGES_AUTO) {
        *usage = 1;
        return ag_fail(err, AG_EINVAL, "--directed and --undirected are for graph files (edge "
                       "lists, NCOL, LGL); '%s' is a %s", o->csr ? o->csr : o->pattern,
                       o->csr ? "CSR" : "pattern");
    }
    if (!o->graph && !o->csr)
        return open_pattern(s, o, usage, err);
    if (!o->pattern)
        return o->csr ? open_csr(s, o, usage, err) : open_graph(s, o, usage, err);
    /* a pattern over the graph: the graph's own edges as they are, self-loops for the pattern */
    source_opts_t g = *o;
    g.self = AG_SELF_KEEP;
    int rc = o->csr ? open_csr(s, &g, usage, err) : open_graph(s, &g, usage, err);
    return rc ? rc : pattern_over_graph(s, o, usage, err);
}

void source_close(source_t *s)
{
    if (s->have_graph)
        igraph_destroy(&s->graph);
    s->have_graph = 0;
    ag_labels_destroy(&s->labels);
    ag_nbhd_destroy(&s->nb);
}

void source_print(const source_t *s)
{
    const ag_nbhd_t *nb = &s->nb;
    printf("graph: %s: %lld node%s, ", s->desc, (long long)nb->n_nodes, AG_PLURAL(nb->n_nodes));
    if (s->have_graph)
        printf("%" IGRAPH_PRId " edge%s, ", igraph_ecount(&s->graph),
               AG_PLURAL(igraph_ecount(&s->graph)));
    printf("%lld message%s\n", (long long)nb->n_edges, AG_PLURAL(nb->n_edges));
}
