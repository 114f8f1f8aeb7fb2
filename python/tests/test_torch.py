"""attngraph.torch: graph_attention's gradients against torch.autograd on the
dense float64 reference, and GraphAttention's weights folder round trip through
`attngraph run --weights` and `attngraph train --save`."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attngraph as ag
from attngraph.torch import graph_attention, GraphAttention, save_rounds, load_rounds
from conftest import cli, random_edge_index, ROOT, PYDIR
import reference


@pytest.mark.parametrize("kind", ["scaled-dot", "additive", "gatv2", "sigmoid"])
def test_graph_attention_gradients(rng, kind):
    N, E, H, d = 20, 60, 2, 4
    ei = random_edge_index(rng, N, E)
    g = ag.Graph.from_edge_index(torch.from_numpy(ei), N)
    q, k, v = (torch.randn(N, H * d, requires_grad=True) for _ in range(3))
    bias = torch.randn(E, requires_grad=True)
    vec = {}
    if kind == "additive":
        vec = dict(a_src=torch.randn(H, d, requires_grad=True),
                   a_dst=torch.randn(H, d, requires_grad=True))
    if kind == "gatv2":
        vec = dict(a=torch.randn(H, d, requires_grad=True))
    m = graph_attention(q, k, v, g, H, kind, edge_bias=bias, **vec)
    dm = torch.randn(N, H * d)
    (m * dm).sum().backward()

    d64 = lambda t: t.detach().double().requires_grad_()
    ins = {n: d64(t) for n, t in dict(q=q, k=k, v=v, edge_bias=bias, **vec).items()}
    mr, _ = reference.attention(ei[0], ei[1], N, ins["q"], ins["k"], ins["v"], H, kind,
                                edge_bias=ins["edge_bias"],
                                **{n: ins[n] for n in vec})
    (mr * dm.double()).sum().backward()
    np.testing.assert_allclose(m.detach().numpy(), mr.detach().numpy(), atol=2e-5)
    for n, t in dict(q=q, k=k, v=v, edge_bias=bias, **vec).items():
        want = ins[n].grad.numpy()
        np.testing.assert_allclose(t.grad.numpy(), want, atol=5e-5 * max(1, abs(want).max()),
                                   err_msg=n)


def test_graph_attention_refuses_other_tensors():
    g = ag.Graph.pattern("causal", 4)
    with pytest.raises(TypeError, match="CPU float32"):
        graph_attention(*[torch.zeros(4, 2, dtype=torch.float64)] * 3, g)


def reference_round(x, p, src, dst, H, norm, residual, kind="scaled-dot", eps=1e-5):
    """One round in float64 torch from the parameters p (name -> tensor)."""
    xn = F.layer_norm(x, x.shape[1:], p["ln.weight"], p["ln.bias"], eps) if norm else x
    vec = {}
    if kind == "additive":
        vec = dict(a_src=p["attn_src"], a_dst=p["attn_dst"])
    m, _ = reference.attention(src, dst, x.shape[0], xn @ p["wq.weight"].t(),
                               xn @ p["wk.weight"].t(), xn @ p["wv.weight"].t(), H, kind, **vec)
    out = m @ p["wo.weight"].t()
    return x + out if residual else out


@pytest.mark.parametrize("norm,residual,kind", [(True, True, "scaled-dot"),
                                                (False, False, "additive")])
def test_module_against_reference(rng, norm, residual, kind):
    N, D, H = 16, 8, 2
    ei = random_edge_index(rng, N, 50)
    g = ag.Graph.from_edge_index(ei, N)
    torch.manual_seed(0)
    layer = GraphAttention(D, H, head_dim=3, norm=norm, residual=residual, score=kind)
    if norm:
        with torch.no_grad():
            layer.ln.weight.normal_(1.0, 0.3), layer.ln.bias.normal_(0.0, 0.3)
    x = torch.randn(N, D, requires_grad=True)
    y = layer(x, g)
    dy = torch.randn(N, D)
    (y * dy).sum().backward()
    p = {n: t.detach().double().requires_grad_() for n, t in layer.state_dict().items()}
    x64 = x.detach().double().requires_grad_()
    yr = reference_round(x64, p, ei[0], ei[1], H, norm, residual, kind)
    (yr * dy.double()).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), yr.detach().numpy(), atol=3e-5)
    np.testing.assert_allclose(x.grad.numpy(), x64.grad.numpy(), atol=1e-4)
    for n, t in layer.named_parameters():
        np.testing.assert_allclose(t.grad.numpy(), p[n].grad.numpy(), atol=2e-4, err_msg=n)


@pytest.mark.parametrize("norm,kind", [(True, "scaled-dot"), (False, "additive")])
def test_state_dict_through_a_weights_folder_and_the_cli(tmp_path, rng, norm, kind):
    """The module's folder runs in `attngraph run --weights`, with the module's output;
    the folder loads back into an equal state_dict."""
    D, H = 8, 2
    path = ROOT + "/graphs/karate.gml"
    g = ag.Graph.load(path)
    torch.manual_seed(1)
    layer = GraphAttention(D, H, norm=norm, score=kind)
    if norm:
        with torch.no_grad():
            layer.ln.weight.normal_(1.0, 0.3), layer.ln.bias.normal_(0.0, 0.3)
    x = rng.standard_normal((g.N, D)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    layer.save(str(tmp_path / "w"))
    args = [path, "--features", tmp_path / "x.npy", "--weights", tmp_path / "w", "--heads", H,
            "--score", kind, "--out", tmp_path / "y.npy", "--quiet"]
    cli("run", *args, *(["--norm", "layer"] if norm else []))
    with torch.no_grad():
        y = layer(torch.from_numpy(x), g).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), y, atol=2e-5)

    back = GraphAttention.load(str(tmp_path / "w"))          # heads, score, norm: model.args
    assert (back.ln is not None) == norm and back.heads == H and back.score == kind
    # model.args makes the CLI refuse the folder with other options
    r = cli("run", *args[:args.index("--heads")], "--heads", 1, "--out", tmp_path / "z.npy",
            "--quiet", check=False)
    assert r.returncode == 1 and "model.args" in r.stderr and not (tmp_path / "z.npy").exists()
    sd, sd2 = layer.state_dict(), back.state_dict()
    assert sd.keys() == sd2.keys()
    for n in sd:
        assert torch.equal(sd[n], sd2[n]), n


def test_cli_trained_model_runs_in_torch(tmp_path):
    """`attngraph train --save` writes a folder with a layer per round; torch
    modules loaded from it give the states `attngraph run` gives."""
    k = ROOT + "/graphs/karate"
    cli("train", ROOT + "/graphs/karate.gml", "--features", k + "/x.npy", "--labels",
        k + "/labels.npy", "--train-mask", k + "/train.npy", "--rounds", 2, "--epochs", 5,
        "--norm", "layer", "--save", tmp_path / "m", "--quiet")
    layers = ag.load_layers(str(tmp_path / "m"))
    cli("run", ROOT + "/graphs/karate.gml", "--features", k + "/x.npy", "--weights",
        tmp_path / "m", "--rounds", 2, "--norm", "layer", "--out", tmp_path / "y.npy", "--quiet")
    g = ag.Graph.load(ROOT + "/graphs/karate.gml")
    x = torch.from_numpy(np.load(k + "/x.npy"))
    mods = load_rounds(str(tmp_path / "m"))        # options from model.args
    assert all(m.ln is not None and m.heads == 1 for m in mods)
    with torch.no_grad():
        for r in range(2):
            x = mods[r % len(mods)](x, g)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), x.numpy(), atol=2e-5)
    # and rounds run by the library from the same folder agree
    y = ag.rounds(g, np.load(k + "/x.npy"), layers, rounds=2, norm="layer")
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), y, atol=1e-6)
    # two layers saved from torch run as a layer per round in the CLI
    two = [GraphAttention(2, 1, norm=True), GraphAttention(2, 1, norm=True)]
    save_rounds(str(tmp_path / "two"), two)
    assert (tmp_path / "two" / "model.args").read_text() == "--heads 1 --rounds 2 --norm layer\n"
    cli("run", ROOT + "/graphs/karate.gml", "--features", k + "/x.npy", "--weights",
        tmp_path / "two", "--rounds", 2, "--norm", "layer", "--out", tmp_path / "y2.npy",
        "--quiet")
    x = torch.from_numpy(np.load(k + "/x.npy"))
    with torch.no_grad():
        y2 = two[1](two[0](x, g), g)
    np.testing.assert_allclose(np.load(tmp_path / "y2.npy"), y2.numpy(), atol=2e-5)


def test_load_weights_refuses_other_options_than_model_args(tmp_path):
    """load_weights(folder) compares the module's options with model.args as the
    CLI does (the same line, written the same way) and names both."""
    torch.manual_seed(2)
    GraphAttention(8, heads=2, norm=True).save(str(tmp_path / "w"))
    assert (tmp_path / "w" / "model.args").read_text() == "--heads 2 --rounds 1 --norm layer\n"
    for other in (GraphAttention(8, heads=4), GraphAttention(8, heads=2),
                  GraphAttention(8, heads=2, norm=True, score="dot")):
        with pytest.raises(ag.Error) as e:
            other.load_weights(str(tmp_path / "w"))
        msg = str(e.value)
        assert "`--heads 2 --rounds 1 --norm layer`" in msg and "model.args" in msg
        assert "`%s`" % other.model_args(1) in msg and e.value.status == "invalid value"
    # the same options load, and so does a folder without model.args
    same = GraphAttention(8, heads=2, norm=True).load_weights(str(tmp_path / "w"))
    back = GraphAttention.load(str(tmp_path / "w"))
    for n, t in back.state_dict().items():
        assert torch.equal(same.state_dict()[n], t), n
    (tmp_path / "w" / "model.args").unlink()
    GraphAttention(8, heads=4).load_weights(str(tmp_path / "w"))


def test_load_rounds_of_a_shared_layer_runs_every_round(tmp_path):
    """A flat folder from `train --save --rounds 2` is one layer shared by 2
    rounds: load_rounds gives it twice (the same module), and running the list
    gives what `attngraph run --weights` gives."""
    k, gml = ROOT + "/graphs/karate", ROOT + "/graphs/karate.gml"
    torch.manual_seed(3)
    GraphAttention(2, heads=2).save(str(tmp_path / "w"), rounds=2)
    cli("train", gml, "--features", k + "/x.npy", "--labels", k + "/labels.npy",
        "--train-mask", k + "/train.npy", "--weights", tmp_path / "w", "--heads", 2,
        "--rounds", 2, "--epochs", 3, "--save", tmp_path / "m", "--quiet")
    assert (tmp_path / "m" / "model.args").read_text() == "--heads 2 --rounds 2\n"
    assert not (tmp_path / "m" / "round-1").exists()
    mods = load_rounds(str(tmp_path / "m"))
    assert len(mods) == 2 and mods[0] is mods[1] and mods[0].heads == 2
    cli("run", gml, "--features", k + "/x.npy", "--weights", tmp_path / "m", "--heads", 2,
        "--rounds", 2, "--out", tmp_path / "y.npy", "--quiet")
    x = torch.from_numpy(np.load(k + "/x.npy"))
    g = ag.Graph.load(gml)
    with torch.no_grad():
        for layer in mods:
            x = layer(x, g)
    np.testing.assert_allclose(x.numpy(), np.load(tmp_path / "y.npy"), rtol=0, atol=1e-6)


def test_module_names_x_and_its_expected_shape():
    g = ag.Graph.pattern("causal", 4)
    layer = GraphAttention(2, heads=2)
    for x in (torch.randn(5, 2), torch.randn(4, 3), torch.randn(4)):
        with pytest.raises(ag.Error, match=r"x has shape %s; the graph has 4 nodes and the "
                           r"layer width 2: expected \[4, 2\]" % re.escape(str(list(x.shape)))):
            layer(x, g)
    assert layer(torch.randn(4, 2), g).shape == (4, 2)


def test_nn_is_the_layers_namespace_and_torch_its_alias():
    """attngraph.nn holds the layers as PyG users expect them; attngraph.torch is the
    same objects under the name before 0.2; each module imports alone (no circle)."""
    import attngraph.nn as agnn
    import attngraph.torch as agt
    for name in agnn.__all__:
        assert getattr(agt, name) is getattr(agnn, name), name
    assert agnn.GATConv.__module__ == "attngraph.conv"
    assert agnn.graph_attention.__module__ == "attngraph.functional"
    for module in ("attngraph.conv", "attngraph.functional", "attngraph.nn", "attngraph.torch"):
        r = subprocess.run([sys.executable, "-c", "import %s" % module], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=PYDIR))
        assert r.returncode == 0, (module, r.stderr)
