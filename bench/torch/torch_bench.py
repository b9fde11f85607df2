"""torch.distributed through gyre's backend against gloo, in one job
(docs/PERFORMANCE-torch.md):

    build/tools/gyrerun -n 2 --bind core /usr/bin/python3 bench/torch/torch_bench.py

(with PYTHONPATH=python and GYRE_TORCH_EXTENSION=build/pytorch/_c10d.so in
a build tree). The default group is gyre's, a second group over the same
ranks is gloo's; every size is timed on both in turns (gyre, gloo, gyre,
...), so drift on this host hits both alike. Reports each call's median
time and its bus bandwidth as nccl-tests defines it, then a DDP step of a
model whose gradient reduction dominates.
"""

import argparse
import datetime
import hashlib
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gyre.torch  # noqa: E402,F401

parser = argparse.ArgumentParser()
parser.add_argument("--sizes", default="8,1M,16M,64M", help="bytes, as nccl-tests counts them (K, M suffixes)")
parser.add_argument("--collectives", default="all_reduce,all_gather,all_to_all_single")
parser.add_argument("--reps", type=int, default=5, help="timed rounds per backend (each a median of iters)")
parser.add_argument("--ddp-steps", type=int, default=10)
parser.add_argument("--json", help="write the results here (rank 0)")
args = parser.parse_args()


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def init():
    if "MASTER_ADDR" in os.environ and "RANK" in os.environ:
        dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=120))
    else:
        secret = hashlib.sha256(os.environ["GYRE_SECRET"].encode()).hexdigest()[:16]
        dist.init_process_group("gyre", init_method=f"file:///tmp/gyre-torch-bench-{secret}",
                                rank=int(os.environ["GYRE_RANK"]), world_size=int(os.environ["GYRE_WORLD_SIZE"]),
                                timeout=datetime.timedelta(seconds=120))


# One compute thread per rank: the ranks are pinned a core each
# (gyrerun --bind core), and torch's default of a thread per core would
# put two on each.
torch.set_num_threads(1)
init()
rank, size = dist.get_rank(), dist.get_world_size()
groups = {"gyre": None, "gloo": dist.new_group(backend="gloo")}


def setup(collective, nbytes):
    """The call (a closure over its buffers) and nccl-tests' bus bandwidth
    factor for it. Sizes are nccl-tests': the buffer of all_reduce, the
    gathered output of all_gather (each rank gives a share of it), the
    send buffer of all_to_all_single."""
    n = max(nbytes // 4, 1)
    if collective == "all_reduce":
        x = torch.ones(n)
        return (lambda g: dist.all_reduce(x, group=g)), 2 * (size - 1) / size
    if collective == "all_gather":
        share = max(n // size, 1)
        x, out = torch.ones(share), torch.empty(share * size)
        return (lambda g: dist.all_gather(list(out.chunk(size)), x, group=g)), (size - 1) / size
    if collective == "all_to_all_single":
        n = max(n // size, 1) * size
        x, out = torch.ones(n), torch.empty(n)
        return (lambda g: dist.all_to_all_single(out, x, group=g)), (size - 1) / size
    raise SystemExit(f"unknown collective {collective}")


def timed(call, group, iters):
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        call(group)
    dist.barrier(group=group)  # (the last call completed everywhere)
    return (time.perf_counter() - t0) / iters


results = []
for collective in args.collectives.split(","):
    for nbytes in map(parse_size, args.sizes.split(",")):
        call, factor = setup(collective, nbytes)
        iters = 200 if nbytes <= 1 << 16 else 20 if nbytes <= 1 << 22 else 5
        for name in groups:  # warm up both
            timed(call, groups[name], 2)
        times = {name: [] for name in groups}
        for _ in range(args.reps):
            for name in groups:
                times[name].append(timed(call, groups[name], iters))
        row = {"collective": collective, "bytes": nbytes, "ranks": size}
        for name in groups:
            t = statistics.median(times[name])
            row[name] = {"us": t * 1e6, "busbw_gbs": nbytes * factor / t / 1e9}
        row["speedup"] = row["gloo"]["us"] / row["gyre"]["us"]
        results.append(row)
        if rank == 0:
            print(f"{collective:18s} {nbytes:>10d} B  gyre {row['gyre']['us']:10.1f} us {row['gyre']['busbw_gbs']:7.2f} GB/s"
                  f"  gloo {row['gloo']['us']:10.1f} us {row['gloo']['busbw_gbs']:7.2f} GB/s  gyre/gloo x{row['speedup']:.2f}",
                  flush=True)


class EmbeddingModel(torch.nn.Module):
    """64 MiB of dense gradients for little compute: an embedding table of
    16384 x 1024 (its gradient is dense) and a small head. Debian's torch
    multiplies matrices slowly on this host (a 2048-wide layer on a batch
    of 8 takes ~25 ms), so a model of linear layers would time its BLAS."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(16384, 1024)
        self.head = torch.nn.Linear(1024, 8)

    def forward(self, tokens):
        return self.head(self.table(tokens).mean(1))


def ddp_step_time(group):
    """A step of a model whose gradient reduction dominates."""
    torch.manual_seed(0)
    model = DDP(EmbeddingModel(), process_group=group, gradient_as_bucket_view=True)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randint(0, 16384, (8, 16), generator=torch.Generator().manual_seed(rank))
    steps = []
    for step in range(args.ddp_steps + 2):
        dist.barrier(group=group)
        t0 = time.perf_counter()
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        dist.barrier(group=group)
        if step >= 2:
            steps.append(time.perf_counter() - t0)
    return statistics.median(steps)


if args.ddp_steps:
    ddp = {name: [] for name in groups}
    for _ in range(3):
        for name in groups:
            ddp[name].append(ddp_step_time(groups[name]))
    row = {"collective": "ddp_step", "ranks": size, **{n: {"ms": statistics.median(v) * 1e3} for n, v in ddp.items()}}
    row["speedup"] = row["gloo"]["ms"] / row["gyre"]["ms"]
    results.append(row)
    if rank == 0:
        print(f"ddp step (64 MiB of gradients)  gyre {row['gyre']['ms']:.1f} ms  gloo {row['gloo']['ms']:.1f} ms"
              f"  gyre/gloo x{row['speedup']:.2f}", flush=True)

if rank == 0 and args.json:
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
dist.destroy_process_group()
