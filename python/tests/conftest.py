"""Every rank runs this same test session (gyrerun -n N python3 -m pytest ...),
so tests run in the same order everywhere and each collective call is made by
every rank. A test must never let ranks take different numbers of calls on a
shared communicator, or the next test would start out of step."""

import os
import sys

import pytest

# Run from a source checkout without installing: python/ holds the package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gyre  # noqa: E402


@pytest.fixture(scope="session")
def comm():
    c = gyre.init()
    yield c
    c.close()


@pytest.fixture(scope="session")
def side(comm):
    """A second communicator over the same ranks, for synchronising while
    `comm` has operations in flight (a call on `comm` itself would queue
    behind them)."""
    c = comm.split(0)
    yield c
    c.close()
