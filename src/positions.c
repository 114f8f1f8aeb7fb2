/* Sinusoidal positions (Vaswani et al. 2017), added to a node's features. */
#include <math.h>

#include "internal.h"

void ag_posenc_sinusoidal(float *X, int64_t N, int64_t D)
{
    for (int64_t pos = 0; pos < N; pos++)
        for (int64_t c = 0; c < D; c++) {
            const double angle = (double)pos / pow(10000.0, (double)(c / 2 * 2) / (double)D);
            X[pos * D + c] += (float)(c % 2 == 0 ? sin(angle) : cos(angle));
        }
}
