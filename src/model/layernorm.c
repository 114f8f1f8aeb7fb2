/* Pre-norm LayerNorm over each row's D features, and its backward. */
#include <math.h>
#include <stdlib.h>

#include "base/base.h"
#include "model/model.h"

/* Mean and 1/sqrt(var + eps) of a row, in double (the forward's and the
   backward's). The sums run in vector lanes (an order of their own, the same
   on every call): one chain of dependent double adds was 7% of a GPT step. */
static void row_stats(const float *x, int64_t D, float eps, double *mean, double *inv)
{
    double m = 0, var = 0;
#pragma omp simd reduction(+ : m)
    for (int64_t c = 0; c < D; c++)
        m += x[c];
    m /= (double)D;
#pragma omp simd reduction(+ : var)
    for (int64_t c = 0; c < D; c++)
        var += (x[c] - m) * (x[c] - m);
    *mean = m;
    *inv = 1.0 / sqrt(var / (double)D + eps);
}

void ag_layer_norm(float *Y, const float *X, int64_t N, int64_t D, const float *weight,
                   const float *bias, float eps)
{
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (N * D * 8 >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < N; i++) {
        const float *x = X + i * D;
        double mean, inv;
        row_stats(x, D, eps, &mean, &inv);
        for (int64_t c = 0; c < D; c++)
            Y[i * D + c] = (float)((x[c] - mean) * inv) * (weight ? weight[c] : 1.0f) +
                           (bias ? bias[c] : 0.0f);
    }
}

/* The rows' sums of dY * xhat (first D) and of dY (next D), for dW and dB. */
typedef struct {
    const float *dY, *X;
    int64_t D;
    float eps;
} ln_sums_t;

static void ln_param_sums(int64_t lo, int64_t hi, double *partial, void *ctx)
{
    const ln_sums_t *s = ctx;
    const int64_t D = s->D;
    for (int64_t i = lo; i < hi; i++) {
        const float *x = s->X + i * D, *dy = s->dY + i * D;
        double mean, inv;
        row_stats(x, D, s->eps, &mean, &inv);
        for (int64_t c = 0; c < D; c++) {
            partial[c] += dy[c] * ((x[c] - mean) * inv);
            partial[D + c] += dy[c];
        }
    }
}

int ag_i_layer_norm_backward(float *dX, float *dW, float *dB, const float *dY, const float *X,
                             int64_t N, int64_t D, const float *weight, float eps,
                             ag_error_t *err)
{
    return ag_i_layer_norm_backward_r(NULL, dX, dW, dB, dY, X, N, D, weight, eps, err);
}

int ag_i_layer_norm_backward_r(const ag_i_reducer_t *r, float *dX, float *dW, float *dB,
                               const float *dY, const float *X, int64_t N, int64_t D,
                               const float *weight, float eps, ag_error_t *err)
{
    /* dx = inv (g - mean(g) - xhat mean(g xhat)) with g = dy * weight; row i owns dx_i */
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (N * D * 16 >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < N; i++) {
        const float *x = X + i * D, *dy = dY + i * D;
        double mean, inv, g_mean = 0, gx_mean = 0;
        row_stats(x, D, eps, &mean, &inv);
#pragma omp simd reduction(+ : g_mean, gx_mean)
        for (int64_t c = 0; c < D; c++) {
            const double g = (double)dy[c] * (weight ? weight[c] : 1.0f);
            g_mean += g;
            gx_mean += g * ((x[c] - mean) * inv);
        }
        g_mean /= (double)D, gx_mean /= (double)D;
        for (int64_t c = 0; c < D; c++) {
            const double g = (double)dy[c] * (weight ? weight[c] : 1.0f);
            dX[i * D + c] += (float)(inv * (g - g_mean - (x[c] - mean) * inv * gx_mean));
        }
    }
    if (!dW && !dB)
        return AG_OK;
    double *sums = ag_alloc(2 * D, sizeof *sums, err, "LayerNorm gradients");
    if (!sums)
        return ag_i_reducer_failed(r, 2 * D, err);
    ln_sums_t ctx = {dY, X, D, eps};
    int rc = ag_i_sum_rows_r(r, N, 2 * D, N * D * 16, ln_param_sums, &ctx, sums, err);
    for (int64_t c = 0; !rc && c < D; c++) {
        if (dW)
            dW[c] += (float)sums[c];
        if (dB)
            dB[c] += (float)sums[D + c];
    }
    free(sums);
    return rc;
}
