"""Shared helpers: the package from this tree, the CLI, random graphs, and the
dense double-precision torch reference every test compares against."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
ROOT = os.path.dirname(PYDIR)
sys.path.insert(0, PYDIR)

import attngraph  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

CLI = os.environ.get("AG_CLI_PATH", os.path.join(ROOT, "build", "attngraph"))


def cli(*args, check=True):
    """Runs the attngraph tool; returns the CompletedProcess."""
    r = subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("attngraph %s failed (%d): %s" % (" ".join(map(str, args)),
                                                            r.returncode, r.stderr))
    return r


def random_edge_index(rng, n, e, isolated=2):
    """E random edges among the first n - isolated nodes, with a repeated
    column (multi-edge) and a self-loop forced in, in random order; the last
    `isolated` nodes have no edges at all."""
    m = n - isolated
    src = rng.integers(0, m, e)
    dst = rng.integers(0, m, e)
    src[0], dst[0] = 3, 3                     # a self-loop
    src[1], dst[1] = src[2], dst[2]           # a multi-edge
    perm = rng.permutation(e)
    return np.stack([src[perm], dst[perm]])


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
