"""The pattern language over a loaded graph from Python: Graph.pattern(spec,
graph=g) and Graph.union, against dense numpy references written from
docs/patterns.md, and attention on such a pattern against a masked dense
softmax."""
import os
import pickle

import numpy as np
import pytest

import attngraph as ag
from conftest import ROOT

KARATE = os.path.join(ROOT, "graphs", "karate.gml")


def dense(g):
    """g's messages as a 0/1 matrix adj[i, j] (j -> i)."""
    adj = np.zeros((g.N, g.N), np.int64)
    np.add.at(adj, (g.dst, g.src), 1)
    return adj


def multigraph(n=17, E=60, seed=0):
    """A directed graph with self-loops and repeated edges."""
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, size=(2, E))
    ei[:, 5:10] = ei[:, 0:5]
    return ag.Graph.from_edge_index(ei, num_nodes=n), ei


def test_graph_is_the_graphs_edges_each_once():
    g, ei = multigraph()
    want = np.zeros((g.N, g.N), np.int64)
    want[ei[1], ei[0]] = 1
    assert (dense(ag.Graph.pattern("graph", graph=g)) == want).all()
    np.fill_diagonal(want, 0)
    assert (dense(ag.Graph.pattern("graph&!self", graph=g)) == want).all()


@pytest.mark.parametrize("k", [1, 2, 3])
def test_hops_are_the_powers_of_the_adjacency(k):
    g = ag.Graph.load(KARATE)
    a = (dense(g) > 0).astype(np.int64)
    reach, step = a.copy(), a.copy()
    for _ in range(k - 1):
        step = (step @ a > 0).astype(np.int64)   # paths one edge longer
        reach |= step
    h = ag.Graph.pattern("hops:%d" % k, graph=g)
    assert (dense(h) == reach).all()
    assert h.labels == g.labels


def test_virtual_nodes_are_appended_and_linked_to_all():
    g = ag.Graph.load(KARATE)
    v = ag.Graph.pattern("graph+virtual:2", graph=g)
    assert (v.N, v.n_virtual) == (36, 2)
    assert v.labels[:34] == g.labels and v.labels[34:] == ["virtual0", "virtual1"]
    want = np.ones((36, 36), np.int64)
    want[:34, :34] = dense(g) > 0
    assert (dense(v) == want).all()
    # a pattern with no graph: n counts the nodes before the virtual ones
    c = ag.Graph.pattern("causal+virtual:1", n=5)
    assert c.N == 6 and c.E == 15 + 5 + 6
    assert pickle.loads(pickle.dumps(v)).n_virtual == 2


def test_expander_is_symmetric_and_seeded():
    a = dense(ag.Graph.pattern("expander:3", n=100))
    assert (a == a.T).all()
    assert 1 <= a.sum(1).min() and a.sum(1).max() <= 6
    assert (a == dense(ag.Graph.pattern("expander:3,0", n=100))).all()
    assert (a != dense(ag.Graph.pattern("expander:3,1", n=100))).any()


def test_union_is_the_set_of_both_graphs_messages():
    g, ei = multigraph(seed=1)
    h, ej = multigraph(seed=2)
    u = g.union(h, ag.Graph.pattern("window:2", n=g.N))
    want = np.zeros((g.N, g.N), np.int64)
    want[ei[1], ei[0]] = 1
    want[ej[1], ej[0]] = 1
    i, j = np.indices(want.shape)
    want[(i - 2 < j) & (j <= i)] = 1
    assert (dense(u) == want).all()
    # the pattern's '+' over the graph gives the same messages
    k = ag.Graph.load(KARATE)
    e = ag.Graph.pattern("expander:3", n=k.N)
    assert np.array_equal(k.union(e).csr()[1], ag.Graph.pattern("graph+expander:3", graph=k).csr()[1])
    assert k.union(e).labels == k.labels


def test_attention_over_graph_plus_virtual_matches_a_masked_softmax():
    g = ag.Graph.load(KARATE)
    v = ag.Graph.pattern("graph+virtual:1", graph=g)
    rng = np.random.default_rng(3)
    q, k_, x = (rng.standard_normal((v.N, 8)).astype(np.float32) for _ in range(3))
    out = ag.attention(v, q, k_, x, heads=1)
    mask = dense(v) > 0
    s = (q.astype(np.float64) @ k_.T.astype(np.float64)) / np.sqrt(8)
    s[~mask] = -np.inf
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    assert np.abs(out - w @ x.astype(np.float64)).max() < 1e-5


def test_refusals_name_the_value():
    g = ag.Graph.load(KARATE)
    with pytest.raises(ag.Error, match="'graph' reads a graph, and none was given"):
        ag.Graph.pattern("graph", n=5)
    with pytest.raises(ag.Error, match="graph=list: expected an attngraph.Graph"):
        ag.Graph.pattern("graph", graph=[1, 2])
    with pytest.raises(ag.Error, match="'expander:20' draws 40 sources a node"):
        ag.Graph.pattern("graph+expander:20", graph=g)
    with pytest.raises(ag.Error, match="virtual:V needs V >= 1"):
        ag.Graph.pattern("graph+virtual:0", graph=g)
    with pytest.raises(ag.Error, match="'graph' covers 34 nodes, but there are 30"):
        ag.Graph.pattern("graph", graph=g, n=30)
    with pytest.raises(ag.Error, match="union of a graph of 5 nodes with one of 34"):
        g.union(ag.Graph.pattern("causal", n=5))
    with pytest.raises(ag.Error, match="union of a int"):
        g.union(3)
