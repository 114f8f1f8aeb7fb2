"""attngraph lm train: a character-level GPT from the command line (the
library's ag_lm_t, checked against a GPT in double by tests/test_lm.c): a
short run learns (its loss falls), reproduces bitwise for 1 and 2 threads,
writes its log and model, compares patterns, and refuses bad input."""
import os

import numpy as np
import pytest

from conftest import ROOT, cli

# graphs/pictures/lm-study*.svg's titles (make pictures draws them)
STUDY_TITLES = {"lm-study": "validation loss of a GPT under nine masks",
                "lm-study-1024": "validation loss at 1,024 tokens under ten masks"}

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
    assert rows[0] == ["pattern", "step", "train_loss", "val_loss", "lr", "seconds", "train_acc",
                       "val_acc"]
    assert all(0 <= float(r[7]) <= 1 for r in rows[1:])
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
    assert "layers 2" in (saved / "model.txt").read_text()
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
    # the log's picture: both patterns' training and validation curves, or one of them
    cli("draw", "train", tmp_path / "log.csv", "--out", tmp_path / "log.svg")
    svg = (tmp_path / "log.svg").read_text()
    assert svg.count('class="series"') == 4 and ">step<" in svg and "window:4 validation" in svg
    val = tmp_path / "val.csv"
    val.write_text("".join(",".join(r.split(",")[i] for i in (0, 1, 3)) + "\n"
                           for r in (tmp_path / "log.csv").read_text().splitlines()))
    cli("draw", "train", val, "--out", tmp_path / "val.svg")
    assert (tmp_path / "val.svg").read_text().count('class="series"') == 2


def test_the_reported_deviation_is_the_batches_deviation(tmp_path, text):
    """The report's +-: the val mean's standard deviation from the batches drawn.
    An evaluation draws the same k-th batch for any --eval-iters, so the logs of
    --eval-iters 1..5 give each batch's loss: k m_k - (k - 1) m_(k-1)."""
    small = (*SMALL[:-4], "--seed", 7)   # SMALL without its --eval-iters
    assert "--eval-iters" not in small
    means, reported = [], []
    for n in range(1, 6):
        r = run_lm("--text", text, *small, "--iters", 10, "--eval-every", 10, "--eval-iters", n,
                   "--log", tmp_path / "log.csv")
        means.append(float((tmp_path / "log.csv").read_text().splitlines()[-1].split(",")[3]))
        row = next(l for l in r.stdout.split("\npattern ")[-1].splitlines()
                   if l.startswith("causal"))
        reported.append(row.split()[4])
    losses = [k * m - (k - 1) * p for k, m, p in zip(range(1, 6), means, [0] + means)]
    sem = np.std(losses, ddof=1) / np.sqrt(5)
    assert sem > 0.005   # batches that differ: the check below can fail
    assert float(reported[-1]) == pytest.approx(sem, abs=2e-4), (reported, losses)
    assert reported[0] == "-"   # one batch: no spread to measure


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


# ---- sampling, and the model from Python (attngraph.lm)

import attngraph  # noqa: E402
import attngraph.lm as agl  # noqa: E402


def sample(*args, check=True):
    return cli("lm", "sample", *args, check=check)


@pytest.fixture
def saved(tmp_path, text):
    """A small model `lm train --save` wrote (with biases, under window:6)."""
    run_lm("--text", text, *SMALL, "--iters", 40, "--eval-every", 40, "--bias", "--pattern",
           "window:6", "--save", tmp_path / "m", "--quiet")
    return tmp_path / "m"


def torch_logits(m, ids):
    """A GPT in float64 from the formulas (torch, not the library): the logits
    of one sequence ids [T] under m's pattern, or each block under its own
    ('A|B|...'): each mask from the pattern's graph, and causal."""
    import torch
    import torch.nn.functional as F
    T, D, H = len(ids), m.D, m.heads
    d = D // H
    parts = m.pattern.split("|")
    masks = []
    for part in parts if len(parts) > 1 else parts * len(m.layers):
        g = attngraph.Graph.pattern(part, T)
        mask = torch.zeros(T, T, dtype=torch.bool)
        mask[torch.tensor(g.dst), torch.tensor(g.src)] = True
        masks.append(mask & torch.ones(T, T, dtype=torch.bool).tril())

    def t(a):
        return None if a is None else torch.tensor(np.asarray(a, np.float64))
    x = t(m.wte)[torch.tensor(ids)] + t(m.wpe)[:T]
    for w, mask in zip(m.layers, masks):
        h = F.layer_norm(x, (D,), t(w.ln_weight), t(w.ln_bias), 1e-5)
        q, k, v = (h @ t(W).T + (0 if b is None else t(b))
                   for W, b in ((w.wq, w.bq), (w.wk, w.bk), (w.wv, w.bv)))
        q, k, v = (a.reshape(T, H, d).transpose(0, 1) for a in (q, k, v))
        att = (q @ k.transpose(1, 2) / np.sqrt(d)).masked_fill(~mask, float("-inf"))
        y = (att.softmax(-1) @ v).transpose(0, 1).reshape(T, D)
        x = x + y @ t(w.wo).T + (0 if w.bias is None else t(w.bias))
        h = F.layer_norm(x, (D,), t(w.ln2_weight), t(w.ln2_bias), 1e-5)
        f = F.gelu(h @ t(w.w1).T + (0 if w.b1 is None else t(w.b1)))
        x = x + f @ t(w.w2).T + (0 if w.b2 is None else t(w.b2))
    x = F.layer_norm(x, (D,), t(m.lnf_weight), t(m.lnf_bias), 1e-5)
    return (x @ t(m.wte).T).numpy()


def test_python_reads_the_cli_model_and_matches_a_float64_gpt(saved, text):
    pytest.importorskip("torch")
    m = agl.LM.load(saved)
    assert (m.V, m.block, m.D, len(m.layers), m.heads, m.bias, m.pattern) == \
        (len(set(text.read_text())), 16, 16, 2, 2, True, "window:6")
    t = agl.Text.read(text)
    assert t.vocab == m.vocab
    x, y = t.batch("val", 3, 16, np.random.default_rng(1))
    got = m.logits(x)
    for b in range(3):
        want = torch_logits(m, x[b])
        assert np.abs(got[b] - want).max() <= 2e-5 * (1 + np.abs(want).max())
    want = np.mean([np.log(np.exp(r - r.max()).sum()) + r.max() - r[c]
                    for b in range(3) for r, c in zip(torch_logits(m, x[b]), y[b])])
    assert m.loss(x, y) == pytest.approx(want, rel=1e-5)


def test_a_mask_per_block_from_the_cli_to_python(tmp_path, text):
    """`lm train --pattern 'A|B'` trains block 1 under A and block 2 under B:
    model.txt records it, Python reads it and computes what a float64 GPT
    with those masks computes, and samples what `lm sample` samples."""
    pytest.importorskip("torch")
    run_lm("--text", text, *SMALL, "--iters", 20, "--eval-every", 20, "--pattern",
           "window:3|causal", "--save", tmp_path / "m", "--quiet")
    assert "pattern window:3|causal\n" in (tmp_path / "m" / "model.txt").read_text()
    m = agl.LM.load(tmp_path / "m")
    assert m.pattern == "window:3|causal"
    x, y = agl.Text.read(text).batch("val", 2, 16, np.random.default_rng(2))
    got = m.logits(x)
    for b in range(2):
        want = torch_logits(m, x[b])
        assert np.abs(got[b] - want).max() <= 2e-5 * (1 + np.abs(want).max())
    # the first block's window matters: under causal everywhere the logits differ
    assert np.abs(m.logits(x, pattern="causal") - got).max() > 1e-4
    r = sample("--model", tmp_path / "m", "--tokens", 40, "--seed", 5)
    assert r.stdout == m.sample(40, seed=5) + "\n"
    # a trainer under the pattern a block: its loss is the model's
    tr = agl.Trainer(m, lr=1e-3)
    assert tr.loss(x, y) == m.loss(x, y)
    with pytest.raises(attngraph.Error, match="3 patterns for 2 blocks"):
        m.loss(x, y, pattern="causal|causal|causal")
    r = run_lm("--text", text, *SMALL, "--iters", 1, "--pattern", "causal|wndow:2",
               check=False)
    assert r.returncode == 2 and "block 2's pattern 'wndow:2'" in r.stderr, r.stderr


_M, _GAMMA = 2**64 - 1, 0x9E3779B97F4A7C15


def _mix(z):   # splitmix64's finaliser, as src/base/rng.h
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & _M
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB & _M
    return z ^ (z >> 31)


def draws(seed, n):
    """The uniform draws ag_lm_generate makes for seed: (seed, stream 1), k-th."""
    state = _mix((seed ^ (1 * 0xD1B54A32D192ED03 & _M)) + _GAMMA & _M)
    return [(_mix(state + (k + 1) * _GAMMA & _M) >> 11) * 2.0**-53 for k in range(n)]


def test_sampling_with_the_cache_equals_recomputing_the_prefix(saved):
    """Text through the cache, past the block (the context starts over from
    its last half), against each token drawn from its logits recomputed from
    its whole context by LM.logits (softmax in float64, the same draws)."""
    m = agl.LM.load(saved)
    T, n = m.block, 3 * m.block
    prompt = m.encode("the ")
    got = m.encode(m.sample(n, start="the ", seed=11))
    ids, base, u = list(prompt), 0, draws(11, n)
    for at in range(len(prompt) + n - 1):
        if at - base == T:       # the decoder's start over: the last T/2 before `at`
            base = at - T // 2
        if at < len(prompt) - 1:
            continue
        context = ids[base:at + 1]
        padded = np.array(context + [0] * (T - len(context)))
        z = m.logits(padded[None])[0, len(context) - 1].astype(np.float64)
        p = np.exp(z - z.max())
        ids.append(int(np.searchsorted(np.cumsum(p), u[len(ids) - len(prompt)] * p.sum(),
                                       side="right")))
    assert list(got) == ids


def test_cli_and_python_draw_the_same_text(saved, tmp_path):
    m = agl.LM.load(saved)
    for args, kw in [((), {}), (("--temperature", "0.7", "--top-k", "3", "--seed", "5"),
                                dict(temperature=0.7, top_k=3, seed=5))]:
        r = sample("--model", saved, "--tokens", 60, "--start", "a ", *args)
        assert r.stdout == m.sample(60, start="a ", **kw) + "\n"
    assert sample("--model", saved, "--tokens", 60, "--seed", 2).stdout != \
        sample("--model", saved, "--tokens", 60, "--seed", 3).stdout


def test_a_model_trained_in_python_samples_from_the_cli(tmp_path, text):
    t = agl.Text.read(text)
    m = agl.LM.init(t.vocab, block=16, dim=16, layers=2, heads=2, seed=3)
    tr = agl.Trainer(m, lr=3e-3)
    rng = np.random.default_rng(0)
    x, y = t.batch("val", 8, 16, rng)
    before = m.loss(x, y)
    for _ in range(60):
        tr.step(*t.batch("train", 4, 16, rng))
    assert m.loss(x, y) < before - 0.5
    assert tr.loss(x, y) == m.loss(x, y)   # on the trainer's kept tape: the same bits
    m.save(tmp_path / "py")
    again = agl.LM.load(tmp_path / "py")
    assert np.array_equal(again.logits(x), m.logits(x))
    r = sample("--model", tmp_path / "py", "--tokens", 50, "--seed", 9)
    assert r.stdout == m.sample(50, seed=9) + "\n"


def test_a_folder_of_0_2_loads(saved, tmp_path):
    """0.2 wrote lm.txt where model.txt is now: the tool and Python still read it,
    and the same model comes out (lm.txt's first line was "# attngraph lm model")."""
    text = (saved / "model.txt").read_text()
    assert text.startswith("# attngraph language model\n")
    before = sample("--model", saved, "--tokens", 30, "--seed", 4).stdout
    (saved / "lm.txt").write_text(text.replace("language model", "lm model"))
    (saved / "model.txt").unlink()
    assert sample("--model", saved, "--tokens", 30, "--seed", 4).stdout == before
    m = agl.LM.load(saved)
    assert m.pattern == "window:6" and m.bias and m.heads == 2
    m.save(tmp_path / "again")   # written as today's folder
    assert (tmp_path / "again" / "model.txt").read_text() == text
    assert not (tmp_path / "again" / "lm.txt").exists()
    for name in os.listdir(saved):
        if name.endswith(".npy"):
            assert (saved / name).read_bytes() == (tmp_path / "again" / name).read_bytes()


def test_sample_refusals(saved, tmp_path):
    r = sample("--model", tmp_path / "none", check=False)
    assert r.returncode == 1 and "none/model.txt" in r.stderr
    r = sample("--model", saved, "--start", "cat \u00e9", check=False)
    assert r.returncode == 2 and "character 5 (U+00E9) is not in the model's vocabulary" \
        in r.stderr
    r = sample("--model", saved, "--temperature", "-1", check=False)
    assert r.returncode == 2 and "temperature" in r.stderr
    r = sample("--model", saved, "--start", "", check=False)
    assert r.returncode == 2 and "--start is empty" in r.stderr
    model_txt = (saved / "model.txt").read_text()
    for was, now, message in [("heads 2", "heads two", "model.txt:5: 'heads two'"),
                              ("heads 2\n", "", "has no 'heads' line"),
                              ("block 16", "block 16 16", "model.txt:3: 'block 16 16'"),
                              ("pattern window:6", "pattern bogus:1",
                               "model.txt:8: pattern 'bogus:1': unknown pattern 'bogus'")]:
        (saved / "model.txt").write_text(model_txt.replace(was, now))
        r = sample("--model", saved, check=False)
        assert r.returncode == 1 and message in r.stderr, r.stderr
        with pytest.raises(attngraph.Error, match=message.split(":")[0]):
            agl.LM.load(saved)
    (saved / "model.txt").write_text(model_txt)
    # a graph model's reader names what the folder is
    r = cli("run", "--weights", saved, "--pattern", "causal", "--nodes", 4, "--dim", 16,
            check=False)
    assert r.returncode == 2 and "'vocab' is a language model's key" in r.stderr, r.stderr
    np.save(saved / "round-2" / "w1.npy", np.zeros((3, 16), np.float32))
    r = sample("--model", saved, check=False)
    assert r.returncode == 1 and "w1.npy" in r.stderr and "[64, 16]" in r.stderr
    with pytest.raises(attngraph.Error, match="w1"):
        agl.LM.load(saved)


def test_text_refusals(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(attngraph.Error, match="empty.txt is empty"):
        agl.Text.read(empty)
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(attngraph.Error, match=r"byte 3 \(0xe9\)"):
        agl.Text.read(bad)
    assert agl.Text.read(bad, bytes=True).vocab == sorted(set(b"caf\xe9"))


def test_the_batch_graph_is_copies_of_one_sequence(text):
    """A random pattern draws its sources within a sequence, the same for every
    sequence: Python's batch_graph and the CLI's table agree on the edges."""
    for spec in ("causal&random:5", "window:4", "causal"):
        one, g = agl.batch_graph(spec, 16, 1), agl.batch_graph(spec, 16, 4)
        assert g.N == 64 and g.E == 4 * one.E
        assert np.all(g.src // 16 == g.dst // 16) and np.all(g.src <= g.dst)
        for b in range(4):
            mine = (g.dst // 16) == b
            assert sorted(zip(g.dst[mine] - 16 * b, g.src[mine] - 16 * b)) == \
                sorted(zip(one.dst, one.src))
        r = run_lm("--text", text, *SMALL, "--iters", 0, "--pattern", spec)
        row = [l for l in r.stdout.splitlines() if l.startswith(spec + " ")][-1]   # the table
        assert float(row.split()[1]) == pytest.approx(g.E / g.N, abs=0.005)


def test_a_pattern_with_commas_is_one_field_of_the_log(tmp_path, text):
    """fixed:8,2 is quoted in the CSV (RFC 4180): csv reads it back whole, and
    draw train names its curves by it."""
    import csv
    run_lm("--text", text, *SMALL, "--iters", 4, "--eval-every", 2, "--pattern", "fixed:8,2",
           "--pattern", "causal", "--log", tmp_path / "log.csv", "--quiet")
    rows = list(csv.reader(open(tmp_path / "log.csv")))
    assert [r[0] for r in rows[1:]] == ["fixed:8,2"] * 3 + ["causal"] * 3
    assert all(len(r) == 8 for r in rows)
    cli("draw", "train", tmp_path / "log.csv", "--out", tmp_path / "log.svg")
    assert "fixed:8,2 validation" in (tmp_path / "log.svg").read_text()


@pytest.mark.parametrize("name,series,one", [("lm-study", 9, "fixed:16,4 validation"),
                                              ("lm-study-1024", 10, "fixed:64,8 validation")])
def test_the_study_picture_is_the_study_log_drawn(tmp_path, name, series, one):
    """graphs/pictures/lm-study*.svg (the README's) are `draw train --held-out` of the
    studies' logs, graphs/lm-study*.csv, as `make pictures` draws them."""
    cli("draw", "train", os.path.join(ROOT, "graphs", name + ".csv"), "--held-out",
        "--title", STUDY_TITLES[name], "--out", tmp_path / "study.svg")
    drawn = (tmp_path / "study.svg").read_text()
    assert drawn == open(os.path.join(ROOT, "graphs", "pictures", name + ".svg")).read()
    assert drawn.count('class="series"') == series and one in drawn
    r = cli("draw", "rounds", os.path.join(ROOT, "graphs", "lm-study.csv"), "--held-out",
            "--out", tmp_path / "no.svg", check=False)
    assert r.returncode == 2 and "draw train" in r.stderr


def test_mistakes_found_before_training(tmp_path, text):
    """A bad or repeated --pattern is a usage error before any pattern trains, and a
    folder where --save would write a file is refused before training too."""
    for patterns, message in [(("causal", "window:"), "--pattern 'window:'"),
                              (("causal", "causal"), "--pattern causal given twice")]:
        args = [a for p in patterns for a in ("--pattern", p)]
        r = run_lm("--text", text, *SMALL, "--iters", 5000, *args, "--log",
                   tmp_path / "log.csv", check=False)
        assert r.returncode == 2 and message in r.stderr, r.stderr
        assert "step" not in r.stdout and not (tmp_path / "log.csv").exists()
    (tmp_path / "m" / "round-2" / "wq.npy").mkdir(parents=True)   # in the model's way
    r = run_lm("--text", text, *SMALL, "--iters", 5000, "--save", tmp_path / "m", check=False)
    assert r.returncode == 1 and "round-2/wq.npy is a folder" in r.stderr, r.stderr
    assert "step" not in r.stdout
    # A folder where only another model's file would go is not in the way: attention-only
    # blocks write no w1.npy, rotary positions no wpe.npy (they are not written either)
    (tmp_path / "n" / "round-1" / "w1.npy").mkdir(parents=True)
    (tmp_path / "n" / "wpe.npy").mkdir()
    run_lm("--text", text, *SMALL, "--iters", 2, "--no-mlp", "--positions", "rope",
           "--save", tmp_path / "n")
    assert (tmp_path / "n" / "round-1" / "wq.npy").is_file()
    assert (tmp_path / "n" / "round-1" / "w1.npy").is_dir() and (tmp_path / "n" / "wpe.npy").is_dir()


def test_sample_streams_and_reads_starts_of_any_kind(saved, tmp_path, text):
    import subprocess
    import time
    from conftest import CLI
    p = subprocess.Popen([CLI, "lm", "sample", "--model", str(saved), "--tokens", "100000000",
                          "--threads", "1"], stdout=subprocess.PIPE)
    t0 = time.time()
    first = p.stdout.read(40)   # long before the 1e8 tokens: each comes out as drawn
    p.kill()
    p.wait()
    assert len(first) == 40 and time.time() - t0 < 30
    r = subprocess.run([CLI, "lm", "sample", "--model", str(saved), "--start", b"\xff\xfe"],
                       capture_output=True)
    assert r.returncode == 2 and b"byte 0 (0xff) does not start a UTF-8 character" in r.stderr
    assert b"--bytes" not in r.stderr
    # a bytes model from Python: a str start is read as latin-1
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(("caf\xe9 au lait " * 300).encode("latin-1"))
    run_lm("--text", bad, *SMALL, "--iters", 5, "--bytes", "--save", tmp_path / "b", "--quiet")
    m = agl.LM.load(tmp_path / "b")
    assert m.sample(5, start="caf\xe9", seed=3) == m.sample(5, start=b"caf\xe9", seed=3)
    r = subprocess.run([CLI, "lm", "sample", "--model", str(tmp_path / "b"), "--tokens", "30",
                        "--seed", "3", "--start", b"caf\xe9"], capture_output=True)
    assert r.stdout == m.sample(30, start="caf\xe9", seed=3).encode("latin-1") + b"\n"
    with pytest.raises(attngraph.Error, match=r"byte 0x7A is not in the model's vocabulary"):
        m.sample(5, start="z")
    for kw in (dict(tokens=-1), dict(tokens=2.5), dict(seed=-3)):
        with pytest.raises(attngraph.Error, match="expected an integer >= 0"):
            m.sample(**kw)


def test_vocab_refusals_and_an_atomic_save(saved, tmp_path):
    vocab = np.load(saved / "vocab.npy")
    np.save(saved / "vocab.npy", np.append(vocab[:-1], 0xDFFF))
    r = sample("--model", saved, check=False)
    assert r.returncode == 1 and "no surrogates" in r.stderr
    np.save(saved / "vocab.npy", vocab)
    # another model's save that cannot finish leaves the folder as it was
    other = agl.LM.init(agl.LM.load(saved).vocab, block=8, dim=8, layers=2, heads=2, seed=9)
    (saved / "round-2" / "wq.npy").unlink()
    (saved / "round-2" / "wq.npy").mkdir()
    before = {p: p.read_bytes() for p in saved.rglob("*") if p.is_file()}
    with pytest.raises(attngraph.Error, match="wq.npy: is a directory"):
        other.save(saved)
    assert {p: p.read_bytes() for p in saved.rglob("*") if p.is_file()} == before
    assert not [p for p in saved.parent.iterdir() if p.name.startswith(".tmp-lm-")]


def test_a_trainer_on_its_kept_tape_steps_as_on_new_ones(text):
    """Trainer keeps one batch graph and the library's tape across steps; the
    losses and weights are those of steps that each make a new tape."""
    t = agl.Text.read(text)
    runs = []
    for keep in (True, False):
        m = agl.LM.init(t.vocab, block=16, dim=16, layers=2, heads=2, seed=3)
        tr = agl.Trainer(m, lr=3e-3, dropout=0.1)
        rng = np.random.default_rng(1)
        losses = []
        for step in range(5):
            if not keep:
                tr._free_tape()
            batch = 4 if step < 4 else 2   # another batch size: a new graph and tape
            losses.append(tr.step(*t.batch("train", batch, 16, rng)))
        runs.append((losses, m.wte.copy(), m.layers[1].wq.copy()))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    np.testing.assert_array_equal(runs[0][2], runs[1][2])
