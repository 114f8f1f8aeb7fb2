"""What attngraph's PyTorch Geometric drop-ins (conv.py) share: PyG's Linear
and its initialisers (lazy -1 widths too), the checks of forward's inputs,
the graph (adjacency.adjacency: one build per edge_index), the choice between
the fused kernel (float32; bfloat16 and float16 computed in it) and the
message-by-message path (edge_attention: float64, an explainer's masks, 0
nodes), dropout's seed, the heads and the return. With PyG importable the base
class is its MessagePassing, so its tooling (to_hetero, the explainers, its fx
tracer) takes the layers."""
import math
import numbers

import torch
import torch.fx
from torch import nn

from . import functional, ops
from ._lib import Error
from .adjacency import _a, adjacency
from .edge_attention import edge_attention


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


def _channels(layer, in_channels):
    """in_channels as PyG takes it: an int, or a pair (source, target) for
    bipartite graphs; -1 is PyG's lazy size, set by the first forward."""
    pair = in_channels if isinstance(in_channels, (tuple, list)) else None
    for n in (pair if pair is not None else (in_channels,)):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or (n < 1 and n != -1):
            raise Error("%s: in_channels %r; expected an int >= 1, -1 (lazy: set by the first "
                        "forward) or a pair of them (source, target)" % (layer, in_channels),
                        "invalid value")
    if pair is not None and len(pair) != 2:
        raise Error("%s: in_channels %r; expected a pair (source, target)" % (layer, in_channels),
                    "invalid value")
    return tuple(int(n) for n in pair) if pair is not None else int(in_channels)


def _pair(in_channels):
    return in_channels if isinstance(in_channels, tuple) else (in_channels, in_channels)


def _unsupported(layer, what):
    raise Error("%s: %s is not supported by attngraph's drop-in" % (layer, what),
                "invalid value")


def _init_linear(lin, glorot):
    """PyG's Linear initialisers: weight_initializer='glorot' (its bias uniform
    in +-1/sqrt(in)), or its default, which is torch's. A lazy layer waits."""
    if isinstance(lin.weight, nn.parameter.UninitializedParameter):
        return
    if glorot:
        _glorot(lin.weight)
        _uniform_bias(lin)
    else:
        nn.Linear.reset_parameters(lin)


class _LazyLinear(nn.LazyLinear):
    """PyG's Linear(-1, out): its input width set by the first forward, then
    initialised as PyG's (glorot or torch's)."""

    def __init__(self, out_features, bias, glorot):
        self.glorot = glorot
        super().__init__(out_features, bias=bias)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            _init_linear(self, self.glorot)


def _linear(n_in, n_out, bias, glorot=False):
    if n_in == -1:
        return _LazyLinear(n_out, bias, glorot)
    lin = nn.Linear(n_in, n_out, bias=bias)
    _init_linear(lin, glorot)
    return lin


# With PyG importable, the layers are its MessagePassing modules, so that its
# tooling finds them: to_hetero calls them once per edge type, the explainers
# set their edge masks (explain_message) and hook their messages.
try:
    from torch_geometric.nn.conv import MessagePassing as _Base
    from torch_geometric import __version__ as _pyg_version
    _BASE_KW = dict(aggr="add", node_dim=0)
    # PyG 2.4-2.7 return the attention weights for any bool; 2.8's GATConv and
    # GATv2Conv for a true value only
    _PYG_28 = tuple(int(v) for v in _pyg_version.split(".")[:2]) >= (2, 8)
except ImportError:
    _Base, _BASE_KW, _PYG_28 = nn.Module, {}, False

_FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


class _Conv(_Base):
    """What the three drop-ins share: the checks of forward's inputs, the
    graph (adjacency.adjacency: one build per edge_index), the choice between
    the fused kernel (float32) and the message-by-message path (float64, an
    explainer's masks, 0 nodes), dropout's seed, the heads, the return."""

    # return_attention_weights: any bool (PyG 2.4-2.7), or a true value (2.8's GATs)
    _weights_if_true = False

    def __init__(self, in_channels, out_channels, heads, concat, dropout, edge_dim):
        super().__init__(**_BASE_KW)
        name = type(self).__name__
        self.in_channels = _channels(name, in_channels)
        for what, n in (("out_channels", out_channels), ("heads", heads)):
            if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
                raise Error("%s: %s is %r; expected an int >= 1" % (name, what, n),
                            "invalid value")
        self.out_channels, self.heads, self.concat = int(out_channels), int(heads), bool(concat)
        self.dropout = float(dropout)
        if not 0 <= self.dropout < 1:
            raise Error("%s: dropout %g; expected a probability in [0, 1)"
                        % (name, self.dropout), "invalid value")
        self.edge_dim = None if edge_dim is None else int(edge_dim)
        if self.edge_dim is not None and self.edge_dim < 1:
            raise Error("%s: edge_dim %d; expected >= 1" % (name, self.edge_dim),
                        "invalid value")

    # ------------------------------------------------------------ inputs

    def _check_x(self, name, t, width):
        layer = type(self).__name__
        if not isinstance(t, torch.Tensor):
            raise Error("%s: %s is %s; expected a torch.Tensor [N, %s]" % (
                layer, name, _a(t), width if width != -1 else "F"), "invalid value")
        if t.dtype not in _FLOATS:
            raise Error("%s: %s is %s; expected float32 (the fast path), float64, bfloat16 "
                        "or float16" % (layer, name, t.dtype), "invalid value")
        if t.device.type != "cpu":
            raise Error("%s: %s is on %s; attngraph runs on the CPU" % (layer, name, t.device),
                        "invalid value")
        if t.dim() != 2 or (width != -1 and t.size(1) != width):
            raise Error("%s: %s has shape %s; expected [N, %s]" % (
                layer, name, list(t.shape), width if width != -1 else "F"), "invalid value")

    def _inputs(self, x, edge_index, lin_src, lin_dst, size=None, need_dst=False):
        """(x_src, x_dst, single, adjacency): x_dst None for GAT's (x, None);
        single when x is one tensor (x_src is x_dst). lin_src and lin_dst say
        the widths taken (a lazy one's once its first forward set it)."""
        layer = type(self).__name__
        if any(isinstance(t, torch.fx.Proxy) for t in (x, edge_index)):
            raise Error("%s: traced by torch.fx.symbolic_trace, which enters the layer; trace "
                        "with a tracer that keeps it whole: torch_geometric.nn.fx."
                        "symbolic_trace, or a torch.fx.Tracer whose is_leaf_module says so "
                        "(PyG's layers need the same)" % layer, "invalid value")
        w_src, w_dst = (-1 if isinstance(lin.weight, nn.parameter.UninitializedParameter)
                        else lin.in_features for lin in (lin_src, lin_dst))
        single = isinstance(x, torch.Tensor)
        if single:
            self._check_x("x", x, w_src)
            x_src = x_dst = x
        elif isinstance(x, (tuple, list)) and len(x) == 2:
            x_src, x_dst = x
            self._check_x("x[0]", x_src, w_src)
            if x_dst is not None:
                self._check_x("x[1]", x_dst, w_dst)
            elif need_dst:
                raise Error("%s: x[1] is None; expected the target nodes' features (PyG's %s "
                            "needs both)" % (layer, layer), "invalid value")
        else:
            raise Error("%s: x is %s; expected a tensor [N, F] or a pair (x_src, x_dst)"
                        % (layer, _a(x)), "invalid value")
        n_src = x_src.size(0)
        n_dst = x_dst.size(0) if x_dst is not None else None
        if size is not None:
            ok = isinstance(size, (tuple, list)) and len(size) == 2 and all(
                n is None or (isinstance(n, int) and not isinstance(n, bool) and n >= 0)
                for n in size)
            if not ok:
                raise Error("%s: size %r; expected (n_src, n_dst), two counts >= 0 or None"
                            % (layer, size), "invalid value")
            for name, n, m in (("sources", n_src, size[0]), ("targets", n_dst, size[1])):
                if n is not None and m is not None and n != m:
                    raise Error("%s: size %r says %d %s, x has %d" % (layer, tuple(size), m,
                                                                     name, n), "invalid value")
            n_dst = n_dst if n_dst is not None else size[1]
        return x_src, x_dst, single, adjacency(layer, edge_index, n_src, n_dst)

    def _edge_features(self, edge_attr, adj, loops, fill=None):
        """edge_attr [E, edge_dim] in the graph's edge order: with loops, the
        edges less their self-loops, then one loop per node with fill's
        features ('mean' of the node's incoming edges', 'add', 'max', 'min',
        'mul', a number or a tensor: PyG's remove_self_loops, add_self_loops)."""
        name = type(self).__name__
        if edge_attr is None:
            raise Error("%s: made with edge_dim %d; forward needs edge_attr"
                        % (name, self.edge_dim), "invalid value")
        if not isinstance(edge_attr, torch.Tensor) or edge_attr.dtype not in _FLOATS:
            what = edge_attr.dtype if isinstance(edge_attr, torch.Tensor) else _a(edge_attr)
            raise Error("%s: edge_attr is %s; expected a floating-point tensor [E, %d]"
                        % (name, what, self.edge_dim), "invalid value")
        ea = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        if ea.dim() != 2 or ea.size(0) != adj.E or ea.size(1) != self.edge_dim:
            raise Error("%s: edge_attr is %s; expected [%d, %d] (a row for each of the %d "
                        "edges)" % (name, list(edge_attr.shape), adj.E, self.edge_dim, adj.E),
                        "invalid value")
        if not loops:
            return ea
        if adj.kind in ("csr", "csc", "coo", "sparse_tensor"):
            raise Error("%s: edge_attr with add_self_loops=True on a sparse adjacency (as "
                        "PyG, which refuses it too); give an edge_index, or add_self_loops="
                        "False" % name, "invalid value")
        keep = torch.from_numpy(adj.keep(True))
        ea, dst = ea[keep], torch.from_numpy(adj.dst)[keep]
        n = adj.n_loops
        if isinstance(fill, str):
            mine = dst < n          # bipartite: loops on the first n nodes only
            added = _reduce_by(ea[mine], dst[mine], n, fill)
        else:
            added = torch.as_tensor(fill, dtype=ea.dtype)
            if added.numel() not in (1, ea.size(1)):
                raise Error("%s: fill_value has %d values; expected 1 or edge_dim = %d"
                            % (name, added.numel(), ea.size(1)), "invalid value")
            added = added.reshape(-1).expand(n, ea.size(1))
        return torch.cat([ea, added], dim=0)

    def _check_edge_attr(self, edge_attr):
        if edge_attr is not None and self.edge_dim is None:
            raise Error("%s: edge_attr given to a layer made without edge_dim"
                        % type(self).__name__, "invalid value")

    # ------------------------------------------------------------ attention

    def _explaining(self):
        return bool(getattr(self, "explain", False))   # PyG's MessagePassing flag

    def _attend(self, kind, q, k, v, adj, loops, drop, **score):
        """m [n_dst, H*C] of the messages of adj (with PyG's self-loops when
        loops), and a function giving the attention weights [E', H] in edge
        order: after dropout when drop (GATConv's), before it otherwise. The
        fused kernel in float32 (bfloat16 and float16 computed in it; its
        weights come without gradients), or message by message in torch
        (edge_attention: weights with gradients) for float64, for PyG's
        explainers and message hooks, and for a graph without nodes."""
        H, dtype = self.heads, k.dtype
        hooks = getattr(self, "_message_forward_hooks", None)
        graph = adj.graph(loops)
        if dtype == torch.float64 or graph is None or self._explaining() or hooks:
            src, dst = adj.edges(loops)
            explain = None
            if self._explaining() or hooks:
                explain = lambda msg, alpha, dropped: self._explain_messages(
                    msg, dropped if drop else alpha, adj.n_dst)
            m, alpha, dropped = edge_attention(kind, q, k, v, src, dst, adj.n_dst, H, **score,
                                               dropout=self.dropout, training=self.training,
                                               explain=explain)
            return m, lambda: dropped if drop else alpha
        tensors = {n: t for n, t in score.items() if isinstance(t, torch.Tensor)}
        f32 = lambda t: t if t.dtype == torch.float32 else t.float()
        made = {}

        def rows(t):   # float32, N rows (bipartite), once for a tensor given twice
            if id(t) not in made:
                t32 = f32(t)
                made[id(t)] = t32 if t32.size(0) == graph.N else torch.cat(
                    [t32, t32.new_zeros(graph.N - t32.size(0), t32.size(1))])
            return made[id(t)]
        k, v = rows(k), rows(v)
        q = rows(q) if q is not None else torch.zeros_like(k)    # GAT's (x, None)
        score.update({n: f32(t) for n, t in tensors.items()})
        if self.training and self.dropout > 0:
            score.update(dropout=self.dropout,
                         dropout_seed=int(torch.randint(0, 2**62, (1,)).item()))
        try:
            m = functional.graph_attention(q, k, v, graph, heads=H, score=kind, **score)
        except Error as e:
            if "expected finite values" not in str(e):
                raise
            names = dict(q="the targets' queries", k="the sources' keys",
                         v="the sources' values")
            which = str(e).split(":")[0]
            raise Error("%s: %s are not finite (%s): x, edge_attr or the layer's weights "
                        "hold a NaN or an infinity" % (type(self).__name__,
                                                       names.get(which, which), e),
                        e.status) from None
        if m.size(0) != adj.n_dst:      # (a slice of all rows would copy in the backward)
            m = m[:adj.n_dst]
        return m.to(dtype), lambda: self._weights(graph, q, k, kind, score, drop).to(dtype)

    def _explain_messages(self, msg, alpha, n_dst):
        """PyG's propagate between message and aggregate: its message hooks
        (AttentionExplainer reads alpha there), then explain_message (the edge
        mask of GNNExplainer and its kin)."""
        for hook in getattr(self, "_message_forward_hooks", {}).values():
            res = hook(self, ({"alpha": alpha},), msg)
            if res is not None:
                msg = res
        if self._explaining():
            msg = self.explain_message(msg, n_dst)
        return msg

    def _heads_out(self, m):
        """The heads concatenated or averaged."""
        return m if self.concat else m.view(-1, self.heads, self.out_channels).mean(dim=1)

    def _result(self, out, want, edge_index, adj, loops, weights, sparse_values=True):
        """forward's return: out, or with return_attention_weights PyG's pair
        for the input's kind (adjacency.Adjacency.weights_return)."""
        if (bool(want) if self._weights_if_true else isinstance(want, bool)):
            return out, adj.weights_return(edge_index, loops, weights(), sparse_values)
        return out

    def _weights(self, graph, q, k, kind, score, drop):
        """PyG's alpha [E, H] in the graph's edge order, without gradients;
        after attention dropout when drop (GATConv), before it otherwise."""
        if not drop:
            score = {n: s for n, s in score.items() if n not in ("dropout", "dropout_seed")}
        with torch.no_grad():
            a = {n: functional._np(t, n) for n, t in score.items() if isinstance(t, torch.Tensor)}
            rest = {n: v for n, v in score.items() if not isinstance(v, torch.Tensor)}
            w = ops.attention_weights(graph, functional._np(q, "q"), functional._np(k, "k"),
                                      heads=self.heads, score=kind, **rest, **a)
        return torch.from_numpy(w)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # PyG 2.5 on names a homogeneous GATConv's projection `lin`, 2.4 `lin_src`
        # and `lin_dst` (one module): either loads
        lin = prefix + "lin.weight"
        if lin in state_dict and hasattr(self, "lin_dst") and self.lin_dst is self.lin_src:
            w = state_dict.pop(lin)
            state_dict[prefix + "lin_src.weight"] = w
            state_dict[prefix + "lin_dst.weight"] = w
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def __repr__(self):
        return "%s(%s, %d, heads=%d)" % (type(self).__name__, self.in_channels,
                                         self.out_channels, self.heads)
