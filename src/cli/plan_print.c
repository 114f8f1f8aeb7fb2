/*
 * `attngraph plan`'s figures: the per-process model of a round's time
 * (compute from the kernel's and the projections' rates, the halo's bytes over
 * the network) and its printing as tables, JSON lines and CSV.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/plan.h"
#include "kernels/kernels.h"

#define SHOW_ALL 16

static double compute_s(const plan_model_t *m, const ag_part_stats_t *s)
{
    return 4.0 * (double)s->n_edges * (double)(m->H * m->d) / (m->kernel * 1e9) +
           8.0 * (double)s->n_dst * (double)m->D * (double)(m->H * m->d) / (m->gemm * 1e9);
}

static double comm_s(const plan_model_t *m, double bytes)
{
    return bytes / (m->bandwidth * 1e9);
}

/* ---- printing ---- */

/* n with thousands separators into buf. */
static const char *grouped(double x, char *buf, size_t cap)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", x);
    const size_t len = strlen(digits), neg = digits[0] == '-';
    size_t o = 0;
    for (size_t k = 0; k < len && o + 2 < cap; k++) {
        if (k > neg && (len - k) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[k];
    }
    buf[o] = '\0';
    return buf;
}

static const char *bytes_text(double b, char *buf, size_t cap)
{
    static const char *units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (b >= 999.5 && u < 5)
        b /= 1000, u++;
    snprintf(buf, cap, u ? "%.3g %s" : "%.0f %s", b, units[u]);
    return buf;
}

static const char *time_text(double s, char *buf, size_t cap)
{
    if (s == 0)
        snprintf(buf, cap, "0");
    else if (s < 1e-3)
        snprintf(buf, cap, "%.3g us", s * 1e6);
    else if (s < 1)
        snprintf(buf, cap, "%.3g ms", s * 1e3);
    else if (s < 1000)
        snprintf(buf, cap, "%.3g s", s);
    else
        snprintf(buf, cap, "%.0f s", s);
    return buf;
}

typedef struct {
    double dst, edges, halo, bytes, share, compute, comm;
} row_t;

static row_t row_of(const plan_model_t *m, const ag_part_stats_t *s, double mean_work)
{
    row_t r = {(double)s->n_dst, (double)s->n_edges, (double)s->n_halo,
               (double)s->n_halo * (double)m->row_bytes,
               mean_work > 0 ? (double)s->work / mean_work : 1, compute_s(m, s), 0};
    r.comm = comm_s(m, r.bytes);
    return r;
}

static void print_row(const char *name, const row_t *r)
{
    char a[32], b[32], c[32], d[32], e[32], f[32];
    printf("%8s %15s %16s %15s %11s %9.3f %10s %10s\n", name, grouped(r->dst, a, sizeof a),
           grouped(r->edges, b, sizeof b), grouped(r->halo, c, sizeof c),
           bytes_text(r->bytes, d, sizeof d), r->share, time_text(r->compute, e, sizeof e),
           time_text(r->comm, f, sizeof f));
}

/* min, mean and max of each column over the parts. */
static void print_summary(const plan_model_t *m, const plan_parts_t *pp, double mean_work)
{
    row_t lo, hi, sum = {0};
    for (int p = 0; p < pp->P; p++) {
        const row_t r = row_of(m, &pp->st[p], mean_work);
        const double *x = &r.dst;
        double *l = &lo.dst, *h = &hi.dst, *s = &sum.dst;
        for (int k = 0; k < 7; k++) {
            l[k] = p == 0 || x[k] < l[k] ? x[k] : l[k];
            h[k] = p == 0 || x[k] > h[k] ? x[k] : h[k];
            s[k] += x[k];
        }
    }
    double *s = &sum.dst;
    for (int k = 0; k < 7; k++)
        s[k] /= pp->P;
    print_row("min", &lo);
    print_row("mean", &sum);
    print_row("max", &hi);
}

double plan_part_peak(const plan_model_t *m, const plan_parts_t *pp, int p, int out, int ring)
{
    const ag_part_stats_t *s = &pp->st[p];
    const double runs = (double)s->n_dst * m->runs_per_node;
    const int64_t rows = s->n_dst + s->n_halo;
    const plan_memory_t mem = {m->N, s->n_dst, s->n_edges,
                               runs < (double)s->n_edges ? (int64_t)runs : s->n_edges,
                               s->n_halo, pp->window && pp->window[p] > rows ? pp->window[p] : rows,
                               m->D, m->H * m->d, m->D, out, m->csr, ring};
    return plan_peak_bytes(&mem);
}

/* The first round's time beyond a later one's: writing the queries and
   messages (Q and M, 8 n H d bytes), which the rounds allocate, for the
   first time. */
static double first_touch_s(const plan_model_t *m, const ag_part_stats_t *s)
{
    return 8.0 * (double)s->n_dst * (double)(m->H * m->d) / (m->touch * 1e9);
}

typedef struct {
    double round, overlap;        /* slowest process: compute + comm, max(compute, comm) */
    double first;                 /* slowest process's first round (Q and M written anew) */
    double max_bytes, max_rows;   /* halo path: bytes in, K/V rows held (own + halo) */
    double peak, peak_out;        /* bytes at the peak: the largest process; rank 0 with --out */
    int64_t edges, cut, max_work;
    double imbalance;
} totals_t;

static totals_t totals_of(const plan_model_t *m, const plan_parts_t *pp)
{
    totals_t t = {0};
    for (int p = 0; p < pp->P; p++) {
        const ag_part_stats_t *s = &pp->st[p];
        const double c = compute_s(m, s), bytes = (double)s->n_halo * (double)m->row_bytes;
        const double w = comm_s(m, bytes);
        t.round = fmax(t.round, c + w);
        t.first = fmax(t.first, c + w + first_touch_s(m, s));
        t.overlap = fmax(t.overlap, fmax(c, w));
        t.max_bytes = fmax(t.max_bytes, bytes);
        t.max_rows = fmax(t.max_rows, (double)(s->n_dst + s->n_halo));
        t.peak = fmax(t.peak, plan_part_peak(m, pp, p, 0, 0));
        t.edges += s->n_edges;
        t.cut += s->n_cut;
    }
    t.imbalance = ag_partition_imbalance(pp->st, pp->P);
    t.peak_out = fmax(plan_part_peak(m, pp, 0, 0, 0), plan_part_peak(m, pp, 0, 1, 0));
    return t;
}

/* The ring path as mpi/ring.c runs it: the same parts as the halo path, each
   process keeping its own K/V rows and receiving its halo's rows in blocks of
   at most 1,024 (whole blocks: up to one more at each end), through four
   buffers of 1,024 + 64 rows (64: a tile's rows copied from the block
   before) and the 64 rows last taken; its halo is streamed past, never held. */
#define RING_BLOCK ((double)AG_I_RING_BLOCK)
#define RING_BUFFERS (4 * (RING_BLOCK + AG_I_RING_CARRY) + AG_I_RING_CARRY)
typedef struct {
    double max_bytes, max_rows, overlap, peak;
} ring_t;

/* mpi/rounds.c's condition: one run of consecutive sources a destination
   (causal, window, prefix) and the tiled kernel (16 or more in-edges a node). */
static int ring_applies(const plan_model_t *m)
{
    return m->one_run == 1 && ag_i_use_tiled(m->N, m->E, 1);
}

static ring_t ring_of(const plan_model_t *m, const plan_parts_t *pp)
{
    ring_t r = {0};
    for (int p = 0; p < pp->P; p++) {
        const ag_part_stats_t *s = &pp->st[p];
        const double halo = s->n_halo ? (double)s->n_halo + 2 * RING_BLOCK : 0;
        const double bytes = fmin(halo, (double)(m->N - s->n_dst)) * (double)m->row_bytes;
        r.max_bytes = fmax(r.max_bytes, bytes);
        r.max_rows = fmax(r.max_rows, (double)s->n_dst + RING_BUFFERS);
        r.overlap = fmax(r.overlap, fmax(compute_s(m, s), comm_s(m, bytes)));
        r.peak = fmax(r.peak, plan_part_peak(m, pp, p, 0, 1));
    }
    return r;
}

static void print_ring(const plan_model_t *m, const plan_parts_t *pp, const totals_t *t)
{
    const ring_t r = ring_of(m, pp);
    char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], i[32], j[32];
    const double rb = (double)m->row_bytes;
    printf("ring path (the halo's K/V rows passed along the %d processes in blocks of 1,024, "
           "transfers overlapped):\n"
           "  bytes in a round, largest process: ring %s (the halo in whole blocks), halo "
           "path %s\n"
           "  K/V rows held, largest process: ring %s = %s (own + 4 blocks in flight + 64), "
           "halo "
           "path %s = %s (own + halo)\n"
           "  round, transfers overlapped: ring %s, halo path %s -> %s\n"
           "  peak memory a process: ring %s, halo path %s\n",
           pp->P, bytes_text(r.max_bytes, a, sizeof a), bytes_text(t->max_bytes, b, sizeof b),
           grouped(r.max_rows, c, sizeof c), bytes_text(r.max_rows * rb, g, sizeof g),
           grouped(t->max_rows, d, sizeof d), bytes_text(t->max_rows * rb, h, sizeof h),
           time_text(r.overlap, e, sizeof e), time_text(t->overlap, f, sizeof f),
           r.max_rows >= t->max_rows ? "the halo path holds less (its halo is small)"
           : r.max_bytes < 0.999 * t->max_bytes ? "the ring holds and moves less"
           : r.max_bytes <= 1.001 * t->max_bytes ? "the ring holds less and moves as much"
                                                 : "the ring holds less, the halo path moves less",
           bytes_text(r.peak, i, sizeof i), bytes_text(t->peak, j, sizeof j));
}

void plan_print_table(const plan_opts_t *po, const plan_model_t *m, const plan_parts_t *pp,
                      const plan_input_t *in)
{
    const totals_t t = totals_of(m, pp);
    const double mean_work = (double)(t.edges + in->N * AG_PARTITION_NODE_WORK) / pp->P;
    char a[32], b[32], c[32], d[32], e[32];
    printf("\n%d process%s, %s parts; counts %s\n", pp->P, pp->P == 1 ? "" : "es",
           po->metis ? "METIS" : "contiguous",
           pp->exact ? "exact" : "a sampled estimate (see 'attngraph plan --help')");
    printf("%8s %15s %16s %15s %11s %9s %10s %10s\n", "process", "destinations", "in-edges",
           "halo rows", "in/round", "work/mean", "compute", "comm");
    const int all = po->per_rank || pp->P <= SHOW_ALL;
    for (int p = 0; p < pp->P; p++) {
        if (!all && p == 4) {
            printf("%8s\n", "...");
            p = pp->P - 4;
        }
        char name[16];
        snprintf(name, sizeof name, "%d", p);
        const row_t r = row_of(m, &pp->st[p], mean_work);
        print_row(name, &r);
    }
    if (!all)
        print_summary(m, pp, mean_work);
    printf("edge cut: %s messages (%.1f%% of %s)", grouped((double)t.cut, a, sizeof a),
           t.edges ? 100.0 * (double)t.cut / (double)t.edges : 0.0,
           grouped((double)t.edges, b, sizeof b));
    if (pp->cut_contiguous >= 0)
        printf("; contiguous parts cut %s", grouped((double)pp->cut_contiguous, c, sizeof c));
    printf("; imbalance (max/mean work) %.3f\n", t.imbalance);
    char f[32];
    printf("round at %d: %s (slowest process, compute then communication); %s if the "
           "transfers overlap the kernel\nlargest process: %s K/V rows held (own + halo, %s), "
           "%s received a round\n", pp->P, time_text(t.round, a, sizeof a),
           time_text(t.overlap, b, sizeof b), grouped(t.max_rows, d, sizeof d),
           bytes_text(t.max_rows * (double)m->row_bytes, f, sizeof f),
           bytes_text(t.max_bytes, e, sizeof e));
    printf("first round at %d: %s (the slowest process: it also writes its queries and "
           "messages for the first time)\n", pp->P, time_text(t.first, a, sizeof a));
    printf("peak memory a process: %s (the largest; rank 0 with --out: %s)%s\n",
           bytes_text(t.peak, a, sizeof a), bytes_text(t.peak_out, b, sizeof b),
           !m->csr && !in->pattern ? "; not counted: the whole graph rank 0 holds while it "
           "cuts the parts" : po->metis ? "; not counted: the whole CSR rank 0 holds while "
           "METIS cuts it" : "");
    if (in->pattern && pp->first && pp->P > 1 && m->one_run < 0)
        printf("ring path: not assessed (the pattern's runs of sources are not counted at "
               "this size)\n");
    else if (in->pattern && pp->first && pp->P > 1 && !ring_applies(m))
        printf("ring path: not for this pattern (%s; the ring streams one run a destination "
               "on the tiled kernel, 16 or more in-edges a node)\n",
               !m->one_run ? "destinations read several runs of sources"
               : m->E < 16 * m->N ? "fewer than 16 in-edges a node"
                                  : "2^31 nodes or more, beyond the tiled kernel's");
    else if (in->pattern && pp->first && pp->P > 1)
        print_ring(m, pp, &t);
}

void plan_print_json(const plan_opts_t *po, const plan_model_t *m, const plan_parts_t *pp,
                     const plan_input_t *in, const char *desc)
{
    const totals_t t = totals_of(m, pp);
    printf("{\"input\": \"");
    for (const char *s = desc; *s; s++)
        printf(*s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
    printf("\", \"ranks\": %d, \"nodes\": %lld, \"messages\": %lld, \"partition\": \"%s\", "
           "\"exact\": %s, \"edge_cut\": %lld, \"edge_cut_contiguous\": %lld, \"imbalance\": "
           "%.6g, \"dim\": %lld, \"heads\": %lld, \"head_dim\": %lld, \"kernel_gflops\": %.6g, "
           "\"gemm_gflops\": %.6g, \"bandwidth_gbs\": %.6g, \"touch_gbs\": %.6g, "
           "\"round_s\": %.6g, \"first_round_s\": %.6g, \"round_overlap_s\": %.6g, "
           "\"max_recv_bytes\": %.6g, \"max_rows_held\": %.6g, \"peak_bytes\": %.6g, "
           "\"peak_bytes_rank0_out\": %.6g",
           pp->P, (long long)in->N, (long long)t.edges, po->metis ? "metis" : "contiguous",
           pp->exact ? "true" : "false", (long long)t.cut, (long long)pp->cut_contiguous,
           t.imbalance, (long long)m->D, (long long)m->H, (long long)m->d, m->kernel, m->gemm,
           m->bandwidth, m->touch, t.round, t.first, t.overlap, t.max_bytes, t.max_rows, t.peak,
           t.peak_out);
    if (in->pattern && pp->first && pp->P > 1 && ring_applies(m)) {
        const ring_t r = ring_of(m, pp);
        printf(", \"ring\": {\"max_recv_bytes\": %.6g, \"max_rows_held\": %.6g, "
               "\"round_overlap_s\": %.6g, \"peak_bytes\": %.6g}", r.max_bytes, r.max_rows,
               r.overlap, r.peak);
    }
    printf(", \"parts\": [");
    for (int p = 0; p < pp->P; p++) {
        const ag_part_stats_t *s = &pp->st[p];
        printf("%s{\"dst\": %lld, \"edges\": %lld, \"halo\": %lld, \"cut\": %lld}", p ? ", " : "",
               (long long)s->n_dst, (long long)s->n_edges, (long long)s->n_halo,
               (long long)s->n_cut);
    }
    printf("]}\n");
}

void plan_write_csv(FILE *f, const plan_model_t *m, const plan_parts_t *pp, int header)
{
    if (header)
        fprintf(f, "ranks,rank,first,destinations,in_edges,work,halo_rows,cut,recv_bytes,"
                   "compute_s,comm_s,exact,peak_bytes\n");
    for (int p = 0; p < pp->P; p++) {
        const ag_part_stats_t *s = &pp->st[p];
        const double bytes = (double)s->n_halo * (double)m->row_bytes;
        fprintf(f, "%d,%d,", pp->P, p);
        if (pp->first)
            fprintf(f, "%lld", (long long)pp->first[p]);
        fprintf(f, ",%lld,%lld,%lld,%lld,%lld,%.0f,%.6g,%.6g,%d,%.0f\n", (long long)s->n_dst,
                (long long)s->n_edges, (long long)s->work, (long long)s->n_halo,
                (long long)s->n_cut, bytes, compute_s(m, s), comm_s(m, bytes), pp->exact,
                plan_part_peak(m, pp, p, 0, 0));
    }
}

void plan_print_header(const plan_opts_t *po, const plan_model_t *m, const plan_input_t *in,
                       const char *desc, const plan_parts_t *first_plan, int threads)
{
    char a[32], b[32];
    int64_t E = 0;
    for (int p = 0; p < first_plan->P; p++)
        E += first_plan->st[p].n_edges;
    printf("plan: %s: %s nodes, %s%s messages\n", desc, grouped((double)in->N, a, sizeof a),
           first_plan->exact ? "" : "about ", grouped((double)E, b, sizeof b));
    printf("model: D %lld, %lld head%s of %lld; a K+V row is %lld bytes (float32)\n",
           (long long)m->D, (long long)m->H, m->H == 1 ? "" : "s", (long long)m->d,
           (long long)m->row_bytes);
    printf("rates per process: kernel %.3g GFLOP/s (%s), projections %.3g GFLOP/s (%s); "
           "network %.3g GB/s; memory written the first time %.3g GB/s (%s)\n", m->kernel,
           po->rates.kernel_measured ? po->rates.where : "--rate", m->gemm,
           po->rates.gemm_measured ? "measured" : "--rate", m->bandwidth, m->touch,
           po->rates.touch_measured ? "measured" : "--rate");
    if ((po->rates.kernel_measured || po->rates.touch_measured) && po->rates.sharing > 1)
        printf("(measured now with %d thread%s a process and %d processes at once, as many as "
               "share this machine: a busy machine gives low rates)\n", threads,
               threads == 1 ? "" : "s", po->rates.sharing);
    else if (po->rates.kernel_measured || po->rates.touch_measured)
        printf("(measured now with %d thread%s: a busy machine gives low rates)\n", threads,
               threads == 1 ? "" : "s");
    if (!first_plan->exact)
        printf("sampled: per part its first and last 64 destinations (fewer beyond 2,000 "
               "processes) and %s others evenly "
               "spread; boundaries from 65,536 in-degrees; single-source reads not sampled "
               "are extrapolated as if uniform (exact in expectation for random:k)\n",
               po->sample ? "--sample" : "up to 1,024");
}
