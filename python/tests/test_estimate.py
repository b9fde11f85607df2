"""comm.estimate: the cost model's time for a call, without making it (gyreEstimate)."""

import pytest

import gyre


def test_estimate_grows_with_size_and_defaults_to_this_communicator(comm):
    for call in ("allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall"):
        small, large = comm.estimate(call, 1024), comm.estimate(call, 1 << 20)
        assert 0 < small < large, call
        assert comm.estimate(call, 1024, nranks=comm.size) == small
    assert comm.estimate("alltoall", 1 << 20, "float64") > comm.estimate("alltoall", 1 << 20, "float32")
    assert comm.estimate("allreduce", 4096, nranks=1) == 0  # one rank sends nothing


def test_estimate_refuses_bad_arguments(comm):
    with pytest.raises(gyre.InvalidArgument, match="alltoallv"):
        comm.estimate("alltoallv", 16)
    with pytest.raises(gyre.InvalidArgument, match="nranks"):
        comm.estimate("allreduce", 16, nranks=-1)
    with pytest.raises(gyre.InvalidArgument):
        comm.estimate("allreduce", -1)
