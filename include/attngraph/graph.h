/*
 * attngraph: graphs as arrays: .npy files, node labels, compiled
 * neighbourhoods (CSR) and their self-loops.
 * A part of <attngraph/core.h>, which includes them all and states the
 * conventions.
 */
#ifndef ATTNGRAPH_GRAPH_H
#define ATTNGRAPH_GRAPH_H

#include "attngraph/base.h"

AG_BEGIN_DECLS

/* ---------------------------------------------------------------- .npy */

typedef enum {
    AG_DTYPE_F32, AG_DTYPE_F64,
    AG_DTYPE_I8, AG_DTYPE_I16, AG_DTYPE_I32, AG_DTYPE_I64,
    AG_DTYPE_U8, AG_DTYPE_U16, AG_DTYPE_U32, AG_DTYPE_U64,
    AG_DTYPE_BOOL
} ag_dtype_t;

#define AG_NPY_MAX_DIMS 4

/* A 2-D float32 matrix, row-major. */
typedef struct {
    int64_t rows, cols;
    float *data;          /* [rows, cols], owned; free with ag_matrix_destroy */
} ag_matrix_t;

/* A float32 array of 1 to AG_NPY_MAX_DIMS dimensions, row-major. */
typedef struct {
    int ndim;
    int64_t shape[AG_NPY_MAX_DIMS];
    float *data;          /* owned; free with ag_array_destroy */
} ag_array_t;

/* Reads a .npy array of any rank with the conversions and checks of
   ag_matrix_read_npy (a non-finite value is named by its index). */
int ag_array_read_npy(ag_array_t *a, const char *path, ag_error_t *err);
void ag_array_destroy(ag_array_t *a);

/*
 * Reads a 2-D .npy file into *m (uninitialised; initialised on success).
 * Accepts float32/float64 and integer/bool dtypes of either byte order, in C or
 * Fortran order; values are converted to float32 in row-major layout. A value
 * that does not fit float32 (|x| > FLT_MAX), NaN or Inf is refused, naming its
 * row and column. Anything else (other dtypes, other ranks, truncated data) is
 * refused with a message saying what was found. The path "-" reads standard
 * input (in one pass; so do ag_array_read_npy and ag_index_read_npy).
 */
int ag_matrix_read_npy(ag_matrix_t *m, const char *path, ag_error_t *err);

/*
 * Reads a 1-D integer .npy file (any integer dtype, either byte order) into
 * *values, a malloc'ed int64_t array of *n elements (free() it).
 */
int ag_index_read_npy(int64_t **values, int64_t *n, const char *path, ag_error_t *err);

/* An integer .npy array of any rank (any integer dtype, either byte order, C
   or Fortran order; an .npz member too) as int64 *values (malloc'ed; free()
   it) of shape[0..*ndim), row-major. */
int ag_ints_read_npy(int64_t **values, int *ndim, int64_t shape[AG_NPY_MAX_DIMS],
                     const char *path, ag_error_t *err);

/* Writes data [rows, cols] as a little-endian float32 C-order .npy file. */
int ag_npy_write_f32(const char *path, const float *data, int64_t rows, int64_t cols,
                     ag_error_t *err);
/* The same for an array of ndim (1..AG_NPY_MAX_DIMS) dimensions. */
int ag_npy_write_f32_nd(const char *path, const float *data, int ndim, const int64_t *shape,
                        ag_error_t *err);
/* Writes values [n] as a 1-D little-endian int64 .npy file (ag_index_read_npy reads it). */
int ag_npy_write_i64(const char *path, const int64_t *values, int64_t n, ag_error_t *err);
/* The same for an array of ndim (1..AG_NPY_MAX_DIMS) dimensions (ag_ints_read_npy reads it). */
int ag_npy_write_i64_nd(const char *path, const int64_t *values, int ndim, const int64_t *shape,
                        ag_error_t *err);

/* Initialises m (uninitialised) as a zero-filled matrix [rows, cols]. */
int ag_matrix_init(ag_matrix_t *m, int64_t rows, int64_t cols, ag_error_t *err);
void ag_matrix_destroy(ag_matrix_t *m);

/* Fails (naming what, the row and the column) unless every value is finite. */
int ag_check_finite(const char *what, const float *data, int64_t rows, int64_t cols,
                    ag_error_t *err);

/* ---------------------------------------------------------------- labels */

/* Node labels: one UTF-8 string per node. */
typedef struct {
    int64_t n;
    char **str;           /* [n], or NULL: node i is labelled by its number (no strings
                             made: a pattern or CSR of 10 million nodes prints 20) */
} ag_labels_t;

/* Room for a node number as text (ag_label's buf). */
#define AG_LABEL_NUMBER_SIZE 24
/* Node i's label: labels->str[i], or i written into buf [size] when the labels
   are numbers (str NULL). */
const char *ag_label(const ag_labels_t *labels, int64_t i, char *buf, size_t size);

/* Labels "0", "1", ... "n-1". */
int ag_labels_numbered(ag_labels_t *labels, int64_t n, ag_error_t *err);
void ag_labels_destroy(ag_labels_t *labels);

/* ------------------------------------------------ compiled neighbourhoods */

/*
 * The kernel's view of the graph: for each destination i, its in-edges as
 * runs of consecutive sources, sources ascending (a repeated source of a
 * multi-edge starts a new run). Edge slots are numbered destination by
 * destination in that order: slot s of destination i lies in
 * edge_ptr[i] .. edge_ptr[i+1]-1.
 */
typedef struct {
    int64_t n_nodes;      /* N */
    int64_t n_edges;      /* E: messages (slots) */
    int64_t n_runs;       /* R */
    int64_t *edge_ptr;    /* [N+1] first slot of each destination */
    int64_t *run_ptr;     /* [N+1] first run of each destination */
    int64_t *run_src;     /* [R]   first source of each run */
    int64_t *run_len;     /* [R]   sources in each run (>= 1) */
    int64_t *edge_id;     /* [E]   igraph edge id of each slot (-1: a self-loop added by
                                   ag_nbhd_self_loops or ag_nbhd_from_edges; for a CSR
                                   that ag_nbhd_self_loops changed, the slot's index in the
                                   CSR given; for ag_nbhd_from_edges, the edge's column),
                                   or NULL */
    /* The transpose, for the backward (ag_nbhd_transpose; NULL until then): the
       out-edges of each source j as runs of consecutive destinations, in
       out_ptr[j] .. out_ptr[j+1]-1. A source's runs come in layers: layer 0
       holds its first message to each destination, ascending; layer k >= 1 its
       (k+1)-th message to a destination of a multi-edge. */
    int64_t n_out_runs;   /* R' */
    int64_t *out_ptr;     /* [N+1] first out-run of each source */
    int64_t *out_dst;     /* [R']  first destination of each out-run */
    int64_t *out_len;     /* [R']  destinations in each out-run (>= 1) */
    int64_t *out_nth;     /* [R']  its layer: the message j -> i is the (nth+1)-th from j to i */
    int64_t *run_slot;    /* [R]   first slot of each (in-)run */
} ag_nbhd_t;

/*
 * Builds nb from a CSR of in-neighbours: indptr [N+1] (non-decreasing, from 0
 * to E), indices [E] (sources in 0..N-1, ascending within each destination).
 * Validated; edge_id is NULL.
 */
int ag_nbhd_from_csr(ag_nbhd_t *nb, int64_t n_nodes, const int64_t *indptr,
                     const int64_t *indices, ag_error_t *err);

void ag_nbhd_destroy(ag_nbhd_t *nb);

typedef enum {
    AG_SELF_KEEP = 0,     /* self edges as the pattern or graph says */
    AG_SELF_ON,           /* existing self edges kept; one added where a node has none */
    AG_SELF_OFF,          /* no node attends to itself */
    AG_SELF_REPLACE       /* every self edge removed, then one added per node (PyG) */
} ag_self_loops_t;

/*
 * Applies self to compiled neighbourhoods nb (initialised), in place, for
 * graph files and CSR (patterns take it in ag_nbhd_from_pattern):
 * AG_SELF_KEEP does nothing. AG_SELF_OFF removes every self edge.
 * AG_SELF_ON gives every node that has no self edge one message from itself
 * and keeps the self edges there are (two loops on a node stay two messages):
 * PyG's add_self_loops only on a graph without self-loops. AG_SELF_REPLACE
 * removes every self edge and adds exactly one per node: PyG's
 * remove_self_loops then add_self_loops, what GATConv, GATv2Conv and
 * TransformerConv do with add_self_loops=True. An added loop's slot has
 * edge_id -1 (it is no igraph edge) and lies in its ascending place among
 * the node's sources (the kernels read sources ascending); ag_edge_order puts
 * the added loops after every other edge, by node, as PyG appends them. Runs
 * are rebuilt; on failure nb is unchanged; an unknown self is AG_EINVAL.
 * Without edge ids (CSR), ON, OFF and REPLACE give nb edge ids: each kept
 * slot's index in the CSR given, so ag_edge_order keeps the CSR's edge order
 * with the added loops last. Time and memory O(N + E).
 */
int ag_nbhd_self_loops(ag_nbhd_t *nb, ag_self_loops_t self, ag_error_t *err);

/*
 * Builds nb (uninitialised) from E messages src[k] -> dst[k] in any order: PyG's
 * edge_index, row 0 the sources, row 1 the destinations. Bipartite graphs too:
 * sources in 0..n_src-1, destinations in 0..n_dst-1, nb has max(n_src, n_dst)
 * nodes (destinations from n_dst on receive nothing); a message outside them
 * is refused naming its column and node. Multi-edges and self-loops are kept,
 * then self is applied as ag_nbhd_self_loops applies it, to nodes
 * 0..min(n_src, n_dst)-1 only (PyG adds loops to the nodes that are both
 * sources and destinations). Each slot's edge id is its column k (-1: an added
 * loop). order (NULL: not wanted), of room for E + min(n_src, n_dst), receives
 * the slot of every message in the graph's edge order: the columns kept,
 * ascending (AG_SELF_OFF and AG_SELF_REPLACE drop the loops given), then the
 * added loops by node: what ag_edge_order gives, and what PyG's
 * remove_self_loops and add_self_loops leave. Time and memory O(N + E): two
 * stable counting sorts, no comparison sort.
 */
int ag_nbhd_from_edges(ag_nbhd_t *nb, int64_t n_src, int64_t n_dst, const int64_t *src,
                       const int64_t *dst, int64_t E, ag_self_loops_t self, int64_t *order,
                       ag_error_t *err);

/* Writes the source of every slot of destinations lo..hi-1 into src
   [edge_ptr[hi] - edge_ptr[lo]]. */
void ag_nbhd_sources(const ag_nbhd_t *nb, int64_t lo, int64_t hi, int64_t *src);

AG_END_DECLS

#endif /* ATTNGRAPH_GRAPH_H */
