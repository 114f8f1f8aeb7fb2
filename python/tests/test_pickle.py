"""Graph survives pickle and copy.deepcopy (DataLoader workers, multiprocessing
pools, deep-copied models): rebuilt from its arrays, the copy gives bitwise the
same attention, per-edge weights, edge order and per-edge attributes, and owns
its own memory."""
import copy
import gc
import io
import multiprocessing
import pickle

import numpy as np
import pytest

import attngraph as ag
from conftest import random_edge_index, ROOT

H, D = 2, 3


def features(N, seed=5):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((N, H * D)).astype(np.float32) for _ in range(3))
    a_src, a_dst = (rng.standard_normal((H, D)).astype(np.float32) for _ in range(2))
    return q, k, v, dict(score="additive", a_src=a_src, a_dst=a_dst)


def outputs(g):
    """Everything per node and per edge the graph decides, in edge order."""
    q, k, v, gat = features(g.N)
    return dict(m=ag.attention(g, q, k, v, heads=H), gat=ag.attention(g, q, k, v, heads=H, **gat),
                w=ag.attention_weights(g, q, k, heads=H),
                w_gat=ag.attention_weights(g, q, k, heads=H, **gat),
                edge_index=g.edge_index, edge_ids=g.edge_ids, in_degree=g.in_degree())


def make_file(tmp_path):
    """A GML file with labels, a numeric edge attribute, multi-edges and two
    self-loops on one node; self-loops replaced (added loops last, id -1)."""
    edges = [(0, 1, 0.5), (1, 1, -1.0), (2, 0, 2.0), (0, 1, 1.5), (1, 1, 0.25), (3, 2, -0.5)]
    text = "graph [ directed 1\n" + "".join('node [ id %d label "n%d" ]\n' % (i, i)
                                            for i in range(5)) + \
        "".join("edge [ source %d target %d w %g ]\n" % e for e in edges) + "]\n"
    (tmp_path / "g.gml").write_text(text)
    return ag.Graph.load(str(tmp_path / "g.gml"), self_loops="replace", edge_attrs=["w"])


def make_pattern(tmp_path):
    return ag.Graph.pattern("window:3+global:1", 12, labels=["t%d" % i for i in range(12)])


def make_edge_index(tmp_path):
    ei = random_edge_index(np.random.default_rng(3), 14, 50)
    return ag.Graph.from_edge_index(ei, 14, self_loops="on")


def make_csr(tmp_path):
    indptr = np.array([0, 3, 3, 5, 6, 8, 9])
    indices = np.array([5, 0, 2, 1, 1, 3, 4, 0, 5])    # unsorted rows, a multi-edge, loops
    return ag.Graph.from_csr(indptr, indices, self_loops="off")


MAKERS = [make_file, make_pattern, make_edge_index, make_csr]
COPIES = {"pickle": lambda g: pickle.loads(pickle.dumps(g)),
          "pickle-2": lambda g: pickle.loads(pickle.dumps(g, protocol=2)),
          "deepcopy": copy.deepcopy, "copy": copy.copy}


@pytest.mark.parametrize("how", COPIES)
@pytest.mark.parametrize("make", MAKERS, ids=lambda f: f.__name__[5:])
def test_copy_gives_the_same_graph(tmp_path, make, how):
    g = make(tmp_path)
    want = outputs(g)
    h = COPIES[how](g)
    assert type(h) is ag.Graph and h is not g
    assert (h.kind, h.name, h.labels, h.N, h.E) == (g.kind, g.name, g.labels, g.N, g.E)
    assert (h.self_loops, h.directed) == (g.self_loops, g.directed)   # model.args reads them
    assert h._nb.edge_ptr != g._nb.edge_ptr          # its own memory
    assert h.edge_attrs.keys() == g.edge_attrs.keys()
    for name in g.edge_attrs:
        np.testing.assert_array_equal(h.edge_attrs[name], g.edge_attrs[name])
    del g                                           # the copy outlives the original
    gc.collect()
    got = outputs(h)
    for key in want:                                # bitwise: the same runs, the same kernel
        assert got[key].dtype == want[key].dtype and np.array_equal(got[key], want[key]), key
    h2 = COPIES[how](h)                             # and a copy of a copy
    assert np.array_equal(outputs(h2)["w"], want["w"])


def test_what_the_copies_carry(tmp_path):
    g = make_file(tmp_path)
    assert g.labels == ["n%d" % i for i in range(5)]
    np.testing.assert_array_equal(g.edge_ids[-5:], -1)    # replace: the added loops last
    h = pickle.loads(pickle.dumps(g))
    np.testing.assert_array_equal(h.edge_attrs["w"], [0.5, 2.0, 1.5, -0.5, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(h.edge_ids, [0, 2, 3, 5, -1, -1, -1, -1, -1])
    # a per-edge array goes to slots and back the same way in both
    x = np.arange(h.E, dtype=np.float32)
    np.testing.assert_array_equal(h.to_slots(x), g.to_slots(x))
    np.testing.assert_array_equal(h.from_slots(h.to_slots(x)), x)


def test_copy_after_a_backward(tmp_path):
    """The original has compiled its transpose (a cache): the copy compiles its own,
    and its gradients are bitwise the original's."""
    g = make_edge_index(tmp_path)
    q, k, v, _ = features(g.N)
    dm = np.ones_like(q)
    want = ag.attention_backward(g, q, k, v, dm, heads=H)
    h = copy.deepcopy(g)
    got = ag.attention_backward(h, q, k, v, dm, heads=H)
    for name in ("dq", "dk", "dv"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name


def test_a_damaged_state_is_refused(tmp_path):
    g = make_csr(tmp_path)
    state = g.__getstate__()
    bad = dict(state, run_len=state["run_len"] + 1)
    h = object.__new__(ag.Graph)
    with pytest.raises(ag.Error, match="run_len"):
        h.__setstate__(bad)
    bad = dict(state, run_src=state["run_src"] + g.N)
    with pytest.raises(ag.Error, match="run_src"):
        object.__new__(ag.Graph).__setstate__(bad)
    with pytest.raises(ag.Error, match="version"):
        object.__new__(ag.Graph).__setstate__(dict(state, version=99))
    ids = np.array(state["edge_id"])
    ids[0] = np.iinfo(np.int64).max                 # would overflow the edge order's sums
    with pytest.raises(ag.Error, match="edge_id"):
        object.__new__(ag.Graph).__setstate__(dict(state, edge_id=ids))


def test_a_module_holding_a_graph_deep_copies(tmp_path):
    torch = pytest.importorskip("torch")
    from attngraph.torch import GraphAttention

    torch.manual_seed(0)
    layer = GraphAttention(6, heads=2, score="additive")
    layer.graph = make_file(tmp_path)
    x = torch.randn(layer.graph.N, 6)
    want = layer(x, layer.graph)
    twin = copy.deepcopy(layer)
    assert twin.graph is not layer.graph
    assert torch.equal(twin(x, twin.graph), want)
    buf = io.BytesIO()                              # torch.save pickles it too
    torch.save(layer, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert torch.equal(loaded(x, loaded.graph), want)


def _attend(g):
    """In a worker process: the attention over a graph that came pickled."""
    q, k, v, _ = features(g.N)
    return ag.attention(g, q, k, v, heads=H), g.edge_index


def test_a_pool_attends_over_a_pickled_graph(tmp_path):
    # spawn: a forked child of a process that ran OpenMP can hang (libgomp)
    g = make_csr(tmp_path)
    q, k, v, _ = features(g.N)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        (m, ei), (m2, _) = pool.map(_attend, [g, make_pattern(tmp_path)])
    assert np.array_equal(m, ag.attention(g, q, k, v, heads=H))
    np.testing.assert_array_equal(ei, g.edge_index)
    assert m2.shape == (12, H * D)
