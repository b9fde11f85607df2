"""One rank of a job that exits without destroy_process_group while async
calls and their futures' Python callbacks are still queued, and a
compressor is alive (test_launchers.py): the calls must finish, the
callbacks run, and the process exit cleanly."""

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gyre.torch  # noqa: E402,F401

rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gyre", init_method=f"file://{sys.argv[1]}", rank=rank, world_size=size)
sub = dist.new_group(list(range(size)))
tensors = [torch.full((1 << 18,), float(i)) for i in range(8)]
works = [dist.all_reduce(t, async_op=True, group=sub if i % 2 else None) for i, t in enumerate(tensors)]


def report(i, fut):
    # One write per line: the two groups' callbacks run on two threads.
    sys.stdout.write(f"callback {i} {fut.value()[0][0].item()}\n")
    sys.stdout.flush()


for i, w in enumerate(works):
    w.get_future().then(lambda f, i=i: report(i, f))
# A compressor still alive when the interpreter ends: its destruction comes
# after the groups have stopped.
compressor = gyre.torch.Compressor(dist.distributed_c10d._get_default_group(), 4, torch.ones(5000))
compressed = compressor.allreduce(torch.ones(5000))
print("leaving", flush=True)
