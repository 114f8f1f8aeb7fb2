/*
 * Training through the rounds on P processes, halo path: src/train/backprop.c's
 * forward and backward on each process's rows, bitwise the one-process
 * gradients.
 *
 * Forward: as ag_mpi_rounds_run, keeping per round the own rows' X, Q, M and
 * log-sum-exp and the window of K and V rows the halo brought.
 * Backward, per round in reverse: dM = dX Wo and the projections' products on
 * own rows (fixed blocks: the same bits); dQ of own destinations (K and V
 * rows from the tape's window); dK and dV of own sources computed here, by
 * walking each source's out-edges over every destination that reads it, as
 * one process does (a partial sum sent back to the owner could not be added
 * in the one-process order): the owners of those destinations send their Q,
 * dM, lse and D rows (the destination-side halo) and, once, their in-runs
 * clipped to this process's sources (nbhd_back.c). Weight gradients: per
 * chunk of rows here, all chunks added in order on every process (reduce.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi.h"
#include "base/base.h"
#include "graph/graph.h"
#include "kernels/kernels.h"
#include "train/train.h"
#include "kernels/kernels.h"
#include "model/model.h"

struct ag_mpi_tape {
    MPI_Comm comm;
    const ag_mpi_part_t *part;
    const int64_t *runs;      /* part's arrays when the tape was made */
    ag_nbhd_t view;
    const ag_weights_t *layers;
    int n_layers, rounds, layer_norm;
    ag_round_opts_t opts;
    int64_t n, D, H, HD, F;   /* the widest state, the largest H, H*d and sublayer width */
    int64_t wlo, whi;         /* the window of K and V rows (every halo's) */
    ag_halos_t halos;         /* the forward's K and V rows, one halo per H*d */
    int64_t *shape;           /* per round its layer's shape (ag_i_round_shapes): what the
                                 tape's memory and plans were made for */
    int64_t *start;           /* [rounds + 1]: where each round's activations begin */
    float *acts;              /* per round: X [n, D], Q M [n, HD], lse [n, H], K V [w, HD],
                                 and what the layer keeps (kept_t) */
    /* the destination-side halo: own destinations sent to each peer, and the
       destinations received from each (global rows, ascending per peer) */
    int *send_count, *send_displ, *recv_count, *recv_displ;
    int64_t *send_rows, *recv_rows, n_send, n_recv;
    ag_i_back_part_t bp;
    ag_i_reducer_t red;
    ag_mpi_reduce_t red_ctx;
    ag_mpi_stats_t *stats;
    float *back;              /* the backward's buffers (back_alloc), kept for the next */
    ag_i_plan_t forward, backward;   /* the part's kernels, made by the first round */
    float *bias;              /* an edge bias in bp.view's slots (NULL: none), its own
                                 messages' and the clipped runs' from their owners */
};

static const ag_weights_t *round_layer(const ag_mpi_tape_t *t, int r)
{
    return &t->layers[t->n_layers == 1 ? 0 : r];
}

static int64_t round_floats(const ag_mpi_tape_t *t, const ag_weights_t *w)
{
    const int64_t HD = w->H * w->d;
    return t->n * (w->D + 2 * HD + w->H + ag_i_kept_width(w, ag_i_round_kept(w, t->layer_norm))) +
           2 * (t->whi - t->wlo) * HD;
}

/* Round r's activations: X, Q, M, lse [n, ...], the window's K and V, and
   what the layer keeps (ag_i_round_kept; the others NULL). */
typedef struct {
    float *X, *Q, *M, *lse, *K, *V;
    ag_i_round_bufs_t kept;       /* Z, ffn_in, U, R, O, P, ffn_sum */
} mpi_acts_t;

static mpi_acts_t acts_of(const ag_mpi_tape_t *t, int r)
{
    const ag_weights_t *w = round_layer(t, r);
    const int64_t n = t->n, HD = w->H * w->d;
    mpi_acts_t a = {.X = t->acts + t->start[r]};
    a.Q = a.X + n * w->D, a.M = a.Q + n * HD, a.lse = a.M + n * HD;
    a.K = a.lse + n * w->H, a.V = a.K + (t->whi - t->wlo) * HD;
    ag_i_kept_carve(&a.kept, w, ag_i_round_kept(w, t->layer_norm), n,
                    a.V + (t->whi - t->wlo) * HD);
    return a;
}

void ag_mpi_tape_free(ag_mpi_tape_t *t)
{
    if (!t)
        return;
    ag_i_halos_destroy(&t->halos);
    ag_i_back_part_destroy(&t->bp);
    free(t->acts), free(t->back), free(t->shape), free(t->start);
    free(t->send_count), free(t->send_displ), free(t->recv_count), free(t->recv_displ);
    free(t->send_rows), free(t->recv_rows);
    ag_i_plan_free(&t->forward), ag_i_plan_free(&t->backward);
    free(t->bias);
    free(t);
}

/* ---- the backward's plan: clipped runs and the destination rows ---- */

static int owner_of(const int64_t *bounds, int P, int64_t j)
{
    int a = 0, b = P - 1;   /* the last p with bounds[p] <= j (and a non-empty part) */
    while (a < b) {
        const int m = (a + b + 1) / 2;
        if (bounds[m] <= j)
            a = m;
        else
            b = m - 1;
    }
    while (a + 1 < P && bounds[a + 1] <= j)
        a++;
    return a;
}

/* Each own destination i's runs, clipped to each other owner p's rows, in
   order: visit(ctx, p, i, a, len, slot) for sources a..a+len-1, whose first
   message is in own slot `slot`. The runs sent to each peer (walk_runs) and
   their edge bias (walk_bias) follow this one order. */
typedef void (*piece_fn)(void *ctx, int p, int64_t i, int64_t a, int64_t len, int64_t slot);

static void walk_pieces(const ag_mpi_part_t *part, piece_fn visit, void *ctx)
{
    const ag_nbhd_t *nb = &part->nb;
    const int P = part->ranks, me = part->rank;
    for (int64_t x = 0; x < nb->n_nodes; x++)
        for (int64_t r = nb->run_ptr[x], slot = nb->edge_ptr[x]; r < nb->run_ptr[x + 1];
             slot += nb->run_len[r++]) {
            const int64_t s = nb->run_src[r], e = s + nb->run_len[r];
            for (int p = owner_of(part->bounds, P, s); p < P && part->bounds[p] < e; p++) {
                const int64_t a = s > part->bounds[p] ? s : part->bounds[p];
                const int64_t b = e < part->bounds[p + 1] ? e : part->bounds[p + 1];
                if (p != me && b > a)
                    visit(ctx, p, part->lo + x, a, b - a, slot + (a - s));
            }
        }
}

/* walk_runs' state: with trip NULL it counts triples and distinct
   destinations per peer, else writes them at the cursors. */
typedef struct {
    int64_t *trips_per, *rows_per;
    int64_t *trip, *cur, *rows, *rcur;
    int64_t *last;            /* per peer, the last destination sent + 1 */
} runs_walk_t;

static void run_piece(void *ctx, int p, int64_t i, int64_t a, int64_t len, int64_t slot)
{
    runs_walk_t *w = ctx;
    (void)slot;
    if (!w->trip) {
        w->trips_per[p]++;
    } else {
        int64_t *at = w->trip + 3 * w->cur[p]++;
        at[0] = i, at[1] = a, at[2] = len;
    }
    if (w->last[p] != i + 1) {
        w->last[p] = i + 1;
        if (!w->trip)
            w->rows_per[p]++;
        else
            w->rows[w->rcur[p]++] = i;
    }
}

/* The runs own destinations read from each peer's sources: with `trip` NULL
   counts triples and distinct destinations per peer, else writes them at
   cursor (3 int64 a triple) and the destinations at rows. */
static int walk_runs(const ag_mpi_part_t *part, int64_t *trips_per, int64_t *rows_per,
                     int64_t *trip, int64_t *cur, int64_t *rows, int64_t *rcur, ag_error_t *err)
{
    runs_walk_t w = {trips_per, rows_per, trip, cur, rows, rcur, NULL};
    if (!(w.last = ag_calloc(part->ranks, sizeof *w.last, err, "backward plan")))
        return ag_alloc_status();
    walk_pieces(part, run_piece, &w);
    free(w.last);
    return AG_OK;
}

/* The received triples [m, 3] into the part's backward nbhd, and the distinct
   destinations received from each peer. */
static int take_runs(ag_mpi_tape_t *t, const int64_t *trip, int64_t m, const int *tcount,
                     ag_error_t *err)
{
    const ag_mpi_part_t *part = t->part;
    const int P = part->ranks;
    int64_t *dst = ag_alloc(m + 1, sizeof *dst, err, "backward plan");
    int64_t *src = ag_alloc(m + 1, sizeof *src, err, "backward plan");
    int64_t *len = ag_alloc(m + 1, sizeof *len, err, "backward plan");
    t->recv_rows = ag_alloc(m + 1, sizeof *t->recv_rows, err, "backward plan");
    int rc = dst && src && len && t->recv_rows ? AG_OK : ag_alloc_status();
    int64_t k = 0, n = 0;
    for (int p = 0; !rc && p < P; p++) {
        t->recv_count[p] = 0;
        for (int64_t q = 0; q < tcount[p] / 3; q++, k++) {
            dst[k] = trip[3 * k], src[k] = trip[3 * k + 1], len[k] = trip[3 * k + 2];
            if (q == 0 || dst[k] != dst[k - 1])
                t->recv_rows[n++] = dst[k], t->recv_count[p]++;
        }
    }
    t->n_recv = n;
    if (!rc)
        rc = ag_i_back_part_init(&t->bp, part->n_nodes, part->n_edges, part->lo, part->hi,
                                 &part->nb, m, dst, src, len, err);
    free(dst), free(src), free(len);
    return rc;
}

static int back_plan(ag_mpi_tape_t *t, ag_error_t *err)
{
    const ag_mpi_part_t *part = t->part;
    const int P = part->ranks;
    int64_t *tp = ag_calloc(P, sizeof *tp, err, "backward plan");
    int64_t *rp = ag_calloc(P, sizeof *rp, err, "backward plan");
    int *sc = ag_alloc(P, sizeof *sc, err, "backward plan");   /* send counts, displs */
    int *sd = ag_alloc(P, sizeof *sd, err, "backward plan");
    int *rc3 = ag_alloc(P, sizeof *rc3, err, "backward plan");   /* receive counts, displs */
    int *rd = ag_alloc(P, sizeof *rd, err, "backward plan");
    t->send_count = ag_calloc(P, sizeof(int), err, "backward plan");
    t->send_displ = ag_calloc(P, sizeof(int), err, "backward plan");
    t->recv_count = ag_calloc(P, sizeof(int), err, "backward plan");
    t->recv_displ = ag_calloc(P, sizeof(int), err, "backward plan");
    int rc = tp && rp && sc && sd && rc3 && rd && t->send_count && t->send_displ &&
             t->recv_count && t->recv_displ ? AG_OK : ag_alloc_status();
    int64_t *trip = NULL, *rtrip = NULL, *cur = NULL, *rcur = NULL, total = 0, rows = 0;
    if (!rc && !(rc = walk_runs(part, tp, rp, NULL, NULL, NULL, NULL, err))) {
        for (int p = 0; p < P; p++)
            total += tp[p], rows += rp[p];
        if (3 * total > INT32_MAX)
            rc = ag_fail(err, AG_ELIMIT, "backward plan: %lld runs to send are beyond what "
                         "one MPI call counts", (long long)total);
    }
    if (!rc && (!(trip = ag_alloc(3 * total + 3, sizeof *trip, err, "backward plan")) ||
                !(t->send_rows = ag_alloc(rows + 1, sizeof *t->send_rows, err, "backward plan")) ||
                !(cur = ag_calloc(P, sizeof *cur, err, "backward plan")) ||
                !(rcur = ag_calloc(P, sizeof *rcur, err, "backward plan"))))
        rc = ag_alloc_status();
    if (!rc) {
        for (int p = 0; p < P; p++) {
            sc[p] = (int)(3 * tp[p]), t->send_count[p] = (int)rp[p];
            cur[p] = p ? cur[p - 1] + tp[p - 1] : 0, rcur[p] = p ? rcur[p - 1] + rp[p - 1] : 0;
        }
        rc = walk_runs(part, NULL, NULL, trip, cur, t->send_rows, rcur, err);
        ag_i_mpi_displs(sc, sd, P);
        ag_i_mpi_displs(t->send_count, t->send_displ, P);
        t->n_send = rows;
    }
    if (!(rc = ag_mpi_agree(t->comm, rc, err))) {
        MPI_Alltoall(sc, 1, MPI_INT, rc3, 1, MPI_INT, t->comm);
        int64_t got = 0;
        for (int p = 0; p < P; p++)
            got += rc3[p];
        if (got > INT32_MAX)
            rc = ag_fail(err, AG_ELIMIT, "backward plan: process %d receives %lld run values, "
                         "beyond what one MPI call counts (2^31)", part->rank, (long long)got);
        else if ((rtrip = ag_alloc(got + 3, sizeof *rtrip, err, "backward plan")))
            ag_i_mpi_displs(rc3, rd, P);
        else
            rc = ag_alloc_status();
        if (!(rc = ag_mpi_agree(t->comm, rc, err))) {
            MPI_Alltoallv(trip, sc, sd, MPI_INT64_T, rtrip, rc3, rd, MPI_INT64_T, t->comm);
            rc = take_runs(t, rtrip, got / 3, rc3, err);
            if (!rc)
                ag_i_mpi_displs(t->recv_count, t->recv_displ, P);
        }
    }
    free(tp), free(rp), free(sc), free(sd), free(rc3), free(rd);
    free(trip), free(rtrip), free(cur), free(rcur);
    return ag_mpi_agree(t->comm, rc, err);
}

/* walk_bias' state: with vals NULL it counts the values per peer, else copies
   them at the cursors. */
typedef struct {
    const float *bias;
    int64_t *count;
    float *vals;
    int64_t *cur;
} bias_walk_t;

static void bias_piece(void *ctx, int p, int64_t i, int64_t a, int64_t len, int64_t slot)
{
    bias_walk_t *w = ctx;
    (void)i, (void)a;
    if (!w->vals)
        w->count[p] += len;
    else
        memcpy(w->vals + w->cur[p], w->bias + slot, (size_t)len * sizeof *w->vals),
            w->cur[p] += len;
}

/* The edge bias (bias, in own slots) of the pieces walk_runs sends, per peer
   in its order: counted (count) or copied into vals at cur[p]. */
static void walk_bias(const ag_mpi_part_t *part, const float *bias, int64_t *count, float *vals,
                      int64_t *cur)
{
    bias_walk_t w = {bias, count, vals, cur};
    walk_pieces(part, bias_piece, &w);
}

/* A buffer of n + 1 floats for values a process sends or receives in one MPI
   call ("sends", "receives"): refused past 2^31. */
static int values_buffer(float **buf, int64_t n, const char *dir, int rank, ag_error_t *err)
{
    *buf = NULL;
    if (n > INT32_MAX)
        return ag_fail(err, AG_ELIMIT, "edge bias: process %d %s %lld values, beyond what one "
                       "MPI call counts (2^31)", rank, dir, (long long)n);
    return (*buf = ag_alloc(n + 1, sizeof **buf, err, "edge bias")) ? AG_OK
                                                                       : ag_alloc_status();
}

/* t->bias: the edge bias in the backward view's slots. Own destinations'
   messages come from bias (own slots); the others' runs clipped to own
   sources come from their owners, in the order back_plan received the runs
   (peers in rank order, destinations ascending, each one's runs in order),
   which is the view's. Remade on every forward: the bias may change. */
static int bias_exchange(ag_mpi_tape_t *t, const float *bias, ag_error_t *err)
{
    const ag_mpi_part_t *part = t->part;
    const ag_nbhd_t *view = &t->bp.view;
    const int P = part->ranks;
    const int64_t dlo = t->bp.dlo, dhi = t->bp.dhi;
    int64_t *per = ag_calloc(P, sizeof *per, err, "edge bias");
    int64_t *cur = ag_calloc(P, sizeof *cur, err, "edge bias");
    int *sc = ag_alloc(P, sizeof *sc, err, "edge bias"), *sd = ag_alloc(P, sizeof *sd, err,
                                                                             "edge bias");
    int *rcn = ag_alloc(P, sizeof *rcn, err, "edge bias"), *rd = ag_alloc(P, sizeof *rd, err,
                                                                               "edge bias");
    float *out = NULL, *in = NULL;
    free(t->bias);
    t->bias = ag_alloc(view->edge_ptr[dhi] + 1, sizeof *t->bias, err, "edge bias");
    int rc = per && cur && sc && sd && rcn && rd && t->bias ? AG_OK : ag_alloc_status();
    int64_t total = 0, got = 0;
    if (!rc) {
        walk_bias(part, bias, per, NULL, NULL);
        for (int p = 0; p < P; p++)
            cur[p] = total, total += per[p];
        rc = values_buffer(&out, total, "sends", part->rank, err);
    }
    if (!(rc = ag_mpi_agree(t->comm, rc, err))) {
        walk_bias(part, bias, NULL, out, cur);
        for (int p = 0; p < P; p++)
            sc[p] = (int)per[p];
        ag_i_mpi_displs(sc, sd, P);
        MPI_Alltoall(sc, 1, MPI_INT, rcn, 1, MPI_INT, t->comm);
        for (int p = 0; p < P; p++)
            got += rcn[p];
        rc = values_buffer(&in, got, "receives", part->rank, err);
        if (!(rc = ag_mpi_agree(t->comm, rc, err))) {
            ag_i_mpi_displs(rcn, rd, P);
            MPI_Alltoallv(out, sc, sd, MPI_FLOAT, in, rcn, rd, MPI_FLOAT, t->comm);
            int64_t k = 0;   /* the values received, in the view's order */
            for (int64_t i = dlo; i < dhi && !rc; i++) {
                const int64_t n = view->edge_ptr[i + 1] - view->edge_ptr[i];
                const int mine = i >= part->lo && i < part->hi;
                if (!mine && k + n > got)
                    break;
                if (n)
                    memcpy(t->bias + view->edge_ptr[i],
                           mine ? bias + part->nb.edge_ptr[i - part->lo] : in + k,
                           (size_t)n * sizeof *t->bias);
                k += mine ? 0 : n;
            }
            if (k != got)   /* the runs received before were another bias's */
                rc = ag_fail(err, AG_EINVAL, "edge bias: process %d received %lld values for "
                             "runs of %lld messages", part->rank, (long long)got, (long long)k);
        }
    }
    free(per), free(cur), free(sc), free(sd), free(rcn), free(rd), free(out), free(in);
    return ag_mpi_agree(t->comm, rc, err);
}

/* ---- forward ---- */

/* The attention of round r on this process's part: the halo's K and V rows
   exchanged, then kept on the tape with the log-sum-exp. */
typedef struct {
    ag_mpi_tape_t *t;
    mpi_acts_t a;
} part_round_t;

static int attend_part(void *ctx, const ag_weights_t *w, const ag_score_t *sc, ag_error_t *err)
{
    const part_round_t *pr = ctx;
    ag_mpi_tape_t *t = pr->t;
    const mpi_acts_t *a = &pr->a;
    const ag_mpi_part_t *part = t->part;
    const int64_t HD = w->H * w->d;
    ag_halo_t *h = ag_i_halos_for(&t->halos, HD);
    ag_i_halo_exchange(h, t->comm, HD, t->stats);
    /* the log-sum-exp of plain dot-product scores, for their backward (the
       generic kernel's recomputes its own; the exchange sends zeros then) */
    kext_t x = {0};
    x.lse = a->lse - part->lo * w->H;
    float scale;
    const int plain = ag_i_plain_scale(sc, w->d, &scale);
    if (!plain)
        memset(a->lse, 0, (size_t)(t->n * w->H) * sizeof(float));
    const ag_i_fwd_t f = {&t->view, a->Q - part->lo * HD, h->K - h->wlo * HD,
                          h->V - h->wlo * HD, w->H, w->d, sc, a->M - part->lo * HD,
                          plain ? &x : NULL};
    int rc = ag_i_forward_part(&t->forward, &f, part->lo, part->hi, h->wlo, h->whi,
                               &(ag_i_layout_t){part->one_run, part->block_cells}, err);
    if (rc)
        return rc;
    const int64_t w_rows = h->whi - h->wlo;
    memcpy(a->K, h->K, (size_t)(w_rows * HD) * sizeof(float));
    memcpy(a->V, h->V, (size_t)(w_rows * HD) * sizeof(float));
    return AG_OK;
}

/* The forward's scratch: LayerNorm's and dropout's output [n, D]; the
   sublayers' normed input [n, D] and activation [n, F]. */
typedef struct {
    float *Xn, *Hn, *A;
} fwd_scratch_t;

static int forward_round(ag_mpi_tape_t *t, int r, float *X, const fwd_scratch_t *fs,
                         ag_error_t *err)
{
    const int k = t->n_layers == 1 ? 0 : r;
    const ag_weights_t *w = round_layer(t, r);
    const part_round_t pr = {t, acts_of(t, r)};
    const mpi_acts_t *a = &pr.a;
    memcpy(a->X, X, (size_t)(t->n * w->D) * sizeof *X);
    /* this process's rows of K and V go into the halo window, to be exchanged */
    const int64_t HD = w->H * w->d;
    const ag_halo_t *h = ag_i_halos_for(&t->halos, HD);
    const int64_t own = (t->part->lo - h->wlo) * HD;
    ag_i_round_bufs_t b = a->kept;
    b.Xn = fs->Xn, b.Q = a->Q, b.K = h->K + own, b.V = h->V + own, b.M = a->M;
    b.Hn = fs->Hn, b.A = fs->A;
    ag_score_t sc;
    return ag_i_round_forward(X, t->n, w, (ag_i_round_at_t){k, r, t->part->lo, 1, 0},
                              &t->opts, &b, &sc, attend_part, (void *)&pr, err);
}

static int check_layers(const ag_weights_t *layers, int n_layers, int rounds,
                        const ag_round_opts_t *opts, int64_t n, ag_error_t *err)
{
    int rc = ag_i_layers_mpi_check(layers, n_layers, rounds, opts, err);
    for (int k = 0; !rc && k < n_layers; k++)
        if (layers[k].per_node && layers[k].per_node != n)   /* a process's nodes' matrices */
            return ag_fail(err, AG_EINVAL, "layer %d has per-node weights for %lld nodes; this "
                           "process has %lld rows", k + 1, (long long)layers[k].per_node,
                           (long long)n);
    return rc;
}

/* A tape made on this very part (the same arrays: a part rebuilt in its place
   needs a new tape) with these shapes: its plans and memory serve again. */
static int reusable(const ag_mpi_tape_t *t, MPI_Comm comm, const ag_mpi_part_t *part,
                    const int64_t *shape, int n_layers, int rounds)
{
    int same_comm;
    MPI_Comm_compare(t->comm, comm, &same_comm);
    return same_comm == MPI_IDENT && t->part == part && t->runs == part->nb.run_ptr &&
           t->n == part->hi - part->lo && t->view.n_nodes == part->n_nodes &&
           t->view.n_edges == part->n_edges && t->n_layers == n_layers && t->rounds == rounds &&
           shape && memcmp(t->shape, shape, (size_t)(AG_I_ROUND_SHAPE * rounds) * sizeof *shape) == 0;
}

/* Sizes and start offsets of a new tape's rounds. */
static int tape_layout(ag_mpi_tape_t *t, ag_error_t *err)
{
    t->D = ag_rounds_widest(t->layers, t->n_layers, t->rounds);
    t->start = ag_alloc(t->rounds + 1, sizeof *t->start, err, "tape");
    if (!t->start)
        return ag_alloc_status();
    ag_i_halo_window(t->part, &t->wlo, &t->whi);
    double floats = 0;   /* in double first: a size that overflows fails here */
    for (int r = 0; r < (t->rounds ? t->rounds : 1); r++) {
        const ag_weights_t *w = round_layer(t, r);
        t->H = w->H > t->H ? w->H : t->H;
        t->HD = w->H * w->d > t->HD ? w->H * w->d : t->HD;
        t->F = w->w1 && w->F > t->F ? w->F : t->F;
        if (r < t->rounds) {
            t->start[r] = (int64_t)floats;
            floats += (double)round_floats(t, w);
        }
    }
    if (floats * 4.0 > 9e18)
        return ag_fail(err, AG_ELIMIT, "rounds forward: a tape of %d rounds overflows",
                       t->rounds);
    t->start[t->rounds] = (int64_t)floats;
    return AG_OK;
}

int ag_mpi_rounds_forward(MPI_Comm comm, const ag_mpi_part_t *part, const ag_weights_t *layers,
                          int n_layers, float *X, int rounds, const ag_round_opts_t *opts,
                          ag_mpi_tape_t **tape, ag_mpi_stats_t *stats, ag_error_t *err)
{
    ag_mpi_tape_t *t = *tape;
    *tape = NULL;
    int rc = check_layers(layers, n_layers, rounds, opts, part->hi - part->lo, err);
    if (!rc && part->node_of)   /* the sums over rows assume the contiguous, aligned cuts */
        rc = ag_fail(err, AG_EINVAL, "training on renumbered parts "
                     "(ag_mpi_part_scatter_partition) is not supported: use the contiguous "
                     "parts, whose gradients are bitwise one process's");
    /* an edge bias is given by every process or by none: each decides the kernel
       (generic or fused) by it, and the two backwards exchange different rows */
    const float *bias = opts && opts->score ? opts->score->edge_bias : NULL;
    int biased = bias != NULL, any_bias;
    MPI_Allreduce(&biased, &any_bias, 1, MPI_INT, MPI_MAX, comm);
    if (!rc && any_bias && !bias)
        rc = ag_fail(err, AG_EINVAL, "edge bias: process %d gives none, where other processes "
                     "give one (a process without messages gives an array of none)",
                     part->rank);
    /* the rounds' shapes under these options, to compare with an earlier tape's */
    const int layer_norm = opts && opts->norm == AG_NORM_LAYER;
    int64_t *shape = rc ? NULL : ag_i_round_shapes(layers, n_layers, rounds, layer_norm, err);
    if (!rc && !shape)
        rc = ag_alloc_status();
    /* reused only where every process can reuse its tape: the plans are collective */
    int mine = !rc && t && reusable(t, comm, part, shape, n_layers, rounds), again;
    MPI_Allreduce(&mine, &again, 1, MPI_INT, MPI_MIN, comm);
    if (!again) {
        ag_mpi_tape_free(t);
        t = NULL;
        if (!rc && !(t = ag_calloc(1, sizeof *t, err, "tape")))
            rc = ag_alloc_status();
    }
    if (!rc) {   /* what may change between calls on one tape */
        t->layers = layers, t->opts = opts ? *opts : (ag_round_opts_t)AG_ROUND_OPTS_INIT;
        t->layer_norm = layer_norm;
        t->stats = stats;
    }
    if (!rc && !again) {
        t->comm = comm, t->part = part, t->runs = part->nb.run_ptr;
        t->view = ag_i_part_view(part);
        t->n_layers = n_layers, t->rounds = rounds;
        t->n = part->hi - part->lo;
        t->shape = shape, shape = NULL;
        rc = tape_layout(t, err);
    }
    free(shape);
    if ((rc = ag_mpi_agree(comm, rc, err)) ||
        (!again && ((rc = ag_i_halos_plan(&t->halos, comm, part, layers, n_layers, rounds,
                                          err)) ||
                    (rc = back_plan(t, err)))) ||
        (any_bias && (rc = bias_exchange(t, bias, err)))) {
        ag_mpi_tape_free(t);
        return rc;
    }
    if (!any_bias) {
        free(t->bias);
        t->bias = NULL;
    }
    ag_i_mpi_reducer(&t->red, &t->red_ctx, comm, part, stats);
    if (!t->acts && !(t->acts = ag_alloc(t->start[rounds] ? t->start[rounds] : 1,
                                         sizeof(float), err,
                                         "tape of the rounds' activations")))
        rc = ag_alloc_status();
    const int64_t rows = t->n ? t->n : 1;
    const int resid = t->opts.resid_dropout > 0;   /* its branches go to Xn and Hn */
    fwd_scratch_t fs = {NULL, NULL, NULL};
    if (!rc && (t->layer_norm || t->opts.dropout > 0 || resid) &&
        !(fs.Xn = ag_alloc(rows * t->D, sizeof(float), err, "rounds forward")))
        rc = ag_alloc_status();
    if (!rc && t->F && (!(fs.Hn = ag_alloc(rows * t->D, sizeof(float), err, "rounds forward")) ||
                        !(fs.A = ag_alloc(rows * t->F, sizeof(float), err, "rounds forward"))))
        rc = ag_alloc_status();
    rc = ag_mpi_agree(comm, rc, err);
    for (int r = 0; !rc && r < rounds; r++)
        rc = ag_mpi_agree(comm, forward_round(t, r, X, &fs, err), err);
    free(fs.Xn), free(fs.Hn), free(fs.A);
    if (rc) {
        ag_mpi_tape_free(t);
        return rc;
    }
    *tape = t;
    return AG_OK;
}

/* ---- backward ---- */

typedef struct {
    float *dX, *Xn, *dXn, *dM, *dQ, *dK, *dV, *Dd;   /* own rows */
    float *Qw, *dMw, *lsew, *Ddw;   /* the destinations read: rows dlo..dhi-1 */
    float *statew;                  /* generic scores: their states, rows dlo..dhi-1 */
    float *part;                    /* generic scores: own chunks' vector partials */
    float *da_src, *da_dst;         /* [H*d] the attention vectors' gradients */
    float *sendbuf, *recvbuf;       /* rows of Q, dM, lse, D (or of the states) */
    float *Hn, *dHn, *A, *dA, *dR;  /* the sublayers' [n, D], [n, F]; the skips' [n, D] */
} mpi_back_t;

/* The backward's buffers in b, carved out of `all` (NULL: a new zeroed block),
   for the widest state D, the largest H*d, H and F. */
static float *back_alloc(mpi_back_t *b, const ag_mpi_tape_t *t, float *all, ag_error_t *err)
{
    const int64_t n = t->n, D = t->D, HD = t->HD, H = t->H, F = t->F;
    const int64_t w = t->bp.dhi - t->bp.dlo;
    /* a row of the exchange: Q, dM, lse, D; the generic kernel's state (3H) fits */
    const int64_t row = 2 * HD + 2 * H, S = H * AG_I_GENERIC_STATE;
    const int64_t chunks = ag_i_generic_chunks(t->part->lo, t->part->hi);
    if (!all)
        all = ag_calloc(6 * n * D + 2 * n * F + 4 * n * HD + n * H + w * row + w * S +
                        chunks * HD + 2 * HD + (t->n_send + t->n_recv) * row + 1,
                        sizeof(float), err, "rounds backward");
    if (!all)
        return NULL;
    b->dX = all, b->Xn = b->dX + n * D, b->dXn = b->Xn + n * D, b->dM = b->dXn + n * D;
    b->dQ = b->dM + n * HD, b->dK = b->dQ + n * HD, b->dV = b->dK + n * HD;
    b->Dd = b->dV + n * HD, b->Qw = b->Dd + n * H, b->dMw = b->Qw + w * HD;
    b->lsew = b->dMw + w * HD, b->Ddw = b->lsew + w * H, b->statew = b->Ddw + w * H;
    b->part = b->statew + w * S, b->da_src = b->part + chunks * HD, b->da_dst = b->da_src + HD;
    b->sendbuf = b->da_dst + HD;
    b->recvbuf = b->sendbuf + t->n_send * row;
    b->Hn = b->recvbuf + t->n_recv * row, b->dHn = b->Hn + n * D, b->dR = b->dHn + n * D;
    b->A = b->dR + n * D, b->dA = b->A + n * F;
    return all;
}

/* The rows packed in b->sendbuf (width floats each) to the peers that read
   them, and theirs into b->recvbuf (the tape's exchange plan; collective). */
static void exchange_packed(const ag_mpi_tape_t *t, mpi_back_t *b, int64_t width)
{
    MPI_Datatype type;
    MPI_Type_contiguous((int)width, MPI_FLOAT, &type);
    MPI_Type_commit(&type);
    const double t0 = ag_i_mpi_now();
    MPI_Alltoallv(b->sendbuf, t->send_count, t->send_displ, type, b->recvbuf, t->recv_count,
                  t->recv_displ, type, t->comm);
    MPI_Type_free(&type);
    if (t->stats) {
        t->stats->seconds_comm += ag_i_mpi_now() - t0;
        t->stats->bytes_sent += t->n_send * width * (int64_t)sizeof(float);
        t->stats->bytes_received += t->n_recv * width * (int64_t)sizeof(float);
    }
}

/* Own destinations' Q, dM, lse and D rows to the owners of the sources they
   read, and the rows of the destinations that read own sources from theirs,
   into the windows (own rows copied in). */
static void dest_exchange(const ag_mpi_tape_t *t, const ag_weights_t *w, const mpi_acts_t *a,
                          mpi_back_t *b)
{
    const int64_t HD = w->H * w->d, H = w->H, row = 2 * HD + 2 * H, lo = t->part->lo;
    const int64_t dlo = t->bp.dlo;
    for (int64_t k = 0; k < t->n_send; k++) {
        const int64_t x = t->send_rows[k] - lo;
        float *at = b->sendbuf + k * row;
        memcpy(at, a->Q + x * HD, (size_t)HD * sizeof(float));
        memcpy(at + HD, b->dM + x * HD, (size_t)HD * sizeof(float));
        memcpy(at + 2 * HD, a->lse + x * H, (size_t)H * sizeof(float));
        memcpy(at + 2 * HD + H, b->Dd + x * H, (size_t)H * sizeof(float));
    }
    exchange_packed(t, b, row);
    for (int64_t k = 0; k < t->n_recv; k++) {
        const int64_t y = t->recv_rows[k] - dlo;
        const float *at = b->recvbuf + k * row;
        memcpy(b->Qw + y * HD, at, (size_t)HD * sizeof(float));
        memcpy(b->dMw + y * HD, at + HD, (size_t)HD * sizeof(float));
        memcpy(b->lsew + y * H, at + 2 * HD, (size_t)H * sizeof(float));
        memcpy(b->Ddw + y * H, at + 2 * HD + H, (size_t)H * sizeof(float));
    }
    const int64_t own = lo - dlo;
    memcpy(b->Qw + own * HD, a->Q, (size_t)(t->n * HD) * sizeof(float));
    memcpy(b->dMw + own * HD, b->dM, (size_t)(t->n * HD) * sizeof(float));
    memcpy(b->lsew + own * H, a->lse, (size_t)(t->n * H) * sizeof(float));
    memcpy(b->Ddw + own * H, b->Dd, (size_t)(t->n * H) * sizeof(float));
}

/* The states of own destinations (rows lo..hi-1 of the window statew, width
   floats each) to the owners of the sources they read, and those of the
   destinations that read own sources from theirs, into the window. */
static void state_exchange(const ag_mpi_tape_t *t, mpi_back_t *b, int64_t width)
{
    const int64_t dlo = t->bp.dlo;
    for (int64_t k = 0; k < t->n_send; k++)
        memcpy(b->sendbuf + k * width, b->statew + (t->send_rows[k] - dlo) * width,
               (size_t)width * sizeof(float));
    exchange_packed(t, b, width);
    for (int64_t k = 0; k < t->n_recv; k++)
        memcpy(b->statew + (t->recv_rows[k] - dlo) * width, b->recvbuf + k * width,
               (size_t)width * sizeof(float));
}

/* out [HD] = 0 + every process's chunk partials (own: part), in the whole's
   chunk order, as the one-process kernel adds them (collective). */
static int sum_chunks_all(const ag_mpi_tape_t *t, const float *part, int64_t HD, float *out,
                          ag_error_t *err)
{
    const ag_mpi_part_t *pt = t->part;
    const int P = pt->ranks;
    int64_t total = 0;
    for (int p = 0; p < P; p++)
        total += ag_i_generic_chunks(pt->bounds[p], pt->bounds[p + 1]);
    int *count = ag_alloc(P, sizeof *count, err, "attention vectors");
    int *displ = ag_alloc(P, sizeof *displ, err, "attention vectors");
    float *all = ag_alloc(total * HD + 1, sizeof *all, err, "attention vectors");
    int rc = count && displ && all ? AG_OK : ag_alloc_status();
    if (!rc && (double)total * (double)HD > INT32_MAX)
        rc = ag_fail(err, AG_ELIMIT, "attention vectors: %lld chunks of %lld values are beyond "
                     "what one MPI call counts (2^31)", (long long)total, (long long)HD);
    if (!(rc = ag_mpi_agree(t->comm, rc, err))) {
        for (int p = 0; p < P; p++)
            count[p] = (int)(ag_i_generic_chunks(pt->bounds[p], pt->bounds[p + 1]) * HD);
        ag_i_mpi_displs(count, displ, P);
        MPI_Allgatherv(part, count[pt->rank], MPI_FLOAT, all, count, displ, MPI_FLOAT, t->comm);
        memset(out, 0, (size_t)HD * sizeof *out);
        for (int64_t k = 0; k < total; k++)
            for (int64_t x = 0; x < HD; x++)
                out[x] += all[k * HD + x];
    }
    free(count), free(displ), free(all);
    return rc;
}

/* The generic kernel's backward on the part (any score): pass 0 over own
   destinations, their states to the processes whose sources they read, pass
   1 over own sources; the attention vectors' chunk partials added in the
   whole's order on every process. */
static int back_generic(ag_mpi_tape_t *t, const mpi_acts_t *a, mpi_back_t *b,
                        const ag_weights_t *w, ag_weights_t *g, const ag_score_t *sc,
                        ag_error_t *err)
{
    const int64_t HD = w->H * w->d, H = w->H, lo = t->part->lo, hi = t->part->hi;
    const int64_t dlo = t->bp.dlo, wlo = t->wlo, S = H * AG_I_GENERIC_STATE;
    int rc = AG_OK;
    /* the edge bias in the view's slots, not in own ones */
    ag_score_t in_view = *sc;
    in_view.edge_bias = sc->edge_bias ? t->bias : NULL;
    sc = &in_view;
    const ag_i_plan_t *p = &t->backward;
    if (!(p->part && p->kernel == AG_I_KERNEL_GENERIC && ag_i_plan_fits(p, 1, &t->bp.view, H,
                                                                          w->d, sc) &&
          p->lo == lo && p->hi == hi && p->wlo == dlo && p->whi == t->bp.dhi && p->klo == wlo &&
          p->khi == t->whi)) {
        ag_i_plan_free(&t->backward);
        rc = ag_i_plan_generic_part(&t->backward, &t->bp.view, H, w->d, sc, lo, hi, dlo,
                                    t->bp.dhi, wlo, t->whi, err);
    }
    if ((rc = ag_mpi_agree(t->comm, rc, err)))
        return rc;
    dest_exchange(t, w, a, b);   /* Q and dM of the destinations own sources reach */
    const ag_attention_grads_t dqkv = {.dQ = b->dQ - lo * HD, .dK = b->dK - lo * HD,
                                       .dV = b->dV - lo * HD};
    const ag_i_bwd_t op = {&t->bp.view, b->Qw - dlo * HD, a->K - wlo * HD, a->V - wlo * HD,
                           b->dMw - dlo * HD, H, w->d, sc, NULL, NULL, dqkv};
    const int gatv2 = sc->kind == AG_SCORE_GATV2, additive = sc->kind == AG_SCORE_ADDITIVE;
    float *state = b->statew - dlo * S;
    ag_i_generic_backward_pass(&t->backward, &op, 0, state, gatv2 || additive ? b->part : NULL);
    if (gatv2 || additive)   /* gatv2's a (kept as a_src), additive's a_dst */
        rc = sum_chunks_all(t, b->part, HD, gatv2 ? b->da_src : b->da_dst, err);
    if (rc)
        return rc;
    state_exchange(t, b, S);
    ag_i_generic_backward_pass(&t->backward, &op, 1, state, additive ? b->part : NULL);
    if (additive)
        rc = sum_chunks_all(t, b->part, HD, b->da_src, err);
    if (!rc && (gatv2 || additive))
        ag_i_add_vector_grads(t->opts.score, sc, g, b->da_src, b->da_dst, HD);
    return rc;
}

/* The attention backward of round r on this process's part: the
   destinations' rows its sources reach are exchanged first, and every
   process agrees on the outcome. */
typedef struct {
    ag_mpi_tape_t *t;
    const mpi_acts_t *a;
    mpi_back_t *b;
} part_back_t;

static int attend_back_part(void *ctx, const ag_weights_t *w, ag_weights_t *g,
                            const ag_score_t *sc, ag_error_t *err)
{
    const part_back_t *pb = ctx;
    ag_mpi_tape_t *t = pb->t;
    const mpi_acts_t *a = pb->a;
    mpi_back_t *b = pb->b;
    float scale;
    if (!ag_i_plain_scale(sc, w->d, &scale))
        return back_generic(t, a, b, w, g, sc, err);
    const int64_t HD = w->H * w->d, H = w->H, lo = t->part->lo;
    ag_i_backward_rowdots(b->Dd, b->dM, a->M, t->n, H, w->d);
    dest_exchange(t, w, a, b);
    const int64_t dlo = t->bp.dlo, wlo = t->wlo;
    const ag_attention_grads_t dqkv = {.dQ = b->dQ - lo * HD, .dK = b->dK - lo * HD,
                                       .dV = b->dV - lo * HD};
    const ag_i_bwd_t op = {&t->bp.view, b->Qw - dlo * HD, a->K - wlo * HD, a->V - wlo * HD,
                           b->dMw - dlo * HD, H, w->d, sc, b->lsew - dlo * H, b->Ddw - dlo * H,
                           dqkv};
    const int rc = ag_i_backward_part(&t->backward, &op, lo, t->part->hi, lo, t->part->hi,
                                      &(ag_i_layout_t){t->part->one_run, t->part->block_cells},
                                      err);
    return ag_mpi_agree(t->comm, rc, err);
}

static int backward_round(ag_mpi_tape_t *t, int r, ag_weights_t *grads, mpi_back_t *b,
                          ag_error_t *err)
{
    const int k = t->n_layers == 1 ? 0 : r;
    const mpi_acts_t a = acts_of(t, r);
    const ag_i_round_back_t rb = {.X = a.X, .M = a.M, .dX = b->dX, .dM = b->dM, .dQ = b->dQ,
                                  .dK = b->dK, .dV = b->dV, .Xn = b->Xn, .dXn = b->dXn,
                                  .Z = a.kept.Z, .ffn_in = a.kept.ffn_in, .U = a.kept.U,
                                  .Hn = b->Hn, .dHn = b->dHn, .A = b->A, .dA = b->dA,
                                  .R = a.kept.R, .O = a.kept.O, .P = a.kept.P,
                                  .ffn_sum = a.kept.ffn_sum, .dR = b->dR};
    const part_back_t pb = {t, &a, b};
    return ag_i_round_backward(t->n, &t->layers[k], grads ? &grads[k] : NULL,
                               (ag_i_round_at_t){k, r, t->part->lo, 1, 0}, &t->opts, &rb, &t->red,
                               attend_back_part, (void *)&pb, err);
}

int ag_mpi_rounds_backward(ag_mpi_tape_t *t, const float *dY, float *dX0, ag_weights_t *grads,
                           ag_error_t *err)
{
    /* the buffers of an earlier backward on this tape serve again: the rows no
       peer sends stay zero, the others are overwritten */
    mpi_back_t b = {0};
    float *all = back_alloc(&b, t, t->back, err);
    int rc = ag_mpi_agree(t->comm, all ? AG_OK : ag_alloc_status(), err);
    if (all)
        t->back = all;   /* freed with the tape */
    if (rc)
        return rc;
    for (int k = 0; grads && k < t->n_layers; k++)
        ag_i_weights_zero(&grads[k]);
    const int64_t D_in = t->layers[0].D;
    const int64_t D_out = t->rounds ? ag_layer_width_out(round_layer(t, t->rounds - 1)) : D_in;
    memcpy(b.dX, dY, (size_t)(t->n * D_out) * sizeof *dY);
    for (int r = t->rounds - 1; !rc && r >= 0; r--)
        rc = ag_mpi_agree(t->comm, backward_round(t, r, grads, &b, err), err);
    if (!rc && dX0)
        memcpy(dX0, b.dX, (size_t)(t->n * D_in) * sizeof *dX0);
    return rc;
}
