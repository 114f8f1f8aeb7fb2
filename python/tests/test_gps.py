"""attngraph.nn.GPSConv against torch's own MultiheadAttention on a dense
mask (the pattern's edges allowed, every other pair masked) and, where
torch_geometric imports, against PyG's GPSConv with the same state_dict."""
import numpy as np
import pytest
import torch

import attngraph as ag
from attngraph.nn import GPSConv, GATConv

try:
    import torch_geometric.nn as pyg
except ImportError:
    pyg = None

N, C, H = 30, 16, 4


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, C, generator=g)
    edge_index = torch.randint(0, N, (2, 90), generator=g)
    batch = torch.tensor([0] * 10 + [1] * 12 + [2] * 8)
    return x, edge_index, batch


def dense_reference(layer, x, allowed, local=None):
    """GPSConv's sum, its global attention as torch's MultiheadAttention with
    the pairs outside `allowed` [N, N] (destination, source) masked."""
    # a node with no source attends to nothing: its message is 0, out_proj's bias
    # (torch's all-masked row is NaN: it gets a stand-in source, then is replaced)
    some = allowed.any(1, keepdim=True)
    mask = allowed | (~some & torch.eye(N, dtype=torch.bool))
    h, _ = layer.attn(x[None], x[None], x[None], attn_mask=~mask, need_weights=False)
    h = torch.where(some, h[0], layer.attn.out_proj.bias)
    hs = [h + x] if local is None else [local + x, h + x]
    out = sum(hs)
    return out + layer.mlp(out)


def allowed_of(graph):
    a = torch.zeros(N, N, dtype=torch.bool)
    a[torch.as_tensor(graph.dst), torch.as_tensor(graph.src)] = True
    return a


@pytest.mark.parametrize("pattern", ["complete", "expander:2", "graph+self"])
def test_global_attention_is_multihead_attention_on_the_patterns_pairs(pattern):
    x, edge_index, batch = inputs()
    layer = GPSConv(C, None, heads=H, norm=None, pattern=pattern).eval()
    xo = x.clone().requires_grad_()
    out = layer(xo, edge_index, batch)
    counts = ",".join(str(int(c)) for c in torch.bincount(batch))
    spec = "blocks:%s&(%s)" % (counts, pattern)
    g = ag.Graph.pattern(spec, n=N, graph=ag.Graph.from_edge_index(edge_index.numpy(), N))
    xr = x.clone().requires_grad_()
    want = dense_reference(layer, xr, allowed_of(g))
    assert (out - want).abs().max() < 2e-5
    out.square().sum().backward()
    want.square().sum().backward()
    assert (xo.grad - xr.grad).abs().max() < 2e-4
    for p in layer.parameters():   # every weight learns from the kernel's backward
        assert p.grad is not None and p.grad.abs().sum() > 0


def test_a_local_layer_adds_to_the_global_one():
    x, edge_index, batch = inputs(1)
    conv = GATConv(C, C // 2, heads=2)
    layer = GPSConv(C, conv, heads=H, norm=None).eval()
    out = layer(x, edge_index, batch)
    blocks = ag.Graph.pattern("blocks:10,12,8", n=N)
    want = dense_reference(layer, x, allowed_of(blocks), local=conv(x, edge_index))
    assert (out - want).abs().max() < 2e-5


@pytest.mark.skipif(pyg is None, reason="torch_geometric is not importable")
@pytest.mark.parametrize("norm", ["batch_norm", "layer_norm", None])
def test_pygs_gpsconv_with_the_same_weights(norm):
    x, edge_index, batch = inputs(2)
    torch.manual_seed(1)
    ref = pyg.GPSConv(C, pyg.GINConv(torch.nn.Linear(C, C)), heads=H, norm=norm, dropout=0.1)
    ours = GPSConv(C, pyg.GINConv(torch.nn.Linear(C, C)), heads=H, norm=norm, dropout=0.1)
    assert set(ref.state_dict()) == set(ours.state_dict())
    ours.load_state_dict(ref.state_dict())
    for mode in ("eval", "train"):
        getattr(ref, mode)(), getattr(ours, mode)()
        if mode == "train":   # dropout's draws differ: compare without it
            ref.dropout = ours.dropout = 0.0
            for m in (ref.mlp[2], ref.mlp[4], ours.mlp[2], ours.mlp[4]):
                m.p = 0.0
        xr, xo = x.clone().requires_grad_(), x.clone().requires_grad_()
        a, b = ref(xr, edge_index, batch), ours(xo, edge_index, batch)
        assert (a - b).abs().max() < 1e-5, mode
        a.square().sum().backward()
        b.square().sum().backward()
        assert (xr.grad - xo.grad).abs().max() < 1e-4, mode


def test_refusals_name_the_argument():
    x, edge_index, batch = inputs()
    with pytest.raises(ag.Error, match="attn_type='performer'"):
        GPSConv(C, None, attn_type="performer")
    with pytest.raises(ag.Error, match="appends virtual nodes"):
        GPSConv(C, None, pattern="complete+virtual:1")
    with pytest.raises(ag.Error, match="unknown pattern 'compleat'"):
        GPSConv(C, None, pattern="compleat")
    with pytest.raises(ag.Error, match="attn_kwargs \\['kdim'\\]"):
        GPSConv(C, None, attn_kwargs={"kdim": 3})
    layer = GPSConv(C, None, heads=H, norm=None)
    with pytest.raises(ag.Error, match="batch is not sorted"):
        layer(x, edge_index, batch.flip(0))
    with pytest.raises(ag.Error, match=r"x is \(30, 3\); expected a tensor \[N, 16\]"):
        layer(x[:, :3], edge_index, batch)


def test_model_file_gps_layers_run_from_python(tmp_path):
    """A model file's GraphGPS layers (global=SPEC global_heads=G), trained by
    the command line: attngraph.Model predicts what train predicted on every
    node; load_model, whose layers rounds() would run on one graph, refuses
    them by name."""
    import subprocess
    from conftest import CLI, ROOT
    model = tmp_path / "gps.txt"
    model.write_text("norm layer\n"
                     "layer heads=4 dim=4 out=16 bias=yes ffn=2 global=expander:2 "
                     "global_heads=2\n"
                     "layer heads=2 dim=8 bias=yes global=virtual:1\n")
    planted = ROOT + "/graphs/planted"
    r = subprocess.run([CLI, "train", planted + ".gml", "--model", str(model), "--features",
                        planted + "/x.npy", "--labels", planted + "/labels.npy",
                        "--train-mask", planted + "/train.npy", "--epochs", "5", "--predict",
                        str(tmp_path / "p.npy"), "--save", str(tmp_path / "m"), "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = ag.Model.load(str(tmp_path / "m"))
    pred = m.predict(ag.Graph.load(planted + ".gml"), np.load(planted + "/x.npy"))
    assert (pred == np.load(str(tmp_path / "p.npy"))).all()
    with pytest.raises(ag.Error) as e:
        ag.load_model(str(tmp_path / "m"))
    assert "global=expander:2" in str(e.value) and "Model.load" in str(e.value)
