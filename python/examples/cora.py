"""GNNs on Cora with the PyG drop-ins of attngraph.torch.

--model gat: GAT, the paper's setup (Velickovic et al., ICLR 2018): GATConv
8 heads x 8 (ELU), then 1 head x 7 classes; dropout 0.6 on each layer's input
and on the attention weights. --model transformer: a graph transformer,
TransformerConv 8 heads x 8 then a pre-LayerNorm feed-forward block (64 ->
256 -> 64, GELU, residual), then TransformerConv 1 head x 7; the same
dropout. Both: Adam, lr 0.005, L2 5e-4; early stopping on validation
(patience 100) as the GAT paper's code does it; the test accuracy of the
model kept, over several seeds.

    /usr/bin/python3 python/examples/cora.py [--model gat|transformer]
        [--root DIR] [--seeds 10] [--threads 2] [--peer [--peer-seeds N]] [--cli]

--root: the folder of Planetoid's files (ind.cora.x ...; default
../shared/data/planetoid beside the checkout). --peer also trains PyTorch
Geometric's own layers in the same run, with the same seeds and epochs
(when torch_geometric is importable), and prints both: accuracy, and the
median time of an epoch (a training step and an evaluation). --cli (gat)
also trains the same model from the command line, `attngraph train --model
models/gat-cora.txt` for 300 epochs per seed, and reports its test accuracy
at the epoch of the best validation accuracy and its time an epoch."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import attngraph as ag  # noqa: E402
import attngraph.torch as agt  # noqa: E402
from attngraph.planetoid import load_planetoid  # noqa: E402


class GNN(torch.nn.Module):
    """conv1 (heads x hidden), then GAT's ELU or the transformer's feed-forward
    block, then conv2 (1 head x classes); drop: the dropout on features."""

    def __init__(self, model, conv, drop, features, classes, hidden=8, heads=8, dropout=0.6):
        super().__init__()
        self.model, self.drop, self.dropout = model, drop, dropout
        width = hidden * heads
        self.conv1 = conv(features, hidden, heads=heads, dropout=dropout)
        if model == "transformer":
            self.norm = torch.nn.LayerNorm(width)
            self.ff1 = torch.nn.Linear(width, 4 * width)
            self.ff2 = torch.nn.Linear(4 * width, width)
        self.conv2 = conv(width, classes, heads=1, concat=False, dropout=dropout)

    def dropped(self, x):
        if x.is_sparse:   # dropout on the stored values: the zeros stay zeros either way
            v = self.drop(x._values()[:, None], p=self.dropout, training=self.training)
            return torch.sparse_coo_tensor(x._indices(), v[:, 0], x.shape)
        return self.drop(x, p=self.dropout, training=self.training)

    def forward(self, x, edge_index):
        x = self.conv1(self.dropped(x), edge_index)
        if self.model == "transformer":
            x = x + self.dropped(self.ff2(F.gelu(self.ff1(self.norm(x)))))
        else:
            x = F.elu(x)
        return self.conv2(self.dropped(x), edge_index)


def train_one(kind, conv, drop, data, seed, epochs, patience):
    """(test accuracy of the model kept, its epoch, the median seconds of an epoch)."""
    torch.manual_seed(seed)
    x, y, ei = data
    model = GNN(kind, conv, drop, x.shape[1], int(y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    best = (-1.0, float("inf"))   # validation accuracy, then loss
    test_at_best, best_epoch, waited, times = 0.0, 0, 0, []
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        out = model(x, ei)
        F.cross_entropy(out[train], y[train]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            out = model(x, ei)
        times.append(time.perf_counter() - t0)
        val_loss = F.cross_entropy(out[val], y[val]).item()
        pred = out.argmax(1)
        val_acc = (pred[val] == y[val]).float().mean().item()
        # the GAT paper's code: the model is kept when validation accuracy and loss are both
        # at their best so far; patience counts epochs where neither improves
        if val_acc >= best[0] and val_loss <= best[1]:
            test_at_best = (pred[test] == y[test]).float().mean().item()
            best_epoch = epoch
        if val_acc >= best[0] or val_loss <= best[1]:
            best, waited = (max(val_acc, best[0]), min(val_loss, best[1])), 0
        else:
            waited += 1
            if waited >= patience:
                break
    return test_at_best, best_epoch, statistics.median(times)


def train_cli(out, seed, threads, epochs=300):
    """attngraph train --model models/gat-cora.txt on the Planetoid files in out:
    (test accuracy at the best validation epoch, that epoch, seconds an epoch)."""
    root = os.path.dirname(os.path.dirname(HERE))
    cli = os.environ.get("AG_CLI_PATH", os.path.join(root, "build", "attngraph"))
    f = lambda name: os.path.join(out, name + ".npy")   # noqa: E731
    r = subprocess.run([cli, "train", "--csr", f("indptr") + "," + f("indices"), "--features",
                        f("features_normalized"), "--labels", f("labels"), "--train-mask",
                        f("train_mask"), "--eval-mask", f("val_mask"), "--test-mask",
                        f("test_mask"), "--model", os.path.join(root, "models", "gat-cora.txt"),
                        "--lr", "0.005", "--weight-decay", "5e-4", "--epochs", str(epochs),
                        "--seed", str(seed + 1), "--threads", str(threads)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("cora.py: %s failed: %s" % (cli, r.stderr.strip()))
    acc = re.search(r"test accuracy ([\d.]+)% \(\d+/\d+\) at epoch (\d+)", r.stdout)
    took = re.search(r"(\d+) epochs in ([\d.]+) s", r.stdout)
    return float(acc.group(1)) / 100, int(acc.group(2)), float(took.group(2)) / int(took.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_root = os.path.join(os.path.dirname(os.path.dirname(HERE)), "..", "shared", "data",
                                "planetoid")
    ap.add_argument("--model", choices=("gat", "transformer"), default="gat")
    ap.add_argument("--root", default=default_root)
    ap.add_argument("--name", default="cora")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=1000)
    ap.add_argument("--patience", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peer", action="store_true",
                    help="also train torch_geometric.nn's layers, on the first seeds")
    ap.add_argument("--peer-seeds", type=int, default=None,
                    help="seeds of the peer's runs (default: --seeds); its dense epochs are slow")
    ap.add_argument("--cli", action="store_true",
                    help="also train models/gat-cora.txt with `attngraph train` (gat)")
    args = ap.parse_args()
    if args.cli and args.model != "gat":
        sys.exit("cora.py: --cli trains models/gat-cora.txt: give --model gat")
    torch.set_num_threads(args.threads)
    ag.set_threads(args.threads)
    try:
        d = load_planetoid(args.root, args.name)
    except (OSError, ValueError) as e:
        sys.exit("cora.py: %s (give the folder of Planetoid's files with --root)" % e)
    global train, val, test
    x = torch.from_numpy(d.x)
    x = x / x.sum(1, keepdim=True).clamp(min=1)      # rows summing to 1, as the paper
    y = torch.from_numpy(d.y)
    train, val, test = (torch.from_numpy(m) for m in (d.train_mask, d.val_mask, d.test_mask))
    ei = torch.from_numpy(d.edge_index)
    print(d)
    # (name, layer, dropout on features, inputs): attngraph's model keeps Cora's
    # inputs sparse (1.3% of them are not 0) and drops them with the library's
    # counter-based dropout; PyG's runs as its example does (dense inputs,
    # F.dropout), then with attngraph's input path, to show what the layer gains
    xs = x.to_sparse()
    name = "GATConv" if args.model == "gat" else "TransformerConv"
    ours = getattr(agt, name)
    layers = [("attngraph " + name, ours, agt.dropout, xs)]
    if args.peer:
        try:
            import torch_geometric.nn as pyg
            layers += [("PyG " + name, getattr(pyg, name), F.dropout, x),
                       ("PyG %s, ag inputs" % name, getattr(pyg, name), agt.dropout, xs)]
        except ImportError as e:
            print("--peer: torch_geometric is not importable (%s); attngraph only" % e)
    rows = []
    if args.cli:   # the command line on the same files, first: it is the one compared
        with tempfile.TemporaryDirectory() as out:
            from attngraph.planetoid import save_planetoid
            save_planetoid(d, out)
            accs, times = [], []
            for seed in range(args.seeds):
                acc, ep, t = train_cli(out, seed, args.threads)
                accs.append(100 * acc), times.append(t)
                print("  %-32s seed %2d: test %.1f%% (the model of epoch %d), %.1f ms an epoch"
                      % ("attngraph train (CLI)", seed, 100 * acc, ep, 1000 * t), flush=True)
            rows.append(("attngraph train --model (CLI)", accs, statistics.median(times)))
    for name, conv, drop, inputs in layers:
        accs, epochs, times = [], [], []
        seeds = args.seeds if conv is ours or args.peer_seeds is None else args.peer_seeds
        for seed in range(seeds):
            acc, ep, t = train_one(args.model, conv, drop, (inputs, y, ei), seed, args.epochs,
                                   args.patience)
            accs.append(100 * acc), epochs.append(ep), times.append(t)
            print("  %-32s seed %2d: test %.1f%% (the model of epoch %d), %.1f ms an epoch"
                  % (name, seed, 100 * acc, ep, 1000 * t), flush=True)
        rows.append((name, accs, statistics.median(times)))
    print("\n%-32s %-22s %s" % ("layer", "test accuracy", "ms an epoch (median)"))
    for name, accs, t in rows:
        sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
        print("%-32s %.1f +- %.1f%% (%d seeds)  %.1f" % (name, statistics.mean(accs), sd,
                                                        len(accs), 1000 * t))
    for peer, _, t in rows:
        for name, _, ours_t in rows:
            if peer.startswith("PyG") and name.startswith("attngraph"):
                print("%s is %.1fx faster an epoch than %s (%d threads)"
                      % (name, t / ours_t, peer, args.threads))


if __name__ == "__main__":
    main()
