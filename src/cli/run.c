/* `attngraph run`: message rounds on a graph file or a pattern; report and write outputs.
   run_with is the command for one process and for attngraph-mpi, over a run_backend_t. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "base/base.h"
#include "cli/progress.h"

static const opt_def_t run_options[] = {
    OPT_PROSE("usage: attngraph run GRAPH [options]\n"
              "       attngraph run --csr INDPTR.npy,INDICES.npy [options]\n"
              "       attngraph run --pattern SPEC (--nodes N | --tokens \"a b c\") [options]\n"
              "\n"
              "Runs attention message rounds on GRAPH (edge u -> v: v attends to u), or on a\n"
              "connectivity pattern compiled without building the graph (see 'attngraph pattern\n"
              "--help' for patterns).\n"
              "\n"),
    OPT_TABLE(input_options),
    OPT_VALUE("pattern", OPT_PATTERN,
              "  --pattern SPEC      run on a pattern instead of a graph file\n"),
    OPT_VALUE("csr", OPT_CSR,
              "  --csr IP.npy,IX.npy run on an in-neighbour CSR (int64 indptr [N+1], indices [E],\n"
              "                      sources ascending): the fast path for huge graphs\n"),
    OPT_PROSE("\n"
              "Outputs:\n"),
    OPT_VALUE("out", OPT_OUT, "  --out FILE.npy      write the output (float32)\n"),
    OPT_VALUE("messages", OPT_MESSAGES,
              "  --messages FILE.npy write the last round's messages M [N, H*d] (head h: columns\n"
              "                      h*d .. h*d+d-1)\n"),
    OPT_VALUE("head-messages", OPT_HEAD_MESSAGES,
              "  --head-messages FILE.npy  the same per head, [H, N, d]\n"),
    OPT_VALUES("attn", OPT_ATTN,
               "  --attn FILE         per-edge attention of the last round: .csv (src,dst,src_label,\n"
               "                      dst_label,head,weight), .npy [E, H] in the graph's edge order,\n"
               "                      or .graphml (the graph with edge attributes attn_h0.., attn_mean);\n"
               "                      repeat it to write several formats: --attn a.csv --attn a.npy\n"),
    OPT_VALUE("attn-round", OPT_ATTN_ROUND,
              "  --attn-round R      report the attention of round R instead of the last\n"),
    OPT_VALUE("predict", OPT_PREDICT,
              "  --predict FILE.npy  the class of every node (int64 [N]): the argmax of a linear\n"
              "                      readout of the final states, --weights DIR/readout.npy [C, D]\n"
              "                      and readout_bias.npy [C] (as train --save writes them);\n"
              "                      --rounds 0 then means the readout alone\n"),
    OPT_VALUE("trace", OPT_TRACE,
              "  --trace FILE.csv    per-round figures: round,change,entropy,max_weight\n"
              "  --trace FILE.svg    ... or their picture: the change per round (log scale) and\n"
              "                      the mean attention entropy (see 'attngraph draw rounds')\n"),
    OPT_VALUE("save-rounds", OPT_SAVE_ROUNDS,
              "  --save-rounds DIR   keep every round's states as DIR/round-R.npy, each file\n"
              "                      written whole as its round ends (kept if the run fails later)\n"),
    OPT_VALUE("max-edges", OPT_MAX_EDGES,
              "  --max-edges N       refuse an --attn export of more than N weights (default 50000000)\n"),
    OPT_FLAG("quiet", OPT_QUIET, "  --quiet             print nothing on success\n"),
    OPT_FLAG("progress", OPT_PROGRESS,
             "  --progress, --no-progress  show progress on standard error, or not (default: when\n"
             "                      it is a terminal); runs of over a minute say so before starting\n"),
    OPT_FLAG("no-progress", OPT_NO_PROGRESS, NULL),
    OPT_HELP_LINE,
    OPT_PROSE("\n"
              "An output FILE of - is standard output (the report then goes to stderr);\n"
              "a device or FIFO is written in place, a symlink through to its file. Files\n"
              "appear whole when the run succeeds; a failed run leaves old files as they were\n"
              "(--save-rounds files aside). They are renamed into place one after another at\n"
              "the end: a run interrupted during those renames may have replaced some only.\n"
              "An existing file that is not writable is refused.\n"
              "GRAPH, --features, --q, --k, --v or a part of --csr may be - (standard input; a graph\n"
              "needs --format); a graph or labels file may be a FIFO or a pipe.\n"),
    OPT_DEF_END,
};

void run_outputs_init(out_file_t outs[RUN_N_OUTS], const run_opts_t *o)
{
    out_init(&outs[RUN_OUT], o->out, "--out", "npy");
    out_init(&outs[RUN_MESSAGES], o->messages, "--messages", "npy");
    out_init(&outs[RUN_HEAD_MESSAGES], o->head_messages, "--head-messages", "npy");
    for (int k = 0; k < MAX_ATTN; k++)
        out_init(&outs[RUN_ATTN + k], k < o->n_attn ? o->attn[k] : NULL, "--attn",
                 "csv,npy,graphml");
    out_init(&outs[RUN_TRACE], o->trace, "--trace", "csv,svg");
    out_init(&outs[RUN_PREDICT], o->predict, "--predict", "npy");
}

/* Returns -1 to go on, else an exit status. */
int run_parse(run_opts_t *o, int argc, char **argv)
{
    run_opts_init(o);
    opt_parser_t p;
    opt_begin(&p, "run", run_options, argc, argv);
    int c;
    const char *rounds_text = NULL;
    while ((c = opt_next(&p)) > 0) {
        if (c == OPT_ROUNDS && strcmp(p.arg, "0") == 0) {   /* the readout alone: --predict */
            rounds_text = p.arg;
            o->given[OPT_ROUNDS - OPT_Q] = 1;
            o->rounds = 0;
            continue;
        }
        int rc = input_option(o, c, p.arg, "run");
        if (rc == 0)
            continue;
        if (rc != 1)
            return rc;
        switch (c) {
        case OPT_PATTERN: o->src.pattern = p.arg; break;
        case OPT_CSR: o->src.csr = p.arg; break;
        case OPT_OUT: o->out = p.arg; break;
        case OPT_ATTN:
            /* one file named twice is refused with the other outputs (out_open_all) */
            if (o->n_attn == MAX_ATTN)
                return usage_error("run", "more than %d --attn files", MAX_ATTN);
            /* the extension is checked with the other outputs (out_open_all) */
            o->attn[o->n_attn++] = p.arg;
            break;
        case OPT_MESSAGES: o->messages = p.arg; break;
        case OPT_HEAD_MESSAGES: o->head_messages = p.arg; break;
        case OPT_TRACE: o->trace = p.arg; break;
        case OPT_SAVE_ROUNDS: o->save_rounds = p.arg; break;
        case OPT_PREDICT: o->predict = p.arg; break;
        case OPT_PROGRESS: case OPT_NO_PROGRESS: o->progress = c == OPT_PROGRESS; break;
        case OPT_MAX_EDGES:
        case OPT_ATTN_ROUND:
            if (opt_int(c == OPT_MAX_EDGES ? &o->max_export : &o->attn_round, "run", p.name,
                        p.arg, 1, INT64_MAX))
                return EXIT_USAGE;
            break;
        }
    }
    if (c < 0)
        return p.status;
    if (source_args(o, &p, "run"))
        return EXIT_USAGE;
    if (rounds_text && !o->predict)
        return usage_error("run", "--rounds '0' is not an integer in 1..1000000 (0, the "
                           "readout alone, goes with --predict)");
    if (o->predict && !o->weights)
        return usage_error("run", "--predict reads the readout of a trained model: give "
                           "--weights DIR with readout.npy (attngraph train --save DIR)");
    if (o->predict && o->q)
        return usage_error("run", "--predict reads the final states of rounds; --q/--k/--v "
                           "run raw attention");
    if (o->attn_round && !o->n_attn)
        return usage_error("run", "--attn-round says which round --attn reports; give --attn");
    if (p.seen[OPT_MAX_EDGES - OPT_Q] && !o->n_attn)
        return usage_error("run", "--max-edges limits the --attn export; give --attn");
    if (input_options_check(o, "run"))
        return EXIT_USAGE;
    if (ag_model_spec_layer_graphs(&o->model.spec) &&
        (o->n_attn || o->messages || o->head_messages || o->trace || o->until > 0))
        return usage_error("run", "%s: %s: its layers attend over graphs of their own "
                           "(graph=, global=), so no one graph's attention, messages or "
                           "figures can be reported; --out, --predict and --save-rounds "
                           "write its states", o->model.path,
                           o->n_attn ? "--attn" : o->messages ? "--messages"
                           : o->head_messages ? "--head-messages" : o->trace ? "--trace"
                           : "--until");
    return -1;
}

static void print_header(const run_opts_t *o, const source_t *s, const inputs_t *in,
                         int threads)
{
    const ag_nbhd_t *nb = &s->nb;
    const double N = (double)nb->n_nodes;
    if (s->have_graph)
        printf("graph: %s: %lld node%s, %" IGRAPH_PRId " edge%s, %lld message%s\n", s->desc,
               (long long)nb->n_nodes, AG_PLURAL(nb->n_nodes), igraph_ecount(&s->graph),
               AG_PLURAL(igraph_ecount(&s->graph)), (long long)nb->n_edges, AG_PLURAL(nb->n_edges));
    else
        printf("graph: %s on %lld node%s: %lld message%s (%.3g%% of all pairs)\n", s->desc,
               (long long)nb->n_nodes, AG_PLURAL(nb->n_nodes), (long long)nb->n_edges,
               AG_PLURAL(nb->n_edges), 100.0 * nb->n_edges / (N * N));
    const char *plural = AG_PLURAL(in->H), *tplural = AG_PLURAL(threads);
    if (in->raw)
        printf("raw attention: 1 round, %lld head%s of width %lld, %s scores, %s kernel, %d "
               "thread%s\n", (long long)in->H, plural, (long long)in->d,
               ag_score_kind_name(in->score.kind), ag_attention_kernel(nb, in->d, &in->score), threads,
               tplural);
    else
    {
        char seed[48] = "";   /* only when something was drawn from it */
        if (!(o->features && o->weights))
            snprintf(seed, sizeof seed, ", seed %llu", (unsigned long long)o->seed);
        printf("rounds: %lld (D=%lld, %lld head%s of width %lld, %s scores, %s kernel, %s%s, "
               "%d thread%s)\n", (long long)in->rounds, (long long)in->x0.cols,
               (long long)in->H, plural, (long long)in->d, ag_score_kind_name(in->score.kind),
               ag_attention_kernel(nb, in->d, &in->score),
               o->weights ? (in->n_layers > 1 ? "a layer per round" : "weights from file")
                          : (o->per_node ? "random per-node weights" : "random weights"),
               seed, threads, tplural);
    }
}

/* The messages M [N, H*d] as [H, N, d]: one array per head. */
static int write_head_messages(const char *path, const float *M, int64_t N, int64_t H,
                               int64_t d, ag_error_t *err)
{
    float *per_head = ag_alloc(N * H * d, sizeof *per_head, err, "head messages");
    if (!per_head)
        return ag_alloc_status();
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < N; i++)
            memcpy(per_head + (h * N + i) * d, M + i * H * d + h * d, (size_t)d * sizeof *M);
    const int64_t shape[3] = {H, N, d};
    int rc = ag_npy_write_f32_nd(path, per_head, 3, shape, err);
    free(per_head);
    return rc;
}

int run_with(const run_opts_t *o, run_backend_t *b)
{
    const int root = b->rank == 0;
    out_file_t outs[RUN_N_OUTS];
    run_outputs_init(outs, o);
    ag_error_t err = {AG_OK, ""};
    int usage = 0, u = 0;
    /* Check and create the outputs first: a bad path fails before any work.
       When one is standard output, the report goes to stderr from here on. */
    int rc = root ? out_open_all(outs, RUN_N_OUTS, &usage, &err) : AG_OK;
    if (b->agree)
        rc = b->agree(b, rc, &usage, &err);
    if (!rc) {
        rc = b->load(b, &u, &err);
        usage = usage || u;
    }
    if (!rc)
        rc = b->compute(b, outs, &err);
    if (!rc)
        rc = b->write(b, outs, &err);
    /* Commit before the report: a reader that closes the pipe early (| head)
       ends us with SIGPIPE while printing, and the files must be there by then. */
    if (!rc)
        rc = root ? out_commit_all(outs, RUN_N_OUTS, &err) : AG_OK;
    if (b->agree)
        rc = b->agree(b, rc, NULL, &err);
    if (!rc && !o->quiet)
        rc = b->report(b, &err);
    if (!rc && !o->quiet && root)
        out_say_written(outs, RUN_N_OUTS);
    if (rc && root)
        out_abort_all(outs, RUN_N_OUTS, &err);
    return finish("run", rc, usage, &err);
}

/* ---- run_backend_t on one process ---- */

typedef struct {
    const run_opts_t *o;
    int threads;
    source_t s;
    inputs_t in;
    result_t r;
    ag_matrix_t edges;
    int figures;   /* the per-round figures in the report */
} one_run_t;

static int one_load(run_backend_t *b, int *usage, ag_error_t *err)
{
    one_run_t *x = b->ctx;
    const run_opts_t *o = x->o;
    int rc = source_open(&x->s, &o->src, usage, err);
    if (!rc)
        rc = inputs_check_memory(o, x->s.nb.n_nodes, err);   /* before saying how long */
    if (!rc)
        estimate_early(o, &x->s.nb);   /* a run of hours says so before its setup */
    if (!rc)   /* refused before the work, not after */
        rc = attn_size_check(o, x->s.nb.n_edges, err);
    if (!rc)
        rc = edge_features_load(&x->edges, &x->s, o->edge_features, err);
    if (!rc)
        rc = inputs_load(&x->in, o, x->s.nb.n_nodes, o->edge_features ? &x->edges : NULL, err);
    x->figures = !o->quiet && x->in.rounds > 1 && !ag_model_spec_layer_graphs(&o->model.spec);
    return rc;
}

int run_trace_is_svg(const run_opts_t *o, const out_file_t *outs)
{
    return o->trace && strcasecmp(out_extension(&outs[RUN_TRACE]), "svg") == 0;
}

static int one_compute(run_backend_t *b, out_file_t *outs, ag_error_t *err)
{
    one_run_t *x = b->ctx;
    const run_opts_t *o = x->o;
    return compute(&x->r, &x->in, &x->s, o, x->figures,
                   o->trace && !run_trace_is_svg(o, outs) ? outs[RUN_TRACE].file.path : NULL, err);
}

static int one_write(run_backend_t *b, out_file_t *outs, ag_error_t *err)
{
    one_run_t *x = b->ctx;
    const run_opts_t *o = x->o;
    const result_t *r = &x->r;
    const inputs_t *in = &x->in;
    const int64_t N = x->s.nb.n_nodes - x->s.n_virtual;   /* outputs: the input nodes */
    int rc = AG_OK;
    if (run_trace_is_svg(o, outs))
        rc = write_trace_svg(&outs[RUN_TRACE], r->trace, r->rounds_done, x->s.desc, err);
    if (!rc && o->out)
        rc = ag_npy_write_f32(outs[RUN_OUT].file.path, r->y, N, r->cols, err);
    const float *messages = in->raw ? r->y : r->ws.M;
    if (!rc && (o->messages || o->head_messages) && !r->rounds_done)
        rc = ag_fail(err, AG_EINVAL, "--messages needs at least one round");
    if (!rc && o->messages)
        rc = ag_npy_write_f32(outs[RUN_MESSAGES].file.path, messages, N, in->H * in->d, err);
    if (!rc && o->head_messages)
        rc = write_head_messages(outs[RUN_HEAD_MESSAGES].file.path, messages, N, in->H, in->d,
                                 err);
    for (int k = 0; k < o->n_attn && !rc; k++)
        rc = report_attention(&outs[RUN_ATTN + k], r, in, &x->s, o->max_export, err);
    if (!rc && o->predict)
        rc = write_predictions(outs[RUN_PREDICT].file.path, o->weights,
                               !o->model.spec.n_layers || o->model.spec.readout, r->y, N, r->cols,
                               err);
    return rc;
}

static int one_report(run_backend_t *b, ag_error_t *err)
{
    one_run_t *x = b->ctx;
    const run_opts_t *o = x->o;
    const result_t *r = &x->r;
    print_header(o, &x->s, &x->in, x->threads);
    if (r->trace && (x->figures || o->trace || o->until > 0) && !x->in.raw)
        print_trace(r->trace, r->rounds_done, o, x->in.rounds);
    if (!r->Q)
        return AG_OK;
    printf("attention in %s (mean over heads, top 3 sources%s):\n",
           o->attn_round ? "the --attn-round" : "the last round", weights_note(r));
    return report_summary(stdout, r, &x->in, &x->s, SUMMARY_NODES, err);
}

int cmd_run(int argc, char **argv)
{
    run_opts_t o;
    int status = run_parse(&o, argc, argv);
    if (status >= 0)
        return status;
    one_run_t x;
    memset(&x, 0, sizeof x);
    x.o = &o;
    x.threads = ag_set_threads((int)o.threads);
    run_backend_t one = {.rank = 0, .load = one_load, .compute = one_compute,
                         .write = one_write, .report = one_report, .ctx = &x};
    status = run_with(&o, &one);
    result_free(&x.r);
    inputs_free(&x.in);
    ag_matrix_destroy(&x.edges);
    source_close(&x.s);
    return status;
}
