/*
 * `attngraph plan`'s yardsticks: the attention kernel's and the projections'
 * rates on this machine, from short in-process runs, so a round's time at P
 * processes can be estimated without running it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/plan.h"
#include "cli/timing.h"
#include "kernels/kernels.h"

#define MEASURE_EDGES ((int64_t)16000000)   /* at most this many messages are timed */
#define MEASURE_NODES ((int64_t)65536)
/* The most memory the timed rows take (Q, K, V, M): 2 GB, beyond any cache */
#define MEASURE_BYTES ((int64_t)1 << 31)

/* The least of 3 timed calls after one untimed. */
static double best_of(int (*call)(void *ctx, ag_error_t *err), void *ctx, ag_error_t *err)
{
    double best = INFINITY;
    for (int r = 0; r < 4; r++) {
        const double t0 = now_s();
        if (call(ctx, err))
            return -1;
        const double t = now_s() - t0;
        if (r && t < best)
            best = t;
    }
    return best;
}

typedef struct {
    const ag_nbhd_t *nb;
    float *Q, *K, *V, *M;
    int64_t H, d;
} kernel_run_t;

static int kernel_call(void *ctx, ag_error_t *err)
{
    kernel_run_t *k = ctx;
    return ag_attention(k->nb, k->Q, k->K, k->V, k->H, k->d, NULL, k->M, err);
}

/* The best time of the kernel on nb, on seeded random Q, K, V. */
static double kernel_time(const ag_nbhd_t *nb, int64_t H, int64_t d, ag_error_t *err)
{
    const int64_t N = nb->n_nodes, HD = H * d;
    float *all = ag_alloc(4 * N * HD, sizeof *all, err, "plan's kernel run");
    if (!all)
        return -1;
    kernel_run_t k = {nb, all, all + N * HD, all + 2 * N * HD, all + 3 * N * HD, H, d};
    ag_random_normal(all, 3 * N * HD, 1, 10, 1.0f);
    const double t = best_of(kernel_call, &k, err);
    free(all);
    return t;
}

int plan_kernel_rate(double *gflops, const ag_nbhd_t *nb, int64_t H, int64_t d,
                     int64_t empty_rows, ag_error_t *err)
{
    double t = kernel_time(nb, H, d, err);
    if (t >= 0 && empty_rows > 0) {   /* less the rows without messages: writing their M */
        int64_t *ptr = ag_calloc(empty_rows + 1, sizeof *ptr, err, "plan's kernel run");
        ag_nbhd_t none = {0};
        double t0 = -1;
        if (ptr && !ag_nbhd_from_csr(&none, empty_rows, ptr, ptr, err))
            t0 = kernel_time(&none, H, d, err);
        ag_nbhd_destroy(&none);
        free(ptr);
        t = t0 < 0 ? -1 : t - t0 > t / 4 ? t - t0 : t / 4;   /* noise never makes it free */
    }
    if (t < 0)
        return err->status ? err->status : AG_EINVAL;
    *gflops = 4.0 * (double)nb->n_edges * (double)(H * d) / (t > 1e-9 ? t : 1e-9) / 1e9;
    return AG_OK;
}

typedef struct {
    float *X, *W, *Y;
    int64_t n, D, HD;
} gemm_run_t;

static int gemm_call(void *ctx, ag_error_t *err)
{
    (void)err;
    gemm_run_t *g = ctx;
    for (int rep = 0; rep < 4; rep++)   /* Q, K, V and the output projection's worth */
        ag_i_gemm_xwt(g->Y, g->X, g->W, g->n, g->D, g->HD, 0.0f);
    return AG_OK;
}

int plan_gemm_rate(double *gflops, int64_t D, int64_t HD, ag_error_t *err)
{
    const int64_t n = MEASURE_NODES;
    float *all = ag_alloc(n * D + HD * D + n * HD, sizeof *all, err, "plan's projection run");
    if (!all)
        return ag_alloc_status();
    gemm_run_t g = {all, all + n * D, all + n * D + HD * D, n, D, HD};
    ag_random_normal(all, n * D + HD * D, 1, 11, 1.0f);
    const double t = best_of(gemm_call, &g, err);
    free(all);
    if (t < 0)
        return err->status;
    *gflops = 8.0 * (double)n * (double)D * (double)HD / (t > 1e-9 ? t : 1e-9) / 1e9;
    return AG_OK;
}

/* Compiles spec on the largest n <= min(N, most), halving, whose messages stay
   under MEASURE_EDGES. */
static int small_pattern(ag_nbhd_t *nb, const char *spec, int64_t N, int64_t most,
                         ag_self_loops_t self, ag_error_t *err)
{
    ag_pattern_t *pat;
    int rc = ag_pattern_parse(&pat, spec, err);
    if (rc)
        return rc;
    for (int64_t n = N < most ? N : most;; n /= 2) {
        rc = ag_nbhd_from_pattern(nb, pat, n, self, err);
        if (rc || nb->n_edges <= MEASURE_EDGES)
            break;
        ag_nbhd_destroy(nb);
        if (n == 1) {
            rc = ag_fail(err, AG_ELIMIT, "pattern '%s' has too many messages to time", spec);
            break;
        }
    }
    ag_pattern_free(pat);
    return rc;
}

/* Destinations of random reads in random_reads: enough that the kernel's reads
   outweigh writing the output of the rows without messages. */
#define MEASURE_DESTINATIONS (4 * MEASURE_NODES)

/* MEASURE_DESTINATIONS destinations of k sources each, drawn uniformly from
   `rows` rows (seeded): the reads of a process whose K and V rows are as many
   as the planned process's, so as far out of the caches. */
static int random_reads(ag_nbhd_t *nb, int64_t rows, int64_t k, ag_error_t *err)
{
    const int64_t S = rows < MEASURE_DESTINATIONS ? rows : MEASURE_DESTINATIONS;
    int64_t *ptr = ag_calloc(rows + 1, sizeof *ptr, err, "plan's timed graph");
    int64_t *idx = ag_alloc(S * k, sizeof *idx, err, "plan's timed graph");
    int rc = ptr && idx ? AG_OK : ag_alloc_status();
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int64_t i = 0; !rc && i < S; i++) {
        for (int64_t j = 0; j < k; j++) {   /* xorshift64*; sorted below, repeats kept */
            x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
            idx[i * k + j] = (int64_t)((x * 0x2545f4914f6cdd1du >> 11) % (uint64_t)rows);
        }
        for (int64_t a = 1; a < k; a++)   /* k is small: insertion sort */
            for (int64_t b = i * k + a; b > i * k && idx[b - 1] > idx[b]; b--) {
                const int64_t t = idx[b];
                idx[b] = idx[b - 1], idx[b - 1] = t;
            }
        ptr[i + 1] = (i + 1) * k;
    }
    for (int64_t i = S; !rc && i < rows; i++)
        ptr[i + 1] = S * k;
    if (!rc)
        rc = ag_nbhd_from_csr(nb, rows, ptr, idx, err);
    free(ptr);
    free(idx);
    return rc;
}

/* The neighbourhoods to time: the input if small, else as many rows as the
   planned process reads (its own and its halo: in->rows_read; up to
   MEASURE_BYTES of them): the pattern on that many nodes (fewer where its
   messages would pass MEASURE_EDGES), or random sources of the input's mean
   in-degree among them. */
static int pick_measured(ag_nbhd_t *small, const ag_nbhd_t **nb, int64_t *empty,
                         const plan_input_t *in, int64_t HD, char *where, size_t cap,
                         ag_error_t *err)
{
    *empty = 0;
    if (in->nb && in->nb->n_edges <= MEASURE_EDGES && in->nb->n_nodes * HD <= (1 << 26)) {
        *nb = in->nb;
        snprintf(where, cap, "the input itself");
        return AG_OK;
    }
    *nb = small;
    /* as many rows as the largest process reads, so as far out of the caches */
    const int64_t budget = ag_memory_budget() / 4;   /* Q, K, V, M */
    const int64_t most = (budget < MEASURE_BYTES ? budget : MEASURE_BYTES) /
                         (4 * HD * (int64_t)sizeof(float));
    int64_t rows = in->rows_read > MEASURE_NODES ? in->rows_read : MEASURE_NODES;
    rows = rows < most ? rows : most > MEASURE_NODES ? most : MEASURE_NODES;
    /* a pattern with a size of its own can only be compiled at that size */
    if (in->pattern && (!ag_pattern_size(in->pattern) || in->N <= rows) &&
        !small_pattern(small, ag_pattern_spec(in->pattern), in->N, rows, in->self, err)) {
        snprintf(where, cap, "'%s' on %lld nodes", ag_pattern_spec(in->pattern),
                 (long long)small->n_nodes);
        return AG_OK;
    }
    const double mean = in->mean_degree;
    const int64_t k = mean < 1 ? 1 : mean > 1024 ? 1024 : llround(mean);
    snprintf(where, cap, "%lld nodes of %lld random sources among %lld rows: the input's "
             "mean in-degree, the largest process's rows",
             (long long)(rows < MEASURE_DESTINATIONS ? rows : MEASURE_DESTINATIONS), (long long)k,
             (long long)rows);
    *empty = rows > MEASURE_DESTINATIONS ? rows - MEASURE_DESTINATIONS : 0;   /* random_reads' */
    return random_reads(small, rows, k, err);
}

void plan_runs_per_node(double *runs, int *one_run, const plan_input_t *in)
{
    const ag_nbhd_t *nb = in->nb;
    ag_nbhd_t small = {0};
    ag_error_t ignored;   /* a pattern not compiled on so few nodes: at most a run a message */
    if (!nb && (ag_pattern_size(in->pattern) > MEASURE_NODES ||
                small_pattern(&small, ag_pattern_spec(in->pattern), in->N, MEASURE_NODES,
                              in->self, &ignored))) {
        *runs = in->mean_degree;
        *one_run = -1;
        return;
    }
    if (!nb)   /* a pattern is never compiled whole: its runs on fewer nodes */
        nb = &small;
    *runs = !nb->n_nodes ? 0 : (double)nb->n_runs / (double)nb->n_nodes;
    *one_run = ag_i_one_run(nb, 0, nb->n_nodes);
    ag_nbhd_destroy(&small);
}

int plan_measure(plan_rates_t *r, const plan_input_t *in, int64_t D, int64_t H, int64_t d,
                 ag_error_t *err)
{
    ag_nbhd_t small = {0};
    const ag_nbhd_t *nb = NULL;
    int rc = AG_OK;
    if (r->kernel_gflops <= 0) {
        int64_t empty;
        rc = pick_measured(&small, &nb, &empty, in, H * d, r->where, sizeof r->where, err);
        if (!rc)
            rc = plan_kernel_rate(&r->kernel_gflops, nb, H, d, empty, err);
        r->kernel_measured = 1;
    }
    if (!rc && r->gemm_gflops <= 0) {
        rc = plan_gemm_rate(&r->gemm_gflops, D, H * d, err);
        r->gemm_measured = 1;
    }
    ag_nbhd_destroy(&small);
    return rc;
}
