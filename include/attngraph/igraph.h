/*
 * attngraph — graph files through igraph: loading, writing, labels from
 * attributes, and compiling an igraph_t into neighbourhoods. Includes
 * <igraph.h> (pkg-config --cflags attngraph says where it lives).
 */
#ifndef ATTNGRAPH_IGRAPH_H
#define ATTNGRAPH_IGRAPH_H

#include <igraph.h>
#include "attngraph/core.h"

AG_BEGIN_DECLS

/* ---------------------------------------------------------------- graphs */

typedef enum {
    AG_FORMAT_AUTO = 0,   /* from the file name's extension */
    AG_FORMAT_EDGELIST,   /* .edges .el .txt .edgelist: "src dst" per line, 0-based */
    AG_FORMAT_NCOL,       /* .ncol: "name name [weight]" per line */
    AG_FORMAT_LGL,        /* .lgl */
    AG_FORMAT_GRAPHML,    /* .graphml .xml */
    AG_FORMAT_GML,        /* .gml */
    AG_FORMAT_PAJEK,      /* .net .pajek */
    AG_FORMAT_DOT,        /* .dot .gv (writing only) */
    AG_FORMAT_NPZ         /* .npz (reading only): `edges` [E, 2] (undirected unless told)
                             or `edge_index` [2, E] (directed unless told); the nodes are
                             node_features' or node_labels' rows */
} ag_format_t;

/* "edgelist", "ncol", "lgl", "graphml", "gml", "pajek" -> format. */
int ag_format_parse(ag_format_t *format, const char *name, ag_error_t *err);
/* Format of a path from its extension. */
int ag_format_from_path(ag_format_t *format, const char *path, ag_error_t *err);
const char *ag_format_name(ag_format_t format);

#define AG_DEFAULT_MAX_NODES ((int64_t)20000000)

/* How the edges of a file are read. */
typedef enum {
    AG_EDGES_AUTO = 0,    /* edge lists, NCOL, LGL: directed; GraphML, GML, Pajek: as they say */
    AG_EDGES_DIRECTED,    /* u v is the message u -> v */
    AG_EDGES_UNDIRECTED   /* u v is two messages, u -> v and v -> u (SNAP, KONECT) */
} ag_direction_t;

typedef struct {
    ag_format_t format;   /* AG_FORMAT_AUTO: from the extension */
    int64_t max_nodes;    /* refuse larger graphs before allocating; 0: AG_DEFAULT_MAX_NODES */
    ag_direction_t direction;
} ag_load_opts_t;

/* The format from the extension, the default node limit, each format's direction. */
#define AG_LOAD_OPTS_INIT {0}

/*
 * Loads a graph file into graph, a pointer to an *uninitialised* igraph_t
 * (initialised on success, left uninitialised on failure). Attributes are
 * kept (this sets igraph's attribute table to igraph_cattribute_table when
 * none is set). Edge lists, NCOL and LGL are read as opts->direction says
 * (directed unless AG_EDGES_UNDIRECTED). GraphML, GML and Pajek state it
 * themselves (edgedefault, `directed 1`, *Arcs or *Edges): a direction that
 * agrees is accepted, one that contradicts the file is refused (AG_EINVAL),
 * never converted. A UTF-8 byte-order mark at the start is skipped. Graphs
 * with no nodes, more than max_nodes nodes, GraphML edges to undeclared nodes
 * and duplicate GraphML node ids are refused.
 * The path "-" reads standard input, whole into memory first; its format must
 * then be given (AG_FORMAT_AUTO is refused: there is no extension).
 * Time: O(N + E) plus igraph's reader.
 */
int ag_graph_load(igraph_t *graph, const char *path, const ag_load_opts_t *opts,
                  ag_error_t *err);

/*
 * Labels from the vertex attribute `label`, else `name`, else `id` (strings,
 * or numbers printed with %g), else the node number. labels is uninitialised.
 * (GraphML node ids n0, n1, ... in order are not labels: ag_graph_load drops
 * them, so such a file is numbered 0, 1, ... like the other formats.)
 */
int ag_labels_from_graph(ag_labels_t *labels, const igraph_t *graph, ag_error_t *err);

/*
 * Writes graph to path in format (AG_FORMAT_AUTO: from the extension; DOT
 * is write-only). Labels, if not NULL, are written as the vertex attributes
 * `label` and `name` (`id` too for Pajek), so every reader finds them; the
 * graph must then have been created while igraph's attribute table was set
 * (as every graph this library makes is). GraphML gets no `id` vertex
 * attribute (its node ids are n0, n1, ...; a string `id` without labels, label
 * or name is written as `name`), so python-igraph reads it without a warning.
 */
int ag_graph_write(const igraph_t *graph, const char *path, ag_format_t format,
                   const ag_labels_t *labels, ag_error_t *err);

/* ------------------------------------- compiled neighbourhoods from igraph */

/*
 * Compiles graph into nb (uninitialised). Undirected edges give a message
 * each way (a self-loop one); multi-edges one message each. This is the only
 * place that walks igraph adjacency. Time and memory O(N + E).
 */
int ag_nbhd_from_graph(ag_nbhd_t *nb, const igraph_t *graph, ag_error_t *err);

/*
 * Materialises nb as a directed igraph graph (uninitialised on entry) whose
 * edge k is message k in the order of ag_edge_order. Refuses (AG_ELIMIT) more
 * than max_edges edges (0: no limit): igraph takes ~32 bytes an edge.
 */
int ag_graph_from_nbhd(igraph_t *graph, const ag_nbhd_t *nb, int64_t max_edges,
                       ag_error_t *err);

/*
 * The numeric edge attribute `attr` of graph for every slot of nb (compiled
 * from that graph): values[s] is the attribute of edge nb->edge_id[s]. A
 * malloc'ed array of nb->n_edges floats. A self-loop added by
 * ag_nbhd_self_loops (edge_id -1) gets 0: it adds nothing to its score. Missing,
 * non-numeric and non-finite attributes are refused; a missing one's message
 * lists the graph's numeric edge attributes.
 */
int ag_edge_attribute(float **values, const igraph_t *graph, const ag_nbhd_t *nb,
                      const char *attr, ag_error_t *err);

AG_END_DECLS

#endif /* ATTNGRAPH_IGRAPH_H */
