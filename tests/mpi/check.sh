#!/bin/sh
# attngraph-mpi against the one-process tool, byte for byte: every input kind
# (patterns on the tiled and gather kernels, CSR, graph files with multi-edges,
# isolated nodes, self-loops, undirected), features from a file, the halo and
# ring paths, on 1, 2, 3 and 4 processes; a bad input met by one process; usage
# errors. Every mpirun runs under timeout: a hang fails the test.
# Environment: AG_CLI (build/attngraph), AG_MPI_CLI (build/attngraph-mpi).
set -u
CLI=${AG_CLI:-build/attngraph}
MPI=${AG_MPI_CLI:-build/attngraph-mpi}
RANDOM_CSR=${AG_RANDOM_CSR:-build/make_random_csr}
EXAMPLE=${AG_EXAMPLE_MPI:-build/example_mpi}
PYTHON=${AG_PYTHON:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's own allocations are not ours to report under AddressSanitizer (its
# leaks lie in plugins unloaded at exit, which no suppression can name); the
# leak check at the end looks for leaks that our code allocated
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
# those leak checks mean something only in an AddressSanitizer build (make check-sanitize)
asan=
if ldd "$MPI" 2>/dev/null | grep -q libasan; then
    asan=1
else
    echo "mpi: the leak checks are skipped (not an AddressSanitizer build)"
fi
T=$(mktemp -d /tmp/attngraph-mpi-check.XXXXXX)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

mpi() {   # mpi P ARGS...: attngraph-mpi on P processes, one thread each
    p=$1
    shift
    timeout 60 mpirun --oversubscribe -np "$p" "$MPI" "$@" --threads 1
}

# same NAME "ONE-PROCESS ARGS" "MPI-ONLY ARGS" P...: the outputs of attngraph run
# and of attngraph-mpi run on each P, compared byte for byte (--out, --messages)
same() {
    name=$1 args=$2 extra=$3
    shift 3
    # shellcheck disable=SC2086
    if ! $CLI run $args --out "$T/$name.1.npy" --messages "$T/$name.1.m.npy" --quiet \
         --threads 1 >"$T/log" 2>&1; then
        bad "$name: attngraph run failed: $(cat "$T/log")"
        return
    fi
    for p in "$@"; do
        # shellcheck disable=SC2086
        if ! mpi "$p" run $args $extra --out "$T/$name.$p.npy" \
             --messages "$T/$name.$p.m.npy" --quiet >"$T/log" 2>&1; then
            bad "$name on $p processes: exit $?: $(head -n 3 "$T/log")"
        elif ! cmp -s "$T/$name.1.npy" "$T/$name.$p.npy" ||
             ! cmp -s "$T/$name.1.m.npy" "$T/$name.$p.m.npy"; then
            bad "$name on $p processes: the outputs differ from one process's"
        else
            ok
        fi
    done
}

# fails WORD FILE P ARGS...: attngraph-mpi on P processes fails as bad input (exit 1),
# one message naming WORD, and FILE ("-": none) is not written
fails() {
    word=$1 file=$2 p=$3
    shift 3
    mpi "$p" "$@" >/dev/null 2>"$T/err"
    status=$?
    if [ $status -ne 1 ] || [ "$(grep -c '^attngraph' "$T/err")" -ne 1 ] ||
       ! grep -q -- "$word" "$T/err" || { [ "$file" != - ] && [ -e "$file" ]; }; then
        bad "$*: exit $status, expected 1 and one message naming '$word': $(cat "$T/err")"
    else
        ok
    fi
}

common="--dim 16 --heads 2 --rounds 2 --seed 3"

# patterns: causal (tiled kernel, wide blocks), window (narrow blocks), random (gather),
# bigbird and window+global (block-sparse lists: the processes agree on the kernel from
# their parts' cells)
same causal "--pattern causal --nodes 3000 $common --norm layer" "" 1 2 3 4
same window "--pattern window:40 --nodes 3000 $common" "--path halo" 2 3 4
same random "--pattern random:8,5+window:2 --nodes 2600 $common --no-residual" "" 2 3 4
same bigbird "--pattern bigbird:32,1,1,1 --nodes 3000 $common --norm layer" "" 2 3
same longformer "--pattern window:40+global:3 --nodes 3000 $common" "" 2 4
same selfoff "--pattern causal --nodes 2100 --dim 8 --self-loops off --posenc sinusoidal" "" 2 3

# CSR: each process reads its slice of indices
"$RANDOM_CSR" 4100 10 7 "$T/ip.npy" "$T/ix.npy" >/dev/null
same csr "--csr $T/ip.npy,$T/ix.npy $common" "" 1 2 3 4
same csr-self "--csr $T/ip.npy,$T/ix.npy --dim 8 --self-loops on --beta 0.5 --score dot" "" 3
same csr-replace "--csr $T/ip.npy,$T/ix.npy --dim 8 --self-loops replace" "" 2

# (METIS parts: see "--partition metis" below)

# a graph file read by rank 0: multi-edges (repeated lines), self-loops, and
# isolated nodes (ids that no line names), directed and undirected
awk 'BEGIN { x = 12345; for (i = 0; i < 2600; i++) { if (i % 7 == 3) continue;
       for (k = 0; k < 5; k++) { x = (x * 1103515245 + 12345) % 2147483648;
         j = x % 2700; if (j % 7 == 3) j++; print j, i; if (k == 0 && i % 5 == 0) print j, i } }
       print 0, 0; print 5, 5 }' >"$T/g.edgelist"
same graph "$T/g.edgelist $common" "" 1 2 3 4
same graph-undirected "$T/g.edgelist --undirected $common" "" 2 4
same graph-loops "$T/g.edgelist --self-loops on --dim 8" "" 3
same graph-replace "$T/g.edgelist --self-loops replace --dim 8" "" 2

# every score function (the generic kernel on each part, its per-node terms
# made for the window of rows the part holds), bitwise
for score in additive gatv2 cosine sigmoid linear; do
    same "score-$score" "--pattern random:8,5+window:2 --nodes 2600 $common --score $score" "" 2 3
done
same softcap-alibi "--pattern causal --nodes 2100 $common --softcap 3 --alibi --norm layer" "" 2 4
same gat-graph "$T/g.edgelist --dim 8 --heads 2 --score additive --beta 0.5" "" 1 3

# features from a file (read by rank 0, rows sent out), weights from a folder
same features "--pattern causal --nodes 3000 --features $T/causal.1.npy --heads 2" "" 2 3

# the ring path: forced, and chosen by auto for a long causal run; causal on the
# halo path (the tiled kernel reading a halo of nearly every row) too
same ring "--pattern causal --nodes 3000 $common --norm layer" "--path ring" 2 3 4
same causal-halo "--pattern causal --nodes 3000 $common" "--path halo" 2 3
for want in "ring:--pattern causal --nodes 3000" "halo:--pattern random:4 --nodes 3000"; do
    # shellcheck disable=SC2086
    if mpi 2 run ${want#*:} --dim 16 >"$T/log" 2>&1 && grep -q "${want%%:*} path" "$T/log"; then
        ok
    else
        bad "auto on ${want#*:} did not take the ${want%%:*} path: $(cat "$T/log")"
    fi
done
same ring-window "--pattern window:300 --nodes 4500 $common" "--path ring" 2 4
# two-sided: blocks also travel leftwards; a prefix every process reads
same ring-two-sided "--pattern window:200,300 --nodes 5000 $common" "--path ring" 2 3 4
same ring-prefix "--pattern prefix:1500 --nodes 4000 --dim 16 --heads 2" "--path ring" 3 4

# the C API in an embedding program, against ag_rounds_run in the same program
for spec in causal random:12,4+window:3; do
    for p in 1 2 3; do
        if ! timeout 60 mpirun --oversubscribe -np $p "$EXAMPLE" "$spec" 3000 >"$T/log" 2>&1; then
            bad "example_mpi $spec on $p processes: $(head -n 3 "$T/log")"
        else
            ok
        fi
    done
done

# a wrong --features file (rows): one message, exit 1
mpi 2 run --pattern causal --nodes 2999 --features "$T/causal.1.npy" --out "$T/f.npy" \
    >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 1 ] || [ "$(grep -c '^attngraph' "$T/err")" -ne 1 ] || [ -e "$T/f.npy" ]; then
    bad "features of the wrong size: exit $status: $(cat "$T/err")"
else
    ok
fi

# a bad input that only the last process meets: an index out of range at the
# end of the indices file. One message, exit 1, no output, no hang.
cp "$T/ix.npy" "$T/bad.npy"
size=$(wc -c <"$T/bad.npy")
printf '\377\377\377\377\377\377\377\177' |
    dd of="$T/bad.npy" bs=1 seek=$((size - 8)) conv=notrunc 2>/dev/null
mpi 4 run --csr "$T/ip.npy,$T/bad.npy" --dim 8 --out "$T/bad.out.npy" --quiet \
    >"$T/out" 2>"$T/err"
status=$?
last=$("$PYTHON" -c "import numpy, sys; print(len(numpy.load(sys.argv[1])) - 1)" "$T/ix.npy")
if [ $status -ne 1 ]; then
    bad "bad input: exit $status, expected 1: $(head -n 3 "$T/err")"
elif [ "$(grep -c '^attngraph' "$T/err")" -ne 1 ] ||
     ! grep -q "rank 3 of 4 (.*): .*bad.npy: indices\[$last\] is" "$T/err"; then
    bad "bad input: expected one message naming the process, the file and the entry, got: $(cat "$T/err")"
elif [ -e "$T/bad.out.npy" ]; then
    bad "bad input: an output was written"
else
    ok
fi

# a process killed in the middle of a run: mpirun ends the others, and the
# output (written by rank 0 through a temporary without a name) is not there.
# The run is long (about 12 minutes here) so that it cannot end before the kill;
# the ranks are looked for until they appear, since mpirun may take seconds to
# start them on a loaded or fresh machine (a fixed 2 s once found none).
mkdir "$T/crash"
timeout 60 mpirun --oversubscribe -np 2 "$MPI" run --pattern causal --nodes 60000 --dim 32 \
    --rounds 1000 --threads 1 --out "$T/crash/out.npy" >/dev/null 2>&1 &
launcher=$!
rank=
for _ in $(seq 40); do
    sleep 0.5
    rank=$(pgrep -P "$(pgrep -P $launcher | head -n 1)" 2>/dev/null | tail -n 1)
    [ -n "$rank" ] && break
done
if [ -n "$rank" ]; then sleep 1; kill -KILL "$rank"; else kill "$launcher"; fi
wait $launcher
status=$?
if [ -z "$rank" ] || [ $status -eq 0 ] || [ $status -eq 124 ]; then
    bad "killed rank: exit $status (rank '$rank'): expected the job to end at once, failed"
elif [ -n "$(ls -A "$T/crash")" ]; then
    bad "killed rank: left $(ls -A "$T/crash")"
else
    ok
fi

# a pattern over a graph file: rank 0 compiles it over the graph, as run does
same over-graph "graphs/planted.gml --pattern graph+expander:3 $common" "" 2 3
same over-graph-hops "graphs/karate.gml --pattern hops:2&!self $common" "" 2

# usage errors: exit 2 with one message
mpi 2 run graphs/karate.gml --pattern graph+virtual:1 >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 2 ] || [ "$(grep -c 'virtual nodes run on one process' "$T/err")" -ne 1 ]; then
    bad "virtual nodes under MPI: exit $status, expected 2 and one message: $(cat "$T/err")"
else
    ok
fi
mpi 2 run --csr "-,$T/ix.npy" </dev/null >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 2 ] || [ "$(grep -c 'standard input cannot give' "$T/err")" -ne 1 ]; then
    bad "--csr -: exit $status, expected 2 and one message: $(cat "$T/err")"
else
    ok
fi
mpi 3 run --pattern 'window:' --nodes 3000 >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 2 ] || [ "$(grep -c '^attngraph' "$T/err")" -ne 1 ]; then
    bad "a bad pattern: exit $status, expected 2 and one message: $(cat "$T/err")"
else
    ok
fi
mpi 2 run --pattern random:4 --nodes 3000 --path ring >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 1 ] || [ "$(grep -c 'ring' "$T/err")" -ne 1 ]; then
    bad "--path ring on a graph of several runs: exit $status: $(cat "$T/err")"
else
    ok
fi

# ---- --partition metis: METIS parts of a graph file or CSR, renumbered ----

# Not bitwise: renumbering changes the order in which a destination adds its
# sources' terms and the rows' projection blocks. Measured against one process
# (2-4 processes, the cases below): max |diff| / (1 + |x|) = 1.1e-6 (a few float32
# ulps through two rounds; |x| up to 9). The bound, 5e-6, is about 5x that: a
# wrong row order, feature or source gives differences of order 1.
METIS_TOL=5e-6

# within NAME ONE.npy P.npy: max |a - b| / (1 + |a|) <= METIS_TOL (prints the value)
within() {
    "$PYTHON" -c "
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
if a.shape != b.shape: sys.exit('shapes %s and %s' % (a.shape, b.shape))
r = float((np.abs(a.astype(np.float64) - b) / (1 + np.abs(a))).max()) if a.size else 0.0
print('%s: max |diff| / (1 + |x|) = %.3g' % (sys.argv[3], r))
sys.exit(0 if r <= float(sys.argv[4]) else 1)" "$2" "$3" "$1" "$METIS_TOL"
}

# close NAME "ONE-PROCESS ARGS" "MPI-ONLY ARGS" P...: like same, but --partition
# metis on each P, the outputs within METIS_TOL of one process's; the report in
# $T/NAME.P.log
close() {
    name=$1 args=$2 extra=$3
    shift 3
    # shellcheck disable=SC2086
    if ! $CLI run $args --out "$T/$name.1.npy" --messages "$T/$name.1.m.npy" --quiet \
         --threads 1 >"$T/log" 2>&1; then
        bad "$name: attngraph run failed: $(cat "$T/log")"
        return
    fi
    for p in "$@"; do
        # shellcheck disable=SC2086
        if ! mpi "$p" run $args --partition metis $extra --out "$T/$name.$p.npy" \
             --messages "$T/$name.$p.m.npy" >"$T/$name.$p.log" 2>&1; then
            bad "$name on $p processes: exit $?: $(head -n 3 "$T/$name.$p.log")"
        elif ! within "$name on $p" "$T/$name.1.npy" "$T/$name.$p.npy" >"$T/log" 2>&1 ||
             ! within "$name on $p (messages)" "$T/$name.1.m.npy" "$T/$name.$p.m.npy" \
                 >>"$T/log" 2>&1; then
            bad "$name on $p processes: beyond $METIS_TOL of one process: $(cat "$T/log")"
        else
            [ -n "${AG_VERBOSE:-}" ] && cat "$T/log"
            ok
        fi
    done
}

# communities of 400 nodes with 8 in-edges each (1 in 12 from anywhere), the ids
# shuffled so that contiguous ranges cut most edges; repeated lines (multi-edges),
# self-loops, and id 77 named by no line (an isolated node)
awk 'function rnd() { x = (x * 1103515245 + 12345) % 2147483648; return x }
BEGIN { x = 4242; N = 6000; C = 400
  for (i = 0; i <= N; i++) id[i] = i
  for (i = N; i > 0; i--) { j = rnd() % (i + 1); t = id[i]; id[i] = id[j]; id[j] = t }
  for (i = 0; i <= N; i++) if (id[i] == 77) skip = i
  if (skip != N) id[skip] = id[N]
  for (i = 0; i < N; i++) {
    c = int(i / C)
    for (k = 0; k < 8; k++) {
      j = rnd() % 12 == 0 ? rnd() % N : c * C + rnd() % C
      print id[j], id[i]
      if (k == 0 && i % 9 == 0) print id[j], id[i]
    }
    if (i % 13 == 0) print id[i], id[i]
  } }' >"$T/comm.edgelist"
close metis "$T/comm.edgelist $common" "" 2 3 4
close metis-undirected "$T/comm.edgelist --undirected $common --self-loops on" "" 3
close metis-features "$T/comm.edgelist --features $T/metis.1.npy --posenc sinusoidal --heads 2" "" 2 3
close metis-csr "--csr $T/ip.npy,$T/ix.npy $common --norm layer" "" 3
# a band (node i reads i-10..i+10): one run per destination, whose renumbered parts
# start anywhere (the tiled kernel needs aligned starts: the gather kernel runs them)
awk 'BEGIN { for (i = 0; i < 3000; i++) for (j = i - 10; j <= i + 10; j++)
  if (j >= 0 && j < 3000) print j, i }' >"$T/band.edgelist"
close metis-band "$T/band.edgelist --dim 16 --seed 2" "" 2 3
# the edge cut in the report is attngraph plan's for the same seed
for p in 2 3 4; do
    cut=$(sed -n 's/^partition: METIS (seed 3): edge cut \([0-9]*\) .*/\1/p' "$T/metis.$p.log")
    plan=$($CLI plan "$T/comm.edgelist" --ranks $p --partition metis --seed 3 --rate 1,1 --json |
           sed -n 's/.*"edge_cut": \([0-9]*\),.*/\1/p')
    if [ -z "$cut" ] || [ "$cut" != "$plan" ]; then
        bad "metis on $p: edge cut '$cut', attngraph plan's '$plan': $(head -n 4 "$T/metis.$p.log")"
    else
        ok
    fi
done
# on the shuffled communities METIS moves fewer rows than the contiguous parts:
# the bytes measured, and the report's estimate of the contiguous parts' bytes
# is what a contiguous run measures
exchanged() { sed -n 's/.*exchanged: \([0-9.e+-]*\) MB a round.*/\1/p' "$1"; }
mpi 3 run "$T/comm.edgelist" $common >"$T/contiguous.log" 2>&1
m=$(exchanged "$T/metis.3.log") c=$(exchanged "$T/contiguous.log")
said=$(sed -n 's/.*would cut .*halo [0-9]* rows (\([0-9.e+-]*\) MB a round).*/\1/p' \
       "$T/metis.3.log")
if [ -z "$m" ] || [ -z "$c" ] || ! awk -v m="$m" -v c="$c" 'BEGIN { exit !(m < 0.8 * c) }'; then
    bad "metis on 3: $m MB a round, not below the contiguous parts' $c"
elif [ "$said" != "$c" ]; then
    bad "metis on 3: the report says the contiguous parts move '$said' MB a round; they moved '$c'"
else
    ok
fi
# what it does not do: a usage error (exit 2), one message
refused() {   # refused WORD ARGS...: exit 2 and one message naming WORD
    word=$1
    shift
    mpi 2 "$@" >/dev/null 2>"$T/err"
    status=$?
    if [ $status -ne 2 ] || [ "$(grep -c "^attngraph-mpi $1: " "$T/err")" -ne 1 ] ||
       ! grep -q -- "$word" "$T/err"; then
        bad "$*: exit $status, expected 2 and one message 'attngraph-mpi $1: ...' naming '$word': $(cat "$T/err")"
    else
        ok
    fi
}
refused "graph files" run --pattern random:4 --nodes 3000 --partition metis
refused "ring" run "$T/comm.edgelist" --partition metis --path ring
refused "contiguous parts" train --pattern causal --features "$T/causal.1.npy" \
    --labels "$T/causal.1.npy" --partition metis
refused "expected contiguous or metis" run "$T/comm.edgelist" --partition=spectral
# edge features stay on one process (attngraph run, train)
printf 'layer heads=2 dim=4 out=concat edges=yes\n' >"$T/edges.txt"
refused "the MPI layer runs no edge features" run --pattern causal --nodes 3000 \
    --model "$T/edges.txt" --edge-features "$T/edges.txt"
# raw attention on given Q, K, V: each process's rows sent out by rank 0, the K and V
# rows it reads exchanged; --out is M, as attngraph run's
same raw "--pattern random:8,5+window:2 --nodes 2600 --q $T/score-cosine.1.npy \
--k $T/score-gatv2.1.npy --v $T/score-additive.1.npy --heads 2" "" 1 2 3 4
same raw-gatv2 "$T/g.edgelist --q $T/graph.1.m.npy --k $T/graph.1.npy --v $T/graph.1.m.npy \
--score gatv2 --heads 4" "" 3
fails '3000 rows' "$T/raw.bad.npy" 2 run --pattern causal --nodes 2600 \
    --q "$T/score-cosine.1.npy" --k "$T/features.1.npy" --v "$T/score-cosine.1.npy" \
    --out "$T/raw.bad.npy"
refused "halo" run --pattern causal --nodes 2600 --q "$T/score-cosine.1.npy" \
    --k "$T/score-cosine.1.npy" --v "$T/score-cosine.1.npy" --path ring

# --edge-bias: rank 0 reads the attribute of the graph file and sends each process its
# nodes' messages' values
awk 'BEGIN { x = 777; print "graph ["; print "  directed 1"
       for (i = 0; i < 2600; i++) print "  node [ id " i " ]"
       for (i = 0; i < 2600; i++) for (k = 0; k < 6; k++) {
         x = (x * 1103515245 + 12345) % 2147483648; j = x % 2600
         printf "  edge [ source %d target %d w %.4f ]\n", j, i, (x % 2000) / 1000.0 - 1 }
       print "]" }' >"$T/bias.gml"
same edge-bias "$T/bias.gml $common --edge-bias w" "" 1 2 3 4
same edge-bias-gat "$T/bias.gml --dim 8 --edge-bias w --score additive --alibi" "" 3
fails "'nope' is not in the graph" "$T/bias.bad.npy" 2 run "$T/bias.gml" --edge-bias nope \
    --out "$T/bias.bad.npy"
refused "renumbering" run "$T/bias.gml" --edge-bias w --partition metis
refused "contiguous" run "$T/bias.gml" --per-node-weights --partition metis

# --trace, --until, --save-rounds: rank 0 gathers each round's states and the kernel's
# figures; the trace (CSV, SVG), the rounds saved and the round --until stops after (2 of
# 6 here) are one process's
tr="--pattern random:8,5+window:2 --nodes 2600 --dim 16 --heads 2 --rounds 6 --seed 3 --norm layer"
for kind in csv svg; do
    # shellcheck disable=SC2086
    $CLI run $tr --until 0.4 --trace "$T/tr.1.$kind" --save-rounds "$T/sr.1.$kind" \
        --out "$T/tr.1.npy" --quiet --threads 1 >"$T/log" 2>&1 || bad "trace: $(cat "$T/log")"
    for p in 2 3; do
        # shellcheck disable=SC2086
        if ! mpi $p run $tr --until 0.4 --trace "$T/tr.$p.$kind" --save-rounds "$T/sr.$p.$kind" \
             --out "$T/tr.$p.npy" --quiet >"$T/log" 2>&1; then
            bad "--trace $kind on $p processes: $(head -n 3 "$T/log")"
        elif ! cmp -s "$T/tr.1.$kind" "$T/tr.$p.$kind" || ! cmp -s "$T/tr.1.npy" "$T/tr.$p.npy" ||
             ! diff -r "$T/sr.1.$kind" "$T/sr.$p.$kind" >/dev/null; then
            bad "--trace $kind on $p processes: the trace, states or saved rounds differ"
        else
            ok
        fi
    done
done
if [ "$(ls "$T/sr.3.csv" | wc -l)" -ne 2 ]; then
    bad "--until 0.4 saved $(ls "$T/sr.3.csv" | wc -l) rounds; expected 2"
else
    ok
fi

# --attn: rank 0 gathers the reported round's queries and keys and exports the whole
# graph's weights as attngraph run does (CSV, .npy, GraphML; --attn-round; with --until)
# attn_same NAME "ARGS" P...: the exports $T/NAME.P.{csv,npy,graphml} against one process's
attn_same() {
    name=$1 args=$2
    shift 2
    # shellcheck disable=SC2086
    $CLI run $args --attn "$T/$name.1.csv" --attn "$T/$name.1.npy" --attn "$T/$name.1.graphml" \
        --quiet --threads 1 >"$T/log" 2>&1 || bad "--attn $name: attngraph run: $(cat "$T/log")"
    for p in "$@"; do
        # shellcheck disable=SC2086
        if ! mpi $p run $args --attn "$T/$name.$p.csv" --attn "$T/$name.$p.npy" \
             --attn "$T/$name.$p.graphml" --quiet >"$T/log" 2>&1; then
            bad "--attn $name on $p processes: $(head -n 3 "$T/log")"
        elif ! cmp -s "$T/$name.1.csv" "$T/$name.$p.csv" || ! cmp -s "$T/$name.1.npy" "$T/$name.$p.npy" ||
             ! cmp -s "$T/$name.1.graphml" "$T/$name.$p.graphml"; then
            bad "--attn $name on $p processes: the exports differ from one process's"
        else
            ok
        fi
    done
}
attn_same attn "--pattern random:8,5+window:2 --nodes 2600 $common" 2 3
attn_same attn-gat "$T/bias.gml --dim 8 --heads 2 --rounds 3 --score gatv2 --edge-bias w --attn-round 2" 3 4
attn_same attn-raw "--pattern random:8,5+window:2 --nodes 2600 --q $T/score-cosine.1.npy \
--k $T/score-gatv2.1.npy --v $T/score-additive.1.npy --heads 2 --score additive" 2 3
attn_same attn-until "--pattern causal --nodes 2100 --dim 16 --heads 2 --seed 3 --rounds 6 \
--until 0.4 --norm layer" 2
fails 'more than --max-edges 1000' "$T/big.csv" 2 run --pattern causal --nodes 2100 \
    --attn "$T/big.csv" --max-edges 1000

refused "halo path" run --pattern causal --nodes 3000 --trace "$T/ring.csv" --path ring

# per-node weights: each process draws (or reads) the rows of its own nodes; 3000 nodes on
# 4 processes leaves the last one without rows
same per-node "--pattern causal --nodes 3000 $common --per-node-weights" "" 2 3 4
same per-node-gatv2 "--pattern random:8,5+window:2 --nodes 2600 --dim 8 --per-node-weights \
--score gatv2 --norm layer" "" 3
"$PYTHON" -c "
import sys, numpy as np
g = np.random.default_rng(1)
for name in ('wq', 'wk', 'wv'):
    np.save(sys.argv[1] + '/pn-' + name + '.npy', (0.3 * g.standard_normal((2600, 8, 8))).astype(np.float32))
np.save(sys.argv[1] + '/pn-wo.npy', (0.3 * g.standard_normal((8, 8))).astype(np.float32))" "$T"
mkdir -p "$T/pn"
for name in wq wk wv wo; do mv "$T/pn-$name.npy" "$T/pn/$name.npy"; done
same per-node-file "--pattern random:8,5+window:2 --nodes 2600 --dim 8 --heads 2 --weights $T/pn" "" 3 4

# the ring streams the fused kernel: other scores are refused there (exit 1, one message)
fails "plain dot-product" - 2 run --pattern causal --nodes 3000 --score gatv2 --path ring
timeout 60 mpirun --oversubscribe -np 2 "$MPI" run "$T/comm.edgelist" --partition \
    >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 2 ] || [ "$(grep -c '^attngraph' "$T/err")" -ne 1 ] ||
   ! grep -q "needs a value" "$T/err"; then
    bad "--partition without a value: exit $status: $(cat "$T/err")"
else
    ok
fi
# a wrong --features file (rows) with METIS parts: one message, exit 1, no output
mpi 3 run "$T/comm.edgelist" --partition metis --features "$T/causal.1.npy" \
    --out "$T/f.npy" >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 1 ] || [ "$(grep -c '^attngraph' "$T/err")" -ne 1 ] ||
   ! grep -q '3000 rows' "$T/err" || [ -e "$T/f.npy" ]; then
    bad "metis, features of the wrong size: exit $status: $(cat "$T/err")"
else
    ok
fi

# under AddressSanitizer (make check-sanitize): no leak allocated by our code, on
# each path and input kind
for args in "--pattern causal --nodes 3000 --path ring" "--pattern window:40 --nodes 3000" \
            "--csr $T/ip.npy,$T/ix.npy" "$T/g.edgelist --features $T/graph.1.npy" \
            "$T/comm.edgelist --partition metis --features $T/metis.1.npy"; do
    [ -n "$asan" ] || break
    # shellcheck disable=SC2086
    ASAN_OPTIONS="${ASAN_OPTIONS}:detect_leaks=1" mpi 3 run $args --out "$T/leak.npy" \
        --messages "$T/leak.m.npy" --quiet >"$T/log" 2>&1
    ours=$(grep -E '#[0-9]+ .* (src|tools)/' "$T/log" | head -n 3)
    if [ -n "$ours" ]; then
        bad "leak in our code ($args): $ours"
    else
        ok
    fi
done

# ---- training: attngraph-mpi train against attngraph train ----

# npy_labels FILE N C: int64 labels [N], node i in class (i * 7 + i / 5) % C, every
# 11th unlabelled (-1); written with printf's octal escapes (no other tool needed)
npy_labels() {
    # shellcheck disable=SC2059
    printf "$(awk -v n="$2" -v c="$3" 'function byte(v) { return sprintf("\\%03o", v) }
    BEGIN {
        h = sprintf("{\047descr\047: \047<i8\047, \047fortran_order\047: False, \047shape\047: (%d,), }", n)
        while ((10 + length(h) + 1) % 64) h = h " "
        h = h "\n"
        s = "\\223NUMPY" byte(1) byte(0) byte(length(h) % 256) byte(int(length(h) / 256)) h
        for (i = 0; i < n; i++) {
            v = i % 11 == 10 ? -1 : (i * 7 + int(i / 5)) % c
            s = s byte(v < 0 ? 255 : v)
            for (k = 1; k < 8; k++) s = s byte(v < 0 ? 255 : 0)
        }
        print s }')" >"$1"
}

# train_same NAME "ARGS" P...: attngraph train and attngraph-mpi train on each P;
# the --save folders and the --log files compared byte for byte
train_same() {
    name=$1 args=$2
    shift 2
    # shellcheck disable=SC2086
    if ! $CLI train $args --save "$T/$name.s1" --log "$T/$name.1.csv" --quiet --threads 1 \
         >"$T/log" 2>&1; then
        bad "train $name: attngraph train failed: $(cat "$T/log")"
        return
    fi
    for p in "$@"; do
        # shellcheck disable=SC2086
        if ! mpi "$p" train $args --save "$T/$name.s$p" --log "$T/$name.$p.csv" --quiet \
             >"$T/log" 2>&1; then
            bad "train $name on $p processes: exit $?: $(head -n 3 "$T/log")"
        elif ! diff -r "$T/$name.s1" "$T/$name.s$p" >/dev/null ||
             ! cmp -s "$T/$name.1.csv" "$T/$name.$p.csv"; then
            bad "train $name on $p processes: the model or the log differs from one process's"
        else
            ok
        fi
    done
}

# 4100 nodes: every process has rows (parts start at multiples of 1024)
$CLI run --pattern random:6 --nodes 4100 --dim 16 --seed 5 --out "$T/tx.npy" --quiet
$CLI run --pattern window:9 --nodes 4100 --dim 16 --seed 6 --out "$T/ty.npy" --quiet
npy_labels "$T/labels.npy" 4100 3
tc="--features $T/tx.npy --labels $T/labels.npy --heads 2 --rounds 2 --seed 3"
train_same causal "--pattern causal $tc --epochs 2 --norm layer" 1 2 3
train_same bigbird "--pattern bigbird:32,1,1,1 $tc --epochs 2" 1 2 3
# dropout on features and attention: masks hashed from (seed, step, round, node or edge),
# so every process count draws one process's
train_same dropout "--pattern random:6 $tc --epochs 3 --norm layer --dropout 0.4 \
--attn-dropout 0.5 --resid-dropout 0.3" 1 2 4
# a model file's layers of their own shapes: widths that change, one projection, biases,
# an activation, a feed-forward sublayer, post-norm, a gated skip, every dropout; then
# run --weights on the saved model (its outputs, messages and classes)
cat >"$T/shaped.txt" <<EOF
norm layer
dropout 0.1
attn-dropout 0.2
resid-dropout 0.2
layer heads=2 dim=4 out=concat projection=one bias=yes act=elu
layer heads=2 dim=4 out=8 qkv_bias=yes ffn=2 norm=post
layer heads=1 dim=3 out=mean skip=gate bias=yes
EOF
sc="--features $T/tx.npy --labels $T/labels.npy --model $T/shaped.txt --seed 3"
train_same shaped "--pattern random:6 --nodes 4100 $sc --epochs 3" 1 2 4
same shaped-run "--pattern random:6 --nodes 4100 --features $T/tx.npy --weights $T/shaped.s1" \
    "" 2 3
fails "for one process" "$T/shaped.bad.csv" 2 run --pattern random:6 --nodes 4100 \
    --features "$T/tx.npy" --weights "$T/shaped.s1" --trace "$T/shaped.bad.csv"
# several connectivities: the same initial model under each, on their own parts; the log
# (every connectivity's rows) and the curve of all, against one process's
mc="--pattern window:40 --pattern random:8,5+window:2 $tc --epochs 2"
# shellcheck disable=SC2086
if ! $CLI train $mc --log "$T/mc.1.csv" --svg "$T/mc.1.svg" --quiet --threads 1 >"$T/log" 2>&1; then
    bad "train with 2 connectivities: attngraph train failed: $(cat "$T/log")"
fi
for p in 2 4; do
    # shellcheck disable=SC2086
    if ! mpi $p train $mc --log "$T/mc.$p.csv" --svg "$T/mc.$p.svg" >"$T/out" 2>&1; then
        bad "train with 2 connectivities on $p processes: $(head -n 3 "$T/out")"
    elif ! cmp -s "$T/mc.1.csv" "$T/mc.$p.csv" || ! cmp -s "$T/mc.1.svg" "$T/mc.$p.svg" ||
         ! grep -q "trained on 2 connectivities" "$T/out"; then
        bad "train with 2 connectivities on $p processes: the log, the curve or the table differ"
    else
        ok
    fi
done
# train --predict and --svg: rank 0 writes the classes of the final states it gathers and
# the curve of the log it keeps
# shellcheck disable=SC2086
if ! $CLI train --pattern window:40 $tc --epochs 2 --predict "$T/tp.1.npy" --svg "$T/tp.1.svg" \
     --quiet --threads 1 >"$T/log" 2>&1; then
    bad "train --predict --svg: attngraph train failed: $(cat "$T/log")"
fi
for p in 2 3; do
    # shellcheck disable=SC2086
    if ! mpi $p train --pattern window:40 $tc --epochs 2 --predict "$T/tp.$p.npy" \
         --svg "$T/tp.$p.svg" --quiet >"$T/log" 2>&1; then
        bad "train --predict --svg on $p processes: $(head -n 3 "$T/log")"
    elif ! cmp -s "$T/tp.1.npy" "$T/tp.$p.npy" || ! cmp -s "$T/tp.1.svg" "$T/tp.$p.svg"; then
        bad "train --predict --svg on $p processes: the classes or the curve differ"
    else
        ok
    fi
done
# --predict: the readout of the model just trained (its options from its folder), of the
# final states gathered on rank 0
pc="--pattern causal --nodes 4100 --features $T/tx.npy --weights $T/causal.s1"
# shellcheck disable=SC2086
if ! $CLI run $pc --predict "$T/pred.1.npy" --quiet --threads 1 >"$T/log" 2>&1; then
    bad "--predict: attngraph run failed: $(cat "$T/log")"
fi
for p in 2 3; do
    # shellcheck disable=SC2086
    if ! mpi $p run $pc --predict "$T/pred.$p.npy" --quiet >"$T/log" 2>&1; then
        bad "--predict on $p processes: $(head -n 3 "$T/log")"
    elif ! cmp -s "$T/pred.1.npy" "$T/pred.$p.npy"; then
        bad "--predict on $p processes: the classes differ from one process's"
    else
        ok
    fi
done
# a folder without a readout: exit 1, one message, no file
mkdir -p "$T/noreadout"
cp "$T/causal.s1"/w*.npy "$T/causal.s1"/ln_*.npy "$T/causal.s1/model.args" "$T/noreadout/"
fails 'readout.npy' "$T/pred.bad.npy" 2 run --pattern causal --nodes 4100 \
    --features "$T/tx.npy" --weights "$T/noreadout" --predict "$T/pred.bad.npy"
train_same causal-long "--pattern causal $tc --epochs 6 --optimizer sgd --momentum 0.9" 2
train_same window "--pattern window:40 $tc --epochs 2 --clip 0.5" 2 3 4
train_same random "--pattern random:8,5+window:2 $tc --epochs 2 --no-residual" 2 3
# --test-mask: the test accuracy at the best eval epoch, as one process reports it
tm="graphs/planted.gml --features graphs/planted/x.npy --labels graphs/planted/labels.npy
    --train-mask graphs/planted/train.npy --eval-mask graphs/planted/eval.npy
    --test-mask graphs/planted/eval.npy --rounds 2 --heads 2 --epochs 6"
# shellcheck disable=SC2086
$CLI train $tm --threads 1 | grep '^final' >"$T/tm.1"
# shellcheck disable=SC2086
mpi 2 train $tm | grep '^final' >"$T/tm.2"
if grep -q 'test accuracy' "$T/tm.1" && cmp -s "$T/tm.1" "$T/tm.2"; then ok; else
    bad "train --test-mask on 2 processes: '$(cat "$T/tm.2")', one process '$(cat "$T/tm.1")'"
fi
# every score function (the generic kernel's backward on each part: the destinations'
# states exchanged between its two passes, the attention vectors' chunk partials added
# in the whole's order)
for score in additive gatv2 cosine sigmoid linear; do
    train_same "train-$score" "--pattern random:8,5+window:2 $tc --epochs 2 --score $score" 2 3
done
# per-node weights: each process steps its own nodes' matrices after a norm summed in the
# whole arrays' chunks (--clip below the norm: the clipping scale is that norm's), and
# --save gathers them; a run of more epochs from that folder keeps each process's rows
train_same per-node "--pattern causal $tc --epochs 2 --per-node-weights --clip 0.05" 2 4
train_same per-node-resume "--pattern window:40 --features $T/tx.npy --labels $T/labels.npy \
--weights $T/per-node.s1 --epochs 1 --optimizer sgd" 2 3
train_same train-softcap-alibi "--pattern causal $tc --epochs 2 --softcap 3 --alibi --norm layer" 3 4
# 1000 nodes on 3 processes: the last process has no rows, and its part starts at 1000,
# not a multiple of the generic kernel's 16-node chunks
$CLI run --pattern random:6 --nodes 1000 --dim 16 --seed 5 --out "$T/tx1k.npy" --quiet
npy_labels "$T/labels1k.npy" 1000 3
train_same train-empty-part "--pattern random:8,5+window:2 --features $T/tx1k.npy \
--labels $T/labels1k.npy --heads 2 --rounds 2 --seed 3 --epochs 2 --score gatv2" 3
fails 'rows on every process' "$T/bad.s" 3 train --pattern random:8,5+window:2 --features "$T/tx1k.npy" \
    --labels "$T/labels1k.npy" --per-node-weights --epochs 1 --save "$T/bad.s"
# an edge bias (a multigraph, 6 random sources a node): each source's owner reads the bias
# of the messages it sends, from their destinations' owners
$CLI run "$T/bias.gml" --dim 16 --seed 5 --out "$T/bx.npy" --quiet
npy_labels "$T/blabels.npy" 2600 4
tb="$T/bias.gml --features $T/bx.npy --labels $T/blabels.npy --heads 2 --rounds 2 --seed 3 \
--epochs 2 --edge-bias w"
train_same train-edge-bias "$tb" 2 4
train_same train-edge-bias-gat "$tb --score additive --alibi --norm layer" 3
train_same train-edge-bias-gatv2 "$tb --score gatv2" 2
train_same targets "--pattern causal --features $T/tx.npy --targets $T/ty.npy --epochs 2" 2 3
# a graph file (multi-edges, self-loops, isolated nodes), read by rank 0
$CLI run "$T/g.edgelist" --dim 16 --seed 5 --out "$T/gx.npy" --quiet
npy_labels "$T/glabels.npy" "$(awk '{ if ($1 > m) m = $1; if ($2 > m) m = $2 } END { print m + 1 }' "$T/g.edgelist")" 4
train_same graph "$T/g.edgelist --features $T/gx.npy --labels $T/glabels.npy --epochs 2" 2 3
train_same train-gat-graph "$T/g.edgelist --features $T/gx.npy --labels $T/glabels.npy \
--epochs 2 --score additive --heads 2" 2 4
# a bad input: labels of the wrong length, met by every process; one message, exit 1, no folder
mpi 3 train --pattern causal --features "$T/tx.npy" --labels "$T/glabels.npy" --epochs 1 \
    --save "$T/bad.s" >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 1 ] || [ "$(grep -c '^attngraph' "$T/err")" -ne 1 ] || [ -e "$T/bad.s" ]; then
    bad "train with bad labels: exit $status: $(cat "$T/err")"
else
    ok
fi
# a bad input only the last process meets (a source index out of range at the end of
# the CSR's indices): one message, exit 1, no folder, no hang
$CLI run --csr "$T/ip.npy,$T/ix.npy" --dim 8 --out "$T/cx.npy" --quiet
npy_labels "$T/clabels.npy" 4100 3
mpi 4 train --csr "$T/ip.npy,$T/bad.npy" --features "$T/cx.npy" --labels "$T/clabels.npy" \
    --epochs 1 --save "$T/bad.s" >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 1 ] || [ "$(grep -c '^attngraph' "$T/err")" -ne 1 ] || [ -e "$T/bad.s" ]; then
    bad "train with a bad CSR on the last process: exit $status: $(cat "$T/err")"
else
    ok
fi
train_same csr "--csr $T/ip.npy,$T/ix.npy --features $T/cx.npy --labels $T/clabels.npy --epochs 2" 2 4
# what training on several processes does not do yet: a usage error
mpi 2 train --pattern causal --features "$T/tx.npy" --labels "$T/labels.npy" --path ring \
    >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 2 ] || [ "$(grep -c 'ring' "$T/err")" -ne 1 ]; then
    bad "train --path ring: exit $status, expected 2: $(cat "$T/err")"
else
    ok
fi

# lm_same NAME "ARGS" P...: attngraph lm train and attngraph-mpi lm train on each P:
# the --save folders byte for byte, and the logs but for their seconds (losses and
# accuracies alike)
lm_same() {
    name=$1 args=$2
    shift 2
    # shellcheck disable=SC2086
    if ! $CLI lm train $args --save "$T/$name.s1" --log "$T/$name.1.csv" --quiet --threads 1 \
         >"$T/log" 2>&1; then
        bad "lm train $name: attngraph lm train failed: $(cat "$T/log")"
        return
    fi
    cut -d, -f1-5,7-8 "$T/$name.1.csv" >"$T/$name.1.cut"
    for p in "$@"; do
        # shellcheck disable=SC2086
        if ! mpi "$p" lm train $args --save "$T/$name.s$p" --log "$T/$name.$p.csv" --quiet \
             >"$T/log" 2>&1; then
            bad "lm train $name on $p processes: exit $?: $(head -n 3 "$T/log")"
        elif ! diff -r "$T/$name.s1" "$T/$name.s$p" >/dev/null ||
             ! cut -d, -f1-5,7-8 "$T/$name.$p.csv" | cmp -s - "$T/$name.1.cut"; then
            bad "lm train $name on $p processes: the model or the log differs from one process's"
        else
            ok
        fi
    done
}

# a GPT on batches of 40 x 64 = 2560 rows: parts of 1024 rows, the last shorter
i=0
while [ $i -lt 800 ]; do
    printf 'the cat sat on the mat. a dog ran! %d\n' $((i % 7))
    i=$((i + 1))
done >"$T/text.txt"
lm_args="--text $T/text.txt --block 64 --batch 40 --layers 2 --heads 2 --dim 16 --iters 4 \
 --eval-every 2 --eval-iters 2 --lr 3e-3 --warmup 2 --seed 5"
lm_same lm "$lm_args --dropout 0.1" 2 3 4
lm_same lm-window-bias "$lm_args --bias --pattern window:8" 3
lm_same lm-rope "$lm_args --positions rope" 2
# example sets (MQAR): the whole validation set in batches, the last one padded
"$CLI" lm task mqar --vocab 32 --length 16 --pairs 2 --train 200 --val 37 --out "$T/mqar" \
    --quiet
lm_same lm-examples "--examples $T/mqar --batch 8 --layers 1 --heads 2 --dim 16 --iters 4 \
 --eval-every 2 --eval-iters 2 --lr 3e-3 --warmup 2" 2 3
lm_same lm-no-mlp "--examples $T/mqar --batch 8 --layers 2 --heads 2 --dim 16 --iters 3 \
 --eval-every 3 --eval-iters 2 --lr 3e-3 --warmup 2 --no-mlp --positions rope" 2
# --predictions: one process (each process holds its own rows), refused before any work
mpi 2 lm train --examples "$T/mqar" --iters 1 --layers 1 --heads 1 --dim 8 \
    --predictions "$T/pred.npy" >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 2 ] || ! grep -q "predictions: one process" "$T/err" || [ -e "$T/pred.npy" ]; then
    bad "lm train --predictions on MPI: exit $status, expected 2 and nothing written: $(cat "$T/err")"
else
    ok
fi
# a mask a block runs on one process: refused, naming the pattern, before any work
mpi 2 lm train $lm_args --pattern 'window:8|causal' >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 2 ] || ! grep -q "pattern 'window:8|causal': a pattern a block runs on one process" "$T/err"; then
    bad "lm train with a mask a block on MPI: exit $status, expected 2: $(cat "$T/err")"
else
    ok
fi
mpi 2 lm sample --model "$T/lm.s1" >/dev/null 2>"$T/err"
status=$?
if [ $status -ne 2 ] || ! grep -q "attngraph lm sample" "$T/err"; then
    bad "lm sample on MPI: exit $status, expected 2 and a pointer to lm sample: $(cat "$T/err")"
else
    ok
fi

# attngraph plan's peak memory a process against a real run's largest process
# (the children's maximum resident size: mpirun waits for its processes), within
# 25%; AddressSanitizer's shadow memory is not the run's
"$RANDOM_CSR" 300000 10 5 "$T/mip.npy" "$T/mix.npy" >/dev/null
for a in "--csr $T/mip.npy,$T/mix.npy" "--pattern window:64 --nodes 300000" \
    "--pattern bigbird:64,1,1,1 --nodes 300000"; do
    [ -z "$asan" ] || break
    # shellcheck disable=SC2086
    planned=$($CLI plan $a --ranks 2 --dim 64 --heads 4 --rate 1,1 --json |
        sed -n 's/.*"max_rows_held": [^,]*, "peak_bytes": \([0-9.e+]*\),.*/\1/p')
    # shellcheck disable=SC2086
    measured=$("$PYTHON" -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)' \
        timeout 60 mpirun --oversubscribe -np 2 "$MPI" run $a --dim 64 --heads 4 --rounds 1 \
        --threads 1 --path halo 2>"$T/log")
    if ! "$PYTHON" -c 'import sys; p, m = map(float, sys.argv[1:]); sys.exit(not 0.75 <= p / m <= 1.25)' \
         "${planned:-0}" "${measured:-1}"; then
        bad "plan's peak memory ($a): planned '$planned' bytes, measured '$measured': $(head -n 3 "$T/log")"
    else
        ok
    fi
done
# a CSR that cannot fit is refused from its offsets, before its edges are read
# (an indices file that is not there is never opened)
mpi 2 run --csr "$T/mip.npy,$T/no-such-indices.npy" --dim 64 --max-memory 200M >"$T/log" 2>&1
status=$?
if [ $status -ne 1 ] || ! grep -q "300000 nodes and 3000000 edges need at least .* GB a process on 2 (D=64" "$T/log" ||
   ! grep -q "the memory budget is 0.2 GB a process (--max-memory)" "$T/log"; then
    bad "a CSR over the memory budget: exit $status: $(head -n 2 "$T/log")"
else
    ok
fi

# training, under AddressSanitizer too: no leak of ours, on the tiled and the gather
# kernel, and the GPT's
for args in "--pattern causal --norm layer" "--pattern random:8,5+window:2" "lm"; do
    [ -n "$asan" ] || break
    if [ "$args" = lm ]; then
        # shellcheck disable=SC2086
        ASAN_OPTIONS="${ASAN_OPTIONS}:detect_leaks=1" mpi 3 lm train $lm_args --dropout 0.1 \
            --save "$T/leak.s" --quiet >"$T/log" 2>&1
    else
        # shellcheck disable=SC2086
        ASAN_OPTIONS="${ASAN_OPTIONS}:detect_leaks=1" mpi 3 train $args --features "$T/tx.npy" \
            --labels "$T/labels.npy" --epochs 2 --save "$T/leak.s" --quiet >"$T/log" 2>&1
    fi
    rm -rf "$T/leak.s"
    ours=$(grep -E '#[0-9]+ .* (src|tools)/|runtime error' "$T/log" | head -n 3)
    if [ -n "$ours" ]; then
        bad "train: leak or error in our code ($args): $ours"
    else
        ok
    fi
done

echo "mpi: $passed passed, $failed failed"
[ $failed -eq 0 ]
