"""Token ids and example sets from Python (attngraph.lm): the recall tasks as
`lm task` writes them, the readers' refusals, a model of token ids saved and
loaded, and the accuracy `lm train` reports against the saved model's logits
scored in numpy."""
import os
import re

import numpy as np
import pytest

import attngraph as ag
import attngraph.lm as lm
from conftest import CLI, ROOT, cli


def test_tasks_are_the_command_line_s(tmp_path):
    cli("lm", "task", "mqar", "--vocab", 64, "--length", 32, "--pairs", 4, "--train", 50,
        "--val", 10, "--seed", 3, "--out", tmp_path / "mq", "--quiet")
    x, y, d = lm.mqar(64, 32, 4, 60, seed=3)
    np.testing.assert_array_equal(np.load(tmp_path / "mq" / "train_inputs.npy"), x[:50])
    np.testing.assert_array_equal(np.load(tmp_path / "mq" / "val_targets.npy"), y[50:])
    np.testing.assert_array_equal(np.load(tmp_path / "mq" / "val_distance.npy"), d[50:])
    assert ((y == -100) | ((y >= 32) & (y < 64))).all() and ((y >= 0).sum(1) == 4).all()
    # example k from (seed, k) alone: a slice is the same examples
    x2, _, _ = lm.mqar(64, 32, 4, 5, first=20, seed=3)
    np.testing.assert_array_equal(x2, x[20:25])
    cx, cy, cd = lm.copy_task(10, 12, 3, seed=2)
    np.testing.assert_array_equal(cy[:, 6:], cx[:, :6])
    assert (cd[:, 6:] == 6).all() and (cy[:, :6] == -100).all()
    with pytest.raises(ag.Error, match="5 pairs in 16 tokens"):
        lm.mqar(64, 16, 5, 1)
    ex = lm.Examples.read(str(tmp_path / "mq"))
    assert ex.vocab == 64 and ex.length == 32 and ex.train[0].shape == (50, 32)
    assert (ex.val[1] == np.where(y[50:] == -100, -1, y[50:])).all()
    # --fill zero: the same pairs and queries, 0 between the queries (Zoology's Figure 2)
    cli("lm", "task", "mqar", "--vocab", 64, "--length", 32, "--pairs", 4, "--train", 50,
        "--val", 10, "--seed", 3, "--fill", "zero", "--out", tmp_path / "z", "--quiet")
    zx, zy, zd = lm.mqar(64, 32, 4, 60, seed=3, zero_fill=True)
    np.testing.assert_array_equal(np.load(tmp_path / "z" / "train_inputs.npy"), zx[:50])
    kept = (np.arange(32) < 8) | (y >= 0)   # the pairs and the queries
    np.testing.assert_array_equal(zx[kept], x[kept])
    assert (zx[~kept] == 0).all() and (zy == y).all() and (zd == d).all()
    with pytest.raises(ag.Error, match="zero_fill is MQAR's"):
        lm._task("AG_TASK_COPY", 10, 12, 1, 0, 1, zero_fill=True)


def test_token_streams_and_their_refusals(tmp_path):
    ids = np.array([1, 256, 65535, 7], np.uint16)
    ids.astype("<u2").tofile(tmp_path / "t.bin")
    t = lm.Tokens.read(str(tmp_path / "t.bin"))
    assert t.ids.tolist() == [1, 256, 65535, 7] and t.vocab == 65536
    with pytest.raises(ag.Error, match="token 2 is 65535; expected an id in 0..999"):
        lm.Tokens.read(str(tmp_path / "t.bin"), vocab=1000)
    (tmp_path / "odd.bin").write_bytes(b"abc")
    with pytest.raises(ag.Error, match="3 bytes, an odd count"):
        lm.Tokens.read(str(tmp_path / "odd.bin"))
    np.save(tmp_path / "in.npy", np.zeros((2, 3), np.int64))
    np.save(tmp_path / "tg.npy", np.zeros((3, 2), np.int64))
    (tmp_path / "ex").mkdir()
    for s in ("train", "val"):
        np.save(tmp_path / "ex" / (s + "_inputs.npy"), np.zeros((2, 3), np.int64))
        np.save(tmp_path / "ex" / (s + "_targets.npy"), np.zeros((3, 2), np.int64))
    with pytest.raises(ag.Error, match=r"train_targets.npy is \[3, 2\]; expected \[2, 3\]"):
        lm.Examples.read(str(tmp_path / "ex"))


def test_a_model_of_ids_saves_loads_and_evaluates(tmp_path):
    m = lm.LM.init(50, block=8, dim=16, layers=1, heads=2, seed=4)
    assert m.ids and m.V == 50
    m.save(str(tmp_path / "m"))
    assert "vocab 50 ids" in (tmp_path / "m" / "model.txt").read_text()
    assert not (tmp_path / "m" / "vocab.npy").exists()
    back = lm.LM.load(str(tmp_path / "m"))
    assert back.ids and back.vocab == 50
    x = np.random.default_rng(1).integers(0, 50, (3, 8))
    y = np.where(np.arange(8) % 2 == 0, -100, (x + 1) % 50)
    np.testing.assert_array_equal(back.logits(x), m.logits(x))
    loss, acc = back.evaluate(x, y)
    logits = m.logits(x).astype(np.float64)
    scored = y >= 0
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    want = (lse - np.take_along_axis(logits, np.maximum(y, 0)[..., None], -1)[..., 0])[scored]
    assert loss == pytest.approx(want.mean(), rel=1e-5)
    assert acc == (logits.argmax(-1) == y)[scored].mean()
    with pytest.raises(ag.Error, match="expected ids in 0..49"):
        back.sample(3, start=[3, 50])
    out = back.sample(4, start=[3, 4], temperature=0)
    assert len(out) == 6 and out[:2].tolist() == [3, 4]


def test_lm_train_s_accuracy_is_the_saved_model_s(tmp_path):
    """The val_acc of `lm train --examples` is the saved model's accuracy over
    the whole validation set, scored here from its logits."""
    cli("lm", "task", "mqar", "--vocab", 32, "--length", 16, "--pairs", 2, "--train", 500,
        "--val", 40, "--out", tmp_path / "mq", "--quiet")
    cli("lm", "train", "--examples", tmp_path / "mq", "--layers", 1, "--heads", 2, "--dim", 16,
        "--iters", 30, "--eval-every", 30, "--batch", 16, "--save", tmp_path / "m", "--log",
        tmp_path / "log.csv", "--predictions", tmp_path / "pred.npy", "--quiet")
    last = (tmp_path / "log.csv").read_text().splitlines()[-1].split(",")
    m = lm.LM.load(str(tmp_path / "m"))
    ex = lm.Examples.read(str(tmp_path / "mq"))
    x, y = ex.val
    logits = m.logits(x)
    acc = (logits.argmax(-1) == y)[y >= 0].mean()
    assert float(last[7]) == pytest.approx(acc, abs=5e-7)
    loss, acc2 = m.evaluate(x, y)
    assert acc2 == acc and float(last[3]) == pytest.approx(loss, abs=2e-6)
    # --predictions: the likeliest token at each scored position, -100 elsewhere
    want = np.where(y >= 0, logits.argmax(-1), -100)
    pred = np.load(tmp_path / "pred.npy")
    assert pred.shape == (1,) + x.shape and pred.dtype == np.int64
    np.testing.assert_array_equal(pred[0], want)
    np.testing.assert_array_equal(m.evaluate(x, y, predictions=True)[2], want)
    # lm sample --examples: the saved model scored again, batches of another size
    r = cli("lm", "sample", "--model", tmp_path / "m", "--examples", tmp_path / "mq", "--batch",
            7, "--predictions", tmp_path / "again.npy")
    said = re.search(r"40 validation examples, (\d+) scored tokens: loss ([\d.]+), accuracy "
                     r"([\d.]+)", r.stdout)
    assert said and int(said[1]) == (y >= 0).sum()
    assert float(said[2]) == pytest.approx(loss, abs=1e-4) and float(said[3]) == pytest.approx(acc, abs=1e-4)
    np.testing.assert_array_equal(np.load(tmp_path / "again.npy"), want)
    cli("lm", "task", "mqar", "--vocab", 32, "--length", 32, "--pairs", 2, "--train", 5,
        "--val", 5, "--out", tmp_path / "long", "--quiet")
    r = cli("lm", "sample", "--model", tmp_path / "m", "--examples", tmp_path / "long",
            "--predictions", tmp_path / "long.npy", check=False)
    assert r.returncode == 1 and "examples of 32 tokens; expected at most the model's block, 16" in r.stderr
    assert not (tmp_path / "long.npy").exists()


def test_lm_train_predictions_a_slice_a_pattern_and_refusals(tmp_path):
    cli("lm", "task", "copy", "--vocab", 20, "--length", 12, "--train", 100, "--val", 7,
        "--out", tmp_path / "cp", "--quiet")
    args = ["lm", "train", "--examples", tmp_path / "cp", "--layers", 1, "--heads", 1, "--dim",
            8, "--iters", 3, "--batch", 4, "--quiet", "--predictions", tmp_path / "p.npy"]
    cli(*args, "--pattern", "causal", "--pattern", "window:2")
    pred = np.load(tmp_path / "p.npy")
    y = np.load(tmp_path / "cp" / "val_targets.npy")
    assert pred.shape == (2, 7, 12)
    assert ((pred == -100) == (y < 0)).all() and ((pred[:, y >= 0] >= 0) & (pred[:, y >= 0] < 20)).all()
    r = cli("lm", "train", "--text", tmp_path / "cp" / "val_targets.npy", "--predictions",
            tmp_path / "q.npy", check=False)
    assert r.returncode == 2 and "--predictions are an example set's" in r.stderr
    r = cli(*args[:-1], tmp_path / "q.csv", check=False)
    assert r.returncode == 2 and "q.csv" in r.stderr and not (tmp_path / "q.csv").exists()


def _torch_rope(x, pos, d):
    """RoFormer's turn of x [..., T, d] (pairs j, j + d/2) at positions pos, in float64."""
    import torch
    j = torch.arange(d // 2, dtype=torch.float64)
    a = pos[:, None].double() * 10000.0 ** (-2.0 * j / d)
    c, s = torch.cos(a), torch.sin(a)
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1)


def test_rotary_positions_are_roformer_s(tmp_path):
    """A model with rotary positions: its logits against a float64 torch GPT
    that turns q and k by RoFormer's formula (and has no wpe); saved with
    `positions rope`, loaded the same; `lm train --positions rope` saves it."""
    import torch
    m = lm.LM.init(11, block=6, dim=8, layers=2, heads=2, seed=3, positions="rope")
    assert m.wpe is None and m.positions == "rope"
    x = np.random.default_rng(2).integers(0, 11, (2, 6))
    D, H, d, T = 8, 2, 4, 6
    f = lambda a: torch.from_numpy(np.asarray(a, np.float64))
    h = f(m.wte)[torch.from_numpy(x)]
    ln = lambda z, w, b=None: torch.nn.functional.layer_norm(z, (D,), f(w), None, 1e-5)
    mask = torch.ones(T, T).tril().bool()
    pos = torch.arange(T)
    for w in m.layers:
        z = ln(h, w.ln_weight)
        q, k, v = (z @ f(a).T for a in (w.wq, w.wk, w.wv))
        split = lambda t: t.view(2, T, H, d).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        q, k = _torch_rope(q, pos, d), _torch_rope(k, pos, d)
        s = (q @ k.transpose(-1, -2)) / d ** 0.5
        a = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v
        h = h + a.transpose(1, 2).reshape(2, T, D) @ f(w.wo).T
        z = ln(h, w.ln2_weight)
        h = h + torch.nn.functional.gelu(z @ f(w.w1).T) @ f(w.w2).T
    want = ln(h, m.lnf_weight) @ f(m.wte).T
    np.testing.assert_allclose(m.logits(x), want.numpy(), atol=2e-5)
    m.save(str(tmp_path / "r"))
    assert "positions rope" in (tmp_path / "r" / "model.txt").read_text()
    assert not (tmp_path / "r" / "wpe.npy").exists()
    np.testing.assert_array_equal(lm.LM.load(str(tmp_path / "r")).logits(x), m.logits(x))
    cli("lm", "task", "copy", "--vocab", 12, "--length", 8, "--train", 50, "--val", 8, "--out",
        tmp_path / "cp", "--quiet")
    for p in ("rope", "none"):
        cli("lm", "train", "--examples", tmp_path / "cp", "--layers", 1, "--heads", 2, "--dim",
            8, "--iters", 2, "--positions", p, "--save", tmp_path / p, "--quiet")
        assert ("positions %s\n" % p) in (tmp_path / p / "model.txt").read_text()
        assert lm.LM.load(str(tmp_path / p)).positions == p
    r = cli("lm", "train", "--examples", tmp_path / "cp", "--heads", 2, "--dim", 6,
            "--positions", "rope", check=False)
    assert r.returncode == 2 and "heads of odd width 3" in r.stderr


def test_attention_only_blocks_save_load_and_train(tmp_path):
    """mlp=False (lm train --no-mlp): blocks without their feed-forward
    sublayer, saved as "mlp no" and read back so; the command line's model of
    the same seed is Python's, and its trained folder scores as it said."""
    m = lm.LM.init(40, block=8, dim=16, layers=2, heads=2, seed=3, positions="rope", mlp=False)
    assert all(w.w1 is None and w.w2 is None and w.ln2_weight is None for w in m.layers)
    m.save(str(tmp_path / "m"))
    assert "mlp no" in (tmp_path / "m" / "model.txt").read_text()
    back = lm.LM.load(str(tmp_path / "m"))
    x = np.random.default_rng(2).integers(0, 40, (2, 8))
    np.testing.assert_array_equal(back.logits(x), m.logits(x))
    full = lm.LM.init(40, block=8, dim=16, layers=2, heads=2, seed=3, positions="rope")
    assert not np.array_equal(full.logits(x), m.logits(x))
    cli("lm", "task", "mqar", "--vocab", 40, "--length", 8, "--pairs", 2, "--train", 64,
        "--val", 8, "--out", tmp_path / "mq", "--quiet")
    cli("lm", "train", "--examples", tmp_path / "mq", "--layers", 2, "--heads", 2, "--dim", 16,
        "--positions", "rope", "--no-mlp", "--iters", 0, "--seed", 3, "--save", tmp_path / "c",
        "--quiet")
    c = lm.LM.load(str(tmp_path / "c"))
    np.testing.assert_array_equal(c.logits(x), m.logits(x))


def test_batches_that_score_nothing_are_passed_over(tmp_path):
    """Rows of an example set may score nothing (all -100): a batch of such rows
    is no step and no part of an evaluation (it had failed with the loss's
    message); the accuracy is still the saved model's over the scored rows."""
    x, y, _ = lm.mqar(32, 16, 2, 560, seed=5)
    y = y.copy()
    y[:490] = -100        # all but 10 training rows: most batches score nothing
    y[500:520] = -100     # the first validation batch of 16 and more
    d = tmp_path / "ex"
    d.mkdir()
    for split, rows in (("train", slice(0, 500)), ("val", slice(500, 560))):
        np.save(d / ("%s_inputs.npy" % split), x[rows])
        np.save(d / ("%s_targets.npy" % split), y[rows])
    (tmp_path / "m" / "vocab.npy").mkdir(parents=True)   # token ids write no vocabulary
    r = cli("lm", "train", "--examples", d, "--layers", 1, "--heads", 2, "--dim", 16, "--iters",
            20, "--eval-every", 20, "--eval-iters", 50, "--batch", 16, "--save", tmp_path / "m",
            "--log", tmp_path / "log.csv", "--predictions", tmp_path / "p.npy")
    last = (tmp_path / "log.csv").read_text().splitlines()[-1].split(",")
    m = lm.LM.load(str(tmp_path / "m"))
    vx, vy = x[500:], y[500:]
    loss, acc, said = m.evaluate(vx[20:], vy[20:], predictions=True)
    assert float(last[7]) == pytest.approx(acc, abs=5e-7)
    assert float(last[3]) == pytest.approx(loss, abs=2e-6)
    pred = np.load(tmp_path / "p.npy")[0]   # the rows passed over say -100, as they score
    assert (pred[:20] == -100).all()
    np.testing.assert_array_equal(pred[20:], said)
    ms = [l for l in r.stdout.splitlines() if l.startswith("causal ")][-1].split()[-1]
    assert float(ms) > 0   # the median of the steps taken, not of the batches passed over
    assert "the whole validation set, 3 batches (1 more passed over: they score nothing)" \
        in r.stdout   # of 4: the first scored nothing
    # the training split's evaluation: draws that all score nothing are refused, not NaN
    y[:500] = -100
    y[3, 5] = 20   # one row of 500 scores: a draw of 2 rows almost never finds it
    np.save(d / "train_targets.npy", y[:500])
    r = cli("lm", "train", "--examples", d, "--layers", 1, "--heads", 2, "--dim", 16, "--iters",
            0, "--eval-iters", 1, "--batch", 2, check=False)
    assert r.returncode == 1 and "scored nothing" in r.stderr and "--eval-iters" in r.stderr


def test_the_recall_picture_is_the_study_drawn(tmp_path):
    """graphs/pictures/recall-256.svg (the README's) is tools/study_recall.py
    --redraw of the study's CSVs, graphs/recall-256/, as `make pictures` draws it;
    its frontier is the summary's, its means the seeds', and causal passed the
    0.99 gate on a seed at least."""
    import csv
    import statistics
    import subprocess
    import sys
    title = "MQAR at 256 tokens, 64 pairs, a vocabulary of 4,096: recall under eleven masks"
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "study_recall.py"), "--redraw",
                    os.path.join(ROOT, "graphs", "recall-256"), "--out", tmp_path / "r.svg",
                    "--title", title], check=True)
    drawn = (tmp_path / "r.svg").read_text()
    assert drawn == open(os.path.join(ROOT, "graphs", "pictures", "recall-256.svg")).read()
    with open(os.path.join(ROOT, "graphs", "recall-256", "summary.csv")) as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(ROOT, "graphs", "recall-256", "results.csv")) as f:
        runs = list(csv.DictReader(f))
    assert any(float(r["val_acc"]) >= 0.99 for r in runs if r["mask"] == "causal")
    for r in rows:   # a mask's mean and deviation are its seeds' (statistics, not numpy)
        accs = [float(x["val_acc"]) for x in runs if x["mask"] == r["mask"]]
        assert int(r["seeds"]) == len(accs) >= 1
        assert float(r["acc_mean"]) == pytest.approx(statistics.mean(accs), abs=5e-5)
        sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
        assert float(r["acc_sd"]) == pytest.approx(sd, abs=5e-5)
    for r in rows:   # the frontier: nothing recalls as much with as few edges, and more or fewer
        e, a = float(r["edges_per_token"]), float(r["acc_mean"])
        beaten = any(float(o["edges_per_token"]) <= e and float(o["acc_mean"]) >= a and
                     (float(o["edges_per_token"]) < e or float(o["acc_mean"]) > a) for o in rows)
        assert (r["frontier"] == "1") == (not beaten), r


def test_a_study_grows_a_seed_at_a_time(tmp_path):
    """Seeds run into a study's folder join those there; a mask and seed run
    again replaces its rows; the summary is every seed's."""
    import csv
    import subprocess
    import sys

    def study(*args):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "study_recall.py"),
                            "--cli", CLI, "--out", tmp_path, "--length", "32", "--pairs", "4",
                            "--vocab", "64", "--train", "64", "--val", "16", "--iters", "3",
                            "--batch", "4", "--dim", "16", "--threads", "1"] + list(args),
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    def rows(name):
        with open(tmp_path / name) as f:
            return list(csv.DictReader(f))
    study("--seeds", "1", "--mask", "causal", "--mask", "window:4")
    first = rows("results.csv")
    study("--seeds", "2", "--mask", "causal")
    assert [(r["mask"], r["seed"]) for r in rows("results.csv")] == \
        [("causal", "1"), ("window:4", "1"), ("causal", "2")]
    assert rows("results.csv")[:2] == first   # seed 1's rows are kept as they were
    summary = {r["mask"]: r for r in rows("summary.csv")}
    assert summary["causal"]["seeds"] == "2" and summary["window:4"]["seeds"] == "1"
    accs = [float(r["val_acc"]) for r in rows("results.csv") if r["mask"] == "causal"]
    assert float(summary["causal"]["acc_mean"]) == pytest.approx(sum(accs) / 2, abs=5e-5)
    bins = len([r for r in rows("distance.csv") if r["mask"] == "causal" and r["seed"] == "1"])
    assert bins == 4   # [2, 4), [4, 8), [8, 16), [16, 32)
    marked = (tmp_path / "results.csv").read_text().replace("causal,1,", "causal,1,-1", 1)
    (tmp_path / "results.csv").write_text(marked)   # an edges figure no run writes
    study("--seeds", "1", "--mask", "causal")   # again: its rows replaced, none added
    assert len(rows("results.csv")) == 3 and len(rows("distance.csv")) == 3 * bins
    same = ("mask", "seed", "edges_per_token", "val_acc")   # (the time a step may move)
    assert [rows("results.csv")[0][k] for k in same] == [first[0][k] for k in same]
    assert "| seeds |" in (tmp_path / "study.md").read_text()
    other = tmp_path / "elsewhere"   # a seed run in another folder joins by --join
    study("--out", other, "--seeds", "3", "--mask", "window:4")
    study("--seeds", "", "--join", other)
    assert [(r["mask"], r["seed"]) for r in rows("results.csv")] == \
        [("causal", "1"), ("window:4", "1"), ("causal", "2"), ("window:4", "3")]
    assert len(rows("distance.csv")) == 4 * bins
    assert {r["mask"]: r["seeds"] for r in rows("summary.csv")} == {"causal": "2", "window:4": "2"}
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "study_recall.py"), "--out",
                        tmp_path, "--seeds", "", "--join", tmp_path / "none"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "none: no results.csv rows there" in r.stderr
    assert len(rows("results.csv")) == 4   # nothing written
    before = {f: (tmp_path / f).read_text() for f in ("results.csv", "distance.csv")}
    clash = tmp_path / "clash"   # another run of window:4 under seed 3, with another result
    clash.mkdir()
    (clash / "results.csv").write_text((other / "results.csv").read_text()
                                       .replace("window:4,3,", "window:4,3,-1"))
    (clash / "distance.csv").write_text((other / "distance.csv").read_text())
    old = tmp_path / "old"   # the first layout: distance.csv without its seed column
    old.mkdir()
    (old / "results.csv").write_text((other / "results.csv").read_text()
                                     .replace("window:4,3,", "window:4,4,"))
    (old / "distance.csv").write_text("mask,distance_from,distance_to,recall\nwindow:4,2,3,\n")
    for folders, message in (((other, clash), "window:4 seed 3 is in two runs that disagree"),
                             ((old,), "expected mask,seed,distance_from")):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "study_recall.py"),
                            "--out", tmp_path] + [x for f in folders for x in ("--join", f)],
                           capture_output=True, text=True)
        assert r.returncode == 1 and message in r.stderr, r.stderr
        assert {f: (tmp_path / f).read_text() for f in before} == before   # nothing written
    # the gate reads each seed: causal at 0.99 on seed 1 alone is said, and which seed fell short
    lines = (tmp_path / "results.csv").read_text().splitlines()
    lines = [re.sub(r"^(causal,1,[^,]*,)[^,]*", r"\g<1>0.9950", l) for l in lines]
    (tmp_path / "results.csv").write_text("\n".join(lines) + "\n")
    study("--seeds", "")
    said = (tmp_path / "study.md").read_text()
    assert "Causal recalled 0.99 or more on 1 seed of 2; on seed 2 it recalled" in said, said
    assert (tmp_path / "study.svg").read_text().rstrip().endswith("</svg>")


def test_a_study_file_is_written_whole_or_not_at_all(tmp_path):
    """A row that cannot be written (a column missing) leaves the study's file
    as it was, and nothing beside it."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import study_recall
    finally:
        sys.path.pop(0)
    study_recall.write_rows(tmp_path, "text.csv", [dict(mask="causal", iters=5, text_val_loss="2.0")])
    before = (tmp_path / "text.csv").read_text()
    with pytest.raises(KeyError):
        study_recall.write_rows(tmp_path, "text.csv", [dict(mask="window:4", iters=5)])
    assert (tmp_path / "text.csv").read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["text.csv"]
