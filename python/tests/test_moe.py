"""Mixture of experts: comm.moe_routing, moe_dispatch and moe_combine against
a reference that routes every rank's tokens on one rank (each rank can build
them all): top-1 and top-2, uneven tokens (rank 1 has none), capacity drops
counted exactly, a custom expert map, per-slot and weighted combine, the
backward per-slot dispatch, the counts ahead of the rows, and errors."""

import numpy as np
import pytest

import gyre
from test_errors import raises

HIDDEN = 3


def tokens_of(q, n):
    return 0 if (n > 1 and q == 1) else 3 + 2 * q


def choices_of(q, n, k, experts):
    rng = np.random.default_rng(100 + q)
    c = rng.integers(-1, experts, size=(tokens_of(q, n), k)).astype(np.int32)
    return c


def x_of(q, n):
    t = tokens_of(q, n)
    return (np.arange(t * HIDDEN, dtype=np.float32).reshape(t, HIDDEN) + 100 * q)


def reference(n, k, experts, capacity):
    """kept[q][e]: (token, slot) in priority order; dropped[q][e]."""
    kept, dropped = [], []
    for q in range(n):
        c = choices_of(q, n, k, experts)
        kq = [[] for _ in range(experts)]
        dq = [0] * experts
        for s in range(k):
            for t in range(c.shape[0]):
                e = c[t, s]
                if e < 0:
                    continue
                if capacity and len(kq[e]) >= capacity:
                    dq[e] += 1
                else:
                    kq[e].append((t, s))
        kept.append(kq)
        dropped.append(dq)
    return kept, dropped


@pytest.mark.parametrize("k,per_rank,capacity,custom", [(2, 2, 0, False), (1, 1, 2, False), (2, 2, 2, True)])
def test_dispatch_and_combine_match_the_one_rank_reference(comm, k, per_rank, capacity, custom):
    n, me = comm.size, comm.rank
    experts = per_rank * n + (1 if custom else 0)
    emap = [e % max(1, n - 1) for e in range(experts)] if custom else [e // per_rank for e in range(experts)]
    kept, dropped = reference(n, k, experts, capacity)
    r = comm.moe_routing(choices_of(me, n, k, experts), experts, expert_rank=emap if custom else None,
                         capacity=capacity)
    assert list(r.sent) == [len(kept[me][e]) for e in range(experts)]
    assert list(r.dropped) == dropped[me]
    local = [e for e in range(experts) if emap[e] == me]
    assert r.local_experts == local
    y = comm.moe_dispatch(x_of(me, n), r)
    want = [x_of(q, n)[t] for e in local for q in range(n) for (t, _) in kept[q][e]]
    want = np.array(want, dtype=np.float32).reshape(-1, HIDDEN)
    assert np.array_equal(y, want)
    rows, drops, total = r.recv_counts()
    assert total == len(want)
    assert [list(row) for row in rows] == [[len(kept[q][e]) for q in range(n)] for e in local]
    assert list(drops) == [sum(dropped[q][e] for q in range(n)) for e in local]
    # The experts: row + expert id.
    ids = np.array([e for e in local for q in range(n) for _ in kept[q][e]], dtype=np.float32)
    out = comm.moe_combine(y + ids[:, None] if len(ids) else y, r)
    c = choices_of(me, n, k, experts)
    x = x_of(me, n)
    slot = np.zeros((c.shape[0], k, HIDDEN), dtype=np.float32)
    for e in range(experts):
        for (t, s) in kept[me][e]:
            slot[t, s] = x[t] + e
    assert np.array_equal(out, slot)
    w = np.random.default_rng(7 + me).random((c.shape[0], k)).astype(np.float32)
    summed = comm.moe_combine(y + ids[:, None] if len(ids) else y, r, weights=w)
    acc = np.zeros((c.shape[0], HIDDEN), dtype=np.float32)
    for s in range(k):  # fused multiply-adds in slot order; w x 0 adds nothing where dropped
        acc = (w[:, s, None].astype(np.float64) * slot[:, s] + acc).astype(np.float32)
    assert np.array_equal(summed, acc)
    # Backward of the weighted combine: a per-slot dispatch along the same route.
    dy = np.arange(c.shape[0] * k * HIDDEN, dtype=np.float32).reshape(c.shape[0], k, HIDDEN) + me
    back = comm.moe_dispatch(dy, r, per_slot=True)
    assert back.shape == y.shape
    r.close()


def test_counts_travel_ahead_when_out_is_sized_for_the_most(comm):
    n, me = comm.size, comm.rank
    k, experts, capacity = 2, 2 * n, 2
    kept, _ = reference(n, k, experts, capacity)
    r = comm.moe_routing(choices_of(me, n, k, experts), experts, capacity=capacity)
    bound = len(r.local_experts) * n * capacity
    out = np.full((bound, HIDDEN), -7, dtype=np.float32)
    comm.moe_dispatch(x_of(me, n), r, out=out)
    total = r.recv_counts()[2]
    want = [x_of(q, n)[t] for e in r.local_experts for q in range(n) for (t, _) in kept[q][e]]
    assert np.array_equal(out[:total], np.array(want, dtype=np.float32).reshape(-1, HIDDEN))
    assert (out[total:] == -7).all()
    r.close()


def test_bad_arguments_are_named(comm):
    n = comm.size
    with raises(gyre.InvalidArgument, "not an expert in"):
        comm.moe_routing(np.array([[5 * n]], dtype=np.int32), n)
    with raises(gyre.InvalidArgument, "k 0 is not in"):
        comm.moe_routing(np.zeros((2, 0), dtype=np.int32), n)
    if n > 1:
        with raises(gyre.InvalidArgument, "is not a multiple of the"):
            comm.moe_routing(np.zeros((1, 1), dtype=np.int32), n + 1)
    r = comm.moe_routing(np.zeros((1, 1), dtype=np.int32), n)
    with raises(gyre.InvalidArgument, "not known yet"):
        comm.moe_combine(np.zeros((1, HIDDEN), dtype=np.float32), r)
    r.close()
