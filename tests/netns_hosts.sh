# Sourced by the network-namespace tests (multihost_netns.sh,
# tcp_nic_netns.sh): two "hosts" as network namespaces, $h0 and $h1 (named
# PREFIX0-PID and PREFIX1-PID), a log folder $logs, and an exit trap that
# removes all three. Exits 77 (skipped) without root, iproute2 or namespaces.
# netns_wait_ranks NAME waits for the four ranks in $pids (logs in
# $logs/NAME.RANK), printing the log of any that failed, and exits 1 if one did.
#   . netns_hosts.sh PREFIX
netns_prefix=$1
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "needs root and iproute2 for network namespaces; skipping"
  exit 77
fi
tag=$$
h0=$netns_prefix"0-$tag"
h1=$netns_prefix"1-$tag"
logs=$(mktemp -d)
cleanup() {
  ip netns del "$h0" 2>/dev/null || true
  ip netns del "$h1" 2>/dev/null || true
  rm -rf "$logs"
}
trap cleanup EXIT
if ! ip netns add "$h0" 2>/dev/null; then
  echo "cannot create network namespaces here; skipping"
  exit 77
fi
ip netns add "$h1"

netns_wait_ranks() {
  local name=$1 failed=0 i
  for i in 0 1 2 3; do
    wait "${pids[$i]}" || { echo "rank $i ($name) failed:"; cat "$logs/$name.$i"; failed=1; }
  done
  [ "$failed" = 0 ] || exit 1
}
