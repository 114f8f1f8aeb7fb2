/*
 * graph/: who sends to whom: neighbourhoods in CSR form (nbhd.c, their
 * transpose and the backward's parts), the pattern language (pattern_parse.c,
 * pattern.c) and interval lists. The one header of graph/ that other folders
 * include.
 */
#ifndef AG_GRAPH_H
#define AG_GRAPH_H

#include "base/base.h"
#include "graph/intervals.h"

/* Destinations lo..hi-1 of a pattern on N nodes, as ag_nbhd_from_pattern
   compiles them, into nb as 0..hi-lo-1 (sources keep their numbers). */
AG_INTERNAL
int ag_i_nbhd_from_pattern_part(ag_nbhd_t *nb, const ag_pattern_t *pattern, int64_t N,
                                int64_t lo, int64_t hi, ag_self_loops_t self, ag_error_t *err);
/* Only the in-degree prefix edge_ptr [N+1] of that pattern (malloc'ed). */
AG_INTERNAL
int ag_i_pattern_edge_ptr(int64_t **edge_ptr, const ag_pattern_t *pattern, int64_t N,
                          ag_self_loops_t self, ag_error_t *err);

/*
 * What the backward of the part lo..hi-1 reads of a graph of N nodes and E
 * messages (nbhd_back.c): own holds the part's destinations (from 0, sources
 * global, as ag_mpi_part_t's nb); dst, src, len [n] the in-runs of the other
 * destinations that read the part's sources, clipped to sources lo..hi-1,
 * destinations ascending (each one's runs in its own order). view is
 * ag_i_backward_part's nb for qlo..qhi = klo..khi = lo..hi: indexed by global
 * node, destinations dlo..dhi-1 (own ones whole, others clipped), the
 * whole graph's out-runs of sources lo..hi-1; its slots (edge_ptr, run_slot)
 * number the messages of base from 0, destination by destination, each one's
 * runs in order.
 */
typedef struct {
    ag_nbhd_t base;            /* destinations dlo.. from 0; sources lo.. from 0 (out-runs) */
    int64_t dlo, dhi;          /* the destinations read: multiples of 8 (or N) */
    ag_nbhd_t view;            /* offset pointers into base: never destroy it */
} ag_i_back_part_t;
AG_INTERNAL
int ag_i_back_part_init(ag_i_back_part_t *bp, int64_t N, int64_t E, int64_t lo, int64_t hi,
                        const ag_nbhd_t *own, int64_t n, const int64_t *dst, const int64_t *src,
                        const int64_t *len, ag_error_t *err);
AG_INTERNAL
void ag_i_back_part_destroy(ag_i_back_part_t *bp);

/* ---- one destination at a time (pattern.c): the compiler and the planner ---- */

/* Scratch for pattern_sources. */
typedef struct {
    ivl_list_t self_set, others, tmp;
} pattern_eval_t;

/* Refuses N < 1, N too large, and sizes or node ids the pattern contradicts. */
int pattern_check(const ag_pattern_t *pattern, int64_t N, ag_error_t *err);
/* The sources of destination i on N nodes (pattern_check passed) with `self`
   applied, as a normalised interval list owned by the pattern or ev and valid
   until the next call; NULL when out of memory. Not reentrant: the pattern
   holds its evaluation buffers. */
const ivl_list_t *pattern_sources(const ag_pattern_t *pattern, int64_t N, ag_self_loops_t self,
                                  int64_t i, pattern_eval_t *ev);
void pattern_eval_free(pattern_eval_t *ev);

#endif
