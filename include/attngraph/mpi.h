/*
 * attngraph on MPI: message rounds over P processes, bitwise identical to one
 * process.
 *
 * The core library (attngraph/core.h) has no MPI dependency; this layer is
 * its own library, libattngraph_mpi (built with mpicc). A program calls
 * MPI_Init itself and passes a communicator.
 *
 * Ownership: the destinations are split into P contiguous parts, balanced by
 * work (in-edges plus rows), cut at multiples of AG_MPI_ROW_ALIGN rows. Each
 * process owns the states X of its rows, projects them, receives the K and V
 * rows its destinations read from their owners (the halo), computes their
 * attention, output projection and residual. Weights are replicated.
 *
 * Why the cuts are aligned: the projections run in fixed blocks of rows and
 * the tiled kernel in fixed blocks of destinations (attngraph's results are
 * the same for any thread count because these blocks do not move). A part
 * that starts on a block boundary runs exactly the blocks one process runs,
 * so every float is the same on 1 to P processes.
 *
 * METIS parts (ag_mpi_part_scatter_partition): any partition of a graph,
 * e.g. ag_partition_metis's, run as contiguous parts of the graph renumbered
 * part by part. Fewer K/V rows cross between processes, but not bitwise:
 * renumbering changes the order in which a destination adds its sources'
 * terms and which rows share a projection block (float32 results agree to a
 * few units in the last place).
 *
 * Long runs of consecutive sources (causal and window patterns over long
 * sequences): instead of a halo of nearly every row, K and V travel in blocks
 * around the ring of ranks (ag_mpi_path_t AG_MPI_RING), each destination
 * merging them into its online-softmax state in ascending source order, on
 * the one-process kernel's own tiles: O(N/P) rows a process plus the blocks
 * in flight, and the same bits.
 *
 * Errors: every function returns the same status on every process of the
 * communicator (they agree before returning), with err holding the message
 * of the lowest-ranked process that failed; none of them hangs when one
 * process fails. The one exception: a process that cannot allocate the part
 * the root sends it (a few arrays of its nodes' size) aborts the job
 * (MPI_Abort), as the root's messages cannot be taken back. Collective: every
 * process of comm calls them together.
 */
#ifndef ATTNGRAPH_MPI_H
#define ATTNGRAPH_MPI_H

#include <mpi.h>
#include <stdint.h>

#include "attngraph/core.h"
#include "attngraph/partition.h"

AG_BEGIN_DECLS

/* Parts start at multiples of this many rows (the projections' blocks of 512
   and the weight gradients' chunks of 1024). */
#define AG_MPI_ROW_ALIGN ((int64_t)1024)

/* One process's part of a graph. */
typedef struct {
    int ranks, rank;            /* P and this process's rank */
    int64_t n_nodes, n_edges;   /* the whole graph's N and E (messages) */
    int one_run;                /* every destination of the whole graph has <= 1 run */
    int64_t block_cells;        /* the block-sparse kernel's score entries on the whole
                                   graph (-1: it does not apply, or one_run) */
    int64_t *bounds;            /* [P+1]: process p owns rows bounds[p] .. bounds[p+1]-1 */
    int64_t lo, hi;             /* this process's rows: bounds[rank], bounds[rank+1] */
    /* destinations lo..hi-1 as 0..hi-lo-1 (edge_ptr from 0); sources keep their
       global numbers; edge_id NULL */
    ag_nbhd_t nb;
    /* [hi-lo] when the graph was renumbered (ag_mpi_part_scatter_partition): the
       original number of each own row; NULL when rows keep the graph's numbers */
    int64_t *node_of;
} ag_mpi_part_t;

/*
 * Parts of nb (the whole neighbourhoods, given on `root` only; NULL elsewhere):
 * root cuts them and sends each process its part.
 */
int ag_mpi_part_scatter(ag_mpi_part_t *part, MPI_Comm comm, const ag_nbhd_t *nb, int root,
                        ag_error_t *err);

/*
 * Parts of nb given by pt (a partition of nb into P parts, e.g.
 * ag_partition_metis's; nb and pt on root only, NULL elsewhere): root
 * renumbers the nodes part by part (part p's nodes, ascending, become rows
 * pt->part_ptr[p] .. pt->part_ptr[p+1]-1; bounds = part_ptr, not aligned),
 * sorts each destination's renumbered sources and sends each process its
 * part of the renumbered graph. part->node_of gets the original numbers of
 * the own rows: give each process the rows of X of those nodes;
 * ag_mpi_gather_rows puts rows back in the original order.
 */
int ag_mpi_part_scatter_partition(ag_mpi_part_t *part, MPI_Comm comm, const ag_nbhd_t *nb,
                                  const ag_partition_t *pt, int root, ag_error_t *err);

/* A process's part cut out of the whole neighbourhoods that every process holds
   (a pattern each compiles, a CSR each reads): no communication beyond agreeing. */
int ag_mpi_part_local(ag_mpi_part_t *part, MPI_Comm comm, const ag_nbhd_t *nb,
                      ag_error_t *err);

/*
 * Each process compiles only its part of a pattern on N nodes (as
 * ag_nbhd_from_pattern): the in-degrees of all N nodes to cut the parts (8
 * bytes a node, for the time of the call), then the runs of its destinations.
 */
int ag_mpi_part_from_pattern(ag_mpi_part_t *part, MPI_Comm comm, const ag_pattern_t *pattern,
                             int64_t N, ag_self_loops_t self, ag_error_t *err);

/*
 * Each process reads only its part of an in-neighbour CSR (as ag_nbhd_from_csr):
 * all of indptr [N+1] (to cut the parts), and of indices [E] only the entries
 * of its destinations, by an offset read of the .npy file. self as
 * ag_nbhd_self_loops.
 */
int ag_mpi_part_from_csr(ag_mpi_part_t *part, MPI_Comm comm, const char *indptr_path,
                         const char *indices_path, ag_self_loops_t self, ag_error_t *err);

void ag_mpi_part_destroy(ag_mpi_part_t *part);

/* How K and V reach the destinations. */
typedef enum {
    AG_MPI_AUTO = 0,    /* the ring where it applies and the rows a process reads would
                           span more than half of all rows on some process; else the halo */
    AG_MPI_HALO,        /* each process receives the rows it reads, once a round */
    AG_MPI_RING         /* blocks of K and V pass around the ring of ranks, neighbour to
                           neighbour; needs one run per destination and 16 or more
                           in-edges per node on average (the tiled kernel) */
} ag_mpi_path_t;

/* What a run measured on this process. */
typedef struct {
    ag_mpi_path_t path;         /* the path taken */
    double seconds;             /* the rounds */
    double seconds_comm;        /* of which waiting for or moving rows */
    int64_t bytes_sent, bytes_received;   /* K and V rows (and weight sums), all rounds */
    int64_t halo_rows;          /* halo: rows received in a round; ring: rows passed on,
                                   all rounds */
    int rounds_done;            /* ag_mpi_rounds_run: the rounds run (fewer when stopped) */
} ag_mpi_stats_t;

/*
 * ag_rounds_run on P processes: X [hi-lo, D] holds this process's rows (in
 * place). opts as ag_rounds_run's but on_progress (not called): on_round is
 * called on every process after each round with this process's rows (X,
 * X_prev, ws's buffers and the figures [hi-lo, ...]; nb NULL; collective
 * calls inside are allowed), and the rounds stop when any process's call
 * returns AG_STOP (stats->rounds_done says how many ran); figures take the
 * halo path. Any score, its edge_bias (NULL, or this process's part's
 * slots in part->nb's order) included; scores other than plain dot-product
 * softmax (scaled-dot, dot, beta) take the halo path (AG_MPI_RING refuses
 * them). Per-node weights hold this process's rows (per_node = hi-lo: rows
 * lo..hi-1 of the whole graph's; not on renumbered parts). M (NULL: not wanted) gets
 * the last round's messages of this process's rows [hi-lo, H*d]. Layers of their
 * own shapes run as ag_rounds_run runs them (X then holds ag_rounds_widest floats
 * a row; the last round's output is its first hi-lo rows of ag_layer_width_out),
 * on the halo path when their head widths H*d differ; layers with edge features
 * (wedge) are refused.
 */
int ag_mpi_rounds_run(MPI_Comm comm, const ag_mpi_part_t *part, const ag_weights_t *layers,
                      int n_layers, float *X, int rounds, const ag_round_opts_t *opts,
                      ag_mpi_path_t path, float *M, ag_mpi_stats_t *stats, ag_error_t *err);

/*
 * ag_attention on P processes (halo path): Q, K, V [hi-lo, H*d] hold this
 * process's rows; M [hi-lo, H*d] gets its rows' messages, bitwise one
 * process's for the contiguous parts. Any score (its edge_bias, if any, this
 * process's slots in part->nb's order). Collective; stats as
 * ag_mpi_rounds_run's (NULL: not wanted).
 */
int ag_mpi_attention(MPI_Comm comm, const ag_mpi_part_t *part, const float *Q, const float *K,
                     const float *V, int64_t H, int64_t d, const ag_score_t *score, float *M,
                     ag_mpi_stats_t *stats, ag_error_t *err);

/*
 * ag_rounds_forward and ag_rounds_backward on P processes (halo path): X
 * [hi-lo, D] holds this process's rows (in place; layers of their own shapes as
 * ag_rounds_forward's, X ag_rounds_widest floats a row, dY and dX0 the last
 * layer's and the first layer's widths); the tape keeps, per round,
 * its rows' activations and the K and V rows the halo brought. The backward,
 * given dY [hi-lo, D] of its rows, writes dX0 [hi-lo, D] (NULL: not wanted)
 * and, on every process, the whole graph's weight gradients into grads (from
 * ag_weights_grads_init; per-node weights: its own nodes' matrices' gradients):
 * bitwise ag_rounds_backward's on one process, for the contiguous parts (each
 * source's owner computes its dK and dV; sums over rows are added in the
 * one-process order); renumbered parts (ag_mpi_part_scatter_partition's) are
 * refused (AG_EINVAL). Any score function, with an edge bias too (every
 * process gives its own messages', in its part's slots; the owners of the
 * messages' destinations send each source's owner the values its backward
 * reads, at every forward). Per-node weights hold this process's rows
 * (per_node = hi-lo). opts as ag_mpi_rounds_run's; layers, part and opts must
 * stay alive and unchanged until the backward. *tape must be NULL or the tape of an earlier call: made on
 * the same part (alive and unchanged since; a part rebuilt needs a new tape)
 * with the same shapes and rounds, it is used again: its exchange plans and
 * its activation and backward buffers are kept, so that an epoch after the
 * first neither plans nor allocates them again. Otherwise it is freed and a
 * new one made. On failure *tape is NULL. Both are collective.
 */
typedef struct ag_mpi_tape ag_mpi_tape_t;
int ag_mpi_rounds_forward(MPI_Comm comm, const ag_mpi_part_t *part, const ag_weights_t *layers,
                          int n_layers, float *X, int rounds, const ag_round_opts_t *opts,
                          ag_mpi_tape_t **tape, ag_mpi_stats_t *stats, ag_error_t *err);
int ag_mpi_rounds_backward(ag_mpi_tape_t *tape, const float *dY, float *dX0,
                           ag_weights_t *grads, ag_error_t *err);
void ag_mpi_tape_free(ag_mpi_tape_t *tape);

/*
 * ag_lm_loss on P processes: part is the batch graph's (ag_mpi_part_local of
 * the graph every process builds: B sequences side by side), ids, pos and
 * targets hold this process's rows (part->lo .. part->hi-1 of the batch; any
 * pointers where it has none). *loss gets the whole batch's mean and, with
 * grads, every process the whole model's gradients: bitwise ag_lm_loss's on
 * one process, with dropout too (its masks go by the batch's rows). Training
 * keeps the rounds' tape in *tape (NULL at first; the next step reuses it; free
 * with ag_mpi_tape_free). Every process then takes the same optimizer step.
 * Collective.
 */
int ag_mpi_lm_loss(MPI_Comm comm, const ag_mpi_part_t *part, const ag_lm_t *m,
                   const int64_t *ids, const int64_t *pos, const int64_t *targets,
                   const ag_lm_opts_t *opts, double *loss, ag_lm_t *grads,
                   ag_mpi_tape_t **tape, ag_error_t *err);

/* Rows [hi-lo, cols] of every process into all [N, cols] on root (NULL elsewhere),
   in the graph's original node order (part->node_of, when renumbered). */
int ag_mpi_gather_rows(MPI_Comm comm, const ag_mpi_part_t *part, const float *mine,
                       int64_t cols, float *all, int root, ag_error_t *err);

/*
 * Agreement after a step that may fail on some processes: returns the same
 * status everywhere (the lowest failing rank's) and puts that process's
 * message into err on every process. rc is this process's status.
 */
int ag_mpi_agree(MPI_Comm comm, int rc, ag_error_t *err);

AG_END_DECLS

#endif /* ATTNGRAPH_MPI_H */
