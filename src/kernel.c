/*
 * The attention kernel: each destination pulls from its in-neighbours.
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
 * Terms with s - m < AG_EXP_CUTOFF are taken as exact zeros: their weight is
 * below 1e-38 relative to the largest, and expf would return denormals there,
 * which are slow.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "internal.h"

#define AG_EXP_CUTOFF (-87.0f)

static inline float exp_or_zero(float x)
{
    return x < AG_EXP_CUTOFF ? 0.0f : expf(x);
}

static inline float dot(const float *a, const float *b, int64_t n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < n; k++)
        s += a[k] * b[k];
    return s;
}

static int max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/*
 * Per-thread scratch: the running max and sum of each head. Each thread's
 * slot is padded to whole cache lines, or the threads' writes to neighbouring
 * slots would bounce one line between cores (false sharing).
 */
typedef struct {
    float *buf;
    int64_t stride;       /* floats per thread */
} scratch_t;

static int scratch_init(scratch_t *s, int64_t H, ag_error_t *err)
{
    const int64_t line = 64 / sizeof(float);
    s->stride = (2 * H + line - 1) / line * line;
    s->buf = ag_alloc((int64_t)max_threads() * s->stride, sizeof(float), err,
                      "attention scratch");
    return s->buf ? AG_OK : AG_ENOMEM;
}

static float *scratch_mine(const scratch_t *s)
{
    return s->buf + (int64_t)thread_id() * s->stride;
}

static int check_args(const ag_nbhd_t *nb, int64_t H, int64_t d, ag_error_t *err)
{
    if (H <= 0 || d <= 0)
        return ag_fail(err, AG_EINVAL, "attention: %lld heads of width %lld; expected both >= 1",
                       (long long)H, (long long)d);
    if (!nb || !nb->edge_ptr || !nb->run_ptr)
        return ag_fail(err, AG_EINVAL, "attention: neighbourhoods are not compiled");
    return AG_OK;
}

/* Row i of M: softmax-weighted sum of V rows over i's in-edges, every head.
   mx, sum: [H] scratch. */
static void attend_row(const ag_nbhd_t *nb, int64_t i, const float *Q, const float *K,
                       const float *V, int64_t H, int64_t d, float scale, float *m_i,
                       float *mx, float *sum)
{
    const int64_t HD = H * d;
    const float *q_i = Q + i * HD;
    memset(m_i, 0, (size_t)HD * sizeof *m_i);
    for (int64_t h = 0; h < H; h++) {
        mx[h] = -INFINITY;
        sum[h] = 0.0f;
    }
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++) {
        const int64_t j_end = nb->run_src[r] + nb->run_len[r];
        for (int64_t j = nb->run_src[r]; j < j_end; j++) {
            const float *k_j = K + j * HD, *v_j = V + j * HD;
            for (int64_t h = 0; h < H; h++) {
                const float s = dot(q_i + h * d, k_j + h * d, d) * scale;
                float *acc = m_i + h * d;
                if (s > mx[h]) {
                    const float c = exp_or_zero(mx[h] - s);
                    sum[h] *= c;
                    for (int64_t k = 0; k < d; k++)
                        acc[k] *= c;
                    mx[h] = s;
                }
                const float p = exp_or_zero(s - mx[h]);
                sum[h] += p;
                const float *v = v_j + h * d;
#pragma omp simd
                for (int64_t k = 0; k < d; k++)
                    acc[k] += p * v[k];
            }
        }
    }
    for (int64_t h = 0; h < H; h++) {
        if (sum[h] == 0.0f)
            continue;                 /* no in-edges: the row stays zero */
        const float inv = 1.0f / sum[h];
        for (int64_t k = 0; k < d; k++)
            m_i[h * d + k] *= inv;
    }
}

int ag_attention(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                 int64_t H, int64_t d, float *M, ag_error_t *err)
{
    int rc = check_args(nb, H, d, err);
    if (rc)
        return rc;
    const int64_t N = nb->n_nodes;
    const float scale = 1.0f / sqrtf((float)d);
    scratch_t scratch;
    if ((rc = scratch_init(&scratch, H, err)))
        return rc;
    /* In-degrees vary (causal: i+1), so hand out small chunks dynamically. */
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < N; i++) {
        float *mx = scratch_mine(&scratch);
        attend_row(nb, i, Q, K, V, H, d, scale, M + i * H * d, mx, mx + H);
    }
    free(scratch.buf);
    return AG_OK;
}

/* Weights of destination i's slots, W_i[slot * H + h]; mx, sum: [H] scratch. */
static void weights_row(const ag_nbhd_t *nb, int64_t i, const float *Q, const float *K,
                        int64_t H, int64_t d, float scale, float *W_i, float *mx, float *sum)
{
    const int64_t HD = H * d;
    const float *q_i = Q + i * HD;
    for (int64_t h = 0; h < H; h++) {
        mx[h] = -INFINITY;
        sum[h] = 0.0f;
    }
    /* pass 1: scores, their max and the normaliser */
    int64_t slot = 0;
    for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
        for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++, slot++)
            for (int64_t h = 0; h < H; h++) {
                const float s = dot(q_i + h * d, K + j * HD + h * d, d) * scale;
                W_i[slot * H + h] = s;
                if (s > mx[h]) {
                    sum[h] *= exp_or_zero(mx[h] - s);
                    mx[h] = s;
                }
                sum[h] += exp_or_zero(s - mx[h]);
            }
    /* pass 2: normalise */
    for (int64_t e = 0; e < slot; e++)
        for (int64_t h = 0; h < H; h++)
            W_i[e * H + h] = exp_or_zero(W_i[e * H + h] - mx[h]) / sum[h];
}

int ag_attention_weights(const ag_nbhd_t *nb, const float *Q, const float *K,
                         int64_t H, int64_t d, int64_t lo, int64_t hi, float *W,
                         ag_error_t *err)
{
    int rc = check_args(nb, H, d, err);
    if (rc)
        return rc;
    if (lo < 0 || hi > nb->n_nodes || lo > hi)
        return ag_fail(err, AG_EINVAL, "attention weights: destinations %lld..%lld are outside "
                       "0..%lld", (long long)lo, (long long)hi, (long long)nb->n_nodes);
    const float scale = 1.0f / sqrtf((float)d);
    scratch_t scratch;
    if ((rc = scratch_init(&scratch, H, err)))
        return rc;
    const int64_t base = nb->edge_ptr[lo];
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = lo; i < hi; i++) {
        float *mx = scratch_mine(&scratch);
        weights_row(nb, i, Q, K, H, d, scale, W + (nb->edge_ptr[i] - base) * H, mx, mx + H);
    }
    free(scratch.buf);
    return AG_OK;
}

int ag_attention_stats(const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                       int64_t d, double *entropy, double *distance, ag_error_t *err)
{
    int rc = check_args(nb, H, d, err);
    if (rc)
        return rc;
    const int64_t N = nb->n_nodes;
    int64_t max_deg = 0;
    for (int64_t i = 0; i < N; i++)
        if (nb->edge_ptr[i + 1] - nb->edge_ptr[i] > max_deg)
            max_deg = nb->edge_ptr[i + 1] - nb->edge_ptr[i];
    const float scale = 1.0f / sqrtf((float)d);
    const int64_t stride = max_deg * H + 64;   /* weights, padded apart */
    float *wbuf = ag_alloc((int64_t)max_threads() * stride, sizeof(float), err, "attention stats");
    scratch_t scratch;
    if (!wbuf || (rc = scratch_init(&scratch, H, err))) {
        free(wbuf);
        return wbuf ? rc : AG_ENOMEM;
    }
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < N; i++) {
        float *W = wbuf + (int64_t)thread_id() * stride, *mx = scratch_mine(&scratch);
        if (nb->edge_ptr[i + 1] == nb->edge_ptr[i]) {
            entropy[i] = distance[i] = NAN;
            continue;
        }
        weights_row(nb, i, Q, K, H, d, scale, W, mx, mx + H);
        double ent = 0, dist = 0;
        int64_t slot = 0;
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++)
            for (int64_t j = nb->run_src[r]; j < nb->run_src[r] + nb->run_len[r]; j++, slot++)
                for (int64_t h = 0; h < H; h++) {
                    const double a = W[slot * H + h];
                    if (a > 0)
                        ent -= a * log(a);
                    dist += a * (double)(i > j ? i - j : j - i);
                }
        entropy[i] = ent / (double)H;
        distance[i] = dist / (double)H;
    }
    free(wbuf);
    free(scratch.buf);
    return AG_OK;
}
