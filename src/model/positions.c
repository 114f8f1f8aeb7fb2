/* Sinusoidal positions (Vaswani et al. 2017), added to a node's features. */
#include <math.h>

#include "base/base.h"

void ag_i_posenc_rows(float *X, int64_t lo, int64_t n, int64_t D)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < D; c++) {
            const double angle = (double)(lo + i) / pow(10000.0, (double)(c / 2 * 2) / (double)D);
            X[i * D + c] += (float)(c % 2 == 0 ? sin(angle) : cos(angle));
        }
}

void ag_posenc_sinusoidal(float *X, int64_t N, int64_t D)
{
    ag_i_posenc_rows(X, 0, N, D);
}
