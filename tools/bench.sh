#!/usr/bin/env bash
# Sets everything up and runs gyre's main job on this machine: a 2-rank
# AllReduce bandwidth sweep (8 B to 256 MiB) over shared memory, ranks pinned
# to cores, in the nccl-tests layout. Extra arguments go to the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target gyrerun gyre-allreduce-perf
exec build/tools/gyrerun -n 2 --bind core -- build/bench/gyre-allreduce-perf -b 8 -e 256M -f 4 -n 20 -w 5 "$@"
