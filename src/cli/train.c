/*
 * `attngraph train`: learns the rounds' weights (and, for classes, a linear
 * readout) by gradient descent; under several connectivities, the same initial
 * model is trained under each and one table compares what each learnt.
 */
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "cli/timing.h"
#include "cli/train.h"

/* The eval figure the best epoch is chosen by: correct nodes, the ROC AUC, or
   the loss (lower is better). */
static double eval_figure(const task_t *t, const epoch_t *f)
{
    return t->auc ? f->auc[1] : t->C ? (double)f->eval_correct : f->eval_loss;
}

static int better(const task_t *t, const epoch_t *f, double best)
{
    return t->C ? eval_figure(t, f) > best : f->eval_loss < best;
}

/* ---- one training run ---- */

int train_epochs(run_ctx_t *cx, epoch_fn epoch, void *ctx, int64_t edges, float lr,
                 const char *conn, outcome_t *out, ag_error_t *err)
{
    const train_opts_t *to = cx->to;
    const task_t *t = cx->task;
    const int64_t E = to->epochs;
    const int64_t every = to->every ? to->every : (E >= 10 ? E / 10 : 1);
    const int rows = cx->single && !to->o.quiet && cx->root;
    memset(out, 0, sizeof *out);
    out->edges = edges;
    out->best = t->C ? -1 : INFINITY;
    const double t0 = now_s();
    cx->progress.t0 = t0;
    if (rows)
        print_row_header(t);
    int rc = AG_OK;
    epoch_t f;
    for (int64_t e = 0; e <= E && !rc; e++) {
        /* epoch e: the figures of the model after e steps; then step e+1 */
        if ((rc = epoch(ctx, e < E, &f, err))) {
            if (f.diverged)   /* say when: after how many steps it diverged */
                rc = ag_fail(err, AG_EINVAL, "epoch %lld: the loss is %s: training diverged; "
                             "lower --lr (%g) or set --clip", (long long)e,
                             isnan(f.loss) ? "NaN" : "infinite", (double)lr);
            break;
        }
        if (t->eval && better(t, &f, out->best))
            out->best = eval_figure(t, &f), out->best_epoch = e,
            out->at_best = f;
        if (!t->eval)
            out->at_best = f, out->best_epoch = e;
        if (cx->log)
            log_row(cx->log, conn, t, e, &f);
        if (cx->curve)
            log_row(cx->curve, conn, t, e, &f);
        if (rows && (e % every == 0 || e == E)) {
            progress_clear(&cx->progress);
            print_row(t, e, &f);
            fflush(stdout);
        } else {
            progress_line(&cx->progress, cx->single ? NULL : conn, e, E, &f, t);
        }
    }
    progress_clear(&cx->progress);
    out->final = f;
    out->seconds = now_s() - t0;
    return rc;
}

/* One process's epoch: model_epoch on the whole graph. */
typedef struct {
    model_t *m;
    ag_nbhd_t *nb;
    const float *x0;
    const task_t *task;
} whole_epoch_t;

static int whole_epoch(void *ctx, int step, epoch_t *f, ag_error_t *err)
{
    const whole_epoch_t *w = ctx;
    return model_epoch(w->m, w->nb, w->x0, w->task, step, f, err);
}

/* ---- the command ---- */

/* A connectivity's source options (as compare makes them). A pattern that
   reads a graph (graph, hops:K) runs over the operand. */
static source_opts_t conn_source(const train_opts_t *to, int k, int64_t N)
{
    source_opts_t so = to->o.src;
    so.graph = so.pattern = so.csr = NULL;
    const train_conn_t *c = &to->conns[k], *g = to->operand.name ? &to->operand : NULL;
    if (c->kind == 1 && g && pattern_reads_graph(c->name)) {
        *(g->kind == 0 ? &so.graph : &so.csr) = g->name;
        so.pattern = strchr(c->name, '|') ? NULL : c->name;   /* 'A|B': the layers' own */
        so.tokens = so.labels_file = NULL;
        so.nodes = 0;
    } else if (c->kind == 1) {
        so.pattern = c->name;
        so.direction = AG_EDGES_AUTO;   /* edge directions mean nothing to a pattern */
        so.size_hint = N;
    } else {
        *(c->kind == 0 ? &so.graph : &so.csr) = c->name;
        so.tokens = so.labels_file = NULL;
        so.nodes = 0;
    }
    return so;
}

typedef struct {
    source_t src;
    inputs_t in;
    task_t task;
    model_t model;
    ag_matrix_t x0;
    float *edge_bias;
    ag_matrix_t edges;         /* --edge-features of the connectivity trained now */
    int64_t task_virtual;      /* the first connectivity's virtual nodes: the task's last */
    /* layer_specs': a graph a round, then the global heads' graph a round */
    const char *layer_spec[2 * MODEL_MAX_LAYERS];
    int n_layer_specs;                          /* rounds (each has two entries) */
    char layer_text[4096];
    ag_nbhd_t *layer_graphs[2 * MODEL_MAX_LAYERS];   /* compiled over src.nb */
    int64_t *pred;
    folder_item_t items[AG_LAYER_ARRAYS * MODEL_MAX_LAYERS + 3];
    char names[AG_LAYER_ARRAYS * MODEL_MAX_LAYERS + 2][64];
    char model_args[8192];     /* model.args (the options that define the model), or
                                  model.txt (a model file's model) */
    int n_items;
    const train_opts_t *to;
} train_state_t;

/* Refuses a --save folder holding round-k/ layers of an earlier model that run
   --weights would read in place of the ones saved now (it reads round-1/, round-2/,
   ... as long as they are there). */
static int save_fits(const char *dir, int n_layers, ag_error_t *err)
{
    char path[4096];
    const int first = n_layers > 1 ? n_layers + 1 : 1;
    snprintf(path, sizeof path, "%s/round-%d/wq.npy", dir, first);
    FILE *f = fopen(path, "rb");
    if (!f)
        return AG_OK;
    fclose(f);
    return ag_fail(err, AG_EINVAL, "--save %s holds round-%d/, a layer of an earlier model: "
                   "run --weights would read it as part of this one; save to a new folder", dir,
                   first);
}

/* The layers' connectivities of connectivity k (train_state_t.layer_spec):
   the parts of its 'A|B|...', one a round, or a model file's graph= keys;
   none (n_layer_specs 0) without either. *V: the most virtual nodes they
   append. */
static int layer_specs(train_state_t *st, const train_opts_t *to, int k, int64_t *V,
                       ag_error_t *err)
{
    const ag_model_spec_t *spec = &to->o.model.spec;
    const char *list = to->conns[k].kind == 1 && strchr(to->conns[k].name, '|')
                           ? to->conns[k].name : NULL;
    const int R = spec->n_layers ? (spec->rounds ? spec->rounds : spec->n_layers)
                                 : (int)to->o.rounds;
    st->n_layer_specs = 0;
    *V = 0;
    for (int l = 0; list && l < spec->n_layers; l++)
        if (spec->layers[l].graph[0])
            return ag_fail(err, AG_EINVAL, "'%s' gives the layers' graphs, and so does the "
                           "model file's graph= (line %d): give one", list,
                           spec->layers[l].line);
    if (!list && !ag_model_spec_layer_graphs(spec))
        return AG_OK;
    if (list && to->save)
        return ag_fail(err, AG_EINVAL, "--save: a model's graph a layer is kept in its model "
                       "file's graph= keys; give '%s' there (train --model FILE)", list);
    if (list && !to->operand.name)
        return ag_fail(err, AG_EINVAL, "a graph a layer ('%s') runs over a GRAPH file or "
                       "--csr; none was given", list);
    int parts = 1;
    for (const char *c = list; c && *c; c++)
        parts += *c == '|';
    if (list && parts != R)
        return ag_fail(err, AG_EINVAL, "'%s' gives %d layers' graphs; the model has %d "
                       "round%s: expected one a round, separated by '|'", list, parts, R,
                       AG_PLURAL(R));
    if (R > MODEL_MAX_LAYERS)
        return ag_fail(err, AG_ELIMIT, "a graph a layer for %d rounds; at most %d", R,
                       MODEL_MAX_LAYERS);
    snprintf(st->layer_text, sizeof st->layer_text, "%s", list ? list : "");
    for (int r = 0, at = 0; r < R; r++) {
        if (list) {   /* the parts, cut in place */
            st->layer_spec[r] = st->layer_text + at;
            at += (int)strcspn(st->layer_text + at, "|");
            st->layer_text[at++] = '\0';
        } else {
            st->layer_spec[r] = spec->layers[spec->n_layers == 1 ? 0 : r].graph;
        }
        const char *global = spec->n_layers ? spec->layers[spec->n_layers == 1 ? 0 : r].global
                                            : "";
        st->layer_spec[R + r] = global[0] ? global : st->layer_spec[r];
        for (int j = 0; j < 2; j++) {
            const int64_t v = pattern_virtual_nodes(st->layer_spec[j * R + r]);
            *V = v > *V ? v : *V;
        }
    }
    st->n_layer_specs = R;
    return AG_OK;
}

/* Trains on connectivity k; keeps the model of a single connectivity
   (train_backend_t's connectivity on one process). */
static int one_connectivity(train_backend_t *b, run_ctx_t *cx, int k, outcome_t *res,
                            int *usage, ag_error_t *err)
{
    train_state_t *st = b->ctx;
    if (k == 0) {
        const int rc = ag_matrix_read_npy(&st->x0, cx->to->o.features, err);
        if (rc)
            return rc;
    }
    const train_opts_t *to = cx->to;
    const int64_t N = k == 0 ? st->x0.rows : st->in.N;
    int64_t V_layers;
    int rc = layer_specs(st, to, k, &V_layers, err);
    if (rc)
        return rc;
    source_opts_t so = conn_source(to, k, N - (k ? st->task_virtual : 0));
    rc = source_open(&st->src, &so, usage, err);
    if (rc)
        return rc;
    /* a pattern's virtual nodes come after the features' rows: theirs are zero
       (the first layer's biases make their keys and values, and are learnt)
       unless --features gives them; the layers' graphs may append more */
    const int64_t V = st->src.n_virtual + V_layers, all = st->src.nb.n_nodes + V_layers;
    if (k == 0 && V && N == all - V && (rc = matrix_pad_rows(&st->x0, all, err)))
        return rc;
    if (k > 0 && V != st->task_virtual)
        return ag_fail(err, AG_EINVAL, "%s appends %lld virtual node%s, the first connectivity "
                       "%lld: connectivities trained together share their nodes (train them "
                       "in runs of their own)", st->src.desc, (long long)V, AG_PLURAL(V),
                       (long long)st->task_virtual);
    if (all != (k == 0 ? st->x0.rows : N))
        return ag_fail(err, AG_EINVAL, "%s has %lld node%s%s; --features %s has %lld row%s",
                       st->src.desc, (long long)all, AG_PLURAL(all),
                       V ? ", virtual ones included" : "", to->o.features,
                       (long long)(k == 0 ? N : N - V), AG_PLURAL(N));
    const int64_t width = st->edges.cols;   /* the first connectivity's, the layers' */
    ag_matrix_destroy(&st->edges);
    if ((rc = edge_features_load(&st->edges, &st->src, to->o.edge_features, err)))
        return rc;
    if (k > 0 && st->edges.cols != width)
        return ag_fail(err, AG_EINVAL, "--edge-features of %s are %lld wide; the first "
                       "connectivity's are %lld (the layers' edge_dim)", st->src.desc,
                       (long long)st->edges.cols, (long long)width);
    if (k == 0) {
        if ((rc = inputs_load_features(&st->in, &to->o, &st->x0,
                                       to->o.edge_features ? &st->edges : NULL, err)) ||
            (rc = task_load(&st->task, to, all - V, st->in.x0.cols, err)) ||
            (V && (rc = task_add_virtual(&st->task, V, err))) ||
            (to->save && (rc = save_fits(to->save, st->in.n_layers, err))))
            return rc;
        cx->task = &st->task;
        st->task_virtual = V;
    }
    if ((rc = edge_bias_load(&st->edge_bias, &st->src, to->o.edge_bias, err)))
        return rc;
    if ((rc = model_init(&st->model, &st->in, to, &st->task, st->edge_bias, err)))
        return rc;
    if (k == 0 && !to->o.quiet) {   /* the setup, once the first model is made */
        if (cx->single)
            source_print(&st->src);
        print_setup(to, &st->in, &st->task, cx->threads);
        fflush(stdout);
    }
    ag_nbhd_t *nb = &st->src.nb;
    if (st->n_layer_specs) {   /* a graph a round, over the connectivity */
        int64_t v;
        const int R = st->n_layer_specs;
        if ((rc = ag_i_layer_graphs(st->layer_graphs, 2 * R, R, &st->src.nb, st->layer_spec,
                                    to->o.src.self, &v, err)))
            return rc;
        st->model.ro.graphs = st->layer_graphs;
        st->model.ro.global_graphs = st->layer_graphs + R;
        nb = st->layer_graphs[0];
    }
    whole_epoch_t w = {&st->model, nb, st->in.x0.data, &st->task};
    rc = train_epochs(cx, whole_epoch, &w, st->src.nb.n_edges, st->model.lr, to->conns[k].name,
                      res, err);
    if (!rc && cx->single && !to->o.quiet)
        print_final(&st->task, res, to->epochs);
    if (!rc && cx->single)
        return rc;   /* the one model: one_predict and one_save read it */
    model_free(&st->model);
    ag_layer_graphs_free(st->layer_graphs, 2 * st->n_layer_specs);
    free(st->edge_bias);
    st->edge_bias = NULL;
    source_close(&st->src);
    return rc;
}

/* The single model's --predict: the readout's classes. */
static int one_predict(train_backend_t *b, out_file_t *out, ag_error_t *err)
{
    train_state_t *st = b->ctx;
    const int64_t N = st->model.N - st->task_virtual;   /* the input nodes */
    if (!(st->pred = ag_alloc(N, sizeof *st->pred, err, "predictions")))
        return ag_alloc_status();
    /* wr NULL: no readout, the states are the logits */
    ag_readout_predict(st->model.X, N, st->model.D, st->model.wr, st->model.br, st->model.C,
                       st->pred);
    return ag_npy_write_i64(out->file.path, st->pred, N, err);
}

/* The single model's --save folder: its arrays and what defines it. */
static int one_save(train_backend_t *b, ag_error_t *err)
{
    train_state_t *st = b->ctx;
    const train_opts_t *to = st->to;
    st->n_items = model_items(&st->model, st->items, st->names);
    const char *name;
    if (model_text(st->model_args, sizeof st->model_args, to, &st->in, &name) >=
        sizeof st->model_args)
        return ag_fail(err, AG_EINVAL, "--save: the model's options are longer than "
                       "%zu bytes (a long --edge-bias name?)", sizeof st->model_args - 1);
    st->items[st->n_items++] = (folder_item_t){.name = name, .text = st->model_args};
    return folder_write(to->save, "--save", st->items, st->n_items, err);
}

static void one_said_saved(train_backend_t *b)
{
    const train_state_t *st = b->ctx;
    printf("wrote %s:", st->to->save);
    for (int k = 0; k < st->n_items; k++)
        printf(" %s", st->items[k].name);
    putchar('\n');
}

static void one_report_end(train_backend_t *b)
{
    const train_state_t *st = b->ctx;
    if (st->to->save && st->task.C)
        print_run_hint(st->to, &st->in);
}

/* --svg: the training curve of the log kept in memory (csv, len) into out. */
static int write_train_curve(const train_opts_t *to, const char *csv, size_t len,
                             out_file_t *out, ag_error_t *err)
{
    char title[1024];
    const int n = to->n_conns;
    snprintf(title, sizeof title, "training: %s%s", to->conns[0].name,
             n == 1 ? "" : n == 2 ? " and one more connectivity" : " and other connectivities");
    char *svg = NULL;
    int rc = draw_train_csv(csv, len, "--svg", title, &svg, err);
    if (!rc)
        rc = out_write_text(out, svg, err);
    ag_svg_free(svg);
    return rc;
}

/* rc, as b agrees it (one process: as it is). */
static int agreed(train_backend_t *b, int rc, int *usage, ag_error_t *err)
{
    return b->agree ? b->agree(b, rc, usage, err) : rc;
}

int train_with(const train_opts_t *to, int threads, train_backend_t *b)
{
    const int root = b->rank == 0;
    ag_error_t err = {AG_OK, ""};
    int usage = 0;
    enum { LOG, PREDICT, SVG, N_OUTS };
    out_file_t outs[N_OUTS];
    out_init(&outs[LOG], to->log, "--log", "csv");
    out_init(&outs[PREDICT], to->predict, "--predict", "npy");
    out_init(&outs[SVG], to->svg, "--svg", "svg");
    /* outputs first (rank 0's): a bad path fails before any work */
    int rc = root && to->save ? folder_check(to->save, "--save", &err) : AG_OK;
    if (!rc && root)
        rc = out_open_all(outs, N_OUTS, &usage, &err);
    run_ctx_t cx = {to, NULL, to->n_conns == 1, threads, root, NULL, NULL, {0}};
    char *curve = NULL;   /* --svg: the log as CSV text */
    size_t curve_len = 0;
    if (!rc && root && to->log && !(cx.log = fopen(outs[LOG].file.path, "w")))
        rc = ag_fail(&err, AG_EIO, "%s: cannot write", to->log);
    if (!rc && root && to->svg && !(cx.curve = open_memstream(&curve, &curve_len)))
        rc = ag_fail(&err, AG_ENOMEM, "--svg: out of memory");
    if (cx.log)
        fputs(TRAIN_LOG_HEADER, cx.log);
    if (cx.curve)
        fputs(TRAIN_LOG_HEADER, cx.curve);
    rc = agreed(b, rc, &usage, &err);
    cx.progress.tty = isatty(STDERR_FILENO);
    cx.progress.show = b->progress && (to->o.progress == 1 ||
                                       (to->o.progress < 0 && !to->o.quiet && cx.progress.tty));
    outcome_t res[TRAIN_MAX_CONNS];
    for (int k = 0; k < to->n_conns && !rc; k++) {
        int u = 0;
        rc = b->connectivity(b, &cx, k, &res[k], &u, &err);
        usage = usage || u;
    }
    if (cx.log && fclose(cx.log) != 0 && !rc)
        rc = ag_fail(&err, AG_EIO, "%s: write failed", to->log);
    if (cx.curve && fclose(cx.curve) != 0 && !rc)
        rc = ag_fail(&err, AG_ENOMEM, "--svg: out of memory");
    rc = agreed(b, rc, NULL, &err);
    /* --predict and --save go with one connectivity (parse_train says so) */
    if (!rc && to->predict)
        rc = b->predict(b, &outs[PREDICT], &err);
    if (!rc && to->svg)
        rc = agreed(b, root ? write_train_curve(to, curve, curve_len, &outs[SVG], &err) : AG_OK,
                    NULL, &err);
    if (!rc && to->save)
        rc = b->save(b, &err);
    if (!rc)
        rc = agreed(b, root ? out_commit_all(outs, N_OUTS, &err) : AG_OK, NULL, &err);
    if (!rc && root && !to->o.quiet && !cx.single) {
        printf("trained on %d connectivities of %lld nodes\n", to->n_conns,
               (long long)cx.task->N);
        print_table(to, cx.task, res);
    }
    if (!rc && root && !to->o.quiet) {
        if (to->save)
            b->said_saved(b);
        out_say_written(outs, N_OUTS);
        if (b->report_end)
            b->report_end(b);
    }
    if (rc && root)
        out_abort_all(outs, N_OUTS, &err);
    free(curve);
    return finish("train", rc, usage, &err);
}

int cmd_train(int argc, char **argv)
{
#ifdef __GLIBC__
    /* every epoch allocates and frees the same large buffers (the tape, the
       backward's): keep them in the heap rather than fresh zeroed pages */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    train_opts_t to;
    int status = parse_train(&to, argc, argv);
    if (status >= 0)
        return status;
    const int threads = ag_set_threads((int)to.o.threads);
    train_state_t *st = calloc(1, sizeof *st);
    if (!st) {
        fprintf(stderr, "attngraph: out of memory\n");
        return EXIT_BAD_INPUT;
    }
    st->to = &to;
    train_backend_t one = {.rank = 0, .progress = 1, .connectivity = one_connectivity,
                           .predict = one_predict, .save = one_save,
                           .said_saved = one_said_saved, .report_end = one_report_end, .ctx = st};
    status = train_with(&to, threads, &one);
    model_free(&st->model);
    ag_layer_graphs_free(st->layer_graphs, 2 * st->n_layer_specs);
    free(st->edge_bias);
    ag_matrix_destroy(&st->edges);
    free(st->pred);
    source_close(&st->src);
    task_free(&st->task);
    inputs_free(&st->in);
    ag_matrix_destroy(&st->x0);
    free(st);
    return status;
}
