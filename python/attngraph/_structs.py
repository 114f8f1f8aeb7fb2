"""ctypes mirrors of the C structs and enums of include/attngraph/*.h.

Every struct the package passes to the library is declared here and nowhere
else, with the C field names, so that tests/test_layout.py can compile a C
program printing sizeof and offsetof of each one and compare them with ctypes:
a header change that these mirrors miss fails that test instead of corrupting
memory.
"""
import ctypes as C

i64 = C.c_int64
f32 = C.c_float
f64 = C.c_double
ptr = C.c_void_p          # data pointers: numpy arrays pass arr.ctypes.data

# ---------------------------------------------------------------- enums
# name -> value, checked against the header by the layout test

STATUS = dict(AG_OK=0, AG_ENOMEM=1, AG_EIO=2, AG_EFORMAT=3, AG_EINVAL=4, AG_ELIMIT=5,
              AG_EIGRAPH=6)
SELF_LOOPS = dict(AG_SELF_KEEP=0, AG_SELF_ON=1, AG_SELF_OFF=2, AG_SELF_REPLACE=3)
SCORE_KINDS = dict(AG_SCORE_SCALED_DOT=0, AG_SCORE_DOT=1, AG_SCORE_COSINE=2,
                   AG_SCORE_ADDITIVE=3, AG_SCORE_GATV2=4, AG_SCORE_SIGMOID=5,
                   AG_SCORE_LINEAR=6)
NORMS = dict(AG_NORM_NONE=0, AG_NORM_LAYER=1)
ACTIVATIONS = dict(AG_ACT_NONE=0, AG_ACT_RELU=1, AG_ACT_ELU=2, AG_ACT_GELU=3)
OPTIMIZERS = dict(AG_OPT_ADAM=0, AG_OPT_ADAMW=1, AG_OPT_SGD=2)
FORMATS = dict(AG_FORMAT_AUTO=0, AG_FORMAT_EDGELIST=1, AG_FORMAT_NCOL=2, AG_FORMAT_LGL=3,
               AG_FORMAT_GRAPHML=4, AG_FORMAT_GML=5, AG_FORMAT_PAJEK=6, AG_FORMAT_DOT=7)
DIRECTIONS = dict(AG_EDGES_AUTO=0, AG_EDGES_DIRECTED=1, AG_EDGES_UNDIRECTED=2)
DRAW_LIMITS = dict(AG_HEATMAP_MAX_NODES=1000, AG_HEATMAP_MAX_CELLS=20000, AG_HEATMAP_BINS=128,
                   AG_GRAPH_MAX_NODES=2000, AG_GRAPH_MAX_EDGES=20000)
LAYER_FEATURES = dict(AG_LAYER_QKV=1, AG_LAYER_WO=2, AG_LAYER_NORM=4, AG_LAYER_NORM_BIAS=8,
                      AG_LAYER_ADDITIVE=16, AG_LAYER_GATV2=32, AG_LAYER_BIAS=64, AG_LAYER_FFN=128,
                      AG_LAYER_QKV_BIAS=256, AG_LAYER_SKIP=512, AG_LAYER_GATE=1024,
                      AG_LAYER_EDGES=2048, AG_LAYER_ARRAYS=24)
INITS = dict(AG_INIT_NORMAL=0, AG_INIT_ZEROS=1, AG_INIT_ONES=2)
LAYER_OUTS = dict(AG_OUT_LINEAR=0, AG_OUT_CONCAT=1, AG_OUT_MEAN=2)
MODEL_KEYS = dict(AG_KEY_SCORE=0, AG_KEY_BETA=1, AG_KEY_SOFTCAP=2, AG_KEY_SLOPE=3,
                  AG_KEY_SIGMOID_BIAS=4, AG_KEY_ALIBI=5, AG_KEY_EDGE_BIAS=6, AG_KEY_NORM=7,
                  AG_KEY_POSENC=8, AG_KEY_SELF_LOOPS=9, AG_KEY_DIRECTED=10, AG_KEY_UNDIRECTED=11,
                  AG_KEY_DROPOUT=12, AG_KEY_ATTN_DROPOUT=13, AG_KEY_RESID_DROPOUT=14,
                  AG_KEY_READOUT=15, AG_KEY_ROUNDS=16, AG_MODEL_KEYS=17,
                   AG_MODEL_MAX_LAYERS=64)
TASKS = dict(AG_TASK_MQAR=0, AG_TASK_COPY=1, AG_LM_MAX_VOCAB=1 << 20)
LM_POSITIONS = dict(AG_LM_POS_LEARNT=0, AG_LM_POS_ROPE=1, AG_LM_POS_NONE=2)
ENUMS = [STATUS, SELF_LOOPS, SCORE_KINDS, NORMS, ACTIVATIONS, OPTIMIZERS, FORMATS, DIRECTIONS,
         DRAW_LIMITS, LAYER_FEATURES, INITS, LAYER_OUTS, MODEL_KEYS, TASKS, LM_POSITIONS]

# The library's igraph_t lives in a buffer of this many bytes (the test checks
# sizeof(igraph_t) fits): the package never looks inside it.
IGRAPH_T_BYTES = 512

# ---------------------------------------------------------------- structs


class ag_error_t(C.Structure):
    _fields_ = [("status", C.c_int), ("msg", C.c_char * 512)]


class ag_labels_t(C.Structure):
    _fields_ = [("n", i64), ("str", C.POINTER(C.c_char_p))]


class ag_nbhd_t(C.Structure):
    _fields_ = [("n_nodes", i64), ("n_edges", i64), ("n_runs", i64),
                ("edge_ptr", ptr), ("run_ptr", ptr), ("run_src", ptr), ("run_len", ptr),
                ("edge_id", ptr),
                ("n_out_runs", i64), ("out_ptr", ptr), ("out_dst", ptr), ("out_len", ptr),
                ("out_nth", ptr), ("run_slot", ptr)]


class ag_score_t(C.Structure):
    _fields_ = [("kind", C.c_int), ("beta", f32), ("softcap", f32), ("slope", f32),
                ("a_src", ptr), ("a_dst", ptr), ("edge_bias", ptr), ("alibi", C.c_int),
                ("has_sigmoid_bias", C.c_int), ("sigmoid_bias", f32), ("dropout", f32),
                ("dropout_seed", C.c_uint64), ("edge_pre", ptr), ("edge_key", ptr),
                ("edge_value", ptr)]


PROGRESS_FN = C.CFUNCTYPE(None, i64, i64, ptr)


class ag_attention_opts_t(C.Structure):
    _fields_ = [("entropy", ptr), ("max_weight", ptr), ("distance", ptr),
                ("progress", PROGRESS_FN), ("progress_ctx", ptr), ("lse", ptr)]


class ag_edge_msg_t(C.Structure):
    _fields_ = [("edge_id", i64), ("src", i64), ("dst", i64)]


class ag_attention_grads_t(C.Structure):
    _fields_ = [("dQ", ptr), ("dK", ptr), ("dV", ptr), ("d_a_src", ptr), ("d_a_dst", ptr),
                ("d_edge_bias", ptr), ("d_edge_pre", ptr), ("d_edge_key", ptr),
                ("d_edge_value", ptr)]


class ag_weights_t(C.Structure):
    _fields_ = [("D", i64), ("H", i64), ("d", i64), ("per_node", i64), ("wq", ptr), ("wk", ptr),
                ("wv", ptr), ("wo", ptr), ("ln_weight", ptr), ("ln_bias", ptr),
                ("attn_src", ptr), ("attn_dst", ptr), ("attn", ptr),
                ("D_out", i64), ("mean_heads", C.c_int), ("no_residual", C.c_int),
                ("bias", ptr), ("act", C.c_int), ("F", i64), ("w1", ptr), ("b1", ptr),
                ("w2", ptr), ("b2", ptr), ("ln2_weight", ptr), ("ln2_bias", ptr),
                ("ff_act", C.c_int), ("bq", ptr), ("bk", ptr), ("bv", ptr), ("wskip", ptr),
                ("bskip", ptr), ("wbeta", ptr), ("post_norm", C.c_int), ("edge_dim", i64),
                ("wedge", ptr), ("attn_edge", ptr), ("global_heads", i64)]


class ag_layer_array_t(C.Structure):
    _fields_ = [("name", C.c_char_p), ("offset", C.c_size_t), ("needs", C.c_uint),
                ("init", C.c_int), ("decay", C.c_int)]


class ag_layer_spec_t(C.Structure):
    _fields_ = [("heads", i64), ("dim", i64), ("out", C.c_int), ("out_width", i64),
                ("one_projection", C.c_int), ("bias", C.c_int), ("residual", C.c_int),
                ("act", C.c_int), ("ffn", i64), ("ffn_act", C.c_int), ("qkv_bias", C.c_int),
                ("skip", C.c_int), ("post_norm", C.c_int), ("edges", C.c_int),
                ("graph", C.c_char * 256), ("global", C.c_char * 256), ("global_heads", i64),
                ("line", C.c_int)]


class ag_model_spec_t(C.Structure):
    _fields_ = [("score", ag_score_t), ("edge_bias", C.c_char * 512), ("norm", C.c_int),
                ("posenc", C.c_int), ("self_loops", C.c_int), ("directed", C.c_int),
                ("readout", C.c_int), ("dropout", f32 * 3),
                ("line", C.c_int * MODEL_KEYS["AG_MODEL_KEYS"]), ("n_layers", C.c_int),
                ("layers", ag_layer_spec_t * MODEL_KEYS["AG_MODEL_MAX_LAYERS"]),
                ("rounds", C.c_int)]


class ag_model_load_opts_t(C.Structure):
    _fields_ = [("heads", C.c_int64), ("no_readout", C.c_int)]


class ag_model_t(C.Structure):
    _fields_ = [("spec", ag_model_spec_t), ("D", i64), ("edge_dim", i64),
                ("layers", C.POINTER(ag_weights_t)), ("C", i64), ("wr", ptr), ("br", ptr)]


class ag_cross_entropy_t(C.Structure):
    _fields_ = [("Wr", ptr), ("br", ptr), ("C", i64), ("labels", ptr), ("mask", ptr)]


class ag_cross_entropy_out_t(C.Structure):
    _fields_ = [("loss", f64), ("correct", i64), ("counted", i64), ("dX", ptr), ("dWr", ptr),
                ("dbr", ptr), ("pred", ptr), ("pred_counted", ptr)]


class ag_lm_t(C.Structure):
    _fields_ = [("V", i64), ("T", i64), ("D", i64), ("L", i64), ("H", i64), ("bias", C.c_int),
                ("wte", ptr), ("wpe", ptr), ("layers", C.POINTER(ag_weights_t)),
                ("lnf_weight", ptr), ("lnf_bias", ptr), ("positions", C.c_int)]


class ag_lm_model_t(C.Structure):
    _fields_ = [("m", ag_lm_t), ("chars", C.POINTER(C.c_int32)), ("bytes", C.c_int),
                ("ids", C.c_int),
                ("pattern", C.c_char * 1024)]


class ag_lm_task_t(C.Structure):
    _fields_ = [("kind", C.c_int), ("vocab", C.c_int64), ("length", C.c_int64),
                ("pairs", C.c_int64), ("power", C.c_double), ("seed", C.c_uint64),
                ("zero_fill", C.c_int)]


class ag_lm_opts_t(C.Structure):
    _fields_ = [("dropout", f32), ("seed", C.c_uint64), ("graphs", ptr), ("correct", ptr),
                ("counted", ptr), ("predicted", ptr)]


class ag_workspace_t(C.Structure):
    _fields_ = [("N", i64), ("HD", i64), ("D", i64), ("Q", ptr), ("K", ptr), ("V", ptr),
                ("M", ptr), ("Xn", ptr), ("X_prev", ptr), ("entropy", ptr),
                ("max_weight", ptr), ("distance", ptr), ("edge_terms", ptr)]


class ag_round_t(C.Structure):
    _fields_ = [("round", C.c_int), ("nb", ptr), ("w", ptr), ("score", ptr), ("X", ptr),
                ("X_prev", ptr), ("ws", ptr), ("entropy", ptr), ("max_weight", ptr),
                ("distance", ptr)]


ON_ROUND_FN = C.CFUNCTYPE(C.c_int, C.POINTER(ag_round_t), ptr)
ON_ROUND_PROGRESS_FN = C.CFUNCTYPE(None, C.c_int, i64, i64, ptr)


class ag_round_opts_t(C.Structure):
    _fields_ = [("score", C.POINTER(ag_score_t)), ("no_residual", C.c_int), ("norm", C.c_int),
                ("ln_eps", f32), ("on_round", ON_ROUND_FN), ("ctx", ptr), ("figures", C.c_int),
                ("on_progress", ON_ROUND_PROGRESS_FN), ("dropout", f32), ("attn_dropout", f32),
                ("dropout_seed", C.c_uint64), ("resid_dropout", C.c_float),
                ("edge_features", ptr), ("edge_dim", i64), ("graphs", ptr),
                ("global_graphs", ptr), ("rope_positions", ptr), ("rope_base", f32)]


class ag_round_figures_t(C.Structure):
    _fields_ = [("change", f64), ("entropy", f64), ("max_weight", f64)]


class ag_optimizer_opts_t(C.Structure):
    _fields_ = [("kind", C.c_int), ("lr", f32), ("momentum", f32), ("beta1", f32),
                ("beta2", f32), ("eps", f32), ("weight_decay", f32), ("clip", f32)]


class ag_load_opts_t(C.Structure):
    _fields_ = [("format", C.c_int), ("max_nodes", i64), ("direction", C.c_int)]


# pictures (attngraph/draw.h)

class ag_rgb_t(C.Structure):
    _fields_ = [("r", C.c_uint8), ("g", C.c_uint8), ("b", C.c_uint8)]


class ag_edge_weights_t(C.Structure):
    _fields_ = [("n_nodes", i64), ("n_edges", i64), ("src", ptr), ("dst", ptr),
                ("weight", ptr), ("heads", i64), ("head", i64), ("labels", ptr),
                ("title", C.c_char_p)]


class ag_heatmap_opts_t(C.Structure):
    _fields_ = [("max_nodes", i64), ("max_cells", i64), ("bins", i64), ("vmax", f64),
                ("log_scale", C.c_int), ("vmin", f64)]


class ag_graph_opts_t(C.Structure):
    _fields_ = [("xy", ptr), ("vmax", f64), ("classes", ptr)]


class ag_series_t(C.Structure):
    _fields_ = [("name", C.c_char_p), ("x", ptr), ("y", ptr), ("n", i64), ("dashed", C.c_int),
                ("colour", C.c_int)]


class ag_panel_t(C.Structure):
    _fields_ = [("title", C.c_char_p), ("xlabel", C.c_char_p), ("ylabel", C.c_char_p),
                ("log_y", C.c_int), ("series", C.POINTER(ag_series_t)), ("n_series", C.c_int)]


class ag_compare_picture_t(C.Structure):
    _fields_ = [("n_conns", C.c_int), ("names", ptr), ("n_nodes", i64), ("grid", i64),
                ("masks", ptr), ("n_figures", C.c_int), ("figure_names", ptr),
                ("figures", ptr), ("title", C.c_char_p)]


STRUCTS = [ag_error_t, ag_labels_t, ag_nbhd_t, ag_score_t,
           ag_attention_opts_t, ag_edge_msg_t, ag_attention_grads_t, ag_weights_t,
           ag_lm_t, ag_lm_model_t, ag_lm_task_t, ag_lm_opts_t, ag_workspace_t, ag_round_t, ag_round_opts_t,
           ag_round_figures_t, ag_optimizer_opts_t, ag_load_opts_t, ag_rgb_t, ag_edge_weights_t, ag_heatmap_opts_t,
           ag_graph_opts_t, ag_series_t, ag_panel_t, ag_compare_picture_t, ag_layer_array_t,
           ag_layer_spec_t, ag_model_spec_t, ag_model_load_opts_t, ag_model_t, ag_cross_entropy_t,
           ag_cross_entropy_out_t]

# ---------------------------------------------------------------- functions
# name: (restype, argtypes). Every fallible function ends with ag_error_t *.

E = C.POINTER(ag_error_t)
P = C.c_void_p
NB = C.POINTER(ag_nbhd_t)
SC = C.POINTER(ag_score_t)
W = C.POINTER(ag_weights_t)
I = C.c_int

FUNCTIONS = {
    "ag_status_str": (C.c_char_p, [I]),
    "ag_set_threads": (I, [I]),
    "ag_simd_isa": (C.c_char_p, []),
    "ag_version": (C.c_char_p, []),
    "ag_simd_env_check": (I, [E]),
    "ag_set_memory_budget": (i64, [i64]),
    "ag_memory_budget": (i64, []),
    "ag_labels_destroy": (None, [C.POINTER(ag_labels_t)]),
    "ag_nbhd_from_csr": (I, [NB, i64, P, P, E]),
    "ag_nbhd_from_edges": (I, [NB, i64, i64, P, P, i64, I, P, E]),
    "ag_nbhd_destroy": (None, [NB]),
    "ag_nbhd_self_loops": (I, [NB, I, E]),
    "ag_nbhd_sources": (None, [NB, i64, i64, P]),
    "ag_pattern_parse": (I, [C.POINTER(P), C.c_char_p, E]),
    "ag_pattern_free": (None, [P]),
    "ag_pattern_size": (i64, [P]),
    "ag_pattern_virtual": (i64, [P]),
    "ag_pattern_needs_graph": (I, [P]),
    "ag_pattern_bind_graph": (I, [P, NB, E]),
    "ag_nbhd_from_pattern": (I, [NB, P, i64, I, E]),
    "ag_nbhd_from_pattern_rows": (I, [NB, P, i64, i64, i64, I, E]),
    "ag_score_init": (None, [SC, I]),
    "ag_check_finite": (I, [C.c_char_p, P, i64, i64, E]),
    "ag_score_check": (I, [SC, NB, i64, i64, E]),
    "ag_attention": (I, [NB, P, P, P, i64, i64, SC, P, E]),
    "ag_attention_ex": (I, [NB, P, P, P, i64, i64, SC, P, C.POINTER(ag_attention_opts_t), E]),
    "ag_attention_kernel": (C.c_char_p, [NB, i64, SC]),
    "ag_attention_weights": (I, [NB, P, P, i64, i64, SC, i64, i64, P, E]),
    "ag_attention_stats": (I, [NB, P, P, i64, i64, SC, P, P, P, E]),
    "ag_edge_order": (I, [NB, C.POINTER(C.POINTER(ag_edge_msg_t)), C.POINTER(C.POINTER(i64)),
                          E]),
    "ag_nbhd_transpose": (I, [NB, E]),
    "ag_attention_backward": (I, [NB, P, P, P, i64, i64, SC, P, P, P,
                                  C.POINTER(ag_attention_grads_t), E]),
    "ag_weights_load": (I, [W, C.c_char_p, i64, E]),
    "ag_weights_destroy": (None, [W]),
    "ag_layer_array_info": (C.POINTER(ag_layer_array_t), [I]),
    "ag_layer_has": (I, [C.c_uint, I]),
    "ag_layer_array_shape": (I, [W, I, C.POINTER(i64)]),
    "ag_model_load": (I, [C.POINTER(ag_model_t), C.c_char_p, E]),
    "ag_model_load_ex": (I, [C.POINTER(ag_model_t), C.c_char_p,
                             C.POINTER(ag_model_load_opts_t), E]),
    "ag_model_destroy": (None, [C.POINTER(ag_model_t)]),
    "ag_model_save": (I, [C.POINTER(ag_model_t), C.c_char_p, E]),
    "ag_model_init": (I, [C.POINTER(ag_model_t), C.POINTER(ag_model_spec_t), i64, i64, i64,
                          C.c_uint64, E]),
    "ag_model_run": (I, [C.POINTER(ag_model_t), NB, P, P, P, E]),
    "ag_model_predict": (I, [C.POINTER(ag_model_t), NB, P, P, P, E]),
    "ag_model_width_out": (i64, [C.POINTER(ag_model_t)]),
    "ag_model_spec_parse": (I, [C.POINTER(ag_model_spec_t), C.c_char_p, C.c_char_p, E]),
    "ag_model_args_read": (I, [C.POINTER(ag_model_spec_t), C.c_char_p, E]),
    "ag_model_spec_text": (C.c_size_t, [C.c_char_p, C.c_size_t, C.POINTER(ag_model_spec_t)]),
    "ag_score_kind_name": (C.c_char_p, [I]),
    "ag_self_loops_name": (C.c_char_p, [I]),
    "ag_weights_random": (I, [W, i64, i64, i64, i64, C.c_uint64, E]),
    "ag_weights_grads_init": (I, [W, W, I, E]),
    "ag_workspace_init": (I, [C.POINTER(ag_workspace_t), i64, i64, i64, E]),
    "ag_workspace_destroy": (None, [C.POINTER(ag_workspace_t)]),
    "ag_round_opts_init": (None, [C.POINTER(ag_round_opts_t)]),
    "ag_rounds_run": (I, [NB, W, I, P, I, C.POINTER(ag_round_opts_t),
                          C.POINTER(ag_workspace_t), C.POINTER(I), E]),
    "ag_rounds_forward": (I, [NB, W, I, P, I, C.POINTER(ag_round_opts_t), C.POINTER(P), E]),
    "ag_rounds_forward_reuse": (I, [NB, W, I, P, I, C.POINTER(ag_round_opts_t), C.POINTER(P),
                                    E]),
    "ag_rounds_backward": (I, [P, P, P, W, E]),
    "ag_tape_free": (None, [P]),
    "ag_tape_bytes": (i64, [i64, i64, i64, i64, I]),
    "ag_loss_mse": (I, [P, P, i64, i64, P, C.POINTER(f64), P, E]),
    "ag_loss_cross_entropy": (I, [P, i64, i64, C.POINTER(ag_cross_entropy_t),
                                  C.POINTER(ag_cross_entropy_out_t), E]),
    "ag_optimizer_opts_init": (None, [C.POINTER(ag_optimizer_opts_t), I]),
    "ag_optimizer_init": (I, [C.POINTER(P), C.POINTER(ag_optimizer_opts_t), E]),
    "ag_optimizer_add": (I, [P, P, P, i64, E]),
    "ag_optimizer_step": (I, [P, C.POINTER(f64), E]),
    "ag_optimizer_free": (None, [P]),
    "ag_optimizer_set_lr": (I, [P, f32, E]),
    "ag_lm_init": (I, [C.POINTER(ag_lm_t), i64, i64, i64, i64, i64, I, C.c_uint64, E]),
    "ag_lm_grads_init": (I, [C.POINTER(ag_lm_t), C.POINTER(ag_lm_t), E]),
    "ag_lm_destroy": (None, [C.POINTER(ag_lm_t)]),
    "ag_lm_graph": (I, [NB, i64, i64, C.c_char_p, E]),
    "ag_lm_graphs": (I, [P, i64, i64, i64, C.c_char_p, E]),
    "ag_lm_graphs_free": (None, [P, i64]),
    "ag_lm_logits_layers": (I, [C.POINTER(ag_lm_t), P, P, P, P, E]),
    "ag_lm_generate_layers": (I, [C.POINTER(ag_lm_t), P, P, i64, i64, f64, i64, C.c_uint64, P,
                                  P, E]),
    "ag_lm_model_load": (I, [C.POINTER(ag_lm_model_t), C.c_char_p, E]),
    "ag_lm_model_save": (I, [C.POINTER(ag_lm_model_t), C.c_char_p, E]),
    "ag_lm_model_destroy": (None, [C.POINTER(ag_lm_model_t)]),
    "ag_lm_tokens_read": (I, [C.POINTER(P), C.POINTER(i64), C.c_char_p, i64, E]),
    "ag_lm_examples_read": (I, [C.POINTER(P), C.POINTER(P), C.POINTER(i64), C.POINTER(i64),
                                C.c_char_p, C.c_char_p, i64, E]),
    "ag_lm_task_make": (I, [C.POINTER(ag_lm_task_t), i64, i64, P, P, P, E]),
    "ag_lm_set_positions": (I, [C.POINTER(ag_lm_t), C.c_int, E]),
    "ag_lm_set_mlp": (I, [C.POINTER(ag_lm_t), C.c_int, E]),
    "ag_lm_loss": (I, [C.POINTER(ag_lm_t), NB, P, P, P, C.POINTER(ag_lm_opts_t),
                       C.POINTER(f64), C.POINTER(ag_lm_t), C.POINTER(P), E]),
    "ag_lm_logits": (I, [C.POINTER(ag_lm_t), NB, P, P, P, E]),
    "ag_lm_optimizer_add": (I, [P, C.POINTER(ag_lm_t), C.POINTER(ag_lm_t), E]),
    "ag_lm_generate": (I, [C.POINTER(ag_lm_t), NB, P, i64, i64, f64, i64, C.c_uint64, P, P,
                           E]),
    "ag_layer_norm": (None, [P, P, i64, i64, P, P, f32]),
    "ag_dropout": (I, [P, P, i64, i64, i64, f32, C.c_uint64, E]),
    "ag_random_normal": (None, [P, i64, C.c_uint64, C.c_uint64, f32]),
    # pictures (attngraph/draw.h): each ag_draw_* makes a malloc'ed SVG string
    "ag_svg_free": (None, [P]),
    "ag_svg_save": (I, [C.c_char_p, C.c_char_p, E]),
    "ag_colormap_viridis": (ag_rgb_t, [f64]),
    "ag_colormap_nonedge": (ag_rgb_t, []),
    "ag_draw_heatmap": (I, [C.POINTER(P), C.POINTER(ag_edge_weights_t),
                            C.POINTER(ag_heatmap_opts_t), E]),
    "ag_layout_fr": (I, [P, i64, i64, P, P, C.c_uint64, E]),
    "ag_draw_graph": (I, [C.POINTER(P), C.POINTER(ag_edge_weights_t),
                          C.POINTER(ag_graph_opts_t), E]),
    "ag_draw_panels": (I, [C.POINTER(P), C.POINTER(ag_panel_t), I, C.c_char_p, E]),
    "ag_draw_rounds": (I, [C.POINTER(P), P, P, P, i64, C.c_char_p, E]),
    "ag_mask_grid": (I, [P, i64, NB, E]),
    "ag_draw_compare": (I, [C.POINTER(P), C.POINTER(ag_compare_picture_t), E]),
    # graph files (attngraph/igraph.h): the igraph_t is an opaque buffer
    "ag_format_parse": (I, [C.POINTER(I), C.c_char_p, E]),
    "ag_graph_load": (I, [P, C.c_char_p, C.POINTER(ag_load_opts_t), E]),
    "ag_labels_from_graph": (I, [C.POINTER(ag_labels_t), P, E]),
    "ag_nbhd_from_graph": (I, [NB, P, E]),
    "ag_edge_attribute": (I, [C.POINTER(P), P, NB, C.c_char_p, E]),
}
