"""Layer weights and weights folders (the layout `attngraph run --weights DIR` reads)."""
import ctypes as C
import os
import tempfile

import numpy as np

from . import _structs as S
from ._lib import lib, check, err, Error
from .ops import f32, score_defaults

OPTIONAL = ("ln_weight", "ln_bias", "attn_src", "attn_dst", "attn")


class Weights:
    """One layer: wq, wk, wv [H*d, D] (or [N, H*d, D] per node), wo [D, H*d],
    optional ln_weight, ln_bias [D] and attention vectors attn_src, attn_dst,
    attn [H, d]; float32 arrays, [out, in] like torch.nn.Linear.weight."""

    def __init__(self, wq, wk, wv, wo, heads, ln_weight=None, ln_bias=None, attn_src=None,
                 attn_dst=None, attn=None):
        self.heads = int(heads)
        self.wq, self.wk, self.wv = (f32(a, n) for a, n in ((wq, "wq"), (wk, "wk"), (wv, "wv")))
        self.wo = f32(wo, "wo")
        for name, a in zip(OPTIONAL, (ln_weight, ln_bias, attn_src, attn_dst, attn)):
            setattr(self, name, None if a is None else f32(a, name))
        self.c()   # shapes checked now

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
        return {n: getattr(self, n) for n in S.WEIGHT_ARRAYS if getattr(self, n) is not None}

    def c(self):
        """An ag_weights_t pointing into these arrays (no copy; the library
        reads them, and writes them only through an optimizer)."""
        H, HD, D = self.heads, self.wq.shape[-2], self.wq.shape[-1]
        if H < 1 or HD % H or self.wq.ndim not in (2, 3):
            raise Error("wq has shape %s; expected [H*d, D] with H = %d dividing H*d"
                        % (list(self.wq.shape), H), "invalid value")
        d = HD // H
        want = dict(wk=self.wq.shape, wv=self.wq.shape, wo=(D, HD), ln_weight=(D,),
                    ln_bias=(D,), attn_src=(H, d), attn_dst=(H, d), attn=(H, d))
        for name, shape in want.items():
            a = getattr(self, name)
            if a is not None and a.shape != tuple(shape):
                raise Error("%s has shape %s; expected %s" % (name, list(a.shape), list(shape)),
                            "invalid value")
        w = S.ag_weights_t(D=D, H=H, d=d, per_node=self.per_node)
        for name, a in self.arrays().items():
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
            H, d, D, n = w.H, w.d, w.D, w.per_node
            proj = (n, H * d, D) if n else (H * d, D)
            shapes = dict(wq=proj, wk=proj, wv=proj, wo=(D, H * d), ln_weight=(D,),
                          ln_bias=(D,), attn_src=(H, d), attn_dst=(H, d), attn=(H, d))
            arrays = {}
            for name, shape in shapes.items():
                p = getattr(w, name)
                if p:
                    size = int(np.prod(shape))
                    arrays[name] = np.ctypeslib.as_array((C.c_float * size).from_address(p)) \
                        .reshape(shape).copy()
            return cls(heads=H, **arrays)
        finally:
            lib.ag_weights_destroy(C.byref(w))

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
        return "<attngraph.Weights D=%d, %d heads of width %d%s>" % (
            self.D, self.heads, self.d, ", " + ", ".join(n for n in OPTIONAL if getattr(self, n)
                                                          is not None) if any(
                getattr(self, n) is not None for n in OPTIONAL) else "")


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
    round-k/ subfolder. heads None: as folder/model.args says, else 1."""
    if heads is None:
        heads = (read_model_args(folder) or {}).get("heads", 1)
    if os.path.exists(os.path.join(folder, "round-1", "wq.npy")):
        layers, k = [], 1
        while os.path.exists(os.path.join(folder, "round-%d" % k, "wq.npy")):
            layers.append(Weights.load(os.path.join(folder, "round-%d" % k), heads))
            k += 1
        return layers
    return [Weights.load(folder, heads)]


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
    score's options given), or None when the folder has none."""
    path = os.path.join(folder, "model.args")
    try:
        with open(path) as f:
            words = f.readline().split()
    except FileNotFoundError:
        return None
    if words[:1] != ["--heads"]:
        raise Error("%s: expected one line of options starting with --heads (as train --save "
                    "writes it)" % path, "bad format")
    out = dict(residual=True, norm=False)
    value = {"--heads": ("heads", int), "--rounds": ("rounds", int), "--score": ("score", str),
             "--beta": ("beta", float), "--softcap": ("softcap", float),
             "--slope": ("slope", float), "--sigmoid-bias": ("sigmoid_bias", float),
             "--edge-bias": ("edge_bias", str), "--posenc": ("posenc", str),
             "--norm": ("norm", lambda v: v == "layer"), "--self-loops": ("self_loops", str)}
    k = 0
    while k < len(words):
        w = words[k]
        if w in value and k + 1 < len(words):
            name, conv = value[w]
            out[name] = conv(words[k + 1])
            k += 2
        elif w == "--no-residual":
            out["residual"] = False
            k += 1
        elif w == "--alibi":
            out["alibi"] = True
            k += 1
        elif w in ("--directed", "--undirected"):
            out["directed"] = w == "--directed"
            k += 1
        else:
            raise Error("%s: unexpected '%s'" % (path, w), "bad format")
    return out


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
