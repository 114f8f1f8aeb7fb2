/*
 * A GPT on P processes: each process holds its rows of the batch (a part of
 * the batch graph, starting on a chunk boundary) and runs train/lm.c's loss on
 * them (ag_i_lm_loss_rows), with the blocks through the MPI rounds (train.c's
 * tape, rounds.c's inference) and every sum over rows (the head's and the
 * embeddings' gradients, LayerNorm's, the loss) through the reducer: the
 * one-process bits on every process.
 */
#include "mpi/mpi.h"
#include "base/base.h"
#include "train/train.h"

typedef struct {
    MPI_Comm comm;
    const ag_mpi_part_t *part;
    ag_mpi_tape_t **tape;
} mpi_rows_t;

static int mpi_forward(void *ctx, const ag_lm_t *m, float *X, const ag_round_opts_t *ro,
                       int train, ag_error_t *err)
{
    const mpi_rows_t *c = ctx;
    if (train)
        return ag_mpi_rounds_forward(c->comm, c->part, m->layers, (int)m->L, X, (int)m->L, ro,
                                     c->tape, NULL, err);
    return ag_mpi_rounds_run(c->comm, c->part, m->layers, (int)m->L, X, (int)m->L, ro,
                             AG_MPI_HALO, NULL, NULL, err);
}

static int mpi_backward(void *ctx, const float *dY, float *dX0, ag_weights_t *grads,
                        ag_error_t *err)
{
    const mpi_rows_t *c = ctx;
    return ag_mpi_rounds_backward(*c->tape, dY, dX0, grads, err);
}

static int mpi_agree_rows(void *ctx, int rc, ag_error_t *err)
{
    const mpi_rows_t *c = ctx;
    return ag_mpi_agree(c->comm, rc, err);
}

int ag_mpi_lm_loss(MPI_Comm comm, const ag_mpi_part_t *part, const ag_lm_t *m,
                   const int64_t *ids, const int64_t *pos, const int64_t *targets,
                   const ag_lm_opts_t *opts, double *loss, ag_lm_t *grads,
                   ag_mpi_tape_t **tape, ag_error_t *err)
{
    int rc = AG_OK;
    if (!m || !m->wte || !part || (part->hi > part->lo && (!ids || !pos || !targets)))
        rc = ag_fail(err, AG_EINVAL, "language model: a model, a part, and ids, positions "
                     "and targets of its rows are required");
    else if (part->node_of)
        rc = ag_fail(err, AG_EINVAL, "language model: renumbered parts (METIS's) are not "
                     "supported; the sequences' rows must stay in order");
    else if (opts && opts->graphs)
        rc = ag_fail(err, AG_EINVAL, "language model: a graph a block runs on one process "
                     "(ag_lm_loss); the MPI layer's parts are one graph's");
    else if (grads && !tape)
        rc = ag_fail(err, AG_EINVAL, "language model: training needs a tape (NULL at first)");
    if ((rc = ag_mpi_agree(comm, rc, err)))
        return rc;
    ag_i_reducer_t red;
    ag_mpi_reduce_t red_ctx;
    ag_i_mpi_reducer(&red, &red_ctx, comm, part, NULL);
    mpi_rows_t c = {comm, part, tape};
    const ag_i_lm_rows_t rows = {&red, part->lo, mpi_forward, mpi_backward, mpi_agree_rows, &c,
                                 NULL};   /* (the MPI tape keeps no head) */
    return ag_i_lm_loss_rows(m, part->hi - part->lo, ids, pos, targets, opts, loss, grads,
                             &rows, err);
}
