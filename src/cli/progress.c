/*
 * Progress and the up-front estimate of long runs, on standard error only:
 * standard output stays the report. Lines are rewritten on a terminal; when
 * --progress forces them elsewhere (a log), each is a line of its own.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "cli/timing.h"

#define QUIET_START_S 1.0   /* automatic progress stays silent for short runs */
#define EVERY_S 0.25        /* at most this often */
#define LONG_S 60.0         /* estimates above this are printed */

void progress_begin(progress_t *p, int mode, int quiet, int rounds)
{
    *p = (progress_t){0};
    p->tty = isatty(STDERR_FILENO);
    p->forced = mode == 1;
    p->show = p->forced || (mode < 0 && !quiet && p->tty);
    p->rounds = rounds;
    p->t0 = now_s();
}

/* "round R/N: what, T s"; what < 0: done, else the percentage of the attention. */
static void line(progress_t *p, double t, int round, double pct)
{
    if (!p->forced && t - p->t0 < QUIET_START_S)
        return;
    fprintf(stderr, "%sround %d/%d", p->tty ? "\r\033[K" : "progress: ", round, p->rounds);
    if (pct < 0)
        fputs(" done", stderr);
    else
        fprintf(stderr, ": attention %.0f%%", pct);
    fprintf(stderr, ", %.1f s%s", t - p->t0, p->tty ? "" : "\n");
    fflush(stderr);
    p->open_line = p->tty;
    p->last = t;
}

void progress_attention(int round, int64_t done, int64_t total, void *ctx)
{
    progress_t *p = ctx;
    if (!p || !p->show || done >= total)
        return;
    const double t = now_s();
    if (t - p->last >= EVERY_S)
        line(p, t, round, 100.0 * (double)done / (double)(total > 0 ? total : 1));
}

void progress_round(progress_t *p, int round)
{
    if (p && p->show)
        line(p, now_s(), round, -1.0);
}

void progress_end(progress_t *p)
{
    if (p && p->open_line)
        fputs("\r\033[K", stderr);
    if (p)
        p->open_line = 0;
}

/* Seconds per flop of the kernel that would run nb's shape, measured on a
   small case: one run per destination (the tiled kernel: complete on about
   1e9 flops' worth of nodes) or scattered sources (the gather kernel:
   random:16 on rows of K and V larger than a cache). The fastest of as many
   runs as fit 0.1 s: the machine is shared, and a run whose thread waited for
   a core says nothing about the kernel. */
static double seconds_per_flop(const ag_nbhd_t *nb, int64_t H, int64_t d,
                               const ag_score_t *score)
{
    const int dense = nb->n_runs <= nb->n_nodes && nb->n_edges >= 16 * nb->n_nodes;
    const double width = (double)(H * d);
    int64_t n = dense ? (int64_t)sqrt(2.5e8 / width) : (int64_t)(6.4e6 / width);
    n = n < 256 ? 256 : n > 200000 ? 200000 : n;
    ag_pattern_t *pat = NULL;
    ag_nbhd_t small = {0};
    ag_error_t err;
    float *x = NULL, *m = NULL;
    double best = 1e-9;   /* 1 GFLOP/s if nothing could be measured */
    if (ag_pattern_parse(&pat, dense ? "complete" : "random:16", &err) == AG_OK &&
        ag_nbhd_from_pattern(&small, pat, n, AG_SELF_KEEP, &err) == AG_OK) {
        x = calloc((size_t)(n * H * d), sizeof *x);
        m = calloc((size_t)(n * H * d), sizeof *m);
    }
    if (x && m) {
        ag_random_normal(x, n * H * d, 1, 99, 1.0f);
        /* plain dot products take the fast kernels; other scores the generic
           path, whose speed cosine stands for (it needs no vectors) */
        const int plain = !score || (score->kind <= AG_SCORE_DOT && score->softcap == 0 &&
                                     !score->alibi && !score->edge_bias);
        ag_score_t generic;
        ag_score_init(&generic, AG_SCORE_COSINE);
        double fastest = 0;
        const double start = now_s();
        for (int k = 0; k < 100 && (k < 3 || now_s() - start < 0.1); k++) {
            const double t0 = now_s();
            if (ag_attention(&small, x, x, x, H, d, plain ? NULL : &generic, m, &err))
                break;
            const double t = now_s() - t0;
            fastest = k == 0 || t < fastest ? t : fastest;
        }
        if (fastest > 0)
            best = fastest / (4.0 * (double)small.n_edges * (double)d * (double)H);
    }
    free(x), free(m);
    ag_nbhd_destroy(&small);
    ag_pattern_free(pat);
    return best;
}

static void print_duration(double s)
{
    if (s < 3600)
        fprintf(stderr, "%.0f minutes", s / 60);
    else if (s < 2 * 86400)
        fprintf(stderr, "%.1f hours", s / 3600);
    else if (s < 730 * 86400)
        fprintf(stderr, "%.1f days", s / 86400);
    else
        fprintf(stderr, "%.0f years", s / (365 * 86400));
}

static void estimate_print(const run_opts_t *o, const ag_nbhd_t *nb, int64_t H, int64_t d,
                           int64_t D, int64_t rounds, const ag_score_t *score)
{
    if (o->progress == 0 || (o->progress < 0 && o->quiet) || rounds < 1 || H < 1 || d < 1)
        return;
    const double messages = (double)nb->n_edges * (double)rounds;
    const double attn = 4.0 * messages * (double)d * (double)H;
    const double proj = 8.0 * (double)nb->n_nodes * (double)D * (double)(H * d) * (double)rounds;
    /* no kernel here runs slower than about 2e9 flop/s: below a minute at
       that rate, there is nothing to measure */
    if ((attn + proj) / 2e9 < LONG_S)
        return;
    const double per_flop = seconds_per_flop(nb, H, d, score);
    /* projections are GEMMs: take them at twice the attention's rate */
    const double s = per_flop * (attn + proj / 2);
    if (!(s > LONG_S))
        return;
    fprintf(stderr, "attngraph: this run should take about ");
    print_duration(s);
    fprintf(stderr, " (%.3g messages x %lld head%s of width %lld at %.3g GFLOP/s measured "
            "here); Ctrl-C stops it\n", messages, (long long)H, H > 1 ? "s" : "", (long long)d,
            1e-9 / per_flop);
    fflush(stderr);
}

/* Shapes that come from the options alone (no file decides them). */
static int shape_from_options(const run_opts_t *o)
{
    return !o->weights && !o->features && !o->q;
}

void estimate_early(const run_opts_t *o, const ag_nbhd_t *nb)
{
    if (!shape_from_options(o))
        return;
    const int64_t D = o->dim ? o->dim : DEFAULT_DIM, H = o->heads;
    if (!o->head_dim && D % H)
        return;                       /* refused later */
    estimate_print(o, nb, H, o->head_dim ? o->head_dim : D / H, D, o->rounds, &o->score);
}

void estimate_late(const run_opts_t *o, const inputs_t *in, const ag_nbhd_t *nb)
{
    if (!shape_from_options(o))
        estimate_print(o, nb, in->H, in->d, in->raw ? 0 : in->x0.cols,
                       in->raw ? 1 : in->rounds, &in->score);
}
