/*
 * attngraph: attention on a graph: the score functions, the kernels,
 * their backward and the per-edge weights.
 * A part of <attngraph/core.h>, which includes them all and states the
 * conventions.
 */
#ifndef ATTNGRAPH_ATTENTION_H
#define ATTNGRAPH_ATTENTION_H

#include "attngraph/graph.h"

AG_BEGIN_DECLS

/* ---------------------------------------------------------------- kernel */

/* How a destination i weighs an in-edge j -> i (docs/scores.md). */
typedef enum {
    AG_SCORE_SCALED_DOT = 0,  /* q.k / sqrt(d), softmax */
    AG_SCORE_DOT,             /* q.k, softmax */
    AG_SCORE_COSINE,          /* cos(q, k), softmax (scaled by beta) */
    AG_SCORE_ADDITIVE,        /* GAT: LeakyReLU(a_dst.q_i + a_src.k_j), softmax */
    AG_SCORE_GATV2,           /* GATv2: a.LeakyReLU(q_i + k_j), softmax */
    AG_SCORE_SIGMOID,         /* a_ij = sigmoid(s_ij + b_i), s = q.k / sqrt(d); no normalisation */
    AG_SCORE_LINEAR           /* a_ij = phi(q_i).phi(k_j) / sum_j' phi(q_i).phi(k_j'), phi = elu + 1 */
} ag_score_kind_t;
#define AG_SCORE_KINDS 7

/*
 * Every field is taken as given: 0 means 0 (beta 0 weighs all in-edges alike,
 * slope 0 is a ReLU). Start from AG_SCORE_INIT or ag_score_init, which hold
 * the defaults; a zero-filled struct has beta 0 and slope 0.
 */
typedef struct {
    ag_score_kind_t kind;
    float beta;               /* inverse temperature on softmax scores (default 1) */
    float softcap;            /* > 0: s <- softcap * tanh(s / softcap) (softmax scores);
                                 0: no cap (the default) */
    float slope;              /* LeakyReLU slope of additive and gatv2 (default 0.2) */
    const float *a_src;       /* additive: [H, d]; gatv2: the vector a [H, d] */
    const float *a_dst;       /* additive: [H, d] */
    const float *edge_bias;   /* [E] added to the score of each slot, or NULL */
    int alibi;                /* add slope_h * (j - i), slope_h = 2^(-8(h+1)/H) (ALiBi) */
    int has_sigmoid_bias;     /* sigmoid: use sigmoid_bias instead of -ln(in-degree) */
    float sigmoid_bias;
    /* Dropout on the attention weights, after their normalisation (as PyG's
       GATConv and TransformerConv have it): each message's weight in each head
       is kept with probability 1 - dropout and then scaled by 1 / (1 - dropout),
       or set to 0. 0 (the default): none. Whether the message j -> i (its
       nth occurrence, for multi-edges) is kept in head h is a hash of
       (dropout_seed, i, j, nth, h) (base/rng.h), so the mask is the same for
       any thread count and any number of MPI processes, and the backward with
       the same score drops the same messages. A score with dropout runs in the
       generic kernel; the figures of ag_attention_ex describe the weights before
       dropout. */
    float dropout;            /* in [0, 1) */
    uint64_t dropout_seed;
    /* additive only: [E, H] a term per slot and head inside the LeakyReLU,
       LeakyReLU(a_dst.q_i + a_src.k_j + edge_pre[s, h]): GAT's edge features
       (PyG's GATConv with edge_dim: att_edge . lin_edge(e_ij)), or NULL. Not on
       parts of the MPI layer. */
    const float *edge_pre;
    /* [E, H*d] per slot (NULL: none): the message's own key and value terms,
       its key being k_j + edge_key[s] and its value v_j + edge_value[s]:
       TransformerConv's and GATv2Conv's edge features (PyG: lin_edge(e_ij)).
       Scaled-dot, dot, sigmoid and gatv2 scores; not on parts of the MPI layer. */
    const float *edge_key, *edge_value;
} ag_score_t;

/* The defaults: scaled-dot, beta 1, no softcap, slope 0.2, no vectors, no bias. */
#define AG_SCORE_INIT {.kind = AG_SCORE_SCALED_DOT, .beta = 1.0f, .slope = 0.2f}
/* Sets *score (uninitialised) to AG_SCORE_INIT with the given kind. */
void ag_score_init(ag_score_t *score, ag_score_kind_t kind);

/* Checks a score description against H, d and nb (vectors given, options that
   apply to the kind). */
int ag_score_check(const ag_score_t *score, const ag_nbhd_t *nb, int64_t H, int64_t d,
                   ag_error_t *err);

/*
 * One message round of attention over nb. Q, K, V, M are [N, H*d].
 * For each destination i and head h, over its in-edges j -> i: scores s_ij
 * (score; NULL is scaled-dot: q_i . k_j / sqrt(d)), weights a_ij (softmax over
 * the in-edges, or as the kind says), m_i = sum_j a_ij v_j. A node with no
 * in-edges gets zeros. Plain dot-product scores (scaled-dot, dot, beta) go to
 * a fused kernel chosen from the neighbourhoods' shape: the tiled kernel when
 * every destination has one run of sources and 16 or more in-edges on
 * average, else the gather kernel; both keep O(tile) scratch per thread. The
 * other kinds score a destination's edges into a buffer first (largest
 * in-degree x H floats per thread). Q, K and V are not checked (a pass
 * over them cost 10-15% of a window's or a random graph's round): NaN and
 * infinity there propagate; ag_check_finite is the check, which the CLI (at
 * reading) and Python (at the call) run. The score's vectors and edge bias
 * are checked. Time O(E*H*d).
 */
int ag_attention(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                 int64_t H, int64_t d, const ag_score_t *score, float *M, ag_error_t *err);

/*
 * What ag_attention_ex adds to a round, all optional (NULL: not wanted).
 *
 * entropy, max_weight, distance [N, H]: for destination i and head h, the
 * entropy -sum_j a_ij ln a_ij of its weights (nats), its largest weight and
 * its mean distance sum_j a_ij |i - j|; NAN for a node without in-edges. The
 * figures of ag_attention_stats per head, computed in the kernel's own pass
 * from the softmax state it holds (running max and sum, with sum_j p_j s_j
 * beside them), at 1-5% of the round (distance: a few operations an edge
 * more). They agree with ag_attention_stats to float rounding; like M, they
 * are bitwise the same for any thread count.
 *
 * progress: called with the work done and the total (messages x heads) about
 * every thousandth of the work and at the end, on the calling thread (OpenMP
 * thread 0, between its tasks): it must not use OpenMP nor call igraph, and
 * should return quickly. On a short run the other threads may do every task
 * before thread 0 reports: then only the final call comes.
 */
typedef struct {
    float *entropy, *max_weight, *distance;
    void (*progress)(int64_t done, int64_t total, void *ctx);
    void *progress_ctx;
    /* [N, H] for softmax scores: the log-sum-exp ln sum_j exp(s_ij) of each
       destination's scores, the one extra state ag_attention_backward needs
       (-INFINITY for a node without in-edges); for sigmoid and linear scores
       it is left untouched. NULL: not wanted. */
    float *lse;
} ag_attention_opts_t;

/* Nothing asked for: the defaults are zeros. */
#define AG_ATTENTION_OPTS_INIT {0}

/* The kernel that attention on nb with this score (NULL: scaled-dot) and head
   width runs: "tiled" (every destination one run of sources, 16 or more a
   node on average), "blocks" (the tiled kernel on block-sparse lists of the
   tiles that hold edges, when they are dense enough), "gather" (scattered
   sources, or multi-edges) for plain dot-product scores; "generic" for every
   other score. The plan's rule (docs/performance.md); nothing is computed. */
const char *ag_attention_kernel(const ag_nbhd_t *nb, int64_t d, const ag_score_t *score);

/* ag_attention with opts (NULL: exactly ag_attention). M is bitwise the same
   with and without opts. */
int ag_attention_ex(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                    int64_t H, int64_t d, const ag_score_t *score, float *M,
                    const ag_attention_opts_t *opts, ag_error_t *err);

/*
 * The attention weights of the edges of destinations lo..hi-1:
 * W[(s - edge_ptr[lo])*H + h] for slot s and head h. For softmax and linear
 * scores each destination's weights sum to 1 per head.
 */
int ag_attention_weights(const ag_nbhd_t *nb, const float *Q, const float *K,
                         int64_t H, int64_t d, const ag_score_t *score, int64_t lo, int64_t hi,
                         float *W, ag_error_t *err);

/*
 * Per node i, averaged over heads: the entropy of its attention,
 * -sum_j a_ij ln a_ij (nats), the mean distance sum_j a_ij |i - j| and the
 * largest weight. Nodes without in-edges get NAN. Each output is [N] or NULL.
 */
int ag_attention_stats(const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                       int64_t d, const ag_score_t *score, double *entropy, double *distance,
                       double *max_weight, ag_error_t *err);

/* One message in the graph's edge order (see ag_edge_order). */
typedef struct {
    int64_t edge_id;      /* igraph edge id, or the column of ag_nbhd_from_edges (-1: a
                             self-loop added by ag_nbhd_self_loops or ag_nbhd_from_edges) */
    int64_t src, dst;
} ag_edge_msg_t;

/*
 * The messages of nb in the graph's edge order (by edge id; an undirected
 * edge u-v gives u->v then v->u with u < v; self-loops added by
 * ag_nbhd_self_loops follow all of them, by node), with their slots: msgs[k]
 * travels in slot slot[k]. Both arrays are malloc'ed, of nb->n_edges entries.
 * Without edge ids (patterns, CSR), edge k is slot k.
 */
int ag_edge_order(const ag_nbhd_t *nb, ag_edge_msg_t **msgs, int64_t **slot, ag_error_t *err);

/* ---------------------------------------------------------------- gradients */

/*
 * Compiles nb's transpose (out_ptr .. run_slot above) in place; does nothing
 * if it is there. ag_attention_backward needs it: each source owns its dK and
 * dV rows and walks its out-edges, so no two threads add into one row and the
 * gradients are bitwise the same for any thread count. Patterns stay compact
 * (causal on N nodes: N out-runs). ag_nbhd_self_loops drops a transpose (it is
 * compiled again when needed). Time O(N + R + R' + changes x log), memory O(N + R + R').
 */
int ag_nbhd_transpose(ag_nbhd_t *nb, ag_error_t *err);

/* What ag_attention_backward writes. */
typedef struct {
    float *dQ, *dK, *dV;          /* [N, H*d], overwritten; each required */
    float *d_a_src, *d_a_dst;     /* [H, d] overwritten: additive's a_src and a_dst; gatv2's
                                     vector a in d_a_src; NULL: not wanted */
    float *d_edge_bias;           /* [E] in slot order (ag_edge_order maps slots to
                                     edges), overwritten; NULL: not wanted. Also for a
                                     score without a bias (the gradient at bias 0;
                                     linear: 0) */
    float *d_edge_pre;            /* [E, H] in slot order, overwritten: additive's edge
                                     terms (also for a score without them: the gradient
                                     at 0); NULL: not wanted */
    float *d_edge_key, *d_edge_value;   /* [E, H*d] in slot order, overwritten: the
                                     messages' key and value terms (also at 0 for a
                                     score without them); NULL: not wanted */
} ag_attention_grads_t;

/*
 * Gradients of L = sum(dM * M) for M = attention(Q, K, V) as ag_attention
 * computes it (same nb, H, d, score): dQ, dK, dV and the score's learnable
 * parameters. M and lse are the forward's (ag_attention_ex with opts->lse);
 * either may be NULL, and is then computed again here (one forward's time).
 * nb is transposed if it is not yet (hence not const).
 *
 * Destinations own dQ and each slot's edge-bias gradient; sources own dK and
 * dV, walking the transpose: no atomics, bitwise the same for any thread
 * count. Plain dot-product softmax goes to fused kernels (FlashAttention-2's
 * backward: P recomputed from Q, K and lse; D_i = rowsum(dM_i * M_i);
 * dS = P (dM V^T - D); dQ = dS K, dK = dS^T Q, dV = P^T dM), tiled or
 * gathered as the forward; other kinds, and any score when d_edge_bias is
 * asked for, go through the generic backward, which keeps 3 x N x H floats
 * (each destination's softmax max and sum, or sigmoid's or linear's
 * normaliser, and D_i) and per thread 3 x H floats per in-edge of the largest
 * in-degree, nothing per edge, and computes each message's weight again on
 * the way through the sources. Time O(E H d).
 */
int ag_attention_backward(ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                          int64_t H, int64_t d, const ag_score_t *score, const float *M,
                          const float *lse, const float *dM, const ag_attention_grads_t *g,
                          ag_error_t *err);

AG_END_DECLS

#endif /* ATTNGRAPH_ATTENTION_H */
