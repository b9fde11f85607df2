# shellcheck shell=bash
# Sourced by the network-namespace tests and benchmarks (multihost_netns.sh,
# tcp_nic_netns.sh, netns_collectives.sh, tools/netns_bench.sh): NHOSTS
# "hosts" as network namespaces (default 2), named PREFIX<i>-PID, in the
# array $hosts ($h0 and $h1 name the first two), a log folder $logs, and an
# exit trap that removes them all. Exits 77 (skipped) without root, iproute2
# or namespaces.
#   . netns_hosts.sh PREFIX [NHOSTS]
#
# netns_star SUBNET [RATE]: joins the hosts like machines on one switch: a
#   hub namespace holds a bridge, host i reaches it through a veth pair, its
#   own end $netns_if<i>-PID (here "gh<i>-PID") at SUBNET.<i+1>/24 (SUBNET is
#   three octets, e.g. 10.79.0). With RATE (tc's words: 1gbit, 10gbit), both
#   ends of every pair are shaped (netns_rate).
# netns_rate RATE: shapes each host's link in both directions with a token
#   bucket (tbf; this kernel has no netem): the host's end for what it sends,
#   the bridge's end for what it receives, as a switch port would. "none"
#   removes the shaping. NETNS_TBF_BURST and NETNS_TBF_LATENCY override the
#   bucket's size and queue (defaults: 1 ms of the rate, at least 64 KiB, so
#   a whole 64 KiB GSO packet fits; 10 ms of queue).
# netns_wait_ranks NAME waits for the ranks in $pids (logs in $logs/NAME.RANK),
#   printing the log of any that failed, and exits 1 if one did.
netns_prefix=$1
netns_count=${2:-2}
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "needs root and iproute2 for network namespaces; skipping"
  exit 77
fi
tag=$$
hosts=()
for ((netns_i = 0; netns_i < netns_count; netns_i++)); do
  hosts+=("$netns_prefix$netns_i-$tag")
done
h0=${hosts[0]}
h1=${hosts[1]:-}
netns_hub=""
logs=$(mktemp -d)
cleanup() {
  local h
  for h in "${hosts[@]}" $netns_hub; do
    ip netns del "$h" 2>/dev/null || true
  done
  rm -rf "$logs"
}
trap cleanup EXIT
if ! ip netns add "$h0" 2>/dev/null; then
  echo "cannot create network namespaces here; skipping"
  exit 77
fi
for netns_h in "${hosts[@]:1}"; do
  ip netns add "$netns_h"
done

netns_if=gh  # the hosts' interface names: at most 15 characters, "gh3-" + a pid
netns_star() {
  local subnet=$1 rate=${2:-none} i
  netns_hub=$netns_prefix"hub-$tag"
  ip netns add "$netns_hub"
  ip -n "$netns_hub" link add "gbr-$tag" type bridge
  ip -n "$netns_hub" link set "gbr-$tag" up
  for i in "${!hosts[@]}"; do
    ip link add "$netns_if$i-$tag" netns "${hosts[$i]}" type veth peer name "gb$i-$tag" netns "$netns_hub"
    ip -n "$netns_hub" link set "gb$i-$tag" master "gbr-$tag" up
    ip -n "${hosts[$i]}" link set lo up
    ip -n "${hosts[$i]}" addr add "$subnet.$((i + 1))/24" dev "$netns_if$i-$tag"
    ip -n "${hosts[$i]}" link set "$netns_if$i-$tag" up
  done
  netns_rate "$rate"
}

# netns_bytes RATE: tc's rate words in bytes per second (1gbit -> 125000000).
netns_bytes() {
  local n=${1%%[a-z]*} unit=${1##*[0-9]}
  case $unit in
    gbit) echo $((n * 125000000)) ;;
    mbit) echo $((n * 125000)) ;;
    *) echo "netns_bytes: rate '$1' is not Nmbit or Ngbit" >&2; return 1 ;;
  esac
}

netns_rate() {
  local rate=$1 i bytes burst latency
  if [ "$rate" != none ]; then
    bytes=$(netns_bytes "$rate")
    burst=${NETNS_TBF_BURST:-$((bytes / 1000 > 65536 ? bytes / 1000 : 65536))}
    latency=${NETNS_TBF_LATENCY:-10ms}
  fi
  for i in "${!hosts[@]}"; do
    local ns dev ns_dev
    for ns_dev in "${hosts[$i]} $netns_if$i-$tag" "$netns_hub gb$i-$tag"; do
      read -r ns dev <<<"$ns_dev"
      if [ "$rate" = none ]; then
        tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
      else
        tc -n "$ns" qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency "$latency"
      fi
    done
  done
}

netns_wait_ranks() {
  local name=$1 failed=0 i
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { echo "rank $i ($name) failed:"; cat "$logs/$name.$i"; failed=1; }
  done
  [ "$failed" = 0 ] || exit 1
}
