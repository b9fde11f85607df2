#!/usr/bin/python3
"""Side-by-side comparison: gyre against Open MPI and Gloo for every
collective they share, and against the machine's memcpy bandwidth, measured
in the same run.

Every library prints the nccl-tests table (gyre's gyre-allreduce-perf and
gyre-bench, and the peer drivers of bench/compare/), so one parser reads them
all. Launches alternate between libraries (A B C A B C ...) and each size's
time is the median over --repeats launches. Each scenario prints one table:
a row per collective and size, busbw per library, gyre / each peer and
gyre / the best peer; --plot draws every series in one SVG through
`gyre-bench plot`.

    /usr/bin/python3 tools/compare.py                       # AllReduce, all scenarios, targets
    /usr/bin/python3 tools/compare.py --scenario shm-2 --repeats 1
    /usr/bin/python3 tools/compare.py --with-ucx --markdown out/compare.md
    /usr/bin/python3 tools/compare.py --collectives all --scenario shm-2,tcp-2 --with-ucx --plot out/all.svg
    /usr/bin/python3 tools/compare.py --collectives all --scenario shm-2,shm-4 --gyre-algos all --peers none
    /usr/bin/python3 tools/compare.py --collectives allreduce,alltoall --scenario ucxsm-2,ucxsm-4

Collectives and their peers (OMPI = Open MPI's default path and, with
--with-ucx, its UCX path; Gloo over TCP only, so in tcp-N scenarios):

    allreduce      OMPI (mpi-allreduce-perf), Gloo ring / ring_chunked / halving_doubling
    alltoall       OMPI (mpi-collective-perf), Gloo gloo::alltoall
    allgather      OMPI
    reducescatter  OMPI (MPI_Reduce_scatter_block)
    alltoallv      OMPI (--skew K, default 8)
    broadcast      OMPI
    reduce         OMPI

--gyre-algos adds a gyre column per fixed algorithm (GYRE_ALGO) next to the
tuner's choice, and the ratio of the choice to the best fixed one.

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
import shutil
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

PEER_TARGETS = ["mpi-allreduce-perf", "mpi-collective-perf", "gloo-allreduce-perf", "memcpy-bw", "tcp-loopback-bw"]
GYRE_TARGETS = ["gyre-allreduce-perf", "gyre-bench", "gyrerun"]

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
              "allreduce_ring": "aring", "allreduce_bcube": "bcube", "alltoall": "a2a"}


def factor_allreduce(n):
    return 2.0 * (n - 1) / n if n > 1 else 1.0


def factor_gather(n):
    return (n - 1) / n if n > 1 else 1.0


def factor_one(n):
    return 1.0


class Collective:
    """What the tool knows of a collective: nccl-tests' bus factor, the row
    shape the drivers share (a row's size is its larger buffer; rows too small
    to give each rank an element are skipped by every driver), and which
    peers implement it."""

    def __init__(self, name, factor, factor_text, shape, mpi_driver, gloo, in_place, reduces, algos):
        self.name = name
        self.factor = factor
        self.factor_text = factor_text
        self.shape = shape  # "same", "per_rank", "alltoallv"
        self.mpi_driver = mpi_driver  # [binary, args...] before the flags
        self.gloo = gloo  # Gloo variants: list of --algo names (allreduce) or ["alltoall"]
        self.in_place = in_place
        self.reduces = reduces
        self.algos = algos  # gyre's fixed algorithms (GYRE_ALGO names); "direct" needs shared memory

    def row_bytes(self, size, nranks, skew):
        """The size the drivers print for a requested size; 0 when they skip it."""
        elems = size // 4
        if self.shape == "per_rank":
            return (elems // nranks) * nranks * 4
        if self.shape == "alltoallv":
            parts = nranks - 1 + skew
            return (elems // parts) * parts * 4
        return elems * 4


COLLECTIVES = {c.name: c for c in [
    Collective("allreduce", factor_allreduce, "2(n-1)/n", "same", ["mpi-allreduce-perf"],
               ["ring", "ring_chunked", "halving_doubling"], True, True,
               ["ring", "recursive_doubling", "rabenseifner", "direct"]),
    Collective("allgather", factor_gather, "(n-1)/n", "per_rank", ["mpi-collective-perf", "allgather"], [], True,
               False, ["ring", "bruck", "recursive_doubling", "direct"]),
    Collective("reducescatter", factor_gather, "(n-1)/n", "per_rank", ["mpi-collective-perf", "reducescatter"], [],
               True, True, ["ring", "recursive_halving", "direct"]),
    Collective("alltoall", factor_gather, "(n-1)/n", "per_rank", ["mpi-collective-perf", "alltoall"], ["alltoall"],
               True, False, ["pairwise", "bruck", "direct"]),
    Collective("alltoallv", factor_gather, "(n-1)/n", "alltoallv", ["mpi-collective-perf", "alltoallv"], [], False,
               False, []),
    Collective("broadcast", factor_one, "1", "same", ["mpi-collective-perf", "broadcast"], [], True, False,
               ["chain", "binomial_tree", "direct"]),
    Collective("reduce", factor_one, "1", "same", ["mpi-collective-perf", "reduce"], [], True, True,
               ["chain", "binomial_tree"]),
]}
# What the issue asks to compare with the peers, in this order.
PEER_COLLECTIVES = ["allreduce", "alltoall", "allgather", "reducescatter"]


def sweep(lo, hi, factor):
    out = []
    s = lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


class Scenario:
    def __init__(self, name, nranks, sizes, transport, title, oversubscribe=False, ucx_wire="tcp"):
        self.name = name
        self.iterations = ITERATIONS_SHM if transport == "shm" or ucx_wire == "sm" else ITERATIONS_TCP
        self.nranks = nranks
        self.sizes = sorted(set(sizes))
        self.transport = transport  # GYRE_TRANSPORT
        self.title = title
        self.oversubscribe = oversubscribe
        # ucx scenarios: the UCX wire both libraries are given (tcp: UCX's
        # tcp on lo, against gyre's TCP; sm: UCX's shared memory, against
        # gyre's shm).
        self.ucx_wire = ucx_wire


# The requested sweeps are factor 4 from 8 B, which only hits odd powers of
# two; the target sizes (16 MiB, 64 MiB) and the 256 MiB end are added.
FULL_SWEEP = sweep(8, 256 * MiB, 4) + [16 * MiB, 64 * MiB, 256 * MiB]
SCENARIOS = {
    "shm-2": Scenario("shm-2", 2, FULL_SWEEP, "shm",
                      "2 ranks, shared memory: gyre (GYRE_TRANSPORT=shm) vs Open MPI default path "
                      "(pml ob1 + btl vader)"),
    "tcp-2": Scenario("tcp-2", 2, FULL_SWEEP, "tcp",
                      "2 ranks, TCP over loopback: gyre (GYRE_TRANSPORT=tcp) vs Gloo (tcp transport, "
                      "127.0.0.1) vs Open MPI (btl tcp,self on lo, pml ob1)"),
    "shm-4-oversub": Scenario("shm-4-oversub", 4, sweep(1 * MiB, 64 * MiB, 4) + [16 * MiB], "shm",
                              "4 ranks on the machine's cores, oversubscribed: gyre (GYRE_TRANSPORT=shm) "
                              "vs Open MPI default path", oversubscribe=True),
}


def scenario_by_name(name):
    """A named scenario, or shm-N / tcp-N / ucx-N / ucxsm-N: N ranks over the
    full sweep (ucx-N and ucxsm-N: 8 B to 64 MiB)."""
    if name in SCENARIOS:
        return SCENARIOS[name]
    m = re.fullmatch(r"(shm|tcp|ucx|ucxsm)-(\d+)", name)
    if not m or int(m.group(2)) < 2:
        raise argparse.ArgumentTypeError("unknown scenario %r (%s, or shm-N / tcp-N / ucx-N / ucxsm-N with N >= 2)"
                                         % (name, ", ".join(SCENARIOS)))
    transport, n = m.group(1), int(m.group(2))
    if transport in ("ucx", "ucxsm"):
        # The transport issue's bar: gyre over UCX against Open MPI's pml ucx
        # over the same UCX wire, and against gyre's own transport of that
        # kind: UCX's tcp on lo against gyre's TCP (ucx-N), UCX's shared
        # memory against gyre's shm (ucxsm-N).
        wire = "sm" if transport == "ucxsm" else "tcp"
        over = ("UCX's shared memory", "UCX_TLS=sm,self", "shm") if wire == "sm" else \
            ("UCX", "UCX_TLS=tcp,self on lo", "TCP")
        return Scenario(name, n, sweep(8, 64 * MiB, 8) + [64 * MiB], "ucx",
                        "%d ranks over %s: gyre (GYRE_TRANSPORT=ucx) vs Open MPI pml ucx, both %s, vs gyre's own %s"
                        % ((n,) + over), ucx_wire=wire)
    title = ("%d ranks, shared memory: gyre (GYRE_TRANSPORT=shm) vs Open MPI default path" % n if transport == "shm"
             else "%d ranks, TCP over loopback: gyre (GYRE_TRANSPORT=tcp) vs Gloo vs Open MPI (btl tcp,self on lo)"
             % n)
    return Scenario(name, n, FULL_SWEEP, transport, title)


# (scenario, size, kind, peer, threshold, text); AllReduce only.
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
        if len(tok) == 12 and tok[9:] == ["N/A"] * 3:
            tok.append("N/A")  # gyre-bench leaves #wrong blank where a collective has no in-place form
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


def busbw(size, us, factor):
    """GB/s as nccl-tests defines it: size / time x the collective's bus factor."""
    if not us:
        return None
    return size / us / 1e3 * factor


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
    """One column of a scenario: a way to launch an nccl-tests style table
    of one collective."""

    library = "gyre"  # settings.library of its gyre-bench/1 series

    def __init__(self, key, label, peer=True):
        self.key = key
        self.label = label
        self.peer = peer
        self.missing = None  # why it cannot run (set when a binary is absent)

    def commands(self, sc, coll, args_list, ctx):
        raise NotImplementedError

    def binding(self, sc, coll, ctx):
        raise NotImplementedError

    def binaries(self, coll, ctx):
        return []


def mpirun_binding(sc, ctx):
    if sc.nranks <= len(ctx.cpus) and not sc.oversubscribe:
        return ["--map-by", "core", "--bind-to", "core"]
    # More ranks than cores: round-robin over the cores, several ranks per core.
    return ["--oversubscribe", "--map-by", "core:OVERSUBSCRIBE", "--bind-to", "core:overload-allowed"]


def skew_args(coll, ctx):
    return ["--skew", str(ctx.args.skew)] if coll.shape == "alltoallv" else []


class MpiLib(Lib):
    library = "Open MPI"

    def __init__(self, key, label, mca, env=None):
        super().__init__(key, label)
        self.mca = mca
        self.env = env or {}

    def binaries(self, coll, ctx):
        return [ctx.peer_bin(coll.mpi_driver[0])]

    def commands(self, sc, coll, args_list, ctx):
        cmd = ["mpirun", "--allow-run-as-root", "-n", str(sc.nranks)] + mpirun_binding(sc, ctx) + self.mca
        for k, v in self.env.items():
            cmd += ["-x", "%s=%s" % (k, v)]
        cmd += ctx.mpirun_args + [ctx.peer_bin(coll.mpi_driver[0])] + coll.mpi_driver[1:] + args_list
        return [cmd + skew_args(coll, ctx)], {}

    def binding(self, sc, coll, ctx):
        cmds, _ = self.commands(sc, coll, ["ARGS"], ctx)
        return shlex.join(cmds[0]).replace(ctx.peer_dir + "/", "")


class GlooLib(Lib):
    library = "Gloo"

    def __init__(self, algo):
        # Keys as earlier result files have them (gloo-ring_chunked); short labels.
        super().__init__("gloo-" + algo, "gloo-" + GLOO_SHORT[algo])
        self.algo = algo  # an AllReduce --algo, or "alltoall"

    def binaries(self, coll, ctx):
        return [ctx.peer_bin("gloo-allreduce-perf")]

    def flags(self):
        if self.algo == "alltoall":
            return ["--collective", "alltoall"]
        return ["--algo", self.algo]

    def commands(self, sc, coll, args_list, ctx):
        store = tempfile.mkdtemp(prefix="gyre-compare-gloo-")
        ctx.tempdirs.append(store)
        cmds = []
        for r in range(sc.nranks):
            cpu = ctx.cpus[r % len(ctx.cpus)]
            cmds.append(["taskset", "-c", str(cpu), ctx.peer_bin("gloo-allreduce-perf")] + self.flags() +
                        ["--rank", str(r), "--size", str(sc.nranks), "--store-dir", store,
                         "--timeout", str(int(ctx.timeout))] + args_list)
        return cmds, {}

    def binding(self, sc, coll, ctx):
        return ("for R in 0..%d: taskset -c CPU(R mod %d) gloo-allreduce-perf %s --rank R --size %d "
                "--store-dir FRESH_TMPDIR ARGS" % (sc.nranks - 1, len(ctx.cpus), " ".join(self.flags()),
                                                   sc.nranks))


class GyreLib(Lib):
    """gyre under gyrerun: gyre-allreduce-perf for AllReduce, gyre-bench
    COLLECTIVE for the others; with `algo`, that algorithm forced through
    GYRE_ALGO (else the tuner's choice)."""

    def __init__(self, transport, algo=None, register=False, key=None, ucx_env=None):
        name = key or ("gyre:" + algo if algo else "gyre")
        super().__init__(name, name, peer=False)
        self.transport = transport
        self.ucx_env = ucx_env or UCX_TCP_ENV
        self.algo = algo
        self.register = register  # gyre-bench -R 1: buffers from gyreMemAlloc

    def program(self, coll, ctx):
        if coll.name == "allreduce" and not self.register:
            return [ctx.gyre_allreduce_perf]
        return [ctx.gyre_bench, coll.name] + (["-R", "1"] if self.register else [])

    def binaries(self, coll, ctx):
        return [ctx.gyrerun, self.program(coll, ctx)[0]]

    def env(self, coll):
        env = {"GYRE_TRANSPORT": self.transport}
        if self.transport == "ucx":
            env.update(self.ucx_env)  # the wire Open MPI's UCX is given
        if self.algo:
            env["GYRE_ALGO"] = "%s:%s" % (coll.name, self.algo)
        return env

    def commands(self, sc, coll, args_list, ctx):
        cmd = [ctx.gyrerun, "-n", str(sc.nranks), "--bind", "core", "--"] + self.program(coll, ctx) + args_list
        return [cmd + skew_args(coll, ctx)], self.env(coll)

    def binding(self, sc, coll, ctx):
        prog = [os.path.basename(p) if i == 0 else p for i, p in enumerate(self.program(coll, ctx))]
        env = " ".join("%s=%s" % kv for kv in self.env(coll).items())
        return "%s gyrerun -n %d --bind core -- %s ARGS%s" % (
            env, sc.nranks, " ".join(prog), "".join(" " + a for a in skew_args(coll, ctx)))


UCX_MCA = ["--mca", "pml", "ucx", "--mca", "opal_common_ucx_tls", "any",
           "--mca", "opal_common_ucx_devices", "any"]
# Both UCX paths on loopback over UCX's tcp (gyre's would take UCX's shared
# memory on one host otherwise).
UCX_TCP_ENV = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"}
# Or both over UCX's shared memory (ucxsm-N).
UCX_SM_ENV = {"UCX_TLS": "sm,self"}


def ucx_env(sc):
    return UCX_SM_ENV if sc.ucx_wire == "sm" else UCX_TCP_ENV


def collective_libs(sc, coll, args):
    """The columns of one collective in one scenario, gyre first."""
    env = ucx_env(sc)
    if args.gyre_memalloc:
        # The main series with gyreMemAlloc buffers, and plain malloc'd ones beside it.
        libs = [GyreLib(sc.transport, register=True, ucx_env=env),
                GyreLib(sc.transport, key="gyre-malloc", ucx_env=env)]
    else:
        libs = [GyreLib(sc.transport, ucx_env=env)]
    for algo in args.gyre_algos.get(coll.name, []):
        if algo == "direct" and sc.transport != "shm":
            continue  # the direct algorithms work on shared memory only
        libs.append(GyreLib(sc.transport, algo, ucx_env=env))
    if "gloo" in args.peers and sc.transport == "tcp":
        libs += [GlooLib(a) for a in (args.gloo_algos if coll.name == "allreduce" else coll.gloo)]
    if sc.transport == "ucx":
        own = "shm" if sc.ucx_wire == "sm" else "tcp"
        libs.append(GyreLib(own, key="gyre-" + own))
    if "ompi" in args.peers:
        if sc.transport == "ucx":
            libs.append(MpiLib("ompi-ucx", "ompi-ucx-" + sc.ucx_wire, UCX_MCA, env))
        elif sc.transport == "tcp":
            libs.append(MpiLib("ompi-tcp", "ompi-tcp", ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                                                        "--mca", "btl_tcp_if_include", "lo"]))
            if args.with_ucx:
                libs.append(MpiLib("ompi-ucx", "ompi-ucx-tcp", UCX_MCA, UCX_TCP_ENV))
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
        self.gyre_allreduce_perf = os.path.abspath(
            args.gyre_allreduce_perf or os.path.join(self.build, "bench", "gyre-allreduce-perf"))
        self.gyre_bench = os.path.abspath(args.gyre_bench or os.path.join(self.build, "bench", "gyre-bench"))
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
            shutil.rmtree(d, ignore_errors=True)
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


def check_binaries(ctx, coll, libs):
    for lib in libs:
        absent = [p for p in lib.binaries(coll, ctx) if not os.access(p, os.X_OK)]
        if absent:
            lib.missing = "%s not built" % ", ".join(absent)


# ---------------------------------------------------------------- running

def launch(ctx, lib, sc, coll, seg, sizes):
    """One launch of one segment; {size: row} for the segment's sizes, each
    as the drivers print it (coll.row_bytes of the requested size), which
    are among `sizes`."""
    lo, hi, factor, seg_sizes, iters, warmup = seg
    cmds, extra_env = lib.commands(sc, coll, driver_args(lo, hi, factor, iters, warmup), ctx)
    env = base_env()
    env.update(extra_env)
    try:
        text = run_group(cmds, env, ctx.timeout)
    finally:
        ctx.cleanup()
    rows = parse_table(text)
    got = {}
    for asked in seg_sizes:
        s = coll.row_bytes(asked, sc.nranks, ctx.args.skew)
        if s not in sizes:
            continue
        if s not in rows:
            raise LaunchError("size %d (asked for %d) missing from the output of %s" % (
                s, asked, shlex.join(cmds[0])))
        got[s] = rows[s]
        for k in ("oop_wrong", "ip_wrong"):
            if rows[s][k]:
                raise LaunchError("%d wrong elements at size %d (%s) from %s" % (
                    rows[s][k], s, k, shlex.join(cmds[0])))
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


def placement_of(coll, args):
    """in / out / best for this collective: --placement, or by default
    in-place for AllReduce (the mode Gloo's AllReduce classes have) and
    out-of-place for the rest (the one every library has: Gloo's AllToAll and
    every AllToAllv are out of place only)."""
    if args.placement != "auto":
        return args.placement
    return "in" if coll.name == "allreduce" else "out"


def run_scenario(ctx, sc):
    """Every collective of the run in one scenario. Launches alternate: per
    repeat, per collective, per size segment, one launch of each library."""
    args = ctx.args
    sizes = [s for s in sc.sizes if args.min <= s <= args.max]
    segs = segments(sc.iterations, sizes, args.iters_scale)
    colls = {}
    for name in args.collectives:
        coll = COLLECTIVES[name]
        libs = collective_libs(sc, coll, args)
        check_binaries(ctx, coll, libs)
        for lib in libs:
            if lib.missing:
                log("compare: [%s %s] %s: %s" % (sc.name, name, lib.label, lib.missing))
                ctx.errors.append("%s %s: %s: %s" % (sc.name, name, lib.label, lib.missing))
        # The sizes as the drivers print them: the requested ones, rounded down
        # to the collective's shape (to a multiple of nranks elements, say);
        # rows too small to give each rank an element are left out.
        csizes = sorted({coll.row_bytes(s, sc.nranks, args.skew) for s in sizes} - {0})
        colls[name] = {"coll": coll, "libs": libs, "sizes": csizes,
                       "raw": {lib.key: {s: [] for s in csizes} for lib in libs}, "failed": {}}
    memcpy_raw = {1: [], len(ctx.cpus): []}
    if not os.access(ctx.peer_bin("memcpy-bw"), os.X_OK):
        log("compare: [%s] memcpy-bw: %s not built" % (sc.name, ctx.peer_bin("memcpy-bw")))
        ctx.errors.append("%s: memcpy-bw: %s not built" % (sc.name, ctx.peer_bin("memcpy-bw")))
        memcpy_raw = {}
    tcp_raw = []
    load_before = cpu_sample()
    for rep in range(args.repeats):
        if sc.transport == "tcp" and sc.nranks == 2:
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
        for name, c in colls.items():
            for seg in segs:
                if not any(c["coll"].row_bytes(s, sc.nranks, args.skew) in c["sizes"] for s in seg[3]):
                    continue
                for lib in c["libs"]:
                    if lib.missing or lib.key in c["failed"]:
                        continue
                    t0 = time.monotonic()
                    try:
                        got = launch(ctx, lib, sc, c["coll"], seg, c["sizes"])
                    except LaunchError as e:
                        c["failed"][lib.key] = str(e)
                        log("compare: [%s %s] %s failed, dropped from this collective in this scenario: %s" % (
                            sc.name, name, lib.label, e))
                        ctx.errors.append("%s %s: %s: %s" % (sc.name, name, lib.label, str(e).splitlines()[0]))
                        continue
                    for s, row in got.items():
                        c["raw"][lib.key][s].append(row)
                    log("compare: [%s] rep %d/%d %-13s %-14s %s..%s  %.1fs" % (
                        sc.name, rep + 1, args.repeats, name, lib.label, fmt_size(seg[0]), fmt_size(seg[1]),
                        time.monotonic() - t0))
    other, steal = foreign_load(load_before, cpu_sample(), os.cpu_count() or 1)
    res = {
        "scenario": sc, "sizes": sizes, "segments": segs,
        "colls": {name: summarize(ctx, sc, c) for name, c in colls.items()},
        "memcpy": summarize_memcpy(memcpy_raw),
        "tcp_flood": statistics.median(tcp_raw) if tcp_raw else None,
        "other_load": other, "steal": steal,
    }
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


def summarize(ctx, sc, c):
    """Medians per library and size, and the derived columns: gloo-best (the
    fastest Gloo variant per size)."""
    coll, libs, sizes = c["coll"], c["libs"], c["sizes"]
    placement = placement_of(coll, ctx.args)
    med = {}  # key -> size -> median us
    for lib in libs:
        med[lib.key] = {}
        for s in sizes:
            vals = [placement_us(r, placement) for r in c["raw"][lib.key][s]]
            vals = [v for v in vals if v]
            med[lib.key][s] = statistics.median(vals) if vals else None
    columns = list(libs)
    gloo = [lib for lib in libs if isinstance(lib, GlooLib)]
    best = {}
    if gloo:
        med["gloo-best"] = {}
        for s in sizes:
            cand = [(med[g.key][s], g) for g in gloo if med[g.key][s]]
            if cand:
                us, g = min(cand, key=lambda x: x[0])
                med["gloo-best"][s] = us
                best[s] = GLOO_SHORT[g.algo]
            else:
                med["gloo-best"][s] = None
        pseudo = Lib("gloo-best", "gloo-best")
        if len(gloo) == 1:
            columns.remove(gloo[0])  # one variant: gloo-best is that variant
            columns.insert(libs.index(gloo[0]), pseudo)
        else:
            columns.insert(columns.index(gloo[-1]) + 1, pseudo)
    return {
        "coll": coll, "libs": libs, "columns": columns, "sizes": sizes, "median_us": med, "best_gloo": best,
        "failed": c["failed"], "raw": c["raw"], "placement": placement,
        "single_gloo": len(gloo) == 1,
        "bindings": {lib.label: lib.binding(sc, coll, ctx) for lib in libs},
        "missing": {lib.label: lib.missing for lib in libs if lib.missing},
    }


def summarize_memcpy(memcpy_raw):
    memcpy = {}
    for threads, runs in memcpy_raw.items():
        if runs:
            memcpy[threads] = {
                "total_gbs": statistics.median(r["total_gbs"] for r in runs),
                "per_thread_gbs": [statistics.median(r["per_thread_gbs"][i] for r in runs
                                                     if i < len(r["per_thread_gbs"]))
                                   for i in range(threads)],
            }
    return memcpy


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
    if v is None:
        return "n/a"
    return "%.2f" % v if v >= 0.1 else "%.2g" % v  # two significant digits for latency-bound sizes


def fmt_ratio(a, b):
    if a is None or b is None or b == 0:
        return "n/a"
    return "%.2fx" % (a / b)


ABSENT = "-"  # a library that does not have this collective (or this column)


def peer_rank(key):
    """Canonical order of the peer columns: gyre with malloc'd buffers, Gloo's
    variants, gloo-best, Open MPI."""
    if key in ("gyre-malloc", "gyre-tcp", "gyre-shm"):
        return (-1, 0)
    gloo = ["gloo-" + a for a in GLOO_ALGOS + ["alltoall"]]
    if key in gloo:
        return (0, gloo.index(key))
    if key == "gloo-best":
        return (1, 0)
    return (2, ["ompi", "ompi-tcp", "ompi-ucx"].index(key) if key in ("ompi", "ompi-tcp", "ompi-ucx") else 9)


def scenario_columns(res):
    """The union of the collectives' columns: (gyre algorithm columns, peer
    columns) as (key, label) lists."""
    algos, peers = [], []
    for c in res["colls"].values():
        for col in c["columns"]:
            if col.key == "gyre":
                continue
            # gyre-malloc gets a ratio column like a peer, but is never the best peer.
            target = algos if isinstance(col, GyreLib) and col.algo else peers
            if col.key not in [k for k, _ in target]:
                target.append((col.key, col.label))
    peers.sort(key=lambda kl: peer_rank(kl[0]))
    return algos, peers


def best_of(c, libs, s, f):
    """(busbw, label) of the fastest of `libs` at size s (bus factor f), or (None, None)."""
    cand = [(busbw(s, c["median_us"][lib.key][s], f), lib.label) for lib in libs]
    cand = [x for x in cand if x[0] is not None]
    return max(cand) if cand else (None, None)


def mem_limit(res):
    """The memory-traffic limit of a collective that moves each rank's buffer
    once (AllGather, ReduceScatter, AllToAll(v)): every byte of each rank's
    input read once and of its output written once, at the all-threads memcpy
    rate shared by the ranks, as busbw: (memcpy all threads / n) x (n-1)/n."""
    n = res["scenario"].nranks
    multi = [m["total_gbs"] for t, m in res["memcpy"].items() if t > 1] or \
        [m["total_gbs"] for m in res["memcpy"].values()]
    return multi[0] / n * factor_gather(n) if multi else None


def table_rows(res):
    """(header, rows) of the busbw-and-ratios table and of the time table:
    one row per collective and size."""
    sc = res["scenario"]
    algos, peers = scenario_columns(res)
    mem1 = res["memcpy"].get(1, {}).get("total_gbs")
    tcp = res.get("tcp_flood")
    head = ["collective", "size", "gyre"] + [label for _, label in algos]
    if algos:
        head.append("gyre/best-fixed")
    for _, label in peers:
        head += [label, "gyre/" + label]
    if peers:
        head.append("gyre/best-peer")
    head.append("gyre/memcpy")
    memlim = mem_limit(res)
    if memlim is not None and any(c["coll"].factor is factor_gather for c in res["colls"].values()):
        head.append("gyre/mem-limit")
    else:
        memlim = None
    if tcp:
        head.append("gyre/tcp-flood")
    t_head = ["collective", "size", "gyre"] + [label for _, label in algos] + [label for _, label in peers]
    bw_rows, t_rows = [], []
    for name, c in res["colls"].items():
        f = c["coll"].factor(sc.nranks)
        med = c["median_us"]
        keys = {col.key for col in c["columns"]}
        for s in c["sizes"]:
            g = busbw(s, med["gyre"][s], f)
            row = [name, fmt_size(s), fmt_bw(g)]
            t_row = [name, fmt_size(s), fmt_us(med["gyre"][s])]
            fixed = [lib for lib in c["libs"] if isinstance(lib, GyreLib) and lib.algo]
            for key, _ in algos:
                row.append(fmt_bw(busbw(s, med[key][s], f)) if key in keys else ABSENT)
                t_row.append(fmt_us(med[key][s]) if key in keys else ABSENT)
            if algos:
                b, label = best_of(c, fixed, s, f)
                row.append(fmt_ratio(g, b) + (" (%s)" % label.split(":", 1)[1] if label else "") if fixed else ABSENT)
            for key, _ in peers:
                if key not in keys:
                    row += [ABSENT, ABSENT]
                    t_row.append(ABSENT)
                    continue
                v = busbw(s, med[key][s], f)
                cell = fmt_bw(v)
                if key == "gloo-best" and s in c["best_gloo"] and not c["single_gloo"]:
                    cell += " (%s)" % c["best_gloo"][s]
                row += [cell, fmt_ratio(g, v)]
                t_row.append(fmt_us(med[key][s]))
            if peers:
                b, label = best_of(c, [lib for lib in c["libs"] if lib.peer], s, f)
                row.append(fmt_ratio(g, b) + (" (%s)" % label if label else ""))
            row.append(fmt_ratio(g, mem1))
            if memlim is not None:
                row.append(fmt_ratio(g, memlim) if c["coll"].factor is factor_gather else ABSENT)
            if tcp:
                row.append(fmt_ratio(g, tcp))
            bw_rows.append(row)
            t_rows.append(t_row)
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
    args = ctx.args
    colls = res["colls"]
    what = "; ".join("%s %s (busbw = algbw x %s)" % (n, PLACEMENT_TEXT[c["placement"]], c["coll"].factor_text)
                     for n, c in colls.items())
    notes = ["float32 (sum where the collective reduces); median of %d alternating launches per size; "
             "busbw in GB/s; time compared: %s" % (args.repeats, what),
             "gyre/X = gyre busbw / X busbw (>1: gyre faster); gyre/best-peer = gyre busbw / the fastest peer's "
             "at that size (named); %s = the library does not have that collective" % ABSENT,
             "gyre/memcpy = gyre busbw / single-thread memcpy bandwidth (%s buffer)" % fmt_size(args.memcpy_size),
             "memcpy-bw, same run: " + memcpy_line(res)]
    if any(c["coll"].factor is factor_gather for c in colls.values()) and mem_limit(res) is not None:
        notes.append("gyre/mem-limit (collectives with busbw factor (n-1)/n) = gyre busbw / the memory-traffic "
                     "limit: every byte of each rank's input read once and of its output written once at the "
                     "all-threads memcpy rate shared by the ranks, (memcpy all threads / n) x (n-1)/n = %.2f GB/s"
                     % mem_limit(res))
    if args.gyre_memalloc:
        notes.append("gyre = buffers from gyreMemAlloc (gyre-bench -R 1, which implies GYRE_MAPPED_BUFFERS=1: "
                     "local peers map them and the tuner prices single-copy reads so); gyre-malloc = the same "
                     "build with malloc'd buffers; the peers use malloc'd buffers")
    if "alltoallv" in colls:
        notes.append("alltoallv: each rank sends its next rank %d times what it sends each other rank (--skew %d), "
                     "the same total bytes as alltoall" % (args.skew, args.skew))
    if any(c["single_gloo"] for c in colls.values()):
        notes.append("gloo-best of a collective with one Gloo implementation is that one (alltoall: "
                     "gloo::alltoall, out of place only)")
    if res.get("tcp_flood"):
        notes.append("tcp-loopback-bw, same run: %.2f GB/s each way for a plain 16 MiB exchange in both "
                     "directions at once over one loopback socket (best of 256K/1M/4M writes), a reference "
                     "point rather than a limit: flooding keeps more data in flight, whose socket pages fall "
                     "out of cache; gyre/tcp-flood = gyre busbw / that" % res["tcp_flood"])
    notes.append("CPU used by other processes during this scenario: %.0f%% of the machine (steal %.0f%%)%s" % (
        res["other_load"] * 100, res["steal"] * 100,
        " -- numbers disturbed, rerun on a quiet machine" if res["other_load"] > 0.05 else ""))
    for name, c in colls.items():
        for label, how in c["bindings"].items():
            notes.append("launch %s %s: `%s`" % (name, label, how))
    notes.append("ARGS: -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -d float -o sum -c 1, one launch per size "
                 "range: %s" % "; ".join("%s..%s -n %d -w %d" % (fmt_size(g[0]), fmt_size(g[1]), g[4], g[5])
                                           for g in res["segments"]))
    if sc.oversubscribe or sc.nranks > len(ctx.cpus):
        notes.append("%d ranks on %d cores: ranks are bound round-robin to cores, several ranks per core "
                     "(Open MPI: --bind-to core:overload-allowed)" % (sc.nranks, len(ctx.cpus)))
    if any(lib.algo for c in colls.values() for lib in c["libs"] if isinstance(lib, GyreLib)):
        notes.append("gyre:ALGO = gyre with GYRE_ALGO=COLLECTIVE:ALGO; gyre = the tuner's choice; "
                     "gyre/best-fixed = the choice's busbw / the best fixed algorithm's (named)%s" % (
                         "; direct algorithms skipped (shared memory only)" if sc.transport != "shm" else ""))
    for name, c in colls.items():
        for label, why in c["missing"].items():
            notes.append("%s %s: %s" % (name, label, why))
        for key, why in c["failed"].items():
            notes.append("%s %s FAILED: %s" % (name, key, why.splitlines()[0]))
        if c["best_gloo"] and not c["single_gloo"]:
            algos = [lib.algo for lib in c["libs"] if isinstance(lib, GlooLib)]
            notes.append("%s gloo-best: per size the fastest of %s (short names: %s)" % (
                name, ", ".join(algos), ", ".join("%s=%s" % (GLOO_SHORT[a], a) for a in algos)))
    return notes


def evaluate_targets(results):
    out = []
    for scn, size, kind, peer, thr, text in TARGETS:
        res = results.get(scn)
        c = res["colls"].get("allreduce") if res else None
        if c is None or size not in c["sizes"]:
            out.append((text, "n/a", "scenario, collective or size not run"))
            continue
        med = c["median_us"]
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


def gyre_version():
    try:
        with open(os.path.join(REPO, "CMakeLists.txt")) as f:
            m = re.search(r"project\(\s*gyre\s+VERSION\s+([\w.]+)", f.read())
        return m.group(1) if m else "unknown"
    except OSError:
        return "unknown"


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
        ("gyre", "%s, git %s" % (gyre_version(), rev)),
        ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")),
        ("command", shlex.join([sys.executable] + sys.argv)),
    ]


def print_report(ctx, results, targets, info):
    for k, v in info:
        print("%-8s  %s" % (k, v))
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
        print("busbw (GB/s) and ratios")
        print(text_table(head, rows))
        print()
        print("time (us)")
        print(text_table(t_head, t_rows))
    if targets:
        print()
        print("== targets (AllReduce, %s)" % PLACEMENT_TEXT[placement_of(COLLECTIVES["allreduce"], ctx.args)])
        w = max(len(t[0]) for t in targets)
        for text, status, detail in targets:
            print("  %-4s  %s  %s" % (status, text.ljust(w), detail))
    if ctx.errors:
        print()
        print("== problems")
        for e in ctx.errors:
            print("  " + e)


# docs/PERFORMANCE.md's pointer to the training harness's figures (written
# when that file sits beside the report).
HARNESS_LINE = ("The training harness (gyre-train) on these collectives: step time and its breakdown for "
                "every parallelism, data-parallel overlap, and PyTorch DDP: "
                "[PERFORMANCE-harness.md](PERFORMANCE-harness.md).")


def write_markdown(path, ctx, results, targets, info):
    colls = ctx.args.collectives
    title = ("# gyre allreduce comparison" if colls == ["allreduce"]
             else "# gyre compared with Open MPI and Gloo: %s" % ", ".join(colls))
    out = [title, ""]
    out += ["| | |", "|---|---|"]
    for k, v in info:
        out.append("| %s | %s |" % (k, v.replace("|", "\\|") if k != "command" else "`%s`" % v))
    if ctx.notes:
        out += [""] + ["Note: " + n for n in ctx.notes]
    if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(path)), "PERFORMANCE-harness.md")):
        out += ["", HARNESS_LINE]
    if ctx.args.plot and ctx.plot_written:
        rel = os.path.relpath(os.path.abspath(ctx.args.plot), os.path.dirname(os.path.abspath(path)))
        out += ["", "![busbw and latency of every series](%s)" % rel]
    for name, res in results.items():
        sc = res["scenario"]
        out += ["", "## %s" % name, "", sc.title + ".", ""]
        out += ["- " + n for n in scenario_notes(res, ctx)]
        head, rows, t_head, t_rows = table_rows(res)
        out += ["", "busbw (GB/s) and ratios:", "", md_table(head, rows), "", "time (us):", "",
                md_table(t_head, t_rows)]
    if targets:
        out += ["", "## targets (AllReduce, %s)" % PLACEMENT_TEXT[placement_of(COLLECTIVES["allreduce"], ctx.args)],
                "", "| target | status | measured |", "|---|---|---|"]
        for text, status, detail in targets:
            out.append("| %s | %s | %s |" % (text, status, detail))
    if ctx.errors:
        out += ["", "## problems", ""] + ["- " + e.replace("\n", " ") for e in ctx.errors]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def coll_json(c):
    return {
        "placement": c["placement"],
        "median_us": {k: {str(s): v for s, v in d.items()} for k, d in c["median_us"].items()},
        "raw": {k: {str(s): v for s, v in d.items()} for k, d in c["raw"].items()},
        "best_gloo": {str(s): v for s, v in c["best_gloo"].items()},
        "failed": c["failed"], "missing": c["missing"], "bindings": c["bindings"],
    }


def write_json(path, ctx, results, targets, info):
    data = {"machine": dict(info), "placement": ctx.args.placement, "repeats": ctx.args.repeats,
            "collectives": ctx.args.collectives,
            "targets": [{"target": t, "status": s, "detail": d} for t, s, d in targets], "scenarios": {}}
    for name, res in results.items():
        sc = {
            "nranks": res["scenario"].nranks,
            "transport": res["scenario"].transport,
            "memcpy": {str(t): m for t, m in res["memcpy"].items()},
            "tcp_flood_gbs": res.get("tcp_flood"),
            "other_load": res["other_load"],
            "collectives": {n: coll_json(c) for n, c in res["colls"].items()},
        }
        if "allreduce" in res["colls"]:  # the AllReduce fields where earlier files had them
            sc.update({k: v for k, v in sc["collectives"]["allreduce"].items() if k != "placement"})
        data["scenarios"][name] = sc
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


def series_json(sc, c, lib):
    """One series (a library's medians for one collective in one scenario) as
    a gyre-bench/1 result file, the value in the cell of the placement
    compared (gyre-bench plot draws out-of-place, else in-place)."""
    f = c["coll"].factor(sc.nranks)
    rows = []
    for s in c["sizes"]:
        us = c["median_us"][lib.key][s]
        if not us:
            continue
        cell = {"time_us": us, "algbw": s / us / 1e3, "busbw": busbw(s, us, f), "wrong": None,
                "p50_us": None, "p99_us": None}
        inp = c["placement"] == "in"
        rows.append({"size": s, "count": s // 4, "type": "float", "redop": "sum" if c["coll"].reduces else "none",
                     "root": -1, "outOfPlace": None if inp else cell, "inPlace": cell if inp else None})
    return {
        "schema": "gyre-bench/1",
        "settings": {"library": lib.library, "collective": c["coll"].name,
                     "label": "%s %s %s" % (sc.name, c["coll"].name, lib.label), "nranks": sc.nranks,
                     "transport": sc.transport, "transports": sc.transport,
                     "algorithm": getattr(lib, "algo", None) or "auto", "dtype": "float", "op": "sum",
                     "placement": c["placement"]},
        "rows": rows,
    }


def write_plot(ctx, results):
    """Every series of the run, as gyre-bench/1 files, drawn by `gyre-bench
    plot` into one file. Returns True when it was written."""
    path = ctx.args.plot
    if not os.access(ctx.gyre_bench, os.X_OK):
        ctx.errors.append("plot: %s not built" % ctx.gyre_bench)
        return False
    d = tempfile.mkdtemp(prefix="gyre-compare-plot-")
    try:
        files = []
        for res in results.values():
            sc = res["scenario"]
            for c in res["colls"].values():
                for lib in c["libs"]:
                    data = series_json(sc, c, lib)
                    if not data["rows"]:
                        continue
                    p = os.path.join(d, "%03d.json" % len(files))
                    with open(p, "w") as f:
                        json.dump(data, f, indent=1)
                    files.append(p)
        if not files:
            ctx.errors.append("plot: no series has a result")
            return False
        title = "gyre vs Open MPI and Gloo: %s (medians of %d alternating launches)" % (
            ", ".join(ctx.args.collectives), ctx.args.repeats)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        cmd = [ctx.gyre_bench, "plot", "-o", path, "--title", title] + files
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        if r.returncode != 0:
            ctx.errors.append("plot: gyre-bench plot failed (%d): %s" % (r.returncode, r.stdout.strip()[-500:]))
            return False
        return True
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- main

def comma_list(text):
    return [x.strip() for x in text.split(",") if x.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collectives", default="allreduce",
                    help="comma list of %s; 'peers' = %s; 'all' = every one (default: allreduce, with the "
                    "AllReduce targets)" % (", ".join(COLLECTIVES), ",".join(PEER_COLLECTIVES)))
    ap.add_argument("--scenario", action="append",
                    help="scenario(s) to run, repeatable or comma separated: %s, shm-N, tcp-N, ucx-N (over UCX's "
                    "tcp), ucxsm-N (over UCX's shared memory), all (default: all, the three named ones)"
                    % ", ".join(SCENARIOS))
    ap.add_argument("--repeats", type=int, default=3, help="alternating launches per library (>= 3 for a "
                    "report; fewer only for a smoke test), default 3")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"), help="CMake build directory (default ./build)")
    ap.add_argument("--no-build", action="store_true", help="do not run cmake --build")
    ap.add_argument("--no-install", action="store_true",
                    help="do not run tools/setup.sh (which installs the peers from Debian packages)")
    ap.add_argument("--peer-dir", help="where the peer drivers are (default BUILD/bench/compare)")
    ap.add_argument("--gyrerun", help="gyrerun launcher (default BUILD/tools/gyrerun)")
    ap.add_argument("--gyre-allreduce-perf", help="gyre's AllReduce benchmark (default BUILD/bench/gyre-allreduce-perf)")
    ap.add_argument("--gyre-bench", help="gyre-bench, for the other collectives and the plot "
                    "(default BUILD/bench/gyre-bench)")
    ap.add_argument("--peers", default="ompi,gloo", help="peers to run: comma list of ompi, gloo, or none "
                    "(default ompi,gloo)")
    ap.add_argument("--min", type=parse_size, default=0, help="drop sizes below this")
    ap.add_argument("--max", type=parse_size, default=256 * MiB, help="drop sizes above this (default 256M)")
    ap.add_argument("--placement", choices=["auto", "in", "out", "best"], default="auto",
                    help="which column to compare: auto (default): in-place for AllReduce (the mode every peer "
                    "implements natively; Gloo's algorithm classes have no out-of-place form) and out-of-place for "
                    "the rest (Gloo's AllToAll has no in-place form); in, out, or the faster of the two")
    ap.add_argument("--gloo-algos", default="ring,ring_chunked,halving_doubling",
                    help="Gloo AllReduce algorithms for tcp-N (comma list of %s)" % ", ".join(GLOO_ALGOS))
    ap.add_argument("--with-ucx", action="store_true", help="add Open MPI's UCX path (pml ucx) as a peer")
    ap.add_argument("--gyre-algos", default="",
                    help="also run gyre with each of these fixed algorithms (GYRE_ALGO) next to the tuner's "
                    "choice: a comma list, or 'all' for every algorithm of each collective")
    ap.add_argument("--gyre-memalloc", action="store_true",
                    help="gyre's buffers from gyreMemAlloc (gyre-bench -R 1, which local peers map); "
                         "a gyre-malloc series keeps malloc'd buffers")
    ap.add_argument("--skew", type=int, default=8, help="alltoallv: the next rank gets K times as much (default 8)")
    ap.add_argument("--mpirun-args", default="", help="extra mpirun arguments for every Open MPI launch")
    ap.add_argument("--iters-scale", type=float, default=1.0, help="scale the per-size iteration table")
    ap.add_argument("--memcpy-size", type=parse_size, default=256 * MiB, help="memcpy-bw buffer (default 256M)")
    ap.add_argument("--timeout", type=float, default=300, help="hard limit per launch in seconds (default 300)")
    ap.add_argument("--markdown", metavar="FILE", help="also write a markdown report")
    ap.add_argument("--json", metavar="FILE", help="also write the raw and median numbers as JSON")
    ap.add_argument("--plot", metavar="FILE.svg", help="also draw every series (medians) into one plot with "
                    "gyre-bench plot (.svg, or .png with rsvg-convert)")
    args = ap.parse_args()

    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    if args.skew < 1:
        ap.error("--skew must be >= 1")
    if args.plot and not args.plot.endswith((".svg", ".png")):
        ap.error("--plot takes a file ending in .svg or .png")
    colls = comma_list(args.collectives)
    if "all" in colls:
        colls = list(COLLECTIVES)
    elif "peers" in colls:
        colls = PEER_COLLECTIVES + [c for c in colls if c != "peers" and c not in PEER_COLLECTIVES]
    bad = [c for c in colls if c not in COLLECTIVES]
    if bad or not colls:
        ap.error("unknown collective(s): %s (%s)" % (", ".join(bad) or "none given", ", ".join(COLLECTIVES)))
    args.collectives = list(dict.fromkeys(colls))
    args.peers = [p for p in comma_list(args.peers) if p != "none"]
    if [p for p in args.peers if p not in ("ompi", "gloo")]:
        ap.error("--peers takes ompi, gloo or none")
    args.gloo_algos = comma_list(args.gloo_algos)
    bad = [a for a in args.gloo_algos if a not in GLOO_ALGOS]
    if bad or not args.gloo_algos:
        ap.error("unknown Gloo algorithm(s): %s" % ", ".join(bad))
    wanted = comma_list(args.gyre_algos)
    known = {a for c in COLLECTIVES.values() for a in c.algos}
    if [a for a in wanted if a != "all" and a not in known]:
        ap.error("unknown gyre algorithm(s) in --gyre-algos: %s (known: %s)" % (
            ", ".join(a for a in wanted if a != "all" and a not in known), ", ".join(sorted(known))))
    args.gyre_algos = {c.name: [a for a in c.algos if "all" in wanted or a in wanted] for c in COLLECTIVES.values()}
    names = []
    for item in args.scenario or ["all"]:
        names += comma_list(item)
    names = list(dict.fromkeys(n for item in names for n in (list(SCENARIOS) if item == "all" else [item])))
    try:
        scenarios = [scenario_by_name(n) for n in names]
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))

    ctx = Context(args)
    ctx.plot_written = False
    if args.repeats < 3:
        ctx.notes.append("--repeats %d: fewer than 3 launches per size, not for a report" % args.repeats)
        log("compare: warning: --repeats %d (< 3) is a smoke test, not a measurement" % args.repeats)
    install_peers(ctx)
    build(ctx)
    info = machine_info(ctx)
    results = {}
    try:
        for sc in scenarios:
            results[sc.name] = run_scenario(ctx, sc)
    except KeyboardInterrupt:
        log("compare: interrupted")
        ctx.cleanup()
        return 130
    targets = evaluate_targets(results) if "allreduce" in args.collectives else []
    if args.plot:
        ctx.plot_written = write_plot(ctx, results)
        if ctx.plot_written:
            log("compare: wrote %s" % args.plot)
    print_report(ctx, results, targets, info)
    if args.markdown:
        write_markdown(args.markdown, ctx, results, targets, info)
        log("compare: wrote %s" % args.markdown)
    if args.json:
        write_json(args.json, ctx, results, targets, info)
        log("compare: wrote %s" % args.json)
    return 1 if ctx.errors else 0


if __name__ == "__main__":
    sys.exit(main())
