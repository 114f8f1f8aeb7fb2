/* `attngraph plan`: what a run over P processes would hold, read and take. */
#ifndef AG_CLI_PLAN_H
#define AG_CLI_PLAN_H

#include "attngraph.h"

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

#endif
