#!/usr/bin/env bash
# The verbs transport for real, on Soft-RoCE (rdma_rxe) inside a qemu guest:
# boots the host's Debian kernel with a busybox initramfs that carries the
# rxe modules, the rxe provider, iproute2's rdma tool and gyre's test
# programs with every shared library they load, makes rxe0 on a dummy
# netdev, and in one boot runs
#   - the transport conformance suite's verbs cases (among them a peer that
#     advertises a GID nobody can reach: an error naming it on both ranks),
#   - env_collectives (AllReduce, AllToAll, Broadcast, checked exactly) over
#     GYRE_TRANSPORT=verbs with 2 and with 3 ranks,
#   - the same with the single-copy (direct) algorithms, 3 ranks: registered
#     memory read with RDMA READ;
#   - several queue pairs per peer (GYRE_IB_QPS_PER_CONNECTION): conformance
#     cases with 3, the collectives with 4;
#   - 4 ranks on two host ids, shared memory within each and verbs between
#     (GYRE_NET_TRANSPORT=verbs);
#   - 2 ranks with GYRE_IB_HCA naming no device, and with GYRE_IB_GID_INDEX
#     naming no GID: both must fail, naming the setting;
#   - 3 ranks of which one exits between collectives: the others must fail
#     naming it, within their time bound;
# then powers off. The host side reads the guest's console log.
# TCG, not KVM: /dev/kvm here is a nested hypervisor that cannot run a
# stock kernel (see /work/shared/recipes/softroce-vm.sh). Emulated RDMA
# moves tens of Mbit/s: this checks correctness, never speed.
#   softroce_vm.sh WORKDIR CONFORMANCE_TEST ENV_COLLECTIVES
# Exits 77 (skipped) where qemu, a kernel with rdma_rxe or busybox is missing.
set -euo pipefail
work=$(realpath -m "$1") conformance=$(realpath "$2") collectives=$(realpath "$3")
skip() { echo "softroce_vm: skipped: $*"; exit 77; }
command -v qemu-system-x86_64 >/dev/null || skip "no qemu-system-x86_64 (apt-get install qemu-system-x86)"
command -v cpio >/dev/null || skip "no cpio"
command -v modinfo >/dev/null || skip "no modinfo (kmod)"
busybox=$(command -v busybox || true)
[[ -n $busybox ]] && "$busybox" --list 2>/dev/null | grep -x insmod >/dev/null || skip "no static busybox (busybox-static)"
K=${GYRE_VM_KERNEL:-$(ls /lib/modules 2>/dev/null | sort -V | grep -- '-amd64$' | tail -1 || true)}
[[ -n $K && -r /boot/vmlinuz-$K ]] || skip "no Debian kernel image (linux-image-amd64)"
modinfo -k "$K" rdma_rxe >/dev/null 2>&1 || skip "kernel $K has no rdma_rxe module"
provider=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so 2>/dev/null | head -1 || true)
[[ -n $provider && -r /etc/libibverbs.d/rxe.driver ]] || skip "no rxe provider (ibverbs-providers)"
command -v rdma >/dev/null || skip "no rdma tool (iproute2)"

mkdir -p "$work"
root=$work/initramfs
rm -rf "$root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,etc/libibverbs.d,mods,gyre}

cp "$busybox" "$root/bin/busybox"
for a in sh env mount ip insmod sleep cat ls poweroff echo grep seq timeout mkdir date; do
  ln -s busybox "$root/bin/$a"
done

# Kernel modules, dependency-ordered from modules.dep.
moddir=/lib/modules/$K
declare -A seen
order=()
add_mod() {  # $1: path relative to $moddir
  [[ -n ${seen[$1]:-} ]] && return
  seen[$1]=1
  local deps
  deps=$(grep "^$1:" "$moddir/modules.dep" | cut -d: -f2)
  for d in $deps; do add_mod "$d"; done
  order+=("$1")
}
for m in crc32_generic rdma_rxe dummy; do
  add_mod "$(modinfo -k "$K" -F filename "$m" | sed "s|^$moddir/||")"
done
: >"$root/mods/order"
for p in "${order[@]}"; do
  b=$(basename "$p")
  case $b in
    *.ko.xz) xz -dc "$moddir/$p" >"$root/mods/${b%.xz}"; b=${b%.xz} ;;
    *.ko.zst) zstd -qdc "$moddir/$p" >"$root/mods/${b%.zst}"; b=${b%.zst} ;;
    *) cp "$moddir/$p" "$root/mods/$b" ;;
  esac
  echo "$b" >>"$root/mods/order"
done

# Programs at their own paths (libgyre is found through their RUNPATH), and
# every library they load.
copy_with_libs() {
  local f=$1
  mkdir -p "$root$(dirname "$f")"
  cp -L "$f" "$root$f"
  for l in $(ldd "$f" | grep -o '/[^ ]*'); do
    [[ -e $root$l ]] && continue
    mkdir -p "$root$(dirname "$l")"
    cp -L "$l" "$root$l"
  done
}
for f in "$(command -v rdma)" "$provider" "$conformance" "$collectives"; do copy_with_libs "$f"; done
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
ln -s "$conformance" "$root/gyre/conformance"
ln -s "$collectives" "$root/gyre/collectives"
# Which conformance cases (GYRE_VM_GTEST_FILTER narrows them while debugging).
echo "${GYRE_VM_GTEST_FILTER:-*/verbs}" >"$root/gyre/filter"

cat >"$root/init" <<'EOF'
#!/bin/sh
export PATH=/bin:/usr/bin:/usr/sbin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/shm; mount -t tmpfs tmpfs /dev/shm
for m in $(cat /mods/order); do insmod /mods/$m || echo "insmod $m FAILED"; done
ip link set lo up
ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy
ip addr add 10.0.0.1/24 dev dummy0; ip link set dummy0 up
rdma link add rxe0 type rxe netdev dummy0 && rdma link show
failed=0
step() { echo "=== $1: $(date +%s)"; }

step conformance
timeout 200 /gyre/conformance --gtest_filter="$(cat /gyre/filter)" --gtest_brief=1 > /tmp/conf.log 2>&1
rc=$?; cat /tmp/conf.log
echo "GUEST conformance rc=$rc"; [ $rc = 0 ] || failed=1
# Every case but the garbage one (skipped for verbs) must have run, not
# skipped (rc 0 says none failed); counted so, a new case needs no edit here.
[ "$(cat /gyre/filter)" != '*/verbs' ] || grep -q '\[  SKIPPED \] 1 test\.' /tmp/conf.log ||
  { echo "GUEST conformance: a case other than the garbage one was skipped"; failed=1; }

port=29500
ranks() {  # ranks N NAME [ENV...]: N ranks of the collectives program over verbs
  # (ENV may set GYRE_TRANSPORT otherwise; TWO_HOSTS=1: two host ids by rank parity)
  n=$1; name=$2; shift 2; port=$((port + 1)); pids=
  for r in $(seq 0 $((n - 1))); do
    hostid=; [ "${TWO_HOSTS:-0}" = 1 ] && hostid=GYRE_HOSTID=h$((r % 2))
    env GYRE_TRANSPORT=verbs $hostid "$@" GYRE_RANK=$r GYRE_WORLD_SIZE=$n GYRE_COMM_ID=127.0.0.1:$port \
      GYRE_DEBUG=INFO GYRE_TIMEOUT_MS=60000 timeout 150 /gyre/collectives > /tmp/$name.$r 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait $p; done
}
for n in 2 3; do
  step "collectives-$n"
  ranks $n coll$n
  for r in $(seq 0 $((n - 1))); do
    if grep -q "rank $r of $n: collectives ok" /tmp/coll$n.$r && grep -q 'verbs ready on rxe0' /tmp/coll$n.$r; then
      echo "GUEST collectives $n ranks: rank $r ok"
    else
      echo "GUEST collectives $n ranks: rank $r FAILED"; cat /tmp/coll$n.$r; failed=1
    fi
  done
done

# The single-copy algorithms: every rank registers its buffers and the
# peers read their pieces with RDMA READ (Connection::get).
step collectives-direct
ranks 3 direct 'GYRE_ALGO=allreduce:direct;alltoall:direct;broadcast:direct'
for r in 0 1 2; do
  # Rank 0 logs the algorithm choices.
  if grep -q "rank $r of 3: collectives ok" /tmp/direct.$r &&
     { [ $r != 0 ] || grep -q 'allreduce of .*: direct' /tmp/direct.$r; }; then
    echo "GUEST direct collectives 3 ranks: rank $r ok"
  else
    echo "GUEST direct collectives 3 ranks: rank $r FAILED"; cat /tmp/direct.$r; failed=1
  fi
done

# Several queue pairs per peer: each large read is split across them, and
# the FINs still go in message order; the conformance cases that move many
# large messages, then the collectives.
step queue-pairs
GYRE_IB_QPS_PER_CONNECTION=3 timeout 200 /gyre/conformance \
  --gtest_filter='*MessagesOfEverySize*/verbs:*ManyMessages*/verbs:*ManyRequests*/verbs:*RegisteredMemory*/verbs' \
  --gtest_brief=1 > /tmp/confqps.log 2>&1
rc=$?; cat /tmp/confqps.log
if [ $rc = 0 ] && grep -q '\[  PASSED  \] 4 tests' /tmp/confqps.log; then
  echo "GUEST conformance, 3 queue pairs per peer: ok"
else
  echo "GUEST conformance, 3 queue pairs per peer: FAILED"; failed=1
fi
ranks 3 qps GYRE_IB_QPS_PER_CONNECTION=4
for r in 0 1 2; do
  if grep -q "rank $r of 3: collectives ok" /tmp/qps.$r && grep -q 'peers x 4 queue pairs' /tmp/qps.$r &&
     grep -Eq 'of [0-9]+ reads split across 4 queue pairs' /tmp/qps.$r && ! grep -q ' 0 of [0-9]* reads split' /tmp/qps.$r; then
    echo "GUEST collectives 3 ranks, 4 queue pairs per peer: rank $r ok"
  else
    echo "GUEST collectives 3 ranks, 4 queue pairs per peer: rank $r FAILED"; cat /tmp/qps.$r; failed=1
  fi
done

# Two "hosts" (host ids by rank parity): shared memory within each, verbs
# between them (GYRE_NET_TRANSPORT=verbs), as a cluster runs.
step net-transport-verbs
TWO_HOSTS=1 ranks 4 hybrid GYRE_TRANSPORT=auto GYRE_NET_TRANSPORT=verbs
for r in 0 1 2 3; do
  if grep -q "rank $r of 4: collectives ok" /tmp/hybrid.$r && grep -q 'shm to 1 peer, verbs to 2 peers' /tmp/hybrid.$r; then
    echo "GUEST shared memory within, verbs between hosts, 4 ranks: rank $r ok"
  else
    echo "GUEST shared memory within, verbs between hosts, 4 ranks: rank $r FAILED"; cat /tmp/hybrid.$r; failed=1
  fi
done

step bad-hca
ranks 2 badhca GYRE_IB_HCA==nosuchdev
for r in 0 1; do
  if grep -q 'FAIL gyreCommInitFromEnv' /tmp/badhca.$r && grep -q 'GYRE_IB_HCA==nosuchdev matches no active port' /tmp/badhca.$r; then
    echo "GUEST bad GYRE_IB_HCA: rank $r named it"; grep FAIL /tmp/badhca.$r
  else
    echo "GUEST bad GYRE_IB_HCA: rank $r did not name it"; cat /tmp/badhca.$r; failed=1
  fi
done
step bad-gid
ranks 2 badgid GYRE_IB_GID_INDEX=200
for r in 0 1; do
  if grep -q 'FAIL gyreCommInitFromEnv' /tmp/badgid.$r && grep -q 'GYRE_IB_GID_INDEX=200: rxe0:1 has no GID there' /tmp/badgid.$r; then
    echo "GUEST bad GYRE_IB_GID_INDEX: rank $r named it"
  else
    echo "GUEST bad GYRE_IB_GID_INDEX: rank $r did not name it"; cat /tmp/badgid.$r; failed=1
  fi
done

# A rank that exits between collectives: the others fail naming it, in
# bounded time (timeout's 124 would be a hang).
step peer-exits
ranks 3 dies ENV_COLLECTIVES_EXIT_RANK=1 GYRE_TIMEOUT_MS=30000
for r in 0 2; do
  if grep -q 'FAIL .*rank 1 .*exited' /tmp/dies.$r; then
    echo "GUEST a rank exits: rank $r named it"; grep FAIL /tmp/dies.$r
  else
    echo "GUEST a rank exits: rank $r did not name it"; cat /tmp/dies.$r; failed=1
  fi
done
step done
echo "SOFTROCE-GYRE-RESULT failed=$failed"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initramfs.cpio.gz"

start=$(date +%s)
timeout "${GYRE_VM_TIMEOUT:-280}" qemu-system-x86_64 -accel tcg -m 2048 -smp 2 -kernel "/boot/vmlinuz-$K" \
  -initrd "$work/initramfs.cpio.gz" -append 'console=ttyS0 panic=-1 loglevel=4' \
  -nographic -no-reboot -nic none </dev/null >"$work/guest.log" 2>&1 || true
cat "$work/guest.log"
echo "softroce_vm: boot to power-off took $(($(date +%s) - start)) s (TCG)"
grep -q 'SOFTROCE-GYRE-RESULT failed=0' "$work/guest.log"
