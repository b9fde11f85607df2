"""A DDP training script written for gloo that runs on gyre by naming it:

    python3 -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 2 --tee 2 \\
        examples/torch/ddp_train.py --backend gloo
    python3 -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 2 --tee 2 \\
        examples/torch/ddp_train.py --backend gyre

(torchrun on Python 3.11 needs `--redirects 2 --tee 2`: without them torch
1.13's launcher fails before starting a worker.) The only gyre-specific
line is the import that registers the backend: torch 1.13 finds a
third-party backend only once something has registered it.

Rank 0 prints the final loss and a checksum of the parameters, so two runs
can be compared.
"""

import argparse
import hashlib

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="gloo")
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--hook", choices=["none", "fp16", "bf16", "int8", "onebit"], default="none")
args = parser.parse_args()

if args.backend == "gyre":
    import gyre.torch  # noqa: F401 -- registers backend "gyre"

dist.init_process_group(args.backend)  # env:// from torchrun
rank, size = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)))
if args.hook != "none":
    import gyre.torch.hooks as hooks

    if args.hook == "onebit":
        model.register_comm_hook(hooks.CompressionState("onebit"), hooks.compress_hook)
    else:
        model.register_comm_hook(None, getattr(hooks, f"{args.hook}_hook"))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
target = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))

for step in range(args.steps):
    g = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(32, 64, generator=g)
    loss = torch.nn.functional.mse_loss(model(x), torch.tanh(x @ target))
    opt.zero_grad()
    loss.backward()
    opt.step()

flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]
if rank == 0:
    print(f"backend {args.backend} ranks {size} steps {args.steps} loss {loss.item():.6f} params {digest}", flush=True)
dist.destroy_process_group()
