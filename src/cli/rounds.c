/*
 * Running the inputs on a connectivity: raw attention or message rounds, with
 * what the options ask of each round (convergence figures, --until, saved
 * states, the attention of one round kept for reporting).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "base/base.h"
#include "cli/progress.h"
#include "model/model.h"

typedef struct {
    result_t *r;
    const run_opts_t *o;
    int figures, per_node;
    FILE *trace;              /* CSV, or NULL */
    ag_error_t *err;
    progress_t *progress;
    int64_t N;                /* the graph's nodes: the states saved (not a layer's virtual ones) */
} tracer_t;

/* Writes X [N, D] as DIR/round-R.npy, whole or not at all. */
int save_round(const char *dir, int round, const float *X, int64_t N, int64_t D,
               ag_error_t *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/round-%d.npy", dir, round);
    out_file_t f;
    int rc = out_open(&f, path, "--save-rounds", NULL, err);
    if (!rc)
        rc = ag_npy_write_f32(f.file.path, X, N, D, err);
    if (!rc)
        rc = out_commit(&f, err);
    if (rc) {
        out_name_errors(&f, 1, err);
        out_abort(&f);
    }
    return rc;
}

static int on_round(const ag_round_t *round, void *ctx)
{
    tracer_t *t = ctx;
    result_t *r = t->r;
    const ag_workspace_t *ws = round->ws;
    r->score = *round->score;            /* the last round's, unless kept below */
    if (round->round == t->o->attn_round) {
        memcpy(r->Q_kept, ws->Q, (size_t)(ws->N * ws->HD) * sizeof(float));
        memcpy(r->K_kept, ws->K, (size_t)(ws->N * ws->HD) * sizeof(float));
        r->Q = r->Q_kept;
        r->K = r->K_kept;
        r->kept_score = r->score;
        if (t->per_node) {
            memcpy(r->entropy_kept, round->entropy, (size_t)(ws->N * round->w->H) * sizeof(float));
            memcpy(r->distance_kept, round->distance,
                   (size_t)(ws->N * round->w->H) * sizeof(float));
        }
    }
    int rc = AG_OK;
    progress_round(t->progress, round->round);
    trace_row_t *row = &r->trace[round->round - 1];
    row->round = round->round;
    if (t->figures && (rc = ag_round_figures(round, &row->f, t->err)))
        return rc;
    if (t->trace)
        fprintf(t->trace, "%d,%.9g,%.9g,%.9g\n", round->round, row->f.change, row->f.entropy,
                row->f.max_weight);
    if (t->o->save_rounds &&
        (rc = save_round(t->o->save_rounds, round->round, round->X, t->N,
                         ag_layer_width_out(round->w), t->err)))
        return rc;
    if (t->o->until > 0 && row->f.change < t->o->until)
        return AG_STOP;
    return AG_OK;
}

static void rounds_progress(int round, int64_t done, int64_t total, void *ctx)
{
    progress_attention(round, done, total, ((tracer_t *)ctx)->progress);
}

static void raw_progress(int64_t done, int64_t total, void *ctx)
{
    progress_attention(1, done, total, ctx);
}

/* The run as the library's model, for ag_model_run_ex: in's layers under the
   command's options. The positions are added already (inputs.c) and the one
   graph is shaped (source.c), so the model does neither; the readout is
   --predict's. */
static void run_model(ag_model_t *m, const inputs_t *in, const run_opts_t *o)
{
    memset(m, 0, sizeof *m);
    if (o->model.spec.n_layers)
        m->spec = o->model.spec;   /* its layers' own graphs (graph=, global=) */
    else
        ag_model_spec_init(&m->spec);
    const int shared = in->n_layers == 1;
    m->spec.n_layers = shared ? 1 : (int)in->rounds;   /* the first R of a layer a round */
    m->spec.rounds = shared ? (int)in->rounds : 0;
    m->spec.score = in->score, m->spec.norm = o->norm;
    /* a graph a layer is compiled over the graph as read, with the self-loops the
       model's text says; one graph is shaped already */
    m->spec.self_loops = ag_model_spec_layer_graphs(&m->spec) ? o->src.self : AG_SELF_KEEP;
    m->spec.posenc = 0, m->spec.edge_bias[0] = '\0';
    m->D = in->x0.cols;
    m->edge_dim = in->edges ? in->edges->cols : 0;
    m->layers = in->layers;
}

static int run_rounds(result_t *r, const inputs_t *in, const source_t *src, const run_opts_t *o,
                      int figures, const char *trace_tmp, progress_t *progress, ag_error_t *err)
{
    const ag_nbhd_t *nb = &src->nb;
    const int64_t N = in->N;
    const int64_t HD = ag_i_layers_largest_hd(in->layers, in->n_layers);   /* a model
                                                                   file's layers differ */
    if (o->attn_round > in->rounds)
        return ag_fail(err, AG_EINVAL, "--attn-round %lld, but the run has %lld round%s",
                       (long long)o->attn_round, (long long)in->rounds, AG_PLURAL(in->rounds));
    if (o->attn_round && o->attn_round < in->rounds && o->model.spec.n_layers > 1)
        return ag_fail(err, AG_EINVAL, "--attn-round %lld: the layers of %s have heads of "
                       "their own; the reports read the last round's", (long long)o->attn_round,
                       o->model.path);
    memcpy(r->y, in->x0.data, (size_t)(N * in->x0.cols) * sizeof(float));
    int rc = AG_OK;
    r->trace = ag_calloc(in->rounds + 1, sizeof *r->trace, err, "trace");
    if (!r->trace)
        rc = ag_alloc_status();
    const int per_node = (figures & FIGURES_PER_NODE) != 0;
    if (!rc && o->attn_round) {
        r->Q_kept = ag_alloc(N * HD, sizeof(float), err, "--attn-round");
        r->K_kept = ag_alloc(N * HD, sizeof(float), err, "--attn-round");
        if (!r->Q_kept || !r->K_kept)
            rc = ag_alloc_status();
        if (!rc && per_node && (!(r->entropy_kept = ag_alloc(N * in->H, sizeof(float), err,
                                                              "--attn-round")) ||
                                !(r->distance_kept = ag_alloc(N * in->H, sizeof(float), err,
                                                               "--attn-round"))))
            rc = ag_alloc_status();
    }
    if (!rc && o->save_rounds && mkdir(o->save_rounds, 0777) != 0 && errno != EEXIST)
        rc = ag_fail(err, AG_EIO, "%s: cannot create the directory: %s", o->save_rounds,
                     strerror(errno));
    tracer_t t = {r, o, (figures & FIGURES_TRACE) || o->trace || o->until > 0, per_node, NULL,
                  err, progress, N};
    if (!rc && trace_tmp && !(t.trace = fopen(trace_tmp, "w")))
        rc = ag_fail(err, AG_EIO, "%s: cannot write: %s", o->trace, strerror(errno));
    if (t.trace)
        fputs("round,change,entropy,max_weight\n", t.trace);
    if (rc) {
        if (t.trace)
            fclose(t.trace);
        return rc;
    }
    /* the figures come from the kernels' own pass (ag_round_t's entropy) */
    ag_model_t m;
    run_model(&m, in, o);
    const ag_model_run_opts_t mo = {.on_round = on_round, .ctx = &t,
                                    .figures = per_node ? 2 : t.figures,
                                    .on_progress = progress->show ? rounds_progress : NULL,
                                    .edge_bias = r->edge_bias, .ws = &r->ws,
                                    .done = &r->rounds_done};
    if (in->rounds > 0)   /* --rounds 0: the readout alone, of the features */
        rc = ag_model_run_ex(&m, nb, r->y, in->edges ? in->edges->data : NULL, &mo, r->y, err);
    if (t.trace && fclose(t.trace) != 0 && !rc)
        rc = ag_fail(err, AG_EIO, "%s: write failed", o->trace);
    if (!rc && o->attn_round && o->attn_round > r->rounds_done)
        rc = ag_fail(err, AG_EINVAL, "--attn-round %lld, but --until stopped after round %d",
                     (long long)o->attn_round, r->rounds_done);
    if (!rc && ag_model_spec_layer_graphs(&m.spec)) {
        /* each layer's own graphs: no one graph's attention to report */
    } else if (!rc && r->rounds_done > 0 && !o->attn_round) {
        r->Q = r->ws.Q;
        r->K = r->ws.K;
        r->entropy = per_node ? r->ws.entropy : NULL;
        r->distance = per_node ? r->ws.distance : NULL;
    } else if (!rc && o->attn_round) {
        r->score = r->kept_score;
        r->entropy = r->entropy_kept;
        r->distance = r->distance_kept;
    }
    return rc;
}

int compute(result_t *r, const inputs_t *in, const source_t *src, const run_opts_t *o,
            int figures, const char *trace_tmp, ag_error_t *err)
{
    memset(r, 0, sizeof *r);
    const int64_t N = in->N, HD = in->H * in->d;
    r->cols = in->raw ? HD : in->x0.cols;
    int64_t room = r->cols;   /* the rounds' widest state */
    if (!in->raw && in->rounds > 0) {
        r->cols = ag_layer_width_out(&in->layers[in->n_layers == 1 ? 0 : in->rounds - 1]);
        room = ag_rounds_widest(in->layers, in->n_layers, (int)in->rounds);
    }
    r->y = ag_alloc(N * room, sizeof(float), err, "output");
    if (!r->y)
        return ag_alloc_status();
    int rc = AG_OK;
    progress_t progress;
    progress_begin(&progress, o->progress, o->quiet, in->raw ? 1 : (int)in->rounds);
    estimate_late(o, in, &src->nb);
    rc = edge_bias_load(&r->edge_bias, src, o->edge_bias, err);
    if (!rc && in->raw) {
        r->score = in->score;
        r->score.edge_bias = r->edge_bias;
        r->Q = in->q.data;
        r->K = in->k.data;
        r->rounds_done = 1;
        if ((figures & FIGURES_PER_NODE) &&
            (!(r->entropy_kept = ag_alloc(N * in->H, sizeof(float), err, "figures")) ||
             !(r->distance_kept = ag_alloc(N * in->H, sizeof(float), err, "figures"))))
            rc = ag_alloc_status();
        r->entropy = r->entropy_kept, r->distance = r->distance_kept;
        const ag_attention_opts_t ao = {.entropy = r->entropy_kept,
                                        .distance = r->distance_kept,
                                        .progress = progress.show ? raw_progress : NULL,
                                        .progress_ctx = &progress};
        if (!rc)
            rc = ag_attention_ex(&src->nb, in->q.data, in->k.data, in->v.data, in->H, in->d,
                             &r->score, r->y, &ao, err);
        progress_round(&progress, 1);
    } else if (!rc) {
        rc = run_rounds(r, in, src, o, figures, trace_tmp, &progress, err);
    }
    progress_end(&progress);
    /* finite inputs can still overflow float32 on the way (scores of 1e30-sized
       features): say so rather than write NaN with exit 0 */
    ag_error_t where;
    if (!rc && ag_check_finite(in->raw ? "the messages" : "the output states", r->y, N,
                               r->cols, &where))
        rc = ag_fail(err, AG_EINVAL, "%s; the computation overflowed float32: scale the "
                     "inputs down (the largest |value| should be far below 1e18)", where.msg);
    if (rc)
        result_free(r);
    return rc;
}

void result_free(result_t *r)
{
    free(r->y);
    free(r->Q_kept);
    free(r->K_kept);
    free(r->edge_bias);
    free(r->trace);
    free(r->entropy_kept);
    free(r->distance_kept);
    ag_workspace_destroy(&r->ws);
    memset(r, 0, sizeof *r);
}

void print_trace(const trace_row_t *trace, int done, const run_opts_t *o, int64_t rounds)
{
    printf("round      change   entropy  max_weight\n");
    for (int k = 0; k < done; k++)
        printf("%5d  %10.4g  %8.4f  %10.4f\n", trace[k].round, trace[k].f.change,
               trace[k].f.entropy, trace[k].f.max_weight);
    if (o->until > 0 && done < rounds)
        printf("converged after round %d: change %.3g < --until %g\n", done,
               trace[done - 1].f.change, o->until);
    else if (o->until > 0)
        printf("not converged in %lld round%s: change %.3g >= --until %g\n",
               (long long)rounds, AG_PLURAL(rounds), done ? trace[done - 1].f.change : 0.0,
               o->until);
}

/* --trace FILE.svg: the picture of the per-round figures. */
int write_trace_svg(out_file_t *out, const trace_row_t *trace, int done, const char *desc,
                    ag_error_t *err)
{
    const int64_t n = done;
    double *v = ag_alloc(3 * n + 1, sizeof *v, err, "--trace");
    if (!v)
        return ag_alloc_status();
    for (int64_t k = 0; k < n; k++) {
        v[k] = trace[k].round;
        v[n + k] = trace[k].f.change;
        v[2 * n + k] = trace[k].f.entropy;
    }
    char title[1024], *svg = NULL;
    snprintf(title, sizeof title, "convergence of rounds: %s", desc);
    int rc = ag_draw_rounds(&svg, v, v + n, v + 2 * n, n, title, err);
    if (!rc)
        rc = out_write_text(out, svg, err);
    ag_svg_free(svg);
    free(v);
    return rc;
}
