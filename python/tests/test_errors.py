"""Errors: each raises the gyre.Error subclass for its result code, with a
message naming the argument. Python-side checks and the library's own raise
the same classes."""

import numpy as np
import pytest

import gyre


def raises(cls, *fragments):
    """pytest.raises that also checks the message names what went wrong."""

    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(cls)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            message = str(self.info.value)
            for f in fragments:
                assert f in message, f"{f!r} not in {message!r}"
            return handled

    return _Check()


def test_hierarchy():
    for cls, code in [(gyre.InvalidArgument, 4), (gyre.InvalidUsage, 5), (gyre.RemoteError, 6), (gyre.Timeout, 8),
                      (gyre.SystemError, 2), (gyre.InternalError, 3)]:
        assert issubclass(cls, gyre.Error) and cls.code == code
    assert issubclass(gyre.InvalidArgument, ValueError)


@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.complex64, np.bool_, np.float128])
def test_type_gyre_does_not_have(comm, dtype):
    with raises(gyre.InvalidArgument, "x has dtype", np.dtype(dtype).name, "gyre has int8"):
        comm.allreduce(np.zeros(4, dtype))


def test_bad_dtype_argument(comm):
    with raises(gyre.InvalidArgument, "dtype 'nonsense'"):
        comm.allreduce(bytearray(8), dtype="nonsense")
    with raises(gyre.InvalidArgument, "x has dtype float64 but dtype=float32"):
        comm.allreduce(np.zeros(4), dtype=np.float32)
    with raises(gyre.InvalidArgument, "x has 6 bytes", "float32"):
        comm.allreduce(bytearray(6), dtype="float32")


def test_byte_order(comm):
    with raises(gyre.InvalidArgument, "byte order", ">f4"):
        comm.allreduce(np.zeros(4, ">f4"))


def test_not_contiguous(comm):
    x = np.zeros((4, 4), np.float32)
    with raises(gyre.InvalidArgument, "x is not C-contiguous"):
        comm.allreduce(x[:, 1])
    with raises(gyre.InvalidArgument, "x is not C-contiguous"):
        comm.allreduce(x.T)
    with raises(gyre.InvalidArgument, "out is not C-contiguous"):
        comm.allreduce(np.zeros(4, np.float32), out=x[:, 0])
    with raises(gyre.InvalidArgument, "x is not C-contiguous"):
        comm.allreduce(memoryview(bytearray(16))[::2], dtype="uint8")


def test_wrong_out(comm):
    n = comm.size
    with raises(gyre.InvalidArgument, "out has 5 elements", "needs 4"):
        comm.allreduce(np.zeros(4, np.float32), out=np.zeros(5, np.float32))
    with raises(gyre.InvalidArgument, "out has dtype float64 but x has float32"):
        comm.allreduce(np.zeros(4, np.float32), out=np.zeros(4, np.float64))
    with raises(gyre.InvalidArgument, "out has 3 elements", f"needs {3 * n}"):
        comm.allgather(np.zeros(3, np.int32), out=np.zeros(3, np.int32))
    with raises(gyre.InvalidArgument, "out has", "needs 2"):
        comm.reducescatter(np.zeros(2 * n, np.int32), out=np.zeros(3, np.int32))
    readonly = np.zeros(4, np.float32)
    readonly.flags.writeable = False
    with raises(gyre.InvalidArgument, "out is read-only"):
        comm.allreduce(np.zeros(4, np.float32), out=readonly)
    with raises(gyre.InvalidArgument, "x is read-only"):
        comm.allreduce(readonly)  # in place writes x
    with raises(gyre.InvalidArgument, "x is read-only"):
        comm.allreduce(b"\0" * 8, dtype="uint8")


def test_sizes_that_do_not_split(comm):
    n = comm.size
    with raises(gyre.InvalidArgument, f"x has {n + 1} elements, not a multiple of the {n} ranks"):
        comm.reducescatter(np.zeros(n + 1, np.float32))
    with raises(gyre.InvalidArgument, "not a multiple"):
        comm.alltoall(np.zeros(n + 1, np.float32))


def test_alltoallv_arguments(comm):
    n = comm.size
    with raises(gyre.InvalidArgument, "sendcounts must be", f"{n} non-negative"):
        comm.alltoallv(np.zeros(8, np.int32), [1] * (n + 1), [1] * n)
    with raises(gyre.InvalidArgument, "recvcounts must be"):
        comm.alltoallv(np.zeros(8, np.int32), [1] * n, [-1] * n)
    with raises(gyre.InvalidArgument, "x has 1 elements but sendcounts and sdispls reach element"):
        comm.alltoallv(np.zeros(1, np.int32), [2] * n, [2] * n)
    with raises(gyre.InvalidArgument, "out has 0 elements but recvcounts"):
        comm.alltoallv(np.zeros(n, np.int32), [1] * n, [1] * n, out=np.zeros(0, np.int32))


def test_not_a_buffer_and_bad_ops(comm):
    with raises(gyre.InvalidArgument, "x is a list"):
        comm.allreduce([1, 2, 3])
    with raises(gyre.InvalidArgument, "x is None"):
        comm.allreduce(None)
    with raises(gyre.InvalidArgument, "op 'mean'"):
        comm.allreduce(np.zeros(2), op="mean")
    with raises(gyre.InvalidArgument, "op 9"):
        comm.allreduce(np.zeros(2), op=9)
    with raises(gyre.InvalidArgument, "PreMulSum scalar 0.5 is not exactly a int32"):
        comm.allreduce(np.zeros(2, np.int32), op=gyre.PreMulSum(0.5))
    with raises(gyre.InvalidArgument, "scatter needs it"):
        comm.scatter(None, root=0)
    with raises(gyre.InvalidArgument, "color 'red'"):
        comm.split("red")


@pytest.mark.parametrize("bad", [2**40, -(2**31) - 1, 2**31, "0", 1.0, True, None])
def test_integer_arguments_are_checked_not_truncated(comm, bad):
    """ctypes would truncate 2**40 to 0 (a valid root) and raise its own
    ArgumentError for "0": both are gyre.InvalidArgument naming the argument,
    raised before any rank sends anything."""
    x = np.zeros(4, np.float32)
    with raises(gyre.InvalidArgument, f"root {bad!r}" if not isinstance(bad, int) or isinstance(bad, bool)
                else f"root {bad}"):
        comm.broadcast(x, root=bad)
    for call in (lambda: comm.reduce(x, root=bad), lambda: comm.gather(x, root=bad),
                 lambda: comm.scatter(np.zeros(4 * comm.size, np.float32), root=bad), lambda: comm.ibroadcast(x, root=bad)):
        with raises(gyre.InvalidArgument, "root"):
            call()
    for call in (lambda: comm.send(x, peer=bad), lambda: comm.recv(x, peer=bad), lambda: comm.isend(x, peer=bad)):
        with raises(gyre.InvalidArgument, "peer"):
            call()
    if bad is not None:  # color None is GYRE_SPLIT_NOCOLOR
        with raises(gyre.InvalidArgument, "color"):
            comm.split(bad)
        with raises(gyre.InvalidArgument, "key"):
            comm.split(0, key=bad)
        with raises(gyre.InvalidArgument, "timeout_ms"):
            comm.split(0, timeout_ms=bad)
        with raises(gyre.InvalidArgument, "size"):
            gyre.init_rank(bad, bytes(128), 0)
        with raises(gyre.InvalidArgument, "rank"):
            gyre.init_rank(2, bytes(128), bad)
    comm.barrier()  # nothing was sent: every rank is still in step


def test_numpy_integers_are_integers(comm):
    x = np.full(4, comm.rank, np.float32)
    comm.broadcast(x, root=np.int64(0))
    assert (x == 0).all()
    child = comm.split(np.int32(0), key=np.uint8(comm.size - 1 - comm.rank))
    assert child.rank == comm.size - 1 - comm.rank
    child.close()


def test_counts_are_integers(comm):
    n = comm.size
    x = np.zeros(n, np.float32)
    for bad, what in [([1.5] * n, "sendcounts[0] 1.5"), (["1"] * n, "sendcounts[0] '1'"),
                      ([2**64] * n, "sendcounts[0] 18446744073709551616 is outside")]:
        with raises(gyre.InvalidArgument, what):
            comm.alltoallv(x, bad, [1] * n)


def test_library_errors_carry_its_message(comm):
    """Errors the library finds (Python does not repeat its checks)."""
    n = comm.size
    with raises(gyre.InvalidArgument, "gyreBroadcast", f"root {n} is outside [0, {n})"):
        comm.broadcast(np.zeros(4), root=n)
    with raises(gyre.InvalidArgument, "peer -1 is outside"):
        comm.send(np.zeros(4), peer=-1)
    with raises(gyre.InvalidUsage, "inside a group"):
        comm.send(np.zeros(4), peer=comm.rank)
    x = np.zeros(8, np.float32)
    with raises(gyre.InvalidArgument, "sendbuff and recvbuff overlap"):
        comm.allreduce(x[:4], out=x[2:6])
    with raises(gyre.InvalidArgument, "gyreCommSplit", "color -5 is negative"):
        comm.split(-5)
    comm.barrier()  # still usable: every rank failed before sending anything


def test_mismatched_calls_fail_everywhere(comm):
    """Ranks that disagree on the count all get an error naming both sides."""
    child = comm.split(0, name="mismatch")
    count = 11 if child.rank == 0 else 10
    with pytest.raises(gyre.Error) as info:
        child.allreduce(np.ones(count, np.float32))
    assert "11 x float32" in str(info.value) and "10 x float32" in str(info.value), str(info.value)
    assert child.async_error() is not None
    with raises(gyre.InvalidUsage):
        child.barrier()  # a failed communicator refuses further calls
    child.close()
    comm.barrier()


def test_timeout(comm):
    """Rank 0 waits for a message that rank 1 sends only after a barrier that
    rank 0 reaches after its timeout: gyre.Timeout, not a hang."""
    if comm.size < 2:
        pytest.skip("needs two ranks")
    child = comm.split(0, timeout_ms=300)
    if comm.rank == 0:
        with raises(gyre.Timeout, "no progress"):
            child.recv(np.empty(4, np.float32), peer=1)
    comm.barrier()
    child.close()
    comm.barrier()


def test_peer_abort_is_a_remote_error(comm, side):
    child = comm.split(0)
    req = child.irecv(np.empty(4, np.float32), peer=1) if comm.rank == 0 else None
    side.barrier()  # rank 0's receive is posted
    if comm.rank == 1:
        child.abort()
    if comm.rank == 0:
        with raises(gyre.RemoteError, "rank 1"):
            req.wait()
    child.close()
    comm.barrier()


def test_revoke_stops_the_calls_and_keeps_the_communicator(comm, side):
    """revoke() on one rank: its posted receive fails saying so, the peer's waits name
    it, and the communicator stays open (async_error() None) until closed."""
    child = comm.split(0)
    req = child.irecv(np.empty(4, np.float32), peer=1 - comm.rank) if comm.rank < 2 else None
    side.barrier()  # ranks 0 and 1 have posted their receives
    if comm.rank == 0:
        child.revoke()
        with raises(gyre.InvalidUsage, "revoked"):
            req.wait()
        assert child.async_error() is None and not child.closed
        with raises(gyre.InvalidUsage, "revoked"):
            child.allreduce(np.zeros(2))
    side.barrier()  # rank 0 has revoked
    if comm.rank == 1:
        with raises(gyre.RemoteError, "rank 0"):
            req.wait()
    child.close()
    comm.barrier()


def test_shrink_leaves_out_the_excluded_rank(comm, side):
    """shrink([last]) on every other rank: a communicator of the rest, renumbered in order;
    the excluded rank calls nothing and keeps its own."""
    child = comm.split(0)
    last = comm.size - 1
    if comm.rank != last:
        small = child.shrink([last])
        assert (small.size, small.rank) == (comm.size - 1, comm.rank)
        x = np.full(3, comm.rank, np.int64)
        small.allreduce(x)
        assert list(x) == [sum(range(comm.size - 1))] * 3
        small.close()
        with raises(gyre.InvalidArgument, "is this rank"):
            child.shrink([comm.rank])
    side.barrier()  # the others are done with the excluded rank's communicator
    child.close()
    comm.barrier()


def test_stats_follow_the_calls(comm):
    child = comm.split(0)
    before = child.stats()
    assert before["calls"] == 0 and before["transports"][comm.rank] == ""
    x = np.ones(100, np.float32)
    child.allreduce(x)
    after = child.stats()
    assert after["calls"] == 1 and after["bytes"] == 400 and after["failed_calls"] == 0
    assert after["seconds"] > 0 and after["sent_to_peer"][comm.rank] == 0
    for p, sent in enumerate(after["sent_to_peer"]):
        if sent:
            assert after["transports"][p] in ("shm", "tcp"), after
    child.close()


def test_closed_communicator(comm):
    child = comm.split(0)
    with child as c:
        assert not c.closed
    assert child.closed and repr(child) == "<gyre.Comm closed>"
    with raises(gyre.InvalidUsage, "closed"):
        child.allreduce(np.zeros(2))
    child.close()  # closing twice is harmless
