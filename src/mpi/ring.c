/*
 * The ring path: for graphs whose destinations each read one run of
 * consecutive sources (causal, window, prefix patterns) on the tiled kernel.
 *
 * Each process keeps only its own K and V rows, cut into blocks of at most
 * RING_BLOCK rows. A block travels along the ring of ranks, one neighbour to
 * the next, from its owner out to the farthest process whose span of sources
 * reaches it, in each direction (rightwards to higher ranks, leftwards to lower
 * ones); the processes on the way pass it on, and use it when it lies in their
 * span. So every link carries each block at most once. A process takes, in
 * this order, the blocks from its left neighbour, its own, and the blocks from
 * its right neighbour: its sources in ascending order, which is the order the
 * streamed tiled kernel (tiled_stream.c) needs to give the one-process bits.
 * Receives go into two buffers per direction (the next block arrives while the
 * kernel works on the current one); a buffer is used again once the copy it
 * passed on has left. Memory: the own rows, the own destinations' softmax
 * state, O(N/P), and four blocks.
 *
 * No cycle of waits: what a process passes rightwards depends only on what it
 * gets from its left (and the last rank passes nothing on); what it passes
 * leftwards, only on its right neighbour's, after the rightward stream is done.
 */
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi.h"
#include "base/base.h"
#include "kernels/kernels.h"
#include "mpi/ring.h"

#define RING_BLOCK AG_I_RING_BLOCK   /* rows a block, at most */
#define CARRY AG_I_RING_CARRY         /* a tile's rows, at most */

typedef struct {
    int64_t lo, hi;             /* global rows */
    int owner;
    int right, left;            /* the farthest ranks it travels to (owner: nowhere) */
} block_t;

/* A buffer: K rows then V rows, each CARRY + RING_BLOCK rows, the block after
   CARRY rows (where the rows before it are copied for tiles that straddle). */
typedef struct {
    float *data;
    MPI_Request recv[2];        /* its K and V being received */
    MPI_Request pass[2];        /* its K and V being passed on */
} buffer_t;

typedef struct {
    block_t *blocks;            /* every block of the graph, ascending */
    int64_t n_blocks;
    int64_t *span;              /* [2P]: each process's sources [lo, hi) */
    buffer_t buf[4];            /* two from each side */
    float *carry;               /* [2][CARRY][HD]: the last rows taken */
    MPI_Request *sends;         /* own blocks passed on */
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

static int reads(const ring_state_t *s, int p, const block_t *b)
{
    return b->lo < s->span[2 * p + 1] && b->hi > s->span[2 * p];
}

/* Where each block travels: the farthest readers on either side of its owner. */
static void routes(ring_state_t *s, int P)
{
    for (int64_t k = 0; k < s->n_blocks; k++) {
        block_t *b = &s->blocks[k];
        b->right = b->left = b->owner;
        for (int p = b->owner + 1; p < P; p++)
            if (reads(s, p, b))
                b->right = p;
        for (int p = b->owner - 1; p >= 0; p--)
            if (reads(s, p, b))
                b->left = p;
    }
}

int ag_i_ring_init(ag_ring_t *g, MPI_Comm comm, const ag_mpi_part_t *part, int64_t HD,
                   ag_error_t *err)
{
    memset(g, 0, sizeof *g);
    g->HD = HD;
    const int P = part->ranks;
    const int64_t n = part->hi - part->lo;
    ring_state_t *s = ag_calloc(1, sizeof *s, err, "ring");
    if (!s)
        return ag_alloc_status();
    g->state = s;
    int64_t count = 0;
    for (int p = 0; p < P; p++)
        count += (part->bounds[p + 1] - part->bounds[p] + RING_BLOCK - 1) / RING_BLOCK;
    s->blocks = ag_alloc(count + 1, sizeof *s->blocks, err, "ring");
    s->span = ag_alloc(2 * P, sizeof *s->span, err, "ring");
    s->sends = ag_alloc(4 * count + 1, sizeof *s->sends, err, "ring");
    s->carry = ag_alloc(2 * CARRY * HD, sizeof(float), err, "ring");
    g->K_own = ag_alloc((n ? n : 1) * HD, sizeof(float), err, "ring");
    g->V_own = ag_alloc((n ? n : 1) * HD, sizeof(float), err, "ring");
    int ok = s->blocks && s->span && s->sends && s->carry && g->K_own && g->V_own;
    for (int k = 0; k < 4; k++)
        ok = ok && (s->buf[k].data = ag_alloc(2 * (CARRY + RING_BLOCK) * HD, sizeof(float),
                                              err, "ring"));
    int rc = ok ? AG_OK : ag_alloc_status();
    if (!rc && count > 16000)   /* two tags a block below MPI's guaranteed 32767 */
        rc = ag_fail(err, AG_ELIMIT, "ring path: %lld blocks of %lld rows are more than "
                     "16000", (long long)count, (long long)RING_BLOCK);
    /* every process learns of a failure before the collective below: one that
       returned alone would leave the others waiting in MPI_Allgather */
    if ((rc = ag_mpi_agree(comm, rc, err)))
        return rc;
    for (int p = 0; p < P; p++)
        for (int64_t lo = part->bounds[p]; lo < part->bounds[p + 1]; lo += RING_BLOCK) {
            const int64_t hi = part->bounds[p + 1] - lo < RING_BLOCK ? part->bounds[p + 1]
                                                                     : lo + RING_BLOCK;
            s->blocks[s->n_blocks++] = (block_t){lo, hi, p, p, p};
        }
    int64_t mine[2];
    span_of(part, &mine[0], &mine[1]);
    MPI_Allgather(mine, 2, MPI_INT64_T, s->span, 2, MPI_INT64_T, comm);
    routes(s, P);
    return AG_OK;
}

void ag_i_ring_destroy(ag_ring_t *g)
{
    ring_state_t *s = g->state;
    if (s) {
        free(s->blocks), free(s->span), free(s->sends), free(s->carry);
        for (int k = 0; k < 4; k++)
            free(s->buf[k].data);
        free(s);
    }
    free(g->K_own), free(g->V_own);
    memset(g, 0, sizeof *g);
}

/* What one round of the ring needs at hand. */
typedef struct {
    ag_ring_t *g;
    ring_state_t *s;
    MPI_Comm comm;
    const ag_mpi_part_t *part;
    ag_tiled_stream_t *st;      /* NULL once the kernel failed: the blocks still move */
    ag_mpi_stats_t *stats;
    int64_t taken;              /* rows in the carry (0 before the first block) */
} round_t;

static float *k_rows(const round_t *r, buffer_t *b)
{
    return b->data + CARRY * r->g->HD;
}

static float *v_rows(const round_t *r, buffer_t *b)
{
    return b->data + (2 * CARRY + RING_BLOCK) * r->g->HD;
}

static void wait_all(round_t *r, int n, MPI_Request *req)
{
    const double t0 = ag_i_mpi_now();
    MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    r->stats->seconds_comm += ag_i_mpi_now() - t0;
}

/* Sends K and V rows (rows of them) to rank `to`, tags from block k. */
static void send_rows(round_t *r, const float *K, const float *V, int64_t rows, int to,
                      int64_t k, MPI_Request *req)
{
    const int64_t HD = r->g->HD;
    MPI_Isend(K, (int)(rows * HD), MPI_FLOAT, to, (int)(2 * k), r->comm, &req[0]);
    MPI_Isend(V, (int)(rows * HD), MPI_FLOAT, to, (int)(2 * k + 1), r->comm, &req[1]);
    r->stats->bytes_sent += 2 * rows * HD * (int64_t)sizeof(float);
    r->stats->halo_rows += rows;
}

/* The own blocks, to each neighbour that passes them on or reads them. */
static void send_own(round_t *r)
{
    ring_state_t *s = r->s;
    const int me = r->part->rank;
    s->n_sends = 0;
    for (int64_t k = 0; k < s->n_blocks; k++) {
        const block_t *b = &s->blocks[k];
        if (b->owner != me)
            continue;
        const int64_t at = (b->lo - r->part->lo) * r->g->HD, rows = b->hi - b->lo;
        if (b->right > me)
            send_rows(r, r->g->K_own + at, r->g->V_own + at, rows, me + 1, k,
                      &s->sends[s->n_sends]), s->n_sends += 2;
        if (b->left < me)
            send_rows(r, r->g->K_own + at, r->g->V_own + at, rows, me - 1, k,
                      &s->sends[s->n_sends]), s->n_sends += 2;
    }
}

/* Merges block b (in buf, after its CARRY rows) into the destinations' state,
   with the rows taken before it in front, and keeps its last rows. */
static void take(round_t *r, const block_t *b, buffer_t *buf)
{
    const int64_t HD = r->g->HD, rows = b->hi - b->lo, c = r->taken < CARRY ? r->taken : CARRY;
    float *K = k_rows(r, buf), *V = v_rows(r, buf);
    memcpy(K - c * HD, r->s->carry + (CARRY - c) * HD, (size_t)(c * HD) * sizeof(float));
    memcpy(V - c * HD, r->s->carry + (2 * CARRY - c) * HD, (size_t)(c * HD) * sizeof(float));
    if (r->st)   /* global row j lies at K + (j - b->lo) * HD */
        ag_i_tiled_stream_feed(r->st, K - b->lo * HD, V - b->lo * HD, b->hi);
    const int64_t keep = c + rows < CARRY ? c + rows : CARRY;
    memcpy(r->s->carry + (CARRY - keep) * HD, K + (rows - keep) * HD,
           (size_t)(keep * HD) * sizeof(float));
    memcpy(r->s->carry + (2 * CARRY - keep) * HD, V + (rows - keep) * HD,
           (size_t)(keep * HD) * sizeof(float));
    r->taken = c + rows;
    /* a large send moves only while its sender is inside MPI (rendezvous) */
    int done;
    MPI_Testall((int)r->s->n_sends, r->s->sends, &done, MPI_STATUSES_IGNORE);
}

/* Posts the receive of block k from rank `from` into buf, once buf's last
   block has left. */
static void post(round_t *r, int64_t k, int from, buffer_t *buf)
{
    const block_t *b = &r->s->blocks[k];
    const int64_t rows = b->hi - b->lo, HD = r->g->HD;
    wait_all(r, 2, buf->pass);
    MPI_Irecv(k_rows(r, buf), (int)(rows * HD), MPI_FLOAT, from, (int)(2 * k), r->comm,
              &buf->recv[0]);
    MPI_Irecv(v_rows(r, buf), (int)(rows * HD), MPI_FLOAT, from, (int)(2 * k + 1), r->comm,
              &buf->recv[1]);
    r->stats->bytes_received += 2 * rows * HD * (int64_t)sizeof(float);
}

/* The blocks arriving from one side (dir +1: from the left neighbour, passed on
   rightwards; -1: from the right, passed on leftwards), ascending. */
static int arrives(const block_t *b, int me, int dir)
{
    return dir > 0 ? b->owner < me && b->right >= me : b->owner > me && b->left <= me;
}

static void stream_side(round_t *r, int dir, buffer_t *two)
{
    ring_state_t *s = r->s;
    const int me = r->part->rank, from = me - dir;
    int64_t next[2] = {-1, -1};   /* the blocks in the two buffers */
    int64_t k = 0;
    for (int slot = 0; slot < 2; slot++) {   /* the first two */
        while (k < s->n_blocks && !arrives(&s->blocks[k], me, dir))
            k++;
        if (k < s->n_blocks)
            post(r, k, from, &two[slot]), next[slot] = k++;
    }
    for (int slot = 0; next[slot] >= 0; slot = 1 - slot) {
        buffer_t *buf = &two[slot];
        const block_t *b = &s->blocks[next[slot]];
        wait_all(r, 2, buf->recv);
        const int onward = dir > 0 ? b->right > me : b->left < me;
        if (onward)
            send_rows(r, k_rows(r, buf), v_rows(r, buf), b->hi - b->lo, me + dir, next[slot],
                      buf->pass);
        if (reads(s, me, b))
            take(r, b, buf);
        while (k < s->n_blocks && !arrives(&s->blocks[k], me, dir))
            k++;
        next[slot] = -1;
        if (k < s->n_blocks)
            post(r, k, from, buf), next[slot] = k++;
    }
}

/* The own blocks this process reads, in order, through a buffer. */
static void take_own(round_t *r, buffer_t *buf)
{
    ring_state_t *s = r->s;
    const int64_t HD = r->g->HD;
    for (int64_t k = 0; k < s->n_blocks; k++) {
        const block_t *b = &s->blocks[k];
        if (b->owner != r->part->rank || !reads(s, r->part->rank, b))
            continue;
        const int64_t at = (b->lo - r->part->lo) * HD, rows = b->hi - b->lo;
        wait_all(r, 2, buf->pass);
        memcpy(k_rows(r, buf), r->g->K_own + at, (size_t)(rows * HD) * sizeof(float));
        memcpy(v_rows(r, buf), r->g->V_own + at, (size_t)(rows * HD) * sizeof(float));
        take(r, b, buf);
    }
}

int ag_i_ring_attention(ag_ring_t *g, MPI_Comm comm, const ag_nbhd_t *nb,
                        const ag_mpi_part_t *part, const float *Q, int64_t H, int64_t d,
                        const ag_score_t *score, float *M, ag_mpi_stats_t *stats,
                        ag_error_t *err)
{
    ring_state_t *s = g->state;
    float scale;
    int rc = ag_i_plain_scale(score, d, &scale)
                 ? AG_OK : ag_fail(err, AG_EINVAL, "the ring path runs plain dot-product "
                                   "scores only");
    round_t r = {g, s, comm, part, NULL, stats, 0};
    if (!rc)
        rc = ag_i_tiled_stream_begin(&r.st, nb, part->lo, part->hi, Q, H, d, scale, err);
    for (int k = 0; k < 4; k++)
        for (int q = 0; q < 2; q++)
            s->buf[k].recv[q] = s->buf[k].pass[q] = MPI_REQUEST_NULL;
    /* the blocks move whatever happened here: the others wait for them */
    send_own(&r);
    stream_side(&r, +1, &s->buf[0]);
    take_own(&r, &s->buf[0]);
    stream_side(&r, -1, &s->buf[2]);
    for (int k = 0; k < 4; k++)
        wait_all(&r, 2, s->buf[k].pass);
    wait_all(&r, (int)s->n_sends, s->sends);
    if (!rc && ag_i_tiled_stream_first(r.st) != INT64_MAX)
        rc = ag_fail(err, AG_EINVAL, "ring path: the tile at source %lld never arrived",
                     (long long)ag_i_tiled_stream_first(r.st));
    if (!rc)
        ag_i_tiled_stream_end(r.st, M, NULL);
    ag_i_tiled_stream_free(r.st);
    return rc;
}
