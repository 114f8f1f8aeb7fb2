/*
 * The simple attention kernel: dot-product softmax in one pass per
 * destination; the reference the tests hold the fast kernels (tiled.c,
 * gather.c) to. generic.c holds every other score function.
 *
 * Shapes: Q, K, V, M [N, H*d] row-major; head h is columns h*d .. h*d+d-1.
 *
 * Pull, not push: destination i owns row i of M, so there are no atomics and
 * the result is bitwise the same for any thread count (each row is computed
 * by one thread in a fixed order).
 *
 * Online softmax (Milakov & Gimelshein 2018, "Online normalizer calculation
 * for softmax"): one pass keeps, per head, the running max m, the running sum
 * l of exp(s - m) and the accumulator acc of exp(s - m) v; when a larger score
 * arrives, l and acc are rescaled by exp(m_old - m_new). m starts at -INFINITY.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"

/* Row i of M over i's in-edges, every head; mx, sum, u, t: [H] scratch (u, t:
   the figures' sums of p (s - mx) and p |i - j|, kept when x asks for
   figures; see kernels.h). */
static void attend_row(const ag_nbhd_t *nb, int64_t i, const float *Q, const float *K,
                       const float *V, int64_t H, int64_t d, float scale, float *m_i,
                       float *mx, float *sum, float *u, float *t, const kext_t *x)
{
    const int stats = kext_stats(x);
    const int64_t HD = H * d;
    const float *q_i = Q + i * HD;
    memset(m_i, 0, (size_t)HD * sizeof *m_i);
    for (int64_t h = 0; h < H; h++) {
        mx[h] = -INFINITY;
        sum[h] = u[h] = t[h] = 0.0f;
    }
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++) {
        const int64_t j_end = nb->run_src[r] + nb->run_len[r];
        for (int64_t j = nb->run_src[r]; j < j_end; j++) {
            const float *k_j = K + j * HD, *v_j = V + j * HD;
            for (int64_t h = 0; h < H; h++) {
                const float s = ag_i_dot(q_i + h * d, k_j + h * d, d) * scale;
                float *acc = m_i + h * d;
                if (s > mx[h]) {
                    const float c = ag_i_exp_or_zero(mx[h] - s);
                    if (stats) {
                        u[h] = sum[h] > 0 ? c * (u[h] + (mx[h] - s) * sum[h]) : 0.0f;
                        t[h] *= c;
                    }
                    sum[h] *= c;
                    for (int64_t k = 0; k < d; k++)
                        acc[k] *= c;
                    mx[h] = s;
                }
                const float p = ag_i_exp_or_zero(s - mx[h]);
                sum[h] += p;
                if (stats) {
                    u[h] += p * (s - mx[h]);
                    t[h] += p * (float)(i > j ? i - j : j - i);
                }
                const float *v = v_j + h * d;
#pragma omp simd
                for (int64_t k = 0; k < d; k++)
                    acc[k] += p * v[k];
            }
        }
    }
    for (int64_t h = 0; h < H; h++) {
        if (stats)
            kext_put(x, i, h, H, sum[h], u[h], t[h], 1.0f);
        kext_lse(x, i, h, H, mx[h], sum[h], 1.0f);
        if (sum[h] == 0.0f)
            continue;                 /* no in-edges: the row stays zero */
        const float inv = 1.0f / sum[h];
        for (int64_t k = 0; k < d; k++)
            m_i[h * d + k] *= inv;
    }
}

int ag_i_simple_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                     ag_error_t *err)
{
    (void)nb, (void)d;
    /* the forward's per-thread max, sum and figures' sums: 4 floats a head */
    return ag_i_plan_scratch(p, p->backward ? 0 : ag_i_scratch_stride(4 * H), 0,
                             "attention scratch", err);
}

void ag_i_simple_forward(const ag_i_plan_t *p, const ag_i_fwd_t *a)
{
    const ag_nbhd_t *nb = a->nb;
    const float *Q = a->Q, *K = a->K, *V = a->V;
    const int64_t H = a->H, d = a->d;
    float *M = a->M;
    kext_t *x = a->x;
    /* In-degrees vary (causal: i+1), so hand out small chunks dynamically. */
#pragma omp parallel for num_threads(p->threads) if (nb->n_edges * H * d >= AG_PARALLEL_MIN_WORK) \
    schedule(dynamic, 16)
    for (int64_t i = p->lo; i < p->hi; i++) {
        float *mx = p->scratch + (int64_t)ag_i_thread_id() * p->per_thread;
        attend_row(nb, i, Q, K, V, H, d, p->scale, M + i * H * d, mx, mx + H, mx + 2 * H,
                   mx + 3 * H, x);
        kext_done(x, (nb->edge_ptr[i + 1] - nb->edge_ptr[i]) * H);
    }
}

/* ---- backward ---- */

/* p_ij and dS_ij = p (dM_i . v_j - D_i) of edge j -> i, head h. */
static inline float edge_ds(const float *Q, const float *K, const float *V, const float *dM,
                            const float *lse, const float *Dd, int64_t i, int64_t j, int64_t h,
                            int64_t H, int64_t d, float scale, float *p)
{
    const int64_t HD = H * d, o = h * d;
    *p = expf(ag_i_dot(Q + i * HD + o, K + j * HD + o, d) * scale - lse[i * H + h]);
    return *p * (ag_i_dot(dM + i * HD + o, V + j * HD + o, d) - Dd[i * H + h]);
}

void ag_i_simple_backward(const ag_i_plan_t *p, const ag_i_bwd_t *a)
{
    const ag_nbhd_t *nb = a->nb;
    const float *Q = a->Q, *K = a->K, *V = a->V, *dM = a->dM, *lse = a->lse, *Dd = a->Dd;
    const int64_t H = a->H, d = a->d;
    const float scale = p->scale;
    float *dQ = a->g.dQ, *dK = a->g.dK, *dV = a->g.dV;
    const int64_t HD = H * d;
    const int par = nb->n_edges * HD >= AG_PARALLEL_MIN_WORK;
    (void)par;   /* read by the pragmas only */
    /* destinations: dQ_i = scale sum_j dS_ij k_j */
#pragma omp parallel for num_threads(p->threads) if (par) schedule(dynamic, 16)
    for (int64_t i = p->lo; i < p->hi; i++) {
        float *dq = dQ + i * HD;
        memset(dq, 0, (size_t)HD * sizeof *dq);
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
            for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++)
                for (int64_t h = 0; h < H; h++) {
                    float a_ij;
                    const float ds = edge_ds(Q, K, V, dM, lse, Dd, i, j, h, H, d, scale, &a_ij);
                    const float *k = K + j * HD + h * d;
                    for (int64_t c = 0; c < d; c++)
                        dq[h * d + c] += ds * k[c];
                }
        for (int64_t c = 0; c < HD; c++)
            dq[c] *= scale;
    }
    /* sources: dK_j = scale sum_i dS_ij q_i, dV_j = sum_i p_ij dM_i */
#pragma omp parallel for num_threads(p->threads) if (par) schedule(dynamic, 16)
    for (int64_t j = p->klo; j < p->khi; j++) {
        float *dk = dK + j * HD, *dv = dV + j * HD;
        memset(dk, 0, (size_t)HD * sizeof *dk);
        memset(dv, 0, (size_t)HD * sizeof *dv);
        for (int64_t r = nb->out_ptr[j]; r < nb->out_ptr[j + 1]; r++)
            for (int64_t i = nb->out_dst[r]; i < nb->out_dst[r] + nb->out_len[r]; i++)
                for (int64_t h = 0; h < H; h++) {
                    float a_ij;
                    const float ds = edge_ds(Q, K, V, dM, lse, Dd, i, j, h, H, d, scale, &a_ij);
                    const float *q = Q + i * HD + h * d, *g = dM + i * HD + h * d;
                    for (int64_t c = 0; c < d; c++) {
                        dk[h * d + c] += ds * q[c];
                        dv[h * d + c] += a_ij * g[c];
                    }
                }
        for (int64_t c = 0; c < HD; c++)
            dk[c] *= scale;
    }
}
