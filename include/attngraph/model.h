/*
 * attngraph: rounds and models: layers and their arrays, message rounds,
 * model files and the model object.
 * A part of <attngraph/core.h>, which includes them all and states the
 * conventions.
 */
#ifndef ATTNGRAPH_MODEL_H
#define ATTNGRAPH_MODEL_H

#include "attngraph/attention.h"

AG_BEGIN_DECLS

/* ---------------------------------------------------------------- rounds */

/* Activations after a layer: ReLU, ELU (alpha 1), GELU (erf, torch's default). */
typedef enum { AG_ACT_NONE = 0, AG_ACT_RELU, AG_ACT_ELU, AG_ACT_GELU } ag_activation_t;

/* One layer's weights, [out, in] as torch.nn.Linear.weight. */
typedef struct {
    int64_t D, H, d;      /* model (input) width, heads, head width */
    int64_t per_node;     /* 0: shared; else N, and wq, wk, wv are [N, H*d, D]: node i
                             projects with its own matrices */
    float *wq, *wk, *wv;  /* [H*d, D] (or [N, H*d, D]) */
    float *wo;            /* [D, H*d] (D_out rows when set), or NULL (below) */
    float *ln_weight, *ln_bias;     /* [D] pre-norm LayerNorm, or NULL: 1 and 0 */
    float *attn_src, *attn_dst;     /* [H, d] additive (GAT) vectors, or NULL */
    float *attn;                    /* [H, d] the gatv2 vector a, or NULL */
    /* A layer of its own shape (GNN layers); each 0 or NULL gives the round
       above, width D in and out. wk and wv both NULL: keys and values are the
       queries' projection Xn Wq^T (GAT's one `lin`). wo NULL: the output is M,
       its heads concatenated ([N, H*d]) or averaged ([N, d]: mean_heads). */
    int64_t D_out;        /* with wo: wo's rows, [D_out, H*d] (0: D) */
    int mean_heads;
    int no_residual;      /* no X + ... for this layer (a residual needs D_out == D) */
    float *bias;          /* [out width] added to the output, or NULL */
    ag_activation_t act;  /* applied last: Y = act(output + bias (+ X)) */
    /* A feed-forward sublayer after it (a transformer block's), w1 NULL: none.
       On the layer's output Y [N, out]: Y = Y + W2 ff_act(W1 Yn + b1) + b2, Yn =
       LayerNorm(Y) with ln2 (the options' norm) or Y; F = w1's rows. */
    int64_t F;
    float *w1, *b1;       /* [F, out], [F] or NULL */
    float *w2, *b2;       /* [out, F], [out] or NULL */
    float *ln2_weight, *ln2_bias;   /* [out] */
    ag_activation_t ff_act;
    /* More of a GNN layer (PyG's TransformerConv and GATConv names in brackets);
       each 0 or NULL: none. */
    float *bq, *bk, *bv;  /* [H*d] the projections' biases (lin_query/key/value.bias);
                             with one projection, bq only */
    float *wskip, *bskip; /* [out, D], [out] a skip projection of what the projections
                             read (root_weight: lin_skip): R = Xn Wskip^T + bskip is
                             added to the attention's output O; a layer with a skip
                             has no residual */
    float *wbeta;         /* [3 out] with wskip, a gate instead of the sum (beta:
                             lin_beta): g = sigmoid(wbeta . [O, R, O - R]) per node,
                             output g R + (1 - g) O */
    int post_norm;        /* with the options' norm: LayerNorm after the layer's sums
                             (post-norm, X = LN(X + ...), ln_weight [out]; a sublayer's
                             Y = LN2(Y + FFN(Y))) instead of on what they read */
    int64_t edge_dim;     /* with wedge: the width of the options' edge_features */
    float *wedge;         /* [H*d, edge_dim] the edge features' projection (lin_edge):
                             P = e Wedge^T per message, added to its key and value
                             (TransformerConv; any kind but the two below), to its key
                             (gatv2: GATv2Conv), or as sum_c P[h, c] attn_edge[h, c]
                             inside the LeakyReLU (additive: GATConv's att_edge) */
    float *attn_edge;     /* [H, d] additive's edge vector, with wedge */
    /* GraphGPS's layer: the last global_heads of the H heads attend over the
       round's global graph (ag_round_opts_t.global_graphs), the others over
       its graph; wo sums the two (a local and a global attention, each with
       its own projections, added). 0: every head reads the round's graph. */
    int64_t global_heads;
} ag_weights_t;

/* A layer with no array and no size yet (ag_weights_random, ag_weights_load,
   ag_layer_spec_shape fill one). */
#define AG_WEIGHTS_INIT {0}

/* The width of what layer w writes: D_out (or D) with wo, else H*d or d. */
int64_t ag_layer_width_out(const ag_weights_t *w);

/*
 * The arrays of a layer, as one table: array k (0 <= k < AG_LAYER_ARRAYS, in
 * ag_weights_t's order) is the field `name`, saved as name.npy; it is there in
 * a layer that has every feature of `needs`; a fresh one is Gaussian of
 * standard deviation 1/sqrt(fan-in) (ag_layer_array_fan_in), zeros or ones;
 * `decay`: it is in the weight-decay group (two or more dimensions). Loops over
 * a layer's arrays iterate this table, in its order: a new array is a new row.
 */
#define AG_LAYER_ARRAYS 24

/* What a layer has, as far as its arrays go (ag_layer_array_t.needs). */
enum {
    AG_LAYER_QKV = 1 << 0,        /* wk, wv: three projections (else one, wq) */
    AG_LAYER_WO = 1 << 1,         /* an output projection */
    AG_LAYER_NORM = 1 << 2,       /* LayerNorm gains (the options' norm) */
    AG_LAYER_NORM_BIAS = 1 << 3,  /* and its biases (a GPT without biases has none) */
    AG_LAYER_ADDITIVE = 1 << 4,   /* GAT's attention vectors */
    AG_LAYER_GATV2 = 1 << 5,      /* GATv2's vector */
    AG_LAYER_BIAS = 1 << 6,       /* the output's bias (and the sublayer's, the skip's) */
    AG_LAYER_FFN = 1 << 7,        /* a feed-forward sublayer */
    AG_LAYER_QKV_BIAS = 1 << 8,   /* the projections' biases */
    AG_LAYER_SKIP = 1 << 9,       /* a skip projection */
    AG_LAYER_GATE = 1 << 10,      /* its gate */
    AG_LAYER_EDGES = 1 << 11,     /* the edge features' projection */
};

typedef enum { AG_INIT_NORMAL = 0, AG_INIT_ZEROS, AG_INIT_ONES } ag_init_t;

typedef struct {
    const char *name;     /* the field of ag_weights_t, and its file's name */
    size_t offset;        /* offsetof(ag_weights_t, name) */
    unsigned needs;       /* AG_LAYER_* */
    ag_init_t init;
    int decay;
} ag_layer_array_t;

/* Row k of the table (NULL out of range: a loop may run until it). */
const ag_layer_array_t *ag_layer_array_info(int k);
/* Where array k of w lives (NULL for a k out of range). */
float **ag_layer_array(ag_weights_t *w, int k);
/* Whether a layer with these AG_LAYER_* features has array k (0 out of range). */
int ag_layer_has(unsigned features, int k);
/* Array k's shape by w's sizes (the bias's width is the output's: set D_out and
   the rest first); returns its dimensions, 1 to 3 ([0] for a k out of range). */
int ag_layer_array_shape(const ag_weights_t *w, int k, int64_t shape[3]);
/* Its floats, and the fan-in of its initialisation (its last dimension). */
int64_t ag_layer_array_size(const ag_weights_t *w, int k);
int64_t ag_layer_array_fan_in(const ag_weights_t *w, int k);
/* The widest state rounds 1..rounds of these layers hold (D included): what
   X of ag_rounds_run and ag_rounds_forward must hold per row. */
int64_t ag_rounds_widest(const ag_weights_t *layers, int n_layers, int rounds);

/* Gaussian weights, standard deviation 1/sqrt(fan_in) (attention vectors
   1/sqrt(d)), from seed; per_node > 0 gives each of per_node nodes its own
   wq, wk, wv. */
int ag_weights_random(ag_weights_t *w, int64_t D, int64_t H, int64_t d, int64_t per_node,
                      uint64_t seed, ag_error_t *err);
/*
 * Reads dir/wq.npy, wk.npy, wv.npy ([H*d, D], or [N, H*d, D] per node) and
 * wo.npy [D, H*d]; and, when present, ln_weight.npy and ln_bias.npy ([D]),
 * attn_src.npy and attn_dst.npy ([H, d]), attn.npy ([H, d]). D comes from wq's
 * columns, H*d from its rows (which H must divide); every shape is checked.
 */
int ag_weights_load(ag_weights_t *w, const char *dir, int64_t H, ag_error_t *err);
void ag_weights_destroy(ag_weights_t *w);

/* Buffers of one round, kept so that the last round's Q, K, V, M can be read. */
typedef struct {
    int64_t N, HD, D;     /* rows, H*d, model width */
    float *Q, *K, *V, *M; /* [N, H*d] */
    float *Xn;            /* [N, D] what the projections read (LayerNorm output) */
    float *X_prev;        /* [N, D] the states before the round (for callbacks) */
    float *entropy, *max_weight;   /* [N, H] the round's attention figures (figures) */
    float *distance;               /* [N, H] (figures == 2) */
    float *edge_terms;    /* [E, H*d] and [E, H]: the last round's edge-feature terms of its
                             score (layers with wedge), which the round's score points to */
} ag_workspace_t;         /* Xn, X_prev, the figures and the edge terms are made by
                             ag_rounds_run when needed */

int ag_workspace_init(ag_workspace_t *ws, int64_t N, int64_t HD, int64_t D, ag_error_t *err);
void ag_workspace_destroy(ag_workspace_t *ws);

typedef enum { AG_NORM_NONE = 0, AG_NORM_LAYER } ag_norm_t;

/* What a round callback sees, right after round `round` (1-based). */
typedef struct {
    int round;
    const ag_nbhd_t *nb;
    const ag_weights_t *w;        /* the round's layer */
    const ag_score_t *score;      /* the round's score (attention vectors filled in) */
    const float *X, *X_prev;      /* [N, D] after and before the round */
    const ag_workspace_t *ws;     /* Q, K, V, M of the round */
    /* [N, H] per node and head, the entropy (nats) and largest weight of the
       round's attention (NAN without in-edges), from the kernel's own pass;
       NULL unless the options ask for figures */
    const float *entropy, *max_weight;
    const float *distance;        /* [N, H] sum_j a_ij |i - j| when figures is 2, else NULL */
} ag_round_t;

typedef struct {
    const ag_score_t *score;      /* NULL: scaled-dot; attention vectors default to the layer's */
    int no_residual;              /* X <- M Wo^T instead of X + M Wo^T */
    ag_norm_t norm;               /* AG_NORM_LAYER: projections read LayerNorm(X) (pre-norm) */
    float ln_eps;                 /* LayerNorm's epsilon (>= 0; default 1e-5) */
    /* Called after every round: return AG_OK to go on, AG_STOP to end the
       rounds early (ag_rounds_run then returns AG_OK), or an error status to
       fail with it. */
    int (*on_round)(const ag_round_t *round, void *ctx);
    void *ctx;
    int figures;                  /* 1: fill ag_round_t's entropy and max_weight (for
                                     ag_round_figures) in the attention's own pass;
                                     2: its distance too */
    /* Progress within round `round` (1-based): work done and total in messages x
       heads, as ag_attention_opts_t's progress (thread 0, no OpenMP, no igraph). */
    void (*on_progress)(int round, int64_t done, int64_t total, void *ctx);
    /* Dropout while training: ag_rounds_forward and ag_rounds_backward (and the
       MPI layer's) apply it, ag_rounds_run (inference) leaves it out. dropout:
       on what the projections read (LayerNorm's output, or X), per node and
       channel (ag_dropout); attn_dropout: on the attention weights, per
       message and head (ag_score_t.dropout). The masks are hashes of
       (dropout_seed, round, node, channel) and (dropout_seed, round,
       destination, in-edge, head): the same for any thread and process count.
       A trainer gives every step a seed of its own. Each in [0, 1). */
    float dropout, attn_dropout;
    uint64_t dropout_seed;
    /* Dropout on the residual branches while training (a transformer's resid
       dropout): what a layer with a residual adds to X (M Wo^T, before the
       bias; or its heads), and what a feed-forward sublayer adds (with b2),
       per node and channel. In [0, 1). */
    float resid_dropout;
    /* Edge features [E, edge_dim], E the graph's messages in slot order
       (ag_edge_order maps them to the graph's edges), read by layers with wedge
       (and ignored by the others). NULL: none. */
    const float *edge_features;
    int64_t edge_dim;
    /* A graph per round: round r (1-based) reads graphs[r-1], each on the
       graph argument's nodes (a mask per layer: a window in the low layers,
       causal in the top one); NULL: the graph argument for every round.
       Rounds given one pointer share its kernel plan; ag_rounds_forward
       transposes each for the backward. Not with edge features (their rows
       are one graph's messages), nor on several processes. */
    ag_nbhd_t *const *graphs;
    /* The global graph per round, on the same nodes as the round's graph:
       round r's layer with global_heads reads global_graphs[r-1] in those
       heads (required there; ag_rounds_forward transposes it for the
       backward). NULL, or a NULL entry for a round whose layer has none. */
    ag_nbhd_t *const *global_graphs;
    /* Rotary positions (RoFormer's): each row's position [n] (the rows the call
       holds: on several processes, this process's), NULL: none. Queries and
       keys are turned after their projections, in each head the pairs of
       columns (j, j + d/2) by position * rope_base^(-2j/d) (0: base 10000);
       the heads' width must be even. */
    const int64_t *rope_positions;
    float rope_base;
} ag_round_opts_t;

/* The defaults (every field taken as given, 0 means 0): no score (scaled-dot),
   residual, no norm, ln_eps 1e-5, no callbacks, no figures. */
#define AG_ROUND_OPTS_INIT {.ln_eps = 1e-5f}
void ag_round_opts_init(ag_round_opts_t *opts);

/*
 * Runs up to `rounds` message rounds on states X [N, D] in place. Round r uses
 * layers[r-1] (n_layers >= rounds) or layers[0] for all (n_layers == 1):
 *   Xn = LayerNorm(X) or X; Q = Xn Wq^T, K = Xn Wk^T, V = Xn Wv^T;
 *   M = attention(Q, K, V); X <- X + M Wo^T (or M Wo^T without residual).
 * opts may be NULL. ws must be sized [N, H*d, D]; afterwards it holds the last
 * round's buffers. *done (if not NULL) is the number of rounds run. Refuses a
 * NaN or infinity in X (naming row and column); the rounds' own Q, K, V are
 * not checked. Layers of their own shapes (ag_weights_t's second part) run one
 * after another, each reading the width the one before wrote: then X holds
 * ag_rounds_widest floats a row (the last round's output is its first
 * N x ag_layer_width_out), ws the largest H*d and that width.
 */
int ag_rounds_run(const ag_nbhd_t *nb, const ag_weights_t *layers, int n_layers, float *X,
                  int rounds, const ag_round_opts_t *opts, ag_workspace_t *ws, int *done,
                  ag_error_t *err);

/* Convergence figures of a round: from round->entropy and max_weight when the
   round has them (opts->figures), else by scoring the round's edges again
   (ag_attention_stats). Time O(N D + N H), or O(E H d) without them. */
typedef struct {
    double change;                /* ||X - X_prev|| / ||X_prev|| (Frobenius) */
    double entropy;               /* mean attention entropy over nodes with in-edges (nats) */
    double max_weight;            /* largest attention weight of the round */
} ag_round_figures_t;

int ag_round_figures(const ag_round_t *round, ag_round_figures_t *f, ag_error_t *err);

/* LayerNorm of each row of X [N, D] into Y: (x - mean) / sqrt(var + eps) * weight + bias
   (weight, bias [D] or NULL for 1 and 0; var is the biased variance). */
void ag_layer_norm(float *Y, const float *X, int64_t N, int64_t D, const float *weight,
                   const float *bias, float eps);

/*
 * Dropout on features: Y = X times 0 (with probability p) or 1 / (1 - p),
 * element by element, for rows first_row .. first_row+rows-1 of a [*, cols]
 * array (X and Y hold those rows; Y may be X). Whether element (row, col) is
 * kept is a hash of (seed, row, col) (a counter-based generator: base/rng.h),
 * so a process holding some rows draws what one process holding all draws,
 * any thread count draws the same, and the backward is the same call on dY
 * with the same seed. p in [0, 1); p = 0 copies. Fails only for a bad p.
 */
int ag_dropout(float *Y, const float *X, int64_t first_row, int64_t rows, int64_t cols,
               float p, uint64_t seed, ag_error_t *err);

/* Adds sinusoidal positions to X [N, D] (node id = position): column 2k gets
   sin(pos / 10000^(2k/D)), column 2k+1 cos of the same. */
void ag_posenc_sinusoidal(float *X, int64_t N, int64_t D);

/* n standard-normal floats from (seed, stream): the same for the same pair. */
void ag_random_normal(float *x, int64_t n, uint64_t seed, uint64_t stream, float scale);

/*
 * A language model's input: X [n, D] row i = wte[ids[i]] + wpe[pos[i]] (wte
 * [V, D] token embeddings; wpe [T, D] learned positions, or NULL: none, pos
 * then unread). Refuses a token outside 0..V-1 or a position outside 0..T-1,
 * naming the row.
 */
int ag_embed(float *X, const int64_t *ids, const int64_t *pos, int64_t n, const float *wte,
             int64_t V, const float *wpe, int64_t T, int64_t D, ag_error_t *err);
/* Its backward: dwte[v] += the rows of dX whose token is v, dwpe[t] += those
   at position t (each may be NULL), summed in row order within fixed chunks of
   rows and the chunks added in order: bitwise the same for any thread count
   (and on several processes, attngraph/mpi.h's language model). */
int ag_embed_backward(float *dwte, float *dwpe, const float *dX, const int64_t *ids,
                      const int64_t *pos, int64_t n, int64_t V, int64_t T, int64_t D,
                      ag_error_t *err);

/* ---------------------------------------------------------------- models */

/*
 * A model as text (docs/model-file.md): the model-wide settings, one a line
 * (`score additive`, `norm layer`, `dropout 0.6`, ...), and one `layer
 * key=value ...` line per layer. ag_model_spec_parse and ag_model_spec_text
 * are the format's one reader and one writer.
 */
#define AG_MODEL_MAX_LAYERS 64

typedef enum { AG_OUT_LINEAR = 0, AG_OUT_CONCAT, AG_OUT_MEAN } ag_layer_out_t;

/* One `layer` line. */
typedef struct {
    int64_t heads, dim;           /* H, d */
    ag_layer_out_t out;           /* wo (LINEAR), or the heads concatenated or averaged */
    int64_t out_width;            /* LINEAR: wo's rows (0: the layer's input width) */
    int one_projection;           /* keys and values are the queries' projection (GAT) */
    int bias;                     /* a bias on the output (and the sublayer's, the skip's) */
    int residual;                 /* 1, 0, or -1: when the layer keeps the width */
    ag_activation_t act;
    int64_t ffn;                  /* a feed-forward sublayer of width ffn x out (0: none) */
    ag_activation_t ffn_act;      /* its activation (default GELU) */
    int qkv_bias;                 /* biases on the projections */
    int skip;                     /* a skip projection: 0 none, 1 summed, 2 gated (beta) */
    int post_norm;                /* LayerNorms after the sums (with the model's norm) */
    int edges;                    /* reads edge features */
    char graph[256];              /* graph=SPEC: the layer's connectivity, a pattern over the
                                     model's graph ("graph+expander:3"; ag_layer_graphs);
                                     "": the model's graph */
    char global[256];             /* global=SPEC: GraphGPS's global attention, the last
                                     global_heads heads over this pattern over the
                                     model's graph ("expander:3", "complete"); "": none */
    int64_t global_heads;         /* global_heads=G, 1..heads-1 (with global; default
                                     heads/2) */
    int line;                     /* in the text, for messages (0: not from one) */
} ag_layer_spec_t;

/* The model-wide keys, in the order ag_model_spec_text writes them. */
typedef enum {
    AG_KEY_SCORE = 0, AG_KEY_BETA, AG_KEY_SOFTCAP, AG_KEY_SLOPE, AG_KEY_SIGMOID_BIAS,
    AG_KEY_ALIBI, AG_KEY_EDGE_BIAS, AG_KEY_NORM, AG_KEY_POSENC, AG_KEY_SELF_LOOPS,
    AG_KEY_DIRECTED, AG_KEY_UNDIRECTED, AG_KEY_DROPOUT, AG_KEY_ATTN_DROPOUT,
    AG_KEY_RESID_DROPOUT, AG_KEY_READOUT, AG_KEY_ROUNDS, AG_MODEL_KEYS
} ag_model_key_t;

typedef struct {
    ag_score_t score;             /* kind and parameters (no attention vectors) */
    char edge_bias[512];          /* a graph file's edge attribute added to scores, or "" */
    ag_norm_t norm;               /* pre-norm LayerNorm before each layer's projections */
    int posenc;                   /* sinusoidal positions added to the features */
    ag_self_loops_t self_loops;   /* how the graph is shaped before the rounds */
    int directed;                 /* a graph file's edges: 1 directed, 0 undirected, -1 its own */
    int readout;                  /* 1: logits = X Wr^T + br; 0: the last layer writes them */
    float dropout[3];             /* training's: on layer inputs, attention weights, residual
                                     branches (AG_KEY_DROPOUT's order) */
    int line[AG_MODEL_KEYS];      /* the line that gave each key (0: not given; the default) */
    int n_layers;
    ag_layer_spec_t layers[AG_MODEL_MAX_LAYERS];
    int rounds;                   /* 0: one round a layer; R > 0 with one layer: R rounds
                                     of it, its weights shared (`rounds R`) */
} ag_model_spec_t;

/* The defaults: scaled-dot, no norm, no positions, self-loops kept, a linear
   readout, no dropout, no layer. */
void ag_model_spec_init(ag_model_spec_t *spec);
/* A layer line's defaults (no heads or width yet). */
void ag_layer_spec_init(ag_layer_spec_t *L);
/* Parses a model's text (path names it in messages: "FILE line N: ..."); a
   key given twice, an unknown key or value and a text without a layer are
   refused. */
int ag_model_spec_parse(ag_model_spec_t *spec, const char *text, const char *path,
                        ag_error_t *err);
int ag_model_spec_read(ag_model_spec_t *spec, const char *path, ag_error_t *err);
/* model.args, the line of options `train --save` writes for a model trained
   without a model file ("--heads 2 --rounds 3 --score additive --norm layer
   --self-loops on"): its one reader. The spec has one layer of the heads and
   residual given (its width, dim, is the arrays' to tell: 0) run `rounds`
   times, and the model-wide keys given (line[k] = 1). Any other word, a value
   out of range, an option given twice (or both directions) and a second line
   are refused, the spec zeroed. ag_model_args_read reads DIR/model.args. */
int ag_model_args_parse(ag_model_spec_t *spec, const char *text, const char *path,
                        ag_error_t *err);
int ag_model_args_read(ag_model_spec_t *spec, const char *dir, ag_error_t *err);
/* What the spec and the data decide together, from input width D and the
   labels' classes (each <= 0: not known yet; then only the spec's own):
   norm=post needs the model's norm; a residual needs the width kept; readout
   none needs the last layer to write the classes. */
int ag_model_spec_check(const ag_model_spec_t *spec, const char *path, int64_t D,
                        int64_t classes, ag_error_t *err);
/* The text of spec into buf [cap] (truncated, NUL-terminated); returns its
   length as snprintf does. A value is the float32 the model uses (%.9g, or
   the fewest digits for a dropout); defaults are left out. */
size_t ag_model_spec_text(char *buf, size_t cap, const ag_model_spec_t *spec);
const char *ag_model_key_name(ag_model_key_t key);

/* A layer line's output width from input width D; its AG_LAYER_* features
   under the model's score and norm; and w's sizes and flags (no arrays) from
   it, the input width D and the edge features' width. */
int64_t ag_layer_spec_width_out(const ag_layer_spec_t *L, int64_t D);
unsigned ag_layer_spec_features(const ag_layer_spec_t *L, ag_score_kind_t kind, ag_norm_t norm);
void ag_layer_spec_shape(ag_weights_t *w, const ag_layer_spec_t *L, int64_t D, int64_t edge_dim);

/*
 * A connectivity per layer over the graph nb a model runs on: graphs[l] (of L)
 * is specs[l] compiled over nb (its words graph and hops:K read nb's edges;
 * NULL or "": nb itself), with self applied. Layers that append virtual nodes
 * (virtual:V) set *n_virtual to the largest V: every graph has nb's nodes plus
 * them, a layer appending fewer leaving the rest isolated. Layers of one spec
 * share a graph; ag_layer_graphs_free frees them (each once). The graphs are
 * what ag_round_opts_t.graphs takes (round r reads graphs[r-1]).
 */
int ag_layer_graphs(ag_nbhd_t **graphs, int L, const ag_nbhd_t *nb, const char *const *specs,
                    ag_self_loops_t self, int64_t *n_virtual, ag_error_t *err);
void ag_layer_graphs_free(ag_nbhd_t **graphs, int L);
/* 1 if any layer of spec has a connectivity of its own (graph=) or global
   heads (global=): ag_model_run then compiles a graph a round. */
int ag_model_spec_layer_graphs(const ag_model_spec_t *spec);

/* Names of score kinds ("scaled-dot", "additive", ...) and self-loop modes
   ("keep", "on", "off", "replace"), and back (0, or -1 for another name). */
const char *ag_score_kind_name(ag_score_kind_t kind);
int ag_score_kind_parse(const char *name, ag_score_kind_t *kind);
const char *ag_self_loops_name(ag_self_loops_t self);
int ag_self_loops_parse(const char *name, ag_self_loops_t *self);

/*
 * A model as one object: its spec, its layers' weights and a linear readout.
 * Three calls run a model `attngraph train --model FILE --save DIR` wrote:
 *
 *     ag_model_t m;
 *     ag_model_load(&m, "DIR", &err);                  // DIR/model.txt and its arrays
 *     ag_model_predict(&m, &nb, X, NULL, classes, &err);   // X [N, m.D] -> [N]
 *     ag_model_destroy(&m);
 */
typedef struct {
    ag_model_spec_t spec;
    int64_t D;                    /* the features' width */
    int64_t edge_dim;             /* the edge features' width (layers with edges=yes), or 0 */
    ag_weights_t *layers;         /* [spec.n_layers], one a round */
    int64_t C;                    /* the readout's classes (0: none; the states are the output) */
    float *wr, *br;               /* [C, ag_model_width_out], [C] */
} ag_model_t;

/* A fresh model of spec for features of width D (and edge features of width
   edge_dim): each layer's arrays drawn from seed as `train --model` draws them
   (ag_layer_array_t's initialisers), and with classes > 0 and a linear readout
   its Wr (Gaussian, sd 1/sqrt(width)) and br (zeros). */
int ag_model_init(ag_model_t *m, const ag_model_spec_t *spec, int64_t D, int64_t classes,
                  int64_t edge_dim, uint64_t seed, ag_error_t *err);
/* The model of folder dir: dir/model.txt, its layers' arrays (dir/round-k/, or
   dir itself for one layer; every shape checked against the spec) and
   readout.npy, readout_bias.npy with a linear readout. A folder `train` wrote
   without a model file (dir/model.args) loads as one layer of its heads run
   spec.rounds times (or a layer a round from dir/round-k/), each layer as
   ag_weights_load reads it, with a readout when it has readout.npy. */
int ag_model_load(ag_model_t *m, const char *dir, ag_error_t *err);
/* What ag_model_load_ex reads beside ag_model_load's folders; zeroed, nothing. */
typedef struct {
    int64_t heads;   /* > 0: a folder of arrays alone (no model.txt, no model.args) loads
                        as one layer of this many heads (or a layer a round from round-k/);
                        with ln_weight.npy, pre-norm */
    int no_readout;  /* the layers alone: readout.npy is not read (m.C 0) */
} ag_model_load_opts_t;
/* ag_model_load, and also the folders of arrays alone (with opts->heads).
   A folder without model.txt (model.args, or arrays alone) reads each layer
   as ag_weights_load reads it: shared or per-node ([N, H*d, D]) arrays, the
   optional ones where present; model.args' --rounds must match its
   round-k/ folders. opts NULL: ag_model_load. */
int ag_model_load_ex(ag_model_t *m, const char *dir, const ag_model_load_opts_t *opts,
                     ag_error_t *err);
/* The arrays of dir for a spec given here (the tool's: its options may add to
   the file's), features of width D. */
int ag_model_load_arrays(ag_model_t *m, const ag_model_spec_t *spec, const char *dir, int64_t D,
                         int64_t edge_dim, ag_error_t *err);
/* Writes m into folder dir (made if missing, its parent must exist):
   dir/model.txt (ag_model_spec_text), each layer's arrays (in dir/round-k/
   for more than one layer, else in dir) and readout.npy, readout_bias.npy
   with a linear readout: what ag_model_load reads, and `attngraph run
   --weights dir` runs. Whole or not at all: every file goes to a temporary
   first and all are renamed into place once all are written; a failure
   leaves dir as it was. */
int ag_model_save(const ag_model_t *m, const char *dir, ag_error_t *err);
void ag_model_destroy(ag_model_t *m);
/* The width the last layer writes. */
int64_t ag_model_width_out(const ag_model_t *m);
/*
 * Runs the model on nb from features X [N, D]: the graph with the spec's
 * self-loops (made on a copy: nb stays as it is), sinusoidal positions when
 * the spec adds them, one round a layer (or `rounds R` of its one layer), then
 * the readout. out: [N, C]
 * logits, or without a readout the last states [N, ag_model_width_out].
 * edge_features: for layers with edges=yes, [E, edge_dim] in the slot order
 * of the graph with the model's self-loops (ag_nbhd_self_loops(nb,
 * m->spec.self_loops) makes it), else NULL. A score with an edge-bias
 * attribute is refused (nb carries no attributes; ag_model_run_ex takes its
 * values).
 */
int ag_model_run(const ag_model_t *m, const ag_nbhd_t *nb, const float *X,
                 const float *edge_features, float *out, ag_error_t *err);
/* The caller's part of ag_model_run_ex: what it sees of each round and what it
   keeps after. Zeroed (or NULL): ag_model_run. */
typedef struct {
    /* as ag_round_opts_t's: called after each round (AG_STOP ends the run
       early, the states then the last round's), with its figures */
    int (*on_round)(const ag_round_t *round, void *ctx);
    void (*on_progress)(int round, int64_t done, int64_t total, void *ctx);
    void *ctx;
    int figures;
    /* the score's per-edge bias [E] in nb's slot order: what a spec with an
       edge-bias attribute reads (nb carries no attributes), else NULL; refused
       with the spec's self-loops or a graph a layer (other messages) */
    const float *edge_bias;
    /* non-NULL: filled with the rounds' workspace (the last round's Q, K, V,
       M, ...; N + the layers' virtual nodes rows), destroyed by the caller
       with ag_workspace_destroy; zeroed at the start, so a failed run leaves
       nothing to destroy. NULL: freed inside */
    ag_workspace_t *ws;
    int *done;   /* the rounds run, or NULL */
} ag_model_run_opts_t;
/* ag_model_run with the caller's hooks on each round (the tool's run reports
   and --until run through it). out may be X (X is read first). */
int ag_model_run_ex(const ag_model_t *m, const ag_nbhd_t *nb, const float *X,
                    const float *edge_features, const ag_model_run_opts_t *opts, float *out,
                    ag_error_t *err);
/* The class of each node [N]: the argmax of ag_model_run's logits (summed in
   double, as ag_readout_predict). */
int ag_model_predict(const ag_model_t *m, const ag_nbhd_t *nb, const float *X,
                     const float *edge_features, int64_t *pred, ag_error_t *err);
/* The argmax over C classes of each row of X [N, D]: logits br + X Wr^T in
   double (Wr NULL: the first C columns of X are the logits; br NULL: 0). */
void ag_readout_predict(const float *X, int64_t N, int64_t D, const float *Wr, const float *br,
                        int64_t C, int64_t *pred);

AG_END_DECLS

#endif /* ATTNGRAPH_MODEL_H */
