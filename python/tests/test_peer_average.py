"""Decentralized averaging: comm.peer_average(x, peers, step).

Every rank can regenerate every rank's input (seeded by rank and step), so
each checks its result bit for bit against the average of the expected
group computed the library's way: a float32 sum in rank order, divided
once by the group's size. ring and shift_one's groups are spelled out here;
random's pairing is the library's own draw, so for it the test checks the
result is this rank's input averaged with exactly one other rank's, and that
the pairs agree across ranks."""

import numpy as np
import pytest

import gyre
from test_errors import raises

COUNT = 5003  # not a multiple of anything the library chunks by
STEPS = 6


def input_of(rank, step, count=COUNT, dtype=np.float32):
    """Values distinct between ranks, so a wrong peer cannot give the right average."""
    return np.random.default_rng(7000 + 100 * step + rank).uniform(-8, 8, count).astype(dtype)


def average(group, step, count=COUNT, dtype=np.float32):
    """The library's arithmetic: the sum in rank order, in the data type, divided once."""
    ranks = sorted(group)
    acc = input_of(ranks[0], step, count, dtype).copy()
    for r in ranks[1:]:
        acc += input_of(r, step, count, dtype)
    return acc / dtype(len(ranks))


def ring_group(rank, n, step):
    return {(rank - 1) % n, rank, (rank + 1) % n}  # two ranks: just the pair


def shift_one_group(rank, n, step):
    half = n // 2
    shift = step % half
    peer = half + (rank + shift) % half if rank < half else (rank - half - shift) % half
    return {rank, peer}


def check_bits(got, want, what):
    assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8)), \
        f"{what}: max difference {np.abs(got.astype(np.float64) - want).max()}"


@pytest.mark.parametrize("peers,group_of", [("ring", ring_group), (gyre.Peers.SHIFT_ONE, shift_one_group)])
def test_each_rank_gets_the_average_of_its_group(comm, peers, group_of):
    n = comm.size
    if group_of is shift_one_group and n % 2:
        pytest.skip("shift_one needs an even rank count (the refusal is tested below)")
    for step in range(STEPS):
        want = average(group_of(comm.rank, n, step), step)
        x = input_of(comm.rank, step)
        if step % 2:  # in place, as the other collectives without out=
            assert comm.peer_average(x, peers, step) is x
            check_bits(x, want, f"{peers} step {step}, in place")
        else:
            out = np.empty_like(x)
            assert comm.peer_average(x, peers=peers, step=step, out=out) is out
            check_bits(out, want, f"{peers} step {step}")
            check_bits(x, input_of(comm.rank, step), "x is left as it was")


def test_shift_one_meets_every_cross_pair(comm):
    """Over size/2 steps the lower half meets every rank of the upper half."""
    n = comm.size
    if n % 2:
        pytest.skip("shift_one needs an even rank count")
    met = set()
    for step in range(n // 2):
        x = input_of(comm.rank, step)
        comm.peer_average(x, "SHIFT_ONE", step)  # names in any case, as codecs and ops
        partner = [q for q in range(n) if q != comm.rank and np.array_equal(x, average({comm.rank, q}, step))]
        assert len(partner) == 1, partner
        met.add(partner[0])
    assert met == (set(range(n // 2, n)) if comm.rank < n // 2 else set(range(n // 2))), met


def test_random_pairs_each_rank_with_one_other_and_the_pairs_agree(comm):
    n = comm.size
    matchings = set()
    for step in range(20):
        x = input_of(comm.rank, step)
        comm.peer_average(x, "random", step)
        partners = [q for q in range(n) if q != comm.rank and np.array_equal(x, average({comm.rank, q}, step))]
        if not partners:  # an odd count: one rank a step averages with nobody and keeps its input
            check_bits(x, input_of(comm.rank, step), f"random step {step}, resting")
        assert len(partners) <= 1, f"step {step}: {partners}"
        partner = np.array([partners[0] if partners else -1], np.int32)
        every = comm.allgather(partner).ravel()
        for r, q in enumerate(every):
            assert q == -1 or every[q] == r, f"step {step}: pairs are not symmetric: {every}"
        assert (every == -1).sum() == n % 2, f"step {step}: {every}"
        matchings.add(tuple(every))
    if n >= 4:
        assert len(matchings) > 1, "the pairing should change with the step"


def test_float64_and_a_large_step(comm):
    """step is a uint64_t: all of its range is accepted."""
    x = input_of(comm.rank, 1, dtype=np.float64)
    comm.peer_average(x, gyre.Peers.RING, 2**64 - 1)
    check_bits(x, average(ring_group(comm.rank, comm.size, 0), 1, dtype=np.float64), "float64 ring")


def test_bad_arguments(comm):
    x = np.zeros(8, np.float32)
    for bad in ("star", "shift-one", 3, -1, True, 1.0, None):
        with raises(gyre.InvalidArgument, f"peers {bad!r} is not one of shift_one, ring, random"):
            comm.peer_average(x, bad, 0)
    for bad, why in ((-1, "is outside the range of a uint64_t"), (2**64, "is outside the range of a uint64_t"),
                     (1.0, "is not an integer"), (True, "is a bool"), ("3", "is not an integer")):
        with raises(gyre.InvalidArgument, f"step {bad!r} {why}"):
            comm.peer_average(x, "ring", bad)
    with raises(gyre.InvalidArgument, "out has 4 elements; peer_average of x needs 8"):
        comm.peer_average(x, "ring", 0, out=np.zeros(4, np.float32))
    with raises(gyre.InvalidArgument, "out has dtype float64 but x has float32"):
        comm.peer_average(x, "ring", 0, out=np.zeros(8))
    frozen = np.zeros(8, np.float32)
    frozen.setflags(write=False)
    with raises(gyre.InvalidArgument, "x is read-only"):
        comm.peer_average(frozen, "ring", 0)
    comm.barrier()


def test_shift_one_on_an_odd_rank_count_is_refused(comm):
    if comm.size % 2 == 0:
        pytest.skip("an even rank count: shift_one works")
    with raises(gyre.InvalidArgument, "gyrePeerAverage", "even number of ranks"):
        comm.peer_average(np.ones(8, np.float32), "shift_one", 0)
    x = input_of(comm.rank, 0)
    comm.peer_average(x, "ring", 0)  # still usable, every rank in step
    check_bits(x, average(ring_group(comm.rank, comm.size, 0), 0), "ring after the refusal")


def test_ranks_that_disagree_on_the_step_fail_everywhere(comm):
    # Rank 1 passes another step. Its ring neighbours fail in the call,
    # naming both steps; a rank that does not average with rank 1 (on four
    # ranks or more) may finish the call, and learns of the failure by its
    # next call on the communicator.
    child = comm.split(0, name="steps")
    n = child.size
    meets_rank_1 = child.rank == 1 or 1 in ((child.rank - 1) % n, (child.rank + 1) % n)
    x = np.ones(1000, np.float32)
    if meets_rank_1:
        with raises(gyre.Error, "step 4", "step 5"):
            child.peer_average(x, "ring", 5 if child.rank == 1 else 4)
    else:
        with pytest.raises(gyre.Error):
            child.peer_average(x, "ring", 4)
            child.barrier()
    child.close()
    comm.barrier()
