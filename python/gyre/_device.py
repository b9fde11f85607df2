"""Device arrays (torch CUDA tensors, CuPy arrays, anything that exports
``__cuda_array_interface__`` or DLPack) as gyre buffers, never copied, and
the CUDA stream a call is enqueued on.

A call's stream is found in this order: the ``stream=`` argument (an int
handle, or an object with ``cuda_stream`` like torch.cuda.Stream, or
``ptr`` like cupy.cuda.Stream); else the stream the first device array
names in its ``__cuda_array_interface__`` (version 3's "stream": where the
producer's writes are ordered); else the legacy default stream. A DLPack
producer is asked (``__dlpack__(stream=...)``) to make its data ready on
that stream before the call reads it.
"""

import ctypes
import math
import threading

import numpy as np

from ._errors import InvalidArgument

LEGACY_STREAM = 1  # GYRE_STREAM_LEGACY: CUDA's legacy default stream (NCCL's NULL)
PER_THREAD_STREAM = 2  # cudaStreamPerThread

# DLPack (dlpack.h, v0.x ABI: DLManagedTensor).
_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED = 1, 2, 3, 13
_DEVICE_TYPES = {_KDL_CUDA: "CUDA device", _KDL_CUDA_HOST: "CUDA pinned host", _KDL_CUDA_MANAGED: "CUDA managed"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_valid.restype = ctypes.c_int
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer.restype = ctypes.c_void_p

BFLOAT16 = 9
# (DLPack type code, bits) -> (numpy dtype carrying it, gyreDataType_t)
_DL_TYPES = {
    (0, 8): (np.dtype(np.int8), 0),
    (1, 8): (np.dtype(np.uint8), 1),
    (0, 32): (np.dtype(np.int32), 2),
    (1, 32): (np.dtype(np.uint32), 3),
    (0, 64): (np.dtype(np.int64), 4),
    (1, 64): (np.dtype(np.uint64), 5),
    (2, 16): (np.dtype(np.float16), 6),
    (2, 32): (np.dtype(np.float32), 7),
    (2, 64): (np.dtype(np.float64), 8),
    (4, 16): (np.dtype(np.uint16), BFLOAT16),  # bfloat16, carried as its bits
}


class DeviceBuffer:
    """A device array's memory: address, elements, type and shape, and the
    objects that keep it alive (the array, a DLPack capsule)."""

    __slots__ = ("ptr", "size", "dtype", "code", "shape", "nbytes", "stream", "owner", "keep", "readonly")

    def __init__(self, ptr, shape, dtype, code, stream, owner, keep=None, readonly=False):
        self.ptr = ptr
        self.shape = tuple(int(d) for d in shape)
        self.size = math.prod(self.shape)
        self.dtype = dtype
        self.code = code
        self.nbytes = self.size * dtype.itemsize
        self.stream = stream  # the producer's stream (__cuda_array_interface__), or None
        self.owner = owner
        self.keep = keep
        self.readonly = readonly

    def __repr__(self):
        return f"DeviceBuffer(0x{self.ptr:x}, shape={self.shape}, dtype={self.dtype.name})"


def is_device_array(obj):
    """Whether obj is memory a GPU owns (not numpy, not a CPU DLPack tensor)."""
    if isinstance(obj, np.ndarray):
        return False
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    if hasattr(obj, "__dlpack_device__"):
        try:
            return int(obj.__dlpack_device__()[0]) != _KDL_CPU
        except Exception:  # noqa: BLE001 -- a broken producer: let the parse name it
            return True
    return type(obj).__name__ == "PyCapsule" and _capsule_valid(obj, b"dltensor") == 1


def _contiguous(shape, strides_bytes, itemsize):
    expect = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides_bytes)):
        if dim > 1 and stride != expect:
            return False
        expect *= dim
    return True


def _from_cai(obj, what):
    try:
        cai = obj.__cuda_array_interface__
        shape = tuple(int(d) for d in cai["shape"])
        dtype = np.dtype(cai["typestr"])
        ptr, readonly = cai["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidArgument(f"{what}'s __cuda_array_interface__ is not one gyre can read: {e}") from None
    if cai.get("mask") is not None:
        raise InvalidArgument(f"{what} is a masked device array; gyre reads plain ones")
    strides = cai.get("strides")
    if strides is not None and not _contiguous(shape, strides, dtype.itemsize):
        raise InvalidArgument(f"{what} is not C-contiguous (strides {tuple(strides)}); pass a contiguous copy")
    from ._types import code_of  # here: _types imports this module
    return DeviceBuffer(int(ptr or 0), shape, dtype, code_of(dtype, what), cai.get("stream"), obj,
                        readonly=bool(readonly))


def _from_capsule(capsule, owner, what):
    if _capsule_valid(capsule, b"dltensor") != 1:
        raise InvalidArgument(f"{what}: the DLPack capsule was already used (or is not a DLPack tensor)")
    managed = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    t = managed.dl_tensor
    kind = int(t.device.device_type)
    if kind not in _DEVICE_TYPES:
        raise InvalidArgument(f"{what} is DLPack memory of device type {kind}, not one gyre can use "
                              f"(CPU, CUDA, CUDA pinned host or CUDA managed)")
    key = (int(t.dtype.code), int(t.dtype.bits))
    if key not in _DL_TYPES or int(t.dtype.lanes) != 1:
        raise InvalidArgument(f"{what} has DLPack type (code {key[0]}, {key[1]} bits, {t.dtype.lanes} lanes), "
                              f"which gyre does not have")
    dtype, code = _DL_TYPES[key]
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    if t.strides and not _contiguous(shape, [int(t.strides[i]) * dtype.itemsize for i in range(t.ndim)],
                                     dtype.itemsize):
        raise InvalidArgument(f"{what} is not C-contiguous; pass a contiguous copy")
    ptr = int(t.data or 0) + int(t.byte_offset)
    # The capsule stays unconsumed and referenced: when it goes, its
    # destructor calls the producer's deleter, as DLPack wants of a consumer
    # that did not take ownership.
    return DeviceBuffer(ptr, shape, dtype, code, None, owner, keep=capsule)


def device_buffer(obj, what, stream):
    """A DeviceBuffer for a device array; stream: the call's stream if the
    caller gave one (for a DLPack producer to order its writes before)."""
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(obj, what)
    if hasattr(obj, "__dlpack__"):
        ask = stream if stream is not None else LEGACY_STREAM
        try:
            capsule = obj.__dlpack__(stream=ask)
        except TypeError:  # a producer without the stream keyword
            capsule = obj.__dlpack__()
        return _from_capsule(capsule, obj, what)
    return _from_capsule(obj, obj, what)


def stream_handle(stream):
    """The C handle of a stream= argument (None stays None)."""
    if stream is None:
        return None
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr) and not isinstance(stream, (int, np.integer)):
            stream = getattr(stream, attr)
            break
    if isinstance(stream, bool) or not isinstance(stream, (int, np.integer)) or int(stream) < 0:
        raise InvalidArgument(f"stream {stream!r} is not a CUDA stream (an int handle, or an object with "
                              f"cuda_stream or ptr)")
    return int(stream)


# The device buffers a call being built has met, so that the call knows its
# stream (kept per thread: a call is built on its caller's thread).
_building = threading.local()


class CallBuffers:
    """Collects the device buffers met while one call's arguments are checked."""

    def __init__(self, stream):
        self.stream = stream
        self.buffers = []

    def __enter__(self):
        self.outer = getattr(_building, "current", None)
        _building.current = self
        return self

    def __exit__(self, *exc):
        _building.current = self.outer

    def call_stream(self):
        """The handle to pass to C: None for a host call."""
        if self.stream is not None:
            return self.stream
        if not self.buffers:
            return None
        for b in self.buffers:
            if b.stream is not None:
                return int(b.stream)
        return LEGACY_STREAM


def met(buffer):
    current = getattr(_building, "current", None)
    if current is not None:
        current.buffers.append(buffer)
    return buffer


def requested_stream():
    current = getattr(_building, "current", None)
    return current.stream if current is not None else None
