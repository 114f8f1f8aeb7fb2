/*
 * `attngraph compare`: the masking study. The same inputs (features, weights,
 * seed) run under each connectivity; a table says what changed against the
 * first: attention entropy and distance, and how far the outputs moved.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/base.h"

#define MAX_SOURCES 64
#define TOP_CHANGED 3
#define MASK_GRID 96            /* --svg: a mask's picture has at most this many blocks a side */

static const opt_def_t compare_options[] = {
    OPT_PROSE("usage: attngraph compare (--pattern SPEC | --graph FILE)... [options]\n"
              "\n"
              "Runs identical inputs under each connectivity (the first is the baseline) and\n"
              "prints, for each: edges, density, mean and min attention entropy (nats), mean\n"
              "attention distance |i-j| (patterns only: a graph file's node ids are not\n"
              "positions), and against the baseline: relative L2 difference of the outputs,\n"
              "mean cosine similarity per node, and the nodes that changed most.\n"
              "Every connectivity must have the same number of nodes, matched by node id; a\n"
              "pattern without --nodes, --tokens or a size of its own takes the first graph\n"
              "file's. Connectivities that label a node id differently are refused.\n"
              "--self-loops applies to every connectivity, graph files included (as in run).\n"
              "\n"),
    OPT_VALUES("pattern", OPT_PATTERN,
               "  --pattern SPEC      a pattern (see 'attngraph pattern --help'); repeatable\n"),
    OPT_VALUES("graph", OPT_GRAPH,
               "  --graph FILE        a graph file; repeatable, mixable with --pattern\n"),
    OPT_PROSE("\n"),
    OPT_TABLE(input_options),
    OPT_PROSE("\n"
              "Outputs:\n"),
    OPT_VALUE("csv", OPT_CSV, "  --csv FILE          the table as CSV\n"),
    OPT_VALUE("per-node", OPT_PER_NODE,
              "  --per-node FILE     per-node figures as CSV: connectivity,node,label,in_degree,\n"
              "                      entropy,distance,change,cosine\n"),
    OPT_VALUE("svg", OPT_SVG,
              "  --svg FILE.svg      a picture: the masks side by side, the table's figures as bars\n"),
    OPT_FLAG("quiet", OPT_QUIET, "  --quiet             print nothing on success\n"),
    OPT_HELP_LINE,
    OPT_PROSE("A FILE of - is standard output (the table then goes to stderr).\n"),
    OPT_DEF_END,
};

typedef struct {
    const char *name;         /* the spec or file, as given */
    int is_graph;
} conn_t;

/* Figures of one connectivity. */
typedef struct {
    int64_t edges;
    double density, ent_mean, ent_min, dist_mean, rel_l2, cos_mean;
    int64_t changed[TOP_CHANGED];
    double changed_by[TOP_CHANGED];
    int n_changed;
} figures_t;

/* Mean and min over the finite entries of x [n]. */
static void mean_min(const double *x, int64_t n, double *mean, double *min)
{
    double s = 0, m = INFINITY;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i])) {
            s += x[i];
            m = fmin(m, x[i]);
            k++;
        }
    *mean = k ? s / (double)k : NAN;
    *min = k ? m : NAN;
}

/* Per node: |y_i - y0_i| and cos(y_i, y0_i); totals into f. */
static void compare_outputs(figures_t *f, const float *y, const float *y0, int64_t N,
                            int64_t cols, double *change, double *cosine)
{
    double diff2 = 0, base2 = 0, cos_sum = 0;
    for (int64_t i = 0; i < N; i++) {
        double dd = 0, yy = 0, bb = 0, yb = 0;
        for (int64_t c = 0; c < cols; c++) {
            const double a = y[i * cols + c], b = y0[i * cols + c];
            dd += (a - b) * (a - b);
            yy += a * a, bb += b * b, yb += a * b;
        }
        change[i] = sqrt(dd);
        /* two zero rows agree; a zero row against a non-zero one does not */
        cosine[i] = yy == 0 && bb == 0 ? 1.0 : yy == 0 || bb == 0 ? 0.0 : yb / sqrt(yy * bb);
        diff2 += dd, base2 += bb, cos_sum += cosine[i];
        /* keep the TOP_CHANGED largest changes, largest first */
        int at = f->n_changed < TOP_CHANGED ? f->n_changed++ : TOP_CHANGED;
        while (at > 0 && f->changed_by[at - 1] < change[i]) {
            if (at < TOP_CHANGED)
                f->changed[at] = f->changed[at - 1], f->changed_by[at] = f->changed_by[at - 1];
            at--;
        }
        if (at < TOP_CHANGED)
            f->changed[at] = i, f->changed_by[at] = change[i];
    }
    f->rel_l2 = base2 > 0 ? sqrt(diff2 / base2) : (diff2 > 0 ? INFINITY : 0);
    f->cos_mean = cos_sum / (double)N;
}

static void print_number(FILE *f, double x, int width, int prec)
{
    if (isnan(x))
        fprintf(f, " %*s", width, "-");
    else
        fprintf(f, " %*.*f", width, prec, x);
}

static void print_row(const conn_t *c, const figures_t *f, const ag_labels_t *labels, int first)
{
    printf("%-28.28s %12lld %8.4f", c->name, (long long)f->edges, f->density);
    print_number(stdout, f->ent_mean, 7, 3);
    print_number(stdout, f->ent_min, 7, 3);
    print_number(stdout, f->dist_mean, 9, 2);
    print_number(stdout, first ? NAN : f->rel_l2, 7, 4);
    print_number(stdout, first ? NAN : f->cos_mean, 7, 4);
    printf("  ");
    for (int k = 0; !first && k < f->n_changed; k++) {
        char buf[AG_LABEL_NUMBER_SIZE];
        printf("%s'%s' %.3g", k ? ", " : "", ag_label(labels, f->changed[k], buf, sizeof buf),
               f->changed_by[k]);
    }
    printf("%s\n", first ? "(baseline)" : "");
}

static void csv_number(FILE *f, double x)
{
    if (isnan(x))
        fputs(",", f);
    else
        fprintf(f, ",%.9g", x);
}

static void csv_row(FILE *f, const conn_t *c, const figures_t *fig, const ag_labels_t *labels,
                    int64_t N, int first)
{
    csv_field(f, c->name);
    fprintf(f, ",%lld,%lld,%.9g", (long long)N, (long long)fig->edges, fig->density);
    csv_number(f, fig->ent_mean);
    csv_number(f, fig->ent_min);
    csv_number(f, fig->dist_mean);
    csv_number(f, first ? NAN : fig->rel_l2);
    csv_number(f, first ? NAN : fig->cos_mean);
    fputc(',', f);
    char changed[1024] = "";
    for (int k = 0; !first && k < fig->n_changed; k++) {
        size_t len = strlen(changed);
        char buf[AG_LABEL_NUMBER_SIZE];
        snprintf(changed + len, sizeof changed - len, "%s%s", k ? " " : "",
                 ag_label(labels, fig->changed[k], buf, sizeof buf));
    }
    csv_field(f, changed);
    fputc('\n', f);
}

typedef struct {
    run_opts_t o;
    conn_t conns[MAX_SOURCES];
    int n_conns;
    const char *csv, *per_node, *svg;
} compare_opts_t;

static int parse_compare(compare_opts_t *co, int argc, char **argv)
{
    memset(co, 0, sizeof *co);
    run_opts_init(&co->o);
    opt_parser_t p;
    opt_begin(&p, "compare", compare_options, argc, argv);
    int c;
    while ((c = opt_next(&p)) > 0) {
        int rc = input_option(&co->o, c, p.arg, "compare");
        if (rc == 0)
            continue;
        if (rc != 1)
            return rc;
        switch (c) {
        case OPT_PATTERN:
        case OPT_GRAPH:
            if (co->n_conns == MAX_SOURCES)
                return usage_error("compare", "more than %d connectivities", MAX_SOURCES);
            co->conns[co->n_conns++] = (conn_t){p.arg, c == OPT_GRAPH};
            break;
        case OPT_CSV: co->csv = p.arg; break;
        case OPT_PER_NODE: co->per_node = p.arg; break;
        case OPT_SVG: co->svg = p.arg; break;
        }
    }
    if (c < 0)
        return p.status;
    if (p.n_pos)
        return usage_error("compare", "unexpected argument '%s'; connectivities are given with "
                           "--pattern or --graph", p.pos[0]);
    if (co->n_conns < 2)
        return usage_error("compare", "give at least two connectivities (--pattern, --graph)");
    int graphs = 0;
    for (int k = 0; k < co->n_conns; k++)
        graphs += co->conns[k].is_graph;
    const source_opts_t *so = &co->o.src;
    if (co->o.src.format && !graphs)
        return usage_error("compare", "--format names the format of --graph files; none was "
                           "given");
    if (graphs == co->n_conns && (so->tokens || so->labels_file || co->o.nodes_text))
        return usage_error("compare", "--nodes, --tokens and --labels-file are for patterns; "
                           "every connectivity is a --graph file");
    int from_stdin = 0;
    for (int k = 0; k < co->n_conns; k++)
        from_stdin += co->conns[k].is_graph && strcmp(co->conns[k].name, "-") == 0;
    if (one_stdin_input(&co->o, from_stdin, "compare"))
        return EXIT_USAGE;
    return input_options_check(&co->o, "compare") ? EXIT_USAGE : -1;
}

/* Everything compare owns, released in one place. */
typedef struct {
    source_t src;
    source_t sizer;              /* the graph file that sized the baseline, kept for its run */
    int sizer_k;                 /* its connectivity (0: none; the baseline is never one) */
    inputs_t in;
    result_t base, cur;
    ag_labels_t labels;          /* the first connectivity's, naming the nodes */
    const char *labels_from;     /* whose they are */
    int64_t graph_nodes;         /* the first graph file's size, for unsized patterns */
    double *entropy, *distance, *change, *cosine;
    figures_t fig[MAX_SOURCES];
    double *masks;               /* --svg: [n_conns, grid, grid] */
    int64_t grid;
    out_file_t outs[3];          /* --csv, --per-node, --svg */
    FILE *per_node_f;
} compare_state_t;

/* Are these labels just the numbering 0, 1, ...? (Then they name nothing.) */
static int numbered(const ag_labels_t *l)
{
    if (!l->str)        /* numbers, made when printed */
        return 1;
    char buf[24];
    for (int64_t i = 0; i < l->n; i++) {
        snprintf(buf, sizeof buf, "%lld", (long long)i);
        if (strcmp(l->str[i], buf) != 0)
            return 0;
    }
    return 1;
}

/* A graph file's options: the pattern options mean nothing to it; --self-loops
   applies to it as it does in run. */
static source_opts_t graph_opts(const compare_opts_t *co, const char *path)
{
    source_opts_t so = co->o.src;
    so.graph = path;
    so.pattern = NULL;
    so.tokens = so.labels_file = NULL;
    so.nodes = 0;
    return so;
}

/* When the baseline is a pattern that no option sizes or labels, the first
   graph file among the connectivities gives its size and the node names. That
   file stays open for its own run: it is read once (standard input can be read
   only once, and a big graph should not load twice). */
static int size_from_graph(compare_state_t *st, const compare_opts_t *co, int *usage,
                           ag_error_t *err)
{
    const source_opts_t *o = &co->o.src;
    if (co->conns[0].is_graph || o->nodes || o->tokens || o->labels_file)
        return AG_OK;
    for (int k = 1; k < co->n_conns; k++)
        if (co->conns[k].is_graph) {
            source_opts_t so = graph_opts(co, co->conns[k].name);
            int rc = source_open(&st->sizer, &so, usage, err);
            if (rc)
                return rc;
            st->sizer_k = k;
            st->graph_nodes = st->sizer.nb.n_nodes;
            if (!numbered(&st->sizer.labels)) {   /* they name the baseline's nodes too */
                st->labels = st->sizer.labels;
                st->labels_from = co->conns[k].name;
                st->sizer.labels = (ag_labels_t){0, NULL};
            }
            return AG_OK;
        }
    return AG_OK;
}

/* Keeps the labels that name the nodes; refuses a connectivity that names a
   node id otherwise (compare matches nodes by id, not by label). */
static int check_labels(compare_state_t *st, const compare_opts_t *co, int k, ag_error_t *err)
{
    ag_labels_t *l = &st->src.labels;
    if (!st->labels_from || (numbered(&st->labels) && !numbered(l))) {
        ag_labels_destroy(&st->labels);
        st->labels = *l;
        st->labels_from = co->conns[k].name;
        *l = (ag_labels_t){0, NULL};
        return AG_OK;
    }
    if (numbered(l) || l->n != st->labels.n)
        return AG_OK;   /* sizes are checked by the caller */
    for (int64_t i = 0; i < l->n; i++)
        if (strcmp(l->str[i], st->labels.str[i]) != 0)
            return ag_fail(err, AG_EINVAL, "'%s' calls node %lld '%s', but '%s' calls it '%s'; "
                           "compare matches nodes by id, so every connectivity must list the "
                           "same nodes in the same order", co->conns[k].name, (long long)i,
                           l->str[i], st->labels_from, st->labels.str[i]);
    return AG_OK;
}

/* The graph file a pattern's words graph and hops:K read: the first --graph. */
static const char *first_graph(const compare_opts_t *co)
{
    for (int k = 0; k < co->n_conns; k++)
        if (co->conns[k].is_graph)
            return co->conns[k].name;
    return NULL;
}

/* Runs connectivity k: figures into st->fig[k], per-node rows if asked. */
static int run_one(compare_state_t *st, const compare_opts_t *co, int k, int *usage,
                   ag_error_t *err)
{
    source_opts_t so = co->o.src;
    const int over_graph = !co->conns[k].is_graph && pattern_reads_graph(co->conns[k].name) &&
                           first_graph(co);
    if (co->conns[k].is_graph || over_graph) {
        so = graph_opts(co, over_graph ? first_graph(co) : co->conns[k].name);
        so.pattern = over_graph ? co->conns[k].name : NULL;
    } else {
        so.pattern = co->conns[k].name;
        so.direction = AG_EDGES_AUTO;   /* edge directions mean nothing to a pattern */
        so.size_hint = k == 0 ? st->graph_nodes : st->in.N;
    }
    int rc = AG_OK;
    if (k > 0 && k == st->sizer_k) {   /* opened already: its labels are st->labels */
        st->src = st->sizer;
        memset(&st->sizer, 0, sizeof st->sizer);
    } else if ((rc = source_open(&st->src, &so, usage, err))) {
        return rc;
    }
    const int64_t N = st->src.nb.n_nodes;
    if (k > 0 && N != st->in.N)
        return ag_fail(err, AG_EINVAL, "'%s' has %lld node%s; the first connectivity ('%s') has "
                       "%lld", co->conns[k].name, (long long)N, AG_PLURAL(N), co->conns[0].name,
                       (long long)st->in.N);
    if ((rc = check_labels(st, co, k, err)))
        return rc;
    if (k == 0) {
        st->entropy = ag_alloc(4 * N, sizeof(double), err, "compare");
        if (!st->entropy || (rc = inputs_load(&st->in, &co->o, N, NULL, err)))
            return st->entropy ? rc : ag_alloc_status();
        st->distance = st->entropy + N, st->change = st->entropy + 2 * N;
        st->cosine = st->entropy + 3 * N;
        st->grid = N < MASK_GRID ? N : MASK_GRID;
        if (co->svg && !(st->masks = ag_alloc(co->n_conns * st->grid * st->grid,
                                              sizeof *st->masks, err, "compare --svg")))
            return ag_alloc_status();
    }
    if (st->masks &&
        (rc = ag_mask_grid(st->masks + k * st->grid * st->grid, st->grid, &st->src.nb, err)))
        return rc;
    result_t *r = k == 0 ? &st->base : &st->cur;
    if (k > 0)
        result_free(r);
    /* the reported round's per-node figures come from its own pass */
    if ((rc = compute(r, &st->in, &st->src, &co->o, FIGURES_PER_NODE, NULL, err)))
        return rc;
    figures_t *f = &st->fig[k];
    f->edges = st->src.nb.n_edges;
    f->density = (double)f->edges / ((double)N * (double)N);
    if (r->entropy && r->distance) {   /* means over heads */
        const int64_t H = st->in.H;
        for (int64_t i = 0; i < N; i++) {
            double e = 0, g = 0;
            for (int64_t h = 0; h < H; h++)
                e += r->entropy[i * H + h], g += r->distance[i * H + h];
            st->entropy[i] = e / (double)H, st->distance[i] = g / (double)H;
        }
    } else if (r->Q) {
        if ((rc = ag_attention_stats(&st->src.nb, r->Q, r->K, st->in.H, st->in.d, &r->score,
                                     st->entropy, st->distance, NULL, err)))
            return rc;
    } else {
        for (int64_t i = 0; i < N; i++)
            st->entropy[i] = st->distance[i] = NAN;
    }
    if (co->conns[k].is_graph || over_graph)   /* |i - j| means something only where ids
                                                  are positions */
        for (int64_t i = 0; i < N; i++)
            st->distance[i] = NAN;
    double ignored;
    mean_min(st->entropy, N, &f->ent_mean, &f->ent_min);
    mean_min(st->distance, N, &f->dist_mean, &ignored);
    compare_outputs(f, r->y, st->base.y, N, r->cols, st->change, st->cosine);
    if (st->per_node_f)
        for (int64_t i = 0; i < N; i++) {
            csv_field(st->per_node_f, co->conns[k].name);
            fprintf(st->per_node_f, ",%lld,", (long long)i);
            char buf[AG_LABEL_NUMBER_SIZE];
            csv_field(st->per_node_f, ag_label(&st->labels, i, buf, sizeof buf));
            fprintf(st->per_node_f, ",%lld", (long long)(st->src.nb.edge_ptr[i + 1] -
                                                         st->src.nb.edge_ptr[i]));
            csv_number(st->per_node_f, st->entropy[i]);
            csv_number(st->per_node_f, st->distance[i]);
            fprintf(st->per_node_f, ",%.9g,%.9g\n", st->change[i], st->cosine[i]);
        }
    source_close(&st->src);
    return AG_OK;
}

/* --svg: the masks and the table's figures (the baseline has no change of its own). */
static int draw_compare(const compare_state_t *st, const compare_opts_t *co, char **svg,
                        ag_error_t *err)
{
    enum { FIGS = 7 };
    static const char *const names[FIGS] = {"edges", "density", "mean attention entropy (nats)",
                                            "min attention entropy (nats)",
                                            "mean attention distance |i-j|",
                                            "relative L2 change of the output",
                                            "mean cosine with the baseline"};
    const char *conn_names[MAX_SOURCES];
    double figures[MAX_SOURCES * FIGS];
    for (int k = 0; k < co->n_conns; k++) {
        const figures_t *f = &st->fig[k];
        const double row[FIGS] = {(double)f->edges, f->density, f->ent_mean, f->ent_min,
                                  f->dist_mean, k ? f->rel_l2 : NAN, k ? f->cos_mean : NAN};
        memcpy(figures + k * FIGS, row, sizeof row);
        conn_names[k] = co->conns[k].name;
    }
    char title[128];
    snprintf(title, sizeof title, "compare: %d connectivities on %lld node%s", co->n_conns,
             (long long)st->in.N, AG_PLURAL(st->in.N));
    const ag_compare_picture_t c = {co->n_conns, conn_names, st->in.N, st->grid, st->masks,
                                    FIGS, names, figures, title};
    return ag_draw_compare(svg, &c, err);
}

int cmd_compare(int argc, char **argv)
{
    compare_opts_t co;
    int status = parse_compare(&co, argc, argv);
    if (status >= 0)
        return status;
    const int threads = ag_set_threads((int)co.o.threads);

    compare_state_t st;
    memset(&st, 0, sizeof st);
    ag_error_t err = {AG_OK, ""};
    int usage = 0;
    out_file_t *outs = st.outs;
    out_init(&outs[0], co.csv, "--csv", "csv");
    out_init(&outs[1], co.per_node, "--per-node", "csv");
    out_init(&outs[2], co.svg, "--svg", "svg");
    int rc = out_open_all(outs, 3, &usage, &err);
    if (!rc && co.per_node && !(st.per_node_f = fopen(st.outs[1].file.path, "w")))
        rc = ag_fail(&err, AG_EIO, "%s: cannot write", co.per_node);
    if (st.per_node_f)
        fputs("connectivity,node,label,in_degree,entropy,distance,change,cosine\n",
              st.per_node_f);
    if (!rc)
        rc = size_from_graph(&st, &co, &usage, &err);
    for (int k = 0; k < co.n_conns && !rc; k++)
        rc = run_one(&st, &co, k, &usage, &err);
    if (st.per_node_f && fclose(st.per_node_f) != 0 && !rc)
        rc = ag_fail(&err, AG_EIO, "%s: write failed", co.per_node);
    if (!rc && co.csv) {
        FILE *f = fopen(st.outs[0].file.path, "w");
        if (!f) {
            rc = ag_fail(&err, AG_EIO, "%s: cannot write", co.csv);
        } else {
            fputs("connectivity,nodes,edges,density,entropy_mean,entropy_min,distance_mean,"
                  "rel_l2,cosine_mean,most_changed\n", f);
            for (int k = 0; k < co.n_conns; k++)
                csv_row(f, &co.conns[k], &st.fig[k], &st.labels, st.in.N, k == 0);
            if (fclose(f) != 0)
                rc = ag_fail(&err, AG_EIO, "%s: write failed", co.csv);
        }
    }
    if (!rc && co.svg) {
        char *svg = NULL;
        rc = draw_compare(&st, &co, &svg, &err);
        if (!rc)
            rc = out_write_text(&st.outs[2], svg, &err);
        ag_svg_free(svg);
    }
    if (!rc)
        rc = out_commit_all(st.outs, 3, &err);
    if (!rc && !co.o.quiet) {
        const inputs_t *in = &st.in;
        printf("compare: %d connectivities on %lld node%s, ", co.n_conns, (long long)in->N,
               AG_PLURAL(in->N));
        if (in->raw)
            printf("raw attention (%lld head%s of width %lld)", (long long)in->H,
                   AG_PLURAL(in->H), (long long)in->d);
        else
            printf("%lld round%s (D=%lld, %lld head%s of width %lld, %s, seed %llu)",
                   (long long)in->rounds, in->rounds == 1 ? "" : "s", (long long)in->x0.cols,
                   (long long)in->H, in->H > 1 ? "s" : "", (long long)in->d,
                   co.o.weights ? "weights from file" : "random weights",
                   (unsigned long long)co.o.seed);
        printf(", %d thread%s\n", threads, threads > 1 ? "s" : "");
        printf("%-28s %12s %8s %7s %7s %9s %7s %7s  %s\n", "connectivity", "edges", "density",
               "H_mean", "H_min", "dist_mean", "rel_L2", "cos", "most changed (L2)");
        for (int k = 0; k < co.n_conns; k++)
            print_row(&co.conns[k], &st.fig[k], &st.labels, k == 0);
        out_say_written(st.outs, 3);
    }
    if (rc)
        out_abort_all(st.outs, 3, &err);
    source_close(&st.src);
    source_close(&st.sizer);
    result_free(&st.base);
    result_free(&st.cur);
    inputs_free(&st.in);
    ag_labels_destroy(&st.labels);
    free(st.entropy);
    free(st.masks);
    return finish("compare", rc, usage, &err);
}
