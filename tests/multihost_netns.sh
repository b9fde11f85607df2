#!/usr/bin/env bash
# Two "hosts" as network namespaces joined by a veth pair, two ranks on each:
# ranks of one host must talk over shared memory, ranks of different hosts
# over TCP across the veth, and AllReduce must be right either way (both
# algorithms). Needs root (ip netns); exits 77 (skipped) without it.
#   multihost_netns.sh PROGRAM   (PROGRAM: tests/programs/env_allreduce)
set -euo pipefail
prog=$1
. "$(dirname "$0")/netns_hosts.sh" gyre-h
ip link add "gv0-$tag" netns "$h0" type veth peer name "gv1-$tag" netns "$h1"
ip -n "$h0" addr add 10.77.0.1/24 dev "gv0-$tag"
ip -n "$h1" addr add 10.77.0.2/24 dev "gv1-$tag"
for h in "$h0" "$h1"; do
  ip -n "$h" link set lo up
done
ip -n "$h0" link set "gv0-$tag" up
ip -n "$h1" link set "gv1-$tag" up

run() {  # run ALGO: four ranks, two per namespace; rank 0 hosts the root
  local algo=$1
  local secret
  secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  local pids=()
  for r in 0 1 2 3; do
    local ns=$h0
    [ "$r" -ge 2 ] && ns=$h1
    ip netns exec "$ns" env GYRE_RANK=$r GYRE_WORLD_SIZE=4 GYRE_COMM_ID=10.77.0.1:29411 \
      GYRE_SECRET="$secret" GYRE_ALGO="$algo" GYRE_DEBUG=INFO GYRE_TIMEOUT_MS=30000 GYRE_TUNER="${GYRE_TUNER:-builtin}" \
      timeout 60 "$prog" >"$logs/$algo.$r" 2>&1 &
    pids+=($!)
  done
  netns_wait_ranks "$algo"
  for r in 0 1 2 3; do
    grep -q "rank $r of 4: ok" "$logs/$algo.$r" || { echo "rank $r ($algo): no ok line"; cat "$logs/$algo.$r"; exit 1; }
    # Each rank shares memory with exactly one peer, its namespace mate.
    grep -q "shared memory with 1 local peers" "$logs/$algo.$r" ||
      { echo "rank $r ($algo) did not use shared memory with its host mate"; cat "$logs/$algo.$r"; exit 1; }
  done
  # The peer across the hosts: the ring's next rank (1 -> 2), or recursive
  # doubling's distance-2 partner (1 <-> 3). TCP over the veth addresses.
  # Hierarchical: only the hosts' leaders (ranks 0 and 2) cross.
  local remote=2 from=1
  [ "$algo" = recursive_doubling ] && remote=3
  [ "$algo" = hierarchical ] && from=0
  grep -q "tcp connection to rank $remote" "$logs/$algo.$from" ||
    { echo "rank $from ($algo) made no TCP connection to rank $remote across the hosts"; cat "$logs/$algo.$from"; exit 1; }
  if [ "$algo" = hierarchical ] && grep -q "tcp connection" "$logs/$algo.1"; then
    echo "rank 1 (hierarchical) crossed the hosts; only leaders should"; cat "$logs/$algo.1"; exit 1
  fi
  echo "$algo: 4 ranks on 2 hosts ok"
}
run ring
run recursive_doubling
run hierarchical
# The tuner's calibration measures both link classes: shared memory within
# a namespace, TCP across.
GYRE_TUNER=calibrate run ring
grep -q "tuner model (calibrated)" "$logs/ring.0" || { echo "no calibrated model logged"; cat "$logs/ring.0"; exit 1; }
grep "tuner model" "$logs/ring.0" | sed "s/.*INFO //"
