"""GraphGPS's layer (Rampasek et al. 2022) with PyG's GPSConv arguments and
state_dict: a local message-passing layer and a global attention, each with
dropout, a residual and a norm, added, then a feed-forward block:

    h1 = norm1(x + dropout(conv(x, edge_index)))
    h2 = norm2(x + dropout(attention(x)))
    out = norm3(h1 + h2 + mlp(h1 + h2))

PyG's global attention is torch's MultiheadAttention on padded batches: an
N x N matrix a graph. Here it runs on a pattern's edges by the fused kernel,
with the same weights (attn.in_proj_weight, attn.out_proj): `pattern`
"complete" (the default) is every pair within each graph of the batch, PyG's
attention exactly, in memory O(N d); "expander:3" (Exphormer's), "hops:2"
or "graph+global:1" (over edge_index's graph) are sparser ones."""
import torch
import torch.nn.functional as F
from torch import nn

from ._lib import Error
from .adjacency import adjacency
from .functional import graph_attention
from .graph import Graph, pattern_info

try:        # PyG's resolvers when it is here: its norms (and their state_dict keys) exactly
    from torch_geometric.nn.resolver import activation_resolver, normalization_resolver
except ImportError:                              # pragma: no cover - exercised without PyG
    activation_resolver = normalization_resolver = None


class _BatchNorm(nn.Module):
    """PyG's BatchNorm without PyG: torch's BatchNorm1d as `module` (its keys)."""

    def __init__(self, channels, **kw):
        super().__init__()
        self.module = nn.BatchNorm1d(channels, **kw)

    def reset_parameters(self):
        self.module.reset_parameters()

    def forward(self, x):
        return self.module(x)


_ACTS = {"relu": nn.ReLU, "gelu": nn.GELU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU,
         "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "silu": nn.SiLU, "swish": nn.SiLU}


def _act(act, kw):
    if activation_resolver is not None:
        return activation_resolver(act, **kw)
    if isinstance(act, str) and act.lower() in _ACTS:
        return _ACTS[act.lower()](**kw)
    if callable(act):
        return act
    raise Error("GPSConv: act=%r; expected %s or a module (PyG's resolver takes more)"
                % (act, ", ".join(sorted(_ACTS))), "invalid value")


def _norm(norm, channels, kw):
    if norm is None:
        return None
    if normalization_resolver is not None:
        return normalization_resolver(norm, channels, **kw)
    if norm in ("batch_norm", "batchnorm"):
        return _BatchNorm(channels, **kw)
    raise Error("GPSConv: norm=%r needs PyG's resolver (torch_geometric is not importable "
                "here); without it: 'batch_norm' or None" % (norm,), "invalid value")


class GPSConv(nn.Module):
    """PyG's GPSConv(channels, conv, heads=1, dropout=0.0, act='relu',
    act_kwargs=None, norm='batch_norm', norm_kwargs=None, attn_type='multihead',
    attn_kwargs=None), its global attention on `pattern`'s edges (keyword
    only; see the module's text). attn_type 'multihead' only (PyG's performer
    is an approximation of what the kernel computes exactly); attn_kwargs:
    dropout and bias, as MultiheadAttention takes them."""

    def __init__(self, channels, conv, heads=1, dropout=0.0, act="relu", act_kwargs=None,
                 norm="batch_norm", norm_kwargs=None, attn_type="multihead", attn_kwargs=None,
                 *, pattern="complete"):
        super().__init__()
        if attn_type != "multihead":
            raise Error("GPSConv: attn_type=%r; the fused kernel computes 'multihead' "
                        "attention exactly (PyG's 'performer' approximates it)" % (attn_type,),
                        "invalid value")
        attn_kwargs = dict(attn_kwargs or {})
        unknown = set(attn_kwargs) - {"dropout", "bias"}
        if unknown:
            raise Error("GPSConv: attn_kwargs %s; taken: dropout, bias" % sorted(unknown),
                        "invalid value")
        self.channels, self.conv, self.heads, self.dropout = channels, conv, heads, dropout
        self.attn_type = attn_type
        self.attn = nn.MultiheadAttention(channels, heads, batch_first=True, **attn_kwargs)
        self.mlp = nn.Sequential(nn.Linear(channels, channels * 2), _act(act, act_kwargs or {}),
                                 nn.Dropout(dropout), nn.Linear(channels * 2, channels),
                                 nn.Dropout(dropout))
        norm_kwargs = norm_kwargs or {}
        self.norm1 = _norm(norm, channels, norm_kwargs)
        self.norm2 = _norm(norm, channels, norm_kwargs)
        self.norm3 = _norm(norm, channels, norm_kwargs)
        self.norm_with_batch = False
        if self.norm1 is not None:
            import inspect
            self.norm_with_batch = "batch" in inspect.signature(self.norm1.forward).parameters
        self.pattern = str(pattern)
        virtual, self._reads_graph = pattern_info(self.pattern)   # a mistake now, not later
        if virtual:
            raise Error("GPSConv: pattern %r appends virtual nodes; the global attention "
                        "runs on the input nodes" % self.pattern, "invalid value")

    def reset_parameters(self):
        if self.conv is not None:
            self.conv.reset_parameters()
        self.attn._reset_parameters()
        for m in self.mlp:
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
        for n in (self.norm1, self.norm2, self.norm3):
            if n is not None:
                n.reset_parameters()

    def _global_graph(self, edge_index, N, batch):
        """The pattern within each graph of the batch, compiled once per input."""
        counts = None
        if batch is not None:
            batch = torch.as_tensor(batch)
            if batch.dim() != 1 or batch.numel() != N:
                raise Error("GPSConv: batch has shape %s; expected [%d], a graph per node"
                            % (tuple(batch.shape), N), "invalid value")
            if N and (batch[1:] < batch[:-1]).any():
                raise Error("GPSConv: batch is not sorted; PyG's batches list each graph's "
                            "nodes together, in order", "invalid value")
            counts = tuple(int(c) for c in torch.bincount(batch) if int(c) > 0)
        key = ("gps", self.pattern, counts)
        adj = adjacency(self, edge_index, N, N)
        if key not in adj._graphs:
            spec = self.pattern if counts is None or len(counts) == 1 else \
                "blocks:%s&(%s)" % (",".join(map(str, counts)), self.pattern)
            adj._graphs[key] = Graph.pattern(spec, n=N, graph=adj.graph(False)
                                             if self._reads_graph else None)
        return adj._graphs[key]

    def _attention(self, x, edge_index, batch):
        N, C = x.shape
        g = self._global_graph(edge_index, N, batch)
        dtype = x.dtype
        qkv = F.linear(x.float(), self.attn.in_proj_weight.float(),
                       None if self.attn.in_proj_bias is None else self.attn.in_proj_bias.float())
        q, k, v = (t.contiguous() for t in qkv.chunk(3, dim=-1))
        p = self.attn.dropout if self.training else 0.0
        seed = int(torch.randint(0, 2 ** 62, (1,)).item()) if p > 0 else 0
        m = graph_attention(q, k, v, g, heads=self.heads, dropout=p, dropout_seed=seed)
        return self.attn.out_proj(m.to(dtype))

    def _normed(self, norm, h, batch):
        if norm is None:
            return h
        return norm(h, batch=batch) if self.norm_with_batch else norm(h)

    def forward(self, x, edge_index, batch=None, **kwargs):
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.size(1) != self.channels:
            raise Error("GPSConv: x is %s; expected a tensor [N, %d]" % (
                tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__,
                self.channels), "invalid value")
        hs = []
        if self.conv is not None:   # local message passing
            h = self.conv(x, edge_index, **kwargs)
            h = F.dropout(h, p=self.dropout, training=self.training)
            hs.append(self._normed(self.norm1, h + x, batch))
        h = self._attention(x, edge_index, batch)   # global attention on the pattern
        h = F.dropout(h, p=self.dropout, training=self.training)
        hs.append(self._normed(self.norm2, h + x, batch))
        out = sum(hs)
        out = out + self.mlp(out)
        return self._normed(self.norm3, out, batch)

    def __repr__(self):
        return "%s(%d, conv=%s, heads=%d, attn_type=%s, pattern=%r)" % (
            type(self).__name__, self.channels, self.conv, self.heads, self.attn_type,
            self.pattern)
