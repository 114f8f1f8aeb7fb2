"""make bench-share: how attngraph runs on a machine it shares.

Two workloads: the quiet step of `attngraph lm train` (nanoGPT's
shakespeare_char recipe, the median step) and the quiet epoch of a GAT
(8 heads of 8, then one head; attention dropout) on a stochastic block model of
200,000 nodes drawn with igraph (about 2.2M messages). Each runs alone, then as
2 and 3 copies started at once, then beside a one-thread busy loop and beside a
PyTorch process doing matrix products on 2 threads. Every figure is a ratio to
the quiet one measured just before it (the median of --repeat runs alone: a
shared machine drifts by 10-20% within minutes), with the CPU model: times
from another run, or another machine, are not comparable.

    bench_share.py --cli build/attngraph --text input.txt [--iters 40] [--epochs 3]
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench_lm import cpu_model   # the CPU's name, family and model, as bench-lm prints it

BUSY_LOOP = ["sh", "-c", "while :; do :; done"]
TORCH_PRODUCTS = """
import torch
torch.set_num_threads(2)
a = torch.randn(1024, 1024)
while True:
    a = torch.tanh(a @ a) * 0.5
"""


def sbm_graph(folder, nodes=200000, blocks=8, seed=1):
    """A stochastic block model (8 within-block and 2 between-block neighbours a
    node on average), each edge written both ways, with features that carry the
    block a little and the block as the label."""
    import igraph
    rng = np.random.default_rng(seed)
    size = nodes // blocks
    pref = np.full((blocks, blocks), 2.0 / (nodes - size))
    np.fill_diagonal(pref, 8.0 / size)
    igraph.set_random_number_generator(random.Random(seed))
    g = igraph.Graph.SBM(nodes, pref.tolist(), [size] * blocks, directed=False, loops=False)
    edges = np.array(g.get_edgelist(), dtype=np.int64)
    path = os.path.join(folder, "sbm.edges")
    np.savetxt(path, np.concatenate([edges, edges[:, ::-1]]), fmt="%d")
    labels = np.repeat(np.arange(blocks), size).astype(np.int64)
    x = rng.standard_normal((nodes, 32)) + 0.5 * np.eye(blocks, 32)[labels]
    np.save(os.path.join(folder, "x.npy"), x.astype(np.float32))
    np.save(os.path.join(folder, "labels.npy"), labels)
    with open(os.path.join(folder, "gat.txt"), "w") as f:
        f.write("score additive\nslope 0.2\nself-loops replace\nattn-dropout 0.6\n"
                "readout none\n"
                "layer heads=8 dim=8 out=concat projection=one bias=yes act=elu\n"
                "layer heads=1 dim=%d out=mean projection=one bias=yes\n" % blocks)
    return 2 * len(edges) + nodes


def lm_command(cli, text, iters):
    return [cli, "lm", "train", "--text", text, "--iters", str(iters), "--eval-every",
            str(iters), "--eval-iters", "1"]


def lm_figure(out):
    """The median step in ms."""
    row = [l for l in out.splitlines() if l.startswith("causal ")][-1].split()
    return float(row[-1])


def gat_command(cli, folder, epochs):
    return [cli, "train", os.path.join(folder, "sbm.edges"), "--model",
            os.path.join(folder, "gat.txt"), "--features", os.path.join(folder, "x.npy"),
            "--labels", os.path.join(folder, "labels.npy"), "--epochs", str(epochs),
            "--no-progress"]


def gat_figure(out):
    """Seconds an epoch."""
    m = re.search(r"(\d+) epochs in ([0-9.]+) s", out)
    return float(m.group(2)) / int(m.group(1))


def copies(command, figure, n, beside=None):
    """The figures of n copies of command started at once (beside a process, if
    given, started first and stopped after)."""
    other = None
    if beside:
        other = subprocess.Popen(beside, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)   # torch's start, and its threads at work
    try:
        runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for _ in range(n)]
        figures = []
        for r in runs:
            out, err = r.communicate()
            if r.returncode:
                sys.exit("bench-share: %s failed: %s" % (" ".join(command), err))
            figures.append(figure(out))
        return figures
    finally:
        if other:
            other.kill()
            other.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default="build/attngraph")
    ap.add_argument("--text", required=True)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2,
                    help="quiet runs before each case (their median)")
    a = ap.parse_args()
    load = os.getloadavg()[0]
    version = subprocess.run([a.cli, "--version"], capture_output=True, text=True).stdout
    isa = re.search(r"kernels and products: (\S+)", version)
    print("bench-share: %s, %d cores; kernels and products %s; load average %.2f at the start"
          % (cpu_model(), os.cpu_count(), isa.group(1) if isa else "?", load))
    with tempfile.TemporaryDirectory(prefix="bench-share-") as folder:
        messages = sbm_graph(folder)
        work = [("lm train step (ms)", lm_command(a.cli, a.text, a.iters), lm_figure),
                ("GAT epoch, SBM 200k nodes, %.1fM messages (s)" % (messages / 1e6),
                 gat_command(a.cli, folder, a.epochs), gat_figure)]
        cases = [("2 copies at once", 2, None), ("3 copies at once", 3, None),
                 ("beside a one-thread busy loop", 1, BUSY_LOOP),
                 ("beside PyTorch products on 2 threads", 1,
                  [sys.executable, "-c", TORCH_PRODUCTS])]
        for name, command, figure in work:
            print("\n%s\n%-38s %8s %-20s %s" % (name, "case", "quiet", "figures", "ratios"))
            for case, n, beside in cases:
                quiet = statistics.median(copies(command, figure, 1)[0]
                                          for _ in range(a.repeat))
                figures = copies(command, figure, n, beside)
                print("%-38s %8.3g %-20s %s" % (case, quiet, " ".join("%.3g" % f for f in figures),
                                                " ".join("%.2fx" % (f / quiet) for f in figures)),
                      flush=True)
    print("\n(ratios: each copy's figure over the median of %d quiet runs just before; "
          "2 threads a process unless the library chose fewer)" % a.repeat)


if __name__ == "__main__":
    main()
