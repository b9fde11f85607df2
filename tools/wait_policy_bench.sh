#!/usr/bin/env bash
# Ranks that outnumber cores: gyre's default against gyre with one setting
# changed (VS, by default the 2 us spin gyre had before it yielded at once)
# and Open MPI (ob1 over vader, yielding when idle), each launch in turn,
# ranks pinned round-robin to the CPUs; the medians of the rounds as a
# markdown table (docs/PERFORMANCE-collectives.md, "Waiting with more ranks
# than cores"). A benchmark, not a test.
#
#   tools/wait_policy_bench.sh            RANKS ("4 8"), COLLS ("allreduce alltoall"),
#                                         VS ("GYRE_SPIN_NS=2000": the other gyre's
#                                         environment, e.g. GYRE_ALGO=alltoall:bruck),
#                                         REPS (3), MAXSIZE (256K), ITERS (200), BUILD (build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${BUILD:-$root/build}" && pwd)
bench=$build/bench/gyre-bench mpi=$build/bench/compare/mpi-collective-perf
ranks=${RANKS:-4 8} colls=${COLLS:-allreduce alltoall} vs=${VS:-GYRE_SPIN_NS=2000} reps=${REPS:-3}
maxsize=${MAXSIZE:-256K} iters=${ITERS:-200} ncpus=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

gyre() {  # RANKS ENV|default COLL: "size us" rows of rank 0's out-of-place times
  # The port below the ephemeral range: one a previous launch's sockets
  # still hold made a rank fail to listen.
  local n=$1 pids=() r port=$((20000 + RANDOM % 10000)) env=()
  [ "$2" != default ] && read -r -a env <<<"$2"
  for ((r = 0; r < n; r++)); do
    taskset -c $((r % ncpus)) env "${env[@]}" GYRE_RANK=$r GYRE_WORLD_SIZE="$n" GYRE_COMM_ID=127.0.0.1:$port \
      timeout 300 "$bench" "$3" -b 8 -e "$maxsize" -f 8 -n "$iters" -w 20 -c 0 >"$work/rank.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { tail -n 3 "$work"/rank.* >&2; return 1; }; done
  awk '!/^#/ && NF > 6 { print $1, $6 }' "$work/rank.0"
}
ompi() {  # RANKS COLL
  mpirun --allow-run-as-root --oversubscribe -np "$1" --bind-to core:overload-allowed --mca mpi_yield_when_idle 1 \
    --mca pml ob1 --mca btl vader,self "$mpi" "$2" -b 8 -e "$maxsize" -f 8 -n "$iters" -w 20 2>/dev/null |
    awk '!/^#/ && NF > 5 { print $1, $6 }'
}
for ((k = 0; k < reps; k++)); do
  for n in $ranks; do
    for c in $colls; do
      gyre "$n" default "$c" | sed "s/^/$n $c default /" >>"$work/all"
      gyre "$n" "$vs" "$c" | sed "s/^/$n $c vs /" >>"$work/all"
      ompi "$n" "$c" | sed "s/^/$n $c ompi /" >>"$work/all"
    done
  done
done
/usr/bin/python3 - "$work/all" "$vs" <<'PYEOF'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    try: d[(int(f[0]), f[1], int(f[3]), f[2])].append(float(f[4]))
    except (ValueError, IndexError): pass
print(f"| ranks | collective | size (B) | gyre default (us) | gyre, {sys.argv[2]} (us) | Open MPI (us) | default / other | default / Open MPI |")
print("|---|---|---|---|---|---|---|---|")
for k in sorted({k[:3] for k in d}):
    if not all(d.get(k + (v,)) for v in ("default", "vs", "ompi")): continue
    a, b, o = (statistics.median(d[k + (v,)]) for v in ("default", "vs", "ompi"))
    print(f"| {k[0]} | {k[1]} | {k[2]} | {a:.2f} | {b:.2f} | {o:.2f} | {a / b:.2f} | {a / o:.2f} |")
PYEOF
