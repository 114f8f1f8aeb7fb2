/*
 * The arrays of a layer (ag_weights_t): one table of what each is, so that
 * every loop over them (load, save, init, gradients, the optimizers' groups,
 * MPI's split parameters, Python's names) reads the same rows.
 */
#include <stddef.h>

#include "base/base.h"
#include "model/model.h"

/* How an array's shape follows from the layer's sizes (out: what the layer
   writes, ag_layer_width_out; F: the sublayer's width). Its fan-in is its last
   dimension. */
typedef enum {
    SHAPE_PROJ,    /* [H*d, D], or [N, H*d, D] per node */
    SHAPE_WO,      /* [D_out or D, H*d] */
    SHAPE_NORM,    /* [D] before the layer, [out] after it (post_norm) */
    SHAPE_HEADS,   /* [H, d] an attention vector */
    SHAPE_OUT,     /* [out] */
    SHAPE_W1,      /* [F, out] */
    SHAPE_F,       /* [F] */
    SHAPE_W2,      /* [out, F] */
    SHAPE_HD,      /* [H*d] */
    SHAPE_SKIP,    /* [out, D] */
    SHAPE_GATE,    /* [3 out] */
    SHAPE_EDGE,    /* [H*d, edge_dim] */
} shape_t;

typedef struct {
    ag_layer_array_t info;
    shape_t shape;
} row_t;

#define ROW(field, needs, init, decay, shape) \
    {{#field, offsetof(ag_weights_t, field), (needs), (init), (decay)}, (shape)}

#define NORMAL AG_INIT_NORMAL
#define ZEROS AG_INIT_ZEROS
#define ONES AG_INIT_ONES
enum {
    QKV = AG_LAYER_QKV, WO = AG_LAYER_WO, NORM = AG_LAYER_NORM, NORM_BIAS = AG_LAYER_NORM_BIAS,
    ADDITIVE = AG_LAYER_ADDITIVE, GATV2 = AG_LAYER_GATV2, BIAS = AG_LAYER_BIAS,
    FFN = AG_LAYER_FFN, QKV_BIAS = AG_LAYER_QKV_BIAS, SKIP = AG_LAYER_SKIP,
    GATE = AG_LAYER_GATE, EDGES = AG_LAYER_EDGES,
};

/* In ag_weights_t's order, which is the files' and the random streams' (a
   model file draws array k from a stream of k: new arrays go last). Decay:
   the arrays of two or more dimensions, nanoGPT's rule. */
static const row_t rows[AG_LAYER_ARRAYS] = {
    ROW(wq, 0, NORMAL, 1, SHAPE_PROJ),
    ROW(wk, QKV, NORMAL, 1, SHAPE_PROJ),
    ROW(wv, QKV, NORMAL, 1, SHAPE_PROJ),
    ROW(wo, WO, NORMAL, 1, SHAPE_WO),
    ROW(ln_weight, NORM, ONES, 0, SHAPE_NORM),
    ROW(ln_bias, NORM | NORM_BIAS, ZEROS, 0, SHAPE_NORM),
    ROW(attn_src, ADDITIVE, NORMAL, 1, SHAPE_HEADS),
    ROW(attn_dst, ADDITIVE, NORMAL, 1, SHAPE_HEADS),
    ROW(attn, GATV2, NORMAL, 1, SHAPE_HEADS),
    ROW(bias, BIAS, ZEROS, 0, SHAPE_OUT),
    ROW(w1, FFN, NORMAL, 1, SHAPE_W1),
    ROW(b1, FFN | BIAS, ZEROS, 0, SHAPE_F),
    ROW(w2, FFN, NORMAL, 1, SHAPE_W2),
    ROW(b2, FFN | BIAS, ZEROS, 0, SHAPE_OUT),
    ROW(ln2_weight, FFN | NORM, ONES, 0, SHAPE_OUT),
    ROW(ln2_bias, FFN | NORM | NORM_BIAS, ZEROS, 0, SHAPE_OUT),
    ROW(bq, QKV_BIAS, ZEROS, 0, SHAPE_HD),
    ROW(bk, QKV_BIAS | QKV, ZEROS, 0, SHAPE_HD),
    ROW(bv, QKV_BIAS | QKV, ZEROS, 0, SHAPE_HD),
    ROW(wskip, SKIP, NORMAL, 1, SHAPE_SKIP),
    ROW(bskip, SKIP | BIAS, ZEROS, 0, SHAPE_OUT),
    ROW(wbeta, SKIP | GATE, NORMAL, 0, SHAPE_GATE),
    ROW(wedge, EDGES, NORMAL, 1, SHAPE_EDGE),
    ROW(attn_edge, EDGES | ADDITIVE, NORMAL, 1, SHAPE_HEADS),
};

const ag_layer_array_t *ag_layer_array_info(int k)
{
    return k >= 0 && k < AG_LAYER_ARRAYS ? &rows[k].info : NULL;
}

float **ag_layer_array(ag_weights_t *w, int k)
{
    return k >= 0 && k < AG_LAYER_ARRAYS ? (float **)((char *)w + rows[k].info.offset) : NULL;
}

int ag_layer_has(unsigned features, int k)
{
    return k >= 0 && k < AG_LAYER_ARRAYS && (rows[k].info.needs & ~features) == 0;
}

int ag_layer_array_shape(const ag_weights_t *w, int k, int64_t shape[3])
{
    const int64_t HD = w->H * w->d, out = ag_layer_width_out(w);
    shape[0] = 0;
    if (k < 0 || k >= AG_LAYER_ARRAYS)
        return 1;   /* no such array: [0] */
    switch (rows[k].shape) {
    case SHAPE_PROJ:
        if (w->per_node) {
            shape[0] = w->per_node, shape[1] = HD, shape[2] = w->D;
            return 3;
        }
        shape[0] = HD, shape[1] = w->D;
        return 2;
    case SHAPE_WO: shape[0] = w->D_out ? w->D_out : w->D, shape[1] = HD; return 2;
    case SHAPE_NORM: shape[0] = w->post_norm ? out : w->D; return 1;
    case SHAPE_HEADS: shape[0] = w->H, shape[1] = w->d; return 2;
    case SHAPE_OUT: shape[0] = out; return 1;
    case SHAPE_W1: shape[0] = w->F, shape[1] = out; return 2;
    case SHAPE_F: shape[0] = w->F; return 1;
    case SHAPE_W2: shape[0] = out, shape[1] = w->F; return 2;
    case SHAPE_HD: shape[0] = HD; return 1;
    case SHAPE_SKIP: shape[0] = out, shape[1] = w->D; return 2;
    case SHAPE_GATE: shape[0] = 3 * out; return 1;
    case SHAPE_EDGE: shape[0] = HD, shape[1] = w->edge_dim; return 2;
    }
    return 0;
}

int64_t ag_layer_array_size(const ag_weights_t *w, int k)
{
    int64_t shape[3], n = 1;
    const int ndim = ag_layer_array_shape(w, k, shape);
    for (int x = 0; x < ndim; x++)
        n *= shape[x];
    return n;
}

int64_t ag_layer_array_fan_in(const ag_weights_t *w, int k)
{
    int64_t shape[3];
    return shape[ag_layer_array_shape(w, k, shape) - 1];   /* what each output row reads */
}
