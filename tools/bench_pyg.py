"""make bench-pyg PYG=DIR: PyTorch Geometric's own examples on PyG's layers and
on attngraph's, unchanged but for the import, one after the other in one run,
with the CPU. DIR is a checkout of PyG (tag 2.4.0: `fetch` its repository;
Debian's torch 1.13 runs it). Nothing of PyG's is copied into this tree: the
examples are read from DIR when this runs.

  gat.py        the script itself, on Cora (Planetoid reads the raw files of
                --cora, ../shared/data/planetoid, from a scratch copy)
  ppi.py        the script itself, on synthetic raw files of PPI's shape (the
                data set cannot be downloaded here): 20 + 2 + 2 graphs of about
                2,245 nodes and 61,300 messages, 50 features, 121 labels
  unimp_arxiv   the script itself, with a stand-in `ogb` module that gives
                synthetic data of ogbn-arxiv's shape (169,343 nodes, 1,166,243
                edges made two-way by the script, 128 features, 40 classes)
  products      ogbn_products_gat.py's GAT class (read from the script, which
                needs ogb's data and pyg-lib's NeighborLoader) trained on
                synthetic sampled batches of the shape NeighborLoader gives
                with its fan-outs 10, 10, 5: 512 seeds, ~48,800 nodes,
                ~187,000 edges, 100 features, 47 classes
  products-bip  the same model in its bipartite form (conv((x, x_target),
                edge_index)), PyG 2.0's script (--products-bipartite FILE,
                e.g. `git show 2.0.4:examples/ogbn_products_gat.py`), on
                NeighborSampler's per-layer bipartite graphs of the same
                sampling: 56,500 -> 35,300 -> 5,120 -> 512 nodes

An example "with attngraph's layers" is run with torch_geometric.nn's
GATConv and TransformerConv replaced by attngraph.nn's before the script
imports them: its `from torch_geometric.nn import GATConv` line then takes
ours. A script's epoch is the time between two of its consecutive "Epoch"
lines (training and its evaluations, as the script does them); the figure is
the median over --epochs epochs after the first. products' is the median
training step (an epoch of the real script is 385 of them).

    bench_pyg.py --pyg DIR [--cora DIR] [--products-bipartite FILE] [--epochs 5]
                 [--only gat,ppi,unimp,products,products-bip]
"""
import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Runs a PyG example as __main__ in this process, attngraph's layers in PyG's
# place when AG_SWAP is set: `python -c RUNNER script args...`
RUNNER = """
import os, runpy, sys
if os.environ.get("AG_SWAP"):
    import torch_geometric.nn as pyg_nn
    import attngraph.nn as ag_nn
    pyg_nn.GATConv, pyg_nn.TransformerConv = ag_nn.GATConv, ag_nn.TransformerConv
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""

# A stand-in for ogb.nodeproppred: data of the shape of the named data set.
OGB_STANDIN = '''
"""Synthetic stand-ins of ogb's node property data sets (bench_pyg.py)."""
import torch
from torch_geometric.data import Data

SHAPES = {"ogbn-arxiv": (169343, 1166243, 128, 40, (90941, 29799, 48603))}


class PygNodePropPredDataset:
    def __init__(self, name, root=None, transform=None):
        n, e, f, c, split = SHAPES[name]
        g = torch.Generator().manual_seed(0)
        self.num_features, self.num_classes = f, c
        self.data = Data(x=torch.randn(n, f, generator=g),
                         y=torch.randint(0, c, (n, 1), generator=g),
                         edge_index=torch.randint(0, n, (2, e), generator=g))
        self.transform = transform
        perm = torch.randperm(n, generator=g)
        a, b = split[0], split[0] + split[1]
        self.split = {"train": perm[:a], "valid": perm[a:b], "test": perm[b:]}

    def __getitem__(self, i):
        return self.transform(self.data) if self.transform else self.data

    def get_idx_split(self):
        return self.split


class Evaluator:
    def __init__(self, name):
        pass

    def eval(self, d):
        return {"acc": float((d["y_true"] == d["y_pred"]).float().mean())}
'''


def machine():
    """The CPU (bench_lm's cpu_model), the SIMD variant attngraph's kernels run,
    and the threads both sides get."""
    import attngraph
    from bench_lm import cpu_model
    return "%s, attngraph %s kernels, %s threads" % (cpu_model(), attngraph.simd_isa(),
                                                     os.environ["OMP_NUM_THREADS"])


def epochs_of(cmd, env, epochs, pattern="Epoch"):
    """Runs cmd, reading its output line by line; the times between its
    consecutive epoch lines (the first epoch left out), stopping it after
    epochs + 1 of them."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, bufsize=1)
    stamps, tail = [], []
    for line in p.stdout:
        tail = (tail + [line])[-20:]
        if line.startswith(pattern) or line.startswith(pattern.lower()):
            stamps.append(time.perf_counter())
            if len(stamps) > epochs + 1:
                break
    p.kill()
    p.wait()
    if len(stamps) < 3:
        raise SystemExit("bench_pyg: %s printed %d epoch lines; its last lines:\n%s"
                         % (" ".join(cmd), len(stamps), "".join(tail)))
    return [b - a for a, b in zip(stamps[1:], stamps[2:])]


def script_case(name, script, args, setup, pyg, epochs, scratch):
    """An example script run whole, as PyG's and with attngraph's layers:
    (median epoch seconds of PyG's, of attngraph's)."""
    examples = os.path.join(scratch, "examples")   # its data goes to scratch/data
    os.makedirs(examples, exist_ok=True)
    path = os.path.join(examples, os.path.basename(script))
    shutil.copy(os.path.join(pyg, "examples", script), path)
    extra = setup(scratch) or ""
    out = []
    for swap in ("", "1"):
        env = dict(os.environ, AG_SWAP=swap, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(p for p in (extra, os.path.join(ROOT, "python"),
                                                          pyg, os.environ.get("PYTHONPATH"))
                                              if p))
        times = epochs_of([sys.executable, "-c", RUNNER, path] + args, env, epochs)
        out.append(statistics.median(times))
        print("  %-9s %s: median %.3f s an epoch over %d" % (
            "attngraph" if swap else "PyG", name, out[-1], len(times)), flush=True)
    return out


def setup_cora(cora):
    def setup(scratch):
        raw = os.path.join(scratch, "data", "Planetoid", "Cora", "raw")
        os.makedirs(raw, exist_ok=True)
        for f in os.listdir(cora):
            if f.startswith("ind.cora."):
                shutil.copy(os.path.join(cora, f), raw)
    return setup


def setup_ppi(scratch):
    """PPI's raw files (PyG's PPI.process reads them) of its shape, random."""
    import numpy as np
    raw = os.path.join(scratch, "data", "PPI", "raw")
    os.makedirs(raw, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, graphs in (("train", 20), ("valid", 2), ("test", 2)):
        sizes = rng.integers(1800, 2700, graphs)
        nodes, links, ids, base = [], [], [], 0
        for gid, n in enumerate(sizes):
            m = int(n * 13.65)                  # 61,300 messages a graph, both ways
            u, v = rng.integers(0, n, m) + base, rng.integers(0, n, m) + base
            links += [{"source": int(a), "target": int(b)} for a, b in zip(u, v) if a != b]
            nodes += [{"id": int(base + i)} for i in range(n)]
            ids.append(np.full(n, gid + 1))
            base += n
        with open(os.path.join(raw, split + "_graph.json"), "w") as f:
            json.dump({"directed": False, "multigraph": False, "graph": {}, "nodes": nodes,
                       "links": links}, f)
        np.save(os.path.join(raw, split + "_feats.npy"),
                rng.standard_normal((base, 50)).astype(np.float32))
        np.save(os.path.join(raw, split + "_labels.npy"),
                (rng.random((base, 121)) < 0.3).astype(np.float32))
        np.save(os.path.join(raw, split + "_graph_id.npy"), np.concatenate(ids))


def setup_ogb(scratch):
    pkg = os.path.join(scratch, "standin", "ogb", "nodeproppred")
    os.makedirs(pkg, exist_ok=True)
    open(os.path.join(scratch, "standin", "ogb", "__init__.py"), "w").close()
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write(OGB_STANDIN)
    return os.path.join(scratch, "standin")


# ---- ogbn-products: the script's model on sampled batches of its shape

FANOUT = (10, 10, 5)
NEW = (0.9, 0.59, 0.12)   # the share of new nodes among a hop's sampled sources


def sample_batch(gen, seeds=512, frontier_only=True):
    """Node count per hop and each hop's edges (src, dst) of a synthetic
    neighbour sample: hop h gives each target FANOUT[h] sources, a share NEW[h]
    of them new nodes, the rest drawn from the nodes sampled so far. The
    targets are the last hop's new nodes (NeighborLoader) or all nodes so far
    (NeighborSampler: frontier_only False)."""
    import torch
    n, lo, hops = seeds, 0, []
    for f, q in zip(FANOUT, NEW):
        targets = torch.arange(lo if frontier_only else 0, n)
        dst = targets.repeat_interleave(f)
        new = torch.rand(dst.numel(), generator=gen) < q
        src = torch.randint(0, n, (dst.numel(),), generator=gen)
        src[new] = n + torch.arange(int(new.sum()))
        lo, n = n, n + int(new.sum())
        hops.append((src, dst, lo, n))      # targets 0..lo-1, sources 0..n-1
    return n, hops


def model_class(path, name, convs, num_features):
    """The class `name` from a PyG example script, its layer names taken from
    convs (PyG's torch_geometric.nn or attngraph.nn): the script's own code,
    with `dataset` a stand-in that has the data's num_features."""
    import torch
    import torch.nn.functional as F
    src = open(path).read()
    node = next(n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name == name)
    ns = dict(torch=torch, F=F, Lin=torch.nn.Linear, GATConv=convs.GATConv,
              dataset=type("Dataset", (), {"num_features": num_features}))
    exec(compile(ast.Module([node], []), path, "exec"), ns)
    return ns[name]


def products_case(path, bipartite, steps):
    """Median seconds of a training step of the products GAT (PyG's layers,
    then attngraph's), on the same synthetic batches."""
    import torch
    import torch.nn.functional as F
    import torch_geometric.nn as pyg_nn
    import attngraph.nn as ag_nn
    gen = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(steps + 1):
        n, hops = sample_batch(gen, frontier_only=not bipartite)
        x = torch.randn(n, 100, generator=gen)
        y = torch.randint(0, 47, (512,), generator=gen)
        if bipartite:   # NeighborSampler's adjs: the outer hop first, (edge_index, e_id, size)
            adjs = [(torch.stack([s, d]), None, (n_src, n_dst)) for s, d, n_dst, n_src in
                    reversed(hops)]
            batches.append((x, adjs, y))
        else:
            ei = torch.cat([torch.stack([s, d]) for s, d, _, _ in hops], 1)
            batches.append((x, ei, y))
    out = []
    for convs in (pyg_nn, ag_nn):
        torch.manual_seed(0)
        model = model_class(path, "GAT", convs, 100)(100, 128, 47, num_layers=3, heads=4)
        opt = torch.optim.Adam(model.parameters(), lr=0.001)
        model.train()
        times = []
        for x, graph, y in batches:
            t = time.perf_counter()
            opt.zero_grad()
            if bipartite:
                loss = F.nll_loss(model(x, graph), y)
            else:
                loss = F.cross_entropy(model(x, graph)[:512], y)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t)
        out.append(statistics.median(times[1:]))
        print("  %-9s products%s: median %.3f s a step over %d (%d nodes, %d edges)" % (
            "attngraph" if convs is ag_nn else "PyG", " (bipartite)" if bipartite else "",
            out[-1], steps, batches[0][0].size(0),
            sum(a[0].size(1) for a in batches[0][1]) if bipartite else batches[0][1].size(1)),
            flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pyg", required=True, help="a checkout of PyG (tag 2.4.0)")
    ap.add_argument("--cora", default=os.path.join(ROOT, "..", "shared", "data", "planetoid"))
    ap.add_argument("--products-bipartite", help="PyG 2.0's examples/ogbn_products_gat.py")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2,
                    help="torch's threads and the library's (OMP_NUM_THREADS), for both")
    ap.add_argument("--only", default="gat,ppi,unimp,products,products-bip")
    a = ap.parse_args()
    # torch takes the physical cores by default (1 of this VM's 2): both sides get
    # the same threads, the scripts through the environment
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    sys.path[:0] = [os.path.join(ROOT, "python"), a.pyg]
    import torch
    torch.set_num_threads(a.threads)
    print("bench_pyg on %s" % machine(), flush=True)
    only = a.only.split(",")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_pyg.") as scratch:
        cases = [("gat", "gat.py on Cora", "gat.py", ["--epochs", str(a.epochs + 2)],
                  setup_cora(a.cora)),
                 ("ppi", "ppi.py (synthetic PPI)", "ppi.py", [], setup_ppi),
                 ("unimp", "unimp_arxiv.py (synthetic arxiv)", "unimp_arxiv.py", [], setup_ogb)]
        for key, name, script, args, setup in cases:
            if key in only:
                rows.append((name, "epoch") + tuple(script_case(
                    name, script, args, setup, a.pyg, a.epochs, os.path.join(scratch, key))))
        products = os.path.join(a.pyg, "examples", "ogbn_products_gat.py")
        if "products" in only:
            rows.append(("ogbn_products_gat.py's GAT, edge_index", "step") +
                        tuple(products_case(products, False, 3 * a.epochs)))
        if "products-bip" in only and a.products_bipartite:
            rows.append(("ogbn_products_gat.py's GAT (PyG 2.0), bipartite", "step") +
                        tuple(products_case(a.products_bipartite, True, 3 * a.epochs)))
    print("\n| example | per | PyG 2.4 | attngraph | attngraph is |")
    print("|---|---|---|---|---|")
    for name, per, theirs, ours in rows:
        print("| %s | %s | %.3f s | %.3f s | %.2fx faster |" % (name, per, theirs, ours,
                                                                 theirs / ours))


if __name__ == "__main__":
    main()
