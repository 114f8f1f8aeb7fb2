/*
 * The tiled forward with its sources streamed in: for a process that holds a
 * part of the destinations and receives the K and V rows in windows of
 * consecutive sources, ascending (the MPI layer's ring path).
 *
 * Each (block of destinations, head) keeps its online-softmax state between
 * windows (accumulator, running max and sum: O(destinations x H x d)) and the
 * start of its next tile. A window [a, b) runs every tile of every block that
 * lies inside it, in ascending order; a tile that reaches past b waits for the
 * next window, which starts at most BK rows before b (the caller keeps them).
 * The tiles, masks and micro-kernels are attend_block's (tiled.c), in the same
 * order, so M and the log-sum-exp are bitwise what ag_i_attention_tiled gives
 * on the whole graph.
 *
 * A window visits only the live tasks: those whose first sources an earlier
 * window or this one reached and whose last it has not. On a window pattern
 * that is the blocks beside the window, not every block of the part once per
 * window (which cost 3-4x the kernel's own time at 500,000 destinations).
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/tiled_micro.h"
#include "kernels/isa.h"

/* A block's lanes and tiles, the same for every head. */
typedef struct ag_i_stream_block {
    int64_t i0, nq, jmin, jmax, tile, max_lo, min_hi;
    int32_t lo[BQ_MAX], hi[BQ_MAX];
} stream_block_t;

struct ag_tiled_stream {
    const ag_nbhd_t *nb;
    const float *Q;
    int64_t H, d, n_blocks;
    int QV;
    float scale2;
    ag_i_tile_fn step;          /* the whole-graph kernel's tile step */
    ag_i_task_f *task;          /* and this file's loop, of the same instruction set */
    stream_block_t *blocks;     /* [n_blocks] */
    int64_t *by_start;          /* [n_blocks] the blocks by their first source (jmin) */
    int64_t started;            /* blocks of by_start a window has reached */
    int64_t *live, n_live;      /* [n_blocks * H] the tasks started and not done */
    int64_t *next;              /* [n_blocks * H] next tile of each task (jmax: done) */
    float *acc;                 /* [n_blocks * H][d][BQ] */
    float *m, *l;               /* [n_blocks * H][BQ] */
    float *scratch;             /* per thread: qt [d][BQ], s [BK][BQ] */
    int64_t per_thread;
    int threads;                /* the team the scratch is cut for */
};

/* attend_block's step 1: the lanes' runs and the tiles of the block at i0. */
static void block_geometry(stream_block_t *g, const ag_nbhd_t *nb, int64_t i0, int64_t nq,
                           int QV)
{
    const block_span_t s = block_lanes(nb, i0, nq, QV * AG_LANES, g->lo, g->hi);
    int64_t jmin = s.jmin, jmax = s.jmax;
    g->tile = QV == 4 ? cut_tiles(&jmin, &jmax, nb->n_nodes, 4)
                      : cut_tiles(&jmin, &jmax, nb->n_nodes, 1);
    g->i0 = i0, g->nq = nq, g->jmin = jmin, g->jmax = jmax;
    g->max_lo = s.max_lo, g->min_hi = s.min_hi;
}

/* The tiles of one task (block g, head h) that end by b, through the whole-graph
   kernel's own compiled tile step; K and V are indexed by global source. */
AG_INLINE void stream_task(const struct ag_tiled_stream *st, const stream_block_t *g,
                           int64_t h, int64_t *next, float *acc, float *ml_m, float *ml_l,
                           const float *K, const float *V, int64_t b, float *qt, float *S,
                           const int QV, const int ymm)
{
    const int BQ = QV * AG_LANES;
    const int64_t d = st->d, HD = st->H * d, off = h * d;
    int64_t j0 = *next;
    if (j0 >= g->jmax || j0 + (g->jmax - j0 < g->tile ? g->jmax - j0 : g->tile) > b)
        return;
    pack_queries(qt, st->Q + g->i0 * HD + off, HD, d, g->nq, st->scale2, QV, ymm);
    ag_i_lanes_t ls;
    memset(&ls, 0, sizeof ls);
#pragma GCC unroll 4
    for (int v = 0; v < QV; v++)
        ls.m[v] = v_load(ml_m + v * AG_LANES), ls.l[v] = v_load(ml_l + v * AG_LANES);
    for (; j0 < g->jmax; j0 += g->tile) {
        const int64_t bk = g->jmax - j0 < g->tile ? g->jmax - j0 : g->tile;
        if (j0 + bk > b)
            break;   /* the next window has it */
        const int full = j0 >= g->max_lo && j0 + bk <= g->min_hi;
        if (!full) {
            int any = 0;
            for (int i = 0; i < BQ && !any; i++)
                any = g->lo[i] < j0 + bk && g->hi[i] > j0;
            if (!any)
                continue;
        }
        const tile_mask_t mk = {g->lo, g->hi, NULL};
        st->step(qt, K, V, HD, off, d, g->i0, j0, bk, full, &mk, S, acc, &ls, NULL);
    }
    *next = j0;
#pragma GCC unroll 4
    for (int v = 0; v < QV; v++)
        v_store(ml_m + v * AG_LANES, ls.m[v]), v_store(ml_l + v * AG_LANES, ls.l[v]);
}

#define TASK_VARIANT(name, target, qv, ymm)                                                 \
    target void name(const struct ag_tiled_stream *st, const stream_block_t *g, int64_t h,  \
                     int64_t *next, float *acc, float *m, float *l, const float *K,         \
                     const float *V, int64_t b, float *qt, float *S)                        \
    {                                                                                       \
        stream_task(st, g, h, next, acc, m, l, K, V, b, qt, S, qv, ymm);                    \
    }
AG_TILED_VARIANTS(TASK_VARIANT, ag_i_task)

/* A block and its first source, to order the blocks by it (ties: by block). */
typedef struct {
    int64_t jmin, k;
} block_start_t;

static int by_start(const void *pa, const void *pb)
{
    const block_start_t *a = pa, *b = pb;
    return a->jmin != b->jmin ? (a->jmin > b->jmin) - (a->jmin < b->jmin)
                              : (a->k > b->k) - (a->k < b->k);
}

void ag_i_tiled_stream_free(ag_tiled_stream_t *st)
{
    if (!st)
        return;
    free(st->blocks), free(st->by_start), free(st->live), free(st->next);
    free(st->acc), free(st->m), free(st->l);
    free(st->scratch);
    free(st);
}

int ag_i_tiled_stream_begin(ag_tiled_stream_t **out, const ag_nbhd_t *nb, int64_t lo,
                            int64_t hi, const float *Q, int64_t H, int64_t d, float scale,
                            ag_error_t *err)
{
    *out = NULL;
    ag_tiled_stream_t *st = ag_calloc(1, sizeof *st, err, "streamed attention");
    if (!st)
        return ag_alloc_status();
    st->nb = nb, st->Q = Q, st->H = H, st->d = d;
    st->QV = ag_i_tiled_width(nb);
    const ag_i_isa_t *isa = ag_i_isa();
    st->threads = ag_i_team(AG_I_NS_DENSE * (double)nb->n_edges * (double)H * (double)d);
    st->step = isa->tile[st->QV == 4], st->task = isa->task[st->QV == 4];
    st->scale2 = scale * LOG2E;
    const int64_t BQ = st->QV * AG_LANES;
    if (lo < hi && lo % BQ) {
        ag_i_tiled_stream_free(st);
        return ag_fail(err, AG_EINVAL, "streamed attention: destinations from %lld, not a "
                       "multiple of %lld", (long long)lo, (long long)BQ);
    }
    st->n_blocks = hi > lo ? (hi - lo + BQ - 1) / BQ : 0;
    const int64_t tasks = st->n_blocks * H;
    st->per_thread = ag_i_scratch_stride(d * BQ + BK * BQ);
    st->blocks = ag_alloc(st->n_blocks + 1, sizeof *st->blocks, err, "streamed attention");
    st->by_start = ag_alloc(st->n_blocks + 1, sizeof *st->by_start, err, "streamed attention");
    st->live = ag_alloc(tasks + 1, sizeof *st->live, err, "streamed attention");
    st->next = ag_alloc(tasks + 1, sizeof *st->next, err, "streamed attention");
    st->acc = ag_i_alloc_lines((tasks + 1) * d * BQ, sizeof(float), err, "streamed attention");
    st->m = ag_i_alloc_lines((tasks + 1) * BQ, sizeof(float), err, "streamed attention");
    st->l = ag_i_alloc_lines((tasks + 1) * BQ, sizeof(float), err, "streamed attention");
    st->scratch = ag_i_alloc_lines((int64_t)st->threads * st->per_thread, sizeof(float), err,
                                   "streamed attention");
    if (!st->blocks || !st->by_start || !st->live || !st->next || !st->acc || !st->m ||
        !st->l || !st->scratch) {
        ag_i_tiled_stream_free(st);
        return ag_alloc_status();
    }
    block_start_t *starts = ag_alloc(st->n_blocks + 1, sizeof *starts, err,
                                     "streamed attention");
    if (!starts) {
        ag_i_tiled_stream_free(st);
        return ag_alloc_status();
    }
    for (int64_t k = 0; k < st->n_blocks; k++) {
        const int64_t i0 = lo + k * BQ;
        block_geometry(&st->blocks[k], nb, i0, hi - i0 < BQ ? hi - i0 : BQ, st->QV);
        starts[k] = (block_start_t){st->blocks[k].jmin, k};
    }
    /* ascending already on causal and window patterns; any graph of one run a
       destination may reorder it */
    qsort(starts, (size_t)st->n_blocks, sizeof *starts, by_start);
    for (int64_t k = 0; k < st->n_blocks; k++)
        st->by_start[k] = starts[k].k;
    free(starts);
    memset(st->acc, 0, (size_t)(tasks * d * BQ) * sizeof(float));
    for (int64_t t = 0; t < tasks; t++) {
        st->next[t] = st->blocks[t / H].jmin;
        for (int64_t i = 0; i < BQ; i++)
            st->m[t * BQ + i] = -__builtin_inff(), st->l[t * BQ + i] = 0.0f;
    }
    *out = st;
    return AG_OK;
}

int64_t ag_i_tiled_stream_first(const ag_tiled_stream_t *st)
{
    int64_t first = INT64_MAX;
    for (int64_t t = 0; t < st->n_blocks * st->H; t++)
        if (st->next[t] < st->blocks[t / st->H].jmax && st->next[t] < first)
            first = st->next[t];
    return first;
}

void ag_i_tiled_stream_feed(ag_tiled_stream_t *st, const float *K, const float *V, int64_t b)
{
    ag_i_task_f *const task = st->task;
    const int64_t BQ = st->QV * AG_LANES, d = st->d, H = st->H;
    /* the blocks whose first sources this window reaches start */
    for (; st->started < st->n_blocks && st->blocks[st->by_start[st->started]].jmin < b;
         st->started++)
        for (int64_t h = 0; h < H; h++)
            st->live[st->n_live++] = st->by_start[st->started] * H + h;
    const int64_t *live = st->live, n = st->n_live;
#pragma omp parallel num_threads(st->threads) if (n > 1)
    {
        float *qt = st->scratch + (int64_t)ag_i_thread_id() * st->per_thread, *S = qt + d * BQ;
#pragma omp for schedule(dynamic, 1)
        for (int64_t k = 0; k < n; k++) {
            const int64_t t = live[k];
            task(st, &st->blocks[t / H], t % H, &st->next[t], st->acc + t * d * BQ,
                 st->m + t * BQ, st->l + t * BQ, K, V, b, qt, S);
        }
    }
    int64_t kept = 0;   /* the tasks done leave */
    for (int64_t k = 0; k < n; k++)
        if (st->next[live[k]] < st->blocks[live[k] / H].jmax)
            st->live[kept++] = live[k];
    st->n_live = kept;
}

void ag_i_tiled_stream_end(ag_tiled_stream_t *st, float *M, float *lse)
{
    const int64_t BQ = st->QV * AG_LANES, d = st->d, H = st->H, HD = H * d;
    for (int64_t t = 0; t < st->n_blocks * H; t++) {
        const stream_block_t *g = &st->blocks[t / H];
        const int64_t h = t % H;
        if (st->QV == 4)
            store_messages(M + g->i0 * HD + h * d, st->acc + t * d * BQ, st->l + t * BQ, HD, d,
                           g->nq, 4, 0);
        else
            store_messages(M + g->i0 * HD + h * d, st->acc + t * d * BQ, st->l + t * BQ, HD, d,
                           g->nq, 1, 0);
        const kext_t x = {.lse = lse};
        for (int64_t i = 0; lse && i < g->nq; i++)
            kext_lse(&x, g->i0 + i, h, H, st->m[t * BQ + i], st->l[t * BQ + i], LN2);
    }
}
