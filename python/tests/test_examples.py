"""The examples run as a newcomer runs them, and say what they should."""
import os
import re
import subprocess
import sys

from conftest import PYDIR


def run_example(name):
    r = subprocess.run([sys.executable, os.path.join(PYDIR, "examples", name)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_karate():
    out = run_example("karate.py")
    acc = float(re.search(r"accuracy on the other 32 members: ([\d.]+)%", out).group(1))
    assert acc >= 90.0, out


def test_masks():
    out = run_example("masks.py")
    assert "(baseline)" in out and out.count("'it' attends to") == 1
    assert out.count("causal&!strided:4+global:1") == 2     # a table row and a line below
