"""Pictures as SVG from Python: the library's ag_draw_* (include/attngraph/draw.h).

    import attngraph as ag
    from attngraph import draw
    w = ag.attention_weights(g, q, k, heads=2)          # [E, H], the graph's edge order
    svg = draw.heatmap(g, w, title="layer 1")           # SVG text (a str)
    draw.save(svg, "attention.svg")

Every function returns an Svg: a str holding the whole document, which
Jupyter shows as a picture (it has _repr_svg_). The same inputs give the same
bytes as `attngraph draw ...` given the same weights and title.
"""
import csv
import ctypes as C
import os

import numpy as np

from . import _structs as S
from ._lib import lib, check, err, Error
from .graph import Graph, _IGRAPH_LOCK
from .ops import f32


class Svg(str):
    """An SVG document: a str (write it, parse it with xml.etree) that notebooks
    show as a picture."""

    def _repr_svg_(self):
        return str(self)

    def save(self, path):
        """Writes it to path whole or not at all (ag_svg_save); returns path."""
        save(self, path)
        return path


def _svg(make):
    """Calls make(char **svg, err) and returns the picture as an Svg, the C string freed."""
    out = C.c_void_p()
    e = err()
    check(make(C.byref(out), C.byref(e)), e)
    try:
        return Svg(C.string_at(out.value).decode("utf-8"))
    finally:
        lib.ag_svg_free(out)


def save(svg, path):
    """Writes svg (text) to path through a temporary renamed into place: the
    file is whole or as it was."""
    e = err()
    check(lib.ag_svg_save(os.fsencode(path), str(svg).encode("utf-8"), C.byref(e)), e)


def _text(s):
    return None if s is None else str(s).encode("utf-8")


def _strings(items, n, what):
    """A C array of n UTF-8 strings (and the bytes it points to), or (None, None)."""
    if items is None:
        return None, None
    items = [str(s) for s in items]
    if len(items) != n:
        raise Error("%s has %d entries; expected %d" % (what, len(items), n), "invalid value")
    arr = (C.c_char_p * n)(*[s.encode("utf-8") for s in items])
    return C.cast(arr, C.c_void_p).value, arr


def _edges(graph, weights, head, labels, title):
    """ag_edge_weights_t of graph's edges (in the kernel's slot order, as the
    tool draws them) with weights [E, H] or [E] given in the graph's edge
    order; and the arrays it points to (keep them)."""
    if not isinstance(graph, Graph):
        raise TypeError("graph is a %s; expected an attngraph.Graph" % type(graph).__name__)
    w = f32(weights, "weights")
    if w.ndim == 1:
        w = w.reshape(-1, 1)
    if w.ndim != 2 or w.shape[0] != graph.E:
        raise Error("weights has shape %s; the graph has %d edges: expected [%d, H] or [%d] "
                    "(attention_weights gives them)" % (list(w.shape), graph.E, graph.E,
                                                        graph.E), "invalid value")
    H = w.shape[1]
    if head is not None and not 0 <= int(head) < H:
        raise Error("head is %d; the weights have %d head%s: expected None (the mean) or 0..%d"
                    % (int(head), H, "" if H == 1 else "s", H - 1), "invalid value")
    w = np.ascontiguousarray(graph.to_slots(w), np.float32)
    N, E = graph.N, graph.E
    src = np.empty(max(E, 1), np.int64)
    lib.ag_nbhd_sources(C.byref(graph._nb), 0, N, src.ctypes.data)
    dst = np.repeat(np.arange(N, dtype=np.int64), graph.in_degree())
    dst = np.ascontiguousarray(dst if E else np.zeros(1, np.int64))
    lab, keep_lab = _strings(labels if labels is not None else graph.labels, N, "labels")
    t = _text(title)
    ew = S.ag_edge_weights_t(N, E, src.ctypes.data, dst.ctypes.data, w.ctypes.data, H,
                             -1 if head is None else int(head), lab, t)
    return ew, (w, src, dst, keep_lab, t)


def heatmap(graph, weights, head=None, labels=None, title=None, log_scale=False, vmax=0.0,
            vmin=0.0, bins=0, max_nodes=0, max_cells=0):
    """Destinations (rows) x sources (columns), a cell per distinct edge
    (<rect class="edge" data-dst data-src data-weight>, the weights of a
    multi-edge added up) coloured by weight; hatched grey where there is no
    edge. weights: [E, H] or [E] in the graph's edge order (attention_weights);
    head None: the mean over heads. labels default to the graph's. log_scale:
    colour by log10 of the weight, vmin .. vmax (0: from the weights). Above
    max_nodes nodes (default 1000) or max_cells cells (default 20000) the
    picture is binned into bins x bins blocks (default 128)."""
    ew, keep = _edges(graph, weights, head, labels, title)
    opts = S.ag_heatmap_opts_t(int(max_nodes), int(max_cells), int(bins), float(vmax),
                               int(bool(log_scale)), float(vmin))
    return _svg(lambda out, e: lib.ag_draw_heatmap(out, C.byref(ew), C.byref(opts), e))


def layout_fr(graph, seed=1):
    """A Fruchterman-Reingold layout of graph (directions ignored), [N, 2] in
    [0, 1]; the same seed gives the same layout (`--seed`'s default is 1)."""
    if not isinstance(graph, Graph):
        raise TypeError("graph is a %s; expected an attngraph.Graph" % type(graph).__name__)
    N, E = graph.N, graph.E
    src = np.empty(max(E, 1), np.int64)
    lib.ag_nbhd_sources(C.byref(graph._nb), 0, N, src.ctypes.data)
    dst = np.ascontiguousarray(np.repeat(np.arange(N, dtype=np.int64), graph.in_degree()))
    xy = np.empty((N, 2), np.float64)
    e = err()
    with _IGRAPH_LOCK:      # the layout is igraph's, which is not thread-safe
        check(lib.ag_layout_fr(xy.ctypes.data, N, E, src.ctypes.data, dst.ctypes.data,
                               int(seed), C.byref(e)), e)
    return xy


def graph_picture(graph, weights, layout=None, head=None, labels=None, title=None, vmax=0.0,
                  seed=1, classes=None):
    """The graph: labelled nodes, an arrow per edge (<path class="edge"
    data-src data-dst data-weight>) whose width and opacity rise with its
    weight. layout "fr" (Fruchterman-Reingold, seeded), "arc" (nodes on a line
    in id order) or positions [N, 2]; None: "arc" for patterns (sequences),
    "fr" for the rest, as `attngraph draw graph` chooses. classes [N]: each
    node's class or prediction (integers, -1: none) as its colour. Up to 2000
    nodes and 20000 edges (draw a heatmap of bigger ones)."""
    ew, keep = _edges(graph, weights, head, labels, title)
    if classes is not None:
        if hasattr(classes, "detach"):
            classes = classes.detach().cpu().numpy()
        classes = np.asarray(classes)
        if classes.shape != (graph.N,) or not np.issubdtype(classes.dtype, np.integer):
            raise Error("classes has shape %s and dtype %s; expected integers [%d]"
                        % (list(classes.shape), classes.dtype, graph.N), "invalid value")
        classes = np.ascontiguousarray(classes, np.int64)
    if layout is None:
        layout = "arc" if graph.kind == "pattern" else "fr"
    if isinstance(layout, str):
        if layout not in ("fr", "arc"):
            raise Error("layout is %r; expected 'fr', 'arc' or positions [N, 2]" % layout,
                        "invalid value")
        xy = layout_fr(graph, seed) if layout == "fr" else None
    else:
        xy = np.ascontiguousarray(layout, np.float64)
        if xy.shape != (graph.N, 2):
            raise Error("layout has shape %s; expected 'fr', 'arc' or positions [%d, 2]"
                        % (list(xy.shape), graph.N), "invalid value")
    opts = S.ag_graph_opts_t(None if xy is None else xy.ctypes.data, float(vmax),
                             None if classes is None else classes.ctypes.data)
    return _svg(lambda out, e: lib.ag_draw_graph(out, C.byref(ew), C.byref(opts), e))


def _f64(a, what, n=None):
    a = np.ascontiguousarray(a, np.float64)
    if a.ndim != 1 or (n is not None and a.size != n):
        raise Error("%s has shape %s; expected [%s]" % (what, list(a.shape),
                                                        "n" if n is None else n),
                    "invalid value")
    return a


def read_trace(path):
    """The columns round, change, entropy of a `attngraph run --trace` CSV, as float arrays."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    try:
        return tuple(np.array([float(r[c]) for r in rows]) for c in ("round", "change", "entropy"))
    except KeyError as x:
        raise Error("%s: no column %s (expected round, change, entropy as run --trace writes "
                    "them)" % (path, x), "bad format") from None


def rounds(change, entropy=None, round=None, title=None):
    """The convergence of rounds: the change per round (log scale) beside the
    mean attention entropy (None: left out). round: the round numbers (default
    1, 2, ...). change may instead be the path of a `run --trace` CSV: the
    picture `attngraph draw rounds TRACE.csv` makes."""
    if isinstance(change, (str, os.PathLike)):
        path = os.fspath(change)
        round, change, entropy = read_trace(path)
        if title is None:
            title = "convergence of rounds: %s" % path
    change = _f64(change, "change")
    n = change.size
    round = np.arange(1, n + 1, dtype=np.float64) if round is None else _f64(round, "round", n)
    ent = None if entropy is None else _f64(entropy, "entropy", n)
    t = _text(title)
    return _svg(lambda out, e: lib.ag_draw_rounds(
        out, round.ctypes.data, change.ctypes.data, None if ent is None else ent.ctypes.data,
        n, t, e))


def panels(plots, title=None):
    """Plots side by side. plots: a list of dicts with title, xlabel, ylabel,
    log_y and series, a list of dicts with x, y (NaN y: a gap), name (legend),
    dashed, colour (1..10, 0: by place)."""
    keep = []
    arr = (S.ag_panel_t * len(plots))()
    for p, spec in zip(arr, plots):
        series = spec.get("series", [])
        sarr = (S.ag_series_t * max(len(series), 1))()
        for s, sp in zip(sarr, series):
            y = _f64(sp["y"], "y")
            x = _f64(sp.get("x", np.arange(1, y.size + 1)), "x", y.size)
            name = _text(sp.get("name"))
            keep += [x, y, name]
            s.name, s.x, s.y, s.n = name, x.ctypes.data, y.ctypes.data, y.size
            s.dashed, s.colour = int(bool(sp.get("dashed"))), int(sp.get("colour", 0))
        texts = [_text(spec.get(k)) for k in ("title", "xlabel", "ylabel")]
        keep += [sarr] + texts
        p.title, p.xlabel, p.ylabel = texts
        p.log_y, p.series, p.n_series = int(bool(spec.get("log_y"))), sarr, len(series)
    t = _text(title)
    return _svg(lambda out, e: lib.ag_draw_panels(out, arr, len(plots), t, e))


def mask_grid(graph, grid=96):
    """The mask of graph as [grid, grid] fractions: block (a, b) is the share of
    destinations a x sources b that are edges (grid at most N)."""
    grid = min(int(grid), graph.N)
    fill = np.empty((grid, grid), np.float64)
    e = err()
    check(lib.ag_mask_grid(fill.ctypes.data, grid, C.byref(graph._nb), C.byref(e)), e)
    return fill


def compare(graphs, names=None, figures=None, figure_names=(), title=None, grid=96):
    """Connectivities side by side: each graph's mask (mask_grid; all with the
    same N), then a bar chart per figure. figures [len(graphs), len(figure_names)]
    (NaN: no bar), e.g. columns of attngraph.compare's rows."""
    graphs = list(graphs)
    if not graphs:
        raise Error("no graphs given", "invalid value")
    N = graphs[0].N
    for g in graphs:
        if g.N != N:
            raise Error("the graphs have %d and %d nodes; compare needs the same nodes"
                        % (N, g.N), "invalid value")
    grid = min(int(grid), N)
    masks = np.ascontiguousarray(np.stack([mask_grid(g, grid) for g in graphs]))
    names = names if names is not None else [g.name or g.kind for g in graphs]
    nm, keep_n = _strings(names, len(graphs), "names")
    figure_names = list(figure_names)
    fn, keep_f = _strings(figure_names, len(figure_names), "figure_names")
    fig = np.zeros((len(graphs), 0)) if figures is None else figures
    fig = np.ascontiguousarray(fig, np.float64)
    if fig.shape != (len(graphs), len(figure_names)):
        raise Error("figures has shape %s; expected [%d, %d] (graphs, figure_names)"
                    % (list(fig.shape), len(graphs), len(figure_names)), "invalid value")
    t = _text(title)
    pic = S.ag_compare_picture_t(len(graphs), nm, N, grid, masks.ctypes.data,
                                 len(figure_names), fn, fig.ctypes.data if fig.size else None,
                                 t)
    return _svg(lambda out, e: lib.ag_draw_compare(out, C.byref(pic), e))


def viridis(t):
    """The colour map's (r, g, b) at t in [0, 1]."""
    c = lib.ag_colormap_viridis(float(t))
    return (c.r, c.g, c.b)
