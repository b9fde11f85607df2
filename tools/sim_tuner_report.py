#!/usr/bin/env python3
"""The tuner at scale (docs/simulator.md, "The tuner at scale"): for each
collective and rank count, which algorithm gyre's tuner picks per size on a
simulated cluster, and where the simulation finds another algorithm faster.

    tools/sim_tuner_report.py [--sim build/tools/gyre-sim] [--ranks 8,64,1024]
                              [--ops allreduce,allgather,reducescatter,alltoall]
                              [-b 8] [-e 256M] [-f 8] [--cluster FILE] [-- gyre-sim flags...]

Ranks are placed 8 to a host (DGX H100-like hosts, gyre-sim's defaults, or
those of --cluster FILE with its host count replaced). Prints a Markdown
table per collective: size, then per rank count the tuner's choice, its
simulated time, and the fastest simulated algorithm with how much faster it
is (blank where the tuner's choice is the fastest, or within 5% of it).
"""
import argparse
import re
import subprocess
import sys
import time


def run(sim, op, ranks, args, extra):
    hosts = max(1, ranks // 8)
    cmd = [sim, op, "--hosts", str(hosts), "--ranks-per-host", str(min(8, ranks)),
           "--nics-per-host", str(min(8, ranks)), "-b", args.b, "-e", args.e, "-f", str(args.f), "--compare"]
    if args.cluster:
        cmd[2:2] = ["--cluster", args.cluster]
    cmd += extra
    t0 = time.time()
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall = time.time() - t0
    rows = []
    for line in text.splitlines():
        if not line.startswith("#") and line.strip():
            f = line.split()
            rows.append({"size": int(float(f[0])), "us": float(f[5]), "algo": f[8], "every": {}})
        elif line.startswith("#   every algorithm") and rows:
            for name, us in re.findall(r"(\w+) (n/a|[0-9.]+)", line.split(":", 1)[1]):
                if us != "n/a":
                    rows[-1]["every"][name] = float(us)
    return rows, wall


def size_name(b):
    for unit, s in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= s and b % s == 0:
            return f"{b // s}{unit}"
    return str(b)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sim", default="build/tools/gyre-sim")
    p.add_argument("--ranks", default="8,64,1024")
    p.add_argument("--ops", default="allreduce,allgather,reducescatter,alltoall")
    p.add_argument("-b", default="8")
    p.add_argument("-e", default="256M")
    p.add_argument("-f", type=int, default=8)
    p.add_argument("--cluster")
    args, extra = p.parse_known_args()
    extra = [x for x in extra if x != "--"]
    ranks = [int(r) for r in args.ranks.split(",")]
    for op in args.ops.split(","):
        results = {}
        for n in ranks:
            results[n], wall = run(args.sim, op, n, args, extra)
            print(f"<!-- {op} on {n} ranks: simulated in {wall:.1f} s -->", file=sys.stderr)
        print(f"\n**{op}** (µs; faster: the fastest simulated algorithm and its speed-up over the tuner's choice)\n")
        print("| size | " + " | ".join(f"{n} ranks: tuner's choice | µs | faster" for n in ranks) + " |")
        print("|---|" + "---|---|---|" * len(ranks))
        sizes = [r["size"] for r in results[ranks[0]]]
        for i, size in enumerate(sizes):
            cells = []
            for n in ranks:
                if i >= len(results[n]):
                    cells += ["", "", ""]
                    continue
                r = results[n][i]
                best = min(r["every"].items(), key=lambda kv: kv[1]) if r["every"] else (r["algo"], r["us"])
                faster = f"{best[0]} {r['us'] / best[1]:.2f}x" if best[1] < r["us"] / 1.05 else ""
                cells += [r["algo"], f"{r['us']:.1f}", faster]
            print(f"| {size_name(size)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
