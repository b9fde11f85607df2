"""Joining a gyre group every way torch offers (env://, tcp://, file://, an
explicit store), and torchrun running a gloo script on gyre by naming the
backend (the same parameters, bit for bit, on 2 ranks). Each job is
started here with a hard timeout."""

import os
import re
import socket
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(args, size, extra_env=None):
    procs = []
    for rank in range(size):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(size), **(extra_env or {}))
        procs.append(subprocess.Popen([sys.executable] + args, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=90)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    return outs


@pytest.mark.parametrize("method", ["env", "tcp", "file", "store"])
def test_init_methods(method):
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        where = {"env": "-", "tcp": f"tcp://127.0.0.1:{port}", "file": f"file://{tmp}/store",
                 "store": f"127.0.0.1:{port}"}[method]
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        outs = run_ranks([os.path.join(HERE, "init_job.py"), method, where], 3, env)
    assert all(f"OK {method}" in out for out in outs)


def torchrun(backend, *extra):
    script = os.path.join(ROOT, "examples", "torch", "ddp_train.py")
    # --redirects 2 --tee 2: torch 1.13's launcher fails on Python 3.11
    # without them (an IntFlag parsing bug), before starting any worker.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "--redirects", "2",
           "--tee", "2", script, "--backend", backend, "--steps", "20", *extra]
    with tempfile.TemporaryDirectory() as tmp:  # the launcher's logs
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                           env=dict(os.environ, TMPDIR=tmp))
    assert p.returncode == 0, p.stdout
    m = re.search(r"backend \S+ ranks 2 steps 20 loss (\S+) params (\w+)", p.stdout)
    assert m, p.stdout
    return float(m.group(1)), m.group(2)


def test_torchrun_runs_a_gloo_script_on_gyre():
    gloo_loss, gloo_params = torchrun("gloo")
    gyre_loss, gyre_params = torchrun("gyre")
    assert gyre_params == gloo_params and gyre_loss == gloo_loss


def test_torchrun_with_a_compression_hook():
    loss, _ = torchrun("gyre", "--hook", "int8")
    gloo_loss, _ = torchrun("gloo")
    assert abs(loss - gloo_loss) <= 0.1 * gloo_loss


def test_the_collective_suite_under_torchrun():
    """python/tests_torch again, its ranks started by torchrun (env://)
    rather than gyrerun."""
    suite = os.path.join(ROOT, "python", "tests_torch")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "3", "--redirects",
           "2", "--tee", "2", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::UserWarning", suite]
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240,
                           env=dict(os.environ, TMPDIR=tmp))
    assert p.returncode == 0, p.stdout[-5000:]
    assert len(re.findall(r"\d+ passed", p.stdout)) == 3, p.stdout[-5000:]


def test_exit_without_destroy_runs_queued_work():
    with tempfile.TemporaryDirectory() as tmp:
        outs = run_ranks([os.path.join(HERE, "exit_job.py"), f"{tmp}/store"], 2)
    for out in outs:
        for i in range(8):
            assert f"callback {i} {float(i * 2)}" in out, out
