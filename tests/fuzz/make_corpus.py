#!/usr/bin/env python3
"""Writes the seed corpora (tests/fuzz/corpus/<target>/) and the past crash
inputs (tests/fuzz/crashes/<target>/). Run from the repository root; the
files are committed, so this is only needed to change them. No numpy needed."""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)))


def put(kind, target, name, data):
    d = os.path.join(ROOT, kind, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy(descr, shape, payload, fortran=False):
    shape_s = "(" + "".join(f"{s}, " for s in shape).rstrip(", ") + ("," if len(shape) == 1 else "") + ")"
    head = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_s)
    pad = 64 - (10 + len(head) + 1) % 64
    head = head + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + payload


def f32(vals):
    return struct.pack("<%df" % len(vals), *vals)


def read(path):
    with open(os.path.join(ROOT, "..", "..", path), "rb") as f:
        return f.read()


# ---- npy: byte 0 = reader (0 matrix, 1 array, 2 index)
put("corpus", "npy", "f4_2x2", b"\0" + npy("<f4", (2, 2), f32([1, 2, 3, 4])))
put("corpus", "npy", "f8_fortran", b"\0" + npy("<f8", (2, 3), struct.pack("<6d", *range(6)), True))
put("corpus", "npy", "be_i2", b"\0" + npy(">i2", (1, 3), struct.pack(">3h", 1, -2, 3)))
put("corpus", "npy", "hopfield_x", b"\0" + read("graphs/hopfield/x.npy"))
put("corpus", "npy", "array_3d_bool", b"\1" + npy("|b1", (2, 1, 2), bytes([1, 0, 1, 1])))
put("corpus", "npy", "array_u1", b"\1" + npy("|u1", (4,), bytes([1, 2, 3, 250])))
put("corpus", "npy", "index_i8", b"\2" + npy("<i8", (3,), struct.pack("<3q", 0, 2, 5)))
put("corpus", "npy", "index_u4", b"\2" + npy("<u4", (2,), struct.pack("<2I", 7, 9)))
# 128 bytes claiming shape (2, 999999999999999): once a huge allocation
liar = npy("<f4", (2, 999999999999999), f32([1, 2]))
put("crashes", "npy", "huge_shape_matrix", b"\0" + liar)
put("crashes", "npy", "huge_shape_array", b"\1" + liar)
put("crashes", "npy", "huge_shape_index", b"\2" + npy("<i8", (999999999999,), f32([1, 2])))

# ---- graph: byte 0 = format (0 edgelist 1 ncol 2 lgl 3 graphml 4 gml 5 pajek;
# +8 directed, +16 undirected, +128 format from the extension), byte 1 = self mode
put("corpus", "graph", "random10.edges", b"\0\0" + read("graphs/random10.edges"))
put("corpus", "graph", "undirected.edges", b"\x10\x01" + b"0 1\n1 2\n2 2\n")
put("corpus", "graph", "sentence.gml", b"\x04\x04" + read("graphs/sentence.gml"))
put("corpus", "graph", "hopfield.gml", b"\x84\x0a" + read("graphs/hopfield.gml"))
put("corpus", "graph", "en_ja_cross.graphml", b"\x03\x01" + read("graphs/en_ja_cross.graphml"))
put("corpus", "graph", "patches16.net", b"\x05\x02" + read("graphs/patches16.net"))
put("corpus", "graph", "small.ncol", b"\x01\x04" + b"a b 0.5\nb c 2\nc a\n")
put("corpus", "graph", "small.lgl", b"\x02\x00" + b"# a\nb\nc\n# b\nc 1.5\n")
put("corpus", "graph", "bom.gml", b"\x04\x01" + b"\xef\xbb\xbfgraph [ node [ id 0 ] node [ id 1 ] edge [ source 0 target 1 bias 2 ] ]\n")

# ---- pattern: byte 0 = N - 1 (mod 48), then the spec
for n, spec in [(7, "causal"), (9, "window:3"), (11, "window:1,2&!strided:3"), (15, "dilated:4,2"),
                (12, "docs:5,3&window:2"), (16, "causal&!strided:4+global:1"), (5, "blocks:2,3"),
                (9, "cross:4,6"), (15, "grid:4x4,1"), (11, "axial:3x4"), (20, "bigbird:2,3,1,2,7"),
                (20, "random:3,5"), (15, "fixed:4,1+prefix:2"), (9, "padding:7|complete")]:
    put("corpus", "pattern", spec.replace(":", "_").replace("&", "AND").replace("!", "NOT")
        .replace("+", "OR").replace("|", "PIPE").replace(",", "-"), bytes([n]) + spec.encode())
put("crashes", "pattern", "open_paren", b"\x07(")
put("crashes", "pattern", "two_open_parens", b"\x07((")
put("crashes", "pattern", "3000_open_parens", b"\x07" + b"(" * 3000)
put("crashes", "pattern", "dilated_huge_width", b"\x05dilated:9999999999,1")
# found by fuzz_pattern: the grid's rows y-R..y+R were walked before clamping (hang)
put("crashes", "pattern", "grid_huge_radius", b"\x0fgrid:51x5,1844674\x00 737095516165")
put("crashes", "pattern", "grid_max_radius", b"\x0bgrid:3x4,1099511627776")


# ---- csr: N-1, self, score kind, H and d, flags, then indptr/indices (a byte
# each, 0xff + 8 bytes for a full int64), then Q, K, V, vectors and biases
def csr(n, self, kind, hd, flags, indptr, indices, rest=b""):
    def val(v):
        return bytes([v & 0xff]) if -128 <= v < 127 and v != -1 else b"\xff" + struct.pack("<q", v)
    return bytes([n - 1, self, kind, hd, flags]) + b"".join(map(val, indptr + indices)) + rest


vals = bytes((7 * k + 3) % 256 for k in range(200))
put("corpus", "csr", "chain4", csr(4, 0, 0, 0x05, 0, [0, 1, 3, 4, 6], [0, 0, 1, 2, 1, 3], vals))
put("corpus", "csr", "empty_rows_self_on", csr(3, 1, 0, 0x00, 0x10, [0, 0, 2, 2], [0, 1], vals))
put("corpus", "csr", "cosine", csr(3, 0, 2, 0x06, 2, [0, 2, 3, 5], [0, 2, 1, 0, 1], vals))
put("corpus", "csr", "additive", csr(3, 2, 3, 0x05, 4, [0, 2, 3, 5], [0, 2, 1, 0, 1], vals))
put("corpus", "csr", "gatv2", csr(3, 0, 4, 0x09, 8, [0, 1, 2, 3], [1, 2, 0], vals))
put("corpus", "csr", "sigmoid", csr(2, 0, 5, 0x01, 32, [0, 2, 4], [0, 1, 0, 1], vals))
put("corpus", "csr", "linear", csr(2, 1, 6, 0x04, 1, [0, 1, 2], [1, 0], vals))
put("corpus", "csr", "multi_edge", csr(2, 0, 0, 0x00, 0xc0, [0, 3, 3], [1, 1, 1], vals))
# indptr [0, 162, 0] and no indices: once read the missing indices
put("crashes", "csr", "indptr_decreases", csr(2, 0, 0, 0, 0, [0, 162, 0], []))


# ---- weights: byte 0 = H - 1 (+128 LayerNorm), then per file (wq wk wv wo
# ln_weight ln_bias attn_src attn_dst attn) a 2-byte length (0xffff: absent) and the bytes
def weights(h, files):
    out = bytes([h])
    for f in files:
        out += struct.pack("<H", 0xffff) if f is None else struct.pack("<H", len(f)) + f
    return out


def mat(r, c, seed=1):
    return npy("<f4", (r, c), f32([((seed * 31 + k * 17) % 13 - 6) / 8 for k in range(r * c)]))


def vec(n, seed=1):
    return npy("<f4", (n,), f32([((seed + k * 5) % 7 - 3) / 4 for k in range(n)]))


put("corpus", "weights", "plain_h1", weights(0, [mat(4, 4, 1), mat(4, 4, 2), mat(4, 4, 3), mat(4, 4, 4)]))
put("corpus", "weights", "h2_layernorm", weights(0x81, [mat(4, 3, 1), mat(4, 3, 2), mat(4, 3, 3), mat(3, 4, 4),
                                                        vec(3, 1), vec(3, 2)]))
put("corpus", "weights", "additive", weights(1, [mat(4, 4, 1), mat(4, 4, 2), mat(4, 4, 3), mat(4, 4, 4),
                                                 None, None, npy("<f4", (2, 2), f32([1, 0, 0, 1])),
                                                 npy("<f4", (2, 2), f32([0, 1, 1, 0]))]))
put("corpus", "weights", "gatv2", weights(0, [mat(2, 2, 1), mat(2, 2, 2), mat(2, 2, 3), mat(2, 2, 4),
                                              None, None, None, None, npy("<f4", (1, 2), f32([1, -1]))]))
put("corpus", "weights", "per_node", weights(0, [npy("<f4", (3, 2, 2), f32(list(range(12)))),
                                                 npy("<f4", (3, 2, 2), f32(list(range(12)))),
                                                 npy("<f4", (3, 2, 2), f32(list(range(12)))), mat(2, 2, 4)]))
put("corpus", "weights", "hopfield", weights(0, [read("graphs/hopfield/" + f) for f in
                                                 ("wq.npy", "wk.npy", "wv.npy", "wo.npy")]))

# ---- labels: byte 0 = pattern (0 causal 1 window:2 2 complete 3 docs:2,3
# 4 cross:2,3 5 random:2) + 8 * self mode, then the file
put("corpus", "labels", "four", b"\0a\nb\nc\nd\n")
put("corpus", "labels", "crlf_bom", b"\x09\xef\xbb\xbfthe\r\ncat\r\nsat\r\n")
put("corpus", "labels", "five_docs", b"\x03one\ntwo\nthree\nfour\nfive\n")
put("corpus", "labels", "empty_lines", b"\x12\n\n\n")
put("corpus", "labels", "cross", b"\x04en1\nen2\nja1\nja2\nja3")

# ---- cli: the arguments after "attngraph", one a line
for name, args in [
    ("run_pattern", "run\n--pattern\ncausal\n--nodes\n6\n--heads\n2"),
    ("run_gml_attn", "run\ng.gml\n--attn\na.csv\n--attn\na.npy\n--out\no.npy\n--quiet"),
    ("run_raw", "run\ng.edges\n--q\nq.npy\n--k\nk.npy\n--v\nv.npy\n--messages\nm.npy"),
    ("run_weights", "run\ng.net\n--weights\nw\n--features\nx.npy\n--rounds\n3\n--trace\nt.csv"),
    ("run_csr", "run\n--csr\nindptr.npy,indices.npy\n--self-loops\non\n--score\ncosine"),
    ("run_graphml_bias", "run\ng.graphml\n--edge-bias\nweight\n--attn\na.graphml\n--alibi"),
    ("run_labels", "run\n--pattern\nwindow:2\n--labels-file\nlabels.txt\n--save-rounds\nr\n--rounds\n2"),
    ("run_tokens", "run\n--pattern\ndocs:2,3\n--tokens\na b c d e\n--score\ngatv2\n--norm\nlayer"),
    ("pattern_gml", "pattern\nwindow:2\n--nodes\n5\n--out\np.gml"),
    ("pattern_dot", "pattern\ncausal&!strided:2\n--nodes\n6\n--out\np.dot\n--self-loops\noff"),
    ("compare", "compare\n--pattern\ncausal\n--pattern\nwindow:2\n--nodes\n6\n--csv\nc.csv"),
    ("compare_graph", "compare\n--graph\ng.gml\n--pattern\ncomplete\n--per-node\np.csv"),
    ("inspect_who", "inspect\ng.gml\n--who\na\n--to\nb"),
    ("inspect_top", "inspect\n--pattern\ncausal\n--nodes\n5\n--top\n3"),
    ("bench", "bench\n--pattern\ncausal\n--nodes\n8\n--reps\n1\n--warmup\n0\n--json"),
    ("help", "run\n--help"),
    ("stdin_graph", "run\n-\n--format\nedgelist"),
    ("bad_option", "run\n--pattern\ncausal\n--nodes\n4\n--frobnicate"),
]:
    put("corpus", "cli", name, args)
