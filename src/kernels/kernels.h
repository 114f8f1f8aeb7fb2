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
 * One forward call's operands. Q, K, V, M are [N, H*d]; score NULL is
 * scaled dot-product softmax; x the extras (NULL: M only).
 */
typedef struct {
    const ag_nbhd_t *nb;
    const float *Q, *K, *V;
    int64_t H, d;
    const ag_score_t *score;
    float *M;
    kext_t *x;
} ag_i_fwd_t;

/*
 * One backward call's operands (nb transposed: ag_nbhd_transpose). The plain
 * kernels read lse [N, H], the forward's log-sum-exp (natural units), and
 * Dd [N, H] = sum_c dM[i, h*d+c] * M[i, h*d+c]; they write g.dQ, g.dK, g.dV
 * [N, H*d]: destinations own dQ, sources own dK and dV (walking the
 * out-runs). The generic kernel recomputes M and lse itself (lse and Dd are
 * not read) and writes every gradient g asks for.
 */
typedef struct {
    const ag_nbhd_t *nb;
    const float *Q, *K, *V, *dM;
    int64_t H, d;
    const ag_score_t *score;
    const float *lse, *Dd;
    ag_attention_grads_t g;
} ag_i_bwd_t;

/* A plain dot-product score of multiplier s (scores q.k * s), for a caller
   that gives a kernel its multiplier by hand (tests, benchmarks). */
#define AG_I_DOT_SCORE(s) (&(ag_score_t){.kind = AG_SCORE_DOT, .beta = (s), .slope = 0.2f})

/* ---- plan, then compute (plan.c) ---- */

/* The kernels. */
typedef enum {
    AG_I_KERNEL_AUTO,      /* asked of a plan: it picks (the one rule, plan.c) */
    AG_I_KERNEL_SIMPLE,    /* one destination at a time (simple.c): the reference */
    AG_I_KERNEL_TILED,     /* fused and tiled (tiled.c): at most one run a destination */
    AG_I_KERNEL_GATHER,    /* fused, scattered rows with prefetching (gather.c) */
    AG_I_KERNEL_GENERIC,   /* any score function (generic.c) */
    AG_I_KERNEL_BLOCKS     /* the tiled kernel on block-sparse lists (blocks.c): any
                              graph without multi-edges */
} ag_i_kernel_t;

/* The kernel's name ("auto", "simple", "tiled", "gather", "generic", "blocks"). */
const char *ag_i_kernel_name(ag_i_kernel_t k);

/*
 * What the kernel choice reads of a graph's shape, agreed by every process
 * that holds a part of it (the MPI layer sums cells and takes the least
 * one_run and the least cells flag): does every destination have at most one
 * run, and the block-sparse path's score entries (ag_i_block_cells; -1: it
 * does not apply, or was not counted because one_run).
 */
typedef struct {
    int one_run;
    int64_t cells;
} ag_i_layout_t;
/* Does every destination lo..hi-1 have at most one run? */
AG_INTERNAL
int ag_i_one_run(const ag_nbhd_t *nb, int64_t lo, int64_t hi);
/* The score entries the block-sparse path computes for destinations lo..hi-1
   (lo a multiple of 64): the tiles of each block's list times its rows; -1
   where it does not apply (a multi-edge, or no memory to count). */
AG_INTERNAL
int64_t ag_i_block_cells(const ag_nbhd_t *nb, int64_t lo, int64_t hi);
/* The whole graph's layout (cells counted only where one_run is not). */
AG_INTERNAL
ag_i_layout_t ag_i_layout(const ag_nbhd_t *nb);
/* The kernel for plain dot-product scores on a graph of N destinations, E
   edges and that layout: tiled (one run each, long enough to fill tiles),
   blocks (tiles dense enough), else gather. Decided here only. */
AG_INTERNAL
ag_i_kernel_t ag_i_layout_kernel(int64_t N, int64_t E, const ag_i_layout_t *lay);

/*
 * Every decision of an attention call, made once from the graph, the score
 * and the machine (after ggml's ggml_graph_plan): the kernel, the plain
 * kernels' multiplier, the instruction set's loops, the team of threads,
 * the rows, what the kernel learns from the graph's shape, and one
 * allocation of scratch cut for that team. Computing with a plan
 * (ag_i_forward, ag_i_backward) decides nothing again and allocates
 * nothing, so a plan made once serves every round of a run and every step
 * of training. The graph computed on must be the one planned for (or a view
 * of it with the same arrays); a plan serves one computation at a time.
 */
struct ag_i_isa;
typedef struct {
    int backward;              /* which direction it was made for */
    int64_t N, E, H, d;        /* the graph's and the heads' shape it was made for */
    const int64_t *edge_ptr, *run_ptr;   /* and the graph's arrays (ag_i_plan_fits) */
    ag_score_kind_t kind;      /* the score kind, and is it plain dot-product */
    int plain;
    ag_i_kernel_t asked;       /* the kernel asked for (maybe AUTO) */
    ag_i_kernel_t kernel;      /* the one it runs: never AUTO */
    const struct ag_i_isa *isa;/* the fused kernels' loops */
    int threads;               /* the team the scratch is cut for (num_threads) */
    float scale;               /* plain kernels: scores q.k * scale */
    int width;                 /* tiled: blocks of width x 16 destinations */
    int64_t lo, hi;            /* destinations: M's rows, or dQ's */
    int64_t klo, khi;          /* the key rows the forward reads; the backward's dK, dV rows */
    int64_t max_deg;           /* gather, generic: the largest degree the passes meet */
    int64_t wlo, whi;          /* tiled forward: the sources read (head copies);
                                  gather backward: the destinations whose lse and D are read;
                                  generic part backward: the queries read */
    int part;                  /* made by ag_i_plan_part */
    int head_copies;           /* tiled forward: 0 (none), 1 (shared) or threads (one each) */
    int64_t n_qb, n_kb;        /* tiled backward: blocks of each pass */
    int64_t *order;            /* tiled backward: each pass's blocks, heaviest first */
    int64_t per_thread;        /* floats of each thread's scratch */
    float *scratch;            /* threads x per_thread floats, then `shared` */
    float *shared;             /* the kernel's arrays that the team shares (tiled
                                  forward with head copies: H lines of block
                                  counters, then the copies) */
    int64_t *lists;            /* blocks: the block-sparse lists (blocks.c), and in it */
    const int64_t *q_ptr, *q_wide, *q_tiles;   /* per slot of 16 destinations from lo, its
                                                  tiles; per group of 64, its width */
    const int64_t *k_ptr, *k_wide, *k_tiles;   /* backward: the same for sources from
                                                  klo, tiles of their destinations */
} ag_i_plan_t;

/* Plans attention on the whole graph (backward: nb transposed), with the
   kernel asked for (AUTO: the one rule picks). Refuses what that kernel cannot
   run (the tiled one: a destination of several runs; a fused one: a score
   other than plain dot-product) naming it. score: checked by the caller. */
int ag_i_plan(ag_i_plan_t *p, int backward, ag_i_kernel_t kernel, const ag_nbhd_t *nb,
              int64_t H, int64_t d, const ag_score_t *score, ag_error_t *err);
/*
 * Plans destinations lo..hi-1 of a graph, bitwise as the whole graph's plan
 * computes them, for a process that holds only a part (the MPI layer):
 * nb->n_nodes and n_edges are the whole graph's (they choose the kernel),
 * lay is the whole graph's layout (agreed by the processes), and every array
 * is indexed by global node number.
 * Forward: any score; the keys read are klo..khi-1 (every source the part
 * reads; ag_i_forward then needs Q's rows lo..hi-1 and K's and V's klo..khi-1
 * only); x: NULL, or its figures and log-sum-exp (plain dot-product scores).
 * Backward (plain dot-product scores): dQ of destinations lo..hi-1 (pass A)
 * and dK, dV of sources klo..khi-1 (pass B), each row bitwise as the
 * whole-graph call computes it; pass A reads the in-runs of its destinations
 * and the K and V rows they read, pass B the out-runs of its sources and Q,
 * dM, lse and Dd of the destinations those reach. Tiled and blocks: both
 * ranges of whole blocks (width x 16 rows; the last may end at N), and pass B
 * reads the in-runs of every destination its tiles cross.
 */
int ag_i_plan_part(ag_i_plan_t *p, int backward, const ag_nbhd_t *nb, int64_t H, int64_t d,
                   const ag_score_t *score, int64_t lo, int64_t hi, int64_t klo, int64_t khi,
                   const ag_i_layout_t *lay, ag_error_t *err);
/* Runs a forward (backward) plan on a's operands: their nb, H, d and score
   are the plan's. Returns AG_OK or the kernel's refusal of an operand. */
int ag_i_forward(const ag_i_plan_t *p, const ag_i_fwd_t *a, ag_error_t *err);
int ag_i_backward(const ag_i_plan_t *p, const ag_i_bwd_t *a, ag_error_t *err);
/* Was p made for this direction, graph (its shape and its arrays), H, d and
   score? A caller that holds a plan across calls makes a new one when not. */
AG_INTERNAL
int ag_i_plan_fits(const ag_i_plan_t *p, int backward, const ag_nbhd_t *nb, int64_t H,
                   int64_t d, const ag_score_t *score);
/* Frees a plan's scratch (a zeroed, failed or freed plan: nothing). */
AG_INTERNAL
void ag_i_plan_free(ag_i_plan_t *p);
/* ag_attention_ex (ag_attention_backward) with a plan that the caller holds
   across calls (zeroed at first; ag_i_plan_free at the end): made at the
   first call and again only when a call does not fit it (ag_i_plan_fits).
   Rounds and training call these. */
int ag_i_attention_planned(ag_i_plan_t *p, const ag_nbhd_t *nb, const float *Q, const float *K,
                           const float *V, int64_t H, int64_t d, const ag_score_t *score,
                           float *M, const ag_attention_opts_t *opts, ag_error_t *err);
int ag_i_backward_planned(ag_i_plan_t *p, ag_nbhd_t *nb, const float *Q, const float *K,
                          const float *V, int64_t H, int64_t d, const ag_score_t *score,
                          const float *M, const float *lse, const float *dM,
                          const ag_attention_grads_t *g, ag_error_t *err);
/* The same on a part (the MPI layer): ag_i_plan_part's plan held across
   calls, then the forward (backward) on a's operands; the forward checks
   the score as ag_score_check does, the edge bias on the part's slots only. */
AG_INTERNAL
int ag_i_forward_part(ag_i_plan_t *p, const ag_i_fwd_t *a, int64_t lo, int64_t hi, int64_t klo,
                      int64_t khi, const ag_i_layout_t *lay, ag_error_t *err);
AG_INTERNAL
int ag_i_backward_part(ag_i_plan_t *p, const ag_i_bwd_t *a, int64_t lo, int64_t hi,
                       int64_t klo, int64_t khi, const ag_i_layout_t *lay, ag_error_t *err);
/* Plan, compute, free: one call with the kernel asked for (tests, bench). */
int ag_i_attention_with(ag_i_kernel_t kernel, const ag_i_fwd_t *a, ag_error_t *err);
int ag_i_backward_with(ag_i_kernel_t kernel, const ag_i_bwd_t *a, ag_error_t *err);

/* What each kernel file adds to a plan whose kernel, threads, scale and rows
   are set: its scratch (ag_i_plan_scratch) and what it learns from the
   graph's shape. */
int ag_i_simple_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                     ag_error_t *err);
int ag_i_tiled_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                    ag_error_t *err);
int ag_i_gather_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                     ag_error_t *err);
int ag_i_generic_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                      const ag_score_t *score, ag_error_t *err);
/* The block-sparse lists of a plan whose width, rows and direction are set
   (blocks.c): p->lists, and q_ptr, q_tiles (k_ptr, k_tiles: the backward's
   pass B) into it. */
AG_INTERNAL
int ag_i_block_lists(ag_i_plan_t *p, const ag_nbhd_t *nb, ag_error_t *err);
/* The one allocation of a plan: threads x per_thread floats (per_thread:
   ag_i_scratch_stride's), then `shared` floats, on cache lines; `what` names
   it in a failure's message. */
int ag_i_plan_scratch(ag_i_plan_t *p, int64_t per_thread, int64_t shared, const char *what,
                      ag_error_t *err);

/*
 * The generic kernel's backward on a part (any score; the MPI layer), in two
 * passes with an exchange between them. The plan: destinations and sources
 * lo..hi-1 (lo a multiple of AG_I_GENERIC_CHUNK nodes), whose
 * passes read the queries of destinations qlo..qhi-1 and the keys of sources
 * klo..khi-1 (nb: every array indexed by global node; out-runs for pass 1).
 * Pass 0 writes dQ of lo..hi-1 and their state (AG_I_GENERIC_STATE floats a
 * head, at state + i * H * AG_I_GENERIC_STATE for destination i); pass 1
 * writes dK and dV of lo..hi-1 from the state of every destination their
 * out-runs reach, which the caller has brought in between. part (or NULL):
 * the pass's share of an attention vector's gradient per chunk of
 * AG_I_GENERIC_CHUNK nodes [ag_i_generic_chunks(lo, hi), H*d] (pass 0: gatv2's a, additive's a_dst;
 * pass 1: additive's a_src); the whole graph's gradient adds every chunk of
 * every part in order. Each row, state and chunk is bitwise the whole-graph
 * call's.
 */
#define AG_I_GENERIC_STATE 3
#define AG_I_GENERIC_CHUNK 16
AG_INTERNAL
int ag_i_plan_generic_part(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                           const ag_score_t *score, int64_t lo, int64_t hi, int64_t qlo,
                           int64_t qhi, int64_t klo, int64_t khi, ag_error_t *err);
AG_INTERNAL
void ag_i_generic_backward_pass(const ag_i_plan_t *p, const ag_i_bwd_t *a, int pass,
                                float *state, float *part);
AG_INTERNAL
int64_t ag_i_generic_chunks(int64_t lo, int64_t hi);

/* The kernels' computations with a plan of theirs (they cannot fail). */
void ag_i_simple_forward(const ag_i_plan_t *p, const ag_i_fwd_t *a);
void ag_i_simple_backward(const ag_i_plan_t *p, const ag_i_bwd_t *a);
void ag_i_tiled_forward(const ag_i_plan_t *p, const ag_i_fwd_t *a);
void ag_i_tiled_backward(const ag_i_plan_t *p, const ag_i_bwd_t *a);
void ag_i_gather_forward(const ag_i_plan_t *p, const ag_i_fwd_t *a);
void ag_i_gather_backward(const ag_i_plan_t *p, const ag_i_bwd_t *a);
void ag_i_generic_forward(const ag_i_plan_t *p, const ag_i_fwd_t *a);
void ag_i_generic_backward(const ag_i_plan_t *p, const ag_i_bwd_t *a);

/* Does every destination have at most one run (the tiled kernel's shape)? */
int ag_i_tiled_applies(const ag_nbhd_t *nb);
/* Do the fused kernels take the tiled form on a graph of N destinations and
   E edges (one_run: every destination has at most one run)? Runs long enough
   to fill tiles; anything else takes the gather form. Decided here only. */
AG_INTERNAL
int ag_i_use_tiled(int64_t N, int64_t E, int one_run);
/* The tiled kernel's block width in vectors (1 or 4), from the whole graph's shape. */
int ag_i_tiled_width(const ag_nbhd_t *nb);

/*
 * The tiled forward with its sources streamed in (tiled_stream.c): begin
 * for destinations lo..hi-1 (nb, Q indexed as ag_i_plan_part's); then
 * feed windows of consecutive source rows, ascending, each starting at most
 * 64 rows before the previous one ended (K, V indexed by global source; the
 * window ends at b); first says where the earliest tile still waiting starts
 * (INT64_MAX when every tile ran); end writes M and lse (NULL: not wanted)
 * bitwise as the tiled kernel would. Begin is its plan: it fixes the loops,
 * the team and the scratch; feed neither decides nor allocates.
 */
typedef struct ag_tiled_stream ag_tiled_stream_t;
/* The ring path's transfers of K and V (mpi/ring.c), which attngraph plan
   counts too: blocks of at most AG_I_RING_BLOCK rows, each kept with the
   AG_I_RING_CARRY rows before it (a tile's rows, at most) for the tiles that
   straddle two blocks. */
#define AG_I_RING_BLOCK ((int64_t)1024)
#define AG_I_RING_CARRY ((int64_t)64)
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

/* ag_attention_weights and ag_attention_stats for any score, their arguments
   checked by dispatch.c. */
int ag_i_generic_weights(const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                         int64_t d, const ag_score_t *score, int64_t lo, int64_t hi, float *W,
                         ag_error_t *err);
int ag_i_generic_stats(const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                       int64_t d, const ag_score_t *score, double *entropy, double *distance,
                       double *max_weight, ag_error_t *err);

/* Dd [N, H] = per head, sum_c dM[i, h*d+c] * M[i, h*d+c] (the backward's D). */
AG_INTERNAL
void ag_i_backward_rowdots(float *Dd, const float *dM, const float *M, int64_t N, int64_t H,
                           int64_t d);

/* Are these plain dot-product softmax scores (scaled-dot or dot, any beta; no
   softcap, edge bias, ALiBi, dropout or edge terms), the ones the fused kernels and the MPI layer
   run? Then *scale is their multiplier of q.k (plan.c; the one place this
   is decided). */
AG_INTERNAL
int ag_i_plain_scale(const ag_score_t *score, int64_t d, float *scale);

#endif
