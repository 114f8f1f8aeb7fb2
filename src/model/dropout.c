/*
 * Dropout on features with a counter-based mask: element (row, col) is kept
 * when a hash of (seed, row, col) is at or above p 2^32. A row's key is the
 * 64-bit generator's draw number `row`; its columns then cost one 32-bit mix
 * each, which GCC vectorises, so dropping Cora's 2,708 x 1,433 inputs takes
 * 3 ms on 2 threads of an AMD EPYC Milan, where a generator stepped element
 * by element (torch 1.13's bernoulli_) took 55-80 ms.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"

/* The generator's stream for feature dropout (attention dropout has its own). */
#define FEATURE_DROPOUT_STREAM 0x66656174647270ull   /* "featdrp" */

int ag_dropout(float *Y, const float *X, int64_t first_row, int64_t rows, int64_t cols,
               float p, uint64_t seed, ag_error_t *err)
{
    if (!(p >= 0 && p < 1))
        return ag_fail(err, AG_EINVAL, "dropout: p %g; expected a probability in [0, 1)", p);
    if (rows < 0 || cols < 0 || first_row < 0)
        return ag_fail(err, AG_EINVAL, "dropout: first row %lld, %lld rows of %lld columns; "
                       "expected each >= 0", (long long)first_row, (long long)rows,
                       (long long)cols);
    if (p == 0) {
        if (Y != X)
            memmove(Y, X, (size_t)(rows * cols) * sizeof *Y);
        return AG_OK;
    }
    const uint64_t state = rng_seed(seed, FEATURE_DROPOUT_STREAM);
    const uint32_t below = (uint32_t)fmin((double)p * 4294967296.0, 4294967295.0);
    const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (rows * cols >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const uint64_t key = rng_at(state, (uint64_t)(first_row + r));
        const uint32_t lo = (uint32_t)key, hi = (uint32_t)(key >> 32);
        const float *x = X + r * cols;
        float *y = Y + r * cols;
#pragma omp simd
        for (int64_t c = 0; c < cols; c++) {
            const uint32_t u = rng_mix32(lo + (uint32_t)c * 0x9E3779B9u) ^ hi;
            y[c] = x[c] * (u < below ? 0.0f : scale);   /* a product, not a branch: vectorised */
        }
    }
    return AG_OK;
}
