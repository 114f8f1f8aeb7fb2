"""Graph: the library's compiled neighbourhoods (ag_nbhd_t), with the order of
the edges the graph was made from, so that per-edge results come back in it."""
import ctypes as C
import os
import re
import threading

import numpy as np

from . import _structs as S
from ._lib import lib, igraph, check, err, c_free, c_malloc, Error

# igraph is not thread-safe (its error handler and cleanup stack are process-wide),
# and ctypes lets other Python threads run during a call: one igraph call at a time
_IGRAPH_LOCK = threading.Lock()

# keep: as given; on: a loop for each node without one (existing loops kept:
# PyG's add_self_loops only on a graph without loops); off: none; replace: every
# loop removed, one added per node (PyG's remove_self_loops + add_self_loops,
# what GATConv, GATv2Conv and TransformerConv do)
_SELF = {"keep": 0, "on": 1, "off": 2, "replace": 3, None: 0, True: 1, False: 2}
_SELF_NAMES = ("keep", "on", "off", "replace")
_FORMATS = ("edgelist", "ncol", "lgl", "graphml", "gml", "pajek")


def _self_loops(value):
    try:
        return _SELF[value]
    except (KeyError, TypeError):
        raise Error("self_loops is %r; expected 'keep', 'on', 'off' or 'replace'" % (value,),
                    "invalid value") from None


def _i64_view(address, n):
    """A numpy view of n int64 at a C address (no copy)."""
    if n == 0 or not address:
        return np.zeros(0, np.int64)
    return np.ctypeslib.as_array((C.c_int64 * n).from_address(address))


def _c_copy(a):
    """A malloc'ed copy of the int64 array a (ag_nbhd_destroy frees it)."""
    a = np.ascontiguousarray(a, np.int64)
    p = c_malloc(max(a.nbytes, 8))
    if not p:
        raise MemoryError("%d bytes for a Graph's arrays" % a.nbytes)
    C.memmove(p, a.ctypes.data, a.nbytes)
    return p


# Graph.__getstate__'s layout; __setstate__ refuses others
_STATE_VERSION = 1


def _check_runs(n, edge_ptr, run_ptr, run_src, run_len, edge_id):
    """Refuses compiled neighbourhoods the kernels could not read safely: the
    form ag_nbhd_t documents (runs of sources in 0..N-1, ascending, that add up
    to each destination's slots)."""
    def bad(what):
        raise Error("pickled Graph: %s" % what, "invalid value")
    if n < 1:
        bad("%d nodes; expected at least 1" % n)
    for name, a in (("edge_ptr", edge_ptr), ("run_ptr", run_ptr)):
        if a.shape != (n + 1,) or a[0] != 0 or (np.diff(a) < 0).any():
            bad("%s is not [N+1] = [%d] non-decreasing from 0" % (name, n + 1))
    R = int(run_ptr[-1])
    if run_src.shape != (R,) or run_len.shape != (R,):
        bad("run_src and run_len have %s and %s entries; run_ptr ends at %d"
            % (run_src.shape, run_len.shape, R))
    if (run_len < 1).any() or (run_src < 0).any() or (run_src + run_len > n).any():
        bad("run_src and run_len name sources outside 0..%d" % (n - 1))
    ends = np.concatenate([[0], np.cumsum(run_len)])
    if not np.array_equal(ends[run_ptr], edge_ptr):
        bad("run_len does not add up to each destination's edges (edge_ptr)")
    later = np.ones(R, bool)                    # runs after a destination's first
    later[run_ptr[:-1][np.diff(run_ptr) > 0]] = False
    prev_end = np.concatenate([[0], (run_src + run_len)[:-1]])
    if (later & (run_src < prev_end - 1)).any():
        bad("run_src is not ascending within a destination")
    E = int(edge_ptr[-1])
    # ids above 2^40 (no graph has that many edges) would overflow ag_edge_order's sums
    if edge_id is not None and (edge_id.shape != (E,) or (edge_id < -1).any() or
                                (edge_id > 1 << 40).any()):
        bad("edge_id is not [E] = [%d] ids in -1..2^40" % E)


def pattern_info(spec):
    """(V, reads_graph) of a pattern spec: its virtual:V's V (0: none) and
    whether it reads a graph (graph, hops:K); a bad spec raises Error."""
    e = err()
    pat = C.c_void_p()
    check(lib.ag_pattern_parse(C.byref(pat), str(spec).encode(), C.byref(e)), e)
    try:
        return int(lib.ag_pattern_virtual(pat)), bool(lib.ag_pattern_needs_graph(pat))
    finally:
        lib.ag_pattern_free(pat)


class Graph:
    """Who attends to whom: N nodes, E messages (an undirected edge is two).

    Per-edge arrays (attention_weights, edge_bias, its gradient) are in the
    graph's edge order: the columns of edge_index for from_edge_index, the
    entries of indices for from_csr, igraph's edge ids for files (an undirected
    edge u-v gives u->v then v->u, u < v), slot order for patterns; self-loops
    that self_loops="on" or "replace" adds come last, by node (edge id -1).
    `src` and `dst` give each edge's ends in that order.

    self_loops (load, from_csr, from_edge_index, pattern): "keep" (default) as
    given; "off" every self-loop removed; "on" a loop added to each node that
    has none, existing ones kept (PyG's add_self_loops only on a graph without
    self-loops); "replace" every self-loop removed and exactly one added per
    node: PyG's remove_self_loops + add_self_loops, what GATConv, GATv2Conv and
    TransformerConv do with add_self_loops=True. On a pattern "on" and
    "replace" are the same (a pattern never lists a source twice)."""

    def __init__(self):
        raise TypeError("make a Graph with Graph.load, Graph.pattern, Graph.from_csr or "
                        "Graph.from_edge_index")

    @classmethod
    def _new(cls, kind):
        g = object.__new__(cls)
        g._nb = S.ag_nbhd_t()
        g.kind = kind          # "file", "pattern", "csr", "edge_index"
        g.labels = None
        g.name = None
        g.edge_attrs = {}
        g.self_loops = "keep"  # how it was made, as model.args records it
        g.directed = None      # Graph.load's directed (None: as the file says)
        g._shape = None        # (n_src, n_dst) of a bipartite edge_index; None: (N, N)
        g.n_virtual = 0        # a pattern's virtual:V: its last V nodes are appended ones
        return g

    def __del__(self):
        nb = getattr(self, "_nb", None)
        if nb is not None:
            lib.ag_nbhd_destroy(C.byref(nb))

    # ------------------------------------------------------------ pickle, copy

    def __getstate__(self):
        """The graph as arrays (pickle, copy.copy and copy.deepcopy use it): the
        compiled neighbourhoods (edge_ptr, runs, edge ids), the given edges'
        sorted positions (perm) and the self_loops mode, from which the edge
        order is found again, and labels, name, edge_attrs. The transpose is a
        cache, compiled again when a backward needs it."""
        nb, N = self._nb, self.N
        R, E = int(nb.n_runs), self.E
        return {"version": _STATE_VERSION, "kind": self.kind, "name": self.name,
                "labels": None if self.labels is None else list(self.labels),
                "edge_attrs": {k: np.array(v) for k, v in self.edge_attrs.items()},
                "n_nodes": N,
                "edge_ptr": _i64_view(nb.edge_ptr, N + 1).copy(),
                "run_ptr": _i64_view(nb.run_ptr, N + 1).copy(),
                "run_src": _i64_view(nb.run_src, R).copy(),
                "run_len": _i64_view(nb.run_len, R).copy(),
                "edge_id": _i64_view(nb.edge_id, E).copy() if nb.edge_id else None,
                "perm": None if self._perm is None else np.array(self._perm, np.int64),
                "mode": self._mode, "self_loops": self.self_loops, "directed": self.directed,
                "shape": self._shape, "n_virtual": self.n_virtual}

    def __setstate__(self, state):
        """Rebuilds the graph from __getstate__'s arrays (checked: the kernels
        trust them) into memory of its own."""
        if state.get("version") != _STATE_VERSION:
            raise Error("pickled Graph has layout version %r; this attngraph reads %d"
                        % (state.get("version"), _STATE_VERSION), "invalid value")
        n = int(state["n_nodes"])
        arr = lambda key: None if state[key] is None else np.asarray(state[key], np.int64)
        edge_ptr, run_ptr, run_src, run_len, edge_id, perm = (
            arr(k) for k in ("edge_ptr", "run_ptr", "run_src", "run_len", "edge_id", "perm"))
        _check_runs(n, edge_ptr, run_ptr, run_src, run_len, edge_id)
        E = int(edge_ptr[-1])
        if perm is not None and (perm.ndim != 1 or not np.array_equal(
                np.sort(perm), np.arange(perm.size))):
            raise Error("pickled Graph: perm is not a permutation", "invalid value")
        nb = S.ag_nbhd_t()
        try:
            nb.n_nodes, nb.n_edges, nb.n_runs = n, E, run_src.size
            nb.edge_ptr, nb.run_ptr = _c_copy(edge_ptr), _c_copy(run_ptr)
            nb.run_src, nb.run_len = _c_copy(run_src), _c_copy(run_len)
            if edge_id is not None:
                nb.edge_id = _c_copy(edge_id)
        except BaseException:
            lib.ag_nbhd_destroy(C.byref(nb))
            raise
        self._nb = nb
        self.kind, self.name = state["kind"], state["name"]
        self.labels = None if state["labels"] is None else list(state["labels"])
        self.edge_attrs = {k: np.array(v) for k, v in state["edge_attrs"].items()}
        self._perm, self._mode = perm, int(state["mode"])
        self.self_loops, self.directed = state["self_loops"], state["directed"]
        self._slot = self._ends = None
        self.n_virtual = int(state.get("n_virtual", 0))
        if not 0 <= self.n_virtual < max(n, 1):
            raise Error("pickled Graph: %d virtual nodes of %d" % (self.n_virtual, n),
                        "invalid value")
        shape = state.get("shape")
        self._shape = None if shape is None else tuple(int(v) for v in shape)
        if self._shape is not None and (max(self._shape) != n or min(self._shape) < 0):
            raise Error("pickled Graph: shape %s for %d nodes" % (self._shape, n),
                        "invalid value")
        if self._nb.edge_id or perm is not None:
            self._order()

    # ------------------------------------------------------------ makers

    @classmethod
    def load(cls, path, format=None, directed=None, self_loops="keep", max_nodes=0,
             edge_attrs=()):
        """Reads a graph file with the library's readers (ag_graph_load): format
        is "edgelist", "ncol", "lgl", "graphml", "gml", "pajek" or None (from
        the extension); directed None (as the file says; edge lists directed),
        True or False (edge lists: each line is both directions). Labels come
        from the label/name/id attributes. edge_attrs names numeric edge
        attributes to keep in g.edge_attrs[name], float32 [E] in edge order
        (e.g. an edge bias; 0 on self-loops self_loops="on" or "replace" adds)."""
        opts = S.ag_load_opts_t(0, int(max_nodes), 0 if directed is None else
                                (1 if directed else 2))
        e = err()
        if format is not None:
            f = C.c_int()
            check(lib.ag_format_parse(C.byref(f), str(format).encode(), C.byref(e)), e)
            opts.format = f.value
        g = cls._new("file")
        g.directed = directed
        g.name = os.fspath(path)
        buf = C.create_string_buffer(S.IGRAPH_T_BYTES)
        with _IGRAPH_LOCK:
            try:
                check(lib.ag_graph_load(buf, os.fsencode(path), C.byref(opts), C.byref(e)), e)
            except Error as x:    # the library speaks of the CLI's option
                raise Error(str(x).replace("with --format", "with format=, e.g. "
                                           "format=\"edgelist\""), x.status) from None
            try:
                g._from_igraph(buf, self_loops, edge_attrs)
            finally:
                igraph.igraph_destroy(buf)
        return g

    def _from_igraph(self, buf, self_loops, edge_attrs):
        e = err()
        check(lib.ag_nbhd_from_graph(C.byref(self._nb), buf, C.byref(e)), e)
        labels = S.ag_labels_t()
        check(lib.ag_labels_from_graph(C.byref(labels), buf, C.byref(e)), e)
        try:
            if labels.str:
                self.labels = [labels.str[i].decode("utf-8", "replace") for i in range(labels.n)]
        finally:
            lib.ag_labels_destroy(C.byref(labels))
        self._finish(self_loops, None)
        self.edge_attrs = {}
        for name in ([edge_attrs] if isinstance(edge_attrs, str) else edge_attrs):
            values = C.c_void_p()
            check(lib.ag_edge_attribute(C.byref(values), buf, C.byref(self._nb), name.encode(),
                                        C.byref(e)), e)
            try:
                per_slot = np.ctypeslib.as_array((C.c_float * self.E).from_address(values.value)) \
                    if self.E else np.zeros(0, np.float32)
                self.edge_attrs[name] = np.array(self.from_slots(per_slot), np.float32)
            finally:
                c_free(values)

    @classmethod
    def pattern(cls, spec, n=None, self_loops="keep", labels=None, rows=None, graph=None):
        """A connectivity pattern ("causal", "window:3", "docs:5,3&window:2", ...;
        docs/patterns.md) on n nodes (None: the size the spec implies, or
        len(labels)); rows=(lo, hi): only destinations lo..hi-1 get their messages
        (ag_nbhd_from_pattern_rows: a part of a pattern too large to compile whole).

        graph: a Graph the words graph and hops:K read ("graph+virtual:1",
        "graph+expander:3", "hops:2&!self"); it sizes the pattern and lends it
        its labels. A spec's virtual:V appends V nodes after the n given (the
        result has n + V, its n_virtual V; labels name the first n, the
        appended ones are "virtual0", ...)."""
        e = err()
        pat = C.c_void_p()
        check(lib.ag_pattern_parse(C.byref(pat), str(spec).encode(), C.byref(e)), e)
        try:
            V = int(lib.ag_pattern_virtual(pat))
            if graph is not None:
                if not isinstance(graph, Graph):
                    raise Error("graph=%s: expected an attngraph.Graph" % type(graph).__name__,
                                "invalid value")
                if graph._shape is not None and graph._shape[0] != graph._shape[1]:
                    raise Error("graph= is bipartite %s; a pattern reads a graph of one node "
                                "set" % (graph._shape,), "invalid value")
                check(lib.ag_pattern_bind_graph(pat, C.byref(graph._nb), C.byref(e)), e)
                if n is None and labels is None:
                    n = graph.N
                    labels = graph.labels
            if n is None:
                n = len(labels) if labels is not None else lib.ag_pattern_size(pat) - V
                if n <= 0:
                    raise Error("pattern '%s' does not imply a size; give n" % spec,
                                "invalid value")
            n = int(n)
            g = cls._new("pattern")
            if rows is None:
                check(lib.ag_nbhd_from_pattern(C.byref(g._nb), pat, n + V,
                                               _self_loops(self_loops), C.byref(e)), e)
            else:
                try:
                    lo, hi = (int(x) for x in rows)
                except (TypeError, ValueError):
                    raise Error("rows=%r: expected (lo, hi), two node numbers" % (rows,),
                                "invalid value") from None
                check(lib.ag_nbhd_from_pattern_rows(C.byref(g._nb), pat, n + V, int(lo),
                                                    int(hi), _self_loops(self_loops),
                                                    C.byref(e)), e)
        finally:
            lib.ag_pattern_free(pat)
        g.name = str(spec)
        g.n_virtual = V
        if labels is not None:
            if len(labels) != n:
                raise Error("%d labels for %d nodes" % (len(labels), n), "invalid value")
            g.labels = [str(s) for s in labels] + ["virtual%d" % v for v in range(V)]
        g._finish("keep", None)
        g.self_loops = _SELF_NAMES[_self_loops(self_loops)]   # applied by the pattern itself
        return g

    def union(self, *others):
        """The graph whose messages are every message of this graph and of the
        others (all of N nodes), each pair j -> i once: a set union, as a
        pattern's '+' (multi-edges merge). Destinations in order, sources
        ascending; labels from the first graph that has them. For unions with
        patterns, Graph.pattern("graph+...", graph=g) does it in C."""
        graphs = (self,) + others
        for g in graphs:
            if not isinstance(g, Graph):
                raise Error("union of a %s: expected attngraph.Graph" % type(g).__name__,
                            "invalid value")
            if g.N != self.N or g.shape != (self.N, self.N):
                raise Error("union of a graph of %s nodes with one of %s; expected the same "
                            "node set" % (g.shape if g._shape else g.N, self.N),
                            "invalid value")
        N = self.N
        keys = np.unique(np.concatenate(   # destination * N + source, sorted and once
            [np.repeat(np.arange(N, dtype=np.int64), g.in_degree()) * N + g.csr()[1]
             for g in graphs]))
        indptr = np.zeros(N + 1, np.int64)
        np.cumsum(np.bincount(keys // N, minlength=N), out=indptr[1:])
        u = Graph.from_csr(indptr, keys % N)
        u.name = " + ".join(str(g.name or g.kind) for g in graphs)
        u.labels = next((list(g.labels) for g in graphs if g.labels is not None), None)
        return u

    @classmethod
    def from_csr(cls, indptr, indices, self_loops="keep"):
        """An in-neighbour CSR: destination i receives from indices[indptr[i]:indptr[i+1]]
        (any order within a row; multi-edges and self-loops kept). Edge k is indices[k]."""
        indptr = np.asarray(indptr)
        indices = np.asarray(indices)
        if indptr.ndim != 1 or indptr.size < 2:
            raise Error("indptr has shape %s; expected [N+1] with N >= 1" % (indptr.shape,),
                        "invalid value")
        n = indptr.size - 1
        if not np.issubdtype(indptr.dtype, np.integer):
            raise Error("indptr has dtype %s; expected integers" % indptr.dtype, "invalid value")
        indptr = indptr.astype(np.int64)
        steps = np.diff(indptr)
        if indptr[0] != 0 or (steps < 0).any():
            at = 0 if indptr[0] != 0 else int(np.flatnonzero(steps < 0)[0]) + 1
            raise Error("indptr[%d] is %d; expected indptr to start at 0 and never decrease"
                        % (at, indptr[at]), "invalid value")
        if indices.ndim != 1 or indices.size != indptr[-1]:
            raise Error("indices has shape %s; indptr ends at %d: expected [%d]"
                        % (list(indices.shape), indptr[-1], indptr[-1]), "invalid value")
        if indices.size and not np.issubdtype(indices.dtype, np.integer):
            raise Error("indices has dtype %s; expected integers" % indices.dtype,
                        "invalid value")
        dst = np.repeat(np.arange(n, dtype=np.int64), steps)
        return cls._from_pairs(indices, dst, n, n, self_loops, "csr")

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes=None, self_loops="keep", size=None):
        """PyG's edge_index [2, E]: row 0 sources, row 1 targets (the message
        j -> i of column (j, i)), in any order; multi-edges and self-loops kept.
        num_nodes None: 1 + the largest id. size=(n_src, n_dst): a bipartite
        graph, sources 0..n_src-1 and targets 0..n_dst-1 (PyG's size); the
        Graph then has max(n_src, n_dst) nodes, and self-loops "on" and
        "replace" go to the first min(n_src, n_dst) (as PyG's layers add
        them). Accepts numpy arrays and torch tensors of any integer type.
        O(N + E): two counting sorts in C (ag_nbhd_from_edges)."""
        if hasattr(edge_index, "detach"):
            edge_index = edge_index.detach().cpu().numpy()
        ei = np.asarray(edge_index)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise Error("edge_index has shape %s; expected [2, E]" % (ei.shape,), "invalid value")
        if ei.size and not np.issubdtype(ei.dtype, np.integer):
            raise Error("edge_index has dtype %s; expected integers" % ei.dtype, "invalid value")
        if size is not None:
            n_src, n_dst = (int(n) for n in size)
        else:
            if num_nodes is None:
                if not ei.size:
                    raise Error("edge_index has no edges; give num_nodes", "invalid value")
                num_nodes = int(ei.max()) + 1
            n_src = n_dst = int(num_nodes)
            if n_src < 1:
                raise Error("num_nodes is %d; expected >= 1" % n_src, "invalid value")
        return cls._from_pairs(ei[0], ei[1], n_src, n_dst, self_loops, "edge_index")

    @classmethod
    def _from_pairs(cls, src, dst, n_src, n_dst, self_loops, kind):
        src = np.ascontiguousarray(src, dtype=np.int64)
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        mode = _self_loops(self_loops)
        order = np.empty(src.size + min(n_src, n_dst) + 1, np.int64)
        g = cls._new(kind)
        e = err()
        try:
            check(lib.ag_nbhd_from_edges(C.byref(g._nb), n_src, n_dst, src.ctypes.data,
                                         dst.ctypes.data, src.size, mode, order.ctypes.data,
                                         C.byref(e)), e)
        except Error as x:
            if kind == "csr":   # the library numbers the entries as edges
                raise Error(re.sub(r"edge (\d+) has source", r"indices[\1] is", str(x)),
                            x.status) from None
            raise
        g._perm, g._mode = None, mode
        g.self_loops = _SELF_NAMES[mode]
        g._shape = (n_src, n_dst) if n_src != n_dst else None
        g._slot = order[:g.E]
        g._ends = None       # ag_edge_order's, when src, dst or edge_ids are asked for
        return g

    def _finish(self, self_loops, perm):
        """Applies self_loops and records the edge order. perm: the sorted
        position of each given edge (edge_index, CSR), or None."""
        e = err()
        mode = _self_loops(self_loops)
        if mode:
            check(lib.ag_nbhd_self_loops(C.byref(self._nb), mode, C.byref(e)), e)
        self._perm, self._mode = perm, mode
        self.self_loops = _SELF_NAMES[mode]
        self._slot = self._ends = None
        # Without edge ids or a permutation (patterns), edge k is slot k: nothing
        # to record, and the ends wait until asked for (causal on 65,536 nodes
        # has 2.1e9 edges but 65,536 runs).
        if self._nb.edge_id or perm is not None:
            self._order()

    def _order(self):
        """_slot[k], the slot of edge k (None: slot k), and _ends: edge ids,
        sources and targets [3, E] in edge order."""
        e = err()
        msgs = C.POINTER(S.ag_edge_msg_t)()
        slot = C.POINTER(C.c_int64)()
        check(lib.ag_edge_order(C.byref(self._nb), C.byref(msgs), C.byref(slot), C.byref(e)), e)
        n = self._nb.n_edges
        try:
            order_slot = _i64_view(C.cast(slot, C.c_void_p).value, n).copy()
            m = np.ctypeslib.as_array(C.cast(msgs, C.POINTER(C.c_int64 * 3)), (n,)) if n else \
                np.zeros((0, 3), np.int64)
            m = np.array(m, dtype=np.int64).reshape(n, 3)
        finally:
            c_free(C.cast(msgs, C.c_void_p))
            c_free(C.cast(slot, C.c_void_p))
        perm = self._perm
        if perm is not None and self._mode:
            # library edge k is sorted position k: the kept ones (all but the
            # loops off and replace dropped), then the added loops (-1) by node;
            # the kept ones go back to the given order, the added stay last
            kept = int(np.count_nonzero(m[:, 0] >= 0))
            given = perm[m[:kept, 0]]
            rank = np.argsort(given, kind="stable")
            order_slot = np.concatenate([order_slot[:kept][rank], order_slot[kept:]])
            m = np.concatenate([m[:kept][rank], m[kept:]])
            m[:kept, 0] = given[rank]
        elif perm is not None:      # given edge j sits at sorted position inv[j]
            inv = np.empty_like(perm)
            inv[perm] = np.arange(perm.size)
            order_slot = order_slot[inv]
            m = m[inv]
            m[:, 0] = np.arange(perm.size)
        if self._nb.edge_id or perm is not None:
            self._slot = np.ascontiguousarray(order_slot)
        self._ends = np.ascontiguousarray(m.T)

    @property
    def edge_ids(self):
        """[E] each edge's id: the edge_index column or CSR entry, the igraph edge
        id for files (-1 on self-loops self_loops="on" or "replace" added), k
        for patterns."""
        if self._ends is None:
            self._order()
        return self._ends[0]

    @property
    def src(self):
        """[E] each edge's source, in edge order."""
        if self._ends is None:
            self._order()
        return self._ends[1]

    @property
    def dst(self):
        """[E] each edge's target (destination), in edge order."""
        if self._ends is None:
            self._order()
        return self._ends[2]

    # ------------------------------------------------------------ views

    @property
    def N(self):
        return int(self._nb.n_nodes)

    @property
    def shape(self):
        """(n_src, n_dst): the sources' and the destinations' counts; (N, N)
        but for a bipartite from_edge_index(..., size=)."""
        return self._shape or (self.N, self.N)

    @property
    def E(self):
        return int(self._nb.n_edges)

    @property
    def edge_index(self):
        """[2, E] int64: sources and targets in the graph's edge order."""
        return np.stack([self.src, self.dst])

    def in_degree(self):
        return np.diff(_i64_view(self._nb.edge_ptr, self.N + 1))

    def csr(self):
        """(indptr, indices) int64: the in-neighbour CSR of every message, what
        from_csr and the command line's --csr read (which wants each row's
        sources ascending). A graph whose edge order goes by destination, then
        source (patterns, such CSRs, a sorted edge_index) comes back in the
        same order; self-loops the graph added (self_loops="on", "replace")
        are entries like the others."""
        order = np.lexsort((self.src, self.dst))
        indptr = np.zeros(self.N + 1, dtype=np.int64)
        np.cumsum(self.in_degree(), out=indptr[1:])
        return indptr, np.ascontiguousarray(self.src[order], dtype=np.int64)

    def save_csr(self, indptr_path, indices_path):
        """Writes csr() as two .npy files: `attngraph run --csr INDPTR,INDICES` (and
        train, bench, grad, the MPI tool) then runs on this graph."""
        indptr, indices = self.csr()
        np.save(indptr_path, indptr)
        np.save(indices_path, indices)

    def to_slots(self, per_edge):
        """A per-edge array [E, ...] in edge order -> slot order (the kernel's)."""
        a = np.asarray(per_edge)
        if self._slot is None:
            return a
        out = np.empty_like(a)
        out[self._slot] = a
        return out

    def from_slots(self, per_slot):
        """A per-slot array [E, ...] -> the graph's edge order."""
        return np.asarray(per_slot) if self._slot is None else np.asarray(per_slot)[self._slot]

    def label(self, i):
        return self.labels[i] if self.labels is not None else str(i)

    def __repr__(self):
        return "<attngraph.Graph %s%s: N=%d, E=%d>" % (
            self.kind, " " + repr(self.name) if self.name else "", self.N, self.E)
