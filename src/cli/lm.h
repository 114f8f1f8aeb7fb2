/* attngraph lm: language models on the command line (lm.c, lm_sample.c),
   their corpus (lm_text.c); the folders and graphs are the library's
   (ag_lm_model_load, ag_lm_model_save, ag_lm_graph). */
#ifndef AG_CLI_LM_H
#define AG_CLI_LM_H

#include "attngraph.h"

/* What lm train learns from: a stream of token ids cut into windows (a text's
   characters, or token files), or example sets (an example a row, its
   targets beside it). */
typedef struct {
    int64_t n;            /* a stream's tokens */
    int64_t *ids;         /* [n]: [0, split) trains, [split, n) validates */
    int64_t split;
    int64_t V;            /* vocabulary: distinct characters (or bytes), or token ids */
    int32_t *chars;       /* [V] their code points (bytes: 0..255), ascending; NULL: ids */
    /* example sets (rows > 0): inputs and targets [rows, width], the training
       set's train_rows first; targets -1 where not scored */
    int64_t rows, train_rows, width;
    int64_t *inputs, *targets;
} corpus_t;

/* Reads path whole as UTF-8 characters (bytes: as bytes), naming the file and
   the byte where it is not UTF-8; refuses an empty file. The first 90% trains
   (nanoGPT's split). */
int corpus_read(corpus_t *c, const char *path, int bytes, ag_error_t *err);
/* Token streams (lm_data.c): "TRAIN[,VAL]", each a nanoGPT .bin or a 1-D .npy
   (ag_lm_tokens_read); one file is split 90/10. vocab 0: the largest id + 1. */
int corpus_tokens(corpus_t *c, const char *spec, int64_t vocab, ag_error_t *err);
/* Example sets of DIR (lm_data.c): train_inputs.npy, train_targets.npy,
   val_inputs.npy, val_targets.npy (ag_lm_examples_read). */
int corpus_examples(corpus_t *c, const char *dir, int64_t vocab, ag_error_t *err);
void corpus_free(corpus_t *c);
/* text [n] as code points (bytes: each byte) into cps [n], *count of them;
   an error names `what` and the byte where the text is not UTF-8, then hint. */
int lm_decode_text(const char *what, const char *hint, const char *text, int64_t n, int bytes,
                   int32_t *cps, int64_t *count, ag_error_t *err);

/* Where lm train's losses run: one process (ag_lm_loss), or several
   (attngraph-mpi lm train: each process its rows of every batch). */
typedef struct lm_backend lm_backend_t;
struct lm_backend {
    int rank;   /* 0 prints and writes the files; the others only compute */
    int ranks;  /* the processes (0 or 1: one) */
    int one_graph;   /* runs one graph for every block (refuses a pattern a block) */
    /* the pattern's batch graph nb is made (NULL: nothing to do); then the
       losses of its batches (ids, pos, next: the whole batch's), then end */
    int (*begin)(lm_backend_t *b, ag_nbhd_t *nb, ag_error_t *err);
    int (*loss)(lm_backend_t *b, const ag_lm_t *m, ag_nbhd_t *nb, const int64_t *ids,
                const int64_t *pos, const int64_t *next, const ag_lm_opts_t *o, double *loss,
                ag_lm_t *grads, ag_error_t *err);
    void (*end)(lm_backend_t *b);
    /* rc agreed by every process (NULL: one process) */
    int (*agree)(lm_backend_t *b, int rc, ag_error_t *err);
    /* sets --threads (0: the default) and returns the count (NULL: ag_set_threads) */
    int (*threads)(lm_backend_t *b, int threads);
    void *ctx;
};
/* attngraph lm train's work (lm.c) on backend b. */
int lm_train_with(int argc, char **argv, lm_backend_t *b);

/* attngraph lm train (lm.c) and lm sample (lm_sample.c). */
int cmd_lm(int argc, char **argv);
int lm_sample(int argc, char **argv);
/* lm sample --examples DIR (lm_score.c): the model's loss and accuracy over
   DIR's validation examples, batch sequences at a time under spec, and with
   predictions (a path, or NULL) its likeliest token at each scored position. */
int lm_score(const ag_lm_model_t *lm, const char *spec, const char *dir, int64_t batch,
             const char *predictions, int *usage, ag_error_t *err);
/* A batch's first `rows` sequences (of T) into pred [rows, W]: the likeliest
   token `said` where next scores, -100 elsewhere (lm_score.c). */
void lm_keep_predictions(int64_t *pred, const int64_t *said, const int64_t *next, int64_t rows,
                         int64_t T, int64_t W);
/* attngraph lm task (lm_task.c): a recall task's example sets. */
int lm_task(int argc, char **argv);

#endif
