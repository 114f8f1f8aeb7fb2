"""make bench-patterns: every mask of the masking study at the dense kernel's speed per edge?

For each kernel variant the CPU runs (AG_SIMD), N in 2,048 and 32,768, head
width d in 32 and 64 (H*d = 128), forward and backward: the time of one round
of scaled-dot attention under each pattern, as ns per edge and head, beside
causal's at the same N, d and pass (measured just before it). Each figure is `attngraph bench --json` (the kernel planned once,
untimed; 0.2 s of warm-up; the median of 5 runs), 2 threads, and the kernel the
plan chose.
Issue 40's target: every structured pattern within 2.0x causal's time per edge. Then
the score kinds (GAT's additive, GATv2, cosine) against scaled-dot on the same graph:
causal N=4,096 (H=4, d=32) and random:16 on 200,000 nodes (H=1, d=64); target 1.5x.
"""
import argparse
import json
import os
import subprocess
import sys

from bench_lm import cpu_model

PATTERNS = ["window:64", "window:128", "strided:64+window:64", "fixed:64,8",
            "bigbird:64,1,1,1", "dilated:128,2", "window:64+global:4", "docs&window:64",
            "random:64"]


SCORES = ["scaled-dot", "additive", "gatv2", "cosine"]


def spec_of(pattern, n):
    """docs&P: four documents of N/4 tokens, each under P."""
    if pattern.startswith("docs&"):
        return "docs:%s&%s" % (",".join([str(n // 4)] * 4), pattern[len("docs&"):])
    return pattern


def bench(cli, isa, pattern, n, d, backward, threads, score="scaled-dot", heads=None):
    args = [cli, "bench", "--pattern", spec_of(pattern, n), "--nodes", str(n), "--heads",
            str(heads or 128 // d), "--head-dim", str(d), "--threads", str(threads), "--json",
            "--score", score]
    if backward:
        args.append("--backward")
    r = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, AG_SIMD=isa))
    if r.returncode != 0:
        sys.exit("bench-patterns: %s failed: %s" % (" ".join(args), r.stderr.strip()))
    out = json.loads(r.stdout)
    return out["median_s"] * 1e9 / out["E"] / out["H"], out["E"] / out["N"], out["kernel"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", required=True)
    p.add_argument("--nodes", default="2048,32768")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    version = subprocess.run([a.cli, "--version"], capture_output=True, text=True).stdout
    variants = ["avx512", "avx2", "base"]   # the CPU's best and every one below it
    best = next(v for v in variants + ["base"] if "products: %s" % v in version or v == "base")
    isas = ([os.environ["AG_SIMD"]] if os.environ.get("AG_SIMD")
            else variants[variants.index(best):])
    print("bench-patterns: %s, %d threads; ns per edge and head (ratio to causal's)"
          % (cpu_model(), a.threads))
    for isa in isas:
        for n in [int(x) for x in a.nodes.split(",")]:
            for d in (32, 64):
                print("\n== %s, N=%d, d=%d, H=%d" % (isa, n, d, 128 // d))
                print("%-24s %9s %-7s %-16s %-16s"
                      % ("pattern", "edges/tok", "kernel", "forward", "backward"))
                ref = [bench(a.cli, isa, "causal", n, d, b, a.threads) for b in (0, 1)]
                print("%-24s %9.1f %-7s %6.2f           %6.2f"
                      % ("causal", ref[0][1], ref[0][2], ref[0][0], ref[1][0]))
                for pat in PATTERNS:
                    f, per, kernel = bench(a.cli, isa, pat, n, d, 0, a.threads)
                    b = bench(a.cli, isa, pat, n, d, 1, a.threads)[0]
                    print("%-24s %9.1f %-7s %6.2f (%5.1fx)  %6.2f (%5.1fx)"
                          % (pat, per, kernel, f, f / ref[0][0], b, b / ref[1][0]), flush=True)
        # the score kinds against scaled-dot on the same graph (issue 40's cases)
        for pat, n, h, d in (("causal", 4096, 4, 32), ("random:16", 200000, 1, 64)):
            print("\n== %s, scores on %s, N=%d, H=%d, d=%d" % (isa, pat, n, h, d))
            print("%-24s %-8s %-16s %-16s" % ("score", "kernel", "forward", "backward"))
            ref = None
            for score in SCORES:
                f, _, kernel = bench(a.cli, isa, pat, n, d, 0, a.threads, score, h)
                b = bench(a.cli, isa, pat, n, d, 1, a.threads, score, h)[0]
                ref = ref or (f, b)
                print("%-24s %-8s %6.2f (%5.1fx)  %6.2f (%5.1fx)"
                      % (score, kernel, f, f / ref[0], b, b / ref[1]), flush=True)


if __name__ == "__main__":
    main()
