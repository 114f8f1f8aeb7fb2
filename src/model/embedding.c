/*
 * Token and position embeddings (a language model's input) and their
 * backward. The backward sums each vocabulary row's gradient over the rows
 * that used it in row order, per column, with threads over columns: the same
 * bits for any thread count.
 */
#include <string.h>

#include "base/base.h"
#include "model/model.h"

/* Checks ids [n] against V and pos [n] against T (pos NULL: none). */
static int ids_check(const int64_t *ids, const int64_t *pos, int64_t n, int64_t V, int64_t T,
                     ag_error_t *err)
{
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= V)
            return ag_i_fail(err, AG_EINVAL, "embedding: token %lld at row %lld; expected 0..%lld "
                             "(the vocabulary's size is %lld)", (long long)ids[i], (long long)i,
                             (long long)V - 1, (long long)V);
        if (pos && (pos[i] < 0 || pos[i] >= T))
            return ag_i_fail(err, AG_EINVAL, "embedding: position %lld at row %lld; expected "
                             "0..%lld (the block's size is %lld)", (long long)pos[i],
                             (long long)i, (long long)T - 1, (long long)T);
    }
    return AG_OK;
}

int ag_embed(float *X, const int64_t *ids, const int64_t *pos, int64_t n, const float *wte,
             int64_t V, const float *wpe, int64_t T, int64_t D, ag_error_t *err)
{
    if (n < 0 || V < 1 || D < 1 || (wpe && (!pos || T < 1)))
        return ag_i_fail(err, AG_EINVAL, "embedding: %lld rows, vocabulary %lld, width %lld%s; "
                         "expected sizes >= 1%s", (long long)n, (long long)V, (long long)D,
                         wpe && !pos ? ", position embeddings without positions" : "",
                         wpe ? " and positions for wpe" : "");
    int rc = ids_check(ids, wpe ? pos : NULL, n, V, T, err);
    if (rc)
        return rc;
#pragma omp parallel for if (n * D >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float *t = wte + ids[i] * D, *p = wpe ? wpe + pos[i] * D : NULL;
        for (int64_t c = 0; c < D; c++)
            X[i * D + c] = t[c] + (p ? p[c] : 0.0f);
    }
    return AG_OK;
}

int ag_embed_backward(float *dwte, float *dwpe, const float *dX, const int64_t *ids,
                      const int64_t *pos, int64_t n, int64_t V, int64_t T, int64_t D,
                      ag_error_t *err)
{
    if (n < 0 || V < 1 || D < 1 || (dwpe && (!pos || T < 1)))
        return ag_i_fail(err, AG_EINVAL, "embedding backward: %lld rows, vocabulary %lld, "
                         "width %lld; expected sizes >= 1 (and positions for dwpe)",
                         (long long)n, (long long)V, (long long)D);
    int rc = ids_check(ids, dwpe ? pos : NULL, n, V, T, err);
    if (rc)
        return rc;
    /* each column on one thread, its rows in order: every row's sum in one order */
#pragma omp parallel for if (n * D >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t c = 0; c < D; c++)
        for (int64_t i = 0; i < n; i++) {
            const float g = dX[i * D + c];
            if (dwte)
                dwte[ids[i] * D + c] += g;
            if (dwpe)
                dwpe[pos[i] * D + c] += g;
        }
    return AG_OK;
}
