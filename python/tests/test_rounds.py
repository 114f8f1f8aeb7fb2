"""Rounds, compare and training from Python against the CLI and torch."""
import csv

import numpy as np
import pytest
import torch

import attngraph as ag
from conftest import cli, random_edge_index, ROOT
from test_torch import reference_round


def test_rounds_match_the_cli(tmp_path, rng):
    N, D, H = 12, 8, 2
    g = ag.Graph.pattern("window:4", N)
    layers = [ag.Weights.random(D, H, seed=s) for s in (3, 4, 5)]
    for w in layers:
        ag.add_layer_norm(w)
        w.ln_weight[:] = rng.uniform(0.5, 1.5, D)
    x = rng.standard_normal((N, D)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    ag.save_layers(str(tmp_path / "w"), layers)
    assert (tmp_path / "w" / "round-3" / "ln_weight.npy").exists()
    cli("run", "--pattern", "window:4", "--nodes", N, "--features", tmp_path / "x.npy",
        "--weights", tmp_path / "w", "--heads", H, "--rounds", 3, "--norm", "layer",
        "--out", tmp_path / "y.npy", "--quiet")
    y, last = ag.rounds(g, x, ag.load_layers(str(tmp_path / "w"), H), rounds=3, norm="layer",
                        return_last=True)
    np.testing.assert_array_equal(y, np.load(tmp_path / "y.npy"))
    assert last["m"].shape == (N, D) and last["entropy"].shape == (N, H)
    np.testing.assert_array_equal(x, np.load(tmp_path / "x.npy"))      # x is not changed


def test_compare_matches_the_cli(tmp_path, rng):
    N, D, H = 12, 8, 2
    specs = ["causal", "window:3", "causal&strided:3", "window:3+global:1"]
    x = rng.standard_normal((N, D)).astype(np.float32)
    w = ag.Weights.random(D, H, seed=9)
    np.save(tmp_path / "x.npy", x)
    w.save(str(tmp_path / "w"))
    args = sum([["--pattern", s] for s in specs], [])
    cli("compare", *args, "--nodes", N, "--features", tmp_path / "x.npy", "--weights",
        tmp_path / "w", "--heads", H, "--rounds", 2, "--csv", tmp_path / "c.csv", "--quiet")
    rows = ag.compare([ag.Graph.pattern(s, N) for s in specs], x, w, rounds=2)
    with open(tmp_path / "c.csv") as f:
        want = list(csv.DictReader(f))
    for r, c in zip(rows, want):
        assert r["name"] == c["connectivity"] and r["edges"] == int(c["edges"])
        for key in ("density", "entropy_mean", "entropy_min", "distance_mean", "rel_l2",
                    "cosine_mean"):
            if c[key] == "":
                assert r[key] is None
            else:
                assert abs(r[key] - float(c[key])) < 1e-5 * max(1, abs(float(c[key]))), key
        assert " ".join(str(i) for i, _ in r["most_changed"]) == c["most_changed"]
    assert "(baseline)" in ag.format_compare(rows)


def test_training_gradients_against_torch(rng):
    """rounds_forward + backward against autograd through the float64 reference."""
    N, D, H = 14, 6, 2
    ei = random_edge_index(rng, N, 45)
    g = ag.Graph.from_edge_index(ei, N)
    layers = [ag.add_layer_norm(ag.Weights.random(D, H, d=2, seed=s)) for s in (1, 2)]
    for w in layers:
        w.ln_weight[:] = rng.uniform(0.5, 1.5, D)
        w.ln_bias[:] = rng.uniform(-0.3, 0.3, D)
    x = rng.standard_normal((N, D)).astype(np.float32)
    y, tape = ag.rounds_forward(g, x, layers, rounds=2, norm="layer")
    dy = rng.standard_normal((N, D)).astype(np.float32)
    dx, grads = tape.backward(dy)

    names = {"wq": "wq.weight", "wk": "wk.weight", "wv": "wv.weight", "wo": "wo.weight",
             "ln_weight": "ln.weight", "ln_bias": "ln.bias"}
    ps = [{names[n]: torch.tensor(a, dtype=torch.float64, requires_grad=True)
           for n, a in w.arrays().items() if n in names} for w in layers]
    x64 = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    h = x64
    for p in ps:
        h = reference_round(h, p, ei[0], ei[1], H, True, True)
    (h * torch.tensor(dy, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(y, h.detach().numpy(), atol=5e-5)
    np.testing.assert_allclose(dx, x64.grad.numpy(), atol=2e-4)
    for gw, p in zip(grads, ps):
        for n, a in gw.arrays().items():
            if n not in names:
                continue
            want = p[names[n]].grad.numpy()
            np.testing.assert_allclose(a, want, atol=2e-4 * max(1, abs(want).max()), err_msg=n)


def dot_loss(g, kw, dy):
    """loss(x, layers) = sum(dy * rounds_forward(g, x, layers, **kw)), in float64."""
    def loss(x, layers):
        y, tape = ag.rounds_forward(g, x, layers, **kw)
        tape.free()
        return float((y.astype(np.float64) * dy).sum())
    return loss


def check_by_finite_differences(loss, x, layers, dx, grads, x_points, weight_points, h=1e-2):
    """Central differences of loss(x, layers) against dx at x_points (row, column)
    and against grads at weight_points (layer, array, index)."""
    for i, c in x_points:
        xp, xm = x.copy(), x.copy()
        xp[i, c] += h
        xm[i, c] -= h
        fd = (loss(xp, layers) - loss(xm, layers)) / (2 * h)
        assert abs(fd - dx[i, c]) < 3e-3 + 1e-2 * abs(fd), (i, c, fd, dx[i, c])
    for k, name, idx in weight_points:
        def moved(delta):
            ls = [ag.Weights(**{n: a.copy() for n, a in w.arrays().items()}, heads=w.heads,
                             act=w.act, ff_act=w.ff_act, mean_heads=w.mean_heads,
                             residual=w.residual) for w in layers]
            getattr(ls[k], name)[idx] += delta
            return loss(x, ls)
        fd = (moved(h) - moved(-h)) / (2 * h)
        got = getattr(grads[k], name)[idx]
        assert abs(fd - got) < 3e-3 + 1e-2 * abs(fd), (k, name, fd, got)


def test_dropout_gradients_by_finite_differences(rng):
    """Rounds with dropout on features and attention: for a fixed seed a smooth
    function, whose backward (the same masks) matches central differences."""
    N, D, H = 14, 6, 2
    g = ag.Graph.from_edge_index(random_edge_index(rng, N, 45), N)
    layers = [ag.add_layer_norm(ag.Weights.random(D, H, d=2, seed=s)) for s in (1, 2)]
    x = rng.standard_normal((N, D)).astype(np.float32)
    dy = rng.standard_normal((N, D)).astype(np.float32)
    kw = dict(rounds=2, norm="layer", dropout=0.3, attn_dropout=0.4, dropout_seed=7,
              resid_dropout=0.25)
    loss = dot_loss(g, kw, dy)

    y, tape = ag.rounds_forward(g, x, layers, **kw)
    dx, grads = tape.backward(dy)
    plain, t2 = ag.rounds_forward(g, x, layers, rounds=2, norm="layer")
    t2.free()
    assert not np.allclose(y, plain)                    # dropout did something
    again, t3 = ag.rounds_forward(g, x, layers, **kw)
    t3.free()
    np.testing.assert_array_equal(again, y)             # the same seed, the same masks
    check_by_finite_differences(loss, x, layers, dx, grads, [(0, 0), (3, 2), (9, 5), (12, 1)],
                                [(0, "wq", (1, 2)), (1, "wv", (3, 0)), (0, "wo", (2, 1)),
                                 (1, "ln_weight", (4,))])


def test_residual_dropout_through_a_feed_forward_sublayer(rng):
    """resid_dropout on both branches of transformer blocks (attention with its
    residual, a feed-forward sublayer): the backward drops what the forward did."""
    N, D, H, F = 12, 4, 2, 8
    g = ag.Graph.from_edge_index(random_edge_index(rng, N, 40), N)
    f = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)   # noqa: E731
    layers = [ag.Weights(f(D, D), f(D, D), f(D, D), f(D, D), H, ln_weight=1 + f(D),
                         ln_bias=f(D), w1=f(F, D), b1=f(F), w2=f(D, F), b2=f(D),
                         ln2_weight=1 + f(D), ln2_bias=f(D)) for _ in range(2)]
    x, dy = f(N, D), f(N, D)
    kw = dict(rounds=2, norm="layer", resid_dropout=0.3, dropout_seed=3)
    loss = dot_loss(g, kw, dy)

    y, tape = ag.rounds_forward(g, x, layers, **kw)
    dx, grads = tape.backward(dy)
    assert not np.allclose(y, ag.rounds(g, x, layers, rounds=2, norm="layer"))
    check_by_finite_differences(loss, x, layers, dx, grads, [(0, 0), (5, 3), (11, 1)],
                                [(0, "w2", (1, 5)), (1, "b2", (2,)), (0, "wo", (3, 1)),
                                 (1, "w1", (6, 2)), (0, "ln2_weight", (0,))])


def test_losses_and_adam_against_torch(rng):
    N, D, C = 10, 4, 3
    x = rng.standard_normal((N, D)).astype(np.float32)
    wr = rng.standard_normal((C, D)).astype(np.float32)
    br = rng.standard_normal(C).astype(np.float32)
    labels = rng.integers(0, C, N)
    labels[2] = -1
    mask = np.ones(N, bool)
    mask[5] = False
    ce = ag.cross_entropy(x, wr, br, labels, mask)
    xt, wt, bt = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, wr, br))
    keep = torch.tensor(mask & (labels >= 0))
    logits = xt @ wt.t() + bt
    loss = torch.nn.functional.cross_entropy(logits[keep], torch.tensor(labels)[keep])
    loss.backward()
    assert abs(ce.loss - loss.item()) < 1e-5 and ce.counted == int(keep.sum())
    np.testing.assert_allclose(ce.dx, xt.grad.numpy(), atol=1e-6)
    np.testing.assert_allclose(ce.dwr, wt.grad.numpy(), atol=1e-6)
    np.testing.assert_allclose(ce.dbr, bt.grad.numpy(), atol=1e-6)
    np.testing.assert_array_equal(ce.pred, logits.argmax(1).numpy())

    y = rng.standard_normal((N, D)).astype(np.float32)
    mse, dx = ag.mse_loss(x, y)
    assert abs(mse - ((x - y) ** 2).mean()) < 1e-6
    np.testing.assert_allclose(dx, 2 * (x - y) / x.size, atol=1e-7)

    # three Adam steps on the same gradients as torch.optim.Adam
    p = rng.standard_normal(7).astype(np.float32)
    grad = np.zeros_like(p)
    pt = torch.tensor(p.copy(), requires_grad=True)
    opt = ag.Optimizer("adam", lr=0.1)
    opt.add(p, grad)
    topt = torch.optim.Adam([pt], lr=0.1)
    for _ in range(3):
        grad[:] = rng.standard_normal(7)
        opt.step()
        pt.grad = torch.tensor(grad.copy())
        topt.step()
    np.testing.assert_allclose(p, pt.detach().numpy(), atol=1e-6)
    with pytest.raises(ag.Error, match="C-contiguous float32"):
        opt.add(np.zeros(3), np.zeros(3))


def test_training_loop_learns(rng):
    """A few optimizer steps through rounds_forward/backward lower the loss."""
    g = ag.Graph.load(ROOT + "/graphs/karate.gml", self_loops="on")
    x = np.load(ROOT + "/graphs/karate/x.npy")
    labels = np.load(ROOT + "/graphs/karate/labels.npy")
    w = ag.Weights.random(2, 1, seed=1)
    wr, br = np.zeros((2, 2), np.float32), np.zeros(2, np.float32)
    grads = ag.grads_like(w)
    dwr, dbr = np.zeros_like(wr), np.zeros_like(br)
    opt = ag.Optimizer("adam", lr=0.05)
    opt.add_weights(w, grads)
    opt.add(wr, dwr), opt.add(br, dbr)
    losses = []
    for _ in range(30):
        y, tape = ag.rounds_forward(g, x, w, rounds=2, residual=False)
        ce = ag.cross_entropy(y, wr, br, labels)
        tape.backward(ce.dx, grads)
        dwr[:], dbr[:] = ce.dwr, ce.dbr
        opt.step()
        losses.append(ce.loss)
    assert losses[-1] < 0.8 * losses[0]


def test_a_kept_tape_trains_the_same_bits(rng):
    """rounds_forward(..., tape=tape) uses the tape's memory again: the same
    losses, gradients and weights as a new tape every step, bit for bit."""
    g = ag.Graph.load(ROOT + "/graphs/karate.gml", self_loops="on")
    other = ag.Graph.pattern("window:3", g.N)
    x = rng.standard_normal((g.N, 8)).astype(np.float32)
    dy = rng.standard_normal((g.N, 8)).astype(np.float32)
    runs = []
    for keep in (False, True):
        w = ag.Weights.random(8, 2, seed=4)
        ag.add_layer_norm(w)
        grads = ag.grads_like(w, "layer")
        opt = ag.Optimizer("adam", lr=0.05)
        opt.add_weights(w, grads)
        tape, out = None, []
        for step in range(4):
            graph = other if step == 3 else g   # the last step on another graph
            y, t = ag.rounds_forward(graph, x, w, rounds=2, norm="layer", dropout=0.1,
                                     dropout_seed=step, tape=tape if keep else None)
            if keep and tape is not None and step < 3:
                assert t is tape
            tape = t
            dx, _ = tape.backward(dy, grads)
            opt.step()
            out.append((y, dx, grads.wq.copy()))
        tape.free()
        runs.append((out, w.wq.copy()))
    for (y0, dx0, g0), (y1, dx1, g1) in zip(runs[0][0], runs[1][0]):
        np.testing.assert_array_equal(y0, y1)
        np.testing.assert_array_equal(dx0, dx1)
        np.testing.assert_array_equal(g0, g1)
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    with pytest.raises(ag.Error, match="expected a Tape"):
        ag.rounds_forward(g, x, ag.Weights.random(8, 2, seed=4), tape="tape")


def test_load_layers_reads_as_the_library_does(tmp_path, rng):
    """load_layers is the library's folder reader (ag_model_load_ex): the arrays
    saved come back bit for bit; heads a folder's rows cannot split, and heads
    other than its model.args', are refused by name."""
    layers = [ag.Weights.random(8, 2, seed=s) for s in (1, 2)]
    ag.save_layers(str(tmp_path / "w"), layers)
    back = ag.load_layers(str(tmp_path / "w"), 2)
    assert len(back) == 2 and all(b.heads == 2 for b in back)
    for w, b in zip(layers, back):
        for name, a in w.arrays().items():
            np.testing.assert_array_equal(a, b.arrays()[name])
    with pytest.raises(ag.Error, match="round-1/wq.npy has 8 rows, not a multiple of 3 heads"):
        ag.load_layers(str(tmp_path / "w"), 3)
    ag.save_layers(str(tmp_path / "one"), layers[0])
    (tmp_path / "one" / "model.args").write_text("--heads 2 --rounds 2 --no-residual\n")
    back = ag.load_layers(str(tmp_path / "one"))
    assert [(w.heads, w.residual) for w in back] == [(2, False)]   # the folder's
    with pytest.raises(ag.Error, match="its layers have 2 heads"):
        ag.load_layers(str(tmp_path / "one"), 4)
    with pytest.raises(ag.Error, match="heads=0; expected >= 1"):
        ag.load_layers(str(tmp_path / "one"), 0)
