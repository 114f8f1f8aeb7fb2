/* Training on P processes (src/mpi/reduce.c, train.c): the reducer of sums over
   rows; the public functions are in attngraph/mpi.h. */
#ifndef AG_MPI_TRAIN_H
#define AG_MPI_TRAIN_H

#include "attngraph/mpi.h"
#include "gemm.h"

/* The reducer of sums over rows split among the processes of comm by part's
   bounds (see gemm.h): collective in every call. stats (NULL: none) counts the
   bytes. */
typedef struct {
    MPI_Comm comm;
    const ag_mpi_part_t *part;
    ag_mpi_stats_t *stats;
} ag_mpi_reduce_t;
void ag_i_mpi_reducer(ag_i_reducer_t *r, ag_mpi_reduce_t *ctx, MPI_Comm comm,
                      const ag_mpi_part_t *part, ag_mpi_stats_t *stats);

#endif
