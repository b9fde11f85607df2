#!/usr/bin/python3
"""Side-by-side allreduce comparison: gyre against Open MPI and Gloo, and
against the machine's memcpy bandwidth, measured in the same run.

Every library prints the nccl-tests all_reduce_perf table (gyre's
gyre-allreduce-perf, and the peer drivers of bench/compare/), so one parser
reads them all. Launches alternate between libraries (A B C A B C ...) and
each size's time is the median over --repeats launches.

    /usr/bin/python3 tools/compare.py                       # all scenarios
    /usr/bin/python3 tools/compare.py --scenario shm-2 --repeats 1
    /usr/bin/python3 tools/compare.py --with-ucx --markdown out/compare.md

Standard library only; runs with Debian's /usr/bin/python3.
"""

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PEER_TARGETS = ["mpi-allreduce-perf", "gloo-allreduce-perf", "memcpy-bw", "tcp-loopback-bw"]
GYRE_TARGETS = ["gyre-allreduce-perf", "gyrerun"]

# (largest size in the class, timed iterations, warmup iterations). Sizes of
# one class go into one launch per library (split into geometric runs, since
# a launch takes -b/-e/-f), so a shm-2 sweep of one library is a handful of
# launches of a few seconds each. Over TCP a small allreduce costs 20 us
# (Open MPI) to several ms (some Gloo algorithms), hence fewer iterations.
ITERATIONS_SHM = [
    (64 * KiB, 1000, 100),
    (1 * MiB, 200, 20),
    (8 * MiB, 50, 5),
    (64 * MiB, 10, 2),
    (None, 5, 1),
]
ITERATIONS_TCP = [
    (64 * KiB, 200, 20),
    (1 * MiB, 100, 10),
    (8 * MiB, 20, 3),
    (64 * MiB, 10, 2),
    (None, 5, 1),
]

GLOO_ALGOS = ["ring", "ring_chunked", "halving_doubling", "allreduce_ring", "allreduce_bcube"]
GLOO_SHORT = {"ring": "ring", "ring_chunked": "chunk", "halving_doubling": "hd",
              "allreduce_ring": "aring", "allreduce_bcube": "bcube"}


def sweep(lo, hi, factor):
    out = []
    s = lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


class Scenario:
    def __init__(self, name, nranks, sizes, transport, title, oversubscribe=False):
        self.name = name
        self.iterations = ITERATIONS_TCP if transport == "tcp" else ITERATIONS_SHM
        self.nranks = nranks
        self.sizes = sorted(set(sizes))
        self.transport = transport  # GYRE_TRANSPORT
        self.title = title
        self.oversubscribe = oversubscribe


# The requested sweeps are factor 4 from 8 B, which only hits odd powers of
# two; the target sizes (16 MiB, 64 MiB) and the 256 MiB end are added.
SCENARIOS = {
    "shm-2": Scenario("shm-2", 2, sweep(8, 256 * MiB, 4) + [16 * MiB, 64 * MiB, 256 * MiB], "shm",
                      "2 ranks, shared memory: gyre (GYRE_TRANSPORT=shm) vs Open MPI default path "
                      "(pml ob1 + btl vader)"),
    "tcp-2": Scenario("tcp-2", 2, sweep(8, 256 * MiB, 4) + [16 * MiB, 64 * MiB, 256 * MiB], "tcp",
                      "2 ranks, TCP over loopback: gyre (GYRE_TRANSPORT=tcp) vs Gloo (tcp transport, "
                      "127.0.0.1) vs Open MPI (btl tcp,self on lo, pml ob1)"),
    "shm-4-oversub": Scenario("shm-4-oversub", 4, sweep(1 * MiB, 64 * MiB, 4) + [16 * MiB], "shm",
                              "4 ranks on the machine's cores, oversubscribed: gyre (GYRE_TRANSPORT=shm) "
                              "vs Open MPI default path", oversubscribe=True),
}

# (scenario, size, kind, peer, threshold, text)
TARGETS = [
    ("shm-2", 64 * MiB, "ratio", "ompi", 3.0, "shm-2 64 MiB busbw gyre/Open MPI >= 3"),
    ("shm-2", 8, "latency", "ompi", None, "shm-2 8 B time gyre <= Open MPI"),
    ("tcp-2", 16 * MiB, "ratio", "gloo-best", 2.0, "tcp-2 16 MiB busbw gyre/best Gloo >= 2"),
    ("tcp-2", 16 * MiB, "ratio-gt", "ompi-tcp", 1.0, "tcp-2 16 MiB busbw gyre > Open MPI TCP"),
    ("shm-4-oversub", 16 * MiB, "ratio", "ompi", 2.0, "shm-4-oversub 16 MiB busbw gyre/Open MPI >= 2"),
]


def fmt_size(n):
    for unit, div in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def size_arg(n):
    for suffix, div in (("G", GiB), ("M", MiB), ("K", KiB)):
        if n >= div and n % div == 0:
            return "%d%s" % (n // div, suffix)
    return str(n)


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError("bad size %r (use e.g. 8, 64K, 16M, 1G)" % text)
    mult = {"": 1, "K": KiB, "M": MiB, "G": GiB}[m.group(2).upper()]
    return int(m.group(1)) * mult


# ---------------------------------------------------------------- parsing

def _num(tok):
    if tok in ("N/A", "n/a", "-"):
        return None
    return float(tok)


def parse_table(text):
    """Rows of an nccl-tests all_reduce_perf table, by size in bytes:
    {size: {"count", "oop_us", "oop_wrong", "ip_us", "ip_wrong"}}, plus
    per-thread lines of memcpy-bw under key "threads". Lines that are not
    table rows (warnings, launcher chatter) are ignored, and a "[rank] "
    prefix is stripped (only rank 0's lines count)."""
    rows = {}
    threads = []
    for line in text.splitlines():
        # Launchers may tag each line with its rank ("[0] ..."); the table is rank 0's.
        tagged = re.match(r"\[(\d+)\] ?(.*)$", line)
        if tagged:
            if tagged.group(1) != "0":
                continue
            line = tagged.group(2)
        if line.startswith("#"):
            m = re.match(r"# threads (\d+), size (\d+) per thread:(.*)", line)
            if m:
                per = [float(x) for x in re.findall(r"\) ([0-9.]+) GB/s", m.group(3))]
                threads.append({"threads": int(m.group(1)), "bytes": int(m.group(2)), "per_thread_gbs": per})
            continue
        tok = line.split()
        if len(tok) != 13 or not tok[0].isdigit() or not tok[1].isdigit():
            continue
        try:
            rows[int(tok[0])] = {
                "count": int(tok[1]),
                "oop_us": _num(tok[5]), "oop_wrong": None if tok[8] == "N/A" else int(tok[8]),
                "ip_us": _num(tok[9]), "ip_wrong": None if tok[12] == "N/A" else int(tok[12]),
            }
        except ValueError:
            continue
    if threads:
        rows["threads"] = threads
    return rows


def bus_factor(nranks):
    return 2.0 * (nranks - 1) / nranks if nranks > 1 else 1.0


def busbw(size, us, nranks):
    """GB/s as nccl-tests defines it for allreduce."""
    if not us:
        return None
    return size / us / 1e3 * bus_factor(nranks)


# ---------------------------------------------------------------- launching

class LaunchError(Exception):
    pass


def machine_cpus():
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return list(range(os.cpu_count() or 1))


def descendants(pid):
    """Every process below pid (from /proc), so that ranks a launcher moved
    out of its process group die with it."""
    out = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for tid in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, tid)) as f:
                    kids = [int(x) for x in f.read().split()]
                out += kids
                todo += kids
        except (OSError, ValueError):
            pass
    return out


def kill_tree(proc):
    """SIGTERM to the launcher's group (mpirun then stops its ranks), a grace
    period, then SIGKILL to the group and to every process below it."""
    below = descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    below += descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()


def run_group(cmds, env, timeout, cwd=None):
    """Runs the commands concurrently (each in its own session), returns the
    first one's stdout; raises LaunchError on a non-zero exit or when the
    deadline passes (then every process tree is killed)."""
    procs = []
    outs = []
    try:
        for cmd in cmds:
            out = tempfile.TemporaryFile()
            err = tempfile.TemporaryFile()
            outs.append((out, err))
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                          env=env, cwd=cwd, start_new_session=True))
        deadline = time.monotonic() + timeout
        timed_out = False
        for p in procs:
            left = deadline - time.monotonic()
            try:
                p.wait(timeout=max(left, 0.01))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
        if timed_out:
            raise LaunchError("timed out after %d s: %s" % (timeout, shlex.join(cmds[0])))
        texts = []
        for out, err in outs:
            out.seek(0)
            err.seek(0)
            texts.append((out.read().decode(errors="replace"), err.read().decode(errors="replace")))
        bad = [(i, p.returncode) for i, p in enumerate(procs) if p.returncode != 0]
        if bad:
            i, rc = bad[0]
            tail = (texts[i][1].strip() or texts[i][0].strip())[-1500:]
            raise LaunchError("exit status %d: %s\n%s" % (rc, shlex.join(cmds[i]), tail))
        return texts[0][0]
    finally:
        for p in procs:
            if p.poll() is None:
                kill_tree(p)
        for out, err in outs:
            out.close()
            err.close()


def base_env():
    env = dict(os.environ)
    # mpirun refuses to run as root without these (the flag is passed too).
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def driver_args(lo, hi, factor, iters, warmup, check=1):
    return ["-b", size_arg(lo), "-e", size_arg(hi), "-f", str(factor), "-n", str(iters), "-w", str(warmup),
            "-d", "float", "-o", "sum", "-c", str(check)]


class Lib:
    """One column of a scenario: a way to launch an nccl-tests style table."""

    def __init__(self, key, label, peer=True):
        self.key = key
        self.label = label
        self.peer = peer
        self.missing = None  # why it cannot run (set when a binary is absent)

    def commands(self, sc, args_list, ctx):
        raise NotImplementedError

    def binding(self, sc, ctx):
        raise NotImplementedError


def mpirun_binding(sc, ctx):
    if sc.nranks <= len(ctx.cpus) and not sc.oversubscribe:
        return ["--map-by", "core", "--bind-to", "core"]
    # More ranks than cores: round-robin over the cores, several ranks per core.
    return ["--oversubscribe", "--map-by", "core:OVERSUBSCRIBE", "--bind-to", "core:overload-allowed"]


class MpiLib(Lib):
    def __init__(self, key, label, mca, env=None):
        super().__init__(key, label)
        self.mca = mca
        self.env = env or {}

    def commands(self, sc, args_list, ctx):
        cmd = ["mpirun", "--allow-run-as-root", "-n", str(sc.nranks)] + mpirun_binding(sc, ctx) + self.mca
        for k, v in self.env.items():
            cmd += ["-x", "%s=%s" % (k, v)]
        cmd += ctx.mpirun_args + [ctx.peer_bin("mpi-allreduce-perf")] + args_list
        return [cmd], {}

    def binding(self, sc, ctx):
        cmds, _ = self.commands(sc, ["ARGS"], ctx)
        return shlex.join(cmds[0]).replace(ctx.peer_dir + "/", "")


class GlooLib(Lib):
    def __init__(self, algo):
        super().__init__("gloo-" + algo, "gloo-" + GLOO_SHORT[algo])
        self.algo = algo

    def commands(self, sc, args_list, ctx):
        store = tempfile.mkdtemp(prefix="gyre-compare-gloo-")
        ctx.tempdirs.append(store)
        cmds = []
        for r in range(sc.nranks):
            cpu = ctx.cpus[r % len(ctx.cpus)]
            cmds.append(["taskset", "-c", str(cpu), ctx.peer_bin("gloo-allreduce-perf"), "--algo", self.algo,
                         "--rank", str(r), "--size", str(sc.nranks), "--store-dir", store,
                         "--timeout", str(int(ctx.timeout))] + args_list)
        return cmds, {}

    def binding(self, sc, ctx):
        return ("for R in 0..%d: taskset -c CPU(R mod %d) gloo-allreduce-perf --algo %s --rank R --size %d "
                "--store-dir FRESH_TMPDIR ARGS" % (sc.nranks - 1, len(ctx.cpus), self.algo, sc.nranks))


class GyreLib(Lib):
    def __init__(self, transport):
        super().__init__("gyre", "gyre", peer=False)
        self.transport = transport

    def commands(self, sc, args_list, ctx):
        cmd = [ctx.gyrerun, "-n", str(sc.nranks), "--bind", "core", "--", ctx.gyre_bench] + args_list
        return [cmd], {"GYRE_TRANSPORT": self.transport}

    def binding(self, sc, ctx):
        return "GYRE_TRANSPORT=%s gyrerun -n %d --bind core -- gyre-allreduce-perf ARGS" % (self.transport, sc.nranks)


UCX_MCA = ["--mca", "pml", "ucx", "--mca", "opal_common_ucx_tls", "any",
           "--mca", "opal_common_ucx_devices", "any"]


def scenario_libs(sc, args):
    libs = [GyreLib(sc.transport)]
    if sc.name == "tcp-2":
        libs += [GlooLib(a) for a in args.gloo_algos]
        libs.append(MpiLib("ompi-tcp", "ompi-tcp",
                           ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"]))
        if args.with_ucx:
            libs.append(MpiLib("ompi-ucx", "ompi-ucx-tcp", UCX_MCA, {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"}))
    else:
        libs.append(MpiLib("ompi", "ompi", []))
        if args.with_ucx:
            libs.append(MpiLib("ompi-ucx", "ompi-ucx", UCX_MCA))
    return libs


# ---------------------------------------------------------------- segments

def iteration_class(table, size, scale):
    for limit, iters, warmup in table:
        if limit is None or size <= limit:
            return max(1, int(round(iters * scale))), max(0, int(round(warmup * scale)))
    raise AssertionError


def segments(table, sizes, scale):
    """Groups sizes into launches: one iteration class each, geometric runs
    (every launch is -b lo -e hi -f factor). Returns (lo, hi, factor, sizes,
    iters, warmup) tuples in size order."""
    out = []
    run, cls = [], None
    for s in sorted(sizes):
        c = iteration_class(table, s, scale)
        if run and c == cls:
            if len(run) == 1 and s % run[0] == 0 and s // run[0] >= 2:
                run.append(s)
                continue
            if len(run) > 1 and s == run[-1] * (run[1] // run[0]):
                run.append(s)
                continue
        if run:
            out.append(run_segment(run, cls))
        run, cls = [s], c
    if run:
        out.append(run_segment(run, cls))
    return out


def run_segment(run, cls):
    factor = run[1] // run[0] if len(run) > 1 else 2
    return (run[0], run[-1], factor, list(run), cls[0], cls[1])


# ---------------------------------------------------------------- context

class Context:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build_dir)
        self.peer_dir = os.path.abspath(args.peer_dir or os.path.join(self.build, "bench", "compare"))
        self.gyrerun = os.path.abspath(args.gyrerun or os.path.join(self.build, "tools", "gyrerun"))
        self.gyre_bench = os.path.abspath(args.gyre_bench or os.path.join(self.build, "bench", "gyre-allreduce-perf"))
        self.cpus = machine_cpus()
        self.timeout = args.timeout
        self.mpirun_args = shlex.split(args.mpirun_args or "")
        self.tempdirs = []
        self.errors = []
        self.notes = []

    def peer_bin(self, name):
        return os.path.join(self.peer_dir, name)

    def cleanup(self):
        for d in self.tempdirs:
            for root, dirs, files in os.walk(d, topdown=False):
                for f in files:
                    try:
                        os.unlink(os.path.join(root, f))
                    except OSError:
                        pass
                for sub in dirs:
                    try:
                        os.rmdir(os.path.join(root, sub))
                    except OSError:
                        pass
            try:
                os.rmdir(d)
            except OSError:
                pass
        self.tempdirs = []


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def install_peers(ctx):
    """The peers come from Debian packages: tools/setup.sh installs what is
    missing (Open MPI, Gloo, the build tools) when run as root."""
    if ctx.args.no_install:
        return
    setup = os.path.join(REPO, "tools", "setup.sh")
    log("compare: %s (installs Open MPI, Gloo and the build tools if missing)" % setup)
    r = subprocess.run([setup])
    if r.returncode != 0:
        log("compare: %s failed; install openmpi-bin libopenmpi-dev libgloo-dev, or pass --no-install" % setup)
        sys.exit(1)


def build(ctx):
    args = ctx.args
    if args.no_build:
        return
    if not os.path.exists(os.path.join(ctx.build, "CMakeCache.txt")):
        log("compare: %s is not configured; configuring it (cmake -G Ninja -DCMAKE_BUILD_TYPE=Release)" % ctx.build)
        r = subprocess.run(["cmake", "-S", REPO, "-B", ctx.build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            log(r.stdout[-3000:])
            log("compare: configuring failed; using whatever binaries exist")
            return
    r = subprocess.run(["cmake", "--build", ctx.build, "--target", "help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    known = set(re.findall(r"^(?:\S*/)?([\w.+-]+): \w+", r.stdout, re.M)) if r.returncode == 0 else set()
    wanted = [t for t in PEER_TARGETS + GYRE_TARGETS if t in known]
    absent = [t for t in PEER_TARGETS if t not in known]
    if absent and r.returncode == 0:
        log("compare: no build target for %s in %s (is bench/compare added to the build, and were the peers "
            "found at configure time?)" % (", ".join(absent), ctx.build))
    if not wanted:
        return
    log("compare: cmake --build %s --target %s" % (ctx.build, " ".join(wanted)))
    r = subprocess.run(["cmake", "--build", ctx.build, "--target"] + wanted, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        # One target failing (gyre's, while it is being written) must not stop the peers.
        log(r.stdout[-3000:])
        log("compare: building all targets failed; building them one by one")
        for t in wanted:
            rr = subprocess.run(["cmake", "--build", ctx.build, "--target", t], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
            if rr.returncode != 0:
                log("compare: building %s failed" % t)


def check_binaries(ctx, libs):
    for lib in libs:
        if isinstance(lib, GyreLib):
            absent = [p for p in (ctx.gyrerun, ctx.gyre_bench) if not os.access(p, os.X_OK)]
            if absent:
                lib.missing = "not available (%s not built): gyre columns are n/a" % ", ".join(absent)
        elif isinstance(lib, GlooLib):
            p = ctx.peer_bin("gloo-allreduce-perf")
            if not os.access(p, os.X_OK):
                lib.missing = "%s not built" % p
        elif isinstance(lib, MpiLib):
            p = ctx.peer_bin("mpi-allreduce-perf")
            if not os.access(p, os.X_OK):
                lib.missing = "%s not built" % p


# ---------------------------------------------------------------- running

def launch(ctx, lib, sc, seg):
    lo, hi, factor, sizes, iters, warmup = seg
    cmds, extra_env = lib.commands(sc, driver_args(lo, hi, factor, iters, warmup), ctx)
    env = base_env()
    env.update(extra_env)
    try:
        text = run_group(cmds, env, ctx.timeout)
    finally:
        ctx.cleanup()
    rows = parse_table(text)
    got = {}
    for s in sizes:
        if s not in rows:
            raise LaunchError("size %d missing from the output of %s" % (s, shlex.join(cmds[0])))
        got[s] = rows[s]
        for k in ("oop_wrong", "ip_wrong"):
            if rows[s][k]:
                raise LaunchError("%d wrong elements at size %d (%s) from %s" % (rows[s][k], s, k, shlex.join(cmds[0])))
    return got


def run_memcpy(ctx, threads):
    p = ctx.peer_bin("memcpy-bw")
    if not os.access(p, os.X_OK):
        raise LaunchError("%s not built" % p)
    cmd = [p, "-b", size_arg(ctx.args.memcpy_size), "-e", size_arg(ctx.args.memcpy_size), "-n", "10", "-w", "2",
           "--threads", str(threads)]
    rows = parse_table(run_group([cmd], base_env(), ctx.timeout))
    size = ctx.args.memcpy_size * threads
    if size not in rows or not rows[size]["oop_us"]:
        raise LaunchError("no result from %s" % shlex.join(cmd))
    per = rows.get("threads", [{}])[0].get("per_thread_gbs", [size / rows[size]["oop_us"] / 1e3])
    return {"total_gbs": size / rows[size]["oop_us"] / 1e3, "per_thread_gbs": per}


def run_tcp_flood(ctx):
    """A plain exchange over one loopback socket, 16 MiB each way at once (the
    traffic of a 2-rank AllReduce of 16 MiB), as a reference point: what the
    kernel gives a program that just floods both directions."""
    p = ctx.peer_bin("tcp-loopback-bw")
    if not os.access(p, os.X_OK):
        raise LaunchError("%s not built" % p)
    out = run_group([[p, "-b", str(16 * MiB), "-n", "10"]], base_env(), ctx.timeout)
    for line in out.splitlines():
        if line.startswith("best:"):
            return float(line.split()[1])
    raise LaunchError("no result from %s" % p)


def cpu_sample():
    """(busy seconds of the whole machine, steal seconds, CPU seconds of our
    finished children): the difference over a scenario tells how much other
    processes competed with the measurement."""
    hz = os.sysconf("SC_CLK_TCK")
    busy = steal = 0.0
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        busy = (v[0] + v[1] + v[2] + v[5] + v[6]) / hz
        steal = (v[7] if len(v) > 7 else 0) / hz
    except (OSError, ValueError, IndexError):
        pass
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy, steal, ru.ru_utime + ru.ru_stime, time.monotonic()


def foreign_load(before, after, ncpus):
    """Share of the machine (0..1) used by processes other than ours, and steal."""
    wall = after[3] - before[3]
    if wall <= 0:
        return 0.0, 0.0
    other = (after[0] - before[0]) - (after[2] - before[2])
    return max(0.0, other) / (wall * ncpus), (after[1] - before[1]) / (wall * ncpus)


def run_scenario(ctx, sc):
    args = ctx.args
    sizes = [s for s in sc.sizes if args.min <= s <= args.max]
    libs = scenario_libs(sc, args)
    check_binaries(ctx, libs)
    for lib in libs:
        if lib.missing:
            log("compare: [%s] %s: %s" % (sc.name, lib.label, lib.missing))
            if lib.peer:
                ctx.errors.append("%s: %s: %s" % (sc.name, lib.label, lib.missing))
    segs = segments(sc.iterations, sizes, args.iters_scale)
    raw = {lib.key: {s: [] for s in sizes} for lib in libs}
    failed = {}
    memcpy_raw = {1: [], len(ctx.cpus): []}
    if not os.access(ctx.peer_bin("memcpy-bw"), os.X_OK):
        log("compare: [%s] memcpy-bw: %s not built" % (sc.name, ctx.peer_bin("memcpy-bw")))
        ctx.errors.append("%s: memcpy-bw: %s not built" % (sc.name, ctx.peer_bin("memcpy-bw")))
        memcpy_raw = {}
    tcp_raw = []
    load_before = cpu_sample()
    for rep in range(args.repeats):
        if sc.name.startswith("tcp") and sc.nranks == 2:
            try:
                tcp_raw.append(run_tcp_flood(ctx))
            except LaunchError as e:
                log("compare: [%s] tcp-loopback-bw: %s" % (sc.name, e))
                ctx.errors.append("%s: tcp-loopback-bw: %s" % (sc.name, str(e).splitlines()[0]))
        for threads in memcpy_raw:
            try:
                memcpy_raw[threads].append(run_memcpy(ctx, threads))
            except LaunchError as e:
                log("compare: [%s] memcpy-bw: %s" % (sc.name, e))
                ctx.errors.append("%s: memcpy-bw: %s" % (sc.name, str(e).splitlines()[0]))
        for seg in segs:
            for lib in libs:
                if lib.missing or lib.key in failed:
                    continue
                t0 = time.monotonic()
                try:
                    got = launch(ctx, lib, sc, seg)
                except LaunchError as e:
                    failed[lib.key] = str(e)
                    log("compare: [%s] %s failed, dropped from this scenario: %s" % (sc.name, lib.label, e))
                    ctx.errors.append("%s: %s: %s" % (sc.name, lib.label, str(e).splitlines()[0]))
                    continue
                for s, row in got.items():
                    raw[lib.key][s].append(row)
                log("compare: [%s] rep %d/%d %-14s %s..%s  %.1fs" % (
                    sc.name, rep + 1, args.repeats, lib.label, fmt_size(seg[0]), fmt_size(seg[1]),
                    time.monotonic() - t0))
    other, steal = foreign_load(load_before, cpu_sample(), os.cpu_count() or 1)
    res = summarize(ctx, sc, libs, sizes, raw, failed, memcpy_raw)
    res["tcp_flood"] = statistics.median(tcp_raw) if tcp_raw else None
    res["other_load"] = other
    res["steal"] = steal
    if other > 0.05:
        log("compare: [%s] warning: other processes used %.0f%% of the machine during the measurement" % (
            sc.name, other * 100))
    return res


def placement_us(row, placement):
    if placement == "out":
        return row["oop_us"]
    if placement == "in":
        return row["ip_us"]
    vals = [v for v in (row["oop_us"], row["ip_us"]) if v]
    return min(vals) if vals else None


def summarize(ctx, sc, libs, sizes, raw, failed, memcpy_raw):
    placement = ctx.args.placement
    med = {}  # key -> size -> median us
    for lib in libs:
        med[lib.key] = {}
        for s in sizes:
            vals = [placement_us(r, placement) for r in raw[lib.key][s]]
            vals = [v for v in vals if v]
            med[lib.key][s] = statistics.median(vals) if vals else None
    columns = [lib for lib in libs]
    gloo = [lib for lib in libs if isinstance(lib, GlooLib)]
    best = {}
    if gloo:
        med["gloo-best"] = {}
        for s in sizes:
            cand = [(med[g.key][s], g) for g in gloo if med[g.key][s]]
            if cand:
                us, g = min(cand, key=lambda c: c[0])
                med["gloo-best"][s] = us
                best[s] = GLOO_SHORT[g.algo]
            else:
                med["gloo-best"][s] = None
        columns.insert(columns.index(gloo[-1]) + 1, Lib("gloo-best", "gloo-best"))
    memcpy = {}
    for threads, runs in memcpy_raw.items():
        if runs:
            memcpy[threads] = {
                "total_gbs": statistics.median(r["total_gbs"] for r in runs),
                "per_thread_gbs": [statistics.median(r["per_thread_gbs"][i] for r in runs
                                                     if i < len(r["per_thread_gbs"]))
                                   for i in range(threads)],
            }
    return {
        "scenario": sc, "libs": libs, "columns": columns, "sizes": sizes, "median_us": med, "best_gloo": best,
        "failed": failed, "memcpy": memcpy, "raw": raw,
        "bindings": {lib.label: lib.binding(sc, ctx) for lib in libs},
        "missing": {lib.label: lib.missing for lib in libs if lib.missing},
        "segments": segments(sc.iterations, sizes, ctx.args.iters_scale),
    }


# ---------------------------------------------------------------- reporting

def fmt_us(us):
    if us is None:
        return "n/a"
    if us >= 10000:
        return "%.0f" % us
    if us >= 100:
        return "%.1f" % us
    return "%.2f" % us


def fmt_bw(v):
    return "n/a" if v is None else "%.2f" % v


def fmt_ratio(a, b):
    if a is None or b is None or b == 0:
        return "n/a"
    return "%.2fx" % (a / b)


def table_rows(res):
    """(header, rows) for the busbw table and the time table."""
    sc = res["scenario"]
    med = res["median_us"]
    cols = res["columns"]
    peers = [c for c in cols if c.key != "gyre"]
    mem1 = res["memcpy"].get(1, {}).get("total_gbs")
    head = ["size", "gyre"]
    for p in peers:
        head += [p.label, "gyre/" + p.label]
    head.append("gyre/memcpy")
    tcp = res.get("tcp_flood")
    if tcp:
        head.append("gyre/tcp-flood")
    bw_rows = []
    for s in res["sizes"]:
        g = busbw(s, med["gyre"][s], sc.nranks)
        row = [fmt_size(s), fmt_bw(g)]
        for p in peers:
            v = busbw(s, med[p.key][s], sc.nranks)
            cell = fmt_bw(v)
            if p.key == "gloo-best" and s in res["best_gloo"]:
                cell += " (%s)" % res["best_gloo"][s]
            row += [cell, fmt_ratio(g, v)]
        row.append(fmt_ratio(g, mem1))
        if tcp:
            row.append(fmt_ratio(g, tcp))
        bw_rows.append(row)
    t_head = ["size"] + [c.label for c in cols]
    t_rows = [[fmt_size(s)] + [fmt_us(med[c.key][s]) for c in cols] for s in res["sizes"]]
    return head, bw_rows, t_head, t_rows


def memcpy_line(res):
    parts = []
    for threads, m in sorted(res["memcpy"].items()):
        if threads == 1:
            parts.append("1 thread %.2f GB/s" % m["total_gbs"])
        else:
            parts.append("%d threads %.2f GB/s total (%s per thread)" % (
                threads, m["total_gbs"], ", ".join("%.2f" % v for v in m["per_thread_gbs"])))
    return "; ".join(parts) if parts else "n/a (memcpy-bw failed)"


def text_table(head, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    lines = ["  ".join(str(h).rjust(w) for h, w in zip(head, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))
    return "\n".join(lines)


def md_table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(r) + " |")
    return "\n".join(lines)


PLACEMENT_TEXT = {"in": "in-place", "out": "out-of-place", "best": "best of in-place and out-of-place"}


def scenario_notes(res, ctx):
    sc = res["scenario"]
    notes = ["float32 sum, %s time; median of %d alternating launches per size; busbw in GB/s "
             "(algbw x 2(n-1)/n); gyre/X = gyre busbw / X busbw (>1: gyre faster)" % (
                 PLACEMENT_TEXT[ctx.args.placement], ctx.args.repeats),
             "gyre/memcpy = gyre busbw / single-thread memcpy bandwidth (%s buffer)" % fmt_size(ctx.args.memcpy_size),
             "memcpy-bw, same run: " + memcpy_line(res)]
    if res.get("tcp_flood"):
        notes.append("tcp-loopback-bw, same run: %.2f GB/s each way for a plain 16 MiB exchange in both "
                     "directions at once over one loopback socket (best of 256K/1M/4M writes), a reference "
                     "point rather than a limit: flooding keeps more data in flight, whose socket pages fall "
                     "out of cache; gyre/tcp-flood = gyre busbw / that" % res["tcp_flood"])
    notes.append("CPU used by other processes during this scenario: %.0f%% of the machine (steal %.0f%%)%s" % (
        res["other_load"] * 100, res["steal"] * 100,
        " -- numbers disturbed, rerun on a quiet machine" if res["other_load"] > 0.05 else ""))
    for label, how in res["bindings"].items():
        notes.append("launch %s: `%s`" % (label, how))
    notes.append("ARGS: -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -d float -o sum -c 1, one launch per size "
                 "range: %s" % "; ".join("%s..%s -n %d -w %d" % (fmt_size(g[0]), fmt_size(g[1]), g[4], g[5])
                                           for g in res["segments"]))
    if sc.oversubscribe:
        notes.append("%d ranks on %d cores: ranks are bound round-robin to cores, several ranks per core "
                     "(Open MPI: --bind-to core:overload-allowed)" % (sc.nranks, len(ctx.cpus)))
    for label, why in res["missing"].items():
        notes.append("%s: %s" % (label, why))
    for key, why in res["failed"].items():
        notes.append("%s FAILED: %s" % (key, why.splitlines()[0]))
    if res["best_gloo"]:
        notes.append("gloo-best: per size the fastest of %s (short names: %s)" % (
            ", ".join(ctx.args.gloo_algos), ", ".join("%s=%s" % (GLOO_SHORT[a], a) for a in ctx.args.gloo_algos)))
    return notes


def evaluate_targets(results):
    out = []
    for scn, size, kind, peer, thr, text in TARGETS:
        res = results.get(scn)
        if res is None or size not in res["sizes"]:
            out.append((text, "n/a", "scenario or size not run"))
            continue
        med = res["median_us"]
        g = med.get("gyre", {}).get(size)
        p = med.get(peer, {}).get(size)
        if p is None:
            out.append((text, "n/a", "%s has no result" % peer))
            continue
        if g is None:
            out.append((text, "n/a", "gyre missing; %s %s us" % (peer, fmt_us(p))))
            continue
        if kind == "latency":
            ok = g <= p
            detail = "gyre %s us, %s %s us" % (fmt_us(g), peer, fmt_us(p))
        else:
            ratio = p / g  # busbw ratio = inverse time ratio
            ok = ratio >= thr if kind == "ratio" else ratio > thr
            detail = "gyre/%s = %.2fx (gyre %s us, %s %s us)" % (peer, ratio, fmt_us(g), peer, fmt_us(p))
        out.append((text, "PASS" if ok else "FAIL", detail))
    return out


def cmd_output(cmd):
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=30,
                           env=dict(os.environ, GIT_OPTIONAL_LOCKS="0"))
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def machine_info(ctx):
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass

    def pkg(name):
        return cmd_output(["dpkg-query", "-W", "-f", "${Version}", name]) or "not installed"

    rev = cmd_output(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"])
    if rev is None:
        rev = "no commit"
    dirty = cmd_output(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"])
    if dirty:
        rev += " (+ uncommitted changes)"
    return [
        ("CPU", "%s, %d cores online (%d usable by this run: %s)" % (
            model, os.cpu_count() or 0, len(ctx.cpus), ",".join(map(str, ctx.cpus)))),
        ("memory", "%.1f GiB" % (mem / GiB) if mem else "unknown"),
        ("kernel", "%s %s" % (platform.system(), platform.release())),
        ("Open MPI", "%s (openmpi-bin)" % pkg("openmpi-bin")),
        ("Gloo", "%s (libgloo-dev)" % pkg("libgloo-dev")),
        ("UCX", "%s (libucx0)" % pkg("libucx0")),
        ("gyre", rev),
        ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")),
        ("command", shlex.join([sys.executable] + sys.argv)),
    ]


def print_report(ctx, results, targets):
    for n in ctx.notes:
        print("note: " + n)
    for name, res in results.items():
        sc = res["scenario"]
        print()
        print("== %s: %s" % (name, sc.title))
        for n in scenario_notes(res, ctx):
            print("   " + n.replace("`", ""))
        head, rows, t_head, t_rows = table_rows(res)
        print()
        print("busbw (GB/s)")
        print(text_table(head, rows))
        print()
        print("time (us)")
        print(text_table(t_head, t_rows))
    print()
    print("== targets (%s)" % PLACEMENT_TEXT[ctx.args.placement])
    w = max(len(t[0]) for t in targets)
    for text, status, detail in targets:
        print("  %-4s  %s  %s" % (status, text.ljust(w), detail))
    if ctx.errors:
        print()
        print("== problems")
        for e in ctx.errors:
            print("  " + e)


def write_markdown(path, ctx, results, targets, info):
    out = ["# gyre allreduce comparison", ""]
    out += ["| | |", "|---|---|"]
    for k, v in info:
        out.append("| %s | %s |" % (k, v.replace("|", "\\|") if k != "command" else "`%s`" % v))
    if ctx.notes:
        out += [""] + ["Note: " + n for n in ctx.notes]
    for name, res in results.items():
        sc = res["scenario"]
        out += ["", "## %s" % name, "", sc.title + ".", ""]
        out += ["- " + n for n in scenario_notes(res, ctx)]
        head, rows, t_head, t_rows = table_rows(res)
        out += ["", "busbw (GB/s) and ratios:", "", md_table(head, rows), "", "time (us):", "",
                md_table(t_head, t_rows)]
    out += ["", "## targets (%s)" % PLACEMENT_TEXT[ctx.args.placement], "",
            "| target | status | measured |", "|---|---|---|"]
    for text, status, detail in targets:
        out.append("| %s | %s | %s |" % (text, status, detail))
    if ctx.errors:
        out += ["", "## problems", ""] + ["- " + e.replace("\n", " ") for e in ctx.errors]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def write_json(path, ctx, results, targets, info):
    data = {"machine": dict(info), "placement": ctx.args.placement, "repeats": ctx.args.repeats,
            "targets": [{"target": t, "status": s, "detail": d} for t, s, d in targets], "scenarios": {}}
    for name, res in results.items():
        data["scenarios"][name] = {
            "nranks": res["scenario"].nranks,
            "median_us": {k: {str(s): v for s, v in d.items()} for k, d in res["median_us"].items()},
            "raw": {k: {str(s): v for s, v in d.items()} for k, d in res["raw"].items()},
            "best_gloo": {str(s): v for s, v in res["best_gloo"].items()},
            "memcpy": {str(t): m for t, m in res["memcpy"].items()},
            "tcp_flood_gbs": res.get("tcp_flood"),
            "failed": res["failed"], "missing": res["missing"], "bindings": res["bindings"],
        }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS) + ["all"],
                    help="scenario to run (repeatable; default: all)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating launches per library (>= 3 for a "
                    "report; fewer only for a smoke test), default 3")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"), help="CMake build directory (default ./build)")
    ap.add_argument("--no-build", action="store_true", help="do not run cmake --build")
    ap.add_argument("--no-install", action="store_true",
                    help="do not run tools/setup.sh (which installs the peers from Debian packages)")
    ap.add_argument("--peer-dir", help="where the peer drivers are (default BUILD/bench/compare)")
    ap.add_argument("--gyrerun", help="gyrerun launcher (default BUILD/tools/gyrerun)")
    ap.add_argument("--gyre-bench", help="gyre benchmark (default BUILD/bench/gyre-allreduce-perf)")
    ap.add_argument("--min", type=parse_size, default=0, help="drop sizes below this")
    ap.add_argument("--max", type=parse_size, default=256 * MiB, help="drop sizes above this (default 256M)")
    ap.add_argument("--placement", choices=["in", "out", "best"], default="in",
                    help="which column to compare: in-place (default: the mode every peer implements natively; "
                    "Gloo's algorithm classes have no out-of-place form), out-of-place, or the faster of the two")
    ap.add_argument("--gloo-algos", default="ring,ring_chunked,halving_doubling",
                    help="Gloo algorithms for tcp-2 (comma list of %s)" % ", ".join(GLOO_ALGOS))
    ap.add_argument("--with-ucx", action="store_true", help="add Open MPI's UCX path (pml ucx) as a peer")
    ap.add_argument("--mpirun-args", default="", help="extra mpirun arguments for every Open MPI launch")
    ap.add_argument("--iters-scale", type=float, default=1.0, help="scale the per-size iteration table")
    ap.add_argument("--memcpy-size", type=parse_size, default=256 * MiB, help="memcpy-bw buffer (default 256M)")
    ap.add_argument("--timeout", type=float, default=300, help="hard limit per launch in seconds (default 300)")
    ap.add_argument("--markdown", metavar="FILE", help="also write a markdown report")
    ap.add_argument("--json", metavar="FILE", help="also write the raw and median numbers as JSON")
    args = ap.parse_args()

    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    args.gloo_algos = [a for a in args.gloo_algos.split(",") if a]
    bad = [a for a in args.gloo_algos if a not in GLOO_ALGOS]
    if bad or not args.gloo_algos:
        ap.error("unknown Gloo algorithm(s): %s" % ", ".join(bad))
    names = args.scenario or ["all"]
    names = list(SCENARIOS) if "all" in names else list(dict.fromkeys(names))

    ctx = Context(args)
    if args.repeats < 3:
        ctx.notes.append("--repeats %d: fewer than 3 launches per size, not for a report" % args.repeats)
        log("compare: warning: --repeats %d (< 3) is a smoke test, not a measurement" % args.repeats)
    install_peers(ctx)
    build(ctx)
    info = machine_info(ctx)
    results = {}
    try:
        for name in names:
            results[name] = run_scenario(ctx, SCENARIOS[name])
    except KeyboardInterrupt:
        log("compare: interrupted")
        ctx.cleanup()
        return 130
    targets = evaluate_targets(results)
    print_report(ctx, results, targets)
    if args.markdown:
        write_markdown(args.markdown, ctx, results, targets, info)
        log("compare: wrote %s" % args.markdown)
    if args.json:
        write_json(args.json, ctx, results, targets, info)
        log("compare: wrote %s" % args.json)
    return 1 if ctx.errors else 0


if __name__ == "__main__":
    sys.exit(main())
