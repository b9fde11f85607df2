#!/usr/bin/env python3
"""The sequence exchanges against a plain AllToAll of the same bytes
(docs/PERFORMANCE-sequence.md): gyre-bench alltoall, seqtoheads and
headstoseq launched in turn, A B C A B C ..., RUNS times, each launch a
sweep of the same sizes; per size the median over the launches of each
one's out-of-place time, and the exchanges' ratio to AllToAll's (> 1:
slower). With heads that divide among the ranks a row of N bytes moves
exactly what alltoall's row of N bytes does.

  tools/seq_vs_alltoall.py build/bench/gyre-bench --ranks 2 --transport shm [--runs 5]
      [--sizes 64K,256K,1M,4M,16M,64M] [--heads 32 --head-dim 128 --parts q] [-d float]
"""
import argparse
import statistics
import subprocess
import sys

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(s):
    return int(s[:-1]) * UNITS[s[-1]] if s[-1] in UNITS else int(s)


def iters_for(size):
    """Timed and warmup iterations: enough calls per launch without a launch taking minutes."""
    if size <= 256 << 10:
        return 200, 20
    if size <= 4 << 20:
        return 40, 5
    return 8, 2


def launch(bench, op, size, a, extra):
    n, w = iters_for(size)
    cmd = [bench, op, "--ranks", str(a.ranks), "--transport", a.transport, "-b", str(size), "-e", str(size),
           "-n", str(n), "-w", str(w), "-d", a.dtype] + extra
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    for line in out.stdout.splitlines():
        f = line.split()
        if f and not line.startswith("#") and f[0].isdigit() and int(f[0]) > 0:
            return float(f[5]), int(f[8])  # out-of-place time (us), #wrong
    sys.exit(f"no row in the output of {' '.join(cmd)}:\n{out.stdout}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bench")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--transport", default="shm")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--sizes", default="64K,256K,1M,4M,16M,64M")
    p.add_argument("--heads", default="32")
    p.add_argument("--kv-heads", default="0")
    p.add_argument("--head-dim", default="128")
    p.add_argument("--parts", default="q")
    p.add_argument("-d", dest="dtype", default="float")
    a = p.parse_args()
    layout = ["--heads", a.heads, "--kv-heads", a.kv_heads, "--head-dim", a.head_dim, "--parts", a.parts]
    ops = [("alltoall", []), ("seqtoheads", layout), ("headstoseq", layout)]
    times = {op: {} for op, _ in ops}
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    for _ in range(a.runs):
        for size in sizes:
            for op, extra in ops:  # alternated within each size, launch after launch
                t, wrong = launch(a.bench, op, size, a, extra)
                if wrong:
                    sys.exit(f"{op} {size} B: {wrong} wrong elements")
                times[op].setdefault(size, []).append(t)
    print(f"{a.ranks} ranks, {a.transport}, {a.dtype}; layout {' '.join(layout)}; median of {a.runs} alternating "
          f"launches (time in us, out of place)\n")
    print("| size | alltoall | seqtoheads | ratio | headstoseq | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in sizes:
        base = statistics.median(times["alltoall"][size])
        s2h = statistics.median(times["seqtoheads"][size])
        h2s = statistics.median(times["headstoseq"][size])
        label = next((f"{size // u} {k}iB" for k, u in sorted(UNITS.items(), key=lambda x: -x[1]) if size % u == 0
                      and size >= u), f"{size} B")
        print(f"| {label} | {base:.1f} | {s2h:.1f} | {s2h / base:.2f} | {h2s:.1f} | {h2s / base:.2f} |")


if __name__ == "__main__":
    main()
