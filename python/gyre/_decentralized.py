"""Low-precision decentralized SGD (gyreDecentralized_t) and asynchronous model
averaging (gyreAverager_t): objects that hold a model's state across calls,
made by comm.decentralized() and comm.averager()."""

import contextlib
import ctypes
import threading
import warnings
import weakref

from ._device import is_device_array
from ._errors import Error, InvalidArgument, InvalidUsage, check
from ._lib import lib
from ._types import NAMES, address, as_array

FLOAT32 = NAMES.index("float32")


def host_model(model, what, dtype, writable):
    """(numpy view, gyreDataType_t) of a model in host memory. Both objects hand the
    library a bare pointer it reads (and the averager writes from a thread) as host
    float32s: a device array's pointer would be read as host memory."""
    if is_device_array(model):
        raise InvalidArgument(f"{what} is a device array, but decentralized averaging keeps its models in host "
                              f"memory: pass a numpy array (copy the model to and from the device)")
    return as_array(model, what, dtype, writable=writable)


class Decentralized:
    """Low-precision decentralized SGD over a ring (gyreDecentralized_t), made by
    comm.decentralized(model, codec): this rank's model as its neighbours know it and
    its replicas of theirs. Each step(model) takes the model after this rank's local
    update and replaces it, in place, with the mixed model as its neighbours now hold
    it; only the encoded change travels. Every rank steps together (each step swaps
    messages with both neighbours)."""

    def __init__(self, comm, handle, codec, count):
        self.comm, self.codec, self.count = comm, codec, count
        self.dtype = "float32"
        self._handle = handle
        self._lock = threading.Lock()  # a step and close() never overlap
        # Destroying only frees the replicas: safe after the communicator, and at exit.
        self._finalizer = weakref.finalize(self, lib.gyreDecentralizedDestroy, handle)

    def __repr__(self):
        state = "closed, " if self.closed else ""
        return f"<gyre.Decentralized {state}{self.codec.name.lower()}, {self.count} x float32>"

    @property
    def closed(self):
        return not self._finalizer.alive

    def step(self, model, *, dtype=None):
        """Mixes model (this rank's model after its local update) with the neighbours',
        sends the encoded change, and writes the result into model in place: the
        previous step's model plus the decoded change, exactly what the neighbours'
        replicas now hold. model: float32 host memory of this object's count, usually
        the array it was made with. Returns model. Collective with the neighbours."""
        # The C call takes a bare pointer: its type and size are checked here.
        a, code = host_model(model, "model", dtype, writable=True)
        if code != FLOAT32:
            raise InvalidArgument(f"model has dtype {NAMES[code]}, but decentralized SGD keeps float32 models")
        if a.size != self.count:
            raise InvalidArgument(f"model has {a.size} elements, but this decentralized object was made "
                                  f"for a model of {self.count}")
        with self._lock:
            if self.closed:
                raise InvalidUsage("this decentralized object is closed")
            self.comm._handle()  # its communicator must still be open (InvalidUsage if not)
            check(lib.gyreDecentralizedStep(self._handle, address(a)))
        return model

    def close(self):
        """Frees it (local: no message). Also done when it is collected; closing twice is
        harmless."""
        with self._lock:
            if self._finalizer.detach() is not None:
                check(lib.gyreDecentralizedDestroy(self._handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _abandoned(handle, keep):
    """An averager collected (or left at exit) without stop(). Stopping is not safe
    here: it would block this thread on a round with the other ranks, and it ends
    every rank's averaging at once, so a collection on one rank would silently stop
    the others' too. Instead the background thread goes on, and so must the memory
    it writes into: the model is kept alive for good (a reference never given back,
    so not even the interpreter's shutdown frees it). It ends when another rank
    stops its averager (all stop on the same round), or with the process."""
    for obj in keep:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    warnings.warn(f"a gyre.Averager (handle {handle:#x}) was dropped or left at exit without stop(): its "
                  f"background thread goes on averaging a model nobody reads, which is kept alive for good, until "
                  f"another rank stops its averager; call stop() (or use `with`) on every rank", RuntimeWarning)


class Averager:
    """Asynchronous model averaging (gyreAverager_t), made by comm.averager(model): a
    background thread keeps averaging model with every rank's while this thread
    computes. Touch the model only inside ``with avg.locked():``, and update it in
    place (``model -= lr * grad``): the library holds the array's address, so the
    array must stay alive (this object keeps a reference) and never be reallocated
    (``model = model - lr * grad`` makes a new array the averager never sees).

    stop() ends it and returns how many rounds ran; it must be called on every rank
    (``with`` does it at the end of the block, close() too). An averager collected
    without stop() warns and keeps running (see _abandoned)."""

    def __init__(self, comm, handle, model, array, count):
        self.comm, self.count = comm, count
        self.dtype = "float32"
        self.model = model  # the object given; the C side writes into its memory
        self._array = array  # the view whose address the library holds
        self._handle = handle
        self._rounds = None
        self._mutex = threading.Lock()  # held across a locked() block, and by stop()
        self._holder = None  # the thread inside locked()
        self._finalizer = weakref.finalize(self, _abandoned, handle, (model, array))

    def __repr__(self):
        if self._rounds is None:
            state = "running"
        else:
            state = f"stopped after {self._rounds} round{'s' if self._rounds != 1 else ''}"
        return f"<gyre.Averager {state}, {self.count} x float32>"

    @property
    def stopped(self):
        return self._rounds is not None

    @property
    def rounds(self):
        """How many rounds ran: None until stop()."""
        return self._rounds

    @contextlib.contextmanager
    def locked(self):
        """``with avg.locked() as model:`` holds the model's lock for the block (yielding
        the model), the only place the model may be read or written while the averager
        runs. The background thread holds it only for its two copies a round. Not
        re-entrant; a block on another thread waits for this one."""
        me = threading.get_ident()
        if self._holder == me:
            raise InvalidUsage("avg.locked() inside avg.locked() on the same thread (the lock is not re-entrant)")
        with self._mutex:
            if self.stopped:
                raise InvalidUsage("this averager is stopped: the model is the caller's alone, without a lock")
            check(lib.gyreAveragerLock(self._handle))  # a failure in the background comes out here
            self._holder = me
            try:
                yield self.model
            finally:
                self._holder = None
                check(lib.gyreAveragerUnlock(self._handle))

    def stop(self):
        """Ends the averaging and returns how many rounds ran. Every rank must call it;
        the ranks finish together, on the first round that sees any rank's stop, which
        still averages: ranks that made their last update before (a barrier, then
        stop) leave with the same bits. Raises what failed in the background (a dead
        peer, the timeout), once; later calls return the rounds again."""
        if self._holder == threading.get_ident():
            raise InvalidUsage("avg.stop() inside avg.locked(): the last round needs the lock; leave the block first")
        with self._mutex:  # waits for a locked() block on another thread
            if self._rounds is not None:
                return self._rounds
            self._finalizer.detach()
            rounds = ctypes.c_uint64(0)
            rc = lib.gyreAveragerStop(self._handle, ctypes.byref(rounds))  # frees it, failed or not
            self._handle, self._rounds = None, rounds.value
            check(rc)
            return self._rounds

    def close(self):
        """stop(), without its result."""
        self.stop()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.stop()
        except Error as e:
            if exc is None:
                raise
            exc.add_note(f"gyre.Averager.stop() also failed: {e}")
        return False
