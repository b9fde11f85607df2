"""A killed rank, a stalled one and a mismatched call raise on every
surviving rank, naming the rank and the call, with gyre's error text; the
group then tears down without hanging. Each case is a job of three
processes started here (not under gyrerun, which would stop the survivors
as soon as one rank dies), bounded by a hard timeout."""

import json
import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = 3


def run_job(scenario, timeout_s=5.0):
    """Starts the job, waits for the survivors (at most 60 s), ends the
    rest; returns {rank: [output lines]}."""
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = []
        for rank in range(SIZE):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(SIZE))
            procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "failure_job.py"), scenario, store,
                                           str(timeout_s)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        out = {}
        try:
            for rank in range(SIZE - 1):  # the survivors
                out[rank] = procs[rank].communicate(timeout=60)[0].splitlines()
                assert procs[rank].returncode == 0, f"rank {rank} exited {procs[rank].returncode}:\n" + "\n".join(
                    out[rank])
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
        return out


def raised(lines, kind="RAISED"):
    for line in lines:
        if line.startswith(kind + " "):
            return json.loads(line[len(kind) + 1:])
    raise AssertionError(f"no {kind} line in:\n" + "\n".join(lines))


def test_mismatched_call_raises_on_every_rank():
    out = run_job("mismatch")
    for rank, lines in out.items():
        message = raised(lines)
        assert f"on rank {rank} of {SIZE}" in message, message
        assert "broadcast" in message and "allreduce" in message, message
        assert "DESTROYED" in lines


def test_killed_rank_raises_naming_it():
    out = run_job("killed")
    for rank, lines in out.items():
        message = raised(lines)
        assert "gyre allreduce failed" in message and f"rank {SIZE - 1}" in message, message
        assert "DESTROYED" in lines


def test_killed_rank_fails_async_work_and_its_future():
    out = run_job("killed_async")
    for rank, lines in out.items():
        assert f"rank {SIZE - 1}" in raised(lines, "FUTURE")
        assert f"rank {SIZE - 1}" in raised(lines)
        assert "DESTROYED" in lines


def test_stalled_rank_times_out():
    out = run_job("stalled", timeout_s=2.0)
    for rank, lines in out.items():
        message = raised(lines)
        assert "gyre allreduce failed" in message and "timeout" in message.lower(), message
        assert "DESTROYED" in lines
