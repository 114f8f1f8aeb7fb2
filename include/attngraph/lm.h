/*
 * attngraph: language models: a GPT of the rounds' layers, its loss,
 * decoder and sampling.
 * A part of <attngraph/core.h>, which includes them all and states the
 * conventions.
 */
#ifndef ATTNGRAPH_LM_H
#define ATTNGRAPH_LM_H

#include "attngraph/train.h"

AG_BEGIN_DECLS

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
/* Where a token's position enters: learnt absolute embeddings wpe [T, D]
   added to the token's (nanoGPT's), rotary positions on every block's queries
   and keys (RoFormer's; ag_round_opts_t.rope_positions), or none (causal
   attention alone tells the order, as NoPE models rely on). */
typedef enum { AG_LM_POS_LEARNT = 0, AG_LM_POS_ROPE, AG_LM_POS_NONE } ag_lm_positions_t;

typedef struct {
    int64_t V, T, D, L, H;       /* vocabulary, block size, width, layers, heads */
    int bias;
    float *wte, *wpe;            /* [V, D], [T, D] (NULL unless positions are learnt) */
    ag_weights_t *layers;        /* [L] */
    float *lnf_weight, *lnf_bias;   /* [D], [D] (bias: NULL without) */
    ag_lm_positions_t positions;
} ag_lm_t;

/* GPT-2's initialisation from seed: every matrix and embedding normal(0, 0.02),
   the residual branches' output projections (wo, w2) 0.02/sqrt(2L); biases 0,
   LayerNorm 1. D must be a multiple of H. */
int ag_lm_init(ag_lm_t *m, int64_t V, int64_t T, int64_t D, int64_t L, int64_t H, int bias,
               uint64_t seed, ag_error_t *err);
/* Zeroed arrays shaped like m's (a model's gradients). */
int ag_lm_grads_init(ag_lm_t *g, const ag_lm_t *m, ag_error_t *err);
/* m's positions: AG_LM_POS_ROPE or AG_LM_POS_NONE free its wpe (rotary ones
   need an even head width D/H); back to AG_LM_POS_LEARNT is refused (draw the
   model again). Call it before ag_lm_grads_init and the optimizer. */
int ag_lm_set_positions(ag_lm_t *m, ag_lm_positions_t positions, ag_error_t *err);
/* m's blocks without their feed-forward sublayer (mlp 0: its LayerNorm, w1,
   w2 and their biases freed, each block attention and its residual alone,
   Zoology's model for recall), or with it (1: as ag_lm_init draws it; a
   model without one is refused: draw it again). Call it before
   ag_lm_grads_init and the optimizer; the gradients follow m's blocks. */
int ag_lm_set_mlp(ag_lm_t *m, int mlp, ag_error_t *err);
/* 1 if m's blocks have their feed-forward sublayer, 0 if not. */
int ag_lm_has_mlp(const ag_lm_t *m);
const char *ag_lm_positions_name(ag_lm_positions_t positions);
int ag_lm_positions_parse(const char *name, ag_lm_positions_t *positions);
void ag_lm_destroy(ag_lm_t *m);

/* The graph of B sequences of T tokens side by side, spec within each
   (docs:T&(spec): causal added, so window:8 is the last 8 tokens; "causal"
   is docs:T), no message between sequences; spec's graph is made for one
   sequence and copied, so a random pattern's sources are the same in each.
   The graph ag_lm_loss trains on and the decoder (B = 1) reads. */
int ag_lm_graph(ag_nbhd_t *nb, int64_t T, int64_t B, const char *spec, ag_error_t *err);
/* A graph a block (a mask per layer): spec is one pattern for all L blocks,
   or L patterns separated by '|' ("window:32|window:64|window:128|causal":
   block 1 reads the first); graphs[l] is block l's ag_lm_graph, blocks of
   one pattern sharing one graph. An error names the part of spec.
   ag_lm_graphs_free frees them (each once). */
int ag_lm_graphs(ag_nbhd_t **graphs, int64_t L, int64_t T, int64_t B, const char *spec,
                 ag_error_t *err);
void ag_lm_graphs_free(ag_nbhd_t **graphs, int64_t L);

/*
 * A language model as `attngraph lm train --save` writes it: the GPT, its
 * vocabulary and the pattern it trained under. Its folder (docs/lm.md) holds
 * model.txt (the GPT's keys, one a line: vocab V utf-8|bytes|ids, block T,
 * layers L, heads H, dim D, bias yes|no, pattern SPEC, positions rope|none
 * where they are not learnt), vocab.npy (int64
 * [V]; not with ids), wte.npy, wpe.npy, lnf_weight.npy (lnf_bias.npy) and round-1/ ..
 * round-L/ with each block's arrays by their names (ag_layer_array_info).
 * Folders of 0.2, with lm.txt in the place of model.txt, load too.
 */
#define AG_LM_PATTERN_MAX 1024
typedef struct {
    ag_lm_t m;
    int32_t *chars;      /* [m.V] code points (bytes: 0..255), ascending; NULL with ids */
    int bytes;           /* the vocabulary is bytes, not UTF-8 characters */
    int ids;             /* the vocabulary is token ids 0..V-1 (no characters, no vocab.npy) */
    char pattern[AG_LM_PATTERN_MAX];   /* within each sequence: causal, window:64, ... */
} ag_lm_model_t;

/* Reads dir, every shape checked against model.txt, each error naming the file. */
int ag_lm_model_load(ag_lm_model_t *lm, const char *dir, ag_error_t *err);
/* Writes dir (created if missing) whole or not at all: a failure leaves what
   was there as it was. lm->chars must be ascending (as load checks). */
int ag_lm_model_save(const ag_lm_model_t *lm, const char *dir, ag_error_t *err);
/* Frees the arrays and the vocabulary; lm is zeroed. */
void ag_lm_model_destroy(ag_lm_model_t *lm);

/* Training-time options of ag_lm_loss: dropout p (nanoGPT's: on the embeddings'
   sum, the attention weights and both residual branches; 0: none), its masks
   hashed from seed (give each step its own). */
typedef struct {
    float dropout;
    uint64_t seed;
    /* A graph a block: block l reads graphs[l] (each on nb's nodes; from
       ag_lm_graphs), with or without grads; NULL: nb for every block. They
       must stay as they are until the call returns (and, with a kept tape,
       for the next call on it: a tape is remade for other graphs). One
       process only (ag_mpi_lm_loss refuses them). */
    ag_nbhd_t *const *graphs;
    /* Where the count of scored tokens (targets >= 0) and of those whose
       largest logit is their target go (accuracy = correct / counted); NULL:
       not wanted. */
    int64_t *correct, *counted;
    /* [n]: where the likeliest token at each scored position goes (the
       others untouched; on MPI, a process's own rows); NULL: not wanted. */
    int64_t *predicted;
} ag_lm_opts_t;

/* No dropout. */
#define AG_LM_OPTS_INIT {0}

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
/* The same with a graph a block (ag_lm_graphs'). */
int ag_lm_logits_layers(const ag_lm_t *m, ag_nbhd_t *const *graphs, const int64_t *ids,
                        const int64_t *pos, float *logits, ag_error_t *err);

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
/* The same with a graph a block: graphs[l] block l's over one sequence
   (ag_lm_graphs with B = 1), each causal. */
int ag_lm_decoder_init_layers(ag_lm_decoder_t **dec, const ag_lm_t *m,
                              ag_nbhd_t *const *graphs, ag_error_t *err);
/* Reads token id at the next position; logits [V] (NULL: not wanted) get the
   scores of the token after it. Refuses a full context (T tokens read):
   ag_lm_decoder_reset, then push the tokens to keep again (positions restart
   at 0, as the model was trained). */
int ag_lm_decoder_push(ag_lm_decoder_t *dec, int64_t id, float *logits, ag_error_t *err);
int64_t ag_lm_decoder_length(const ag_lm_decoder_t *dec);
/* The rows of keys and values its cache holds, all blocks: a block keeps as
   many positions as its pattern reaches back (T under causal, W under
   window:W), each 2 D floats. */
int64_t ag_lm_decoder_cache_rows(const ag_lm_decoder_t *dec);
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
/* The same with a graph a block (ag_lm_decoder_init_layers'). */
int ag_lm_generate_layers(const ag_lm_t *m, ag_nbhd_t *const *graphs, int64_t *ids,
                          int64_t n_prompt, int64_t n, double temperature, int64_t top_k,
                          uint64_t seed, void (*emit)(int64_t token, void *ctx), void *ctx,
                          ag_error_t *err);

/* ------------------------------------------------ data beside text (lm_data.c) */

/* The largest vocabulary the readers take (a uint16 .bin holds up to 65,536). */
#define AG_LM_MAX_VOCAB (1 << 20)

/* A stream of token ids (*n of them, malloc'ed into *ids): a .bin file of
   uint16 ids, little-endian (nanoGPT's train.bin and val.bin), or a 1-D
   integer .npy. Each id must be below vocab (0: below AG_LM_MAX_VOCAB); the
   first that is not is named by its index. An empty stream is refused. */
int ag_lm_tokens_read(int64_t **ids, int64_t *n, const char *path, int64_t vocab,
                      ag_error_t *err);
/* An example set: inputs [n, T] and targets [n, T] (integer .npy arrays of
   one shape; malloc'ed), targets aligned with the inputs (the target at t is
   what the model should say after reading inputs[0..t]). A target of -100
   (PyTorch's ignore_index) is not scored and comes back as -1 (ag_lm_loss's
   "not counted"). Ids checked as ag_lm_tokens_read checks them, each error
   naming the file, the row and the position. */
int ag_lm_examples_read(int64_t **inputs, int64_t **targets, int64_t *n, int64_t *T,
                        const char *inputs_path, const char *targets_path, int64_t vocab,
                        ag_error_t *err);

/* ------------------------------------------------ recall tasks (recall_tasks.c) */

typedef enum { AG_TASK_MQAR = 0, AG_TASK_COPY } ag_lm_task_kind_t;

/* A recall task (docs/lm.md). MQAR (Zoology's multi-query associative
   recall): `pairs` key-value pairs, then each key asked again after a gap
   drawn from a power law of exponent power - 1 (Zoology's power_a: 0.01),
   random tokens between the queries (0 with zero_fill); copy: length/2
   tokens, the separator 0, and the same tokens again. */
typedef struct {
    ag_lm_task_kind_t kind;
    int64_t vocab, length;       /* V, T (even) */
    int64_t pairs;               /* MQAR: 1 .. T/4, at most V/2 - 1 */
    double power;                /* MQAR: in (0, 1] */
    uint64_t seed;
    int zero_fill;               /* MQAR: 0 between the queries (Zoology's
                                    random_non_queries=False), not random tokens */
} ag_lm_task_t;

/* Examples first .. first+n-1 of task t into inputs and targets [n, T]
   (targets -1 where not scored) and, unless NULL, distance [n, T]: for each
   scored position how far back its evidence stands (MQAR: the key's first
   place; copy: T/2), else 0. Example k is drawn from (seed, k) alone: any
   slice gives the same examples on any thread count. n = 0 checks t alone. */
int ag_lm_task_make(const ag_lm_task_t *t, int64_t first, int64_t n, int64_t *inputs,
                    int64_t *targets, int64_t *distance, ag_error_t *err);

/* Adds every array of a language model m with its gradient in g, in nanoGPT's
   groups: arrays of two or more dimensions (matrices, embeddings) decay,
   biases and LayerNorm gains do not. */
int ag_lm_optimizer_add(ag_optimizer_t *opt, ag_lm_t *m, const ag_lm_t *g, ag_error_t *err);

AG_END_DECLS

#endif /* ATTNGRAPH_LM_H */
