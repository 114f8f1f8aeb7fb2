/*
 * Graph files -> igraph_t, and node labels.
 *
 * igraph's readers are used for every format but plain edge lists, which we
 * parse ourselves so that errors name the line, and so that a huge node id is
 * refused before igraph sizes a graph by it. Inputs igraph accepts too
 * quietly (GraphML edges to undeclared nodes, duplicate GraphML ids, Pajek
 * vertex counts beyond the limit) are checked before igraph sees them (the
 * GraphML checks in graphml.c).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "io/graphml.h"
#include "io/io.h"

static const struct { const char *name; ag_format_t format; } format_names[] = {
    {"edgelist", AG_FORMAT_EDGELIST}, {"ncol", AG_FORMAT_NCOL}, {"lgl", AG_FORMAT_LGL},
    {"graphml", AG_FORMAT_GRAPHML}, {"gml", AG_FORMAT_GML}, {"pajek", AG_FORMAT_PAJEK},
    {"dot", AG_FORMAT_DOT}, {"npz", AG_FORMAT_NPZ},
};

static const struct { const char *ext; ag_format_t format; } format_exts[] = {
    {"edges", AG_FORMAT_EDGELIST}, {"el", AG_FORMAT_EDGELIST}, {"txt", AG_FORMAT_EDGELIST},
    {"edgelist", AG_FORMAT_EDGELIST}, {"ncol", AG_FORMAT_NCOL}, {"lgl", AG_FORMAT_LGL},
    {"graphml", AG_FORMAT_GRAPHML}, {"xml", AG_FORMAT_GRAPHML}, {"gml", AG_FORMAT_GML},
    {"net", AG_FORMAT_PAJEK}, {"pajek", AG_FORMAT_PAJEK}, {"dot", AG_FORMAT_DOT},
    {"gv", AG_FORMAT_DOT}, {"npz", AG_FORMAT_NPZ},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

int ag_format_parse(ag_format_t *format, const char *name, ag_error_t *err)
{
    for (size_t i = 0; i < COUNT(format_names); i++)
        if (strcasecmp(name, format_names[i].name) == 0) {
            *format = format_names[i].format;
            return AG_OK;
        }
    return ag_fail(err, AG_EINVAL, "unknown graph format '%s'; expected edgelist, ncol, lgl, "
                   "graphml, gml, pajek or npz (dot: written, not read; npz: read, not "
                   "written)", name);
}

int ag_format_from_path(ag_format_t *format, const char *path, ag_error_t *err)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash))
        for (size_t i = 0; i < COUNT(format_exts); i++)
            if (strcasecmp(dot + 1, format_exts[i].ext) == 0) {
                *format = format_exts[i].format;
                return AG_OK;
            }
    return ag_fail(err, AG_EINVAL, "%s: cannot tell the graph format from the extension; "
                   "expected .edges/.el/.txt, .ncol, .lgl, .graphml, .gml, .net or .npz "
                   "(or name the format with --format)", path);
}

const char *ag_format_name(ag_format_t format)
{
    for (size_t i = 0; i < COUNT(format_names); i++)
        if (format_names[i].format == format)
            return format_names[i].name;
    return "auto";
}

/* ---- plain edge lists ---- */

/* Reads "src dst" pairs (0-based; '#' starts a comment) into edges. */
static int read_edgelist(igraph_t *graph, FILE *f, const char *path, int64_t max_nodes,
                         igraph_bool_t directed, ag_error_t *err)
{
    igraph_vector_int_t edges;
    if (igraph_vector_int_init(&edges, 0))
        return ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
    int rc = AG_OK;
    int64_t max_id = -1, lineno = 0;
    char *line = NULL;
    size_t cap = 0;
    while (!rc && getline(&line, &cap, f) != -1) {
        lineno++;
        char *p = line, *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        int64_t ids[2];
        int k = 0;
        for (;;) {
            while (isspace((unsigned char)*p))
                p++;
            if (!*p)
                break;
            char *end;
            errno = 0;
            long long v = strtoll(p, &end, 10);
            if (end == p || (*end && !isspace((unsigned char)*end)) || v < 0 || errno) {
                int n = 0;
                while (p[n] && !isspace((unsigned char)p[n]) && n < 40)
                    n++;
                rc = ag_fail(err, AG_EFORMAT, "%s:%lld: '%.*s' is not a node id; expected a "
                             "non-negative integer", path, (long long)lineno, n, p);
                break;
            }
            if (v >= max_nodes) {
                rc = ag_fail(err, AG_ELIMIT, "%s:%lld: node id %lld implies more than %lld "
                             "node%s; raise max_nodes (the tool's --max-nodes) if this is intended", path,
                             (long long)lineno, v, (long long)max_nodes, AG_PLURAL(max_nodes));
                break;
            }
            if (k == 2) {
                rc = ag_fail(err, AG_EFORMAT, "%s:%lld: more than two ids on a line; expected "
                             "'src dst'", path, (long long)lineno);
                break;
            }
            ids[k++] = v;
            p = end;
        }
        if (rc || k == 0)
            continue;
        if (k == 1) {
            rc = ag_fail(err, AG_EFORMAT, "%s:%lld: one id on a line; expected 'src dst'", path,
                         (long long)lineno);
            break;
        }
        if (igraph_vector_int_push_back(&edges, ids[0]) ||
            igraph_vector_int_push_back(&edges, ids[1])) {
            rc = ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
            break;
        }
        for (int i = 0; i < 2; i++)
            if (ids[i] > max_id)
                max_id = ids[i];
    }
    free(line);
    if (!rc && ferror(f))
        rc = ag_fail(err, AG_EIO, "%s: read error", path);
    if (!rc && max_id < 0)
        rc = ag_fail(err, AG_EFORMAT, "%s: no edges; expected 'src dst' lines", path);
    if (!rc && igraph_create(graph, &edges, max_id + 1, directed))
        rc = ag_fail(err, AG_EIGRAPH, "%s: %s", path, ag_i_igraph_reason());
    igraph_vector_int_destroy(&edges);
    return rc;
}

/* ---- .npz archives ---- */

/* "path:member", malloc'ed (NULL out of memory). */
static char *member_path(const char *path, const char *member)
{
    const size_t n = strlen(path) + strlen(member) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s:%s", path, member);
    return s;
}

/* The node count an archive's per-node arrays state (the rows of the first of
   node_labels and node_features it has, as docs/formats.md says; their headers
   alone), or 0. */
static int64_t npz_nodes(const char *path)
{
    static const char *const members[] = {"node_labels", "node_features"};
    for (size_t k = 0; k < COUNT(members); k++) {
        char *name = member_path(path, members[k]);
        int64_t shape[AG_NPY_MAX_DIMS];
        int ndim = 0;
        ag_error_t ignored;
        const int found = name && !ag_i_npy_shape(&ndim, shape, name, &ignored) && ndim >= 1;
        free(name);
        if (found)
            return shape[0];
    }
    return 0;
}

/*
 * An .npz archive's edges: `edges` [E, 2] (Platonov et al.'s heterophilous
 * graphs: undirected unless told, each edge once) or PyG's `edge_index` [2, E]
 * (directed unless told). The nodes are those of its per-node arrays, else
 * the largest id + 1 (an isolated last node needs them).
 */
static int read_npz(igraph_t *graph, const char *path, int64_t max_nodes,
                    ag_direction_t direction, ag_error_t *err)
{
    char *name = NULL;
    int64_t *v = NULL, shape[AG_NPY_MAX_DIMS];
    int ndim = 0, rc = AG_OK, pairs_in_rows = 1;
    if (!(name = member_path(path, "edges")))
        return ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
    ag_error_t first;
    if ((rc = ag_ints_read_npy(&v, &ndim, shape, name, &first)) == AG_EINVAL &&
        strstr(first.msg, "has no member")) {
        free(name);
        if (!(name = member_path(path, "edge_index")))
            return ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
        pairs_in_rows = 0;
        if ((rc = ag_ints_read_npy(&v, &ndim, shape, name, err)) == AG_EINVAL &&
            strstr(err->msg, "has no member")) {
            char has[400];
            snprintf(has, sizeof has, "%s", strstr(first.msg, "; it has") ?
                     strstr(first.msg, "; it has") + 2 : "");
            rc = ag_fail(err, AG_EFORMAT, "%s: no edges; expected a member 'edges' [E, 2] or "
                         "'edge_index' [2, E] (%s)", path, has);
        }
    } else if (rc && err) {
        *err = first;
    }
    const int64_t E = rc ? 0 : pairs_in_rows ? shape[0] : ndim == 2 ? shape[1] : 0;
    if (!rc && (ndim != 2 || shape[pairs_in_rows ? 1 : 0] != 2))
        rc = ag_fail(err, AG_EFORMAT, "%s has %d dimension%s%s; expected [%s]", name, ndim,
                     AG_PLURAL(ndim), ndim == 2 ? " that are not pairs" : "",
                     pairs_in_rows ? "E, 2" : "2, E");
    int64_t N = rc ? 0 : npz_nodes(path), top = -1;
    for (int64_t k = 0; !rc && k < 2 * E; k++) {
        const int64_t id = v[k];
        if (id < 0 || id >= max_nodes)
            rc = ag_fail(err, id < 0 ? AG_EFORMAT : AG_ELIMIT, "%s: edge %lld names node %lld; "
                         "expected 0..%lld", name, (long long)(pairs_in_rows ? k / 2 : k % E),
                         (long long)id, (long long)(N ? N : max_nodes) - 1);
        else if (N && id >= N)
            rc = ag_fail(err, AG_EFORMAT, "%s: edge %lld names node %lld, but the archive's "
                         "per-node arrays have %lld rows", name,
                         (long long)(pairs_in_rows ? k / 2 : k % E), (long long)id, (long long)N);
        top = id > top ? id : top;
    }
    if (!rc && !N && (N = top + 1) == 0)
        rc = ag_fail(err, AG_EFORMAT, "%s: no edges and no per-node arrays: no nodes", path);
    igraph_vector_int_t edges;
    if (!rc && igraph_vector_int_init(&edges, 2 * E))
        rc = ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
    if (!rc) {
        for (int64_t k = 0; k < E; k++) {   /* igraph's layout: pairs one after another */
            VECTOR(edges)[2 * k] = pairs_in_rows ? v[2 * k] : v[k];
            VECTOR(edges)[2 * k + 1] = pairs_in_rows ? v[2 * k + 1] : v[E + k];
        }
        const igraph_bool_t directed = direction == AG_EDGES_AUTO ? !pairs_in_rows
                                                                  : direction == AG_EDGES_DIRECTED;
        ag_i_igraph_enter();
        if (igraph_create(graph, &edges, N, directed))
            rc = ag_fail(err, AG_EIGRAPH, "%s: %s", path, ag_i_igraph_reason());
        ag_i_igraph_leave();
        igraph_vector_int_destroy(&edges);
    }
    free(v);
    free(name);
    return rc;
}

/* ---- pre-checks for igraph's readers ---- */

/* Pajek declares its vertex count up front; igraph would allocate it blindly.
   Reads from f's position (after any byte-order mark) and returns there. */
static int check_pajek_size(FILE *f, const char *path, int64_t max_nodes, ag_error_t *err)
{
    const long start = ftell(f);
    if (start < 0)
        return ag_fail(err, AG_EIO, "%s: cannot tell the read position: %s", path,
                       strerror(errno));
    char buf[256];
    int rc = AG_OK;
    while (fgets(buf, sizeof buf, f)) {
        char *p = buf;
        while (isspace((unsigned char)*p))
            p++;
        if (strncasecmp(p, "*vertices", 9) == 0) {
            long long n = strtoll(p + 9, NULL, 10);
            if (n > max_nodes)
                rc = ag_fail(err, AG_ELIMIT, "%s: *Vertices %lld is more than %lld node%s; "
                             "raise max_nodes (the tool's --max-nodes) if this is intended", path, n,
                             (long long)max_nodes, AG_PLURAL(max_nodes));
            break;
        }
    }
    if (fseek(f, start, SEEK_SET) != 0 && !rc)
        rc = ag_fail(err, AG_EIO, "%s: cannot seek: %s", path, strerror(errno));
    return rc;
}

/* ---- loading ---- */

static int attr_type(const igraph_t *graph, igraph_attribute_elemtype_t elem, const char *name);

/*
 * igraph's GraphML reader stores every node's XML id in the vertex attribute
 * `id`. Ids n0, n1, ... in order (what igraph and this library write) say
 * nothing: they are dropped, so such a file's nodes are numbered 0, 1, ...
 * like every other format's. Other ids are kept and serve as labels when the
 * file has no label or name.
 */
static void drop_default_graphml_ids(igraph_t *graph)
{
    if (attr_type(graph, IGRAPH_ATTRIBUTE_VERTEX, "id") != IGRAPH_ATTRIBUTE_STRING)
        return;
    char buf[32];
    for (igraph_integer_t i = 0; i < igraph_vcount(graph); i++) {
        snprintf(buf, sizeof buf, "n%" IGRAPH_PRId, i);
        if (strcmp(VAS(graph, "id", i), buf) != 0)
            return;
    }
    igraph_cattribute_remove_v(graph, "id");
}

/* Skips a UTF-8 byte-order mark at the start of f (1 if there was one);
   otherwise f goes back to its start (0), or -1 with errno set where it
   cannot seek (a pipe: read such input into memory instead). */
static int skip_bom(FILE *f)
{
    unsigned char b[3];
    size_t got = fread(b, 1, 3, f);
    if (got == 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF)
        return 1;
    return fseek(f, 0, SEEK_SET) == 0 ? 0 : -1;
}

/*
 * Opens path for reading, after any byte-order mark. A regular file is read
 * in place. Anything else (standard input "-", a FIFO, a process
 * substitution, a device) gives its bytes once and cannot seek back, so it is
 * read whole into *mem (malloc'ed; the caller frees it), which the checks and
 * igraph then read through fmemopen.
 */
static int open_input(FILE **f, char **mem, size_t *mem_len, const char *path,
                      ag_error_t *err)
{
    *f = NULL;
    *mem = NULL;
    *mem_len = 0;
    const int is_stdin = strcmp(path, "-") == 0;
    FILE *in = is_stdin ? stdin : fopen(path, "rb");
    if (!in)
        return ag_fail(err, AG_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (!is_stdin && fstat(fileno(in), &st) == 0 && S_ISREG(st.st_mode)) {
        if (skip_bom(in) < 0) {   /* igraph's text readers would take it for a name */
            const int e = errno;
            fclose(in);
            return ag_fail(err, AG_EIO, "%s: cannot seek: %s", path, strerror(e));
        }
        *f = in;
        return AG_OK;
    }
    char *buf = NULL;
    size_t len = 0;
    int rc = ag_i_read_stream(in, path, is_stdin ? "standard input" : "the input", &buf, &len,
                              err);
    if (!is_stdin)
        fclose(in);
    if (rc)
        return rc;
    static const char bom[3] = {'\xEF', '\xBB', '\xBF'};
    if (len >= 3 && memcmp(buf, bom, 3) == 0) {
        memmove(buf, buf + 3, len - 3 + 1);   /* with the spare zero byte */
        len -= 3;
    }
    if (len == 0) {
        free(buf);
        return ag_fail(err, AG_EFORMAT, "%s: %s is empty", path,
                       is_stdin ? "standard input" : "the input");
    }
    if (!(*f = fmemopen(buf, len, "rb"))) {
        const int e = errno;
        free(buf);
        return ag_fail(err, AG_EIO, "%s: cannot read from memory: %s", path, strerror(e));
    }
    *mem = buf;
    *mem_len = len;
    return AG_OK;
}

static int read_with_igraph(igraph_t *graph, FILE *f, ag_format_t format,
                            igraph_bool_t directed)
{
    switch (format) {
    case AG_FORMAT_NCOL:
        return igraph_read_graph_ncol(graph, f, NULL, 1, IGRAPH_ADD_WEIGHTS_IF_PRESENT,
                                      directed);
    case AG_FORMAT_LGL:
        return igraph_read_graph_lgl(graph, f, 1, IGRAPH_ADD_WEIGHTS_IF_PRESENT, directed);
    case AG_FORMAT_GRAPHML:
        return igraph_read_graph_graphml(graph, f, 0);
    case AG_FORMAT_GML:
        return igraph_read_graph_gml(graph, f);
    case AG_FORMAT_PAJEK:
        return igraph_read_graph_pajek(graph, f);
    default:
        return IGRAPH_EINVAL;
    }
}

int ag_graph_load(igraph_t *graph, const char *path, const ag_load_opts_t *opts,
                  ag_error_t *err)
{
    ag_format_t format = opts ? opts->format : AG_FORMAT_AUTO;
    int64_t max_nodes = opts && opts->max_nodes > 0 ? opts->max_nodes : AG_DEFAULT_MAX_NODES;
    int rc = AG_OK;
    if (format == AG_FORMAT_AUTO && strcmp(path, "-") == 0)
        return ag_fail(err, AG_EINVAL, "-: a graph on standard input needs its format named");
    if (format == AG_FORMAT_AUTO && (rc = ag_format_from_path(&format, path, err)))
        return rc;
    if (format == AG_FORMAT_DOT)
        return ag_fail(err, AG_EINVAL, "%s: DOT files can be written, not read; use GraphML, "
                       "GML, Pajek, NCOL, LGL or an edge list", path);
    ag_i_igraph_use_attributes();
    if (format == AG_FORMAT_NPZ)
        return read_npz(graph, path, max_nodes, opts ? opts->direction : AG_EDGES_AUTO, err);

    char *mem;
    size_t mem_len;
    FILE *f;
    if ((rc = open_input(&f, &mem, &mem_len, path, err)))
        return rc;
    if (format == AG_FORMAT_PAJEK)
        rc = check_pajek_size(f, path, max_nodes, err);
    else if (format == AG_FORMAT_GRAPHML)
        rc = ag_i_graphml_check_ids(path, mem, mem_len, max_nodes, err);
    if (rc) {
        fclose(f);
        free(mem);
        return rc;
    }

    const ag_direction_t direction = opts ? opts->direction : AG_EDGES_AUTO;
    const igraph_bool_t directed = direction != AG_EDGES_UNDIRECTED;
    ag_i_igraph_enter();
    if (format == AG_FORMAT_EDGELIST) {
        rc = read_edgelist(graph, f, path, max_nodes, directed, err);
    } else if (read_with_igraph(graph, f, format, directed)) {
        rc = ag_fail(err, AG_EFORMAT, "%s: not a valid %s file: %s", path,
                     ag_format_name(format), ag_i_igraph_reason());
    }
    if (!rc && format == AG_FORMAT_GRAPHML)
        drop_default_graphml_ids(graph);
    ag_i_igraph_leave();
    fclose(f);
    free(mem);
    if (rc)
        return rc;   /* graph stays uninitialised */

    const int says_itself = format == AG_FORMAT_GRAPHML || format == AG_FORMAT_GML ||
                            format == AG_FORMAT_PAJEK;
    if (says_itself && direction != AG_EDGES_AUTO &&
        (direction == AG_EDGES_DIRECTED) != igraph_is_directed(graph)) {
        const int is_directed = igraph_is_directed(graph);
        igraph_destroy(graph);
        return ag_fail(err, AG_EINVAL, "%s: the %s file says its edges are %s; --%s applies "
                       "to edge lists, NCOL and LGL (a %s file states its own direction)",
                       path, ag_format_name(format), is_directed ? "directed" : "undirected",
                       is_directed ? "undirected" : "directed", ag_format_name(format));
    }
    igraph_integer_t n = igraph_vcount(graph);
    if (n == 0 || n > max_nodes) {
        igraph_destroy(graph);
        if (n == 0)
            return ag_fail(err, AG_EFORMAT, "%s: the graph has no nodes", path);
        return ag_fail(err, AG_ELIMIT, "%s: %" IGRAPH_PRId " nodes is more than the limit of "
                       "%lld (max_nodes, the tool's --max-nodes)", path, n, (long long)max_nodes);
    }
    return AG_OK;
}

/* ---- writing ---- */

/*
 * LGL with node names: igraph 0.10.2's writer never frees its vector of names
 * in this case (a leak per file, found by the cli fuzzer under ASan), so write
 * what it writes here: per source in edge order "# name" and a line per
 * target, then "# name" for each isolated node.
 */
static igraph_error_t write_lgl_named(const igraph_t *g, FILE *f)
{
    igraph_eit_t it;
    IGRAPH_CHECK(igraph_eit_create(g, igraph_ess_all(IGRAPH_EDGEORDER_FROM), &it));
    igraph_integer_t last = -1, from, to;
    int bad = 0;
    for (; !IGRAPH_EIT_END(it) && !bad; IGRAPH_EIT_NEXT(it)) {
        igraph_edge(g, IGRAPH_EIT_GET(it), &from, &to);
        if (from != last)
            bad |= fprintf(f, "# %s\n", VAS(g, "name", from)) < 0;
        bad |= fprintf(f, "%s\n", VAS(g, "name", to)) < 0;
        last = from;
    }
    igraph_eit_destroy(&it);
    for (igraph_integer_t v = 0; v < igraph_vcount(g) && !bad; v++) {
        igraph_integer_t deg;
        IGRAPH_CHECK(igraph_degree_1(g, &deg, v, IGRAPH_ALL, IGRAPH_LOOPS));
        if (deg == 0)
            bad |= fprintf(f, "# %s\n", VAS(g, "name", v)) < 0;
    }
    return bad ? IGRAPH_EFILE : IGRAPH_SUCCESS;
}

static igraph_error_t write_with_igraph(const igraph_t *g, FILE *f, ag_format_t format,
                                        int labelled)
{
    switch (format) {
    case AG_FORMAT_EDGELIST: return igraph_write_graph_edgelist(g, f);
    case AG_FORMAT_NCOL: return igraph_write_graph_ncol(g, f, labelled ? "name" : NULL, NULL);
    case AG_FORMAT_LGL:
        return labelled ? write_lgl_named(g, f) : igraph_write_graph_lgl(g, f, NULL, NULL, 1);
    case AG_FORMAT_GRAPHML: return igraph_write_graph_graphml(g, f, 0);
    case AG_FORMAT_GML:
        return igraph_write_graph_gml(g, f, IGRAPH_WRITE_GML_DEFAULT_SW, NULL,
                                      "attngraph " AG_VERSION);
    case AG_FORMAT_PAJEK: return igraph_write_graph_pajek(g, f);
    case AG_FORMAT_DOT: return igraph_write_graph_dot(g, f);
    default: return IGRAPH_EINVAL;
    }
}

int ag_graph_write(const igraph_t *graph, const char *path, ag_format_t format,
                   const ag_labels_t *labels, ag_error_t *err)
{
    int rc = AG_OK;
    if (format == AG_FORMAT_AUTO && strcmp(path, "-") == 0)
        return ag_fail(err, AG_EINVAL, "-: a graph on standard input needs its format named");
    if (format == AG_FORMAT_AUTO && (rc = ag_format_from_path(&format, path, err)))
        return rc;
    if (format == AG_FORMAT_NPZ)
        return ag_fail(err, AG_EINVAL, "%s: .npz archives are read, not written; write "
                       "GraphML, GML, Pajek, NCOL, LGL, an edge list or DOT", path);
    if (labels && labels->n != igraph_vcount(graph))
        return ag_fail(err, AG_EINVAL, "%s: %lld label%s for %" IGRAPH_PRId " node%s", path,
                       (long long)labels->n, AG_PLURAL(labels->n), igraph_vcount(graph),
                       AG_PLURAL(igraph_vcount(graph)));
    ag_i_igraph_use_attributes();
    FILE *f = fopen(path, "wb");
    if (!f)
        return ag_fail(err, AG_EIO, "%s: cannot create: %s", path, strerror(errno));
    ag_i_igraph_enter();
    igraph_t copy;
    const igraph_t *g = graph;
    /* GraphML writes node ids itself; an `id` attribute beside them makes
       readers (python-igraph) warn that they cannot add the ids */
    const int id_type = format == AG_FORMAT_GRAPHML ?
                        attr_type(graph, IGRAPH_ATTRIBUTE_VERTEX, "id") : -1;
    if (labels || id_type >= 0) {
        /* changes go on a copy: the caller's graph stays as it was */
        if (igraph_copy(&copy, graph)) {
            rc = ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
        } else {
            g = &copy;
            for (int64_t i = 0; labels && i < labels->n && !rc; i++) {
                char buf[AG_LABEL_NUMBER_SIZE];
                const char *l = ag_label(labels, i, buf, sizeof buf);
                if (SETVAS(&copy, "label", i, l) || SETVAS(&copy, "name", i, l) ||
                    (format == AG_FORMAT_PAJEK && SETVAS(&copy, "id", i, l)))
                    rc = ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
            }
            /* without labels, string ids that name the nodes move to `name` */
            if (!labels && id_type == IGRAPH_ATTRIBUTE_STRING &&
                attr_type(graph, IGRAPH_ATTRIBUTE_VERTEX, "label") < 0 &&
                attr_type(graph, IGRAPH_ATTRIBUTE_VERTEX, "name") < 0)
                for (int64_t i = 0; i < igraph_vcount(graph) && !rc; i++)
                    if (SETVAS(&copy, "name", i, VAS(graph, "id", i)))
                        rc = ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
            if (id_type >= 0)
                igraph_cattribute_remove_v(&copy, "id");
        }
    }
    if (!rc && write_with_igraph(g, f, format, labels != NULL))
        rc = ag_fail(err, AG_EIGRAPH, "%s: cannot write as %s: %s", path, ag_format_name(format),
                     ag_i_igraph_reason());
    if (g == &copy)
        igraph_destroy(&copy);
    ag_i_igraph_leave();
    if (fclose(f) != 0 && !rc)
        rc = ag_fail(err, AG_EIO, "%s: write failed: %s", path, strerror(errno));
    return rc;
}

/* ---- labels ---- */

const char *ag_label(const ag_labels_t *labels, int64_t i, char *buf, size_t size)
{
    if (labels && labels->str)
        return labels->str[i];
    snprintf(buf, size, "%lld", (long long)i);
    return buf;
}

void ag_labels_destroy(ag_labels_t *labels)
{
    if (!labels || !labels->str)
        return;
    for (int64_t i = 0; i < labels->n; i++)
        free(labels->str[i]);
    free(labels->str);
    memset(labels, 0, sizeof *labels);
}

static int labels_alloc(ag_labels_t *labels, int64_t n, ag_error_t *err)
{
    memset(labels, 0, sizeof *labels);
    if (!(labels->str = ag_calloc(n, sizeof(char *), err, "labels")))
        return ag_alloc_status();
    labels->n = n;
    return AG_OK;
}

int ag_labels_numbered(ag_labels_t *labels, int64_t n, ag_error_t *err)
{
    int rc = labels_alloc(labels, n, err);
    for (int64_t i = 0; !rc && i < n; i++) {
        char buf[24];
        snprintf(buf, sizeof buf, "%lld", (long long)i);
        if (!(labels->str[i] = strdup(buf)))
            rc = ag_fail(err, AG_ENOMEM, "labels: out of memory");
    }
    if (rc)
        ag_labels_destroy(labels);
    return rc;
}

/* A graph's attribute names and types, by element: IGRAPH_ATTRIBUTE_GRAPH,
   _VERTEX and _EDGE index the arrays. */
typedef struct {
    igraph_strvector_t names[3];
    igraph_vector_int_t types[3];
} attr_list_t;

/* Lists graph's attributes into a (uninitialised; initialised only on success).
   Returns 0, or an igraph error code (no attribute table, out of memory). */
static int attr_list_init(attr_list_t *a, const igraph_t *graph)
{
    if (!igraph_has_attribute_table())
        return IGRAPH_FAILURE;
    int s = 0, t = 0, rc = IGRAPH_SUCCESS;
    /* s and t count what is initialised, for the cleanup */
    for (; s < 3; s++)
        if ((rc = igraph_strvector_init(&a->names[s], 0)))
            break;
    for (; !rc && t < 3; t++)
        if ((rc = igraph_vector_int_init(&a->types[t], 0)))
            break;
    if (!rc)
        rc = igraph_cattribute_list(graph, &a->names[0], &a->types[0], &a->names[1],
                                    &a->types[1], &a->names[2], &a->types[2]);
    if (rc) {
        while (s > 0)
            igraph_strvector_destroy(&a->names[--s]);
        while (t > 0)
            igraph_vector_int_destroy(&a->types[--t]);
    }
    return rc;
}

static void attr_list_destroy(attr_list_t *a)
{
    for (int k = 0; k < 3; k++) {
        igraph_strvector_destroy(&a->names[k]);
        igraph_vector_int_destroy(&a->types[k]);
    }
}

/* The type of the vertex or edge attribute `name`, or -1 when the graph has none. */
static int attr_type(const igraph_t *graph, igraph_attribute_elemtype_t elem, const char *name)
{
    attr_list_t a;
    if (!igraph_has_attribute_table() || !igraph_cattribute_has_attr(graph, elem, name) ||
        attr_list_init(&a, graph))
        return -1;
    int type = -1;
    for (igraph_integer_t i = 0; i < igraph_strvector_size(&a.names[elem]); i++)
        if (strcmp(igraph_strvector_get(&a.names[elem], i), name) == 0)
            type = (int)VECTOR(a.types[elem])[i];
    attr_list_destroy(&a);
    return type;
}

int ag_labels_from_graph(ag_labels_t *labels, const igraph_t *graph, ag_error_t *err)
{
    memset(labels, 0, sizeof *labels);
    static const char *const names[] = {"label", "name", "id"};
    int64_t n = igraph_vcount(graph);
    ag_i_igraph_enter();
    const char *attr = NULL;
    int type = -1;
    for (size_t k = 0; k < COUNT(names) && !attr; k++) {
        type = attr_type(graph, IGRAPH_ATTRIBUTE_VERTEX, names[k]);
        if (type == IGRAPH_ATTRIBUTE_STRING || type == IGRAPH_ATTRIBUTE_NUMERIC)
            attr = names[k];
    }
    int rc = attr ? labels_alloc(labels, n, err) : AG_OK;
    for (int64_t i = 0; attr && !rc && i < n; i++) {
        char buf[32];
        const char *s = buf;
        if (type == IGRAPH_ATTRIBUTE_STRING)
            s = VAS(graph, attr, i);
        else
            snprintf(buf, sizeof buf, "%g", (double)VAN(graph, attr, i));
        if (!(labels->str[i] = strdup(s)))
            rc = ag_fail(err, AG_ENOMEM, "labels: out of memory");
    }
    ag_i_igraph_leave();
    if (!attr)
        return ag_labels_numbered(labels, n, err);
    if (rc)
        ag_labels_destroy(labels);
    return rc;
}

/* "; its numeric edge attributes: a, b" or "; it has no numeric edge attributes". */
static void numeric_edge_attrs(const igraph_t *graph, char *buf, size_t cap)
{
    attr_list_t a;
    int n = 0;
    snprintf(buf, cap, "; its numeric edge attributes:");
    if (!attr_list_init(&a, graph)) {
        const igraph_strvector_t *names = &a.names[IGRAPH_ATTRIBUTE_EDGE];
        for (igraph_integer_t i = 0; i < igraph_strvector_size(names); i++)
            if (VECTOR(a.types[IGRAPH_ATTRIBUTE_EDGE])[i] == IGRAPH_ATTRIBUTE_NUMERIC) {
                size_t len = strlen(buf);
                snprintf(buf + len, cap - len, "%s %s", n++ ? "," : "",
                         igraph_strvector_get(names, i));
            }
        attr_list_destroy(&a);
    }
    if (n == 0)
        snprintf(buf, cap, "; it has no numeric edge attributes");
}

int ag_edge_attribute(float **values, const igraph_t *graph, const ag_nbhd_t *nb,
                      const char *attr, ag_error_t *err)
{
    *values = NULL;
    if (!nb->edge_id)
        return ag_fail(err, AG_EINVAL, "edge attribute '%s': the connectivity is not a graph "
                       "file, so its edges have no attributes", attr);
    ag_i_igraph_enter();
    const int type = attr_type(graph, IGRAPH_ATTRIBUTE_EDGE, attr);
    int rc = AG_OK;
    if (type != IGRAPH_ATTRIBUTE_NUMERIC) {
        char have[256];
        numeric_edge_attrs(graph, have, sizeof have);
        rc = ag_fail(err, AG_EINVAL, "edge attribute '%s' %s%s", attr,
                     type < 0 ? "is not in the graph" : "is not numeric", have);
    }
    /* ids from another graph, or a CSR's slot indices, would read past the edges */
    const int64_t E_graph = igraph_ecount(graph);
    for (int64_t s = 0; !rc && s < nb->n_edges; s++)
        if (nb->edge_id[s] >= E_graph)
            rc = ag_fail(err, AG_EINVAL, "edge attribute '%s': slot %lld names edge %lld, but "
                         "the graph has %lld edge%s; compile the neighbourhoods from this graph",
                         attr, (long long)s, (long long)nb->edge_id[s], (long long)E_graph,
                         AG_PLURAL(E_graph));
    float *v = rc ? NULL : ag_alloc(nb->n_edges, sizeof *v, err, "edge attribute");
    if (!rc && !v)
        rc = ag_alloc_status();
    for (int64_t s = 0; !rc && s < nb->n_edges; s++) {
        /* a self-loop added by ag_nbhd_self_loops has no edge: no bias */
        const double x = nb->edge_id[s] < 0 ? 0.0 : EAN(graph, attr, nb->edge_id[s]);
        if (!isfinite(x) || fabs(x) > 1e30)
            rc = ag_fail(err, AG_EINVAL, "edge attribute '%s' of edge %lld is %g; expected a "
                         "finite number", attr, (long long)nb->edge_id[s], x);
        else
            v[s] = (float)x;
    }
    ag_i_igraph_leave();
    if (rc)
        free(v);
    else
        *values = v;
    return rc;
}
