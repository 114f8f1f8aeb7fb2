/* Private helpers shared by the library's modules. */
#ifndef AG_INTERNAL_H
#define AG_INTERNAL_H

#include <stdio.h>

#include "attngraph.h"

#if defined(__GNUC__)
#define AG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AG_PRINTF(f, a)
#endif

/* "s" unless n is 1, for counts in messages: "%lld node%s", n, AG_PLURAL(n). */
#define AG_PLURAL(n) ((n) == 1 ? "" : "s")

/*
 * Below this much work (about one multiply-add each) a parallel region costs
 * more than it saves: waking threads takes microseconds, and on a loaded
 * machine a spinning thread waits for a whole time slice (300 rounds of a
 * 10-node graph took 0.5 s on 2 threads of a busy machine, 0.01 s on one).
 * Results are the same bits either way.
 */
#define AG_PARALLEL_MIN_WORK ((int64_t)1 << 16)

/* Records a failure in err (if not NULL) and returns status. */
int ag_i_fail(ag_error_t *err, ag_status_t status, const char *fmt, ...) AG_PRINTF(3, 4);

/* malloc of n elements of size bytes each, failing cleanly on overflow. */
void *ag_i_alloc(int64_t n, size_t size, ag_error_t *err, const char *what);
void *ag_i_calloc(int64_t n, size_t size, ag_error_t *err, const char *what);
/* ag_i_alloc aligned to a 64-byte cache line (free with free()): vectors then
   never straddle two lines. */
void *ag_i_alloc_lines(int64_t n, size_t size, ag_error_t *err, const char *what);
/*
 * The status of the last ag_i_alloc, ag_i_calloc or ag_i_alloc_lines that failed on
 * this thread: AG_ELIMIT when the memory budget refused it, else AG_ENOMEM.
 * What a caller returns when one of them gave NULL (never a literal AG_ENOMEM):
 * the status then is the one recorded in err, also when err is NULL.
 */
int ag_i_alloc_status(void);

/* Elements first .. first+n-1 of what ag_random_normal(.., seed, stream, scale)
   draws, into x [n]: a process's rows of the one-process numbers. */
void ag_i_random_normal_range(float *x, int64_t first, int64_t n, uint64_t seed,
                              uint64_t stream, float scale);
/* ag_posenc_sinusoidal's positions for rows lo..lo+n-1 added to X [n, D]. */
void ag_i_posenc_rows(float *X, int64_t lo, int64_t n, int64_t D);

/* Entries first .. first+count-1 of a 1-D integer .npy file (a seek, not the
   whole file) into *values (malloc'ed); *total gets the file's length. */
int ag_i_index_read_npy_part(int64_t **values, int64_t *total, const char *path, int64_t first,
                             int64_t count, ag_error_t *err);

/* Destinations lo..hi-1 of a pattern on N nodes, as ag_nbhd_from_pattern
   compiles them, into nb as 0..hi-lo-1 (sources keep their numbers). */
int ag_i_nbhd_from_pattern_part(ag_nbhd_t *nb, const ag_pattern_t *pattern, int64_t N,
                                int64_t lo, int64_t hi, ag_self_loops_t self, ag_error_t *err);
/* Only the in-degree prefix edge_ptr [N+1] of that pattern (malloc'ed). */
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
 * whole graph's out-runs of sources lo..hi-1.
 */
typedef struct {
    ag_nbhd_t base;            /* destinations dlo.. from 0; sources lo.. from 0 (out-runs) */
    int64_t dlo, dhi;          /* the destinations read: multiples of 8 (or N) */
    ag_nbhd_t view;            /* offset pointers into base: never destroy it */
} ag_i_back_part_t;
int ag_i_back_part_init(ag_i_back_part_t *bp, int64_t N, int64_t E, int64_t lo, int64_t hi,
                        const ag_nbhd_t *own, int64_t n, const int64_t *dst, const int64_t *src,
                        const int64_t *len, ag_error_t *err);
void ag_i_back_part_destroy(ag_i_back_part_t *bp);

/* Are these plain dot-product softmax scores (scaled-dot or dot, any beta; no
   softcap, edge bias or ALiBi), the ones the fused kernels and the MPI layer
   run? Then *scale is their multiplier of q.k (kernels/dispatch.c; the one
   place this is decided). */
int ag_i_plain_scale(const ag_score_t *score, int64_t d, float *scale);

/* Skips a UTF-8 byte-order mark at the start of f (1 if there was one);
   otherwise f goes back to its start (0), or -1 with errno set where it
   cannot seek (a pipe: read such input into memory instead). */
int ag_i_skip_bom(FILE *f);

/* In a sorted a[0..n), the index of the last element <= x (0 if there is none). */
static inline int64_t ag_i_last_at_most(const int64_t *a, int64_t n, int64_t x)
{
    int64_t lo = 0, hi = n;
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/*
 * igraph calls: between ag_i_igraph_enter() and ag_i_igraph_leave() igraph errors
 * are recorded instead of aborting, and warnings are dropped. The host's
 * handlers are restored on leave. Not reentrant, like igraph itself.
 */
void ag_i_igraph_enter(void);
void ag_i_igraph_leave(void);
/* Sets igraph's C attribute table unless one is set: a graph created
   before it has no attribute storage, and setting attributes on it crashes. */
void ag_i_igraph_use_attributes(void);
/* The reason of the last igraph error inside the guard ("" if none). */
const char *ag_i_igraph_reason(void);

#endif
