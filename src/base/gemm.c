/*
 * Deterministic dense products (see base/gemm.h): fixed row blocks, each one
 * product of base/sgemm.c, spread over OpenMP threads; reductions over rows
 * in fixed chunks added in chunk order.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* Y = beta Y + X op(W) by blocks of rows (beta 0 or 1); trans: W is [out, in]
   (X W^T), else [in, out]. */
static void gemm_blocks(float *Y, const float *X, const float *W, int64_t N, int64_t in,
                        int64_t out, float beta, int trans)
{
    if (N <= 0)
        return;
    const int threads = ag_i_team(AG_I_NS_DENSE * (double)N * (double)in * (double)out);
    const int64_t blocks = (N + AG_GEMM_BLOCK - 1) / AG_GEMM_BLOCK;
#pragma omp parallel for if (blocks > 1 && N * in * out >= AG_PARALLEL_MIN_WORK) \
    num_threads(threads) schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t lo = b * AG_GEMM_BLOCK, rows = N - lo < AG_GEMM_BLOCK ? N - lo : AG_GEMM_BLOCK;
        ag_i_sgemm(rows, out, in, X + lo * in, in, 1, W, trans ? 1 : out, trans ? in : 1,
                   beta != 0.0f, Y + lo * out, out);
    }
}

void ag_i_gemm_xwt(float *Y, const float *X, const float *W, int64_t N, int64_t in,
                   int64_t out, float beta)
{
    gemm_blocks(Y, X, W, N, in, out, beta, 1);
}

void ag_i_gemm_xw(float *Y, const float *X, const float *W, int64_t N, int64_t in,
                  int64_t out, float beta)
{
    gemm_blocks(Y, X, W, N, in, out, beta, 0);
}

/* Chunks of rows in flight at once: one per thread (the sums do not depend on it). */
static int64_t chunks_in_flight(int64_t chunks, int threads)
{
    return chunks < threads ? chunks : threads;
}

/* Rows of G a task of a chunk's partial computes: a chunk of a few rows
   would be one product on one thread; blocks of G's rows (fixed, so the bits
   do not depend on the thread count) spread it. */
#define ATB_ROWS ((int64_t)64)

/* Part `task` of the chunk partials part [n, a, b]: chunk task / blocks (of
   rows first..), G's rows block task % blocks: part_c = A_c^T B_c there. */
static void atb_task(float *part, const float *A, const float *B, int64_t N, int64_t a,
                     int64_t b, int64_t first, int64_t task, int64_t blocks)
{
    const int64_t c = task / blocks, r0 = (task % blocks) * ATB_ROWS;
    const int64_t lo = (first + c) * AG_GEMM_CHUNK;
    const int64_t rows = N - lo < AG_GEMM_CHUNK ? N - lo : AG_GEMM_CHUNK;
    const int64_t m = a - r0 < ATB_ROWS ? a - r0 : ATB_ROWS;
    ag_i_sgemm(m, b, rows, A + lo * a + r0, 1, a, B + lo * b, b, 1, 0, part + c * a * b + r0 * b,
               b);
}

/* G [ab] += the n chunk partials part [n, ab], each entry adding its partials
   in chunk order: the same bits for any thread count. */
static void add_partials(float *G, const float *part, int64_t n, int64_t ab, int threads)
{
    (void)threads;   /* read by OpenMP only */
#pragma omp parallel for if (n * ab >= AG_PARALLEL_MIN_WORK) num_threads(threads) \
    schedule(static)
    for (int64_t x = 0; x < ab; x++) {
        float g = G[x];
        for (int64_t c = 0; c < n; c++)
            g += part[c * ab + x];
        G[x] = g;
    }
}

int ag_i_gemm_atb(float *G, const float *A, const float *B, int64_t N, int64_t a, int64_t b,
                  ag_error_t *err)
{
    if (N <= 0)
        return AG_OK;
    const int64_t chunks = (N + AG_GEMM_CHUNK - 1) / AG_GEMM_CHUNK, ab = a * b;
    const int threads = ag_i_team(AG_I_NS_DENSE * (double)N * (double)a * (double)b);
    const int64_t group = chunks_in_flight(chunks, threads);
    const int64_t blocks = (a + ATB_ROWS - 1) / ATB_ROWS;
    float *part = ag_alloc(group * ab, sizeof *part, err, "weight gradient partials");
    if (!part)
        return ag_alloc_status();
    for (int64_t c0 = 0; c0 < chunks; c0 += group) {
        const int64_t n = chunks - c0 < group ? chunks - c0 : group, tasks = n * blocks;
#pragma omp parallel for if (tasks > 1 && n * AG_GEMM_CHUNK * ab >= AG_PARALLEL_MIN_WORK) \
    num_threads(threads) schedule(static)
        for (int64_t t = 0; t < tasks; t++)
            atb_task(part, A, B, N, a, b, c0, t, blocks);
        add_partials(G, part, n, ab, threads);
    }
    free(part);
    return AG_OK;
}

void ag_i_project_per_node(float *Y, const float *X, const float *W, int64_t N, int64_t in,
                           int64_t out)
{
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (N * in * out >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < N; i++)
        for (int64_t o = 0; o < out; o++)
            Y[i * out + o] = ag_i_dot(W + (i * out + o) * in, X + i * in, in);
}

void ag_i_project_per_node_backward(float *dX, float *dW, const float *dY, const float *X,
                                    const float *W, int64_t N, int64_t in, int64_t out)
{
    /* node i owns dX_i and dW_i */
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (N * in * out >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t i = 0; i < N; i++) {
        const float *Wi = W + i * out * in, *dy = dY + i * out, *x = X + i * in;
        float *dx = dX + i * in;
        for (int64_t o = 0; o < out; o++) {
            const float g = dy[o];
#pragma omp simd
            for (int64_t c = 0; c < in; c++)
                dx[c] += g * Wi[o * in + c];
            if (dW) {
                float *dw = dW + (i * out + o) * in;
#pragma omp simd
                for (int64_t c = 0; c < in; c++)
                    dw[c] += g * x[c];
            }
        }
    }
}

int ag_i_sum_rows(int64_t N, int64_t width, int64_t work, ag_i_rows_fn fn, void *ctx,
                  double *out, ag_error_t *err)
{
    (void)work;   /* read by OpenMP only */
    memset(out, 0, (size_t)width * sizeof *out);
    if (N <= 0)
        return AG_OK;
    const int64_t chunks = (N + AG_GEMM_CHUNK - 1) / AG_GEMM_CHUNK;
    const int64_t group = chunks_in_flight(chunks, ag_i_max_threads());
    double *part = ag_alloc(group * width, sizeof *part, err, "row sums");
    if (!part)
        return ag_alloc_status();
    for (int64_t c0 = 0; c0 < chunks; c0 += group) {
        const int64_t n = chunks - c0 < group ? chunks - c0 : group;
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (n > 1 && work >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t c = 0; c < n; c++) {
            const int64_t lo = (c0 + c) * AG_GEMM_CHUNK;
            const int64_t hi = N - lo < AG_GEMM_CHUNK ? N : lo + AG_GEMM_CHUNK;
            memset(part + c * width, 0, (size_t)width * sizeof *part);
            fn(lo, hi, part + c * width, ctx);
        }
        for (int64_t c = 0; c < n; c++)
            for (int64_t x = 0; x < width; x++)
                out[x] += part[c * width + x];
    }
    free(part);
    return AG_OK;
}

/* ---- over processes ---- */

int ag_i_gemm_atb_r(const ag_i_reducer_t *r, float *G, const float *A, const float *B,
                    int64_t N, int64_t a, int64_t b, ag_error_t *err)
{
    if (!r)
        return ag_i_gemm_atb(G, A, B, N, a, b, err);
    const int64_t chunks = N > 0 ? (N + AG_GEMM_CHUNK - 1) / AG_GEMM_CHUNK : 0, ab = a * b;
    float *part = ag_alloc(chunks ? chunks * ab : 1, sizeof *part, err,
                           "weight gradient partials");
    if (!part)   /* the reducer still runs: every process must hear of the failure */
        return r->add_f(r, G, NULL, -1, ab, err);
    const int threads = ag_i_team(AG_I_NS_DENSE * (double)N * (double)a * (double)b);
    /* each chunk's partial as ag_i_gemm_atb computes it */
    const int64_t blocks = (a + ATB_ROWS - 1) / ATB_ROWS, tasks = chunks * blocks;
#pragma omp parallel for if (tasks > 1 && N * ab >= AG_PARALLEL_MIN_WORK) \
    num_threads(threads) schedule(static)
    for (int64_t t = 0; t < tasks; t++)
        atb_task(part, A, B, N, a, b, 0, t, blocks);
    const int rc = r->add_f(r, G, part, chunks, ab, err);
    free(part);
    return rc;
}

int ag_i_gemm_atb_rows_r(const ag_i_reducer_t *r, float *G, const float *A, const float *B,
                         const int64_t *rows, int64_t m, int64_t N, int64_t a, int64_t b,
                         ag_error_t *err)
{
    const int64_t chunks = N > 0 ? (N + AG_GEMM_CHUNK - 1) / AG_GEMM_CHUNK : 0, ab = a * b;
    int64_t *at = ag_alloc(chunks + 1, sizeof *at, err, "weight gradient rows");
    float *part = at ? ag_calloc(chunks ? chunks * ab : 1, sizeof *part, err,
                                 "weight gradient partials") : NULL;
    if (!part) {
        free(at);
        return r ? r->add_f(r, G, NULL, -1, ab, err) : ag_alloc_status();
    }
    for (int64_t c = 0; c <= chunks; c++)   /* chunk c's rows: at[c] .. at[c+1] */
        at[c] = c < chunks ? ag_i_count_below(rows, m, c * AG_GEMM_CHUNK) : m;
    const int threads = ag_i_team(AG_I_NS_DENSE * (double)m * (double)a * (double)b);
    const int64_t blocks = (a + ATB_ROWS - 1) / ATB_ROWS, tasks = chunks * blocks;
#pragma omp parallel for if (tasks > 1 && m * ab >= AG_PARALLEL_MIN_WORK) \
    num_threads(threads) schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
        const int64_t c = t / blocks, r0 = (t % blocks) * ATB_ROWS, k = at[c + 1] - at[c];
        const int64_t w = a - r0 < ATB_ROWS ? a - r0 : ATB_ROWS;
        if (k)   /* an empty chunk's partial: zeros */
            ag_i_sgemm(w, b, k, A + at[c] * a + r0, 1, a, B + at[c] * b, b, 1, 0,
                       part + c * ab + r0 * b, b);
    }
    int rc = AG_OK;
    if (r) {
        rc = r->add_f(r, G, part, chunks, ab, err);
    } else {
        add_partials(G, part, chunks, ab, threads);
    }
    free(part), free(at);
    return rc;
}

int ag_i_reducer_failed(const ag_i_reducer_t *r, int64_t width, ag_error_t *err)
{
    return r ? r->add_d(r, NULL, NULL, -1, width, err) : ag_alloc_status();
}

int ag_i_sum_rows_r(const ag_i_reducer_t *r, int64_t N, int64_t width, int64_t work,
                    ag_i_rows_fn fn, void *ctx, double *out, ag_error_t *err)
{
    (void)work;   /* read by OpenMP only */
    if (!r)
        return ag_i_sum_rows(N, width, work, fn, ctx, out, err);
    const int64_t chunks = N > 0 ? (N + AG_GEMM_CHUNK - 1) / AG_GEMM_CHUNK : 0;
    double *part = ag_calloc(chunks ? chunks * width : 1, sizeof *part, err, "row sums");
    if (!part)
        return ag_i_reducer_failed(r, width, err);
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (chunks > 1 && work >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t lo = c * AG_GEMM_CHUNK;
        fn(lo, N - lo < AG_GEMM_CHUNK ? N : lo + AG_GEMM_CHUNK, part + c * width, ctx);
    }
    const int rc = r->add_d(r, out, part, chunks, width, err);
    free(part);
    return rc;
}

typedef struct {
    const float *Y;
    int64_t width;
} columns_t;

static void column_rows(int64_t lo, int64_t hi, double *partial, void *ctx)
{
    const columns_t *c = ctx;
    for (int64_t i = lo; i < hi; i++)
        for (int64_t x = 0; x < c->width; x++)
            partial[x] += c->Y[i * c->width + x];
}

int ag_i_sum_columns_r(const ag_i_reducer_t *r, const float *Y, int64_t N, int64_t width,
                       double *out, ag_error_t *err)
{
    columns_t ctx = {Y, width};
    return ag_i_sum_rows_r(r, N, width, N * width, column_rows, &ctx, out, err);
}
