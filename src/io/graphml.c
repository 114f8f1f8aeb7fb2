/*
 * GraphML checks before igraph reads a file: node ids declared once, edges
 * only between declared nodes, the node count within the limit. igraph's
 * reader accepts the first two mistakes quietly.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/xmlreader.h>

#include "io/graphml.h"
#include "io/io.h"

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

int ag_i_graphml_check_ids(const char *path, const char *mem, size_t mem_len, int64_t max_nodes,
                           ag_error_t *err)
{
    /* libxml2 takes a memory buffer's length as an int: more would be cut short */
    if (mem && mem_len > INT_MAX)
        return ag_fail(err, AG_ELIMIT, "%s: %zu bytes of GraphML read from a pipe or standard "
                       "input; at most %d can be checked in memory: save it to a file and give "
                       "its name", path, mem_len, INT_MAX);
    const int options = XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NONET;
    xmlTextReaderPtr reader = mem ? xmlReaderForMemory(mem, (int)mem_len, NULL, NULL, options)
                                  : xmlReaderForFile(path, NULL, options);
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
            rc = ag_fail(err, AG_ELIMIT, "%s: more than %lld node%s; raise the limit "
                         "(max_nodes, the tool's --max-nodes) if this is intended", path, (long long)max_nodes,
                         AG_PLURAL(max_nodes));
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
