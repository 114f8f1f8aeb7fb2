"""Every input PyG's GATConv, GATv2Conv and TransformerConv take, on
attngraph's drop-ins: bipartite pairs (against the same graph made
homogeneous, and against PyG), sparse adjacencies (against edge_index),
size, empty graphs and 0 nodes, int32 ids, lazy and paired in_channels,
residual, float64 (torch.autograd.gradcheck) and bfloat16, and the refusals,
each naming the user's argument."""
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch.nn.utils import stateless

import attngraph as ag
import attngraph.nn as agn
from conftest import random_edge_index, PYDIR

LAYERS = [
    ("GATConv", dict(heads=3)),
    ("GATConv", dict(heads=2, add_self_loops=False, concat=False)),
    ("GATConv", dict(heads=2, edge_dim=3)),
    ("GATConv", dict(heads=2, residual=True)),
    ("GATv2Conv", dict(heads=2)),
    ("GATv2Conv", dict(heads=2, share_weights=True, edge_dim=2)),
    ("GATv2Conv", dict(heads=2, add_self_loops=False, residual=True)),
    ("TransformerConv", dict(heads=2)),
    ("TransformerConv", dict(heads=2, beta=True, edge_dim=3, concat=False)),
]
IDS = [n + "-" + "-".join("%s=%s" % kv for kv in kw.items()) for n, kw in LAYERS]


def loops_of(name, kw):
    return name != "TransformerConv" and kw.get("add_self_loops", True)


def bipartite_edges(rng, n_src, n_dst, E):
    src = rng.integers(0, n_src, E)
    dst = rng.integers(0, n_dst - 1, E)          # the last target receives nothing
    src[0], dst[0] = 1, 1                         # a "self-loop" (node 1 on both sides)
    src[1], dst[1] = src[2], dst[2]               # a multi-edge
    return torch.tensor(np.stack([src, dst]))


def attr_of(rng, kw, E, dtype=torch.float32):
    if "edge_dim" not in kw:
        return None
    return torch.tensor(rng.standard_normal((E, kw["edge_dim"])), dtype=dtype)


# ---- bipartite: (x_src, x_dst) against the same graph made homogeneous

@pytest.mark.parametrize("name,kw", LAYERS, ids=IDS)
@pytest.mark.parametrize("n_src,n_dst", [(9, 6), (5, 8)])
def test_bipartite_is_the_homogeneous_graph_of_both_sets(rng, name, kw, n_src, n_dst):
    """A pair (x_src, x_dst) on edges src -> dst is the graph on n_src + n_dst
    nodes (the targets after the sources) with edges src -> n_src + dst and,
    where PyG adds a self-loop to node i < min(n_src, n_dst), i -> n_src + i:
    the targets' outputs, the attention weights and every gradient agree."""
    D, C, E = 5, 3, 30
    ei = bipartite_edges(rng, n_src, n_dst, E)
    attr = attr_of(rng, kw, E)
    torch.manual_seed(0)
    bip = getattr(agn, name)(D, C, **kw)
    homo = getattr(agn, name)(D, C, **dict(kw, add_self_loops=False)
                              if name != "TransformerConv" else kw)
    homo.load_state_dict(bip.state_dict())
    xs = torch.tensor(rng.standard_normal((n_src, D)), dtype=torch.float32, requires_grad=True)
    xd = torch.tensor(rng.standard_normal((n_dst, D)), dtype=torch.float32, requires_grad=True)
    out, (eo, alpha) = bip((xs, xd), ei, attr, return_attention_weights=True)
    assert out.shape[0] == n_dst

    loops = loops_of(name, kw)
    keep = ei[0] != ei[1] if loops else torch.ones(E, dtype=torch.bool)
    ring = torch.arange(min(n_src, n_dst))
    hs = torch.cat([ei[0][keep], ring]) if loops else ei[0]
    hd = torch.cat([ei[1][keep], ring]) if loops else ei[1]
    np.testing.assert_array_equal(eo.numpy(), torch.stack([hs, hd]).numpy())
    hattr = attr
    if attr is not None and loops:   # the loops' features: the mean of the target's edges'
        fill = torch.stack([attr[keep][ei[1][keep] == i].mean(0) if (ei[1][keep] == i).any()
                            else torch.zeros(attr.size(1)) for i in ring])
        hattr = torch.cat([attr[keep], fill])
    xh = torch.cat([xs, xd])
    hout, (_, halpha) = homo(xh, torch.stack([hs, hd + n_src]), hattr,
                             return_attention_weights=True)
    np.testing.assert_allclose(out.detach().numpy(), hout[n_src:].detach().numpy(),
                               atol=2e-6, rtol=0)
    np.testing.assert_allclose(alpha.numpy(), halpha.numpy(), atol=1e-6, rtol=0)
    g = torch.tensor(rng.standard_normal(out.shape), dtype=torch.float32)
    (out * g).sum().backward()
    gx = torch.autograd.grad((hout[n_src:] * g).sum(), [xh] + list(homo.parameters()),
                             allow_unused=True)
    np.testing.assert_allclose(torch.cat([xs.grad, xd.grad]).numpy(), gx[0].numpy(), atol=1e-5)
    for (n, p), q in zip(bip.named_parameters(), gx[1:]):
        if p.grad is None:
            assert q is None, n
        else:
            np.testing.assert_allclose(p.grad.numpy(), q.numpy(), atol=1e-5, err_msg=n)


def test_gat_pair_in_channels_and_a_missing_target(rng):
    """GATConv((F_src, F_dst), C): two projections; (x, None): no target term,
    the score of j -> i is LeakyReLU(att_src . x'_j) alone (float64 reference)."""
    n_src, n_dst, E = 7, 4, 20
    ei = bipartite_edges(rng, n_src, n_dst, E)
    conv = agn.GATConv((5, 3), 2, heads=2, add_self_loops=False)
    assert conv.lin_src is not conv.lin_dst and conv.lin_dst.in_features == 3
    xs, xd = torch.randn(n_src, 5), torch.randn(n_dst, 3)
    out = conv((xs, xd), ei)
    ref = conv.double()((xs.double(), xd.double()), ei)      # message by message, float64
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), atol=2e-6)
    conv.float()
    none = conv((xs, None), ei, size=(n_src, n_dst))
    p = {n: t.detach().double() for n, t in conv.named_parameters()}
    s = (xs.double() @ p["lin_src.weight"].T).view(n_src, 2, 2)
    score = torch.nn.functional.leaky_relu((s * p["att_src"]).sum(-1), 0.2)[ei[0]]
    want = torch.zeros(n_dst, 2, 2, dtype=torch.float64)
    for i in range(n_dst):
        m = ei[1] == i
        if m.any():
            a = torch.softmax(score[m], 0)
            want[i] = (a[:, :, None] * s[ei[0][m]]).sum(0)
    np.testing.assert_allclose(none.detach().numpy(), (want.view(n_dst, 4) + p["bias"]).numpy(),
                               atol=2e-6)


# ---- sparse adjacency against edge_index

def adj_t(ei, n_src, n_dst, layout):
    """PyG's ToSparseTensor: the transposed adjacency, rows the targets."""
    coo = torch.sparse_coo_tensor(ei.flip(0), torch.ones(ei.size(1)), (n_dst, n_src)).coalesce()
    if layout == "coo":
        return coo
    return coo.to_sparse_csr() if layout == "csr" else coo.to_sparse_csc()


@pytest.mark.parametrize("name,kw", [l for l in LAYERS if "edge_dim" not in l[1]],
                         ids=[i for i, l in zip(IDS, LAYERS) if "edge_dim" not in l[1]])
@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
def test_sparse_adjacency_is_its_edge_index(rng, name, kw, layout):
    N, D, C = 12, 4, 3
    ei = torch.unique(torch.tensor(random_edge_index(rng, N, 40)), dim=1)  # coalesced: no repeats
    torch.manual_seed(1)
    conv = getattr(agn, name)(D, C, **kw)
    x = torch.randn(N, D)
    adj = adj_t(ei, N, N, layout)
    out, (a_adj, alpha) = conv(x, adj, return_attention_weights=True)
    want, (wei, walpha) = conv(x, ei, return_attention_weights=True)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-6)
    dense = torch.zeros(N, N, conv.heads)
    dense[wei[1], wei[0]] = walpha                  # rows the targets, as adj_t
    if name == "TransformerConv":   # PyG's returns the adjacency given, alpha in its order
        assert a_adj is adj
        rows, cols, _ = entries(adj)
        np.testing.assert_allclose(alpha.numpy(), dense[rows, cols].numpy(), atol=1e-7)
        return
    assert a_adj.layout == adj.layout and a_adj.shape == (N, N, conv.heads)
    rows, cols, values = entries(a_adj)
    assert rows.numel() == wei.size(1)
    np.testing.assert_allclose(values.numpy(), dense[rows, cols].numpy(), atol=1e-7)
    np.testing.assert_array_equal(alpha.numpy(), values.numpy())   # in its storage order


def entries(adj):
    """(rows, cols, values) of a sparse tensor, in its storage order."""
    if adj.layout == torch.sparse_coo:
        return adj._indices()[0], adj._indices()[1], adj._values()
    if adj.layout == torch.sparse_csr:
        ptr, inner = adj.crow_indices(), adj.col_indices()
    else:
        ptr, inner = adj.ccol_indices(), adj.row_indices()
    outer = torch.repeat_interleave(torch.arange(ptr.numel() - 1), ptr.diff())
    return (outer, inner, adj.values()) if adj.layout == torch.sparse_csr else \
        (inner, outer, adj.values())


def test_sparse_bipartite_adjacency_gives_its_sizes(rng):
    n_src, n_dst = 9, 5
    ei = torch.unique(bipartite_edges(rng, n_src, n_dst, 25), dim=1)
    conv = agn.TransformerConv(4, 3, heads=2)
    xs, xd = torch.randn(n_src, 4), torch.randn(n_dst, 4)
    out = conv((xs, xd), adj_t(ei, n_src, n_dst, "csr"))
    np.testing.assert_allclose(out.detach().numpy(), conv((xs, xd), ei).detach().numpy(),
                               atol=1e-6)
    with pytest.raises(ag.Error, match="edge_index has 4 targets \\(its size\\), x has 5 rows"):
        conv((xs, xd), adj_t(ei[:, ei[1] < 4], n_src, 4, "csr"))


class FakeSparseTensor:
    """torch_sparse.SparseTensor's interface as the layers use it (coo,
    sparse_sizes, set_value, the constructor), for the machines without it."""

    def __init__(self, row, col, value=None, sparse_sizes=None):
        order = np.lexsort((col.numpy(), row.numpy()))
        self.row, self.col = row[order], col[order]
        self.value = None if value is None else value[order]
        self.sizes = tuple(sparse_sizes)
        self.storage = self

    def coo(self):
        return self.row, self.col, self.value

    def sparse_sizes(self):
        return self.sizes

    def set_value(self, value, layout=None):
        assert layout == "coo"
        return FakeSparseTensor(self.row, self.col, value, self.sizes)


FakeSparseTensor.__name__ = "SparseTensor"


@pytest.mark.parametrize("loops", [False, True])
def test_sparse_tensor_is_its_edge_index(rng, loops):
    N = 10
    ei = torch.unique(torch.tensor(random_edge_index(rng, N, 30)), dim=1)
    conv = agn.GATConv(4, 2, heads=2, add_self_loops=loops)
    x = torch.randn(N, 4)
    out, adj = conv(x, FakeSparseTensor(ei[1], ei[0], sparse_sizes=(N, N)),
                    return_attention_weights=True)
    want, (wei, walpha) = conv(x, ei, return_attention_weights=True)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-6)
    got = {(int(r), int(c)): a for r, c, a in zip(adj.row, adj.col, adj.value.numpy())}
    assert len(got) == wei.size(1)
    for (s, d), a in zip(wei.t().tolist(), walpha.numpy()):
        np.testing.assert_allclose(got[(d, s)], a, atol=1e-7)


class FakeEdgeIndex(torch.Tensor):
    """PyG 2.5's EdgeIndex as the layers read it: a [2, E] tensor that knows
    its sizes (sparse_size)."""

    def sparse_size(self):
        return self.sizes


def test_edge_index_with_sizes_gives_them(rng):
    n_src, n_dst = 7, 9
    ei = bipartite_edges(rng, n_src, n_dst, 20)
    fake = ei.as_subclass(FakeEdgeIndex)
    fake.sizes = (n_src, n_dst)
    conv = agn.GATConv(4, 2, heads=2, add_self_loops=False)
    xs = torch.randn(n_src, 4)
    out = conv((xs, None), fake)
    assert out.shape == (n_dst, 4)             # the last target has no edge, but is counted
    np.testing.assert_array_equal(out.detach().numpy(),
                                  conv((xs, None), ei, size=(n_src, n_dst)).detach().numpy())


# ---- size, empty graphs, 0 nodes, int32, return types

def test_size_and_int32_and_return_types(rng):
    N = 8
    ei = torch.tensor(random_edge_index(rng, N, 20))
    conv = agn.GATConv(3, 2, heads=2)
    x = torch.randn(N, 3)
    want = conv(x, ei)
    np.testing.assert_array_equal(conv(x, ei, size=(N, N)).detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(conv(x, ei.int()).detach().numpy(), want.detach().numpy())
    out, (eo, alpha) = conv(x, ei, return_attention_weights=False)   # PyG 2.4: any bool
    assert alpha.shape == (eo.size(1), 2)
    assert isinstance(conv(x, ei, return_attention_weights=None), torch.Tensor)
    with pytest.raises(ag.Error, match=r"size \(8, 9\) says 9 targets, x has 8"):
        conv(x, ei, size=(N, N + 1))


@pytest.mark.parametrize("name,kw", LAYERS, ids=IDS)
def test_empty_graphs_and_no_nodes(rng, name, kw):
    conv = getattr(agn, name)(4, 3, **kw)
    width = 3 * kw.get("heads", 1) if kw.get("concat", True) else 3
    for n in (0, 5):
        x = torch.randn(n, 4, requires_grad=True)
        ei = torch.zeros(2, 0, dtype=torch.int64)
        out, (eo, alpha) = conv(x, ei, attr_of(rng, kw, 0), return_attention_weights=True)
        assert out.shape == (n, width)
        assert eo.size(1) == (n if loops_of(name, kw) else 0) == alpha.size(0)
        out.sum().backward()
        assert x.grad.shape == x.shape


def test_isolated_nodes_get_no_message(rng):
    conv = agn.GATConv(4, 3, heads=2, add_self_loops=False, bias=False)
    x = torch.randn(6, 4)
    out = conv(x, torch.tensor([[0, 1], [1, 2]]))
    assert (out[[0, 3, 4, 5]] == 0).all() and (out[[1, 2]] != 0).any()


# ---- in_channels: lazy and pairs; a Graph as edge_index

def test_lazy_in_channels_are_set_by_the_first_forward(rng):
    ei = torch.tensor(random_edge_index(rng, 10, 25))
    torch.manual_seed(4)
    lazy = agn.GATv2Conv(-1, 3, heads=2)
    x = torch.randn(10, 6)
    out = lazy(x, ei)
    assert lazy.lin_l.weight.shape == (6, 6) and out.shape == (10, 6)
    sized = agn.GATv2Conv(6, 3, heads=2)
    sized.load_state_dict(lazy.state_dict())
    np.testing.assert_array_equal(sized(x, ei).detach().numpy(), out.detach().numpy())
    pair = agn.TransformerConv((-1, -1), 3)
    assert pair((torch.randn(4, 5), torch.randn(3, 2)), torch.tensor([[0, 3], [2, 1]])).shape == (3, 3)
    assert pair.lin_key.weight.shape == (3, 5) and pair.lin_query.weight.shape == (3, 2)


def test_a_graph_as_edge_index_gets_the_self_loops_asked_for(rng):
    ei = random_edge_index(rng, 12, 30)
    g = ag.Graph.from_edge_index(ei, 12)
    conv = agn.GATConv(4, 2, heads=2)
    x = torch.randn(12, 4)
    out, (eo, alpha) = conv(x, g, return_attention_weights=True)
    want, (weo, walpha) = conv(x, torch.tensor(ei), return_attention_weights=True)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-6)
    np.testing.assert_array_equal(eo.numpy(), weo.numpy())
    conv.add_self_loops = False
    np.testing.assert_allclose(conv(x, g).detach().numpy(),
                               conv(x, torch.tensor(ei)).detach().numpy(), atol=1e-6)


# ---- dtypes: float64 computed in float64, bfloat16 in float32

@pytest.mark.parametrize("name,kw", LAYERS, ids=IDS)
def test_float64_passes_gradcheck_on_inputs_and_parameters(rng, name, kw):
    N, E = 6, 14
    ei = torch.tensor(random_edge_index(rng, N, E))
    torch.manual_seed(2)
    conv = getattr(agn, name)(3, 2, **kw).double()
    x = torch.randn(N, 3, dtype=torch.float64, requires_grad=True)
    attr = attr_of(rng, kw, E, torch.float64)
    if attr is not None:
        attr.requires_grad_()
    names = [n for n, _ in conv.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in conv.parameters())

    def f(x, attr, *ps):
        out = stateless.functional_call(conv, dict(zip(names, ps)), (x, ei, attr))
        return out

    assert torch.autograd.gradcheck(f, (x, attr) + params, eps=1e-6, atol=1e-6)
    # float64 and the float32 kernel agree
    out64 = conv(x, ei, attr)
    out32 = conv.float()(x.float(), ei, None if attr is None else attr.float())
    np.testing.assert_allclose(out32.detach().numpy(), out64.detach().numpy(), atol=2e-5)


def test_bfloat16_computes_in_float32_and_returns_bfloat16(rng):
    ei = torch.tensor(random_edge_index(rng, 10, 30))
    conv = agn.TransformerConv(4, 3, heads=2)
    x = torch.randn(10, 4)
    want = conv(x, ei)
    conv16 = conv.bfloat16()
    out = conv16(x.bfloat16(), ei)
    assert out.dtype == torch.bfloat16
    np.testing.assert_allclose(out.float().detach().numpy(), want.detach().numpy(), atol=0.1)


# ---- refusals name the argument, the value and what is taken

@pytest.mark.parametrize("call,match", [
    (lambda c, x, ei: c(x.long(), ei), r"GATConv: x is torch.int64; expected float32"),
    (lambda c, x, ei: c(x, ei.float()), r"edge_index has dtype torch.float32; expected int64"),
    (lambda c, x, ei: c(x, ei.numpy()), r"edge_index is a numpy.ndarray; expected a \[2, E\]"),
    (lambda c, x, ei: c(x, ei[:1]), r"edge_index has shape \[1, 20\]; expected \[2, E\]"),
    (lambda c, x, ei: c(x, ei + 100), r"edge \d+ has source 1\d\d; expected a node id 0..7"),
    (lambda c, x, ei: c(x[:, :2], ei), r"x has shape \[8, 2\]; expected \[N, 3\]"),
    (lambda c, x, ei: c((x, x[:3]), ei), r"edge \d+ has target [3-7]; expected a node id 0..2"),
    (lambda c, x, ei: c([x], ei), r"x is a list; expected a tensor \[N, F\] or a pair"),
    (lambda c, x, ei: c(x.numpy(), ei), r"x is a numpy.ndarray; expected a tensor \[N, F\]"),
    (lambda c, x, ei: c((x.numpy(), x), ei), r"x\[0\] is a numpy.ndarray; expected a torch"),
    (lambda c, x, ei: c(x, ei, size=(8,)), r"size \(8,\); expected \(n_src, n_dst\)"),
    (lambda c, x, ei: c(x, ei, size=(8, -1)), r"size \(8, -1\); expected \(n_src, n_dst\), two"),
    (lambda c, x, ei: c(x, torch.sparse_coo_tensor(ei.flip(0), torch.ones(20), (8, 8))),
     r"edge_index is an uncoalesced sparse COO tensor; expected a coalesced one"),
])
def test_refusals_name_the_argument(rng, call, match):
    conv = agn.GATConv(3, 2)
    x = torch.randn(8, 3)
    ei = torch.tensor(random_edge_index(rng, 8, 20, isolated=0))
    with pytest.raises(ag.Error, match=match):
        call(conv, x, ei)


@pytest.mark.parametrize("make,match", [
    (lambda: agn.GATConv(3, 2, heads=2.5), r"GATConv: heads is 2.5; expected an int >= 1"),
    (lambda: agn.TransformerConv(3, "a"), r"out_channels is 'a'; expected an int >= 1"),
    (lambda: agn.GATv2Conv((3, 0), 2), r"in_channels \(3, 0\); expected an int >= 1, -1"),
])
def test_constructor_refusals(make, match):
    with pytest.raises(ag.Error, match=match):
        make()


def test_refusals_of_edge_attr_and_sparse_self_loops(rng):
    N = 6
    ei = torch.unique(torch.tensor(random_edge_index(rng, N, 15)), dim=1)
    conv = agn.GATv2Conv(3, 2, edge_dim=2)
    x = torch.randn(N, 3)
    with pytest.raises(ag.Error, match=r"edge_attr is torch.int64; expected a floating"):
        conv(x, ei, torch.ones(ei.size(1), 2, dtype=torch.int64))
    with pytest.raises(ag.Error, match="edge_attr with add_self_loops=True on a sparse"):
        conv(x, adj_t(ei, N, N, "csr"), torch.ones(ei.size(1), 2))
    with pytest.raises(ag.Error, match=r"x\[1\] is None; expected the target nodes' features"):
        agn.TransformerConv(3, 2)((x, None), ei)
    with pytest.raises(ag.Error, match=r"edge_attr is a numpy.ndarray; expected a floating"):
        conv(x, ei, np.ones((ei.size(1), 2), np.float32))
    with pytest.raises(ag.Error, match=r"fill_value has 3 values; expected 1 or edge_dim = 2"):
        agn.GATConv(3, 2, edge_dim=2, fill_value=torch.ones(3))(x, ei, torch.ones(ei.size(1), 2))
    lazy = agn.GATConv(-1, 2)
    lazy(x, ei)
    with pytest.raises(ag.Error, match=r"x has shape \[6, 4\]; expected \[N, 3\]"):
        lazy(torch.randn(N, 4), ei)


def test_pair_of_one_tensor_takes_both_projections(rng):
    """GATConv((F, F), C) given (x, x) projects the targets with lin_dst, as
    given (x, x.clone()); a single x takes lin_src alone (PyG 2.4)."""
    ei = torch.tensor(random_edge_index(rng, 9, 20))
    conv = agn.GATConv((4, 4), 3, heads=2)
    x = torch.randn(9, 4)
    np.testing.assert_array_equal(conv((x, x), ei).detach().numpy(),
                                  conv((x, x.clone()), ei).detach().numpy())
    conv.lin_dst.load_state_dict(conv.lin_src.state_dict())
    np.testing.assert_allclose(conv((x, x), ei).detach().numpy(), conv(x, ei).detach().numpy(),
                               atol=1e-6)


@pytest.mark.parametrize("name", ["GATConv", "GATv2Conv", "TransformerConv"])
def test_weights_before_dropout_but_gats_after_on_both_paths(rng, name):
    """GATConv returns its weights after attention dropout, the others before
    it (PyG's): per destination they sum to 1, or do not, on the float32
    kernel and on the float64 path alike."""
    ei = torch.tensor(random_edge_index(rng, 12, 60))
    torch.manual_seed(0)
    conv = getattr(agn, name)(4, 2, heads=2, dropout=0.5).train()
    for dtype in (torch.float32, torch.float64):
        conv = conv.to(dtype)
        _, (eo, alpha) = conv(torch.randn(12, 4, dtype=dtype), ei, return_attention_weights=True)
        sums = torch.zeros(12, 2, dtype=dtype).index_add(0, eo[1], alpha.detach())
        has = torch.bincount(eo[1], minlength=12) > 0
        ones = torch.allclose(sums[has], torch.ones_like(sums[has]))
        assert ones == (name != "GATConv"), (dtype, sums)


def test_no_grad_inference_mode_and_pyg_25_names(rng):
    ei = torch.tensor(random_edge_index(rng, 8, 20))
    conv = agn.GATConv(3, 2, heads=2)
    x = torch.randn(8, 3)
    want = conv(x, ei).detach()
    with torch.no_grad():
        np.testing.assert_array_equal(conv(x, ei).numpy(), want.numpy())
    with torch.inference_mode():
        ei2 = ei.clone()                 # an inference tensor: no version counter
        np.testing.assert_array_equal(conv(x, ei2).numpy(), want.numpy())
    sd = {("lin.weight" if k == "lin_src.weight" else k): v for k, v in conv.state_dict().items()
          if k != "lin_dst.weight"}      # PyG 2.5 on: one `lin` for an int in_channels
    other = agn.GATConv(3, 2, heads=2)
    other.load_state_dict(sd)
    np.testing.assert_array_equal(other(x, ei).detach().numpy(), want.numpy())


# ---- without PyG the layers still import and run

def test_the_layers_run_without_torch_geometric():
    code = ("import sys; sys.modules['torch_geometric'] = None\n"
            "import torch, attngraph.nn as agn\n"
            "assert type(agn.GATConv(3, 2)).__mro__[1].__mro__[1] is torch.nn.Module\n"
            "out = agn.GATConv((3, 4), 2)((torch.randn(5, 3), torch.randn(2, 4)),\n"
            "                            torch.tensor([[0, 4], [1, 0]]))\n"
            "print(tuple(out.shape))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(__import__("os").environ, PYTHONPATH=PYDIR))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(2, 2)"


@pytest.mark.parametrize("name", ["GATConv", "GATv2Conv"])
def test_shared_tensor_gradients_through_two_layers(rng, name):
    """GAT's q = k = v (and GATv2's k = v) get one gradient, added up in
    place from memory kept between calls: two layers of one shape in one
    backward, twice, against the float64 path's gradients."""
    ei = torch.tensor(random_edge_index(rng, 14, 50))
    torch.manual_seed(3)
    a, b = getattr(agn, name)(6, 3, heads=2), getattr(agn, name)(6, 3, heads=2)
    x = torch.randn(14, 6)
    for step in range(2):
        grads = []
        for dtype in (torch.float32, torch.float64):
            for layer in (a, b):
                layer.to(dtype).zero_grad()
            xd = x.detach().to(dtype).clone().requires_grad_()
            (b(a(xd, ei), ei) * torch.arange(6, dtype=dtype)).sum().backward()
            grads.append([xd.grad] + [p.grad for p in (*a.parameters(), *b.parameters())])
        for g32, g64 in zip(*grads):
            np.testing.assert_allclose(g32.numpy(), g64.numpy(), atol=2e-5 * max(
                1, g64.abs().max().item()))
        x = x + 1


def test_a_pattern_graph_runs_without_listing_its_edges():
    """A Graph of 200 million messages (causal on 20,000 nodes) goes to the
    kernel as compiled: its edges are never listed (that would be 3.2 GB)."""
    g = ag.Graph.pattern("causal", 20000)
    conv = agn.TransformerConv(8, 4, heads=2)
    x = torch.randn(20000, 8)
    out = conv(x, g)
    assert g._ends is None                      # src, dst never asked for
    want = conv(x[:50], ag.Graph.pattern("causal", 50))
    np.testing.assert_allclose(out[:50].detach().numpy(), want.detach().numpy(), atol=1e-5)
    # GATConv's self-loops: a pattern made with them ("on") is taken as it is
    looped = ag.Graph.pattern("window:3", 20000, self_loops="on")
    gat = agn.GATConv(8, 2, heads=2)
    out = gat(x, looped)
    assert looped._ends is None
    small = ag.Graph.pattern("window:3", 40)
    np.testing.assert_allclose(out[:40].detach().numpy(),
                               gat(x[:40], torch.from_numpy(small.edge_index)).detach().numpy(),
                               atol=1e-5)


def test_plain_torch_fx_says_which_tracer_keeps_the_layer_whole():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = agn.GATConv(4, 2)

        def forward(self, x, edge_index):
            return self.conv(x, edge_index).relu()

    with pytest.raises(ag.Error, match=r"GATConv: traced by torch.fx.symbolic_trace, which "
                                       r"enters the layer; trace with a tracer that keeps it"):
        torch.fx.symbolic_trace(Model())

    class Leaves(torch.fx.Tracer):
        def is_leaf_module(self, m, name):
            return isinstance(m, agn.GATConv) or super().is_leaf_module(m, name)

    model = Model()
    traced = torch.fx.GraphModule(model, Leaves().trace(model))
    x, ei = torch.randn(5, 4), torch.tensor([[0, 1, 2], [1, 2, 3]])
    np.testing.assert_array_equal(traced(x, ei).detach().numpy(), model(x, ei).detach().numpy())


def test_a_nan_is_named_by_what_the_user_gave(rng):
    x = torch.randn(5, 3)
    x[2, 1] = float("nan")
    with pytest.raises(ag.Error, match=r"TransformerConv: the targets' queries are not finite "
                                       r"\(q: row 2, column 0 is NaN.*\): x, edge_attr or the "
                                       r"layer's weights hold a NaN"):
        agn.TransformerConv(3, 2)(x, torch.tensor([[0, 1], [1, 2]]))
