#!/usr/bin/env python3
"""Side-by-side measurements for every collective (issue 3's checks).

Two parts, each run as alternating launches (A B C A B C ...) with medians,
since this machine's speed drifts between launches:

1. The tuner against every fixed algorithm: gyre-bench for each operation,
   each of its algorithms and the automatic choice, 2 and 4 ranks, 8 B to
   64 MiB; the automatic choice's busbw over the best fixed one.
2. gyre against Open MPI (its default ob1/vader path and its UCX path) at
   64 MiB for AllGather, AllToAll, ReduceScatter and AllToAllv (one peer 8x
   the others), with the memory-traffic limit from memcpy-bw in the same run.

Usage: tools/compare_collectives.py [--repeats 3] [--markdown FILE] [--build DIR]
Needs a build with bench/compare (Open MPI found): tools/setup.sh installs it.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

MiB = 1 << 20
UCX = ["--mca", "pml", "ucx", "--mca", "opal_common_ucx_tls", "any", "--mca", "opal_common_ucx_devices", "any"]

# Operation -> its algorithms (GYRE_ALGO names). Direct ones only with shm.
ALGOS = {
    "allreduce": ["ring", "recursive_doubling", "rabenseifner", "direct"],
    "allgather": ["ring", "bruck", "recursive_doubling", "direct"],
    "reducescatter": ["ring", "recursive_halving", "direct"],
    "alltoall": ["pairwise", "bruck", "direct"],
    "broadcast": ["chain", "binomial_tree", "direct"],
    "reduce": ["chain", "binomial_tree"],
}
# Size segments of the sweep: (min, max, factor, iterations, warmup).
SEGMENTS = [(8, 256 * 1024, 8, 200, 20), (1 * MiB, 64 * MiB, 4, 10, 2)]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def rows_of(text):
    """size -> (out-of-place busbw, in-place busbw or None), from an nccl-tests table."""
    rows = {}
    for line in text.splitlines():
        f = line.split()
        if not f or line.startswith("#") or not f[0].isdigit() or len(f) < 9:
            continue
        oop = float(f[7])
        ip = float(f[11]) if len(f) >= 13 and f[11] != "N/A" else None
        wrong = [x for x in (f[8], f[12] if len(f) >= 13 else "0") if x not in ("0", "N/A")]
        if wrong:
            raise RuntimeError("wrong results in: " + line)
        rows[int(f[0])] = (oop, ip)
    return rows


def run(cmd, env=None, timeout=600):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return p.stdout


class Runner:
    def __init__(self, build):
        self.bench = os.path.join(build, "bench", "gyre-bench")
        self.mpi = os.path.join(build, "bench", "compare", "mpi-collective-perf")
        self.memcpy = os.path.join(build, "bench", "compare", "memcpy-bw")
        self.ncpu = len(os.sched_getaffinity(0))

    def gyre(self, op, n, lo, hi, f, iters, warm, algo=None, extra=()):
        bind = "core" if n <= self.ncpu else "none"
        cmd = [self.bench, op, "--ranks", str(n), "--bind", bind, "--transport", "shm", "-b", str(lo), "-e", str(hi),
               "-f", str(f), "-n", str(iters), "-w", str(warm), "-c", "0", *extra]
        if algo:
            cmd += ["--algo", algo]
        return rows_of(run(cmd))

    def ompi(self, op, n, size, iters, warm, ucx, extra=()):
        place = ["--map-by", "core", "--bind-to", "core"] if n <= self.ncpu else ["--oversubscribe", "--bind-to", "none"]
        cmd = ["mpirun", "--allow-run-as-root", "-n", str(n), *place, *(UCX if ucx else []), self.mpi, op, "-b",
               str(size), "-e", str(size), "-n", str(iters), "-w", str(warm), "-c", "0", *extra]
        return rows_of(run(cmd))

    def memcpy_total(self, threads):
        out = run([self.memcpy, "-b", "256M", "-e", "256M", "-n", "10", "-w", "2", "--threads", str(threads)])
        size, (oop, _) = next(iter(rows_of(out).items()))
        return oop  # memcpy-bw reports bytes/time in the busbw column (factor 1)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def tuner_part(r, repeats, ranks):
    """(op, n) -> size -> {config: median out-of-place busbw}"""
    res = {}
    for n in ranks:
        for op, algos in ALGOS.items():
            configs = algos + ["auto"]
            samples = {}
            for rep in range(repeats):
                for c in configs:
                    for lo, hi, f, it, w in SEGMENTS:
                        try:
                            rows = r.gyre(op, n, lo, hi, f, it, w, None if c == "auto" else c)
                        except RuntimeError as e:
                            log("skipped %s %s n=%d: %s" % (op, c, n, str(e)[:200]))
                            continue
                        for size, (oop, _) in rows.items():
                            samples.setdefault(size, {}).setdefault(c, []).append(oop)
                log("tuner: %s n=%d repeat %d done" % (op, n, rep + 1))
            res[(op, n)] = {s: {c: median(v) for c, v in byc.items()} for s, byc in samples.items()}
    return res


def peers_part(r, repeats, ranks, size):
    """(op, n) -> {config: median out-of-place busbw}"""
    ops = [("allgather", ()), ("alltoall", ()), ("reducescatter", ()), ("alltoallv", ("--skew", "8"))]
    res = {}
    for n in ranks:
        for op, extra in ops:
            samples = {}
            for rep in range(repeats):
                runs = [("gyre", lambda: r.gyre(op, n, size, size, 2, 10, 2, extra=extra))]
                if op == "alltoallv":  # the same bytes as an even AllToAll, same run
                    runs.append(("gyre alltoall", lambda: r.gyre("alltoall", n, size, size, 2, 10, 2)))
                runs += [("ompi", lambda: r.ompi(op, n, size, 10, 2, False, extra)),
                         ("ompi-ucx", lambda: r.ompi(op, n, size, 10, 2, True, extra))]
                for name, fn in runs:
                    try:
                        rows = fn()
                    except RuntimeError as e:
                        log("skipped %s %s n=%d: %s" % (name, op, n, str(e)[:200]))
                        continue
                    for s, (oop, _) in rows.items():
                        samples.setdefault(name, []).append(oop)
            res[(op, n)] = {c: median(v) for c, v in samples.items()}
            log("peers: %s n=%d: %s" % (op, n, res[(op, n)]))
    return res


def fmt_size(s):
    for unit, v in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1024)):
        if s >= v and s % v == 0:
            return "%d %s" % (s // v, unit)
    return "%d B" % s


def markdown(tuner, peers, mem1, mem2, ncpu, repeats, command):
    out = ["# gyre collectives: algorithms, tuner and Open MPI", ""]
    out.append("- command: `%s`" % command)
    out.append("- date: %s; %d CPUs; %d alternating launches per configuration, medians" %
               (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), ncpu, repeats))
    out.append("- memcpy-bw (256 MiB), same run: 1 thread %.2f GB/s, 2 threads %.2f GB/s in total" % (mem1, mem2))
    out.append("- busbw in GB/s, out of place (nccl-tests factors: AllReduce 2(n-1)/n; AllGather, ReduceScatter, "
               "AllToAll(v) (n-1)/n; Broadcast, Reduce 1); shared memory; ranks pinned one per core when they fit")
    out.append("")
    out.append("## Against Open MPI at 64 MiB")
    out.append("")
    out.append("Memory-traffic limit: every byte of each rank's input read once and of its output written once, "
               "at the 2-thread memcpy rate shared by the ranks: busbw limit = (memcpy 2 threads / n) x (n-1)/n.")
    out.append("")
    out.append("| operation | ranks | gyre | Open MPI (ob1) | Open MPI (UCX) | gyre / best MPI | memory limit | gyre / limit |")
    out.append("|---|---|---|---|---|---|---|---|")
    for (op, n), v in peers.items():
        g = v.get("gyre", float("nan"))
        best = max(v.get("ompi", 0), v.get("ompi-ucx", 0)) or float("nan")
        lim = mem2 / n * (n - 1) / n
        out.append("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f%% |" % (
            op + (" (skew 8)" if op == "alltoallv" else ""), n, g, v.get("ompi", float("nan")),
            v.get("ompi-ucx", float("nan")), g / best, lim, 100 * g / lim))
        if op == "alltoallv" and "gyre alltoall" in v:
            out.append("| alltoall, same bytes | %d | %.2f | | | AllToAllv / AllToAll = %.2f | | |" % (
                n, v["gyre alltoall"], g / v["gyre alltoall"]))
    out.append("")
    out.append("## The automatic choice against every fixed algorithm")
    out.append("")
    out.append("auto / best: the automatic choice's busbw over the best fixed algorithm's at that size "
               "(the target is 0.9 or more; small sizes are latency-bound and noisiest).")
    for (op, n), bysize in tuner.items():
        configs = ALGOS[op] + ["auto"]
        out.append("")
        out.append("### %s, %d ranks" % (op, n))
        out.append("")
        out.append("| size | " + " | ".join(configs) + " | auto / best |")
        out.append("|---" * (len(configs) + 2) + "|")
        for s in sorted(bysize):
            v = bysize[s]
            fixed = [v[c] for c in ALGOS[op] if c in v]
            best = max(fixed) if fixed else float("nan")
            cells = ["%.2f" % v[c] if c in v else "-" for c in configs]
            ratio = v.get("auto", float("nan")) / best if best else float("nan")
            out.append("| %s | %s | %.2f%s |" % (fmt_size(s), " | ".join(cells), ratio, "" if ratio >= 0.9 else " (below 0.9)"))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--build", default="build")
    ap.add_argument("--markdown", help="write the report here (default: stdout)")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--skip-tuner", action="store_true")
    args = ap.parse_args()
    r = Runner(args.build)
    ranks = [int(x) for x in args.ranks.split(",")]
    mem1, mem2 = r.memcpy_total(1), r.memcpy_total(2)
    peers = peers_part(r, args.repeats, ranks, 64 * MiB)
    tuner = {} if args.skip_tuner else tuner_part(r, args.repeats, ranks)
    text = markdown(tuner, peers, mem1, mem2, r.ncpu, args.repeats, "tools/compare_collectives.py " + " ".join(sys.argv[1:]))
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
