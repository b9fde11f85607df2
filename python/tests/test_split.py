"""Communicator split, and a communicator made from a unique id."""

import numpy as np
import pytest

import gyre


def test_split_by_parity_in_reverse_order(comm):
    n, me = comm.size, comm.rank
    members = [r for r in range(n) if r % 2 == me % 2]
    with comm.split(me % 2, key=-me) as child:
        assert child.size == len(members)
        assert child.rank == sorted(members, reverse=True).index(me)  # ordered by key
        got = child.allgather(np.array([me], np.int32))
        np.testing.assert_array_equal(got.ravel(), sorted(members, reverse=True))
        total = child.allreduce(np.array([me], np.int64))
        assert total[0] == sum(members)
        # The child splits further; its own operations are independent of the parent's.
        with child.split(0) as grandchild:
            assert grandchild.size == child.size
            grandchild.barrier()
    comm.barrier()


def test_split_with_no_color(comm):
    n, me = comm.size, comm.rank
    child = comm.split(None if me == n - 1 else 7)
    if me == n - 1:
        assert child is None
    else:
        assert child.size == n - 1 and child.rank == me
        np.testing.assert_array_equal(child.allreduce(np.ones(3, np.float32)), np.full(3, n - 1))
        child.close()
    comm.barrier()


def test_split_with_the_online_tuner(comm):
    """tuner_online=True: the child's calls try the model's candidates in turn; results stay exact."""
    with comm.split(0, tuner_online=True) as child:
        for size in (1, 1000, 300000):
            for _ in range(30):
                got = child.allreduce(np.full(size, comm.rank + 1, np.int64))
                assert got[0] == got[-1] == comm.size * (comm.size + 1) // 2
    comm.barrier()


def test_init_rank_from_unique_id(comm):
    """Rank 0 makes the id, the parent communicator carries it, every rank joins."""
    uid = np.frombuffer(gyre.get_unique_id(), np.uint8).copy() if comm.rank == 0 else np.zeros(128, np.uint8)
    comm.broadcast(uid, root=0)
    with gyre.init_rank(comm.size, uid.tobytes(), comm.rank, name="from-id") as fresh:
        assert (fresh.rank, fresh.size) == (comm.rank, comm.size)
        np.testing.assert_array_equal(fresh.allreduce(np.ones(4, np.int32)), np.full(4, comm.size))


def test_grow_by_a_new_process(comm):
    """Every rank grows the communicator by one new process that rank 0 starts with the
    join handle's bytes; the running ranks keep their numbers, the newcomer is the last."""
    import subprocess
    import sys

    n = comm.size
    handle = comm.join_handle() if comm.rank == 0 else None
    newcomer = None
    if comm.rank == 0:
        program = ("import sys, numpy as np, gyre\n"
                   "c = gyre.join(int(sys.argv[1]), bytes.fromhex(sys.argv[2]), int(sys.argv[1]) - 1)\n"
                   "x = c.allreduce(np.array([c.rank], np.int64))\n"
                   "assert (c.size, c.rank) == (int(sys.argv[1]), int(sys.argv[1]) - 1) and x[0] == sum(range(c.size))\n"
                   "c.close()\n")
        newcomer = subprocess.Popen([sys.executable, "-c", program, str(n + 1), handle.hex()])
    try:
        with comm.grow(n + 1, handle) as grown:
            assert (grown.size, grown.rank) == (n + 1, comm.rank)
            x = grown.allreduce(np.array([grown.rank], np.int64))
            assert x[0] == sum(range(n + 1))
    finally:
        if newcomer:
            assert newcomer.wait(timeout=60) == 0
    # The handle is spent: every rank is told so at once.
    with pytest.raises(gyre.InvalidUsage, match="stale"):
        comm.grow(n + 1, handle)
    comm.barrier()
