/*
 * `attngraph bench`: times the attention computation alone (the interface
 * other tools are compared through). Warm-up runs are untimed; the median of
 * --reps timed runs is reported, with useful GFLOP/s = 4*E*d*H / time, or
 * with --backward the backward kernel's, 10*E*d*H / time (FlashAttention-2's
 * accounting), given M and lse from one untimed forward.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/base.h"
#include "kernels/kernels.h"
#include "cli/timing.h"

static const opt_def_t bench_options[] = {
    OPT_PROSE("usage: attngraph bench (GRAPH | --pattern SPEC --nodes N | --csr INDPTR.npy,INDICES.npy)\n"
              "                       [--q Q.npy --k K.npy --v V.npy] [--heads H] [--head-dim d]\n"
              "                       [--threads T] [--reps R] [--warmup W] [--kernel K]\n"
              "                       [--score KIND [--beta B] [--softcap C] [--slope S]]\n"
              "                       [--backward] [--out OUT.npy] [--json]\n"
              "\n"
              "Times one round of attention (nothing else; scaled-dot scores, or --score's, with\n"
              "seeded attention vectors for additive and gatv2): W untimed warm-up runs\n"
              "(default: 2 or more, until 0.2 s have passed: a 2-thread process here runs its\n"
              "first tens of milliseconds up to 3x slower), then R timed runs (default 5), the\n"
              "kernel planned once before them (its choice and scratch, untimed, as a run of\n"
              "rounds plans it). Without --q/--k/--v,\n"
              "seeded random inputs of H heads of width --head-dim (default 64). --kernel: auto\n"
              "(default), simple, tiled, blocks, gather (plain dot-product scores; the others\n"
              "run the generic kernel). --backward times the kernel's backward instead (dQ, dK,\n"
              "dV of a seeded random dM, given M and lse from one untimed forward; useful flops\n"
              "10*E*d*H).\n"
              "--json prints one line: {\"peer\": \"attngraph\", \"median_s\", \"min_s\",\n"
              "\"max_s\", \"prep_s\", \"gflops_useful\", \"threads\", \"N\", \"E\", \"H\", \"d\",\n"
              "\"pass\", \"isa\", \"warmup\", \"kernel\", \"plan_s\"} (pass: \"forward\" or\n"
              "\"backward\"; warmup: the untimed runs; kernel: the one the plan ran; plan_s:\n"
              "the plan's time).\n"
              "\n"
              "The graph as run reads it (see 'attngraph run --help'): --format F, --directed,\n"
              "--undirected, --self-loops MODE, --tokens \"a b c\", --labels-file F, --max-nodes N,\n"
              "--max-memory SIZE; --seed S seeds the random inputs (default 1).\n"),
    OPT_VALUE("pattern", OPT_PATTERN, NULL),
    OPT_VALUE("csr", OPT_CSR, NULL),
    OPT_VALUE("reps", OPT_REPS, NULL),
    OPT_VALUE("warmup", OPT_WARMUP, NULL),
    OPT_FLAG("json", OPT_JSON, NULL),
    OPT_VALUE("kernel", OPT_KERNEL, NULL),
    OPT_VALUE("out", OPT_OUT, NULL),
    OPT_FLAG("backward", OPT_BACKWARD, NULL),
    OPT_HELP_LINE,
    OPT_TABLE_UNLISTED(input_options),   /* the text names those bench reads; it refuses the rest */
    OPT_TABLE_UNLISTED(quiet_refused),
    OPT_DEF_END,
};

/* Warm-up by time: on these 2-core machines a 2-thread process runs its first
   tens of milliseconds up to 3x slower (a plain OpenMP loop too: 8 ms, then
   2.8 ms a pass), and two runs of a 0.5 ms kernel fell inside it (window:64
   at 2,048 nodes looked 3-11x slower per edge than at 8,192). */
#define WARM_S 0.2

static int pick_kernel(ag_i_kernel_t *kernel, const char *name)
{
    static const ag_i_kernel_t kernels[] = {AG_I_KERNEL_AUTO, AG_I_KERNEL_SIMPLE,
                                            AG_I_KERNEL_TILED, AG_I_KERNEL_BLOCKS,
                                            AG_I_KERNEL_GATHER};
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++)
        if (strcmp(name, ag_i_kernel_name(kernels[k])) == 0) {
            *kernel = kernels[k];
            return 0;
        }
    return usage_error("bench", "--kernel '%s': expected auto, simple, tiled, blocks or gather",
                       name);
}

/* The backward's operands, made once before the timed runs from the
   forward's (f): a seeded dM, M and lse from one forward, D = rowsum(dM * M),
   the transpose; and room for the gradients. */
typedef struct {
    float *all;
    ag_i_bwd_t op;
} bw_state_t;

static int backward_prepare(bw_state_t *b, ag_nbhd_t *nb, const ag_i_fwd_t *f, uint64_t seed,
                            ag_error_t *err)
{
    const int64_t N = nb->n_nodes, H = f->H, d = f->d, HD = H * d;
    memset(b, 0, sizeof *b);
    float *all = ag_alloc(5 * N * HD + 2 * N * H, sizeof(float), err, "backward buffers");
    if (!all)
        return ag_alloc_status();
    float *dM = all, *M = all + N * HD, *g = M + N * HD, *lse = g + 3 * N * HD;
    float *Dd = lse + N * H;
    ag_random_normal(dM, N * HD, seed, 13, 1.0f);
    kext_t x = {0};
    x.lse = lse;
    ag_i_fwd_t fwd = *f;
    fwd.M = M, fwd.x = &x;
    int rc = ag_nbhd_transpose(nb, err);
    if (!rc)
        rc = ag_i_attention_with(AG_I_KERNEL_AUTO, &fwd, err);
    for (int64_t i = 0; !rc && i < N * H; i++)
        Dd[i] = ag_i_dot(dM + i * d, M + i * d, d);   /* rows of head h lie i*H+h */
    if (rc) {
        free(all);
        return rc;
    }
    const ag_attention_grads_t grads = {.dQ = g, .dK = g + N * HD, .dV = g + 2 * N * HD};
    b->all = all;
    b->op = (ag_i_bwd_t){nb, f->Q, f->K, f->V, dM, H, d, f->score, lse, Dd, grads};
    return AG_OK;
}

int cmd_bench(int argc, char **argv)
{
    run_opts_t o;
    run_opts_init(&o);
    int64_t reps = 5, warmup = -1;   /* -1: by time (WARM_S) */
    int json = 0, backward = 0;
    ag_i_kernel_t kernel = AG_I_KERNEL_AUTO;
    opt_parser_t p;
    opt_begin(&p, "bench", bench_options, argc, argv);
    int c;
    while ((c = opt_next(&p)) > 0) {
        int rc = input_option(&o, c, p.arg, "bench");
        if (rc == 0)
            continue;
        if (rc != 1)
            return rc;
        switch (c) {
        case OPT_PATTERN: o.src.pattern = p.arg; break;
        case OPT_CSR: o.src.csr = p.arg; break;
        case OPT_OUT: o.out = p.arg; break;
        case OPT_JSON: json = 1; break;
        case OPT_BACKWARD: backward = 1; break;
        case OPT_REPS:
            if (opt_int(&reps, "bench", "reps", p.arg, 1, INT64_MAX))
                return EXIT_USAGE;
            break;
        case OPT_WARMUP:
            if (opt_int(&warmup, "bench", "warmup", p.arg, 0, INT64_MAX))
                return EXIT_USAGE;
            break;
        case OPT_KERNEL:
            if (pick_kernel(&kernel, p.arg))
                return EXIT_USAGE;
            break;
        }
    }
    if (c < 0)
        return p.status;
    /* bench times one round of attention (its score: --score, --beta, --softcap,
       --slope, --sigmoid-bias): the model's options have no effect */
    static const int not_bench[] = {
        OPT_FEATURES, OPT_DIM, OPT_WEIGHTS, OPT_ROUNDS, OPT_EDGE_BIAS, OPT_ALIBI,
        OPT_NO_RESIDUAL, OPT_NORM, OPT_POSENC, OPT_PER_NODE_WEIGHTS, OPT_UNTIL, OPT_QUIET, 0};
    if (source_args(&o, &p, "bench") ||
        refuse_options(&o, not_bench, "bench", "bench times one round of attention on Q, "
                       "K, V") ||
        input_options_check(&o, "bench"))
        return EXIT_USAGE;
    if (backward && o.out)
        return usage_error("bench", "--out writes the forward's messages; it does not go "
                           "with --backward");
    const int threads = ag_set_threads((int)o.threads);

    source_t s;
    ag_matrix_t q = {0}, k = {0}, v = {0};
    float *M = NULL;
    double *t = NULL;
    out_file_t out;
    memset(&s, 0, sizeof s);
    ag_error_t err = {AG_OK, ""};
    int usage = 0;
    out_init(&out, o.out, "--out", "npy");
    int rc = out_open_all(&out, 1, &usage, &err);
    const double t0 = now_s();
    if (!rc)
        rc = source_open(&s, &o.src, &usage, &err);
    const double prep = now_s() - t0;
    const int64_t N = s.nb.n_nodes, H = o.heads;
    int64_t d = o.head_dim ? o.head_dim : 64;
    if (!rc && o.q) {
        inputs_t in;
        if (!(rc = inputs_load(&in, &o, N, NULL, &err))) {
            q = in.q, k = in.k, v = in.v, d = in.d;
            in.q.data = in.k.data = in.v.data = NULL;
            inputs_free(&in);
        }
    } else if (!rc) {
        ag_matrix_t *m[3] = {&q, &k, &v};
        for (int x = 0; x < 3 && !rc; x++)
            if (!(rc = ag_matrix_init(m[x], N, H * d, &err)))
                ag_random_normal(m[x]->data, N * H * d, o.seed, 10 + (uint64_t)x, 1.0f);
    }
    if (!rc && !(M = ag_alloc(N * H * d, sizeof *M, &err, "output")))
        rc = ag_alloc_status();
    /* additive and gatv2 scores get seeded vectors [H, d], as raw attention's */
    ag_score_t score = o.score;
    float *vectors = NULL;
    if (!rc && !(vectors = ag_alloc(3 * H * d, sizeof *vectors, &err, "attention vectors")))
        rc = ag_alloc_status();
    if (!rc) {
        ag_random_normal(vectors, 3 * H * d, o.seed, 7, 1.0f / sqrtf((float)d));
        if (score.kind == AG_SCORE_ADDITIVE)
            score.a_src = vectors, score.a_dst = vectors + H * d;
        if (score.kind == AG_SCORE_GATV2)
            score.a_src = vectors + 2 * H * d;
        rc = ag_score_check(&score, &s.nb, H, d, &err);
    }
    if (!rc && !(t = ag_alloc(reps, sizeof *t, &err, "timings")))
        rc = ag_alloc_status();
    const ag_i_fwd_t fwd = {&s.nb, q.data, k.data, v.data, H, d, &score, M, NULL};
    bw_state_t bs = {0};
    if (!rc && backward)
        rc = backward_prepare(&bs, &s.nb, &fwd, o.seed, &err);
    /* the kernel's plan is made once, untimed, as a run of rounds makes it */
    ag_i_plan_t plan = {0};
    const double plan_from = now_s();
    if (!rc)
        rc = ag_i_plan(&plan, backward, kernel, &s.nb, H, d, &score, &err);
    const double plan_s = now_s() - plan_from;
    const double warm_from = now_s();
    int64_t warm = 0;   /* untimed runs: as asked, or 2 or more until WARM_S */
    while (!rc && (warmup >= 0 ? warm < warmup : warm < 2 || now_s() - warm_from < WARM_S)) {
        rc = backward ? ag_i_backward(&plan, &bs.op, &err) : ag_i_forward(&plan, &fwd, &err);
        warm++;
    }
    for (int64_t r = 0; !rc && r < reps; r++) {
        const double a = now_s();
        rc = backward ? ag_i_backward(&plan, &bs.op, &err) : ag_i_forward(&plan, &fwd, &err);
        t[r] = now_s() - a;
    }
    const char *ran = ag_i_kernel_name(plan.kernel);
    ag_i_plan_free(&plan);
    free(bs.all);
    if (!rc && o.out)
        rc = ag_npy_write_f32(out.file.path, M, N, H * d, &err);
    if (!rc)
        rc = out_commit(&out, &err);
    if (!rc) {
        const double median = median_s(t, (int)reps);   /* sorts t: t[0] is the least */
        const double flops = (backward ? 10.0 : 4.0) * (double)s.nb.n_edges * (double)d * (double)H;
        const double gflops = flops / median / 1e9;
        if (json)
            printf("{\"peer\": \"attngraph\", \"median_s\": %.6g, \"min_s\": %.6g, \"max_s\": "
                   "%.6g, \"prep_s\": %.6g, \"gflops_useful\": %.4g, \"threads\": %d, \"N\": "
                   "%lld, \"E\": %lld, \"H\": %lld, \"d\": %lld, \"pass\": \"%s\", \"isa\": "
                   "\"%s\", \"warmup\": %lld, \"kernel\": \"%s\", \"plan_s\": %.6g}\n", median, t[0],
                   t[reps - 1], prep, gflops, threads, (long long)N, (long long)s.nb.n_edges,
                   (long long)H, (long long)d, backward ? "backward" : "forward", ag_simd_isa(),
                   (long long)warm, ran, plan_s);
        else
            printf("%s: N=%lld E=%lld H=%lld d=%lld, %d thread%s, %s, %s kernel: %smedian "
                   "%.4g s (min %.4g, max %.4g), %.2f GFLOP/s useful; prep %.3g s\n", s.desc,
                   (long long)N, (long long)s.nb.n_edges, (long long)H, (long long)d, threads,
                   threads > 1 ? "s" : "", ag_simd_isa(), ran, backward ? "backward " : "",
                   median, t[0], t[reps - 1], gflops, prep);
    } else {
        out_name_errors(&out, 1, &err);
        out_abort(&out);
    }
    free(M), free(t), free(vectors);
    ag_matrix_destroy(&q), ag_matrix_destroy(&k), ag_matrix_destroy(&v);
    source_close(&s);
    return finish("bench", rc, usage, &err);
}
