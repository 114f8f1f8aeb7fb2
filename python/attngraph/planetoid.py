"""The Planetoid citation datasets (Cora, CiteSeer, PubMed; Yang et al. 2016) as
the arrays the command line reads.

A dataset NAME in folder ROOT is the files ind.NAME.{x,tx,allx,y,ty,ally,graph}
(Python 2 pickles: scipy CSR matrices of features, numpy one-hot labels, a dict
of adjacency lists) and ind.NAME.test.index (one node a line). They come from
github.com/kimiyoung/planetoid (data/), MIT license; docs/python.md says more.

    python3 -m attngraph.planetoid ROOT NAME OUT

writes OUT/indptr.npy and OUT/indices.npy (an in-neighbour CSR: --csr
OUT/indptr.npy,OUT/indices.npy), features.npy [N, F] float32, labels.npy [N]
int64 (-1: a node without a label), and train_mask.npy, val_mask.npy,
test_mask.npy [N] bool: the split of Kipf and Welling, as PyTorch Geometric's
Planetoid(split="public") builds it (the labelled training rows, the 500 nodes
after them, the test index; the graph's edges from each node to each node of
its list, both ends of a citation, without self-loops or duplicates); and
features_normalized.npy, each row divided by its sum (GAT's input).

The pickles are read by an unpickler that builds only the types such a file
holds (numpy arrays, the CSR matrix's fields, a dict of lists): anything else
is refused before it is built, so a file cannot run code, and scipy is not
needed.
"""
import collections
import os
import pickle
import sys

import numpy as np

from .graph import Graph

__all__ = ["Planetoid", "load_planetoid", "save_planetoid", "PlanetoidError"]


class PlanetoidError(ValueError):
    """A dataset file that is missing, of another type, or inconsistent."""


class _CSR:
    """What a pickled scipy.sparse.csr_matrix holds: its fields, not scipy."""

    def __setstate__(self, state):
        self.state = state


_ALLOWED = {
    ("numpy", "dtype"): np.dtype,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy.core.multiarray", "_reconstruct"): np.core.multiarray._reconstruct,
    ("scipy.sparse.csr", "csr_matrix"): _CSR,
    ("scipy.sparse._csr", "csr_matrix"): _CSR,
    ("collections", "defaultdict"): collections.defaultdict,
    ("__builtin__", "list"): list,
    ("builtins", "list"): list,
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, path):
        super().__init__(f, encoding="latin1")   # Python 2's str: numpy's raw bytes
        self.path = path

    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise PlanetoidError(f"{self.path}: holds a {module}.{name}; a Planetoid file "
                                 "holds only numpy arrays, a scipy CSR matrix or a dict "
                                 "of lists") from None


def _read(root, name, part):
    path = os.path.join(root, f"ind.{name}.{part}")
    try:
        with open(path, "rb") as f:
            return _Unpickler(f, path).load(), path
    except OSError as e:
        raise PlanetoidError(f"{path}: {e.strerror}") from None
    except PlanetoidError:
        raise
    except Exception as e:   # a damaged or truncated pickle
        raise PlanetoidError(f"{path}: not a readable pickle ({e})") from None


def _dense(obj, path):
    """A CSR matrix's fields (or a dense array) as float32 [rows, cols]."""
    if isinstance(obj, np.ndarray) and obj.ndim == 2:
        return obj.astype(np.float32)
    if not isinstance(obj, _CSR) or not isinstance(obj.state, dict):
        raise PlanetoidError(f"{path}: expected a CSR matrix or a 2-d array, found "
                             f"{type(obj).__name__}")
    st = obj.state
    try:
        rows, cols = (int(n) for n in st["_shape"])
        data, indices, indptr = (np.asarray(st[k]) for k in ("data", "indices", "indptr"))
    except (KeyError, TypeError, ValueError):
        raise PlanetoidError(f"{path}: a CSR matrix without its shape, data, indices and "
                             "indptr") from None
    if (rows < 0 or cols < 0 or indptr.shape != (rows + 1,) or indptr[0] != 0
            or np.any(np.diff(indptr) < 0) or indptr[-1] != len(indices)
            or len(data) != len(indices) or (len(indices) and
                                             (indices.min() < 0 or indices.max() >= cols))):
        raise PlanetoidError(f"{path}: an inconsistent CSR matrix of shape {rows} x {cols}")
    out = np.zeros((rows, cols), dtype=np.float32)
    row_of = np.repeat(np.arange(rows), np.diff(indptr))
    np.add.at(out, (row_of, indices.astype(np.int64)), data.astype(np.float32))
    return out


def _one_hot(obj, path, classes=None):
    """One-hot rows [n, C] as class numbers (-1 for a row of zeros)."""
    if not isinstance(obj, np.ndarray) or obj.ndim != 2:
        raise PlanetoidError(f"{path}: expected a 2-d array of one-hot labels, found "
                             f"{type(obj).__name__}")
    if classes is not None and obj.shape[1] != classes:
        raise PlanetoidError(f"{path}: {obj.shape[1]} classes, the other label files "
                             f"{classes}")
    y = obj.argmax(axis=1).astype(np.int64) if obj.shape[1] else np.zeros(len(obj), np.int64)
    y[~obj.any(axis=1)] = -1
    return y


class Planetoid:
    """One dataset: edge_index [2, E] (row 0 sources, row 1 targets, sorted),
    x [N, F] float32, y [N] int64 (-1: no label), and train_mask, val_mask,
    test_mask [N] bool."""

    def __init__(self, name, edge_index, x, y, train_mask, val_mask, test_mask):
        self.name, self.edge_index, self.x, self.y = name, edge_index, x, y
        self.train_mask, self.val_mask, self.test_mask = train_mask, val_mask, test_mask

    @property
    def num_nodes(self):
        return len(self.y)

    @property
    def num_classes(self):
        return int(self.y.max()) + 1

    def graph(self):
        """The edges as a Graph (in edge_index's order)."""
        return Graph.from_edge_index(self.edge_index, self.num_nodes)

    def __repr__(self):
        return (f"Planetoid({self.name}: {self.num_nodes} nodes, {self.edge_index.shape[1]} "
                f"edges, {self.x.shape[1]} features, {self.num_classes} classes, "
                f"{int(self.train_mask.sum())}/{int(self.val_mask.sum())}/"
                f"{int(self.test_mask.sum())} train/val/test)")


def load_planetoid(root, name):
    """Reads dataset `name` (cora, citeseer, pubmed, or another of that layout)
    from folder `root` into a Planetoid; a file missing, of another type or
    inconsistent with the others raises PlanetoidError naming it."""
    x, px = _read(root, name, "x")
    tx, ptx = _read(root, name, "tx")
    allx, pallx = _read(root, name, "allx")
    y, py = _read(root, name, "y")
    ty, pty = _read(root, name, "ty")
    ally, pally = _read(root, name, "ally")
    graph, pgraph = _read(root, name, "graph")
    ptest = os.path.join(root, f"ind.{name}.test.index")
    try:
        with open(ptest) as f:
            test_index = np.array([int(line) for line in f if line.strip()], dtype=np.int64)
    except OSError as e:
        raise PlanetoidError(f"{ptest}: {e.strerror}") from None
    except ValueError as e:
        raise PlanetoidError(f"{ptest}: expected one node number a line ({e})") from None

    x, tx, allx = _dense(x, px), _dense(tx, ptx), _dense(allx, pallx)
    ally_c = _one_hot(ally, pally)
    classes = ally.shape[1]
    y_c, ty_c = _one_hot(y, py, classes), _one_hot(ty, pty, classes)
    n_train, n_all = len(y_c), len(allx)
    for arr, path in ((x, px), (tx, ptx)):
        if arr.shape[1] != allx.shape[1]:
            raise PlanetoidError(f"{path}: {arr.shape[1]} features, {pallx} has "
                                 f"{allx.shape[1]}")
    if len(x) != n_train or len(ally_c) != n_all or len(tx) != len(ty_c):
        raise PlanetoidError(f"{root}: rows do not match: x {len(x)}, y {n_train}, allx "
                             f"{n_all}, ally {len(ally_c)}, tx {len(tx)}, ty {len(ty_c)}")
    if len(test_index) != len(tx) or len(np.unique(test_index)) != len(test_index):
        raise PlanetoidError(f"{ptest}: {len(test_index)} nodes"
                             f"{'' if len(np.unique(test_index)) == len(test_index) else ' with repeats'}, "
                             f"expected the {len(tx)} distinct test nodes of {ptx}")
    if len(test_index) and test_index.min() < n_all:
        raise PlanetoidError(f"{ptest}: node {test_index.min()} is among allx's {n_all} rows")
    if n_train + 500 > n_all:
        raise PlanetoidError(f"{pallx}: {n_all} rows, fewer than the {n_train} training "
                             "nodes and 500 validation nodes after them")
    # the test nodes follow allx's rows; ids the index skips (CiteSeer's isolated
    # nodes) get zero features and no label, as PyG's reader gives them
    n = max(n_all, int(test_index.max()) + 1 if len(test_index) else 0)
    feats = np.zeros((n, allx.shape[1]), dtype=np.float32)
    labels = np.full(n, -1, dtype=np.int64)
    feats[:n_all], labels[:n_all] = allx, ally_c
    feats[test_index], labels[test_index] = tx, ty_c   # tx's row r is node test_index[r]

    if not isinstance(graph, dict):
        raise PlanetoidError(f"{pgraph}: expected a dict of adjacency lists, found "
                             f"{type(graph).__name__}")
    src, dst = [], []
    for node, nbrs in graph.items():
        if not isinstance(nbrs, list) or not all(isinstance(v, int) for v in nbrs) \
                or not isinstance(node, int):
            raise PlanetoidError(f"{pgraph}: node {node!r}: expected an int and a list of "
                                 "ints")
        src.extend([node] * len(nbrs))
        dst.extend(nbrs)
    src, dst = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise PlanetoidError(f"{pgraph}: node {max(src.max(), dst.max())} outside the "
                             f"{n} nodes the features have")
    # node -> each of its list, as PyG reads it (the lists name each citation
    # from both ends), without self-loops or duplicates, sorted
    keep = src != dst
    edge_index = np.unique(np.stack([src[keep], dst[keep]]), axis=1)

    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    masks[0][:n_train] = True
    masks[1][n_train:n_train + 500] = True
    masks[2][test_index] = True
    return Planetoid(name, edge_index, feats, labels, *masks)


def save_planetoid(data, out):
    """Writes a Planetoid as the files the command line reads (module comment)."""
    os.makedirs(out, exist_ok=True)
    data.graph().save_csr(os.path.join(out, "indptr.npy"), os.path.join(out, "indices.npy"))
    arrays = {"features": data.x, "labels": data.y, "train_mask": data.train_mask,
              "val_mask": data.val_mask, "test_mask": data.test_mask}
    # each row divided by its sum (at least 1), as GAT's paper and PyG's
    # NormalizeFeatures feed them to the model
    sums = data.x.sum(axis=1, keepdims=True, dtype=np.float64)
    arrays["features_normalized"] = (data.x / np.maximum(sums, 1.0)).astype(np.float32)
    for name, arr in arrays.items():
        np.save(os.path.join(out, name + ".npy"), arr)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    asked = len(argv) == 1 and argv[0] in ("-h", "--help")
    if len(argv) != 3:
        print("usage: python3 -m attngraph.planetoid ROOT NAME OUT\n"
              "Reads ROOT/ind.NAME.* (a Planetoid dataset: cora, citeseer, pubmed) and "
              "writes OUT/indptr.npy, indices.npy,\nfeatures.npy, labels.npy, "
              "train_mask.npy, val_mask.npy, test_mask.npy, and\nfeatures_normalized.npy "
              "(each row divided by its sum, as GAT's paper feeds them).",
              file=sys.stdout if asked else sys.stderr)
        return 0 if asked else 2
    root, name, out = argv
    try:
        data = load_planetoid(root, name)
    except PlanetoidError as e:
        print(f"attngraph.planetoid: {e}", file=sys.stderr)
        return 1
    save_planetoid(data, out)
    print(data)
    print(f"train: attngraph train --csr {out}/indptr.npy,{out}/indices.npy --features "
          f"{out}/features.npy --labels {out}/labels.npy --train-mask {out}/train_mask.npy "
          f"--eval-mask {out}/val_mask.npy --test-mask {out}/test_mask.npy")
    print(f"GAT:   attngraph train --csr {out}/indptr.npy,{out}/indices.npy --features "
          f"{out}/features_normalized.npy --labels {out}/labels.npy --train-mask "
          f"{out}/train_mask.npy --eval-mask {out}/val_mask.npy --test-mask "
          f"{out}/test_mask.npy --model models/gat-cora.txt --lr 0.005 --weight-decay 5e-4 "
          f"--epochs 300")
    return 0


if __name__ == "__main__":
    sys.exit(main())
