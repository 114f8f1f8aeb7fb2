/*
 * Embedding the MPI layer (include/attngraph/mpi.h): every process compiles
 * the pattern, takes its part, runs two rounds on its rows of X, and rank 0
 * gathers the states and compares them with ag_rounds_run on one process;
 * then the training pair (ag_mpi_rounds_forward, ag_mpi_rounds_backward,
 * twice on one tape, as epochs do) against ag_rounds_forward and
 * ag_rounds_backward: the weight gradients on every process and the gathered
 * dX; then one attention with a GATv2 score, an edge bias and ALiBi
 * (ag_mpi_attention: each process passes its slots' bias) against
 * ag_attention. The same bits, or exit 1. Last, a refusal by the memory
 * budget is AG_ELIMIT on every process, also where the root's parts find no
 * room on the others. Usage (make check-mpi runs it):
 *   mpirun -np P build/example_mpi [PATTERN [N]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attngraph/mpi.h>

#define D 32
#define H 2

static int fail(int rank, const ag_error_t *err)
{
    if (rank == 0)
        fprintf(stderr, "example_mpi: %s\n", err->msg);
    MPI_Finalize();
    return 1;
}

/* 1 when every gradient array of a and b holds the same bits. */
static int same_grads(const ag_weights_t *a, const ag_weights_t *b)
{
    const int64_t n = (int64_t)D * D;   /* [D, H*d] with H*d = D */
    return !memcmp(a->wq, b->wq, (size_t)n * sizeof(float)) &&
           !memcmp(a->wk, b->wk, (size_t)n * sizeof(float)) &&
           !memcmp(a->wv, b->wv, (size_t)n * sizeof(float)) &&
           !memcmp(a->wo, b->wo, (size_t)n * sizeof(float)) &&
           !memcmp(a->ln_weight, b->ln_weight, (size_t)D * sizeof(float)) &&
           !memcmp(a->ln_bias, b->ln_bias, (size_t)D * sizeof(float));
}

/* The gradients of L = sum(dY * rounds(X)) on P processes against one
   process's: 0 when every process's weight gradients and the gathered dX
   are the same bits. */
static int gradients(const ag_mpi_part_t *part, ag_nbhd_t *nb, const ag_weights_t *w,
                     const ag_round_opts_t *opts, int64_t N, ag_error_t *err)
{
    const int64_t n = part->hi - part->lo, rows = n ? n : 1;
    float *X = malloc((size_t)(N * D) * sizeof *X), *dY = malloc((size_t)(N * D) * sizeof *dY);
    float *dX = malloc((size_t)(N * D) * sizeof *dX), *all = malloc((size_t)(N * D) * sizeof *all);
    float *mine = malloc((size_t)(rows * D) * sizeof *mine);
    float *dmine = malloc((size_t)(rows * D) * sizeof *dmine);
    ag_random_normal(X, N * D, 9, 0, 1.0f);
    ag_random_normal(dY, N * D, 10, 0, 1.0f);
    memcpy(mine, X + part->lo * D, (size_t)(n * D) * sizeof *mine);
    ag_weights_t g, g1;
    ag_mpi_tape_t *tape = NULL;   /* NULL: a new tape (see ag_mpi_rounds_forward) */
    int bad = ag_weights_grads_init(&g, w, 1, err) || ag_weights_grads_init(&g1, w, 1, err);
    for (int pass = 0; !bad && pass < 2; pass++) {   /* the second reuses the tape */
        memcpy(mine, X + part->lo * D, (size_t)(n * D) * sizeof *mine);
        bad = ag_mpi_rounds_forward(MPI_COMM_WORLD, part, w, 1, mine, 2, opts, &tape, NULL,
                                    err) ||
              ag_mpi_rounds_backward(tape, dY + part->lo * D, dmine, &g, err);
    }
    bad = bad || ag_mpi_gather_rows(MPI_COMM_WORLD, part, dmine, D, all, 0, err);
    /* a call that fails (no layers) on a live tape frees it and leaves NULL */
    ag_error_t refused;
    if (!bad && (!ag_mpi_rounds_forward(MPI_COMM_WORLD, part, w, 0, mine, 2, opts, &tape, NULL,
                                        &refused) || tape)) {
        snprintf(err->msg, sizeof err->msg, "a forward without layers did not fail cleanly");
        bad = 1;
    }
    ag_mpi_tape_free(tape);
    ag_tape_t *tape1 = NULL;   /* one process's, on every process: each compares its own */
    bad = bad || ag_rounds_forward(nb, w, 1, X, 2, opts, &tape1, err) ||
          ag_rounds_backward(tape1, dY, dX, &g1, err);
    if (bad) {
        fprintf(stderr, "example_mpi: %s\n", err->msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    ag_tape_free(tape1);
    int differ = !same_grads(&g, &g1), any;
    MPI_Allreduce(&differ, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (part->rank == 0) {
        any = any || memcmp(dX, all, (size_t)(N * D) * sizeof *dX) != 0;
        printf("gradients on %d processes: %s\n", part->ranks,
               any ? "DIFFERENT from one process" : "identical to one process");
    }
    MPI_Bcast(&any, 1, MPI_INT, 0, MPI_COMM_WORLD);
    ag_weights_destroy(&g), ag_weights_destroy(&g1);
    free(X), free(dY), free(dX), free(all), free(mine), free(dmine);
    return any;
}

/* Under a small memory budget, states of width 2^15 (512 rows make an array
   the budget checks): the rounds' LayerNorm states, a round's tape and the
   backward's buffers are refused, and every process gets AG_ELIMIT, with err
   and without. The states are never touched. 0 when so. */
static int budget(const ag_mpi_part_t *part, ag_error_t *err)
{
    const int64_t wide = 1 << 15, n = part->hi - part->lo;
    ag_weights_t w, g;
    if (ag_weights_random(&w, wide, 1, 1, 0, 5, err) || ag_weights_grads_init(&g, &w, 0, err))
        return 1;
    float *X = calloc((size_t)((n ? n : 1) * wide), sizeof *X);
    ag_round_opts_t ln = AG_ROUND_OPTS_INIT;
    ln.norm = AG_NORM_LAYER;
    ag_mpi_tape_t *tape = NULL;
    const int64_t old = ag_set_memory_budget(1 << 20);
    int rc[6];
    ag_error_t e[6];
    rc[0] = ag_mpi_rounds_run(MPI_COMM_WORLD, part, &w, 1, X, 1, &ln, AG_MPI_AUTO, NULL, NULL,
                              &e[0]);
    rc[1] = ag_mpi_rounds_run(MPI_COMM_WORLD, part, &w, 1, X, 1, &ln, AG_MPI_AUTO, NULL, NULL,
                              NULL);
    rc[2] = ag_mpi_rounds_forward(MPI_COMM_WORLD, part, &w, 1, X, 1, NULL, &tape, NULL, &e[2]);
    rc[3] = ag_mpi_rounds_forward(MPI_COMM_WORLD, part, &w, 1, X, 1, NULL, &tape, NULL, NULL);
    /* no round: an empty tape, and the backward asks for 3 x [n, 2^15] at once */
    int bad = ag_mpi_rounds_forward(MPI_COMM_WORLD, part, &w, 1, X, 0, NULL, &tape, NULL, err);
    if (!bad) {
        rc[4] = ag_mpi_rounds_backward(tape, X, NULL, &g, &e[4]);
        rc[5] = ag_mpi_rounds_backward(tape, X, NULL, &g, NULL);
    }
    ag_set_memory_budget(old);
    if (bad)
        fprintf(stderr, "example_mpi: process %d: %s\n", part->rank, err->msg);
    int wrong = 0;   /* every case that is wrong is said */
    for (int k = 0; !bad && k < 6; k++)
        if (rc[k] != AG_ELIMIT ||
            (k % 2 == 0 && (e[k].status != AG_ELIMIT || !strstr(e[k].msg, "memory budget")))) {
            fprintf(stderr, "example_mpi: process %d: budget case %d: status %d (%s), expected "
                    "%d (limit exceeded)\n", part->rank, k, rc[k], k % 2 ? "no err" : e[k].msg,
                    AG_ELIMIT);
            wrong = 1;
        }
    bad = bad || wrong;
    ag_mpi_tape_free(tape);
    ag_weights_destroy(&w), ag_weights_destroy(&g);
    free(X);
    int any;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (part->rank == 0)
        printf("memory budget on %d processes: %s\n", part->ranks,
               any ? "NOT refused as a limit everywhere" : "refused as a limit everywhere");
    return any;
}

/* The root scatters the parts, and the other processes' budget (256 bytes)
   has no room for theirs: every process returns AG_ELIMIT (the job was
   aborted). 0 when so. */
static int scatter_refused(const ag_nbhd_t *nb, int rank, int ranks)
{
    if (ranks < 2)
        return 0;
    ag_error_t err;
    ag_mpi_part_t part;
    const int64_t old = ag_set_memory_budget(rank ? 256 : 0);
    const int rc = ag_mpi_part_scatter(&part, MPI_COMM_WORLD, nb, 0, &err);
    ag_set_memory_budget(old);
    int bad = rc != AG_ELIMIT || !strstr(err.msg, "memory budget"), any;
    if (bad)
        fprintf(stderr, "example_mpi: process %d: scatter: status %d (%s), expected %d\n", rank,
                rc, rc ? err.msg : "no failure", AG_ELIMIT);
    ag_mpi_part_destroy(&part);
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (rank == 0)
        printf("parts without room on %d processes: %s\n", ranks,
               any ? "NOT refused as a limit everywhere" : "refused as a limit everywhere");
    return any;
}

/* One attention with any score on P processes against ag_attention on one:
   GATv2, an edge bias in slot order (each process its own slots') and ALiBi. */
static int any_score(const ag_mpi_part_t *part, const ag_nbhd_t *nb, ag_error_t *err)
{
    const int64_t N = nb->n_nodes, E = nb->n_edges, n = part->hi - part->lo;
    float *a = malloc((size_t)D * sizeof *a), *bias = malloc((size_t)(E ? E : 1) * sizeof *bias);
    float *M = malloc((size_t)((n ? n : 1) * D) * sizeof *M);
    float *X = malloc((size_t)(N * D) * sizeof *X), *all = malloc((size_t)(N * D) * sizeof *all);
    float *one = malloc((size_t)(N * D) * sizeof *one);
    ag_random_normal(X, N * D, 2, 0, 1.0f);
    ag_random_normal(a, D, 3, 0, 0.3f);
    ag_random_normal(bias, E, 4, 0, 1.0f);
    ag_score_t sc = AG_SCORE_INIT;
    sc.kind = AG_SCORE_GATV2, sc.a_src = a, sc.alibi = 1;
    ag_score_t mine = sc;
    sc.edge_bias = bias;
    mine.edge_bias = bias + nb->edge_ptr[part->lo];   /* this process's slots */
    const float *rows = X + part->lo * D;   /* Q = K = V = this process's rows of X */
    int bad = ag_mpi_attention(MPI_COMM_WORLD, part, rows, rows, rows, H, D / H, &mine, M, NULL,
                               err) ||
              ag_mpi_gather_rows(MPI_COMM_WORLD, part, M, D, all, 0, err);
    int differ = 0;
    if (!bad && part->rank == 0) {
        bad = ag_attention(nb, X, X, X, H, D / H, &sc, one, err);
        differ = !bad && memcmp(one, all, (size_t)(N * D) * sizeof *one) != 0;
        if (!bad)
            printf("gatv2 + edge bias + alibi attention on %d processes: %s\n", part->ranks,
                   differ ? "DIFFERENT from one process" : "identical to one process");
    }
    if (bad)
        fprintf(stderr, "example_mpi: %s\n", err->msg);
    int any = bad || differ;
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    free(a), free(bias), free(X), free(M), free(all), free(one);
    return any;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *spec = argc > 1 ? argv[1] : "causal";
    const int64_t N = argc > 2 ? atoll(argv[2]) : 3000;
    ag_error_t err;
    ag_pattern_t *pat;
    ag_nbhd_t nb;
    ag_weights_t w;
    if (ag_pattern_parse(&pat, spec, &err) || ag_nbhd_from_pattern(&nb, pat, N, AG_SELF_KEEP, &err) ||
        ag_weights_random(&w, D, H, D / H, 0, 5, &err))
        return fail(rank, &err);
    ag_pattern_free(pat);
    float *X = malloc((size_t)(N * D) * sizeof *X), *all = malloc((size_t)(N * D) * sizeof *all);
    ag_random_normal(X, N * D, 9, 0, 1.0f);

    /* this process's part and its rows */
    ag_mpi_part_t part;
    if (ag_mpi_part_local(&part, MPI_COMM_WORLD, &nb, &err))
        return fail(rank, &err);
    const int64_t n = part.hi - part.lo;
    float *mine = malloc((size_t)((n ? n : 1) * D) * sizeof *mine);
    memcpy(mine, X + part.lo * D, (size_t)(n * D) * sizeof *mine);
    ag_round_opts_t opts = AG_ROUND_OPTS_INIT;
    opts.norm = AG_NORM_LAYER;
    ag_mpi_stats_t stats;
    if (ag_mpi_rounds_run(MPI_COMM_WORLD, &part, &w, 1, mine, 2, &opts, AG_MPI_AUTO, NULL,
                          &stats, &err) ||
        ag_mpi_gather_rows(MPI_COMM_WORLD, &part, mine, D, all, 0, &err))
        return fail(rank, &err);

    int status = 0;
    if (rank == 0) {   /* the same rounds on one process */
        ag_workspace_t ws;
        if (ag_workspace_init(&ws, N, D, D, &err) ||
            ag_rounds_run(&nb, &w, 1, X, 2, &opts, &ws, NULL, &err))
            return fail(rank, &err);
        ag_workspace_destroy(&ws);
        status = memcmp(X, all, (size_t)(N * D) * sizeof *X) != 0;
        printf("%s on %d processes (%s path): %s\n", spec, part.ranks,
               stats.path == AG_MPI_RING ? "ring" : "halo",
               status ? "DIFFERENT from one process" : "identical to one process");
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!status)
        status = gradients(&part, &nb, &w, &opts, N, &err);
    if (!status)
        status = any_score(&part, &nb, &err);
    if (!status)
        status = budget(&part, &err);
    if (!status)
        status = scatter_refused(&nb, rank, part.ranks);
    ag_mpi_part_destroy(&part);
    ag_nbhd_destroy(&nb);
    ag_weights_destroy(&w);
    free(X), free(all), free(mine);
    MPI_Finalize();
    return status;
}
