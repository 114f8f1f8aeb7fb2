"""The examples run as a newcomer runs them, and say what they should."""
import os
import re
import subprocess
import sys

import pytest

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


SHARED = os.path.join(PYDIR, "..", "..", "shared", "data", "planetoid")


@pytest.mark.skipif(not os.path.exists(os.path.join(SHARED, "ind.cora.graph")),
                    reason="../shared/data/planetoid is not here")
@pytest.mark.parametrize("model", ["gat", "transformer"])
def test_cora_runs_a_few_epochs(model):
    r = subprocess.run([sys.executable, os.path.join(PYDIR, "examples", "cora.py"), "--model",
                        model, "--seeds", "1", "--epochs", "3", "--patience", "3"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(r"attngraph \w+Conv +[\d.]+ \+- 0\.0% \(1 seeds\)", r.stdout), r.stdout


def test_cora_names_a_missing_folder(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(PYDIR, "examples", "cora.py"), "--root",
                        str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and str(tmp_path) in r.stderr and "--root" in r.stderr
