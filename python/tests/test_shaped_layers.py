"""Layers of their own shapes from Python (Weights with one projection, no wo,
heads concatenated or averaged, a bias, an activation, no residual): rounds()
and rounds_forward()/Tape.backward() against a float64 torch reference written
from the formulas here, and their refusals."""
import os
import re
import shutil

import numpy as np
import pytest
import torch

import attngraph as ag
from attngraph.train import rounds_forward, grads_like
from conftest import random_edge_index

ACTS = {"none": lambda z: z, "relu": torch.relu, "elu": torch.nn.functional.elu,
        "gelu": torch.nn.functional.gelu}


def reference(xt, ei, ts, score):
    """The stack in float64 torch from the edge list, each message j -> i once
    per edge: what autograd differentiates."""
    src, dst = (torch.from_numpy(ei[k]) for k in (0, 1))
    X = xt
    for L in ts:
        H = L["heads"]
        q = X @ L["wq"].T
        k = X @ (L["wk"] if "wk" in L else L["wq"]).T
        v = X @ (L["wv"] if "wv" in L else L["wq"]).T
        N, HD = q.shape
        d = HD // H
        q, k, v = (t.reshape(N, H, d) for t in (q, k, v))
        if score == "additive":
            s = torch.nn.functional.leaky_relu((q[dst] * L["attn_dst"]).sum(-1) +
                                               (k[src] * L["attn_src"]).sum(-1), 0.2)
        else:
            s = (q[dst] * k[src]).sum(-1) / d ** 0.5
        m = torch.full((N, H), -1e300, dtype=torch.float64).index_reduce(
            0, dst, s.detach(), "amax", include_self=True)
        w = torch.exp(s - m[dst])
        den = torch.zeros(N, H, dtype=torch.float64).index_add(0, dst, w)
        a = w / den[dst]
        M = torch.zeros(N, H, d, dtype=torch.float64).index_add(0, dst, a[..., None] * v[src])
        if "wo" in L:
            Z = M.reshape(N, HD) @ L["wo"].T
        elif L.get("mean_heads"):
            Z = M.mean(1)
        else:
            Z = M.reshape(N, HD)
        if "bias" in L:
            Z = Z + L["bias"]
        if L.get("residual", False):
            Z = Z + X
        X = ACTS[L.get("act", "none")](Z)
        if "w1" in L:   # the feed-forward sublayer (no LayerNorm here)
            X = X + ACTS[L["ff_act"]](X @ L["w1"].T + L["b1"]) @ L["w2"].T + L["b2"]
    return X


def make_layers(rng, score):
    """5 -> 2 heads x 3 concatenated (one projection, bias, ELU) -> wo to 4 (GELU)
    -> residual 4 (ReLU) with a feed-forward sublayer 4 -> 8 -> 4 (GELU) -> 2 heads
    x 2 averaged."""
    f = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.6   # noqa: E731
    specs = [dict(heads=2, wq=f(6, 5), bias=f(6), act="elu"),
             dict(heads=1, wq=f(3, 6), wk=f(3, 6), wv=f(3, 6), wo=f(4, 3), bias=f(4),
                  act="gelu"),
             dict(heads=2, wq=f(4, 4), wk=f(4, 4), wv=f(4, 4), wo=f(4, 4), act="relu",
                  residual=True, w1=f(8, 4), b1=f(8), w2=f(4, 8), b2=f(4), ff_act="gelu"),
             dict(heads=2, wq=f(4, 4), mean_heads=True, bias=f(2))]
    for s in specs:
        hd = s["wq"].shape[0]
        if score == "additive":
            s["attn_src"], s["attn_dst"] = f(s["heads"], hd // s["heads"]), \
                f(s["heads"], hd // s["heads"])
    weights = [ag.Weights(s["wq"], s.get("wk"), s.get("wv"), s.get("wo"), s["heads"],
                          attn_src=s.get("attn_src"), attn_dst=s.get("attn_dst"),
                          bias=s.get("bias"), act=s.get("act", "none"),
                          mean_heads=s.get("mean_heads", False),
                          residual=s.get("residual", False), w1=s.get("w1"), b1=s.get("b1"),
                          w2=s.get("w2"), b2=s.get("b2"), ff_act=s.get("ff_act", "gelu"))
               for s in specs]
    return specs, weights


def torch_specs(specs):
    out = []
    for s in specs:
        t = {}
        for k, v in s.items():
            if isinstance(v, np.ndarray):
                t[k] = torch.from_numpy(v).double().requires_grad_()
            else:
                t[k] = v
        out.append(t)
    return out


def matches_autograd(rng, g, x, weights, want, xt, ts, **kw):
    """rounds() against the float64 reference `want` (of xt and the specs ts),
    rounds_forward() the same bits, and Tape.backward's gradients of x and of
    every array against autograd's; returns rounds()' output."""
    got = ag.rounds(g, x, weights, **kw)
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-5)
    y, tape = rounds_forward(g, x, weights, **kw)
    np.testing.assert_array_equal(y, got)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx, grads = tape.backward(dy)
    (want * torch.from_numpy(dy).double()).sum().backward()
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    for k, (t, gr) in enumerate(zip(ts, grads)):
        for name, p in t.items():
            if isinstance(p, torch.Tensor):
                np.testing.assert_allclose(getattr(gr, name), p.grad.numpy(), rtol=1e-4,
                                           atol=1e-5, err_msg="layer %d %s" % (k + 1, name))
    return got


@pytest.mark.parametrize("score", ["additive", "scaled-dot"])
def test_against_the_float64_reference(rng, score):
    N = 12
    ei = random_edge_index(rng, N, 40)
    g = ag.Graph.from_edge_index(ei, N)
    x = rng.standard_normal((N, 5)).astype(np.float32)
    specs, weights = make_layers(rng, score)
    ts = torch_specs(specs)
    xt = torch.from_numpy(x).double().requires_grad_()
    want = reference(xt, ei, ts, score)
    got = matches_autograd(rng, g, x, weights, want, xt, ts, rounds=4, score=score)
    assert got.shape == (N, 2)


def test_weights_round_trip_and_refusals(rng, tmp_path):
    f = lambda *s: rng.standard_normal(s).astype(np.float32)   # noqa: E731
    w = ag.Weights(f(6, 5), None, None, None, 2, bias=f(6), act="elu")
    assert w.width_out == 6 and w.d == 3
    g = grads_like([w])[0]     # the library's gradients: its shapes and fields
    assert g.wk is None and g.wo is None and g.bias.shape == (6,)
    with pytest.raises(ag.Error, match="wk and wv go together"):
        ag.Weights(f(6, 5), f(6, 5), None, None, 2)
    with pytest.raises(ag.Error, match=r"bias has shape \[4\]; expected \[6\]"):
        ag.Weights(f(6, 5), None, None, None, 2, bias=f(4))
    with pytest.raises(ag.Error, match="act is 'tanh'"):
        ag.Weights(f(6, 5), None, None, None, 2, act="tanh")
    ei = random_edge_index(rng, 8, 20)
    gr = ag.Graph.from_edge_index(ei, 8)
    wide = ag.Weights(f(6, 5), None, None, None, 2, residual=True)   # 5 -> 6 with a residual
    with pytest.raises(ag.Error, match="cannot add a residual"):
        ag.rounds(gr, f(8, 5), [wide], rounds=1)
    with pytest.raises(ag.Error, match="3 rounds with 2 layers"):
        ag.rounds(gr, f(8, 5), [wide, wide], rounds=3)
    with pytest.raises(ag.Error, match="layer 1 reads width 5; the layer before it writes 6"):
        ag.rounds(gr, f(8, 5), ag.Weights(f(6, 5), None, None, None, 2, residual=False),
                  rounds=2)


def test_a_model_trained_by_the_command_line_runs_from_python(tmp_path):
    """attngraph train --model FILE --save DIR, then load_model(DIR) and rounds():
    the classes the command line predicted."""
    from conftest import ROOT, cli
    model = tmp_path / "gat.txt"
    model.write_text("score additive\nself-loops replace\nattn-dropout 0.2\nreadout none\n"
                     "layer heads=2 dim=4 out=concat projection=one bias=yes act=elu ffn=2\n"
                     "layer heads=1 dim=3 out=mean projection=one bias=yes\n")
    planted = os.path.join(ROOT, "graphs", "planted")
    cli("train", os.path.join(ROOT, "graphs", "planted.gml"), "--features",
        os.path.join(planted, "x.npy"), "--labels", os.path.join(planted, "labels.npy"),
        "--train-mask", os.path.join(planted, "train.npy"), "--model", model, "--epochs", 20,
        "--save", tmp_path / "saved", "--predict", tmp_path / "pred.npy", "--quiet")
    layers, opts = ag.load_model(str(tmp_path / "saved"))
    assert [w.width_out for w in layers] == [8, 3] and layers[0].w1.shape == (16, 8)
    assert opts["score"] == "additive" and opts["self_loops"] == "replace"
    assert opts["readout"] is None and opts["attn_dropout"] == pytest.approx(0.2)
    g = ag.Graph.load(os.path.join(ROOT, "graphs", "planted.gml"), self_loops="replace")
    y = ag.rounds(g, np.load(os.path.join(planted, "x.npy")), layers, rounds=2,
                  score=opts["score"])
    np.testing.assert_array_equal(y.argmax(1), np.load(tmp_path / "pred.npy"))
    with pytest.raises(FileNotFoundError):
        ag.load_model(str(tmp_path))


def conv_reference(xt, ei, ts, edges):
    """TransformerConv's parts and post-norm blocks in float64 torch from the
    formulas (ag.Weights' docstring): projections with biases, the edge
    features' projection on each message's key and value, a skip summed or
    gated, LayerNorm before (pre) or after (post) the sums."""
    src, dst = (torch.from_numpy(ei[k]) for k in (0, 1))
    ln = lambda z, w, b: torch.nn.functional.layer_norm(z, (z.shape[1],), w, b, 1e-5)  # noqa
    X = xt
    for L in ts:
        H, post = L["heads"], L.get("post_norm", False)
        Xn = X if post else ln(X, L["ln_weight"], L["ln_bias"])
        q, k, v = (Xn @ L["w" + c].T + L["b" + c] for c in "qkv")
        N, HD = q.shape
        d = HD // H
        P = (edges @ L["wedge"].T).reshape(-1, H, d)
        qd, ks = q.reshape(N, H, d)[dst], k.reshape(N, H, d)[src] + P
        vs = v.reshape(N, H, d)[src] + P
        s = (qd * ks).sum(-1) / d ** 0.5
        m = torch.full((N, H), -1e300, dtype=torch.float64).index_reduce(
            0, dst, s.detach(), "amax", include_self=True)
        w = torch.exp(s - m[dst])
        den = torch.zeros(N, H, dtype=torch.float64).index_add(0, dst, w)
        M = torch.zeros(N, H, d, dtype=torch.float64).index_add(0, dst, (w / den[dst])[..., None]
                                                                * vs).reshape(N, HD)
        Z = M @ L["wo"].T if "wo" in L else M
        if "wskip" in L:
            R = Xn @ L["wskip"].T + L["bskip"]
            if "wbeta" in L:
                g = torch.sigmoid(torch.cat([Z, R, Z - R], 1) @ L["wbeta"])[:, None]
                Z = g * R + (1 - g) * Z
            else:
                Z = Z + R
        if "bias" in L:
            Z = Z + L["bias"]
        if L.get("residual", False):
            Z = Z + X
        if post:
            Z = ln(Z, L["ln_weight"], L["ln_bias"])
        X = ACTS[L.get("act", "none")](Z)
        if "w1" in L:
            Y = X if post else ln(X, L["ln2_weight"], L["ln2_bias"])
            X = X + ACTS[L["ff_act"]](Y @ L["w1"].T + L["b1"]) @ L["w2"].T + L["b2"]
            if post:
                X = ln(X, L["ln2_weight"], L["ln2_bias"])
    return X


@pytest.mark.parametrize("gate", [True, False])
def test_transformer_conv_parts_against_the_float64_reference(rng, gate):
    """A TransformerConv layer (projection biases, edge features, skip and its
    gate; pre-norm) then a post-norm block with edge features and a sublayer:
    rounds() and every gradient of Tape.backward against autograd."""
    N, F = 12, 4
    ei = random_edge_index(rng, N, 40)
    g = ag.Graph.from_edge_index(ei, N)
    E = ei.shape[1]
    x = rng.standard_normal((N, 5)).astype(np.float32)
    e = rng.standard_normal((E, F)).astype(np.float32)
    f = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.5   # noqa: E731
    one = lambda n: (1 + f(n)).astype(np.float32)   # noqa: E731
    specs = [dict(heads=2, wq=f(6, 5), wk=f(6, 5), wv=f(6, 5), bq=f(6), bk=f(6), bv=f(6),
                  wedge=f(6, F), wskip=f(6, 5), bskip=f(6), ln_weight=one(5), ln_bias=f(5),
                  act="elu"),
             dict(heads=2, wq=f(4, 6), wk=f(4, 6), wv=f(4, 6), bq=f(4), bk=f(4), bv=f(4),
                  wo=f(6, 4), bias=f(6), residual=True, post_norm=True, wedge=f(4, F),
                  ln_weight=one(6), ln_bias=f(6), w1=f(8, 6), b1=f(8), w2=f(6, 8), b2=f(6),
                  ln2_weight=one(6), ln2_bias=f(6), ff_act="gelu")]
    if gate:
        specs[0]["wbeta"] = f(18)
    arrays = lambda s: {k: v for k, v in s.items() if isinstance(v, np.ndarray)}  # noqa: E731
    weights = [ag.Weights(heads=s["heads"], act=s.get("act", "none"),
                          residual=s.get("residual", False), post_norm=s.get("post_norm", False),
                          ff_act=s.get("ff_act", "gelu"),
                          **{"wo": None, **arrays(s)}) for s in specs]
    ts = torch_specs(specs)
    xt = torch.from_numpy(x).double().requires_grad_()
    want = conv_reference(xt, ei, ts, torch.from_numpy(e).double())
    matches_autograd(rng, g, x, weights, want, xt, ts, rounds=2, norm="layer", edge_features=e)
    # what the layers cannot run without
    with pytest.raises(ag.Error, match="projects edge features .wedge., and the options give"):
        ag.rounds(g, x, weights, rounds=2, norm="layer")
    with pytest.raises(ag.Error, match=r"edge_features has shape \[3, 4\]; expected \[%d, F\]"
                       % E):
        ag.rounds(g, x, weights, rounds=2, norm="layer", edge_features=e[:3])
    with pytest.raises(ag.Error, match="layer 2 is post-norm, and the options have no norm"):
        ag.rounds(g, x, weights, rounds=2, edge_features=e)


def test_edge_features_from_the_command_line(tmp_path, rng):
    """train --model FILE with edges=yes layers on a graph file's numeric edge
    attributes; run --weights DIR with the attributes and with the same rows as
    an .npy give one output, and rounds() with load_model(DIR) and the features
    per message (an undirected edge's two messages share its row; a self-loop
    --self-loops added gets the mean of its node's in-edges) gives it too."""
    from conftest import cli
    edges = [(0, 1, 0.5, 1.0), (1, 2, -1.0, 0.0), (2, 0, 2.0, -2.0), (0, 1, 1.5, 0.5),
             (3, 3, 0.25, 3.0), (4, 2, -0.5, 1.0), (5, 4, 1.0, -1.0)]
    text = "graph [ directed 0\n" + "".join("node [ id %d ]\n" % i for i in range(6)) + \
        "".join("edge [ source %d target %d w %g z %g ]\n" % e for e in edges) + "]\n"
    (tmp_path / "g.gml").write_text(text)
    rows = np.float32([e[2:] for e in edges])
    np.save(tmp_path / "e.npy", rows)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.arange(6) % 2)
    (tmp_path / "m.txt").write_text(
        "self-loops on\nnorm layer\nreadout none\n"
        "layer heads=2 dim=3 out=concat qkv_bias=yes skip=gate bias=yes act=elu edges=yes\n"
        "layer heads=1 dim=2 out=mean norm=post edges=yes\n")
    cli("train", tmp_path / "g.gml", "--features", tmp_path / "x.npy", "--labels",
        tmp_path / "y.npy", "--model", tmp_path / "m.txt", "--edge-features", "w,z",
        "--epochs", 3, "--save", tmp_path / "saved", "--quiet")
    assert "edges=yes" in (tmp_path / "saved" / "model.txt").read_text()
    for spec in ("w,z", tmp_path / "e.npy"):
        cli("run", tmp_path / "g.gml", "--features", tmp_path / "x.npy", "--weights",
            tmp_path / "saved", "--edge-features", spec, "--out", tmp_path / "out.npy",
            "--quiet")
        if spec == "w,z":
            first = np.load(tmp_path / "out.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), first)
    layers, opts = ag.load_model(str(tmp_path / "saved"))
    assert layers[0].wedge.shape == (6, 2) and layers[0].wbeta.shape == (18,)
    assert layers[1].post_norm and layers[0].bk.shape == (6,)
    g = ag.Graph.load(str(tmp_path / "g.gml"), self_loops="on")
    feats, real = [], 0
    for u, v, *f in edges:   # the graph's edge order: u->v then v->u (u < v)
        feats += [f] * (1 if u == v else 2)
        real += 1 if u == v else 2
    feats = np.float32(feats)
    for i in g.dst[real:]:   # the added loops: the mean of the node's in-edges
        feats = np.vstack([feats, feats[:real][g.dst[:real] == i].mean(0)])
    y = ag.rounds(g, x, layers, rounds=2, norm=opts["norm"], edge_features=feats)
    np.testing.assert_allclose(y, first, rtol=1e-6, atol=1e-6)
    # refused, naming what is wrong: exit 2 for the options and the model file, 1 for the
    # inputs
    run = ("run", tmp_path / "g.gml", "--features", tmp_path / "x.npy", "--out",
           tmp_path / "no.npy", "--quiet")
    np.save(tmp_path / "short.npy", rows[:3])
    for extra, status, message in [
            ((), 2, "line 5: edges=yes, and no --edge-features given"),
            (("--edge-features", tmp_path / "short.npy"), 1,
             "has 3 rows; .* has 7 edges .one row an edge, in the graph's edge order"),
            (("--edge-features", "w,nope"), 1, "edge attribute 'nope' is not in the graph"),
            (("--edge-features", "w,,z"), 1, "attribute 2 is empty")]:
        r = cli(*run, "--weights", tmp_path / "saved", *extra, check=False)
        assert r.returncode == status and re.search(message, r.stderr), r.stderr
    assert not (tmp_path / "no.npy").exists()
    r = cli(*run, "--edge-features", "w", check=False)
    assert r.returncode == 2 and "give --model FILE" in r.stderr
    (tmp_path / "plain.txt").write_text("layer heads=1 dim=5\n")
    r = cli(*run, "--model", tmp_path / "plain.txt", "--edge-features", "w", check=False)
    assert r.returncode == 2 and "no layer of" in r.stderr and "reads them" in r.stderr
    np.save(tmp_path / "empty.npy", np.zeros((7, 0), np.float32))
    r = cli(*run, "--weights", tmp_path / "saved", "--edge-features", tmp_path / "empty.npy",
            check=False)
    assert r.returncode == 1 and "is [7, 0]; expected [edges, F] with F >= 1" in r.stderr
    # the report after the rounds reads the last round's edge terms (kept in the workspace)
    r = cli(*run[:-1], "--weights", tmp_path / "saved", "--edge-features", "w,z", "--attn",
            tmp_path / "a.npy", "--threads", 1)
    assert r.returncode == 0 and np.load(tmp_path / "a.npy").shape[0] > 0
    for line, message in [("layer heads=1 dim=5 norm=post", "norm=post, and the model has no "
                           "norm"),
                          ("layer heads=1 dim=5 skip=gate residual=yes", "the skip is the "
                           "layer's residual"),
                          ("layer heads=1 dim=5 skip=maybe", "skip=maybe; expected no, sum")]:
        (tmp_path / "bad.txt").write_text(line + "\n")
        r = cli(*run, "--model", tmp_path / "bad.txt", check=False)
        assert r.returncode == 2 and message in r.stderr, r.stderr


@pytest.mark.parametrize("beta", [True, False])
def test_layers_are_pyg_transformer_conv_and_gat_conv(rng, beta):
    """The library's layers with PyG's weights copied in: TransformerConv (query,
    key, value with biases; edge features; root_weight and beta) and GATConv
    with edge features (no self-loops: given by the graph), against PyG's own
    layers when they import."""
    pyg = pytest.importorskip("torch_geometric.nn")
    N, F, H, C = 10, 5, 2, 3
    ei = random_edge_index(rng, N, 30)
    g = ag.Graph.from_edge_index(ei, N)
    x = rng.standard_normal((N, 7)).astype(np.float32)
    e = rng.standard_normal((ei.shape[1], F)).astype(np.float32)
    xt, et, eit = torch.from_numpy(x), torch.from_numpy(e), torch.from_numpy(ei)
    torch.manual_seed(3)
    conv = pyg.TransformerConv(7, C, heads=H, beta=beta, edge_dim=F)
    sd = {k: v.detach().numpy() for k, v in conv.state_dict().items()}
    w = ag.Weights(sd["lin_query.weight"], sd["lin_key.weight"], sd["lin_value.weight"], None, H,
                   bq=sd["lin_query.bias"], bk=sd["lin_key.bias"], bv=sd["lin_value.bias"],
                   wedge=sd["lin_edge.weight"], wskip=sd["lin_skip.weight"],
                   bskip=sd["lin_skip.bias"],
                   wbeta=sd["lin_beta.weight"][0] if beta else None, residual=False)
    np.testing.assert_allclose(ag.rounds(g, x, w, edge_features=e),
                               conv(xt, eit, et).detach().numpy(), rtol=1e-5, atol=1e-5)
    gat = pyg.GATConv(7, C, heads=H, edge_dim=F, add_self_loops=False)
    sd = {k: v.detach().numpy() for k, v in gat.state_dict().items()}
    w = ag.Weights(sd["lin_src.weight"], None, None, None, H, attn_src=sd["att_src"][0],
                   attn_dst=sd["att_dst"][0], wedge=sd["lin_edge.weight"],
                   attn_edge=sd["att_edge"][0], bias=sd["bias"], residual=False)
    np.testing.assert_allclose(ag.rounds(g, x, w, score="additive", edge_features=e),
                               gat(xt, eit, et).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_model_object_loads_saves_and_runs_what_the_tool_wrote(tmp_path):
    """ag.Model (ag_model_t) on folders `attngraph train --save` wrote: predict
    is train's predictions, save writes the same files byte for byte, init +
    run is `run --model FILE --seed`'s states; a `rounds R` model and a folder
    of model.args load; failures name the file."""
    from conftest import ROOT, cli
    planted = os.path.join(ROOT, "graphs", "planted")
    gml, x = os.path.join(ROOT, "graphs", "planted.gml"), np.load(os.path.join(planted, "x.npy"))
    g = ag.Graph.load(gml)
    texts = ["score additive\nself-loops replace\nreadout none\n"
             "layer heads=2 dim=4 out=concat projection=one bias=yes act=elu\n"
             "layer heads=1 dim=3 out=mean projection=one bias=yes\n",
             "score gatv2\nrounds 2\nlayer heads=2 dim=4 bias=yes act=relu\n",
             None]
    for k, text in enumerate(texts):
        saved = tmp_path / ("saved-%d" % k)
        if text is None:
            model_opts = ["--rounds", 2, "--heads", 2]
        else:
            (tmp_path / "m.txt").write_text(text)
            model_opts = ["--model", tmp_path / "m.txt"]
        cli("train", gml, "--features", os.path.join(planted, "x.npy"), "--labels",
            os.path.join(planted, "labels.npy"), *model_opts, "--epochs", 10, "--save", saved,
            "--predict", tmp_path / "pred.npy", "--quiet")
        m = ag.Model.load(str(saved))
        assert m.D == 8 and m.classes == (0 if k == 0 else 3)
        np.testing.assert_array_equal(m.predict(g, x), np.load(tmp_path / "pred.npy"))
        m.save(str(tmp_path / "again"))
        if text is not None:
            for name in sorted(os.listdir(saved)):
                if name.endswith(".npy") or name == "model.txt":
                    assert (saved / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
            assert "rounds 2\n" in m.text if k == 1 else "rounds" not in m.text
        else:
            assert "rounds 2\n" in m.text and not (tmp_path / "again" / "model.args").exists()
        np.testing.assert_array_equal(ag.Model.load(str(tmp_path / "again")).run(g, x), m.run(g, x))
        shutil.rmtree(tmp_path / "again")
    # drawn from a seed: the tool's --model FILE --seed 7 states
    fresh = ag.Model.init(texts[0], 8, seed=7)
    (tmp_path / "m0.txt").write_text(texts[0])
    cli("run", gml, "--features", os.path.join(planted, "x.npy"), "--model", tmp_path / "m0.txt",
        "--seed", 7, "--out", tmp_path / "y.npy", "--quiet")
    np.testing.assert_array_equal(fresh.run(g, x), np.load(tmp_path / "y.npy"))
    assert "2 layers" in repr(fresh) and fresh.width_out == 3
    with pytest.raises(ag.Error, match="model text line 1: rounds 0; expected a count"):
        ag.Model.init("rounds 0\nlayer heads=1 dim=2\n", 8)
    with pytest.raises(ag.Error, match="x has shape \\[4, 8\\]; expected \\[%d, 8\\]" % g.N):
        fresh.run(g, x[:4])
    with pytest.raises(ag.Error, match="model.txt"):
        ag.Model.load(str(tmp_path))
    with pytest.raises(ag.Error, match="cannot create it: .* does not exist"):
        fresh.save(str(tmp_path / "no" / "such"))
    with pytest.raises(TypeError):
        ag.Model()
