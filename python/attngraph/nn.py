"""PyTorch layers on the library, laid out as PyTorch Geometric users expect:
GraphAttention (one round as `attngraph run` computes it, whose weights save
to and load from the folders the tool reads), save_rounds and load_rounds,
PyG's GATConv, GATv2Conv and TransformerConv (attngraph.conv) and GPSConv
(attngraph.gps: its global attention on any pattern); the
functions are attngraph.functional's (graph_attention, dropout).
attngraph.torch is the same module under its name before 0.2."""
import os

import numpy as np
import torch
from torch import nn

from . import ops
from ._lib import Error
from .conv import GATConv, GATv2Conv, TransformerConv
from .gps import GPSConv
from .functional import graph_attention, dropout
from .graph import Graph
from .weights import (Weights, save_layers, load_layers, model_args, read_model_args,
                      write_model_args)

__all__ = ["GraphAttention", "save_rounds", "load_rounds", "GATConv", "GATv2Conv",
           "TransformerConv", "GPSConv", "graph_attention", "dropout"]


class GraphAttention(nn.Module):
    """One round, as `attngraph run` computes it:

        xn = LayerNorm(x) if norm else x
        q, k, v = wq(xn), wk(xn), wv(xn)          (nn.Linear without bias, [H*d, D])
        m = graph_attention(q, k, v, graph, heads, score)
        y = x + wo(m)   (y = wo(m) with residual=False)

    state_dict keys wq.weight, wk.weight, wv.weight, wo.weight, ln.weight,
    ln.bias, attn_src, attn_dst (additive), attn (gatv2); save(folder) writes
    them as wq.npy ... ln_weight.npy ln_bias.npy attn_src.npy ..., the folder
    `attngraph run --weights folder --heads H` (with --norm layer, --score,
    --no-residual as the module has them) runs; GraphAttention.load reads one."""

    def __init__(self, dim, heads=1, head_dim=None, norm=False, residual=True,
                 score="scaled-dot", ln_eps=1e-5, **score_kw):
        super().__init__()
        self.dim, self.heads = int(dim), int(heads)
        if self.dim < 1 or self.heads < 1:
            raise Error("dim %d, %d heads; expected both >= 1" % (self.dim, self.heads),
                        "invalid value")
        if head_dim is None and self.dim % self.heads:
            # as `attngraph run` refuses --dim 8 --heads 3 without --head-dim
            raise Error("width dim=%d is not a multiple of %d heads; give head_dim (the "
                        "heads' inner width is heads * head_dim)" % (self.dim, self.heads),
                        "invalid value")
        self.head_dim = int(head_dim) if head_dim is not None else self.dim // self.heads
        if self.head_dim < 1:
            raise Error("head_dim is %d; expected >= 1 (dim %d, %d heads)" %
                        (self.head_dim, dim, heads), "invalid value")
        hd = self.heads * self.head_dim
        self.score, self.score_kw, self.residual = score, score_kw, residual
        self.wq = nn.Linear(dim, hd, bias=False)
        self.wk = nn.Linear(dim, hd, bias=False)
        self.wv = nn.Linear(dim, hd, bias=False)
        self.wo = nn.Linear(hd, dim, bias=False)
        self.ln = nn.LayerNorm(dim, eps=ln_eps) if norm else None
        shape = (self.heads, self.head_dim)
        scale = 1.0 / np.sqrt(self.head_dim)
        if score in ("additive", "gat"):
            self.attn_src = nn.Parameter(torch.randn(shape) * scale)
            self.attn_dst = nn.Parameter(torch.randn(shape) * scale)
        if score == "gatv2":
            self.attn = nn.Parameter(torch.randn(shape) * scale)

    def forward(self, x, graph):
        if not isinstance(x, torch.Tensor):
            raise TypeError("x is a %s.%s; expected a torch.Tensor [N, %d] (torch.from_numpy "
                            "makes one of a numpy array)" % (type(x).__module__,
                                                            type(x).__name__, self.dim))
        if x.dim() != 2 or x.shape[1] != self.dim or \
                (isinstance(graph, Graph) and x.shape[0] != graph.N):
            n = graph.N if isinstance(graph, Graph) else "N"
            shape = list(x.shape)
            raise Error("x has shape %s; the graph has %s nodes and the layer width %d: "
                        "expected [%s, %d]" % (shape, n, self.dim, n, self.dim), "invalid value")
        ops.check_finite("x", x)
        xn = self.ln(x) if self.ln is not None else x
        vecs = {}
        if self.score in ("additive", "gat"):
            vecs = dict(a_src=self.attn_src, a_dst=self.attn_dst)
        elif self.score == "gatv2":
            vecs = dict(a=self.attn)
        m = graph_attention(self.wq(xn), self.wk(xn), self.wv(xn), graph, self.heads,
                            self.score, **vecs, **self.score_kw)
        out = self.wo(m)
        return x + out if self.residual else out

    # ------------------------------------------------------------ folders

    def to_weights(self):
        """The layer as attngraph.Weights (copies)."""
        arr = lambda t: t.detach().cpu().numpy().astype(np.float32).copy()
        extra = {}
        if self.ln is not None:
            extra.update(ln_weight=arr(self.ln.weight), ln_bias=arr(self.ln.bias))
        for name in ("attn_src", "attn_dst", "attn"):
            if hasattr(self, name):
                extra[name] = arr(getattr(self, name))
        return Weights(arr(self.wq.weight), arr(self.wk.weight), arr(self.wv.weight),
                       arr(self.wo.weight), self.heads, **extra)

    def model_args(self, rounds=1, graph=None):
        """The options `attngraph run` needs for this layer, as model.args records
        them; graph (the one it was trained on) adds how it was made: its
        self-loops and direction. Without it, the graph options the layer was
        loaded with (GraphAttention.load), if any."""
        shape = self.graph_args
        if graph is not None:
            shape = dict(self_loops=graph.self_loops, directed=graph.directed)
        return self._args(rounds, shape)

    def _args(self, rounds, shape):
        kw = {k: v for k, v in self.score_kw.items()
              if k in ("beta", "softcap", "slope", "sigmoid_bias", "alibi")}
        return model_args(self.heads, rounds, self.score, self.residual, self.ln is not None,
                          **kw, **shape)

    # How the graph was made, as model.args records it (self_loops, directed);
    # GraphAttention.load fills it from a folder.
    graph_args = {}

    def save(self, folder, rounds=1, graph=None):
        """Writes the layer into folder as `attngraph run --weights folder` reads
        it, with model.args (what the arrays cannot tell: heads, score, norm,
        residual; rounds: how many rounds share this layer; with graph, the
        graph's self-loops and direction), so the CLI refuses to run it with
        other options."""
        self.to_weights().save(folder)
        write_model_args(folder, self.model_args(rounds, graph))

    def load_weights(self, w):
        """Copies attngraph.Weights (or a folder's) into this module; shapes must match."""
        if isinstance(w, (str, os.PathLike)):
            self._check_model_args(w)
            w = Weights.load(w, self.heads)
        if w.wk is None or w.wo is None or w.bias is not None or w.act != "none":
            raise Error("the weights are a layer of its own shape (one projection, no wo, a "
                        "bias or an activation); this module is a round of one shape",
                        "invalid value")
        sd = {"wq.weight": w.wq, "wk.weight": w.wk, "wv.weight": w.wv, "wo.weight": w.wo}
        if self.ln is not None:
            sd["ln.weight"] = w.ln_weight if w.ln_weight is not None else np.ones(self.dim, np.float32)
            sd["ln.bias"] = w.ln_bias if w.ln_bias is not None else np.zeros(self.dim, np.float32)
        for name in ("attn_src", "attn_dst", "attn"):
            if hasattr(self, name):
                if getattr(w, name) is None:
                    raise Error("the weights have no %s, which %s scores need" % (name, self.score),
                                "invalid value")
                sd[name] = getattr(w, name)
        self.load_state_dict({k: torch.from_numpy(np.array(v, np.float32)) for k, v in sd.items()})
        return self

    def _check_model_args(self, folder):
        """Refuses a folder whose model.args (written by save and `attngraph train
        --save`) differs from this module's options, as the CLI does
        (src/cli/model_args.c): the two lines, written the same way, must be equal.
        The rounds are the folder's (a module is one layer; load_rounds repeats it)."""
        args = read_model_args(folder)
        if args is None:
            return      # a folder without model.args: its arrays say all they can
        path = os.path.join(folder, "model.args")
        with open(path) as f:
            saved = f.readline().strip()
        # how the graph was made is the graph's business, not the module's: as saved
        ours = self._args(args.get("rounds", 1), {k: args[k] for k in ("self_loops", "directed")
                                                   if k in args})
        if saved != ours:
            raise Error("%s was trained with `%s` (%s); this module has `%s`: make the module "
                        "with the model's options, or take them from it: GraphAttention.load(%r)"
                        % (os.fspath(folder), saved, path, ours, os.fspath(folder)),
                        "invalid value")

    @classmethod
    def load(cls, folder, heads=None, norm=None, residual=None, score=None, **kw):
        """A module from a weights folder. What is None comes from folder/model.args
        (written by save and by `attngraph train --save`), else: 1 head, pre-norm
        when the folder has ln_weight.npy, a residual, scaled-dot scores."""
        args = read_model_args(folder) or {}
        heads = heads if heads is not None else args.get("heads", 1)
        return cls._from_weights(Weights.load(folder, heads), args, norm, residual, score, kw)

    @classmethod
    def _from_weights(cls, w, args, norm=None, residual=None, score=None, kw=None):
        """A module holding layer w, its options as load takes them (args: a
        folder's model.args as read_model_args gives it, or {})."""
        kw = dict(kw or {})
        if norm is None:
            norm = args["norm"] if args else w.ln_weight is not None
        residual = residual if residual is not None else args.get("residual", True)
        score = score or args.get("score", "scaled-dot")
        for name in ("beta", "softcap", "slope", "sigmoid_bias", "alibi"):
            if name in args and name not in kw:
                kw[name] = args[name]
        m = cls(w.D, w.heads, w.d, norm=norm, residual=residual, score=score, **kw)
        m.graph_args = {k: args[k] for k in ("self_loops", "directed") if k in args}
        return m.load_weights(w)


def save_rounds(folder, modules, graph=None):
    """Several GraphAttention layers, one per round, as folder/round-1/,
    round-2/, ... with folder/model.args (what `attngraph run --weights folder
    --rounds len(modules)` reads; with graph, its self-loops and direction)."""
    modules = list(modules)
    save_layers(folder, [m.to_weights() for m in modules])
    write_model_args(folder, modules[0].model_args(len(modules), graph))


def load_rounds(folder, **kw):
    """The rounds of a weights folder as GraphAttention modules, one per round:

        for layer in load_rounds(folder):
            x = layer(x, graph)

    runs what `attngraph run --weights folder` runs. A folder with round-k/
    subfolders (a layer per round) gives a module per subfolder; a folder
    without them holds one layer that all of model.args' --rounds share: the
    list then holds that one module --rounds times (the same object, so
    training it trains every round, as `attngraph train` does). Options come
    from folder/model.args unless given."""
    args = read_model_args(folder) or {}
    kw = dict(kw)
    given = {k: kw.pop(k, None) for k in ("heads", "norm", "residual", "score")}
    layers = load_layers(folder, given["heads"])   # the library's reader
    mods = [GraphAttention._from_weights(w, args, given["norm"], given["residual"],
                                         given["score"], kw) for w in layers]
    # one layer that every round shares: the same module, once per round
    # (model.args --rounds), so that a loop over the list runs what
    # `attngraph run --weights folder` runs
    return mods * int(args.get("rounds", 1)) if len(mods) == 1 else mods
