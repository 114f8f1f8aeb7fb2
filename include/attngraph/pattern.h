/*
 * attngraph: the pattern language: masks such as causal, window:64 or
 * bigbird:64,1,1,1, compiled straight into neighbourhoods.
 * A part of <attngraph/core.h>, which includes them all and states the
 * conventions.
 */
#ifndef ATTNGRAPH_PATTERN_H
#define ATTNGRAPH_PATTERN_H

#include "attngraph/graph.h"

AG_BEGIN_DECLS

/* ---------------------------------------------------------------- patterns */

/*
 * A parsed connectivity pattern, e.g. "causal", "window:3", "docs:5,3&window:2",
 * "causal&!strided:4+global:1" (docs/patterns.md defines every atom).
 * i is the destination (query), j the source (key).
 */
typedef struct ag_pattern ag_pattern_t;

/* Parses spec into *pattern (free with ag_pattern_free). Errors name the
   offending part of the spec. */
int ag_pattern_parse(ag_pattern_t **pattern, const char *spec, ag_error_t *err);
void ag_pattern_free(ag_pattern_t *pattern);
const char *ag_pattern_spec(const ag_pattern_t *pattern);
/* The node count the pattern implies (blocks, docs, cross, grid, axial, a
   bound graph), virtual nodes included, or 0. */
int64_t ag_pattern_size(const ag_pattern_t *pattern);
/* V of the pattern's virtual:V: the last V of its N nodes are appended ones,
   each sending to and receiving from every node; every other word lives on
   the first N - V (0: no virtual node). */
int64_t ag_pattern_virtual(const ag_pattern_t *pattern);

/*
 * A loaded graph as an operand: the words graph (its edges) and hops:K (its
 * K-hop neighbourhood) read the graph bound here, e.g. "graph+virtual:1",
 * "graph+expander:3", "hops:2&!self". The pattern keeps the pointer (graph
 * must outlive every compile; NULL unbinds); the graph's node count sizes the
 * pattern (before its virtual nodes). Only its runs are read: its self-loops
 * and multi-edges are what it has (a pattern merges repeats).
 */
int ag_pattern_bind_graph(ag_pattern_t *pattern, const ag_nbhd_t *graph, ag_error_t *err);
/* 1 if the pattern has graph or hops:K (compiling it needs a bound graph). */
int ag_pattern_needs_graph(const ag_pattern_t *pattern);

/*
 * Compiles the pattern on N nodes straight into runs (nb uninitialised; its
 * edge_id is NULL: edge k is slot k). No igraph edge is made: memory is
 * O(N + runs), so causal on 65,536 nodes (2.1e9 edges) takes 65,536 runs.
 * Time O(N + runs) for interval atoms; random and bigbird sample per node.
 * self as in ag_nbhd_self_loops; a pattern gives each destination a set of
 * sources (never a source twice), so AG_SELF_ON and AG_SELF_REPLACE both
 * give every node exactly one self edge, in its slot like the pattern's own
 * (edge_id stays NULL: no slot is marked added).
 */
int ag_nbhd_from_pattern(ag_nbhd_t *nb, const ag_pattern_t *pattern, int64_t N,
                         ag_self_loops_t self, ag_error_t *err);

/* The same graph of N nodes with only destinations lo..hi-1's messages (the
   others have none), compiled in time O(N + their runs): a part of a pattern
   too large to compile whole, or a sample of it in its real surroundings
   (attngraph plan times the kernel on one). Needs 0 <= lo <= hi <= N. */
int ag_nbhd_from_pattern_rows(ag_nbhd_t *nb, const ag_pattern_t *pattern, int64_t N, int64_t lo,
                              int64_t hi, ag_self_loops_t self, ag_error_t *err);

AG_END_DECLS

#endif /* ATTNGRAPH_PATTERN_H */
