/* Options shared by run and compare, and the computation they share. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>

#include "cli.h"
#include "internal.h"

const struct option input_options[] = {
    {"q", required_argument, 0, OPT_Q}, {"k", required_argument, 0, OPT_K},
    {"v", required_argument, 0, OPT_V}, {"features", required_argument, 0, OPT_FEATURES},
    {"dim", required_argument, 0, OPT_DIM}, {"head-dim", required_argument, 0, OPT_HEAD_DIM},
    {"weights", required_argument, 0, OPT_WEIGHTS}, {"rounds", required_argument, 0, OPT_ROUNDS},
    {"heads", required_argument, 0, OPT_HEADS}, {"seed", required_argument, 0, OPT_SEED},
    {"threads", required_argument, 0, OPT_THREADS}, {"format", required_argument, 0, OPT_FORMAT},
    {"max-nodes", required_argument, 0, OPT_MAX_NODES}, {"nodes", required_argument, 0, OPT_NODES},
    {"tokens", required_argument, 0, OPT_TOKENS},
    {"labels-file", required_argument, 0, OPT_LABELS_FILE},
    {"self-loops", required_argument, 0, OPT_SELF_LOOPS},
    {"quiet", no_argument, 0, OPT_QUIET}, {"help", no_argument, 0, OPT_HELP},
    {0, 0, 0, 0},
};

void run_opts_init(run_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->rounds = 1;
    o->heads = 1;
    o->seed = 1;
    o->src.max_nodes = AG_DEFAULT_MAX_NODES;
}

int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "attngraph %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nsee 'attngraph %s --help'\n", cmd);
    va_end(ap);
    return EXIT_USAGE;
}

int getopt_error(const char *cmd, int c, char **argv)
{
    if (c == ':')
        return usage_error(cmd, "option '%s' needs a value", argv[optind - 1]);
    return usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
}

/* An integer option value in [min, max]; 0 on success. */
static int parse_int(int64_t *out, const char *cmd, const char *name, const char *text,
                     int64_t min, int64_t max)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max)
        return usage_error(cmd, "--%s '%s' is not an integer in %lld..%lld", name, text,
                           (long long)min, (long long)max);
    *out = v;
    return 0;
}

int input_option(run_opts_t *o, int code, const char *arg, const char *cmd)
{
    int64_t v;
    switch (code) {
    case OPT_Q: o->q = arg; return 0;
    case OPT_K: o->k = arg; return 0;
    case OPT_V: o->v = arg; return 0;
    case OPT_FEATURES: o->features = arg; return 0;
    case OPT_WEIGHTS: o->weights = arg; return 0;
    case OPT_FORMAT: o->src.format = arg; return 0;
    case OPT_TOKENS: o->src.tokens = arg; return 0;
    case OPT_LABELS_FILE: o->src.labels_file = arg; return 0;
    case OPT_QUIET: o->quiet = 1; return 0;
    case OPT_DIM: return parse_int(&o->dim, cmd, "dim", arg, 1, 1 << 20);
    case OPT_HEAD_DIM: return parse_int(&o->head_dim, cmd, "head-dim", arg, 1, 1 << 20);
    case OPT_ROUNDS: return parse_int(&o->rounds, cmd, "rounds", arg, 0, 1000000);
    case OPT_HEADS: return parse_int(&o->heads, cmd, "heads", arg, 1, 4096);
    case OPT_THREADS: return parse_int(&o->threads, cmd, "threads", arg, 1, 1024);
    case OPT_NODES: return parse_int(&o->src.nodes, cmd, "nodes", arg, 1, INT64_MAX / 64);
    case OPT_MAX_NODES:
        return parse_int(&o->src.max_nodes, cmd, "max-nodes", arg, 1, INT64_MAX / 64);
    case OPT_SEED:
        if (parse_int(&v, cmd, "seed", arg, 0, INT64_MAX))
            return EXIT_USAGE;
        o->seed = (uint64_t)v;
        return 0;
    case OPT_SELF_LOOPS:
        if (strcmp(arg, "on") == 0)
            o->src.self = AG_SELF_ON;
        else if (strcmp(arg, "off") == 0)
            o->src.self = AG_SELF_OFF;
        else if (strcmp(arg, "keep") == 0)
            o->src.self = AG_SELF_KEEP;
        else
            return usage_error(cmd, "--self-loops '%s': expected on, off or keep", arg);
        return 0;
    default:
        return 1;
    }
}

int input_options_check(const run_opts_t *o, const char *cmd)
{
    int n_qkv = !!o->q + !!o->k + !!o->v;
    if (n_qkv != 0 && n_qkv != 3)
        return usage_error(cmd, "--q, --k and --v go together");
    if (n_qkv && (o->features || o->dim || o->weights || o->head_dim))
        return usage_error(cmd, "--q/--k/--v run raw attention; they do not mix with "
                           "--features, --dim, --head-dim or --weights");
    if (n_qkv && o->rounds != 1)
        return usage_error(cmd, "--q/--k/--v run exactly one round");
    if (o->features && o->dim)
        return usage_error(cmd, "give --features or --dim, not both");
    if (o->weights && o->head_dim)
        return usage_error(cmd, "--head-dim is for random weights; --weights sets its own");
    if (o->src.tokens && o->src.labels_file)
        return usage_error(cmd, "give --tokens or --labels-file, not both");
    return 0;
}

int set_threads(int64_t threads)
{
#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads((int)threads);
    int n = omp_get_max_threads();
#else
    int n = 1;
    (void)threads;
#endif
    openblas_set_num_threads(n);
    return n;
}

/* ---- inputs ---- */

static int read_rows(ag_matrix_t *m, const char *path, int64_t N, ag_error_t *err)
{
    int rc = ag_matrix_read_npy(m, path, err);
    if (!rc && m->rows != N) {
        rc = ag_fail(err, AG_EINVAL, "%s has %lld rows, the graph has %lld nodes", path,
                     (long long)m->rows, (long long)N);
        ag_matrix_destroy(m);
    }
    return rc;
}

static int load_raw(inputs_t *in, const run_opts_t *o, ag_error_t *err)
{
    int rc = read_rows(&in->q, o->q, in->N, err);
    if (!rc)
        rc = read_rows(&in->k, o->k, in->N, err);
    if (!rc)
        rc = read_rows(&in->v, o->v, in->N, err);
    if (rc)
        return rc;
    const int64_t HD = in->q.cols;
    if (in->k.cols != HD)
        return ag_fail(err, AG_EINVAL, "%s has %lld columns; %s has %lld", o->k,
                       (long long)in->k.cols, o->q, (long long)HD);
    if (in->v.cols != HD)
        return ag_fail(err, AG_EINVAL, "%s has %lld columns; %s has %lld", o->v,
                       (long long)in->v.cols, o->q, (long long)HD);
    if (HD == 0 || HD % o->heads)
        return ag_fail(err, AG_EINVAL, "%s has %lld columns, not a positive multiple of %lld "
                       "heads", o->q, (long long)HD, (long long)o->heads);
    in->d = HD / o->heads;
    return AG_OK;
}

static int load_rounds(inputs_t *in, const run_opts_t *o, ag_error_t *err)
{
    int rc;
    if (o->features) {
        if ((rc = read_rows(&in->x0, o->features, in->N, err)))
            return rc;
    } else {
        if ((rc = ag_matrix_init(&in->x0, in->N, o->dim ? o->dim : DEFAULT_DIM, err)))
            return rc;
        ag_random_normal(in->x0.data, in->x0.rows * in->x0.cols, o->seed, 0, 1.0f);
    }
    const int64_t D = in->x0.cols;
    if (o->weights) {
        if ((rc = ag_weights_load(&in->w, o->weights, o->heads, err)))
            return rc;
        if (in->w.D != D)
            return ag_fail(err, AG_EINVAL, "%s/wq.npy has %lld columns (D); the features have "
                           "%lld", o->weights, (long long)in->w.D, (long long)D);
    } else {
        if (!o->head_dim && D % o->heads)
            return ag_fail(err, AG_EINVAL, "width D=%lld is not a multiple of %lld heads; set "
                           "--head-dim", (long long)D, (long long)o->heads);
        int64_t d = o->head_dim ? o->head_dim : D / o->heads;
        if ((rc = ag_weights_random(&in->w, D, o->heads, d, o->seed, err)))
            return rc;
    }
    in->d = in->w.d;
    return AG_OK;
}

int inputs_load(inputs_t *in, const run_opts_t *o, int64_t N, ag_error_t *err)
{
    memset(in, 0, sizeof *in);
    in->raw = o->q != NULL;
    in->N = N;
    in->H = o->heads;
    int rc = in->raw ? load_raw(in, o, err) : load_rounds(in, o, err);
    if (rc)
        inputs_free(in);
    return rc;
}

void inputs_free(inputs_t *in)
{
    ag_matrix_destroy(&in->q);
    ag_matrix_destroy(&in->k);
    ag_matrix_destroy(&in->v);
    ag_matrix_destroy(&in->x0);
    ag_weights_destroy(&in->w);
}

/* ---- compute ---- */

int compute(result_t *r, const inputs_t *in, const ag_nbhd_t *nb, int64_t rounds,
            ag_error_t *err)
{
    memset(r, 0, sizeof *r);
    const int64_t N = in->N, HD = in->H * in->d;
    r->cols = in->raw ? HD : in->x0.cols;
    r->y = ag_alloc(N * r->cols, sizeof(float), err, "output");
    if (!r->y)
        return AG_ENOMEM;
    int rc;
    if (in->raw) {
        r->Q = in->q.data;
        r->K = in->k.data;
        rc = ag_attention(nb, in->q.data, in->k.data, in->v.data, in->H, in->d, r->y, err);
    } else {
        memcpy(r->y, in->x0.data, (size_t)(N * r->cols) * sizeof(float));
        rc = ag_workspace_init(&r->ws, N, HD, err);
        if (!rc)
            rc = ag_rounds_run(nb, &in->w, r->y, (int)rounds, &r->ws, err);
        if (rounds > 0) {
            r->Q = r->ws.Q;
            r->K = r->ws.K;
        }
    }
    if (rc)
        result_free(r);
    return rc;
}

void result_free(result_t *r)
{
    free(r->y);
    r->y = NULL;
    ag_workspace_destroy(&r->ws);
}
