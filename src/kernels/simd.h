/*
 * Portable 16-lane float vectors (GCC vector extensions). A kernel is written
 * once as an always-inline body and compiled three times, for AVX-512
 * (F, CD, BW, DQ, VL: one register per vector), AVX2 + FMA (two) and the
 * x86-64 baseline (four); ag_i_simd_level() (base/simd_level.h) picks one at run time. Other
 * architectures build the baseline only.
 */
#ifndef AG_SIMD_H
#define AG_SIMD_H

#include <stdint.h>
#include <string.h>

#include "base/base.h"   /* the levels: base/simd_level.h */

#define AG_LANES 16

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64)));   /* for bit patterns */
/* for loads and stores at any float alignment */
typedef float v16f_u __attribute__((vector_size(64), aligned(4), may_alias));

#define AG_INLINE static inline __attribute__((always_inline))

/* Vectors never cross a call boundary here (everything is inlined), so GCC's
   note that passing them changed ABI in GCC 4.6 does not apply: the Makefile
   builds with -Wno-psabi. */

AG_INLINE v16f v_load(const float *p) { return *(const v16f_u *)p; }
AG_INLINE void v_store(float *p, v16f x) { *(v16f_u *)p = x; }
/* All lanes x: a shuffle of lane 0, which compiles to one broadcast ("0 + x"
   would cost an add, as -0 + 0 is +0; a 16-element initializer, 16 inserts). */
AG_INLINE v16f v_set1(float x)
{
    const v16f v = {x};
#if defined(__clang__)
    return __builtin_shufflevector(v, v, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#else
    return __builtin_shuffle(v, (v16i){0});
#endif
}
/* mask lanes are -1 (all bits) or 0, as vector comparisons give them */
AG_INLINE v16f v_select(v16i mask, v16f a, v16f b)
{
    return (v16f)((mask & (v16i)a) | (~mask & (v16i)b));
}
AG_INLINE v16f v_max(v16f a, v16f b) { return v_select(a > b, a, b); }

AG_INLINE float v_sum(v16f x)
{
    float s = 0;
    for (int i = 0; i < AG_LANES; i++)
        s += x[i];
    return s;
}

AG_INLINE float v_hmax(v16f x)
{
    float m = x[0];
    for (int i = 1; i < AG_LANES; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

/*
 * Transposes the 16 x 16 matrix held in r[0..15] (row k in r[k]). Stage b
 * swaps bit b of the row index with bit b of the column index, pairing rows
 * k and k + 2^b: 4 stages of 8 pairs of two-input shuffles (vpermt2ps).
 */
AG_INLINE void v_transpose16(v16f r[AG_LANES])
{
    /* For the pair (a, c) of stage b, with idx < 16 from a and >= 16 from c:
       new a[x] = x_b ? c[x ^ 2^b] : a[x];  new c[x] = x_b ? c[x] : a[x ^ 2^b]. */
#define AG_LO(x, b) ((x) >> (b) & 1 ? 16 + ((x) ^ (1 << (b))) : (x))
#define AG_HI(x, b) ((x) >> (b) & 1 ? 16 + (x) : ((x) ^ (1 << (b))))
#define AG_MASK(F, b)                                                                       \
    {F(0, b), F(1, b), F(2, b), F(3, b), F(4, b), F(5, b), F(6, b), F(7, b),                \
     F(8, b), F(9, b), F(10, b), F(11, b), F(12, b), F(13, b), F(14, b), F(15, b)}
    static const v16i lo[4] = {AG_MASK(AG_LO, 0), AG_MASK(AG_LO, 1), AG_MASK(AG_LO, 2),
                               AG_MASK(AG_LO, 3)};
    static const v16i hi[4] = {AG_MASK(AG_HI, 0), AG_MASK(AG_HI, 1), AG_MASK(AG_HI, 2),
                               AG_MASK(AG_HI, 3)};
#undef AG_MASK
#if defined(__clang__)
    /* clang's shuffle takes its indices as constants only: one stage a literal b */
    (void)lo, (void)hi;
#define AG_SHUF(a, c, F, b)                                                                 \
    __builtin_shufflevector(a, c, F(0, b), F(1, b), F(2, b), F(3, b), F(4, b), F(5, b),     \
                            F(6, b), F(7, b), F(8, b), F(9, b), F(10, b), F(11, b),         \
                            F(12, b), F(13, b), F(14, b), F(15, b))
#define AG_STAGE(b)                                                                         \
    for (int k = 0; k < AG_LANES; k++)                                                      \
        if (!(k & (1 << (b)))) {                                                            \
            const v16f a = r[k], c = r[k + (1 << (b))];                                     \
            r[k] = AG_SHUF(a, c, AG_LO, b);                                                 \
            r[k + (1 << (b))] = AG_SHUF(a, c, AG_HI, b);                                    \
        }
    AG_STAGE(3) AG_STAGE(2) AG_STAGE(1) AG_STAGE(0)
#undef AG_STAGE
#undef AG_SHUF
#else
#pragma GCC unroll 4
    for (int b = 3; b >= 0; b--) {
        const int half = 1 << b;
#pragma GCC unroll 16
        for (int k = 0; k < AG_LANES; k++) {
            if (k & half)
                continue;
            const v16f a = r[k], c = r[k + half];
            r[k] = __builtin_shuffle(a, c, lo[b]);
            r[k + half] = __builtin_shuffle(a, c, hi[b]);
        }
    }
#endif
#undef AG_HI
#undef AG_LO
}

/*
 * 2^x for x <= 0 (and -INFINITY), in float: x = n + f with n = round(x) and
 * f in [-0.5, 0.5]; 2^f by a degree-5 polynomial (relative error below 2.5e-7
 * in float, measured by the tests); 2^n by building the exponent bits. Below -126
 * the result is exactly 0: no denormals, which would make the kernels slow.
 * 13 operations: n's bits are read off the rounding sum itself, and x < -126
 * (-INFINITY included, which makes NaNs on the way) is simply replaced by 0.
 */
AG_INLINE v16f v_exp2(v16f x)
{
    const v16i tiny = x < v_set1(-126.0f);
    const v16f magic = v_set1(12582912.0f);           /* 1.5 * 2^23: rounds to integers */
    const v16f t = x + magic;                          /* n in the low mantissa bits */
    const v16f n = t - magic;
    const v16f f = x - n;
    /* near-minimax for relative error on [-0.5, 0.5] (Lawson-weighted least
       squares; 7.5e-8 in exact arithmetic) */
    v16f p = v_set1(1.32763742e-3f);
    p = p * f + 9.67553332e-3f;
    p = p * f + 5.55071347e-2f;
    p = p * f + 2.40221199e-1f;
    p = p * f + 6.93146967e-1f;
    p = p * f + 1.00000007f;
    /* t's bits are those of 1.5 * 2^23 plus n; shifted up by 23, only n's survive
       (unsigned: the shift and the sum wrap, as intended, where x < -126) */
    const v16f scale = (v16f)(((v16u)t << 23) + (127u << 23));
    return v_select(tiny, v_set1(0.0f), p * scale);
}

/*
 * AVX2's native 8-lane vectors. A v16f has no register of its own there: GCC
 * keeps it in memory, and its selects become 16 scalar moves, so the AVX2
 * kernels' inner loops work on two halves of a 16-lane row (the same
 * operations lane by lane: the same bits).
 */
typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
AG_INLINE v8f v8_load(const float *p) { return *(const v8f_u *)p; }
AG_INLINE void v8_store(float *p, v8f x) { *(v8f_u *)p = x; }
typedef int32_t v8i __attribute__((vector_size(32)));
/* one broadcast, as v_set1 (an 8-element initializer compiles to 8 inserts) */
AG_INLINE v8f v8_set1(float x)
{
    const v8f v = {x};
#if defined(__clang__)
    return __builtin_shufflevector(v, v, 0, 0, 0, 0, 0, 0, 0, 0);
#else
    return __builtin_shuffle(v, (v8i){0});
#endif
}
AG_INLINE v8f v8_select(v8i mask, v8f a, v8f b)
{
    return (v8f)((mask & (v8i)a) | (~mask & (v8i)b));
}
AG_INLINE v8f v8_max(v8f a, v8f b) { return v8_select(a > b, a, b); }

/* Transposes the 8 x 8 matrix in r[0..7] as v_transpose16 does: 3 stages of
   4 pairs of shuffles (16 ymm registers hold it, with room for the temporaries). */
AG_INLINE void v8_transpose8(v8f r[8])
{
#define AG_LO8(x, b) ((x) >> (b) & 1 ? 8 + ((x) ^ (1 << (b))) : (x))
#define AG_HI8(x, b) ((x) >> (b) & 1 ? 8 + (x) : ((x) ^ (1 << (b))))
#if defined(__clang__)
#define AG_SHUF8(a, c, F, b)                                                                \
    __builtin_shufflevector(a, c, F(0, b), F(1, b), F(2, b), F(3, b), F(4, b), F(5, b),     \
                            F(6, b), F(7, b))
#else
#define AG_SHUF8(a, c, F, b)                                                                \
    __builtin_shuffle(a, c, (v8i){F(0, b), F(1, b), F(2, b), F(3, b), F(4, b), F(5, b),     \
                                  F(6, b), F(7, b)})
#endif
#define AG_STAGE8(b)                                                                        \
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)                                     \
        if (!(k & (1 << (b)))) {                                                            \
            const v8f a = r[k], c = r[k + (1 << (b))];                                      \
            r[k] = AG_SHUF8(a, c, AG_LO8, b);                                               \
            r[k + (1 << (b))] = AG_SHUF8(a, c, AG_HI8, b);                                  \
        }
    AG_STAGE8(2) AG_STAGE8(1) AG_STAGE8(0)
#undef AG_STAGE8
#undef AG_SHUF8
#undef AG_HI8
#undef AG_LO8
}

/* The 16-lane vector of two halves. */
AG_INLINE v16f v_join(v8f lo, v8f hi)
{
    float x[AG_LANES];
    v8_store(x, lo), v8_store(x + 8, hi);
    return v_load(x);
}

/* v_exp2 on 8 lanes (the same operations) */
AG_INLINE v8f v8_exp2(v8f x)
{
    const v8i tiny = x < v8_set1(-126.0f);
    const v8f magic = v8_set1(12582912.0f);
    const v8f t = x + magic;
    const v8f n = t - magic;
    const v8f f = x - n;
    v8f p = v8_set1(1.32763742e-3f);
    p = p * f + 9.67553332e-3f;
    p = p * f + 5.55071347e-2f;
    p = p * f + 2.40221199e-1f;
    p = p * f + 6.93146967e-1f;
    p = p * f + 1.00000007f;
    typedef uint32_t v8u __attribute__((vector_size(32)));
    const v8f scale = (v8f)(((v8u)t << 23) + (127u << 23));
    const v8f r = p * scale;
    return (v8f)(~tiny & (v8i)r);
}

/* e^x on 8 lanes for x <= 0 (0 below -87.3, where a float has no normal
   value): x = n ln 2 + r with ln 2 in two parts (Cody and Waite), so r is
   exact and |r| <= ln(2)/2; e^r by Cephes' expf polynomial; times 2^n made
   from its bits. Within 1 ulp of expf on [-88, 0] (generic.c's linear
   feature map, score_rows.c's softmax); test_score.c's linear_closed_form
   runs phi on inputs down to -80. Unlike exp2 of scores times LOG2E, a score
   near 1e4 keeps its float's precision (in log2 units it lost 1e-3). */
AG_INLINE v8f v8_exp_nonpos(v8f x)
{
    typedef uint32_t v8u __attribute__((vector_size(32)));
    const v8i tiny = x < v8_set1(-87.33f);
    const v8f magic = v8_set1(12582912.0f);   /* 1.5 * 2^23: adding rounds to an integer */
    const v8f t = x * v8_set1(1.44269504f) + magic, n = t - magic;   /* 1.44...: log2 e */
    const v8f r = x - n * v8_set1(0.693359375f) - n * v8_set1(-2.12194440e-4f);
    v8f p = v8_set1(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const v8f scale = (v8f)(((v8u)t << 23) + (127u << 23));
    return (v8f)(~tiny & (v8i)(p * scale));
}

#endif
