/*
 * Rotary position embeddings (Su et al., "RoFormer", 2021): a query or key
 * of position p has, in each head of width d, its pairs (j, j + d/2) turned
 * by the angle p * base^(-2j/d) (the pairing of GPT-NeoX and of Hugging
 * Face's LLaMA). A score q . k then depends on the positions only through
 * their difference, so a model needs no table of absolute places: a local
 * mask reads the same relation at every place.
 */
#include <math.h>
#include <stdlib.h>

#include "base/base.h"
#include "model/model.h"

int ag_i_rope(float *Q, float *K, int64_t n, int64_t H, int64_t d, const int64_t *pos,
              float base, int inverse, ag_error_t *err)
{
    if (d % 2)
        return ag_fail(err, AG_EINVAL, "rotary positions: heads of width %lld; expected an "
                       "even width (pairs of columns turn together)", (long long)d);
    const int64_t half = d / 2;
    int64_t low = n ? pos[0] : 0, top = low;
    for (int64_t i = 0; i < n; i++) {
        if (pos[i] < 0)
            return ag_fail(err, AG_EINVAL, "rotary positions: row %lld at position %lld; "
                           "expected >= 0", (long long)i, (long long)pos[i]);
        low = pos[i] < low ? pos[i] : low;
        top = pos[i] > top ? pos[i] : top;
    }
    /* cos and sin of every (position, pair) of low..top, each from double: a
       row's turn does not depend on which rows share the call */
    const int64_t span = top - low + 1;
    float *cs = ag_alloc(2 * span * (half ? half : 1), sizeof *cs, err, "rotary positions");
    if (!cs)
        return ag_alloc_status();
    const double theta = base > 0 ? (double)base : 10000.0;
    for (int64_t p = 0; p < span; p++)
        for (int64_t j = 0; j < half; j++) {
            const double a = (double)(low + p) * pow(theta, -2.0 * (double)j / (double)d);
            cs[2 * (p * half + j)] = (float)cos(a);
            cs[2 * (p * half + j) + 1] = (float)(inverse ? -sin(a) : sin(a));
        }
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (2 * n * H * d >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < 2 * H; h++) {   /* Q's heads, then K's */
            float *x = (h < H ? Q : K) + (i * H + h % H) * d;
            const float *t = cs + 2 * (pos[i] - low) * half;
            for (int64_t j = 0; j < half; j++) {
                const float c = t[2 * j], s = t[2 * j + 1], a = x[j], b = x[j + half];
                x[j] = a * c - b * s;
                x[j + half] = a * s + b * c;
            }
        }
    free(cs);
    return AG_OK;
}
