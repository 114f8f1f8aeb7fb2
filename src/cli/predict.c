/* Class predictions: a linear readout of the final states (train --predict, run --predict). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/base.h"

/* Reads dir/name.npy, which must have ndim dimensions; NULL data when optional
   and missing. */
static int read_array(ag_array_t *a, const char *dir, const char *name, int ndim, int optional,
                      char *path, size_t cap, ag_error_t *err)
{
    memset(a, 0, sizeof *a);
    snprintf(path, cap, "%s/%s.npy", dir, name);
    FILE *probe = fopen(path, "rb");
    if (!probe && optional && errno == ENOENT)
        return AG_OK;
    if (probe)
        fclose(probe);
    int rc = ag_array_read_npy(a, path, err);
    if (!rc && a->ndim != ndim) {
        rc = ag_fail(err, AG_EINVAL, "%s has %d dimension%s; expected %s", path, a->ndim,
                     AG_PLURAL(a->ndim), ndim == 2 ? "[C, D]: a row of weights per class"
                                                : "[C]: a bias per class");
        ag_array_destroy(a);
    }
    return rc;
}

int readout_load(readout_t *r, const char *dir, int64_t D, ag_error_t *err)
{
    memset(r, 0, sizeof *r);
    char path[4096], bias_path[4096];
    ag_array_t w, b;
    int rc = read_array(&w, dir, "readout", 2, 0, path, sizeof path, err);
    if (rc)
        return rc;
    if (w.shape[1] != D) {
        ag_array_destroy(&w);
        return ag_fail(err, AG_EINVAL, "%s is [%lld, %lld]; the states have width D=%lld, so "
                       "expected [C, %lld]", path, (long long)w.shape[0], (long long)w.shape[1],
                       (long long)D, (long long)D);
    }
    if ((rc = read_array(&b, dir, "readout_bias", 1, 1, bias_path, sizeof bias_path, err))) {
        ag_array_destroy(&w);
        return rc;
    }
    const int64_t C = w.shape[0];
    if (C < 1)
        rc = ag_fail(err, AG_EINVAL, "%s has no rows; expected one per class", path);
    else if (b.data && b.shape[0] != C)
        rc = ag_fail(err, AG_EINVAL, "%s has %lld entr%s; %s has %lld classes", bias_path,
                     (long long)b.shape[0], b.shape[0] == 1 ? "y" : "ies", path, (long long)C);
    if (rc) {
        ag_array_destroy(&w), ag_array_destroy(&b);
        return rc;
    }
    if (!b.data && !(b.data = ag_calloc(C, sizeof(float), err, "readout bias"))) {
        ag_array_destroy(&w);
        return ag_alloc_status();
    }
    r->C = C, r->D = D, r->w = w.data, r->b = b.data;
    return AG_OK;
}

void readout_free(readout_t *r)
{
    free(r->w);
    free(r->b);
    memset(r, 0, sizeof *r);
}

void readout_predict(const readout_t *r, const float *X, int64_t N, int64_t *pred)
{
    for (int64_t i = 0; i < N; i++) {
        const float *x = X + i * r->D;
        int64_t best = 0;
        double best_logit = 0;
        for (int64_t c = 0; c < r->C; c++) {
            double logit = r->b ? r->b[c] : 0;
            if (!r->w)   /* no readout: the states are the logits */
                logit += x[c];
            for (int64_t k = 0; r->w && k < r->D; k++)
                logit += (double)x[k] * r->w[c * r->D + k];
            if (c == 0 || logit > best_logit)
                best = c, best_logit = logit;
        }
        pred[i] = best;
    }
}

/* --predict: the argmax of the weights folder's readout of the final states. */
int write_predictions(const char *path, const char *weights, int readout, const float *X,
                      int64_t N, int64_t D, ag_error_t *err)
{
    readout_t ro = {D, D, NULL, NULL};   /* no readout: the states are the logits */
    int rc = readout ? readout_load(&ro, weights, D, err) : AG_OK;
    if (rc == AG_EIO) {   /* most likely a folder of weights without a trained readout */
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return ag_fail(err, AG_EIO, "--predict: %s (the readout of a model that train --save "
                       "wrote)", why);
    }
    if (rc)
        return rc;
    int64_t *pred = ag_alloc(N, sizeof *pred, err, "predictions");
    if (!pred) {
        readout_free(&ro);
        return ag_alloc_status();
    }
    readout_predict(&ro, X, N, pred);
    rc = ag_npy_write_i64(path, pred, N, err);
    free(pred);
    readout_free(&ro);
    return rc;
}
