/*
 * The fused tiled kernel for destinations with one run of consecutive
 * sources each (complete, causal, window, prefix, blocks, docs): the
 * flash-attention idea (Dao et al. 2022) on graph neighbourhoods.
 *
 * A block of BQ = QV*16 destinations meets tiles of up to BK sources. Per
 * block and head:
 *   1. pack   Qt [d][BQ] = Q rows of the block, times log2(e)/sqrt(d), transposed;
 *   2. score  S [bk][BQ] = K_tile Qt: sources are rows, destinations are lanes,
 *             so the running max, the sum and the masks are plain vector
 *             operations, with no horizontal reductions;
 *   3. mask   only tiles that cross a lane's run boundary; tiles outside every
 *             lane's run are skipped;
 *   4. online softmax per lane in base 2 (exp2 of scores already in log2 units),
 *             rescaling the accumulator when a lane's max grows;
 *   5. P.V    acc [d][BQ] += V_tile^T P, register-blocked 4 channels x QV vectors;
 *   6. store  M rows = acc^T / l (and, when asked, each lane's figures from its
 *             l and u = sum p (s - m), kept in step 4; see kernels.h).
 * Each (block, head) is one task, which writes rows no other task writes: no
 * atomic sums, and the bits do not depend on the thread count. Wide blocks are
 * handed out heaviest first (causal: the last); narrow ones in order, in long
 * runs of consecutive blocks (a band's next block reuses most of its K and V
 * rows), with the next block's rows prefetched. Among several heads, each
 * head's K and V are copied together first (see forward_plan; the blocks a
 * thread takes from another's head read them in place).
 * The backward (the second half of the file) runs on the same tiles and
 * micro-kernels. Graphs of several runs a destination come with block-sparse
 * lists instead (blocks.c): per slot of 16 rows, the tiles to run, each full
 * or with a lane mask per row, and per group of 64 rows the block width; the
 * loops then take the list's tiles where they would cut the lanes' span.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "kernels/tiled_micro.h"
#include "kernels/isa.h"

/* Step 4 for one vector of lanes, column S[jj * BQ] of the tile's scores:
   its largest score (found again when masks removed some), alpha = exp2(m -
   m'), the scores replaced by p = exp2(s - m'), l' = alpha l + sum p and, for
   the figures (stats), u' = alpha (u + (m - m') l) + sum p y (a lane with l =
   0 has u = 0 and m = -inf: the select keeps -inf * 0 out; masked rows have y
   = -inf and p = 0, so y is clamped before the product). Returns alpha. */
AG_INLINE v16f softmax_lanes(float *restrict S, int64_t BQ, int64_t bk, int full, int stats,
                             v16f mt, v16f *m, v16f *l, v16f *u)
{
    const v16f ninf = v_set1(-__builtin_inff()), zero = v_set1(0.0f);
    if (!full) {
        mt = ninf;
        for (int64_t jj = 0; jj < bk; jj++)
            mt = v_max(mt, v_load(S + jj * BQ));
    }
    const v16f m_new = v_max(*m, mt);
    /* a lane with nothing yet has m_new = -inf: subtract 0 instead (gives 0s) */
    const v16f m_use = v_select(m_new == ninf, zero, m_new);
    const v16f alpha = v_exp2(*m - m_use);
    v16f sum = zero, us = zero;
    for (int64_t jj = 0; jj < bk && !stats; jj++) {
        const v16f p = v_exp2(v_load(S + jj * BQ) - m_use);
        v_store(S + jj * BQ, p);
        sum += p;
    }
    for (int64_t jj = 0; jj < bk && stats; jj++) {   /* the same, and u's sum */
        const v16f y = v_load(S + jj * BQ) - m_use, p = v_exp2(y);
        v_store(S + jj * BQ, p);
        sum += p;
        us += p * v_max(y, v_set1(-1000.0f));
    }
    if (stats)
        *u = alpha * (*u + v_select(*l > zero, (*m - m_use) * *l, zero)) + us;
    *l = *l * alpha + sum;
    *m = m_new;
    return alpha;
}

/* The same on 8 lanes, for AVX2, where a v16f lives in memory and its
   selects are 16 scalar moves (see simd.h): the same operations lane by
   lane, so the same bits. m, l, u, alpha and mt point at the 8 lanes. */
AG_INLINE void softmax_half_ymm(float *restrict S, int64_t BQ, int64_t bk, int full, int stats,
                                const float *mt, float *m, float *l, float *u, float *alpha)
{
    const v8f ninf = v8_set1(-__builtin_inff()), zero = v8_set1(0.0f);
    v8f t = v8_load(mt);
    if (!full) {
        t = ninf;
        for (int64_t jj = 0; jj < bk; jj++)
            t = v8_max(t, v8_load(S + jj * BQ));
    }
    const v8f m_old = v8_load(m), l_old = v8_load(l), m_new = v8_max(m_old, t);
    const v8f m_use = v8_select(m_new == ninf, zero, m_new);
    const v8f a = v8_exp2(m_old - m_use);
    v8f sum = zero, us = zero;
    for (int64_t jj = 0; jj < bk && !stats; jj++) {
        const v8f p = v8_exp2(v8_load(S + jj * BQ) - m_use);
        v8_store(S + jj * BQ, p);
        sum += p;
    }
    for (int64_t jj = 0; jj < bk && stats; jj++) {
        const v8f y = v8_load(S + jj * BQ) - m_use, p = v8_exp2(y);
        v8_store(S + jj * BQ, p);
        sum += p;
        us += p * v8_max(y, v8_set1(-1000.0f));
    }
    if (stats)
        v8_store(u, a * (v8_load(u) + v8_select(l_old > zero, (m_old - m_use) * l_old, zero)) + us);
    v8_store(l, l_old * a + sum);
    v8_store(m, m_new);
    v8_store(alpha, a);
}

/* Steps 2-5 for one tile [j0, j0+bk) of a block, on the lanes' state in ls:
   compiled once per instruction set and block width (isa.h: tile) and
   called by this kernel and by the streamed one (tiled_stream.c), so both run
   the same instructions and give the same bits. */
AG_INLINE void tile_body(const float *restrict qt, const float *K, const float *V, int64_t HD,
                         int64_t off, int64_t d, int64_t i0, int64_t j0, int64_t bk, int full,
                         const tile_mask_t *mk, float *restrict S, float *restrict acc,
                         ag_i_lanes_t *ls, const kext_t *x, const int QV, const int ymm)
{
    const int stats = kext_stats(x);
    const int BQ = QV * AG_LANES;
    v16f *m = ls->m, *l = ls->l, *u = ls->u, *dist = ls->dist;
    /* 2. scores, and each lane's largest */
    v16f tile_max[QV_MAX];
#pragma GCC unroll 4
    for (int v = 0; v < QV; v++)
        tile_max[v] = v_set1(-__builtin_inff());
    score_tile(S, qt, K, HD, off, d, j0, bk, tile_max, QV, ymm);
    /* 3b. masks on the tiles that are not full */
    if (!full)
        mask_tile(S, BQ, mk, j0, bk, QV);
    /* 4. online softmax per lane */
    v16f alpha[QV_MAX];
#pragma GCC unroll 4
    for (int v = 0; v < QV; v++) {
        if (ymm) {   /* in halves: see simd.h */
            float *a = (float *)&alpha[v], *mv = (float *)&m[v], *lv = (float *)&l[v];
            float *uv = (float *)&u[v];
            softmax_half_ymm(S + v * AG_LANES, BQ, bk, full, stats, (float *)&tile_max[v], mv,
                             lv, uv, a);
            softmax_half_ymm(S + v * AG_LANES + 8, BQ, bk, full, stats,
                             (float *)&tile_max[v] + 8, mv + 8, lv + 8, uv + 8, a + 8);
        } else
            alpha[v] = softmax_lanes(S + v * AG_LANES, BQ, bk, full, stats, tile_max[v], &m[v],
                                     &l[v], &u[v]);
        if (stats && kext_distance(x)) {   /* t' = alpha t + sum p |i - j| */
            const v16f lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
            const v16f iv = v_set1((float)(i0 + v * AG_LANES)) + lane;
            v16f ts = v_set1(0.0f);
            for (int64_t jj = 0; jj < bk; jj++) {
                const v16f gap = iv - v_set1((float)(j0 + jj));
                ts += v_load(S + jj * BQ + v * AG_LANES) * v_max(gap, -gap);
            }
            dist[v] = alpha[v] * dist[v] + ts;
        }
    }
    /* 5. P.V, rescaling the accumulator by alpha on the way */
    accumulate_tile(acc, S, V, HD, off, d, j0, bk, alpha, QV, ymm);
}

#define TILE_VARIANT(name, target, qv, ymm)                                                  \
    target __attribute__((noinline)) void name(                                              \
        const float *qt, const float *K, const float *V, int64_t HD, int64_t off, int64_t d, \
        int64_t i0, int64_t j0, int64_t bk, int full, const tile_mask_t *mk, float *S,      \
        float *acc, ag_i_lanes_t *ls, const kext_t *x)                                       \
    {                                                                                        \
        tile_body(qt, K, V, HD, off, d, i0, j0, bk, full, mk, S, acc, ls, x, qv, ymm);       \
    }
AG_TILED_VARIANTS(TILE_VARIANT, ag_i_tile)

/* One head's K and V rows: element (j, c) at K[j * stride + off + c]. */
typedef struct ag_i_kv_head {
    const float *K, *V;
    int64_t stride, off;
} kv_head_t;

/* Ask for what the next block, at destination `next` (-1: none), waits for
   first: its query rows and runs, which pack_queries and block_lanes read, and
   on a band the BQ rows of K and V past this block's sources [jmin, jmax), on
   the side the blocks move to (from memory, on a long band). A prefetch never
   faults: rows past what K holds (an MPI halo's window) cost nothing. */
AG_INLINE void prefetch_next(const ag_nbhd_t *nb, const float *Q, const kv_head_t *kv,
                             int64_t HD, int64_t off, int64_t d, int64_t i0, int64_t next,
                             int64_t BQ, int64_t jmin, int64_t jmax)
{
    const int64_t N = nb->n_nodes;
    if (next < 0 || next >= N)
        return;
    const int64_t end = next + BQ < N ? next + BQ : N;
    for (int64_t i = next; i < end; i++)
        for (int64_t c = 0; c < d; c += AG_LANES)
            __builtin_prefetch(Q + i * HD + off + c, 0, 3);
    /* one run per destination: the next block's runs are next to this one's */
    const int64_t r = next > i0                ? nb->run_ptr[next]
                      : nb->run_ptr[i0] >= BQ ? nb->run_ptr[i0] - BQ
                                              : 0;
    for (int64_t k = 0; k < end - next; k += 8) {
        __builtin_prefetch(nb->run_ptr + next + k, 0, 3);
        __builtin_prefetch(nb->run_src + r + k, 0, 3);
        __builtin_prefetch(nb->run_len + r + k, 0, 3);
    }
    const int64_t j0 = next > i0 ? jmax : jmin - BQ > 0 ? jmin - BQ : 0;
    const int64_t j1 = next > i0 ? (jmax + BQ < N ? jmax + BQ : N) : jmin;
    for (int64_t j = j0; j < j1; j++)
        for (int64_t c = 0; c < d; c += AG_LANES) {
            __builtin_prefetch(kv->K + j * kv->stride + kv->off + c, 0, 3);
            __builtin_prefetch(kv->V + j * kv->stride + kv->off + c, 0, 3);
        }
}

/* One block of destinations i0 .. i0+nq-1 and one head; see the file comment. */
AG_INLINE void attend_block(const ag_nbhd_t *nb, int64_t i0, int64_t nq, int64_t next,
                            const float *Q, const kv_head_t *kv, int64_t H, int64_t d, int64_t h,
                            float scale2, float *M, const tile_buf_t *b, const kext_t *x,
                            ag_i_tile_fn step, const int64_t *tiles, int64_t n_tiles,
                            const int QV, const int ymm)
{
    const int stats = kext_stats(x);
    const int BQ = QV * AG_LANES;
    const int64_t HD = H * d, off = h * d;
    /* 1. lanes: runs (or the span of the block's list of tiles) and packed queries */
    block_span_t span = {0, 0, 0, 0};
    if (!tiles)
        span = block_lanes(nb, i0, nq, BQ, b->lo, b->hi);
    for (int64_t t = 0; t < n_tiles; t += TILE_WORDS(tiles[t], QV)) {
        span.jmin = t ? span.jmin : TILE_J0(tiles[t]);
        span.jmax = TILE_J0(tiles[t]) + TILE_BK(tiles[t]);
    }
    int64_t jmin = span.jmin, jmax = span.jmax;
    const int64_t max_lo = span.max_lo, min_hi = span.min_hi;
    pack_queries(b->qt, Q + i0 * HD + off, HD, d, nq, scale2, QV, ymm);
    /* the block's output rows are written once, at the end: ask for them now
       so their lines are owned by then (a large output misses every cache) */
    for (int64_t i = 0; i < nq; i++)
        for (int64_t c = 0; c < d; c += AG_LANES)
            __builtin_prefetch(M + (i0 + i) * HD + off + c, 1);
    prefetch_next(nb, Q, kv, HD, off, d, i0, next, BQ, jmin, jmax);
    ag_i_lanes_t ls;
#pragma GCC unroll 4
    for (int v = 0; v < QV; v++)
        ls.m[v] = v_set1(-__builtin_inff()), ls.l[v] = ls.u[v] = ls.dist[v] = v_set1(0.0f);
    memset(b->acc, 0, (size_t)(d * BQ) * sizeof(float));

    tile_mask_t mk = {b->lo, b->hi, NULL};
    if (tiles)   /* the block-sparse list: its tiles, each full or with its masks */
        for (int64_t t = 0; t < n_tiles; t += TILE_WORDS(tiles[t], QV)) {
            const int full = TILE_FULL(tiles[t]);
            mk.bits = full ? NULL : (const uint16_t *)(tiles + t + 1);
            step(b->qt, kv->K, kv->V, kv->stride, kv->off, d, i0, TILE_J0(tiles[t]),
                 TILE_BK(tiles[t]), full, &mk, b->s, b->acc, &ls, x);
        }
    else {   /* the lanes' span, cut into tiles */
        const int64_t tile = cut_tiles(&jmin, &jmax, nb->n_nodes, QV);
        for (int64_t j0 = jmin; j0 < jmax; j0 += tile) {
            const int64_t bk = jmax - j0 < tile ? jmax - j0 : tile;
            const int full = j0 >= max_lo && j0 + bk <= min_hi;   /* inside every lane's run */
            if (!full) {   /* 3a. skip tiles no lane reaches */
                int any = 0;
                for (int i = 0; i < BQ && !any; i++)
                    any = b->lo[i] < j0 + bk && b->hi[i] > j0;
                if (!any)
                    continue;
            }
            step(b->qt, kv->K, kv->V, kv->stride, kv->off, d, i0, j0, bk, full, &mk, b->s,
                 b->acc, &ls, x);
        }
    }
    /* 6. store */
#pragma GCC unroll 4
    for (int v = 0; v < QV; v++)
        v_store(b->l + v * AG_LANES, ls.l[v]), v_store(b->m + v * AG_LANES, ls.m[v]);
    store_messages(M + i0 * HD + off, b->acc, b->l, HD, d, nq, QV, ymm);
    for (int64_t i = 0; x && x->lse && i < nq; i++)   /* scores in log2 units */
        kext_lse(x, i0 + i, h, H, b->m[i], b->l[i], LN2);
    if (stats) {
        float ub[BQ_MAX], tb[BQ_MAX];
#pragma GCC unroll 4
        for (int v = 0; v < QV; v++)
            v_store(ub + v * AG_LANES, ls.u[v]), v_store(tb + v * AG_LANES, ls.dist[v]);
        for (int64_t i = 0; i < nq; i++)
            kext_put(x, i0 + i, h, H, b->l[i], ub[i], tb[i], LN2);
    }
}

/* The largest copy of one head's K and V (see forward_plan). */
#define HEAD_COPY_MAX ((int64_t)64 << 20)

/* Where each thread copies its own heads, a counter per head of the blocks
   claimed, each on a cache line of its own: the plan's shared scratch starts
   with H lines of them, then the copies (see ag_i_tiled_forward). */
#define CLAIM_FLOATS 16   /* a cache line, in floats */
#define CLAIM_SLOTS 8     /* the same line, in int64s */
_Static_assert(CLAIM_SLOTS * sizeof(int64_t) == CLAIM_FLOATS * sizeof(float), "one line");

/* The next unclaimed block of one head (n_blocks or more: none left). */
static int64_t claim_block(int64_t *claimed)
{
    int64_t t;
#pragma omp atomic capture
    t = (*claimed)++;
    return t;
}

/* The sources the blocks of destinations lo .. hi-1 read: their runs' span,
   widened as cut_tiles widens each block's (to whole blocks of 8 rows). */
typedef struct {
    int64_t lo, hi;
} source_span_t;

static source_span_t sources_read(const ag_nbhd_t *nb, int64_t lo, int64_t hi)
{
    source_span_t s = {INT64_MAX, 0};
    for (int64_t i = lo; i < hi; i++)
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++) {
            s.lo = nb->run_src[r] < s.lo ? nb->run_src[r] : s.lo;
            s.hi = nb->run_src[r] + nb->run_len[r] > s.hi ? nb->run_src[r] + nb->run_len[r] : s.hi;
        }
    if (s.hi == 0)
        return (source_span_t){0, 0};
    s.lo -= s.lo % 8;
    s.hi = s.hi + (8 - s.hi % 8) % 8 > nb->n_nodes ? nb->n_nodes : s.hi + (8 - s.hi % 8) % 8;
    return s;
}

/* Rows j0 .. j1-1 of one head's K and V (columns off .. off+d-1, rows HD
   apart) into kv: K's row j at (j - src.lo) * d, V's after all of K's. */
static void copy_head(float *kv, const float *K, const float *V, source_span_t src, int64_t HD,
                      int64_t off, int64_t d, int64_t j0, int64_t j1)
{
    const int64_t ns = src.hi - src.lo;
    for (int64_t j = j0; j < j1; j++) {
        memcpy(kv + (j - src.lo) * d, K + j * HD + off, (size_t)d * sizeof(float));
        memcpy(kv + (ns + j - src.lo) * d, V + j * HD + off, (size_t)d * sizeof(float));
    }
}

/* The block loop compiled per instruction set and block width. */
#define BLOCK_VARIANT(name, target, qv, ymm)                                                \
    target void name(const ag_nbhd_t *nb, int64_t i0, int64_t nq, int64_t next,             \
                     const float *Q, const kv_head_t *kv, int64_t H, int64_t d, int64_t h,  \
                     float scale2, float *M, const tile_buf_t *b, const kext_t *x,          \
                     ag_i_tile_fn step, const int64_t *tiles, int64_t n_tiles)              \
    {                                                                                       \
        attend_block(nb, i0, nq, next, Q, kv, H, d, h, scale2, M, b, x, step, tiles,        \
                     n_tiles, qv, ymm);                                                     \
    }
AG_TILED_VARIANTS(BLOCK_VARIANT, ag_i_block)

/* What every block of one call of the forward shares. */
typedef struct {
    const ag_nbhd_t *nb;
    const float *Q;
    float *M;
    kext_t *x;
    ag_i_block_f *block;
    ag_i_tile_fn step;
    int64_t H, d, N, BQ, b0, n_blocks;
    float scale2;
    int in_order;    /* narrow blocks: in order (see block_start) */
    /* the block-sparse lists (blocks.c), or NULL: then the blocks are slots
       of 16 rows, each run at its group's width */
    const int64_t *tile_ptr, *wide, *tiles;
    ag_i_block_f *const *blocks;
    ag_i_tile_fn const *steps;
} forward_job_t;

/* The width of slot k of the block-sparse lists, in vectors of lanes: its
   group's, and 0 for a wide group's slots after its first (they run with it). */
static int slot_width(const int64_t *wide, int64_t k)
{
    return !wide[k / 4] ? 1 : k % 4 ? 0 : 4;
}

/* The destination that the t-th block of the call starts at: narrow blocks
   in order (a band's streams then rise, as the prefetchers follow best), wide
   ones from the last down (causal's last blocks have the longest runs: the
   heaviest go first). -1 past the last. */
static int64_t block_start(const forward_job_t *j, int64_t t)
{
    if (t >= j->n_blocks)
        return -1;
    return (j->in_order ? j->b0 + t : j->b0 + j->n_blocks - 1 - t) * j->BQ;
}

/* The t-th block of the call for head h. */
static void run_block(const forward_job_t *j, int64_t t, int64_t h, const kv_head_t *kv,
                      const tile_buf_t *b)
{
    const int64_t i0 = block_start(j, t), k = i0 / j->BQ - j->b0;
    const int w = j->tiles ? slot_width(j->wide, k) : 0;
    if (j->tiles && !w)
        return;
    const int64_t BQ = j->tiles ? w * AG_LANES : j->BQ, nq = j->N - i0 < BQ ? j->N - i0 : BQ;
    ag_i_block_f *block = j->tiles ? j->blocks[w == 4] : j->block;
    block(j->nb, i0, nq, block_start(j, t + 1), j->Q, kv, j->H, j->d, h, j->scale2, j->M, b,
          j->x, j->tiles ? j->steps[w == 4] : j->step, j->tiles ? j->tiles + j->tile_ptr[k] : NULL,
          j->tiles ? j->tile_ptr[k + 1] - j->tile_ptr[k] : 0);
    kext_done(j->x, j->nb->edge_ptr[i0 + nq] - j->nb->edge_ptr[i0]);
}

int ag_i_tiled_width(const ag_nbhd_t *nb)
{
    return nb->n_nodes > 0 && nb->n_edges / nb->n_nodes < 256 ? 1 : 4;
}

int ag_i_tiled_applies(const ag_nbhd_t *nb)
{
    return nb->n_nodes < INT32_MAX && ag_i_one_run(nb, 0, nb->n_nodes);
}

/* The forward's part of a plan: scratch per thread, and whether each head's
   K and V are copied first (see ag_i_tiled_forward). */
static int forward_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                        ag_error_t *err)
{
    const int64_t BQ = p->width * AG_LANES;
    if (p->lo < p->hi && p->lo % BQ)
        return ag_fail(err, AG_EINVAL, "tiled kernel: destinations from %lld, not a multiple "
                       "of %lld", (long long)p->lo, (long long)BQ);
    const int64_t per_thread = ag_i_scratch_stride(2 * d * BQ + BK * BQ + 4 * BQ);
    /* Among several heads, one head's rows lie H*d floats apart (2 KB for 8 of
       64): the hardware prefetchers, which follow a stream within a 4 KB page,
       lose it, and the rows fall in 1/H of L2's sets. Each head's K and V are
       copied together first, when that takes at most HEAD_COPY_MAX bytes.
       When the heads divide among the threads, each thread takes its share of
       the heads and copies them into a buffer of its own: no barrier between
       heads, and no thread reads rows another core copied (its cache holds
       them dirty); blocks it takes from the others' heads at the end read
       their rows in place (see ag_i_tiled_forward). Otherwise the threads copy
       each head together, then share its blocks. The copy pays where blocks
       read each row many times (256 or more sources a node on average: the
       wide blocks' graphs); a band's blocks read a row from memory about once
       a head, and a copy doubles that (window:64, N=32768, H=4, d=32, Zen 5:
       1.22 ns an edge with copies, 1.00 without). */
    const int reread = ag_i_tiled_width(nb) == 4;
    const source_span_t src = H > 1 && reread && p->lo < p->hi ? sources_read(nb, p->lo, p->hi)
                                                               : (source_span_t){0, 0};
    const int64_t ns = src.hi - src.lo, copies = H % p->threads ? 1 : p->threads;
    if (ns > 0 && copies * 2 * ns * d * (int64_t)sizeof(float) <= HEAD_COPY_MAX) {
        /* the copy is for speed only: without memory for it, none */
        ag_error_t ignored;
        if (!ag_i_plan_scratch(p, per_thread, H * CLAIM_FLOATS + copies * 2 * ns * d,
                               "tiled kernel buffers", &ignored)) {
            p->head_copies = (int)copies, p->wlo = src.lo, p->whi = src.hi;
            return AG_OK;
        }
    }
    return ag_i_plan_scratch(p, per_thread, 0, "tiled kernel buffers", err);
}

void ag_i_tiled_forward(const ag_i_plan_t *p, const ag_i_fwd_t *a)
{
    const ag_nbhd_t *nb = a->nb;
    const float *Q = a->Q, *K = a->K, *V = a->V;
    const int64_t H = a->H, d = a->d, lo = p->lo;
    float *M = a->M;
    kext_t *x = a->x;
    const int64_t N = p->hi;   /* the blocks end there; nb->n_nodes bounds the sources */
    const int QV = p->width;
    const int64_t BQ = QV * AG_LANES;
    if (lo >= N)
        return;
    const int64_t per_thread = p->per_thread, HD = H * d;
    const source_span_t src = {p->wlo, p->whi};
    const int64_t ns = src.hi - src.lo;
    float *kvh = p->head_copies ? p->shared + H * CLAIM_FLOATS : NULL;
    int64_t *claims = (int64_t *)p->shared;
    const int by_head = p->head_copies > 1;
    const int lists = p->q_ptr != NULL;   /* block-sparse: slots of 16 rows, in order */
    const int64_t slot = lists ? AG_LANES : BQ;
    const int64_t b0 = lo / slot, n_blocks = (N + slot - 1) / slot - b0;
    const float scale2 = p->scale * LOG2E;   /* scores in log2 units: the kernel uses exp2 */
    const forward_job_t job = {nb, Q, M, x, p->isa->block[QV == 4], p->isa->tile[QV == 4], H,
                               d, N, slot, b0, n_blocks, scale2, QV == 1 || lists, p->q_ptr,
                               p->q_wide, p->q_tiles, p->isa->block, p->isa->tile};
    const int64_t runs = n_blocks / (8 * p->threads);
    const int chunk = (QV == 4 && !lists) || runs < 1 ? 1 : runs > INT_MAX ? INT_MAX : (int)runs;
    (void)chunk;   /* read only by the schedule clause: unused without OpenMP */
    for (int64_t h = 0; by_head && h < H; h++)
        claims[h * CLAIM_SLOTS] = 0;
#pragma omp parallel num_threads(p->threads) if (nb->n_edges * H * d >= AG_PARALLEL_MIN_WORK)
    {
        float *mine = p->scratch + (int64_t)ag_i_thread_id() * per_thread;
        const tile_buf_t b = {mine, mine + d * BQ, mine + d * BQ + BK * BQ,
                              mine + 2 * d * BQ + BK * BQ, mine + 2 * d * BQ + BK * BQ + BQ,
                              (int32_t *)(mine + 2 * d * BQ + BK * BQ + 2 * BQ),
                              (int32_t *)(mine + 2 * d * BQ + BK * BQ + 3 * BQ)};
        /* the blocks of a head run in block_start's order */
        if (by_head) {
            /* row j of the copy at (j - src.lo) * d; K and V are indexed by source */
            float *kv_mine = kvh + (int64_t)ag_i_thread_id() * 2 * ns * d;
            for (int64_t h = ag_i_thread_id(); h < H; h += p->head_copies) {
                int64_t *claimed = claims + h * CLAIM_SLOTS;
                int64_t t, left;
#pragma omp atomic read
                left = *claimed;
                if (left >= n_blocks)   /* all taken by the others (below) */
                    continue;
                copy_head(kv_mine, K, V, src, HD, h * d, d, src.lo, src.hi);
                const kv_head_t kv = {kv_mine - src.lo * d, kv_mine + (ns - src.lo) * d, d, 0};
                while ((t = claim_block(claimed)) < n_blocks)
                    run_block(&job, t, h, &kv, &b);
            }
            /* Threads that share cores with other work finish at different
               times (2 threads, causal N=2048 H=8, Zen 3: one waited for the
               other 7% of the time). One done with its heads takes the blocks
               not yet claimed of the others', read in place (the owner may
               copy its next head over its copy): the same bits (the streamed
               kernel reads them so too; test_kernel_plan compares). So are the
               heads of threads a small call's team lacks (the `if` above: one
               thread). */
            for (int64_t h = 0; h < H; h++) {
                const kv_head_t kv = {K, V, HD, h * d};
                for (int64_t t; (t = claim_block(claims + h * CLAIM_SLOTS)) < n_blocks;)
                    run_block(&job, t, h, &kv, &b);
            }
        } else {
            /* head by head, so that consecutive tasks share that head's K and
               V (all heads' rows together can overflow L2). Narrow blocks go in
               runs of an eighth of a thread's share: long streams, and still
               balanced (window:128 N=32768, 2 threads: 7% faster than runs of
               8 blocks, as fast as one run per thread). */
            for (int64_t h = 0; h < H; h++) {
                kv_head_t kv = {K, V, HD, h * d};
                if (kvh) {
                    const int64_t part = (ns + ag_i_team_size() - 1) / ag_i_team_size();
                    const int64_t j0 = src.lo + ag_i_thread_id() * part;
                    const int64_t j1 = j0 + part < src.hi ? j0 + part : src.hi;
                    copy_head(kvh, K, V, src, HD, h * d, d, j0, j1);
#pragma omp barrier
                    kv = (kv_head_t){kvh - src.lo * d, kvh + (ns - src.lo) * d, d, 0};
                }
#pragma omp for schedule(dynamic, chunk)
                for (int64_t t = 0; t < n_blocks; t++)
                    run_block(&job, t, h, &kv, &b);
            }
        }
    }
}

/* ---- backward ----
 *
 * FlashAttention-2's backward (Dao 2023) on the same tiles and micro-kernels,
 * made deterministic by two passes that each own the rows they write:
 *   A. destinations (lanes) x tiles of their sources, per block and head:
 *      S = K_tile Qt, P = exp2(S - lse2) masked to each lane's run,
 *      dP = V_tile dMt, dS = P (dP - D), dQt += K_tile^T dS;  dQ = scale dQt^T.
 *   B. sources (lanes) x tiles of the destinations that read them:
 *      S^T = Q_rows Kt, P^T masked by each row's run, dP^T = dM_rows Vt,
 *      dS^T = P^T (dP^T - D_row), dKt += Q_rows^T dS^T, dVt += dM_rows^T P^T;
 *      dK = scale dKt^T, dV = dVt^T.
 * Scores are in log2 units as in the forward (Qt or Kt times scale log2 e;
 * lse2 = lse log2 e). Seven products of the tile's size against the five of
 * FlashAttention-2's single pass: S and dP are computed twice, once per owner,
 * which is what makes atomics unnecessary. Each (block, head) is one task.
 */

/* Everything a backward task reads and writes. */
typedef struct ag_i_bw_args {
    const ag_nbhd_t *nb;
    const float *Q, *K, *V, *dM, *lse, *Dd;
    float *dQ, *dK, *dV;
    int64_t H, d;
    float scale, scale2;
    /* the block-sparse lists (blocks.c), or NULL: per block of pass A (from
       block qb0) its tiles of sources, per block of pass B (from kb0) its
       tiles of destinations */
    const int64_t *q_ptr, *q_tiles, *k_ptr, *k_tiles;
    int64_t qb0, kb0;
} bw_args_t;

typedef struct ag_i_bw_buf {
    float *xt, *gt;        /* [d][BQ]: Qt and dMt (pass A), Kt and Vt (pass B) */
    float *s, *dp;         /* [BK][BQ] */
    float *acc1, *acc2;    /* [d][BQ]: dQt (A); dKt and dVt (B) */
    float *lse2, *dd;      /* [BQ] */
    int32_t *lo, *hi;      /* [BQ] */
} bw_buf_t;

/* The run [lo, hi) of destination i (0, 0 without one). */
AG_INLINE void dest_run(const ag_nbhd_t *nb, int64_t i, int64_t *lo, int64_t *hi)
{
    *lo = *hi = 0;
    if (nb->run_ptr[i + 1] > nb->run_ptr[i]) {
        *lo = nb->run_src[nb->run_ptr[i]];
        *hi = *lo + nb->run_len[nb->run_ptr[i]];
    }
}

/* lse in log2 units, 0 for a node without in-edges (its weights are all masked). */
AG_INLINE float lse_log2(const bw_args_t *a, int64_t i, int64_t h)
{
    const float l = a->lse[i * a->H + h];
    return l > -__builtin_inff() ? l * LOG2E : 0.0f;
}

/* The nq rows at X (stride HD) = f * acc^T (acc [d][BQ]). */
AG_INLINE void store_scaled(float *X, const float *restrict acc, float f, int64_t HD, int64_t d,
                            int64_t nq, const int QV, const int ymm)
{
    const int64_t BQ = QV * AG_LANES;
    if (ymm) {   /* element by element (store_messages transposes in 8 x 8 blocks) */
        for (int64_t i = 0; i < nq; i++)
            for (int64_t c = 0; c < d; c++)
                X[i * HD + c] = acc[c * BQ + i] * f;
        return;
    }
    const v16f fv = v_set1(f);
    for (int v = 0; v < QV; v++) {
        int64_t c0 = 0;
        for (; c0 + AG_LANES <= d; c0 += AG_LANES) {
            v16f r[AG_LANES];
#pragma GCC unroll 16
            for (int k = 0; k < AG_LANES; k++)
                r[k] = v_load(acc + (c0 + k) * BQ + v * AG_LANES) * fv;
            v_transpose16(r);
#pragma GCC unroll 16
            for (int k = 0; k < AG_LANES; k++)
                if (v * AG_LANES + k < nq)
                    v_store(X + (v * AG_LANES + k) * HD + c0, r[k]);
        }
        for (; c0 < d; c0++)
            for (int k = 0; k < AG_LANES && v * AG_LANES + k < nq; k++)
                X[(v * AG_LANES + k) * HD + c0] = acc[c0 * BQ + v * AG_LANES + k] * f;
    }
}

/* Pass A's dS for rows [0, bk) of the tile at source j0: dp := P (dp - D),
   P = exp2(s - lse2) where row j0+jj is one of the lane's sources, else 0: as
   in the forward, the other rows get s = -inf (mask_tile; vector masks here
   made GCC write scalar code). */
AG_INLINE void ds_lanes(float *restrict s, float *restrict dp, const bw_buf_t *b,
                        const tile_mask_t *mk, int64_t j0, int64_t bk, int full, const int QV,
                        const int ymm)
{
    const int BQ = QV * AG_LANES;
    if (!full)
        mask_tile(s, BQ, mk, j0, bk, QV);
    if (ymm) {   /* in halves: see simd.h */
        for (int h = 0; h < BQ; h += 8) {
            const v8f lse2 = v8_load(b->lse2 + h), dd = v8_load(b->dd + h);
            for (int64_t jj = 0; jj < bk; jj++) {
                const v8f p = v8_exp2(v8_load(s + jj * BQ + h) - lse2);
                float *g = dp + jj * BQ + h;
                v8_store(g, p * (v8_load(g) - dd));
            }
        }
        return;
    }
    v16f lse2[QV_MAX], dd[QV_MAX];
#pragma GCC unroll 4
    for (int v = 0; v < QV; v++)
        lse2[v] = v_load(b->lse2 + v * AG_LANES), dd[v] = v_load(b->dd + v * AG_LANES);
    for (int64_t jj = 0; jj < bk; jj++) {
#pragma GCC unroll 4
        for (int v = 0; v < QV; v++) {
            const v16f p = v_exp2(v_load(s + jj * BQ + v * AG_LANES) - lse2[v]);
            float *g = dp + jj * BQ + v * AG_LANES;
            v_store(g, p * (v_load(g) - dd[v]));
        }
    }
}

/* The rows of X and Y the next block (likely the next task of this thread)
   packs, and the rows of Z this one writes at its end. */
AG_INLINE void prefetch_block(const bw_args_t *a, const float *X, const float *Y, float *Z,
                              int64_t i0, int64_t nq, int64_t off)
{
    const int64_t HD = a->H * a->d, N = a->nb->n_nodes;
    for (int64_t i = i0 + nq; i < i0 + 2 * nq && i < N; i++)
        for (int64_t c = 0; c < a->d; c += AG_LANES) {
            __builtin_prefetch(X + i * HD + off + c);
            __builtin_prefetch(Y + i * HD + off + c);
        }
    for (int64_t i = i0; i < i0 + nq; i++)
        for (int64_t c = 0; c < a->d; c += AG_LANES)
            __builtin_prefetch(Z + i * HD + off + c, 1);
}

/* Pass A's tile [j0, j0+bk) of sources for head h (columns off..off+d-1). */
AG_INLINE void grad_queries_tile(const bw_args_t *a, const bw_buf_t *b, const tile_mask_t *mk,
                                 int64_t off, int64_t j0, int64_t bk, int full, const int QV,
                                 const int ymm)
{
    const int64_t d = a->d, HD = a->H * d;
    v16f one[QV_MAX];
#pragma GCC unroll 4
    for (int v = 0; v < QV; v++)
        one[v] = v_set1(1.0f);
    score_tile(b->s, b->xt, a->K, HD, off, d, j0, bk, NULL, QV, ymm);
    score_tile(b->dp, b->gt, a->V, HD, off, d, j0, bk, NULL, QV, ymm);
    ds_lanes(b->s, b->dp, b, mk, j0, bk, full, QV, ymm);
    accumulate_tile(b->acc1, b->dp, a->K, HD, off, d, j0, bk, one, QV, ymm);
}

/* Pass A for destinations i0 .. i0+nq-1 and head h. */
AG_INLINE void grad_queries(const bw_args_t *a, int64_t i0, int64_t nq, int64_t h,
                            const bw_buf_t *b, const int QV, const int ymm)
{
    const ag_nbhd_t *nb = a->nb;
    const int BQ = QV * AG_LANES;
    const int64_t d = a->d, HD = a->H * d, off = h * d, N = nb->n_nodes;
    for (int i = 0; i < BQ; i++) {
        b->lse2[i] = i < nq ? lse_log2(a, i0 + i, h) : 0.0f;
        b->dd[i] = i < nq ? a->Dd[(i0 + i) * a->H + h] : 0.0f;
    }
    pack_queries(b->xt, a->Q + i0 * HD + off, HD, d, nq, a->scale2, QV, ymm);
    pack_queries(b->gt, a->dM + i0 * HD + off, HD, d, nq, 1.0f, QV, ymm);
    prefetch_block(a, a->Q, a->dM, a->dQ, i0, nq, off);
    memset(b->acc1, 0, (size_t)(d * BQ) * sizeof(float));
    if (a->q_ptr) {   /* the block-sparse list of the block's slot: its tiles and masks */
        const int64_t k = i0 / AG_LANES - a->qb0;
        const int64_t *tiles = a->q_tiles + a->q_ptr[k], n_tiles = a->q_ptr[k + 1] - a->q_ptr[k];
        tile_mask_t mk = {NULL, NULL, NULL};
        for (int64_t t = 0; t < n_tiles; t += TILE_WORDS(tiles[t], QV)) {
            const int full = TILE_FULL(tiles[t]);
            mk.bits = full ? NULL : (const uint16_t *)(tiles + t + 1);
            grad_queries_tile(a, b, &mk, off, TILE_J0(tiles[t]), TILE_BK(tiles[t]), full, QV,
                              ymm);
        }
    } else {   /* the forward's lanes and tiles */
        const block_span_t span = block_lanes(nb, i0, nq, BQ, b->lo, b->hi);
        int64_t jmin = span.jmin, jmax = span.jmax;
        const tile_mask_t mk = {b->lo, b->hi, NULL};
        const int64_t tile = cut_tiles(&jmin, &jmax, N, QV);
        for (int64_t j0 = jmin; j0 < jmax; j0 += tile) {
            const int64_t bk = jmax - j0 < tile ? jmax - j0 : tile;
            const int full = j0 >= span.max_lo && j0 + bk <= span.min_hi;
            int any = full;
            for (int i = 0; i < BQ && !any; i++)
                any = b->lo[i] < j0 + bk && b->hi[i] > j0;
            if (any)
                grad_queries_tile(a, b, &mk, off, j0, bk, full, QV, ymm);
        }
    }
    store_scaled(a->dQ + i0 * HD + off, b->acc1, a->scale, HD, d, nq, QV, ymm);
}

/* Pass B's P^T and dS^T for rows (destinations) r0 .. r0+br-1 against the
   lanes (sources j0 ..): s := P^T, dp := P^T (dp - D_row). */
AG_INLINE void ds_rows(const bw_args_t *a, float *restrict s, float *restrict dp, int64_t h,
                       int64_t r0, int64_t br, int64_t j0, int full, const int QV, const int ymm)
{
    const int BQ = QV * AG_LANES;
    for (int64_t rr = 0; rr < br; rr++) {
        const int64_t i = r0 + rr;
        int64_t lo, hi;
        dest_run(a->nb, i, &lo, &hi);
        const v16f lse2 = v_set1(lse_log2(a, i, h)), dd = v_set1(a->Dd[i * a->H + h]);
        if (!full) {   /* the lanes outside the row's run: s = -inf, as in pass A */
            const int64_t l = lo > j0 ? (lo - j0 < BQ ? lo - j0 : BQ) : 0;
            const int64_t u = hi > j0 ? (hi - j0 < BQ ? hi - j0 : BQ) : 0;
            for (int64_t k = 0; k < l; k++)
                s[rr * BQ + k] = -__builtin_inff();
            for (int64_t k = u > l ? u : l; k < BQ; k++)
                s[rr * BQ + k] = -__builtin_inff();
        }
        if (ymm) {   /* in halves: see simd.h */
            const v8f lse2h = v8_set1(lse_log2(a, i, h)), ddh = v8_set1(a->Dd[i * a->H + h]);
            for (int k = 0; k < BQ; k += 8) {
                float *ps = s + rr * BQ + k, *g = dp + rr * BQ + k;
                const v8f p = v8_exp2(v8_load(ps) - lse2h);
                v8_store(ps, p);
                v8_store(g, p * (v8_load(g) - ddh));
            }
            continue;
        }
#pragma GCC unroll 4
        for (int v = 0; v < QV; v++) {
            float *ps = s + rr * BQ + v * AG_LANES, *g = dp + rr * BQ + v * AG_LANES;
            const v16f p = v_exp2(v_load(ps) - lse2);
            v_store(ps, p);
            v_store(g, p * (v_load(g) - dd));
        }
    }
}

/* Pass B for sources j0 .. j0+nq-1 and head h. */
AG_INLINE void grad_keys(const bw_args_t *a, int64_t j0, int64_t nq, int64_t h,
                         const bw_buf_t *b, const int QV, const int ymm)
{
    const ag_nbhd_t *nb = a->nb;
    const int BQ = QV * AG_LANES;
    const int64_t d = a->d, HD = a->H * d, off = h * d, N = nb->n_nodes;
    /* the destinations that read the block: their out-runs' span (or the
       block-sparse list's tiles of them) */
    const int64_t k = j0 / AG_LANES - a->kb0;   /* the lists' slot */
    const int64_t *tiles = a->k_ptr ? a->k_tiles + a->k_ptr[k] : NULL;
    const int64_t n_tiles = a->k_ptr ? a->k_ptr[k + 1] - a->k_ptr[k] : 0;
    int64_t rmin = INT64_MAX, rmax = 0;
    for (int64_t j = j0; !tiles && j < j0 + nq; j++)
        for (int64_t r = nb->out_ptr[j]; r < nb->out_ptr[j + 1]; r++) {
            const int64_t end = nb->out_dst[r] + nb->out_len[r];
            rmin = nb->out_dst[r] < rmin ? nb->out_dst[r] : rmin;
            rmax = end > rmax ? end : rmax;
        }
    if (tiles)
        rmin = 0, rmax = n_tiles > 0;   /* (rmax > 0: K and V are packed) */
    memset(b->acc1, 0, (size_t)(d * BQ) * sizeof(float));
    memset(b->acc2, 0, (size_t)(d * BQ) * sizeof(float));
    if (rmax > 0) {
        pack_queries(b->xt, a->K + j0 * HD + off, HD, d, nq, a->scale2, QV, ymm);
        pack_queries(b->gt, a->V + j0 * HD + off, HD, d, nq, 1.0f, QV, ymm);
    }
    prefetch_block(a, a->K, a->V, a->dK, j0, nq, off);
    v16f one[QV_MAX];
#pragma GCC unroll 4
    for (int v = 0; v < QV; v++)
        one[v] = v_set1(1.0f);
    if (rmax == 0)
        rmin = 0;
    /* one loop over either kind of tile: with the tile's work inlined at two
       places, GCC kept ds_rows's loop counter on the stack (check-registers) */
    const int64_t tile = tiles ? 1 : cut_tiles(&rmin, &rmax, N, QV);   /* as pass A's */
    for (int64_t t = 0, r0 = rmin; tiles ? t < n_tiles : r0 < rmax;
         t += tiles ? TILE_WORDS(tiles[t], QV) : 1, r0 += tile) {
        int64_t br = rmax - r0 < tile ? rmax - r0 : tile;
        int any = 0, full = 1;   /* does a row read the block; does every row read all of it */
        const uint16_t *bits = NULL;   /* the list's masks: row rr's lanes at bits + rr * QV */
        if (tiles) {   /* the block-sparse list's tile */
            r0 = TILE_J0(tiles[t]), br = TILE_BK(tiles[t]), full = TILE_FULL(tiles[t]), any = 1;
            bits = full ? NULL : (const uint16_t *)(tiles + t + 1);
        }
        for (int64_t i = r0; !tiles && i < r0 + br; i++) {
            int64_t lo, hi;
            dest_run(nb, i, &lo, &hi);
            any |= lo < j0 + nq && hi > j0;
            full &= lo <= j0 && hi >= j0 + BQ;
        }
        if (!any)
            continue;
        score_tile(b->s, b->xt, a->Q, HD, off, d, r0, br, NULL, QV, ymm);
        score_tile(b->dp, b->gt, a->dM, HD, off, d, r0, br, NULL, QV, ymm);
        if (bits)
            mask_bits(b->s, BQ, bits, br, QV);
        ds_rows(a, b->s, b->dp, h, r0, br, j0, full || bits, QV, ymm);
        accumulate_tile(b->acc1, b->dp, a->Q, HD, off, d, r0, br, one, QV, ymm);
        accumulate_tile(b->acc2, b->s, a->dM, HD, off, d, r0, br, one, QV, ymm);
    }
    store_scaled(a->dK + j0 * HD + off, b->acc1, a->scale, HD, d, nq, QV, ymm);
    store_scaled(a->dV + j0 * HD + off, b->acc2, 1.0f, HD, d, nq, QV, ymm);
}

/* Both passes compiled per instruction set and block width. */
#define GRAD_VARIANT(name, target, qv, ymm)                                                 \
    target void name(const bw_args_t *a, int pass, int64_t i0, int64_t nq, int64_t h,       \
                     const bw_buf_t *b)                                                     \
    {                                                                                       \
        if (pass == 0)                                                                      \
            grad_queries(a, i0, nq, h, b, qv, ymm);                                         \
        else                                                                                \
            grad_keys(a, i0, nq, h, b, qv, ymm);                                            \
    }
AG_TILED_VARIANTS(GRAD_VARIANT, ag_i_grad)

/* A block and its messages, for ordering the tasks heaviest first (ties by
   index: a band's neighbouring blocks then follow each other). */
typedef struct {
    int64_t work, blk;
} block_work_t;

static int heavier(const void *x, const void *y)
{
    const block_work_t *a = x, *b = y;
    if (a->work != b->work)
        return a->work > b->work ? -1 : 1;
    return a->blk < b->blk ? -1 : a->blk > b->blk;
}

/* The blocks [b0, b0 + n) of one pass ordered by work into order (pass 0:
   in-edges of the destinations; pass 1: out-edges of the sources); tmp [n]
   scratch. The order decides only which thread runs a block, never its bits. */
static void order_blocks(const ag_nbhd_t *nb, int pass, int64_t BQ, int64_t b0, int64_t n,
                         int64_t end, const int64_t *wide, int64_t *order, block_work_t *tmp)
{
    for (int64_t k = 0; k < n; k++) {
        /* the block-sparse lists (wide): slots of BQ rows, a wide group's
           work on its first */
        const int w = wide ? slot_width(wide, k) : 1;
        const int64_t j0 = (b0 + k) * BQ, j1 = j0 + w * BQ < end ? j0 + w * BQ : end;
        int64_t work = wide && !w ? -1 : 0;
        if (pass == 0)
            work = nb->edge_ptr[j1] - nb->edge_ptr[j0];
        else
            for (int64_t r = nb->out_ptr[j0]; r < nb->out_ptr[j1]; r++)
                work += nb->out_len[r];
        tmp[k] = (block_work_t){work, b0 + k};
    }
    qsort(tmp, (size_t)n, sizeof *tmp, heavier);
    for (int64_t k = 0; k < n; k++)
        order[k] = tmp[k].blk;
}

/* Is [lo, hi) a range of whole blocks of BQ rows (hi may be the last row N)? */
static int whole_blocks(int64_t lo, int64_t hi, int64_t BQ, int64_t N)
{
    return lo >= 0 && lo <= hi && hi <= N && (lo == hi || (lo % BQ == 0 &&
                                                           (hi % BQ == 0 || hi == N)));
}

/* The backward's part of a plan: scratch per thread, and each pass's blocks
   in order of work. */
static int backward_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t d, ag_error_t *err)
{
    const int64_t N = nb->n_nodes, whole = p->width * AG_LANES;
    const int64_t BQ = p->q_ptr ? AG_LANES : whole;   /* the block-sparse lists: slots */
    const int64_t qlo = p->lo, qhi = p->hi, klo = p->klo, khi = p->khi;
    if (!whole_blocks(qlo, qhi, whole, N) || !whole_blocks(klo, khi, whole, N))
        return ag_fail(err, AG_EINVAL, "tiled backward: destinations %lld..%lld and sources "
                       "%lld..%lld; expected ranges of whole blocks of %lld rows within 0..%lld",
                       (long long)qlo, (long long)qhi, (long long)klo, (long long)khi,
                       (long long)whole, (long long)N);
    const int64_t qb0 = qlo / BQ, n_qb = qlo < qhi ? (qhi + BQ - 1) / BQ - qb0 : 0;
    const int64_t kb0 = klo / BQ, n_kb = klo < khi ? (khi + BQ - 1) / BQ - kb0 : 0;
    const int64_t most = n_qb > n_kb ? n_qb : n_kb;
    const int64_t per_thread =
        ag_i_scratch_stride(4 * d * whole + 2 * BK * whole + 4 * whole);
    /* the order: n_qb + n_kb int64, in floats */
    int rc = ag_i_plan_scratch(p, per_thread, 2 * (n_qb + n_kb + 1), "tiled backward buffers",
                               err);
    if (rc)
        return rc;
    block_work_t *tmp = ag_alloc(most + 1, sizeof *tmp, err, "tiled backward order");
    if (!tmp)
        return ag_alloc_status();
    p->order = (int64_t *)p->shared, p->n_qb = n_qb, p->n_kb = n_kb;
    order_blocks(nb, 0, BQ, qb0, n_qb, qhi, p->q_wide, p->order, tmp);
    order_blocks(nb, 1, BQ, kb0, n_kb, khi, p->k_wide, p->order + n_qb, tmp);
    free(tmp);
    return AG_OK;
}

int ag_i_tiled_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                    ag_error_t *err)
{
    /* Narrow blocks (16 destinations) waste less on a band such as a window;
       wide ones (64) reuse each K and V row more on long runs. The backward
       takes the forward's. The block-sparse lists choose per group of 64
       rows (blocks.c); the scratch is cut for the wide ones. */
    p->width = p->kernel == AG_I_KERNEL_BLOCKS ? 4 : ag_i_tiled_width(nb);
    const int rc = p->kernel == AG_I_KERNEL_BLOCKS ? ag_i_block_lists(p, nb, err) : AG_OK;
    if (rc)
        return rc;
    return p->backward ? backward_plan(p, nb, d, err) : forward_plan(p, nb, H, d, err);
}

void ag_i_tiled_backward(const ag_i_plan_t *p, const ag_i_bwd_t *op)
{
    const ag_nbhd_t *nb = op->nb;
    const int64_t H = op->H, d = op->d;
    const int QV = p->width;
    const int64_t BQ = QV * AG_LANES, n_qb = p->n_qb, n_kb = p->n_kb;
    const int64_t most = n_qb > n_kb ? n_qb : n_kb, per_thread = p->per_thread;
    const bw_args_t a = {nb, op->Q, op->K, op->V, op->dM, op->lse, op->Dd, op->g.dQ, op->g.dK,
                         op->g.dV, H, d, p->scale, p->scale * LOG2E, p->q_ptr, p->q_tiles,
                         p->k_ptr, p->k_tiles, p->lo / AG_LANES, p->klo / AG_LANES};
    const int64_t slot = p->q_ptr ? AG_LANES : BQ;   /* the block-sparse lists: slots */
    ag_i_grad_f *const grad = p->isa->grad[QV == 4];
    const int64_t runs = most / (8 * p->threads);
    const int chunk = QV == 4 || runs < 1 ? 1 : runs > INT_MAX ? INT_MAX : (int)runs;
    (void)chunk;   /* read only by the schedule clause: unused without OpenMP */
#pragma omp parallel num_threads(p->threads) if (nb->n_edges * H * d >= AG_PARALLEL_MIN_WORK)
    {
        float *mine = p->scratch + (int64_t)ag_i_thread_id() * per_thread;
        const int64_t db = d * BQ, sb = BK * BQ;
        const bw_buf_t b = {mine, mine + db, mine + 2 * db, mine + 2 * db + sb,
                            mine + 2 * db + 2 * sb, mine + 3 * db + 2 * sb,
                            mine + 4 * db + 2 * sb, mine + 4 * db + 2 * sb + BQ,
                            (int32_t *)(mine + 4 * db + 2 * sb + 2 * BQ),
                            (int32_t *)(mine + 4 * db + 2 * sb + 3 * BQ)};
        /* pass A writes dQ, pass B dK and dV: each row has one owner */
        for (int pass = 0; pass < 2; pass++) {
            const int64_t n_blocks = pass ? n_kb : n_qb, end = pass ? p->khi : p->hi;
            const int64_t *ord = pass ? p->order + n_qb : p->order;
            const int64_t *wide = pass ? p->k_wide : p->q_wide;
            const int64_t s0 = pass ? a.kb0 : a.qb0;
#pragma omp for schedule(dynamic, chunk)
            for (int64_t t = 0; t < n_blocks * H; t++) {
                const int64_t h = t / n_blocks, blk = ord[t % n_blocks];
                const int w = wide ? slot_width(wide, blk - s0) : QV;   /* its width */
                if (!w)
                    continue;
                const int64_t i0 = blk * slot, nq = end - i0 < w * AG_LANES ? end - i0
                                                                            : w * AG_LANES;
                (wide ? p->isa->grad[w == 4] : grad)(&a, pass, i0, nq, h, &b);
            }
        }
    }
}
