/*
 * Parts of a graph: contiguous ranges of destinations balanced by work
 * (in-edges plus one per row), cut at multiples of AG_MPI_ROW_ALIGN rows, and
 * the neighbourhoods of each part with sources kept in global numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attngraph/mpi.h"
#include "attngraph/partition.h"
#include "mpi/mpi.h"
#include "base/base.h"
#include "graph/graph.h"
#include "io/io.h"
#include "kernels/kernels.h"

void ag_mpi_part_destroy(ag_mpi_part_t *part)
{
    if (!part)
        return;
    free(part->bounds);
    free(part->node_of);
    ag_nbhd_destroy(&part->nb);
    memset(part, 0, sizeof *part);
}

/* bounds [P+1] from the whole graph's edge_ptr [N+1]: ag_partition_bounds's
   balanced cuts, each moved to the nearest multiple of AG_MPI_ROW_ALIGN (the
   contiguous parts of every input kind). While the graph has a block of
   AG_MPI_ROW_ALIGN rows for each process, every part takes one at least
   (rounding left causal 4100 nodes on 4 processes one part empty, and such
   a process can hold no per-node weights to train). */
int ag_i_mpi_cut_bounds(const int64_t *edge_ptr, int64_t N, int P, int64_t *bounds,
                        ag_error_t *err)
{
    int rc = ag_partition_bounds(bounds, P, N, edge_ptr, AG_PARTITION_NODE_WORK, err);
    if (rc)
        return rc;
    const int64_t blocks = (N + AG_MPI_ROW_ALIGN - 1) / AG_MPI_ROW_ALIGN;
    for (int p = 1; p < P; p++) {
        int64_t b = (bounds[p] + AG_MPI_ROW_ALIGN / 2) / AG_MPI_ROW_ALIGN * AG_MPI_ROW_ALIGN;
        if (blocks >= P) {   /* a block before, one for each part after */
            const int64_t least = bounds[p - 1] + AG_MPI_ROW_ALIGN;
            const int64_t most = (blocks - (P - p)) * AG_MPI_ROW_ALIGN;
            b = b < least ? least : b > most ? most : b;
        }
        b = b > N ? N : b < bounds[p - 1] ? bounds[p - 1] : b;
        bounds[p] = b;
    }
    return AG_OK;
}

/* What every process agrees the whole graph's layout is (its kernel choice,
   ag_i_layout_kernel's): every part's destinations one run each, and the
   block-sparse path's cells summed over the parts (-1 when a part has none).
   Collective; part->nb, n_nodes and n_edges set. */
static void agree_layout(ag_mpi_part_t *part, MPI_Comm comm)
{
    int64_t runs = ag_i_one_run(&part->nb, 0, part->nb.n_nodes), every;
    MPI_Allreduce(&runs, &every, 1, MPI_INT64_T, MPI_MIN, comm);
    part->one_run = (int)every;
    part->block_cells = -1;
    if (every)
        return;
    const ag_nbhd_t v = ag_i_part_view(part);
    const int64_t cells = ag_i_block_cells(&v, part->lo, part->hi);
    int64_t mine[2] = {cells < 0 ? -1 : 0, cells}, all[2];
    MPI_Allreduce(&mine[0], &all[0], 1, MPI_INT64_T, MPI_MIN, comm);
    MPI_Allreduce(&mine[1], &all[1], 1, MPI_INT64_T, MPI_SUM, comm);
    part->block_cells = all[0] < 0 ? -1 : all[1];
}

/* out: destinations lo..hi-1 of nb, renumbered from 0, sources global. */
static int slice(ag_nbhd_t *out, const ag_nbhd_t *nb, int64_t lo, int64_t hi, ag_error_t *err)
{
    memset(out, 0, sizeof *out);
    const int64_t n = hi - lo, e0 = nb->edge_ptr[lo], r0 = nb->run_ptr[lo];
    out->n_nodes = n;
    out->n_edges = nb->edge_ptr[hi] - e0;
    out->n_runs = nb->run_ptr[hi] - r0;
    out->edge_ptr = ag_alloc(n + 1, sizeof(int64_t), err, "part");
    out->run_ptr = ag_alloc(n + 1, sizeof(int64_t), err, "part");
    out->run_src = ag_alloc(out->n_runs + 1, sizeof(int64_t), err, "part");
    out->run_len = ag_alloc(out->n_runs + 1, sizeof(int64_t), err, "part");
    if (!out->edge_ptr || !out->run_ptr || !out->run_src || !out->run_len) {
        ag_nbhd_destroy(out);
        return ag_alloc_status();
    }
    for (int64_t i = 0; i <= n; i++) {
        out->edge_ptr[i] = nb->edge_ptr[lo + i] - e0;
        out->run_ptr[i] = nb->run_ptr[lo + i] - r0;
    }
    memcpy(out->run_src, nb->run_src + r0, (size_t)out->n_runs * sizeof(int64_t));
    memcpy(out->run_len, nb->run_len + r0, (size_t)out->n_runs * sizeof(int64_t));
    return AG_OK;
}

static int part_begin(ag_mpi_part_t *part, MPI_Comm comm, ag_error_t *err)
{
    memset(part, 0, sizeof *part);
    MPI_Comm_size(comm, &part->ranks);
    MPI_Comm_rank(comm, &part->rank);
    part->bounds = ag_alloc(part->ranks + 1, sizeof(int64_t), err, "part bounds");
    return part->bounds ? AG_OK : ag_alloc_status();
}

int ag_mpi_part_local(ag_mpi_part_t *part, MPI_Comm comm, const ag_nbhd_t *nb,
                      ag_error_t *err)
{
    int rc = part_begin(part, comm, err);
    if (!rc) {
        part->n_nodes = nb->n_nodes, part->n_edges = nb->n_edges;
        rc = ag_i_mpi_cut_bounds(nb->edge_ptr, nb->n_nodes, part->ranks, part->bounds, err);
        part->lo = part->bounds[part->rank], part->hi = part->bounds[part->rank + 1];
        if (!rc)
            rc = slice(&part->nb, nb, part->lo, part->hi, err);
    }
    if ((rc = ag_mpi_agree(comm, rc, err)))
        ag_mpi_part_destroy(part);
    else
        agree_layout(part, comm);
    return rc;
}

/* ---- root sends the parts ---- */

enum { TAG_SIZES = 71, TAG_ARRAYS, TAG_READY };

static int too_large(int64_t n, ag_error_t *err)
{
    return n > INT32_MAX ? ag_fail(err, AG_ELIMIT, "a part of %lld entries is beyond what one "
                                   "MPI message carries (2^31)", (long long)n) : AG_OK;
}

/* Sends part p's arrays (sizes first: n, E, R; n = -1 when root failed to cut
   it), once p says it has room for them. */
static int send_part(const ag_nbhd_t *nb, const int64_t *bounds, int p, MPI_Comm comm,
                     ag_error_t *err)
{
    ag_nbhd_t s;
    int rc = slice(&s, nb, bounds[p], bounds[p + 1], err);
    if (!rc)
        rc = too_large(s.n_runs > s.n_nodes ? s.n_runs : s.n_nodes + 1, err);
    int64_t sizes[3] = {rc ? -1 : s.n_nodes, s.n_edges, s.n_runs};
    MPI_Send(sizes, 3, MPI_INT64_T, p, TAG_SIZES, comm);
    int ready = 0;   /* p could allocate the arrays (else it reports the failure) */
    if (!rc)
        MPI_Recv(&ready, 1, MPI_INT, p, TAG_READY, comm, MPI_STATUS_IGNORE);
    if (!rc && ready) {
        MPI_Send(s.edge_ptr, (int)(s.n_nodes + 1), MPI_INT64_T, p, TAG_ARRAYS, comm);
        MPI_Send(s.run_ptr, (int)(s.n_nodes + 1), MPI_INT64_T, p, TAG_ARRAYS, comm);
        MPI_Send(s.run_src, (int)s.n_runs, MPI_INT64_T, p, TAG_ARRAYS, comm);
        MPI_Send(s.run_len, (int)s.n_runs, MPI_INT64_T, p, TAG_ARRAYS, comm);
    }
    ag_nbhd_destroy(&s);
    return rc;
}

static int receive_part(ag_nbhd_t *out, int root, MPI_Comm comm, ag_error_t *err)
{
    memset(out, 0, sizeof *out);
    int64_t sizes[3];
    MPI_Recv(sizes, 3, MPI_INT64_T, root, TAG_SIZES, comm, MPI_STATUS_IGNORE);
    if (sizes[0] < 0)
        return ag_fail(err, AG_EINVAL, "the root process could not cut this part");
    out->n_nodes = sizes[0], out->n_edges = sizes[1], out->n_runs = sizes[2];
    out->edge_ptr = ag_alloc(out->n_nodes + 1, sizeof(int64_t), err, "part");
    out->run_ptr = ag_alloc(out->n_nodes + 1, sizeof(int64_t), err, "part");
    out->run_src = ag_alloc(out->n_runs + 1, sizeof(int64_t), err, "part");
    out->run_len = ag_alloc(out->n_runs + 1, sizeof(int64_t), err, "part");
    int ready = out->edge_ptr && out->run_ptr && out->run_src && out->run_len;
    const int rc = ready ? AG_OK : ag_alloc_status();
    MPI_Send(&ready, 1, MPI_INT, root, TAG_READY, comm);
    if (!ready)   /* nothing comes: every process learns the failure from agree */
        return rc;
    MPI_Recv(out->edge_ptr, (int)(out->n_nodes + 1), MPI_INT64_T, root, TAG_ARRAYS, comm,
             MPI_STATUS_IGNORE);
    MPI_Recv(out->run_ptr, (int)(out->n_nodes + 1), MPI_INT64_T, root, TAG_ARRAYS, comm,
             MPI_STATUS_IGNORE);
    MPI_Recv(out->run_src, (int)out->n_runs, MPI_INT64_T, root, TAG_ARRAYS, comm,
             MPI_STATUS_IGNORE);
    MPI_Recv(out->run_len, (int)out->n_runs, MPI_INT64_T, root, TAG_ARRAYS, comm,
             MPI_STATUS_IGNORE);
    return AG_OK;
}

/* Root sends every process its part of nb at part->bounds (root's; rc is
   root's status so far: on failure nothing is sent). */
static int send_parts(ag_mpi_part_t *part, MPI_Comm comm, const ag_nbhd_t *nb, int root, int rc,
                      ag_error_t *err)
{
    const int P = part->ranks, me = part->rank;
    int64_t head[2] = {0, 0};
    if (me == root && !rc)
        head[0] = nb->n_nodes, head[1] = nb->n_edges;
    if ((rc = ag_mpi_agree(comm, rc, err)))
        return rc;
    MPI_Bcast(head, 2, MPI_INT64_T, root, comm);
    MPI_Bcast(part->bounds, P + 1, MPI_INT64_T, root, comm);
    part->n_nodes = head[0], part->n_edges = head[1];
    part->lo = part->bounds[me], part->hi = part->bounds[me + 1];
    if (me == root) {
        for (int p = 0; p < P; p++)
            if (p != root) {
                ag_error_t e;
                send_part(nb, part->bounds, p, comm, &e);   /* p reports the failure */
            }
        rc = slice(&part->nb, nb, part->lo, part->hi, err);
    } else {
        rc = receive_part(&part->nb, root, comm, err);
    }
    if (!(rc = ag_mpi_agree(comm, rc, err)))
        agree_layout(part, comm);
    return rc;
}

int ag_mpi_part_scatter(ag_mpi_part_t *part, MPI_Comm comm, const ag_nbhd_t *nb, int root,
                        ag_error_t *err)
{
    int rc = part_begin(part, comm, err);
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        ag_mpi_part_destroy(part);
        return rc;
    }
    if (part->rank == root)
        rc = ag_i_mpi_cut_bounds(nb->edge_ptr, nb->n_nodes, part->ranks, part->bounds, err);
    if ((rc = send_parts(part, comm, nb, root, rc, err)))
        ag_mpi_part_destroy(part);
    return rc;
}

/* ---- root renumbers the graph by a partition and sends the parts ---- */

static int by_int64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* out: nb with node pt->part_nodes[k] as node k; each destination's sources
   renumbered and sorted ascending (the form ag_nbhd_from_csr compiles). */
static int renumber(ag_nbhd_t *out, const ag_nbhd_t *nb, const ag_partition_t *pt,
                    ag_error_t *err)
{
    const int64_t N = nb->n_nodes, E = nb->n_edges;
    int64_t *new_of = ag_alloc(N, sizeof *new_of, err, "renumbering");
    int64_t *indptr = ag_alloc(N + 1, sizeof *indptr, err, "renumbering");
    int64_t *indices = ag_alloc(E ? E : 1, sizeof *indices, err, "renumbering");
    int rc = new_of && indptr && indices ? AG_OK : ag_alloc_status();
    if (!rc) {
        for (int64_t k = 0; k < N; k++)
            new_of[pt->part_nodes[k]] = k;
        indptr[0] = 0;
        for (int64_t k = 0; k < N; k++) {
            const int64_t i = pt->part_nodes[k];
            int64_t at = indptr[k];
            for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
                for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++)
                    indices[at++] = new_of[j];
            qsort(indices + indptr[k], (size_t)(at - indptr[k]), sizeof *indices, by_int64);
            indptr[k + 1] = at;
        }
        rc = ag_nbhd_from_csr(out, N, indptr, indices, err);
    }
    free(new_of), free(indptr), free(indices);
    return rc;
}

static int check_partition(const ag_partition_t *pt, const ag_nbhd_t *nb, int P,
                           ag_error_t *err)
{
    if (!pt || !nb || pt->n_nodes != nb->n_nodes || pt->n_parts != P)
        return ag_fail(err, AG_EINVAL, "partition: %d parts of %lld nodes for a graph of %lld "
                       "nodes on %d processes; expected one part a process, every node once",
                       pt ? pt->n_parts : 0, pt ? (long long)pt->n_nodes : 0LL,
                       nb ? (long long)nb->n_nodes : 0LL, P);
    if (nb->n_nodes > INT32_MAX)
        return ag_fail(err, AG_ELIMIT, "partition: %lld nodes are beyond what MPI_Scatterv "
                       "counts (2^31)", (long long)nb->n_nodes);
    const int64_t N = nb->n_nodes;
    if (!pt->part_ptr || !pt->part_nodes || pt->part_ptr[0] != 0 || pt->part_ptr[P] != N)
        return ag_fail(err, AG_EINVAL, "partition: part_ptr runs from %lld to %lld; expected "
                       "0 to the %lld nodes", pt->part_ptr ? (long long)pt->part_ptr[0] : -1LL,
                       pt->part_ptr ? (long long)pt->part_ptr[P] : -1LL, (long long)N);
    for (int p = 0; p < P; p++)
        if (pt->part_ptr[p + 1] < pt->part_ptr[p])
            return ag_fail(err, AG_EINVAL, "partition: part_ptr[%d] = %lld is below part_ptr[%d] "
                           "= %lld; expected them ascending", p + 1,
                           (long long)pt->part_ptr[p + 1], p, (long long)pt->part_ptr[p]);
    uint8_t *seen = ag_calloc(N ? N : 1, 1, err, "partition check");
    if (!seen)
        return ag_alloc_status();
    int rc = AG_OK;
    for (int64_t k = 0; !rc && k < N; k++) {   /* every node once: a permutation */
        const int64_t i = pt->part_nodes[k];
        if (i < 0 || i >= N || seen[i])
            rc = ag_fail(err, AG_EINVAL, "partition: part_nodes[%lld] = %lld; expected each "
                         "node 0..%lld exactly once", (long long)k, (long long)i,
                         (long long)N - 1);
        else
            seen[i] = 1;
    }
    free(seen);
    return rc;
}

/* Each process's node_of: root's pt->part_nodes, cut at the bounds. */
static int scatter_node_of(ag_mpi_part_t *part, MPI_Comm comm, const ag_partition_t *pt,
                           int root, ag_error_t *err)
{
    const int P = part->ranks, me = part->rank;
    const int64_t n = part->hi - part->lo;
    int *count = ag_alloc(P, sizeof(int), err, "part"), *displ = ag_alloc(P, sizeof(int), err,
                                                                         "part");
    part->node_of = ag_alloc(n ? n : 1, sizeof *part->node_of, err, "part");
    int rc = count && displ && part->node_of ? AG_OK : ag_alloc_status();
    if (!(rc = ag_mpi_agree(comm, rc, err))) {
        for (int p = 0; p < P; p++)
            count[p] = (int)(part->bounds[p + 1] - part->bounds[p]),
            displ[p] = (int)part->bounds[p];
        MPI_Scatterv(me == root ? pt->part_nodes : NULL, count, displ, MPI_INT64_T,
                     part->node_of, count[me], MPI_INT64_T, root, comm);
    }
    free(count), free(displ);
    return rc;
}

int ag_mpi_part_scatter_partition(ag_mpi_part_t *part, MPI_Comm comm, const ag_nbhd_t *nb,
                                  const ag_partition_t *pt, int root, ag_error_t *err)
{
    int rc = part_begin(part, comm, err);
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        ag_mpi_part_destroy(part);
        return rc;
    }
    ag_nbhd_t re;
    memset(&re, 0, sizeof re);
    if (part->rank == root) {
        rc = check_partition(pt, nb, part->ranks, err);
        if (!rc)
            rc = renumber(&re, nb, pt, err);
        if (!rc)
            memcpy(part->bounds, pt->part_ptr, (size_t)(part->ranks + 1) * sizeof(int64_t));
    }
    rc = send_parts(part, comm, &re, root, rc, err);
    ag_nbhd_destroy(&re);
    /* parts start anywhere, and the tiled kernel's blocks need aligned starts: the
       gather kernel takes every renumbered part (results agree to rounding anyway) */
    part->one_run = 0, part->block_cells = -1;
    if (!rc)
        rc = scatter_node_of(part, comm, pt, root, err);
    if (rc)
        ag_mpi_part_destroy(part);
    return rc;
}

/* ---- each process reads its part of a CSR ---- */

/* indptr [N+1] as a whole graph's with only lo..hi-1 having in-edges: the
   form ag_nbhd_from_csr checks and compiles. */
static int64_t *own_indptr(const int64_t *indptr, int64_t N, int64_t lo, int64_t hi,
                           ag_error_t *err)
{
    int64_t *p = ag_alloc(N + 1, sizeof *p, err, "CSR part");
    if (!p)
        return NULL;
    for (int64_t i = 0; i <= N; i++) {
        const int64_t at = i < lo ? lo : i > hi ? hi : i;
        p[i] = indptr[at] - indptr[lo];
    }
    return p;
}

static int check_indptr(const int64_t *indptr, int64_t n_ptr, const char *path, ag_error_t *err)
{
    if (n_ptr < 2)
        return ag_fail(err, AG_EINVAL, "%s has %lld entr%s; expected N+1 >= 2", path,
                       (long long)n_ptr, n_ptr == 1 ? "y" : "ies");
    if (indptr[0] != 0)
        return ag_fail(err, AG_EINVAL, "%s starts at %lld; expected 0", path,
                       (long long)indptr[0]);
    for (int64_t i = 0; i + 1 < n_ptr; i++)
        if (indptr[i + 1] < indptr[i])
            return ag_fail(err, AG_EINVAL, "%s decreases at entry %lld (%lld after %lld); "
                           "expected non-decreasing", path, (long long)(i + 1),
                           (long long)indptr[i + 1], (long long)indptr[i]);
    return AG_OK;
}

/* The part of rows lo..hi-1 as a whole-graph nbhd (other rows empty), self applied. */
static int read_own(ag_nbhd_t *whole, const int64_t *indptr, int64_t N, int64_t lo, int64_t hi,
                    const char *indices_path, ag_self_loops_t self, ag_error_t *err)
{
    int64_t *idx = NULL, total = 0, *ptr = NULL;
    int rc = ag_i_index_read_npy_part(&idx, &total, indices_path, indptr[lo],
                                      indptr[hi] - indptr[lo], err);
    if (!rc && total != indptr[N])
        rc = ag_fail(err, AG_EINVAL, "the indptr file ends at %lld, but %s has %lld entr%s",
                     (long long)indptr[N], indices_path, (long long)total,
                     total == 1 ? "y" : "ies");
    /* the part's entries, named by their places in the file (as one process names them) */
    for (int64_t i = lo; !rc && i < hi; i++)
        for (int64_t s = indptr[i]; !rc && s < indptr[i + 1]; s++) {
            const int64_t j = idx[s - indptr[lo]];
            if (j < 0 || j >= N)
                rc = ag_fail(err, AG_EINVAL, "%s: indices[%lld] is %lld; expected a node in "
                             "0..%lld", indices_path, (long long)s, (long long)j,
                             (long long)N - 1);
            else if (s > indptr[i] && j < idx[s - 1 - indptr[lo]])
                rc = ag_fail(err, AG_EINVAL, "%s: sources of node %lld are not ascending "
                             "(indices[%lld] = %lld after %lld)", indices_path, (long long)i,
                             (long long)s, (long long)j, (long long)idx[s - 1 - indptr[lo]]);
        }
    if (!rc && !(ptr = own_indptr(indptr, N, lo, hi, err)))
        rc = ag_alloc_status();
    if (!rc)
        rc = ag_nbhd_from_csr(whole, N, ptr, idx, err);
    if (!rc && self != AG_SELF_KEEP)
        rc = ag_nbhd_self_loops(whole, self, err);
    free(idx);
    free(ptr);
    return rc;
}

int ag_mpi_part_from_csr(ag_mpi_part_t *part, MPI_Comm comm, const char *indptr_path,
                         const char *indices_path, ag_self_loops_t self, ag_error_t *err)
{
    int rc = part_begin(part, comm, err);
    int64_t *indptr = NULL, n_ptr = 0;
    if (!rc)
        rc = ag_index_read_npy(&indptr, &n_ptr, indptr_path, err);
    if (!rc)
        rc = check_indptr(indptr, n_ptr, indptr_path, err);
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        free(indptr);
        ag_mpi_part_destroy(part);
        return rc;
    }
    const int64_t N = n_ptr - 1;
    part->n_nodes = N;
    /* the cut counts the file's edges: --self-loops adds at most one loop to a row
       and removes at most the loops it has */
    rc = ag_i_mpi_cut_bounds(indptr, N, part->ranks, part->bounds, err);
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        free(indptr);
        ag_mpi_part_destroy(part);
        return rc;
    }
    part->lo = part->bounds[part->rank], part->hi = part->bounds[part->rank + 1];
    ag_nbhd_t whole;
    memset(&whole, 0, sizeof whole);
    rc = read_own(&whole, indptr, N, part->lo, part->hi, indices_path, self, err);
    free(indptr);
    if (!rc)
        rc = slice(&part->nb, &whole, part->lo, part->hi, err);
    ag_nbhd_destroy(&whole);
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        ag_mpi_part_destroy(part);
        return rc;
    }
    MPI_Allreduce(&part->nb.n_edges, &part->n_edges, 1, MPI_INT64_T, MPI_SUM, comm);
    agree_layout(part, comm);
    return AG_OK;
}

/* ---- each process compiles its part of a pattern ---- */

int ag_mpi_part_from_pattern(ag_mpi_part_t *part, MPI_Comm comm, const ag_pattern_t *pattern,
                             int64_t N, ag_self_loops_t self, ag_error_t *err)
{
    int rc = part_begin(part, comm, err);
    int64_t *edge_ptr = NULL;
    if (!rc)
        rc = ag_i_pattern_edge_ptr(&edge_ptr, pattern, N, self, err);
    if (!rc)
        rc = ag_i_mpi_cut_bounds(edge_ptr, N, part->ranks, part->bounds, err);
    if (!rc) {
        part->n_nodes = N, part->n_edges = edge_ptr[N];
        part->lo = part->bounds[part->rank], part->hi = part->bounds[part->rank + 1];
    }
    free(edge_ptr);
    if (!rc)
        rc = ag_i_nbhd_from_pattern_part(&part->nb, pattern, N, part->lo, part->hi, self, err);
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        ag_mpi_part_destroy(part);
        return rc;
    }
    agree_layout(part, comm);
    return AG_OK;
}
