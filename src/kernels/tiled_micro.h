/*
 * The tiled kernel's tiles and micro-kernels (tiled.c's file comment explains
 * them), shared with the streamed form of its forward (tiled_stream.c), which
 * must run the very same operations to give the same bits.
 */
#ifndef AG_TILED_MICRO_H
#define AG_TILED_MICRO_H

#include <stdint.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

#define BK 64        /* at most this many sources per tile */
#define QV_MAX 4     /* vectors of destinations per block */
#define BQ_MAX (QV_MAX * AG_LANES)

typedef struct {
    float *qt;       /* [d][BQ] */
    float *s;        /* [BK][BQ] */
    float *acc;      /* [d][BQ] */
    float *m, *l;    /* [BQ] */
    int32_t *lo, *hi;/* [BQ] each lane's run [lo, hi) */
} tile_buf_t;

/*
 * The micro-kernels keep their accumulators in named variables: GCC does not
 * keep an array of vectors in registers, and a spill per step halved the speed.
 * A "4x4" block is 4 rows (or channels) times 4 vectors of destinations, the
 * "8x1" block 8 times 1; both need 16-20 of AVX-512's 32 vector registers.
 */

/* S rows jj..jj+3, 4 vectors of lanes: s_rv = sum_c K[j+r][c] * Qt[c][v];
   mx[v] takes the largest of each lane while the scores are in registers
   (mx NULL: the backward, which needs no max). */
AG_INLINE void score_4x4(float *restrict S, const float *restrict qt, const float *k0,
                         int64_t HD, int64_t d, v16f *mx)
{
    v16f s00 = {0}, s01 = {0}, s02 = {0}, s03 = {0}, s10 = {0}, s11 = {0}, s12 = {0}, s13 = {0};
    v16f s20 = {0}, s21 = {0}, s22 = {0}, s23 = {0}, s30 = {0}, s31 = {0}, s32 = {0}, s33 = {0};
#pragma GCC unroll 4
    for (int64_t c = 0; c < d; c++) {
        const float *q = qt + c * 4 * AG_LANES;
        const v16f q0 = v_load(q), q1 = v_load(q + 16), q2 = v_load(q + 32), q3 = v_load(q + 48);
        v16f k = v_set1(k0[c]);
        s00 += k * q0, s01 += k * q1, s02 += k * q2, s03 += k * q3;
        k = v_set1(k0[HD + c]);
        s10 += k * q0, s11 += k * q1, s12 += k * q2, s13 += k * q3;
        k = v_set1(k0[2 * HD + c]);
        s20 += k * q0, s21 += k * q1, s22 += k * q2, s23 += k * q3;
        k = v_set1(k0[3 * HD + c]);
        s30 += k * q0, s31 += k * q1, s32 += k * q2, s33 += k * q3;
    }
    v_store(S, s00), v_store(S + 16, s01), v_store(S + 32, s02), v_store(S + 48, s03);
    v_store(S + 64, s10), v_store(S + 80, s11), v_store(S + 96, s12), v_store(S + 112, s13);
    v_store(S + 128, s20), v_store(S + 144, s21), v_store(S + 160, s22), v_store(S + 176, s23);
    v_store(S + 192, s30), v_store(S + 208, s31), v_store(S + 224, s32), v_store(S + 240, s33);
    if (!mx)
        return;
    mx[0] = v_max(mx[0], v_max(v_max(s00, s10), v_max(s20, s30)));
    mx[1] = v_max(mx[1], v_max(v_max(s01, s11), v_max(s21, s31)));
    mx[2] = v_max(mx[2], v_max(v_max(s02, s12), v_max(s22, s32)));
    mx[3] = v_max(mx[3], v_max(v_max(s03, s13), v_max(s23, s33)));
}

/* S rows jj..jj+7, 1 vector of lanes. */
AG_INLINE void score_8x1(float *restrict S, const float *restrict qt, const float *k0,
                         int64_t HD, int64_t d, v16f *mx)
{
    v16f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
#pragma GCC unroll 4
    for (int64_t c = 0; c < d; c++) {
        const v16f q = v_load(qt + c * AG_LANES);
        s0 += v_set1(k0[c]) * q, s1 += v_set1(k0[HD + c]) * q;
        s2 += v_set1(k0[2 * HD + c]) * q, s3 += v_set1(k0[3 * HD + c]) * q;
        s4 += v_set1(k0[4 * HD + c]) * q, s5 += v_set1(k0[5 * HD + c]) * q;
        s6 += v_set1(k0[6 * HD + c]) * q, s7 += v_set1(k0[7 * HD + c]) * q;
    }
    v_store(S, s0), v_store(S + 16, s1), v_store(S + 32, s2), v_store(S + 48, s3);
    v_store(S + 64, s4), v_store(S + 80, s5), v_store(S + 96, s6), v_store(S + 112, s7);
    if (!mx)
        return;
    mx[0] = v_max(mx[0], v_max(v_max(v_max(s0, s1), v_max(s2, s3)),
                               v_max(v_max(s4, s5), v_max(s6, s7))));
}

/*
 * The blocks for AVX2's 16 ymm registers, in its native 8-lane vectors. A
 * v16f has no register of its own there: GCC keeps such vectors in memory and
 * every FMA of the wide blocks took an operand from the stack (measured: 0.03
 * of the FMA peak). Here R = 4 rows (or channels) of one 16-lane vector of
 * the block, as two 8-lane halves: 8 accumulators, 2 registers for the
 * queries, 1 for the broadcast. Strided by BQ, a wide block runs it once per
 * vector of lanes. Every sum is taken in the order of the wide blocks: the
 * same bits.
 */
AG_INLINE void score_4x1_ymm(float *restrict S, const float *restrict qt, const float *k0,
                             int64_t HD, int64_t d, int64_t BQ, float *mx)
{
    v8f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, t0 = {0}, t1 = {0}, t2 = {0}, t3 = {0};
#pragma GCC unroll 4
    for (int64_t c = 0; c < d; c++) {
        const v8f q = v8_load(qt + c * BQ), r = v8_load(qt + c * BQ + 8);
        v8f k = v8_set1(k0[c]);
        s0 += k * q, t0 += k * r;
        k = v8_set1(k0[HD + c]);
        s1 += k * q, t1 += k * r;
        k = v8_set1(k0[2 * HD + c]);
        s2 += k * q, t2 += k * r;
        k = v8_set1(k0[3 * HD + c]);
        s3 += k * q, t3 += k * r;
    }
    v8_store(S, s0), v8_store(S + 8, t0), v8_store(S + BQ, s1), v8_store(S + BQ + 8, t1);
    v8_store(S + 2 * BQ, s2), v8_store(S + 2 * BQ + 8, t2);
    v8_store(S + 3 * BQ, s3), v8_store(S + 3 * BQ + 8, t3);
    if (mx) {   /* its 16 lanes as two halves (a v16f max is 16 scalar selects here) */
        v8_store(mx, v8_max(v8_load(mx), v8_max(v8_max(s0, s1), v8_max(s2, s3))));
        v8_store(mx + 8, v8_max(v8_load(mx + 8), v8_max(v8_max(t0, t1), v8_max(t2, t3))));
    }
}

/* The same for 6 rows: 12 accumulators, 15 of the 16 ymm registers. Zen 3
   issues 2 FMAs a cycle of latency 4: 8 chains keep the pipes exactly full and
   any stall shows; 12 leave slack. */
AG_INLINE void score_6x1_ymm(float *restrict S, const float *restrict qt, const float *k0,
                             int64_t HD, int64_t d, int64_t BQ, float *mx)
{
    v8f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0};
    v8f t0 = {0}, t1 = {0}, t2 = {0}, t3 = {0}, t4 = {0}, t5 = {0};
#pragma GCC unroll 2
    for (int64_t c = 0; c < d; c++) {
        const v8f q = v8_load(qt + c * BQ), r = v8_load(qt + c * BQ + 8);
        v8f k = v8_set1(k0[c]);
        s0 += k * q, t0 += k * r;
        k = v8_set1(k0[HD + c]);
        s1 += k * q, t1 += k * r;
        k = v8_set1(k0[2 * HD + c]);
        s2 += k * q, t2 += k * r;
        k = v8_set1(k0[3 * HD + c]);
        s3 += k * q, t3 += k * r;
        k = v8_set1(k0[4 * HD + c]);
        s4 += k * q, t4 += k * r;
        k = v8_set1(k0[5 * HD + c]);
        s5 += k * q, t5 += k * r;
    }
    v8_store(S, s0), v8_store(S + 8, t0), v8_store(S + BQ, s1), v8_store(S + BQ + 8, t1);
    v8_store(S + 2 * BQ, s2), v8_store(S + 2 * BQ + 8, t2);
    v8_store(S + 3 * BQ, s3), v8_store(S + 3 * BQ + 8, t3);
    v8_store(S + 4 * BQ, s4), v8_store(S + 4 * BQ + 8, t4);
    v8_store(S + 5 * BQ, s5), v8_store(S + 5 * BQ + 8, t5);
    if (mx) {
        v8_store(mx, v8_max(v8_load(mx), v8_max(v8_max(v8_max(s0, s1), v8_max(s2, s3)),
                                                 v8_max(s4, s5))));
        v8_store(mx + 8, v8_max(v8_load(mx + 8), v8_max(v8_max(v8_max(t0, t1), v8_max(t2, t3)),
                                                         v8_max(t4, t5))));
    }
}

/* acc channels c..c+5 of one vector of lanes, as accumulate_4x1_ymm. */
AG_INLINE void accumulate_6x1_ymm(float *restrict acc, const float *restrict P,
                                  const float *v0, int64_t HD, int64_t bk, int64_t BQ,
                                  const float *alpha)
{
    const v8f x = v8_load(alpha), y = v8_load(alpha + 8);
    v8f a0 = v8_load(acc) * x, b0 = v8_load(acc + 8) * y;
    v8f a1 = v8_load(acc + BQ) * x, b1 = v8_load(acc + BQ + 8) * y;
    v8f a2 = v8_load(acc + 2 * BQ) * x, b2 = v8_load(acc + 2 * BQ + 8) * y;
    v8f a3 = v8_load(acc + 3 * BQ) * x, b3 = v8_load(acc + 3 * BQ + 8) * y;
    v8f a4 = v8_load(acc + 4 * BQ) * x, b4 = v8_load(acc + 4 * BQ + 8) * y;
    v8f a5 = v8_load(acc + 5 * BQ) * x, b5 = v8_load(acc + 5 * BQ + 8) * y;
#pragma GCC unroll 2
    for (int64_t jj = 0; jj < bk; jj++) {
        const v8f p = v8_load(P + jj * BQ), q = v8_load(P + jj * BQ + 8);
        const float *v = v0 + jj * HD;
        v8f w = v8_set1(v[0]);
        a0 += w * p, b0 += w * q;
        w = v8_set1(v[1]);
        a1 += w * p, b1 += w * q;
        w = v8_set1(v[2]);
        a2 += w * p, b2 += w * q;
        w = v8_set1(v[3]);
        a3 += w * p, b3 += w * q;
        w = v8_set1(v[4]);
        a4 += w * p, b4 += w * q;
        w = v8_set1(v[5]);
        a5 += w * p, b5 += w * q;
    }
    v8_store(acc, a0), v8_store(acc + 8, b0), v8_store(acc + BQ, a1);
    v8_store(acc + BQ + 8, b1), v8_store(acc + 2 * BQ, a2), v8_store(acc + 2 * BQ + 8, b2);
    v8_store(acc + 3 * BQ, a3), v8_store(acc + 3 * BQ + 8, b3);
    v8_store(acc + 4 * BQ, a4), v8_store(acc + 4 * BQ + 8, b4);
    v8_store(acc + 5 * BQ, a5), v8_store(acc + 5 * BQ + 8, b5);
}

/* acc channels c..c+3 of one vector of lanes (rows BQ apart), as accumulate_4x4. */
AG_INLINE void accumulate_4x1_ymm(float *restrict acc, const float *restrict P,
                                  const float *v0, int64_t HD, int64_t bk, int64_t BQ,
                                  const float *alpha)
{
    const v8f x = v8_load(alpha), y = v8_load(alpha + 8);
    v8f a0 = v8_load(acc) * x, b0 = v8_load(acc + 8) * y;
    v8f a1 = v8_load(acc + BQ) * x, b1 = v8_load(acc + BQ + 8) * y;
    v8f a2 = v8_load(acc + 2 * BQ) * x, b2 = v8_load(acc + 2 * BQ + 8) * y;
    v8f a3 = v8_load(acc + 3 * BQ) * x, b3 = v8_load(acc + 3 * BQ + 8) * y;
#pragma GCC unroll 4
    for (int64_t jj = 0; jj < bk; jj++) {
        const v8f p = v8_load(P + jj * BQ), q = v8_load(P + jj * BQ + 8);
        const float *v = v0 + jj * HD;
        v8f w = v8_set1(v[0]);
        a0 += w * p, b0 += w * q;
        w = v8_set1(v[1]);
        a1 += w * p, b1 += w * q;
        w = v8_set1(v[2]);
        a2 += w * p, b2 += w * q;
        w = v8_set1(v[3]);
        a3 += w * p, b3 += w * q;
    }
    v8_store(acc, a0), v8_store(acc + 8, b0), v8_store(acc + BQ, a1);
    v8_store(acc + BQ + 8, b1), v8_store(acc + 2 * BQ, a2), v8_store(acc + 2 * BQ + 8, b2);
    v8_store(acc + 3 * BQ, a3), v8_store(acc + 3 * BQ + 8, b3);
}

/* Scores of rows [0, bk) of the tile starting at source j0: S = K_tile Qt;
   mx[v] = the largest score of each lane (before masking). ymm: AVX2's
   blocks (else the wide ones, for AVX-512's 32 registers). */
AG_INLINE void score_tile(float *restrict S, const float *restrict qt, const float *K,
                          int64_t HD, int64_t off, int64_t d, int64_t j0, int64_t bk,
                          v16f *mx, const int QV, const int ymm)
{
    const int RB = QV == 4 ? 4 : 8;
    const int64_t BQ = QV * AG_LANES;
    int64_t jj = 0;
    /* AVX2, wide blocks, rows in cache: 6-row blocks, leaving the 4-row ones
       a multiple of 4 (bk is one; the window's narrow blocks ran no faster
       with them), each vector of lanes in turn (its Qt columns stay in L1:
       2-3% faster on Zen 3, whose L1 holds 32 KB) */
    const int64_t n6 = ymm && QV == 4 && HD == d ? bk / 12 * 2 : 0;
    for (int v = 0; v < QV && n6; v++)
        for (jj = 0; jj < 6 * n6; jj += 6)
            score_6x1_ymm(S + jj * BQ + v * AG_LANES, qt + v * AG_LANES,
                          K + (j0 + jj) * HD + off, HD, d, BQ, mx ? (float *)&mx[v] : NULL);
    for (; jj + RB <= bk; jj += RB) {
        const float *k0 = K + (j0 + jj) * HD + off;
        /* one head's rows among several lie H*d apart, a pattern the hardware
           prefetchers miss: ask for the tile's next block of K rows (V's, or
           blocks further ahead, measured slower) */
        if (HD != d && jj + 2 * RB <= bk)
            for (int r = 0; r < RB; r++)
                for (int64_t c = 0; c < d; c += AG_LANES)
                    __builtin_prefetch(k0 + (RB + r) * HD + c, 0, 3);
        if (ymm)
            for (int r = 0; r < RB; r += 4)
#pragma GCC unroll 4
                for (int v = 0; v < QV; v++)
                    score_4x1_ymm(S + (jj + r) * BQ + v * AG_LANES, qt + v * AG_LANES,
                                  k0 + r * HD, HD, d, BQ, mx ? (float *)&mx[v] : NULL);
        else if (QV == 4)
            score_4x4(S + jj * BQ, qt, k0, HD, d, mx);
        else
            score_8x1(S + jj * BQ, qt, k0, HD, d, mx);
    }
    for (; jj < bk; jj++) {   /* the last rows, one at a time */
        const float *k0 = K + (j0 + jj) * HD + off;
        for (int v = 0; v < QV; v++) {
            v16f acc = {0};
            for (int64_t c = 0; c < d; c++)
                acc += v_set1(k0[c]) * v_load(qt + c * BQ + v * AG_LANES);
            v_store(S + jj * BQ + v * AG_LANES, acc);
            if (mx)
                mx[v] = v_max(mx[v], acc);
        }
    }
}

/* acc channels c..c+3, 4 vectors: a_kv = alpha_v a_kv + sum_jj V[j0+jj][c+k] P[jj][v]
   (the rescale of the online softmax, done as the accumulators are loaded). */
AG_INLINE void accumulate_4x4(float *restrict acc, const float *restrict P, const float *v0,
                              int64_t HD, int64_t bk, const v16f *alpha)
{
    float *a = acc;
    const v16f x0 = alpha[0], x1 = alpha[1], x2 = alpha[2], x3 = alpha[3];
    v16f a00 = v_load(a) * x0, a01 = v_load(a + 16) * x1, a02 = v_load(a + 32) * x2;
    v16f a03 = v_load(a + 48) * x3, a10 = v_load(a + 64) * x0, a11 = v_load(a + 80) * x1;
    v16f a12 = v_load(a + 96) * x2, a13 = v_load(a + 112) * x3, a20 = v_load(a + 128) * x0;
    v16f a21 = v_load(a + 144) * x1, a22 = v_load(a + 160) * x2, a23 = v_load(a + 176) * x3;
    v16f a30 = v_load(a + 192) * x0, a31 = v_load(a + 208) * x1, a32 = v_load(a + 224) * x2;
    v16f a33 = v_load(a + 240) * x3;
#pragma GCC unroll 4
    for (int64_t jj = 0; jj < bk; jj++) {
        const float *p = P + jj * 4 * AG_LANES, *v = v0 + jj * HD;
        const v16f p0 = v_load(p), p1 = v_load(p + 16), p2 = v_load(p + 32), p3 = v_load(p + 48);
        v16f x = v_set1(v[0]);
        a00 += x * p0, a01 += x * p1, a02 += x * p2, a03 += x * p3;
        x = v_set1(v[1]);
        a10 += x * p0, a11 += x * p1, a12 += x * p2, a13 += x * p3;
        x = v_set1(v[2]);
        a20 += x * p0, a21 += x * p1, a22 += x * p2, a23 += x * p3;
        x = v_set1(v[3]);
        a30 += x * p0, a31 += x * p1, a32 += x * p2, a33 += x * p3;
    }
    v_store(a, a00), v_store(a + 16, a01), v_store(a + 32, a02), v_store(a + 48, a03);
    v_store(a + 64, a10), v_store(a + 80, a11), v_store(a + 96, a12), v_store(a + 112, a13);
    v_store(a + 128, a20), v_store(a + 144, a21), v_store(a + 160, a22), v_store(a + 176, a23);
    v_store(a + 192, a30), v_store(a + 208, a31), v_store(a + 224, a32), v_store(a + 240, a33);
}

/* acc channels c..c+7, 1 vector. */
AG_INLINE void accumulate_8x1(float *restrict acc, const float *restrict P, const float *v0,
                              int64_t HD, int64_t bk, const v16f *alpha)
{
    float *a = acc;
    const v16f x = alpha[0];
    v16f a0 = v_load(a) * x, a1 = v_load(a + 16) * x, a2 = v_load(a + 32) * x;
    v16f a3 = v_load(a + 48) * x, a4 = v_load(a + 64) * x, a5 = v_load(a + 80) * x;
    v16f a6 = v_load(a + 96) * x, a7 = v_load(a + 112) * x;
#pragma GCC unroll 4
    for (int64_t jj = 0; jj < bk; jj++) {
        const v16f p = v_load(P + jj * AG_LANES);
        const float *v = v0 + jj * HD;
        a0 += v_set1(v[0]) * p, a1 += v_set1(v[1]) * p, a2 += v_set1(v[2]) * p;
        a3 += v_set1(v[3]) * p, a4 += v_set1(v[4]) * p, a5 += v_set1(v[5]) * p;
        a6 += v_set1(v[6]) * p, a7 += v_set1(v[7]) * p;
    }
    v_store(a, a0), v_store(a + 16, a1), v_store(a + 32, a2), v_store(a + 48, a3);
    v_store(a + 64, a4), v_store(a + 80, a5), v_store(a + 96, a6), v_store(a + 112, a7);
}

/* acc [d][BQ] = alpha acc + V_tile^T P for rows [0, bk) of the tile at j0
   (ymm as score_tile's). */
AG_INLINE void accumulate_tile(float *restrict acc, const float *restrict P, const float *V,
                               int64_t HD, int64_t off, int64_t d, int64_t j0, int64_t bk,
                               const v16f *alpha, const int QV, const int ymm)
{
    const int KB = ymm || QV == 4 ? 4 : 8;
    const int64_t BQ = QV * AG_LANES;
    int64_t c = 0;
    /* AVX2: 6-channel blocks, as many as leave the 4-channel ones the most
       channels (d = 32: 4 and 2, not 5 and none with 2 channels left over, which
       took 40% of a causal forward's time) */
    int64_t n6 = ymm ? d / 6 : 0;
    if (n6 > 0 && (d - 6 * n6) % 4 >= 2)
        n6--;
    for (; c < 6 * n6; c += 6)
#pragma GCC unroll 4
        for (int v = 0; v < QV; v++)
            accumulate_6x1_ymm(acc + c * BQ + v * AG_LANES, P + v * AG_LANES,
                               V + j0 * HD + off + c, HD, bk, BQ, (const float *)&alpha[v]);
    for (; c + KB <= d; c += KB) {
        if (ymm)
#pragma GCC unroll 4
            for (int v = 0; v < QV; v++)
                accumulate_4x1_ymm(acc + c * BQ + v * AG_LANES, P + v * AG_LANES,
                                   V + j0 * HD + off + c, HD, bk, BQ, (const float *)&alpha[v]);
        else if (QV == 4)
            accumulate_4x4(acc + c * BQ, P, V + j0 * HD + off + c, HD, bk, alpha);
        else
            accumulate_8x1(acc + c * BQ, P, V + j0 * HD + off + c, HD, bk, alpha);
    }
    for (; c < d; c++)        /* the last channels, one at a time */
        for (int v = 0; v < QV; v++) {
            float *out = acc + c * BQ + v * AG_LANES;
            const float *p = P + v * AG_LANES, *al = (const float *)&alpha[v];
            if (ymm) {   /* in halves: a v16f lives on the stack there (simd.h) */
                v8f a = v8_load(out) * v8_load(al), b = v8_load(out + 8) * v8_load(al + 8);
                for (int64_t jj = 0; jj < bk; jj++) {
                    const v8f w = v8_set1(V[(j0 + jj) * HD + off + c]);
                    a += w * v8_load(p + jj * BQ), b += w * v8_load(p + jj * BQ + 8);
                }
                v8_store(out, a), v8_store(out + 8, b);
                continue;
            }
            v16f a = v_load(out) * alpha[v];
            for (int64_t jj = 0; jj < bk; jj++)
                a += v_set1(V[(j0 + jj) * HD + off + c]) * v_load(p + jj * BQ);
            v_store(out, a);
        }
}

/* Qt [d][BQ] = scale2 * (the nq rows at Q, stride HD)^T, zero beyond nq:
   16 x 16 blocks transposed in registers, leftover channels one by one. AVX2
   (ymm) transposes 8 x 8 blocks: a 16 x 16 one needs 32 ymm there (GCC
   spilled it and made its shuffles scalar). The same products either way. */
AG_INLINE void pack_queries(float *restrict qt, const float *Q, int64_t HD, int64_t d,
                            int64_t nq, float scale2, const int QV, const int ymm)
{
    const int64_t BQ = QV * AG_LANES;
    if (ymm) {   /* 8 x 8 blocks (a 16 x 16 transpose needs 32 ymm registers) */
        const v8f scale = v8_set1(scale2);
        int64_t c0 = 0;
        for (; c0 + 8 <= d; c0 += 8)
            for (int64_t i0 = 0; i0 < BQ; i0 += 8) {
                v8f r[8];
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++)
                    r[k] = i0 + k < nq ? v8_load(Q + (i0 + k) * HD + c0) * scale : v8_set1(0.0f);
                v8_transpose8(r);
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++)
                    v8_store(qt + (c0 + k) * BQ + i0, r[k]);
            }
        for (; c0 < d; c0++)
            for (int64_t i = 0; i < BQ; i++)
                qt[c0 * BQ + i] = i < nq ? Q[i * HD + c0] * scale2 : 0.0f;
        return;
    }
    const v16f scale = v_set1(scale2);
    int64_t c0 = 0;
    for (; c0 + AG_LANES <= d; c0 += AG_LANES)
        for (int v = 0; v < QV; v++) {
            v16f r[AG_LANES];
#pragma GCC unroll 16
            for (int k = 0; k < AG_LANES; k++) {
                const int64_t lane = v * AG_LANES + k;
                r[k] = lane < nq ? v_load(Q + lane * HD + c0) * scale : v_set1(0.0f);
            }
            v_transpose16(r);
#pragma GCC unroll 16
            for (int k = 0; k < AG_LANES; k++)
                v_store(qt + (c0 + k) * BQ + v * AG_LANES, r[k]);
        }
    for (; c0 < d; c0++)
        for (int64_t i = 0; i < BQ; i++)
            qt[c0 * BQ + i] = i < nq ? Q[i * HD + c0] * scale2 : 0.0f;
}

/* The nq rows at M (stride HD) = (acc [d][BQ] / l)^T, the same way round
   (ymm: in 8 x 8 blocks, as pack_queries; the same products). */
AG_INLINE void store_messages(float *M, const float *restrict acc, const float *l, int64_t HD,
                              int64_t d, int64_t nq, const int QV, const int ymm)
{
    const int64_t BQ = QV * AG_LANES;
    if (ymm) {   /* 8 x 8 blocks, as pack_queries */
        for (int64_t i0 = 0; i0 < nq; i0 += 8) {
            /* a lane with no in-edges has sum 0 and a zero row */
            float invs[8];
            for (int k = 0; k < 8; k++)
                invs[k] = l[i0 + k] > 0.0f ? 1.0f / l[i0 + k] : 0.0f;
            const v8f inv = v8_load(invs);
            int64_t c0 = 0;
            for (; c0 + 8 <= d - d % AG_LANES; c0 += 8) {
                v8f r[8];
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++)
                    r[k] = v8_load(acc + (c0 + k) * BQ + i0) * inv;
                v8_transpose8(r);
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++)
                    if (i0 + k < nq)
                        v8_store(M + (i0 + k) * HD + c0, r[k]);
            }
            for (int64_t i = i0; i < nq && i < i0 + 8; i++)   /* as below: a division */
                for (int64_t c = c0; c < d; c++)
                    M[i * HD + c] = l[i] > 0 ? acc[c * BQ + i] / l[i] : 0;
        }
        return;
    }
    for (int v = 0; v < QV; v++) {
        const v16f sum = v_load(l + v * AG_LANES);
        /* a lane with no in-edges has sum 0 and a zero row */
        const v16f inv = v_select(sum > v_set1(0.0f), v_set1(1.0f) / sum, v_set1(0.0f));
        int64_t c0 = 0;
        for (; c0 + AG_LANES <= d; c0 += AG_LANES) {
            v16f r[AG_LANES];
#pragma GCC unroll 16
            for (int k = 0; k < AG_LANES; k++)
                r[k] = v_load(acc + (c0 + k) * BQ + v * AG_LANES) * inv;
            v_transpose16(r);
#pragma GCC unroll 16
            for (int k = 0; k < AG_LANES; k++)
                if (v * AG_LANES + k < nq)
                    v_store(M + (v * AG_LANES + k) * HD + c0, r[k]);
        }
        for (; c0 < d; c0++)
            for (int k = 0; k < AG_LANES && v * AG_LANES + k < nq; k++) {
                const float s = l[v * AG_LANES + k];
                M[(v * AG_LANES + k) * HD + c0] = s > 0 ? acc[c0 * BQ + v * AG_LANES + k] / s : 0;
            }
    }
}

/* The sources of the block of destinations i0 .. i0+nq-1, a lane each (BQ
   lanes; a lane past nq or a destination without a source holds [0, 0)): each
   lane's run [lo, hi) of sources (one run a destination: the tiled kernel's
   graphs), their span [jmin, jmax) ([0, 0) when no lane has a source), and the
   largest start and smallest end, between which a tile is inside every run.
   The forward, the backward's pass A and the streamed forward cut the same
   tiles from it. */
typedef struct {
    int64_t jmin, jmax, max_lo, min_hi;
} block_span_t;

AG_INLINE block_span_t block_lanes(const ag_nbhd_t *nb, int64_t i0, int64_t nq, int BQ,
                                   int32_t *lane_lo, int32_t *lane_hi)
{
    block_span_t s = {INT64_MAX, 0, 0, INT64_MAX};
    for (int i = 0; i < BQ; i++) {
        int64_t lo = 0, hi = 0;
        if (i < nq && nb->run_ptr[i0 + i + 1] > nb->run_ptr[i0 + i]) {
            const int64_t r = nb->run_ptr[i0 + i];
            lo = nb->run_src[r], hi = lo + nb->run_len[r];
            s.jmin = lo < s.jmin ? lo : s.jmin, s.jmax = hi > s.jmax ? hi : s.jmax;
        }
        lane_lo[i] = (int32_t)lo, lane_hi[i] = (int32_t)hi;
        s.max_lo = lo > s.max_lo ? lo : s.max_lo, s.min_hi = hi < s.min_hi ? hi : s.min_hi;
    }
    if (s.jmax == 0)   /* no lane has a source: no tiles (and no overflow in cut_tiles) */
        s.jmin = 0;
    return s;
}

/* Tiles of rows over [*lo, *hi): the span widened to whole register blocks
   of rows (rows outside a lane's run are masked anyway), cut into equal tiles;
   returns their size. Narrow blocks take at most 32 rows a tile: then most of
   a window's tiles lie inside every lane's run and need no masks (+1-2%). */
AG_INLINE int64_t cut_tiles(int64_t *lo, int64_t *hi, int64_t N, const int QV)
{
    const int64_t RB = QV == 4 ? 4 : 8, bk_max = QV == 4 ? BK : BK / 2;
    *lo -= *lo % RB;
    *hi = *hi + (RB - *hi % RB) % RB > N ? *hi : *hi + (RB - *hi % RB) % RB;
    const int64_t span = *hi - *lo, n_tiles = (span + bk_max - 1) / bk_max;
    const int64_t tile = n_tiles ? (span + n_tiles - 1) / n_tiles : bk_max;
    return (tile + RB - 1) / RB * RB;
}

/* Every tiled kernel is compiled six times, once per instruction set and block
   width (QV 4 or 1; ymm: the 8-lane blocks). VARIANT(name, target, qv, ymm)
   defines one form; stem##_qV_isa names it, and isa.c registers it. The baseline (SSE2) takes the
   8-lane form too: its 16-lane form, lowered to SSE by GCC, took 30 of
   tiled.c's 44 s of compiling (a plain `make` of a fresh clone: 73 s, now
   56 s), for a variant that serves only CPUs without AVX2, at 2.2x its speed. */
#define AG_TILED_VARIANTS(VARIANT, stem)                                                  \
    VARIANT(stem##_q4_avx512, AG_TARGET_AVX512, 4, 0)                                     \
    VARIANT(stem##_q1_avx512, AG_TARGET_AVX512, 1, 0)                                     \
    VARIANT(stem##_q4_avx2, AG_TARGET_AVX2, 4, 1)                                         \
    VARIANT(stem##_q1_avx2, AG_TARGET_AVX2, 1, 1)                                         \
    VARIANT(stem##_q4_base, , 4, 1)                                                       \
    VARIANT(stem##_q1_base, , 1, 1)

/* How a tile's scores are masked where it is not full: each lane's one run
   [lo[i], hi[i]) of sources (the tiled kernel's graphs), or, where bits is
   set (a partial tile of the block-sparse lists, blocks.c), a 16-bit mask
   per row of the tile and vector of lanes: bits[jj * QV + v], bit k set
   where lane 16v+k reads row jj. */
typedef struct {
    const int32_t *lo, *hi;
    const uint16_t *bits;
} tile_mask_t;

/* S [n][BQ]: -inf where the row's mask bit of the lane is clear (bits as
   tile_mask_t's), in 8-lane halves: two tests and selects a vector. */
AG_INLINE void mask_bits(float *restrict S, int BQ, const uint16_t *bits, int64_t n,
                         const int QV)
{
    const v8i low = {1, 2, 4, 8, 16, 32, 64, 128}, high = low * 256, zero = {0};
    const v8f ninf = v8_set1(-__builtin_inff());
    for (int64_t jj = 0; jj < n; jj++)
        for (int v = 0; v < QV; v++) {
            const int b = bits[jj * QV + v];
            if (b == 0xffff)
                continue;
            const v8i m = zero + b;
            float *row = S + jj * BQ + v * AG_LANES;
            v8_store(row, v8_select((m & low) != 0, v8_load(row), ninf));
            v8_store(row + 8, v8_select((m & high) != 0, v8_load(row + 8), ninf));
        }
}

/* Masks S [bk][BQ] of the tile at source j0: every row outside each lane's
   sources gets -inf. With runs, only the rows before each lane's run and
   after it are written. */
AG_INLINE void mask_tile(float *restrict S, int BQ, const tile_mask_t *mk, int64_t j0,
                         int64_t bk, const int QV)
{
    if (mk->bits) {
        mask_bits(S, BQ, mk->bits, bk, QV);
        return;
    }
    for (int i = 0; i < BQ; i++) {
        const int64_t lo = mk->lo[i] > j0 ? mk->lo[i] - j0 : 0;
        const int64_t hi = mk->hi[i] > j0 ? mk->hi[i] - j0 : 0;
        for (int64_t jj = 0; jj < bk && jj < lo; jj++)
            S[jj * BQ + i] = -__builtin_inff();
        for (int64_t jj = hi > lo ? hi : lo; jj < bk; jj++)
            S[jj * BQ + i] = -__builtin_inff();
    }
}

/* A tile of the block-sparse lists (blocks.c) in one int64: its first row
   j0, its rows bk (<= BK) and whether it is full (every lane reads every
   row); a partial tile's masks follow it (TILE_WORDS words in all). */
#define TILE_PACK(j0, bk, full) ((int64_t)(j0) << 8 | (int64_t)(bk) << 1 | (int64_t)(full))
#define TILE_J0(t) ((t) >> 8)
#define TILE_BK(t) ((t) >> 1 & 127)
#define TILE_FULL(t) ((int)((t) & 1))
#define TILE_WORDS(t, QV) (TILE_FULL(t) ? 1 : 1 + (TILE_BK(t) * (QV) * 2 + 7) / 8)

/* The online-softmax state of a block's lanes between tiles. */
typedef struct {
    v16f m[QV_MAX], l[QV_MAX], u[QV_MAX], dist[QV_MAX];
} ag_i_lanes_t;

/* One tile [j0, j0+bk) of the block of destinations at i0 (tiled.c): scores
   against Qt (qt), masks (mk) unless full, online softmax into ls and the
   accumulator acc [d][BQ]; S [BK][BQ] scratch; x: figures (or NULL). */
typedef void ag_i_tile_f(const float *qt, const float *K, const float *V, int64_t HD,
                         int64_t off, int64_t d, int64_t i0, int64_t j0, int64_t bk, int full,
                         const tile_mask_t *mk, float *S, float *acc, ag_i_lanes_t *ls,
                         const kext_t *x);
typedef ag_i_tile_f *ag_i_tile_fn;

#endif
