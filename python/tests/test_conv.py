"""The PyTorch Geometric drop-ins (attngraph.torch.GATConv, GATv2Conv,
TransformerConv) against a float64 reference of PyG's formulas written here
(always), and against PyG 2.4's own layers when torch_geometric is importable
(outputs, attention weights, gradients, state_dict both ways), on random
multigraphs with self-loops and isolated nodes."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attngraph as ag
import attngraph.torch as agt
from conftest import random_edge_index, ROOT
import reference

LAYERS = [
    ("GATConv", dict(heads=3)),
    ("GATConv", dict(heads=2, concat=False, negative_slope=0.1)),
    ("GATConv", dict(heads=2, add_self_loops=False, bias=False)),
    ("GATConv", dict(heads=2, edge_dim=3)),
    ("GATConv", dict(heads=3, edge_dim=2, fill_value=0.5, concat=False)),
    ("GATConv", dict(heads=2, edge_dim=4, fill_value="max")),
    ("GATConv", dict(heads=1, edge_dim=1, add_self_loops=False)),
    ("GATv2Conv", dict(heads=3)),
    ("GATv2Conv", dict(heads=2, share_weights=True, concat=False)),
    ("GATv2Conv", dict(heads=1, add_self_loops=False, bias=False)),
    ("GATv2Conv", dict(heads=2, edge_dim=3)),
    ("GATv2Conv", dict(heads=2, edge_dim=2, share_weights=True, fill_value="add")),
    ("TransformerConv", dict(heads=2)),
    ("TransformerConv", dict(heads=3, beta=True)),
    ("TransformerConv", dict(heads=2, concat=False, beta=True)),
    ("TransformerConv", dict(heads=2, root_weight=False, bias=False)),
    ("TransformerConv", dict(heads=2, edge_dim=3)),
    ("TransformerConv", dict(heads=2, edge_dim=2, beta=True, concat=False)),
]
IDS = [n + "-" + "-".join("%s=%s" % kv for kv in kw.items()) for n, kw in LAYERS]


def pyg_edges(ei, N, loops):
    """PyG's remove_self_loops then add_self_loops: the loops dropped, one per node appended."""
    if not loops:
        return ei
    keep = ei[0] != ei[1]
    return np.concatenate([ei[:, keep], np.stack([np.arange(N)] * 2)], axis=1)


def reference_edge_terms(layer, p, ea, ei, N):
    """GAT's att_edge . lin_edge(e) [E', H] over pyg_edges' order, the loops'
    features by fill_value, in float64."""
    ea = torch.tensor(ea, dtype=torch.float64)
    if getattr(layer, "add_self_loops", False):
        keep = torch.tensor(ei[0] != ei[1])
        ea_k, dst = ea[keep], torch.tensor(ei[1])[keep]
        if layer.fill_value == "mean":
            loops = torch.stack([ea_k[dst == i].mean(0) if (dst == i).any()
                                 else torch.zeros(ea.shape[1], dtype=ea.dtype)
                                 for i in range(N)])
        elif layer.fill_value in ("max", "add"):
            red = (lambda a: a.max(0).values) if layer.fill_value == "max" else (lambda a: a.sum(0))
            loops = torch.stack([red(ea_k[dst == i]) if (dst == i).any()
                                 else torch.zeros(ea.shape[1], dtype=ea.dtype)
                                 for i in range(N)])
        else:
            loops = torch.full((N, ea.shape[1]), float(layer.fill_value), dtype=ea.dtype)
        ea = torch.cat([ea_k, loops])
    e = F.linear(ea, p["lin_edge.weight"])
    if type(layer).__name__ != "GATConv":
        return e                                     # the messages' key (and value) terms
    return (e.view(-1, layer.heads, layer.out_channels) * p["att_edge"]).sum(-1)


def reference_layer(layer, x, ei, ea=None):
    """(out, alpha [E, H], params): the layer's formula in float64 from copies
    of its parameters (which carry the reference's gradients)."""
    p = {n: t.detach().double().requires_grad_() for n, t in layer.named_parameters()}
    lin = lambda name, a: F.linear(a, p[name + ".weight"], p.get(name + ".bias"))
    N, H, C = x.shape[0], layer.heads, layer.out_channels
    x = torch.tensor(x, dtype=torch.float64)
    kind = type(layer).__name__
    e = pyg_edges(ei, N, getattr(layer, "add_self_loops", False))
    if kind == "GATConv":
        xs = lin("lin_src", x)
        pre = reference_edge_terms(layer, p, ea, ei, N) if ea is not None else None
        m, a = reference.attention(e[0], e[1], N, xs, xs, xs, H, "additive",
                                   slope=layer.negative_slope, a_src=p["att_src"].view(H, C),
                                   a_dst=p["att_dst"].view(H, C), edge_pre=pre)
    elif kind == "GATv2Conv":
        xl = lin("lin_l", x)
        xr = xl if layer.share_weights else lin("lin_r", x)
        ek = reference_edge_terms(layer, p, ea, ei, N) if ea is not None else None
        m, a = reference.attention(e[0], e[1], N, xr, xl, xl, H, "gatv2",
                                   slope=layer.negative_slope, a=p["att"].view(H, C),
                                   edge_key=ek)
    else:
        ek = reference_edge_terms(layer, p, ea, ei, N) if ea is not None else None
        m, a = reference.attention(e[0], e[1], N, lin("lin_query", x), lin("lin_key", x),
                                   lin("lin_value", x), H, "scaled-dot", edge_key=ek,
                                   edge_value=ek)
    out = m if layer.concat else m.view(N, H, C).mean(1)
    if kind == "TransformerConv":
        if layer.root_weight:
            skip = lin("lin_skip", x)
            if layer.lin_beta is not None:
                b = torch.sigmoid(F.linear(torch.cat([out, skip, out - skip], -1),
                                           p["lin_beta.weight"]))
                out = b * skip + (1 - b) * out
            else:
                out = out + skip
    elif "bias" in p:
        out = out + p["bias"]
    return out, a, p


@pytest.mark.parametrize("name,kw", LAYERS, ids=IDS)
def test_against_the_float64_reference(rng, name, kw):
    N, D, C, E = 25, 6, 4, 80
    ei = random_edge_index(rng, N, E)
    torch.manual_seed(1)
    layer = getattr(agt, name)(D, C, **kw)
    x = rng.standard_normal((N, D)).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    ea = rng.standard_normal((E, kw["edge_dim"])).astype(np.float32) if "edge_dim" in kw else None
    out, (eo, alpha) = layer(xt, torch.tensor(ei), None if ea is None else torch.tensor(ea),
                             return_attention_weights=True)
    want, walpha, p = reference_layer(layer, x, ei, ea)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=3e-5, rtol=0)
    np.testing.assert_array_equal(eo.numpy(), pyg_edges(ei, N, kw.get("add_self_loops", True)
                                                        and name != "TransformerConv"))
    np.testing.assert_allclose(alpha.numpy(), walpha.detach().numpy(), atol=1e-5, rtol=0)
    g = torch.tensor(rng.standard_normal(out.shape), dtype=torch.float64)
    (out.double() * g).sum().backward()
    (want * g).sum().backward()
    for n, t in layer.named_parameters():
        if t.grad is None:   # unused (lin_skip without root_weight), as in the reference
            assert p[n].grad is None, n
            continue
        w = p[n].grad.numpy()
        np.testing.assert_allclose(t.grad.numpy(), w, atol=5e-5 * max(1, np.abs(w).max()),
                                   rtol=0, err_msg=n)


def test_dropout_only_while_training_and_reproducible(rng):
    N, D = 40, 5
    ei = torch.tensor(random_edge_index(rng, N, 150))
    x = torch.tensor(rng.standard_normal((N, D)), dtype=torch.float32)
    torch.manual_seed(0)
    layer = agt.GATConv(D, 4, heads=2, dropout=0.5)
    layer.eval()
    a = layer(x, ei)
    np.testing.assert_array_equal(a.detach().numpy(), layer(x, ei).detach().numpy())
    layer.train()
    torch.manual_seed(7)
    b, (_, alpha) = layer(x, ei, return_attention_weights=True)
    torch.manual_seed(7)
    b2 = layer(x, ei)
    np.testing.assert_array_equal(b.detach().numpy(), b2.detach().numpy())
    assert not torch.equal(a, b)
    # GATConv returns the weights after dropout: zeros, or the kept ones scaled by 2
    assert 0.3 < (alpha == 0).float().mean() < 0.7
    c = layer(x, ei)   # the generator moved on: another mask
    assert not torch.equal(b, c)


def test_the_graph_is_built_once_per_edge_index(rng, monkeypatch):
    """Every layer of a forward, and its backward, share one build of an
    edge_index; a changed one (in place, or behind torch's back through numpy)
    is built again; an entry goes with its tensor."""
    from attngraph import adjacency as A
    builds = []
    make = ag.Graph._from_pairs
    monkeypatch.setattr(ag.Graph, "_from_pairs", classmethod(
        lambda cls, *a: builds.append(a[-2]) or make(*a)))
    arr = random_edge_index(rng, 10, 30)
    ei = torch.from_numpy(arr)
    x = torch.ones(10, 3, requires_grad=True)
    a, b, c = agt.GATConv(3, 2), agt.GATConv(4, 2), agt.GATConv(2, 2, add_self_loops=False)
    c(b(torch.cat([a(x, ei), a(x, ei)], 1), ei), ei).sum().backward()
    assert builds == ["replace", "keep"]               # one for each self-loops mode
    a(x, ei)
    assert len(builds) == 2
    ei[0, 0] = 9 if ei[0, 0] != 9 else 8               # in place: built again
    a(x, ei)
    arr[1, 0] = 9 if arr[1, 0] != 9 else 8             # through numpy: built again
    want = a(x, torch.tensor(arr))                     # (a new tensor: built)
    np.testing.assert_array_equal(a(x, ei).detach().numpy(), want.detach().numpy())
    assert len(builds) == 5
    held = len(A._CACHE)
    del ei
    assert len(A._CACHE) == held - 1                   # gone with its tensor


@pytest.mark.parametrize("make,match", [
    (lambda: agt.TransformerConv(4, 2, edge_dim=0), "edge_dim"),
    (lambda: agt.GATConv(4, 2, edge_dim=3, fill_value="median"), "fill_value"),
    (lambda: agt.GATConv((4, 5, 6), 2), "pair"),
    (lambda: agt.GATConv(0, 2), "in_channels"),
    (lambda: agt.TransformerConv(4, 2, dropout=1.0), "dropout"),
    (lambda: agt.GATv2Conv(4, 2, flow="target_to_source"), "flow"),
])
def test_refuses_what_it_cannot_do(make, match):
    with pytest.raises(ag.Error, match=match):
        make()


def test_refuses_forward_arguments_it_cannot_take():
    layer = agt.GATConv(4, 2)
    x = torch.ones(5, 4)
    ei = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ag.Error, match="edge_attr given to a layer made without edge_dim"):
        agt.GATv2Conv(4, 2)(x, ei, edge_attr=torch.ones(2, 3))
    # PyG's GATConv ignores edge_attr without edge_dim
    np.testing.assert_array_equal(layer(x, ei, edge_attr=torch.ones(2, 3)).detach().numpy(),
                                  layer(x, ei).detach().numpy())
    with pytest.raises(ag.Error, match="forward needs edge_attr"):
        agt.GATConv(4, 2, edge_dim=3)(x, ei)
    with pytest.raises(ag.Error, match=r"expected \[2, 3\]"):
        agt.GATConv(4, 2, edge_dim=3)(x, ei, torch.ones(5, 3))
    with pytest.raises(ag.Error, match=r"expected \[N, 4\]"):
        layer(torch.ones(5, 3), ei)
    with pytest.raises(ag.Error, match=r"x is a str; expected a tensor \[N, F\] or a pair"):
        layer("x", ei)


# ---- PyG itself, when it is importable

@pytest.mark.parametrize("name,kw", LAYERS, ids=IDS)
def test_against_pyg(rng, name, kw):
    pyg = pytest.importorskip("torch_geometric.nn")
    N, D, C, E = 30, 7, 5, 100
    ei = torch.tensor(random_edge_index(rng, N, E))
    torch.manual_seed(3)
    theirs = getattr(pyg, name)(D, C, **kw)
    ours = getattr(agt, name)(D, C, **kw)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())        # PyG's weights load unchanged
    x = torch.tensor(rng.standard_normal((N, D)), dtype=torch.float32)
    attr = (torch.tensor(rng.standard_normal((E, kw["edge_dim"])), dtype=torch.float32)
            if "edge_dim" in kw else None)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    oa, (ea, aa) = ours(xa, ei, attr, return_attention_weights=True)
    ob, (eb, ab) = theirs(xb, ei, attr, return_attention_weights=True)
    np.testing.assert_allclose(oa.detach().numpy(), ob.detach().numpy(), atol=1e-5, rtol=0)
    np.testing.assert_array_equal(ea.numpy(), eb.numpy())
    np.testing.assert_allclose(aa.numpy(), ab.detach().numpy(), atol=1e-6, rtol=0)
    g = torch.tensor(rng.standard_normal(oa.shape), dtype=torch.float32)
    (oa * g).sum().backward()
    (ob * g).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy(), atol=2e-5, rtol=0)
    pa, pb = dict(ours.named_parameters()), dict(theirs.named_parameters())
    for n in pb:
        if pb[n].grad is None:   # unused (lin_skip without root_weight)
            assert pa[n].grad is None, n
            continue
        np.testing.assert_allclose(pa[n].grad.numpy(), pb[n].grad.numpy(), atol=5e-5,
                                   rtol=1e-5, err_msg=n)
    theirs.load_state_dict(ours.state_dict())         # and ours load into PyG's


# ---- training a GAT with the drop-ins

def train_gat(seed, epochs=20):
    """A two-layer GAT (GATConv, ELU, GATConv; dropout 0.5 on inputs and on the
    attention) on the planted partition; returns the losses and the parameters."""
    g = ag.Graph.load(ROOT + "/graphs/planted.gml")
    ei = torch.from_numpy(g.edge_index)
    x = torch.from_numpy(np.load(ROOT + "/graphs/planted/x.npy"))
    y = torch.from_numpy(np.load(ROOT + "/graphs/planted/labels.npy"))
    train = torch.from_numpy(np.load(ROOT + "/graphs/planted/train.npy").astype(bool))
    torch.manual_seed(seed)
    conv1 = agt.GATConv(x.size(1), 4, heads=4, dropout=0.5)
    conv2 = agt.GATConv(16, 3, heads=1, concat=False, dropout=0.5)
    params = [*conv1.parameters(), *conv2.parameters()]
    opt = torch.optim.Adam(params, lr=0.01)
    losses = []
    for _ in range(epochs):
        opt.zero_grad()
        h = F.elu(conv1(agt.dropout(x, 0.5), ei))
        out = conv2(agt.dropout(h, 0.5), ei)
        loss = F.cross_entropy(out[train], y[train])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().clone() for p in params]


def test_gat_training_learns_and_seeds_reproduce_bitwise():
    losses, params = train_gat(1)
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5]), losses
    again, params2 = train_gat(1)
    assert again == losses
    assert all(torch.equal(a, b) for a, b in zip(params, params2))
    other, params3 = train_gat(2)
    assert other != losses
