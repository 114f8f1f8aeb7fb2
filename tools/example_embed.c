/*
 * Embedding attngraph in your own code, two ways. With a graph alone: load it,
 * run two message rounds with random weights and cosine scores, and read the
 * per-edge attention of the last round in the graph's edge order. With a
 * graph, a model folder (`attngraph train --model FILE --save DIR`) and the
 * nodes' features: load the model and predict every node's class, three calls
 * of the library. Built and run both ways by `make check`.
 */
#include <stdio.h>
#include <stdlib.h>

#include <attngraph.h>

/* example_embed GRAPH DIR FEATURES.npy: the classes a trained model predicts. */
static int predict(const char *path, const char *dir, const char *features)
{
    ag_error_t err;
    igraph_t graph;
    ag_nbhd_t nb;
    ag_array_t X;
    if (ag_graph_load(&graph, path, NULL, &err) || ag_nbhd_from_graph(&nb, &graph, &err) ||
        ag_array_read_npy(&X, features, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const int64_t N = nb.n_nodes;
    int64_t *classes = malloc(N * sizeof *classes);
    ag_model_t model;                                /* the three calls */
    if (ag_model_load(&model, dir, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (X.ndim != 2 || X.shape[0] != N || X.shape[1] != model.D) {   /* the model's width */
        fprintf(stderr, "%s: expected [%lld, %lld] features: a row of width %lld a node\n",
                features, (long long)N, (long long)model.D, (long long)model.D);
        return 1;
    }
    if (ag_model_predict(&model, &nb, X.data, NULL, classes, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("%s: %d layers, %s scores; node 0 is class %lld", dir, model.spec.n_layers,
           ag_score_kind_name(model.spec.score.kind), (long long)classes[0]);
    for (int64_t i = 1; i < N && i < 8; i++)
        printf(", node %lld %lld", (long long)i, (long long)classes[i]);
    printf(", ...\n");
    ag_model_destroy(&model);
    free(classes);
    ag_array_destroy(&X);
    ag_nbhd_destroy(&nb);
    igraph_destroy(&graph);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4)
        return predict(argv[1], argv[2], argv[3]);
    ag_error_t err;
    const char *path = argc > 1 ? argv[1] : "graphs/sentence.gml";
    igraph_t graph;
    ag_nbhd_t nb;
    ag_labels_t labels;
    if (ag_graph_load(&graph, path, NULL, &err) ||
        ag_labels_from_graph(&labels, &graph, &err) ||
        ag_nbhd_from_graph(&nb, &graph, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const int64_t N = nb.n_nodes, D = 8, H = 2, d = 4;

    float *X = malloc(N * D * sizeof *X);            /* node states [N, D] */
    ag_random_normal(X, N * D, 42, 0, 1.0f);
    ag_weights_t w;                                  /* one layer shared by all rounds */
    ag_workspace_t ws;
    ag_score_t score = AG_SCORE_INIT;                /* the defaults, then ours */
    score.kind = AG_SCORE_COSINE;
    score.beta = 4;
    ag_round_opts_t opts = AG_ROUND_OPTS_INIT;
    opts.score = &score;
    if (ag_weights_random(&w, D, H, d, 0, 42, &err) ||
        ag_workspace_init(&ws, N, H * d, D, &err) ||
        ag_rounds_run(&nb, &w, 1, X, 2, &opts, &ws, NULL, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }

    /* Per-edge weights of the last round, [E, H] by slot, then by edge id. */
    float *W = malloc(nb.n_edges * H * sizeof *W);
    ag_edge_msg_t *msgs;
    int64_t *slot;
    if (ag_attention_weights(&nb, ws.Q, ws.K, H, d, &score, 0, N, W, &err) ||
        ag_edge_order(&nb, &msgs, &slot, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    for (int64_t k = 0; k < nb.n_edges; k++)
        printf("edge %lld: %s -> %s  head 0: %.3f  head 1: %.3f\n", (long long)msgs[k].edge_id,
               labels.str[msgs[k].src], labels.str[msgs[k].dst], W[slot[k] * H],
               W[slot[k] * H + 1]);

    free(msgs), free(slot), free(W), free(X);
    ag_workspace_destroy(&ws);
    ag_weights_destroy(&w);
    ag_labels_destroy(&labels);
    ag_nbhd_destroy(&nb);
    igraph_destroy(&graph);
    return 0;
}
