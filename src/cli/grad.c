/*
 * `attngraph grad`: the gradients of L = sum(dout * output) for one round of
 * attention on given Q, K, V (dQ, dK, dV and the score's learnable parameters),
 * or for message rounds on given features and weights (dX and every weight's
 * gradient), written as a folder of .npy files.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/base.h"

static const opt_def_t grad_options[] = {
    OPT_PROSE("usage: attngraph grad (GRAPH | --pattern SPEC | --csr IP.npy,IX.npy) --q Q.npy --k K.npy\n"
              "                      --v V.npy [--heads H] [score options] --dout DM.npy --out DIR\n"
              "       attngraph grad (GRAPH | --pattern SPEC | --csr ...) --features X.npy --weights WDIR\n"
              "                      [--rounds R] [round and score options] --dout DX.npy --out DIR\n"
              "\n"
              "Gradients of the scalar L = sum(dout * output), with the output as 'attngraph run'\n"
              "computes it from the same inputs (dout is the gradient a loss sends back; a\n"
              "dout of ones gives the gradient of the sum of the outputs).\n"
              "\n"
              "Attention (--q --k --v, output M [N, H*d]) writes DIR/dq.npy, dk.npy, dv.npy\n"
              "[N, H*d]; with --edge-bias ATTR also d_edge_bias.npy [E, 1] in the graph's edge\n"
              "order (as run --attn); --score additive: da_src.npy and da_dst.npy [H, d], gatv2:\n"
              "da.npy [H, d] (the seeded vectors of run --q/--k/--v with the same --seed).\n"
              "Rounds (--features --weights, output the final X [N, D]) write DIR/dx.npy [N, D]\n"
              "and, for every weight file the folder has or the options add (--norm layer:\n"
              "ln_weight, ln_bias), its gradient dNAME.npy: dwq.npy dwk.npy dwv.npy dwo.npy ...;\n"
              "layers of their own per round (WDIR/round-k/) get DIR/round-k/dNAME.npy. Shared\n"
              "weights get the sum over rounds.\n"
              "\n"),
    OPT_VALUE("dout", OPT_DOUT,
              "  --dout FILE.npy     the gradient of L with respect to the output: [N, H*d] for\n"
              "                      attention, [N, D] for rounds\n"),
    OPT_VALUE("out", OPT_OUT,
              "  --out DIR           the folder of gradients (created if missing); its files\n"
              "                      appear together when the run succeeds, or not at all\n"),
    OPT_VALUE("pattern", OPT_PATTERN, "  --pattern SPEC      a pattern instead of a graph file\n"),
    OPT_VALUE("csr", OPT_CSR,
              "  --csr IP.npy,IX.npy an in-neighbour CSR instead of a graph file\n"),
    OPT_PROSE("\n"),
    OPT_TABLE(input_options),
    OPT_FLAG("quiet", OPT_QUIET, "  --quiet             print nothing on success\n"),
    OPT_HELP_LINE,
    OPT_DEF_END,
};

typedef struct {
    run_opts_t o;
    const char *dout;
} grad_opts_t;

static int parse_grad(grad_opts_t *g, int argc, char **argv)
{
    memset(g, 0, sizeof *g);
    run_opts_t *o = &g->o;
    run_opts_init(o);
    opt_parser_t p;
    opt_begin(&p, "grad", grad_options, argc, argv);
    int c;
    while ((c = opt_next(&p)) > 0) {
        int rc = input_option(o, c, p.arg, "grad");
        if (rc == 0)
            continue;
        if (rc != 1)
            return rc;
        switch (c) {
        case OPT_PATTERN: o->src.pattern = p.arg; break;
        case OPT_CSR: o->src.csr = p.arg; break;
        case OPT_DOUT: g->dout = p.arg; break;
        case OPT_OUT: o->out = p.arg; break;
        }
    }
    if (c < 0)
        return p.status;
    if (source_args(o, &p, "grad"))
        return EXIT_USAGE;
    static const int not_here[] = {OPT_DIM, OPT_HEAD_DIM, OPT_PER_NODE_WEIGHTS, OPT_UNTIL, 0};
    if (refuse_options(o, not_here, "grad", "grad differentiates given inputs: --features and "
                       "--weights (or --q, --k, --v), never random ones"))
        return EXIT_USAGE;
    if (!o->q && !o->features)
        return usage_error("grad", "give --q, --k and --v (one round of attention) or "
                           "--features and --weights (rounds)");
    if (o->features && !o->weights)
        return usage_error("grad", "--features needs --weights DIR: the gradients are those "
                           "of its files");
    if (!g->dout)
        return usage_error("grad", "give --dout FILE.npy, the gradient of L with respect to "
                           "the output");
    if (!o->out)
        return usage_error("grad", "give --out DIR, the folder the gradients go to");
    if (one_stdin_input(o, strcmp(g->dout, "-") == 0, "grad"))
        return EXIT_USAGE;
    return input_options_check(o, "grad") ? EXIT_USAGE : -1;
}

/* dout, which must be [N, cols]. */
static int read_dout(ag_matrix_t *m, const char *path, int64_t N, int64_t cols,
                     const char *what, ag_error_t *err)
{
    int rc = ag_matrix_read_npy(m, path, err);
    if (!rc && (m->rows != N || m->cols != cols)) {
        rc = ag_fail(err, AG_EINVAL, "--dout %s is [%lld, %lld]; the output is %s [%lld, %lld]",
                     path, (long long)m->rows, (long long)m->cols, what, (long long)N,
                     (long long)cols);
        ag_matrix_destroy(m);
    }
    return rc;
}

static double dot_sum(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t k = 0; k < n; k++)
        s += (double)a[k] * b[k];
    return s;
}

/* Everything one grad run holds, released in one place. */
typedef struct {
    source_t src;
    inputs_t in;
    ag_matrix_t dout;
    float *edge_bias, *M, *lse;
    float *grad[5];             /* dQ dK dV, then d_a_src d_a_dst; or dX */
    float *d_bias, *d_bias_edges;
    ag_weights_t *wgrads;       /* [n_layers] */
    int n_wgrads;
    folder_item_t items[64 + 9 * 64];
    int n_items;
    char names[9 * 64][64];
    double loss;
} grad_state_t;

static void add_item(grad_state_t *st, const char *name, const float *data, int ndim,
                     int64_t a, int64_t b, int64_t c)
{
    folder_item_t *it = &st->items[st->n_items++];
    *it = (folder_item_t){name, data, NULL, ndim, {a, b, c}, NULL};
}

static int attention_grads(grad_state_t *st, const run_opts_t *o, ag_error_t *err)
{
    inputs_t *in = &st->in;
    ag_nbhd_t *nb = &st->src.nb;
    const int64_t N = in->N, H = in->H, d = in->d, HD = H * d;
    ag_score_t score = in->score;
    int rc = AG_OK;
    if (o->edge_bias && (rc = edge_bias_load(&st->edge_bias, &st->src, o->edge_bias, err)))
        return rc;
    score.edge_bias = st->edge_bias;
    const int additive = score.kind == AG_SCORE_ADDITIVE, gatv2 = score.kind == AG_SCORE_GATV2;
    const int softmax = score.kind != AG_SCORE_SIGMOID && score.kind != AG_SCORE_LINEAR;
    for (int k = 0; k < 3 + additive + additive + gatv2; k++)
        if (!(st->grad[k] = ag_alloc(k < 3 ? N * HD : HD, sizeof(float), err, "gradients")))
            return ag_alloc_status();
    if (!(st->M = ag_alloc(N * HD, sizeof(float), err, "messages")) ||
        (softmax && !(st->lse = ag_alloc(N * H, sizeof(float), err, "log-sum-exp"))))
        return ag_alloc_status();
    if (o->edge_bias && !(st->d_bias = ag_alloc(nb->n_edges, sizeof(float), err, "gradients")))
        return ag_alloc_status();
    const ag_attention_opts_t ao = {.lse = st->lse};
    if ((rc = ag_attention_ex(nb, in->q.data, in->k.data, in->v.data, H, d, &score, st->M, &ao,
                              err)))
        return rc;
    st->loss = dot_sum(st->dout.data, st->M, N * HD);
    const ag_attention_grads_t g = {.dQ = st->grad[0], .dK = st->grad[1], .dV = st->grad[2],
                                    .d_a_src = additive || gatv2 ? st->grad[3] : NULL,
                                    .d_a_dst = additive ? st->grad[4] : NULL,
                                    .d_edge_bias = st->d_bias};
    if ((rc = ag_attention_backward(nb, in->q.data, in->k.data, in->v.data, H, d, &score,
                                    st->M, st->lse, st->dout.data, &g, err)))
        return rc;
    add_item(st, "dq.npy", st->grad[0], 2, N, HD, 0);
    add_item(st, "dk.npy", st->grad[1], 2, N, HD, 0);
    add_item(st, "dv.npy", st->grad[2], 2, N, HD, 0);
    if (additive) {
        add_item(st, "da_src.npy", st->grad[3], 2, H, d, 0);
        add_item(st, "da_dst.npy", st->grad[4], 2, H, d, 0);
    }
    if (gatv2)
        add_item(st, "da.npy", st->grad[3], 2, H, d, 0);
    if (st->d_bias) {   /* slots -> the graph's edge order, as run --attn writes it */
        ag_edge_msg_t *msgs;
        int64_t *slot;
        if ((rc = ag_edge_order(nb, &msgs, &slot, err)))
            return rc;
        st->d_bias_edges = ag_alloc(nb->n_edges, sizeof(float), err, "gradients");
        for (int64_t e = 0; st->d_bias_edges && e < nb->n_edges; e++)
            st->d_bias_edges[e] = st->d_bias[slot[e]];
        free(msgs), free(slot);
        if (!st->d_bias_edges)
            return ag_alloc_status();
        add_item(st, "d_edge_bias.npy", st->d_bias_edges, 2, nb->n_edges, 1, 0);
    }
    return AG_OK;
}

/* The gradient files of layer k (n layers): "dwq.npy", or "round-2/dwq.npy". */
static void add_layer_items(grad_state_t *st, const ag_weights_t *g, int k, int n)
{
    const char *names[] = {"wq", "wk", "wv", "wo", "ln_weight", "ln_bias", "attn_src",
                           "attn_dst", "attn"};
    const float *arrays[] = {g->wq, g->wk, g->wv, g->wo, g->ln_weight, g->ln_bias,
                             g->attn_src, g->attn_dst, g->attn};
    const int64_t HD = g->H * g->d;
    for (int m = 0; m < 9; m++) {
        if (!arrays[m])
            continue;
        char *name = st->names[9 * k + m];
        if (n > 1)
            snprintf(name, sizeof st->names[0], "round-%d/d%s.npy", k + 1, names[m]);
        else
            snprintf(name, sizeof st->names[0], "d%s.npy", names[m]);
        if (m < 3 && g->per_node)
            add_item(st, name, arrays[m], 3, g->per_node, HD, g->D);
        else if (m < 3)
            add_item(st, name, arrays[m], 2, HD, g->D, 0);
        else if (m == 3)
            add_item(st, name, arrays[m], 2, g->D, HD, 0);
        else if (m < 6)
            add_item(st, name, arrays[m], 1, g->D, 0, 0);
        else
            add_item(st, name, arrays[m], 2, g->H, g->d, 0);
    }
}

static int rounds_grads(grad_state_t *st, const run_opts_t *o, ag_error_t *err)
{
    inputs_t *in = &st->in;
    const int64_t N = in->N, D = in->x0.cols;
    if (in->n_layers > 64)
        return ag_fail(err, AG_ELIMIT, "%s has %d round folders; grad writes at most 64",
                       o->weights, in->n_layers);
    int rc = AG_OK;
    if (o->edge_bias && (rc = edge_bias_load(&st->edge_bias, &st->src, o->edge_bias, err)))
        return rc;
    ag_score_t score = in->score;
    score.edge_bias = st->edge_bias;
    ag_round_opts_t ro = AG_ROUND_OPTS_INIT;
    ro.score = &score, ro.no_residual = o->no_residual, ro.norm = o->norm;
    if (!(st->M = ag_alloc(N * D, sizeof(float), err, "states")) ||
        !(st->grad[0] = ag_alloc(N * D, sizeof(float), err, "gradients")) ||
        !(st->wgrads = ag_calloc(in->n_layers, sizeof *st->wgrads, err, "gradients")))
        return ag_alloc_status();
    st->n_wgrads = in->n_layers;
    for (int k = 0; k < in->n_layers && !rc; k++)
        rc = ag_weights_grads_init(&st->wgrads[k], &in->layers[k], o->norm == AG_NORM_LAYER,
                                   err);
    if (rc)
        return rc;
    memcpy(st->M, in->x0.data, (size_t)(N * D) * sizeof(float));
    ag_tape_t *tape = NULL;
    rc = ag_rounds_forward(&st->src.nb, in->layers, in->n_layers, st->M, (int)in->rounds, &ro,
                           &tape, err);
    if (!rc) {
        st->loss = dot_sum(st->dout.data, st->M, N * D);
        rc = ag_rounds_backward(tape, st->dout.data, st->grad[0], st->wgrads, err);
    }
    ag_tape_free(tape);
    if (rc)
        return rc;
    add_item(st, "dx.npy", st->grad[0], 2, N, D, 0);
    for (int k = 0; k < in->n_layers; k++)
        add_layer_items(st, &st->wgrads[k], k, in->n_layers);
    return AG_OK;
}

static void grad_free(grad_state_t *st)
{
    for (int k = 0; k < 5; k++)
        free(st->grad[k]);
    for (int k = 0; k < st->n_wgrads; k++)
        ag_weights_destroy(&st->wgrads[k]);
    free(st->wgrads);
    free(st->edge_bias), free(st->M), free(st->lse), free(st->d_bias), free(st->d_bias_edges);
    ag_matrix_destroy(&st->dout);
    inputs_free(&st->in);
    source_close(&st->src);
}

int cmd_grad(int argc, char **argv)
{
    grad_opts_t g;
    int status = parse_grad(&g, argc, argv);
    if (status >= 0)
        return status;
    const run_opts_t *o = &g.o;
    ag_set_threads((int)o->threads);
    grad_state_t *st = calloc(1, sizeof *st);
    if (!st) {
        fprintf(stderr, "attngraph: out of memory\n");
        return EXIT_BAD_INPUT;
    }
    ag_error_t err = {AG_OK, ""};
    int usage = 0;
    int rc = folder_check(o->out, "--out", &err);   /* a bad folder fails before any work */
    if (!rc)
        rc = source_open(&st->src, &o->src, &usage, &err);
    if (!rc)
        rc = inputs_load(&st->in, o, st->src.nb.n_nodes, NULL, &err);
    const int64_t N = st->in.N;
    if (!rc)
        rc = st->in.raw ? read_dout(&st->dout, g.dout, N, st->in.H * st->in.d, "M", &err)
                        : read_dout(&st->dout, g.dout, N, st->in.x0.cols, "X", &err);
    if (!rc)
        rc = st->in.raw ? attention_grads(st, o, &err) : rounds_grads(st, o, &err);
    if (!rc)
        rc = folder_write(o->out, "--out", st->items, st->n_items, &err);
    if (!rc && !o->quiet) {
        const inputs_t *in = &st->in;
        source_print(&st->src);
        if (in->raw)
            printf("attention: %lld head%s of width %lld; L = sum(dout * M) = %.9g\n",
                   (long long)in->H, AG_PLURAL(in->H), (long long)in->d, st->loss);
        else
            printf("rounds: %lld (D=%lld, %lld head%s of width %lld, %s); L = sum(dout * X) "
                   "= %.9g\n", (long long)in->rounds, (long long)in->x0.cols,
                   (long long)in->H, AG_PLURAL(in->H), (long long)in->d,
                   in->n_layers > 1 ? "a layer per round" : "shared weights", st->loss);
        printf("wrote %s:", o->out);
        for (int k = 0; k < st->n_items; k++)
            printf(" %s", st->items[k].name);
        putchar('\n');
    }
    grad_free(st);
    free(st);
    return finish("grad", rc, usage, &err);
}
