#!/usr/bin/python3
"""The heterophily study (README): Platonov et al.'s minesweeper and tolokers
(ICLR 2023; ten fixed splits, ROC AUC at the epoch of the best validation AUC)
under connectivities that add global edges to the graph's.

Connectivities run by `attngraph train` (models/gt-sep.txt: graph-transformer
layers whose ego and neighbour parts have weights of their own, LayerNorm and
a feed-forward block):
    graph                       the graph's edges (the GT-sep baseline)
    graph+virtual:1             a virtual node, one softmax with the edges
    graph+expander:3            Exphormer's expander, the same
    graph+expander:3+virtual:1
    graph|graph|graph+virtual:1 a connectivity per layer: the virtual node on top
    global:expander:3           GraphGPS's layer in the model file: each layer's
    global:virtual:1            last 2 of its 4 heads attend over the pattern
                                (global=SPEC global_heads=2), the others over
                                the graph, added by wo
and by attngraph.nn.GPSConv in PyTorch (the same widths; a TransformerConv as
the local layer, a global attention of its own added):
    gps:complete                every pair, by the fused kernel
    gps:expander:3
and PyG's GPSConv (dense MultiheadAttention) beside, where PyG imports.

Each run is a process of its own; its peak resident memory is wait4's.
Writes one CSV row a run; prints the table of means and deviations.

    /usr/bin/python3 tools/study_heterophily.py --data ../shared/data/heterophilous \\
        --dataset minesweeper --splits 10 --out study.csv
"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI_CONNS = ["graph", "graph+virtual:1", "graph+expander:3", "graph+expander:3+virtual:1",
             "graph|graph|graph+virtual:1", "global:expander:3", "global:virtual:1"]
GPS_CONNS = ["gps:complete", "gps:expander:3"]


def cpu_model():
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    flags = info.get("flags", "").split()
    isa = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "baseline"
    return "%s (family %s, model %s), %s" % (info.get("model name", "?"),
                                             info.get("cpu family", "?"), info.get("model", "?"),
                                             isa)


def run_measured(cmd, env=None):
    """(stdout, seconds, peak resident MB) of a child process: wait4's rusage
    is the child's own (RUSAGE_CHILDREN would be the largest child so far)."""
    import tempfile
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.time() - t0
        out.seek(0), err.seek(0)
        text = out.read()
        if p.returncode:
            raise RuntimeError("%s failed: %s" % (" ".join(cmd), err.read()[-2000:]))
    return text, seconds, usage.ru_maxrss / 1024.0


def global_model(model, spec):
    """model's text with every layer's last 2 heads over spec (global=SPEC), in
    a temporary file (mkstemp's, in $TMPDIR): its path."""
    import tempfile
    with open(model) as f:   # the key before a layer line's comment, if it has one
        lines = [line.rstrip("\n").split("#")[0].rstrip() + " global=%s global_heads=2" % spec
                 if line.startswith("layer ") else line.rstrip("\n") for line in f]
    fd, path = tempfile.mkstemp(prefix="gps-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


MESSAGES = r"(\d+) nodes, (?:\d+ edges, )?(\d+) messages"


def messages_a_node(archive, spec):
    """The messages a node of pattern spec over the archive's graph
    (attngraph.Graph.pattern)."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import attngraph as ag
    g = ag.Graph.load(archive)
    return ag.Graph.pattern(spec, graph=g).E / g.N


def run_cli(cli, archive, split, conn, epochs, lr, model):
    made, extra = None, 0.0
    if conn.startswith("global:"):   # GraphGPS's layer: the graph, and global heads
        extra = messages_a_node(archive, conn[len("global:"):])
        made = model = global_model(model, conn[len("global:"):])
        conn = "graph"
    try:
        out, _, peak = run_measured([cli, "train", "--data", archive, "--split", str(split),
                                     "--model", model, "--epochs", str(epochs), "--lr", str(lr),
                                     "--pattern", conn, "--seed", str(split + 1)])
    finally:
        if made:
            os.unlink(made)
    auc = float(re.search(r"test ROC AUC ([0-9.]+)", out).group(1))
    secs = float(re.search(r"([0-9]+) epochs in ([0-9.]+) s", out).group(2))
    m = re.search(MESSAGES, out)
    return auc, secs / epochs, int(m.group(2)) / int(m.group(1)) + extra, peak


# ---- GraphGPS in PyTorch (run in a child: python3 study_heterophily.py --gps ...) ----

def gps_child(args):
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import attngraph as ag
    from attngraph.nn import GPSConv, TransformerConv
    torch.manual_seed(args.split + 1)
    torch.set_num_threads(os.cpu_count() or 1)
    d = np.load(args.archive)
    x = torch.from_numpy(d["node_features"]).float()
    y = torch.from_numpy(d["node_labels"]).long()
    e = torch.from_numpy(d["edges"]).long().t()
    edge_index = torch.cat([e, e.flip(0)], 1)
    masks = [torch.from_numpy(d[k][args.split]) for k in ("train_masks", "val_masks",
                                                           "test_masks")]
    C, pattern = 64, args.gps
    if args.pyg:
        sys.path.insert(0, args.pyg)
        from torch_geometric.nn import GPSConv as Layer
        make = lambda: Layer(C, TransformerConv(C, C // 4, heads=4), heads=4, dropout=0.2)
    else:
        make = lambda: GPSConv(C, TransformerConv(C, C // 4, heads=4), heads=4, dropout=0.2,
                               pattern=pattern)
    model = torch.nn.ModuleList([torch.nn.Linear(x.size(1), C)] + [make() for _ in range(3)] +
                                [torch.nn.Linear(C, 2)])
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    def forward():
        h = model[0](x)
        for layer in model[1:-1]:
            h = layer(h, edge_index)
        return model[-1](h)

    def auc(score, mask):
        """The chance that a positive outscores a negative, ties counted half."""
        s, t = score[mask].numpy(), y[mask].numpy()
        d = s[t == 1][:, None] - s[t == 0][None, :]
        return ((d > 0).sum() + 0.5 * (d == 0).sum()) / d.size

    best, test_at_best, t0 = -1.0, 0.0, time.time()
    for epoch in range(args.epochs + 1):
        model.eval()
        with torch.no_grad():
            logits = forward()
        score = logits[:, 1] - logits[:, 0]
        val = auc(score, masks[1])
        if val > best:
            best, test_at_best = val, auc(score, masks[2])
        if epoch == args.epochs:
            break
        model.train()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(forward()[masks[0]], y[masks[0]])
        loss.backward()
        opt.step()
    secs = (time.time() - t0) / args.epochs
    g = ag.Graph.from_edge_index(edge_index.numpy(), x.size(0))
    glob = x.size(0) if pattern == "complete" else ag.Graph.pattern(pattern, n=x.size(0)).E / x.size(0)
    print("RESULT %.6f %.6f %.4f" % (100 * test_at_best, secs, g.E / x.size(0) + glob))


def run_gps(archive, split, conn, epochs, lr, pyg=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--gps", conn[len("gps:"):],
           "--archive", archive, "--split", str(split), "--epochs", str(epochs), "--lr", str(lr)]
    if pyg:
        cmd += ["--pyg", pyg]
    out, _, peak = run_measured(cmd, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    auc, secs, per_node = (float(v) for v in out.split("RESULT")[1].split())
    return auc, secs, per_node, peak


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(os.path.dirname(ROOT), "shared", "data",
                                                   "heterophilous"))
    ap.add_argument("--dataset", default="minesweeper")
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--conns", default=",".join(CLI_CONNS + GPS_CONNS),
                    help="comma-separated, from the list above (a comma inside a spec: "
                         "write ';')")
    ap.add_argument("--pyg-splits", type=int, default=0,
                    help="splits of PyG's GPSConv beside (needs --pyg)")
    ap.add_argument("--pyg", help="a checkout of PyG 2.4 (its pure-Python source)")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "attngraph"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "gt-sep.txt"))
    ap.add_argument("--out", help="CSV of every run (appended)")
    # the child's
    ap.add_argument("--gps", help=argparse.SUPPRESS)
    ap.add_argument("--archive", help=argparse.SUPPRESS)
    ap.add_argument("--split", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.gps:
        return gps_child(args)
    archive = os.path.join(args.data, args.dataset + ".npz")
    conns = [c for c in args.conns.split(",") if c]
    conns = [c.replace(";", ",") for c in conns]
    print("%s on %s, %d splits, %d epochs; %s" % (args.dataset, os.uname().nodename, args.splits,
                                                   args.epochs, cpu_model()), flush=True)
    rows = []
    f = open(args.out, "a", newline="") if args.out else None
    w = csv.writer(f) if f else None
    jobs = [(c, None, args.splits) for c in conns]
    if args.pyg and args.pyg_splits:
        jobs.append(("gps:complete", args.pyg, args.pyg_splits))
    for conn, pyg, splits in jobs:
        name = conn + (" (PyG's GPSConv)" if pyg else "")
        for split in range(splits):
            r = run_gps(archive, split, conn, args.epochs, args.lr, pyg) \
                if conn.startswith("gps:") else \
                run_cli(args.cli, archive, split, conn, args.epochs, args.lr, args.model)
            rows.append((name,) + r)
            if w:
                w.writerow([args.dataset, name, split, "%.4f" % r[0], "%.5f" % r[1],
                            "%.2f" % r[2], "%.0f" % r[3]])
                f.flush()
            print("  %-40s split %d: test ROC AUC %.2f, %.3f s an epoch" % (name, split, r[0],
                                                                           r[1]), flush=True)
    print("\n| connectivity | ROC AUC | edges a node | s an epoch | peak MB |")
    print("|---|---|---|---|---|")
    for name in dict.fromkeys(r[0] for r in rows):
        rs = [r for r in rows if r[0] == name]
        aucs = [r[1] for r in rs]
        sd = statistics.stdev(aucs) if len(aucs) > 1 else float("nan")
        print("| `%s` | %.2f +- %.2f | %.1f | %.3f | %.0f |" % (
            name, statistics.mean(aucs), sd, rs[0][3], statistics.median(r[2] for r in rs),
            max(r[4] for r in rs)))


if __name__ == "__main__":
    main()
