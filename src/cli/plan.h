/* `attngraph plan`: what a run over P processes would hold, read and take. */
#ifndef AG_CLI_PLAN_H
#define AG_CLI_PLAN_H

#include "attngraph.h"
#include "cli/cli.h"

/* What is planned: a pattern on N nodes (never compiled whole), or compiled
   neighbourhoods (a graph file or a CSR). */
typedef struct {
    const ag_pattern_t *pattern;
    const ag_nbhd_t *nb;
    int64_t N;
    ag_self_loops_t self;
    double mean_degree;       /* messages per node (patterns: from a first plan) */
    int64_t rows_read;        /* the K/V rows the largest process reads (own + halo) */
    int64_t most_dst;         /* the destinations of the process that owns the most */
} plan_input_t;

/* Rates per process; <= 0: measured by plan_measure. */
typedef struct {
    double kernel_gflops;     /* attention: 4*E*H*d flops a round */
    double gemm_gflops;       /* projections: 8*N*D*H*d flops a round */
    double touch_gbs;         /* memory written for the first time (the first round's buffers) */
    int kernel_measured, gemm_measured, touch_measured;
    int threads;              /* a process's */
    int sharing;              /* processes measured at once: those sharing this machine */
    char where[256];          /* what the kernel was timed on */
} plan_rates_t;

/* The kernel's rate on destinations lo..hi-1 of nb, reading any of its rows
   (seeded random Q, K, V), as a process of attngraph-mpi runs its part: the
   median of 3 timed runs after the one that makes its plan. A caller that
   measures K processes at once gives nb their rows and destinations and
   divides the rate by K. */
int plan_kernel_rate(double *gflops, const ag_nbhd_t *nb, int64_t lo, int64_t hi, int64_t H,
                     int64_t d, ag_error_t *err);
/* The projections' rate: X [65536, D] times W^T [D, H*d], four times. */
int plan_gemm_rate(double *gflops, int64_t D, int64_t HD, ag_error_t *err);
/* A process's rate of writing memory just allocated (the page faults
   included): `bytes` a process, written once by `processes` processes of
   `threads` threads at once (64 MB to 1 GB in all). */
int plan_touch_rate(double *gbs, int64_t bytes, int processes, int threads, ag_error_t *err);
/* Measures the rates r does not give, on a small input of in's kind: the
   kernel and the first writes with r->sharing processes' work at once (their
   threads together), the projections with one's. */
int plan_measure(plan_rates_t *r, const plan_input_t *in, int64_t D, int64_t H, int64_t d,
                 ag_error_t *err);

/* ---- a process's peak memory (plan_memory.c) ---- */

/* What a process holds: N nodes in all, n its destinations with e in-edges in
   `runs` runs of consecutive sources, `halo` rows it reads from others, within
   a window of rows from the lowest it reads (its own included) to the highest
   (>= n + halo); D the features' width, HD the heads' (H*d); gather: rank 0
   collects --out's rows of out_cols columns; csr: the edges are read from a
   CSR (else a pattern compiled by each process); ring: the ring path (else
   the halo path). */
typedef struct {
    int64_t N, n, e, runs, halo, window, D, HD, out_cols;
    int gather, csr, ring;
} plan_memory_t;

/* Its peak resident bytes (the runtime's included). */
double plan_peak_bytes(const plan_memory_t *m);

/* ---- the command's options and counts (plan.c), its figures (plan_print.c) ---- */

#define PLAN_MAX_RANK_LISTS 16

typedef struct {
    run_opts_t o;
    int ranks[PLAN_MAX_RANK_LISTS], n_ranks;
    int metis, exact, per_rank, json;
    int64_t sample;
    double bandwidth;
    plan_rates_t rates;
    const char *csv;
} plan_opts_t;

/* What one P gives. */
typedef struct {
    int P;
    int64_t *first;            /* [P+1] when contiguous, else NULL */
    ag_part_stats_t *st;       /* [P] */
    int exact;
    int64_t cut_contiguous;    /* METIS: the contiguous parts' edge cut; else -1 */
    int64_t *window;           /* [P] contiguous parts of a graph or CSR: the rows from the
                                  lowest row or source each reads to the highest; else NULL */
} plan_parts_t;

/* The per-process model of a round. */
typedef struct {
    int64_t D, H, d, row_bytes;   /* row_bytes: a K and a V row, float32 */
    double kernel, gemm, bandwidth;   /* GFLOP/s, GFLOP/s, GB/s */
    double touch;                 /* GB/s: memory written for the first time */
    int64_t N;                    /* the nodes */
    double runs_per_node;         /* runs of consecutive sources a destination has */
    int one_run;                  /* every destination counted one run or none (-1: not
                                     counted) */
    int64_t E;                    /* the messages */
    int csr;                      /* the edges come from a CSR's files (else a pattern) */
} plan_model_t;

/* Runs of consecutive sources per destination, and whether each destination
   reads one run at most: the input's, or a pattern's on the nodes plan_measure
   times it on (a pattern whose runs change beyond them, a window wider than
   they are with a global token, is counted as it is on them). Where it cannot
   be compiled on so few: the mean in-degree, at most a run a message, and
   *one_run -1. */
void plan_runs_per_node(double *runs, int *one_run, const plan_input_t *in);
/* The peak bytes of process p of pp (rank 0 with out: gathering --out's rows)
   on the halo path, or the ring's. */
double plan_part_peak(const plan_model_t *m, const plan_parts_t *pp, int p, int out, int ring);

/* What the command prints: its header (once), a table or a JSON line per P, and
   every process of every P as CSV (header: the column names first). */
void plan_print_header(const plan_opts_t *po, const plan_model_t *m, const plan_input_t *in,
                       const char *desc, const plan_parts_t *first_plan, int threads);
void plan_print_table(const plan_opts_t *po, const plan_model_t *m, const plan_parts_t *pp,
                      const plan_input_t *in);
void plan_print_json(const plan_opts_t *po, const plan_model_t *m, const plan_parts_t *pp,
                     const plan_input_t *in, const char *desc);
void plan_write_csv(FILE *f, const plan_model_t *m, const plan_parts_t *pp, int header);

#endif
