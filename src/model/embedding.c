/*
 * Token and position embeddings (a language model's input) and their
 * backward. The backward sums each vocabulary row's gradient over the rows
 * that used it in fixed chunks of rows (AG_GEMM_CHUNK), in row order within a
 * chunk, with threads over columns, and adds the chunks' partials in chunk
 * order: the same bits for any thread count, and on several processes (a
 * reducer adds every process's chunks in that order).
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"

/* Checks ids [n] against V and pos [n] against T (pos NULL: none). */
static int ids_check(const int64_t *ids, const int64_t *pos, int64_t n, int64_t V, int64_t T,
                     ag_error_t *err)
{
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= V)
            return ag_fail(err, AG_EINVAL, "embedding: token %lld at row %lld; expected 0..%lld "
                           "(the vocabulary's size is %lld)", (long long)ids[i], (long long)i,
                           (long long)V - 1, (long long)V);
        if (pos && (pos[i] < 0 || pos[i] >= T))
            return ag_fail(err, AG_EINVAL, "embedding: position %lld at row %lld; expected "
                           "0..%lld (the block's size is %lld)", (long long)pos[i],
                           (long long)i, (long long)T - 1, (long long)T);
    }
    return AG_OK;
}

int ag_embed(float *X, const int64_t *ids, const int64_t *pos, int64_t n, const float *wte,
             int64_t V, const float *wpe, int64_t T, int64_t D, ag_error_t *err)
{
    if (n < 0 || V < 1 || D < 1 || (wpe && (!pos || T < 1)))
        return ag_fail(err, AG_EINVAL, "embedding: %lld rows, vocabulary %lld, width %lld%s; "
                       "expected sizes >= 1%s", (long long)n, (long long)V, (long long)D,
                       wpe && !pos ? ", position embeddings without positions" : "",
                       wpe ? " and positions for wpe" : "");
    int rc = ids_check(ids, wpe ? pos : NULL, n, V, T, err);
    if (rc)
        return rc;
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n * D >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float *t = wte + ids[i] * D, *p = wpe ? wpe + pos[i] * D : NULL;
        for (int64_t c = 0; c < D; c++)
            X[i * D + c] = t[c] + (p ? p[c] : 0.0f);
    }
    return AG_OK;
}

/* Rows lo..hi-1's partial gradients added into part [V + T, D] (positions:
   rows V.. for the positions): each column on one thread, its rows in order. */
static void chunk_partial(float *part, const float *dX, const int64_t *ids, const int64_t *pos,
                          int64_t lo, int64_t hi, int64_t V, int64_t D, int positions)
{
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if ((hi - lo) * D >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t c = 0; c < D; c++)
        for (int64_t i = lo; i < hi; i++) {
            const float g = dX[i * D + c];
            part[ids[i] * D + c] += g;
            if (positions)
                part[(V + pos[i]) * D + c] += g;
        }
}

int ag_embed_backward(float *dwte, float *dwpe, const float *dX, const int64_t *ids,
                      const int64_t *pos, int64_t n, int64_t V, int64_t T, int64_t D,
                      ag_error_t *err)
{
    return ag_i_embed_backward_r(NULL, dwte, dwpe, dX, ids, pos, n, V, T, D, err);
}

int ag_i_embed_backward_r(const ag_i_reducer_t *r, float *dwte, float *dwpe, const float *dX,
                          const int64_t *ids, const int64_t *pos, int64_t n, int64_t V,
                          int64_t T, int64_t D, ag_error_t *err)
{
    int rc = AG_OK;
    if (n < 0 || V < 1 || D < 1 || (dwpe && (!pos || T < 1)))
        rc = ag_fail(err, AG_EINVAL, "embedding backward: %lld rows, vocabulary %lld, "
                     "width %lld; expected sizes >= 1 (and positions for dwpe)",
                     (long long)n, (long long)V, (long long)D);
    if (!rc)
        rc = ids_check(ids, dwpe ? pos : NULL, n, V, T, err);
    /* G [V + T, D]: dwte then dwpe, which the chunks' partials add to */
    const int64_t rows = V + (dwpe ? T : 0), width = rows * D;
    const int64_t chunks = n > 0 ? (n + AG_GEMM_CHUNK - 1) / AG_GEMM_CHUNK : 0;
    const int64_t held = r ? chunks : 1;   /* one process adds each chunk as it goes */
    float *G = rc ? NULL : ag_alloc(width, sizeof *G, err, "embedding gradients");
    float *part = rc || !G ? NULL : ag_alloc(held > 0 ? held * width : 1, sizeof *part, err,
                                                "embedding gradients");
    if (!rc && !part)
        rc = ag_alloc_status();
    if (rc) {
        free(G);
        return r ? r->add_f(r, NULL, NULL, -1, width, err) : rc;
    }
    if (dwte)
        memcpy(G, dwte, (size_t)(V * D) * sizeof *G);
    else
        memset(G, 0, (size_t)(V * D) * sizeof *G);
    if (dwpe)
        memcpy(G + V * D, dwpe, (size_t)(T * D) * sizeof *G);
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t lo = c * AG_GEMM_CHUNK, hi = n - lo < AG_GEMM_CHUNK ? n : lo + AG_GEMM_CHUNK;
        float *p = part + (r ? c * width : 0);
        memset(p, 0, (size_t)width * sizeof *p);
        chunk_partial(p, dX, ids, pos, lo, hi, V, D, dwpe != NULL);
        if (!r) {
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (width >= AG_PARALLEL_MIN_WORK) schedule(static)
            for (int64_t x = 0; x < width; x++)
                G[x] += p[x];
        }
    }
    if (r)
        rc = r->add_f(r, G, part, chunks, width, err);
    if (!rc && dwte)
        memcpy(dwte, G, (size_t)(V * D) * sizeof *G);
    if (!rc && dwpe)
        memcpy(dwpe, G + V * D, (size_t)(T * D) * sizeof *G);
    free(G), free(part);
    return rc;
}
