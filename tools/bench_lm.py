"""make bench-lm: nanoGPT's shakespeare_char CPU recipe for a few steps, the
median step and steps a second of `attngraph lm train`, and of nanoGPT's own
train.py beside it in the same run when --nanogpt names a checkout of it
(github.com/karpathy/nanoGPT, with data/shakespeare_char prepared by its
prepare.py; run with the python that has torch). Times are medians of the
steps, evaluations left out; the ratio holds only within one run.

Then the GPT at long context (issue 42): a step of 4 layers of 4 heads, width
128, batch 2, at each --long block (1,024 and 4,096 tokens) under causal,
window:128 and bigbird:64,1,1,1, against the same model in plain PyTorch with
dense masked attention (tools/gpt_torch.py, its causal step; its cost is the
same under any mask), each with its peak memory. window:1 (each token itself)
is the step's products alone: a mask of E edges is expected to take at most
products + (E / causal's E) x (causal - products).

Then the token-id path (issue 56): a step of MQAR's example set at 256 tokens
with a vocabulary of 8,192 (64 pairs; 2 layers of 2 heads, width 128, rotary
positions, batch 32), where the tied head's product over the vocabulary, not
attention, is most of the work: ours under causal, and under window:1 (the
products alone), against the same model in PyTorch (its [B*T, V] logits and
F.cross_entropy with ignore_index, as a user writes it), and the study's
attention-only blocks; with --bench-kernel, each step's counted work against the
FMA peak of the same variant and threads.

    bench_lm.py --cli build/attngraph --text input.txt [--nanogpt DIR] [--iters 200]
                [--long 1024,4096] [--long-steps 4] [--token-steps 10]
                [--bench-kernel build/bench_kernel]
"""
import json
import argparse
import os
import re
import resource
import statistics
import subprocess
import tempfile
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


def measured(args, env=None):
    """args's stdout, and its peak resident memory in MB: run under a python
    of its own, whose children are args alone."""
    wrap = ("import resource, subprocess, sys\n"
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "sys.stdout.write(r.stdout)\nsys.stderr.write(r.stderr)\n"
            "print('peak-kb', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(r.returncode)")
    r = subprocess.run([sys.executable, "-c", wrap] + [str(a) for a in args],
                       capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit("bench-lm: %s failed: %s" % (" ".join(map(str, args)), r.stderr[-2000:]))
    out, _, peak = r.stdout.rpartition("peak-kb ")
    return out, float(peak) / 1024


LONG = dict(batch=2, layers=4, heads=4, dim=128)


def long_ours(cli, text, block, pattern, steps, threads):
    """attngraph lm train's median step (ms), edges per token and peak MB."""
    args = [cli, "lm", "train", "--text", text, "--block", block, "--iters", steps,
            "--eval-every", steps, "--eval-iters", 1, "--threads", threads, "--pattern",
            pattern] + [x for k, v in LONG.items() for x in ("--" + k, v)]
    out, peak = measured(args)
    row = [l for l in out.splitlines() if l.startswith(pattern + " ")][-1].split()
    return float(row[-1]), float(row[1]), peak


def long_torch(text, block, steps, threads):
    here = os.path.dirname(os.path.abspath(__file__))
    args = [sys.executable, os.path.join(here, "gpt_torch.py"), "--text", text, "--block",
            block, "--steps", steps, "--threads", threads] + \
        [x for k, v in LONG.items() for x in ("--" + k, v)]
    out, peak = measured(args, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    return json.loads(out.strip().splitlines()[-1])["median_ms"], peak


def long_context(cli, text, blocks, steps, threads):
    print("\nthe GPT at long context: 4 layers of 4 heads, width 128, batch 2, %d threads; "
          "median of %d steps" % (threads, steps))
    print("%6s %-18s %10s %9s %8s %9s %10s %8s" % ("block", "mask", "edges/tok", "ms a step",
                                                  "peak MB", "expected", "vs PyTorch",
                                                  "PyT MB"))
    for T in blocks:
        torch_ms, torch_mb = long_torch(text, T, steps, threads)
        rows = {p: long_ours(cli, text, T, p, steps, threads)
                for p in ("window:1", "causal", "window:128", "bigbird:64,1,1,1")}
        prod, causal = rows["window:1"][0], rows["causal"]
        for p, (ms, edges, mb) in rows.items():
            expected = prod + edges / causal[1] * (causal[0] - prod)
            print("%6d %-18s %10.1f %9.1f %8.0f %9s %9.1fx %8.0f"
                  % (T, p, edges, ms, mb, "%.2fx" % (ms / expected) if p != "window:1" else "-",
                     torch_ms / ms, torch_mb))
        print("%6d %-18s %10.1f %9.1f %8.0f %9s %10s %8s" % (T, "PyTorch causal", T / 2 + 0.5,
                                                             torch_ms, torch_mb, "", "1.0x", ""))
    print("(expected: the step over products + edges / causal's x (causal - products), "
          "window:1's step the products; vs PyTorch: its dense masked causal step over ours)")


TOKENS = dict(layers=2, heads=2, dim=128, positions="rope", batch=32)


def fma_peak(bench, threads):
    """The FMA peak in GFLOP/s of the kernels' variant on these threads
    (`bench_kernel peak`), or None without the tool."""
    if not bench:
        return None
    r = subprocess.run([bench, "peak", str(threads)], capture_output=True, text=True)
    m = re.search(r"^fma-peak \S+ ([0-9.]+)$", r.stdout, re.M)
    if r.returncode or not m:
        sys.exit("bench-lm: %s peak failed: %s" % (bench, r.stderr.strip()))
    return float(m.group(1))


def step_gflop(model, tokens, scored, edges, vocab):
    """A step's GFLOP (2 a multiply-add), counted as FlashAttention-2 counts
    them: the blocks' products (4 D^2 multiply-adds a token, 8 D^2 more with
    the MLP) and the tied head's over the scored rows, each forward and twice
    backward; attention 4 D an edge forward and 10 D backward (its five
    products; the kernel's sixth and seventh, S and dP made again, are not
    counted). LayerNorm, softmax and the optimizer are left out."""
    D, L = model["dim"], model["layers"]
    blocks = tokens * L * 6 * (4 + (0 if model.get("no-mlp") else 8)) * D * D
    return (blocks + tokens * L * 14 * D * edges + scored * 6 * D * vocab) / 1e9


def token_ids(cli, steps, threads, bench=None):
    """The token-id table: MQAR at 256 tokens and a vocabulary of 8,192."""
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([cli, "lm", "task", "mqar", "--vocab", "8192", "--length", "256",
                            "--pairs", "64", "--train", "2048", "--val", "32", "--out",
                            tmp + "/mqar", "--quiet"], capture_output=True, text=True)
        if r.returncode:
            sys.exit("bench-lm: lm task failed: %s" % r.stderr)
        import numpy as np
        targets = np.load(tmp + "/mqar/train_targets.npy")
        scored = (targets >= 0).sum() / targets.shape[0] * TOKENS["batch"]   # a batch's, on average
        tokens = TOKENS["batch"] * targets.shape[1]
        peaks = [fma_peak(bench, threads)]
        rows = {}
        for name, p, extra in (("window:1", "window:1", []), ("causal", "causal", []),
                               ("causal, attention only", "causal", ["--no-mlp"])):
            model = [x for k, v in TOKENS.items() for x in ("--" + k, v)] + extra
            out, mb = measured([cli, "lm", "train", "--examples", tmp + "/mqar", "--iters",
                                steps, "--eval-every", steps, "--threads", threads,
                                "--pattern", p] + model)
            row = [l for l in out.splitlines() if l.startswith(p + " ")][-1].split()
            gflop = step_gflop(dict(TOKENS, **{"no-mlp": bool(extra)}), tokens, scored,
                               float(row[1]), 8192)
            rows[name] = float(row[-1]), mb, gflop
        peaks.append(fma_peak(bench, threads))
        here = os.path.dirname(os.path.abspath(__file__))
        model = [x for k, v in TOKENS.items() for x in ("--" + k, v)]
        out, torch_mb = measured([sys.executable, os.path.join(here, "gpt_torch.py"),
                                  "--examples", tmp + "/mqar", "--steps", steps, "--threads",
                                  threads] + model,
                                 env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
        torch_ms = json.loads(out.strip().splitlines()[-1])["median_ms"]
    peak = statistics.mean(peaks) if bench else None
    print("\ntoken ids: MQAR at 256 tokens, 64 pairs, a vocabulary of 8,192; 2 layers of 2 "
          "heads, width 128, rotary positions, batch 32, %d thread%s; median of %d steps"
          % (threads, "" if threads == 1 else "s", steps))
    print("%-30s %9s %8s %10s %9s %8s" % ("", "ms a step", "peak MB", "vs PyTorch", "GFLOP",
                                         "of peak" if peak else ""))
    for name, (ms, mb, gflop) in rows.items():
        like = "attention only" not in name   # PyTorch's model has the MLP
        print("%-30s %9.1f %8.0f %10s %9.2f %8s" % (
            "ours " + name, ms, mb, "%.2fx" % (torch_ms / ms) if like else "-", gflop,
            "%.2f" % (gflop / ms * 1e3 / peak) if peak else ""))
    print("%-30s %9.1f %8.0f %10s" % ("PyTorch causal", torch_ms, torch_mb, "1.00x"))
    print("(window:1: the step's products alone, each token attending to itself; vs PyTorch: "
          "its dense masked causal step (with the MLP) over ours; GFLOP: the step's counted "
          "work (tools/bench_lm.py step_gflop)%s)"
          % ("; of peak: its rate over the FMA peak of the kernels' variant on the same "
             "threads, %.1f GFLOP/s (bench_kernel peak, before and after)" % peak
             if peak else ""))


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
    p.add_argument("--long", default="1024,4096", help="blocks of the long-context table "
                   "('' for none)")
    p.add_argument("--long-steps", type=int, default=4)
    p.add_argument("--bench-kernel", help="bench_kernel, for the FMA peak of the token table")
    p.add_argument("--token-steps", type=int, default=10,
                   help="steps of the token-id table (0: none)")
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
    if a.long:
        long_context(a.cli, a.text, [int(b) for b in a.long.split(",")], a.long_steps,
                     a.threads)
    if a.token_steps:
        token_ids(a.cli, a.token_steps, a.threads, a.bench_kernel)


if __name__ == "__main__":
    main()
