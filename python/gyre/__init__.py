"""gyre: collective communication for distributed training, from Python.

A thin binding over gyre's C ABI (libgyre.so.0, through ctypes)::

    import numpy as np
    import gyre

    comm = gyre.init()                      # under gyrerun, torchrun, mpirun or srun
    grad = np.full(1024, comm.rank, np.float32)
    comm.allreduce(grad, op="avg")          # in place; every rank gets the same bits
    comm.close()

See docs/python.md for every call, the data types, errors, and where the
library is looked for (GYRE_LIBRARY first).
"""

from ._errors import (  # noqa: F401
    CudaError,
    Error,
    InProgress,
    InternalError,
    InvalidArgument,
    InvalidUsage,
    RemoteError,
    Timeout,
)
from . import _errors
from ._comm import Comm, Compressor, Request, get_unique_id, group, init, init_rank, join, version  # noqa: F401
from ._decentralized import Averager, Decentralized  # noqa: F401
from ._lib import UNIQUE_ID_BYTES, lib as _lib  # noqa: F401
from ._types import NAMES as dtypes, Codec, Op, Peers, PreMulSum  # noqa: F401

__version__ = ".".join(map(str, version()))  # the loaded library's

SystemError = _errors.SystemError  # noqa: A001 -- gyre.SystemError, for gyreSystemError
SUM, PROD, MAX, MIN, AVG = Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.AVG
library_path = _lib._name  # the libgyre file loaded

# gyre.SystemError stays out of `from gyre import *`, which would otherwise
# shadow Python's own SystemError.
__all__ = ["AVG", "MAX", "MIN", "PROD", "SUM", "Averager", "Codec", "Comm", "Compressor", "CudaError", "Decentralized",
           "Error", "InProgress", "InternalError", "InvalidArgument", "InvalidUsage", "Op", "Peers", "PreMulSum",
           "RemoteError", "Request", "Timeout", "UNIQUE_ID_BYTES", "dtypes", "get_unique_id", "group", "init",
           "init_rank", "join", "library_path", "version"]
