#!/usr/bin/env bash
# Builds gyre's libFuzzer targets with clang (ASan + UBSan) into build-fuzz
# and runs one or all of them for N seconds each, one after another, growing
# a scratch copy of each checked-in corpus (docs/reliability.md, "Fuzzing").
#
#   tools/fuzz.sh [SECONDS] [TARGET...]     default: 600 seconds, every target
#   tools/fuzz.sh --list                    the targets
#
# New inputs land in build-fuzz/corpus/<target>/; findings (crash-*, leak-*,
# timeout-*) in build-fuzz/findings/<target>/. To keep what a run found:
#   build-fuzz/tests/<target>_fuzz -merge=1 tests/fuzz/corpus/<target> build-fuzz/corpus/<target>
# Each run's summary goes to build-fuzz/findings/<target>.log.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GYRE_FUZZ_BUILD:-$root/build-fuzz}
targets_all=$(sed -n 's/^ *gyre_fuzz_target(\([a-z_]*\) .*/\1/p' "$root/tests/fuzz/fuzz.cmake")
if [ "${1:-}" = --list ]; then echo "$targets_all"; exit 0; fi
seconds=${1:-600}
shift || true
targets=${*:-$targets_all}

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGYRE_FUZZ=ON -DGYRE_SANITIZE=address,undefined -DGYRE_BUILD_BENCH=OFF -DGYRE_BUILD_TORCH=OFF \
    -DGYRE_CUDA=OFF "${launcher[@]}" >/dev/null
fi
cmake --build "$build" -j"${GYRE_FUZZ_JOBS:-2}" --target $(for t in $targets; do echo "${t}_fuzz"; done)

for t in $targets; do
  mkdir -p "$build/corpus/$t" "$build/findings/$t"
  echo "fuzz: $t for ${seconds}s" >&2
  start=$(date +%s)
  set +e
  nice "$build/tests/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/findings/$t/" "$build/corpus/$t" "$root/tests/fuzz/corpus/$t" \
    >"$build/findings/$t.log" 2>&1
  rc=$?
  set -e
  end=$(date +%s)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/findings/$t.log" | tail -1)
  echo "fuzz: $t rc=$rc seconds=$((end - start)) executions=${execs:-?} corpus=$(ls "$build/corpus/$t" | wc -l)" \
    | tee -a "$build/findings/runs.txt" >&2
done
