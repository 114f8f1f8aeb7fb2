/*
 * The halo: each process receives, once a round, the K and V rows of the
 * sources its destinations read that other processes own, in one
 * MPI_Alltoallw whose datatypes name the rows in place (sent from and
 * received into the window of K and V rows: no packing, no buffers).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi/mpi.h"
#include "base/base.h"

double ag_i_mpi_now(void)
{
    return MPI_Wtime();
}

ag_nbhd_t ag_i_part_view(const ag_mpi_part_t *part)
{
    ag_nbhd_t v = part->nb;
    v.n_nodes = part->n_nodes, v.n_edges = part->n_edges;
    v.edge_ptr = part->nb.edge_ptr - part->lo;
    v.run_ptr = part->nb.run_ptr - part->lo;
    v.edge_id = NULL;
    return v;
}

void ag_i_halo_destroy(ag_halo_t *h)
{
    for (int p = 0; p < h->ranks; p++) {
        if (h->send_type && h->send_type[p] != MPI_DATATYPE_NULL)
            MPI_Type_free(&h->send_type[p]);
        if (h->recv_type && h->recv_type[p] != MPI_DATATYPE_NULL)
            MPI_Type_free(&h->recv_type[p]);
    }
    free(h->K), free(h->V);
    free(h->recv_count), free(h->recv_displ), free(h->send_count), free(h->send_displ);
    free(h->recv_rows), free(h->send_rows), free(h->send_type), free(h->recv_type);
    free(h->send_n), free(h->recv_n), free(h->zeros);
    memset(h, 0, sizeof *h);
}

/* The K and V rows rows[0..n) of the window as one datatype of absolute
   addresses (MPI_BOTTOM), or MPI_DATATYPE_NULL when n is 0. */
static int rows_type(MPI_Datatype *t, const ag_halo_t *h, const int64_t *rows, int n,
                     MPI_Datatype row, ag_error_t *err)
{
    *t = MPI_DATATYPE_NULL;
    if (n == 0)
        return AG_OK;
    if (n > INT32_MAX / 2)   /* K and V rows: 2n blocks, an int count */
        return ag_fail(err, AG_ELIMIT, "a halo of %d rows is beyond what one MPI datatype "
                       "describes (2^30)", n);
    MPI_Aint *at = ag_alloc(2 * (int64_t)n, sizeof *at, err, "halo");
    if (!at)
        return ag_alloc_status();
    for (int k = 0; k < n; k++) {
        const int64_t r = (rows[k] - h->wlo) * h->HD;
        MPI_Get_address(h->K + r, &at[k]);
        MPI_Get_address(h->V + r, &at[n + k]);
    }
    MPI_Type_create_hindexed_block(2 * n, 1, at, row, t);
    MPI_Type_commit(t);
    free(at);
    return AG_OK;
}

static int make_types(ag_halo_t *h, ag_error_t *err)
{
    const int P = h->ranks;
    h->send_type = ag_alloc(P, sizeof *h->send_type, err, "halo");
    h->recv_type = ag_alloc(P, sizeof *h->recv_type, err, "halo");
    h->send_n = ag_alloc(P, sizeof *h->send_n, err, "halo");
    h->recv_n = ag_alloc(P, sizeof *h->recv_n, err, "halo");
    h->zeros = ag_calloc(P, sizeof *h->zeros, err, "halo");
    if (!h->send_type || !h->recv_type || !h->send_n || !h->recv_n || !h->zeros)
        return ag_alloc_status();
    for (int p = 0; p < P; p++)
        h->send_type[p] = h->recv_type[p] = MPI_DATATYPE_NULL;
    MPI_Datatype row;
    MPI_Type_contiguous((int)h->HD, MPI_FLOAT, &row);
    int rc = AG_OK;
    for (int p = 0; !rc && p < P; p++) {
        rc = rows_type(&h->send_type[p], h, h->send_rows + h->send_displ[p], h->send_count[p],
                       row, err);
        if (!rc)
            rc = rows_type(&h->recv_type[p], h, h->recv_rows + h->recv_displ[p],
                           h->recv_count[p], row, err);
    }
    MPI_Type_free(&row);
    for (int p = 0; p < P; p++) {   /* an empty exchange: 0 bytes */
        if (h->send_type[p] == MPI_DATATYPE_NULL)
            MPI_Type_dup(MPI_BYTE, &h->send_type[p]);
        if (h->recv_type[p] == MPI_DATATYPE_NULL)
            MPI_Type_dup(MPI_BYTE, &h->recv_type[p]);
        h->send_n[p] = h->send_count[p] > 0, h->recv_n[p] = h->recv_count[p] > 0;
    }
    return rc;
}

/* The window: own rows and every source read, widened to whole groups of 8
   rows (the tiled kernel's register blocks start there), within 0..N. */
void ag_i_halo_window(const ag_mpi_part_t *part, int64_t *wlo, int64_t *whi)
{
    int64_t lo = part->lo, hi = part->hi;
    const ag_nbhd_t *nb = &part->nb;
    for (int64_t r = 0; r < nb->n_runs; r++) {
        lo = nb->run_src[r] < lo ? nb->run_src[r] : lo;
        hi = nb->run_src[r] + nb->run_len[r] > hi ? nb->run_src[r] + nb->run_len[r] : hi;
    }
    lo -= lo % 8;
    hi = hi + (8 - hi % 8) % 8 > part->n_nodes ? part->n_nodes : hi + (8 - hi % 8) % 8;
    *wlo = lo, *whi = hi > lo ? hi : lo;
}

/* The remote rows read, ascending, into h->recv_rows; counts per owner. */
static int list_reads(ag_halo_t *h, const ag_mpi_part_t *part, ag_error_t *err)
{
    const int64_t w = h->whi - h->wlo;
    int32_t *cover = ag_calloc(w + 1, sizeof *cover, err, "halo");
    if (!cover)
        return ag_alloc_status();
    const ag_nbhd_t *nb = &part->nb;
    for (int64_t r = 0; r < nb->n_runs; r++) {   /* +1 where a run starts, -1 past its end */
        cover[nb->run_src[r] - h->wlo]++;
        cover[nb->run_src[r] + nb->run_len[r] - h->wlo]--;
    }
    int64_t n = 0, depth = 0;
    for (int64_t j = 0; j < w; j++) {
        depth += cover[j];
        const int64_t g = h->wlo + j;
        cover[j] = depth > 0 && (g < part->lo || g >= part->hi);
        n += cover[j];
    }
    h->recv_rows = ag_alloc(n + 1, sizeof *h->recv_rows, err, "halo");
    if (!h->recv_rows) {
        free(cover);
        return ag_alloc_status();
    }
    if (n > INT32_MAX / 2) {   /* before the int counts below could overflow */
        free(cover);
        return ag_fail(err, AG_ELIMIT, "a halo of %lld rows is beyond what one MPI datatype "
                       "describes (2^30)", (long long)n);
    }
    int p = 0;
    for (int64_t j = 0, k = 0; j < w; j++)
        if (cover[j]) {
            const int64_t g = h->wlo + j;
            while (g >= part->bounds[p + 1])
                p++;
            h->recv_rows[k++] = g;
            h->recv_count[p]++;
        }
    h->n_recv = n;
    free(cover);
    return AG_OK;
}

void ag_i_mpi_displs(const int *count, int *displ, int P)
{
    displ[0] = 0;
    for (int p = 1; p < P; p++)
        displ[p] = displ[p - 1] + count[p - 1];
}

int ag_i_halo_plan(ag_halo_t *h, MPI_Comm comm, const ag_mpi_part_t *part, int64_t HD,
                   ag_error_t *err)
{
    memset(h, 0, sizeof *h);
    const int P = part->ranks;
    h->HD = HD;
    ag_i_halo_window(part, &h->wlo, &h->whi);
    const int64_t w = h->whi - h->wlo;
    int rc = AG_OK;
    h->K = ag_calloc((w ? w : 1) * HD, sizeof(float), err, "K rows");
    h->V = ag_calloc((w ? w : 1) * HD, sizeof(float), err, "V rows");
    h->recv_count = ag_calloc(P, sizeof(int), err, "halo");
    h->recv_displ = ag_calloc(P, sizeof(int), err, "halo");
    h->send_count = ag_calloc(P, sizeof(int), err, "halo");
    h->send_displ = ag_calloc(P, sizeof(int), err, "halo");
    if (!h->K || !h->V || !h->recv_count || !h->recv_displ || !h->send_count || !h->send_displ)
        rc = ag_alloc_status();
    if (!rc)
        rc = list_reads(h, part, err);
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        ag_i_halo_destroy(h);
        return rc;
    }
    MPI_Alltoall(h->recv_count, 1, MPI_INT, h->send_count, 1, MPI_INT, comm);
    ag_i_mpi_displs(h->recv_count, h->recv_displ, P);
    ag_i_mpi_displs(h->send_count, h->send_displ, P);
    h->n_send = h->send_displ[P - 1] + (int64_t)h->send_count[P - 1];
    h->send_rows = ag_alloc(h->n_send + 1, sizeof *h->send_rows, err, "halo");
    rc = h->send_rows ? AG_OK : ag_alloc_status();
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        ag_i_halo_destroy(h);
        return rc;
    }
    MPI_Alltoallv(h->recv_rows, h->recv_count, h->recv_displ, MPI_INT64_T, h->send_rows,
                  h->send_count, h->send_displ, MPI_INT64_T, comm);
    h->ranks = P;
    if ((rc = ag_mpi_agree(comm, make_types(h, err), err)))
        ag_i_halo_destroy(h);
    return rc;
}

void ag_i_halo_exchange(ag_halo_t *h, MPI_Comm comm, int64_t HD, ag_mpi_stats_t *stats)
{
    const double t0 = ag_i_mpi_now();
    MPI_Alltoallw(MPI_BOTTOM, h->send_n, h->zeros, h->send_type, MPI_BOTTOM, h->recv_n,
                  h->zeros, h->recv_type, comm);
    if (stats) {
        stats->seconds_comm += ag_i_mpi_now() - t0;
        stats->bytes_sent += h->n_send * 2 * HD * (int64_t)sizeof(float);
        stats->bytes_received += h->n_recv * 2 * HD * (int64_t)sizeof(float);
        stats->halo_rows = h->n_recv;
    }
}

void ag_i_halos_destroy(ag_halos_t *hs)
{
    for (int k = 0; hs->h && k < hs->n; k++)
        ag_i_halo_destroy(&hs->h[k]);
    free(hs->HD), free(hs->h);
    memset(hs, 0, sizeof *hs);
}

int ag_i_halos_plan(ag_halos_t *hs, MPI_Comm comm, const ag_mpi_part_t *part,
                    const ag_weights_t *layers, int n_layers, int rounds, ag_error_t *err)
{
    memset(hs, 0, sizeof *hs);
    const int used = n_layers == 1 || rounds < 1 ? 1 : rounds;
    hs->HD = ag_alloc(used, sizeof *hs->HD, err, "halo");
    hs->h = ag_calloc(used, sizeof *hs->h, err, "halo");
    int rc = ag_mpi_agree(comm, hs->HD && hs->h ? AG_OK : ag_alloc_status(), err);
    for (int r = 0; !rc && r < used; r++) {   /* every process sees the same layers */
        const ag_weights_t *w = &layers[n_layers == 1 ? 0 : r];
        const int64_t HD = w->H * w->d;
        int k = 0;
        while (k < hs->n && hs->HD[k] != HD)
            k++;
        if (k < hs->n)
            continue;
        hs->HD[k] = HD;
        if (!(rc = ag_i_halo_plan(&hs->h[k], comm, part, HD, err)))
            hs->n++;
    }
    if (rc)
        ag_i_halos_destroy(hs);
    return rc;
}

ag_halo_t *ag_i_halos_for(const ag_halos_t *hs, int64_t HD)
{
    for (int k = 0; k < hs->n; k++)
        if (hs->HD[k] == HD)
            return &hs->h[k];
    return NULL;
}
