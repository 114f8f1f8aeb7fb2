/*
 * The language model (src/train/lm.c, model/embedding.c): its loss against a
 * GPT written in double from the formulas (tests/reference.c: ref_lm_loss),
 * every gradient against central differences of that reference, the batch
 * as one docs graph against the sequences one by one, 1 vs 2 threads, and
 * the optimizer's groups; the decoder (model/lm_decode.c) against the whole
 * prefix's logits, and its draws against softmax.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/model.h"
#include "reference.h"
#include "testutil.h"

enum { V = 7, T = 5, D = 8, L = 2, H = 2, B = 3, N = B * T };

/* B sequences of T tokens as one graph: docs:T,T,T (causal within each). */
static void docs_graph(ag_nbhd_t *nb, int64_t sequences)
{
    char spec[256] = "docs:";
    for (int64_t b = 0; b < sequences; b++)
        snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%s%d", b ? "," : "", T);
    ag_pattern_t *p;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&p, spec, &err), AG_OK);
    ck_assert_msg(ag_nbhd_from_pattern(nb, p, sequences * T, AG_SELF_KEEP, &err) == AG_OK, "%s",
                  err.msg);
    ag_pattern_free(p);
}

/* Tokens, positions and next tokens of B windows of T+1 tokens drawn from
   seed; the last window's last target is -1 (not counted). */
static void batch(int64_t *ids, int64_t *pos, int64_t *targets, uint64_t seed)
{
    float r[B * (T + 1)];
    fill_uniform(r, B * (T + 1), seed, 1.0f);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t <= T; t++) {
            const int64_t tok = (int64_t)((r[b * (T + 1) + t] + 1.0f) * 0.5f * (V - 1) + 0.5f);
            if (t < T)
                ids[b * T + t] = tok, pos[b * T + t] = t;
            if (t > 0)
                targets[b * T + t - 1] = tok;
        }
    targets[N - 1] = -1;
}

/* The reference's view of the library's model (sharing its float arrays),
   each block under window[l] (NULL: causal). */
static double ref_windows(const ag_lm_t *m, ref_shaped_t *layers, const int64_t *window,
                          const int64_t *ids, const int64_t *targets)
{
    for (int l = 0; l < m->L; l++) {
        const ag_weights_t *w = &m->layers[l];
        layers[l] = (ref_shaped_t){.D = D, .H = H, .d = D / H, .D_out = D, .wq = w->wq,
                                   .wk = w->wk, .wv = w->wv, .wo = w->wo, .residual = 1,
                                   .bias = w->bias, .ln_w = w->ln_weight, .ln_b = w->ln_bias,
                                   .F = w->F, .w1 = w->w1, .b1 = w->b1, .w2 = w->w2, .b2 = w->b2,
                                   .ln2_w = w->ln2_weight, .ln2_b = w->ln2_bias, .ff_act = 3,
                                   .bq = w->bq, .bk = w->bk, .bv = w->bv};
    }
    const ref_lm_t r = {V, T, D, L, m->wte, m->wpe, m->lnf_weight, m->lnf_bias, layers, window,
                        m->positions == AG_LM_POS_ROPE};
    return ref_lm_loss(&r, B, ids, targets);
}


/* Every array of m (and of g) in one order: wte, wpe, the layers', lnf. */
static int arrays_of(ag_lm_t *m, float **arr, int64_t *n)
{
    int k = 0;
    arr[k] = m->wte, n[k++] = V * D;
    if (m->wpe)
        arr[k] = m->wpe, n[k++] = T * D;
    for (int l = 0; l < L; l++) {
        for (int a = 0; a < AG_LAYER_ARRAYS; a++)
            if (*ag_layer_array(&m->layers[l], a))
                arr[k] = *ag_layer_array(&m->layers[l], a),
                n[k++] = ag_layer_array_size(&m->layers[l], a);
    }
    arr[k] = m->lnf_weight, n[k++] = D;
    if (m->lnf_bias)
        arr[k] = m->lnf_bias, n[k++] = D;
    return k;
}

/* Larger weights than GPT-2's 0.02, so that every path carries gradient. */
static void widen(ag_lm_t *m, uint64_t seed)
{
    float *arr[64];
    int64_t n[64];
    const int k = arrays_of(m, arr, n);
    for (int a = 0; a < k; a++) {
        float *r = malloc((size_t)n[a] * sizeof *r);
        fill_uniform(r, n[a], seed + (uint64_t)a, 0.3f);
        for (int64_t x = 0; x < n[a]; x++)
            arr[a][x] += r[x];
        free(r);
    }
}

/* The loss and every gradient of m on B sequences under spec (a pattern a
   block: ag_lm_graphs; NULL: docs_graph's causal for all) against the double
   reference with each block under window[l] (NULL: causal), and central
   differences of that reference. */
static void check_against_reference(int bias, const char *spec, const int64_t *window,
                                    ag_lm_positions_t positions, int mlp)
{
    ag_lm_t m, g;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_init(&m, V, T, D, L, H, bias, 5, &err), AG_OK);
    ck_assert_int_eq(ag_lm_set_positions(&m, positions, &err), AG_OK);
    ck_assert_int_eq(ag_lm_set_mlp(&m, mlp, &err), AG_OK);
    ck_assert_int_eq(ag_lm_grads_init(&g, &m, &err), AG_OK);
    widen(&m, 40);
    ag_nbhd_t nb, *graphs[L];
    ag_lm_opts_t opts = AG_LM_OPTS_INIT;
    if (spec) {
        ck_assert_msg(ag_lm_graphs(graphs, L, T, B, spec, &err) == AG_OK, "%s", err.msg);
        opts.graphs = graphs;
    } else {
        docs_graph(&nb, B);
    }
    ag_nbhd_t *one = spec ? graphs[0] : &nb;
    int64_t ids[N], pos[N], targets[N];
    batch(ids, pos, targets, 9);
    double loss;
    ck_assert_msg(ag_lm_loss(&m, one, ids, pos, targets, &opts, &loss, &g, NULL, &err) == AG_OK,
                  "%s", err.msg);
    ref_shaped_t layers[L];
    const double want = ref_windows(&m, layers, window, ids, targets);
    ck_assert_msg(fabs(loss - want) <= 1e-5 * (1 + fabs(want)), "bias %d, %s: loss %.9g, "
                  "reference %.9g", bias, spec ? spec : "causal", loss, want);
    double no_grad;   /* inference's loss is the same */
    ck_assert_int_eq(ag_lm_loss(&m, one, ids, pos, targets, &opts, &no_grad, NULL, NULL, &err),
                     AG_OK);
    ck_assert_double_eq(no_grad, loss);
    float *arr[64], *grad[64];
    int64_t n[64], gn[64];
    const int k = arrays_of(&m, arr, n), kg = arrays_of(&g, grad, gn);
    ck_assert_int_eq(k, kg);
    for (int a = 0; a < k; a++) {
        double worst = 0, big = 1e-3;
        int64_t at = 0;
        double *fd = malloc((size_t)n[a] * sizeof *fd);
        for (int64_t x = 0; x < n[a]; x++) {
            const float keep = arr[a][x], h = 1e-3f;
            arr[a][x] = keep + h;
            const double up = ref_windows(&m, layers, window, ids, targets);
            arr[a][x] = keep - h;
            const double down = ref_windows(&m, layers, window, ids, targets);
            arr[a][x] = keep;
            fd[x] = (up - down) / (2.0 * h);
            big = fmax(big, fabs(fd[x]));
        }
        for (int64_t x = 0; x < n[a]; x++) {
            const double e = fabs(grad[a][x] - fd[x]) / big;
            if (e > worst)
                worst = e, at = x;
        }
        ck_assert_msg(worst <= 2e-3, "bias %d, %s: array %d [%lld]: gradient %.8g, finite "
                      "differences %.8g", bias, spec ? spec : "causal", a, (long long)at,
                      grad[a][at], fd[at]);
        free(fd);
    }
    ag_lm_destroy(&m), ag_lm_destroy(&g);
    if (spec)
        ag_lm_graphs_free(graphs, L);
    else
        ag_nbhd_destroy(&nb);
}

START_TEST(lm_loss_and_gradients_match_the_double_reference)
{
    check_against_reference(_i, NULL, NULL, AG_LM_POS_LEARNT, 1);
}
END_TEST

static void pattern_graph(ag_nbhd_t *nb, const char *spec, int64_t n);
static void assert_logits_near(const float *got, const float *want, const char *what, int64_t t);

/* Attention-only blocks (ag_lm_set_mlp 0, Zoology's model): the loss and every
   gradient against the double reference without the feed-forward sublayer,
   learnt and rotary positions, a mask a block; their logits are those of the
   full blocks with w2 and b2 zeroed, bit for bit; back to an MLP is refused. */
START_TEST(lm_attention_only_blocks_match_the_double_reference)
{
    static const int64_t window[L] = {2, 0};
    check_against_reference(_i, NULL, NULL, AG_LM_POS_LEARNT, 0);
    check_against_reference(_i, "window:2|causal", window, AG_LM_POS_ROPE, 0);
    ag_lm_t full, bare;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_init(&full, V, T, D, L, H, _i, 5, &err), AG_OK);
    ck_assert_int_eq(ag_lm_init(&bare, V, T, D, L, H, _i, 5, &err), AG_OK);
    ck_assert_int_eq(ag_lm_has_mlp(&bare), 1);
    ck_assert_int_eq(ag_lm_set_mlp(&bare, 0, &err), AG_OK);
    ck_assert_int_eq(ag_lm_has_mlp(&bare), 0);
    ck_assert(!bare.layers[1].w1 && !bare.layers[1].w2 && !bare.layers[1].ln2_weight);
    for (int l = 0; l < L; l++) {
        memset(full.layers[l].w2, 0, (size_t)(D * full.layers[l].F) * sizeof(float));
        if (full.layers[l].b2)
            memset(full.layers[l].b2, 0, (size_t)D * sizeof(float));
    }
    ag_nbhd_t nb;
    pattern_graph(&nb, "causal", T);
    const int64_t ids[T] = {3, 0, 6, 6, 2}, pos[T] = {0, 1, 2, 3, 4};
    float a[T * V], b[T * V];
    ck_assert_int_eq(ag_lm_logits(&full, &nb, ids, pos, a, &err), AG_OK);
    ck_assert_int_eq(ag_lm_logits(&bare, &nb, ids, pos, b, &err), AG_OK);
    ck_assert(!memcmp(a, b, sizeof a));
    ag_lm_decoder_t *dec;   /* the decoder skips the sublayer too */
    ck_assert_msg(ag_lm_decoder_init(&dec, &bare, &nb, &err) == AG_OK, "%s", err.msg);
    float got[V];
    for (int64_t t = 0; t < T; t++) {
        ck_assert_int_eq(ag_lm_decoder_push(dec, ids[t], got, &err), AG_OK);
        assert_logits_near(got, b + t * V, "attention only", t);
    }
    ag_lm_decoder_free(dec);
    ck_assert_fails_with(ag_lm_set_mlp(&bare, 1, &err), err, AG_EINVAL,
                         "no feed-forward sublayer to keep");
    ag_nbhd_destroy(&nb);
    ag_lm_destroy(&full), ag_lm_destroy(&bare);
}
END_TEST

/* Rotary positions: the loss and every gradient (no wpe) against the double
   reference that turns q and k by RoFormer's formula, under causal and under
   a window a block; no positions at all, the same with nothing turned. */
START_TEST(lm_rotary_positions_match_the_double_reference)
{
    static const int64_t window[L] = {2, 0};
    check_against_reference(_i, NULL, NULL, AG_LM_POS_ROPE, 1);
    check_against_reference(_i, "window:2|causal", window, AG_LM_POS_ROPE, 1);
    ag_lm_t m;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_init(&m, V, T, D, L, H, _i, 5, &err), AG_OK);
    ck_assert_int_eq(ag_lm_set_positions(&m, AG_LM_POS_NONE, &err), AG_OK);
    ck_assert_ptr_null(m.wpe);
    ck_assert_fails_with(ag_lm_set_positions(&m, AG_LM_POS_LEARNT, &err), err, AG_EINVAL,
                         "draw it with ag_lm_init");
    ag_lm_destroy(&m);
    ck_assert_int_eq(ag_lm_init(&m, V, T, 6, L, 2, _i, 5, &err), AG_OK);   /* heads of 3 */
    ck_assert_fails_with(ag_lm_set_positions(&m, AG_LM_POS_ROPE, &err), err, AG_EINVAL,
                         "heads of width 3 are odd");
    ag_lm_destroy(&m);
}
END_TEST

/* A mask per block: block 1 reads the last 2 tokens, block 2 all before it
   (the reference builds each block's messages from the window's formula). */
START_TEST(lm_a_mask_per_block_matches_the_reference)
{
    check_against_reference(_i, "window:2|causal", (const int64_t[L]){2, 0}, AG_LM_POS_LEARNT, 1);
    check_against_reference(_i, "causal|window:3", (const int64_t[L]){0, 3}, AG_LM_POS_LEARNT, 1);
    /* one pattern given per block is the pattern for all, bit for bit */
    ag_lm_t m;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_init(&m, V, T, D, L, H, _i, 8, &err), AG_OK);
    ag_nbhd_t *each[L], *all[L];
    ck_assert_int_eq(ag_lm_graphs(each, L, T, B, "window:2|window:2", &err), AG_OK);
    ck_assert_int_eq(ag_lm_graphs(all, L, T, B, "window:2", &err), AG_OK);
    ck_assert_ptr_eq(each[0], each[1]);   /* one pattern: one graph */
    int64_t ids[N], pos[N], targets[N];
    batch(ids, pos, targets, 4);
    double a, b;
    const ag_lm_opts_t per_block = {.graphs = each};
    ck_assert_int_eq(ag_lm_loss(&m, each[0], ids, pos, targets, &per_block, &a, NULL, NULL,
                                &err), AG_OK);
    ck_assert_int_eq(ag_lm_loss(&m, all[0], ids, pos, targets, NULL, &b, NULL, NULL, &err),
                     AG_OK);
    ck_assert(!memcmp(&a, &b, sizeof a));
    ag_nbhd_t *one_sequence[L];   /* graphs of another size than the batch's: refused */
    ck_assert_int_eq(ag_lm_graphs(one_sequence, L, T, 1, "causal", &err), AG_OK);
    const ag_lm_opts_t wrong = {.graphs = one_sequence};
    ck_assert_int_eq(ag_lm_loss(&m, all[0], ids, pos, targets, &wrong, &a, NULL, NULL, &err),
                     AG_EINVAL);
    ck_assert_msg(strstr(err.msg, "round 1's graph has another size"), "%s", err.msg);
    ag_lm_graphs_free(one_sequence, L);
    ag_lm_graphs_free(each, L), ag_lm_graphs_free(all, L);
    /* a count of patterns that is neither one nor L, and a bad part, named */
    ck_assert_int_eq(ag_lm_graphs(each, L, T, B, "causal|causal|causal", &err), AG_EINVAL);
    ck_assert_msg(strstr(err.msg, "3 patterns for 2 blocks"), "%s", err.msg);
    ck_assert_int_eq(ag_lm_graphs(each, L, T, B, "causal|wndow:2", &err), AG_EINVAL);
    ck_assert_msg(strstr(err.msg, "block 2's pattern 'wndow:2'"), "%s", err.msg);
    ck_assert_int_eq(ag_lm_graphs(each, L, T, B, "causal|", &err), AG_EINVAL);
    ck_assert_msg(strstr(err.msg, "block 2's pattern is empty"), "%s", err.msg);
    ck_assert_int_eq(ag_lm_graphs(each, L, T, B, "causal|wndow:2", NULL), AG_EINVAL);   /* no
                                                                                  err: no crash */
    ag_lm_destroy(&m);
}
END_TEST

/* The batch as one docs graph gives each sequence the logits it has alone, bit
   for bit: the kernels read each sequence's rows alone, and a product's row is
   one chain per entry wherever the row lies (base/sgemm.c). */
START_TEST(lm_batch_is_its_sequences_one_by_one)
{
    ag_lm_t m;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_init(&m, V, T, D, L, H, 1, 6, &err), AG_OK);
    widen(&m, 50);
    ag_nbhd_t all, one;
    docs_graph(&all, B), docs_graph(&one, 1);
    int64_t ids[N], pos[N], targets[N];
    batch(ids, pos, targets, 10);
    float logits[N * V], alone[T * V];
    ck_assert_int_eq(ag_lm_logits(&m, &all, ids, pos, logits, &err), AG_OK);
    for (int64_t b = 0; b < B; b++) {
        ck_assert_int_eq(ag_lm_logits(&m, &one, ids + b * T, pos + b * T, alone, &err), AG_OK);
        for (int x = 0; x < T * V; x++)   /* bitwise: a product's row does not depend on
                                             where it lies (base/sgemm.c) */
            ck_assert_msg(!memcmp(&alone[x], &logits[b * T * V + x], sizeof(float)),
                          "sequence %lld, logit %d: %.9g alone, %.9g in the batch", (long long)b,
                          x, alone[x], logits[b * T * V + x]);
    }
    ag_lm_destroy(&m);
    ag_nbhd_destroy(&all), ag_nbhd_destroy(&one);
}
END_TEST

#ifdef _OPENMP
/* Loss and gradients with dropout on 1 and 2 threads (a batch large enough that
   the loops split), bitwise. */
static void lm_run(int threads, double *loss, float **grads, int64_t *total)
{
    ck_assert_int_eq(ag_set_threads(threads), threads);
    enum { BB = 64 };
    ag_lm_t m, g;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_init(&m, V, T, D, L, H, 1, 7, &err), AG_OK);
    ck_assert_int_eq(ag_lm_grads_init(&g, &m, &err), AG_OK);
    ag_nbhd_t nb;
    docs_graph(&nb, BB);
    int64_t ids[BB * T], pos[BB * T], targets[BB * T];
    for (int64_t i = 0; i < BB * T; i++)
        ids[i] = (i * 5 + i / 7) % V, pos[i] = i % T, targets[i] = (i * 3 + 1) % V;
    const ag_lm_opts_t o = {.dropout = 0.2f, .seed = 3};
    ck_assert_int_eq(ag_lm_loss(&m, &nb, ids, pos, targets, &o, loss, &g, NULL, &err), AG_OK);
    float *arr[64];
    int64_t n[64];
    const int k = arrays_of(&g, arr, n);
    *total = 0;
    for (int a = 0; a < k; a++)
        *total += n[a];
    *grads = malloc((size_t)*total * sizeof **grads);
    for (int a = 0, at = 0; a < k; at += (int)n[a], a++)
        memcpy(*grads + at, arr[a], (size_t)n[a] * sizeof(float));
    ag_lm_destroy(&m), ag_lm_destroy(&g);
    ag_nbhd_destroy(&nb);
    ag_set_threads(2);
}

START_TEST(lm_identical_for_1_and_2_threads)
{
    double l1, l2;
    float *g1, *g2;
    int64_t n1, n2;
    lm_run(1, &l1, &g1, &n1);
    lm_run(2, &l2, &g2, &n2);
    ck_assert_int_eq(n1, n2);
    ck_assert_double_eq(l1, l2);
    ck_assert_int_eq(memcmp(g1, g2, (size_t)n1 * sizeof *g1), 0);
    free(g1), free(g2);
}
END_TEST
#endif

/* AdamW over the model's groups: matrices and embeddings decay, gains and biases
   do not (a step with zero gradients moves only the decayed arrays). */
START_TEST(lm_optimizer_groups)
{
    ag_lm_t m, g;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_init(&m, V, T, D, L, H, 1, 8, &err), AG_OK);
    ck_assert_int_eq(ag_lm_grads_init(&g, &m, &err), AG_OK);
    ag_optimizer_opts_t oo = AG_OPTIMIZER_OPTS_INIT;
    oo.kind = AG_OPT_ADAMW, oo.weight_decay = 0.5f, oo.lr = 0.1f;
    ag_optimizer_t *opt;
    ck_assert_int_eq(ag_optimizer_init(&opt, &oo, &err), AG_OK);
    ck_assert_int_eq(ag_lm_optimizer_add(opt, &m, &g, &err), AG_OK);
    const float wte0 = m.wte[3], gain0 = m.lnf_weight[1], ln0 = m.layers[1].ln_weight[2];
    const float b10 = m.layers[0].b1[0];
    ck_assert_int_eq(ag_optimizer_set_lr(opt, 0.2f, &err), AG_OK);
    ck_assert_int_eq(ag_optimizer_step(opt, NULL, &err), AG_OK);
    ck_assert_float_eq(m.wte[3], (float)(wte0 - 0.2 * 0.5 * wte0));   /* decayed at lr 0.2 */
    ck_assert_float_eq(m.lnf_weight[1], gain0);
    ck_assert_float_eq(m.layers[1].ln_weight[2], ln0);
    ck_assert_float_eq(m.layers[0].b1[0], b10);
    ck_assert_fails_with(ag_optimizer_set_lr(opt, 0.0f, &err), err, AG_EINVAL,
                         "learning rate 0");
    ag_optimizer_free(opt);
    ag_lm_destroy(&m), ag_lm_destroy(&g);
}
END_TEST

/* Steps on a kept tape (a trainer's) and an evaluation on it: the losses and
   gradients of calls without one, bit for bit, as the weights change. */
START_TEST(lm_kept_tape_gives_the_same_bits)
{
    ag_lm_t m[2], g[2];
    ag_error_t err;
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(ag_lm_init(&m[k], V, T, D, L, H, 1, 5, &err), AG_OK);
        ck_assert_int_eq(ag_lm_grads_init(&g[k], &m[k], &err), AG_OK);
    }
    ag_nbhd_t nb;
    docs_graph(&nb, B);
    int64_t ids[N], pos[N], targets[N];
    batch(ids, pos, targets, 13);
    ag_tape_t *tape = NULL;
    for (int s = 0; s < 3; s++) {
        const ag_lm_opts_t o = {.dropout = 0.2f, .seed = (uint64_t)s};
        double loss[2];
        for (int k = 0; k < 2; k++)   /* model 0 on the kept tape, model 1 without */
            ck_assert_msg(ag_lm_loss(&m[k], &nb, ids, pos, targets, &o, &loss[k], &g[k],
                                     k ? NULL : &tape, &err) == AG_OK, "%s", err.msg);
        ck_assert_msg(loss[0] == loss[1], "step %d: loss %.17g on the kept tape, %.17g", s,
                      loss[0], loss[1]);
        float *arr[2][64], *grad[2][64];
        int64_t n[64], gn[64];
        const int a = arrays_of(&m[0], arr[0], n);
        ck_assert_int_eq(arrays_of(&m[1], arr[1], n), a);
        ck_assert_int_eq(arrays_of(&g[0], grad[0], gn), a);
        ck_assert_int_eq(arrays_of(&g[1], grad[1], gn), a);
        for (int x = 0; x < a; x++) {
            ck_assert_msg(!memcmp(grad[0][x], grad[1][x], (size_t)n[x] * sizeof(float)),
                          "step %d: gradient array %d differs on the kept tape", s, x);
            for (int64_t e = 0; e < n[x]; e++)   /* a step, so that the next differs */
                for (int k = 0; k < 2; k++)
                    arr[k][x][e] -= 0.5f * grad[k][x][e];
        }
    }
    double eval[2];
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(ag_lm_loss(&m[k], &nb, ids, pos, targets, NULL, &eval[k], NULL,
                                    k ? NULL : &tape, &err), AG_OK);
    ck_assert_msg(eval[0] == eval[1], "evaluation: %.17g on the kept tape, %.17g", eval[0],
                  eval[1]);
    ag_tape_free(tape);
    for (int k = 0; k < 2; k++)
        ag_lm_destroy(&m[k]), ag_lm_destroy(&g[k]);
    ag_nbhd_destroy(&nb);
}
END_TEST

START_TEST(lm_refuses_bad_inputs)
{
    ag_lm_t m;
    ag_error_t err;
    ck_assert_fails_with(ag_lm_init(&m, V, T, 9, L, 2, 0, 1, &err), err, AG_EINVAL,
                         "the width a multiple of the heads");
    ck_assert_int_eq(ag_lm_init(&m, V, T, D, L, H, 0, 1, &err), AG_OK);
    ag_nbhd_t nb;
    docs_graph(&nb, B);
    int64_t ids[N], pos[N], targets[N];
    batch(ids, pos, targets, 11);
    double loss;
    ids[4] = V;
    ck_assert_fails_with(ag_lm_loss(&m, &nb, ids, pos, targets, NULL, &loss, NULL, NULL, &err),
                         err, AG_EINVAL, "token 7 at row 4; expected 0..6");
    ids[4] = 0, pos[6] = T;
    ck_assert_fails_with(ag_lm_loss(&m, &nb, ids, pos, targets, NULL, &loss, NULL, NULL, &err),
                         err, AG_EINVAL, "position 5 at row 6; expected 0..4");
    ag_lm_destroy(&m);
    ag_nbhd_destroy(&nb);
}
END_TEST

/* The graph of pattern spec over n nodes. */
static void pattern_graph(ag_nbhd_t *nb, const char *spec, int64_t n)
{
    ag_pattern_t *p;
    ag_error_t err;
    ck_assert_msg(ag_pattern_parse(&p, spec, &err) == AG_OK, "%s", err.msg);
    ck_assert_msg(ag_nbhd_from_pattern(nb, p, n, AG_SELF_KEEP, &err) == AG_OK, "%s", err.msg);
    ag_pattern_free(p);
}

static void assert_logits_near(const float *got, const float *want, const char *what, int64_t t)
{
    for (int64_t v = 0; v < V; v++)
        ck_assert_msg(fabsf(got[v] - want[v]) <= 2e-5f * (1 + fabsf(want[v])), "%s, token %lld: "
                      "logit %lld is %.8g with the cache, %.8g recomputed", what, (long long)t,
                      (long long)v, got[v], want[v]);
}

/* Token by token with the cache, each token's logits are those of the whole
   prefix recomputed (ag_lm_logits; a causal graph's row t reads rows <= t),
   under causal and a window, with and without biases; starting over from the
   last tokens gives the logits of that shorter sequence. */
START_TEST(lm_decoder_equals_the_whole_prefix)
{
    const int bias = _i % 2, rope = _i >= 4;   /* rope: each key cached turned */
    const char *spec = _i % 4 < 2 ? "causal" : "window:2";
    ag_lm_t m;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_init(&m, V, T, D, L, H, bias, 17, &err), AG_OK);
    ck_assert_int_eq(ag_lm_set_positions(&m, rope ? AG_LM_POS_ROPE : AG_LM_POS_LEARNT, &err),
                     AG_OK);
    widen(&m, 60);
    ag_nbhd_t nb, tail;
    pattern_graph(&nb, spec, T);
    pattern_graph(&tail, spec, 3);
    const int64_t ids[T] = {3, 0, 6, 6, 2}, pos[T] = {0, 1, 2, 3, 4};
    float all[T * V], got[V];
    ck_assert_int_eq(ag_lm_logits(&m, &nb, ids, pos, all, &err), AG_OK);
    ag_lm_decoder_t *dec;
    ck_assert_msg(ag_lm_decoder_init(&dec, &m, &nb, &err) == AG_OK, "%s", err.msg);
    for (int64_t t = 0; t < T; t++) {
        ck_assert_int_eq(ag_lm_decoder_push(dec, ids[t], got, &err), AG_OK);
        ck_assert_int_eq(ag_lm_decoder_length(dec), t + 1);
        assert_logits_near(got, all + t * V, spec, t);
    }
    ck_assert_fails_with(ag_lm_decoder_push(dec, 1, got, &err), err, AG_ELIMIT,
                         "the context holds the block's 5 tokens");
    ag_lm_decoder_reset(dec);   /* over again from the last two, then one more */
    const int64_t again[3] = {ids[3], ids[4], 5};
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(ag_lm_decoder_push(dec, again[k], k < 2 ? NULL : got, &err), AG_OK);
    ck_assert_int_eq(ag_lm_logits(&m, &tail, again, pos, all, &err), AG_OK);
    assert_logits_near(got, all + 2 * V, "after a reset", 2);
    ck_assert_fails_with(ag_lm_decoder_push(dec, V, got, &err), err, AG_EINVAL,
                         "token 7; expected an id in [0, 7)");
    ag_lm_decoder_free(dec);
    ag_nbhd_destroy(&nb), ag_nbhd_destroy(&tail);
    ag_lm_destroy(&m);
}
END_TEST

/* A mask per block: the decoder reads each block's sources, its logits those
   of the whole prefix under the same graphs; they differ from either mask
   alone (so the blocks did read their own). */
START_TEST(lm_decoder_reads_a_mask_per_block)
{
    ag_lm_t m;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_init(&m, V, T, D, L, H, 1, 19, &err), AG_OK);
    widen(&m, 61);
    ag_nbhd_t *graphs[L], *causal[L];
    ck_assert_int_eq(ag_lm_graphs(graphs, L, T, 1, "window:2|causal", &err), AG_OK);
    ck_assert_int_eq(ag_lm_graphs(causal, L, T, 1, "causal", &err), AG_OK);
    const int64_t ids[T] = {3, 0, 6, 6, 2}, pos[T] = {0, 1, 2, 3, 4};
    float all[T * V], plain[T * V], got[V];
    ck_assert_int_eq(ag_lm_logits_layers(&m, graphs, ids, pos, all, &err), AG_OK);
    ck_assert_int_eq(ag_lm_logits_layers(&m, causal, ids, pos, plain, &err), AG_OK);
    ag_lm_decoder_t *dec;
    ck_assert_msg(ag_lm_decoder_init_layers(&dec, &m, graphs, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(ag_lm_decoder_cache_rows(dec), 2 + T);   /* the window's 2, causal's T */
    for (int64_t t = 0; t < T; t++) {
        ck_assert_int_eq(ag_lm_decoder_push(dec, ids[t], got, &err), AG_OK);
        assert_logits_near(got, all + t * V, "window:2|causal", t);
    }
    double apart = 0;   /* position 3 reads 1..3 in block 1, 0..3 in block 2 */
    for (int v = 0; v < V; v++)
        apart = fmax(apart, fabs(all[3 * V + v] - plain[3 * V + v]));
    ck_assert_msg(apart > 1e-3, "the window changed nothing (%g)", apart);
    ag_lm_decoder_free(dec);
    ag_lm_graphs_free(graphs, L), ag_lm_graphs_free(causal, L);
    ag_lm_destroy(&m);
}
END_TEST

START_TEST(lm_decoder_refuses_a_graph_that_reads_ahead)
{
    ag_lm_t m;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_init(&m, V, T, D, L, H, 0, 1, &err), AG_OK);
    ag_nbhd_t nb;
    ag_lm_decoder_t *dec;
    pattern_graph(&nb, "complete", T);
    ck_assert_fails_with(ag_lm_decoder_init(&dec, &m, &nb, &err), err, AG_EINVAL,
                         "lets token 0 read token 1");
    ck_assert_ptr_null(dec);
    ag_nbhd_destroy(&nb);
    pattern_graph(&nb, "causal", T + 1);
    ck_assert_fails_with(ag_lm_decoder_init(&dec, &m, &nb, &err), err, AG_EINVAL,
                         "a graph of 6 nodes; expected the block's 5");
    ag_nbhd_destroy(&nb);
    ag_lm_destroy(&m);
}
END_TEST

/* ag_lm_pick over a fine grid of draws u picks each token as often as
   softmax(logits / temperature) over the kept ones says (ties at the k-th
   largest kept), and temperature 0 the first largest. */
START_TEST(lm_pick_follows_the_softmax)
{
    const float logits[6] = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f};
    ck_assert_int_eq(ag_lm_pick(logits, 6, 0.0, 0, 0.7), 1);
    const struct { double temperature; int64_t top_k; } cases[] = {{1, 0}, {0.5, 0}, {2, 3},
                                                                   {1, 1}, {1, 6}};
    enum { GRID = 20000 };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        double want[6], total = 0, count[6] = {0};
        int kept = 0;
        for (int v = 0; v < 6; v++) {   /* kept: fewer than top_k logits above it */
            int above = 0;
            for (int u = 0; u < 6; u++)
                above += logits[u] > logits[v];
            want[v] = cases[c].top_k == 0 || above < cases[c].top_k
                          ? exp(logits[v] / cases[c].temperature) : 0;
            total += want[v], kept += want[v] > 0;
        }
        for (int k = 0; k < GRID; k++)
            count[ag_lm_pick(logits, 6, cases[c].temperature, cases[c].top_k,
                             (k + 0.5) / GRID)] += 1.0 / GRID;
        for (int v = 0; v < 6; v++)
            ck_assert_msg(fabs(count[v] - want[v] / total) <= 1.0 / GRID + 1e-12, "case %zu: "
                          "token %d drawn %.5f of the time; softmax %.5f", c, v, count[v],
                          want[v] / total);
        ck_assert_int_eq(kept, cases[c].top_k == 1 ? 2 : cases[c].top_k == 3 ? 3 : 6);
    }
}
END_TEST

/* GELU (activation.c: erf by a rational function, exp by exponent bits, so
   its loops vectorize) against erf and exp in double: values and slopes over
   [-10, 10], through the arrays' path and the one value's. z (1 + erf) is off
   by a few units of erf's last place times |z| (1.1e-6 near z = -5.5, where
   GELU is -8e-8 and 1 + erf has lost its digits in float; erff does the same
   within 2e-7): the bar is 2.5e-7 (1 + |z|). */
START_TEST(lm_gelu_matches_the_double_formula)
{
    enum { M = 40001 };
    float *z = malloc(M * sizeof *z), *y = malloc(M * sizeof *y), *dy = malloc(M * sizeof *dy);
    for (int k = 0; k < M; k++)
        z[k] = -10.0f + 20.0f * (float)k / (M - 1), dy[k] = 1.0f;
    ag_i_act_rows(AG_ACT_GELU, y, z, M);
    ag_i_act_backward_rows(AG_ACT_GELU, dy, z, M);
    double worst = 0, worst_slope = 0;
    for (int k = 0; k < M; k++) {
        const double x = z[k], phi = exp(-0.5 * x * x) * 0.3989422804014327;   /* 1 / sqrt(2 pi) */
        const double want = 0.5 * x * (1 + erf(x / sqrt(2.0)));
        const double slope = 0.5 * (1 + erf(x / sqrt(2.0))) + x * phi;
        worst = fmax(worst, fabs(y[k] - want) / (1 + fabs(x)));
        worst_slope = fmax(worst_slope, fabs(dy[k] - slope));
        ck_assert_float_eq(ag_i_act_value(AG_ACT_GELU, z[k]), y[k]);
    }
    ck_assert_msg(worst <= 2.5e-7, "GELU off by %g (1 + |z|)", worst);
    ck_assert_msg(worst_slope <= 3e-7, "GELU's slope off by %g", worst_slope);
    free(z), free(y), free(dy);
}
END_TEST

/* The embeddings' backward over several chunks of rows (AG_GEMM_CHUNK each,
   added in order) against sums in double, onto gradients already there. */
START_TEST(lm_embed_backward_over_chunks)
{
    enum { ROWS = 2600, W = 3, VOC = 5, POS = 4 };
    float *dX = malloc(ROWS * W * sizeof *dX), dwte[VOC * W], dwpe[POS * W];
    int64_t *ids = malloc(ROWS * sizeof *ids), *pos = malloc(ROWS * sizeof *pos);
    double want_te[VOC * W], want_pe[POS * W];
    fill_uniform(dX, ROWS * W, 71, 1.0f);
    for (int k = 0; k < VOC * W; k++)
        dwte[k] = 0.5f, want_te[k] = 0.5;
    for (int k = 0; k < POS * W; k++)
        dwpe[k] = 0, want_pe[k] = 0;
    for (int64_t i = 0; i < ROWS; i++) {
        ids[i] = (i * 7 + i / 3) % VOC, pos[i] = i % POS;
        for (int c = 0; c < W; c++)
            want_te[ids[i] * W + c] += dX[i * W + c], want_pe[pos[i] * W + c] += dX[i * W + c];
    }
    ag_error_t err;
    ck_assert_int_eq(ag_embed_backward(dwte, dwpe, dX, ids, pos, ROWS, VOC, POS, W, &err), AG_OK);
    for (int k = 0; k < VOC * W; k++)
        ck_assert_msg(fabs(dwte[k] - want_te[k]) <= 1e-4 * (1 + fabs(want_te[k])),
                      "dwte[%d] %.7g, in double %.7g", k, dwte[k], want_te[k]);
    for (int k = 0; k < POS * W; k++)
        ck_assert_msg(fabs(dwpe[k] - want_pe[k]) <= 1e-4 * (1 + fabs(want_pe[k])),
                      "dwpe[%d] %.7g, in double %.7g", k, dwpe[k], want_pe[k]);
    free(dX), free(ids), free(pos);
}
END_TEST

/* ag_lm_graph's B copies against the docs pattern of B sequences written out
   (docs:T,T,T&(spec)), edge for edge, for patterns whose positions are the
   same in each sequence (not global:1: in the batch only node 0 is global). */
START_TEST(lm_graph_is_the_sequences_side_by_side)
{
    static const char *const specs[] = {"causal", "window:2", "strided:2"};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        ag_nbhd_t got, want;
        ag_error_t err;
        ck_assert_msg(ag_lm_graph(&got, T, B, specs[k], &err) == AG_OK, "%s", err.msg);
        char text[256];
        snprintf(text, sizeof text, "docs:%d,%d,%d&(%s)", T, T, T, specs[k]);
        ag_pattern_t *p;
        ck_assert_int_eq(ag_pattern_parse(&p, text, &err), AG_OK);
        ck_assert_int_eq(ag_nbhd_from_pattern(&want, p, N, AG_SELF_KEEP, &err), AG_OK);
        ag_pattern_free(p);
        ck_assert_int_eq(got.n_nodes, N);
        ck_assert_msg(got.n_edges == want.n_edges, "%s: %lld edges, want %lld", specs[k],
                      (long long)got.n_edges, (long long)want.n_edges);
        int64_t a[N * T], b[N * T];
        ag_nbhd_sources(&got, 0, N, a), ag_nbhd_sources(&want, 0, N, b);
        for (int64_t i = 0; i <= N; i++)
            ck_assert_int_eq(got.edge_ptr[i], want.edge_ptr[i]);
        ck_assert_msg(!memcmp(a, b, (size_t)got.n_edges * sizeof *a), "%s: sources differ",
                      specs[k]);
        ag_nbhd_destroy(&got), ag_nbhd_destroy(&want);
    }
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_graph(&nb, T, B, "wndow:2", &err), AG_EINVAL);
    ck_assert_msg(strstr(err.msg, "wndow"), "%s", err.msg);
    ck_assert_int_eq(ag_lm_graph(&nb, T, 0, "causal", &err), AG_EINVAL);
    ck_assert_int_eq(ag_lm_graph(&nb, INT64_MAX / 2, 3, "causal", &err), AG_ELIMIT);
}
END_TEST

/* A model's folder: saved and loaded, the same bits, vocabulary and pattern;
   a save that cannot finish changes nothing; a broken text is named. */
START_TEST(lm_model_folder_saves_and_loads)
{
    ag_lm_model_t lm = {.bytes = 0}, back;
    ag_error_t err;
    ck_assert_int_eq(ag_lm_init(&lm.m, V, T, D, L, H, 1, 5, &err), AG_OK);
    int32_t chars[V] = {'\n', ' ', 'a', 'b', 'z', 0xE9, 0x4E2D};
    lm.chars = chars;
    snprintf(lm.pattern, sizeof lm.pattern, "window:3");
    const char *dir = tmp_path("lm-folder");
    ck_assert_msg(ag_lm_model_save(&lm, dir, &err) == AG_OK, "%s", err.msg);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.txt", dir);
    char *text = read_text(path);
    ck_assert_str_eq(text, "# attngraph language model\nvocab 7 utf-8\nblock 5\nlayers 2\n"
                           "heads 2\ndim 8\nbias yes\npattern window:3\n");
    ck_assert_msg(ag_lm_model_load(&back, dir, &err) == AG_OK, "%s", err.msg);
    ck_assert(back.m.V == V && back.m.L == L && back.m.bias == 1 && back.bytes == 0);
    ck_assert_str_eq(back.pattern, "window:3");
    ck_assert(!memcmp(back.chars, chars, sizeof chars));
    float *a[64], *b[64];
    int64_t na[64], nb[64];
    const int k = arrays_of(&lm.m, a, na);
    ck_assert_int_eq(arrays_of(&back.m, b, nb), k);
    for (int x = 0; x < k; x++)
        ck_assert_msg(na[x] == nb[x] && !memcmp(a[x], b[x], (size_t)na[x] * sizeof(float)),
                      "array %d differs after the round trip", x);
    ag_lm_model_destroy(&back);
    /* attention-only blocks: "mlp no", no ln2/w1/w2 files, read back so */
    ag_lm_model_t bare = {.ids = 1};
    ck_assert_int_eq(ag_lm_init(&bare.m, V, T, D, L, H, 0, 5, &err), AG_OK);
    ck_assert_int_eq(ag_lm_set_mlp(&bare.m, 0, &err), AG_OK);
    snprintf(bare.pattern, sizeof bare.pattern, "causal");
    const char *bare_dir = tmp_path("lm-bare");
    ck_assert_msg(ag_lm_model_save(&bare, bare_dir, &err) == AG_OK, "%s", err.msg);
    snprintf(path, sizeof path, "%s/model.txt", bare_dir);
    char *bare_text = read_text(path);
    ck_assert_msg(strstr(bare_text, "\nmlp no\n"), "%s", bare_text);
    free(bare_text);
    snprintf(path, sizeof path, "%s/round-1/w1.npy", bare_dir);
    ck_assert(!file_exists(path));
    ck_assert_msg(ag_lm_model_load(&back, bare_dir, &err) == AG_OK, "%s", err.msg);
    ck_assert(!ag_lm_has_mlp(&back.m) && back.m.layers[0].wq);
    ag_lm_model_destroy(&back);
    ag_lm_destroy(&bare.m);
    /* a folder in the place of round-2/wq.npy: refused, the text left as it was */
    snprintf(lm.pattern, sizeof lm.pattern, "causal");
    snprintf(path, sizeof path, "%s/round-2/wq.npy", dir);
    ck_assert_int_eq(remove(path), 0);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_int_ne(ag_lm_model_save(&lm, dir, &err), AG_OK);
    ck_assert_msg(strstr(err.msg, "wq.npy"), "%s", err.msg);
    snprintf(path, sizeof path, "%s/model.txt", dir);
    char *after = read_text(path);
    ck_assert_str_eq(after, text);
    free(after);
    /* a text that does not say what the model is, named with its line */
    write_text(path, "# attngraph language model\nvocab 7 utf-8\nblock 5\nlayers two\n");
    ck_assert_int_eq(ag_lm_model_load(&back, dir, &err), AG_EINVAL);
    ck_assert_msg(strstr(err.msg, "model.txt:4: 'layers two'"), "%s", err.msg);
    /* a pattern a block for another count of blocks, or one that does not parse: refused
       on save (nothing written) and on load, with the line */
    const char *const bad[] = {"causal|causal|causal", "causal|wndow:2", "causal|"};
    for (int x = 0; x < 3; x++) {
        snprintf(lm.pattern, sizeof lm.pattern, "%s", bad[x]);
        ck_assert_int_eq(ag_lm_model_save(&lm, tmp_path("lm-bad"), &err), AG_EINVAL);
        ck_assert_msg(strstr(err.msg, "ag_lm_model_save: pattern"), "%s", err.msg);
        ck_assert(!file_exists(tmp_path("lm-bad")));
        char line[256];
        snprintf(line, sizeof line, "vocab 7 utf-8\nblock 5\nlayers 2\nheads 2\ndim 8\n"
                 "bias yes\npattern %s\n", bad[x]);
        write_text(path, line);
        ck_assert_int_eq(ag_lm_model_load(&back, dir, &err), AG_EINVAL);
        ck_assert_msg(strstr(err.msg, "model.txt:7: pattern"), "%s", err.msg);
    }
    char *longer = malloc(AG_LM_PATTERN_MAX + 64);   /* a line longer than a pattern may be */
    snprintf(longer, AG_LM_PATTERN_MAX + 64, "vocab 7 utf-8\npattern causal");
    for (size_t n = strlen(longer); n < AG_LM_PATTERN_MAX + 30; n++)
        longer[n] = n % 2 ? '|' : ' ', longer[n + 1] = '\0';
    write_text(path, longer);
    ck_assert_int_eq(ag_lm_model_load(&back, dir, &err), AG_ELIMIT);
    ck_assert_msg(strstr(err.msg, "model.txt:2: a pattern of"), "%s", err.msg);
    free(longer);
    ck_assert_int_eq(ag_lm_model_load(&back, tmp_path("no-such-model"), &err), AG_EIO);
    ck_assert_msg(strstr(err.msg, "no-such-model/model.txt"), "%s", err.msg);
    free(text);
    ag_lm_destroy(&lm.m);
}
END_TEST

Suite *lm_suite(void)
{
    Suite *s = suite_create("lm");
    TCase *tc = tcase_create("gpt");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, lm_loss_and_gradients_match_the_double_reference, 0, 2);
    tcase_add_loop_test(tc, lm_rotary_positions_match_the_double_reference, 0, 2);
    tcase_add_loop_test(tc, lm_attention_only_blocks_match_the_double_reference, 0, 2);
    tcase_add_test(tc, lm_batch_is_its_sequences_one_by_one);
    tcase_add_test(tc, lm_graph_is_the_sequences_side_by_side);
    tcase_add_loop_test(tc, lm_a_mask_per_block_matches_the_reference, 0, 2);
    tcase_add_test(tc, lm_model_folder_saves_and_loads);
#ifdef _OPENMP
    tcase_add_test(tc, lm_identical_for_1_and_2_threads);
#endif
    tcase_add_test(tc, lm_optimizer_groups);
    tcase_add_test(tc, lm_kept_tape_gives_the_same_bits);
    tcase_add_test(tc, lm_refuses_bad_inputs);
    tcase_add_loop_test(tc, lm_decoder_equals_the_whole_prefix, 0, 8);
    tcase_add_test(tc, lm_decoder_refuses_a_graph_that_reads_ahead);
    tcase_add_test(tc, lm_decoder_reads_a_mask_per_block);
    tcase_add_test(tc, lm_pick_follows_the_softmax);
    tcase_add_test(tc, lm_gelu_matches_the_double_formula);
    tcase_add_test(tc, lm_embed_backward_over_chunks);
    suite_add_tcase(s, tc);
    return s;
}
