/*
 * Message rounds on P processes (ag_rounds_run's loop on a part): each
 * process normalises and projects its own rows, receives the K and V rows it
 * reads (halo.c) or streams them (ring.c), computes its destinations'
 * attention and applies the output projection and residual to its rows.
 * Every step is the one-process step on the same rows in the same blocks
 * (parts start at multiples of AG_MPI_ROW_ALIGN), so the bits do not change
 * with P.
 */
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi.h"
#include "base/base.h"
#include "kernels/kernels.h"
#include "mpi/ring.h"
#include "model/model.h"

/* Per-node weights hold this process's rows (rows lo.. of the graph's
   [N, H*d, D]): parts that keep the graph's numbers only. */
static int check_layers(const ag_mpi_part_t *part, const ag_weights_t *layers, int n_layers,
                        ag_error_t *err)
{
    const int64_t n = part->hi - part->lo;
    for (int k = 0; k < n_layers; k++) {
        if (layers[k].per_node && part->node_of)
            return ag_fail(err, AG_EINVAL, "per-node weights on renumbered parts (METIS's) "
                           "are not supported (layer %d)", k + 1);
        if (layers[k].per_node && layers[k].per_node != n)
            return ag_fail(err, AG_EINVAL, "layer %d has per-node weights for %lld nodes; this "
                           "process has %lld rows", k + 1, (long long)layers[k].per_node,
                           (long long)n);
    }
    return AG_OK;
}

/* Does a layer of rounds 1..rounds have a skip projection? */
static int has_skip(const ag_weights_t *layers, int n_layers, int rounds)
{
    for (int r = 0; r < (n_layers == 1 || rounds < 1 ? 1 : rounds); r++)
        if (layers[n_layers == 1 ? 0 : r].wskip)
            return 1;
    return 0;
}

/* Can the ring run it? Plain dot-product scores without figures (the streamed
   kernel is the tiled one) and every destination one run, on the tiled kernel. */
static int ring_applies(const ag_mpi_part_t *part, const ag_round_opts_t *opts)
{
    float scale;
    const int figures = opts && opts->figures;   /* the streamed kernel keeps none */
    return !figures && ag_i_plain_scale(opts ? opts->score : NULL, 1, &scale) &&
           ag_i_use_tiled(part->n_nodes, part->n_edges, part->one_run);
}

/* Halo or ring: the ring when forced, or (auto) when it applies and some
   process's window of rows (own and read) would span more than half the rows. */
static ag_mpi_path_t choose_path(MPI_Comm comm, const ag_mpi_part_t *part,
                                 const ag_round_opts_t *opts, ag_mpi_path_t path)
{
    if (path != AG_MPI_AUTO)
        return path;
    if (!ring_applies(part, opts) || part->ranks == 1)
        return AG_MPI_HALO;
    int64_t wlo, whi, most;
    ag_i_halo_window(part, &wlo, &whi);
    const int64_t rows = whi - wlo;
    MPI_Allreduce(&rows, &most, 1, MPI_INT64_T, MPI_MAX, comm);
    return 2 * most > part->n_nodes ? AG_MPI_RING : AG_MPI_HALO;
}

/* The largest H*d, H and sublayer width of the layers rounds 1..rounds use,
   and *widths 2 when they have more than one H*d (else 1). */
static void largest(const ag_weights_t *layers, int n_layers, int rounds, int64_t *HD,
                    int64_t *H, int64_t *F, int *widths)
{
    *HD = *H = *F = 0, *widths = 1;
    for (int r = 0; r < (n_layers == 1 || rounds < 1 ? 1 : rounds); r++) {
        const ag_weights_t *w = &layers[n_layers == 1 ? 0 : r];
        *widths = w->H * w->d != layers[0].H * layers[0].d ? 2 : *widths;
        *HD = w->H * w->d > *HD ? w->H * w->d : *HD;
        *H = w->H > *H ? w->H : *H;
        *F = w->w1 && w->F > *F ? w->F : *F;
    }
}

typedef struct {
    MPI_Comm comm;
    const ag_mpi_part_t *part;
    ag_nbhd_t view;
    int64_t n, D, HD, H;        /* the widest state, the largest H*d and H of the layers */
    float *Xn, *Q, *M;          /* [n, D], [n, HD], [n, HD] own rows */
    float *X_prev;              /* [n, D] the states before the round (opts->on_round) */
    float *Hn, *U, *R;          /* the sublayers' [n, D] and [n, F], the skips' [n, D] */
    kext_t figures;             /* opts->figures: [n, H] own rows of each, from the kernel */
    ag_halos_t halos;           /* halo path: the windows of K and V rows, one per H*d */
    ag_ring_t ring;             /* ring path (layers of one H*d) */
    ag_i_plan_t plan;           /* halo path: the part's kernel, made by the first round */
    ag_mpi_path_t path;
} run_t;

static void run_free(run_t *r)
{
    free(r->Xn), free(r->Q), free(r->M), free(r->X_prev), free(r->Hn), free(r->U), free(r->R);
    free(r->figures.entropy), free(r->figures.max_weight), free(r->figures.distance);
    ag_i_halos_destroy(&r->halos);
    ag_i_ring_destroy(&r->ring);
    ag_i_plan_free(&r->plan);
}

/* The attention of a round on this process's part: K and V rows exchanged
   (halo) or passed around (ring) first. */
typedef struct {
    run_t *r;
    ag_mpi_stats_t *stats;
} part_round_t;

static int attend_part(void *ctx, const ag_weights_t *w, const ag_score_t *sc, ag_error_t *err)
{
    const part_round_t *pr = ctx;
    run_t *r = pr->r;
    const ag_mpi_part_t *part = r->part;
    const int64_t HD = w->H * w->d;
    float *Mv = r->M - part->lo * HD;
    const float *Qv = r->Q - part->lo * HD;
    if (r->path != AG_MPI_HALO)
        return ag_i_ring_attention(&r->ring, r->comm, &r->view, part, Qv, w->H, w->d, sc, Mv,
                                   pr->stats, err);
    ag_halo_t *h = ag_i_halos_for(&r->halos, HD);
    ag_i_halo_exchange(h, r->comm, HD, pr->stats);
    /* the figures' arrays, indexed by global node as the kernels index them */
    kext_t x = r->figures;
    const int64_t shift = part->lo * w->H;
    x.entropy = x.entropy ? x.entropy - shift : NULL;
    x.max_weight = x.max_weight ? x.max_weight - shift : NULL;
    x.distance = x.distance ? x.distance - shift : NULL;
    const ag_i_fwd_t f = {&r->view, Qv, h->K - h->wlo * HD, h->V - h->wlo * HD, w->H,
                          w->d, sc, Mv, kext_stats(&x) ? &x : NULL};
    return ag_i_forward_part(&r->plan, &f, part->lo, part->hi, h->wlo, h->whi,
                             &(ag_i_layout_t){part->one_run, part->block_cells},
                             err);
}

/* Round k (0-based) with layer w; then, with opts->on_round, the callback on
   every process, which sees this process's rows (nb NULL; ws's K and V are the
   own rows). AG_STOP when any process's callback asked to stop. */
static int one_round(run_t *r, int k, const ag_weights_t *w, const ag_round_opts_t *opts,
                     float *X, ag_mpi_stats_t *stats, ag_error_t *err)
{
    /* this process's rows of K and V go where its path sends them from */
    const int64_t HD = w->H * w->d;
    const int halo = r->path == AG_MPI_HALO;
    const ag_halo_t *h = halo ? ag_i_halos_for(&r->halos, HD) : NULL;
    const int64_t own = h ? (r->part->lo - h->wlo) * HD : 0;
    const ag_i_round_bufs_t b = {.Xn = r->Xn, .Q = r->Q, .K = h ? h->K + own : r->ring.K_own,
                                 .V = h ? h->V + own : r->ring.V_own, .M = r->M, .Hn = r->Hn,
                                 .U = r->U, .A = r->U, .R = r->R};
    const part_round_t pr = {r, stats};
    if (r->X_prev)
        memcpy(r->X_prev, X, (size_t)(r->n * w->D) * sizeof *X);
    ag_score_t sc;
    const ag_i_round_at_t at = {0};   /* inference: no dropout */
    int rc = ag_mpi_agree(r->comm, ag_i_round_forward(X, r->n, w, at, opts, &b, &sc, attend_part,
                                                      (void *)&pr, err), err);
    if (rc || !opts || !opts->on_round)
        return rc;
    const ag_workspace_t ws = {.N = r->n, .HD = HD, .D = w->D, .Q = r->Q, .K = b.K,
                               .V = b.V, .M = r->M, .Xn = r->Xn, .X_prev = r->X_prev,
                               .entropy = r->figures.entropy, .max_weight = r->figures.max_weight,
                               .distance = r->figures.distance};
    const ag_round_t round = {.round = k + 1, .nb = NULL, .w = w, .score = &sc, .X = X,
                              .X_prev = r->X_prev, .ws = &ws, .entropy = r->figures.entropy,
                              .max_weight = r->figures.max_weight,
                              .distance = r->figures.distance};
    rc = opts->on_round(&round, opts->ctx);
    const int stop = rc == AG_STOP;
    if (stop)
        rc = AG_OK;
    else if (rc && err && !err->status)   /* a callback that failed without a message */
        ag_fail(err, (ag_status_t)rc, "rounds: the round callback failed (status %d)", rc);
    int any_stop;
    MPI_Allreduce(&stop, &any_stop, 1, MPI_INT, MPI_MAX, r->comm);
    rc = ag_mpi_agree(r->comm, rc, err);
    return rc ? rc : any_stop ? AG_STOP : AG_OK;
}

int ag_mpi_rounds_run(MPI_Comm comm, const ag_mpi_part_t *part, const ag_weights_t *layers,
                      int n_layers, float *X, int rounds, const ag_round_opts_t *opts,
                      ag_mpi_path_t path, float *M, ag_mpi_stats_t *stats, ag_error_t *err)
{
    ag_mpi_stats_t own_stats;
    if (!stats)
        stats = &own_stats;
    memset(stats, 0, sizeof *stats);
    run_t r;
    memset(&r, 0, sizeof r);
    r.comm = comm, r.part = part, r.view = ag_i_part_view(part);
    r.n = part->hi - part->lo;
    int rc = ag_i_layers_mpi_check(layers, n_layers, rounds, opts, err);
    if (!rc)
        rc = check_layers(part, layers, n_layers, err);
    int64_t F = 0;
    int widths = 1;
    if (!rc) {   /* the buffers' sizes, once there are layers to read them from */
        r.D = ag_rounds_widest(layers, n_layers, rounds);
        largest(layers, n_layers, rounds, &r.HD, &r.H, &F, &widths);
    }
    if (!rc && path == AG_MPI_RING && widths > 1)
        rc = ag_fail(err, AG_EINVAL, "the ring path streams rows of one width; these layers "
                     "have heads of several widths (H*d): use the halo path");
    if (!rc && path == AG_MPI_RING && opts && opts->figures)
        rc = ag_fail(err, AG_EINVAL, "the ring path keeps no figures of the attention "
                     "(opts->figures): use the halo path");
    if (!rc && path == AG_MPI_RING && !ring_applies(part, opts))
        rc = ag_fail(err, AG_EINVAL, "the ring path needs plain dot-product scores "
                     "(scaled-dot, dot, beta), one run of consecutive sources per destination "
                     "and 16 or more in-edges on average (causal, window, ... patterns: the "
                     "tiled kernel); this run has not");
    const int64_t rows = r.n ? r.n : 1;
    const int figures = opts ? opts->figures : 0;
    if (!rc && (!(r.Q = ag_alloc(rows * r.HD, sizeof(float), err, "queries")) ||
                !(r.M = ag_alloc(rows * r.HD, sizeof(float), err, "messages")) ||
                (opts && opts->norm == AG_NORM_LAYER &&
                 !(r.Xn = ag_alloc(rows * r.D, sizeof(float), err, "normalised states"))) ||
                (opts && opts->on_round &&
                 !(r.X_prev = ag_alloc(rows * r.D, sizeof(float), err, "states"))) ||
                (figures && (!(r.figures.entropy = ag_alloc(rows * r.H, sizeof(float), err,
                                                            "figures")) ||
                             !(r.figures.max_weight = ag_alloc(rows * r.H, sizeof(float),
                                                               err, "figures")))) ||
                (figures == 2 && !(r.figures.distance = ag_alloc(rows * r.H, sizeof(float),
                                                                 err, "figures"))) ||
                (F && !(r.U = ag_alloc(rows * F, sizeof(float), err, "sublayer"))) ||
                (F && !(r.Hn = ag_alloc(rows * r.D, sizeof(float), err, "sublayer"))) ||
                (has_skip(layers, n_layers, rounds) &&
                 !(r.R = ag_alloc(rows * r.D, sizeof(float), err, "skip")))))
        rc = ag_alloc_status();
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        run_free(&r);
        return rc;
    }
    r.path = stats->path = widths > 1 ? AG_MPI_HALO : choose_path(comm, part, opts, path);
    rc = r.path == AG_MPI_RING
             ? ag_mpi_agree(comm, ag_i_ring_init(&r.ring, comm, part, r.HD, err), err)
             : ag_i_halos_plan(&r.halos, comm, part, layers, n_layers, rounds, err);
    const double t0 = ag_i_mpi_now();
    int k = 0;
    while (!rc && k < rounds) {
        rc = one_round(&r, k, &layers[n_layers == 1 ? 0 : k], opts, X, stats, err);
        k += rc == AG_OK || rc == AG_STOP;
    }
    if (rc == AG_STOP)
        rc = AG_OK;
    stats->rounds_done = k;
    stats->seconds = ag_i_mpi_now() - t0;
    if (!rc && M && k > 0) {
        const ag_weights_t *last = &layers[n_layers == 1 ? 0 : k - 1];
        memcpy(M, r.M, (size_t)(r.n * last->H * last->d) * sizeof(float));
    }
    run_free(&r);
    return rc;
}

int ag_mpi_attention(MPI_Comm comm, const ag_mpi_part_t *part, const float *Q, const float *K,
                     const float *V, int64_t H, int64_t d, const ag_score_t *score, float *M,
                     ag_mpi_stats_t *stats, ag_error_t *err)
{
    ag_mpi_stats_t own_stats;
    if (!stats)
        stats = &own_stats;
    memset(stats, 0, sizeof *stats);
    stats->path = AG_MPI_HALO;
    int rc = H < 1 || d < 1 ? ag_fail(err, AG_EINVAL, "attention: %lld heads of width %lld; "
                                      "expected both >= 1", (long long)H, (long long)d)
                            : AG_OK;
    if ((rc = ag_mpi_agree(comm, rc, err)))
        return rc;
    const int64_t HD = H * d, n = part->hi - part->lo;
    ag_halo_t h;
    if ((rc = ag_i_halo_plan(&h, comm, part, HD, err)))
        return rc;
    /* own rows into the window, then the rows the part reads from the others */
    const int64_t own = (part->lo - h.wlo) * HD;
    memcpy(h.K + own, K, (size_t)(n * HD) * sizeof(float));
    memcpy(h.V + own, V, (size_t)(n * HD) * sizeof(float));
    const double t0 = ag_i_mpi_now();
    ag_i_halo_exchange(&h, comm, HD, stats);
    const ag_nbhd_t view = ag_i_part_view(part);
    const ag_i_fwd_t f = {&view, Q - part->lo * HD, h.K - h.wlo * HD, h.V - h.wlo * HD, H, d,
                          score, M - part->lo * HD, NULL};
    ag_i_plan_t plan = {0};
    rc = ag_i_forward_part(&plan, &f, part->lo, part->hi, h.wlo, h.whi,
                           &(ag_i_layout_t){part->one_run, part->block_cells}, err);
    ag_i_plan_free(&plan);
    stats->seconds = ag_i_mpi_now() - t0;
    ag_i_halo_destroy(&h);
    return ag_mpi_agree(comm, rc, err);
}

int ag_i_mpi_node_order(MPI_Comm comm, const ag_mpi_part_t *part, int root, int64_t **order,
                        ag_error_t *err)
{
    const int P = part->ranks, me = part->rank;
    *order = NULL;
    int *count = ag_alloc(P, sizeof(int), err, "node order");
    int *displ = ag_alloc(P, sizeof(int), err, "node order");
    int rc = count && displ ? AG_OK : ag_alloc_status();
    if (!rc && me == root && !(*order = ag_alloc(part->n_nodes ? part->n_nodes : 1,
                                                  sizeof **order, err, "node order")))
        rc = ag_alloc_status();
    if (!(rc = ag_mpi_agree(comm, rc, err))) {
        for (int p = 0; p < P; p++)
            count[p] = (int)(part->bounds[p + 1] - part->bounds[p]),
            displ[p] = (int)part->bounds[p];
        MPI_Gatherv(part->node_of, count[me], MPI_INT64_T, *order, count, displ, MPI_INT64_T,
                    root, comm);
    } else {
        free(*order);
        *order = NULL;
    }
    free(count), free(displ);
    return rc;
}

static int gather_in_part_order(MPI_Comm comm, const ag_mpi_part_t *part, const float *mine,
                                int64_t cols, float *all, int root, ag_error_t *err)
{
    const int P = part->ranks;
    int *count = ag_alloc(P, sizeof(int), err, "gather"), *displ = ag_alloc(P, sizeof(int), err,
                                                                          "gather");
    int rc = count && displ ? AG_OK : ag_alloc_status();
    if (!rc && part->n_nodes > INT32_MAX)
        rc = ag_fail(err, AG_ELIMIT, "%lld rows are beyond what MPI_Gatherv counts (2^31)",
                     (long long)part->n_nodes);
    if ((rc = ag_mpi_agree(comm, rc, err))) {
        free(count), free(displ);
        return rc;
    }
    for (int p = 0; p < P; p++)
        count[p] = (int)(part->bounds[p + 1] - part->bounds[p]), displ[p] = (int)part->bounds[p];
    MPI_Datatype row;
    MPI_Type_contiguous((int)cols, MPI_FLOAT, &row);
    MPI_Type_commit(&row);
    MPI_Gatherv(mine, count[part->rank], row, all, count, displ, row, root, comm);
    MPI_Type_free(&row);
    free(count), free(displ);
    return AG_OK;
}

int ag_mpi_gather_rows(MPI_Comm comm, const ag_mpi_part_t *part, const float *mine,
                       int64_t cols, float *all, int root, ag_error_t *err)
{
    if (!part->node_of)
        return gather_in_part_order(comm, part, mine, cols, all, root, err);
    /* renumbered: gathered in the parts' order, then each row to its node */
    const int here = part->rank == root;
    const int64_t N = part->n_nodes;
    float *rows = NULL;
    int64_t *order = NULL;
    int rc = here && !(rows = ag_alloc(N && cols ? N * cols : 1, sizeof *rows, err, "gather"))
                 ? ag_alloc_status() : AG_OK;
    if (!(rc = ag_mpi_agree(comm, rc, err)))
        rc = ag_i_mpi_node_order(comm, part, root, &order, err);
    if (!rc)
        rc = gather_in_part_order(comm, part, mine, cols, rows, root, err);
    if (!rc && here)
        for (int64_t k = 0; k < N; k++)
            memcpy(all + order[k] * cols, rows + k * cols, (size_t)cols * sizeof *rows);
    free(rows), free(order);
    return rc;
}
