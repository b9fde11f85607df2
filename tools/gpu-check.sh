#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, build gyre with CUDA, run
# the tests labelled `gpu` and the GPU benchmarks, and write a summary, in
# well under 8 minutes (docs/gpu.md, "Running the device check").
#
#   tools/gpu-check.sh [summary-dir]
#
# The summary goes to summary-dir (default: $OUT where set, else
# build-gpu/check): summary.md (what ran, what passed, the numbers) and the
# logs beside it. Only the GPU targets are built. Where no GoogleTest is
# installed, the sources from `tools/gpu-check.sh --prepare` (run on a
# machine with Debian's googletest package; they land in .gpu-deps/, which
# git ignores) are built instead: carry .gpu-deps to the GPU machine.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --prepare ]; then
  mkdir -p .gpu-deps
  grep -qx '/.gpu-deps/' .git/info/exclude 2>/dev/null || echo /.gpu-deps/ >> .git/info/exclude
  rm -rf .gpu-deps/googletest
  cp -r /usr/src/googletest .gpu-deps/googletest
  echo "prepared .gpu-deps/googletest; carry .gpu-deps"
  exit 0
fi

out=${1:-${OUT:-build-gpu/check}}
mkdir -p "$out"
summary=$out/summary.md
jobs=$(nproc)
start=$(date +%s)
status=0
say() { echo "$*" | tee -a "$summary"; }
: > "$summary"
say "# gyre GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
say ""
say '```'
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee -a "$summary"
nvcc --version 2>&1 | tail -1 | tee -a "$summary"
say '```'

gtest=()
if [ -d .gpu-deps/googletest ]; then gtest=(-DGYRE_GTEST_SOURCE="$PWD/.gpu-deps/googletest"); fi
# One architecture: this GPU's (sm_90 on Hopper), found by nvidia-smi.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
arch=${arch:-90}
if ! timeout 240 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGYRE_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES="$arch" "${gtest[@]}" > "$out/configure.log" 2>&1; then
  say "configure FAILED (tail of $out/configure.log):"; tail -20 "$out/configure.log" | tee -a "$summary"; exit 1
fi
targets=(gyre-gpu-kernel-bench gyre-bench)
grep -q "tests (GoogleTest): yes" "$out/configure.log" && targets+=(cuda_kernels_test)
if ! timeout 300 cmake --build build-gpu -j"$jobs" --target "${targets[@]}" > "$out/build.log" 2>&1; then
  say "build FAILED (tail of $out/build.log):"; tail -30 "$out/build.log" | tee -a "$summary"; exit 1
fi
say ""
say "built ${targets[*]} for sm_$arch in $(( $(date +%s) - start )) s"

if [[ " ${targets[*]} " == *" cuda_kernels_test "* ]]; then
  say ""
  say "## tests labelled gpu"
  if timeout 240 ctest --test-dir build-gpu -L gpu --output-on-failure -j4 > "$out/ctest.log" 2>&1; then
    say "$(grep -E 'tests passed' "$out/ctest.log")"
    # On a GPU machine a skip is a failure: the test found no device.
    skipped=$(grep -c '(Skipped)' "$out/ctest.log")
    if [ "$skipped" != 0 ]; then
      status=1
      say "but $skipped skipped (no usable GPU?):"; grep -m3 '(Skipped)' "$out/ctest.log" | tee -a "$summary"
    fi
  else
    status=1
    say "FAILED:"; grep -E "tests passed|\(Failed\)|\(Timeout\)|Skipped" "$out/ctest.log" | tee -a "$summary"
  fi
else
  say "no GoogleTest here and no .gpu-deps: the gpu tests were not built"
fi

say ""
say "## reduce kernel against the GPU's own copy (gyre-gpu-kernel-bench)"
timeout 120 build-gpu/bench/gyre-gpu-kernel-bench --bytes $((256 << 20)) --reps 20 > "$out/kernel-bench.md" 2>&1 || status=1
cat "$out/kernel-bench.md" | tee -a "$summary"

say ""
say "## every collective on device buffers, checked (gyre-bench --device cuda, 3 ranks on this GPU)"
for c in allreduce allgather reducescatter alltoall alltoallv broadcast reduce gather scatter sendrecv; do
  if timeout 90 build-gpu/bench/gyre-bench $c --ranks 3 --device cuda -b 8 -e 1M -f 32 -n 2 -w 1 -T 60 \
       > "$out/device-$c.log" 2>&1; then
    say "$c: ok, $(grep -c '^ ' "$out/device-$c.log") rows checked"
  else
    status=1
    say "$c: FAILED (tail of $out/device-$c.log):"; tail -5 "$out/device-$c.log" | tee -a "$summary"
  fi
done
# The ranks share one host: the calls above ran direct on the device (docs/gpu.md,
# "Direct device calls"). The staged path, for the operations that have both:
for c in allreduce alltoall allgather; do
  if GYRE_DEVICE_DIRECT=0 timeout 90 build-gpu/bench/gyre-bench $c --ranks 3 --device cuda -b 8 -e 1M -f 32 -n 2 \
       -w 1 -T 60 > "$out/staged-$c.log" 2>&1; then
    say "$c staged (GYRE_DEVICE_DIRECT=0): ok, $(grep -c '^ ' "$out/staged-$c.log") rows checked"
  else
    status=1
    say "$c staged: FAILED (tail of $out/staged-$c.log):"; tail -5 "$out/staged-$c.log" | tee -a "$summary"
  fi
done

say ""
say "## AllReduce on device buffers (direct, and staged) against host buffers (gyre-bench, ranks sharing this GPU)"
for n in 2 4; do
  for w in cuda staged host; do
    d=$w; direct=1
    if [ "$w" = staged ]; then d=cuda; direct=0; fi
    say ""
    say "### $n ranks, --device $d, GYRE_DEVICE_DIRECT=$direct"
    say '```'
    GYRE_DEVICE_DIRECT=$direct timeout 120 build-gpu/bench/gyre-bench allreduce --ranks $n --bind core --device $d \
      -b 8 -e 256M -f 8 -n 10 -w 3 -T 100 --percentiles > "$out/allreduce-$w-$n.log" 2>&1 || status=1
    grep -v '^# *$' "$out/allreduce-$w-$n.log" | tail -14 | tee -a "$summary"
    say '```'
  done
done

say ""
say "## pipelined staging: pieces (default) against whole copies (GYRE_DEVICE_PIECE_BYTES=0), 2 ranks, 64-256 MiB"
for p in 1M 0; do
  say ""
  say "### GYRE_DEVICE_PIECE_BYTES=$p"
  say '```'
  GYRE_DEVICE_DIRECT=0 GYRE_DEVICE_PIECE_BYTES=$p timeout 90 build-gpu/bench/gyre-bench allreduce --ranks 2 --bind core --device cuda \
    -b 64M -e 256M -f 4 -n 10 -w 3 -T 60 > "$out/pieces-$p.log" 2>&1 || status=1
  grep -v '^# *$' "$out/pieces-$p.log" | tail -5 | tee -a "$summary"
  say '```'
done

say ""
say "finished in $(( $(date +%s) - start )) s, status $status"
exit $status
