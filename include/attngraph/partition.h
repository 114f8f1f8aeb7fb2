/*
 * attngraph — splitting the destinations of a graph over P processes.
 *
 * No igraph, no MPI: plain arrays over compiled neighbourhoods (ag_nbhd_t) or
 * a CSR's indptr. A process that owns a part computes its destinations' rows;
 * the K and V rows of the sources it reads but does not own are its halo,
 * received from their owners every round. The MPI layer and `attngraph plan`
 * are built on these functions. Everything here is deterministic: the same
 * input gives the same parts on every machine and every thread count.
 *
 * Work of a destination i: its in-edges (messages) plus a per-node constant
 * (node_work, >= 1) standing for its share of the projections. The plain
 * functions use AG_PARTITION_NODE_WORK.
 */
#ifndef ATTNGRAPH_PARTITION_H
#define ATTNGRAPH_PARTITION_H

#include "attngraph/core.h"

AG_BEGIN_DECLS

/* The node_work of ag_partition_contiguous and of METIS's vertex weights. */
#define AG_PARTITION_NODE_WORK 1

/* Destinations 0..N-1 split into P parts; every node belongs to one part. */
typedef struct {
    int n_parts;            /* P */
    int64_t n_nodes;        /* N */
    int contiguous;         /* 1: part p owns destinations first[p] .. first[p+1]-1 */
    int64_t *first;         /* [P+1] when contiguous, else NULL */
    int32_t *owner;         /* [N] the part of each node */
    int64_t *part_ptr;      /* [P+1] */
    int64_t *part_nodes;    /* [N] the nodes of part p, ascending, in
                               part_ptr[p] .. part_ptr[p+1]-1 */
} ag_partition_t;

/* The most parts any function here accepts (owner is int32_t). */
#define AG_PARTITION_MAX_PARTS (1 << 24)

/*
 * The boundaries of P contiguous parts balanced by work, without any [N]
 * array: first [P+1] gets 0 = first[0] <= first[1] <= ... <= first[P] = N.
 * indptr [N+1] is non-decreasing (nb->edge_ptr, or a CSR's indptr: only its
 * differences count); work_i = indptr[i+1] - indptr[i] + node_work. Each
 * boundary is the node whose work prefix is nearest to p/P of the total (the
 * lower one on a tie), so every part's work lies within one node's work (the
 * largest work_i) of the mean W/P, and parts are empty only where a single
 * node's work exceeds a part's share (always some when P > N).
 * Time O(N) to check indptr, then O(P log N).
 */
int ag_partition_bounds(int64_t *first, int n_parts, int64_t n_nodes, const int64_t *indptr,
                        int64_t node_work, ag_error_t *err);

/* Contiguous parts from ag_partition_bounds over indptr [N+1] (pt
   uninitialised; initialised on success, zeroed on failure). */
int ag_partition_from_indptr(ag_partition_t *pt, int64_t n_nodes, const int64_t *indptr,
                             int n_parts, int64_t node_work, ag_error_t *err);

/* Contiguous parts balanced by work = in-edges + AG_PARTITION_NODE_WORK. */
int ag_partition_contiguous(ag_partition_t *pt, const ag_nbhd_t *nb, int n_parts,
                            ag_error_t *err);

/* Parts given by owner [N] (each in 0..P-1; copied). contiguous and first
   are set when every part's nodes are consecutive and in part order. */
int ag_partition_from_owner(ag_partition_t *pt, int64_t n_nodes, const int32_t *owner,
                            int n_parts, ag_error_t *err);

/*
 * METIS k-way (METIS_PartGraphKway) on the symmetrised graph of nb (an edge
 * u -> v links u and v; self-loops dropped; multi-edges merged into one edge
 * of weight their count), vertex weights work_i = in-edges + 1, edge weights
 * the message counts, seeded with seed (0 to INT32_MAX): deterministic; where
 * k-way gives up (METIS_ERROR), recursive bisection. P = 1 needs no METIS; P >= N
 * gives each node its own part. METIS counts in 32 bits: N + E must stay below
 * 2^30 (AG_ELIMIT). Where the library was built without METIS (NO_METIS=1),
 * returns AG_EINVAL saying so, except for P = 1.
 */
int ag_partition_metis(ag_partition_t *pt, const ag_nbhd_t *nb, int n_parts, int64_t seed,
                       ag_error_t *err);

/* 1 when this build of the library has METIS. */
int ag_partition_has_metis(void);

void ag_partition_destroy(ag_partition_t *pt);

/* What one part holds and reads. */
typedef struct {
    int64_t n_dst;          /* destinations it owns */
    int64_t n_edges;        /* their in-edges (messages) */
    int64_t work;           /* n_edges + n_dst * node_work */
    int64_t n_halo;         /* distinct sources read that other parts own (halo rows) */
    int64_t n_cut;          /* in-edges whose source another part owns */
} ag_part_stats_t;

/*
 * The halo of part `part`: the distinct sources that its destinations read
 * and another part owns, ascending, into *rows (malloc'ed, free() it; NULL
 * when empty) and *n_rows. Runs of consecutive sources are merged as
 * intervals, so a causal pattern's halo costs O(runs), not O(edges).
 */
int ag_partition_halo(const ag_partition_t *pt, const ag_nbhd_t *nb, int part, int64_t **rows,
                      int64_t *n_rows, ag_error_t *err);

/*
 * stats [P]: every part's counts (work with node_work = AG_PARTITION_NODE_WORK),
 * without keeping the halo lists. The edge cut is the sum of n_cut: the
 * messages whose source and destination lie in different parts.
 */
int ag_partition_stats(const ag_partition_t *pt, const ag_nbhd_t *nb, ag_part_stats_t *stats,
                       ag_error_t *err);

/* ag_partition_pattern's `sample`: count every destination, or choose. */
#define AG_SAMPLE_EXACT (-1)
#define AG_SAMPLE_AUTO 0

/*
 * Contiguous parts of a pattern on N nodes and their counts, without
 * compiling it (no [E] array, nor [N] ones when sampled): for a graph far too
 * large to hold, e.g. random:16 on 1e9 nodes (1.6e10 messages). first [P+1]
 * gets the boundaries, stats [P] the counts (NULL: the boundaries alone,
 * which a process of an MPI run needs to build only its own part).
 *
 * sample AG_SAMPLE_EXACT: every destination is evaluated twice (its in-degree
 * for the boundaries, then its sources part by part): first and stats are
 * those of ag_partition_contiguous and ag_partition_stats on the compiled
 * pattern; time O(N + runs), memory 8N bytes + N/8.
 * sample > 0: boundaries from the in-degrees of 65,536 evenly spaced
 * destinations; per part, its first and last 64 destinations are evaluated
 * and `sample` others evenly spread. n_dst is exact; n_edges, work and n_cut
 * are the sample's means scaled up; n_halo counts the union of the evaluated
 * runs of two or more sources (exact for causal, window and complete
 * patterns, a lower bound otherwise) plus the single sources read, those not
 * evaluated being extrapolated as if spread uniformly over the rows not
 * counted yet, at the rate the sample found new ones (exact in expectation
 * for random:k). Memory N/8 bytes plus the evaluated runs.
 * AG_SAMPLE_AUTO: exact when that costs less than about 1e8 interval steps
 * (N <= 5e7), else 1,024 per part and 64 at each end (beyond 2,000 parts,
 * fewer: about 2e6 destinations evaluated in all).
 * *exact (may be NULL) gets 1 when every count is exact.
 */
int ag_partition_pattern(int64_t *first, ag_part_stats_t *stats, const ag_pattern_t *pattern,
                         int64_t n_nodes, ag_self_loops_t self, int n_parts, int64_t sample,
                         int *exact, ag_error_t *err);

/* Largest part work over the mean (1 = perfect balance), from stats [P]. */
double ag_partition_imbalance(const ag_part_stats_t *stats, int n_parts);

AG_END_DECLS

#endif /* ATTNGRAPH_PARTITION_H */
