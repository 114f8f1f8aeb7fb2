"""Benchmark archives (.npz) through the command line and Python: the graph
format, `train --data --split`, and its ROC AUC against a pairwise count
written here (the chance that a positive outscores a negative)."""
import csv
import os
import subprocess

import numpy as np
import pytest

import attngraph as ag
from conftest import CLI, ROOT

SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data", "heterophilous")


def tiny_archive(path, n=80, seed=0):
    """A two-class task on n nodes: Platonov et al.'s layout, three splits."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, n, size=(3 * n, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    x = rng.standard_normal((n, 5)).astype(np.float32)
    y = (x[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(np.int64)
    perm = np.stack([rng.permutation(n) for _ in range(3)])
    masks = [np.zeros((3, n), bool) for _ in range(3)]
    for s in range(3):
        for k, part in enumerate(np.array_split(perm[s], [n // 2, 3 * n // 4])):
            masks[k][s, part] = True
    np.savez_compressed(path, node_features=x, node_labels=y, edges=edges,
                        train_masks=masks[0], val_masks=masks[1], test_masks=masks[2])
    return x, y, edges, masks


def pairwise_auc(score, y):
    pos, neg = score[y == 1], score[y == 0]
    d = pos[:, None] - neg[None, :]
    return ((d > 0).sum() + 0.5 * (d == 0).sum()) / d.size


def test_the_graph_is_the_edges_both_ways(tmp_path):
    path = str(tmp_path / "t.npz")
    _, _, edges, _ = tiny_archive(path)
    g = ag.Graph.load(path)
    want = {(int(a), int(b)) for a, b in edges} | {(int(b), int(a)) for a, b in edges}
    got = set(zip(g.src.tolist(), g.dst.tolist()))
    assert got == want and g.E == 2 * len(edges)


def test_train_data_split_reports_the_roc_auc_of_its_model(tmp_path):
    path = str(tmp_path / "t.npz")
    x, y, _, masks = tiny_archive(path)
    save, log = str(tmp_path / "m"), str(tmp_path / "log.csv")
    r = subprocess.run([CLI, "train", "--data", path, "--split", "2", "--epochs", "6",
                        "--heads", "1", "--save", save, "--log", log],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "test ROC AUC" in r.stdout and "eval_auc" in r.stdout
    rows = list(csv.DictReader(open(log)))
    last = rows[-1]
    assert last["epoch"] == "6" and last["test_accuracy"] != ""
    # the saved (last) model's logits, scored here on split 2's masks
    logits = ag.Model.load(save).run(ag.Graph.load(path), x)
    score = logits[:, 1] - logits[:, 0]
    for name, mask in (("train_auc", masks[0][2]), ("eval_auc", masks[1][2]),
                       ("test_auc", masks[2][2])):
        assert abs(float(last[name]) - pairwise_auc(score[mask], y[mask])) < 1e-6, name
    # the best epoch is the one of the best eval AUC
    best = max(rows, key=lambda row: (float(row["eval_auc"]), -int(row["epoch"])))
    assert "best eval ROC AUC %.2f at epoch %s" % (100 * float(best["eval_auc"]),
                                                   best["epoch"]) in r.stdout


def test_mistakes_name_the_value(tmp_path):
    path = str(tmp_path / "t.npz")
    tiny_archive(path)
    def fails(*args):
        r = subprocess.run([CLI, "train", *args], capture_output=True, text=True)
        assert r.returncode != 0
        return r.stderr
    assert "--split 3 is not one of 0..2" in fails("--data", path, "--split", "3")
    assert "has no member 'labels'" in fails("--data", path, "--labels", path + ":labels")
    assert "--metric auc is for two classes" in fails(
        "--data", path, "--metric", "auc", "--targets", path + ":node_features")
    assert "--data %s is the graph" % path in fails("--data", path, path)
    np.save(str(tmp_path / "m.npy"), np.ones(80, bool))
    assert "--split 1 chooses a row" in fails("--data", path, "--split", "1", "--train-mask",
                                              str(tmp_path / "m.npy"))


@pytest.mark.skipif(not os.path.exists(os.path.join(SHARED, "minesweeper.npz")),
                    reason="../shared/data/heterophilous is not here")
def test_the_real_archives_read_as_numpy_reads_them():
    for name in ("minesweeper", "tolokers"):
        path = os.path.join(SHARED, name + ".npz")
        d = np.load(path)
        g = ag.Graph.load(path)
        assert g.N == len(d["node_labels"]) and g.E == 2 * len(d["edges"])
        e = d["edges"]
        assert set(zip(g.src[:200].tolist(), g.dst[:200].tolist())) <= (
            set(zip(e[:, 0].tolist(), e[:, 1].tolist())) | set(zip(e[:, 1].tolist(), e[:, 0].tolist())))
