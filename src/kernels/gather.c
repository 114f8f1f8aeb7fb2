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

#include "internal.h"
#include "kernels.h"
#include "simd.h"
#include "vec.h"

#define LOG2E 1.4426950408889634f

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

/* Prefetches the rows of X that destination i reads (head offset off). */
AG_INLINE void prefetch_rows(const ag_nbhd_t *nb, int64_t i, const float *X, int64_t HD,
                             int64_t off, int64_t d)
{
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++)
            for (int64_t c = 0; c < d; c += 16)
                __builtin_prefetch(X + j * HD + off + c);
}

AG_INLINE void gather_row(const ag_nbhd_t *nb, int64_t i, const float *Q, const float *K,
                          const float *V, int64_t H, int64_t d, float scale2, float *M,
                          float *s, int64_t *src, float *q, const kext_t *x)
{
    const int64_t HD = H * d, deg = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
    const int stats = kext_stats(x);
    float *m_i = M + i * HD;
    if (deg == 0) {
        memset(m_i, 0, (size_t)HD * sizeof *m_i);
        for (int64_t h = 0; stats && h < H; h++)
            kext_put(x, i, h, H, 0.0f, 0.0f, 0.0f, 0.0f);
        return;
    }
    int64_t e = 0;
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++)
            src[e++] = j;
    for (int64_t h = 0; h < H; h++) {
        const int64_t off = h * d;
        if (i + 1 < nb->n_nodes)
            prefetch_rows(nb, i + 1, K, HD, off, d);
        /* 1. scores */
        for (int64_t c = 0; c < d; c++)
            q[c] = Q[i * HD + off + c] * scale2;
        for (e = 0; e < deg; e++) {
            for (int64_t c = 0; c < d; c += 16)
                __builtin_prefetch(V + src[e] * HD + off + c);
            s[e] = dot_v(q, K + src[e] * HD + off, d);
        }
        /* 2. exact softmax in base 2 (and u = sum p (s - mx) for the figures) */
        float mx = s[0];
        for (e = 1; e < deg; e++)
            mx = s[e] > mx ? s[e] : mx;
        v16f sum = {0}, u = {0};
        for (e = 0; e + AG_LANES <= deg; e += AG_LANES) {
            const v16f y = v_load(s + e) - v_set1(mx), p = v_exp2(y);
            v_store(s + e, p);
            sum += p;
            if (stats)
                u += p * y;
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
            kext_put(x, i, h, H, l, ul, t, 0.69314718f);
        }
        const float inv = 1.0f / l;
        /* 3. P.V, 16 channels at a time */
        int64_t c = 0;
        for (; c + AG_LANES <= d; c += AG_LANES) {
            v16f a = {0}, b = {0};
            for (e = 0; e + 1 < deg; e += 2) {
                a += v_set1(s[e]) * v_load(V + src[e] * HD + off + c);
                b += v_set1(s[e + 1]) * v_load(V + src[e + 1] * HD + off + c);
            }
            if (e < deg)
                a += v_set1(s[e]) * v_load(V + src[e] * HD + off + c);
            v_store(m_i + off + c, (a + b) * v_set1(inv));
        }
        for (; c < d; c++) {
            float a = 0;
            for (e = 0; e < deg; e++)
                a += s[e] * V[src[e] * HD + off + c];
            m_i[off + c] = a * inv;
        }
    }
}

/* Destinations lo..hi-1, compiled per instruction set. */
#define ROWS_VARIANT(name, target)                                                          \
    target static void name(const ag_nbhd_t *nb, int64_t lo, int64_t hi, const float *Q,     \
                            const float *K, const float *V, int64_t H, int64_t d,            \
                            float scale2, float *M, float *s, int64_t *src, float *q,         \
                            const kext_t *x)                                                  \
    {                                                                                       \
        for (int64_t i = lo; i < hi; i++)                                                   \
            gather_row(nb, i, Q, K, V, H, d, scale2, M, s, src, q, x);                      \
    }
ROWS_VARIANT(rows_avx512, AG_TARGET_AVX512)
ROWS_VARIANT(rows_avx2, AG_TARGET_AVX2)
ROWS_VARIANT(rows_base, )

int ag_i_attention_gather(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                          int64_t H, int64_t d, float scale, float *M, kext_t *x,
                          ag_error_t *err)
{
    const int64_t N = nb->n_nodes;
    int64_t max_deg = 0;
    for (int64_t i = 0; i < N; i++)
        if (nb->edge_ptr[i + 1] - nb->edge_ptr[i] > max_deg)
            max_deg = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
    /* per thread: scores, sources (as int64) and the scaled query, padded apart */
    const int64_t per_thread = scratch_stride(3 * max_deg + d + AG_LANES);
    float *buf = ag_alloc_lines((int64_t)max_threads() * per_thread, sizeof(float), err,
                          "gather kernel buffers");
    if (!buf)
        return AG_ENOMEM;
    const float scale2 = scale * LOG2E;
#pragma omp parallel if (nb->n_edges * H * d >= AG_PARALLEL_MIN_WORK)
    {
        float *s = buf + (int64_t)thread_id() * per_thread;
        int64_t *src = (int64_t *)(s + max_deg + AG_LANES + (max_deg & 1));
        float *q = (float *)(src + max_deg);
        static void (*const variants[3])(const ag_nbhd_t *, int64_t, int64_t, const float *,
                                         const float *, const float *, int64_t, int64_t, float,
                                         float *, float *, int64_t *, float *,
                                         const kext_t *) = {
            rows_base, rows_avx2, rows_avx512};
        const ag_simd_level_t level = ag_simd_level();
#pragma omp for schedule(dynamic, 1)
        for (int64_t i0 = 0; i0 < N; i0 += 64) {
            const int64_t i1 = i0 + 64 < N ? i0 + 64 : N;
            variants[level](nb, i0, i1, Q, K, V, H, d, scale2, M, s, src, q, x);
            kext_done(x, (nb->edge_ptr[i1] - nb->edge_ptr[i0]) * H);
        }
    }
    free(buf);
    return AG_OK;
}

/* Backward: not written yet; the simple kernel stands in. */
int ag_i_backward_gather(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                     int64_t H, int64_t d, float scale, const float *lse, const float *Dd,
                     const float *dM, float *dQ, float *dK, float *dV, ag_error_t *err)
{
    return ag_i_backward_simple(nb, Q, K, V, H, d, scale, lse, Dd, dM, dQ, dK, dV, err);
}
