/*
 * make bench: the speed table. On 1 and 2 threads:
 *   - the sgemm rate (OpenBLAS's cblas_sgemm 4096 x 4096 x 4096, its best
 *     kernels for this CPU), the yardstick of the dense cases, beside the
 *     library's own products (base/sgemm.c) of the same shape and of a
 *     projection's (X W^T), and per variant the projection against its FMA peak;
 *   - the random-row read bandwidth (256-byte rows in random order, prefetched
 *     as the gather kernel does), the yardstick of the random graph;
 *   - each case of the table: median of its timed runs (each group of them after
 *     WARM_S of untimed runs, as the yardstick flushes the caches), useful
 *     GFLOP/s = 4*E*d*H / time, the ratio to its yardstick and to the FMA
 *     peak (the median of one measured after each group), and the largest
 *     error against the double reference (|m - m_ref| / max |m_ref|);
 *   - the cost of a round's figures (entropy and largest weight per node and
 *     head, ag_attention_ex) in the kernel's own pass: runs with and without
 *     them alternate, and the ratio is of the two medians.
 *   - the score functions of the generic path (cosine, GAT, GATv2, sigmoid,
 *     linear) against the one-pass kernel on plain scores, alternating;
 *   - the FMA peak (a register-only loop of independent multiply-adds, AVX-512
 *     where the CPU has it, else AVX2, on the same threads), the yardstick of
 *     the backward rows: median backward time with M and lse given, useful
 *     GFLOP/s = 10*E*d*H / time (FlashAttention-2's accounting: the scores and
 *     dP computed again are not counted), its ratio to the FMA peak, and its
 *     time against the training forward's (ag_attention_ex with lse).
 *   `bench_kernel products` times the library's products on the models' shapes
 *   against OpenBLAS's sgemm, one thread, every variant (AG_SIMD=avx2
 *   OPENBLAS_CORETYPE=Haswell compares like with like on an AVX-512 machine).
 *   `bench_kernel peak [THREADS]` prints the FMA peak on THREADS threads of the
 *   vector width of the variant AG_SIMD names (else the best): zmm for avx512,
 *   ymm for avx2 and base, as the tables below; `make bench-lm`'s yardstick.
 *   `bench_kernel backward [NAME]` runs the FMA peak and the backward rows only
 *   (those whose name contains NAME); `bench_kernel forward [NAME]` the
 *   yardsticks and the forward rows only; `bench_kernel scores` the score
 *   functions' table only (`scores KIND`: the kinds whose name contains
 *   KIND). AG_SIMD=<variant> times that one variant.
 * Every kernel variant the CPU runs (avx512, avx2, base: ag_i_simd_force) is
 * timed in turn, each against the FMA peak of its own vector width (zmm for
 * avx512, ymm for avx2 and base) measured in the same run: a developer on an
 * AVX-512 machine sees the AVX2 numbers too. `bench_kernel smoke` runs every
 * variant once on small cases and fails unless each agrees with the double
 * reference (make check); it times nothing.
 * This machine is shared and its speed drifts, so each case's runs are
 * interleaved with runs of its yardstick and the ratio is of the two medians:
 * both saw the same machine. Inputs come from a fixed seed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cblas.h>
#include <omp.h>

#include "attngraph.h"
#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "../src/cli/timing.h"
#include "../tests/reference.h"

#define ROUNDS 5       /* yardstick runs interleaved with each case */
#define PER_ROUND 4    /* case runs per yardstick run */
#define WARM_S 0.3     /* untimed runs after each yardstick run, at least (s) */

/* The library's threads and the yardstick's (OpenBLAS keeps its own count). */
static void set_threads(int t)
{
    ag_set_threads(t);
    openblas_set_num_threads(t);
}

static void die(const ag_error_t *err)
{
    fprintf(stderr, "bench: %s\n", err->msg);
    exit(1);
}

/* Every large buffer comes from the library's allocator, as attngraph bench's
   do: 2 MB pages from 4 MB on (on malloc's 4 KB pages the kernels run 3-6% slower). */
static float *floats(int64_t n)
{
    ag_error_t err;
    float *p = ag_alloc(n, sizeof(float), &err, "bench buffer");
    if (!p)
        die(&err);
    return p;
}

/* One GEMM C [m, n] = A [m, k] B (B^T when trans) with its buffers: OpenBLAS's,
   or (own) the library's blocked product on its team. */
typedef struct {
    int m, n, k, trans, own;
    float *a, *b, *c;
} gemm_t;

static void gemm_init(gemm_t *g, int m, int n, int k, int trans, int own)
{
    *g = (gemm_t){m, n, k, trans, own, floats((int64_t)m * k), floats((int64_t)k * n),
                  floats((int64_t)m * n)};
    ag_random_normal(g->a, (int64_t)m * k, 1, 1, 1.0f);
    ag_random_normal(g->b, (int64_t)k * n, 1, 2, 1.0f);
}

/* GFLOP/s of one run. */
static double gemm_run(const gemm_t *g)
{
    const double t0 = now_s();
    if (g->own && g->trans)
        ag_i_gemm_xwt(g->c, g->a, g->b, g->m, g->k, g->n, 0.0f);
    else if (g->own)
        ag_i_gemm_xw(g->c, g->a, g->b, g->m, g->k, g->n, 0.0f);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, g->trans ? CblasTrans : CblasNoTrans, g->m,
                    g->n, g->k, 1.0f, g->a, g->k, g->b, g->trans ? g->k : g->n, 0.0f, g->c,
                    g->n);
    return 2.0 * g->m * g->n * (double)g->k / (now_s() - t0) / 1e9;
}

static void gemm_free(gemm_t *g)
{
    free(g->a), free(g->b), free(g->c);
}

/* Median GFLOP/s of a few runs after a warm-up. */
static double gemm_rate(int m, int n, int k, int trans, int own)
{
    gemm_t g;
    gemm_init(&g, m, n, k, trans, own);
    double r[5];
    gemm_run(&g);
    for (int i = 0; i < 5; i++)
        r[i] = gemm_run(&g);
    gemm_free(&g);
    return median_s(r, 5);
}

/* The products of the models, one call on one thread: the library's
   (ag_i_sgemm, this variant) against OpenBLAS's sgemm (the kernels it loaded). */
typedef struct {
    const char *name;
    int kind;   /* 0: X W^T (W [n, k]); 1: X W (W [k, n]); 2: A^T B (A [k, m], B [k, n]) */
    int m, n, k;
} product_case_t;

static const product_case_t product_cases[] = {
    {"Q, K, V at width 128 (X W^T)", 0, 512, 384, 128},
    {"Wo at width 128", 0, 512, 128, 128},
    {"MLP up, width 128", 0, 512, 512, 128},
    {"MLP down, width 128", 0, 512, 128, 512},
    {"GPT head, 65 characters", 0, 512, 65, 128},
    {"Cora features into 64", 0, 512, 64, 1433},
    {"input gradient dX (X W)", 1, 512, 128, 384},
    {"input gradient, MLP", 1, 512, 512, 128},
    {"weight gradient (A^T B)", 2, 64, 128, 1024},
    {"weight gradient, MLP", 2, 64, 512, 1024},
    {"a wide layer", 0, 512, 1024, 1024},
};

static double product_run(const product_case_t *c, int own, const float *A, const float *B,
                          float *C)
{
    const int m = c->m, n = c->n, k = c->k;
    const int reps = (int)(5e7 / ((double)m * n * k)) + 1;
    const double t0 = now_s();
    for (int r = 0; r < reps; r++) {
        if (own)
            ag_i_sgemm(m, n, k, A, c->kind == 2 ? 1 : k, c->kind == 2 ? m : 1, B,
                       c->kind == 0 ? 1 : n, c->kind == 0 ? k : 1, 0, C, n);
        else if (c->kind == 2)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0f, A, m, B, n,
                        0.0f, C, n);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, c->kind == 0 ? CblasTrans : CblasNoTrans,
                        m, n, k, 1.0f, A, k, B, c->kind == 0 ? k : n, 0.0f, C, n);
    }
    return 2.0 * m * n * (double)k * reps / (now_s() - t0) / 1e9;
}

/* Every case: medians of 7 alternating runs of each, their ratio, and the
   variant's FMA peak on one thread. */
static void products_table(double peak)
{
    set_threads(1);
    printf("  %-32s %-16s %8s %9s %6s %8s\n", "product", "m x n x k", "library", "OpenBLAS",
           "ratio", "of peak");
    for (size_t x = 0; x < sizeof product_cases / sizeof product_cases[0]; x++) {
        const product_case_t *c = &product_cases[x];
        float *A = floats((int64_t)c->m * c->k), *B = floats((int64_t)c->k * c->n);
        float *C = floats((int64_t)c->m * c->n);
        ag_random_normal(A, (int64_t)c->m * c->k, 3, 1, 1.0f);
        ag_random_normal(B, (int64_t)c->k * c->n, 3, 2, 1.0f);
        double own[7], blas[7];
        product_run(c, 1, A, B, C), product_run(c, 0, A, B, C);   /* warm */
        for (int r = 0; r < 7; r++)
            own[r] = product_run(c, 1, A, B, C), blas[r] = product_run(c, 0, A, B, C);
        const double o = median_s(own, 7), b = median_s(blas, 7);
        char shape[32];
        snprintf(shape, sizeof shape, "%d x %d x %d", c->m, c->n, c->k);
        printf("  %-32s %-16s %8.1f %9.1f %6.2f %8.2f\n", c->name, shape, o, b, o / b,
               o / peak);
        free(A), free(B), free(C);
    }
}

/* Reading 64-float rows of a 200,000-row array in random order, 16 at a time
   with the next 16 prefetched (the gather kernel's access pattern). */
typedef struct {
    int64_t rows, reads, d;
    float *x;
    int64_t *idx;
} rows_t;

static void rows_init(rows_t *b)
{
    *b = (rows_t){200000, 16 * 200000, 64, NULL, NULL};
    b->x = floats(b->rows * b->d);
    b->idx = malloc((size_t)(b->reads + 16) * sizeof *b->idx);
    ag_random_normal(b->x, b->rows * b->d, 1, 3, 1.0f);
    uint64_t s = 99;
    for (int64_t r = 0; r < b->reads + 16; r++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        b->idx[r] = (int64_t)(s % (uint64_t)b->rows);
    }
}

/* GB/s of one pass. */
static double rows_run(const rows_t *b)
{
    const int64_t d = b->d;
    const double t0 = now_s();
    float total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (int64_t q = 0; q < b->reads; q += 16) {
        float acc[64] = {0};
        for (int64_t e = q + 16; e < q + 32; e++)
            for (int64_t c = 0; c < d; c += 16)
                __builtin_prefetch(b->x + b->idx[e] * d + c);
        for (int64_t e = q; e < q + 16; e++)
#pragma omp simd
            for (int64_t c = 0; c < d; c++)
                acc[c] += b->x[b->idx[e] * d + c];
        total += acc[0] + acc[63];
    }
    const double t = now_s() - t0;
    volatile float sink = total;
    (void)sink;
    return (double)b->reads * d * 4 / t / 1e9;
}

/* The FMA peak (AVX-512 where this CPU has it, else AVX2): 12 independent
   chains of a = a m + c per thread (two FMA units of latency 4 need 8 in
   flight), nothing but registers; m and c are read from volatiles and the
   chains start apart, so that the compiler can neither fold nor merge them. */
static volatile float fma_m = 0.999f, fma_c = 0.001f;   /* unknown to the compiler */
#define FMA_CHAINS(T, one)                                                                \
    const T m = (one) * fma_m, c = (one) * fma_c;                                         \
    T a0 = one * 0.50f, a1 = one * 0.55f, a2 = one * 0.60f, a3 = one * 0.65f;             \
    T a4 = one * 0.70f, a5 = one * 0.75f, a6 = one * 0.80f, a7 = one * 0.85f;             \
    T a8 = one * 0.90f, a9 = one * 0.95f, a10 = one * 1.05f, a11 = one * 1.10f;           \
    for (int64_t k = 0; k < iters; k++) {                                                 \
        a0 = a0 * m + c, a1 = a1 * m + c, a2 = a2 * m + c, a3 = a3 * m + c;               \
        a4 = a4 * m + c, a5 = a5 * m + c, a6 = a6 * m + c, a7 = a7 * m + c;               \
        a8 = a8 * m + c, a9 = a9 * m + c, a10 = a10 * m + c, a11 = a11 * m + c;           \
    }                                                                                     \
    const T sum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;            \
    return sum[0];

typedef float v8f __attribute__((vector_size(32)));

AG_TARGET_AVX512 static float fma_avx512(int64_t iters)
{
    const v16f one = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    FMA_CHAINS(v16f, one)
}

AG_TARGET_AVX2 static float fma_avx2(int64_t iters)
{
    const v8f one = {1, 1, 1, 1, 1, 1, 1, 1};
    FMA_CHAINS(v8f, one)
}

/* GFLOP/s of one run on every thread. */
static volatile int64_t fma_iters = 1 << 23;
static double fma_peak(void)
{
    const int wide = ag_i_simd_level() == AG_SIMD_AVX512;
    const int64_t iters = fma_iters;
    int threads = 1;
    float total = 0;
    const double t0 = now_s();
#pragma omp parallel reduction(+ : total)
    {
#pragma omp single
        threads = omp_get_num_threads();
        total += wide ? fma_avx512(iters) : fma_avx2(iters);
    }
    const double t = now_s() - t0;
    volatile float sink = total;
    (void)sink;
    return (double)threads * (double)iters * 12 * (wide ? 16 : 8) * 2 / t / 1e9;
}

/* Median of a few FMA-peak runs after a warm-up. */
static double fma_rate(void)
{
    double r[5];
    fma_peak();
    for (int k = 0; k < 5; k++)
        r[k] = fma_peak();
    return median_s(r, 5);
}

typedef struct {
    const char *name, *spec;
    int64_t N, H, d;
    ag_self_loops_t self;
    int memory_bound;     /* ratio against the row bandwidth, not sgemm */
} case_t;

/* The case's pattern on its N nodes into nb (transposed for a backward). */
static void compile_case(ag_nbhd_t *nb, const case_t *c, int transpose)
{
    ag_pattern_t *p;
    ag_error_t err;
    if (ag_pattern_parse(&p, c->spec, &err) || ag_nbhd_from_pattern(nb, p, c->N, c->self, &err) ||
        (transpose && ag_nbhd_transpose(nb, &err)))
        die(&err);
    ag_pattern_free(p);
}

/* The largest |m - m_ref| / max |m_ref| of M [N, H*d] against the double
   reference on nb's edges. */
static double reference_error(const ag_nbhd_t *nb, const float *Q, const float *K,
                              const float *V, int64_t H, int64_t d, const float *M)
{
    const int64_t N = nb->n_nodes, E = nb->n_edges, HD = H * d;
    int64_t *src = malloc((size_t)(E + 1) * sizeof *src), *dst = malloc((size_t)(E + 1) * sizeof *dst);
    ag_nbhd_sources(nb, 0, N, src);
    for (int64_t i = 0; i < N; i++)
        for (int64_t s = nb->edge_ptr[i]; s < nb->edge_ptr[i + 1]; s++)
            dst[s] = i;
    double *Mref = malloc((size_t)(N * HD) * sizeof *Mref), worst = 0, scale = 0;
    ref_attention_sparse(N, src, dst, E, Q, K, V, H, d, Mref);
    for (int64_t x = 0; x < N * HD; x++) {
        worst = fmax(worst, fabs(M[x] - Mref[x]));
        scale = fmax(scale, fabs(Mref[x]));
    }
    free(src), free(dst), free(Mref);
    return worst / scale;
}

static void run_case(const case_t *c, const gemm_t *sgemm, const rows_t *rows)
{
    ag_nbhd_t nb;
    ag_error_t err;
    compile_case(&nb, c, 0);
    const int64_t N = c->N, H = c->H, d = c->d, HD = H * d, E = nb.n_edges;
    float *Q = floats(N * HD), *K = floats(N * HD), *V = floats(N * HD), *M = floats(N * HD);
    ag_random_normal(Q, N * HD, 7, 1, 1.0f);
    ag_random_normal(K, N * HD, 7, 2, 1.0f);
    ag_random_normal(V, N * HD, 7, 3, 1.0f);
    const double flops = 4.0 * (double)E * (double)d * (double)H;
    for (int threads = 1; threads <= 2; threads++) {
        set_threads(threads);
        double t[ROUNDS * PER_ROUND], yard[ROUNDS], peak[ROUNDS];
        if (ag_attention(&nb, Q, K, V, H, d, NULL, M, &err))   /* warm-up */
            die(&err);
        for (int r = 0; r < ROUNDS; r++) {
            yard[r] = c->memory_bound ? rows_run(rows) : gemm_run(sgemm);
            /* the yardstick flushed the caches; time warm runs, as attngraph
               bench does: after an sgemm the kernels run up to 30% slower for
               a while (causal H=8 on Zen 5, AVX2, one thread: 0.062 s with
               0.05 s of warm runs, 0.055-0.060 s with 0.3-1 s) */
            const double warm0 = now_s();
            for (int k = 0; k < 3 || now_s() - warm0 < WARM_S; k++)
                ag_attention(&nb, Q, K, V, H, d, NULL, M, &err);
            for (int k = 0; k < PER_ROUND; k++) {
                const double t0 = now_s();
                ag_attention(&nb, Q, K, V, H, d, NULL, M, &err);
                t[r * PER_ROUND + k] = now_s() - t0;
            }
            /* the FMA peak of the same minutes (the machine's speed drifts) */
            peak[r] = c->memory_bound ? 0.0 : fma_peak();
        }
        const double tm = median_s(t, ROUNDS * PER_ROUND), gf = flops / tm / 1e9;
        const double y = median_s(yard, ROUNDS), pk = median_s(peak, ROUNDS);
        if (c->memory_bound) {
            /* bytes the kernel must read: a K and a V row per edge */
            const double gbs = (double)E * 2.0 * HD * 4 / tm / 1e9;
            printf("  %-32s %d  %8.4f s %7.2f GFLOP/s  %5.1f GB/s = %4.2f of rows at %4.1f GB/s\n",
                   c->name, threads, tm, gf, gbs, gbs / y, y);
        } else {
            printf("  %-32s %d  %8.4f s %7.2f GFLOP/s  %4.2f of FMA peak, %4.2f of sgemm at "
                   "%5.1f GFLOP/s\n", c->name, threads, tm, gf, gf / pk, gf / y, y);
        }
        /* figures: with and without, alternating */
        float *ent = floats(N * H), *top = floats(N * H);
        const ag_attention_opts_t fig = {.entropy = ent, .max_weight = top};
        double plain[2 * ROUNDS * PER_ROUND], with[2 * ROUNDS * PER_ROUND];
        for (int k = 0; k < 2 * ROUNDS * PER_ROUND; k++) {
            double t0 = now_s();
            ag_attention(&nb, Q, K, V, H, d, NULL, M, &err);
            plain[k] = now_s() - t0;
            t0 = now_s();
            ag_attention_ex(&nb, Q, K, V, H, d, NULL, M, &fig, &err);
            with[k] = now_s() - t0;
        }
        const double tp = median_s(plain, 2 * ROUNDS * PER_ROUND);
        const double tw = median_s(with, 2 * ROUNDS * PER_ROUND);
        printf("  %-32s %d  figures in the pass: %8.4f s = %5.3f of the plain %8.4f s\n", "",
               threads, tw, tw / tp, tp);
        free(ent), free(top);
        fflush(stdout);
    }
    printf("  %-32s    error against the double reference: %.2e relative\n", "",
           reference_error(&nb, Q, K, V, H, d, M));
    free(Q), free(K), free(V), free(M);
    ag_nbhd_destroy(&nb);
}

/* The backward with M and lse given (ag_attention_backward), interleaved with
   its yardstick (the FMA peak; a memory-bound case's, the random-row
   bandwidth) and with the training forward (ag_attention_ex with lse). */
static void run_backward(const case_t *c, const rows_t *rows)
{
    ag_nbhd_t nb;
    ag_error_t err;
    compile_case(&nb, c, 1);
    const int64_t N = c->N, H = c->H, d = c->d, HD = H * d, E = nb.n_edges;
    float *Q = floats(N * HD), *K = floats(N * HD), *V = floats(N * HD), *M = floats(N * HD);
    float *dM = floats(N * HD), *g = floats(3 * N * HD), *lse = floats(N * H);
    ag_random_normal(Q, N * HD, 7, 1, 1.0f);
    ag_random_normal(K, N * HD, 7, 2, 1.0f);
    ag_random_normal(V, N * HD, 7, 3, 1.0f);
    ag_random_normal(dM, N * HD, 7, 4, 1.0f);
    const ag_attention_opts_t fw = {.lse = lse};
    const ag_attention_grads_t gr = {.dQ = g, .dK = g + N * HD, .dV = g + 2 * N * HD};
    const double flops = 10.0 * (double)E * (double)d * (double)H;
    for (int threads = 1; threads <= 2; threads++) {
        set_threads(threads);
        double tb[ROUNDS * PER_ROUND], tf[ROUNDS * PER_ROUND], yard[ROUNDS];
        if (ag_attention_ex(&nb, Q, K, V, H, d, NULL, M, &fw, &err))
            die(&err);
        for (int r = 0; r < ROUNDS; r++) {
            yard[r] = c->memory_bound ? rows_run(rows) : fma_peak();
            const double warm0 = now_s();
            for (int k = 0; k < 2 || now_s() - warm0 < WARM_S; k++)
                if (ag_attention_backward(&nb, Q, K, V, H, d, NULL, M, lse, dM, &gr, &err))
                    die(&err);
            for (int k = 0; k < PER_ROUND; k++) {
                double t0 = now_s();
                ag_attention_backward(&nb, Q, K, V, H, d, NULL, M, lse, dM, &gr, &err);
                tb[r * PER_ROUND + k] = now_s() - t0;
                t0 = now_s();
                ag_attention_ex(&nb, Q, K, V, H, d, NULL, M, &fw, &err);
                tf[r * PER_ROUND + k] = now_s() - t0;
            }
        }
        const double t = median_s(tb, ROUNDS * PER_ROUND), f = median_s(tf, ROUNDS * PER_ROUND);
        const double y = median_s(yard, ROUNDS), gf = flops / t / 1e9;
        if (c->memory_bound) {
            /* bytes it must read: per edge, a K and a V row (destinations' pass),
               a Q and a dM row (sources' pass) */
            const double gbs = (double)E * 4.0 * HD * 4 / t / 1e9;
            printf("  %-32s %d  %8.4f s %7.2f GFLOP/s  %5.1f GB/s = %4.2f of rows at %4.1f "
                   "GB/s; %4.2fx the forward's %.4f s\n", c->name, threads, t, gf, gbs, gbs / y,
                   y, t / f, f);
        } else
            printf("  %-32s %d  %8.4f s %7.2f GFLOP/s  %4.2f of FMA peak at %5.1f; %4.2fx the "
                   "forward's %.4f s\n", c->name, threads, t, gf, gf / y, y, t / f, f);
        fflush(stdout);
    }
    free(Q), free(K), free(V), free(M), free(dM), free(g), free(lse);
    ag_nbhd_destroy(&nb);
}

/* The table's cases, forward and backward alike. */
static const case_t cases[] = {
    {"complete N=2048 d=64 H=1", "complete", 2048, 1, 64, AG_SELF_KEEP, 0},
    {"causal N=4096 d=64 H=1", "causal", 4096, 1, 64, AG_SELF_KEEP, 0},
    {"causal N=2048 d=64 H=8", "causal", 2048, 8, 64, AG_SELF_KEEP, 0},
    {"causal N=4096 d=32 H=4", "causal", 4096, 4, 32, AG_SELF_KEEP, 0},   /* the GPT's heads */
    {"window W=128 N=32768 d=64", "window:128", 32768, 1, 64, AG_SELF_KEEP, 0},
    {"random 16 + self N=200000 d=64", "random:16,1", 200000, 1, 64, AG_SELF_ON, 1},
};

/* The score functions' cases (generic.c). */
static const case_t score_cases[] = {
    {"causal N=2048 d=64 H=1", "causal", 2048, 1, 64, AG_SELF_KEEP, 0},
    {"random 16 + self N=100000 d=64", "random:16,1", 100000, 1, 64, AG_SELF_ON, 1},
};

/* Every variant on small forms of the cases (the tiled kernel wide and
   narrow, the gather kernel), forward and backward: each must agree with the
   double reference (forward) and with the first variant's gradients. */
static int smoke(void)
{
    static const case_t small[] = {
        {"complete", "complete", 300, 2, 64, AG_SELF_KEEP, 0},
        {"causal", "causal", 600, 1, 48, AG_SELF_KEEP, 0},
        {"window", "window:40", 500, 2, 32, AG_SELF_KEEP, 0},
        {"random", "random:16,1", 700, 1, 64, AG_SELF_ON, 1},
    };
    int failed = 0;
    const int best = (int)ag_i_simd_level();   /* ag_i_simd_level() is the forced one below */
    for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) {
        const case_t *c = &small[k];
        ag_nbhd_t nb;
        ag_error_t err;
        compile_case(&nb, c, 1);
        const int64_t n = c->N * c->H * c->d;
        float *Q = floats(n), *K = floats(n), *V = floats(n), *M = floats(n), *dM = floats(n);
        float *g = floats(3 * n), *g0 = floats(3 * n), *M0 = floats(n);
        ag_random_normal(Q, n, 9, 1, 1.0f), ag_random_normal(K, n, 9, 2, 1.0f);
        ag_random_normal(V, n, 9, 3, 1.0f), ag_random_normal(dM, n, 9, 4, 1.0f);
        const ag_attention_grads_t gr = {.dQ = g, .dK = g + n, .dV = g + 2 * n};
        for (int level = best; level >= AG_SIMD_BASE; level--) {
            ag_i_simd_force(level);
            if (ag_attention(&nb, Q, K, V, c->H, c->d, NULL, M, &err) ||
                ag_attention_backward(&nb, Q, K, V, c->H, c->d, NULL, NULL, NULL, dM, &gr, &err))
                die(&err);
            const double e = reference_error(&nb, Q, K, V, c->H, c->d, M);
            double ge = 0, gs = 0;
            if (level == best) {   /* the first variant's */
                memcpy(g0, g, (size_t)(3 * n) * sizeof *g);
                memcpy(M0, M, (size_t)n * sizeof *M);
            }
            /* AVX2 runs the AVX-512 variant's operations, in halves: the same bits */
            const int same = level != AG_SIMD_AVX2 || best != AG_SIMD_AVX512 ||
                             (!memcmp(M, M0, (size_t)n * sizeof *M) &&
                              !memcmp(g, g0, (size_t)(3 * n) * sizeof *g));
            for (int64_t x = 0; x < 3 * n; x++)
                ge = fmax(ge, fabs(g[x] - g0[x])), gs = fmax(gs, fabs(g0[x]));
            const int bad = !(e < 2e-5) || !(ge <= 1e-4 * gs) || !same;
            failed |= bad;
            printf("smoke %-8s %-6s forward %.1e of the reference, gradients %.1e of the "
                   "first variant's%s%s\n", c->name, ag_simd_isa(), e, gs > 0 ? ge / gs : ge,
                   same ? "" : " (not the AVX-512 bits)", bad ? "  FAILED" : "");
        }
        ag_i_simd_force(-1);
        free(Q), free(K), free(V), free(M), free(dM), free(g), free(g0), free(M0);
        ag_nbhd_destroy(&nb);
    }
    return failed;
}

/* The score functions of the generic path (generic.c) against the one-pass
   kernel (simple.c) on plain scaled-dot scores, runs of the two alternating on
   2 threads: the ratio is of the two medians (4*E*d*H useful flops for all). */
static void run_scores(const case_t *c, const char *only)
{
    static const struct {
        const char *name;
        ag_score_kind_t kind;
    } kinds[] = {{"cosine", AG_SCORE_COSINE}, {"additive (GAT)", AG_SCORE_ADDITIVE},
                 {"gatv2", AG_SCORE_GATV2}, {"sigmoid", AG_SCORE_SIGMOID},
                 {"linear", AG_SCORE_LINEAR}};
    enum { RUNS = 7 };
    ag_nbhd_t nb;
    ag_error_t err;
    compile_case(&nb, c, 0);
    const int64_t N = c->N, H = c->H, d = c->d, HD = H * d;
    float *Q = floats(N * HD), *K = floats(N * HD), *V = floats(N * HD), *M = floats(N * HD);
    float *a = floats(2 * HD);
    ag_random_normal(Q, N * HD, 7, 1, 1.0f), ag_random_normal(K, N * HD, 7, 2, 1.0f);
    ag_random_normal(V, N * HD, 7, 3, 1.0f), ag_random_normal(a, 2 * HD, 7, 4, 0.1f);
    const double flops = 4.0 * (double)nb.n_edges * (double)d * (double)H;
    const float scale = 1.0f / sqrtf((float)d);
    set_threads(2);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (only && !strstr(kinds[k].name, only))
            continue;
        ag_score_t sc;
        ag_score_init(&sc, kinds[k].kind);
        sc.a_src = a, sc.a_dst = kinds[k].kind == AG_SCORE_ADDITIVE ? a + HD : NULL;
        double tg[RUNS], ts[RUNS];
        for (int r = -1; r < RUNS; r++) {   /* r = -1: warm-up */
            double t0 = now_s();
            if (ag_attention(&nb, Q, K, V, H, d, &sc, M, &err))
                die(&err);
            if (r >= 0)
                tg[r] = now_s() - t0;
            t0 = now_s();
            if (ag_i_attention_with(AG_I_KERNEL_SIMPLE,
                                    &(ag_i_fwd_t){&nb, Q, K, V, H, d,
                                                  AG_I_DOT_SCORE(scale), M, NULL},
                                      &err))
                die(&err);
            if (r >= 0)
                ts[r] = now_s() - t0;
        }
        const double g = median_s(tg, RUNS), o = median_s(ts, RUNS);
        printf("  %-32s %-14s %8.4f s %7.2f GFLOP/s = %4.2fx the one-pass kernel's %.4f s\n",
               c->name, kinds[k].name, g, flops / g / 1e9, o / g, o);
        fflush(stdout);
    }
    free(Q), free(K), free(V), free(M), free(a);
    ag_nbhd_destroy(&nb);
}

/* The backward rows whose name contains `only` (NULL: all). */
static void backward_table(const char *only, const rows_t *rows)
{
    printf("  backward (10*E*d*H useful flops) threads  median    useful rate\n");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        if (!only || strstr(cases[k].name, only))
            run_backward(&cases[k], rows);
}

/* The yardstick at its fastest: OpenBLAS 0.3.21 picks SSE3 kernels on an
   Emerald Rapids, and these machines' environment holds it to AVX2 ones on AVX-512
   CPUs (OPENBLAS_CORETYPE=Haswell). It reads OPENBLAS_CORETYPE once, when it
   loads: the bench starts itself again with the best core type, once. */
static void blas_best(char **argv)
{
    const int wide = ag_i_simd_level() == AG_SIMD_AVX512;
    const char *best = wide ? "SkylakeX" : ag_i_simd_level() == AG_SIMD_AVX2 ? "Haswell" : NULL;
    const char *chosen = openblas_get_corename();
    if (!best || getenv("BENCH_BLAS_RESTARTED") || (chosen && strcasecmp(chosen, best) == 0) ||
        (wide && chosen && (strcasecmp(chosen, "Cooperlake") == 0 ||
                            strcasecmp(chosen, "SapphireRapids") == 0)))
        return;
    setenv("BENCH_BLAS_RESTARTED", "1", 1);
    setenv("OPENBLAS_CORETYPE", best, 1);
    execv("/proc/self/exe", argv);   /* returns only on failure: the bench goes on */
}

int main(int argc, char **argv)
{
    ag_error_t err;
    if (!getenv("AG_SIMD") || !*getenv("AG_SIMD"))
        blas_best(argv);
    printf("attngraph benchmark (%s; yardstick %s, kernels %s)\n", AG_VERSION,
           openblas_get_config(), openblas_get_corename());
    if (argc > 1 && strcmp(argv[1], "smoke") == 0)
        return smoke();
    if (argc > 1 && strcmp(argv[1], "peak") == 0) {   /* one figure, for tools/bench_lm.py */
        if (ag_simd_env_check(&err))
            die(&err);
        set_threads(argc > 2 ? atoi(argv[2]) : 1);
        printf("fma-peak %s %.2f\n", ag_simd_isa(), fma_rate());
        return 0;
    }
    const int backward_only = argc > 1 && strcmp(argv[1], "backward") == 0;
    const int forward_only = argc > 1 && strcmp(argv[1], "forward") == 0;
    const int scores_only = argc > 1 && strcmp(argv[1], "scores") == 0;
    if (argc > 1 && strcmp(argv[1], "products") == 0) {   /* per variant, one thread */
        if (ag_simd_env_check(&err))
            die(&err);
        const ag_simd_level_t top = ag_i_simd_level();
        const int low = getenv("AG_SIMD") && *getenv("AG_SIMD") ? (int)top : AG_SIMD_BASE;
        for (int level = (int)top; level >= low; level--) {
            ag_i_simd_force(level);
            set_threads(1);
            const double peak = fma_rate();
            printf("== products: %s, 1 thread; FMA peak of %s %.1f GFLOP/s; OpenBLAS's "
                   "kernels %s\n", ag_simd_isa(), level == AG_SIMD_AVX512 ? "zmm" : "ymm", peak,
                   openblas_get_corename());
            products_table(peak);
        }
        ag_i_simd_force(-1);
        return 0;
    }
    const char *only = (backward_only || forward_only || scores_only) && argc > 2 ? argv[2] : NULL;
    for (int t = 1; t <= 2 && !backward_only && !scores_only; t++) {
        set_threads(t);
        const double sg = gemm_rate(4096, 4096, 4096, 0, 0), own = gemm_rate(4096, 4096, 4096, 0, 1);
        const double pr = gemm_rate(16384, 1024, 1024, 1, 0);
        const double own_pr = gemm_rate(16384, 1024, 1024, 1, 1);
        printf("  %d thread%s: 4096^3 OpenBLAS sgemm %6.1f GFLOP/s, the library's %6.1f (%.2f); "
               "X W^T [16384x1024]x[1024x1024]^T %6.1f and %6.1f (%.2f)\n", t,
               t > 1 ? "s" : " ", sg, own, own / sg, pr, own_pr, own_pr / pr);
    }
    gemm_t sgemm;
    rows_t rows;
    const int tables = !backward_only && !scores_only;   /* the forward's, with yardsticks */
    if (tables)
        gemm_init(&sgemm, 4096, 4096, 4096, 0, 0);
    if (!scores_only)
        rows_init(&rows);
    /* AG_SIMD names the one variant to time; unset, every variant the CPU runs */
    if (ag_simd_env_check(&err))
        die(&err);
    const ag_simd_level_t best = ag_i_simd_level();
    const int last = getenv("AG_SIMD") && *getenv("AG_SIMD") ? (int)best : AG_SIMD_BASE;
    for (int level = (int)best; level >= last && !scores_only; level--) {
        ag_i_simd_force(level);
        double peak[2];
        for (int t = 1; t <= 2; t++) {
            set_threads(t);
            peak[t - 1] = fma_rate();
        }
        printf("== kernels: %s; FMA peak of %s (the yardstick) %.1f GFLOP/s on 1 thread, "
               "%.1f on 2\n", ag_simd_isa(), level == AG_SIMD_AVX512 ? "zmm" : "ymm", peak[0],
               peak[1]);
        if (tables) {   /* the library's products on this variant */
            const double pr = gemm_rate(16384, 1024, 1024, 1, 1);
            printf("  products X W^T [16384x1024]x[1024x1024]^T, 2 threads: %.1f GFLOP/s = "
                   "%.2f of the FMA peak\n", pr, pr / peak[1]);
        }
        if (tables) {
            printf("  case                         threads  median    useful rate\n");
            for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
                if (!only || strstr(cases[k].name, only))
                    run_case(&cases[k], &sgemm, &rows);
        }
        if (!forward_only && !scores_only)
            backward_table(only, &rows);
    }
    ag_i_simd_force(-1);
    /* once, on the CPU's best variant: the one-pass kernel and the generic path's
       sigmoid and linear are baseline code on every variant, and its softmax
       kinds' vector rows give the same bits on each */
    if ((tables && !only && !forward_only) || scores_only) {
        printf("== score functions (%s; sigmoid, linear and the one-pass kernel: baseline "
               "code), 2 threads\n"
               "  case                             kind           median    useful rate\n",
               ag_simd_isa());
        for (size_t k = 0; k < sizeof score_cases / sizeof score_cases[0]; k++)
            run_scores(&score_cases[k], scores_only ? only : NULL);
    }
    if (tables)
        gemm_free(&sgemm);
    if (!scores_only)
        free(rows.x), free(rows.idx);
    return 0;
}
