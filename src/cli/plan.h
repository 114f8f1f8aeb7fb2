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
} plan_input_t;

/* Rates per process; <= 0: measured by plan_measure. */
typedef struct {
    double kernel_gflops;     /* attention: 4*E*H*d flops a round */
    double gemm_gflops;       /* projections: 8*N*D*H*d flops a round */
    int kernel_measured, gemm_measured;
    char where[256];          /* what the kernel was timed on */
} plan_rates_t;

/* The kernel's rate on nb (seeded random Q, K, V): the least of 3 timed runs. */
int plan_kernel_rate(double *gflops, const ag_nbhd_t *nb, int64_t H, int64_t d, ag_error_t *err);
/* The projections' rate: X [65536, D] times W^T [D, H*d], four times. */
int plan_gemm_rate(double *gflops, int64_t D, int64_t HD, ag_error_t *err);
/* Measures the rates r does not give, on a small input of in's kind. */
int plan_measure(plan_rates_t *r, const plan_input_t *in, int64_t D, int64_t H, int64_t d,
                 ag_error_t *err);

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
} plan_parts_t;

/* The per-process model of a round. */
typedef struct {
    int64_t D, H, d, row_bytes;   /* row_bytes: a K and a V row, float32 */
    double kernel, gemm, bandwidth;   /* GFLOP/s, GFLOP/s, GB/s */
} plan_model_t;

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
