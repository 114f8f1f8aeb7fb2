/*
 * Attention from CSR arrays alone, as a PyG or DGL user has them: this program
 * includes <attngraph/core.h> only, so it builds without igraph's headers
 * (`make check` compiles it with nothing but the installed include folder on
 * the path). It checks its own results: each destination's weights sum to 1,
 * and node 3's weights and message equal the ones worked out by hand below.
 */
#include <math.h>
#include <stdio.h>

#include <attngraph/core.h>

/* Four nodes; in-neighbours of each destination, sources ascending:
   0 <- 1;  1 <- 0, 2;  2 <- (none);  3 <- 0, 1, 2. */
#define N 4
#define E 6
static const int64_t indptr[N + 1] = {0, 1, 3, 3, 6};
static const int64_t indices[E] = {1, 0, 2, 0, 1, 2};

/* One head of width 2, score q.k (AG_SCORE_DOT). Node 3's query (1, 0) meets
   keys whose first components are 0, ln 2 and 0: scores 0, ln 2, 0, so softmax
   gives 1/4, 1/2, 1/4, and its message is (4,0)/4 + (0,8)/2 + (8,4)/4 = (3, 5). */
#define H 1
#define D 2
static const float Q[N * D] = {0.5f, 1, -1, 2, 0, 0, 1, 0};
static const float K[N * D] = {0, 1, 0.69314718f, 0, 0, -3, 2, 2};
static const float V[N * D] = {4, 0, 0, 8, 8, 4, 1, 1};
static const float hand_weights[3] = {0.25f, 0.5f, 0.25f};
static const float hand_message[D] = {3, 5};

static int fail(const ag_error_t *err)
{
    fprintf(stderr, "%s\n", err->msg);
    return 1;
}

int main(void)
{
    ag_error_t err;
    ag_nbhd_t nb;
    if (ag_nbhd_from_csr(&nb, N, indptr, indices, &err))
        return fail(&err);
    ag_score_t score;
    ag_score_init(&score, AG_SCORE_DOT);
    float W[E * H], M[N * D];
    if (ag_attention_weights(&nb, Q, K, H, D, &score, 0, N, W, &err) ||
        ag_attention(&nb, Q, K, V, H, D, &score, M, &err)) {
        ag_nbhd_destroy(&nb);
        return fail(&err);
    }
    int bad = 0;
    for (int64_t i = 0; i < N; i++) {
        double sum = 0;
        for (int64_t s = nb.edge_ptr[i]; s < nb.edge_ptr[i + 1]; s++)
            sum += W[s];
        const int has_edges = nb.edge_ptr[i + 1] > nb.edge_ptr[i];
        /* a node without in-edges has no weights and a zero message */
        const int ok = has_edges ? fabs(sum - 1) < 1e-6 : M[i * D] == 0 && M[i * D + 1] == 0;
        printf("node %lld: %lld in-edges, weights sum to %.6f %s\n", (long long)i,
               (long long)(nb.edge_ptr[i + 1] - nb.edge_ptr[i]), sum, ok ? "ok" : "WRONG");
        bad |= !ok;
    }
    const float *w3 = W + nb.edge_ptr[3];
    int hand_ok = 1;
    for (int k = 0; k < 3; k++)
        hand_ok &= fabsf(w3[k] - hand_weights[k]) <= 1e-6f;
    for (int c = 0; c < D; c++)
        hand_ok &= fabsf(M[3 * D + c] - hand_message[c]) <= 1e-5f;
    printf("node 3: weights %.6f %.6f %.6f, message (%.5f, %.5f); by hand %g %g %g, (%g, %g): %s\n",
           w3[0], w3[1], w3[2], M[3 * D], M[3 * D + 1], hand_weights[0], hand_weights[1],
           hand_weights[2], hand_message[0], hand_message[1], hand_ok ? "ok" : "WRONG");
    ag_nbhd_destroy(&nb);
    return bad || !hand_ok;
}
