"""The torch backend's tests: every rank runs the same pytest session under
gyrerun (or torchrun), so tests run in the same order everywhere. Each test
makes its calls on the default group (backend "gyre") and, for the
reference, on a gloo group over the same ranks in the same job.

Values are small integers (exact in every dtype, in any order of summation),
so gyre's results must equal gloo's bit for bit."""

import datetime
import hashlib
import os
import sys

import pytest
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gyre.torch  # noqa: E402,F401 -- registers the backend

TIMEOUT = datetime.timedelta(seconds=30)


def _init_method():
    """env:// under torchrun; under gyrerun a file:// store named after the
    job's secret (the same on every rank, new for every job)."""
    if "MASTER_ADDR" in os.environ and "RANK" in os.environ:
        return "env://", {}
    secret = hashlib.sha256(os.environ["GYRE_SECRET"].encode()).hexdigest()[:16]
    rank, size = int(os.environ["GYRE_RANK"]), int(os.environ["GYRE_WORLD_SIZE"])
    return f"file:///tmp/gyre-torch-test-{secret}", {"rank": rank, "world_size": size}


@pytest.fixture(scope="session", autouse=True)
def world():
    method, args = _init_method()
    dist.init_process_group("gyre", init_method=method, timeout=TIMEOUT, **args)
    yield
    dist.destroy_process_group()


@pytest.fixture(scope="session")
def gloo(world):
    """The reference: gloo over the same ranks."""
    return dist.new_group(backend="gloo")


@pytest.fixture(scope="session")
def rank(world):
    return dist.get_rank()


@pytest.fixture(scope="session")
def size(world):
    return dist.get_world_size()


def values(dtype, n, rank, salt=0):
    """Small integers, different on every rank, exact in every dtype."""
    v = (torch.arange(n, dtype=torch.int64) * 7 + rank * 3 + salt) % 11 - 3
    if dtype == torch.uint8:
        v = v + 3
    return v.to(dtype)


def same(a, b):
    """Bitwise equality (NaN-free inputs: equal values, equal dtypes)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
