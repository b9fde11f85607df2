"""Compressed collectives: codec= on allreduce, reducescatter and allgather,
and compressors (comm.compressor) that carry error feedback across calls.

Every rank can regenerate every rank's input (seeded by rank), so each
checks its result against the exact one computed in float64. The codecs'
arithmetic is deterministic (the block's owner adds in rank order in
float32, encodes the sum once, and every rank decodes that same message),
so results must also be bit-identical across ranks."""

import gc

import numpy as np
import pytest

import gyre
from test_errors import raises

COUNT = 2 * 4096 + 1811  # codec chunks are 4096 values: two whole ones and a part

# Relative error of one encoding (or of rounding to a data type); int8's is
# half a step of 255 over a chunk's range, here at most 2 per contribution.
# float32's covers adding a few values in float32.
EPS = {"fp16": 2**-11, "bf16": 2**-8, "int8": 1 / 255, "none": 0.0, "float32": 2**-22, "float16": 2**-11,
       "bfloat16": 2**-8}


def to_dtype(f32, dtype):
    """float32 values in dtype (bfloat16: a uint16 array of its bits, truncated)."""
    if dtype == "bfloat16":
        return (f32.view(np.uint32) >> 16).astype(np.uint16)
    return f32.astype(dtype)


def as_float(a, dtype):
    if dtype == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def input_of(rank, size, dtype="float32", call=0):
    """Rank's input: values in [-1, 1], exactly representable in dtype."""
    return to_dtype(np.random.default_rng(1000 * call + rank).uniform(-1, 1, size).astype(np.float32), dtype)


def every_input(comm, size, dtype="float32", call=0):
    return np.array([as_float(input_of(r, size, dtype, call), dtype) for r in range(comm.size)])


def same_bits_everywhere(comm, a):
    rows = comm.allgather(np.ascontiguousarray(a).view(np.uint8).reshape(-1))
    return all(np.array_equal(rows[0], row) for row in rows)


def tolerance(comm, codec, dtype):
    """One encoding of each contribution and of the sum (up to size in
    magnitude), and the sum's rounding to dtype."""
    return 2 * comm.size * (EPS[codec] + EPS[dtype])


CASES = [("float32", c) for c in ("none", "fp16", "bf16", "int8")] + [("float16", "int8"), ("bfloat16", "fp16")]


@pytest.mark.parametrize("dtype,codec", CASES)
def test_allreduce_with_a_codec_is_close_and_the_same_everywhere(comm, dtype, codec):
    kw = {"dtype": dtype} if dtype == "bfloat16" else {}
    exact = every_input(comm, COUNT, dtype)
    x = input_of(comm.rank, COUNT, dtype)
    assert comm.allreduce(x, codec=codec, **kw) is x  # in place, as the plain call
    err = np.abs(as_float(x, dtype) - exact.sum(axis=0)).max()
    assert err <= tolerance(comm, codec, dtype), f"{codec} on {dtype}: max error {err}"
    assert same_bits_everywhere(comm, x)

    out = np.empty_like(x)
    comm.allreduce(input_of(comm.rank, COUNT, dtype), op="avg", out=out, codec=gyre.Codec[codec.upper()], **kw)
    err = np.abs(as_float(out, dtype) - exact.mean(axis=0)).max()
    assert err <= tolerance(comm, codec, dtype), f"{codec} on {dtype}, avg: max error {err}"
    assert same_bits_everywhere(comm, out)


def test_fp16_is_tiny_int8_small(comm):
    exact = every_input(comm, COUNT).sum(axis=0)
    err = {}
    for codec in ("fp16", "int8"):
        x = input_of(comm.rank, COUNT)
        comm.allreduce(x, codec=codec)
        err[codec] = np.abs(x - exact).max()
    assert 0 < err["fp16"] <= comm.size * 2**-10 and err["fp16"] < err["int8"] <= 2 * comm.size / 255, err


@pytest.mark.parametrize("codec", ["fp16", "int8"])
def test_reducescatter_and_allgather_with_a_codec(comm, codec):
    n, tol = comm.size, tolerance(comm, codec, "float32")
    x = input_of(comm.rank, n * COUNT)
    block = comm.reducescatter(x, codec=codec)
    exact = every_input(comm, n * COUNT).sum(axis=0)[comm.rank * COUNT:(comm.rank + 1) * COUNT]
    assert block.shape == (COUNT,) and np.abs(block - exact).max() <= tol

    got = comm.allgather(input_of(comm.rank, COUNT), codec=codec)
    assert got.shape == (n, COUNT)
    assert np.abs(got - every_input(comm, COUNT)).max() <= 2 * EPS[codec]  # one encoding of each share
    assert same_bits_everywhere(comm, got)


def test_onebit_is_the_same_everywhere(comm):
    x = input_of(comm.rank, COUNT)
    comm.allreduce(x, codec="onebit")
    assert same_bits_everywhere(comm, x)


# ---- compressors ----

CALLS = 64


def running_mean_error(comm, z, kind):
    """Max and mean error of the running mean of CALLS outputs of the same
    input against the exact result, after CALLS // 8 and CALLS calls."""
    n, m = comm.size, COUNT
    if kind == "allreduce":
        x, exact = input_of(comm.rank, m), every_input(comm, m).mean(axis=0)
        step = lambda: z.allreduce(x, op="avg", out=np.empty(m, np.float32))  # noqa: E731
    elif kind == "reducescatter":
        x, exact = input_of(comm.rank, n * m), every_input(comm, n * m).mean(axis=0)[comm.rank * m:(comm.rank + 1) * m]
        step = lambda: z.reducescatter(x, op="avg")  # noqa: E731
    else:
        x, exact = input_of(comm.rank, m), every_input(comm, m)
        step = lambda: z.allgather(x)  # noqa: E731
    total, errors = np.zeros(exact.shape), {}
    for k in range(1, CALLS + 1):
        total += step()
        if k in (CALLS // 8, CALLS):
            e = np.abs(total / k - exact)
            errors[k] = (e.max(), e.mean())
    assert same_bits_everywhere(comm, total) or kind == "reducescatter"
    return errors


@pytest.mark.parametrize("kind", ["allreduce", "reducescatter", "allgather"])
def test_error_feedback_makes_onebit_converge(comm, kind):
    """A constant input, CALLS times: without feedback onebit makes the same
    error each call; with it, what each call lost goes into the next, so the
    running mean of the outputs approaches the exact result."""
    tensor = COUNT if kind == "allreduce" else comm.size * COUNT
    with comm.compressor("onebit", count=tensor, dtype="float32") as z:
        fed = running_mean_error(comm, z, kind)
    with comm.compressor("onebit", count=tensor, dtype=np.float32, error_feedback=False) as z:
        plain = running_mean_error(comm, z, kind)
    early, late = fed[CALLS // 8], fed[CALLS]
    assert plain[CALLS // 8] == plain[CALLS], "without feedback every call makes the same error"
    assert late[1] < early[1] / 2 and late[0] < early[0], f"with feedback the error falls: {fed}"
    assert late[1] < plain[CALLS][1] / 8 and late[0] < plain[CALLS][0], f"feedback {fed}, none {plain}"


def test_reset_forgets_the_feedback(comm):
    x = input_of(comm.rank, COUNT)
    stateless = comm.allreduce(x.copy(), codec="onebit")
    with comm.compressor("onebit", like=x) as z:
        first = z.allreduce(x, out=np.empty_like(x))
        np.testing.assert_array_equal(first, stateless)  # nothing kept yet: the stateless call's bits
        assert not np.array_equal(z.allreduce(x, out=np.empty_like(x)), first)
        z.reset()
        np.testing.assert_array_equal(z.allreduce(x, out=np.empty_like(x)), first)


def test_a_compressor_of_each_codec_and_type(comm):
    """Compressors take what the plain calls take (in place, out=, bfloat16 bits)."""
    for dtype, codec in CASES:
        kw = {"dtype": dtype} if dtype == "bfloat16" else {}
        x = input_of(comm.rank, COUNT, dtype)
        with comm.compressor(codec, like=x, **kw) as z:
            assert z.count == COUNT and z.dtype == dtype and z.codec == gyre.Codec[codec.upper()]
            for call in range(3):
                x = input_of(comm.rank, COUNT, dtype, call)
                z.allreduce(x, **kw)
                # Feedback adds back at most what the last call lost.
                err = np.abs(as_float(x, dtype) - every_input(comm, COUNT, dtype, call).sum(axis=0)).max()
                assert err <= 2 * tolerance(comm, codec, dtype), f"{codec} on {dtype}, call {call}: {err}"
                assert same_bits_everywhere(comm, x)


def test_codec_none_is_the_plain_call(comm):
    x = input_of(comm.rank, COUNT)
    with comm.compressor("none", like=x) as z:
        np.testing.assert_array_equal(z.allreduce(x, out=np.empty_like(x)), comm.allreduce(x.copy()))


def test_compressor_lifetime(comm):
    z = comm.compressor(gyre.Codec.INT8, count=64, dtype="float32")
    assert repr(z) == "<gyre.Compressor int8, 64 x float32, error feedback>"
    with z:
        z.allreduce(np.ones(64, np.float32))
    assert z.closed and repr(z).startswith("<gyre.Compressor closed")
    z.close()  # closing twice is harmless
    with raises(gyre.InvalidUsage, "compressor is closed"):
        z.allreduce(np.ones(64, np.float32))
    with raises(gyre.InvalidUsage, "compressor is closed"):
        z.reset()

    dropped = comm.compressor("fp16", count=64, dtype="float16")._finalizer
    gc.collect()
    assert not dropped.alive, "a compressor dropped without close is destroyed when collected"

    child = comm.split(0)
    z = child.compressor("fp16", count=8, dtype="float32")
    child.close()  # a compressor may outlive its communicator, but not use it
    with raises(gyre.InvalidUsage, "communicator is closed"):
        z.allreduce(np.ones(8, np.float32))
    z.close()


def test_compressed_calls_in_a_group(comm):
    x, y = input_of(comm.rank, COUNT), input_of(comm.rank, COUNT, call=1)
    with comm.compressor("int8", like=y) as z:
        want_x, want_y = comm.allreduce(x.copy(), codec="int8"), z.allreduce(y.copy())
        z.reset()
        with gyre.group():
            comm.allreduce(x, codec="int8")
            z.allreduce(y)
        np.testing.assert_array_equal(x, want_x)
        np.testing.assert_array_equal(y, want_y)


# ---- errors ----


def test_what_codecs_do_not_take(comm):
    """The library refuses these before sending anything: every rank stays in step."""
    with raises(gyre.InvalidArgument, "gyreAllReduceCodec", "float32, float16 or bfloat16, not int32"):
        comm.allreduce(np.zeros(8, np.int32), codec="int8")
    with raises(gyre.InvalidArgument, "gyreAllGatherCodec", "not float64"):
        comm.allgather(np.zeros(8), codec="fp16")
    with raises(gyre.InvalidArgument, "with codec int8 takes gyreSum or gyreAvg, not op 2"):
        comm.allreduce(np.zeros(8, np.float32), op="max", codec="int8")
    with raises(gyre.InvalidArgument, "gyreReduceScatterCodec", "gyreSum or gyreAvg"):
        comm.reducescatter(np.zeros(8 * comm.size, np.float32), op="prod", codec="bf16")
    with raises(gyre.InvalidArgument, "gyreSum or gyreAvg"):
        comm.allreduce(np.zeros(8, np.float32), op=gyre.PreMulSum(2.0), codec="fp16")
    for bad in ("int4", 5, -1, True, 1.0):
        with raises(gyre.InvalidArgument, f"codec {bad!r} is not one of none, fp16, bf16, int8, onebit"):
            comm.allreduce(np.zeros(8, np.float32), codec=bad)
    comm.barrier()


def test_what_compressors_do_not_take(comm):
    with raises(gyre.InvalidArgument, "gyreCompressorCreate", "int8 takes float32, float16 or bfloat16, not int32"):
        comm.compressor("int8", like=np.zeros(8, np.int32))
    with raises(gyre.InvalidArgument, "like= (an array) or count= and dtype=, not both"):
        comm.compressor("int8")
    with raises(gyre.InvalidArgument, "like= (an array) or count= and dtype=, not both"):
        comm.compressor("int8", like=np.zeros(8, np.float32), count=8)
    with raises(gyre.InvalidArgument, "count= needs dtype="):
        comm.compressor("int8", count=8)
    with raises(gyre.InvalidArgument, "count -1 is outside"):
        comm.compressor("int8", count=-1, dtype="float32")
    with raises(gyre.InvalidArgument, "codec 'zip'"):
        comm.compressor("zip", count=8, dtype="float32")
    n = comm.size
    with comm.compressor("int8", count=64 * n, dtype="float32") as z:
        with raises(gyre.InvalidArgument, "gyreCompressedAllReduce", f"made for a tensor of {64 * n} values",
                    "count makes one of 32"):
            z.allreduce(np.zeros(32, np.float32))
        with raises(gyre.InvalidArgument, "made for float32, not float16"):
            z.allreduce(np.zeros(64 * n, np.float16))
        with raises(gyre.InvalidArgument, "gyreCompressedReduceScatter", "recvcount x nranks makes one of"):
            z.reducescatter(np.zeros(2 * 64 * n, np.float32))
        with raises(gyre.InvalidArgument, "gyreCompressedAllGather", f"sendcount x nranks makes one of {64 * n * n}"):
            z.allgather(np.zeros(64 * n, np.float32))  # allgather takes this rank's share, not the tensor
        with raises(gyre.InvalidArgument, "gyreSum or gyreAvg, not op 3"):
            z.allreduce(np.zeros(64 * n, np.float32), op="min")
        z.allreduce(np.ones(64 * n, np.float32))  # still usable, and every rank in step
    comm.barrier()


def test_ranks_that_disagree_on_the_codec_fail_everywhere(comm):
    child = comm.split(0, name="codecs")
    with raises(gyre.Error, "every rank must use the same codec"):
        child.allreduce(np.ones(50000, np.float32), codec="fp16" if child.rank == 0 else "int8")
    child.close()
    comm.barrier()
