/*
 * Sums over rows split among the processes, bitwise the one-process sum: each
 * process hands its chunks' partials (a part starts on a chunk boundary, so
 * it owns whole chunks of AG_GEMM_CHUNK rows); every process gathers all of
 * them (MPI_Allgatherv) and adds them in the whole's chunk order, as
 * ag_i_gemm_atb and ag_i_sum_rows do on one process.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "mpi/mpi.h"

/* Chunks of process p's rows (of the sum's rows: per_row of them a part's row). */
static int64_t chunks_of(const ag_mpi_part_t *part, int p, int64_t per_row)
{
    const int64_t n = (part->bounds[p + 1] - part->bounds[p]) * (per_row > 1 ? per_row : 1);
    return (n + AG_GEMM_CHUNK - 1) / AG_GEMM_CHUNK;
}

/* Every process's partials [chunks, width] of elem bytes each into *all, in
   rank order (= chunk order); *total chunks. */
static int gather(const ag_i_reducer_t *r, const void *part_mine, int64_t chunks,
                  int64_t width, MPI_Datatype type, size_t elem, void **all, int64_t *total,
                  ag_error_t *err)
{
    const ag_mpi_reduce_t *x = r->ctx;
    const ag_mpi_part_t *part = x->part;
    const int P = part->ranks;
    int *count = ag_alloc(P, sizeof *count, err, "gradient sums");
    int *displ = ag_alloc(P, sizeof *displ, err, "gradient sums");
    int rc = chunks < 0 || !count || !displ ? ag_alloc_status() : AG_OK;
    *total = 0;
    for (int p = 0; !rc && p < P; p++)
        *total += chunks_of(part, p, r->per_row);
    /* the rows given are not the part */
    if (!rc && chunks != chunks_of(part, part->rank, r->per_row))
        rc = ag_fail(err, AG_EINVAL, "gradient sums: %lld chunks of rows on process %d; its "
                     "part has %lld", (long long)chunks, part->rank,
                     (long long)chunks_of(part, part->rank, r->per_row));
    if (!rc && (double)*total * (double)width > INT32_MAX)
        rc = ag_fail(err, AG_ELIMIT, "gradient sums: %lld chunks of %lld values are beyond "
                     "what one MPI call counts (2^31)", (long long)*total, (long long)width);
    *all = NULL;
    if (!rc && !(*all = ag_alloc(*total ? *total * width : 1, elem, err, "gradient sums")))
        rc = ag_alloc_status();
    if ((rc = ag_mpi_agree(x->comm, rc, err))) {
        free(count), free(displ), free(*all);
        *all = NULL;
        return rc;
    }
    for (int p = 0, at = 0; p < P; p++) {
        count[p] = (int)(chunks_of(part, p, r->per_row) * width), displ[p] = at;
        at += count[p];
    }
    MPI_Allgatherv(part_mine, count[part->rank], type, *all, count, displ, type, x->comm);
    if (x->stats)
        x->stats->bytes_sent += (int64_t)count[part->rank] * (int64_t)elem * (P - 1),
        x->stats->bytes_received += (*total * width - count[part->rank]) * (int64_t)elem;
    free(count), free(displ);
    return AG_OK;
}

static int add_f(const ag_i_reducer_t *r, float *G, const float *part, int64_t chunks,
                 int64_t width, ag_error_t *err)
{
    void *all;
    int64_t total;
    int rc = gather(r, part, chunks, width, MPI_FLOAT, sizeof(float), &all, &total, err);
    if (rc)
        return rc;
    const float *p = all;
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (total * width >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t x = 0; x < width; x++) {
        float g = G[x];
        for (int64_t c = 0; c < total; c++)
            g += p[c * width + x];
        G[x] = g;
    }
    free(all);
    return AG_OK;
}

static int add_d(const ag_i_reducer_t *r, double *out, const double *part, int64_t chunks,
                 int64_t width, ag_error_t *err)
{
    void *all;
    int64_t total;
    int rc = gather(r, part, chunks, width, MPI_DOUBLE, sizeof(double), &all, &total, err);
    if (rc)
        return rc;
    const double *p = all;
    memset(out, 0, (size_t)width * sizeof *out);
    for (int64_t c = 0; c < total; c++)
        for (int64_t x = 0; x < width; x++)
            out[x] += p[c * width + x];
    free(all);
    return AG_OK;
}

static int count(const ag_i_reducer_t *r, int64_t *n, ag_error_t *err)
{
    (void)err;
    const ag_mpi_reduce_t *x = r->ctx;
    int64_t mine = *n;
    MPI_Allreduce(&mine, n, 1, MPI_INT64_T, MPI_SUM, x->comm);
    return AG_OK;
}

void ag_i_mpi_reducer(ag_i_reducer_t *r, ag_mpi_reduce_t *ctx, MPI_Comm comm,
                      const ag_mpi_part_t *part, ag_mpi_stats_t *stats)
{
    *ctx = (ag_mpi_reduce_t){comm, part, stats};
    *r = (ag_i_reducer_t){add_f, add_d, count, ctx, 1};
}
