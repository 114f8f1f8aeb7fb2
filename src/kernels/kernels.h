/* Private entry points of the attention kernels. */
#ifndef AG_KERNELS_H
#define AG_KERNELS_H

#include <math.h>

#include "attngraph.h"
#include "base/base.h"

/* The fused kernels score in log2 units, as they use exp2 (scores times
   LOG2E); ln(2) takes their sums back to natural units. */
#define LOG2E 1.4426950408889634f
#define LN2 0.69314718f

/*
 * What a kernel adds to M in the same pass (ag_attention_ex): per destination
 * and head, figures from the softmax state it already holds, and progress.
 * With scores s in units where p = base^(s - m) (base e, or 2 for the kernels
 * that use exp2), the running max m, the sum l = sum_j p_j and
 * u = sum_j p_j (s_j - m):
 *   a_ij = p_j / l,  max_j a_ij = 1 / l (the largest p is base^0 = 1),
 *   entropy = -sum_j a_ij ln a_ij = ln l - ln(base) u / l.
 * u is kept relative to the running max (no cancellation against a large m);
 * when the max grows from m to m', u' = alpha (u + (m - m') l), alpha = base^(m - m').
 */
typedef struct {
    float *entropy, *max_weight;   /* [N, H], or NULL */
    float *distance;               /* [N, H] sum_j a_ij |i - j|, or NULL (kept as
                                      t = sum_j p_j |i - j|, rescaled by alpha as l is) */
    void (*progress)(int64_t done, int64_t total, void *ctx);
    void *ctx;
    int64_t total;                 /* E * H */
    int64_t done;                  /* messages x heads done (atomic) */
    int64_t next;                  /* thread 0's next report */
    float *lse;                    /* [N, H] ln sum_j exp(s_ij) in natural units (-INFINITY
                                      without in-edges), or NULL */
} kext_t;

/* Does the kernel need to keep u? */
static inline int kext_stats(const kext_t *x)
{
    return x && (x->entropy || x->max_weight || x->distance);
}

/* Does the kernel need to keep t (the distance)? */
static inline int kext_distance(const kext_t *x)
{
    return x && x->distance;
}

/* The log-sum-exp of destination i, head h from its running max m and sum l
   in units of base (ln_base: ln of the base), when x asks for it. */
static inline void kext_lse(const kext_t *x, int64_t i, int64_t h, int64_t H, float m, float l,
                            float ln_base)
{
    if (x && x->lse)
        x->lse[i * H + h] = l > 0 ? (m + logf(l) / ln_base) * ln_base : -INFINITY;
}

/* The figures of destination i, head h from l, u and t (ln_base: ln of the
   score units' base). */
static inline void kext_put(const kext_t *x, int64_t i, int64_t h, int64_t H, float l, float u,
                            float t, float ln_base)
{
    if (x->distance)
        x->distance[i * H + h] = l > 0 ? t / l : NAN;
    if (x->entropy)
        x->entropy[i * H + h] = l > 0 ? logf(l) - ln_base * u / l : NAN;
    if (x->max_weight)
        x->max_weight[i * H + h] = l > 0 ? 1.0f / l : NAN;
}

/* Prefetches the d floats at offset off of the rows of X (HD floats a row)
   named by node i's runs (ptr, first, len: the in-runs of a destination, or
   the out-runs of a source): the first `per_run` rows of each run. On a
   sparse graph a run is a row or two at a random place, and all are wanted;
   the hardware prefetchers follow a longer run (a causal row's thousands)
   once it has begun. Always inlined: gcc finds a function of prefetches
   alone pure, and drops the calls to it that it did not inline (and a
   constant per_run of INT64_MAX folds away). */
static inline __attribute__((always_inline)) void
prefetch_runs(const int64_t *ptr, const int64_t *first, const int64_t *len, int64_t i,
              const float *X, int64_t HD, int64_t off, int64_t d, int64_t per_run)
{
    for (int64_t r = ptr[i]; r < ptr[i + 1]; r++) {
        const int64_t n = len[r] < per_run ? len[r] : per_run;
        for (int64_t j = first[r]; j < first[r] + n; j++)
            for (int64_t c = 0; c < d; c += 16)
                __builtin_prefetch(X + j * HD + off + c);
    }
}

/* prefetch_runs over destination i's in-runs: its sources' rows. */
static inline __attribute__((always_inline)) void
prefetch_rows(const ag_nbhd_t *nb, int64_t i, const float *X, int64_t HD, int64_t off, int64_t d,
              int64_t per_run)
{
    prefetch_runs(nb->run_ptr, nb->run_src, nb->run_len, i, X, HD, off, d, per_run);
}

/* `work` messages x heads done; thread 0 reports about every 1/1000 of the
   total (the callback runs on the calling thread, between tasks). */
static inline void kext_done(kext_t *x, int64_t work)
{
    if (!x || !x->progress)
        return;
    const int64_t done = __atomic_add_fetch(&x->done, work, __ATOMIC_RELAXED);
    if (ag_i_thread_id() == 0 && done >= x->next) {
        x->next = done + x->total / 1000 + 1;
        x->progress(done, x->total, x->ctx);
    }
}

/*
 * One forward call's operands. The plain dot-product softmax kernels score
 * q.k * scale; the generic path (and ag_i_attention_part, which checks it and
 * takes its scale) reads score instead. Q, K, V, M are [N, H*d]; x the
 * extras (NULL: M only).
 */
typedef struct {
    const ag_nbhd_t *nb;
    const float *Q, *K, *V;
    int64_t H, d;
    float scale;
    const ag_score_t *score;
    float *M;
    kext_t *x;
} ag_i_fwd_t;

/*
 * One backward call's operands (nb transposed: ag_nbhd_transpose). The plain
 * kernels score as the forward's and read lse [N, H], the forward's
 * log-sum-exp (natural units), and Dd [N, H] = sum_c dM[i, h*d+c] *
 * M[i, h*d+c]; they write g.dQ, g.dK, g.dV [N, H*d]: destinations own dQ,
 * sources own dK and dV (walking the out-runs). The generic path reads score
 * and recomputes M and lse itself; it writes every gradient g asks for.
 */
typedef struct {
    const ag_nbhd_t *nb;
    const float *Q, *K, *V, *dM;
    int64_t H, d;
    float scale;
    const ag_score_t *score;
    const float *lse, *Dd;
    ag_attention_grads_t g;
} ag_i_bwd_t;

typedef int (*ag_i_forward_fn)(const ag_i_fwd_t *a, ag_error_t *err);
typedef int (*ag_i_backward_fn)(const ag_i_bwd_t *a, ag_error_t *err);

/* Softmax attention with scores q.k * scale, one pass (simple.c). */
int ag_i_attention_online(const ag_i_fwd_t *a, ag_error_t *err);

/* Does every destination have at most one run (the tiled kernel's shape)? */
int ag_i_tiled_applies(const ag_nbhd_t *nb);
/* Do the fused kernels take the tiled form on a graph of N destinations and
   E edges (one_run: every destination has at most one run)? Runs long enough
   to fill tiles; anything else takes the gather form. Decided here only. */
AG_INTERNAL
int ag_i_use_tiled(int64_t N, int64_t E, int one_run);

/* Softmax attention with scores q.k * scale, fused and tiled (tiled.c);
   every destination must have at most one run. */
int ag_i_attention_tiled(const ag_i_fwd_t *a, ag_error_t *err);
/* Softmax attention with scores q.k * scale for any neighbourhoods, reading
   scattered rows with prefetching (gather.c). */
int ag_i_attention_gather(const ag_i_fwd_t *a, ag_error_t *err);

/* The same for destinations lo..hi-1 only (tiled: lo a multiple of 64, and hi
   too unless it is the last destination); nb->n_nodes still bounds the sources. */
int ag_i_attention_tiled_range(const ag_i_fwd_t *a, int64_t lo, int64_t hi, ag_error_t *err);
int ag_i_attention_gather_range(const ag_i_fwd_t *a, int64_t lo, int64_t hi, ag_error_t *err);
/* The tiled kernel's block width in vectors (1 or 4), from the whole graph's shape. */
int ag_i_tiled_width(const ag_nbhd_t *nb);

/*
 * Destinations lo..hi-1 of a graph, bitwise as ag_attention_ex computes them
 * on the whole graph, for a process that holds only a part (the MPI layer):
 * nb->n_nodes and n_edges are the whole graph's (they choose the kernel),
 * one_run says whether every destination of the whole graph has at most one
 * run, and every array (nb's, Q, K, V, M, x->lse [N, H]) is indexed by
 * global node number, only the rows the part reads being there: Q's of
 * lo..hi-1, K's and V's of klo..khi-1 (every source the part reads). Any
 * score (a->scale is not read); an edge bias is indexed by nb's slots, and
 * only those of lo..hi-1 are read. x: NULL, or its figures (entropy,
 * max_weight, distance) and log-sum-exp (plain dot-product scores) only.
 */
AG_INTERNAL
int ag_i_attention_part(const ag_i_fwd_t *a, int64_t lo, int64_t hi, int64_t klo, int64_t khi,
                        int one_run, ag_error_t *err);

/*
 * The tiled forward with its sources streamed in (tiled_stream.c): begin
 * for destinations lo..hi-1 (nb, Q indexed as ag_i_attention_part's); then
 * feed windows of consecutive source rows, ascending, each starting at most
 * 64 rows before the previous one ended (K, V indexed by global source; the
 * window ends at b); first says where the earliest tile still waiting starts
 * (INT64_MAX when every tile ran); end writes M and lse (NULL: not wanted)
 * bitwise as ag_i_attention_tiled_range would.
 */
typedef struct ag_tiled_stream ag_tiled_stream_t;
AG_INTERNAL
int ag_i_tiled_stream_begin(ag_tiled_stream_t **st, const ag_nbhd_t *nb, int64_t lo,
                            int64_t hi, const float *Q, int64_t H, int64_t d, float scale,
                            ag_error_t *err);
AG_INTERNAL
void ag_i_tiled_stream_feed(ag_tiled_stream_t *st, const float *K, const float *V, int64_t b);
AG_INTERNAL
int64_t ag_i_tiled_stream_first(const ag_tiled_stream_t *st);
AG_INTERNAL
void ag_i_tiled_stream_end(ag_tiled_stream_t *st, float *M, float *lse);
AG_INTERNAL
void ag_i_tiled_stream_free(ag_tiled_stream_t *st);

/* Is the score kind normalised by a softmax (all but sigmoid and linear)? */
int ag_i_is_softmax(ag_score_kind_t kind);

/* Any score function (generic.c): scores a destination's edges into a
   per-thread buffer, normalises them, then accumulates V. */
int ag_i_attention_generic(const ag_i_fwd_t *a, ag_error_t *err);
/* The same for destinations lo..hi-1 reading keys klo..khi-1 only (the
   part of ag_i_attention_part; the score is checked by the caller). */
int ag_i_attention_generic_range(const ag_i_fwd_t *a, int64_t lo, int64_t hi, int64_t klo,
                                 int64_t khi, ag_error_t *err);

/* ag_attention_weights and ag_attention_stats for any score, their arguments
   checked by dispatch.c. */
int ag_i_generic_weights(const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                         int64_t d, const ag_score_t *score, int64_t lo, int64_t hi, float *W,
                         ag_error_t *err);
int ag_i_generic_stats(const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                       int64_t d, const ag_score_t *score, double *entropy, double *distance,
                       double *max_weight, ag_error_t *err);

/* The fastest kernel that applies to nb's shape (dispatch.c). */
int ag_i_attention_auto(const ag_i_fwd_t *a, ag_error_t *err);

/* ---- backward: the plain dot-product softmax kernels (ag_i_bwd_t) ---- */

/* One destination, then one source at a time (simple.c): the reference. */
int ag_i_backward_simple(const ag_i_bwd_t *a, ag_error_t *err);
/* Tiled (tiled.c): every destination at most one run. */
int ag_i_backward_tiled(const ag_i_bwd_t *a, ag_error_t *err);
/* Gathered rows (gather.c): any neighbourhoods. */
int ag_i_backward_gather(const ag_i_bwd_t *a, ag_error_t *err);
/*
 * The same on part of the graph: dQ of destinations qlo..qhi-1 (pass A) and
 * dK, dV of sources klo..khi-1 (pass B), each row bitwise as the whole-graph
 * call computes it. Every array is indexed by global node number; only what
 * the passes read need be there: for pass A the in-runs of its destinations
 * and the K and V rows they read; for pass B the out-runs of its sources and
 * Q, dM, lse and Dd of the destinations those reach. Tiled: both ranges of
 * whole blocks (ag_i_tiled_width x 16 rows; the last may end at N), and pass
 * B reads the in-run of every destination its tiles cross (rows widened to
 * multiples of 8; a run clipped to the sources klo..khi-1 gives the same bits).
 */
int ag_i_backward_tiled_range(const ag_i_bwd_t *a, int64_t qlo, int64_t qhi, int64_t klo,
                              int64_t khi, ag_error_t *err);
int ag_i_backward_gather_range(const ag_i_bwd_t *a, int64_t qlo, int64_t qhi, int64_t klo,
                               int64_t khi, ag_error_t *err);
/* The kernel ag_i_backward_auto would pick for the whole graph (one_run: every
   destination of the whole graph has at most one run), on the ranges above. */
AG_INTERNAL
int ag_i_backward_part(const ag_i_bwd_t *a, int one_run, int64_t qlo, int64_t qhi,
                       int64_t klo, int64_t khi, ag_error_t *err);
/* Dd [N, H] = per head, sum_c dM[i, h*d+c] * M[i, h*d+c] (the backward's D). */
AG_INTERNAL
void ag_i_backward_rowdots(float *Dd, const float *dM, const float *M, int64_t N, int64_t H,
                           int64_t d);
/* The one the forward would pick (dispatch.c). */
int ag_i_backward_auto(const ag_i_bwd_t *a, ag_error_t *err);
/* Any score function (generic.c): a->score, dM and every gradient a->g asks
   for (its scale, lse and Dd are not read: M and lse are recomputed here). */
int ag_i_backward_generic(const ag_i_bwd_t *a, ag_error_t *err);

/* Are these plain dot-product softmax scores (scaled-dot or dot, any beta; no
   softcap, edge bias or ALiBi), the ones the fused kernels and the MPI layer
   run? Then *scale is their multiplier of q.k (kernels/dispatch.c; the one
   place this is decided). */
AG_INTERNAL
int ag_i_plain_scale(const ag_score_t *score, int64_t d, float *scale);

#endif
