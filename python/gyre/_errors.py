"""gyre.Error and its subclasses, one per gyreResult_t failure code.

Every failed C call raises the subclass for its result code, carrying
gyreGetLastError's sentence (which rank, which operation, which argument).
Checks made in Python before a call raise the same classes, so a caller
catches one hierarchy whichever side noticed the problem.
"""

from ._lib import lib


class Error(Exception):
    """A gyre call failed. ``code`` is the gyreResult_t, ``message`` the sentence."""

    code = None

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class CudaError(Error):
    code = 1


class SystemError(Error):  # noqa: A001 -- the name mirrors gyreSystemError
    """A system call or resource failed (socket, shared memory, memory)."""

    code = 2


class InternalError(Error):
    """A bug in gyre."""

    code = 3


class InvalidArgument(Error, ValueError):
    """A bad argument; the communicator stays usable. Also a ValueError."""

    code = 4


class InvalidUsage(Error):
    """A call out of order, or on a failed or closed communicator."""

    code = 5


class RemoteError(Error):
    """A peer failed, died or aborted."""

    code = 6


class InProgress(Error):
    code = 7


class Timeout(Error):
    """No progress within the communicator's timeout (GYRE_TIMEOUT_MS)."""

    code = 8


_BY_CODE = {c.code: c for c in (CudaError, SystemError, InternalError, InvalidArgument, InvalidUsage,
                                RemoteError, InProgress, Timeout)}


def error_for(code, message=None):
    """The exception for a gyreResult_t (message defaults to the thread's last error)."""
    if message is None:
        last = lib.gyreGetLastError(None)
        message = last.decode("utf-8", "replace") if last else ""
    if not message:
        name = lib.gyreGetErrorString(code)
        message = name.decode() if name else f"gyre error {code}"
    return _BY_CODE.get(code, Error)(message, code)


def check(result):
    """Raises the matching Error unless result is gyreSuccess."""
    if result != 0:
        raise error_for(result)
