"""Sequence parallelism (DeepSpeed-Ulysses): comm.seq_to_heads and
comm.heads_to_seq against the whole sequence, which every rank can build:
queries alone with equal shares, packed q/k/v with grouped-query attention
and token counts that differ (one rank holding none), the sum of the copies
of a key/value head several ranks hold, the nonblocking forms, and errors."""

import numpy as np
import pytest

import gyre
from test_errors import raises

DIM = 4


def whole(seq_len, width, seed):
    """The whole sequence's [seq_len, width, DIM] values, the same on every rank."""
    return np.random.default_rng(seed).standard_normal((seq_len, width, DIM)).astype(np.float32)


def columns(comm, rank, heads, kv_heads, parts):
    """The sequence side's head of each of rank's share heads, in the share's order."""
    s = comm.seq_heads(heads, kv_heads=kv_heads, rank=rank)
    kv = kv_heads or heads
    cols, at = [], 0
    if "q" in parts:
        cols += range(s.q_first, s.q_first + s.q_count)
        at = heads
    for p in "kv":
        if p in parts:
            cols += range(at + s.kv_first, at + s.kv_first + s.kv_count)
            at += kv
    return cols


def bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_seq_heads_deals_heads_evenly(comm):
    n = comm.size
    heads = 2 * n + 1
    shares = [comm.seq_heads(heads, rank=r) for r in range(n)]
    assert [s.q_count for s in shares] == [heads // n + (r < heads % n) for r in range(n)]
    assert [s.q_first for s in shares] == [sum(x.q_count for x in shares[:r]) for r in range(n)]
    assert comm.seq_heads(heads) == shares[comm.rank]


def test_queries_to_heads_and_back_with_equal_shares(comm):
    n, me = comm.size, comm.rank
    heads, each = 2 * n, 3
    seq = whole(each * n, heads, 1)
    mine = np.ascontiguousarray(seq[me * each:(me + 1) * each])
    got = comm.seq_to_heads(mine, heads)
    assert bits(got, np.ascontiguousarray(seq[:, columns(comm, me, heads, None, "q")]))
    back = comm.heads_to_seq(got, heads)
    assert bits(back, mine)


@pytest.mark.parametrize("kv_of", [lambda n: 1, lambda n: n + 1], ids=["kv_1", "kv_more_than_ranks"])
def test_packed_qkv_with_gqa_and_token_counts_that_differ(comm, kv_of):
    n, me = comm.size, comm.rank
    kv = kv_of(n)
    heads = 2 * kv
    width = heads + 2 * kv
    tokens = [(3 * r + 2) % 5 + 1 for r in range(n)]
    tokens[1 % n] = 0  # a rank with no tokens
    first = np.cumsum([0] + tokens)
    seq = whole(first[-1], width, 2)
    cols = columns(comm, me, heads, kv, "qkv")
    mine = np.ascontiguousarray(seq[first[me]:first[me + 1]])
    out = np.empty((first[-1], len(cols), DIM), np.float32)
    assert comm.seq_to_heads(mine, heads, kv_heads=kv, parts="qkv", tokens=tokens, out=out) is out
    assert bits(out, np.ascontiguousarray(seq[:, cols]))
    # Back: every holder of a key/value head sends the same values, so the
    # head comes back as that many times them (small integers: exact).
    holders = np.zeros(width, np.int64)
    for r in range(n):
        holders[columns(comm, r, heads, kv, "qkv")] += 1
    ints = np.floor(seq * 4).astype(np.float32)
    back = comm.heads_to_seq(np.ascontiguousarray(ints[:, cols]), heads, kv_heads=kv, parts="qkv", tokens=tokens)
    want = ints[first[me]:first[me + 1]] * holders[None, :, None].astype(np.float32)
    assert bits(back, np.ascontiguousarray(want))
    assert holders.max() > 1 or n == 1 or kv > n  # (with one kv head every rank holds it)


def test_nonblocking_forms_return_requests(comm):
    n, me = comm.size, comm.rank
    heads = n + 1
    seq = whole(2 * n, heads, 3)
    mine = np.ascontiguousarray(seq[2 * me:2 * me + 2])
    req = comm.iseq_to_heads(mine, heads)
    got = req.wait()
    assert bits(got, np.ascontiguousarray(seq[:, columns(comm, me, heads, None, "q")]))
    assert bits(comm.iheads_to_seq(got, heads).wait(), mine)


def test_errors_name_the_argument(comm):
    x = np.zeros((2, 4, DIM), np.float32)
    with raises(gyre.InvalidArgument, "parts must be q, k, v"):
        comm.seq_to_heads(x, 4, parts="vq")
    with raises(gyre.InvalidArgument, "tokens must be"):
        comm.seq_to_heads(x, 4, tokens=[2] * (comm.size + 1))
    with raises(gyre.InvalidArgument, "kvHeads 3 does not divide heads 4"):
        comm.seq_to_heads(x, 4, kv_heads=3)
    with raises(gyre.InvalidArgument, "x has shape"):
        comm.seq_to_heads(np.zeros(8, np.float32), 4)
    with raises(gyre.InvalidArgument, "x holds 2 tokens but tokens says 3"):
        comm.seq_to_heads(x, 4, tokens=[3] * comm.size)
