"""Data types, reduction ops, and turning arguments into (array, gyreDataType_t).

Only what Python must know before a call is checked here: that an argument
is a buffer at all, its type, its contiguity and writability, and its size
where gyre's count is derived from it. Everything the library checks itself
(roots, peers, overlap, counts against the peers') is left to the library.
"""

import ctypes
import enum
import operator

import numpy as np

from ._device import DeviceBuffer, device_buffer, is_device_array, met, requested_stream
from ._errors import InvalidArgument


C_INT_MIN, C_INT_MAX = -(2**31), 2**31 - 1
SIZE_MAX = 2**64 - 1
UINT64_MAX = 2**64 - 1


def integer(value, what, lo, hi, kind):
    """value as an integer argument in [lo, hi]: a Python or numpy integer (not a bool, a
    float or a string), else InvalidArgument naming it. ctypes would truncate a large one
    silently and raise its own ArgumentError for a string."""
    if isinstance(value, (bool, np.bool_)):
        raise InvalidArgument(f"{what} {value!r} is a bool, not an integer")
    try:
        v = operator.index(value)
    except TypeError:
        raise InvalidArgument(f"{what} {value!r} is not an integer") from None
    if not lo <= v <= hi:
        raise InvalidArgument(f"{what} {v} is outside the range of {kind} ({lo} to {hi})")
    return v


def c_int(value, what):
    """An int argument of the C ABI (a root, a peer, a color, a key, a rank count...)."""
    return integer(value, what, C_INT_MIN, C_INT_MAX, "a C int")


class Op(enum.IntEnum):
    """Built-in reductions (gyreRedOp_t)."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4  # sum, then divided by the rank count (integers: truncated)


class Codec(enum.IntEnum):
    """How a compressed collective encodes its messages (gyreCodec_t)."""

    NONE = 0    # the plain call
    FP16 = 1    # float16 on the wire (round to nearest even)
    BF16 = 2    # bfloat16 on the wire
    INT8 = 3    # 8 bits per value, min-max scaled per chunk of 4096 values
    ONEBIT = 4  # a sign bit per value, a mean-magnitude scale per chunk (needs error feedback)


_CODEC_NAMES = ", ".join(c.name.lower() for c in Codec)


def codec_code(codec):
    """The gyreCodec_t of a codec (Codec, its name, or its int)."""
    if isinstance(codec, str):
        try:
            return int(Codec[codec.upper()])
        except KeyError:
            raise InvalidArgument(f"codec {codec!r} is not one of {_CODEC_NAMES}") from None
    if isinstance(codec, (int, np.integer)) and not isinstance(codec, bool) and 0 <= int(codec) < len(Codec):
        return int(codec)
    raise InvalidArgument(f"codec {codec!r} is not one of {_CODEC_NAMES}")


class Peers(enum.IntEnum):
    """Whom each rank averages with in peer_average (gyrePeers_t)."""

    SHIFT_ONE = 0  # lower half pairs with upper half, shifting by one each step (even rank count)
    RING = 1       # the ranks before and after this one
    RANDOM = 2     # a random pairing drawn from the step (odd counts: one rank rests)


_PEERS_NAMES = ", ".join(p.name.lower() for p in Peers)


def peers_code(peers):
    """The gyrePeers_t of a peer selection (Peers, its name, or its int)."""
    if isinstance(peers, str):
        try:
            return int(Peers[peers.upper()])
        except KeyError:
            raise InvalidArgument(f"peers {peers!r} is not one of {_PEERS_NAMES}") from None
    if isinstance(peers, (int, np.integer)) and not isinstance(peers, bool) and 0 <= int(peers) < len(Peers):
        return int(peers)
    raise InvalidArgument(f"peers {peers!r} is not one of {_PEERS_NAMES}")


class PreMulSum:
    """The sum over ranks of scalar * x, in one pass (gyreRedOpCreatePreMulSum).

    The scalar is converted to the buffer's data type at each call; a value
    that type cannot hold exactly (0.5 for an integer type) is an error.
    """

    def __init__(self, scalar):
        self.scalar = scalar

    def __repr__(self):
        return f"PreMulSum({self.scalar!r})"


BFLOAT16 = 9
# gyreDataType_t for each numpy type gyre has; int16 and uint16, bool and
# complex have no gyre counterpart.
_CODES = {
    np.dtype(np.int8): 0,
    np.dtype(np.uint8): 1,
    np.dtype(np.int32): 2,
    np.dtype(np.uint32): 3,
    np.dtype(np.int64): 4,
    np.dtype(np.uint64): 5,
    np.dtype(np.float16): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.float64): 8,
}
NAMES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16"]
_SUPPORTED = ", ".join(NAMES)


def _is_bfloat16_name(dtype):
    return (isinstance(dtype, str) and dtype.lower() == "bfloat16") or getattr(dtype, "name", None) == "bfloat16"


def resolve_dtype(dtype, what="dtype"):
    """(numpy dtype, gyreDataType_t) for a dtype-like; bfloat16 is carried as uint16 bits."""
    if _is_bfloat16_name(dtype):
        np_dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(np.uint16)
        return np_dtype, BFLOAT16
    try:
        np_dtype = np.dtype(dtype)
    except TypeError as e:
        raise InvalidArgument(f"{what} {dtype!r} is not a data type (gyre has {_SUPPORTED})") from e
    return np_dtype, code_of(np_dtype, what)


def code_of(np_dtype, what):
    if np_dtype.name == "bfloat16":  # e.g. ml_dtypes.bfloat16
        return BFLOAT16
    if not np_dtype.isnative:
        raise InvalidArgument(f"{what} is {np_dtype.str}, not in this machine's byte order; "
                              f"convert it with .astype('{np_dtype.newbyteorder('=').name}')")
    code = _CODES.get(np_dtype)
    if code is None:
        hint = " (for bfloat16 pass a uint16 array of its bits with dtype='bfloat16')" if np_dtype == np.uint16 else ""
        raise InvalidArgument(f"{what} has dtype {np_dtype.name}, which gyre does not have "
                              f"(gyre has {_SUPPORTED}){hint}")
    return code


def op_code(op):
    """The gyreRedOp_t of a built-in op (Op, its name, or its int); None for a PreMulSum."""
    if isinstance(op, PreMulSum):
        return None
    if isinstance(op, str):
        try:
            return int(Op[op.upper()])
        except KeyError:
            raise InvalidArgument(f"op {op!r} is not one of sum, prod, max, min, avg, or a gyre.PreMulSum") from None
    if isinstance(op, (int, np.integer)) and not isinstance(op, bool) and 0 <= int(op) < len(Op):
        return int(op)
    raise InvalidArgument(f"op {op!r} is not one of sum, prod, max, min, avg, or a gyre.PreMulSum")


def _float_to_bfloat16_bits(value):
    """Round to nearest even, as gyre's kernels do."""
    bits = int(np.array(value, dtype=np.float32).view(np.uint32))
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x007FFFFF:
        return (bits >> 16) | 0x40  # a quiet NaN stays a NaN
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def scalar_bytes(scalar, np_dtype, code):
    """A one-element array holding scalar exactly in the call's data type."""
    if code == BFLOAT16 and np_dtype == np.uint16:
        return np.array([_float_to_bfloat16_bits(scalar)], dtype=np.uint16)
    try:
        value = np.array([scalar], dtype=np_dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidArgument(f"PreMulSum scalar {scalar!r} does not convert to {np_dtype.name}: {e}") from e
    if np.issubdtype(np_dtype, np.integer):
        try:
            exact = value[0] == scalar
        except TypeError:
            exact = False
        if not exact:
            raise InvalidArgument(f"PreMulSum scalar {scalar!r} is not exactly a {np_dtype.name}")
    return value


def as_array(obj, what, dtype=None, writable=False):
    """(C-contiguous numpy view of obj, gyreDataType_t).

    obj is a numpy array or any object with the buffer protocol (bytearray,
    memoryview, array.array, ...), shared, never copied. With dtype, a raw
    buffer's bytes are read as that type; a numpy array whose own type gyre
    has must already be of that type (a reinterpretation there is a bug).
    """
    if obj is None:
        raise InvalidArgument(f"{what} is None")
    if is_device_array(obj):
        return _device_array(obj, what, dtype, writable)
    if not isinstance(obj, np.ndarray) and hasattr(obj, "__dlpack__"):
        obj = _writable(np.from_dlpack(obj))  # a CPU tensor (torch, jax, ...): shared, as numpy's view
    if isinstance(obj, np.ndarray):
        arr, raw = obj, False
    else:
        try:
            view = memoryview(obj)
        except TypeError:
            raise InvalidArgument(f"{what} is a {type(obj).__name__}, not a numpy array or an object "
                                  f"with the buffer protocol") from None
        if not view.c_contiguous:
            raise InvalidArgument(f"{what} is not C-contiguous (a strided view?); pass a contiguous copy")
        try:
            arr = np.asarray(view)
        except (TypeError, ValueError, NotImplementedError):  # a format numpy does not read: its bytes
            arr = np.frombuffer(view.cast("B"), dtype=np.uint8)
        raw = True
    if not arr.flags.c_contiguous:
        raise InvalidArgument(f"{what} is not C-contiguous (a strided or transposed view?); "
                              f"pass np.ascontiguousarray({what}) and copy the result back if needed")
    if writable and not arr.flags.writeable:
        raise InvalidArgument(f"{what} is read-only, but gyre writes the result into it")
    if dtype is None:
        return arr, code_of(arr.dtype, what)
    np_dtype, code = resolve_dtype(dtype)
    if arr.dtype == np_dtype:
        return arr, code
    if not raw and arr.dtype in _CODES:
        raise InvalidArgument(f"{what} has dtype {arr.dtype.name} but dtype={NAMES[code]} was asked; "
                              f"convert it with .astype() instead")
    if arr.nbytes % np_dtype.itemsize:
        raise InvalidArgument(f"{what} has {arr.nbytes} bytes, not a whole number of "
                              f"{NAMES[code]} elements ({np_dtype.itemsize} bytes each)")
    return arr.reshape(-1).view(np.uint8).view(np_dtype), code


def _writable(arr):
    """numpy before 2.0 marks every DLPack import read-only (DLPack 0.x has no
    such flag); the producer's tensor is writable, so view its memory as such."""
    if arr.flags.writeable or arr.size == 0:
        return arr
    raw = (ctypes.c_char * arr.nbytes).from_address(arr.__array_interface__["data"][0])
    view = np.frombuffer(raw, dtype=arr.dtype).reshape(arr.shape)
    return view


def _device_array(obj, what, dtype, writable):
    buf = met(device_buffer(obj, what, requested_stream()))
    if writable and buf.readonly:
        raise InvalidArgument(f"{what} is read-only, but gyre writes the result into it")
    if dtype is None:
        return buf, buf.code
    np_dtype, code = resolve_dtype(dtype)
    if code != buf.code:
        raise InvalidArgument(f"{what} has dtype {NAMES[buf.code]} but dtype={NAMES[code]} was asked; "
                              f"convert it on the device instead")
    return buf, code


def empty_like(a, shape):
    """A fresh array for a result, where a lives: numpy for host memory; for
    a device array, one its owner makes (torch's new_empty)."""
    if not isinstance(a, DeviceBuffer):
        return np.empty(shape, dtype=a.dtype)
    maker = getattr(a.owner, "new_empty", None)
    if maker is None:
        raise InvalidArgument(f"out= is needed: gyre cannot allocate device memory like a "
                              f"{type(a.owner).__name__}'s (it can for torch tensors)")
    return maker(tuple(shape))


def address(arr):
    if isinstance(arr, DeviceBuffer):
        return arr.ptr
    return arr.__array_interface__["data"][0]
