/*
 * `attngraph draw`: pictures (SVG) of a run's attention, of its rounds, of a
 * training log. `attngraph compare --svg` draws the masks it compares.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/base.h"

static const char draw_usage[] =
    "usage: attngraph draw heatmap (GRAPH | --pattern SPEC | --csr ...) [run options] --out F.svg\n"
    "       attngraph draw graph (GRAPH | --pattern SPEC | --csr ...) [run options] --out F.svg\n"
    "       attngraph draw rounds TRACE.csv --out F.svg\n"
    "       attngraph draw train LOG.csv --out F.svg\n"
    "\n"
    "Pictures as SVG (one self-contained file, any browser opens it):\n"
    "  heatmap   runs like 'attngraph run' and draws the last round's attention:\n"
    "            destinations x sources, a cell per edge coloured by its weight,\n"
    "            hatched grey where there is no edge; binned above 1000 nodes\n"
    "  graph     runs likewise and draws the graph: a Fruchterman-Reingold layout for\n"
    "            graph files and CSR, an arc diagram for patterns (sequences); edge\n"
    "            width and opacity by attention, arrows towards the destination\n"
    "  rounds    the convergence of rounds from 'run --trace': change per round\n"
    "            (log scale) and mean attention entropy\n"
    "  train     the training curve from 'train --log': loss, and accuracy if any\n"
    "  (compare: 'attngraph compare ... --svg F.svg' draws the masks and the table)\n"
    "\n"
    "  attngraph draw KIND --help   the options of each kind\n";

static const opt_def_t attention_options[] = {
    OPT_PROSE("usage: attngraph draw heatmap (GRAPH | --pattern SPEC | --csr ...) [options] --out F.svg\n"
              "       attngraph draw graph (GRAPH | --pattern SPEC | --csr ...) [options] --out F.svg\n"
              "\n"
              "Runs like 'attngraph run' (every input option below), then draws the attention of\n"
              "the last round (or --attn-round R's).\n"),
    OPT_VALUE("out", OPT_OUT, "  --out FILE.svg      the picture (- : standard output)\n"),
    OPT_VALUE("head", OPT_HEAD,
              "  --head H            draw head H (0-based) instead of the mean over heads\n"),
    OPT_VALUE("vmax", OPT_VMAX,
              "  --vmax W            the weight drawn strongest (default: the largest drawn)\n"),
    OPT_VALUE("attn-round", OPT_ATTN_ROUND,
              "  --attn-round R      draw round R's attention instead of the last\n"),
    OPT_VALUE("max-edges", OPT_MAX_EDGES,
              "  --max-edges N       refuse more than N weights (default 50000000; a binned\n"
              "                      heatmap has no limit: it sums blocks a piece at a time)\n"),
    OPT_VALUE("title", OPT_TITLE,
              "  --title TEXT        the line above the picture (default: the graph or pattern)\n"),
    OPT_PROSE("heatmap only:\n"),
    OPT_VALUE("scale", OPT_SCALE,
              "  --scale linear|log  the colour scale (default linear; log shows the small weights\n"
              "                      of nodes that attend to many sources)\n"),
    OPT_VALUE("bins", OPT_BINS,
              "  --bins B            blocks per axis once binned (default 128; binned above 1000\n"
              "                      nodes or 20000 cells)\n"),
    OPT_PROSE("graph only:\n"),
    OPT_VALUE("layout", OPT_LAYOUT,
              "  --layout fr|arc     Fruchterman-Reingold (seeded by --seed; the default for graph\n"
              "                      files and CSR) or an arc diagram, nodes in id order (the\n"
              "                      default for patterns)\n"),
    OPT_VALUE("classes", OPT_CLASSES,
              "  --classes L.npy     colour each node by its class or prediction (integers [N],\n"
              "                      -1: none), as train --labels and --predict write them\n"),
    OPT_PROSE("\n"),
    OPT_TABLE(input_options),
    OPT_TABLE(input_source_options),
    OPT_HELP_LINE,
    OPT_TABLE_UNLISTED(quiet_refused),
    OPT_DEF_END,
};

typedef struct {
    int graph;                 /* 1: the graph picture; 0: the heatmap */
    const char *out, *title;
    int64_t head;              /* -1: mean */
    int64_t bins;
    double vmax;
    int layout;                /* -1: by source; 0: arcs; 1: fr */
    const char *classes;       /* --classes L.npy */
    int log_scale;
} attn_opts_t;

static int parse_attention(attn_opts_t *a, run_opts_t *o, int argc, char **argv)
{
    run_opts_init(o);
    const char *cmd = a->graph ? "draw graph" : "draw heatmap";
    opt_parser_t p;
    opt_begin(&p, cmd, attention_options, argc, argv);
    int c;
    while ((c = opt_next(&p)) > 0) {
        int rc = input_option(o, c, p.arg, cmd);
        if (rc == 0)
            continue;
        if (rc != 1)
            return rc;
        switch (c) {
        case OPT_PATTERN: o->src.pattern = p.arg; break;
        case OPT_CSR: o->src.csr = p.arg; break;
        case OPT_OUT: a->out = p.arg; break;
        case OPT_TITLE: a->title = p.arg; break;
        case OPT_HEAD:
            if (opt_int(&a->head, cmd, p.name, p.arg, 0, INT64_MAX))
                return EXIT_USAGE;
            break;
        case OPT_VMAX:
            if (opt_real(&a->vmax, cmd, p.name, p.arg, 0, 1))
                return EXIT_USAGE;
            break;
        case OPT_BINS:
            if (!a->graph ? opt_int(&a->bins, cmd, p.name, p.arg, 1, 1024)
                          : usage_error(cmd, "--bins is for the heatmap"))
                return EXIT_USAGE;
            break;
        case OPT_SCALE:
            if (a->graph)
                return usage_error(cmd, "--scale is for the heatmap");
            if (strcmp(p.arg, "linear") && strcmp(p.arg, "log"))
                return usage_error(cmd, "--scale '%s': expected linear or log", p.arg);
            a->log_scale = strcmp(p.arg, "log") == 0;
            break;
        case OPT_LAYOUT:
            if (a->graph && strcmp(p.arg, "fr") && strcmp(p.arg, "arc"))
                return usage_error(cmd, "--layout '%s': expected fr or arc", p.arg);
            if (!a->graph)
                return usage_error(cmd, "--layout is for the graph picture");
            a->layout = strcmp(p.arg, "fr") == 0;
            break;
        case OPT_CLASSES:
            if (!a->graph)
                return usage_error(cmd, "--classes is for the graph picture");
            a->classes = p.arg;
            break;
        case OPT_ATTN_ROUND:
        case OPT_MAX_EDGES:
            if (opt_int(c == OPT_ATTN_ROUND ? &o->attn_round : &o->max_export, cmd, p.name,
                        p.arg, 1, INT64_MAX))
                return EXIT_USAGE;
            break;
        }
    }
    if (c < 0)
        return p.status;
    if (source_args(o, &p, cmd))
        return EXIT_USAGE;
    static const int not_draw[] = {OPT_QUIET, 0};
    if (refuse_options(o, not_draw, cmd, "draw prints only what it wrote"))
        return EXIT_USAGE;
    if (!a->out)
        return usage_error(cmd, "give the picture's file: --out FILE.svg");
    return input_options_check(o, cmd) ? EXIT_USAGE : -1;
}

/* "graphs/x.gml (gml, directed), round 2". */
static void title(char *buf, size_t size, const source_t *s, const result_t *r,
                  const run_opts_t *o)
{
    const int64_t round = o->attn_round ? o->attn_round : r->rounds_done;
    if (round > 1)
        snprintf(buf, size, "%s, round %lld", s->desc, (long long)round);
    else
        snprintf(buf, size, "%s", s->desc);
}

#define CHUNK_SLOTS ((int64_t)1 << 20)   /* binned heatmaps: weights computed this many at a time */

/* The slots of destinations lo..hi-1 as edges: sources, destinations, weights. */
static int slot_edges(const result_t *r, const inputs_t *in, const source_t *s, int64_t lo,
                      int64_t hi, int64_t *src, int64_t *dst, float *W, ag_error_t *err)
{
    const ag_nbhd_t *nb = &s->nb;
    int rc = result_weights(r, in, s, lo, hi, W, err);
    if (rc)
        return rc;
    ag_nbhd_sources(nb, lo, hi, src);
    for (int64_t i = lo; i < hi; i++)
        for (int64_t e = nb->edge_ptr[i]; e < nb->edge_ptr[i + 1]; e++)
            dst[e - nb->edge_ptr[lo]] = i;
    return AG_OK;
}

/* A heatmap over too many nodes or cells to draw one by one: blocks summed a
   range of destinations at a time, so any number of edges fits in memory. */
static int draw_binned(const attn_opts_t *a, const source_t *s, const inputs_t *in,
                       const result_t *r, const char *head, char **svg, ag_error_t *err)
{
    const ag_nbhd_t *nb = &s->nb;
    const int64_t N = nb->n_nodes, H = in->H;
    int64_t most = 1;   /* the largest chunk: whole destinations up to CHUNK_SLOTS slots */
    for (int64_t i = 0; i < N; i++)
        most = nb->edge_ptr[i + 1] - nb->edge_ptr[i] > most ? nb->edge_ptr[i + 1] - nb->edge_ptr[i]
                                                          : most;
    most = most > CHUNK_SLOTS ? most : CHUNK_SLOTS;
    const int64_t bins = a->bins ? (a->bins < N ? a->bins : N) : 0;
    const ag_heatmap_opts_t scale = {.vmax = a->vmax, .log_scale = a->log_scale};
    ag_heatmap_bins_t *b = NULL;
    float *W = ag_alloc(most * H, sizeof *W, err, "draw");
    int64_t *src = ag_alloc(2 * most, sizeof *src, err, "draw");
    int rc = W && src ? ag_heatmap_bins_new(&b, N, bins, err) : ag_alloc_status();
    for (int64_t lo = 0, hi; lo < N && !rc; lo = hi) {
        for (hi = lo + 1; hi < N && nb->edge_ptr[hi + 1] - nb->edge_ptr[lo] <= most; hi++)
            ;
        const int64_t E = nb->edge_ptr[hi] - nb->edge_ptr[lo];
        rc = slot_edges(r, in, s, lo, hi, src, src + most, W, err);
        const ag_edge_weights_t ew = {N, E, src, src + most, W, H, a->head, NULL, NULL};
        if (!rc)
            rc = ag_heatmap_bins_add(b, &ew, err);
    }
    if (!rc)
        rc = ag_draw_heatmap_bins(svg, b, (const char *const *)s->labels.str, head, &scale, err);
    ag_heatmap_bins_free(b);
    free(W), free(src);
    return rc;
}

/* --classes: N integers, each -1 (none) or a class number. */
static int read_classes(int64_t **classes, const char *path, int64_t N, ag_error_t *err)
{
    int64_t n;
    int rc = ag_index_read_npy(classes, &n, path, err);
    if (!rc && n != N)
        rc = ag_fail(err, AG_EINVAL, "--classes %s holds %lld values; the graph has %lld "
                     "nodes", path, (long long)n, (long long)N);
    for (int64_t i = 0; !rc && i < N; i++)
        if ((*classes)[i] < -1)
            rc = ag_fail(err, AG_EINVAL, "--classes %s: node %lld's class is %lld; expected "
                         "0, 1, ... or -1 (none)", path, (long long)i, (long long)(*classes)[i]);
    if (rc)
        free(*classes), *classes = NULL;
    return rc;
}

static int draw_attention(const attn_opts_t *a, const run_opts_t *o, const source_t *s,
                          const inputs_t *in, const result_t *r, char **svg, ag_error_t *err)
{
    const ag_nbhd_t *nb = &s->nb;
    const int64_t E = nb->n_edges, N = nb->n_nodes, H = in->H;
    if (a->head >= H)
        return ag_fail(err, AG_EINVAL, "--head %lld: the run has %lld head%s (0..%lld)",
                       (long long)a->head, (long long)H, AG_PLURAL(H), (long long)H - 1);
    char head[1024];
    if (a->title)
        snprintf(head, sizeof head, "%s", a->title);
    else
        title(head, sizeof head, s, r, o);
    const int binned = N > AG_HEATMAP_MAX_NODES || E > AG_HEATMAP_MAX_CELLS;
    if (!a->graph && binned && (!a->bins || a->bins < N))
        return draw_binned(a, s, in, r, head, svg, err);
    if (E * H > o->max_export)
        return ag_fail(err, AG_ELIMIT, "the picture needs all %lld weights, more than "
                       "--max-edges %lld", (long long)(E * H), (long long)o->max_export);
    if (a->graph && (N > AG_GRAPH_MAX_NODES || E > AG_GRAPH_MAX_EDGES))
        return ag_fail(err, AG_ELIMIT, "%s has %lld nodes and %lld edges; a graph picture "
                       "is readable up to %d nodes and %d edges: draw a heatmap instead",
                       s->desc, (long long)N, (long long)E, AG_GRAPH_MAX_NODES,
                       AG_GRAPH_MAX_EDGES);
    float *W = ag_alloc(E * H + 1, sizeof *W, err, "draw");
    int64_t *src = ag_alloc(2 * E + 1, sizeof *src, err, "draw");
    double *xy = NULL;
    int rc = W && src ? slot_edges(r, in, s, 0, N, src, src + E, W, err) : ag_alloc_status();
    const ag_edge_weights_t ew = {N, E, src, src + E, W, H, a->head,
                                  (const char *const *)s->labels.str, head};
    /* a pattern is a sequence: its nodes in order; other graphs spread out */
    const int fr = a->layout < 0 ? !o->src.pattern : a->layout;
    if (!rc && a->graph && fr) {
        xy = ag_alloc(2 * N, sizeof *xy, err, "layout");
        rc = xy ? ag_layout_fr(xy, N, E, src, src + E, o->seed, err) : ag_alloc_status();
    }
    int64_t *classes = NULL;
    if (!rc && a->classes)
        rc = read_classes(&classes, a->classes, N, err);
    if (!rc && a->graph) {
        const ag_graph_opts_t go = {xy, a->vmax, classes};
        rc = ag_draw_graph(svg, &ew, &go, err);
    } else if (!rc) {
        const ag_heatmap_opts_t ho = {.bins = a->bins, .vmax = a->vmax,
                                      .log_scale = a->log_scale};
        rc = ag_draw_heatmap(svg, &ew, &ho, err);
    }
    free(W), free(src), free(xy), free(classes);
    return rc;
}

static int cmd_draw_attention(int graph, int argc, char **argv)
{
    attn_opts_t a = {graph, NULL, NULL, -1, 0, 0, -1, NULL, 0};
    run_opts_t o;
    int status = parse_attention(&a, &o, argc, argv);
    if (status >= 0)
        return status;
    ag_set_threads((int)o.threads);
    const char *cmd = graph ? "draw graph" : "draw heatmap";
    source_t s;
    inputs_t in;
    result_t r;
    memset(&s, 0, sizeof s), memset(&in, 0, sizeof in), memset(&r, 0, sizeof r);
    ag_error_t err = {AG_OK, ""};
    int usage = 0;
    out_file_t out;
    char *svg = NULL;
    out_init(&out, a.out, "--out", "svg");
    int rc = out_open_all(&out, 1, &usage, &err);
    if (!rc)
        rc = source_open(&s, &o.src, &usage, &err);
    if (!rc)
        rc = inputs_load(&in, &o, s.nb.n_nodes, NULL, &err);
    if (!rc)
        rc = compute(&r, &in, &s, &o, 0, NULL, &err);
    if (!rc && !r.Q)
        rc = ag_fail(&err, AG_EINVAL, "no attention to draw: --rounds 0");
    if (!rc)
        rc = draw_attention(&a, &o, &s, &in, &r, &svg, &err);
    if (!rc)
        rc = out_write_text(&out, svg, &err);
    if (!rc)
        rc = out_commit(&out, &err);
    if (!rc && !out.is_stdout)
        printf("wrote %s\n", a.out);
    if (rc) {
        out_name_errors(&out, 1, &err);
        out_abort(&out);
    }
    ag_svg_free(svg);
    result_free(&r);
    inputs_free(&in);
    source_close(&s);
    return finish(cmd, rc, usage, &err);
}

int cmd_draw(int argc, char **argv)
{
    if (argc < 2) {
        fputs(draw_usage, stderr);
        return EXIT_USAGE;
    }
    const char *kind = argv[1];
    if (!strcmp(kind, "--help") || !strcmp(kind, "-h") || !strcmp(kind, "help")) {
        fputs(draw_usage, stdout);
        return 0;
    }
    if (!strcmp(kind, "heatmap") || !strcmp(kind, "graph"))
        return cmd_draw_attention(!strcmp(kind, "graph"), argc - 1, argv + 1);
    if (!strcmp(kind, "rounds"))
        return cmd_draw_rounds(argc - 1, argv + 1);
    if (!strcmp(kind, "train"))
        return cmd_draw_train(argc - 1, argv + 1);
    return usage_error("draw", "unknown picture '%s'; expected heatmap, graph, rounds or train",
                       kind);
}
