"""Communicators, requests and groups over the C ABI."""

import ctypes
import threading
import weakref

from . import _calls, _moe, _sequence
from ._decentralized import Averager, Decentralized, host_model
from ._device import CallBuffers, stream_handle
from ._errors import Error, InvalidArgument, InvalidUsage, check, error_for
from ._lib import (COMPRESSOR_ERROR_FEEDBACK, CONFIG_MAGIC, CONFIG_UNDEF_INT, CONFIG_VERSION, SPLIT_NOCOLOR,
                   JOIN_HANDLE_BYTES, UNIQUE_ID_BYTES, Config, JoinHandle, UniqueId, lib)
from ._types import (NAMES, SIZE_MAX, Codec, Op, address, as_array, c_int, codec_code, integer, resolve_dtype,
                     scalar_bytes)


def _config(timeout_ms=None, transport=None, algo=None, name=None, tuner_online=None):
    """A gyreConfig_t for the settings given (None: environment or default), or None."""
    if timeout_ms is None and transport is None and algo is None and name is None and tuner_online is None:
        return None
    cfg = Config()
    cfg.size = ctypes.sizeof(Config)
    cfg.magic = CONFIG_MAGIC
    cfg.version = CONFIG_VERSION
    if timeout_ms is not None:
        timeout_ms = c_int(timeout_ms, "timeout_ms")
        if timeout_ms < 0:
            raise InvalidArgument(f"timeout_ms {timeout_ms} must be >= 0 (0: no timeout)")
    cfg.timeoutMs = CONFIG_UNDEF_INT if timeout_ms is None else timeout_ms
    # The struct only points at these bytes; the library copies them while
    # the call runs, and the struct is used for that one call.
    cfg.transport = transport.encode() if transport is not None else None
    cfg.algo = algo.encode() if algo is not None else None
    cfg.commName = name.encode() if name is not None else None
    cfg.blocking = CONFIG_UNDEF_INT
    cfg.tunerOnline = CONFIG_UNDEF_INT if tuner_online is None else int(bool(tuner_online))
    return cfg


def _ref(cfg):
    return ctypes.byref(cfg) if cfg is not None else None


# Per-thread group state, as gyre's own groups are per thread: the depth of
# gyre.group() blocks and the buffers the pending calls use.
_group = threading.local()


def _group_keep():
    return getattr(_group, "keep", None)


class group:
    """``with gyre.group():`` collects the calls made inside and launches them
    together when the outermost block ends (gyreGroupStart/gyreGroupEnd).

    Results of calls made inside are written only when the block ends; the
    block keeps every buffer they use alive until then.
    """

    def __enter__(self):
        check(lib.gyreGroupStart())
        if getattr(_group, "depth", 0) == 0:
            _group.keep = []
        _group.depth = getattr(_group, "depth", 0) + 1
        return self

    def __exit__(self, exc_type, exc, tb):
        _group.depth -= 1
        try:
            check(lib.gyreGroupEnd())
        except Error as e:
            if exc is None:
                raise
            # The body's own exception is the cause; keep this one as a note.
            exc.add_note(f"gyre.group() end also failed: {e}")
        finally:
            if _group.depth == 0:
                _group.keep = None
        return False


class _State:
    """A communicator's handle and its unfinished requests. Requests point
    here, not at the Comm, so dropping a Comm closes it even while requests
    are outstanding (closing finishes them first)."""

    def __init__(self, handle):
        self.handle = handle
        self.pending = set()
        self.lock = threading.Lock()

    def finish_pending(self):
        with self.lock:
            pending = list(self.pending)
        for req in pending:
            req._finish(raise_error=False)

    def close(self, abort=False):
        if self.handle is None:
            return
        if not abort:
            self.finish_pending()
        handle, self.handle = self.handle, None
        check((lib.gyreCommAbort if abort else lib.gyreCommDestroy)(handle))
        if abort:
            self.finish_pending()


class Request:
    """An operation started by a comm.i*() call.

    wait() returns what the blocking call would have returned; test() says
    whether it has finished. The request keeps the operation's buffers alive
    until it has finished, even if it is dropped without a wait (its
    communicator then finishes it when closed).
    """

    def __init__(self, state, handle, call):
        self._state = state
        self._handle = handle
        self._keep = call.keep
        self._result = call.result
        self._error = None
        self._lock = threading.Lock()
        with state.lock:
            state.pending.add(self)

    def _done(self, error):
        self._handle = None
        self._keep = None
        self._error = error
        with self._state.lock:
            self._state.pending.discard(self)

    def _finish(self, raise_error=True):
        with self._lock:
            if self._handle is not None:
                rc = lib.gyreWait(self._handle)
                self._done(error_for(rc) if rc != 0 else None)
        if self._error is not None and raise_error:
            raise self._error
        return self._result

    def wait(self):
        """Blocks until the operation has finished; returns its result or raises its error."""
        return self._finish()

    def test(self):
        """True once the operation has finished (raising its error if it failed)."""
        with self._lock:
            if self._handle is not None:
                done = ctypes.c_int(0)
                rc = lib.gyreTest(self._handle, ctypes.byref(done))
                if rc != 0:
                    self._done(error_for(rc))
                elif done.value:
                    self._done(None)
        if self._error is not None:
            raise self._error
        return self._handle is None

    @property
    def done(self):
        return self._handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._finish(raise_error=exc[0] is None)
        return False


class Comm:
    """A gyre communicator: ``rank``, ``size``, every collective, split, close.

    Arrays are numpy arrays or any object with the buffer protocol,
    C-contiguous; counts are their element counts. Operations whose result
    has the input's size (allreduce, broadcast, reduce, alltoall) work in
    place unless ``out=`` is given; the others allocate their result unless
    ``out=`` is given. ``dtype=`` reads a raw buffer (bytearray, array.array)
    as that type, and is how a uint16 array of bfloat16 bits is passed.
    """

    def __init__(self, handle):
        self._state = _State(handle)
        rank, size = ctypes.c_int(), ctypes.c_int()
        check(lib.gyreCommUserRank(handle, ctypes.byref(rank)))
        check(lib.gyreCommCount(handle, ctypes.byref(size)))
        self.rank, self.size = rank.value, size.value
        self._finalizer = weakref.finalize(self, _State.close, self._state)

    def __repr__(self):
        state = "closed" if self.closed else f"rank {self.rank} of {self.size}"
        return f"<gyre.Comm {state}>"

    @property
    def closed(self):
        return self._state.handle is None

    def _handle(self):
        h = self._state.handle
        if h is None:
            raise InvalidUsage("this communicator is closed")
        return h

    def close(self):
        """Finishes outstanding requests and frees the communicator (local: no peer waits)."""
        self._finalizer.detach()
        self._state.close()

    def abort(self):
        """Ends any call blocked on this communicator with an error, tells the peers, and frees it."""
        self._finalizer.detach()
        self._state.close(abort=True)

    def revoke(self):
        """Stops every operation of this communicator on this rank now, from any thread,
        without waiting for the peers (gyreCommRevoke): a blocked call raises InvalidUsage
        saying it was revoked, so does every later call, and the peers' calls fail naming
        this rank. The communicator stays open (async_error() is None) until close()."""
        check(lib.gyreCommRevoke(self._handle(), 0))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def async_error(self):
        """None while healthy; otherwise the Error that broke the communicator."""
        result = ctypes.c_int()
        check(lib.gyreCommGetAsyncError(self._handle(), ctypes.byref(result)))
        if result.value == 0:
            return None
        return error_for(result.value, lib.gyreGetErrorString(result.value).decode())

    # ---- running a prepared call ----

    def _call(self, build, *args, stream=None, nonblocking=False):
        """Builds the call from its arguments (noting the device arrays among them) and runs it:
        on a CUDA stream where it has device arrays or a stream was given, else as a host call."""
        with CallBuffers(stream_handle(stream)) as met:
            call = build(*args)
        c_stream = met.call_stream()
        if nonblocking and met.buffers:
            raise InvalidArgument("a nonblocking call takes host memory; a call on device arrays is already "
                                  "asynchronous on its CUDA stream: use the blocking method (with stream=)")
        return self._run(call, nonblocking, c_stream)

    def _run(self, call, nonblocking=False, stream=None):
        handle = self._handle()
        args = list(call.args)
        premul_op = None
        if call.premul is not None:
            pos, op, np_dtype, code = call.premul
            scalar = scalar_bytes(op.scalar, np_dtype, code)
            made = ctypes.c_int()
            check(lib.gyreRedOpCreatePreMulSum(ctypes.byref(made), scalar.ctypes.data, code, 1, handle))
            premul_op = args[pos] = made.value
        try:
            keep = _group_keep()
            if not nonblocking:
                check(getattr(lib, call.blocking)(*args, handle, stream))
                if keep is not None:  # inside a group the call has only been collected
                    keep.append(call.keep)
                return call.result
            req = ctypes.c_void_p()
            check(getattr(lib, call.nonblocking)(*args, handle, ctypes.byref(req)))
            return Request(self._state, req, call)
        finally:
            if premul_op is not None:
                # The call copied the scalar when it was made (gyreScalarHostImmediate).
                check(lib.gyreRedOpDestroy(premul_op, handle))

    # ---- collectives (blocking, then nonblocking) ----

    def allreduce(self, x, op=Op.SUM, *, out=None, dtype=None, stream=None, codec=None):
        """out (default: x, in place) = op over all ranks of x. op: "sum", "prod", "max", "min",
        "avg", a gyre.Op, or gyre.PreMulSum(scalar). codec ("fp16", "bf16", "int8", "onebit",
        "none" or a gyre.Codec): the messages are compressed (float types, sum and avg only)."""
        return self._call(_calls.allreduce, x, op, out, dtype, codec, stream=stream)

    def broadcast(self, x, root=0, *, out=None, dtype=None, stream=None):
        """out (default: x, in place) = root's x on every rank. With out, x may be None off the root."""
        return self._call(_calls.broadcast, x, root, out, dtype, stream=stream)

    def reduce(self, x, op=Op.SUM, root=0, *, out=None, dtype=None, stream=None):
        """On the root, out (default: x) = op over all ranks of x; returns None elsewhere."""
        return self._call(_calls.reduce, self, x, op, root, out, dtype, stream=stream)

    def allgather(self, x, *, out=None, dtype=None, stream=None, codec=None):
        """Every rank's x in rank order: out of shape (size, *x.shape) unless given. In place:
        pass x = out[rank]. codec: as allreduce's."""
        return self._call(_calls.allgather, self, x, out, dtype, codec, stream=stream)

    def reducescatter(self, x, op=Op.SUM, *, out=None, dtype=None, stream=None, codec=None):
        """Block number rank (x split into size blocks along its first axis) of op over all ranks'
        x. In place: pass out = this rank's block of x. codec: as allreduce's."""
        return self._call(_calls.reducescatter, self, x, op, out, dtype, codec, stream=stream)

    def alltoall(self, x, *, out=None, dtype=None, stream=None):
        """Block j of out (default: x, in place) = block rank of rank j's x; size equal blocks."""
        return self._call(_calls.alltoall, self, x, out, dtype, stream=stream)

    def alltoallv(self, x, sendcounts, recvcounts, *, sdispls=None, rdispls=None, out=None, dtype=None, stream=None):
        """sendcounts[j] elements from x at sdispls[j] go to rank j, which receives them at
        rdispls[rank]. Displacements default to the running sums of the counts."""
        return self._call(_calls.alltoallv, self, x, sendcounts, recvcounts, sdispls, rdispls, out, dtype,
                          stream=stream)

    def gather(self, x, root=0, *, out=None, dtype=None, stream=None):
        """On the root, every rank's x in rank order (shape (size, *x.shape) unless out is
        given); None elsewhere."""
        return self._call(_calls.gather, self, x, root, out, dtype, stream=stream)

    def scatter(self, x, root=0, *, out=None, dtype=None, stream=None):
        """Block number rank of the root's x (split along its first axis). Off the root, x
        gives only the shape and type when out is not given, and may be None when it is."""
        return self._call(_calls.scatter, self, x, root, out, dtype, stream=stream)

    def peer_average(self, x, peers, step, *, out=None, dtype=None, stream=None):
        """out (default: x, in place) = the average of x over this rank and its peers at this step,
        added in rank order (decentralized SGD). peers: "shift_one", "ring", "random" or a
        gyre.Peers; which peers is a function of peers, step and the rank count, so every rank
        must pass the same peers and step (usually the training step)."""
        return self._call(_calls.peer_average, x, peers, step, out, dtype, stream=stream)

    _ESTIMATE_CALLS = ("allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall")

    def stats(self):
        """What this communicator did on this rank so far (gyreCommGetStats): a dict of
        calls, failed_calls, bytes (each call's larger of input and output), seconds inside
        calls, sent_to_peer (bytes per rank) and transports (per rank: "shm", "tcp", ...,
        "" for itself and peers not connected yet)."""
        from ._lib import CommStats
        s = CommStats()
        sent = (ctypes.c_uint64 * self.size)()
        check(lib.gyreCommGetStats(self._handle(), ctypes.byref(s), sent))
        names = []
        for p in range(self.size):
            buf = ctypes.create_string_buffer(64)
            check(lib.gyreCommPeerTransport(self._handle(), p, buf, 64))
            names.append(buf.value.decode())
        return {"calls": s.calls, "failed_calls": s.failedCalls, "bytes": s.bytes,
                "seconds": s.seconds, "sent_to_peer": list(sent), "transports": names}

    def estimate(self, call, count, dtype="float32", *, nranks=None):
        """Microseconds one call would take by the tuner's cost model (gyreEstimate), with the
        algorithm it would choose; nothing is sent. call: "allreduce", "broadcast", "reduce",
        "allgather", "reducescatter" or "alltoall"; count: elements as that method's C call
        takes them (a block for alltoall, sendcount for allgather, recvcount for
        reducescatter). nranks: a group of that many ranks placed as this communicator's
        (one that need not exist yet); None for this communicator."""
        if call not in self._ESTIMATE_CALLS:
            raise InvalidArgument(f"call {call!r} is not one of {', '.join(self._ESTIMATE_CALLS)}")
        _, code = resolve_dtype(dtype)
        count = integer(count, "count", 0, SIZE_MAX, "size_t")
        group = 0 if nranks is None else c_int(nranks, "nranks")
        us = ctypes.c_double()
        check(lib.gyreEstimate(self._ESTIMATE_CALLS.index(call), count, code, group, self._handle(), ctypes.byref(us)))
        return us.value

    # ---- sequence parallelism (DeepSpeed-Ulysses; docs/sequence-parallel.md) ----

    def seq_heads(self, heads, *, kv_heads=None, rank=None):
        """The heads `rank` (default: this one) holds after seq_to_heads: a named tuple
        (q_first, q_count, kv_first, kv_count). Query heads are dealt out as evenly as
        possible (the first heads % size ranks take one more); key/value heads follow the
        query heads that use them (several ranks may hold one)."""
        layout = _sequence.Layout(heads, kv_heads, "q")
        return layout.share(self.size, self.rank if rank is None else c_int(rank, "rank"))

    def seq_to_heads(self, x, heads, *, kv_heads=None, parts="q", tokens=None, head_dim=None, out=None,
                     dtype=None, stream=None):
        """This rank's tokens of every head, x of shape [tokens, width, head_dim] (width: heads
        for q, kv_heads each for k and v, in the order q, k, v), to every token of this rank's
        heads: out of shape [seq_len, share, head_dim], the tokens in rank order. parts: "q",
        "k", "v", "kv", "qkv" ... (what each token holds); tokens: every rank's token count
        (None: all hold as many as x). head_dim defaults to x's last axis."""
        return self._call(_sequence.exchange, self, True, x, heads, kv_heads, parts, tokens, head_dim, out, dtype,
                          stream=stream)

    def heads_to_seq(self, x, heads, *, kv_heads=None, parts="q", tokens=None, head_dim=None, out=None,
                     dtype=None, stream=None):
        """The reverse of seq_to_heads: x [seq_len, share, head_dim] to out [tokens, width,
        head_dim]. A key/value head several ranks hold comes back as the sum of their copies,
        added in rank order."""
        return self._call(_sequence.exchange, self, False, x, heads, kv_heads, parts, tokens, head_dim, out, dtype,
                          stream=stream)

    def iseq_to_heads(self, x, heads, *, kv_heads=None, parts="q", tokens=None, head_dim=None, out=None,
                      dtype=None):
        return self._call(_sequence.exchange, self, True, x, heads, kv_heads, parts, tokens, head_dim, out, dtype,
                          nonblocking=True)

    def iheads_to_seq(self, x, heads, *, kv_heads=None, parts="q", tokens=None, head_dim=None, out=None,
                      dtype=None):
        return self._call(_sequence.exchange, self, False, x, heads, kv_heads, parts, tokens, head_dim, out, dtype,
                          nonblocking=True)

    # ---- mixture of experts (docs/moe.md) ----

    def moe_routing(self, choices, experts, *, expert_rank=None, capacity=0):
        """A routing of this rank's tokens: choices [tokens, k] expert ids (-1: none) among
        `experts`; expert_rank[e] is expert e's rank (None: experts / size per rank, in order);
        capacity: the most slots an expert takes from one rank (0: no limit; slot 0 first)."""
        return _moe.MoeRouting(self, choices, experts, expert_rank, capacity)

    def moe_dispatch(self, x, routing, *, out=None, rows=None, per_slot=False, dtype=None):
        """Each kept slot's token row to its expert's rank: returns the rows this rank's experts
        get, [rows, hidden], by local expert, then source rank, each source's slot 0 first."""
        return _moe.dispatch(self, x, routing, out, rows, per_slot, dtype)

    def moe_combine(self, y, routing, *, weights=None, out=None, dtype=None):
        """The experts' rows (dispatch order) back to their tokens: weighted sum [tokens, hidden]
        with weights, else each slot's row [tokens, k, hidden]."""
        return _moe.combine(self, y, routing, weights, out, dtype)

    def send(self, x, peer, *, dtype=None, stream=None):
        """Blocks until x has been handed over to peer (which calls recv)."""
        self._call(_calls.send, x, peer, dtype, stream=stream)

    def recv(self, out, peer, *, dtype=None, stream=None):
        """Fills out from peer's send; returns out."""
        return self._call(_calls.recv, out, peer, dtype, stream=stream)

    def barrier(self, *, stream=None):
        self._call(_calls.barrier, stream=stream)

    def iallreduce(self, x, op=Op.SUM, *, out=None, dtype=None):
        return self._call(_calls.allreduce, x, op, out, dtype, nonblocking=True)

    def ibroadcast(self, x, root=0, *, out=None, dtype=None):
        return self._call(_calls.broadcast, x, root, out, dtype, nonblocking=True)

    def ireduce(self, x, op=Op.SUM, root=0, *, out=None, dtype=None):
        return self._call(_calls.reduce, self, x, op, root, out, dtype, nonblocking=True)

    def iallgather(self, x, *, out=None, dtype=None):
        return self._call(_calls.allgather, self, x, out, dtype, nonblocking=True)

    def ireducescatter(self, x, op=Op.SUM, *, out=None, dtype=None):
        return self._call(_calls.reducescatter, self, x, op, out, dtype, nonblocking=True)

    def ialltoall(self, x, *, out=None, dtype=None):
        return self._call(_calls.alltoall, self, x, out, dtype, nonblocking=True)

    def ialltoallv(self, x, sendcounts, recvcounts, *, sdispls=None, rdispls=None, out=None, dtype=None):
        return self._call(_calls.alltoallv, self, x, sendcounts, recvcounts, sdispls, rdispls, out, dtype,
                          nonblocking=True)

    def isend(self, x, peer, *, dtype=None):
        return self._call(_calls.send, x, peer, dtype, nonblocking=True)

    def irecv(self, out, peer, *, dtype=None):
        return self._call(_calls.recv, out, peer, dtype, nonblocking=True)

    def ibarrier(self):
        return self._call(_calls.barrier, nonblocking=True)

    # ---- compression ----

    def compressor(self, codec, like=None, *, count=None, dtype=None, error_feedback=True):
        """A Compressor for one tensor on this communicator: like= an array of it (its size and
        type), or count= and dtype=. error_feedback: what encoding loses is added to the next
        call's input (onebit needs it)."""
        if (like is None) == (count is None):
            raise InvalidArgument("compressor needs like= (an array) or count= and dtype=, not both")
        if like is not None:
            arr, code = as_array(like, "like", dtype)
            count = arr.size
        else:
            if dtype is None:
                raise InvalidArgument("compressor with count= needs dtype= too")
            count = integer(count, "count", 0, SIZE_MAX, "a size_t")
            code = resolve_dtype(dtype)[1]
        c = codec_code(codec)
        made = ctypes.c_void_p()
        flags = COMPRESSOR_ERROR_FEEDBACK if error_feedback else 0
        check(lib.gyreCompressorCreate(ctypes.byref(made), self._handle(), c, count, code, flags))
        return Compressor(self, made.value, Codec(c), count, NAMES[code], bool(error_feedback))

    # ---- decentralized averaging with state ----

    def decentralized(self, model, codec="int8", *, dtype=None):
        """A gyre.Decentralized: low-precision decentralized SGD over the ring of ranks for a
        float32 model in host memory (the library refuses other types, and codec "none").
        model is this rank's initial model (copied; the neighbours swap theirs once, in full
        precision). Collective: every rank makes it, with a model of the same size."""
        arr, code = host_model(model, "model", dtype, writable=False)
        c = codec_code(codec)
        made = ctypes.c_void_p()
        check(lib.gyreDecentralizedCreate(ctypes.byref(made), self._handle(), address(arr), arr.size, code, c))
        return Decentralized(self, made.value, Codec(c), arr.size)

    def averager(self, model, *, dtype=None, interval_ms=0):
        """A gyre.Averager: a background thread keeps averaging model (float32, host memory,
        updated in place only inside avg.locked()) with every rank's until stop(), which
        every rank must call. It keeps model alive; model must not be reallocated.
        interval_ms: at least this long from one round's start to the next's (0: back to
        back). Collective: every rank starts one (it splits a private communicator from
        this one, so calls on this one go on beside it)."""
        if not isinstance(interval_ms, int) or isinstance(interval_ms, bool) or not 0 <= interval_ms < 2**32:
            raise InvalidArgument(f"interval_ms must be an int in [0, 2**32), not {interval_ms!r}")
        arr, code = host_model(model, "model", dtype, writable=True)
        made = ctypes.c_void_p()
        check(lib.gyreAveragerStart(ctypes.byref(made), self._handle(), address(arr), arr.size, code, interval_ms))
        return Averager(self, made.value, model, arr, arr.size)

    # ---- split ----

    def split(self, color, key=None, *, timeout_ms=None, transport=None, algo=None, name=None, tuner_online=None):
        """Ranks giving the same color form a new communicator, ordered by key (default: this
        rank), then by rank. color None: this rank joins none and gets None. Collective."""
        c = SPLIT_NOCOLOR if color is None else c_int(color, "color")
        k = self.rank if key is None else c_int(key, "key")
        cfg = _config(timeout_ms, transport, algo, name, tuner_online)
        child = ctypes.c_void_p()
        check(lib.gyreCommSplit(self._handle(), c, k, ctypes.byref(child), _ref(cfg)))
        return Comm(child) if child.value else None

    def shrink(self, exclude=(), *, after_failure=False, timeout_ms=None, transport=None, algo=None,
               name=None, tuner_online=None):
        """A communicator of the ranks not in exclude, renumbered in order, without a new
        rendezvous (gyreCommShrink). Every rank not excluded calls it with the same list.
        after_failure: revoke this communicator first and also leave out the ranks found
        dead, the survivors agreeing on who they are. This communicator stays until close()."""
        ranks = [c_int(r, "exclude") for r in exclude]
        arr = (ctypes.c_int * max(len(ranks), 1))(*ranks)
        cfg = _config(timeout_ms, transport, algo, name, tuner_online)
        child = ctypes.c_void_p()
        check(lib.gyreCommShrink(self._handle(), arr if ranks else None, len(ranks), ctypes.byref(child),
                                 _ref(cfg), 1 if after_failure else 0))
        return Comm(child)

    def join_handle(self):
        """The bytes (256) that let new processes join this communicator's ranks in a larger
        one (gyreCommGetJoinHandle); local to this rank. Give them to the new processes
        (gyre.join) and to this rank's grow(); good for one grow."""
        h = JoinHandle()
        check(lib.gyreCommGetJoinHandle(self._handle(), ctypes.byref(h)))
        return bytes(h)

    def grow(self, size, handle=None, *, timeout_ms=None, transport=None, algo=None, name=None,
             tuner_online=None):
        """A communicator of size ranks: this one's, keeping their numbers, and the new
        processes that call gyre.join (gyreCommGrow). Collective over this communicator;
        the rank that made the handle passes it, the others may pass None."""
        h = _join_handle(handle) if handle is not None else None
        cfg = _config(timeout_ms, transport, algo, name, tuner_online)
        child = ctypes.c_void_p()
        check(lib.gyreCommGrow(self._handle(), c_int(size, "size"), ctypes.byref(h) if h else None, -1,
                               ctypes.byref(child), _ref(cfg)))
        return Comm(child)


def _join_handle(raw):
    raw = bytes(raw)
    if len(raw) != JOIN_HANDLE_BYTES:
        raise InvalidArgument(f"the join handle has {len(raw)} bytes, not {JOIN_HANDLE_BYTES}")
    h = JoinHandle()
    ctypes.memmove(ctypes.byref(h), raw, JOIN_HANDLE_BYTES)
    return h


def join(size, handle, rank, *, timeout_ms=None, transport=None, algo=None, name=None, tuner_online=None):
    """A new process's side of Comm.grow: joins the running ranks as rank (from their count
    to size - 1) through the handle one of them made (gyreCommGrow with no communicator)."""
    h = _join_handle(handle)
    cfg = _config(timeout_ms, transport, algo, name, tuner_online)
    child = ctypes.c_void_p()
    check(lib.gyreCommGrow(None, c_int(size, "size"), ctypes.byref(h), c_int(rank, "rank"), ctypes.byref(child),
                           _ref(cfg)))
    return Comm(child)


class Compressor:
    """One tensor's codec and error feedback across calls (gyreCompressor_t), made by
    comm.compressor(). Its calls take the plain calls' arguments: allreduce of the
    tensor, reducescatter of the tensor, allgather of this rank's share into it.
    Not collective to make, but every rank makes the same calls."""

    def __init__(self, comm, handle, codec, count, dtype, error_feedback):
        self.comm, self.codec, self.count, self.dtype = comm, codec, count, dtype
        self.error_feedback = error_feedback
        self._handle = handle
        # Destroying only frees the residuals: safe after its communicator, and at exit.
        self._finalizer = weakref.finalize(self, lib.gyreCompressorDestroy, handle)

    def __repr__(self):
        state = "closed, " if self.closed else ""
        feedback = ", error feedback" if self.error_feedback else ""
        return f"<gyre.Compressor {state}{self.codec.name.lower()}, {self.count} x {self.dtype}{feedback}>"

    @property
    def closed(self):
        return not self._finalizer.alive

    def _c_handle(self):
        if self.closed:
            raise InvalidUsage("this compressor is closed")
        return self._handle

    def allreduce(self, x, op=Op.SUM, *, out=None, dtype=None, stream=None):
        """comm.allreduce(x, op, ...) compressed, x being the tensor (op: sum or avg)."""
        return self.comm._call(_calls.allreduce, x, op, out, dtype, self, stream=stream)

    def reducescatter(self, x, op=Op.SUM, *, out=None, dtype=None, stream=None):
        """comm.reducescatter(x, op, ...) compressed, x being the tensor."""
        return self.comm._call(_calls.reducescatter, self.comm, x, op, out, dtype, self, stream=stream)

    def allgather(self, x, *, out=None, dtype=None, stream=None):
        """comm.allgather(x, ...) compressed, x being this rank's share of the tensor."""
        return self.comm._call(_calls.allgather, self.comm, x, out, dtype, self, stream=stream)

    def reset(self):
        """Forgets what error feedback kept (a restarted model, say)."""
        check(lib.gyreCompressorReset(self._c_handle()))

    def close(self):
        """Frees it, once its calls have finished (on device arrays: their stream). Also done
        when it is collected; closing twice is harmless."""
        if self._finalizer.detach() is not None:
            check(lib.gyreCompressorDestroy(self._handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def init(*, timeout_ms=None, transport=None, algo=None, name=None, tuner_online=None):
    """A communicator from the launcher's environment (gyrerun, torchrun, mpirun, srun).

    timeout_ms, transport, algo, name and tuner_online override GYRE_TIMEOUT_MS,
    GYRE_TRANSPORT, GYRE_ALGO, the communicator's name in messages and
    GYRE_TUNER_ONLINE (True: the calls time the cost model's best candidates)."""
    cfg = _config(timeout_ms, transport, algo, name, tuner_online)
    handle = ctypes.c_void_p()
    check(lib.gyreCommInitFromEnv(ctypes.byref(handle), _ref(cfg)))
    return Comm(handle)


def get_unique_id():
    """The 128 bytes that identify one rendezvous; pass them to every rank's init_rank."""
    uid = UniqueId()
    check(lib.gyreGetUniqueId(ctypes.byref(uid)))
    return bytes(uid)  # uid.internal would stop at the first NUL


def init_rank(size, unique_id, rank, *, timeout_ms=None, transport=None, algo=None, name=None, tuner_online=None):
    """A communicator of size ranks from a get_unique_id() made once and shared out of band."""
    raw = bytes(unique_id)
    if len(raw) != UNIQUE_ID_BYTES:
        raise InvalidArgument(f"unique_id has {len(raw)} bytes, not {UNIQUE_ID_BYTES}")
    uid = UniqueId()
    ctypes.memmove(ctypes.byref(uid), raw, UNIQUE_ID_BYTES)
    cfg = _config(timeout_ms, transport, algo, name, tuner_online)
    handle = ctypes.c_void_p()
    size, rank = c_int(size, "size"), c_int(rank, "rank")
    check(lib.gyreCommInitRankConfig(ctypes.byref(handle), size, uid, rank, _ref(cfg)))
    return Comm(handle)


def version():
    """The loaded library's version as (major, minor, patch)."""
    v = ctypes.c_int()
    check(lib.gyreGetVersion(ctypes.byref(v)))
    return (v.value // 10000, v.value // 100 % 100, v.value % 100)

