/*
 * Agreeing on failure: a step that fails on some processes must end the same
 * way on all of them, with one message (the lowest failing rank's), and never
 * leave a process waiting for a peer that gave up. A failure of some processes
 * but not all names the process and its host: where to look.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "attngraph/mpi.h"

int ag_mpi_agree(MPI_Comm comm, int rc, ag_error_t *err)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    int mine = rc ? rank : INT_MAX, first;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first == INT_MAX)
        return AG_OK;
    int failed = rc != 0, n_failed, size;
    MPI_Allreduce(&failed, &n_failed, 1, MPI_INT, MPI_SUM, comm);
    MPI_Comm_size(comm, &size);
    ag_error_t said = {AG_EINVAL, "a process failed without a message"};
    if (rank == first && err && err->msg[0])
        said = *err;
    if (rank == first && n_failed < size) {   /* not everyone's input: say whose */
        char host[MPI_MAX_PROCESSOR_NAME] = "?", msg[sizeof said.msg];
        int len;
        MPI_Get_processor_name(host, &len);
        if (snprintf(msg, sizeof msg, "rank %d of %d (%s): %s", rank, size, host, said.msg) >=
            (int)sizeof msg)
            memcpy(msg + sizeof msg - 4, "...", 4);   /* cut: say so */
        memcpy(said.msg, msg, sizeof msg);
    }
    if (rank == first)
        said.status = rc > 0 ? (ag_status_t)rc : AG_EINVAL;
    MPI_Bcast(&said, (int)sizeof said, MPI_BYTE, first, comm);
    if (err)
        *err = said;
    return said.status;
}
