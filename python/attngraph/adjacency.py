"""What PyG's layers take as a graph, made one form: an edge_index [2, E]
(int64 or int32, PyG's EdgeIndex too), a torch sparse adjacency adj_t (CSR,
CSC or coalesced COO: rows are the destinations), a torch_sparse.SparseTensor,
or an attngraph.Graph, each with PyG's (n_src, n_dst). An Adjacency holds a
copy of its messages in the input's edge order (a sparse adjacency's storage
order) and compiles a Graph for the kernels once per self-loops mode;
adjacency() keeps those of the inputs still alive, so every layer of a
forward, and its backward, share one build of each edge_index (a new one
every mini-batch step costs O(E) in C). A kept input is taken again only if
its ids are still the same (an O(E) comparison, a tenth of a build): one
changed in place, even behind torch's back through a numpy array that shares
its memory, is built again."""
import weakref

import numpy as np
import torch

from ._lib import Error
from .graph import Graph

_SPARSE = {torch.sparse_csr: "csr", torch.sparse_coo: "coo"}
if hasattr(torch, "sparse_csc"):
    _SPARSE[torch.sparse_csc] = "csc"


def _refuse(layer, what, expected):
    raise Error("%s: %s; expected %s" % (layer, what, expected), "invalid value")


def _a(obj):
    """What obj is, for a message: "a numpy.ndarray", "a list"."""
    t = type(obj)
    name = t.__name__ if t.__module__ == "builtins" else "%s.%s" % (t.__module__, t.__name__)
    return ("an " if name[0] in "aeiou" else "a ") + name


def _ids(layer, name, t):
    """An integer tensor as a C-contiguous int64 numpy array."""
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        _refuse(layer, "%s has dtype %s" % (name, t.dtype), "int64 or int32 node ids")
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.int64)


def _is_sparse_tensor(obj):
    """torch_sparse.SparseTensor, without importing torch_sparse."""
    return type(obj).__name__ == "SparseTensor" and hasattr(obj, "storage")


class Adjacency:
    """One graph as a layer was given it: src, dst [E] int64 numpy arrays in
    the input's edge order (copies), n_src and n_dst, and the input's kind
    ("edge_index", "csr", "csc", "coo", "sparse_tensor", "graph") for the
    weights' return."""

    def __init__(self, kind, src, dst, n_src, n_dst, graph=None):
        self.kind, self._src, self._dst = kind, src, dst
        self.n_src, self.n_dst = n_src, n_dst
        self.stated = (None, None)     # the sizes the input stated (a sparse one's shape)
        self._graphs, self._edges = {}, {}
        if graph is not None:   # its edges listed only when asked for (a pattern's are many)
            self._graphs[False] = graph
            # PyG's loops there already ("on" is "replace" on a pattern: no source twice)
            if graph.self_loops == "replace" or (graph.kind == "pattern" and
                                                 graph.self_loops == "on"):
                self._graphs[True] = graph

    def _listed(self):
        if self._src is None:
            g = self._graphs[False]
            self._src, self._dst = np.array(g.src), np.array(g.dst)

    @property
    def src(self):
        self._listed()
        return self._src

    @property
    def dst(self):
        self._listed()
        return self._dst

    @property
    def E(self):
        return self._graphs[False].E if self._src is None else self._src.size

    @property
    def n_loops(self):
        return min(self.n_src, self.n_dst)

    def graph(self, loops):
        """The Graph the kernels run (None without nodes): the messages as given,
        or with PyG's remove_self_loops and add_self_loops (loops=True) on the
        first min(n_src, n_dst) nodes."""
        if max(self.n_src, self.n_dst) == 0:
            return None
        if loops not in self._graphs:
            self._graphs[loops] = Graph._from_pairs(self.src, self.dst, self.n_src, self.n_dst,
                                                    "replace" if loops else "keep",
                                                    "edge_index")
        return self._graphs[loops]

    def keep(self, loops):
        """[E] bool: the given messages the graph keeps (all of them without loops)."""
        return self.src != self.dst if loops else np.ones(self.E, bool)

    def edges(self, loops):
        """(src, dst) int64 tensors in edge order: the kept messages, then the
        added loops by node (PyG's order)."""
        if loops not in self._edges:
            src, dst = self.src, self.dst
            if loops:
                keep = self.keep(True)
                ring = np.arange(self.n_loops, dtype=np.int64)
                src, dst = np.concatenate([src[keep], ring]), np.concatenate([dst[keep], ring])
            self._edges[loops] = (torch.from_numpy(src), torch.from_numpy(dst))
        return self._edges[loops]

    def weights_return(self, given, loops, alpha, sparse_values=True):
        """What PyG's forward returns beside out for return_attention_weights,
        given the input itself: (edge_index, alpha) for an edge_index or a
        Graph, (adj, alpha) for a torch sparse adjacency (adj of the input's
        layout with alpha as its values; the input itself when not
        sparse_values, TransformerConv's), adj for a SparseTensor (alpha as
        its values, PyG's set_value(alpha, layout='coo'))."""
        if self.kind in ("edge_index", "graph"):
            if not loops and self.kind == "edge_index":
                return given, alpha
            src, dst = self.edges(loops)
            return torch.stack([src, dst]), alpha
        if self.kind != "sparse_tensor" and not sparse_values:
            return given, alpha
        if self.kind == "sparse_tensor" and not loops:
            return given.set_value(alpha, layout="coo")
        src, dst = self.edges(loops)
        rows, cols, a = dst, src, alpha             # the given storage order
        if loops:   # PyG's add_self_loops makes a new adjacency, sorted as its layout
            keys = (dst.numpy(), src.numpy()) if self.kind == "csc" else \
                (src.numpy(), dst.numpy())
            o = torch.from_numpy(np.lexsort(keys))
            rows, cols, a = dst[o], src[o], alpha[o]
        size = (self.n_dst, self.n_src) + tuple(alpha.shape[1:])
        if self.kind == "sparse_tensor":            # torch_sparse.set_diag's, sorted by row
            return type(given)(row=rows, col=cols, value=a, sparse_sizes=size[:2])
        if self.kind == "coo":
            adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), a, size).coalesce()
            return adj, adj.values()
        if self.kind == "csr":
            crow = torch.zeros(self.n_dst + 1, dtype=torch.int64)
            crow[1:] = torch.bincount(rows, minlength=self.n_dst).cumsum(0)
            return torch.sparse_csr_tensor(crow, cols, a, size), a
        ccol = torch.zeros(self.n_src + 1, dtype=torch.int64)
        ccol[1:] = torch.bincount(cols, minlength=self.n_src).cumsum(0)
        return torch.sparse_csc_tensor(ccol, rows, a, size), a


def _from_input(layer, edge_index, n_src, n_dst):
    """An Adjacency of edge_index with PyG's sizes: n_src, n_dst as the
    features say (None: unknown, then from the input, as PyG infers them)."""
    if isinstance(edge_index, Graph):
        g = edge_index
        gs, gd = g.shape
        for name, n, m in (("sources", n_src, gs), ("targets", n_dst, gd)):
            if n is not None and n != m:
                _refuse(layer, "the Graph has %d %s, x has %d rows" % (m, name, n),
                        "x to have a row for each")
        return Adjacency("graph", None, None, gs, gd, graph=g)
    return _sized(layer, _read(layer, edge_index), n_src, n_dst)


def _read(layer, edge_index):
    """(kind, src, dst, adj_src, adj_dst) of an input that is not a Graph: its
    messages in its edge order (int64 numpy arrays, perhaps views of its
    memory) and the sizes it states (None: none)."""
    if _is_sparse_tensor(edge_index):
        rows, cols = edge_index.sparse_sizes()
        row, col, _ = edge_index.coo()
        src, dst = _ids(layer, "edge_index's columns", col), _ids(layer, "edge_index's rows", row)
        return "sparse_tensor", src, dst, cols, rows
    if not isinstance(edge_index, torch.Tensor):
        _refuse(layer, "edge_index is %s" % _a(edge_index),
                "a [2, E] integer tensor, a torch sparse adjacency (CSR, CSC or COO), a "
                "torch_sparse.SparseTensor or an attngraph.Graph")
    if edge_index.device.type != "cpu":
        _refuse(layer, "edge_index is on %s" % edge_index.device, "a CPU tensor (attngraph "
                "runs on the CPU)")
    layout = edge_index.layout
    if layout in _SPARSE:
        kind = _SPARSE[layout]
        if edge_index.dim() != 2:
            _refuse(layer, "the sparse edge_index has shape %s" % list(edge_index.shape),
                    "an adjacency [n_dst, n_src]")
        rows, cols = edge_index.shape
        if kind == "csr":
            crow = _ids(layer, "edge_index's crow_indices", edge_index.crow_indices())
            src = _ids(layer, "edge_index's col_indices", edge_index.col_indices())
            dst = np.repeat(np.arange(rows, dtype=np.int64), np.diff(crow))
        elif kind == "csc":
            ccol = _ids(layer, "edge_index's ccol_indices", edge_index.ccol_indices())
            dst = _ids(layer, "edge_index's row_indices", edge_index.row_indices())
            src = np.repeat(np.arange(cols, dtype=np.int64), np.diff(ccol))
        else:
            if not edge_index.is_coalesced():   # as PyG, which reads its indices()
                _refuse(layer, "edge_index is an uncoalesced sparse COO tensor",
                        "a coalesced one (edge_index.coalesce())")
            idx = _ids(layer, "edge_index's indices", edge_index._indices())
            dst, src = idx[0], idx[1]
        return kind, src, dst, cols, rows
    if layout != torch.strided:
        _refuse(layer, "edge_index has layout %s" % layout, "a dense [2, E] tensor or a "
                "sparse CSR, CSC or COO adjacency")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        _refuse(layer, "edge_index has shape %s" % list(edge_index.shape),
                "[2, E] (row 0 sources, row 1 targets), or a sparse adjacency")
    ei = _ids(layer, "edge_index", edge_index)
    sizes = getattr(edge_index, "sparse_size", None)       # PyG's EdgeIndex
    rows = cols = None
    if callable(sizes):
        cols, rows = sizes()
    return "edge_index", ei[0], ei[1], cols, rows


def _sized(layer, read, n_src, n_dst):
    """The Adjacency of _read's input with its sizes: the features' where
    known, else the adjacency's (a sparse one's shape), else 1 + the largest
    id; its ids checked against them."""
    kind, src, dst, adj_src, adj_dst = read
    for name, n, m in (("sources", n_src, adj_src), ("targets", n_dst, adj_dst)):
        if n is not None and m is not None and n != m:
            _refuse(layer, "edge_index has %d %s (its size), x has %d rows" % (m, name, n),
                    "the same")
    n_src = n_src if n_src is not None else adj_src
    n_dst = n_dst if n_dst is not None else adj_dst
    if n_src is None:
        n_src = int(src.max()) + 1 if src.size else 0
    if n_dst is None:
        n_dst = max(int(dst.max()) + 1 if dst.size else 0, n_src)
    for name, ids, n in (("source", src, n_src), ("target", dst, n_dst)):
        bad = np.flatnonzero((ids < 0) | (ids >= n)) if ids.size else ()
        if len(bad):
            k = int(bad[0])
            _refuse(layer, "edge %d has %s %d" % (k, name, ids[k]),
                    "a node id 0..%d (%d %ss)" % (n - 1, n, name))
    # copies: the input's memory may change behind torch's back (a numpy view)
    adj = Adjacency(kind, np.array(src, np.int64), np.array(dst, np.int64), n_src, n_dst)
    adj.stated = (adj_src, adj_dst)
    return adj


# The Adjacency of each input still alive, most recently used last:
# (id, n_src, n_dst) -> (weak reference, Adjacency). An entry goes with its
# input; past _CACHE_SIZE the least recently used goes too.
_CACHE = {}
_CACHE_SIZE = 64


def adjacency(layer, edge_index, n_src=None, n_dst=None):
    """The Adjacency of edge_index (see _from_input), built once per input: the
    same object with the same ids and sizes gives the same Adjacency, and so
    the same compiled Graphs."""
    if isinstance(edge_index, torch.Tensor) and edge_index.is_inference():
        return _from_input(layer, edge_index, n_src, n_dst)   # cannot be referred to weakly
    key = (id(edge_index), n_src, n_dst)
    hit = _CACHE.pop(key, None)
    if hit is not None and hit[0]() is edge_index:
        adj = hit[1]
        if not isinstance(edge_index, Graph):    # a Graph never changes
            read = _read(layer, edge_index)      # the same ids and sizes: checked already
            if not (np.array_equal(adj.src, read[1]) and np.array_equal(adj.dst, read[2])
                    and adj.stated == read[3:]):
                adj = _sized(layer, read, n_src, n_dst)
        _CACHE[key] = (hit[0], adj)
        return adj
    adj = _from_input(layer, edge_index, n_src, n_dst)
    try:
        ref = weakref.ref(edge_index, lambda _, key=key: _CACHE.pop(key, None))
    except TypeError:           # an input that cannot be referred to weakly: not kept
        return adj
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (ref, adj)
    return adj
