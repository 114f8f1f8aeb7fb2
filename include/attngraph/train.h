/*
 * attngraph: training: the tape and the rounds' backward, losses,
 * optimizers.
 * A part of <attngraph/core.h>, which includes them all and states the
 * conventions.
 */
#ifndef ATTNGRAPH_TRAIN_H
#define ATTNGRAPH_TRAIN_H

#include "attngraph/model.h"

AG_BEGIN_DECLS

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

/* Cross-entropy's readout and labels (ag_loss_cross_entropy). */
typedef struct {
    const float *Wr;              /* [C, D]: logits = X Wr^T + br; NULL: the logits are X + br
                                     (D == C: a model whose last layer writes the classes) */
    const float *br;              /* [C], or NULL: zeros */
    int64_t C;                    /* classes */
    const int64_t *labels;        /* [N] in 0..C-1, or -1: unlabelled (skipped) */
    const uint8_t *mask;          /* [N] nonzero where counted; NULL: every node */
} ag_cross_entropy_t;

/* What ag_loss_cross_entropy gives: the numbers always, each array only when
   its pointer is not NULL. */
typedef struct {
    double loss;                  /* the mean over the masked labelled nodes */
    int64_t correct;              /* of them, those whose largest logit is their label */
    int64_t counted;              /* how many they are */
    float *dX, *dWr, *dbr;        /* [N, D], [C, D], [C]: dL/dX, dL/dWr, dL/dbr */
    int64_t *pred;                /* [N] every node's argmax class */
    int64_t *pred_counted;        /* [N] the argmax of the counted nodes alone (the
                                     others untouched): few scored rows stay cheap */
} ag_cross_entropy_out_t;

#define AG_CROSS_ENTROPY_OUT_INIT {0}

/*
 * Cross-entropy over ce->C classes of states X [N, D] through a linear
 * readout: L = mean over masked nodes with a label of -ln
 * softmax(logits_i)[labels[i]], into *out. Refuses a label >= C or < -1, a
 * mask that selects no labelled node, and a width other than C without Wr.
 */
int ag_loss_cross_entropy(const float *X, int64_t N, int64_t D, const ag_cross_entropy_t *ce,
                          ag_cross_entropy_out_t *out, ag_error_t *err);

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

/* One step over every parameter added, in the order added. *grad_norm (may be
   NULL) gets the global L2 norm of the gradients before clipping. Bitwise the
   same for any thread count. */
int ag_optimizer_step(ag_optimizer_t *opt, double *grad_norm, ag_error_t *err);
void ag_optimizer_free(ag_optimizer_t *opt);

AG_END_DECLS

#endif /* ATTNGRAPH_TRAIN_H */
