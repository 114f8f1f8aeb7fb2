"""Rounds (projections, attention, output projection, residual, pre-norm) and
`compare`: the same inputs under several connectivities."""
import ctypes as C

import numpy as np

from . import _structs as S
from ._lib import lib, check, err, Error
from .ops import f32, finite, score_of
from .weights import Weights

# a round callback that lets every round run
_GO_ON = S.ON_ROUND_FN(lambda round_, ctx: 0)

_NORMS = {None: 0, "none": 0, False: 0, "layer": 1, True: 1}


def _layers(layers):
    if isinstance(layers, Weights):
        layers = [layers]
    layers = list(layers)
    if not layers:
        raise Error("no layers given", "invalid value")
    arr = (S.ag_weights_t * len(layers))(*[w.c() for w in layers])
    return layers, arr


def _round_opts(graph, layers, score, score_kw, residual, norm, ln_eps, edge_features=None):
    if norm not in _NORMS:
        raise Error("norm is %r; expected None or 'layer'" % (norm,), "invalid value")
    w = layers[0]
    s, keep = score_of(score, score_kw).c(graph, w.heads, w.d, validate=False)
    opts = S.ag_round_opts_t()
    lib.ag_round_opts_init(C.byref(opts))
    opts.score = C.pointer(s)
    opts.no_residual = int(not residual)
    opts.norm = _NORMS[norm]
    if ln_eps is not None:
        opts.ln_eps = finite(ln_eps, "ln_eps")
    if edge_features is not None:   # [E, F] in the graph's edge order, to the slots
        e = f32(edge_features, "edge_features")
        if e.ndim != 2 or e.shape[0] != graph.E:
            raise Error("edge_features has shape %s; expected [%d, F] (one row per edge, in "
                        "the graph's edge order)" % (list(e.shape), graph.E), "invalid value")
        if not any(w.wedge is not None for w in layers):
            raise Error("edge_features given, and no layer reads them (a layer's wedge "
                        "projects them)", "invalid value")
        bad = np.argwhere(~np.isfinite(e))
        if len(bad):
            raise Error("edge_features: row %d, column %d is %s; expected finite values"
                        % (bad[0][0], bad[0][1], e[tuple(bad[0])]), "invalid value")
        e = np.ascontiguousarray(graph.to_slots(e), np.float32)
        opts.edge_features, opts.edge_dim = e.ctypes.data, e.shape[1]
        keep = (keep, e)
    return opts, (s, keep)


def _widths(layers, rounds):
    """(the widest state of rounds 1..rounds, the last round's output width, the
    largest H*d): layers may change the width (Weights.width_out)."""
    # (more rounds than layers: the library refuses it, naming both counts)
    used = [layers[min(r, len(layers) - 1)] for r in range(rounds)]
    widest = max([layers[0].D] + [w.width_out for w in used])
    return widest, used[-1].width_out if used else layers[0].D, \
        max(w.heads * w.d for w in layers)


def _features(graph, x, D):
    x = f32(x, "x")
    if x.shape != (graph.N, D):
        raise Error("x has shape %s; expected [%d, %d] (N nodes, the weights' D)"
                    % (list(x.shape), graph.N, D), "invalid value")
    return x


def rounds(graph, x, layers, rounds=1, score="scaled-dot", residual=True, norm=None,
           ln_eps=None, return_last=False, edge_features=None, **score_kw):
    """Runs `rounds` message rounds on features x [N, D] and returns the final
    states (a new array; x is not changed). layers: a Weights shared by every
    round, or a list with one per round. return_last=True also returns the last
    round's Q, K, V, M and per node and head its entropy, max_weight, distance.
    edge_features [E, F] (the graph's edge order) are read by layers with
    wedge."""
    layers, arr = _layers(layers)
    w = layers[0]
    widest, out, HD = _widths(layers, int(rounds))
    X = np.zeros((graph.N, widest), np.float32)   # room for every round's width
    X.reshape(-1)[:graph.N * w.D] = _features(graph, x, w.D).reshape(-1)
    opts, keep = _round_opts(graph, layers, score, score_kw, residual, norm, ln_eps,
                             edge_features)
    if return_last:
        # the library fills the figures only for a round callback: a no-op one
        opts.figures = 2
        opts.on_round = _GO_ON
    ws = S.ag_workspace_t()
    e = err()
    check(lib.ag_workspace_init(C.byref(ws), graph.N, HD, widest, C.byref(e)), e)
    done = C.c_int()
    try:
        check(lib.ag_rounds_run(C.byref(graph._nb), arr, len(layers), X.ctypes.data, int(rounds),
                                C.byref(opts), C.byref(ws), C.byref(done), C.byref(e)), e)
        # the states of the last round run, in the first N x width floats
        width = layers[0 if len(layers) == 1 else done.value - 1].width_out if done.value \
            else w.D
        X = X.reshape(-1)[:graph.N * width].reshape(graph.N, width).copy()
        if not return_last:
            return X
        last_w = layers[0 if len(layers) == 1 else max(done.value - 1, 0)]
        hd, h = last_w.heads * last_w.d, last_w.heads
        last = {}
        for name, cols in (("Q", hd), ("K", hd), ("V", hd), ("M", hd),
                           ("entropy", h), ("max_weight", h), ("distance", h)):
            p = getattr(ws, name)
            last[name.lower() if len(name) == 1 else name] = None if not p else \
                np.ctypeslib.as_array((C.c_float * (graph.N * cols)).from_address(p)) \
                .reshape(graph.N, cols).copy()
        return X, last
    finally:
        lib.ag_workspace_destroy(C.byref(ws))


_run_rounds = rounds


def compare(graphs, x, layers, rounds=1, score="scaled-dot", residual=True, norm=None,
            **score_kw):
    """Runs the same features and weights under each connectivity (a list of
    Graphs of the same size, or a dict name -> Graph; the first is the
    baseline) and returns one dict per connectivity with what `attngraph
    compare` tabulates: name, edges, density, entropy_mean, entropy_min,
    distance_mean (patterns only), rel_l2 and cosine_mean against the baseline
    (None for it), most_changed (the 3 node ids whose outputs moved most, with
    their L2 change), and per node: in_degree, entropy, distance, change,
    cosine, and the outputs y."""
    items = list(graphs.items()) if isinstance(graphs, dict) else \
        [(g.name or "graph %d" % k, g) for k, g in enumerate(graphs)]
    if len(items) < 2:
        raise Error("give at least two connectivities", "invalid value")
    N = items[0][1].N
    rows, base = [], None
    for k, (name, g) in enumerate(items):
        if g.N != N:
            raise Error("'%s' has %d nodes; the first connectivity ('%s') has %d"
                        % (name, g.N, items[0][0], N), "invalid value")
        y, last = _run_rounds(g, x, layers, rounds, score, residual, norm,
                                      return_last=True, **score_kw)
        ent = last["entropy"].astype(np.float64).mean(axis=1)
        dist = last["distance"].astype(np.float64).mean(axis=1)
        if g.kind == "file":       # |i - j| means something only where ids are positions
            dist[:] = np.nan
        y64 = y.astype(np.float64)
        if base is None:
            base = y64
        change = np.sqrt(((y64 - base) ** 2).sum(axis=1))
        yy, bb, yb = (y64 * y64).sum(1), (base * base).sum(1), (y64 * base).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = np.where((yy == 0) & (bb == 0), 1.0,
                           np.where((yy == 0) | (bb == 0), 0.0, yb / np.sqrt(yy * bb)))
        diff2, base2 = (change ** 2).sum(), bb.sum()
        rel = np.sqrt(diff2 / base2) if base2 > 0 else (np.inf if diff2 > 0 else 0.0)
        top = np.argsort(-change, kind="stable")[:3]
        fin = np.isfinite(ent)
        row = dict(name=name, nodes=N, edges=g.E, density=g.E / float(N * N),
                   entropy_mean=float(ent[fin].mean()) if fin.any() else np.nan,
                   entropy_min=float(ent[fin].min()) if fin.any() else np.nan,
                   distance_mean=float(np.nanmean(dist)) if np.isfinite(dist).any() else np.nan,
                   rel_l2=None if k == 0 else float(rel),
                   cosine_mean=None if k == 0 else float(cos.mean()),
                   most_changed=[] if k == 0 else [(int(i), float(change[i])) for i in top],
                   in_degree=g.in_degree(), entropy=ent, distance=dist, change=change,
                   cosine=cos, y=y)
        rows.append(row)
    return rows


def format_compare(rows, labels=None):
    """The table `attngraph compare` prints, as a string."""
    out = ["%-28s %12s %8s %7s %7s %9s %7s %7s  %s" % (
        "connectivity", "edges", "density", "H_mean", "H_min", "dist_mean", "rel_L2", "cos",
        "most changed (L2)")]

    def num(x, w, p):
        return " %*s" % (w, "-") if x is None or np.isnan(x) else " %*.*f" % (w, p, x)

    for k, r in enumerate(rows):
        line = "%-28.28s %12d %8.4f" % (r["name"], r["edges"], r["density"])
        line += num(r["entropy_mean"], 7, 3) + num(r["entropy_min"], 7, 3)
        line += num(r["distance_mean"], 9, 2) + num(r["rel_l2"], 7, 4) + num(r["cosine_mean"], 7, 4)
        line += "  " + ("(baseline)" if k == 0 else ", ".join(
            "'%s' %.3g" % (labels[i] if labels else i, c) for i, c in r["most_changed"]))
        out.append(line)
    return "\n".join(out)
