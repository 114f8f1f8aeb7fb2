/*
 * attngraph — attention as message passing on graphs: the core.
 *
 * Everything that works on arrays (CSR, patterns, attention, rounds, gradients,
 * training, .npy) and needs no igraph header; attngraph/igraph.h adds graph
 * files. A program that only has CSR arrays includes this header alone.
 *
 * Conventions (see README.md, "Conventions"):
 *   - Edge u -> v: v receives from u (v's query meets u's key; u's value flows
 *     to v). Undirected edges count in both directions; an undirected
 *     self-loop is one message. Each multi-edge is its own message.
 *   - N nodes, E messages, H heads of width d, model width D.
 *   - Q, K, V and messages are row-major float32 [N, H*d]; head h is columns
 *     h*d .. (h+1)*d-1.
 *   - Weight matrices are [out, in] like torch.nn.Linear.weight: y = x W^T.
 *
 * Errors: every fallible function returns AG_OK (0) or an ag_status_t and,
 * when err is not NULL, fills it with one line naming the file, the value and
 * what was expected. The library never prints, never exits and never lets
 * igraph abort: it swaps in its own igraph error handler for the duration of
 * each igraph call and restores the host's afterwards.
 *
 * Initialisation: a function that initialises an out-parameter (a struct,
 * or a pointer it allocates) leaves it zeroed (NULL pointers, zero sizes)
 * when it fails, so calling its _destroy / free on it is always safe,
 * whether the call succeeded or not. The one exception is an igraph_t, which
 * is igraph's: on failure it is left uninitialised and must not be destroyed.
 *
 * Threads: kernels and dense products run with OpenMP (ag_set_threads
 * chooses how many); results are bitwise identical for any thread count. igraph is not thread-safe: call the functions that take an igraph_t
 * from one thread at a time. Otherwise several host threads may call the
 * library at once on data of their own, with the same bits as one after the
 * other.
 *
 * Process-wide state, all of it (everything else travels in the arguments):
 *   - the memory budget (ag_set_memory_budget): one number, set atomically;
 *   - the kernels' and products' instruction set: the best the CPU runs, or
 *     AG_SIMD's, read once at the first kernel call (ag_simd_isa). Each attention call
 *     (and each run of rounds, and each training step) plans its kernel
 *     first: the plan fixes the instruction set, the calling thread's OpenMP
 *     count and the kernel's scratch, and the computation keeps to them;
 *   - who chose the thread count, and the team the library's parallel
 *     regions run on now. One pool of threads does the work: the library's
 *     OpenMP team, the dense products included (the library's own, no BLAS
 *     thread pool beside it). By default (no OMP_NUM_THREADS, no ag_set_threads
 *     count, the calling thread's OpenMP count as it started) the library
 *     shares the machine: while its calling thread waits for a core (the
 *     kernel's run delay, read every 20 ms) and its regions are short, the
 *     team shrinks to the cores other programs leave, and the full team is
 *     tried again after 0.2-2 s. The results are the same bits for any team.
 *     A count the user chose (OMP_NUM_THREADS, ag_set_threads(n > 0), or
 *     AG_THREADS_FIXED=1 in the environment) is kept as it is;
 *   - how idle threads wait is libgomp's, read once when it loads: its
 *     default spins 300,000 pauses (5-15 ms) after each region, then sleeps.
 *     The library does not change it (it cannot, once libgomp has loaded);
 *     the attngraph tools start with GOMP_SPINCOUNT=10000 unless
 *     OMP_WAIT_POLICY or GOMP_SPINCOUNT is set. A program that runs beside
 *     others can start with GOMP_SPINCOUNT=10000 too (docs/performance.md);
 *   - igraph's error handler, swapped in around each igraph call.
 * The library sets no umask, signal handler, locale or environment variable.
 *
 * Bits: the dense products are the library's own (no BLAS): every entry one
 * chain of multiply-adds in a fixed order, fused on the AVX2 and AVX-512
 * variants. So every result is the same bits for any thread count, process
 * count and program that loads the library, on one instruction-set variant
 * (ag_simd_isa); the products are the same bits on every CPU with FMA, the
 * attention kernels of two variants agree to rounding.
 */
#ifndef ATTNGRAPH_CORE_H
#define ATTNGRAPH_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The shared library exports what this header declares and nothing else. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define AG_VERSION "0.1.0"
/* The version of the library loaded: its build's AG_VERSION (a program or a
   binding built against other headers can tell; Python refuses to load one
   other than its own). */
const char *ag_version(void);

/* ---------------------------------------------------------------- errors */

typedef enum {
    AG_OK = 0,
    AG_ENOMEM,   /* out of memory */
    AG_EIO,      /* a file could not be opened, read or written */
    AG_EFORMAT,  /* a file's contents are malformed */
    AG_EINVAL,   /* a value is out of range or shapes disagree */
    AG_ELIMIT,   /* the input asks for more than the configured limit */
    AG_EIGRAPH   /* igraph reported an error */
} ag_status_t;

typedef struct {
    ag_status_t status;
    char msg[512];
} ag_error_t;

/* A round callback's request to stop early (see ag_round_opts_t). */
#define AG_STOP (-1)

/* Name of a status, e.g. "bad format". */
const char *ag_status_str(ag_status_t status);

/* ---------------------------------------------------------------- machine */

/*
 * The memory budget: every array the library allocates is checked against it
 * before the allocation is tried, and one that would need more is refused:
 * the call returns AG_ELIMIT (err or not), with a message naming what it was
 * for, the bytes it needs and the budget. 0 (the default) means the machine's available memory at the
 * time (MemAvailable). ag_set_memory_budget returns the previous setting;
 * ag_memory_budget the budget in force now, in bytes.
 */
int64_t ag_set_memory_budget(int64_t bytes);
int64_t ag_memory_budget(void);

/*
 * The vector instruction set the kernels run: "avx512", "avx2" or "base" (the
 * x86-64 baseline). The best this CPU has, unless the environment's AG_SIMD
 * names a lower one (base, avx2 or avx512), read at the first kernel call:
 * every variant can be measured on one machine. An AG_SIMD the CPU cannot run,
 * or that names no variant, is not used; ag_simd_env_check says why (the CLI
 * and Python refuse it).
 */
const char *ag_simd_isa(void);
int ag_simd_env_check(ag_error_t *err);

/* Sets the threads of the kernels and products (OpenMP): a count
   (kept as it is), or 0 or less: the default, the OpenMP count when the
   library loaded (OMP_NUM_THREADS's, else every core), fewer while other
   programs keep the cores busy. Returns the most threads a call uses (1
   without OpenMP). */
int ag_set_threads(int threads);

/* ---------------------------------------------------------------- .npy */

typedef enum {
    AG_DTYPE_F32, AG_DTYPE_F64,
    AG_DTYPE_I8, AG_DTYPE_I16, AG_DTYPE_I32, AG_DTYPE_I64,
    AG_DTYPE_U8, AG_DTYPE_U16, AG_DTYPE_U32, AG_DTYPE_U64,
    AG_DTYPE_BOOL
} ag_dtype_t;

#define AG_NPY_MAX_DIMS 4

/* A 2-D float32 matrix, row-major. */
typedef struct {
    int64_t rows, cols;
    float *data;          /* [rows, cols], owned; free with ag_matrix_destroy */
} ag_matrix_t;

/* A float32 array of 1 to AG_NPY_MAX_DIMS dimensions, row-major. */
typedef struct {
    int ndim;
    int64_t shape[AG_NPY_MAX_DIMS];
    float *data;          /* owned; free with ag_array_destroy */
} ag_array_t;

/* Reads a .npy array of any rank with the conversions and checks of
   ag_matrix_read_npy (a non-finite value is named by its index). */
int ag_array_read_npy(ag_array_t *a, const char *path, ag_error_t *err);
void ag_array_destroy(ag_array_t *a);

/*
 * Reads a 2-D .npy file into *m (uninitialised; initialised on success).
 * Accepts float32/float64 and integer/bool dtypes of either byte order, in C or
 * Fortran order; values are converted to float32 in row-major layout. A value
 * that does not fit float32 (|x| > FLT_MAX), NaN or Inf is refused, naming its
 * row and column. Anything else (other dtypes, other ranks, truncated data) is
 * refused with a message saying what was found. The path "-" reads standard
 * input (in one pass; so do ag_array_read_npy and ag_index_read_npy).
 */
int ag_matrix_read_npy(ag_matrix_t *m, const char *path, ag_error_t *err);

/*
 * Reads a 1-D integer .npy file (any integer dtype, either byte order) into
 * *values, a malloc'ed int64_t array of *n elements (free() it).
 */
int ag_index_read_npy(int64_t **values, int64_t *n, const char *path, ag_error_t *err);

/* Writes data [rows, cols] as a little-endian float32 C-order .npy file. */
int ag_npy_write_f32(const char *path, const float *data, int64_t rows, int64_t cols,
                     ag_error_t *err);
/* The same for an array of ndim (1..AG_NPY_MAX_DIMS) dimensions. */
int ag_npy_write_f32_nd(const char *path, const float *data, int ndim, const int64_t *shape,
                        ag_error_t *err);
/* Writes values [n] as a 1-D little-endian int64 .npy file (ag_index_read_npy reads it). */
int ag_npy_write_i64(const char *path, const int64_t *values, int64_t n, ag_error_t *err);

/* Initialises m (uninitialised) as a zero-filled matrix [rows, cols]. */
int ag_matrix_init(ag_matrix_t *m, int64_t rows, int64_t cols, ag_error_t *err);
void ag_matrix_destroy(ag_matrix_t *m);

/* Fails (naming what, the row and the column) unless every value is finite. */
int ag_check_finite(const char *what, const float *data, int64_t rows, int64_t cols,
                    ag_error_t *err);

/* ---------------------------------------------------------------- labels */

/* Node labels: one UTF-8 string per node. */
typedef struct {
    int64_t n;
    char **str;           /* [n], or NULL: node i is labelled by its number (no strings
                             made: a pattern or CSR of 10 million nodes prints 20) */
} ag_labels_t;

/* Room for a node number as text (ag_label's buf). */
#define AG_LABEL_NUMBER_SIZE 24
/* Node i's label: labels->str[i], or i written into buf [size] when the labels
   are numbers (str NULL). */
const char *ag_label(const ag_labels_t *labels, int64_t i, char *buf, size_t size);

/* Labels "0", "1", ... "n-1". */
int ag_labels_numbered(ag_labels_t *labels, int64_t n, ag_error_t *err);
void ag_labels_destroy(ag_labels_t *labels);

/* ------------------------------------------------ compiled neighbourhoods */

/*
 * The kernel's view of the graph: for each destination i, its in-edges as
 * runs of consecutive sources, sources ascending (a repeated source of a
 * multi-edge starts a new run). Edge slots are numbered destination by
 * destination in that order: slot s of destination i lies in
 * edge_ptr[i] .. edge_ptr[i+1]-1.
 */
typedef struct {
    int64_t n_nodes;      /* N */
    int64_t n_edges;      /* E: messages (slots) */
    int64_t n_runs;       /* R */
    int64_t *edge_ptr;    /* [N+1] first slot of each destination */
    int64_t *run_ptr;     /* [N+1] first run of each destination */
    int64_t *run_src;     /* [R]   first source of each run */
    int64_t *run_len;     /* [R]   sources in each run (>= 1) */
    int64_t *edge_id;     /* [E]   igraph edge id of each slot (-1: a self-loop added by
                                   ag_nbhd_self_loops; for a CSR that ag_nbhd_self_loops
                                   changed, the slot's index in the CSR given), or NULL */
    /* The transpose, for the backward (ag_nbhd_transpose; NULL until then): the
       out-edges of each source j as runs of consecutive destinations, in
       out_ptr[j] .. out_ptr[j+1]-1. A source's runs come in layers: layer 0
       holds its first message to each destination, ascending; layer k >= 1 its
       (k+1)-th message to a destination of a multi-edge. */
    int64_t n_out_runs;   /* R' */
    int64_t *out_ptr;     /* [N+1] first out-run of each source */
    int64_t *out_dst;     /* [R']  first destination of each out-run */
    int64_t *out_len;     /* [R']  destinations in each out-run (>= 1) */
    int64_t *out_nth;     /* [R']  its layer: the message j -> i is the (nth+1)-th from j to i */
    int64_t *run_slot;    /* [R]   first slot of each (in-)run */
} ag_nbhd_t;

/*
 * Builds nb from a CSR of in-neighbours: indptr [N+1] (non-decreasing, from 0
 * to E), indices [E] (sources in 0..N-1, ascending within each destination).
 * Validated; edge_id is NULL.
 */
int ag_nbhd_from_csr(ag_nbhd_t *nb, int64_t n_nodes, const int64_t *indptr,
                     const int64_t *indices, ag_error_t *err);

void ag_nbhd_destroy(ag_nbhd_t *nb);

typedef enum {
    AG_SELF_KEEP = 0,     /* self edges as the pattern or graph says */
    AG_SELF_ON,           /* existing self edges kept; one added where a node has none */
    AG_SELF_OFF,          /* no node attends to itself */
    AG_SELF_REPLACE       /* every self edge removed, then one added per node (PyG) */
} ag_self_loops_t;

/*
 * Applies self to compiled neighbourhoods nb (initialised), in place, for
 * graph files and CSR (patterns take it in ag_nbhd_from_pattern):
 * AG_SELF_KEEP does nothing. AG_SELF_OFF removes every self edge.
 * AG_SELF_ON gives every node that has no self edge one message from itself
 * and keeps the self edges there are (two loops on a node stay two messages):
 * PyG's add_self_loops only on a graph without self-loops. AG_SELF_REPLACE
 * removes every self edge and adds exactly one per node: PyG's
 * remove_self_loops then add_self_loops, what GATConv, GATv2Conv and
 * TransformerConv do with add_self_loops=True. An added loop's slot has
 * edge_id -1 (it is no igraph edge) and lies in its ascending place among
 * the node's sources (the kernels read sources ascending); ag_edge_order puts
 * the added loops after every other edge, by node, as PyG appends them. Runs
 * are rebuilt; on failure nb is unchanged; an unknown self is AG_EINVAL.
 * Without edge ids (CSR), ON, OFF and REPLACE give nb edge ids: each kept
 * slot's index in the CSR given, so ag_edge_order keeps the CSR's edge order
 * with the added loops last. Time and memory O(N + E).
 */
int ag_nbhd_self_loops(ag_nbhd_t *nb, ag_self_loops_t self, ag_error_t *err);

/* Writes the source of every slot of destinations lo..hi-1 into src
   [edge_ptr[hi] - edge_ptr[lo]]. */
void ag_nbhd_sources(const ag_nbhd_t *nb, int64_t lo, int64_t hi, int64_t *src);

/* ---------------------------------------------------------------- patterns */

/*
 * A parsed connectivity pattern, e.g. "causal", "window:3", "docs:5,3&window:2",
 * "causal&!strided:4+global:1" (docs/patterns.md defines every atom).
 * i is the destination (query), j the source (key).
 */
typedef struct ag_pattern ag_pattern_t;

/* Parses spec into *pattern (free with ag_pattern_free). Errors name the
   offending part of the spec. */
int ag_pattern_parse(ag_pattern_t **pattern, const char *spec, ag_error_t *err);
void ag_pattern_free(ag_pattern_t *pattern);
const char *ag_pattern_spec(const ag_pattern_t *pattern);
/* The node count the pattern implies (blocks, docs, cross, grid, axial), or 0. */
int64_t ag_pattern_size(const ag_pattern_t *pattern);

/*
 * Compiles the pattern on N nodes straight into runs (nb uninitialised; its
 * edge_id is NULL: edge k is slot k). No igraph edge is made: memory is
 * O(N + runs), so causal on 65,536 nodes (2.1e9 edges) takes 65,536 runs.
 * Time O(N + runs) for interval atoms; random and bigbird sample per node.
 * self as in ag_nbhd_self_loops; a pattern gives each destination a set of
 * sources (never a source twice), so AG_SELF_ON and AG_SELF_REPLACE both
 * give every node exactly one self edge, in its slot like the pattern's own
 * (edge_id stays NULL: no slot is marked added).
 */
int ag_nbhd_from_pattern(ag_nbhd_t *nb, const ag_pattern_t *pattern, int64_t N,
                         ag_self_loops_t self, ag_error_t *err);

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
    int64_t edge_id;      /* igraph edge id (-1: a self-loop added by ag_nbhd_self_loops) */
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
} ag_weights_t;

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
/* Where array k of w lives (k in range). */
float **ag_layer_array(ag_weights_t *w, int k);
/* Whether a layer with these AG_LAYER_* features has array k. */
int ag_layer_has(unsigned features, int k);
/* Array k's shape by w's sizes (the bias's width is the output's: set D_out and
   the rest first); returns its dimensions, 1 to 3. */
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
    int line;                     /* in the text, for messages (0: not from one) */
} ag_layer_spec_t;

/* The model-wide keys, in the order ag_model_spec_text writes them. */
typedef enum {
    AG_KEY_SCORE = 0, AG_KEY_BETA, AG_KEY_SOFTCAP, AG_KEY_SLOPE, AG_KEY_SIGMOID_BIAS,
    AG_KEY_ALIBI, AG_KEY_EDGE_BIAS, AG_KEY_NORM, AG_KEY_POSENC, AG_KEY_SELF_LOOPS,
    AG_KEY_DIRECTED, AG_KEY_UNDIRECTED, AG_KEY_DROPOUT, AG_KEY_ATTN_DROPOUT,
    AG_KEY_RESID_DROPOUT, AG_KEY_READOUT, AG_MODEL_KEYS
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
   readout.npy, readout_bias.npy with a linear readout. */
int ag_model_load(ag_model_t *m, const char *dir, ag_error_t *err);
/* The arrays of dir for a spec given here (the tool's: its options may add to
   the file's), features of width D. */
int ag_model_load_arrays(ag_model_t *m, const ag_model_spec_t *spec, const char *dir, int64_t D,
                         int64_t edge_dim, ag_error_t *err);
void ag_model_destroy(ag_model_t *m);
/* The width the last layer writes. */
int64_t ag_model_width_out(const ag_model_t *m);
/*
 * Runs the model on nb from features X [N, D]: the graph with the spec's
 * self-loops (made on a copy: nb stays as it is), sinusoidal positions when
 * the spec adds them, one round a layer, then the readout. out: [N, C]
 * logits, or without a readout the last states [N, ag_model_width_out].
 * edge_features: for layers with edges=yes, [E, edge_dim] in the slot order
 * of the graph with the model's self-loops (ag_nbhd_self_loops(nb,
 * m->spec.self_loops) makes it), else NULL. A score with an edge-bias
 * attribute is refused (nb carries no attributes).
 */
int ag_model_run(const ag_model_t *m, ag_nbhd_t *nb, const float *X, const float *edge_features,
                 float *out, ag_error_t *err);
/* The class of each node [N]: the argmax of ag_model_run's logits (summed in
   double, as ag_readout_predict). */
int ag_model_predict(const ag_model_t *m, ag_nbhd_t *nb, const float *X,
                     const float *edge_features, int64_t *pred, ag_error_t *err);
/* The argmax over C classes of each row of X [N, D]: logits br + X Wr^T in
   double (Wr NULL: the first C columns of X are the logits; br NULL: 0). */
void ag_readout_predict(const float *X, int64_t N, int64_t D, const float *Wr, const float *br,
                        int64_t C, int64_t *pred);

/* ---------------------------------------------------------------- training */

/*
 * Zeroed gradients g shaped like w: wq, wk, wv, wo always; ln_weight and
 * ln_bias when w has them or layer_norm is set; each attention vector w has.
 * g->D, H, d, per_node are w's. Free with ag_weights_destroy.
 */
int ag_weights_grads_init(ag_weights_t *g, const ag_weights_t *w, int layer_norm,
                          ag_error_t *err);

/*
 * With layer_norm set, gives w the LayerNorm parameters it lacks (ln_weight
 * all 1, ln_bias all 0), so that training can learn them; does nothing else.
 */
int ag_weights_add_layer_norm(ag_weights_t *w, ag_error_t *err);

/* What a training forward keeps for its backward (opaque). */
typedef struct ag_tape ag_tape_t;

/*
 * ag_rounds_run for training: runs `rounds` rounds on X [N, D] in place (opts'
 * score, residual and norm; on_round, figures and progress are ignored) and
 * keeps, per round, the activations the backward needs in *tape (made here;
 * free with ag_tape_free; a trainer's loop calls ag_rounds_forward_reuse
 * instead): the round's input X [N, D] and Q, K, V, M [N, H*d]
 * and the log-sum-exp [N, H] (LayerNorm's output is recomputed). That is
 * (D + 4 H d + H) x 4 bytes per node and round (ag_tape_bytes; a layer's
 * activation keeps its input too, a feed-forward sublayer its input and
 * W1's output: out, or out + F, more), plus nb's
 * transpose; the backward adds (3 D + 4 H d) x 4 bytes per node whatever the
 * rounds, kept on the tape after it (causal 65,536 nodes, D = d = 64: a tape
 * of 84 MB a round, 117 MB more for the backward). Projections are blocked so that every result is
 * bitwise the same for any thread count.
 * layers, nb and opts must stay alive and unchanged until the backward.
 */
int ag_rounds_forward(ag_nbhd_t *nb, const ag_weights_t *layers, int n_layers, float *X,
                      int rounds, const ag_round_opts_t *opts, ag_tape_t **tape,
                      ag_error_t *err);
/*
 * ag_rounds_forward that uses a tape again: *tape must be NULL or the tape of
 * an earlier call. Made on the same graph (alive and unchanged since; a graph
 * rebuilt needs a new tape) for layers of the same shapes, rounds and norm, it
 * is used again (the layers' values, dropout and its seed may differ: a
 * training step): its memory, its scratch, the backward's buffers and the
 * kernels' plans are kept, so a step after the first allocates none of them
 * and faults in no new pages. Otherwise it is freed and a new one made. On
 * failure *tape is NULL (the tape freed). The results are ag_rounds_forward's,
 * bit for bit.
 */
int ag_rounds_forward_reuse(ag_nbhd_t *nb, const ag_weights_t *layers, int n_layers, float *X,
                            int rounds, const ag_round_opts_t *opts, ag_tape_t **tape,
                            ag_error_t *err);

/* Bytes a tape of `rounds` rounds on N nodes takes (ag_rounds_forward's). */
int64_t ag_tape_bytes(int64_t N, int64_t D, int64_t H, int64_t d, int rounds);

/*
 * The backward of ag_rounds_forward: given dY = dL/dX_R [N, the last round's
 * width], writes dX0 = dL/dX [N, D] (the features; NULL: not wanted, and the
 * first round skips that product) and the weights' gradients
 * into grads (n_layers of them, from ag_weights_grads_init: overwritten;
 * shared layers get the sum over rounds). A gradient array that is NULL in
 * grads is skipped. Bitwise the same for any thread count.
 */
int ag_rounds_backward(ag_tape_t *tape, const float *dY, float *dX0, ag_weights_t *grads,
                       ag_error_t *err);

void ag_tape_free(ag_tape_t *tape);

/*
 * Mean squared error over the nodes of mask (NULL: all): L = sum over masked
 * rows i and columns c of (X_ic - Y_ic)^2 / (masked rows x D). dX [N, D]
 * (or NULL) gets dL/dX (0 on unmasked rows). Refuses an empty mask.
 */
int ag_loss_mse(const float *X, const float *Y, int64_t N, int64_t D, const uint8_t *mask,
                double *loss, float *dX, ag_error_t *err);

/*
 * Cross-entropy over C classes through a linear readout: logits = X Wr^T + br
 * (Wr [C, D], br [C]; Wr NULL: the logits are X + br, D == C, a model whose
 * last layer writes the classes); L = mean over masked nodes with a label (labels[i] in
 * 0..C-1; -1: unlabelled, skipped) of -ln softmax(logits_i)[labels[i]].
 * dX [N, D], dWr [C, D], dbr [C] (each may be NULL) get the gradients;
 * *correct (may be NULL) the masked labelled nodes whose largest logit is their
 * label; *counted how many there were. pred (may be NULL) [N] gets every
 * node's argmax class. Refuses a label >= C or < -1.
 */
int ag_loss_cross_entropy(const float *X, int64_t N, int64_t D, const float *Wr,
                          const float *br, int64_t C, const int64_t *labels,
                          const uint8_t *mask, double *loss, float *dX, float *dWr,
                          float *dbr, int64_t *correct, int64_t *counted, int64_t *pred,
                          ag_error_t *err);

/* ---------------------------------------------------------------- language models */

/*
 * A GPT (nanoGPT's): token embeddings wte [V, D] and learned positions wpe
 * [T, D]; L blocks, each a pre-LayerNorm causal self-attention layer (H heads
 * of D/H, wq wk wv [D, D], output wo [D, D], a residual) and a pre-LayerNorm
 * feed-forward sublayer (w1 [4D, D], GELU, w2 [D, 4D], a residual): layers of
 * ag_weights_t run by the rounds under the options' LayerNorm; a final
 * LayerNorm lnf; the head tied to wte (logits = LN(X) wte^T). With bias, every
 * linear map and LayerNorm has its bias (nanoGPT's bias=True); without, none.
 * The sequences' graph is the caller's: B sequences of T tokens as one graph
 * (the pattern docs:T,T,... or any pattern within each, such as
 * docs:T,T&window:8), so a batch is one call of the kernels.
 */
typedef struct {
    int64_t V, T, D, L, H;       /* vocabulary, block size, width, layers, heads */
    int bias;
    float *wte, *wpe;            /* [V, D], [T, D] */
    ag_weights_t *layers;        /* [L] */
    float *lnf_weight, *lnf_bias;   /* [D], [D] (bias: NULL without) */
} ag_lm_t;

/* GPT-2's initialisation from seed: every matrix and embedding normal(0, 0.02),
   the residual branches' output projections (wo, w2) 0.02/sqrt(2L); biases 0,
   LayerNorm 1. D must be a multiple of H. */
int ag_lm_init(ag_lm_t *m, int64_t V, int64_t T, int64_t D, int64_t L, int64_t H, int bias,
               uint64_t seed, ag_error_t *err);
/* Zeroed arrays shaped like m's (a model's gradients). */
int ag_lm_grads_init(ag_lm_t *g, const ag_lm_t *m, ag_error_t *err);
void ag_lm_destroy(ag_lm_t *m);

/* Training-time options of ag_lm_loss: dropout p (nanoGPT's: on the embeddings'
   sum, the attention weights and both residual branches; 0: none), its masks
   hashed from seed (give each step its own). */
typedef struct {
    float dropout;
    uint64_t seed;
} ag_lm_opts_t;

/*
 * The mean next-token cross-entropy of B*N tokens: ids [n] (n = nb's nodes)
 * the inputs, node i at position pos[i] (< T), targets [n] the next tokens
 * (-1: not counted). With grads (from ag_lm_grads_init; overwritten) its
 * gradients too, and opts' dropout (NULL: none; without grads it is not
 * applied). nb is transposed for the backward if it is not yet. Bitwise the
 * same for any thread count. tape: NULL, or where a trainer keeps the rounds'
 * tape across calls (NULL at first; free with ag_tape_free): a call on the
 * same graph and model shape reuses its memory and plans (ag_rounds_forward_reuse),
 * so a step allocates almost nothing and faults in no new pages; a call
 * without grads (an evaluation) runs on it too.
 */
int ag_lm_loss(const ag_lm_t *m, ag_nbhd_t *nb, const int64_t *ids, const int64_t *pos,
               const int64_t *targets, const ag_lm_opts_t *opts, double *loss, ag_lm_t *grads,
               ag_tape_t **tape, ag_error_t *err);
/* logits [n, V] of every node (inference). */
int ag_lm_logits(const ag_lm_t *m, const ag_nbhd_t *nb, const int64_t *ids, const int64_t *pos,
                 float *logits, ag_error_t *err);

/*
 * A decoder: generation one token at a time with a cache of keys and values.
 * nb is the pattern over one sequence of the block's T nodes (the graph a
 * model trained on, for one sequence: causal, window:8, ...); it must be
 * causal (no source after its destination). Token t is node t: its query
 * reads its sources' cached keys and values, so the tokens before it are not
 * computed again. The logits agree with ag_lm_logits on the whole prefix to
 * rounding. m and nb's sources are read at init; m must stay alive.
 */
typedef struct ag_lm_decoder ag_lm_decoder_t;
int ag_lm_decoder_init(ag_lm_decoder_t **dec, const ag_lm_t *m, const ag_nbhd_t *nb,
                       ag_error_t *err);
/* Reads token id at the next position; logits [V] (NULL: not wanted) get the
   scores of the token after it. Refuses a full context (T tokens read):
   ag_lm_decoder_reset, then push the tokens to keep again (positions restart
   at 0, as the model was trained). */
int ag_lm_decoder_push(ag_lm_decoder_t *dec, int64_t id, float *logits, ag_error_t *err);
int64_t ag_lm_decoder_length(const ag_lm_decoder_t *dec);
void ag_lm_decoder_reset(ag_lm_decoder_t *dec);
void ag_lm_decoder_free(ag_lm_decoder_t *dec);
/* A token drawn from logits [V]: softmax(logits / temperature) over the top_k
   largest (0: all; ties with the k-th kept), u uniform in [0, 1) the draw;
   temperature 0: the largest (the first of equals). */
int64_t ag_lm_pick(const float *logits, int64_t V, double temperature, int64_t top_k, double u);
/* Text from a model: reads the prompt ids[0..n_prompt) (n_prompt >= 1), then
   draws n tokens into ids[n_prompt..n_prompt+n) with ag_lm_pick, draw k from
   (seed, k): the same tokens for a seed everywhere (CLI, Python). The
   decoder's context holds up to T tokens; when full it starts over from the
   last T/2 (positions restart at 0, as in training). nb as the decoder's.
   emit (NULL: none) gets each token as it is drawn, with ctx. */
int ag_lm_generate(const ag_lm_t *m, const ag_nbhd_t *nb, int64_t *ids, int64_t n_prompt,
                   int64_t n, double temperature, int64_t top_k, uint64_t seed,
                   void (*emit)(int64_t token, void *ctx), void *ctx, ag_error_t *err);

typedef enum { AG_OPT_ADAM = 0, AG_OPT_ADAMW, AG_OPT_SGD } ag_optimizer_kind_t;

typedef struct {
    ag_optimizer_kind_t kind;
    float lr;                     /* learning rate (> 0) */
    float momentum;               /* SGD momentum (0: plain SGD) */
    float beta1, beta2, eps;      /* Adam (defaults 0.9, 0.999, 1e-8; 0 means 0) */
    float weight_decay;           /* Adam and SGD: added to the gradient (L2); AdamW:
                                     decoupled, p -= lr wd p */
    float clip;                   /* > 0: scale all gradients so their global L2 norm
                                     is at most clip */
} ag_optimizer_opts_t;

/* The defaults (every field taken as given, 0 means 0): Adam, lr 0.01, no
   momentum, beta1 0.9, beta2 0.999, eps 1e-8, no weight decay, no clipping. */
#define AG_OPTIMIZER_OPTS_INIT {.kind = AG_OPT_ADAM, .lr = 0.01f, .beta1 = 0.9f, \
                                .beta2 = 0.999f, .eps = 1e-8f}
void ag_optimizer_opts_init(ag_optimizer_opts_t *opts, ag_optimizer_kind_t kind);

typedef struct ag_optimizer ag_optimizer_t;

/* An optimizer over no parameters yet (*opt NULL on failure). */
int ag_optimizer_init(ag_optimizer_t **opt, const ag_optimizer_opts_t *o, ag_error_t *err);
/* Adds a parameter array of n floats and the array its gradient will be in
   (both stay the caller's and must stay alive). */
int ag_optimizer_add(ag_optimizer_t *opt, float *param, const float *grad, int64_t n,
                     ag_error_t *err);
/* The same with flags: AG_OPT_NO_DECAY leaves it out of the weight decay (as
   GPT trainers leave biases, LayerNorm and gains: nanoGPT decays the arrays
   of two or more dimensions only). */
#define AG_OPT_NO_DECAY 1u
int ag_optimizer_add_ex(ag_optimizer_t *opt, float *param, const float *grad, int64_t n,
                        unsigned flags, ag_error_t *err);
/* The learning rate of the next steps (a schedule's: warmup, cosine decay).
   Refuses a value that is not finite and > 0. */
int ag_optimizer_set_lr(ag_optimizer_t *opt, float lr, ag_error_t *err);
/* Adds every array of a language model m with its gradient in g, in nanoGPT's
   groups: arrays of two or more dimensions (matrices, embeddings) decay,
   biases and LayerNorm gains do not. */
int ag_lm_optimizer_add(ag_optimizer_t *opt, ag_lm_t *m, const ag_lm_t *g, ag_error_t *err);
/* One step over every parameter added, in the order added. *grad_norm (may be
   NULL) gets the global L2 norm of the gradients before clipping. Bitwise the
   same for any thread count. */
int ag_optimizer_step(ag_optimizer_t *opt, double *grad_norm, ag_error_t *err);
void ag_optimizer_free(ag_optimizer_t *opt);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* ATTNGRAPH_CORE_H */
