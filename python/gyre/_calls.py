"""Each collective's arguments, checked and turned into one C call.

A Call names the blocking and nonblocking entry points, holds the argument
list up to (not including) the communicator, the objects that must outlive
the operation, and what the Python method returns. The blocking and the
nonblocking method of an operation share one of these builders, so they
accept exactly the same arguments.
"""

import ctypes

from ._device import DeviceBuffer
from ._errors import InvalidArgument
from ._types import SIZE_MAX, UINT64_MAX, address, as_array, c_int, codec_code, empty_like, integer, op_code, peers_code


class Call:
    __slots__ = ("blocking", "nonblocking", "args", "keep", "result", "premul", "dtype")

    def __init__(self, blocking, nonblocking, args, keep, result, premul=None, dtype=None):
        self.blocking = blocking
        self.nonblocking = nonblocking
        self.args = args  # op slot holds the built-in op's code, or None for a PreMulSum
        self.keep = keep
        self.result = result
        self.premul = premul  # (index of the op argument, PreMulSum, numpy dtype, code) or None
        self.dtype = dtype


def _addr(arr):
    return address(arr) if arr is not None else None


def _same_type(o, ocode, a, code, out_name="out", in_name="x"):
    if ocode != code or o.dtype != a.dtype:
        raise InvalidArgument(f"{out_name} has dtype {o.dtype.name} but {in_name} has {a.dtype.name}; "
                              f"they must be the same")


def _need_size(o, want, what, why):
    if o.size != want:
        raise InvalidArgument(f"{what} has {o.size} elements; {why} needs {want}")


def _blocks(a, n, what):
    """Elements per rank when a is split into n equal blocks."""
    if a.size % n:
        raise InvalidArgument(f"{what} has {a.size} elements, not a multiple of the {n} ranks")
    return a.size // n


def _block_shape(shape, n, count):
    """np.split's shape: the first axis divided by n, or flat when it does not divide."""
    if len(shape) >= 1 and shape[0] % n == 0:
        return (shape[0] // n,) + tuple(shape[1:])
    return (count,)


def _op(op, pos, a, code):
    c = op_code(op)
    return c, (None if c is not None else (pos, op, a.dtype, code))


def _fresh(a, shape):
    """(the array to pass, the object to return) for a result gyre allocates, where a lives."""
    made = empty_like(a, shape)
    if isinstance(a, DeviceBuffer):
        return as_array(made, "out", writable=True)[0], made
    return made, made


def _output(out, a, code, want, why, dtype, shape):
    """out checked against x (type and size), or a fresh array of the given shape."""
    if out is None:
        return _fresh(a, shape if shape is not None else a.shape)
    o, ocode = as_array(out, "out", dtype, writable=True)
    _same_type(o, ocode, a, code)
    _need_size(o, want, "out", why)
    return o, out


def _compressed(call, codec, name):
    """call, compressed when codec is given: a codec (gyre<name>Codec) or a
    gyre.Compressor (gyreCompressed<name>), passed after the op. Compressed
    calls have no nonblocking form."""
    if codec is None:
        return call
    handle = getattr(codec, "_c_handle", None)
    if handle is not None:  # a Compressor: kept with the call's buffers (a group runs it later)
        call.blocking, extra = f"gyreCompressed{name}", handle()
        call.keep.append(codec)
    else:
        call.blocking, extra = f"gyre{name}Codec", codec_code(codec)
    call.nonblocking = None
    call.args.append(extra)
    return call


def allreduce(x, op, out, dtype, codec=None):
    a, code = as_array(x, "x", dtype, writable=out is None)
    o, result = (a, x) if out is None else _output(out, a, code, a.size, "allreduce of x", dtype, None)
    opc, premul = _op(op, 4, a, code)
    return _compressed(Call("gyreAllReduce", "gyreIallReduce", [address(a), address(o), a.size, code, opc],
                            [x, out, a, o], result, premul), codec, "AllReduce")


def peer_average(x, peers, step, out, dtype):
    sel = peers_code(peers)
    # A uint64_t in C: a negative or float step would otherwise be wrapped or refused by ctypes.
    step = integer(step, "step", 0, UINT64_MAX, "a uint64_t")
    a, code = as_array(x, "x", dtype, writable=out is None)
    o, result = (a, x) if out is None else _output(out, a, code, a.size, "peer_average of x", dtype, None)
    return Call("gyrePeerAverage", None, [address(a), address(o), a.size, code, sel, step], [x, out, a, o], result)


def broadcast(x, root, out, dtype):
    root = c_int(root, "root")
    if out is None:
        a, code = as_array(x, "x", dtype, writable=True)
        return Call("gyreBroadcast", "gyreIbroadcast", [address(a), address(a), a.size, code, root], [x, a], x)
    o, code = as_array(out, "out", dtype, writable=True)
    a = None
    if x is not None:
        a, xcode = as_array(x, "x", dtype)
        _same_type(o, code, a, xcode)
        _need_size(a, o.size, "x", "broadcast into out")
    return Call("gyreBroadcast", "gyreIbroadcast", [_addr(a), address(o), o.size, code, root], [x, out, a, o], out)


def reduce(comm, x, op, root, out, dtype):
    root = c_int(root, "root")
    on_root = comm.rank == root
    a, code = as_array(x, "x", dtype, writable=out is None and on_root)
    if out is None:
        o, result = a, x
    else:
        o, result = _output(out, a, code, a.size, "reduce of x", dtype, None)
    opc, premul = _op(op, 4, a, code)
    return Call("gyreReduce", "gyreIreduce", [address(a), address(o), a.size, code, opc, root], [x, out, a, o],
                result if on_root else None, premul)


def allgather(comm, x, out, dtype, codec=None):
    a, code = as_array(x, "x", dtype)
    n = comm.size
    o, result = _output(out, a, code, n * a.size, f"allgather of x over {n} ranks", dtype, (n,) + a.shape)
    return _compressed(Call("gyreAllGather", "gyreIallGather", [address(a), address(o), a.size, code],
                            [x, out, a, o], result), codec, "AllGather")


def reducescatter(comm, x, op, out, dtype, codec=None):
    a, code = as_array(x, "x", dtype)
    n = comm.size
    count = _blocks(a, n, "x")
    o, result = _output(out, a, code, count, f"reducescatter of x over {n} ranks", dtype,
                        _block_shape(a.shape, n, count))
    opc, premul = _op(op, 4, a, code)
    return _compressed(Call("gyreReduceScatter", "gyreIreduceScatter", [address(a), address(o), count, code, opc],
                            [x, out, a, o], result, premul), codec, "ReduceScatter")


def alltoall(comm, x, out, dtype):
    a, code = as_array(x, "x", dtype, writable=out is None)
    count = _blocks(a, comm.size, "x")
    o, result = (a, x) if out is None else _output(out, a, code, a.size, "alltoall of x", dtype, None)
    return Call("gyreAllToAll", "gyreIallToAll", [address(a), address(o), count, code], [x, out, a, o], result)


def _counts(values, n, what):
    try:
        given = list(values)
    except TypeError:
        raise InvalidArgument(f"{what} must be a sequence of {n} non-negative integers") from None
    if len(given) != n:
        raise InvalidArgument(f"{what} must be {n} non-negative integers (one per rank), not {given!r}")
    # 2.5 or "3" would have been truncated or parsed by int(): they are errors, like 2**64.
    try:
        return [integer(v, f"{what}[{j}]", 0, SIZE_MAX, "a size_t") for j, v in enumerate(given)]
    except InvalidArgument as e:
        raise InvalidArgument(f"{what} must be {n} non-negative integers (one per rank): {e}") from None


def _extent(counts, displs):
    return max((d + c for c, d in zip(counts, displs) if c), default=0)


def alltoallv(comm, x, sendcounts, recvcounts, sdispls, rdispls, out, dtype):
    n = comm.size
    sc = _counts(sendcounts, n, "sendcounts")
    rc = _counts(recvcounts, n, "recvcounts")
    prefix = lambda c: [sum(c[:j]) for j in range(n)]  # noqa: E731
    sd = prefix(sc) if sdispls is None else _counts(sdispls, n, "sdispls")
    rd = prefix(rc) if rdispls is None else _counts(rdispls, n, "rdispls")
    a, code = as_array(x, "x", dtype)
    # gyre cannot see how long a Python buffer is: the counts must fit here.
    if _extent(sc, sd) > a.size:
        raise InvalidArgument(f"x has {a.size} elements but sendcounts and sdispls reach element {_extent(sc, sd)}")
    recv_extent = _extent(rc, rd)
    if out is None:
        o, result = _fresh(a, (recv_extent,))
    else:
        o, ocode = as_array(out, "out", dtype, writable=True)
        _same_type(o, ocode, a, code)
        if recv_extent > o.size:
            raise InvalidArgument(f"out has {o.size} elements but recvcounts and rdispls reach element {recv_extent}")
        result = out
    arrays = [(ctypes.c_size_t * n)(*v) for v in (sc, sd, rc, rd)]
    return Call("gyreAllToAllv", "gyreIallToAllv",
                [address(a), arrays[0], arrays[1], address(o), arrays[2], arrays[3], code],
                [x, out, a, o, arrays], result)


def gather(comm, x, root, out, dtype):
    root = c_int(root, "root")
    a, code = as_array(x, "x", dtype)
    n = comm.size
    o, result = None, None
    if comm.rank == root:
        o, result = _output(out, a, code, n * a.size, f"gather of x over {n} ranks", dtype, (n,) + a.shape)
    return Call("gyreGather", None, [address(a), _addr(o), a.size, code, root], [x, out, a, o], result)


def scatter(comm, x, root, out, dtype):
    root = c_int(root, "root")
    n = comm.size
    a = o = None
    if comm.rank == root or out is None:
        if x is None:
            raise InvalidArgument("x is None: scatter needs it on the root, and elsewhere when out is not given "
                                  "(for its shape and type)")
        a, code = as_array(x, "x", dtype)
        count = _blocks(a, n, "x")
        o, result = _output(out, a, code, count, f"scatter of x over {n} ranks", dtype, _block_shape(a.shape, n, count))
    else:
        o, code = as_array(out, "out", dtype, writable=True)
        count, result = o.size, out
    send = a if comm.rank == root else None
    return Call("gyreScatter", None, [_addr(send), address(o), count, code, root], [x, out, a, o], result)


def send(x, peer, dtype):
    peer = c_int(peer, "peer")
    a, code = as_array(x, "x", dtype)
    return Call("gyreSend", "gyreIsend", [address(a), a.size, code, peer], [x, a], None)


def recv(out, peer, dtype):
    peer = c_int(peer, "peer")
    o, code = as_array(out, "out", dtype, writable=True)
    return Call("gyreRecv", "gyreIrecv", [address(o), o.size, code, peer], [out, o], out)


def barrier():
    return Call("gyreBarrier", "gyreIbarrier", [], [], None)
