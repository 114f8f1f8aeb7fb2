/*
 * make bench: times the attention kernel on 1 and 2 threads (median of 5
 * after one warm-up run) and compares with the dense double reference where
 * it fits. Useful GFLOP/s = 4*E*d*H / time (a multiply-add on q.k and on
 * a*v per edge, head and channel).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "attngraph.h"
#include "../tests/reference.h"

#define REPS 5

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const ag_error_t *err)
{
    fprintf(stderr, "bench: %s\n", err->msg);
    exit(1);
}

/* Median seconds of REPS runs after a warm-up. */
static double time_kernel(const ag_nbhd_t *nb, const float *Q, const float *K, const float *V,
                          int64_t H, int64_t d, float *M)
{
    ag_error_t err;
    double t[REPS];
    if (ag_attention(nb, Q, K, V, H, d, NULL, M, &err))
        die(&err);
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        ag_attention(nb, Q, K, V, H, d, NULL, M, &err);
        t[r] = now() - t0;
    }
    qsort(t, REPS, sizeof t[0], cmp_double);
    return t[REPS / 2];
}

static void run_case(const char *name, int64_t N, const int64_t *indptr, const int64_t *indices,
                     int64_t H, int64_t d)
{
    ag_nbhd_t nb;
    ag_error_t err;
    if (ag_nbhd_from_csr(&nb, N, indptr, indices, &err))
        die(&err);
    const int64_t HD = H * d, E = nb.n_edges;
    float *Q = malloc((size_t)(N * HD) * sizeof *Q), *K = malloc((size_t)(N * HD) * sizeof *K);
    float *V = malloc((size_t)(N * HD) * sizeof *V), *M = malloc((size_t)(N * HD) * sizeof *M);
    ag_random_normal(Q, N * HD, 1, 1, 1.0f);
    ag_random_normal(K, N * HD, 1, 2, 1.0f);
    ag_random_normal(V, N * HD, 1, 3, 1.0f);
    const double flops = 4.0 * (double)E * (double)d * (double)H;

    printf("%s: N=%lld E=%lld H=%lld d=%lld\n", name, (long long)N, (long long)E, (long long)H,
           (long long)d);
    double t1 = 0;
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        double t = time_kernel(&nb, Q, K, V, H, d, M);
        if (threads == 1)
            t1 = t;
        printf("  kernel, %d thread%s: median %8.4f s  %6.2f GFLOP/s  (x%.2f vs 1 thread)\n",
               threads, threads > 1 ? "s" : "", t, flops / t / 1e9, t1 / t);
    }
    if (N <= 8192) {
        int64_t *src = malloc((size_t)E * sizeof *src), *dst = malloc((size_t)E * sizeof *dst);
        for (int64_t i = 0; i < N; i++)
            for (int64_t s = indptr[i]; s < indptr[i + 1]; s++)
                src[s] = indices[s], dst[s] = i;
        double *Mref = malloc((size_t)(N * HD) * sizeof *Mref);
        double t0 = now();
        ref_attention(N, src, dst, E, Q, K, V, H, d, Mref, NULL);
        double tref = now() - t0, worst = 0;
        for (int64_t x = 0; x < N * HD; x++)
            worst = fmax(worst, fabs(M[x] - Mref[x]) / (1 + fabs(Mref[x])));
        printf("  dense double reference, 1 thread: %8.4f s  (kernel on 2 threads is x%.1f "
               "faster); largest error %.2e\n", tref, tref / time_kernel(&nb, Q, K, V, H, d, M),
               worst);
        free(src), free(dst), free(Mref);
    } else {
        printf("  dense double reference: does not fit (N x N = %.1e entries)\n",
               (double)N * (double)N);
    }
    free(Q), free(K), free(V), free(M);
    ag_nbhd_destroy(&nb);
}

int main(void)
{
    /* causal N=4096: node i attends 0..i */
    const int64_t Nc = 4096;
    int64_t *indptr = malloc((size_t)(Nc + 1) * sizeof *indptr);
    int64_t *indices = malloc((size_t)(Nc * (Nc + 1) / 2) * sizeof *indices);
    indptr[0] = 0;
    for (int64_t i = 0, e = 0; i < Nc; i++) {
        for (int64_t j = 0; j <= i; j++)
            indices[e++] = j;
        indptr[i + 1] = e;
    }
    run_case("causal", Nc, indptr, indices, 1, 64);
    free(indptr), free(indices);

    /* random: 200,000 nodes, 16 distinct random sources each (sorted) */
    const int64_t Nr = 200000, deg = 16;
    indptr = malloc((size_t)(Nr + 1) * sizeof *indptr);
    indices = malloc((size_t)(Nr * deg) * sizeof *indices);
    uint64_t s = 12345;
    indptr[0] = 0;
    for (int64_t i = 0; i < Nr; i++) {
        int64_t *row = indices + i * deg;
        for (int64_t k = 0; k < deg; k++) {
            int fresh;
            do {   /* xorshift; redraw duplicates */
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                row[k] = (int64_t)(s % (uint64_t)Nr);
                fresh = 1;
                for (int64_t m = 0; m < k; m++)
                    fresh &= row[m] != row[k];
            } while (!fresh);
        }
        for (int64_t a = 1; a < deg; a++)   /* insertion sort: sources ascending */
            for (int64_t b = a; b > 0 && row[b] < row[b - 1]; b--) {
                int64_t t = row[b];
                row[b] = row[b - 1];
                row[b - 1] = t;
            }
        indptr[i + 1] = (i + 1) * deg;
    }
    run_case("random 16 in-edges", Nr, indptr, indices, 1, 64);
    free(indptr), free(indices);
    return 0;
}
