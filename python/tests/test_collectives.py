"""Every collective, checked exactly: inputs are small integers (in float
types too), so each result is known bit for bit on every rank."""

import array

import numpy as np
import pytest

import gyre

ALL_TYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64]
SOME_TYPES = [np.uint8, np.int32, np.float32, np.float64]
COUNT = 257  # a prime: no algorithm's blocks divide it evenly


def inputs(rank, count=COUNT, dtype=np.float32):
    """Rank r holds i % 7 + 2r: sums, averages, maxima and minima are exact in every type."""
    return (np.arange(count) % 7 + 2 * rank).astype(dtype)


def prod_inputs(rank, count=COUNT, dtype=np.float32):
    return (1 + (np.arange(count) + rank) % 2).astype(dtype)  # 1s and 2s: products stay small


def expected(op, n, count=COUNT, dtype=np.float32):
    make = prod_inputs if op == "prod" else inputs
    every = np.stack([make(r, count, np.float64) for r in range(n)])
    if op == "sum":
        want = every.sum(0)
    elif op == "prod":
        want = every.prod(0)
    elif op == "max":
        want = every.max(0)
    elif op == "min":
        want = every.min(0)
    else:  # avg: i % 7 + n - 1, exact in every type
        want = every.sum(0) / n
    return want.astype(dtype)


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
def test_allreduce_in_place(comm, dtype, op):
    x = (prod_inputs if op == "prod" else inputs)(comm.rank, dtype=dtype)
    got = comm.allreduce(x, op=op)
    assert got is x
    np.testing.assert_array_equal(x, expected(op, comm.size, dtype=dtype))


@pytest.mark.parametrize("dtype", [t for t in ALL_TYPES if np.issubdtype(t, np.integer)], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("op", ["max", "min"])
def test_integer_signedness(comm, dtype, op):
    """Bit patterns 0x7f..f, 0x80..0, ... across the ranks: the largest and
    smallest differ between a signed type and its unsigned twin, so a type
    mapped to the wrong one fails here (small positive values cannot tell)."""
    bits = np.dtype(dtype).itemsize * 8
    unsigned = np.dtype(f"u{bits // 8}")
    pattern = lambda r: np.array([(1 << (bits - 1)) - 1 + r], unsigned).view(dtype)  # noqa: E731
    x = pattern(comm.rank)
    comm.allreduce(x, op=op)
    every = np.concatenate([pattern(r) for r in range(comm.size)])
    assert x[0] == (every.max() if op == "max" else every.min())


@pytest.mark.parametrize("dtype", SOME_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("op", [gyre.SUM, gyre.MAX, gyre.Op.MIN, 4])
def test_allreduce_out_of_place(comm, dtype, op):
    x = inputs(comm.rank, dtype=dtype).reshape(1, COUNT)  # shapes may differ; counts may not
    keep = x.copy()
    out = np.empty(COUNT, dtype)
    got = comm.allreduce(x, op=op, out=out)
    assert got is out
    np.testing.assert_array_equal(out, expected(["sum", "prod", "max", "min", "avg"][int(op)], comm.size, dtype=dtype))
    np.testing.assert_array_equal(x, keep)  # the input is untouched


def test_allreduce_empty_and_scalar(comm):
    empty = np.empty(0, np.float32)
    assert comm.allreduce(empty).size == 0
    one = np.array(3.0)  # 0-d arrays are one element
    comm.allreduce(one)
    assert one == 3.0 * comm.size


def test_premulsum(comm):
    n = comm.size
    x = inputs(comm.rank, dtype=np.int32)
    comm.allreduce(x, op=gyre.PreMulSum(3))
    np.testing.assert_array_equal(x, 3 * expected("sum", n, dtype=np.int32))
    y = inputs(comm.rank, dtype=np.float64)
    out = comm.allreduce(y, op=gyre.PreMulSum(0.5), out=np.empty_like(y))
    np.testing.assert_array_equal(out, expected("sum", n, dtype=np.float64) / 2)
    z = inputs(comm.rank, count=n * 5, dtype=np.float32)
    got = comm.reducescatter(z, op=gyre.PreMulSum(2.0))
    np.testing.assert_array_equal(got, 2 * expected("sum", n, n * 5)[comm.rank * 5:(comm.rank + 1) * 5])


def bf16_bits(values):
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_bfloat16_as_raw_bits(comm):
    bits = bf16_bits(inputs(comm.rank))
    comm.allreduce(bits, op="sum", dtype="bfloat16")
    np.testing.assert_array_equal(bf16_values(bits), expected("sum", comm.size))
    bits = bf16_bits(inputs(comm.rank))
    comm.allreduce(bits, op=gyre.PreMulSum(0.5), dtype="bfloat16")
    np.testing.assert_array_equal(bf16_values(bits), expected("sum", comm.size) / 2)


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.float64], ids=lambda t: np.dtype(t).name)
def test_broadcast(comm, dtype):
    for root in range(comm.size):
        x = inputs(comm.rank, dtype=dtype)
        assert comm.broadcast(x, root=root) is x
        np.testing.assert_array_equal(x, inputs(root, dtype=dtype))
        # Out of place; off the root, x may be omitted.
        src = inputs(comm.rank, dtype=dtype) if comm.rank == root else None
        out = comm.broadcast(src, root=root, out=np.zeros(COUNT, dtype))
        np.testing.assert_array_equal(out, inputs(root, dtype=dtype))


@pytest.mark.parametrize("op", ["sum", "max"])
def test_reduce(comm, op):
    for root in range(comm.size):
        x = inputs(comm.rank, dtype=np.int64)
        got = comm.reduce(x, op=op, root=root)
        if comm.rank == root:
            assert got is x
            np.testing.assert_array_equal(x, expected(op, comm.size, dtype=np.int64))
        else:
            assert got is None
            np.testing.assert_array_equal(x, inputs(comm.rank, dtype=np.int64))  # read only
        out = np.zeros(COUNT, np.int64)
        got = comm.reduce(inputs(comm.rank, dtype=np.int64), op=op, root=root, out=out)
        want = expected(op, comm.size, dtype=np.int64) if comm.rank == root else np.zeros(COUNT, np.int64)
        np.testing.assert_array_equal(out, want)
        assert (got is out) == (comm.rank == root)


@pytest.mark.parametrize("dtype", SOME_TYPES, ids=lambda t: np.dtype(t).name)
def test_allgather(comm, dtype):
    n = comm.size
    x = inputs(comm.rank, count=6, dtype=dtype).reshape(2, 3)
    got = comm.allgather(x)
    assert got.shape == (n, 2, 3) and got.dtype == np.dtype(dtype)
    for r in range(n):
        np.testing.assert_array_equal(got[r], inputs(r, count=6, dtype=dtype).reshape(2, 3))
    # In place: this rank's input is its own block of the output.
    out = np.zeros((n, 6), dtype)
    out[comm.rank] = inputs(comm.rank, count=6, dtype=dtype)
    comm.allgather(out[comm.rank], out=out)
    np.testing.assert_array_equal(out, np.stack([inputs(r, count=6, dtype=dtype) for r in range(n)]))


@pytest.mark.parametrize("op", ["sum", "min", "avg"])
def test_reducescatter(comm, op):
    n, me = comm.size, comm.rank
    x = inputs(me, count=n * 11, dtype=np.float32).reshape(n * 11, 1)
    want = expected(op, n, count=n * 11).reshape(n * 11, 1)[me * 11:(me + 1) * 11]
    got = comm.reducescatter(x, op=op)
    assert got.shape == (11, 1)  # the first axis split in n
    np.testing.assert_array_equal(got, want)
    # In place: the output is this rank's block of the input.
    x = inputs(me, count=n * 11, dtype=np.float32)
    block = x[me * 11:(me + 1) * 11]
    assert comm.reducescatter(x, op=op, out=block) is block
    np.testing.assert_array_equal(block, want.ravel())


def alltoall_input(rank, n, per):
    """Element k of the block for rank j: 100 * rank + 10 * j + k."""
    return np.array([100 * rank + 10 * j + k for j in range(n) for k in range(per)], np.int32)


def test_alltoall(comm):
    n, me = comm.size, comm.rank
    want = np.array([100 * j + 10 * me + k for j in range(n) for k in range(3)], np.int32)
    out = comm.alltoall(alltoall_input(me, n, 3), out=np.empty(3 * n, np.int32))
    np.testing.assert_array_equal(out, want)
    x = alltoall_input(me, n, 3)
    assert comm.alltoall(x) is x  # in place
    np.testing.assert_array_equal(x, want)


def test_alltoallv(comm):
    n, me = comm.size, comm.rank
    count = lambda src, dst: (src + 2 * dst) % 3  # noqa: E731 -- zero counts included
    sendcounts = [count(me, j) for j in range(n)]
    recvcounts = [count(j, me) for j in range(n)]
    x = np.concatenate([np.full(count(me, j), 10 * me + j, np.int64) for j in range(n)])
    got = comm.alltoallv(x, sendcounts, recvcounts)
    want = np.concatenate([np.full(count(j, me), 10 * j + me, np.int64) for j in range(n)])
    np.testing.assert_array_equal(got, want)
    # Explicit displacements: a gap of 2 elements before each received block.
    rdispls = [sum(recvcounts[:j]) + 2 * (j + 1) for j in range(n)]
    out = np.full(sum(recvcounts) + 2 * n, -1, np.int64)
    comm.alltoallv(x, sendcounts, recvcounts, rdispls=rdispls, out=out)
    for j in range(n):
        np.testing.assert_array_equal(out[rdispls[j]:rdispls[j] + recvcounts[j]], np.full(recvcounts[j], 10 * j + me))
        np.testing.assert_array_equal(out[rdispls[j] - 2:rdispls[j]], [-1, -1])


def test_gather_and_scatter(comm):
    n, me = comm.size, comm.rank
    for root in range(n):
        got = comm.gather(inputs(me, count=5, dtype=np.uint32), root=root)
        if me == root:
            np.testing.assert_array_equal(got, np.stack([inputs(r, count=5, dtype=np.uint32) for r in range(n)]))
        else:
            assert got is None
        full = np.arange(n * 4, dtype=np.float64).reshape(n, 4) + 1000 * root
        got = comm.scatter(full if me == root else np.empty_like(full), root=root)
        np.testing.assert_array_equal(got, full[me:me + 1])
        out = np.zeros(4, np.float64)
        comm.scatter(full if me == root else None, root=root, out=out)
        np.testing.assert_array_equal(out, full[me])


def test_send_recv_pairs(comm):
    n, me = comm.size, comm.rank
    # Blocking pairs 0->1, 2->3: each send meets a waiting receive.
    if me % 2 == 0 and me + 1 < n:
        comm.send(inputs(me, dtype=np.float64), peer=me + 1)
    elif me % 2 == 1:
        got = comm.recv(np.empty(COUNT, np.float64), peer=me - 1)
        np.testing.assert_array_equal(got, inputs(me - 1, dtype=np.float64))


def test_group_ring(comm):
    n, me = comm.size, comm.rank
    right, left = (me + 1) % n, (me - 1) % n
    out = np.empty(COUNT, np.int32)
    with gyre.group():
        comm.send(inputs(me, dtype=np.int32), peer=right)  # a temporary: the group keeps it alive
        comm.recv(out, peer=left)
    np.testing.assert_array_equal(out, inputs(left, dtype=np.int32))


def test_group_of_collectives(comm):
    with gyre.group():
        a = comm.allreduce(inputs(comm.rank, dtype=np.float32), op="max")
        b = comm.allgather(np.array([comm.rank], np.int64))
    np.testing.assert_array_equal(a, expected("max", comm.size))
    np.testing.assert_array_equal(b.ravel(), np.arange(comm.size))


def test_barrier(comm):
    comm.barrier()


def test_buffer_protocol(comm):
    n = comm.size
    raw = bytearray(np.full(4, comm.rank + 1, np.int32).tobytes())
    assert comm.allreduce(raw, dtype="int32") is raw
    np.testing.assert_array_equal(np.frombuffer(raw, np.int32), np.full(4, n * (n + 1) // 2))
    doubles = array.array("d", [comm.rank] * 3)  # its format says float64
    comm.allreduce(doubles, op="max")
    assert list(doubles) == [n - 1.0] * 3
    view = memoryview(bytearray(np.full(2, comm.rank + 7, np.uint32).tobytes()))
    comm.broadcast(view, root=0, dtype=np.uint32)
    np.testing.assert_array_equal(np.frombuffer(view, np.uint32), [7, 7])
    # A read-only buffer is fine where gyre only reads it.
    gathered = comm.allgather(bytes([comm.rank]) * 2)
    np.testing.assert_array_equal(gathered, [[r, r] for r in range(n)])


def test_rank_size_repr(comm):
    assert 0 <= comm.rank < comm.size
    assert repr(comm) == f"<gyre.Comm rank {comm.rank} of {comm.size}>"
    assert gyre.version() >= (0, 1, 0)
    assert gyre.__version__ == ".".join(map(str, gyre.version()))
