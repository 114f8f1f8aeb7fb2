/*
 * Embedding the MPI layer (include/attngraph/mpi.h): every process compiles
 * the pattern, takes its part, runs two rounds on its rows of X, and rank 0
 * gathers the states and compares them with ag_rounds_run on one process:
 * the same bits, or exit 1. Usage (make check-mpi runs it):
 *   mpirun -np P build/example_mpi [PATTERN [N]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attngraph/mpi.h>

#define D 32
#define H 2

static int fail(int rank, const ag_error_t *err)
{
    if (rank == 0)
        fprintf(stderr, "example_mpi: %s\n", err->msg);
    MPI_Finalize();
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *spec = argc > 1 ? argv[1] : "causal";
    const int64_t N = argc > 2 ? atoll(argv[2]) : 3000;
    ag_error_t err;
    ag_pattern_t *pat;
    ag_nbhd_t nb;
    ag_weights_t w;
    if (ag_pattern_parse(&pat, spec, &err) || ag_nbhd_from_pattern(&nb, pat, N, AG_SELF_KEEP, &err) ||
        ag_weights_random(&w, D, H, D / H, 0, 5, &err))
        return fail(rank, &err);
    ag_pattern_free(pat);
    float *X = malloc((size_t)(N * D) * sizeof *X), *all = malloc((size_t)(N * D) * sizeof *all);
    ag_random_normal(X, N * D, 9, 0, 1.0f);

    /* this process's part and its rows */
    ag_mpi_part_t part;
    if (ag_mpi_part_local(&part, MPI_COMM_WORLD, &nb, &err))
        return fail(rank, &err);
    const int64_t n = part.hi - part.lo;
    float *mine = malloc((size_t)((n ? n : 1) * D) * sizeof *mine);
    memcpy(mine, X + part.lo * D, (size_t)(n * D) * sizeof *mine);
    const ag_round_opts_t opts = {.norm = AG_NORM_LAYER};
    ag_mpi_stats_t stats;
    if (ag_mpi_rounds_run(MPI_COMM_WORLD, &part, &w, 1, mine, 2, &opts, AG_MPI_AUTO, NULL,
                          &stats, &err) ||
        ag_mpi_gather_rows(MPI_COMM_WORLD, &part, mine, D, all, 0, &err))
        return fail(rank, &err);

    int status = 0;
    if (rank == 0) {   /* the same rounds on one process */
        ag_workspace_t ws;
        if (ag_workspace_init(&ws, N, D, D, &err) ||
            ag_rounds_run(&nb, &w, 1, X, 2, &opts, &ws, NULL, &err))
            return fail(rank, &err);
        ag_workspace_destroy(&ws);
        status = memcmp(X, all, (size_t)(N * D) * sizeof *X) != 0;
        printf("%s on %d processes (%s path): %s\n", spec, part.ranks,
               stats.path == AG_MPI_RING ? "ring" : "halo",
               status ? "DIFFERENT from one process" : "identical to one process");
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    ag_mpi_part_destroy(&part);
    ag_nbhd_destroy(&nb);
    ag_weights_destroy(&w);
    free(X), free(all), free(mine);
    MPI_Finalize();
    return status;
}
