"""Finds and loads libgyre, and declares the C ABI's prototypes.

The library is looked for in this order (the first that exists wins):

1. ``GYRE_LIBRARY``: the path of the library file. When it is set and does
   not load, that is an error: a wrong path should not quietly fall through
   to some other copy of gyre.
2. ``libgyre.so.0`` inside this package's folder (a copy bundled with it).
3. The library folder recorded when ``cmake --install`` placed this package
   (``_install_paths.py``, a path relative to the package, so a relocated
   prefix still works).
4. The dynamic loader's own search: ``LD_LIBRARY_PATH``, ``ld.so.cache``,
   ``/usr/lib/...``.
"""

import ctypes
import os

SONAME = "libgyre.so.0"
UNIQUE_ID_BYTES = 128

_here = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("GYRE_LIBRARY")
    if env:
        return [("GYRE_LIBRARY", env)], True
    found = [("next to the package", os.path.join(_here, SONAME))]
    try:
        from . import _install_paths  # written by cmake --install only
        found.append(("installed libdir", os.path.normpath(os.path.join(_here, _install_paths.LIBDIR, SONAME))))
    except ImportError:
        pass
    return found, False


def load():
    """Returns the loaded CDLL, or raises ImportError saying what was tried."""
    candidates, forced = _candidates()
    tried = []
    for where, path in candidates:
        if forced or os.path.exists(path):
            try:
                return ctypes.CDLL(path)
            except OSError as e:
                if forced:
                    raise ImportError(f"gyre: GYRE_LIBRARY={path} does not load: {e}") from e
                tried.append(f"{path} ({where}): {e}")
        else:
            tried.append(f"{path} ({where}): not there")
    try:
        return ctypes.CDLL(SONAME)
    except OSError as e:
        tried.append(f"{SONAME} (the loader's path): {e}")
    raise ImportError("gyre: libgyre not found; set GYRE_LIBRARY to its path. Tried:\n  " + "\n  ".join(tried))


class Config(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("timeoutMs", ctypes.c_int),
        ("transport", ctypes.c_char_p),
        ("algo", ctypes.c_char_p),
        ("commName", ctypes.c_char_p),
        ("blocking", ctypes.c_int),
        ("tunerOnline", ctypes.c_int),
    ]


CONFIG_MAGIC = 0x67797265
# GYRE_VERSION_CODE of the gyre.h whose gyreConfig_t the Config above mirrors.
CONFIG_VERSION = 100
CONFIG_UNDEF_INT = -(2**31)
SPLIT_NOCOLOR = -1
COMPRESSOR_ERROR_FEEDBACK = 0x1


class SeqLayout(ctypes.Structure):
    """gyreSeqLayout_t."""
    _fields_ = [
        ("heads", ctypes.c_int),
        ("kvHeads", ctypes.c_int),
        ("headDim", ctypes.c_size_t),
        ("parts", ctypes.c_int),
        ("seqLen", ctypes.c_size_t),
        ("tokens", ctypes.POINTER(ctypes.c_size_t)),
    ]


class CommStats(ctypes.Structure):
    _fields_ = [("calls", ctypes.c_uint64), ("failedCalls", ctypes.c_uint64),
                ("bytes", ctypes.c_uint64), ("seconds", ctypes.c_double)]


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


JOIN_HANDLE_BYTES = 256  # GYRE_JOIN_HANDLE_BYTES


class JoinHandle(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * JOIN_HANDLE_BYTES)]


_c_int, _c_size, _vp = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p
_comm = ctypes.c_void_p
_req = ctypes.c_void_p
_pcomm, _preq = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)
_psize = ctypes.POINTER(ctypes.c_size_t)
_pint = ctypes.POINTER(ctypes.c_int)

# name: argument types. Every function returns a gyreResult_t (an int) except
# where _RESTYPES says otherwise. Enums travel as ints.
_PROTOTYPES = {
    "gyreGetVersion": [_pint],
    "gyreGetUniqueId": [ctypes.POINTER(UniqueId)],
    "gyreCommInitRankConfig": [_pcomm, _c_int, UniqueId, _c_int, ctypes.POINTER(Config)],
    "gyreCommInitFromEnv": [_pcomm, ctypes.POINTER(Config)],
    "gyreCommDestroy": [_comm],
    "gyreCommAbort": [_comm],
    "gyreCommRevoke": [_comm, _c_int],
    "gyreCommGetStats": [_comm, ctypes.c_void_p, ctypes.c_void_p],
    "gyreCommPeerTransport": [_comm, _c_int, ctypes.c_char_p, _c_size],
    "gyreCommGetAsyncError": [_comm, _pint],
    "gyreCommCount": [_comm, _pint],
    "gyreCommUserRank": [_comm, _pint],
    "gyreAllReduce": [_vp, _vp, _c_size, _c_int, _c_int, _comm, _vp],
    "gyreBroadcast": [_vp, _vp, _c_size, _c_int, _c_int, _comm, _vp],
    "gyreReduce": [_vp, _vp, _c_size, _c_int, _c_int, _c_int, _comm, _vp],
    "gyreAllGather": [_vp, _vp, _c_size, _c_int, _comm, _vp],
    "gyreReduceScatter": [_vp, _vp, _c_size, _c_int, _c_int, _comm, _vp],
    "gyreAllToAll": [_vp, _vp, _c_size, _c_int, _comm, _vp],
    "gyreAllToAllv": [_vp, _psize, _psize, _vp, _psize, _psize, _c_int, _comm, _vp],
    "gyreGather": [_vp, _vp, _c_size, _c_int, _c_int, _comm, _vp],
    "gyreScatter": [_vp, _vp, _c_size, _c_int, _c_int, _comm, _vp],
    "gyreSend": [_vp, _c_size, _c_int, _c_int, _comm, _vp],
    "gyreRecv": [_vp, _c_size, _c_int, _c_int, _comm, _vp],
    "gyreBarrier": [_comm, _vp],
    "gyreGroupStart": [],
    "gyreGroupEnd": [],
    "gyreIallReduce": [_vp, _vp, _c_size, _c_int, _c_int, _comm, _preq],
    "gyreIbroadcast": [_vp, _vp, _c_size, _c_int, _c_int, _comm, _preq],
    "gyreIreduce": [_vp, _vp, _c_size, _c_int, _c_int, _c_int, _comm, _preq],
    "gyreIallGather": [_vp, _vp, _c_size, _c_int, _comm, _preq],
    "gyreIreduceScatter": [_vp, _vp, _c_size, _c_int, _c_int, _comm, _preq],
    "gyreIallToAll": [_vp, _vp, _c_size, _c_int, _comm, _preq],
    "gyreIallToAllv": [_vp, _psize, _psize, _vp, _psize, _psize, _c_int, _comm, _preq],
    "gyreIsend": [_vp, _c_size, _c_int, _c_int, _comm, _preq],
    "gyreIrecv": [_vp, _c_size, _c_int, _c_int, _comm, _preq],
    "gyreIbarrier": [_comm, _preq],
    "gyreWait": [_req],
    "gyreTest": [_req, _pint],
    "gyreRedOpCreatePreMulSum": [_pint, _vp, _c_int, _c_int, _comm],
    "gyreRedOpDestroy": [_c_int, _comm],
    "gyreAllReduceCodec": [_vp, _vp, _c_size, _c_int, _c_int, _c_int, _comm, _vp],
    "gyreReduceScatterCodec": [_vp, _vp, _c_size, _c_int, _c_int, _c_int, _comm, _vp],
    "gyreAllGatherCodec": [_vp, _vp, _c_size, _c_int, _c_int, _comm, _vp],
    "gyreCompressorCreate": [ctypes.POINTER(_vp), _comm, _c_int, _c_size, _c_int, _c_int],
    "gyreCompressorReset": [_vp],
    "gyreCompressorDestroy": [_vp],
    "gyreCompressedAllReduce": [_vp, _vp, _c_size, _c_int, _c_int, _vp, _comm, _vp],
    "gyreCompressedReduceScatter": [_vp, _vp, _c_size, _c_int, _c_int, _vp, _comm, _vp],
    "gyreCompressedAllGather": [_vp, _vp, _c_size, _c_int, _vp, _comm, _vp],
    "gyrePeerAverage": [_vp, _vp, _c_size, _c_int, _c_int, ctypes.c_uint64, _comm, _vp],
    "gyreDecentralizedCreate": [ctypes.POINTER(_vp), _comm, _vp, _c_size, _c_int, _c_int],
    "gyreDecentralizedStep": [_vp, _vp],
    "gyreDecentralizedDestroy": [_vp],
    "gyreAveragerStart": [ctypes.POINTER(_vp), _comm, _vp, _c_size, _c_int, ctypes.c_uint],
    "gyreAveragerLock": [_vp],
    "gyreAveragerUnlock": [_vp],
    "gyreAveragerStop": [_vp, ctypes.POINTER(ctypes.c_uint64)],
    "gyreSeqHeads": [ctypes.POINTER(SeqLayout), _c_int, _c_int, _pint, _pint, _pint, _pint],
    "gyreSeqToHeads": [_vp, _vp, ctypes.POINTER(SeqLayout), _c_int, _comm, _vp],
    "gyreHeadsToSeq": [_vp, _vp, ctypes.POINTER(SeqLayout), _c_int, _comm, _vp],
    "gyreIseqToHeads": [_vp, _vp, ctypes.POINTER(SeqLayout), _c_int, _comm, _preq],
    "gyreIheadsToSeq": [_vp, _vp, ctypes.POINTER(SeqLayout), _c_int, _comm, _preq],
    "gyreMoeRoutingCreate": [ctypes.POINTER(_vp), _vp, _c_size, _c_int, _c_int, _vp, _c_size, _comm],
    "gyreMoeRoutingDestroy": [_vp],
    "gyreMoeExchangeCounts": [_vp, _comm],
    "gyreMoeSendCounts": [_vp, _vp, _vp],
    "gyreMoeLocalExperts": [_vp, _pint, _vp],
    "gyreMoeRecvCounts": [_vp, _vp, _vp, _psize],
    "gyreMoeDispatch": [_vp, _vp, _c_size, _c_size, _c_int, _c_int, _vp, _comm, _vp],
    "gyreMoeCombine": [_vp, _c_size, _vp, _vp, _c_size, _c_int, _vp, _comm, _vp],
    "gyreCommSplit": [_comm, _c_int, _c_int, _pcomm, ctypes.POINTER(Config)],
    "gyreCommGetJoinHandle": [_comm, ctypes.POINTER(JoinHandle)],
    "gyreCommGrow": [_comm, _c_int, ctypes.POINTER(JoinHandle), _c_int, _pcomm, ctypes.POINTER(Config)],
    "gyreCommShrink": [_comm, ctypes.POINTER(ctypes.c_int), _c_int, _pcomm, ctypes.POINTER(Config), _c_int],
    "gyreEstimate": [_c_int, _c_size, _c_int, _c_int, _comm, ctypes.POINTER(ctypes.c_double)],
    "gyreGetErrorString": [_c_int],
    "gyreGetLastError": [_comm],
}
_RESTYPES = {"gyreGetErrorString": ctypes.c_char_p, "gyreGetLastError": ctypes.c_char_p}


def declare(lib):
    """Sets every entry point's prototype, so ctypes converts and checks arguments."""
    for name, argtypes in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = _RESTYPES.get(name, ctypes.c_int)
    return lib


lib = declare(load())
