/* `attngraph run`: message rounds on a graph file or a pattern; report and write outputs. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "internal.h"

#define DEFAULT_MAX_EXPORT ((int64_t)50000000)

static const char run_usage[] =
    "usage: attngraph run GRAPH [options]\n"
    "       attngraph run --pattern SPEC (--nodes N | --tokens \"a b c\") [options]\n"
    "\n"
    "Runs attention message rounds on GRAPH (edge u -> v: v attends to u), or on a\n"
    "connectivity pattern compiled without building the graph (see 'attngraph pattern\n"
    "--help' for patterns).\n"
    "\n" INPUT_OPTIONS_HELP
    "  --pattern SPEC      run on a pattern instead of a graph file\n"
    "\n"
    "Outputs:\n"
    "  --out FILE.npy      write the output (float32)\n"
    "  --attn FILE.csv     write per-edge attention of the last round:\n"
    "                      src,dst,src_label,dst_label,head,weight\n"
    "  --max-edges N       refuse an --attn export of more than N rows (default 50000000)\n"
    "  --quiet             print nothing on success\n"
    "  --help              this text\n";

/* Returns -1 to go on, else an exit status. */
static int parse_run(run_opts_t *o, int64_t *max_export, int argc, char **argv)
{
    static struct option longopts[64];
    static const struct option own[] = {
        {"pattern", required_argument, 0, OPT_PATTERN}, {"out", required_argument, 0, OPT_OUT},
        {"attn", required_argument, 0, OPT_ATTN}, {"max-edges", required_argument, 0, OPT_MAX_EDGES},
        {0, 0, 0, 0},
    };
    int n = 0;
    for (int k = 0; input_options[k].name; k++)
        longopts[n++] = input_options[k];
    for (int k = 0; own[k].name; k++)
        longopts[n++] = own[k];
    longopts[n] = (struct option){0, 0, 0, 0};

    run_opts_init(o);
    *max_export = DEFAULT_MAX_EXPORT;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        int rc = input_option(o, c, optarg, "run");
        if (rc == 0)
            continue;
        if (rc != 1)
            return rc;
        switch (c) {
        case OPT_PATTERN: o->src.pattern = optarg; break;
        case OPT_OUT: o->out = optarg; break;
        case OPT_ATTN: o->attn = optarg; break;
        case OPT_MAX_EDGES: {
            char *end;
            long long v = strtoll(optarg, &end, 10);
            if (*end || end == optarg || v < 1)
                return usage_error("run", "--max-edges '%s' is not a positive integer", optarg);
            *max_export = v;
            break;
        }
        case OPT_HELP: fputs(run_usage, stdout); return 0;
        default: return getopt_error("run", c, argv);
        }
    }
    if (optind < argc)
        o->src.graph = argv[optind++];
    if (optind < argc)
        return usage_error("run", "unexpected argument '%s'", argv[optind]);
    if (!o->src.graph == !o->src.pattern)
        return usage_error("run", o->src.graph ? "give a GRAPH file or --pattern, not both"
                                               : "no GRAPH file or --pattern given");
    return input_options_check(o, "run") ? EXIT_USAGE : -1;
}

static void print_header(const run_opts_t *o, const source_t *s, const inputs_t *in, int threads)
{
    const ag_nbhd_t *nb = &s->nb;
    const double N = (double)nb->n_nodes;
    if (s->have_graph)
        printf("graph: %s: %lld nodes, %" IGRAPH_PRId " edges, %lld messages\n", s->desc,
               (long long)nb->n_nodes, igraph_ecount(&s->graph), (long long)nb->n_edges);
    else
        printf("graph: %s on %lld nodes: %lld messages (%.3g%% of all pairs)\n", s->desc,
               (long long)nb->n_nodes, (long long)nb->n_edges, 100.0 * nb->n_edges / (N * N));
    const char *plural = in->H > 1 ? "s" : "", *tplural = threads > 1 ? "s" : "";
    if (in->raw)
        printf("raw attention: 1 round, %lld head%s of width %lld, %d thread%s\n",
               (long long)in->H, plural, (long long)in->d, threads, tplural);
    else
        printf("rounds: %lld (D=%lld, %lld head%s of width %lld, %s, seed %llu, %d thread%s)\n",
               (long long)o->rounds, (long long)in->x0.cols, (long long)in->H, plural,
               (long long)in->d, o->weights ? "weights from file" : "random weights",
               (unsigned long long)o->seed, threads, tplural);
}

int cmd_run(int argc, char **argv)
{
    run_opts_t o;
    int64_t max_export;
    int status = parse_run(&o, &max_export, argc, argv);
    if (status >= 0)
        return status;
    const int threads = set_threads(o.threads);

    source_t s;
    inputs_t in;
    result_t r;
    out_file_t out, attn;
    memset(&s, 0, sizeof s), memset(&in, 0, sizeof in), memset(&r, 0, sizeof r);
    memset(&out, 0, sizeof out), memset(&attn, 0, sizeof attn);
    ag_error_t err = {AG_OK, ""};
    int usage = 0;
    /* Create the outputs first: a bad path fails before any work. */
    int rc = out_open(&out, o.out, &err);
    if (!rc)
        rc = out_open(&attn, o.attn, &err);
    if (!rc)
        rc = source_open(&s, &o.src, &usage, &err);
    if (!rc)
        rc = inputs_load(&in, &o, s.nb.n_nodes, &err);
    if (!rc && o.attn && (o.rounds == 0 || s.nb.n_edges * in.H > max_export))
        rc = o.rounds == 0
                 ? ag_fail(&err, AG_EINVAL, "--attn needs at least one round (--rounds 0 given)")
                 : ag_fail(&err, AG_ELIMIT, "--attn would write %lld rows (%lld messages x %lld "
                           "heads), more than --max-edges %lld", (long long)(s.nb.n_edges * in.H),
                           (long long)s.nb.n_edges, (long long)in.H, (long long)max_export);
    if (!rc)
        rc = compute(&r, &in, &s.nb, o.rounds, &err);
    if (!rc && o.out)
        rc = ag_npy_write_f32(out.tmp, r.y, s.nb.n_nodes, r.cols, &err);
    if (!rc && o.attn)
        rc = report_attention_csv(attn.tmp, &s.nb, &s.labels, r.Q, r.K, in.H, in.d, &err);
    if (!rc && !o.quiet) {
        print_header(&o, &s, &in, threads);
        if (r.Q) {
            printf("attention in the last round (mean over heads, top 3 sources):\n");
            rc = report_summary(stdout, &s.nb, &s.labels, r.Q, r.K, in.H, in.d, SUMMARY_NODES,
                                &err);
        }
    }
    if (!rc)
        rc = out_commit(&out, &err);
    if (!rc)
        rc = out_commit(&attn, &err);
    if (!rc && !o.quiet) {
        if (o.out)
            printf("wrote %s [%lld, %lld] float32\n", o.out, (long long)s.nb.n_nodes,
                   (long long)r.cols);
        if (o.attn)
            printf("wrote %s (%lld rows)\n", o.attn, (long long)(s.nb.n_edges * in.H));
    }
    if (rc) {
        out_abort(&out);
        out_abort(&attn);
        if (usage)
            usage_error("run", "%s", err.msg);
        else
            fprintf(stderr, "attngraph: %s\n", err.msg);
    }
    result_free(&r);
    inputs_free(&in);
    source_close(&s);
    return rc ? (usage ? EXIT_USAGE : EXIT_BAD_INPUT) : 0;
}
