/*
 * model/: the model's weights (weights.c), positions (positions.c), LayerNorm
 * (layernorm.c), activations (activation.c), a round as a list of operations
 * with their forward and backward (round.c), the rounds (rounds.c) and a GPT's
 * decoder (lm_decode.c). The one header of model/ that
 * other folders include.
 */
#ifndef AG_MODEL_H
#define AG_MODEL_H

#include "base/base.h"

/* The activations (activation.c; GELU the erf form, in arithmetic that
   vectorizes): one value; Y = act(X) over m values (Y may be X); and
   dY *= act'(X). */
float ag_i_act_value(ag_activation_t act, float z);
void ag_i_act_rows(ag_activation_t act, float *Y, const float *X, int64_t m);
void ag_i_act_backward_rows(ag_activation_t act, float *dY, const float *X, int64_t m);

/* Checks the round count against the layers, every layer's shape (and nb),
   and that each round reads the width the one before writes. */
/* Round r's (0-based) graph: opts->graphs[r], or nb. */
const ag_nbhd_t *ag_i_round_graph(const ag_nbhd_t *nb, const ag_round_opts_t *opts, int r);
/* A copy of nb (its edge ids too) with self applied: a model's graph shaped
   as its spec says, nb left as it is (model.c). */
int ag_i_nbhd_shaped_copy(ag_nbhd_t *copy, const ag_nbhd_t *nb, ag_self_loops_t self,
                          ag_error_t *err);
/* dir/readout.npy [C, W] and dir/readout_bias.npy [C] (zeros when absent),
   allocated: the one reader of a folder's readout (model.c). */
int ag_i_readout_read(const char *dir, int64_t W, int64_t *C, float **wr, float **br,
                      ag_error_t *err);
/* Attention whose first H - G heads read the round's graph and last G the
   global graph, and its backward (split_heads.c): what a layer with
   global_heads runs. opts' per-head outputs ([N, H]) are filled for both. */
int ag_i_attention_split(const ag_nbhd_t *local, const ag_nbhd_t *global, const float *Q,
                         const float *K, const float *V, int64_t H, int64_t d, int64_t G,
                         const ag_score_t *sc, float *M, const ag_attention_opts_t *opts,
                         ag_error_t *err);
int ag_i_backward_split(ag_nbhd_t *local, ag_nbhd_t *global, const float *Q, const float *K,
                        const float *V, int64_t H, int64_t d, int64_t G, const ag_score_t *sc,
                        const float *M, const float *lse, const float *dM,
                        const ag_attention_grads_t *g, ag_error_t *err);
/* ag_layer_graphs of L specs whose entries from R on are the global heads'
   graphs of layers 0.. (named so in messages): one node set for both. */
int ag_i_layer_graphs(ag_nbhd_t **graphs, int L, int R, const ag_nbhd_t *nb,
                      const char *const *specs, ag_self_loops_t self, int64_t *n_virtual,
                      ag_error_t *err);
/* Round r's global graph (opts' global_graphs), or NULL. */
ag_nbhd_t *ag_i_round_global(const ag_round_opts_t *opts, int r);
/* The first round on round r's graph: whose kernel plan round r runs. */
int ag_i_round_plan(const ag_round_opts_t *opts, int r);
int ag_i_rounds_check(const ag_nbhd_t *nb, const ag_weights_t *layers, int n_layers,
                      int rounds, const ag_round_opts_t *opts, ag_error_t *err);

/* Rotary positions (rope.c): the rows of Q and K [n, H*d] turned, in each
   head, by their positions pos [n] (inverse: turned back, the backward's
   transpose), from one table of the positions' angles. */
AG_INTERNAL
int ag_i_rope(float *Q, float *K, int64_t n, int64_t H, int64_t d, const int64_t *pos,
              float base, int inverse, ag_error_t *err);

/* ag_i_rounds_check's checks that need no graph: the round count, every
   layer's shape against the options, and each round reading the width the
   one before writes. */
int ag_i_layers_check(const ag_weights_t *layers, int n_layers, int rounds,
                      const ag_round_opts_t *opts, ag_error_t *err);

/* What the MPI layer runs: ag_i_layers_check's layers, but none with edge
   features (its parts hold no per-message terms). */
AG_INTERNAL
int ag_i_layers_mpi_check(const ag_weights_t *layers, int n_layers, int rounds,
                          const ag_round_opts_t *opts, ag_error_t *err);

/*
 * Layers of their own shapes (ag_weights_t's D_out, mean_heads, no_residual,
 * bias, act; wk and wv NULL for one projection): X is [n, D] before a round
 * and [n, ag_layer_width_out(w)] after it, in the same buffer, which holds
 * ag_rounds_widest floats per row; Xn and dXn hold the widest D, Q, K, V, M
 * the largest H*d of the layers.
 *
 * One round's forward, written once (round.c: a list of operations) for the
 * rounds (rounds.c), their training forward (train/backprop.c) and both on
 * several processes (mpi/): on the n rows of X [n, D] in place,
 *   Xn = LayerNorm(X) (o's norm) or X;  Q, K, V = Xn's projections by w;
 *   M = attend(ctx, sc);  X = X + M Wo^T (or M Wo^T without o's residual).
 * sc gets the round's score: o's, with w's attention vectors filled in
 * where o has none (k, the layer's index, names it in messages). attend is what
 * differs between callers (one process: the kernel on the whole graph; MPI:
 * the exchange of K and V rows first); it reads b's Q, K and V and writes b's
 * M. b->Xn is needed with a norm or dropout only.
 */
typedef struct {
    float *Xn;
    float *Q, *K, *V, *M;   /* [n, H*d]: this process's rows */
    float *Z;               /* [n, out width]: the activation's input, kept for the
                               backward (NULL: not kept) */
    /* the feed-forward sublayer's (layers with w1): */
    float *ffn_in;          /* [n, out]: its input, kept for the backward (NULL: not kept) */
    float *Hn;              /* [n, out]: LayerNorm of its input (norm layer) */
    float *U, *A;           /* [n, F]: W1 Hn + b1 (kept), and its activation (may be U
                               when U is not kept) */
    /* a layer with a skip: R [n, out] (kept with a gate), and the output O before
       the gate [n, out] (kept; NULL: not kept) */
    float *R, *O;
    /* post-norm: the LayerNorms' inputs [n, out] (kept; NULL: not kept) */
    float *P, *ffn_sum;
    /* edge features: their projection Pe [E, H*d] and additive's terms Epre [E, H],
       E the graph's messages */
    float *Pe, *Epre;
    int64_t E;
} ag_i_round_bufs_t;

typedef int (*ag_i_attend_fn)(void *ctx, const ag_weights_t *w, const ag_score_t *sc,
                              ag_error_t *err);

/* Which round a call runs: its layer's index k (for messages), the round's
   index r and the first of this process's rows (for dropout's masks), and
   whether it trains (dropout applies; else the options' dropout is left
   out). With dropout, b->Xn is needed (and dropout's output is there). */
typedef struct {
    int k, r;
    int64_t row0;
    int training;
    int no_input_grad;   /* backward: dX (the gradient of the round's input) is not wanted
                            (the first round's, when the caller takes no dX0) */
} ag_i_round_at_t;

AG_INTERNAL
int ag_i_round_forward(float *X, int64_t n, const ag_weights_t *w, ag_i_round_at_t at,
                       const ag_round_opts_t *o, const ag_i_round_bufs_t *b, ag_score_t *sc,
                       ag_i_attend_fn attend, void *ctx, ag_error_t *err);

/*
 * One round's backward, written once (round.c) for training on one process
 * (train/backprop.c) and on several (mpi/train.c), the reverse of
 * ag_i_round_forward on this process's n rows: from dX = dL/d(round output)
 * in b->dX, with X and M of the forward,
 *   dM = dX Wo (g->wo += dX^T M);  attend_back: dQ, dK, dV from dM (and the
 *   score's vectors' gradients into g);  back through the projections (and
 *   g's wq, wk, wv) and the norm to dX = dL/d(round input).
 * Sums over rows go through red (NULL: this process holds every row); g may
 * be NULL (no weight gradients). b->Xn and b->dXn are scratch [n, D].
 */
typedef struct {
    const float *X, *M;              /* the forward's input [n, D] and M [n, H*d] */
    float *dX;                       /* [n, D], in and out */
    float *dM, *dQ, *dK, *dV;        /* [n, H*d] */
    float *Xn, *dXn;                 /* [n, D] */
    const float *Z;                  /* the forward's Z (a layer with an activation) */
    const float *ffn_in, *U;         /* the forward's (a layer with a feed-forward sublayer) */
    float *Hn, *dHn;                 /* [n, out] */
    float *A, *dA;                   /* [n, F] */
    const float *R, *O, *P, *ffn_sum;   /* the forward's kept (as ag_i_round_bufs_t's) */
    float *dR;                       /* [n, out] (a layer with a skip) */
    float *Pe, *Epre;                /* as the forward's, made again */
    int64_t E;
    float *dEk, *dEv, *dEpre;        /* [E, H*d], [E, H*d], [E, H]: what attend_back
                                        writes for the edge terms of the score it is given */
} ag_i_round_back_t;

typedef int (*ag_i_attend_back_fn)(void *ctx, const ag_weights_t *w, ag_weights_t *g,
                                   const ag_score_t *sc, ag_error_t *err);

AG_INTERNAL
int ag_i_round_backward(int64_t n, const ag_weights_t *w, ag_weights_t *g, ag_i_round_at_t at,
                        const ag_round_opts_t *o, const ag_i_round_back_t *b,
                        const ag_i_reducer_t *red, ag_i_attend_back_fn attend_back,
                        void *ctx, ag_error_t *err);

/* What a tape keeps of a round of layer w (layer_norm: the options' norm) besides
   its input X, Q, K, V, M and log-sum-exp: the activation's input Z, the
   sublayer's input and U, the skip's R and the gate's O, the post-norms'
   inputs P and ffn_sum (each [n, out], U [n, F]): the ag_i_round_bufs_t
   fields a training forward gives. */
typedef struct {
    int Z, ffn, R, O, P, ffn_sum;
} ag_i_kept_t;

AG_INTERNAL
ag_i_kept_t ag_i_round_kept(const ag_weights_t *w, int layer_norm);
/* The floats per row of what kept holds, for layer w. */
AG_INTERNAL
int64_t ag_i_kept_width(const ag_weights_t *w, ag_i_kept_t kept);
/* The shapes of rounds 1..rounds of layers (a single layer: every round), as
   AG_I_ROUND_SHAPE numbers each: D, H, d, out, F, what it keeps and whether
   it reads edge features. A tape
   made for one array of shapes serves a call with the same array again (its
   memory and plans); a new array (NULL: out of memory, err set). */
#define AG_I_ROUND_SHAPE 6
AG_INTERNAL
int64_t *ag_i_round_shapes(const ag_weights_t *layers, int n_layers, int rounds,
                           int layer_norm, ag_error_t *err);
/* Points b's kept buffers of layer w (those kept says, else NULL) at n rows
   each, one after another from `at`; returns the float after them. */
AG_INTERNAL
float *ag_i_kept_carve(ag_i_round_bufs_t *b, const ag_weights_t *w, ag_i_kept_t kept, int64_t n,
                       float *at);

/*
 * LayerNorm's backward for Y = LayerNorm(X) (ag_layer_norm, weight NULL: 1):
 * dX += dL/dX from dY; dW += sum over rows of dY * xhat and dB += sum of dY
 * (each NULL: not wanted), summed over rows in fixed chunks (the same bits
 * for any thread count). Fails only for memory.
 */
int ag_i_layer_norm_backward(float *dX, float *dW, float *dB, const float *dY, const float *X,
                             int64_t N, int64_t D, const float *weight, float eps,
                             ag_error_t *err);

/* The layers of spec from input width D: their arrays read from dir (the
   folder of a saved model: dir/round-k/, or dir for one layer) or, dir NULL,
   drawn from seed. (The tool's, which keeps its readout apart.) */
int ag_i_model_layers(ag_weights_t **layers, const ag_model_spec_t *spec, int64_t D,
                      int64_t edge_dim, const char *dir, uint64_t seed, ag_error_t *err);
void ag_i_model_layers_free(ag_weights_t *layers, int n);
/* The files of a saved model's folder into items (n_layers x AG_LAYER_ARRAYS
   + 2 of them, names as long): each layer's arrays (in round-k/ for more than
   one layer) and, C > 0, the readout Wr [C, width] and br [C]. Returns how
   many. (ag_model_save's, and the tool's train --save.) */
int ag_i_model_items(const ag_weights_t *layers, int n_layers, int64_t C, int64_t width,
                     const float *wr, const float *br, ag_i_folder_item_t *items,
                     char (*names)[64]);

/* Sets the model-wide key named key ("beta", "alibi", ...; value NULL for a
   switch) as a model text's line does (messages: path, line). */
int ag_i_model_key_set(ag_model_spec_t *spec, const char *key, const char *value,
                       const char *path, int line, ag_error_t *err);

/* Sets every array w has to zeros (gradients before a backward). */
AG_INTERNAL
void ag_i_weights_zero(ag_weights_t *w);

/* The largest H*d of the layers: what a workspace of their rounds holds. */
int64_t ag_i_layers_largest_hd(const ag_weights_t *layers, int n_layers);

/*
 * Reads dir/name.npy into *out (allocated) and checks its shape is
 * want[0..ndim), naming the file and both shapes; optional: a missing file
 * leaves *out NULL.
 */
int ag_i_weights_load_array(float **out, const char *dir, const char *name, int ndim,
                            const int64_t *want, int optional, ag_error_t *err);

/* ag_lm_model_save with option ("--save") naming the folder in messages;
   the folder's check (ag_i_folder_check) is the caller's. */
int ag_i_lm_model_save(const ag_lm_model_t *lm, const char *dir, const char *option,
                       ag_error_t *err);
/* A language model's pattern text: one line, each '|'-separated part a
   pattern, and one part or L (L <= 0: any count). */
int ag_i_lm_pattern_check(const char *spec, int64_t L, ag_error_t *err);
/* Before training: refuses a folder in the place of a file that the model of
   L blocks of H heads (bias: with biases; mlp: with feed-forward sublayers;
   its positions; ids: of token ids, which write no vocab.npy) would write
   into dir. */
int ag_i_lm_model_save_check(const char *dir, int64_t L, int64_t H, int bias, int mlp,
                             ag_lm_positions_t positions, int ids, ag_error_t *err);

/* ag_embed_backward over this process's rows with r (NULL: one process). */
int ag_i_embed_backward_r(const ag_i_reducer_t *r, float *dwte, float *dwpe, const float *dX,
                          const int64_t *ids, const int64_t *pos, int64_t n, int64_t V,
                          int64_t T, int64_t D, ag_error_t *err);

/* The same with r (NULL: the plain call); see base/gemm.h. */
int ag_i_layer_norm_backward_r(const ag_i_reducer_t *r, float *dX, float *dW, float *dB,
                               const float *dY, const float *X, int64_t N, int64_t D,
                               const float *weight, float eps, ag_error_t *err);

/* Elements first .. first+n-1 of what ag_random_normal(.., seed, stream, scale)
   draws, into x [n]: a process's rows of the one-process numbers. */
void ag_i_random_normal_range(float *x, int64_t first, int64_t n, uint64_t seed,
                              uint64_t stream, float scale);
/* Rows first..first+rows-1 of the per-node projections ag_weights_random(w,
   D, H, d, N, seed) draws for any N beyond them, into w (per_node = rows; the
   shared matrices as that draw's): a process's part of the weights. No rows
   (a process without rows) give shared ones' shapes, which nothing reads. */
int ag_i_weights_random_rows(ag_weights_t *w, int64_t D, int64_t H, int64_t d, int64_t first,
                             int64_t rows, uint64_t seed, ag_error_t *err);
/* Keeps rows first..first+rows-1 of w's per-node projections (per_node = rows;
   none: shared ones' shapes, as ag_i_weights_random_rows). */
int ag_i_weights_keep_rows(ag_weights_t *w, int64_t first, int64_t rows, ag_error_t *err);
/* ag_posenc_sinusoidal's positions for rows lo..lo+n-1 added to X [n, D]. */
void ag_i_posenc_rows(float *X, int64_t lo, int64_t n, int64_t D);

#endif
