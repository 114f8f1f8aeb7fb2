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

#define MEASURE_EDGES ((int64_t)16000000)   /* at most this many messages are timed */
#define MEASURE_NODES ((int64_t)65536)

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

int plan_kernel_rate(double *gflops, const ag_nbhd_t *nb, int64_t H, int64_t d, ag_error_t *err)
{
    const int64_t N = nb->n_nodes, HD = H * d;
    float *all = ag_alloc(4 * N * HD, sizeof *all, err, "plan's kernel run");
    if (!all)
        return ag_alloc_status();
    kernel_run_t k = {nb, all, all + N * HD, all + 2 * N * HD, all + 3 * N * HD, H, d};
    ag_random_normal(all, 3 * N * HD, 1, 10, 1.0f);
    const double t = best_of(kernel_call, &k, err);
    free(all);
    if (t < 0)
        return err->status;
    *gflops = 4.0 * (double)nb->n_edges * (double)HD / (t > 1e-9 ? t : 1e-9) / 1e9;
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

/* Compiles spec on the largest n <= min(N, MEASURE_NODES), halving, whose
   messages stay under MEASURE_EDGES. */
static int small_pattern(ag_nbhd_t *nb, const char *spec, int64_t N, ag_self_loops_t self,
                         ag_error_t *err)
{
    ag_pattern_t *pat;
    int rc = ag_pattern_parse(&pat, spec, err);
    if (rc)
        return rc;
    for (int64_t n = N < MEASURE_NODES ? N : MEASURE_NODES;; n /= 2) {
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

/* The neighbourhoods to time: the input if small, the pattern on fewer nodes,
   or random sources of the input's mean in-degree. */
static int pick_measured(ag_nbhd_t *small, const ag_nbhd_t **nb, const plan_input_t *in,
                         int64_t HD, char *where, size_t cap, ag_error_t *err)
{
    if (in->nb && in->nb->n_edges <= MEASURE_EDGES && in->nb->n_nodes * HD <= (1 << 26)) {
        *nb = in->nb;
        snprintf(where, cap, "the input itself");
        return AG_OK;
    }
    *nb = small;
    /* a pattern with a size of its own can only be compiled at that size */
    if (in->pattern && (!ag_pattern_size(in->pattern) || in->N <= MEASURE_NODES) &&
        !small_pattern(small, ag_pattern_spec(in->pattern), in->N, in->self, err)) {
        snprintf(where, cap, "'%s' on %lld nodes", ag_pattern_spec(in->pattern),
                 (long long)small->n_nodes);
        return AG_OK;
    }
    const double mean = in->mean_degree;
    const int64_t k = mean < 1 ? 1 : mean > 1024 ? 1024 : llround(mean);
    char spec[64];
    snprintf(spec, sizeof spec, "random:%lld", (long long)k);
    snprintf(where, cap, "'%s' on %lld nodes, the input's mean in-degree", spec,
             (long long)MEASURE_NODES);
    return small_pattern(small, spec, MEASURE_NODES, AG_SELF_KEEP, err);
}

int plan_measure(plan_rates_t *r, const plan_input_t *in, int64_t D, int64_t H, int64_t d,
                 ag_error_t *err)
{
    ag_nbhd_t small = {0};
    const ag_nbhd_t *nb = NULL;
    int rc = AG_OK;
    if (r->kernel_gflops <= 0) {
        rc = pick_measured(&small, &nb, in, H * d, r->where, sizeof r->where, err);
        if (!rc)
            rc = plan_kernel_rate(&r->kernel_gflops, nb, H, d, err);
        r->kernel_measured = 1;
    }
    if (!rc && r->gemm_gflops <= 0) {
        rc = plan_gemm_rate(&r->gemm_gflops, D, H * d, err);
        r->gemm_measured = 1;
    }
    ag_nbhd_destroy(&small);
    return rc;
}
