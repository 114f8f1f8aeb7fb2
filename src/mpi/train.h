/* Training on P processes (src/mpi/reduce.c, train.c): the MPI layer's own. */
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
void ag_mpi_reducer(ag_i_reducer_t *r, ag_mpi_reduce_t *ctx, MPI_Comm comm,
                    const ag_mpi_part_t *part, ag_mpi_stats_t *stats);

/*
 * ag_rounds_forward and ag_rounds_backward on P processes, halo path: X [hi-lo,
 * D] this process's rows; the tape keeps, per round, its rows' activations and
 * the window of K and V rows it read. The backward computes dQ of its
 * destinations and dK, dV of its sources (walking their out-edges over every
 * destination that reads them, whose Q, dM, lse and D rows it receives), and
 * sums the weight gradients over all rows in the one-process order, so grads
 * are the one-process gradients, bitwise, on every process. dY, dX0 [hi-lo,
 * D]. Scores: plain dot-product softmax; shared weights only.
 */
typedef struct ag_mpi_tape ag_mpi_tape_t;
int ag_mpi_rounds_forward(MPI_Comm comm, const ag_mpi_part_t *part, const ag_weights_t *layers,
                          int n_layers, float *X, int rounds, const ag_round_opts_t *opts,
                          ag_mpi_tape_t **tape, ag_mpi_stats_t *stats, ag_error_t *err);
int ag_mpi_rounds_backward(ag_mpi_tape_t *tape, const float *dY, float *dX0,
                           ag_weights_t *grads, ag_error_t *err);
void ag_mpi_tape_free(ag_mpi_tape_t *tape);

#endif
