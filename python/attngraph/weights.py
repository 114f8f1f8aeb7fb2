"""Layer weights and weights folders (the layout `attngraph run --weights DIR` reads)."""
import ctypes as C
import os
import tempfile

import numpy as np

from . import _structs as S
from ._lib import lib, check, err, Error
from .ops import f32, score_defaults

ACTIVATIONS = ("none", "relu", "elu", "gelu")   # ag_activation_t's order


def _arrays():
    """The names of a layer's arrays, from the library's table (ag_layer_array_info)."""
    names, k = [], 0
    while lib.ag_layer_array_info(k):
        names.append(lib.ag_layer_array_info(k).contents.name.decode())
        k += 1
    return tuple(names)


ARRAYS = _arrays()   # ag_weights_t's arrays, in its order: their fields' and files' names


def arrays_of(features):
    """The arrays a layer with these features (S.LAYER_FEATURES' AG_LAYER_*) has."""
    return tuple(n for k, n in enumerate(ARRAYS) if lib.ag_layer_has(features, k))


def array_shape(w, name):
    """The shape of array `name` of the ag_weights_t w by its sizes (the library's rule)."""
    shape = (S.i64 * 3)()
    ndim = lib.ag_layer_array_shape(C.byref(w), ARRAYS.index(name), shape)
    return tuple(shape[:ndim])


class Weights:
    """One layer: wq, wk, wv [H*d, D] (or [N, H*d, D] per node), wo [D, H*d],
    optional ln_weight, ln_bias [D] and attention vectors attn_src, attn_dst,
    attn [H, d]; float32 arrays, [out, in] like torch.nn.Linear.weight.

    A layer of its own shape (docs/model-file.md): wk and wv None (keys and
    values are the queries' projection, GAT's one lin); wo [width, H*d] of any
    width, or None (the heads concatenated, [N, H*d], or averaged with
    mean_heads, [N, d]); bias [output width]; act "relu", "elu" or "gelu"
    (applied last); residual=False (no X + ..., needed where the width
    changes). A feed-forward sublayer on the output Y: w1 [F, out], w2 [out,
    F], optional b1 [F], b2 [out], ln2_weight, ln2_bias [out] (norm="layer"):
    Y + W2 ff_act(W1 LayerNorm(Y) + b1) + b2.

    PyG's TransformerConv and GATConv parts (ag_weights_t's last fields): bq,
    bk, bv [H*d] the projections' biases (one projection: bq); wskip [out, D]
    and bskip [out] a skip projection R of the projections' input added to the
    output (root_weight; the layer then has no residual), wbeta [3*out] a gate
    g = sigmoid(wbeta . [O, R, O - R]) giving g R + (1 - g) O (beta);
    post_norm=True: the norm's LayerNorms after the sums (ln_weight [out]);
    wedge [H*d, edge_dim] the projection of rounds(edge_features=) added to
    each message's key and value (scaled-dot and the other kinds), its key
    (gatv2), or through attn_edge [H, d] inside the LeakyReLU (additive)."""

    def __init__(self, wq, wk, wv, wo, heads, ln_weight=None, ln_bias=None, attn_src=None,
                 attn_dst=None, attn=None, bias=None, act="none", mean_heads=False,
                 residual=True, w1=None, b1=None, w2=None, b2=None, ln2_weight=None,
                 ln2_bias=None, ff_act="gelu", bq=None, bk=None, bv=None, wskip=None,
                 bskip=None, wbeta=None, wedge=None, attn_edge=None, post_norm=False):
        given = locals()
        for name in ARRAYS:
            setattr(self, name, None if given[name] is None else f32(given[name], name))
        self.heads = int(heads)
        self.post_norm = bool(post_norm)
        for name, a in (("act", act), ("ff_act", ff_act)):
            if a not in ACTIVATIONS:
                raise Error("%s is %r; expected one of %s" % (name, a, ", ".join(ACTIVATIONS)),
                            "invalid value")
        self.act, self.ff_act = act, ff_act
        self.mean_heads, self.residual = bool(mean_heads), bool(residual)
        self.c()   # shapes checked now

    @property
    def width_out(self):
        """The width this layer writes: wo's rows, else H*d or (mean_heads) d."""
        if self.wo is not None:
            return self.wo.shape[0]
        return self.d if self.mean_heads else self.heads * self.d

    @property
    def D(self):
        return self.wq.shape[-1]

    @property
    def d(self):
        return self.wq.shape[-2] // self.heads

    @property
    def per_node(self):
        return self.wq.shape[0] if self.wq.ndim == 3 else 0

    def arrays(self):
        """name -> array, for the arrays this layer has."""
        return {n: getattr(self, n) for n in ARRAYS if getattr(self, n) is not None}

    @property
    def edge_dim(self):
        """The width of the edge features wedge projects (0: none)."""
        return self.wedge.shape[1] if self.wedge is not None and self.wedge.ndim == 2 else 0

    def c(self):
        """An ag_weights_t pointing into these arrays (no copy; the library
        reads them, and writes them only through an optimizer)."""
        H, HD, D = self.heads, self.wq.shape[-2], self.wq.shape[-1]
        if H < 1 or HD % H or self.wq.ndim not in (2, 3):
            raise Error("wq has shape %s; expected [H*d, D] with H = %d dividing H*d"
                        % (list(self.wq.shape), H), "invalid value")
        d = HD // H
        if (self.wk is None) != (self.wv is None):
            raise Error("wk and wv go together (both None: one projection)", "invalid value")
        if self.wskip is not None and self.residual:
            raise Error("a layer with a skip projection (wskip) adds no residual: the skip is "
                        "its residual; give residual=False", "invalid value")
        if self.wo is not None and (self.wo.ndim != 2 or self.wo.shape[1] != HD):
            raise Error("wo has shape %s; expected [width, %d]" % (list(self.wo.shape), HD),
                        "invalid value")
        if (self.w1 is None) != (self.w2 is None) or (self.w1 is not None and self.w1.ndim != 2):
            raise Error("w1 [F, %d] and w2 [%d, F] go together" % (self.width_out,
                                                                    self.width_out),
                        "invalid value")
        F = self.w1.shape[0] if self.w1 is not None else 0
        w = S.ag_weights_t(D=D, H=H, d=d, per_node=self.per_node,
                           D_out=self.wo.shape[0] if self.wo is not None else 0,
                           mean_heads=int(self.mean_heads), no_residual=int(not self.residual),
                           act=ACTIVATIONS.index(self.act), F=F,
                           ff_act=ACTIVATIONS.index(self.ff_act),
                           post_norm=int(self.post_norm), edge_dim=self.edge_dim)
        for name, a in self.arrays().items():   # in order: wo before the widths it decides
            shape = array_shape(w, name)
            if a.shape != shape:
                raise Error("%s has shape %s; expected %s" % (name, list(a.shape), list(shape)),
                            "invalid value")
            setattr(w, name, a.ctypes.data)
        return w

    @classmethod
    def random(cls, D, heads, d=None, seed=1, per_node=0):
        """Seeded Gaussian weights, as `attngraph run --seed` draws them."""
        d = d or D // heads
        w = S.ag_weights_t()
        e = err()
        check(lib.ag_weights_random(C.byref(w), D, heads, d, per_node, seed, C.byref(e)), e)
        return cls._from_c(w)

    @classmethod
    def _from_c(cls, w):
        """Copies a library-owned ag_weights_t into numpy, then frees it."""
        try:
            return cls._copy_c(w)
        finally:
            lib.ag_weights_destroy(C.byref(w))

    @classmethod
    def _copy_c(cls, w):
        """A copy in numpy of the arrays of an ag_weights_t."""
        arrays = {}
        for name in ARRAYS:
            p = getattr(w, name)
            if p:
                shape = array_shape(w, name)
                size = int(np.prod(shape))
                arrays[name] = np.ctypeslib.as_array((C.c_float * size).from_address(p)) \
                    .reshape(shape).copy()
        arrays.setdefault("wk", None), arrays.setdefault("wv", None)
        arrays.setdefault("wo", None)
        return cls(heads=w.H, act=ACTIVATIONS[w.act], mean_heads=bool(w.mean_heads),
                   residual=not w.no_residual, ff_act=ACTIVATIONS[w.ff_act],
                   post_norm=bool(w.post_norm), **arrays)

    @classmethod
    def load(cls, folder, heads=1):
        """Reads folder/wq.npy ... with the library's reader (ag_weights_load)."""
        w = S.ag_weights_t()
        e = err()
        check(lib.ag_weights_load(C.byref(w), os.fsencode(folder), int(heads), C.byref(e)), e)
        return cls._from_c(w)

    def save(self, folder):
        """Writes wq.npy wk.npy wv.npy wo.npy (and the optional arrays this layer
        has) into folder, each whole or not at all."""
        os.makedirs(folder, exist_ok=True)
        for name, a in self.arrays().items():
            _save_npy(os.path.join(folder, name + ".npy"), a)

    def __repr__(self):
        more = [n for n in self.arrays() if n not in ("wq", "wk", "wv", "wo")]
        return "<attngraph.Weights D=%d, %d heads of width %d%s>" % (
            self.D, self.heads, self.d, "".join(", " + n for n in more))


def _save_npy(path, a):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp-",
                               suffix=".npy")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, np.ascontiguousarray(a, dtype=np.float32))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def save_layers(folder, layers):
    """A list of layers: one layer is folder's own files; several go to
    folder/round-1/, round-2/, ... (what `run --weights folder` reads)."""
    if isinstance(layers, Weights):
        layers = [layers]
    if len(layers) == 1:
        layers[0].save(folder)
    else:
        for k, w in enumerate(layers):
            w.save(os.path.join(folder, "round-%d" % (k + 1)))


def load_layers(folder, heads=None):
    """The layers of a weights folder: [Weights] for a shared layer, or one per
    round-k/ subfolder, read by the library as run --weights reads them
    (ag_model_load_ex). heads: those of a folder of arrays alone (default 1);
    a folder with model.args or model.txt has its own, and another is refused."""
    if heads is not None and int(heads) < 1:
        raise Error("load_layers: heads=%r; expected >= 1" % (heads,), "invalid value")
    m, e = S.ag_model_t(), err()
    opts = S.ag_model_load_opts_t(1 if heads is None else int(heads), 1)   # no readout
    check(lib.ag_model_load_ex(C.byref(m), os.fsencode(folder), C.byref(opts), C.byref(e)), e)
    try:
        for k in range(m.spec.n_layers):   # what a list of layers cannot carry
            L = m.spec.layers[k]
            if L.graph or getattr(L, "global"):
                raise Error("%s line %d: a layer's own connectivity (graph=, global=), which "
                            "a list of layers does not carry; run the model whole: "
                            "attngraph.Model.load(%r)" % (os.path.join(folder, "model.txt"),
                                                          L.line, os.fspath(folder)),
                            "invalid value")
        layers = [Weights._copy_c(m.layers[k]) for k in range(m.spec.n_layers)]
    finally:
        lib.ag_model_destroy(C.byref(m))
    if heads is not None and layers[0].heads != heads:
        raise Error("%s: its layers have %d heads (model.args or model.txt); heads=%d given"
                    % (os.fspath(folder), layers[0].heads, heads), "invalid value")
    return layers


# ------------------------------------------------------------ model.args
# What the arrays cannot tell (2 heads of 8 and 1 head of 16 have the same
# arrays): `attngraph train --save` writes it as one line of options into
# DIR/model.args, and every command reading --weights DIR refuses other options.

_SCORE_NAMES = {"scaled_dot": "scaled-dot", "gat": "additive"}


def _f32(x):
    """x as model.args writes a value: the float32 the model uses, %.9g."""
    return "%.9g" % np.float32(x)


def model_args(heads, rounds=1, score="scaled-dot", residual=True, norm=False, beta=None,
               softcap=None, slope=None, sigmoid_bias=None, alibi=False, self_loops="keep",
               directed=None):
    """The model.args line the CLI writes for these options, in its form
    (src/cli/model_args.c): each value as its float32, %.9g; a value equal to
    the library's default (None: the default) left out. self_loops and directed
    are how the graph was made (Graph.load, Graph.pattern, ...)."""
    text = "--heads %d --rounds %d" % (heads, rounds)
    score = _SCORE_NAMES.get(score, score)
    if score != "scaled-dot":
        text += " --score %s" % score
    default = score_defaults(score)
    for name, value, applies in (("beta", beta, True), ("softcap", softcap, True),
                                 ("slope", slope, score in ("additive", "gatv2"))):
        if value is not None and applies and np.float32(value) != np.float32(getattr(default, name)):
            text += " --%s %s" % (name, _f32(value))
    if sigmoid_bias is not None:
        text += " --sigmoid-bias %s" % _f32(sigmoid_bias)
    if alibi:
        text += " --alibi"
    if not residual:
        text += " --no-residual"
    if norm:
        text += " --norm layer"
    if self_loops not in (None, "keep"):
        text += " --self-loops %s" % self_loops
    if directed is not None:
        text += " --directed" if directed else " --undirected"
    return text


def read_model_args(folder):
    """folder/model.args as a dict (heads, rounds, score, residual, norm and the
    score's options given), or None when the folder has none. The library reads
    it (ag_model_args_read: the reader of ag_model_load and of the CLI's
    --weights), so a line one of them refuses, all refuse alike."""
    if not os.path.exists(os.path.join(folder, "model.args")):
        return None
    spec, e = S.ag_model_spec_t(), err()
    check(lib.ag_model_args_read(C.byref(spec), os.fsencode(folder), C.byref(e)), e)
    K, s, L = S.MODEL_KEYS, spec.score, spec.layers[0]
    out = dict(heads=int(L.heads), rounds=int(spec.rounds), residual=bool(L.residual),
               norm=spec.norm != 0)
    given = lambda key: spec.line[K["AG_KEY_" + key]] > 0
    if given("SCORE"):
        out["score"] = lib.ag_score_kind_name(s.kind).decode()
    for key in ("beta", "softcap", "slope", "sigmoid_bias"):
        if given(key.upper()):
            out[key] = float(getattr(s, key))
    if given("ALIBI"):
        out["alibi"] = True
    if given("EDGE_BIAS"):
        out["edge_bias"] = spec.edge_bias.decode()
    if given("POSENC"):
        out["posenc"] = "sinusoidal" if spec.posenc else "none"
    if given("SELF_LOOPS"):
        out["self_loops"] = lib.ag_self_loops_name(spec.self_loops).decode()
    if spec.directed >= 0:
        out["directed"] = bool(spec.directed)
    return out


def load_model(folder):
    """A model `attngraph train --save folder` wrote from a model file
    (folder/model.txt, docs/model-file.md), read by the library
    (ag_model_load: every array's shape checked against the file): (layers,
    options). layers: one Weights a layer; options: the model file's options
    as rounds() keywords (score, norm, slope, beta, ...), and "self_loops",
    "readout" ((Wr, br) or None: the last layer writes the classes), the
    dropouts it trains with, and "rounds" when one layer runs several rounds
    (`rounds R`). ag.rounds(graph, x, layers, rounds=opts.get("rounds",
    len(layers)), **kw) with kw the options rounds() takes runs what
    `attngraph run --weights folder` runs (attngraph.Model runs it whole)."""
    path = os.path.join(folder, "model.txt")
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    m = S.ag_model_t()
    e = err()
    check(lib.ag_model_load(C.byref(m), os.fsencode(folder), C.byref(e)), e)
    try:
        spec, K = m.spec, S.MODEL_KEYS
        for k in range(spec.n_layers):   # what rounds() cannot take: run the model whole
            L = spec.layers[k]
            key = "graph" if L.graph else "global" if getattr(L, "global") else None
            if key:
                raise Error("%s line %d: %s=%s: a layer's own connectivity, which rounds() "
                            "does not take; run the model whole: attngraph.Model.load(%r)"
                            % (path, L.line, key, (L.graph or getattr(L, "global")).decode(),
                               os.fspath(folder)), "invalid value")
        layers = [Weights._copy_c(m.layers[k]) for k in range(spec.n_layers)]
        given = {name[7:].lower(): spec.line[k] > 0 for name, k in K.items()
                 if name.startswith("AG_KEY_")}
        s = spec.score
        opts = {"self_loops": lib.ag_self_loops_name(spec.self_loops).decode(), "readout": None}
        if given["score"]:
            opts["score"] = lib.ag_score_kind_name(s.kind).decode()
        for key in ("beta", "softcap", "slope", "sigmoid_bias"):
            if given[key]:
                opts[key] = float(getattr(s, key))
        for k, key in enumerate(("dropout", "attn_dropout", "resid_dropout")):
            if given[key]:
                opts[key] = float(spec.dropout[k])
        if given["alibi"]:
            opts["alibi"] = True
        if given["edge_bias"]:
            opts["edge_bias"] = spec.edge_bias.decode()
        if given["norm"]:
            opts["norm"] = "layer" if spec.norm else None
        if given["posenc"]:
            opts["posenc"] = "sinusoidal" if spec.posenc else "none"
        if spec.directed >= 0:
            opts["directed"] = bool(spec.directed)
        if spec.rounds:
            opts["rounds"] = int(spec.rounds)
        if m.C:
            W = layers[-1].width_out
            as_array = np.ctypeslib.as_array
            opts["readout"] = (as_array((C.c_float * (m.C * W)).from_address(m.wr))
                               .reshape(m.C, W).copy(),
                               as_array((C.c_float * m.C).from_address(m.br)).copy())
    finally:
        lib.ag_model_destroy(C.byref(m))
    return layers, opts


def write_model_args(folder, text):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.args")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
