/*
 * The kernels on a part of the destinations, as the MPI layer runs them, against
 * the whole-graph kernel, bitwise: ag_i_forward_part on ranges starting at
 * multiples of 64 (tiled and gather shapes, nb indexed by global destination
 * through offset pointers), and the streamed tiled forward fed windows of
 * source rows of several sizes (M and the log-sum-exp); the backward on parts,
 * the plain kernels' and the generic kernel's two passes. No MPI needed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "graph/graph.h"
#include "kernels/kernels.h"
#include "testutil.h"

typedef struct {
    ag_nbhd_t nb;
    int64_t N, H, d, HD;
    float *Q, *K, *V, *M, *lse;
} whole_t;

/* w's inputs and whole-graph outputs on its neighbourhoods w->nb. */
static void whole_fill(whole_t *w, int64_t H, int64_t d)
{
    ag_error_t err;
    const int64_t N = w->nb.n_nodes;
    w->N = N, w->H = H, w->d = d, w->HD = H * d;
    w->Q = malloc((size_t)(N * w->HD) * sizeof(float));
    w->K = malloc((size_t)(N * w->HD) * sizeof(float));
    w->V = malloc((size_t)(N * w->HD) * sizeof(float));
    w->M = malloc((size_t)(N * w->HD) * sizeof(float));
    w->lse = malloc((size_t)(N * H) * sizeof(float));
    fill_uniform(w->Q, N * w->HD, 1, 2.0f);
    fill_uniform(w->K, N * w->HD, 2, 2.0f);
    fill_uniform(w->V, N * w->HD, 3, 1.0f);
    const ag_attention_opts_t o = {.lse = w->lse};
    ck_assert_int_eq(ag_attention_ex(&w->nb, w->Q, w->K, w->V, H, d, NULL, w->M, &o, &err),
                     AG_OK);
}

static void whole_init(whole_t *w, const char *spec, int64_t N, int64_t H, int64_t d)
{
    ag_error_t err;
    ag_pattern_t *pat;
    ck_assert_int_eq(ag_pattern_parse(&pat, spec, &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&w->nb, pat, N, AG_SELF_KEEP, &err), AG_OK);
    ag_pattern_free(pat);
    whole_fill(w, H, d);
}

/* One run of `len` sources a destination, its start scattered over the rows
   (not ascending with the destination, as on causal and window patterns). */
static void scattered_runs_init(whole_t *w, int64_t N, int64_t len, int64_t H, int64_t d)
{
    int64_t *ptr = malloc((size_t)(N + 1) * sizeof *ptr);
    int64_t *idx = malloc((size_t)(N * len) * sizeof *idx);
    for (int64_t i = 0; i < N; i++) {
        const int64_t start = i * 389 % (N - len);
        ptr[i] = i * len;
        for (int64_t j = 0; j < len; j++)
            idx[i * len + j] = start + j;
    }
    ptr[N] = N * len;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_csr(&w->nb, N, ptr, idx, &err), AG_OK);
    free(ptr), free(idx);
    whole_fill(w, H, d);
}

static void whole_free(whole_t *w)
{
    ag_nbhd_destroy(&w->nb);
    free(w->Q), free(w->K), free(w->V), free(w->M), free(w->lse);
}

/* The whole graph's layout as the MPI layer agrees it: the least one_run of
   the parts, their block-sparse cells summed (parts from multiples of 64:
   each part costs its own groups), which must be the whole graph's. */
static ag_i_layout_t layout(const ag_nbhd_t *nb)
{
    const int64_t N = nb->n_nodes, cuts[] = {0, 192, 448, N};
    ag_i_layout_t parts = {1, 0};
    for (int k = 0; k < 3; k++) {
        const int64_t lo = cuts[k] < N ? cuts[k] : N, hi = cuts[k + 1] < N ? cuts[k + 1] : N;
        const int64_t cells = ag_i_block_cells(nb, lo, hi);
        parts.one_run &= ag_i_one_run(nb, lo, hi);
        parts.cells = parts.cells < 0 || cells < 0 ? -1 : parts.cells + cells;
    }
    const ag_i_layout_t whole = ag_i_layout(nb);
    ck_assert_int_eq(parts.one_run, whole.one_run);
    if (!whole.one_run)
        ck_assert_int_eq(parts.cells, whole.cells);
    return whole;
}

/* nb's destinations lo..hi-1 as a part holds them (edge_ptr and run_ptr from
   0, copied into *edge_ptr and *run_ptr), indexed by global destination. */
static ag_nbhd_t part_view(const ag_nbhd_t *nb, int64_t lo, int64_t hi, int64_t **edge_ptr,
                           int64_t **run_ptr)
{
    const int64_t n = hi - lo;
    *edge_ptr = malloc((size_t)(n + 1) * sizeof **edge_ptr);
    *run_ptr = malloc((size_t)(n + 1) * sizeof **run_ptr);
    for (int64_t i = 0; i <= n; i++)
        (*edge_ptr)[i] = nb->edge_ptr[lo + i] - nb->edge_ptr[lo],
        (*run_ptr)[i] = nb->run_ptr[lo + i] - nb->run_ptr[lo];
    ag_nbhd_t view = *nb;
    view.edge_ptr = *edge_ptr - lo, view.run_ptr = *run_ptr - lo;
    view.run_src = nb->run_src + nb->run_ptr[lo];
    view.run_len = nb->run_len + nb->run_ptr[lo];
    return view;
}

/* ag_i_forward_part and ag_i_backward_part with a plan of their own. */
static int forward_part(const ag_i_fwd_t *a, int64_t lo, int64_t hi, int64_t klo, int64_t khi,
                        ag_i_layout_t lay, ag_error_t *err)
{
    ag_i_plan_t plan = {0};
    const int rc = ag_i_forward_part(&plan, a, lo, hi, klo, khi, &lay, err);
    ag_i_plan_free(&plan);
    return rc;
}

static int backward_part(const ag_i_bwd_t *a, int64_t lo, int64_t hi, int64_t klo, int64_t khi,
                         ag_i_layout_t lay, ag_error_t *err)
{
    ag_i_plan_t plan = {0};
    const int rc = ag_i_backward_part(&plan, a, lo, hi, klo, khi, &lay, err);
    ag_i_plan_free(&plan);
    return rc;
}

/* Destinations lo..hi-1 through ag_i_forward_part on copies of their arrays
   only (offset pointers), against the whole run's rows. */
static void check_part(const whole_t *w, int64_t lo, int64_t hi)
{
    const int64_t n = hi - lo, HD = w->HD;
    int64_t *edge_ptr, *run_ptr;
    ag_nbhd_t view = part_view(&w->nb, lo, hi, &edge_ptr, &run_ptr);
    float *Q = malloc((size_t)((n ? n : 1) * HD) * sizeof(float));
    float *M = malloc((size_t)((n ? n : 1) * HD) * sizeof(float));
    float *lse = malloc((size_t)((n ? n : 1) * w->H) * sizeof(float));
    memcpy(Q, w->Q + lo * HD, (size_t)(n * HD) * sizeof(float));
    ag_error_t err;
    ck_assert_msg(
        forward_part(&(ag_i_fwd_t){&view, Q - lo * HD, w->K, w->V, w->H, w->d, NULL, M - lo * HD,
                                   &(kext_t){.lse = lse - lo * w->H}},
                     lo, hi, 0, w->N, layout(&w->nb), &err) == AG_OK,
        "%s", err.msg);
    ck_assert_msg(!memcmp(M, w->M + lo * HD, (size_t)(n * HD) * sizeof(float)),
                  "M of destinations %lld..%lld differs from the whole run's", (long long)lo,
                  (long long)hi - 1);
    ck_assert(!memcmp(lse, w->lse + lo * w->H, (size_t)(n * w->H) * sizeof(float)));
    free(edge_ptr), free(run_ptr), free(Q), free(M), free(lse);
}

START_TEST(part_matches_whole)
{
    static const struct {
        const char *spec;
        int64_t N, H, d;
    } cases[] = {
        {"causal", 700, 2, 24},               /* tiled, wide blocks */
        {"window:40", 650, 1, 33},            /* tiled, narrow blocks */
        {"random:9,3+window:2", 500, 2, 16},  /* gather */
        {"bigbird:32,1,1,1", 700, 2, 16},     /* blocks, wide groups */
        {"window:30+global:3", 650, 1, 33},   /* blocks, narrow groups */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        whole_t w;
        whole_init(&w, cases[c].spec, cases[c].N, cases[c].H, cases[c].d);
        const int64_t cuts[][2] = {{0, 192}, {192, 448}, {448, w.N}, {0, w.N}, {w.N, w.N}};
        for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++)
            check_part(&w, cuts[k][0], cuts[k][1]);
        whole_free(&w);
    }
}
END_TEST

/* Every score kind on destinations lo..hi-1 with only the part's rows of Q and
   the window of K and V rows it reads present (each in its own buffer, so a
   read outside them is caught under ASan), against the whole graph's call. */
static void check_part_score(const whole_t *w, const ag_score_t *sc, const float *M_whole,
                             int64_t lo, int64_t hi)
{
    const int64_t n = hi - lo, HD = w->HD;
    int64_t klo = w->N, khi = 0;
    for (int64_t i = lo; i < hi; i++)
        for (int64_t r = w->nb.run_ptr[i]; r < w->nb.run_ptr[i + 1]; r++) {
            klo = w->nb.run_src[r] < klo ? w->nb.run_src[r] : klo;
            khi = w->nb.run_src[r] + w->nb.run_len[r] > khi ? w->nb.run_src[r] + w->nb.run_len[r]
                                                            : khi;
        }
    if (klo > khi)
        klo = khi = 0;
    int64_t *edge_ptr, *run_ptr;
    ag_nbhd_t view = part_view(&w->nb, lo, hi, &edge_ptr, &run_ptr);
    const size_t qb = (size_t)((n ? n : 1) * HD) * sizeof(float);
    const size_t kb = (size_t)((khi > klo ? khi - klo : 1) * HD) * sizeof(float);
    float *Q = malloc(qb), *M = malloc(qb), *K = malloc(kb), *V = malloc(kb);
    memcpy(Q, w->Q + lo * HD, (size_t)(n * HD) * sizeof(float));
    memcpy(K, w->K + klo * HD, (size_t)((khi - klo) * HD) * sizeof(float));
    memcpy(V, w->V + klo * HD, (size_t)((khi - klo) * HD) * sizeof(float));
    ag_score_t part_sc = *sc;   /* the bias of the part's slots, from its first */
    if (sc->edge_bias)
        part_sc.edge_bias = sc->edge_bias + w->nb.edge_ptr[lo];
    ag_error_t err;
    ck_assert_int_eq(forward_part(&(ag_i_fwd_t){&view, Q - lo * HD, K - klo * HD, V - klo * HD,
                                                w->H, w->d, &part_sc, M - lo * HD, NULL},
                                  lo, hi, klo, khi, layout(&w->nb), &err),
                     AG_OK);
    ck_assert_msg(!memcmp(M, M_whole + lo * HD, (size_t)(n * HD) * sizeof(float)),
                  "score kind %d: M of destinations %lld..%lld differs from the whole run's",
                  (int)sc->kind, (long long)lo, (long long)hi - 1);
    free(edge_ptr), free(run_ptr), free(Q), free(M), free(K), free(V);
}

/* n >= 5 scores from AG_SCORE_INIT: additive (a_src, a_dst), gatv2 (a_src),
   cosine, sigmoid, linear, then plain scaled-dot ones for the caller to vary. */
static void every_kind(ag_score_t *scores, int n, const float *a_src, const float *a_dst)
{
    for (int k = 0; k < n; k++)
        scores[k] = (ag_score_t)AG_SCORE_INIT;
    scores[0].kind = AG_SCORE_ADDITIVE, scores[0].a_src = a_src, scores[0].a_dst = a_dst;
    scores[1].kind = AG_SCORE_GATV2, scores[1].a_src = a_src;
    scores[2].kind = AG_SCORE_COSINE;
    scores[3].kind = AG_SCORE_SIGMOID;
    scores[4].kind = AG_SCORE_LINEAR;
}

START_TEST(part_matches_whole_any_score)
{
    whole_t w;
    whole_init(&w, "random:6,3+window:20", 400, 2, 8);
    const int64_t HD = w.HD, E = w.nb.n_edges;
    float *a_src = malloc((size_t)HD * sizeof(float)), *a_dst = malloc((size_t)HD * sizeof(float));
    float *bias = malloc((size_t)E * sizeof(float));
    float *M = malloc((size_t)(w.N * HD) * sizeof(float));
    fill_uniform(a_src, HD, 4, 1.0f);
    fill_uniform(a_dst, HD, 5, 1.0f);
    fill_uniform(bias, E, 6, 1.0f);
    ag_score_t scores[9];
    every_kind(scores, 9, a_src, a_dst);
    scores[5].softcap = 2.0f;
    scores[6].alibi = 1;
    scores[7].edge_bias = bias;
    scores[8].kind = AG_SCORE_DOT;   /* plain: the fused kernels */
    for (int k = 0; k < 9; k++) {
        ag_error_t err;
        ck_assert_int_eq(ag_attention(&w.nb, w.Q, w.K, w.V, w.H, w.d, &scores[k], M, &err), AG_OK);
        const int64_t cuts[][2] = {{0, 64}, {64, 200}, {200, w.N}, {0, w.N}, {w.N, w.N}};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++)
            check_part_score(&w, &scores[k], M, cuts[c][0], cuts[c][1]);
    }
    free(a_src), free(a_dst), free(bias), free(M);
    whole_free(&w);
}
END_TEST

/* The streamed tiled forward for destinations lo..hi-1, fed windows of `step`
   source rows (each starting 64 rows before the last ended, as the ring does). */
static void check_stream(const whole_t *w, int64_t lo, int64_t hi, int64_t step)
{
    const int64_t HD = w->HD;
    ag_tiled_stream_t *st;
    ag_error_t err;
    const float scale = 1.0f / sqrtf((float)w->d);
    ck_assert_int_eq(ag_i_tiled_stream_begin(&st, &w->nb, lo, hi, w->Q, w->H, w->d, scale,
                                             &err), AG_OK);
    /* each window in its own buffer: rows outside it are not readable */
    for (int64_t a = 0, b = 0; b < w->N; a = b - 64 > 0 ? b - 64 : 0) {
        b = a + step < w->N ? a + step : w->N;
        float *K = malloc((size_t)((b - a) * HD) * sizeof(float));
        float *V = malloc((size_t)((b - a) * HD) * sizeof(float));
        memcpy(K, w->K + a * HD, (size_t)((b - a) * HD) * sizeof(float));
        memcpy(V, w->V + a * HD, (size_t)((b - a) * HD) * sizeof(float));
        const int64_t first = ag_i_tiled_stream_first(st);
        ck_assert(first == INT64_MAX || first >= a);
        ag_i_tiled_stream_feed(st, K - a * HD, V - a * HD, b);
        free(K), free(V);
    }
    ck_assert(ag_i_tiled_stream_first(st) == INT64_MAX);
    float *M = malloc((size_t)(w->N * HD) * sizeof(float));
    float *lse = malloc((size_t)(w->N * w->H) * sizeof(float));
    ag_i_tiled_stream_end(st, M, lse);
    ag_i_tiled_stream_free(st);
    ck_assert_msg(!memcmp(M + lo * HD, w->M + lo * HD, (size_t)((hi - lo) * HD) * sizeof(float)),
                  "streamed M (windows of %lld) differs", (long long)step);
    ck_assert(!memcmp(lse + lo * w->H, w->lse + lo * w->H,
                      (size_t)((hi - lo) * w->H) * sizeof(float)));
    free(M), free(lse);
}

START_TEST(stream_matches_whole)
{
    static const struct {
        const char *spec;
        int64_t N, H, d;
    } cases[] = {
        {"causal", 700, 2, 24}, {"window:100", 900, 1, 40}, {"prefix:70", 500, 2, 16},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        whole_t w;
        whole_init(&w, cases[c].spec, cases[c].N, cases[c].H, cases[c].d);
        ck_assert(w.nb.n_edges / w.N >= 16);   /* the whole run took the tiled kernel */
        const int64_t steps[] = {100, 129, 256, 10000};
        for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
            check_stream(&w, 0, w.N, steps[k]);
            check_stream(&w, 256, w.N, steps[k]);
            check_stream(&w, 64, 320, steps[k]);
        }
        whole_free(&w);
    }
    /* blocks whose first sources are out of order: each starts when a window
       reaches it and none is left unfinished */
    whole_t w;
    scattered_runs_init(&w, 800, 40, 2, 16);
    ck_assert(w.nb.n_edges / w.N >= 16 && ag_i_one_run(&w.nb, 0, w.N));
    const int64_t steps[] = {100, 129, 10000};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        check_stream(&w, 0, w.N, steps[k]);
        check_stream(&w, 320, 640, steps[k]);
    }
    whole_free(&w);
}
END_TEST

/* ---- the backward on a part ---- */

/* A copy of rows [a, b) of X (width c) holding only the rows `keep` marks
   (others zero), as an array indexed by global row (offset pointer). */
static float *rows_copy(const float *X, int64_t c, int64_t a, int64_t b, const char *keep,
                        float **base)
{
    *base = calloc((size_t)((b > a ? b - a : 1) * c), sizeof(float));
    for (int64_t i = a; i < b; i++)
        if (keep[i])
            memcpy(*base + (i - a) * c, X + i * c, (size_t)c * sizeof(float));
    return *base - a * c;
}

typedef struct {
    float *dM, *Dd, *dQ, *dK, *dV;
} whole_grads_t;

static void whole_backward(whole_t *w, whole_grads_t *g)
{
    const int64_t N = w->N, HD = w->HD;
    g->dM = malloc((size_t)(N * HD) * sizeof(float));
    g->Dd = malloc((size_t)(N * w->H) * sizeof(float));
    g->dQ = malloc((size_t)(N * HD) * sizeof(float));
    g->dK = malloc((size_t)(N * HD) * sizeof(float));
    g->dV = malloc((size_t)(N * HD) * sizeof(float));
    fill_uniform(g->dM, N * HD, 4, 1.0f);
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < w->H; h++) {
            float s = 0;
            for (int64_t c = 0; c < w->d; c++)
                s += g->dM[i * HD + h * w->d + c] * w->M[i * HD + h * w->d + c];
            g->Dd[i * w->H + h] = s;
        }
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_transpose(&w->nb, &err), AG_OK);
    const ag_i_bwd_t op = {&w->nb, w->Q, w->K, w->V, g->dM, w->H, w->d,
                           AG_I_DOT_SCORE(1.0f / sqrtf((float)w->d)), w->lse, g->Dd,
                           {.dQ = g->dQ, .dK = g->dK, .dV = g->dV}};
    ck_assert_int_eq(ag_i_backward_with(AG_I_KERNEL_AUTO, &op, &err), AG_OK);
}

/* What a process holding destinations and sources lo..hi-1 has for the
   backward: its destinations' runs, the other destinations' runs clipped to
   its sources (bp), and only the rows those read of Q, K, V, dM, lse and D
   (offset pointers indexed by global row, the other rows zero). */
typedef struct {
    ag_nbhd_t own;
    ag_i_back_part_t bp;
    int64_t ka, kb;   /* the K and V rows held: the span of the sources read, widened to 8 */
    const float *Q, *K, *V, *dM, *lse, *Dd;
    float *bufs[6];
    int64_t *dst, *src, *len;
} held_t;

static void held_init(held_t *p, const whole_t *w, const whole_grads_t *g, int64_t lo,
                      int64_t hi)
{
    const ag_nbhd_t *nb = &w->nb;
    const int64_t N = w->N, HD = w->HD, H = w->H, n = hi - lo;
    memset(p, 0, sizeof *p);
    p->own.n_nodes = n, p->own.n_runs = nb->run_ptr[hi] - nb->run_ptr[lo];
    p->own.edge_ptr = malloc((size_t)(n + 1) * sizeof(int64_t));
    p->own.run_ptr = malloc((size_t)(n + 1) * sizeof(int64_t));
    for (int64_t i = 0; i <= n; i++)
        p->own.edge_ptr[i] = nb->edge_ptr[lo + i] - nb->edge_ptr[lo],
        p->own.run_ptr[i] = nb->run_ptr[lo + i] - nb->run_ptr[lo];
    p->own.run_src = nb->run_src + nb->run_ptr[lo];
    p->own.run_len = nb->run_len + nb->run_ptr[lo];
    /* the other destinations' runs on sources lo..hi-1; which rows are held */
    p->dst = malloc((size_t)(nb->n_runs + 1) * sizeof(int64_t));
    p->src = malloc((size_t)(nb->n_runs + 1) * sizeof(int64_t));
    p->len = malloc((size_t)(nb->n_runs + 1) * sizeof(int64_t));
    int64_t m = 0;
    char *dest_held = calloc((size_t)N, 1), *src_held = calloc((size_t)N, 1);
    for (int64_t i = 0; i < N; i++)
        for (int64_t r = nb->run_ptr[i]; r < nb->run_ptr[i + 1]; r++) {
            const int64_t a = nb->run_src[r], b = a + nb->run_len[r];
            if (i >= lo && i < hi) {
                dest_held[i] = 1;
                for (int64_t j = a; j < b; j++)
                    src_held[j] = 1;
                continue;
            }
            const int64_t ca = a < lo ? lo : a, cb = b > hi ? hi : b;
            if (cb > ca)
                p->dst[m] = i, p->src[m] = ca, p->len[m++] = cb - ca, dest_held[i] = 1;
        }
    for (int64_t j = lo; j < hi; j++)
        src_held[j] = 1;
    ag_error_t err;
    ck_assert_int_eq(ag_i_back_part_init(&p->bp, N, nb->n_edges, lo, hi, &p->own, m, p->dst,
                                         p->src, p->len, &err), AG_OK);
    int64_t ka = lo, kb = hi;
    for (int64_t j = 0; j < N; j++)
        if (src_held[j])
            ka = j < ka ? j : ka, kb = j + 1 > kb ? j + 1 : kb;
    ka -= ka % 8, kb = kb + (8 - kb % 8) % 8 > N ? N : kb + (8 - kb % 8) % 8;
    p->ka = ka, p->kb = kb;
    p->K = rows_copy(w->K, HD, ka, kb, src_held, &p->bufs[0]);
    p->V = rows_copy(w->V, HD, ka, kb, src_held, &p->bufs[1]);
    p->Q = rows_copy(w->Q, HD, p->bp.dlo, p->bp.dhi, dest_held, &p->bufs[2]);
    p->dM = rows_copy(g->dM, HD, p->bp.dlo, p->bp.dhi, dest_held, &p->bufs[3]);
    p->lse = rows_copy(w->lse, H, p->bp.dlo, p->bp.dhi, dest_held, &p->bufs[4]);
    p->Dd = rows_copy(g->Dd, H, p->bp.dlo, p->bp.dhi, dest_held, &p->bufs[5]);
    free(dest_held), free(src_held);
}

static void held_free(held_t *p)
{
    for (int k = 0; k < 6; k++)
        free(p->bufs[k]);
    free(p->dst), free(p->src), free(p->len), free(p->own.edge_ptr), free(p->own.run_ptr);
    ag_i_back_part_destroy(&p->bp);
}

/* Rows lo..hi-1 of dQ, dK and dV [n, HD] against the whole's, bitwise. */
static void same_rows(const whole_grads_t *g, const float *dQ, const float *dK, const float *dV,
                      int64_t lo, int64_t hi, int64_t HD, const char *what)
{
    const size_t bytes = (size_t)((hi - lo) * HD) * sizeof(float);
    ck_assert_msg(!memcmp(dQ, g->dQ + lo * HD, bytes), "%s: dQ of %lld..%lld differs", what,
                  (long long)lo, (long long)hi - 1);
    ck_assert_msg(!memcmp(dK, g->dK + lo * HD, bytes), "%s: dK of %lld..%lld differs", what,
                  (long long)lo, (long long)hi - 1);
    ck_assert_msg(!memcmp(dV, g->dV + lo * HD, bytes), "%s: dV of %lld..%lld differs", what,
                  (long long)lo, (long long)hi - 1);
}

/* Part lo..hi-1's backward from what a process holds. */
static void check_back_part(const whole_t *w, const whole_grads_t *g, int64_t lo, int64_t hi)
{
    const int64_t HD = w->HD, H = w->H, n = hi - lo;
    held_t p;
    held_init(&p, w, g, lo, hi);
    float *dQ = malloc((size_t)((n ? n : 1) * HD) * sizeof(float));
    float *dK = malloc((size_t)((n ? n : 1) * HD) * sizeof(float));
    float *dV = malloc((size_t)((n ? n : 1) * HD) * sizeof(float));
    const ag_i_bwd_t op = {&p.bp.view, p.Q, p.K, p.V, p.dM, H, w->d,
                           AG_I_DOT_SCORE(1.0f / sqrtf((float)w->d)), p.lse, p.Dd,
                           {.dQ = dQ - lo * HD, .dK = dK - lo * HD, .dV = dV - lo * HD}};
    ag_error_t err;
    ck_assert_int_eq(backward_part(&op, lo, hi, lo, hi, layout(&w->nb), &err), AG_OK);
    same_rows(g, dQ, dK, dV, lo, hi, HD, "plain");
    free(dQ), free(dK), free(dV);
    held_free(&p);
}

START_TEST(backward_part_matches_whole)
{
    static const struct {
        const char *spec;
        int64_t N, H, d;
    } cases[] = {
        {"causal", 700, 2, 24},               /* tiled, wide blocks */
        {"window:40", 650, 1, 33},            /* tiled, narrow blocks */
        {"random:9,3+window:2", 500, 2, 16},  /* gather */
        {"random:20,5", 520, 1, 16},          /* gather, multi-edges */
        {"bigbird:32,1,1,1", 700, 2, 16},     /* blocks, wide groups */
        {"window:30+global:3", 650, 1, 33},   /* blocks, narrow groups */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        whole_t w;
        whole_grads_t g;
        whole_init(&w, cases[c].spec, cases[c].N, cases[c].H, cases[c].d);
        whole_backward(&w, &g);
        const int64_t cuts[][2] = {{0, 192}, {192, 448}, {448, w.N}, {0, w.N}, {w.N, w.N}};
        for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++)
            check_back_part(&w, &g, cuts[k][0], cuts[k][1]);
        free(g.dM), free(g.Dd), free(g.dQ), free(g.dK), free(g.dV);
        whole_free(&w);
    }
}
END_TEST

/* The generic kernel's backward on parts, as the MPI layer runs it: pass 0
   on every part (each writes its destinations' states into one array, where
   the exchange would bring them), then pass 1 on every part. Every row of dQ,
   dK and dV, and the attention vectors' gradients (the parts' chunk partials
   added in order), bitwise the whole graph's, for every score function. */
START_TEST(generic_backward_parts_match_whole)
{
    whole_t w;
    whole_grads_t g;
    whole_init(&w, "random:9,3+window:2", 520, 2, 8);
    whole_backward(&w, &g);   /* dM, D; the transpose */
    const int64_t N = w.N, HD = w.HD, H = w.H, S = H * AG_I_GENERIC_STATE;
    float a_src[16], a_dst[16], da_src[16], da_dst[16], sum[16];
    fill_uniform(a_src, HD, 7, 1.0f);
    fill_uniform(a_dst, HD, 8, 1.0f);
    ag_score_t scores[6];
    every_kind(scores, 6, a_src, a_dst);
    scores[5].softcap = 2.0f, scores[5].alibi = 1;
    /* parts start at multiples of 16; the last has no rows, past N = 520 (not one) */
    const int64_t cuts[] = {0, 192, 448, N, N};
    enum { P = 4 };
    held_t parts[P];
    for (int k = 0; k < P; k++)
        held_init(&parts[k], &w, &g, cuts[k], cuts[k + 1]);
    float *state = calloc((size_t)(N * S), sizeof(float));
    float *chunks = malloc((size_t)(ag_i_generic_chunks(0, N) * HD) * sizeof(float));
    ag_error_t err;
    for (int s = 0; s < 6; s++) {
        const ag_score_t *sc = &scores[s];
        const int gat = sc->kind == AG_SCORE_ADDITIVE || sc->kind == AG_SCORE_GATV2;
        const int additive = sc->kind == AG_SCORE_ADDITIVE;
        const ag_attention_grads_t whole = {.dQ = g.dQ, .dK = g.dK, .dV = g.dV,
                                            .d_a_src = gat ? da_src : NULL,
                                            .d_a_dst = additive ? da_dst : NULL};
        ck_assert_int_eq(ag_attention_backward(&w.nb, w.Q, w.K, w.V, H, w.d, sc, NULL, NULL,
                                               g.dM, &whole, &err), AG_OK);
        ag_i_plan_t plans[P];
        ag_i_bwd_t ops[P];
        for (int k = 0; k < P; k++) {
            const held_t *p = &parts[k];
            ck_assert_int_eq(ag_i_plan_generic_part(&plans[k], &p->bp.view, H, w.d, sc, cuts[k],
                                                    cuts[k + 1], p->bp.dlo, p->bp.dhi, p->ka,
                                                    p->kb, &err), AG_OK);
            /* each part's rows of dQ, dK, dV in an array of their own */
            const int64_t n = cuts[k + 1] - cuts[k];
            float *mine = malloc((size_t)(3 * n * HD + 1) * sizeof(float));
            ops[k] = (ag_i_bwd_t){&p->bp.view, p->Q, p->K, p->V, p->dM, H, w.d, sc, NULL, NULL,
                                  {.dQ = mine - cuts[k] * HD, .dK = mine + (n - cuts[k]) * HD,
                                   .dV = mine + (2 * n - cuts[k]) * HD}};
        }
        for (int pass = 0; pass < 2; pass++) {
            const int wants = pass == 0 ? gat : sc->kind == AG_SCORE_ADDITIVE;
            for (int k = 0; k < P; k++)
                ag_i_generic_backward_pass(&plans[k], &ops[k], pass, state,
                                           wants ? chunks + ag_i_generic_chunks(0, cuts[k]) * HD
                                                 : NULL);
            if (!wants)
                continue;
            memset(sum, 0, sizeof sum);
            for (int64_t c = 0; c < ag_i_generic_chunks(0, N); c++)
                for (int64_t x = 0; x < HD; x++)
                    sum[x] += chunks[c * HD + x];
            const float *want = pass == 1 || sc->kind == AG_SCORE_GATV2 ? da_src : da_dst;
            ck_assert_msg(!memcmp(sum, want, (size_t)HD * sizeof(float)),
                          "score %d: pass %d's vector gradient differs from the whole's", s, pass);
        }
        for (int k = 0; k < P; k++) {
            const int64_t lo = cuts[k], n = cuts[k + 1] - lo;
            float *mine = ops[k].g.dQ + lo * HD;
            same_rows(&g, mine, mine + n * HD, mine + 2 * n * HD, lo, cuts[k + 1], HD, "generic");
            free(mine);
            ag_i_plan_free(&plans[k]);
        }
    }
    /* a part must start on a chunk */
    ck_assert_fails_with(ag_i_plan_generic_part(&(ag_i_plan_t){0}, &parts[1].bp.view, H, w.d,
                                                &scores[2], 100, 448, parts[1].bp.dlo,
                                                parts[1].bp.dhi, parts[1].ka, parts[1].kb, &err),
                         err, AG_EINVAL, "not a multiple of 16");
    for (int k = 0; k < P; k++)
        held_free(&parts[k]);
    free(state), free(chunks);
    free(g.dM), free(g.Dd), free(g.dQ), free(g.dK), free(g.dV);
    whole_free(&w);
}
END_TEST

/* ---- sums over rows split into parts ---- */

/* A reducer that only collects each part's chunk partials, in call order. */
typedef struct {
    float *f;
    int64_t nf;
} collect_t;

static int collect_f(const ag_i_reducer_t *r, float *G, const float *part, int64_t chunks,
                     int64_t width, ag_error_t *err)
{
    (void)G, (void)err;
    collect_t *c = r->ctx;
    memcpy(c->f + c->nf, part, (size_t)(chunks * width) * sizeof(float));
    c->nf += chunks * width;
    return AG_OK;
}

START_TEST(weight_gradient_chunks_of_parts)
{
    /* parts cut at chunk boundaries, their chunks added in order: the whole's sum */
    const int64_t N = 3000, a = 12, b = 20, cuts[] = {0, 1024, 1024, 3000};
    float *A = malloc((size_t)(N * a) * sizeof(float)), *B = malloc((size_t)(N * b) * sizeof(float));
    fill_uniform(A, N * a, 5, 1.0f), fill_uniform(B, N * b, 6, 1.0f);
    float G[12 * 20], H[12 * 20];
    fill_uniform(G, a * b, 7, 1.0f);   /* a gradient already holding a round's sum */
    memcpy(H, G, sizeof G);
    ag_error_t err;
    ck_assert_int_eq(ag_i_gemm_atb(G, A, B, N, a, b, &err), AG_OK);
    collect_t c = {malloc((size_t)(3 * a * b) * sizeof(float)), 0};
    const ag_i_reducer_t r = {collect_f, NULL, NULL, &c, 1};
    for (int p = 0; p < 3; p++)
        ck_assert_int_eq(ag_i_gemm_atb_r(&r, NULL, A + cuts[p] * a, B + cuts[p] * b,
                                         cuts[p + 1] - cuts[p], a, b, &err), AG_OK);
    ck_assert_int_eq(c.nf, 3 * a * b);
    for (int64_t k = 0; k < 3; k++)
        for (int64_t x = 0; x < a * b; x++)
            H[x] += c.f[k * a * b + x];
    ck_assert(!memcmp(G, H, sizeof G));
    free(A), free(B), free(c.f);
}
END_TEST

Suite *part_suite(void)
{
    Suite *s = suite_create("part");
    TCase *t = tcase_create("part");
    tcase_set_timeout(t, 20);
    tcase_add_test(t, part_matches_whole);
    tcase_add_test(t, part_matches_whole_any_score);
    tcase_add_test(t, stream_matches_whole);
    tcase_add_test(t, backward_part_matches_whole);
    tcase_add_test(t, generic_backward_parts_match_whole);
    tcase_add_test(t, weight_gradient_chunks_of_parts);
    suite_add_tcase(s, t);
    return s;
}
