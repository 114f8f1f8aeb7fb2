/*
 * attngraph-mpi lm train: `attngraph lm train` on P processes, the same
 * options and the same bits. Every process draws every batch (the same
 * generator) and builds the batch graph; each takes its part of the rows
 * (cut at multiples of AG_MPI_ROW_ALIGN: a batch of fewer rows stays on the
 * first process) and runs the loss on them (ag_mpi_lm_loss: the whole model's
 * gradients on every process), and every process takes the same optimizer
 * step. Rank 0 prints and writes --log and --save.
 */
#include <stdio.h>
#include <string.h>

#include "mpi/cli/mpi_cli.h"
#include "cli/lm.h"

typedef struct {
    MPI_Comm comm;
    ag_mpi_part_t part;
    ag_mpi_tape_t *tape;
    int have_part;
} mpi_lm_t;

static int part_begin(lm_backend_t *b, ag_nbhd_t *nb, ag_error_t *err)
{
    mpi_lm_t *c = b->ctx;
    int rc = ag_mpi_part_local(&c->part, c->comm, nb, err);
    c->have_part = rc == AG_OK;
    return rc;
}

static int part_loss(lm_backend_t *b, const ag_lm_t *m, ag_nbhd_t *nb, const int64_t *ids,
                     const int64_t *pos, const int64_t *next, const ag_lm_opts_t *o,
                     double *loss, ag_lm_t *grads, ag_error_t *err)
{
    (void)nb;
    mpi_lm_t *c = b->ctx;
    const int64_t lo = c->part.lo;
    ag_lm_opts_t mine = o ? *o : (ag_lm_opts_t)AG_LM_OPTS_INIT;
    if (mine.predicted)   /* this process's rows of the batch's */
        mine.predicted += lo;
    return ag_mpi_lm_loss(c->comm, &c->part, m, ids + lo, pos + lo, next + lo, &mine, loss,
                          grads, &c->tape, err);
}

static void part_end(lm_backend_t *b)
{
    mpi_lm_t *c = b->ctx;
    ag_mpi_tape_free(c->tape);
    c->tape = NULL;
    if (c->have_part)
        ag_mpi_part_destroy(&c->part);
    c->have_part = 0;
}

static int agree(lm_backend_t *b, int rc, ag_error_t *err)
{
    const mpi_lm_t *c = b->ctx;
    return ag_mpi_agree(c->comm, rc, err);
}

static int threads(lm_backend_t *b, int given)
{
    const mpi_lm_t *c = b->ctx;
    return given ? ag_set_threads(given) : ag_i_set_tool_threads(threads_per_process(c->comm));
}

int mpi_lm(MPI_Comm comm, int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        puts("usage: mpirun -np P attngraph-mpi lm train [attngraph lm train's options]\n"
             "see 'attngraph-mpi lm train --help'");
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "train") != 0)
        return usage_error("lm", "expected 'lm train' (sampling runs on one process: "
                           "attngraph lm sample)");
    mpi_lm_t c = {comm, {0}, NULL, 0};
    lm_backend_t b = {.one_graph = 1, .begin = part_begin, .loss = part_loss, .end = part_end,
                      .agree = agree, .threads = threads, .ctx = &c};
    MPI_Comm_rank(comm, &b.rank);
    MPI_Comm_size(comm, &b.ranks);
    const int status = lm_train_with(argc - 1, argv + 1, &b);
    part_end(&b);
    return status;
}
