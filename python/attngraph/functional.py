"""Differentiable functions over the library (CPU float32 tensors), as
torch.nn.functional is to torch.nn: graph_attention (the library's forward
and backward under autograd) and dropout (its counter-based mask). The layers
are attngraph.nn's."""
import threading

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from . import ops, train as _train
from ._lib import Error
from .graph import Graph

_SOFTMAX = ("scaled-dot", "scaled_dot", "dot", "cosine", "additive", "gat", "gatv2")


def _np(t, name):
    """A CPU float32 tensor as a numpy array sharing its memory (contiguous first)."""
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s is a %s; expected a torch.Tensor" % (name, type(t).__name__))
    if t.device.type != "cpu" or t.dtype != torch.float32:
        raise TypeError("%s is %s on %s; attngraph runs CPU float32 tensors"
                        % (name, t.dtype, t.device))
    return t.detach().contiguous().numpy()


_SCRATCH = threading.local()


def _scratch(slot, like):
    """A float32 array of like's shape kept for this thread's next call (slot
    0 or 1): its content is garbage, and gone at the next call."""
    kept = getattr(_SCRATCH, "arrays", None)
    if kept is None:
        kept = _SCRATCH.arrays = [None, None]
    if kept[slot] is None or kept[slot].shape != tuple(like.shape):
        kept[slot] = np.empty(tuple(like.shape), np.float32)
    return kept[slot]


class _GraphAttention(torch.autograd.Function):
    """same: "qkv" when q, k and v are one tensor (GAT's), "kv" when k and v
    are (GATv2's), else None; the duplicates come as None and their gradients
    are added into the one given, in place (not as autograd's new tensors)."""

    @staticmethod
    def forward(ctx, graph, heads, kind, kw, same, q, k, v, a_src, a_dst, edge_bias, edge_pre,
                edge_key, edge_value):
        if same == "qkv":
            k = v = q
        elif same == "kv":
            v = k
        qn, kn, vn, asn, adn, ebn, epn, ekn, evn = (_np(t, n) for t, n in (
            (q, "q"), (k, "k"), (v, "v"), (a_src, "a_src"), (a_dst, "a_dst"),
            (edge_bias, "edge_bias"), (edge_pre, "edge_pre"), (edge_key, "edge_key"),
            (edge_value, "edge_value")))
        vec = dict(a=asn) if kind == "gatv2" else dict(a_src=asn, a_dst=adn)
        m, lse = ops.attention(graph, qn, kn, vn, heads, ops.Score(
            kind, edge_bias=ebn, edge_pre=epn, edge_key=ekn, edge_value=evn, **vec, **kw),
            lse=True)
        mt = torch.from_numpy(m)
        # saved as tensors, so autograd refuses a backward after they were changed in place
        ctx.save_for_backward(q, k, v, a_src, a_dst, edge_bias, edge_pre, edge_key, edge_value,
                              mt, torch.from_numpy(lse) if kind in _SOFTMAX else None)
        ctx.graph, ctx.heads, ctx.kind, ctx.kw, ctx.same = graph, heads, kind, kw, same
        return mt

    @staticmethod
    @once_differentiable
    def backward(ctx, dm):
        q, k, v, a_src, a_dst, edge_bias, edge_pre, edge_key, edge_value, m, lse = \
            ctx.saved_tensors
        asn, adn, ebn = _np(a_src, "a_src"), _np(a_dst, "a_dst"), _np(edge_bias, "edge_bias")
        vec = dict(a=asn) if ctx.kind == "gatv2" else dict(a_src=asn, a_dst=adn)
        score = ops.Score(ctx.kind, edge_bias=ebn, edge_pre=_np(edge_pre, "edge_pre"),
                          edge_key=_np(edge_key, "edge_key"),
                          edge_value=_np(edge_value, "edge_value"), **vec, **ctx.kw)
        # the gradients only added into another's (dk, dv of GAT's one tensor) are
        # written into memory kept from the last call: fresh memory of that size
        # costs its page faults every step
        out = (None, _scratch(0, q) if ctx.same == "qkv" else None,
               _scratch(1, q) if ctx.same else None)
        g = ops.attention_backward(ctx.graph, _np(q, "q"), _np(k, "k"), _np(v, "v"),
                                   _np(dm, "grad"), ctx.heads, score, m=m.numpy(),
                                   lse=lse.numpy() if lse is not None else None,
                                   edge_bias_grad=edge_bias is not None, out=out)
        dq, dk, dv = g.dq, g.dk, g.dv
        if ctx.same == "qkv":
            dq = np.add(np.add(dq, dk, out=dq), dv, out=dq)
            dk = dv = None
        elif ctx.same == "kv":
            dk, dv = np.add(dk, dv, out=dk), None
        need = ctx.needs_input_grad
        t = lambda a, i: torch.from_numpy(a) if need[i] and a is not None else None
        return (None, None, None, None, None, t(dq, 5), t(dk, 6), t(dv, 7), t(g.d_a_src, 8),
                t(g.d_a_dst, 9), t(g.d_edge_bias, 10), t(g.d_edge_pre, 11), t(g.d_edge_key, 12),
                t(g.d_edge_value, 13))


def graph_attention(q, k, v, graph, heads=1, score="scaled-dot", a_src=None, a_dst=None,
                    a=None, edge_bias=None, edge_pre=None, edge_key=None, edge_value=None,
                    **score_kw):
    """Attention over graph's edges, differentiable: M [N, H*d] from q, k, v
    [N, H*d] (CPU float32). Gradients flow to q, k, v and to the score's
    tensors: a_src, a_dst [H, d] (additive), a [H, d] (gatv2), edge_bias [E]
    and edge_pre [E, H] (additive's terms inside the LeakyReLU), edge_key and
    edge_value [E, H*d] (each message's own key and value terms), in the
    graph's edge order. score_kw: beta, softcap, slope, alibi,
    sigmoid_bias, dropout, dropout_seed (ops.Score)."""
    if not isinstance(graph, Graph):
        raise TypeError("graph is a %s; expected an attngraph.Graph" % type(graph).__name__)
    if isinstance(score, ops.Score):      # its options; tensors come as arguments
        score_kw = dict({k: getattr(score, k) for k in (
            "beta", "softcap", "slope", "alibi", "sigmoid_bias", "dropout", "dropout_seed")},
            **score_kw)
        score = score.kind
    kind = score
    if kind == "gatv2":
        a_src = a
    tensors = (q, k, v, a_src, a_dst, edge_bias, edge_pre, edge_key, edge_value)
    if not torch.is_grad_enabled() or not any(t is not None and t.requires_grad for t in tensors):
        # nothing to differentiate: the forward alone, without autograd's bookkeeping
        arrays = [_np(t, n) for t, n in zip(tensors, ("q", "k", "v", "a_src", "a_dst",
                                                       "edge_bias", "edge_pre", "edge_key",
                                                       "edge_value"))]
        vec = dict(a=arrays[3]) if kind == "gatv2" else dict(a_src=arrays[3], a_dst=arrays[4])
        return torch.from_numpy(ops.attention(graph, *arrays[:3], int(heads), ops.Score(
            kind, edge_bias=arrays[5], edge_pre=arrays[6], edge_key=arrays[7],
            edge_value=arrays[8], **vec, **score_kw)))
    same = "qkv" if q is k and k is v else "kv" if k is v else None
    if same:     # one tensor's gradient added up in place, not by autograd
        tensors = (q, None if same == "qkv" else k, None) + tensors[3:]
    return _GraphAttention.apply(graph, int(heads), kind, score_kw, same, *tensors)


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p, seed):
        ctx.p, ctx.seed = p, seed
        return torch.from_numpy(_train.dropout(_np(x, "x"), p, seed))

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):   # the same mask: the same call on dy
        return torch.from_numpy(_train.dropout(_np(dy, "grad"), ctx.p, ctx.seed)), None, None


def dropout(x, p=0.5, training=True, seed=None):
    """F.dropout for CPU float32 [rows, cols] tensors, with the library's
    counter-based mask (attngraph.dropout): a few milliseconds where torch's
    bernoulli_ takes tens on a 2,708 x 1,433 input. seed None: one drawn from
    torch's generator (torch.manual_seed reproduces it). Not training, or p 0:
    x itself."""
    if not training or p == 0:
        return x
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    if x.dim() != 2:
        raise Error("x has shape %s; attngraph.nn.dropout takes [rows, cols]"
                    % list(x.shape), "invalid value")
    return _Dropout.apply(x, float(p), int(seed))
