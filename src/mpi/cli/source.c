/*
 * Where a process's part comes from: a pattern each process compiles, a CSR
 * each process reads its slice of, or a graph file rank 0 reads and cuts; and
 * the rows of the features each process starts from.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "model/model.h"
#include "attngraph/igraph.h"
#include "mpi/mpi.h"
#include "mpi/cli/mpi_cli.h"
#include "cli/plan.h"

int processes_here(MPI_Comm comm)
{
    MPI_Comm local;
    int here = 1;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) ==
        MPI_SUCCESS) {
        MPI_Comm_size(local, &here);
        MPI_Comm_free(&local);
    }
    return here;
}

int threads_per_process(MPI_Comm comm)
{
    const int here = processes_here(comm);
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > here ? (int)(cores / here) : 1;
}

static int open_csr_part(ag_mpi_part_t *part, MPI_Comm comm, const source_opts_t *o,
                         int *usage, ag_error_t *err)
{
    char *indptr;
    const char *indices;
    int rc = csr_paths(o->csr, &indptr, &indices, usage, err);
    if (rc)
        return rc;
    rc = ag_mpi_part_from_csr(part, comm, indptr, indices, o->self, err);
    if (!rc && part->n_nodes > o->max_nodes)
        rc = ag_fail(err, AG_ELIMIT, "%s describes %lld nodes, more than the limit of %lld "
                     "(--max-nodes)", indptr, (long long)part->n_nodes, (long long)o->max_nodes);
    free(indptr);
    return rc;
}

int csr_fits(MPI_Comm comm, const run_opts_t *o, ag_error_t *err)
{
    int P, rank, usage = 0;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &rank);
    const int here = processes_here(comm);   /* collective: before anything can fail */
    if (o->q || o->features || o->weights)
        return AG_OK;   /* the files decide the widths: checked as they are read */
    /* what cannot be read or is no CSR is named by the part's reading (open_part) */
    ag_error_t ignored;
    char *path = NULL;
    const char *indices;
    int64_t *ptr = NULL, n_ptr = 0, *bounds = NULL;
    if (csr_paths(o->src.csr, &path, &indices, &usage, &ignored) ||
        ag_index_read_npy(&ptr, &n_ptr, path, &ignored) || n_ptr < 2 || ptr[0] != 0 ||
        !(bounds = ag_alloc(P + 1, sizeof *bounds, &ignored, "the parts")) ||
        ag_i_mpi_cut_bounds(ptr, n_ptr - 1, P, bounds, &ignored)) {
        free(bounds), free(ptr), free(path);
        return AG_OK;
    }
    const int64_t N = n_ptr - 1, lo = bounds[rank], hi = bounds[rank + 1];
    int64_t rows = 0;   /* a run at least for each row with sources */
    for (int64_t i = lo; i < hi; i++)
        rows += ptr[i + 1] > ptr[i];
    const int64_t D = o->dim ? o->dim : DEFAULT_DIM;
    const int64_t HD = o->heads * (o->head_dim ? o->head_dim : D / o->heads);
    const plan_memory_t least = {N, hi - lo, ptr[hi] - ptr[lo], rows, 0, hi - lo, D, HD, D,
                                 0, 1, 0};
    const double need = plan_peak_bytes(&least);
    const int chosen = o->given[OPT_MAX_MEMORY - OPT_Q];
    const double share = (double)ag_memory_budget() / (chosen ? 1 : here);
    int rc = AG_OK;
    if (need > share)
        rc = ag_fail(err, AG_ELIMIT, "--csr %s: %lld nodes and %lld edges need at least %.3g GB "
                     "a process on %d (D=%lld, H*d=%lld: the part, the states and its own K "
                     "and V rows; 'attngraph plan' gives the whole estimate); the memory budget "
                     "is %.3g GB a process (%s)", o->src.csr, (long long)N, (long long)ptr[N],
                     need / 1e9, P, (long long)D, (long long)HD, share / 1e9,
                     chosen ? "--max-memory" : "the memory available now over the processes "
                                               "on this host");
    free(bounds), free(ptr), free(path);
    return rc;
}

/* A pattern's node count as attngraph run finds it: --nodes, --tokens, --labels-file
   or the pattern's own size. */
static int pattern_nodes(int64_t *N, const ag_pattern_t *pat, const source_opts_t *o,
                         int *usage, ag_error_t *err)
{
    *N = o->nodes;
    ag_labels_t labels = {0, NULL};
    int rc = AG_OK;
    if (o->tokens) {
        rc = labels_from_tokens(&labels, o->tokens, err);
        *usage = rc != AG_OK;
    } else if (o->labels_file) {
        rc = labels_from_file(&labels, o->labels_file, err);
    }
    if (!rc && labels.str) {
        if (*N && *N != labels.n) {
            *usage = o->tokens != NULL;
            rc = ag_fail(err, AG_EINVAL, "%s has %lld label%s, but --nodes is %lld",
                         o->tokens ? "--tokens" : o->labels_file, (long long)labels.n,
                         AG_PLURAL(labels.n), (long long)*N);
        }
        *N = labels.n;
    }
    ag_labels_destroy(&labels);
    if (!rc && *N == 0 && !(*N = ag_pattern_size(pat))) {
        *usage = 1;
        rc = ag_fail(err, AG_EINVAL, "pattern '%s' needs a size: give --nodes N or --tokens",
                     o->pattern);
    }
    if (!rc && *N > o->max_nodes) {
        *usage = !o->labels_file;
        rc = ag_fail(err, AG_ELIMIT, "%lld nodes is more than the limit of %lld (--max-nodes)",
                     (long long)*N, (long long)o->max_nodes);
    }
    return rc;
}

/* Every process compiles only its destinations of the pattern. */
static int open_pattern_part(ag_mpi_part_t *part, MPI_Comm comm, const source_opts_t *o,
                             int *usage, ag_error_t *err)
{
    ag_pattern_t *pat = NULL;
    int64_t N = 0;
    int rc = ag_pattern_parse(&pat, o->pattern, err);
    *usage = rc != AG_OK;
    if (!rc)
        rc = pattern_nodes(&N, pat, o, usage, err);
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        ag_pattern_free(pat);
        return rc;
    }
    rc = ag_mpi_part_from_pattern(part, comm, pat, N, o->self, err);
    if (rc == AG_EINVAL)
        *usage = !o->labels_file;   /* the spec does not fit --nodes or --tokens */
    ag_pattern_free(pat);
    return rc;
}

/* The edge cut and halo rows (all parts together) of pt. */
static int cut_and_halo(const ag_partition_t *pt, const ag_nbhd_t *nb, int64_t *cut,
                        int64_t *halo, ag_error_t *err)
{
    ag_part_stats_t *st = ag_alloc(pt->n_parts, sizeof *st, err, "partition");
    int rc = st ? ag_partition_stats(pt, nb, st, err) : ag_alloc_status();
    *cut = *halo = 0;
    for (int p = 0; !rc && p < pt->n_parts; p++)
        *cut += st[p].n_cut, *halo += st[p].n_halo;
    free(st);
    return rc;
}

/* What the contiguous parts (attngraph-mpi's default) would cut and read. */
static int contiguous_counts(const ag_nbhd_t *nb, int P, metis_info_t *m, ag_error_t *err)
{
    const int64_t N = nb->n_nodes;
    int64_t *first = ag_alloc(P + 1, sizeof *first, err, "partition");
    int32_t *owner = ag_alloc(N ? N : 1, sizeof *owner, err, "partition");
    int rc = first && owner ? AG_OK : ag_alloc_status();
    if (!rc)
        rc = ag_i_mpi_cut_bounds(nb->edge_ptr, N, P, first, err);
    for (int p = 0; !rc && p < P; p++)
        for (int64_t i = first[p]; i < first[p + 1]; i++)
            owner[i] = p;
    ag_partition_t pt;
    if (!rc && !(rc = ag_partition_from_owner(&pt, N, owner, P, err))) {
        rc = cut_and_halo(&pt, nb, &m->cut_contiguous, &m->halo_contiguous, err);
        ag_partition_destroy(&pt);
    }
    free(first), free(owner);
    return rc;
}

/* Rank 0: METIS's parts of nb (seeded as attngraph plan seeds them), counted
   against the contiguous ones. */
static int metis_parts(ag_partition_t *pt, const ag_nbhd_t *nb, int P, metis_info_t *m,
                       ag_error_t *err)
{
    int rc = ag_partition_metis(pt, nb, P, (int64_t)m->seed, err);
    if (!rc)
        rc = cut_and_halo(pt, nb, &m->cut, &m->halo, err);
    if (!rc)
        rc = contiguous_counts(nb, P, m, err);
    return rc;
}

/* --edge-bias NAME of the graph rank 0 read (s, the whole neighbourhoods): rank
   0 reads the attribute in slot order and sends each process its slots'. */
static int scatter_edge_bias(float **bias, MPI_Comm comm, const ag_mpi_part_t *part,
                             const source_t *s, const char *name, ag_error_t *err)
{
    const int here = part->rank == 0, P = part->ranks;
    const int64_t mine = part->nb.edge_ptr[part->hi - part->lo];
    float *all = NULL;
    int *count = NULL, *displ = NULL;
    int rc = AG_OK;
    if (here) {
        rc = ag_edge_attribute(&all, &s->graph, &s->nb, name, err);
        if (rc) {   /* name the file, as attngraph run does */
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            ag_fail(err, (ag_status_t)rc, "%s: --edge-bias: %s", s->desc, why);
        } else if (s->nb.n_edges > INT32_MAX) {
            rc = ag_fail(err, AG_ELIMIT, "--edge-bias: %lld messages are beyond what "
                         "MPI_Scatterv counts (2^31)", (long long)s->nb.n_edges);
        } else if (!(count = ag_alloc(P, sizeof *count, err, "edge bias")) ||
                   !(displ = ag_alloc(P, sizeof *displ, err, "edge bias"))) {
            rc = ag_alloc_status();
        } else {
            for (int p = 0; p < P; p++)
                displ[p] = (int)s->nb.edge_ptr[part->bounds[p]],
                count[p] = (int)(s->nb.edge_ptr[part->bounds[p + 1]] - displ[p]);
        }
    }
    if (!rc && !(*bias = ag_alloc(mine ? mine : 1, sizeof **bias, err, "edge bias")))
        rc = ag_alloc_status();
    if (!(rc = ag_mpi_agree(comm, rc, err)))
        MPI_Scatterv(all, count, displ, MPI_FLOAT, *bias, (int)mine, MPI_FLOAT, 0, comm);
    free(all), free(count), free(displ);
    if (rc) {
        free(*bias);
        *bias = NULL;
    }
    return rc;
}

/* A graph file (or, for METIS, a CSR too): rank 0 reads it and sends the parts;
   edge_bias (NULL: none) names an edge attribute whose slots go to *bias. */
static int open_on_root(ag_mpi_part_t *part, MPI_Comm comm, const source_opts_t *o,
                        metis_info_t *metis, const char *edge_bias, float **bias, char *desc,
                        size_t desc_size, int *usage, ag_error_t *err)
{
    int rank, P;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    source_t s;
    memset(&s, 0, sizeof s);
    const int here = rank == 0;
    int rc = here ? source_open(&s, o, usage, err) : AG_OK;
    int flags[2] = {rc != 0 && *usage, 0}, any[2];
    MPI_Allreduce(flags, any, 2, MPI_INT, MPI_MAX, comm);
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        *usage = any[0];
        if (here)
            source_close(&s);
        return rc;
    }
    snprintf(desc, desc_size, "%s", s.desc);
    MPI_Bcast(desc, (int)desc_size, MPI_CHAR, 0, comm);
    if (metis && metis->metis) {
        ag_partition_t pt;
        memset(&pt, 0, sizeof pt);
        rc = ag_mpi_agree(comm, here ? metis_parts(&pt, &s.nb, P, metis, err) : AG_OK, err);
        if (!rc)
            rc = ag_mpi_part_scatter_partition(part, comm, here ? &s.nb : NULL,
                                               here ? &pt : NULL, 0, err);
        ag_partition_destroy(&pt);
    } else {
        rc = ag_mpi_part_scatter(part, comm, here ? &s.nb : NULL, 0, err);
    }
    if (!rc && edge_bias)
        rc = scatter_edge_bias(bias, comm, part, &s, edge_bias, err);
    if (here)
        source_close(&s);
    return rc;
}

int open_part(ag_mpi_part_t *part, MPI_Comm comm, const source_opts_t *o, metis_info_t *metis,
              const char *edge_bias, float **bias, char *desc, size_t desc_size, int *usage,
              ag_error_t *err)
{
    memset(part, 0, sizeof *part);
    *usage = 0;
    if (bias)
        *bias = NULL;
    int rc;
    if (pattern_virtual_nodes(o->pattern)) {   /* the same on every process: no agreeing */
        *usage = 1;
        return ag_fail(err, AG_EINVAL, "pattern '%s': virtual nodes run on one process "
                       "(attngraph run, train): their rows read every node", o->pattern);
    }
    /* a pattern over a graph file or CSR: rank 0 compiles it over the graph and
       sends the parts, as for a graph file */
    const int over_graph = o->pattern && (o->graph || o->csr);
    if (o->csr && !over_graph && !(metis && metis->metis)) {
        rc = open_csr_part(part, comm, o, usage, err);
        snprintf(desc, desc_size, "CSR %s", o->csr);
    } else if (o->pattern && !over_graph) {
        rc = open_pattern_part(part, comm, o, usage, err);
        snprintf(desc, desc_size, "pattern '%s'", o->pattern);
    } else {
        rc = open_on_root(part, comm, o, metis, edge_bias, bias, desc, desc_size, usage, err);
    }
    int u = *usage, any_usage;
    MPI_Allreduce(&u, &any_usage, 1, MPI_INT, MPI_MAX, comm);
    *usage = any_usage;
    return rc;
}

/* all's rows in the order order [rows] gives (renumbered parts). */
static int permute_rows(ag_matrix_t *all, const int64_t *order, ag_error_t *err)
{
    ag_matrix_t p;
    int rc = ag_matrix_init(&p, all->rows, all->cols, err);
    if (rc)
        return rc;
    for (int64_t k = 0; k < all->rows; k++)
        memcpy(p.data + k * p.cols, all->data + order[k] * all->cols,
               (size_t)all->cols * sizeof *p.data);
    ag_matrix_destroy(all);
    *all = p;
    return AG_OK;
}

/* --features: rank 0 reads the file and sends each process its rows. */
static int scatter_features(ag_matrix_t *x0, MPI_Comm comm, const ag_mpi_part_t *part,
                            const char *path, ag_error_t *err)
{
    ag_matrix_t all;
    memset(&all, 0, sizeof all);
    int64_t *order = NULL;
    int rc = part->node_of ? ag_i_mpi_node_order(comm, part, 0, &order, err) : AG_OK;
    if (!rc && part->rank == 0)
        rc = ag_matrix_read_npy(&all, path, err);
    if (!rc && part->rank == 0 && all.rows != part->n_nodes)
        rc = ag_fail(err, AG_EINVAL, "%s has %lld rows; the graph has %lld nodes", path,
                     (long long)all.rows, (long long)part->n_nodes);
    if (!rc && part->rank == 0 && all.cols > INT32_MAX / 2)
        rc = ag_fail(err, AG_ELIMIT, "%s: %lld columns are too many", path, (long long)all.cols);
    if (!rc && order)
        rc = permute_rows(&all, order, err);
    free(order);
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        ag_matrix_destroy(&all);
        return rc;
    }
    int64_t D = all.cols;
    MPI_Bcast(&D, 1, MPI_INT64_T, 0, comm);
    rc = ag_matrix_init(x0, part->hi - part->lo, D, err);
    int *count = ag_alloc(part->ranks, sizeof(int), err, "features");
    int *displ = ag_alloc(part->ranks, sizeof(int), err, "features");
    if (!rc && (!count || !displ))
        rc = ag_alloc_status();
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        free(count), free(displ), ag_matrix_destroy(&all), ag_matrix_destroy(x0);
        return rc;
    }
    for (int p = 0; p < part->ranks; p++)
        count[p] = (int)(part->bounds[p + 1] - part->bounds[p]), displ[p] = (int)part->bounds[p];
    MPI_Datatype row;
    MPI_Type_contiguous((int)D, MPI_FLOAT, &row);
    MPI_Type_commit(&row);
    MPI_Scatterv(all.data, count, displ, row, x0->data, count[part->rank], row, 0, comm);
    MPI_Type_free(&row);
    free(count), free(displ);
    ag_matrix_destroy(&all);
    return AG_OK;
}

int own_features(ag_matrix_t *x0, MPI_Comm comm, const ag_mpi_part_t *part,
                 const run_opts_t *o, ag_error_t *err)
{
    int rc;
    const int64_t n = part->hi - part->lo;
    if (o->features) {
        if ((rc = scatter_features(x0, comm, part, o->features, err)))
            return rc;
    } else {
        const int64_t D = o->dim ? o->dim : DEFAULT_DIM;
        rc = ag_mpi_agree(comm, ag_matrix_init(x0, n, D, err), err);
        if (rc)
            return rc;
        if (!part->node_of)
            ag_i_random_normal_range(x0->data, part->lo * D, n * D, o->seed, 0, 1.0f);
        for (int64_t k = 0; part->node_of && k < n; k++)   /* each row from its node's draws */
            ag_i_random_normal_range(x0->data + k * D, part->node_of[k] * D, D, o->seed, 0,
                                     1.0f);
    }
    if (o->posenc && !part->node_of)
        ag_i_posenc_rows(x0->data, part->lo, n, x0->cols);
    for (int64_t k = 0; o->posenc && part->node_of && k < n; k++)
        ag_i_posenc_rows(x0->data + k * x0->cols, part->node_of[k], 1, x0->cols);
    return AG_OK;
}

int own_raw(inputs_t *in, MPI_Comm comm, const ag_mpi_part_t *part, const run_opts_t *o,
            ag_error_t *err)
{
    ag_matrix_t q, k, v;
    memset(&q, 0, sizeof q), memset(&k, 0, sizeof k), memset(&v, 0, sizeof v);
    int rc = scatter_features(&q, comm, part, o->q, err);
    if (!rc)
        rc = scatter_features(&k, comm, part, o->k, err);
    if (!rc)
        rc = scatter_features(&v, comm, part, o->v, err);
    if (!rc)   /* the columns are every process's (broadcast): all agree */
        rc = inputs_take_raw(in, o, &q, &k, &v, err);
    ag_matrix_destroy(&q), ag_matrix_destroy(&k), ag_matrix_destroy(&v);
    return ag_mpi_agree(comm, rc, err);
}

int gather_all_rows(MPI_Comm comm, const ag_mpi_part_t *part, const float *mine, int64_t cols,
                    float **all, ag_error_t *err)
{
    int rc = AG_OK;
    *all = NULL;
    if (part->rank == 0 && !(*all = ag_alloc(part->n_nodes * cols, sizeof **all, err, "output")))
        rc = ag_alloc_status();
    if (!(rc = ag_mpi_agree(comm, rc, err)))
        rc = ag_mpi_gather_rows(comm, part, mine, cols, *all, 0, err);
    if (rc) {
        free(*all);
        *all = NULL;
    }
    return rc;
}
