#!/bin/sh
# The README's MPI measurements (make scale-mpi), for a quiet 2-core machine:
#   1. a random graph of 2,000,000 nodes x 16 in-edges (CSR) and a causal
#      sequence of 131,072 tokens: 1 process x 2 threads against 2 processes x
#      1 thread (time per round, share of it communicating, bytes exchanged);
#   2. the ring path on causal 262,144 tokens on 1, 2 and 4 processes: peak
#      memory per process.
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
one_by_two() { mpirun --oversubscribe --bind-to none -np 1 "$BUILD/attngraph-mpi" run "$@" --threads 2; }
two_by_one() { mpirun --oversubscribe --bind-to core -np 2 "$BUILD/attngraph-mpi" run "$@" --threads 1; }

echo "== random graph: 2,000,000 nodes x 16 in-edges, D=64, $ROUNDS rounds"
"$BUILD/make_random_csr" 2000000 16 1 "$DIR/indptr.npy" "$DIR/indices.npy"
csr="--csr $DIR/indptr.npy,$DIR/indices.npy --dim 64 --rounds $ROUNDS"
/usr/bin/time -f "attngraph run, 1 x 2 threads: %e s in all, peak %M KB" \
    "$BUILD/attngraph" run $csr --threads 2 --quiet
echo "-- 1 process x 2 threads"
one_by_two $csr
echo "-- 2 processes x 1 thread"
two_by_one $csr
rm -f "$DIR/indptr.npy" "$DIR/indices.npy"

echo "== causal 131,072 tokens, D=64, $ROUNDS rounds"
causal="--pattern causal --nodes 131072 --dim 64 --rounds $ROUNDS"
/usr/bin/time -f "attngraph run, 1 x 2 threads: %e s in all, peak %M KB" \
    "$BUILD/attngraph" run $causal --threads 2 --quiet
echo "-- 1 process x 2 threads"
one_by_two $causal
echo "-- 2 processes x 1 thread, ring path (auto)"
two_by_one $causal
echo "-- 2 processes x 1 thread, halo path"
two_by_one $causal --path halo

echo "== ring path, causal 262,144 tokens, D=64, 1 round: peak memory per process"
/usr/bin/time -f "attngraph run, 1 process: %e s, peak %M KB" \
    "$BUILD/attngraph" run --pattern causal --nodes 262144 --dim 64 --threads 2 --quiet
for p in 1 2 4; do
    echo "-- $p process(es), ring"
    mpirun --oversubscribe --bind-to none -np $p "$BUILD/attngraph-mpi" run --pattern causal \
        --nodes 262144 --dim 64 --path ring --threads 1
done
