"""Attention on a Graph: forward, per-edge weights, statistics, backward."""
import ctypes as C
from collections import namedtuple

import numpy as np

from . import _structs as S
from ._lib import lib, check, err, Error

_KINDS = {"scaled-dot": 0, "scaled_dot": 0, "dot": 1, "cosine": 2, "additive": 3, "gat": 3,
          "gatv2": 4, "sigmoid": 5, "linear": 6}


def f32(a, what, shape=None):
    """a as a C-contiguous float32 array: the same memory when it already is one."""
    if hasattr(a, "detach"):          # a CPU torch tensor: share its memory
        a = a.detach().numpy()
    a = np.ascontiguousarray(a, dtype=np.float32)
    if shape is not None:
        want = tuple(shape)
        if a.shape != want:
            raise Error("%s has shape %s; expected %s" % (what, list(a.shape), list(want)),
                        "invalid value")
    return a


def finite(x, what):
    """x as a float, refused (naming what) unless it is a finite number."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise Error("%s is %r; expected a number" % (what, x), "invalid value") from None
    if not np.isfinite(v):
        raise Error("%s is %r; expected a finite number" % (what, x), "invalid value")
    return v


def check_finite(what, a):
    """Refuses a NaN or infinity in the float32 array a [rows, cols] as the
    library does (ag_check_finite: the same words as the CLI's)."""
    a = f32(a, what)
    rows, cols = (a.shape[0], a.size // a.shape[0]) if a.ndim and a.shape[0] else (1, a.size)
    e = err()
    check(lib.ag_check_finite(what.encode(), a.ctypes.data, rows, cols, C.byref(e)), e)


def score_defaults(kind="scaled-dot"):
    """The library's defaults for a kind (AG_SCORE_INIT): an ag_score_t."""
    s = S.ag_score_t()
    lib.ag_score_init(C.byref(s), _KINDS[kind])
    return s


class Score:
    """A score function (docs/scores.md): kind "scaled-dot" (default),
    "dot", "cosine", "additive" (GAT: a_src, a_dst [H, d]), "gatv2" (a [H, d]),
    "sigmoid", "linear"; beta, softcap, slope, alibi, sigmoid_bias; edge_bias [E]
    in the graph's edge order. None is the library's default (beta 1, no
    softcap, slope 0.2); a number is taken as given: slope=0.0 is a ReLU.
    edge_pre [E, H] (additive only, in the graph's edge order): a term per
    edge and head inside the LeakyReLU, GAT's edge features. edge_key and
    edge_value [E, H*d] (scaled-dot, dot, sigmoid, gatv2): each message's own
    key and value terms, its key k_j + edge_key, its value v_j + edge_value
    (TransformerConv's and GATv2Conv's edge features).
    dropout p in [0, 1) drops each message's weight in each head with
    probability p and scales the rest by 1/(1-p); which ones is a hash of
    (dropout_seed, destination, source, occurrence, head): the same seed
    drops the same messages, for any thread count, in the forward and in the
    backward."""

    def __init__(self, kind="scaled-dot", beta=None, softcap=None, slope=None, a_src=None,
                 a_dst=None, a=None, edge_bias=None, alibi=False, sigmoid_bias=None,
                 dropout=0.0, dropout_seed=0, edge_pre=None, edge_key=None, edge_value=None):
        if isinstance(kind, Score):
            self.__dict__.update(kind.__dict__)
            return
        if kind not in _KINDS:
            raise Error("score is %r; expected one of %s" % (kind, ", ".join(
                k for k in _KINDS if k not in ("scaled_dot", "gat"))), "invalid value")
        beta, softcap, slope, sigmoid_bias = (None if x is None else finite(x, name) for x, name in (
            (beta, "beta"), (softcap, "softcap"), (slope, "slope"), (sigmoid_bias, "sigmoid_bias")))
        self.kind, self.beta, self.softcap, self.slope = kind, beta, softcap, slope
        self.a_src, self.a_dst, self.a, self.edge_bias = a_src, a_dst, a, edge_bias
        self.alibi, self.sigmoid_bias = alibi, sigmoid_bias
        self.dropout = finite(dropout, "dropout")
        if not 0 <= self.dropout < 1:
            raise Error("dropout is %g; expected a probability in [0, 1)" % self.dropout,
                        "invalid value")
        self.dropout_seed = int(dropout_seed) & (2**64 - 1)
        self.edge_pre, self.edge_key, self.edge_value = edge_pre, edge_key, edge_value

    def c(self, graph, H, d, validate=True):
        """The ag_score_t for graph, H, d, and the arrays it points to (keep them).
        validate=False leaves the attention vectors to the rounds (the layer's)."""
        s = score_defaults(self.kind)
        for name in ("beta", "softcap", "slope"):
            if getattr(self, name) is not None:
                setattr(s, name, getattr(self, name))
        s.alibi = int(bool(self.alibi))
        s.dropout, s.dropout_seed = self.dropout, self.dropout_seed
        if self.sigmoid_bias is not None:
            s.has_sigmoid_bias, s.sigmoid_bias = 1, float(self.sigmoid_bias)
        keep = []
        vec_src = self.a if s.kind == _KINDS["gatv2"] else self.a_src
        for field, value, name in (("a_src", vec_src, "a" if s.kind == 4 else "a_src"),
                                   ("a_dst", self.a_dst, "a_dst")):
            if value is not None:
                arr = f32(value, name, (H, d))
                keep.append(arr)
                setattr(s, field, arr.ctypes.data)
        if self.edge_bias is not None:
            b = graph.to_slots(f32(self.edge_bias, "edge_bias", (graph.E,)))
            keep.append(b)
            s.edge_bias = b.ctypes.data
        for name, width in (("edge_pre", H), ("edge_key", H * d), ("edge_value", H * d)):
            if getattr(self, name) is not None:
                b = np.ascontiguousarray(graph.to_slots(f32(getattr(self, name), name,
                                                            (graph.E, width))))
                keep.append(b)
                setattr(s, name, b.ctypes.data)
        if validate:
            e = err()
            check(lib.ag_score_check(C.byref(s), C.byref(graph._nb), H, d, C.byref(e)), e)
        return s, keep


def score_of(score, kw):
    """A Score from a kind or a Score, with keyword options on top."""
    if isinstance(score, Score):
        if not kw:
            return score
        opts = dict(score.__dict__)
        opts.update(kw)
        return Score(**opts)
    return Score(score, **kw)


def _qkv(graph, heads, arrays):
    """Checks Q, K, V [N, H*d] (float32, C order, not copied when they are;
    finite, as the CLI refuses NaN in a file: ag_check_finite's words) and
    returns them with H and d."""
    N = graph.N
    heads = int(heads)
    out = []
    width = None
    for name, a in arrays:
        a = f32(a, name)
        if a.ndim != 2 or a.shape[0] != N:
            raise Error("%s has shape %s; the graph has %d nodes: expected [%d, H*d]"
                        % (name, list(a.shape), N, N), "invalid value")
        if width is None:
            width = a.shape[1]
        elif a.shape[1] != width:
            raise Error("%s has %d columns; %s has %d" % (name, a.shape[1], arrays[0][0], width),
                        "invalid value")
        if not any(a.ctypes.data == b.ctypes.data for b in out):   # q = k = v (GAT's): once
            check_finite(name, a)
        out.append(a)
    if heads < 1 or width % heads or width == 0:
        raise Error("heads is %d; expected a divisor of the width %d" % (heads, width),
                    "invalid value")
    return out, heads, width // heads


def out_array(a, what, shape):
    """An output array the library writes into: it must be C-contiguous float32
    already, or the results would go into a copy and never reach the caller."""
    if hasattr(a, "detach"):
        a = a.detach().numpy()
    if not isinstance(a, np.ndarray) or a.dtype != np.float32 or not a.flags.c_contiguous \
            or not a.flags.writeable:
        raise Error("%s must be a writeable C-contiguous float32 array (the results are "
                    "written into it)" % what, "invalid value")
    return f32(a, what, shape)


def attention(graph, q, k, v, heads=1, score="scaled-dot", out=None, lse=False, **score_kw):
    """One round of attention: M [N, H*d] with m_i = sum_j a_ij v_j over the
    in-edges j -> i. lse=True also returns the log-sum-exp [N, H] (softmax scores)."""
    (q, k, v), H, d = _qkv(graph, heads, [("q", q), ("k", k), ("v", v)])
    s, keep = score_of(score, score_kw).c(graph, H, d)
    M = np.empty_like(q) if out is None else out_array(out, "out", q.shape)
    opts = S.ag_attention_opts_t()
    L = None
    if lse:
        L = np.full((graph.N, H), -np.inf, np.float32)
        opts.lse = L.ctypes.data
    e = err()
    check(lib.ag_attention_ex(C.byref(graph._nb), q.ctypes.data, k.ctypes.data, v.ctypes.data,
                              H, d, C.byref(s), M.ctypes.data, C.byref(opts), C.byref(e)), e)
    return (M, L) if lse else M


def attention_kernel(graph, head_dim=64, score="scaled-dot", **score_kw):
    """The kernel attention on graph runs (the library's rule, ag_attention_kernel):
    "tiled", "blocks" (block-sparse lists of tiles), "gather" for plain dot-product
    scores, "generic" for the others."""
    s, keep = score_of(score, score_kw).c(graph, 1, head_dim, validate=False)
    return lib.ag_attention_kernel(C.byref(graph._nb), head_dim, C.byref(s)).decode()


def attention_weights(graph, q, k, heads=1, score="scaled-dot", **score_kw):
    """The attention weight of every edge and head, [E, H], in the graph's edge
    order (edge_index columns, CSR entries, igraph edge ids, pattern slots)."""
    (q, k), H, d = _qkv(graph, heads, [("q", q), ("k", k)])
    s, keep = score_of(score, score_kw).c(graph, H, d)
    W = np.empty((graph.E, H), np.float32)
    e = err()
    check(lib.ag_attention_weights(C.byref(graph._nb), q.ctypes.data, k.ctypes.data, H, d,
                                   C.byref(s), 0, graph.N, W.ctypes.data, C.byref(e)), e)
    return graph.from_slots(W)


def attention_stats(graph, q, k, heads=1, score="scaled-dot", **score_kw):
    """Per node, averaged over heads: entropy (nats), mean distance |i - j| and
    largest weight of its attention (NaN without in-edges)."""
    (q, k), H, d = _qkv(graph, heads, [("q", q), ("k", k)])
    s, keep = score_of(score, score_kw).c(graph, H, d)
    ent, dist, mx = (np.empty(graph.N, np.float64) for _ in range(3))
    e = err()
    check(lib.ag_attention_stats(C.byref(graph._nb), q.ctypes.data, k.ctypes.data, H, d,
                                 C.byref(s), ent.ctypes.data, dist.ctypes.data, mx.ctypes.data,
                                 C.byref(e)), e)
    return dict(entropy=ent, distance=dist, max_weight=mx)


Grads = namedtuple("Grads", "dq dk dv d_a_src d_a_dst d_edge_bias d_edge_pre d_edge_key "
                            "d_edge_value")


def attention_backward(graph, q, k, v, dm, heads=1, score="scaled-dot", m=None, lse=None,
                       edge_bias_grad=False, edge_pre_grad=False, edge_kv_grad=False,
                       out=(None, None, None), **score_kw):
    """Gradients of L = sum(dm * M) for M = attention(graph, q, k, v): a Grads of
    dq, dk, dv [N, H*d], d_a_src, d_a_dst [H, d] (additive; gatv2's a in
    d_a_src; else None), d_edge_bias [E] in edge order (when asked for, or
    when the score has an edge bias), d_edge_pre [E, H] (additive: when
    asked for, or when the score has edge terms), d_edge_key and d_edge_value
    [E, H*d] (when asked for, or when the score has them). m and lse, the
    forward's, save a forward. out: arrays for dq, dk, dv (None: new ones),
    writeable C-contiguous float32 [N, H*d], overwritten."""
    (q, k, v, dm), H, d = _qkv(graph, heads, [("q", q), ("k", k), ("v", v), ("dm", dm)])
    sc = score_of(score, score_kw)
    s, keep = sc.c(graph, H, d)
    g = S.ag_attention_grads_t()
    dq, dk, dv = (np.empty_like(q) if o is None else out_array(o, name, q.shape)
                  for o, name in zip(out, ("dq", "dk", "dv")))
    g.dQ, g.dK, g.dV = dq.ctypes.data, dk.ctypes.data, dv.ctypes.data
    da_src = da_dst = deb = None
    if sc.kind in ("additive", "gat", "gatv2"):
        da_src = np.empty((H, d), np.float32)
        g.d_a_src = da_src.ctypes.data
        if sc.kind != "gatv2":
            da_dst = np.empty((H, d), np.float32)
            g.d_a_dst = da_dst.ctypes.data
    if edge_bias_grad or sc.edge_bias is not None:
        deb = np.empty(graph.E, np.float32)
        g.d_edge_bias = deb.ctypes.data
    dep = None
    if edge_pre_grad or sc.edge_pre is not None:
        dep = np.empty((graph.E, H), np.float32)
        g.d_edge_pre = dep.ctypes.data
    dek = dev = None
    if edge_kv_grad or sc.edge_key is not None or sc.edge_value is not None:
        dek, dev = (np.empty((graph.E, H * d), np.float32) for _ in range(2))
        g.d_edge_key, g.d_edge_value = dek.ctypes.data, dev.ctypes.data
    m = f32(m, "m", q.shape) if m is not None else None
    if lse is not None:
        lse = f32(lse, "lse", (graph.N, H))
    e = err()
    check(lib.ag_attention_backward(C.byref(graph._nb), q.ctypes.data, k.ctypes.data,
                                    v.ctypes.data, H, d, C.byref(s), m.ctypes.data if m is not None else None,
                                    lse.ctypes.data if lse is not None else None,
                                    dm.ctypes.data, C.byref(g), C.byref(e)), e)
    edges = lambda a: graph.from_slots(a) if a is not None else None
    return Grads(dq, dk, dv, da_src, da_dst, edges(deb), edges(dep), edges(dek), edges(dev))
