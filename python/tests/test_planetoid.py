"""attngraph.planetoid: Cora's known sizes (when ../shared/data/planetoid is
there), a small dataset of the same layout written here (pickles of a
stand-in scipy CSR class, test nodes out of order, a gap in their ids, a
self-loop and a repeated edge), and the files it must refuse."""
import collections
import os
import pickle
import sys
import types

import numpy as np
import pytest

from attngraph import planetoid as pl

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "planetoid")


@pytest.mark.skipif(not os.path.exists(os.path.join(SHARED, "ind.cora.graph")),
                    reason="../shared/data/planetoid is not here")
def test_cora_known_sizes(tmp_path):
    d = pl.load_planetoid(SHARED, "cora")
    assert d.x.shape == (2708, 1433) and d.x.dtype == np.float32
    assert set(np.unique(d.x)) == {0.0, 1.0}            # a bag of words
    assert d.edge_index.shape == (2, 10556)             # PyG's count
    src, dst = d.edge_index
    assert not np.any(src == dst)
    pairs = set(zip(src.tolist(), dst.tolist()))
    assert len(pairs) == 10556 and all((b, a) in pairs for a, b in pairs)   # both ends
    assert d.num_classes == 7
    # the class sizes of Cora's 2,708 papers (Sen et al. 2008, as PyG reports them)
    assert np.bincount(d.y).tolist() == [351, 217, 418, 818, 426, 298, 180]
    assert [int(m.sum()) for m in (d.train_mask, d.val_mask, d.test_mask)] == [140, 500, 1000]
    assert not np.any(d.train_mask & d.val_mask) and not np.any(d.val_mask & d.test_mask)
    assert np.flatnonzero(d.test_mask).min() == 1708
    # the command writes what the CLI reads, and the CSR is the edge list
    assert pl.main([SHARED, "cora", str(tmp_path)]) == 0
    indptr, indices = np.load(tmp_path / "indptr.npy"), np.load(tmp_path / "indices.npy")
    got = {(int(j), i) for i in range(2708) for j in indices[indptr[i]:indptr[i + 1]]}
    assert got == pairs
    assert np.array_equal(np.load(tmp_path / "labels.npy"), d.y)
    # GAT's input: each row divided by its word count (rows of Cora all have words)
    xn = np.load(tmp_path / "features_normalized.npy")
    assert xn.dtype == np.float32 and xn.shape == d.x.shape
    np.testing.assert_allclose(xn.sum(1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(xn * d.x.sum(1, keepdims=True), d.x, rtol=1e-5, atol=1e-6)


class _FakeScipy:
    """Pickles an object of class scipy.sparse.csr.csr_matrix (no scipy needed):
    protocol 3 writes its class by name and its fields as the state."""

    def __init__(self, monkeypatch):
        names = ["scipy", "scipy.sparse", "scipy.sparse.csr"]
        mods = {n: types.ModuleType(n) for n in names}
        cls = type("csr_matrix", (), {})
        cls.__module__, cls.__qualname__ = "scipy.sparse.csr", "csr_matrix"
        mods["scipy.sparse.csr"].csr_matrix = cls
        for n, m in mods.items():
            monkeypatch.setitem(sys.modules, n, m)
        self.cls = cls

    def csr(self, dense):
        rows, cols = np.nonzero(dense)
        m = self.cls()
        m.__dict__.update({"_shape": dense.shape, "data": dense[rows, cols].astype(np.float32),
                           "indices": cols.astype(np.int32),
                           "indptr": np.concatenate([[0], np.cumsum(np.bincount(
                               rows, minlength=dense.shape[0]))]).astype(np.int32),
                           "maxprint": 50})
        return m


def _feature(node, F=5):
    """Node n's features: its id in the first column, a 1 in column n % F - 1."""
    f = np.zeros(F, dtype=np.float32)
    f[0], f[1 + node % (F - 1)] = node, 1
    return f


def _write(root, name, parts):
    for part, obj in parts.items():
        mode = "w" if part == "test.index" else "wb"
        with open(os.path.join(root, f"ind.{name}.{part}"), mode) as f:
            if part == "test.index":
                f.write("".join(f"{i}\n" for i in obj))
            else:
                pickle.dump(obj, f, protocol=3)


def _small(tmp_path, monkeypatch):
    """510 nodes in allx (3 labelled), test nodes 510..515 but 513, out of order."""
    fake, C = _FakeScipy(monkeypatch), 3
    n_all, test = 510, [514, 510, 512, 515, 511]
    onehot = lambda nodes: np.eye(C)[[n % C for n in nodes]]
    graph = collections.defaultdict(list)
    for a in range(516):   # a ring without node 513
        graph[a] += [b % 516 for b in (a + 1, a - 1) if 513 not in (a, b % 516)]
    graph[7] += [7, 8]                      # a self-loop and a repeat: dropped
    parts = {"x": fake.csr(np.stack([_feature(n) for n in range(3)])),
             "allx": fake.csr(np.stack([_feature(n) for n in range(n_all)])),
             "tx": fake.csr(np.stack([_feature(n) for n in test])),
             "y": onehot(range(3)), "ally": onehot(range(n_all)), "ty": onehot(test),
             "graph": graph, "test.index": test}
    _write(tmp_path, "tiny", parts)
    return parts


def test_small_layout(tmp_path, monkeypatch):
    _small(tmp_path, monkeypatch)
    d = pl.load_planetoid(str(tmp_path), "tiny")
    assert d.num_nodes == 516 and d.x.shape == (516, 5)
    for n in range(516):   # each node its own row: tx's row r is node test.index's line r
        want = np.zeros(5) if n == 513 else _feature(n)
        assert np.array_equal(d.x[n], want), n
    assert d.y[513] == -1 and all(d.y[n] == n % 3 for n in range(516) if n != 513)
    assert np.flatnonzero(d.train_mask).tolist() == [0, 1, 2]
    assert np.flatnonzero(d.val_mask).tolist() == list(range(3, 503))
    assert np.flatnonzero(d.test_mask).tolist() == [510, 511, 512, 514, 515]
    src, dst = d.edge_index
    pairs = list(zip(src.tolist(), dst.tolist()))
    assert pairs == sorted(pairs) and len(pairs) == len(set(pairs))
    assert (7, 7) not in pairs and (7, 8) in pairs and not any(513 in p for p in pairs)
    assert len(pairs) == 2 * 515 - 2      # the ring broken at 513


def test_refuses_other_types(tmp_path, monkeypatch):
    parts = _small(tmp_path, monkeypatch)
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    _write(tmp_path, "tiny", {"tx": Evil()})
    with pytest.raises(pl.PlanetoidError, match=r"ind\.tiny\.tx: holds a (posix|os)\.system"):
        pl.load_planetoid(str(tmp_path), "tiny")
    assert not marker.exists()
    _write(tmp_path, "tiny", {"tx": parts["tx"], "ally": {"not": "labels"}})
    with pytest.raises(pl.PlanetoidError, match=r"ind\.tiny\.ally: expected a 2-d array"):
        pl.load_planetoid(str(tmp_path), "tiny")
    _write(tmp_path, "tiny", {"ally": parts["ally"], "graph": [1, 2]})
    with pytest.raises(pl.PlanetoidError, match=r"ind\.tiny\.graph: expected a dict"):
        pl.load_planetoid(str(tmp_path), "tiny")
    _write(tmp_path, "tiny", {"graph": parts["graph"], "test.index": [514, 510, 512, 515]})
    with pytest.raises(pl.PlanetoidError, match=r"test\.index: 4 nodes, expected the 5"):
        pl.load_planetoid(str(tmp_path), "tiny")
    (tmp_path / "ind.tiny.test.index").write_text("514\n510\n512\n515\n511\n")
    (tmp_path / "ind.tiny.y").write_bytes(b"\x80\x03garbage")
    with pytest.raises(pl.PlanetoidError, match=r"ind\.tiny\.y: not a readable pickle"):
        pl.load_planetoid(str(tmp_path), "tiny")
    with pytest.raises(pl.PlanetoidError, match=r"ind\.nope\.x: No such file"):
        pl.load_planetoid(str(tmp_path), "nope")


def test_command_errors(tmp_path, capsys):
    assert pl.main([str(tmp_path), "cora", str(tmp_path / "out")]) == 1
    assert "ind.cora.x: No such file" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert pl.main(["only-one"]) == 2
    assert "usage:" in capsys.readouterr().err
    assert pl.main(["--help"]) == 0
    assert "usage:" in capsys.readouterr().out
