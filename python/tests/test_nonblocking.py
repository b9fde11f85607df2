"""Nonblocking calls: requests, overlap with other work, buffers kept alive."""

import gc

import numpy as np

import gyre


def test_request_returns_what_the_call_would(comm):
    n, me = comm.size, comm.rank
    x = np.full(1000, me, np.float64)
    req = comm.iallreduce(x, op="sum")
    assert isinstance(req, gyre.Request)
    assert req.wait() is x
    np.testing.assert_array_equal(x, np.full(1000, n * (n - 1) / 2))
    assert req.done and req.wait() is x  # waiting again returns the same


def test_every_nonblocking_call(comm):
    n, me = comm.size, comm.rank
    reqs = [
        comm.iallreduce(np.full(5, me, np.int32), op="max"),
        comm.ibroadcast(np.full(5, me, np.int32), root=n - 1),
        comm.ireduce(np.full(5, me + 1, np.int64), op="prod", root=0),
        comm.iallgather(np.array([me], np.uint8)),
        comm.ireducescatter(np.ones(3 * n, np.float32)),
        comm.ialltoall(np.arange(n, dtype=np.int64) + 10 * me),
        comm.ialltoallv(np.full(n, me, np.int32), [1] * n, [1] * n),
        comm.ibarrier(),
    ]
    got = [r.wait() for r in reqs]  # they complete in call order
    np.testing.assert_array_equal(got[0], np.full(5, n - 1))
    np.testing.assert_array_equal(got[1], np.full(5, n - 1))
    if me == 0:
        np.testing.assert_array_equal(got[2], np.full(5, np.prod(np.arange(1, n + 1))))
    else:
        assert got[2] is None
    np.testing.assert_array_equal(got[3].ravel(), np.arange(n))
    np.testing.assert_array_equal(got[4], np.full(3, n))
    np.testing.assert_array_equal(got[5], 10 * np.arange(n) + me)
    np.testing.assert_array_equal(got[6], np.arange(n))
    assert got[7] is None


def test_isend_irecv_ring(comm):
    """A communicator runs its operations one after the other in call order,
    so outside a group a ring needs even ranks to send first; inside one, any
    order is safe."""
    n, me = comm.size, comm.rank
    out = np.empty(100, np.float32)
    if me % 2 == 0:
        send = comm.isend(np.full(100, me, np.float32), peer=(me + 1) % n)
        recv = comm.irecv(out, peer=(me - 1) % n)
    else:
        recv = comm.irecv(out, peer=(me - 1) % n)
        send = comm.isend(np.full(100, me, np.float32), peer=(me + 1) % n)
    assert send.wait() is None
    assert recv.wait() is out
    np.testing.assert_array_equal(out, np.full(100, (me - 1) % n))
    with gyre.group():
        recv = comm.irecv(out, peer=(me + 1) % n)
        send = comm.isend(np.full(100, 10 + me, np.float32), peer=(me - 1) % n)
    send.wait()
    np.testing.assert_array_equal(recv.wait(), np.full(100, 10 + (me + 1) % n))


def test_overlap_with_other_work(comm, side):
    """A receive is outstanding while this rank does other communication: rank
    1 sends only after a barrier on another communicator, which rank 0 reaches
    after starting its receive, so the receive cannot have finished early."""
    me = comm.rank
    if me == 0:
        out = np.zeros(1 << 16, np.float32)
        req = comm.irecv(out, peer=1)
        assert not req.test() and not req.done
        side.barrier()
        np.testing.assert_array_equal(req.wait(), np.full(1 << 16, 1.0))
        assert req.test()
    else:
        side.barrier()
        if me == 1:
            comm.send(np.ones(1 << 16, np.float32), peer=0)


def test_polling_with_test(comm):
    x = np.full(1 << 16, comm.rank, np.float32)
    req = comm.iallreduce(x, op="avg")
    spins = 0
    while not req.test():
        spins += 1
        np.dot(np.ones(1000), np.ones(1000))  # work done while the allreduce runs
    np.testing.assert_array_equal(x, np.full(1 << 16, (comm.size - 1) / 2, np.float32))


def test_request_keeps_buffers_alive(comm):
    """Neither the caller's reference nor a wait is needed for the buffers to live."""
    n = comm.size
    req = comm.iallgather(np.full(1 << 12, comm.rank, np.int64))  # the input is a temporary
    del_me = comm.iallreduce(np.ones(1 << 12, np.float64))
    del del_me  # dropped without a wait: its communicator still finishes it
    gc.collect()
    got = req.wait()
    np.testing.assert_array_equal(got[:, 0], np.arange(n))
    comm.barrier()


def test_request_as_context_manager(comm):
    with comm.iallreduce(np.ones(3, np.int32)) as req:
        pass
    assert req.done
    np.testing.assert_array_equal(req.wait(), np.full(3, comm.size))
