"""Device arrays (__cuda_array_interface__, DLPack) and streams.

The arrays here are what torch or CuPy would hand gyre: device memory (the
emulated GPU's, from gyreMemAlloc) exported through
__cuda_array_interface__ or DLPack. The emulated GPU's memory is host
memory, so the test can fill and read it directly, once the stream has got
there (settle)."""

import ctypes
import math

import numpy as np
import pytest

import gyre

lib = gyre._lib
lib.gyreMemAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
lib.gyreMemFree.argtypes = [ctypes.c_void_p]

LEGACY = 1


class DeviceMemory:
    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = max(1, math.prod(self.shape)) * self.dtype.itemsize
        p = ctypes.c_void_p()
        assert lib.gyreMemAlloc(ctypes.byref(p), self.nbytes) == 0
        self.ptr = p.value

    def host(self):
        """The memory as numpy sees it (the emulated device's is the host's)."""
        raw = (ctypes.c_char * self.nbytes).from_address(self.ptr)
        return np.frombuffer(raw, dtype=self.dtype, count=math.prod(self.shape)).reshape(self.shape)

    def __del__(self):
        lib.gyreMemFree(self.ptr)


class CudaArray(DeviceMemory):
    """Exports __cuda_array_interface__ v3, as torch and CuPy do."""

    def __init__(self, shape, dtype=np.float32, stream=LEGACY, strides=None, readonly=False):
        super().__init__(shape, dtype)
        self.stream, self.strides, self.readonly = stream, strides, readonly

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, self.readonly), "version": 3,
                "strides": self.strides, "stream": self.stream}

    def new_empty(self, shape):
        return CudaArray(shape, self.dtype, self.stream)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_new_capsule.restype = ctypes.py_object


class DLPackArray(DeviceMemory):
    """Exports DLPack (__dlpack__ / __dlpack_device__) for a CUDA device, and
    remembers the stream the consumer asked it to order its writes on."""

    def __init__(self, n, dl_code, bits, carrier):
        super().__init__((n,), carrier)
        self._shape = (ctypes.c_int64 * 1)(n)
        self._tensor = _DLManaged(self.ptr, _DLDevice(2, 0), 1, _DLDataType(dl_code, bits, 1), self._shape, None, 0,
                                  None, None)
        self.asked = []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        self.asked.append(stream)
        return _new_capsule(ctypes.addressof(self._tensor), b"dltensor", None)


_tick = []


def settle(comm):
    """Until the legacy stream is past what was enqueued on it: one more call
    on it, then a host call, which runs once the worker has seen that one's
    inputs staged (behind the copies out of the calls before). The tick
    lives as long as the session: its own copy out may still be queued (as
    with torch, memory must outlive the stream's use of it)."""
    if not _tick:
        _tick.append(CudaArray((1,)))
    comm.allreduce(_tick[0])
    comm.barrier()


def test_a_cuda_array_interface_array_is_reduced_in_place(comm):
    x = CudaArray((1000,))
    x.host()[:] = np.arange(1000, dtype=np.float32) + comm.rank
    assert comm.allreduce(x) is x  # enqueued on the array's stream, returns at once
    settle(comm)
    n = comm.size
    np.testing.assert_array_equal(x.host(), n * np.arange(1000, dtype=np.float32) + n * (n - 1) / 2)


def test_results_gyre_allocates_are_made_by_the_arrays_owner(comm):
    x = CudaArray((4,), np.int32)
    x.host()[:] = comm.rank
    out = comm.allgather(x)
    assert isinstance(out, CudaArray) and out.shape == (comm.size, 4)
    settle(comm)
    np.testing.assert_array_equal(out.host(), np.repeat(np.arange(comm.size, dtype=np.int32)[:, None], 4, axis=1))


def test_a_dlpack_bfloat16_array_on_the_stream_it_is_asked_for(comm):
    x = DLPackArray(64, 4, 16, np.uint16)  # DLPack bfloat16
    x.host()[:] = 0x3F80  # 1.0
    comm.allreduce(x, stream=LEGACY)
    assert x.asked == [LEGACY], "the producer is asked to order its writes on the call's stream"
    settle(comm)
    want = np.array([comm.size], dtype=np.float32).view(np.uint32)[0] >> 16
    np.testing.assert_array_equal(x.host(), np.full(64, want, np.uint16))


def test_a_stream_object_is_read_for_its_handle(comm):
    class TorchLikeStream:
        cuda_stream = LEGACY

    x = CudaArray((8,), np.float64, stream=None)
    x.host()[:] = 2.0
    comm.allreduce(x, op="max", stream=TorchLikeStream())
    settle(comm)
    np.testing.assert_array_equal(x.host(), np.full(8, 2.0))


def test_host_arrays_on_the_legacy_stream_are_host_calls(comm):
    x = np.ones(16, np.float32)
    comm.allreduce(x, stream=LEGACY)  # NCCL's NULL stream with host memory: done on return
    np.testing.assert_array_equal(x, np.full(16, comm.size, np.float32))


def test_a_cpu_dlpack_tensor_is_a_host_array(comm):
    class CpuTensor:  # torch.Tensor on the CPU exports this much
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    a = np.full(8, comm.rank, np.int64)
    comm.allreduce(CpuTensor(a))
    np.testing.assert_array_equal(a, np.full(8, comm.size * (comm.size - 1) // 2))


def test_bad_device_arguments_are_named(comm):
    x = CudaArray((8,))
    with pytest.raises(gyre.InvalidArgument, match="nonblocking"):
        comm.iallreduce(x)
    with pytest.raises(gyre.InvalidArgument, match="not C-contiguous"):
        comm.allreduce(CudaArray((4, 4), strides=(4, 16)))
    with pytest.raises(gyre.InvalidArgument, match="read-only"):
        comm.allreduce(CudaArray((8,), readonly=True))
    with pytest.raises(gyre.InvalidArgument, match="is not a CUDA stream"):
        comm.allreduce(x, stream="default")
    with pytest.raises(gyre.InvalidArgument, match="is not a stream"):
        comm.allreduce(x, stream=0x1234)  # a handle the device does not know: refused by the library
    with pytest.raises(gyre.InvalidArgument, match="dtype float32 but dtype=int32"):
        comm.allreduce(x, dtype="int32")

    class Plain:
        __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (x.ptr, False), "version": 3}

    with pytest.raises(gyre.InvalidArgument, match="out= is needed"):
        comm.allgather(Plain())
    # None of it broke the communicator.
    x.host()[:] = 1
    comm.allreduce(x)
    settle(comm)
    np.testing.assert_array_equal(x.host(), np.full(8, comm.size, np.float32))


def test_compressed_calls_on_device_arrays(comm):
    """codec= and a compressor on the stream, with the host calls' bits."""
    values = (np.arange(5000, dtype=np.float32) % 97 - 48) / 7 + comm.rank
    x, y = CudaArray((5000,)), CudaArray((5000,))
    x.host()[:] = y.host()[:] = values
    z = comm.compressor("int8", like=y)
    comm.allreduce(x, codec="int8")
    z.allreduce(y)
    z.allreduce(y)
    settle(comm)
    z.close()  # once the stream is past its calls
    want = comm.allreduce(values.copy(), codec="int8")
    np.testing.assert_array_equal(x.host(), want)
    with comm.compressor("int8", like=values) as host:
        host.allreduce(values)
        host.allreduce(values)
    np.testing.assert_array_equal(y.host(), values)
