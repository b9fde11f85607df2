"""Expert dispatch and combine for mixture-of-experts (gyreMoe*; docs/moe.md):
a routing made from the tokens' top-k expert choices, and the calls that
send each token's row to its experts' ranks and bring the experts' rows
back. Host (numpy) arrays, blocking calls."""

import ctypes

import numpy as np

from ._errors import InvalidArgument, check
from ._lib import lib
from ._types import SIZE_MAX, as_array, c_int, integer

PER_SLOT = 0x1  # GYRE_MOE_PER_SLOT


class MoeRouting:
    """Where each of this rank's token slots goes: made from choices ([tokens, k]
    int32 expert ids, -1 for none) on comm, reusable for dispatch, combine and
    both backward passes. Free it with close() (or let it be collected)."""

    def __init__(self, comm, choices, experts, expert_rank=None, capacity=0):
        ch = np.ascontiguousarray(choices, dtype=np.int32)
        if ch.ndim != 2:
            raise InvalidArgument(f"choices must be [tokens, k] expert ids, not of shape {ch.shape}")
        self.comm = comm
        self.tokens, self.k = int(ch.shape[0]), int(ch.shape[1])
        self.experts = c_int(experts, "experts")
        self._map = None
        if expert_rank is not None:
            self._map = np.ascontiguousarray(expert_rank, dtype=np.intc)
            if self._map.shape != (self.experts,):
                raise InvalidArgument(f"expert_rank must hold {self.experts} ranks (one per expert)")
        capacity = integer(capacity, "capacity", 0, SIZE_MAX, "a size_t")
        handle = ctypes.c_void_p()
        check(lib.gyreMoeRoutingCreate(ctypes.byref(handle), ch.ctypes.data if ch.size else None, self.tokens, self.k,
                                       self.experts, None if self._map is None else self._map.ctypes.data,
                                       capacity, comm._handle()))
        self._h = handle

    def close(self):
        if self._h is not None and self._h.value:
            lib.gyreMoeRoutingDestroy(self._h)
        self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (at interpreter exit the library may be gone)
            pass

    def handle(self):
        if self._h is None:
            raise InvalidArgument("this routing was closed")
        return self._h

    def exchange_counts(self):
        """Collective: learns how many rows each local expert gets from each rank."""
        check(lib.gyreMoeExchangeCounts(self.handle(), self.comm._handle()))

    @property
    def sent(self):
        """Rows this rank sends each expert (kept slots), by expert."""
        a = np.zeros(self.experts, dtype=np.uintp)
        check(lib.gyreMoeSendCounts(self.handle(), a.ctypes.data, None))
        return a.astype(np.int64)

    @property
    def dropped(self):
        """Slots this rank dropped for capacity, by expert."""
        a = np.zeros(self.experts, dtype=np.uintp)
        check(lib.gyreMoeSendCounts(self.handle(), None, a.ctypes.data))
        return a.astype(np.int64)

    @property
    def local_experts(self):
        n = ctypes.c_int()
        check(lib.gyreMoeLocalExperts(self.handle(), ctypes.byref(n), None))
        ids = np.zeros(max(n.value, 1), dtype=np.intc)
        check(lib.gyreMoeLocalExperts(self.handle(), ctypes.byref(n), ids.ctypes.data))
        return [int(v) for v in ids[: n.value]]

    def recv_counts(self):
        """(rows [local, size]: rows local expert l gets from rank q; dropped [local]; total),
        or None before the counts are known (exchange_counts or a dispatch)."""
        local = len(self.local_experts)
        rows = np.zeros(max(local * self.comm.size, 1), dtype=np.uintp)
        dropped = np.zeros(max(local, 1), dtype=np.uintp)
        total = ctypes.c_size_t()
        rc = lib.gyreMoeRecvCounts(self.handle(), rows.ctypes.data, dropped.ctypes.data, ctypes.byref(total))
        if rc == 5:  # gyreInvalidUsage: not known yet
            return None
        check(rc)
        return (rows[: local * self.comm.size].astype(np.int64).reshape(local, self.comm.size),
                dropped[:local].astype(np.int64), int(total.value))


def _hidden(a, per_slot, routing):
    lead = routing.tokens * (routing.k if per_slot else 1)
    if lead == 0:
        if a.ndim < 2 or a.shape[-1] < 1:
            raise InvalidArgument("x holds no rows: pass x of shape [0, hidden]")
        return int(a.shape[-1])
    if a.size % lead:
        raise InvalidArgument(f"x has {a.size} elements, not {lead} rows ({'tokens x k' if per_slot else 'tokens'})")
    return a.size // lead


def dispatch(comm, x, routing, out=None, rows=None, per_slot=False, dtype=None):
    """x [tokens, hidden] (per_slot: [tokens, k, hidden]) -> the rows this rank's experts get,
    [rows, hidden], grouped by local expert, then source rank. Without out or rows, the counts
    are exchanged first when not yet known, so out is exactly as large; with rows (or out), the
    counts travel ahead of the rows when not yet known, and out holds `rows` rows."""
    a, code = as_array(x, "x", dtype)
    hidden = _hidden(a, per_slot, routing)
    counts = routing.recv_counts()
    if out is None:
        if rows is None:
            if counts is None:
                routing.exchange_counts()
                counts = routing.recv_counts()
            rows = counts[2]
        rows = integer(rows, "rows", 0, SIZE_MAX, "a size_t")
        o = np.empty((rows, hidden), dtype=a.dtype)
    else:
        o, ocode = as_array(out, "out", dtype, writable=True)
        if ocode != code:
            raise InvalidArgument(f"out has dtype {o.dtype.name} but x has {a.dtype.name}; they must be the same")
        if o.size % hidden:
            raise InvalidArgument(f"out has {o.size} elements, not whole rows of {hidden}")
        rows = o.size // hidden
    check(lib.gyreMoeDispatch(a.ctypes.data if a.size else None, o.ctypes.data if o.size else None, rows, hidden,
                              code, PER_SLOT if per_slot else 0, routing.handle(), comm._handle(), None))
    total = routing.recv_counts()[2]
    return o.reshape(rows, hidden)[:total] if out is None else out


def combine(comm, y, routing, weights=None, out=None, dtype=None):
    """y [rows, hidden], the experts' rows in dispatch order, back to the tokens: with weights
    ([tokens, k] float32) out [tokens, hidden] = sum over kept slots of weight x row (slot
    order, fused multiply-adds in float32, float64 for float64); without, out [tokens, k,
    hidden], each slot's row (zero where dropped or without an expert)."""
    a, code = as_array(y, "y", dtype)
    counts = routing.recv_counts()
    if counts is None:
        raise InvalidArgument("the routing's counts are not known yet: combine follows a dispatch")
    rows = counts[2]
    if rows == 0:
        if a.ndim < 2:
            raise InvalidArgument("y holds no rows: pass y of shape [0, hidden]")
        hidden = int(a.shape[-1])
    elif a.size % rows:
        raise InvalidArgument(f"y has {a.size} elements, not {rows} rows (what the dispatch brought)")
    else:
        hidden = a.size // rows
    w = None
    if weights is not None:
        w = np.ascontiguousarray(weights, dtype=np.float32)
        if w.shape != (routing.tokens, routing.k):
            raise InvalidArgument(f"weights must be [tokens, k] = [{routing.tokens}, {routing.k}], not {w.shape}")
    shape = (routing.tokens, hidden) if w is not None else (routing.tokens, routing.k, hidden)
    if out is None:
        o = np.empty(shape, dtype=a.dtype)
    else:
        o, ocode = as_array(out, "out", dtype, writable=True)
        if ocode != code or o.size != int(np.prod(shape)):
            raise InvalidArgument(f"out must be {shape} of {a.dtype.name}")
    check(lib.gyreMoeCombine(a.ctypes.data if a.size else None, rows, o.ctypes.data if o.size else None,
                             None if w is None else w.ctypes.data, hidden, code, routing.handle(), comm._handle(),
                             None))
    return o if out is None else out
