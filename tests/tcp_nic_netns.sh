#!/usr/bin/env bash
# TCP data connections take the NIC the topology search assigned (as NCCL
# picks a net device per GPU), not the bootstrap's interface. Two "hosts" as
# network namespaces, each with two interfaces joined by veth pairs on two
# subnets: gna* (10.88.1.0/24, created first, so the bootstrap takes it) and
# gnb* (10.88.2.0/24, the faster NIC in each host's topology file, so the
# search assigns it). Four ranks, two per namespace, GYRE_TRANSPORT=tcp:
#   - without GYRE_SOCKET_IFNAME, every connection between the hosts must run
#     between gnb addresses (the connection lines log getsockname ->
#     getpeername), ranks of one host meet on loopback, and AllReduce is right;
#   - with GYRE_SOCKET_IFNAME=gna, the user's choice wins: everything on gna.
# Needs root (ip netns); exits 77 (skipped) without it.
#   tcp_nic_netns.sh PROGRAM   (PROGRAM: tests/programs/env_allreduce)
set -euo pipefail
prog=$1
. "$(dirname "$0")/netns_hosts.sh" gyre-nic
# Interface names: at most 15 characters ("gnb1-" + a pid of up to 7 digits).
ip link add "gna0-$tag" netns "$h0" type veth peer name "gna1-$tag" netns "$h1"
ip link add "gnb0-$tag" netns "$h0" type veth peer name "gnb1-$tag" netns "$h1"
for h in 0 1; do
  ns=$h0
  [ "$h" = 1 ] && ns=$h1
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "10.88.1.$((h + 1))/24" dev "gna$h-$tag"
  ip -n "$ns" addr add "10.88.2.$((h + 1))/24" dev "gnb$h-$tag"
  ip -n "$ns" link set "gna$h-$tag" up
  ip -n "$ns" link set "gnb$h-$tag" up
  # A CPU-only host with both interfaces as NICs; gnb sits on the wider PCIe
  # link (x16 against x1), so it is the nearer by bandwidth.
  cat >"$logs/topo$h.xml" <<EOF
<?xml version="1.0"?>
<system version="1" host="nic-host$h">
  <cpu numaid="0" socket="0" cores="8" affinity="ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:00:03.0" class="0x020000" link_speed="8 GT/s PCIe" link_width="1">
      <nic>
        <net name="gna$h-$tag" dev="0" speed="1000" port="1" gdr="0" rdma="0" netdev="gna$h-$tag"/>
      </nic>
    </pci>
    <pci busid="0000:00:04.0" class="0x020000" link_speed="8 GT/s PCIe" link_width="16">
      <nic>
        <net name="gnb$h-$tag" dev="1" speed="100000" port="1" gdr="0" rdma="0" netdev="gnb$h-$tag"/>
      </nic>
    </pci>
  </cpu>
</system>
EOF
done

fail() {  # fail MESSAGE LOG
  echo "$1"
  cat "$2"
  exit 1
}

# run NAME ALGO [VAR=VALUE...]: four ranks, two per namespace; rank 0 hosts the root.
run() {
  local name=$1 algo=$2
  shift 2
  local secret
  secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  local pids=()
  for r in 0 1 2 3; do
    local h=$((r / 2)) ns=$h0
    [ "$h" = 1 ] && ns=$h1
    ip netns exec "$ns" env GYRE_RANK=$r GYRE_WORLD_SIZE=4 GYRE_COMM_ID=10.88.1.1:29412 \
      GYRE_SECRET="$secret" GYRE_ALGO="$algo" GYRE_TRANSPORT=tcp GYRE_DEBUG=INFO \
      GYRE_TIMEOUT_MS=30000 GYRE_TUNER=builtin GYRE_TOPO_FILE="$logs/topo$h.xml" "$@" \
      timeout 60 "$prog" >"$logs/$name.$r" 2>&1 &
    pids+=($!)
  done
  netns_wait_ranks "$name"
  for r in 0 1 2 3; do
    grep -q "rank $r of 4: ok" "$logs/$name.$r" || fail "rank $r ($name): no ok line" "$logs/$name.$r"
    if grep -q "refused" "$logs/$name.$r"; then
      fail "rank $r ($name) refused a connection" "$logs/$name.$r"
    fi
  done
}

# check NAME SUBNET DATAIF: every rank's data connections to the other host
# run between addresses on SUBNET (10.88.S.x, both ends), those within a host
# on loopback, and each rank says its data goes over DATAIF (gna or gnb).
check() {
  local name=$1 subnet=$2 dataif=$3
  for r in 0 1 2 3; do
    local h=$((r / 2)) log=$logs/$name.$r
    local me=10.88.$subnet.$((r / 2 + 1)) other=10.88.$subnet.$((2 - r / 2))
    grep -q "rank $r: bootstrap on 10.88.1.$((h + 1)):[0-9]* via gna$h-$tag" "$log" ||
      fail "rank $r ($name): the bootstrap is not on gna$h-$tag" "$log"
    grep -q "rank $r: tcp data on $dataif$h-$tag 10.88.$subnet.$((h + 1))" "$log" ||
      fail "rank $r ($name): no 'tcp data on $dataif$h-$tag' line" "$log"
    local across=0
    while read -r line; do
      local peer
      peer=$(sed -E 's/.*tcp connection to rank ([0-9]+).*/\1/' <<<"$line")
      if [ $((peer / 2)) = "$h" ]; then
        grep -Eq "127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:[0-9]+$" <<<"$line" ||
          fail "rank $r ($name): connection within the host not on loopback: $line" "$log"
      else
        grep -Eq "${me//./\\.}:[0-9]+ -> ${other//./\\.}:[0-9]+$" <<<"$line" ||
          fail "rank $r ($name): connection across the hosts not $me -> $other: $line" "$log"
        across=$((across + 1))
      fi
    done < <(grep "tcp connection to rank" "$log")
    [ "$across" -ge 1 ] || fail "rank $r ($name) made no TCP connection across the hosts" "$log"
  done
  echo "$name: 4 ranks on 2 hosts, data across them on 10.88.$subnet.0/24 ($dataif), ok"
}

run nic-ring ring
for r in 0 1 2 3; do
  grep -q "rank $r: topology from .*NIC gnb$((r / 2))-$tag" "$logs/nic-ring.$r" ||
    fail "rank $r: the topology search did not assign gnb$((r / 2))-$tag" "$logs/nic-ring.$r"
done
check nic-ring 2 gnb
run nic-rd recursive_doubling
check nic-rd 2 gnb
# The user's choice wins for everything.
run ifname-ring ring GYRE_SOCKET_IFNAME=gna
grep -q "GYRE_SOCKET_IFNAME is set" "$logs/ifname-ring.0" ||
  fail "rank 0 (ifname-ring) does not say GYRE_SOCKET_IFNAME kept data on the bootstrap" "$logs/ifname-ring.0"
check ifname-ring 1 gna
grep "tcp data on\|tcp connection to" "$logs/nic-ring.1" "$logs/ifname-ring.1" | sed "s/.*INFO //"
