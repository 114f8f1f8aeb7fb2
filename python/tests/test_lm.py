"""attngraph lm train: a character-level GPT from the command line (the
library's ag_lm_t, checked against a GPT in double by tests/test_lm.c): a
short run learns (its loss falls), reproduces bitwise for 1 and 2 threads,
writes its log and model, compares patterns, and refuses bad input."""
import os

import numpy as np
import pytest

from conftest import cli

SMALL = ("--block", 16, "--batch", 4, "--layers", 2, "--heads", 2, "--dim", 16,
         "--lr", "3e-3", "--min-lr", "3e-4", "--warmup", 5, "--eval-iters", 4, "--seed", 7)


@pytest.fixture
def text(tmp_path):
    """A text with structure to learn: words from a small vocabulary."""
    rng = np.random.default_rng(0)
    words = ["the ", "cat ", "sat ", "on ", "a ", "mat. ", "dog ", "ran!\n"]
    body = "".join(words[k] for k in rng.integers(0, len(words), 3000))
    path = tmp_path / "corpus.txt"
    path.write_text(body)
    return path


def run_lm(*args, check=True):
    return cli("lm", "train", *args, check=check)


def test_a_short_run_learns_and_reproduces(tmp_path, text):
    args = ("--text", text, *SMALL, "--iters", 60, "--eval-every", 30)
    for t in (1, 2):
        run_lm(*args, "--threads", t, "--log", tmp_path / ("log%d.csv" % t), "--save",
               tmp_path / ("m%d" % t), "--quiet")
    log = (tmp_path / "log1.csv").read_text()
    rows = [r.split(",") for r in log.splitlines()]
    assert rows[0] == ["pattern", "step", "train_loss", "val_loss", "lr", "seconds"]
    assert [r[1] for r in rows[1:]] == ["0", "30", "60"]
    first, last = float(rows[1][3]), float(rows[-1][3])
    assert abs(first - np.log(len(set(text.read_text())))) < 0.3   # a uniform guess at first
    assert last < first - 0.5, (first, last)                          # then it learns
    # 1 and 2 threads: the same losses and the same model, bit for bit
    two = [r.split(",") for r in (tmp_path / "log2.csv").read_text().splitlines()]
    assert [r[:5] for r in rows] == [r[:5] for r in two]
    for name in sorted(os.listdir(tmp_path / "m1")):
        if name.endswith(".npy"):
            assert (tmp_path / "m1" / name).read_bytes() == (tmp_path / "m2" / name).read_bytes()
    saved = tmp_path / "m1"
    assert "layers 2" in (saved / "lm.txt").read_text()
    vocab = np.load(saved / "vocab.npy")
    assert "".join(map(chr, vocab)) == "".join(sorted(set(text.read_text())))
    assert np.load(saved / "wte.npy").shape == (len(vocab), 16)
    assert np.load(saved / "round-2" / "w1.npy").shape == (64, 16)


def test_patterns_train_the_same_model_on_the_same_batches(tmp_path, text):
    r = run_lm("--text", text, *SMALL, "--iters", 20, "--eval-every", 20, "--pattern",
               "causal", "--pattern", "window:4", "--log", tmp_path / "log.csv")
    table = r.stdout.split("pattern ")[-1].splitlines()
    causal, window = (next(l for l in table if l.startswith(p)) for p in ("causal", "window:4"))
    assert float(causal.split()[1]) == pytest.approx(8.5)     # (16 + 1) / 2 sources a token
    assert float(window.split()[1]) < float(causal.split()[1])
    rows = [l.split(",") for l in (tmp_path / "log.csv").read_text().splitlines()[1:]]
    assert [(r[0], r[1]) for r in rows] == [("causal", "0"), ("causal", "20"),
                                            ("window:4", "0"), ("window:4", "20")]
    # the same initial model: at step 0 the masks differ, the first rows' tokens do not;
    # the learning rate follows the same schedule under both
    assert rows[0][4] == rows[2][4] and rows[1][4] == rows[3][4]


def test_refusals(tmp_path, text):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    r = run_lm("--text", empty, check=False)
    assert r.returncode == 1 and "empty.txt is empty" in r.stderr
    r = run_lm("--text", tmp_path / "missing.txt", check=False)
    assert r.returncode == 1 and "missing.txt" in r.stderr
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(("caf\xe9 " * 500).encode("latin-1"))
    r = run_lm("--text", bad, *SMALL, "--iters", 1, check=False)
    assert r.returncode == 1 and "byte 3 (0xe9) does not start a UTF-8 character" in r.stderr
    r = run_lm("--text", bad, *SMALL, "--iters", 1, "--bytes", "--quiet", check=False)
    assert r.returncode == 0, r.stderr
    short = tmp_path / "short.txt"
    short.write_text("to be or not")
    r = run_lm("--text", short, check=False)
    assert r.returncode == 1 and "give a longer text or a smaller --block" in r.stderr
    for args, message in [(("--dim", 10, "--heads", 4), "--dim 10 is not a multiple"),
                          (("--pattern", "causal", "--pattern", "window:2", "--save",
                            tmp_path / "m"), "--save keeps one model"),
                          (("--min-lr", "1e-2"), "--min-lr 0.01 is above --lr 0.001"),
                          (("--pattern", "nonsense:3"), "nonsense")]:
        r = run_lm("--text", text, *args, check=False)
        assert r.returncode in (1, 2) and message in r.stderr, r.stderr
    assert not (tmp_path / "m").exists()
