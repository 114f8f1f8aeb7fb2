/* Where a run's connectivity comes from: a graph file or a pattern. */
#ifndef AG_CLI_SOURCE_H
#define AG_CLI_SOURCE_H

#include "attngraph.h"

typedef struct {
    const char *graph;          /* a graph file, or */
    const char *pattern;        /* a pattern spec (over the graph file or CSR, if one is
                                   given: its words graph and hops:K read it), or */
    const char *csr;            /* "INDPTR.npy,INDICES.npy": in-neighbour CSR, int64 */
    const char *format;         /* graph file format name, or NULL */
    int64_t nodes;              /* pattern size (0: from --tokens or the pattern) */
    int64_t size_hint;          /* size of a pattern nothing else sizes (compare: a graph's) */
    const char *tokens;         /* "nah I d win": sets N and labels */
    const char *labels_file;    /* one label a line */
    ag_self_loops_t self;
    ag_direction_t direction;   /* graph files: --directed / --undirected */
    int64_t max_nodes;
} source_opts_t;

typedef struct {
    char desc[512];             /* e.g. "graphs/x.gml (gml, directed)" or "pattern 'causal'" */
    igraph_t graph;             /* only for graph files */
    int have_graph;
    ag_nbhd_t nb;
    ag_labels_t labels;
    int64_t n_virtual;          /* the pattern's appended nodes: the last of nb's */
} source_t;

/* Opens the source: loads or compiles it, with labels. Returns AG_OK or a
   status with err filled; usage problems are AG_EINVAL with *usage set. */
int source_open(source_t *s, const source_opts_t *o, int *usage, ag_error_t *err);
void source_close(source_t *s);
/* "graph: DESC: N nodes, E edges, M messages" on stdout (edges: graph files). */
void source_print(const source_t *s);

/* Per-edge inputs in s's slots (edges.c), the file named in messages:
   --edge-bias ATTR's values (*bias NULL without attr), and --edge-features
   SPEC: an [edges, F] .npy in the graph's edge order (an undirected edge's two
   messages share its row), or a graph file's numeric edge attributes named
   "a,b,c"; a self-loop --self-loops added gets the mean of its node's other
   in-edges (PyG's fill_value "mean"). F zeroed without spec. */
int edge_bias_load(float **bias, const source_t *s, const char *attr, ag_error_t *err);
int edge_features_load(ag_matrix_t *F, const source_t *s, const char *spec, ag_error_t *err);

/* --csr INDPTR.npy,INDICES.npy split: *indptr a malloc'ed copy of the first
   name (free it), *indices the second (inside csr). Not two names: AG_EINVAL
   with *usage set. */
int csr_paths(const char *csr, char **indptr, const char **indices, int *usage,
              ag_error_t *err);
/* How many of --csr's two names are "-" (standard input); 0 for NULL. */
int csr_stdin_count(const char *csr);

/* The V of the spec's virtual:V (0: none, or a spec that does not parse). */
int64_t pattern_virtual_nodes(const char *spec);
/* 1 if the spec reads a graph (graph, hops:K), or is a connectivity a layer
   ('A|B|...', which runs over a graph). */
int pattern_reads_graph(const char *spec);

/* Labels from "a b c" (whitespace-separated) or a file (one a line). */
int labels_from_tokens(ag_labels_t *labels, const char *tokens, ag_error_t *err);
int labels_from_file(ag_labels_t *labels, const char *path, ag_error_t *err);

#endif
