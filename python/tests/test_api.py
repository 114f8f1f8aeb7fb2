"""Errors carry the library's message; contiguous float32 inputs are not copied;
threads; the library that was loaded."""
import os
import subprocess
import sys

import numpy as np
import pytest

import attngraph as ag
from attngraph import _lib
from conftest import ROOT, PYDIR


def qkv(rng, N, w):
    return [rng.standard_normal((N, w)).astype(np.float32) for _ in range(3)]


def test_error_is_an_exception_with_the_message(tmp_path):
    assert issubclass(ag.Error, Exception)
    bad = tmp_path / "bad.gml"
    bad.write_text("graph [ node [ id 0 ] edge [ source 0 target 7 ] ]\n")
    with pytest.raises(ag.Error) as e:
        ag.Graph.load(str(bad))
    assert "bad.gml" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ag.Error, match="missing.gml"):
        ag.Graph.load(str(tmp_path / "missing.gml"))
    with pytest.raises(ag.Error, match="format") as e:
        ag.Graph.load(str(tmp_path / "x.unknown"))
    # Python's keyword, not the tool's option
    assert 'format="edgelist"' in str(e.value) and "--format" not in str(e.value)
    with pytest.raises(ag.Error, match="'windw:3'|windw"):
        ag.Graph.pattern("windw:3", 5)
    with pytest.raises(ag.Error, match="size"):
        ag.Graph.pattern("causal")
    with pytest.raises(ag.Error, match="edge 1 has target 9; expected a node id 0..3"):
        ag.Graph.from_edge_index(np.array([[0, 1], [1, 9]]), 4)
    with pytest.raises(ag.Error, match="no edges; give num_nodes"):
        ag.Graph.from_edge_index(np.zeros((2, 0), np.int64))
    with pytest.raises(ag.Error, match="dtype float64; expected integers"):
        ag.Graph.from_edge_index(np.array([[0.5], [1.0]]), 3)
    with pytest.raises(ag.Error, match="indptr.2. is 1; expected indptr to start at 0 and never"):
        ag.Graph.from_csr([0, 2, 1], [0, 1])
    with pytest.raises(ag.Error, match=r"indices has shape \[1\]; indptr ends at 2"):
        ag.Graph.from_csr([0, 2], [0])
    with pytest.raises(ag.Error, match=r"indices\[1\] is 5; expected a node id 0..0"):
        ag.Graph.from_csr([0, 2], [0, 5])
    with pytest.raises(ag.Error, match="pattern 'causal': 0 nodes"):
        ag.Graph.pattern("causal", 0)
    with pytest.raises(ag.Error, match="self_loops is 'yes'"):
        ag.Graph.pattern("causal", 3, self_loops="yes")
    with pytest.raises(ag.Error, match=r"expected \[2, E\]"):
        ag.Graph.from_edge_index(np.zeros((3, 4), np.int64), 4)


def test_shape_errors(rng):
    g = ag.Graph.pattern("causal", 5)
    q, k, v = qkv(rng, 5, 8)
    with pytest.raises(ag.Error, match=r"q has shape \[4, 8\]; the graph has 5 nodes"):
        ag.attention(g, q[:4], k, v, heads=2)
    with pytest.raises(ag.Error, match="heads is 3; expected a divisor of the width 8"):
        ag.attention(g, q, k, v, heads=3)
    with pytest.raises(ag.Error, match="v has 6 columns"):
        ag.attention(g, q, k, v[:, :6], heads=2)
    with pytest.raises(ag.Error, match="score is 'softmax'"):
        ag.attention(g, q, k, v, score="softmax")
    with pytest.raises(ag.Error, match="a_src") as e:      # the library's own check
        ag.attention(g, q, k, v, heads=2, score="additive")
    assert e.value.status == "invalid value"
    with pytest.raises(ag.Error, match=r"edge_bias has shape \[3\]; expected \[15\]"):
        ag.attention(g, q, k, v, heads=2, edge_bias=np.zeros(3))


def test_memory_budget_refusal_is_a_limit():
    # the workspace's Q [1024, 2^14] is 64 MiB, over the budget (never allocated)
    g = ag.Graph.pattern("causal", 1024)
    x = np.zeros((1024, 16), np.float32)
    w = ag.Weights.random(16, 1, 1 << 14)
    old = ag.set_memory_budget(32 << 20)
    try:
        with pytest.raises(ag.Error, match="workspace needs .* GB; the memory budget is") as e:
            ag.rounds(g, x, [w], 1)
    finally:
        ag.set_memory_budget(old)
    assert e.value.status == "limit exceeded"


def test_weights_folder_errors(tmp_path, rng):
    with pytest.raises(ag.Error, match="wq.npy"):
        ag.Weights.load(str(tmp_path), heads=1)
    ag.Weights.random(8, 2).save(str(tmp_path))
    np.save(tmp_path / "wo.npy", np.zeros((3, 3), np.float32))
    with pytest.raises(ag.Error, match="wo.npy"):
        ag.Weights.load(str(tmp_path), heads=2)


def test_contiguous_float32_is_not_copied(rng, monkeypatch):
    """The pointers the library receives are the arrays' own."""
    g = ag.Graph.pattern("causal", 6)
    q, k, v = qkv(rng, 6, 8)
    seen = []
    real = _lib.lib.ag_attention_ex

    class Spy:
        def __call__(self, nb, Q, K, V, *rest):
            seen.extend([Q, K, V])
            return real(nb, Q, K, V, *rest)

    monkeypatch.setattr(_lib.lib, "ag_attention_ex", Spy())
    from attngraph import ops
    monkeypatch.setattr(ops, "lib", _lib.lib)
    ag.attention(g, q, k, v, heads=2)
    assert seen == [q.ctypes.data, k.ctypes.data, v.ctypes.data]
    assert np.shares_memory(ops.f32(q, "q"), q)
    # a strided or float64 input is converted, and the result is the same
    seen.clear()
    qt = np.asfortranarray(q)
    m = ag.attention(g, qt, k, v.astype(np.float64), heads=2)
    assert seen[0] != qt.ctypes.data
    np.testing.assert_array_equal(m, ag.attention(g, q, k, v, heads=2))


def test_out_is_written_in_place_or_refused(rng):
    """out= gets the messages in its own memory; an array the library could only
    fill through a copy is refused, never left unfilled."""
    g = ag.Graph.pattern("causal", 6)
    q, k, v = qkv(rng, 6, 8)
    out = np.zeros((6, 8), np.float32)
    m = ag.attention(g, q, k, v, heads=2, out=out)
    assert np.shares_memory(m, out)
    np.testing.assert_array_equal(out, ag.attention(g, q, k, v, heads=2))
    for bad in (np.zeros((6, 8)), np.zeros((8, 6), np.float32).T):
        with pytest.raises(ag.Error, match="out must be a writeable C-contiguous float32"):
            ag.attention(g, q, k, v, heads=2, out=bad)


def test_torch_tensors_are_not_copied(rng):
    torch = pytest.importorskip("torch")
    t = torch.randn(6, 8)
    from attngraph import ops
    assert ops.f32(t, "q").ctypes.data == t.data_ptr()


def test_threads_give_the_same_bits(rng):
    g = ag.Graph.from_edge_index(rng.integers(0, 300, (2, 3000)), 300)
    q, k, v = qkv(rng, 300, 32)
    one = (ag.set_threads(1), ag.attention(g, q, k, v, heads=4))
    two = (ag.set_threads(2), ag.attention(g, q, k, v, heads=4))
    ag.set_threads(0)
    assert one[0] == 1
    np.testing.assert_array_equal(one[1], two[1])


def run_python(code, env_extra):
    env = dict(os.environ, PYTHONPATH=PYDIR, **env_extra)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


def test_library_from_environment_variable():
    lib = os.path.realpath(os.environ.get("ATTNGRAPH_LIB") or
                           os.path.join(ROOT, "build", "libattngraph.so.0.2"))
    r = run_python("import attngraph; print(attngraph.library_path)", {"ATTNGRAPH_LIB": lib})
    assert r.returncode == 0 and r.stdout.strip() == lib
    r = run_python("import attngraph", {"ATTNGRAPH_LIB": "/nonexistent/libattngraph.so"})
    assert r.returncode != 0 and "ATTNGRAPH_LIB" in r.stderr


def test_version_is_the_library_s_and_a_mismatch_is_refused():
    header = open(os.path.join(ROOT, "include", "attngraph", "base.h")).read()
    macro = header.split('#define AG_VERSION "', 1)[1].split('"', 1)[0]
    assert ag.__version__ == macro == ag._clib.ag_version().decode()
    # a library without ag_version (an older one): refused by name
    r = run_python("import attngraph", {"ATTNGRAPH_LIB": "libm.so.6"})
    assert r.returncode != 0 and "has no ag_version" in r.stderr, r.stderr
    # a package of another version than the library: _lib.py run as that package's
    code = (
        "import attngraph, types\n"
        "src = open(attngraph._lib.__file__).read().replace(\n"
        f"    'VERSION = \"{macro}\"', 'VERSION = \"9.9.9\"')\n"
        "m = types.ModuleType('attngraph._lib_other'); m.__package__ = 'attngraph'\n"
        "m.__file__ = attngraph._lib.__file__\n"
        "exec(compile(src, m.__file__, 'exec'), m.__dict__)\n")
    r = run_python(code, {})
    assert r.returncode != 0 and f"is version {macro}; this Python package is 9.9.9" in r.stderr, \
        r.stderr


def test_bits_do_not_depend_on_who_loaded_blas_first(tmp_path):
    """The products are the library's own: rounds (projections and attention)
    give the same bits in this process, in one that imported numpy first with
    OpenBLAS's SSE3 kernels (what OpenBLAS 0.3.21 picks on an Emerald Rapids),
    and in one that imported attngraph first."""
    code = ("import sys, {first}\nimport {second}\nimport numpy as np, attngraph as ag\n"
            "rng = np.random.default_rng(0)\n"
            "x = rng.standard_normal((300, 64)).astype(np.float32)\n"
            "y = ag.rounds(ag.Graph.pattern('causal', 300), x, ag.Weights.random(64, 4, seed=3),"
            " rounds=2)\nnp.save(sys.argv[1], y)\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    runs = [("numpy", "attngraph", dict(env, OPENBLAS_CORETYPE="Prescott")),
            ("attngraph", "numpy", env)]
    for k, (first, second, e) in enumerate(runs):
        r = subprocess.run([sys.executable, "-c", code.format(first=first, second=second),
                            str(tmp_path / ("y%d.npy" % k))], capture_output=True, text=True,
                           env=dict(e, PYTHONPATH=PYDIR))
        assert r.returncode == 0, r.stderr
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 64)).astype(np.float32)
    here = ag.rounds(ag.Graph.pattern("causal", 300), x, ag.Weights.random(64, 4, seed=3),
                     rounds=2)
    for k in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / ("y%d.npy" % k)), here)


def test_score_objects_and_keywords(rng):
    g = ag.Graph.pattern("causal", 5)
    q, k, v = qkv(rng, 5, 4)
    a = ag.attention(g, q, k, v, heads=2, score=ag.Score("dot"), beta=0.5)
    b = ag.attention(g, q, k, v, heads=2, score="dot", beta=0.5)
    c = ag.attention(g, q, k, v, heads=2, score=ag.Score("dot", beta=0.5))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, ag.attention(g, q, k, v, heads=2, score="dot"))


def test_csr_written_for_the_command_line(tmp_path):
    """Graph.csr() / save_csr: every message once, the same attention from
    Python and from `attngraph run --csr` on the written files; a graph whose
    edge order goes by destination comes back in that order."""
    from conftest import cli, random_edge_index
    rng = np.random.default_rng(7)
    ei = random_edge_index(rng, 40, 200)
    graphs = [ag.Graph.from_edge_index(ei, 40), ag.Graph.from_edge_index(ei, 40, self_loops="replace"),
              ag.Graph.pattern("window:3+global:1", 40)]
    q, k, v = (rng.standard_normal((40, 8)).astype(np.float32) for _ in range(3))
    for name, a in zip("qkv", (q, k, v)):
        np.save(tmp_path / f"{name}.npy", a)
    for g in graphs:
        indptr, indices = g.csr()
        assert indptr.dtype == indices.dtype == np.int64 and indptr[-1] == g.E
        back = ag.Graph.from_csr(indptr, indices)
        assert sorted(zip(back.src.tolist(), back.dst.tolist())) == \
            sorted(zip(g.src.tolist(), g.dst.tolist()))
        m = ag.attention(g, q, k, v, heads=2)
        np.testing.assert_array_equal(ag.attention(back, q, k, v, heads=2), m)
        g.save_csr(tmp_path / "ip.npy", tmp_path / "ix.npy")
        cli("run", "--csr", f"{tmp_path / 'ip.npy'},{tmp_path / 'ix.npy'}", "--q",
            tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy",
            "--heads", 2, "--out", tmp_path / "m.npy", "--quiet")
        np.testing.assert_array_equal(np.load(tmp_path / "m.npy"), m)
    for g in (graphs[2], ag.Graph.from_csr(*graphs[0].csr())):
        np.testing.assert_array_equal(ag.Graph.from_csr(*g.csr()).edge_index, g.edge_index)


def test_layer_arrays_come_from_the_library():
    """Python's names of a layer's arrays are the library's table, and its
    ag_weights_t has each at the table's offset (the struct mirrors core.h)."""
    from attngraph import _structs as S, weights
    assert weights.ARRAYS[:4] == ("wq", "wk", "wv", "wo") and len(weights.ARRAYS) == 24
    for k, name in enumerate(weights.ARRAYS):
        row = _lib.lib.ag_layer_array_info(k).contents
        assert getattr(S.ag_weights_t, name).offset == row.offset, name
    assert not _lib.lib.ag_layer_array_info(len(weights.ARRAYS))
    F = S.LAYER_FEATURES
    gat = weights.arrays_of(F["AG_LAYER_ADDITIVE"] | F["AG_LAYER_BIAS"])
    assert gat == ("wq", "attn_src", "attn_dst", "bias")
    w = weights.Weights.random(8, 2, seed=3)
    with pytest.raises(ag.Error, match=r"attn has shape \[4, 2\]; expected \[2, 4\]"):
        weights.Weights(w.wq, w.wk, w.wv, w.wo, heads=2, attn=np.zeros((4, 2), np.float32))
