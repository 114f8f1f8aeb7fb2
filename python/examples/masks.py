"""The same tokens, features and weights under several attention masks: what
changes? (attngraph compare, from Python.)

    PYTHONPATH=python /usr/bin/python3 python/examples/masks.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import attngraph as ag      # noqa: E402
import numpy as np          # noqa: E402

TOKENS = "the cat sat on the mat and the dog ran after it".split()
MASKS = ["causal", "window:3", "causal&strided:3", "window:3+global:1", "docs:6,6",
         "causal&!strided:4+global:1"]


def main():
    n, dim, heads = len(TOKENS), 16, 2
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    layer = ag.Weights.random(dim, heads, seed=1)
    graphs = {spec: ag.Graph.pattern(spec, n, labels=TOKENS) for spec in MASKS}
    rows = ag.compare(graphs, x, layer, rounds=2)
    print("%d masks on %d tokens, 2 rounds (D=%d, %d heads), the same inputs" %
          (len(MASKS), n, dim, heads))
    print(ag.format_compare(rows, TOKENS))
    # where does 'it' look under each mask? (the last round's weights, mean over heads)
    print("\n'it' attends to, in the last round:")
    for spec, g in graphs.items():
        y, last = ag.rounds(g, x, layer, rounds=2, return_last=True)
        w = ag.attention_weights(g, last["q"], last["k"], heads).mean(axis=1)
        mine = np.flatnonzero(g.dst == n - 1)
        top = mine[np.argsort(-w[mine], kind="stable")[:3]]
        print("  %-28s %s" % (spec, ", ".join("'%s' %.0f%%" % (TOKENS[g.src[e]], 100 * w[e])
                                              for e in top)))


if __name__ == "__main__":
    main()
