/*
 * Dense double-precision reference for attention, independent of the code
 * under test: it takes a plain list of (src, dst) messages, builds the N x N
 * matrix of edge multiplicities and does masked softmax in double.
 */
#ifndef AG_TEST_REFERENCE_H
#define AG_TEST_REFERENCE_H

#include <stdint.h>

/*
 * M [N, H*d] (double) = attention over the messages (src[e] -> dst[e]).
 * W, if not NULL: W[e*H + h] is the weight of message e, head h.
 * Q, K, V: float [N, H*d]. Scores are q.k / sqrt(d) in double.
 */
void ref_attention(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                   const float *Q, const float *K, const float *V, int64_t H, int64_t d,
                   double *M, double *W);

/*
 * `rounds` rounds in double: Q = X Wq^T, K = X Wk^T, V = X Wv^T,
 * X += attention(Q, K, V) Wo^T. X: [N, D] in/out (double).
 */
void ref_rounds(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                const float *wq, const float *wk, const float *wv, const float *wo,
                int64_t D, int64_t H, int64_t d, int rounds, double *X);

/* One layer for ref_rounds_layers: [out, in] matrices; per_node: wq, wk, wv
   are [N, H*d, D]; ln_w, ln_b [D] or NULL; a_src, a_dst [H, d]: the layer's
   attention vectors for ref_rounds_scored (additive both, gatv2 a_src as a),
   or NULL: the score's. */
typedef struct {
    const float *wq, *wk, *wv, *wo;
    int per_node;
    const float *ln_w, *ln_b;
    const float *a_src, *a_dst;
} ref_layer_t;

/* Rounds in double with layer r (or layer 0 when n_layers == 1), optional
   pre-norm LayerNorm (eps 1e-5) and residual. */
void ref_rounds_layers(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                       const ref_layer_t *layers, int n_layers, int64_t D, int64_t H, int64_t d,
                       int rounds, int residual, int layer_norm, double *X);

/* Score description for ref_attention_scored; kind numbers as ag_score_kind_t. */
typedef struct {
    int kind;                 /* 0 scaled-dot, 1 dot, 2 cosine, 3 additive, 4 gatv2, 5 sigmoid, 6 linear */
    double beta, softcap, slope;
    const float *a_src, *a_dst;   /* [H, d]; gatv2 uses a_src as a */
    const double *bias;       /* [E] per message, or NULL */
    int alibi;
    int has_sigmoid_bias;
    double sigmoid_bias;
    /* per-message terms in the messages' order, or NULL: edge_pre [E, H] inside
       additive's LeakyReLU; edge_key [E, H*d] added to the key (every kind),
       edge_value [E, H*d] to the value */
    const double *edge_pre, *edge_key, *edge_value;
    /* rotary positions: each node's [N], or NULL; q and k of node i turned in
       each head, pairs (j, j + d/2) by pos[i] * 10000^(-2j/d) (RoFormer's
       formula, in double) */
    const int64_t *rope_pos;
} ref_score_t;

/*
 * Attention with any score, in double, straight from the formulas: for each
 * destination its messages (from the list), their scores, the normalisation,
 * the weighted sum. M [N, H*d]; W [E*H] or NULL.
 */
void ref_attention_scored(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                          const float *Q, const float *K, const float *V, int64_t H, int64_t d,
                          const ref_score_t *sc, double *M, double *W);

/* lse [N*H]: ln of the sum over i's messages of exp(score) for head h, in
   double (-INFINITY for a node without messages). Softmax kinds. */
void ref_lse_scored(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                    const float *Q, const float *K, int64_t H, int64_t d, const ref_score_t *sc,
                    double *lse);

/* The same as ref_attention (scaled-dot softmax, double) without the N x N
   mask, for large graphs: messages must be grouped by destination in
   ascending order (dst non-decreasing). M [N, H*d]. */
void ref_attention_sparse(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                          const float *Q, const float *K, const float *V, int64_t H, int64_t d,
                          double *M);

/* ref_rounds_layers with any score (NULL: scaled-dot), every round's Q, K, V
   in double; a layer's vectors (when not NULL) replace the score's. */
void ref_rounds_scored(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                       const ref_layer_t *layers, int n_layers, int64_t D, int64_t H,
                       int64_t d, int rounds, int residual, int layer_norm,
                       const ref_score_t *sc, double *X);

/* A layer of its own shape for ref_layers_shaped: X [N, D] in,
   [N, out] out, where out is D_out with wo, else H*d (heads concatenated) or
   d (mean_heads). wk and wv NULL: keys and values are the queries'. */
typedef struct {
    int64_t D, H, d, D_out;
    const float *wq, *wk, *wv, *wo;   /* [H*d, D], wo [D_out, H*d] or NULL */
    int mean_heads, residual;
    const float *bias;                /* [out] or NULL */
    int act;                          /* 0 none, 1 ReLU, 2 ELU, 3 GELU (erf) */
    const float *ln_w, *ln_b;         /* [D]: pre-norm LayerNorm, or both NULL: none */
    const float *a_src, *a_dst;       /* [H, d]: the score's vectors (additive, gatv2) */
    /* a feed-forward sublayer on the output (w1 NULL: none): Y + W2 ff_act(W1 Yn + b1)
       + b2, Yn = LayerNorm(Y) with ln2 (when ln_w is given) */
    int64_t F;
    const float *w1, *b1, *w2, *b2, *ln2_w, *ln2_b;
    int ff_act;
    const float *bq, *bk, *bv;        /* [H*d] the projections' biases, or NULL */
    const float *wskip, *bskip;       /* [out, D], [out]: R = Xn Wskip^T + bskip */
    const float *wbeta;               /* [3 out]: g = sigmoid(wbeta . [Z, R, Z - R]) */
    int post_norm;                    /* LayerNorm (ln_w, ln2_w) after the sums instead */
    const float *edges;               /* [E, edge_dim] in the messages' order, or NULL */
    int64_t edge_dim;
    const float *wedge, *attn_edge;   /* [H*d, edge_dim], [H, d] (additive) */
} ref_shaped_t;

/* Layers 0..n-1 in turn, in double: Xn = LayerNorm(X) (with ln_w) or X;
   Q, K, V (+ biases); P = edges Wedge^T, the score's edge terms (additive:
   P . attn_edge per head; gatv2: P on the key; others: on key and value);
   M = attention (sc, with the layer's vectors); Z = M Wo^T or the heads of M;
   with a skip Z + R, or g R + (1 - g) Z; + bias, + X (residual); post-norm:
   LayerNorm; X = act(Z). X holds the widest state. */
void ref_layers_shaped(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                       const ref_shaped_t *layers, int n, const ref_score_t *sc, double *X);

/* A GPT in double for ref_lm_loss: embeddings wte [V, D], wpe [T, D], its blocks
   (ref_shaped_t: pre-norm with ln_w, residual, wo, a GELU sublayer), a final
   LayerNorm (lnf_w, lnf_b or NULL) and the head tied to wte. */
typedef struct {
    int64_t V, T, D, L;
    const float *wte, *wpe, *lnf_w, *lnf_b;
    const ref_shaped_t *layers;
    const int64_t *window;   /* [L] block l's: token i reads i-W+1..i (0: 0..i); NULL: causal */
    int rope;                /* rotary positions (wpe unused): token i at i % T */
} ref_lm_t;

/* The mean next-token cross-entropy of B causal sequences of T tokens (ids,
   targets [B*T]; -1 targets not counted), from the formulas; each block under
   its window. */
double ref_lm_loss(const ref_lm_t *m, int64_t B, const int64_t *ids, const int64_t *targets);

/* The losses of the library (ag_loss_mse, ag_loss_cross_entropy) in double,
   straight from their definitions; mask NULL: every node. */
double ref_loss_mse(const double *X, const float *Y, int64_t N, int64_t D,
                    const uint8_t *mask);
double ref_loss_cross_entropy(const double *X, int64_t N, int64_t D, const float *Wr,
                              const float *br, int64_t C, const int64_t *labels,
                              const uint8_t *mask);

#endif
