/*
 * Partitions of the destinations over P processes: contiguous parts balanced
 * by work, parts from an owner array, and what each part reads from the
 * others (its halo). METIS lives in partition_metis.c.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "graph/graph.h"

/* p * W and prefix * P reach 2^62 * 2^24: compare them in 128 bits. */
#if defined(__SIZEOF_INT128__)
__extension__ typedef __int128 wide_t;
#else
typedef long double wide_t;
#endif

#define MAX_NODE_WORK ((int64_t)1 << 40)

void ag_partition_destroy(ag_partition_t *pt)
{
    if (!pt)
        return;
    free(pt->first);
    free(pt->owner);
    free(pt->part_ptr);
    free(pt->part_nodes);
    memset(pt, 0, sizeof *pt);
}

static int check_parts(int n_parts, int64_t n_nodes, ag_error_t *err)
{
    if (n_parts < 1 || n_parts > AG_PARTITION_MAX_PARTS)
        return ag_fail(err, AG_EINVAL, "partition: %d parts; expected 1 to %d", n_parts,
                       AG_PARTITION_MAX_PARTS);
    if (n_nodes < 1)
        return ag_fail(err, AG_EINVAL, "partition: %lld nodes; expected at least 1",
                       (long long)n_nodes);
    return AG_OK;
}

/* Work of nodes 0..k-1. */
static inline int64_t prefix(const int64_t *indptr, int64_t node_work, int64_t k)
{
    return indptr[k] - indptr[0] + k * node_work;
}

int ag_partition_bounds(int64_t *first, int n_parts, int64_t n_nodes, const int64_t *indptr,
                        int64_t node_work, ag_error_t *err)
{
    int rc = check_parts(n_parts, n_nodes, err);
    if (rc)
        return rc;
    if (node_work < 1 || node_work > MAX_NODE_WORK)
        return ag_fail(err, AG_EINVAL, "partition: node work %lld; expected 1 to %lld",
                       (long long)node_work, (long long)MAX_NODE_WORK);
    for (int64_t i = 0; i < n_nodes; i++)
        if (indptr[i + 1] < indptr[i])
            return ag_fail(err, AG_EINVAL,
                           "partition: indptr[%lld] = %lld is below indptr[%lld] = %lld; "
                           "expected non-decreasing", (long long)(i + 1),
                           (long long)indptr[i + 1], (long long)i, (long long)indptr[i]);
    if (n_nodes > INT64_MAX / 4 / node_work ||   /* n_nodes * node_work must not overflow */
        indptr[n_nodes] - indptr[0] > INT64_MAX / 2 - n_nodes * node_work)
        return ag_fail(err, AG_ELIMIT, "partition: %lld edges is too many",
                       (long long)(indptr[n_nodes] - indptr[0]));
    const int64_t W = prefix(indptr, node_work, n_nodes);
    first[0] = 0;
    first[n_parts] = n_nodes;
    for (int p = 1; p < n_parts; p++) {
        /* the smallest k with prefix(k) * P >= p * W, searched from the last boundary */
        const wide_t target = (wide_t)p * W;
        int64_t lo = first[p - 1], hi = n_nodes;
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if ((wide_t)prefix(indptr, node_work, mid) * n_parts >= target)
                hi = mid;
            else
                lo = mid + 1;
        }
        /* or the node before it, when that is at least as near (ties go low) */
        if (lo > first[p - 1] &&
            target - (wide_t)prefix(indptr, node_work, lo - 1) * n_parts <=
                (wide_t)prefix(indptr, node_work, lo) * n_parts - target)
            lo--;
        first[p] = lo;
    }
    return AG_OK;
}

/* owner, part_ptr and part_nodes of contiguous parts from pt->first. */
static int fill_contiguous(ag_partition_t *pt, ag_error_t *err)
{
    const int64_t N = pt->n_nodes;
    pt->owner = ag_alloc(N, sizeof *pt->owner, err, "partition owners");
    pt->part_ptr = ag_alloc(pt->n_parts + 1, sizeof *pt->part_ptr, err, "partition");
    pt->part_nodes = ag_alloc(N, sizeof *pt->part_nodes, err, "partition nodes");
    if (!pt->owner || !pt->part_ptr || !pt->part_nodes)
        return ag_alloc_status();
    memcpy(pt->part_ptr, pt->first, (size_t)(pt->n_parts + 1) * sizeof *pt->first);
    for (int p = 0; p < pt->n_parts; p++)
        for (int64_t i = pt->first[p]; i < pt->first[p + 1]; i++)
            pt->owner[i] = p;
    for (int64_t i = 0; i < N; i++)
        pt->part_nodes[i] = i;
    return AG_OK;
}

int ag_partition_from_indptr(ag_partition_t *pt, int64_t n_nodes, const int64_t *indptr,
                             int n_parts, int64_t node_work, ag_error_t *err)
{
    memset(pt, 0, sizeof *pt);
    int rc = check_parts(n_parts, n_nodes, err);
    if (rc)
        return rc;
    pt->n_parts = n_parts;
    pt->n_nodes = n_nodes;
    pt->contiguous = 1;
    pt->first = ag_alloc(n_parts + 1, sizeof *pt->first, err, "partition bounds");
    rc = pt->first ? ag_partition_bounds(pt->first, n_parts, n_nodes, indptr, node_work, err)
                   : ag_alloc_status();
    if (!rc)
        rc = fill_contiguous(pt, err);
    if (rc)
        ag_partition_destroy(pt);
    return rc;
}

int ag_partition_contiguous(ag_partition_t *pt, const ag_nbhd_t *nb, int n_parts,
                            ag_error_t *err)
{
    return ag_partition_from_indptr(pt, nb->n_nodes, nb->edge_ptr, n_parts,
                                    AG_PARTITION_NODE_WORK, err);
}

int ag_partition_from_owner(ag_partition_t *pt, int64_t n_nodes, const int32_t *owner,
                            int n_parts, ag_error_t *err)
{
    memset(pt, 0, sizeof *pt);
    int rc = check_parts(n_parts, n_nodes, err);
    if (rc)
        return rc;
    for (int64_t i = 0; i < n_nodes; i++)
        if (owner[i] < 0 || owner[i] >= n_parts)
            return ag_fail(err, AG_EINVAL, "partition: node %lld has part %d; expected 0 to %d",
                           (long long)i, (int)owner[i], n_parts - 1);
    pt->n_parts = n_parts;
    pt->n_nodes = n_nodes;
    pt->owner = ag_alloc(n_nodes, sizeof *pt->owner, err, "partition owners");
    pt->part_ptr = ag_calloc(n_parts + 1, sizeof *pt->part_ptr, err, "partition");
    pt->part_nodes = ag_alloc(n_nodes, sizeof *pt->part_nodes, err, "partition nodes");
    if (!pt->owner || !pt->part_ptr || !pt->part_nodes) {
        ag_partition_destroy(pt);
        return ag_alloc_status();
    }
    memcpy(pt->owner, owner, (size_t)n_nodes * sizeof *owner);
    /* a counting sort by part keeps each part's nodes ascending */
    for (int64_t i = 0; i < n_nodes; i++)
        pt->part_ptr[owner[i] + 1]++;
    for (int p = 0; p < n_parts; p++)
        pt->part_ptr[p + 1] += pt->part_ptr[p];
    int64_t sorted = 1;
    for (int64_t i = 0; i < n_nodes; i++) {
        sorted &= i == 0 || owner[i] >= owner[i - 1];
        pt->part_nodes[pt->part_ptr[owner[i]]++] = i;
    }
    for (int p = n_parts; p > 0; p--)
        pt->part_ptr[p] = pt->part_ptr[p - 1];
    pt->part_ptr[0] = 0;
    if (sorted) {
        pt->first = ag_alloc(n_parts + 1, sizeof *pt->first, err, "partition bounds");
        if (!pt->first) {
            ag_partition_destroy(pt);
            return ag_alloc_status();
        }
        memcpy(pt->first, pt->part_ptr, (size_t)(n_parts + 1) * sizeof *pt->first);
        pt->contiguous = 1;
    }
    return AG_OK;
}

/* ---- halos ---- */

static int check_fit(const ag_partition_t *pt, const ag_nbhd_t *nb, int part, ag_error_t *err)
{
    if (pt->n_nodes != nb->n_nodes)
        return ag_fail(err, AG_EINVAL, "partition of %lld nodes given a graph of %lld nodes",
                       (long long)pt->n_nodes, (long long)nb->n_nodes);
    if (part < 0 || part >= pt->n_parts)
        return ag_fail(err, AG_EINVAL, "part %d; expected 0 to %d", part, pt->n_parts - 1);
    return AG_OK;
}

/*
 * Sources of short runs, for the counts alone: marked in a stamp array
 * instead of sorted as intervals (a random graph's runs are single sources;
 * sorting 16M of them for each part took seconds).
 */
#define SHORT_RUN 8

typedef struct {
    int32_t *stamp;       /* [N] the last part that marked each source, or -1 */
    int64_t *points;      /* remote sources the current part marked */
    int64_t n, cap;
} marks_t;

static int mark(marks_t *m, int64_t j, int p)
{
    if (m->stamp[j] == p)
        return AG_OK;
    m->stamp[j] = p;
    if (m->n == m->cap) {
        const int64_t cap = m->cap ? 2 * m->cap : 4096;
        int64_t *v = ag_i_realloc(m->points, cap, sizeof *v, NULL, "partition marks");
        if (!v)
            return ag_alloc_status();
        m->points = v;
        m->cap = cap;
    }
    m->points[m->n++] = j;
    return AG_OK;
}

static inline int is_remote(const ag_partition_t *pt, int p, int64_t j)
{
    return pt->contiguous ? j < pt->first[p] || j >= pt->first[p + 1] : pt->owner[j] != p;
}

/* The union of the runs that part p's destinations read, into u (sorted,
   merged), short runs' remote sources into marks when given; the messages
   whose source another part owns into *cut. */
static int part_union(const ag_partition_t *pt, const ag_nbhd_t *nb, int p, ivl_list_t *u,
                      marks_t *marks, int64_t *cut, ag_error_t *err)
{
    int64_t n_runs = 0;
    for (int64_t k = pt->part_ptr[p]; k < pt->part_ptr[p + 1]; k++) {
        const int64_t i = pt->part_nodes[k];
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
            n_runs += !marks || nb->run_len[r] > SHORT_RUN;
    }
    if (n_runs > u->cap) {
        ivl_t *v = ag_alloc(n_runs, sizeof *v, err, "halo intervals");
        if (!v)
            return ag_alloc_status();
        free(u->v);
        u->v = v;
        u->cap = n_runs;
    }
    const int64_t lo = pt->contiguous ? pt->first[p] : 0, hi = pt->contiguous ? pt->first[p + 1] : 0;
    int64_t n = 0, c = 0;
    if (marks)
        marks->n = 0;
    for (int64_t k = pt->part_ptr[p]; k < pt->part_ptr[p + 1]; k++) {
        const int64_t i = pt->part_nodes[k];
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++) {
            const int64_t a = nb->run_src[r], b = a + nb->run_len[r];
            if (marks && b - a <= SHORT_RUN) {
                for (int64_t j = a; j < b; j++)
                    if (is_remote(pt, p, j)) {
                        c++;
                        if (mark(marks, j, p))
                            return ag_fail(err, ag_alloc_status(), "halo counts: %s",
                                           ag_i_alloc_reason());
                    }
                continue;
            }
            u->v[n++] = (ivl_t){a, b};
            if (pt->contiguous) {
                const int64_t in_lo = a > lo ? a : lo, in_hi = b < hi ? b : hi;
                c += (b - a) - (in_hi > in_lo ? in_hi - in_lo : 0);
            } else {
                for (int64_t j = a; j < b; j++)
                    c += pt->owner[j] != p;
            }
        }
    }
    u->n = n;
    ivl_normalise(u);
    *cut = c;
    return AG_OK;
}

/* Marked sources outside every interval of u (sorted, merged). */
static int64_t marked_outside(const marks_t *m, const ivl_list_t *u)
{
    int64_t count = 0;
    for (int64_t k = 0; k < m->n; k++) {
        const int64_t j = m->points[k];
        int64_t lo = 0, hi = u->n;   /* the first interval ending after j */
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (u->v[mid].hi <= j)
                lo = mid + 1;
            else
                hi = mid;
        }
        count += !(lo < u->n && u->v[lo].lo <= j);
    }
    return count;
}

/* Appends j .. b-1 to rows (when not NULL) from position n; returns the new count. */
static int64_t put_range(int64_t *rows, int64_t n, int64_t a, int64_t b)
{
    for (int64_t j = a; rows && j < b; j++)
        rows[n + j - a] = j;
    return n + (b > a ? b - a : 0);
}

/* The sources in u that part p does not own, ascending, into rows (when not
   NULL); returns their count. */
static int64_t list_remote(const ag_partition_t *pt, const ivl_list_t *u, int p, int64_t *rows)
{
    int64_t n = 0;
    for (int64_t k = 0; k < u->n; k++) {
        const int64_t a = u->v[k].lo, b = u->v[k].hi;
        if (pt->contiguous) {
            /* [a, b) less the owned [lo, hi): at most two pieces */
            const int64_t lo = pt->first[p], hi = pt->first[p + 1];
            n = put_range(rows, n, a, b < lo ? b : lo);
            n = put_range(rows, n, a > hi ? a : hi, b);
        } else {
            for (int64_t j = a; j < b; j++)
                if (pt->owner[j] != p) {
                    if (rows)
                        rows[n] = j;
                    n++;
                }
        }
    }
    return n;
}

int ag_partition_halo(const ag_partition_t *pt, const ag_nbhd_t *nb, int part, int64_t **rows,
                      int64_t *n_rows, ag_error_t *err)
{
    *rows = NULL;
    *n_rows = 0;
    int rc = check_fit(pt, nb, part, err);
    if (rc)
        return rc;
    ivl_list_t u = {0};
    int64_t cut;
    rc = part_union(pt, nb, part, &u, NULL, &cut, err);
    if (!rc) {
        const int64_t n = list_remote(pt, &u, part, NULL);
        int64_t *r = n ? ag_alloc(n, sizeof *r, err, "halo rows") : NULL;
        if (n && !r)
            rc = ag_alloc_status();
        else {
            list_remote(pt, &u, part, r);
            *rows = r;
            *n_rows = n;
        }
    }
    ivl_free(&u);
    return rc;
}

int ag_partition_stats(const ag_partition_t *pt, const ag_nbhd_t *nb, ag_part_stats_t *stats,
                       ag_error_t *err)
{
    int rc = check_fit(pt, nb, 0, err);
    ivl_list_t u = {0};
    marks_t marks = {0};
    if (!rc && !(marks.stamp = ag_alloc(pt->n_nodes, sizeof *marks.stamp, err, "halo marks")))
        rc = ag_alloc_status();
    for (int64_t j = 0; !rc && j < pt->n_nodes; j++)
        marks.stamp[j] = -1;
    for (int p = 0; p < pt->n_parts && !rc; p++) {
        ag_part_stats_t *s = &stats[p];
        memset(s, 0, sizeof *s);
        rc = part_union(pt, nb, p, &u, &marks, &s->n_cut, err);
        if (rc)
            break;
        s->n_dst = pt->part_ptr[p + 1] - pt->part_ptr[p];
        for (int64_t k = pt->part_ptr[p]; k < pt->part_ptr[p + 1]; k++) {
            const int64_t i = pt->part_nodes[k];
            s->n_edges += nb->edge_ptr[i + 1] - nb->edge_ptr[i];
        }
        s->work = s->n_edges + s->n_dst * AG_PARTITION_NODE_WORK;
        s->n_halo = list_remote(pt, &u, p, NULL) + marked_outside(&marks, &u);
    }
    ivl_free(&u);
    free(marks.stamp), free(marks.points);
    return rc;
}

double ag_partition_imbalance(const ag_part_stats_t *stats, int n_parts)
{
    double total = 0, most = 0;
    for (int p = 0; p < n_parts; p++) {
        total += (double)stats[p].work;
        if ((double)stats[p].work > most)
            most = (double)stats[p].work;
    }
    return total > 0 ? most / (total / n_parts) : 1.0;
}
