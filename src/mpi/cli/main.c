/*
 * attngraph-mpi: `mpirun -np P attngraph-mpi run ...` runs what `attngraph run`
 * runs, on P processes, with the same options and the same output bits.
 * Only rank 0 speaks: the other ranks' standard output and error are closed
 * to /dev/null, so a failure says one line, not P.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mpi/cli/mpi_cli.h"

static const char usage[] =
    "usage: mpirun -np P attngraph-mpi run [attngraph run's options] [--path auto|halo|ring]\n"
    "                                      [--partition contiguous|metis]\n"
    "       mpirun -np P attngraph-mpi train [attngraph train's options]\n"
    "       mpirun -np P attngraph-mpi lm train [attngraph lm train's options]\n"
    "       attngraph-mpi --version\n"
    "\n"
    "Runs attngraph's message rounds on P MPI processes; the outputs are bitwise those\n"
    "of `attngraph run` on one process (METIS parts: to float32 rounding). See\n"
    "'attngraph-mpi run --help'.\n";

static void igraph_error_quiet(const char *reason, const char *file, int line,
                               igraph_error_t code)
{
    (void)reason, (void)file, (void)line, (void)code;
    IGRAPH_FINALLY_FREE();
}

/* Ranks other than 0 write nothing. */
static void silence(void)
{
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, 1);
        dup2(null, 2);
        close(null);
    }
}

int main(int argc, char **argv)
{
    cli_program = "attngraph-mpi";   /* in the messages of attngraph's own commands */
    ag_error_t err;
    /* before MPI_Init: the restart (execv) keeps the process MPI started */
    if (cli_short_waits(argv, &err))
        fprintf(stderr, "attngraph-mpi: warning: %s\n", err.msg);
    if (ag_simd_env_check(&err)) {   /* before MPI_Init: every process says the same */
        fprintf(stderr, "attngraph-mpi: %s\n", err.msg);
        return 2;
    }
    if (argc == 2 && !strcmp(argv[1], "--version")) {   /* no MPI start-up for it */
        int version, subversion;
        MPI_Get_version(&version, &subversion);   /* may be called before MPI_Init */
        printf("attngraph-mpi %s (igraph %s, MPI %d.%d)\n", AG_VERSION, IGRAPH_VERSION, version,
               subversion);
        return 0;
    }
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0)
        silence();
    igraph_set_error_handler(igraph_error_quiet);
    igraph_set_warning_handler(igraph_warning_handler_ignore);
    int status = EXIT_USAGE;
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        status = argc < 2 ? EXIT_USAGE : 0;
    } else if (!strcmp(argv[1], "run")) {
        status = mpi_run(MPI_COMM_WORLD, argc - 1, argv + 1);
    } else if (!strcmp(argv[1], "train")) {
        status = mpi_train(MPI_COMM_WORLD, argc - 1, argv + 1);
    } else if (!strcmp(argv[1], "lm")) {
        status = mpi_lm(MPI_COMM_WORLD, argc - 1, argv + 1);
    } else {
        fprintf(stderr, "attngraph-mpi: unknown command '%s' (run, train, lm)\n", argv[1]);
    }
    fflush(stdout);
    MPI_Finalize();
    return status;
}
