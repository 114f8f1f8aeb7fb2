/* What `attngraph train` says: the epoch lines, progress, the log, the final figures,
   the comparison table and the run command that predicts with the saved model. */
#include <math.h>
#include <stdio.h>

#include "cli/timing.h"
#include "cli/train.h"

double pct(int64_t n, int64_t of)
{
    return of ? 100.0 * (double)n / (double)of : NAN;
}

double figure(const task_t *t, const epoch_t *f, int which)
{
    if (t->auc)
        return 100 * f->auc[which];
    const int64_t correct[3] = {f->train_correct, f->eval_correct, f->test_correct};
    const int64_t of[3] = {t->n_train, t->n_eval, t->n_test};
    return pct(correct[which], of[which]);
}

/* The best eval figure in percent (outcome_t.best: correct nodes or the AUC). */
static double best_pct(const task_t *t, const outcome_t *r)
{
    return t->auc ? 100 * r->best : pct((int64_t)r->best, t->n_eval);
}

/* "epoch 37/200: loss 0.51, train 85.0%, eval 80.2%, 1.2 s", at most every 0.1 s
   (rewritten on a terminal; a line a second with --progress elsewhere). */
void progress_line(epoch_progress_t *p, const char *conn, int64_t e, int64_t epochs,
                          const epoch_t *f, const task_t *t)
{
    const double now = now_s();
    if (!p->show || now - p->last < (p->tty ? 0.1 : 1.0))
        return;
    p->last = now;
    fprintf(stderr, "%s%s%sepoch %lld/%lld: loss %.4g", p->tty ? "\r\033[K" : "progress: ",
            conn ? conn : "", conn ? ": " : "", (long long)e, (long long)epochs, f->loss);
    const char *unit = t->auc ? " AUC" : "%";
    if (t->C)
        fprintf(stderr, ", train %.1f%s", figure(t, f, 0), unit);
    if (t->C && t->eval)
        fprintf(stderr, ", eval %.1f%s", figure(t, f, 1), unit);
    fprintf(stderr, ", %.1f s%s", now - p->t0, p->tty ? "" : "\n");
    p->open_line = p->tty;
    fflush(stderr);
}

void progress_clear(epoch_progress_t *p)
{
    if (p->open_line)
        fputs("\r\033[K", stderr);
    p->open_line = 0;
}

void print_row(const task_t *t, int64_t e, const epoch_t *f)
{
    printf("%5lld  %10.4g", (long long)e, f->loss);
    if (t->C) {
        printf(t->auc ? "  %9.2f" : "  %8.1f%%", figure(t, f, 0));
        if (t->eval)
            printf(t->auc ? "  %9.2f" : "  %8.1f%%", figure(t, f, 1));
    } else if (t->eval) {
        printf("  %10.4g", f->eval_loss);
    }
    putchar('\n');
}

void print_row_header(const task_t *t)
{
    printf("epoch        loss");
    if (t->C && t->auc)
        printf("  train_auc%s", t->eval ? "   eval_auc" : "");
    else if (t->C)
        printf("  train_acc%s", t->eval ? "   eval_acc" : "");
    else if (t->eval)
        printf("   eval_loss");
    putchar('\n');
}

static void csv_value(FILE *f, double x)
{
    if (isnan(x))
        fputc(',', f);
    else
        fprintf(f, ",%.9g", x);
}

void log_row(FILE *f, const char *conn, const task_t *t, int64_t e, const epoch_t *ep)
{
    csv_field(f, conn);
    fprintf(f, ",%lld", (long long)e);
    csv_value(f, ep->loss);
    csv_value(f, t->C ? pct(ep->train_correct, t->n_train) / 100 : NAN);
    csv_value(f, ep->eval_loss);
    csv_value(f, t->C && t->eval ? pct(ep->eval_correct, t->n_eval) / 100 : NAN);
    csv_value(f, ep->grad_norm);
    csv_value(f, ep->test_loss);
    csv_value(f, t->C && t->test ? pct(ep->test_correct, t->n_test) / 100 : NAN);
    for (int k = 0; k < 3; k++)
        csv_value(f, t->auc ? ep->auc[k] : NAN);
    fputc('\n', f);
}

void print_final(const task_t *t, const outcome_t *r, int64_t epochs)
{
    printf("final (epoch %lld): loss %.4g", (long long)epochs, r->final.loss);
    if (t->C && t->auc) {
        printf(", train ROC AUC %.2f", figure(t, &r->final, 0));
        if (t->eval)
            printf(", eval ROC AUC %.2f; best eval ROC AUC %.2f at epoch %lld",
                   figure(t, &r->final, 1), best_pct(t, r), (long long)r->best_epoch);
    } else if (t->C) {
        printf(", train accuracy %.1f%% (%lld/%lld)", pct(r->final.train_correct, t->n_train),
               (long long)r->final.train_correct, (long long)t->n_train);
        if (t->eval)
            printf(", eval accuracy %.1f%% (%lld/%lld); best eval accuracy %.1f%% at epoch %lld",
                   pct(r->final.eval_correct, t->n_eval), (long long)r->final.eval_correct,
                   (long long)t->n_eval, pct((int64_t)r->best, t->n_eval),
                   (long long)r->best_epoch);
    } else if (t->eval) {
        printf(", eval loss %.4g; best eval loss %.4g at epoch %lld", r->final.eval_loss,
               r->best, (long long)r->best_epoch);
    }
    if (t->test && t->auc)
        printf("; test ROC AUC %.2f at epoch %lld", figure(t, &r->at_best, 2),
               (long long)r->best_epoch);
    else if (t->test && t->C)
        printf("; test accuracy %.1f%% (%lld/%lld) at epoch %lld",
               pct(r->at_best.test_correct, t->n_test), (long long)r->at_best.test_correct,
               (long long)t->n_test, (long long)r->best_epoch);
    else if (t->test)
        printf("; test loss %.4g at epoch %lld", r->at_best.test_loss, (long long)r->best_epoch);
    printf("\n%lld epochs in %.2f s (%.1f epochs/s)\n", (long long)epochs, r->seconds,
           r->seconds > 0 ? (double)epochs / r->seconds : 0.0);
}

void print_table(const train_opts_t *to, const task_t *t, const outcome_t *res)
{
    printf("%-24s %10s %10s", "connectivity", "edges", "loss");
    if (t->C)
        printf(" %9s%s", t->auc ? "train_auc" : "train_acc",
               !t->eval ? "" : t->auc ? "  eval_auc  best_eval  at_epoch"
                                     : "  eval_acc  best_eval  at_epoch");
    else if (t->eval)
        printf(" %10s %10s  at_epoch", "eval_loss", "best_eval");
    if (t->test)
        printf(" %9s", t->auc ? "test_auc" : t->C ? "test_acc" : "test_loss");
    printf(" %8s\n", "time_s");
    for (int k = 0; k < to->n_conns; k++) {
        const outcome_t *r = &res[k];
        printf("%-24.24s %10lld %10.4g", to->conns[k].name, (long long)r->edges, r->final.loss);
        if (t->C && t->auc) {
            printf(" %9.2f", figure(t, &r->final, 0));
            if (t->eval)
                printf(" %9.2f %10.2f %9lld", figure(t, &r->final, 1), best_pct(t, r),
                       (long long)r->best_epoch);
        } else if (t->C) {
            printf(" %8.1f%%", pct(r->final.train_correct, t->n_train));
            if (t->eval)
                printf(" %8.1f%% %9.1f%% %9lld", pct(r->final.eval_correct, t->n_eval),
                       pct((int64_t)r->best, t->n_eval), (long long)r->best_epoch);
        } else if (t->eval) {
            printf(" %10.4g %10.4g %9lld", r->final.eval_loss, r->best, (long long)r->best_epoch);
        }
        if (t->test && t->auc)
            printf(" %9.2f", figure(t, &r->at_best, 2));
        else if (t->test && t->C)
            printf(" %8.1f%%", pct(r->at_best.test_correct, t->n_test));
        else if (t->test)
            printf(" %9.4g", r->at_best.test_loss);
        printf(" %8.2f\n", r->seconds);
    }
}

void print_setup(const train_opts_t *to, const inputs_t *in, const task_t *t,
                        int threads)
{
    static const char *const opt_names[] = {"adam", "adamw", "sgd"};
    const run_opts_t *o = &to->o;
    if (o->model.spec.n_layers) {   /* the widths layer by layer: 1433 -> 64 -> 7 */
        if (o->model.spec.rounds)
            printf("train: %lld round%s of one layer of %s (widths %lld", (long long)in->rounds,
                   AG_PLURAL(in->rounds), o->model.path, (long long)in->x0.cols);
        else
            printf("train: %d layer%s of %s (widths %lld", o->model.spec.n_layers,
                   AG_PLURAL(o->model.spec.n_layers), o->model.path, (long long)in->x0.cols);
        for (int k = 0; k < in->n_layers; k++)
            printf(" -> %lld", (long long)ag_layer_width_out(&in->layers[k]));
        printf("%s, %s scores, %s, seed %llu); ", o->model.spec.readout ? ", linear readout" : "",
               ag_score_kind_name(in->score.kind), o->weights ? "weights from file" : "random weights",
               (unsigned long long)o->seed);
    } else {
        printf("train: %lld round%s (D=%lld, %lld head%s of width %lld, %s scores, %s, seed "
               "%llu); ", (long long)in->rounds, AG_PLURAL(in->rounds), (long long)in->x0.cols,
               (long long)in->H, AG_PLURAL(in->H), (long long)in->d, ag_score_kind_name(in->score.kind),
               o->weights ? "weights from file" : "random weights", (unsigned long long)o->seed);
    }
    if (t->C)
        printf("%lld classes, %lld train", (long long)t->C, (long long)t->n_train);
    else
        printf("targets, %lld train", (long long)t->n_train);
    if (t->eval)
        printf("%s %lld eval", t->test ? "," : " and", (long long)t->n_eval);
    if (t->test)
        printf(" and %lld test", (long long)t->n_test);
    printf(" node%s; %s, lr %g, ", AG_PLURAL(t->test ? t->n_test : t->eval ? t->n_eval
                                                                           : t->n_train),
           opt_names[to->opt.kind], (double)to->opt.lr);
    if (to->dropout[0] > 0 || to->dropout[1] > 0)
        printf("dropout %g, attention dropout %g, ", (double)to->dropout[0],
               (double)to->dropout[1]);
    if (to->dropout[2] > 0)
        printf("residual dropout %g, ", (double)to->dropout[2]);
    printf("%lld epoch%s, %d thread%s\n", (long long)to->epochs, AG_PLURAL(to->epochs), threads,
           AG_PLURAL(threads));
}

/* The run command that predicts with the saved model. */
void print_run_hint(const train_opts_t *to, const inputs_t *in)
{
    const run_opts_t *o = &to->o;
    const train_conn_t *c = &to->conns[0], *g = to->operand.name ? &to->operand : NULL;
    printf("predict with: attngraph run ");
    if (g && c->kind == 1)   /* a pattern over the graph file or CSR */
        printf("%s%s ", g->kind == 2 ? "--csr " : "", g->name);
    printf("%s%s%s", c->kind == 1 ? "--pattern '" : c->kind == 2 ? "--csr " : "", c->name,
           c->kind == 1 ? "'" : "");
    if (c->kind == 1 && !g)
        printf(" --nodes %lld", (long long)in->N);
    char args[1024] = "";   /* a model file's options are in DIR/model.txt */
    if (!o->model.spec.n_layers)
        model_args(args, sizeof args, o, in->H, in->rounds);
    printf(" --features %s --weights %s%s%s", o->features, to->save, *args ? " " : "", args);
    if (o->src.self != AG_SELF_KEEP && !o->model.spec.n_layers)
        printf(" --self-loops %s", ag_self_loops_name(o->src.self));
    if (o->src.direction != AG_EDGES_AUTO && !o->model.spec.n_layers)
        printf(" --%s", o->src.direction == AG_EDGES_UNDIRECTED ? "undirected" : "directed");
    if (o->src.format)
        printf(" --format %s", o->src.format);
    if (o->edge_features)
        printf(" --edge-features %s", o->edge_features);
    printf(" --predict FILE.npy\n");
}
