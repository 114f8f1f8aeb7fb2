"""attngraph.draw: the library's pictures from Python. The heatmap's cells are
the attention weights (parsed back with xml.etree), and every picture the tool
can make from the same inputs has the tool's bytes."""
import os
import xml.etree.ElementTree as ET
from collections import defaultdict

import numpy as np
import pytest

import attngraph as ag
from attngraph import draw
from conftest import cli, random_edge_index, ROOT

NS = "{http://www.w3.org/2000/svg}"
KARATE = os.path.join(ROOT, "graphs", "karate.gml")


def edges_of(svg, tag, cls="edge"):
    root = ET.fromstring(svg.encode("utf-8"))
    assert root.tag == NS + "svg"
    return [el for el in root.iter(NS + tag) if el.get("class") == cls]


def qk(rng, N, width, tmp_path=None):
    q, k, v = (rng.standard_normal((N, width)).astype(np.float32) for _ in range(3))
    if tmp_path is not None:
        for name, a in (("q", q), ("k", k), ("v", v)):
            np.save(tmp_path / (name + ".npy"), a)
    return q, k


@pytest.mark.parametrize("head", [None, 1])
def test_heatmap_cells_are_the_attention_weights(rng, head):
    """One rect.edge per distinct (dst, src) pair, its data-weight the weight of
    that edge (the slots of a multi-edge added up; the mean over heads)."""
    N, E, H = 30, 120, 2
    ei = random_edge_index(rng, N, E)
    g = ag.Graph.from_edge_index(ei, N)
    q, k = qk(rng, N, H * 4)
    w = ag.attention_weights(g, q, k, heads=H).astype(np.float64)
    per_edge = w.mean(axis=1) if head is None else w[:, head]
    want = defaultdict(float)
    for (s, d), x in zip(ei.T, per_edge):
        want[(int(d), int(s))] += x
    svg = draw.heatmap(g, w.astype(np.float32), head=head, title="attention")
    assert isinstance(svg, str) and svg._repr_svg_() == svg
    cells = edges_of(svg, "rect")
    got = {(int(c.get("data-dst")), int(c.get("data-src"))): float(c.get("data-weight"))
           for c in cells}
    assert len(cells) == len(got) == len(want) and got.keys() == want.keys()
    for key, x in want.items():
        assert got[key] == pytest.approx(x, rel=1e-5, abs=1e-7), key
    assert "attention" in svg


def test_graph_picture_has_an_arrow_per_edge(rng):
    N, E = 12, 30
    ei = random_edge_index(rng, N, E)
    g = ag.Graph.from_edge_index(ei, N)
    w = rng.random((E, 1)).astype(np.float32)
    paths = edges_of(draw.graph_picture(g, w, layout="arc"), "path")
    got = sorted((int(p.get("data-src")), int(p.get("data-dst")), float(p.get("data-weight")))
                 for p in paths)
    want = sorted((int(s), int(d), float(x)) for s, d, x in zip(ei[0], ei[1], w[:, 0]))
    assert [t[:2] for t in got] == [t[:2] for t in want]
    np.testing.assert_allclose([t[2] for t in got], [t[2] for t in want], rtol=1e-5)
    xy = draw.layout_fr(g, seed=3)
    assert xy.shape == (N, 2) and np.array_equal(xy, draw.layout_fr(g, seed=3))
    assert draw.graph_picture(g, w, layout=xy) == draw.graph_picture(g, w, layout="fr", seed=3)


def test_graph_picture_classes_and_default_layout(tmp_path, rng):
    """classes= colours each node by its class (the tool's --classes bytes);
    graphs that are not patterns are laid out by default, patterns drawn in
    order."""
    labels = np.load(os.path.join(ROOT, "graphs", "karate", "labels.npy"))
    g = ag.Graph.load(KARATE)
    q, k = qk(rng, g.N, 4, tmp_path)
    w = ag.attention_weights(g, q, k, heads=1)
    svg = draw.graph_picture(g, w, classes=labels, title="karate")
    nodes = edges_of(svg, "circle", "node")
    assert [int(c.get("data-class")) for c in nodes] == labels[[int(c.get("data-id"))
                                                                for c in nodes]].tolist()
    assert len({c.get("fill") for c in nodes}) == len(set(labels.tolist()))
    cli("draw", "graph", KARATE, "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v",
        tmp_path / "v.npy", "--classes", os.path.join(ROOT, "graphs", "karate", "labels.npy"),
        "--title", "karate", "--out", tmp_path / "c.svg")
    assert (tmp_path / "c.svg").read_bytes() == svg.encode("utf-8")
    ei = random_edge_index(rng, 12, 30)
    ge = ag.Graph.from_edge_index(ei, 12)
    we = rng.random((30, 1)).astype(np.float32)
    assert draw.graph_picture(ge, we) == draw.graph_picture(ge, we, layout="fr")
    gp = ag.Graph.pattern("causal", 6)
    wp = np.ones((gp.E, 1), np.float32)
    assert draw.graph_picture(gp, wp) == draw.graph_picture(gp, wp, layout="arc")
    with pytest.raises(ag.Error, match=r"classes has shape \[11\]"):
        draw.graph_picture(ge, we, classes=np.zeros(11, np.int64))
    with pytest.raises(ag.Error, match="node 3's class is -2"):
        draw.graph_picture(ge, we, classes=np.array([0, 1, 2, -2] + [0] * 8))


@pytest.mark.parametrize("extra", [[], ["--head", 1, "--scale", "log"]])
def test_heatmap_and_graph_are_the_tools_bytes(tmp_path, rng, extra):
    """`attngraph draw heatmap|graph GRAPH --q --k --v` and draw.* on the
    weights attention_weights gives: the same file."""
    g = ag.Graph.load(KARATE)
    H = 2
    q, k = qk(rng, g.N, H * 4, tmp_path)
    w = ag.attention_weights(g, q, k, heads=H)
    ins = ["--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy",
           "--heads", H, "--title", "karate, é & <b>"]
    head = 1 if extra else None
    cli("draw", "heatmap", KARATE, *ins, *extra, "--out", tmp_path / "h.svg")
    svg = draw.heatmap(g, w, head=head, title="karate, é & <b>", log_scale=bool(extra))
    assert (tmp_path / "h.svg").read_bytes() == svg.encode("utf-8")
    cli("draw", "graph", KARATE, *ins, *extra[:2], "--out", tmp_path / "g.svg")
    svg = draw.graph_picture(g, w, head=head, title="karate, é & <b>")
    assert (tmp_path / "g.svg").read_bytes() == svg.encode("utf-8")
    # a pattern: an arc diagram, by default
    p = ag.Graph.pattern("window:2", 9)
    q, k = qk(rng, 9, H * 4, tmp_path)
    cli("draw", "graph", "--pattern", "window:2", "--nodes", 9, *ins, "--out", tmp_path / "p.svg")
    svg = draw.graph_picture(p, ag.attention_weights(p, q, k, heads=H), title="karate, é & <b>")
    assert (tmp_path / "p.svg").read_bytes() == svg.encode("utf-8")
    # save writes the same bytes
    draw.save(svg, tmp_path / "saved.svg")
    assert (tmp_path / "saved.svg").read_bytes() == svg.encode("utf-8")


def test_rounds_is_the_tools_picture_of_a_trace(tmp_path):
    cli("run", KARATE, "--dim", 8, "--rounds", 4, "--trace", tmp_path / "t.csv", "--out",
        tmp_path / "y.npy", "--quiet")
    cli("draw", "rounds", tmp_path / "t.csv", "--out", tmp_path / "r.svg")
    svg = draw.rounds(str(tmp_path / "t.csv"))
    assert (tmp_path / "r.svg").read_bytes() == svg.encode("utf-8")
    _, change, entropy = draw.read_trace(tmp_path / "t.csv")
    assert draw.rounds(change, entropy, title="convergence of rounds: %s" % (tmp_path / "t.csv")) \
        == svg


def test_panels_and_compare_parse():
    svg = draw.panels([dict(title="loss", xlabel="epoch", log_y=True,
                            series=[dict(y=[3.0, 2.0, 1.0], name="train"),
                                    dict(x=[1, 2, 3], y=[3.5, np.nan, 2.0], name="eval",
                                         dashed=True)])], title="curves")
    assert ET.fromstring(svg.encode()).tag == NS + "svg" and "eval" in svg
    gs = [ag.Graph.pattern("causal", 40), ag.Graph.pattern("window:3", 40)]
    fill = draw.mask_grid(gs[0], 8)
    # causal: blocks above the diagonal are empty, below full
    assert fill[0, 7] == 0 and fill[7, 0] == 1
    svg = draw.compare(gs, figures=[[1.0], [2.0]], figure_names=["loss"], title="masks")
    assert ET.fromstring(svg.encode()).tag == NS + "svg" and "window:3" in svg


def test_errors_name_the_argument(tmp_path, rng):
    g = ag.Graph.pattern("causal", 5)
    with pytest.raises(ag.Error, match=r"weights has shape \[3, 2\]; the graph has 15 edges"):
        draw.heatmap(g, np.zeros((3, 2), np.float32))
    with pytest.raises(ag.Error, match=r"head is 2; the weights have 2 heads: expected None"):
        draw.heatmap(g, np.zeros((15, 2), np.float32), head=2)
    with pytest.raises(ag.Error, match="labels has 2 entries; expected 5"):
        draw.heatmap(g, np.zeros(15, np.float32), labels=["a", "b"])
    with pytest.raises(ag.Error, match="layout is 'circle'"):
        draw.graph_picture(g, np.zeros(15, np.float32), layout="circle")
    bad = np.zeros(15, np.float32)
    bad[4] = np.nan
    with pytest.raises(ag.Error, match="finite"):
        draw.heatmap(g, bad)
    with pytest.raises(ag.Error):
        draw.save("<svg/>", tmp_path / "no" / "such" / "dir.svg")
    assert not (tmp_path / "no").exists()
