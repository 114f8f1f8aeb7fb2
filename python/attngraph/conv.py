"""PyTorch Geometric drop-ins: GATConv, GATv2Conv and TransformerConv with
PyG's constructor arguments (2.4, and 2.6's residual), parameter names (a PyG
layer's state_dict() loads unchanged) and forward signatures, computed by the
library's fused attention (graph_attention) instead of PyG's scatter over an
[E, H, C] message tensor. Imported as attngraph.nn.GATConv (or
attngraph.torch.GATConv) and so on.

What the three share (inputs, graph, kernel or message path, return) is in
conv_base.py. Every graph PyG's layers take (adjacency.py): an edge_index [2, E], a torch
sparse adjacency, a torch_sparse.SparseTensor, an attngraph.Graph; x a
tensor or a bipartite pair (x_src, x_dst), with size. float32 runs the fused
kernel; bfloat16 and float16 run it in float32; float64, an explainer's edge
masks and graphs of 0 nodes run message by message in torch
(edge_attention.py). Where torch_geometric is importable the layers are its
MessagePassing modules, so its tooling (to_hetero, the explainers, its fx
tracer) takes them.

Edge features (edge_dim) go to the kernel as the score's per-message terms:
GATConv's a term per edge and head inside the LeakyReLU (ops.Score's
edge_pre), GATv2Conv's a vector inside it (edge_key), TransformerConv's a
vector added to each message's key and value (edge_key, edge_value). What
PyG can do and these cannot is refused with an Error naming it, never
approximated."""
import torch
from torch import nn

from .conv_base import (_Conv, _PYG_28, _fill_value, _glorot, _init_linear, _linear, _pair,
                        _unsupported)


class GATConv(_Conv):
    """PyG's GATConv (Velickovic et al. 2018): x' = lin_src(x) [N, H, C];
    alpha_ij = softmax_j LeakyReLU(att_src . x'_j + att_dst . x'_i), dropout
    on alpha while training; out_i = sum_j alpha_ij x'_j, heads concatenated
    (or averaged), plus residual (res(x_i), PyG 2.6) and bias. Bipartite:
    x = (x_src, x_dst) with lin_dst on the targets (x_dst None: no target
    term), in_channels a pair for two projections. add_self_loops: every
    self-loop removed, one added per node that is both a source and a target,
    as PyG does. With edge_dim, edge_attr [E, edge_dim] adds att_edge .
    lin_edge(e_ij) inside the LeakyReLU, the added self-loops' features being
    fill_value ('mean' of the node's incoming edges', or a number, or a
    tensor). state_dict: lin_src.weight, lin_dst.weight (one module but for a
    pair of in_channels; PyG 2.5's lin.weight loads too), att_src, att_dst,
    bias (and lin_edge.weight, att_edge, res.weight)."""

    def __init__(self, in_channels, out_channels, heads=1, concat=True, negative_slope=0.2,
                 dropout=0.0, add_self_loops=True, edge_dim=None, fill_value="mean",
                 bias=True, residual=False, **kwargs):
        if kwargs:
            _unsupported("GATConv", "the argument(s) %s" % ", ".join(sorted(kwargs)))
        super().__init__(in_channels, out_channels, heads, concat, dropout, edge_dim)
        H, C = self.heads, self.out_channels
        self.negative_slope, self.add_self_loops = float(negative_slope), bool(add_self_loops)
        self.fill_value = _fill_value("GATConv", fill_value)
        self.residual = bool(residual)
        n_src, n_dst = _pair(self.in_channels)
        self.lin_src = _linear(n_src, H * C, False, glorot=True)
        self.lin_dst = (_linear(n_dst, H * C, False, glorot=True)
                        if isinstance(self.in_channels, tuple) else self.lin_src)
        self.att_src = nn.Parameter(torch.empty(1, H, C))
        self.att_dst = nn.Parameter(torch.empty(1, H, C))
        if self.edge_dim is not None:
            self.lin_edge = _linear(self.edge_dim, H * C, False, glorot=True)
            self.att_edge = nn.Parameter(torch.empty(1, H, C))
        else:
            self.lin_edge = None
            self.register_parameter("att_edge", None)
        width = H * C if concat else C
        self.res = _linear(n_dst, width, False, glorot=True) if self.residual else None
        self.bias = nn.Parameter(torch.empty(width)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        for lin in (self.lin_src, self.lin_dst, self.lin_edge, self.res):
            if lin is not None:
                _init_linear(lin, glorot=True)
        _glorot(self.att_src)
        _glorot(self.att_dst)
        _glorot(self.att_edge)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    _weights_if_true = _PYG_28

    def forward(self, x, edge_index, edge_attr=None, size=None, return_attention_weights=None):
        # PyG's GATConv ignores edge_attr without edge_dim
        x_src, x_dst, single, adj = self._inputs(x, edge_index, self.lin_src, self.lin_dst, size)
        H, C = self.heads, self.out_channels
        xs = self.lin_src(x_src)
        xd = xs if single else (self.lin_dst(x_dst) if x_dst is not None else None)
        loops = self.add_self_loops
        extra = {}
        if self.edge_dim is not None:   # att_edge . lin_edge(e), inside the LeakyReLU
            ea = self._edge_features(edge_attr, adj, loops, self.fill_value)
            e = self.lin_edge(ea).view(-1, H, C)
            extra["edge_pre"] = (e * self.att_edge).sum(dim=-1)
        m, weights = self._attend("additive", xd, xs, xs, adj, loops, drop=True,
                                  a_src=self.att_src.view(H, C), a_dst=self.att_dst.view(H, C),
                                  slope=self.negative_slope, **extra)
        out = self._heads_out(m)
        if self.res is not None and x_dst is not None:
            out = out + self.res(x_dst)
        if self.bias is not None:
            out = out + self.bias
        return self._result(out, return_attention_weights, edge_index, adj, loops, weights)


class GATv2Conv(_Conv):
    """PyG's GATv2Conv (Brody et al. 2022): x_l = lin_l(x_src), x_r =
    lin_r(x_dst) (the same module with share_weights); alpha_ij = softmax_j
    att . LeakyReLU(x_r,i + x_l,j), dropout while training; out_i = sum_j
    alpha_ij x_l,j, heads concatenated or averaged, plus residual (PyG 2.6)
    and bias. Bipartite: x = (x_src, x_dst), in_channels a pair. With
    edge_dim, lin_edge(e_ij) is added inside the LeakyReLU (the message's key
    term), self-loops' features by fill_value as GATConv's. state_dict:
    lin_l.weight, lin_l.bias, lin_r.weight, lin_r.bias, att, bias (and
    lin_edge.weight, res.weight)."""

    def __init__(self, in_channels, out_channels, heads=1, concat=True, negative_slope=0.2,
                 dropout=0.0, add_self_loops=True, edge_dim=None, fill_value="mean",
                 bias=True, share_weights=False, residual=False, **kwargs):
        if kwargs:
            _unsupported("GATv2Conv", "the argument(s) %s" % ", ".join(sorted(kwargs)))
        super().__init__(in_channels, out_channels, heads, concat, dropout, edge_dim)
        H, C = self.heads, self.out_channels
        self.negative_slope, self.add_self_loops = float(negative_slope), bool(add_self_loops)
        self.fill_value = _fill_value("GATv2Conv", fill_value)
        self.share_weights, self.residual = bool(share_weights), bool(residual)
        n_src, n_dst = _pair(self.in_channels)
        self.lin_l = _linear(n_src, H * C, bias, glorot=True)
        self.lin_r = self.lin_l if share_weights else _linear(n_dst, H * C, bias, glorot=True)
        self.att = nn.Parameter(torch.empty(1, H, C))
        self.lin_edge = (_linear(self.edge_dim, H * C, False, glorot=True)
                         if self.edge_dim is not None else None)
        width = H * C if concat else C
        self.res = _linear(n_dst, width, False, glorot=True) if self.residual else None
        self.bias = nn.Parameter(torch.empty(width)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        for lin in (self.lin_l, self.lin_r, self.lin_edge, self.res):
            if lin is not None:
                _init_linear(lin, glorot=True)
        _glorot(self.att)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    _weights_if_true = _PYG_28

    def forward(self, x, edge_index, edge_attr=None, return_attention_weights=None):
        self._check_edge_attr(edge_attr)
        x_src, x_dst, single, adj = self._inputs(x, edge_index, self.lin_l, self.lin_r,
                                                 need_dst=True)
        H, C = self.heads, self.out_channels
        xl = self.lin_l(x_src)
        xr = xl if self.share_weights and single else self.lin_r(x_dst)
        loops = self.add_self_loops
        extra = {}
        if self.edge_dim is not None:   # x_r,i + x_l,j + lin_edge(e_ij) in the LeakyReLU
            extra["edge_key"] = self.lin_edge(self._edge_features(edge_attr, adj, loops,
                                                                  self.fill_value))
        m, weights = self._attend("gatv2", xr, xl, xl, adj, loops, drop=False,
                                  a=self.att.view(H, C), slope=self.negative_slope, **extra)
        out = self._heads_out(m)
        if self.res is not None:
            out = out + self.res(x_dst)
        if self.bias is not None:
            out = out + self.bias
        return self._result(out, return_attention_weights, edge_index, adj, loops, weights)


class TransformerConv(_Conv):
    """PyG's TransformerConv (Shi et al. 2021): alpha_ij = softmax_j
    (W_q x_i) . (W_k x_j) / sqrt(C), dropout while training; out_i = sum_j
    alpha_ij W_v x_j, heads concatenated or averaged; with root_weight, plus
    lin_skip(x_i), gated by beta = sigmoid(lin_beta([out, skip, out - skip]))
    when beta=True. Bipartite: x = (x_src, x_dst): keys and values of the
    sources, queries and skip of the targets. With edge_dim, e = lin_edge(e_ij)
    is added to the key and to the value of each message. No self-loops are
    added (as PyG). state_dict: lin_key, lin_query, lin_value, lin_skip
    (weight, bias), lin_beta.weight, lin_edge.weight."""

    def __init__(self, in_channels, out_channels, heads=1, concat=True, beta=False,
                 dropout=0.0, edge_dim=None, bias=True, root_weight=True, **kwargs):
        if kwargs:
            _unsupported("TransformerConv", "the argument(s) %s" % ", ".join(sorted(kwargs)))
        super().__init__(in_channels, out_channels, heads, concat, dropout, edge_dim)
        H, C = self.heads, self.out_channels
        n_src, n_dst = _pair(self.in_channels)
        self.beta, self.root_weight = bool(beta) and bool(root_weight), bool(root_weight)
        self.lin_key = _linear(n_src, H * C, True)
        self.lin_query = _linear(n_dst, H * C, True)
        self.lin_value = _linear(n_src, H * C, True)
        self.lin_edge = _linear(self.edge_dim, H * C, False) if edge_dim else None
        width = H * C if concat else C
        self.lin_skip = _linear(n_dst, width, bias)   # PyG makes it even unused
        self.lin_beta = _linear(3 * width, 1, False) if self.beta else None

    def reset_parameters(self):
        for lin in (self.lin_key, self.lin_query, self.lin_value, self.lin_edge, self.lin_skip,
                    self.lin_beta):
            if lin is not None:
                _init_linear(lin, glorot=False)

    def forward(self, x, edge_index, edge_attr=None, return_attention_weights=None):
        self._check_edge_attr(edge_attr)
        x_src, x_dst, _, adj = self._inputs(x, edge_index, self.lin_key, self.lin_query,
                                            need_dst=True)
        q, k, v = self.lin_query(x_dst), self.lin_key(x_src), self.lin_value(x_src)
        extra = {}
        if self.edge_dim is not None:   # the same e added to the message's key and value
            e = self.lin_edge(self._edge_features(edge_attr, adj, False))
            extra = dict(edge_key=e, edge_value=e)
        m, weights = self._attend("scaled-dot", q, k, v, adj, False, drop=False, **extra)
        out = self._heads_out(m)
        if self.root_weight:
            skip = self.lin_skip(x_dst)
            if self.lin_beta is not None:
                b = torch.sigmoid(self.lin_beta(torch.cat([out, skip, out - skip], dim=-1)))
                out = b * skip + (1 - b) * out
            else:
                out = out + skip
        return self._result(out, return_attention_weights, edge_index, adj, False, weights,
                            sparse_values=False)
