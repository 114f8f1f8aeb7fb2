/*
 * attngraph-mpi train: `attngraph train` on P processes, the same options
 * (parse_train) and the same model bits: each process runs the rounds'
 * forward and backward on its rows (src/mpi/train.c), the loss's and the
 * weight gradients' sums over rows go through the reducer (every chunk of
 * rows added in the one-process order on every process), and every process
 * takes the same optimizer step on its copy of the weights (per-node
 * weights: on its own nodes' matrices, after a norm summed by the reducer).
 * Rank 0 writes --save (gathering the per-node matrices), --log, --svg and
 * --predict (the final states gathered). The command is the one-process
 * tool's (train_with, its outputs and report, over this file's backend) and
 * so are its epochs (train_epochs), each connectivity of several on its own
 * parts from the same initial model. The halo path.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "train/train.h"
#include "mpi/mpi.h"
#include "mpi/cli/mpi_cli.h"
#include "cli/train.h"

static int refuse_train(const train_opts_t *to, ag_mpi_path_t path)
{
    for (int k = 0; k < to->n_conns; k++)
        if (to->conns[k].kind == 2 && refuse_csr_stdin("train", to->conns[k].name))
            return 1;
    for (int k = 0; k < to->n_conns; k++)
        if (to->conns[k].kind == 1 && strchr(to->conns[k].name, '|'))
            return usage_error("train", "'%s': a graph a layer runs on one process (the MPI "
                               "layer's parts are one graph's); use attngraph train",
                               to->conns[k].name);
    if (to->metric == METRIC_AUC || to->data)
        return usage_error("train", "--%s: ROC AUC ranks every node of a mask, which no "
                           "process holds; attngraph train computes it on one process",
                           to->data ? "data" : "metric auc");
    if (path == AG_MPI_RING)
        return usage_error("train", "--path ring: training runs on the halo path only so "
                           "far (the ring's backward is not written); use --path halo");
    return 0;
}

typedef struct {
    MPI_Comm comm;
    ag_mpi_part_t part;
    inputs_t in;
    task_t task;               /* the whole task (every process reads it) */
    model_t model;             /* this process's rows: model.N = hi - lo */
    ag_matrix_t x0;            /* own rows */
    float *bias;               /* --edge-bias: own messages' (own slots) */
    ag_i_reducer_t red;
    ag_mpi_reduce_t red_ctx;
    ag_mpi_stats_t stats;
    ag_mpi_tape_t *tape;       /* the rounds' tape, made by the first epoch */
    folder_item_t items[AG_LAYER_ARRAYS * MODEL_MAX_LAYERS + 3];
    char names[AG_LAYER_ARRAYS * MODEL_MAX_LAYERS + 2][64];
    char model_args[8192];     /* model.args, or a model file's model.txt */
    int n_items;
    int64_t N;                 /* nodes (rows of --features) */
    const train_opts_t *to;
    int threads;
} mtrain_t;

/* The loss on mask's own rows (grads: and their gradients), as train_model.c's. */
static int loss_on(mtrain_t *s, const uint8_t *mask, int grads, double *loss, int64_t *correct,
                   ag_error_t *err)
{
    model_t *m = &s->model;
    const task_t *t = &s->task;
    const int64_t lo = s->part.lo;
    if (!m->C)
        return ag_i_loss_mse_r(&s->red, m->X, t->targets.data + lo * m->D, m->N, m->D,
                               mask + lo, loss, grads ? m->dX : NULL, err);
    const ag_cross_entropy_t ce = {m->wr, m->br, m->C, t->labels + lo, mask + lo};
    ag_cross_entropy_out_t out = {.dX = grads ? m->dX : NULL, .dWr = grads ? m->dwr : NULL,
                                  .dbr = grads ? m->dbr : NULL};
    const int rc = ag_i_loss_cross_entropy_r(&s->red, m->X, m->N, m->D, &ce, &out, err);
    if (loss)
        *loss = out.loss;
    if (correct)
        *correct = out.correct;
    return rc;
}

/* The rounds' forward into m->X on this process's rows, with the options of a
   step or not (model_round_opts). One tape for every epoch: its plans and
   memory are made once. */
static int forward(mtrain_t *s, int step, ag_error_t *err)
{
    model_t *m = &s->model;
    memcpy(m->X, s->in.x0.data, (size_t)(m->N * m->D_in) * sizeof(float));
    const ag_round_opts_t ro = model_round_opts(m, step);
    return m->rounds > 0 ? ag_mpi_rounds_forward(s->comm, &s->part, m->layers, m->n_layers, m->X,
                                                 m->rounds, &ro, &s->tape, &s->stats, err)
                         : AG_OK;
}

/* model_epoch on P processes. */
static int epoch(mtrain_t *s, int step, epoch_t *f, ag_error_t *err)
{
    model_t *m = &s->model;
    const task_t *t = &s->task;
    *f = (epoch_t){NAN, NAN, NAN, NAN, 0, 0, 0, {NAN, NAN, NAN}, 0};
    const int drops = model_drops(m);
    int rc = forward(s, 0, err);   /* the figures: no dropout */
    if (!rc)
        rc = loss_on(s, t->train, step && !drops, &f->loss, &f->train_correct, err);
    if (!rc && t->eval)
        rc = loss_on(s, t->eval, 0, &f->eval_loss, &f->eval_correct, err);
    if (!rc && t->test)
        rc = loss_on(s, t->test, 0, &f->test_loss, &f->test_correct, err);
    if (!rc && !isfinite(f->loss)) {   /* the same loss on every process */
        f->diverged = 1;
        rc = ag_fail(err, AG_EINVAL, "the loss is not finite");
    }
    if (!rc && step && drops) {   /* the step's forward, with dropout */
        double loss;
        int64_t correct;
        if (!(rc = forward(s, 1, err)))
            rc = loss_on(s, t->train, 1, &loss, &correct, err);
    }
    if (!rc && step && m->rounds > 0)
        rc = ag_mpi_rounds_backward(s->tape, m->dX, NULL, m->grads, err);
    if (!rc && step)   /* the same gradients everywhere: the same step */
        rc = ag_i_optimizer_step_r(m->opt, &s->red, &f->grad_norm, err);
    if (!rc && step)
        m->steps++;
    return rc;
}

/* Rank 0: the time an epoch took and what moved between the processes. */
static void report(mtrain_t *s, int64_t epochs, double seconds)
{
    double mine[3] = {s->stats.seconds_comm, (double)s->stats.bytes_sent, seconds}, all[3];
    MPI_Reduce(mine, all, 3, MPI_DOUBLE, MPI_SUM, 0, s->comm);
    if (s->part.rank != 0)
        return;
    const double per = (double)(epochs + 1);   /* the figures of the last epoch too */
    printf("communicating: %.1f%% of the time (mean over processes); exchanged: %.4g MB an "
           "epoch (all processes together)\n", all[2] > 0 ? 100.0 * all[0] / all[2] : 0.0,
           all[1] / 1e6 / per);
}

/* epoch on every process, its outcome agreed (train_epochs' epoch_fn). */
static int part_epoch(void *ctx, int step, epoch_t *f, ag_error_t *err)
{
    mtrain_t *s = ctx;
    return ag_mpi_agree(s->comm, epoch(s, step, f, err), err);
}

/* What one connectivity holds: its part, rows, model and tape. */
static void conn_free(mtrain_t *s)
{
    ag_mpi_tape_free(s->tape);
    s->tape = NULL;
    model_free(&s->model);
    inputs_free(&s->in);
    ag_matrix_destroy(&s->x0);
    ag_mpi_part_destroy(&s->part);
    free(s->bias);
    s->bias = NULL;
    memset(&s->stats, 0, sizeof s->stats);
}

/* N from --features (rank 0 reads it), for a pattern sized by the features. */
static int features_rows(MPI_Comm comm, const char *path, int64_t *N, ag_error_t *err)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    ag_matrix_t x;
    memset(&x, 0, sizeof x);
    int rc = rank == 0 ? ag_matrix_read_npy(&x, path, err) : AG_OK;
    *N = x.rows;
    ag_matrix_destroy(&x);
    if ((rc = ag_mpi_agree(comm, rc, err)))
        return rc;
    MPI_Bcast(N, 1, MPI_INT64_T, 0, comm);
    return AG_OK;
}

/* Connectivity k's part, own rows, model (the same initial one for every k)
   and, for k = 0, the task. */
static int setup(mtrain_t *s, const train_opts_t *to, int k, int threads, int *usage,
                 ag_error_t *err)
{
    source_opts_t so = to->o.src;
    const train_conn_t *c = &to->conns[k];
    so.graph = so.pattern = so.csr = NULL;
    *(c->kind == 0 ? &so.graph : c->kind == 1 ? &so.pattern : &so.csr) = c->name;
    const int single = to->n_conns == 1;
    int rc = k == 0 ? features_rows(s->comm, to->o.features, &s->N, err) : AG_OK;
    const int64_t N = s->N;
    if (!rc && c->kind == 1 && !so.nodes && !so.tokens && !so.labels_file)
        so.nodes = N;   /* a pattern sized by the features, as attngraph train sizes it */
    char desc[512];
    if (!rc)
        rc = open_part(&s->part, s->comm, &so, NULL, to->o.edge_bias, &s->bias, desc, sizeof desc,
                       usage, err);
    if (!rc && s->part.n_nodes != N)
        rc = ag_mpi_agree(s->comm, ag_fail(err, AG_EINVAL, "%s has %lld node%s; --features %s "
                                           "has %lld row%s", desc, (long long)s->part.n_nodes,
                                           AG_PLURAL(s->part.n_nodes), to->o.features,
                                           (long long)N, AG_PLURAL(N)), err);
    if (!rc)
        rc = own_features(&s->x0, s->comm, &s->part, &to->o, err);
    if (!rc && to->o.per_node && s->part.hi == s->part.lo)
        rc = ag_fail(err, AG_EINVAL, "--per-node-weights needs rows on every process: process "
                     "%d has none (parts start at multiples of 1024 rows, so %lld nodes fill at "
                     "most %lld of the %d processes); run on fewer processes", s->part.rank,
                     (long long)N, (long long)((N + AG_GEMM_CHUNK - 1) / AG_GEMM_CHUNK),
                     s->part.ranks);
    rc = ag_mpi_agree(s->comm, rc, err);
    if (!rc) {   /* this process's rows (and of per-node weights, its nodes' matrices) */
        run_opts_t lo = to->o;
        lo.posenc = 0;   /* own_features placed the rows at their positions */
        rc = ag_mpi_agree(s->comm, inputs_load_part(&s->in, &lo, &s->x0, s->part.lo, N, NULL, err),
                          err);
    }
    if (!rc && k == 0)
        rc = ag_mpi_agree(s->comm, task_load(&s->task, to, N, s->in.x0.cols, err), err);
    if (!rc)
        rc = ag_mpi_agree(s->comm, model_init(&s->model, &s->in, to, &s->task, s->bias, err), err);
    ag_i_mpi_reducer(&s->red, &s->red_ctx, s->comm, &s->part, &s->stats);
    if (!rc && s->part.rank == 0 && !to->o.quiet && k == 0) {
        inputs_t whole = s->in;
        whole.N = N;
        if (single)
            printf("graph: %s: %lld node%s, %lld message%s, on %d process%s\n", desc,
                   (long long)N, AG_PLURAL(N), (long long)s->part.n_edges,
                   AG_PLURAL(s->part.n_edges), s->part.ranks, s->part.ranks == 1 ? "" : "es");
        print_setup(to, &whole, &s->task, threads);
        for (int p = 0; single && p < s->part.ranks; p++) {
            const int64_t lo = s->part.bounds[p], hi = s->part.bounds[p + 1];
            if (hi > lo)
                printf("  process %d: rows %lld..%lld\n", p, (long long)lo, (long long)hi - 1);
            else
                printf("  process %d: no rows (parts start at multiples of 1024 rows)\n", p);
        }
        fflush(stdout);
    }
    return rc;
}

/* Rank 0 gathers every process's rows of the per-node array mine (rows of
   per_row floats) into *whole [N * per_row]; the others give theirs. */
static int gather_rows(mtrain_t *s, const float *mine, int64_t per_row, float **whole,
                       ag_error_t *err)
{
    const ag_mpi_part_t *part = &s->part;
    const int P = part->ranks, root = part->rank == 0;
    *whole = NULL;
    int *count = ag_alloc(P, sizeof *count, err, "--save"), *displ = ag_alloc(P, sizeof *displ,
                                                                                 err, "--save");
    int rc = count && displ ? AG_OK : ag_alloc_status();
    if (!rc && root && !(*whole = ag_alloc(part->n_nodes * per_row, sizeof(float), err, "--save")))
        rc = ag_alloc_status();
    if (!rc && (part->n_nodes > INT_MAX || per_row > INT_MAX))
        rc = ag_fail(err, AG_ELIMIT, "--save: per-node weights of %lld nodes of %lld values "
                     "are beyond what one MPI call moves", (long long)part->n_nodes,
                     (long long)per_row);
    if (!(rc = ag_mpi_agree(s->comm, rc, err))) {
        for (int p = 0; p < P; p++)   /* in rows: counts stay within an int */
            count[p] = (int)(part->bounds[p + 1] - part->bounds[p]), displ[p] = (int)part->bounds[p];
        MPI_Datatype row;
        MPI_Type_contiguous((int)per_row, MPI_FLOAT, &row);
        MPI_Type_commit(&row);
        MPI_Gatherv(mine, count[part->rank], row, *whole, count, displ, row, 0, s->comm);
        MPI_Type_free(&row);
    }
    free(count), free(displ);
    if (rc) {
        free(*whole);
        *whole = NULL;
    }
    return rc;
}

/* --save on rank 0: the model's arrays (the same on every process, but the
   per-node matrices, gathered from all) and model.args (or model.txt). */
static int save(mtrain_t *s, const train_opts_t *to, ag_error_t *err)
{
    model_t *m = &s->model;
    float *whole[64][3] = {{NULL}};
    int rc = AG_OK;
    for (int l = 0; l < m->n_layers && l < 64 && !rc; l++) {
        const ag_weights_t *w = &m->layers[l];
        const float *mine[3] = {w->wq, w->wk, w->wv};
        for (int k = 0; k < 3 && w->per_node && !rc; k++)
            rc = gather_rows(s, mine[k], w->H * w->d * w->D, &whole[l][k], err);
    }
    if (!rc && s->part.rank == 0) {
        s->n_items = model_items(m, s->items, s->names);
        for (int l = 0; l < m->n_layers && l < 64; l++)   /* the whole arrays in their place */
            for (int k = 0; k < 3; k++)
                for (int x = 0; whole[l][k] && x < s->n_items; x++) {
                    const ag_weights_t *w = &m->layers[l];
                    const float *mine[3] = {w->wq, w->wk, w->wv};
                    if (s->items[x].f32 == mine[k])
                        s->items[x].f32 = whole[l][k], s->items[x].shape[0] = s->part.n_nodes;
                }
        const char *name;
        if (model_text(s->model_args, sizeof s->model_args, to, &s->in, &name) >=
            sizeof s->model_args)
            rc = ag_fail(err, AG_EINVAL, "--save: the model's options are longer than %zu "
                         "bytes", sizeof s->model_args - 1);
        s->items[s->n_items++] = (folder_item_t){.name = name, .text = s->model_args};
        if (!rc)
            rc = folder_write(to->save, "--save", s->items, s->n_items, err);
    }
    for (int l = 0; l < 64; l++)
        for (int k = 0; k < 3; k++)
            free(whole[l][k]);
    return ag_mpi_agree(s->comm, rc, err);
}

/* --predict: the final states gathered, the readout's classes written by rank 0. */
static int predict(mtrain_t *s, out_file_t *out, ag_error_t *err)
{
    const model_t *m = &s->model;
    float *X;
    int64_t *pred = NULL;
    int rc = gather_all_rows(s->comm, &s->part, m->X, m->D, &X, err);
    if (!rc && s->part.rank == 0) {
        const int64_t N = s->part.n_nodes;
        if (!(pred = ag_alloc(N, sizeof *pred, err, "predictions")))
            rc = ag_alloc_status();
        else
            ag_readout_predict(X, N, m->D, m->wr, m->br, m->C, pred);
        if (!rc)
            rc = ag_npy_write_i64(out->file.path, pred, N, err);
    }
    free(X), free(pred);
    return ag_mpi_agree(s->comm, rc, err);
}

/* ---- train_backend_t on P processes ---- */

static int m_agree(train_backend_t *b, int rc, int *usage, ag_error_t *err)
{
    mtrain_t *s = b->ctx;
    if (usage)
        MPI_Bcast(usage, 1, MPI_INT, 0, s->comm);
    return ag_mpi_agree(s->comm, rc, err);
}

/* Connectivity k on its parts; a single one's model is kept for m_predict and m_save. */
static int m_connectivity(train_backend_t *b, run_ctx_t *cx, int k, outcome_t *res, int *usage,
                          ag_error_t *err)
{
    mtrain_t *s = b->ctx;
    const train_opts_t *to = s->to;
    const int single = to->n_conns == 1;
    cx->task = &s->task;
    int rc = setup(s, to, k, s->threads, usage, err);
    const double t0 = ag_i_mpi_now();
    if (!rc)
        rc = train_epochs(cx, part_epoch, s, s->part.n_edges, s->model.lr, to->conns[k].name,
                          res, err);
    if (!rc && single && !to->o.quiet) {
        if (s->part.rank == 0)
            print_final(&s->task, res, to->epochs);
        report(s, to->epochs, ag_i_mpi_now() - t0);
    }
    if (!single)   /* --predict and --save are of a single connectivity's model */
        conn_free(s);
    return rc;
}

static int m_predict(train_backend_t *b, out_file_t *out, ag_error_t *err)
{
    return predict(b->ctx, out, err);
}

static int m_save(train_backend_t *b, ag_error_t *err)
{
    mtrain_t *s = b->ctx;
    return save(s, s->to, err);
}

static void m_said_saved(train_backend_t *b)
{
    const mtrain_t *s = b->ctx;
    printf("wrote %s (%d files)\n", s->to->save, s->n_items);
}

int mpi_train(MPI_Comm comm, int argc, char **argv)
{
    ag_mpi_path_t path;
    int metis = 0;
    if (take_path_option(&argc, argv, &path, "train") ||
        take_partition_option(&argc, argv, &metis, "train"))
        return EXIT_USAGE;
    train_opts_t to;
    int status = parse_train(&to, argc, argv);
    if (status == 0)
        printf("\nattngraph-mpi train (mpirun -np P attngraph-mpi train ...) also takes:\n"
               "  --path auto|halo   how K and V rows reach the processes (training: halo)\n"
               "  --partition contiguous   training keeps the contiguous parts (bitwise\n"
               "                      the one-process model); METIS parts are for run\n");
    if (status >= 0)
        return status;
    if (metis)
        return usage_error("train", "--partition metis: training keeps the contiguous parts, "
                           "so that the model is bitwise the one-process model; METIS parts "
                           "are for attngraph-mpi run");
    if (refuse_train(&to, path))
        return EXIT_USAGE;
    const int threads = to.o.threads ? ag_set_threads((int)to.o.threads)
                                     : ag_i_set_tool_threads(threads_per_process(comm));
    mtrain_t *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "attngraph-mpi: out of memory\n");
        return EXIT_BAD_INPUT;
    }
    s->comm = comm, s->to = &to, s->threads = threads;
    int rank;
    MPI_Comm_rank(comm, &rank);
    train_backend_t many = {.rank = rank, .agree = m_agree, .connectivity = m_connectivity,
                            .predict = m_predict, .save = m_save, .said_saved = m_said_saved,
                            .ctx = s};
    status = train_with(&to, threads, &many);
    conn_free(s);
    task_free(&s->task);
    free(s);
    return status;
}
