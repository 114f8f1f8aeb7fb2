/*
 * `attngraph plan`'s yardsticks: the attention kernel's and the projections'
 * rates on this machine, and the rate of writing new memory, from short
 * in-process runs, so a round's time at P processes can be estimated without
 * running it. The kernel is timed through the MPI layer's own entry
 * (ag_i_forward_part: a part's destinations reading rows beyond them), which
 * the public API does not offer, so that it runs as a process's part runs.
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
/* The most memory the timed K and V rows take: 4 GB, beyond any cache and as
   far beyond the TLB's reach as 2 processes of a 10,000,000-node CSR at
   H*d = 16 (0.42 of their rows timed 1.5-1.8x the rate of all of them) */
#define MEASURE_BYTES ((int64_t)1 << 32)

/* The median of 3 timed calls after one untimed: a sustained rate (the least
   of them was 1.2-1.5x the rounds' on random reads, whose speed varies
   from call to call). */
static double median_of(int (*call)(void *ctx, ag_error_t *err), void *ctx, ag_error_t *err)
{
    double t[4];
    for (int r = 0; r < 4; r++) {
        const double t0 = now_s();
        if (call(ctx, err))
            return -1;
        t[r] = now_s() - t0;
    }
    const double a = t[1], b = t[2], c = t[3];
    return a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
}

typedef struct {
    const ag_nbhd_t *nb;
    int64_t lo, hi;             /* the destinations timed */
    ag_i_layout_t layout;
    ag_i_plan_t plan;
    const float *Q, *K, *V;     /* Q and M hold rows lo..hi-1, K and V every row */
    float *M;
    int64_t H, d;
} kernel_run_t;

/* The kernel on a process's part, as attngraph-mpi runs it: its plan made by
   the first call, every later call only the kernel. */
static int kernel_call(void *ctx, ag_error_t *err)
{
    kernel_run_t *k = ctx;
    const ag_i_fwd_t f = {k->nb, k->Q, k->K, k->V, k->H, k->d, NULL, k->M, NULL};
    return ag_i_forward_part(&k->plan, &f, k->lo, k->hi, 0, k->nb->n_nodes, &k->layout, err);
}

int plan_kernel_rate(double *gflops, const ag_nbhd_t *nb, int64_t lo, int64_t hi, int64_t H,
                     int64_t d, ag_error_t *err)
{
    const int64_t N = nb->n_nodes, HD = H * d, n = hi - lo;
    float *all = ag_alloc(2 * (N + n) * HD, sizeof *all, err, "plan's kernel run");
    if (!all)
        return ag_alloc_status();
    ag_random_normal(all, (n + 2 * N) * HD, 1, 10, 1.0f);
    /* Q and M indexed by destination, as the MPI layer's part views are */
    float *Q = all, *K = Q + n * HD, *V = K + N * HD, *M = V + N * HD;
    kernel_run_t k = {nb, lo, hi, {ag_i_one_run(nb, lo, hi), ag_i_block_cells(nb, lo, hi)}, {0},
                      Q - lo * HD, K, V, M - lo * HD, H, d};
    const double t = median_of(kernel_call, &k, err);
    ag_i_plan_free(&k.plan);
    free(all);
    if (t < 0)
        return err->status ? err->status : AG_EINVAL;
    const int64_t E = nb->edge_ptr[hi] - nb->edge_ptr[lo];
    *gflops = 4.0 * (double)E * (double)HD / (t > 1e-9 ? t : 1e-9) / 1e9;
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
    const double t = median_of(gemm_call, &g, err);
    free(all);
    if (t < 0)
        return err->status;
    *gflops = 8.0 * (double)n * (double)D * (double)HD / (t > 1e-9 ? t : 1e-9) / 1e9;
    return AG_OK;
}

/* Memory written for the first time costs its page faults, which some
   machines (virtual ones, whose host backs a page when it is first used) make
   slower than the round's work: the first round writes its queries and
   messages so. Timed once, on as much as the processes sharing this machine
   write (64 MB to 1 GB in all), before anything else plan measures takes
   memory. */
#define TOUCH_LEAST ((int64_t)64 << 20)
#define TOUCH_MOST ((int64_t)1 << 30)

int plan_touch_rate(double *gbs, int64_t bytes, int processes, int threads, ag_error_t *err)
{
    processes = processes > 1 ? processes : 1, threads = threads > 1 ? threads : 1;
    bytes *= processes;
    bytes = bytes < TOUCH_LEAST ? TOUCH_LEAST : bytes > TOUCH_MOST ? TOUCH_MOST : bytes;
    const int writers = processes * threads;
    const int64_t each = bytes / writers;
    char *fresh = ag_alloc(each * writers, 1, err, "plan's memory run");   /* as rounds do */
    if (!fresh)
        return ag_alloc_status();
    const double t0 = now_s();
#pragma omp parallel for num_threads(writers) schedule(static, 1)
    for (int k = 0; k < writers; k++)
        memset(fresh + k * each, 1, (size_t)each);
    const double t = now_s() - t0;
    volatile char last = fresh[each * writers - 1];   /* the writes are used */
    (void)last;
    free(fresh);
    *gbs = (double)(each * threads) / (t > 1e-9 ? t : 1e-9) / 1e9;   /* a process's share */
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

/* Destinations of random reads in random_reads, a process: enough to time. */
#define MEASURE_DESTINATIONS (4 * MEASURE_NODES)

/* `dst` destinations of k sources each, drawn uniformly from `rows` rows
   (seeded), and rows - dst more without messages: the reads of processes
   whose K and V rows are as many as the planned ones', so as far out of the
   caches and the TLB's reach. */
static int random_reads(ag_nbhd_t *nb, int64_t rows, int64_t dst, int64_t k, ag_error_t *err)
{
    const int64_t S = rows < dst ? rows : dst;
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

/* Fewer destinations than this in the messages timed, and a pattern is timed
   whole on fewer nodes (its destinations read many sources: near ones). */
#define MEASURE_PART_LEAST ((int64_t)16384)

/* The neighbourhoods to time and the destinations lo..hi-1 timed: the input
   if small (all of it), else as many rows as the planned processes sharing
   this machine read (their own and their halo: in->rows_read each; their K
   and V up to MEASURE_BYTES), and as many destinations as have
   MEASURE_DESTINATIONS a process or MEASURE_EDGES messages: a pattern's
   destinations mid-way through it on that many nodes (or, with fewer than
   MEASURE_PART_LEAST of them, the pattern whole on fewer nodes), or random
   sources of the input's mean in-degree among the rows. */
static int pick_measured(ag_nbhd_t *small, const ag_nbhd_t **nb, int64_t *lo, int64_t *hi,
                         const plan_input_t *in, int64_t HD, int sharing, char *where,
                         size_t cap, ag_error_t *err)
{
    *lo = 0;
    if (in->nb && in->nb->n_edges <= MEASURE_EDGES && in->nb->n_nodes * HD <= (1 << 26)) {
        *nb = in->nb, *hi = in->nb->n_nodes;
        snprintf(where, cap, "the input itself");
        return AG_OK;
    }
    *nb = small;
    const int64_t budget = ag_memory_budget() / 2;
    const int64_t most = (budget < MEASURE_BYTES ? budget : MEASURE_BYTES) /
                         (2 * HD * (int64_t)sizeof(float));   /* K and V */
    int64_t rows = (in->rows_read > MEASURE_NODES ? in->rows_read : MEASURE_NODES) * sharing;
    rows = rows < most ? rows : most > MEASURE_NODES ? most : MEASURE_NODES;
    /* a pattern with a size of its own can only be compiled at that size */
    const char *spec = in->pattern ? ag_pattern_spec(in->pattern) : NULL;
    const int64_t n = in->N < rows ? in->N : rows, most_dst = MEASURE_DESTINATIONS * sharing;
    const double mean = in->mean_degree > 1 ? in->mean_degree : 1;
    int64_t dst = (double)most_dst * mean < (double)(MEASURE_EDGES * sharing)
                      ? most_dst : (int64_t)((double)(MEASURE_EDGES * sharing) / mean);
    if (spec && (!ag_pattern_size(in->pattern) || in->N <= rows) && dst >= MEASURE_PART_LEAST &&
        dst < n) {
        *lo = (n - dst) / 2 / 1024 * 1024, *hi = *lo + dst;
        if (!ag_nbhd_from_pattern_rows(small, in->pattern, n, *lo, *hi, in->self, err)) {
            snprintf(where, cap, "'%s' on %lld nodes, destinations %lld..%lld", spec,
                     (long long)n, (long long)*lo, (long long)*hi - 1);
            return AG_OK;
        }
    }
    /* its Q and M are as many rows as its K and V */
    const int64_t nodes = rows < most / 2 ? rows : most / 2;
    if (spec && (!ag_pattern_size(in->pattern) || in->N <= nodes) &&
        !small_pattern(small, spec, in->N, nodes, in->self, err)) {
        *lo = 0, *hi = small->n_nodes;
        snprintf(where, cap, "'%s' on %lld nodes", spec, (long long)small->n_nodes);
        return AG_OK;
    }
    /* random sources: k a destination, at most 1024 */
    const int64_t k = llround(mean < 1024 ? mean : 1024);
    dst = most_dst < MEASURE_EDGES * sharing / k ? most_dst : MEASURE_EDGES * sharing / k;
    dst = dst < rows ? dst : rows;
    *lo = 0, *hi = dst;
    snprintf(where, cap, "%lld nodes of %lld random sources among %lld rows: the input's "
             "mean in-degree, the largest process's rows%s", (long long)dst, (long long)k,
             (long long)rows, sharing > 1 ? " times the processes" : "");
    return random_reads(small, rows, dst, k, err);
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
    const int k = r->sharing > 1 ? r->sharing : 1;
    if (r->touch_gbs <= 0) {   /* first: the others' memory, freed, is no longer new */
        rc = plan_touch_rate(&r->touch_gbs, 8 * in->most_dst * H * d, k, r->threads, err);
        r->touch_measured = 1;
    }
    if (!rc && r->kernel_gflops <= 0) {
        int64_t lo, hi;
        rc = pick_measured(&small, &nb, &lo, &hi, in, H * d, k, r->where, sizeof r->where, err);
        if (k > 1)
            ag_set_threads(r->threads * k);   /* the processes' threads together */
        if (!rc)
            rc = plan_kernel_rate(&r->kernel_gflops, nb, lo, hi, H, d, err);
        if (k > 1)
            ag_set_threads(r->threads);
        r->kernel_gflops /= k;
        r->kernel_measured = 1;
    }
    if (!rc && r->gemm_gflops <= 0) {
        rc = plan_gemm_rate(&r->gemm_gflops, D, H * d, err);
        r->gemm_measured = 1;
    }
    ag_nbhd_destroy(&small);
    return rc;
}
