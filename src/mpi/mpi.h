/*
 * mpi/: the MPI layer (libattngraph_mpi): parts, the halo exchange, the ring,
 * the rounds and training on several processes. The one header of mpi/ that
 * other folders (mpi/cli/) include; the public functions are in
 * attngraph/mpi.h.
 */
#ifndef AG_MPI_LAYER_H
#define AG_MPI_LAYER_H

#include "attngraph/mpi.h"
#include "base/base.h"

/*
 * The rows of K and V a process holds during a round: a window of global rows
 * [wlo, whi) (its own rows and every source its destinations read), each row
 * H*d floats; rows of the window that nobody sends stay zero (the tiled
 * kernel may read them under a mask).
 */
typedef struct {
    int ranks;
    int64_t HD;
    int64_t wlo, whi;
    float *K, *V;               /* [whi - wlo, HD] */
    /* the halo: rows this process receives, and sends, per peer */
    int *recv_count, *recv_displ;   /* [P] in rows */
    int *send_count, *send_displ;   /* [P] in rows */
    int64_t *recv_rows;         /* [sum recv_count] global rows, ascending per peer */
    int64_t *send_rows;         /* [sum send_count] own global rows the peers asked for */
    int64_t n_recv, n_send;
    /* per peer, the K and V rows sent and received, as datatypes of absolute
       addresses in the window (no packing, no buffers): MPI_Alltoallw */
    MPI_Datatype *send_type, *recv_type;   /* [P] */
    int *send_n, *recv_n, *zeros;           /* [P] counts (1 or 0) and displacements */
} ag_halo_t;

/* The window of rows a process reads: its own and every source of its
   destinations, widened to groups of 8 rows (the tiled kernel's blocks). */
void ag_i_halo_window(const ag_mpi_part_t *part, int64_t *wlo, int64_t *whi);

/* Plans the halo of part for rows of HD floats: every process tells the owners
   which of their rows it reads. Collective; agrees on failure. */
int ag_i_halo_plan(ag_halo_t *h, MPI_Comm comm, const ag_mpi_part_t *part, int64_t HD,
                   ag_error_t *err);
/* Sends the own rows (already in the window) that the peers read and receives
   the rows this process reads, into the window. */
void ag_i_halo_exchange(ag_halo_t *h, MPI_Comm comm, int64_t HD, ag_mpi_stats_t *stats);
void ag_i_halo_destroy(ag_halo_t *h);

/* Halos for the row widths of layers of their own shapes: one plan per
   distinct H*d of the layers rounds 1..rounds use (the same window each). */
typedef struct {
    int n;
    int64_t *HD;          /* [n] */
    ag_halo_t *h;         /* [n] */
} ag_halos_t;

/* Collective; agrees on failure (hs then destroyed). */
int ag_i_halos_plan(ag_halos_t *hs, MPI_Comm comm, const ag_mpi_part_t *part,
                    const ag_weights_t *layers, int n_layers, int rounds, ag_error_t *err);
/* The halo of rows of HD floats (planned: HD is one of the layers'). */
ag_halo_t *ag_i_halos_for(const ag_halos_t *hs, int64_t HD);
void ag_i_halos_destroy(ag_halos_t *hs);

/* The neighbourhoods of part as the kernels index them: by global destination
   (offset pointers; only lo..hi-1 may be read) with the whole graph's N and E. */
ag_nbhd_t ag_i_part_view(const ag_mpi_part_t *part);

/* displ [P] = the running sums of count [P] (an MPI_*v call's displacements). */
void ag_i_mpi_displs(const int *count, int *displ, int P);

/* The contiguous parts' bounds [P+1] from the whole graph's edge_ptr [N+1]:
   balanced by work, cut at multiples of AG_MPI_ROW_ALIGN. */
int ag_i_mpi_cut_bounds(const int64_t *edge_ptr, int64_t N, int P, int64_t *bounds,
                        ag_error_t *err);

/* Renumbered parts: every process's node_of gathered into *order [N] on root
   (malloc'ed; NULL elsewhere): row k of the renumbered graph is node order[k].
   Collective; agrees on failure. */
int ag_i_mpi_node_order(MPI_Comm comm, const ag_mpi_part_t *part, int root, int64_t **order,
                        ag_error_t *err);

/* Seconds since some fixed point. */
double ag_i_mpi_now(void);

/* ---- training on P processes (reduce.c, train.c) ---- */

/* The reducer of sums over rows split among the processes of comm by part's
   bounds (see base/gemm.h): collective in every call. stats (NULL: none) counts the
   bytes. */
typedef struct {
    MPI_Comm comm;
    const ag_mpi_part_t *part;
    ag_mpi_stats_t *stats;
} ag_mpi_reduce_t;
void ag_i_mpi_reducer(ag_i_reducer_t *r, ag_mpi_reduce_t *ctx, MPI_Comm comm,
                      const ag_mpi_part_t *part, ag_mpi_stats_t *stats);

#endif
