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
# machine with Debian's googletest and nlohmann-json3-dev packages; they land
# in .gpu-deps/, which git ignores) are built instead, and nlohmann's JSON
# header (the topology files) comes from there too: carry .gpu-deps to the
# GPU machine, whose image has neither.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --prepare ]; then
  mkdir -p .gpu-deps
  grep -qx '/.gpu-deps/' .git/info/exclude 2>/dev/null || echo /.gpu-deps/ >> .git/info/exclude
  rm -rf .gpu-deps/googletest
  cp -r /usr/src/googletest .gpu-deps/googletest
  rm -rf .gpu-deps/include && mkdir -p .gpu-deps/include
  cp -r /usr/include/nlohmann .gpu-deps/include/nlohmann
  echo "prepared .gpu-deps/googletest and .gpu-deps/include/nlohmann; carry .gpu-deps"
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

cmake_extra=()
if [ -d .gpu-deps/googletest ]; then cmake_extra=(-DGYRE_GTEST_SOURCE="$PWD/.gpu-deps/googletest"); fi
if [ ! -e /usr/include/nlohmann/json.hpp ] && [ -d .gpu-deps/include/nlohmann ]; then
  cmake_extra+=(-DCMAKE_CXX_FLAGS="-isystem $PWD/.gpu-deps/include")
fi
# One architecture: this GPU's (sm_90 on Hopper), found by nvidia-smi.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
arch=${arch:-90}
if ! timeout 240 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGYRE_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES="$arch" "${cmake_extra[@]}" > "$out/configure.log" 2>&1; then
  say "configure FAILED (tail of $out/configure.log):"; tail -20 "$out/configure.log" | tee -a "$summary"; exit 1
fi
targets=(gyre-gpu-kernel-bench gyre-bench)
grep -q "tests (GoogleTest): yes" "$out/configure.log" && targets+=(cuda_kernels_test device_ipc_test)
if ! timeout 300 cmake --build build-gpu -j"$jobs" --target "${targets[@]}" > "$out/build.log" 2>&1; then
  say "build FAILED (tail of $out/build.log):"; tail -30 "$out/build.log" | tee -a "$summary"; exit 1
fi
say ""
say "built ${targets[*]} for sm_$arch in $(( $(date +%s) - start )) s"

if [[ " ${targets[*]} " == *" cuda_kernels_test "* ]]; then
  say ""
  say "## tests labelled gpu"
  if timeout 240 ctest --test-dir build-gpu -L gpu --output-on-failure --timeout 150 -j4 > "$out/ctest.log" 2>&1; then
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

# Device messages (docs/gpu.md, "Device messages"): the plans that move
# pieces through connections, forced, on device buffers (Send/Recv above
# ran so too).
for spec in allreduce:ring allreduce:double_binary_tree allgather:ring reducescatter:ring broadcast:chain \
            reduce:binomial_tree alltoall:pairwise; do
  c=${spec%%:*}
  log="$out/messages-$c-${spec#*:}.log"
  if GYRE_ALGO=$spec timeout 90 build-gpu/bench/gyre-bench $c --ranks 3 --device cuda -b 8 -e 4M -f 32 -n 2 -w 1 \
       -T 60 > "$log" 2>&1; then
    say "$spec on device messages: ok, $(grep -c '^ ' "$log") rows checked"
  else
    status=1
    say "$spec on device messages: FAILED (tail of $log):"; tail -5 "$log" | tee -a "$summary"
  fi
done

say ""
say "## Send/Recv between two ranks on this GPU: device messages against staged (GYRE_DEVICE_DIRECT=0)"
for direct in 1 0; do
  say "### GYRE_DEVICE_DIRECT=$direct"
  say '```'
  GYRE_DEVICE_DIRECT=$direct timeout 90 build-gpu/bench/gyre-bench sendrecv --ranks 2 --device cuda \
    -b 64K -e 256M -f 16 -n 10 -w 3 -T 60 > "$out/sendrecv-$direct.log" 2>&1 || status=1
  grep -v '^# *$' "$out/sendrecv-$direct.log" | tail -8 | tee -a "$summary"
  say '```'
done

say ""
# Unpinned, as most jobs run; the pinned case follows below.
say "## AllReduce on device buffers (direct, and staged) against host buffers (gyre-bench, ranks sharing this GPU, unpinned)"
for n in 2 4; do
  for w in cuda staged host; do
    d=$w; direct=1
    if [ "$w" = staged ]; then d=cuda; direct=0; fi
    say ""
    say "### $n ranks, --device $d, GYRE_DEVICE_DIRECT=$direct"
    say '```'
    GYRE_DEVICE_DIRECT=$direct timeout 120 build-gpu/bench/gyre-bench allreduce --ranks $n --device $d \
      -b 8 -e 256M -f 8 -n 10 -w 3 -T 100 --percentiles > "$out/allreduce-$w-$n.log" 2>&1 || status=1
    grep -v '^# *$' "$out/allreduce-$w-$n.log" | tail -14 | tee -a "$summary"
    say '```'
  done
done

# Ranks sharing one GPU run as separate processes, which the GPU
# time-slices unless CUDA MPS runs them side by side (docs/gpu.md, "Ranks
# sharing a GPU"): direct AllReduce under MPS over the whole range, and
# pinned (--bind core: the caller yields to the proxy sharing its core).
say ""
say "## direct AllReduce on ranks sharing this GPU: under CUDA MPS, and pinned (--bind core)"
for n in 2 4; do
  for mode in mps bind; do
    if [ "$mode" = mps ]; then
      command -v nvidia-cuda-mps-control > /dev/null || { say "no nvidia-cuda-mps-control: MPS not tried"; continue; }
      export CUDA_MPS_PIPE_DIRECTORY=/tmp/gyre-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/gyre-mps-log
      mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
      nvidia-cuda-mps-control -d > /dev/null 2>&1 || { say "MPS did not start"; continue; }
      bind=none; top=256M; what="under MPS"
    else
      bind=core; top=8M; what="--bind core"
    fi
    say ""
    say "### $n ranks, direct, $what"
    say '```'
    timeout 90 build-gpu/bench/gyre-bench allreduce --ranks $n --bind $bind --device cuda \
      -b 8 -e $top -f 8 -n 10 -w 3 -T 60 --percentiles > "$out/direct-$mode-$n.log" 2>&1 || status=1
    grep -v '^# *$' "$out/direct-$mode-$n.log" | tail -12 | tee -a "$summary"
    say '```'
    if [ "$mode" = mps ]; then
      echo quit | nvidia-cuda-mps-control > /dev/null 2>&1
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
  done
done

say "## pipelined staging: pieces (default) against whole copies (GYRE_DEVICE_PIECE_BYTES=0), 2 ranks, 64-256 MiB"
for p in 1M 0; do
  say ""
  say "### GYRE_DEVICE_PIECE_BYTES=$p"
  say '```'
  GYRE_DEVICE_DIRECT=0 GYRE_DEVICE_PIECE_BYTES=$p timeout 90 build-gpu/bench/gyre-bench allreduce --ranks 2 --device cuda \
    -b 64M -e 256M -f 4 -n 10 -w 3 -T 60 > "$out/pieces-$p.log" 2>&1 || status=1
  grep -v '^# *$' "$out/pieces-$p.log" | tail -5 | tee -a "$summary"
  say '```'
done

say ""
say "finished in $(( $(date +%s) - start )) s, status $status"
exit $status
