"""DeepSpeed-Ulysses' exchanges (gyreSeqToHeads, gyreHeadsToSeq;
docs/sequence-parallel.md): the layout's arguments checked and turned into a
gyreSeqLayout_t, the shapes of both sides, and the calls."""

import ctypes
from collections import namedtuple

from ._calls import Call
from ._errors import InvalidArgument, check
from ._lib import SeqLayout, lib
from ._types import SIZE_MAX, address, as_array, c_int, empty_like, integer
from ._device import DeviceBuffer

_PARTS = (("q", 1), ("k", 2), ("v", 4))

# The heads a rank holds once the sequence is head-sharded (gyreSeqHeads).
HeadShare = namedtuple("HeadShare", "q_first q_count kv_first kv_count")


def parts_code(parts):
    """"q", "kv", "qkv" (letters in the order q, k, v) or the gyreSeqPart_t bits 1 to 7."""
    if isinstance(parts, int) and not isinstance(parts, bool):
        if 1 <= parts <= 7:
            return parts
    elif isinstance(parts, str):
        code, at, p = 0, 0, parts.lower()
        for letter, bit in _PARTS:
            if at < len(p) and p[at] == letter:
                code, at = code | bit, at + 1
        if code and at == len(p):
            return code
    raise InvalidArgument(f"parts must be q, k, v, kv, qk, qv, qkv (in that order) or 1 to 7, not {parts!r}")


class Layout:
    """heads, kv_heads, parts and a head size, with the token counts of one call."""

    def __init__(self, heads, kv_heads, parts):
        self.heads = c_int(heads, "heads")
        self.kv_heads = 0 if kv_heads is None else c_int(kv_heads, "kv_heads")
        self.parts = parts_code(parts)

    def c_layout(self, head_dim, seq_len, tokens):
        arr = None if tokens is None else (ctypes.c_size_t * len(tokens))(*tokens)
        layout = SeqLayout(self.heads, self.kv_heads, head_dim, self.parts, seq_len, arr)
        return layout, arr

    def share(self, size, rank, head_dim=1):
        layout, _ = self.c_layout(head_dim, 0, None)
        out = [ctypes.c_int() for _ in range(4)]
        check(lib.gyreSeqHeads(ctypes.byref(layout), size, rank, *map(ctypes.byref, out)))
        return HeadShare(*(v.value for v in out))

    def width(self):
        """Heads per token on the sequence side."""
        kv = self.kv_heads or self.heads
        return sum(n for (_, bit), n in zip(_PARTS, (self.heads, kv, kv)) if self.parts & bit)

    def share_width(self, s):
        return sum(n for (_, bit), n in zip(_PARTS, (s.q_count, s.kv_count, s.kv_count)) if self.parts & bit)


def _tokens(tokens, n):
    try:
        given = list(tokens)
    except TypeError:
        raise InvalidArgument(f"tokens must be a sequence of {n} non-negative integers (one per rank)") from None
    if len(given) != n:
        raise InvalidArgument(f"tokens must be {n} non-negative integers (one per rank), not {given!r}")
    return [integer(v, f"tokens[{j}]", 0, SIZE_MAX, "a size_t") for j, v in enumerate(given)]


def _head_dim(a, head_dim):
    """The elements per head: head_dim=, else the array's last axis."""
    if head_dim is not None:
        return integer(head_dim, "head_dim", 1, SIZE_MAX, "a size_t")
    shape = getattr(a, "shape", ())
    if len(shape) < 2 or shape[-1] < 1:
        raise InvalidArgument(f"x has shape {tuple(shape)}: pass head_dim= or a [tokens, heads, head_dim] array")
    return int(shape[-1])


def _rows(a, per_row, what):
    if per_row == 0:
        return 0
    if a.size % per_row:
        raise InvalidArgument(f"x has {a.size} elements, not a whole number of {what} ({per_row} elements each)")
    return a.size // per_row


def _result(out, a, code, shape, what, dtype):
    """out checked (type and size), or a fresh array of `shape`."""
    want = shape[0] * shape[1] * shape[2]
    if out is None:
        made = empty_like(a, shape)
        return (as_array(made, "out", writable=True)[0] if isinstance(a, DeviceBuffer) else made), made
    o, ocode = as_array(out, "out", dtype, writable=True)
    if ocode != code or o.dtype != a.dtype:
        raise InvalidArgument(f"out has dtype {o.dtype.name} but x has {a.dtype.name}; they must be the same")
    if o.size != want:
        raise InvalidArgument(f"out has {o.size} elements; {what} needs {want} ({shape[0]} x {shape[1]} x {shape[2]})")
    return o, out


def exchange(comm, to_heads, x, heads, kv_heads, parts, tokens, head_dim, out, dtype):
    """The Call for seq_to_heads (to_heads) or heads_to_seq."""
    layout = Layout(heads, kv_heads, parts)
    a, code = as_array(x, "x", dtype)
    n, me = comm.size, comm.rank
    dim = _head_dim(a, head_dim)
    share = layout.share(n, me, dim)
    width, mine = layout.width(), layout.share_width(share)
    if tokens is not None:
        counts = _tokens(tokens, n)
        seq_len = sum(counts)
        have = _rows(a, (width if to_heads else mine) * dim, "tokens")
        want = counts[me] if to_heads else seq_len
        if (width if to_heads else mine) and have != want:
            raise InvalidArgument(f"x holds {have} tokens but tokens says {want}")
    else:
        counts = None
        if to_heads:
            seq_len = _rows(a, width * dim, "tokens") * n
        else:
            seq_len = _rows(a, mine * dim, "tokens") if mine else None
            if seq_len is None:
                raise InvalidArgument("this rank holds no heads, so x cannot say the sequence's length: pass tokens=")
    local = counts[me] if counts is not None else seq_len // n
    shape = (seq_len, mine, dim) if to_heads else (local, width, dim)
    o, result = _result(out, a, code, shape, "seq_to_heads" if to_heads else "heads_to_seq", dtype)
    c_layout, arr = layout.c_layout(dim, seq_len, counts)
    names = ("gyreSeqToHeads", "gyreIseqToHeads") if to_heads else ("gyreHeadsToSeq", "gyreIheadsToSeq")
    return Call(*names, [address(a), address(o), ctypes.byref(c_layout), code], [x, out, a, o, c_layout, arr],
                result)
