/*
 * attngraph grad and attngraph train, end to end: the files grad writes against
 * the library called directly and against finite differences of the double
 * reference; train's accuracy computed from its --predict file; reproducibility
 * for any thread count; the --save / run --predict round trip; every refusal.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reference.h"
#include "testutil.h"

/* tmp_path's buffers rotate: a path kept across calls is copied into one of
   these (TMP(var, "name")). */
#define TMP(var, name)                                                                    \
    char var[512];                                                                        \
    snprintf(var, sizeof var, "%s", tmp_path(name))

static char pb[8][512];   /* paths of saved inputs */

/* Writes x [rows, cols] to the scratch file `name`; its path into path [512]. */
static const char *save_f32(char *path, const char *name, const float *x, int64_t rows,
                            int64_t cols)
{
    snprintf(path, 512, "%s", tmp_path(name));
    ag_error_t err;
    ck_assert_int_eq(ag_npy_write_f32(path, x, rows, cols, &err), AG_OK);
    return path;
}

/* Reads dir/name (a float .npy of n values) into a malloc'ed array. */
static float *load_f32(const char *dir, const char *name, int64_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ag_array_t a;
    ag_error_t err;
    ck_assert_msg(ag_array_read_npy(&a, path, &err) == AG_OK, "%s", err.msg);
    int64_t count = 1;
    for (int k = 0; k < a.ndim; k++)
        count *= a.shape[k];
    ck_assert_int_eq(count, n);
    return a.data;
}

static void expect_same(const float *got, const float *want, int64_t n, const char *what)
{
    for (int64_t x = 0; x < n; x++)
        ck_assert_msg(got[x] == want[x], "%s[%lld]: file %.9g, library %.9g", what,
                      (long long)x, got[x], want[x]);
}

/* ---- grad: attention ---- */

START_TEST(grad_attention_files_are_the_library_gradients)
{
    /* random10.edges: multi-edges, self-loops, a node nobody sends to */
    const int64_t N = 10, H = 2, d = 3, HD = 6;
    float Q[60], K[60], V[60], dM[60];
    fill_uniform(Q, 60, 11, 1.0f), fill_uniform(K, 60, 12, 1.0f);
    fill_uniform(V, 60, 13, 1.0f), fill_uniform(dM, 60, 14, 1.0f);
    TMP(out, "grad-attn");
    char args[2048];
    snprintf(args, sizeof args, "grad graphs/random10.edges --heads 2 --q %s --k %s --v %s "
             "--dout %s --out %s", save_f32(pb[1], "gq.npy", Q, N, HD), save_f32(pb[2], "gk.npy", K, N, HD),
             save_f32(pb[3], "gv.npy", V, N, HD), save_f32(pb[4], "gdm.npy", dM, N, HD), out);
    expect_cli(args, 0, 1, "dq.npy dk.npy dv.npy");

    igraph_t g;
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/random10.edges", NULL, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    igraph_destroy(&g);
    float dQ[60], dK[60], dV[60];
    const ag_attention_grads_t gr = {.dQ = dQ, .dK = dK, .dV = dV};
    ck_assert_int_eq(ag_attention_backward(&nb, Q, K, V, H, d, NULL, NULL, NULL, dM, &gr, &err),
                     AG_OK);
    const char *names[] = {"dq.npy", "dk.npy", "dv.npy"};
    const float *want[] = {dQ, dK, dV};
    for (int k = 0; k < 3; k++) {
        float *got = load_f32(out, names[k], N * HD);
        expect_same(got, want[k], N * HD, names[k]);
        free(got);
    }
    ag_nbhd_destroy(&nb);
}
END_TEST

/* L(bias) = sum dM * M in double, the messages in edge order with their bias. */
static double biased_loss(int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                          const float *Q, const float *K, const float *V, int64_t H, int64_t d,
                          const double *bias, const float *dM)
{
    ref_score_t sc = {.kind = 0, .beta = 1, .bias = bias};
    double M[64];
    ref_attention_scored(N, src, dst, E, Q, K, V, H, d, &sc, M, NULL);
    double L = 0;
    for (int64_t x = 0; x < N * H * d; x++)
        L += (double)dM[x] * M[x];
    return L;
}

START_TEST(grad_edge_bias_comes_in_the_graph_edge_order)
{
    /* edges out of slot order, a multi-edge and a self-loop: edge e of the file
       must get the derivative of L by its own bias */
    const int64_t N = 4, H = 1, d = 4, E = 7;
    const int64_t src[7] = {3, 0, 2, 0, 1, 2, 3}, dst[7] = {1, 1, 2, 1, 3, 0, 0};
    const double w[7] = {0.5, -1.0, 0.25, 2.0, -0.5, 1.5, 0.0};
    char gml[2048] = "graph [\n  directed 1\n";
    for (int64_t i = 0; i < N; i++)
        snprintf(gml + strlen(gml), sizeof gml - strlen(gml), "  node [ id %lld ]\n",
                 (long long)i);
    for (int64_t e = 0; e < E; e++)
        snprintf(gml + strlen(gml), sizeof gml - strlen(gml),
                 "  edge [ source %lld target %lld w %g ]\n", (long long)src[e],
                 (long long)dst[e], w[e]);
    strcat(gml, "]\n");
    TMP(graph, "bias.gml");
    write_text(graph, gml);
    float Q[16], K[16], V[16], dM[16];
    fill_uniform(Q, 16, 21, 1.0f), fill_uniform(K, 16, 22, 1.0f);
    fill_uniform(V, 16, 23, 1.0f), fill_uniform(dM, 16, 24, 1.0f);
    TMP(out, "grad-bias");
    char args[2048];
    snprintf(args, sizeof args, "grad %s --q %s --k %s --v %s --dout %s --edge-bias w --out %s",
             graph, save_f32(pb[5], "bq.npy", Q, N, d), save_f32(pb[6], "bk.npy", K, N, d),
             save_f32(pb[7], "bv.npy", V, N, d), save_f32(pb[0], "bdm.npy", dM, N, d), out);
    expect_cli(args, 0, 1, "d_edge_bias.npy");
    float *got = load_f32(out, "d_edge_bias.npy", E);
    double bias[7];
    memcpy(bias, w, sizeof bias);
    for (int64_t e = 0; e < E; e++) {
        const double h = 1e-4, keep = bias[e];
        bias[e] = keep + h;
        const double up = biased_loss(N, src, dst, E, Q, K, V, H, d, bias, dM);
        bias[e] = keep - h;
        const double down = biased_loss(N, src, dst, E, Q, K, V, H, d, bias, dM);
        bias[e] = keep;
        const double want = (up - down) / (2 * h);
        ck_assert_msg(fabs(got[e] - want) <= 1e-4 + 1e-4 * fabs(want),
                      "d_edge_bias[%lld] = %g, finite differences %g", (long long)e, got[e],
                      want);
    }
    free(got);
}
END_TEST

/* ---- grad: rounds ---- */

/* Writes a layer's weights into dir (made here). */
static void save_layer(const char *dir, const ag_weights_t *w)
{
    mkdir(dir, 0755);
    ag_error_t err;
    char p[1024];
    const int64_t HD = w->H * w->d;
    const char *names[] = {"wq", "wk", "wv", "wo"};
    const float *mats[] = {w->wq, w->wk, w->wv, w->wo};
    for (int m = 0; m < 4; m++) {
        snprintf(p, sizeof p, "%s/%s.npy", dir, names[m]);
        ck_assert_int_eq(ag_npy_write_f32(p, mats[m], m < 3 ? HD : w->D, m < 3 ? w->D : HD,
                                          &err), AG_OK);
    }
}

/* The library's dX and weight gradients of L = sum dY * X_R on sentence.gml. */
static void library_rounds_grads(ag_weights_t *layers, int n_layers, const float *X0,
                                 const float *dY, int rounds, int norm, float *dX,
                                 ag_weights_t *grads)
{
    igraph_t g;
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/sentence.gml", NULL, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    igraph_destroy(&g);
    const int64_t N = nb.n_nodes, D = layers[0].D;
    float *X = malloc((size_t)(N * D) * sizeof *X);
    memcpy(X, X0, (size_t)(N * D) * sizeof *X);
    const ag_round_opts_t ro = {ROUND_DEFAULTS, .norm = norm ? AG_NORM_LAYER : AG_NORM_NONE};
    ag_tape_t *tape = NULL;
    for (int k = 0; k < n_layers; k++)
        ck_assert_int_eq(ag_weights_grads_init(&grads[k], &layers[k], norm, &err), AG_OK);
    ck_assert_msg(ag_rounds_forward(&nb, layers, n_layers, X, rounds, &ro, &tape, &err) == AG_OK,
                  "%s", err.msg);
    ck_assert_msg(ag_rounds_backward(tape, dY, dX, grads, &err) == AG_OK, "%s", err.msg);
    ag_tape_free(tape);
    free(X);
    ag_nbhd_destroy(&nb);
}

START_TEST(grad_rounds_files_are_the_library_gradients)
{
    const int64_t N = 4, D = 6, H = 2, d = 3, HD = 6;
    float X[24], dY[24];
    fill_uniform(X, 24, 31, 1.0f), fill_uniform(dY, 24, 32, 1.0f);
    ag_weights_t w;
    ag_error_t err;
    ck_assert_int_eq(ag_weights_random(&w, D, H, d, 0, 5, &err), AG_OK);
    TMP(wdir, "grad-w");

    TMP(out, "grad-rounds");
    save_layer(wdir, &w);
    char args[2048];
    snprintf(args, sizeof args, "grad graphs/sentence.gml --heads 2 --features %s --weights %s "
             "--rounds 3 --norm layer --dout %s --out %s", save_f32(pb[1], "rx.npy", X, N, D), wdir,
             save_f32(pb[2], "rdy.npy", dY, N, D), out);
    expect_cli(args, 0, 1, "dx.npy dwq.npy dwk.npy dwv.npy dwo.npy dln_weight.npy dln_bias.npy");

    /* the library on the same layer (as the folder holds it: no vectors) */
    ag_weights_t layer;
    ck_assert_int_eq(ag_weights_load(&layer, wdir, H, &err), AG_OK);
    float dX[24];
    ag_weights_t grads;
    library_rounds_grads(&layer, 1, X, dY, 3, 1, dX, &grads);
    float *got = load_f32(out, "dx.npy", N * D);
    expect_same(got, dX, N * D, "dx");
    free(got);
    const char *names[] = {"dwq.npy", "dwk.npy", "dwv.npy", "dwo.npy", "dln_weight.npy",
                           "dln_bias.npy"};
    const float *want[] = {grads.wq, grads.wk, grads.wv, grads.wo, grads.ln_weight,
                           grads.ln_bias};
    const int64_t sizes[] = {HD * D, HD * D, HD * D, D * HD, D, D};
    for (int k = 0; k < 6; k++) {
        got = load_f32(out, names[k], sizes[k]);
        expect_same(got, want[k], sizes[k], names[k]);
        free(got);
    }
    ck_assert(!file_exists(tmp_path("grad-rounds/dattn.npy")));

    /* dx against central differences of the double reference (3 rounds, LayerNorm) */
    int64_t src[10], dst[10], E = 0;   /* sentence.gml is causal on 4 tokens */
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j <= i; j++)
            src[E] = j, dst[E++] = i;
    const ref_layer_t rl = {.wq = w.wq, .wk = w.wk, .wv = w.wv, .wo = w.wo};
    for (int64_t x = 0; x < N * D; x += 5) {
        double Xp[24], Xm[24], Lp = 0, Lm = 0;
        for (int k = 0; k < 24; k++)
            Xp[k] = Xm[k] = X[k];
        Xp[x] += 1e-3, Xm[x] -= 1e-3;
        ref_rounds_layers(N, src, dst, E, &rl, 1, D, H, d, 3, 1, 1, Xp);
        ref_rounds_layers(N, src, dst, E, &rl, 1, D, H, d, 3, 1, 1, Xm);
        for (int k = 0; k < 24; k++)
            Lp += dY[k] * Xp[k], Lm += dY[k] * Xm[k];
        const double want_x = (Lp - Lm) / 2e-3;
        ck_assert_msg(fabs(dX[x] - want_x) <= 2e-3 + 2e-3 * fabs(want_x),
                      "dx[%lld] = %g, finite differences %g", (long long)x, dX[x], want_x);
    }
    ag_weights_destroy(&grads);
    ag_weights_destroy(&layer);
    ag_weights_destroy(&w);
}
END_TEST

START_TEST(grad_per_round_layers_go_to_round_folders)
{
    const int64_t N = 4, D = 4, H = 1, d = 4;
    float X[16], dY[16];
    fill_uniform(X, 16, 41, 1.0f), fill_uniform(dY, 16, 42, 1.0f);
    ag_weights_t w[2];
    ag_error_t err;
    TMP(wdir, "grad-w2");
    mkdir(wdir, 0755);
    for (int k = 0; k < 2; k++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/round-%d", wdir, k + 1);
        ck_assert_int_eq(ag_weights_random(&w[k], D, H, d, 0, 7 + k, &err), AG_OK);
        save_layer(dir, &w[k]);
    }
    TMP(out, "grad-rounds2");
    char args[2048];
    snprintf(args, sizeof args, "grad graphs/sentence.gml --features %s --weights %s --dout %s "
             "--out %s --no-residual", save_f32(pb[3], "r2x.npy", X, N, D), wdir,
             save_f32(pb[4], "r2dy.npy", dY, N, D), out);
    expect_cli(args, 0, 1, "round-2/dwo.npy");
    ag_weights_t layers[2], grads[2];
    for (int k = 0; k < 2; k++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/round-%d", wdir, k + 1);
        ck_assert_int_eq(ag_weights_load(&layers[k], dir, H, &err), AG_OK);
    }
    float dX[16];
    igraph_t g;
    ag_nbhd_t nb;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/sentence.gml", NULL, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    igraph_destroy(&g);
    float Xr[16];
    memcpy(Xr, X, sizeof Xr);
    const ag_round_opts_t ro = {ROUND_DEFAULTS, .no_residual = 1};
    ag_tape_t *tape;
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(ag_weights_grads_init(&grads[k], &layers[k], 0, &err), AG_OK);
    ck_assert_int_eq(ag_rounds_forward(&nb, layers, 2, Xr, 2, &ro, &tape, &err), AG_OK);
    ck_assert_int_eq(ag_rounds_backward(tape, dY, dX, grads, &err), AG_OK);
    ag_tape_free(tape);
    for (int k = 0; k < 2; k++) {
        char name[64];
        snprintf(name, sizeof name, "round-%d/dwq.npy", k + 1);
        float *got = load_f32(out, name, D * D);
        expect_same(got, grads[k].wq, D * D, name);
        free(got);
        ag_weights_destroy(&grads[k]);
        ag_weights_destroy(&layers[k]);
        ag_weights_destroy(&w[k]);
    }
    ck_assert(!file_exists(tmp_path("grad-rounds2/dwq.npy")));
    ag_nbhd_destroy(&nb);
}
END_TEST

START_TEST(grad_refusals)
{
    float x[40];
    fill_uniform(x, 40, 51, 1.0f);
    const char *q = save_f32(pb[5], "eq.npy", x, 4, 2), *dm = save_f32(pb[6], "edm.npy", x, 4, 3);
    char args[2048];
    snprintf(args, sizeof args, "grad graphs/sentence.gml --q %s --k %s --v %s --out %s", q, q,
             q, tmp_path("e1"));
    expect_cli(args, 2, 2, "give --dout FILE.npy");
    snprintf(args, sizeof args, "grad graphs/sentence.gml --q %s --k %s --v %s --dout %s", q, q,
             q, dm);
    expect_cli(args, 2, 2, "give --out DIR");
    snprintf(args, sizeof args, "grad graphs/sentence.gml --dout %s --out %s", dm, tmp_path("e1"));
    expect_cli(args, 2, 2, "give --q, --k and --v (one round of attention) or --features and "
               "--weights (rounds)");
    snprintf(args, sizeof args, "grad graphs/sentence.gml --features %s --dout %s --out %s", q,
             dm, tmp_path("e1"));
    expect_cli(args, 2, 2, "--features needs --weights DIR");
    snprintf(args, sizeof args, "grad graphs/sentence.gml --dim 4 --dout %s --out %s", dm,
             tmp_path("e1"));
    expect_cli(args, 2, 2, "--dim does not apply");
    /* dout of the wrong shape: named, and no folder is made */
    snprintf(args, sizeof args, "grad graphs/sentence.gml --q %s --k %s --v %s --dout %s "
             "--out %s", q, q, q, dm, tmp_path("e1"));
    expect_cli(args, 1, 2, "edm.npy is [4, 3]; the output is M [4, 2]");
    ck_assert(!file_exists(tmp_path("e1")));
    /* a file where the folder should be */
    write_text(tmp_path("e2"), "x");
    snprintf(args, sizeof args, "grad graphs/sentence.gml --q %s --k %s --v %s --dout %s "
             "--out %s", q, q, q, q, tmp_path("e2"));
    expect_cli(args, 1, 2, "exists and is not a folder");
    snprintf(args, sizeof args, "grad graphs/sentence.gml --q %s --k %s --v %s --dout %s "
             "--out %s", q, q, q, q, tmp_path("e3/sub/dir"));
    expect_cli(args, 1, 2, "cannot create it: /");
    expect_cli(args, 1, 2, "/e3/sub does not exist");
    snprintf(args, sizeof args, "grad graphs/sentence.gml --q %s --k %s --v %s --dout %s "
             "--out -", q, q, q, q);
    expect_cli(args, 1, 2, "--out names a folder");
}
END_TEST

START_TEST(grad_folder_appears_whole_or_not_at_all)
{
    float x[8];
    fill_uniform(x, 8, 61, 1.0f);
    const char *q = save_f32(pb[7], "wq4.npy", x, 4, 2);
    /* dv.npy cannot be written (a folder has its name): dq.npy and dk.npy must
       not appear either */
    TMP(out, "whole");
    mkdir(out, 0755);
    mkdir(tmp_path("whole/dv.npy"), 0755);
    char args[2048];
    snprintf(args, sizeof args, "grad graphs/sentence.gml --q %s --k %s --v %s --dout %s "
             "--out %s", q, q, q, q, out);
    expect_cli(args, 1, 2, "dv.npy");
    ck_assert(!file_exists(tmp_path("whole/dq.npy")));
    ck_assert(!file_exists(tmp_path("whole/dk.npy")));
    /* folders the run made are removed again when it fails: round-1/ is made,
       round-2 cannot be (a file has its name) */
    const int64_t N = 4, D = 4;
    float X[16];
    fill_uniform(X, 16, 62, 1.0f);
    TMP(wdir, "whole-w");

    TMP(out2, "whole2");
    mkdir(wdir, 0755);
    for (int k = 0; k < 2; k++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/round-%d", wdir, k + 1);
        ag_weights_t w;
        ag_error_t err;
        ck_assert_int_eq(ag_weights_random(&w, D, 1, D, 0, 3 + k, &err), AG_OK);
        save_layer(dir, &w);
        ag_weights_destroy(&w);
    }
    mkdir(out2, 0755);
    write_text(tmp_path("whole2/round-2"), "in the way");
    const char *xp = save_f32(pb[0], "whole-x.npy", X, N, D);
    snprintf(args, sizeof args, "grad graphs/sentence.gml --features %s --weights %s --dout %s "
             "--out %s", xp, wdir, xp, out2);
    expect_cli(args, 1, 2, "round-2: a file has that name");
    ck_assert(!file_exists(tmp_path("whole2/round-1")));
    ck_assert(!file_exists(tmp_path("whole2/dx.npy")));
    ck_assert(file_exists(tmp_path("whole2/round-2")));
}
END_TEST

/* ---- train ---- */

#define PLANTED "graphs/planted.gml --features graphs/planted/x.npy --labels " \
                "graphs/planted/labels.npy --train-mask graphs/planted/train.npy " \
                "--eval-mask graphs/planted/eval.npy"

/* Accuracy of a --predict file on the nodes of a mask file. */
static double accuracy(const char *pred_path, const char *labels_path, const char *mask_path)
{
    int64_t *pred, *labels, n, m;
    ag_error_t err;
    ck_assert_msg(ag_index_read_npy(&pred, &n, pred_path, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(ag_index_read_npy(&labels, &m, labels_path, &err), AG_OK);
    ck_assert_int_eq(n, m);
    ag_array_t mask;
    ck_assert_int_eq(ag_array_read_npy(&mask, mask_path, &err), AG_OK);
    int64_t right = 0, counted = 0;
    for (int64_t i = 0; i < n; i++)
        if (mask.data[i] != 0 && labels[i] >= 0)
            counted++, right += pred[i] == labels[i];
    free(pred), free(labels);
    ag_array_destroy(&mask);
    ck_assert_int_gt(counted, 0);
    return (double)right / (double)counted;
}

START_TEST(train_learns_the_planted_partition)
{
    TMP(pred, "planted-pred.npy");

    TMP(pred0, "planted-pred0.npy");
    char args[2048];
    snprintf(args, sizeof args, "train " PLANTED " --rounds 2 --heads 2 --epochs 150 --predict %s",
             pred);
    expect_cli(args, 0, 1, "final (epoch 150)");
    const double two = accuracy(pred, "graphs/planted/labels.npy", "graphs/planted/eval.npy");
    ck_assert_msg(two >= 0.9, "two rounds: held-out accuracy %.3f", two);
    /* the readout alone sees only the features, known for a third of the nodes */
    snprintf(args, sizeof args, "train " PLANTED " --rounds 0 --epochs 150 --predict %s", pred0);
    expect_cli(args, 0, 1, "final (epoch 150)");
    const double zero = accuracy(pred0, "graphs/planted/labels.npy", "graphs/planted/eval.npy");
    ck_assert_msg(zero < 0.75, "readout only: held-out accuracy %.3f", zero);
}
END_TEST

/* --test-mask: the accuracy on its nodes at the epoch of the best eval accuracy,
   which must be what the model trained for that many epochs predicts; the
   default eval nodes leave the test nodes out. */
START_TEST(train_reports_test_accuracy_at_best_eval)
{
    ag_array_t held;
    ag_error_t err;
    ck_assert_int_eq(ag_array_read_npy(&held, "graphs/planted/eval.npy", &err), AG_OK);
    ck_assert_int_eq(held.shape[0], 300);
    unsigned char ev[300] = {0}, te[300] = {0};
    int64_t n_test = 0, k = 0;
    for (int i = 0; i < 300; i++)   /* the held-out nodes, alternately eval and test */
        if (held.data[i] != 0) {
            if (k++ % 2)
                te[i] = 1, n_test++;
            else
                ev[i] = 1;
        }
    ag_array_destroy(&held);
    write_npy_raw(tmp_path("ev.npy"), "|b1", 0, "(300,)", ev, sizeof ev);
    write_npy_raw(tmp_path("te.npy"), "|b1", 0, "(300,)", te, sizeof te);
    TMP(pred, "test-pred.npy");
    char args[2048], *out;
    const char *task = "train graphs/planted.gml --features graphs/planted/x.npy --labels "
                       "graphs/planted/labels.npy --train-mask graphs/planted/train.npy "
                       "--rounds 2 --heads 2 --lr 0.02 --threads 1";
    TMP(log, "test-acc.csv");
    snprintf(args, sizeof args, "%s --eval-mask %s --test-mask %s --epochs 40 --log %s", task,
             tmp_path("ev.npy"), tmp_path("te.npy"), log);
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    const char *at = strstr(out, "best eval accuracy");
    ck_assert_msg(at, "%s", out);
    double best, test;
    long long epoch, epoch2, right, of;
    ck_assert_msg(sscanf(at, "best eval accuracy %lf%% at epoch %lld; test accuracy %lf%% "
                         "(%lld/%lld) at epoch %lld", &best, &epoch, &test, &right, &of,
                         &epoch2) == 6, "%s", out);
    ck_assert_int_eq(epoch, epoch2);
    ck_assert_int_eq(of, n_test);
    ck_assert_msg(epoch > 0, "best eval at epoch 0: %s", out);
    ck_assert_msg(strstr(out, "test_acc") == NULL, "one connectivity has no table: %s", out);
    free(out);
    /* the log's row of that epoch has the same test accuracy in its test_accuracy
       column, the ninth (the AUC columns after it are empty) */
    char *text = read_text(log), key[64];
    snprintf(key, sizeof key, "\ngraphs/planted.gml,%lld,", epoch);
    const char *row = strstr(text, key);
    ck_assert_msg(row, "no row %s in %s", key + 1, text);
    const char *eol = strchr(row + 1, '\n'), *last = row + 1;
    int commas = 0;
    for (const char *c = row + 1; c < eol && commas < 8; c++)
        if (*c == ',' && ++commas == 8)
            last = c + 1;
    ck_assert(strncmp(eol - 3, ",,,", 3) == 0);
    ck_assert_double_eq_tol(strtod(last, NULL), (double)right / (double)of, 1e-6);
    free(text);
    snprintf(args, sizeof args, "%s --eval-mask %s --epochs %lld --predict %s --quiet", task,
             tmp_path("ev.npy"), epoch, pred);
    ck_assert_int_eq(run_cli(args, NULL, NULL), 0);
    const double want = accuracy(pred, "graphs/planted/labels.npy", tmp_path("te.npy"));
    ck_assert_msg(fabs(want - (double)right / (double)of) < 1e-12,
                  "reported %lld/%lld, the model of epoch %lld predicts %.4f", right, of, epoch,
                  want);
    /* without --eval-mask, the held-out nodes minus the test ones are the eval nodes */
    snprintf(args, sizeof args, "%s --test-mask %s --epochs 2", task, tmp_path("te.npy"));
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    char want_line[128];
    snprintf(want_line, sizeof want_line, " train, %lld eval and %lld test nodes",
             (long long)(k - n_test), (long long)n_test);
    ck_assert_msg(strstr(out, want_line), "no '%s' in %s", want_line, out);
    free(out);
    unsigned char none[300] = {0};
    write_npy_raw(tmp_path("none-test.npy"), "|b1", 0, "(300,)", none, sizeof none);
    snprintf(args, sizeof args, "%s --test-mask %s", task, tmp_path("none-test.npy"));
    expect_cli(args, 1, 2, "none-test.npy selects no labelled node; nothing to test");
}
END_TEST

/* Are the files of two folders byte for byte the same? */
static void expect_same_files(const char *a, const char *b, const char *const *names, int n)
{
    for (int k = 0; k < n; k++) {
        char pa[1024], pz[1024];
        snprintf(pa, sizeof pa, "%s/%s", a, names[k]);
        snprintf(pz, sizeof pz, "%s/%s", b, names[k]);
        expect_same_bytes(pa, pz);
    }
}

START_TEST(same_seed_same_weights_on_1_and_2_threads)
{
    const char *names[] = {"wq.npy", "wk.npy", "wv.npy", "wo.npy", "ln_weight.npy",
                           "ln_bias.npy", "readout.npy", "readout_bias.npy"};
    /* causal on 1024 nodes: every kernel, projection and loss has work enough for two
       threads (the planted partition's 2626 messages would run on one either way) */
    for (int threads = 1; threads <= 2; threads++) {
        char args[2048];
        snprintf(args, sizeof args, "train --pattern causal --features graphs/copy/x.npy "
                 "--labels graphs/copy/labels.npy --train-mask graphs/copy/train.npy --rounds 2 "
                 "--heads 2 --head-dim 8 --norm layer --epochs 3 --seed 9 --threads %d --save %s "
                 "--quiet", threads, tmp_path(threads == 1 ? "seed-t1" : "seed-t2"));
        expect_cli(args, 0, 1, "");
    }
    expect_same_files(tmp_path("seed-t1"), tmp_path("seed-t2"), names, 8);
}
END_TEST

/* --dropout and --attn-dropout: the same weights on 1 and 2 threads, other
   weights than without dropout, and the figures of epoch 0 (the model before
   any step, without dropout) the same as without. */
START_TEST(dropout_same_weights_on_1_and_2_threads)
{
    const char *names[] = {"wq.npy", "wk.npy", "wv.npy", "wo.npy", "readout.npy"};
    const char *dirs[] = {"drop-t1", "drop-t2", "drop-none"};
    const char *logs[] = {"drop-t1.csv", "drop-t2.csv", "drop-none.csv"};
    for (int run = 0; run < 3; run++) {
        char args[2048];
        snprintf(args, sizeof args, "train --pattern causal --features graphs/copy/x.npy "
                 "--labels graphs/copy/labels.npy --train-mask graphs/copy/train.npy --rounds 2 "
                 "--heads 2 --head-dim 8 --epochs 3 --seed 9 --threads %d %s --save %s --log %s "
                 "--quiet", run == 1 ? 2 : 1, run < 2 ? "--dropout 0.3 --attn-dropout 0.5" : "",
                 tmp_path(dirs[run]), tmp_path(logs[run]));
        expect_cli(args, 0, 1, "");
    }
    expect_same_files(tmp_path("drop-t1"), tmp_path("drop-t2"), names, 5);
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/wq.npy", tmp_path("drop-t1"));
    snprintf(b, sizeof b, "%s/wq.npy", tmp_path("drop-none"));
    char *wa = read_text(a), *wb = read_text(b);
    ck_assert_int_ne(memcmp(wa, wb, 128 + 64 * 4), 0);   /* header and a row of floats */
    free(wa), free(wb);
    /* epoch 0's row: the same model, evaluated without dropout */
    char *la = read_text(tmp_path("drop-t1.csv")), *lb = read_text(tmp_path("drop-none.csv"));
    const char *ra = strstr(la, "\ncausal,0,"), *rb = strstr(lb, "\ncausal,0,");
    ck_assert(ra && rb);
    ck_assert_int_eq(strcspn(ra, "\n"), strcspn(rb, "\n"));
    ck_assert_int_eq(strncmp(ra, rb, strcspn(ra, "\n")), 0);
    const char *sa = strstr(la, "\ncausal,1,"), *sb = strstr(lb, "\ncausal,1,");
    ck_assert(sa && sb);
    ck_assert_int_ne(strncmp(sa, sb, strcspn(sa + 1, "\n")), 0);   /* then the steps differ */
    free(la), free(lb);
    expect_cli("train --pattern causal --features graphs/copy/x.npy --labels "
               "graphs/copy/labels.npy --dropout 1", 2, 2, "--dropout '1' is not a probability");
}
END_TEST

START_TEST(save_then_run_predicts_the_same_classes)
{
    TMP(model, "model");

    TMP(p1, "p1.npy");

    TMP(p2, "p2.npy");
    char args[2048], *out;
    snprintf(args, sizeof args, "train " PLANTED " --rounds 2 --heads 2 --score additive "
             "--no-residual --epochs 30 --save %s --predict %s", model, p1);
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    /* the report says how to predict with the saved model; do exactly that */
    char *hint = strstr(out, "predict with: attngraph run ");
    ck_assert_ptr_nonnull(hint);
    hint += strlen("predict with: attngraph ");
    char *end = strstr(hint, "FILE.npy");
    ck_assert_ptr_nonnull(end);
    snprintf(args, sizeof args, "%.*s%s --quiet", (int)(end - hint), hint, p2);
    free(out);
    ck_assert_msg(strstr(args, "--score additive --no-residual"), "%s", args);
    expect_cli(args, 0, 1, "");
    ck_assert(file_exists(tmp_path("model/attn_src.npy")));
    ck_assert(!file_exists(tmp_path("model/attn.npy")));   /* gatv2's vector is not used */
    int64_t *a, *b, na, nb;
    ag_error_t err;
    ck_assert_int_eq(ag_index_read_npy(&a, &na, p1, &err), AG_OK);
    ck_assert_int_eq(ag_index_read_npy(&b, &nb, p2, &err), AG_OK);
    ck_assert_int_eq(na, 300);
    ck_assert_int_eq(nb, 300);
    for (int64_t i = 0; i < na; i++)
        ck_assert_msg(a[i] == b[i], "node %lld: train predicted %lld, run %lld", (long long)i,
                      (long long)a[i], (long long)b[i]);
    free(a), free(b);

    /* the saved model.args says what the arrays cannot: given none of the model's
       options, run takes them from it; given some, they must agree */
    char *text = read_text(tmp_path("model/model.args"));
    ck_assert_str_eq(text, "--heads 2 --rounds 2 --score additive --no-residual\n");
    free(text);
    TMP(p3, "p3.npy");
    snprintf(args, sizeof args, "run graphs/planted.gml --features graphs/planted/x.npy "
             "--weights %s --predict %s --quiet", model, p3);
    expect_cli(args, 0, 1, "");
    int64_t *c, nc;
    ck_assert_int_eq(ag_index_read_npy(&a, &na, p1, &err), AG_OK);
    ck_assert_int_eq(ag_index_read_npy(&c, &nc, p3, &err), AG_OK);
    ck_assert_int_eq(nc, na);
    for (int64_t i = 0; i < na; i++)
        ck_assert_msg(a[i] == c[i], "node %lld: train predicted %lld, run %lld", (long long)i,
                      (long long)a[i], (long long)c[i]);
    free(a), free(c);
    /* and train goes on from it the same way (it kept --heads and lost --rounds 2) */
    TMP(model3, "model3");
    snprintf(args, sizeof args, "train " PLANTED " --weights %s --epochs 1 --save %s --quiet",
             model, model3);
    expect_cli(args, 0, 1, "");
    text = read_text(tmp_path("model3/model.args"));
    ck_assert_str_eq(text, "--heads 2 --rounds 2 --score additive --no-residual\n");
    free(text);
    snprintf(args, sizeof args, "run graphs/planted.gml --features graphs/planted/x.npy "
             "--weights %s --heads 2 --predict %s", model, p2);
    expect_cli(args, 1, 2, "was trained with `--heads 2 --rounds 2 --score additive "
               "--no-residual` (");
    snprintf(args, sizeof args, "run graphs/planted.gml --features graphs/planted/x.npy "
             "--weights %s --heads 2 --rounds 2 --score additive --no-residual --norm layer "
             "--predict %s", model, p2);
    expect_cli(args, 1, 2, "this command has `--heads 2 --rounds 2 --score additive "
               "--no-residual --norm layer`");
    /* an option at its default value is not written: --slope 0.2 is additive's own */
    TMP(model2, "model2");
    snprintf(args, sizeof args, "train " PLANTED " --score additive --slope 0.2 --epochs 1 "
             "--save %s --quiet", model2);
    expect_cli(args, 0, 1, "");
    text = read_text(tmp_path("model2/model.args"));
    ck_assert_str_eq(text, "--heads 1 --rounds 1 --score additive\n");
    free(text);
    write_text(tmp_path("model/model.args"), "heads 2\n");
    snprintf(args, sizeof args, "run graphs/planted.gml --features graphs/planted/x.npy "
             "--weights %s --predict %s", model, p2);
    expect_cli(args, 2, 2, "model.args: 'heads' is not one of the model's options");
    write_text(tmp_path("model/model.args"), "--heads 2 --out x.npy\n");
    expect_cli(args, 2, 2, "model.args: '--out' is not one of the model's options");
    write_text(tmp_path("model/model.args"), "--heads 0\n");
    expect_cli(args, 2, 2, "--heads '0' is not an integer in 1..4096");
}
END_TEST

/* Compares two .npy index files of predictions, entry by entry. */
static void same_predictions(const char *p1, const char *p2)
{
    int64_t *a, *b, na, nb;
    ag_error_t err;
    ck_assert_int_eq(ag_index_read_npy(&a, &na, p1, &err), AG_OK);
    ck_assert_int_eq(ag_index_read_npy(&b, &nb, p2, &err), AG_OK);
    ck_assert_int_eq(na, nb);
    for (int64_t i = 0; i < na; i++)
        ck_assert_msg(a[i] == b[i], "node %lld: %lld in %s, %lld in %s", (long long)i,
                      (long long)a[i], p1, (long long)b[i], p2);
    free(a), free(b);
}

#define KARATE "graphs/karate.gml --features graphs/karate/x.npy"

/* model.args records how the graph was shaped (self-loops, direction: they
   change the messages) and every value as the float32 the model uses. */
START_TEST(model_args_record_the_graph_and_exact_values)
{
    TMP(model, "karate-model");
    TMP(p1, "karate-p1.npy");
    TMP(p2, "karate-p2.npy");
    char args[2048];
    snprintf(args, sizeof args, "train " KARATE " --labels graphs/karate/labels.npy "
             "--train-mask graphs/karate/train.npy --self-loops on --no-residual --rounds 2 "
             "--epochs 30 --beta 0.3 --save %s --predict %s --quiet", model, p1);
    expect_cli(args, 0, 1, "");
    char *text = read_text(tmp_path("karate-model/model.args"));
    ck_assert_str_eq(text, "--heads 1 --rounds 2 --beta 0.300000012 --no-residual "
                           "--self-loops on\n");
    free(text);
    /* no model option given: all of them, self-loops too, come from model.args */
    snprintf(args, sizeof args, "run " KARATE " --weights %s --predict %s --quiet", model, p2);
    expect_cli(args, 0, 1, "");
    same_predictions(p1, p2);
    /* the same options given, written any way (0.3 is the float32 0.300000012) */
    snprintf(args, sizeof args, "run " KARATE " --weights %s --rounds 2 --beta 0.3 "
             "--no-residual --self-loops on --predict %s --quiet", model, p2);
    expect_cli(args, 0, 1, "");
    same_predictions(p1, p2);
    /* the graph options are a group of their own: given the model's options
       only, the self-loops still come from model.args */
    unlink(p2);
    snprintf(args, sizeof args, "run " KARATE " --weights %s --rounds 2 --beta 0.3 "
             "--no-residual --predict %s --quiet", model, p2);
    expect_cli(args, 0, 1, "");
    same_predictions(p1, p2);
    /* other self-loops than it was trained with: refused, nothing written */
    unlink(p2);
    snprintf(args, sizeof args, "run " KARATE " --weights %s --self-loops off --predict %s",
             model, p2);
    expect_cli(args, 1, 2, "was trained with `--heads 1 --rounds 2 --beta 0.300000012 "
               "--no-residual --self-loops on`");
    expect_cli(args, 1, 2, "this command has `--heads 1 --rounds 2 --beta 0.300000012 "
               "--no-residual --self-loops off`");
    ck_assert(!file_exists(p2));
    /* 0 means 0: a ReLU (slope 0) is recorded, not mistaken for the default */
    TMP(relu, "relu-model");
    snprintf(args, sizeof args, "train " PLANTED " --score additive --slope 0 --beta 0 "
             "--epochs 1 --save %s --quiet", relu);
    expect_cli(args, 0, 1, "");
    text = read_text(tmp_path("relu-model/model.args"));
    ck_assert_str_eq(text, "--heads 1 --rounds 1 --score additive --beta 0 --slope 0\n");
    free(text);
    /* a direction given for an edge list is recorded too */
    TMP(dir, "undirected-model");
    TMP(y, "random10-y.npy");
    float targets[10 * 4];
    for (int k = 0; k < 40; k++)
        targets[k] = (float)(k % 7) / 7.0f;
    ag_error_t err;
    ck_assert_int_eq(ag_npy_write_f32(y, targets, 10, 4, &err), AG_OK);
    snprintf(args, sizeof args, "train graphs/random10.edges --undirected --features %s "
             "--targets %s --epochs 1 --save %s --quiet", y, y, dir);
    expect_cli(args, 0, 1, "");
    text = read_text(tmp_path("undirected-model/model.args"));
    ck_assert_str_eq(text, "--heads 1 --rounds 1 --undirected\n");
    free(text);
    /* it runs on the edge list (read undirected, from model.args) and on a
       pattern, which has no direction to agree on; --directed is refused */
    snprintf(args, sizeof args, "run graphs/random10.edges --features %s --weights %s --quiet",
             y, dir);
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "run --pattern causal --nodes 10 --features %s --weights %s "
             "--quiet", y, dir);
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "run graphs/random10.edges --directed --features %s --weights %s",
             y, dir);
    expect_cli(args, 1, 2, "this command has `--heads 1 --rounds 1 --directed`");
}
END_TEST

START_TEST(train_log_has_a_row_per_epoch)
{
    TMP(log, "train.csv");
    char args[2048];
    snprintf(args, sizeof args, "train " PLANTED " --rounds 1 --epochs 12 --every 5 --log %s",
             log);
    char *out;
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    /* lines every 5 epochs and the last */
    ck_assert_ptr_nonnull(strstr(out, "\n    5 "));
    ck_assert_ptr_nonnull(strstr(out, "\n   10 "));
    ck_assert_ptr_nonnull(strstr(out, "\n   12 "));
    ck_assert_ptr_null(strstr(out, "\n    6 "));
    free(out);
    char *text = read_text(log);
    ck_assert(strncmp(text, "connectivity,epoch,loss,train_accuracy,eval_loss,eval_accuracy,"
                            "grad_norm,test_loss,test_accuracy,train_auc,eval_auc,test_auc\n",
                      123) == 0);
    int rows = 0;
    for (char *p = strchr(text, '\n'); p && p[1]; p = strchr(p + 1, '\n'))
        rows++;
    ck_assert_int_eq(rows, 13);   /* epochs 0..12 */
    ck_assert_ptr_nonnull(strstr(text, "\ngraphs/planted.gml,12,"));
    ck_assert_ptr_nonnull(strstr(text, ",,\n"));   /* no --test-mask: empty test columns */
    free(text);
}
END_TEST

/* The final eval accuracy of a connectivity in a --log file. */
static double final_eval_accuracy(const char *log, const char *conn, int epochs)
{
    char *text = read_text(log), key[128];
    ck_assert_ptr_nonnull(text);
    snprintf(key, sizeof key, "\n%s,%d,", conn, epochs);
    const char *row = strstr(text, key);
    ck_assert_msg(row, "%s has no row '%s'", log, key + 1);
    double loss, train, eval_loss, eval;
    ck_assert_int_eq(sscanf(row + strlen(key), "%lf,%lf,%lf,%lf", &loss, &train, &eval_loss,
                            &eval), 4);
    free(text);
    return eval;
}

START_TEST(train_compares_connectivities)
{
    /* the copy task: the label at i is the token at i-3; window:8 sees i-3, window:2
       does not */
    TMP(log, "cmp.csv");
    char args[2048], *out;
    snprintf(args, sizeof args, "train --pattern window:8 --pattern window:2 --features "
             "graphs/copy/x.npy --labels graphs/copy/labels.npy --train-mask "
             "graphs/copy/train.npy --eval-mask graphs/copy/eval.npy --heads 2 --head-dim 8 "
             "--alibi --no-residual --lr 0.03 --epochs 100 --threads 1 --log %s", log);
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    ck_assert_msg(strstr(out, "trained on 2 connectivities of 1024 nodes"), "%s", out);
    ck_assert_msg(strstr(out, "\nwindow:8 "), "%s", out);
    ck_assert_msg(strstr(out, "\nwindow:2 "), "%s", out);
    ck_assert_msg(strstr(out, "at_epoch"), "%s", out);
    free(out);
    const double sees = final_eval_accuracy(log, "window:8", 100);
    const double blind = final_eval_accuracy(log, "window:2", 100);
    ck_assert_msg(sees >= 0.9, "window:8 held-out accuracy %.3f", sees);
    ck_assert_msg(blind <= 0.35, "window:2 held-out accuracy %.3f (chance: 0.2)", blind);
}
END_TEST

START_TEST(train_targets_learn_states)
{
    /* mean squared error: the loss must fall */
    float x[4 * 4], y[4 * 4];
    fill_uniform(x, 16, 71, 1.0f), fill_uniform(y, 16, 72, 1.0f);
    char args[2048], *out;
    snprintf(args, sizeof args, "train graphs/sentence.gml --features %s --targets %s --epochs 50 "
             "--lr 0.05 --log %s", save_f32(pb[1], "tx.npy", x, 4, 4), save_f32(pb[2], "ty.npy", y, 4, 4),
             tmp_path("mse.csv"));
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    free(out);
    char *text = read_text(tmp_path("mse.csv"));
    double first, last;
    ck_assert_int_eq(sscanf(strstr(text, "\ngraphs/sentence.gml,0,") + 23, "%lf", &first), 1);
    ck_assert_int_eq(sscanf(strstr(text, "\ngraphs/sentence.gml,50,") + 24, "%lf", &last), 1);
    ck_assert_msg(last < 0.7 * first, "loss %g -> %g", first, last);
    free(text);
}
END_TEST

START_TEST(train_refusals)
{
    const char *x = "graphs/planted/x.npy", *labels = "graphs/planted/labels.npy";
    char args[2048];
    int64_t bad[300];
    for (int i = 0; i < 300; i++)
        bad[i] = i % 3;
    expect_cli("train graphs/planted.gml --labels graphs/planted/labels.npy", 2, 2,
               "give --features X.npy");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s", x);
    expect_cli(args, 2, 2, "give --labels L.npy (a class per node) or --targets Y.npy");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --targets %s",
             x, labels, x);
    expect_cli(args, 2, 2, "give --labels or --targets, not both");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s "
             "--momentum 0.9", x, labels);
    expect_cli(args, 2, 2, "--momentum is sgd's; --optimizer is adam");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s "
             "--optimizer rmsprop", x, labels);
    expect_cli(args, 2, 2, "--optimizer 'rmsprop': expected adam, adamw or sgd");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --lr 0", x,
             labels);
    expect_cli(args, 2, 2, "--lr '0' is not a number > 0");
    snprintf(args, sizeof args, "train --pattern causal --pattern window:2 --features %s "
             "--labels %s --save %s", x, labels, tmp_path("m2"));
    expect_cli(args, 2, 2, "--save keeps one trained model; give one connectivity");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --targets %s "
             "--predict p.npy", x, x);
    expect_cli(args, 2, 2, "--predict writes classes; it needs --labels");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --q %s", x,
             labels, x);
    expect_cli(args, 2, 2, "--q does not apply");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --rounds -1",
             x, labels);
    expect_cli(args, 2, 2, "--rounds '-1' is not an integer in 0..1000000");

    /* bad files: named, with the value */
    snprintf(args, sizeof args, "train graphs/sentence.gml --features %s --labels %s", x, labels);
    expect_cli(args, 1, 2, "has 4 nodes; --features graphs/planted/x.npy has 300 rows");
    float flabels[300] = {0};
    write_npy_raw(tmp_path("flabels.npy"), "<f4", 0, "(300,)", flabels, sizeof flabels);
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s", x,
             tmp_path("flabels.npy"));
    expect_cli(args, 1, 2, "flabels.npy: dtype is float32; expected an integer dtype");
    write_npy_raw(tmp_path("short.npy"), "<i8", 0, "(3,)", bad, 3 * 8);
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s", x,
             tmp_path("short.npy"));
    expect_cli(args, 1, 2, "short.npy has 3 entries; the graph has 300 nodes");
    bad[7] = -2;
    write_npy_raw(tmp_path("neg.npy"), "<i8", 0, "(300,)", bad, sizeof bad);
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s", x,
             tmp_path("neg.npy"));
    expect_cli(args, 1, 2, "node 7 has label -2");
    for (int i = 0; i < 300; i++)
        bad[i] = i == 5 ? 0 : -1;
    write_npy_raw(tmp_path("one.npy"), "<i8", 0, "(300,)", bad, sizeof bad);
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s", x,
             tmp_path("one.npy"));
    expect_cli(args, 1, 2, "has one class (0); nothing to learn");
    for (int i = 0; i < 300; i++)
        bad[i] = -1;
    write_npy_raw(tmp_path("none.npy"), "<i8", 0, "(300,)", bad, sizeof bad);
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s", x,
             tmp_path("none.npy"));
    expect_cli(args, 1, 2, "every label is -1; nothing to learn");
    unsigned char mask[300] = {0};
    write_npy_raw(tmp_path("empty.npy"), "|b1", 0, "(300,)", mask, sizeof mask);
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s "
             "--train-mask %s", x, labels, tmp_path("empty.npy"));
    expect_cli(args, 1, 2, "empty.npy selects no labelled node; nothing to learn");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s "
             "--eval-mask %s", x, labels, tmp_path("empty.npy"));
    expect_cli(args, 1, 2, "empty.npy selects no labelled node; nothing to evaluate");
    mask[3] = 2;
    write_npy_raw(tmp_path("two.npy"), "|u1", 0, "(300,)", mask, sizeof mask);
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s "
             "--train-mask %s", x, labels, tmp_path("two.npy"));
    expect_cli(args, 1, 2, "two.npy: entry 3 is 2; a mask holds 0 (out) and 1 (in)");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s "
             "--train-mask %s", x, labels, tmp_path("short.npy"));
    expect_cli(args, 1, 2, "--train-mask");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --targets %s", x,
             "graphs/karate/x.npy");
    expect_cli(args, 1, 2, "--targets graphs/karate/x.npy is [34, 2]; the states are [300, 8]");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --targets %s --rounds 0",
             x, x);
    expect_cli(args, 1, 2, "nothing to learn: with --rounds 0 and --targets");
    /* a readout that does not fit the labels */
    TMP(model, "m3");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --epochs 1 "
             "--save %s --quiet", x, labels, model);
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "train graphs/karate.gml --features graphs/karate/x.npy "
             "--labels graphs/karate/labels.npy --weights %s", model);
    expect_cli(args, 1, 2, "wq.npy has 8 columns (D); the features have 2");
    /* a folder whose round-1/ layer run --weights would read in place of the saved one */
    mkdir(tmp_path("m4"), 0755);
    mkdir(tmp_path("m4/round-1"), 0755);
    write_text(tmp_path("m4/round-1/wq.npy"), "old");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --epochs 1 "
             "--save %s", x, labels, tmp_path("m4"));
    expect_cli(args, 1, 2, "m4 holds round-1/, a layer of an earlier model");
    int64_t six[300];
    for (int i = 0; i < 300; i++)
        six[i] = i % 6;
    write_npy_raw(tmp_path("six.npy"), "<i8", 0, "(300,)", six, sizeof six);
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --weights %s",
             x, tmp_path("six.npy"), model);
    expect_cli(args, 1, 2, "m3/readout.npy has 3 classes; --labels");
    /* classes 0, 1, 2 and 6: 3, 4 and 5 have no node; a warning, and training goes on */
    for (int i = 0; i < 300; i++)
        six[i] = i % 4 == 3 ? 6 : i % 4;
    write_npy_raw(tmp_path("gap.npy"), "<i8", 0, "(300,)", six, sizeof six);
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --epochs 1 "
             "--quiet", x, tmp_path("gap.npy"));
    expect_cli(args, 0, 2, "gap.npy: classes 3, 4, 5 have no node (C = 7, from the largest "
               "label)");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --lr 1e30 "
             "--epochs 3", x, labels);
    expect_cli(args, 1, 2, "epoch 1: the loss is NaN: training diverged; lower --lr (1e+30) "
               "or set --clip");
    /* a value float32 cannot hold is refused, not turned into inf */
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --lr 1e40",
             x, labels);
    expect_cli(args, 2, 2, "--lr '1e40' is beyond float32's range");
    /* outputs that cannot be made are named by their option, before any work */
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --predict "
             "%s --epochs 3", x, labels, tmp_path("no-such-folder/p.npy"));
    expect_cli(args, 1, 2, "--predict /");
    snprintf(args, sizeof args, "train graphs/planted.gml --features %s --labels %s --log "
             "%s --epochs 3", x, labels, tmp_path("no-such-folder/l.csv"));
    expect_cli(args, 1, 2, "--log /");
}
END_TEST

START_TEST(run_predict_refusals)
{
    expect_cli("run graphs/planted.gml --features graphs/planted/x.npy --predict p.npy", 2, 2,
               "--predict reads the readout of a trained model: give --weights DIR");
    expect_cli("run graphs/sentence.gml --rounds 0", 2, 2, "0, the readout alone, goes with "
               "--predict");
    expect_cli("run graphs/hopfield.gml --features graphs/hopfield/x.npy --weights "
               "graphs/hopfield --predict p.npy", 1, 2, "--predict: graphs/hopfield/readout.npy: "
               "cannot open: No such file or directory (the readout of a model that train "
               "--save wrote)");
}
END_TEST

Suite *train_cli_suite(void)
{
    Suite *s = suite_create("train_cli");
    TCase *tc = tcase_create("train_cli");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, grad_attention_files_are_the_library_gradients);
    tcase_add_test(tc, grad_edge_bias_comes_in_the_graph_edge_order);
    tcase_add_test(tc, grad_rounds_files_are_the_library_gradients);
    tcase_add_test(tc, grad_per_round_layers_go_to_round_folders);
    tcase_add_test(tc, grad_refusals);
    tcase_add_test(tc, grad_folder_appears_whole_or_not_at_all);
    tcase_add_test(tc, train_learns_the_planted_partition);
    tcase_add_test(tc, train_reports_test_accuracy_at_best_eval);
    tcase_add_test(tc, same_seed_same_weights_on_1_and_2_threads);
    tcase_add_test(tc, dropout_same_weights_on_1_and_2_threads);
    tcase_add_test(tc, save_then_run_predicts_the_same_classes);
    tcase_add_test(tc, train_log_has_a_row_per_epoch);
    tcase_add_test(tc, train_compares_connectivities);
    tcase_add_test(tc, train_targets_learn_states);
    tcase_add_test(tc, train_refusals);
    tcase_add_test(tc, run_predict_refusals);
    tcase_add_test(tc, model_args_record_the_graph_and_exact_values);
    suite_add_tcase(s, tc);
    return s;
}
