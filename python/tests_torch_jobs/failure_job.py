"""One rank of a job that fails on purpose (test_failures.py starts them):
after a first AllReduce that every rank makes, the scenario breaks the
job, and each surviving rank prints what its call raised, then tears the
group down (which must not hang either)."""

import datetime
import json
import os
import signal
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gyre.torch  # noqa: E402,F401

scenario, store_path, timeout_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
last = size - 1
dist.init_process_group("gyre", init_method=f"file://{store_path}", rank=rank, world_size=size,
                        timeout=datetime.timedelta(seconds=timeout_s))
t = torch.ones(1 << 16)
dist.all_reduce(t)
print("JOINED", flush=True)


def report(kind, error):
    print(kind, json.dumps(str(error)), flush=True)
    dist.destroy_process_group()
    print("DESTROYED", flush=True)
    os._exit(0)


try:
    if scenario == "mismatch":
        if rank == 1:
            dist.broadcast(t, src=0)
        else:
            dist.all_reduce(t)
    elif scenario == "killed":
        if rank == last:
            os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce(t)
    elif scenario == "killed_async":
        if rank == last:
            os.kill(os.getpid(), signal.SIGKILL)
        work = dist.all_reduce(t, async_op=True)
        try:
            work.get_future().wait()
        except RuntimeError as e:
            print("FUTURE", json.dumps(str(e)), flush=True)
        assert work.is_completed() and not work.is_success()
        work.wait()
    elif scenario == "stalled":
        if rank == last:
            sys.stdin.read()  # never calls; the test ends it once the others reported
            os._exit(0)
        dist.all_reduce(t)
    else:
        raise SystemExit(f"unknown scenario {scenario}")
except RuntimeError as e:
    report("RAISED", e)
print("NO ERROR", flush=True)
os._exit(1)
