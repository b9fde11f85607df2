#!/usr/bin/env bash
# Large AllReduce across "hosts" made of network namespaces on one bridge
# (tests/netns_hosts.sh), PER_HOST ranks per host, each host's link shaped both
# ways with tbf: gyre over TCP (shared memory within a host) and over UCX,
# Open MPI (ob1: tcp between hosts, vader within) and Gloo (tcp everywhere)
# over the same links. A benchmark, not a test: it asserts nothing.
#
# For each rate and host count, REPS rounds; each round runs every variant
# once, in turn, so drift hits them alike. Per run it records busbw (in-place
# and out-of-place) and what host 0 sent over its link. Prints a Markdown
# table of medians (busbw as a share of the link rate) and keeps the raw
# rows in OUT.tsv.
#   tools/netns_bench.sh [OUT]     (OUT: prefix for OUT.tsv and OUT.md; default /tmp/netns_bench)
# Environment: BUILD (build), HOSTS ("2 4"), RATES ("1gbit 10gbit"; "none":
# unshaped, what the CPUs allow), PER_HOST (2; 1 or 2), REPS (3), SIZE (64M), ITERS (10), WARMUP (1),
# VARIANTS (names from the list below), EXTRA_VARIANTS (more, see below),
# NICE (0; e.g. -10 runs every variant's ranks ahead of the machine's other
# work, where other jobs share the CPUs).
# Needs root; Open MPI's mpirun, Gloo's driver and UCX where built.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${BUILD:-$root/build}" && pwd)
out=${1:-/tmp/netns_bench}
host_counts=${HOSTS:-2 4}
rates=${RATES:-1gbit 10gbit}
reps=${REPS:-3}
size=${SIZE:-64M}
iters=${ITERS:-10}
warmup=${WARMUP:-1}
nice=(nice -n "${NICE:-0}")
per_host=${PER_HOST:-2}
most=$(tr ' ' '\n' <<<"$host_counts" | sort -n | tail -1)
. "$root/tests/netns_hosts.sh" gyre-b "$most"
netns_star 10.79.0 none

# The variants: name, then how it runs (gyre | ompi | gloo), then its settings
# (gyre's: NAME=VALUE words are its environment, bench:COLLECTIVE the
# collective gyre-bench runs in place of allreduce, the rest its arguments).
# gyre's ring is forced: the ring is the bound the bar is set against (its
# links each carry 2(n-1)/n of the data, so busbw can reach the link rate).
# Open MPI yields when idle, as it does by itself when it sees more ranks
# than cores; here each "host" has 2 slots, so it cannot see that 8 ranks
# share 2 CPUs, and its busy polling halved its busbw on 4 hosts.
all_variants=(
  "gyre-tcp gyre GYRE_TRANSPORT=auto GYRE_ALGO=allreduce:ring"
  "gyre-ucx gyre GYRE_TRANSPORT=ucx UCX_TLS=tcp,self GYRE_ALGO=allreduce:ring"
  "gyre-shm-ucx gyre GYRE_TRANSPORT=auto GYRE_NET_TRANSPORT=ucx UCX_TLS=tcp,self GYRE_ALGO=allreduce:ring"
  "ompi-ring ompi --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4 --mca mpi_yield_when_idle 1"
  "gloo-ring gloo --algo ring_chunked"
  "gyre-fp16 gyre GYRE_TRANSPORT=auto --codec fp16"
  "gyre-bf16 gyre GYRE_TRANSPORT=auto --codec bf16"
  "gyre-int8 gyre GYRE_TRANSPORT=auto --codec int8"
  "gyre-onebit gyre GYRE_TRANSPORT=auto --codec onebit"
  "gyre-peers-shift gyre GYRE_TRANSPORT=auto bench:peeraverage --peers shift_one"
  "gyre-peers-ring gyre GYRE_TRANSPORT=auto bench:peeraverage --peers ring"
)
# More, for experiments: EXTRA_VARIANTS="gyre-2socks gyre GYRE_NSOCKS_PERPEER=2 GYRE_ALGO=allreduce:ring; ..."
IFS=';' read -ra extra <<<"${EXTRA_VARIANTS:-}"
for v in "${extra[@]}"; do
  v=$(echo $v)  # trims
  [ -n "$v" ] && all_variants+=("$v")
done
variants=()
for v in "${all_variants[@]}"; do
  [ -z "${VARIANTS:-}" ] || grep -qw "${v%% *}" <<<"$VARIANTS" && variants+=("$v")
done

# ORTE's launch agent (it would be ssh): "agent HOST COMMAND" runs COMMAND in
# the namespace whose link has address HOST. Each namespace gets a hostname of
# its own (unshare --uts), so that Open MPI does not take ranks of different
# namespaces for neighbours on one host (it would join them by shared memory).
agent=$logs/netns-rsh
{
  echo '#!/bin/sh'
  echo 'case $1 in'
  for i in "${!hosts[@]}"; do echo "  10.79.0.$((i + 1))) ns=${hosts[$i]} ;;"; done
  echo '  *) echo "netns-rsh: no namespace has address $1" >&2; exit 1 ;;'
  echo 'esac'
  echo 'shift'
  echo 'exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns; $*"'
} >"$agent"
chmod +x "$agent"

tx_bytes() {  # what host 0 has sent over its link
  ip netns exec "$h0" cat "/sys/class/net/${netns_if}0-$tag/statistics/tx_bytes"
}

# run_gyre NHOSTS SETTINGS...: one rank per process, PER_HOST per host.
run_gyre() {
  local nhosts=$1 n=$((per_host * $1)) r pids=() envs=() args=() w coll=allreduce
  shift
  for w in "$@"; do
    if [[ $w == bench:* ]]; then coll=${w#bench:}
    elif [[ $w == *=* && $w != -* ]]; then envs+=("$w")
    else args+=("$w"); fi
  done
  local secret
  secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  for ((r = 0; r < n; r++)); do
    ip netns exec "${hosts[$((r / per_host))]}" env GYRE_RANK=$r GYRE_WORLD_SIZE=$n GYRE_COMM_ID=10.79.0.1:29414 \
      GYRE_SECRET="$secret" "${envs[@]}" "${nice[@]}" timeout 600 "$build/bench/gyre-bench" "$coll" \
      -b "$size" -e "$size" -n "$iters" -w "$warmup" -c 0 "${args[@]}" >"$logs/run.$r" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do wait "${pids[$r]}" || { cat "$logs/run.$r" >&2; return 1; }; done
  cat "$logs/run.0"
}

run_ompi() {
  local nhosts=$1 i
  shift
  : >"$logs/hostfile"
  for ((i = 0; i < nhosts; i++)); do echo "10.79.0.$((i + 1)) slots=$per_host" >>"$logs/hostfile"; done
  ip netns exec "$h0" unshare --uts sh -c "hostname $h0; exec ${nice[*]} timeout 600 mpirun --allow-run-as-root \
    -n $((per_host * nhosts)) --hostfile $logs/hostfile --mca plm_rsh_agent $agent --mca pml ob1 \
    --mca btl tcp,vader,self --mca btl_tcp_if_include 10.79.0.0/24 --mca oob_tcp_if_include 10.79.0.0/24 $* \
    $build/bench/compare/mpi-allreduce-perf -b $size -e $size -n $iters -w $warmup -c 0"
}

run_gloo() {
  local nhosts=$1 n=$((per_host * $1)) r pids=() store
  shift
  store=$(mktemp -d -p "$logs")
  for ((r = 0; r < n; r++)); do
    ip netns exec "${hosts[$((r / per_host))]}" env GLOO_SOCKET_IFNAME="$netns_if$((r / per_host))-$tag" \
      "${nice[@]}" timeout 600 "$build/bench/compare/gloo-allreduce-perf" "$@" --rank $r --size $n --store-dir "$store" \
      -b "$size" -e "$size" -n "$iters" -w "$warmup" -c 0 >"$logs/run.$r" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do wait "${pids[$r]}" || { cat "$logs/run.$r" >&2; return 1; }; done
  cat "$logs/run.0"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
printf "rate\thosts\tranks\tvariant\trep\tbusbw_oop\tbusbw_ip\tlink_bytes_per_call\ttime_oop_us\n" >"$out.tsv"
for rate in $rates; do
  netns_rate "$rate"
  for nhosts in $host_counts; do
    for ((rep = 1; rep <= reps; rep++)); do
      for v in "${variants[@]}"; do
        read -r name kind settings <<<"$v"
        before=$(tx_bytes)
        # shellcheck disable=SC2086 # settings are words
        if ! text=$("run_$kind" "$nhosts" $settings); then
          echo "$rate $nhosts hosts $name: failed" >&2
          continue
        fi
        sent=$(($(tx_bytes) - before))
        # busbw from the time columns (us), as nccl-tests defines it for
        # AllReduce (so a peer averaging step compares with an AllReduce
        # of the same buffer), at more digits than the tables print; and the
        # out-of-place time itself.
        row=$(awk -v s="$(numfmt --from=iec "$size")" -v n=$((per_host * nhosts)) '!/^#/ && $1 == s {
          f = 2 * (n - 1) / n; printf "%.4f %.4f %.1f\n", s / $6 / 1e3 * f, s / $10 / 1e3 * f, $6 }' <<<"$text" | tail -1)
        calls=$((2 * (iters + warmup)))
        per=$(awk -v b="$sent" -v s="$(numfmt --from=iec "$size")" -v c=$calls 'BEGIN {printf "%.2f", b / s / c}')
        read -r bw_oop bw_ip t_oop <<<"$row"
        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$rate" "$nhosts" $((per_host * nhosts)) "$name" "$rep" \
          "$bw_oop" "$bw_ip" "$per" "$t_oop" | tee -a "$out.tsv"
      done
    done
  done
done

# The table: medians over the rounds, busbw as a share of the link rate.
{
  echo "$(date -u +%F) $(git -C "$root" rev-parse --short HEAD), $(nproc) CPUs, SIZE=$size ITERS=$iters WARMUP=$warmup REPS=$reps NICE=${NICE:-0} PER_HOST=$per_host;" \
    "load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
} >"$out.md"
/usr/bin/python3 - "$out.tsv" "$size" >>"$out.md" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
rate_bytes = {"1gbit": 125e6, "10gbit": 1250e6}
keys = []
for r in rows:
    k = (r["rate"], int(r["hosts"]), r["variant"])
    if k not in keys: keys.append(k)
print("| link | hosts x ranks | variant | busbw out-of-place (GB/s) | % of link | busbw in-place (GB/s) | % of link | link bytes per call / size | time per call (ms) | runs |")
print("|---|---|---|---|---|---|---|---|---|---|")
for rate, hosts, variant in keys:
    sel = [r for r in rows if (r["rate"], int(r["hosts"]), r["variant"]) == (rate, hosts, variant)]
    ip = statistics.median(float(r["busbw_ip"]) for r in sel)
    oop = statistics.median(float(r["busbw_oop"]) for r in sel)
    per = statistics.median(float(r["link_bytes_per_call"]) for r in sel)
    ms = statistics.median(float(r.get("time_oop_us") or "nan") for r in sel) / 1e3
    pct = lambda bw: f"{100 * bw * 1e9 / rate_bytes[rate]:.0f}%" if rate in rate_bytes else "-"
    print(f"| {rate} | {hosts} x {int(sel[0]['ranks']) // hosts} | {variant} | {oop:.3f} | {pct(oop)} | {ip:.3f} | {pct(ip)} | {per:.2f} | {ms:.1f} | {len(sel)} |")
EOF
cat "$out.md"
