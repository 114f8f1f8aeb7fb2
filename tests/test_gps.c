/*
 * GraphGPS's layer (a model file's global=SPEC global_heads=G): the first
 * H - G heads attend over the graph, the last G over another connectivity,
 * added by Wo. Against a dense double reference written here, a head at a
 * time with its own mask (the layer's definition, not its head-splitting
 * code), forward through the library's model and gradients through the
 * tape against finite differences of that reference; and its refusals.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define GN 7                   /* nodes */
#define GD 6                   /* width */

static float *uniform(int64_t n, uint64_t seed, float scale)
{
    float *x = malloc((size_t)n * sizeof *x);
    fill_uniform(x, n, seed, scale);
    return x;
}

/* Node i receives from its two neighbours on a ring: the local graph. */
static void ring(ag_nbhd_t *nb, unsigned char *mask)
{
    int64_t ptr[GN + 1], src[2 * GN];
    for (int64_t i = 0; i < GN; i++) {
        ptr[i] = 2 * i;
        const int64_t a = (i + GN - 1) % GN, b = (i + 1) % GN;
        src[2 * i] = a < b ? a : b, src[2 * i + 1] = a < b ? b : a;
        mask[i * GN + a] = mask[i * GN + b] = 1;
    }
    ptr[GN] = 2 * GN;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_csr(nb, GN, ptr, src, &err), AG_OK);
}

/* Y = X + M Wo^T in double, head h of M attending over masks[h < H - G ? 0 : 1]
   ([GN, GN], j -> i at i * GN + j), scaled-dot or additive (slope 0.2). */
static void ref_gps(const float *Xf, const ag_weights_t *w, int additive,
                    const unsigned char *const masks[2], double *Y)
{
    const int64_t H = w->H, d = w->d, HD = H * d, G = w->global_heads;
    double Q[GN * 12], K[GN * 12], V[GN * 12], M[GN * 12], X[GN * GD];
    for (int64_t x = 0; x < GN * GD; x++)
        X[x] = Xf[x];
    for (int64_t i = 0; i < GN; i++)
        for (int64_t r = 0; r < HD; r++) {
            double q = 0, k = 0, v = 0;
            for (int64_t c = 0; c < GD; c++) {
                q += X[i * GD + c] * w->wq[r * GD + c];
                k += X[i * GD + c] * w->wk[r * GD + c];
                v += X[i * GD + c] * w->wv[r * GD + c];
            }
            Q[i * HD + r] = q, K[i * HD + r] = k, V[i * HD + r] = v;
        }
    for (int64_t h = 0; h < H; h++) {
        const unsigned char *mask = masks[h < H - G ? 0 : 1];
        for (int64_t i = 0; i < GN; i++) {
            double s[GN], most = -INFINITY, sum = 0;
            for (int64_t j = 0; j < GN; j++) {
                if (!mask[i * GN + j])
                    continue;
                double e = 0;
                for (int64_t c = 0; c < d; c++)
                    e += additive ? w->attn_dst[h * d + c] * Q[i * HD + h * d + c] +
                                        w->attn_src[h * d + c] * K[j * HD + h * d + c]
                                  : Q[i * HD + h * d + c] * K[j * HD + h * d + c];
                s[j] = additive ? (e > 0 ? e : 0.2 * e) : e / sqrt((double)d);
                most = fmax(most, s[j]);
            }
            for (int64_t j = 0; j < GN; j++)
                if (mask[i * GN + j])
                    sum += s[j] = exp(s[j] - most);
            for (int64_t c = 0; c < d; c++) {
                double m = 0;
                for (int64_t j = 0; j < GN; j++)
                    if (mask[i * GN + j])
                        m += s[j] / sum * V[j * HD + h * d + c];
                M[i * HD + h * d + c] = m;
            }
        }
    }
    for (int64_t i = 0; i < GN; i++)
        for (int64_t c = 0; c < GD; c++) {
            double y = X[i * GD + c];
            for (int64_t r = 0; r < HD; r++)
                y += M[i * HD + r] * w->wo[c * HD + r];
            Y[i * GD + c] = y;
        }
}

static double ref_loss(const float *X, const ag_weights_t *w, int additive,
                       const unsigned char *const masks[2], const float *R)
{
    double Y[GN * GD], L = 0;
    ref_gps(X, w, additive, masks, Y);
    for (int64_t x = 0; x < GN * GD; x++)
        L += R[x] * Y[x];
    return L;
}

/* grad [n] against central differences of ref_loss in the entries of A. */
static void expect_fd(const char *what, float *A, const float *grad, int64_t n, float *X,
                      const ag_weights_t *w, int additive, const unsigned char *const masks[2],
                      const float *R)
{
    double worst = 0, big = 1e-3;
    double *fd = malloc((size_t)n * sizeof *fd);
    for (int64_t x = 0; x < n; x++) {
        const float keep = A[x];
        A[x] = keep + 1e-3f;
        const float up = A[x];
        const double Lp = ref_loss(X, w, additive, masks, R);
        A[x] = keep - 1e-3f;
        const float down = A[x];
        const double Lm = ref_loss(X, w, additive, masks, R);
        A[x] = keep;
        fd[x] = (Lp - Lm) / ((double)up - (double)down);
        big = fmax(big, fabs(fd[x]));
    }
    for (int64_t x = 0; x < n; x++)
        worst = fmax(worst, fabs(grad[x] - fd[x]) / big);
    ck_assert_msg(worst <= 2e-3, "%s: gradient against finite differences, error %.3g", what,
                  worst);
    free(fd);
}

/* The progress a run reports: never back, one total, ending at it. */
typedef struct {
    int64_t done, total;
    int calls, back;
} progress_seen_t;

static void on_progress(int round, int64_t done, int64_t total, void *ctx)
{
    progress_seen_t *p = ctx;
    (void)round;
    p->back |= done < p->done || (p->calls && total != p->total);
    p->done = done, p->total = total, p->calls++;
}

START_TEST(gps_layer_matches_reference_and_finite_differences)
{
    const int additive = _i;
    char text[256];
    snprintf(text, sizeof text, "%slayer heads=3 dim=2 global=complete global_heads=1\n",
             additive ? "score additive\n" : "");
    ag_model_spec_t spec;
    ag_model_t m;
    ag_error_t err;
    ck_assert_msg(ag_model_spec_parse(&spec, text, "gps", &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(spec.layers[0].global_heads, 1);
    ck_assert_int_eq(ag_model_init(&m, &spec, GD, 0, 0, 5, &err), AG_OK);
    ag_weights_t *w = &m.layers[0];
    ck_assert_int_eq(w->global_heads, 1);
    for (int64_t x = 0; additive && x < w->H * w->d; x++)   /* away from LeakyReLU's kink */
        w->attn_src[x] *= 0.3f, w->attn_dst[x] *= 0.3f;
    unsigned char local[GN * GN] = {0}, all[GN * GN];
    memset(all, 1, sizeof all);
    const unsigned char *const masks[2] = {local, all};
    ag_nbhd_t nb;
    ring(&nb, local);
    float *X = uniform(GN * GD, 3, 1.0f), *R = uniform(GN * GD, 4, 1.0f), Y[GN * GD];
    double Yr[GN * GD];
    ref_gps(X, w, additive, masks, Yr);
    /* the library's model (its graphs compiled from the spec) */
    ck_assert_msg(ag_model_run(&m, &nb, X, NULL, Y, &err) == AG_OK, "%s", err.msg);
    for (int64_t x = 0; x < GN * GD; x++)
        ck_assert_msg(fabs(Y[x] - Yr[x]) <= 1e-5 * (1 + fabs(Yr[x])), "Y[%lld] = %.8g, "
                      "reference %.8g", (long long)x, Y[x], Yr[x]);
    /* the tape's forward and backward on the graphs given by hand */
    ag_nbhd_t *graphs[2];
    int64_t V;
    const char *specs[2] = {"", "complete"};
    ck_assert_int_eq(ag_layer_graphs(graphs, 2, &nb, specs, AG_SELF_KEEP, &V, &err), AG_OK);
    ag_round_opts_t opts = AG_ROUND_OPTS_INIT;
    opts.score = &spec.score;
    opts.graphs = graphs, opts.global_graphs = graphs + 1;
    float Xt[GN * GD], dX[GN * GD];
    memcpy(Xt, X, sizeof Xt);
    ag_tape_t *tape;
    ck_assert_msg(ag_rounds_forward(graphs[0], w, 1, Xt, 1, &opts, &tape, &err) == AG_OK, "%s",
                  err.msg);
    ck_assert_int_eq(memcmp(Xt, Y, sizeof Y), 0);   /* the same bits as inference */
    /* inference reports its progress over both groups of heads as one */
    progress_seen_t seen = {0};
    ag_round_opts_t po = opts;
    po.on_progress = on_progress, po.ctx = &seen;
    ag_workspace_t ws;
    ck_assert_int_eq(ag_workspace_init(&ws, GN, w->H * w->d, GD, &err), AG_OK);
    memcpy(Xt, X, sizeof Xt);
    ck_assert_int_eq(ag_rounds_run(graphs[0], w, 1, Xt, 1, &po, &ws, NULL, &err), AG_OK);
    ck_assert_int_eq(memcmp(Xt, Y, sizeof Y), 0);
    ck_assert(seen.calls > 0 && !seen.back && seen.done == seen.total);
    ck_assert_int_eq(seen.total, graphs[0]->n_edges * 2 + graphs[1]->n_edges * 1);
    ag_workspace_destroy(&ws);
    ag_weights_t g;
    ck_assert_int_eq(ag_weights_grads_init(&g, w, 0, &err), AG_OK);
    ck_assert_msg(ag_rounds_backward(tape, R, dX, &g, &err) == AG_OK, "%s", err.msg);
    ag_tape_free(tape);
    const int64_t HD = w->H * w->d;
    expect_fd("wq", w->wq, g.wq, HD * GD, X, w, additive, masks, R);
    expect_fd("wk", w->wk, g.wk, HD * GD, X, w, additive, masks, R);
    expect_fd("wv", w->wv, g.wv, HD * GD, X, w, additive, masks, R);
    expect_fd("wo", w->wo, g.wo, GD * HD, X, w, additive, masks, R);
    expect_fd("X", X, dX, GN * GD, X, w, additive, masks, R);
    if (additive) {
        expect_fd("attn_src", w->attn_src, g.attn_src, HD, X, w, additive, masks, R);
        expect_fd("attn_dst", w->attn_dst, g.attn_dst, HD, X, w, additive, masks, R);
    }
    ag_weights_destroy(&g);
    ag_layer_graphs_free(graphs, 2);
    ag_nbhd_destroy(&nb);
    ag_model_destroy(&m);
    free(X), free(R);
}
END_TEST

/* What a GPS layer refuses, each naming the value. */
START_TEST(gps_layer_refusals)
{
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"layer heads=1 dim=4 global=complete\n", "global=complete with heads=1"},
        {"layer heads=2 dim=4 global=complete global_heads=2\n",
         "global_heads=2 of heads=2; expected 1..1"},
        {"layer heads=2 dim=4 global_heads=1\n", "global_heads=1 without global=SPEC"},
        {"layer heads=2 dim=4 global=expandr:3\n", "global=expandr:3; expected a pattern"},
        {"layer heads=2 dim=4 global=complete edges=yes\n", "global=complete and edges=yes"},
    };
    ag_model_spec_t spec;
    ag_error_t err;
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const int rc = ag_model_spec_parse(&spec, bad[k].text, "m.txt", &err);
        ck_assert_msg(rc != AG_OK && strstr(err.msg, bad[k].msg), "%s: %s", bad[k].text,
                      rc ? err.msg : "accepted");
    }
    ck_assert_int_eq(ag_model_spec_parse(&spec, "alibi\nlayer heads=2 dim=4 global=complete\n",
                                         "m.txt", &err), AG_OK);
    ck_assert_fails_with(ag_model_spec_check(&spec, "m.txt", 8, 0, &err), err, AG_EINVAL,
                         "global=complete with alibi");
    /* a graph a layer and edge features, on two layers */
    ck_assert_int_eq(ag_model_spec_parse(&spec, "layer heads=2 dim=4 global=complete\n"
                                         "layer heads=2 dim=4 edges=yes\n", "m.txt", &err),
                     AG_OK);
    ck_assert_fails_with(ag_model_spec_check(&spec, "m.txt", 8, 0, &err), err, AG_EINVAL,
                         "m.txt line 1: global=complete, and line 2: edges=yes");
    /* a spec made in C: global_heads 0 is heads/2; 1 head is refused */
    ag_model_spec_init(&spec);
    spec.n_layers = 1;
    ag_layer_spec_init(&spec.layers[0]);
    spec.layers[0].heads = 4, spec.layers[0].dim = 2;
    strcpy(spec.layers[0].global, "complete");
    ag_weights_t shape;
    ag_layer_spec_shape(&shape, &spec.layers[0], 8, 0);
    ck_assert_int_eq(shape.global_heads, 2);
    spec.layers[0].heads = 1;
    ck_assert_fails_with(ag_model_spec_check(&spec, "c", 8, 0, &err), err, AG_EINVAL,
                         "global=complete with heads=1 and global_heads=0");
    /* the rounds without the global graph the layer needs */
    ck_assert_int_eq(ag_model_spec_parse(&spec, "layer heads=2 dim=4 global=complete\n", "m",
                                         &err), AG_OK);
    ag_model_t m;
    ck_assert_int_eq(ag_model_init(&m, &spec, 8, 0, 0, 1, &err), AG_OK);
    ag_nbhd_t nb;
    unsigned char mask[GN * GN];
    ring(&nb, mask);
    ag_workspace_t ws;
    ck_assert_int_eq(ag_workspace_init(&ws, GN, 8, 8, &err), AG_OK);
    float *X = uniform(GN * 8, 1, 1.0f);
    ck_assert_fails_with(ag_rounds_run(&nb, m.layers, 1, X, 1, NULL, &ws, NULL, &err), err,
                         AG_EINVAL, "global graph is not given");
    ag_workspace_destroy(&ws);
    ag_nbhd_destroy(&nb);
    ag_model_destroy(&m);
    free(X);
}
END_TEST

/* train --model with GPS layers: --predict and the library's model read back
   from --save agree on every node, and run's on the saved folder too; the
   saved text keeps the keys. */
START_TEST(gps_layers_train_save_and_predict)
{
    char model[1024], args[2048];
    snprintf(model, sizeof model, "%s", tmp_path("gps.txt"));
    write_text(model, "norm layer\n"
                      "layer heads=4 dim=4 out=16 bias=yes ffn=2 global=expander:2 "
                      "global_heads=2\n"
                      "layer heads=2 dim=8 bias=yes global=graph+virtual:1\n");
    snprintf(args, sizeof args, "train graphs/planted.gml --model %s --features "
             "graphs/planted/x.npy --labels graphs/planted/labels.npy --train-mask "
             "graphs/planted/train.npy --epochs 5 --predict %s --save %s --quiet", model,
             tmp_path("gp.npy"), tmp_path("gsave"));
    expect_cli(args, 0, 1, "");
    char *text = read_text(tmp_path("gsave/model.txt"));
    ck_assert_msg(strstr(text, "global=expander:2 global_heads=2\n") &&
                  strstr(text, "global=graph+virtual:1 global_heads=1\n"), "%s", text);
    free(text);
    ag_model_t m;
    ag_error_t e;
    ck_assert_msg(ag_model_load(&m, tmp_path("gsave"), &e) == AG_OK, "%s", e.msg);
    ck_assert_int_eq(m.layers[0].global_heads, 2);
    expect_planted_predictions(&m, tmp_path("gp.npy"));
    ag_model_destroy(&m);
    /* run predicts from the folder what train predicted, node for node, and refuses
       what no one graph's attention can report */
    snprintf(args, sizeof args, "run graphs/planted.gml --weights %s --features "
             "graphs/planted/x.npy --predict %s --quiet", tmp_path("gsave"), tmp_path("gr.npy"));
    expect_cli(args, 0, 1, "");
    expect_same_bytes(tmp_path("gp.npy"), tmp_path("gr.npy"));
    snprintf(args, sizeof args, "run graphs/planted.gml --weights %s --features "
             "graphs/planted/x.npy --trace %s", tmp_path("gsave"), tmp_path("gt.csv"));
    expect_cli(args, 2, 2, "--trace: its layers attend over graphs of their own");
    ck_assert(!file_exists(tmp_path("gt.csv")));
}
END_TEST

Suite *gps_suite(void)
{
    Suite *s = suite_create("gps");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, gps_layer_matches_reference_and_finite_differences, 0, 2);
    tcase_add_test(tc, gps_layer_refusals);
    tcase_add_test(tc, gps_layers_train_save_and_predict);
    suite_add_tcase(s, tc);
    return s;
}
