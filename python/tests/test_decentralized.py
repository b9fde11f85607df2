"""Decentralized averaging with state: comm.decentralized (low-precision
decentralized SGD over the ring) and comm.averager (asynchronous model
averaging in a background thread).

Every rank can regenerate every rank's initial model and local update
(seeded by rank), so each runs the whole ring's step in NumPy, with the
codecs' arithmetic as kernels/common/codec.h states it (float32 throughout,
unfused), and checks its own model bit for bit. A replica of a neighbour
adds the same decoded changes as the neighbour's own model, so it always
equals it: the reference keeps one model per rank."""

import gc
import sys
import threading
import time

import numpy as np
import pytest

import gyre
from test_errors import raises

COUNT = 2 * 4096 + 1811  # codec chunks are 4096 values: two whole ones and a part
CHUNK = 4096
LANES = 256
CODECS = ["fp16", "bf16", "int8", "onebit"]
F32 = np.float32


def initial(rank, count=COUNT):
    """Rank's initial model: distinct on every rank."""
    return np.random.default_rng(5000 + rank).uniform(-1, 1, count).astype(F32)


def local_update(model, rank, step):
    """A gradient step towards a target of the rank's own, in place (as a user's SGD step)."""
    target = np.random.default_rng(6000 + 100 * step + rank).uniform(-2, 2, model.size).astype(F32)
    model -= F32(0.25) * (model - target)
    return model


# ---- the codecs' arithmetic (kernels/common/codec.h), encode then decode ----


def wire_fp16(x):
    return x.astype(np.float16).astype(F32)  # round to nearest even, as arith::floatToHalf


def wire_bf16(x):
    bits = x.view(np.uint32)
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return (bits << np.uint32(16)).astype(np.uint32).view(F32)


def wire_int8(x):
    out = np.empty_like(x)
    for b in range(0, x.size, CHUNK):
        c = x[b:b + CHUNK]
        lo, hi = F32(c.min()) + F32(0), F32(c.max()) + F32(0)  # a zero end is +0.0
        span = hi - lo
        inv = F32(255) / span if 0 < span < np.inf else F32(0)
        step = span / F32(255) if inv > 0 else F32(0)
        q = (c - lo) * inv
        codes = np.where(q > 0, np.minimum(np.rint(q), F32(255)), F32(0)).astype(F32)  # ties to even
        out[b:b + CHUNK] = lo + codes * step
    return out


def wire_onebit(x):
    out = np.empty_like(x)
    for b in range(0, x.size, CHUNK):
        c = x[b:b + CHUNK]
        mags = np.zeros(CHUNK, F32)
        mags[:c.size] = np.abs(c)
        lane = np.zeros(LANES, F32)
        for k in range(CHUNK // LANES):  # lane l adds |x[l]|, |x[l + 256]|, ... in turn
            lane = lane + mags[k * LANES:(k + 1) * LANES]
        s = LANES // 2
        while s >= 1:  # then a tree
            lane[:s] = lane[:s] + lane[s:2 * s]
            s //= 2
        scale = lane[0] / F32(c.size)
        out[b:b + CHUNK] = np.where(c < 0, -scale, scale)
    return out


WIRE = {"fp16": wire_fp16, "bf16": wire_bf16, "int8": wire_int8, "onebit": wire_onebit}


def neighbours(rank, n):
    """Left, then right; one on two ranks."""
    return [(rank - 1) % n] + ([(rank + 1) % n] if n >= 3 else [])


def reference_step(prev, xs, codec):
    """Every rank's step: prev[r] is rank r's model as its neighbours hold it, xs[r] its
    model after the local update. Returns the new prev (each rank's returned model)."""
    n = len(prev)
    new = []
    for r in range(n):
        peers = neighbours(r, n)
        w = F32(1) / F32(len(peers) + 1)
        pull = np.zeros_like(prev[r])
        for j in peers:
            pull = pull + (prev[j] - prev[r])
        change = (xs[r] - prev[r]) + w * pull
        new.append(prev[r] + WIRE[codec](change))
    return new


def same_bits(a, b):
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def spread(comm, x):
    """The largest distance of any rank's model from the ranks' mean."""
    rows = comm.allgather(x).astype(np.float64)
    return np.abs(rows - rows.mean(axis=0)).max()


# ---- low-precision decentralized SGD ----


def test_the_codecs_reference_is_the_librarys(comm):
    """The reference's encode and decode against a compressed AllGather's, which
    encodes each rank's share once and decodes it on every rank."""
    def share(r):
        return np.random.default_rng(r).normal(0, 3, COUNT).astype(F32)

    for codec in CODECS:
        rows = comm.allgather(share(comm.rank), codec=codec)
        for r in range(comm.size):
            assert same_bits(rows[r], WIRE[codec](share(r))), f"{codec}, rank {r}'s share"


@pytest.mark.parametrize("codec", CODECS)
def test_each_step_is_the_reference(comm, codec):
    """With a local update between steps, every rank's model after each step equals the
    reference's bit for bit."""
    n = comm.size
    prev = [initial(r) for r in range(n)]
    x = initial(comm.rank)
    with comm.decentralized(x, codec) as d:
        assert d.codec == gyre.Codec[codec.upper()] and d.count == COUNT
        for step in range(6):
            xs = [local_update(prev[r].copy(), r, step) for r in range(n)]
            local_update(x, comm.rank, step)
            assert same_bits(x, xs[comm.rank])
            assert d.step(x) is x  # in place
            prev = reference_step(prev, xs, codec)
            assert same_bits(x, prev[comm.rank]), f"{codec} step {step}: max difference " \
                f"{np.abs(x.astype(np.float64) - prev[comm.rank]).max()}"


@pytest.mark.parametrize("codec", ["fp16", "bf16", "int8"])
def test_models_drift_together(comm, codec):
    """No local update: the ranks' models, different at first, approach each other
    (gossip over the ring; the codec's error shrinks with the changes)."""
    x = initial(comm.rank)
    before = spread(comm, x)
    with comm.decentralized(x, codec=codec) as d:
        for _ in range(40):
            d.step(x)
    after = spread(comm, x)
    assert after < before / 1000, f"{codec}: spread {before} -> {after}"
    assert np.isfinite(x).all()


@pytest.mark.parametrize("codec", CODECS)
def test_identical_models_stay_as_they_are(comm, codec):
    """The same model on every rank and no local update: nothing changes, bit for bit
    (a zero change encodes to exactly zero with every codec)."""
    same = initial(0)
    x = same.copy()
    with comm.decentralized(x, gyre.Codec[codec.upper()]) as d:
        for _ in range(5):
            d.step(x)
            assert same_bits(x, same), codec


def test_a_raw_buffer_and_dtype(comm):
    """As elsewhere, any buffer works, and dtype= reads a raw one's bytes."""
    x = initial(comm.rank, 1000)
    raw = bytearray(x.tobytes())
    with comm.decentralized(raw, "fp16", dtype="float32") as d, \
            comm.decentralized(x, "fp16") as e:
        d.step(raw, dtype=np.float32)
        e.step(x)
        assert same_bits(np.frombuffer(raw, F32), x)


def test_decentralized_lifetime(comm):
    x = initial(comm.rank, 64)
    d = comm.decentralized(x, gyre.Codec.INT8)
    assert repr(d) == "<gyre.Decentralized int8, 64 x float32>" and not d.closed
    with d:
        d.step(x)
    assert d.closed and repr(d).startswith("<gyre.Decentralized closed")
    d.close()  # closing twice is harmless
    with raises(gyre.InvalidUsage, "decentralized object is closed"):
        d.step(x)

    dropped = comm.decentralized(x, "fp16")._finalizer
    gc.collect()
    assert not dropped.alive, "dropped without close, it is destroyed when collected"

    child = comm.split(0)
    d = child.decentralized(x, "bf16")
    with raises(gyre.InvalidUsage, "gyreDecentralizedStep inside a group"):
        with gyre.group():
            d.step(x)
    child.close()  # it may outlive its communicator, but not use it
    with raises(gyre.InvalidUsage, "communicator is closed"):
        d.step(x)
    d.close()
    comm.barrier()


class FakeDeviceArray:
    """Claims to be GPU memory: the binding must refuse it before reading it."""

    __cuda_array_interface__ = {"shape": (8,), "typestr": "<f4", "data": (0, False), "version": 3}


def test_what_decentralized_does_not_take(comm):
    """Every refusal comes before any message: the ranks stay in step."""
    with raises(gyre.InvalidArgument, "gyreDecentralizedCreate", "float32 models, not type 8"):
        comm.decentralized(np.zeros(64), "int8")
    with raises(gyre.InvalidArgument, "gyreDecentralizedCreate", "codec 0 is not one that encodes"):
        comm.decentralized(np.zeros(64, F32), "none")
    with raises(gyre.InvalidArgument, "codec 'zip' is not one of"):
        comm.decentralized(np.zeros(64, F32), "zip")
    with raises(gyre.InvalidArgument, "model is a device array", "host memory"):
        comm.decentralized(FakeDeviceArray(), "int8")
    x = np.zeros(64, F32)
    with comm.decentralized(x, "int8") as d:
        # The step takes a bare pointer: the binding checks what the library cannot see.
        with raises(gyre.InvalidArgument, "model has 32 elements", "made for a model of 64"):
            d.step(np.zeros(32, F32))
        with raises(gyre.InvalidArgument, "model has dtype float64", "float32"):
            d.step(np.zeros(64))
        frozen = np.zeros(64, F32)
        frozen.setflags(write=False)
        with raises(gyre.InvalidArgument, "model is read-only"):
            d.step(frozen)
        with raises(gyre.InvalidArgument, "model is not C-contiguous"):
            d.step(np.zeros(128, F32)[::2])
        with raises(gyre.InvalidArgument, "model is a device array"):
            d.step(FakeDeviceArray())
        d.step(x)  # still usable, every rank in step
    comm.barrier()


# ---- asynchronous model averaging ----


def test_averager_averages_what_the_ranks_add(comm):
    """Each rank starts at its rank; rank 0 adds 1.0 twenty times under the lock while
    the averager runs; after a barrier and stop every rank holds the same bits, the
    mean of what was there (what the caller added is kept, never overwritten)."""
    n = comm.size
    model = np.full(1000, comm.rank, F32)
    avg = comm.averager(model)
    assert avg.model is model and not avg.stopped and avg.rounds is None
    assert repr(avg) == "<gyre.Averager running, 1000 x float32>"
    for _ in range(20):
        if comm.rank == 0:
            with avg.locked() as m:
                assert m is model
                model += F32(1.0)
        time.sleep(0.005)
    comm.barrier()  # every rank's last update made
    rounds = avg.stop()
    assert rounds >= 1 and avg.rounds == rounds and avg.stopped
    assert repr(avg) == f"<gyre.Averager stopped after {rounds} round{'s' if rounds != 1 else ''}, 1000 x float32>"
    assert avg.stop() == rounds  # idempotent
    rows = comm.allgather(model.view(np.uint32))
    assert all(np.array_equal(rows[0], row) for row in rows), "the ranks left with different bits"
    want = (sum(range(n)) + 20) / n
    assert np.abs(model.astype(np.float64) - want).max() < 1e-4, (model[:4], want)
    every = comm.allgather(np.array([rounds], np.uint64)).ravel()
    assert (every == rounds).all(), f"the ranks stop on the same round: {every}"


def test_averager_with_block_and_calls_beside_it(comm):
    """`with` stops it; the caller's own calls on comm go on while it runs."""
    model = np.full(100, 2.0 * comm.rank, F32)
    with comm.averager(model) as avg:
        total = comm.allreduce(np.ones(10, np.int32))
        assert (total == comm.size).all()
        with avg.locked():
            model[0] += 1.0
        comm.barrier()
    assert avg.stopped and avg.rounds >= 1
    assert avg.close() is None and avg.stop() == avg.rounds  # closing or stopping again changes nothing
    with raises(gyre.InvalidUsage, "averager is stopped"):
        with avg.locked():
            pass
    rows = comm.allgather(model)
    assert all(same_bits(rows[0], row) for row in rows)
    # The mean of 2 * rank is size - 1; every rank added 1 to element 0.
    assert abs(rows[0][1] - (comm.size - 1)) < 1e-5 and abs(rows[0][0] - comm.size) < 1e-5, rows[0][:2]


def test_averager_lock_rules(comm):
    """What would deadlock in C (a second lock on the thread, stop under the lock) is
    refused; stop() on another thread waits for the locked block to end."""
    model = np.zeros(100, F32)
    avg = comm.averager(model)
    with avg.locked():
        with raises(gyre.InvalidUsage, "not re-entrant"):
            with avg.locked():
                pass
        with raises(gyre.InvalidUsage, "stop() inside avg.locked()"):
            avg.stop()
    inside, times = threading.Event(), {}

    def hold():
        with avg.locked():
            inside.set()
            time.sleep(0.2)
            model[:] += 1.0
            times["left"] = time.monotonic()

    t = threading.Thread(target=hold)
    t.start()
    inside.wait()
    comm.barrier()  # every rank's thread is in its block: the last round comes after every update
    avg.stop()
    stopped = time.monotonic()
    t.join()
    assert stopped >= times["left"], "stop() returned while another thread held the lock"
    assert abs(model[0] - 1.0) < 1e-6, model[0]  # every rank added 1 before its stop's last round


def test_averager_dropped_without_stop_warns(comm):
    """Stopping from the collector is not safe (it blocks on a round and ends every
    rank's averaging): a dropped averager warns and goes on, its model kept alive, until
    another rank stops (all stop on the same round)."""
    if comm.size < 2:
        pytest.skip("another rank must stop it")
    model = np.zeros(100, F32)
    refs = sys.getrefcount(model)
    avg = comm.averager(model)
    if comm.rank == 0:
        try:
            with pytest.warns(RuntimeWarning, match=r"dropped or left at exit without stop\(\)"):
                del avg
                gc.collect()
            assert sys.getrefcount(model) > refs, "the model stays referenced for good"
        finally:
            comm.barrier()  # the ranks stay in step even if this rank fails
    else:
        comm.barrier()
        avg.stop()  # ends rank 0's too
    comm.barrier()


def test_what_the_averager_does_not_take(comm):
    with raises(gyre.InvalidArgument, "gyreAveragerStart", "float32 models, not type 8"):
        comm.averager(np.zeros(64))
    frozen = np.zeros(64, F32)
    frozen.setflags(write=False)
    with raises(gyre.InvalidArgument, "model is read-only"):
        comm.averager(frozen)
    with raises(gyre.InvalidArgument, "model is not C-contiguous"):
        comm.averager(np.zeros(128, F32)[::2])
    with raises(gyre.InvalidArgument, "model is a device array"):
        comm.averager(FakeDeviceArray())
    with raises(gyre.InvalidUsage, "gyreAveragerStart inside a group"):
        with gyre.group():
            comm.averager(np.zeros(64, F32))
    comm.barrier()
