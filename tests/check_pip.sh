#!/bin/sh
# The Python package as pip installs it (make check-pip, part of make check):
# `pip install ./python` into a virtualenv that sees Debian's packages,
# offline, as docs/python.md says. Then, from outside the checkout and with no
# ATTNGRAPH_LIB or PYTHONPATH, the package must load the library pip shipped
# in it and compute attention that a numpy softmax agrees with; `pip
# uninstall` must leave nothing of it. Touches nothing outside the build folder.
# Environment (from the Makefile): PYTHON (Debian's interpreter), BUILD.
set -eu
: "${PYTHON:=/usr/bin/python3}" "${BUILD:=build}"

root=$(pwd)
venv=$root/$BUILD/pip-venv
fail() {
    echo "check-pip: $*" >&2
    exit 1
}
rm -rf "$venv" "$venv.log" "$venv.before"
"$PYTHON" -m venv --system-site-packages "$venv" >"$venv.log" 2>&1 ||
    { cat "$venv.log" >&2; fail "$PYTHON -m venv failed (Debian's python3-venv)"; }
find python | LC_ALL=C sort >"$venv.before"
# the library to ship: this build folder's (setup.py takes build/'s unless told)
[ "$BUILD" = build ] || ATTNGRAPH_LIB=$root/$BUILD/libattngraph.so
[ "$BUILD" = build ] || export ATTNGRAPH_LIB
"$venv/bin/pip" install -q --no-build-isolation --no-index ./python >"$venv.log" 2>&1 ||
    { cat "$venv.log" >&2; fail "pip install ./python failed"; }
find python | LC_ALL=C sort | diff "$venv.before" - >&2 ||
    fail "pip install ./python changed python/ (above): its files belong under $BUILD/python"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -f "$site/attngraph/libattngraph.so" ] || fail "no library in $site/attngraph"

cd "$venv"   # nothing of the checkout on the path
env -u ATTNGRAPH_LIB -u PYTHONPATH "$venv/bin/python" - "$site" <<'PY' || fail "the installed package failed (above)"
import sys
import numpy as np
import attngraph as ag

shipped = sys.argv[1] + "/attngraph/libattngraph.so"
assert ag.library_path == shipped, f"loaded {ag.library_path}, not {shipped}"
assert ag.__file__.startswith(sys.argv[1]), f"imported {ag.__file__}"
# a directed 4-cycle with a self-loop on each node, one head of width 3
src, dst = np.array([0, 1, 2, 3, 0, 1, 2, 3]), np.array([1, 2, 3, 0, 0, 1, 2, 3])
g = ag.Graph.from_edge_index(np.stack([src, dst]), num_nodes=4)
rng = np.random.default_rng(5)
q, k, v = (rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3))
m = ag.attention(g, q, k, v, heads=1)
want = np.zeros((4, 3))
for i in range(4):
    js = src[dst == i]
    s = q[i].astype(np.float64) @ k[js].T.astype(np.float64) / np.sqrt(3)
    a = np.exp(s - s.max())
    want[i] = (a / a.sum()) @ v[js]
err = np.abs(m - want).max()
assert err < 1e-6, f"attention off by {err}"
PY
cd "$root"
"$venv/bin/pip" uninstall -y -q attngraph >"$venv.log" 2>&1 ||
    { cat "$venv.log" >&2; fail "pip uninstall attngraph failed"; }
[ ! -e "$site/attngraph" ] || fail "pip uninstall left $site/attngraph"
rm -rf "$venv" "$venv.log" "$venv.before"
echo "check-pip: pip install ./python, its library, and pip uninstall: ok"
