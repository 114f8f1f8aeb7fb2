/*
 * The score kinds on vectors (score_rows.c): one node's row of the generic
 * kernel, forward and both backward passes, compiled per instruction set and
 * registered in isa.h as the fused kernels' loops are. They run softmax scores
 * whose messages carry nothing of their own (no edge bias or edge terms; no
 * softcap), with or without attention dropout: scaled-dot and dot with ALiBi,
 * additive (GAT), GATv2 and cosine. generic.c makes the per-node terms and the
 * chain rule through them; a row here computes every message's score, weight
 * and gradient.
 */
#ifndef AG_KERNELS_SCORE_ROWS_H
#define AG_KERNELS_SCORE_ROWS_H

#include "base/base.h"
#include "kernels/kernels.h"

/*
 * Attention dropout's draws (generic.c's file comment): a message's mask is a
 * hash of (seed, destination i, source j, its occurrence among the messages
 * j -> i, head h), the same on every thread and process count.
 */
typedef struct {
    uint64_t state;   /* the generator's state */
    uint64_t below;   /* a 64-bit draw below this drops the message (0: no dropout) */
    float scale;      /* the kept ones' factor, 1 / (1 - p) */
} ag_i_drop_t;

/* The occurrence (0: the first) of source j of run r of destination i: a
   repeated source starts a new run, so the runs before that end at j hold
   its earlier occurrences. */
static inline int64_t ag_i_occurrence(const ag_nbhd_t *nb, int64_t i, int64_t r, int64_t j)
{
    int64_t nth = 0;
    while (r > nb->run_ptr[i] && j == nb->run_src[r] &&
           nb->run_src[r - 1] + nb->run_len[r - 1] - 1 == j)
        nth++, r--;
    return nth;
}

/* The key of message j -> i (its nth occurrence), from which each head's draw is made. */
static inline uint64_t ag_i_drop_key(const ag_i_drop_t *z, int64_t i, int64_t j, int64_t nth)
{
    return rng_at(rng_at(rng_at(z->state, (uint64_t)i), (uint64_t)j), (uint64_t)nth);
}

/* Dropout's factor of head h of the message of key `key`: 0 (dropped) or
   1 / (1 - p); 1 without dropout. */
static inline float ag_i_drop_factor(const ag_i_drop_t *z, uint64_t key, int64_t h)
{
    if (!z->below)
        return 1.0f;
    return rng_at(key, (uint64_t)h) < z->below ? 0.0f : z->scale;
}

/* What a row reads of a score; the arrays are indexed by global node. */
typedef struct ag_i_srow {
    ag_score_kind_t kind;     /* additive, gatv2, cosine, or a dot kind */
    int64_t H, d;
    float beta, scale;        /* the score: beta (raw), raw = q.k scale for the dot kinds */
    float slope;              /* additive and gatv2: LeakyReLU's */
    const float *Q, *K;
    const float *t_dst, *t_src;     /* the kind's per-node terms [N, H]: additive's
                                       a_dst.q_i and a_src.k_j, gatv2's a'.q_i and
                                       a'.k_j, cosine's |q_i| and |k_j| */
    const float *a, *a_abs;         /* gatv2: its vector a and a'' [H*d] (generic.c) */
    const float *alibi;             /* [H] slopes, or NULL */
    ag_i_drop_t drop;               /* attention dropout (drop.below 0: none) */
} srow_t;

/* The floats of scratch a destination's row takes (in-degree deg): its scores
   and dA, and its messages' dropout keys. */
#define AG_I_SROW_FLOATS(deg) (4 * (deg) + 2)

/* Destination i: row i of M (m_i [H*d]), and x's figures and lse. s: scratch
   of AG_I_SROW_FLOATS(its in-degree) floats. */
typedef void ag_i_srow_fwd_f(const srow_t *c, const ag_nbhd_t *nb, int64_t i, const float *V,
                             float *m_i, float *s, const kext_t *x);
/* Pass 1 of the backward at destination i: its state st [H, AG_I_GENERIC_STATE]
   (max, sum, D), dq [H*d] the sum over its messages of dr times
   the key (cosine: dr / (|q||k|); before the row's chain rule) and T [H]
   (additive: the sum of dL/dt); db (NULL: not wanted) its slots' dL/dx summed
   over the heads (the edge bias's gradient); gatv2: dq is whole, and its
   messages' share of a's gradient is added to part [H*d] (NULL: not wanted).
   s: scratch of AG_I_SROW_FLOATS(its in-degree) floats. */
typedef void ag_i_srow_dst_f(const srow_t *c, const ag_nbhd_t *nb, int64_t i, const float *V,
                             const float *dM, float *st, float *dq, float *T, float *db,
                             float *part, float *s);
/* Pass 2 at source j over its out-runs: dk, dv [H*d] (dk as dq above) and T
   [H], from the states of its destinations (state: [N, H, AG_I_GENERIC_STATE]). */
typedef void ag_i_srow_src_f(const srow_t *c, const ag_nbhd_t *nb, int64_t j, const float *V,
                             const float *dM, const float *state, float *dk, float *dv,
                             float *T);

#endif
