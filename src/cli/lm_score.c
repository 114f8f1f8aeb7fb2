/*
 * attngraph lm sample --examples DIR: a saved model's loss and accuracy over
 * an example set's validation examples (DIR/val_inputs.npy, val_targets.npy,
 * as lm task writes them), B sequences a batch on the model's graph, and with
 * --predictions its likeliest token at each scored position: what lm train
 * --examples reports and writes at its end, for a model read back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "cli/lm.h"

void lm_keep_predictions(int64_t *pred, const int64_t *said, const int64_t *next, int64_t rows,
                         int64_t T, int64_t W)
{
    for (int64_t b = 0; b < rows; b++)
        for (int64_t t = 0; t < W; t++)
            pred[b * W + t] = next[b * T + t] >= 0 ? said[b * T + t] : -100;
}

int lm_score(const ag_lm_model_t *lm, const char *spec, const char *dir, int64_t batch,
             const char *predictions, int *usage, ag_error_t *err)
{
    const ag_lm_t *m = &lm->m;
    const int64_t T = m->T, B = batch, n = B * T;
    char in[4096], tgt[4096];
    snprintf(in, sizeof in, "%s/val_inputs.npy", dir);
    snprintf(tgt, sizeof tgt, "%s/val_targets.npy", dir);
    out_file_t out;
    out_init(&out, predictions, "--predictions", "npy");
    int rc = out_open_all(&out, 1, usage, err);
    int64_t *x = NULL, *y = NULL, rows = 0, W = 0;
    if (!rc)
        rc = ag_lm_examples_read(&x, &y, &rows, &W, in, tgt, m->V, err);
    if (!rc && W > T)
        rc = ag_fail(err, AG_EINVAL, "%s: examples of %lld tokens; expected at most the "
                     "model's block, %lld", in, (long long)W, (long long)T);
    ag_nbhd_t **graphs = rc ? NULL : ag_calloc(m->L, sizeof *graphs, err, "the blocks' graphs");
    if (!rc && !graphs)
        rc = ag_alloc_status();
    if (!rc)
        rc = error_after(ag_lm_graphs(graphs, m->L, T, B, spec, err), err, "pattern '%s'",
                         spec);
    const int have_graphs = !rc;
    int64_t *ids = rc ? NULL : ag_alloc(4 * n, sizeof *ids, err, "batch");
    int64_t *pred = rc || !predictions ? NULL : ag_alloc(rows * W, sizeof *pred, err,
                                                          "--predictions");
    if (!rc && (!ids || (predictions && !pred)))
        rc = ag_alloc_status();
    for (int64_t i = 0; pred && i < rows * W; i++)   /* rows passed over keep it */
        pred[i] = -100;
    int64_t *pos = ids ? ids + n : NULL, *next = pos ? pos + n : NULL;
    int64_t *said = next ? next + n : NULL;
    ag_tape_t *tape = NULL;
    double weighted = 0;
    int64_t correct = 0, counted = 0;
    for (int64_t first = 0; !rc && first < rows; first += B) {
        for (int64_t b = 0; b < B; b++)   /* a short last batch: rows of nothing scored */
            for (int64_t t = 0; t < T; t++) {
                const int64_t r = first + b, i = b * T + t, in_row = r < rows && t < W;
                ids[i] = in_row ? x[r * W + t] : 0, pos[i] = t;
                next[i] = in_row ? y[r * W + t] : -1;
            }
        int64_t right = 0, scored = 0;
        for (int64_t i = 0; i < n; i++)
            scored += next[i] >= 0;
        if (!scored)   /* a batch of unscored rows adds nothing */
            continue;
        ag_lm_opts_t o = {.graphs = strchr(spec, '|') ? graphs : NULL, .correct = &right,
                          .counted = &scored, .predicted = pred ? said : NULL};
        double loss;
        if (!(rc = ag_lm_loss(m, graphs[0], ids, pos, next, &o, &loss, NULL, &tape, err)))
            weighted += loss * (double)scored, correct += right, counted += scored;
        if (!rc && pred)
            lm_keep_predictions(pred + first * W, said, next,
                                rows - first < B ? rows - first : B, T, W);
    }
    if (!rc && pred) {
        const int64_t shape[2] = {rows, W};
        rc = ag_npy_write_i64_nd(out.file.path, pred, 2, shape, err);
    }
    if (!rc)
        rc = out_commit(&out, err);
    if (!rc) {
        printf("%s: %lld validation examples, %lld scored tokens: loss %.4f, accuracy %.4f\n",
               dir, (long long)rows, (long long)counted, weighted / (double)counted,
               (double)correct / (double)counted);
        if (predictions)
            printf("wrote %s\n", predictions);
    }
    if (rc)
        out_abort_all(&out, 1, err);
    ag_tape_free(tape);
    if (have_graphs)
        ag_lm_graphs_free(graphs, m->L);
    free(graphs);
    free(ids), free(pred), free(x), free(y);
    return rc;
}
