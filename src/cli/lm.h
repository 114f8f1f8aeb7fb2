/* attngraph lm: language models on the command line (lm.c), their corpus
   (lm_text.c). */
#ifndef AG_CLI_LM_H
#define AG_CLI_LM_H

#include "attngraph.h"

/* A text as token ids over the vocabulary of its characters. */
typedef struct {
    int64_t n;            /* tokens */
    int64_t *ids;         /* [n] */
    int64_t V;            /* vocabulary: distinct characters (or bytes) */
    int32_t *chars;       /* [V] their code points (bytes: 0..255), ascending */
} corpus_t;

/* Reads path whole as UTF-8 characters (bytes: as bytes), naming the file and
   the byte where it is not UTF-8; refuses an empty file. */
int corpus_read(corpus_t *c, const char *path, int bytes, ag_error_t *err);
void corpus_free(corpus_t *c);

int cmd_lm(int argc, char **argv);

#endif
