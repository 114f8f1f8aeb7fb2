#!/usr/bin/python3
"""Writes the training examples of docs/training.md into graphs/ (run from the repository root
with Debian's python3, which has numpy and igraph: apt-get install python3-numpy
python3-igraph).

planted.gml + planted/   node classification on a planted partition: 3 communities of
                         100 nodes; features (one-hot community plus noise) are known for
                         a third of the nodes only; labels, a train mask (half the nodes)
                         and an eval mask (the other half).
copy/                    a sequence task on 1024 positions: the answer at position i is
                         the token at position i-3 (random tokens of 5 kinds). Features are
                         the token (one-hot) beside sin and cos of 2 pi i / P for periods
                         P = 7, 11, 16; labels -1 where i < 3; train and eval masks split
                         the positions at random.
karate.gml + karate/     Zachary's karate club (igraph's Famous("Zachary")); labels are the
                         two factions after the split, the features mark one member of each
                         (the instructor, node 0, and the administrator, node 33), which are
                         the only training nodes.
Every array is seeded: the files are the same on every run.
"""
import os

import igraph
import numpy as np


def save(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, array)


def write_gml(path, graph, creator):
    """Compact GML: a line per node and edge, node labels when the graph has them."""
    with open(path, "w") as f:
        f.write('Creator "%s"\ngraph [\n  directed %d\n' % (creator, graph.is_directed()))
        labels = graph.vs["label"] if "label" in graph.vs.attributes() else None
        for v in range(graph.vcount()):
            f.write('  node [ id %d%s ]\n' % (v, ' label "%s"' % labels[v] if labels else ""))
        for u, v in graph.get_edgelist():
            f.write("  edge [ source %d target %d ]\n" % (u, v))
        f.write("]\n")


def planted_partition(seed=11, communities=3, size=100, p_in=0.08, p_out=0.004, width=8):
    rng = np.random.RandomState(seed)
    n = communities * size
    label = np.repeat(np.arange(communities), size)
    edges = []
    for u in range(n):
        for v in range(u + 1, n):
            if rng.rand() < (p_in if label[u] == label[v] else p_out):
                edges.append((u, v))
    g = igraph.Graph(n=n, edges=edges, directed=False)
    known = np.zeros(n, dtype=bool)
    known[rng.choice(n, n // 3, replace=False)] = True
    x = 0.1 * rng.randn(n, width).astype(np.float32)
    x[known, label[known]] += 1.0
    train = np.zeros(n, dtype=bool)
    train[rng.choice(n, n // 2, replace=False)] = True
    write_gml("graphs/planted.gml", g, "attngraph tools/make_examples.py: a planted partition, "
              "3 communities of 100 nodes, p_in 0.08, p_out 0.004")
    save("graphs/planted/x.npy", x.astype(np.float32))
    save("graphs/planted/labels.npy", label.astype(np.int64))
    save("graphs/planted/train.npy", train)
    save("graphs/planted/eval.npy", ~train)


def positions(n, periods):
    """Sin and cos of 2 pi i / P for each period P: [n, 2 x periods]. Periods whose least
    common multiple exceeds n tell every pair of positions apart."""
    angle = 2 * np.pi * np.arange(n)[:, None] / np.array(periods, dtype=float)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)


def copy_task(seed=5, n=1024, vocab=5, lag=3, periods=(7, 11, 16)):
    rng = np.random.RandomState(seed)
    tokens = rng.randint(vocab, size=n)
    x = np.concatenate([np.eye(vocab)[tokens], positions(n, periods)], axis=1)
    labels = np.full(n, -1, dtype=np.int64)
    labels[lag:] = tokens[:-lag]
    train = np.zeros(n, dtype=bool)
    train[rng.choice(n, n // 2, replace=False)] = True
    save("graphs/copy/x.npy", x.astype(np.float32))
    save("graphs/copy/labels.npy", labels)
    save("graphs/copy/train.npy", train)
    save("graphs/copy/eval.npy", ~train)


def karate():
    g = igraph.Graph.Famous("Zachary")
    # the factions after the split (Zachary 1977; networkx's "club" attribute)
    hi = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 16, 17, 19, 21}
    n = g.vcount()
    labels = np.array([0 if v in hi else 1 for v in range(n)], dtype=np.int64)
    g.vs["label"] = ["Mr. Hi" if v == 0 else "Officer" if v == n - 1 else str(v)
                     for v in range(n)]
    x = np.zeros((n, 2), dtype=np.float32)
    x[0, 0] = 1.0
    x[n - 1, 1] = 1.0
    train = np.zeros(n, dtype=bool)
    train[[0, n - 1]] = True
    write_gml("graphs/karate.gml", g, "attngraph tools/make_examples.py: Zachary's karate "
              "club, igraph Famous('Zachary')")
    save("graphs/karate/x.npy", x)
    save("graphs/karate/labels.npy", labels)
    save("graphs/karate/train.npy", train)
    save("graphs/karate/eval.npy", ~train)


if __name__ == "__main__":
    planted_partition()
    copy_task()
    karate()
