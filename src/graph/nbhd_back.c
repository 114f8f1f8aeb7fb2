/*
 * What one part's backward reads of the graph (the MPI layer's training): a
 * process owning rows lo..hi-1 computes dQ of its destinations (their in-runs)
 * and dK, dV of its sources, walking each source's out-runs over every
 * destination that reads it, as the one-process backward does. Those out-runs
 * come from the in-runs of the destinations that read the part's sources,
 * clipped to lo..hi-1: the transpose's sweep puts destination i in layer k at
 * source j when more than k of i's runs hold j, which clipping to the sources
 * swept does not change, so the out-runs are the whole graph's.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

void ag_i_back_part_destroy(ag_i_back_part_t *bp)
{
    if (!bp)
        return;
    ag_nbhd_destroy(&bp->base);
    memset(bp, 0, sizeof *bp);
}

/* dlo..dhi: the part's rows and every destination of the other runs, widened
   to multiples of 8 (the tiled kernel's rows of a tile start there). */
static void window(int64_t N, int64_t lo, int64_t hi, int64_t n, const int64_t *dst,
                   int64_t *dlo, int64_t *dhi)
{
    int64_t a = lo, b = hi;
    if (n > 0) {   /* dst ascending */
        a = dst[0] < a ? dst[0] : a;
        b = dst[n - 1] + 1 > b ? dst[n - 1] + 1 : b;
    }
    a -= a % 8;
    b = b + (8 - b % 8) % 8 > N ? N : b + (8 - b % 8) % 8;
    *dlo = a, *dhi = b > a ? b : a;
}

static int check_runs(int64_t N, int64_t lo, int64_t hi, int64_t n, const int64_t *dst,
                      const int64_t *src, const int64_t *len, ag_error_t *err)
{
    for (int64_t r = 0; r < n; r++)
        if (dst[r] < 0 || dst[r] >= N || (dst[r] >= lo && dst[r] < hi) ||
            (r > 0 && dst[r] < dst[r - 1]) || len[r] < 1 || src[r] < lo ||
            src[r] + len[r] > hi)
            return ag_fail(err, AG_EINVAL, "backward part: run %lld (destination %lld, "
                           "sources %lld..%lld) is not a clipped run of another part's "
                           "destination, in order, for sources %lld..%lld", (long long)r,
                           (long long)dst[r], (long long)src[r],
                           (long long)(src[r] + len[r] - 1), (long long)lo, (long long)hi - 1);
    return AG_OK;
}

/* base's in-runs: destination dlo + x has the own runs (x in the part) or the
   other runs given for it; clip: every run cut to sources lo..hi-1 (empty
   ones dropped), sources then counted from lo. n_dst destinations (>= the
   window: empty ones after it). */
static int fill_runs(ag_nbhd_t *out, const ag_nbhd_t *own, int64_t lo, int64_t hi, int64_t dlo,
                     int64_t dhi, int64_t n_dst, int64_t n, const int64_t *dst,
                     const int64_t *src, const int64_t *len, int clip, ag_error_t *err)
{
    memset(out, 0, sizeof *out);
    const int64_t R = own->n_runs + n;
    out->n_nodes = n_dst;
    out->edge_ptr = ag_alloc(n_dst + 1, sizeof(int64_t), err, "backward part");
    out->run_ptr = ag_alloc(n_dst + 1, sizeof(int64_t), err, "backward part");
    out->run_src = ag_alloc(R + 1, sizeof(int64_t), err, "backward part");
    out->run_len = ag_alloc(R + 1, sizeof(int64_t), err, "backward part");
    if (!out->edge_ptr || !out->run_ptr || !out->run_src || !out->run_len) {
        ag_nbhd_destroy(out);
        return ag_alloc_status();
    }
    int64_t runs = 0, slots = 0, k = 0;
    for (int64_t x = 0; x < n_dst; x++) {
        const int64_t i = dlo + x;
        out->edge_ptr[x] = slots, out->run_ptr[x] = runs;
        int64_t a = 0, b = 0;   /* this destination's runs: own [a, b), or the others' */
        const int mine = i >= lo && i < hi;
        if (mine)
            a = own->run_ptr[i - lo], b = own->run_ptr[i - lo + 1];
        while (!mine && i < dhi && k < n && dst[k] == i) {
            out->run_src[runs] = src[k] - (clip ? lo : 0), out->run_len[runs] = len[k];
            slots += len[k++], runs++;
        }
        for (int64_t r = a; r < b; r++) {
            int64_t s = own->run_src[r], e = s + own->run_len[r];
            if (clip)
                s = s < lo ? lo : s, e = e > hi ? hi : e;
            if (e <= s)
                continue;
            out->run_src[runs] = s - (clip ? lo : 0), out->run_len[runs] = e - s;
            slots += e - s, runs++;
        }
    }
    out->edge_ptr[n_dst] = slots, out->run_ptr[n_dst] = runs;
    out->n_edges = slots, out->n_runs = runs;
    return AG_OK;
}

/* The out-runs of sources lo..hi-1 into base (destinations global). */
static int out_runs(ag_i_back_part_t *bp, const ag_nbhd_t *own, int64_t lo, int64_t hi,
                    int64_t n, const int64_t *dst, const int64_t *src, const int64_t *len,
                    ag_error_t *err)
{
    const int64_t w = bp->dhi - bp->dlo, rows = hi - lo > w ? hi - lo : w;
    ag_nbhd_t t;
    int rc = fill_runs(&t, own, lo, hi, bp->dlo, bp->dhi, rows, n, dst, src, len, 1, err);
    if (!rc)
        rc = ag_nbhd_transpose(&t, err);
    if (!rc) {
        ag_nbhd_t *b = &bp->base;
        for (int64_t r = 0; r < t.out_ptr[hi - lo]; r++)
            t.out_dst[r] += bp->dlo;
        b->n_out_runs = t.out_ptr[hi - lo];
        b->out_ptr = t.out_ptr, b->out_dst = t.out_dst, b->out_len = t.out_len;
        b->out_nth = t.out_nth;
        t.out_ptr = t.out_dst = t.out_len = t.out_nth = NULL;
    }
    ag_nbhd_destroy(&t);
    return rc;
}

int ag_i_back_part_init(ag_i_back_part_t *bp, int64_t N, int64_t E, int64_t lo, int64_t hi,
                        const ag_nbhd_t *own, int64_t n, const int64_t *dst, const int64_t *src,
                        const int64_t *len, ag_error_t *err)
{
    memset(bp, 0, sizeof *bp);
    int rc = check_runs(N, lo, hi, n, dst, src, len, err);
    if (rc)
        return rc;
    window(N, lo, hi, n, dst, &bp->dlo, &bp->dhi);
    const int64_t w = bp->dhi - bp->dlo;
    if ((rc = fill_runs(&bp->base, own, lo, hi, bp->dlo, bp->dhi, w, n, dst, src, len, 0, err)) ||
        (rc = out_runs(bp, own, lo, hi, n, dst, src, len, err))) {
        ag_i_back_part_destroy(bp);
        return rc;
    }
    ag_nbhd_t *v = &bp->view, *b = &bp->base;
    /* each run's first slot (runs lie in slot order): a score with an edge bias
       finds a message's slot by it (generic.c's slot_of) */
    if (!(b->run_slot = ag_alloc(b->n_runs + 1, sizeof *b->run_slot, err, "backward part"))) {
        ag_i_back_part_destroy(bp);
        return ag_alloc_status();
    }
    for (int64_t x = 0; x < w; x++)
        for (int64_t r = b->run_ptr[x], s = b->edge_ptr[x]; r < b->run_ptr[x + 1]; r++)
            b->run_slot[r] = s, s += b->run_len[r];
    *v = *b;
    v->n_nodes = N, v->n_edges = E;
    v->edge_ptr = b->edge_ptr - bp->dlo, v->run_ptr = b->run_ptr - bp->dlo;
    v->out_ptr = b->out_ptr - lo;
    v->edge_id = NULL;
    return AG_OK;
}
