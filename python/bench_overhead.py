"""Python's overhead per call on a small graph, against the same call from C.

Times ag_attention on a causal pattern of 64 nodes (4 heads of width 16) as a
median over many calls: from C (a tiny program compiled here against the
build's libattngraph.so), through ctypes with nothing around it, through
attngraph.attention (shape checks, score, output allocation), and
attngraph.torch.graph_attention without gradients; then forward + backward
from C and through torch.autograd.

    make all && PYTHONPATH=python /usr/bin/python3 python/bench_overhead.py [--threads 1] [--calls 20000]
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import attngraph as ag           # noqa: E402
from attngraph import _lib       # noqa: E402
import numpy as np               # noqa: E402

C_TIMER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <attngraph/core.h>
static int cmp(const void *a, const void *b)
{ double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv)
{
    const int64_t N = atoll(argv[1]), H = atoll(argv[2]), d = atoll(argv[3]);
    const int calls = atoi(argv[4]);
    ag_set_threads(atoi(argv[5]));
    ag_error_t err;
    ag_pattern_t *p; ag_nbhd_t nb;
    if (ag_pattern_parse(&p, argv[6], &err) || ag_nbhd_from_pattern(&nb, p, N, AG_SELF_KEEP, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    float *Q = malloc(sizeof(float) * N * H * d * 4), *K = Q + N * H * d, *V = K + N * H * d,
          *M = V + N * H * d;
    ag_random_normal(Q, 3 * N * H * d, 1, 0, 1.0f);
    double *t = malloc(sizeof(double) * calls);
    float *L = malloc(sizeof(float) * N * H), *G = malloc(sizeof(float) * N * H * d * 4);
    float *dM = G + 3 * N * H * d;
    ag_random_normal(dM, N * H * d, 2, 0, 1.0f);
    ag_attention_opts_t o = {0};
    o.lse = L;
    ag_attention_grads_t g = {G, G + N * H * d, G + 2 * N * H * d, NULL, NULL, NULL};
    for (int backward = 0; backward < 2; backward++) {
        for (int c = -calls / 10; c < calls; c++) {     /* a tenth as warm-up */
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            int rc = backward ? ag_attention_ex(&nb, Q, K, V, H, d, NULL, M, &o, &err) ||
                                ag_attention_backward(&nb, Q, K, V, H, d, NULL, M, L, dM, &g, &err)
                              : ag_attention(&nb, Q, K, V, H, d, NULL, M, &err);
            if (rc)
                return fprintf(stderr, "%s\n", err.msg), 1;
            clock_gettime(CLOCK_MONOTONIC, &b);
            if (c >= 0)
                t[c] = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
        }
        qsort(t, calls, sizeof *t, cmp);
        printf("%.0f\n", t[calls / 2]);
    }
    return 0;
}
"""


def median_ns(fn, calls):
    for _ in range(calls // 10):
        fn()
    t = np.empty(calls)
    clock = time.perf_counter_ns
    for c in range(calls):
        a = clock()
        fn()
        t[c] = clock() - a
    return float(np.median(t))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=16)
    ap.add_argument("--pattern", default="causal")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    N, H, d = a.nodes, a.heads, a.head_dim
    threads = ag.set_threads(a.threads)

    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "t.c"), os.path.join(tmp, "t")
        with open(src, "w") as f:
            f.write(C_TIMER)
        libdir = os.path.dirname(os.path.abspath(_lib.path))
        subprocess.run(["cc", "-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L",
                        "-I" + os.path.join(ROOT, "include"), src, "-o", exe, "-L" + libdir,
                        "-l:" + os.path.basename(_lib.path), "-Wl,-rpath," + libdir],
                       check=True)
        c_ns, c_both = map(float, subprocess.run(
            [exe, str(N), str(H), str(d), str(a.calls), str(a.threads), a.pattern],
            capture_output=True, text=True, check=True).stdout.split())

    g = ag.Graph.pattern(a.pattern, N)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((N, H * d)).astype(np.float32) for _ in range(3))
    m = np.empty_like(q)
    e = ag._lib.err()
    nb = ctypes.byref(g._nb)
    lib = _lib.lib
    qp, kp, vp, mp = q.ctypes.data, k.ctypes.data, v.ctypes.data, m.ctypes.data
    raw = median_ns(lambda: lib.ag_attention(nb, qp, kp, vp, H, d, None, mp, e), a.calls)
    wrapped = median_ns(lambda: ag.attention(g, q, k, v, heads=H), a.calls)
    rows = [("C (ag_attention from a C loop)", c_ns, c_ns),
            ("ctypes call, nothing around it", raw, c_ns), ("attngraph.attention", wrapped, c_ns)]
    try:
        import torch
        from attngraph.torch import graph_attention
        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        with torch.no_grad():
            rows.append(("attngraph.torch.graph_attention (no grad)",
                         median_ns(lambda: graph_attention(tq, tk, tv, g, H), a.calls), c_ns))
        gq = tq.clone().requires_grad_()

        def fwd_bwd():
            graph_attention(gq, tk, tv, g, H).sum().backward()
        rows.append(("C forward + backward (ag_attention_backward)", c_both, c_both))
        rows.append(("graph_attention forward + backward", median_ns(fwd_bwd, a.calls // 4),
                     c_both))
    except ImportError:
        pass
    print("%s on %d nodes (%d edges), %d heads of width %d, %d thread%s; median of %d calls"
          % (a.pattern, N, g.E, H, d, threads, "s" if threads > 1 else "", a.calls))
    for name, ns, base in rows:
        print("  %-45s %8.1f us  (+%.1f us over C)" % (name, ns / 1e3, (ns - base) / 1e3))


if __name__ == "__main__":
    main()
