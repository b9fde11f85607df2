#!/usr/bin/env bash
# Every collective across hosts: 2 and 4 "hosts" as network namespaces on
# one bridge (netns_hosts.sh's netns_star), each host's link shaped to
# 1 Gbit/s both ways, two ranks per host. For each transport in $transports,
# gyre-bench runs every collective with its exact check (-c 1: any wrong
# element on any rank is exit 1), rooted ones rooted on the last host;
# AllReduce runs once more with the hierarchical algorithm forced, and once
# compressed (int8: the hierarchical codec plan, its error bounded). With the
# default transport, ranks of one host must meet over shared memory and
# ranks of different hosts over TCP; with UCX, no other transport may be
# made; either way the data must have crossed host 0's link. Then
# env_allreduce on 4 hosts with the hierarchical algorithm: only the hosts'
# leaders may cross. No timings are checked.
# Needs root (ip netns); exits 77 (skipped) without it.
#   netns_collectives.sh GYRE_BENCH ENV_ALLREDUCE HAVE_UCX(0|1) [NET_PLUGIN]
# NET_PLUGIN: gyre's socket plugin (libgyre-net-socket.so), run as a third
# transport: shared memory within a host and the plugin across.
# NETNS_HOSTS="2 4" and NETNS_RATE=1gbit (or none) narrow a run by hand.
set -euo pipefail
bench=$1 env_allreduce=$2 have_ucx=${3:-0} net_plugin=${4:-}
host_counts=${NETNS_HOSTS:-2 4}
rate=${NETNS_RATE:-1gbit}
most=$(tr ' ' '\n' <<<"$host_counts" | sort -n | tail -1)
. "$(dirname "$0")/netns_hosts.sh" gyre-c "$most"
netns_star 10.79.0 "$rate"

# The transports under test, one line each: a name, then the environment
# that selects it. A third transport is one more line, e.g.
#   transports+=("plugin GYRE_NET_PLUGIN=/path/to/libgyre-net-socket.so")
transports=("auto GYRE_TRANSPORT=auto")
# UCX over its tcp: to UCX the namespaces are one machine, and without its
# peer error handling (GYRE_UCX_ERROR_MODE's default here) its shared
# memory would join ranks of different "hosts".
if [ "$have_ucx" = 1 ]; then
  transports+=("ucx GYRE_TRANSPORT=ucx UCX_TLS=tcp,self")
  transports+=("shm_ucx GYRE_NET_TRANSPORT=ucx UCX_TLS=tcp,self")
fi
if [ -n "$net_plugin" ]; then transports+=("plugin GYRE_NET_PLUGIN=$net_plugin"); fi
collectives=(allreduce allgather reducescatter alltoall alltoallv broadcast reduce gather scatter sendrecv)

fail() {  # fail MESSAGE LOG
  echo "$1"
  cat "$2"
  exit 1
}

# launch NAME NHOSTS [VAR=VALUE...] -- PROGRAM ARGS...: two ranks per host on
# the first NHOSTS hosts, rank 0 (on host 0) holding the root; waits for all.
launch() {
  local name=$1 nhosts=$2
  shift 2
  local vars=()
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  local n=$((2 * nhosts)) secret r
  secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  local pids=()
  for ((r = 0; r < n; r++)); do
    ip netns exec "${hosts[$((r / 2))]}" env GYRE_RANK=$r GYRE_WORLD_SIZE=$n GYRE_COMM_ID=10.79.0.1:29413 \
      GYRE_SECRET="$secret" GYRE_DEBUG=INFO GYRE_TIMEOUT_MS=60000 "${vars[@]}" \
      timeout 120 "$@" >"$logs/$name.$r" 2>&1 &
    pids+=($!)
  done
  netns_wait_ranks "$name"
}

# check_wires NAME NHOSTS TRANSPORT: what carried the data. auto: shared
# memory with exactly the host mate, and TCP from each rank to some rank of
# another host; ucx: UCX started and neither of the others was made;
# plugin: the plugin loaded, shared memory with the host mate and the
# plugin to every other rank; shm_ucx: shared memory with the host mate and
# UCX to every other rank, no TCP.
check_wires() {
  local name=$1 nhosts=$2 transport=$3 r peer
  for ((r = 0; r < 2 * nhosts; r++)); do
    local log=$logs/$name.$r across=0
    case $transport in
      auto)
        grep -q "shared memory with 1 local peers" "$log" || fail "rank $r ($name): no shared memory with its host mate" "$log"
        for peer in $(sed -nE 's/.*tcp connection to rank ([0-9]+) .*/\1/p' "$log"); do
          [ $((peer / 2)) != $((r / 2)) ] && across=1
        done
        [ "$across" = 1 ] || fail "rank $r ($name): no TCP connection to another host" "$log" ;;
      plugin)
        grep -q "net: plugin gyre-socket" "$log" || fail "rank $r ($name): the plugin was not loaded" "$log"
        grep -q "shm to 1 peer, net to $((2 * nhosts - 2)) peers" "$log" ||
          fail "rank $r ($name): not shared memory to the host mate and the plugin across" "$log" ;;
      shm_ucx)
        grep -q "shm to 1 peer, ucx to $((2 * nhosts - 2)) peers" "$log" ||
          fail "rank $r ($name): not shared memory to the host mate and UCX across" "$log"
        if grep -q "tcp connection to" "$log"; then
          fail "rank $r ($name): GYRE_NET_TRANSPORT=ucx, yet a TCP connection was made" "$log"
        fi ;;
      ucx)
        grep -q "ucx worker ready" "$log" || fail "rank $r ($name): UCX did not start" "$log"
        if grep -Eq "tcp connection to|shared memory with" "$log"; then
          fail "rank $r ($name): GYRE_TRANSPORT=ucx, yet another transport was made" "$log"
        fi ;;
    esac
  done
}

link_bytes() {  # what host 0 has sent and received over its link
  local d=/sys/class/net/${netns_if}0-$tag/statistics
  ip netns exec "$h0" sh -c "echo \$((\$(cat $d/tx_bytes) + \$(cat $d/rx_bytes)))"
}

for nhosts in $host_counts; do
  last=$((2 * nhosts - 1))
  for t in "${transports[@]}"; do
    read -r tname tvars <<<"$t"  # tvars: VAR=VALUE words, split on purpose below
    for c in "${collectives[@]}"; do
      name=$c-$tname-$nhosts
      # 4 B to 4 MiB: one element per rank up to several chunks.
      moved=$(link_bytes)
      # shellcheck disable=SC2086
      launch "$name" "$nhosts" $tvars -- "$bench" "$c" -b 4 -e 4M -f 32 -n 2 -w 1 -c 1 -r "$last" -T 60
      check_wires "$name" "$nhosts" "$tname"
      # Host 0's ranks give or take at least 4 MiB / nranks each, in each of
      # the 4 MiB row's calls: whatever the transport, that crossed the link.
      moved=$(($(link_bytes) - moved))
      [ "$moved" -ge $((1 << 20)) ] || fail "$name: only $moved bytes over host 0's link" "$logs/$name.0"
      grep -q "Out of bounds values : 0 OK" "$logs/$name.0" || fail "$name: no clean check" "$logs/$name.0"
    done
    name=hier-$tname-$nhosts
    # shellcheck disable=SC2086
    launch "$name" "$nhosts" $tvars GYRE_ALGO=allreduce:hierarchical -- "$bench" allreduce -b 4 -e 4M -f 32 -n 2 -w 1 -c 1 -d all -T 60
    grep -q "hierarchical" "$logs/$name.0" || fail "$name: the plan was not hierarchical" "$logs/$name.0"
    # Compressed AllReduce across the hosts: the hierarchical codec plan
    # (full precision within a host, int8 between), its error measured.
    name=codec-$tname-$nhosts
    # shellcheck disable=SC2086
    launch "$name" "$nhosts" $tvars -- "$bench" allreduce -b 4K -e 4M -f 32 -n 2 -w 1 -c 1 --codec int8 -T 60
    grep -q "compressed_hierarchical" "$logs/$name.0" || fail "$name: the plan was not the hierarchical codec plan" "$logs/$name.0"
    err=$(sed -nE 's/^# Max relative error *: *//p' "$logs/$name.0")
    awk -v e="$err" 'BEGIN { exit !(e != "" && e + 0 < 0.05) }' || fail "$name: relative error '$err'" "$logs/$name.0"
    echo "$nhosts hosts x 2 ranks, $tname: ${collectives[*]}, hierarchical allreduce exact, int8 allreduce within $err (${SECONDS}s so far)"
  done
done

# Hierarchical AllReduce on its own: only each host's leader (even ranks) crosses.
name=hier-leaders-$most
launch "$name" "$most" GYRE_ALGO=hierarchical -- "$env_allreduce"
for ((r = 0; r < 2 * most; r++)); do
  grep -q "rank $r of $((2 * most)): ok" "$logs/$name.$r" || fail "rank $r ($name): no ok line" "$logs/$name.$r"
  if [ $((r % 2)) = 1 ] && grep -q "tcp connection" "$logs/$name.$r"; then
    fail "rank $r ($name) crossed the hosts; only leaders should" "$logs/$name.$r"
  fi
done
grep -q "tcp connection" "$logs/$name.0" || fail "rank 0 ($name), a leader, made no TCP connection" "$logs/$name.0"
echo "hierarchical allreduce on $most hosts: only the leaders crossed"
