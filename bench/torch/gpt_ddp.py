"""The training harness's GPT in plain torch.nn, trained with DDP over gloo
or gyre's torch backend, against gyre-train's data parallelism on the same
model and data (docs/PERFORMANCE-harness.md, "PyTorch DDP").

One rank (under gyrerun, which sets GYRE_RANK/GYRE_WORLD_SIZE/GYRE_SECRET):

    PYTHONPATH=python GYRE_LIBRARY=build/src/libgyre.so.0 \\
    GYRE_TORCH_EXTENSION=build/pytorch/_c10d.so \\
    build/tools/gyrerun -n 2 --bind core /usr/bin/python3 bench/torch/gpt_ddp.py \\
        --backend gloo|gyre --data TEXT [--steps 30] [--json FILE]

All three in turns, from a build tree (launches the above and gyre-train):

    /usr/bin/python3 bench/torch/gpt_ddp.py --compare 5 [--markdown FILE]

The model is the harness's (harness/model.h): byte vocabulary 256, learned
position embeddings, pre-LayerNorm blocks of causal self-attention (qkv and
proj with biases) and a GELU (tanh) MLP of 4x, a final LayerNorm and a head
tied to the token embedding; GPT-2's initialization; AdamW (betas 0.9,
0.95, weight decay 0.1 on matrices and embeddings only) with clipping to
a global norm of 1, as gyre-train does. Each rank trains on its share of a
global batch of random windows of the text (the same sizes as gyre-train's
run, not the same windows: the cost of a step does not depend on which).

DDP's buckets are 1 MiB (bucket_cap_mb=1), like the harness's default
(kDefaultBucketElems), not torch's default of 25 MiB; --bucket-cap-mb
changes it. torch.set_num_threads(1) on every rank, as gyre-train's
OpenBLAS runs one thread (and the ranks are pinned a core each).

Every timed step is followed by one under model.no_sync() (the same step
without the gradient AllReduce); the difference of their medians is the
communication that DDP's overlap did not hide.
"""

import argparse
import datetime
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

ap = argparse.ArgumentParser()
ap.add_argument("--backend", default="gyre", choices=["gyre", "gloo"])
ap.add_argument("--data", help="the text to train on")
ap.add_argument("--layers", type=int, default=8)
ap.add_argument("--dim", type=int, default=128)
ap.add_argument("--heads", type=int, default=8)
ap.add_argument("--seq", type=int, default=64)
ap.add_argument("--batch", type=int, default=16, help="sequences per step over all ranks")
ap.add_argument("--steps", type=int, default=30, help="timed steps (each with a no_sync step after it)")
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--bucket-cap-mb", type=float, default=1.0)
ap.add_argument("--json", help="rank 0 writes its figures here")
ap.add_argument("--compare", type=int, metavar="ROUNDS",
                help="driver: ROUNDS rounds of gloo, gyre and gyre-train in turns (not under gyrerun)")
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--transport", default="shm", help="GYRE_TRANSPORT for gyre's backend and gyre-train")
ap.add_argument("--markdown")
ap.add_argument("--idle-wait", type=float, default=60,
                help="--compare: before each run, wait up to this long for the other processes to go idle")
args = ap.parse_args()


def vim_text(workdir):
    import glob
    files = sorted(glob.glob("/usr/share/vim/vim90/doc/usr_*.txt"))
    if not files:
        sys.exit("gpt_ddp: no /usr/share/vim/vim90/doc/usr_*.txt; give --data")
    path = os.path.join(workdir, "vim-usr.txt")
    with open(path, "wb") as out:
        for f in files:
            with open(f, "rb") as src:
                out.write(src.read())
    return path


def busy_fraction(seconds=1.0):
    """The share of the CPUs that something used over `seconds` (before a
    run: someone else's)."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t0, i0 = snap()
    time.sleep(seconds)
    t1, i1 = snap()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_idle(limit_s):
    start = time.time()
    while True:
        busy = busy_fraction()
        if busy < 0.25 or time.time() - start > limit_s:
            return busy
        time.sleep(5)


def compare():
    """The driver: rounds of (gloo DDP, gyre DDP, gyre-train dp 2 zero 0),
    each a fresh 2-rank job pinned a core a rank, medians over rounds and
    each round's ratios."""
    workdir = tempfile.mkdtemp(prefix="gpt-ddp-")
    data = args.data or vim_text(workdir)
    gyrerun = os.path.join(args.build, "tools", "gyrerun")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               GYRE_LIBRARY=os.path.join(args.build, "src", "libgyre.so.0"),
               GYRE_TORCH_EXTENSION=os.path.join(args.build, "pytorch", "_c10d.so"),
               GYRE_TRANSPORT=args.transport, OPENBLAS_NUM_THREADS="1")
    model = ["--layers", str(args.layers), "--dim", str(args.dim), "--heads", str(args.heads),
             "--seq", str(args.seq), "--batch", str(args.batch)]
    steps = args.warmup + args.steps

    def torch_cmd(backend, out):
        return [gyrerun, "-n", "2", "--bind", "core", "--timeout", "600", "/usr/bin/python3",
                os.path.abspath(__file__), "--backend", backend, "--data", data, "--steps",
                str(args.steps), "--warmup", str(args.warmup), "--bucket-cap-mb",
                str(args.bucket_cap_mb), "--json", out] + model

    def train_cmd(out):
        return [gyrerun, "-n", "2", "--bind", "core", "--timeout", "600",
                os.path.join(args.build, "harness", "gyre-train"), "--dp", "2", "--zero", "0",
                "--data", data, "--steps", str(steps), "--log", out, "--quiet"] + model

    results = {"gloo": [], "gyre": [], "gyre-train": []}
    commands = {}
    for rnd in range(args.compare):
        for name in results:
            out = os.path.join(workdir, "%s-%d.json" % (name, rnd))
            cmd = train_cmd(out) if name == "gyre-train" else torch_cmd(name, out)
            commands[name] = cmd
            busy = wait_idle(args.idle_wait)
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0:
                sys.exit("gpt_ddp: %s failed (%d):\n%s" % (name, p.returncode, p.stdout[-3000:]))
            if name == "gyre-train":
                with open(out) as f:
                    lines = [json.loads(l) for l in f if l.startswith('{"step"')]
                lines = [l for l in lines if l["step"] >= args.warmup]
                r = {"step_ms": 1e3 * statistics.median(l["step_s"] for l in lines),
                     "tokens_per_s": statistics.median(l["tokens_per_s"] for l in lines),
                     "comm_ms": 1e3 * statistics.median(l["comm_s"] for l in lines)}
            else:
                with open(out) as f:
                    r = json.load(f)
            r["busy_before"] = busy
            results[name].append(r)
            print("round %d %-10s %7.1f ms/step %7.0f tokens/s (CPUs %.0f%% busy before)" % (
                rnd, name, r["step_ms"], r["tokens_per_s"], 100 * busy), file=sys.stderr, flush=True)
    rows = []
    for name, rs in results.items():
        med = lambda k: statistics.median(r[k] for r in rs)
        ratio = statistics.median(results["gloo"][i]["step_ms"] / rs[i]["step_ms"] for i in range(len(rs)))
        if name == "gyre-train":
            comm = "%.1f ms (comm_s: the reductions' wait after backward, and the loss)" % med("comm_ms")
        else:
            comm = "%.1f ms (sync %.1f - no_sync %.1f)" % (med("step_ms") - med("nosync_ms"), med("step_ms"),
                                                         med("nosync_ms"))
        rows.append("| %s | %.1f (%.1f-%.1f) | %.0f | %.2f | %s |" % (
            name, med("step_ms"), min(r["step_ms"] for r in rs), max(r["step_ms"] for r in rs),
            med("tokens_per_s"), ratio, comm))
    table = "\n".join(["| run | step ms (min-max) | tokens/s | x gloo | exposed communication |",
                       "|---|---:|---:|---:|---|"] + rows)
    print(table)
    print(json.dumps(results), file=sys.stderr)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n\n" + "\n".join("- %s: `%s`" % (k, " ".join(v)) for k, v in commands.items()) + "\n")


if args.compare:
    compare()
    sys.exit(0)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "python"))
if args.backend == "gyre":
    import gyre.torch  # noqa: E402,F401  (registers the backend)


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.mproj = nn.Linear(4 * c, c)

    def forward(self, x, mask):
        b, t, c = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, h, c // h).transpose(1, 2)
        k = k.view(b, t, h, c // h).transpose(1, 2)
        v = v.view(b, t, h, c // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // h))
        att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.mproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, seq, layers, dim, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(dim)
        # A plain attribute, not a buffer: DDP would broadcast it, and neither
        # gloo nor gyre broadcasts bool tensors.
        self.mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)
        for name, p in self.named_parameters():  # GPT-2's initialization, as the harness's
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "mproj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.lnf(x) @ self.wte.weight.t()  # the tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def init():
    secret = hashlib.sha256(os.environ["GYRE_SECRET"].encode()).hexdigest()[:16]
    dist.init_process_group(args.backend, init_method="file:///tmp/gpt-ddp-%s-%s" % (args.backend, secret),
                            rank=int(os.environ["GYRE_RANK"]), world_size=int(os.environ["GYRE_WORLD_SIZE"]),
                            timeout=datetime.timedelta(seconds=300))


def main():
    torch.set_num_threads(1)  # one core a rank, as gyre-train's OpenBLAS
    torch.manual_seed(1)
    init()
    rank, size = dist.get_rank(), dist.get_world_size()
    if args.batch % size:
        sys.exit("gpt_ddp: --batch %d does not split into %d ranks" % (args.batch, size))
    local = args.batch // size
    with open(args.data, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    model = Gpt(256, args.seq, args.layers, args.dim, args.heads)
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(1000 + rank)

    def batch():
        starts = torch.randint(0, len(data) - args.seq - 1, (local,), generator=gen)
        x = torch.stack([data[s:s + args.seq] for s in starts])
        y = torch.stack([data[s + 1:s + args.seq + 1] for s in starts])
        return x, y

    def step(sync):
        x, y = batch()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        if sync:
            loss = ddp(x, y)
            loss.backward()
        else:
            with ddp.no_sync():
                loss = ddp(x, y)
                loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return time.perf_counter() - t0, loss.item()

    for _ in range(args.warmup):
        step(True)
    dist.barrier()
    sync, nosync = [], []
    for _ in range(args.steps):
        sync.append(step(True)[0])
        nosync.append(step(False)[0])
    # Both ranks' times: the slower rank's median sets the pace.
    t = torch.tensor([statistics.median(sync), statistics.median(nosync)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        tokens = args.batch * args.seq
        r = {"backend": args.backend, "ranks": size, "step_ms": 1e3 * t[0].item(), "nosync_ms": 1e3 * t[1].item(),
             "tokens_per_s": tokens / t[0].item(), "params": sum(p.numel() for p in model.parameters()),
             "bucket_cap_mb": args.bucket_cap_mb, "torch": torch.__version__}
        print(json.dumps(r), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(r, f)
    dist.barrier()
    # Out without the interpreter's teardown: torch 1.13 can deadlock there
    # (ProcessGroupGloo's destructor, called from the Reducer's, joins a
    # thread that waits for the GIL the destructor's thread holds).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


main()
