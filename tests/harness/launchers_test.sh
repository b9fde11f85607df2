#!/bin/bash
# gyre-train under the launchers a training job uses: torchrun and Open MPI's
# mpirun (gyrerun is every other harness test's). Each trains two steps on
# two ranks; a launcher that is not installed is skipped, and the test is
# skipped (77) when neither is.
#   launchers_test.sh GYRE_TRAIN
set -u
train=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'a launcher starts the ranks and gyre finds its peers. %.0s' $(seq 300) > "$tmp/text.txt"
args=(--data "$tmp/text.txt" --steps 2 --layers 1 --dim 16 --heads 2 --seq 16 --batch 4 --tp 2)
export TMPDIR=$tmp GYRE_TIMEOUT_MS=30000
ran=0
check() {  # NAME LOG: both ranks named their place, rank 0 finished
  grep -q "rank 0 = dp 0, tp 0, pp 0" "$2" && grep -q "rank 1 = dp 0, tp 1, pp 0" "$2" &&
    grep -q "step 2/2" "$2" || { echo "gyre-train under $1 did not train:"; cat "$2"; exit 1; }
  echo "gyre-train under $1: ok"
  ran=1
}
# --redirects 2 --tee 2: torch 1.13's launcher fails on Python 3.11 without them.
if command -v torchrun > /dev/null; then
  timeout 120 torchrun --standalone --no_python --nproc_per_node 2 --redirects 2 --tee 2 "$train" "${args[@]}" > "$tmp/torchrun.log" 2>&1 ||
    { echo "torchrun failed:"; cat "$tmp/torchrun.log"; exit 1; }
  check torchrun "$tmp/torchrun.log"
fi
if command -v mpirun > /dev/null; then
  timeout 120 mpirun --allow-run-as-root --oversubscribe -n 2 "$train" "${args[@]}" > "$tmp/mpirun.log" 2>&1 ||
    { echo "mpirun failed:"; cat "$tmp/mpirun.log"; exit 1; }
  check mpirun "$tmp/mpirun.log"
fi
[ "$ran" = 1 ] || { echo "neither torchrun nor mpirun is installed"; exit 77; }
