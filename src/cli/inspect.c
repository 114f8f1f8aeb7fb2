/* `attngraph inspect`: questions about a run's attention, answered without rerunning by hand. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/base.h"

static const opt_def_t inspect_options[] = {
    OPT_PROSE("usage: attngraph inspect (GRAPH | --pattern SPEC ...) [run options]\n"
              "                         (--who NODE [--to NODE] | --top K)\n"
              "\n"
              "Runs like 'attngraph run', then answers about the last round's attention (or\n"
              "--attn-round R's). NODE is a label or a node id.\n"),
    OPT_VALUE("who", OPT_WHO, "  --who A --to B      how much A attends B, per head and mean\n"),
    OPT_VALUE("to", OPT_TO, NULL),
    OPT_PROSE("  --who A             everything A attends, strongest first\n"),
    OPT_VALUE("top", OPT_TOP,
              "  --top K             the K strongest edges of the graph (mean over heads)\n"),
    OPT_VALUE("attn-round", OPT_ATTN_ROUND,
              "  --attn-round R      ask about round R instead of the last\n"),
    OPT_PROSE("\n"),
    OPT_TABLE(input_options),
    OPT_TABLE(input_source_options),
    OPT_VALUE("max-edges", OPT_MAX_EDGES,
              "  --max-edges N       refuse --top over more than N weights (default 50000000)\n"),
    OPT_HELP_LINE,
    OPT_TABLE_UNLISTED(quiet_refused),
    OPT_DEF_END,
};

/* A node named by its label (which must be unique) or its id. */
static int resolve(int64_t *node, const char *name, const ag_labels_t *labels, ag_error_t *err)
{
    int64_t found = -1, second = -1;
    for (int64_t i = 0; labels->str && i < labels->n && second < 0; i++)   /* NULL: ids */
        if (strcmp(labels->str[i], name) == 0) {
            if (found < 0)
                found = i;
            else
                second = i;
        }
    if (second >= 0)
        return ag_fail(err, AG_EINVAL, "label '%s' names nodes %lld and %lld (at least); give "
                       "a node id", name, (long long)found, (long long)second);
    if (found >= 0) {
        *node = found;
        return AG_OK;
    }
    char *end;
    errno = 0;
    long long id = strtoll(name, &end, 10);
    if (*name && !*end && !errno && id >= 0 && id < labels->n) {
        *node = id;
        return AG_OK;
    }
    return ag_fail(err, AG_EINVAL, "no node is labelled '%s', and it is not a node id in "
                   "0..%lld", name, (long long)labels->n - 1);
}

/* Prints "(head 0: 15.0%, head 1: 25.0%)" for per-head weights w[0..H). */
static void print_heads(const double *w, int64_t H)
{
    if (H == 1)
        return;
    printf(" (");
    for (int64_t h = 0; h < H; h++)
        printf("%shead %lld: %.1f%%", h ? ", " : "", (long long)h, 100.0 * w[h]);
    printf(")");
}

/* One source of a destination, its weights summed over parallel edges. */
typedef struct {
    int64_t src;
    double mean, *heads;
} pick_t;

static int by_mean_desc(const void *a, const void *b)
{
    const pick_t *x = a, *y = b;
    return (x->mean < y->mean) - (x->mean > y->mean);
}

/* --who A [--to B]: A's sources with their weights, strongest first. */
static int answer_who(const result_t *r, const inputs_t *in, const source_t *s, int64_t a,
                      int64_t b, int have_b, ag_error_t *err)
{
    const ag_nbhd_t *nb = &s->nb;
    const int64_t lo = nb->edge_ptr[a], deg = nb->edge_ptr[a + 1] - lo, H = in->H;
    float *W = ag_alloc(deg * H + 1, sizeof *W, err, "inspect");
    int64_t *src = ag_alloc(deg + 1, sizeof *src, err, "inspect");
    pick_t *picks = ag_calloc(deg + 1, sizeof *picks, err, "inspect");
    double *heads = ag_calloc(deg * H + 1, sizeof *heads, err, "inspect");
    int rc = W && src && picks && heads ? result_weights(r, in, s, a, a + 1, W, err)
                                        : ag_alloc_status();
    int64_t n = 0;
    if (!rc) {
        ag_nbhd_sources(nb, a, a + 1, src);
        for (int64_t e = 0; e < deg; e++) {
            if (n == 0 || picks[n - 1].src != src[e])   /* sources ascend: merge multi-edges */
                picks[n] = (pick_t){src[e], 0, heads + n * H}, n++;
            for (int64_t h = 0; h < H; h++) {
                picks[n - 1].heads[h] += W[e * H + h];
                picks[n - 1].mean += W[e * H + h] / (double)H;
            }
        }
        qsort(picks, (size_t)n, sizeof *picks, by_mean_desc);
    }
    char buf_a[AG_LABEL_NUMBER_SIZE], buf_b[AG_LABEL_NUMBER_SIZE];
    const char *la = ag_label(&s->labels, a, buf_a, sizeof buf_a);
    const char *lb = have_b ? ag_label(&s->labels, b, buf_b, sizeof buf_b) : "";
    if (!rc && have_b) {
        int64_t k = 0;
        while (k < n && picks[k].src != b)
            k++;
        if (k == n) {
            printf("'%s' does not attend '%s': there is no edge %s -> %s\n", la, lb, lb, la);
        } else {
            printf("'%s' attends '%s': %.1f%%", la, lb, 100.0 * picks[k].mean);
            print_heads(picks[k].heads, H);
            printf("\n");
        }
    } else if (!rc) {
        if (n)
            printf("'%s' attends (mean over heads, strongest first%s):\n", la, weights_note(r));
        else
            printf("'%s' attends nothing (no in-edges)\n", la);
        for (int64_t k = 0; k < n; k++) {
            printf("  '%s': %.1f%%", ag_label(&s->labels, picks[k].src, buf_b, sizeof buf_b),
                   100.0 * picks[k].mean);
            print_heads(picks[k].heads, H);
            printf("\n");
        }
    }
    free(W), free(src), free(picks), free(heads);
    return rc;
}

/* --top K: the strongest messages, mean over heads. */
static int answer_top(const result_t *r, const inputs_t *in, const source_t *s, int64_t K,
                      int64_t max_export, ag_error_t *err)
{
    const ag_nbhd_t *nb = &s->nb;
    const int64_t E = nb->n_edges, H = in->H, N = nb->n_nodes;
    if (E * H > max_export)
        return ag_fail(err, AG_ELIMIT, "--top needs all %lld weights, more than --max-edges %lld",
                       (long long)(E * H), (long long)max_export);
    if (K > E)
        K = E;
    float *W = ag_alloc(E * H + 1, sizeof *W, err, "inspect");
    int64_t *src = ag_alloc(E + 1, sizeof *src, err, "inspect");
    pick_t *best = ag_calloc(K + 1, sizeof *best, err, "inspect");
    int64_t *best_dst = ag_calloc(K + 1, sizeof *best_dst, err, "inspect");
    int rc = W && src && best && best_dst ? result_weights(r, in, s, 0, N, W, err)
                                          : ag_alloc_status();
    int64_t n = 0;
    if (!rc) {
        ag_nbhd_sources(nb, 0, N, src);
        for (int64_t i = 0; i < N; i++)
            for (int64_t e = nb->edge_ptr[i]; e < nb->edge_ptr[i + 1]; e++) {
                double m = 0;
                for (int64_t h = 0; h < H; h++)
                    m += W[e * H + h] / (double)H;
                /* insert into the sorted best-K (ties keep the earlier edge) */
                int64_t at = n < K ? n++ : K;
                while (at > 0 && best[at - 1].mean < m) {
                    if (at < K)
                        best[at] = best[at - 1], best_dst[at] = best_dst[at - 1];
                    at--;
                }
                if (at < K)
                    best[at] = (pick_t){src[e], m, NULL}, best_dst[at] = i;
            }
        if (n == 1)
            printf("the strongest edge (mean over heads):\n");
        else
            printf("the %lld strongest edges (mean over heads):\n", (long long)n);
        for (int64_t k = 0; k < n; k++) {
            char buf_d[AG_LABEL_NUMBER_SIZE], buf_s[AG_LABEL_NUMBER_SIZE];
            printf("  '%s' attends '%s': %.1f%%\n",
                   ag_label(&s->labels, best_dst[k], buf_d, sizeof buf_d),
                   ag_label(&s->labels, best[k].src, buf_s, sizeof buf_s), 100.0 * best[k].mean);
        }
    }
    free(W), free(src), free(best), free(best_dst);
    return rc;
}

int cmd_inspect(int argc, char **argv)
{
    run_opts_t o;
    run_opts_init(&o);
    const char *who = NULL, *to = NULL;
    int64_t top = 0;
    opt_parser_t p;
    opt_begin(&p, "inspect", inspect_options, argc, argv);
    int c;
    while ((c = opt_next(&p)) > 0) {
        int rc = input_option(&o, c, p.arg, "inspect");
        if (rc == 0)
            continue;
        if (rc != 1)
            return rc;
        switch (c) {
        case OPT_PATTERN: o.src.pattern = p.arg; break;
        case OPT_CSR: o.src.csr = p.arg; break;
        case OPT_WHO: who = p.arg; break;
        case OPT_TO: to = p.arg; break;
        case OPT_TOP:
        case OPT_ATTN_ROUND:
        case OPT_MAX_EDGES:
            if (opt_int(c == OPT_TOP ? &top : c == OPT_ATTN_ROUND ? &o.attn_round : &o.max_export,
                        "inspect", p.name, p.arg, 1, INT64_MAX))
                return EXIT_USAGE;
            break;
        }
    }
    if (c < 0)
        return p.status;
    if (source_args(&o, &p, "inspect"))
        return EXIT_USAGE;
    static const int not_inspect[] = {OPT_QUIET, 0};
    if (refuse_options(&o, not_inspect, "inspect", "inspect prints only its answer"))
        return EXIT_USAGE;
    if (!who == !top || (to && !who))
        return usage_error("inspect", "ask one question: --who A [--to B], or --top K");
    if (p.seen[OPT_MAX_EDGES - OPT_Q] && !top)
        return usage_error("inspect", "--max-edges limits --top; it does not apply to --who");
    if (input_options_check(&o, "inspect"))
        return EXIT_USAGE;
    ag_set_threads((int)o.threads);

    source_t s;
    inputs_t in;
    result_t r;
    memset(&s, 0, sizeof s), memset(&in, 0, sizeof in), memset(&r, 0, sizeof r);
    ag_error_t err = {AG_OK, ""};
    int usage = 0;
    int64_t a = 0, b = 0;
    int rc = source_open(&s, &o.src, &usage, &err);
    if (!rc && who)
        rc = resolve(&a, who, &s.labels, &err);
    if (!rc && to)
        rc = resolve(&b, to, &s.labels, &err);
    if (!rc)
        rc = inputs_load(&in, &o, s.nb.n_nodes, NULL, &err);
    if (!rc)
        rc = compute(&r, &in, &s, &o, 0, NULL, &err);
    if (!rc && !r.Q)
        rc = ag_fail(&err, AG_EINVAL, "no attention to inspect: --rounds 0");
    if (!rc)
        rc = who ? answer_who(&r, &in, &s, a, b, to != NULL, &err)
                 : answer_top(&r, &in, &s, top, o.max_export, &err);
    result_free(&r);
    inputs_free(&in);
    source_close(&s);
    return finish("inspect", rc, usage, &err);
}
