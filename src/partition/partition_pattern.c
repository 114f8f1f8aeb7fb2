/*
 * Contiguous parts of a pattern and what each reads, one destination at a
 * time, without compiling the pattern: exact when every destination can be
 * evaluated in reasonable time, else from a sample (see partition.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "graph/graph.h"

#define STRATA ((int64_t)1 << 16)       /* in-degrees sampled for the boundaries */
#define EDGE_DST 64                     /* evaluated at each end of a sampled part (auto:
                                           4 to 64, fewer beyond 2,000 parts) */
#define AUTO_SAMPLE 1024                /* evaluated inside a part */
#define AUTO_TOTAL ((int64_t)2000000)   /* evaluations in all, beyond which parts get fewer */
#define AUTO_EXACT_STEPS 1e8            /* exact when N * (runs per destination + 1) is below */
#define AUTO_EXACT_NODES ((int64_t)50000000)

typedef struct {
    const ag_pattern_t *pat;
    int64_t N;
    ag_self_loops_t self;
    pattern_eval_t ev;
    /* the part being counted */
    int64_t lo, hi;
    uint64_t *seen;             /* [N/64+1] single sources read so far */
    int64_t *points, n_points, cap_points;   /* the distinct ones, to clear seen */
    ivl_list_t runs;            /* remote pieces of runs of two or more sources */
    int64_t runs_normalised;    /* runs.n after the last normalisation */
    int64_t ends;               /* sampled parts: destinations counted at each end */
} counter_t;

static int oom(const counter_t *c, ag_error_t *err)
{
    return ag_fail(err, ag_alloc_status(), "pattern '%s': %s while planning",
                   ag_pattern_spec(c->pat), ag_i_alloc_reason());
}

static const ivl_list_t *sources(counter_t *c, int64_t i, ag_error_t *err)
{
    const ivl_list_t *res = pattern_sources(c->pat, c->N, c->self, i, &c->ev);
    if (!res)
        oom(c, err);
    return res;
}

static int degree(counter_t *c, int64_t i, int64_t *deg, ag_error_t *err)
{
    const ivl_list_t *res = sources(c, i, err);
    *deg = res ? ivl_count(res) : 0;
    if (!res)
        return ag_alloc_status();
    return AG_OK;
}

/* ---- boundaries ---- */

/* Message counts stay far from int64's end (work adds N, sums add parts). */
#define MAX_MESSAGES ((int64_t)1 << 61)

/* messages: the estimate, or 0 when counting stopped at the limit */
static int too_many(const counter_t *c, double messages, ag_error_t *err)
{
    return ag_fail(err, AG_ELIMIT, "pattern '%s' on %lld nodes has %s %.3g messages: more than "
                   "a plan counts", ag_pattern_spec(c->pat), (long long)c->N, messages ? "about" : "over",
                   messages ? messages : (double)MAX_MESSAGES);
}

static int exact_bounds(counter_t *c, int n_parts, int64_t *first, ag_error_t *err)
{
    int64_t *indptr = ag_alloc(c->N + 1, sizeof *indptr, err, "pattern in-degrees");
    if (!indptr)
        return ag_alloc_status();
    int rc = AG_OK;
    indptr[0] = 0;
    for (int64_t i = 0; i < c->N && !rc; i++) {
        int64_t deg;
        rc = degree(c, i, &deg, err);
        if (!rc && deg > MAX_MESSAGES - indptr[i])
            rc = too_many(c, 0, err);
        indptr[i + 1] = indptr[i] + deg;
    }
    if (!rc)
        rc = ag_partition_bounds(first, n_parts, c->N, indptr, AG_PARTITION_NODE_WORK, err);
    free(indptr);
    return rc;
}

/* Boundaries from the in-degree at the middle of each of STRATA strata (every
   node of a stratum taken to have that work): the prefix nearest to p/P. */
static int sampled_bounds(counter_t *c, int n_parts, int64_t *first, ag_error_t *err)
{
    const int64_t S = c->N < STRATA ? c->N : STRATA;
    double *pre = ag_alloc(S + 1, sizeof *pre, err, "pattern strata");
    double *w = ag_alloc(S, sizeof *w, err, "pattern strata");
    int rc = pre && w ? AG_OK : ag_alloc_status();
    if (pre)
        pre[0] = 0;
    for (int64_t s = 0; s < S && !rc; s++) {
        const int64_t a = s * c->N / S, b = (s + 1) * c->N / S;
        int64_t deg;
        rc = degree(c, a + (b - a) / 2, &deg, err);
        w[s] = (double)(deg + AG_PARTITION_NODE_WORK);
        pre[s + 1] = pre[s] + w[s] * (double)(b - a);
    }
    if (!rc && pre[S] - (double)c->N * AG_PARTITION_NODE_WORK > (double)MAX_MESSAGES)
        rc = too_many(c, pre[S], err);
    first[0] = 0;
    first[n_parts] = c->N;
    int64_t s = 0;
    for (int p = 1; p < n_parts && !rc; p++) {
        const double target = pre[S] * p / n_parts;
        while (s < S - 1 && pre[s + 1] <= target)
            s++;
        const int64_t a = s * c->N / S;
        int64_t k = a + llround((target - pre[s]) / w[s]);
        k = k > c->N ? c->N : k;
        first[p] = k < first[p - 1] ? first[p - 1] : k;
    }
    free(pre), free(w);
    return rc;
}

/* ---- one part's counts ---- */

static int add_point(counter_t *c, int64_t j, int64_t *fresh)
{
    uint64_t *word = &c->seen[j >> 6], bit = (uint64_t)1 << (j & 63);
    if (*word & bit)
        return AG_OK;
    *word |= bit;
    if (c->n_points == c->cap_points) {
        const int64_t cap = c->cap_points ? 2 * c->cap_points : 4096;
        int64_t *p = ag_i_realloc(c->points, cap, sizeof *p, NULL, "planner points");
        if (!p)
            return ag_alloc_status();
        c->points = p;
        c->cap_points = cap;
    }
    c->points[c->n_points++] = j;
    (*fresh)++;
    return AG_OK;
}

static int add_run(counter_t *c, int64_t a, int64_t b)
{
    if (a >= b)
        return AG_OK;
    ivl_list_t *r = &c->runs;
    if (r->n == r->cap) {
        /* merging first often frees enough room (a causal part's runs all merge) */
        if (r->n > 2 * c->runs_normalised + 1024) {
            ivl_normalise(r);
            c->runs_normalised = r->n;
        }
        if (r->n == r->cap) {
            const int64_t cap = r->cap ? 2 * r->cap : 1024;
            ivl_t *v = ag_i_realloc(r->v, cap, sizeof *v, NULL, "planner runs");
            if (!v)
                return ag_alloc_status();
            r->v = v;
            r->cap = cap;
        }
    }
    r->v[r->n++] = (ivl_t){a, b};
    return AG_OK;
}

/* What one evaluated destination adds. */
typedef struct {
    double edges, cut, point_edges;   /* scaled by the destinations each stands for */
    int64_t point_obs;                /* single-source remote reads evaluated */
    int64_t in_point_obs, in_fresh;   /* ... of inside (sampled) destinations, and new ones */
} tally_t;

static int count_dst(counter_t *c, int64_t i, double weight, int inside, tally_t *t,
                     ag_error_t *err)
{
    const ivl_list_t *res = sources(c, i, err);
    if (!res)
        return ag_alloc_status();
    int64_t deg = 0, cut = 0, points = 0, fresh = 0;
    for (int64_t k = 0; k < res->n; k++) {
        const int64_t a = res->v[k].lo, b = res->v[k].hi;
        deg += b - a;
        /* the pieces outside the part: [a, min(b, lo)) and [max(a, hi), b) */
        const int64_t a1 = a, b1 = b < c->lo ? b : c->lo, a2 = a > c->hi ? a : c->hi, b2 = b;
        const int64_t n1 = b1 > a1 ? b1 - a1 : 0, n2 = b2 > a2 ? b2 - a2 : 0;
        cut += n1 + n2;
        if (b - a >= 2) {
            if (add_run(c, a1, b1) || add_run(c, a2, b2))
                return oom(c, err);
        } else if (n1 + n2) {
            points++;
            if (add_point(c, a, &fresh))
                return oom(c, err);
        }
    }
    t->edges += weight * (double)deg;
    t->cut += weight * (double)cut;
    t->point_edges += weight * (double)points;
    t->point_obs += points;
    if (inside)
        t->in_point_obs += points, t->in_fresh += fresh;
    return AG_OK;
}

/* Distinct rows counted for the part, clearing its marks: the union of the
   runs plus the single sources outside it. */
static int64_t counted_rows(counter_t *c)
{
    ivl_list_t *r = &c->runs;
    ivl_normalise(r);
    int64_t rows = ivl_count(r);
    for (int64_t k = 0; k < c->n_points; k++) {
        const int64_t j = c->points[k];
        c->seen[j >> 6] = 0;
        int64_t lo = 0, hi = r->n;   /* the first run ending after j */
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (r->v[mid].hi <= j)
                lo = mid + 1;
            else
                hi = mid;
        }
        rows += !(lo < r->n && r->v[lo].lo <= j);
    }
    c->n_points = 0;
    ivl_clear(r);
    c->runs_normalised = 0;
    return rows;
}

static int count_part(counter_t *c, int64_t lo, int64_t hi, int64_t sample,
                      ag_part_stats_t *st, int *exact, ag_error_t *err)
{
    c->lo = lo, c->hi = hi;
    const int64_t n = hi - lo;
    tally_t t = {0};
    int rc = AG_OK;
    const int64_t ends = c->ends;
    if (sample < 0 || n <= 2 * ends + sample) {
        for (int64_t i = lo; i < hi && !rc; i++)
            rc = count_dst(c, i, 1.0, 0, &t, err);
    } else {
        *exact = 0;
        for (int64_t k = 0; k < ends && !rc; k++)
            rc = count_dst(c, lo + k, 1.0, 0, &t, err) ||
                 count_dst(c, hi - ends + k, 1.0, 0, &t, err);
        const int64_t inner = n - 2 * ends;
        const double weight = (double)inner / (double)sample;
        for (int64_t k = 0; k < sample && !rc; k++)
            rc = count_dst(c, lo + ends + (int64_t)(((double)k + 0.5) * weight), weight, 1,
                           &t, err);
    }
    if (rc)
        return err ? (int)err->status : ag_alloc_status();
    double rows = (double)counted_rows(c);
    /* single sources not evaluated, at the rate the sample met new rows, spread
       uniformly over the rows outside the part not counted yet */
    const double extra = t.point_edges - (double)t.point_obs, left = (double)(c->N - n) - rows;
    if (extra > 0.5 && left >= 1 && t.in_point_obs > 0) {
        const double fresh = extra * (double)t.in_fresh / (double)t.in_point_obs;
        rows += left * -expm1(fresh * log1p(-1.0 / left));
    }
    st->n_dst = n;
    st->n_edges = llround(t.edges);
    st->work = st->n_edges + n * AG_PARTITION_NODE_WORK;
    st->n_cut = llround(t.cut);
    st->n_halo = llround(rows);
    return AG_OK;
}

/* Exact if it costs little: runs per destination from a pilot sample. */
static int choose_sample(counter_t *c, int n_parts, int64_t *sample, ag_error_t *err)
{
    const int64_t S = c->N < 4096 ? c->N : 4096;
    double runs = 0;
    for (int64_t s = 0; s < S; s++) {
        const ivl_list_t *res = sources(c, s * c->N / S + c->N / S / 2, err);
        if (!res)
            return ag_alloc_status();
        runs += (double)res->n;
    }
    if (c->N <= AUTO_EXACT_NODES && (double)c->N * (runs / (double)S + 1) <= AUTO_EXACT_STEPS) {
        *sample = AG_SAMPLE_EXACT;
        return AG_OK;
    }
    /* about AUTO_TOTAL evaluations in all: fewer per part beyond 2,000 parts */
    const int64_t per = AUTO_TOTAL / n_parts;
    c->ends = per / 4 > EDGE_DST ? EDGE_DST : per / 4 < 4 ? 4 : per / 4;
    const int64_t m = per - 2 * c->ends;
    *sample = m > AUTO_SAMPLE ? AUTO_SAMPLE : m < 16 ? 16 : m;
    return AG_OK;
}

int ag_partition_pattern(int64_t *first, ag_part_stats_t *stats, const ag_pattern_t *pattern,
                         int64_t n_nodes, ag_self_loops_t self, int n_parts, int64_t sample,
                         int *exact, ag_error_t *err)
{
    if (n_parts < 1 || n_parts > AG_PARTITION_MAX_PARTS)
        return ag_fail(err, AG_EINVAL, "partition: %d parts; expected 1 to %d", n_parts,
                       AG_PARTITION_MAX_PARTS);
    if (sample < AG_SAMPLE_EXACT)
        return ag_fail(err, AG_EINVAL, "partition: sample %lld; expected -1 (exact), 0 (auto) "
                       "or a count", (long long)sample);
    if (self != AG_SELF_KEEP && self != AG_SELF_ON && self != AG_SELF_OFF &&
        self != AG_SELF_REPLACE)
        return ag_fail(err, AG_EINVAL, "partition: self-loops mode %d; expected AG_SELF_KEEP, "
                       "AG_SELF_ON, AG_SELF_OFF or AG_SELF_REPLACE", (int)self);
    int rc = pattern_check(pattern, n_nodes, err);
    if (rc)
        return rc;
    counter_t c = {.pat = pattern, .N = n_nodes, .self = self, .ends = EDGE_DST};
    int is_exact = 1;
    rc = sample == AG_SAMPLE_AUTO ? choose_sample(&c, n_parts, &sample, err) : AG_OK;
    if (!rc)
        rc = sample < 0 ? exact_bounds(&c, n_parts, first, err)
                        : sampled_bounds(&c, n_parts, first, err);
    is_exact = sample < 0;
    if (!rc && stats &&
        !(c.seen = ag_calloc(n_nodes / 64 + 1, sizeof *c.seen, err, "planner marks")))
        rc = ag_alloc_status();
    for (int p = 0; stats && p < n_parts && !rc; p++)
        rc = count_part(&c, first[p], first[p + 1], sample, &stats[p], &is_exact, err);
    free(c.seen), free(c.points);
    ivl_free(&c.runs);
    pattern_eval_free(&c.ev);
    if (exact)
        *exact = !rc && is_exact;
    return rc;
}
