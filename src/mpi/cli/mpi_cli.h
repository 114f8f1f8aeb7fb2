/* attngraph-mpi: the commands of attngraph on MPI processes (shared declarations). */
#ifndef AG_MPI_CLI_H
#define AG_MPI_CLI_H

#include "attngraph/mpi.h"
#include "cli.h"

/* Takes --path auto|halo|ring out of argv (the rest is attngraph's options);
   0, or EXIT_USAGE with the message printed. */
int take_path_option(int *argc, char **argv, ag_mpi_path_t *path, const char *cmd);

/* The connectivity of o as this process's part (pattern and CSR: each process
   its own; graph file: read by rank 0 and sent out). desc gets a description. */
int open_part(ag_mpi_part_t *part, MPI_Comm comm, const source_opts_t *o, char *desc,
              size_t desc_size, int *usage, ag_error_t *err);

/* This process's rows of the features: --features (read by rank 0, rows sent
   out) or drawn from the seed exactly as attngraph draws all N rows; then
   positions. x0 [hi-lo, D]. */
int own_features(ag_matrix_t *x0, MPI_Comm comm, const ag_mpi_part_t *part,
                 const run_opts_t *o, ag_error_t *err);

/* Without --threads: the machine's cores shared among the processes on it. */
int threads_per_process(MPI_Comm comm);
/* A usage error (printed; non-zero) for a --csr read from standard input. */
int refuse_csr_stdin(const char *cmd, const char *csr);

int mpi_run(MPI_Comm comm, int argc, char **argv);
/* attngraph train on the processes of comm (train.c). */
int mpi_train(MPI_Comm comm, int argc, char **argv);

#endif
