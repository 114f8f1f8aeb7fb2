/* Small inline helpers shared by the kernels, so the kernels read as math. */
#ifndef AG_VEC_H
#define AG_VEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/*
 * exp(x) for x <= 0, with exact zeros below -87: such a term weighs less than
 * 1e-38 of the largest, and expf would return denormals there, which are slow.
 */
#define AG_EXP_CUTOFF (-87.0f)

static inline float ag_i_exp_or_zero(float x)
{
    return x < AG_EXP_CUTOFF ? 0.0f : expf(x);
}

/* exp(x) for x <= 0 in float: 2^(x log2 e) as the kernels' v_exp2 computes it
   (n = round, 2^f by a degree-5 polynomial, 2^n in the exponent bits; 0 below
   2^-126), relative error below 3e-7; plain C that vectorizes (GELU's slope,
   the cross-entropy's softmax). */
static inline float ag_i_exp_nonpositive(float x)
{
    const float y = x * 1.44269504f < -127.0f ? -127.0f : x * 1.44269504f;
    const float t = y + 12582912.0f;   /* 1.5 * 2^23: rounds y to an integer n */
    const float n = t - 12582912.0f, f = y - n;
    float p = 1.32763742e-3f;
    p = p * f + 9.67553332e-3f;
    p = p * f + 5.55071347e-2f;
    p = p * f + 2.40221199e-1f;
    p = p * f + 6.93146967e-1f;
    p = p * f + 1.00000007f;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits << 23) + (127u << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return y > -126.0f ? p * scale : 0.0f;
}

/* gcc vectorises a float reduction only when told it may reorder it. */
static inline float ag_i_dot(const float *a, const float *b, int64_t n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < n; k++)
        s += a[k] * b[k];
    return s;
}

static inline int ag_i_thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* The threads of the team running the caller (1 outside a parallel region). */
static inline int ag_i_team_size(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* Per-thread slots of `per_thread` floats each, padded to whole cache lines
   so that threads writing their own slots do not share a line. */
typedef struct {
    float *buf;
    int64_t stride;
} ag_i_scratch_t;

static inline int64_t ag_i_scratch_stride(int64_t per_thread)
{
    const int64_t line = 64 / (int64_t)sizeof(float);
    return (per_thread + line - 1) / line * line + line;
}

static inline float *ag_i_scratch_mine(const ag_i_scratch_t *s)
{
    return s->buf + (int64_t)ag_i_thread_id() * s->stride;
}

#endif
