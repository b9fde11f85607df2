#!/usr/bin/env python3
"""Instructions a collective call costs, counted, not timed.

Wall time on a small, shared host drifts 2-3x between runs; a cut of a few
hundred instructions a call is inside that noise. Instructions do not
drift. This runs rank 0 of a small gyre-bench launch under valgrind's
callgrind and its peers natively: the peers are ~50x faster, so what
rank 0 waits for has always come before it looks, and its counts are a
call's work without the waiting (which follows timing). It prints the
instructions a call by layer: the API and communicator, the plan's
bookkeeping, the executor, and the transport's send and receive (UCX's
share included). With --mpi it counts Open MPI's call the same way
(rank 0 under callgrind through a wrapper, mpirun as tools/compare.py
launches it), so the two sit side by side.

  tools/call_instructions.py --transport ucx --ucx-tls sm,self --mpi

Run it on an otherwise idle host: where the peers share their cores with
other work, rank 0 does wait, and the looks it makes while it waits are
counted with the call (gyre's last row says how many were in waits; Open
MPI's count has no such split: 1466 a call idle, 8800 beside a build).

Needs valgrind (callgrind_annotate comes with it). docs/PERFORMANCE-transports.md
has a table it made and what it showed.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

GYRE_API = {
    "allreduce": "gyreAllReduce",
    "alltoall": "gyreAllToAll",
    "allgather": "gyreAllGather",
    "reducescatter": "gyreReduceScatter",
    "broadcast": "gyreBroadcast",
    "reduce": "gyreReduce",
}
MPI_API = {
    "allreduce": "PMPI_Allreduce",
    "alltoall": "PMPI_Alltoall",
    "allgather": "PMPI_Allgather",
    "reducescatter": "PMPI_Reduce_scatter_block",
    "broadcast": "PMPI_Bcast",
    "reduce": "PMPI_Reduce",
}
# The layers, by the function whose inclusive count ends each one.
# A call made again runs its plan from Communicator::repeat (call_repeat.cc)
# instead: its bookkeeping (the call's number, the peers' reports, the
# statistics) is counted with the plan's.
RUN_CALL = re.compile(r"gyre::core::Communicator::(runCall|repeat)\(")
EXECUTE = re.compile(r"^gyre::collectives::execute\(")
WAIT = re.compile(r"gyre::core::Communicator::waitUntil\(")
# A connection's data calls, as the executor's steps make them.
TRANSPORT = re.compile(
    r"^gyre::transport::\w+Connection::(trySendFrom|tryRecvInto|tryRecvBuffer|recvRelease|trySendBuffer|sendCommit)\(")

# "  1,234 (12.3%)  file:function [object]" (the percentage only without --show-percs=no)
LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(<|\*)?\s*([^:\s][^:]*?):(.*?)(?:\s+\((\d[\d,]*)x\))?(?:\s+\[[^\]]*\])?\s*$")


def names(fn, name):
    """Whether callgrind's function `fn` is `name` (a C function's bare
    name, or a C++ one with its parameters)."""
    return fn == name or fn.startswith(name + "(")


def parse_functions(annotate_output):
    """{function: instructions} from callgrind_annotate's flat listing."""
    out = {}
    for line in annotate_output.splitlines():
        m = LINE.match(line)
        if not m or m.group(2):
            continue
        fn = m.group(4).strip()
        out[fn] = out.get(fn, 0) + int(m.group(1).replace(",", ""))
    return out


def calls_of(tree_output, name):
    """How many times `name` was called: the sum over its callers' counts in
    callgrind_annotate --tree=caller (each function's block lists its
    callers, '<', then the function itself, '*')."""
    pending = []
    total = 0
    for line in tree_output.splitlines():
        m = LINE.match(line)
        if not m:
            pending = []
            continue
        kind, fn, count = m.group(2), m.group(4).strip(), m.group(5)
        if kind == "<":
            pending.append(int(count.replace(",", "")) if count else 0)
        elif kind == "*":
            if names(fn, name):
                total += sum(pending)
            pending = []
    return total


def annotate(path, *extra):
    # Where the sources are found (run from the source tree), the listing
    # names a function twice, by the absolute and by the relative path of
    # its file, and the annotated sources' call lines ("=> file:function
    # (Nx)") look like counts of their own: both added to the function's
    # count (a call counted 1.6-2x). So: no annotated sources, and run from
    # the folder of the counts, where no source is.
    r = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--show-percs=no", "--threshold=100", "--auto=no",
                        *extra, path],
                       capture_output=True, text=True, check=True, cwd=os.path.dirname(os.path.abspath(path)))
    return r.stdout


def find(functions, name):
    for fn, n in functions.items():
        if names(fn, name):
            return n
    return None


def read_counts(path, api, what):
    """A callgrind file's inclusive counts by function, the calls of the API
    function and its inclusive count; a clear error if it was never called."""
    functions = parse_functions(annotate(path))
    calls = calls_of(annotate(path, "--tree=caller"), api)
    whole = find(functions, api)
    if not calls or whole is None:
        raise SystemExit(f"call_instructions: no calls of {api} in {what}")
    return functions, calls, whole


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpus():
    return sorted(os.sched_getaffinity(0))


def bench_args(a):
    return [a.collective, "-b", str(a.bytes), "-e", str(a.bytes), "-n", str(a.iters), "-w", str(a.warmup), "-c", "0"]


def run_all(commands, timeout, what):
    """Starts every (argv, env) and waits; raises naming what failed."""
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for argv, env in commands]
    failed = []
    for i, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise SystemExit(f"call_instructions: {what} took longer than {timeout} s")
        if p.returncode != 0:
            failed.append(f"process {i} exited {p.returncode}:\n{out[-2000:]}")
    if failed:
        raise SystemExit(f"call_instructions: {what} failed: " + "\n".join(failed))


def count_gyre(a, work):
    bench = os.path.join(a.build, "bench", "gyre-bench")
    if not os.access(bench, os.X_OK):
        raise SystemExit(f"call_instructions: no gyre-bench at {bench} (build first, or --build)")
    port = free_port()
    cores = cpus()
    out = os.path.join(work, "gyre.callgrind")
    commands = []
    for r in range(a.ranks):
        env = dict(os.environ, GYRE_RANK=str(r), GYRE_WORLD_SIZE=str(a.ranks), GYRE_LOCAL_RANK=str(r),
                   GYRE_LOCAL_SIZE=str(a.ranks), GYRE_COMM_ID=f"127.0.0.1:{port}", GYRE_TRANSPORT=a.transport,
                   GYRE_TIMEOUT_MS=str(a.timeout * 1000))
        if a.ucx_tls:
            env["UCX_TLS"] = a.ucx_tls
        argv = ["taskset", "-c", str(cores[r % len(cores)])]
        if r == 0:
            argv += ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        commands.append((argv + [bench] + bench_args(a), env))
    run_all(commands, a.timeout, f"gyre-bench over {a.transport}")
    functions, calls, whole = read_counts(out, GYRE_API[a.collective], "rank 0's counts")
    run_call = sum(n for fn, n in functions.items() if RUN_CALL.search(fn))
    execute = sum(n for fn, n in functions.items() if EXECUTE.search(fn))
    transport = sum(n for fn, n in functions.items() if TRANSPORT.search(fn))
    waits = sum(n for fn, n in functions.items() if WAIT.search(fn))
    per = lambda n: round(n / calls)
    return {
        "calls": calls,
        "whole call": per(whole),
        "API and communicator": per(whole - run_call),
        "plan bookkeeping (runCall or repeat, outside the executor)": per(run_call - execute),
        "executor, the transport's calls left out": per(execute - transport),
        "transport: send and receive": per(transport),
        "(of the executor and transport, in waits)": per(waits),
    }


def count_mpi(a, work):
    perf = os.path.join(a.build, "bench", "compare", "mpi-collective-perf")
    if not os.access(perf, os.X_OK) or not shutil.which("mpirun"):
        raise SystemExit(f"call_instructions: --mpi needs mpirun and {perf}")
    out = os.path.join(work, "mpi.callgrind")
    wrapper = os.path.join(work, "rank0-under-callgrind.sh")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n"
                f'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exec valgrind --tool=callgrind --callgrind-out-file={out} "$@"; fi\n'
                'exec "$@"\n')
    os.chmod(wrapper, 0o755)
    argv = ["mpirun", "--allow-run-as-root", "-np", str(a.ranks), "--map-by", "core", "--bind-to", "core",
            "--oversubscribe", "--mca", "pml", "ucx", "--mca", "opal_common_ucx_tls", "any",
            "--mca", "opal_common_ucx_devices", "any"]
    if a.ucx_tls:
        argv += ["-x", f"UCX_TLS={a.ucx_tls}"]
    run_all([(argv + [wrapper, perf] + bench_args(a), dict(os.environ))], a.timeout, "Open MPI")
    _, calls, whole = read_counts(out, MPI_API[a.collective], "Open MPI rank 0's counts")
    return {"calls": calls, "whole call": round(whole / calls)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build", help="the build folder (default build)")
    p.add_argument("--collective", default="alltoall", choices=sorted(GYRE_API))
    p.add_argument("--bytes", type=int, default=64, help="the size, as gyre-bench's -b (default 64)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--transport", default="shm", choices=["shm", "tcp", "ucx"])
    p.add_argument("--ucx-tls", default="", help="UCX_TLS for gyre over UCX and for Open MPI (e.g. sm,self)")
    p.add_argument("--iters", type=int, default=2000, help="timed calls (gyre-bench's -n; it makes them out of place and in place)")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--mpi", action="store_true", help="count Open MPI's call (pml ucx) too")
    p.add_argument("--timeout", type=int, default=300, help="seconds for each launch")
    p.add_argument("--json", help="also write the counts here")
    a = p.parse_args()
    if a.ranks < 2:
        p.error("--ranks: at least 2 (rank 0 alone would wait for nobody)")
    if a.iters < 1:
        p.error("--iters: at least 1")
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        raise SystemExit("call_instructions: needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="gyre-instructions-") as work:
        result = {"gyre": count_gyre(a, work)}
        if a.mpi:
            result["Open MPI"] = count_mpi(a, work)
    label = f"gyre over {a.transport}" + (f" (UCX_TLS={a.ucx_tls})" if a.ucx_tls and a.transport == "ucx" else "")
    print(f"# {a.collective}, {a.bytes} B, {a.ranks} ranks: instructions a call on rank 0, its peers native")
    rows = list(result["gyre"].items())
    width = max(len(k) for k, _ in rows)
    print(f"{'':{width}}  {label:>24}" + (f"  {'Open MPI pml ucx':>18}" if a.mpi else ""))
    for k, v in rows:
        mpi = result.get("Open MPI", {}).get(k, "") if a.mpi else None
        print(f"{k:{width}}  {v:>24}" + (f"  {mpi:>18}" if mpi is not None else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"collective": a.collective, "bytes": a.bytes, "ranks": a.ranks, "transport": a.transport,
                       "ucx_tls": a.ucx_tls, **result}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
