/*
 * The ring path: for graphs whose destinations each read one run of
 * consecutive sources (causal, window, prefix patterns) on the tiled kernel.
 * Each process keeps only its own K and V rows; the rows are cut into blocks
 * of at most RING_BLOCK rows (never across an owner), and every block that
 * falls in a process's span of sources travels to it, in ascending order, while
 * it works on the block before (MPI_Isend / MPI_Irecv, two buffers). The
 * streamed tiled kernel (tiled_stream.c) merges each block into the
 * destinations' online-softmax state on the one-process kernel's own tiles,
 * in its order: the bits are the one-process bits. Memory: the own rows, the
 * softmax state of the own destinations, and two blocks (plus the 64 rows a
 * tile may straddle).
 */
#include <stdlib.h>
#include <string.h>

#include "exchange.h"
#include "internal.h"
#include "kernels/kernels.h"
#include "ring.h"

#define RING_BLOCK ((int64_t)1024)   /* rows a block, at most */
#define CARRY ((int64_t)64)          /* a tile's rows, at most */

typedef struct {
    int64_t lo, hi;             /* global rows */
    int owner, index;           /* the owner and the block's number among its blocks */
} block_t;

typedef struct {
    block_t *blocks;            /* every block of the graph, ascending */
    int64_t n_blocks;
    int64_t *span;              /* [2P]: each process's sources [lo, hi) */
    float *buf[2];              /* [CARRY + RING_BLOCK, 2][HD]: K rows, then V rows */
    MPI_Request *sends;
    int64_t n_sends;
} ring_state_t;

static void span_of(const ag_mpi_part_t *part, int64_t *lo, int64_t *hi)
{
    const ag_nbhd_t *nb = &part->nb;
    int64_t a = INT64_MAX, b = 0;
    for (int64_t r = 0; r < nb->n_runs; r++) {
        a = nb->run_src[r] < a ? nb->run_src[r] : a;
        b = nb->run_src[r] + nb->run_len[r] > b ? nb->run_src[r] + nb->run_len[r] : b;
    }
    if (b == 0) {
        *lo = *hi = 0;
        return;
    }
    a -= a % 8;   /* the tiles' register blocks (cut_tiles) */
    b = b + (8 - b % 8) % 8 > part->n_nodes ? part->n_nodes : b + (8 - b % 8) % 8;
    *lo = a, *hi = b;
}

static int overlaps(const block_t *b, const int64_t *span)
{
    return b->lo < span[1] && b->hi > span[0];
}

int ag_ring_init(ag_ring_t *g, MPI_Comm comm, const ag_mpi_part_t *part, int64_t HD,
                 ag_error_t *err)
{
    memset(g, 0, sizeof *g);
    g->HD = HD;
    const int P = part->ranks;
    const int64_t n = part->hi - part->lo;
    ring_state_t *s = ag_calloc(1, sizeof *s, err, "ring");
    if (!s)
        return AG_ENOMEM;
    g->state = s;
    int64_t count = 0;
    for (int p = 0; p < P; p++)
        count += (part->bounds[p + 1] - part->bounds[p] + RING_BLOCK - 1) / RING_BLOCK;
    s->blocks = ag_alloc(count + 1, sizeof *s->blocks, err, "ring");
    s->span = ag_alloc(2 * P, sizeof *s->span, err, "ring");
    s->sends = ag_alloc(2 * count * P + 1, sizeof *s->sends, err, "ring");
    g->K_own = ag_alloc((n ? n : 1) * HD, sizeof(float), err, "ring");
    g->V_own = ag_alloc((n ? n : 1) * HD, sizeof(float), err, "ring");
    for (int k = 0; k < 2; k++)
        s->buf[k] = ag_alloc(2 * (CARRY + RING_BLOCK) * HD, sizeof(float), err, "ring");
    if (!s->blocks || !s->span || !s->sends || !g->K_own || !g->V_own || !s->buf[0] ||
        !s->buf[1])
        return AG_ENOMEM;
    for (int p = 0; p < P; p++)
        for (int64_t lo = part->bounds[p], k = 0; lo < part->bounds[p + 1]; lo += RING_BLOCK, k++) {
            const int64_t hi = part->bounds[p + 1] - lo < RING_BLOCK ? part->bounds[p + 1]
                                                                     : lo + RING_BLOCK;
            s->blocks[s->n_blocks++] = (block_t){lo, hi, p, (int)k};
        }
    int64_t mine[2];
    span_of(part, &mine[0], &mine[1]);
    MPI_Allgather(mine, 2, MPI_INT64_T, s->span, 2, MPI_INT64_T, comm);
    return AG_OK;
}

void ag_ring_destroy(ag_ring_t *g)
{
    ring_state_t *s = g->state;
    if (s) {
        free(s->blocks), free(s->span), free(s->sends), free(s->buf[0]), free(s->buf[1]);
        free(s);
    }
    free(g->K_own), free(g->V_own);
    memset(g, 0, sizeof *g);
}

/* Every own block to every other process whose span reaches it. */
static void send_own(ag_ring_t *g, MPI_Comm comm, const ag_mpi_part_t *part,
                     ag_mpi_stats_t *stats)
{
    ring_state_t *s = g->state;
    s->n_sends = 0;
    for (int64_t k = 0; k < s->n_blocks; k++) {
        const block_t *b = &s->blocks[k];
        if (b->owner != part->rank)
            continue;
        const int64_t rows = b->hi - b->lo, at = (b->lo - part->lo) * g->HD;
        for (int p = 0; p < part->ranks; p++)
            if (p != part->rank && overlaps(b, &s->span[2 * p])) {
                MPI_Isend(g->K_own + at, (int)(rows * g->HD), MPI_FLOAT, p, 2 * b->index, comm,
                          &s->sends[s->n_sends++]);
                MPI_Isend(g->V_own + at, (int)(rows * g->HD), MPI_FLOAT, p, 2 * b->index + 1,
                          comm, &s->sends[s->n_sends++]);
                stats->bytes_sent += 2 * rows * g->HD * (int64_t)sizeof(float);
                stats->halo_rows += rows;
            }
    }
}

/* Block b's rows into buffer buf after its CARRY rows: copied when own,
   else received (req[2] set; waited for by the caller). */
static void fetch(ag_ring_t *g, MPI_Comm comm, const ag_mpi_part_t *part, const block_t *b,
                  float *buf, MPI_Request *req)
{
    const int64_t HD = g->HD, rows = b->hi - b->lo;
    float *K = buf + CARRY * HD, *V = buf + (2 * CARRY + RING_BLOCK) * HD;
    if (b->owner == part->rank) {
        const int64_t at = (b->lo - part->lo) * HD;
        memcpy(K, g->K_own + at, (size_t)(rows * HD) * sizeof(float));
        memcpy(V, g->V_own + at, (size_t)(rows * HD) * sizeof(float));
        req[0] = req[1] = MPI_REQUEST_NULL;
        return;
    }
    MPI_Irecv(K, (int)(rows * HD), MPI_FLOAT, b->owner, 2 * b->index, comm, &req[0]);
    MPI_Irecv(V, (int)(rows * HD), MPI_FLOAT, b->owner, 2 * b->index + 1, comm, &req[1]);
}

/* The last c rows before `end` of the window in `from` (window of block pb)
   into the CARRY rows of `to`. */
static void carry_over(const ag_ring_t *g, const float *from, const block_t *pb, float *to,
                       int64_t c)
{
    const int64_t HD = g->HD, rows = pb->hi - pb->lo;
    const float *K = from + (CARRY + rows - c) * HD;
    const float *V = from + (2 * CARRY + RING_BLOCK + rows - c) * HD;
    memcpy(to + (CARRY - c) * HD, K, (size_t)(c * HD) * sizeof(float));
    memcpy(to + (2 * CARRY + RING_BLOCK - c) * HD, V, (size_t)(c * HD) * sizeof(float));
}

int ag_ring_attention(ag_ring_t *g, MPI_Comm comm, const ag_nbhd_t *nb,
                      const ag_mpi_part_t *part, const float *Q, int64_t H, int64_t d,
                      const ag_score_t *score, float *M, ag_mpi_stats_t *stats,
                      ag_error_t *err)
{
    ring_state_t *s = g->state;
    const int64_t HD = g->HD;
    float scale;
    if (!ag_i_plain_scale(score, d, &scale))
        return ag_fail(err, AG_EINVAL, "the ring path runs plain dot-product scores only");
    double t0 = ag_mpi_now();
    send_own(g, comm, part, stats);
    stats->seconds_comm += ag_mpi_now() - t0;
    ag_tiled_stream_t *st;
    int rc = ag_i_tiled_stream_begin(&st, nb, part->lo, part->hi, Q, H, d, scale, err);
    /* the blocks this process reads, ascending */
    const int64_t *span = &s->span[2 * part->rank];
    int64_t k = 0;
    while (k < s->n_blocks && !overlaps(&s->blocks[k], span))
        k++;
    MPI_Request req[2][2];
    int cur = 0;
    const block_t *prev = NULL;
    int64_t prev_rows = 0;   /* rows of the previous window (carry included) */
    if (k < s->n_blocks && overlaps(&s->blocks[k], span))
        fetch(g, comm, part, &s->blocks[k], s->buf[cur], req[cur]);
    for (; k < s->n_blocks && overlaps(&s->blocks[k], span); k++) {
        const block_t *b = &s->blocks[k];
        t0 = ag_mpi_now();
        MPI_Waitall(2, req[cur], MPI_STATUSES_IGNORE);
        stats->seconds_comm += ag_mpi_now() - t0;
        const int64_t c = prev ? (prev_rows < CARRY ? prev_rows : CARRY) : 0;
        if (prev)
            carry_over(g, s->buf[1 - cur], prev, s->buf[cur], c);
        if (k + 1 < s->n_blocks && overlaps(&s->blocks[k + 1], span))
            fetch(g, comm, part, &s->blocks[k + 1], s->buf[1 - cur], req[1 - cur]);
        if (!rc) {   /* global row r lies at buffer row r - b->lo + CARRY */
            const float *K = s->buf[cur] + (CARRY - b->lo) * HD;
            const float *V = s->buf[cur] + (2 * CARRY + RING_BLOCK - b->lo) * HD;
            ag_i_tiled_stream_feed(st, K, V, b->hi);
        }
        /* a large send moves only while its sender is inside MPI (rendezvous):
           let the blocks the others wait for go between windows */
        int all_gone;
        MPI_Testall((int)s->n_sends, s->sends, &all_gone, MPI_STATUSES_IGNORE);
        prev = b, prev_rows = c + (b->hi - b->lo), cur = 1 - cur;
    }
    t0 = ag_mpi_now();
    MPI_Waitall((int)s->n_sends, s->sends, MPI_STATUSES_IGNORE);
    stats->seconds_comm += ag_mpi_now() - t0;
    stats->bytes_received = stats->bytes_sent;   /* summed over processes: the same */
    if (!rc && ag_i_tiled_stream_first(st) != INT64_MAX)
        rc = ag_fail(err, AG_EINVAL, "ring path: a tile at source %lld never arrived",
                     (long long)ag_i_tiled_stream_first(st));
    if (!rc)
        ag_i_tiled_stream_end(st, M, NULL);
    ag_i_tiled_stream_free(st);
    return rc;
}
