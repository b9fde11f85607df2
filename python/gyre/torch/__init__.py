"""torch.distributed's backend "gyre" (docs/pytorch.md).

Importing this module registers the backend; a script written for gloo
switches by changing the backend's name::

    import torch.distributed as dist
    import gyre.torch  # noqa: F401 -- registers "gyre"

    dist.init_process_group("gyre")  # env:// (torchrun), tcp://, file://, or store=...

The group's unique id travels through torch's store, so no second
rendezvous address is needed. The process group is a C++ extension
(``_c10d.so``) built with gyre when libtorch is found; it is looked for in
``GYRE_TORCH_EXTENSION`` (a path, for a build tree) and then next to this
file.
"""

import atexit
import importlib.machinery
import importlib.util
import os

import torch.distributed as dist

from .. import _lib  # noqa: F401 -- loads libgyre first, so the extension binds to that copy

_NAME = "gyre.torch._c10d"


def _load_extension():
    env = os.environ.get("GYRE_TORCH_EXTENSION")
    path = env or os.path.join(os.path.dirname(os.path.abspath(__file__)), "_c10d.so")
    if not os.path.exists(path):
        where = f"GYRE_TORCH_EXTENSION={env}" if env else path
        raise ImportError(f"gyre.torch: the backend's extension module is not there ({where}); install the "
                          "gyre-torch package, or build gyre with libtorch-dev installed (the configure summary "
                          "says 'PyTorch backend: yes') and set GYRE_TORCH_EXTENSION to the built _c10d.so")
    loader = importlib.machinery.ExtensionFileLoader(_NAME, path)
    spec = importlib.util.spec_from_file_location(_NAME, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


_c10d = _load_extension()
ProcessGroupGyre = _c10d.ProcessGroupGyre
Compressor = _c10d.Compressor


def _create(options, pg_options=None):
    """The backend's creator (torch's extended API): one gyre communicator
    per torch group. A group of every rank of a gyre default group is split
    from its communicator (every rank calls this then); any other group
    joins through the group's store, since torch 1.13 calls the creator on
    the new group's members only and a split needs all the parent's."""
    timeout_ms = int(options.timeout.total_seconds() * 1000)
    name = f"torch group {options.group_id}"
    world = dist.distributed_c10d._get_default_group() if dist.is_initialized() else None
    ranks = list(options.global_ranks_in_group)
    if isinstance(world, ProcessGroupGyre) and ranks == list(range(world.size())):
        return ProcessGroupGyre.split(world, timeout_ms, name)
    return ProcessGroupGyre(options.store, options.group_rank, options.group_size, timeout_ms, name)


# At exit, while Python still runs: finish every group's queued calls (and
# their futures' Python callbacks) and stop the groups' threads.
atexit.register(_c10d._stop_all)

if "GYRE" not in dist.Backend._plugins:
    dist.Backend.register_backend("gyre", _create, extended_api=True)

from . import hooks  # noqa: E402

__all__ = ["Compressor", "ProcessGroupGyre", "hooks"]
