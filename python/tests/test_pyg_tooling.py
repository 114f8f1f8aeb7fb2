"""attngraph's drop-ins against PyG's own layers and under PyG's tooling,
where torch_geometric is importable (fetch PyG and put its tag on
PYTHONPATH; the tests skip otherwise): bipartite and sparse inputs against
PyG's layers, GNNExplainer's edge masks and AttentionExplainer's weights
against the same model made of PyG's layers, to_hetero, and PyG's torch.fx
tracer."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attngraph.nn as agn
from conftest import random_edge_index

pyg = pytest.importorskip("torch_geometric.nn")
from torch_geometric.explain import Explainer, GNNExplainer, AttentionExplainer  # noqa: E402
from torch_geometric.data import HeteroData  # noqa: E402

LAYERS = [
    ("GATConv", dict(heads=2)),
    ("GATConv", dict(heads=2, add_self_loops=False)),
    ("GATv2Conv", dict(heads=2)),
    ("TransformerConv", dict(heads=2, beta=True)),
]
IDS = [n + "-" + "-".join("%s=%s" % kv for kv in kw.items()) for n, kw in LAYERS]


def twins(name, kw, *args):
    """(ours, PyG's) with PyG's initial weights in both."""
    theirs = getattr(pyg, name)(*args, **kw)
    ours = getattr(agn, name)(*args, **kw)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def close(a, b, atol=2e-6):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=atol, rtol=0)


def test_the_layers_are_pygs_message_passing():
    for name in ("GATConv", "GATv2Conv", "TransformerConv"):
        assert isinstance(getattr(agn, name)(3, 2), pyg.MessagePassing)


@pytest.mark.parametrize("name,kw", LAYERS, ids=IDS)
def test_bipartite_against_pyg(rng, name, kw):
    n_src, n_dst = 11, 7
    ei = torch.tensor(np.stack([rng.integers(0, n_src, 40), rng.integers(0, n_dst, 40)]))
    ours, theirs = twins(name, kw, (5, 4), 3)
    xs, xd = torch.randn(n_src, 5), torch.randn(n_dst, 4)
    (xs_a, xd_a), (xs_b, xd_b) = ((xs.clone().requires_grad_(), xd.clone().requires_grad_())
                                  for _ in range(2))
    oa, (ea, aa) = ours((xs_a, xd_a), ei, return_attention_weights=True)
    ob, (eb, ab) = theirs((xs_b, xd_b), ei, return_attention_weights=True)
    close(oa, ob)
    np.testing.assert_array_equal(ea.numpy(), eb.numpy())
    close(aa, ab, 1e-6)
    g = torch.randn(oa.shape)
    (oa * g).sum().backward()
    (ob * g).sum().backward()
    close(xs_a.grad, xs_b.grad, 1e-5)
    close(xd_a.grad, xd_b.grad, 1e-5)
    for (n, pa), pb in zip(ours.named_parameters(), theirs.parameters()):
        if pb.grad is None:
            assert pa.grad is None, n
        else:
            close(pa.grad, pb.grad, 1e-5)


@pytest.mark.parametrize("name,kw", LAYERS, ids=IDS)
def test_float64_against_pygs_float64(rng, name, kw):
    """attngraph's float64 path against PyG's layers in float64, to 1e-12."""
    N = 14
    ei = torch.tensor(random_edge_index(rng, N, 40))
    ours, theirs = twins(name, kw, 4, 3)
    ours, theirs = ours.double(), theirs.double()
    x = torch.randn(N, 4, dtype=torch.float64)
    oa, (_, aa) = ours(x, ei, return_attention_weights=True)
    ob, (_, ab) = theirs(x, ei, return_attention_weights=True)
    close(oa, ob, 1e-12)
    close(aa, ab, 1e-12)


@pytest.mark.parametrize("name,kw", LAYERS, ids=IDS)
@pytest.mark.parametrize("layout", ["csr", "coo"])
def test_sparse_adjacency_against_pyg(rng, name, kw, layout):
    N = 15
    ei = torch.unique(torch.tensor(random_edge_index(rng, N, 50)), dim=1)
    coo = torch.sparse_coo_tensor(ei.flip(0), torch.ones(ei.size(1)), (N, N)).coalesce()
    adj = coo if layout == "coo" else coo.to_sparse_csr()
    ours, theirs = twins(name, kw, 4, 3)
    x = torch.randn(N, 4)
    oa, (adj_a, aa) = ours(x, adj, return_attention_weights=True)
    ob, (adj_b, ab) = theirs(x, adj, return_attention_weights=True)
    close(oa, ob)
    close(aa, ab, 1e-6)
    assert adj_a.layout == adj_b.layout and adj_a.shape == adj_b.shape
    if layout == "csr":
        np.testing.assert_array_equal(adj_a.crow_indices().numpy(), adj_b.crow_indices().numpy())
        np.testing.assert_array_equal(adj_a.col_indices().numpy(), adj_b.col_indices().numpy())
    else:
        np.testing.assert_array_equal(adj_a.indices().numpy(), adj_b.indices().numpy())


class GAT(torch.nn.Module):
    """Two attention layers of one kind, as a node classifier."""

    def __init__(self, nn, name, classes=3):
        super().__init__()
        self.conv1 = getattr(nn, name)(5, 4, heads=2)
        self.conv2 = getattr(nn, name)(8, classes, heads=1)

    def forward(self, x, edge_index):
        return F.log_softmax(self.conv2(F.elu(self.conv1(x, edge_index)), edge_index), -1)


def models(name):
    torch.manual_seed(5)
    theirs = GAT(pyg, name)
    ours = GAT(agn, name)
    ours.load_state_dict(theirs.state_dict())
    return ours.eval(), theirs.eval()


@pytest.mark.parametrize("name", ["GATConv", "GATv2Conv", "TransformerConv"])
def test_gnn_explainer_masks_the_messages_as_pyg(rng, name):
    """GNNExplainer trains an edge mask through the layers' messages
    (explain_message): the same mask as on the model of PyG's layers."""
    N = 20
    ei = torch.tensor(random_edge_index(rng, N, 60))
    x = torch.randn(N, 5)
    masks = []
    for model in models(name):
        explainer = Explainer(model, algorithm=GNNExplainer(epochs=20), explanation_type="model",
                              edge_mask_type="object", node_mask_type="attributes",
                              model_config=dict(mode="multiclass_classification",
                                                task_level="node", return_type="log_probs"))
        torch.manual_seed(6)
        masks.append(explainer(x, ei, index=3).edge_mask)
    assert masks[0].shape == (ei.size(1),) and (masks[0] > 0).any()
    close(masks[0], masks[1], 1e-4)


def test_attention_explainer_reads_the_weights_as_pyg(rng):
    N = 16
    ei = torch.tensor(random_edge_index(rng, N, 50))
    x = torch.randn(N, 5)
    masks = []
    for model in models("GATConv"):
        explainer = Explainer(model, algorithm=AttentionExplainer(), explanation_type="model",
                              edge_mask_type="object",
                              model_config=dict(mode="multiclass_classification",
                                                task_level="node", return_type="log_probs"))
        masks.append(explainer(x, ei).edge_mask)
    close(masks[0], masks[1], 1e-6)


class Hetero(torch.nn.Module):
    def __init__(self, nn):
        super().__init__()
        self.conv1 = nn.GATConv((-1, -1), 4, heads=2, add_self_loops=False)
        self.conv2 = nn.TransformerConv((-1, -1), 3)

    def forward(self, x, edge_index):
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)


def test_to_hetero_calls_each_edge_type_as_pyg(rng):
    data = HeteroData()
    data["paper"].x = torch.randn(12, 6)
    data["author"].x = torch.randn(7, 4)
    data["author", "writes", "paper"].edge_index = torch.tensor(
        np.stack([rng.integers(0, 7, 30), rng.integers(0, 12, 30)]))
    data["paper", "rev_writes", "author"].edge_index = \
        data["author", "writes", "paper"].edge_index.flip(0)
    data["paper", "cites", "paper"].edge_index = torch.tensor(rng.integers(0, 12, (2, 25)))
    outs = []
    torch.manual_seed(7)
    theirs = pyg.to_hetero(Hetero(pyg), data.metadata(), aggr="sum")
    ours = pyg.to_hetero(Hetero(agn), data.metadata(), aggr="sum")
    for model in (theirs, ours):        # the lazy sizes set by a first call
        model(data.x_dict, data.edge_index_dict)
    ours.load_state_dict(theirs.state_dict())
    for model in (ours, theirs):
        outs.append(model(data.x_dict, data.edge_index_dict))
    for t in ("paper", "author"):
        close(outs[0][t], outs[1][t])


def test_pygs_fx_tracer_keeps_the_layers_whole(rng):
    ei = torch.tensor(random_edge_index(rng, 10, 30))
    x = torch.randn(10, 5)
    ours, _ = models("GATConv")
    traced = pyg.fx.symbolic_trace(ours) if hasattr(pyg, "fx") else None
    if traced is None:
        from torch_geometric.nn.fx import symbolic_trace
        traced = symbolic_trace(ours)
    mods = [n.target for n in traced.graph.nodes if n.op == "call_module"]
    assert mods == ["conv1", "conv2"]
    close(traced(x, ei), ours(x, ei), 0)
