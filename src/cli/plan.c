/*
 * `attngraph plan`: without running a round, what each of P processes would
 * own, read from the others and take: destinations, in-edges, halo rows,
 * bytes received a round, imbalance, and a round's time from the kernel's
 * rate and the network's bandwidth. Patterns are never compiled whole
 * (ag_partition_pattern), so 1e9 nodes fit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli/cli.h"
#include "base/base.h"
#include "cli/plan.h"

static const opt_def_t plan_options[] = {
    OPT_PROSE("usage: attngraph plan --ranks P[,P...] (GRAPH | --csr INDPTR.npy,INDICES.npy |\n"
              "                      --pattern SPEC --nodes N) [options]\n"
              "\n"
              "Plans a run over P processes without running it: per process, the destinations\n"
              "it owns, their in-edges, its halo (the sources they read that other processes\n"
              "own), the K and V rows of the halo received each round, the imbalance of the\n"
              "work (in-edges + 1 per node: max over mean), and a round's estimated time.\n"
              "Patterns are counted one destination at a time, never compiled whole: exactly\n"
              "when that is quick, else from a sample (the output says which).\n"),
    OPT_VALUE("pattern", OPT_PATTERN, NULL),
    OPT_VALUE("csr", OPT_CSR, NULL),
    OPT_VALUE("ranks", OPT_RANKS,
              "  --ranks P[,P...]    process counts, e.g. 64,256,1024 (1 to 1048576)\n"),
    OPT_VALUE("partition", OPT_PARTITION,
              "  --partition KIND    contiguous (default: ranges balanced by work) or metis\n"
              "                      (graph files and CSR: METIS k-way; the contiguous cut is\n"
              "                      printed beside it)\n"),
    OPT_VALUE("seed", OPT_SEED, "  --seed S            METIS's seed (default 1)\n"),
    OPT_VALUE("dim", OPT_DIM, "  --dim D             model width (default 16)\n"),
    OPT_VALUE("heads", OPT_HEADS, "  --heads H           attention heads (default 1)\n"),
    OPT_VALUE("head-dim", OPT_HEAD_DIM,
              "  --head-dim d        head width (default D/H); a K+V row is 2*H*d float32\n"),
    OPT_VALUE("bandwidth", OPT_BANDWIDTH,
              "  --bandwidth GB/s    network bandwidth per process (default 10; latency is not\n"
              "                      counted)\n"),
    OPT_VALUE("rate", OPT_RATE,
              "  --rate K[,G[,T]]    GFLOP/s per process of the kernel (K) and the projections\n"
              "                      (G), and GB/s of writing memory just allocated (T: the\n"
              "                      first round's buffers); those not given are measured now,\n"
              "                      with --threads threads: the kernel on a small input of the\n"
              "                      same kind, the projections on 65,536 rows, 64 MB to 1 GB\n"
              "                      written, the kernel and the writes with as many processes\n"
              "                      at once as share this machine (of the first P)\n"),
    OPT_VALUE("threads", OPT_THREADS,
              "  --threads T         threads of the measured runs (default: all cores)\n"),
    OPT_VALUE("sample", OPT_SAMPLE,
              "  --sample M          patterns: count M destinations inside each part (and 64 at\n"
              "                      each end) instead of choosing\n"),
    OPT_FLAG("exact", OPT_EXACT,
             "  --exact             patterns: count every destination (slower on huge ones)\n"),
    OPT_FLAG("per-rank", OPT_PER_RANK,
             "  --per-rank          print every process (default: up to 16, else the first\n"
             "                      and last 4 and min / mean / max)\n"),
    OPT_FLAG("json", OPT_JSON,
             "  --json              print one JSON line per P instead of the tables\n"),
    OPT_VALUE("csv", OPT_CSV, "  --csv FILE          every process of every P as CSV\n"),
    OPT_VALUE("nodes", OPT_NODES,
              "  --nodes N           pattern size (default: the pattern's own)\n"),
    OPT_VALUE("self-loops", OPT_SELF_LOOPS,
              "  --self-loops MODE, --format F, --directed, --undirected, --max-nodes N\n"
              "                      as for 'attngraph run'\n"),
    OPT_VALUE("format", OPT_FORMAT, NULL),
    OPT_FLAG("directed", OPT_DIRECTED, NULL),
    OPT_FLAG("undirected", OPT_UNDIRECTED, NULL),
    OPT_VALUE("max-nodes", OPT_MAX_NODES, NULL),
    OPT_HELP_LINE,
    OPT_DEF_END,
};

#define MAX_RANKS (1 << 20)

/* ---- options ---- */

static int parse_ranks(plan_opts_t *po, const char *text)
{
    const char *p = text;
    while (*p) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || (*end && *end != ',') || v < 1 || v > MAX_RANKS ||
            po->n_ranks == PLAN_MAX_RANK_LISTS)
            return usage_error("plan", "--ranks '%s': expected up to %d process counts in "
                               "1..%d, separated by commas", text, PLAN_MAX_RANK_LISTS, MAX_RANKS);
        po->ranks[po->n_ranks++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (!po->n_ranks)
        return usage_error("plan", "--ranks '%s': expected a process count", text);
    return 0;
}

/* --rate KERNEL[,PROJECTIONS[,TOUCH]] in GFLOP/s (TOUCH GB/s), or "measured". */
static int parse_rate(plan_opts_t *po, const char *text)
{
    if (strcmp(text, "measured") == 0)
        return 0;
    double r[3] = {0, 0, 0};
    const char *p = text;
    int ok = 1;
    for (int n = 0; ok && n < 3; n++) {
        char *end;
        r[n] = strtod(p, &end);
        ok = end != p && r[n] > 0 && r[n] < 1e9 && (!*end || (*end == ',' && n < 2));
        if (!*end)
            break;
        p = end + 1;
    }
    if (!ok)
        return usage_error("plan", "--rate '%s': expected the kernel's GFLOP/s (> 0), optionally "
                           "followed by ',' and the projections' and ',' and the GB/s of "
                           "memory written the first time (e.g. 40, 40,200 or 40,200,2), or "
                           "'measured'", text);
    po->rates.kernel_gflops = r[0], po->rates.gemm_gflops = r[1], po->rates.touch_gbs = r[2];
    return 0;
}

static int plan_option(plan_opts_t *po, int c, const opt_parser_t *p)
{
    int64_t v;
    switch (c) {
    case OPT_PATTERN: po->o.src.pattern = p->arg; return 0;
    case OPT_CSR: po->o.src.csr = p->arg; return 0;
    case OPT_RANKS: return parse_ranks(po, p->arg);
    case OPT_PARTITION:
        if (strcmp(p->arg, "contiguous") && strcmp(p->arg, "metis"))
            return usage_error("plan", "--partition '%s': expected contiguous or metis", p->arg);
        po->metis = p->arg[0] == 'm';
        return 0;
    case OPT_BANDWIDTH: return opt_real(&po->bandwidth, "plan", "bandwidth", p->arg, 0, 1);
    case OPT_RATE: return parse_rate(po, p->arg);
    case OPT_SAMPLE:
        if (opt_int(&v, "plan", "sample", p->arg, 1, 100000000))
            return EXIT_USAGE;
        po->sample = v;
        return 0;
    case OPT_EXACT: po->exact = 1; return 0;
    case OPT_PER_RANK: po->per_rank = 1; return 0;
    case OPT_JSON: po->json = 1; return 0;
    case OPT_CSV: po->csv = p->arg; return 0;
    case OPT_NODES:
        return opt_int(&po->o.src.nodes, "plan", "nodes", p->arg, 1, (int64_t)1 << 40);
    default: return input_option(&po->o, c, p->arg, "plan");
    }
}

static int parse(plan_opts_t *po, int argc, char **argv, int *status)
{
    memset(po, 0, sizeof *po);
    run_opts_init(&po->o);
    po->bandwidth = 10;
    opt_parser_t p;
    opt_begin(&p, "plan", plan_options, argc, argv);
    int c;
    while ((c = opt_next(&p)) > 0)
        if ((*status = plan_option(po, c, &p)))
            return -1;
    if (c < 0) {
        *status = p.status;
        return -1;
    }
    *status = EXIT_USAGE;
    if (source_args(&po->o, &p, "plan"))
        return -1;
    if (!po->n_ranks) {
        usage_error("plan", "--ranks P is needed: the number of processes to plan for");
        return -1;
    }
    if (po->exact && po->sample) {
        usage_error("plan", "give --exact or --sample, not both");
        return -1;
    }
    const int pattern_only = po->o.src.pattern && !po->o.src.graph && !po->o.src.csr;
    if ((po->exact || po->sample) && !pattern_only) {
        usage_error("plan", "--%s is for patterns; graph files and CSR are counted exactly",
                    po->exact ? "exact" : "sample");
        return -1;
    }
    if (po->metis && pattern_only) {
        usage_error("plan", "--partition metis is for graph files and CSR; a pattern's parts "
                    "are contiguous ranges");
        return -1;
    }
    if (!pattern_only && po->o.src.nodes) {
        usage_error("plan", "--nodes sizes a pattern; a graph file or CSR has its own");
        return -1;
    }
    if (po->o.heads > 1 && !po->o.head_dim && (po->o.dim ? po->o.dim : DEFAULT_DIM) % po->o.heads) {
        usage_error("plan", "--dim %lld is not a multiple of --heads %lld: give --head-dim",
                    (long long)(po->o.dim ? po->o.dim : DEFAULT_DIM), (long long)po->o.heads);
        return -1;
    }
    if (one_stdin_input(&po->o, 0, "plan"))
        return -1;
    *status = 0;
    return 0;
}

/* ---- counting ---- */

static void parts_free(plan_parts_t *pp)
{
    free(pp->first), free(pp->st), free(pp->window);
    memset(pp, 0, sizeof *pp);
}

static int64_t total_cut(const ag_part_stats_t *st, int P)
{
    int64_t cut = 0;
    for (int p = 0; p < P; p++)
        cut += st[p].n_cut;
    return cut;
}

static int count_graph(plan_parts_t *pp, const plan_opts_t *po, const ag_nbhd_t *nb,
                       ag_error_t *err)
{
    ag_partition_t pt;
    int rc = po->metis ? ag_partition_metis(&pt, nb, pp->P, (int64_t)po->o.seed, err)
                       : ag_partition_contiguous(&pt, nb, pp->P, err);
    if (!rc)
        rc = ag_partition_stats(&pt, nb, pp->st, err);
    if (!rc && pt.contiguous) {
        if (!(pp->first = ag_alloc(pp->P + 1, sizeof *pp->first, err, "plan")))
            rc = ag_alloc_status();
        else
            memcpy(pp->first, pt.first, (size_t)(pp->P + 1) * sizeof *pp->first);
    }
    ag_partition_destroy(&pt);
    pp->exact = 1;
    if (!rc && pp->first && !(pp->window = ag_alloc(pp->P, sizeof *pp->window, err, "plan")))
        rc = ag_alloc_status();
    for (int p = 0; !rc && pp->window && p < pp->P; p++) {
        /* the K/V rows a process holds: from its lowest row or source read to its highest */
        const int64_t lo = pp->first[p], hi = pp->first[p + 1];
        int64_t a = lo, b = hi - 1;
        for (int64_t r = nb->run_ptr[lo]; r < nb->run_ptr[hi]; r++) {
            a = nb->run_src[r] < a ? nb->run_src[r] : a;
            b = nb->run_src[r] + nb->run_len[r] - 1 > b ? nb->run_src[r] + nb->run_len[r] - 1 : b;
        }
        pp->window[p] = hi > lo ? b - a + 1 : 0;
    }
    if (!rc && po->metis) {
        ag_part_stats_t *cs = ag_alloc(pp->P, sizeof *cs, err, "plan");
        rc = cs ? ag_partition_contiguous(&pt, nb, pp->P, err) : ag_alloc_status();
        if (!rc)
            rc = ag_partition_stats(&pt, nb, cs, err);
        if (!rc)
            pp->cut_contiguous = total_cut(cs, pp->P);
        ag_partition_destroy(&pt);
        free(cs);
    }
    return rc;
}

static int count_parts(plan_parts_t *pp, int P, const plan_opts_t *po, const plan_input_t *in,
                       ag_error_t *err)
{
    memset(pp, 0, sizeof *pp);
    pp->P = P;
    pp->cut_contiguous = -1;
    if (!(pp->st = ag_calloc(P, sizeof *pp->st, err, "plan")))
        return ag_alloc_status();
    if (in->nb)
        return count_graph(pp, po, in->nb, err);
    if (!(pp->first = ag_alloc(P + 1, sizeof *pp->first, err, "plan")))
        return ag_alloc_status();
    const int64_t sample = po->exact ? AG_SAMPLE_EXACT : po->sample;
    return ag_partition_pattern(pp->first, pp->st, in->pattern, in->N, in->self, P, sample,
                                &pp->exact, err);
}

/* ---- the command ---- */

/* The input: a pattern parsed (never compiled), or a graph file or CSR compiled. */
static int open_input(plan_input_t *in, ag_pattern_t **pat, source_t *s, const plan_opts_t *po,
                      int *usage, ag_error_t *err)
{
    memset(in, 0, sizeof *in);
    in->self = po->o.src.self;
    if (!po->o.src.pattern || po->o.src.graph || po->o.src.csr) {   /* a pattern over a
                                                                       graph: compiled */
        int rc = source_open(s, &po->o.src, usage, err);
        if (rc)
            return rc;
        in->nb = &s->nb;
        in->N = s->nb.n_nodes;
        in->mean_degree = (double)s->nb.n_edges / (double)in->N;
        return AG_OK;
    }
    int rc = ag_pattern_parse(pat, po->o.src.pattern, err);
    if (rc) {
        *usage = 1;
        return rc;
    }
    in->pattern = *pat;
    in->N = po->o.src.nodes ? po->o.src.nodes : ag_pattern_size(*pat);
    if (!in->N) {
        *usage = 1;
        return ag_fail(err, AG_EINVAL, "pattern '%s' has no size of its own: give --nodes N",
                       po->o.src.pattern);
    }
    snprintf(s->desc, sizeof s->desc, "pattern '%s'", po->o.src.pattern);
    return AG_OK;
}

/* The processes of the first P that would share this machine: as many as
   the cores this process may run on hold with T threads each (the rates are
   measured for the first P's largest process). Without OpenMP the measured
   runs have one thread: one process at a time. */
static int sharing_here(const plan_opts_t *po, int threads)
{
#ifdef _OPENMP
    const int cores = omp_get_num_procs();
#else
    const int cores = 1;
#endif
    const int fit = cores > threads ? cores / threads : 1;
    return fit < po->ranks[0] ? fit : po->ranks[0];
}

int cmd_plan(int argc, char **argv)
{
    plan_opts_t po;
    int status;
    if (parse(&po, argc, argv, &status))
        return status;
    const int threads = ag_set_threads((int)po.o.threads);
    po.rates.threads = threads;
    po.rates.sharing = sharing_here(&po, threads);
    ag_error_t err = {AG_OK, ""};
    int usage = 0;
    source_t s;
    memset(&s, 0, sizeof s);
    ag_pattern_t *pat = NULL;
    plan_input_t in;
    plan_parts_t *pp = calloc((size_t)po.n_ranks, sizeof *pp);
    out_file_t out;
    out_init(&out, po.csv, "--csv", "csv");
    int rc = pp ? out_open_all(&out, 1, &usage, &err) : ag_fail(&err, AG_ENOMEM, "plan");
    if (!rc)
        rc = open_input(&in, &pat, &s, &po, &usage, &err);
    for (int k = 0; k < po.n_ranks && !rc; k++)
        rc = count_parts(&pp[k], po.ranks[k], &po, &in, &err);
    plan_model_t m = {0};
    if (!rc) {
        int64_t E = 0;
        for (int p = 0; p < pp[0].P; p++)
            E += pp[0].st[p].n_edges;
        in.mean_degree = (double)E / (double)in.N;
        in.rows_read = in.most_dst = 0;
        for (int p = 0; p < pp[0].P; p++) {
            const ag_part_stats_t *st = &pp[0].st[p];
            in.rows_read = st->n_dst + st->n_halo > in.rows_read ? st->n_dst + st->n_halo
                                                                  : in.rows_read;
            in.most_dst = st->n_dst > in.most_dst ? st->n_dst : in.most_dst;
        }
        m.D = po.o.dim ? po.o.dim : DEFAULT_DIM;
        m.H = po.o.heads;
        m.d = po.o.head_dim ? po.o.head_dim : m.D / m.H;
        m.row_bytes = 2 * m.H * m.d * (int64_t)sizeof(float);
        m.N = in.N, m.csr = po.o.src.csr != NULL;
        plan_runs_per_node(&m.runs_per_node, &m.one_run, &in);
        m.E = E;
        rc = plan_measure(&po.rates, &in, m.D, m.H, m.d, &err);
        m.kernel = po.rates.kernel_gflops, m.gemm = po.rates.gemm_gflops;
        m.touch = po.rates.touch_gbs;
        m.bandwidth = po.bandwidth;
    }
    if (!rc && po.csv) {
        FILE *f = fopen(out.file.path, "w");
        for (int k = 0; f && k < po.n_ranks; k++)
            plan_write_csv(f, &m, &pp[k], k == 0);
        if (!f || ferror(f) | (fclose(f) != 0))
            rc = ag_fail(&err, AG_EIO, "--csv %s: cannot write", po.csv);
        if (!rc)
            rc = out_commit(&out, &err);
    }
    if (!rc && !po.json)
        plan_print_header(&po, &m, &in, s.desc, &pp[0], threads);
    for (int k = 0; k < po.n_ranks && !rc; k++) {
        if (po.json)
            plan_print_json(&po, &m, &pp[k], &in, s.desc);
        else
            plan_print_table(&po, &m, &pp[k], &in);
    }
    if (rc) {
        out_name_errors(&out, 1, &err);
        out_abort(&out);
    }
    for (int k = 0; pp && k < po.n_ranks; k++)
        parts_free(&pp[k]);
    free(pp);
    ag_pattern_free(pat);
    source_close(&s);
    return finish("plan", rc, usage, &err);
}
