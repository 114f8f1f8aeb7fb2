#!/usr/bin/env python3
"""Writes the Hopfield example: graphs/hopfield.gml and graphs/hopfield/*.npy.

Five stored patterns of +-1 (D = 32) are nodes that attend only to themselves,
so they never change. A probe node, stored pattern 2 with 8 of its 32 signs
flipped, attends to every stored node. With identity weights, dot scores and no
residual, one round is the modern Hopfield update (Ramsauer et al. 2020):
probe <- sum_j softmax_j(beta * x_j . probe) x_j. Standard library only.
"""
import random
import struct

D, P, FLIPS, TARGET = 32, 5, 8, 2


def save_npy(path, rows):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (
        len(rows), len(rows[0]))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        for row in rows:
            f.write(struct.pack("<%df" % len(row), *row))


rng = random.Random(7)
stored = [[rng.choice((-1.0, 1.0)) for _ in range(D)] for _ in range(P)]
probe = list(stored[TARGET])
for c in rng.sample(range(D), FLIPS):
    probe[c] = -probe[c]

save_npy("graphs/hopfield/x.npy", stored + [probe])
identity = [[1.0 if r == c else 0.0 for c in range(D)] for r in range(D)]
for name in ("wq", "wk", "wv", "wo"):
    save_npy("graphs/hopfield/%s.npy" % name, identity)

with open("graphs/hopfield.gml", "w") as f:
    f.write('Creator "attngraph tools/make_hopfield.py: %d stored patterns and a noisy '
            'probe of pattern %d"\ngraph [\n  directed 1\n' % (P, TARGET))
    for i in range(P):
        f.write('  node [ id %d label "stored-%d" ]\n' % (i, i))
    f.write('  node [ id %d label "probe" ]\n' % P)
    for i in range(P):
        f.write("  edge [ source %d target %d ]\n" % (i, i))   # a stored node keeps itself
    for i in range(P):
        f.write("  edge [ source %d target %d ]\n" % (i, P))   # the probe reads them all
    f.write("]\n")
