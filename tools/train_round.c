/*
 * One training round of causal attention on N nodes (D = d = 64, one head):
 * ag_rounds_forward, then ag_rounds_backward, with the time of each and the
 * tape's size; run under /usr/bin/time -v for the peak memory.
 *   build/train_round [N]       (default 65,536 nodes: 2.1e9 edges)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "attngraph.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    ag_error_t err;
    const int64_t N = argc > 1 ? atoll(argv[1]) : 65536, D = 64, H = 1, d = 64;
    ag_pattern_t *p = NULL;
    ag_nbhd_t nb;
    ag_weights_t w, g;
    ag_tape_t *tape = NULL;
    float *X = malloc((size_t)(N * D) * sizeof *X), *dY = malloc((size_t)(N * D) * sizeof *dY);
    float *dX = malloc((size_t)(N * D) * sizeof *dX);
    if (N < 1 || !X || !dY || !dX)
        return fprintf(stderr, "train_round: N=%lld; expected a count of nodes >= 1\n",
                       (long long)N), 2;
    int rc = ag_pattern_parse(&p, "causal", &err);
    if (!rc)
        rc = ag_nbhd_from_pattern(&nb, p, N, AG_SELF_KEEP, &err);
    if (!rc)
        rc = ag_weights_random(&w, D, H, d, 0, 1, &err);
    if (!rc)
        rc = ag_weights_grads_init(&g, &w, 0, &err);
    if (rc)
        return fprintf(stderr, "train_round: %s\n", err.msg), 1;
    ag_random_normal(X, N * D, 2, 0, 1.0f);
    ag_random_normal(dY, N * D, 3, 0, 1.0f);
    const double t0 = now();
    rc = ag_rounds_forward(&nb, &w, 1, X, 1, NULL, &tape, &err);
    const double t1 = now();
    if (!rc)
        rc = ag_rounds_backward(tape, dY, dX, &g, &err);
    const double t2 = now();
    if (rc)
        return fprintf(stderr, "train_round: %s\n", err.msg), 1;
    printf("causal %lld nodes, %lld edges: tape %.1f MB, forward %.2f s, backward %.2f s\n",
           (long long)N, (long long)nb.n_edges, (double)ag_tape_bytes(N, D, H, d, 1) / 1e6,
           t1 - t0, t2 - t1);
    ag_tape_free(tape);
    ag_weights_destroy(&w), ag_weights_destroy(&g);
    ag_nbhd_destroy(&nb);
    ag_pattern_free(p);
    free(X), free(dY), free(dX);
    return 0;
}
