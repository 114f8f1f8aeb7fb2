"""The recall study (issue 56, docs/lm.md): what a model can recall under each
mask. For each seed, `attngraph lm task mqar` writes an example set (Zoology's
multi-query associative recall) and one `attngraph lm train` trains the same
initial model on the same batches under every mask, writing the validation
predictions; then, beside it, the text loss of the same masks on a text.

    study_recall.py --cli build/attngraph --out study-256 --length 256 --pairs 64 \\
        [--vocab 4096] [--fill zero] [--seeds 1,2,3] [--mask SPEC ...] [--text input.txt]

keeps in --out, a row a mask and seed: results.csv (edges per token, the
validation accuracy, ms a step) and distance.csv (recall by the distance between
a key and its query, a row a bin too); text.csv (a row a mask: the text loss).
Seeds run into a folder join those already there (a mask and seed run again
replaces its rows), so a study can grow a seed or a mask at a time. From every
row there it writes summary.csv (a row a mask: accuracy mean and standard
deviation over its seeds, on the frontier or not, the text loss), study.md (the
table for the README, printed) and study.svg (the three pictures). `--seeds ''`
runs nothing and writes them again; `--join DIR` adds the rows of a study run in
another folder (another machine, another seed) and runs no seed unless --seeds
names some. Each file is written whole or not at all. Each `lm train` runs alone: time nothing
beside it.

    study_recall.py --redraw DIR --out FILE.svg [--title TEXT]

draws study.svg again from DIR's CSVs (what `make pictures` does for the
README's study, graphs/recall-256/).
"""
import argparse
import csv
import os
import shlex
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

# Causal; windows; Sparse Transformer's strided and fixed; BigBird; Longformer's
# window with a global token; a local layer under a global one; dilated; random;
# and about 32 edges a token spent five ways (window:32, dilated:64,2, random:32,
# fixed:32,4, strided:16+window:16).
MASKS = ["causal", "window:16", "window:32", "window:64", "window:128",
         "strided:16+window:16", "fixed:32,4", "bigbird:16,3,1,1", "window:32+global:1",
         "window:16|causal", "dilated:64,2", "random:32"]


def run(args, what, keep=None):
    """args's standard output; with keep, also written there as it comes (to follow)."""
    if keep is None:
        r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
        out = r.stdout
    else:
        with open(keep, "w") as f:
            r = subprocess.run([str(a) for a in args], stdout=f, stderr=subprocess.PIPE,
                               text=True)
        with open(keep) as f:
            out = f.read()
    if r.returncode:
        sys.exit("study_recall: %s failed (%d): %s" % (what, r.returncode, r.stderr.strip()))
    return out


def table(out, masks, columns):
    """The rows of lm train's closing table: mask -> its numbers."""
    rows = {}
    for line in out.splitlines():
        for m in masks:
            if line.startswith(m + " "):
                fields = line[len(m):].split()
                if len(fields) == columns:
                    rows[m] = fields
    missing = [m for m in masks if m not in rows]
    if missing:
        sys.exit("study_recall: no row for %s in lm train's table" % ", ".join(missing))
    return rows


def distance_bins(length):
    """Powers of two: [2, 4), [4, 8), ... up to the length."""
    edges = [2]
    while edges[-1] < length:
        edges.append(edges[-1] * 2)
    return edges


def recall_by_distance(pred, targets, dist, bins):
    """[bins - 1] the share of scored positions predicted right, by distance."""
    scored = targets >= 0
    right = (pred == targets) & scored
    out = []
    for lo, hi in zip(bins[:-1], bins[1:]):
        sel = scored & (dist >= lo) & (dist < hi)
        out.append(right[sel].sum() / sel.sum() if sel.any() else np.nan)
    return np.array(out)


def frontier(edges, acc):
    """On the frontier: no other mask recalls as much with as few edges, and
    more or with fewer."""
    return [not any(e2 <= e and a2 >= a and (e2 < e or a2 > a) for e2, a2 in zip(edges, acc))
            for e, a in zip(edges, acc)]


def picture(path, summary, dist_rows, bins, title):
    import attngraph.draw as draw
    scatter = []
    for k, s in enumerate(summary):
        scatter.append(dict(x=[s["edges"]] * 3, y=[s["lo"], s["acc"], s["hi"]],
                            name=s["mask"], colour=k % 10 + 1, dashed=k >= 10))
    front = sorted((s["edges"], s["acc"]) for s in summary if s["frontier"])
    scatter.append(dict(x=[e for e, _ in front], y=[a for _, a in front], dashed=True,
                        name="frontier", colour=10))
    mids = [np.log2(lo) for lo in bins[:-1]]   # a bin [2^k, 2^(k+1)) at k
    curves = [dict(x=mids, y=dist_rows[s["mask"]], name=s["mask"], colour=k % 10 + 1,
                   dashed=k >= 10) for k, s in enumerate(summary)]
    plots = [dict(title="recall against edges per token (the seeds' mean and range)",
                  xlabel="edges per token", ylabel="validation accuracy", series=scatter),
             dict(title="recall against the key-query distance",
                  xlabel="log2 of the distance (bins [2^k, 2^(k+1)) tokens)",
                  ylabel="accuracy", series=curves)]
    text = [s for s in summary if s.get("text") is not None]
    if text:
        plots.append(dict(title="text: validation loss", xlabel="edges per token",
                          ylabel="loss", series=[dict(x=[s["edges"]], y=[s["text"]],
                                                      name=s["mask"], colour=k % 10 + 1,
                                                      dashed=k >= 10)
                                                 for k, s in enumerate(text)]))
    with open(path, "w") as f:
        f.write(draw.panels(plots, title=title))


# The rows a study keeps: its files, their columns, and what a row is of.
FILES = [("results.csv", ["mask", "seed", "edges_per_token", "val_acc", "ms_a_step"],
          lambda r: (r["mask"], str(r["seed"]))),
         ("distance.csv", ["mask", "seed", "distance_from", "distance_to", "recall"],
          lambda r: (r["mask"], str(r["seed"]), str(r["distance_from"]))),
         ("text.csv", ["mask", "iters", "text_val_loss"], lambda r: r["mask"])]


def read_rows(path):
    """A CSV's rows as dicts ([] where the file is not there yet); a file of
    other columns (an older layout, another tool's) ends the run, naming it."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        rows = list(r)
    header = next((h for n, h, _ in FILES if n == os.path.basename(path)), None)
    if header and rows and r.fieldnames != header:
        sys.exit("study_recall: %s has the columns %s; expected %s (a study of this tool's "
                 "layout)" % (path, ",".join(r.fieldnames or []), ",".join(header)))
    return rows


def merged(folder, name, new):
    """The rows of the folder's file called name (see FILES) with new's: a
    new row takes the place of the row with its key (a mask and seed run
    again), the others come after."""
    _, _, key = next(f for f in FILES if f[0] == name)
    rows = {key(r): r for r in read_rows(os.path.join(folder, name))}
    for r in new:
        rows[key(r)] = r
    return list(rows.values())


def write_rows(folder, name, rows):
    """rows into the folder's file called name whole, or not at all (written
    beside it, then renamed over it)."""
    path = os.path.join(folder, name)
    header = next(h for n, h, _ in FILES if n == name)
    try:
        with open(path + ".part", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
            w.writeheader()
            w.writerows({k: r[k] for k in header} for r in rows)
        os.replace(path + ".part", path)
    except BaseException:   # (a row without a column, a full disk, ^C): the old file stays
        if os.path.exists(path + ".part"):
            os.remove(path + ".part")
        raise


def keep_rows(folder, name, new):
    """new's rows into the folder's file called name."""
    write_rows(folder, name, merged(folder, name, new))


def join(folder, others):
    """The rows of other studies' folders into folder's, every file read and
    checked before any is written. A joined run whose mask and seed the
    folder has with another result (two machines' seed 1) ends the run:
    rerun one under another seed."""
    files = {name: [] for name, _, _ in FILES}
    for other in others:
        if not read_rows(os.path.join(other, "results.csv")):
            sys.exit("study_recall: --join %s: no results.csv rows there; expected a study's "
                     "folder" % other)
        for name in files:
            files[name] += read_rows(os.path.join(other, name))
    same = ("edges_per_token", "val_acc")
    had = {(r["mask"], r["seed"]): r for r in read_rows(os.path.join(folder, "results.csv"))}
    for r in files["results.csv"]:
        h = had.setdefault((r["mask"], r["seed"]), r)
        if any(h[k] != r[k] for k in same):
            sys.exit("study_recall: --join: %s seed %s is in two runs that disagree (accuracy "
                     "%s and %s); expected one run of each mask and seed"
                     % (r["mask"], r["seed"], h["val_acc"], r["val_acc"]))
    rows = {name: merged(folder, name, new) for name, new in files.items()}
    for name, r in rows.items():
        if r:
            write_rows(folder, name, r)


def summarize(folder):
    """A row a mask (in the order first run) from every seed in the folder's
    results.csv and text.csv, and each mask's recall by distance (distance.csv:
    the seeds' mean, NaN where no seed has a key at that distance)."""
    results = read_rows(os.path.join(folder, "results.csv"))
    if not results:
        sys.exit("study_recall: %s has no results.csv rows; run the study into it first"
                 % folder)
    text = {r["mask"]: float(r["text_val_loss"])
            for r in read_rows(os.path.join(folder, "text.csv"))}
    summary = []
    for m in dict.fromkeys(r["mask"] for r in results):
        rows = [r for r in results if r["mask"] == m]
        accs = np.array([float(r["val_acc"]) for r in rows])
        summary.append(dict(mask=m, seeds=len(rows), acc=accs.mean(), lo=accs.min(),
                            hi=accs.max(), runs=rows,
                            edges=float(np.mean([float(r["edges_per_token"]) for r in rows])),
                            sd=accs.std(ddof=1) if accs.size > 1 else 0.0,
                            ms=float(np.median([float(r["ms_a_step"]) for r in rows])),
                            text=text.get(m)))
    for s, f in zip(summary, frontier([s["edges"] for s in summary],
                                      [s["acc"] for s in summary])):
        s["frontier"] = f
    by_bin, ends = {}, {}
    for r in read_rows(os.path.join(folder, "distance.csv")):
        lo = int(r["distance_from"])
        ends[lo] = int(r["distance_to"]) + 1
        by_bin.setdefault(r["mask"], {}).setdefault(lo, []).append(
            float(r["recall"]) if r["recall"] else np.nan)
    bins = sorted(ends) + [max(ends.values())] if ends else []
    dist_rows = {}
    for m, v in by_bin.items():
        seen = [np.array(v.get(lo, [np.nan])) for lo in bins[:-1]]
        dist_rows[m] = np.array([x[~np.isnan(x)].mean() if (~np.isnan(x)).any() else np.nan
                                 for x in seen])
    return summary, dist_rows, bins


def redraw(folder, out, title):
    """study.svg again from a study's folder."""
    summary, dist_rows, bins = summarize(folder)
    picture(out, summary, dist_rows, bins, title)


def report(folder, title):
    """summary.csv, study.md (printed) and study.svg from every seed in the folder."""
    summary, dist_rows, bins = summarize(folder)
    with open(os.path.join(folder, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["mask", "edges_per_token", "seeds", "acc_mean", "acc_sd", "frontier",
                    "ms_a_step", "text_val_loss"])
        for s in summary:
            w.writerow([s["mask"], "%.2f" % s["edges"], s["seeds"], "%.4f" % s["acc"],
                        "%.4f" % s["sd"], int(s["frontier"]), "%.1f" % s["ms"],
                        "" if s["text"] is None else "%.4f" % s["text"]])
    causal = next((s for s in summary if s["mask"] == "causal"), None)
    lines = ["| mask | edges per token | recall (mean +- sd) | seeds | frontier | text loss "
             "| ms a step |", "|---|---:|---:|---:|:-:|---:|---:|"]
    for s in sorted(summary, key=lambda s: s["edges"]):
        lines.append("| `%s` | %.1f | %.3f +- %.3f | %d | %s | %s | %.0f |"
                     % (s["mask"].replace("|", "\\|"), s["edges"], s["acc"], s["sd"],
                        s["seeds"], "yes" if s["frontier"] else "",
                        "-" if s["text"] is None else "%.3f" % s["text"], s["ms"]))
    runs = causal["runs"] if causal else []
    short = [r for r in runs if float(r["val_acc"]) < 0.99]
    if causal and len(short) == len(runs):   # the gate: attention must recall first
        lines += ["", "Causal recalls %.3f, below the 0.99 Zoology reports for attention: the "
                  "masks' figures are not read until it gets there (train longer)."
                  % causal["acc"]]
    elif causal:
        if short:   # a seed whose budget is shorter than causal's plateau
            lines += ["", "Causal recalled 0.99 or more on %d seed%s of %d; on seed%s %s it "
                      "recalled %s (short of Zoology's 0.99 in this budget): a mask's failure "
                      "on %s says less." % (
                          len(runs) - len(short), "" if len(runs) - len(short) == 1 else "s",
                          len(runs), "" if len(short) == 1 else "s",
                          ", ".join(r["seed"] for r in short),
                          ", ".join(r["val_acc"] for r in short),
                          "that seed" if len(short) == 1 else "those seeds")]
        quarter = [s for s in summary if s["mask"] != "causal" and
                   s["edges"] <= causal["edges"] / 4 and s["acc"] >= causal["acc"] - causal["sd"]]
        lines += ["", "At a quarter of causal's %.1f edges a token or fewer, %s."
                  % (causal["edges"], "these match or beat causal's recall: " +
                     ", ".join("`%s` (%.3f)" % (s["mask"], s["acc"]) for s in quarter)
                     if quarter else "no mask matches causal's recall (%.3f)" % causal["acc"])]
    with open(os.path.join(folder, "study.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    picture(os.path.join(folder, "study.svg"), summary, dist_rows, bins, title)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli")
    p.add_argument("--out", required=True)
    p.add_argument("--redraw", help="a study's folder: draw its study.svg into --out again")
    p.add_argument("--title")
    p.add_argument("--length", type=int, default=256)
    p.add_argument("--pairs", type=int, default=64)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--fill", default="zero", choices=("zero", "random"))
    p.add_argument("--train", type=int, default=40000, help="training examples")
    p.add_argument("--val", type=int, default=1000, help="validation examples")
    p.add_argument("--seeds", help="seeds to run, e.g. 1,2,3 (the default without --join; "
                   "'' for none)")
    p.add_argument("--mask", action="append", help="repeatable (default: the study's twelve)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--positions", default="rope")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--lr", default="1e-3")
    p.add_argument("--no-mlp", action="store_true", help="attention-only blocks (Zoology's)")
    p.add_argument("--train-args", default="", help="more lm train options, as one string")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--text", help="a text for the loss beside (e.g. Tiny Shakespeare)")
    p.add_argument("--text-iters", type=int, default=500)
    p.add_argument("--join", action="append", default=[],
                   help="another study's folder whose rows join --out's (repeatable)")
    a = p.parse_args()
    title = a.title or ("MQAR at %d tokens, %d pairs, a vocabulary of %d: %d layers of width %d"
                        % (a.length, a.pairs, a.vocab, a.layers, a.dim))
    if a.redraw:
        redraw(a.redraw, a.out, a.title or "MQAR: recall under each mask")
        return
    masks = a.mask or MASKS
    if a.seeds is None:
        a.seeds = "" if a.join else "1,2,3"
    seeds = [int(s) for s in a.seeds.split(",")] if a.seeds else []
    if not a.cli and (seeds or a.text):
        p.error("--cli is needed to run the study")
    os.makedirs(a.out, exist_ok=True)
    model = ["--layers", a.layers, "--heads", a.heads, "--dim", a.dim, "--positions",
             a.positions, "--threads", a.threads] + (["--no-mlp"] if a.no_mlp else [])
    for name, _, _ in FILES:   # the folder's layout, checked before any training
        read_rows(os.path.join(a.out, name))
    join(a.out, a.join)   # studies run elsewhere (another machine, another seed)
    bins = distance_bins(a.length)
    for seed in seeds:   # each seed's rows join the folder's as soon as it ends
        data = os.path.join(a.out, "data-%d" % seed)
        run([a.cli, "lm", "task", "mqar", "--vocab", a.vocab, "--length", a.length, "--pairs",
             a.pairs, "--fill", a.fill, "--train", a.train, "--val", a.val, "--seed", seed,
             "--out", data, "--quiet"], "lm task")
        pred_path = os.path.join(a.out, "predictions-%d.npy" % seed)
        out = run([a.cli, "lm", "train", "--examples", data, "--batch", a.batch, "--iters",
                   a.iters, "--eval-every", max(a.iters // 4, 1), "--lr", a.lr, "--min-lr",
                   float(a.lr) / 10, "--seed", seed, "--predictions", pred_path, "--log",
                   os.path.join(a.out, "log-%d.csv" % seed)] + model + shlex.split(a.train_args) +
                  [x for m in masks for x in ("--pattern", m)], "lm train (seed %d)" % seed,
                  keep=os.path.join(a.out, "train-%d.out" % seed))
        rows = table(out, masks, 7)
        pred = np.load(pred_path)
        targets = np.load(os.path.join(data, "val_targets.npy"))
        d = np.load(os.path.join(data, "val_distance.npy"))
        results, dist = [], []
        for k, m in enumerate(masks):
            edges, _, _, _, acc, _, ms = rows[m]
            results.append(dict(mask=m, seed=seed, edges_per_token="%.2f" % float(edges),
                                val_acc="%.4f" % float(acc), ms_a_step="%.1f" % float(ms)))
            for (lo, hi), v in zip(zip(bins[:-1], bins[1:]),
                                   recall_by_distance(pred[k], targets, d, bins)):
                dist.append(dict(mask=m, seed=seed, distance_from=lo, distance_to=hi - 1,
                                 recall="" if np.isnan(v) else "%.4f" % v))
        rows = [(name, merged(a.out, name, new))
                for name, new in (("results.csv", results), ("distance.csv", dist))]
        for name, r in rows:
            write_rows(a.out, name, r)
        print("seed %d: %s" % (seed, ", ".join("%s %s" % (r["mask"], r["val_acc"])
                                                for r in results)), flush=True)
    if a.text:
        out = run([a.cli, "lm", "train", "--text", a.text, "--block", a.length, "--batch",
                   a.batch // 2 or 1, "--iters", a.text_iters, "--eval-every", a.text_iters,
                   "--seed", seeds[0] if seeds else 1] + model +
                  [x for m in masks for x in ("--pattern", m)],
                  "lm train --text", keep=os.path.join(a.out, "text.out"))
        keep_rows(a.out, "text.csv", [dict(mask=m, iters=a.text_iters,
                                           text_val_loss="%.4f" % float(f[2]))
                                      for m, f in table(out, masks, 6).items()])
    report(a.out, title)
    print("wrote %s" % a.out)


if __name__ == "__main__":
    main()
