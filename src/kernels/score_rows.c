/*
 * The score kinds on vectors: one node's row of the generic kernel (generic.c
 * keeps the plan, the per-node terms, the states and the chain rule through
 * the terms), per instruction set. For destination i and head h:
 *   1. the messages' scores, s = beta raw + ALiBi, raw from the per-node
 *      terms (additive), q.k (dot kinds, cosine) or a''.|q + k| and the terms
 *      (gatv2, as generic.c splits a.LeakyReLU), four sources at once;
 *   2. an exact softmax over them: max, exp, sum, 8 messages a vector (in
 *      natural units, as the generic kernel's: see v8_exp_nonpos);
 *   3. the weighted sum of the sources' rows of V, two accumulators for
 *      alternate messages, 32 channels in registers.
 * The backward's passes are those of the generic kernel: per destination the
 * scores again, dA = dM_i . v_j, D, and dq = sum dr k_j (additive: T = sum dr
 * LeakyReLU'; gatv2: a times LeakyReLU' per channel); per source, each
 * message's weight and dA again from its destination's state (the same
 * operations on the same floats: the same bits), then dv = sum a dM_i and
 * dk = sum dr q_i. Attention dropout multiplies the weights (and dA) by its
 * factors, the keys drawn once a message for every head.
 *
 * Every sum runs in one order on every instruction set: dot products in 16
 * lanes (lane l takes channels l, l+16, ...; dot_end), weighted sums per
 * channel over the messages in their order (even and odd ones apart, per
 * chunk of CHUNK); and no product is fused into a sum (the Makefile builds
 * this file with -ffp-contract=off), so every variant gives the same bits.
 */
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "kernels/isa.h"
#include "kernels/score_rows.h"

enum { ST_SHIFT, ST_SUM, ST_D };   /* generic.c's state of a destination and head */

#define CHUNK 64   /* messages whose rows are gathered at a time */

/* x's lanes added: l with l + 4, then the pairs. */
AG_INLINE float hsum8(v8f x)
{
    const float a0 = x[0] + x[4], a1 = x[1] + x[5], a2 = x[2] + x[6], a3 = x[3] + x[7];
    return (a0 + a2) + (a1 + a3);
}

/* One channel block of dots: x . r, or with a (gatv2) a . |x + r|. */
AG_INLINE v8f dot_term(const float *x, const float *a, const float *r)
{
    if (!a)
        return v8_load(x) * v8_load(r);
    const v8i no_sign = (v8i){0} + 0x7fffffff;
    return v8_load(a) * (v8f)((v8i)(v8_load(x) + v8_load(r)) & no_sign);
}

AG_INLINE v16f dot_term16(const float *x, const float *a, const float *r)
{
    if (!a)
        return v_load(x) * v_load(r);
    const v16i no_sign = (v16i){0} + 0x7fffffff;
    return v_load(a) * (v16f)((v16i)(v_load(x) + v_load(r)) & no_sign);
}

/* The two 8-lane halves of x. */
AG_INLINE void halves(v16f x, v8f *lo, v8f *hi)
{
    float t[AG_LANES];
    v_store(t, x);
    *lo = v8_load(t), *hi = v8_load(t + 8);
}

/* A row's sum from its lanes: lo holds channels l + 16k (and the last block
   of 8), hi l + 8 + 16k; then the leftover channels in order. */
AG_INLINE float dot_end(v8f lo, v8f hi, const float *x, const float *a, const float *r,
                        int64_t d)
{
    const int64_t d16 = d & ~(int64_t)15, d8 = d & ~(int64_t)7;
    if (d8 > d16)
        lo += dot_term(x + d16, a ? a + d16 : NULL, r + d16);
    float s = hsum8(lo + hi);
    for (int64_t t = d8; t < d; t++)
        s += a ? a[t] * fabsf(x[t] + r[t]) : x[t] * r[t];
    return s;
}

/* out[e] = x . X[idx[e]] (rows at offset off) for e < n, or with a (gatv2's
   a'') a . |x + X[idx[e]]|, in dot_end's order: blocks of 16 channels in one
   16-lane vector (wide) or two of 8, the same sums. Four rows at once (four
   chains), each row's bits those of one alone; x and the row may trade
   places (pass 2). */
AG_INLINE void dots8(float *out, const float *x, const float *a, const float *X,
                     const int64_t *idx, int64_t n, int64_t HD, int64_t off, int64_t d,
                     const int wide)
{
    const int64_t d16 = d & ~(int64_t)15;
    int64_t e = 0;
    for (; e + 4 <= n; e += 4) {
        const float *r0 = X + idx[e] * HD + off, *r1 = X + idx[e + 1] * HD + off;
        const float *r2 = X + idx[e + 2] * HD + off, *r3 = X + idx[e + 3] * HD + off;
        v8f l0 = {0}, l1 = {0}, l2 = {0}, l3 = {0}, h0 = {0}, h1 = {0}, h2 = {0}, h3 = {0};
        if (wide) {
            v16f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
            for (int64_t t = 0; t < d16; t += 16) {
                const float *at = a ? a + t : NULL;
                s0 += dot_term16(x + t, at, r0 + t), s1 += dot_term16(x + t, at, r1 + t);
                s2 += dot_term16(x + t, at, r2 + t), s3 += dot_term16(x + t, at, r3 + t);
            }
            halves(s0, &l0, &h0), halves(s1, &l1, &h1);
            halves(s2, &l2, &h2), halves(s3, &l3, &h3);
        } else {
            for (int64_t t = 0; t < d16; t += 16) {
                const float *at = a ? a + t : NULL, *au = a ? a + t + 8 : NULL;
                l0 += dot_term(x + t, at, r0 + t), h0 += dot_term(x + t + 8, au, r0 + t + 8);
                l1 += dot_term(x + t, at, r1 + t), h1 += dot_term(x + t + 8, au, r1 + t + 8);
                l2 += dot_term(x + t, at, r2 + t), h2 += dot_term(x + t + 8, au, r2 + t + 8);
                l3 += dot_term(x + t, at, r3 + t), h3 += dot_term(x + t + 8, au, r3 + t + 8);
            }
        }
        out[e] = dot_end(l0, h0, x, a, r0, d), out[e + 1] = dot_end(l1, h1, x, a, r1, d);
        out[e + 2] = dot_end(l2, h2, x, a, r2, d), out[e + 3] = dot_end(l3, h3, x, a, r3, d);
    }
    for (; e < n; e++) {
        const float *r0 = X + idx[e] * HD + off;
        v8f l0 = {0}, h0 = {0};
        if (wide) {
            v16f s0 = {0};
            for (int64_t t = 0; t < d16; t += 16)
                s0 += dot_term16(x + t, a ? a + t : NULL, r0 + t);
            halves(s0, &l0, &h0);
        } else {
            for (int64_t t = 0; t < d16; t += 16) {
                l0 += dot_term(x + t, a ? a + t : NULL, r0 + t);
                h0 += dot_term(x + t + 8, a ? a + t + 8 : NULL, r0 + t + 8);
            }
        }
        out[e] = dot_end(l0, h0, x, a, r0, d);
    }
}

/* gatv2's gradient through a . LeakyReLU(u), u = x + X[idx[e]], for n
   messages of dL/draw w[e]: g_e = w_e where u > 0, else w_e slope, per
   channel; out [d] += a sum_e g_e and part [d] (NULL: not wanted) += sum_e
   g_e u. Even and odd messages apart, per channel, as wsum. */
AG_INLINE void gsum(float *out, float *part, const float *w, float slope, const float *x,
                    const float *a, const float *X, const int64_t *idx, int64_t n, int64_t HD,
                    int64_t off, int64_t d)
{
    int64_t c = 0, e;
    const v8f zero = v8_set1(0.0f);
    for (; c + 8 <= d; c += 8) {
        const v8f xc = v8_load(x + c);
        v8f g0 = zero, g1 = zero, p0 = zero, p1 = zero;
#define GSUM_TERM(e, g, p)                                                                  \
    {                                                                                       \
        const v8f u = xc + v8_load(X + idx[e] * HD + off + c), we = v8_set1(w[e]);           \
        const v8f ge = v8_select(u > zero, we, we * v8_set1(slope));                         \
        g += ge;                                                                            \
        if (part)                                                                           \
            p += ge * u;                                                                    \
    }
        for (e = 0; e + 1 < n; e += 2) {
            GSUM_TERM(e, g0, p0)
            GSUM_TERM(e + 1, g1, p1)
        }
        if (e < n)
            GSUM_TERM(e, g0, p0)
#undef GSUM_TERM
        v8_store(out + c, v8_load(out + c) + v8_load(a + c) * (g0 + g1));
        if (part)
            v8_store(part + c, v8_load(part + c) + (p0 + p1));
    }
    for (; c < d; c++) {
        float g0 = 0, g1 = 0, p0 = 0, p1 = 0;
        for (e = 0; e < n; e++) {
            const float u = x[c] + X[idx[e] * HD + off + c];
            const float ge = u > 0 ? w[e] : w[e] * slope;
            if (e % 2)
                g1 += ge, p1 += ge * u;
            else
                g0 += ge, p0 += ge * u;
        }
        out[c] += a[c] * (g0 + g1);
        if (part)
            part[c] += p0 + p1;
    }
}

/* out [d] += sum_e w[e] X[idx[e]] (rows at offset off) over e < n: per channel,
   the even messages in one sum and the odd ones in another (two chains),
   then their sum. wide: 16-lane vectors (AVX-512), else 8; the same sums. */
AG_INLINE void wsum(float *out, const float *w, const float *X, const int64_t *idx, int64_t n,
                    int64_t HD, int64_t off, int64_t d, const int wide)
{
    int64_t c = 0, e;
    for (; wide && c + 32 <= d; c += 32) {
        v16f a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};
        for (e = 0; e + 1 < n; e += 2) {
            const float *x = X + idx[e] * HD + off + c, *y = X + idx[e + 1] * HD + off + c;
            const v16f p = v_set1(w[e]), q = v_set1(w[e + 1]);
            a0 += p * v_load(x), a1 += p * v_load(x + 16);
            b0 += q * v_load(y), b1 += q * v_load(y + 16);
        }
        if (e < n) {
            const float *x = X + idx[e] * HD + off + c;
            a0 += v_set1(w[e]) * v_load(x), a1 += v_set1(w[e]) * v_load(x + 16);
        }
        v_store(out + c, v_load(out + c) + (a0 + b0));
        v_store(out + c + 16, v_load(out + c + 16) + (a1 + b1));
    }
    for (; !wide && c + 32 <= d; c += 32) {
        v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
        for (e = 0; e + 1 < n; e += 2) {
            const float *x = X + idx[e] * HD + off + c, *y = X + idx[e + 1] * HD + off + c;
            v8f p = v8_set1(w[e]);
            a0 += p * v8_load(x), a1 += p * v8_load(x + 8);
            a2 += p * v8_load(x + 16), a3 += p * v8_load(x + 24);
            p = v8_set1(w[e + 1]);
            b0 += p * v8_load(y), b1 += p * v8_load(y + 8);
            b2 += p * v8_load(y + 16), b3 += p * v8_load(y + 24);
        }
        if (e < n) {
            const float *x = X + idx[e] * HD + off + c;
            const v8f p = v8_set1(w[e]);
            a0 += p * v8_load(x), a1 += p * v8_load(x + 8);
            a2 += p * v8_load(x + 16), a3 += p * v8_load(x + 24);
        }
        v8_store(out + c, v8_load(out + c) + (a0 + b0));
        v8_store(out + c + 8, v8_load(out + c + 8) + (a1 + b1));
        v8_store(out + c + 16, v8_load(out + c + 16) + (a2 + b2));
        v8_store(out + c + 24, v8_load(out + c + 24) + (a3 + b3));
    }
    for (; c + 8 <= d; c += 8) {
        v8f a = {0}, b = {0};
        for (e = 0; e + 1 < n; e += 2) {
            a += v8_set1(w[e]) * v8_load(X + idx[e] * HD + off + c);
            b += v8_set1(w[e + 1]) * v8_load(X + idx[e + 1] * HD + off + c);
        }
        if (e < n)
            a += v8_set1(w[e]) * v8_load(X + idx[e] * HD + off + c);
        v8_store(out + c, v8_load(out + c) + (a + b));
    }
    for (; c < d; c++) {
        float a = 0, b = 0;
        for (e = 0; e + 1 < n; e += 2) {
            a += w[e] * X[idx[e] * HD + off + c];
            b += w[e + 1] * X[idx[e + 1] * HD + off + c];
        }
        if (e < n)
            a += w[e] * X[idx[e] * HD + off + c];
        out[c] += a + b;
    }
}

/* A node's runs (in-runs of a destination, or out-runs of a source), read
   CHUNK nodes at a time. */
typedef struct {
    const int64_t *first, *len;
    int64_t r, r_end, at;
} runs_t;

AG_INLINE runs_t runs_of(const int64_t *ptr, const int64_t *first, const int64_t *len, int64_t n)
{
    return (runs_t){first, len, ptr[n], ptr[n + 1], 0};
}

/* The next nodes of the runs (at most CHUNK) into idx [CHUNK + 4], and each
   one's run into run (NULL: not wanted); how many (0: none left). */
AG_INLINE int64_t runs_next(runs_t *it, int64_t *idx, int64_t *run)
{
    int64_t n = 0;
    while (n < CHUNK && it->r < it->r_end) {
        const int64_t j0 = it->first[it->r] + it->at, left = it->len[it->r] - it->at;
        const int64_t take = left < CHUNK - n ? left : CHUNK - n;
        typedef int64_t v4l __attribute__((vector_size(32), aligned(8), may_alias));
        const v4l step = {0, 1, 2, 3};
        for (int64_t t = 0; t < take; t += 4)   /* up to 3 past take: idx has room */
            *(v4l *)(idx + n + t) = step + j0 + t;
        for (int64_t t = 0; run && t < take; t++)
            run[n + t] = it->r;
        n += take, it->at += take;
        if (it->at == it->len[it->r])
            it->r++, it->at = 0;
    }
    return n;
}

/*
 * A chunk of a node's messages: their other ends, and what their scores read,
 * gathered per message so that both passes score a message with the same
 * vector operations on the same floats (pass 1 fixes the destination, pass 2
 * the source): td and ts the destination's and the source's terms (srow_t's
 * t_dst and t_src), qk the dot products (gatv2: a''.|q + k|), dj = j - i
 * (ALiBi), run each message's run (for dropout's keys). Padded to whole
 * vectors with zeros.
 */
typedef struct {
    int64_t n, idx[CHUNK + 4], run[CHUNK];
    float qk[CHUNK], td[CHUNK], ts[CHUNK], dj[CHUNK];
} chunk_t;

/* The dropout keys of destination i's messages, in slot order, into key. */
AG_INLINE void dst_keys(const srow_t *c, const ag_nbhd_t *nb, int64_t i, uint64_t *key)
{
    int64_t e = 0;
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++)
            key[e++] = ag_i_drop_key(&c->drop, i, j, ag_i_occurrence(nb, i, r, j));
}

/* z [t] = dropout's factor of head h of the m messages of keys key. */
AG_INLINE void drops(const srow_t *c, const uint64_t *key, int64_t m, int64_t h, float *z)
{
    for (int64_t t = 0; t < m; t++)
        z[t] = ag_i_drop_factor(&c->drop, key[t], h);
}

/* Where a destination's dropout keys lie in its scratch s (after `used`
   floats), on 8 bytes (AG_I_SROW_FLOATS leaves room). */
AG_INLINE uint64_t *keys_at(float *s, int64_t used)
{
    return (uint64_t *)(void *)(s + ((used + 1) & ~(int64_t)1));
}

AG_INLINE int reads_dots(const srow_t *c)
{
    return c->kind != AG_SCORE_ADDITIVE;
}

AG_INLINE int reads_terms(const srow_t *c)
{
    return c->kind == AG_SCORE_ADDITIVE || c->kind == AG_SCORE_GATV2 ||
           c->kind == AG_SCORE_COSINE;
}

/* What the chunk's messages read for head h (node n: to_src 0: the
   destination, the chunk's nodes its sources; 1: the source; dots: with the
   dot products, else the terms only). */
AG_INLINE void chunk_head(const srow_t *c, chunk_t *k, int64_t n, int64_t h, const int to_src,
                          const int dots, const int wide)
{
    const int64_t H = c->H, HD = H * c->d, off = h * c->d, m = k->n;
    const float *X = to_src ? c->Q : c->K, *x = (to_src ? c->K : c->Q) + n * HD + off;
    if (dots && reads_dots(c))
        dots8(k->qk, x, c->kind == AG_SCORE_GATV2 ? c->a_abs + off : NULL, X, k->idx, m, HD,
              off, c->d, wide);
    if (reads_terms(c)) {
        const float *mine = (to_src ? c->t_src : c->t_dst) + n * H + h;
        const float *theirs = (to_src ? c->t_dst : c->t_src) + h;
        float *at_n = to_src ? k->ts : k->td, *at_other = to_src ? k->td : k->ts;
        for (int64_t t = 0; t < m; t++)
            at_n[t] = *mine, at_other[t] = theirs[k->idx[t] * H];
    }
    if (c->alibi)
        for (int64_t t = 0; t < m; t++)
            k->dj[t] = to_src ? (float)(n - k->idx[t]) : (float)(k->idx[t] - n);
    for (int64_t t = m; t % 8; t++)
        k->qk[t] = k->td[t] = k->ts[t] = k->dj[t] = 0.0f;
}

/* The next chunk of destination i's messages (runs it) and what they read
   for head h (chunk_head's dots); the messages in it (0: none left). */
AG_INLINE int64_t chunk_next(const srow_t *c, runs_t *it, chunk_t *k, int64_t i, int64_t h,
                             const int dots, const int wide)
{
    if (!(k->n = runs_next(it, k->idx, NULL)))
        return 0;
    chunk_head(c, k, i, h, 0, dots, wide);
    return k->n;
}

/* out[t] = the chunk's scores of head h (beta raw + ALiBi), raw from the terms
   or q.k; whole vectors (out has room). */
AG_INLINE void chunk_scores(const srow_t *c, const chunk_t *k, int64_t h, float *out)
{
    const v8f beta = v8_set1(c->beta), zero = v8_set1(0.0f);
    for (int64_t t = 0; t < k->n; t += 8) {
        v8f r;
        if (c->kind == AG_SCORE_ADDITIVE) {
            const v8f u = v8_load(k->td + t) + v8_load(k->ts + t);
            r = v8_select(u > zero, u, v8_set1(c->slope) * u);
        } else if (c->kind == AG_SCORE_GATV2) {
            r = v8_load(k->td + t) + v8_load(k->ts + t) + v8_load(k->qk + t);
        } else if (c->kind == AG_SCORE_COSINE) {
            const v8f n = v8_load(k->td + t) * v8_load(k->ts + t);
            r = v8_select(n > zero, v8_load(k->qk + t) / v8_select(n > zero, n, v8_set1(1.0f)),
                          zero);
        } else {
            r = v8_load(k->qk + t) * v8_set1(c->scale);
        }
        v8f x = beta * r;
        if (c->alibi)
            x += v8_set1(c->alibi[h]) * v8_load(k->dj + t);
        v8_store(out + t, x);
    }
}

/* w[t] := what the other side's row is weighted by in the gradient of this
   side's (dot kinds: dL/dr; cosine: over |q||k|) from dx [t] = dL/dx (x = beta
   raw + ALiBi); additive: its dL/dt added to *T, message by message. */
AG_INLINE void chunk_key_weights(const srow_t *c, const chunk_t *k, const float *dx, float *w,
                                 float *T)
{
    const v8f beta = v8_set1(c->beta), zero = v8_set1(0.0f);
    for (int64_t t = 0; t < k->n; t += 8) {
        const v8f dr = v8_load(dx + t) * beta;
        if (c->kind == AG_SCORE_ADDITIVE) {
            const v8f u = v8_load(k->td + t) + v8_load(k->ts + t);
            v8_store(w + t, v8_select(u > zero, dr, dr * v8_set1(c->slope)));
        } else if (c->kind == AG_SCORE_COSINE) {
            const v8f n = v8_load(k->td + t) * v8_load(k->ts + t);
            v8_store(w + t, v8_select(n > zero, dr / v8_select(n > zero, n, v8_set1(1.0f)),
                                      zero));
        } else {
            v8_store(w + t, dr);
        }
    }
    if (c->kind == AG_SCORE_ADDITIVE)
        for (int64_t t = 0; t < k->n; t++)
            *T += w[t];
}

/* Destination i's scores of head h into s [in-degree]. */
AG_INLINE void dst_scores(const srow_t *c, const ag_nbhd_t *nb, int64_t i, int64_t h, float *s,
                           const int wide)
{
    chunk_t k;
    float out[CHUNK];
    int64_t e = 0;
    runs_t it = runs_of(nb->run_ptr, nb->run_src, nb->run_len, i);
    while (chunk_next(c, &it, &k, i, h, 1, wide)) {
        chunk_scores(c, &k, h, out);
        memcpy(s + e, out, (size_t)k.n * sizeof *s);
        e += k.n;
    }
}

/* s [n] := exp(s - m) (m: their max, returned); *l = their sum; *u (NULL: not
   wanted) = sum p (s - m). 8 at a time, the last ones padded with weight 0. */
AG_INLINE float softmax_row(float *s, int64_t n, float *l, float *u)
{
    v8f mv = v8_set1(-__builtin_inff());
    int64_t e = 0;
    for (; e + 8 <= n; e += 8)
        mv = v8_max(mv, v8_load(s + e));
    float m = -__builtin_inff();
    for (int t = 0; t < 8; t++)
        m = mv[t] > m ? mv[t] : m;
    for (; e < n; e++)
        m = s[e] > m ? s[e] : m;
    v8f sum = {0}, us = {0};
    const v8f mm = v8_set1(m);
    for (e = 0; e + 8 <= n; e += 8) {
        const v8f y = v8_load(s + e) - mm, p = v8_exp_nonpos(y);
        v8_store(s + e, p);
        sum += p;
        if (u)
            us += p * y;
    }
    if (e < n) {   /* pad: e^-1000 is 0, and 0 times -1000 adds nothing to u */
        float y[8];
        for (int t = 0; t < 8; t++)
            y[t] = e + t < n ? s[e + t] - m : -1000.0f;
        const v8f yv = v8_load(y), p = v8_exp_nonpos(yv);
        for (int t = 0; e + t < n; t++)
            s[e + t] = p[t];
        sum += p;
        if (u)
            us += p * yv;
    }
    *l = hsum8(sum);
    if (u)
        *u = hsum8(us);
    return m;
}

AG_INLINE void srow_fwd(const srow_t *c, const ag_nbhd_t *nb, int64_t i, const float *V,
                        float *m_i, float *s, const kext_t *x, const int wide)
{
    const int64_t H = c->H, d = c->d, HD = H * d;
    const int64_t deg = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
    const int stats = kext_stats(x);
    memset(m_i, 0, (size_t)HD * sizeof *m_i);
    uint64_t *key = c->drop.below && deg ? keys_at(s, deg) : NULL;
    if (key)   /* once for every head */
        dst_keys(c, nb, i, key);
    for (int64_t h = 0; h < H; h++) {
        const int64_t off = h * d;
        if (!deg) {
            if (stats)
                kext_put(x, i, h, H, 0.0f, 0.0f, 0.0f, 0.0f);
            kext_lse(x, i, h, H, -__builtin_inff(), 0.0f, 1.0f);
            continue;
        }
        dst_scores(c, nb, i, h, s, wide);
        float l, u = 0;
        const float m = softmax_row(s, deg, &l, stats ? &u : NULL);
        int64_t idx[CHUNK + 4], n, e = 0;
        float t = 0;
        runs_t it = runs_of(nb->run_ptr, nb->run_src, nb->run_len, i);
        while ((n = runs_next(&it, idx, NULL))) {
            if (key) {   /* the weights times their dropout factors (not l) */
                float z[CHUNK];
                drops(c, key + e, n, h, z);
                for (int64_t k = 0; k < n; k++)
                    s[e + k] *= z[k];
            }
            wsum(m_i + off, s + e, V, idx, n, HD, off, d, wide);
            for (int64_t k = 0; kext_distance(x) && k < n; k++)
                t += s[e + k] * (float)(i > idx[k] ? i - idx[k] : idx[k] - i);
            e += n;
        }
        const float inv = 1.0f / l;
        for (int64_t k = 0; k < d; k++)
            m_i[off + k] *= inv;
        if (stats)
            kext_put(x, i, h, H, l, u, t, 1.0f);
        kext_lse(x, i, h, H, m, l, 1.0f);
    }
}

/* dx [t] = a (dA - D) with a = p / l: the chunk's dL/dx, as both passes make it. */
AG_INLINE void chunk_dx(int64_t n, const float *p, const float *l, const float *dA,
                        const float *D, float *a, float *dx)
{
    for (int64_t t = 0; t < n; t += 8) {
        const v8f w = v8_load(p + t) / v8_load(l + t);
        v8_store(a + t, w);
        v8_store(dx + t, w * (v8_load(dA + t) - v8_load(D + t)));
    }
}

AG_INLINE void srow_dst(const srow_t *c, const ag_nbhd_t *nb, int64_t i, const float *V,
                        const float *dM, float *st, float *dq, float *T, float *db, float *part,
                        float *s, const int wide)
{
    const int64_t H = c->H, d = c->d, HD = H * d, deg = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
    float *dA = s + deg;
    memset(dq, 0, (size_t)HD * sizeof *dq);
    if (db)
        memset(db, 0, (size_t)deg * sizeof *db);
    uint64_t *key = c->drop.below && deg ? keys_at(s, 2 * deg) : NULL;
    if (key)   /* once for every head */
        dst_keys(c, nb, i, key);
    for (int64_t h = 0; h < H; h++) {
        const int64_t off = h * d;
        float *sh = st + h * AG_I_GENERIC_STATE;
        T[h] = 0;
        if (!deg) {
            sh[ST_SHIFT] = -__builtin_inff(), sh[ST_SUM] = 0, sh[ST_D] = 0;
            continue;
        }
        dst_scores(c, nb, i, h, s, wide);
        float l;
        const float m = softmax_row(s, deg, &l, NULL);
        /* dA, then D = sum a dA, the weights a = p / l as pass 2 makes them */
        chunk_t k;
        int64_t n, e = 0;
        runs_t it = runs_of(nb->run_ptr, nb->run_src, nb->run_len, i);
        while ((n = runs_next(&it, k.idx, NULL))) {
            dots8(dA + e, dM + i * HD + off, NULL, V, k.idx, n, HD, off, d, wide);
            if (key) {   /* dA = z dM_i . v_j: the weight used was a z */
                float z[CHUNK];
                drops(c, key + e, n, h, z);
                for (int64_t t = 0; t < n; t++)
                    dA[e + t] *= z[t];
            }
            e += n;
        }
        const v8f lv = v8_set1(l);
        v8f dv = {0};
        for (e = 0; e + 8 <= deg; e += 8)
            dv += v8_load(s + e) / lv * v8_load(dA + e);
        float D = hsum8(dv);
        for (; e < deg; e++)
            D += s[e] / l * dA[e];
        sh[ST_SHIFT] = m, sh[ST_SUM] = l, sh[ST_D] = D;
        float ls[CHUNK], Ds[CHUNK];
        for (int t = 0; t < CHUNK; t++)
            ls[t] = l, Ds[t] = D;
        it = runs_of(nb->run_ptr, nb->run_src, nb->run_len, i), e = 0;
        while (chunk_next(c, &it, &k, i, h, 0, wide)) {
            float p[CHUNK], dAc[CHUNK], a[CHUNK], dx[CHUNK], w[CHUNK];
            memcpy(p, s + e, (size_t)k.n * sizeof *p);
            memcpy(dAc, dA + e, (size_t)k.n * sizeof *dAc);
            for (int64_t t = k.n; t % 8; t++)
                p[t] = dAc[t] = 0.0f;
            chunk_dx(k.n, p, ls, dAc, Ds, a, dx);
            if (db)
                for (int64_t t = 0; t < k.n; t++)
                    db[e + t] += dx[t];
            chunk_key_weights(c, &k, dx, w, T + h);
            if (c->kind == AG_SCORE_GATV2)
                gsum(dq + off, part ? part + off : NULL, w, c->slope, c->Q + i * HD + off,
                     c->a + off, c->K, k.idx, k.n, HD, off, d);
            else if (reads_dots(c))
                wsum(dq + off, w, c->K, k.idx, k.n, HD, off, d, wide);
            e += k.n;
        }
    }
}

AG_INLINE void srow_src(const srow_t *c, const ag_nbhd_t *nb, int64_t j, const float *V,
                        const float *dM, const float *state, float *dk, float *dv, float *T,
                        const int wide)
{
    const int64_t H = c->H, d = c->d, HD = H * d, S = AG_I_GENERIC_STATE;
    memset(dk, 0, (size_t)HD * sizeof *dk);
    memset(dv, 0, (size_t)HD * sizeof *dv);
    memset(T, 0, (size_t)H * sizeof *T);
    chunk_t k;
    runs_t it = runs_of(nb->out_ptr, nb->out_dst, nb->out_len, j);
    /* chunk by chunk, each head in turn (a head's sums run in the chunks' order) */
    while ((k.n = runs_next(&it, k.idx, c->drop.below ? k.run : NULL))) {
        uint64_t key[CHUNK];   /* the messages' dropout keys, once for every head */
        for (int64_t t = 0; c->drop.below && t < k.n; t++)
            key[t] = ag_i_drop_key(&c->drop, k.idx[t], j, nb->out_nth[k.run[t]]);
        for (int64_t h = 0; h < H; h++) {
            const int64_t off = h * d;
            chunk_head(c, &k, j, h, 1, 1, wide);
            float s[CHUNK], dA[CHUNK], l[CHUNK], D[CHUNK], a[CHUNK], dx[CHUNK], w[CHUNK];
            chunk_scores(c, &k, h, s);
            dots8(dA, V + j * HD + off, NULL, dM, k.idx, k.n, HD, off, d, wide);
            for (int64_t t = 0; t < k.n; t++) {
                const float *st = state + (k.idx[t] * H + h) * S;
                s[t] -= st[ST_SHIFT], l[t] = st[ST_SUM], D[t] = st[ST_D];
            }
            for (int64_t t = k.n; t % 8; t++)
                s[t] = -1000.0f, l[t] = 1.0f, dA[t] = D[t] = 0.0f;
            for (int64_t t = 0; t < k.n; t += 8)
                v8_store(s + t, v8_exp_nonpos(v8_load(s + t)));
            float z[CHUNK], *az = a;   /* dA and the weights times dropout's factors */
            if (c->drop.below) {
                drops(c, key, k.n, h, z);
                for (int64_t t = 0; t < k.n; t++)
                    dA[t] *= z[t];
            }
            chunk_dx(k.n, s, l, dA, D, a, dx);
            chunk_key_weights(c, &k, dx, w, T + h);
            if (c->drop.below) {
                az = z;
                for (int64_t t = 0; t < k.n; t++)
                    az[t] = a[t] * z[t];
            }
            wsum(dv + off, az, dM, k.idx, k.n, HD, off, d, wide);
            if (c->kind == AG_SCORE_GATV2)
                gsum(dk + off, NULL, w, c->slope, c->K + j * HD + off, c->a + off, c->Q, k.idx,
                     k.n, HD, off, d);
            else if (reads_dots(c))
                wsum(dk + off, w, c->Q, k.idx, k.n, HD, off, d, wide);
        }
    }
}

#define SROW_VARIANTS(isa, target, wide)                                                    \
    target void ag_i_srow_fwd_##isa(const srow_t *c, const ag_nbhd_t *nb, int64_t i,         \
                                    const float *V, float *m_i, float *s, const kext_t *x)   \
    {                                                                                       \
        srow_fwd(c, nb, i, V, m_i, s, x, wide);                                             \
    }                                                                                       \
    target void ag_i_srow_dst_##isa(const srow_t *c, const ag_nbhd_t *nb, int64_t i,         \
                                    const float *V, const float *dM, float *st, float *dq,  \
                                    float *T, float *db, float *part, float *s)             \
    {                                                                                       \
        srow_dst(c, nb, i, V, dM, st, dq, T, db, part, s, wide);                            \
    }                                                                                       \
    target void ag_i_srow_src_##isa(const srow_t *c, const ag_nbhd_t *nb, int64_t j,         \
                                    const float *V, const float *dM, const float *state,    \
                                    float *dk, float *dv, float *T)                         \
    {                                                                                       \
        srow_src(c, nb, j, V, dM, state, dk, dv, T, wide);                                  \
    }
SROW_VARIANTS(avx512, AG_TARGET_AVX512, 1)
SROW_VARIANTS(avx2, AG_TARGET_AVX2, 0)
SROW_VARIANTS(base, , 1)
