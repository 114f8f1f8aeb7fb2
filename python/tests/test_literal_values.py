"""0 means 0, and one validation: values given are taken as given (None is the
library's default), Python refuses what the CLI refuses with the same words,
and saved models agree with the CLI about their options (model.args)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attngraph as ag
from attngraph.torch import GraphAttention
from conftest import cli, random_edge_index, ROOT
from test_torch import reference_round


def two_senders():
    """Node 2 hears node 0 (key 1) and node 1 (key -1); a_src = 1, a_dst = 0,
    so node 2's additive scores are LeakyReLU(1) and LeakyReLU(-1)."""
    g = ag.Graph.from_edge_index(np.array([[0, 1], [2, 2]]), 3)
    h = np.array([[1.0], [-1.0], [0.0]], np.float32)
    one = np.ones((1, 1), np.float32)
    return g, h, one


def softmax(s):
    e = np.exp(np.array(s) - max(s))
    return e / e.sum()


@pytest.mark.parametrize("slope", [0.0, 0.2, 0.5])
def test_slope_is_taken_as_given(slope):
    """The issue's reproduction: slope=0.0 is a ReLU (it ran slope 0.2)."""
    g, h, one = two_senders()
    w = ag.attention_weights(g, h, h, score="additive", a_src=one, a_dst=0 * one, slope=slope)
    np.testing.assert_allclose(w[:, 0], softmax([1.0, -slope]), rtol=1e-6)
    if slope == 0.0:
        np.testing.assert_allclose(w[:, 0], [0.7310586, 0.2689414], rtol=1e-6)


def test_defaults_are_the_libraries():
    """None (not given) is AG_SCORE_INIT's slope 0.2 and beta 1."""
    g, h, one = two_senders()
    w = ag.attention_weights(g, h, h, score="additive", a_src=one, a_dst=0 * one)
    np.testing.assert_allclose(w[:, 0], softmax([1.0, -0.2]), rtol=1e-6)
    s = ag.ops.score_defaults("additive")
    assert (s.beta, s.softcap, round(s.slope, 6)) == (1.0, 0.0, 0.2)


def test_beta_zero_weighs_every_in_edge_alike(rng):
    N, H, d = 12, 2, 3
    g = ag.Graph.from_edge_index(random_edge_index(rng, N, 40), N)
    q, k, v = (rng.standard_normal((N, H * d)).astype(np.float32) for _ in range(3))
    m = ag.attention(g, q, k, v, H, score="dot", beta=0.0)
    want = np.zeros((N, H * d))
    for i in range(N):
        srcs = g.src[g.dst == i]
        if len(srcs):
            want[i] = v[srcs].mean(0)
    np.testing.assert_allclose(m, want, atol=1e-6)


def test_layer_norm_epsilon_zero(rng):
    """ln_eps=0.0 is LayerNorm without epsilon (it ran 1e-5): rows of tiny
    variance tell the two apart."""
    N, D, H = 10, 4, 2
    ei = random_edge_index(rng, N, 30)
    g = ag.Graph.from_edge_index(ei, N)
    w = ag.add_layer_norm(ag.Weights.random(D, H, d=2, seed=4))
    x = (rng.standard_normal((N, D)) * 1e-3).astype(np.float32)
    p = {n: torch.tensor(a, dtype=torch.float64) for n, a in (
        ("wq.weight", w.wq), ("wk.weight", w.wk), ("wv.weight", w.wv), ("wo.weight", w.wo),
        ("ln.weight", w.ln_weight), ("ln.bias", w.ln_bias))}
    x64 = torch.tensor(x, dtype=torch.float64)
    for eps, ln_eps in ((0.0, 0.0), (1e-5, None)):
        y = ag.rounds(g, x, [w], 1, norm="layer", ln_eps=ln_eps)
        want = reference_round(x64, p, ei[0], ei[1], H, True, True, eps=eps).numpy()
        np.testing.assert_allclose(y, want, rtol=2e-3, atol=1e-6)
    assert not np.allclose(ag.rounds(g, x, [w], 1, norm="layer", ln_eps=0.0),
                           ag.rounds(g, x, [w], 1, norm="layer"), rtol=1e-2)


def test_adam_betas_and_eps_zero_against_torch(rng):
    p = rng.standard_normal(6).astype(np.float32)
    grad = np.zeros_like(p)
    pt = torch.tensor(p.copy(), requires_grad=True)
    opt = ag.Optimizer("adam", lr=0.1, beta1=0.0, beta2=0.5, eps=0.0)
    opt.add(p, grad)
    topt = torch.optim.Adam([pt], lr=0.1, betas=(0.0, 0.5), eps=0.0)
    for _ in range(3):
        grad[:] = rng.standard_normal(6)
        opt.step()
        pt.grad = torch.tensor(grad.copy())
        topt.step()
    np.testing.assert_allclose(p, pt.detach().numpy(), atol=1e-6)


# ---------------------------------------------------------------- one validation

def test_nan_inputs_are_refused_naming_the_first(rng, tmp_path):
    """As the CLI refuses a NaN in --q (naming row and column), so do the
    library's entry points, and with them Python and the layer."""
    g = ag.Graph.pattern("causal", 5)
    q, k, v = (rng.standard_normal((5, 4)).astype(np.float32) for _ in range(3))
    q[2, 1] = np.nan
    with pytest.raises(ag.Error, match=r"q: row 2, column 1 is NaN; expected finite values"):
        ag.attention(g, q, k, v, 1)
    k[4, 3] = -np.inf
    with pytest.raises(ag.Error, match=r"k: row 4, column 3 is -Inf"):
        ag.attention(g, v, k, v, 1)
    with pytest.raises(ag.Error, match=r"row 0, column 1 is NaN"):
        ag.attention(g, v, v, v, 1, score="additive", a_src=np.array([[0, np.nan, 0, 0]]),
                     a_dst=np.zeros((1, 4)))
    with pytest.raises(ag.Error, match=r"slope is nan; expected a finite number"):
        ag.attention(g, v, v, v, 1, score="additive", slope=float("nan"),
                     a_src=np.zeros((1, 4)), a_dst=np.zeros((1, 4)))
    layer = GraphAttention(4, heads=2)
    x = torch.randn(5, 4)
    x[3, 0] = float("nan")
    with pytest.raises(ag.Error, match=r"x: row 3, column 0 is NaN"):
        layer(x, g)
    with pytest.raises(ag.Error, match=r"x: row 3, column 0 is NaN"):
        ag.rounds(g, x.numpy(), [ag.Weights.random(4, 2, d=2)], 1)
    # the CLI says the same of the same array
    qpath = tmp_path / "q.npy"
    np.save(qpath, q)
    r = cli("run", "--pattern", "causal", "--nodes", 5, "--q", qpath, "--k", qpath, "--v", qpath,
            "--out", tmp_path / "out.npy", check=False)
    assert r.returncode == 1 and "row 2, column 1 is NaN; expected finite values" in r.stderr


def test_layer_width_must_split_into_the_heads():
    """GraphAttention(8, heads=3) silently used head_dim 2; the CLI refuses
    --dim 8 --heads 3 without --head-dim, and so does the layer now."""
    with pytest.raises(ag.Error, match=r"width dim=8 is not a multiple of 3 heads; give head_dim"):
        GraphAttention(8, heads=3)
    r = cli("run", "--pattern", "causal", "--nodes", 4, "--dim", 8, "--heads", 3, check=False)
    assert r.returncode == 2 and "is not a multiple of 3 heads" in r.stderr
    layer = GraphAttention(8, heads=3, head_dim=2)
    assert layer.wq.weight.shape == (6, 8)


def test_layer_names_a_numpy_array():
    layer = GraphAttention(2, heads=1)
    with pytest.raises(TypeError, match=r"x is a numpy.ndarray; expected a torch.Tensor \[N, 2\]"):
        layer(np.zeros((4, 2), np.float32), ag.Graph.pattern("causal", 4))


# ---------------------------------------------------------------- model.args

KARATE = ROOT + "/graphs/karate"


@pytest.mark.parametrize("kw,line", [
    (dict(heads=2, beta=0.3), "--heads 2 --rounds 1 --beta 0.300000012"),
    (dict(heads=1, score="additive", slope=0.1), "--heads 1 --rounds 1 --score additive --slope 0.100000001"),
    (dict(heads=1, score="additive", slope=0.2), "--heads 1 --rounds 1 --score additive"),
    (dict(heads=1, score="additive", slope=0.0), "--heads 1 --rounds 1 --score additive --slope 0"),
])
def test_python_saves_what_the_cli_runs(tmp_path, kw, line):
    """A layer saved from Python runs in the CLI given the same options, both
    ways (defaults given or not), and the line is the CLI's own."""
    torch.manual_seed(1)
    layer = GraphAttention(2, **kw)
    layer.save(str(tmp_path / "m"))
    assert (tmp_path / "m" / "model.args").read_text() == line + "\n"
    opts = line.split()[4:]   # after --heads H --rounds 1
    heads = ["--heads", str(kw["heads"])]
    default_slope = ["--slope", "0.2"] if "--score" in opts and "--slope" not in opts else []
    for given in ([], heads + opts, heads + opts + default_slope):   # none: from model.args
        cli("run", KARATE + ".gml", "--features", KARATE + "/x.npy", "--weights", tmp_path / "m",
            *given, "--out", tmp_path / "y.npy", "--quiet")


@pytest.mark.parametrize("opts,kw", [
    (["--beta", "0.3"], dict(beta=0.3)),
    (["--score", "additive", "--slope", "0.1"], dict(score="additive", slope=0.1)),
    (["--score", "additive"], dict(score="additive", slope=0.2)),
])
def test_cli_saves_what_python_loads(tmp_path, opts, kw):
    cli("train", KARATE + ".gml", "--features", KARATE + "/x.npy", "--labels",
        KARATE + "/labels.npy", "--train-mask", KARATE + "/train.npy", *opts, "--epochs", 2,
        "--save", tmp_path / "m", "--quiet")
    GraphAttention(2, heads=1, **kw).load_weights(str(tmp_path / "m"))
    back = GraphAttention.load(str(tmp_path / "m"))
    assert back.model_args() == (tmp_path / "m" / "model.args").read_text().strip()


def test_model_args_record_how_the_graph_was_made(tmp_path):
    """train --self-loops on: the folder says so; Python reads it, keeps it
    when it saves the layer again, and writes it from a graph it is given."""
    cli("train", KARATE + ".gml", "--features", KARATE + "/x.npy", "--labels",
        KARATE + "/labels.npy", "--train-mask", KARATE + "/train.npy", "--self-loops", "on",
        "--epochs", 2, "--save", tmp_path / "m", "--quiet")
    args = ag.weights.read_model_args(str(tmp_path / "m"))
    assert args["self_loops"] == "on"
    layer = GraphAttention.load(str(tmp_path / "m"))
    layer.save(str(tmp_path / "again"))
    assert (tmp_path / "again" / "model.args").read_text() == \
        (tmp_path / "m" / "model.args").read_text()
    g = ag.Graph.load(KARATE + ".gml", self_loops="on")
    torch.manual_seed(0)
    GraphAttention(2).save(str(tmp_path / "fresh"), graph=g)
    assert (tmp_path / "fresh" / "model.args").read_text() == \
        "--heads 1 --rounds 1 --self-loops on\n"
    # the CLI takes the graph options from model.args, and refuses others
    cli("run", KARATE + ".gml", "--features", KARATE + "/x.npy", "--weights",
        tmp_path / "fresh", "--heads", 1, "--out", tmp_path / "y.npy", "--quiet")
    r = cli("run", KARATE + ".gml", "--features", KARATE + "/x.npy", "--weights",
            tmp_path / "fresh", "--self-loops", "off", "--out", tmp_path / "y.npy", check=False)
    assert r.returncode == 1 and "--self-loops on" in r.stderr


def test_model_args_one_reader_for_python_and_the_cli(tmp_path):
    """read_model_args is the library's reader (ag_model_args_read): the values
    as the model holds them (float32), and a line the CLI refuses, Python
    refuses with the same words."""
    folder = tmp_path / "m"
    GraphAttention(2, heads=2).save(str(folder))
    (folder / "model.args").write_text("--heads 2 --rounds 3 --score additive --slope 0.1 "
                                       "--no-residual --self-loops on --undirected\n")
    args = ag.weights.read_model_args(str(folder))
    assert args == dict(heads=2, rounds=3, residual=False, norm=False, score="additive",
                        slope=float(np.float32(0.1)), self_loops="on", directed=False)
    for line, words in (("--heads 2 --out x.npy\n", "'--out' is not one of the model's options"),
                        ("--heads 2\n--rounds 1\n", "a second line"),
                        ("--heads 0\n", "--heads '0' is not an integer in 1..4096")):
        (folder / "model.args").write_text(line)
        with pytest.raises(ag.Error) as e:
            ag.weights.read_model_args(str(folder))
        assert words in str(e.value)
        r = cli("run", KARATE + ".gml", "--features", KARATE + "/x.npy", "--weights", folder,
                "--out", tmp_path / "y.npy", check=False)
        assert r.returncode == 2 and words in r.stderr and not (tmp_path / "y.npy").exists()


def test_rounds_folders_keep_how_the_graph_was_made(tmp_path):
    """save_rounds(graph=...) records it; load_rounds gives it to every round's
    module, so saving them again keeps it."""
    from attngraph.torch import save_rounds, load_rounds
    g = ag.Graph.load(KARATE + ".gml", self_loops="replace")
    torch.manual_seed(0)
    save_rounds(str(tmp_path / "m"), [GraphAttention(2), GraphAttention(2)], graph=g)
    line = (tmp_path / "m" / "model.args").read_text()
    assert line == "--heads 1 --rounds 2 --self-loops replace\n"
    mods = load_rounds(str(tmp_path / "m"))
    assert [m.graph_args for m in mods] == [{"self_loops": "replace"}] * 2
    save_rounds(str(tmp_path / "again"), mods)
    assert (tmp_path / "again" / "model.args").read_text() == line
    cli("run", KARATE + ".gml", "--features", KARATE + "/x.npy", "--weights", tmp_path / "m",
        "--out", tmp_path / "y.npy", "--quiet")
