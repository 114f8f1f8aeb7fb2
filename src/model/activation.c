/*
 * The activations of the rounds (ReLU, ELU, GELU) and their slopes, value by
 * value and over arrays. GELU (the erf form) is written in arithmetic only, so
 * its loops vectorize: libm's erff and expf are scalar calls, and a GPT's
 * feed-forward sublayers spent a fifth of a training step in them.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "model/model.h"

/* erf(x) in float: a rational function of x on [-4, 4] (beyond it erf is +-1
   in float), absolute error below 7e-8 in exact arithmetic (the tests compare
   GELU with a double reference). The coefficients are those of Eigen's
   generic_fast_erf_float: an odd degree-13 numerator over an even degree-8
   denominator. */
static inline float erf_rational(float x)
{
    x = x < -4.0f ? -4.0f : x > 4.0f ? 4.0f : x;   /* (fminf is a call) */
    const float x2 = x * x;
    float p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 + -2.10102402082508e-06f;
    p = p * x2 + -5.69250639462346e-05f;
    p = p * x2 + -7.34990630326855e-04f;
    p = p * x2 + -2.95459980854025e-03f;
    p = p * x2 + -1.60960333262415e-02f;
    float q = -1.45660718464996e-05f;
    q = q * x2 + -2.13374055278905e-04f;
    q = q * x2 + -1.68282697438203e-03f;
    q = q * x2 + -7.37332916720468e-03f;
    q = q * x2 + -1.42647390514189e-02f;
    return x * p / q;
}

static inline float gelu(float z)
{
    return 0.5f * z * (1.0f + erf_rational(z * 0.70710678f));
}

/* Phi(z) + z phi(z) */
static inline float gelu_slope(float z)
{
    return 0.5f * (1.0f + erf_rational(z * 0.70710678f)) +
           z * ag_i_exp_nonpositive(-0.5f * z * z) * 0.3989422804014327f;
}

float ag_i_act_value(ag_activation_t act, float z)
{
    switch (act) {
    case AG_ACT_RELU:
        return z > 0 ? z : 0.0f;
    case AG_ACT_ELU:
        return z > 0 ? z : expm1f(z);
    case AG_ACT_GELU:
        return gelu(z);
    default:
        return z;
    }
}

static float act_slope(ag_activation_t act, float z)
{
    switch (act) {
    case AG_ACT_RELU:
        return z > 0 ? 1.0f : 0.0f;
    case AG_ACT_ELU:
        return z > 0 ? 1.0f : expf(z);
    case AG_ACT_GELU:
        return gelu_slope(z);
    default:
        return 1.0f;
    }
}

void ag_i_act_rows(ag_activation_t act, float *Y, const float *X, int64_t m)
{
    if (act == AG_ACT_GELU) {
#pragma omp parallel for simd num_threads(ag_i_max_threads()) \
    if (m * 8 >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t x = 0; x < m; x++)
            Y[x] = gelu(X[x]);
        return;
    }
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (m * 8 >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t x = 0; x < m; x++)
        Y[x] = ag_i_act_value(act, X[x]);
}

void ag_i_act_backward_rows(ag_activation_t act, float *dY, const float *X, int64_t m)
{
    if (act == AG_ACT_GELU) {
#pragma omp parallel for simd num_threads(ag_i_max_threads()) \
    if (m * 8 >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t x = 0; x < m; x++)
            dY[x] *= gelu_slope(X[x]);
        return;
    }
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (m * 8 >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t x = 0; x < m; x++)
        dY[x] *= act_slope(act, X[x]);
}
