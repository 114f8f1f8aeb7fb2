/*
 * The gather kernel for irregular neighbourhoods (random graphs, unions of
 * patterns): destinations whose sources are scattered, so each K and V row is
 * a random read. Memory decides its speed, so it is arranged to keep many
 * reads in flight. Per destination and head:
 *   1. scores of every in-edge (vector dot products), while prefetching each
 *      edge's V row and the next destination's K rows;
 *   2. max, exp2 and sum over the scores, 16 edges per vector (exact softmax);
 *   3. P.V per chunk of 16 channels, two accumulators for alternate edges.
 * Each destination is computed by one thread alone (tasks are runs of 64
 * destinations), so the bits do not depend on the thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "kernels/isa.h"

/* q . k over d channels, q pre-scaled. */
AG_INLINE float dot_v(const float *q, const float *k, int64_t d)
{
    v16f a = {0}, b = {0};
    int64_t c = 0;
    for (; c + 2 * AG_LANES <= d; c += 2 * AG_LANES) {
        a += v_load(q + c) * v_load(k + c);
        b += v_load(q + c + AG_LANES) * v_load(k + c + AG_LANES);
    }
    if (c + AG_LANES <= d) {
        a += v_load(q + c) * v_load(k + c);
        c += AG_LANES;
    }
    float s = v_sum(a + b);
    for (; c < d; c++)
        s += q[c] * k[c];
    return s;
}

/* dot_v in AVX2's 8-lane halves (simd.h): the same sums, lane by lane and
   then across the lanes in order, so the same bits. */
AG_INLINE float dot_ymm(const float *q, const float *k, int64_t d)
{
    v8f a = {0}, a2 = {0}, b = {0}, b2 = {0};
    int64_t c = 0;
    for (; c + 2 * AG_LANES <= d; c += 2 * AG_LANES) {
        a += v8_load(q + c) * v8_load(k + c), a2 += v8_load(q + c + 8) * v8_load(k + c + 8);
        b += v8_load(q + c + 16) * v8_load(k + c + 16);
        b2 += v8_load(q + c + 24) * v8_load(k + c + 24);
    }
    if (c + AG_LANES <= d) {
        a += v8_load(q + c) * v8_load(k + c), a2 += v8_load(q + c + 8) * v8_load(k + c + 8);
        c += AG_LANES;
    }
    float lanes[AG_LANES], s = 0;
    v8_store(lanes, a + b), v8_store(lanes + 8, a2 + b2);
    for (int t = 0; t < AG_LANES; t++)
        s += lanes[t];
    for (; c < d; c++)
        s += q[c] * k[c];
    return s;
}

/* out [d] = f * sum_e w[e] X[idx[e]] (rows at offset off), 16 channels a
   vector, alternate edges in two accumulators. */
AG_INLINE void sum_rows(float *out, const float *w, const float *X, const int64_t *idx,
                        int64_t n, int64_t HD, int64_t off, int64_t d, float f)
{
    int64_t c = 0, e;
    for (; c + AG_LANES <= d; c += AG_LANES) {
        v16f a = {0}, b = {0};
        for (e = 0; e + 1 < n; e += 2) {
            a += v_set1(w[e]) * v_load(X + idx[e] * HD + off + c);
            b += v_set1(w[e + 1]) * v_load(X + idx[e + 1] * HD + off + c);
        }
        if (e < n)
            a += v_set1(w[e]) * v_load(X + idx[e] * HD + off + c);
        v_store(out + c, (a + b) * v_set1(f));
    }
    for (; c < d; c++) {
        float a = 0;
        for (e = 0; e < n; e++)
            a += w[e] * X[idx[e] * HD + off + c];
        out[c] = a * f;
    }
}

/* sum_rows in AVX2's 8-lane halves (simd.h), the same sums in the same order:
   the same bits. */
AG_INLINE void sum_rows_ymm(float *out, const float *w, const float *X, const int64_t *idx,
                            int64_t n, int64_t HD, int64_t off, int64_t d, float f)
{
    int64_t c = 0, e;
    for (; c + AG_LANES <= d; c += AG_LANES) {
        v8f a = {0}, a2 = {0}, b = {0}, b2 = {0};
        for (e = 0; e + 1 < n; e += 2) {
            const float *x0 = X + idx[e] * HD + off + c, *x1 = X + idx[e + 1] * HD + off + c;
            a += v8_set1(w[e]) * v8_load(x0), a2 += v8_set1(w[e]) * v8_load(x0 + 8);
            b += v8_set1(w[e + 1]) * v8_load(x1), b2 += v8_set1(w[e + 1]) * v8_load(x1 + 8);
        }
        if (e < n) {
            const float *x0 = X + idx[e] * HD + off + c;
            a += v8_set1(w[e]) * v8_load(x0), a2 += v8_set1(w[e]) * v8_load(x0 + 8);
        }
        v8_store(out + c, (a + b) * v8_set1(f)), v8_store(out + c + 8, (a2 + b2) * v8_set1(f));
    }
    for (; c < d; c++) {
        float a = 0;
        for (e = 0; e < n; e++)
            a += w[e] * X[idx[e] * HD + off + c];
        out[c] = a * f;
    }
}

AG_INLINE void gather_row(const ag_nbhd_t *nb, int64_t i, const float *Q, const float *K,
                          const float *V, int64_t H, int64_t d, float scale2, float *M,
                          float *s, int64_t *src, float *q, const kext_t *x, int64_t end,
                          const int ymm)
{
    const int64_t HD = H * d, deg = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
    const int stats = kext_stats(x);
    float *m_i = M + i * HD;
    if (deg == 0) {
        memset(m_i, 0, (size_t)HD * sizeof *m_i);
        for (int64_t h = 0; h < H; h++) {
            if (stats)
                kext_put(x, i, h, H, 0.0f, 0.0f, 0.0f, 0.0f);
            kext_lse(x, i, h, H, -__builtin_inff(), 0.0f, LN2);
        }
        return;
    }
    int64_t e = 0;
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++)
            src[e++] = j;
    for (int64_t h = 0; h < H; h++) {
        const int64_t off = h * d;
        if (i + 1 < end)
            prefetch_rows(nb, i + 1, K, HD, off, d, INT64_MAX);
        /* 1. scores */
        for (int64_t c = 0; c < d; c++)
            q[c] = Q[i * HD + off + c] * scale2;
        for (e = 0; e < deg; e++) {
            for (int64_t c = 0; c < d; c += 16)
                __builtin_prefetch(V + src[e] * HD + off + c);
            s[e] = ymm ? dot_ymm(q, K + src[e] * HD + off, d) : dot_v(q, K + src[e] * HD + off, d);
        }
        /* 2. exact softmax in base 2 (and u = sum p (s - mx) for the figures) */
        float mx = s[0];
        for (e = 1; e < deg; e++)
            mx = s[e] > mx ? s[e] : mx;
        v16f sum = {0}, u = {0};
        if (ymm) {   /* in halves (see simd.h), one after the other: two exp2 at once
                        and their sums took more than the 16 ymm registers, and the
                        sums lived on the stack */
            const int64_t whole = deg / AG_LANES * AG_LANES;
            v8f half_sum[2], half_u[2];
            for (int k = 0; k < 2; k++) {
                v8f sm = {0}, uu = {0};
                for (e = 8 * k; e < whole; e += AG_LANES) {
                    const v8f y = v8_load(s + e) - v8_set1(mx), p = v8_exp2(y);
                    v8_store(s + e, p);
                    sm += p;
                    if (stats)
                        uu += p * y;
                }
                half_sum[k] = sm, half_u[k] = uu;
            }
            sum = v_join(half_sum[0], half_sum[1]), u = v_join(half_u[0], half_u[1]);
            e = whole;
        } else {
            for (e = 0; e + AG_LANES <= deg; e += AG_LANES) {
                const v16f y = v_load(s + e) - v_set1(mx), p = v_exp2(y);
                v_store(s + e, p);
                sum += p;
                if (stats)
                    u += p * y;
            }
        }
        float l = v_sum(sum), ul = stats ? v_sum(u) : 0.0f;
        if (e < deg) {   /* the last partial vector, padded with -inf (weight 0) */
            float tail[AG_LANES];
            for (int64_t t = 0; t < AG_LANES; t++)
                tail[t] = e + t < deg ? s[e + t] - mx : -__builtin_inff();
            const v16f p = v_exp2(v_load(tail));
            for (int64_t t = 0; e + t < deg; t++) {
                ul += p[t] * tail[t];
                s[e + t] = p[t], l += p[t];
            }
        }
        if (stats) {
            float t = 0;
            for (e = 0; kext_distance(x) && e < deg; e++)
                t += s[e] * (float)(i > src[e] ? i - src[e] : src[e] - i);
            kext_put(x, i, h, H, l, ul, t, LN2);
        }
        kext_lse(x, i, h, H, mx, l, LN2);   /* scores in log2 units */
        const float inv = 1.0f / l;
        /* 3. P.V, 16 channels at a time */
        (ymm ? sum_rows_ymm : sum_rows)(m_i + off, s, V, src, deg, HD, off, d, inv);
    }
}

/* Destinations lo..hi-1, compiled per instruction set. */
#define ROWS_VARIANT(name, target, ymm)                                                     \
    target void name(const ag_nbhd_t *nb, int64_t lo, int64_t hi, const float *Q,           \
                     const float *K, const float *V, int64_t H, int64_t d,                  \
                     float scale2, float *M, float *s, int64_t *src, float *q,              \
                     const kext_t *x, int64_t end)                                          \
    {                                                                                       \
        for (int64_t i = lo; i < hi; i++)                                                   \
            gather_row(nb, i, Q, K, V, H, d, scale2, M, s, src, q, x, end, ymm);            \
    }
ROWS_VARIANT(ag_i_rows_avx512, AG_TARGET_AVX512, 0)
ROWS_VARIANT(ag_i_rows_avx2, AG_TARGET_AVX2, 1)
ROWS_VARIANT(ag_i_rows_base, , 0)

void ag_i_gather_forward(const ag_i_plan_t *p, const ag_i_fwd_t *a)
{
    const ag_nbhd_t *nb = a->nb;
    const float *Q = a->Q, *K = a->K, *V = a->V;
    const int64_t H = a->H, d = a->d, lo = p->lo, N = p->hi, max_deg = p->max_deg;
    float *M = a->M;
    kext_t *x = a->x;
    const float scale2 = p->scale * LOG2E;
    ag_i_rows_f *const rows = p->isa->rows;
#pragma omp parallel num_threads(p->threads) if (nb->n_edges * H * d >= AG_PARALLEL_MIN_WORK)
    {
        float *s = p->scratch + (int64_t)ag_i_thread_id() * p->per_thread;
        int64_t *src = (int64_t *)(s + max_deg + AG_LANES + (max_deg & 1));
        float *q = (float *)(src + max_deg);
#pragma omp for schedule(dynamic, 1)
        for (int64_t i0 = lo; i0 < N; i0 += 64) {
            const int64_t i1 = i0 + 64 < N ? i0 + 64 : N;
            rows(nb, i0, i1, Q, K, V, H, d, scale2, M, s, src, q, x, N);
            kext_done(x, (nb->edge_ptr[i1] - nb->edge_ptr[i0]) * H);
        }
    }
}

/* ---- backward ----
 *
 * FlashAttention-2's backward on scattered rows, in two passes that each own
 * the rows they write (no atomics; the bits do not depend on the thread count):
 *   1. per destination i and head: s_e = q_i . k_j (log2 units), dp_e = dM_i . v_j
 *      over its in-edges, then dS_e = exp2(s_e - lse2_i) (dp_e - D_i) 16 edges a
 *      vector, then dQ_i = scale sum_e dS_e k_j;
 *   2. per source j and head, over its out-runs: the same s_e and dp_e with the
 *      roles turned (k_j and v_j fixed, q_i and dM_i gathered), then
 *      dK_j = scale sum_e dS_e q_i and dV_j = sum_e P_e dM_i.
 * Each pass prefetches the rows the next node's edges read while it works on
 * the current one. lse2 and D sit side by side ([N, H, 2]) so that pass 2
 * gathers one line per edge for them.
 */

typedef struct ag_i_gbw_args {
    const ag_nbhd_t *nb;
    const float *Q, *K, *V, *dM;
    const float *ld;       /* [N, H, 2]: lse in log2 units (0 without in-edges), D */
    float *dQ, *dK, *dV;
    int64_t H, d;
    float scale, scale2;
} gbw_args_t;

typedef struct ag_i_gbw_buf {
    float *s, *dp, *l2, *dd;   /* [max_deg + AG_LANES] each */
    int64_t *idx;              /* [max_deg] the other ends of the edges */
    float *x;                  /* [d] the scaled query or key */
} gbw_buf_t;

/* out[e] = x . X[idx[e]] (rows at offset off) for e < n, 16 edges at a time:
   each edge's products summed over whole vectors of channels, then the 16
   edges' vectors transposed and added, so that no edge needs a horizontal sum
   of its own; leftover channels one by one. out has room for n rounded up to
   a whole vector. */
AG_INLINE void dots(float *out, const float *x, const float *X, const int64_t *idx, int64_t n,
                    int64_t HD, int64_t off, int64_t d)
{
    const int64_t dv = d - d % AG_LANES;
    for (int64_t e0 = 0; e0 < n; e0 += AG_LANES) {
        v16f r[AG_LANES];
#pragma GCC unroll 16
        for (int k = 0; k < AG_LANES; k++) {
            v16f a = {0};
            if (e0 + k < n) {
                const float *row = X + idx[e0 + k] * HD + off;
                for (int64_t c = 0; c < dv; c += AG_LANES)
                    a += v_load(x + c) * v_load(row + c);
            }
            r[k] = a;
        }
        v_transpose16(r);
#pragma GCC unroll 8
        for (int k = 0; k < AG_LANES / 2; k++)
            r[k] += r[k + AG_LANES / 2];
        v_store(out + e0, ((r[0] + r[4]) + (r[2] + r[6])) + ((r[1] + r[5]) + (r[3] + r[7])));
    }
    for (int64_t e = 0; dv < d && e < n; e++) {
        const float *row = X + idx[e] * HD + off;
        for (int64_t c = dv; c < d; c++)
            out[e] += x[c] * row[c];
    }
}

/* s := P = exp2(s - l2), dp := P (dp - dd) for n edges (padded to whole
   vectors with weight 0). */
AG_INLINE void edge_ds(float *s, float *dp, const float *l2, const float *dd, int64_t n)
{
    for (int64_t e = n; e % AG_LANES; e++)
        s[e] = -__builtin_inff(), dp[e] = 0.0f;
    for (int64_t e = 0; e < n; e += AG_LANES) {
        const v16f p = v_exp2(v_load(s + e) - v_load(l2 + e));
        v_store(s + e, p);
        v_store(dp + e, p * (v_load(dp + e) - v_load(dd + e)));
    }
}

/* dots and edge_ds in AVX2's 8-lane halves (simd.h), with the same sums in
   the same order: the same bits. Each edge's 16 lanes are summed in dots'
   order: lane l with lane l + 8, then ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)),
   as its transpose and adds do. */
AG_INLINE void dots_ymm(float *out, const float *x, const float *X, const int64_t *idx,
                        int64_t n, int64_t HD, int64_t off, int64_t d)
{
    const int64_t dv = d - d % AG_LANES;
    for (int64_t e = 0; e < n; e++) {
        const float *row = X + idx[e] * HD + off;
        v8f lo = {0}, hi = {0};
        for (int64_t c = 0; c < dv; c += AG_LANES) {
            lo += v8_load(x + c) * v8_load(row + c);
            hi += v8_load(x + c + 8) * v8_load(row + c + 8);
        }
        float t[8];
        v8_store(t, lo + hi);
        out[e] = ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
    }
    for (int64_t e = n; e % AG_LANES; e++)   /* dots writes whole vectors */
        out[e] = 0.0f;
    for (int64_t e = 0; dv < d && e < n; e++) {
        const float *row = X + idx[e] * HD + off;
        for (int64_t c = dv; c < d; c++)
            out[e] += x[c] * row[c];
    }
}

AG_INLINE void edge_ds_ymm(float *s, float *dp, const float *l2, const float *dd, int64_t n)
{
    for (int64_t e = n; e % AG_LANES; e++)
        s[e] = -__builtin_inff(), dp[e] = 0.0f;
    for (int64_t e = 0; e < n; e += 8) {
        const v8f p = v8_exp2(v8_load(s + e) - v8_load(l2 + e));
        v8_store(s + e, p);
        v8_store(dp + e, p * (v8_load(dp + e) - v8_load(dd + e)));
    }
}

/* The out-edges of source j as destinations, in out-run order. */
AG_INLINE int64_t out_edges(const ag_nbhd_t *nb, int64_t j, int64_t *idx)
{
    int64_t n = 0;
    for (int64_t r = nb->out_ptr[j]; r < nb->out_ptr[j + 1]; r++)
        for (int64_t i = nb->out_dst[r]; i < nb->out_dst[r] + nb->out_len[r]; i++)
            idx[n++] = i;
    return n;
}

/* Pass 1: row i of dQ. */
AG_INLINE void grad_query_row(const gbw_args_t *a, int64_t i, int64_t end, const gbw_buf_t *b,
                               const int ymm)
{
    const ag_nbhd_t *nb = a->nb;
    const int64_t d = a->d, H = a->H, HD = H * d;
    int64_t n = 0;
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++)
            b->idx[n++] = j;
    if (n == 0) {
        memset(a->dQ + i * HD, 0, (size_t)HD * sizeof(float));
        return;
    }
    for (int64_t h = 0; h < H; h++) {
        const int64_t off = h * d;
        if (i + 1 < end) {   /* the next destination's rows */
            prefetch_rows(nb, i + 1, a->K, HD, off, d, INT64_MAX);
            prefetch_rows(nb, i + 1, a->V, HD, off, d, INT64_MAX);
        }
        const float *dm = a->dM + i * HD + off;
        for (int64_t c = 0; c < d; c++)
            b->x[c] = a->Q[i * HD + off + c] * a->scale2;
        (ymm ? dots_ymm : dots)(b->s, b->x, a->K, b->idx, n, HD, off, d);
        (ymm ? dots_ymm : dots)(b->dp, dm, a->V, b->idx, n, HD, off, d);
        const float l2 = a->ld[2 * (i * H + h)], dd = a->ld[2 * (i * H + h) + 1];
        for (int64_t e = 0; e < (n + AG_LANES - 1) / AG_LANES * AG_LANES; e++)
            b->l2[e] = l2, b->dd[e] = dd;
        (ymm ? edge_ds_ymm : edge_ds)(b->s, b->dp, b->l2, b->dd, n);
        (ymm ? sum_rows_ymm : sum_rows)(a->dQ + i * HD + off, b->dp, a->K, b->idx, n, HD, off, d,
                                        a->scale);
    }
}

/* Pass 2: rows j of dK and dV. */
AG_INLINE void grad_key_row(const gbw_args_t *a, int64_t j, int64_t end, const gbw_buf_t *b,
                             const int ymm)
{
    const ag_nbhd_t *nb = a->nb;
    const int64_t d = a->d, H = a->H, HD = H * d;
    const int64_t n = out_edges(nb, j, b->idx);
    if (n == 0) {
        memset(a->dK + j * HD, 0, (size_t)HD * sizeof(float));
        memset(a->dV + j * HD, 0, (size_t)HD * sizeof(float));
        return;
    }
    for (int64_t h = 0; h < H; h++) {
        const int64_t off = h * d;
        if (j + 1 < end)   /* the next source's rows */
            for (int64_t r = nb->out_ptr[j + 1]; r < nb->out_ptr[j + 2]; r++)
                for (int64_t i = nb->out_dst[r]; i < nb->out_dst[r] + nb->out_len[r]; i++) {
                    for (int64_t c = 0; c < d; c += 16) {
                        __builtin_prefetch(a->Q + i * HD + off + c);
                        __builtin_prefetch(a->dM + i * HD + off + c);
                    }
                    __builtin_prefetch(a->ld + 2 * (i * H + h));   /* i in ld's window */
                }
        const float *v = a->V + j * HD + off;
        for (int64_t c = 0; c < d; c++)
            b->x[c] = a->K[j * HD + off + c] * a->scale2;
        (ymm ? dots_ymm : dots)(b->s, b->x, a->Q, b->idx, n, HD, off, d);
        (ymm ? dots_ymm : dots)(b->dp, v, a->dM, b->idx, n, HD, off, d);
        for (int64_t e = 0; e < n; e++) {
            const int64_t i = b->idx[e];
            b->l2[e] = a->ld[2 * (i * H + h)], b->dd[e] = a->ld[2 * (i * H + h) + 1];
        }
        for (int64_t e = n; e % AG_LANES; e++)
            b->l2[e] = b->dd[e] = 0.0f;
        (ymm ? edge_ds_ymm : edge_ds)(b->s, b->dp, b->l2, b->dd, n);
        (ymm ? sum_rows_ymm : sum_rows)(a->dK + j * HD + off, b->dp, a->Q, b->idx, n, HD, off, d,
                                        a->scale);
        (ymm ? sum_rows_ymm : sum_rows)(a->dV + j * HD + off, b->s, a->dM, b->idx, n, HD, off, d,
                                        1.0f);
    }
}

/* Nodes lo..hi-1 of one pass, compiled per instruction set. */
#define GRAD_ROWS_VARIANT(name, target, ymm)                                                \
    target void name(const gbw_args_t *a, int pass, int64_t lo, int64_t hi,                 \
                     const gbw_buf_t *b)                                                    \
    {                                                                                       \
        for (int64_t i = lo; i < hi; i++) {                                                 \
            if (pass == 0)                                                                  \
                grad_query_row(a, i, hi, b, ymm);                                           \
            else                                                                            \
                grad_key_row(a, i, hi, b, ymm);                                             \
        }                                                                                   \
    }
GRAD_ROWS_VARIANT(ag_i_grad_rows_avx512, AG_TARGET_AVX512, 0)
GRAD_ROWS_VARIANT(ag_i_grad_rows_avx2, AG_TARGET_AVX2, 1)
GRAD_ROWS_VARIANT(ag_i_grad_rows_base, , 0)

/* The destinations whose lse and D the passes read: [qlo, qhi) and every
   destination of the out-runs of sources [klo, khi). */
static void read_window(const ag_nbhd_t *nb, int64_t qlo, int64_t qhi, int64_t klo, int64_t khi,
                        int64_t *lo, int64_t *hi)
{
    *lo = qlo < qhi ? qlo : INT64_MAX, *hi = qlo < qhi ? qhi : 0;
    for (int64_t r = klo < khi ? nb->out_ptr[klo] : 0; klo < khi && r < nb->out_ptr[khi]; r++) {
        *lo = nb->out_dst[r] < *lo ? nb->out_dst[r] : *lo;
        *hi = nb->out_dst[r] + nb->out_len[r] > *hi ? nb->out_dst[r] + nb->out_len[r] : *hi;
    }
    if (*hi <= *lo)
        *lo = *hi = 0;
}

/* The backward's part of a plan: the largest degree the passes meet, and the
   destinations whose lse and D they read. */
static int backward_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                         ag_error_t *err)
{
    int64_t max_deg = 0;
    for (int64_t i = p->lo; i < p->hi; i++) {
        const int64_t in = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
        max_deg = in > max_deg ? in : max_deg;
    }
    for (int64_t j = p->klo; j < p->khi; j++) {
        int64_t out = 0;
        for (int64_t r = nb->out_ptr[j]; r < nb->out_ptr[j + 1]; r++)
            out += nb->out_len[r];
        max_deg = out > max_deg ? out : max_deg;
    }
    read_window(nb, p->lo, p->hi, p->klo, p->khi, &p->wlo, &p->whi);
    p->max_deg = max_deg;
    const int64_t pad = max_deg + AG_LANES;
    /* per thread: s, dp, l2, dd, the edges' other ends (int64), the scaled
       row; shared: lse and D of the window, interleaved */
    return ag_i_plan_scratch(p, ag_i_scratch_stride(4 * pad + 2 * max_deg + d),
                             2 * (p->whi - p->wlo) * H + 1, "gather backward buffers", err);
}

int ag_i_gather_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                     ag_error_t *err)
{
    if (p->backward)
        return backward_plan(p, nb, H, d, err);
    int64_t max_deg = 0;
    for (int64_t i = p->lo; i < p->hi; i++)
        if (nb->edge_ptr[i + 1] - nb->edge_ptr[i] > max_deg)
            max_deg = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
    p->max_deg = max_deg;
    /* per thread: scores, sources (as int64) and the scaled query, padded apart */
    return ag_i_plan_scratch(p, ag_i_scratch_stride(3 * max_deg + d + AG_LANES), 0,
                             "gather kernel buffers", err);
}

void ag_i_gather_backward(const ag_i_plan_t *p, const ag_i_bwd_t *op)
{
    const ag_nbhd_t *nb = op->nb;
    const int64_t H = op->H, d = op->d, max_deg = p->max_deg;
    const int64_t qlo = p->lo, qhi = p->hi, klo = p->klo, khi = p->khi;
    const int64_t wlo = p->wlo, w = p->whi - p->wlo, pad = max_deg + AG_LANES;
    float *ld = p->shared;
    const int par = nb->n_edges * H * d >= AG_PARALLEL_MIN_WORK;
    (void)par;   /* read only by the parallel clauses: unused without OpenMP */
#pragma omp parallel for num_threads(p->threads) if (par && w * H >= AG_PARALLEL_MIN_WORK) \
    schedule(static)
    for (int64_t x = 0; x < w * H; x++) {
        const float l = op->lse[wlo * H + x];
        ld[2 * x] = l > -__builtin_inff() ? l * LOG2E : 0.0f;
        ld[2 * x + 1] = op->Dd[wlo * H + x];
    }
    /* ld indexed by global destination, as every other array */
    const gbw_args_t a = {nb, op->Q, op->K, op->V, op->dM, ld - 2 * wlo * H, op->g.dQ,
                          op->g.dK, op->g.dV, H, d, p->scale, p->scale * LOG2E};
    ag_i_grad_rows_f *const grad_rows = p->isa->grad_rows;
#pragma omp parallel num_threads(p->threads) if (par)
    {
        float *mine = p->scratch + (int64_t)ag_i_thread_id() * p->per_thread;
        const gbw_buf_t b = {mine, mine + pad, mine + 2 * pad, mine + 3 * pad,
                             (int64_t *)(mine + 4 * pad), mine + 4 * pad + 2 * max_deg};
        for (int pass = 0; pass < 2; pass++) {
            const int64_t lo = pass ? klo : qlo, hi = pass ? khi : qhi;
#pragma omp for schedule(dynamic, 1)
            for (int64_t i0 = lo; i0 < hi; i0 += 64)
                grad_rows(&a, pass, i0, i0 + 64 < hi ? i0 + 64 : hi, &b);
        }
    }
}
