/* Pre-norm LayerNorm over each row's D features. */
#include <math.h>

#include "internal.h"

void ag_layer_norm(float *Y, const float *X, int64_t N, int64_t D, const float *weight,
                   const float *bias, float eps)
{
#pragma omp parallel for if (N * D * 8 >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < N; i++) {
        const float *x = X + i * D;
        double mean = 0, var = 0;
        for (int64_t c = 0; c < D; c++)
            mean += x[c];
        mean /= (double)D;
        for (int64_t c = 0; c < D; c++)
            var += (x[c] - mean) * (x[c] - mean);
        const double inv = 1.0 / sqrt(var / (double)D + eps);
        for (int64_t c = 0; c < D; c++)
            Y[i * D + c] = (float)((x[c] - mean) * inv) * (weight ? weight[c] : 1.0f) +
                           (bias ? bias[c] : 0.0f);
    }
}
