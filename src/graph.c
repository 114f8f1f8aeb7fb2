/*
 * Graph files -> igraph_t, and node labels.
 *
 * igraph's readers are used for every format but plain edge lists, which we
 * parse ourselves so that errors name the line, and so that a huge node id is
 * refused before igraph sizes a graph by it. Inputs igraph accepts too
 * quietly (GraphML edges to undeclared nodes, duplicate GraphML ids, Pajek
 * vertex counts beyond the limit) are checked before igraph sees them.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/xmlreader.h>

#include "internal.h"

static const struct { const char *name; ag_format_t format; } format_names[] = {
    {"edgelist", AG_FORMAT_EDGELIST}, {"ncol", AG_FORMAT_NCOL}, {"lgl", AG_FORMAT_LGL},
    {"graphml", AG_FORMAT_GRAPHML}, {"gml", AG_FORMAT_GML}, {"pajek", AG_FORMAT_PAJEK},
    {"dot", AG_FORMAT_DOT},
};

static const struct { const char *ext; ag_format_t format; } format_exts[] = {
    {"edges", AG_FORMAT_EDGELIST}, {"el", AG_FORMAT_EDGELIST}, {"txt", AG_FORMAT_EDGELIST},
    {"edgelist", AG_FORMAT_EDGELIST}, {"ncol", AG_FORMAT_NCOL}, {"lgl", AG_FORMAT_LGL},
    {"graphml", AG_FORMAT_GRAPHML}, {"xml", AG_FORMAT_GRAPHML}, {"gml", AG_FORMAT_GML},
    {"net", AG_FORMAT_PAJEK}, {"pajek", AG_FORMAT_PAJEK}, {"dot", AG_FORMAT_DOT},
    {"gv", AG_FORMAT_DOT},
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
                   "graphml, gml, pajek or dot", name);
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
                   "expected .edges/.el/.txt, .ncol, .lgl, .graphml, .gml, .net or .dot "
                   "(or name the format)", path);
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
                         ag_error_t *err)
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
                             "nodes; raise the limit (--max-nodes) if this is intended", path,
                             (long long)lineno, v, (long long)max_nodes);
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
    if (!rc && igraph_create(graph, &edges, max_id + 1, IGRAPH_DIRECTED))
        rc = ag_fail(err, AG_EIGRAPH, "%s: %s", path, ag_igraph_reason());
    igraph_vector_int_destroy(&edges);
    return rc;
}

/* ---- pre-checks for igraph's readers ---- */

/* Pajek declares its vertex count up front; igraph would allocate it blindly. */
static int check_pajek_size(FILE *f, const char *path, int64_t max_nodes, ag_error_t *err)
{
    char buf[256];
    int rc = AG_OK;
    while (fgets(buf, sizeof buf, f)) {
        char *p = buf;
        while (isspace((unsigned char)*p))
            p++;
        if (strncasecmp(p, "*vertices", 9) == 0) {
            long long n = strtoll(p + 9, NULL, 10);
            if (n > max_nodes)
                rc = ag_fail(err, AG_ELIMIT, "%s: *Vertices %lld is more than %lld nodes; raise "
                             "the limit (--max-nodes) if this is intended", path, n,
                             (long long)max_nodes);
            break;
        }
    }
    rewind(f);
    return rc;
}

static int compare_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct {
    char **ids;
    int64_t n, cap;
} strset_t;

static int strset_push(strset_t *s, const char *v)
{
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        char **ids = realloc(s->ids, (size_t)cap * sizeof *ids);
        if (!ids)
            return -1;
        s->ids = ids;
        s->cap = cap;
    }
    if (!(s->ids[s->n] = strdup(v)))
        return -1;
    s->n++;
    return 0;
}

static void strset_free(strset_t *s)
{
    for (int64_t i = 0; i < s->n; i++)
        free(s->ids[i]);
    free(s->ids);
}

/*
 * igraph's GraphML reader silently adds a vertex for an edge to an
 * undeclared node and merges duplicate ids; both are mistakes in the file.
 */
static int check_graphml_ids(const char *path, int64_t max_nodes, ag_error_t *err)
{
    xmlTextReaderPtr reader = xmlReaderForFile(path, NULL,
                                               XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                                               XML_PARSE_NONET);
    if (!reader)
        return ag_fail(err, AG_EFORMAT, "%s: not readable as XML", path);
    strset_t nodes = {0}, ends = {0};
    int rc = AG_OK, ret;
    while ((ret = xmlTextReaderRead(reader)) == 1 && !rc) {
        if (xmlTextReaderNodeType(reader) != XML_READER_TYPE_ELEMENT)
            continue;
        const char *name = (const char *)xmlTextReaderConstLocalName(reader);
        int is_node = strcmp(name, "node") == 0, is_edge = strcmp(name, "edge") == 0;
        if (!is_node && !is_edge)
            continue;
        static const char *const attrs[] = {"id", "source", "target"};
        for (int a = is_node ? 0 : 1; a < (is_node ? 1 : 3); a++) {
            xmlChar *v = xmlTextReaderGetAttribute(reader, (const xmlChar *)attrs[a]);
            if (!v) {
                rc = ag_fail(err, AG_EFORMAT, "%s:%d: <%s> has no '%s' attribute", path,
                             xmlTextReaderGetParserLineNumber(reader), name, attrs[a]);
                break;
            }
            if (strset_push(is_node ? &nodes : &ends, (const char *)v))
                rc = ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
            xmlFree(v);
        }
        if (!rc && nodes.n > max_nodes)
            rc = ag_fail(err, AG_ELIMIT, "%s: more than %lld nodes; raise the limit "
                         "(--max-nodes) if this is intended", path, (long long)max_nodes);
    }
    if (!rc && ret != 0) {
        const xmlError *e = xmlGetLastError();
        const char *why = e && e->message ? e->message : "parse error";
        int len = (int)strcspn(why, "\n");
        rc = ag_fail(err, AG_EFORMAT, "%s:%d: malformed XML: %.*s", path,
                     e ? e->line : xmlTextReaderGetParserLineNumber(reader), len, why);
    }
    xmlFreeTextReader(reader);
    if (!rc) {
        if (nodes.n > 1)
            qsort(nodes.ids, (size_t)nodes.n, sizeof(char *), compare_str);
        for (int64_t i = 1; i < nodes.n && !rc; i++)
            if (strcmp(nodes.ids[i - 1], nodes.ids[i]) == 0)
                rc = ag_fail(err, AG_EFORMAT, "%s: node id '%s' is declared twice", path,
                             nodes.ids[i]);
        for (int64_t i = 0; i < ends.n && !rc; i++)
            if (nodes.n == 0 ||
                !bsearch(&ends.ids[i], nodes.ids, (size_t)nodes.n, sizeof(char *), compare_str))
                rc = ag_fail(err, AG_EFORMAT, "%s: edge %lld refers to node '%s', which is not "
                             "declared", path, (long long)(i / 2), ends.ids[i]);
    }
    strset_free(&nodes);
    strset_free(&ends);
    return rc;
}

/* ---- loading ---- */

static int read_with_igraph(igraph_t *graph, FILE *f, ag_format_t format)
{
    switch (format) {
    case AG_FORMAT_NCOL:
        return igraph_read_graph_ncol(graph, f, NULL, 1, IGRAPH_ADD_WEIGHTS_IF_PRESENT,
                                      IGRAPH_DIRECTED);
    case AG_FORMAT_LGL:
        return igraph_read_graph_lgl(graph, f, 1, IGRAPH_ADD_WEIGHTS_IF_PRESENT, IGRAPH_DIRECTED);
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
    if (format == AG_FORMAT_AUTO && (rc = ag_format_from_path(&format, path, err)))
        return rc;
    if (format == AG_FORMAT_DOT)
        return ag_fail(err, AG_EINVAL, "%s: DOT files can be written, not read; use GraphML, "
                       "GML, Pajek, NCOL, LGL or an edge list", path);
    ag_igraph_use_attributes();

    FILE *f = fopen(path, "rb");
    if (!f)
        return ag_fail(err, AG_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (format == AG_FORMAT_PAJEK)
        rc = check_pajek_size(f, path, max_nodes, err);
    else if (format == AG_FORMAT_GRAPHML)
        rc = check_graphml_ids(path, max_nodes, err);
    if (rc) {
        fclose(f);
        return rc;
    }

    ag_igraph_enter();
    if (format == AG_FORMAT_EDGELIST) {
        rc = read_edgelist(graph, f, path, max_nodes, err);
    } else if (read_with_igraph(graph, f, format)) {
        rc = ag_fail(err, AG_EFORMAT, "%s: not a valid %s file: %s", path,
                     ag_format_name(format), ag_igraph_reason());
    }
    ag_igraph_leave();
    fclose(f);
    if (rc)
        return rc;   /* graph stays uninitialised */

    igraph_integer_t n = igraph_vcount(graph);
    if (n == 0 || n > max_nodes) {
        igraph_destroy(graph);
        if (n == 0)
            return ag_fail(err, AG_EFORMAT, "%s: the graph has no nodes", path);
        return ag_fail(err, AG_ELIMIT, "%s: %" IGRAPH_PRId " nodes is more than the limit of "
                       "%lld (--max-nodes)", path, n, (long long)max_nodes);
    }
    return AG_OK;
}

/* ---- writing ---- */

static igraph_error_t write_with_igraph(const igraph_t *g, FILE *f, ag_format_t format,
                                        int labelled)
{
    switch (format) {
    case AG_FORMAT_EDGELIST: return igraph_write_graph_edgelist(g, f);
    case AG_FORMAT_NCOL: return igraph_write_graph_ncol(g, f, labelled ? "name" : NULL, NULL);
    case AG_FORMAT_LGL: return igraph_write_graph_lgl(g, f, labelled ? "name" : NULL, NULL, 1);
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
    if (format == AG_FORMAT_AUTO && (rc = ag_format_from_path(&format, path, err)))
        return rc;
    if (labels && labels->n != igraph_vcount(graph))
        return ag_fail(err, AG_EINVAL, "%s: %lld labels for %" IGRAPH_PRId " nodes", path,
                       (long long)labels->n, igraph_vcount(graph));
    ag_igraph_use_attributes();
    FILE *f = fopen(path, "wb");
    if (!f)
        return ag_fail(err, AG_EIO, "%s: cannot create: %s", path, strerror(errno));
    ag_igraph_enter();
    igraph_t copy;
    const igraph_t *g = graph;
    if (labels) {
        /* labels go on a copy: the caller's graph stays as it was */
        if (igraph_copy(&copy, graph)) {
            rc = ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
        } else {
            g = &copy;
            for (int64_t i = 0; i < labels->n && !rc; i++) {
                char buf[AG_LABEL_NUMBER_SIZE];
                const char *l = ag_label(labels, i, buf, sizeof buf);
                if (SETVAS(&copy, "label", i, l) || SETVAS(&copy, "name", i, l) ||
                    (format == AG_FORMAT_PAJEK && SETVAS(&copy, "id", i, l)))
                    rc = ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
            }
        }
    }
    if (!rc && write_with_igraph(g, f, format, labels != NULL))
        rc = ag_fail(err, AG_EIGRAPH, "%s: cannot write as %s: %s", path, ag_format_name(format),
                     ag_igraph_reason());
    if (g == &copy)
        igraph_destroy(&copy);
    ag_igraph_leave();
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
    labels->str = NULL;
}

static int labels_alloc(ag_labels_t *labels, int64_t n, ag_error_t *err)
{
    labels->n = n;
    labels->str = ag_calloc(n, sizeof(char *), err, "labels");
    return labels->str ? AG_OK : AG_ENOMEM;
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

/* The type of the vertex or edge attribute `name`, or -1 when the graph has none. */
static int attr_type(const igraph_t *graph, igraph_attribute_elemtype_t elem, const char *name)
{
    if (!igraph_has_attribute_table() || !igraph_cattribute_has_attr(graph, elem, name))
        return -1;
    igraph_strvector_t gn, vn, en;
    igraph_vector_int_t gt, vt, et;
    int type = -1;
    igraph_strvector_init(&gn, 0);
    igraph_strvector_init(&vn, 0);
    igraph_strvector_init(&en, 0);
    igraph_vector_int_init(&gt, 0);
    igraph_vector_int_init(&vt, 0);
    igraph_vector_int_init(&et, 0);
    const igraph_strvector_t *names = elem == IGRAPH_ATTRIBUTE_VERTEX ? &vn : &en;
    const igraph_vector_int_t *types = elem == IGRAPH_ATTRIBUTE_VERTEX ? &vt : &et;
    if (!igraph_cattribute_list(graph, &gn, &gt, &vn, &vt, &en, &et))
        for (igraph_integer_t i = 0; i < igraph_strvector_size(names); i++)
            if (strcmp(igraph_strvector_get(names, i), name) == 0)
                type = (int)VECTOR(*types)[i];
    igraph_strvector_destroy(&gn);
    igraph_strvector_destroy(&vn);
    igraph_strvector_destroy(&en);
    igraph_vector_int_destroy(&gt);
    igraph_vector_int_destroy(&vt);
    igraph_vector_int_destroy(&et);
    return type;
}

int ag_labels_from_graph(ag_labels_t *labels, const igraph_t *graph, ag_error_t *err)
{
    static const char *const names[] = {"label", "name", "id"};
    int64_t n = igraph_vcount(graph);
    ag_igraph_enter();
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
    ag_igraph_leave();
    if (!attr)
        return ag_labels_numbered(labels, n, err);
    if (rc)
        ag_labels_destroy(labels);
    return rc;
}

int ag_edge_attribute(float **values, const igraph_t *graph, const ag_nbhd_t *nb,
                      const char *attr, ag_error_t *err)
{
    *values = NULL;
    if (!nb->edge_id)
        return ag_fail(err, AG_EINVAL, "edge attribute '%s': the connectivity is not a graph "
                       "file, so its edges have no attributes", attr);
    ag_igraph_enter();
    const int type = attr_type(graph, IGRAPH_ATTRIBUTE_EDGE, attr);
    int rc = AG_OK;
    if (type != IGRAPH_ATTRIBUTE_NUMERIC)
        rc = ag_fail(err, AG_EINVAL, "edge attribute '%s' %s", attr,
                     type < 0 ? "is not in the graph" : "is not numeric");
    float *v = rc ? NULL : ag_alloc(nb->n_edges, sizeof *v, err, "edge attribute");
    if (!rc && !v)
        rc = AG_ENOMEM;
    for (int64_t s = 0; !rc && s < nb->n_edges; s++) {
        const double x = EAN(graph, attr, nb->edge_id[s]);
        if (!isfinite(x) || fabs(x) > 1e30)
            rc = ag_fail(err, AG_EINVAL, "edge attribute '%s' of edge %lld is %g; expected a "
                         "finite number", attr, (long long)nb->edge_id[s], x);
        else
            v[s] = (float)x;
    }
    ag_igraph_leave();
    if (rc)
        free(v);
    else
        *values = v;
    return rc;
}
