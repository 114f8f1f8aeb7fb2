"""Dropout on the attention weights (ops.Score's dropout, dropout_seed): the
library's weights are the undropped ones times 0 or 1/(1-p); outputs and
gradients against the float64 reference given those factors; the mask is a
function of the seed alone (threads, calls), kept at rate 1-p, and off at p=0."""
import numpy as np
import pytest
import torch

import attngraph as ag
import attngraph.torch  # noqa: F401  (ag.torch)
from conftest import random_edge_index
import reference
from test_attention import inputs, ref_tensors

KINDS = ["scaled-dot", "additive", "gatv2", "cosine", "sigmoid", "linear"]


def factors(g, q, k, H, kind, extra, p, seed):
    """Dropout's factor per edge and head, read off the library's weights."""
    full = ag.attention_weights(g, q, k, heads=H, score=kind, **extra)
    drop = ag.attention_weights(g, q, k, heads=H, score=kind, dropout=p, dropout_seed=seed,
                                **extra)
    z = np.where(drop == 0, 0.0, 1.0 / (1.0 - p))
    assert (full > 0).all() or kind == "linear"
    # every weight is kept and scaled, or dropped: nothing in between
    np.testing.assert_allclose(drop, full * z, rtol=2e-6, atol=0)
    return z


@pytest.mark.parametrize("kind", KINDS)
def test_forward_and_gradients_given_the_mask(rng, kind):
    N, H, d, E, p, seed = 23, 2, 4, 90, 0.4, 12345
    ei = random_edge_index(rng, N, E)
    g = ag.Graph.from_edge_index(ei, N)
    q, k, v, extra = inputs(rng, N, H, d, kind, {})
    z = factors(g, q, k, H, kind, extra, p, seed)
    assert 0 < (z == 0).mean() < 1

    M = ag.attention(g, q, k, v, heads=H, score=kind, dropout=p, dropout_seed=seed, **extra)
    names = ["q", "k", "v"] + list(extra)
    ts = dict(zip(names, ref_tensors([q, k, v] + list(extra.values()), grad=True)))
    Mr, _ = reference.attention(ei[0], ei[1], N, ts["q"], ts["k"], ts["v"], H, kind,
                                keep=torch.tensor(z), **{n: ts[n] for n in extra})
    np.testing.assert_allclose(M, Mr.detach().numpy(), atol=2e-5, rtol=0)

    dm = rng.standard_normal(M.shape).astype(np.float32)
    (Mr * torch.tensor(dm, dtype=torch.float64)).sum().backward()
    grads = ag.attention_backward(g, q, k, v, dm, heads=H, score=kind, dropout=p,
                                  dropout_seed=seed, **extra)
    got = dict(q=grads.dq, k=grads.dk, v=grads.dv, a_src=grads.d_a_src, a_dst=grads.d_a_dst,
               a=grads.d_a_src)
    for n in names:
        want = ts[n].grad.numpy()
        np.testing.assert_allclose(got[n], want, atol=5e-5 * max(1.0, np.abs(want).max()),
                                   rtol=0, err_msg=n)


def test_torch_layer_drops_the_same_messages_forward_and_backward(rng):
    N, H, d, E = 30, 2, 4, 120
    g = ag.Graph.from_edge_index(random_edge_index(rng, N, E), N)
    q, k, v = (torch.tensor(rng.standard_normal((N, H * d)), dtype=torch.float32,
                            requires_grad=True) for _ in range(3))
    kw = dict(heads=H, dropout=0.5, dropout_seed=99)
    m = ag.torch.graph_attention(q, k, v, g, **kw)
    m.square().sum().backward()
    # the same seed again without autograd: the same output
    with torch.no_grad():
        np.testing.assert_array_equal(ag.torch.graph_attention(q, k, v, g, **kw).numpy(),
                                      m.detach().numpy())
    # float64 finite differences of v's gradient through the same mask
    dv = v.grad.numpy()
    for (i, c) in [(0, 0), (5, 3), (17, 7)]:
        h = 1e-2
        vp, vm = v.detach().clone(), v.detach().clone()
        vp[i, c] += h
        vm[i, c] -= h
        with torch.no_grad():
            fp = ag.torch.graph_attention(q, k, vp, g, **kw).double().square().sum()
            fm = ag.torch.graph_attention(q, k, vm, g, **kw).double().square().sum()
        assert abs((fp - fm).item() / (2 * h) - dv[i, c]) < 2e-3 * max(1.0, abs(dv[i, c]))


def test_mask_depends_on_the_seed_only(rng):
    N, H, d = 400, 4, 8
    g = ag.Graph.pattern("window:32", N)
    q, k, v, _ = inputs(rng, N, H, d, "scaled-dot", {})
    kw = dict(heads=H, dropout=0.3, dropout_seed=5)
    one = (ag.set_threads(1), ag.attention(g, q, k, v, **kw),
           ag.attention_backward(g, q, k, v, v, **kw).dq)
    two = (ag.set_threads(2), ag.attention(g, q, k, v, **kw),
           ag.attention_backward(g, q, k, v, v, **kw).dq)
    ag.set_threads(0)
    np.testing.assert_array_equal(one[1], two[1])
    np.testing.assert_array_equal(one[2], two[2])
    other = ag.attention(g, q, k, v, heads=H, dropout=0.3, dropout_seed=6)
    assert not np.array_equal(other, one[1])
    # p = 0 is no dropout, to the bit, whatever the seed (and the fused kernel runs it)
    np.testing.assert_array_equal(ag.attention(g, q, k, v, heads=H, dropout=0.0, dropout_seed=3),
                                  ag.attention(g, q, k, v, heads=H))


@pytest.mark.parametrize("p", [0.1, 0.6])
def test_keep_rate_within_three_sigma(rng, p):
    N, H = 2000, 4
    g = ag.Graph.pattern("window:16", N)
    q, k, _, _ = inputs(rng, N, H, 4, "scaled-dot", {})
    W = ag.attention_weights(g, q, k, heads=H, dropout=p, dropout_seed=2024)
    n = W.size
    kept = (W != 0).sum()
    assert abs(kept - n * (1 - p)) < 3 * np.sqrt(n * p * (1 - p)), (kept, n)
    # each head draws its own mask
    assert not np.array_equal(W[:, 0] != 0, W[:, 1] != 0)


@pytest.mark.parametrize("p", [-0.1, 1.0, float("nan")])
def test_refuses_a_probability_outside_zero_one(rng, p):
    g = ag.Graph.pattern("causal", 4)
    x = np.ones((4, 2), np.float32)
    with pytest.raises(ag.Error, match="dropout"):
        ag.attention(g, x, x, x, dropout=p)


# ---- dropout on features (attngraph.dropout, attngraph.torch.dropout)

def test_feature_dropout_keeps_or_scales_each_element_at_rate(rng):
    x = rng.standard_normal((700, 301)).astype(np.float32) + 5   # no zeros of its own
    for p in (0.1, 0.6):
        y = ag.dropout(x, p, seed=11)
        kept = y != 0
        np.testing.assert_allclose(y[kept], x[kept] / (1 - p), rtol=1e-6)
        n = x.size
        assert abs(kept.sum() - n * (1 - p)) < 3 * np.sqrt(n * p * (1 - p))
        # rows and columns draw apart: no row, no column is a copy of the next
        assert not np.array_equal(kept[0], kept[1])
        assert not np.array_equal(kept[:, 0], kept[:, 1])
    np.testing.assert_array_equal(ag.dropout(x, 0.0, seed=1), x)


def test_feature_dropout_is_a_function_of_seed_row_and_column(rng):
    x = rng.standard_normal((300, 50)).astype(np.float32) + 5
    whole = ag.dropout(x, 0.5, seed=3)
    # a process holding rows 100..199 draws what the whole draws for them
    np.testing.assert_array_equal(ag.dropout(x[100:200], 0.5, seed=3, first_row=100),
                                  whole[100:200])
    ag.set_threads(1)
    one = ag.dropout(x, 0.5, seed=3)
    ag.set_threads(0)
    np.testing.assert_array_equal(one, whole)
    assert not np.array_equal(ag.dropout(x, 0.5, seed=4), whole)
    y = x.copy()
    ag.dropout(y, 0.5, seed=3, out=y)                  # in place
    np.testing.assert_array_equal(y, whole)


def test_torch_dropout_gradient_is_the_same_mask(rng):
    x = torch.tensor(rng.standard_normal((40, 30)) + 5, dtype=torch.float32, requires_grad=True)
    torch.manual_seed(0)
    y = ag.torch.dropout(x, 0.3)
    g = torch.tensor(rng.standard_normal((40, 30)), dtype=torch.float32)
    (y * g).sum().backward()
    scale = (y / x).detach()                           # 0 or 1/(1-p) per element
    np.testing.assert_allclose(x.grad.numpy(), (g * scale).numpy(), rtol=1e-6)
    torch.manual_seed(0)
    np.testing.assert_array_equal(ag.torch.dropout(x, 0.3).detach().numpy(), y.detach().numpy())
    assert ag.torch.dropout(x, 0.3, training=False) is x


@pytest.mark.parametrize("p", [-0.5, 1.0, float("inf")])
def test_feature_dropout_refuses_a_bad_probability(p):
    with pytest.raises(ag.Error, match=r"\bp\b"):
        ag.dropout(np.ones((2, 2), np.float32), p, seed=0)
