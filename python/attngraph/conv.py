"""PyTorch Geometric drop-ins: GATConv, GATv2Conv and TransformerConv with
PyG 2.4's constructor arguments, parameter names (a PyG layer's state_dict()
loads unchanged) and forward(x, edge_index, edge_attr=None,
return_attention_weights=None), computed by the library's fused attention
(graph_attention) instead of PyG's scatter over an [E, H, C] message tensor.
Imported as attngraph.nn.GATConv (or attngraph.torch.GATConv) and so on.

Edge features (edge_dim) go to the kernel as the score's per-message terms:
GATConv's a term per edge and head inside the LeakyReLU (ops.Score's
edge_pre), GATv2Conv's a vector inside it (edge_key), TransformerConv's a
vector added to each message's key and value (edge_key, edge_value). What PyG
can do and these cannot (a pair of source and target features, SparseTensor
adjacency, `size`) is refused with an Error naming it, never approximated."""
import math

import torch
from torch import nn

from . import functional, ops
from ._lib import Error
from .graph import Graph


def _glorot(t):
    """PyG's inits.glorot: uniform in +-sqrt(6 / (fan_in + fan_out)) of the last two dims."""
    if t is not None:
        bound = math.sqrt(6.0 / (t.size(-2) + t.size(-1)))
        with torch.no_grad():
            t.uniform_(-bound, bound)


def _uniform_bias(lin):
    """PyG's Linear bias: uniform in +-1/sqrt(in_channels)."""
    if lin.bias is not None:
        bound = 1.0 / math.sqrt(lin.in_features)
        with torch.no_grad():
            lin.bias.uniform_(-bound, bound)


def _reduce_by(values, index, n, how):
    """PyG's scatter(values, index, dim_size=n, reduce=how) over rows: a row per
    node (0 where no row goes)."""
    out = torch.zeros(n, values.size(1), dtype=values.dtype)
    if how in ("mean", "add"):
        out = out.index_add(0, index, values)
        if how == "mean":
            count = torch.zeros(n, dtype=values.dtype).index_add(
                0, index, torch.ones(index.numel(), dtype=values.dtype))
            out = out / count.clamp(min=1)[:, None]
        return out
    reduce = {"max": "amax", "min": "amin", "mul": "prod"}[how]
    return out.scatter_reduce(0, index[:, None].expand_as(values), values, reduce,
                              include_self=False)


def _fill_value(layer, fill):
    if not (fill in ("mean", "add", "max", "min", "mul") or
            isinstance(fill, (int, float, torch.Tensor))):
        raise Error("%s: fill_value %r; expected 'mean', 'add', 'max', 'min', 'mul', a number "
                    "or a tensor" % (layer, fill), "invalid value")
    return fill


def _int_channels(layer, in_channels):
    if not isinstance(in_channels, int):
        raise Error("%s: in_channels %r; attngraph's drop-ins take one int (a pair of source "
                    "and target sizes, for bipartite graphs, is not supported)"
                    % (layer, in_channels), "invalid value")
    if in_channels < 1:
        raise Error("%s: in_channels is %d; expected >= 1 (PyG's lazy -1 is not supported)"
                    % (layer, in_channels), "invalid value")
    return in_channels


def _refuse(layer, what):
    raise Error("%s: %s is not supported by attngraph's drop-in" % (layer, what),
                "invalid value")


class _GraphCache:
    """The attngraph.Graph of the last edge_index seen: built again only when
    another tensor comes, or the same one changed in place (its _version),
    or the node count differs. The tensor is kept, so its memory cannot be
    reused by another edge_index of the same address."""

    def __init__(self):
        self.key = self.graph = None

    def get(self, layer, edge_index, n, self_loops):
        if isinstance(edge_index, Graph):
            if edge_index.N != n:
                raise Error("%s: the graph has %d nodes, x has %d rows"
                            % (layer, edge_index.N, n), "invalid value")
            return edge_index
        if not isinstance(edge_index, torch.Tensor):
            _refuse(layer, "an edge_index of type %s (a SparseTensor or an adjacency matrix)"
                    % type(edge_index).__name__)
        key = (edge_index, edge_index._version, n, self_loops)
        if self.key is None or self.key[0] is not edge_index or self.key[1:] != key[1:]:
            ei = edge_index.detach().cpu().numpy()
            self.graph = Graph.from_edge_index(ei, num_nodes=n, self_loops=self_loops)
            self.key = key
        return self.graph


class _Conv(nn.Module):
    """What the three drop-ins share: the graph cache, the checks of forward's
    arguments, dropout's seed, heads concatenated or averaged, the weights."""

    def __init__(self, in_channels, out_channels, heads, concat, dropout, edge_dim):
        super().__init__()
        name = type(self).__name__
        self.in_channels = _int_channels(name, in_channels)
        self.out_channels, self.heads, self.concat = int(out_channels), int(heads), bool(concat)
        if self.out_channels < 1 or self.heads < 1:
            raise Error("%s: out_channels %d, heads %d; expected both >= 1"
                        % (name, self.out_channels, self.heads), "invalid value")
        self.dropout = float(dropout)
        if not 0 <= self.dropout < 1:
            raise Error("%s: dropout %g; expected a probability in [0, 1)"
                        % (name, self.dropout), "invalid value")
        self.edge_dim = None if edge_dim is None else int(edge_dim)
        if self.edge_dim is not None and self.edge_dim < 1:
            raise Error("%s: edge_dim %d; expected >= 1" % (name, self.edge_dim),
                        "invalid value")
        self._graphs = _GraphCache()

    def _edge_features(self, edge_attr, edge_index, n, loops, fill=None):
        """edge_attr [E, edge_dim] in the graph's edge order: with loops, the
        edges less their self-loops, then one loop per node with fill's
        features ('mean' of the node's incoming edges', 'add', 'max', 'min',
        'mul', a number or a tensor: PyG's remove_self_loops, add_self_loops)."""
        name = type(self).__name__
        if edge_attr is None:
            raise Error("%s: made with edge_dim %d; forward needs edge_attr"
                        % (name, self.edge_dim), "invalid value")
        if not isinstance(edge_index, torch.Tensor):
            _refuse(name, "edge_attr with an attngraph.Graph (give edge_index)")
        ea = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        if ea.dim() != 2 or ea.size(0) != edge_index.size(1) or ea.size(1) != self.edge_dim:
            raise Error("%s: edge_attr is %s; expected [%d, %d] (an edge_index column each)"
                        % (name, tuple(edge_attr.shape), edge_index.size(1), self.edge_dim),
                        "invalid value")
        if not loops:
            return ea
        keep = edge_index[0] != edge_index[1]
        ea, dst = ea[keep], edge_index[1][keep]
        if isinstance(fill, str):
            added = _reduce_by(ea, dst, n, fill)
        else:
            added = torch.as_tensor(fill, dtype=ea.dtype).expand(n, ea.size(1))
        return torch.cat([ea, added], dim=0)

    def _graph(self, x, edge_index, edge_attr, self_loops):
        name = type(self).__name__
        if not isinstance(x, torch.Tensor):
            _refuse(name, "a pair of source and target features")
        if x.dim() != 2 or x.size(1) != self.in_channels:
            raise Error("%s: x is %s; expected [N, %d]" % (name, tuple(x.shape),
                                                         self.in_channels), "invalid value")
        if edge_attr is not None and self.edge_dim is None:
            raise Error("%s: edge_attr given to a layer made without edge_dim" % name,
                        "invalid value")
        return self._graphs.get(name, edge_index, x.size(0), self_loops)

    def _attention(self, q, k, v, graph, **score):
        """M [N, H*C], and the score's options with dropout while training
        (a seed from torch's generator: torch.manual_seed reproduces it)."""
        if self.training and self.dropout > 0:
            score.update(dropout=self.dropout,
                         dropout_seed=int(torch.randint(0, 2**62, (1,)).item()))
        return functional.graph_attention(q, k, v, graph, heads=self.heads, **score), score

    def _heads_out(self, m, bias=None):
        """The heads concatenated or averaged, plus bias (None: none)."""
        out = m if self.concat else m.view(-1, self.heads, self.out_channels).mean(dim=1)
        return out if bias is None else out + bias

    def _result(self, out, want, graph, q, k, score, drop):
        """forward's return: out, or (out, (edge_index, alpha)) when
        return_attention_weights is True (drop: alpha after dropout)."""
        if isinstance(want, bool) and want:
            return out, self._weights(graph, q, k, score, drop)
        return out

    def _weights(self, graph, q, k, score, drop):
        """PyG's (edge_index, alpha [E, H]) in the graph's edge order (edge_index
        after the self-loops' change), without gradients; alpha after dropout
        when drop (GATConv), before it otherwise (GATv2Conv, TransformerConv)."""
        if not drop:
            score = {n: s for n, s in score.items() if n not in ("dropout", "dropout_seed")}
        with torch.no_grad():
            a = {n: functional._np(t, n) for n, t in score.items() if isinstance(t, torch.Tensor)}
            rest = {n: v for n, v in score.items() if not isinstance(v, torch.Tensor)}
            w = ops.attention_weights(graph, functional._np(q, "q"), functional._np(k, "k"),
                                      heads=self.heads, **rest, **a)
        return torch.from_numpy(graph.edge_index.astype("int64")), torch.from_numpy(w)

    def __repr__(self):
        return "%s(%d, %d, heads=%d)" % (type(self).__name__, self.in_channels,
                                         self.out_channels, self.heads)


class GATConv(_Conv):
    """PyG's GATConv (Velickovic et al. 2018): x' = lin_src(x) [N, H, C];
    alpha_ij = softmax_j LeakyReLU(att_src . x'_j + att_dst . x'_i), dropout
    on alpha while training; out_i = sum_j alpha_ij x'_j, heads concatenated
    (or averaged), plus bias. add_self_loops: every self-loop removed, one
    added per node, as PyG does. With edge_dim, edge_attr [E, edge_dim] adds
    att_edge . lin_edge(e_ij) inside the LeakyReLU, the added self-loops'
    features being fill_value ('mean' of the node's incoming edges', or a
    number, or a tensor). state_dict: lin_src.weight, lin_dst.weight (the same
    module), att_src, att_dst, bias (and lin_edge.weight, att_edge)."""

    def __init__(self, in_channels, out_channels, heads=1, concat=True, negative_slope=0.2,
                 dropout=0.0, add_self_loops=True, edge_dim=None, fill_value="mean",
                 bias=True, **kwargs):
        if kwargs:
            _refuse("GATConv", "the argument(s) %s" % ", ".join(sorted(kwargs)))
        super().__init__(in_channels, out_channels, heads, concat, dropout, edge_dim)
        H, C = self.heads, self.out_channels
        self.negative_slope, self.add_self_loops = float(negative_slope), bool(add_self_loops)
        self.fill_value = _fill_value("GATConv", fill_value)
        self.lin_src = nn.Linear(self.in_channels, H * C, bias=False)
        self.lin_dst = self.lin_src
        self.att_src = nn.Parameter(torch.empty(1, H, C))
        self.att_dst = nn.Parameter(torch.empty(1, H, C))
        if self.edge_dim is not None:
            self.lin_edge = nn.Linear(self.edge_dim, H * C, bias=False)
            self.att_edge = nn.Parameter(torch.empty(1, H, C))
        else:
            self.lin_edge = None
            self.register_parameter("att_edge", None)
        self.bias = nn.Parameter(torch.empty(H * C if concat else C)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        _glorot(self.lin_src.weight)
        _glorot(self.att_src)
        _glorot(self.att_dst)
        if self.lin_edge is not None:
            _glorot(self.lin_edge.weight)
            _glorot(self.att_edge)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x, edge_index, edge_attr=None, size=None, return_attention_weights=None):
        if size is not None:
            _refuse("GATConv", "size")
        g = self._graph(x, edge_index, edge_attr, "replace" if self.add_self_loops else "keep")
        H, C = self.heads, self.out_channels
        xs = self.lin_src(x)
        extra = {}
        if self.edge_dim is not None:   # att_edge . lin_edge(e), inside the LeakyReLU
            ea = self._edge_features(edge_attr, edge_index, x.size(0), self.add_self_loops,
                                     self.fill_value)
            e = self.lin_edge(ea).view(-1, H, C)
            extra["edge_pre"] = (e * self.att_edge).sum(dim=-1)
        m, score = self._attention(xs, xs, xs, g, score="additive",
                                   a_src=self.att_src.view(H, C), a_dst=self.att_dst.view(H, C),
                                   slope=self.negative_slope, **extra)
        return self._result(self._heads_out(m, self.bias), return_attention_weights, g, xs, xs,
                            score, drop=True)


class GATv2Conv(_Conv):
    """PyG's GATv2Conv (Brody et al. 2022): x_l = lin_l(x), x_r = lin_r(x)
    (the same with share_weights); alpha_ij = softmax_j att . LeakyReLU(x_r,i +
    x_l,j), dropout while training; out_i = sum_j alpha_ij x_l,j, heads
    concatenated or averaged, plus bias. With edge_dim, lin_edge(e_ij) is added
    inside the LeakyReLU (the message's key term), self-loops' features by
    fill_value as GATConv's. state_dict: lin_l.weight, lin_l.bias,
    lin_r.weight, lin_r.bias, att, bias (and lin_edge.weight)."""

    def __init__(self, in_channels, out_channels, heads=1, concat=True, negative_slope=0.2,
                 dropout=0.0, add_self_loops=True, edge_dim=None, fill_value="mean",
                 bias=True, share_weights=False, **kwargs):
        if kwargs:
            _refuse("GATv2Conv", "the argument(s) %s" % ", ".join(sorted(kwargs)))
        super().__init__(in_channels, out_channels, heads, concat, dropout, edge_dim)
        H, C = self.heads, self.out_channels
        self.negative_slope, self.add_self_loops = float(negative_slope), bool(add_self_loops)
        self.fill_value = _fill_value("GATv2Conv", fill_value)
        self.share_weights = bool(share_weights)
        self.lin_l = nn.Linear(self.in_channels, H * C, bias=bias)
        self.lin_r = self.lin_l if share_weights else nn.Linear(self.in_channels, H * C,
                                                                 bias=bias)
        self.att = nn.Parameter(torch.empty(1, H, C))
        self.lin_edge = (nn.Linear(self.edge_dim, H * C, bias=False)
                         if self.edge_dim is not None else None)
        self.bias = nn.Parameter(torch.empty(H * C if concat else C)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        for lin in (self.lin_l, self.lin_r):
            _glorot(lin.weight)
            _uniform_bias(lin)
        if self.lin_edge is not None:
            _glorot(self.lin_edge.weight)
        _glorot(self.att)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x, edge_index, edge_attr=None, return_attention_weights=None):
        g = self._graph(x, edge_index, edge_attr, "replace" if self.add_self_loops else "keep")
        H, C = self.heads, self.out_channels
        xl = self.lin_l(x)
        xr = xl if self.share_weights else self.lin_r(x)
        extra = {}
        if self.edge_dim is not None:   # x_r,i + x_l,j + lin_edge(e_ij) in the LeakyReLU
            extra["edge_key"] = self.lin_edge(self._edge_features(
                edge_attr, edge_index, x.size(0), self.add_self_loops, self.fill_value))
        m, score = self._attention(xr, xl, xl, g, score="gatv2", a=self.att.view(H, C),
                                   slope=self.negative_slope, **extra)
        return self._result(self._heads_out(m, self.bias), return_attention_weights, g, xr, xl,
                            score, drop=False)


class TransformerConv(_Conv):
    """PyG's TransformerConv (Shi et al. 2021): alpha_ij = softmax_j
    (W_q x_i) . (W_k x_j) / sqrt(C), dropout while training; out_i = sum_j
    alpha_ij W_v x_j, heads concatenated or averaged; with root_weight, plus
    lin_skip(x_i), gated by beta = sigmoid(lin_beta([out, skip, out - skip]))
    when beta=True. With edge_dim, e = lin_edge(e_ij) is added to the key and
    to the value of each message. No self-loops are added (as PyG).
    state_dict: lin_key, lin_query, lin_value, lin_skip (weight, bias),
    lin_beta.weight, lin_edge.weight."""

    def __init__(self, in_channels, out_channels, heads=1, concat=True, beta=False,
                 dropout=0.0, edge_dim=None, bias=True, root_weight=True, **kwargs):
        if kwargs:
            _refuse("TransformerConv", "the argument(s) %s" % ", ".join(sorted(kwargs)))
        super().__init__(in_channels, out_channels, heads, concat, dropout, edge_dim)
        H, C, D = self.heads, self.out_channels, self.in_channels
        self.beta, self.root_weight = bool(beta) and bool(root_weight), bool(root_weight)
        self.lin_key = nn.Linear(D, H * C)
        self.lin_query = nn.Linear(D, H * C)
        self.lin_value = nn.Linear(D, H * C)
        self.lin_edge = nn.Linear(self.edge_dim, H * C, bias=False) if edge_dim else None
        width = H * C if concat else C
        self.lin_skip = nn.Linear(D, width, bias=bias)   # PyG makes it even unused
        self.lin_beta = nn.Linear(3 * width, 1, bias=False) if self.beta else None

    def reset_parameters(self):
        for lin in (self.lin_key, self.lin_query, self.lin_value, self.lin_edge, self.lin_skip,
                    self.lin_beta):
            if lin is not None:
                lin.reset_parameters()

    def forward(self, x, edge_index, edge_attr=None, return_attention_weights=None):
        g = self._graph(x, edge_index, edge_attr, "keep")
        q, k, v = self.lin_query(x), self.lin_key(x), self.lin_value(x)
        extra = {}
        if self.edge_dim is not None:   # the same e added to the message's key and value
            e = self.lin_edge(self._edge_features(edge_attr, edge_index, x.size(0), False))
            extra = dict(edge_key=e, edge_value=e)
        m, score = self._attention(q, k, v, g, score="scaled-dot", **extra)
        out = self._heads_out(m)
        if self.root_weight:
            skip = self.lin_skip(x)
            if self.lin_beta is not None:
                b = torch.sigmoid(self.lin_beta(torch.cat([out, skip, out - skip], dim=-1)))
                out = b * skip + (1 - b) * out
            else:
                out = out + skip
        return self._result(out, return_attention_weights, g, q, k, score, drop=False)
