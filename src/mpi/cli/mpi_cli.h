/* attngraph-mpi: the commands of attngraph on MPI processes (shared declarations). */
#ifndef AG_MPI_CLI_H
#define AG_MPI_CLI_H

#include "attngraph/mpi.h"
#include "cli/cli.h"

/* Takes --path auto|halo|ring out of argv (the rest is attngraph's options);
   0, or EXIT_USAGE with the message printed. */
int take_path_option(int *argc, char **argv, ag_mpi_path_t *path, const char *cmd);

/* Takes --partition contiguous|metis out of argv; *metis set for metis. 0, or
   EXIT_USAGE (message printed). */
int take_partition_option(int *argc, char **argv, int *metis, const char *cmd);

/* --partition metis: asked for (metis, seed), and what rank 0 found, to report. */
typedef struct {
    int metis;
    uint64_t seed;
    int64_t cut, halo;                         /* METIS parts: edge cut, halo rows */
    int64_t cut_contiguous, halo_contiguous;   /* the contiguous parts' (the default) */
} metis_info_t;

/* Refuses, before the edges are read, a run of o on a CSR whose smallest
   possible footprint (its part's offsets and states, its own K and V rows:
   cli/plan.h's estimate with no halo) is over this process's share of the
   memory budget: --max-memory, or the available memory over the processes on
   this host. Reads the CSR's offsets only. */
int csr_fits(MPI_Comm comm, const run_opts_t *o, ag_error_t *err);

/* The connectivity of o as this process's part (pattern and CSR: each process
   its own; graph file: read by rank 0 and sent out; with metis->metis, a graph
   file or CSR read by rank 0, cut by METIS and renumbered part by part, rank 0
   filling in metis's counts). metis may be NULL. edge_bias (NULL: none) names
   an edge attribute of the graph file: *bias gets this process's slots of it
   (malloc'ed; contiguous parts). desc gets a description. */
int open_part(ag_mpi_part_t *part, MPI_Comm comm, const source_opts_t *o, metis_info_t *metis,
              const char *edge_bias, float **bias, char *desc, size_t desc_size, int *usage,
              ag_error_t *err);

/* This process's rows of the features: --features (read by rank 0, rows sent
   out) or drawn from the seed exactly as attngraph draws all N rows; then
   positions. Renumbered parts: the rows of the nodes part->node_of names.
   x0 [hi-lo, D]. */
/* Rows [n, cols] of every process, in the graph's order, into *all on rank 0
   (malloc'ed; NULL elsewhere). Collective. */
int gather_all_rows(MPI_Comm comm, const ag_mpi_part_t *part, const float *mine, int64_t cols,
                    float **all, ag_error_t *err);
int own_features(ag_matrix_t *x0, MPI_Comm comm, const ag_mpi_part_t *part,
                 const run_opts_t *o, ag_error_t *err);

/* This process's rows of raw attention's --q, --k, --v (each read by rank 0,
   rows sent out, as --features), taken into in (inputs_take_raw). */
int own_raw(inputs_t *in, MPI_Comm comm, const ag_mpi_part_t *part, const run_opts_t *o,
            ag_error_t *err);

/* Without --threads: the machine's cores shared among the processes on it. */
int threads_per_process(MPI_Comm comm);
/* The processes of comm on this host, which share its memory (collective). */
int processes_here(MPI_Comm comm);
/* A usage error (printed; non-zero) for a --csr read from standard input. */
int refuse_csr_stdin(const char *cmd, const char *csr);

int mpi_run(MPI_Comm comm, int argc, char **argv);
/* attngraph train on the processes of comm (train.c). */
int mpi_train(MPI_Comm comm, int argc, char **argv);
/* attngraph lm train on the processes of comm (lm.c). */
int mpi_lm(MPI_Comm comm, int argc, char **argv);

#endif
