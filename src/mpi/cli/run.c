/*
 * attngraph-mpi run: `attngraph run` on P processes. The options are
 * attngraph run's (the same parser), all of them: every score function,
 * per-node weights, --predict, raw --q/--k/--v, --edge-bias, --trace, --until,
 * --save-rounds and --attn. The outputs are the one-process files, gathered
 * and written by rank 0 through the same temporaries and renames: the command
 * is attngraph run's (run_with) over this file's backend (m_load, m_compute,
 * m_write, m_report).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "mpi/cli/mpi_cli.h"

/* Takes every "--NAME VALUE" and "--NAME=VALUE" before a "--" out of argv;
   *value gets the last one's value (unchanged when there is none). 0, or
   EXIT_USAGE (message printed) for a missing value. */
static int take_option(int *argc, char **argv, const char *name, const char **value,
                       const char *cmd, const char *expected)
{
    const size_t len = strlen(name);
    int out = 0, k = 0;
    for (; k < *argc; k++) {
        if (!strcmp(argv[k], "--"))
            break;
        if (!strncmp(argv[k], "--", 2) && !strncmp(argv[k] + 2, name, len) &&
            argv[k][2 + len] == '\0') {
            if (k + 1 >= *argc)
                return usage_error(cmd, "--%s needs a value: %s", name, expected);
            *value = argv[++k];
        } else if (!strncmp(argv[k], "--", 2) && !strncmp(argv[k] + 2, name, len) &&
                   argv[k][2 + len] == '=') {
            *value = argv[k] + 3 + len;
        } else {
            argv[out++] = argv[k];
        }
    }
    for (; k < *argc; k++)   /* "--" and what follows it */
        argv[out++] = argv[k];
    *argc = out;
    argv[out] = NULL;
    return 0;
}

int take_path_option(int *argc, char **argv, ag_mpi_path_t *path, const char *cmd)
{
    const char *value = "auto";
    if (take_option(argc, argv, "path", &value, cmd, "auto, halo or ring"))
        return EXIT_USAGE;
    if (!strcmp(value, "auto"))
        *path = AG_MPI_AUTO;
    else if (!strcmp(value, "halo"))
        *path = AG_MPI_HALO;
    else if (!strcmp(value, "ring"))
        *path = AG_MPI_RING;
    else
        return usage_error(cmd, "--path '%s': expected auto, halo or ring", value);
    return 0;
}

int take_partition_option(int *argc, char **argv, int *metis, const char *cmd)
{
    const char *value = "contiguous";
    if (take_option(argc, argv, "partition", &value, cmd, "contiguous or metis"))
        return EXIT_USAGE;
    if (strcmp(value, "contiguous") && strcmp(value, "metis"))
        return usage_error(cmd, "--partition '%s': expected contiguous or metis", value);
    *metis = value[0] == 'm';
    return 0;
}

/* --partition metis: what it does not combine with. */
static int refuse_metis(const run_opts_t *o, ag_mpi_path_t path)
{
    if (!ag_partition_has_metis())
        return usage_error("run", "--partition metis: this build has no METIS (built with "
                           "NO_METIS=1; install libmetis-dev and rebuild)");
    if (o->src.pattern)
        return usage_error("run", "--partition metis is for graph files and CSR: a pattern's "
                           "contiguous parts are ranges each process compiles for itself "
                           "(and the results stay bitwise)");
    if (path == AG_MPI_RING)
        return usage_error("run", "--partition metis runs on the halo path: the ring needs "
                           "contiguous runs of sources, which renumbering breaks");
    if (o->edge_bias)
        return usage_error("run", "--edge-bias with --partition metis: renumbering reorders "
                           "each node's messages; use the contiguous parts");
    if (o->per_node)
        return usage_error("run", "--per-node-weights with --partition metis: each process "
                           "draws the rows of a contiguous range; use the contiguous parts");
    return 0;
}

/* Usage errors for what a run on several processes does not do. */
/* Without --threads: the machine's cores shared among the processes on it (all
   cores each would oversubscribe them: 3 processes of 2 threads on 2 cores ran
   2.5x slower than of 1 thread). */
int refuse_csr_stdin(const char *cmd, const char *csr)
{
    if (csr_stdin_count(csr))
        return usage_error(cmd, "--csr %s: attngraph-mpi reads each part of the CSR at its "
                           "own offset, which standard input cannot give: name the files", csr);
    return 0;
}

static int refuse_unsupported(const run_opts_t *o)
{
    return refuse_csr_stdin("run", o->src.csr) ? EXIT_USAGE : 0;
}

/*
 * What rank 0 watches after each round. --trace, --until, --save-rounds:
 * every process sends its rows of the states and of the kernel's figures to
 * rank 0, which computes the round's figures from the whole rows as
 * attngraph run does (ag_round_figures: the same bits), writes them, and says
 * whether to stop. --attn: the queries and keys of the reported round (its
 * --attn-round, else the last) and its score, for rank 0 to export the
 * whole graph's weights as attngraph run does.
 */
typedef struct {
    MPI_Comm comm;
    const ag_mpi_part_t *part;
    const run_opts_t *o;
    int trace;                /* figures wanted */
    int attn;                 /* --attn: keep the reported round */
    int64_t rounds;           /* the rounds asked for */
    FILE *csv;                /* rank 0: --trace FILE.csv, or NULL */
    trace_row_t *rows;        /* rank 0: [rounds] */
    float *X, *X_prev;        /* rank 0: [N, D] the whole states after and before */
    float *entropy, *max_weight;   /* rank 0: [N, H] */
    int done;                 /* rank 0: the rounds traced */
    float *Q, *K;             /* rank 0 (--attn): [N, H*d] of the reported round */
    ag_score_t score;         /* its score (rank 0's edge bias: its slots only) */
    int kept;                 /* the round kept (0: none yet) */
    ag_error_t *err;
} tracer_t;

/* --attn: the reported round's queries and keys, gathered (collective). */
static int keep_attention(tracer_t *t, const ag_round_t *round, int stop)
{
    const int64_t want = t->o->attn_round;
    if (!t->attn || !(want ? round->round == want : stop || round->round == t->rounds))
        return AG_OK;
    const int64_t HD = round->ws->HD;
    int rc = ag_mpi_gather_rows(t->comm, t->part, round->ws->Q, HD, t->Q, 0, t->err);
    if (!rc)
        rc = ag_mpi_gather_rows(t->comm, t->part, round->ws->K, HD, t->K, 0, t->err);
    t->score = *round->score;
    t->kept = round->round;
    return rc;
}

static int trace_round(const ag_round_t *round, void *ctx)
{
    tracer_t *t = ctx;
    if (!t->trace)
        return keep_attention(t, round, 0);
    const ag_mpi_part_t *part = t->part;
    const int64_t D = round->ws->D, H = round->w->H, N = part->n_nodes;
    int rc = ag_mpi_gather_rows(t->comm, part, round->X, D, t->X, 0, t->err);
    if (!rc)
        rc = ag_mpi_gather_rows(t->comm, part, round->X_prev, D, t->X_prev, 0, t->err);
    if (!rc)
        rc = ag_mpi_gather_rows(t->comm, part, round->entropy, H, t->entropy, 0, t->err);
    if (!rc)
        rc = ag_mpi_gather_rows(t->comm, part, round->max_weight, H, t->max_weight, 0, t->err);
    int stop = 0;
    if (!rc && part->rank == 0) {
        const ag_workspace_t ws = {.N = N, .HD = round->ws->HD, .D = D};
        const ag_round_t whole = {.round = round->round, .w = round->w, .score = round->score,
                                  .X = t->X, .X_prev = t->X_prev, .ws = &ws,
                                  .entropy = t->entropy, .max_weight = t->max_weight};
        trace_row_t *row = &t->rows[round->round - 1];
        row->round = round->round;
        rc = ag_round_figures(&whole, &row->f, t->err);
        if (!rc && t->csv)
            fprintf(t->csv, "%d,%.9g,%.9g,%.9g\n", row->round, row->f.change, row->f.entropy,
                    row->f.max_weight);
        if (!rc && t->o->save_rounds)
            rc = save_round(t->o->save_rounds, round->round, t->X, N, D, t->err);
        stop = !rc && t->o->until > 0 && row->f.change < t->o->until;
        t->done = round->round;
    }
    MPI_Bcast(&stop, 1, MPI_INT, 0, t->comm);
    if (!(rc = ag_mpi_agree(t->comm, rc, t->err)))
        rc = keep_attention(t, round, stop);
    return rc ? rc : stop ? AG_STOP : AG_OK;
}

/* Rank 0's buffers and files of the tracer (the others need none). */
static int tracer_open(tracer_t *t, const ag_mpi_part_t *part, const run_opts_t *o,
                       const inputs_t *in, const char *csv_path, ag_error_t *err)
{
    const int64_t N = part->n_nodes, D = in->x0.cols, H = in->H, HD = H * in->d;
    t->rounds = in->rounds;
    if (part->rank != 0)
        return AG_OK;
    if (t->attn && (!(t->Q = ag_alloc(N * HD + 1, sizeof(float), err, "--attn")) ||
                    !(t->K = ag_alloc(N * HD + 1, sizeof(float), err, "--attn"))))
        return ag_alloc_status();
    if (!t->trace)
        return AG_OK;
    if (!(t->rows = ag_calloc(in->rounds + 1, sizeof *t->rows, err, "--trace")) ||
        !(t->X = ag_alloc(N * D + 1, sizeof(float), err, "--trace")) ||
        !(t->X_prev = ag_alloc(N * D + 1, sizeof(float), err, "--trace")) ||
        !(t->entropy = ag_alloc(N * H + 1, sizeof(float), err, "--trace")) ||
        !(t->max_weight = ag_alloc(N * H + 1, sizeof(float), err, "--trace")))
        return ag_alloc_status();
    if (o->save_rounds && mkdir(o->save_rounds, 0777) != 0 && errno != EEXIST)
        return ag_fail(err, AG_EIO, "%s: cannot create the directory: %s", o->save_rounds,
                       strerror(errno));
    if (csv_path && !(t->csv = fopen(csv_path, "w")))
        return ag_fail(err, AG_EIO, "%s: cannot write: %s", o->trace, strerror(errno));
    if (t->csv)
        fputs("round,change,entropy,max_weight\n", t->csv);
    return AG_OK;
}

/* Closes the CSV (rc: the run's status so far; a failed write fails it). */
static int tracer_close(tracer_t *t, int rc)
{
    if (t->csv && fclose(t->csv) != 0 && !rc)
        rc = ag_fail(t->err, AG_EIO, "%s: write failed", t->o->trace);
    t->csv = NULL;
    return rc;
}

static void tracer_free(tracer_t *t)
{
    if (t->csv)
        fclose(t->csv);
    free(t->rows), free(t->X), free(t->X_prev), free(t->entropy), free(t->max_weight);
    free(t->Q), free(t->K);
}

/* --attn on rank 0: the whole graph again (its source opened once more) and the
   reported round's weights exported as attngraph run exports them. */
static int export_attention(const tracer_t *t, const inputs_t *in, out_file_t *outs, int n,
                            ag_error_t *err)
{
    const run_opts_t *o = t->o;
    if (o->attn_round && t->kept != o->attn_round)
        return ag_fail(err, AG_EINVAL, "--attn-round %lld, but --until stopped after round %d",
                       (long long)o->attn_round, t->done);
    if (!t->kept)
        return ag_fail(err, AG_EINVAL, "no attention to report: no round ran");
    source_t s;
    int usage;
    int rc = source_open(&s, &o->src, &usage, err);
    if (rc)
        return rc;
    result_t r;
    memset(&r, 0, sizeof r);
    r.Q = t->Q, r.K = t->K, r.score = t->score, r.score.edge_bias = NULL;
    if (o->edge_bias && !(rc = ag_edge_attribute(&r.edge_bias, &s.graph, &s.nb, o->edge_bias,
                                                 err)))
        r.score.edge_bias = r.edge_bias;
    for (int k = 0; !rc && k < n; k++)
        rc = report_attention(&outs[k], &r, in, &s, o->max_export, err);
    free(r.edge_bias);
    source_close(&s);
    return rc;
}

/* --predict: the final states gathered, the readout's classes written by rank 0. */
static int predict_gathered(MPI_Comm comm, const ag_mpi_part_t *part, const float *mine,
                            int64_t cols, const char *weights, int readout, const char *path,
                            ag_error_t *err)
{
    float *all;
    int rc = gather_all_rows(comm, part, mine, cols, &all, err);
    if (!rc && part->rank == 0)
        rc = write_predictions(path, weights, readout, all, part->n_nodes, cols, err);
    free(all);
    return ag_mpi_agree(comm, rc, err);
}

/* Gathers rows [n, cols] to rank 0 and writes them there as path (rank 0's). */
static int write_gathered(MPI_Comm comm, const ag_mpi_part_t *part, const float *mine,
                          int64_t cols, const char *path, int per_head, int64_t H,
                          ag_error_t *err)
{
    float *all;
    int rc = gather_all_rows(comm, part, mine, cols, &all, err);
    if (rc)
        return rc;
    if (part->rank == 0) {
        if (!per_head) {
            rc = ag_npy_write_f32(path, all, part->n_nodes, cols, err);
        } else {   /* [N, H*d] as [H, N, d] */
            const int64_t N = part->n_nodes, d = cols / H;
            float *t = ag_alloc(N * cols, sizeof *t, err, "head messages");
            if (!t)
                rc = ag_alloc_status();
            for (int64_t h = 0; !rc && h < H; h++)
                for (int64_t i = 0; i < N; i++)
                    memcpy(t + (h * N + i) * d, all + i * cols + h * d, (size_t)d * sizeof *t);
            const int64_t shape[3] = {H, N, d};
            if (!rc)
                rc = ag_npy_write_f32_nd(path, t, 3, shape, err);
            free(t);
        }
    }
    free(all);
    return ag_mpi_agree(comm, rc, err);
}

static const char *path_name(ag_mpi_path_t p)
{
    return p == AG_MPI_RING ? "ring" : p == AG_MPI_HALO ? "halo" : "auto";
}

/* Rank 0: the edge cut and halo of METIS's parts against the contiguous ones'. */
static void report_metis(const metis_info_t *m, const ag_mpi_part_t *part, const inputs_t *in)
{
    const double row = 2.0 * (double)(in->H * in->d) * sizeof(float) / 1e6;   /* a K+V row, MB */
    const double E = part->n_edges ? (double)part->n_edges : 1.0;
    printf("partition: METIS (seed %llu): edge cut %lld message%s (%.1f%%), halo %lld row%s "
           "(%.4g MB a round); contiguous parts (the default, cut at multiples of 1024 rows) "
           "would cut %lld (%.1f%%), halo %lld row%s (%.4g MB a round)\n",
           (unsigned long long)m->seed, (long long)m->cut, AG_PLURAL(m->cut),
           100.0 * (double)m->cut / E, (long long)m->halo, AG_PLURAL(m->halo),
           (double)m->halo * row, (long long)m->cut_contiguous,
           100.0 * (double)m->cut_contiguous / E, (long long)m->halo_contiguous,
           AG_PLURAL(m->halo_contiguous), (double)m->halo_contiguous * row);
}

static void report(MPI_Comm comm, const ag_mpi_part_t *part, const char *desc,
                   const inputs_t *in, const ag_mpi_stats_t *st, int threads,
                   const metis_info_t *metis)
{
    double comm_s = st->seconds_comm, max_s;
    double sums[3] = {(double)st->bytes_sent, (double)st->bytes_received, comm_s}, all[3];
    MPI_Reduce(sums, all, 3, MPI_DOUBLE, MPI_SUM, 0, comm);
    MPI_Reduce(&st->seconds, &max_s, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
    struct rusage ru;
    double rss = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : 0.0;
    double *all_rss = part->rank == 0 ? malloc((size_t)part->ranks * sizeof *all_rss) : NULL;
    int have = part->rank != 0 || all_rss;   /* rank 0 says whether it has room: all gather, or none */
    MPI_Bcast(&have, 1, MPI_INT, 0, comm);
    if (have)
        MPI_Gather(&rss, 1, MPI_DOUBLE, all_rss, 1, MPI_DOUBLE, 0, comm);
    if (part->rank != 0)
        return;
    const int P = part->ranks;
    printf("graph: %s: %lld node%s, %lld message%s\n", desc, (long long)part->n_nodes,
           AG_PLURAL(part->n_nodes), (long long)part->n_edges, AG_PLURAL(part->n_edges));
    if (in->raw)
        printf("attention on --q/--k/--v (%lld head%s of width %lld)", (long long)in->H,
               AG_PLURAL(in->H), (long long)in->d);
    else
        printf("rounds: %lld (D=%lld, %lld head%s of width %lld)", (long long)in->rounds,
               (long long)in->x0.cols, (long long)in->H, AG_PLURAL(in->H), (long long)in->d);
    printf(" on %d process%s x %d thread%s, %s path\n", P, P == 1 ? "" : "es", threads,
           AG_PLURAL(threads), path_name(st->path));
    if (metis->metis)
        report_metis(metis, part, in);
    for (int p = 0; p < P; p++) {
        const int64_t lo = part->bounds[p], hi = part->bounds[p + 1];
        if (metis->metis)   /* rows of the renumbered graph: only the count says something */
            printf("  process %d: %lld row%s (METIS part %d), peak memory %.1f MB\n", p,
                   (long long)(hi - lo), AG_PLURAL(hi - lo), p, all_rss ? all_rss[p] : 0.0);
        else if (hi > lo)
            printf("  process %d: rows %lld..%lld, peak memory %.1f MB\n", p, (long long)lo,
                   (long long)hi - 1, all_rss ? all_rss[p] : 0.0);
        else   /* parts are cut at multiples of 1024 rows (see docs/scale.md) */
            printf("  process %d: no rows (parts start at multiples of 1024 rows), peak "
                   "memory %.1f MB\n", p, all_rss ? all_rss[p] : 0.0);
    }
    free(all_rss);
    const int ran = in->raw ? 1 : st->rounds_done;   /* --until may stop early */
    const double per_round = ran ? max_s / (double)ran : 0;
    printf("time per round: %.4g s; communicating: %.1f%% (mean over processes); "
           "exchanged: %.4g MB a round (all processes together)\n", per_round,
           max_s > 0 ? 100.0 * all[2] / P / max_s : 0.0,
           ran ? all[0] / 1e6 / (double)ran : 0.0);
}

/* ---- run_backend_t on P processes ---- */

typedef struct {
    MPI_Comm comm;
    const run_opts_t *o;
    ag_mpi_path_t path;
    metis_info_t *metis;
    int threads;
    ag_mpi_part_t part;
    float *bias;               /* --edge-bias: this process's slots */
    char desc[512];
    inputs_t in;
    ag_matrix_t x0;
    float *M, *Y;              /* the messages, the states (as wide as the widest round) */
    int64_t cols;              /* the output's columns */
    ag_mpi_stats_t st;
    tracer_t tr;
    int tracing;
} mrun_t;

static int m_agree(run_backend_t *b, int rc, int *usage, ag_error_t *err)
{
    mrun_t *x = b->ctx;
    if (usage)
        MPI_Bcast(usage, 1, MPI_INT, 0, x->comm);
    return ag_mpi_agree(x->comm, rc, err);
}

/* This process's part, its rows of the inputs, and room for the messages and states. */
static int m_load(run_backend_t *b, int *usage, ag_error_t *err)
{
    mrun_t *x = b->ctx;
    const run_opts_t *o = x->o;
    MPI_Comm comm = x->comm;
    int rc = AG_OK;
    if (o->src.csr)   /* before the edges are read */
        rc = ag_mpi_agree(comm, csr_fits(comm, o, err), err);
    if (!rc)
        rc = open_part(&x->part, comm, &o->src, x->metis, o->edge_bias, &x->bias, x->desc,
                       sizeof x->desc, usage, err);
    if (!rc && o->q)
        rc = own_raw(&x->in, comm, &x->part, o, err);
    else if (!rc)
        rc = own_features(&x->x0, comm, &x->part, o, err);
    if (!rc && !o->q) {
        run_opts_t lo = *o;
        lo.posenc = 0;   /* own_features placed the rows at their positions */
        rc = ag_mpi_agree(comm, inputs_load_part(&x->in, &lo, &x->x0, x->part.lo,
                                                 x->part.n_nodes, NULL, err), err);
    }
    const inputs_t *in = &x->in;
    const int64_t n = x->part.hi - x->part.lo, HD = in->H * in->d;
    if (!rc && (o->messages || o->head_messages || in->raw) &&
        !(x->M = ag_alloc(n ? n * HD : 1, sizeof *x->M, err, "messages")))
        rc = ag_alloc_status();
    x->cols = in->raw ? HD : in->x0.cols;
    if (!rc && !in->raw) {
        const int64_t widest = ag_rounds_widest(in->layers, in->n_layers, (int)in->rounds);
        if (in->rounds > 0)
            x->cols = ag_layer_width_out(&in->layers[in->n_layers == 1 ? 0 : in->rounds - 1]);
        if (!(x->Y = ag_alloc(n ? n * widest : 1, sizeof *x->Y, err, "states")))
            rc = ag_alloc_status();
        else
            memcpy(x->Y, in->x0.data, (size_t)(n * in->x0.cols) * sizeof *x->Y);
    }
    if (!rc && o->model.spec.n_layers && (o->trace || o->until > 0 || o->save_rounds || o->n_attn))
        rc = ag_fail(err, AG_EINVAL, "%s: a model file's layers run here for --out, "
                     "--messages and --predict; --trace, --until, --save-rounds and --attn "
                     "are for one process (attngraph run)", o->model.path);
    return ag_mpi_agree(comm, rc, err);
}

static int m_compute(run_backend_t *b, out_file_t *outs, ag_error_t *err)
{
    mrun_t *x = b->ctx;
    const run_opts_t *o = x->o;
    MPI_Comm comm = x->comm;
    inputs_t *in = &x->in;
    const int64_t HD = in->H * in->d;
    ag_score_t score = in->score;
    score.edge_bias = x->bias;
    ag_round_opts_t ro = AG_ROUND_OPTS_INIT;
    ro.score = &score, ro.no_residual = o->no_residual, ro.norm = o->norm;
    tracer_t *tr = &x->tr;
    *tr = (tracer_t){.comm = comm, .part = &x->part, .o = o, .err = err};
    tr->trace = !in->raw && (o->trace || o->until > 0 || o->save_rounds);
    tr->attn = o->n_attn > 0;
    x->tracing = tr->trace || tr->attn;
    const int trace_svg = run_trace_is_svg(o, outs);
    int rc = AG_OK;
    if (o->n_attn)   /* refused before the work, as attngraph run does */
        rc = attn_size_check(o, x->part.n_edges, err);
    if (!rc && o->attn_round > in->rounds)
        rc = ag_fail(err, AG_EINVAL, "--attn-round %lld, but the run has %lld round%s",
                     (long long)o->attn_round, (long long)in->rounds, AG_PLURAL(in->rounds));
    if (!rc && x->tracing) {
        rc = ag_mpi_agree(comm, tracer_open(tr, &x->part, o, in, o->trace && !trace_svg ?
                                            outs[RUN_TRACE].file.path : NULL, err), err);
        ro.on_round = trace_round, ro.ctx = tr, ro.figures = tr->trace;
    }
    if (!rc && in->raw) {   /* one round of attention on the given Q, K, V: M is the output */
        rc = ag_mpi_attention(comm, &x->part, in->q.data, in->k.data, in->v.data, in->H, in->d,
                              &score, x->M, &x->st, err);
        if (!rc && tr->attn)   /* --attn: its queries and keys are the given ones */
            rc = ag_mpi_gather_rows(comm, &x->part, in->q.data, HD, tr->Q, 0, err);
        if (!rc && tr->attn)
            rc = ag_mpi_gather_rows(comm, &x->part, in->k.data, HD, tr->K, 0, err);
        tr->score = score, tr->kept = 1;
    } else if (!rc)
        rc = ag_mpi_rounds_run(comm, &x->part, in->layers, in->n_layers, x->Y, (int)in->rounds,
                               &ro, x->path, x->M, &x->st, err);
    if (x->tracing)
        rc = ag_mpi_agree(comm, b->rank == 0 ? tracer_close(tr, rc) : rc, err);
    return ag_mpi_agree(comm, rc, err);
}

static int m_write(run_backend_t *b, out_file_t *outs, ag_error_t *err)
{
    mrun_t *x = b->ctx;
    const run_opts_t *o = x->o;
    MPI_Comm comm = x->comm;
    const inputs_t *in = &x->in;
    const int64_t n = x->part.hi - x->part.lo, HD = in->H * in->d;
    const int root = b->rank == 0;
    const int trace_svg = run_trace_is_svg(o, outs);
    int rc = AG_OK;
    if (trace_svg && root)
        rc = write_trace_svg(&outs[RUN_TRACE], x->tr.rows, x->tr.done, x->desc, err);
    if (!rc && x->tr.attn && root)
        rc = export_attention(&x->tr, in, &outs[RUN_ATTN], o->n_attn, err);
    rc = ag_mpi_agree(comm, rc, err);
    const float *y = in->raw ? x->M : x->Y;
    ag_error_t where;
    if (!rc && ag_check_finite(in->raw ? "the messages" : "the output states", y, n, x->cols,
                               &where))
        rc = ag_fail(err, AG_EINVAL, "%s; the computation overflowed float32: scale the "
                     "inputs down (the largest |value| should be far below 1e18)", where.msg);
    rc = ag_mpi_agree(comm, rc, err);
    if (!rc && o->out)
        rc = write_gathered(comm, &x->part, y, x->cols, outs[RUN_OUT].file.path, 0, 0, err);
    if (!rc && o->messages)
        rc = write_gathered(comm, &x->part, x->M, HD, outs[RUN_MESSAGES].file.path, 0, 0, err);
    if (!rc && o->head_messages)
        rc = write_gathered(comm, &x->part, x->M, HD, outs[RUN_HEAD_MESSAGES].file.path, 1,
                            in->H, err);
    if (!rc && o->predict)
        rc = predict_gathered(comm, &x->part, x->Y, x->cols, o->weights,
                              !o->model.spec.n_layers || o->model.spec.readout,
                              outs[RUN_PREDICT].file.path, err);
    return rc;
}

static int m_report(run_backend_t *b, ag_error_t *err)
{
    mrun_t *x = b->ctx;
    const run_opts_t *o = x->o;
    (void)err;
    report(x->comm, &x->part, x->desc, &x->in, &x->st, x->threads, x->metis);
    if (b->rank == 0 && x->tracing && (o->trace || o->until > 0))
        print_trace(x->tr.rows, x->tr.done, o, x->in.rounds);
    return AG_OK;
}

int mpi_run(MPI_Comm comm, int argc, char **argv)
{
    ag_mpi_path_t path;
    metis_info_t metis;
    memset(&metis, 0, sizeof metis);
    if (take_path_option(&argc, argv, &path, "run") ||
        take_partition_option(&argc, argv, &metis.metis, "run"))
        return EXIT_USAGE;
    run_opts_t o;
    int status = run_parse(&o, argc, argv);
    if (status == 0)   /* the help: attngraph run's, and the option only this tool has */
        printf("\nattngraph-mpi run (mpirun -np P attngraph-mpi run ...) also takes:\n"
               "  --path auto|halo|ring   how K and V rows reach the processes: halo (each\n"
               "                      receives the rows it reads), ring (blocks pass around\n"
               "                      the ranks; one run of sources per destination, plain\n"
               "                      dot-product scores), or auto (default: the ring where the\n"
               "                      halo would hold over half the rows).\n"
               "  --partition contiguous|metis   which destinations each process owns:\n"
               "                      contiguous ranges (default; bitwise one process's\n"
               "                      outputs), or METIS parts of a graph file or CSR (seeded\n"
               "                      with --seed, as attngraph plan's; fewer K/V rows cross,\n"
               "                      the outputs agree with one process's to float32\n"
               "                      rounding, not bitwise; halo path; the report gives the\n"
               "                      edge cut and halo against the contiguous parts').\n");
    if (status >= 0)
        return status;
    if (refuse_unsupported(&o) || (metis.metis && refuse_metis(&o, path)))
        return EXIT_USAGE;
    if (o.q && path == AG_MPI_RING)
        return usage_error("run", "--path ring: raw attention (--q/--k/--v) runs on the halo "
                           "path");
    if ((o.trace || o.until > 0 || o.save_rounds) && path == AG_MPI_RING)
        return usage_error("run", "--path ring: --trace, --until and --save-rounds take the "
                           "halo path (the ring keeps no figures of the attention)");
    metis.seed = o.seed;
    if (metis.metis)
        path = AG_MPI_HALO;
    const int threads = o.threads ? ag_set_threads((int)o.threads)
                                  : ag_i_set_tool_threads(threads_per_process(comm));
    int rank;
    MPI_Comm_rank(comm, &rank);
    mrun_t x;
    memset(&x, 0, sizeof x);
    x.comm = comm, x.o = &o, x.path = path, x.metis = &metis, x.threads = threads;
    run_backend_t many = {.rank = rank, .agree = m_agree, .load = m_load, .compute = m_compute,
                          .write = m_write, .report = m_report, .ctx = &x};
    status = run_with(&o, &many);
    tracer_free(&x.tr);
    free(x.M), free(x.Y), free(x.bias);
    ag_matrix_destroy(&x.x0);
    inputs_free(&x.in);
    ag_mpi_part_destroy(&x.part);
    return status;
}
