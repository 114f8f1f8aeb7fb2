/* The ring path (ring.c): K and V blocks passed from process to process. */
#ifndef AG_MPI_RING_H
#define AG_MPI_RING_H

#include "attngraph/mpi.h"

typedef struct {
    float *K_own, *V_own;       /* [hi-lo, HD] this process's rows (the projections') */
    int64_t HD;
    void *state;                /* ring.c's */
} ag_ring_t;

int ag_i_ring_init(ag_ring_t *g, MPI_Comm comm, const ag_mpi_part_t *part, int64_t HD,
                   ag_error_t *err);
/* The attention of part's destinations: nb, Q, M indexed by global node. */
int ag_i_ring_attention(ag_ring_t *g, MPI_Comm comm, const ag_nbhd_t *nb,
                        const ag_mpi_part_t *part, const float *Q, int64_t H, int64_t d,
                        const ag_score_t *score, float *M, ag_mpi_stats_t *stats,
                        ag_error_t *err);
void ag_i_ring_destroy(ag_ring_t *g);

#endif
