"""The Python snippets of the README and of docs/ work as pasted (from the
repository's root), and the saved layer gives the CLI's output."""
import os
import re
import subprocess
import sys

import numpy as np

from conftest import ROOT, PYDIR, cli


def read(name):
    return open(os.path.join(ROOT, name), encoding="utf-8").read()


def snippets(name="docs/python.md"):
    return re.findall(r"```python\n(.*?)```", read(name), re.S)


def run_snippet(code, cwd):
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=PYDIR), timeout=120)


def test_readme_overview_snippet(tmp_path):
    blocks = snippets("README.md")
    assert len(blocks) == 1
    r = run_snippet(blocks[0], tmp_path)
    assert r.returncode == 0, r.stderr
    said = re.search(r"print\(.*\)\s+# (.*)", blocks[0]).group(1)
    assert r.stdout.strip() == said


def test_readme_snippets(tmp_path):
    os.symlink(os.path.join(ROOT, "graphs"), tmp_path / "graphs")
    blocks = snippets()
    assert len(blocks) == 3
    outs = []
    for code in blocks:
        r = run_snippet(code, tmp_path)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert "<attngraph.Graph edge_index: N=5, E=5> (5, 8)" in outs[0]
    gat = next(k for k, code in enumerate(blocks) if "GATConv" in code)   # the PyG drop-in
    said = "\n".join(re.findall(r"print\(.*\)\s+# ([^:\n]*)", blocks[gat]))
    assert outs[gat].strip() == said.strip()
    assert re.search(r"held-out accuracy \d+%", outs[-1])
    cli("run", tmp_path / "graphs/karate.gml", "--features", tmp_path / "karate-x.npy",
        "--weights", tmp_path / "karate-model", "--heads", 2, "--norm", "layer", "--out",
        tmp_path / "y.npy", "--quiet")
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), np.load(tmp_path / "karate-y.npy"),
                               atol=2e-5)


def test_readme_pictures_snippet(tmp_path):
    """docs/pictures.md's Python snippet runs as pasted and says what the page says."""
    text = read("docs/pictures.md")
    start = text.index("**From Python** (`attngraph.draw`")
    code = re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)
    os.symlink(os.path.join(ROOT, "graphs"), tmp_path / "graphs")
    r = run_snippet(code, tmp_path)
    assert r.returncode == 0, r.stderr
    said = re.search(r"It prints `(.*?)`", text[start:]).group(1)
    assert r.stdout.strip() == said
    for name in ("karate-heatmap.svg", "karate-graph.svg"):
        assert (tmp_path / name).read_text(encoding="utf-8").startswith("<?xml")
