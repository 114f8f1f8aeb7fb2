/* `attngraph draw rounds` and `draw train`: curves from the CSV files runs write. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/csv_table.h"
#include "base/base.h"

#define MAX_CONNS 16

/* draw train's --held-out, which draw rounds refuses naming it. */
static const opt_def_t held_out_refused[] = {OPT_FLAG("held-out", OPT_HELD_OUT, NULL),
                                             OPT_DEF_END};

static const opt_def_t rounds_options[] = {
    OPT_PROSE("usage: attngraph draw rounds TRACE.csv --out FILE.svg   (TRACE.csv may be -: stdin)\n"
              "\n"
              "Draws the convergence of rounds from the CSV that 'attngraph run --trace' writes\n"
              "(round,change,entropy,max_weight): the change per round on a log scale, and the\n"
              "mean attention entropy.\n"),
    OPT_VALUE("out", OPT_OUT, "  --out FILE.svg      the picture (- : standard output)\n"),
    OPT_VALUE("title", OPT_TITLE,
              "  --title TEXT        the line above the picture (default: names the file)\n"),
    OPT_PROSE("  -h, --help          this text\n"),
    OPT_TABLE_UNLISTED(held_out_refused),
    OPT_DEF_END,
};

static const opt_def_t train_options[] = {
    OPT_PROSE("usage: attngraph draw train LOG.csv --out FILE.svg      (LOG.csv may be -: stdin)\n"
              "\n"
              "Draws the training curve from the CSV that 'attngraph train --log' writes\n"
              "(connectivity,epoch,loss,train_accuracy,eval_loss,eval_accuracy,...) or 'attngraph\n"
              "lm train --log' (pattern,step,train_loss,val_loss,...): the loss per epoch or step\n"
              "(training solid, evaluation dashed; a log scale when it spans more than a decade;\n"
              "either alone when the other column is left out), and beside it the accuracy when\n"
              "the log has any; one colour per connectivity or pattern.\n"),
    OPT_VALUE("out", OPT_OUT, "  --out FILE.svg      the picture (- : standard output)\n"),
    OPT_FLAG("held-out", OPT_HELD_OUT,
             "  --held-out          the evaluation (validation) curves only\n"),
    OPT_VALUE("title", OPT_TITLE,
              "  --title TEXT        the line above the picture (default: names the file)\n"),
    OPT_PROSE("  -h, --help          this text\n"),
    OPT_DEF_END,
};

/* Parses `draw KIND FILE.csv --out F.svg` (held_out not NULL: --held-out
   too); -1 to go on, else an exit status. */
static int parse_csv_command(const char *cmd, const opt_def_t *options, int argc, char **argv,
                             const char **in, const char **out, const char **title,
                             int *held_out)
{
    opt_parser_t p;
    opt_begin(&p, cmd, options, argc, argv);
    int c;
    while ((c = opt_next(&p)) > 0)
        if (c == OPT_OUT)
            *out = p.arg;
        else if (c == OPT_TITLE)
            *title = p.arg;
        else if (c == OPT_HELD_OUT && held_out)
            *held_out = 1;
        else if (c == OPT_HELD_OUT)
            return usage_error(cmd, "--held-out draws a training log's curves (draw train)");
    if (c < 0)
        return p.status;
    if (opt_positional(&p, 1))
        return EXIT_USAGE;
    if (!p.n_pos)
        return usage_error(cmd, "give the CSV file to draw");
    if (!*out)
        return usage_error(cmd, "give the picture's file: --out FILE.svg");
    *in = p.pos[0];
    return -1;
}

/* Opens --out, makes the picture with make(), writes and commits it. */
static int draw_csv_file(const char *cmd, const char *in, const char *target, const char *title,
                         int held_out,
                         int (*make)(const csv_t *, const char *, int, char **, ag_error_t *))
{
    ag_error_t err = {AG_OK, ""};
    int usage = 0;
    out_file_t out;
    csv_t t;
    memset(&t, 0, sizeof t);
    char *svg = NULL;
    out_init(&out, target, "--out", "svg");
    int rc = out_open_all(&out, 1, &usage, &err);
    if (!rc)
        rc = csv_read(&t, in, &err);
    if (!rc)
        rc = make(&t, title, held_out, &svg, &err);
    if (!rc)
        rc = out_write_text(&out, svg, &err);
    if (!rc)
        rc = out_commit(&out, &err);
    if (!rc && !out.is_stdout)
        printf("wrote %s\n", target);
    if (rc) {
        out_name_errors(&out, 1, &err);
        out_abort(&out);
    }
    ag_svg_free(svg);
    csv_free(&t);
    return finish(cmd, rc, usage, &err);
}

static int make_rounds(const csv_t *t, const char *given, int held_out, char **svg,
                       ag_error_t *err)
{
    (void)held_out;
    const int cr = csv_column(t, "round", 1, err);
    const int cc = cr < 0 ? -1 : csv_column(t, "change", 1, err);
    const int ce = cc < 0 ? -1 : csv_column(t, "entropy", 1, err);
    if (ce < 0)
        return AG_EFORMAT;
    if (!t->n_rows)
        return ag_fail(err, AG_EFORMAT, "%s: no rounds in it (a header only)", t->path);
    double *v = ag_alloc(3 * t->n_rows, sizeof *v, err, "rounds");
    if (!v)
        return ag_alloc_status();
    double *round = v, *change = v + t->n_rows, *entropy = v + 2 * t->n_rows;
    int rc = AG_OK;
    for (int64_t r = 0; r < t->n_rows && !rc; r++)
        if (!(rc = csv_number(t, r, cr, &round[r], err)) &&
            !(rc = csv_number(t, r, cc, &change[r], err)))
            rc = csv_number(t, r, ce, &entropy[r], err);
    char title[1024];
    snprintf(title, sizeof title, given ? "%s" : "convergence of rounds: %s",
             given ? given : t->path);
    if (!rc)
        rc = ag_draw_rounds(svg, round, change, entropy, t->n_rows, title, err);
    free(v);
    return rc;
}

int cmd_draw_rounds(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *title = NULL;
    int status = parse_csv_command("draw rounds", rounds_options, argc, argv, &in, &out, &title,
                                   NULL);
    return status >= 0 ? status : draw_csv_file("draw rounds", in, out, title, 0, make_rounds);
}

/* The series of one connectivity: rows in file order. */
typedef struct {
    const char *name;
    char label[4][300];      /* legend: "NAME train", ... */
    double *epoch, *y[4];    /* loss, eval_loss, train_accuracy, eval_accuracy */
    int64_t n;
} conn_curve_t;

/* held_out: the evaluation curves only. */
static int make_train(const csv_t *t, const char *given, int held_out, char **svg,
                      ag_error_t *err)
{
    /* train --log's names, then lm train --log's */
    static const char *const cols[5][2] = {{"epoch", "step"}, {"loss", "train_loss"},
                                           {"eval_loss", "val_loss"}, {"train_accuracy", NULL},
                                           {"eval_accuracy", NULL}};
    int c[5];
    for (int k = 0; k < 5; k++) {
        c[k] = csv_column(t, cols[k][0], 0, err);
        if (c[k] < 0 && cols[k][1])
            c[k] = csv_column(t, cols[k][1], 0, err);
    }
    if (c[0] < 0 || (c[1] < 0 && c[2] < 0))
        return ag_fail(err, AG_EFORMAT, "%s: no column %s; expected epoch or step, and loss, "
                       "eval_loss, train_loss or val_loss", t->path,
                       c[0] < 0 ? "epoch (or step)" : "of losses");
    const char *x_name = csv_column(t, "epoch", 0, err) >= 0 ? "epoch" : "step";
    const char *held_name = csv_column(t, "val_loss", 0, err) >= 0 ? "validation" : "evaluation";
    if (held_out && c[2] < 0)
        return ag_fail(err, AG_EFORMAT, "%s: --held-out: no column eval_loss or val_loss",
                       t->path);
    if (held_out)   /* the training columns left out */
        c[1] = c[3] = -1;
    int cconn = csv_column(t, "connectivity", 0, err);
    if (cconn < 0)
        cconn = csv_column(t, "pattern", 0, err);
    if (!t->n_rows)
        return ag_fail(err, AG_EFORMAT, "%s: no %ss in it (a header only)", t->path, x_name);
    conn_curve_t *cv = ag_calloc(MAX_CONNS, sizeof *cv, err, "train curve");
    double *v = ag_alloc(5 * t->n_rows, sizeof *v, err, "train curve");
    int rc = cv && v ? AG_OK : ag_alloc_status();
    int n_conns = 0, any[4] = {0, 0, 0, 0};
    for (int64_t r = 0; r < t->n_rows && !rc; r++) {
        const char *name = cconn >= 0 ? t->cells[r * t->n_cols + cconn] : "";
        int k = 0;
        while (k < n_conns && strcmp(cv[k].name, name))
            k++;
        if (k == n_conns) {   /* a connectivity not seen yet */
            if (n_conns == MAX_CONNS) {
                rc = ag_fail(err, AG_ELIMIT, "%s: more than %d connectivities", t->path,
                             MAX_CONNS);
                break;
            }
            cv[n_conns++].name = name;
        }
    }
    /* each connectivity's rows are contiguous slices of v, in file order */
    int64_t at = 0;
    for (int k = 0; k < n_conns && !rc; k++) {
        conn_curve_t *q = &cv[k];
        q->epoch = v + at;
        for (int j = 0; j < 4; j++)
            q->y[j] = v + (j + 1) * t->n_rows + at;
        for (int64_t r = 0; r < t->n_rows && !rc; r++) {
            if (cconn >= 0 && strcmp(t->cells[r * t->n_cols + cconn], q->name))
                continue;
            rc = csv_number(t, r, c[0], &q->epoch[q->n], err);
            for (int j = 0; j < 4 && !rc; j++) {   /* loss, eval_loss, accuracies */
                q->y[j][q->n] = NAN;
                if (c[j + 1] >= 0)
                    rc = csv_number(t, r, c[j + 1], &q->y[j][q->n], err);
                any[j] |= !rc && isfinite(q->y[j][q->n]);
            }
            q->n++;
        }
        at += q->n;
        const char *const what[4] = {"training", held_name, "training", "evaluation"};
        for (int j = 0; j < 4; j++)
            snprintf(q->label[j], sizeof q->label[j], "%s%s%s", q->name, *q->name ? " " : "",
                     what[j]);
    }
    ag_series_t series[2][2 * MAX_CONNS];
    int n_series[2] = {0, 0};
    double lo = INFINITY, hi = 0;
    for (int k = 0; k < n_conns && !rc; k++)
        for (int j = 0; j < 4; j++) {
            if (!any[j])
                continue;
            const int panel = j / 2;
            series[panel][n_series[panel]++] = (ag_series_t){cv[k].label[j], cv[k].epoch,
                                                             cv[k].y[j], cv[k].n, j % 2,
                                                             k % 10 + 1};
            for (int64_t i = 0; panel == 0 && i < cv[k].n; i++)
                if (cv[k].y[j][i] > 0)
                    lo = fmin(lo, cv[k].y[j][i]), hi = fmax(hi, cv[k].y[j][i]);
        }
    /* a connectivity's training and evaluation curves share its colour */
    const ag_panel_t panels[2] = {
        {"loss", x_name, "loss", hi > 10 * lo, series[0], n_series[0]},
        {"accuracy", x_name, "accuracy", 0, series[1], n_series[1]},
    };
    char title[1024];
    snprintf(title, sizeof title, given ? "%s" : "training: %s", given ? given : t->path);
    if (!rc)
        rc = ag_draw_panels(svg, panels, n_series[1] ? 2 : 1, title, err);
    free(cv), free(v);
    return rc;
}

int draw_train_csv(const char *text, size_t len, const char *name, const char *title,
                   char **svg, ag_error_t *err)
{
    char *buf = ag_alloc((int64_t)len + 1, 1, err, "training curve");
    if (!buf)
        return ag_alloc_status();
    memcpy(buf, text, len);
    buf[len] = '\0';
    csv_t t;
    int rc = csv_parse(&t, buf, len, name, err);
    if (!rc)
        rc = make_train(&t, title, 0, svg, err);
    csv_free(&t);
    return rc;
}

int cmd_draw_train(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *title = NULL;
    int held_out = 0;
    int status = parse_csv_command("draw train", train_options, argc, argv, &in, &out, &title,
                                   &held_out);
    return status >= 0 ? status
                       : draw_csv_file("draw train", in, out, title, held_out, make_train);
}
