/*
 * Model files (train --model FILE, train --save DIR's model.txt, run --weights
 * DIR): a GAT-shaped model learns the planted partition from the command
 * line; what --save writes is the model file written out by hand here and
 * arrays of the shapes the layers have; run predicts what train predicted;
 * the same bits on 1 and 2 threads; every refusal names the file and line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#define PLANTED "graphs/planted.gml --features graphs/planted/x.npy --labels " \
                "graphs/planted/labels.npy --train-mask graphs/planted/train.npy " \
                "--eval-mask graphs/planted/eval.npy"

/* GAT's shape on the planted partition's 8 features and 3 classes. */
static const char gat[] =
    "# a small GAT\n"
    "score additive\n"
    "self-loops replace   # as GATConv adds them\n"
    "attn-dropout 0.25\n"
    "readout none\n"
    "layer heads=2 dim=4 out=concat projection=one bias=yes act=elu\n"
    "\n"
    "layer heads=1 dim=3 out=mean projection=one bias=yes\n";

/* What train --save writes for it (the file above, in one form). */
static const char gat_saved[] =
    "# attngraph model (docs/model-file.md)\n"
    "score additive\n"
    "self-loops replace\n"
    "attn-dropout 0.25\n"
    "readout none\n"
    "layer heads=2 dim=4 out=concat projection=one bias=yes act=elu\n"
    "layer heads=1 dim=3 out=mean projection=one bias=yes act=none\n";

/* Held-out accuracy of a predictions file on the planted partition. */
static double eval_accuracy(const char *pred_path)
{
    int64_t *pred, *labels, n, m;
    ag_error_t err;
    ck_assert_msg(ag_index_read_npy(&pred, &n, pred_path, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(ag_index_read_npy(&labels, &m, "graphs/planted/labels.npy", &err), AG_OK);
    ag_array_t mask;
    ck_assert_int_eq(ag_array_read_npy(&mask, "graphs/planted/eval.npy", &err), AG_OK);
    ck_assert_int_eq(n, m);
    int64_t right = 0, counted = 0;
    for (int64_t i = 0; i < n; i++)
        if (mask.data[i] != 0)
            counted++, right += pred[i] == labels[i];
    free(pred), free(labels);
    ag_array_destroy(&mask);
    return (double)right / (double)counted;
}

/* The .npy file's shape line, as numpy writes it: "(3, 8)". */
static void expect_shape(const char *path, const char *shape)
{
    char *text = read_text(path);
    ck_assert_msg(text != NULL, "%s is missing", path);
    char want[64];
    snprintf(want, sizeof want, "'shape': %s", shape);
    /* the header's text starts after the magic and its length */
    ck_assert_msg(strstr(text + 10, want), "%s: expected %s", path, want);
    free(text);
}

START_TEST(model_file_trains_saves_and_runs)
{
    char model[512], dir[512], p1[512], p2[512], args[2048];
    snprintf(model, sizeof model, "%s", tmp_path("gat.txt"));
    snprintf(dir, sizeof dir, "%s", tmp_path("gat-saved"));
    snprintf(p1, sizeof p1, "%s", tmp_path("gat-p1.npy"));
    snprintf(p2, sizeof p2, "%s", tmp_path("gat-p2.npy"));
    write_text(model, gat);
    snprintf(args, sizeof args, "train " PLANTED " --model %s --lr 0.02 --epochs 80 --save %s "
             "--predict %s", model, dir, p1);
    char *out;
    ck_assert_int_eq(run_cli(args, &out, NULL), 0);
    ck_assert_msg(strstr(out, "train: 2 layers of") && strstr(out, "(widths 8 -> 8 -> 3, "
                  "additive scores"), "%s", out);
    ck_assert_msg(strstr(out, "attention dropout 0.25"), "%s", out);
    free(out);
    const double acc = eval_accuracy(p1);
    ck_assert_msg(acc >= 0.85, "held-out accuracy %.3f", acc);
    char *saved = read_text(tmp_path("gat-saved/model.txt"));
    ck_assert_str_eq(saved, gat_saved);
    free(saved);
    expect_shape(tmp_path("gat-saved/round-1/wq.npy"), "(8, 8)");
    expect_shape(tmp_path("gat-saved/round-1/bias.npy"), "(8,)");
    expect_shape(tmp_path("gat-saved/round-1/attn_src.npy"), "(2, 4)");
    expect_shape(tmp_path("gat-saved/round-2/wq.npy"), "(3, 8)");
    expect_shape(tmp_path("gat-saved/round-2/bias.npy"), "(3,)");
    ck_assert(!file_exists(tmp_path("gat-saved/round-1/wk.npy")));   /* one projection */
    ck_assert(!file_exists(tmp_path("gat-saved/round-1/wo.npy")));   /* heads concatenated */
    ck_assert(!file_exists(tmp_path("gat-saved/readout.npy")));      /* readout none */
    ck_assert(!file_exists(tmp_path("gat-saved/model.args")));
    /* run reads model.txt from the folder and predicts what train did */
    snprintf(args, sizeof args, "run graphs/planted.gml --features graphs/planted/x.npy "
             "--weights %s --predict %s --quiet", dir, p2);
    expect_cli(args, 0, 1, "");
    expect_same_bytes(p1, p2);
    /* run --model FILE: the same layers from the seed; the output is the last layer's */
    char y[512];
    snprintf(y, sizeof y, "%s", tmp_path("gat-y.npy"));
    snprintf(args, sizeof args, "run graphs/planted.gml --features graphs/planted/x.npy "
             "--model %s --out %s --quiet", model, y);
    expect_cli(args, 0, 1, "");
    expect_shape(y, "(300, 3)");
    /* and train goes on from the folder */
    snprintf(args, sizeof args, "train " PLANTED " --weights %s --epochs 1 --quiet", dir);
    expect_cli(args, 0, 1, "");
}
END_TEST

START_TEST(model_file_same_bits_on_1_and_2_threads)
{
    char model[512], args[2048];
    snprintf(model, sizeof model, "%s", tmp_path("tf.txt"));
    /* a transformer's: widths 8 -> 12 -> 12 -> 3, GELU, residual, LayerNorm, dropout */
    write_text(model, "norm layer\ndropout 0.2\nresid-dropout 0.1\n"
                      "layer heads=2 dim=4 out=12 bias=yes act=gelu\n"
                      "layer heads=3 dim=4 out=12 bias=yes act=relu residual=yes ffn=2\n"
                      "layer heads=1 dim=3 out=mean projection=one\n");
    for (int t = 1; t <= 2; t++) {
        snprintf(args, sizeof args, "train " PLANTED " --model %s --epochs 4 --threads %d "
                 "--save %s --quiet", model, t, tmp_path(t == 1 ? "tf-t1" : "tf-t2"));
        expect_cli(args, 0, 1, "");
    }
    const char *names[] = {"round-1/wq.npy", "round-1/wo.npy", "round-1/bias.npy",
                           "round-1/ln_weight.npy", "round-2/wv.npy", "round-2/w1.npy",
                           "round-2/b2.npy", "round-2/ln2_bias.npy", "round-3/wq.npy",
                           "readout.npy"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s/%s", tmp_path("tf-t1"), names[k]);
        snprintf(b, sizeof b, "%s/%s", tmp_path("tf-t2"), names[k]);
        expect_same_bytes(a, b);
    }
    expect_shape(tmp_path("tf-t1/round-1/wo.npy"), "(12, 8)");
    expect_shape(tmp_path("tf-t1/round-2/w1.npy"), "(24, 12)");   /* ffn=2: 2 x 12 wide */
    expect_shape(tmp_path("tf-t1/round-2/w2.npy"), "(12, 24)");
    char *saved = read_text(tmp_path("tf-t1/model.txt"));
    ck_assert_msg(strstr(saved, "\ndropout 0.2\nresid-dropout 0.1\n"), "%s", saved);
    ck_assert_msg(strstr(saved, "layer heads=3 dim=4 out=12 projection=qkv bias=yes act=relu "
                         "residual=yes ffn=2 ffn_act=gelu\n"), "%s", saved);
    free(saved);
    expect_shape(tmp_path("tf-t1/readout.npy"), "(3, 3)");
}
END_TEST

/* The file `text`, then `train` with it: exit 2 and the message. */
static void refused(const char *text, const char *needle)
{
    char model[512], args[2048];
    snprintf(model, sizeof model, "%s", tmp_path("bad-model.txt"));
    write_text(model, text);
    snprintf(args, sizeof args, "train " PLANTED " --model %s --epochs 1", model);
    expect_cli(args, needle[0] == '!' ? 1 : 2, 2, needle + (needle[0] == '!'));
}

START_TEST(model_file_refusals)
{
    refused("score additive\nlayers heads=2 dim=4\n", "bad-model.txt line 2: unknown key 'layers'");
    refused("layer heads=2 dim=4 width=3\n", "line 1: unknown layer key 'width'");
    refused("layer heads=2 dim=4 act=tanh\n", "line 1: act=tanh; expected none, relu, elu or gelu");
    refused("layer heads=2 dim=4 ffn=0\n", "line 1: ffn=0; expected the hidden width's ratio");
    refused("layer heads=2 dim=4 heads=3\n", "line 1: heads given twice");
    refused("layer heads=2 dim=4 projection=two\n", "line 1: projection=two; expected one");
    refused("layer heads=2 dim=4 out=wide\n", "line 1: out=wide; expected concat, mean or a "
            "width");
    refused("layer heads=2 out=concat\n", "line 1: a layer needs heads=H and dim=d");
    refused("layer heads=0 dim=4\n", "line 1: heads=0; expected an integer in 1..4096");
    refused("layer heads=2 dim=4 bias\n", "line 1: 'bias' is not key=value");
    refused("score additive\n", "bad-model.txt: no layer line");
    refused("score\nlayer heads=1 dim=8\n", "line 1: score needs a value");
    refused("alibi yes\nlayer heads=1 dim=8\n", "line 1: alibi takes no value");
    refused("dropout 1\nlayer heads=1 dim=8\n", "line 1: dropout 1; expected a probability");
    refused("readout softmax\nlayer heads=1 dim=8\n", "line 1: readout softmax; expected linear");
    refused("score additive extra\nlayer heads=1 dim=8\n", "'extra' after score additive");
    refused("score nonsense\nlayer heads=1 dim=8\n", "line 1: score 'nonsense': expected "
            "scaled-dot, dot, cosine");
    refused("rounds 2\nlayer heads=1 dim=8\nlayer heads=1 dim=8\n",
            "line 1: rounds 2 runs one layer 2 times, its weights shared; the file has 2 "
            "layer lines");
    refused("rounds 0\nlayer heads=1 dim=8\n", "line 1: rounds 0; expected a count of rounds");
    refused("score dot\nscore additive\nlayer heads=1 dim=8\n", "line 2: score given twice");
    refused("readout none\nreadout none\nlayer heads=1 dim=8\n", "line 2: readout given twice");
    refused("dropout 0.1\ndropout 0.2\nlayer heads=1 dim=8\n", "line 2: dropout given twice");
    char long_line[1200] = "edge-bias ";   /* a value longer than the options keep */
    memset(long_line + 10, 'w', 1000);
    strcpy(long_line + 1010, "\nlayer heads=1 dim=8\n");
    refused(long_line, "line 1: a value longer than 511 bytes");
    /* shapes only the features' width can refuse: exit 1, naming the line */
    refused("layer heads=2 dim=4 out=concat\nlayer heads=2 dim=2 out=concat residual=yes\n",
            "!line 2: layer 2 reads width 8 and writes 4, so it cannot add a residual");
    refused("readout none\nlayer heads=2 dim=2 out=concat\n",
            "!readout none, so the last layer writes the logits: width 4; the labels have 3 "
            "classes");
    /* options of the command line and the file */
    char model[512], args[2048];
    snprintf(model, sizeof model, "%s", tmp_path("ok-model.txt"));
    write_text(model, "score additive\nlayer heads=1 dim=8\n");
    snprintf(args, sizeof args, "train " PLANTED " --model %s --heads 2", model);
    expect_cli(args, 2, 2, "--heads: the model file");
    snprintf(args, sizeof args, "train " PLANTED " --model %s --score dot", model);
    expect_cli(args, 2, 2, "--score is given on the command line and in");
    snprintf(args, sizeof args, "train " PLANTED " --model %s", tmp_path("no-such-model.txt"));
    expect_cli(args, 2, 2, "cannot read");
    snprintf(args, sizeof args, "inspect graphs/planted.gml --features graphs/planted/x.npy "
             "--model %s --top 2", model);
    expect_cli(args, 2, 2, "inspect runs layers of one shape; a model file (--model) is for "
               "run and train");
    /* a saved folder whose arrays disagree with its model.txt */
    snprintf(args, sizeof args, "train " PLANTED " --model %s --epochs 1 --save %s --quiet", model,
             tmp_path("shapes"));
    expect_cli(args, 0, 1, "");
    const float wrong[4] = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/wq.npy", tmp_path("shapes"));
    ag_error_t err;
    ck_assert_int_eq(ag_npy_write_f32(path, wrong, 2, 2, &err), AG_OK);
    snprintf(args, sizeof args, "run graphs/planted.gml --features graphs/planted/x.npy "
             "--weights %s", tmp_path("shapes"));
    expect_cli(args, 1, 2, "wq.npy is [2, 2]; expected [8, 8]");
}
END_TEST

/* The planted graph and its features, as a C program reads them. */
static void planted(ag_nbhd_t *nb, ag_array_t *x)
{
    igraph_t g;
    ag_error_t err;
    ck_assert_msg(ag_graph_load(&g, "graphs/planted.gml", NULL, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(ag_nbhd_from_graph(nb, &g, &err), AG_OK);
    igraph_destroy(&g);
    ck_assert_int_eq(ag_array_read_npy(x, "graphs/planted/x.npy", &err), AG_OK);
}

/* The library's model object (ag_model_load, ag_model_predict, ag_model_run,
   ag_model_init) against the tool: what `train --save` wrote predicts in C
   what train predicted, the last states are run's bit for bit, and a model
   drawn from a seed is the one `run --model FILE --seed` draws. */
START_TEST(model_object_runs_what_the_tool_saved)
{
    static const char *const models[] = {
        gat,   /* readout none, self-loops, one projection */
        "norm layer\nposenc sinusoidal\nscore gatv2\n"   /* readout linear, FFN, LayerNorm */
        "layer heads=2 dim=4 out=12 bias=yes act=gelu ffn=2 qkv_bias=yes\n"
        "layer heads=1 dim=6 out=concat skip=gate bias=yes\n",
    };
    ag_nbhd_t nb;
    ag_array_t x;
    planted(&nb, &x);
    const int64_t N = nb.n_nodes, E = nb.n_edges;
    for (int k = 0; k < 2; k++) {
        char model[512], dir[512], pred[512], states[512], args[2048];
        snprintf(model, sizeof model, "%s", tmp_path("object.txt"));
        snprintf(dir, sizeof dir, "%s/object-%d", tmp_path(""), k);
        snprintf(pred, sizeof pred, "%s", tmp_path("object-pred.npy"));
        snprintf(states, sizeof states, "%s", tmp_path("object-states.npy"));
        write_text(model, models[k]);
        snprintf(args, sizeof args, "train " PLANTED " --model %s --epochs 15 --save %s "
                 "--predict %s --quiet", model, dir, pred);
        expect_cli(args, 0, 1, "");
        ag_model_t m;
        ag_error_t err;
        ck_assert_msg(ag_model_load(&m, dir, &err) == AG_OK, "%s", err.msg);
        ck_assert_int_eq(m.D, 8);
        ck_assert_int_eq(m.C, k ? 3 : 0);
        ck_assert_int_eq(ag_model_width_out(&m), k ? 6 : 3);
        int64_t *ours = malloc((size_t)N * sizeof *ours), *theirs, n;
        ck_assert_msg(ag_model_predict(&m, &nb, x.data, NULL, ours, &err) == AG_OK, "%s",
                      err.msg);
        ck_assert_int_eq(ag_index_read_npy(&theirs, &n, pred, &err), AG_OK);
        ck_assert_int_eq(n, N);
        for (int64_t i = 0; i < N; i++)
            ck_assert_msg(ours[i] == theirs[i], "model %d node %lld: %lld, train %lld", k,
                          (long long)i, (long long)ours[i], (long long)theirs[i]);
        /* the logits' argmax is the prediction */
        const int64_t C = m.C ? m.C : ag_model_width_out(&m);
        float *out = malloc((size_t)(N * C) * sizeof *out);
        ck_assert_int_eq(ag_model_run(&m, &nb, x.data, NULL, out, &err), AG_OK);
        for (int64_t i = 0; i < N; i++)
            for (int64_t c = 0; c < C; c++)
                ck_assert(out[i * C + c] <= out[i * C + ours[i]]);
        if (k == 0) {   /* no readout: the states are run's */
            snprintf(args, sizeof args, "run graphs/planted.gml --features graphs/planted/x.npy "
                     "--weights %s --out %s --quiet", dir, states);
            expect_cli(args, 0, 1, "");
            ag_array_t y;
            ck_assert_int_eq(ag_array_read_npy(&y, states, &err), AG_OK);
            ck_assert_int_eq(memcmp(y.data, out, (size_t)(N * C) * sizeof *out), 0);
            ag_array_destroy(&y);
            /* drawn from a seed: run --model's states */
            ag_model_spec_t spec;
            ag_model_t fresh;
            ck_assert_int_eq(ag_model_spec_parse(&spec, models[k], "gat", &err), AG_OK);
            ck_assert_int_eq(ag_model_init(&fresh, &spec, 8, 3, 0, 11, &err), AG_OK);
            ck_assert_int_eq(ag_model_run(&fresh, &nb, x.data, NULL, out, &err), AG_OK);
            snprintf(args, sizeof args, "run graphs/planted.gml --features graphs/planted/x.npy "
                     "--model %s --seed 11 --out %s --quiet", model, states);
            expect_cli(args, 0, 1, "");
            ck_assert_int_eq(ag_array_read_npy(&y, states, &err), AG_OK);
            ck_assert_int_eq(memcmp(y.data, out, (size_t)(N * C) * sizeof *out), 0);
            ag_array_destroy(&y);
            ag_model_destroy(&fresh);
        }
        free(out), free(ours), free(theirs);
        ag_model_destroy(&m);
        ck_assert_int_eq(nb.n_edges, E);   /* the model's self-loops were made on a copy */
    }
    /* the folders of `train` without a model file (model.args): one layer every round
       runs, or one a round; what train predicted */
    static const char *const plain[] = {"--rounds 2 --heads 2",
                                        "--rounds 3 --heads 2 --score additive --norm layer "
                                        "--no-residual --self-loops on"};
    for (int k = 0; k < 2; k++) {
        char dir[512], pred[512], args[2048];
        snprintf(dir, sizeof dir, "%s/plain-%d", tmp_path(""), k);
        snprintf(pred, sizeof pred, "%s", tmp_path("plain-pred.npy"));
        snprintf(args, sizeof args, "train " PLANTED " %s --epochs 10 --save %s --predict %s "
                 "--quiet", plain[k], dir, pred);
        expect_cli(args, 0, 1, "");
        ag_model_t m;
        ag_error_t err;
        ck_assert_msg(ag_model_load(&m, dir, &err) == AG_OK, "%s", err.msg);
        ck_assert_int_eq(m.spec.n_layers, 1);
        ck_assert_int_eq(m.spec.rounds, k ? 3 : 2);
        ck_assert_int_eq(m.C, 3);
        int64_t *ours = malloc((size_t)N * sizeof *ours), *theirs, n;
        ck_assert_msg(ag_model_predict(&m, &nb, x.data, NULL, ours, &err) == AG_OK, "%s",
                      err.msg);
        ck_assert_int_eq(ag_index_read_npy(&theirs, &n, pred, &err), AG_OK);
        for (int64_t i = 0; i < N; i++)
            ck_assert_msg(ours[i] == theirs[i], "plain %d node %lld: %lld, train %lld", k,
                          (long long)i, (long long)ours[i], (long long)theirs[i]);
        free(ours), free(theirs);
        ag_model_destroy(&m);
    }
    /* what cannot load says which file and why */
    ag_model_t m;
    ag_error_t err;
    char path[1024];
    snprintf(path, sizeof path, "%s/object-1/round-2/wbeta.npy", tmp_path(""));
    ck_assert_int_eq(remove(path), 0);
    snprintf(path, sizeof path, "%s/object-1", tmp_path(""));
    ck_assert_fails_with(ag_model_load(&m, path, &err), err, AG_EIO, "round-2/wbeta.npy");
    snprintf(path, sizeof path, "%s/object-0/round-2/bias.npy", tmp_path(""));
    const float wrong[4] = {0};
    ck_assert_int_eq(ag_npy_write_f32(path, wrong, 4, 1, &err), AG_OK);
    snprintf(path, sizeof path, "%s/object-0", tmp_path(""));
    ck_assert_fails_with(ag_model_load(&m, path, &err), err, AG_EINVAL,
                         "round-2/bias.npy is [4, 1]; expected [3]");
    ck_assert_fails_with(ag_model_load(&m, tmp_path(""), &err), err, AG_EIO, "model.txt");
    /* one reader of the readout (ag_i_readout_read), the library's and run's: without
       readout_bias.npy the bias is zero, so each logit drops by the bias it had */
    snprintf(path, sizeof path, "%s/plain-1", tmp_path(""));
    ck_assert_msg(ag_model_load(&m, path, &err) == AG_OK, "%s", err.msg);
    const int64_t C = m.C;
    float *with = malloc((size_t)(N * C) * sizeof *with), *without = malloc(
        (size_t)(N * C) * sizeof *without), bias[3];
    memcpy(bias, m.br, sizeof bias);
    ck_assert_int_eq(ag_model_run(&m, &nb, x.data, NULL, with, &err), AG_OK);
    ag_model_destroy(&m);
    char bias_path[1200];
    snprintf(bias_path, sizeof bias_path, "%s/readout_bias.npy", path);
    ck_assert_int_eq(remove(bias_path), 0);
    ck_assert_msg(ag_model_load(&m, path, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(ag_model_run(&m, &nb, x.data, NULL, without, &err), AG_OK);
    for (int64_t i = 0; i < N * C; i++)
        ck_assert_float_eq_tol(without[i], with[i] - bias[i % C], 1e-5f);
    ag_model_destroy(&m);
    free(with), free(without);
    /* a readout of the wrong width: the same message from both */
    char readout[1200], args[2048];
    snprintf(readout, sizeof readout, "%s/readout.npy", path);
    ck_assert_int_eq(ag_npy_write_f32(readout, (const float[10]){0}, 2, 5, &err), AG_OK);
    ck_assert_fails_with(ag_model_load(&m, path, &err), err, AG_EINVAL,
                         "readout.npy is [2, 5]; expected [C, 8]");
    snprintf(args, sizeof args, "run graphs/planted.gml --features graphs/planted/x.npy "
             "--weights %s --predict %s", path, tmp_path("never.npy"));
    expect_cli(args, 1, 2, "readout.npy is [2, 5]; expected [C, 8]");
    ck_assert(!file_exists(tmp_path("never.npy")));
    ag_array_destroy(&x);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* Every file of folder a is in b with the same bytes, and b has no other. */
static void expect_same_folder(const char *a, const char *b)
{
    for (int pass = 0; pass < 2; pass++) {
        const char *from = pass ? b : a, *to = pass ? a : b;
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "cd '%s' && find . -type f | sort", from);
        FILE *p = popen(cmd, "r");
        ck_assert(p != NULL);
        char name[512];
        int files = 0;
        while (fgets(name, sizeof name, p)) {
            name[strcspn(name, "\n")] = '\0';
            char x[1024], y[1024];
            snprintf(x, sizeof x, "%s/%s", from, name + 2);
            snprintf(y, sizeof y, "%s/%s", to, name + 2);
            ck_assert_msg(file_exists(y), "%s is in %s and not in %s", name + 2, from, to);
            if (!pass)
                expect_same_bytes(x, y);
            files++;
        }
        pclose(p);
        ck_assert_msg(files > 2, "%s has %d files", from, files);
    }
}

/* ag_model_save writes what train --save writes: a model loaded and saved
   again is the same folder, byte for byte, for a model file's layers, one
   layer run for rounds (`rounds R`) and a folder of model.args (saved as a
   model text); the tool runs what it saved; a failed save changes nothing. */
START_TEST(model_save_writes_what_train_saves)
{
    static const char *const models[] = {
        "norm layer\nscore gatv2\n"
        "layer heads=2 dim=4 out=12 bias=yes act=gelu ffn=2 qkv_bias=yes\n"
        "layer heads=1 dim=6 out=concat skip=gate bias=yes\n",
        "score additive\nrounds 3\nlayer heads=2 dim=4 bias=yes act=relu\n",
    };
    ag_nbhd_t nb;
    ag_array_t x;
    planted(&nb, &x);
    const int64_t N = nb.n_nodes;
    ag_error_t err;
    char model[512], dir[512], again[512], pred[512], args[2048];
    snprintf(model, sizeof model, "%s", tmp_path("save.txt"));
    snprintf(pred, sizeof pred, "%s", tmp_path("save-pred.npy"));
    for (int k = 0; k < 3; k++) {
        snprintf(dir, sizeof dir, "%s/save-%d", tmp_path(""), k);
        snprintf(again, sizeof again, "%s/save-%d-again", tmp_path(""), k);
        if (k < 2) {
            write_text(model, models[k]);
            snprintf(args, sizeof args, "train " PLANTED " --model %s --epochs 8 --save %s "
                     "--predict %s --quiet", model, dir, pred);
        } else {
            snprintf(args, sizeof args, "train " PLANTED " --rounds 2 --heads 2 --score "
                     "additive --epochs 8 --save %s --predict %s --quiet", dir, pred);
        }
        expect_cli(args, 0, 1, "");
        ag_model_t m;
        ck_assert_msg(ag_model_load(&m, dir, &err) == AG_OK, "%s", err.msg);
        ck_assert_int_eq(m.spec.rounds, k == 0 ? 0 : k == 1 ? 3 : 2);
        ck_assert_msg(ag_model_save(&m, again, &err) == AG_OK, "%s", err.msg);
        ag_model_destroy(&m);
        if (k < 2) {
            expect_same_folder(dir, again);
        } else {   /* model.args is read, and written as a model text */
            char path[1024];
            snprintf(path, sizeof path, "%s/model.txt", again);
            char *text = read_text(path);
            ck_assert_str_eq(text, "# attngraph model (docs/model-file.md)\nscore additive\n"
                                   "readout linear\nrounds 2\nlayer heads=2 dim=4 projection=qkv "
                                   "bias=no act=none residual=yes\n");
            free(text);
            snprintf(path, sizeof path, "%s/model.args", again);
            ck_assert(!file_exists(path));
        }
        /* what was saved predicts what train predicted: from C and from the tool */
        ck_assert_msg(ag_model_load(&m, again, &err) == AG_OK, "%s", err.msg);
        int64_t *ours = malloc((size_t)N * sizeof *ours), *theirs, *tool, n;
        ck_assert_int_eq(ag_model_predict(&m, &nb, x.data, NULL, ours, &err), AG_OK);
        ck_assert_int_eq(ag_index_read_npy(&theirs, &n, pred, &err), AG_OK);
        snprintf(args, sizeof args, "run graphs/planted.gml --features graphs/planted/x.npy "
                 "--weights %s --predict %s --quiet", again, pred);
        expect_cli(args, 0, 1, "");
        ck_assert_int_eq(ag_index_read_npy(&tool, &n, pred, &err), AG_OK);
        for (int64_t i = 0; i < N; i++)
            ck_assert_msg(ours[i] == theirs[i] && tool[i] == theirs[i],
                          "model %d node %lld: C %lld, run %lld, train %lld", k, (long long)i,
                          (long long)ours[i], (long long)tool[i], (long long)theirs[i]);
        free(ours), free(theirs), free(tool);
        ag_model_destroy(&m);
    }
    /* a model drawn from a seed, saved and loaded: the same states bit for bit */
    ag_model_spec_t spec;
    ag_model_t fresh, loaded;
    ck_assert_int_eq(ag_model_spec_parse(&spec, models[1], "m", &err), AG_OK);
    ck_assert_int_eq(ag_model_init(&fresh, &spec, 8, 3, 0, 5, &err), AG_OK);
    snprintf(dir, sizeof dir, "%s/save-fresh", tmp_path(""));
    ck_assert_msg(ag_model_save(&fresh, dir, &err) == AG_OK, "%s", err.msg);
    ck_assert_msg(ag_model_load(&loaded, dir, &err) == AG_OK, "%s", err.msg);
    float *a = malloc((size_t)(N * 3) * sizeof *a), *b = malloc((size_t)(N * 3) * sizeof *b);
    ck_assert_int_eq(ag_model_run(&fresh, &nb, x.data, NULL, a, &err), AG_OK);
    ck_assert_int_eq(ag_model_run(&loaded, &nb, x.data, NULL, b, &err), AG_OK);
    ck_assert_int_eq(memcmp(a, b, (size_t)(N * 3) * sizeof *a), 0);
    free(a), free(b);
    ag_model_destroy(&loaded);
    /* refusals, and a failed save leaves the folder as it was */
    snprintf(dir, sizeof dir, "%s/no-such-folder/model", tmp_path(""));
    ck_assert_fails_with(ag_model_save(&fresh, dir, &err), err, AG_EIO,
                         "no-such-folder/model: cannot create it: ");
    ck_assert_fails_with(ag_model_save(&fresh, model, &err), err, AG_EIO,
                         "save.txt: exists and is not a folder");
    snprintf(dir, sizeof dir, "%s/save-blocked", tmp_path(""));
    char path[1024];
    snprintf(path, sizeof path, "%s/wq.npy", dir);   /* a folder where a file goes */
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_fails_with(ag_model_save(&fresh, dir, &err), err, AG_EIO,
                         "wq.npy: is a directory");
    snprintf(path, sizeof path, "%s/model.txt", dir);
    ck_assert(!file_exists(path));
    snprintf(path, sizeof path, "%s/wk.npy", dir);
    ck_assert(!file_exists(path));
    /* two names of one file in the folder (a hard link): refused, nothing written */
    snprintf(dir, sizeof dir, "%s/save-linked", tmp_path(""));
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    char other[1024];
    snprintf(path, sizeof path, "%s/wq.npy", dir);
    snprintf(other, sizeof other, "%s/wk.npy", dir);
    write_text(path, "old");
    ck_assert_int_eq(link(path, other), 0);
    ck_assert_fails_with(ag_model_save(&fresh, dir, &err), err, AG_EIO,
                         "wk.npy are the same file");
    char *old_text = read_text(path);
    ck_assert_str_eq(old_text, "old");
    free(old_text);
    fresh.C = 0;   /* a linear readout without its classes cannot load again */
    snprintf(dir, sizeof dir, "%s/save-no-classes", tmp_path(""));
    ck_assert_fails_with(ag_model_save(&fresh, dir, &err), err, AG_EINVAL,
                         "a linear readout and no classes");
    ck_assert(!file_exists(dir));
    fresh.C = 3;
    ag_model_destroy(&fresh);
    ag_array_destroy(&x);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* --attn-round of a model of one layer run for rounds: round 2 of 3 is the last
   round of 2 (the same layer, drawn from the same seed); a model of layers of their
   own keeps the refusal. */
START_TEST(attn_round_of_a_rounds_model)
{
    char model[1024], a3[1024], a2[1024], m2[1024], cmd[4096];
    snprintf(model, sizeof model, "%s", tmp_path("attn-r3.txt"));
    snprintf(a3, sizeof a3, "%s", tmp_path("attn-r3.csv"));
    snprintf(a2, sizeof a2, "%s", tmp_path("attn-r2.csv"));
    snprintf(m2, sizeof m2, "%s", tmp_path("save-r2.txt"));
    write_text(model, "rounds 3\nlayer heads=2 dim=4 bias=yes act=relu\n");
    write_text(m2, "rounds 2\nlayer heads=2 dim=4 bias=yes act=relu\n");
    snprintf(cmd, sizeof cmd, "run graphs/karate.gml --dim 8 --model %s --seed 4 "
             "--attn-round 2 --attn %s --quiet", model, a3);
    expect_cli(cmd, 0, 1, "");
    snprintf(cmd, sizeof cmd, "run graphs/karate.gml --dim 8 --model %s --seed 4 --attn %s "
             "--quiet", m2, a2);
    expect_cli(cmd, 0, 1, "");
    expect_same_bytes(a3, a2);
    snprintf(cmd, sizeof cmd, "run graphs/karate.gml --dim 8 --model %s --seed 4 --attn %s "
             "--quiet", model, a2);
    expect_cli(cmd, 0, 1, "");
    char *last = read_text(a2), *second = read_text(a3);
    ck_assert_str_ne(last, second);   /* round 3's attention is another */
    free(last), free(second);
    expect_cli("run graphs/karate.gml --dim 8 --model models/gat-planted.txt --attn-round 1 "
               "--attn x.csv", 1, 2, "--attn-round 1: the layers of models/gat-planted.txt "
               "have heads of their own");
}
END_TEST

/* Writes layer w's four projections into dir (made), as a user's own code might. */
static void write_projections(const char *dir, ag_weights_t *w)
{
    ag_error_t err;
    mkdir(dir, 0777);
    for (int k = 0; k < 4; k++) {
        int64_t shape[3];
        const int ndim = ag_layer_array_shape(w, k, shape);
        char path[1200];
        snprintf(path, sizeof path, "%s/%s.npy", dir, ag_layer_array_info(k)->name);
        ck_assert_int_eq(ag_npy_write_f32_nd(path, *ag_layer_array(w, k), ndim, shape, &err),
                         AG_OK);
    }
}

static void expect_same_layer(const ag_weights_t *got, ag_weights_t *want)
{
    ck_assert_int_eq(got->H, want->H);
    ck_assert_int_eq(got->d, want->d);
    ck_assert_int_eq(got->D, want->D);
    ck_assert_int_eq(got->per_node, want->per_node);
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(memcmp(*ag_layer_array((ag_weights_t *)got, k),
                                *ag_layer_array(want, k),
                                (size_t)ag_layer_array_size(want, k) * sizeof(float)), 0);
}

/* ag_model_load_ex reads the folders no spec describes whole, which run
   --weights reads through it: arrays alone (round-k/ or one shared layer,
   with the heads given) and per-node arrays beside model.args. The arrays are
   the ones written, bit for bit, and the tool's run on the folder is the
   library's. */
START_TEST(model_load_ex_reads_arrays_alone_and_per_node)
{
    ag_error_t err;
    ag_nbhd_t nb;
    ag_array_t x;
    planted(&nb, &x);
    const int64_t N = nb.n_nodes, D = x.shape[1];
    ag_weights_t w[2];
    char bare[1024], sub[1200];
    snprintf(bare, sizeof bare, "%s", tmp_path("bare"));
    mkdir(bare, 0777);
    for (int l = 0; l < 2; l++) {
        ck_assert_int_eq(ag_weights_random(&w[l], D, 2, 4, 0, 7 + l, &err), AG_OK);
        snprintf(sub, sizeof sub, "%s/round-%d", bare, l + 1);
        write_projections(sub, &w[l]);
    }
    ag_model_t m;
    ck_assert_fails_with(ag_model_load(&m, bare, &err), err, AG_EIO, "model.txt");
    ag_model_load_opts_t lo = {.heads = 3};
    ck_assert_fails_with(ag_model_load_ex(&m, bare, &lo, &err), err, AG_EINVAL,
                         "round-1/wq.npy has 8 rows, not a multiple of 3 heads");
    lo.heads = 2;
    ck_assert_msg(ag_model_load_ex(&m, bare, &lo, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.spec.n_layers, 2);
    ck_assert_int_eq(m.spec.rounds, 0);
    ck_assert_int_eq(m.C, 0);
    ck_assert_int_eq(m.D, D);
    for (int l = 0; l < 2; l++)
        expect_same_layer(&m.layers[l], &w[l]);
    float *out = malloc((size_t)(N * D) * sizeof *out);
    ck_assert_int_eq(ag_model_run(&m, &nb, x.data, NULL, out, &err), AG_OK);
    ag_model_destroy(&m);
    char cmd[4096], saved[1200];
    snprintf(saved, sizeof saved, "%s", tmp_path("bare-out.npy"));
    snprintf(cmd, sizeof cmd, "run graphs/planted.gml --features graphs/planted/x.npy "
             "--weights %s --heads 2 --out %s --quiet", bare, saved);
    expect_cli(cmd, 0, 1, "");
    ag_array_t tool;
    ck_assert_msg(ag_array_read_npy(&tool, saved, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(tool.shape[0], N);
    ck_assert_int_eq(tool.shape[1], D);
    ck_assert_int_eq(memcmp(tool.data, out, (size_t)(N * D) * sizeof *out), 0);
    ag_array_destroy(&tool);
    /* per-node arrays [N, H*d, D] with model.args: one layer run 3 rounds */
    char per[1024];
    snprintf(per, sizeof per, "%s", tmp_path("per-node"));
    ag_weights_t p;
    ck_assert_int_eq(ag_weights_random(&p, D, 2, 4, N, 9, &err), AG_OK);
    write_projections(per, &p);
    snprintf(sub, sizeof sub, "%s/model.args", per);
    write_text(sub, "--heads 2 --rounds 3 --no-residual\n");
    ck_assert_msg(ag_model_load(&m, per, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.spec.n_layers, 1);
    ck_assert_int_eq(m.spec.rounds, 3);
    ck_assert_int_eq(m.layers[0].no_residual, 1);
    expect_same_layer(&m.layers[0], &p);
    ck_assert_int_eq(ag_model_run(&m, &nb, x.data, NULL, out, &err), AG_OK);
    ag_model_destroy(&m);
    snprintf(cmd, sizeof cmd, "run graphs/planted.gml --features graphs/planted/x.npy "
             "--weights %s --out %s --quiet", per, saved);
    expect_cli(cmd, 0, 1, "");
    ck_assert_msg(ag_array_read_npy(&tool, saved, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(memcmp(tool.data, out, (size_t)(N * D) * sizeof *out), 0);
    ag_array_destroy(&tool);
    /* a model file cannot describe per-node weights: saving one is refused */
    ck_assert_msg(ag_model_load(&m, per, &err) == AG_OK, "%s", err.msg);
    ck_assert_fails_with(ag_model_save(&m, tmp_path("per-saved"), &err), err, AG_EINVAL,
                         "layer 1 holds per-node weights");
    ck_assert(!file_exists(tmp_path("per-saved")));
    ag_model_destroy(&m);
    /* model.args' --rounds must match the round-k/ folders */
    snprintf(sub, sizeof sub, "%s/model.args", bare);
    write_text(sub, "--heads 2 --rounds 3\n");
    ck_assert_fails_with(ag_model_load(&m, bare, &err), err, AG_EINVAL,
                         "model.args says --rounds 3; the folder holds a layer a round for 2");
    /* a readout of the wrong width: refused by ag_model_load, not read by the tool's
       run without --predict (the layers alone) */
    write_text(sub, "--heads 2 --rounds 2\n");
    snprintf(sub, sizeof sub, "%s/readout.npy", bare);
    ck_assert_int_eq(ag_npy_write_f32(sub, (const float[6]){0}, 2, 3, &err), AG_OK);
    ck_assert_fails_with(ag_model_load(&m, bare, &err), err, AG_EINVAL, "readout.npy is [2, 3]");
    lo.no_readout = 1;
    ck_assert_msg(ag_model_load_ex(&m, bare, &lo, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.C, 0);
    ag_model_destroy(&m);
    snprintf(cmd, sizeof cmd, "run graphs/planted.gml --features graphs/planted/x.npy "
             "--weights %s --out %s --quiet", bare, saved);
    expect_cli(cmd, 0, 1, "");
    /* more layers than a model holds: refused, not cut */
    for (int l = 3; l <= AG_MODEL_MAX_LAYERS + 1; l++) {
        snprintf(sub, sizeof sub, "%s/round-%d", bare, l);
        write_projections(sub, &w[l % 2]);
    }
    ck_assert_fails_with(ag_model_load_ex(&m, bare, &lo, &err), err, AG_ELIMIT,
                         "more than 64 layers");
    free(out);
    ag_weights_destroy(&w[0]), ag_weights_destroy(&w[1]), ag_weights_destroy(&p);
    ag_array_destroy(&x);
    ag_nbhd_destroy(&nb);
}
END_TEST

static int stop_after_first(const ag_round_t *round, void *ctx)
{
    int *calls = ctx;
    ++*calls;
    ck_assert_ptr_nonnull(round->ws->Q);
    return round->round == 1 ? AG_STOP : AG_OK;
}

/* ag_model_run_ex: the caller's hook sees each round and can stop the run,
   whose states are then the first layer's alone; the workspace is kept for
   the caller; an edge bias on a graph the model reshapes is refused. */
START_TEST(model_run_ex_hooks_and_workspace)
{
    ag_error_t err;
    ag_nbhd_t nb;
    ag_array_t x;
    planted(&nb, &x);
    const int64_t N = nb.n_nodes;
    ag_model_spec_t spec;
    ck_assert_int_eq(ag_model_spec_parse(&spec, "readout none\nlayer heads=2 dim=4 out=8\n"
                                                "layer heads=2 dim=4 out=8\n", "two", &err),
                     AG_OK);
    ag_model_t m;
    ck_assert_msg(ag_model_init(&m, &spec, 8, 0, 0, 3, &err) == AG_OK, "%s", err.msg);
    float *stopped = malloc((size_t)(N * 8) * sizeof *stopped);
    float *first = malloc((size_t)(N * 8) * sizeof *first);
    int calls = 0, done = -1;
    ag_workspace_t ws;
    ag_model_run_opts_t o = {.on_round = stop_after_first, .ctx = &calls, .ws = &ws,
                             .done = &done};
    ck_assert_msg(ag_model_run_ex(&m, &nb, x.data, NULL, &o, stopped, &err) == AG_OK, "%s",
                  err.msg);
    ck_assert_int_eq(calls, 1);
    ck_assert_int_eq(done, 1);
    ck_assert_int_eq(ws.N, N);
    ck_assert_ptr_nonnull(ws.Q);
    ag_workspace_destroy(&ws);
    ag_model_t one = m;   /* the first layer alone */
    one.spec.n_layers = 1;
    ck_assert_int_eq(ag_model_run(&one, &nb, x.data, NULL, first, &err), AG_OK);
    ck_assert_int_eq(memcmp(stopped, first, (size_t)(N * 8) * sizeof *first), 0);
    /* the run's own messages differ from the slots of an edge bias on nb */
    m.spec.self_loops = AG_SELF_ON;
    float *bias = calloc((size_t)nb.n_edges, sizeof *bias);
    o = (ag_model_run_opts_t){.edge_bias = bias, .ws = &ws};
    ck_assert_fails_with(ag_model_run_ex(&m, &nb, x.data, NULL, &o, stopped, &err), err,
                         AG_EINVAL, "edge_bias [E] is in nb's slot order");
    ck_assert_ptr_null(ws.Q);   /* zeroed: nothing to destroy */
    free(bias), free(stopped), free(first);
    ag_model_destroy(&m);
    ag_array_destroy(&x);
    ag_nbhd_destroy(&nb);
}
END_TEST

Suite *model_file_suite(void)
{
    Suite *s = suite_create("model_file");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, model_file_trains_saves_and_runs);
    tcase_add_test(tc, model_file_same_bits_on_1_and_2_threads);
    tcase_add_test(tc, model_file_refusals);
    tcase_add_test(tc, model_object_runs_what_the_tool_saved);
    tcase_add_test(tc, model_save_writes_what_train_saves);
    tcase_add_test(tc, attn_round_of_a_rounds_model);
    tcase_add_test(tc, model_load_ex_reads_arrays_alone_and_per_node);
    tcase_add_test(tc, model_run_ex_hooks_and_workspace);
    suite_add_tcase(s, tc);
    return s;
}
