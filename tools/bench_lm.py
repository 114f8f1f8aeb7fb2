"""make bench-lm: nanoGPT's shakespeare_char CPU recipe for a few steps, the
median step and steps a second of `attngraph lm train`, and of nanoGPT's own
train.py beside it in the same run when --nanogpt names a checkout of it
(github.com/karpathy/nanoGPT, with data/shakespeare_char prepared by its
prepare.py; run with the python that has torch). Times are medians of the
steps, evaluations left out; the ratio holds only within one run.

    bench_lm.py --cli build/attngraph --text input.txt [--nanogpt DIR] [--iters 200]
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys

RECIPE = dict(block=64, batch=12, layers=4, heads=4, dim=128, lr="1e-3", min_lr="1e-4",
              warmup=100, beta2=0.99, weight_decay=0.1, clip=1.0, dropout=0.0)


def cpu_model():
    """The CPU's name, family and model (a VM may name it "AMD EPYC" only)."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        return "unknown CPU"
    return "%s (family %s, model %s)" % (info.get("model name", "?"), info.get("cpu family", "?"),
                                         info.get("model", "?"))


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def ours(cli, text, iters, threads):
    args = [cli, "lm", "train", "--text", text, "--iters", str(iters), "--eval-every",
            str(iters), "--eval-iters", "1", "--lr-decay-iters", "2000", "--threads",
            str(threads)]
    for k, v in RECIPE.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        sys.exit("bench-lm: %s failed: %s" % (" ".join(args), r.stderr))
    row = [l for l in r.stdout.splitlines() if l.startswith("causal ")][-1].split()
    return float(row[-1])


def nanogpt(folder, iters, threads):
    args = [sys.executable, "train.py", "config/train_shakespeare_char.py", "--device=cpu",
            "--compile=False", "--eval_iters=1", "--log_interval=1",
            "--eval_interval=%d" % (10 * iters), "--always_save_checkpoint=False",
            "--max_iters=%d" % iters, "--lr_decay_iters=2000",
            "--out_dir=/tmp/bench-lm-nanogpt"]
    args += ["--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4",
             "--n_embd=128", "--dropout=0.0"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run(args, capture_output=True, text=True, cwd=folder, env=env)
    if r.returncode:
        sys.exit("bench-lm: nanoGPT's train.py failed: %s" % r.stderr[-2000:])
    times = [float(t) for it, t in re.findall(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms",
                                              r.stdout) if int(it) > 0]
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--nanogpt")
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    a = p.parse_args()
    isa = subprocess.run([a.cli, "--version"], capture_output=True, text=True).stdout
    isa = re.search(r"kernels and products: (\S+)", isa)
    print("bench-lm: nanoGPT's shakespeare_char CPU recipe (block 64, batch 12, 4 layers of 4 "
          "heads, width 128), %d steps, %d threads" % (a.iters, a.threads))
    print("machine: %s; kernels %s" % (cpu_model(), isa.group(1) if isa else "?"))
    ms = ours(a.cli, a.text, a.iters, a.threads)
    print("attngraph lm train: median %.1f ms a step, %.2f steps a second; peak memory %.0f MB"
          % (ms, 1e3 / ms, peak_rss_mb()))
    if a.nanogpt:
        ng = nanogpt(a.nanogpt, a.iters, a.threads)
        print("nanoGPT train.py (PyTorch): median %.1f ms a step, %.2f steps a second; peak "
              "memory %.0f MB" % (ng, 1e3 / ng, peak_rss_mb()))
        print("attngraph is %.2fx nanoGPT's speed in this run" % (ng / ms))


if __name__ == "__main__":
    main()
