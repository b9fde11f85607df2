#!/usr/bin/python3
"""Step time and its breakdown for every parallelism of the training harness
(docs/PERFORMANCE-harness.md). Standard library only.

    /usr/bin/python3 bench/harness/harness_bench.py [--rounds 3] [--steps 20]
        [--markdown out.md] [--json out.json]

Runs the same model on the same text under every configuration: one rank,
data parallel (ZeRO 0 to 3), tensor parallel, pipeline parallel (GPipe and
1F1B), and the mixed meshes dp2 x tp2, dp2 x pp2 and dp2 x tp2 x pp2, each
at 2, 4 and 8 ranks where the mesh allows. Each run is
`gyrerun -n N --bind core gyre-harness-steps --report DIR ...`
(bench/harness/steps.cc: gyre-train's Trainer and options, with every rank's
whole StepReport logged as a JSON line per step). The first --warmup steps
are dropped; per step the compute, comm and optimizer shares are averaged
over the ranks (a pipeline's stages differ), the step time and tokens/s are
rank 0's (what gyre-train logs); a run's figure is the median over its
steps; the table has the median over the rounds, and "x 1 rank" is the
median of each round's tokens/s over the single-rank run's in the same
round. "CPU ms" is the CPU time of all ranks' processes in a step (every
thread), which other work on the machine inflates much less than the wall
time: the step's cost in core-milliseconds, against one rank's. The rounds run every configuration in turn (A B C ... A B C ...,
reversed every other round), so the host's drift hits them alike; before
each run the script waits until the machine is idle (other processes use
under a quarter of the CPUs over one second).

The text: Vim's user manual (/usr/share/vim/vim90/doc/usr_*.txt,
concatenated) where installed, else a generated English-like text.
"""

import argparse
import datetime
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

# (name, ranks, gyre-train options). The model and batch are added to all.
def configurations():
    out = [("1 rank", 1, [])]
    for n in (2, 4, 8):
        for z in range(4):
            out.append(("dp%d zero%d" % (n, z), n, ["--dp", str(n), "--zero", str(z)]))
        out.append(("tp%d" % n, n, ["--tp", str(n)]))
        out.append(("sp%d" % n, n, ["--sp", str(n)]))
        for sched in ("gpipe", "1f1b"):
            out.append(("pp%d %s" % (n, sched), n, ["--pp", str(n), "--schedule", sched]))
    out.append(("dp2 x tp2", 4, ["--dp", "2", "--tp", "2"]))
    out.append(("dp2 x pp2 1f1b", 4, ["--dp", "2", "--pp", "2", "--schedule", "1f1b"]))
    out.append(("dp2 x tp2 x pp2 1f1b", 8, ["--dp", "2", "--tp", "2", "--pp", "2", "--schedule", "1f1b"]))
    out.append(("dp2 x sp2", 4, ["--dp", "2", "--sp", "2"]))
    # A mixture of 4 experts in every block (top 2, no capacity limit).
    out.append(("1 rank 4 experts", 1, ["--experts", "4"]))
    out.append(("dp2 zero1 4 experts", 2, ["--dp", "2", "--zero", "1", "--experts", "4"]))
    # Expert parallelism against the same data parallelism with every expert everywhere.
    for n, eps in ((2, (1, 2)), (4, (1, 2, 4))):
        for ep in eps:
            out.append(("dp%d ep%d 4 experts" % (n, ep), n,
                        ["--dp", str(n), "--ep", str(ep), "--experts", "4"]))
    return out


def text_file(workdir):
    manual = sorted(glob.glob("/usr/share/vim/vim90/doc/usr_*.txt"))
    path = os.path.join(workdir, "text.txt")
    with open(path, "wb") as out:
        if manual:
            for f in manual:
                with open(f, "rb") as src:
                    out.write(src.read())
            return path, "Vim's user manual, %d files (/usr/share/vim/vim90/doc/usr_*.txt)" % len(manual)
        words = ("the of and to in is that for it as with was on be by this are from at or an "
                 "which have one not but all were when there can more if will so what out up "
                 "collective gradient rank buffer reduce shard pipeline stage model").split()
        state = 12345
        for _ in range(120000):
            state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            out.write((words[(state >> 33) % len(words)] + (". " if state % 13 == 0 else " ")).encode())
        return path, "a generated text of %d bytes (no Vim manual here)" % os.path.getsize(path)


def busy_fraction(seconds=1.0):
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v), idle
    t0, i0 = snap()
    time.sleep(seconds)
    t1, i1 = snap()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_idle(limit_s, log):
    start = time.time()
    while True:
        busy = busy_fraction()
        if busy < 0.25:
            return busy
        if time.time() - start > limit_s:
            log("machine still busy (%.0f%% of the CPUs) after %d s; running anyway" % (100 * busy, limit_s))
            return busy
        log("machine busy (%.0f%% of the CPUs used by others); waiting" % (100 * busy))
        time.sleep(10)


def run_one(args, name, ranks, extra, text, workdir, log):
    report = tempfile.mkdtemp(prefix="report-", dir=workdir)
    cmd = [args.gyrerun, "-n", str(ranks), "--bind", "core", "--timeout", str(args.timeout),
           "-x", "GYRE_TRANSPORT=" + args.transport, "-x", "OPENBLAS_NUM_THREADS=1",
           args.driver, "--report", report, "--data", text, "--steps", str(args.steps),
           "--quiet"] + model_args(args) + extra
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        log("%s failed (status %d): %s" % (name, p.returncode, p.stdout[-2000:]))
        shutil.rmtree(report, ignore_errors=True)
        return None
    steps = {}
    for f in glob.glob(os.path.join(report, "rank-*.jsonl")):
        with open(f) as fh:
            for line in fh:
                r = json.loads(line)
                steps.setdefault(r["step"], []).append(r)
    shutil.rmtree(report, ignore_errors=True)
    per = {"step_ms": [], "tokens_per_s": [], "compute": [], "comm": [], "optimizer": [],
           "other": [], "bubble": [], "cpu_ms": [], "state_mib": []}
    for step in sorted(steps):
        if step < args.warmup:
            continue
        rs = steps[step]
        if len(rs) != ranks:
            continue
        r0 = next(r for r in rs if r["rank"] == 0)
        per["step_ms"].append(1e3 * r0["step_s"])
        per["tokens_per_s"].append(r0["tokens_per_s"])
        for k in ("compute", "comm", "optimizer"):
            per[k].append(statistics.mean(r[k + "_s"] / r["step_s"] for r in rs))
        per["other"].append(statistics.mean(
            1 - (r["compute_s"] + r["comm_s"] + r["optimizer_s"]) / r["step_s"] for r in rs))
        per["bubble"].append(r0["bubble"])
        per["cpu_ms"].append(1e3 * sum(r["cpu_s"] for r in rs))
        per["state_mib"].append(max(r.get("state_bytes", 0) for r in rs) / 2.0**20)
    if not per["step_ms"]:
        log("%s: no steps after the warm-up" % name)
        return None
    out = {k: statistics.median(v) for k, v in per.items()}
    out["wall_s"] = wall
    out["command"] = " ".join(cmd)
    return out


def model_args(args):
    return ["--layers", str(args.layers), "--dim", str(args.dim), "--heads", str(args.heads),
            "--seq", str(args.seq), "--batch", str(args.batch)]


def machine():
    model = "?"
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "%s, %d CPUs usable (%s)" % (model, len(os.sched_getaffinity(0)), platform.release())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5, help="steps dropped from each run")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16, help="sequences per step over all dp ranks")
    ap.add_argument("--transport", default="shm")
    ap.add_argument("--only", help="comma-separated configuration names (as in the table)")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--idle-wait", type=int, default=300, help="most seconds to wait for an idle machine")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    args.gyrerun = os.path.join(args.build, "tools", "gyrerun")
    args.driver = os.path.join(args.build, "bench", "harness", "gyre-harness-steps")
    for exe in (args.gyrerun, args.driver):
        if not os.access(exe, os.X_OK):
            sys.exit("harness_bench: %s is not built (ninja -C %s gyrerun gyre-harness-steps)" % (exe, args.build))

    def log(msg):
        print("harness_bench: " + msg, file=sys.stderr, flush=True)

    configs = configurations()
    if args.only:
        wanted = [s.strip() for s in args.only.split(",")]
        configs = [c for c in configs if c[0] in wanted or c[0] == "1 rank"]
    workdir = tempfile.mkdtemp(prefix="harness-bench-")
    text, text_note = text_file(workdir)
    runs = {c[0]: [] for c in configs}
    busy = []
    started = datetime.datetime.now(datetime.timezone.utc)

    # The table and the files from the runs so far (after every round).
    def report(final=True):
        base = {r["round"]: r["tokens_per_s"] for r in runs.get("1 rank", [])}
        rows = []
        for name, ranks, extra in configs:
            rs = runs[name]
            if not rs:
                rows.append({"name": name, "ranks": ranks, "failed": True})
                continue
            row = {"name": name, "ranks": ranks, "runs": len(rs)}
            for k in ("step_ms", "tokens_per_s", "compute", "comm", "optimizer", "other", "bubble", "cpu_ms",
                      "state_mib"):
                row[k] = statistics.median(r[k] for r in rs)
            row["step_ms_min"] = min(r["step_ms"] for r in rs)
            row["step_ms_max"] = max(r["step_ms"] for r in rs)
            ratios = [r["tokens_per_s"] / base[r["round"]] for r in rs if r["round"] in base]
            row["vs_one_rank"] = statistics.median(ratios) if ratios else None
            cpu_base = {r["round"]: r["cpu_ms"] for r in runs.get("1 rank", [])}
            cpu_ratios = [r["cpu_ms"] / cpu_base[r["round"]] for r in rs if r["round"] in cpu_base]
            row["cpu_vs_one_rank"] = statistics.median(cpu_ratios) if cpu_ratios else None
            row["command"] = rs[0]["command"]
            rows.append(row)

        def pct(x):
            return "%.0f%%" % (100 * x) if abs(x) >= 0.005 else "0%"

        lines = ["| configuration | ranks | step ms (min-max) | tokens/s | x 1 rank | CPU ms (x 1 rank) "
                 "| compute | comm | optimizer | other | bubble | state MiB/rank |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            if r.get("failed"):
                lines.append("| %s | %d | failed | | | | | | | | | |" % (r["name"], r["ranks"]))
                continue
            lines.append("| %s | %d | %.1f (%.1f-%.1f) | %.0f | %s | %.0f (%s) | %s | %s | %s | %s | %s | %.1f |" % (
                r["name"], r["ranks"], r["step_ms"], r["step_ms_min"], r["step_ms_max"], r["tokens_per_s"],
                "%.2f" % r["vs_one_rank"] if r["vs_one_rank"] else "-", r["cpu_ms"],
                "%.2f" % r["cpu_vs_one_rank"] if r["cpu_vs_one_rank"] else "-", pct(r["compute"]), pct(r["comm"]),
                pct(r["optimizer"]), pct(r["other"]), pct(r["bubble"]) if r["bubble"] else "-",
                r["state_mib"]))
        table = "\n".join(lines)
        head = ("model: %d layers, dim %d, %d heads, seq %d, batch %d sequences per step (%d tokens); "
                "text: %s; transport %s; %d rounds of %d steps, the first %d dropped; machine: %s; "
                "started %s UTC; idle before runs: median %.0f%% of the CPUs busy" % (
                    args.layers, args.dim, args.heads, args.seq, args.batch, args.batch * args.seq,
                    text_note, args.transport, args.rounds, args.steps, args.warmup, machine(),
                    started.strftime("%Y-%m-%d %H:%M"), 100 * statistics.median(busy) if busy else 0))
        if final:
            print(head + "\n\n" + table)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(head + "\n\n" + table + "\n")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"header": head, "rows": rows, "runs": runs}, f, indent=1)

    for rnd in range(args.rounds):
        order = configs if rnd % 2 == 0 else list(reversed(configs))
        for name, ranks, extra in order:
            busy.append(wait_idle(args.idle_wait, log))
            r = run_one(args, name, ranks, extra, text, workdir, log)
            if r:
                r["round"] = rnd
                runs[name].append(r)
                log("round %d %-22s %8.1f ms/step %8.0f tokens/s" % (rnd, name, r["step_ms"], r["tokens_per_s"]))
        if rnd + 1 < args.rounds:
            report(final=False)  # what the rounds so far give, in case the run is cut short
    shutil.rmtree(workdir, ignore_errors=True)
    report()


if __name__ == "__main__":
    main()
