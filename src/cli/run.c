/* `attngraph run`: load a graph, run message rounds, report and write outputs. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>

#include "cli.h"

#define SUMMARY_NODES 20
#define DEFAULT_DIM 16

typedef struct {
    const char *graph;
    const char *format;
    int64_t max_nodes;
    const char *q, *k, *v;          /* raw attention mode */
    const char *features;           /* rounds mode */
    int64_t dim, head_dim;
    const char *weights;
    int64_t rounds;
    int64_t heads;
    uint64_t seed;
    int64_t threads;                /* 0: all cores */
    const char *out, *attn;
    int quiet;
} run_opts_t;

static const char run_usage[] =
    "usage: attngraph run GRAPH [options]\n"
    "\n"
    "Runs attention message rounds on GRAPH (edge u -> v: v attends to u).\n"
    "\n"
    "Raw attention (one round on given messages; the output is M [N, H*d]):\n"
    "  --q Q.npy --k K.npy --v V.npy   queries, keys, values [N, H*d]\n"
    "\n"
    "Rounds with projections (the output is the final X [N, D]):\n"
    "  --features X.npy    node states [N, D]\n"
    "  --dim D             seeded random features of width D instead (default 16)\n"
    "  --weights DIR       DIR/wq.npy wk.npy wv.npy [H*d, D], wo.npy [D, H*d]\n"
    "                      (default: seeded random, std 1/sqrt(fan_in))\n"
    "  --head-dim d        head width for random weights (default D/H)\n"
    "  --rounds R          message rounds (default 1)\n"
    "\n"
    "Common:\n"
    "  --heads H           attention heads (default 1)\n"
    "  --seed S            seed for random features and weights (default 1)\n"
    "  --threads T         OpenMP and OpenBLAS threads (default: all cores)\n"
    "  --format F          graph format: edgelist, ncol, lgl, graphml, gml, pajek\n"
    "                      (default: from the extension)\n"
    "  --max-nodes N       refuse graphs with more nodes (default 20000000)\n"
    "  --out FILE.npy      write the output (float32)\n"
    "  --attn FILE.csv     write per-edge attention of the last round:\n"
    "                      src,dst,src_label,dst_label,head,weight\n"
    "  --quiet             print nothing on success\n"
    "  --help              this text\n";

static int usage_error(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "attngraph run: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\nsee 'attngraph run --help'\n");
    return EXIT_USAGE;
}

/* Parses an integer option value in [min, max]; returns 0 on success. */
static int parse_int(int64_t *out, const char *name, const char *text, int64_t min, int64_t max)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) {
        char range[64];
        snprintf(range, sizeof range, "an integer in %lld..%lld", (long long)min, (long long)max);
        fprintf(stderr, "attngraph run: --%s '%s' is not %s\nsee 'attngraph run --help'\n",
                name, text, range);
        return -1;
    }
    *out = v;
    return 0;
}

/* Returns -1 to continue, else an exit status. */
static int parse_run(run_opts_t *o, int argc, char **argv)
{
    enum { O_Q = 256, O_K, O_V, O_FEATURES, O_DIM, O_HEAD_DIM, O_WEIGHTS, O_ROUNDS, O_HEADS,
           O_SEED, O_THREADS, O_FORMAT, O_MAX_NODES, O_OUT, O_ATTN, O_QUIET, O_HELP };
    static const struct option longopts[] = {
        {"q", required_argument, 0, O_Q}, {"k", required_argument, 0, O_K},
        {"v", required_argument, 0, O_V}, {"features", required_argument, 0, O_FEATURES},
        {"dim", required_argument, 0, O_DIM}, {"head-dim", required_argument, 0, O_HEAD_DIM},
        {"weights", required_argument, 0, O_WEIGHTS}, {"rounds", required_argument, 0, O_ROUNDS},
        {"heads", required_argument, 0, O_HEADS}, {"seed", required_argument, 0, O_SEED},
        {"threads", required_argument, 0, O_THREADS}, {"format", required_argument, 0, O_FORMAT},
        {"max-nodes", required_argument, 0, O_MAX_NODES}, {"out", required_argument, 0, O_OUT},
        {"attn", required_argument, 0, O_ATTN}, {"quiet", no_argument, 0, O_QUIET},
        {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0},
    };
    *o = (run_opts_t){.rounds = 1, .heads = 1, .seed = 1, .max_nodes = AG_DEFAULT_MAX_NODES};
    int64_t seed = 1;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case O_Q: o->q = optarg; break;
        case O_K: o->k = optarg; break;
        case O_V: o->v = optarg; break;
        case O_FEATURES: o->features = optarg; break;
        case O_DIM: bad = parse_int(&o->dim, "dim", optarg, 1, 1 << 20); break;
        case O_HEAD_DIM: bad = parse_int(&o->head_dim, "head-dim", optarg, 1, 1 << 20); break;
        case O_WEIGHTS: o->weights = optarg; break;
        case O_ROUNDS: bad = parse_int(&o->rounds, "rounds", optarg, 0, 1000000); break;
        case O_HEADS: bad = parse_int(&o->heads, "heads", optarg, 1, 4096); break;
        case O_SEED: bad = parse_int(&seed, "seed", optarg, 0, INT64_MAX); break;
        case O_THREADS: bad = parse_int(&o->threads, "threads", optarg, 1, 1024); break;
        case O_FORMAT: o->format = optarg; break;
        case O_MAX_NODES: bad = parse_int(&o->max_nodes, "max-nodes", optarg, 1, INT64_MAX / 64); break;
        case O_OUT: o->out = optarg; break;
        case O_ATTN: o->attn = optarg; break;
        case O_QUIET: o->quiet = 1; break;
        case O_HELP: fputs(run_usage, stdout); return 0;
        case ':': return usage_error("option '%s' needs a value%s", argv[optind - 1], "");
        default: return usage_error("unknown option '%s'%s", argv[optind - 1], "");
        }
        if (bad)
            return EXIT_USAGE;
    }
    o->seed = (uint64_t)seed;
    if (optind >= argc)
        return usage_error("no GRAPH file given%s%s", "", "");
    if (optind + 1 < argc)
        return usage_error("unexpected argument '%s'%s", argv[optind + 1], "");
    o->graph = argv[optind];
    int n_qkv = !!o->q + !!o->k + !!o->v;
    if (n_qkv != 0 && n_qkv != 3)
        return usage_error("--q, --k and --v go together%s%s", "", "");
    if (n_qkv && (o->features || o->dim || o->weights || o->head_dim))
        return usage_error("--q/--k/--v run raw attention; they do not mix with --features, "
                           "--dim, --head-dim or --weights%s%s", "", "");
    if (n_qkv && o->rounds != 1)
        return usage_error("--q/--k/--v run exactly one round%s%s", "", "");
    if (o->features && o->dim)
        return usage_error("give --features or --dim, not both%s%s", "", "");
    if (o->weights && o->head_dim)
        return usage_error("--head-dim is for random weights; --weights sets its own%s%s", "", "");
    return -1;
}

/* Everything a run owns, released in one place. */
typedef struct {
    igraph_t graph;
    int have_graph;
    ag_labels_t labels;
    ag_nbhd_t nb;
    ag_matrix_t q, k, v, x;
    float *msgs;
    ag_weights_t w;
    ag_workspace_t ws;
    out_file_t out, attn;
} run_state_t;

static void run_free(run_state_t *s)
{
    if (s->have_graph)
        igraph_destroy(&s->graph);
    ag_labels_destroy(&s->labels);
    ag_nbhd_destroy(&s->nb);
    ag_matrix_destroy(&s->q);
    ag_matrix_destroy(&s->k);
    ag_matrix_destroy(&s->v);
    ag_matrix_destroy(&s->x);
    free(s->msgs);
    ag_weights_destroy(&s->w);
    ag_workspace_destroy(&s->ws);
}

static int read_rows(ag_matrix_t *m, const char *path, int64_t N, ag_error_t *err)
{
    int rc = ag_matrix_read_npy(m, path, err);
    if (!rc && m->rows != N) {
        snprintf(err->msg, sizeof err->msg, "%s has %lld rows, the graph has %lld nodes", path,
                 (long long)m->rows, (long long)N);
        rc = err->status = AG_EINVAL;
    }
    return rc;
}

/* Raw attention on given Q, K, V; sets *H, *d and the outputs. */
static int run_raw(run_state_t *s, const run_opts_t *o, int64_t N, int64_t *d, ag_error_t *err)
{
    int rc = read_rows(&s->q, o->q, N, err);
    if (!rc)
        rc = read_rows(&s->k, o->k, N, err);
    if (!rc)
        rc = read_rows(&s->v, o->v, N, err);
    if (rc)
        return rc;
    const int64_t HD = s->q.cols;
    if (s->k.cols != HD || s->v.cols != HD) {
        snprintf(err->msg, sizeof err->msg, "%s has %lld columns and %s %lld; expected the %lld "
                 "of %s", s->k.cols != HD ? o->k : o->v,
                 (long long)(s->k.cols != HD ? s->k.cols : s->v.cols), o->q, (long long)HD,
                 (long long)HD, o->q);
        return err->status = AG_EINVAL;
    }
    if (HD == 0 || HD % o->heads) {
        snprintf(err->msg, sizeof err->msg, "%s has %lld columns, not a positive multiple of "
                 "%lld heads", o->q, (long long)HD, (long long)o->heads);
        return err->status = AG_EINVAL;
    }
    *d = HD / o->heads;
    s->msgs = malloc((size_t)(N * HD) * sizeof(float));
    if (!s->msgs) {
        snprintf(err->msg, sizeof err->msg, "out of memory for messages [%lld, %lld]",
                 (long long)N, (long long)HD);
        return err->status = AG_ENOMEM;
    }
    return ag_attention(&s->nb, s->q.data, s->k.data, s->v.data, o->heads, *d, s->msgs, err);
}

/* Message rounds with projections. */
static int run_rounds(run_state_t *s, const run_opts_t *o, int64_t N, ag_error_t *err)
{
    int rc;
    if (o->features) {
        if ((rc = read_rows(&s->x, o->features, N, err)))
            return rc;
    } else {
        if ((rc = ag_matrix_init(&s->x, N, o->dim ? o->dim : DEFAULT_DIM, err)))
            return rc;
        ag_random_normal(s->x.data, s->x.rows * s->x.cols, o->seed, 0, 1.0f);
    }
    const int64_t D = s->x.cols;
    if (o->weights) {
        if ((rc = ag_weights_load(&s->w, o->weights, o->heads, err)))
            return rc;
        if (s->w.D != D) {
            snprintf(err->msg, sizeof err->msg, "%s/wq.npy has %lld columns (D); the features "
                     "have %lld", o->weights, (long long)s->w.D, (long long)D);
            return err->status = AG_EINVAL;
        }
    } else {
        int64_t d = o->head_dim;
        if (!d && D % o->heads) {
            snprintf(err->msg, sizeof err->msg, "width D=%lld is not a multiple of %lld heads; "
                     "set --head-dim", (long long)D, (long long)o->heads);
            return err->status = AG_EINVAL;
        }
        if ((rc = ag_weights_random(&s->w, D, o->heads, d ? d : D / o->heads, o->seed, err)))
            return rc;
    }
    if ((rc = ag_workspace_init(&s->ws, N, s->w.H * s->w.d, err)))
        return rc;
    return ag_rounds_run(&s->nb, &s->w, s->x.data, (int)o->rounds, &s->ws, err);
}

static void set_threads(int64_t threads)
{
#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads((int)threads);
    openblas_set_num_threads(omp_get_max_threads());
#else
    openblas_set_num_threads(threads > 0 ? (int)threads : 1);
#endif
}

static int threads_in_use(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int cmd_run(int argc, char **argv)
{
    run_opts_t o;
    int status = parse_run(&o, argc, argv);
    if (status >= 0)
        return status;
    set_threads(o.threads);

    run_state_t s;
    memset(&s, 0, sizeof s);
    ag_error_t err = {AG_OK, ""};
    ag_load_opts_t load = {AG_FORMAT_AUTO, o.max_nodes};
    int rc = o.format ? ag_format_parse(&load.format, o.format, &err)
                      : ag_format_from_path(&load.format, o.graph, &err);
    if (rc) {
        fprintf(stderr, "attngraph run: %s\n", err.msg);
        return o.format ? EXIT_USAGE : EXIT_BAD_INPUT;
    }
    /* Create the outputs first: a bad path fails before any work. */
    if (!rc)
        rc = out_open(&s.out, o.out, &err);
    if (!rc)
        rc = out_open(&s.attn, o.attn, &err);
    if (!rc && !(rc = ag_graph_load(&s.graph, o.graph, &load, &err)))
        s.have_graph = 1;
    if (!rc)
        rc = ag_labels_from_graph(&s.labels, &s.graph, &err);
    if (!rc)
        rc = ag_nbhd_from_graph(&s.nb, &s.graph, &err);

    const int64_t N = s.have_graph ? igraph_vcount(&s.graph) : 0;
    const int raw = o.q != NULL;
    int64_t d = 0;
    if (!rc)
        rc = raw ? run_raw(&s, &o, N, &d, &err) : run_rounds(&s, &o, N, &err);
    if (!raw)
        d = s.w.d;
    /* The last round's queries and keys, for the weights we report. */
    const float *Q = raw ? s.q.data : s.ws.Q, *K = raw ? s.k.data : s.ws.K;
    const int have_attention = raw || o.rounds > 0;
    const float *result = raw ? s.msgs : s.x.data;
    const int64_t cols = raw ? s.q.cols : s.x.cols;

    if (!rc && o.out)
        rc = ag_npy_write_f32(s.out.tmp, result, N, cols, &err);
    if (!rc && o.attn && !have_attention) {
        snprintf(err.msg, sizeof err.msg, "--attn needs at least one round (--rounds 0 given)");
        rc = err.status = AG_EINVAL;
    }
    if (!rc && o.attn)
        rc = report_attention_csv(s.attn.tmp, &s.nb, &s.labels, Q, K, o.heads, d, &err);

    if (!rc && !o.quiet) {
        printf("graph: %s (%s, %s): %lld nodes, %" IGRAPH_PRId " edges, %lld messages\n",
               o.graph, ag_format_name(load.format),
               igraph_is_directed(&s.graph) ? "directed" : "undirected", (long long)N,
               igraph_ecount(&s.graph), (long long)s.nb.n_edges);
        if (raw)
            printf("raw attention: 1 round, %lld head%s of width %lld, %d thread%s\n",
                   (long long)o.heads, o.heads > 1 ? "s" : "", (long long)d, threads_in_use(),
                   threads_in_use() > 1 ? "s" : "");
        else
            printf("rounds: %lld (D=%lld, %lld head%s of width %lld, %s, seed %llu, %d thread%s)\n",
                   (long long)o.rounds, (long long)s.x.cols, (long long)o.heads,
                   o.heads > 1 ? "s" : "", (long long)d,
                   o.weights ? "weights from file" : "random weights",
                   (unsigned long long)o.seed, threads_in_use(), threads_in_use() > 1 ? "s" : "");
        if (have_attention) {
            printf("attention in the last round (mean over heads, top 3 sources):\n");
            rc = report_summary(stdout, &s.nb, &s.labels, Q, K, o.heads, d, SUMMARY_NODES, &err);
        }
    }
    if (!rc)
        rc = out_commit(&s.out, &err);
    if (!rc)
        rc = out_commit(&s.attn, &err);
    if (!rc && !o.quiet) {
        if (o.out)
            printf("wrote %s [%lld, %lld] float32\n", o.out, (long long)N, (long long)cols);
        if (o.attn)
            printf("wrote %s (%lld rows)\n", o.attn, (long long)(s.nb.n_edges * o.heads));
    }
    if (rc) {
        out_abort(&s.out);
        out_abort(&s.attn);
        fprintf(stderr, "attngraph: %s\n", err.msg);
    }
    run_free(&s);
    return rc ? EXIT_BAD_INPUT : 0;
}
