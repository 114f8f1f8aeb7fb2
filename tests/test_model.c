/* Message rounds with projections, weights and the seeded generator. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/base.h"
#include "model/model.h"
#include "reference.h"
#include "testutil.h"

/* A random directed graph with a self-loop on every node plus extra edges. */
static int64_t random_edges(int64_t N, int64_t extra, int64_t *src, int64_t *dst)
{
    float r[512];
    fill_uniform(r, 2 * extra, 99, 1.0f);
    int64_t E = 0;
    for (int64_t i = 0; i < N; i++)
        src[E] = i, dst[E++] = i;
    for (int64_t e = 0; e < extra; e++) {
        src[E] = (int64_t)((r[2 * e] + 1) / 2 * N) % N;
        dst[E++] = (int64_t)((r[2 * e + 1] + 1) / 2 * N) % N;
    }
    return E;
}

static void check_rounds(int64_t N, int64_t D, int64_t H, int64_t d, int rounds)
{
    int64_t src[300], dst[300];
    int64_t E = random_edges(N, 40, src, dst);
    igraph_t g;
    build_graph(&g, N, src, dst, E, 1);
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    igraph_destroy(&g);

    ag_weights_t w;
    ck_assert_int_eq(ag_weights_random(&w, D, H, d, 0, 5, &err), AG_OK);
    float *X = malloc(N * D * sizeof *X);
    double *Xref = malloc(N * D * sizeof *Xref);
    fill_uniform(X, N * D, 17, 1.0f);
    for (int64_t i = 0; i < N * D; i++)
        Xref[i] = X[i];
    ag_workspace_t ws;
    ck_assert_int_eq(ag_workspace_init(&ws, N, H * d, D, &err), AG_OK);
    ck_assert_int_eq(ag_rounds_run(&nb, &w, 1, X, rounds, NULL, &ws, NULL, &err), AG_OK);
    ref_rounds(N, src, dst, E, w.wq, w.wk, w.wv, w.wo, D, H, d, rounds, Xref);
    for (int64_t i = 0; i < N * D; i++)
        ck_assert_msg(fabs(X[i] - Xref[i]) <= 1e-4 * (1 + fabs(Xref[i])),
                      "X[%lld] = %.9g, reference %.9g", (long long)i, X[i], Xref[i]);
    ag_workspace_destroy(&ws);
    ag_weights_destroy(&w);
    ag_nbhd_destroy(&nb);
    free(X), free(Xref);
}

START_TEST(rounds_match_reference)
{
    check_rounds(11, 12, 3, 4, 3);     /* H*d = D */
    check_rounds(13, 12, 2, 5, 2);     /* H*d = 10 != D = 12 */
    check_rounds(7, 6, 1, 6, 1);
}
END_TEST

START_TEST(zero_rounds_leave_states_alone)
{
    const int64_t src[] = {0, 1}, dst[] = {1, 0};
    igraph_t g;
    build_graph(&g, 2, src, dst, 2, 1);
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    igraph_destroy(&g);
    ag_weights_t w;
    ag_weights_random(&w, 4, 1, 4, 0, 1, &err);
    float X[8], X0[8];
    fill_uniform(X, 8, 3, 1.0f);
    memcpy(X0, X, sizeof X);
    ag_workspace_t ws;
    ag_workspace_init(&ws, 2, 4, 4, &err);
    ck_assert_int_eq(ag_rounds_run(&nb, &w, 1, X, 0, NULL, &ws, NULL, &err), AG_OK);
    ck_assert_mem_eq(X, X0, sizeof X);
    ag_workspace_t small;
    ag_workspace_init(&small, 2, 3, 4, &err);
    ck_assert_fails_with(ag_rounds_run(&nb, &w, 1, X, 1, NULL, &small, NULL, &err), err, AG_EINVAL, "workspace");
    ag_workspace_destroy(&small);
    ag_workspace_destroy(&ws);
    ag_weights_destroy(&w);
    ag_nbhd_destroy(&nb);
}
END_TEST

START_TEST(random_weights_are_reproducible_and_scaled)
{
    ag_weights_t a, b, c;
    ag_error_t err;
    const int64_t D = 256, H = 4, d = 64;
    ck_assert_int_eq(ag_weights_random(&a, D, H, d, 0, 7, &err), AG_OK);
    ck_assert_int_eq(ag_weights_random(&b, D, H, d, 0, 7, &err), AG_OK);
    ck_assert_int_eq(ag_weights_random(&c, D, H, d, 0, 8, &err), AG_OK);
    ck_assert_mem_eq(a.wq, b.wq, D * H * d * sizeof(float));
    ck_assert_mem_eq(a.wo, b.wo, D * H * d * sizeof(float));
    ck_assert(memcmp(a.wq, c.wq, D * H * d * sizeof(float)) != 0);
    ck_assert(memcmp(a.wq, a.wk, D * H * d * sizeof(float)) != 0);   /* own streams */
    double sum = 0, sq = 0;
    const int64_t n = D * H * d;
    for (int64_t i = 0; i < n; i++)
        sum += a.wq[i], sq += (double)a.wq[i] * a.wq[i];
    double mean = sum / n, sd = sqrt(sq / n - mean * mean);
    ck_assert_double_lt(fabs(mean), 0.01 / sqrt(D));
    ck_assert_double_lt(fabs(sd * sqrt(D) - 1), 0.02);       /* std 1/sqrt(D) */
    ag_weights_destroy(&a), ag_weights_destroy(&b), ag_weights_destroy(&c);
}
END_TEST

static void save(const char *dir, const char *name, int64_t rows, int64_t cols)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    float *x = calloc(rows * cols, sizeof *x);
    ag_error_t err;
    ck_assert_int_eq(ag_npy_write_f32(path, x, rows, cols, &err), AG_OK);
    free(x);
}

START_TEST(weights_load_checks_shapes)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tmp_path("wdir"));
    mkdir(dir, 0755);
    ag_weights_t w;
    ag_error_t err;
    ck_assert_fails_with(ag_weights_load(&w, dir, 1, &err), err, AG_EIO, "wq.npy");
    save(dir, "wq", 12, 8);
    save(dir, "wk", 12, 8);
    save(dir, "wv", 12, 8);
    save(dir, "wo", 8, 12);
    ck_assert_int_eq(ag_weights_load(&w, dir, 3, &err), AG_OK);
    ck_assert_int_eq(w.D, 8);
    ck_assert_int_eq(w.H, 3);
    ck_assert_int_eq(w.d, 4);
    ag_weights_destroy(&w);
    ck_assert_fails_with(ag_weights_load(&w, dir, 5, &err), err, AG_EINVAL,
                         "12 rows, not a multiple of 5 heads");
    save(dir, "wv", 12, 9);
    ck_assert_fails_with(ag_weights_load(&w, dir, 3, &err), err, AG_EINVAL,
                         "wv.npy is [12, 9]; expected [12, 8]");
    save(dir, "wv", 12, 8);
    save(dir, "wo", 12, 8);
    ck_assert_fails_with(ag_weights_load(&w, dir, 3, &err), err, AG_EINVAL,
                         "wo.npy is [12, 8]; expected [8, 12]");
}
END_TEST

START_TEST(random_normal_is_standard)
{
    const int64_t n = 200001;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    ag_random_normal(x, n, 3, 0, 1.0f);
    ag_random_normal(y, n, 3, 0, 1.0f);
    ck_assert_mem_eq(x, y, n * sizeof *x);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++)
        sum += x[i], sq += (double)x[i] * x[i];
    ck_assert_double_lt(fabs(sum / n), 0.01);
    ck_assert_double_lt(fabs(sq / n - 1), 0.02);
    free(x), free(y);
}
END_TEST

#ifdef _OPENMP
/* Enough work that two threads really run (smaller regions run on one): a
   random graph of 2048 nodes, one layer D=32, H=4, d=8 and states X. */
static void threads_problem(ag_nbhd_t *nb, ag_weights_t *w, float **X)
{
    const int64_t N = 2048, D = 32, H = 4, d = 8;
    int64_t *src = malloc(4096 * sizeof *src), *dst = malloc(4096 * sizeof *dst);
    int64_t E = random_edges(N, 250, src, dst);
    ck_assert_int_ge(E * H * d, AG_PARALLEL_MIN_WORK);
    ck_assert_int_ge(N * D * 8, AG_PARALLEL_MIN_WORK);
    igraph_t g;
    build_graph(&g, N, src, dst, E, 1);
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(nb, &g, &err), AG_OK);
    igraph_destroy(&g);
    ck_assert_int_eq(ag_weights_random(w, D, H, d, 0, 2, &err), AG_OK);
    *X = malloc(N * D * 4);
    fill_uniform(*X, N * D, 4, 1.0f);
    free(src), free(dst);
}

/* Three rounds of w on X in place, in a workspace of its own (a host thread's body). */
typedef struct {
    const ag_nbhd_t *nb;
    const ag_weights_t *w;
    float *X;
    int rc;
} rounds_job_t;

static void *run_rounds(void *arg)
{
    rounds_job_t *j = arg;
    ag_workspace_t ws;
    ag_error_t err;
    j->rc = ag_workspace_init(&ws, j->nb->n_nodes, j->w->H * j->w->d, j->w->D, &err);
    if (!j->rc)
        j->rc = ag_rounds_run(j->nb, j->w, 1, j->X, 3, NULL, &ws, NULL, &err);
    ag_workspace_destroy(&ws);
    return NULL;
}

START_TEST(rounds_identical_for_1_and_2_threads)
{
    ag_nbhd_t nb;
    ag_weights_t w;
    float *X1;
    threads_problem(&nb, &w, &X1);
    const int64_t n = nb.n_nodes * w.D;
    float *X2 = malloc(n * 4);
    memcpy(X2, X1, n * 4);
    /* the thread count varies: the projections run in fixed row blocks (gemm.c)
       and must not depend on it (OpenBLAS's own 2-thread sgemm, which the
       library once called, changed the last bits at this size: N=2048, D=32) */
    rounds_job_t one = {&nb, &w, X1, -1}, two = {&nb, &w, X2, -1};
    ck_assert_int_eq(ag_set_threads(1), 1);
    run_rounds(&one);
    ck_assert_int_eq(one.rc, AG_OK);
    ck_assert_int_eq(ag_set_threads(2), 2);
    run_rounds(&two);
    ck_assert_int_eq(two.rc, AG_OK);
    ck_assert_mem_eq(X1, X2, n * 4);
    ag_weights_destroy(&w);
    ag_nbhd_destroy(&nb);
    free(X1), free(X2);
}
END_TEST

/* Two host threads running rounds at once: the bits of one after the other. */
START_TEST(rounds_on_two_host_threads_at_once)
{
    ag_nbhd_t nb;
    ag_weights_t w;
    float *X0;
    threads_problem(&nb, &w, &X0);
    const int64_t n = nb.n_nodes * w.D;
    float *want = malloc(n * 4), *X[2] = {malloc(n * 4), malloc(n * 4)};
    memcpy(want, X0, n * 4);
    ck_assert_int_eq(ag_set_threads(2), 2);
    rounds_job_t ref = {&nb, &w, want, -1};
    run_rounds(&ref);
    ck_assert_int_eq(ref.rc, AG_OK);
    for (int attempt = 0; attempt < 4; attempt++) {
        rounds_job_t jobs[2];
        pthread_t t[2];
        for (int k = 0; k < 2; k++) {
            memcpy(X[k], X0, n * 4);
            jobs[k] = (rounds_job_t){&nb, &w, X[k], -1};
            ck_assert_int_eq(pthread_create(&t[k], NULL, run_rounds, &jobs[k]), 0);
        }
        for (int k = 0; k < 2; k++) {
            ck_assert_int_eq(pthread_join(t[k], NULL), 0);
            ck_assert_int_eq(jobs[k].rc, AG_OK);
            ck_assert_mem_eq(X[k], want, n * 4);
        }
    }
    ag_weights_destroy(&w);
    ag_nbhd_destroy(&nb);
    free(X0), free(want), free(X[0]), free(X[1]);
}
END_TEST
#endif

/* A compiled random graph for the round tests; src/dst hold its messages. */
typedef struct {
    int64_t N, E, src[300], dst[300];
    ag_nbhd_t nb;
} graph_t;

static void make_graph(graph_t *g, int64_t N)
{
    g->N = N;
    g->E = random_edges(N, 40, g->src, g->dst);
    igraph_t ig;
    build_graph(&ig, N, g->src, g->dst, g->E, 1);
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_graph(&g->nb, &ig, &err), AG_OK);
    igraph_destroy(&ig);
}

static ref_layer_t as_ref(const ag_weights_t *w)
{
    return (ref_layer_t){w->wq, w->wk, w->wv, w->wo, w->per_node != 0, w->ln_weight, w->ln_bias,
                         NULL, NULL};
}

/* Runs `rounds` rounds with opts and compares with ref_rounds_layers. */
static void check_layers(graph_t *g, ag_weights_t *layers, int n_layers, int rounds,
                         const ag_round_opts_t *opts)
{
    const int64_t N = g->N, D = layers[0].D, H = layers[0].H, d = layers[0].d;
    float *X = malloc(N * D * sizeof *X);
    double *Xref = malloc(N * D * sizeof *Xref);
    fill_uniform(X, N * D, 23, 1.0f);
    for (int64_t i = 0; i < N * D; i++)
        Xref[i] = X[i];
    ag_workspace_t ws;
    ag_error_t err;
    int done;
    ck_assert_int_eq(ag_workspace_init(&ws, N, H * d, D, &err), AG_OK);
    ck_assert_msg(ag_rounds_run(&g->nb, layers, n_layers, X, rounds, opts, &ws, &done, &err) ==
                  AG_OK, "%s", err.msg);
    ck_assert_int_eq(done, rounds);
    ref_layer_t ref[8];
    for (int k = 0; k < n_layers; k++)
        ref[k] = as_ref(&layers[k]);
    ref_rounds_layers(N, g->src, g->dst, g->E, ref, n_layers, D, H, d, rounds,
                      !(opts && opts->no_residual), opts && opts->norm == AG_NORM_LAYER, Xref);
    for (int64_t i = 0; i < N * D; i++)
        ck_assert_msg(fabs(X[i] - Xref[i]) <= 1e-4 * (1 + fabs(Xref[i])),
                      "X[%lld] = %.9g, reference %.9g", (long long)i, X[i], Xref[i]);
    ag_workspace_destroy(&ws);
    free(X), free(Xref);
}

START_TEST(per_round_layers_norm_and_no_residual)
{
    graph_t g;
    make_graph(&g, 11);
    ag_weights_t layers[3];
    ag_error_t err;
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(ag_weights_random(&layers[k], 12, 2, 5, 0, 100 + k, &err), AG_OK);
        layers[k].ln_weight = malloc(12 * sizeof(float));
        layers[k].ln_bias = malloc(12 * sizeof(float));
        fill_uniform(layers[k].ln_weight, 12, 40 + k, 2.0f);
        fill_uniform(layers[k].ln_bias, 12, 50 + k, 1.0f);
    }
    check_layers(&g, layers, 3, 3, NULL);                       /* one layer per round */
    ag_round_opts_t opts = {ROUND_DEFAULTS, .norm = AG_NORM_LAYER};
    check_layers(&g, layers, 3, 2, &opts);                      /* pre-norm */
    opts.no_residual = 1;
    check_layers(&g, layers, 1, 3, &opts);                      /* shared, no residual */
    ag_workspace_t ws;
    float X[11 * 12] = {0};
    ag_workspace_init(&ws, 11, 10, 12, &err);
    ck_assert_fails_with(ag_rounds_run(&g.nb, layers, 3, X, 4, NULL, &ws, NULL, &err), err,
                         AG_EINVAL, "4 rounds with 3 layers");
    ag_workspace_destroy(&ws);
    for (int k = 0; k < 3; k++)
        ag_weights_destroy(&layers[k]);
    ag_nbhd_destroy(&g.nb);
}
END_TEST

START_TEST(per_node_weights)
{
    graph_t g;
    make_graph(&g, 9);
    ag_weights_t w;
    ag_error_t err;
    ck_assert_int_eq(ag_weights_random(&w, 6, 2, 3, 9, 4, &err), AG_OK);
    ck_assert_int_eq(w.per_node, 9);
    /* node 0 and node 1 project with different matrices */
    ck_assert(memcmp(w.wq, w.wq + 6 * 6, 6 * 6 * sizeof(float)) != 0);
    check_layers(&g, &w, 1, 2, NULL);
    ag_weights_destroy(&w);
    ck_assert_int_eq(ag_weights_random(&w, 6, 2, 3, 8, 4, &err), AG_OK);   /* wrong N */
    ag_workspace_t ws;
    float X[9 * 6] = {0};
    ag_workspace_init(&ws, 9, 6, 6, &err);
    ck_assert_fails_with(ag_rounds_run(&g.nb, &w, 1, X, 1, NULL, &ws, NULL, &err), err,
                         AG_EINVAL, "per-node weights for 8 nodes; the graph has 9");
    ag_workspace_destroy(&ws);
    ag_weights_destroy(&w);
    ag_nbhd_destroy(&g.nb);
}
END_TEST

/* A process's rows of per-node weights (drawn, or kept of a whole draw) are
   those rows of the whole draw, bit for bit; the shared matrices are the whole
   draw's; no rows give shared shapes. */
START_TEST(per_node_weight_rows_of_a_part)
{
    const int64_t N = 37, D = 6, H = 2, d = 3, per = H * d * D;
    ag_error_t err;
    ag_weights_t whole, part, kept;
    ck_assert_int_eq(ag_weights_random(&whole, D, H, d, N, 11, &err), AG_OK);
    const int64_t cuts[][2] = {{0, 37}, {0, 5}, {5, 12}, {13, 24}, {36, 1}};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        const int64_t first = cuts[c][0], rows = cuts[c][1];
        ck_assert_int_eq(ag_i_weights_random_rows(&part, D, H, d, first, rows, 11, &err), AG_OK);
        ck_assert_int_eq(ag_weights_random(&kept, D, H, d, N, 11, &err), AG_OK);
        ck_assert_int_eq(ag_i_weights_keep_rows(&kept, first, rows, &err), AG_OK);
        ck_assert_int_eq(part.per_node, rows);
        ck_assert_int_eq(kept.per_node, rows);
        const float *w_all[] = {whole.wq, whole.wk, whole.wv};
        const float *w_part[] = {part.wq, part.wk, part.wv};
        const float *w_kept[] = {kept.wq, kept.wk, kept.wv};
        const size_t bytes = (size_t)(rows * per) * sizeof(float);
        for (int m = 0; m < 3; m++) {
            ck_assert(!memcmp(w_part[m], w_all[m] + first * per, bytes));
            ck_assert(!memcmp(w_kept[m], w_all[m] + first * per, bytes));
        }
        ck_assert(!memcmp(part.wo, whole.wo, (size_t)(D * H * d) * sizeof(float)));
        ck_assert(!memcmp(part.attn, whole.attn, (size_t)(H * d) * sizeof(float)));
        ag_weights_destroy(&part), ag_weights_destroy(&kept);
    }
    ck_assert_int_eq(ag_i_weights_random_rows(&part, D, H, d, N, 0, 11, &err), AG_OK);
    ck_assert_int_eq(part.per_node, 0);
    ag_weights_destroy(&part);
    ck_assert_int_eq(ag_i_weights_keep_rows(&whole, 30, 8, &err), AG_EINVAL);
    ag_weights_destroy(&whole);
}
END_TEST

START_TEST(layer_norm_and_positions_formulas)
{
    float X[2 * 4] = {1, 2, 3, 4, -1, 0, 0, 5}, Y[8];
    const float wgt[4] = {1, 2, 0.5f, 1}, bias[4] = {0, 1, 0, -1};
    ag_layer_norm(Y, X, 2, 4, wgt, bias, 1e-5f);
    for (int i = 0; i < 2; i++) {
        double mean = 0, var = 0;
        for (int c = 0; c < 4; c++)
            mean += X[i * 4 + c] / 4.0;
        for (int c = 0; c < 4; c++)
            var += (X[i * 4 + c] - mean) * (X[i * 4 + c] - mean) / 4.0;
        for (int c = 0; c < 4; c++)
            ck_assert_double_eq_tol(Y[i * 4 + c],
                                    (X[i * 4 + c] - mean) / sqrt(var + 1e-5) * wgt[c] + bias[c],
                                    1e-5);
    }
    float P[5 * 6] = {0};
    ag_posenc_sinusoidal(P, 5, 6);
    for (int pos = 0; pos < 5; pos++)
        for (int k = 0; k < 3; k++) {
            double angle = pos / pow(10000.0, 2.0 * k / 6.0);
            ck_assert_double_eq_tol(P[pos * 6 + 2 * k], sin(angle), 1e-6);
            ck_assert_double_eq_tol(P[pos * 6 + 2 * k + 1], cos(angle), 1e-6);
        }
}
END_TEST

/* The callback's figures, recomputed here from X, X_prev and the reference weights. */
typedef struct {
    graph_t *g;
    int calls, stop_at;
} trace_ctx_t;

static int check_figures(const ag_round_t *round, void *p)
{
    trace_ctx_t *t = p;
    const ag_workspace_t *ws = round->ws;
    const int64_t N = ws->N, D = ws->D, H = round->w->H, d = round->w->d, E = t->g->E;
    ag_round_figures_t f;
    ag_error_t err;
    ck_assert_int_eq(ag_round_figures(round, &f, &err), AG_OK);
    double diff = 0, base = 0;
    for (int64_t x = 0; x < N * D; x++)
        diff += pow(round->X[x] - round->X_prev[x], 2), base += pow(round->X_prev[x], 2);
    ck_assert_double_eq_tol(f.change, sqrt(diff / base), 1e-7 * f.change);
    double *M = malloc(N * H * d * sizeof *M), *W = malloc(E * H * sizeof *W);
    const ref_score_t rs = {.kind = 0, .beta = 1, .slope = 0.2};
    ref_attention_scored(N, t->g->src, t->g->dst, E, ws->Q, ws->K, ws->V, H, d, &rs, M, W);
    double ent_sum = 0, top = 0;
    int64_t with_edges = 0;
    for (int64_t i = 0; i < N; i++) {
        double ent = 0;
        int any = 0;
        for (int64_t e = 0; e < E; e++)
            if (t->g->dst[e] == i)
                for (int64_t h = 0; h < H; h++) {
                    ent -= W[e * H + h] * log(W[e * H + h]) / H;
                    top = fmax(top, W[e * H + h]);
                    any = 1;
                }
        ent_sum += any ? ent : 0;
        with_edges += any;
    }
    ck_assert_double_eq_tol(f.entropy, ent_sum / with_edges, 1e-5);
    ck_assert_double_eq_tol(f.max_weight, top, 1e-5);
    free(M), free(W);
    t->calls++;
    return round->round == t->stop_at ? AG_STOP : AG_OK;
}

START_TEST(round_callback_figures_and_stop)
{
    graph_t g;
    make_graph(&g, 10);
    ag_weights_t w;
    ag_error_t err;
    ag_weights_random(&w, 8, 2, 4, 0, 9, &err);
    float X[80], X2[80];
    fill_uniform(X, 80, 3, 1.0f);
    memcpy(X2, X, sizeof X);
    ag_workspace_t ws;
    ag_workspace_init(&ws, 10, 8, 8, &err);
    trace_ctx_t t = {&g, 0, 3};
    ag_round_opts_t opts = {ROUND_DEFAULTS, .on_round = check_figures, .ctx = &t};
    int done;
    ck_assert_int_eq(ag_rounds_run(&g.nb, &w, 1, X, 10, &opts, &ws, &done, &err), AG_OK);
    ck_assert_int_eq(done, 3);          /* stopped by the callback */
    ck_assert_int_eq(t.calls, 3);
    ck_assert_int_eq(ag_rounds_run(&g.nb, &w, 1, X2, 3, NULL, &ws, NULL, &err), AG_OK);
    ck_assert_mem_eq(X, X2, sizeof X);  /* the same three rounds */
    ag_workspace_destroy(&ws);
    ag_weights_destroy(&w);
    ag_nbhd_destroy(&g.nb);
}
END_TEST

static int stop_when_still(const ag_round_t *round, void *p)
{
    ag_round_figures_t f;
    ag_error_t err;
    ck_assert_int_eq(ag_round_figures(round, &f, &err), AG_OK);
    *(double *)p = f.change;
    return f.change < 1e-6 ? AG_STOP : AG_OK;
}

/* The shipped Hopfield example retrieves the stored pattern from the noisy probe. */
START_TEST(hopfield_example_retrieves_the_pattern)
{
    igraph_t g;
    ag_nbhd_t nb;
    ag_matrix_t x;
    ag_weights_t w;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/hopfield.gml", NULL, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &err), AG_OK);
    ck_assert_int_eq(ag_matrix_read_npy(&x, "graphs/hopfield/x.npy", &err), AG_OK);
    ck_assert_int_eq(ag_weights_load(&w, "graphs/hopfield", 1, &err), AG_OK);
    const int64_t N = x.rows, D = x.cols, probe = N - 1, target = 2;
    float *stored = malloc(N * D * sizeof *stored);
    memcpy(stored, x.data, N * D * sizeof *stored);
    int flipped = 0;
    for (int64_t c = 0; c < D; c++)
        flipped += x.data[probe * D + c] != x.data[target * D + c];
    ck_assert_int_eq(flipped, 8);                 /* the probe starts 8 signs away */
    ag_workspace_t ws;
    ag_workspace_init(&ws, N, D, D, &err);
    const ag_score_t sc = {SCORE_DEFAULTS, .kind = AG_SCORE_DOT, .beta = 0.25f};
    double last_change = 1;
    ag_round_opts_t opts = {ROUND_DEFAULTS, .score = &sc, .no_residual = 1, .on_round = stop_when_still,
                            .ctx = &last_change};
    int done;
    ck_assert_int_eq(ag_rounds_run(&nb, &w, 1, x.data, 20, &opts, &ws, &done, &err), AG_OK);
    ck_assert_int_lt(done, 20);                   /* converged */
    ck_assert_double_lt(last_change, 1e-6);
    ck_assert_mem_eq(x.data, stored, probe * D * sizeof(float));   /* stored rows stay */
    for (int64_t c = 0; c < D; c++)
        ck_assert_double_eq_tol(x.data[probe * D + c], stored[target * D + c], 0.02);
    free(stored);
    ag_workspace_destroy(&ws);
    ag_weights_destroy(&w);
    ag_matrix_destroy(&x);
    ag_nbhd_destroy(&nb);
    igraph_destroy(&g);
}
END_TEST

/* A 3-D float32 .npy of zeros: [a, b, c]. */
static void save3(const char *dir, const char *name, int64_t a, int64_t b, int64_t c)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    float *z = calloc(a * b * c, sizeof *z);
    const int64_t shape[3] = {a, b, c};
    ag_error_t err;
    ck_assert_int_eq(ag_npy_write_f32_nd(path, z, 3, shape, &err), AG_OK);
    free(z);
}

START_TEST(weights_load_optional_and_per_node)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tmp_path("wdir2"));
    mkdir(dir, 0755);
    ag_weights_t w;
    ag_error_t err;
    save3(dir, "wq", 5, 8, 6);
    save3(dir, "wk", 5, 8, 6);
    save3(dir, "wv", 5, 8, 6);
    save(dir, "wo", 6, 8);
    ck_assert_int_eq(ag_weights_load(&w, dir, 2, &err), AG_OK);
    ck_assert_int_eq(w.per_node, 5);
    ck_assert_int_eq(w.D, 6);
    ck_assert_int_eq(w.d, 4);
    ck_assert_ptr_null(w.ln_weight);
    ck_assert_ptr_null(w.attn_src);
    ag_weights_destroy(&w);
    save3(dir, "wk", 4, 8, 6);
    ck_assert_fails_with(ag_weights_load(&w, dir, 2, &err), err, AG_EINVAL,
                         "wk.npy is [4, 8, 6]; expected [5, 8, 6]");
    save3(dir, "wk", 5, 8, 6);
    save(dir, "attn_src", 2, 3);
    ck_assert_fails_with(ag_weights_load(&w, dir, 2, &err), err, AG_EINVAL,
                         "attn_src.npy is [2, 3]; expected [2, 4]");
}
END_TEST

/* Feature dropout: each element 0 or x/(1-p), kept at rate 1-p (3 sigma),
   a function of (seed, row, col) alone (a slice of rows with its first row
   draws what the whole draws; threads do not matter), p outside [0, 1)
   refused naming it. */
START_TEST(feature_dropout_mask_and_rate)
{
    enum { R = 300, C = 70 };
    const float p = 0.35f;
    float *X = malloc(R * C * 4), *Y = malloc(R * C * 4), *Z = malloc(R * C * 4);
    for (int k = 0; k < R * C; k++)
        X[k] = 1.0f + (float)(k % 13);
    ag_error_t err;
    ck_assert_int_eq(ag_dropout(Y, X, 0, R, C, p, 42, &err), AG_OK);
    int kept = 0;
    for (int k = 0; k < R * C; k++) {
        if (Y[k] != 0) {
            kept++;
            ck_assert_float_eq_tol(Y[k], X[k] / (1 - p), 1e-5f * X[k]);
        }
    }
    const double n = R * C, sigma = sqrt(n * p * (1 - p));
    ck_assert_double_lt(fabs(kept - n * (1 - p)), 3 * sigma);
    /* rows 100..199 alone, as a process holding them draws them */
    ck_assert_int_eq(ag_dropout(Z, X + 100 * C, 100, 100, C, p, 42, &err), AG_OK);
    ck_assert_mem_eq(Z, Y + 100 * C, 100 * C * 4);
#ifdef _OPENMP
    ag_set_threads(1);
    ck_assert_int_eq(ag_dropout(Z, X, 0, R, C, p, 42, &err), AG_OK);
    ag_set_threads(0);
    ck_assert_mem_eq(Z, Y, R * C * 4);
#endif
    ck_assert_int_eq(ag_dropout(Z, X, 0, R, C, p, 43, &err), AG_OK);
    ck_assert_int_ne(memcmp(Z, Y, R * C * 4), 0);
    ck_assert_int_eq(ag_dropout(Z, X, 0, R, C, 1.0f, 42, &err), AG_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "p 1"));
    ck_assert_int_eq(ag_dropout(Z, X, 0, R, C, NAN, 42, &err), AG_EINVAL);
    free(X), free(Y), free(Z);
}
END_TEST

/* The model text's one reader and writer: every key read into the spec (the
   values checked here by hand), written back in one form (the text below,
   written out by hand), read again to the same spec; refusals name the line. */
START_TEST(model_spec_reads_and_writes_every_key)
{
    static const char text[] =
        "# every key\r\n"
        "layer heads=4 dim=8 out=concat projection=one bias=yes act=elu\n"
        "posenc sinusoidal\n"
        "score additive   # GAT's\n"
        "slope 0.1\nbeta 2\nsoftcap 30\nalibi\nedge-bias w\nnorm layer\n"
        "self-loops replace\nundirected\ndropout 0.6\nattn-dropout 0.5\nresid-dropout 0.25\n"
        "readout none\n"
        "layer heads=1 dim=3 out=12 residual=no ffn=2 ffn_act=relu qkv_bias=yes skip=gate "
        "norm=post edges=yes\n";
    static const char written[] =
        "# attngraph model (docs/model-file.md)\n"
        "score additive\nbeta 2\nsoftcap 30\nslope 0.100000001\nalibi\nedge-bias w\n"
        "norm layer\nposenc sinusoidal\nself-loops replace\nundirected\n"
        "dropout 0.6\nattn-dropout 0.5\nresid-dropout 0.25\nreadout none\n"
        "layer heads=4 dim=8 out=concat projection=one bias=yes act=elu\n"
        "layer heads=1 dim=3 out=12 projection=qkv bias=no act=none residual=no ffn=2 "
        "ffn_act=relu qkv_bias=yes skip=gate norm=post edges=yes\n";
    ag_model_spec_t spec, again;
    ag_error_t err;
    ck_assert_msg(ag_model_spec_parse(&spec, text, "m.txt", &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(spec.score.kind, AG_SCORE_ADDITIVE);
    ck_assert(spec.score.slope == 0.1f && spec.score.beta == 2 && spec.score.softcap == 30);
    ck_assert(spec.score.alibi && !spec.score.has_sigmoid_bias);
    ck_assert_str_eq(spec.edge_bias, "w");
    ck_assert(spec.norm == AG_NORM_LAYER && spec.posenc && spec.self_loops == AG_SELF_REPLACE);
    ck_assert(spec.directed == 0 && spec.readout == 0);
    ck_assert(spec.dropout[0] == 0.6f && spec.dropout[1] == 0.5f && spec.dropout[2] == 0.25f);
    ck_assert_int_eq(spec.line[AG_KEY_SCORE], 4);
    ck_assert_int_eq(spec.line[AG_KEY_SIGMOID_BIAS], 0);
    ck_assert_int_eq(spec.n_layers, 2);
    const ag_layer_spec_t *a = &spec.layers[0], *b = &spec.layers[1];
    ck_assert(a->heads == 4 && a->dim == 8 && a->out == AG_OUT_CONCAT && a->one_projection &&
              a->bias && a->act == AG_ACT_ELU && a->residual == -1 && a->line == 2);
    ck_assert(b->out == AG_OUT_LINEAR && b->out_width == 12 && b->residual == 0 && b->ffn == 2 &&
              b->ffn_act == AG_ACT_RELU && b->qkv_bias && b->skip == 2 && b->post_norm &&
              b->edges && b->line == 17);
    ck_assert_int_eq(ag_layer_spec_width_out(a, 5), 32);
    ck_assert_int_eq(ag_layer_spec_width_out(b, 32), 12);
    char out[2048];
    ck_assert_int_eq(ag_model_spec_text(out, sizeof out, &spec), strlen(written));
    ck_assert_str_eq(out, written);
    ck_assert_int_eq(ag_model_spec_parse(&again, out, "again", &err), AG_OK);
    char out2[2048];
    ag_model_spec_text(out2, sizeof out2, &again);
    ck_assert_str_eq(out2, written);
    /* a short buffer: cut, terminated, the whole length returned */
    ck_assert_int_eq(ag_model_spec_text(out2, 10, &spec), strlen(written));
    ck_assert_int_eq(strlen(out2), 9);
    /* the defaults write nothing but the readout and the layers */
    ag_model_spec_init(&spec);
    spec.n_layers = 1;
    ag_layer_spec_init(&spec.layers[0]);
    spec.layers[0].heads = 2, spec.layers[0].dim = 4;
    ag_model_spec_text(out, sizeof out, &spec);
    ck_assert_str_eq(out, "# attngraph model (docs/model-file.md)\nreadout linear\n"
                          "layer heads=2 dim=4 projection=qkv bias=no act=none\n");
    /* refusals name the line */
    static const struct {
        const char *text;
        ag_status_t status;
        const char *needle;
    } bad[] = {
        {"score foo\nlayer heads=1 dim=1\n", AG_EINVAL,
         "m.txt line 1: score 'foo': expected scaled-dot"},
        {"beta -1\nlayer heads=1 dim=1\n", AG_EINVAL, "line 1: beta '-1' is not a number >= 0"},
        {"softcap 0\nlayer heads=1 dim=1\n", AG_EINVAL, "line 1: softcap '0' is not a number > 0"},
        {"slope 1e39\nlayer heads=1 dim=1\n", AG_EINVAL, "beyond float32's range"},
        {"norm pre\nlayer heads=1 dim=1\n", AG_EINVAL, "line 1: norm 'pre': expected layer or none"},
        {"self-loops yes\nlayer heads=1 dim=1\n", AG_EINVAL, "self-loops 'yes': expected on, off"},
        {"directed\nundirected\nlayer heads=1 dim=1\n", AG_EINVAL,
         "line 2: directed and undirected"},
        {"layer heads=1 dim=1\nlayer heads=2\n", AG_EFORMAT,
         "line 2: a layer needs heads=H and dim=d"},
        {"layer heads=1 dim=1 skip=sum residual=yes\n", AG_EINVAL, "skip=sum and residual=yes"},
        {"alibi\nalibi\nlayer heads=1 dim=1\n", AG_EFORMAT, "line 2: alibi given twice"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ck_assert_fails_with(ag_model_spec_parse(&spec, bad[k].text, "m.txt", &err), err,
                             bad[k].status, bad[k].needle);
        ck_assert_int_eq(spec.n_layers, 0);   /* zeroed on failure */
    }
    /* what the spec and the data decide together */
    ck_assert_int_eq(ag_model_spec_parse(&spec, "layer heads=2 dim=2 out=concat norm=post\n",
                                         "m.txt", &err), AG_OK);
    ck_assert_fails_with(ag_model_spec_check(&spec, "m.txt", 0, 0, &err), err, AG_EINVAL,
                         "m.txt line 1: norm=post, and the model has no norm");
    spec.norm = AG_NORM_LAYER;
    ck_assert_int_eq(ag_model_spec_check(&spec, "m.txt", 4, 0, &err), AG_OK);
    spec.readout = 0;
    ck_assert_fails_with(ag_model_spec_check(&spec, "m.txt", 4, 3, &err), err, AG_EINVAL,
                         "readout none, so the last layer writes the logits: width 4");
    spec.layers[0].residual = 1;
    ck_assert_fails_with(ag_model_spec_check(&spec, "m.txt", 5, 0, &err), err, AG_EINVAL,
                         "layer 1 reads width 5 and writes 4, so it cannot add a residual");
    /* rounds of one layer: the layer keeps the width, and there is one */
    ck_assert_int_eq(ag_model_spec_parse(&spec, "rounds 3\nlayer heads=2 dim=2 out=concat "
                                         "residual=no\n", "m.txt", &err), AG_OK);
    ck_assert_int_eq(spec.rounds, 3);
    ck_assert_int_eq(ag_model_spec_check(&spec, "m.txt", 4, 0, &err), AG_OK);
    ck_assert_fails_with(ag_model_spec_check(&spec, "m.txt", 6, 0, &err), err, AG_EINVAL,
                         "m.txt line 1: rounds 3 runs one layer again on what it writes, so it "
                         "must keep the width: it reads 6 and writes 4");
    char again_text[512];
    ag_model_spec_text(again_text, sizeof again_text, &spec);
    ck_assert_str_eq(again_text, "# attngraph model (docs/model-file.md)\nreadout linear\n"
                                 "rounds 3\nlayer heads=2 dim=2 out=concat projection=qkv "
                                 "bias=no act=none residual=no\n");
    spec.n_layers = 2;
    ck_assert_fails_with(ag_model_spec_check(&spec, "m.txt", 4, 0, &err), err, AG_EINVAL,
                         "m.txt: rounds 3 with 2 layers");
}
END_TEST

/* model.args's one reader (ag_model_args_parse): every option the CLI writes
   into the spec (values checked by hand); what the line may not hold refused,
   naming the file and the word. */
START_TEST(model_args_parse_reads_every_option)
{
    ag_model_spec_t spec;
    ag_error_t err;
    ck_assert_msg(ag_model_args_parse(&spec, "--heads 2 --rounds 3 --score additive --slope "
                                      "0.1 --beta 2 --softcap 30 --alibi --edge-bias w "
                                      "--no-residual --norm layer --posenc sinusoidal "
                                      "--self-loops on --directed\n", "m.args", &err) == AG_OK,
                  "%s", err.msg);
    ck_assert_int_eq(spec.n_layers, 1);
    ck_assert_int_eq(spec.rounds, 3);
    ck_assert_int_eq(spec.layers[0].heads, 2);
    ck_assert_int_eq(spec.layers[0].dim, 0);   /* the arrays' to tell */
    ck_assert_int_eq(spec.layers[0].residual, 0);
    ck_assert_int_eq(spec.score.kind, AG_SCORE_ADDITIVE);
    ck_assert_float_eq(spec.score.slope, 0.1f);
    ck_assert_float_eq(spec.score.beta, 2.0f);
    ck_assert_float_eq(spec.score.softcap, 30.0f);
    ck_assert_int_eq(spec.score.alibi, 1);
    ck_assert_str_eq(spec.edge_bias, "w");
    ck_assert_int_eq(spec.norm, AG_NORM_LAYER);
    ck_assert_int_eq(spec.posenc, 1);
    ck_assert_int_eq(spec.self_loops, AG_SELF_ON);
    ck_assert_int_eq(spec.directed, 1);
    ck_assert_int_eq(spec.line[AG_KEY_SIGMOID_BIAS], 0);
    ck_assert_int_eq(spec.line[AG_KEY_SLOPE], 1);
    /* the least line: the defaults */
    ck_assert_int_eq(ag_model_args_parse(&spec, "--heads 1 --rounds 1", "m.args", &err), AG_OK);
    ck_assert_int_eq(spec.layers[0].residual, 1);
    ck_assert_int_eq(spec.score.kind, AG_SCORE_SCALED_DOT);
    ck_assert_int_eq(spec.directed, -1);
    static const struct {
        const char *text, *msg;
    } refused[] = {
        {"heads 2", "m.args: 'heads' is not one of the model's options"},
        {"--heads 2 --dropout 0.5", "'--dropout' is not one of the model's options"},
        {"--heads 2 --out x.npy", "'--out' is not one of the model's options"},
        {"--heads 0", "m.args: --heads '0' is not an integer in 1..4096"},
        {"--heads 2 --rounds 2x", "--rounds '2x' is not an integer in 1..1000000"},
        {"--heads 2 --beta", "m.args: --beta needs a value"},
        {"--heads 2 --score nope", "score 'nope': expected scaled-dot"},
        {"--rounds 2 --heads 2", "expected one line of options starting with --heads"},
        {"", "expected one line of options starting with --heads"},
        {"--heads 2\n--rounds 2\n", "m.args: a second line"},
        {"--heads 2 --rounds 1 --heads 4", "--heads after --heads; expected each option once"},
        {"--heads 2 --directed --undirected", "--undirected after --directed"},
    };
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++)
        ck_assert_fails_with(ag_model_args_parse(&spec, refused[k].text, "m.args", &err), err,
                             k == 3 || k == 4 || k == 6 ? AG_EINVAL : AG_EFORMAT,
                             refused[k].msg);
    ck_assert_int_eq(spec.n_layers, 0);   /* zeroed on failure */
    ck_assert_int_eq(ag_model_args_parse(&spec, "--heads\t3 --alibi", "m.args", &err), AG_OK);
    ck_assert_int_eq(spec.layers[0].heads, 3);
}
END_TEST

Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, rounds_match_reference);
    tcase_add_test(tc, zero_rounds_leave_states_alone);
    tcase_add_test(tc, random_weights_are_reproducible_and_scaled);
    tcase_add_test(tc, weights_load_checks_shapes);
    tcase_add_test(tc, random_normal_is_standard);
    tcase_add_test(tc, per_round_layers_norm_and_no_residual);
    tcase_add_test(tc, per_node_weights);
    tcase_add_test(tc, per_node_weight_rows_of_a_part);
    tcase_add_test(tc, layer_norm_and_positions_formulas);
    tcase_add_test(tc, round_callback_figures_and_stop);
    tcase_add_test(tc, hopfield_example_retrieves_the_pattern);
    tcase_add_test(tc, weights_load_optional_and_per_node);
    tcase_add_test(tc, feature_dropout_mask_and_rate);
#ifdef _OPENMP
    tcase_add_test(tc, rounds_identical_for_1_and_2_threads);
    tcase_add_test(tc, rounds_on_two_host_threads_at_once);
#endif
    tcase_add_test(tc, model_spec_reads_and_writes_every_key);
    tcase_add_test(tc, model_args_parse_reads_every_option);
    suite_add_tcase(s, tc);
    return s;
}
