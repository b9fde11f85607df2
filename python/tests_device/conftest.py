"""Device arrays through the binding, on gyre's host-emulated GPU
(GYRE_DEVICE_BACKEND=emulated, set by ctest): every rank runs this session
under gyrerun, as python/tests does, and makes the same calls in order."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gyre  # noqa: E402


@pytest.fixture(scope="session")
def comm():
    if os.environ.get("GYRE_DEVICE_BACKEND") != "emulated":
        pytest.skip("needs GYRE_DEVICE_BACKEND=emulated (ctest sets it)")
    c = gyre.init()
    yield c
    c.close()
