"""One rank of a job that joins a gyre group by one of torch's init methods
(test_launchers.py starts them) and checks an AllReduce."""

import datetime
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gyre.torch  # noqa: E402,F401

method, where = sys.argv[1], sys.argv[2]
rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
timeout = datetime.timedelta(seconds=30)
if method == "env":
    dist.init_process_group("gyre", timeout=timeout)
elif method == "store":
    host, port = where.split(":")
    store = dist.TCPStore(host, int(port), size, rank == 0, timeout=timeout)
    dist.init_process_group("gyre", store=store, rank=rank, world_size=size, timeout=timeout)
else:  # tcp:// or file://
    dist.init_process_group("gyre", init_method=where, rank=rank, world_size=size, timeout=timeout)
t = torch.full((1000,), float(rank + 1))
dist.all_reduce(t)
assert torch.equal(t, torch.full((1000,), float(size * (size + 1) // 2))), t
# A group made again after destroy_process_group, on a fresh rendezvous.
dist.destroy_process_group()
print("OK", method, flush=True)
