/*
 * The block-sparse lists (after FlexAttention's BlockMask): for each block
 * of rows of a pass, the tiles of the other side that hold an edge, in
 * order, each marked full (every row of the block reads every column of the
 * tile: no mask) or partial (a lane mask per column of the tile). The
 * tiled kernel runs them on its own micro-kernels (tiled.c): any graph whose
 * destinations have several runs (strides, global rows and columns,
 * BigBird's blocks, unions and intersections of them, or a loaded graph)
 * then costs the tiles its edges touch, not a gather per edge. The plan
 * takes this path when the tiles are dense enough (ag_i_layout_kernel).
 *
 * Tiles lie within the T-aligned tiles of the kernel's width, each cut to
 * its first and last edge widened to whole groups of 8 rows (as the tiled
 * kernel widens its own: the rows an MPI halo holds), so a pattern of
 * aligned blocks (BigBird's, block-local attention) or of columns read by
 * every row (global tokens, the fixed pattern's summaries) gives full tiles.
 * A partial tile carries a bit per row and lane (mask_bits): masking costs a
 * select per vector, whatever the runs.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/tiled_micro.h"

/* The rows of a block-sparse tile for blocks of QV vectors of destinations:
   the tiled kernel's largest (narrow blocks: 32, as cut_tiles's). */
static int64_t tile_rows(int QV)
{
    return QV == 4 ? BK : BK / 2;
}

static int by_value(const void *x, const void *y)
{
    const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Per aligned tile of one block: the columns it holds, its first and last
   column read, where its masks are; the tiles seen. Each [N/T+1]; cnt zero
   between blocks. */
typedef struct {
    int64_t *cnt, *lo, *hi, *at, *seen;
} tile_scratch_t;

/* The int64 words of a partial tile's masks: bk rows of QV 16-bit lane masks
   (TILE_WORDS's). */
static int64_t mask_words(int64_t bk, int QV)
{
    return TILE_WORDS(TILE_PACK(0, bk, 0), QV) - 1;
}

/*
 * The tiles of the block of rows i0..i0+nq-1 (lanes of QV vectors) whose
 * columns come in runs (ptr, first, len: in-runs of destinations, or
 * out-runs of sources): of each T-aligned tile that holds an edge, the
 * columns between its first and last edge widened to whole groups of 8
 * (within 0..N), ascending. Writes to out (NULL: only counts) each tile
 * packed, a partial one followed by its masks (bk rows of QV 16-bit lane
 * masks: bit k of mask v is lane 16v+k), and returns the words written (0
 * when counting); adds nq x the tiles' columns to *cells.
 */
static int64_t block_tiles(const int64_t *ptr, const int64_t *first, const int64_t *len,
                           int64_t i0, int64_t nq, int64_t N, int64_t T, int QV,
                           const tile_scratch_t *w, int64_t *out, int64_t *cells)
{
    int64_t n = 0;
    for (int64_t i = i0; i < i0 + nq; i++)
        for (int64_t r = ptr[i]; r < ptr[i + 1]; r++) {
            const int64_t a = first[r], b = first[r] + len[r];
            for (int64_t t = a / T; t * T < b; t++) {
                const int64_t x = t * T > a ? t * T : a, y = (t + 1) * T < b ? (t + 1) * T : b;
                if (w->cnt[t] == 0)
                    w->seen[n++] = t, w->lo[t] = x, w->hi[t] = y;
                w->lo[t] = x < w->lo[t] ? x : w->lo[t], w->hi[t] = y > w->hi[t] ? y : w->hi[t];
                w->cnt[t] += y - x;
            }
        }
    if (out)
        qsort(w->seen, (size_t)n, sizeof *w->seen, by_value);
    int64_t words = 0;
    for (int64_t k = 0; k < n; k++) {
        /* within the aligned tile (T a multiple of 8), whole groups of 8 */
        const int64_t t = w->seen[k], j0 = w->lo[t] - w->lo[t] % 8;
        const int64_t up = w->hi[t] + (8 - w->hi[t] % 8) % 8, j1 = up < N ? up : N;
        /* no multi-edges: the block reads each pair at most once */
        const int full = w->cnt[t] == nq * (j1 - j0);
        *cells += nq * (j1 - j0);
        w->cnt[t] = 0, w->lo[t] = j0, w->at[t] = -1;
        if (!out)
            continue;
        out[words++] = TILE_PACK(j0, j1 - j0, full);
        if (!full) {
            w->at[t] = words;
            memset(out + words, 0, (size_t)mask_words(j1 - j0, QV) * sizeof *out);
            words += mask_words(j1 - j0, QV);
        }
    }
    for (int64_t i = i0; out && i < i0 + nq; i++)   /* the partial tiles' masks */
        for (int64_t r = ptr[i]; r < ptr[i + 1]; r++) {
            const int64_t a = first[r], b = first[r] + len[r];
            for (int64_t t = a / T; t * T < b; t++) {
                if (w->at[t] < 0)
                    continue;
                uint16_t *m = (uint16_t *)(out + w->at[t]);
                const int64_t x = t * T > a ? t * T : a, y = (t + 1) * T < b ? (t + 1) * T : b;
                for (int64_t j = x; j < y; j++)
                    m[(j - w->lo[t]) * QV + (i - i0) / AG_LANES] |=
                        (uint16_t)(1u << (i - i0) % AG_LANES);
            }
        }
    return words;
}

/* The scratch of block_tiles for N columns in tiles of T, in one allocation. */
static int64_t *scratch_of(tile_scratch_t *w, int64_t N, int64_t T, ag_error_t *err)
{
    const int64_t n = N / T + 1;
    int64_t *all = ag_calloc(5 * n, sizeof *all, err, "block lists");
    if (all)
        *w = (tile_scratch_t){all, all + n, all + 2 * n, all + 3 * n, all + 4 * n};
    return all;
}

int ag_i_one_run(const ag_nbhd_t *nb, int64_t lo, int64_t hi)
{
    for (int64_t i = lo; i < hi; i++)
        if (nb->run_ptr[i + 1] - nb->run_ptr[i] > 1)
            return 0;
    return 1;
}

/* A group of rows runs as one wide block (4 vectors of lanes) or as four
   narrow ones (1 vector). A wide block's score costs 7/8 of a narrow one's
   (bigbird:64,1,1,1 at N=8,192, d=32, AVX-512, on the same tiles: 0.58
   against 0.64 ns per edge), but a wide block reads every tile of its 64
   rows: where the rows of a group read different columns (a window's
   diagonal, one column in 16 read by every row) the narrow ones compute
   fewer. Each group takes the width of the fewer costed cells; the choice
   reads the group's own runs only, so every process that holds the group
   makes it alike. */
#define GROUP (4 * AG_LANES)

/* The cost of the group of rows g0..g0+n-1 (n <= GROUP) in narrow cells,
   and its width (*wide). w: scratch for N columns in tiles of BK / 2 rows
   (so also of BK). */
static int64_t group_cost(const int64_t *ptr, const int64_t *first, const int64_t *len,
                          int64_t g0, int64_t n, int64_t N, const tile_scratch_t *w, int *wide)
{
    int64_t narrow = 0, broad = 0;
    for (int64_t i0 = g0; i0 < g0 + n; i0 += AG_LANES)
        block_tiles(ptr, first, len, i0, g0 + n - i0 < AG_LANES ? g0 + n - i0 : AG_LANES, N,
                    tile_rows(1), 1, w, NULL, &narrow);
    block_tiles(ptr, first, len, g0, n, N, tile_rows(4), 4, w, NULL, &broad);
    *wide = broad * 7 <= narrow * 8;
    return *wide ? broad * 7 / 8 : narrow;
}

int64_t ag_i_block_cells(const ag_nbhd_t *nb, int64_t lo, int64_t hi)
{
    const int64_t N = nb->n_nodes;
    for (int64_t i = lo; i < hi; i++)   /* a multi-edge repeats a source: runs overlap */
        for (int64_t r = nb->run_ptr[i]; r + 1 < nb->run_ptr[i + 1]; r++)
            if (nb->run_src[r] + nb->run_len[r] > nb->run_src[r + 1])
                return -1;
    if (lo >= hi)
        return 0;
    if (N >= INT32_MAX || lo % GROUP)
        return -1;
    ag_error_t ignored;
    tile_scratch_t w;
    int64_t *all = scratch_of(&w, N, tile_rows(1), &ignored), cells = 0;
    if (!all)
        return -1;
    for (int64_t g0 = lo; g0 < hi; g0 += GROUP) {
        int wide;
        cells += group_cost(nb->run_ptr, nb->run_src, nb->run_len, g0,
                            hi - g0 < GROUP ? hi - g0 : GROUP, N, &w, &wide);
    }
    free(all);
    return cells;
}

/* The most tiles the rows i0..i0+nq-1 can touch: each run at most its
   length over T, plus 2; never more than the tiles of N columns. */
static int64_t tiles_bound(const int64_t *ptr, const int64_t *len, int64_t i0, int64_t nq,
                           int64_t N, int64_t T)
{
    int64_t n = 0;
    for (int64_t r = ptr[i0]; r < ptr[i0 + nq] && n <= N / T; r++)
        n += len[r] / T + 2;
    return n < N / T + 1 ? n : N / T + 1;
}

/* A growing array of int64. */
typedef struct {
    int64_t *v, n, cap;
} list_t;

static int list_room(list_t *l, int64_t more, ag_error_t *err)
{
    if (l->n + more <= l->cap)
        return AG_OK;
    const int64_t cap = 2 * (l->n + more);
    int64_t *v = ag_i_realloc(l->v, cap, sizeof *v, err, "block lists");
    if (!v)
        return ag_alloc_status();
    l->v = v, l->cap = cap;
    return AG_OK;
}

/* Appends to l the lists of rows [lo, hi) (lo a multiple of GROUP) in slots
   of 16 rows: n_slots + 1 offsets (in words from the first tile), then each
   group's width, then the tiles with their masks. A wide group's tiles are
   its first slot's; its other three are empty. *at: where the offsets start. */
static int pass_lists(list_t *l, int64_t *at, const int64_t *ptr, const int64_t *first,
                      const int64_t *len, int64_t lo, int64_t hi, int64_t N,
                      const tile_scratch_t *w, ag_error_t *err)
{
    const int64_t n_slots = lo < hi ? (hi - lo + AG_LANES - 1) / AG_LANES : 0;
    const int64_t n_groups = (n_slots + 3) / 4;
    int rc = list_room(l, n_slots + 1 + n_groups, err);
    if (rc)
        return rc;
    *at = l->n;
    l->n += n_slots + 1 + n_groups;
    int64_t cells = 0, words = 0;   /* words of tiles so far */
    for (int64_t g = 0; g < n_groups; g++) {
        const int64_t g0 = lo + g * GROUP, n = hi - g0 < GROUP ? hi - g0 : GROUP;
        int wide;
        group_cost(ptr, first, len, g0, n, N, w, &wide);
        l->v[*at + n_slots + 1 + g] = wide;
        for (int64_t k = 4 * g; k < 4 * g + 4 && k < n_slots; k++) {
            const int64_t i0 = lo + k * AG_LANES, QV = wide ? 4 : 1;
            const int64_t nq = wide ? n : hi - i0 < AG_LANES ? hi - i0 : AG_LANES;
            l->v[*at + k] = words;
            if (wide && k > 4 * g)
                continue;
            /* room for every tile it can touch, each with its masks */
            const int64_t most = tiles_bound(ptr, len, i0, nq, N, tile_rows((int)QV));
            if ((rc = list_room(l, most * (1 + mask_words(BK, (int)QV)), err)))
                return rc;
            const int64_t m = block_tiles(ptr, first, len, i0, nq, N, tile_rows((int)QV),
                                          (int)QV, w, l->v + l->n, &cells);
            l->n += m, words += m;
        }
    }
    l->v[*at + n_slots] = words;
    return AG_OK;
}

int ag_i_block_lists(ag_i_plan_t *p, const ag_nbhd_t *nb, ag_error_t *err)
{
    const int64_t N = nb->n_nodes;
    if ((p->lo % GROUP && p->lo < p->hi) || (p->backward && p->klo % GROUP && p->klo < p->khi))
        return ag_fail(err, AG_EINVAL, "block-sparse kernel: rows from %lld and %lld, not "
                       "multiples of %d", (long long)p->lo, (long long)p->klo, GROUP);
    tile_scratch_t w;
    int64_t *all = scratch_of(&w, N, tile_rows(1), err);
    if (!all)
        return ag_alloc_status();
    list_t l = {0};
    int64_t q = 0, k = 0;
    int rc = pass_lists(&l, &q, nb->run_ptr, nb->run_src, nb->run_len, p->lo, p->hi, N, &w,
                        err);
    if (!rc && p->backward)   /* pass B: blocks of sources, tiles of their destinations */
        rc = pass_lists(&l, &k, nb->out_ptr, nb->out_dst, nb->out_len, p->klo, p->khi, N, &w,
                        err);
    free(all);
    if (rc) {
        free(l.v);
        return rc;
    }
    p->lists = l.v;
    const int64_t n_qs = p->lo < p->hi ? (p->hi - p->lo + AG_LANES - 1) / AG_LANES : 0;
    p->q_ptr = l.v + q, p->q_wide = l.v + q + n_qs + 1;
    p->q_tiles = p->q_wide + (n_qs + 3) / 4;
    if (p->backward) {
        const int64_t n_ks = p->klo < p->khi ? (p->khi - p->klo + AG_LANES - 1) / AG_LANES : 0;
        p->k_ptr = l.v + k, p->k_wide = l.v + k + n_ks + 1;
        p->k_tiles = p->k_wide + (n_ks + 3) / 4;
    }
    return AG_OK;
}
