/*
 * CSR neighbourhoods and the kernels, as `attngraph run --csr` feeds them:
 * ag_nbhd_from_csr, ag_nbhd_self_loops, then attention with every score kind
 * on tiny Q/K/V, weights, statistics and the edge order.
 * Bytes: N-1 (low 4 bits), self mode, score kind, H and d, flags; then N+1
 * indptr values and the indices (one byte each, as signed numbers, so
 * negative and out-of-range values come easily; a 0xff byte followed by 8
 * bytes gives a full int64), then Q, K, V and bias values from the rest.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attngraph.h"
#include "fuzz_common.h"

#define MAX_N 16
#define MAX_IDX 256

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_setup();
    return 0;
}

static int64_t next_value(fuzz_bytes_t *b)
{
    uint8_t c = fuzz_u8(b);
    if (c != 0xff)
        return (int8_t)c;
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v |= (uint64_t)fuzz_u8(b) << (8 * k);
    return (int64_t)v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes_t b = {data, size};
    int64_t N = 1 + (fuzz_u8(&b) & 15);
    ag_self_loops_t self = (ag_self_loops_t)(fuzz_u8(&b) % 3);
    uint8_t kind = fuzz_u8(&b) % 7;
    uint8_t hd = fuzz_u8(&b);
    int64_t H = 1 + (hd & 3), d = 1 + ((hd >> 2) & 3);
    uint8_t flags = fuzz_u8(&b);
    int64_t indptr[MAX_N + 1], indices[MAX_IDX];
    for (int64_t i = 0; i <= N; i++)
        indptr[i] = next_value(&b);
    /* as many indices as indptr[N] says, when that is sane; else what is there */
    int64_t E = indptr[N] >= 0 && indptr[N] <= MAX_IDX ? indptr[N] : 0;
    for (int64_t k = 0; k < E; k++)
        indices[k] = next_value(&b);
    int64_t *idx = malloc((size_t)(E ? E : 1) * sizeof *idx);   /* exact: ASan sees overreads */
    memcpy(idx, indices, (size_t)E * sizeof *idx);

    ag_error_t err;
    ag_nbhd_t nb;
    int rc = ag_nbhd_from_csr(&nb, N, indptr, idx, &err);
    free(idx);
    if (rc != AG_OK)
        return 0;
    if (ag_nbhd_self_loops(&nb, self, &err) != AG_OK) {
        ag_nbhd_destroy(&nb);
        return 0;
    }
    int64_t HD = H * d, En = nb.n_edges;
    size_t qkv = (size_t)(N * HD);
    float *Q = calloc(qkv, sizeof(float)), *K = calloc(qkv, sizeof(float));
    float *V = calloc(qkv, sizeof(float)), *Mo = calloc(qkv, sizeof(float));
    float *bias = calloc((size_t)(En ? En : 1), sizeof(float));
    float *vec = calloc((size_t)(2 * HD), sizeof(float));
    float *W = calloc((size_t)((En ? En : 1) * H), sizeof(float));
    double *ent = calloc((size_t)N, sizeof(double)), *dist = calloc((size_t)N, sizeof(double));
    double *mw = calloc((size_t)N, sizeof(double));
    float *all[] = {Q, K, V, vec};
    size_t lens[] = {qkv, qkv, qkv, (size_t)(2 * HD)};
    for (int a = 0; a < 4; a++)
        for (size_t k = 0; k < lens[a]; k++)   /* small values, some large, none NaN */
            all[a][k] = (float)(int8_t)fuzz_u8(&b) * ((flags & 1) ? 8.0f : 0.125f);
    for (int64_t s = 0; s < En; s++)
        bias[s] = (float)(int8_t)fuzz_u8(&b) * 0.5f;

    ag_score_t score;
    ag_score_init(&score, (ag_score_kind_t)kind);
    if (flags & 2)
        score.beta = (flags & 32) ? 0.0f : 4.0f;
    score.softcap = (flags & 4) ? 5.0f : 0.0f;
    score.alibi = (flags >> 3) & 1;
    score.edge_bias = (flags & 16) ? bias : NULL;
    if (kind == AG_SCORE_ADDITIVE)
        score.a_src = vec, score.a_dst = vec + HD;
    if (kind == AG_SCORE_GATV2)
        score.a_src = vec;
    if (kind == AG_SCORE_SIGMOID && (flags & 32))
        score.has_sigmoid_bias = 1, score.sigmoid_bias = -1.0f;
    if (kind == AG_SCORE_LINEAR)
        score.beta = score.softcap = 0, score.edge_bias = NULL, score.alibi = 0;
    if (kind == AG_SCORE_SIGMOID)
        score.beta = score.softcap = 0;

    if (ag_score_check(&score, &nb, H, d, &err) == AG_OK &&
        ag_attention(&nb, Q, K, V, H, d, &score, Mo, &err) == AG_OK) {
        for (size_t k = 0; k < qkv; k++)
            if (isnan(Mo[k]))
                abort();   /* finite inputs gave NaN */
        int64_t lo = (flags >> 6) % (N + 1);
        ag_attention_weights(&nb, Q, K, H, d, &score, lo, N, W, &err);
        ag_attention_stats(&nb, Q, K, H, d, &score, ent, dist, mw, &err);
    }
    ag_edge_msg_t *msgs = NULL;
    int64_t *slot = NULL;
    ag_edge_order(&nb, &msgs, &slot, &err);
    free(msgs), free(slot);
    free(Q), free(K), free(V), free(Mo), free(bias), free(vec), free(W);
    free(ent), free(dist), free(mw);
    ag_nbhd_destroy(&nb);
    return 0;
}
