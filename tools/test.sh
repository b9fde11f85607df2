#!/usr/bin/env bash
# Sets everything up and runs the tests: a warnings-as-errors build with its
# tests, then the same tests under AddressSanitizer + UndefinedBehaviorSanitizer.
# GYRE_SKIP_SANITIZERS=1 skips the second pass.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
jobs=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGYRE_WERROR=ON
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

if [ "${GYRE_SKIP_SANITIZERS:-0}" != 1 ]; then
  # -O1 -g1 (line tables: the sanitizers' reports still name file and line)
  # halves the build's time against -O2 -g (23 to 12 minutes on 2 cores);
  # the tests run about as fast (each suite within 0.9-1.35x).
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGYRE_WERROR=ON \
    -DGYRE_SANITIZE=address,undefined -DGYRE_BUILD_BENCH=OFF \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  cmake --build build-asan -j"$jobs"
  # TEST_LIGHT: the AllReduce matrices check two types and three ops at every
  # count, placement, algorithm and transport here. The sanitizers look for
  # memory and UB errors in that plumbing; the release pass above checks every
  # type and op's arithmetic end to end, and the kernels' own tests run every
  # type and op under the sanitizers too. (With the flags and the label here,
  # the whole run took 44 minutes on 2 cores, 2026-12-07.)
  # Label release-only: tests the sanitizers add nothing to, run in the pass
  # above (the layering checks compile headers and run nothing; learning real
  # text is a 400-step training run whose code the harness's other tests run
  # under the sanitizers here).
  TEST_LIGHT=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE release-only
fi
echo "all tests passed"
