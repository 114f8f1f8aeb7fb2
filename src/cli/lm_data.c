/*
 * lm train's data beside text: token streams (nanoGPT's train.bin and
 * val.bin, or .npy) and example sets (lm task's folders, or a user's own
 * arrays), read by the library's readers (ag_lm_tokens_read,
 * ag_lm_examples_read) into one corpus_t.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "cli/lm.h"

/* The vocabulary: vocab, or the largest id of ids [n] (and more [m]) + 1. */
static int64_t vocab_of(int64_t vocab, const int64_t *ids, int64_t n, const int64_t *more,
                        int64_t m)
{
    if (vocab)
        return vocab;
    int64_t top = 0;
    for (int64_t i = 0; i < n; i++)
        top = ids[i] > top ? ids[i] : top;
    for (int64_t i = 0; i < m; i++)
        top = more[i] > top ? more[i] : top;
    return top + 1;
}

int corpus_tokens(corpus_t *c, const char *spec, int64_t vocab, ag_error_t *err)
{
    memset(c, 0, sizeof *c);
    char first[4096];
    const char *comma = strchr(spec, ',');
    snprintf(first, sizeof first, "%.*s", comma ? (int)(comma - spec) : (int)strlen(spec), spec);
    int64_t *train = NULL, *val = NULL, n_train = 0, n_val = 0;
    int rc = ag_lm_tokens_read(&train, &n_train, first, vocab, err);
    if (!rc && comma)
        rc = ag_lm_tokens_read(&val, &n_val, comma + 1, vocab, err);
    c->ids = rc ? NULL : ag_alloc(n_train + n_val, sizeof *c->ids, err, "tokens");
    if (!rc && !c->ids)
        rc = ag_alloc_status();
    if (!rc) {
        memcpy(c->ids, train, (size_t)n_train * sizeof *c->ids);
        if (n_val)
            memcpy(c->ids + n_train, val, (size_t)n_val * sizeof *c->ids);
        c->n = n_train + n_val;
        c->split = comma ? n_train : (int64_t)(0.9 * (double)n_train);
        c->V = vocab_of(vocab, c->ids, c->n, NULL, 0);
    }
    free(train), free(val);
    if (rc)
        corpus_free(c);
    return rc;
}

int corpus_examples(corpus_t *c, const char *dir, int64_t vocab, ag_error_t *err)
{
    memset(c, 0, sizeof *c);
    int64_t *x[2] = {NULL, NULL}, *y[2] = {NULL, NULL}, n[2] = {0, 0}, T[2] = {0, 0};
    int rc = AG_OK;
    for (int s = 0; s < 2 && !rc; s++) {
        char in[4096], tgt[4096];
        snprintf(in, sizeof in, "%s/%s_inputs.npy", dir, s ? "val" : "train");
        snprintf(tgt, sizeof tgt, "%s/%s_targets.npy", dir, s ? "val" : "train");
        rc = ag_lm_examples_read(&x[s], &y[s], &n[s], &T[s], in, tgt, vocab, err);
    }
    if (!rc && T[1] != T[0])
        rc = ag_fail(err, AG_EINVAL, "%s/val_inputs.npy has examples of %lld tokens; expected "
                     "%lld, train_inputs.npy's", dir, (long long)T[1], (long long)T[0]);
    const int64_t rows = n[0] + n[1], W = T[0];
    if (!rc && (!(c->inputs = ag_alloc(rows * W, sizeof *c->inputs, err, "examples")) ||
                !(c->targets = ag_alloc(rows * W, sizeof *c->targets, err, "examples"))))
        rc = ag_alloc_status();
    if (!rc) {
        for (int s = 0; s < 2; s++) {
            memcpy(c->inputs + (s ? n[0] * W : 0), x[s], (size_t)(n[s] * W) * sizeof *x[s]);
            memcpy(c->targets + (s ? n[0] * W : 0), y[s], (size_t)(n[s] * W) * sizeof *y[s]);
        }
        c->rows = rows, c->train_rows = n[0], c->width = W;
        c->V = vocab_of(vocab, c->inputs, rows * W, c->targets, rows * W);
    }
    for (int s = 0; s < 2; s++)
        free(x[s]), free(y[s]);
    if (rc)
        corpus_free(c);
    return rc;
}
