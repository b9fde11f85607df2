#!/usr/bin/env bash
# Ulysses against an all-gathered sequence (gyre-ulysses-ab) across "hosts"
# made of network namespaces on one bridge (tests/netns_hosts.sh), one rank
# per host, so every byte between ranks crosses a link shaped both ways with
# tbf; GYRE_TRANSPORT=tcp. Each rank counts what left its own link around
# each method's calls (--iface). A benchmark, not a test: the program checks
# one layer of each method exactly, and this script asserts nothing more.
#   tools/netns_ulysses_bench.sh [OUT]     (OUT.md: rank 0's tables; default /tmp/netns_ulysses)
# Environment: BUILD (build), HOSTS ("2 4"), RATES ("1gbit 100mbit"; "none":
# unshaped), SEQ (4K,16K: tokens of the whole sequence), HEADS (16), KV_HEADS
# (0: as many as HEADS), HEAD_DIM (128), DTYPE (bf16), ROUNDS (5), CALLS (1),
# NICE (0; e.g. -10 runs the ranks ahead of the machine's other work), ARGS
# (more flags for gyre-ulysses-ab, e.g. "--alltoall 1"). The ranks inherit
# the rest of the environment (GYRE_DEBUG=INFO names the algorithms).
# Needs root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${BUILD:-$root/build}" && pwd)
out=${1:-/tmp/netns_ulysses}
host_counts=${HOSTS:-2 4}
rates=${RATES:-1gbit 100mbit}
most=$(tr ' ' '\n' <<<"$host_counts" | sort -n | tail -1)
. "$root/tests/netns_hosts.sh" gyre-u "$most"
netns_star 10.79.0 none

# run NHOSTS: rank i in host i's namespace, rendezvous at host 0's address.
run() {
  local n=$1 r pids=() secret
  secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  for ((r = 0; r < n; r++)); do
    ip netns exec "${hosts[$r]}" env GYRE_RANK=$r GYRE_WORLD_SIZE=$n GYRE_COMM_ID=10.79.0.1:29415 \
      GYRE_SECRET="$secret" GYRE_TRANSPORT=tcp nice -n "${NICE:-0}" timeout 1800 \
      "$build/bench/gyre-ulysses-ab" --seq "${SEQ:-4K,16K}" --heads "${HEADS:-16}" \
      --kv-heads "${KV_HEADS:-0}" --head-dim "${HEAD_DIM:-128}" --dtype "${DTYPE:-bf16}" \
      --rounds "${ROUNDS:-5}" --calls "${CALLS:-1}" --iface "$netns_if$r-$tag" ${ARGS:-} >"$logs/run.$r" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do wait "${pids[$r]}" || { cat "$logs/run.$r" >&2; return 1; }; done
  cat "$logs/run.0"
}

: >"$out.md"
for rate in $rates; do
  netns_rate "$rate"
  for nhosts in $host_counts; do
    {
      echo "### $rate, $nhosts hosts x 1 rank"
      echo
      echo "$(date -u '+%F %T') UTC, $(git -C "$root" rev-parse --short HEAD), $(nproc) CPUs," \
        "SEQ=${SEQ:-4K,16K} HEADS=${HEADS:-16} KV_HEADS=${KV_HEADS:-0} HEAD_DIM=${HEAD_DIM:-128}" \
        "DTYPE=${DTYPE:-bf16} ROUNDS=${ROUNDS:-5} CALLS=${CALLS:-1} NICE=${NICE:-0} ARGS=${ARGS:-}; load average before $(cut -d' ' -f1-3 /proc/loadavg)"
      echo
    } | tee -a "$out.md"
    run "$nhosts" | tee -a "$out.md"
    printf "\nload average after %s\n\n" "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out.md"
  done
done
