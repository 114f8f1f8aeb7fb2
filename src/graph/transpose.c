/*
 * The transpose of compiled neighbourhoods: each source's out-edges as runs
 * of consecutive destinations, for the backward (a source owns its dK and dV
 * rows). Never edge by edge: causal on 65,536 nodes has 2.1e9 edges but
 * 65,536 out-runs.
 *
 * A sweep over sources j = 0 .. N-1. Destination i reads source j when one of
 * i's in-runs [a, b) holds j; so at j, runs with b == j stop and runs with
 * a == j start, and the destinations read from j are the ones with a run open.
 * They are kept as sorted lists of disjoint intervals, one list per layer:
 * layer k holds the destinations with more than k runs open at j (a multi-edge
 * opens two). j's out-runs are the intervals of every layer, listed as they
 * stand: time O(N + R + R' + R log) for R in-runs and R' out-runs.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

typedef struct {
    int64_t *lo, *hi;     /* intervals [lo, hi), sorted, disjoint, not touching */
    int64_t n, cap;
} ivlist_t;

typedef struct {
    ivlist_t *layer;
    int64_t n_layers, cap;
    int64_t *open;        /* [N] runs open at the current source, per destination */
} sweep_t;

static int iv_reserve(ivlist_t *l, int64_t n)
{
    if (n <= l->cap)
        return 0;
    const int64_t cap = l->cap ? 2 * l->cap : 16;
    int64_t *lo = ag_i_realloc(l->lo, cap, sizeof *lo, NULL, "transpose");
    if (lo)
        l->lo = lo;
    int64_t *hi = lo ? ag_i_realloc(l->hi, cap, sizeof *hi, NULL, "transpose") : NULL;
    if (!hi)
        return -1;
    l->hi = hi, l->cap = cap;
    return 0;
}

/* The index of the first interval with lo > x. */
static int64_t iv_after(const ivlist_t *l, int64_t x)
{
    int64_t a = 0, b = l->n;
    while (a < b) {
        const int64_t m = a + (b - a) / 2;
        if (l->lo[m] > x)
            b = m;
        else
            a = m + 1;
    }
    return a;
}

static void iv_open_gap(ivlist_t *l, int64_t at)
{
    memmove(l->lo + at + 1, l->lo + at, (size_t)(l->n - at) * sizeof *l->lo);
    memmove(l->hi + at + 1, l->hi + at, (size_t)(l->n - at) * sizeof *l->hi);
    l->n++;
}

static void iv_close(ivlist_t *l, int64_t at)
{
    memmove(l->lo + at, l->lo + at + 1, (size_t)(l->n - at - 1) * sizeof *l->lo);
    memmove(l->hi + at, l->hi + at + 1, (size_t)(l->n - at - 1) * sizeof *l->hi);
    l->n--;
}

/* Adds x (not in the list). */
static int iv_insert(ivlist_t *l, int64_t x)
{
    if (iv_reserve(l, l->n + 1))
        return -1;
    const int64_t at = iv_after(l, x);
    const int left = at > 0 && l->hi[at - 1] == x, right = at < l->n && l->lo[at] == x + 1;
    if (left && right) {
        l->hi[at - 1] = l->hi[at];
        iv_close(l, at);
    } else if (left) {
        l->hi[at - 1] = x + 1;
    } else if (right) {
        l->lo[at] = x;
    } else {
        iv_open_gap(l, at);
        l->lo[at] = x, l->hi[at] = x + 1;
    }
    return 0;
}

/* Removes x (in the list). */
static int iv_remove(ivlist_t *l, int64_t x)
{
    if (iv_reserve(l, l->n + 1))
        return -1;
    const int64_t at = iv_after(l, x) - 1;
    if (l->lo[at] == x && l->hi[at] == x + 1) {
        iv_close(l, at);
    } else if (l->lo[at] == x) {
        l->lo[at]++;
    } else if (l->hi[at] == x + 1) {
        l->hi[at]--;
    } else {
        iv_open_gap(l, at + 1);
        l->lo[at + 1] = x + 1, l->hi[at + 1] = l->hi[at];
        l->hi[at] = x;
    }
    return 0;
}

/* Destination i gains (+1) or loses (-1) an open run. */
static int sweep_change(sweep_t *s, int64_t i, int delta)
{
    if (delta > 0) {
        const int64_t k = s->open[i]++;
        if (k == s->n_layers) {
            if (s->n_layers == s->cap) {
                const int64_t cap = s->cap ? 2 * s->cap : 4;
                ivlist_t *layer = ag_i_realloc(s->layer, cap, sizeof *layer, NULL, "transpose");
                if (!layer)
                    return -1;
                memset(layer + s->cap, 0, (size_t)(cap - s->cap) * sizeof *layer);
                s->layer = layer, s->cap = cap;
            }
            s->n_layers++;
        }
        return iv_insert(&s->layer[k], i);
    }
    return iv_remove(&s->layer[--s->open[i]], i);
}

/* Runs ordered by their start (or end), a key in 0..N, by counting sort:
   the runs with key x are order[ptr[x] .. ptr[x+1]). cursor: [N+1] scratch. */
static void bucket(const ag_nbhd_t *nb, int by_end, int64_t *ptr, int64_t *order,
                   int64_t *cursor)
{
    const int64_t N = nb->n_nodes, R = nb->n_runs;
    memset(ptr, 0, (size_t)(N + 2) * sizeof *ptr);
    for (int64_t r = 0; r < R; r++)
        ptr[nb->run_src[r] + (by_end ? nb->run_len[r] : 0) + 1]++;
    for (int64_t x = 0; x <= N; x++)
        ptr[x + 1] += ptr[x];
    memcpy(cursor, ptr, (size_t)(N + 1) * sizeof *cursor);
    for (int64_t r = 0; r < R; r++)
        order[cursor[nb->run_src[r] + (by_end ? nb->run_len[r] : 0)]++] = r;
}

/*
 * The sweep. With out == NULL it only counts the out-runs; else it writes them.
 * dst_of[r]: the destination of in-run r.
 */
static int sweep(const ag_nbhd_t *nb, const int64_t *dst_of, const int64_t *start_ptr,
                 const int64_t *start, const int64_t *end_ptr, const int64_t *end,
                 int64_t *open, int64_t *count, ag_nbhd_t *out)
{
    const int64_t N = nb->n_nodes;
    sweep_t s = {NULL, 0, 0, open};
    memset(open, 0, (size_t)N * sizeof *open);
    int64_t n = 0, rc = 0;
    for (int64_t j = 0; j < N && !rc; j++) {
        for (int64_t x = end_ptr[j]; x < end_ptr[j + 1] && !rc; x++)
            rc = sweep_change(&s, dst_of[end[x]], -1);
        for (int64_t x = start_ptr[j]; x < start_ptr[j + 1] && !rc; x++)
            rc = sweep_change(&s, dst_of[start[x]], +1);
        if (out)
            out->out_ptr[j] = n;
        for (int64_t k = 0; k < s.n_layers; k++)
            for (int64_t t = 0; t < s.layer[k].n; t++, n++)
                if (out) {
                    out->out_dst[n] = s.layer[k].lo[t];
                    out->out_len[n] = s.layer[k].hi[t] - s.layer[k].lo[t];
                    out->out_nth[n] = k;
                }
    }
    if (out)
        out->out_ptr[N] = n;
    *count = n;
    for (int64_t k = 0; k < s.cap; k++)
        free(s.layer[k].lo), free(s.layer[k].hi);
    free(s.layer);
    return (int)rc;
}

int ag_nbhd_transpose(ag_nbhd_t *nb, ag_error_t *err)
{
    if (!nb || !nb->edge_ptr || !nb->run_ptr)
        return ag_fail(err, AG_EINVAL, "transpose: neighbourhoods are not compiled");
    if (nb->out_ptr)
        return AG_OK;
    const int64_t N = nb->n_nodes, R = nb->n_runs;
    int64_t *ints = ag_alloc(3 * (N + 2) + 3 * R + N, sizeof(int64_t), err, "transpose");
    int64_t *run_slot = ag_alloc(R, sizeof(int64_t), err, "transpose");
    if (!ints || !run_slot) {
        free(ints), free(run_slot);
        return ag_alloc_status();
    }
    int64_t *start_ptr = ints, *end_ptr = start_ptr + N + 2, *cursor = end_ptr + N + 2;
    int64_t *start = cursor + N + 2, *end = start + R, *dst_of = end + R, *open = dst_of + R;
    for (int64_t i = 0; i < N; i++) {
        int64_t slot = nb->edge_ptr[i];
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++) {
            dst_of[r] = i, run_slot[r] = slot;
            slot += nb->run_len[r];
        }
    }
    bucket(nb, 0, start_ptr, start, cursor);
    bucket(nb, 1, end_ptr, end, cursor);
    int rc = AG_OK;
    int64_t n_out = 0;
    ag_nbhd_t t = {0};
    if (!rc && sweep(nb, dst_of, start_ptr, start, end_ptr, end, open, &n_out, NULL))
        rc = ag_fail(err, ag_alloc_status(), "transpose: %s", ag_i_alloc_reason());
    if (!rc) {
        t.out_ptr = ag_alloc(N + 1, sizeof(int64_t), err, "transpose");
        t.out_dst = ag_alloc(n_out, sizeof(int64_t), err, "transpose");
        t.out_len = ag_alloc(n_out, sizeof(int64_t), err, "transpose");
        t.out_nth = ag_alloc(n_out, sizeof(int64_t), err, "transpose");
        if (!t.out_ptr || !t.out_dst || !t.out_len || !t.out_nth)
            rc = ag_alloc_status();
    }
    if (!rc && sweep(nb, dst_of, start_ptr, start, end_ptr, end, open, &n_out, &t))
        rc = ag_fail(err, ag_alloc_status(), "transpose: %s", ag_i_alloc_reason());
    free(ints);
    if (rc) {
        free(t.out_ptr), free(t.out_dst), free(t.out_len), free(t.out_nth), free(run_slot);
        return rc;
    }
    nb->n_out_runs = n_out;
    nb->out_ptr = t.out_ptr, nb->out_dst = t.out_dst, nb->out_len = t.out_len;
    nb->out_nth = t.out_nth, nb->run_slot = run_slot;
    return AG_OK;
}
