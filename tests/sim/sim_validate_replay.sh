#!/usr/bin/env bash
# tools/sim_validate.sh's simulation half on stored measurements (SIM_ONLY=1):
# the calibration's arithmetic, the cluster it builds (with and without the
# host's cores) and the table, without the namespaces and minutes the
# measuring half needs. The fixture is a real run's 2- and 4-rank AllReduce
# (2026-12-05, 8bbc411), its traces cut to one call per size, and the peer
# read of a later run (fa1868a), which the first did not measure.
#   sim_validate_replay.sh ROOT BUILD
set -euo pipefail
root=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
for cores in 2 0; do
  out=$work/c$cores
  mkdir -p "$out"
  cp "$root"/tests/sim/validate_fixture/* "$out"/
  log=$(BUILD=$build SIM_ONLY=1 CORES=$cores CONFIGS="1x2 1x4" COLLS=allreduce "$root/tools/sim_validate.sh" "$out")
  cluster=$(grep '^cluster:' <<<"$log") || fail "no cluster line"
  # The calibration's numbers, as the script derives them (16.65 GB/s into a
  # FIFO, 8.56 out, 2.17 us a switch: docs/simulator.md's run; 4.3 GB/s a
  # read of a peer's memory through the kernel).
  grep -q "one host: $cores cores, 16.650 GB/s into a FIFO and 8.564 out, 2.17 us a switch, peer reads 4.306 GB/s" <<<"$cluster" ||
    fail "calibration: $cluster"
  for cfg in "1 x 2" "1 x 4"; do
    rows=$(grep -c "^| allreduce | $cfg | " "$out/table.md" || true)
    [ "$rows" = 9 ] || fail "$cores cores, $cfg: $rows rows, want 9 (8 B to 64 MiB)"
    grep -q "^| allreduce | $cfg | [0-9]*% | " "$out/table.md" || fail "$cores cores, $cfg: no median"
  done
  ! grep -qi 'nan\|inf' "$out/table.md" || fail "$cores cores: a number that is not"
  echo "$cores cores: $(grep -E '^- 1 x' "$out/table.md" | tr '\n' ' ')"
done
echo PASS
