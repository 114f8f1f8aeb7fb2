/*
 * Message rounds: projections (OpenBLAS sgemm), attention, output projection
 * and residual. Weights are [out, in] like torch.nn.Linear.weight, so every
 * projection is y = x W^T: cblas_sgemm(RowMajor, NoTrans, Trans, ...).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "internal.h"
#include "rng.h"

/* Uniform in (0, 1): 53 random bits, never 0. */
static double uniform01(uint64_t *state)
{
    return ((double)(rng_next(state) >> 11) + 0.5) * 0x1.0p-53;
}

void ag_random_normal(float *x, int64_t n, uint64_t seed, uint64_t stream, float scale)
{
    uint64_t state = rng_seed(seed, stream);
    for (int64_t i = 0; i < n; i += 2) {   /* Box-Muller, two values per draw */
        double r = sqrt(-2.0 * log(uniform01(&state)));
        double t = 6.283185307179586 * uniform01(&state);   /* 2 pi */
        x[i] = (float)(r * cos(t)) * scale;
        if (i + 1 < n)
            x[i + 1] = (float)(r * sin(t)) * scale;
    }
}

/* ---- weights ---- */

void ag_weights_destroy(ag_weights_t *w)
{
    if (!w)
        return;
    free(w->wq);
    free(w->wk);
    free(w->wv);
    free(w->wo);
    w->wq = w->wk = w->wv = w->wo = NULL;
}

int ag_weights_random(ag_weights_t *w, int64_t D, int64_t H, int64_t d, uint64_t seed,
                      ag_error_t *err)
{
    memset(w, 0, sizeof *w);
    if (D <= 0 || H <= 0 || d <= 0)
        return ag_fail(err, AG_EINVAL, "weights: D=%lld, H=%lld, d=%lld; expected all >= 1",
                       (long long)D, (long long)H, (long long)d);
    const int64_t HD = H * d;
    w->D = D, w->H = H, w->d = d;
    float **mats[4] = {&w->wq, &w->wk, &w->wv, &w->wo};
    for (int m = 0; m < 4; m++) {
        *mats[m] = ag_alloc(HD * D, sizeof(float), err, "weights");
        if (!*mats[m]) {
            ag_weights_destroy(w);
            return AG_ENOMEM;
        }
        const int64_t fan_in = m < 3 ? D : HD;
        ag_random_normal(*mats[m], HD * D, seed, (uint64_t)m + 1, 1.0f / sqrtf((float)fan_in));
    }
    return AG_OK;
}

/* Reads dir/name.npy and checks it is [rows, cols] (a dimension < 0: any). */
static int load_matrix(float **out, int64_t *rows, int64_t *cols, const char *dir,
                       const char *name, ag_error_t *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    ag_matrix_t m;
    int rc = ag_matrix_read_npy(&m, path, err);
    if (rc)
        return rc;
    if ((*rows >= 0 && m.rows != *rows) || (*cols >= 0 && m.cols != *cols)) {
        rc = ag_fail(err, AG_EINVAL, "%s is [%lld, %lld]; expected [%lld, %lld] ([out, in] like "
                     "torch.nn.Linear.weight)", path, (long long)m.rows, (long long)m.cols,
                     (long long)*rows, (long long)*cols);
        ag_matrix_destroy(&m);
        return rc;
    }
    *rows = m.rows;
    *cols = m.cols;
    *out = m.data;
    return AG_OK;
}

int ag_weights_load(ag_weights_t *w, const char *dir, int64_t H, ag_error_t *err)
{
    memset(w, 0, sizeof *w);
    if (H <= 0)
        return ag_fail(err, AG_EINVAL, "weights: %lld heads; expected >= 1", (long long)H);
    int64_t HD = -1, D = -1;
    int rc = load_matrix(&w->wq, &HD, &D, dir, "wq", err);
    if (!rc && HD % H != 0)
        rc = ag_fail(err, AG_EINVAL, "%s/wq.npy has %lld rows, not a multiple of %lld heads",
                     dir, (long long)HD, (long long)H);
    if (!rc)
        rc = load_matrix(&w->wk, &HD, &D, dir, "wk", err);
    if (!rc)
        rc = load_matrix(&w->wv, &HD, &D, dir, "wv", err);
    if (!rc)
        rc = load_matrix(&w->wo, &D, &HD, dir, "wo", err);
    if (rc) {
        ag_weights_destroy(w);
        return rc;
    }
    w->D = D, w->H = H, w->d = HD / H;
    return AG_OK;
}

/* ---- rounds ---- */

void ag_workspace_destroy(ag_workspace_t *ws)
{
    if (!ws)
        return;
    free(ws->Q);
    free(ws->K);
    free(ws->V);
    free(ws->M);
    memset(ws, 0, sizeof *ws);
}

int ag_workspace_init(ag_workspace_t *ws, int64_t N, int64_t HD, ag_error_t *err)
{
    memset(ws, 0, sizeof *ws);
    if (N <= 0 || HD <= 0 || N > INT64_MAX / HD)
        return ag_fail(err, AG_EINVAL, "workspace: [%lld, %lld] is not a valid size",
                       (long long)N, (long long)HD);
    ws->N = N, ws->HD = HD;
    float **bufs[4] = {&ws->Q, &ws->K, &ws->V, &ws->M};
    for (int b = 0; b < 4; b++)
        if (!(*bufs[b] = ag_calloc(N * HD, sizeof(float), err, "workspace"))) {
            ag_workspace_destroy(ws);
            return AG_ENOMEM;
        }
    return AG_OK;
}

/* Y [N, out] = beta Y + X [N, in] W^T, with W [out, in]. */
static void project(float *Y, const float *X, const float *W, int64_t N, int64_t in,
                    int64_t out, float beta)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)out, (int)in, 1.0f, X,
                (int)in, W, (int)in, beta, Y, (int)out);
}

int ag_rounds_run(const ag_nbhd_t *nb, const ag_weights_t *w, float *X, int rounds,
                  ag_workspace_t *ws, ag_error_t *err)
{
    const int64_t N = nb->n_nodes, D = w->D, HD = w->H * w->d;
    if (rounds < 0)
        return ag_fail(err, AG_EINVAL, "rounds: %d; expected >= 0", rounds);
    if (ws->N != N || ws->HD != HD)
        return ag_fail(err, AG_EINVAL, "rounds: workspace is [%lld, %lld]; expected [%lld, %lld]",
                       (long long)ws->N, (long long)ws->HD, (long long)N, (long long)HD);
    if (N > INT32_MAX || D > INT32_MAX || HD > INT32_MAX)
        return ag_fail(err, AG_ELIMIT, "rounds: dimensions beyond 2^31 are not supported by BLAS");
    for (int r = 0; r < rounds; r++) {
        project(ws->Q, X, w->wq, N, D, HD, 0.0f);
        project(ws->K, X, w->wk, N, D, HD, 0.0f);
        project(ws->V, X, w->wv, N, D, HD, 0.0f);
        int rc = ag_attention(nb, ws->Q, ws->K, ws->V, w->H, w->d, ws->M, err);
        if (rc)
            return rc;
        project(X, ws->M, w->wo, N, HD, D, 1.0f);   /* residual: X += M Wo^T */
    }
    return AG_OK;
}
