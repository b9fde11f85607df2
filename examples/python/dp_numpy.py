"""Data-parallel training of a small numpy MLP with gyre.

Every rank holds the same model and its own shard of the data. Each step,
every rank computes gradients on its shard, and gyre averages them across
ranks (AllReduce, op "avg"), so every rank applies the same update and the
replicas stay identical, bit for bit.

    gyrerun -n 2 python3 examples/python/dp_numpy.py

(with the gyre package on PYTHONPATH and GYRE_LIBRARY naming libgyre.so.0
if it is not installed; see docs/python.md). The backward pass starts the
second layer's AllReduce without waiting (iallreduce) and computes the first
layer's gradients meanwhile, as training frameworks overlap communication
with computation.
"""

import os
import sys

import numpy as np

try:
    import gyre
except ImportError:  # run from a source checkout: the package is in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import gyre

IN, HIDDEN, SAMPLES_PER_RANK, STEPS, LR = 4, 32, 256, 300, 0.1


def shard(rank):
    """This rank's data: a smooth target the model can learn, different samples per rank."""
    rng = np.random.default_rng(1000 + rank)
    x = rng.uniform(-1, 1, (SAMPLES_PER_RANK, IN)).astype(np.float32)
    y = (np.sin(2 * x[:, :1]) + x[:, 1:2] * x[:, 2:3] - 0.5 * x[:, 3:4]).astype(np.float32)
    return x, y


def main():
    comm = gyre.init()
    x, y = shard(comm.rank)

    # Rank 0 initialises the model; broadcast gives every replica its values.
    rng = np.random.default_rng(0 if comm.rank == 0 else None)
    params = {
        "w1": (rng.standard_normal((IN, HIDDEN)) / np.sqrt(IN)).astype(np.float32),
        "b1": np.zeros(HIDDEN, np.float32),
        "w2": (rng.standard_normal((HIDDEN, 1)) / np.sqrt(HIDDEN)).astype(np.float32),
        "b2": np.zeros(1, np.float32),
    }
    for p in params.values():
        comm.broadcast(p, root=0)

    losses = []
    for step in range(STEPS):
        # Forward.
        h = np.tanh(x @ params["w1"] + params["b1"])
        pred = h @ params["w2"] + params["b2"]
        err = pred - y
        loss = np.array([np.mean(err**2)], np.float32)

        # Backward, last layer first: its gradients travel while the first
        # layer's are computed.
        g_out = 2 * err / len(x)
        g2 = np.concatenate([(h.T @ g_out).ravel(), g_out.sum(0)])
        second = comm.iallreduce(g2, op="avg")
        g_h = (g_out @ params["w2"].T) * (1 - h**2)
        g1 = np.concatenate([(x.T @ g_h).ravel(), g_h.sum(0)])
        comm.allreduce(g1, op="avg")
        second.wait()

        # The same averaged gradients on every rank: the same update.
        params["w1"] -= LR * g1[: IN * HIDDEN].reshape(IN, HIDDEN)
        params["b1"] -= LR * g1[IN * HIDDEN:]
        params["w2"] -= LR * g2[:HIDDEN].reshape(HIDDEN, 1)
        params["b2"] -= LR * g2[HIDDEN:]

        comm.allreduce(loss, op="avg")  # the loss over all ranks' data
        losses.append(float(loss[0]))
        if comm.rank == 0 and (step % 50 == 0 or step == STEPS - 1):
            print(f"step {step:3d}  loss {losses[-1]:.5f}", flush=True)

    # Every replica must hold exactly the same parameters.
    flat = np.concatenate([p.ravel() for p in params.values()])
    every = comm.allgather(flat)
    identical = all(np.array_equal(every[r].view(np.uint32), flat.view(np.uint32)) for r in range(comm.size))
    assert identical, f"rank {comm.rank}: parameters differ between ranks"
    assert losses[-1] < losses[0] / 5, f"loss did not fall enough: {losses[0]:.5f} -> {losses[-1]:.5f}"
    print(f"rank {comm.rank}: parameters identical on {comm.size} ranks; "
          f"loss {losses[0]:.5f} -> {losses[-1]:.5f}", flush=True)
    comm.close()


if __name__ == "__main__":
    main()
