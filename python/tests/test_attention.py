"""The Python API against the dense float64 torch reference: forward, per-edge
weights in the graph's edge order, and gradients, on random graphs with
multi-edges, self-loops and isolated nodes."""
import numpy as np
import pytest
import torch

import attngraph as ag
from conftest import random_edge_index, ROOT
import reference

KINDS = [
    ("scaled-dot", {}),
    ("dot", {"beta": 0.5}),
    ("scaled-dot", {"softcap": 2.0, "edge_bias": True}),
    ("cosine", {"beta": 3.0}),
    ("additive", {"slope": 0.1}),
    ("additive", {"slope": 0.0}),
    ("additive", {"edge_pre": True, "edge_bias": True}),
    ("scaled-dot", {"edge_kv": True}),
    ("gatv2", {"edge_kv": True}),
    ("sigmoid", {"edge_kv": True}),
    ("dot", {"beta": 0.0}),
    ("gatv2", {}),
    ("gatv2", {"slope": 0.0}),
    ("sigmoid", {}),
    ("linear", {}),
]


def inputs(rng, N, H, d, kind, opts):
    q, k, v = (rng.standard_normal((N, H * d)).astype(np.float32) for _ in range(3))
    extra = {}
    if kind == "additive":
        extra = dict(a_src=rng.standard_normal((H, d)).astype(np.float32),
                     a_dst=rng.standard_normal((H, d)).astype(np.float32))
    if kind == "gatv2":
        extra = dict(a=rng.standard_normal((H, d)).astype(np.float32))
    return q, k, v, extra


def ref_tensors(arrays, grad=False):
    return [None if a is None else torch.tensor(np.asarray(a, np.float64), requires_grad=grad)
            for a in arrays]


@pytest.mark.parametrize("kind,opts", KINDS, ids=[k + ("+" + "+".join(o) if o else "")
                                                  for k, o in KINDS])
def test_forward_weights_and_gradients(rng, kind, opts):
    N, H, d, E = 23, 2, 4, 70
    ei = random_edge_index(rng, N, E)
    g = ag.Graph.from_edge_index(ei, N)
    assert (g.N, g.E) == (N, E)
    q, k, v, extra = inputs(rng, N, H, d, kind, opts)
    kw = dict(opts)
    if kw.pop("edge_bias", None):
        kw["edge_bias"] = rng.standard_normal(E).astype(np.float32)
    if kw.pop("edge_pre", None):
        kw["edge_pre"] = rng.standard_normal((E, H)).astype(np.float32)
    if kw.pop("edge_kv", None):
        kw["edge_key"], kw["edge_value"] = (rng.standard_normal((E, H * d)).astype(np.float32)
                                            for _ in range(2))
    kw.update(extra)

    M = ag.attention(g, q, k, v, heads=H, score=kind, **kw)
    W = ag.attention_weights(g, q, k, heads=H, score=kind, **kw)

    per_edge = [n for n in ("edge_bias", "edge_pre", "edge_key", "edge_value") if n in kw]
    names = ["q", "k", "v"] + list(extra) + per_edge
    vals = [q, k, v] + list(extra.values()) + [kw[n] for n in per_edge]
    ts = dict(zip(names, ref_tensors(vals, grad=True)))
    rkw = {n: kw[n] for n in ("beta", "softcap", "slope") if n in kw}
    rkw.update({n: ts[n] for n in list(extra) + per_edge})
    Mr, Ar = reference.attention(ei[0], ei[1], N, ts["q"], ts["k"], ts["v"], H, kind, **rkw)

    np.testing.assert_allclose(M, Mr.detach().numpy(), atol=2e-5, rtol=0)
    np.testing.assert_allclose(W, Ar.detach().numpy(), atol=1e-5, rtol=0)   # edge_index order
    assert not M[N - 2:].any()                                              # isolated: zeros

    dm = rng.standard_normal(M.shape).astype(np.float32)
    (Mr * torch.tensor(dm, dtype=torch.float64)).sum().backward()
    grads = ag.attention_backward(g, q, k, v, dm, heads=H, score=kind,
                                  edge_bias_grad="edge_bias" in kw, **kw)
    got = dict(q=grads.dq, k=grads.dk, v=grads.dv, a_src=grads.d_a_src, a_dst=grads.d_a_dst,
               a=grads.d_a_src, edge_bias=grads.d_edge_bias, edge_pre=grads.d_edge_pre,
               edge_key=grads.d_edge_key, edge_value=grads.d_edge_value)
    for n in names:
        want = ts[n].grad.numpy()
        scale = max(1.0, np.abs(want).max())
        np.testing.assert_allclose(got[n], want, atol=5e-5 * scale, rtol=0, err_msg=n)


def test_weights_follow_edge_index_columns(rng):
    """Shuffling edge_index's columns shuffles the weights the same way."""
    N, E, H, d = 15, 50, 2, 3
    ei = random_edge_index(rng, N, E)
    q, k = (rng.standard_normal((N, H * d)).astype(np.float32) for _ in range(2))
    W = ag.attention_weights(ag.Graph.from_edge_index(ei, N), q, k, heads=H)
    perm = rng.permutation(E)
    Wp = ag.attention_weights(ag.Graph.from_edge_index(ei[:, perm], N), q, k, heads=H)
    np.testing.assert_array_equal(Wp, W[perm])
    g = ag.Graph.from_edge_index(ei, N)
    np.testing.assert_array_equal(g.edge_index, ei)
    # softmax: each destination's weights sum to 1 per head
    sums = np.zeros((N, H))
    np.add.at(sums, ei[1], W)
    np.testing.assert_allclose(sums[np.bincount(ei[1], minlength=N) > 0], 1.0, atol=1e-5)


def test_csr_in_given_order(rng):
    """from_csr keeps the entries' order even when rows are not sorted."""
    N, H, d = 6, 1, 4
    indptr = np.array([0, 3, 3, 5, 6, 8, 9])
    indices = np.array([5, 0, 2, 1, 1, 3, 4, 0, 5])    # unsorted rows, a multi-edge 1,1
    g = ag.Graph.from_csr(indptr, indices)
    dst = np.repeat(np.arange(N), np.diff(indptr))
    np.testing.assert_array_equal(g.edge_index, np.stack([indices, dst]))
    q, k, v = (rng.standard_normal((N, H * d)).astype(np.float32) for _ in range(3))
    W = ag.attention_weights(g, q, k, heads=H)
    _, Ar = reference.attention(indices, dst, N, *ref_tensors([q, k, v]), H)
    np.testing.assert_allclose(W, Ar.numpy(), atol=1e-5)


@pytest.mark.parametrize("mode", ["on", "off", "replace"])
def test_self_loops_on_edge_index(rng, mode):
    N, E, H, d = 12, 40, 2, 2
    ei = random_edge_index(rng, N, E)
    ei[:, 5] = ei[:, 0]                       # node 3's self-loop twice
    g = ag.Graph.from_edge_index(ei, N, self_loops=mode)
    loops = ei[0] == ei[1]
    if mode == "on":
        missing = np.setdiff1d(np.arange(N), ei[0][loops])
        want = np.concatenate([ei, np.stack([missing, missing])], axis=1)
    elif mode == "replace":
        want = np.concatenate([ei[:, ~loops], np.stack([np.arange(N)] * 2)], axis=1)
    else:
        want = ei[:, ~loops]
    np.testing.assert_array_equal(g.edge_index, want)
    q, k = (rng.standard_normal((N, H * d)).astype(np.float32) for _ in range(2))
    _, Ar = reference.attention(want[0], want[1], N, *ref_tensors([q, k, k]), H)
    np.testing.assert_allclose(ag.attention_weights(g, q, k, heads=H), Ar.numpy(), atol=1e-5)
    ids = g.edge_ids
    if mode == "off":
        np.testing.assert_array_equal(ids, np.flatnonzero(~loops))
    else:                                     # the given columns kept, the added loops -1
        kept = np.flatnonzero(~loops) if mode == "replace" else np.arange(E)
        np.testing.assert_array_equal(ids, np.concatenate([kept, -np.ones(g.E - kept.size,
                                                                             np.int64)]))


def pyg_gat(edge_index, N, x, a_src, a_dst, H, slope=0.2):
    """PyG's GATConv (add_self_loops=True) after its linear layer, in numpy
    float64, step by step as GATConv.forward does them: edge_index, _ = remove_self_loops(...);
    edge_index, _ = add_self_loops(edge_index, num_nodes=N) (the loops appended,
    in node order); alpha_j + alpha_i, leaky_relu, softmax over each target's
    edges (utils.softmax: minus the target's max, exp, over the target's sum);
    out_i = sum_j alpha_ij x_j. x [N, H*d] is lin(x); returns (out [N, H*d],
    alpha [E, H], edge_index)."""
    ei = np.asarray(edge_index)
    ei = ei[:, ei[0] != ei[1]]                                   # remove_self_loops
    loop = np.arange(N)
    ei = np.concatenate([ei, np.stack([loop, loop])], axis=1)    # add_self_loops
    src, dst = ei
    d = x.shape[1] // H
    xh = np.asarray(x, np.float64).reshape(N, H, d)
    al_src = (xh * np.asarray(a_src, np.float64)).sum(-1)        # [N, H]
    al_dst = (xh * np.asarray(a_dst, np.float64)).sum(-1)
    alpha = al_src[src] + al_dst[dst]                            # [E, H]
    alpha = np.where(alpha > 0, alpha, slope * alpha)
    top = np.full((N, H), -np.inf)
    np.maximum.at(top, dst, alpha)
    alpha = np.exp(alpha - top[dst])
    total = np.zeros((N, H))
    np.add.at(total, dst, alpha)
    alpha = alpha / total[dst]
    out = np.zeros((N, H, d))
    np.add.at(out, dst, alpha[:, :, None] * xh[src])
    return out.reshape(N, H * d), alpha, ei


def test_replace_is_pygs_gatconv(rng, tmp_path):
    """A node with two self-loops, one with one, the others with none: "replace"
    is GATConv's remove_self_loops + add_self_loops (edges, order, output and
    weights); "on" keeps both loops of node 2 and is not."""
    N, H, d = 7, 2, 3
    ei = np.array([[2, 0, 2, 4, 5, 5, 6, 1, 3, 0],
                   [2, 1, 2, 2, 5, 0, 4, 3, 1, 6]])
    x = rng.standard_normal((N, H * d)).astype(np.float32)
    a_src, a_dst = (rng.standard_normal((H, d)).astype(np.float32) for _ in range(2))
    want_out, want_alpha, want_ei = pyg_gat(ei, N, x, a_src, a_dst, H)
    gat = dict(heads=H, score="additive", a_src=a_src, a_dst=a_dst, slope=0.2)

    g = ag.Graph.from_edge_index(ei, N, self_loops="replace")
    np.testing.assert_array_equal(g.edge_index, want_ei)
    np.testing.assert_array_equal(g.edge_ids[-N:], -1)
    np.testing.assert_allclose(ag.attention(g, x, x, x, **gat), want_out, atol=1e-5)
    np.testing.assert_allclose(ag.attention_weights(g, x, x, **gat), want_alpha, atol=1e-5)

    on = ag.Graph.from_edge_index(ei, N, self_loops="on")
    assert on.E == g.E + 1                    # node 2's two loops stay two messages
    assert np.abs(ag.attention(on, x, x, x, **gat) - want_out).max() > 1e-2

    # the same through from_csr and an edge-list file (edge order: the lines')
    order = np.argsort(ei[1], kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(ei[1], minlength=N))])
    c = ag.Graph.from_csr(indptr, ei[0][order], self_loops="replace")
    np.testing.assert_allclose(ag.attention(c, x, x, x, **gat), want_out, atol=1e-5)
    assert sorted(map(tuple, c.edge_index.T)) == sorted(map(tuple, want_ei.T))
    (tmp_path / "g.edges").write_text("".join("%d %d\n" % tuple(e) for e in ei.T))
    f = ag.Graph.load(str(tmp_path / "g.edges"), self_loops="replace")
    np.testing.assert_array_equal(f.edge_index, want_ei)
    np.testing.assert_allclose(ag.attention_weights(f, x, x, **gat), want_alpha, atol=1e-5)


def test_self_loops_values():
    with pytest.raises(ag.Error, match="expected 'keep', 'on', 'off' or 'replace'"):
        ag.Graph.from_edge_index(np.array([[0], [1]]), 2, self_loops="yes")
    p = ag.Graph.pattern("causal&!window:1", 4, self_loops="replace")
    np.testing.assert_array_equal(p.edge_index, ag.Graph.pattern("causal", 4).edge_index)


def test_file_edges_in_igraph_order(rng):
    """An undirected GML file: edge u-v gives u->v then v->u, in igraph's edge order;
    the same order as the CLI's --attn export."""
    import igraph
    path = ROOT + "/graphs/sentence.gml"
    g = ag.Graph.load(path)
    ig = igraph.Graph.Read_GML(path)
    want = []
    for e in ig.es:
        u, v = sorted(e.tuple)
        want += [(u, v)] + ([(v, u)] if u != v and not ig.is_directed() else [])
    np.testing.assert_array_equal(g.edge_index.T, np.array(want))
    assert g.labels == ig.vs["label"]


def test_pattern_matches_its_edges(rng):
    g = ag.Graph.pattern("window:3", 10)
    i, j = g.dst, g.src
    assert ((j <= i) & (j > i - 3)).all() and g.E == sum(min(n + 1, 3) for n in range(10))
    N, H, d = 10, 2, 4
    q, k, v = (rng.standard_normal((N, H * d)).astype(np.float32) for _ in range(3))
    Mr, Ar = reference.attention(g.src, g.dst, N, *ref_tensors([q, k, v]), H)
    np.testing.assert_allclose(ag.attention(g, q, k, v, heads=H), Mr.numpy(), atol=2e-5)
    np.testing.assert_allclose(ag.attention_weights(g, q, k, heads=H), Ar.numpy(), atol=1e-5)


def test_edge_attribute_as_bias_matches_the_cli(tmp_path, rng):
    """An undirected GML file with a numeric edge attribute, self-loops added:
    the attribute in edge order, and attention_weights with it as edge bias equal
    to `attngraph run --edge-bias w --attn a.npy`."""
    from conftest import cli
    edges = [(0, 1, 0.5), (1, 2, -1.0), (2, 0, 2.0), (0, 1, 1.5), (3, 3, 0.25), (4, 2, -0.5)]
    text = "graph [ directed 0\n" + "".join("node [ id %d ]\n" % i for i in range(6)) + \
        "".join("edge [ source %d target %d w %g ]\n" % e for e in edges) + "]\n"
    (tmp_path / "g.gml").write_text(text)
    g = ag.Graph.load(str(tmp_path / "g.gml"), self_loops="on", edge_attrs=["w"])
    want_src, want_dst, want_w = [], [], []
    for u, v, w in edges:
        a, b = sorted((u, v))
        for s, t in [(a, b)] + ([(b, a)] if a != b else []):
            want_src.append(s), want_dst.append(t), want_w.append(w)
    loops = [i for i in range(6) if i != 3]
    want_src += loops
    want_dst += loops
    want_w += [0.0] * len(loops)
    np.testing.assert_array_equal(g.edge_index, [want_src, want_dst])
    np.testing.assert_array_equal(g.edge_attrs["w"], np.float32(want_w))
    H, d = 2, 3
    q, k, v = (rng.standard_normal((6, H * d)).astype(np.float32) for _ in range(3))
    for name, a in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / (name + ".npy"), a)
    cli("run", tmp_path / "g.gml", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy",
        "--v", tmp_path / "v.npy", "--heads", H, "--self-loops", "on", "--edge-bias", "w",
        "--attn", tmp_path / "a.npy", "--quiet")
    W = ag.attention_weights(g, q, k, heads=H, edge_bias=g.edge_attrs["w"])
    np.testing.assert_array_equal(W, np.load(tmp_path / "a.npy"))
    _, Ar = reference.attention(g.src, g.dst, 6, *ref_tensors([q, k, v]), H,
                                edge_bias=torch.tensor(want_w, dtype=torch.float64))
    np.testing.assert_allclose(W, Ar.numpy(), atol=1e-5)
    with pytest.raises(ag.Error, match="nope"):
        ag.Graph.load(str(tmp_path / "g.gml"), edge_attrs=["nope"])


def test_pattern_rows_are_the_whole_patterns():
    """rows=(lo, hi): the whole pattern's messages into destinations lo..hi-1 and
    none into the others; a range outside the nodes is refused."""
    whole = ag.Graph.pattern("random:4", 300, self_loops="on")
    part = ag.Graph.pattern("random:4", 300, self_loops="on", rows=(100, 200))
    keep = (whole.dst >= 100) & (whole.dst < 200)
    assert part.N == 300 and part.E == keep.sum()
    np.testing.assert_array_equal(part.edge_index, whole.edge_index[:, keep])
    with pytest.raises(ag.Error, match="expected 0 <= lo <= hi <= N"):
        ag.Graph.pattern("causal", 10, rows=(5, 11))
    with pytest.raises(ag.Error, match="expected \\(lo, hi\\)"):
        ag.Graph.pattern("causal", 10, rows=5)


def test_huge_pattern_stays_compact():
    """causal on 65,536 nodes: 2.1e9 edges as 65,536 runs; nothing per edge is made
    until asked for."""
    g = ag.Graph.pattern("causal", 65536)
    assert g.E == 65536 * 65537 // 2 and g._slot is None and g._ends is None
    small = ag.Graph.pattern("causal", 4)
    np.testing.assert_array_equal(small.edge_index, [[0, 0, 1, 0, 1, 2, 0, 1, 2, 3],
                                                     [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]])


@pytest.mark.parametrize("spec,kernel", [("causal", "tiled"), ("bigbird:32,1,1,1", "blocks"),
                                         ("window:30+global:3", "blocks"),
                                         ("random:20,1", "gather")])
def test_each_kernel_against_the_reference(rng, spec, kernel):
    """ag.attention_kernel says which kernel the plan runs, and each one's outputs and
    gradients match the float64 reference (bigbird and window+global on the block-sparse
    lists)."""
    g = ag.Graph.pattern(spec, 300)
    assert ag.attention_kernel(g, head_dim=8) == kernel
    assert ag.attention_kernel(g, head_dim=8, score="gatv2") == "generic"
    N, H, d = 300, 2, 8
    q, k, v = (rng.standard_normal((N, H * d)).astype(np.float32) for _ in range(3))
    qt, kt, vt = ref_tensors([q, k, v], grad=True)
    Mr, _ = reference.attention(g.src, g.dst, N, qt, kt, vt, H)
    M, lse = ag.attention(g, q, k, v, heads=H, lse=True)
    np.testing.assert_allclose(M, Mr.detach().numpy(), atol=2e-5)
    dM = rng.standard_normal((N, H * d)).astype(np.float32)
    (Mr * torch.from_numpy(dM).double()).sum().backward()
    grads = ag.attention_backward(g, q, k, v, dM, heads=H, m=M, lse=lse)
    for got, want in zip((grads.dq, grads.dk, grads.dv), (qt.grad, kt.grad, vt.grad)):
        np.testing.assert_allclose(got, want.numpy(), atol=5e-5)
