#!/usr/bin/env python3
# A/B of two gyre-bench builds: launches alternated old, new, old, new (5 of
# each; AB_RUNS=N for N), the median of each size's out-of-place p50 over the
# launches, and the ratio. The honest before/after on a host whose speed
# drifts.
#   tools/ab_bench.py OLD/gyre-bench NEW/gyre-bench <gyre-bench args> --percentiles
import os, subprocess, sys, statistics, re
old, new = sys.argv[1], sys.argv[2]
args = sys.argv[3:]
runs = int(os.environ.get("AB_RUNS", "5"))
res = {"old": {}, "new": {}}
def run(binary):
    out = subprocess.run([binary] + args, capture_output=True, text=True, timeout=600).stdout
    rows = {}
    for line in out.splitlines():
        if line.startswith("#") or not line.strip(): continue
        f = line.split()
        try:
            size = int(f[0])
        except ValueError:
            continue
        rows[size] = f
    return rows, out
hdr = None
for i in range(runs):
    for name, b in (("old", old), ("new", new)):
        rows, out = run(b)
        if hdr is None:
            hdr = [l for l in out.splitlines() if l.startswith("#") and "p50" in l]
        for size, f in rows.items():
            res[name].setdefault(size, []).append(f)
# find p50 column: with --percentiles the row is size count type redop root time algbw busbw p50 p99 #wrong ...
def col(fields, idx):
    return float(fields[idx])
print("size  old_p50  new_p50  new/old")
for size in sorted(res["old"]):
    # out-of-place p50 is column 8 (0-based) when --percentiles
    o = statistics.median(col(f, 13) for f in res["old"][size])
    n = statistics.median(col(f, 13) for f in res["new"][size])
    print(f"{size:>8} {o:8.2f} {n:8.2f} {n/o:7.2f}")
