#!/bin/sh
# The MPI measurements of docs/scale.md (make scale-mpi), for a quiet 2-core machine:
#   1. a random graph of 2,000,000 nodes x 16 in-edges (CSR) and a causal
#      sequence of 131,072 tokens: 1 process x 2 threads against 2 processes x
#      1 thread (time per round, share of it communicating, bytes exchanged);
#   2. the ring path on causal 262,144 tokens on 1, 2 and 4 processes: peak
#      memory per process;
#   3. training (attngraph-mpi train) on a random graph of 100,000 nodes x 16
#      in-edges: 1 x 2 threads against 2 x 1 (time per epoch, communication).
# attngraph-mpi prints each figure itself (its report); /usr/bin/time gives the
# one-process tool's for comparison. Takes about 10 minutes.
# Environment: BUILD (build), SCALE_DIR (/tmp/attngraph-scale-mpi), ROUNDS (3).
set -eu
BUILD=${BUILD:-build}
DIR=${SCALE_DIR:-/tmp/attngraph-scale-mpi}
ROUNDS=${ROUNDS:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT

# one process with two threads must not be bound to one core (mpirun's default)
# one_by_two / two_by_one COMMAND OPTIONS...
one_by_two() { c=$1; shift; mpirun --oversubscribe --bind-to none -np 1 "$BUILD/attngraph-mpi" "$c" "$@" --threads 2; }
two_by_one() { c=$1; shift; mpirun --oversubscribe --bind-to core -np 2 "$BUILD/attngraph-mpi" "$c" "$@" --threads 1; }

echo "== random graph: 2,000,000 nodes x 16 in-edges, D=64, $ROUNDS rounds"
"$BUILD/make_random_csr" 2000000 16 1 "$DIR/indptr.npy" "$DIR/indices.npy"
csr="--csr $DIR/indptr.npy,$DIR/indices.npy --dim 64 --rounds $ROUNDS"
/usr/bin/time -f "attngraph run, 1 x 2 threads: %e s in all, peak %M KB" \
    "$BUILD/attngraph" run $csr --threads 2 --quiet
echo "-- 1 process x 2 threads"
one_by_two run $csr
echo "-- 2 processes x 1 thread"
two_by_one run $csr
rm -f "$DIR/indptr.npy" "$DIR/indices.npy"

echo "== causal 131,072 tokens, D=64, $ROUNDS rounds"
causal="--pattern causal --nodes 131072 --dim 64 --rounds $ROUNDS"
/usr/bin/time -f "attngraph run, 1 x 2 threads: %e s in all, peak %M KB" \
    "$BUILD/attngraph" run $causal --threads 2 --quiet
echo "-- 1 process x 2 threads"
one_by_two run $causal
echo "-- 2 processes x 1 thread, ring path (auto)"
two_by_one run $causal
echo "-- 2 processes x 1 thread, halo path"
two_by_one run $causal --path halo

echo "== ring path, causal 262,144 tokens, D=64, 1 round: peak memory per process"
/usr/bin/time -f "attngraph run, 1 process: %e s, peak %M KB" \
    "$BUILD/attngraph" run --pattern causal --nodes 262144 --dim 64 --threads 2 --quiet
for p in 1 2 4; do
    echo "-- $p process(es), ring"
    mpirun --oversubscribe --bind-to none -np $p "$BUILD/attngraph-mpi" run --pattern causal \
        --nodes 262144 --dim 64 --path ring --threads 1
done

echo "== training: random graph 100,000 nodes x 16 in-edges, D=64, 2 rounds, targets, 5 epochs"
"$BUILD/make_random_csr" 100000 16 1 "$DIR/indptr.npy" "$DIR/indices.npy"
csr="--csr $DIR/indptr.npy,$DIR/indices.npy"
"$BUILD/attngraph" run $csr --dim 64 --out "$DIR/x.npy" --quiet
"$BUILD/attngraph" run $csr --dim 64 --seed 2 --out "$DIR/y.npy" --quiet
task="$csr --features $DIR/x.npy --targets $DIR/y.npy --rounds 2 --epochs 5"
/usr/bin/time -f "attngraph train, 1 x 2 threads: %e s in all, peak %M KB" \
    "$BUILD/attngraph" train $task --threads 2 --quiet
echo "-- 1 process x 2 threads"
one_by_two train $task
echo "-- 2 processes x 1 thread"
two_by_one train $task
