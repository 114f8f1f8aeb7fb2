"""Training with the library: rounds forward with a tape, its backward, losses,
optimizers (docs/training.md, "In the library")."""
import ctypes as C
from collections import namedtuple

import numpy as np

from . import _structs as S
from ._lib import lib, check, err, Error
from .ops import f32, finite
from .rounds import _layers, _round_opts, _features, _widths
from .weights import Weights


def grads_like(layers, norm=None):
    """Zeroed gradients shaped like each layer (ag_weights_grads_init): wq, wk,
    wv, wo, the LayerNorm's (when a layer has them or norm is "layer") and the
    attention vectors a layer has."""
    single = isinstance(layers, Weights)
    out = []
    for w in ([layers] if single else layers):
        g = S.ag_weights_t()
        cw = w.c()
        e = err()
        check(lib.ag_weights_grads_init(C.byref(g), C.byref(cw), int(norm == "layer"),
                                        C.byref(e)), e)
        out.append(Weights._from_c(g))
    return out[0] if single else out


def add_layer_norm(w):
    """Gives w LayerNorm weights (1 and 0) when it has none, so training learns them."""
    if w.ln_weight is None:
        w.ln_weight = np.ones(w.D, np.float32)
    if w.ln_bias is None:
        w.ln_bias = np.zeros(w.D, np.float32)
    return w


class Tape:
    """What rounds_forward keeps for its backward."""

    def __init__(self, graph, layers, arr, opts, keep, N, D, D_out=None, p=None):
        self._graph, self._layers, self._arr, self._opts, self._keep = graph, layers, arr, opts, keep
        self._p = p if p is not None else C.c_void_p()
        self.N, self.D = N, D
        self.D_out = D if D_out is None else D_out   # the last round's width

    def backward(self, dy, grads=None, dx=True):
        """Given dy = dL/dX_R [N, D_out], writes the weights' gradients into
        grads (a list from grads_like, overwritten; made when None) and returns
        (dx0 [N, D] or None, grads). Shared layers get the sum over rounds."""
        if not self._p:
            raise Error("the tape was freed", "invalid value")
        dy = f32(dy, "dy", (self.N, self.D_out))
        if grads is None:
            grads = grads_like(self._layers, "layer" if self._opts.norm else None)
        if isinstance(grads, Weights):
            grads = [grads]
        if len(grads) != len(self._layers):
            raise Error("%d gradient layers for %d layers" % (len(grads), len(self._layers)),
                        "invalid value")
        garr = (S.ag_weights_t * len(grads))(*[g.c() for g in grads])
        dx0 = np.empty((self.N, self.D), np.float32) if dx else None
        e = err()
        check(lib.ag_rounds_backward(self._p, dy.ctypes.data,
                                     dx0.ctypes.data if dx else None, garr, C.byref(e)), e)
        return dx0, grads

    def free(self):
        if self._p:
            lib.ag_tape_free(self._p)
            self._p = C.c_void_p()

    def __del__(self):
        self.free()


def rounds_forward(graph, x, layers, rounds=1, score="scaled-dot", residual=True, norm=None,
                   ln_eps=None, dropout=0.0, attn_dropout=0.0, dropout_seed=0,
                   resid_dropout=0.0, edge_features=None, tape=None, **score_kw):
    """ag_rounds_forward: returns (X after the rounds, Tape). tape: the Tape of
    an earlier call to use again (ag_rounds_forward_reuse: on the same graph
    with layers of the same shapes its memory and the kernels' plans are kept,
    so a training loop's steps after the first allocate almost nothing); it is
    the Tape returned. Keep layers
    unchanged until tape.backward (an optimizer steps after it). dropout (on
    what each round's projections read) and attn_dropout (on the attention
    weights) apply here, in training, with masks hashed from dropout_seed
    (give each step its own); so does resid_dropout, on what a layer with a
    residual adds to X and what a feed-forward sublayer adds; rounds()
    (inference) has none. edge_features as rounds()."""
    layers, arr = _layers(layers)
    D = layers[0].D
    widest, out, _ = _widths(layers, int(rounds))
    X = np.zeros((graph.N, widest), np.float32)   # room for every round's width
    X.reshape(-1)[:graph.N * D] = _features(graph, x, D).reshape(-1)
    opts, keep = _round_opts(graph, layers, score, score_kw, residual, norm, ln_eps,
                             edge_features)
    opts.dropout, opts.attn_dropout = finite(dropout, "dropout"), finite(attn_dropout,
                                                                         "attn_dropout")
    opts.dropout_seed = int(dropout_seed) & (2**64 - 1)
    opts.resid_dropout = finite(resid_dropout, "resid_dropout")
    if tape is None:
        tape = Tape(graph, layers, arr, opts, keep, graph.N, D, out)
    elif not isinstance(tape, Tape):
        raise Error("tape is %r; expected a Tape from rounds_forward" % (tape,), "invalid value")
    else:   # the library reuses the tape's memory, or frees it and makes a new one
        tape.__init__(graph, layers, arr, opts, keep, graph.N, D, out, tape._p)
    e = err()
    check(lib.ag_rounds_forward_reuse(C.byref(graph._nb), arr, len(layers), X.ctypes.data,
                                      int(rounds), C.byref(opts), C.byref(tape._p),
                                      C.byref(e)), e)
    return X.reshape(-1)[:graph.N * out].reshape(graph.N, out).copy(), tape


def dropout(x, p, seed, first_row=0, out=None):
    """Dropout on features x [rows, cols]: each element set to 0 with
    probability p, else scaled by 1/(1-p), by a hash of (seed, first_row + row,
    col): the same seed drops the same elements, whatever the threads, and
    dropout(dy, p, seed) is the backward. out: an array to write (may be x)."""
    x = f32(x, "x")
    if x.ndim != 2:
        raise Error("x has shape %s; expected [rows, cols]" % list(x.shape), "invalid value")
    y = np.empty_like(x) if out is None else out
    if out is not None and (not isinstance(out, np.ndarray) or out.dtype != np.float32 or
                            out.shape != x.shape or not out.flags.c_contiguous):
        raise Error("out must be a C-contiguous float32 array of x's shape %s"
                    % list(x.shape), "invalid value")
    e = err()
    check(lib.ag_dropout(y.ctypes.data, x.ctypes.data, int(first_row), x.shape[0], x.shape[1],
                         finite(p, "p"), int(seed) & (2**64 - 1), C.byref(e)), e)
    return y


def _mask(mask, N):
    if mask is None:
        return None
    m = np.ascontiguousarray(mask, dtype=np.uint8)
    if m.shape != (N,):
        raise Error("mask has shape %s; expected [%d]" % (list(m.shape), N), "invalid value")
    return m


def mse_loss(x, y, mask=None):
    """Mean squared error over the masked rows: (loss, dL/dx)."""
    x = f32(x, "x")
    if x.ndim != 2:
        raise Error("x has shape %s; expected [N, D]" % list(x.shape), "invalid value")
    y = f32(y, "y", x.shape)
    N, D = x.shape
    m = _mask(mask, N)
    loss = C.c_double()
    dx = np.empty_like(x)
    e = err()
    check(lib.ag_loss_mse(x.ctypes.data, y.ctypes.data, N, D,
                          m.ctypes.data if m is not None else None, C.byref(loss),
                          dx.ctypes.data, C.byref(e)), e)
    return loss.value, dx


CrossEntropy = namedtuple("CrossEntropy", "loss dx dwr dbr correct counted pred")


def cross_entropy(x, wr, br, labels, mask=None):
    """Cross-entropy through the linear readout logits = x wr^T + br (wr [C, D],
    br [C]) over masked nodes with a label (labels int [N], -1 unlabelled)."""
    x = f32(x, "x")
    if x.ndim != 2:
        raise Error("x has shape %s; expected [N, D]" % list(x.shape), "invalid value")
    N, D = x.shape
    wr = f32(wr, "wr")
    if wr.ndim != 2 or wr.shape[1] != D:
        raise Error("wr has shape %s; expected [C, %d]" % (list(wr.shape), D), "invalid value")
    Cn = wr.shape[0]
    br = f32(br, "br", (Cn,))
    lab = np.ascontiguousarray(labels, dtype=np.int64)
    if lab.shape != (N,):
        raise Error("labels has shape %s; expected [%d]" % (list(lab.shape), N), "invalid value")
    m = _mask(mask, N)
    dx, dwr, dbr = np.empty_like(x), np.empty_like(wr), np.empty_like(br)
    pred = np.empty(N, np.int64)
    ce = S.ag_cross_entropy_t(wr.ctypes.data, br.ctypes.data, Cn, lab.ctypes.data,
                              m.ctypes.data if m is not None else None)
    out = S.ag_cross_entropy_out_t(dX=dx.ctypes.data, dWr=dwr.ctypes.data,
                                   dbr=dbr.ctypes.data, pred=pred.ctypes.data)
    e = err()
    check(lib.ag_loss_cross_entropy(x.ctypes.data, N, D, C.byref(ce), C.byref(out), C.byref(e)),
          e)
    return CrossEntropy(out.loss, dx, dwr, dbr, out.correct, out.counted, pred)


_KINDS = {"adam": 0, "adamw": 1, "sgd": 2}


class Optimizer:
    """The library's optimizers ("adam", "adamw", "sgd"), stepping float32
    arrays in place from gradient arrays that stay registered: add each pair
    once, fill the gradients (tape.backward(dy, grads) writes into them), step."""

    def __init__(self, kind="adam", lr=None, momentum=None, beta1=None, beta2=None, eps=None,
                 weight_decay=None, clip=None):
        """None is the library's default (AG_OPTIMIZER_OPTS_INIT: lr 0.01, beta1
        0.9, beta2 0.999, eps 1e-8, the rest 0); a number is taken as given."""
        if kind not in _KINDS:
            raise Error("optimizer is %r; expected adam, adamw or sgd" % (kind,), "invalid value")
        o = S.ag_optimizer_opts_t()
        lib.ag_optimizer_opts_init(C.byref(o), _KINDS[kind])
        for name, value in (("lr", lr), ("momentum", momentum), ("beta1", beta1),
                            ("beta2", beta2), ("eps", eps), ("weight_decay", weight_decay),
                            ("clip", clip)):
            if value is not None:
                setattr(o, name, finite(value, name))
        self._p = C.c_void_p()
        self._keep = []
        e = err()
        check(lib.ag_optimizer_init(C.byref(self._p), C.byref(o), C.byref(e)), e)

    def add(self, param, grad):
        """Registers param (updated in place) and grad: C-contiguous float32
        arrays of one size (numpy, or CPU torch tensors' .numpy())."""
        for name, a in (("param", param), ("grad", grad)):
            if not (isinstance(a, np.ndarray) and a.dtype == np.float32 and
                    a.flags.c_contiguous):
                raise Error("%s must be a C-contiguous float32 array (it is updated or read "
                            "in place)" % name, "invalid value")
        if param.size != grad.size:
            raise Error("param has %d values, grad %d" % (param.size, grad.size), "invalid value")
        self._keep.append((param, grad))
        e = err()
        check(lib.ag_optimizer_add(self._p, param.ctypes.data, grad.ctypes.data, param.size,
                                   C.byref(e)), e)

    def add_weights(self, layers, grads):
        """Registers every array of each layer with its gradient in grads (grads_like)."""
        if isinstance(layers, Weights):
            layers, grads = [layers], [grads]
        for w, g in zip(layers, grads):
            for name, a in g.arrays().items():
                p = getattr(w, name)
                if p is None:
                    raise Error("the layer has no %s for its gradient" % name, "invalid value")
                self.add(p, a)

    def step(self):
        """One step; returns the gradients' global L2 norm before clipping."""
        norm = C.c_double()
        e = err()
        check(lib.ag_optimizer_step(self._p, C.byref(norm), C.byref(e)), e)
        return norm.value

    def __del__(self):
        if getattr(self, "_p", None):
            lib.ag_optimizer_free(self._p)
            self._p = None
